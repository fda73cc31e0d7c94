"""Per-unit values from a list: a CSV file whose rows give each board its own values (MAC
addresses, keys, certificate IDs, printed serial strings), each row used by one board only.

The profile names the list (``list:`` on ``serial:`` or a ``patch:`` entry, see
:mod:`piflash.firmware.patch`); :func:`read_list` reads and checks it (:class:`UnitList`) and a
:class:`RowAllocator` hands its rows out, one per board, as :class:`piflash.production.serials.SerialAllocator`
hands out numbers: through leases of row blocks, from a :class:`LocalRowSource` (a station, or
several on one machine, without a ledger) or :class:`PostgresRowSource` (the stations of a line
sharing the central ledger). A list is known by its SHA-256: a list edited after rows of it
were used is refused (a changed file could give a used value again).

The states of a row in the station's database (``unitlists.sqlite3`` beside the serial
database), each change one SQLite transaction (WAL, ``synchronous=FULL``):

1. ``leased``: granted to this holder by its source, not yet given to a board;
2. ``taken``: given to a board, committed before anything is written to it;
3. ``used``: programming started on that board (:meth:`RowAllocator.programming`, at the start
   of the program phase): from here on the row is never given to another board, as its value may
   already be in that board's flash;
4. ``pass`` / ``fail``: the board's outcome; ``interrupted``: its process died while ``used``.

A board that fails while its row is ``taken`` (before programming: no connection, an erase
that failed, a patch that does not fit) gives the row back: ``leased`` again, the next board's.
After a crash a new allocator of the same holder gives back its ``leased`` and ``taken`` rows
and marks ``used`` ones ``interrupted``; a lease its source granted but this database never
recorded (a crash between the two) is found at the source by this database's identity and
given back whole. So a row is never lost and never given twice.

A lease whose rows are all done is *settled* with its source: the used rows with their boards'
target unique IDs and outcomes, the rest back into the pool (granted first by the next lease).
A source that cannot be reached keeps the lease open there; the settlement is retried at the
next lease, the clean stop (:meth:`RowAllocator.release`) and the next start.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import io
import os
import sqlite3
import stat
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Protocol, Sequence, Tuple, Union

from piflash.errors import ListUsedUpError, ProfileError, SerialError
from piflash.limits import LIST_MAX_BYTES, LIST_MAX_ROWS, LIST_MAX_VALUE
from piflash.production.serials import checkpoint
from piflash.progress import Phase, ProgressSink

#: Rows per lease by default (as :data:`piflash.production.serials.DEFAULT_BLOCK`).
DEFAULT_BLOCK = 16
#: The states of a row in the station's database (see the module docstring).
ROW_STATES = ("leased", "taken", "used", "pass", "fail", "interrupted", "back")
#: States of a row whose board may carry its value: never given again.
USED_STATES = ("used", "pass", "fail", "interrupted")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS lists (
  sha256 TEXT PRIMARY KEY, name TEXT NOT NULL, rows INTEGER NOT NULL, next INTEGER NOT NULL, added_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS src_leases (
  id INTEGER PRIMARY KEY AUTOINCREMENT, sha256 TEXT NOT NULL, holder TEXT NOT NULL, owner TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('open', 'closed')), leased_at REAL NOT NULL, closed_at REAL);
CREATE TABLE IF NOT EXISTS src_rows (
  sha256 TEXT NOT NULL, row INTEGER NOT NULL, lease_id INTEGER, holder TEXT,
  state TEXT NOT NULL CHECK (state IN ('leased', 'free', 'pass', 'fail', 'interrupted', 'used')),
  target_uid TEXT, at REAL NOT NULL, PRIMARY KEY (sha256, row));
CREATE TABLE IF NOT EXISTS leases (
  id INTEGER PRIMARY KEY AUTOINCREMENT, sha256 TEXT NOT NULL, holder TEXT NOT NULL, source_id INTEGER NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('open', 'closed')), settled INTEGER NOT NULL DEFAULT 0,
  leased_at REAL NOT NULL, closed_at REAL);
CREATE TABLE IF NOT EXISTS rows (
  sha256 TEXT NOT NULL, row INTEGER NOT NULL, lease_id INTEGER NOT NULL, holder TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('leased', 'taken', 'used', 'pass', 'fail', 'interrupted', 'back')),
  target_uid TEXT, taken_at REAL, done_at REAL, PRIMARY KEY (sha256, row));
"""


# -- the list ----------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class UnitList:
    """A checked CSV list: ``path`` (absolute), ``sha256`` (hex, of the file's bytes), the header
    ``columns``, the ``used`` columns (those the profile's entries take) and ``rows``: per data
    row (numbered 1..N in file order) its file ``line`` and its values of the used columns."""

    path: Path
    sha256: str
    columns: Tuple[str, ...]
    used: Tuple[str, ...]
    rows: Tuple[Tuple[int, Tuple[str, ...]], ...] = dataclasses.field(repr=False)

    @property
    def name(self) -> str:
        """The file's name (what the history records beside the SHA-256)."""
        return self.path.name

    def __len__(self) -> int:
        return len(self.rows)

    def values(self, row: int) -> Dict[str, str]:
        """Row ``row`` (1-based): ``{column: value}`` of the used columns."""
        return dict(zip(self.used, self.rows[row - 1][1]))

    def source(self, row: int) -> Dict[str, Any]:
        """Where row ``row`` comes from, as the history records it: ``list`` (file name),
        ``list_sha256``, ``row`` (1-based) and ``line`` (in the file)."""
        return {"list": self.name, "list_sha256": self.sha256, "row": row, "line": self.rows[row - 1][0]}


