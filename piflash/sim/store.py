"""Persistent state of simulated boards (pure Python: usable without the emulator installed).

Layout under the state root (see :func:`default_root`)::

    <root>/<name>/board.json     target type, target unique ID, present and seated flags,
                                 board generation, faults, stats
    <root>/<name>/flash.bin      raw main flash image (erased bytes are 0xFF)
    <root>/<name>/uicr.bin       nRF UICR image (nRF targets only): holds APPROTECT / RBPCONF,
                                 so a locked board stays locked across sessions
    <root>/<name>/option.bin     STM32 option bytes (RDP: read-out protection level)
    <root>/.locks/<name>.lock    fcntl lock taken for every read/modify/write of the files
    <root>/.locks/<name>.session fcntl lock held while a probe has the board open

Every file is replaced atomically (written to a temporary file in the same directory, fsync'ed,
then ``os.replace``), so a reader never sees a half-written image. While a probe session has the
board open, its flash controller also writes every change straight into the image files
(:meth:`SimStore.open_nvm_files`): like real flash, what was programmed stays programmed when
the process holding the session dies (``kill -9``), and a reader sees flash as far as it got.
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import fcntl
import json
import os
import re
import secrets
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Union

from piflash.sim.faults import FAULT_NAMES, Faults
from piflash.sim.specs import SIM_TARGETS, NvmSpec, TargetSpec, get_target

__all__ = [
    "BoardInfo",
    "SimStore",
    "SimStoreError",
    "UnknownBoardError",
    "BoardExistsError",
    "BoardBusyError",
    "default_root",
    "valid_board_name",
    "auto_target_for_name",
]

_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")
_AUTO_RE = re.compile(r"^(%s)(-[a-z0-9_.-]+)?$" % "|".join(re.escape(t) for t in SIM_TARGETS))
_FORMAT = 1


class SimStoreError(Exception):
    """Base class of the store's own errors."""


class UnknownBoardError(SimStoreError, KeyError):
    """No board of that name exists in the store (a KeyError)."""

    def __str__(self) -> str:  # KeyError would show the message quoted
        return str(self.args[0]) if self.args else ""


class BoardExistsError(SimStoreError, ValueError):
    """A board of that name already exists (a ValueError)."""


class BoardBusyError(SimStoreError):
    """The board is open in another probe session and did not become free in time."""


def default_root() -> Path:
    """Return the state root: ``$PIFLASH_SIM_DIR``, else ``$XDG_STATE_HOME/piflash/sim``, else
    ``~/.local/state/piflash/sim`` (XDG Base Directory Specification 0.8 default for state).
    Read from the environment on every call."""
    env = os.environ.get("PIFLASH_SIM_DIR")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_STATE_HOME")
    if xdg:
        return Path(xdg).expanduser() / "piflash" / "sim"
    return Path.home() / ".local" / "state" / "piflash" / "sim"


def valid_board_name(name: str) -> bool:
    """Whether ``name`` matches ``[a-z0-9][a-z0-9_.-]*``."""
    return isinstance(name, str) and bool(_NAME_RE.match(name))


def auto_target_for_name(name: str) -> Optional[str]:
    """Target type implied by a board name for auto-creation, or None.

    A name qualifies when it is a target type alone or followed by ``-suffix``: ``"nrf52840"``,
    ``"nrf52840-2"``, ``"stm32f103rc-left"`` qualify; ``"nrf52840x"`` and ``"bench"`` do not.
    """
    m = _AUTO_RE.match(name or "")
    return m.group(1) if m else None


