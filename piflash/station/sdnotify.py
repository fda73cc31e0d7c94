"""systemd's notify protocol (sd_notify(3)), with the standard library only.

A service of ``Type=notify`` tells systemd it is ready, what it is doing and that it is alive
by sending datagrams of ``NAME=value`` lines to the AF_UNIX socket named in ``$NOTIFY_SOCKET``
(a leading ``@`` means Linux's abstract namespace: the name starts with a NUL byte). Outside
systemd the variable is unset and every call here does nothing.

What the station sends (docs/station.md lists the STATUS texts):

- ``READY=1`` once the config is loaded and the workers started;
- ``STATUS=...`` whenever a probe's state changes ("waiting for board", "flashing 42%",
  "PASS <target unique ID> #<history row>", "FAIL <target unique ID> <reason>");
- ``WATCHDOG=1`` every ``$WATCHDOG_USEC``/2 while the workers are alive;
- ``RELOADING=1`` (with ``MONOTONIC_USEC``) then ``READY=1`` around a SIGHUP reload;
- ``STOPPING=1`` on shutdown.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from typing import Mapping, Optional

from piflash import settings

LOG = logging.getLogger(__name__)


class Notifier:
    """Sends notify messages to systemd, or nothing when not run by systemd.

    :param environ: where to read ``NOTIFY_SOCKET``, ``WATCHDOG_USEC`` and ``WATCHDOG_PID``
        (default: the environment, through :mod:`piflash.settings`).

    Sending never raises: a failure is logged once at WARNING, then at DEBUG.
    Safe to use from several threads.
    """

    def __init__(self, environ: Optional[Mapping[str, str]] = None) -> None:
        env = (
            environ
            if environ is not None
            else settings.environment(settings.NOTIFY_SOCKET, settings.WATCHDOG_USEC, settings.WATCHDOG_PID)
        )
        addr = env.get("NOTIFY_SOCKET") or ""
        if addr.startswith("@"):
            addr = "\0" + addr[1:]
        self._addr: Optional[str] = addr if addr and addr[0] in ("/", "\0") else None
        self._sock: Optional[socket.socket] = None
        self._lock = threading.Lock()
        self._warned = False
        self._watchdog = _watchdog_seconds(env)

    @property
    def enabled(self) -> bool:
        """Whether ``$NOTIFY_SOCKET`` names a socket (we run under systemd with Type=notify)."""
        return self._addr is not None

    @property
    def watchdog_interval(self) -> Optional[float]:
        """systemd's watchdog timeout in seconds (``WatchdogSec=``), or None when not asked for
        (unset, or ``$WATCHDOG_PID`` names another process). Ping at half of it."""
        return self._watchdog

    def send(self, *lines: str) -> bool:
        """Send one datagram made of ``lines`` (``"READY=1"``, ...). Returns True if sent."""
        if self._addr is None:
            return False
        data = "\n".join(lines).encode("utf-8", "replace")
        with self._lock:
            try:
                if self._sock is None:
                    self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
                self._sock.sendto(data, self._addr)
                return True
            except OSError as exc:
                LOG.log(
                    logging.DEBUG if self._warned else logging.WARNING,
                    "cannot notify systemd at %r: %s",
                    self._addr,
                    exc,
                )
                self._warned = True
                return False

    def ready(self, status: Optional[str] = None) -> bool:
        """``READY=1`` (with a STATUS line if given)."""
        return self.send("READY=1", *([f"STATUS={_one_line(status)}"] if status else []))

    def status(self, text: str) -> bool:
        """``STATUS=text`` (newlines become spaces: one status line)."""
        return self.send(f"STATUS={_one_line(text)}")

    def watchdog(self) -> bool:
        """``WATCHDOG=1``: the service is alive."""
        return self.send("WATCHDOG=1")

    def reloading(self) -> bool:
        """``RELOADING=1`` with ``MONOTONIC_USEC`` (systemd >= 253 wants it; older ones ignore it)."""
        usec = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
        return self.send("RELOADING=1", f"MONOTONIC_USEC={usec}")

    def stopping(self, status: Optional[str] = None) -> bool:
        """``STOPPING=1`` (with a STATUS line if given)."""
        return self.send("STOPPING=1", *([f"STATUS={_one_line(status)}"] if status else []))

    def close(self) -> None:
        """Close the socket (sending again reopens it)."""
        with self._lock:
            if self._sock is not None:
                self._sock.close()
                self._sock = None


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _watchdog_seconds(env: Mapping[str, str]) -> Optional[float]:
    try:
        usec = int(env.get("WATCHDOG_USEC", ""))
    except ValueError:
        return None
    pid = env.get("WATCHDOG_PID")
    if usec <= 0 or (pid and pid.strip() != str(os.getpid())):
        return None
    return usec / 1e6


__all__ = ["Notifier"]
