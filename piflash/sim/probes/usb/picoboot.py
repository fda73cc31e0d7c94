"""A simulated RP2040 in USB BOOTSEL mode: the boot ROM's USB device and its PICOBOOT interface.

The device a Pico shows when it starts with BOOTSEL held (or with no bootable flash), as the
boot ROM builds it (pico-bootrom-rp2040 ``bootrom/usb_boot_device.c``; RP2040 datasheet 2.8.4
"USB Mass Storage Interface" and 2.8.5 "USB PICOBOOT Interface"):

* device descriptor: USB 1.1, VID 2E8Ah, PID 0003h, release 1.00, strings "Raspberry Pi",
  "RP2 Boot" and a serial number of 12 upper-case hex digits, six from SYSINFO's GITREF_RP2040
  and six from the ROM's own git revision: the same for every chip of one ROM version, so it
  names the ROM, not the board;
* interface 0: mass storage (class 08h, SCSI, bulk-only), bulk IN 81h and OUT 02h: present, not
  served by the model (a UF2 copy to the drive is not simulated);
* interface 1: PICOBOOT (class FFh, subclass 0, protocol 0), bulk OUT 03h and IN 84h, 64-byte
  packets (full speed).

The PICOBOOT command set (2.8.5.2-2.8.5.4; pico-sdk ``boot/picoboot.h``): a 32-byte command
(dMagic 431FD10Bh, dToken, bCmdId, bCmdSize, 2 bytes unused, dTransferLength, 16 bytes of
arguments) on the OUT endpoint; then ``dTransferLength`` bytes of data in the direction of
bCmdId bit 7; then an empty packet the other way as the acknowledgement. A command that fails
stalls both endpoints; the host reads why with the control request GET_COMMAND_STATUS (42h,
16 bytes: dToken, dStatusCode, bCmdId, bInProgress) and clears the stall with INTERFACE_RESET
(41h). The checks and status codes are the ROM's (``bootrom/async_task.c`` ``_execute_task``
and ``usb_boot_device.c`` ``_picoboot_cmd_packet_internal``): EXCLUSIVE_ACCESS (01h), REBOOT
(02h), FLASH_ERASE (03h: 4 KiB aligned address and size, erased sector by sector), READ (84h),
WRITE (05h: flash pages 256-byte aligned, RAM anywhere in SRAM), EXIT_XIP (06h), ENTER_CMD_XIP
(07h), EXEC (08h: the core runs the code at the address and returns), VECTORIZE_FLASH (09h).
The flash commands call the same boot ROM flash functions the debugger's algorithm calls
(:class:`piflash.sim.chips.rp2_bootrom.BootRom`), so a board flashed here reads the same
through SWD.

Time, on the device's virtual clock: packets at USB full speed (the probes' link model, 64-byte
bulk packets), data moved through the ROM's one 256-byte buffer (the next chunk is not taken
while the previous one is being programmed), each flash operation its typical datasheet time
(:data:`~piflash.sim.probes.usb.timing.TARGET_TIMING` ``rp2040``), the bytes on the SPI bus at
clk_sys 48 MHz (the USB boot code runs clk_sys from the 48 MHz USB clock: bootrom_main.c
``_usb_clock_setup``) divided by the ROM's BAUDR 6.

Faults, as the simulated probes have them (:mod:`piflash.sim.faults`), the board being the USB
device: a board ejected (``piflash sim unplug``), deleted, pulled (``sim board pull``) or swapped
while the interface is claimed leaves the bus at the next bulk transfer (ENODEV; the store is
checked every 0.05 s, as a probe's); ``disconnect_after`` N: it leaves after N bulk transfers;
``remove_after`` N: the same, and the board is off its fixture (the fault spent), so it does
not come back; the writes up to then are kept either way. ``stuck_busy``: the flash's BUSY never
clears, the ROM polls it for ever and the device stops answering. An EXEC whose code does not
return hangs the device: every later transfer times out.

May import: pyusb, the board store, :mod:`piflash.sim.probes.simprobe`; nothing of piflash
outside ``piflash.sim``.
"""

from __future__ import annotations

import errno
import hashlib
import struct
from types import SimpleNamespace
from typing import Dict, Optional, Tuple

from piflash.sim.probes.usb.device import _Desc, string_descriptor
from piflash.sim.probes.usb.timing import (
    BULK_LATENCY_S,
    HOST_TRANSFER_S,
    TARGET_TIMING,
    Link,
    VirtualClock,
)
from piflash.sim.store import SimStore

__all__ = [
    "SimBootselDevice",
    "SimAppDevice",
    "PICOBOOT_MAGIC",
    "STATUS_NAMES",
    "BOOTSEL_PIDS",
    "rom_serial",
    "bootsel_device",
]

#: Raspberry Pi's USB vendor ID and the boot ROMs' product IDs (RP2040 datasheet 2.8.4; RP2350
#: datasheet 5.6.1).
VID = 0x2E8A
BOOTSEL_PIDS = {"rp2040": 0x0003, "rp2350": 0x000F}
PICOBOOT_MAGIC = 0x431FD10B
IF_RESET, IF_CMD_STATUS = 0x41, 0x42
EP_OUT, EP_IN = 0x03, 0x84
MSC_EP_IN, MSC_EP_OUT = 0x81, 0x02
PICOBOOT_INTERFACE = 1

