"""The central ledger: many stations, one record, on PostgreSQL.

A station with ``ledger: postgresql://...`` (or ``PIFLASH_LEDGER``) keeps its own SQLite history
as before: it is the station's record *and* its queue. Every sealed row (a row gets its ``seq``
when it is completed, :mod:`piflash.record.chain`) is copied to the ledger by
:meth:`Ledger.upload`, in ``seq`` order, idempotently: the ledger's primary key is (``origin``,
the station whose history sealed the row, and the row's id), an insert of a row already there does nothing, so a row is in the ledger exactly once
however often an upload is retried. What is not uploaded yet is the queue: the station's rows
with a ``seq`` above the ledger's head for that station (:meth:`Ledger.head`). A station cut off
from the database keeps flashing and recording locally; the next upload after the database is
back sends the queue.

The ledger keeps one chain per station: the rows with their ``seq``, ``prev_hash`` and
``row_hash`` exactly as the station sealed them (same columns, same types: SQLite REAL as double
precision, which holds a Python float exactly), so :meth:`Ledger.verify_chains` checks each
station's chain with the very function that checks a local history.

Serial numbers: :class:`piflash.production.leases.PostgresLeaseSource` grants leases of a counter from the ledger (the
:class:`piflash.production.serials.LeaseSource` the serial allocator takes), in one transaction
with the counter row locked ``FOR UPDATE``, so stations sharing a counter never get the same
number; a clean stop gives the unused rest back (table ``ledger_returned``), granted first by
the next lease. The numbers themselves (taken, pass, fail) stay in each station's serial
database, and in the ledger's rows (``serial`` column).

psycopg 3 is imported only here, when a ledger is configured (the ``ledger`` extra: pure Python
``psycopg`` with Debian's libpq5; PyPI's ``psycopg-binary`` has no armv7l wheel).
"""

from __future__ import annotations

import time
from typing import Dict, List, Optional, Sequence

from piflash import settings
from piflash.errors import LedgerError, extra_missing
from piflash.record.chain import LATE_COLUMNS

__all__ = ["Ledger", "LedgerError", "Uploader", "ledger_url", "safe_url", "db_reason"]

#: SQLite column declarations (first word) -> PostgreSQL types.
_PG_TYPES = {"INTEGER": "bigint", "REAL": "double precision", "TEXT": "text"}
#: Seconds a connection attempt may take before the ledger counts as unreachable.
CONNECT_TIMEOUT = 5
#: libpq connection parameters ("Parameter Key Words" in PostgreSQL's libpq documentation) that
#: bound a call on a connection whose network went away without a word (a cable pulled: no FIN,
#: no RST): unacknowledged data fails after ``tcp_user_timeout`` ms, an idle link is probed by
#: TCP keepalives after 10 s, every 5 s, 3 times. Without them a lease asked for on such a link
#: would wait for the kernel's retransmission timeout (about 15 minutes on Linux).
TCP_LIMITS = {
    "keepalives": 1,
    "keepalives_idle": 10,
    "keepalives_interval": 5,
    "keepalives_count": 3,
    "tcp_user_timeout": 15000,
}


def ledger_url(given: Optional[str] = None) -> Optional[str]:
    """The ledger URL: ``given`` (``--ledger``, a station's ``ledger:``), else ``$PIFLASH_LEDGER``,
    else None (no ledger)."""
    return given or settings.PIFLASH_LEDGER.value()


def _psycopg():
    try:
        import psycopg
    except ImportError as exc:
        raise extra_missing("ledger", str(exc)) from None
    return psycopg


def _columns():
    from piflash.record.history import _COLUMNS

    return [(name, _PG_TYPES[decl.split()[0]]) for name, decl in _COLUMNS]


