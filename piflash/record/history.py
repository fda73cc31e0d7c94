"""The history of every operation on every board, in SQLite, sealed in a hash chain.

One row per operation (flash, verify, erase, reset), from the command line and from the
station alike. A row is *opened* when the operation first reaches the board (the probe opened
and the connect reached the target, before anything is written to it) and *completed* at the
end, so a process killed in between leaves an ``open`` row: the next writer (a ``piflash flash``
or a station start) finds that its process is gone (:func:`process_alive`) and completes it as
``interrupted`` ("interrupted (process died)"). Completing a row seals it into the hash chain
(:mod:`piflash.record.chain`); ``piflash history verify-chain`` checks it.

A row's completion that the database cannot take (a disk that filled up during the operation) is
written into blocks reserved when the row was opened (``<history>-pending-<id>``, see
:data:`PENDING_BYTES`); readers show it at once and the next write that finds room seals the row
with it (:meth:`History.reap`), so the row tells what happened instead of "process died".

Every write is one ``BEGIN IMMEDIATE`` transaction, so several writers (the station's worker
threads, a user at the shell) never fork the chain. The database runs in WAL mode with
``synchronous=FULL`` so a committed row survives a power cut (SQLite's documentation,
"Write-Ahead Logging" and "PRAGMA synchronous").

Where it lives (:func:`default_path`): ``$PIFLASH_HISTORY`` if set, else
``$STATE_DIRECTORY/history.sqlite3`` (systemd's ``StateDirectory=``), else
``$XDG_STATE_HOME/piflash/history.sqlite3`` (``~/.local/state/piflash/...``).
``PIFLASH_HISTORY=off`` turns recording off for the command line.

Schema versions (``PRAGMA user_version``): 1 (piflash 0.1: no chain, ``probe_uid``), 2 (the
chain), 3 (the ``boot_check`` column), 4 (``bundle_sha256``, ``bundle_version``), 5 (this one:
``labgrid_place``). A
version-1 database is migrated when first opened: the column ``probe_uid`` becomes ``probe_id``,
the new columns are empty and the old rows are sealed in id order. A version-2 or 3 one gets the
columns it lacks, NULL in its rows, which their hashes still cover unchanged
(:data:`piflash.record.chain.LATE_COLUMNS`).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sqlite3
import threading
import time
import urllib.parse
import uuid
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Union

from piflash import redact, settings
from piflash.errors import HistoryError
from piflash.progress import Phase
from piflash.record.chain import GENESIS, ChainReport, row_hash, verify_chain

#: The operations' phases (:class:`piflash.progress.Phase`'s text) that get a duration column
#: each (seconds).
PHASES = tuple(p.value for p in Phase)

#: Outcomes of a completed row. ``interrupted``: its process died before completing it.
OUTCOMES = ("pass", "fail", "skip", "interrupted")
#: Outcome of a row whose operation is still running (or whose process died, until reaped).
OPEN = "open"
#: ``error`` of a row completed by :meth:`History.reap`.
DIED = "interrupted (process died)"

SCHEMA_VERSION = 5

#: Bytes reserved per open row for its completion in case the database cannot take it (a full
#: disk): ``<history>-pending-<row id>``, beside the database, removed once the row is complete.
#: A completion is about 1 KiB of JSON; a longer one is cut (it is then not taken over).
PENDING_BYTES = 16384

_COLUMNS = (
    (
        ("seq", "INTEGER UNIQUE"),  # position in the hash chain; NULL while open
        ("started_at", "REAL NOT NULL"),  # Unix time, seconds
        ("ended_at", "REAL"),  # NULL while open, and for a process that died
        ("station", "TEXT"),
        ("slot", "TEXT"),  # the station's worker slot (its probe)
        ("operation", "TEXT NOT NULL"),
        ("probe_id", "TEXT"),
        ("target", "TEXT"),
        ("target_uid", "TEXT"),
        ("firmware", "TEXT"),  # absolute path
        ("firmware_sha256", "TEXT"),
        ("profile", "TEXT"),
        ("serial", "TEXT"),
        ("patch", "TEXT"),  # JSON object
        ("protection", "TEXT"),  # read back: "open", "locked"; NULL unknown
        ("boot_check", "TEXT"),  # JSON object: the boot check's result (docs/boot-check.md)
        ("outcome", "TEXT NOT NULL CHECK (outcome IN ('open', 'pass', 'fail', 'skip', 'interrupted'))"),
        ("exit_code", "INTEGER"),  # NULL while open and for a process that died
        ("error_kind", "TEXT"),
        ("error", "TEXT"),
        ("phase", "TEXT"),  # the phase running when it failed (the last one run)
        ("image_bytes", "INTEGER NOT NULL DEFAULT 0"),
        ("programmed_bytes", "INTEGER NOT NULL DEFAULT 0"),
    )
    + tuple((f"{p}_s", "REAL") for p in PHASES)
    + (
        ("piflash_version", "TEXT"),
        ("pyocd_version", "TEXT"),
        ("host", "TEXT"),  # the machine that opened the row
        ("pid", "INTEGER"),  # ...its process
        ("process_start", "TEXT"),  # "<boot id>/<start time in clock ticks>" (Linux /proc)
        ("prev_hash", "TEXT"),
        ("row_hash", "TEXT"),
    )
    + (
        ("bundle_sha256", "TEXT"),  # SHA-256 of the job bundle (.pfb) the firmware came from (docs/bundles.md)
        ("bundle_version", "INTEGER"),  # ...its version; both NULL without a bundle
    )
    + (("labgrid_place", "TEXT"),)  # the labgrid place the row was flashed through (docs/ci.md); schema 5
)

#: The job bundle's columns (schema 4), added to an older table by the migration.
BUNDLE_COLUMNS = ("bundle_sha256", "bundle_version")

#: The labgrid column (schema 5, docs/ci.md), added to an older table by the migration.
LABGRID_COLUMNS = ("labgrid_place",)

COLUMN_NAMES = ("id",) + tuple(name for name, _ in _COLUMNS)

#: Schema 1's columns, for the migration (and its test).
V1_COLUMNS = (
    "id",
    "started_at",
    "ended_at",
    "station",
    "operation",
    "probe_uid",
    "target",
    "target_uid",
    "firmware",
    "firmware_sha256",
    "profile",
    "outcome",
    "exit_code",
    "error_kind",
    "error",
    "image_bytes",
    "programmed_bytes",
) + tuple(f"{p}_s" for p in PHASES)


def default_path() -> Optional[Path]:
    """Where the history database lives, or None when ``PIFLASH_HISTORY=off``."""
    env = settings.PIFLASH_HISTORY.value()
    if env is not None:
        return None if env is settings.OFF else env
    state = settings.STATE_DIRECTORY.value()
    if state:  # systemd may pass several, colon-separated: the first is ours
        return Path(state) / "history.sqlite3"
    xdg = settings.XDG_STATE_HOME.value() or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(xdg) / "piflash" / "history.sqlite3"


# -- the process that owns an open row ---------------------------------------------------------
def _boot_id() -> Optional[str]:
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:  # proc(5): random per boot
            return f.read().strip()
    except OSError:
        return None


def _start_ticks(pid: int) -> Optional[str]:
    """Field 22 of ``/proc/PID/stat`` (proc(5) "starttime": clock ticks after boot), or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            text = f.read()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()[19]  # fields after "(comm)" start at field 3


