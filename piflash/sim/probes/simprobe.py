"""pyOCD ``DebugProbe`` for simulated boards (plugin name ``sim``).

Unique IDs: a board called ``NAME`` is the probe ``sim:NAME``. pyOCD does *not* prefix a probe's
unique ID with its plugin name (the aggregator only strips the ``sim:`` prefix from what the user
typed, ``pyocd/probe/aggregator.py``), so the probe reports ``sim:NAME`` itself, like the
``remote`` probe reports ``remote:HOST:PORT``; ``pyocd list`` therefore shows an ID that works
with ``-u``. Asking for ``-u sim:NAME`` reaches :meth:`SimProbe.get_probe_with_id` with
``NAME`` and ``is_explicit=True``; a name that is a target type alone or followed by ``-suffix``
(``nrf52840``, ``nrf52840-2``) creates the board on first use; any other valid name asked for
explicitly (``-u sim:bench``) is created when the session is opened with a simulated target type
(``-t nrf52840``, i.e. the ``target_override`` option), so ``pyocd flash -t nrf52840 -u sim:bench``
works from nothing too.

Enumeration lists the present boards of the store only, so an installation with the ``sim``
extra but no boards shows no probes. This module imports the emulator lazily (in
:meth:`SimProbe.open`), so listing probes stays cheap.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from contextlib import ExitStack
from typing import Callable, Collection, Iterator, Optional, Sequence, Set, Union

from piflash.sim.probes import loading as _loading

# Importing pyOCD for the first time runs its probe-plugin scan, which would try to load this
# (half-imported) module; the flag makes the scan skip us, and we register below instead.
_loading.probe_module_importing = True
try:
    from pyocd.board.board import Board
    from pyocd.board.board_ids import BoardInfo as PyocdBoardInfo
    from pyocd.core import exceptions
    from pyocd.probe import aggregator as _aggregator
    from pyocd.probe.debug_probe import DebugProbe
finally:
    _loading.probe_module_importing = False

from piflash.sim.specs import SIM_TARGETS, get_target
from piflash.sim.store import (
    BoardBusyError,
    SimStore,
    UnknownBoardError,
    auto_target_for_name,
    valid_board_name,
)

__all__ = ["SimProbe", "PLUGIN_NAME"]

LOG = logging.getLogger(__name__)

#: Plugin / unique-ID prefix.
PLUGIN_NAME = "sim"
#: Seconds between checks of the board's JSON (one stat) for fault, present or seated changes:
#: short, as a real debug port stops answering the moment its board is pulled.
_RELOAD_INTERVAL = 0.05
#: Seconds to wait for another session on the same board to end.
SESSION_LOCK_TIMEOUT = 10.0


class SimProbe(DebugProbe):
    """A debug probe wired to one simulated board of a :class:`~piflash.sim.store.SimStore`.

    Construct through :meth:`get_all_connected_probes` / :meth:`get_probe_with_id` (or
    directly: ``SimProbe("name")`` for an existing board). Board state is loaded by
    :meth:`open` and saved atomically by :meth:`disconnect`, :meth:`close` and when the probe is
    lost (fault ``disconnect_after`` or the board being ejected mid-session).

    :param name: Board name.
    :param store: Store to use; default ``SimStore()`` (``$PIFLASH_SIM_DIR`` etc.).
    :param target: Target type if already known (saves a file read).

    DAP methods raise pyOCD's ``TransferFaultError`` (SWD FAULT, with ``fault_address`` for AHB
    errors), ``TransferError`` (fault ``absent``, or no board on the fixture: no ACK) and
    ``ProbeDisconnected``.

    A board pulled off the fixture or swapped for another (:meth:`SimStore.pull`,
    :meth:`SimStore.swap`, possibly by another process) is noticed within about 0.05 s: the
    session's target is gone for good (its debug port stopped answering, as a real one loses
    power), and only a new session sees the board that is seated now.
    """

    # -- enumeration -------------------------------------------------------------------------
    @classmethod
    def get_all_connected_probes(
        cls, unique_id: Optional[str] = None, is_explicit: bool = False
    ) -> Sequence["SimProbe"]:
        """All present boards of the default store (the aggregator filters by ``unique_id``)."""
        try:  # enumeration must never break pyOCD's probe scan
            store = SimStore()
            infos = store.list()
        except Exception as err:
            LOG.debug("cannot list simulated boards: %s", err)
            return []
        from piflash.sim.probes.usb.spec import attached_boards

        behind_usb = set(attached_boards())  # those are listed as USB probes instead
        return [cls(info.name, store, info.target) for info in infos if info.present and info.name not in behind_usb]

    @classmethod
    def get_probe_with_id(cls, unique_id: str, is_explicit: bool = False) -> Optional["SimProbe"]:
        """The probe for board ``unique_id`` (``NAME`` or ``sim:NAME``), or None.

        With ``is_explicit`` (the user typed ``sim:``), a missing board whose name is a target
        type optionally followed by ``-suffix`` is created; any other missing valid name that is
        not part of an existing board's name (those are left to pyOCD's substring match) gives
        a probe whose board is created when the session supplies the target type. An ejected
        board returns None.
        """
        name = (unique_id or "").strip().lower()
        if name.startswith(PLUGIN_NAME + ":"):
            name = name[len(PLUGIN_NAME) + 1 :]
            is_explicit = True
        try:
            store = SimStore()
        except Exception as err:
            LOG.debug("no simulated board store: %s", err)
            return None
        if not store.exists(name):
            target = auto_target_for_name(name) if is_explicit else None
            if target is None:
                if not is_explicit or not valid_board_name(name) or _partial_match(store, name):
                    return None
                # Created once the session tells the target type (see _resolve_pending).
                return cls(name, store, pending=True)
            try:
                store.create(name, target, exist_ok=True)
                LOG.info("created simulated %s board %r in %s", target, name, store.root)
            except (OSError, ValueError) as err:
                LOG.warning("cannot create simulated board %r: %s", name, err)
                return None
        try:
            info = store.get(name)
        except (UnknownBoardError, ValueError, OSError):
            return None
        return cls(name, store, info.target) if info.present else None

    # -- construction ------------------------------------------------------------------------
    def __init__(
        self, name: str, store: Optional[SimStore] = None, target: Optional[str] = None, pending: bool = False
    ) -> None:
        super().__init__()
        self._name = name
        self._store = store if store is not None else SimStore()
        if target is None and not pending:
            target = self._store.get(name).target
        self._spec = get_target(target) if target is not None else None
        self._board = None
        self._is_open = False
        self._protocol: Optional[DebugProbe.Protocol] = None
        self._exit_stack: Optional[ExitStack] = None
        self._transfers = 0
        self._lost = False
        self._target_gone = False  # no board on the fixture (for the rest of this session)
        self._generation = 0  # the store's board generation this session loaded
        self._files: dict = {}  # {NVM region: fd of its image file} while open (write-through)
        self._dirty: dict = {}  # {NVM region: [lo, hi) changed since the last write-through}
        self._cut: Optional[str] = None  # which transfer-count fault fired ("disconnect_after"...)
        self._reset_asserted = False
        self._clock = 1_000_000.0
        self._info_version = (0, 0)
        self._saved_version = 0
        self._next_check = 0.0
        self._guard = threading.RLock()

    # -- properties --------------------------------------------------------------------------
    @property
    def board_name(self) -> str:
        """The simulated board's name."""
        return self._name

    @property
    def target_type(self) -> Optional[str]:
        """pyOCD target type of the board (``nrf51``, ``nrf52840``, ``stm32f103rc``); None
        while a board asked for by name only is not created yet."""
        return self._spec.name if self._spec is not None else None

    @property
    def vendor_name(self) -> str:
        return "piflash"

    @property
    def product_name(self) -> str:
        return self._spec.product_name if self._spec is not None else "Simulated board (not created yet)"

    @property
    def supported_wire_protocols(self) -> Collection[DebugProbe.Protocol]:
        return [DebugProbe.Protocol.DEFAULT, DebugProbe.Protocol.SWD]

    @property
    def unique_id(self) -> str:
        return "%s:%s" % (PLUGIN_NAME, self._name)

    @property
    def wire_protocol(self) -> Optional[DebugProbe.Protocol]:
        return self._protocol

    @property
    def is_open(self) -> bool:
        return self._is_open

    @property
    def capabilities(self) -> Set[DebugProbe.Capability]:
        """Raw SWJ and SWD sequences (a multi-drop target is selected with them)."""
        return {DebugProbe.Capability.SWJ_SEQUENCE, DebugProbe.Capability.SWD_SEQUENCE}

    @property
    def associated_board_info(self) -> Optional[PyocdBoardInfo]:
        """Board info naming the target type, so pyOCD picks it when ``-t`` is not given."""
        if self._spec is None:
            return None
        return PyocdBoardInfo(name=self._spec.product_name, target=self._spec.name, vendor="piflash")

    def create_associated_board(self) -> Optional[Board]:
        self._resolve_pending()
        if self._spec is None or self.session is None:
            return None
        return Board(self.session, board_info=self.associated_board_info)

    def _resolve_pending(self) -> None:
        """Create a board asked for by name only, using the session's target type."""
        if self._spec is not None:
            return
        if self._store.exists(self._name):
            self._spec = get_target(self._store.get(self._name).target)
            return
        target = None
        if self.session is not None and self.session.options.is_set("target_override"):
            target = str(self.session.options.get("target_override")).strip().lower()
        if target not in SIM_TARGETS:
            raise exceptions.ProbeError(
                "no simulated board %r; create it, or give its target type (-t %s)"
                % (self._name, " / -t ".join(SIM_TARGETS))
            )
        info = self._store.create(self._name, target, exist_ok=True)
        LOG.info("created simulated %s board %r in %s", target, self._name, self._store.root)
        self._spec = info.spec

    @property
    def transfer_count(self) -> int:
        """DAP transfers made in the current session (what ``disconnect_after`` counts)."""
        return self._transfers

    @property
    def generation(self) -> int:
        """The board generation this session loaded (:attr:`BoardInfo.generation`)."""
        return self._generation

    def board_gone(self) -> bool:
        """Whether the board of this session has left the fixture (swapped or pulled), looking
        at the store as a transfer does (at most every 0.05 s of wall time). False while no
        session is open or once the probe itself is lost (its transfers say so)."""
        with self._guard:
            if not self._is_open or self._lost:
                return False
            try:
                self._check_alive()
            except exceptions.ProbeDisconnected:
                return False
            return self._target_gone

    @property
    def board(self) -> "object":
        """The live :class:`~piflash.sim.board.SimBoard` while open (None otherwise)."""
        return self._board

    # -- open / close ------------------------------------------------------------------------
    def open(self, lock_timeout: float = SESSION_LOCK_TIMEOUT) -> None:
        """Load the board (taking the board's session lock).

        :param lock_timeout: Seconds to wait for another session of the board to end.
        :raises ProbeDisconnected: The board was removed or ejected.
        :raises ProbeError: Another session keeps the board busy for ``lock_timeout`` (10 s).
        """
        with self._guard:
            if self._is_open:
                return
            # A closed probe is locked by nobody. pyOCD's DP code can leave its lock() held when a
            # transfer fails (a board pulled mid-session); over the remote protocol that lock was
            # taken by the server thread of a client now gone, and would block every later client.
            self._lock = threading.RLock()
            self._resolve_pending()
            stack = ExitStack()
            try:
                stack.enter_context(self._store.session_lock(self._name, lock_timeout))
                info, images = self._store.load_state(self._name)
                if not info.present:
                    raise exceptions.ProbeDisconnected("simulated board %r is not present" % self._name)
                # An empty fixture opens at once: no emulator is built for a board that is not there.
                if info.seated:
                    from piflash.sim.board import (
                        SimBoard,  # the emulator is only needed from here on
                    )

                    self._board = SimBoard(info.spec, bytes.fromhex(info.target_uid), images, info.faults)
                else:
                    self._board = None
                self._generation = info.generation
                self._write_through()
            except BoardBusyError as err:
                stack.close()
                raise exceptions.ProbeError(str(err)) from None
            except UnknownBoardError:
                stack.close()
                raise exceptions.ProbeDisconnected("simulated board %r no longer exists" % self._name) from None
            except BaseException:
                self._close_files()
                stack.close()
                raise
            self._exit_stack = stack
            self._info_version = self._store.info_version(self._name)
            self._next_check = time.monotonic() + _RELOAD_INTERVAL
            self._saved_version = self._board.nvm_version if self._board is not None else 0
            self._transfers = 0
            self._lost = False
            self._target_gone = self._board is None
            self._is_open = True

    def _write_through(self) -> None:
        """Make every change of the board's flash arrays reach its image files, as real flash
        keeps what was programmed when the debugger's process dies: the changes a probe call
        (a DAP transfer, a reset) makes -- the debugger's own writes, or the flash algorithm the
        core runs meanwhile -- are written (``pwrite``, one per array changed) before the call
        returns, so ``kill -9`` loses at most the call in flight, as a power cut loses the
        operation under way. Into the page cache, no fsync: it survives the process, not a crash
        of the host. Called once the board is loaded; the first write is the whole image, so a
        short or missing file gets its full size."""
        board = self._board
        if board is None:
            return
        self._open_files()
        for region, nvm in board.nvm.items():
            nvm.add_mirror(lambda offset, data, region=region: self._note_change(region, offset, len(data)))
        self._flush_files()

    def _open_files(self) -> None:
        """(Re)open the image files: :meth:`_save` replaces them, so the new ones are opened after
        each save. A board swapped or removed meanwhile opens none (its writes go nowhere)."""
        self._close_files()
        self._files = self._store.open_nvm_files(self._name, self._generation)

    def _note_change(self, region: str, offset: int, length: int) -> None:
        span = self._dirty.get(region)
        if span is None:
            self._dirty[region] = [offset, offset + length]
        else:
            span[0], span[1] = min(span[0], offset), max(span[1], offset + length)

    def _flush_files(self) -> None:
        """Write the bytes changed since the last flush into the image files."""
        if not self._dirty:
            return
        dirty, self._dirty = self._dirty, {}
        board = self._board
        for region, (lo, hi) in dirty.items():
            fd = self._files.get(region)
            if fd is not None and board is not None:
                os.pwrite(fd, memoryview(board.nvm[region].data)[lo:hi], lo)

    def flushing(self):
        """Context manager for a change made to the board other than through a probe call (the
        simulated USB boot interface calls the boot ROM directly): what it changed in flash is in
        the image files when it ends."""
        return self._flushing()

    @contextlib.contextmanager
    def _flushing(self) -> Iterator[None]:
        """Around a probe call: what it changed in flash is in the image files when it returns
        (or raises)."""
        try:
            yield
        finally:
            self._flush_files()

    def _close_files(self) -> None:
        self._dirty = {}
        files, self._files = self._files, {}
        for fd in files.values():
            os.close(fd)

    def close(self) -> None:
        """Save the board state (unless already saved when the probe was lost) and release it."""
        with self._guard:
            if not self._is_open:
                return
            try:
                if not self._lost:
                    self._save()
            finally:
                self._close_files()
                self._is_open = False
                self._protocol = None
                self._board = None
                if self._exit_stack is not None:
                    self._exit_stack.close()
                    self._exit_stack = None

    def _save(self) -> None:
        board = self._board
        if board is None:
            return
        version = board.nvm_version
        if version == self._saved_version:
            return  # nothing changed since the last save (read-only session)
        stats = dict(board.stats)
        if self._store.save_state(self._name, board.nvm_images(), stats, self._generation):
            for key in board.stats:
                board.stats[key] = 0
            self._open_files()  # the save replaced the files: write through the new ones
        self._saved_version = version

    # -- target control ----------------------------------------------------------------------
    def connect(self, protocol: Optional[DebugProbe.Protocol] = None) -> None:
        """Select SWD (DEFAULT means SWD). :raises ProbeError: JTAG requested."""
        self._check_open()
        if protocol not in (None, DebugProbe.Protocol.DEFAULT, DebugProbe.Protocol.SWD):
            raise exceptions.ProbeError("simulated probe supports SWD only")
        self._protocol = DebugProbe.Protocol.SWD
        if self._board is not None:
            self._board.dp.line_reset()

    def disconnect(self) -> None:
        """Release the wire and save the board state."""
        with self._guard:
            self._protocol = None
            if self._is_open and not self._lost:
                self._save()

    def swj_sequence(self, length: int, bits: int) -> None:
        """Drive SWDIO/TMS with ``length`` bits of ``bits`` (LSB first). A single-drop DP in
        the model ignores them (its line reset is taken at :meth:`connect`); a multi-drop wire
        decodes dormant wake-up and line resets from them."""
        with self._guard:
            self._check_open()
            wire = getattr(self._board, "dp", None)
            if hasattr(wire, "swj_sequence"):
                wire.swj_sequence(length, bits)

    def swd_sequence(self, sequences):
        """DAP_SWD_Sequence (``pyocd.probe.debug_probe.DebugProbe.swd_sequence``): returns
        ``(0, [bytes read for each input item])``."""
        with self._guard:
            self._check_open()
            wire = getattr(self._board, "dp", None)
            if hasattr(wire, "swd_sequence"):
                return 0, wire.swd_sequence(sequences)
            return 0, [bytes((seq[0] + 7) // 8) for seq in sequences if len(seq) == 1]

    def set_clock(self, frequency: float) -> None:
        self._clock = frequency

    def reset(self) -> None:
        """Pulse nRESET (system reset of the board)."""
        with self._guard, self._flushing():
            self._check_alive()
            if self._board is not None:  # nRESET of an empty fixture goes nowhere
                self._board.set_reset_pin(True)
                self._board.set_reset_pin(False)

    def assert_reset(self, asserted: bool) -> None:
        """Drive nRESET low (True) or release it (False)."""
        with self._guard, self._flushing():
            self._check_alive()
            self._reset_asserted = bool(asserted)
            if self._board is not None:
                self._board.set_reset_pin(bool(asserted))

    def is_reset_asserted(self) -> bool:
        return self._reset_asserted

    def flush(self) -> None:
        if self._lost:
            raise exceptions.ProbeDisconnected("simulated probe %s was disconnected" % self.unique_id)

    # -- DAP access --------------------------------------------------------------------------
    def read_dp(self, addr: int, now: bool = True) -> Union[int, Callable[[], int]]:
        with self._guard, self._flushing():
            self._transfer(1)
            value = self._board.dp.read_dp(addr)
        return value if now else (lambda: value)

    def write_dp(self, addr: int, data: int) -> None:
        with self._guard, self._flushing():
            self._transfer(1)
            self._board.dp.write_dp(addr, data)

    def read_ap(self, addr: int, now: bool = True) -> Union[int, Callable[[], int]]:
        with self._guard, self._flushing():
            self._transfer(1)
            value = self._board.dp.read_ap(addr)
        return value if now else (lambda: value)

    def write_ap(self, addr: int, data: int) -> None:
        with self._guard, self._flushing():
            self._transfer(1)
            self._board.dp.write_ap(addr, data)

    def read_ap_multiple(
        self, addr: int, count: int = 1, now: bool = True
    ) -> Union[Sequence[int], Callable[[], Sequence[int]]]:
        with self._guard, self._flushing():
            self._transfer(count)
            values = self._board.dp.read_ap_multiple(addr, count)
        return values if now else (lambda: values)

    def write_ap_multiple(self, addr: int, values: Sequence[int]) -> None:
        with self._guard, self._flushing():
            allowed = self._transfer(len(values), partial=True)
            if allowed < len(values):
                if allowed:
                    self._board.dp.write_ap_multiple(addr, list(values)[:allowed])
                self._fire_cut()
            self._board.dp.write_ap_multiple(addr, values)

    # -- the board behind a device that is the board (a Pico in BOOTSEL mode) ------------------
    def board_present(self) -> bool:
        """Whether the board is still there, the store checked for changes now (at most every
        :data:`_RELOAD_INTERVAL` s, as for DAP transfers): faults set since are applied to the
        live board; an ejected (``sim unplug``), deleted, pulled or swapped board is gone, what
        was written up to then saved. For a device that is the board itself and makes no DAP
        transfers (the simulated BOOTSEL Pico: :mod:`piflash.sim.probes.usb.picoboot`).

        :returns: False once the board is gone (the probe is then lost or has no target).
        """
        with self._guard:
            try:
                self._check_alive()
            except exceptions.ProbeDisconnected:
                return False
            return not self._target_gone

    def pull_board(self) -> None:
        """The ``remove_after`` fault of a device that is the board fired: the board's flash is
        saved, the fault spent and the board taken off its fixture (``SimStore.pull``)."""
        with self._guard:
            if self._board is not None:
                self._board.faults.remove_after = None
            self._drop_target("remove_after", save=True)
            with _suppress_store_errors(self._name):
                self._store.pull(self._name)

    # -- fault handling ----------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._lost:
            raise exceptions.ProbeDisconnected("simulated probe %s was disconnected" % self.unique_id)
        if not self._is_open:
            raise exceptions.ProbeError("simulated probe %s is not open" % self.unique_id)

    def _check_alive(self) -> None:
        self._check_open()
        now = time.monotonic()
        if now >= self._next_check:
            self._next_check = now + _RELOAD_INTERVAL
            self._reload_if_changed()

    def _reload_if_changed(self) -> None:
        version = self._store.info_version(self._name)
        if version == self._info_version:
            return
        self._info_version = version
        try:
            info = self._store.get(self._name)
        except UnknownBoardError:
            self._lose("board removed")
        if not info.present:
            self._lose("board ejected")
        if self._board is None:
            return
        if info.generation != self._generation:
            self._drop_target("board swapped", save=False)  # the old board left with its flash
        elif not info.seated:
            self._drop_target("board pulled", save=True)
        else:
            self._board.apply_faults(info.faults)

    def _transfer(self, count: int, partial: bool = False) -> int:
        """Account for ``count`` DAP transfers; returns how many may proceed (only < count when
        ``partial``; otherwise the limit raises at once)."""
        self._check_alive()
        if self._target_gone or self._board.faults.absent:
            raise exceptions.TransferError(
                "no ACK from target (no board connected to simulated probe %s)" % self.unique_id
            )
        faults = self._board.faults
        limits = [(n, getattr(faults, n)) for n in ("disconnect_after", "remove_after")]
        limits = [(lim, n) for n, lim in limits if lim is not None and self._transfers + count > lim]
        if limits:
            limit, self._cut = min(limits)
            allowed = max(0, limit - self._transfers)
            self._transfers = limit
            if partial:
                return allowed
            self._fire_cut()
        self._transfers += count
        return count

    def _fire_cut(self) -> None:
        """A transfer-count fault fired: lose the probe or the board (raises either way)."""
        if self._cut == "remove_after":
            self._cut = None
            self._board.faults.remove_after = None
            self._drop_target("remove_after", save=True)
            with _suppress_store_errors(self._name):
                self._store.pull(self._name)
            raise exceptions.TransferError("no ACK from target (board pulled from simulated probe %s)" % self.unique_id)
        self._lose("disconnect_after")

    def _drop_target(self, why: str, save: bool) -> None:
        """The board left the fixture: keep its flash (``save``) and answer nothing from now on."""
        if self._target_gone:
            return
        LOG.debug("simulated probe %s: target gone (%s)", self.unique_id, why)
        if save:
            with _suppress_store_errors(self._name):
                self._save()
        self._target_gone = True
        self._board = None

    def _lose(self, why: str) -> None:
        """The probe vanishes: save what the board holds, then raise ProbeDisconnected."""
        if not self._lost:
            LOG.debug("simulated probe %s lost (%s)", self.unique_id, why)
            try:
                self._save()
            except Exception as err:  # the probe is gone either way
                LOG.warning("could not save simulated board %r: %s", self._name, err)
            self._lost = True
            self._protocol = None
        raise exceptions.ProbeDisconnected("simulated probe %s was disconnected (%s)" % (self.unique_id, why))


class _suppress_store_errors:
    """Log (not raise) a failure to write the store while a board or probe goes away."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc is not None and isinstance(exc, Exception):
            LOG.warning("could not update simulated board %r: %s", self._name, exc)
            return True
        return False


def _partial_match(store: SimStore, text: str) -> bool:
    try:
        return any(text in info.name for info in store.list() if info.present)
    except Exception:
        return False


# Register with pyOCD if its plugin scan ran while this module was being imported.
if _loading.unicorn_available() and PLUGIN_NAME not in _aggregator.PROBE_CLASSES:
    _aggregator.PROBE_CLASSES[PLUGIN_NAME] = SimProbe