#: Status codes (pico-sdk ``boot/picoboot.h`` ``enum picoboot_status``; RP2040 datasheet 2.8.5.5).
STATUS_NAMES = {
    0: "OK",
    1: "UNKNOWN_CMD",
    2: "INVALID_CMD_LENGTH",
    3: "INVALID_TRANSFER_LENGTH",
    4: "INVALID_ADDRESS",
    5: "BAD_ALIGNMENT",
    6: "INTERLEAVED_WRITE",
    7: "REBOOTING",
    8: "UNKNOWN_ERROR",
}
OK, UNKNOWN_CMD, INVALID_CMD_LENGTH, INVALID_TRANSFER_LENGTH, INVALID_ADDRESS, BAD_ALIGNMENT = range(6)

#: bCmdId -> (name, bCmdSize, data: None, "in" (dTransferLength == dSize) or "out" (the same)).
COMMANDS: Dict[int, Tuple[str, int, Optional[str]]] = {
    0x01: ("EXCLUSIVE_ACCESS", 1, None),
    0x02: ("REBOOT", 12, None),
    0x03: ("FLASH_ERASE", 8, None),
    0x84: ("READ", 8, "in"),
    0x05: ("WRITE", 8, "out"),
    0x06: ("EXIT_XIP", 0, None),
    0x07: ("ENTER_CMD_XIP", 0, None),
    0x08: ("EXEC", 4, None),
    0x09: ("VECTORIZE_FLASH", 4, None),
}

XIP_BASE, SRAM_BASE, SRAM_END = 0x10000000, 0x20000000, 0x20042000
XIP_SRAM_BASE, XIP_SRAM_END = 0x15000000, 0x15004000
PAGE, SECTOR = 256, 4096
#: SPI clock divider the ROM's flash_exit_xip sets (BAUDR 6) and clk_sys in USB boot, Hz.
BAUDR, BOOT_CLK_SYS_HZ = 6, 48e6
#: Seconds a claim waits for another session of the board (another process's PICOBOOT or a
#: debugger's): the kernel refuses a claimed interface at once; the board store's lock is a file
#: lock that another process may be releasing just now.
CLAIM_WAIT_S = 0.5
#: Instructions an EXEC may run before the model calls the device hung (a CRC of 64 KiB, the
#: largest request piflash makes (256 KiB), takes about 3.5 M).
EXEC_BUDGET = 50_000_000
#: The model's GITREF_RP2040 and ROM revision (not Raspberry Pi's values): the serial number.
GITREF, ROM_GIT_REVISION = 0xE0C912, 0x5B0D9B


def rom_serial(chip: str = "rp2040") -> str:
    """The serial number string of the model's boot ROM: 12 upper-case hex digits, the same for
    every board of the chip (``_write_six_msb_hex_chars`` twice, usb_boot_device.c)."""
    if chip == "rp2040":
        return "%06X%06X" % (GITREF, ROM_GIT_REVISION)
    return hashlib.sha256(chip.encode()).hexdigest()[:16].upper()


def _is_ram(addr: int) -> bool:
    return SRAM_BASE <= addr <= SRAM_END or XIP_SRAM_BASE <= addr <= XIP_SRAM_END


def _is_flash(addr: int) -> bool:
    return XIP_BASE <= addr <= SRAM_BASE


def _is_rom(addr: int) -> bool:
    return addr < 8192


class _Stall(Exception):
    """A command the ROM refuses: both endpoints stall with this status."""

    def __init__(self, status: int) -> None:
        super().__init__(STATUS_NAMES.get(status, status))
        self.status = status


class _PicoOnUsb:
    """What both ways a Pico shows itself on USB share: its strings and its presence."""

    strings: Dict[int, str]
    unplugged: bool

    def string_descriptor(self, index: int) -> bytes:
        """GET_DESCRIPTOR(STRING, index) (:func:`~piflash.sim.probes.usb.device.string_descriptor`)."""
        return string_descriptor(self.strings, index)

    def check_present(self) -> None:
        """:raises usb.core.USBError: ENODEV once the device left the bus."""
        if self.unplugged:
            import usb.core

            raise usb.core.USBError("No such device (it may have been disconnected)", -4, errno.ENODEV)


#: Chip -> its BOOTSEL device class; :mod:`piflash.sim.probes.usb.picoboot_rp2350` adds the
#: RP2350's when imported (the package's ``install`` imports it), so this module needs no import
#: of it.
BOOTSEL_DEVICES: Dict[str, type] = {}


def bootsel_device(board_name: str, store: SimStore, address: int) -> "SimBootselDevice":
    """The BOOTSEL device of ``board_name``'s chip (:data:`BOOTSEL_DEVICES`; an RP2040's for a
    board not created yet: claiming it fails later)."""
    try:
        target = store.get(board_name).target
    except Exception:
        target = "rp2040"
    return BOOTSEL_DEVICES.get(target, SimBootselDevice)(board_name, store, address)


