"""Progress displays for the CLI: rich bars on a terminal, plain lines otherwise.

rich is imported only when a bar is drawn (it costs start-up time on a Pi Zero 2W).
"""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, Dict, Optional, TextIO

from piflash.progress import Phase, ProgressSink

if TYPE_CHECKING:
    from rich.progress import TaskID

_LABELS: Dict[str, str] = {
    Phase.CONNECT: "Connecting",
    Phase.ERASE: "Erasing",
    Phase.PROGRAM: "Programming",
    Phase.VERIFY: "Verifying",
    Phase.RESET: "Resetting",
    "read": "Reading",
}


#: Phases whose bytes go through the probe, so that bytes per second mean something: the
#: program and the verify. An erase works on whole sectors whatever the image's size (and one
#: that erased nothing showed "0.20 s, 193.9 KiB/s"): it gets no rate, live or
#: final; connect and reset have no size.
RATED = (Phase.PROGRAM, Phase.VERIFY, "read")


def _rate(phase: str, nbytes: float, seconds: float) -> str:
    # Under 50 ms the phase skipped most of its bytes: a rate would only mislead.
    if phase not in RATED or seconds < 0.05 or not nbytes:
        return ""
    return f"{nbytes / 1024 / seconds:,.1f} KiB/s"


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
        rate = _rate(phase, self._total.get(phase, 0), took)
        parts = [p for p in (summary, f"{took:.2f} s", rate) if p]
        self._print(f"{_LABELS.get(phase, phase)} done: " + ", ".join(parts))

    def message(self, text: str) -> None:
        self._print(text)


#: Column widths of the rich display, in characters: status mark, phase label, bar, bytes done
#: of total ("1,023.9/1,023.9 KiB" fits), rate ("2,059.6 KiB/s"), elapsed time ("0:00:01").
#: With rich's one-space gaps they take 74 columns: an 80-column terminal (a Pi's console)
#: shows them all. Each phase's detail goes on a line of its own under the label, unless the
#: terminal is at least :data:`BESIDE_WIDTH` wide: then every detail goes after its row. One
#: rule for every row, so details never sit beside some rows and below others.
WIDTHS = {"mark": 1, "label": 11, "bar": 20, "bytes": 17, "rate": 13, "time": 7}
#: Room a detail gets beside its row: the longest the workflow writes ("N sector(s) erased
#: (N B); the others blank or unchanged", "all match: N pages by CRC32 and N B read back before
#: programming") with room to spare.
DETAIL_WIDTH = 80
BESIDE_WIDTH = sum(WIDTHS.values()) + len(WIDTHS) + DETAIL_WIDTH
#: Phases whose rate means something while they run (:data:`RATED`).
LIVE_RATE = RATED