def _schema() -> List[str]:
    cols = ",\n  ".join(f"{name} {pgtype}" for name, pgtype in _columns())
    return [
        f"CREATE TABLE IF NOT EXISTS ledger_operations (\n  origin text NOT NULL,\n  id bigint NOT NULL,\n"
        f"  {cols},\n  uploaded_at double precision NOT NULL,\n  PRIMARY KEY (origin, id))",
        # a ledger made before a history column was added gets it (NULL in its rows)
        *(
            f"ALTER TABLE ledger_operations ADD COLUMN IF NOT EXISTS {n} {t}"
            for n, t in _columns()
            if n in LATE_COLUMNS
        ),
        "CREATE UNIQUE INDEX IF NOT EXISTS ledger_operations_seq ON ledger_operations (origin, seq)",
        "CREATE TABLE IF NOT EXISTS ledger_counters (name text PRIMARY KEY, start bigint NOT NULL, "
        "step bigint NOT NULL, last bigint, next bigint NOT NULL)",
        "CREATE TABLE IF NOT EXISTS ledger_leases (id bigserial PRIMARY KEY, counter text NOT NULL, "
        "holder text NOT NULL, first bigint NOT NULL, count bigint NOT NULL, step bigint NOT NULL, "
        "state text NOT NULL CHECK (state IN ('open', 'closed', 'lost', 'expired')), "
        "leased_at double precision NOT NULL, closed_at double precision, used bigint, "
        "ttl double precision, expires_at double precision)",
        "CREATE TABLE IF NOT EXISTS ledger_returned (counter text NOT NULL, first bigint NOT NULL, "
        "count bigint NOT NULL, step bigint NOT NULL, lease_id bigint NOT NULL, "
        "returned_at double precision NOT NULL, PRIMARY KEY (counter, first))",
    ]


