"""Serial numbers from a counter in SQLite, handed out through leases of number blocks.

The rules: a number is taken, and committed to disk, before its board is
programmed; it is never given twice, whatever happens to the process or the power; a board that
fails keeps its number and is recorded as such.

How: a :class:`LeaseSource` grants blocks ("leases") of numbers from a counter; the
:class:`SerialAllocator` of one station takes the numbers of its current lease one by one.
Every step is one SQLite transaction (WAL, ``synchronous=FULL``, as the history: a committed
step survives a power cut):

1. lease: the source advances the counter past a block of ``block`` numbers and records the
   lease (local source: one transaction in this database);
2. take: the next number of the lease is inserted into ``numbers`` as ``taken`` (its primary key
   is (counter, n): a second insert of the same number fails instead of reusing it); a number of
   the lease this database already holds (a one-off's, or one the counter gave before: a shared
   source that forgot it) is skipped, recorded in ``skipped`` and logged, never taken twice;
3. finish: the number becomes ``pass`` or ``fail`` with the board's target unique ID. With
   ``numbering: passed`` (:data:`piflash.firmware.patch.NUMBERING`) a failed board's number
   is released instead (table ``released``: the number, its lease, the failed board, when) and
   the holder's next board takes it before any new number, so the passed boards carry
   consecutive numbers; a released number stays with its holder (a clean stop does not give it
   back: the next start reuses it).

A crash between any two steps loses at most numbers, never reuses one: a new allocator closes
its holder's open leases (their unused rest is lost) and marks its numbers still ``taken``
as ``interrupted`` (their boards may carry them). A clean stop loses nothing:
:meth:`SerialAllocator.release` gives the unused rest back (table ``returned``), and the next
lease of the counter grants those numbers first. Several stations sharing one counter later
only need another :class:`LeaseSource` (a central allocator granting blocks); the allocator and
the database of numbers stay as they are.

Where the database lives (:func:`default_path`): ``$PIFLASH_SERIALS`` if set, else
``serials.sqlite3`` next to the history database (:func:`piflash.record.history.default_path`).

Test-only hook: when the environment variable ``PIFLASH_TEST_KILL_AT`` names a step
(:data:`KILL_POINTS`), the process sends itself SIGKILL right after that step, so the tests can
prove the rules above at every step. Nothing else reads it; never set it in production.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import signal
import sqlite3
import threading
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Protocol, Tuple, Union

from piflash import settings
from piflash.errors import SerialError
from piflash.firmware.patch import CounterSpec

#: Default numbers per lease.
DEFAULT_BLOCK = 16
#: States of a number: taken (committed, board not finished yet), pass, fail, interrupted (the
#: process died before the board finished: the board may carry it).
NUMBER_STATES = ("taken", "pass", "fail", "interrupted")
#: Where ``PIFLASH_TEST_KILL_AT`` may stop the process (test only; see the module docstring).
KILL_POINTS = ("leased", "taken", "programmed", "verified", "finished", "recorded")

LOG = logging.getLogger(__name__)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS counters (
  name TEXT PRIMARY KEY, start INTEGER NOT NULL, step INTEGER NOT NULL, last INTEGER,
  next INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS leases (
  id INTEGER PRIMARY KEY AUTOINCREMENT, counter TEXT NOT NULL, holder TEXT NOT NULL,
  first INTEGER NOT NULL, count INTEGER NOT NULL, step INTEGER NOT NULL,
  used INTEGER NOT NULL DEFAULT 0, state TEXT NOT NULL CHECK (state IN ('open', 'closed')),
  leased_at REAL NOT NULL, closed_at REAL);
CREATE TABLE IF NOT EXISTS numbers (
  counter TEXT NOT NULL, n INTEGER NOT NULL, lease_id INTEGER NOT NULL, holder TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('taken', 'pass', 'fail', 'interrupted')),
  target_uid TEXT, taken_at REAL NOT NULL, done_at REAL, PRIMARY KEY (counter, n));
CREATE TABLE IF NOT EXISTS one_offs (
  id INTEGER PRIMARY KEY AUTOINCREMENT, counter TEXT NOT NULL, n INTEGER NOT NULL, holder TEXT NOT NULL,
  reissue INTEGER NOT NULL DEFAULT 0,
  state TEXT NOT NULL CHECK (state IN ('taken', 'pass', 'fail', 'interrupted')),
  target_uid TEXT, taken_at REAL NOT NULL, done_at REAL);
CREATE INDEX IF NOT EXISTS one_offs_n ON one_offs (counter, n);
CREATE TABLE IF NOT EXISTS lease_sources (
  lease_id INTEGER PRIMARY KEY, source_id INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS source_pending (
  lease_id INTEGER PRIMARY KEY, action TEXT NOT NULL CHECK (action IN ('close', 'lost')));
CREATE TABLE IF NOT EXISTS released (
  id INTEGER PRIMARY KEY AUTOINCREMENT, counter TEXT NOT NULL, n INTEGER NOT NULL,
  lease_id INTEGER NOT NULL, holder TEXT NOT NULL, target_uid TEXT, failed_at REAL NOT NULL,
  reused_at REAL);
CREATE INDEX IF NOT EXISTS released_free ON released (counter, holder, reused_at);
CREATE TABLE IF NOT EXISTS returned (
  counter TEXT NOT NULL, first INTEGER NOT NULL, count INTEGER NOT NULL, step INTEGER NOT NULL,
  lease_id INTEGER NOT NULL, returned_at REAL NOT NULL, PRIMARY KEY (counter, first));
CREATE TABLE IF NOT EXISTS skipped (
  id INTEGER PRIMARY KEY AUTOINCREMENT, counter TEXT NOT NULL, n INTEGER NOT NULL, lease_id INTEGER NOT NULL,
  holder TEXT NOT NULL, reason TEXT NOT NULL, skipped_at REAL NOT NULL);
"""