def read_list(path: Union[str, Path], entries: Mapping[str, Any]) -> UnitList:
    """Read and check the CSV list ``path`` for the profile's ``entries`` (column -> its
    :class:`piflash.firmware.patch.PatchEntry`).

    The file: UTF-8 (a BOM is allowed), comma-separated (Python's ``csv`` "excel" dialect,
    spaces after a comma skipped), a header row naming the columns, then one row per board. At
    most :data:`piflash.limits.LIST_MAX_BYTES` bytes, :data:`~piflash.limits.LIST_MAX_ROWS` rows
    and :data:`~piflash.limits.LIST_MAX_VALUE` characters per value. Every used column's values
    must be present, unique (a value names one board), without a line break, and fit their
    entry's encoding. Empty lines are skipped.

    :raises ProfileError: (exit 5) naming the file, the line and the column at fault; a secret
        column's value is never shown.
    """
    path = Path(path)
    where = str(path)

    def fail(message: str, line: Optional[int] = None, hint: Optional[str] = None) -> "ProfileError":
        return ProfileError(message, path=where, line=line, hint=hint)

    try:
        if not stat.S_ISREG(os.stat(path).st_mode):  # a FIFO or a device would block or never end
            raise fail("the list is not a regular file")
        with open(path, "rb") as fh:
            data = fh.read(LIST_MAX_BYTES + 1)
    except OSError as exc:
        raise fail(
            f"cannot read the list: {exc.strerror or exc}", hint="check the path in the profile's list:"
        ) from None
    if len(data) > LIST_MAX_BYTES:
        raise fail(f"the list is larger than {LIST_MAX_BYTES:,} bytes", hint="split it into several lists")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise fail(f"not UTF-8 text (byte {exc.start})", line=data[: exc.start].count(b"\n") + 1) from None
    reader = csv.reader(io.StringIO(text, newline=""), skipinitialspace=True, strict=True)
    try:
        header = next(reader, None)
        while header is not None and not any(h.strip() for h in header):
            header = next(reader, None)
        if header is None:
            raise fail("the list is empty: it needs a header row naming its columns, then one row per board")
        header_line = reader.line_num
        columns = tuple(h.strip() for h in header)
        if "" in columns or len(set(columns)) != len(columns):
            raise fail("the header row must name every column once", line=header_line)
        missing = [c for c in entries if c not in columns]
        if missing:
            raise fail(
                f"no column {', '.join(repr(c) for c in missing)} (the list has {', '.join(columns)})",
                line=header_line,
                hint="name the column with column: in the profile's entry, or fix the header row",
            )
        index = [columns.index(c) for c in entries]
        seen: Dict[Tuple[str, str], int] = {}
        rows: List[Tuple[int, Tuple[str, ...]]] = []
        date = "2000-01-01"
        for record in reader:
            line = reader.line_num
            if not any(f.strip() for f in record):
                continue
            if len(record) != len(columns):
                raise fail(f"{len(record)} fields, the header has {len(columns)}", line=line)
            if len(rows) >= LIST_MAX_ROWS:
                raise fail(f"more than {LIST_MAX_ROWS:,} rows", line=line, hint="split it into several lists")
            values = []
            for column, i in zip(entries, index):
                entry = entries[column]
                value = record[i].strip()
                if not value:
                    raise fail(f"column '{column}' is empty", line=line)
                if "\n" in value or "\r" in value or len(value) > LIST_MAX_VALUE:
                    raise fail(
                        f"column '{column}' holds a line break or more than {LIST_MAX_VALUE} characters", line=line
                    )
                try:
                    entry.render(1, "0" * 16, date, value)
                except SerialError as exc:
                    raise fail(f"column '{column}': {exc.message}", line=line) from None
                first = seen.setdefault((column, value), line)
                if first != line:
                    shown = "its value" if entry.secret else repr(value)
                    raise fail(
                        f"column '{column}': {shown} is on line {first} too; a value is one board's",
                        line=line,
                        hint="each row is one board: remove the duplicate row",
                    )
                values.append(value)
            rows.append((line, tuple(values)))
    except csv.Error as exc:
        raise fail(f"not a CSV list: {exc}", line=reader.line_num) from None
    if not rows:
        raise fail("the list has a header but no rows")
    return UnitList(path.resolve(), hashlib.sha256(data).hexdigest(), columns, tuple(entries), tuple(rows))


def load_list(plan) -> Optional[UnitList]:
    """The list of ``plan`` (a :class:`piflash.firmware.patch.PatchPlan`), read and checked, or
    None when no entry takes a list. :raises ProfileError: see :func:`read_list`."""
    if plan is None or plan.list_path is None:
        return None
    return read_list(plan.list_path, plan.list_columns)


