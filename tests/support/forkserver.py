"""A Python that has already imported piflash and pyOCD, and forks one child per CLI run.

Most tests run the CLI as ``python -m piflash ...`` in a process of its own (tests/conftest.py
:class:`Cli`), so exit codes, output and what persists across processes are real. Each such
process spends most of its CPU importing: pyOCD alone is about 0.6 s of the 1.7 s a simulated
flash takes on this project's 2-core test machine (``python -X importtime -m piflash flash ...``),
and the suite runs the CLI about a thousand times. Here a server process imports once, and each
run is a ``fork()`` of it that then does what ``python -m piflash ARGS`` does: the test's
environment, working directory, umask, stdin and output files; ``runpy`` runs ``piflash`` as
``__main__``; the child exits through the interpreter's normal shutdown (``atexit``, flushing),
and its exit status is reported as :func:`subprocess.run` reports one (negative: killed by that
signal).

What differs from a fresh interpreter, and how it is kept out of the way:

- modules imported before the fork are not imported again: a module that read the environment
  at import would see the server's. piflash reads its settings when used (piflash/settings.py),
  as do pyOCD and rich; a run whose ``PYTHON*`` or locale variables differ from the server's
  (they act at interpreter start) is run as a real subprocess instead (:meth:`ForkServer.fits`);
- pyOCD's probe plugins are scanned at import, so piflash's simulated USB bus, which that scan
  installs when ``PIFLASH_SIM_USB`` is set, is installed by the child from its own environment;
- the child is the server's child, not the test's. Tests that signal, time or watch the process
  itself start it with :mod:`subprocess` directly and do not come here.

Set ``PIFLASH_TEST_FORKSERVER=0`` to run every CLI call as a fresh interpreter."""

from __future__ import annotations

import atexit
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
from typing import Dict, List, Optional, Sequence

#: Imported by the server before it forks: what most CLI runs import (``python -X importtime -m
#: piflash flash ... -u sim:NAME``); anything else a run needs it imports itself.
PRELOAD = ("piflash.cli", "pyocd", "pyocd.core.helpers", "pyocd.flash.file_programmer",
           "pyocd.flash.eraser", "pyocd.probe.aggregator", "piflash.sim", "unicorn", "intelhex",
           "elftools.elf.elffile", "rich.console", "rich.progress", "yaml")

_HEADER = struct.Struct("!I")


def _start_key(env: Dict[str, str]) -> Dict[str, str]:
    """The variables that act when an interpreter starts (so a fork cannot take them on)."""
    return {k: v for k, v in env.items() if k.startswith("PYTHON") or k in ("LANG", "LANGUAGE") or k.startswith("LC_")}


