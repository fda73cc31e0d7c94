"""The history's hash chain: how a row is sealed, and how :func:`verify_chain` finds a row that
was edited, deleted or inserted after it was written.

A row is *sealed* when it is completed (:meth:`piflash.record.history.History.complete`), inside the
same ``BEGIN IMMEDIATE`` transaction: it gets the next ``seq`` (1, 2, 3, ... in completion
order, so rows of parallel station workers that finish out of order chain in the order they
finished), ``prev_hash`` = the ``row_hash`` of the row with ``seq - 1`` (:data:`GENESIS` for the
first), and ``row_hash`` = :func:`row_hash` of the row as stored. A row still being written
(outcome ``open``) has none of the three yet; its ``id`` (AUTOINCREMENT, never reused, given when
the row is opened) is what makes its deletion visible: ids are dense from 1 to the highest ever
given (SQLite's ``sqlite_sequence``).

The chain proves the rows were not changed by an ordinary edit of the file (an SQL ``UPDATE``,
``DELETE`` or ``INSERT``). Anyone able to write the file can also recompute every hash after the
point they changed: keep the head (``piflash history verify-chain`` prints it) somewhere else,
and a later ``verify-chain --anchor HASH`` proves the record up to it is unchanged.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence

#: ``prev_hash`` of the first sealed row (seq 1).
GENESIS = "0" * 64

#: Columns added after the chain began (history schema 3: ``boot_check``; 4: ``bundle_sha256``,
#: ``bundle_version``). A row hashes them only
#: when they hold a value, so the rows sealed before a column existed (NULL in it after the
#: migration) keep the hash they were sealed with.
LATE_COLUMNS = ("boot_check", "bundle_sha256", "bundle_version")


def canonical(row: Dict[str, object]) -> bytes:
    """The bytes a row's hash covers: every column except ``row_hash`` (and the
    :data:`LATE_COLUMNS` that are NULL), as JSON with sorted keys.

    Exactly ``json.dumps(values, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
    allow_nan=False).encode("utf-8")`` where ``values`` maps each column name to its stored value
    (SQLite NULL as ``null``, INTEGER as a JSON integer, REAL as Python's shortest round-trip
    ``repr``, TEXT as a JSON string). Keys that are not columns (none are added by
    :meth:`History.query`) must not be passed.
    """
    values = {k: v for k, v in row.items() if k != "row_hash" and not (v is None and k in LATE_COLUMNS)}
    return json.dumps(values, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode(
        "utf-8"
    )


def row_hash(row: Dict[str, object]) -> str:
    """SHA-256 (lower-case hex, 64 characters) of :func:`canonical` ``(row)``."""
    return hashlib.sha256(canonical(row)).hexdigest()


@dataclass
class ChainProblem:
    """One break in the chain.

    :ivar row_id: the history row id (``id`` column) at fault: the edited or inserted row, or the
        deleted one when its id is known (else the first row after the gap).
    :ivar kind: ``"edited"``, ``"deleted"`` or ``"inserted"``.
    :ivar detail: one sentence saying what was found.
    """

    row_id: int
    kind: str
    detail: str


@dataclass
class ChainReport:
    """What :func:`verify_chain` found.

    :ivar sealed: number of sealed rows (with a ``seq``).
    :ivar head_seq: the last ``seq`` (0 for an empty chain). :ivar head_hash: its ``row_hash``
        (:data:`GENESIS` for an empty chain).
    :ivar open_rows: ids of rows not sealed yet (outcome ``open``: in progress, or left by a process
        that died; the next writer seals those as ``interrupted``).
    :ivar problems: every break found, in chain order; empty when the chain is intact.
    :ivar anchor_found: with an anchor given, whether a sealed row carries it (None otherwise).
    """

    sealed: int = 0
    head_seq: int = 0
    head_hash: str = GENESIS
    open_rows: List[int] = field(default_factory=list)
    problems: List[ChainProblem] = field(default_factory=list)
    anchor_found: Optional[bool] = None

    @property
    def ok(self) -> bool:
        """The chain is intact (and contains the anchor, if one was given)."""
        return not self.problems and self.anchor_found is not False

    def to_dict(self) -> dict:
        """JSON-friendly: the fields above plus ``ok``."""
        return {
            "ok": self.ok,
            "sealed": self.sealed,
            "head_seq": self.head_seq,
            "head_hash": self.head_hash,
            "open_rows": self.open_rows,
            "problems": [p.__dict__ for p in self.problems],
            "anchor_found": self.anchor_found,
        }


def verify_chain(
    rows: Sequence[Dict[str, object]], highest_id: int, anchor: Optional[str] = None, check_ids: bool = True
) -> ChainReport:
    """Check the chain over every row of the history.

    :param rows: every row (dicts keyed by column name, ``row_hash`` included), any order.
    :param highest_id: the highest row id ever given (``sqlite_sequence``), to find a deleted
        newest row.
    :param anchor: a ``row_hash`` kept elsewhere earlier; the report says whether it is still in
        the chain (``anchor_found``).
    :param check_ids: look for ids missing between 1 and the highest (False for a copy that holds
        sealed rows only, such as the central ledger: a row still open at its station has an id
        and no ``seq`` yet, so its absence is no deletion; the ``seq`` chain is checked all the same).
    :returns: a :class:`ChainReport`.

    Each sealed row, in ``seq`` order, must (1) hash to its ``row_hash``, (2) carry the previous
    row's ``row_hash`` as ``prev_hash`` and (3) have ``seq`` one more than the previous. A row
    that breaks this is *inserted* if the next row links over it to the row before, *edited* if
    its own content no longer matches its hash (or, when only the link to it breaks, the row
    before it was edited and its hash recomputed), *deleted* where ``seq`` skips. A finished row
    without ``seq`` is inserted; a missing id between 1 and ``highest_id`` is a deleted row.
    """
    report = ChainReport()
    sealed = sorted((r for r in rows if r["seq"] is not None), key=lambda r: r["seq"])
    for r in sorted(rows, key=lambda r: r["id"]):
        if r["seq"] is None and r["outcome"] != "open":
            report.problems.append(
                ChainProblem(
                    int(r["id"]), "inserted", f"row #{r['id']} is finished ({r['outcome']}) but was never sealed"
                )
            )
        elif r["seq"] is None:
            report.open_rows.append(int(r["id"]))
    prev_hash, prev_seq, prev_id = GENESIS, 0, None
    for i, r in enumerate(sealed):
        nxt = sealed[i + 1] if i + 1 < len(sealed) else None
        content_ok = row_hash(r) == r["row_hash"]
        link_ok = r["prev_hash"] == prev_hash
        seq_ok = r["seq"] == prev_seq + 1
        rid = int(r["id"])
        if content_ok and link_ok and seq_ok:
            pass
        elif nxt is not None and nxt["prev_hash"] == prev_hash:
            report.problems.append(
                ChainProblem(
                    rid, "inserted", f"row #{rid} (seq {r['seq']}) is not in the chain: the next row links over it"
                )
            )
            continue  # the chain goes on from the row before it
        elif not content_ok:
            report.problems.append(
                ChainProblem(rid, "edited", f"row #{rid} (seq {r['seq']}) no longer matches its row_hash")
            )
        elif not seq_ok and r["seq"] > prev_seq + 1:
            gap = f"seq {prev_seq + 1}" if r["seq"] == prev_seq + 2 else f"seq {prev_seq + 1}-{r['seq'] - 1}"
            report.problems.append(ChainProblem(rid, "deleted", f"{gap} missing before row #{rid}"))
        else:
            culprit = prev_id if prev_id is not None else rid
            report.problems.append(
                ChainProblem(
                    culprit,
                    "edited",
                    f"row #{culprit} was changed and its hash recomputed: row #{rid} links to another hash",
                )
            )
        prev_hash, prev_seq, prev_id = r["row_hash"], int(r["seq"]), rid
        report.sealed += 1
    report.head_seq, report.head_hash = prev_seq, prev_hash
    if check_ids:
        _missing_ids(report, rows, highest_id)
    if anchor is not None:
        report.anchor_found = any(r["row_hash"] == anchor.strip().lower() for r in sealed)
    report.problems.sort(key=lambda p: p.row_id)
    return report


def _missing_ids(report: ChainReport, rows: Sequence[Dict[str, object]], highest_id: int) -> None:
    """Add a "deleted" problem per run of ids missing between 1 and the highest id ever given.

    A row inserted with an id of its own choosing raises SQLite's highest id too: ids above the
    last row that is not an inserted one count only if the highest id itself is not inserted.
    """
    inserted = {p.row_id for p in report.problems if p.kind == "inserted"}
    ids = {int(r["id"]) for r in rows}
    limit = max((i for i in ids if i not in inserted), default=0)
    if highest_id > limit and highest_id not in inserted:
        limit = highest_id
    missing = sorted(set(range(1, limit + 1)) - ids)
    runs: List[List[int]] = []
    for i in missing:
        if runs and runs[-1][-1] == i - 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    for run in runs:
        what = f"row #{run[0]} is" if len(run) == 1 else f"rows #{run[0]}-#{run[-1]} are"
        report.problems.append(ChainProblem(run[0], "deleted", f"{what} missing (ids are never reused)"))


__all__ = ["GENESIS", "canonical", "row_hash", "verify_chain", "ChainReport", "ChainProblem"]
