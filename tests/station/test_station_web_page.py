"""Issue 44, the operator's page in a real browser: Debian's headless Chromium
(``/usr/bin/chromium``, installed by scripts/dev-setup.sh test), driven by Playwright's Python API
(never ``playwright install``), against a real station process serving two simulated slots.

The station goes through a pass, a fail with its hint, a board pulled mid-programming, then a
swap; each state is asserted in the page's DOM as it arrives by server-sent events (no reload),
and the events are checked to arrive in order. The colours are checked for WCAG 2.1 AA contrast
(computed here from the page's computed styles), PASS/FAIL for >= 48 px at 800x480, and
screenshots at 800x480 and 390x844 are kept in tests/artifacts/ (git-ignored; CI can keep the
folder). No timing is asserted: the latency lives in benchmarks/web_latency.py.
"""

from __future__ import annotations

import json
import os
import re
import socket
from pathlib import Path

import pytest

pytest.importorskip("unicorn")
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (the test extra) is not installed")

from support.stationkit import MID_PROGRAM_TRANSFERS, wait_for, wait_rows, write_config, write_profile  # noqa: E402

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(),
                                reason="Debian's chromium is not installed (apt-get install chromium)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _luminance(rgb):
    """WCAG 2.1 relative luminance of an sRGB colour (0..255 channels), "relative luminance"."""
    def lin(c):
        c = c / 255
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4
    r, g, b = (lin(c) for c in rgb)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(fg, bg) -> float:
    """WCAG 2.1 contrast ratio (L1 + 0.05) / (L2 + 0.05)."""
    hi, lo = sorted((_luminance(fg), _luminance(bg)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


#: Each element's text colour and the background it is drawn on (the first ancestor's that is
#: not transparent), from the computed styles.
COLOURS_JS = """
(sel) => [...document.querySelectorAll(sel)].filter(e => e.offsetParent !== null || e === document.body).map(e => {
  const fg = getComputedStyle(e).color;
  let n = e, bg = 'rgba(0, 0, 0, 0)';
  while (n && n.nodeType === 1) {
    const c = getComputedStyle(n).backgroundColor;
    if (!/rgba\\(.*, 0\\)$/.test(c) && c !== 'transparent') { bg = c; break; }
    n = n.parentElement;
  }
  return {sel: sel, text: e.textContent.slice(0, 30), fg: fg, bg: bg};
})
"""


def _rgb(css: str):
    return tuple(int(float(x)) for x in re.findall(r"[\d.]+", css)[:3])


def _slot(page, probe):
    return page.locator(f'article.slot[data-probe="{probe}"]')


def _wait_slot(page, station, probe, outcome, state=None, uid=None):
    """Wait until the page shows ``probe``'s last result ``outcome`` (and state, board)."""
    cond = f'e.dataset.outcome === "{outcome}"' + (f' && e.dataset.state === "{state}"' if state else "")
    if uid:
        cond += f' && e.textContent.includes("{uid}")'
    try:
        page.wait_for_function(
            f'() => {{ const e = document.querySelector(\'article.slot[data-probe="{probe}"]\'); return e && ({cond}); }}',
            timeout=60000)
    except sync_api.TimeoutError:
        raise AssertionError(f"{probe} never showed {outcome}: the page shows "
                             f"{page.locator('#slots').inner_text()!r}; the station said:\n"
                             f"{station.output() if station else '-'}") from None


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        yield b
        b.close()


def test_the_page_follows_two_slots_live(tmp_path, store, firmware_dir, stations, browser):
    history = tmp_path / "history.sqlite3"
    port = _free_port()
    profile = write_profile(tmp_path, firmware_dir / "nrf52840" / "firmware.hex", name="widget")
    config = write_config(tmp_path, profile, ["sim:a", "sim:b"], history, web_port=port)
    a1 = store.create("a", "nrf52840")
    store.create("b", "nrf52840")
    store.pull("b")                                   # slot b's probe is there, its fixture empty
    env = {k: v for k, v in os.environ.items() if k != "RUNTIME_DIRECTORY"}
    station = stations(config, tmp_path / "station.log", env)
    station.wait_output("operator's page: ")
    page = browser.new_page(viewport={"width": 800, "height": 480})
    page.goto(f"http://127.0.0.1:{port}/")

    # 1. a pass on slot a; slot b waits for its board.
    _wait_slot(page, station, "sim:a", "pass", uid=a1.target_uid.lower())
    assert _slot(page, "sim:a").locator(".verdict").inner_text() == "PASS"
    assert _slot(page, "sim:b").get_attribute("data-outcome") == ""
    assert "sim" in _slot(page, "sim:a").locator(".kind").inner_text()

    # 2. a fail with its hint on slot b (its flash is write-protected: verify fails).
    b1 = store.swap("b", faults={"write_protect": [0x1000]})
    _wait_slot(page, station, "sim:b", "fail", uid=b1.target_uid.lower())
    b = _slot(page, "sim:b")
    assert b.locator(".verdict").inner_text() == "FAIL"
    assert "verify failed" in b.locator(".error").inner_text()
    doc = json.loads((tmp_path / "status.json").read_text())
    hint = [s for s in doc["slots"] if s["probe_id"] == "sim:b"][0]["last_result"]["error"]["hint"]
    assert hint and b.locator(".hint").inner_text() == f"hint: {hint}"

    # 3. slot a's next board is pulled mid-programming.
    a2 = store.swap("a", faults={"remove_after": MID_PROGRAM_TRANSFERS})
    _wait_slot(page, station, "sim:a", "fail", uid=a2.target_uid.lower())
    a = _slot(page, "sim:a")
    assert a.locator(".verdict").inner_text() == "FAIL"
    assert "board removed during program" in a.locator(".error").inner_text()

    # The 800x480 screen with a FAIL on each slot: big, coloured, readable.
    for verdict in page.locator(".verdict").all():
        box = verdict.bounding_box()
        size = float(verdict.evaluate("e => parseFloat(getComputedStyle(e).fontSize)"))
        assert box["height"] >= 48 and size >= 48 and box["y"] + box["height"] <= 480, (box, size)
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "station-page-800x480-fail.png"))

    # 4. a swap: slot a's new board passes.
    a3 = store.swap("a")
    _wait_slot(page, station, "sim:a", "pass", uid=a3.target_uid.lower())
    rows = wait_rows(history, 4, station)
    wait_for(lambda: page.locator("#recent tbody tr").count() == 4, "the four history rows on the page")
    shown = [int(x) for x in page.locator("#recent tbody tr").evaluate_all("rs => rs.map(r => r.dataset.id)")]
    assert shown == [r["id"] for r in reversed(rows)]
    assert page.locator("#passed").inner_text() == "2" and page.locator("#failed").inner_text() == "2"
    assert page.locator("#yield").inner_text() == "50.0%"
    assert page.locator("#sha256").inner_text() == rows[0]["firmware_sha256"]
    assert page.locator("#bundle").inner_text() == "none" and page.locator("#ledger").inner_text() == "none"
    assert page.locator("#link").get_attribute("data-state") == "live"

    # Updates arrived in order, without a reload: ids rising, the station's times never going back,
    # and slot a's results seen as pass, fail (its pulled board), pass (the swap). A state shorter
    # than the server's look at the file (0.2 s) may be folded into the next: the page shows the newest.
    updates = page.evaluate("window.piflashUpdates.map(u => ({id: u.id, at: u.updated_at, doc: u.doc}))")
    ids = [u["id"] for u in updates]
    assert ids == sorted(set(ids)) and len(ids) >= 4, ids
    assert [u["at"] for u in updates] == sorted(u["at"] for u in updates)
    seq = []
    for u in updates:
        (s,) = [s for s in u["doc"]["slots"] if s["probe_id"] == "sim:a"]
        last = s["last_result"] or {}
        step = (last.get("outcome"), last.get("target_uid"))
        if last and (not seq or seq[-1] != step):
            seq.append(step)
    assert seq == [("pass", a1.target_uid.lower()), ("fail", a2.target_uid.lower()),
                   ("pass", a3.target_uid.lower())], seq
    assert page.evaluate("performance.getEntriesByType('navigation').length") == 1    # never reloaded

    # WCAG AA: 4.5:1 for every text the page shows, in each state seen.
    checked = []
    for sel in ("body", "h1", "h2", ".link", ".verdict", ".slot .head span", ".board", ".phase span", ".error",
                ".hint", "#counters div", "#counters .n", "#about div", "#about span", "#about code", "th", "td"):
        for c in page.evaluate(COLOURS_JS, sel):
            ratio = contrast(_rgb(c["fg"]), _rgb(c["bg"]))
            checked.append(c["sel"])
            assert ratio >= 4.5, (c, round(ratio, 2))
    assert {".verdict", ".hint", ".error", "td"} <= set(checked)
    # ... and the two colours of a slot in flight (yellow), forced onto a verdict here.
    busy = page.evaluate("""() => { const v = document.querySelector('.verdict'); v.className = 'verdict busy';
        const s = getComputedStyle(v); return [s.color, s.backgroundColor]; }""")
    assert contrast(_rgb(busy[0]), _rgb(busy[1])) >= 4.5

    page.reload()
    _wait_slot(page, station, "sim:a", "pass", uid=a3.target_uid.lower())
    page.screenshot(path=str(ARTIFACTS / "station-page-800x480.png"))
    phone = browser.new_page(viewport={"width": 390, "height": 844})
    phone.goto(f"http://127.0.0.1:{port}/")
    _wait_slot(phone, station, "sim:b", "fail")
    for verdict in phone.locator(".verdict").all():
        assert verdict.bounding_box()["height"] >= 48
    assert phone.evaluate("document.documentElement.scrollWidth") <= 390      # nothing wider than the phone
    phone.screenshot(path=str(ARTIFACTS / "station-page-390x844.png"), full_page=True)

    # The station stops: the page says so.
    assert station.stop() == 0
    page.wait_for_function("() => document.getElementById('link').dataset.state !== 'live'", timeout=30000)


