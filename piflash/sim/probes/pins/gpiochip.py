"""A simulated ``/dev/gpiochipN`` (GPIO character device, uAPI v2) with boards' SWD ports on its lines.

It answers the ioctls python-periphery's ``Cdev2GPIO`` makes (``include/uapi/linux/gpio.h``):
``GPIO_GET_CHIPINFO_IOCTL``, ``GPIO_V2_GET_LINEINFO_IOCTL`` and ``GPIO_V2_GET_LINE_IOCTL`` on the
chip, which returns a new file descriptor for the line request (here a real descriptor of a
regular file, registered with the seam), then ``GPIO_V2_LINE_SET_VALUES_IOCTL``,
``GPIO_V2_LINE_GET_VALUES_IOCTL`` and ``GPIO_V2_LINE_SET_CONFIG_IOCTL`` on that descriptor. A line
already requested is EBUSY, as the kernel's ``gpiod_request`` answers.

A board is wired to two lines (SWCLK, SWDIO) and optionally nRESET. Each rising edge of SWCLK is
one cycle of the board's :class:`~piflash.sim.debug.swdline.SwdLine`: the host's SWDIO bit where
its line is an output, none where it is an input (the target's pull-up then, or the target). What
the wire carried in that cycle is what a read of SWDIO returns until the next rising edge. nRESET
low (an output driving 0) holds the board in reset; an input, or an output driving 1 (which the
host must never do: counted in :attr:`GpioWire.driven_high`), releases it.

A line may also be only a board's nRESET, the board's SWD port being on a simulated spidev
(``BOARD@spidev:0.0:nreset=25``): a :class:`ResetTap`, charged on that spidev's clock, which keeps
what the line was set to (:attr:`ResetTap.history`) so that tests see the open-drain discipline.

Time: every ioctl is charged the host's CPU (:data:`GPIO_IOCTL_HOST_X86_S` times the host preset's
factor) and the kernel's (:data:`GPIO_IOCTL_KERNEL_S`), on a
:class:`~piflash.sim.probes.usb.timing.VirtualClock` per board; the chip's own time is the USB
probes' model, as for the simulated spidev.
"""

from __future__ import annotations

import errno
import os
import struct
from typing import Any, Dict, List, Optional

from piflash.sim.debug.swdline import SwdLine
from piflash.sim.probes.pins.spidev import SPIDEV_PRESET, BoardLine
from piflash.sim.probes.usb.firmware import DapFirmware
from piflash.sim.probes.usb.timing import DEFAULT_HOST, HostPreset, VirtualClock, get_host
from piflash.sim.store import SimStore

__all__ = ["SimGpioChip", "GpioWire", "ResetTap", "GPIO_IOCTL_HOST_X86_S", "GPIO_IOCTL_KERNEL_S"]

GPIO_GET_CHIPINFO_IOCTL = 0x8044B401
GPIO_V2_GET_LINEINFO_IOCTL = 0xC100B405
GPIO_V2_GET_LINE_IOCTL = 0xC250B407
GPIO_V2_LINE_GET_VALUES_IOCTL = 0xC010B40E
GPIO_V2_LINE_SET_CONFIG_IOCTL = 0xC110B40D
GPIO_V2_LINE_SET_VALUES_IOCTL = 0xC010B40F
FLAG_USED, FLAG_INPUT, FLAG_OUTPUT = 0x1, 0x4, 0x8
ATTR_ID_OUTPUT_VALUES = 0x2
#: Lines of the BCM2835/BCM2837 GPIO chip (GPIO 0-53), the Zero 2W's ``gpiochip0``.
CHIP_LINES = 54
#: struct gpio_v2_line_request: offsets[64] u32, consumer[32], config (flags u64, num_attrs u32,
#: padding u32[5], attrs[10] of (attr: id u32, padding u32, data u64; mask u64)), num_lines u32,
#: event_buffer_size u32, padding u32[5], fd s32.
_CONFIG_OFFSET = 64 * 4 + 32
_CONFIG_SIZE = 8 + 4 + 20 + 10 * 24
_NUM_LINES_OFFSET = _CONFIG_OFFSET + _CONFIG_SIZE
_FD_OFFSET = _NUM_LINES_OFFSET + 4 + 4 + 20
#: Host CPU per GPIO ioctl on the x86 machine (python-periphery's ``write``/``read`` and the
#: engine's share of a bit; 2.98 ioctls a bit), measured by ``benchmarks/pins_probe.py
#: --gpio-cost`` on 2026-12-07 (300 DPIDR reads, load average about 3): 2.94 us; times the
#: preset's factor.
GPIO_IOCTL_HOST_X86_S = 2.94e-6
#: Kernel time per GPIO ioctl on a Pi (syscall, gpiolib, the BCM2835 register write): an
#: assumption of 2 us, no published figure found; to measure on a Zero 2W.
GPIO_IOCTL_KERNEL_S = 2e-6