def process_identity(pid: Optional[int] = None) -> Optional[str]:
    """``"<boot id>/<start ticks>"`` of process ``pid`` (default: this one), None without /proc.

    A pid can be reused after its process ended; the boot id and the start time cannot both
    match another process, so together they name one process on one boot.
    """
    boot, ticks = _boot_id(), _start_ticks(os.getpid() if pid is None else pid)
    return f"{boot}/{ticks}" if boot and ticks else None


def process_alive(host: Optional[str], pid: Optional[int], identity: Optional[str]) -> Optional[bool]:
    """Whether the process that opened a row still runs: True, False, or None when this machine
    cannot tell (the row was opened on another host).

    Without ``/proc`` (or an identity) it falls back to the pid alone (``kill(pid, 0)``).
    """
    if host is not None and host != socket.gethostname():
        return None
    if pid is None:
        return False
    if identity and _boot_id():
        boot, _, ticks = identity.partition("/")
        return boot == _boot_id() and _start_ticks(pid) == ticks
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def row_state(row: Dict[str, object]) -> str:
    """A row's outcome as a reader should show it: the stored outcome, except an ``open`` row
    whose process is gone, which is ``interrupted`` (the next writer will store that)."""
    if row["outcome"] == OPEN and process_alive(row["host"], row["pid"], row["process_start"]) is False:
        return "interrupted"
    return str(row["outcome"])


_VERSIONS: Dict[str, Optional[str]] = {}


def _versions() -> Dict[str, Optional[str]]:
    """piflash's and pyOCD's versions (from the installed package metadata; pyOCD not imported)."""
    if not _VERSIONS:
        from importlib.metadata import PackageNotFoundError, version

        from piflash import __version__

        _VERSIONS["piflash_version"] = __version__
        try:
            _VERSIONS["pyocd_version"] = version("pyocd")
        except PackageNotFoundError:
            _VERSIONS["pyocd_version"] = None
    return _VERSIONS


def _result_values(result) -> Dict[str, object]:
    """The columns an :class:`~piflash.record.result.OperationResult` fills (identity of the job and board)."""
    firmware = result.firmware
    return {
        "operation": result.operation,
        "probe_id": result.probe_id,
        "target": result.target,
        "target_uid": result.target_uid,
        "firmware": os.path.abspath(firmware) if firmware else None,
        "firmware_sha256": result.firmware_sha256,
        "image_bytes": result.image_bytes or 0,
        "bundle_sha256": getattr(result, "bundle_sha256", None),
        "bundle_version": getattr(result, "bundle_version", None),
        "labgrid_place": getattr(result, "labgrid_place", None),
    }