class SimBootselDevice(_PicoOnUsb):
    """One RP2040 board in BOOTSEL mode on the simulated bus (the base of the RP2350's).

    :param board_name: The simulated board (in ``store``); it must be an ``rp2040``.
    :param store: Board store.
    :param address: USB device address on bus 1 (also its port number: ``1-ADDRESS``).

    Attributes: ``serial`` (str), ``clock`` (:class:`VirtualClock`), ``unplugged`` (bool),
    ``access_denied`` (bool), ``hung`` (bool: an EXEC did not return), ``host_transfer_s``
    (host CPU seconds per bulk transfer).
    """

    kind = "bootsel"
    #: The chip, its product string, its bcdUSB and its command table (bCmdId -> (name,
    #: bCmdSize, data direction)); the RP2350's device overrides them.
    CHIP, PRODUCT, BCD_USB = "rp2040", "RP2 Boot", 0x0110
    COMMANDS = COMMANDS

    def __init__(self, board_name: str, store: SimStore, address: int) -> None:
        self.board_name = board_name
        self.store = store
        self.address = address
        self.serial = self._serial()
        #: What the rest of the simulation reads of a device's model (as a probe preset has it).
        self.preset = SimpleNamespace(
            name="bootsel", vid=VID, pid=BOOTSEL_PIDS[self.CHIP], manufacturer="Raspberry Pi", product=self.PRODUCT
        )
        self.clock = VirtualClock()
        self.link = Link(SimpleNamespace(link="v2-bulk-fs", max_packet=64, high_speed=False), self.clock)
        self.timing = TARGET_TIMING[self.CHIP]
        self.unplugged = False
        self.access_denied = False
        self.hung = False
        self.host_transfer_s = HOST_TRANSFER_S
        try:
            self.generation = store.get(board_name).generation
        except Exception:  # no such board (yet): claiming it fails later
            self.generation = None
        self.probe = None  # SimProbe while the interface is claimed
        self.halted = {EP_OUT: False, EP_IN: False}
        self.status = {"token": 0, "code": OK, "cmd": 0, "in_progress": False}
        self.exclusive = 0
        self._cmd: Optional[dict] = None  # the command whose data or ack is awaited
        self._in_data = bytearray()  # IN bytes ready for the host
        self._in_ready = 0.0  # when the last of them is on the wire
        self._transfers = 0
        self._busy_s = 0.0  # flash time charged by the current operation
        self._describe(address)

    # -- descriptors ---------------------------------------------------------------------------
    def _serial(self) -> str:
        """The serial number string: the ROM's (RP2040: the same on every board)."""
        return rom_serial(self.CHIP)

    def _describe(self, address: int) -> None:
        self.strings = {1: "Raspberry Pi", 2: self.PRODUCT, 3: self.serial}
        self.device_descriptor = _Desc(
            bLength=18,
            bDescriptorType=1,
            bcdUSB=self.BCD_USB,
            bDeviceClass=0,
            bDeviceSubClass=0,
            bDeviceProtocol=0,
            bMaxPacketSize0=64,
            idVendor=VID,
            idProduct=BOOTSEL_PIDS[self.CHIP],
            bcdDevice=0x0100,
            iManufacturer=1,
            iProduct=2,
            iSerialNumber=3,
            bNumConfigurations=1,
            bus=1,
            address=address,
            port_number=address,
            port_numbers=(address,),
            speed=2,
        )
        self.config_descriptor = _Desc(
            bLength=9,
            bDescriptorType=2,
            wTotalLength=9 + 2 * (9 + 7 + 7),
            bNumInterfaces=2,
            bConfigurationValue=1,
            iConfiguration=0,
            bmAttributes=0x80,
            bMaxPower=0xFA,
        )
        self.interfaces = {
            0: _Desc(
                bLength=9,
                bDescriptorType=4,
                bInterfaceNumber=0,
                bAlternateSetting=0,
                bNumEndpoints=2,
                bInterfaceClass=0x08,
                bInterfaceSubClass=0x06,
                bInterfaceProtocol=0x50,
                iInterface=0,
            ),
            1: _Desc(
                bLength=9,
                bDescriptorType=4,
                bInterfaceNumber=1,
                bAlternateSetting=0,
                bNumEndpoints=2,
                bInterfaceClass=0xFF,
                bInterfaceSubClass=0,
                bInterfaceProtocol=0,
                iInterface=0,
            ),
        }
        self.endpoints = {0: [self._ep(MSC_EP_IN), self._ep(MSC_EP_OUT)], 1: [self._ep(EP_OUT), self._ep(EP_IN)]}

    @staticmethod
    def _ep(addr: int) -> _Desc:
        return _Desc(
            bLength=7,
            bDescriptorType=5,
            bEndpointAddress=addr,
            bmAttributes=0x02,
            wMaxPacketSize=64,
            bInterval=0,
            bRefresh=0,
            bSynchAddress=0,
        )

    # -- presence and sessions -------------------------------------------------------------------
    def claim(self, interface: int) -> None:
        """The host claimed an interface: PICOBOOT opens the board behind it.

        :raises usb.core.USBError: EBUSY while another process has the board (the kernel's
            answer to a second claim of a claimed interface), ENODEV when the board is gone.
        """
        import usb.core
        from pyocd.core import exceptions

        from piflash.sim.probes.simprobe import SimProbe
        from piflash.sim.store import UnknownBoardError

        self.check_present()
        if interface != PICOBOOT_INTERFACE or self.probe is not None:
            return
        probe = SimProbe(self.board_name, self.store)
        try:
            probe.open(lock_timeout=CLAIM_WAIT_S)
        except exceptions.ProbeDisconnected:
            self.unplug()
            self.check_present()
        except UnknownBoardError:
            self.unplug()
            self.check_present()
        except exceptions.ProbeError:
            raise usb.core.USBError("Resource busy", -6, errno.EBUSY) from None
        self.probe = probe
        board = probe.board
        if board is None or board.spec.name != self.CHIP or getattr(board, "chip", None) is None:
            probe.close()
            self.probe = None
            self.unplug()
            self.check_present()
        for nvm in board.nvm.values():
            nvm.observer = self._on_flash_op
            # BUSY reads 0 (the time is charged here instead), 1 for good with 'stuck_busy'
            nvm.busy_probe = lambda faults=board.faults: bool(faults.stuck_busy)
        self._opened(board)

    def _opened(self, board) -> None:
        """The board behind the interface was just opened (the RP2350's sets its QMI up)."""

    def release(self, interface: int) -> None:
        """The host released an interface: the board is saved and let go."""
        if interface == PICOBOOT_INTERFACE:
            self._close_board()

    def _close_board(self) -> None:
        probe, self.probe = self.probe, None
        if probe is not None:
            probe.close()

    def unplug(self) -> None:
        """The device leaves the bus (pulled, rebooted): later accesses fail with ENODEV."""
        self.unplugged = True
        self._close_board()

    def on_fixture(self) -> bool:
        """Whether the board is on its USB port (``piflash sim board pull`` takes it off; an
        unknown board is not)."""
        try:
            info = self.store.get(self.board_name)
        except Exception:
            return False
        return info.present and info.seated

    def replug(self) -> Optional["SimBootselDevice"]:
        """After this device left the bus: the device of the next board put on the port in
        BOOTSEL mode (``piflash sim board swap`` seats a new board: its generation goes up), or
        None while there is none."""
        try:
            info = self.store.get(self.board_name)
        except Exception:
            return None
        if info.generation != self.generation and info.present and info.seated:
            return bootsel_device(self.board_name, self.store, self.address)
        return None

    @property
    def board(self):
        """The live simulated board while the PICOBOOT interface is claimed."""
        return self.probe.board if self.probe is not None else None

    # -- control transfers -----------------------------------------------------------------------
    def control(self, request_type: int, request: int, value: int, index: int, length: int, data: bytes = b"") -> bytes:
        """A control request other than GET_DESCRIPTOR; returns the IN data (empty for OUT).

        :raises usb.core.USBError: EPIPE for a request the device does not know.
        """
        import usb.core

        self.check_present()
        if request_type == 0x82 and request == 0x00:  # GET_STATUS(endpoint)
            return bytes([1 if self.halted.get(index, False) else 0, 0])
        if request_type == 0x02 and request == 0x01 and value == 0:  # CLEAR_FEATURE(ENDPOINT_HALT)
            self.clear_halt(index)
            return b""
        if request_type & 0x7F == 0x41 and index == PICOBOOT_INTERFACE:
            if request_type & 0x80 and request == IF_CMD_STATUS and length == 16:
                s = self.status
                return struct.pack("<IIBB6x", s["token"], s["code"], s["cmd"], 1 if s["in_progress"] else 0)
            if not request_type & 0x80 and request == IF_RESET:
                self._reset_interface()
                return b""
        raise usb.core.USBError("Pipe error", -9, errno.EPIPE)

    def clear_halt(self, ep: int) -> None:
        """CLEAR_FEATURE(ENDPOINT_HALT) on ``ep``."""
        self.check_present()
        if ep in self.halted:
            self.halted[ep] = False

    def _reset_interface(self) -> None:
        """INTERFACE_RESET: endpoints unstalled, the command abandoned, status cleared and
        exclusive access given up (``_picoboot_reset``)."""
        self.halted = {EP_OUT: False, EP_IN: False}
        self.status = {"token": 0, "code": OK, "cmd": 0, "in_progress": False}
        self._cmd, self._in_data = None, bytearray()
        self.exclusive = 0

    # -- bulk transfers --------------------------------------------------------------------------
    def bulk_out(self, ep: int, data: bytes, timeout_ms: int) -> int:
        """A bulk OUT transfer on ``ep``; returns the bytes accepted.

        :raises usb.core.USBError: EPIPE on a stalled endpoint, ETIMEDOUT when hung, ENODEV.
        """
        self._count_transfer()
        if ep != EP_OUT:
            return self._refuse_msc()
        self.clock.count("usb_out")
        self.clock.count("bytes_out", len(data))
        self._check_halted(EP_OUT, timeout_ms)
        t_submit = self._host_work()
        cmd = self._cmd
        if cmd is not None and cmd["phase"] == "data" and cmd["dir"] == "out":
            return self._write_data(cmd, data, t_submit)
        if cmd is not None and cmd["phase"] == "ack" and cmd["dir"] == "in":
            if data:  # the acknowledgement of an IN command is an empty packet
                self._stall(UNKNOWN_CMD)
                return len(data)
            self.clock.advance_to(self.link.out(t_submit, 0))
            self._cmd = None
            self.status["in_progress"] = False
            return 0
        t = self.link.out(t_submit, len(data))
        self.clock.advance_to(t)
        self._command(bytes(data), t)
        return len(data)

    def bulk_in(self, ep: int, size: int, timeout_ms: int) -> bytes:
        """A bulk IN transfer of up to ``size`` bytes on ``ep``.

        :raises usb.core.USBError: EPIPE on a stalled endpoint, ETIMEDOUT when there is nothing
            to read within ``timeout_ms`` (virtual time) or the device hung, ENODEV.
        """
        self._count_transfer()
        if ep != EP_IN:
            return self._refuse_msc()
        self._check_halted(EP_IN, timeout_ms)
        self.clock.count("usb_in")
        cmd = self._cmd
        if cmd is not None and cmd["phase"] == "data" and cmd["dir"] == "in":
            data = self._read_data(cmd, size)
            self.clock.count("bytes_in", len(data))
            return data
        if cmd is not None and cmd["phase"] == "ack" and cmd["dir"] == "out":
            self.clock.advance_to(max(self._host_work(), self.link.inn(cmd["t"], 0)))
            self._cmd = None
            self.status["in_progress"] = False
            if cmd.get("then") is not None:
                cmd["then"]()
            return b""
        self._timeout(timeout_ms)
        return b""

    def _host_work(self) -> float:
        """The host's CPU for one transfer, from now: returns when it is done (seconds)."""
        self.clock.hold("host", self.clock.now, self.host_transfer_s)
        return self.clock.now + self.host_transfer_s

    def _count_transfer(self) -> None:
        """Each bulk transfer: the board's faults as a probe's, counted in bulk transfers (the
        board is the device: pulled, unplugged or cut off, it leaves the bus).

        :raises usb.core.USBError: ENODEV once the device left the bus: the board ejected
            (``piflash sim unplug``), deleted, pulled or swapped since the last transfer (seen
            within 0.05 s, :meth:`SimProbe.board_present`), ``disconnect_after`` N bulk
            transfers made, or ``remove_after`` N (the board then also off its fixture).
        """
        self.check_present()
        self._transfers += 1
        probe = self.probe
        if probe is not None and not probe.board_present():
            self.unplug()
        board = self.board
        faults = board.faults if board is not None else None
        if faults is not None and faults.remove_after is not None and self._transfers > faults.remove_after:
            probe.pull_board()
            self.unplug()
        elif faults is not None and faults.disconnect_after is not None and self._transfers > faults.disconnect_after:
            self.unplug()
        self.check_present()

    def _check_halted(self, ep: int, timeout_ms: int) -> None:
        import usb.core

        if self.hung:
            self._timeout(timeout_ms)
        if self.halted[ep]:
            raise usb.core.USBError("Pipe error", -9, errno.EPIPE)

    def _timeout(self, timeout_ms: int) -> None:
        import usb.core

        self.clock.advance_to(self.clock.now + max(timeout_ms, 1) / 1000.0)
        raise usb.core.USBError("Operation timed out", -7, errno.ETIMEDOUT)

    def _refuse_msc(self) -> int:
        import usb.core

        raise usb.core.USBError("Pipe error (the mass storage interface is not modelled)", -9, errno.EPIPE)

    def _stall(self, status: int) -> None:
        self.status["code"] = status
        self.status["in_progress"] = False
        self.halted = {EP_OUT: True, EP_IN: True}
        self._cmd = None

    # -- commands --------------------------------------------------------------------------------
    def _command(self, raw: bytes, t: float) -> None:
        """A 32-byte command arrived at virtual time ``t``."""
        if len(raw) != 32 or struct.unpack_from("<I", raw)[0] != PICOBOOT_MAGIC:
            self._stall(self.status["code"])  # not a command: stall, status unchanged
            return
        token, cmd_id, cmd_size, transfer_len = struct.unpack_from("<IBBxxI", raw, 4)
        args = raw[16:32]
        self.status = {"token": token, "code": UNKNOWN_CMD, "cmd": cmd_id, "in_progress": False}
        spec = self.COMMANDS.get(cmd_id)
        if spec is None:
            return self._stall(UNKNOWN_CMD)
        name, size, direction = spec
        if cmd_size != size:
            return self._stall(INVALID_CMD_LENGTH)
        addr, length = struct.unpack_from("<II", args)
        if not self._transfer_length_ok(name, direction, length, transfer_len):
            return self._stall(INVALID_TRANSFER_LENGTH)
        self.status["code"] = OK
        self.status["in_progress"] = True
        cmd = {"name": name, "dir": direction, "addr": addr, "left": transfer_len, "t": t, "phase": "data"}
        try:
            if name == "READ":
                self._check_range(addr, length, write=False)
                self._cmd = cmd
                return
            if direction == "in":  # an IN command whose data the ROM makes
                cmd["data"], cmd["addr"] = self._make_in_data(name, args, transfer_len), 0
                self._cmd = cmd
                return
            if name == "WRITE":
                self._check_range(addr, length, write=True)
                cmd["buffer"] = bytearray()
                self._cmd = cmd
                if transfer_len == 0:
                    self._ack_out(cmd, t)
                return
            t = self._run(name, args, t)
        except _Stall as stall:
            return self._stall(stall.status)
        cmd["t"] = t
        self._ack_out(cmd, t)
        cmd["then"] = self._after(name, args)

    def _make_in_data(self, name: str, args: bytes, transfer_len: int) -> bytes:
        """The data of an IN command other than READ (the RP2350's GET_INFO)."""
        raise _Stall(UNKNOWN_CMD)

    def _after(self, name: str, args: bytes):
        """What happens once a command without data was acknowledged: REBOOT's reset, or None."""
        return self._reboot if name == "REBOOT" else None

    def _transfer_length_ok(self, name: str, direction: Optional[str], length: int, transfer_len: int) -> bool:
        """dTransferLength as the command needs it: READ/WRITE's dSize, 0 without data."""
        return transfer_len == (length if direction else 0)

    def _ack_out(self, cmd: dict, t: float) -> None:
        """The command is done at ``t``: an empty IN packet acknowledges it (an OUT one for IN
        commands)."""
        cmd["phase"], cmd["t"] = "ack", t
        if cmd["dir"] is None:
            cmd["dir"] = "out"
        self._cmd = cmd

    def _check_range(self, addr: int, length: int, write: bool) -> None:
        end = addr + length
        if _is_ram(addr) and _is_ram(end):
            return
        if not write and _is_rom(addr) and _is_rom(end):
            return
        if _is_flash(addr) and _is_flash(end):
            if addr % PAGE:
                raise _Stall(BAD_ALIGNMENT)
            return
        raise _Stall(INVALID_ADDRESS)

    def _run(self, name: str, args: bytes, t: float) -> float:
        """Execute a command without a data phase; returns when it is done."""
        rom = self.board.chip
        addr, size = struct.unpack_from("<II", args)
        if name == "EXCLUSIVE_ACCESS":
            self.exclusive = args[0]
            return t
        if name == "EXIT_XIP":
            return self._flash(t, rom.exit_xip, changes=False)
        if name == "ENTER_CMD_XIP":
            return self._flash(t, rom.enter_cmd_xip, changes=False)
        if name == "FLASH_ERASE":
            if addr % SECTOR or size % SECTOR:
                raise _Stall(BAD_ALIGNMENT)
            if not (_is_flash(addr) and _is_flash(addr + size)):
                raise _Stall(INVALID_ADDRESS)
            return self._flash(t, lambda: rom.erase_range(addr - XIP_BASE, size))
        if name == "EXEC":
            return self._exec(addr, t)
        if name == "VECTORIZE_FLASH":
            if addr & 1:
                raise _Stall(BAD_ALIGNMENT)
            if not _is_ram(addr):
                raise _Stall(INVALID_ADDRESS)
            return t
        return t  # REBOOT: acknowledged, then the device leaves

    def _flash(self, t: float, operation, changes: bool = True) -> float:
        """Run a boot ROM flash function and return ``t`` plus the flash time it charged. With
        the board's ``stuck_busy`` fault an erase or program never ends (the ROM polls BUSY
        forever): the device stops answering."""
        if changes and self.board.faults.stuck_busy:
            self.hung = True
            return t
        self._busy_s = 0.0
        with self.probe.flushing():
            operation()
        return t + self._busy_s

    def _on_flash_op(self, op: str, nbytes: int) -> None:
        if op == "spi_cycles":
            self._busy_s += nbytes / BOOT_CLK_SYS_HZ
            self.clock.count("spi_cycles", nbytes)
        else:
            self._busy_s += self.timing.op_time(op, nbytes)
            self.clock.count(op)

    def _write_data(self, cmd: dict, data: bytes, t_submit: float) -> int:
        """WRITE's data: taken 256 bytes at a time into the ROM's one buffer, each chunk
        written (flash page program, or RAM) before the next is accepted."""
        take = bytes(data[: cmd["left"]])
        pos, t_free = 0, max(t_submit + BULK_LATENCY_S["v2-bulk-fs"], cmd["t"])
        while pos < len(take):
            buffer = cmd["buffer"]
            n = min(PAGE - len(buffer), len(take) - pos)
            buffer += take[pos : pos + n]
            pos += n
            # Back-to-back packets while the buffer takes them: the host controller retries a
            # NAKed OUT within the frame, so only the bytes' wire time counts.
            t_free = self.link.occupy(t_free, n)
            if len(buffer) == PAGE or cmd["left"] - pos == 0:
                try:
                    t_free = self._write_chunk(cmd, bytes(buffer), t_free)
                except _Stall as stall:
                    self._stall(stall.status)
                    self.clock.advance_to(t_free)
                    return pos
                cmd["buffer"] = bytearray()
        cmd["left"] -= len(take)
        cmd["t"] = t_free
        self.clock.advance_to(t_free)
        if cmd["left"] == 0:
            self._ack_out(cmd, t_free)
        return len(take)

    def _write_chunk(self, cmd: dict, chunk: bytes, t: float) -> float:
        if self.hung:
            return t
        addr = cmd["addr"]
        cmd["addr"] += len(chunk)
        if _is_ram(addr):
            self.board.bus.write_block(addr, chunk)
            self.board.cpu.flush_translation_cache()
            return t
        rom = self.board.chip
        return self._flash(t, lambda: rom.program(addr - XIP_BASE, chunk))

    def _read_data(self, cmd: dict, size: int) -> bytes:
        """READ's data, 256 bytes at a time through the ROM's buffer (flash by 03h Read Data)."""
        out = bytearray()
        t = max(self._host_work(), cmd["t"])
        while cmd["left"] and len(out) < size:
            n = min(PAGE, cmd["left"], size - len(out))
            addr = cmd["addr"]
            if "data" in cmd:  # GET_INFO's answer, already made
                chunk = bytes(cmd["data"][addr : addr + n])
            elif _is_flash(addr):
                rom = self.board.chip
                got = []
                t = self._flash(t, lambda: got.append(rom.read_data(addr - XIP_BASE, n)), changes=False)
                chunk = got[0]
            else:
                chunk = self.board.bus.read_block(addr, n)
            t = self.link.occupy(t, n)
            out += chunk
            cmd["addr"] += n
            cmd["left"] -= n
        cmd["t"] = t
        self.clock.advance_to(t + BULK_LATENCY_S["v2-bulk-fs"])
        if cmd["left"] == 0:
            cmd["phase"] = "ack"
        return bytes(out)

    def _exec(self, addr: int, t: float) -> float:
        """EXEC: the core calls ``addr | 1`` (Thumb) with LR at the ROM's return point.

        Its time: the instructions run (Thumb half-words, ``CYCLES_PER_HALFWORD`` each, at
        clk_sys) and the bytes it shifts through the SSI (8 SCK each at clk_sys / BAUDR) overlap
        (the FIFOs decouple them): the longer counts; the boot ROM flash functions it calls add
        their flash time."""
        from unicorn import UC_HOOK_BLOCK

        from piflash.sim.cpu import StopReason
        from piflash.sim.probes.usb.timing import CYCLES_PER_HALFWORD

        board = self.board
        rom = board.chip
        cpu = board.cpu
        ssi = rom.port.ssi
        back = rom.entries["exec_return"]
        cpu.write_reg(13, 0x20041000)  # a stack below the model's boot stage 2 copy
        cpu.write_reg(14, back | 1)
        cpu.write_reg(16, 1 << 24)  # xPSR: Thumb
        cpu.write_reg(15, addr | 1)
        code = [0]

        def on_block(uc, address, size, user_data):
            code[0] += size

        hook = cpu.uc.hook_add(UC_HOOK_BLOCK, on_block)
        shifted = ssi.shifted
        self._busy_s = 0.0
        try:
            with self.probe.flushing():
                stop = cpu.run(EXEC_BUDGET, 600.0)
        finally:
            cpu.uc.hook_del(hook)
        if stop != StopReason.BKPT or cpu.pc != back:
            self.hung = True  # the ROM's USB task never gets control back
            return t
        cpu_s = code[0] / 2 * CYCLES_PER_HALFWORD / BOOT_CLK_SYS_HZ
        baudr = max(2, ssi.regs.get(0x14, BAUDR) & 0xFFFE)
        spi_s = (ssi.shifted - shifted) * 8 * baudr / BOOT_CLK_SYS_HZ
        self.clock.count("exec_halfwords", code[0] // 2)
        return t + max(cpu_s, spi_s) + self._busy_s

    def _reboot(self) -> None:
        """After REBOOT's acknowledgement: the chip resets into its flash; the BOOTSEL device
        leaves the bus."""
        board = self.board
        if board is not None:
            with self.probe.flushing():
                board.system_reset()
        self.unplug()


BOOTSEL_DEVICES["rp2040"] = SimBootselDevice


#: pico-sdk's USB stdio device: VID:PID 2E8A:000A (RP2040), product "Pico", the board's unique ID
#: as serial number (pico-sdk ``pico_stdio_usb/stdio_usb_descriptors.c``); the reset interface
#: (``pico/usb_reset_interface.h``): class FFh, subclass 00h, protocol 01h, no endpoints;
#: RESET_REQUEST_BOOTSEL 01h, RESET_REQUEST_FLASH 02h.
APP_PID, RESET_SUBCLASS, RESET_PROTOCOL, RESET_REQUEST_BOOTSEL, RESET_REQUEST_FLASH = 0x000A, 0x00, 0x01, 0x01, 0x02


class SimAppDevice(_PicoOnUsb):
    """An RP2040 board running pico-sdk firmware with USB stdio: CDC ACM (interfaces 0 and 1)
    and, unless ``reset_interface`` is False, the reset interface (2), whose BOOTSEL request
    (any request type, as ``resetd_control_xfer_cb`` checks only wIndex and bRequest) reboots the
    chip into its boot ROM: the device leaves the bus and a :class:`SimBootselDevice` takes its
    port (``replacement``; the backend swaps it in).

    :param board_name: / store: / address: as :class:`SimBootselDevice`.
    :param reset_interface: whether the firmware offers the reset interface.
    """

    kind = "app"

    def __init__(self, board_name: str, store: SimStore, address: int, reset_interface: bool = True) -> None:
        self.board_name, self.store, self.address = board_name, store, address
        try:
            self.serial = store.get(board_name).target_uid.upper()
        except Exception:
            self.serial = "0" * 16
        self.unplugged = False
        self.access_denied = False
        self.replacement = None
        self.preset = SimpleNamespace(name="app", vid=VID, pid=APP_PID, manufacturer="Raspberry Pi", product="Pico")
        self.strings = {1: "Raspberry Pi", 2: "Pico", 3: self.serial, 4: "Board CDC", 5: "Reset"}
        n = 3 if reset_interface else 2
        self.device_descriptor = _Desc(
            bLength=18,
            bDescriptorType=1,
            bcdUSB=0x0200,
            bDeviceClass=0xEF,
            bDeviceSubClass=2,
            bDeviceProtocol=1,
            bMaxPacketSize0=64,
            idVendor=VID,
            idProduct=APP_PID,
            bcdDevice=0x0100,
            iManufacturer=1,
            iProduct=2,
            iSerialNumber=3,
            bNumConfigurations=1,
            bus=1,
            address=address,
            port_number=address,
            port_numbers=(address,),
            speed=2,
        )
        self.config_descriptor = _Desc(
            bLength=9,
            bDescriptorType=2,
            wTotalLength=9 + 66 + (9 if reset_interface else 0),
            bNumInterfaces=n,
            bConfigurationValue=1,
            iConfiguration=0,
            bmAttributes=0x80,
            bMaxPower=50,
        )
        self.interfaces = {
            0: _Desc(
                bLength=9,
                bDescriptorType=4,
                bInterfaceNumber=0,
                bAlternateSetting=0,
                bNumEndpoints=1,
                bInterfaceClass=0x02,
                bInterfaceSubClass=0x02,
                bInterfaceProtocol=0x00,
                iInterface=4,
            ),
            1: _Desc(
                bLength=9,
                bDescriptorType=4,
                bInterfaceNumber=1,
                bAlternateSetting=0,
                bNumEndpoints=2,
                bInterfaceClass=0x0A,
                bInterfaceSubClass=0x00,
                bInterfaceProtocol=0x00,
                iInterface=0,
            ),
        }
        self.endpoints = {
            0: [
                _Desc(
                    bLength=7,
                    bDescriptorType=5,
                    bEndpointAddress=0x81,
                    bmAttributes=0x03,
                    wMaxPacketSize=8,
                    bInterval=16,
                    bRefresh=0,
                    bSynchAddress=0,
                )
            ],
            1: [SimBootselDevice._ep(0x02), SimBootselDevice._ep(0x82)],
        }
        if reset_interface:
            self.interfaces[2] = _Desc(
                bLength=9,
                bDescriptorType=4,
                bInterfaceNumber=2,
                bAlternateSetting=0,
                bNumEndpoints=0,
                bInterfaceClass=0xFF,
                bInterfaceSubClass=RESET_SUBCLASS,
                bInterfaceProtocol=RESET_PROTOCOL,
                iInterface=5,
            )
            self.endpoints[2] = []

    def claim(self, interface: int) -> None:
        self.check_present()

    def release(self, interface: int) -> None:
        pass

    def clear_halt(self, ep: int) -> None:
        self.check_present()

    def control(self, request_type: int, request: int, value: int, index: int, length: int, data: bytes = b"") -> bytes:
        """The reset interface's requests; anything else stalls (the CDC requests are not
        modelled)."""
        import usb.core

        self.check_present()
        if 2 in self.interfaces and index == 2 and request == RESET_REQUEST_BOOTSEL:
            self.unplugged = True  # reset_usb_boot(): the chip restarts in its boot ROM
            self.replacement = bootsel_device(self.board_name, self.store, self.address)
            return b""
        if 2 in self.interfaces and index == 2 and request == RESET_REQUEST_FLASH:
            return b""  # watchdog_reboot: the same firmware comes back
        raise usb.core.USBError("Pipe error", -9, errno.EPIPE)

    def bulk_out(self, ep: int, data: bytes, timeout_ms: int) -> int:
        self.check_present()
        return len(data)  # the CDC data interface swallows what it is sent

    def bulk_in(self, ep: int, size: int, timeout_ms: int) -> bytes:
        import usb.core

        self.check_present()
        raise usb.core.USBError("Operation timed out", -7, errno.ETIMEDOUT)