@dataclass
class BoardInfo:
    """Metadata of one stored board (a snapshot; it does not follow later changes).

    :param name: Board name; the probe's unique ID is ``"sim:" + name``.
    :param target: pyOCD target type name (one of ``SIM_TARGETS``).
    :param target_uid: The target's factory unique ID as lower-case hex of the bytes at the UID
        address, lowest address first (nRF: FICR DEVICEID[0..1], 8 bytes at 0x10000060; STM32:
        12 bytes at 0x1FFFF7E8), as piflash prints it everywhere (docs/result.schema.json,
        ``target_uid``); a board stored upper-case by an older version reads back lower-case.
    :param present: False after :meth:`SimStore.eject`: the probe is not listed and cannot be
        opened, like an unplugged USB probe.
    :param seated: False after :meth:`SimStore.pull`: the probe stays plugged in but no board
        sits on its fixture, so the debug port does not answer (as with the ``absent`` fault).
    :param generation: How many times the board on the fixture has been swapped for another
        (:meth:`SimStore.swap`); a probe session never writes one board's flash into another's.
    :param faults: Injected faults, see :mod:`piflash.sim.faults`.
    :param stats: Cumulative flash-controller operation counts over all sessions:
        ``erase_ops`` (page or mass erases carried out), ``program_ops`` (word/half-word program
        operations carried out), ``program_bytes``.
    :param created: ISO 8601 creation time (UTC).
    :param path: Directory holding the board's files.
    """

    name: str
    target: str
    target_uid: str
    present: bool = True
    seated: bool = True
    generation: int = 0
    faults: Faults = field(default_factory=Faults)
    stats: Dict[str, int] = field(default_factory=dict)
    created: str = ""
    path: Optional[Path] = None

    @property
    def unique_id(self) -> str:
        """The pyOCD probe unique ID, ``"sim:<name>"``."""
        return "sim:" + self.name

    @property
    def spec(self) -> TargetSpec:
        """The board's :class:`~piflash.sim.specs.TargetSpec`."""
        return get_target(self.target)

    def to_dict(self) -> Dict[str, object]:
        """The JSON form written to ``board.json``."""
        return {
            "format": _FORMAT,
            "name": self.name,
            "target": self.target,
            "target_uid": self.target_uid,
            "present": self.present,
            "seated": self.seated,
            "generation": self.generation,
            "faults": self.faults.to_dict(),
            "stats": dict(self.stats),
            "created": self.created,
        }


