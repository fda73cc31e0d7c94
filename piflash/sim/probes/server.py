"""Serve a simulated board over pyOCD's remote probe protocol.

Uses pyOCD's own server (``pyocd.probe.tcp_probe_server.DebugProbeServer``), so the stock client
works unchanged: ``pyocd flash -t nrf52840 -u remote:127.0.0.1:PORT fw.hex`` (the client probe
type cannot tell pyOCD the target type, hence ``-t``).

pyOCD's server binds either to ``localhost`` (its ``serve_local_only`` option) or to all
interfaces; :func:`start_server` therefore accepts ``host`` values of ``127.0.0.1`` /
``localhost`` (local only) and ``0.0.0.0`` / ``""`` (all interfaces).
"""

from __future__ import annotations

import threading
import time
from typing import Callable, Optional

from pyocd.core import exceptions
from pyocd.core.session import Session
from pyocd.probe.shared_probe_proxy import SharedDebugProbeProxy
from pyocd.probe.tcp_probe_server import DebugProbeServer

from piflash.sim.probes.simprobe import SimProbe
from piflash.sim.store import SimStore, auto_target_for_name

__all__ = ["SimProbeServer", "start_server", "serve"]

_LOCAL_HOSTS = ("127.0.0.1", "localhost")
_ALL_HOSTS = ("0.0.0.0", "")


class ExclusiveProbeProxy(SharedDebugProbeProxy):
    """Serves the probe to one client connection at a time, as a USB probe serves one process.

    pyOCD's ``SharedDebugProbeProxy`` lets every client open and drive the probe at once (for a
    debugger and a flash tool side by side); two flash tools then reset and program the same
    target in turns and both fail with misleading errors. Here the first client connection to
    open the probe owns it until it closes it or its connection ends; another client's ``open``
    (or ``connect``) is refused with ``ProbeError("probe ... is in use by another client ...")``,
    which reaches that client as status PROBE_ERROR with this text. pyOCD's server handles each connection in its
    own thread (``socketserver.ThreadingTCPServer``), so the owner is that thread; a connection
    that ended without closing the probe releases it to the next client.
    """

    def __init__(self, probe) -> None:
        super().__init__(probe)
        self._owner: Optional[threading.Thread] = None
        self._owner_lock = threading.Lock()

    def _busy(self) -> "exceptions.ProbeError":
        return exceptions.ProbeError(
            "probe %s is in use by another client of this probe server" % self._probe.unique_id
        )

    def _is_owner(self) -> bool:
        return self._owner is threading.current_thread()

    def open(self) -> None:
        with self._owner_lock:
            owner = self._owner
            if owner is not None and owner is not threading.current_thread():
                if owner.is_alive():
                    raise self._busy()
                self._release()  # the owner's connection ended without closing
            self._owner = threading.current_thread()
        super().open()

    def _release(self) -> None:
        try:
            if self._connect_count:
                self._probe.disconnect()
            if self._open_count:
                self._probe.close()
        except exceptions.Error:
            pass
        self._connect_count = self._open_count = 0
        self._owner = None

    def close(self) -> None:
        if not self._is_owner():
            return  # a refused client closing what it never opened
        super().close()
        if self._open_count <= 0:
            self._open_count, self._owner = 0, None

    def connect(self, protocol=None) -> None:
        if not self._is_owner():
            raise self._busy()
        super().connect(protocol)

    def disconnect(self) -> None:
        if self._is_owner():
            super().disconnect()


class SimProbeServer:
    """A running remote-probe server for one board (returned by :func:`start_server`).

    :ivar board_name: The served board; :ivar host: bind host; :ivar port: bound TCP port.
    """

    def __init__(self, server: DebugProbeServer, probe: SimProbe, host: str, port: int) -> None:
        self._server = server
        self.probe = probe
        self.board_name = probe.board_name
        self.host = host
        self.port = port

    def stop(self) -> None:
        """Stop serving and close the probe (saving the board) if a client left it open."""
        try:
            self._server.stop()
        finally:
            if self.probe.is_open:
                self.probe.close()

    def __enter__(self) -> "SimProbeServer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_server(
    board_name: str,
    host: str = "127.0.0.1",
    port: int = 0,
    target: Optional[str] = None,
    store: Optional[SimStore] = None,
) -> SimProbeServer:
    """Start serving board ``board_name`` in a background thread and return at once.

    :param board_name: Board to serve. Created if missing, with ``target`` or the target type
        implied by the name (``nrf52840``, ``nrf52840-2``, ...).
    :param host: ``"127.0.0.1"``/``"localhost"`` or ``"0.0.0.0"``/``""`` (see module doc).
    :param port: TCP port; 0 picks a free one (read it from the result's ``port``).
    :param target: Expected/creation target type (one of ``SIM_TARGETS``), or None.
    :param store: Store to use (default ``SimStore()``).
    :raises ValueError: Unsupported host, unknown board without a usable target type, or the
        board's target type differs from ``target``.
    :raises OSError: The port cannot be bound.
    """
    if host in _LOCAL_HOSTS:
        local_only = True
    elif host in _ALL_HOSTS:
        local_only = False
    else:
        raise ValueError(
            "pyOCD's probe server binds to localhost or to all interfaces; use host 127.0.0.1 or 0.0.0.0, not %r" % host
        )
    store = store if store is not None else SimStore()
    if store.exists(board_name):
        info = store.get(board_name)
        if target is not None and info.target != target:
            raise ValueError("board %r is a %s, not a %s" % (board_name, info.target, target))
    else:
        target = target or auto_target_for_name(board_name)
        if target is None:
            raise ValueError("no simulated board %r; give its target type to create it" % board_name)
        info = store.create(board_name, target)
    probe = SimProbe(board_name, store, info.target)
    session = Session(None, no_config=True, serve_local_only=local_only)
    server = DebugProbeServer(session, ExclusiveProbeProxy(probe), port, local_only)
    server.start()
    deadline = time.monotonic() + 5.0
    while server.port == 0 and time.monotonic() < deadline:  # set by the server thread
        time.sleep(0.005)
    return SimProbeServer(server, probe, "127.0.0.1" if local_only else "0.0.0.0", server.port)


def serve(
    board_name: str,
    host: str = "127.0.0.1",
    port: int = 0,
    target: Optional[str] = None,
    on_ready: Optional[Callable[[SimProbeServer], None]] = None,
    stop_event: Optional[threading.Event] = None,
    store: Optional[SimStore] = None,
) -> int:
    """Serve board ``board_name`` until interrupted; returns the port that was served.

    Arguments as for :func:`start_server`, plus:

    :param on_ready: Called once listening, with the :class:`SimProbeServer` (``.port`` is the
        bound port). Default: print ``serving sim:NAME on HOST:PORT`` to stdout (flushed).
    :param stop_event: Stop when this event is set (default: only KeyboardInterrupt stops).
    :raises ValueError: / OSError: as :func:`start_server`.
    """
    srv = start_server(board_name, host, port, target, store)
    try:
        if on_ready is not None:
            on_ready(srv)
        else:
            print("serving sim:%s on %s:%d" % (srv.board_name, srv.host, srv.port), flush=True)
        while stop_event is None or not stop_event.is_set():
            if stop_event is None:
                time.sleep(0.5)
            else:
                stop_event.wait(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        srv.stop()
    return srv.port