def test_a_token_page_opens_once_with_the_token_then_by_its_cookie(tmp_path, browser):
    """With a token, /?token=T sets the cookie and leaves the address bar; the live stream
    (EventSource, same origin) then carries the cookie; without it the page is 401."""
    from piflash.station.web import WebServer

    status = tmp_path / "status.json"
    doc = {"schema_version": 1, "station": "tok", "profile": "p", "target": "nrf52840",
           "firmware": {"path": "/fw.hex", "sha256": "ab" * 32}, "bundle_version": 7,
           "ledger": {"url": "postgresql://l@db/x", "reached": True, "queued": 3}, "stopped_at": None,
           "slots": [{"probe_id": "sim:t", "probe_kind": "sim", "state": "flashing", "text": "flashing 40%",
                      "phase": "program", "progress": 0.4, "target_uid": "00112233", "serial": "17",
                      "last_result": None}],
           "counters": {"passed": 0, "failed": 0, "skipped": 0, "yield": None, "boards_per_hour": None},
           "recent": []}
    status.write_text(json.dumps(doc))
    token = "0123456789abcdef0123"
    server = WebServer(lambda: status, 0, "127.0.0.1", token, interval=0.05)
    try:
        page = browser.new_page(viewport={"width": 800, "height": 480})
        assert page.goto(f"http://127.0.0.1:{server.port}/").status == 401
        page.goto(f"http://127.0.0.1:{server.port}/?token={token}")
        assert page.url == f"http://127.0.0.1:{server.port}/"                # the token left the address bar
        page.wait_for_function("() => window.piflashUpdates.length > 0")
        slot = _slot(page, "sim:t")
        assert slot.locator(".verdict").inner_text() == "PROGRAM" and "program 40%" in slot.inner_text()
        assert "serial 17" in slot.inner_text()
        assert page.locator("#bundle").inner_text() == "version 7"
        assert page.locator("#ledger").inner_text() == "reached, 3 queued"
        doc["slots"][0].update(state="pass", phase=None, progress=None, text="PASS 00112233 #9",
                               last_result={"outcome": "pass", "text": "PASS 00112233 #9", "target_uid": "00112233",
                                            "serial": "17", "error": None, "history_id": 9,
                                            "ended_at": "2026-12-07T21:00:00.000+00:00"})
        status.with_name("next.json").write_text(json.dumps(doc))
        os.replace(status.with_name("next.json"), status)
        _wait_slot(page, None, "sim:t", "pass")
        assert slot.locator(".verdict").inner_text() == "PASS" and "history #9" in slot.inner_text()
    finally:
        server.close()
    assert (ARTIFACTS / "station-page-390x844.png").stat().st_size > 1000