def default_path() -> Optional[Path]:
    """``unitlists.sqlite3`` beside the serial database (:func:`piflash.production.serials.default_path`)."""
    from piflash.production.serials import default_path as serials_path

    path = serials_path()
    return path.parent / "unitlists.sqlite3" if path is not None else None


def state_path(serials_path: Union[str, Path]) -> Path:
    """The row database beside a station's serial database ``serials_path``."""
    return Path(serials_path).parent / "unitlists.sqlite3"


# -- sources -----------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class RowLease:
    """Rows of one list granted to one holder: ``id`` (the source's lease id) and ``rows`` (1-based)."""

    id: int
    rows: Tuple[int, ...]


class RowSource(Protocol):
    """Grants blocks of list rows; :class:`LocalRowSource` or :class:`PostgresRowSource`."""

    def register(self, ulist: UnitList) -> None:
        """Know ``ulist``; :raises ProfileError: a list of that name changed after rows of it were used."""

    def lease(self, ulist: UnitList, holder: str, owner: str, count: int) -> RowLease:
        """Grant up to ``count`` rows (given-back ones first). :raises ListUsedUpError: none is left."""

    def settle(
        self, lease_id: int, sha256: str, used: Mapping[int, Tuple[str, Optional[str]]], back: Sequence[int]
    ) -> None:
        """Close the lease: ``used`` rows (row -> (state, target_uid)) stay used, ``back`` rows
        return to the pool. Idempotent. :raises SerialError: the source cannot be reached."""

    def orphans(self, ulist: UnitList, holder: str, owner: str, known: Sequence[int]) -> List[RowLease]:
        """Open leases of ``holder`` in database ``owner`` whose ids are not in ``known`` (granted,
        never recorded: a crash between), with their rows."""

    def available(self, ulist: UnitList) -> int:
        """Rows no lease holds and no board used."""


