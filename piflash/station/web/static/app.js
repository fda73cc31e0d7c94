// The operator's page: renders each status event of /events (the station's status file, see
// piflash/station/web/__init__.py). Text goes in with textContent only: nothing from the file is
// ever parsed as HTML. window.piflashUpdates keeps what arrived, in order, for the tests and the
// latency benchmark: {id, updated_at, shown_ms (Date.now() once rendered)}.
"use strict";
window.piflashUpdates = [];

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = String(text);
  return e;
}

function verdictOf(slot) {
  if (slot.state === "flashing" || (slot.state === "stopping" && slot.phase)) return ["busy", slot.phase ? slot.phase.toUpperCase() : "BUSY"];
  const last = slot.last_result;
  if (last && last.outcome === "pass") return ["pass", "PASS"];
  if (last && last.outcome === "skip") return ["skip", "PASS"];
  if (last && last.outcome === "fail") return ["fail", "FAIL"];
  if (slot.state === "waiting_probe") return ["idle", "NO PROBE"];
  if (slot.state === "stopping") return ["idle", "STOPPED"];
  return ["idle", "READY"];
}

function renderSlot(slot) {
  const [cls, word] = verdictOf(slot);
  const last = slot.last_result || {};
  const card = el("article", "slot");
  card.dataset.probe = slot.probe_id;
  card.dataset.state = slot.state;
  card.dataset.outcome = last.outcome || "";
  const head = el("div", "head");
  head.append(el("span", "probe", slot.probe_id), el("span", "kind", slot.probe_kind));
  card.append(head);
  const uid = slot.target_uid || last.target_uid;
  const serial = slot.serial || last.serial;
  card.append(el("div", "board", uid ? `board ${uid}` + (serial ? ` · serial ${serial}` : "") : "no board"));
  const v = el("div", "verdict " + cls, word);
  v.setAttribute("role", "status");
  card.append(v);
  const phase = el("div", "phase");
  if (slot.progress !== null && slot.progress !== undefined) {
    const bar = el("progress");
    bar.max = 1;
    bar.value = slot.progress;
    phase.append(el("span", "", `${slot.phase || ""} ${Math.round(slot.progress * 100)}%`), bar);
  } else if (["pass", "skip", "fail"].includes(slot.state)) {
    phase.append(el("span", "", last.history_id ? `history #${last.history_id}` : (last.outcome === "skip" ? "already carried the firmware" : "")));
  } else {
    phase.append(el("span", "", slot.text));
  }
  card.append(phase);
  if (last.outcome === "fail" && last.error) {
    card.append(el("div", "error", last.error.message));
    if (last.error.hint) card.append(el("div", "hint", "hint: " + last.error.hint));
  }
  return card;
}

function fmtTime(iso) {
  if (!iso) return "-";
  const m = /T(\d\d:\d\d:\d\d)/.exec(iso);
  return m ? m[1] : iso;
}

function render(doc) {
  document.getElementById("station").textContent = `piflash station ${doc.station}`;
  document.title = `piflash ${doc.station}`;
  const slots = document.getElementById("slots");
  slots.replaceChildren(...doc.slots.map(renderSlot));
  const c = doc.counters;
  document.getElementById("passed").textContent = c.passed;
  document.getElementById("failed").textContent = c.failed;
  document.getElementById("yield").textContent = c.yield === null ? "-" : `${(c.yield * 100).toFixed(1)}%`;
  document.getElementById("rate").textContent = c.boards_per_hour === null ? "-" : c.boards_per_hour;
  document.getElementById("firmware").textContent = `${doc.profile} (${doc.target}): ${doc.firmware.path}`;
  document.getElementById("sha256").textContent = doc.firmware.sha256;
  document.getElementById("bundle").textContent = doc.bundle_version === null ? "none" : `version ${doc.bundle_version}`;
  const ledger = document.getElementById("ledger");
  if (!doc.ledger) ledger.textContent = "none";
  else ledger.textContent = (doc.ledger.reached === true ? "reached" : doc.ledger.reached === false ? "not reached" : "-")
    + (doc.ledger.queued === null ? "" : `, ${doc.ledger.queued} queued`);
  ledger.dataset.reached = doc.ledger ? String(doc.ledger.reached) : "";
  const body = document.querySelector("#recent tbody");
  body.replaceChildren(...(doc.recent || []).map((r) => {
    const tr = el("tr");
    tr.dataset.id = r.id;
    tr.append(el("td", "", r.id), el("td", "", fmtTime(r.ended_at || r.started_at)), el("td", "", r.probe_id),
      el("td", "col-board", r.target_uid), el("td", "col-serial", r.serial || ""), el("td", r.outcome, r.outcome.toUpperCase()),
      el("td", "col-error", r.error || ""));
    return tr;
  }));
  const link = document.getElementById("link");
  if (doc.stopped_at) { link.dataset.state = "stopped"; link.textContent = "station stopped"; }
  else { link.dataset.state = "live"; link.textContent = "live"; }
}

function connect() {
  const source = new EventSource("/events");
  source.addEventListener("status", (ev) => {
    const doc = JSON.parse(ev.data);
    if (doc === null) return;
    render(doc);
    window.piflashUpdates.push({ id: Number(ev.lastEventId), updated_at: doc.updated_at, shown_ms: Date.now(), doc: doc });
    if (window.piflashUpdates.length > 5000) window.piflashUpdates.splice(0, 1000);
  });
  source.onerror = () => {
    const link = document.getElementById("link");
    link.dataset.state = "down";
    link.textContent = "reconnecting";
  };
}

connect();
