// The management console: reads /api/status and /api/filters, creates,
// deletes and expires filters through the JSON API (docs/CONSOLE.md).
// The chart of a filter's fill and FPR shows the server's samples of the
// last hour (/api/history). Only the buttons the signed-in user may use
// are shown (the "can" of /api/filters); the server refuses the others
// anyway.
"use strict";

const HISTORY_MS = 3600 * 1000;
const REFRESH_MS = 10000;
let selected = null;
let pending = null; // the action the confirmation dialog is for

const $ = (id) => document.getElementById(id);

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c instanceof Node ? c : String(c));
  return e;
}

function bytes(n) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : n) + " " + units[i];
}

function count(n) { return Number(n).toLocaleString("en-US"); }
function pct(x) { return (100 * x).toFixed(x < 0.1 ? 2 : 1) + "%"; }
function fpr(x) { return x === null ? "—" : x === 0 ? "0" : x.toExponential(2); }
function duration(s) {
  if (s < 0) return "none";
  if (s < 120) return Math.round(s) + " s";
  if (s < 7200) return Math.round(s / 60) + " min";
  if (s < 172800) return (s / 3600).toFixed(1) + " h";
  return (s / 86400).toFixed(1) + " d";
}

// A page opened as http://user:pass@host/ keeps the credentials in its base
// URL, and fetch() refuses any URL that carries them: requests are built on
// the origin, which never has them (the browser still sends the password).
function apiUrl(path) { return new URL(path, location.origin).href; }

// A count as typed ("1e6", "2,000,000") in digits, as BF.RESERVE wants them;
// anything else unchanged, for the server to refuse in its own words.
function digits(s) {
  const t = String(s).trim().replace(/[,_\s]/g, "");
  if (!/^\d+(\.\d*)?(e\+?\d+)?$/i.test(t)) return s;
  const n = Number(t);
  return Number.isSafeInteger(n) ? String(n) : s;
}

async function api(path, form) {
  const opts = form
    ? { method: "POST", body: new URLSearchParams(form),
        headers: { "X-Bloomery-Console": "1" } }
    : {};
  let resp;
  try {
    resp = await fetch(apiUrl(path), opts);
  } catch (e) {
    throw new Error("cannot reach the server (" + e.message + ")");
  }
  const text = await resp.text();
  let body = null;
  try { body = JSON.parse(text); } catch (e) { /* a proxy's page, not the API's answer */ }
  if (!resp.ok)
    throw new Error((body && body.error) || (resp.status + " " + resp.statusText + ": " +
                                             text.slice(0, 200)).trim());
  if (body === null) throw new Error("the server's answer to " + path + " is not JSON");
  return body;
}

function renderStatus(s) {
  const list = $("status-list");
  const when = (t) => (t ? new Date(t * 1000).toLocaleString() : "never");
  const p = s.persistence, r = s.replication;
  const items = [
    ["Version", s.version],
    ["Uptime", duration(s.uptime_s)],
    ["Memory used", bytes(s.memory.used) + (s.memory.max ? " of " + bytes(s.memory.max) : "")],
    ["Keys", count(s.keys)],
    ["Clients", count(s.connected_clients)],
    ["Log", p.log_enabled ? (p.log_write_ok ? "ok" : "WRITE ERROR") : "off"],
    ["Last fsync", when(p.last_fsync_s)],
    ["Pending log bytes", bytes(p.pending_bytes)],
    ["Last snapshot", when(p.last_snapshot_s) + (p.last_snapshot_ok ? "" : " (last failed)")],
    ["Changes since snapshot", count(p.changes_since_snapshot)],
    ["Role", r.role + (r.role === "replica"
      ? " of " + r.master + ":" + r.master_port + (r.link_up ? " (link up)" : " (link down)") : "")],
    ["Replicas", r.replicas.length],
  ];
  list.replaceChildren(...items.map(([k, v]) =>
    el("div", { "data-field": k }, el("dt", {}, k), el("dd", {}, v))));
  $("node-summary").textContent = r.role + " · up " + duration(s.uptime_s);
  const rt = $("replicas");
  rt.classList.toggle("hidden", r.replicas.length === 0);
  rt.tBodies[0].replaceChildren(...r.replicas.map((x) => el("tr", {},
    el("td", {}, x.ip + ":" + x.port), el("td", {}, x.state),
    el("td", { class: "num" }, x.lag_s), el("td", { class: "num" }, x.lag_records))));
}

