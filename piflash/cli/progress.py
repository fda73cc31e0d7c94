"""Progress displays for the CLI: rich bars on a terminal, plain lines otherwise.

rich is imported only when a bar is drawn (it costs start-up time on a Pi Zero 2W).
"""

from __future__ import annotations

import sys
import time
from typing import Dict, Optional, TextIO

from piflash.progress import Phase, ProgressSink

_LABELS = {Phase.CONNECT: "Connecting", Phase.ERASE: "Erasing", Phase.PROGRAM: "Programming",
           Phase.VERIFY: "Verifying", Phase.RESET: "Resetting"}


def _rate(nbytes: int, seconds: float) -> str:
    # Under 50 ms the phase skipped most of its bytes: a rate would only mislead.
    return f"{nbytes / 1024 / seconds:,.1f} KiB/s" if seconds >= 0.05 and nbytes else ""


class PlainProgress(ProgressSink):
    """One line per phase start and end, for logs, pipes and journald."""

    def __init__(self, stream: TextIO = sys.stdout) -> None:
        self._stream = stream
        self._start: Dict[str, float] = {}
        self._total: Dict[str, int] = {}

    def _print(self, text: str) -> None:
        print(text, file=self._stream, flush=True)

    def phase_start(self, phase: str, total: int) -> None:
        self._start[phase] = time.monotonic()
        self._total[phase] = total
        size = f" {total:,} bytes" if total else ""
        self._print(f"{_LABELS.get(phase, phase)}...{size}")

    def phase_end(self, phase: str, summary: str = "") -> None:
        took = time.monotonic() - self._start.get(phase, time.monotonic())
        rate = _rate(self._total.get(phase, 0), took)
        parts = [p for p in (summary, f"{took:.2f} s", rate) if p]
        self._print(f"{_LABELS.get(phase, phase)} done: " + ", ".join(parts))

    def message(self, text: str) -> None:
        self._print(text)


class RichProgress(ProgressSink):
    """rich progress bars with bytes and rate, one per phase. Use as a context manager."""

    def __init__(self, stream: TextIO = sys.stdout) -> None:
        from rich.console import Console
        from rich.progress import (BarColumn, DownloadColumn, Progress, SpinnerColumn, TextColumn,
                                   TimeElapsedColumn, TransferSpeedColumn)
        from rich.table import Column
        from rich.text import Text

        def sized(column_cls, **kw):
            # Connect and reset have no byte count: leave their byte columns empty.
            class Sized(column_cls):
                def render(self, task):
                    return super().render(task) if task.fields.get("sized") else Text("")
            return Sized(**kw)

        self.console = Console(file=stream)
        self._progress = Progress(
            SpinnerColumn(finished_text="[green]✓", table_column=Column(no_wrap=True, min_width=1)), TextColumn("{task.description}", table_column=Column(no_wrap=True, min_width=11)),
            sized(BarColumn, bar_width=24, table_column=Column(no_wrap=True, min_width=24)),
            sized(DownloadColumn, binary_units=True, table_column=Column(no_wrap=True, min_width=19)),
            sized(TransferSpeedColumn, table_column=Column(no_wrap=True, min_width=10)),
            TimeElapsedColumn(table_column=Column(no_wrap=True, min_width=7)),
            TextColumn("{task.fields[summary]}", table_column=Column(no_wrap=True, overflow="ellipsis")),
            console=self.console, transient=False)
        self._tasks: Dict[str, int] = {}

    def __enter__(self) -> "RichProgress":
        self._progress.start()
        return self

    def __exit__(self, *exc) -> None:
        self._progress.stop()

    def phase_start(self, phase: str, total: int) -> None:
        self._tasks[phase] = self._progress.add_task(_LABELS.get(phase, phase), total=total or None,
                                                     summary="", sized=bool(total))

    def phase_update(self, phase: str, done: int) -> None:
        task: Optional[int] = self._tasks.get(phase)
        if task is not None:
            self._progress.update(task, completed=done)

    def phase_end(self, phase: str, summary: str = "") -> None:
        task = self._tasks.get(phase)
        if task is None:
            return
        total = self._progress.tasks[task].total
        failed = summary.startswith("FAIL")
        style = "[red]" if failed else "[dim]"
        self._progress.update(task, total=total or 1, completed=(total or 1) if not failed
                              else self._progress.tasks[task].completed, summary=f"{style}{summary}")
        self._progress.stop_task(task)

    def message(self, text: str) -> None:
        self._progress.console.print(text)


def make_progress(quiet: bool, json_mode: bool):
    """Choose the display: none when quiet, rich bars on a terminal, plain lines otherwise.

    With ``--json`` the display goes to stderr so stdout carries only the JSON object.
    """
    if quiet:
        return None
    stream = sys.stderr if json_mode else sys.stdout
    if stream.isatty():
        return RichProgress(stream)
    return PlainProgress(stream)