def _config(raw: bytes, base: int) -> "tuple[int, Optional[int]]":
    """(flags, output values or None) of a struct gpio_v2_line_config at ``base`` of ``raw``."""
    flags, num_attrs = struct.unpack_from("<QI", raw, base)
    values = None
    for i in range(min(num_attrs, 10)):
        attr_id, _pad, data, mask = struct.unpack_from("<IIQQ", raw, base + 32 + i * 24)
        if attr_id == ATTR_ID_OUTPUT_VALUES:
            values = data & mask
    return flags, values


class GpioWire(BoardLine):
    """One board on two (or three) lines of a chip.

    :param board_name: the simulated board. :param store: the board store.
    :param swclk: / swdio: / nreset: line offsets (int; nreset None).
    :ivar clock: the virtual clock. :ivar line: the board's SWD wire while open.
    :ivar cycles: SWCLK rising edges (int). :ivar ioctls: ioctls on this wire's lines (int).
    :ivar driven_high: times nRESET was driven high (int; the host must never).
    """

    def __init__(self, board_name: str, store: SimStore, swclk: int, swdio: int, nreset: Optional[int]) -> None:
        self.board_name = board_name
        self.swclk, self.swdio, self.nreset = swclk, swdio, nreset
        self.clock = VirtualClock()
        self.host: HostPreset = get_host(DEFAULT_HOST)
        self.firmware = DapFirmware(SPIDEV_PRESET, board_name, store, board_name, self.clock)
        self.firmware.wait_retry = 0
        self.line: Optional[SwdLine] = None
        self.clk_level = 0
        self.dio_out: Optional[int] = None  # the host's SWDIO output, or None when an input
        self.level = 1
        self.cycles = 0
        self.ioctls = 0
        self.driven_high = 0
        self._t = 0.0

    def tick(self) -> None:
        """One ioctl on this wire's lines: the host's and the kernel's time."""
        self.ioctls += 1
        clock = self.clock
        host_s = self.host.factor * GPIO_IOCTL_HOST_X86_S
        clock.charge("host", host_s)
        clock.charge("kernel", GPIO_IOCTL_KERNEL_S)
        clock.count("gpio_ioctls")
        self._t = max(self._t, clock.now) + host_s + GPIO_IOCTL_KERNEL_S
        clock.advance_to(self._t)

    def set_line(self, offset: int, value: Optional[int]) -> None:
        """Line ``offset`` now driven to ``value`` (0/1) or released (None)."""
        if offset == self.swclk:
            rising = value == 1 and self.clk_level == 0
            self.clk_level = value or 0
            if rising:
                line = self._line()
                bit = self.dio_out if self.dio_out is not None else 1
                self.level = line.clock(bit, 1, host_drives=1 if self.dio_out is not None else 0)
                self.cycles += 1
                self.clock.count("swd_cycles")
        elif offset == self.swdio:
            self.dio_out = value
        elif offset == self.nreset:
            if value == 1:
                self.driven_high += 1
            if value == 0:
                self._line()
            if self.firmware.probe is not None:
                self.firmware.probe.assert_reset(value == 0)

    def get_line(self, offset: int) -> int:
        """What the host reads on line ``offset``."""
        if offset == self.swdio:
            return self.dio_out if self.dio_out is not None else self.level
        if offset == self.nreset:
            return 1
        return self.clk_level

    def close(self) -> None:
        """Save and release the board."""
        self.firmware.close()
        self.line = None


