"""Is SPI on? The Raspberry Pi's boot config (``config.txt``) read for its SPI settings.

Pure logic over text and paths; nothing here touches the hardware. What it follows:

- **Where the file is.** ``/boot/firmware/config.txt`` on Raspberry Pi OS bookworm and later,
  ``/boot/config.txt`` before (bookworm leaves a stub there saying the file moved):
  :data:`BOOT_CONFIGS`, looked for under a root so tests use a temporary tree.
- **Lines.** ``#`` starts a comment; ``dtparam=spi=on`` (also ``dtparam=spi``, which means on,
  and comma lists ``dtparam=i2c_arm=on,spi=on``) enables SPI0 with two chip selects on
  GPIO 8 and 7; ``dtoverlay=spi0-1cs`` (``spi0-2cs``, ``spi0-0cs``) sets SPI0's chip selects;
  ``dtoverlay=spi1-1cs`` enables SPI1 with CE0 on GPIO 18, ``spi1-2cs`` also claims GPIO 17,
  ``spi1-3cs`` GPIO 17 and 16. An overlay's ``csN_pin=G`` moves a chip select, given on the
  ``dtoverlay`` line or on a ``dtparam`` line after it. ``include FILE`` reads another file in
  place. Sources: the Raspberry Pi documentation, "config.txt" and "Device Trees, overlays, and
  parameters" (https://www.raspberrypi.com/documentation/computers/config_txt.html,
  https://www.raspberrypi.com/documentation/computers/configuration.html#device-trees-overlays-and-parameters),
  and the overlays README (raspberrypi/firmware boot/overlays/README: entries ``spi0-1cs``,
  ``spi0-2cs``, ``spi1-1cs``, ``spi1-2cs``, ``spi1-3cs`` and the base parameter ``spi``).
- **Conditional sections.** ``[all]`` ends every filter; a model filter (``[pi0]``, ``[pi02]``,
  ``[pi4]``...) applies the lines after it only on that model, until ``[all]`` or another model
  filter replaces it; ``[none]`` applies nothing. Other filters (``[HDMI:1]``, ``[EDID=...]``,
  ``[gpio4=1]``, ``[0x12345678]``, ``[tryboot]``, ``[board-type=...]``) cannot be judged from a
  running system's files: lines under them are reported as conditional, not counted. Source: the
  config.txt page's "Conditional filters" section.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, FrozenSet, List, Optional, Sequence, Tuple

#: Where the boot config is, relative to the root, in the order tried (bookworm's first).
BOOT_CONFIGS = ("boot/firmware/config.txt", "boot/config.txt")
#: ``include`` depth accepted (the firmware follows includes; a loop must not hang the doctor).
MAX_INCLUDE_DEPTH = 4
#: Values of a boolean dtparam that mean on (the firmware's dtparam parser accepts these).
ON_VALUES = ("on", "true", "yes", "okay", "1")

#: The model filters of config.txt and the device-tree model strings (``/proc/device-tree/model``
#: without "Rev x.y") each matches (the config.txt page, "Model filters").
MODEL_FILTERS: Dict[str, Tuple[str, ...]] = {
    "pi0": ("Raspberry Pi Zero",),  # Zero, Zero W, Zero 2 W (prefix)
    "pi0w": ("Raspberry Pi Zero W",),
    "pi02": ("Raspberry Pi Zero 2",),
    "pi1": ("Raspberry Pi Model", "Raspberry Pi Compute Module Rev"),
    "pi2": ("Raspberry Pi 2",),
    "pi3": ("Raspberry Pi 3", "Raspberry Pi Compute Module 3"),
    "pi3+": ("Raspberry Pi 3 Model B Plus", "Raspberry Pi 3 Model A Plus", "Raspberry Pi Compute Module 3 Plus"),
    "pi4": ("Raspberry Pi 4", "Raspberry Pi 400", "Raspberry Pi Compute Module 4"),
    "pi400": ("Raspberry Pi 400",),
    "cm4": ("Raspberry Pi Compute Module 4",),
    "cm4s": ("Raspberry Pi Compute Module 4S",),
    "pi5": ("Raspberry Pi 5", "Raspberry Pi 500", "Raspberry Pi Compute Module 5"),
    "pi500": ("Raspberry Pi 500",),
    "cm5": ("Raspberry Pi Compute Module 5",),
}

#: SPI overlays: name -> (bus, default chip-select GPIOs, in csN order) (overlays README).
SPI_OVERLAYS: Dict[str, Tuple[int, Tuple[int, ...]]] = {
    "spi0-0cs": (0, ()),
    "spi0-1cs": (0, (8,)),
    "spi0-2cs": (0, (8, 7)),
    "spi1-1cs": (1, (18,)),
    "spi1-2cs": (1, (18, 17)),
    "spi1-3cs": (1, (18, 17, 16)),
}
#: SPI0 with ``dtparam=spi=on`` and no spi0 overlay: CE0 on GPIO 8, CE1 on GPIO 7.
SPI0_DEFAULT_CS = (8, 7)
#: The line that turns each bus on, as a hint gives it.
ENABLE_LINE = {0: "dtparam=spi=on", 1: "dtoverlay=spi1-1cs"}


def model_filters_for(model: Optional[str]) -> FrozenSet[str]:
    """The config.txt model filters (``{"pi0", "pi02"}``) that match device-tree ``model``
    (e.g. ``"Raspberry Pi Zero 2 W Rev 1.0"``); empty for None or a machine that is not a Pi."""
    if not model:
        return frozenset()
    return frozenset(name for name, prefixes in MODEL_FILTERS.items() if model.startswith(prefixes))


@dataclass(frozen=True)
class Setting:
    """One ``dtparam``/``dtoverlay`` line that applies (or might).

    :ivar kind: ``"dtparam"`` or ``"dtoverlay"``.
    :ivar name: the overlay's name, or the parameter's (str); ``""`` for a bare ``dtoverlay=``.
    :ivar params: the parameters on the line, name -> value (a bare name is ``"on"``).
    :ivar where: ``"config.txt line 9"``: the file's name and the line number (str).
    :ivar section: the filter in force (str), ``""`` outside any section or after ``[all]``.
    :ivar conditional: True when a filter that cannot be judged here is in force.
    """

    kind: str
    name: str
    params: Dict[str, str]
    where: str
    section: str = ""
    conditional: bool = False


def _parse_params(text: str) -> Tuple[str, Dict[str, str]]:
    """``spi1-2cs,cs1_pin=26`` -> (``"spi1-2cs"``, ``{"cs1_pin": "26"}``)."""
    head, *rest = [p.strip() for p in text.split(",")]
    params = {}
    for item in rest:
        key, eq, value = item.partition("=")
        params[key.strip()] = value.strip() if eq else "on"
    return head, params


def parse_boot_config(
    path: Path, model: Optional[str] = None, _depth: int = 0, _state: Optional[Dict[str, str]] = None
) -> List[Setting]:
    """The ``dtparam``/``dtoverlay`` settings of the boot config ``path`` that apply on ``model``
    (a device-tree model string; None: not known, so model sections do not apply), and those under
    filters that cannot be judged (``conditional``). ``include`` lines are followed.

    :raises OSError: ``path`` cannot be read (an include that cannot be read is skipped).
    """
    text = path.read_text(errors="replace")
    models = model_filters_for(model)
    state = _state if _state is not None else {}  # filter type -> filter text
    out: List[Setting] = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("[") and line.endswith("]"):
            name = line[1:-1].strip()
            low = name.lower()
            if low == "all":
                state.clear()
            elif low == "none":
                state["none"] = name
            elif low in MODEL_FILTERS:
                state["model"] = low
            else:
                state[re.split(r"[:=]", low, maxsplit=1)[0] if re.search(r"[:=]", low) else "other"] = name
            continue
        where = f"{path.name} line {number}"
        if line.startswith("include") and line[7:8].isspace():
            if _depth < MAX_INCLUDE_DEPTH and _applies(state, models) is not False:
                try:
                    out += parse_boot_config(path.parent / line[7:].strip(), model, _depth + 1, state)
                except OSError:
                    pass
            continue
        key, eq, value = line.partition("=")
        key = key.strip().lower()
        if not eq or key not in ("dtparam", "dtoverlay"):
            continue
        applies = _applies(state, models)
        if applies is False:
            continue
        section = "".join(f"[{v}]" for v in state.values())
        if key == "dtoverlay":
            name, params = _parse_params(value.strip())
            out.append(Setting("dtoverlay", name, params, where, section, applies is None))
        else:
            for item in value.split(","):
                pname, peq, pvalue = item.strip().partition("=")
                if pname:
                    out.append(
                        Setting("dtparam", pname.strip(), {pname.strip(): pvalue.strip() if peq else "on"},
                                where, section, applies is None)
                    )  # fmt: skip
    return out


def _applies(state: Dict[str, str], models: FrozenSet[str]) -> Optional[bool]:
    """True: the filters in force match; False: they do not; None: one cannot be judged here."""
    if "none" in state:
        return False
    if "model" in state and state["model"] not in models:
        return False
    return None if set(state) - {"model"} else True


@dataclass(frozen=True)
class SpiBus:
    """What the boot config does to one SPI bus.

    :ivar bus: 0 or 1.
    :ivar enabled: True when the lines that apply enable it.
    :ivar by: the line that enables it (``"dtoverlay=spi1-2cs (config.txt line 9)"``), or ``""``.
    :ivar chip_selects: the GPIOs its chip selects claim (tuple of int, CE0 first).
    :ivar conditional: lines under filters that cannot be judged here that would enable it
        (list of str, as ``by``), for the message when it is off.
    """

    bus: int
    enabled: bool
    by: str = ""
    chip_selects: Tuple[int, ...] = ()
    conditional: Tuple[str, ...] = field(default_factory=tuple)

    def claimed(self) -> Dict[int, str]:
        """GPIO -> signal name (``"SPI1 CE1"``) for every pin the enabled bus claims ({} when off)."""
        from piflash.host.pins import SPI_PINS

        if not self.enabled:
            return {}
        out = {g: f"SPI{self.bus} {sig}" for sig, g in SPI_PINS[self.bus].items() if not sig.startswith("CE")}
        for i, g in enumerate(self.chip_selects):
            out[g] = f"SPI{self.bus} CE{i}"
        return out


def _is_on(value: str) -> bool:
    return value.strip().lower() in ON_VALUES


def spi_buses(settings: Sequence[Setting]) -> Dict[int, SpiBus]:
    """SPI0 and SPI1 as ``settings`` (from :func:`parse_boot_config`) leave them.

    SPI0: the last ``dtparam=spi`` wins; an ``spi0-Ncs`` overlay also enables it and sets its
    chip selects. SPI1: an ``spi1-Ncs`` overlay, its ``csN_pin`` parameters given on its line or on
    ``dtparam`` lines after it: parameters that follow an overlay are that overlay's while it
    has them, and the base tree's (``spi``) otherwise (the device-tree page, "Part 3: using device
    trees": a parameter both export is the overlay's).
    """
    spi0_on, spi0_by = False, ""
    spi0_cs: Tuple[int, ...] = SPI0_DEFAULT_CS
    spi0_overlay = ""
    spi0_pins: List[int] = list(SPI0_DEFAULT_CS)
    spi1: Optional[Tuple[str, List[int], str]] = None  # (name, cs pins, where)
    pending: Dict[int, List[str]] = {0: [], 1: []}
    current: Optional[Tuple[int, List[int]]] = None  # the last overlay's (bus, cs list), for its dtparams
    for s in settings:
        if s.kind == "dtoverlay":
            current = None
            if s.name not in SPI_OVERLAYS:
                continue
            bus, default = SPI_OVERLAYS[s.name]
            if s.conditional:
                pending[bus].append(f"dtoverlay={s.name} ({s.where}, under {s.section})")
                continue
            pins = list(default)
            _apply_cs(pins, s.params)
            current = (bus, pins)
            if bus == 0:
                spi0_on, spi0_by, spi0_overlay, spi0_cs = True, f"dtoverlay={s.name} ({s.where})", s.name, ()
                spi0_pins = pins
            else:
                spi1 = (s.name, pins, s.where)
        elif s.name == "spi":
            on = _is_on(s.params["spi"])
            if s.conditional:
                if on:
                    pending[0].append(f"dtparam=spi=on ({s.where}, under {s.section})")
                continue
            spi0_on, spi0_by = on, f"dtparam=spi={'on' if on else 'off'} ({s.where})" if on else ""
        elif current is not None and not s.conditional:
            _apply_cs(current[1], s.params)
    if spi0_overlay:
        spi0_cs = tuple(spi0_pins)
    out = {0: SpiBus(0, spi0_on, spi0_by, spi0_cs if spi0_on else (), tuple(pending[0]))}
    if spi1 is not None:
        out[1] = SpiBus(1, True, f"dtoverlay={spi1[0]} ({spi1[2]})", tuple(spi1[1]), tuple(pending[1]))
    else:
        out[1] = SpiBus(1, False, "", (), tuple(pending[1]))
    return out


def _apply_cs(pins: List[int], params: Dict[str, str]) -> None:
    for key, value in params.items():
        m = re.fullmatch(r"cs(\d)_pin", key)
        if m and int(m.group(1)) < len(pins) and value.isdigit():
            pins[int(m.group(1))] = int(value)


def find_boot_config(root: str = "/") -> Optional[Path]:
    """The boot config under ``root`` (:data:`BOOT_CONFIGS`, bookworm's first, so its stub
    ``/boot/config.txt`` that only says the file moved is never read), or None."""
    for rel in BOOT_CONFIGS:
        path = Path(root, rel)
        if path.is_file():
            return path
    return None


def spidev_node(dev_root: str, bus: int, cs: int) -> Path:
    """``<dev_root>/spidevB.C`` (the node the kernel's spidev driver makes per chip select)."""
    return Path(dev_root, f"spidev{bus}.{cs}")
