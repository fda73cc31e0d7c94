"""The operator's live station page (issue 44, docs/station.md "The operator's page").

A read-only page served by the station itself (``web_port:`` in station.yaml) with Starlette on
uvicorn (the optional extra ``web``; both pure Python, imported only when ``web_port:`` is set).
It shows what the station's status file (:class:`piflash.station.status.StatusFile`) holds, and
nothing else: that file is the one source of truth, for ``piflash station status``, the metrics
and this page alike.

How the page learns of a change: one task on the server's event loop looks at the status file
every :data:`POLL_INTERVAL` seconds (``os.stat``: its inode, size and mtime; the station replaces
the file by a rename at each change, so a new write is always a new inode) and reads it only when
that changed; each open page holds one server-sent events stream (``GET /events``,
``text/event-stream``) and gets every new version as one ``status`` event, numbered (``id:``) in
the order the server read them. A stat every 0.2 s costs nothing; inotify is not in the standard
library, and the same watcher would serve the page from a process of its own.

Routes, all ``GET`` (any other method is answered 405: nothing on the page changes anything):

- ``/``: the page (``static/index.html``), ``/static/...``: its CSS and JavaScript;
- ``/events``: the live stream; ``/status.json``: the file as it is now.

Guards (:class:`Guard`): the Host header must name this machine (``localhost``, an IP address,
the host name, ``<host name>.local``, its FQDN): a page of another site that a rebound DNS name
points at this station gets 421. With a token (``web_token_file:``), every request must carry it:
``/?token=T`` once (the answer sets an HttpOnly, SameSite=Strict cookie and redirects to ``/``,
so the token leaves the address bar), or ``Authorization: Bearer T``; without it, 401. The
access log is off (a URL with ``?token=`` would write it to the journal).

May import: the standard library; Starlette and uvicorn lazily (in :func:`create_app` and
:class:`WebServer`, only when ``web_port:`` is set). Nothing else of piflash: the page knows the
station only through its status file.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import json
import logging
import os
import socket
import threading
from pathlib import Path
from typing import Any, Callable, List, Optional, Tuple

LOG = logging.getLogger(__name__)

#: Seconds between two looks at the status file (a stat): half a page's change-to-screen budget
#: of 1 s (issue 44) is left for the station's own progress interval.
POLL_INTERVAL = 0.2
#: Seconds between two comment lines on an idle event stream, so a proxy or a phone does not
#: drop it as dead (the HTML Living Standard's server-sent events section suggests about 15 s).
KEEPALIVE = 15.0
#: The cookie carrying the token once a page has shown it.
COOKIE = "piflash_token"
#: The page's static files (package data).
STATIC = Path(__file__).resolve().parent / "static"
#: Headers on every answer: no other origin's script, frame or referrer (OWASP secure headers).
SECURITY_HEADERS = {
    "content-security-policy": "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
    "cache-control": "no-store",
}


def allowed_hosts(bind: str) -> List[str]:
    """The host names (lower case, no port) a request's Host header may give besides an IP
    address: ``localhost``, this machine's host name, ``<host name>.local`` (mDNS) and its FQDN,
    and ``bind`` itself."""
    name = socket.gethostname().lower()
    names = {"localhost", name, f"{name}.local", bind.lower()}
    try:
        names.add(socket.getfqdn().lower())
    except OSError:
        pass
    return sorted(n for n in names if n)


def host_allowed(host: Optional[str], names: List[str]) -> bool:
    """Whether a Host header value (``name``, ``name:port``, ``[v6]:port``) names this machine:
    an IP address literal (a rebinding attack needs a DNS name) or one of ``names``."""
    if not host:
        return False
    host = host.strip().lower()
    if host.startswith("["):
        end = host.find("]")
        if end < 0:
            return False
        name = host[1:end]
    else:
        name = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        pass
    return name.rstrip(".") in names


def token_ok(given: Optional[str], token: Optional[str]) -> bool:
    """Whether ``given`` is the page's ``token`` (compared in constant time); True without a token."""
    if token is None:
        return True
    return given is not None and hmac.compare_digest(given.encode(), token.encode())