class Ledger:
    """A connection to the central ledger.

    :param url: ``postgresql://USER[:PASSWORD]@HOST[:PORT]/DB`` (libpq's connection URI).
    :raises ExtraMissingError: (exit 17) psycopg is not installed.
    :raises LedgerError: the database cannot be reached (within :data:`CONNECT_TIMEOUT` s) or
        its tables cannot be made.
    """

    def __init__(self, url: str) -> None:
        self.url = url
        psycopg = _psycopg()
        self._errors = (psycopg.Error, OSError)
        try:
            self._db = psycopg.connect(url, connect_timeout=CONNECT_TIMEOUT, autocommit=True, **TCP_LIMITS)
            with self._db.transaction():
                # one creator at a time: CREATE TABLE IF NOT EXISTS races between stations
                self._db.execute("SELECT pg_advisory_xact_lock(7428251)")
                for statement in _schema():
                    self._db.execute(statement)
        except self._errors as exc:
            raise LedgerError(
                f"cannot use the ledger {safe_url(url)}: {db_reason(exc)}",
                hint="is PostgreSQL running and the URL right (user, host, port, database)? "
                "Boards are recorded locally meanwhile",
            ) from None

    def close(self) -> None:
        try:
            self._db.close()
        except self._errors:
            pass

    def __enter__(self) -> "Ledger":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _fail(self, what: str, exc: BaseException) -> LedgerError:
        return LedgerError(
            f"ledger {safe_url(self.url)}: cannot {what}: {db_reason(exc)}",
            hint="the rows stay queued in the station's history and go up at the next upload",
        )

    # -- rows ---------------------------------------------------------------------------------
    def head(self, station: str) -> int:
        """The highest ``seq`` of ``station`` in the ledger (0 for none).

        :raises LedgerError:"""
        try:
            row = self._db.execute(
                "SELECT coalesce(max(seq), 0) FROM ledger_operations WHERE origin = %s", (station,)
            ).fetchone()
        except self._errors as exc:
            raise self._fail("read", exc) from None
        return int(row[0])

    def upload(self, station: str, rows: Sequence[Dict[str, object]]) -> int:
        """Insert sealed rows (dicts of every history column, as :meth:`History.row` gives them)
        of ``station``, in one transaction; a row already there (same station and id) is left as
        it is. Returns how many were new.

        :raises LedgerError: (nothing is inserted)"""
        names = ["origin", "id"] + [n for n, _ in _columns()] + ["uploaded_at"]
        sql = (
            f"INSERT INTO ledger_operations ({', '.join(names)}) VALUES "
            f"({', '.join(['%s'] * len(names))}) ON CONFLICT (origin, id) DO NOTHING"
        )
        now = time.time()
        cols = [n for n, _ in _columns()]
        params = [
            [station, r["id"]] + [r.get(n) for n in cols] + [now] for r in rows if r.get("seq") is not None
        ]  # open rows are not in the chain yet
        if not params:
            return 0
        try:
            with self._db.transaction():
                with self._db.cursor() as cur:
                    # one pipeline (psycopg 3 executemany over libpq >= 14): a queue of hundreds
                    # of rows is a few round trips, not one per row
                    cur.executemany(sql, params)
                    new = cur.rowcount
        except self._errors as exc:
            raise self._fail("upload rows", exc) from None
        return max(new, 0)

    def rows(self, station: Optional[str] = None) -> List[Dict[str, object]]:
        """The ledger's rows (of one station's history, or all), ordered by ``origin`` and ``seq``:
        dicts with ``origin`` (the station whose history sealed the row) and every history column
        (``station`` among them: empty for a command-line row of that history).

        :raises LedgerError:"""
        names = ["origin", "id"] + [n for n, _ in _columns()]
        where, args = ("WHERE origin = %s", (station,)) if station else ("", ())
        try:
            got = self._db.execute(
                f"SELECT {', '.join(names)} FROM ledger_operations {where} ORDER BY origin, seq", args
            ).fetchall()
        except self._errors as exc:
            raise self._fail("read", exc) from None
        return [dict(zip(names, r)) for r in got]

    def stations(self) -> List[str]:
        """Every station with rows in the ledger, sorted. :raises LedgerError:"""
        try:
            return [
                r[0]
                for r in self._db.execute("SELECT DISTINCT origin FROM ledger_operations ORDER BY origin").fetchall()
            ]
        except self._errors as exc:
            raise self._fail("read", exc) from None

    def verify_chains(self) -> Dict[str, object]:
        """Each station's chain as :func:`piflash.record.chain.verify_chain` checks a local history
        (``seq`` from 1, each row's hash, each link), ids of rows not uploaded yet not counted as
        deleted. Returns {station: ChainReport}. :raises LedgerError:"""
        from piflash.record.chain import verify_chain

        out: Dict[str, object] = {}
        rows = self.rows()
        for station in sorted({r["origin"] for r in rows}):
            mine = [{k: v for k, v in r.items() if k != "origin"} for r in rows if r["origin"] == station]
            out[station] = verify_chain(mine, 0, check_ids=False)
        return out

    def expire_leases(self) -> int:
        """Mark the open leases whose time ran out (``expires_at``: their holder neither renewed
        nor closed them within their ``ttl``: crashed, switched off, or cut off) ``expired``, with
        ``used`` counted from the ledger's rows (the distinct numbers of the lease that its
        station's uploaded rows carry; a board still queued at the station is not counted yet).
        Their numbers are never granted again; a holder that comes back renews its lease (open
        again) or closes it. Returns how many expired now. :raises LedgerError:"""
        used = (
            "(SELECT count(DISTINCT o.serial) FROM ledger_operations o WHERE o.origin = "
            "split_part(l.holder, '/', 1) AND o.serial ~ '^[0-9]+$' AND o.serial::numeric BETWEEN "
            "l.first AND l.first + (l.count - 1) * l.step AND mod(o.serial::numeric - l.first, l.step) = 0)"
        )
        try:
            cur = self._db.execute(
                f"UPDATE ledger_leases l SET state = 'expired', closed_at = %s, used = {used} "
                "WHERE state = 'open' AND expires_at < %s",
                (time.time(), time.time()),
            )
        except self._errors as exc:
            raise self._fail("expire leases", exc) from None
        return cur.rowcount

    def leases(self) -> Dict[str, int]:
        """The serial leases by state: ``open`` (held by a running station), ``closed`` (used up or
        given back), ``lost`` (their station crashed and said so when it started again),
        ``expired`` (not heard of within their time, :meth:`expire_leases`), and
        ``lost_numbers`` / ``expired_numbers``, the numbers of those leases never issued.
        :raises LedgerError:"""
        try:
            got = self._db.execute(
                "SELECT state, count(*), coalesce(sum(count - coalesce(used, count)), 0) "
                "FROM ledger_leases GROUP BY state"
            ).fetchall()
        except self._errors as exc:
            raise self._fail("read", exc) from None
        out = {"open": 0, "closed": 0, "lost": 0, "expired": 0, "lost_numbers": 0, "expired_numbers": 0}
        for state, n, unused in got:
            out[state] = int(n)
            if state in ("lost", "expired"):
                out[f"{state}_numbers"] = int(unused)
        return out

    # -- for the serial leases (piflash.production.leases) ----------------------------------
    @property
    def connection(self):
        """The psycopg connection (autocommit; use ``with ledger.connection.transaction():``)."""
        return self._db

    @property
    def errors(self) -> tuple:
        """The exception classes a database call may raise (psycopg's and the OS's)."""
        return self._errors