class ForkServer:
    """The server, started with this process's environment; :meth:`run` is :func:`subprocess.run`
    of ``[sys.executable, "-m", "piflash", *args]`` with ``capture_output=True, text=True``."""

    def __init__(self, env: Dict[str, str], preload: Sequence[str] = PRELOAD) -> None:
        """``env``: the server's environment while it imports, without any ``PIFLASH_*`` variable
        (pyOCD's plugin scan at import acts on ``PIFLASH_SIM_USB``; a test's setting must not stay
        in the server for the runs of the tests after it)."""
        self._dir = tempfile.mkdtemp(prefix="piflash-fork-")
        self.path = os.path.join(self._dir, "sock")
        env = {k: v for k, v in env.items() if not k.startswith("PIFLASH_")}
        self._key = _start_key(env)
        self.proc = subprocess.Popen([sys.executable, __file__, self.path, *preload], env=env,
                                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        ready = self.proc.stdout.readline().strip()
        if ready != "ready":
            self.close()
            raise RuntimeError(f"fork server did not start: {ready!r}")

    def fits(self, env: Dict[str, str]) -> bool:
        """Whether a run with ``env`` can be a fork: its interpreter-start variables are the server's."""
        return self.proc.poll() is None and _start_key(env) == self._key

    def run(self, args: List[str], env: Dict[str, str], timeout: float) -> subprocess.CompletedProcess:
        """Run ``piflash ARGS`` in a fork; :class:`subprocess.TimeoutExpired` after ``timeout``
        seconds (the child is killed first, as :func:`subprocess.run` does)."""
        argv = [sys.executable, "-m", "piflash", *args]
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
                socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.connect(self.path)
            umask = os.umask(0)
            os.umask(umask)
            payload = json.dumps({"args": list(args), "env": env, "cwd": os.getcwd(), "umask": umask}).encode()
            socket.send_fds(s, [_HEADER.pack(len(payload))], [0, out.fileno(), err.fileno()])
            s.sendall(payload)
            reply = s.makefile("r")
            pid = int(reply.readline())
            s.settimeout(timeout)
            try:
                status = reply.readline()
            except (socket.timeout, TimeoutError):
                os.kill(pid, signal.SIGKILL)
                s.settimeout(None)
                reply.readline()
                raise subprocess.TimeoutExpired(argv, timeout, _read(out), _read(err)) from None
            if not status:
                raise RuntimeError("fork server went away during a run")
            return subprocess.CompletedProcess(argv, int(status), _read(out), _read(err))

    def close(self) -> None:
        """Stop the server (its running children are killed with it) and remove its socket."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout:
            self.proc.stdout.close()
        for name in os.listdir(self._dir):
            os.unlink(os.path.join(self._dir, name))
        os.rmdir(self._dir)


def _read(f) -> str:
    f.seek(0)
    return f.read().decode("utf-8", "replace")


def _recv_exact(conn: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = conn.recv(n - len(buf))
        if not chunk:
            raise EOFError
        buf += chunk
    return buf


def _serve(path: str) -> Optional[dict]:
    """The server's loop. Returns only in a child, with its request."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    parent = os.getppid()
    children: Dict[int, socket.socket] = {}
    stop = False

    def terminate(*_):
        nonlocal stop
        stop = True
    signal.signal(signal.SIGTERM, terminate)
    print("ready", flush=True)
    while not stop and os.getppid() == parent:
        readable, _, _ = select.select([listener], [], [], 0.02)
        if readable:
            conn, _ = listener.accept()
            try:
                msg, fds, _, _ = socket.recv_fds(conn, _HEADER.size, 3)
                req = json.loads(_recv_exact(conn, _HEADER.unpack(msg)[0]))
            except (OSError, EOFError, ValueError, struct.error):
                conn.close()
                continue
            pid = os.fork()
            if pid == 0:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                listener.close()
                for c in (conn, *children.values()):
                    c.close()
                for target, fd in enumerate(fds):
                    os.dup2(fd, target)
                    os.close(fd)
                return req
            for fd in fds:
                os.close(fd)
            try:
                conn.sendall(f"{pid}\n".encode())
            except OSError:
                pass
            children[pid] = conn
        while children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            conn = children.pop(pid)
            try:
                conn.sendall(f"{os.waitstatus_to_exitcode(status)}\n".encode())
            except OSError:
                pass
            conn.close()
    for pid in children:
        os.kill(pid, signal.SIGKILL)
    raise SystemExit(0)


def _child(req: dict) -> None:
    """Become ``python -m piflash ARGS`` as the request describes it."""
    import runpy

    os.umask(req["umask"])
    os.chdir(req["cwd"])
    os.environ.clear()
    os.environ.update(req["env"])
    sys.argv = ["-m", *req["args"]]
    sys.path[0] = req["cwd"]            # as ``python -m`` puts the working directory first
    # pyOCD scans its probe plugins when it is imported, and piflash's ``sim`` plugin puts the
    # simulated USB bus on pyusb then if PIFLASH_SIM_USB asks for it: that scan ran in the server,
    # with the server's environment. Do what it would have done with this run's.
    from piflash.probe.usbscan import install_simulated_bus

    install_simulated_bus()
    code = 0
    try:
        runpy.run_module("piflash", run_name="__main__", alter_sys=True)
    except SystemExit as exc:           # as the interpreter turns one into an exit status
        if exc.code is None:
            code = 0
        elif isinstance(exc.code, int):
            code = exc.code
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    except BaseException:               # noqa: BLE001 -- printed and exit 1, as the interpreter does
        sys.excepthook(*sys.exc_info())
        code = 1
    # The interpreter's shutdown, less the teardown of every module the server imported (that
    # alone costs a fork more than a whole fresh run of a command that never imports pyOCD):
    # non-daemon threads are joined, atexit handlers run, the streams are flushed.
    threading._shutdown()               # type: ignore[attr-defined]
    atexit._run_exitfuncs()             # type: ignore[attr-defined]
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            if stream is sys.stdout:
                code = code or 120      # as Python exits when flushing stdout fails at exit
    os._exit(code & 0xFF)


if __name__ == "__main__":
    import importlib

    sys.path[0] = os.getcwd()           # this file's folder is not on a ``python -m piflash`` path
    for name in sys.argv[2:]:
        try:
            importlib.import_module(name)
        except ImportError:             # e.g. no simulator installed: the child imports what it needs
            pass
    request = _serve(sys.argv[1])
    if request is not None:
        _child(request)