class SimStore:
    """Create, inspect and modify simulated boards.

    :param root: State root directory; default :func:`default_root` (evaluated when the store is
        created). The directory is created on first write.

    Errors: :class:`UnknownBoardError` (a KeyError: no such board), :class:`BoardExistsError`
    and ``ValueError`` (bad name, target type, unique ID or fault; BoardExistsError is one too),
    ``OSError`` from the file system.
    """

    def __init__(self, root: Union[str, Path, None] = None) -> None:
        self._root = Path(root).expanduser() if root is not None else default_root()

    @property
    def root(self) -> Path:
        """The state root directory."""
        return self._root

    # -- public API -------------------------------------------------------------------------
    def create(self, name: str, target: str, target_uid: Optional[str] = None, exist_ok: bool = False) -> BoardInfo:
        """Create a board with erased flash.

        :param name: Board name, ``[a-z0-9][a-z0-9_.-]*``.
        :param target: One of ``SIM_TARGETS``.
        :param target_uid: Hex string of the factory unique ID (16 hex digits for nRF, 24 for
            STM32); random if None.
        :param exist_ok: Return the existing board instead of raising if ``name`` exists with the
            same target type.
        :raises BoardExistsError: ``name`` exists (and not ``exist_ok`` or another target type).
        :raises ValueError: Invalid name, target type or unique ID.
        """
        _check_name(name)
        spec = get_target(target)
        uid = _normalise_uid(target_uid, spec) if target_uid is not None else secrets.token_bytes(spec.uid_length).hex()
        with self._lock(name):
            if self._json_path(name).exists():
                info = self._read_info(name)
                if exist_ok and info.target == target:
                    return info
                raise BoardExistsError("simulated board %r already exists" % name)
            info = BoardInfo(
                name=name,
                target=target,
                target_uid=uid,
                stats={"erase_ops": 0, "program_ops": 0, "program_bytes": 0},
                created=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds"),
                path=self._dir(name),
            )
            self._dir(name).mkdir(parents=True, exist_ok=True)
            for nvm in spec.nvm:
                _atomic_write(self._nvm_path(name, nvm.name), nvm.initial())
            self._write_info(info)
            return info

    def get(self, name: str) -> BoardInfo:
        """Return the board's :class:`BoardInfo`. :raises UnknownBoardError:"""
        _check_name(name)
        with self._lock(name):
            return self._read_info(name)

    def exists(self, name: str) -> bool:
        """Whether a board called ``name`` exists (False for invalid names)."""
        return valid_board_name(name) and self._json_path(name).exists()

    def list(self) -> List[BoardInfo]:
        """All boards, sorted by name (present or not). Unreadable entries are skipped."""
        out: List[BoardInfo] = []
        try:
            entries = sorted(os.listdir(self._root))
        except FileNotFoundError:
            return out
        for entry in entries:
            if valid_board_name(entry) and self._json_path(entry).exists():
                try:
                    out.append(self._read_info(entry))
                except (SimStoreError, OSError, ValueError):
                    continue
        return out

    def remove(self, name: str) -> None:
        """Delete the board and its files. :raises UnknownBoardError:"""
        _check_name(name)
        with self._lock(name):
            if not self._json_path(name).exists():
                raise UnknownBoardError("no simulated board %r" % name)
            shutil.rmtree(self._dir(name))

    def read_flash(self, name: str) -> bytes:
        """The whole main flash image (its length is the target's flash size).
        :raises UnknownBoardError:"""
        return self.read_nvm(name, "flash")

    def read_nvm(self, name: str, region: str = "flash") -> bytes:
        """The image of the non-volatile array ``region`` (``"flash"`` or, on nRF, ``"uicr"``).
        :raises UnknownBoardError: :raises KeyError: no such region on this target."""
        _check_name(name)
        with self._lock(name):
            info = self._read_info(name)
            return self._read_nvm_file(name, info.spec.nvm_by_name(region))

    def write_flash(self, name: str, data: bytes, offset: int = 0) -> None:
        """Overwrite raw flash bytes at ``offset`` (bytes from the flash base), bypassing the
        flash controller -- a test helper to pre-load a board.
        :raises UnknownBoardError: :raises ValueError: data does not fit."""
        _check_name(name)
        with self._lock(name):
            info = self._read_info(name)
            nvm = info.spec.flash
            if offset < 0 or offset + len(data) > nvm.size:
                raise ValueError("data does not fit in the %d-byte flash" % nvm.size)
            image = bytearray(self._read_nvm_file(name, nvm))
            image[offset : offset + len(data)] = data
            _atomic_write(self._nvm_path(name, nvm.name), bytes(image))

    def set_faults(self, name: str, **faults: object) -> BoardInfo:
        """Set faults (merged with those already set; a value of None clears one). Names and
        values: see :mod:`piflash.sim.faults`.
        :raises UnknownBoardError: :raises ValueError: unknown fault or bad value."""
        _check_name(name)
        with self._lock(name):
            info = self._read_info(name)
            for key, value in faults.items():
                info.faults.set(key, value, info.spec)
            self._write_info(info)
            return info

    def clear_faults(self, name: str, *names: str) -> BoardInfo:
        """Clear the named faults, or all faults if no name is given.
        :raises UnknownBoardError: :raises ValueError: unknown fault name."""
        return self.set_faults(name, **{n: None for n in (names or FAULT_NAMES)})

    def insert(self, name: str) -> BoardInfo:
        """Mark the board present (its probe is listed again). :raises UnknownBoardError:"""
        return self._set_present(name, True)

    def eject(self, name: str) -> BoardInfo:
        """Mark the board absent: its probe disappears from enumeration, cannot be opened, and an
        open session gets ``ProbeDisconnected`` within about 0.05 s. :raises UnknownBoardError:"""
        return self._set_present(name, False)

    # -- the board on the probe's fixture ----------------------------------------------------
    def pull(self, name: str) -> BoardInfo:
        """Take the board off the fixture: the probe stays listed and opens, but its debug port
        does not answer (SWD no ACK), and an open session loses the target within about 0.05 s.
        The board keeps its flash; a pending ``remove_after`` fault is spent.
        :raises UnknownBoardError:"""
        _check_name(name)
        with self._lock(name):
            info = self._read_info(name)
            info.seated = False
            info.faults.remove_after = None
            self._write_info(info)
            return info

    def seat(self, name: str) -> BoardInfo:
        """Put the same board (same target unique ID and flash) back on the fixture.
        :raises UnknownBoardError:"""
        _check_name(name)
        with self._lock(name):
            info = self._read_info(name)
            info.seated = True
            self._write_info(info)
            return info

    def swap(
        self,
        name: str,
        target_uid: Optional[str] = None,
        flash: Optional[bytes] = None,
        faults: Optional[Dict[str, object]] = None,
    ) -> BoardInfo:
        """Replace the board on the fixture with another one of the same target type, seated.

        The new board has its own target unique ID, its own flash (erased, or ``flash``: the
        first bytes of main flash, the rest erased; other arrays as on a new part: nRF UICR erased,
        STM32 option bytes unprotected), zeroed
        operation counts and only the given faults (faults belong to the board; set probe
        faults such as ``disconnect_after`` again after a swap). ``generation`` goes up by one, so
        a session still open on the old board never saves its flash into the new one.

        :param target_uid: hex digits of the new factory unique ID; random if None.
        :param flash: initial main-flash contents (bytes, at most the flash size).
        :param faults: fault settings of the new board (see :mod:`piflash.sim.faults`).
        :raises UnknownBoardError: :raises ValueError: bad unique ID, flash too large, bad fault.
        """
        _check_name(name)
        with self._lock(name):
            info = self._read_info(name)
            spec = info.spec
            uid = (
                _normalise_uid(target_uid, spec)
                if target_uid is not None
                else secrets.token_bytes(spec.uid_length).hex()
            )
            new_faults = Faults.from_dict(faults, spec)
            if flash is not None and len(flash) > spec.flash.size:
                raise ValueError("data does not fit in the %d-byte flash" % spec.flash.size)
            for nvm in spec.nvm:
                data = nvm.initial()
                if nvm.name == spec.flash.name and flash:
                    data = bytes(flash) + data[len(flash) :]
                _atomic_write(self._nvm_path(name, nvm.name), data)
            info.target_uid, info.faults, info.seated = uid, new_faults, True
            info.generation += 1
            info.stats = {key: 0 for key in info.stats}
            self._write_info(info)
            return info

    # -- interface used by the probe --------------------------------------------------------
    def info_version(self, name: str) -> "tuple[int, int]":
        """A value that changes whenever the board's JSON is rewritten (inode and mtime; every
        write replaces the file), ``(0, 0)`` if it is gone."""
        try:
            st = self._json_path(name).stat()
            return (st.st_ino, st.st_mtime_ns)
        except FileNotFoundError:
            return (0, 0)

    def load_state(self, name: str) -> "tuple[BoardInfo, Dict[str, bytes]]":
        """Read the board's metadata and all NVM images in one locked step.
        :raises UnknownBoardError:"""
        _check_name(name)
        with self._lock(name):
            info = self._read_info(name)
            images = {nvm.name: self._read_nvm_file(name, nvm) for nvm in info.spec.nvm}
            return info, images

    def open_nvm_files(self, name: str, generation: int) -> Dict[str, int]:
        """Open the board's NVM image files for writing in place (write-through of a live session,
        see :class:`~piflash.sim.probes.simprobe.SimProbe`): {region name: file descriptor opened
        ``O_WRONLY | O_CREAT``}. The caller writes with ``os.pwrite`` and closes them.

        A descriptor keeps writing into the file it opened: once the board is swapped or removed,
        or its images are replaced by :meth:`save_state`, :meth:`write_flash` or :meth:`swap`
        (every one of which writes a new file and renames it into place), its writes reach
        nobody's flash. Returns {} (opens nothing) when the board is gone or its generation is no
        longer ``generation``.

        :raises OSError: a file cannot be opened.
        """
        with self._lock(name):
            if not self._json_path(name).exists() or self._read_info(name).generation != generation:
                return {}
            fds: Dict[str, int] = {}
            try:
                for nvm in get_target(self._read_info(name).target).nvm:
                    fds[nvm.name] = os.open(str(self._nvm_path(name, nvm.name)), os.O_WRONLY | os.O_CREAT, 0o644)
            except BaseException:
                for fd in fds.values():
                    os.close(fd)
                raise
            return fds

    def save_state(
        self, name: str, images: Dict[str, bytes], stats_delta: Dict[str, int], generation: Optional[int] = None
    ) -> bool:
        """Write NVM images and add ``stats_delta`` to the stored counters, leaving the
        present flag and faults as they are on disk. Returns False if the board has been removed
        meanwhile, or (when ``generation`` is given) swapped for another board: nothing is
        written then."""
        with self._lock(name):
            if not self._json_path(name).exists():
                return False
            info = self._read_info(name)
            if generation is not None and generation != info.generation:
                return False
            for key, value in images.items():
                _atomic_write(self._nvm_path(name, key), value)
            if any(stats_delta.values()):
                for key, value in stats_delta.items():
                    info.stats[key] = int(info.stats.get(key, 0)) + int(value)
                self._write_info(info)
            return True

    @contextlib.contextmanager
    def session_lock(self, name: str, timeout: float = 10.0) -> Iterator[None]:
        """Hold the board's session lock (one open probe per board across processes).

        :param timeout: Seconds to wait for another session to end.
        :raises BoardBusyError: Still held elsewhere after ``timeout``.
        """
        fd = self._open_lock_file(name, "session")
        try:
            deadline = time.monotonic() + timeout
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except OSError as err:
                    if err.errno not in (errno.EAGAIN, errno.EACCES):
                        raise
                    if time.monotonic() >= deadline:
                        raise BoardBusyError("simulated board %r is in use by another session" % name) from None
                    time.sleep(0.05)
            yield
        finally:
            os.close(fd)

    # -- internals --------------------------------------------------------------------------
    def _dir(self, name: str) -> Path:
        return self._root / name

    def _json_path(self, name: str) -> Path:
        return self._root / name / "board.json"

    def _nvm_path(self, name: str, region: str) -> Path:
        return self._root / name / ("%s.bin" % region)

    def _open_lock_file(self, name: str, kind: str) -> int:
        lock_dir = self._root / ".locks"
        lock_dir.mkdir(parents=True, exist_ok=True)
        return os.open(str(lock_dir / ("%s.%s" % (name, kind))), os.O_RDWR | os.O_CREAT, 0o644)

    @contextlib.contextmanager
    def _lock(self, name: str) -> Iterator[None]:
        fd = self._open_lock_file(name, "lock")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _read_info(self, name: str) -> BoardInfo:
        try:
            with open(self._json_path(name), "r", encoding="utf-8") as f:
                data = json.load(f)
        except FileNotFoundError:
            raise UnknownBoardError("no simulated board %r" % name) from None
        spec = get_target(data["target"])
        return BoardInfo(
            name=name,
            target=spec.name,
            target_uid=str(data["target_uid"]).lower(),
            present=bool(data.get("present", True)),
            seated=bool(data.get("seated", True)),
            generation=int(data.get("generation", 0)),
            faults=Faults.from_dict(data.get("faults"), spec),
            stats={k: int(v) for k, v in (data.get("stats") or {}).items()},
            created=str(data.get("created", "")),
            path=self._dir(name),
        )

    def _write_info(self, info: BoardInfo) -> None:
        text = json.dumps(info.to_dict(), indent=2, sort_keys=True) + "\n"
        _atomic_write(self._json_path(info.name), text.encode("utf-8"))

    def _read_nvm_file(self, name: str, nvm: NvmSpec) -> bytes:
        size = nvm.size
        try:
            data = self._nvm_path(name, nvm.name).read_bytes()
        except FileNotFoundError:
            data = b""
        # A missing file reads as a new part's array (a board stored before the array was
        # modelled); a short one is padded as erased; a long one is cut to size.
        if not data:
            return nvm.initial()
        return data[:size] + b"\xff" * max(0, size - len(data))

    def _set_present(self, name: str, present: bool) -> BoardInfo:
        _check_name(name)
        with self._lock(name):
            info = self._read_info(name)
            info.present = present
            self._write_info(info)
            return info


def _check_name(name: str) -> None:
    if not valid_board_name(name):
        raise ValueError("invalid board name %r (use [a-z0-9][a-z0-9_.-]*)" % (name,))


def _normalise_uid(uid: str, spec: TargetSpec) -> str:
    text = str(uid).strip().replace(":", "").replace("-", "").lower()  # given in any case
    if len(text) != 2 * spec.uid_length or not re.fullmatch(r"[0-9a-f]+", text):
        raise ValueError("target_uid for %s must be %d hex digits" % (spec.name, 2 * spec.uid_length))
    return text


def _atomic_write(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(prefix=".%s." % path.name, dir=str(path.parent))
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
