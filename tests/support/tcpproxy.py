"""A TCP proxy for the ledger's network-cut tests: it forwards 127.0.0.1:PORT to a server, and
:meth:`TcpProxy.cut` drops every connection through it and refuses new ones (the listening
socket is closed) until :meth:`TcpProxy.mend`: what a station sees when the line's network
goes away and comes back, without touching the database server itself."""

from __future__ import annotations

import selectors
import socket
import threading
from typing import List, Tuple


class TcpProxy:
    """Forward ``127.0.0.1:port`` to ``(host, target_port)``. :ivar port: the proxy's port."""

    def __init__(self, target_port: int, host: str = "127.0.0.1") -> None:
        self.target = (host, target_port)
        self._lock = threading.Lock()
        self._pairs: List[Tuple[socket.socket, socket.socket]] = []
        self._listener = self._listen(0)
        self.port = self._listener.getsockname()[1]
        self.cuts = 0
        self._stop = threading.Event()
        threading.Thread(target=self._accept_loop, name="proxy accept", daemon=True).start()

    def _listen(self, port: int) -> socket.socket:
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
        s.listen(64)
        s.settimeout(0.1)
        return s

    def _accept_loop(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                listener = self._listener
            if listener is None:
                self._stop.wait(0.05)
                continue
            try:
                client, _ = listener.accept()
            except (socket.timeout, OSError):
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            with self._lock:
                if self._listener is None:          # cut while connecting
                    client.close()
                    upstream.close()
                    continue
                self._pairs.append((client, upstream))
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()

    def _pump(self, a: socket.socket, b: socket.socket) -> None:
        sel = selectors.DefaultSelector()
        try:
            a.setblocking(False)
            b.setblocking(False)
            sel.register(a, selectors.EVENT_READ, b)
            sel.register(b, selectors.EVENT_READ, a)
            while True:
                for key, _ in sel.select(0.5):
                    data = key.fileobj.recv(65536)
                    if not data:
                        return
                    key.data.setblocking(True)
                    key.data.sendall(data)
                    key.data.setblocking(False)
                if self._stop.is_set():
                    return
        except OSError:
            return
        finally:
            sel.close()
            self._drop(a, b)

    def _drop(self, a: socket.socket, b: socket.socket) -> None:
        with self._lock:
            if (a, b) in self._pairs:
                self._pairs.remove((a, b))
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def cut(self) -> int:
        """Drop every connection and refuse new ones until :meth:`mend`; returns how many
        connections were dropped."""
        with self._lock:
            listener, self._listener = self._listener, None
            pairs, self._pairs = list(self._pairs), []
        if listener is not None:
            listener.close()
        for a, b in pairs:
            for s in (a, b):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        self.cuts += 1
        return len(pairs)

    def mend(self) -> None:
        """Accept connections again, on the same port."""
        with self._lock:
            if self._listener is None:
                self._listener = self._listen(self.port)

    def close(self) -> None:
        self.cut()
        self._stop.set()
