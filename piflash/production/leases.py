"""Serial numbers leased from the central ledger: a
:class:`piflash.production.serials.LeaseSource` on PostgreSQL, for stations that share a counter.

A lease is one transaction with the counter's row locked ``FOR UPDATE`` (PostgreSQL "Explicit
Locking", row-level locks): two stations asking at once are served one after the other, and a
number is granted once. Numbers given back on a clean stop (``ledger_returned``) are granted
first. A crash leaves its lease open in ``ledger_leases``, its unused rest lost (as locally: a
number is never given twice, at the price of gaps), and accounted for: the lease shows its
holder and its range; it is marked ``lost`` when its station starts again, or ``expired`` once
its time (``ttl``, the station's ``lease_ttl``) runs out without a word from its holder
(:meth:`piflash.record.ledger.Ledger.expire_leases`, run before every lease and by ``piflash
ledger status``). A live holder renews its lease while it numbers boards (:meth:`renew`, at most
every quarter of the ttl), and an expired lease whose holder comes back is open again: its
numbers were never granted to anyone else. The station's own serial database still records each
number's state.

The line's numbers are one set, whatever joined when (issue 39):

- a station joining the ledger brings what its serial database holds (:meth:`PostgresLeaseSource.join`,
  before each of its leases and at ``station check``): the counter is raised above the highest
  number the database holds, in the transaction that locks the counter row, and the raise is
  recorded (``ledger_counter_raises``); its own one-offs go to ``ledger_one_offs``;
- a counter row that is created (a new counter, or its tables were dropped) starts above every
  number the ledger knows in its range: the rows' ``serial``, the leases, the returned ranges;
- a one-off (``flash --serial N`` with a ledger) is checked against the line (:func:`find_issued_in_ledger`:
  rows, leases, one-offs) and recorded in ``ledger_one_offs`` before its board is programmed
  (:class:`LedgerOneOff`); a lease whose block holds such a number names it in
  :attr:`~piflash.production.serials.Lease.skip`, and the allocator never takes it.
"""

from __future__ import annotations

import time
from typing import List, Optional, Tuple, Union

from piflash.errors import SerialError, SerialIssuedError
from piflash.firmware.patch import CounterSpec
from piflash.production.serials import Lease, OneOff, _iso
from piflash.record.ledger import Ledger, LedgerError, db_reason, safe_url

__all__ = [
    "PostgresLeaseSource",
    "DEFAULT_LEASE_TTL",
    "LedgerOneOff",
    "find_issued_in_ledger",
    "describe_issued",
    "ensure_tables",
]

#: The serial tables this module keeps in the ledger beside :mod:`piflash.record.ledger`'s own:
#: one-offs given on the line (``flash --serial N``) and every raise of a counter with its reason.
_TABLES = (
    "CREATE TABLE IF NOT EXISTS ledger_one_offs (id bigserial PRIMARY KEY, counter text NOT NULL, "
    "n bigint NOT NULL, holder text NOT NULL, reissue boolean NOT NULL DEFAULT false, state text NOT NULL, "
    "target_uid text, taken_at double precision NOT NULL, done_at double precision, "
    "UNIQUE (counter, n, holder, taken_at))",
    "CREATE TABLE IF NOT EXISTS ledger_counter_raises (id bigserial PRIMARY KEY, counter text NOT NULL, "
    "holder text NOT NULL, old_next bigint, new_next bigint NOT NULL, reason text NOT NULL, "
    "raised_at double precision NOT NULL)",
)


def ensure_tables(ledger: Ledger) -> None:
    """Create this module's tables in ``ledger`` if missing (one creator at a time: the advisory
    lock :class:`~piflash.record.ledger.Ledger` takes for its own). :raises: ``ledger.errors``"""
    db = ledger.connection
    with db.transaction():
        db.execute("SELECT pg_advisory_xact_lock(7428251)")
        for statement in _TABLES:
            db.execute(statement)


