"""A Pico in USB BOOTSEL mode as a transport of its own: the boot ROM's PICOBOOT interface, through pyusb.

No debug probe: the RP2040's boot ROM (USB 2E8A:0003) offers a vendor interface with commands
to take exclusive access, leave XIP, erase, write and read flash, run code and reboot (RP2040
datasheet 2.8.5 "USB PICOBOOT Interface"; pico-sdk ``boot/picoboot.h``; the RP2350's ROM,
2E8A:000F, has the same commands and more: RP2350 datasheet 5.6). A command is 32 bytes on the
bulk OUT endpoint (dMagic 431FD10Bh, dToken, bCmdId, bCmdSize, dTransferLength, 16 bytes of
arguments), then its data in the direction of bCmdId bit 7, then an empty packet the other way
as the acknowledgement; a refused command stalls both endpoints and GET_COMMAND_STATUS (42h)
says why, INTERFACE_RESET (41h) clears it (2.8.5.3).

Names. ``picoboot:`` picks the sole BOOTSEL device; ``picoboot:TEXT`` the one whose USB port path
(``BUS-PORT[.PORT...]``, as ``/sys/bus/usb/devices`` names it) or boot ROM serial number contains
TEXT. An RP2040's serial names its ROM version, not the board (six hex digits of SYSINFO's
GITREF_RP2040 and six of the ROM's git revision: pico-bootrom-rp2040 usb_boot_device.c), so boards
are told apart by the port they sit on and, once open, by their flash's unique ID, which the core
reads itself (piflash's helper, targetcode/picoboot_ops.c, run by EXEC). The probe ID piflash records is
``picoboot:PORT-PATH``: the fixture's slot, as a probe's unique ID is for a debug probe.

An RP2350's ROM (RP2350 datasheet 5.6; pico-bootrom-rp2350 ``nsboot``) refuses EXEC, REBOOT and
VECTORIZE_FLASH (UNKNOWN_CMD) and adds REBOOT2 and GET_INFO; its serial number is the chip's OTP
ID (so ``picoboot:SERIAL`` names a board). On it piflash runs nothing on the chip: the board's ID
comes from GET_INFO (CHIP_INFO, the same ID pico-sdk's ``pico_get_unique_board_id`` gives), page
CRCs are computed here from a READ of the flash, FLASH_ERASE erases (by 4 KiB sectors, as the
ROM always does there) and REBOOT2 reboots (:meth:`PicobootConnection.prepare` and the methods
after it choose by the boot ROM's version, :class:`BootRom`).

Every wait is bounded (:func:`command_timeout`); errors are piflash's (:mod:`piflash.errors`).
pyusb is imported only when a function here is called.
"""

from __future__ import annotations

import errno
import struct
from dataclasses import dataclass
from importlib import resources
from types import ModuleType
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Union

from piflash.errors import (
    NoProbeError,
    PicobootError,
    PiflashError,
    ProbeBusyError,
    ProbeLostError,
    ProbePermissionError,
    ProbeTimeoutError,
    SeveralProbesError,
)
from piflash.probe import probetable

if TYPE_CHECKING:
    from piflash.probe.selector import ProbeSelector

__all__ = [
    "PREFIX",
    "BootselDevice",
    "PicobootConnection",
    "PicobootError",
    "is_picoboot",
    "list_devices",
    "select_device",
    "RunningPico",
    "list_running",
    "reboot_to_bootsel",
    "command_timeout",
    "STATUS_NAMES",
    "FLASH_BASE",
    "SECTOR",
    "PAGE",
    "device_named",
]

#: The probe ID prefix.
PREFIX = "picoboot:"
#: Raspberry Pi's vendor ID.
VID = 0x2E8A


@dataclass(frozen=True)
class BootRom:
    """What a boot ROM's USB product ID says: the chip, and the PICOBOOT dialect its ROM speaks.

    :ivar chip: the chip's pyOCD target type (str), what ``piflash probes`` reports and ``--target``
        is checked against.
    :ivar version: the boot ROM's major version (int; its header at 0x12, RP2040 datasheet 2.8.2,
        RP2350 datasheet 5.4.1): 1 runs piflash's helper by EXEC and reboots by REBOOT; 2 refuses
        EXEC and REBOOT and has REBOOT2 and GET_INFO (the chip's OTP ID), so piflash runs nothing
        on the chip there (RP2350 datasheet 5.6).
    """

    chip: str
    version: int