def checkpoint(step: str) -> None:
    """Test-only: SIGKILL this process if ``$PIFLASH_TEST_KILL_AT`` names ``step``."""
    if settings.PIFLASH_TEST_KILL_AT.value() == step:
        os.kill(os.getpid(), signal.SIGKILL)


def default_path() -> Optional[Path]:
    """``$PIFLASH_SERIALS``, else ``serials.sqlite3`` beside the history; None if both are off."""
    env = settings.PIFLASH_SERIALS.value()
    if env:
        return Path(env)
    from piflash.record.history import default_path as history_path

    hist = history_path()
    return hist.parent / "serials.sqlite3" if hist is not None else None


@dataclasses.dataclass(frozen=True)
class Lease:
    """A block of numbers granted to one holder: ``first``, ``first + step``, ... (``count`` of them).

    :ivar id: the lease's row id in the local database (a source's own id when a source returns it).
    :ivar skip: numbers of the block a one-off elsewhere on the line already gave (``flash --serial
        N`` through the ledger): ``(n, holder, state)`` each; the allocator records them as one-offs
        and never takes them.
    """

    id: int
    counter: str
    first: int
    count: int
    step: int
    skip: Tuple[Tuple[int, str, str], ...] = ()


class LeaseSource(Protocol):
    """Grants blocks of numbers. The local source below; a central allocator later."""

    def lease(self, counter: CounterSpec, holder: str, count: int) -> Lease:
        """Grant up to ``count`` numbers of ``counter`` to ``holder`` and record the lease.
        :raises SerialError: the counter is used up or its definition conflicts."""

    def give_back(self, lease: Lease, used: int) -> int:
        """Take back the numbers of ``lease`` after its first ``used`` (none of them was taken)
        and close it; returns how many came back. :raises SerialError:"""


