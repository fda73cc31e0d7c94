"""Tables the commands print (``probes``, ``info``, ``ledger report``): rich tables that fit the
width of the output, 80 columns when nothing says otherwise (a Pi's console; a pipe), lines
trimmed of rich's padding. rich is imported inside :func:`print_table` only."""

from __future__ import annotations

import os
import sys
from typing import Any, Optional, Sequence, Tuple

import click

#: The width of an output that has none (a pipe, a file, no ``COLUMNS``): a Pi's console.
DEFAULT_WIDTH = 80


def output_width(stream=None) -> Optional[int]:
    """The width to fit, in characters: ``COLUMNS`` when it is set (as a shell sets it for a
    script, and as tests ask for a width), else the terminal's when ``stream`` (default stdout) is
    one, else None (no terminal: the caller chooses).

    A ``COLUMNS`` that is not a positive number is ignored.
    """
    from piflash import settings

    text = settings.COLUMNS.value() or ""
    if text.isdigit() and int(text) > 0:
        return int(text)
    stream = sys.stdout if stream is None else stream
    try:
        if stream.isatty():
            return os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, OSError, ValueError):
        pass
    return None


def echo_wrapped(text: str, indent: str = "  ") -> None:
    """Print ``text`` (one message, str) folded at word boundaries to :func:`output_width` (80
    columns when there is none), its continuation lines indented by ``indent``."""
    import textwrap

    width = output_width() or DEFAULT_WIDTH
    lead = text[: len(text) - len(text.lstrip(" "))]
    click.echo(
        textwrap.fill(
            text,
            width=width,
            initial_indent="",
            subsequent_indent=lead + indent,
            break_on_hyphens=False,
            break_long_words=False,
        )
    )


def print_table(
    columns: Sequence[Tuple[str, dict]],
    rows: Sequence[Sequence[Any]],
    width: Optional[int] = None,
) -> None:
    """Print ``rows`` under ``columns`` as one rich table, no borders, two spaces between columns,
    at most ``width`` characters a line (default :func:`output_width`, else :data:`DEFAULT_WIDTH`):
    rich wraps the columns that may wrap (``no_wrap`` not set) to fit. Colour only on a terminal.

    :param columns: ``(header, options)`` per column; options go to ``rich.table.Table.add_column``
        (``justify``, ``no_wrap``, ``min_width``, ``overflow``...).
    :param rows: each row's cells: str, or a ``rich.text.Text`` for a styled cell.
    """
    from rich.console import Console
    from rich.table import Table

    width = width or output_width() or DEFAULT_WIDTH
    console = Console(width=width, no_color=not sys.stdout.isatty(), highlight=False, soft_wrap=False)
    table = Table(box=None, header_style="bold", pad_edge=False, padding=(0, 1))
    for header, options in columns:
        table.add_column(header, **options)
    for row in rows:
        table.add_row(*row)
    with console.capture() as captured:  # rich pads each line to the full width: trim them
        console.print(table)
    for line in captured.get().splitlines():
        click.echo(line.rstrip(), color=sys.stdout.isatty())