#: The boot ROMs' product IDs (RP2040 datasheet 2.8.4; RP2350 datasheet 5.6.1). The one table of
#: chip names outside :mod:`piflash.targets`, on purpose: the probe layer sits below the targets
#: (it may not import their family table), and a USB product ID is what names the chip of a
#: device in BOOTSEL mode before anything is opened; the code here asks :attr:`BootRom.version`.
BOOT_ROMS = {0x0003: BootRom("rp2040", 1), 0x000F: BootRom("rp2350", 2)}
#: Product ID -> chip (the pyOCD target type), from :data:`BOOT_ROMS`.
CHIPS = {pid: rom.chip for pid, rom in BOOT_ROMS.items()}
_ROM_OF_CHIP = {rom.chip: rom for rom in BOOT_ROMS.values()}
MAGIC = 0x431FD10B
IF_RESET, IF_CMD_STATUS = 0x41, 0x42
#: Commands (pico-sdk boot/picoboot.h ``enum picoboot_cmd_id``).
EXCLUSIVE_ACCESS, REBOOT, FLASH_ERASE, READ, WRITE, EXIT_XIP, ENTER_CMD_XIP, EXEC = (
    0x01,
    0x02,
    0x03,
    0x84,
    0x05,
    0x06,
    0x07,
    0x08,
)
REBOOT2, GET_INFO = 0x0A, 0x8B
#: GET_INFO type SYS and its CHIP_INFO flag; REBOOT2 type NORMAL (pico-sdk boot/picoboot.h,
#: boot/bootrom_constants.h, boot/picoboot_constants.h).
GET_INFO_SYS, SYS_INFO_CHIP_INFO, REBOOT2_NORMAL = 1, 0x01, 0x0
#: Bytes one READ brings for the host-side CRCs of an RP2350 (64 KiB: a bounded command).
READ_CHUNK = 0x10000
#: Status codes (``enum picoboot_status``; RP2040 datasheet 2.8.5.5; 9 and up are RP2350's).
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
    9: "INVALID_STATE",
    10: "NOT_PERMITTED",
    11: "INVALID_ARG",
    12: "BUFFER_TOO_SMALL",
    13: "PRECONDITION_NOT_MET",
    14: "MODIFIED_DATA",
    15: "INVALID_DATA",
    16: "NOT_FOUND",
    17: "UNSUPPORTED_MODIFICATION",
}
#: XIP flash base, flash page (program unit) and sector (FLASH_ERASE unit), bytes (2.8.5.4).
FLASH_BASE, PAGE, SECTOR = 0x10000000, 256, 4096
#: Where the flash-ID code is put: the start of SRAM, as picotool puts its own small programs.
CODE_ADDRESS = 0x20000000
#: Bounds of a command's wait, seconds: USB and the ROM's own work, plus the flash's datasheet
#: maxima for what it erases or programs (Winbond W25Q16JV 9.6: sector erase 400 ms, page
#: program 3 ms), doubled for other flash parts.
BASE_TIMEOUT_S, SECTOR_MAX_S, PAGE_MAX_S, BYTES_PER_S = 2.0, 0.8, 0.006, 200_000


#: piflash's helper run by EXEC (targetcode/picoboot_ops.c): its request block, its results.
OPS_PARAMS, OPS_RESULTS, OPS_MAGIC = 0x20001000, 0x20001100, 0x504F4250
OP_FAST_SPI, OP_CRC_PAGES, OP_ERASE, OP_UNIQUE_ID, OP_JEDEC_ID = 1, 2, 3, 4, 5
#: Pages one OP_CRC_PAGES request covers (256 KiB: a bounded EXEC, about 0.1 s; 4 KiB of results).
CRC_PAGES_PER_EXEC = 1024


def _ops_code() -> bytes:
    return resources.files("piflash.data").joinpath("picoboot_ops.bin").read_bytes()


def is_picoboot(probe: Union[str, ProbeSelector, None]) -> bool:
    """Whether a probe selector (str, :class:`~piflash.probe.ProbeSelector` or None) names a
    BOOTSEL device (``picoboot`` or ``picoboot:...``, any case). Does not check the rest."""
    from piflash.probe.selector import PROBE_KINDS, kind_of

    if not probe:
        return False
    if hasattr(probe, "kind"):
        return probe.kind is PROBE_KINDS["picoboot"]
    text = str(probe).strip().lower()
    return text == "picoboot" or kind_of(text) is PROBE_KINDS["picoboot"]


