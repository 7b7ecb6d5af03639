// The management console: reads /api/status and /api/filters, creates,
// deletes and expires filters through the JSON API (docs/CONSOLE.md).
// The filter table is one page of the server's answer: the search (a glob
// on the name), the sorted column and the page are the server's, so every
// filter can be reached however many there are. A filter opens in a view
// of its own (#/filter/NAME): its figures, the chart of its fill and FPR
// (the server's samples of the last hour, /api/history), its actions and
// forms to check and add items. Only the controls the signed-in user may
// use are shown (the "can" of /api/filters: none that writes on a
// replica); the server refuses the others anyway.
"use strict";

const HISTORY_MS = 3600 * 1000;
const REFRESH_MS = 10000;
let pending = null; // the action the confirmation dialog is for
// The table's query: the server searches, sorts and pages.
const list = { match: "", sort: "name", order: "asc", page: 1, per_page: 50 };
let lastTotal = 0;
let seq = 0; // answers to an older request than the latest are dropped

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

// The view a hash stands for: the table, or one filter.
function route() {
  const m = /^#\/filter\/(.*)$/.exec(location.hash);
  if (!m) return null;
  try { return decodeURIComponent(m[1]); } catch (e) { return null; }
}
const filterHash = (name) => "#/filter/" + encodeURIComponent(name);