def _connect(path: Path) -> sqlite3.Connection:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(str(path), timeout=30.0, check_same_thread=False, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        db.executescript(_SCHEMA)
        db.execute("INSERT OR IGNORE INTO meta (key, value) VALUES ('owner', ?)", (uuid.uuid4().hex,))
        return db
    except (OSError, sqlite3.Error) as exc:
        raise SerialError(
            f"cannot open the list rows database {path}: {exc}",
            hint="check the folder and its permissions (it sits beside the serial database)",
        ) from None


class _Tx:
    """``with _Tx(db, path):`` one IMMEDIATE transaction; an SQLite error becomes a SerialError."""

    def __init__(self, db: sqlite3.Connection, path: Path) -> None:
        self.db, self.path = db, path

    def __enter__(self) -> sqlite3.Connection:
        try:
            self.db.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise SerialError(f"list rows database {self.path}: {exc}") from None
        return self.db

    def __exit__(self, kind, exc, tb) -> None:
        if kind is None:
            self.db.execute("COMMIT")
            return
        self.db.execute("ROLLBACK")
        if isinstance(exc, sqlite3.Error):
            raise SerialError(f"list rows database {self.path}: {exc}") from None


def _changed(name: str, old: str, new: str, where: str) -> ProfileError:
    return ProfileError(
        f"the list {name} changed (SHA-256 {old[:12]}... -> {new[:12]}...) after rows of it were used: "
        f"a changed list could give a used value to another board ({where})",
        hint="keep a list as it is once it is in use; put new rows into a new file with a new name",
    )


def _used_up(ulist: UnitList) -> ListUsedUpError:
    return ListUsedUpError(
        f"the list {ulist.name} is used up: all its {len(ulist):,} rows are used or held by other stations",
        hint="add a new list (a new file, named in the profile's list:)",
    )


class LocalRowSource:
    """Rows granted from the station's own database (one station, or several on one machine:
    SQLite serialises them)."""

    def __init__(self, db: sqlite3.Connection, path: Path) -> None:
        self.db, self.path = db, path

    def register(self, ulist: UnitList) -> None:
        with _Tx(self.db, self.path) as db:
            for (old,) in db.execute(
                "SELECT sha256 FROM lists WHERE name = ? AND sha256 <> ?", (ulist.name, ulist.sha256)
            ).fetchall():
                if db.execute("SELECT 1 FROM src_rows WHERE sha256 = ? LIMIT 1", (old,)).fetchone():
                    raise _changed(ulist.name, old, ulist.sha256, str(self.path))
            db.execute(
                "INSERT OR IGNORE INTO lists (sha256, name, rows, next, added_at) VALUES (?, ?, ?, 0, ?)",
                (ulist.sha256, ulist.name, len(ulist), time.time()),
            )

    def lease(self, ulist: UnitList, holder: str, owner: str, count: int) -> RowLease:
        now = time.time()
        with _Tx(self.db, self.path) as db:
            rows = [
                r
                for (r,) in db.execute(
                    "SELECT row FROM src_rows WHERE sha256 = ? AND state = 'free' ORDER BY row LIMIT ?",
                    (ulist.sha256, count),
                )
            ]
            (nxt,) = db.execute("SELECT next FROM lists WHERE sha256 = ?", (ulist.sha256,)).fetchone()
            new = list(range(nxt + 1, min(nxt + count - len(rows), len(ulist)) + 1))
            if not rows and not new:
                raise _used_up(ulist)
            lease_id = db.execute(
                "INSERT INTO src_leases (sha256, holder, owner, state, leased_at) VALUES (?, ?, ?, 'open', ?)",
                (ulist.sha256, holder, owner, now),
            ).lastrowid
            db.executemany(
                "UPDATE src_rows SET state = 'leased', lease_id = ?, holder = ?, at = ? WHERE sha256 = ? AND row = ?",
                [(lease_id, holder, now, ulist.sha256, r) for r in rows],
            )
            db.executemany(
                "INSERT INTO src_rows (sha256, row, lease_id, holder, state, at) VALUES (?, ?, ?, ?, 'leased', ?)",
                [(ulist.sha256, r, lease_id, holder, now) for r in new],
            )
            db.execute("UPDATE lists SET next = ? WHERE sha256 = ?", (nxt + len(new), ulist.sha256))
        return RowLease(int(lease_id or 0), tuple(rows + new))

    def settle(
        self, lease_id: int, sha256: str, used: Mapping[int, Tuple[str, Optional[str]]], back: Sequence[int]
    ) -> None:
        now = time.time()
        with _Tx(self.db, self.path) as db:
            if (
                db.execute(
                    "UPDATE src_leases SET state = 'closed', closed_at = ? WHERE id = ? AND state = 'open'",
                    (now, lease_id),
                ).rowcount
                == 0
            ):
                return
            db.executemany(
                "UPDATE src_rows SET state = ?, target_uid = ?, at = ? WHERE sha256 = ? AND row = ? AND lease_id = ?",
                [(state, uid, now, sha256, r, lease_id) for r, (state, uid) in used.items()],
            )
            db.executemany(
                "UPDATE src_rows SET state = 'free', lease_id = NULL, holder = NULL, at = ? "
                "WHERE sha256 = ? AND row = ? AND lease_id = ? AND state = 'leased'",
                [(now, sha256, r, lease_id) for r in back],
            )

    def orphans(self, ulist: UnitList, holder: str, owner: str, known: Sequence[int]) -> List[RowLease]:
        found = []
        for (lease_id,) in self.db.execute(
            "SELECT id FROM src_leases WHERE sha256 = ? AND holder = ? AND owner = ? AND state = 'open' ORDER BY id",
            (ulist.sha256, holder, owner),
        ).fetchall():
            if lease_id in known:
                continue
            rows = [
                r
                for (r,) in self.db.execute(
                    "SELECT row FROM src_rows WHERE lease_id = ? AND state = 'leased' ORDER BY row", (lease_id,)
                )
            ]
            found.append(RowLease(int(lease_id), tuple(rows)))
        return found

    def available(self, ulist: UnitList) -> int:
        (nxt,) = self.db.execute("SELECT next FROM lists WHERE sha256 = ?", (ulist.sha256,)).fetchone()
        (free,) = self.db.execute(
            "SELECT count(*) FROM src_rows WHERE sha256 = ? AND state = 'free'", (ulist.sha256,)
        ).fetchone()
        return len(ulist) - nxt + free


#: The ledger's tables of list rows (beside its counters; made at first use, idempotent).
LEDGER_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS ledger_unit_lists (sha256 text PRIMARY KEY, name text NOT NULL, "
    "rows bigint NOT NULL, next bigint NOT NULL, added_at double precision NOT NULL)",
    "CREATE TABLE IF NOT EXISTS ledger_unit_leases (id bigserial PRIMARY KEY, sha256 text NOT NULL, "
    "holder text NOT NULL, owner text NOT NULL, state text NOT NULL CHECK (state IN ('open', 'closed')), "
    "leased_at double precision NOT NULL, closed_at double precision)",
    "CREATE TABLE IF NOT EXISTS ledger_unit_rows (sha256 text NOT NULL, row bigint NOT NULL, lease_id bigint, "
    "holder text, state text NOT NULL CHECK (state IN ('leased', 'free', 'pass', 'fail', 'interrupted', 'used')), "
    "target_uid text, at double precision NOT NULL, PRIMARY KEY (sha256, row))",
)


class PostgresRowSource:
    """Rows granted from the central ledger at ``url``, shared by the stations of a line: a lease
    is one transaction with the list's row locked ``FOR UPDATE`` (two stations asking at once
    are served one after the other, and a row is granted once). One connection, opened at first
    use and opened again once after it broke. Thread-safe through the allocator's lock.
    """

    def __init__(self, url: str) -> None:
        self.url = url
        self._ledger: Any = None

    def _get(self):
        from piflash.record.ledger import Ledger, LedgerError, db_reason

        if self._ledger is None:
            try:
                ledger = Ledger(self.url)
                db = ledger.connection
                with db.transaction():
                    db.execute("SELECT pg_advisory_xact_lock(7428252)")
                    for statement in LEDGER_SCHEMA:
                        db.execute(statement)
            except LedgerError as exc:
                raise SerialError(
                    f"cannot lease list rows: {exc.message}",
                    hint="the station takes no list row it cannot lease: bring the database back",
                ) from None
            except ledger.errors as exc:
                ledger.close()
                raise SerialError(f"cannot make the ledger's list tables: {db_reason(exc)}") from None
            self._ledger = ledger
        return self._ledger

    def _run(self, what: str, call):
        """``call(connection)``, once more on a new connection if the old one broke."""
        from piflash.record.ledger import db_reason, safe_url

        for attempt in (1, 2):
            fresh = self._ledger is None
            ledger = self._get()
            try:
                return call(ledger.connection)
            except ledger.errors as exc:
                ledger.close()
                self._ledger = None
                if fresh or attempt == 2:
                    raise SerialError(
                        f"cannot {what} in the ledger {safe_url(self.url)}: {db_reason(exc)}",
                        hint="the station takes no list row it cannot lease: bring the database back",
                    ) from None
        raise AssertionError("unreachable")  # pragma: no cover

    def register(self, ulist: UnitList) -> None:
        def call(db):
            with db.transaction():
                for (old,) in db.execute(
                    "SELECT l.sha256 FROM ledger_unit_lists l WHERE l.name = %s AND l.sha256 <> %s AND EXISTS "
                    "(SELECT 1 FROM ledger_unit_rows r WHERE r.sha256 = l.sha256)",
                    (ulist.name, ulist.sha256),
                ).fetchall():
                    raise _changed(ulist.name, old, ulist.sha256, "the ledger")
                db.execute(
                    "INSERT INTO ledger_unit_lists (sha256, name, rows, next, added_at) VALUES (%s, %s, %s, 0, %s) "
                    "ON CONFLICT (sha256) DO NOTHING",
                    (ulist.sha256, ulist.name, len(ulist), time.time()),
                )

        self._run("register the list", call)

    def lease(self, ulist: UnitList, holder: str, owner: str, count: int) -> RowLease:
        def call(db):
            now = time.time()
            with db.transaction():
                (nxt,) = db.execute(
                    "SELECT next FROM ledger_unit_lists WHERE sha256 = %s FOR UPDATE", (ulist.sha256,)
                ).fetchone()
                rows = [
                    int(r)
                    for (r,) in db.execute(
                        "SELECT row FROM ledger_unit_rows WHERE sha256 = %s AND state = 'free' ORDER BY row LIMIT %s",
                        (ulist.sha256, count),
                    )
                ]
                new = list(range(nxt + 1, min(nxt + count - len(rows), len(ulist)) + 1))
                if not rows and not new:
                    raise _used_up(ulist)
                (lease_id,) = db.execute(
                    "INSERT INTO ledger_unit_leases (sha256, holder, owner, state, leased_at) "
                    "VALUES (%s, %s, %s, 'open', %s) RETURNING id",
                    (ulist.sha256, holder, owner, now),
                ).fetchone()
                with db.cursor() as cur:
                    if rows:
                        cur.executemany(
                            "UPDATE ledger_unit_rows SET state = 'leased', lease_id = %s, holder = %s, at = %s "
                            "WHERE sha256 = %s AND row = %s",
                            [(lease_id, holder, now, ulist.sha256, r) for r in rows],
                        )
                    if new:
                        cur.executemany(
                            "INSERT INTO ledger_unit_rows (sha256, row, lease_id, holder, state, at) "
                            "VALUES (%s, %s, %s, %s, 'leased', %s)",
                            [(ulist.sha256, r, lease_id, holder, now) for r in new],
                        )
                db.execute("UPDATE ledger_unit_lists SET next = %s WHERE sha256 = %s", (nxt + len(new), ulist.sha256))
            return RowLease(int(lease_id), tuple(rows + new))

        return self._run("lease list rows", call)

    def settle(
        self, lease_id: int, sha256: str, used: Mapping[int, Tuple[str, Optional[str]]], back: Sequence[int]
    ) -> None:
        def call(db):
            now = time.time()
            with db.transaction():
                if (
                    db.execute(
                        "UPDATE ledger_unit_leases SET state = 'closed', closed_at = %s WHERE id = %s AND state = 'open' "
                        "RETURNING id",
                        (now, lease_id),
                    ).fetchone()
                    is None
                ):
                    return
                with db.cursor() as cur:
                    if used:
                        cur.executemany(
                            "UPDATE ledger_unit_rows SET state = %s, target_uid = %s, at = %s "
                            "WHERE sha256 = %s AND row = %s AND lease_id = %s",
                            [(state, uid, now, sha256, r, lease_id) for r, (state, uid) in used.items()],
                        )
                    if back:
                        cur.executemany(
                            "UPDATE ledger_unit_rows SET state = 'free', lease_id = NULL, holder = NULL, at = %s "
                            "WHERE sha256 = %s AND row = %s AND lease_id = %s AND state = 'leased'",
                            [(now, sha256, r, lease_id) for r in back],
                        )

        self._run("settle a lease of list rows", call)

    def orphans(self, ulist: UnitList, holder: str, owner: str, known: Sequence[int]) -> List[RowLease]:
        def call(db):
            found = []
            for (lease_id,) in db.execute(
                "SELECT id FROM ledger_unit_leases WHERE sha256 = %s AND holder = %s AND owner = %s "
                "AND state = 'open' ORDER BY id",
                (ulist.sha256, holder, owner),
            ).fetchall():
                if int(lease_id) in known:
                    continue
                rows = db.execute(
                    "SELECT row FROM ledger_unit_rows WHERE lease_id = %s AND state = 'leased' ORDER BY row",
                    (lease_id,),
                ).fetchall()
                found.append(RowLease(int(lease_id), tuple(int(r) for (r,) in rows)))
            return found

        return self._run("read open leases of list rows", call)

    def available(self, ulist: UnitList) -> int:
        def call(db):
            (nxt,) = db.execute("SELECT next FROM ledger_unit_lists WHERE sha256 = %s", (ulist.sha256,)).fetchone()
            (free,) = db.execute(
                "SELECT count(*) FROM ledger_unit_rows WHERE sha256 = %s AND state = 'free'", (ulist.sha256,)
            ).fetchone()
            return len(ulist) - int(nxt) + int(free)

        return self._run("count list rows", call)

    def close(self) -> None:
        """Close the connection (if open)."""
        if self._ledger is not None:
            self._ledger.close()
            self._ledger = None


# -- the allocator -----------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class TakenRow:
    """The row a board took: ``row`` (1-based), its ``values`` (column -> value) and ``source``
    (:meth:`UnitList.source`)."""

    row: int
    values: Dict[str, str]
    source: Dict[str, Any]


class RowAllocator:
    """Hands one holder the rows of one list, lease by lease (see the module docstring). Thread-safe.

    :param ulist: the checked list (:func:`read_list`).
    :param holder: who takes the rows (the station's name, a worker process's holder, "cli").
    :param path: the row database (``unitlists.sqlite3``); default :func:`default_path`.
    :param block: rows per lease.
    :param source: where leases come from; default the :class:`LocalRowSource` of ``path``.
    :ivar recovered: what the last run of this holder left: ``{"back": rows given back,
        "interrupted": rows whose board died while programming}``.
    :raises SerialError: (exit 22) the database cannot be opened, the source cannot be reached.
    :raises ProfileError: (exit 5) the list changed after rows of it were used.
    """

    def __init__(
        self,
        ulist: UnitList,
        holder: str,
        path: Union[str, Path, None] = None,
        block: int = DEFAULT_BLOCK,
        source: Optional[RowSource] = None,
    ) -> None:
        path = Path(path) if path is not None else default_path()
        if path is None:
            raise SerialError("no list rows database: the history is off and PIFLASH_SERIALS is not set")
        if block < 1:
            raise ValueError("block must be >= 1")
        self.ulist, self.holder, self.path, self.block = ulist, holder, path, block
        self._lock = threading.Lock()
        self._db = _connect(path)
        self.owner = self._db.execute("SELECT value FROM meta WHERE key = 'owner'").fetchone()[0]
        self.source: RowSource = source or LocalRowSource(self._db, path)
        self.source.register(ulist)
        self.recovered = self._recover()

    def _recover(self) -> Dict[str, int]:
        """After a crash: rows ``leased`` or ``taken`` (never programmed) go back, ``used`` ones
        become ``interrupted``, the holder's open leases close and are settled; leases the source
        granted that were never recorded here are given back whole."""
        sha = self.ulist.sha256
        with self._lock:
            with _Tx(self._db, self.path) as db:
                back = db.execute(
                    "UPDATE rows SET state = 'back' WHERE sha256 = ? AND holder = ? AND state IN ('leased', 'taken')",
                    (sha, self.holder),
                ).rowcount
                interrupted = db.execute(
                    "UPDATE rows SET state = 'interrupted', done_at = ? WHERE sha256 = ? AND holder = ? "
                    "AND state = 'used'",
                    (time.time(), sha, self.holder),
                ).rowcount
                db.execute(
                    "UPDATE leases SET state = 'closed', closed_at = ? WHERE sha256 = ? AND holder = ? AND state = 'open'",
                    (time.time(), sha, self.holder),
                )
            known = [
                s
                for (s,) in self._db.execute(
                    "SELECT source_id FROM leases WHERE sha256 = ? AND holder = ?", (sha, self.holder)
                )
            ]
            for lease in self.source.orphans(self.ulist, self.holder, self.owner, known):
                self.source.settle(lease.id, sha, {}, lease.rows)
                back += len(lease.rows)
            self._settle_pending()
        return {"back": back, "interrupted": interrupted}

    def _settle_pending(self) -> int:
        """Settle closed leases with their source (best effort, in order); returns how many are
        still pending. Call with the lock held."""
        sha = self.ulist.sha256
        pending = self._db.execute(
            "SELECT id, source_id FROM leases WHERE sha256 = ? AND holder = ? AND state = 'closed' AND settled = 0 "
            "ORDER BY id",
            (sha, self.holder),
        ).fetchall()
        for n, (lease_id, source_id) in enumerate(pending):
            rows = self._db.execute(
                "SELECT row, state, target_uid FROM rows WHERE lease_id = ?", (lease_id,)
            ).fetchall()
            used = {r: (s, uid) for r, s, uid in rows if s in USED_STATES}
            back = [r for r, s, _ in rows if s == "back"]
            try:
                self.source.settle(source_id, sha, used, back)
            except SerialError:
                return len(pending) - n
            with _Tx(self._db, self.path) as db:
                db.execute("DELETE FROM rows WHERE lease_id = ? AND state = 'back'", (lease_id,))
                db.execute("UPDATE leases SET settled = 1 WHERE id = ?", (lease_id,))
        return 0

    def remaining(self) -> int:
        """Rows this holder still holds plus those its source can still grant (another station
        may take the latter first). :raises SerialError: the source cannot be reached."""
        with self._lock:
            (own,) = self._db.execute(
                "SELECT count(*) FROM rows WHERE sha256 = ? AND holder = ? AND state = 'leased'",
                (self.ulist.sha256, self.holder),
            ).fetchone()
            return int(own) + self.source.available(self.ulist)

    def take(self, target_uid: Optional[str] = None) -> TakenRow:
        """Give the next row to the board ``target_uid``, committed as ``taken`` before returning.

        :raises ListUsedUpError: (exit 22) no row is left anywhere.
        :raises SerialError: (exit 22) the database cannot be written, the source cannot be reached.
        """
        sha = self.ulist.sha256
        with self._lock:
            for _ in range(64):
                with _Tx(self._db, self.path) as db:
                    got = db.execute(
                        "SELECT row FROM rows WHERE sha256 = ? AND holder = ? AND state = 'leased' ORDER BY row LIMIT 1",
                        (sha, self.holder),
                    ).fetchone()
                    if got is not None:
                        db.execute(
                            "UPDATE rows SET state = 'taken', target_uid = ?, taken_at = ? WHERE sha256 = ? AND row = ?",
                            (target_uid, time.time(), sha, got[0]),
                        )
                if got is not None:
                    checkpoint("taken")
                    row = int(got[0])
                    return TakenRow(row, self.ulist.values(row), self.ulist.source(row))
                self._settle_pending()
                lease = self.source.lease(self.ulist, self.holder, self.owner, self.block)
                with _Tx(self._db, self.path) as db:
                    lease_id = db.execute(
                        "INSERT INTO leases (sha256, holder, source_id, state, leased_at) VALUES (?, ?, ?, 'open', ?)",
                        (sha, self.holder, lease.id, time.time()),
                    ).lastrowid
                    db.executemany(
                        "INSERT INTO rows (sha256, row, lease_id, holder, state) VALUES (?, ?, ?, ?, 'leased')",
                        [(sha, r, lease_id, self.holder) for r in lease.rows],
                    )
                checkpoint("leased")
            raise SerialError("could not take a list row from a fresh lease")  # pragma: no cover

    def programming(self, row: int) -> None:
        """Programming starts on the board holding ``row``: from now on it is that board's for
        good (committed before the first byte is written). :raises SerialError:"""
        with self._lock, _Tx(self._db, self.path) as db:
            db.execute(
                "UPDATE rows SET state = 'used' WHERE sha256 = ? AND row = ? AND holder = ? AND state = 'taken'",
                (self.ulist.sha256, row, self.holder),
            )

    def finish(self, row: int, ok: bool, target_uid: Optional[str] = None) -> str:
        """The board of ``row`` is done: ``pass``/``fail`` if programming had started, else the
        row goes back to this holder's lease for the next board. Returns the row's new state.
        A lease whose rows are all done is settled with its source. :raises SerialError:"""
        sha = self.ulist.sha256
        with self._lock:
            with _Tx(self._db, self.path) as db:
                got = db.execute(
                    "SELECT state, lease_id FROM rows WHERE sha256 = ? AND row = ? AND holder = ?",
                    (sha, row, self.holder),
                ).fetchone()
                if got is None or got[0] not in ("taken", "used"):
                    return got[0] if got else "unknown"
                state = "leased" if got[0] == "taken" else "pass" if ok else "fail"
                db.execute(
                    "UPDATE rows SET state = ?, target_uid = coalesce(?, target_uid), done_at = ? "
                    "WHERE sha256 = ? AND row = ?",
                    (state, target_uid, time.time() if state != "leased" else None, sha, row),
                )
                lease_id = got[1]
                open_rows = db.execute(
                    "SELECT count(*) FROM rows WHERE lease_id = ? AND state IN ('leased', 'taken', 'used')", (lease_id,)
                ).fetchone()[0]
                if open_rows == 0:
                    db.execute(
                        "UPDATE leases SET state = 'closed', closed_at = ? WHERE id = ?", (time.time(), lease_id)
                    )
            checkpoint("finished")
            if state != "leased":
                self._settle_pending()
            return state

    def release(self) -> int:
        """A clean stop, once no board is being served: give the rows not taken back to the
        source and settle every lease. Returns how many rows went back.

        :raises SerialError: a settlement could not reach the source (retried at the next start).
        """
        sha = self.ulist.sha256
        with self._lock:
            with _Tx(self._db, self.path) as db:
                back = db.execute(
                    "UPDATE rows SET state = 'back' WHERE sha256 = ? AND holder = ? AND state = 'leased'",
                    (sha, self.holder),
                ).rowcount
                db.execute(
                    "UPDATE leases SET state = 'closed', closed_at = ? WHERE sha256 = ? AND holder = ? AND state = 'open' "
                    "AND NOT EXISTS (SELECT 1 FROM rows r WHERE r.lease_id = leases.id AND r.state IN ('taken', 'used'))",
                    (time.time(), sha, self.holder),
                )
            pending = self._settle_pending()
        if pending:
            raise SerialError(
                f"{pending} lease(s) of list rows could not be settled with the ledger yet (settled at the next start)"
            )
        return back

    def rows(self) -> List[dict]:
        """Every row this database recorded of the list (all holders), in order, as dicts
        (``row``, ``state``, ``holder``, ``target_uid``)."""
        with self._lock:
            cur = self._db.execute(
                "SELECT row, state, holder, target_uid FROM rows WHERE sha256 = ? ORDER BY row", (self.ulist.sha256,)
            )
            return [dict(zip(("row", "state", "holder", "target_uid"), r)) for r in cur.fetchall()]

    def close(self) -> None:
        """Close the database (and the ledger's connection)."""
        with self._lock:
            self._db.close()
            close = getattr(self.source, "close", None)
            if close is not None:
                close()


def forget_row(result, plan) -> None:
    """A board that failed before programming gave its row back: drop the row's values from its
    ``result`` (an :class:`piflash.record.result.OperationResult`), so its history row does not
    name values another board gets: the ``patch`` entries from the list, and the ``serial`` when
    it came from the list. A counter's serial number stays (the board keeps it)."""
    if result is None or plan is None:
        return
    listed = {e.name for e in plan.entries if e.list is not None}
    if result.patch:
        result.patch = {k: v for k, v in result.patch.items() if k not in listed} or None
    if plan.serial_from_list:
        result.serial = None


def one_off_holder() -> str:
    """The holder of a one-off ``piflash flash``'s row: ``cli/<pid>/<process identity>`` (see
    :func:`piflash.record.history.process_identity`), one per process, so two one-offs at once on
    one machine never take each other's rows for a crashed run's (:func:`recover_one_offs`)."""
    from piflash.record.history import process_identity

    return f"cli/{os.getpid()}/{process_identity() or ''}"


def recover_one_offs(ulist: UnitList, path: Union[str, Path, None] = None, source_factory=None) -> int:
    """Settle what one-offs that died (their process is gone) left of ``ulist`` in the row
    database ``path``: their ``taken`` rows go back, ``used`` ones become ``interrupted``. Returns
    how many rows went back. ``source_factory()`` makes the source (default the local one).

    :raises SerialError: the database or the source cannot be used.
    """
    from piflash.record.history import process_alive

    path = Path(path) if path is not None else default_path()
    if path is None or not path.exists():
        return 0
    db = _connect(path)
    try:
        holders = [
            h
            for (h,) in db.execute(
                "SELECT DISTINCT holder FROM leases WHERE sha256 = ? AND holder LIKE 'cli/%' AND "
                "(state = 'open' OR settled = 0)",
                (ulist.sha256,),
            )
        ]
    finally:
        db.close()
    back = 0
    for holder in holders:
        _, pid, identity = (holder.split("/", 2) + ["", ""])[:3]
        if not pid.isdigit() or process_alive(None, int(pid), identity or None) is not False:
            continue
        alloc = RowAllocator(ulist, holder, path, 1, source=source_factory() if source_factory else None)
        try:
            back += alloc.recovered["back"] + alloc.release()
        finally:
            alloc.close()
    return back


class ProgrammingMark(ProgressSink):
    """A progress sink that passes everything on to ``sink`` (None: nowhere) and calls ``on_program()`` once,
    when the program phase starts (before its first byte is written): the moment a list row
    becomes its board's for good (:meth:`RowAllocator.programming`). Whatever ``on_program``
    raises stops the flash there, before programming."""

    def __init__(self, sink: Optional[ProgressSink], on_program) -> None:
        self._sink = sink if sink is not None else ProgressSink()  # None: quiet
        self._on_program = on_program
        #: Whether programming started (``on_program`` returned).
        self.started = False

    def phase_start(self, phase: "Phase | str", total: int) -> None:
        if phase == Phase.PROGRAM and not self.started:
            self._on_program()
            self.started = True
        self._sink.phase_start(phase, total)

    def phase_update(self, phase: "Phase | str", done: int) -> None:
        self._sink.phase_update(phase, done)

    def phase_end(self, phase: "Phase | str", summary: str = "") -> None:
        self._sink.phase_end(phase, summary)

    def message(self, text: str) -> None:
        self._sink.message(text)

    def __getattr__(self, name: str):
        return getattr(self._sink, name)


__all__ = [
    "UnitList",
    "read_list",
    "load_list",
    "default_path",
    "state_path",
    "RowLease",
    "RowSource",
    "LocalRowSource",
    "PostgresRowSource",
    "LEDGER_SCHEMA",
    "TakenRow",
    "RowAllocator",
    "ProgrammingMark",
    "forget_row",
    "one_off_holder",
    "recover_one_offs",
    "DEFAULT_BLOCK",
    "ROW_STATES",
    "USED_STATES",
]
