"""The last bundle version each line accepted on this machine: the rollback guard.

A small SQLite file (``bundles.sqlite3``, beside the history: :func:`state_path`) with one row per
line: the highest version accepted, its bundle's SHA-256 and when. A bundle older than its line's
row is refused; the same version again (a station restarted, a second ``piflash flash``) is
accepted. Check and update are one transaction (``BEGIN IMMEDIATE``), so two processes loading
bundles at once cannot both pass an older one. Line-wide, the ledger keeps the published jobs'
versions going up (:mod:`piflash.bundle.jobs`). Standard library and :mod:`piflash.record.history`'s path only.
"""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path
from typing import Optional, Tuple, Union

from piflash.errors import BundleError

#: The state file's name, in the history's folder.
STATE_NAME = "bundles.sqlite3"


def state_path(history: Optional[Union[str, "os.PathLike[str]"]] = None) -> Path:
    """The rollback state beside the history file ``history`` (a station's ``history:``), else
    beside :func:`piflash.record.history.default_path`; with ``PIFLASH_HISTORY=off`` still where the
    history would be by default (``$STATE_DIRECTORY``, else ``$XDG_STATE_HOME/piflash``): turning the
    history off does not turn the rollback guard off."""
    from piflash import settings
    from piflash.record.history import default_path

    if history is None:
        history = default_path()
    if history is not None:
        return Path(history).parent / STATE_NAME
    state = settings.STATE_DIRECTORY.value()
    if state:
        return Path(state) / STATE_NAME
    xdg = settings.XDG_STATE_HOME.value() or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(xdg) / "piflash" / STATE_NAME


class LineVersions:
    """The rollback state file at ``path`` (created with its folder when missing).

    :raises BundleError: (exit 28) the file cannot be created, opened or written: without it a
        rollback could not be seen, so no bundle is accepted.
    """

    def __init__(self, path: Union[str, "os.PathLike[str]"]) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(str(self.path), timeout=30.0, isolation_level=None)
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS accepted (line TEXT PRIMARY KEY, version INTEGER NOT NULL, "
                "bundle_sha256 TEXT NOT NULL, accepted_at REAL NOT NULL)"
            )
        except (OSError, sqlite3.Error) as exc:
            raise BundleError(f"cannot open the bundle state {self.path}: {exc}") from None

    def close(self) -> None:
        """Close the database."""
        self._db.close()

    def last(self, line: str) -> Optional[Tuple[int, str]]:
        """``(version, bundle_sha256)`` last accepted for ``line``, or None."""
        try:
            row = self._db.execute("SELECT version, bundle_sha256 FROM accepted WHERE line = ?", (line,)).fetchone()
        except sqlite3.Error as exc:
            raise BundleError(f"cannot read the bundle state {self.path}: {exc}") from None
        return (int(row[0]), str(row[1])) if row else None

    def check(self, line: str, version: int, bundle_sha256: str, where: str, accept: bool = True) -> None:
        """Refuse ``version`` when ``line`` accepted a higher one here; else, with ``accept``,
        remember it as the line's last (a lower or equal one stays).

        :raises BundleError: (exit 28) a rollback, naming both versions; the state cannot be written.
        """
        try:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                row = self._db.execute("SELECT version FROM accepted WHERE line = ?", (line,)).fetchone()
                if row is not None and version < int(row[0]):
                    raise BundleError(
                        f"{where}: version {version} of line {line} is older than version {row[0]}, "
                        f"which this machine already accepted (a rollback): refused",
                        hint=f"build a bundle with --version {row[0]} or higher; the state is {self.path}",
                    )
                if accept and (row is None or version > int(row[0])):
                    self._db.execute(
                        "INSERT INTO accepted (line, version, bundle_sha256, accepted_at) VALUES (?, ?, ?, ?) "
                        "ON CONFLICT (line) DO UPDATE SET version = excluded.version, "
                        "bundle_sha256 = excluded.bundle_sha256, accepted_at = excluded.accepted_at",
                        (line, version, bundle_sha256, time.time()),
                    )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise BundleError(f"cannot write the bundle state {self.path}: {exc}") from None
