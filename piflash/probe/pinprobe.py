"""The Pi's own pins as a pyOCD debug probe: SWD over spidev (``-u spidev:0.0``; issue 43).

:class:`SpidevProbe` is a ``pyocd.probe.debug_probe.DebugProbe`` that does the SWD DP and AP
register accesses itself, as pyOCD's own probes do, over python-periphery's ``SPI`` (the kernel's
spidev interface; the batching and the bit order are :mod:`piflash.probe.spiswd`'s). It is
registered under pyOCD's ``pyocd.probe`` entry point as ``spidev``
(:mod:`piflash.probe.pinplugin`), so ``pyocd list`` and ``pyocd flash -u spidev:0.0`` see it, and
piflash registers it with pyOCD itself before it lists probes (:func:`register_with_pyocd`), so
its own commands do not depend on the installed entry points.

Discovery is passive: :func:`list_spidev` reads the names of ``/dev/spidevB.C`` and whether this
user may open them (``os.access``). It never opens a device, drives a pin or clocks the bus: a HAT
or a board's reset line may be on those pins. A device is opened when a session opens the probe.

With ``PIFLASH_SIM_PINS`` set, the devices are simulated boards: the simulator's backend (entry
point group ``piflash.pins_backend``, :func:`pins_backend`) gives the directory of their device
files in place of ``/dev``, and answers python-periphery's ioctls on them.

nRESET: a ``spidev:`` probe has a reset line only when its ID names one (``spidev:0.0:nreset=25``,
:mod:`piflash.probe.pins`). That line is requested when the probe is opened, as an input (released),
and driven open-drain (:class:`~piflash.probe.gpioswd.OpenDrainReset`): low to assert, an input
again to release, never high. pyOCD's hardware reset (reset type ``hw``, ``-O reset_type=hw``) and
its ``assert_reset`` go through it. Without the line, pyOCD's default reset types (a system reset
through the SCS, or the target's own) need none, and a hardware reset is refused with a message.
Listing opens no line either.
"""

from __future__ import annotations

import logging
import os
import re
from typing import Any, Callable, Collection, Dict, List, Optional, Sequence, Set, Tuple, Union

from piflash import settings
from piflash.probe.pins import GPIO_TAG, SPIDEV_TAG, GpioSpec, SpidevSpec, parse_pin_probe_id

__all__ = ["list_spidev", "pins_backend", "dev_root", "spidev_bufsiz", "register_with_pyocd", "probe_class"]

LOG = logging.getLogger(__name__)
_SPIDEV_NAME = re.compile(r"^spidev(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$")
#: SWCLK before pyOCD or piflash sets one (pyOCD's own default frequency, 1 MHz).
DEFAULT_SPEED_HZ = 1_000_000


def pins_backend() -> Any:
    """The simulated pin devices (a registered ``piflash.pins_backend`` entry point: the
    simulator, switched on by ``PIFLASH_SIM_PINS``), or None for the real ``/dev``."""
    if not settings.PIFLASH_SIM_PINS.value():
        return None
    from importlib.metadata import entry_points

    for point in entry_points(group="piflash.pins_backend"):
        try:
            backend = point.load()()
        except Exception as exc:  # a broken hook must not break listing probes
            LOG.warning("pin backend %s failed: %s", point.name, exc)
            continue
        if backend is not None:
            return backend
    return None


def dev_root() -> str:
    """Where the device files are (str): the simulated backend's directory, else
    ``PIFLASH_DEV_ROOT`` (``/dev``)."""
    backend = pins_backend()
    if backend is not None:
        return str(backend.dev_root)
    return str(settings.PIFLASH_DEV_ROOT.value())


def spidev_bufsiz() -> int:
    """spidev's buffer size, bytes per message (int): ``/sys/module/spidev/parameters/bufsiz``
    when readable, else 4096 (the module's default, drivers/spi/spidev.c)."""
    from piflash.probe.spiswd import DEFAULT_BUFSIZ

    path = os.path.join(str(settings.PIFLASH_SYSFS_ROOT.value()), "module/spidev/parameters/bufsiz")
    try:
        with open(path, encoding="ascii") as f:
            return max(64, int(f.read().strip()))
    except (OSError, ValueError):
        return DEFAULT_BUFSIZ


