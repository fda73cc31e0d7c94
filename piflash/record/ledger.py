"""The central ledger: many stations, one record, on PostgreSQL.

A station with ``ledger: postgresql://...`` (or ``PIFLASH_LEDGER``) keeps its own SQLite history
as before: it is the station's record *and* its queue. Every sealed row (a row gets its ``seq``
when it is completed, :mod:`piflash.record.chain`) is copied to the ledger by
:meth:`Ledger.upload`, in ``seq`` order, idempotently: the ledger's primary key is (``origin``,
the station whose history sealed the row, the history's identity, :attr:`History.identity
<piflash.record.history.History.identity>`, and the row's id); an insert of a row already there
does nothing, and the upload then checks that the ledger holds the very row (same ``row_hash``),
so a row is in the ledger exactly once however often an upload is retried, and a row is never
taken for uploaded unless it is there. What is not uploaded yet is the queue: the station's rows
with a ``seq`` above the ledger's head for that station's history (:meth:`Ledger.head`).

A station's name belongs to one machine and history (table ``ledger_stations``): the first
upload registers it (:meth:`Ledger.claim`) with the host's name and the history's identity; a
second claimant of the name is refused (:class:`~piflash.errors.LedgerConflictError`), until
``piflash ledger takeover NAME`` re-registers it, recorded in ``ledger_takeovers``. A one-off
command (``flash --ledger``) uploads only the rows of commands run with a ledger
(:meth:`History.ask_ledger <piflash.record.history.History.ask_ledger>`), under an origin of its
own (:func:`one_off_origin`).

Text is text on any server: the connection's client encoding is UTF8 (libpq's
``client_encoding``), which a UTF8 or SQL_ASCII database stores byte for byte; a database in any
other encoding is refused when first reached, naming the fix (:data:`ENCODINGS_KEPT`). A station cut off
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
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from piflash import redact, settings
from piflash.errors import BundleError, LedgerConflictError, LedgerError, extra_missing
from piflash.record.chain import LATE_COLUMNS

__all__ = [
    "Ledger",
    "LedgerError",
    "LedgerConflictError",
    "Uploader",
    "ledger_url",
    "one_off_origin",
    "one_off_upload",
    "safe_url",
    "db_reason",
]

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


#: Server encodings (``SHOW server_encoding``) that keep every row's text exactly when the client
#: encoding is UTF8: UTF8, and SQL_ASCII, which stores the bytes it is given unconverted and
#: unchecked (PostgreSQL's documentation, "Character Set Support": "No encoding conversion will
#: be done when the setting is SQL_ASCII"). Any other server encoding converts, and refuses a
#: character it lacks (an upload that would fail for ever): refused at first contact.
ENCODINGS_KEPT = ("UTF8", "SQL_ASCII")
#: ``history_id`` of the rows a ledger held before stations registered (schema migration): they
#: go to the first station that claims their name with a history whose row at their head seq has
#: the same ``row_hash`` (so every row before it, by the chain).
UNREGISTERED = "unregistered"
#: ``pg_advisory_xact_lock`` keys: the schema's creation, and (with ``hashtext(name)``) one
#: station name's registration. Arbitrary constants, piflash's own.
_SCHEMA_LOCK = 7428251
_NAME_LOCK = 7428252
_LINE_LOCK = 7428253  # with hashtext(line): one publisher of a line's jobs at a time
#: Seconds a board's turn under a job bundle's count limit (:meth:`Ledger.take_turn`) holds its
#: place when its station never settles it (crashed, cut off): then it expires and frees the place.
#: piflash's own choice: far above a board's flash (seconds; a 16 MiB image at pyOCD's slowest
#: SWD clock is a few minutes), so a live board's turn never expires under it.
TURN_TTL = 900.0
#: What a registration is: a station's history (uploaded whole, in ``seq`` order), or one-off
#: commands' (only the rows run with a ledger: its chain has gaps by design).
KINDS = ("station", "one-off")


def one_off_origin(host: str, history_id: str) -> str:
    """The origin of one-off commands' rows when ``PIFLASH_STATION`` does not name one:
    ``one-off:HOST:ID8`` (``ID8``: the first 8 characters of the history's identity), which no
    station's default name (the host's) is, so a personal history never lands on a station's name."""
    return f"one-off:{host}:{history_id[:8]}"


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
        f"CREATE TABLE IF NOT EXISTS ledger_operations (\n  origin text NOT NULL,\n  history_id text NOT NULL,\n"
        f"  id bigint NOT NULL,\n  {cols},\n  uploaded_at double precision NOT NULL,\n"
        "  PRIMARY KEY (origin, history_id, id))",
        # a ledger made before a history column was added gets it (NULL in its rows)
        *(
            f"ALTER TABLE ledger_operations ADD COLUMN IF NOT EXISTS {n} {t}"
            for n, t in _columns()
            if n in LATE_COLUMNS
        ),
        "CREATE UNIQUE INDEX IF NOT EXISTS ledger_operations_chain ON ledger_operations (origin, history_id, seq)",
        "CREATE TABLE IF NOT EXISTS ledger_stations (name text PRIMARY KEY, kind text NOT NULL "
        "CHECK (kind IN ('station', 'one-off')), host text NOT NULL, history_id text NOT NULL, "
        "registered_at double precision NOT NULL, registered_by text NOT NULL)",
        "CREATE TABLE IF NOT EXISTS ledger_takeovers (id bigserial PRIMARY KEY, name text NOT NULL, "
        "at double precision NOT NULL, by_user text NOT NULL, host text NOT NULL, history_id text NOT NULL, "
        "old_host text, old_history_id text)",
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
        # count limits of job bundles (max_boards): boards passed per line and bundle, and each
        # board's turn, taken before it is programmed and settled pass/fail after
        "CREATE TABLE IF NOT EXISTS ledger_bundle_counts (line text NOT NULL, bundle_sha256 text NOT NULL, "
        "bundle_version bigint NOT NULL, max_boards bigint NOT NULL, passed bigint NOT NULL DEFAULT 0, "
        "PRIMARY KEY (line, bundle_sha256))",
        "CREATE TABLE IF NOT EXISTS ledger_bundle_turns (id bigserial PRIMARY KEY, line text NOT NULL, "
        "bundle_sha256 text NOT NULL, holder text NOT NULL, target_uid text, state text NOT NULL "
        "CHECK (state IN ('open', 'pass', 'fail', 'expired')), taken_at double precision NOT NULL, "
        "expires_at double precision NOT NULL, settled_at double precision)",
        # jobs published to the line (piflash ledger publish): each verified bundle's bytes
        "CREATE TABLE IF NOT EXISTS ledger_bundles (line text NOT NULL, version bigint NOT NULL, "
        "bundle_sha256 text NOT NULL, signer text NOT NULL, data bytea NOT NULL, "
        "published_at double precision NOT NULL, published_by text NOT NULL, PRIMARY KEY (line, version))",
    ]


