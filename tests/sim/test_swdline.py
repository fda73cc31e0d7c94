"""The simulator's SWD wire at the bit level (issue 43): packets, ACKs, parity, line reset,
the select and dormant sequences and multi-drop TARGETSEL, checked cycle by cycle."""

from piflash.sim.debug.dap import CS_STICKYORUN, CS_WDATAERR, MemAp, SwDp
from piflash.sim.debug.multidrop import SELECTION_ALERT, MultidropDp, MultidropWire
from piflash.sim.debug.swdline import (
    ACK_FAULT,
    ACK_OK,
    ACK_WAIT,
    JTAG_TO_SWD,
    SwdLine,
    parity,
    request_bits,
)
from piflash.sim.memory.bus import Bus, DeviceRegion, RegisterDevice

DPIDR = 0x2BA01477


class Ram(RegisterDevice):
    def __init__(self):
        self.words = {}

    def read32(self, offset):
        return self.words.get(offset, 0)

    def write32(self, offset, value):
        self.words[offset] = value


def make_dp():
    bus = Bus()
    bus.add(DeviceRegion(0x20000000, 0x1000, Ram()))
    return SwDp(DPIDR, {0: MemAp(0x24770011, bus, 0xE00FF000, 0x1000)})


class Host:
    """A host that clocks whole packets, as a probe does, and reads them back cycle by cycle."""

    def __init__(self, line):
        self.line = line

    def send(self, bits, n):
        return self.line.clock(bits, n)

    def line_reset(self):
        self.send((1 << 51) - 1, 51)
        self.send(0, 2)

    def read(self, ap, addr):
        req = request_bits(ap, True, addr)
        # request, turnaround, ack 3, then (on OK) data 33 and a turnaround: the host drives 1
        # where the target may, and stops after an ACK that is not OK, as a real host does.
        rx = self.send(req | (0b1111 << 8), 12)
        ack = (rx >> 9) & 7
        if ack != ACK_OK:
            self.send(0, 3)
            return ack, 0, 0
        rx = self.send((1 << 34) - 1, 34)
        self.send(0, 2)
        return ack, rx & 0xFFFFFFFF, (rx >> 32) & 1

    def write(self, ap, addr, value, bad_parity=False, blind=False):
        req = request_bits(ap, False, addr)
        p = parity(value) ^ int(bad_parity)
        # turnaround and ack phases: the host's 1s, overridden by the target
        rx = self.send(req | (0b1111 << 8), 12)
        ack = (rx >> 9) & 7
        if ack == ACK_OK or blind:  # blind: a batching host sends the data phase whatever the ACK
            self.send((value | (p << 32)) << 1, 34)
        self.send(0, 3)
        return ack


def test_request_bits_match_the_adiv5_examples():
    # DPIDR read: start 1, APnDP 0, RnW 1, A 00, parity 1, stop 0, park 1 = 0xA5 (ADIv5.2 B4.2.1).
    assert request_bits(False, True, 0x0) == 0xA5
    # AP DRW write (A = 0xC): 0x81 | ... = 0xBB; TARGETSEL write = 0x99 (the multidrop module's).
    assert request_bits(True, False, 0xC) == 0xBB
    assert request_bits(False, False, 0xC) == 0x99


def test_needs_a_line_reset_after_power_on_then_reads_dpidr():
    line = SwdLine(make_dp())
    host = Host(line)
    ack, _, _ = host.read(False, 0x0)
    assert ack == 0b111  # nobody drives: the host reads its own 1s through the resistor
    host.line_reset()
    ack, data, par = host.read(False, 0x0)
    assert (ack, data, par) == (ACK_OK, DPIDR, parity(DPIDR))


def test_bit_by_bit_equals_whole_packets():
    """A GPIO host clocks one cycle per call; the wire must answer the same."""
    line = SwdLine(make_dp())
    tx_reset = (1 << 51) - 1
    for i in range(51):
        line.clock((tx_reset >> i) & 1, 1)
    line.clock(0, 2)
    req = request_bits(False, True, 0)
    tx = req | (((1 << 38) - 1) << 8)
    rx = 0
    for i in range(46):
        rx |= line.clock((tx >> i) & 1, 1) << i
    assert (rx >> 9) & 7 == ACK_OK and (rx >> 12) & 0xFFFFFFFF == DPIDR