class StatusWatcher:
    """The status file as the page knows it: its text and a version number bumped at each change.

    :param path: ``path() -> Path``: where the status file is (a reload may move it).
    :param interval: seconds between two stats.
    """

    def __init__(self, path: Callable[[], Path], interval: float = POLL_INTERVAL) -> None:
        self._path, self.interval = path, interval
        self.version = 0
        self.text = "null"  #: the file's object as one line of JSON, "null" before it exists
        self._seen: Optional[Tuple[int, int, int]] = None
        self._changed: Optional[asyncio.Condition] = None

    def check(self) -> bool:
        """Read the file if its (inode, size, mtime) changed; True when its content did."""
        path = self._path()
        try:
            st = os.stat(path)
            key = (st.st_ino, st.st_size, st.st_mtime_ns)
            if key == self._seen:
                return False
            self._seen = key
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return False  # not there yet, or replaced while read: the next look sees it
        text = json.dumps(doc, separators=(",", ":"))
        if text == self.text:
            return False
        self.text, self.version = text, self.version + 1
        return True

    async def run(self) -> None:
        """Look at the file every :attr:`interval` seconds and wake the streams on a change."""
        self._changed = asyncio.Condition()
        while True:
            if self.check():
                async with self._changed:
                    self._changed.notify_all()
            await asyncio.sleep(self.interval)

    async def wait(self, after: int, timeout: float) -> int:
        """The version, once it is newer than ``after`` or ``timeout`` seconds passed."""
        if self._changed is None or self.version > after:
            return self.version
        async with self._changed:
            try:
                await asyncio.wait_for(self._changed.wait_for(lambda: self.version > after), timeout)
            except asyncio.TimeoutError:
                pass
        return self.version


def create_app(
    status_path: Callable[[], Path],
    bind: str = "127.0.0.1",
    token: Optional[str] = None,
    interval: float = POLL_INTERVAL,
) -> Any:
    """The page's ASGI application (a Starlette app wrapped in :class:`Guard`).

    :param status_path: ``() -> Path`` of the station's status file.
    :param bind: the address served (allowed as a Host besides :func:`allowed_hosts`).
    :param token: the page's token, or None (loopback only: :func:`piflash.station.config.load_config`
        refuses a non-loopback ``web_bind`` without one).
    :param interval: seconds between two looks at the status file.
    :raises ImportError: Starlette is not installed (the ``web`` extra).
    """
    from contextlib import asynccontextmanager

    from starlette.applications import Starlette
    from starlette.responses import FileResponse, Response, StreamingResponse
    from starlette.routing import Mount, Route
    from starlette.staticfiles import StaticFiles

    watcher = StatusWatcher(status_path, interval)

    async def index(request):
        return FileResponse(STATIC / "index.html", media_type="text/html; charset=utf-8")

    async def status(request):
        watcher.check()
        return Response(watcher.text, media_type="application/json")

    async def events(request):
        async def stream():
            seen = -1
            yield "retry: 1000\n\n"
            while True:
                version = await watcher.wait(seen, KEEPALIVE)  # a client gone: Starlette cancels this
                if version == seen:
                    yield ": keep-alive\n\n"
                    continue
                seen = version
                yield f"id: {version}\nevent: status\ndata: {watcher.text}\n\n"

        return StreamingResponse(stream(), media_type="text/event-stream", headers={"x-accel-buffering": "no"})

    @asynccontextmanager
    async def lifespan(app):
        task = asyncio.ensure_future(watcher.run())
        try:
            yield
        finally:
            task.cancel()

    app = Starlette(
        routes=[
            Route("/", index, methods=["GET"]),
            Route("/status.json", status, methods=["GET"]),
            Route("/events", events, methods=["GET"]),
            Mount("/static", StaticFiles(directory=str(STATIC)), name="static"),
        ],
        lifespan=lifespan,
    )
    return Guard(app, allowed_hosts(bind), token)