def list_spidev() -> List[Tuple[SpidevSpec, str, bool]]:
    """The spidev devices present: ``(spec, path, usable)`` with ``usable`` whether this user may
    open it read-write. Reads directory entries only (see the module). A device the simulator
    wired with an nRESET line (its backend's ``spidev_probes``: device name -> probe ID) is given
    with that line, as configured."""
    backend = pins_backend()
    configured: Dict[str, str] = dict(getattr(backend, "spidev_probes", {}) or {}) if backend is not None else {}
    root = str(backend.dev_root) if backend is not None else str(settings.PIFLASH_DEV_ROOT.value())
    try:
        names = sorted(os.listdir(root))
    except OSError:
        return []
    out = []
    for name in names:
        m = _SPIDEV_NAME.match(name)
        if not m:
            continue
        path = os.path.join(root, name)
        spec: Union[SpidevSpec, GpioSpec] = SpidevSpec(int(m.group(1)), int(m.group(2)))
        if name in configured:
            try:
                spec = parse_pin_probe_id(configured[name])
            except Exception:  # the simulator checked it; keep the plain device if not
                pass
        if isinstance(spec, SpidevSpec):
            out.append((spec, path, os.access(path, os.R_OK | os.W_OK)))
    return out


_probe_classes: Dict[str, type] = {}


def probe_class(kind: str = "spidev") -> type:
    """The probe class of ``kind`` (``spidev`` or ``gpio``), built on first use: they subclass
    pyOCD's ``DebugProbe``."""
    if not _probe_classes:
        _probe_classes.update(_build())
    return _probe_classes[kind]


def register_with_pyocd() -> None:
    """Put ``spidev`` and ``gpio`` among pyOCD's probe types (``pyocd.probe.aggregator.PROBE_CLASSES``)
    if the installed entry points did not."""
    from pyocd.probe import aggregator

    for kind in ("spidev", "gpio"):
        aggregator.PROBE_CLASSES.setdefault(kind, probe_class(kind))


