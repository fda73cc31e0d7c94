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
"""

from __future__ import annotations

import time
from typing import Optional

from piflash.errors import SerialError
from piflash.production.serials import Lease
from piflash.record.ledger import Ledger, LedgerError, db_reason, safe_url

__all__ = ["PostgresLeaseSource", "DEFAULT_LEASE_TTL"]

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
            try:
                self._ledger = Ledger(self.url)
            except LedgerError as exc:
                raise SerialError(
                    f"cannot lease serial numbers: {exc.message}",
                    hint="the station takes no new number it cannot lease: bring the database back",
                ) from None
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
                row = db.execute(
                    "SELECT start, step, next FROM ledger_counters WHERE name = %s FOR UPDATE", (counter.name,)
                ).fetchone()
                if row is None:
                    db.execute(
                        "INSERT INTO ledger_counters (name, start, step, last, next) "
                        "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (name) DO NOTHING",
                        (counter.name, counter.start, counter.step, counter.end, counter.start),
                    )
                    row = db.execute(
                        "SELECT start, step, next FROM ledger_counters WHERE name = %s FOR UPDATE", (counter.name,)
                    ).fetchone()
                start, step, nxt = row
                if (start, step) != (counter.start, counter.step):
                    raise SerialError(
                        f"counter '{counter.name}' in the ledger has start {start}, step {step}; "
                        f"the profile says start {counter.start}, step {counter.step}",
                        hint="keep start/step of a counter in use, or name a new one with 'counter:'",
                    )
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
        return Lease(int(lease_id), counter.name, int(first), int(left), int(step))

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
