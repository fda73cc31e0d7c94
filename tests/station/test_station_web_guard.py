"""Issue 44, the operator's page without a browser: the station.yaml keys (``web_port``,
``web_bind``, ``web_token_file``) and their refusals, and the server's guards: the Host header
(DNS rebinding), the token (query once, then a cookie; or a bearer header), GET only, and the
token never written to the log. A real server on a free port, spoken to with http.client."""

from __future__ import annotations

import http.client
import json
import logging
import os
import socket
import subprocess
import sys

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from support.stationkit import write_config, write_profile  # noqa: E402

from piflash import redact  # noqa: E402
from piflash.errors import ProfileError  # noqa: E402
from piflash.station.config import load_config, needed_extras  # noqa: E402
from piflash.station.web import WebServer, host_allowed  # noqa: E402

TOKEN = "6f1c0d8e2b9a4c7d5e3f1a2b"


def _config(tmp_path, firmware_dir, **keys):
    profile = write_profile(tmp_path, firmware_dir / "nrf52840" / "firmware.hex")
    return write_config(tmp_path, profile, ["sim:a"], tmp_path / "history.sqlite3", **keys)


def _token_file(tmp_path, text=TOKEN, mode=0o600):
    path = tmp_path / "web-token"
    path.write_text(text + "\n")
    os.chmod(path, mode)
    return path


def test_the_page_is_off_by_default_and_binds_to_loopback(tmp_path, firmware_dir):
    cfg = load_config(_config(tmp_path, firmware_dir))
    assert cfg.web_port is None and "web" not in needed_extras(cfg)
    cfg = load_config(_config(tmp_path, firmware_dir, web_port=8080))
    assert (cfg.web_port, cfg.web_bind, cfg.web_token) == (8080, "127.0.0.1", None)
    assert needed_extras(cfg) == ["web"]


@pytest.mark.parametrize("keys, key, words", [
    ({"web_port": 0}, "web_port", "expected a TCP port"),
    ({"web_port": "'http'"}, "web_port", "expected a TCP port"),
    ({"web_port": 8080, "web_bind": "pi.local"}, "web_bind", "expected an IP address"),
    ({"web_port": 8080, "web_bind": "0.0.0.0"}, "web_bind", "without a token: refused"),
    ({"web_port": 8080, "web_bind": "'::'"}, "web_bind", "without a token: refused"),
    ({"web_bind": "127.0.0.1"}, "web_bind", "only with 'web_port:'"),
])
def test_bad_web_keys_are_refused(tmp_path, firmware_dir, keys, key, words):
    with pytest.raises(ProfileError) as err:
        load_config(_config(tmp_path, firmware_dir, **keys))
    assert err.value.key == key and words in err.value.message, err.value.message


def test_a_token_file_readable_by_all_or_too_short_is_refused_and_never_shown(tmp_path, firmware_dir):
    loose = _token_file(tmp_path, mode=0o644)
    with pytest.raises(ProfileError) as err:
        load_config(_config(tmp_path, firmware_dir, web_port=8080, web_bind="0.0.0.0", web_token_file=loose))
    assert "readable by every user (mode 0644)" in err.value.message and "chmod 600" in err.value.hint
    assert TOKEN not in str(err.value) + err.value.hint
    short = _token_file(tmp_path, "abc123")
    with pytest.raises(ProfileError) as err:
        load_config(_config(tmp_path, firmware_dir, web_port=8080, web_bind="0.0.0.0", web_token_file=short))
    assert "at least 16 characters" in err.value.message and "abc123" not in err.value.message
    odd = _token_file(tmp_path, "token;with,cookie" + "x" * 16)
    with pytest.raises(ProfileError) as err:
        load_config(_config(tmp_path, firmware_dir, web_port=8080, web_bind="0.0.0.0", web_token_file=odd))
    assert "letters, digits" in err.value.message and "token;with" not in err.value.message
    with pytest.raises(ProfileError) as err:
        load_config(_config(tmp_path, firmware_dir, web_port=8080, web_token_file=tmp_path / "none"))
    assert err.value.key == "web_token_file" and "cannot read" in err.value.message


def test_a_token_opens_the_network_and_is_masked_in_any_log_line(tmp_path, firmware_dir):
    cfg = load_config(_config(tmp_path, firmware_dir, web_port=8080, web_bind="0.0.0.0",
                              web_token_file=_token_file(tmp_path, mode=0o640)))
    assert (cfg.web_bind, cfg.web_token) == ("0.0.0.0", TOKEN)
    assert TOKEN not in repr(cfg)
    assert redact.scrub(f"GET /?token={TOKEN}") == f"GET /?token={redact.MASK}"


