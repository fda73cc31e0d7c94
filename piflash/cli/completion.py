"""Shell completion of target names, probe IDs and profile names, through click's own mechanism.

Enabled per shell with click's generated script (``_PIFLASH_COMPLETE=bash_source piflash``, or
``zsh_source``, ``fish_source``; click's "Shell Completion" page); each function here is the
``shell_complete=`` of an option or argument and returns click ``CompletionItem`` objects.

- **Target names**: pyOCD's builtin target types (:func:`piflash.targets.catalog.known_targets`).
- **Probe IDs**: the debug probes pyOCD sees (simulated ones included) and the Picos in BOOTSEL
  mode (``picoboot:PORT``), listed in a thread given at most :data:`PROBE_LIST_S` seconds: a shell
  waiting on a Tab must not hang on a USB bus that does not answer.
- **Profile names**: the ``*.yaml``/``*.yml`` file names of :func:`piflash.profiles.profile_dirs`,
  globbed, never loaded (no YAML, no pyOCD).
- **Simulated board names** (the BOARD of ``piflash sim delete``, ``dump``, ``fault``, ``plug``,
  ``unplug``, ``board pull|seat|swap`` and ``serve --board``): the boards ``piflash sim list``
  lists, read from the same store (:class:`piflash.sim.store.SimStore`, pure Python: no pyOCD, no
  unicorn), in a thread given at most :data:`SIM_LIST_S` seconds.

A completion never fails: whatever goes wrong leaves that list empty (the shell then offers
nothing, or file names where the shell does that).
"""

from __future__ import annotations

import threading
from typing import Any, Callable, List, Set, TypeVar

T = TypeVar("T")

#: The longest a Tab waits for the probe list (seconds): a USB enumeration with pyOCD's import
#: takes about 1 s on a Pi 4; a bus that hangs gives no probe IDs rather than a hung shell.
PROBE_LIST_S = 5.0

#: The longest a Tab waits for the simulated boards (seconds): the store is a local directory
#: read in milliseconds; a hung file system (an NFS home) gives no names rather than a hung shell.
SIM_LIST_S = 2.0


def _items(words: List[str], incomplete: str) -> List[Any]:
    """``CompletionItem`` objects for the ``words`` (str) that start with ``incomplete`` (any case),
    in order, each once."""
    from click.shell_completion import CompletionItem

    low = incomplete.lower()
    return [CompletionItem(w) for w in dict.fromkeys(words) if w.lower().startswith(low)]


def _quietly(lister: Callable[[], List[T]]) -> List[T]:
    """``lister()``, or [] when it raises (a completion never fails)."""
    try:
        return lister()
    except Exception:
        return []


def target_names() -> List[str]:
    """pyOCD's builtin target type names (str), sorted."""
    from piflash.targets.catalog import known_targets

    return sorted(known_targets())


def probe_ids(timeout: float = PROBE_LIST_S) -> List[str]:
    """The IDs (str) of the probes attached: pyOCD's (``sim:NAME`` for a simulated board) then
    the BOOTSEL Picos' (``picoboot:PORT``); whatever is found within ``timeout`` seconds (a
    daemon thread: one that hangs is left behind when the shell's process ends)."""

    def work(found: List[str]) -> None:
        from piflash.probe.discovery import list_probes
        from piflash.probe.picoboot import list_devices

        found.extend(p.unique_id for p in _quietly(lambda: list_probes()))
        found.extend(d.probe_id for d in _quietly(list_devices))

    return _within(timeout, work, complete=False)


def _within(timeout: float, work: Callable[[List[str]], None], complete: bool) -> List[str]:
    """Run ``work(found)`` in a daemon thread (one that hangs is left behind when the shell's
    process ends) and return what it put in ``found`` within ``timeout`` seconds; with
    ``complete``, nothing unless it finished (a part of a list would mislead)."""
    found: List[str] = []
    thread = threading.Thread(target=work, args=(found,), name="piflash-complete", daemon=True)
    thread.start()
    thread.join(timeout)
    return [] if complete and thread.is_alive() else list(found)


def profile_names() -> List[str]:
    """The profile names (str) in :func:`piflash.profiles.profile_dirs`, sorted (file stems of
    ``*.yaml`` and ``*.yml``, hidden files left out; nothing is loaded)."""
    from piflash.profiles import profile_dirs

    names: Set[str] = set()
    for d in profile_dirs():
        for pattern in ("*.yaml", "*.yml"):
            try:
                names.update(f.stem for f in d.glob(pattern) if not f.name.startswith(".") and f.is_file())
            except OSError:
                continue
    return sorted(names)


def sim_board_names(timeout: float = SIM_LIST_S) -> List[str]:
    """The names (str) of the simulated boards, sorted, as ``piflash sim list`` reads them
    (:meth:`piflash.sim.store.SimStore.list`); whatever is read within ``timeout`` seconds (a
    daemon thread, as in :func:`probe_ids`)."""

    def work(found: List[str]) -> None:
        from piflash.sim.store import SimStore

        found.extend(b.name for b in _quietly(SimStore().list))

    return _within(timeout, work, complete=True)


def complete_target(ctx: Any, param: Any, incomplete: str) -> List[Any]:
    """click ``shell_complete`` of ``--target``: :func:`target_names`."""
    return _items(_quietly(target_names), incomplete)


def complete_probe(ctx: Any, param: Any, incomplete: str) -> List[Any]:
    """click ``shell_complete`` of ``--probe``: :func:`probe_ids`, then ``picoboot`` (any Pico
    in BOOTSEL mode)."""
    return _items(_quietly(probe_ids) + ["picoboot"], incomplete)


def complete_profile(ctx: Any, param: Any, incomplete: str) -> List[Any]:
    """click ``shell_complete`` of ``--profile`` and a profile NAME: :func:`profile_names`; a
    path being typed (a ``/`` in it) is left to the shell's file completion."""
    if "/" in incomplete:
        from click.shell_completion import CompletionItem

        return [CompletionItem(incomplete, type="file")]
    return _items(_quietly(profile_names), incomplete)


def complete_sim_board(ctx: Any, param: Any, incomplete: str) -> List[Any]:
    """click ``shell_complete`` of a simulated BOARD: :func:`sim_board_names`, each as ``sim:NAME``
    when ``incomplete`` starts with ``sim:`` (the commands take either form)."""
    names = _quietly(sim_board_names)
    if incomplete.lower().startswith("sim:"):
        names = ["sim:" + n for n in names]
    return _items(names, incomplete)