def _build() -> Dict[str, type]:
    from pyocd.core import exceptions
    from pyocd.probe.debug_probe import DebugProbe

    from piflash.probe.spiswd import SpiSwd

    class SpidevProbe(DebugProbe):
        """SWD over ``/dev/spidevB.C`` (see :mod:`piflash.probe.pinprobe`).

        :param spec: the device (:class:`~piflash.probe.pins.SpidevSpec`).
        :param path: its device file (str).
        """

        @classmethod
        def get_all_connected_probes(cls, unique_id: Optional[str] = None, is_explicit: bool = False) -> List[Any]:
            """Every spidev device this user may open (a directory listing, nothing opened)."""
            return [cls(spec, path) for spec, path, usable in list_spidev() if usable]

        @classmethod
        def get_probe_with_id(cls, unique_id: str, is_explicit: bool = False) -> Optional["SpidevProbe"]:
            """The probe ``spidev:B.C[:nreset=N]`` (or ``B.C...``, as pyOCD's aggregator passes
            it) if its device is there and this user may open it, or None. The nRESET line is
            the one the ID names (its chip is only opened with the probe)."""
            text = (unique_id or "").strip()
            if not text.lower().startswith(SPIDEV_TAG):
                text = SPIDEV_TAG + text
            try:
                spec = parse_pin_probe_id(text)
            except Exception:
                return None
            if not isinstance(spec, SpidevSpec):
                return None
            for found, path, usable in list_spidev():
                if found.device == spec.device and usable:
                    return cls(spec, path)
            return None

        def __init__(self, spec: Union[SpidevSpec, GpioSpec], path: str) -> None:
            super().__init__()
            self._spec: Any = spec
            self._path = path
            self._spi: Any = None
            self._engine: Optional[Any] = None
            self._speed = DEFAULT_SPEED_HZ
            self._protocol: Optional[DebugProbe.Protocol] = None
            self._nreset: Optional[Any] = None  # OpenDrainReset while open, when configured

        @property
        def description(self) -> str:
            text = "SWD over SPI%d CE%d (%s)" % (self._spec.bus, self._spec.cs, self._path)
            if getattr(self._spec, "nreset", None) is None:
                return text
            return text + ", nRESET on %s line %d" % (self._spec.nreset_chip, self._spec.nreset)

        @property
        def vendor_name(self) -> str:
            return "Linux spidev"

        @property
        def product_name(self) -> str:
            return "SWD over SPI%d CE%d" % (self._spec.bus, self._spec.cs)

        @property
        def supported_wire_protocols(self) -> Collection[DebugProbe.Protocol]:
            return [DebugProbe.Protocol.DEFAULT, DebugProbe.Protocol.SWD]

        @property
        def unique_id(self) -> str:
            return str(self._spec.probe_id)

        @property
        def wire_protocol(self) -> Optional[DebugProbe.Protocol]:
            return self._protocol

        @property
        def is_open(self) -> bool:
            return self._spi is not None

        @property
        def capabilities(self) -> Set[DebugProbe.Capability]:
            """Raw SWJ and SWD sequences: pyOCD sends the line reset, the select and dormant
            sequences and an RP2040's TARGETSEL through them."""
            return {DebugProbe.Capability.SWJ_SEQUENCE, DebugProbe.Capability.SWD_SEQUENCE}

        @property
        def engine(self) -> Optional[Any]:
            """The SWD engine while open (:class:`~piflash.probe.spiswd.SpiSwd`, or
            :class:`~piflash.probe.gpioswd.GpioSwd` for a ``gpio:`` probe), else None."""
            return self._engine

        def open(self) -> None:
            """Open the device with python-periphery, SPI mode 0, MSB first (see spiswd), and
            the nRESET line when the ID names one, as an input (released: no reset).

            :raises pyocd.core.exceptions.ProbeError: the device cannot be opened or set up, or
                the nRESET line cannot be requested (busy, no such chip or line, no permission).
            """
            if self._spi is not None:
                return
            try:
                from periphery import SPI, GPIOError, SPIError

                from piflash.probe.gpioswd import OpenDrainReset
            except ImportError as exc:
                raise exceptions.ProbeError(
                    "%s needs python-periphery (pip install 'piflash[pins]')" % self.unique_id
                ) from exc
            if self._spec.nreset is not None:
                chip = os.path.join(dev_root(), self._spec.nreset_chip)
                try:
                    self._nreset = OpenDrainReset(chip, self._spec.nreset, self.unique_id)
                except (GPIOError, OSError) as exc:
                    raise exceptions.ProbeError(
                        "cannot request the nRESET line %s of %s: %s" % (self._spec.nreset, chip, exc)
                    ) from exc
            try:
                self._spi = SPI(self._path, 0, self._speed)
            except (SPIError, OSError) as exc:
                self._close_nreset()
                raise exceptions.ProbeError("cannot open %s: %s" % (self._path, exc)) from exc
            self._engine = SpiSwd(self._spi.transfer, spidev_bufsiz())

        def _close_nreset(self) -> None:
            nreset, self._nreset = self._nreset, None
            if nreset is not None:
                nreset.close()

        def close(self) -> None:
            """Release the nRESET line (an input), then close the device."""
            spi, self._spi, self._engine = self._spi, None, None
            try:
                self._close_nreset()
            finally:
                if spi is not None:
                    spi.close()

        def connect(self, protocol: Optional[DebugProbe.Protocol] = None) -> None:
            """Select SWD; the wire sequences come from pyOCD through :meth:`swj_sequence`.

            :raises pyocd.core.exceptions.ProbeError: JTAG asked for.
            """
            if protocol not in (None, DebugProbe.Protocol.DEFAULT, DebugProbe.Protocol.SWD):
                raise exceptions.ProbeError("%s speaks SWD only" % self.unique_id)
            self._protocol = DebugProbe.Protocol.SWD

        def disconnect(self) -> None:
            if self._engine is not None:
                self._engine.flush()
            self._protocol = None

        def _need(self) -> Any:
            if self._engine is None:
                raise exceptions.ProbeError("%s is not open" % self.unique_id)
            return self._engine

        def swj_sequence(self, length: int, bits: int) -> None:
            """``length`` cycles with SWDIO driven to ``bits``, LSB first."""
            self._need().cycles(bits, length)

        def swd_sequence(self, sequences: Sequence[Tuple[int, ...]]) -> Tuple[int, List[bytes]]:
            """pyOCD's DAP_SWD_Sequence: items ``(cycles, bits)`` drive SWDIO, ``(cycles,)`` read
            it. Returns ``(0, [bytes read per read item])``."""
            return 0, self._need().sequence(sequences)

        def set_clock(self, frequency: float) -> None:
            """SWCLK (Hz): the SPI clock (the controller rounds it to a divider of its own)."""
            self._speed = max(1, int(frequency))
            if self._spi is not None:
                self._spi.max_speed = self._speed

        def _hold_s(self) -> float:
            """How long a hardware reset holds nRESET low, seconds: the session's
            ``reset.hold_time`` (pyOCD's option, 0.1 s by default, ``pyocd/core/options.py``)."""
            from piflash.probe.gpioswd import RESET_HOLD_S

            session = getattr(self, "session", None)
            try:
                return float(session.options.get("reset.hold_time")) if session is not None else RESET_HOLD_S
            except (TypeError, ValueError):
                return RESET_HOLD_S

        def _refuse_reset(self) -> None:
            raise exceptions.ProbeError(
                "%s has no nRESET line: use a software reset (pyOCD's reset type 'sw'), or name the "
                "line in the probe ID (e.g. %s:nreset=25)" % (self.unique_id, self.unique_id)
            )

        def _reset_line(self) -> Any:
            self._need()
            if self._nreset is None:
                raise exceptions.ProbeError("%s: the nRESET line is not open" % self.unique_id)
            return self._nreset

        def reset(self) -> None:
            """Pulse nRESET (open-drain: low for ``reset.hold_time``, then released).

            :raises pyocd.core.exceptions.ProbeError: no nRESET line in the probe ID, or the
                probe is not open."""
            if self._spec.nreset is None:
                self._refuse_reset()
            self._reset_line().pulse(self._hold_s())

        def assert_reset(self, asserted: bool) -> None:
            """nRESET low (True) or released as an input (False); never driven high. Without a
            line, releasing is a no-op and asserting is refused (see :meth:`reset`)."""
            if self._spec.nreset is None:
                if asserted:
                    self._refuse_reset()
                return
            self._reset_line().set(asserted)

        def is_reset_asserted(self) -> bool:
            return bool(self._nreset is not None and self._nreset.asserted)

        def flush(self) -> None:
            self._need().flush()

        def _value(self, engine: Any, pending: Any, now: bool) -> Union[int, Callable[[], int]]:
            if now:
                engine.flush()
                return int(pending.value)

            def later() -> int:
                if pending.value is None:
                    engine.flush()
                return int(pending.value)

            return later

        def read_dp(self, addr: int, now: bool = True) -> Union[int, Callable[[], int]]:  # type: ignore[override]
            engine = self._need()
            return self._value(engine, engine.read(False, addr), now)

        def write_dp(self, addr: int, data: int) -> None:
            self._need().write(False, addr, data)

        def read_ap(self, addr: int, now: bool = True) -> Union[int, Callable[[], int]]:  # type: ignore[override]
            engine = self._need()
            return self._value(engine, engine.read(True, addr), now)

        def write_ap(self, addr: int, data: int) -> None:
            self._need().write(True, addr, data)

        def read_ap_multiple(  # type: ignore[override]
            self, addr: int, count: int = 1, now: bool = True
        ) -> Union[Sequence[int], Callable[[], Sequence[int]]]:
            engine = self._need()
            pending = engine.read_many(addr, count)

            def values() -> List[int]:
                if any(p.value is None for p in pending):
                    engine.flush()
                return [int(p.value or 0) for p in pending]

            return values() if now else values

        def write_ap_multiple(self, addr: int, values: Sequence[int]) -> None:
            self._need().write_many(addr, values)

    class GpioProbe(SpidevProbe):
        """SWD bit-banged on lines of ``/dev/CHIP`` (:mod:`piflash.probe.gpioswd`).

        :param spec: the lines (:class:`~piflash.probe.pins.GpioSpec`). :param path: the chip's
            device file (str).
        """

        @classmethod
        def get_all_connected_probes(cls, unique_id: Optional[str] = None, is_explicit: bool = False) -> List[Any]:
            """The ``gpio:`` probes configured (the simulator's wiring; on a Pi a ``gpio:`` probe
            is named by ``-u`` or a station's ``probes:``, never found by driving lines)."""
            backend = pins_backend()
            ids = list(getattr(backend, "gpio_probes", [])) if backend is not None else []
            return [p for p in (cls.get_probe_with_id(i) for i in ids) if p is not None]

        @classmethod
        def get_probe_with_id(cls, unique_id: str, is_explicit: bool = False) -> Optional["GpioProbe"]:
            """The probe ``gpio:CHIP:swclk=N,swdio=N[,nreset=N]`` if its chip's device file is
            there and this user may open it (a stat and ``access()``), or None."""
            text = (unique_id or "").strip()
            if not text.lower().startswith(GPIO_TAG):
                text = GPIO_TAG + text
            try:
                spec = parse_pin_probe_id(text)
            except Exception:
                return None
            if not isinstance(spec, GpioSpec):
                return None
            path = os.path.join(dev_root(), spec.chip)
            if not os.access(path, os.R_OK | os.W_OK):
                return None
            return cls(spec, path)

        @property
        def description(self) -> str:
            spec = self._spec
            text = "SWD bit-banged on %s lines %d (SWCLK), %d (SWDIO)" % (spec.chip, spec.swclk, spec.swdio)
            return text + (", %d (nRESET)" % spec.nreset if spec.nreset is not None else "")

        @property
        def vendor_name(self) -> str:
            return "Linux GPIO character device"

        @property
        def product_name(self) -> str:
            return "SWD on %s" % self._spec.chip

        def open(self) -> None:
            """Request the lines through python-periphery (GPIO v2).

            :raises pyocd.core.exceptions.ProbeError: a line cannot be requested.
            """
            if self._engine is not None:
                return
            try:
                from piflash.probe.gpioswd import GpioSwd

                self._engine = GpioSwd(self._path, self._spec)
            except ImportError as exc:
                raise exceptions.ProbeError(
                    "%s needs python-periphery (pip install 'piflash[pins]')" % self.unique_id
                ) from exc
            except (OSError, IOError) as exc:
                raise exceptions.ProbeError("cannot request %s: %s" % (self.unique_id, exc)) from exc
            self._spi = self._engine  # is_open

        def close(self) -> None:
            engine, self._engine, self._spi = self._engine, None, None
            if engine is not None:
                engine.close()

        def set_clock(self, frequency: float) -> None:
            """Bit-banging runs as fast as the system calls go: the clock asked for is noted only."""
            self._speed = max(1, int(frequency))

        def _reset_line(self) -> Any:
            self._need()
            if self._nreset is None:
                raise exceptions.ProbeError("%s: the nRESET line is not open" % self.unique_id)
            return self._nreset

        def reset(self) -> None:
            """Pulse nRESET (open-drain: low, then released).

            :raises pyocd.core.exceptions.ProbeError: no nRESET line configured."""
            self._need().pulse_reset()

        def assert_reset(self, asserted: bool) -> None:
            """nRESET low (True) or released as an input (False); never driven high."""
            engine = self._need()
            if asserted or engine.rst is not None:
                engine.assert_reset(asserted)

        def is_reset_asserted(self) -> bool:
            return bool(self._engine is not None and self._engine.reset_asserted)

    for cls in (SpidevProbe, GpioProbe):
        cls.__module__ = __name__
    return {"spidev": SpidevProbe, "gpio": GpioProbe}