#: A ledger made before stations registered (rows keyed by origin and id) gets the history_id
#: column, its rows :data:`UNREGISTERED`, and the new keys.
_MIGRATE_TO_IDENTITY = [
    "ALTER TABLE ledger_operations ADD COLUMN history_id text",
    f"UPDATE ledger_operations SET history_id = '{UNREGISTERED}'",
    "ALTER TABLE ledger_operations ALTER COLUMN history_id SET NOT NULL",
    "ALTER TABLE ledger_operations DROP CONSTRAINT ledger_operations_pkey",
    "ALTER TABLE ledger_operations ADD PRIMARY KEY (origin, history_id, id)",
    "DROP INDEX IF EXISTS ledger_operations_seq",
]


def _who() -> str:
    """``user@host`` of this process, for the ledger's registrations."""
    import getpass
    import socket

    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "?"
    return f"{user}@{socket.gethostname()}"


def _when(t: float) -> str:
    from datetime import datetime

    return datetime.fromtimestamp(t).astimezone().isoformat(timespec="seconds")


class Ledger:
    """A connection to the central ledger.

    :param url: ``postgresql://USER[:PASSWORD]@HOST[:PORT]/DB`` (libpq's connection URI).
    :raises ExtraMissingError: (exit 17) psycopg is not installed.
    :raises LedgerError: the database cannot be reached (within :data:`CONNECT_TIMEOUT` s) or
        its tables cannot be made.
    """

    def __init__(self, url: str) -> None:
        self.url = url
        redact.remember(url)  # a database error may quote it: scrubbed from every message
        psycopg = _psycopg()
        # UnicodeError: text a client in another encoding put into a SQL_ASCII database
        self._errors = (psycopg.Error, OSError, UnicodeError)
        self._db: Any = None
        try:
            # client_encoding: text goes and comes as UTF8 whatever the server's encoding (psycopg
            # reads a SQL_ASCII connection's text as bytes and sends str as bytea otherwise)
            self._db = psycopg.connect(
                url, connect_timeout=CONNECT_TIMEOUT, autocommit=True, client_encoding="UTF8", **TCP_LIMITS
            )
            self._check_encoding()
            with self._db.transaction():
                # one creator at a time: CREATE TABLE IF NOT EXISTS races between stations
                self._db.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
                if self._needs_identity_migration():
                    for statement in _MIGRATE_TO_IDENTITY:
                        self._db.execute(statement)
                for statement in _schema():
                    self._db.execute(statement)
        except LedgerError:
            self.close()
            raise
        except self._errors as exc:
            self.close()
            reason = db_reason(exc)
            raise LedgerError(
                f"cannot use the ledger {safe_url(url)}: {reason}",
                hint=(
                    "give the password in a passfile, not the URL: PGPASSFILE=FILE (mode 0600, lines "
                    "HOST:PORT:DATABASE:USER:PASSWORD; docs/ledger.md)"
                    if "password" in reason
                    else "is PostgreSQL running and the URL right (user, host, port, database)? "
                    "Boards are recorded locally meanwhile"
                ),
            ) from None

    def _check_encoding(self) -> None:
        """Refuse a database whose encoding cannot keep every text exactly (:data:`ENCODINGS_KEPT`)."""
        assert self._db is not None
        server = str(self._db.execute("SHOW server_encoding").fetchone()[0])
        client = str(self._db.execute("SHOW client_encoding").fetchone()[0])
        if server.upper() not in ENCODINGS_KEPT or client.upper() != "UTF8":
            name = self._db.info.dbname
            raise LedgerError(
                f"the ledger database {name!r} at {safe_url(self.url)} has the encoding {server} (client {client}), "
                f"which cannot hold every text piflash records (firmware paths, error messages) exactly",
                hint=f"give the ledger a UTF8 database: createdb -E UTF8 -T template0 {name}_utf8 (as a "
                "PostgreSQL user that may create databases), then use its URL; boards are recorded locally meanwhile",
            )

    def _needs_identity_migration(self) -> bool:
        assert self._db is not None
        got = self._db.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() "
            "AND table_name = 'ledger_operations'"
        ).fetchall()
        names = {r[0] for r in got}
        return bool(names) and "history_id" not in names

    def close(self) -> None:
        try:
            if self._db is not None:
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

    # -- who a station is ------------------------------------------------------------------------
    def registration(self, name: str) -> Optional[Dict[str, object]]:
        """Who holds the name ``name``: {``name``, ``kind`` (:data:`KINDS`), ``host``,
        ``history_id``, ``registered_at`` (Unix s), ``registered_by`` (``user@host``)}, or None.

        :raises LedgerError:"""
        try:
            row = self._db.execute(
                "SELECT name, kind, host, history_id, registered_at, registered_by FROM ledger_stations "
                "WHERE name = %s",
                (name,),
            ).fetchone()
        except self._errors as exc:
            raise self._fail("read", exc) from None
        keys = ("name", "kind", "host", "history_id", "registered_at", "registered_by")
        return dict(zip(keys, row)) if row else None

    def claim(
        self,
        name: str,
        host: str,
        history_id: str,
        kind: str = "station",
        row_hash_at: Optional[Callable[[int], Optional[str]]] = None,
    ) -> None:
        """Register ``name`` to this machine (``host``) and history (``history_id``) at its first
        upload, or prove it is registered so; rows a ledger held from before registrations
        (:data:`UNREGISTERED`) go with the name when this history has the same row at their head
        (``row_hash_at(seq)``: this history's ``row_hash`` at ``seq``, or None).

        :param kind: one of :data:`KINDS`.
        :raises LedgerConflictError: the name is another machine's or history's, or its old rows
            are not this history's; the message names both, the hint the fixes.
        :raises LedgerError: the database failed."""
        try:
            with self._db.transaction():
                self._db.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (_NAME_LOCK, name))
                held = self.registration(name)
                if held is None:
                    self._adopt(name, history_id, row_hash_at)
                    self._db.execute(
                        "INSERT INTO ledger_stations (name, kind, host, history_id, registered_at, registered_by) "
                        "VALUES (%s, %s, %s, %s, %s, %s)",
                        (name, kind, host, history_id, time.time(), _who()),
                    )
                elif (held["host"], held["history_id"]) != (host, history_id):
                    raise LedgerConflictError(
                        f"the ledger's station name {name!r} is registered to {held['host']} (history "
                        f"{str(held['history_id'])[:8]}, since {_when(float(held['registered_at']))}); "  # type: ignore[arg-type]
                        f"this is {host} (history {history_id[:8]}): its rows are not uploaded under that name",
                        hint=f"a second station: give it a name of its own ('station:' in its config, or "
                        f"PIFLASH_STATION); the replacement of a station that is gone: run 'piflash ledger "
                        f"takeover {name}' on it. The rows stay queued in this history meanwhile",
                    )
        except self._errors as exc:
            raise self._fail("register the station", exc) from None

    def _adopt(self, name: str, history_id: str, row_hash_at) -> None:
        """Give the rows of ``name`` from before registrations to ``history_id`` if they are its
        (in the caller's transaction). :raises LedgerConflictError: they are not."""
        old = self._db.execute(
            "SELECT seq, row_hash, id FROM ledger_operations WHERE origin = %s AND history_id = %s "
            "ORDER BY seq DESC LIMIT 1",
            (name, UNREGISTERED),
        ).fetchone()
        if old is None:
            return
        mine = row_hash_at(int(old[0])) if row_hash_at else None
        if mine != old[1]:
            raise LedgerConflictError(
                f"station {name}: the ledger holds rows of that name from before stations registered, up to "
                f"row #{old[2]} (seq {old[0]}), and this history's row at seq {old[0]} "
                f"{'is another' if mine else 'does not exist'}: they are another history's",
                hint=f"a second station: give it a name of its own; the replacement of the station that "
                f"uploaded them: run 'piflash ledger takeover {name}' on it",
            )
        self._db.execute(
            "UPDATE ledger_operations SET history_id = %s WHERE origin = %s AND history_id = %s",
            (history_id, name, UNREGISTERED),
        )

    def takeover(self, name: str, host: str, history_id: str, kind: str = "station") -> Optional[Dict[str, object]]:
        """Re-register ``name`` to this machine and history, on purpose (the replacement of a
        station that is gone), recorded in ``ledger_takeovers`` (who, when, the old host and
        history). The old history's rows stay in the ledger under the name; this history's go up
        beside them. Returns the old registration (None when the name was free; rows from before
        registrations count as the history :data:`UNREGISTERED`).

        :raises LedgerError: the database failed."""
        try:
            with self._db.transaction():
                self._db.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (_NAME_LOCK, name))
                old = self.registration(name)
                if old is None:
                    legacy = self._db.execute(
                        "SELECT 1 FROM ledger_operations WHERE origin = %s AND history_id = %s LIMIT 1",
                        (name, UNREGISTERED),
                    ).fetchone()
                    if legacy:
                        old = {"name": name, "host": None, "history_id": UNREGISTERED}
                now = time.time()
                self._db.execute(
                    "INSERT INTO ledger_stations (name, kind, host, history_id, registered_at, registered_by) "
                    "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (name) DO UPDATE SET kind = excluded.kind, "
                    "host = excluded.host, history_id = excluded.history_id, "
                    "registered_at = excluded.registered_at, registered_by = excluded.registered_by",
                    (name, kind, host, history_id, now, _who()),
                )
                self._db.execute(
                    "INSERT INTO ledger_takeovers (name, at, by_user, host, history_id, old_host, old_history_id) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s)",
                    (name, now, _who(), host, history_id, old and old["host"], old and old["history_id"]),
                )
        except self._errors as exc:
            raise self._fail("take the station over", exc) from None
        return old

    def takeovers(self) -> List[Dict[str, object]]:
        """Every takeover, oldest first: {``name``, ``at`` (Unix s), ``by_user``, ``host``,
        ``history_id``, ``old_host``, ``old_history_id``}. :raises LedgerError:"""
        keys = ("name", "at", "by_user", "host", "history_id", "old_host", "old_history_id")
        try:
            got = self._db.execute(f"SELECT {', '.join(keys)} FROM ledger_takeovers ORDER BY id").fetchall()
        except self._errors as exc:
            raise self._fail("read", exc) from None
        return [dict(zip(keys, r)) for r in got]

    # -- rows ---------------------------------------------------------------------------------
    def head_row(self, station: str, history_id: str) -> Tuple[int, Optional[str]]:
        """The highest ``seq`` of ``station``'s history ``history_id`` in the ledger and its
        ``row_hash`` ((0, None) for none).

        :raises LedgerError:"""
        try:
            row = self._db.execute(
                "SELECT seq, row_hash FROM ledger_operations WHERE origin = %s AND history_id = %s "
                "ORDER BY seq DESC LIMIT 1",
                (station, history_id),
            ).fetchone()
        except self._errors as exc:
            raise self._fail("read", exc) from None
        return (int(row[0]), str(row[1])) if row else (0, None)

    def head(self, station: str, history_id: str) -> int:
        """The highest ``seq`` of ``station``'s history ``history_id`` in the ledger (0 for none).

        :raises LedgerError:"""
        return self.head_row(station, history_id)[0]

    def upload(self, station: str, history_id: str, rows: Sequence[Dict[str, object]]) -> int:
        """Insert sealed rows (dicts of every history column, as :meth:`History.row` gives them)
        of ``station``'s history ``history_id``, in one transaction; a row already there (same
        key) is left as it is, after checking it is the same row. Returns how many were new.

        :raises LedgerConflictError: a row of the same id or ``seq`` with another ``row_hash`` is
            there already, named with its station (nothing is inserted).
        :raises LedgerError: (nothing is inserted)"""
        names = ["origin", "history_id", "id"] + [n for n, _ in _columns()] + ["uploaded_at"]
        sql = (
            f"INSERT INTO ledger_operations ({', '.join(names)}) VALUES "
            f"({', '.join(['%s'] * len(names))}) ON CONFLICT DO NOTHING"
        )
        now = time.time()
        cols = [n for n, _ in _columns()]
        sealed = [r for r in rows if r.get("seq") is not None]  # open rows are not in the chain yet
        params = [[station, history_id, r["id"]] + [r.get(n) for n in cols] + [now] for r in sealed]
        if not params:
            return 0
        try:
            with self._db.transaction():
                with self._db.cursor() as cur:
                    # one pipeline (psycopg 3 executemany over libpq >= 14): a queue of hundreds
                    # of rows is a few round trips, not one per row
                    cur.executemany(sql, params)
                    new = cur.rowcount
                    self._same_rows(cur, station, history_id, sealed)
        except self._errors as exc:
            raise self._fail("upload rows", exc) from None
        return max(new, 0)

    def _same_rows(self, cur, station: str, history_id: str, rows: Sequence[Dict[str, object]]) -> None:
        """Prove the ledger holds exactly ``rows`` under their keys (in the upload's transaction).

        :raises LedgerConflictError: a row of the same id or seq differs."""
        cur.execute(
            "SELECT id, seq, row_hash FROM ledger_operations WHERE origin = %s AND history_id = %s "
            "AND (id = ANY(%s) OR seq = ANY(%s))",
            (station, history_id, [int(r["id"]) for r in rows], [int(r["seq"]) for r in rows]),  # type: ignore[call-overload]
        )
        there = cur.fetchall()
        by_id = {int(i): (int(q), h) for i, q, h in there}
        by_seq = {int(q): (int(i), h) for i, q, h in there}
        for r in rows:
            rid, seq, mine = int(r["id"]), int(r["seq"]), r["row_hash"]  # type: ignore[call-overload]
            at_id, at_seq = by_id.get(rid), by_seq.get(seq)
            if at_id == (seq, mine) and at_seq == (rid, mine):
                continue
            if at_id is not None and at_id != (seq, mine):
                what = f"the ledger's row #{rid} is seq {at_id[0]} with row_hash {str(at_id[1])[:12]}"
            elif at_seq is not None:
                what = f"the ledger's seq {seq} is row #{at_seq[0]} with row_hash {str(at_seq[1])[:12]}"
            else:
                what = "the row is not there after its insert"
            raise LedgerConflictError(
                f"station {station}: row #{rid} (seq {seq}, row_hash {str(mine)[:12]}) of history "
                f"{history_id[:8]} conflicts with the ledger: {what}; not uploaded",
                hint="two copies of one history upload under one name (a cloned SD card?), or the ledger's row "
                "was changed: compare with 'piflash ledger verify-chain' and that station's 'piflash history "
                "verify-chain'; give a copied history's station its own name and history",
            )

    def rows(self, station: Optional[str] = None) -> List[Dict[str, object]]:
        """The ledger's rows (of one station's name, or all), ordered by ``origin``, ``history_id``
        and ``seq``: dicts with ``origin`` (the station whose history sealed the row),
        ``history_id`` (that history's identity) and every history column (``station`` among
        them: empty for a command-line row of that history).

        :raises LedgerError:"""
        names = ["origin", "history_id", "id"] + [n for n, _ in _columns()]
        where, args = ("WHERE origin = %s", (station,)) if station else ("", ())
        try:
            got = self._db.execute(
                f"SELECT {', '.join(names)} FROM ledger_operations {where} ORDER BY origin, history_id, seq", args
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

    def histories(self) -> List[Dict[str, object]]:
        """Per station name and history: {``origin``, ``history_id``, ``rows``, ``head_seq``,
        ``holder`` (True for the history the name is registered to now), ``kind`` (the name's
        :data:`KINDS`, None unregistered)}, by name. :raises LedgerError:"""
        try:
            got = self._db.execute(
                "SELECT o.origin, o.history_id, count(*), max(o.seq), s.history_id, s.kind FROM ledger_operations o "
                "LEFT JOIN ledger_stations s ON s.name = o.origin GROUP BY o.origin, o.history_id, s.history_id, "
                "s.kind ORDER BY o.origin, min(o.uploaded_at)"
            ).fetchall()
        except self._errors as exc:
            raise self._fail("read", exc) from None
        return [
            {"origin": o, "history_id": h, "rows": int(n), "head_seq": int(q), "holder": h == held, "kind": kind}
            for o, h, n, q, held, kind in got
        ]

    def verify_chains(self) -> Dict[str, object]:
        """Each station history's chain as :func:`piflash.record.chain.verify_chain` checks a local
        history (``seq`` from 1, each row's hash, each link), ids of rows not uploaded yet not
        counted as deleted. A one-off origin's rows are the ones its commands chose, with gaps by
        design: each row's hash, and the link of each two with consecutive ``seq``. Returns
        {label: ChainReport}, the label the station's name, with ``(history ID8)`` after it where
        a name has rows of several histories (a takeover). :raises LedgerError:"""
        from piflash.record.chain import ChainProblem, ChainReport, row_hash, verify_chain

        try:
            kinds = dict(self._db.execute("SELECT name, kind FROM ledger_stations").fetchall())
        except self._errors as exc:
            raise self._fail("read", exc) from None
        out: Dict[str, object] = {}
        groups: Dict[Tuple[str, str], List[Dict[str, Any]]] = {}
        for r in self.rows():
            groups.setdefault((str(r["origin"]), str(r["history_id"])), []).append(
                {k: v for k, v in r.items() if k not in ("origin", "history_id")}
            )
        several = {o for o, _ in groups if sum(1 for g in groups if g[0] == o) > 1}
        for (origin, hid), mine in sorted(groups.items()):
            label = f"{origin} (history {hid[:8]})" if origin in several else origin
            if kinds.get(origin) != "one-off":
                out[label] = verify_chain(mine, 0, check_ids=False)
                continue
            report = ChainReport()
            prev: Optional[Dict[str, Any]] = None
            for row in mine:  # by seq
                rid = int(row["id"])
                if row_hash(row) != row["row_hash"]:
                    report.problems.append(
                        ChainProblem(rid, "edited", f"row #{rid} (seq {row['seq']}) no longer matches its row_hash")
                    )
                elif prev is not None and row["seq"] == prev["seq"] + 1 and row["prev_hash"] != prev["row_hash"]:
                    report.problems.append(
                        ChainProblem(
                            int(prev["id"]),
                            "edited",
                            f"row #{rid} (seq {row['seq']}) does not link to seq {prev['seq']}",
                        )
                    )
                prev = row
            report.sealed = len(mine)
            if prev is not None:
                report.head_seq, report.head_hash = int(prev["seq"]), str(prev["row_hash"])
            out[label] = report
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

    # -- count limits of job bundles (piflash.bundle.counts) ---------------------------------
    def take_turn(
        self,
        line: str,
        bundle_sha256: str,
        bundle_version: int,
        max_boards: int,
        holder: str,
        target_uid: Optional[str],
        ttl: float = TURN_TTL,
    ) -> int:
        """Give one board its turn under the count limit of the bundle ``bundle_sha256`` of
        ``line``: at most ``max_boards`` boards pass across the line. In one transaction with the
        bundle's count row locked ``FOR UPDATE`` (so two stations cannot both take the last
        place): open turns past their ``expires_at`` expire, and a turn is granted while the passed
        boards plus the open turns are fewer than ``max_boards``.

        :param holder: who takes it (the station's name, or ``one-off:HOST``), for the record.
        :param target_uid: the board's unique ID, for the record.
        :param ttl: seconds the turn holds its place unsettled (:data:`TURN_TTL`).
        :returns: the turn's id, for :meth:`settle_turn`.
        :raises BundleError: (exit 28) the limit is reached, naming the count.
        :raises LedgerError: the database failed (no turn is taken)."""
        now = time.time()
        try:
            with self._db.transaction():
                self._db.execute(
                    "INSERT INTO ledger_bundle_counts (line, bundle_sha256, bundle_version, max_boards) "
                    "VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING",
                    (line, bundle_sha256, bundle_version, max_boards),
                )
                passed = self._db.execute(
                    "SELECT passed FROM ledger_bundle_counts WHERE line = %s AND bundle_sha256 = %s FOR UPDATE",
                    (line, bundle_sha256),
                ).fetchone()[0]
                self._db.execute(
                    "UPDATE ledger_bundle_turns SET state = 'expired' WHERE line = %s AND bundle_sha256 = %s "
                    "AND state = 'open' AND expires_at < %s",
                    (line, bundle_sha256, now),
                )
                taken = self._db.execute(
                    "SELECT count(*) FROM ledger_bundle_turns WHERE line = %s AND bundle_sha256 = %s "
                    "AND state = 'open'",
                    (line, bundle_sha256),
                ).fetchone()[0]
                if passed + taken >= max_boards:
                    raise BundleError(
                        f"bundle {bundle_sha256[:12]} (line {line}, version {bundle_version}) allows at most "
                        f"{max_boards} boards across the line: {passed} passed"
                        + (f" and {taken} being flashed" if taken else "")
                        + ": refused, nothing written to this board",
                        hint="publish a new bundle version for more boards (piflash bundle create --max-boards N)",
                    )
                row = self._db.execute(
                    "INSERT INTO ledger_bundle_turns (line, bundle_sha256, holder, target_uid, state, taken_at, "
                    "expires_at) VALUES (%s, %s, %s, %s, 'open', %s, %s) RETURNING id",
                    (line, bundle_sha256, holder, target_uid, now, now + ttl),
                ).fetchone()
        except self._errors as exc:
            raise self._fail("take a board's turn under the bundle's count limit", exc) from None
        return int(row[0])

    def settle_turn(self, turn: int, passed: bool) -> None:
        """Settle the turn ``turn`` (:meth:`take_turn`): a passed board adds one to its bundle's
        count, a failed one frees its place; in one transaction. A turn that expired meanwhile
        still counts its passed board (it was flashed). Settling twice changes nothing.

        :raises LedgerError: the database failed (the turn stays open until it expires)."""
        try:
            with self._db.transaction():
                row = self._db.execute(
                    "SELECT line, bundle_sha256, state FROM ledger_bundle_turns WHERE id = %s FOR UPDATE", (turn,)
                ).fetchone()
                if row is None or row[2] not in ("open", "expired"):
                    return
                self._db.execute(
                    "UPDATE ledger_bundle_turns SET state = %s, settled_at = %s WHERE id = %s",
                    ("pass" if passed else "fail", time.time(), turn),
                )
                if passed:
                    self._db.execute(
                        "UPDATE ledger_bundle_counts SET passed = passed + 1 WHERE line = %s AND bundle_sha256 = %s",
                        (row[0], row[1]),
                    )
        except self._errors as exc:
            raise self._fail("settle a board's turn under the bundle's count limit", exc) from None

    def bundle_count(self, line: str, bundle_sha256: str) -> Tuple[int, int]:
        """(boards passed, turns open and unexpired) under the count limit of bundle
        ``bundle_sha256`` of ``line``; (0, 0) for a bundle no board took a turn of.

        :raises LedgerError:"""
        try:
            got = self._db.execute(
                "SELECT (SELECT passed FROM ledger_bundle_counts WHERE line = %s AND bundle_sha256 = %s), "
                "(SELECT count(*) FROM ledger_bundle_turns WHERE line = %s AND bundle_sha256 = %s "
                "AND state = 'open' AND expires_at >= %s)",
                (line, bundle_sha256, line, bundle_sha256, time.time()),
            ).fetchone()
        except self._errors as exc:
            raise self._fail("read", exc) from None
        return int(got[0] or 0), int(got[1] or 0)

    # -- jobs published to the line (piflash ledger publish, a station's job: ledger:LINE) ----
    def publish_bundle(self, line: str, version: int, bundle_sha256: str, signer: str, data: bytes) -> None:
        """Store the bundle ``data`` (the ``.pfb`` file's bytes, verified by the caller) as version
        ``version`` of ``line``'s job; one publisher of a line at a time (an advisory lock), so
        versions only go up.

        :raises BundleError: (exit 28) ``version`` is not newer than the line's newest, naming it.
        :raises LedgerError: the database failed (nothing is stored)."""
        try:
            with self._db.transaction():
                self._db.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (_LINE_LOCK, line))
                newest = self._db.execute(
                    "SELECT version, bundle_sha256 FROM ledger_bundles WHERE line = %s ORDER BY version DESC LIMIT 1",
                    (line,),
                ).fetchone()
                if newest is not None and int(newest[0]) >= version:
                    raise BundleError(
                        f"version {version} of line {line} is not newer than the line's newest in the ledger, "
                        f"version {newest[0]} (sha256 {str(newest[1])[:12]}): not published",
                        hint=f"build and sign a bundle with --version {int(newest[0]) + 1} or higher",
                    )
                self._db.execute(
                    "INSERT INTO ledger_bundles (line, version, bundle_sha256, signer, data, published_at, "
                    "published_by) VALUES (%s, %s, %s, %s, %s, %s, %s)",
                    (line, version, bundle_sha256, signer, data, time.time(), _who()),
                )
        except self._errors as exc:
            raise self._fail("publish the bundle", exc) from None

    def newest_bundle(self, line: str, data: bool = True) -> Optional[Dict[str, Any]]:
        """The newest job published for ``line``: {``line``, ``version``, ``bundle_sha256``,
        ``signer`` (as verified at publishing), ``published_at`` (Unix s), ``published_by``
        (``user@host``), ``data`` (the ``.pfb`` bytes; None unless ``data``)}, or None. Without
        ``data`` it is one small indexed query, what a station asks between boards.

        :raises LedgerError:"""
        cols = "line, version, bundle_sha256, signer, published_at, published_by, " + ("data" if data else "NULL")
        try:
            row = self._db.execute(
                f"SELECT {cols} FROM ledger_bundles WHERE line = %s ORDER BY version DESC LIMIT 1", (line,)
            ).fetchone()
        except self._errors as exc:
            raise self._fail("read", exc) from None
        if row is None:
            return None
        keys = ("line", "version", "bundle_sha256", "signer", "published_at", "published_by", "data")
        out = dict(zip(keys, row))
        out["data"] = bytes(out["data"]) if out["data"] is not None else None
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


