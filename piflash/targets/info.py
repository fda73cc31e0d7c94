"""Read-only questions: which targets pyOCD knows, and what a connected target is."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

from piflash.targets.catalog import (
    builtin_flash_regions,
    check_target,
    known_targets,
    pack_parts,
)


def list_targets(pattern: Optional[str] = None, packs: Optional[Sequence[str]] = None) -> List[Dict[str, Any]]:
    """pyOCD's builtin target types sorted by name, then the parts of ``packs`` in pack order.

    :param pattern: keep only names or vendors containing this (case-insensitive).
    :param packs: CMSIS pack path(s), as pyOCD's ``pack`` option takes them, or None.
    :returns: dicts ``name``, ``vendor``, ``flash_bytes`` (total of the flash regions known
        without connecting, 0 when the class has no static memory map) and ``pack`` (the pack's
        path, None for a builtin type).
    :raises PackError: a pack is missing or cannot be read.
    """
    rows = []
    for name, cls in sorted(known_targets().items()):
        vendor = getattr(cls, "VENDOR", "") or ""
        if not pattern or any(pattern.lower() in v.lower() for v in (name, vendor)):
            regions = builtin_flash_regions(name) or []
            rows.append(
                {
                    "name": name,
                    "vendor": vendor,
                    "flash_bytes": sum(end - start for start, end, _ in regions),
                    "pack": None,
                }
            )
    for part in pack_parts(packs) if packs else []:
        if not pattern or any(pattern.lower() in v.lower() for v in (part.name, part.vendor or "")):
            rows.append(
                {
                    "name": part.name,
                    "vendor": part.vendor or "",
                    "flash_bytes": sum(end - start for start, end, _ in part.flash_regions or []),
                    "pack": part.pack,
                }
            )
    return rows


def target_info(
    probe: Optional[str] = None,
    target: Optional[str] = None,
    frequency: Optional[int] = None,
    options: Optional[Dict[str, Any]] = None,
) -> Dict[str, Any]:
    """Connect and describe the target.

    :returns: dict with ``target``, ``target_uid`` (lower-case hex str or None), ``probe_id``,
        ``probe_description``, ``swd_hz`` (the SWD clock asked of the probe, Hz: the user's, else
        piflash's default for the target, :mod:`piflash.targets.clocks`; the probe runs the
        fastest it can at or below it), and ``regions``: a list of dicts ``name``, ``type``
        (flash/ram/rom/device), ``start``, ``end`` (inclusive), ``size`` (bytes) and, for flash,
        ``sector_size`` and ``page_size`` (bytes) at the region start.
    :raises: the connect errors of :func:`piflash.targets.connect.open_session`.
    """
    from piflash.probe.pyocd_errors import translate_error
    from piflash.targets.connect import check_session_options, open_session

    if target:
        check_session_options(options or {})  # first: check_target reads the 'pack' option
        target = check_target(target, (options or {}).get("pack"))
    with open_session(probe, target, frequency, options) as session:
        soc, link = session.target, session.probe
        assert soc is not None and link is not None, "an open session has its target and probe"
        try:
            regions = []
            for r in soc.memory_map.regions:
                row = {
                    "name": r.name or "",
                    "type": r.type.name.lower(),
                    "start": r.start,
                    "end": r.end,
                    "size": r.length,
                }
                if r.is_flash and r.flash is not None:
                    row["sector_size"] = r.flash.get_sector_info(r.start).size
                    row["page_size"] = r.flash.get_page_info(r.start).size
                regions.append(row)
            from piflash.targets.corrected import user_name

            return {
                "target": user_name(session.options.get("target_override") or soc.part_number),
                "target_uid": _uid_for_info(session),
                "probe_id": link.unique_id,
                "probe_description": link.description,
                "swd_hz": int(session.options.get("frequency")),
                "regions": regions,
            }
        except Exception as exc:
            raise translate_error(exc, "connect") from exc


def _uid_for_info(session: Any) -> Optional[str]:
    """The target's unique ID for ``info`` (lower-case hex str, or None): read where its family
    keeps it; where that is only by halting the core and running code (an RP2040's flash unique
    ID, the 4Bh instruction as pico-sdk's ``flash_get_unique_id`` sends it:
    :func:`piflash.targets.families.rp2.read_flash_unique_id`), it is read so, and a core that
    was running is reset afterwards so that its firmware runs again (the read loads pyOCD's flash
    algorithm into its RAM). A read that fails leaves the ID None.

    :param session: an open pyOCD ``Session``.
    """
    import logging

    from piflash.targets.connect import read_target_uid, session_family

    family = session_family(session)
    if not family.uid_halts_core:
        return read_target_uid(session)
    target = session.target
    try:
        running = target.get_state() == target.State.RUNNING
    except Exception:
        running = False
    uid = family.read_uid(session, intrusive=True)
    if running:
        try:
            target.reset()
        except Exception:
            logging.getLogger(__name__).debug("could not restart the target after its unique ID", exc_info=True)
    return uid