@pytest.mark.parametrize("host, ok", [
    ("localhost:8080", True), ("127.0.0.1:8080", True), ("[::1]:8080", True), ("192.168.1.23", True),
    ("pi-bay.local", True), ("PI-BAY.local.:8080", True),
    ("evil.example", False), ("evil.example:8080", False), ("localhost.evil.example", False), ("", False),
    (None, False), ("[::1", False),
])
def test_host_header_names_this_machine_or_an_address(host, ok):
    assert host_allowed(host, ["localhost", "pi-bay", "pi-bay.local"]) is ok


@pytest.fixture
def served(tmp_path):
    status = tmp_path / "status.json"
    status.write_text(json.dumps({"station": "s", "slots": [], "n": 1}))
    servers = []

    def start(token=None, bind="127.0.0.1"):
        server = WebServer(lambda: status, 0, bind, token, interval=0.05)
        servers.append(server)
        return server

    yield status, start
    for server in servers:
        server.close()


def _get(server, path="/", method="GET", headers=None):
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        conn.request(method, path, headers={"Host": f"127.0.0.1:{server.port}", **(headers or {})})
        resp = conn.getresponse()
        return resp.status, dict((k.lower(), v) for k, v in resp.getheaders()), resp.read()
    finally:
        conn.close()


def test_rebinding_hosts_and_commands_are_refused(served):
    _, start = served
    server = start()
    code, headers, body = _get(server)
    assert code == 200 and b"<title>piflash station</title>" in body
    assert headers["content-security-policy"].startswith("default-src 'self'")
    assert _get(server, headers={"Host": "attacker.example"})[0] == 421
    assert _get(server, headers={"Host": f"attacker.example:{server.port}"})[0] == 421
    for method in ("POST", "PUT", "DELETE", "PATCH"):
        assert _get(server, method=method)[0] == 405
        assert _get(server, "/status.json", method=method)[0] == 405
    assert json.loads(_get(server, "/status.json")[2])["station"] == "s"
    assert _get(server, "/static/app.js")[0] == 200 and _get(server, "/static/../__init__.py")[0] == 404


def test_the_token_is_asked_for_then_kept_in_a_cookie(served, caplog):
    _, start = served
    caplog.set_level(logging.DEBUG)
    server = start(token=TOKEN, bind="127.0.0.1")
    assert _get(server)[0] == 401
    assert _get(server, "/status.json")[0] == 401
    assert _get(server, "/events")[0] == 401
    assert _get(server, "/?token=wrong-token-of-16-chars")[0] == 401
    code, headers, _ = _get(server, f"/?token={TOKEN}")
    assert code == 303 and headers["location"] == "/"
    cookie = headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    assert _get(server, headers={"Cookie": cookie.split(";")[0]})[0] == 200
    assert _get(server, "/status.json", headers={"Authorization": f"Bearer {TOKEN}"})[0] == 200
    assert _get(server, "/status.json", headers={"Authorization": "Bearer nope"})[0] == 401
    assert TOKEN not in caplog.text


def test_events_stream_each_new_status_in_order(served):
    status, start = served
    server = start()
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    conn.request("GET", "/events", headers={"Host": "localhost"})
    resp = conn.getresponse()
    assert resp.status == 200 and resp.getheader("content-type").startswith("text/event-stream")
    seen = []

    def read_event():
        lines = []
        while True:
            line = resp.readline().decode()
            if line == "\n" and lines:
                return lines
            if line.strip():
                lines.append(line.strip())

    read_event()  # retry:
    for n in range(2, 5):
        seen.append(read_event())
        tmp = status.with_name("status.tmp")
        tmp.write_text(json.dumps({"station": "s", "slots": [], "n": n}))
        os.replace(tmp, status)
    seen.append(read_event())
    conn.close()
    ids = [int(e[0].split(": ")[1]) for e in seen]
    ns = [json.loads(e[2][len("data: "):])["n"] for e in seen]
    assert ids == sorted(ids) and len(set(ids)) == 4 and ns == [1, 2, 3, 4]


def test_a_port_in_use_stops_the_start_with_exit_5(tmp_path, firmware_dir):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        config = _config(tmp_path, firmware_dir, web_port=port)
        proc = subprocess.run([sys.executable, "-m", "piflash", "station", "run", "--plain", "--config", str(config)],
                              capture_output=True, text=True, timeout=120)
    assert proc.returncode == 5, proc.stdout + proc.stderr
    assert f"key 'web_port': cannot serve the operator's page on 127.0.0.1 port {port}" in proc.stderr
    assert "Traceback" not in proc.stderr
