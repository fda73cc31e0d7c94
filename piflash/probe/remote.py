"""``remote:HOST:PORT`` probes (pyOCD's remote probe protocol) with a checked address and bounded waits.

pyOCD's client (``pyocd/probe/tcp_client_probe.py``) waits for each reply in
``ClientSocket.readline`` (``pyocd/utility/sockets.py``), which retries its 0.1 s socket timeout
forever and spins on a closed connection: a server that accepts and never answers hangs the
client for good. pyOCD has no session option for it, so piflash builds its remote probes
itself: :class:`RemoteProbe` is pyOCD's ``TCPClientProbe`` (a public class, subclassed) reading
replies through :class:`BoundedSocket`, which gives up after :data:`REPLY_TIMEOUT` seconds
without a complete reply line and raises :class:`~piflash.errors.ProbeTimeoutError`.

pyOCD is imported inside the functions.
"""

from __future__ import annotations

import re
import socket
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Dict, Optional, Tuple, Type, Union

if TYPE_CHECKING:
    from pyocd.probe.debug_probe import DebugProbe
    from pyocd.probe.tcp_client_probe import TCPClientProbe
    from pyocd.utility.sockets import ClientSocket

    from piflash.probe.selector import ProbeSelector

from piflash import settings
from piflash.errors import ProbeSyntaxError, ProbeTimeoutError  # noqa: F401  (ProbeSyntaxError: raised here)
from piflash.probe.selector import PROBE_KINDS, kind_of, parse_remote_address
from piflash.probe.selector import REMOTE_DEFAULT_PORT as DEFAULT_PORT  # noqa: F401  (pyOCD's default)

#: Prefix of a remote probe's unique ID (pyOCD's ``TCPClientProbePlugin`` name).
PREFIX = "remote:"
#: Requests of pyOCD's remote probe protocol (``pyocd/probe/tcp_probe_server.py``) that drive the
#: SWD wire or the target's reset line: a reply to one of them means the server reached the board.
#: The others (``hello``, ``readprop``, ``open``, ``lock``, ``set_clock``...) only talk to the
#: server and its probe.
TARGET_REQUESTS = frozenset(
    {
        "swj_sequence",
        "swd_sequence",
        "jtag_sequence",
        "reset",
        "assert_reset",
        "read_dp",
        "write_dp",
        "read_ap",
        "write_ap",
        "read_ap_multiple",
        "write_ap_multiple",
        "read_mem",
        "write_mem",
        "read_block32",
        "write_block32",
        "read_block8",
        "write_block8",
    }
)
#: Seconds to wait for the TCP connection to the server (pyOCD's own ``ClientSocket`` default is 10 s).
CONNECT_TIMEOUT = 5.0
#: Seconds to wait for one reply. Every request of the protocol is one short probe operation
#: (a register or a memory block of at most a few KiB); the slowest seen on the simulated
#: board over loopback is under 0.1 s, a real probe over a LAN a few tens of ms. Overridden by
#: ``$PIFLASH_PROBE_TIMEOUT`` (seconds): this is that setting's default, declared in :mod:`piflash.settings`.
REPLY_TIMEOUT = settings.PIFLASH_PROBE_TIMEOUT.default
#: The variable's name.
TIMEOUT_ENV = settings.PIFLASH_PROBE_TIMEOUT.name
_REQUEST_NAME = re.compile(rb'"request": "([a-z0-9_]+)"')


def is_remote(unique_id: Union[str, ProbeSelector, None]) -> bool:
    """Whether ``unique_id`` (str, a :class:`~piflash.probe.ProbeSelector`, or None) names a
    remote probe (``remote:...``)."""
    if not unique_id:
        return False
    kind = unique_id.kind if hasattr(unique_id, "kind") else kind_of(str(unique_id))
    return kind is PROBE_KINDS["remote"]


def parse_remote(unique_id: Union[str, ProbeSelector]) -> Tuple[str, int]:
    """Split ``remote:HOST[:PORT]`` (str or selector) into (host, port), as pyOCD will read it
    (:func:`piflash.probe.selector.parse_remote_address`).

    :raises ProbeSyntaxError: (exit 2) no host, or a port that is not a number in 1..65535.
    """
    return parse_remote_address(str(unique_id))


def reply_timeout() -> float:
    """Seconds to wait for one reply: ``$PIFLASH_PROBE_TIMEOUT`` or :data:`REPLY_TIMEOUT`.

    :raises ProbeSyntaxError: the variable is not a positive number.
    """
    return float(settings.PIFLASH_PROBE_TIMEOUT.value())