function confirmAction(text, withSeconds, action) {
  pending = action;
  $("confirm-text").textContent = text;
  $("confirm-seconds-label").classList.toggle("hidden", !withSeconds);
  $("confirm").showModal();
}

function actions(f) {
  const out = [];
  if (f.can.expire)
    out.push(el("button", { class: "expire", onclick: (ev) => {
      ev.stopPropagation();
      confirmAction("Expire filter \u201c" + f.name + "\u201d?", true,
        () => api("/api/filters/expire", { name: f.name, seconds: $("confirm-seconds").value }));
    } }, "Expire"), " ");
  if (f.can.delete)
    out.push(el("button", { class: "danger delete", onclick: (ev) => {
      ev.stopPropagation();
      confirmAction("Delete filter \u201c" + f.name + "\u201d? This cannot be undone.", false,
        () => api("/api/filters/delete", { name: f.name }));
    } }, "Delete"));
  return out;
}

function renderFilters(data, history) {
  $("create").classList.toggle("hidden", !data.can.create);
  $("user").textContent = data.user;
  $("filters-note").textContent = data.filters.length === 0 ? "No filters yet."
    : data.truncated ? "Showing the first " + data.filters.length +
      " filters (metrics-max-key-series)." : "";
  const rows = data.filters.map((f) => {
    const bar = el("span", { class: "bar" + (f.fill > 0.9 ? " hot" : "") }, el("span"));
    bar.firstChild.style.width = Math.min(100, 100 * f.fill) + "%";
    const tr = el("tr", { "data-name": f.name, onclick: () => { selected = f.name; refresh(); } },
      el("td", { class: "name" }, f.name),
      el("td", {}, f.layout),
      el("td", { class: "num" }, count(f.capacity)),
      el("td", { class: "num items" }, count(f.items)),
      el("td", { class: "num" }, bar, pct(f.fill)),
      el("td", { class: "num" }, fpr(f.fpr)),
      el("td", { class: "num" }, bytes(f.bytes)),
      el("td", { class: "num" }, duration(f.ttl)),
      el("td", {}, ...actions(f)));
    if (f.name === selected) tr.classList.add("selected");
    return tr;
  });
  $("filter-table").tBodies[0].replaceChildren(...rows);
  drawChart(history);
}

