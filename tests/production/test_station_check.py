"""``piflash station check`` checks what ``station run`` would stop on (issue 39): the extras the
config needs import (``ledger:`` psycopg, ``metrics:``/``metrics_port:`` prometheus-client: exit
17 naming the install line), and the ledger can be used (exit 27, its password masked). A module
is made unimportable by a file of its name first on PYTHONPATH, as a missing install is."""

from __future__ import annotations

import os
import socket

import pytest

pytest.importorskip("psycopg")

from support.pgserver import PgServer  # noqa: E402
from support.stationkit import write_config, write_profile  # noqa: E402

from piflash.errors import ExitCode  # noqa: E402

PW = "Qu1etRiver"


def _config(tmp_path, firmware_dir, **extra):
    profile = write_profile(tmp_path, firmware_dir / "nrf52840" / "firmware.hex")
    return write_config(tmp_path, profile, ["sim:x"], tmp_path / "h.sqlite3", **extra)


def _block(tmp_path, monkeypatch, module):
    blocked = tmp_path / "blocked"
    blocked.mkdir(exist_ok=True)
    (blocked / f"{module}.py").write_text("raise ImportError('blocked by the test')\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(blocked), os.environ.get("PYTHONPATH", "")]))


@pytest.mark.parametrize("key, module, extra", [
    ("ledger: postgresql://u@127.0.0.1:1/db", "psycopg", "ledger"),
    ("metrics_port: 9917", "prometheus_client", "metrics"),
    ("metrics: /tmp/piflash-check.prom", "prometheus_client", "metrics"),
    ("web_port: 8080", "uvicorn", "web"),
])
def test_a_missing_extra_is_exit_17(tmp_path, firmware_dir, cli, monkeypatch, key, module, extra):
    name, value = key.split(": ", 1)
    config = _config(tmp_path, firmware_dir, **{name: value})
    _block(tmp_path, monkeypatch, module)
    proc = cli("station", "check", "--config", config, check=int(ExitCode.EXTRA_MISSING))
    assert f"piflash's '{extra}' extra" in proc.stderr and "hint: install it" in proc.stderr, proc.stderr


def test_an_unreachable_ledger_is_exit_27_with_the_password_masked(tmp_path, firmware_dir, cli):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = _config(tmp_path, firmware_dir, ledger=f"'host=127.0.0.1 port={port} dbname=l password={PW}'")
    proc = cli("station", "check", "--config", config, check=int(ExitCode.LEDGER))
    assert "cannot use the ledger" in proc.stderr and "password=***" in proc.stderr
    assert PW not in proc.stdout + proc.stderr


def test_a_reachable_ledger_is_said(tmp_path, firmware_dir, cli):
    pg = PgServer()
    try:
        config = _config(tmp_path, firmware_dir, ledger=f"{pg.url}?password={PW}", metrics_port=9917)
        out = cli("station", "check", "--config", config, check=0).stdout
    finally:
        pg.close()
    assert "extras installed: ledger, metrics" in out
    assert f"ledger {pg.url}?password=***: reached" in out and PW not in out
