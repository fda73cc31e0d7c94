"""Errors name the right cause (issue 10, items 5 and 11-20): each case through the real CLI and
the real pyOCD stack on a simulated board, checking the message, the hint and the exit code."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from piflash.errors import ExitCode

NRF = ["-t", "nrf52840", "-u", "sim:nrf52840"]


@pytest.fixture
def app_hex(firmware_dir):
    return firmware_dir / "nrf52840" / "firmware.hex"


def history(cli):
    return cli.json("history")["operations"]


# -- issue 9 item 2: one error model ---------------------------------------------------------------

def test_every_piflash_error_is_defined_in_errors_py():
    import importlib
    import pkgutil

    import piflash
    from piflash.errors import ExitCode, PiflashError

    for info in pkgutil.walk_packages(piflash.__path__, "piflash."):
        if not info.name.endswith("__main__"):
            importlib.import_module(info.name)
    seen, todo = [], [PiflashError]
    while todo:
        cls = todo.pop()
        seen.append(cls)
        todo.extend(cls.__subclasses__())
    strays = [f"{c.__module__}.{c.__name__}" for c in seen if c.__module__ != "piflash.errors"]
    assert not strays, strays
    assert all(isinstance(c.exit_code, ExitCode) for c in seen)


# -- item 5: the simulator's optional extra ------------------------------------------------------

def run_without_unicorn(*args, timeout=60):
    """``piflash ARGS`` in a process where ``import unicorn`` fails as if it was never installed."""
    code = ("import sys; sys.modules['unicorn'] = None; sys.argv = ['piflash'] + sys.argv[1:]; "
            "from piflash.cli import main; main()")
    return subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, env=os.environ.copy())


def test_sim_create_without_the_extra_names_the_install_command():
    proc = run_without_unicorn("sim", "create", "board", "-t", "nrf52840")
    assert proc.returncode == ExitCode.EXTRA_MISSING, proc.stderr
    assert "the simulator is not installed" in proc.stderr
    assert "bash scripts/install.sh --with-sim" in proc.stderr and "pip install 'piflash[sim]'" in proc.stderr
    assert "internal error" not in proc.stderr


@pytest.mark.parametrize("command", [["info"], ["erase", "--chip", "--yes"]])
def test_sim_probe_without_the_extra_says_so(command):
    proc = run_without_unicorn(*command, *NRF)
    assert proc.returncode == ExitCode.EXTRA_MISSING, proc.stderr
    assert "the simulator is not installed" in proc.stderr
    assert "unknown debug probe type" not in proc.stderr and "SWD" not in proc.stderr


def test_sim_probe_with_a_broken_unicorn_says_so(cli, tmp_path, monkeypatch):
    # unicorn is found but fails to import (a wheel for another architecture, a missing libunicorn).
    broken = tmp_path / "broken" / "unicorn"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text("raise ImportError('libunicorn.so.2: cannot open shared object file')\n")
    monkeypatch.setenv("PYTHONPATH", str(broken.parent))
    proc = cli("info", *NRF, check=ExitCode.EXTRA_MISSING)
    assert "unicorn cannot be imported: libunicorn.so.2" in proc.stderr and "--with-sim" in proc.stderr


# -- item 11: an erase proves itself ---------------------------------------------------------------

def test_chip_erase_refused_by_write_protection_fails(cli, firmware_dir):
    # The STM32F1 FPEC refuses a mass erase while any page is write-protected (SR.WRPRTERR, flash
    # unchanged); pyOCD's algorithm reports success, so only a blank check notices.
    fw = firmware_dir / "stm32f103rc" / "firmware.hex"
    cli("sim", "create", "st", "-t", "stm32f103rc", check=0)
    cli("flash", fw, "-u", "sim:st", "-q", check=0)
    cli("sim", "fault", "st", "--write-protect", "0x08000800", check=0)
    res = cli.json("erase", "--chip", "--yes", "-u", "sim:st", check=ExitCode.FLASH)
    assert "chip erase did not take" in res["error"]["message"] and "0x08000000" in res["error"]["message"]
    assert "write-protected" in res["error"]["hint"]
    erases = [(op["outcome"], op["exit_code"]) for op in history(cli) if op["operation"] == "erase"]
    assert erases == [("fail", ExitCode.FLASH)]
    # Without the protection the same command erases, and the board really is blank.
    cli("sim", "fault", "st", "--clear", check=0)
    assert cli.json("erase", "--chip", "--yes", "-u", "sim:st")["ok"]
    dump = cli("sim", "dump", "st", "-o", firmware_dir.parent / "st-dump.bin", check=0)
    assert dump.returncode == 0
    data = (firmware_dir.parent / "st-dump.bin").read_bytes()
    (firmware_dir.parent / "st-dump.bin").unlink()
    assert data == b"\xff" * len(data)


def test_sector_erase_ignored_by_nrf_protection_fails(cli, app_hex):
    # The nRF NVMC silently ignores ERASEPAGE on a protected page.
    cli("sim", "create", "nrf52840", "-t", "nrf52840", check=0)
    cli("flash", app_hex, *NRF, "-q", check=0)
    cli("sim", "fault", "nrf52840", "--write-protect", "0x1000", check=0)
    proc = cli("erase", "--sector", "0x0+0x3000", *NRF, check=ExitCode.FLASH)
    assert "sector erase did not take" in proc.stderr and "first at 0x00001000" in proc.stderr
    proc = cli("erase", "--sector", "0x2000", *NRF, check=0)  # an unprotected sector erases
    assert "Erased 4,096 bytes" in proc.stdout


# -- items 12, 13, 20: remote probes ---------------------------------------------------------------

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_remote_with_nothing_listening_is_no_probe(cli, app_hex):
    port = free_port()
    proc = cli("flash", app_hex, "-t", "nrf52840", "-u", f"remote:127.0.0.1:{port}", check=ExitCode.NO_PROBE)
    assert f"no probe server answers at 127.0.0.1:{port}" in proc.stderr
    assert "piflash sim serve" in proc.stderr and "USB" not in proc.stderr


@pytest.mark.parametrize("uid", ["remote:127.0.0.1:notaport", "remote:127.0.0.1:70000", "remote::5555"])
def test_malformed_remote_unique_id_is_usage(cli, app_hex, uid):
    proc = cli("flash", app_hex, "-t", "nrf52840", "-u", uid, check=ExitCode.USAGE)
    assert "remote:HOST:PORT" in proc.stderr or "remote:127.0.0.1:5555" in proc.stderr
    assert "ValueError" not in proc.stderr and "SWD" not in proc.stderr


class SilentAfter:
    """A TCP proxy in front of a probe server that forwards ``answers`` replies, then keeps every
    connection open and says nothing (a server stuck mid-session). ``answers=0``: silent at once."""

    def __init__(self, upstream_port=None, answers=0):
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.upstream_port, self.answers = upstream_port, answers
        self.sockets = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            self.sockets.append(client)
            if self.upstream_port:
                up = socket.create_connection(("127.0.0.1", self.upstream_port))
                self.sockets.append(up)
                threading.Thread(target=self._pipe, args=(client, up, None), daemon=True).start()
                threading.Thread(target=self._pipe, args=(up, client, self.answers), daemon=True).start()

    @staticmethod
    def _chunks(src):
        """What ``src`` sends, chunk by chunk, until it closes."""
        while True:
            try:
                data = src.recv(65536)
            except OSError:
                return
            if not data:
                return
            yield data

    def _pipe(self, src, dst, budget):
        for data in self._chunks(src):
            if budget is not None:
                budget -= data.count(b"\n")
                if budget < 0:
                    return  # stop answering, keep the connection open
            dst.sendall(data)

    def close(self):
        for s in [self.listener, *self.sockets]:
            s.close()


class SilentAtLock(SilentAfter):
    """A proxy that forwards everything until the ``nth`` ``lock`` request of the remote probe
    protocol, which it swallows: the server never answers it, and nothing after it."""

    def __init__(self, upstream_port, nth):
        self.nth = nth
        super().__init__(upstream_port, None)

    def _pipe(self, src, dst, budget):
        if src not in self.sockets[::2]:        # server -> client: as it comes
            return super()._pipe(src, dst, budget)
        seen, buffer = 0, b""
        for data in self._chunks(src):
            *lines, buffer = (buffer + data).split(b"\n")
            for line in lines:
                if b'"request": "lock"' in line:
                    seen += 1
                    if seen == self.nth:
                        return              # swallowed: silence from here on
                dst.sendall(line + b"\n")


@pytest.mark.parametrize("nth", [40, 100])     # 100: inside an AP access (pyOCD 0.46, this image)
def test_server_silent_at_a_lock_request_is_a_timeout(cli, tmp_path, sim_server, monkeypatch, nth):
    """pyOCD's ``@locked`` calls unlock() after a lock() that raised, and its remote client
    asserted on that: the timeout must come through, not an AssertionError (exit 1). With the
    old client the 100th lock request gave exit 1 "unexpected error inside pyOCD during program"."""
    image = tmp_path / "big.bin"
    image.write_bytes(os.urandom(64 * 1024))
    server = sim_server("nrf52840", "nrf52840")
    proxy = SilentAtLock(int(server.uid.rsplit(":", 1)[1]), nth)
    monkeypatch.setenv("PIFLASH_PROBE_TIMEOUT", "2")
    try:
        proc = cli("flash", image, "-a", "0", "-t", "nrf52840", "-u", f"remote:127.0.0.1:{proxy.port}",
                   timeout=60, check=ExitCode.PROBE_TIMEOUT)
    finally:
        proxy.close()
    assert "stopped answering: no reply within 2 s" in proc.stderr
    assert "AssertionError" not in proc.stderr


@pytest.mark.parametrize("answers", [0, 60, 1500])  # at once, during connect, mid-erase
def test_silent_server_times_out(cli, tmp_path, sim_server, monkeypatch, answers):
    image = tmp_path / "big.bin"
    image.write_bytes(os.urandom(256 * 1024))  # far more than 1500 requests to flash
    server = sim_server("nrf52840", "nrf52840") if answers else None
    if answers == 1500:  # old data on the board, so that there is an erase to be in the middle of
        from piflash.sim.store import (
            SimStore,  # (a blank board is programmed without one)
        )

        SimStore().write_flash("nrf52840", b"\x00" * 256 * 1024)
    proxy = SilentAfter(int(server.uid.rsplit(":", 1)[1]) if server else None, answers)
    monkeypatch.setenv("PIFLASH_PROBE_TIMEOUT", "2")
    try:
        start = time.monotonic()
        proc = cli("flash", image, "-a", "0", "-t", "nrf52840", "-u", f"remote:127.0.0.1:{proxy.port}", timeout=60,
                   check=ExitCode.PROBE_TIMEOUT)
        elapsed = time.monotonic() - start
    finally:
        proxy.close()
    assert f"probe server at 127.0.0.1:{proxy.port} stopped answering: no reply within 2 s" in proc.stderr
    assert "piflash sim serve" in proc.stderr
    assert elapsed < 25, elapsed  # one 2 s wait (closing does not wait again), plus the work before it


def _flash_in_progress(sim_server, tmp_path):
    """A served nRF52840 and a ``piflash flash`` of 384 KiB through it, returned once programming
    has begun: (server, Popen)."""
    server = sim_server("nrf52840", "nrf52840")
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(384 * 1024))
    first = subprocess.Popen([sys.executable, "-m", "piflash", "flash", big, "-a", "0", "-t", "nrf52840",
                              "-u", server.uid], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for line in first.stdout:
        if line.startswith("Programming..."):
            break
    return server, first


def test_second_client_of_a_remote_probe_is_told_busy(cli, sim_server, tmp_path, app_hex):
    server, first = _flash_in_progress(sim_server, tmp_path)
    second = cli("flash", app_hex, "-t", "nrf52840", "-u", server.uid, check=ExitCode.PROBE_BUSY)
    assert "in use by another client" in second.stderr and "write-protected" not in second.stderr
    out, err = first.communicate(timeout=120)
    assert first.returncode == 0, err  # the first flash was not disturbed
    cli("flash", app_hex, "-t", "nrf52840", "-u", server.uid, "-q", check=0)  # free again


def test_remote_probe_left_by_a_killed_client_is_free_again(cli, sim_server, tmp_path, app_hex):
    server, first = _flash_in_progress(sim_server, tmp_path)
    first.send_signal(signal.SIGKILL)
    first.communicate(timeout=30)
    time.sleep(0.5)  # the server sees the connection end
    cli("flash", app_hex, "-t", "nrf52840", "-u", server.uid, "-q", check=0)


# -- item 14: wrong target type ----------------------------------------------------------------------

@pytest.mark.parametrize("board, real, wrong", [
    ("n51", "nrf51", "nrf52840"), ("st", "stm32f103rc", "nrf52840"),
    ("st", "stm32f103rc", "k64f"), ("n51", "nrf51", "k64f"),
])
def test_wrong_target_type_is_named(cli, board, real, wrong):
    cli("sim", "create", board, "-t", real, check=0)
    proc = cli("info", "-u", f"sim:{board}", "-t", wrong, check=ExitCode.CONNECT)
    assert f"cannot connect to the target as '{wrong}': the target type probably does not match" in proc.stderr
    assert f"the probe reports target type '{real}'" in proc.stderr
    assert "Error:" not in proc.stderr.replace("error:", "")  # no KeyError: 1 and the like
    # The hint's check is true: without -t, info names the chip.
    assert f"'piflash info -u sim:{board}' without --target" in proc.stderr
    assert f"Target:     {real}" in cli("info", "-u", f"sim:{board}", check=0).stdout


def test_wrong_target_type_on_a_probe_that_does_not_know_its_board(cli, sim_server):
    server = sim_server("nrf51", "nrf51")  # a remote probe cannot report its board
    proc = cli("info", "-u", server.uid, "-t", "nrf52840", check=ExitCode.CONNECT)
    assert "cannot connect to the target as 'nrf52840': the target type probably does not match" in proc.stderr
    assert "does not report which chip" in proc.stderr and "piflash info" not in proc.stderr
    assert "KeyError" not in proc.stderr


@pytest.mark.parametrize("exc", [KeyError(1), IndexError("list index out of range"), AttributeError("'NoneType' object has no attribute 'ap'"),
                                 TypeError("unsupported operand")])
@pytest.mark.parametrize("phase", ["connect", "erase", "program", "verify", "reset"])
def test_no_raw_python_exception_text(exc, phase):
    from piflash.probe.pyocd_errors import translate_error

    err = translate_error(exc, phase)
    text = f"{err.message} {err.hint}"
    assert type(exc).__name__ + ":" not in text and str(exc) not in text.replace(phase, ""), text
    assert err.hint


# -- item 15: the probe vanishes during connect -----------------------------------------------------

@pytest.mark.parametrize("transfers", [5, 15, 25])
def test_probe_lost_in_the_first_requests_of_connect(cli, transfers):
    cli("sim", "create", "nrf52840", "-t", "nrf52840", check=0)
    cli("sim", "fault", "nrf52840", "--disconnect-after", transfers, check=0)
    proc = cli("info", *NRF, check=ExitCode.PROBE_LOST)
    assert "the probe disconnected during connect" in proc.stderr
    assert "No cores" not in proc.stderr and "KeyError" not in proc.stderr


# -- item 16: firmware files -------------------------------------------------------------------------

def test_directory_as_firmware_is_a_firmware_error(cli, tmp_path):
    d = tmp_path / "fw.hex"
    d.mkdir()
    assert "is a directory" in cli("flash", d, *NRF, check=ExitCode.FIRMWARE).stderr
    assert "is a directory" in cli("verify", d, *NRF, check=ExitCode.FIRMWARE).stderr


def test_unreadable_firmware_is_a_firmware_error(cli, app_hex):
    import shutil
    import tempfile

    from support import unprivileged

    folder = tempfile.mkdtemp(prefix="piflash-unreadable-", dir="/var/tmp")
    try:
        os.chmod(folder, 0o755)
        fw = os.path.join(folder, "fw.hex")
        shutil.copy(app_hex, fw)
        os.chmod(fw, 0)
        if os.geteuid() == 0:  # root reads a mode-000 file: ask as the unprivileged user nobody
            rt = unprivileged.runtime()
            proc = subprocess.run(unprivileged.as_nobody(rt.piflash() + ["flash", fw, *NRF]),
                                  capture_output=True, text=True, timeout=120, env=rt.env(dict(os.environ)))
            assert proc.returncode == ExitCode.FIRMWARE, proc.stderr
        else:
            proc = cli("flash", fw, *NRF, check=ExitCode.FIRMWARE)
        assert "cannot read firmware file: Permission denied" in proc.stderr
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.parametrize("content, message", [
    (b"", "the file is empty"),
    (b"\n\n  \n", "the file is empty"),
    (bytes(range(256)) * 8, "not an Intel HEX file: line 1 does not start with ':'"),
    (b":020000040000FA\n:10000000zz\n", "not an Intel HEX file: line 2 holds characters that are not hex digits"),
    (b"\x7fELF\x01\x01\x01" + bytes(64), "not an Intel HEX file: line 1"),
])
def test_hex_file_says_what_it_is(cli, tmp_path, content, message):
    path = tmp_path / "fw.hex"
    path.write_bytes(content)
    proc = cli("flash", path, *NRF, check=ExitCode.FIRMWARE)
    assert message in proc.stderr and "truncated" not in proc.stderr


# -- item 17: YAML errors on the right line -------------------------------------------------------------

@pytest.mark.parametrize("third_line", ["firmware: [a.hex", 'firmware: "a.hex', "firmware: {a: b",
                                        "  firmware: a.hex"])
def test_yaml_syntax_error_line(cli, tmp_path, third_line):
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "p.yaml").write_text(f"target: nrf52840\nprobe: sim:nrf52840\n{third_line}\n")
    proc = cli("flash", "--profile", "p", check=ExitCode.PROFILE)
    assert "p.yaml:3: YAML syntax error" in proc.stderr, proc.stderr


def test_station_config_yaml_syntax_error_line(tmp_path):
    from piflash.errors import ProfileError
    from piflash.station.config import load_config

    path = tmp_path / "station.yaml"
    path.write_text("# station\nprofile: p\nprobes: [sim:a, sim:b\n")
    with pytest.raises(ProfileError) as err:
        load_config(path)
    assert f"{path}:3: YAML syntax error" in err.value.message


# -- item 18: SWD clock range -------------------------------------------------------------------------------

@pytest.mark.parametrize("value", ["1", "999", "100000001", "100000000000", "0.5kHz"])
def test_frequency_out_of_range_on_the_command_line(cli, value):
    proc = cli("info", *NRF, "--frequency", value, check=ExitCode.USAGE)
    assert "between 1 kHz and 100 MHz" in proc.stderr or "whole number" in proc.stderr


def test_frequency_range_limits(cli, tmp_path, app_hex):
    from piflash.profiles import parse_frequency

    assert parse_frequency("1kHz") == 1000 and parse_frequency("100MHz") == 100_000_000
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "p.yaml").write_text(f"target: nrf52840\nfirmware: {app_hex}\nfrequency: 100000000000\n")
    proc = cli("flash", "--profile", "p", check=ExitCode.PROFILE)
    assert "p.yaml:3: key 'frequency': must be between 1 kHz and 100 MHz" in proc.stderr


# -- item 19: a sector erase that never finishes ----------------------------------------------------------

def test_stuck_sector_erase_is_named_and_quick(cli, tmp_path):
    cli("sim", "create", "nrf52840", "-t", "nrf52840", check=0)
    image = tmp_path / "fw.bin"
    image.write_bytes(os.urandom(8192))
    cli("flash", image, "-a", "0x4000", *NRF, "-q", check=0)
    cli("sim", "fault", "nrf52840", "--stuck-busy", check=0)
    image.write_bytes(os.urandom(8192))  # different contents: the sectors must be erased
    res = cli.json("flash", image, "-a", "0x4000", "--erase", "sector", *NRF, check=ExitCode.FLASH)
    assert res["error"]["message"].startswith("erasing the sector at 0x00004000 timed out")
    assert "write-protected" in res["error"]["hint"]
    # The erase phase alone (the result's own timing, not the process's start-up and imports): the
    # nRF52840's sector timeout, where pyOCD's default would wait 10 s per sector.
    from piflash.targets.catalog import erase_sector_timeout

    assert erase_sector_timeout("nrf52840") < 10
    assert res["durations"]["erase"] < 10, res["durations"]
    # erase --sector names the sector too.
    proc = cli("erase", "--sector", "0x5000", *NRF, check=ExitCode.FLASH)
    assert "erasing the sector at 0x00005000 timed out" in proc.stderr


@pytest.mark.parametrize("board, target, bound", [("nrf52840", "nrf52840", 1.69), ("stm", "stm32f103rc", 0.4),
                                                   ("nrf51", "nrf51", 0.223)])
def test_stuck_chip_erase_gives_up_within_ten_times_the_datasheet(cli, board, target, bound):
    """Issue 41 item 7: ``erase --chip`` on a stuck controller waited pyOCD's 240 s. It gives up
    after ten times the datasheet's mass-erase time (nRF52840 t_ERASEALL 169 ms, STM32F103
    t_ME 40 ms; nRF51 22.3 ms, unconfirmed: piflash/targets/families/nrf51.py), says so while it
    waits, and the failure is recorded."""
    cli("sim", "create", board, "-t", target, check=0)
    cli("sim", "fault", board, "--stuck-busy", check=0)
    proc = cli("erase", "--chip", "--yes", "-u", f"sim:{board}", check=ExitCode.FLASH)
    assert f"waits at most {bound:g} s" in proc.stdout + proc.stderr
    assert f"the chip erase timed out: the flash controller did not finish within {bound:g} s" in proc.stderr
    res = cli.json("erase", "--chip", "--yes", "-u", f"sim:{board}", check=ExitCode.FLASH)
    assert res["durations"]["erase"] < bound + 3, res["durations"]
    rows = cli.json("history")["operations"]
    assert [r["outcome"] for r in rows] == ["fail", "fail"] and rows[0]["operation"] == "erase"


def test_blank_check_blocks_fit_the_crc_analyzer():
    from piflash.flashing.verify import MAX_CRC_PAGE_INDEX, _blank_blocks

    stm32 = _blank_blocks(0x08000000, 0x08080000)  # 512 KiB: eight 64 KiB analyzer calls
    assert stm32 == [(0x08000000 + i * 0x10000, 0x10000, True) for i in range(8)]
    # nRF UICR: 4 KiB at an index the analyzer's 16-bit field cannot carry: read back whole.
    assert _blank_blocks(0x10001000, 0x10002000) == [(0x10001000, 0x1000, False)]
    for addr, size, crc in _blank_blocks(0x1000, 0x13000) + stm32:
        assert crc and addr % size == 0 and addr // size <= MAX_CRC_PAGE_INDEX and size & (size - 1) == 0


def test_local_sim_probe_serialises_then_says_busy(cli, tmp_path, app_hex):
    # A second session on a local simulated probe waits for the first (up to 10 s), as today;
    # past that it is told the probe is in use, not a wiring hint.
    cli("sim", "create", "nrf52840", "-t", "nrf52840", check=0)
    cli("flash", app_hex, *NRF, "-q", check=0)
    cli("sim", "fault", "nrf52840", "--stuck-busy", check=0)
    image = tmp_path / "fw.bin"
    image.write_bytes(os.urandom(4096))
    holder = subprocess.Popen([sys.executable, "-m", "piflash", "flash", image, "-a", "0", *NRF,
                               "-O", "flash.timeout.erase_sector=25"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for line in holder.stdout:
            if line.startswith("Erasing..."):
                break
        proc = cli("info", *NRF, timeout=60, check=ExitCode.PROBE_BUSY)
        assert "is in use by another session" in proc.stderr and "SWD" not in proc.stderr
    finally:
        holder.send_signal(signal.SIGINT)
        holder.communicate(timeout=60)


class ClosesAfter(SilentAfter):
    """A proxy that forwards ``answers`` replies, then closes both connections (a probe server that
    stopped, a network cut)."""

    def _pipe(self, src, dst, budget):
        for data in self._chunks(src):
            if budget is not None:
                budget -= data.count(b"\n")
                if budget < 0:
                    for s in (src, dst):
                        try:
                            s.shutdown(socket.SHUT_RDWR)
                        except OSError:
                            pass
                    return
            dst.sendall(data)


@pytest.mark.parametrize("answers", [3, 12, 400])       # during connect, its first requests, mid-erase
def test_remote_probe_that_drops_the_connection_is_not_a_usb_cable(cli, tmp_path, sim_server, answers):
    """Issue 19 item 18: a remote: probe whose server goes away was "check the USB cable"."""
    image = tmp_path / "big.bin"
    image.write_bytes(os.urandom(256 * 1024))
    server = sim_server("nrf52840", "nrf52840")
    proxy = ClosesAfter(int(server.uid.rsplit(":", 1)[1]), answers)
    try:
        proc = cli("flash", image, "-a", "0", "-t", "nrf52840", "-u", f"remote:127.0.0.1:{proxy.port}",
                   timeout=60)
    finally:
        proxy.close()
    assert proc.returncode in (ExitCode.PROBE_LOST, ExitCode.PROBE_TIMEOUT), proc.stderr
    assert "USB cable" not in proc.stderr
    assert "probe server" in proc.stderr, proc.stderr
