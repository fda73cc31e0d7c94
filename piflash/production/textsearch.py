"""Search a board's output for a user's regular expression, bounded in time and memory.

A boot check ``rtt:REGEX`` searches the text a board prints for a pattern its user wrote. Python's
``re`` backtracks: a pattern with a nested repeat such as ``(a+)+$`` takes 2^n steps on n ``a``
characters not followed by an end, and ``re`` has no timeout and cannot be interrupted, not by a
signal handler, not by another thread (the search holds the GIL). A board's output is untrusted
input, so the search runs in a child process: the interpreter piflash runs on, isolated (``-I``,
no site: it imports only ``re``), given the pattern once and then each new piece of text. It
keeps the last :data:`~piflash.limits.BOOT_TEXT_WINDOW` characters and answers whether the
pattern matches anywhere in them. An answer that takes more than
:data:`~piflash.limits.PATTERN_SEARCH_MAX_S` seconds of wall time ends the child
(:class:`SearchTooSlow`): the check fails in bounded time, and the pattern is named.

The child costs one interpreter start per check (37 ms to its first answer and 9.7 MiB of RSS on
the development machine, x86_64 at load 5; medians of 9) and a pipe round
trip per piece of text (64 us); the text the board prints is never held whole, only its window.
Standard library only.
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
from typing import Optional

from piflash.limits import BOOT_TEXT_WINDOW, PATTERN_SEARCH_MAX_S

__all__ = ["TextSearch", "SearchTooSlow"]

#: The child: read a 4-byte big-endian length and that many UTF-8 bytes; the first message is
#: the pattern, each next one text to append. Answer b"1" (matches) or b"0" per text.
_CHILD = r"""
import re, sys
inp, out = sys.stdin.buffer, sys.stdout.buffer
def message():
    head = inp.read(4)
    if len(head) < 4:
        return None
    size = int.from_bytes(head, "big")
    data = inp.read(size)
    return None if len(data) < size else data.decode("utf-8")
pattern = re.compile(message())
window = int(sys.argv[1])
text = ""
while True:
    piece = message()
    if piece is None:
        break
    text = (text + piece)[-window:]
    out.write(b"1" if pattern.search(text) else b"0")
    out.flush()
"""


class SearchTooSlow(Exception):
    """The search did not answer within :data:`~piflash.limits.PATTERN_SEARCH_MAX_S` seconds
    (the pattern backtracks without end on this text), or its child process ended.

    :ivar characters: how many characters the window held (int).
    """

    def __init__(self, message: str, characters: int) -> None:
        super().__init__(message)
        self.characters = characters


class TextSearch:
    """``pattern`` (a ``re`` pattern, already checked to compile) searched in the last
    :data:`~piflash.limits.BOOT_TEXT_WINDOW` characters fed to :meth:`feed`, in a child process.

    Use as a context manager, or call :meth:`close`: the child is ended either way.

    :param pattern: the regular expression (str).
    :param limit: seconds of wall time one answer may take (float, default
        :data:`~piflash.limits.PATTERN_SEARCH_MAX_S`).
    :raises OSError: the child could not be started (no memory, no processes left).
    """

    def __init__(self, pattern: str, limit: float = PATTERN_SEARCH_MAX_S) -> None:
        self.pattern = pattern
        self.limit = limit
        self._held = 0
        self._proc: Optional[subprocess.Popen] = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _CHILD, str(BOOT_TEXT_WINDOW)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self._send(pattern)

    def __enter__(self) -> "TextSearch":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _send(self, text: str) -> None:
        data = text.encode("utf-8", "surrogatepass")
        assert self._proc is not None and self._proc.stdin is not None
        try:
            self._proc.stdin.write(len(data).to_bytes(4, "big") + data)
            self._proc.stdin.flush()
        except (BrokenPipeError, ValueError):  # the child ended (killed, out of memory)
            self.close()
            raise SearchTooSlow("the pattern search ended unexpectedly", self._held) from None

    def feed(self, text: str) -> bool:
        """Append ``text`` (str) to the window and search it.

        :returns: True when the pattern matches somewhere in the window.
        :raises SearchTooSlow: no answer within :attr:`limit` seconds (the child is ended), or
            the child ended; every later call raises it too.
        """
        if self._proc is None:
            raise SearchTooSlow("the pattern search was stopped", self._held)
        self._held = min(BOOT_TEXT_WINDOW, self._held + len(text))
        self._send(text)
        assert self._proc.stdout is not None
        ready, _, _ = select.select([self._proc.stdout], [], [], self.limit)
        answer = os.read(self._proc.stdout.fileno(), 1) if ready else b""
        if answer not in (b"0", b"1"):
            self.close()
            if not ready:
                raise SearchTooSlow(f"searching {self._held:,} characters took more than {self.limit:g} s", self._held)
            raise SearchTooSlow("the pattern search ended unexpectedly", self._held)
        return answer == b"1"

    def close(self) -> None:
        """End the child (killed: a search in progress cannot be asked to stop) and reap it."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        proc.kill()
        proc.wait()
        for stream in (proc.stdin, proc.stdout):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