class History:
    """A handle on the history database; safe to share between threads.

    :param path: the SQLite file (created with its folder if missing); default :func:`default_path`.
    :raises HistoryError: (exit 18) when the file cannot be created, opened or migrated, is not
        a database, or was made by a newer piflash.
    """

    def __init__(self, path: Union[str, Path, None] = None, *, reading: bool = False) -> None:
        path = Path(path) if path is not None else default_path()
        if path is None:
            raise HistoryError("history is turned off (PIFLASH_HISTORY=off)")
        self.path = path
        self._lock = threading.Lock()
        #: Opened read-only (:meth:`for_reading` on a file system that cannot be written).
        self.read_only = False
        #: The rows a read-only opening cannot see, as a sentence (a ``-wal`` file not checkpointed), or None.
        self.unseen: Optional[str] = None
        if reading and path.is_file() and not _writable_place(path):
            self._open_immutable(path)
            return
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(str(path), timeout=30.0, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._transaction(self._create)
        except (OSError, sqlite3.Error) as exc:
            raise HistoryError(
                f"cannot open the history database {path}: {_reason(path, exc)}", hint=_hint(path, exc)
            ) from exc

    @classmethod
    def for_reading(cls, path: Union[str, Path, None] = None) -> "History":
        """A handle for the commands that only read (``history``, ``history show``,
        ``verify-chain``): as :class:`History`, except that a history on a read-only file system,
        or a file this user may only read, is still read, opened with SQLite's ``immutable=1``
        (a WAL database cannot be opened ``mode=ro`` without writing its ``-shm`` file: SQLite's
        "Read-Only Databases" in https://sqlite.org/wal.html). :attr:`unseen` then names what it
        cannot see.

        :raises HistoryError: (exit 18) as :class:`History`.
        """
        return cls(path, reading=True)

    def _open_immutable(self, path: Path) -> None:
        try:
            uri = "file:" + urllib.parse.quote(str(path.resolve())) + "?immutable=1"
            self._db = sqlite3.connect(uri, uri=True, timeout=30.0, check_same_thread=False, isolation_level=None)
            version = self._db.execute("PRAGMA user_version").fetchone()[0]
            if version != SCHEMA_VERSION:
                raise HistoryError(
                    f"{path} has history schema {version} and cannot be written, so it "
                    f"cannot be brought to schema {SCHEMA_VERSION}",
                    hint="copy it to a writable folder and give that copy with --file",
                )
            self._db.execute("SELECT 1 FROM operations LIMIT 1").fetchall()
        except sqlite3.Error as exc:
            raise HistoryError(
                f"cannot open the history database {path}: {_reason(path, exc)}", hint=_hint(path, exc)
            ) from exc
        self.read_only = True
        wal = path.with_name(path.name + "-wal")
        with contextlib.suppress(OSError):
            if wal.stat().st_size > 0:
                self.unseen = (
                    f"rows still in {wal} (not yet written into the database by a "
                    f"piflash that stopped) are not shown: the file cannot be written"
                )

    def check_sound(self) -> None:
        """Prove that the database is a sound SQLite file throughout (``PRAGMA quick_check``,
        https://sqlite.org/pragma.html#pragma_quick_check): a file damaged past its first pages
        opens and takes the schema's checks, then fails the first row written. Reads every page
        once: for the station's start, not for every operation.

        :raises HistoryError: (exit 18) the file is damaged, with what SQLite found first.
        """
        try:
            with self._lock:
                found = [r[0] for r in self._db.execute("PRAGMA quick_check(1)").fetchall()]
        except sqlite3.Error as exc:
            raise HistoryError(
                f"the history database {self.path} is damaged: {exc}",
                hint=_hint(self.path, sqlite3.DatabaseError("malformed")),
            ) from exc
        if found != ["ok"]:
            lines = [line for text in found for line in str(text).splitlines() if not line.startswith("***")]
            raise HistoryError(
                f"the history database {self.path} is damaged: {(lines or found)[0]}",
                hint=_hint(self.path, sqlite3.DatabaseError("malformed")),
            )

    # -- plumbing -------------------------------------------------------------------------------
    def _transaction(self, body, *args):
        """Run ``body(*args)`` in one BEGIN IMMEDIATE transaction (all or nothing)."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                out = body(*args)
                self._db.execute("COMMIT")
                return out
            except BaseException:
                # A COMMIT that fails with SQLITE_FULL or SQLITE_IOERR has already rolled the
                # transaction back ("cannot rollback - no transaction is active" would then
                # replace the real cause).
                if self._db.in_transaction:
                    try:
                        self._db.execute("ROLLBACK")
                    except sqlite3.Error:
                        pass
                raise

    def _write(self, what: str, body, *args):
        try:
            return self._transaction(body, *args)
        except sqlite3.Error as exc:
            if _disk_full(exc, self.path):
                raise HistoryError(
                    f"no space left on {device_of(self.path)} for {self.path}",
                    hint="free space on that file system; rows of operations that "
                    "ended meanwhile are written at the next write",
                ) from exc
            raise HistoryError(f"cannot {what} in {self.path}: {exc}", hint=_hint(self.path, exc)) from exc

    # -- completions kept aside while the database cannot take them ------------------------------
    def _pending_path(self, row_id: int) -> Path:
        return self.path.with_name(f"{self.path.name}-pending-{row_id}")

    def _reserve_pending(self, row_id: int) -> None:
        """Reserve the blocks of row ``row_id``'s pending-completion file now, while there is
        space: when the completion cannot be written into the database later (a full disk), it
        is written here instead, into blocks already allocated, and the next write takes it over
        (:meth:`reap`). Best effort: no reservation when the file cannot be made."""
        try:
            fd = os.open(self._pending_path(row_id), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        except OSError:
            return
        try:
            os.write(fd, b"\0" * PENDING_BYTES)  # allocated (a fallocate may be refused)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(self._pending_path(row_id))
        finally:
            os.close(fd)

    def _keep_pending(self, row_id: int, values: Dict[str, object], reason: str) -> bool:
        """Write the completion of row ``row_id`` into its reserved file; True if it is there."""
        values = dict(values, error=_late_note(values.get("error"), reason))
        data = json.dumps({"row_id": row_id, "values": values}, sort_keys=True).encode()[:PENDING_BYTES]
        try:
            fd = os.open(self._pending_path(row_id), os.O_WRONLY)
        except OSError:
            return False
        try:
            if os.fstat(fd).st_size < len(data):
                return False  # nothing reserved to write into
            os.pwrite(fd, data, 0)
            os.fsync(fd)
            return True
        except OSError:
            return False
        finally:
            os.close(fd)

    def _read_pending(self, row_id: int) -> Optional[Dict[str, object]]:
        """The completion kept aside for row ``row_id``, or None (no file, or only the reservation)."""
        try:
            data = self._pending_path(row_id).read_bytes().rstrip(b"\0")
        except OSError:
            return None
        try:
            kept = json.loads(data) if data else None
        except ValueError:
            return None
        if not isinstance(kept, dict) or kept.get("row_id") != row_id:
            return None
        return {k: v for k, v in kept.get("values", {}).items() if k in COLUMN_NAMES}

    def _drop_pending(self, row_id: int) -> None:
        with contextlib.suppress(OSError):
            os.unlink(self._pending_path(row_id))

    def _create(self) -> None:
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise HistoryError(
                f"{self.path} has history schema {version}; this piflash knows up to {SCHEMA_VERSION}",
                hint="use a newer piflash",
            )
        exists = self._db.execute("SELECT 1 FROM sqlite_master WHERE name = 'operations'").fetchone()
        if exists and version == 1:
            self._migrate_v1()
        elif exists and version == 2:
            self._db.execute("ALTER TABLE operations ADD COLUMN boot_check TEXT")
        elif not exists:
            self._db.execute(_ddl("operations"))
        if exists and version < 5:
            self._add_late_columns(BUNDLE_COLUMNS + LABGRID_COLUMNS)
        self._db.execute("CREATE INDEX IF NOT EXISTS operations_started ON operations (started_at)")
        self._db.execute("CREATE INDEX IF NOT EXISTS operations_board ON operations (target_uid)")
        self._db.execute("CREATE INDEX IF NOT EXISTS operations_serial ON operations (serial)")
        self._db.execute("CREATE INDEX IF NOT EXISTS operations_open ON operations (outcome) WHERE outcome = 'open'")
        # Outside the hashed rows: the history's identity and the one-off rows asked for the ledger.
        # Written only when missing: a history on a read-only file opens, and is refused later, at
        # its first write, with that cause ("it is read-only").
        self._db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        if self._db.execute("SELECT 1 FROM meta WHERE key = 'identity'").fetchone() is None:
            self._db.execute("INSERT INTO meta (key, value) VALUES ('identity', ?)", (str(uuid.uuid4()),))
        self._db.execute("CREATE TABLE IF NOT EXISTS ledger_asked (row_id INTEGER PRIMARY KEY, asked_at REAL NOT NULL)")
        if version != SCHEMA_VERSION:
            self._db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def _add_late_columns(self, names: Iterable[str]) -> None:
        """Add each column of ``names`` (declared in :data:`_COLUMNS`) the table lacks, NULL in the
        old rows (in the caller's transaction)."""
        have = {r[1] for r in self._db.execute("PRAGMA table_info(operations)")}
        decl = dict(_COLUMNS)
        for name in names:
            if name not in have:
                self._db.execute(f"ALTER TABLE operations ADD COLUMN {name} {decl[name]}")

    def _migrate_v1(self) -> None:
        """Schema 1 -> 2 (in the caller's transaction): rebuild the table with the new columns
        (``probe_uid`` -> ``probe_id``), then seal the old rows into the chain in id order."""
        old = [c for c in V1_COLUMNS]
        new = ["probe_id" if c == "probe_uid" else c for c in old]
        top = self._db.execute("SELECT seq FROM sqlite_sequence WHERE name = 'operations'").fetchone()
        self._db.execute(_ddl("operations_v2"))
        self._db.execute(
            f"INSERT INTO operations_v2 ({', '.join(new)}) SELECT {', '.join(old)} FROM operations ORDER BY id"
        )
        self._db.execute("DROP TABLE operations")
        self._db.execute("ALTER TABLE operations_v2 RENAME TO operations")
        if top:  # keep the highest id ever given: a row deleted before the migration stays visible
            if self._db.execute("SELECT 1 FROM sqlite_sequence WHERE name = 'operations'").fetchone():
                self._db.execute("UPDATE sqlite_sequence SET seq = max(seq, ?) WHERE name = 'operations'", top)
            else:
                self._db.execute("INSERT INTO sqlite_sequence (name, seq) VALUES ('operations', ?)", top)
        for (rid,) in self._db.execute("SELECT id FROM operations ORDER BY id").fetchall():
            self._seal(rid)

    def _row(self, row_id: int) -> Dict[str, object]:
        values = self._db.execute(
            f"SELECT {', '.join(COLUMN_NAMES)} FROM operations WHERE id = ?", (row_id,)
        ).fetchone()
        if values is None:
            raise HistoryError(f"history row #{row_id} does not exist in {self.path}")
        return dict(zip(COLUMN_NAMES, values))

    def _seal(self, row_id: int) -> None:
        """Give row ``row_id`` the next seq, the previous row's hash and its own (in a transaction)."""
        last = self._db.execute(
            "SELECT seq, row_hash FROM operations WHERE seq IS NOT NULL ORDER BY seq DESC LIMIT 1"
        ).fetchone()
        seq, prev = (last[0] + 1, last[1]) if last else (1, GENESIS)
        self._db.execute("UPDATE operations SET seq = ?, prev_hash = ? WHERE id = ?", (seq, prev, row_id))
        # hashed as read back, so a REAL given as an int hashes as SQLite stores it
        self._db.execute("UPDATE operations SET row_hash = ? WHERE id = ?", (row_hash(self._row(row_id)), row_id))

    def row(self, row_id: int) -> Dict[str, object]:
        """Row ``row_id`` as {column: stored value}.

        :raises HistoryError: (exit 18) there is no such row.
        """
        with self._lock:
            return self._row(row_id)

    def find_row(self, row_id: int) -> Optional[Dict[str, object]]:
        """Row ``row_id`` as {column: stored value}, or None when the history has no such row.

        :raises HistoryError: (exit 18) the database cannot be read.
        """
        try:
            with self._lock:
                values = self._db.execute(
                    f"SELECT {', '.join(COLUMN_NAMES)} FROM operations WHERE id = ?", (row_id,)
                ).fetchone()
        except sqlite3.Error as exc:
            raise HistoryError(f"cannot read {self.path}: {exc}", hint=_hint(self.path, exc)) from exc
        return dict(zip(COLUMN_NAMES, values)) if values is not None else None

    def sealed_after(self, seq: int, limit: int = 500) -> List[Dict[str, object]]:
        """Sealed rows with a ``seq`` above ``seq``, in ``seq`` order, at most ``limit``: what a
        central ledger whose head for this history is ``seq`` has not got yet.

        :raises HistoryError: (exit 18) the database cannot be read.
        """
        try:
            with self._lock:
                got = self._db.execute(
                    f"SELECT {', '.join(COLUMN_NAMES)} FROM operations WHERE seq > ? ORDER BY seq LIMIT ?", (seq, limit)
                ).fetchall()
        except sqlite3.Error as exc:
            raise HistoryError(f"cannot read {self.path}: {exc}", hint=_hint(self.path, exc)) from exc
        return [dict(zip(COLUMN_NAMES, r)) for r in got]

    def head_seq(self) -> int:
        """The highest ``seq`` (0 for an empty chain). :raises HistoryError:"""
        try:
            with self._lock:
                row = self._db.execute("SELECT coalesce(max(seq), 0) FROM operations").fetchone()
        except sqlite3.Error as exc:
            raise HistoryError(f"cannot read {self.path}: {exc}", hint=_hint(self.path, exc)) from exc
        return int(row[0])

    @property
    def identity(self) -> Optional[str]:
        """This history's identity: a random UUID (text, 36 characters) made when the file was
        created (or first opened by a piflash that keeps one), kept in its ``meta`` table, outside
        the hashed rows. The central ledger registers a station's name with it
        (:meth:`piflash.record.ledger.Ledger.claim`), so a second history under the same name is
        told apart. None for a read-only history written before identities were kept.

        :raises HistoryError: (exit 18) the database cannot be read."""
        try:
            with self._lock:
                row = self._db.execute("SELECT value FROM meta WHERE key = 'identity'").fetchone()
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return None
            raise HistoryError(f"cannot read {self.path}: {exc}", hint=_hint(self.path, exc)) from exc
        except sqlite3.Error as exc:
            raise HistoryError(f"cannot read {self.path}: {exc}", hint=_hint(self.path, exc)) from exc
        return str(row[0]) if row else None

    def row_hash_at(self, seq: int) -> Optional[str]:
        """The ``row_hash`` of the row sealed as ``seq``, or None when there is none.

        :raises HistoryError: (exit 18) the database cannot be read."""
        try:
            with self._lock:
                row = self._db.execute("SELECT row_hash FROM operations WHERE seq = ?", (seq,)).fetchone()
        except sqlite3.Error as exc:
            raise HistoryError(f"cannot read {self.path}: {exc}", hint=_hint(self.path, exc)) from exc
        return str(row[0]) if row else None

    def ask_ledger(self, row_id: int) -> None:
        """Mark row ``row_id`` for the central ledger: a one-off command run with a ledger
        (``--ledger`` or ``PIFLASH_LEDGER``) uploads only the rows so marked
        (:meth:`asked_rows`), not the rest of a personal history. Kept outside the hashed rows.

        :raises HistoryError: (exit 18) the mark cannot be written."""

        def insert():
            self._db.execute(
                "INSERT OR IGNORE INTO ledger_asked (row_id, asked_at) VALUES (?, ?)", (row_id, time.time())
            )

        self._write("mark a row for the ledger", insert)

    def asked_rows(self, limit: int = 500) -> List[Dict[str, object]]:
        """The sealed rows marked by :meth:`ask_ledger` and not yet :meth:`ledger_took`, in ``seq``
        order, at most ``limit`` (a marked row still open waits until it is sealed).

        :raises HistoryError: (exit 18) the database cannot be read."""
        cols = ", ".join(f"o.{c}" for c in COLUMN_NAMES)
        try:
            with self._lock:
                got = self._db.execute(
                    f"SELECT {cols} FROM operations o JOIN ledger_asked a ON a.row_id = o.id "
                    "WHERE o.seq IS NOT NULL ORDER BY o.seq LIMIT ?",
                    (limit,),
                ).fetchall()
        except sqlite3.Error as exc:
            raise HistoryError(f"cannot read {self.path}: {exc}", hint=_hint(self.path, exc)) from exc
        return [dict(zip(COLUMN_NAMES, r)) for r in got]

    def ledger_took(self, row_ids: Iterable[int]) -> None:
        """Unmark rows the ledger now holds (the same ``row_hash``: checked by the upload).

        :raises HistoryError: (exit 18) the marks cannot be written."""
        ids = [(int(i),) for i in row_ids]

        def delete():
            self._db.executemany("DELETE FROM ledger_asked WHERE row_id = ?", ids)

        if ids:
            self._write("unmark rows uploaded to the ledger", delete)

    def check_writable(self) -> None:
        """Prove that rows can be written now, writing nothing: a write of the schema version
        inside a transaction that is rolled back (SQLite refuses it at once with SQLITE_READONLY
        for a read-only file or folder, an immutable file or a read-only file system; it opens
        such a file read-only without a word, so reading alone cannot tell).

        :raises HistoryError: (exit 18) the database cannot be written, with the reason.
        """
        try:
            with self._lock:
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    self._db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                finally:
                    self._db.execute("ROLLBACK")
        except sqlite3.Error as exc:
            raise HistoryError(
                f"cannot write the history database {self.path}: {_reason(self.path, exc)}", hint=_hint(self.path, exc)
            ) from exc

    def close(self) -> None:
        """Close the database (rows already recorded are safe whether or not this is called)."""
        with self._lock:
            self._db.close()

    def __enter__(self) -> "History":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writing --------------------------------------------------------------------------------
    def open(
        self,
        result,
        *,
        station: Optional[str] = None,
        slot: Optional[str] = None,
        profile: Optional[str] = None,
        serial: Optional[str] = None,
        patch: Optional[dict] = None,
        pid: Optional[int] = None,
    ) -> int:
        """Open a row for an operation that has just reached the board; returns its id.

        Call it once the probe is open and the target answered, before anything is written to
        the board; complete it with :meth:`complete`. Until then its outcome is ``open`` and it
        carries this process's pid and identity, so a later :meth:`reap` can tell that it died.
        Rows left open by dead processes are reaped first.

        :param result: the running :class:`piflash.record.result.OperationResult` (``started_at``,
            operation, probe_id, target, target_uid, firmware, firmware_sha256, image_bytes).
        :param station: the station's name, None for the command line.
        :param slot: the station's worker slot (its probe's unique ID), None for the command line.
        :param profile: the profile's name, if one was used.
        :param serial: the board's serial number (text), when one was assigned before programming.
        :param patch: the per-board values patched into the image (JSON-serialisable dict).
        :param pid: the process that works on the board, when another than this one (a station's
            worker process, :mod:`piflash.station.procs`): its death is what :meth:`reap` looks for.
        :raises HistoryError: (exit 18) the row cannot be written (the database is left as it was).
        """
        self.reap()
        row = {
            "started_at": result.started_at or time.time(),
            "station": station,
            "slot": slot,
            "profile": profile,
            "serial": serial,
            "patch": _patch_text(patch),
            "outcome": OPEN,
            "host": socket.gethostname(),
            "pid": pid or os.getpid(),
            "process_start": process_identity(pid),
        }
        row.update(_result_values(result))
        row.update(_versions())

        def insert():
            names = ", ".join(row)
            return int(
                self._db.execute(
                    f"INSERT INTO operations ({names}) VALUES ({', '.join(':' + k for k in row)})", row
                ).lastrowid
            )

        row_id = self._write("open a row", insert)
        self._reserve_pending(row_id)
        return row_id

    def complete(
        self,
        row_id: int,
        result,
        *,
        outcome: Optional[str] = None,
        protection: Optional[str] = None,
        serial: Optional[str] = None,
        patch: Optional[dict] = None,
    ) -> int:
        """Complete row ``row_id`` (from :meth:`open`) with the finished ``result`` and seal it.

        :param result: the finished :class:`piflash.record.result.OperationResult` (ok, or with ``error``).
        :param outcome: "pass", "fail", "skip" or "interrupted"; default "pass" if ``result.ok``
            else "fail".
        :param protection: the read-out protection state read back from the chip after the
            operation: "open", "locked", or None (not read, unknown).
        :param serial: the serial number, if not given to :meth:`open` (None keeps the stored one).
        :param patch: the patched values, if not given to :meth:`open` (None keeps the stored ones).
        :returns: ``row_id``.
        :raises HistoryError: (exit 18) the row cannot be written, does not exist or is already
            complete.
        :raises ValueError: an unknown outcome.
        """
        outcome = outcome or ("pass" if result.ok else "fail")
        if outcome not in OUTCOMES:
            raise ValueError(f"outcome must be one of {OUTCOMES}, not {outcome!r}")
        error = result.error or {}
        started = result.started_at or time.time()
        values: Dict[str, object] = _result_values(result)
        values.update(
            {
                "ended_at": started + (result.duration or 0.0),
                "outcome": outcome,
                "exit_code": (
                    int(error.get("exit_code", 1))
                    if outcome == "fail"
                    else 0
                    if outcome in ("pass", "skip")
                    else error.get("exit_code")
                ),
                "error_kind": error.get("kind"),
                # masked before the row is sealed: a sealed row can never be scrubbed
                "error": redact.scrub(error.get("message")),
                "phase": str(result.phase) if result.phase else None,
                "programmed_bytes": result.program.programmed_bytes if result.program else 0,
                "protection": protection,
                "boot_check": (
                    json.dumps(result.boot_check, sort_keys=True) if getattr(result, "boot_check", None) else None
                ),
            }
        )
        for phase in PHASES:
            values[f"{phase}_s"] = result.durations.get(phase)
        if serial is not None:
            values["serial"] = serial
        if patch is not None:
            values["patch"] = _patch_text(patch)

        def update():
            if self._row(row_id)["outcome"] != OPEN:
                raise HistoryError(f"history row #{row_id} is already complete")
            sets = ", ".join(f"{k} = :{k}" for k in values)
            self._db.execute(f"UPDATE operations SET {sets} WHERE id = :row_id", dict(values, row_id=row_id))
            self._seal(row_id)
            return row_id

        try:
            done = self._write("complete a row", update)
        except HistoryError as exc:
            if isinstance(exc.__cause__, sqlite3.Error) and self._keep_pending(row_id, values, exc.message):
                raise HistoryError(
                    f"{exc.message}; row #{row_id}'s outcome is kept in "
                    f"{self._pending_path(row_id)} and written into the row at the next "
                    f"write once there is room",
                    hint=exc.hint,
                ) from exc
            raise
        self._drop_pending(row_id)
        return done

    def annotate(self, row_id: int, *, serial: Optional[str] = None, patch: Optional[dict] = None) -> None:
        """Write the board's serial number (and patched values) into open row ``row_id`` the moment
        they are known, so a process killed before :meth:`complete` leaves an interrupted row that
        still names the number its board may carry (``piflash history --board SERIAL`` finds it).

        :param serial: the serial number (text); None leaves the column as it is.
        :param patch: the patched values (JSON-serialisable dict); None leaves the column as it is.
        :raises HistoryError: (exit 18) the row cannot be written, does not exist or is complete.
        """
        values = {k: v for k, v in (("serial", serial), ("patch", _patch_text(patch))) if v is not None}
        if not values:
            return

        def update():
            if self._row(row_id)["outcome"] != OPEN:
                raise HistoryError(f"history row #{row_id} is already complete")
            sets = ", ".join(f"{k} = :{k}" for k in values)
            self._db.execute(f"UPDATE operations SET {sets} WHERE id = :row_id", dict(values, row_id=row_id))

        self._write("write the serial number into a row", update)

    def record(
        self,
        result,
        *,
        outcome: Optional[str] = None,
        station: Optional[str] = None,
        slot: Optional[str] = None,
        profile: Optional[str] = None,
        serial: Optional[str] = None,
        patch: Optional[dict] = None,
        protection: Optional[str] = None,
    ) -> int:
        """Record a finished operation in one go (:meth:`open` then :meth:`complete`); returns its id.

        The parameters are those of :meth:`open` and :meth:`complete`.

        :raises HistoryError: (exit 18) the row cannot be written.
        :raises ValueError: an unknown outcome.
        """
        if (outcome or "pass") not in OUTCOMES:
            raise ValueError(f"outcome must be one of {OUTCOMES}, not {outcome!r}")
        row_id = self.open(result, station=station, slot=slot, profile=profile, serial=serial, patch=patch)
        return self.complete(row_id, result, outcome=outcome, protection=protection)

    def reap(self) -> List[int]:
        """Complete every open row whose process died (see :func:`process_alive`) as
        ``interrupted``, error "interrupted (process died)", ended_at and exit_code empty
        (unknown); returns their ids.

        :raises HistoryError: (exit 18) the rows cannot be written.
        """

        def body():
            done = []
            for rid, host, pid, ident in self._db.execute(
                "SELECT id, host, pid, process_start FROM operations WHERE outcome = 'open' ORDER BY id"
            ).fetchall():
                kept = self._read_pending(rid)
                if kept is not None:  # its process knew the outcome but could not write it
                    sets = ", ".join(f"{k} = :{k}" for k in kept)
                    self._db.execute(f"UPDATE operations SET {sets} WHERE id = :row_id", dict(kept, row_id=rid))
                elif process_alive(host, pid, ident) is False:
                    self._db.execute(
                        "UPDATE operations SET outcome = 'interrupted', error_kind = 'ProcessDied', "
                        "error = ? WHERE id = ?",
                        (DIED, rid),
                    )
                else:
                    continue
                self._seal(rid)
                done.append(rid)
            return done

        try:
            with self._lock:
                if not self._db.execute("SELECT 1 FROM operations WHERE outcome = 'open' LIMIT 1").fetchone():
                    return []
        except sqlite3.Error as exc:
            raise HistoryError(f"cannot read {self.path}: {exc}", hint=_hint(self.path, exc)) from exc
        done = self._write("complete rows of dead processes", body)
        for rid in done:
            self._drop_pending(rid)
        return done

    # -- reading --------------------------------------------------------------------------------
    def query(
        self,
        since: Optional[float] = None,
        failed: bool = False,
        board: Optional[str] = None,
        station: Optional[str] = None,
        limit: Optional[int] = None,
    ) -> List[Dict[str, object]]:
        """Rows, oldest first, as dicts keyed by :data:`COLUMN_NAMES` (values as stored).

        :param since: Unix time; only operations started at or after it.
        :param failed: only rows whose outcome is "fail" or "interrupted" (or open by a dead process).
        :param board: only this board: its target unique ID (case-insensitive) or its serial.
        :param station: only this station's rows.
        :param limit: at most this many of the newest matching rows.
        :raises HistoryError: (exit 18) when the database cannot be read.
        """
        where, args = [], []
        if since is not None:
            where.append("started_at >= ?")
            args.append(since)
        if board:
            where.append("(lower(target_uid) = lower(?) OR serial = ?)")
            args += [board, board]
        if station:
            where.append("station = ?")
            args.append(station)
        if failed:
            where.append("outcome IN ('fail', 'interrupted', 'open')")
        rows = self._select(where, args, limit)
        if failed:
            rows = [r for r in rows if row_state(r) in ("fail", "interrupted")]
        return rows

    def _select(self, where, args, limit=None) -> List[Dict[str, object]]:
        sql = f"SELECT {', '.join(COLUMN_NAMES)} FROM operations"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY id DESC"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        try:
            with self._lock:
                rows = self._db.execute(sql, args).fetchall()
        except sqlite3.Error as exc:
            raise HistoryError(f"cannot read {self.path}: {exc}", hint=_hint(self.path, exc)) from exc
        out = [dict(zip(COLUMN_NAMES, r)) for r in reversed(rows)]
        for row in out:  # a completion kept aside (full disk) is what happened: show it
            if row["outcome"] == OPEN:
                row.update(self._read_pending(int(row["id"])) or {})
        return out

    def verify_chain(self, anchor: Optional[str] = None) -> ChainReport:
        """Check the hash chain over the whole history (see :func:`piflash.record.chain.verify_chain`).

        :param anchor: a ``row_hash`` kept elsewhere; the report says whether it is still there.
        :raises HistoryError: (exit 18) when the database cannot be read.
        """
        try:
            with self._lock:  # one snapshot: a writer beside us changes nothing here
                self._db.execute("BEGIN")
                try:
                    rows = [
                        dict(zip(COLUMN_NAMES, r))
                        for r in self._db.execute(f"SELECT {', '.join(COLUMN_NAMES)} FROM operations ORDER BY id")
                    ]
                    top = self._db.execute("SELECT seq FROM sqlite_sequence WHERE name = 'operations'").fetchone()
                finally:
                    self._db.execute("COMMIT")
        except sqlite3.Error as exc:
            raise HistoryError(f"cannot read {self.path}: {exc}", hint=_hint(self.path, exc)) from exc
        return verify_chain(rows, int(top[0]) if top else 0, anchor)


def _ddl(table: str) -> str:
    cols = ",\n  ".join(f"{name} {decl}" for name, decl in _COLUMNS)
    return f"CREATE TABLE {table} (\n  id INTEGER PRIMARY KEY AUTOINCREMENT,\n  {cols})"


def _patch_text(patch: Optional[dict]) -> Optional[str]:
    return None if patch is None else json.dumps(patch, sort_keys=True, separators=(",", ":"))


def _reason(path: Path, exc: BaseException) -> str:
    if path.parent.exists() and not path.parent.is_dir():
        return f"{path.parent} is not a folder"
    if isinstance(exc, sqlite3.Error) and "readonly" in str(exc):  # SQLITE_READONLY
        return (
            "it is read-only for this user (a read-only file or folder, an immutable file "
            "(chattr +i), or a read-only file system)"
        )
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.strerror.lower()}" + (f": {exc.filename}" if exc.filename else "")
    if _disk_full(exc, path):
        return f"no space left on {device_of(path)} ({exc})"
    return str(exc)


def _disk_full(exc: BaseException, path: Optional[Path] = None) -> bool:
    """Whether an SQLite error comes from a full file system: SQLITE_FULL ("database or disk is
    full"), or an SQLITE_IOERR ("disk I/O error", any extended code) while the file system of
    ``path`` has no block left: SQLite reports a ``-shm`` or ``-wal`` file that cannot grow as an
    I/O error (SQLITE_IOERR_SHMSIZE, SQLITE_IOERR_WRITE: https://sqlite.org/rescode.html), not as
    SQLITE_FULL."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code == sqlite3.SQLITE_FULL or "disk is full" in str(exc):
        return True
    io_error = (code is not None and code & 0xFF == sqlite3.SQLITE_IOERR) or "disk i/o error" in str(exc).lower()
    return io_error and path is not None and _no_space(path)


def _no_space(path: Path) -> bool:
    """Whether the file system holding ``path`` (or its nearest existing folder) has no block
    left for this user (``statvfs``'s f_bavail; f_bfree for root, who may use the reserve)."""
    probe = Path(path)
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    try:
        st = os.statvfs(probe)
    except OSError:
        return False
    return (st.f_bfree if os.geteuid() == 0 else st.f_bavail) == 0


def device_of(path: Path) -> str:
    """The file system holding ``path``, as ``"SOURCE (TYPE mounted on MOUNTPOINT)"`` from
    ``/proc/self/mountinfo`` (proc(5): the entry whose major:minor is the file's ``st_dev``), e.g.
    ``"/dev/mmcblk0p2 (ext4 mounted on /)"``; the nearest existing folder when that is unknown."""
    probe = Path(path)
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    best = None
    try:
        dev = os.stat(probe).st_dev
        where = os.path.realpath(probe)
        with open("/proc/self/mountinfo") as f:
            for line in f:
                left, _, right = line.partition(" - ")
                fields, tail = left.split(), right.split()
                if len(fields) < 5 or len(tail) < 2 or fields[2] != f"{os.major(dev)}:{os.minor(dev)}":
                    continue
                mount = fields[4].replace("\\040", " ")
                inside = where == mount or where.startswith(mount.rstrip("/") + "/")
                if inside and (best is None or len(mount) > len(best[0])):
                    best = (mount, tail[0], tail[1])
    except OSError:
        pass
    if best is None:
        return f"the file system of {probe}"
    mount, fstype, source = best
    return f"{source} ({fstype} mounted on {mount})"


def _writable_place(path: Path) -> bool:
    """Whether SQLite could write ``path`` and its ``-wal``/``-shm`` files beside it: the file and
    its folder writable by this user, on a file system not mounted read-only (``os.access``
    answers EROFS as not writable, root included)."""
    return os.access(path, os.W_OK) and os.access(path.parent, os.W_OK | os.X_OK)


def _late_note(error: Optional[object], reason: str) -> str:
    note = f"written late: {reason} when the operation ended"
    return f"{error} ({note})" if error else note


def _hint(path: Path, exc: Optional[BaseException] = None) -> str:
    """What to do, for the cause at hand (a corrupt or full history was once told
    "is the folder writable?"): a full disk, a file that is not a sound SQLite database, else the
    folder's and file's permissions."""
    if exc is not None and _disk_full(exc, path):
        return f"free space on {device_of(path)}; nothing was lost from the rows already written"
    text = str(exc or "").lower()
    if "not a database" in text or "malformed" in text:
        return (
            f"{path} is damaged or not a piflash history: move it aside (mv {path} {path}.bad) and "
            f"piflash starts a new one; sqlite3 {path}.bad .recover may save its rows"
        )
    return f"check that {path.parent} is a folder this user may write, and {path.name} in it"


def summarize(rows: Iterable[Dict[str, object]]) -> Dict[str, object]:
    """Counts and rate over ``rows``: passed, failed, skipped, interrupted (including open rows
    of dead processes), open (still running), boards (distinct target unique IDs) and
    boards_per_hour: boards flashed and passed per hour, i.e. the passed ``flash`` rows between the
    first one's start and the last one's end; None for fewer than two (a failed flash, a verify,
    an erase or a protect row is no board made)."""
    rows = list(rows)
    states = [row_state(r) for r in rows]
    count = {o: states.count(o) for o in OUTCOMES + (OPEN,)}
    made = [r for r, s in zip(rows, states) if s == "pass" and r["operation"] == "flash"]
    rate = None
    if len(made) >= 2:
        span = max(r["ended_at"] or r["started_at"] for r in made) - min(r["started_at"] for r in made)
        rate = round(len(made) * 3600.0 / span, 1) if span > 0 else None
    return {
        "passed": count["pass"],
        "failed": count["fail"],
        "skipped": count["skip"],
        "interrupted": count["interrupted"],
        "open": count[OPEN],
        "boards": len({r["target_uid"] for r in rows if r["target_uid"]}),
        "boards_per_hour": rate,
    }