class ResetTap:
    """A board's nRESET on one line of a chip, its SWD port elsewhere (a simulated spidev).

    :param device: the board's device (a :class:`~piflash.sim.probes.pins.spidev.SimSpidev`: its
        ``firmware``, ``clock``, ``host`` and ``_line()``). :param nreset: the line offset (int).
    :ivar history: what the host set the line to, in order (list of str: ``"in"`` released,
        ``"low"``, ``"high"``). :ivar driven_high: times it was driven high (int; never, by the
        host's rules). :ivar ioctls: ioctls on the line (int).
    """

    def __init__(self, device: Any, nreset: int) -> None:
        self.device = device
        self.nreset = nreset
        self.history: List[str] = []
        self.driven_high = 0
        self.ioctls = 0

    def tick(self) -> None:
        """One ioctl on the line, charged on the board's clock as :meth:`GpioWire.tick` does."""
        self.ioctls += 1
        clock = self.device.clock
        host_s = self.device.host.factor * GPIO_IOCTL_HOST_X86_S
        clock.charge("host", host_s)
        clock.charge("kernel", GPIO_IOCTL_KERNEL_S)
        clock.count("gpio_ioctls")
        clock.advance_to(clock.now + host_s + GPIO_IOCTL_KERNEL_S)

    def set_line(self, offset: int, value: Optional[int]) -> None:
        """nRESET driven to ``value`` (0/1) or released (None): low holds the board in reset."""
        self.history.append({None: "in", 0: "low", 1: "high"}[value])
        if value == 1:
            self.driven_high += 1
        if value == 0:
            self.device._line()  # the board is reached through its wire: open it
        firmware = self.device.firmware
        if firmware.probe is not None:
            firmware.probe.assert_reset(value == 0)

    def get_line(self, offset: int) -> int:
        """What the host reads: the board's pull-up, or low while the host holds it low."""
        return 0 if self.history[-1:] == ["low"] else 1

    def close(self) -> None:
        """Nothing of its own: the board is its spidev's."""


class _LineHandle:
    """The descriptor a GPIO_V2_GET_LINE_IOCTL returned: one request of one or more lines."""

    def __init__(self, chip: "SimGpioChip", offsets: List[int], flags: int, values: Optional[int]) -> None:
        self.chip = chip
        self.offsets = offsets
        self.path = ""
        self._apply(flags, values)

    def _apply(self, flags: int, values: Optional[int]) -> None:
        for i, offset in enumerate(self.offsets):
            out = bool(flags & FLAG_OUTPUT)
            value = ((values or 0) >> i) & 1 if out else None
            self.chip.set_line(offset, value)

    def opened(self) -> None:
        pass

    def closed(self) -> None:
        self.chip.release(self)

    def ioctl(self, request: int, arg: Any, mutate: bool = True) -> Any:
        view = memoryview(arg).cast("B")
        if request == GPIO_V2_LINE_SET_VALUES_IOCTL:
            bits, mask = struct.unpack_from("<QQ", bytes(view[:16]))
            for i, offset in enumerate(self.offsets):
                if mask >> i & 1:
                    self.chip.set_line(offset, bits >> i & 1)
            return 0
        if request == GPIO_V2_LINE_GET_VALUES_IOCTL:
            _bits, mask = struct.unpack_from("<QQ", bytes(view[:16]))
            bits = 0
            for i, offset in enumerate(self.offsets):
                if mask >> i & 1:
                    bits |= self.chip.get_line(offset) << i
            view[:8] = struct.pack("<Q", bits)
            return 0
        if request == GPIO_V2_LINE_SET_CONFIG_IOCTL:
            flags, values = _config(bytes(view), 0)
            self._apply(flags, values)
            return 0
        raise OSError(errno.ENOTTY, "Inappropriate ioctl for device")