def command_timeout(erase_bytes: int = 0, program_bytes: int = 0, data_bytes: int = 0) -> float:
    """Seconds to wait for one command that erases ``erase_bytes``, programs ``program_bytes``
    and moves ``data_bytes`` over USB (full speed: at least 200 kB/s counted)."""
    return (
        BASE_TIMEOUT_S
        + -(-erase_bytes // SECTOR) * SECTOR_MAX_S
        + -(-program_bytes // PAGE) * PAGE_MAX_S
        + data_bytes / BYTES_PER_S
    )


@dataclass
class BootselDevice:
    """One device in BOOTSEL mode on the USB bus.

    :ivar chip: the chip's pyOCD target type (:data:`BOOT_ROMS`).
    :ivar port_path: ``BUS-PORT[.PORT...]`` (str).
    :ivar serial: the boot ROM's USB serial number, or None when this user may not open it.
    :ivar accessible: whether this process may open it (False: the udev rules are missing).
    """

    chip: str
    port_path: str
    serial: Optional[str]
    accessible: bool
    device: Any = None  #: the pyusb ``usb.core.Device``

    @property
    def rom(self) -> BootRom:
        """The :class:`BootRom` of :attr:`chip`."""
        return _ROM_OF_CHIP[self.chip]

    @property
    def probe_id(self) -> str:
        """``picoboot:PORT-PATH``, what piflash records as the probe ID."""
        return PREFIX + self.port_path

    def to_dict(self) -> Dict[str, Any]:
        """For ``piflash probes --json``."""
        return {
            "probe_id": self.probe_id,
            "kind": "bootsel",
            "target": self.chip,
            "serial": self.serial,
            "accessible": self.accessible,
        }


def _usb() -> ModuleType:
    """pyusb, imported on first use; with ``PIFLASH_SIM_USB`` set, on the simulated bus
    (:func:`piflash.probe.usbscan.install_simulated_bus`)."""
    import usb.core
    import usb.util

    from piflash.probe.usbscan import install_simulated_bus

    install_simulated_bus()
    module: ModuleType = usb
    return module


def list_devices() -> List[BootselDevice]:
    """Every RP2040/RP2350 in BOOTSEL mode on the USB bus, in port order."""
    usb = _usb()
    found = []
    try:
        devices = list(usb.core.find(find_all=True, idVendor=VID) or ())
    except usb.core.NoBackendError:  # no libusb on this machine: no USB devices to see
        return []
    for dev in devices:
        chip = CHIPS.get(dev.idProduct)
        if chip is None:
            continue
        path = _port_path(dev)
        serial, accessible = None, True
        try:
            dev.get_active_configuration()  # opens the device: EACCES without the udev rules
            serial = usb.util.get_string(dev, dev.iSerialNumber)
        except usb.core.USBError as err:
            accessible = err.errno not in (errno.EACCES, errno.EPERM)
        except ValueError:  # pyusb: no language IDs, so no strings
            pass
        found.append(BootselDevice(chip, path, serial, accessible, dev))
    return sorted(found, key=lambda d: d.port_path)


@dataclass
class RunningPico:
    """A USB device running firmware that may offer pico-sdk's reset interface.

    :ivar port_path: ``BUS-PORT[.PORT...]``. :ivar vid_pid: ``"2e8a:000a"``.
    :ivar product: / serial: its strings (None when they cannot be read).
    :ivar interface: the reset interface's number, or None when the firmware has none.
    """

    port_path: str
    vid_pid: str
    product: Optional[str]
    serial: Optional[str]
    interface: Optional[int]
    device: Any = None  #: the pyusb ``usb.core.Device``

    @property
    def probe_id(self) -> str:
        """``picoboot:PORT-PATH``: the ID it will have in BOOTSEL mode."""
        return PREFIX + self.port_path

    def to_dict(self) -> Dict[str, Any]:
        """For ``piflash probes --json``."""
        return {
            "probe_id": self.probe_id,
            "kind": "running",
            "vid_pid": self.vid_pid,
            "product": self.product,
            "serial": self.serial,
            "reset_interface": self.interface is not None,
        }


#: pico-sdk's reset interface (``pico/usb_reset_interface.h``): class, subclass, protocol and the
#: request that reboots into BOOTSEL (``reset_interface.c`` ``resetd_control_xfer_cb``; picotool
#: sends it as a class request to the interface, wValue the BOOTSEL interfaces to disable: 0).
RESET_INTERFACE = (0xFF, 0x00, 0x01)
RESET_REQUEST_BOOTSEL = 0x01
#: Vendor IDs whose devices are listed as running Picos even without the reset interface (to
#: say why they cannot be rebooted): Raspberry Pi's.
PICO_VIDS = (VID,)
#: Seconds a rebooted Pico has to come back in BOOTSEL mode (the boot ROM enumerates in well
#: under a second; the host's hub and udev add some).
BOOTSEL_APPEAR_S = 10.0


def _permission_fix() -> str:
    """The fix for a device this user may not open (piflash's udev rules and group)."""
    import getpass

    from piflash.probe.permissions import fix_text

    return "install piflash's udev rules and group: " + fix_text(getpass.getuser())


def _port_path(dev: Any) -> str:
    ports = getattr(dev, "port_numbers", None) or (dev.address,)
    return "%d-%s" % (dev.bus, ".".join(str(p) for p in ports))


def list_running() -> List[RunningPico]:
    """USB devices (not in BOOTSEL mode) that offer the reset interface, and Raspberry Pi devices
    that do not, in port order."""
    usb = _usb()
    try:
        devices = list(usb.core.find(find_all=True) or ())
    except usb.core.NoBackendError:
        return []
    found = []
    for dev in devices:
        if dev.idVendor == VID and dev.idProduct in CHIPS:
            continue
        try:
            number = next(
                (
                    intf.bInterfaceNumber
                    for cfg in dev
                    for intf in cfg
                    if (intf.bInterfaceClass, intf.bInterfaceSubClass, intf.bInterfaceProtocol) == RESET_INTERFACE
                ),
                None,
            )
        except usb.core.USBError:
            continue
        if number is None and (dev.idVendor not in PICO_VIDS or probetable.lookup(dev.idVendor, dev.idProduct)):
            continue  # not a Pico, or a debug probe (the Debug Probe is 2E8A too)
        strings = []
        for index in (dev.iProduct, dev.iSerialNumber):
            try:
                strings.append(usb.util.get_string(dev, index) if index else None)
            except (usb.core.USBError, ValueError):
                strings.append(None)
        found.append(
            RunningPico(
                _port_path(dev), "%04x:%04x" % (dev.idVendor, dev.idProduct), strings[0], strings[1], number, dev
            )
        )
    return sorted(found, key=lambda d: d.port_path)


def reboot_to_bootsel(pico: RunningPico, wait_s: float = BOOTSEL_APPEAR_S) -> BootselDevice:
    """Ask a running Pico's firmware to reboot into its boot ROM (the reset interface's BOOTSEL
    request, as ``picotool -f`` does) and wait for it at the same USB port in BOOTSEL mode.

    :raises NoProbeError: its firmware has no reset interface (hold BOOTSEL instead).
    :raises ProbePermissionError: this user may not open it. :raises ProbeTimeoutError: it did not
        come back in BOOTSEL mode within ``wait_s`` seconds.
    """
    import time

    usb = _usb()
    if pico.interface is None:
        raise NoProbeError(
            f"{pico.probe_id} ({pico.vid_pid} {pico.product or ''}) runs firmware without the USB "
            "reset interface: piflash cannot reboot it into BOOTSEL mode",
            hint="hold BOOTSEL while plugging the board in (or while pressing RUN/reset); "
            "pico-sdk firmware with USB stdio offers the interface",
        )
    dev = pico.device
    try:
        usb.util.claim_interface(dev, pico.interface)
        dev.ctrl_transfer(0x21, RESET_REQUEST_BOOTSEL, 0, pico.interface, None, 2000)
    except usb.core.USBError as err:
        if err.errno in (errno.EACCES, errno.EPERM):
            raise ProbePermissionError(
                f"{pico.probe_id}: this user may not open the running Pico to reboot it", hint=_permission_fix()
            ) from None
        # EPIPE/EIO/ENODEV: the chip reset before the request's status stage, as it does
    finally:
        try:
            usb.util.dispose_resources(dev)
        except usb.core.USBError:
            pass
    deadline = time.monotonic() + wait_s
    while True:
        back = [d for d in list_devices() if d.port_path == pico.port_path]
        if back:
            return back[0]
        if time.monotonic() >= deadline:
            raise ProbeTimeoutError(
                f"{pico.probe_id} did not come back in BOOTSEL mode within {wait_s:.0f} s of the reboot request",
                seconds=wait_s,
                hint="hold BOOTSEL while plugging the board in",
            )
        time.sleep(0.2)


def _selector(probe: Union[str, ProbeSelector, None]) -> ProbeSelector:
    """The :class:`~piflash.probe.ProbeSelector` of ``probe`` (str, selector or None: ``picoboot``).

    :raises ProbeSyntaxError: it cannot be a selector, or it names another kind of probe.
    """
    from piflash.errors import ProbeSyntaxError
    from piflash.probe.selector import ProbeSelector

    selector = ProbeSelector.parse(probe or "picoboot")
    if selector.transport != "picoboot":
        raise ProbeSyntaxError(
            f"{selector} is not a Pico in BOOTSEL mode: use picoboot, picoboot:SERIAL or picoboot:BUS-PORT"
        )
    return selector


def device_named(device: BootselDevice, probe: Union[str, ProbeSelector, None]) -> bool:
    """Whether the probe selector ``probe`` (``picoboot``, ``picoboot:TEXT``, ``picoboot:TEXT*``;
    str or :class:`~piflash.probe.ProbeSelector`) names ``device``: ``picoboot`` alone names every
    device, else TEXT is its whole port path or its whole USB serial number (any case), or, written
    with ``*``, the start of one of them.

    :raises ProbeSyntaxError: ``probe`` is not a BOOTSEL selector.
    """
    return _selector(probe).matches(device.probe_id, PREFIX + device.serial if device.serial else None)


def select_device(probe: Union[str, ProbeSelector, None], reboot_running: bool = True) -> BootselDevice:
    """The BOOTSEL device ``probe`` names (``picoboot``, ``picoboot:TEXT``; see :func:`device_named`).
    With ``reboot_running``, when none is in BOOTSEL mode but one running Pico matches (its whole
    port path or its whole USB serial number), it is rebooted into BOOTSEL through its reset
    interface first.

    :raises ProbeSyntaxError: ``probe`` is not a BOOTSEL selector (exit 2).
    :raises NoProbeError: none matches, or the one that matches cannot be rebooted (exit 7).
    :raises SeveralProbesError: several match (exit 8).
    :raises ProbePermissionError: it matches but this user may not open it (exit 9).
    :raises ProbeTimeoutError: a rebooted Pico did not come back in BOOTSEL mode (exit 23).
    """
    from piflash.probe.selector import no_probe_error

    selector = _selector(probe)
    devices = list_devices()
    matches = [d for d in devices if device_named(d, selector)]
    if not matches and reboot_running:
        running = [r for r in list_running() if selector.matches(r.probe_id, PREFIX + r.serial if r.serial else None)]
        if len(running) > 1:
            names = ", ".join(f"{r.probe_id} ({r.vid_pid} {r.product or ''})" for r in running)
            raise SeveralProbesError(
                f"{len(running)} running Picos match {selector}: {names}",
                [r.probe_id for r in running],
                hint="name one by its port: -u picoboot:PORT-PATH",
            )
        if running:
            return reboot_to_bootsel(running[0])
    if not matches:
        seen = [d.probe_id for d in devices] + [PREFIX + d.serial for d in devices if d.serial]
        raise no_probe_error(
            selector,
            seen,
            hint="hold BOOTSEL while plugging the board in (or while pressing RUN/reset); "
            "'piflash probes' lists what is attached",
        )
    if len(matches) > 1:
        names = ", ".join(d.probe_id for d in matches)
        raise SeveralProbesError(
            f"{len(matches)} Picos in BOOTSEL mode match {selector}: {names}",
            [d.probe_id for d in matches],
            hint="name one by its port: -u picoboot:PORT-PATH (an RP2040's serial "
            "is its ROM version, the same on every board)",
        )
    chosen = matches[0]
    if not chosen.accessible:
        raise ProbePermissionError(
            f"{chosen.probe_id}: this user may not open the BOOTSEL device", hint=_permission_fix()
        )
    return chosen


class PicobootConnection:
    """An open PICOBOOT interface.

    :param device: from :func:`select_device`.

    Use as a context manager (claims the interface; releases it and pyusb's resources on exit).
    Every method raises :class:`PicobootError` (exit 11, the ROM's status), ProbeLostError (the
    device left the bus, exit 15), ProbeTimeoutError (no answer within the command's bound) or
    ProbeBusyError (another program has the interface).
    """

    def __init__(self, device: BootselDevice) -> None:
        self.info = device
        self.dev: Any = device.device  # pyusb usb.core.Device
        self._token = 0
        self._jedec: Optional[bytes] = None
        self.interface: Optional[int] = None
        self.ep_out: Optional[int] = None
        self.ep_in: Optional[int] = None
        self.touched = False  #: a command that changes the board was sent

    def __enter__(self) -> "PicobootConnection":
        usb = _usb()
        try:
            cfg = self.dev.get_active_configuration()
            intf = next((i for i in cfg if i.bInterfaceClass == 0xFF and i.bNumEndpoints == 2), None)
            if intf is None:
                raise ProbeLostError(
                    f"{self.info.probe_id} has no PICOBOOT interface",
                    hint="is it a Pico in BOOTSEL mode? 'piflash probes' lists it",
                )
            eps = list(intf)
            self.ep_out, self.ep_in = eps[0].bEndpointAddress, eps[1].bEndpointAddress
            self.interface = intf.bInterfaceNumber
            usb.util.claim_interface(self.dev, self.interface)
        except usb.core.USBError as err:
            raise self._translate(err, "opening the PICOBOOT interface", 1.0) from None
        return self

    def __exit__(self, *exc: object) -> None:
        usb = _usb()
        try:
            if self.interface is not None:
                usb.util.release_interface(self.dev, self.interface)
        except usb.core.USBError:
            pass
        finally:
            usb.util.dispose_resources(self.dev)

    # -- the protocol ----------------------------------------------------------------------------
    def command(
        self,
        cmd_id: int,
        args: bytes = b"",
        size: int = 0,
        data: Optional[bytes] = None,
        transfer: int = 0,
        timeout: float = BASE_TIMEOUT_S,
    ) -> bytes:
        """One PICOBOOT command: ``args`` (``size`` bytes of them count as bCmdSize), then
        ``data`` out or ``transfer`` bytes in, then the acknowledgement. Returns the IN data."""
        usb = _usb()
        name = {
            EXCLUSIVE_ACCESS: "EXCLUSIVE_ACCESS",
            REBOOT: "REBOOT",
            FLASH_ERASE: "FLASH_ERASE",
            READ: "READ",
            WRITE: "WRITE",
            EXIT_XIP: "EXIT_XIP",
            ENTER_CMD_XIP: "ENTER_CMD_XIP",
            EXEC: "EXEC",
            REBOOT2: "REBOOT2",
            GET_INFO: "GET_INFO",
        }.get(cmd_id, hex(cmd_id))
        self._token = (self._token + 1) & 0xFFFFFFFF
        length = len(data) if data is not None else transfer
        packet = struct.pack("<IIBBxxI", MAGIC, self._token, cmd_id, size, length) + args.ljust(16, b"\0")
        ms = int(timeout * 1000)
        got = b""
        try:
            self.dev.write(self.ep_out, packet, 3000)
            if cmd_id & 0x80:
                if transfer:
                    got = bytes(self.dev.read(self.ep_in, transfer, ms))
                    if len(got) != transfer:
                        raise ProbeLostError(f"{self.info.probe_id}: {name} returned {len(got)} of {transfer} bytes")
                self.dev.write(self.ep_out, b"", ms)
            else:
                if data:
                    self.dev.write(self.ep_out, data, ms)
                self.dev.read(self.ep_in, 64, ms)
        except usb.core.USBError as err:
            if err.errno == errno.EPIPE:
                raise self._refused(name) from None
            raise self._translate(err, name, timeout) from None
        return got

    def _refused(self, name: str) -> PiflashError:
        """The endpoints stalled: read the status, reset the interface, say what the ROM said."""
        usb = _usb()
        try:
            raw = self.dev.ctrl_transfer(0xC1, IF_CMD_STATUS, 0, self.interface, 16, 1000)
            _, status, _, _ = struct.unpack_from("<IIBB", bytes(raw))
            self.dev.ctrl_transfer(0x41, IF_RESET, 0, self.interface, None, 1000)
            for ep in (self.ep_in, self.ep_out):
                self.dev.clear_halt(ep)
        except usb.core.USBError as err:
            return self._translate(err, name + " status", 1.0)
        text = STATUS_NAMES.get(status, str(status))
        return PicobootError(
            name,
            status,
            text,
            f"the boot ROM refused {name}: {text}",
            hint=_STATUS_HINTS.get(
                text, "run the command again; if it repeats, unplug the board and put it back in BOOTSEL mode"
            ),
        )

    def _translate(self, err: Exception, what: str, timeout: float) -> PiflashError:
        code = getattr(err, "errno", None)
        pid = self.info.probe_id
        if code == errno.ENODEV or code == errno.EIO or code == errno.ENOENT:
            state = "the flash may be partly written" if self.touched else "its flash was not changed"
            return ProbeLostError(
                f"{pid} left the USB bus during {what}: {state}",
                hint="the board was unplugged or rebooted: put it back in BOOTSEL mode and run the same command again",
            )
        if code == errno.ETIMEDOUT:
            return ProbeTimeoutError(
                f"{pid} did not answer {what} within {timeout:.1f} s",
                seconds=timeout,
                hint="unplug the board and put it back in BOOTSEL mode (hold BOOTSEL while "
                "plugging it in); the flash may be partly written: flash it again",
            )
        if code == errno.EBUSY:
            return ProbeBusyError(
                f"{pid} is in use by another program (its PICOBOOT interface is claimed)",
                hint="close picotool or the other piflash using this board, then run again",
            )
        if code in (errno.EACCES, errno.EPERM):
            return ProbePermissionError(f"{pid}: this user may not open the BOOTSEL device", hint=_permission_fix())
        return ProbeLostError(f"{pid}: USB error during {what}: {getattr(err, 'strerror', None) or err}")

    # -- commands ---------------------------------------------------------------------------------
    def exclusive(self, mode: int = 1) -> None:
        """EXCLUSIVE_ACCESS: 1 keeps the mass storage drive from writing meanwhile."""
        self.command(EXCLUSIVE_ACCESS, bytes([mode]), 1)

    def exit_xip(self) -> None:
        """EXIT_XIP: the flash in serial command mode (needed before erase and write)."""
        self.command(EXIT_XIP)

    def erase(self, addr: int, size: int) -> None:
        """FLASH_ERASE ``size`` bytes from ``addr`` (both 4 KiB aligned; by sectors)."""
        self.touched = True
        self.command(FLASH_ERASE, struct.pack("<II", addr, size), 8, timeout=command_timeout(erase_bytes=size))

    def write(self, addr: int, data: bytes) -> None:
        """WRITE ``data`` at ``addr`` (flash: 256-byte aligned pages, programmed, not erased)."""
        self.touched = self.touched or addr < 0x20000000
        self.command(
            WRITE,
            struct.pack("<II", addr, len(data)),
            8,
            data=data,
            timeout=command_timeout(program_bytes=len(data), data_bytes=len(data)),
        )

    def read(self, addr: int, size: int) -> bytes:
        """READ ``size`` bytes from ``addr``."""
        return self.command(
            READ, struct.pack("<II", addr, size), 8, transfer=size, timeout=command_timeout(data_bytes=size * 3)
        )

    def exec(self, addr: int) -> None:
        """EXEC: the core calls the Thumb code at ``addr`` and returns."""
        self.command(EXEC, struct.pack("<I", addr), 4)

    def reboot(self, delay_ms: int = 100) -> None:
        """Reboot into the flash after ``delay_ms``: REBOOT with dPC 0 (a normal boot) on an
        RP2040, REBOOT2 with type NORMAL on an RP2350 (which refuses REBOOT)."""
        if self.info.rom.version >= 2:
            self.command(REBOOT2, struct.pack("<IIII", REBOOT2_NORMAL, delay_ms, 0, 0), 16)
            return
        self.command(REBOOT, struct.pack("<III", 0, 0x20042000, delay_ms), 12)

    def get_info_sys(self, flags: int) -> List[int]:
        """RP2350 GET_INFO type SYS: the words after the count (the flags returned first, then
        the values in flag order; RP2350 datasheet 5.6.4.11)."""
        got = self.command(GET_INFO, struct.pack("<BBHIII", GET_INFO_SYS, 0, 0, flags, 0, 0), 16, transfer=256)
        count = struct.unpack_from("<I", got)[0]
        if not 1 <= count <= 63:
            raise PicobootError(
                "GET_INFO",
                0,
                "BAD_ANSWER",
                f"{self.info.probe_id}: GET_INFO answered {count} words",
                hint="unplug the board and put it back in BOOTSEL mode, then run again",
            )
        return list(struct.unpack_from("<%dI" % count, got, 4))

    def prepare(self) -> None:
        """Make the flash commands ready after EXCLUSIVE_ACCESS: on an RP2040 EXIT_XIP, then
        piflash's helper loaded and the SPI clock raised by it; an RP2350 needs nothing."""
        if self.info.rom.version >= 2:
            return
        self.exit_xip()
        self.load_helper()
        self.fast_spi()

    def board_id(self) -> bytes:
        """The board's 8-byte unique ID: the RP2040's flash's (W25Q 4Bh, read by the helper),
        the RP2350's OTP chip ID (GET_INFO CHIP_INFO: CHIPID0 | CHIPID1 << 16, then CHIPID2 |
        CHIPID3 << 16; the ID is CHIPID3..CHIPID0, most significant byte first)."""
        if self.info.rom.version < 2:
            return self.flash_unique_id()
        words = self.get_info_sys(SYS_INFO_CHIP_INFO)
        if len(words) < 4 or not words[0] & SYS_INFO_CHIP_INFO:
            raise PicobootError(
                "GET_INFO",
                0,
                "BAD_ANSWER",
                f"{self.info.probe_id}: GET_INFO gave no chip ID",
                hint="unplug the board and put it back in BOOTSEL mode, then run again",
            )
        return (words[2] | words[3] << 32).to_bytes(8, "big")

    # -- piflash's helper on the chip (targetcode/picoboot_ops.c) --------------------------------
    def load_helper(self) -> None:
        """Put the helper at :data:`CODE_ADDRESS` (after EXIT_XIP: it drives the SSI in serial
        mode). The other ``helper`` methods need it."""
        self.write(CODE_ADDRESS, _ops_code())

    def _op(
        self, op: int, address: int = 0, count: int = 0, timeout: float = BASE_TIMEOUT_S, results: int = 0
    ) -> bytes:
        """Run one helper request; returns ``results`` bytes of its results (read in the same
        READ as its status: the results follow the request block)."""
        self.write(OPS_PARAMS, struct.pack("<IIIII", OPS_MAGIC, op, address, count, 0xFFFFFFFF))
        self.command(EXEC, struct.pack("<I", CODE_ADDRESS), 4, timeout=timeout)
        gap = OPS_RESULTS - (OPS_PARAMS + 16)
        got = self.read(OPS_PARAMS + 16, 4 + (gap - 4 + results if results else 0))
        status = struct.unpack_from("<I", got)[0]
        if status != 0:
            raise PicobootError(
                "EXEC",
                status,
                "HELPER_REFUSED",
                f"{self.info.probe_id}: piflash's helper on the chip did not run (request {op}, answer {status:#x})",
                hint="unplug the board and put it back in BOOTSEL mode, then run again",
            )
        return got[gap:] if results else b""

    def fast_spi(self) -> None:
        """The SPI clock at clk_sys / 2 (24 MHz in BOOTSEL mode) for the rest of the session."""
        self._op(OP_FAST_SPI)

    def flash_unique_id(self) -> bytes:
        """The boot flash's 8-byte unique ID, as the flash sends it (W25Q 4Bh)."""
        return self._op(OP_UNIQUE_ID, results=8)

    def flash_jedec_id(self) -> Optional[bytes]:
        """The boot flash's 3-byte JEDEC ID (9Fh: manufacturer, memory type, capacity), read by
        the helper once per connection; None on an RP2350, whose boot ROM runs no code for the
        host.

        :raises PicobootError: the helper refused."""
        if self.info.rom.version >= 2:
            return None
        if self._jedec is None:
            self._jedec = self._op(OP_JEDEC_ID, results=4)[:3]
        return self._jedec

    def page_crcs(self, address: int, pages: int) -> List[int]:
        """CRC-32 (``binascii.crc32``'s) of each 256-byte flash page from ``address`` (XIP
        address, page aligned), computed by the chip (RP2040), or here from a READ (RP2350,
        which runs no code for the host)."""
        if self.info.rom.version >= 2:
            import zlib

            crcs: List[int] = []
            for first in range(0, pages * PAGE, READ_CHUNK):
                data = self.read(address + first, min(READ_CHUNK, pages * PAGE - first))
                crcs += [zlib.crc32(data[i : i + PAGE]) for i in range(0, len(data), PAGE)]
            return crcs
        out: List[int] = []
        for first in range(0, pages, CRC_PAGES_PER_EXEC):
            n = min(CRC_PAGES_PER_EXEC, pages - first)
            got = self._op(
                OP_CRC_PAGES,
                address - FLASH_BASE + first * PAGE,
                n,
                timeout=command_timeout(data_bytes=n * PAGE * 4),
                results=4 * n,
            )
            out += struct.unpack("<%dI" % n, got)
        return out

    def erase_range(self, address: int, size: int) -> None:
        """Erase ``size`` bytes from ``address`` (XIP address; both 4 KiB aligned): on an RP2040
        with the ROM's flash_range_erase through the helper, 64 KiB block erases where they fit,
        sectors elsewhere (FLASH_ERASE erases sector by sector only); on an RP2350 by
        FLASH_ERASE (its ROM erases by sectors there too)."""
        if self.info.rom.version >= 2:
            self.erase(address, size)
            return
        self.touched = True
        self._op(OP_ERASE, address - FLASH_BASE, size, timeout=command_timeout(erase_bytes=size))


#: What to do about a refused command, by status name.
_STATUS_HINTS = {
    "INVALID_ADDRESS": "the image reaches outside the flash the boot ROM accepts (0x10000000 up): check its "
    "addresses ('piflash info' shows the target's flash)",
    "BAD_ALIGNMENT": "a write or erase did not start on a page/sector boundary: this is a piflash bug, please report it",
    "NOT_PERMITTED": "the region is protected on this chip (RP2350 partition permissions or OTP): the boot ROM "
    "will not write it",
    "INTERLEAVED_WRITE": "the board's USB drive was written at the same time: do not copy files to it while "
    "piflash flashes",
    "REBOOTING": "the board is rebooting: wait for it to come back in BOOTSEL mode and run again",
}
