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
#: ``bundle_version``; 5: ``labgrid_place``). A row hashes them only
#: when they hold a value, so the rows sealed before a column existed (NULL in it after the
#: migration) keep the hash they were sealed with.
LATE_COLUMNS = ("boot_check", "bundle_sha256", "bundle_version", "labgrid_place")


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
        deleted one; None for a deleted row known only by its ``seq`` (a gap in ``seq`` that no
        single missing id accounts for, or a copy without ids such as the ledger's).
    :ivar kind: ``"edited"``, ``"deleted"`` or ``"inserted"``.
    :ivar detail: one sentence saying what was found.
    :ivar seq: the ``seq`` of the row at fault when known (for a deletion, the first missing
        ``seq``); None for a row never sealed or a deleted row known only by its id.
    """

    row_id: Optional[int]
    kind: str
    detail: str
    seq: Optional[int] = None
    #: Where the problem sorts among the others: the id of the row it was found at.
    order: int = field(default=0, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.row_id is not None and not self.order:
            self.order = self.row_id

    @property
    def name(self) -> str:
        """How messages name the row: ``row #2``; a deleted row with its seq, ``row #2 (seq 1)``;
        one known by seq only, ``the row with seq 1``."""
        if self.row_id is None:
            return f"the row with seq {self.seq}"
        if self.kind == "deleted" and self.seq is not None:
            return f"row #{self.row_id} (seq {self.seq})"
        return f"row #{self.row_id}"

    def to_dict(self) -> dict:
        """JSON-friendly: ``row_id``, ``seq``, ``kind``, ``detail``."""
        return {"row_id": self.row_id, "seq": self.seq, "kind": self.kind, "detail": self.detail}


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
            "problems": [p.to_dict() for p in self.problems],
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
    gaps: List[ChainProblem] = []  # deletions found as a skip in seq, their ids not known yet
    gap_sizes: List[int] = []
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
                    rid,
                    "inserted",
                    f"row #{rid} (seq {r['seq']}) is not in the chain: the next row links over it",
                    seq=_seq(r),
                )
            )
            continue  # the chain goes on from the row before it
        elif not content_ok:
            report.problems.append(
                ChainProblem(rid, "edited", f"row #{rid} (seq {r['seq']}) no longer matches its row_hash", seq=_seq(r))
            )
        elif not seq_ok and r["seq"] > prev_seq + 1:
            gap = f"seq {prev_seq + 1}" if r["seq"] == prev_seq + 2 else f"seq {prev_seq + 1}-{r['seq'] - 1}"
            gaps.append(
                ChainProblem(
                    None,
                    "deleted",
                    f"{gap} missing before row #{rid} (seq {r['seq']})",
                    seq=prev_seq + 1,
                    order=rid,
                )
            )
            gap_sizes.append(int(r["seq"]) - prev_seq - 1)
        else:
            culprit = prev_id if prev_id is not None else rid
            report.problems.append(
                ChainProblem(
                    culprit,
                    "edited",
                    f"row #{culprit} was changed and its hash recomputed: row #{rid} links to another hash",
                    seq=prev_seq if prev_id is not None else _seq(r),
                )
            )
        prev_hash, prev_seq, prev_id = r["row_hash"], int(r["seq"]), rid
        report.sealed += 1
    report.head_seq, report.head_hash = prev_seq, prev_hash
    if check_ids:
        _missing_ids(report, rows, highest_id, gaps, gap_sizes)
    else:
        report.problems.extend(gaps)
    if anchor is not None:
        report.anchor_found = any(r["row_hash"] == anchor.strip().lower() for r in sealed)
    report.problems.sort(key=lambda p: p.order)
    return report


def _seq(row: Dict[str, object]) -> Optional[int]:
    """A row's ``seq`` as an int; None when it has none, or one no sealed row has (an inserted row's 2.5)."""
    value = row.get("seq")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
        return None
    return int(value)


def _missing_ids(
    report: ChainReport,
    rows: Sequence[Dict[str, object]],
    highest_id: int,
    gaps: Sequence[ChainProblem] = (),
    gap_sizes: Sequence[int] = (),
) -> None:
    """Add a "deleted" problem per run of ids missing between 1 and the highest id ever given,
    and one per skip in ``seq`` (``gaps``, each ``gap_sizes`` seqs long).

    A deleted sealed row leaves both a missing id and (unless it was the newest) a skip in
    ``seq``; rows complete out of order, so the two need not be next to each other. When the
    missing ids are exactly as many as the missing seqs and all those seqs are one skip, they are
    the same rows: one problem names them by id and seq (``row #2 (seq 1)``). Otherwise the
    pairing is not known (a deleted open row has an id and no seq; the deleted newest row leaves
    no skip): each is reported on its own.

    A row inserted with an id of its own choosing raises SQLite's highest id too: ids above the
    last row that is not an inserted one count only if the highest id itself is not inserted.
    """
    inserted = {p.row_id for p in report.problems if p.kind == "inserted"}
    ids = {int(r["id"]) for r in rows}
    limit = max((i for i in ids if i not in inserted), default=0)
    if highest_id > limit and highest_id not in inserted:
        limit = highest_id
    missing = sorted(set(range(1, limit + 1)) - ids)
    if len(gaps) == 1 and missing and len(missing) == gap_sizes[0]:
        gap, first = gaps[0], missing[0]
        if len(missing) == 1:
            what = f"row #{first} (seq {gap.seq}) is missing"
        else:
            what = (
                f"rows {', '.join(f'#{i}' for i in missing)} (seq {gap.seq}-{gap.seq + len(missing) - 1}) are missing"
            )
        report.problems.append(
            ChainProblem(
                first,
                "deleted",
                f"{what}: ids are never reused, and the chain goes on at row #{gap.order} "
                f"(seq {int(gap.seq or 0) + len(missing)})",
                seq=gap.seq,
            )
        )
        return
    report.problems.extend(gaps)
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