class SimGpioChip:
    """One simulated GPIO chip and the boards on its lines.

    :param name: the chip's device name (``gpiochip0``). :param handles_dir: where line request
        descriptors' files are made (str).
    :ivar wires: the boards on it (:class:`GpioWire`).
    """

    def __init__(self, name: str, handles_dir: str) -> None:
        self.name = name
        self.handles_dir = handles_dir
        self.wires: List[GpioWire] = []
        self.taps: List[ResetTap] = []
        self._requested: Dict[int, _LineHandle] = {}
        self._n = 0

    def wire(self, board: str, store: SimStore, swclk: int, swdio: int, nreset: Optional[int]) -> GpioWire:
        """Wire ``board`` to these lines; returns the wire.

        :raises ValueError: a line already wired to another board.
        """
        if self._used() & {swclk, swdio, nreset}:
            raise ValueError("%s: a line of %s is wired twice" % (self.name, board))
        wire = GpioWire(board, store, swclk, swdio, nreset)
        self.wires.append(wire)
        return wire

    def reset_tap(self, device: Any, nreset: int) -> ResetTap:
        """Wire line ``nreset`` to the nRESET of ``device``'s board (a simulated spidev).

        :raises ValueError: the line is already wired, or the chip has no such line.
        """
        if nreset >= CHIP_LINES:
            raise ValueError("%s has lines 0-%d, not %d" % (self.name, CHIP_LINES - 1, nreset))
        if nreset in self._used():
            raise ValueError("%s: line %d is wired twice" % (self.name, nreset))
        tap = ResetTap(device, nreset)
        self.taps.append(tap)
        return tap

    def _used(self) -> set:
        used = {ln for w in self.wires for ln in (w.swclk, w.swdio, w.nreset) if ln is not None}
        return used | {t.nreset for t in self.taps}

    def _wire_of(self, offset: int) -> Optional[Any]:
        for wire in self.wires:
            if offset in (wire.swclk, wire.swdio, wire.nreset):
                return wire
        for tap in self.taps:
            if offset == tap.nreset:
                return tap
        return None

    def set_line(self, offset: int, value: Optional[int]) -> None:
        wire = self._wire_of(offset)
        if wire is not None:
            wire.tick()
            wire.set_line(offset, value)

    def get_line(self, offset: int) -> int:
        wire = self._wire_of(offset)
        if wire is None:
            return 0
        wire.tick()
        return wire.get_line(offset)

    def release(self, handle: _LineHandle) -> None:
        for offset in handle.offsets:
            if self._requested.get(offset) is handle:
                del self._requested[offset]
                wire = self._wire_of(offset)
                if wire is not None:
                    wire.set_line(offset, None)
        if not self._requested:
            for wire in self.wires:
                wire.close()
        from piflash.sim.probes.pins.seam import unregister

        unregister(handle.path)
        try:
            os.unlink(handle.path)
        except OSError:
            pass

    def opened(self) -> None:
        pass

    def closed(self) -> None:
        pass

    def ioctl(self, request: int, arg: Any, mutate: bool = True) -> Any:
        """Answer a chip ioctl (see the module).

        :raises OSError: EBUSY (a line already requested), EINVAL (an offset the chip lacks),
            ENOTTY (anything else).
        """
        view = memoryview(arg).cast("B")
        if request == GPIO_GET_CHIPINFO_IOCTL:
            data = struct.pack("<32s32sI", self.name.encode(), b"pinctrl-bcm2835", CHIP_LINES)
            view[: len(data)] = data
            return 0
        if request == GPIO_V2_GET_LINEINFO_IOCTL:
            offset = struct.unpack_from("<I", bytes(view), 64)[0]
            if offset >= CHIP_LINES:
                raise OSError(errno.EINVAL, "Invalid argument")
            name = ("GPIO%d" % offset).encode()
            view[:32] = name.ljust(32, b"\0")
            used = FLAG_USED if offset in self._requested else 0
            struct.pack_into("<Q", view, 72, used | FLAG_INPUT)
            return 0
        if request == GPIO_V2_GET_LINE_IOCTL:
            raw = bytes(view)
            (count,) = struct.unpack_from("<I", raw, _NUM_LINES_OFFSET)
            offsets = list(struct.unpack_from("<%dI" % count, raw, 0))
            for offset in offsets:
                if offset >= CHIP_LINES:
                    raise OSError(errno.EINVAL, "Invalid argument")
                if offset in self._requested:
                    raise OSError(errno.EBUSY, "Device or resource busy")
            flags, values = _config(raw, _CONFIG_OFFSET)
            handle = _LineHandle(self, offsets, flags, values)
            for offset in offsets:
                self._requested[offset] = handle
            from piflash.sim.probes.pins.seam import open_registered, register

            self._n += 1
            handle.path = os.path.join(self.handles_dir, "%s-line-%d-%d" % (self.name, os.getpid(), self._n))
            with open(handle.path, "wb"):
                pass
            register(handle.path, handle)
            fd = open_registered(handle.path)
            struct.pack_into("<i", view, _FD_OFFSET, fd)
            return 0
        raise OSError(errno.ENOTTY, "Inappropriate ioctl for device")