class Guard:
    """ASGI middleware in front of the page: Host check, token check, GET/HEAD only, the
    :data:`SECURITY_HEADERS` on every answer (see the module docstring).

    :param app: the ASGI app guarded. :param names: :func:`allowed_hosts`. :param token: or None.
    """

    def __init__(self, app: Any, names: List[str], token: Optional[str]) -> None:
        self.app, self.names, self.token = app, names, token

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)
            return
        if scope["type"] != "http":  # no websocket, nor anything else: the page is GET over HTTP
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        if not host_allowed(headers.get("host"), self.names):
            await _plain(send, 421, "this page answers only to this machine's names and addresses (Host header)")
            return
        if scope["method"] not in ("GET", "HEAD"):
            await _plain(send, 405, "read-only: GET only", [(b"allow", b"GET, HEAD")])
            return
        if self.token is not None:
            from urllib.parse import parse_qs

            query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
            given = (query.get("token") or [None])[0]
            if given is not None and scope["path"] == "/":
                if token_ok(given, self.token):  # the token leaves the address bar for a cookie
                    cookie = f"{COOKIE}={self.token}; Path=/; HttpOnly; SameSite=Strict"
                    await _plain(send, 303, "", [(b"location", b"/"), (b"set-cookie", cookie.encode())])
                    return
                await _plain(send, 401, "wrong token")
                return
            auth = headers.get("authorization", "")
            bearer = auth[7:] if auth.lower().startswith("bearer ") else None
            if not (token_ok(bearer, self.token) or token_ok(_cookie(headers.get("cookie", "")), self.token)):
                await _plain(send, 401, "this page needs its token: open /?token=TOKEN once (web_token_file:)")
                return

        async def secured(message):
            if message["type"] == "http.response.start":
                message = dict(message)
                message["headers"] = list(message.get("headers", [])) + [
                    (k.encode(), v.encode()) for k, v in SECURITY_HEADERS.items()
                ]
            await send(message)

        await self.app(scope, receive, secured)


def _cookie(header: str) -> Optional[str]:
    """The page's token cookie (:data:`COOKIE`) from a Cookie header, or None."""
    from http.cookies import CookieError, SimpleCookie

    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(header)
    except CookieError:
        return None
    morsel = jar.get(COOKIE)
    return morsel.value if morsel is not None else None


async def _plain(send, code: int, text: str, extra: Optional[List[Tuple[bytes, bytes]]] = None) -> None:
    """Answer ``code`` with ``text`` (text/plain) and the security headers."""
    body = (text + "\n").encode() if text else b""
    headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode())]
    headers += [(k.encode(), v.encode()) for k, v in SECURITY_HEADERS.items()] + list(extra or [])
    await send({"type": "http.response.start", "status": code, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class WebServer:
    """The page served from a thread of the station (uvicorn on its own event loop).

    :param status_path: ``() -> Path`` of the status file.
    :param port: TCP port (int). :param bind: IP address (str). :param token: or None.
    :ivar port: the port listened on (the one bound, when ``port`` was 0); :ivar wanted_port:
        ``port`` as given; :ivar interval: seconds between two looks at the status file.
    :raises OSError: the address cannot be bound (in use, not this machine's): raised here, at
        once, as the socket is bound before the thread starts.
    :raises ImportError: uvicorn or Starlette is missing (the ``web`` extra).
    """

    def __init__(
        self,
        status_path: Callable[[], Path],
        port: int,
        bind: str = "127.0.0.1",
        token: Optional[str] = None,
        interval: float = POLL_INTERVAL,
    ) -> None:
        import uvicorn

        self.bind, self.token, self.wanted_port, self.interval = bind, token, port, interval
        family = socket.AF_INET6 if ipaddress.ip_address(bind).version == 6 else socket.AF_INET
        self._sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self._sock.bind((bind, port))
            self._sock.listen(64)
        except OSError:
            self._sock.close()
            raise
        self.port = self._sock.getsockname()[1]
        app = create_app(status_path, bind, token, interval)
        config = uvicorn.Config(
            app,
            access_log=False,  # a ?token= URL must not reach the journal
            log_level="warning",
            lifespan="on",
            loop="asyncio",
            http="h11",
            ws="none",
            timeout_graceful_shutdown=1,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._serve, name="web", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        try:
            self._server.run(sockets=[self._sock])
        except Exception:  # noqa: BLE001 - the page going down must not stop the station
            LOG.exception("the operator's page stopped")

    @property
    def url(self) -> str:
        """The page's address (str), e.g. ``http://127.0.0.1:8080/``."""
        host = f"[{self.bind}]" if ":" in self.bind else self.bind
        if self.bind in ("0.0.0.0", "::"):
            host = "127.0.0.1" if self.bind == "0.0.0.0" else "[::1]"
        return f"http://{host}:{self.port}/"

    def close(self, timeout: float = 5.0) -> None:
        """Stop serving (open event streams are closed) and wait up to ``timeout`` seconds."""
        self._server.should_exit = True
        self._thread.join(timeout)
        try:
            self._sock.close()
        except OSError:
            pass


__all__ = ["WebServer", "StatusWatcher", "create_app", "Guard", "allowed_hosts", "host_allowed", "token_ok"]