def _open(url: str, what: str) -> Ledger:
    """A :class:`~piflash.record.ledger.Ledger` on ``url`` with this module's tables.

    :raises SerialError: (exit 22, the message starting with ``what``) it cannot be reached or
        its tables cannot be made."""
    hint = "the station takes no new number it cannot lease: bring the database back"
    try:
        ledger = Ledger(url)
    except LedgerError as exc:
        raise SerialError(f"{what}: {exc.message}", hint=hint) from None
    try:
        ensure_tables(ledger)
    except ledger.errors as exc:
        ledger.close()
        raise SerialError(f"{what}: ledger {safe_url(url)}: {db_reason(exc)}", hint=hint) from None
    return ledger


def _above(top: int, counter: CounterSpec) -> int:
    """The first number of ``counter`` (``start + k * step``, k >= 0) above ``top``."""
    if top < counter.start:
        return counter.start
    return counter.start + ((top - counter.start) // counter.step + 1) * counter.step


def _ledger_top(db, counter: CounterSpec) -> Optional[int]:
    """The highest number of ``counter``'s range the ledger knows: a row's ``serial`` (any
    profile: the line's numbers are one set; a number of another product in this range leaves a
    gap here, never a duplicate), a lease's last number, a returned range's last; None for none."""
    row = db.execute(
        "SELECT greatest("
        "(SELECT max(serial::numeric) FROM ledger_operations WHERE serial ~ '^[0-9]{1,18}$' "
        "AND serial::numeric >= %(start)s AND (%(end)s::bigint IS NULL OR serial::numeric <= %(end)s::bigint) "
        "AND mod(serial::numeric - %(start)s, %(step)s) = 0), "
        "(SELECT max(first + (count - 1) * step) FROM ledger_leases WHERE counter = %(name)s), "
        "(SELECT max(first + (count - 1) * step) FROM ledger_returned WHERE counter = %(name)s))",
        {"start": counter.start, "end": counter.end, "step": counter.step, "name": counter.name},
    ).fetchone()
    return None if row[0] is None else int(row[0])


def _counter_row(db, counter: CounterSpec, holder: str) -> Tuple[int, int, int]:
    """``(start, step, next)`` of ``counter``'s ledger row, locked ``FOR UPDATE`` (call inside a
    transaction). A missing row is created with ``next`` above every number the ledger knows
    (:func:`_ledger_top`), recorded in ``ledger_counter_raises`` when that is above ``start``."""
    sql = "SELECT start, step, next FROM ledger_counters WHERE name = %s FOR UPDATE"
    row = db.execute(sql, (counter.name,)).fetchone()
    if row is None:
        top = _ledger_top(db, counter)
        nxt = counter.start if top is None else _above(top, counter)
        made = db.execute(
            "INSERT INTO ledger_counters (name, start, step, last, next) "
            "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (name) DO NOTHING RETURNING next",
            (counter.name, counter.start, counter.step, counter.end, nxt),
        ).fetchone()
        if made is not None and nxt != counter.start:
            db.execute(
                "INSERT INTO ledger_counter_raises (counter, holder, old_next, new_next, reason, raised_at) "
                "VALUES (%s, %s, NULL, %s, %s, %s)",
                (
                    counter.name,
                    holder,
                    nxt,
                    f"counter created above number {top}, the highest the ledger holds",
                    time.time(),
                ),
            )
        row = db.execute(sql, (counter.name,)).fetchone()
    return int(row[0]), int(row[1]), int(row[2])


def _check_spec(counter: CounterSpec, start: int, step: int) -> None:
    if (start, step) != (counter.start, counter.step):
        raise SerialError(
            f"counter '{counter.name}' in the ledger has start {start}, step {step}; "
            f"the profile says start {counter.start}, step {counter.step}",
            hint="keep start/step of a counter in use, or name a new one with 'counter:'",
        )


#: Seconds a lease lives without a word from its holder (the station's ``lease_ttl``): a day, so a
#: station switched off overnight keeps its lease, and a crashed one is accounted for by the
#: next shift.
DEFAULT_LEASE_TTL = 86400.0


class PostgresLeaseSource:
    """Serial leases from the ledger at ``url`` (one connection, opened at the first lease).

    Thread-safe through the :class:`~piflash.production.serials.SerialAllocator`'s own lock.
    """

    def __init__(self, url: str, ttl: float = DEFAULT_LEASE_TTL) -> None:
        self.url, self.ttl = url, float(ttl)
        self._ledger: Optional[Ledger] = None
        self._renewed: dict = {}  # lease id -> time.monotonic() of its last renewal

    def _get(self) -> Ledger:
        if self._ledger is None:
            self._ledger = _open(self.url, "cannot lease serial numbers")
        return self._ledger

    def _reset(self) -> None:
        if self._ledger is not None:
            self._ledger.close()
            self._ledger = None

    def lease(self, counter, holder: str, count: int) -> Lease:
        """Grant up to ``count`` numbers of ``counter`` (a :class:`piflash.firmware.patch.CounterSpec`)
        to ``holder``. A connection that broke since its last use (the server restarted, the
        network came back) is replaced once. A lease whose commit reached the server but whose
        answer was lost is held by nobody: it expires (``ttl``) and is accounted; its numbers are
        never granted again, so a second try never gives a number twice.

        :raises SerialError: (exit 22) the ledger cannot be reached, the counter's start/step
            differ from the ledger's, or the counter is used up.
        """
        return self._once_more(lambda: self._lease(counter, holder, count))

    def _once_more(self, call):
        """``call()``; if it failed on a connection opened before (``_reset`` dropped it: the
        server restarted, the network came back), once more on a new one. A call that failed for
        another reason (the counter is used up) is not repeated."""
        if self._ledger is not None:
            try:
                return call()
            except SerialError:
                if self._ledger is not None:  # not a lost connection: the answer stands
                    raise
        return call()

    def _lease(self, counter, holder: str, count: int) -> Lease:
        ledger = self._get()
        db = ledger.connection
        try:
            ledger.expire_leases()
            with db.transaction():
                start, step, nxt = _counter_row(db, counter, holder)
                _check_spec(counter, start, step)
                back = db.execute(
                    "SELECT first, count FROM ledger_returned WHERE counter = %s AND step = %s "
                    "AND (%s::bigint IS NULL OR first <= %s::bigint) ORDER BY first LIMIT 1 "
                    "FOR UPDATE",
                    (counter.name, step, counter.end, counter.end),
                ).fetchone()
                if back is not None:
                    first, avail = back
                    if counter.end is not None:
                        avail = min(avail, (counter.end - first) // step + 1)
                    left = min(count, avail)
                    if left < back[1]:
                        db.execute(
                            "UPDATE ledger_returned SET first = %s, count = %s WHERE counter = %s AND first = %s",
                            (first + left * step, back[1] - left, counter.name, first),
                        )
                    else:
                        db.execute(
                            "DELETE FROM ledger_returned WHERE counter = %s AND first = %s", (counter.name, first)
                        )
                else:
                    first = nxt
                    left = count if counter.end is None else min(count, (counter.end - nxt) // step + 1)
                    if left <= 0:
                        raise SerialError(
                            f"serial counter '{counter.name}' is used up (last number {counter.end})",
                            hint="raise 'end' in the profile's serial: section, or start a new range",
                        )
                    db.execute(
                        "UPDATE ledger_counters SET next = %s, last = %s WHERE name = %s",
                        (nxt + left * step, counter.end, counter.name),
                    )
                now = time.time()
                lease_id = db.execute(
                    "INSERT INTO ledger_leases (counter, holder, first, count, step, state, leased_at, ttl, "
                    "expires_at) VALUES (%s, %s, %s, %s, %s, 'open', %s, %s, %s) RETURNING id",
                    (counter.name, holder, first, left, step, now, self.ttl, now + self.ttl),
                ).fetchone()[0]
                skip = db.execute(
                    "SELECT n, holder, state FROM ledger_one_offs WHERE counter = %s AND n BETWEEN %s AND %s "
                    "AND mod(n - %s, %s) = 0 ORDER BY n, id",
                    (counter.name, first, first + (left - 1) * step, first, step),
                ).fetchall()
            self._renewed[int(lease_id)] = time.monotonic()
        except LedgerError as exc:
            self._reset()
            raise SerialError(
                f"cannot lease serial numbers: {exc.message}",
                hint="the station takes no new number it cannot lease: bring the database "
                "back; boards without serial numbers are not affected",
            ) from None
        except ledger.errors as exc:
            self._reset()
            raise SerialError(
                f"cannot lease serial numbers from the ledger {safe_url(self.url)}: {db_reason(exc)}",
                hint="the station takes no new number it cannot lease: bring the database "
                "back; boards without serial numbers are not affected",
            ) from None
        return Lease(
            int(lease_id),
            counter.name,
            int(first),
            int(left),
            int(step),
            tuple((int(n), str(h), str(st)) for n, h, st in skip),
        )

    def join(self, counter: CounterSpec, holder: str, held: dict) -> Tuple[int, int]:
        """Bring what a station's serial database holds (``held``, from
        :func:`piflash.production.serials.held_numbers`) to the ledger's ``counter``: in one
        transaction with the counter row locked ``FOR UPDATE`` (created if missing, above the
        ledger's own numbers), ``next`` is raised above ``held["highest"]`` when it is not
        already, and the raise is recorded in ``ledger_counter_raises`` with ``holder``; the
        database's one-offs are added to ``ledger_one_offs`` (once each). Called by the allocator
        before each lease from the ledger, and by ``piflash station check``.

        :returns: ``(next before, next after)``: the counter's next number to grant, equal when
            it was not raised (a counter created here counts as created at its ``next``).
        :raises SerialError: (exit 22) the ledger cannot be reached, or the counter's start/step
            differ from the ledger's.
        """
        return self._once_more(lambda: self._join(counter, holder, held))

    def _join(self, counter: CounterSpec, holder: str, held: dict) -> Tuple[int, int]:
        ledger = self._get()
        db = ledger.connection
        try:
            with db.transaction():
                start, step, nxt = _counter_row(db, counter, holder)
                _check_spec(counter, start, step)
                for o in held.get("one_offs", ()):
                    db.execute(
                        "INSERT INTO ledger_one_offs (counter, n, holder, reissue, state, target_uid, taken_at) "
                        "VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                        (counter.name, o["n"], holder, o["reissue"], o["state"], o["target_uid"], o["taken_at"]),
                    )
                top = held.get("highest")
                if top is not None and top >= nxt:
                    new = _above(top, counter)
                    db.execute("UPDATE ledger_counters SET next = %s WHERE name = %s", (new, counter.name))
                    db.execute(
                        "INSERT INTO ledger_counter_raises (counter, holder, old_next, new_next, reason, raised_at) "
                        "VALUES (%s, %s, %s, %s, %s, %s)",
                        (
                            counter.name,
                            holder,
                            nxt,
                            new,
                            f"the station's serial database holds numbers up to {top}",
                            time.time(),
                        ),
                    )
                    return nxt, new
        except ledger.errors as exc:
            self._reset()
            raise SerialError(
                f"cannot bring this station's serial numbers to the ledger {safe_url(self.url)}: {db_reason(exc)}",
                hint="the station takes no new number from a ledger that does not know its numbers: "
                "bring the database back",
            ) from None
        return nxt, nxt

    def close(self) -> None:
        """Close the connection (a later call opens a new one)."""
        self._reset()

    def renew(self, lease_id: int) -> None:
        """The holder is alive and numbering boards from ``lease_id``: push its expiry ``ttl`` on
        (open again if it had expired). Only every ``ttl / 4`` seconds per lease reaches the
        database; a ledger that cannot be reached is left alone (the numbers stay the holder's
        either way; the next renewal catches up)."""
        now = time.monotonic()
        last = self._renewed.get(lease_id)
        if last is not None and now - last < self.ttl / 4:
            return
        self._renewed[lease_id] = now
        try:
            ledger = self._get()
        except SerialError:
            return
        try:
            ledger.connection.execute(
                "UPDATE ledger_leases SET expires_at = %s, state = 'open', closed_at = NULL, used = NULL "
                "WHERE id = %s AND state IN ('open', 'expired')",
                (time.time() + self.ttl, lease_id),
            )
        except ledger.errors:
            self._reset()

    def close_lost(self, lease_id: int, used: int) -> None:
        """After a crash (the allocator's recovery): mark the ledger's lease ``lost`` with the
        numbers it issued (``used``); the rest is never granted again, and accounted for.

        :raises SerialError: the ledger cannot be reached (the lease then stays open there).
        """
        self._once_more(lambda: self._close_lost(lease_id, used))

    def _close_lost(self, lease_id: int, used: int) -> None:
        ledger = self._get()
        try:
            ledger.connection.execute(
                "UPDATE ledger_leases SET state = 'lost', used = %s, closed_at = %s "
                "WHERE id = %s AND state IN ('open', 'expired')",
                (used, time.time(), lease_id),
            )
        except ledger.errors as exc:
            self._reset()
            raise SerialError(
                f"cannot mark a lost lease in the ledger {safe_url(self.url)}: {db_reason(exc)}"
            ) from None

    def give_back(self, lease: Lease, used: int) -> int:
        """Close ``lease`` after its first ``used`` numbers and return the unused rest (granted
        first by the next lease of the counter); returns how many. Idempotent: a lease already
        closed (a give-back whose answer was lost, then tried again) returns nothing twice.

        :raises SerialError: the ledger cannot be reached (the lease stays open there, and
            expires; its rest is never reused).
        """
        return self._once_more(lambda: self._give_back(lease, used))

    def _give_back(self, lease: Lease, used: int) -> int:
        rest = lease.count - used
        ledger = self._get()
        db = ledger.connection
        try:
            with db.transaction():
                closed = db.execute(
                    "UPDATE ledger_leases SET used = %s, state = 'closed', closed_at = %s "
                    "WHERE id = %s AND state IN ('open', 'expired') RETURNING id",
                    (used, time.time(), lease.id),
                ).fetchone()
                if closed is None:
                    return 0  # closed before: its rest went back then, if any
                if rest > 0:
                    db.execute(
                        "INSERT INTO ledger_returned (counter, first, count, step, lease_id, returned_at) "
                        "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                        (lease.counter, lease.first + used * lease.step, rest, lease.step, lease.id, time.time()),
                    )
        except ledger.errors as exc:
            self._reset()
            raise SerialError(
                f"cannot give serial numbers back to the ledger {safe_url(self.url)}: {db_reason(exc)}"
            ) from None
        return max(rest, 0)


def _issued(db, counter: CounterSpec, n: int, profile: Optional[str]) -> List[dict]:
    """:func:`find_issued_in_ledger` on an open connection (inside a transaction or not)."""
    found: List[dict] = []
    offs: List[dict] = []
    for origin, station, row_id, operation, outcome, uid, started in db.execute(
        "SELECT origin, station, id, operation, outcome, target_uid, started_at FROM ledger_operations "
        "WHERE serial = %s AND (profile = %s OR profile = %s) ORDER BY started_at",
        (str(n), profile or counter.name, counter.name),
    ).fetchall():
        found.append(
            {
                "source": "ledger",
                "state": outcome,
                "holder": station or origin,
                "origin": origin,
                "station": station,
                "target_uid": uid,
                "when": _iso(started),
                "row": int(row_id),
                "operation": operation,
            }
        )
    for holder, state, uid, taken, reissue in db.execute(
        "SELECT holder, state, target_uid, taken_at, reissue FROM ledger_one_offs WHERE counter = %s AND n = %s "
        "ORDER BY id",
        (counter.name, n),
    ).fetchall():
        offs.append({"reissue": bool(reissue), "taken_at": taken})
        found.append(
            {
                "source": "ledger one-off",
                "state": state,
                "holder": holder,
                "target_uid": uid,
                "when": _iso(taken),
                "reissue": bool(reissue),
            }
        )
    for lease_id, holder, state, first, count, step, used, leased in db.execute(
        "SELECT id, holder, state, first, count, step, used, leased_at FROM ledger_leases WHERE counter = %s "
        "AND %s BETWEEN first AND first + (count - 1) * step AND mod(%s - first, step) = 0 ORDER BY id",
        (counter.name, n, n),
    ).fetchall():
        if state == "closed" and used is not None and (n - first) // step >= used:
            continue  # given back unused (ledger_returned): granted again from there, or free
        if any(not o["reissue"] and o["taken_at"] < leased for o in offs):
            continue  # a one-off had it before the lease was granted: the lease skips it (Lease.skip)
        found.append(
            {
                "source": "lease",
                "state": state,
                "holder": str(holder).split("/", 1)[0],
                "target_uid": None,
                "when": _iso(leased),
                "lease": int(lease_id),
                "first": int(first),
                "last": int(first + (count - 1) * step),
            }
        )
    for holder, old, new, reason, at in db.execute(
        "SELECT holder, old_next, new_next, reason, raised_at FROM ledger_counter_raises WHERE counter = %s "
        "AND %s >= coalesce(old_next, %s) AND %s < new_next ORDER BY id",
        (counter.name, n, counter.start, n),
    ).fetchall():
        if (n - counter.start) % counter.step:
            continue  # not a number of this counter: the raise did not skip it
        found.append(
            {
                "source": "counter raise",
                "state": "raised",
                "holder": holder,
                "target_uid": None,
                "when": _iso(at),
                "first": int(counter.start if old is None else old),
                "last": int(new) - counter.step,
                "reason": reason,
            }
        )
    return found


def find_issued_in_ledger(url: str, counter: CounterSpec, n: int, profile: Optional[str]) -> List[dict]:
    """Every place the line's ledger at ``url`` shows number ``n`` of ``counter`` issued.

    :param profile: the profile's name: rows of it (or of a profile named as the counter) whose
        ``serial`` is ``n`` count.
    :returns: dicts as :func:`piflash.production.serials.find_issued` gives, ``source`` one of
        ``ledger`` (an uploaded row: ``row``, ``origin``, ``station``, ``operation``), ``lease`` (a
        lease of the counter whose block holds ``n``, used or not, unless it was given back
        unused: ``lease``, ``first``, ``last``; ``holder`` is the station it was granted to) and
        ``ledger one-off`` (``flash --serial N`` through the ledger: ``reissue``) and ``counter
        raise`` (a raise of the counter past ``n``, :meth:`PostgresLeaseSource.join`: the station
        that joined holds numbers up to there, or the counter was made again above the ledger's
        numbers; ``first``, ``last``, ``reason``, ``state`` "raised"); ``state``,
        ``holder``, ``target_uid`` (or None) and ``when`` (ISO 8601) in each.
    :raises SerialError: (exit 22) the ledger cannot be reached or read: whether ``n`` is free on
        the line cannot be told.
    """
    ledger = _open(url, f"cannot check serial {n} against the line's ledger")
    try:
        return _issued(ledger.connection, counter, n, profile)
    except ledger.errors as exc:
        raise SerialError(
            f"cannot check serial {n} against the line's ledger {safe_url(url)}: {db_reason(exc)}",
            hint="whether the number is free on the line cannot be told: bring the ledger back",
        ) from None
    finally:
        ledger.close()


def describe_issued(found: dict) -> str:
    """One line for an entry of :func:`find_issued_in_ledger`, naming the station that issued it."""
    if found["source"] == "ledger":
        where = f"station {found['station']}" if found["station"] else f"origin {found['origin']}"
        return f"ledger row #{found['row']} of {where}: {found['operation']} {str(found['state']).upper()} at {found['when']}"
    if found["source"] == "lease":
        return (
            f"ledger lease #{found['lease']} ({found['first']}..{found['last']}, {found['state']}) "
            f"granted to station {found['holder']} at {found['when']}"
        )
    if found["source"] == "counter raise":
        return (
            f"ledger: counter raised past {found['first']}..{found['last']} for station {found['holder']} "
            f"at {found['when']} ({found['reason']})"
        )
    return f"a --serial one-off on the line from {found['holder']}: {found['state']} at {found['when']}"


class LedgerOneOff(OneOff):
    """A one-off number (``flash --serial N``) on a line with a ledger: recorded in
    ``ledger_one_offs`` as well as in the local serial database, so the line's counter never
    grants it (a lease holding it names it in :attr:`Lease.skip`).

    :meth:`take` checks the number against the line again and records it, in one transaction
    with the counter row locked ``FOR UPDATE`` (the lease granting takes the same lock), before
    the local record and before the board is programmed.

    :param counter: the profile's counter. :param n: the number. :param reissue: ``--force-serial``.
    :param url: the ledger. :param origin: who gives it, as the ledger names the rows' origin
        (``PIFLASH_STATION`` or the host's name). :param profile: the profile's name.
    :raises SerialIssuedError: (exit 25, from :meth:`take`) the line issued the number meanwhile.
    :raises SerialError: (exit 22, from :meth:`take`) the ledger cannot be reached: nothing is
        programmed.
    """

    def __init__(
        self,
        counter: CounterSpec,
        n: int,
        url: str,
        origin: str,
        profile: Optional[str] = None,
        reissue: bool = False,
        path: Union[str, None] = None,
    ) -> None:
        super().__init__(counter.name, n, reissue=reissue, path=path)
        self.spec, self.url, self.origin, self.profile = counter, url, origin, profile
        self.ledger_id: Optional[int] = None

    def take(self, target_uid: Optional[str]) -> None:
        if self.ledger_id is None:
            ledger = _open(self.url, f"cannot record serial {self.n} in the line's ledger")
            db = ledger.connection
            try:
                with db.transaction():
                    _counter_row(db, self.spec, self.origin)
                    found = [] if self.reissue else _issued(db, self.spec, self.n, self.profile)
                    if found:
                        raise SerialIssuedError(
                            f"serial {self.n} was issued on the line meanwhile: {describe_issued(found[0])}",
                            serial=self.n,
                            issued=found,
                            hint="nothing was programmed; take a new number",
                        )
                    self.ledger_id = int(
                        db.execute(
                            "INSERT INTO ledger_one_offs (counter, n, holder, reissue, state, target_uid, taken_at) "
                            "VALUES (%s, %s, %s, %s, 'taken', %s, %s) RETURNING id",
                            (self.counter, self.n, self.origin, self.reissue, target_uid, time.time()),
                        ).fetchone()[0]
                    )
            except ledger.errors as exc:
                raise SerialError(
                    f"cannot record serial {self.n} in the line's ledger {safe_url(self.url)}: {db_reason(exc)}",
                    hint="nothing was programmed: bring the ledger back",
                ) from None
            finally:
                ledger.close()
        super().take(target_uid)

    def finish(self, state: str, target_uid: Optional[str] = None) -> None:
        super().finish(state, target_uid)
        if self.ledger_id is None:
            return
        ledger = _open(self.url, f"cannot record serial {self.n}'s outcome in the line's ledger")
        try:
            ledger.connection.execute(
                "UPDATE ledger_one_offs SET state = %s, done_at = %s, target_uid = coalesce(%s, target_uid) "
                "WHERE id = %s",
                (state, time.time(), target_uid, self.ledger_id),
            )
        except ledger.errors as exc:
            raise SerialError(
                f"cannot record serial {self.n}'s outcome in the line's ledger {safe_url(self.url)}: {db_reason(exc)}"
            ) from None
        finally:
            ledger.close()