function drawChart(history) {
  const box = $("chart-box");
  box.classList.toggle("hidden", !history);
  if (!history) return;
  const points = history.samples;
  $("chart-interval").textContent = history.interval_s;
  $("chart-title").textContent = selected + ": the last hour";
  const svg = $("chart");
  const W = 640, H = 200, L = 40, R = 50, T = 10, B = 20;
  const now = history.now_ms; // the samples' times are on the server's clock
  const x = (t) => L + (W - L - R) * (1 - (now - t) / HISTORY_MS);
  const yFill = (v) => T + (H - T - B) * (1 - Math.min(1, v));
  const lo = -12; // FPR axis: 1e-12 .. 1
  const yFpr = (v) => T + (H - T - B) * (Math.max(lo, Math.log10(Math.max(v, 1e-300))) / lo);
  const ns = "http://www.w3.org/2000/svg";
  const node = (tag, attrs, text) => {
    const e = document.createElementNS(ns, tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    return e;
  };
  const parts = [
    node("line", { class: "axis", x1: L, y1: H - B, x2: W - R, y2: H - B }),
    node("line", { class: "axis", x1: L, y1: T, x2: L, y2: H - B }),
    node("line", { class: "axis", x1: W - R, y1: T, x2: W - R, y2: H - B }),
    node("text", { x: 4, y: T + 8 }, "100%"), node("text", { x: 10, y: H - B }, "0%"),
    node("text", { x: W - R + 4, y: T + 8 }, "1"), node("text", { x: W - R + 4, y: H - B }, "1e-12"),
    node("text", { x: L, y: H - 4 }, "-60 min"), node("text", { x: W - R - 20, y: H - 4 }, "now"),
  ];
  const line = (cls, f) => points.filter((p) => f(p) !== null)
    .map((p, i) => (i ? "L" : "M") + x(p[0]).toFixed(1) + "," + f(p).toFixed(1)).join(" ");
  parts.push(node("path", { class: "fill", d: line("fill", (p) => yFill(p[1])) || "M0,0" }));
  parts.push(node("path", { class: "fpr",
    d: line("fpr", (p) => (p[2] === null ? null : yFpr(p[2]))) || "M0,0" }));
  // Each sample as a dot too: a single one has no line yet.
  for (const p of points) {
    parts.push(node("circle", { class: "fill", cx: x(p[0]), cy: yFill(p[1]), r: 2.5 }));
    if (p[2] !== null)
      parts.push(node("circle", { class: "fpr", cx: x(p[0]), cy: yFpr(p[2]), r: 2.5 }));
  }
  svg.replaceChildren(...parts);
}

async function refresh() {
  try {
    // A user who may not run INFO still sees the filters.
    try { renderStatus(await api("/api/status")); } catch (e) {
      $("status-list").replaceChildren(el("div", {}, e.message));
    }
    const filters = await api("/api/filters");
    if (selected && !filters.filters.some((f) => f.name === selected)) selected = null;
    const history = selected
      ? await api("/api/history?" + new URLSearchParams({ name: selected })) : null;
    renderFilters(filters, history);
  } catch (e) {
    $("node-summary").textContent = e.message;
  }
}

let sizingTimer = null;
function updateSizing() {
  clearTimeout(sizingTimer);
  if (!$("f-capacity").value.trim() || !$("f-error").value.trim()) {
    // Nothing to size yet (a field being retyped): no request, no error.
    $("sizing").className = "sizing";
    $("sizing").textContent = "Enter a capacity and an error rate.";
    return;
  }
  sizingTimer = setTimeout(async () => {
    const q = new URLSearchParams({
      capacity: digits($("f-capacity").value), error_rate: $("f-error").value,
      layout: $("f-layout").value, window: $("f-window").value, slices: $("f-slices").value });
    const out = $("sizing");
    try {
      const s = await api("/api/calc?" + q);
      out.className = "sizing";
      out.textContent = "Will allocate " + bytes(s.bytes) + " (" + s.bits_per_key.toFixed(2) +
        " bits per key, " + s.layout + " layout); expected FPR at capacity " +
        s.expected_fpr.toExponential(2) + ".";
    } catch (e) {
      out.className = "sizing error";
      out.textContent = e.message;
    }
  }, 150);
}

document.addEventListener("DOMContentLoaded", () => {
  // "change" too: a select chosen by script or by some browsers' keyboard
  // handling fires no "input".
  for (const id of ["f-capacity", "f-error", "f-layout", "f-window", "f-slices"])
    for (const ev of ["input", "change"]) $(id).addEventListener(ev, updateSizing);
  updateSizing();
  $("create-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const result = $("create-result");
    const form = Object.fromEntries(new FormData(ev.target));
    form.capacity = digits(form.capacity);
    try {
      await api("/api/filters", form);
      result.className = "ok";
      result.textContent = "Created \u201c" + form.name + "\u201d.";
      selected = form.name;
    } catch (e) {
      result.className = "error";
      result.textContent = e.message;
    }
    refresh();
  });
  $("confirm").addEventListener("close", async () => {
    const action = pending;
    pending = null;
    if ($("confirm").returnValue !== "ok" || !action) return;
    try { await action(); } catch (e) { $("node-summary").textContent = e.message; }
    refresh();
  });
  refresh();
  setInterval(refresh, REFRESH_MS);
});