// A search without a wildcard looks for the text anywhere in the name; one
// with a wildcard is the Redis glob as typed.
function glob(text) {
  const t = text.trim();
  if (!t || /[*?[\\]/.test(t)) return t;
  return "*" + t + "*";
}
// A name as a glob that matches only itself.
const exact = (name) => name.replace(/[*?[\]\\]/g, "\\$&");

function actions(f, inView) {
  const out = [];
  const after = () => (inView ? refresh() : null);
  if (f.can.expire)
    out.push(el("button", { class: "expire", type: "button", onclick: (ev) => {
      ev.stopPropagation();
      confirmAction("Expire filter \u201c" + f.name + "\u201d?", true,
        () => api("/api/filters/expire", { name: f.name, seconds: $("confirm-seconds").value }));
    } }, "Expire"), " ");
  if (inView && f.can.persist && f.ttl >= 0)
    out.push(el("button", { class: "persist", type: "button", onclick: async () => {
      try { await api("/api/filters/persist", { name: f.name }); } catch (e) { viewError(e); }
      after();
    } }, "Persist"), " ");
  if (inView && f.can.readonly)
    out.push(el("button", { class: "readonly", type: "button", onclick: async () => {
      try {
        await api("/api/filters/readonly", { name: f.name, readonly: f.read_only ? "no" : "yes" });
      } catch (e) { viewError(e); }
      after();
    } }, f.read_only ? "Make writable" : "Make read-only"), " ");
  if (f.can.delete)
    out.push(el("button", { class: "danger delete", type: "button", onclick: (ev) => {
      ev.stopPropagation();
      confirmAction("Delete filter \u201c" + f.name + "\u201d? This cannot be undone.", false,
        async () => {
          await api("/api/filters/delete", { name: f.name });
          if (inView) location.hash = "#/";
        });
    } }, "Delete"));
  return out;
}

function viewError(e) { $("view-error").textContent = e ? e.message : ""; }

function renderFilters(data) {
  $("create").classList.toggle("hidden", !data.can.create);
  $("user").textContent = data.user;
  lastTotal = data.total;
  const pages = Math.max(1, Math.ceil(data.total / data.per_page));
  $("filters-total").textContent = count(data.total) + (data.total === 1 ? " filter" : " filters") +
    (list.match ? " match" + (data.total === 1 ? "es" : "") + " \u201c" + list.match + "\u201d" : "");
  $("page-info").textContent = "page " + count(data.page) + " of " + count(pages);
  $("page-prev").disabled = data.page <= 1;
  $("page-next").disabled = data.page >= pages;
  $("filters-note").textContent = data.total === 0
    ? (list.match ? "No filter matches." : "No filters yet.")
    : data.role === "replica" ? "This node is a replica: its filters are read-only here." : "";
  for (const th of document.querySelectorAll("#filter-table th[data-sort]")) {
    const on = th.dataset.sort === list.sort;
    th.setAttribute("aria-sort", on ? (list.order === "asc" ? "ascending" : "descending") : "none");
    th.replaceChildren(th.dataset.label, on ? el("span", { class: "arrow" },
      list.order === "asc" ? " \u25b2" : " \u25bc") : "");
  }
  const rows = data.filters.map((f) => {
    const bar = el("span", { class: "bar" + (f.fill > 0.9 ? " hot" : "") }, el("span"));
    bar.firstChild.style.width = Math.min(100, 100 * f.fill) + "%";
    const name = el("td", { class: "name key", title: f.name },
      el("a", { href: filterHash(f.name) }, f.name));
    if (f.read_only) name.prepend(el("span", { class: "badge ro ro-flag" }, "read-only"));
    return el("tr", { "data-name": f.name, class: "filter-row",
                      onclick: () => { location.hash = filterHash(f.name); } },
      name,
      el("td", { title: f.type }, f.layout),
      el("td", { class: "num" }, count(f.capacity)),
      el("td", { class: "num items" }, count(f.items)),
      el("td", { class: "num" }, bar, pct(f.fill)),
      el("td", { class: "num" }, fpr(f.fpr)),
      el("td", { class: "num" }, bytes(f.bytes)),
      el("td", { class: "num" }, duration(f.ttl)),
      el("td", {}, ...actions(f, false)));
  });
  $("filter-table").tBodies[0].replaceChildren(...rows);
}

let viewed = null; // the filter shown in the view: its forms are kept while it stays

function renderView(name, data, history) {
  const f = data.filters.find((x) => x.name === name);
  $("user").textContent = data.user;
  if (viewed !== name) {
    viewed = name;
    for (const id of ["check", "add"]) {
      $(id + "-items").value = "";
      $(id + "-error").textContent = "";
      $(id + "-results").classList.add("hidden");
    }
    viewError(null);
  }
  $("view-name").textContent = name;
  $("ro-badge").classList.toggle("hidden", !(f && f.read_only));
  if (!f) {
    $("view-stats").replaceChildren(el("div", {}, "No such filter (deleted, expired, or not " +
                                                  "readable by this user)."));
    $("view-actions").replaceChildren();
    $("check-form").classList.add("hidden");
    $("add-form").classList.add("hidden");
    drawChart(null);
    return;
  }
  const items = [
    ["Type", f.type], ["Layout", f.layout], ["Capacity", count(f.capacity)],
    ["Items", count(f.items)], ["Fill", pct(f.fill)], ["Live FPR", fpr(f.fpr)],
    ["Memory", bytes(f.bytes)], ["Parts", count(f.parts)], ["TTL", duration(f.ttl)],
    ["Writes", f.read_only ? "refused (read-only)" : data.role === "replica"
      ? "on the master only" : "allowed"],
  ];
  $("view-stats").replaceChildren(...items.map(([k, v]) =>
    el("div", { "data-field": k }, el("dt", {}, k), el("dd", {}, v))));
  $("view-actions").replaceChildren(...actions(f, true));
  $("check-form").classList.toggle("hidden", !f.can.check);
  // No add form on a replica, for a user who may not add, or on a
  // read-only filter (the server says so with can.add).
  $("add-form").classList.toggle("hidden", !f.can.add);
  drawChart(history, name);
}

function showResults(kind, items, reply) {
  const t = $(kind + "-results");
  const words = kind === "check" ? ["not present", "maybe present"] : ["already there", "added"];
  t.tBodies[0].replaceChildren(...items.map((it, i) => {
    const r = Array.isArray(reply) ? reply[i] : null;
    const text = r === 0 || r === 1 ? words[r] : r && r.error ? r.error : String(r);
    return el("tr", { "data-item": it, class: r === 1 ? "hit" : "" },
      el("td", { class: "key", title: it }, it), el("td", { class: "answer" }, text));
  }));
  t.classList.remove("hidden");
}

async function itemsSubmit(kind, ev) {
  ev.preventDefault();
  const items = $(kind + "-items").value.split("\n").map((x) => x.replace(/\r$/, ""))
    .filter((x) => x !== "");
  $(kind + "-error").textContent = "";
  try {
    const r = await api("/api/filters/" + kind, { name: viewed, items: items.join("\n") });
    showResults(kind, items, r.reply);
  } catch (e) {
    $(kind + "-error").textContent = e.message;
    $(kind + "-results").classList.add("hidden");
  }
  if (kind === "add") refresh();
}

function drawChart(history) {
  const box = $("chart-box");
  box.classList.toggle("hidden", !history);
  if (!history) return;
  const points = history.samples;
  $("chart-interval").textContent = history.interval_s;
  $("chart-title").textContent = points.length ? "The last hour"
    : "The last hour: no samples yet (the server samples the first metrics-max-key-series " +
      "filters)";
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

function listQuery() {
  const q = { sort: list.sort, order: list.order, page: list.page, per_page: list.per_page };
  const m = glob(list.match);
  if (m) q.match = m;
  return new URLSearchParams(q);
}

async function refresh() {
  const mine = ++seq;
  const name = route();
  $("filters").classList.toggle("hidden", name !== null);
  $("status").classList.toggle("hidden", name !== null);
  $("filter-view").classList.toggle("hidden", name === null);
  if (name === null) viewed = null;
  // On the list it keeps its state until the list answers: hidden at each
  // periodic refresh, it took the focus from whoever was filling it in.
  if (name !== null) $("create").classList.add("hidden");
  try {
    // A user who may not run INFO still sees the filters.
    try { renderStatus(await api("/api/status")); } catch (e) {
      $("status-list").replaceChildren(el("div", {}, e.message));
    }
    if (name === null) {
      const data = await api("/api/filters?" + listQuery());
      if (mine !== seq) return;
      const last = Math.max(1, Math.ceil(data.total / data.per_page));
      if (data.page > last) { list.page = last; return refresh(); } // filters went meanwhile
      renderFilters(data);
    } else {
      const data = await api("/api/filters?" +
        new URLSearchParams({ match: exact(name), per_page: 1 }));
      const history = data.filters.length
        ? await api("/api/history?" + new URLSearchParams({ name })) : null;
      if (mine !== seq) return;
      renderView(name, data, history);
    }
  } catch (e) {
    if (mine !== seq) return;
    $("node-summary").textContent = e.message;
    if (name === null) $("filters-note").textContent = e.message;
    else viewError(e);
  }
}

let sizingTimer = null;
let sizingSeq = 0; // only the latest request's answer is shown: answers can come back out of order
function updateSizing() {
  clearTimeout(sizingTimer);
  const mine = ++sizingSeq;
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
      if (mine !== sizingSeq) return;
      out.className = "sizing";
      out.textContent = "Will allocate " + bytes(s.bytes) + " (" + s.bits_per_key.toFixed(2) +
        " bits per key, " + s.layout + " layout); expected FPR at capacity " +
        s.expected_fpr.toExponential(2) + ".";
    } catch (e) {
      if (mine !== sizingSeq) return;
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
  for (const th of document.querySelectorAll("#filter-table th[data-sort]")) {
    th.dataset.label = th.textContent;
    th.addEventListener("click", () => {
      if (list.sort === th.dataset.sort) list.order = list.order === "asc" ? "desc" : "asc";
      else { list.sort = th.dataset.sort; list.order = "asc"; }
      list.page = 1;
      refresh();
    });
  }
  let searchTimer = null;
  $("search").addEventListener("input", () => {
    clearTimeout(searchTimer);
    searchTimer = setTimeout(() => { list.match = $("search").value; list.page = 1; refresh(); },
                             200);
  });
  $("page-prev").addEventListener("click", () => { list.page = Math.max(1, list.page - 1); refresh(); });
  $("page-next").addEventListener("click", () => { list.page++; refresh(); });
  $("per-page").addEventListener("change", () => {
    list.per_page = Number($("per-page").value);
    list.page = 1;
    refresh();
  });
  $("check-form").addEventListener("submit", (ev) => itemsSubmit("check", ev));
  $("add-form").addEventListener("submit", (ev) => itemsSubmit("add", ev));
  window.addEventListener("hashchange", () => { window.scrollTo(0, 0); refresh(); });
  refresh();
  setInterval(refresh, REFRESH_MS);
});
