"""A job bundle's count limit (``max_boards``), enforced across the line through the ledger.

Each board takes a turn in the ledger before anything is written to it
(:meth:`piflash.record.ledger.Ledger.take_turn`: the bundle's count row locked, so two stations
cannot both take the last place) and settles it pass or fail after
(:meth:`~piflash.record.ledger.Ledger.settle_turn`): only passed boards are counted. Without a
ledger such a bundle is refused (:func:`piflash.bundle.loader.open_bundle`).
"""

from __future__ import annotations

import os
import threading
from typing import Any, Optional

from piflash.errors import BundleError


class BoardCount:
    """The count limit of one verified bundle, for the boards of this process.

    Thread-safe (a station's worker threads share it); a process forked from the one that made it
    opens its own connection (a libpq connection is not shared across a fork).

    :param url: the ledger's URL.
    :param line: the bundle's line.
    :param sha256: the bundle's SHA-256 (64 hex digits).
    :param version: the bundle's version.
    :param max_boards: the manifest's ``max_boards`` (boards, across the line).
    :param holder: who flashes (a station's name, or ``one-off:HOST``), recorded with each turn.
    """

    def __init__(self, url: str, line: str, sha256: str, version: int, max_boards: int, holder: str) -> None:
        self.url, self.line, self.sha256, self.version = url, line, sha256, version
        self.max_boards, self.holder = max_boards, holder
        self._lock = threading.Lock()
        self._ledger: Any = None
        self._pid = os.getpid()

    def _db(self):
        from piflash.record.ledger import Ledger

        if self._ledger is not None and self._pid != os.getpid():
            self._ledger = None  # the parent's connection: never used in this child
        if self._ledger is None:
            self._ledger = Ledger(self.url)
            self._pid = os.getpid()
        return self._ledger

    def check(self, where: str) -> None:
        """Refuse now when the line has no place left (passed plus open turns reach ``max_boards``).

        :raises BundleError: (exit 28) naming the count. :raises LedgerError: the ledger failed."""
        with self._lock:
            passed, taken = self._db().bundle_count(self.line, self.sha256)
        if passed + taken >= self.max_boards:
            raise BundleError(
                f"{where}: the bundle allows at most {self.max_boards} boards across line {self.line}: "
                f"{passed} passed"
                + (f" and {taken} being flashed" if taken else "")
                + " (the ledger's count): refused",
                hint="publish a new bundle version for more boards (piflash bundle create --max-boards N)",
            )

    def take(self, target_uid: Optional[str]) -> int:
        """The board ``target_uid``'s turn, before anything is written to it.

        :returns: the turn's id, for :meth:`settle`.
        :raises BundleError: (exit 28) the limit is reached, naming the count.
        :raises LedgerError: the ledger cannot be reached (the board is not flashed)."""
        with self._lock:
            try:
                return self._db().take_turn(
                    self.line, self.sha256, self.version, self.max_boards, self.holder, target_uid
                )
            except BundleError:
                raise
            except Exception:
                self._drop()
                raise

    def settle(self, turn: int, passed: bool) -> None:
        """Settle the turn ``turn``: counted when ``passed``, its place freed when not.

        :raises LedgerError: the ledger failed (the turn expires after
            :data:`piflash.record.ledger.TURN_TTL` s)."""
        with self._lock:
            try:
                self._db().settle_turn(turn, passed)
            except Exception:
                self._drop()
                raise

    def _drop(self) -> None:
        if self._ledger is not None:
            self._ledger.close()
            self._ledger = None

    def close(self) -> None:
        """Close the connection (this process's)."""
        with self._lock:
            if self._pid == os.getpid():
                self._drop()
