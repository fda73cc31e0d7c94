"""The history of every operation on every board, in SQLite.

One row per operation (flash, verify, erase, reset), from the command line and from
the station alike, written in a single transaction: the row is either all there or
not there at all, whatever happens to the process or the power. The database runs in
WAL mode with ``synchronous=FULL`` so a committed row survives a power cut (SQLite's
documentation, "Write-Ahead Logging" and "PRAGMA synchronous"), and several processes
(a station and a user at the shell) can write at once.

Where it lives (:func:`default_path`): ``$PIFLASH_HISTORY`` if set, else
``$STATE_DIRECTORY/history.sqlite3`` (systemd's ``StateDirectory=``), else
``$XDG_STATE_HOME/piflash/history.sqlite3`` (``~/.local/state/piflash/...``).
``PIFLASH_HISTORY=off`` turns recording off for the command line.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Union

#: The operations' phases that get a duration column each (seconds).
PHASES = ("connect", "erase", "program", "verify", "reset")

#: Outcomes a row can have.
OUTCOMES = ("pass", "fail", "skip")

SCHEMA_VERSION = 1

_COLUMNS = (
    ("started_at", "REAL NOT NULL"),     # Unix time, seconds
    ("ended_at", "REAL NOT NULL"),
    ("station", "TEXT"),
    ("operation", "TEXT NOT NULL"),
    ("probe_uid", "TEXT"),
    ("target", "TEXT"),
    ("target_uid", "TEXT"),
    ("firmware", "TEXT"),
    ("firmware_sha256", "TEXT"),
    ("profile", "TEXT"),
    ("outcome", "TEXT NOT NULL CHECK (outcome IN ('pass', 'fail', 'skip'))"),
    ("exit_code", "INTEGER NOT NULL"),
    ("error_kind", "TEXT"),
    ("error", "TEXT"),
    ("image_bytes", "INTEGER NOT NULL DEFAULT 0"),
    ("programmed_bytes", "INTEGER NOT NULL DEFAULT 0"),
) + tuple((f"{p}_s", "REAL") for p in PHASES)

COLUMN_NAMES = ("id",) + tuple(name for name, _ in _COLUMNS)


class HistoryError(Exception):
    """The history database cannot be opened or written (path, permissions, disk full, corrupt)."""


def default_path() -> Optional[Path]:
    """Where the history database lives, or None when ``PIFLASH_HISTORY=off``."""
    env = os.environ.get("PIFLASH_HISTORY")
    if env:
        return None if env.lower() in ("off", "0", "no", "false") else Path(env)
    state = os.environ.get("STATE_DIRECTORY")
    if state:  # systemd may pass several, colon-separated: the first is ours
        return Path(state.split(":")[0]) / "history.sqlite3"
    xdg = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(xdg) / "piflash" / "history.sqlite3"


class History:
    """A handle on the history database; safe to share between threads.

    :param path: the SQLite file (created with its folder if missing); default :func:`default_path`.
    :raises HistoryError: when the file cannot be created or opened, or is not a database.
    """

    def __init__(self, path: Union[str, Path, None] = None) -> None:
        path = Path(path) if path is not None else default_path()
        if path is None:
            raise HistoryError("history is turned off (PIFLASH_HISTORY=off)")
        self.path = path
        self._lock = threading.Lock()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(str(path), timeout=30.0, check_same_thread=False,
                                       isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._create()
        except (OSError, sqlite3.Error) as exc:
            raise HistoryError(f"cannot open the history database {path}: {exc}") from exc

    def _create(self) -> None:
        cols = ",\n  ".join(f"{name} {decl}" for name, decl in _COLUMNS)
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.execute(f"CREATE TABLE IF NOT EXISTS operations (\n"
                                 f"  id INTEGER PRIMARY KEY AUTOINCREMENT,\n  {cols})")
                self._db.execute("CREATE INDEX IF NOT EXISTS operations_started ON operations (started_at)")
                self._db.execute("CREATE INDEX IF NOT EXISTS operations_board ON operations (target_uid)")
                self._db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def close(self) -> None:
        """Close the database (rows already recorded are safe whether or not this is called)."""
        with self._lock:
            self._db.close()

    def __enter__(self) -> "History":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def record(self, result, *, outcome: Optional[str] = None, station: Optional[str] = None,
               profile: Optional[str] = None) -> int:
        """Record one operation and return its row id.

        :param result: a :class:`piflash.result.OperationResult` (finished: ok or with ``error``).
        :param outcome: "pass", "fail" or "skip"; default "pass" if ``result.ok`` else "fail".
        :param station: the station's name, None for the command line.
        :param profile: the profile's name, if one was used.
        :raises HistoryError: when the row cannot be written (the database is left as it was).
        """
        outcome = outcome or ("pass" if result.ok else "fail")
        if outcome not in OUTCOMES:
            raise ValueError(f"outcome must be one of {OUTCOMES}, not {outcome!r}")
        error = result.error or {}
        started = result.started_at or time.time()
        row = {
            "started_at": started,
            "ended_at": started + (result.duration or 0.0),
            "station": station,
            "operation": result.operation,
            "probe_uid": result.probe,
            "target": result.target,
            "target_uid": result.target_uid,
            "firmware": result.firmware,
            "firmware_sha256": result.firmware_sha256,
            "profile": profile,
            "outcome": outcome,
            "exit_code": int(error.get("exit_code", 0)) if outcome == "fail" else 0,
            "error_kind": error.get("kind"),
            "error": error.get("message"),
            "image_bytes": result.image_bytes or 0,
            "programmed_bytes": result.program.programmed_bytes if result.program else 0,
        }
        for phase in PHASES:
            row[f"{phase}_s"] = result.durations.get(phase)
        names = ", ".join(row)
        marks = ", ".join(f":{k}" for k in row)
        try:
            with self._lock:
                cur = self._db.execute("BEGIN IMMEDIATE")
                try:
                    cur = self._db.execute(f"INSERT INTO operations ({names}) VALUES ({marks})", row)
                    self._db.execute("COMMIT")
                except BaseException:
                    self._db.execute("ROLLBACK")
                    raise
            return int(cur.lastrowid)
        except sqlite3.Error as exc:
            raise HistoryError(f"cannot record into {self.path}: {exc}") from exc

    def query(self, since: Optional[float] = None, failed: bool = False, board: Optional[str] = None,
              station: Optional[str] = None, limit: Optional[int] = None) -> List[Dict[str, object]]:
        """Rows, oldest first, as dicts keyed by :data:`COLUMN_NAMES`.

        :param since: Unix time; only operations started at or after it.
        :param failed: only rows whose outcome is "fail".
        :param board: only this target unique ID (case-insensitive).
        :param station: only this station's rows.
        :param limit: at most this many of the newest matching rows.
        :raises HistoryError: when the database cannot be read.
        """
        where, args = [], []
        if since is not None:
            where.append("started_at >= ?")
            args.append(since)
        if failed:
            where.append("outcome = 'fail'")
        if board:
            where.append("lower(target_uid) = lower(?)")
            args.append(board)
        if station:
            where.append("station = ?")
            args.append(station)
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
            raise HistoryError(f"cannot read {self.path}: {exc}") from exc
        return [dict(zip(COLUMN_NAMES, r)) for r in reversed(rows)]


def summarize(rows: Iterable[Dict[str, object]]) -> Dict[str, object]:
    """Counts and rate over ``rows``: passed, failed, skipped, boards (distinct target unique IDs)
    and boards_per_hour (passed + failed operations per hour between the first start and the last
    end; None for fewer than two operations)."""
    rows = list(rows)
    count = {o: sum(1 for r in rows if r["outcome"] == o) for o in OUTCOMES}
    done = count["pass"] + count["fail"]
    rate = None
    if done >= 2:
        span = max(r["ended_at"] for r in rows) - min(r["started_at"] for r in rows)
        rate = round(done * 3600.0 / span, 1) if span > 0 else None
    return {"passed": count["pass"], "failed": count["fail"], "skipped": count["skip"],
            "boards": len({r["target_uid"] for r in rows if r["target_uid"]}),
            "boards_per_hour": rate}