def test_wrong_request_parity_is_a_protocol_error_until_line_reset():
    line = SwdLine(make_dp())
    host = Host(line)
    host.line_reset()
    bad = request_bits(False, True, 0) ^ (1 << 5)
    rx = host.send(bad | (((1 << 38) - 1) << 8), 46)
    assert (rx >> 9) & 7 == 0b111 and line.protocol_errors == 1 and line.state == "lockout"
    assert host.read(False, 0)[0] == 0b111  # still locked out
    host.line_reset()
    assert host.read(False, 0)[0] == ACK_OK


def test_posted_ap_reads_and_writes():
    dp = make_dp()
    host = Host(SwdLine(dp))
    host.line_reset()
    assert host.write(False, 0x4, 0x50000000) == ACK_OK  # CDBGPWRUPREQ | CSYSPWRUPREQ
    assert host.write(True, 0x0, 0x23000052) == ACK_OK  # CSW: word, auto-increment
    assert host.write(True, 0x4, 0x20000000) == ACK_OK  # TAR
    for word in (0x11111111, 0x22222222):
        assert host.write(True, 0xC, word) == ACK_OK
    assert host.write(True, 0x4, 0x20000000) == ACK_OK
    ack, first, _ = host.read(True, 0xC)  # posted: carries the previous AP read (none yet)
    assert ack == ACK_OK
    ack, value, par = host.read(True, 0xC)
    assert (ack, value, par) == (ACK_OK, 0x11111111, parity(0x11111111))
    ack, value, _ = host.read(False, 0xC)  # RDBUFF: the last AP read
    assert (ack, value) == (ACK_OK, 0x22222222)


def test_write_data_parity_error_sets_wdataerr_and_faults_until_abort():
    dp = make_dp()
    host = Host(SwdLine(dp))
    host.line_reset()
    host.write(False, 0x4, 0x50000000)
    assert host.write(True, 0x4, 0x20000000, bad_parity=True) == ACK_OK  # the ACK comes first
    assert dp.ctrl_stat & CS_WDATAERR
    assert host.read(True, 0x0)[0] == ACK_FAULT
    assert host.read(False, 0x4)[0] == ACK_OK  # CTRL/STAT and DPIDR still answer
    assert host.write(False, 0x0, 1 << 3) == ACK_OK  # ABORT.WDERRCLR
    assert host.read(True, 0x0)[0] == ACK_OK


def test_ahb_error_faults_the_next_packet():
    dp = make_dp()
    host = Host(SwdLine(dp))
    host.line_reset()
    host.write(False, 0x4, 0x50000000)
    host.write(True, 0x0, 0x23000052)
    host.write(True, 0x4, 0x40000000)  # nothing mapped there
    assert host.read(True, 0xC)[0] == ACK_OK  # posted: the error shows on the next packet
    assert host.read(False, 0xC)[0] == ACK_FAULT
    assert host.write(False, 0x0, 1 << 2) == ACK_OK  # ABORT.STKERRCLR
    assert host.read(False, 0xC)[0] == ACK_OK


def test_wait_with_overrun_detection_keeps_the_data_phase_and_faults_after():
    dp = make_dp()
    line = SwdLine(dp)
    host = Host(line)
    host.line_reset()
    host.write(False, 0x4, 0x50000001)  # power-up and ORUNDETECT
    host.write(True, 0x0, 0x23000052)
    host.write(True, 0x4, 0x20000000)
    line.inject_wait(1)
    assert host.write(True, 0xC, 0xAAAA5555, blind=True) == ACK_WAIT
    assert dp.ctrl_stat & CS_STICKYORUN
    # The data phase was kept: the next packet is read in step, and answers FAULT.
    assert host.write(True, 0xC, 0xAAAA5555, blind=True) == ACK_FAULT
    assert host.write(False, 0x0, 1 << 4, blind=True) == ACK_OK  # ABORT.ORUNERRCLR
    assert host.write(True, 0xC, 0xAAAA5555) == ACK_OK  # the replay
    host.write(True, 0x4, 0x20000000)
    host.read(True, 0xC)
    assert host.read(False, 0xC)[1] == 0xAAAA5555