def _socket_class() -> Type[ClientSocket]:
    from pyocd.utility.sockets import ClientSocket

    class BoundedSocket(ClientSocket):
        """pyOCD's ``ClientSocket`` whose ``readline`` gives up after ``reply_timeout`` seconds.

        After a timeout the connection is dead: later writes raise at once, so closing the
        session does not wait a second time.
        """

        def __init__(self, host: str, port: int, reply_timeout: float) -> None:
            super().__init__(host, port, timeout=CONNECT_TIMEOUT)  # type: ignore[no-untyped-call]
            self.reply_timeout = reply_timeout
            self.address = f"{host}:{port}"
            self.dead = False
            #: Whether the server has answered a request that reaches the target
            #: (:data:`TARGET_REQUESTS`): until then a silence is a refusal before the board.
            self.reached_target = False
            self._request: Optional[bytes] = None  # the request awaiting its reply

        def timeout_error(self) -> ProbeTimeoutError:
            exc = ProbeTimeoutError(
                f"the probe server at {self.address} stopped answering: no reply within {self.reply_timeout:g} s",
                self.reply_timeout,
                hint=f"is a pyOCD probe server ('piflash sim serve', 'pyocd server') listening at "
                f"{self.address}, and not stuck? Restart it and try again "
                f"(${TIMEOUT_ENV} sets the wait, in seconds)",
            )
            exc.reached_target = self.reached_target
            return exc

        def write(self, data: bytes) -> Any:
            if self.dead:
                raise self.timeout_error()
            # pyOCD sends one JSON request per line: {"id": N, "request": "read_dp", ...}
            match = _REQUEST_NAME.search(data)
            self._request = match.group(1) if match else None
            return super().write(data)  # type: ignore[no-untyped-call]

        def readline(self) -> bytes:
            from pyocd.core.exceptions import ProbeDisconnected

            deadline = time.monotonic() + self.reply_timeout
            while True:
                end = self._buffer.find(b"\n")
                if end != -1:
                    line = bytes(self._buffer[: end + 1])
                    del self._buffer[: end + 1]
                    if self._request is not None and self._request.decode() in TARGET_REQUESTS:
                        self.reached_target = True
                    return line
                if self.dead or time.monotonic() > deadline:
                    self.dead = True
                    raise self.timeout_error()
                try:
                    data = self.read()  # type: ignore[no-untyped-call]
                except socket.timeout:
                    continue
                if not data:
                    raise ProbeDisconnected(f"the probe server at {self.address} closed the connection")
                self._buffer += data

    return BoundedSocket


_CLASSES: Dict[str, type] = {}  # "probe": RemoteProbe, made on first use


def _probe_class() -> Callable[[str, float], TCPClientProbe]:
    if "probe" in _CLASSES:
        return _CLASSES["probe"]
    from pyocd.probe.tcp_client_probe import TCPClientProbe

    socket_class = _socket_class()

    class RemoteProbe(TCPClientProbe):
        """pyOCD's remote probe client reading its replies through a ``BoundedSocket``.

        :param address: ``HOST:PORT`` (already checked by :func:`parse_remote`).
        :param reply_timeout: seconds to wait for one reply.
        """

        def __init__(self, address: str, reply_timeout: float) -> None:
            super().__init__(address)  # type: ignore[no-untyped-call]
            host, _, port = address.rpartition(":")
            # TCPClientProbe keeps its connection in ``_socket`` and reads every reply from it
            # (``_perform_request_without_raise``): this subclass gives it one whose wait ends.
            self._socket = socket_class(host, int(port), reply_timeout)
            self._held = 0
            self._held_guard = threading.RLock()

        def lock(self) -> None:
            """Take the server's probe lock (nested locks send one request), counting only the
            locks that were granted.

            :raises ProbeTimeoutError: the server did not answer the lock request."""
            with self._held_guard:
                super().lock()  # type: ignore[no-untyped-call]
                self._held += 1

        def unlock(self) -> None:
            """Release one granted lock; nothing when none is held.

            pyOCD's ``@locked`` (pyocd/utility/concurrency.py) calls ``unlock()`` in a
            ``finally`` even when ``lock()`` raised, and ``TCPClientProbe.unlock`` asserts a
            positive count: after a lock request that timed out, that AssertionError replaced
            the timeout (seen as "unexpected error inside pyOCD (AssertionError)" when a server
            went silent at a lock request).

            :raises ProbeTimeoutError: the server did not answer the unlock request."""
            with self._held_guard:
                if self._held == 0:
                    return
                self._held -= 1
                super().unlock()  # type: ignore[no-untyped-call]

        @property
        def server_address(self) -> str:
            """``HOST:PORT`` of the probe server."""
            address: str = self._socket.address
            return address

    _CLASSES["probe"] = RemoteProbe
    return RemoteProbe


def remote_probe(unique_id: Union[str, ProbeSelector], timeout: Optional[float] = None) -> TCPClientProbe:
    """A pyOCD ``DebugProbe`` for ``remote:HOST[:PORT]`` whose every reply wait is bounded.

    Nothing is connected until the probe is opened.

    :param timeout: seconds to wait for one reply, or :func:`reply_timeout`.
    :raises ProbeSyntaxError: see :func:`parse_remote`.
    """
    host, port = parse_remote(unique_id)
    return _probe_class()(f"{host}:{port}", timeout or reply_timeout())


def server_address(probe: DebugProbe) -> Optional[str]:
    """``HOST:PORT`` of a probe made by :func:`remote_probe` (str), else None."""
    return (
        getattr(probe, "server_address", None) if "probe" in _CLASSES and isinstance(probe, _CLASSES["probe"]) else None
    )