class Uploader:
    """Copies a station's sealed history rows to the ledger, in the background: after each board
    (:meth:`kick`) and every ``interval`` seconds, until :meth:`stop`. A ledger it cannot reach is
    said once in the log ("N rows queued"), then tried again every ``interval``; the rows wait in
    the history, which is the queue.

    :param history: the station's :class:`piflash.record.history.History`, shared (thread-safe).
    :param station: the station's name (the ledger's key for its rows).
    :param url: the ledger's URL.
    :param log: ``log(text)`` for what the operator should know.
    :param interval: seconds between two tries when nothing kicks.
    :raises ExtraMissingError: (exit 17) psycopg is not installed.
    """

    def __init__(self, history, station: str, url: str, log, interval: float = 5.0) -> None:
        import threading

        # psycopg is imported here, in the caller's thread, not first in the upload thread: a
        # worker process forked (workers: processes) while that thread is inside the import would
        # wait forever for the module's import lock, which no thread of the child holds.
        _psycopg()
        self.history, self.station, self.url, self.log, self.interval = history, station, url, log, interval
        self._kick = threading.Event()
        self._stop = threading.Event()
        self._ledger: Optional[Ledger] = None
        self._down = False
        self.uploaded = 0
        #: The ledger's head for this station as last seen (None before the first answer).
        self.head: Optional[int] = None
        self._thread = threading.Thread(target=self._run, name="ledger upload", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def kick(self) -> None:
        """A row was sealed: upload soon."""
        self._kick.set()

    def stop(self, final: bool = True) -> None:
        """End the thread; with ``final``, one last upload first (bounded by the connect timeout)."""
        self._stop.set()
        self._kick.set()
        self._thread.join(CONNECT_TIMEOUT * 3)
        if final:
            self.upload_once()
        if self._ledger is not None:
            self._ledger.close()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.upload_once()
            self._kick.wait(self.interval)
            self._kick.clear()

    def queued(self) -> Optional[int]:
        """Rows not in the ledger yet, from the head last seen (no database call: a metrics write
        never waits for the network); None before the ledger first answered."""
        if self.head is None:
            return None
        try:
            return max(0, self.history.head_seq() - self.head)
        except Exception:  # noqa: BLE001 - a metric, never an error
            return None

    def _get(self) -> Ledger:
        if self._ledger is None:
            self._ledger = Ledger(self.url)
        return self._ledger

    def upload_once(self) -> int:
        """Upload what the ledger has not got; returns how many rows were new (0 when it could
        not reach the ledger: said once per outage)."""
        from piflash.errors import HistoryError

        new = 0
        try:
            ledger = self._get()
            while True:
                self.head = ledger.head(self.station)
                rows = self.history.sealed_after(self.head)
                if not rows:
                    break
                new += ledger.upload(self.station, rows)
                # Committed: the ledger holds them now, whether or not the next head query gets
                # through (the queue metric reads self.head).
                self.head = int(rows[-1]["seq"])
            if self._down:
                self.log(f"ledger {safe_url(self.url)} reached again: the queued rows are uploaded")
            self._down = False
        except (LedgerError, HistoryError) as exc:
            if self._ledger is not None:
                self._ledger.close()
                self._ledger = None
            if not self._down:
                queued = self.history.head_seq() if isinstance(exc, LedgerError) else "?"
                self.log(
                    f"ledger not reached ({exc.message}); boards are recorded locally and "
                    f"queued (history head seq {queued})"
                )
            self._down = True
        self.uploaded += new
        return new


def safe_url(url: str) -> str:
    """The URL without its password, for messages."""
    import re

    return re.sub(r"(://[^:/@]+):[^@]*@", r"\1:***@", url)


def db_reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