class RichProgress(ProgressSink):
    """rich progress bars with bytes and rate, one per phase. Use as a context manager.

    Each phase is a row: a mark (spinner, then ✓, or ✗ for a phase that failed or never ended),
    the phase, a bar, bytes, rate (program and verify only) and elapsed time (:data:`WIDTHS`), then
    the phase's detail ("all match: 238 pages by CRC32, ...") on the next line, or on the same line
    for every row when the terminal is :data:`BESIDE_WIDTH` wide or more. Phases without a size
    (connect, reset) leave the byte columns empty.

    :param stream: where to draw (a terminal).
    :param console: a rich Console to draw on instead (tests: ``Console(width=80, record=True)``).
    """

    def __init__(self, stream: TextIO = sys.stdout, console=None) -> None:
        from rich.console import Console, Group
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            Progress,
            ProgressColumn,
            SpinnerColumn,
            TextColumn,
            TimeElapsedColumn,
        )
        from rich.table import Column, Table
        from rich.text import Text

        def fixed(name: str, **kw) -> Column:
            return Column(width=WIDTHS[name], no_wrap=True, overflow="crop", **kw)

        class Mark(SpinnerColumn):
            def render(self, task):
                if task.fields.get("failed"):
                    return Text("✗", style="red")
                return super().render(task)

        def sized(column_cls, **kw):
            class Sized(column_cls):
                def render(self, task):
                    return super().render(task) if task.fields.get("sized") else Text("")

            return Sized(**kw)

        class Rate(ProgressColumn):
            """The live rate of program/verify; at the end, the phase's average (none for a chip
            erase or a phase too short to mean anything), as the plain display prints it."""

            def render(self, task):
                if not task.fields.get("sized"):
                    return Text("")
                if task.finished or task.fields.get("failed"):
                    return Text(task.fields.get("rate", ""), style="progress.data.speed")
                speed = task.speed if task.fields.get("live") else None
                return Text(f"{speed / 1024:,.1f} KiB/s" if speed else "", style="progress.data.speed")

        columns = [
            Mark(finished_text=Text("✓", style="green"), table_column=fixed("mark")),
            TextColumn("{task.description}", table_column=fixed("label")),
            sized(BarColumn, bar_width=WIDTHS["bar"], table_column=fixed("bar")),
            sized(DownloadColumn, binary_units=True, table_column=fixed("bytes", justify="right")),
            Rate(table_column=fixed("rate", justify="right")),
            TimeElapsedColumn(table_column=fixed("time")),
        ]
        # One-space gaps between the fixed columns (Table.grid's padding (0, 1) collapses to one).

        class Rows(Progress):
            """Progress drawn task by task: the fixed columns, then the detail beside or below."""

            def get_renderables(self):
                width = console.width  # (not self.console: rich asks before self.live exists)
                parts = []
                for task in self.tasks:
                    if not task.visible:
                        continue
                    grid = Table.grid(padding=(0, 1), collapse_padding=True)
                    for column in self.columns:
                        grid.add_column(
                            **{
                                k: getattr(column.get_table_column(), k)
                                for k in ("width", "no_wrap", "overflow", "justify")
                            }
                        )
                    cells = [column(task) for column in self.columns]
                    detail = Text.from_markup(task.fields.get("summary", ""))
                    beside = bool(detail.plain) and width >= BESIDE_WIDTH
                    if beside:
                        grid.add_column(no_wrap=True, overflow="ellipsis")
                        cells.append(detail)
                    grid.add_row(*cells)
                    parts.append(grid)
                    if detail.plain and not beside:
                        indent = WIDTHS["mark"] + 1
                        below = Text(" " * indent) + detail
                        below.truncate(width, overflow="ellipsis")
                        parts.append(below)
                yield Group(*parts)

        console = self.console = console or Console(file=stream)
        self._progress = Rows(*columns, console=console, transient=False)
        self._tasks: Dict[str, TaskID] = {}
        self._start: Dict[str, float] = {}

    def __enter__(self) -> "RichProgress":
        self._progress.start()
        return self

    def __exit__(self, exc_type, *exc) -> None:
        # A phase that never ended (a failed connect, Ctrl-C) keeps no spinning mark: ✗, stopped.
        for task in self._progress.tasks:
            if not task.finished:
                self._progress.update(task.id, failed=True)
                self._progress.stop_task(task.id)
        self._progress.stop()

    def phase_start(self, phase: str, total: int) -> None:
        self._start[phase] = time.monotonic()
        self._tasks[phase] = self._progress.add_task(
            _LABELS.get(phase, phase),
            total=total or None,
            summary="",
            sized=bool(total),
            live=phase in LIVE_RATE,
            rate="",
        )

    def phase_update(self, phase: str, done: int) -> None:
        task: Optional[TaskID] = self._tasks.get(phase)
        if task is not None:
            self._progress.update(task, completed=done)

    def phase_end(self, phase: str, summary: str = "") -> None:
        task = self._tasks.get(phase)
        if task is None:
            return
        state = self._progress.tasks[task]
        total = state.total
        failed = summary.upper().startswith("FAIL")
        took = time.monotonic() - self._start.get(phase, time.monotonic())
        rate = "" if failed else _rate(phase, total or 0, took)
        style = "red" if failed else "dim"
        self._progress.update(
            task,
            total=total or 1,
            completed=(total or 1) if not failed else state.completed,
            summary=f"[{style}]{escape(summary)}[/]",
            failed=failed,
            rate=rate,
        )
        self._progress.stop_task(task)

    def message(self, text: str) -> None:
        self._progress.console.print(text)


def escape(text: str) -> str:
    """``text`` with rich markup characters escaped (a summary is shown as text, not markup)."""
    from rich.markup import escape as rich_escape

    return rich_escape(text)


def fit_line(text: str, stream: TextIO = sys.stdout) -> str:
    """``text`` wrapped at word boundaries to the terminal's width when ``stream`` is a terminal
    (a long final line wrapped by the terminal itself splits words at 80 columns), unchanged
    otherwise (a pipe or a log keeps one line per message)."""
    import shutil
    import textwrap

    if not stream.isatty():
        return text
    width = shutil.get_terminal_size((80, 24)).columns
    return "\n".join(textwrap.wrap(text, width=width, break_long_words=False, break_on_hyphens=False)) or text


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
