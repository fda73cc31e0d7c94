"""The probe firmware: CMSIS-DAP commands executed against a simulated board, with their time.

Command and response layouts follow the CMSIS-DAP specification (Arm CMSIS-DAP v2.1, "Commands"
and its reference firmware ``DAP.c``): DAP_Info, DAP_HostStatus, DAP_Connect, DAP_Disconnect,
DAP_TransferConfigure, DAP_Transfer (value match and match mask included), DAP_TransferBlock,
DAP_WriteABORT, DAP_Delay, DAP_ResetTarget, DAP_SWJ_Pins, DAP_SWJ_Clock, DAP_SWJ_Sequence,
DAP_SWD_Configure, DAP_SWD_Sequence and DAP_ExecuteCommands; anything else answers
``DAP_Invalid`` (0xFF), as the reference firmware does.

The SWD side drives the board through :class:`piflash.sim.probes.simprobe.SimProbe`, the same object that
loads, saves and fault-injects boards for the ``sim`` plugin, used here only as the wire to the
target (pyOCD never sees it). Its errors become SWD acks: ``TransferFaultError`` is FAULT,
``TransferError`` is no ACK (0b111), and ``ProbeDisconnected`` (fault ``disconnect_after``)
unplugs the USB device (:class:`Unplugged`).

Acks that come from time: while the target's flash is busy (a flash operation still running in
virtual time), an AHB-AP data access to the flash answers WAIT, and the firmware retries up to
DAP_TransferConfigure's ``wait_retry`` times, as the reference firmware does; if the flash is
still busy the transfer ends with WAIT (pyOCD: ``TransferTimeoutError``). While the flash
algorithm's time has not elapsed, DHCSR reads show the core running.
"""

from __future__ import annotations

import struct
from typing import Optional, Tuple

from pyocd.core import exceptions

from piflash.sim.probes.simprobe import SimProbe
from piflash.sim.probes.usb.presets import ProbePreset
from piflash.sim.probes.usb.timing import (
    CYCLES_PER_HALFWORD,
    TARGET_TIMING,
    VirtualClock,
    swd_transfer_bits,
    swd_wait_bits,
)
from piflash.sim.store import SimStore, UnknownBoardError

__all__ = ["DapFirmware", "Unplugged", "COMMAND_NAMES"]

ACK_OK, ACK_WAIT, ACK_FAULT, ACK_NONE = 1, 2, 4, 7
MISMATCH = 0x10
DHCSR_ADDR = 0xE000EDF0
S_HALT = 1 << 17
C_HALT = 1 << 1
AP_DRW = 0x0C
#: Unicorn budgets (instructions, wall seconds) of a resume and of each DHCSR poll while the core
#: runs, under the virtual clock: bounded by instruction count only (the wall-clock bound is
#: never reached), so the number of polls a run needs does not depend on the machine's speed.
#: 10 M instructions finish any of pyOCD's flash algorithms and its CRC analyzer over 256 KiB
#: in one resume; a free-running application after reset advances 1 M per poll.
RESUME_BUDGET = (10_000_000, 600.0)
POLL_BUDGET = (1_000_000, 600.0)

COMMAND_NAMES = {
    0x00: "DAP_Info",
    0x01: "DAP_HostStatus",
    0x02: "DAP_Connect",
    0x03: "DAP_Disconnect",
    0x04: "DAP_TransferConfigure",
    0x05: "DAP_Transfer",
    0x06: "DAP_TransferBlock",
    0x07: "DAP_TransferAbort",
    0x08: "DAP_WriteABORT",
    0x09: "DAP_Delay",
    0x0A: "DAP_ResetTarget",
    0x10: "DAP_SWJ_Pins",
    0x11: "DAP_SWJ_Clock",
    0x12: "DAP_SWJ_Sequence",
    0x13: "DAP_SWD_Configure",
    0x1D: "DAP_SWD_Sequence",
    0x7F: "DAP_ExecuteCommands",
}


class Unplugged(Exception):
    """The probe vanished (the board's ``disconnect_after`` fault fired, or it was ejected)."""