def _connect(path: Path) -> sqlite3.Connection:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(str(path), timeout=30.0, check_same_thread=False, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        db.executescript(_SCHEMA)
        return db
    except (OSError, sqlite3.Error) as exc:
        raise SerialError(
            f"cannot open the serial database {path}: {exc}",
            hint="check the path and its permissions (PIFLASH_SERIALS, or 'serials:' in the station config)",
        ) from None


class _Tx:
    """``with _Tx(db):`` one IMMEDIATE transaction, committed or rolled back."""

    def __init__(self, db: sqlite3.Connection, path: Path) -> None:
        self.db, self.path = db, path

    def __enter__(self) -> sqlite3.Connection:
        self.db.execute("BEGIN IMMEDIATE")
        return self.db

    def __exit__(self, kind, exc, tb) -> bool:
        if kind is None:
            self.db.execute("COMMIT")
            return False
        self.db.execute("ROLLBACK")
        if isinstance(exc, sqlite3.IntegrityError):
            raise SerialError(
                f"serial database {self.path}: a number would be recorded twice ({exc})",
                hint="nothing was given; report this as a bug with the serial database attached "
                "(the allocator skips numbers the database already holds)",
            ) from None
        if isinstance(exc, sqlite3.Error):
            raise SerialError(f"serial database {self.path}: {exc}") from None
        return False


class LocalLeaseSource:
    """Leases from the counter kept in the same SQLite database (one station, or several on one
    machine: SQLite serialises them)."""

    def __init__(self, db: sqlite3.Connection, path: Path) -> None:
        self.db, self.path = db, path

    def lease(self, counter: CounterSpec, holder: str, count: int) -> Lease:
        with _Tx(self.db, self.path) as db:
            row = db.execute("SELECT start, step, last, next FROM counters WHERE name = ?", (counter.name,)).fetchone()
            if row is None:
                db.execute(
                    "INSERT INTO counters (name, start, step, last, next) VALUES (?, ?, ?, ?, ?)",
                    (counter.name, counter.start, counter.step, counter.end, counter.start),
                )
                nxt = counter.start
            else:
                start, step, _, nxt = row
                if (start, step) != (counter.start, counter.step):
                    raise SerialError(
                        f"counter '{counter.name}' exists with start {start}, step {step}; "
                        f"the profile says start {counter.start}, step {counter.step}",
                        hint="keep start/step of a counter in use, or name a new one with 'counter:'",
                    )
                db.execute("UPDATE counters SET last = ? WHERE name = ?", (counter.end, counter.name))
            back = db.execute(
                "SELECT first, count FROM returned WHERE counter = ? AND step = ? AND "
                "(? IS NULL OR first <= ?) ORDER BY first LIMIT 1",
                (counter.name, counter.step, counter.end, counter.end),
            ).fetchone()
            if back is not None:  # numbers a station gave back on a clean stop come first
                first, avail = back
                if counter.end is not None:
                    avail = min(avail, (counter.end - first) // counter.step + 1)
                left = min(count, avail)
                if left < back[1]:
                    db.execute(
                        "UPDATE returned SET first = ?, count = ? WHERE counter = ? AND first = ?",
                        (first + left * counter.step, back[1] - left, counter.name, first),
                    )
                else:
                    db.execute("DELETE FROM returned WHERE counter = ? AND first = ?", (counter.name, first))
            else:
                first = nxt
                left = count if counter.end is None else min(count, (counter.end - nxt) // counter.step + 1)
                if left <= 0:
                    raise SerialError(
                        f"serial counter '{counter.name}' is used up (last number {counter.end})",
                        hint="raise 'end' in the profile's serial: section, or start a new range",
                    )
                db.execute("UPDATE counters SET next = ? WHERE name = ?", (nxt + left * counter.step, counter.name))
            cur = db.execute(
                "INSERT INTO leases (counter, holder, first, count, step, state, leased_at) "
                "VALUES (?, ?, ?, ?, ?, 'open', ?)",
                (counter.name, holder, first, left, counter.step, time.time()),
            )
            lease = Lease(int(cur.lastrowid), counter.name, first, left, counter.step)
        checkpoint("leased")
        return lease

    def give_back(self, lease: Lease, used: int) -> int:
        """Close ``lease`` after its first ``used`` numbers and keep the rest (never taken: a
        number is taken in the same transaction that counts it used) in ``returned``, from where
        the next :meth:`lease` of the counter grants it first. Returns how many came back.

        :raises SerialError: the database cannot be written.
        """
        rest = lease.count - used
        with _Tx(self.db, self.path) as db:
            if rest > 0:
                db.execute(
                    "INSERT INTO returned (counter, first, count, step, lease_id, returned_at) "
                    "VALUES (?, ?, ?, ?, ?, ?)",
                    (lease.counter, lease.first + used * lease.step, rest, lease.step, lease.id, time.time()),
                )
            db.execute(
                "UPDATE leases SET count = ?, state = 'closed', closed_at = ? WHERE id = ?",
                (used, time.time(), lease.id),
            )
        return max(rest, 0)


class SerialAllocator:
    """Hands out one holder's serial numbers, lease by lease. Thread-safe.

    :param counter: the profile's counter.
    :param holder: who takes the numbers (the station's name; "cli" for the command line).
    :param path: the database; default :func:`default_path`.
    :param block: numbers per lease.
    :param source: where leases come from; default the :class:`LocalLeaseSource` of ``path``.
    :raises SerialError: the database cannot be opened.
    """

    def __init__(
        self,
        counter: CounterSpec,
        holder: str,
        path: Union[str, Path, None] = None,
        block: int = DEFAULT_BLOCK,
        source: Optional[LeaseSource] = None,
    ) -> None:
        path = Path(path) if path is not None else default_path()
        if path is None:
            raise SerialError("no serial database: the history is off and PIFLASH_SERIALS is not set")
        if block < 1:
            raise ValueError("block must be >= 1")
        self.counter, self.holder, self.path, self.block = counter, holder, path, block
        self._lock = threading.Lock()
        self._db = _connect(path)
        self.source = source or LocalLeaseSource(self._db, path)
        self.lost = self._recover()

    def _recover(self) -> Dict[str, int]:
        """Close this holder's open leases and mark its unfinished numbers (after a crash); a lease
        from another source (the ledger) is reported there as lost (:meth:`_sync_source`, now or
        at a later sync when the ledger cannot be reached now)."""
        with self._lock:
            with _Tx(self._db, self.path) as db:
                open_leases = db.execute(
                    "SELECT id, count, used FROM leases WHERE counter = ? AND holder = ? AND state = 'open'",
                    (self.counter.name, self.holder),
                ).fetchall()
                db.execute(
                    "INSERT OR REPLACE INTO source_pending (lease_id, action) SELECT l.id, 'lost' FROM "
                    "leases l JOIN lease_sources s ON s.lease_id = l.id WHERE l.counter = ? AND "
                    "l.holder = ? AND l.state = 'open'",
                    (self.counter.name, self.holder),
                )
                db.execute(
                    "UPDATE leases SET state = 'closed', closed_at = ? WHERE counter = ? AND holder = ? "
                    "AND state = 'open'",
                    (time.time(), self.counter.name, self.holder),
                )
                cur = db.execute(
                    "UPDATE numbers SET state = 'interrupted', done_at = ? WHERE counter = ? "
                    "AND holder = ? AND state = 'taken'",
                    (time.time(), self.counter.name, self.holder),
                )
            self._sync_source()
            return {"unused": sum(c - u for _, c, u in open_leases), "interrupted": cur.rowcount}

    def _sync_source(self) -> int:
        """Tell a source that grants leases of its own (the ledger) what became of the leases
        closed here (table ``source_pending``): ``close`` (used up, or given back) or ``lost``
        (closed by :meth:`_recover` after a crash). Best effort, in order; what cannot reach the
        source stays pending for the next sync (the next used-up lease, the clean stop, the next
        start), and meanwhile the source's lease expires and is accounted by time. Returns how
        many are still pending. Call with the lock held."""
        if isinstance(self.source, LocalLeaseSource):
            return 0
        pending = self._db.execute(
            "SELECT p.lease_id, p.action, s.source_id, l.first, l.count, l.step, l.used FROM source_pending p "
            "JOIN leases l ON l.id = p.lease_id JOIN lease_sources s ON s.lease_id = p.lease_id "
            "WHERE l.counter = ? AND l.holder = ? ORDER BY p.lease_id",
            (self.counter.name, self.holder),
        ).fetchall()
        for n, (lease_id, action, source_id, first, count, step, used) in enumerate(pending):
            try:
                if action == "lost":
                    close_lost = getattr(self.source, "close_lost", None)
                    if close_lost is not None:
                        close_lost(source_id, used)
                else:
                    give_back = getattr(self.source, "give_back", None)
                    if give_back is not None:
                        give_back(Lease(source_id, self.counter.name, first, count, step), used)
            except SerialError:
                return len(pending) - n
            with _Tx(self._db, self.path) as db:
                db.execute("DELETE FROM source_pending WHERE lease_id = ?", (lease_id,))
        return 0

    def _record_foreign(self, lease: Lease) -> None:
        """A lease granted by another source (the central ledger) becomes a local lease row, so
        its numbers are taken here as a local lease's are; ``lease_sources`` keeps the source's
        own lease id for the give-back."""
        with _Tx(self._db, self.path) as db:
            cur = db.execute(
                "INSERT INTO leases (counter, holder, first, count, step, state, leased_at) "
                "VALUES (?, ?, ?, ?, ?, 'open', ?)",
                (lease.counter, self.holder, lease.first, lease.count, lease.step, time.time()),
            )
            db.execute("INSERT INTO lease_sources (lease_id, source_id) VALUES (?, ?)", (cur.lastrowid, lease.id))
            for n, holder, state in lease.skip:  # one-offs elsewhere on the line: never taken here
                db.execute(
                    "INSERT INTO one_offs (counter, n, holder, reissue, state, taken_at) VALUES (?, ?, ?, 0, ?, ?)",
                    (lease.counter, n, f"{FOREIGN}{holder}", state if state in NUMBER_STATES else "taken", time.time()),
                )
        checkpoint("leased")

    def release(self) -> int:
        """Give the unused rest of this holder's open leases back to their source (a clean stop;
        a crash loses it instead, see :meth:`_recover`). Call it once no board is being numbered.
        Returns how many numbers went back.

        :raises SerialError: the database cannot be written.
        """
        with self._lock:
            open_leases = self._db.execute(
                "SELECT id, first, count, step, used FROM leases WHERE counter = ? AND holder = ? AND state = 'open'",
                (self.counter.name, self.holder),
            ).fetchall()
            back = 0
            if isinstance(self.source, LocalLeaseSource):
                for lease_id, first, count, step, used in open_leases:
                    back += self.source.give_back(Lease(lease_id, self.counter.name, first, count, step), used)
                return back
            with _Tx(self._db, self.path) as db:  # closed here; the ledger is told by the sync
                for lease_id, _first, count, _step, used in open_leases:
                    if db.execute("SELECT 1 FROM lease_sources WHERE lease_id = ?", (lease_id,)).fetchone() is None:
                        continue  # a local lease of an earlier run: not the ledger's
                    db.execute(
                        "UPDATE leases SET state = 'closed', closed_at = ? WHERE id = ?", (time.time(), lease_id)
                    )  # count kept: the give-back returns count - used
                    db.execute(
                        "INSERT OR REPLACE INTO source_pending (lease_id, action) VALUES (?, 'close')", (lease_id,)
                    )
                    back += count - used
            pending = self._sync_source()
            if pending:
                raise SerialError(
                    f"{pending} lease(s) closed here could not be closed at the ledger yet "
                    "(they expire there, and are closed at the next start)"
                )
            return back

    def close(self) -> None:
        """Close the database (committed numbers are safe either way)."""
        with self._lock:
            self._db.close()

    def take(self, target_uid: Optional[str] = None, on_taken: Optional[Callable[[int], None]] = None) -> int:
        """Take the next number and commit it as ``taken`` before returning it. A number of the
        lease that a one-off (:class:`OneOff`, ``flash --serial N``) already gave is skipped.

        :param on_taken: called with the number right after it is committed, as part of this step
            (the station writes it into the board's open history row there, so the test-only kill
            point ``taken`` comes after both). Whatever it raises is raised here; the number stays
            ``taken`` (never given again).
        :raises SerialError: the counter is used up, or the database cannot be written.
        """
        with self._lock:
            if self.counter.numbering == "passed":
                n = self._take_released(target_uid)
                if n is not None:
                    if on_taken is not None:
                        on_taken(n)
                    checkpoint("taken")
                    return n
            for _ in range(64):  # each round takes a number, or uses up a lease or leases one
                skipped: List[Tuple[int, str]] = []
                with _Tx(self._db, self.path) as db:
                    row = db.execute(
                        "SELECT id, first, step, used, count FROM leases WHERE counter = ? AND "
                        "holder = ? AND state = 'open' AND used < count ORDER BY id LIMIT 1",
                        (self.counter.name, self.holder),
                    ).fetchone()
                    if row is not None:
                        lease_id, first, step, used, count = row
                        # Skip numbers this database already holds: a one-off (flash --serial N,
                        # here or elsewhere on the line through the ledger) gave it, or the counter
                        # did (a ledger whose counter was reset or is new to this station): never
                        # twice. A counter's number skipped is recorded (table skipped) and logged.
                        while used < count:
                            why = _holds(db, self.counter.name, first + used * step)
                            if why is None:
                                break
                            if why != "one-off":
                                db.execute(
                                    "INSERT INTO skipped (counter, n, lease_id, holder, reason, skipped_at) "
                                    "VALUES (?, ?, ?, ?, ?, ?)",
                                    (self.counter.name, first + used * step, lease_id, self.holder, why, time.time()),
                                )
                                skipped.append((first + used * step, why))
                            used += 1
                        n = first + used * step
                        db.execute(
                            "UPDATE leases SET used = ?, state = ?, closed_at = ? WHERE id = ?",
                            (
                                min(used + 1, count),
                                "closed" if used + 1 >= count else "open",
                                time.time() if used + 1 >= count else None,
                                lease_id,
                            ),
                        )
                        if used + 1 >= count and not isinstance(self.source, LocalLeaseSource):
                            db.execute(
                                "INSERT OR REPLACE INTO source_pending (lease_id, action) VALUES (?, 'close')",
                                (lease_id,),
                            )
                        if used == count:  # the rest of the lease was all one-offs
                            row = None
                            continue
                        db.execute(
                            "INSERT INTO numbers (counter, n, lease_id, holder, state, target_uid, "
                            "taken_at) VALUES (?, ?, ?, ?, 'taken', ?, ?)",
                            (self.counter.name, n, lease_id, self.holder, target_uid, time.time()),
                        )
                for number, why in skipped:
                    LOG.warning(
                        "serial counter %s: number %d of the lease skipped: %s (never given twice)",
                        self.counter.name,
                        number,
                        why,
                    )
                if row is not None:
                    if used + 1 >= count:
                        self._sync_source()  # the used-up lease closed at the ledger too
                    else:
                        self._renew(lease_id)
                    if on_taken is not None:
                        on_taken(n)
                    checkpoint("taken")
                    return n
                if not isinstance(self.source, LocalLeaseSource):
                    join = getattr(self.source, "join", None)
                    if join is not None:  # the source's counter is raised above what this database holds
                        try:
                            held = held_numbers(self._db, self.counter.name)
                        except sqlite3.Error as exc:
                            raise SerialError(f"cannot read the serial database {self.path}: {exc}") from None
                        join(self.counter, self.holder, held)
                lease = self.source.lease(self.counter, self.holder, self.block)
                if not isinstance(self.source, LocalLeaseSource):
                    self._record_foreign(lease)
            raise SerialError("could not take a serial number from a fresh lease")  # pragma: no cover

    def _renew(self, lease_id: int) -> None:
        """Tell a source that renews leases (the ledger: they expire by time) that this holder
        still numbers boards from the local lease ``lease_id``. Call with the lock held."""
        renew = getattr(self.source, "renew", None)
        if renew is None or isinstance(self.source, LocalLeaseSource):
            return
        mapped = self._db.execute("SELECT source_id FROM lease_sources WHERE lease_id = ?", (lease_id,)).fetchone()
        if mapped is not None:
            renew(mapped[0])

    def _take_released(self, target_uid: Optional[str]) -> Optional[int]:
        """``numbering: passed``: the lowest number a failed board of this holder released, taken
        again (committed as ``taken``), or None. Call with the lock held."""
        with _Tx(self._db, self.path) as db:
            row = db.execute(
                "SELECT id, n, lease_id FROM released WHERE counter = ? AND holder = ? AND "
                "reused_at IS NULL ORDER BY n LIMIT 1",
                (self.counter.name, self.holder),
            ).fetchone()
            if row is None:
                return None
            rid, n, lease_id = row
            db.execute("UPDATE released SET reused_at = ? WHERE id = ?", (time.time(), rid))
            db.execute(
                "INSERT INTO numbers (counter, n, lease_id, holder, state, target_uid, taken_at) "
                "VALUES (?, ?, ?, ?, 'taken', ?, ?)",
                (self.counter.name, n, lease_id, self.holder, target_uid, time.time()),
            )
        self._renew(lease_id)
        return int(n)

    def finish(self, n: int, ok: bool, target_uid: Optional[str] = None) -> None:
        """Record the board's outcome for number ``n``: ``pass``, or ``fail`` (the number stays
        used); with ``numbering: passed`` a failed board's number is released for this holder's
        next board (see the module docstring).

        :raises SerialError: the database cannot be written.
        """
        if not ok and self.counter.numbering == "passed":
            with self._lock, _Tx(self._db, self.path) as db:
                row = db.execute(
                    "SELECT lease_id, target_uid FROM numbers WHERE counter = ? AND n = ? AND "
                    "holder = ? AND state = 'taken'",
                    (self.counter.name, n, self.holder),
                ).fetchone()
                if row is not None:
                    db.execute(
                        "INSERT INTO released (counter, n, lease_id, holder, target_uid, failed_at) "
                        "VALUES (?, ?, ?, ?, coalesce(?, ?), ?)",
                        (self.counter.name, n, row[0], self.holder, target_uid, row[1], time.time()),
                    )
                    db.execute("DELETE FROM numbers WHERE counter = ? AND n = ?", (self.counter.name, n))
            checkpoint("finished")
            return
        with self._lock, _Tx(self._db, self.path) as db:
            db.execute(
                "UPDATE numbers SET state = ?, done_at = ?, target_uid = coalesce(?, target_uid) "
                "WHERE counter = ? AND n = ?",
                ("pass" if ok else "fail", time.time(), target_uid, self.counter.name, n),
            )
        checkpoint("finished")

    def numbers(self) -> List[dict]:
        """Every number of this counter (all holders), in order, as dicts."""
        with self._lock:
            cur = self._db.execute(
                "SELECT n, state, holder, target_uid, lease_id, taken_at, done_at "
                "FROM numbers WHERE counter = ? ORDER BY n",
                (self.counter.name,),
            )
            names = [d[0] for d in cur.description]
            return [dict(zip(names, r)) for r in cur.fetchall()]


#: ``holder`` prefix of a one-off recorded here from a lease's ``skip`` (given elsewhere on the line).
FOREIGN = "ledger:"


def _holds(db: sqlite3.Connection, counter: str, n: int) -> Optional[str]:
    """Why number ``n`` of ``counter`` may not be taken from a lease: "one-off" (a one-off gave
    it), a sentence (the counter gave it before: in ``numbers`` or ``released``), or None."""
    if db.execute("SELECT 1 FROM one_offs WHERE counter = ? AND n = ? LIMIT 1", (counter, n)).fetchone():
        return "one-off"
    row = db.execute("SELECT state, holder FROM numbers WHERE counter = ? AND n = ?", (counter, n)).fetchone()
    if row is not None:
        return f"already in this serial database ({row[0]}, holder {row[1]})"
    row = db.execute("SELECT holder FROM released WHERE counter = ? AND n = ? LIMIT 1", (counter, n)).fetchone()
    if row is not None:
        return f"already in this serial database (released by a failed board, holder {row[0]})"
    return None


def held_numbers(db: sqlite3.Connection, counter: str) -> dict:
    """What a serial database holds of ``counter``, for a shared source joining it (the ledger,
    :meth:`piflash.production.leases.PostgresLeaseSource.join`).

    :returns: ``{"highest": int or None, "one_offs": [...]}``: ``highest`` the highest number the
        counter gave here (table ``numbers``, any state, and ``released``); ``one_offs`` this
        database's own one-offs (``flash --serial N``), dicts with ``n``, ``holder``, ``reissue``
        (bool), ``state``, ``target_uid``, ``taken_at`` (Unix time, s), oldest first.
    :raises sqlite3.Error: the database cannot be read.
    """
    tops = [  # each max() one step down an index: the (counter, n) primary key of numbers
        db.execute(f"SELECT max(n) FROM {table} WHERE counter = ?", (counter,)).fetchone()[0]
        for table in ("numbers", "released")
    ]
    known = [int(t) for t in tops if t is not None]
    cur = db.execute(
        "SELECT n, holder, reissue, state, target_uid, taken_at FROM one_offs WHERE counter = ? AND holder NOT LIKE ? "
        "ORDER BY id",
        (counter, FOREIGN + "%"),
    )
    names = [d[0] for d in cur.description]
    offs = [dict(zip(names, r)) for r in cur.fetchall()]
    for o in offs:
        o["reissue"] = bool(o["reissue"])
    return {"highest": max(known) if known else None, "one_offs": offs}


def held_in(path: Union[str, Path, None], counter: str) -> dict:
    """:func:`held_numbers` of the serial database at ``path`` (default :func:`default_path`);
    ``{"highest": None, "one_offs": []}`` when it does not exist (it is not created).

    :raises SerialError: the database exists but cannot be read."""
    path = Path(path) if path is not None else default_path()
    if path is None or not path.exists():
        return {"highest": None, "one_offs": []}
    db = _connect(path)
    try:
        return held_numbers(db, counter)
    except sqlite3.Error as exc:
        raise SerialError(f"cannot read the serial database {path}: {exc}") from None
    finally:
        db.close()


def _iso(ts: Optional[float]) -> Optional[str]:
    import datetime

    return None if ts is None else datetime.datetime.fromtimestamp(ts).astimezone().isoformat(timespec="seconds")


def find_issued(
    counter: str,
    n: int,
    profile: Optional[str],
    path: Union[str, Path, None] = None,
    history_path: Union[str, Path, None] = None,
) -> List[dict]:
    """Every place number ``n`` of ``counter`` was already issued to a board.

    Looks in the serial database (numbers the counter gave, any state: taken, pass, fail,
    interrupted; and one-offs recorded by :class:`OneOff`) and in the history (rows of
    ``profile`` whose ``serial`` is ``n``, any outcome: an earlier ``--serial N``). Neither is
    created when it does not exist yet.

    :param counter: the counter's name (the profile's ``serial: counter``, default its name).
    :param profile: the profile's name, to match history rows (None: the history is not read).
    :param path: the serial database; default :func:`default_path`.
    :param history_path: the history; default :func:`piflash.record.history.default_path`.
    :returns: dicts with ``source`` ("counter", "one-off" or "history"), ``state`` (pass, fail,
        interrupted, taken, open), ``target_uid`` (str or None), ``when`` (ISO 8601 with offset),
        ``holder`` (the station or "cli"), and for the history ``row`` (its id) and ``station``;
        oldest first within each source.
    :raises SerialError: the serial database exists but cannot be read.
    :raises HistoryError: the history exists but cannot be read.
    """
    from piflash.record.history import History, row_state
    from piflash.record.history import default_path as history_default

    found: List[dict] = []
    path = Path(path) if path is not None else default_path()
    if path is not None and path.exists():
        db = _connect(path)
        try:
            for _n, state, holder, uid, at in db.execute(
                "SELECT n, state, holder, target_uid, taken_at FROM numbers WHERE counter = ? AND n = ?", (counter, n)
            ):
                found.append(
                    {"source": "counter", "state": state, "holder": holder, "target_uid": uid, "when": _iso(at)}
                )
            for holder, uid, at in db.execute(
                "SELECT holder, target_uid, failed_at FROM released WHERE counter = ? AND n = ? ORDER BY id",
                (counter, n),
            ):
                found.append(
                    {"source": "counter", "state": "fail", "holder": holder, "target_uid": uid, "when": _iso(at)}
                )
            for state, holder, uid, at, reissue in db.execute(
                "SELECT state, holder, target_uid, taken_at, reissue FROM one_offs WHERE counter = ? "
                "AND n = ? ORDER BY id",
                (counter, n),
            ):
                found.append(
                    {
                        "source": "one-off",
                        "state": state,
                        "holder": holder,
                        "target_uid": uid,
                        "when": _iso(at),
                        "reissue": bool(reissue),
                    }
                )
        except sqlite3.Error as exc:
            raise SerialError(f"cannot read the serial database {path}: {exc}") from None
        finally:
            db.close()
    hist = Path(history_path) if history_path is not None else history_default()
    if profile is not None and hist is not None and hist.exists():
        with History(hist) as h:
            rows = [r for r in h.query(board=str(n)) if r["serial"] == str(n) and r["profile"] == profile]
        for r in rows:
            found.append(
                {
                    "source": "history",
                    "state": row_state(r),
                    "holder": r["station"] or "cli",
                    "target_uid": r["target_uid"],
                    "when": _iso(r["started_at"]),
                    "row": r["id"],
                    "station": r["station"],
                    "operation": r["operation"],
                }
            )
    return found


class OneOff:
    """A number given on the command line (``flash --serial N``), recorded in the serial database
    like the counter's: ``taken`` (committed) when the board is first reached, before it is
    programmed, then ``pass``/``fail``/``interrupted``; a re-issue (``--force-serial``) is recorded
    with ``reissue = 1``. A process killed in between leaves it ``taken``: still issued.

    :param counter: the counter's name. :param n: the number. :param reissue: a deliberate re-issue.
    :param path: the serial database; default :func:`default_path` (None with the history off:
        nothing is recorded).
    :raises SerialError: (from :meth:`take` / :meth:`finish`) the database cannot be written.
    """

    def __init__(
        self, counter: str, n: int, reissue: bool = False, holder: str = "cli", path: Union[str, Path, None] = None
    ) -> None:
        self.counter, self.n, self.reissue, self.holder = counter, n, reissue, holder
        self.path = Path(path) if path is not None else default_path()
        self.id: Optional[int] = None

    def take(self, target_uid: Optional[str]) -> None:
        """Record the number as taken for the board ``target_uid`` (once; later calls do nothing)."""
        if self.path is None or self.id is not None:
            return
        db = _connect(self.path)
        try:
            with _Tx(db, self.path):
                cur = db.execute(
                    "INSERT INTO one_offs (counter, n, holder, reissue, state, target_uid, taken_at) "
                    "VALUES (?, ?, ?, ?, 'taken', ?, ?)",
                    (self.counter, self.n, self.holder, int(self.reissue), target_uid, time.time()),
                )
                self.id = int(cur.lastrowid)
        finally:
            db.close()

    def finish(self, state: str, target_uid: Optional[str] = None) -> None:
        """Record the board's outcome: ``pass``, ``fail`` or ``interrupted``."""
        if self.path is None or self.id is None:
            return
        db = _connect(self.path)
        try:
            with _Tx(db, self.path):
                db.execute(
                    "UPDATE one_offs SET state = ?, done_at = ?, target_uid = coalesce(?, target_uid) WHERE id = ?",
                    (state, time.time(), target_uid, self.id),
                )
        finally:
            db.close()


__all__ = [
    "SerialAllocator",
    "find_issued",
    "held_numbers",
    "held_in",
    "OneOff",
    "LocalLeaseSource",
    "LeaseSource",
    "Lease",
    "default_path",
    "checkpoint",
    "DEFAULT_BLOCK",
    "NUMBER_STATES",
    "KILL_POINTS",
]