def one_off_upload(ledger: Ledger, history, all_history: bool = False) -> Tuple[str, int]:
    """Upload one-off commands' rows of ``history`` (a :class:`piflash.record.history.History`):
    those marked by :meth:`History.ask_ledger <piflash.record.history.History.ask_ledger>` (the
    commands run with a ledger), or with ``all_history`` every sealed row, under the origin
    ``PIFLASH_STATION`` or else :func:`one_off_origin`, registered as a ``one-off``
    (:meth:`Ledger.claim`). A row goes off the list once the ledger holds it (same ``row_hash``).

    :returns: (the origin, how many rows were new to the ledger).
    :raises LedgerConflictError: the origin is another machine's or history's, or a row conflicts.
    :raises LedgerError: the database failed; the rows stay marked for the next upload.
    :raises HistoryError: the history cannot be read or written."""
    import socket

    host, hid = socket.gethostname(), history.identity
    if hid is None:
        raise LedgerError(f"the history {history.path} has no identity (read-only, written by an older piflash)")
    origin = settings.PIFLASH_STATION.value() or one_off_origin(host, hid)
    ledger.claim(origin, host, hid, "one-off", history.row_hash_at)
    new, seq = 0, 0
    while all_history:
        rows = history.sealed_after(seq)
        if not rows:
            break
        new += ledger.upload(origin, hid, rows)
        seq = int(rows[-1]["seq"])
    while True:
        rows = history.asked_rows()
        if not rows:
            break
        got = ledger.upload(origin, hid, rows)
        new += 0 if all_history else got
        history.ledger_took(int(r["id"]) for r in rows)
    return origin, new


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
        import socket

        self.history, self.station, self.url, self.log, self.interval = history, station, url, log, interval
        #: What the station's name is registered with (:meth:`Ledger.claim`).
        self.host, self.history_id = socket.gethostname(), history.identity
        self._refused: Optional[str] = None
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
        if self._thread.is_alive():
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

    @property
    def reached(self) -> Optional[bool]:
        """Whether the last upload round reached the ledger and it took this station's rows:
        True, False (unreachable or refused), None before the first round ended."""
        if self._down or self._refused:
            return False
        return True if self.head is not None else None

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
            # every time, not once: a takeover elsewhere stops this station's uploads at once
            ledger.claim(self.station, self.host, self.history_id, "station", self.history.row_hash_at)
            while True:
                head, head_hash = ledger.head_row(self.station, self.history_id)
                mine = self.history.row_hash_at(head) if head else None
                if head and mine != head_hash:
                    raise LedgerConflictError(
                        f"station {self.station}: the ledger's last row of history {self.history_id[:8]} (seq {head}, "
                        f"row_hash {str(head_hash)[:12]}) is not this history's (row_hash {str(mine)[:12]}): no row "
                        "is taken for uploaded",
                        hint="two copies of one history upload under one name (a cloned SD card?): give this "
                        "station its own name and a history of its own",
                    )
                self.head = head
                rows = self.history.sealed_after(self.head)
                if not rows:
                    break
                new += ledger.upload(self.station, self.history_id, rows)
                # Committed: the ledger holds them now, whether or not the next head query gets
                # through (the queue metric reads self.head).
                self.head = int(rows[-1]["seq"])
            if self._down or self._refused:
                self.log(f"ledger {safe_url(self.url)} reached again: the queued rows are uploaded")
            self._down = False
            self._refused = None
        except LedgerConflictError as exc:
            if self._refused != exc.message:
                self.log(f"ledger refuses this station's rows: {exc.message} ({exc.hint})")
            self._refused = exc.message
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
    """The connection string (URI or keyword form) with its password masked, for messages
    (:func:`piflash.redact.redact_conninfo`)."""
    return redact.redact_conninfo(url)


def db_reason(exc: BaseException) -> str:
    """The first line of a database error, every known password and any quoted connection
    string's password masked (:func:`piflash.redact.scrub`: libpq quotes a URI it cannot parse)."""
    text = str(exc).strip().splitlines()
    return (redact.scrub(text[0]) or "") if text else type(exc).__name__