class DapFirmware:
    """One probe's CMSIS-DAP command processor, wired to simulated board ``board_name``.

    :param preset: The probe model.
    :param board_name: Board in ``store`` behind the probe.
    :param store: The board store.
    :param serial: USB serial number (DAP_Info 0x03).
    :param clock: The device's virtual clock (charged with probe, SWD and target time).

    :meth:`open` / :meth:`close` follow the host claiming and releasing the USB interface;
    :meth:`execute` runs one DAP packet that arrived at virtual time ``t`` and returns the
    response and the time it is ready.
    """

    def __init__(self, preset: ProbePreset, board_name: str, store: SimStore, serial: str, clock: VirtualClock) -> None:
        self.preset = preset
        self.board_name = board_name
        self.store = store
        self.serial = serial
        self.clock = clock
        self.probe: Optional[SimProbe] = None
        self.swd_hz = preset.swclk_hz(1_000_000)  # DAP_DEFAULT_SWJ_CLOCK of the reference firmware
        #: The last clock a host asked for (DAP_SWJ_Clock, Hz), or None: what a run's tool
        #: requested, before the probe rounds it (``swd_hz``); benchmarks/real_probe.py gives
        #: it to pyOCD so both tools run at the same clock.
        self.swj_clock_hz: Optional[int] = None
        self.idle_cycles = 0
        self.wait_retry = 100
        self.match_retry = 0
        self.match_mask = 0xFFFFFFFF
        self.reset_asserted = False
        self._free_at = 0.0  # when the firmware finishes its current command
        self._core_busy_until = 0.0
        self._flash_busy_until = 0.0
        self._now = 0.0  # virtual time of the transfer being executed
        self._code_bytes = 0
        self._flash_s = {"flash_erase": 0.0, "flash_program": 0.0}
        self._timing = None
        self._hooked_board = None

    # -- session -----------------------------------------------------------------------------
    def open(self) -> None:
        """The host claimed the interface: open the board (see :meth:`SimProbe.open`).

        :raises Unplugged: The board is gone (ejected or removed).
        :raises exceptions.ProbeError: Another session holds the board.
        """
        if self.probe is not None:
            return
        try:
            probe = SimProbe(self.board_name, self.store)
            probe.open()
        except (exceptions.ProbeDisconnected, UnknownBoardError) as err:
            # A board the store does not have (a typo in PIFLASH_SIM_USB, or deleted): the
            # device behaves as one that went away, which pyOCD and piflash already explain.
            raise Unplugged(str(err)) from None
        self.probe = probe
        self._timing = TARGET_TIMING.get(probe.target_type)

    def close(self) -> None:
        """The host released the interface: save and release the board."""
        probe, self.probe = self.probe, None
        self._hooked_board = None
        if probe is not None:
            probe.close()

    def board_gone(self) -> bool:
        """Whether the session's board has been swapped or pulled (:meth:`SimProbe.board_gone`)."""
        return self.probe is not None and self.probe.board_gone()

    @property
    def generation(self):
        """The session's board generation (int), or None outside a session."""
        return self.probe.generation if self.probe is not None else None

    def _board(self):
        """The live board, with the timing hooks attached (once per board object)."""
        board = self.probe.board if self.probe is not None else None
        if board is not None and board is not self._hooked_board:
            from unicorn import UC_HOOK_BLOCK

            board.cpu.uc.hook_add(UC_HOOK_BLOCK, self._on_block)
            board.scs.resume_budget = RESUME_BUDGET
            board.scs.poll_budget = POLL_BUDGET
            for nvm in board.nvm.values():
                nvm.observer = self._on_flash_op
                nvm.busy_probe = self._flash_busy
            self._hooked_board = board
        return board

    def _flash_busy(self) -> bool:
        """Whether the flash operations charged so far still run at the current transfer's time
        (a serial flash's BUSY bit, read by a status instruction)."""
        return self._now < self._flash_busy_until

    def _on_block(self, uc, address: int, size: int, user_data) -> None:
        self._code_bytes += size

    def _core_hz(self) -> float:
        """The target's core clock now: the board's clock tree where it has one (RP2040), else
        the timing model's fixed clock."""
        board = self._hooked_board
        clock = getattr(board, "clock_hz", None)
        return clock() if clock is not None else self._timing.core_hz

    def _on_flash_op(self, op: str, nbytes: int) -> None:
        if self._timing is None:
            return
        seconds = nbytes / self._core_hz() if op == "spi_cycles" else self._timing.op_time(op, nbytes)
        self._flash_s["flash_erase" if op.startswith("erase") else "flash_program"] += seconds
        if op == "spi_cycles":
            self.clock.count("spi_cycles", nbytes)
        else:
            self.clock.count(op if op != "program" else "program_ops")

    # -- packets -----------------------------------------------------------------------------
    def execute(self, packet: bytes, t_arrive: float) -> Tuple[bytes, float]:
        """Run one DAP packet that reached the probe at ``t_arrive`` (s); returns the response
        bytes and the virtual time they are ready.

        :raises Unplugged: The probe vanished while executing.
        """
        t = max(t_arrive, self._free_at)
        start = t
        response, t = self._command(bytes(packet), t)
        self._free_at = t
        self.clock.charge("probe_busy", t - start)
        return response, t

    def _command(self, data: bytes, t: float) -> Tuple[bytes, float]:
        cmd = data[0] if data else 0xFF
        self.clock.count(COMMAND_NAMES.get(cmd, "DAP_0x%02X" % cmd))
        t += self.preset.cmd_overhead_s
        self.clock.charge("probe", self.preset.cmd_overhead_s)
        if cmd == 0x7F:  # DAP_ExecuteCommands: n commands back to back
            n, pos, out = data[1], 2, bytearray([0x7F, data[1]])
            for _ in range(n):
                length = self._request_length(data, pos)
                resp, t = self._command(data[pos : pos + length], t)
                out += resp
                pos += length
            return bytes(out), t
        handler = _HANDLERS.get(cmd)
        if handler is None:
            return b"\xff", t
        return handler(self, data, t)

    @staticmethod
    def _request_length(data: bytes, pos: int) -> int:
        """Length of the command at ``pos`` inside DAP_ExecuteCommands (the common cases)."""
        cmd = data[pos]
        if cmd == 0x05:
            count, p = data[pos + 2], pos + 3
            for _ in range(count):
                req = data[p]
                p += 1 + (4 if not req & 2 or req & 0x10 else 0)
            return p - pos
        if cmd == 0x06:
            count = data[pos + 2] | data[pos + 3] << 8
            return 5 + (0 if data[pos + 4] & 2 else 4 * count)
        fixed = {0x00: 2, 0x01: 3, 0x02: 2, 0x03: 1, 0x04: 6, 0x08: 6, 0x09: 3, 0x0A: 1, 0x10: 7, 0x11: 5, 0x13: 2}
        if cmd == 0x12:
            bits = data[pos + 1] or 256
            return 2 + (bits + 7) // 8
        return fixed.get(cmd, len(data) - pos)

    # -- simple commands ---------------------------------------------------------------------
    def _info(self, data: bytes, t: float) -> Tuple[bytes, float]:
        p = self.preset
        item = data[1]
        strings = {
            0x01: p.manufacturer,
            0x02: p.product,
            0x03: self.serial,
            0x04: p.protocol_version,
            0x09: p.firmware_version,
        }
        if item in strings:
            if not strings[item]:  # no such string: length 0 (CMSIS-DAP DAP_Info)
                return b"\x00\x00", t
            raw = strings[item].encode() + b"\0"
            return bytes([0x00, len(raw)]) + raw, t
        if item == 0xF0:  # capabilities: SWD only
            return b"\x00\x01\x01", t
        if item == 0xFE:
            return bytes([0x00, 1, p.packet_count]), t
        if item == 0xFF:
            return b"\x00\x02" + struct.pack("<H", p.packet_size), t
        return b"\x00\x00", t

    def _connect(self, data: bytes, t: float) -> Tuple[bytes, float]:
        port = data[1] if len(data) > 1 else 0
        if port not in (0, 1) or self.probe is None:
            return b"\x02\x00", t
        self._guard(lambda: self.probe.connect())
        return b"\x02\x01", t

    def _disconnect(self, data: bytes, t: float) -> Tuple[bytes, float]:
        if self.probe is not None:
            self._guard(lambda: self.probe.disconnect())
        return b"\x03\x00", t

    def _transfer_configure(self, data: bytes, t: float) -> Tuple[bytes, float]:
        self.idle_cycles, self.wait_retry, self.match_retry = struct.unpack_from("<BHH", data, 1)
        return b"\x04\x00", t

    def _write_abort(self, data: bytes, t: float) -> Tuple[bytes, float]:
        value = struct.unpack_from("<I", data, 2)[0]
        ack, _, t = self._transfer(0x00, value, t)  # DP write, A = 0 (ABORT)
        return bytes([0x08, 0x00 if ack == ACK_OK else 0xFF]), t

    def _delay(self, data: bytes, t: float) -> Tuple[bytes, float]:
        return b"\x09\x00", t + struct.unpack_from("<H", data, 1)[0] * 1e-6

    def _reset_target(self, data: bytes, t: float) -> Tuple[bytes, float]:
        # No device-specific reset sequence (execute = 0), as in the reference firmware.
        return b"\x0a\x00\x00", t

    def _swj_pins(self, data: bytes, t: float) -> Tuple[bytes, float]:
        output, select, wait_us = struct.unpack_from("<BBI", data, 1)
        if select & 0x80 and self.probe is not None:
            asserted = not output & 0x80
            self._guard(lambda: self.probe.assert_reset(asserted))
            self.reset_asserted = asserted
        pins = 0x00 if self.reset_asserted else 0x80
        return bytes([0x10, pins | 0x03]), t

    def _swj_clock(self, data: bytes, t: float) -> Tuple[bytes, float]:
        hz = struct.unpack_from("<I", data, 1)[0]
        if hz == 0:
            return b"\x11\xff", t
        self.swd_hz = self.preset.swclk_hz(hz)
        self.swj_clock_hz = hz
        return b"\x11\x00", t

    def _swj_sequence(self, data: bytes, t: float) -> Tuple[bytes, float]:
        bits = data[1] or 256
        if self.probe is not None:
            value = int.from_bytes(data[2 : 2 + (bits + 7) // 8], "little")
            self._guard(lambda: self.probe.swj_sequence(bits, value))
        return b"\x12\x00", t + self._bits(bits)

    def _swd_configure(self, data: bytes, t: float) -> Tuple[bytes, float]:
        return b"\x13\x00", t

    def _swd_sequence(self, data: bytes, t: float) -> Tuple[bytes, float]:
        count, pos, bits = data[1], 2, 0
        sequences = []
        for _ in range(count):
            info = data[pos]
            n = info & 0x3F or 64
            pos += 1
            if info & 0x80:
                sequences.append((n,))
            else:
                sequences.append((n, int.from_bytes(data[pos : pos + (n + 7) // 8], "little")))
                pos += (n + 7) // 8
            bits += n
        if self.probe is not None:
            _, read = self._guard(lambda: self.probe.swd_sequence(sequences))
        else:
            read = [bytes((seq[0] + 7) // 8) for seq in sequences if len(seq) == 1]
        return bytes([0x1D, 0x00]) + b"".join(read), t + self._bits(bits)

    def _host_status(self, data: bytes, t: float) -> Tuple[bytes, float]:
        return b"\x01\x00", t

    # -- transfers ---------------------------------------------------------------------------
    def _transfer_cmd(self, data: bytes, t: float) -> Tuple[bytes, float]:
        count, pos = data[2], 3
        out, done, ack = bytearray(), 0, ACK_OK
        posted, last_req = False, None
        for _ in range(count):
            req = last_req = data[pos]
            pos += 1
            if req & 2 and not req & 0x10:
                value = None
            else:
                value = struct.unpack_from("<I", data, pos)[0]
                pos += 4
            if not req & 2 and req & 0x20:  # write match mask: no SWD transfer
                self.match_mask = value
                done += 1
                continue
            if req & 3 == 3 and not posted:  # first AP read of a run: posted read
                t += self._transfer_time(1)
            posted = req & 3 == 3
            if req & 2 and req & 0x10:  # read with value match
                ack, got, t = self._match(req, value, t)
            else:
                ack, got, t = self._transfer(req, value, t)
            if ack != ACK_OK:
                break
            if req & 2 and not req & 0x10:
                out += struct.pack("<I", got)
            done += 1
        if ack == ACK_OK and last_req is not None and not last_req & 2:
            t += self._transfer_time(1)  # read RDBUFF to check the last write
        return bytes([0x05, done, ack]) + bytes(out), t

    def _match(self, req: int, match: int, t: float) -> Tuple[int, int, float]:
        for _ in range(self.match_retry + 1):
            ack, got, t = self._transfer(req & ~0x10, None, t)
            if ack != ACK_OK or (got & self.match_mask) == match:
                return ack, got, t
        return ACK_OK | MISMATCH, got, t

    def _transfer_block(self, data: bytes, t: float) -> Tuple[bytes, float]:
        count = data[2] | data[3] << 8
        req = data[4]
        out, done, ack = bytearray(), 0, ACK_OK
        reading = bool(req & 2)
        if reading and req & 1:
            t += self._transfer_time(1)  # posted AP read
        for i in range(count):
            value = None if reading else struct.unpack_from("<I", data, 5 + 4 * i)[0]
            ack, got, t = self._transfer(req & 0x0F, value, t)
            if ack != ACK_OK:
                break
            if reading:
                out += struct.pack("<I", got)
            done += 1
        if ack == ACK_OK and not reading:
            t += self._transfer_time(1)  # RDBUFF read checks the last write
        return bytes([0x06, done & 0xFF, done >> 8, ack]) + bytes(out), t

    def _bits(self, bits: int) -> float:
        seconds = bits / self.swd_hz
        self.clock.charge("swd", seconds)
        return seconds

    def _transfer_time(self, n: int) -> float:
        self.clock.charge("probe", n * self.preset.transfer_overhead_s)
        return n * (self.preset.transfer_overhead_s) + self._bits(n * swd_transfer_bits(self.idle_cycles))

    def transfer(self, req: int, value: Optional[int], t: float) -> Tuple[int, int, float]:
        """One SWD transfer at virtual time ``t`` (s), for a device that clocks the wire itself
        (the Pi's pins, :mod:`piflash.sim.probes.pins`): ``req`` is the DAP transfer request
        (APnDP bit 0, RnW bit 1, A[3:2]); returns (ACK, value read, time after it)."""
        return self._transfer(req, value, t)

    def would_wait(self, req: int, t: float) -> bool:
        """Whether a transfer ``req`` at time ``t`` (s) finds the flash it reaches still busy,
        so that the target answers WAIT (a MEM-AP DRW access into flash being programmed)."""
        if self.probe is None or not (req & 1) or (req & 0x0C) != AP_DRW:
            return False
        board = self._board()
        mem_ap, tar = self._mem_ap_target(board)
        return mem_ap is not None and t < self._flash_busy_until and self._in_flash(board, tar)

    def board(self):
        """The live board with the timing hooks attached, or None outside a session."""
        return self._board() if self.probe is not None else None

    def _transfer(self, req: int, value: Optional[int], t: float) -> Tuple[int, int, float]:
        """One SWD transfer at time ``t``: returns (ack, value read, time after it)."""
        if self.probe is None:
            return ACK_NONE, 0, t
        self.clock.count("swd_transfers")
        board = self._board()
        ap, rnw, addr = req & 1, bool(req & 2), req & 0x0C
        mem_ap, tar = self._mem_ap_target(board) if ap and addr == AP_DRW else (None, None)
        if mem_ap is not None and t < self._flash_busy_until and self._in_flash(board, tar):
            waits = 0
            while t < self._flash_busy_until:
                if waits >= self.wait_retry:
                    self.clock.count("swd_wait", waits)
                    return ACK_WAIT, 0, t
                t += self._bits(swd_wait_bits() + self.idle_cycles)
                waits += 1
            self.clock.count("swd_wait", waits)
        t += self._transfer_time(1)
        self._now = t
        try:
            if rnw:
                got = self._guard(lambda: (self.probe.read_ap if ap else self.probe.read_dp)(addr))
            else:
                self._guard(lambda: (self.probe.write_ap if ap else self.probe.write_dp)(addr, value))
                got = 0
        except exceptions.TransferFaultError:
            self.clock.count("swd_fault")
            return ACK_FAULT, 0, t
        except exceptions.TransferError:
            return ACK_NONE, 0, t
        # Book the code this transfer ran first: a DHCSR read runs another slice of a routine
        # longer than the resume budget, and that slice's time must count before the read
        # tells whether the routine is still running (else the read says halted and the next
        # one running again, which pyOCD reports as "core not halted" reading R0).
        self._settle_target_time(t, board)
        if tar == DHCSR_ADDR:
            if rnw and t < self._core_busy_until:
                got &= ~S_HALT  # the algorithm is still running in virtual time
                self.clock.count("core_polls_running")
            elif not rnw and value & C_HALT:
                self._core_busy_until = 0.0  # the debugger halts the core: at once
        return ACK_OK, got, t

    def _settle_target_time(self, t: float, board) -> None:
        """Turn code executed and flash operations done during the last transfer into the
        time the core and the flash stay busy. Only a run that stopped by itself (BKPT: a flash
        algorithm returning) keeps the core busy; code of an application that keeps running
        after reset runs alongside the debugger and delays nothing."""
        if not self._code_bytes and not any(self._flash_s.values()):
            return
        if board is not None and board.scs.running:
            self._code_bytes = 0
        cpu_s = 0.0
        if self._timing is not None:
            cpu_s = self._code_bytes / 2 * CYCLES_PER_HALFWORD / self._core_hz()
        flash_s = sum(self._flash_s.values())
        self.clock.charge("target_cpu", cpu_s)
        for key, seconds in self._flash_s.items():
            self.clock.charge(key, seconds)
        if self._code_bytes:
            self._core_busy_until = max(self._core_busy_until, t) + cpu_s + flash_s
        if flash_s:
            self._flash_busy_until = max(self._flash_busy_until, t) + flash_s
        self._code_bytes = 0
        self._flash_s = {"flash_erase": 0.0, "flash_program": 0.0}

    @staticmethod
    def _mem_ap_target(board) -> Tuple[Optional[object], Optional[int]]:
        if board is None:
            return None, None
        ap = board.dp.current_ap()
        tar = getattr(ap, "tar", None)
        return (ap, tar) if tar is not None else (None, None)

    @staticmethod
    def _in_flash(board, addr: Optional[int]) -> bool:
        return addr is not None and any(nvm.contains(addr) for nvm in board.nvm.values())

    def _guard(self, action):
        try:
            return action()
        except exceptions.ProbeDisconnected as err:
            raise Unplugged(str(err)) from None


_HANDLERS = {
    0x00: DapFirmware._info,
    0x01: DapFirmware._host_status,
    0x02: DapFirmware._connect,
    0x03: DapFirmware._disconnect,
    0x04: DapFirmware._transfer_configure,
    0x05: DapFirmware._transfer_cmd,
    0x06: DapFirmware._transfer_block,
    0x08: DapFirmware._write_abort,
    0x09: DapFirmware._delay,
    0x0A: DapFirmware._reset_target,
    0x10: DapFirmware._swj_pins,
    0x11: DapFirmware._swj_clock,
    0x12: DapFirmware._swj_sequence,
    0x13: DapFirmware._swd_configure,
    0x1D: DapFirmware._swd_sequence,
}
