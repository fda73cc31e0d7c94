"""A production line's operator, for the ledger's line test and benchmark: puts a new simulated
board into a bay whenever its station finished the one there (a row for the bay's probe
appeared in the station's history), after a moment's handling; every ``faulty_every``-th board
of a bay has a flash bit that will not program, so it fails verify."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path
from typing import Dict, Sequence

#: The fault of a faulty board: a bit of the test firmware's first page stuck (it fails verify).
FLIP = {"bit_flip": {"address": 0x1003, "bit": 2}}


def finished_by_slot(history: Path) -> Dict[str, int]:
    """{probe: finished rows} of a station's history (a plain sqlite3 reader; {} before the
    history exists)."""
    if not history.exists():
        return {}
    db = sqlite3.connect(f"file:{history}?mode=ro", uri=True, timeout=30)
    try:
        return dict(db.execute("SELECT slot, count(*) FROM operations WHERE outcome != 'open' GROUP BY slot"))
    except sqlite3.OperationalError as exc:           # table not created yet
        if "no such table" in str(exc):
            return {}
        raise
    finally:
        db.close()


class Feeder:
    """:param store: the :class:`piflash.sim.SimStore`. :param bays: {history path: bay names}
    (each bay is the simulated board behind the probe ``sim:BAY``). :param handling: seconds
    between a board's row and its replacement. :param faulty_every: every n-th board of a bay is
    faulty (0: none)."""

    def __init__(self, store, bays: Dict[Path, Sequence[str]], handling: float = 0.5,
                 faulty_every: int = 5) -> None:
        self.store, self.bays, self.handling, self.faulty_every = store, bays, handling, faulty_every
        self.seen = {bay: 0 for names in bays.values() for bay in names}
        self.swaps = {bay: 0 for bay in self.seen}
        self._due: dict = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="feeder", daemon=True)

    def start(self) -> "Feeder":
        self.thread.start()
        return self

    def close(self) -> None:
        self.stop.set()
        self.thread.join(10)

    def _run(self) -> None:
        while not self.stop.wait(0.05):
            for history, names in self.bays.items():
                got = finished_by_slot(history)
                for bay in names:
                    done = got.get(f"sim:{bay}", 0)
                    if done <= self.seen[bay]:
                        continue
                    if time.monotonic() < self._due.setdefault(bay, time.monotonic() + self.handling):
                        continue
                    del self._due[bay]
                    self.seen[bay] = done
                    self.swaps[bay] += 1
                    faulty = self.faulty_every and self.swaps[bay] % self.faulty_every == 0
                    self.store.swap(bay, faults=FLIP if faulty else None)


class OneOffUser:
    """A person at another machine of the line running one-off ``piflash flash`` commands on a
    simulated board of their own, with a history of their own: every ``ledger_every``-th run
    with ``--ledger URL`` (to go to the ledger), the others without (demo runs that must stay at
    home). ``runs`` counts the commands run, ``asked`` those run with the ledger.

    :param history: the person's history file (``PIFLASH_HISTORY``).
    :param bay: the simulated board (``sim:BAY``), created by the caller.
    :param firmware: the image to flash. :param url: the ledger's URL.
    """

    def __init__(self, history: Path, bay: str, firmware: Path, url: str, ledger_every: int = 2,
                 pause: float = 0.5) -> None:
        import os

        self.history, self.bay, self.firmware, self.url = history, bay, firmware, url
        self.ledger_every, self.pause = ledger_every, pause
        self.env = dict(os.environ, PIFLASH_HISTORY=str(history))
        self.env.pop("PIFLASH_LEDGER", None)
        self.env.pop("PIFLASH_STATION", None)
        self.runs = self.asked = 0
        self.failed: list = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name=f"one-off {bay}", daemon=True)

    def start(self) -> "OneOffUser":
        self.thread.start()
        return self

    def close(self) -> None:
        self.stop.set()
        self.thread.join(120)

    def _run(self) -> None:
        import subprocess
        import sys

        while not self.stop.wait(self.pause):
            with_ledger = (self.runs + 1) % self.ledger_every == 0
            cmd = [sys.executable, "-m", "piflash", "flash", str(self.firmware), "-u", f"sim:{self.bay}",
                   "-t", "nrf52840", "-q"] + (["--ledger", self.url] if with_ledger else [])
            proc = subprocess.run(cmd, env=self.env, capture_output=True, text=True, timeout=300)
            self.runs += 1
            self.asked += with_ledger
            if proc.returncode != 0:
                self.failed.append(proc.stderr[-500:])