def test_wait_without_overrun_detection_has_no_data_phase():
    dp = make_dp()
    line = SwdLine(dp)
    host = Host(line)
    host.line_reset()
    host.write(False, 0x4, 0x50000000)
    line.inject_wait(1)
    req = request_bits(True, True, 0x0)
    rx = host.send(req | (0b1111 << 8), 13)  # request, turnaround, ack, turnaround
    assert (rx >> 9) & 7 == ACK_WAIT
    host.send(0, 4)
    assert host.read(True, 0x0)[0] == ACK_OK  # the wire is idle right after the WAIT


def test_jtag_to_swd_select_sequence():
    line = SwdLine(make_dp(), start="jtag")
    host = Host(line)
    host.line_reset()
    assert host.read(False, 0)[0] == 0b111  # JTAG: SWD packets go unanswered
    host.send((1 << 51) - 1, 51)
    host.send(JTAG_TO_SWD, 16)
    host.line_reset()
    assert host.read(False, 0) == (ACK_OK, DPIDR, parity(DPIDR))


def rp2040_wire():
    bus = Bus()
    bus.add(DeviceRegion(0x20000000, 0x1000, Ram()))
    aps = {0: MemAp(0x04770031, bus, 0xE00FF000, 0x400)}
    core0 = MultidropDp(0x0BC12477, 0x01002927, 0x0, aps)
    core1 = MultidropDp(0x0BC12477, 0x01002927, 0x1, {})
    return MultidropWire([core0, core1]), core0, core1


def targetsel(host, value, bad_parity=False):
    req = request_bits(False, False, 0xC)
    p = parity(value) ^ int(bad_parity)
    rx = host.send(req | (0b11111 << 8) | ((value | (p << 32)) << 13), 46)
    host.send(0, 2)
    return (rx >> 9) & 7


def test_dormant_wake_up_and_targetsel_select_one_dp():
    wire, core0, core1 = rp2040_wire()
    line = SwdLine(wire)
    host = Host(line)
    host.line_reset()
    assert host.read(False, 0)[0] == 0b111  # dormant: a line reset alone does nothing
    host.send(0xFF, 8)
    host.send(SELECTION_ALERT, 128)
    host.send(0x1A << 4, 12)  # four low cycles, then the SWD activation code
    host.line_reset()
    assert targetsel(host, core1.targetsel) == 0b111  # never acknowledged
    assert wire.selected is core1
    assert host.read(False, 0)[0] == ACK_OK
    host.line_reset()
    assert targetsel(host, core0.targetsel, bad_parity=True) == 0b111
    assert wire.selected is None
    assert host.read(False, 0)[0] == 0b111  # deselected: silent
    host.line_reset()
    targetsel(host, core0.targetsel)
    assert wire.selected is core0 and host.read(False, 0)[1] == 0x0BC12477


def test_swd_to_dormant_after_line_reset():
    wire, core0, _ = rp2040_wire()
    host = Host(SwdLine(wire, start="lockout"))
    host.line_reset()
    targetsel(host, core0.targetsel)
    assert host.read(False, 0)[0] == ACK_OK
    host.send((1 << 51) - 1, 51)
    host.send(0xE3BC, 16)
    host.line_reset()
    assert targetsel(host, core0.targetsel) == 0b111 and wire.selected is None


def test_gpio_host_that_drives_against_the_target_is_counted():
    line = SwdLine(make_dp())
    host = Host(line)
    host.line_reset()
    req = request_bits(False, True, 0)
    # The host keeps driving 0 through the ACK phase: contention on the OK bit.
    line.clock(req, 46, host_drives=(1 << 46) - 1)
    assert line.contention >= 1
    before = line.contention
    line.clock(0, 2)
    line.clock(req, 46, host_drives=0xFF)  # released after the request: no contention
    assert line.contention == before
