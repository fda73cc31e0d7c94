"""What the central ledger costs a station per board, and how fast a queue goes up (issue 24:
"the ledger adds <= 20 ms per board (x86 host) to a station's board time"; "uploads its queue
within 5 s of the return").

Against a real PostgreSQL started here (Debian's, in a temporary folder, as the tests start it:
tests/support/pgserver.py), on this machine (wall clock, medians of ``--boards`` repeats):

* ``upload_ms``: :meth:`piflash.record.ledger.Ledger.upload` of one sealed history row (what the
  station's uploader does after each board: read the ledger's head, read the rows after it from
  the local history, insert them in one transaction);
* ``lease_ms``: one :class:`piflash.production.leases.PostgresLeaseSource` lease of a block
  (``--block`` numbers), and ``lease_ms_per_board`` = that / block;
* ``per_board_ms``: upload + lease share: what a board waits for the ledger at most (the upload
  runs in the uploader's thread, beside the next board, so a board waits for it only on a
  one-core host);
* ``queue_rows``, ``queue_s``: a queue of that many rows (a station cut off for a while) uploaded
  after the database returns, in seconds, not counting the uploader's wait for its next try
  (at most its interval, ``max(1 s, 4 x poll_interval)``).

    python benchmarks/ledger_cost.py [--boards 200] [--block 16] [--queue 600] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))


def _result(i: int):
    from piflash.record.result import OperationResult

    return OperationResult(operation="flash", probe_id="sim:bench", target="nrf52840", target_uid=f"{i:016x}",
                           firmware="/fw/app.hex", firmware_sha256="ab" * 32, image_bytes=65536, ok=True,
                           started_at=time.time(), duration=1.0, durations={"connect": 0.1, "program": 0.5},
                           serial=str(1000 + i))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--boards", type=int, default=200)
    ap.add_argument("--block", type=int, default=16)
    ap.add_argument("--queue", type=int, default=600)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)

    from support.pgserver import PgServer, pg_bin

    if pg_bin() is None:
        raise SystemExit("PostgreSQL is not installed: apt-get install postgresql")
    from piflash.firmware.patch import CounterSpec
    from piflash.production.leases import PostgresLeaseSource
    from piflash.record.history import History
    from piflash.record.ledger import Ledger

    server = PgServer()
    work = Path(tempfile.mkdtemp(prefix="ledger-cost-"))
    try:
        hist = History(work / "history.sqlite3")
        bench_id = str(hist.identity)
        ledger = Ledger(server.url)
        uploads = []
        for i in range(args.boards):
            hist.record(_result(i), station="bench")
            t = time.perf_counter()
            ledger.upload("bench", bench_id, hist.sealed_after(ledger.head("bench", bench_id)))
            uploads.append(time.perf_counter() - t)
        source = PostgresLeaseSource(server.url)
        counter = CounterSpec(name="bench", start=1, step=1, end=None)
        leases = []
        for _ in range(max(10, args.boards // args.block)):
            t = time.perf_counter()
            source.lease(counter, "bench", args.block)
            leases.append(time.perf_counter() - t)
        hist2 = History(work / "queue.sqlite3")
        queued_id = str(hist2.identity)
        for i in range(args.queue):
            hist2.record(_result(i), station="queued")
        t = time.perf_counter()
        while True:
            rows = hist2.sealed_after(ledger.head("queued", queued_id))
            if not rows:
                break
            ledger.upload("queued", queued_id, rows)
        queue_s = time.perf_counter() - t
        assert len(ledger.rows("queued")) == args.queue and len(ledger.rows("bench")) == args.boards
    finally:
        server.close()
    upload_ms = statistics.median(uploads) * 1000
    lease_ms = statistics.median(leases) * 1000
    row = {"machine": os.uname().machine, "boards": args.boards, "upload_ms": round(upload_ms, 2),
           "lease_ms": round(lease_ms, 2), "block": args.block,
           "lease_ms_per_board": round(lease_ms / args.block, 3),
           "per_board_ms": round(upload_ms + lease_ms / args.block, 2), "goal_per_board_le_20ms":
           upload_ms + lease_ms / args.block <= 20, "queue_rows": args.queue, "queue_s": round(queue_s, 3)}
    if args.json:
        print(json.dumps(row, indent=1))
    else:
        for k, v in row.items():
            print(f"{k:24} {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
