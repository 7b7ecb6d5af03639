// The fleet console of `bloomery console`: one page for a whole deployment
// (Sentinel groups, a Redis Cluster, or a list of nodes), over the JSON API
// of docs/CONSOLE.md ("The fleet console"). Plain JavaScript, no build step.
//
// Views are chosen by the URL's hash (#/nodes, #/filters?..., #/filter/NAME,
// #/routing?..., #/create, #/rebalance), so links, reloads and the back
// button work; the catalog's search, sort and page live in the hash too. The
// view shown is refreshed on its own period; an answer that arrives after
// the view changed is dropped. Every failed request puts the server's
// {"error"} text in the banner at the top until the same request succeeds.
// Server text only ever goes into the page as text (textContent, attribute
// values), never as HTML: key names can hold anything.
"use strict";

const TICK_MS = 250;
const OVERVIEW_MS = 10000; // the header's figures while another view is shown

const $ = (id) => document.getElementById(id);

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    e.append(c instanceof Node ? c : String(c));
  }
  return e;
}

function bytes(n) {
  if (n === null || n === undefined) return "\u2014";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0, neg = n < 0;
  n = Math.abs(n);
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (neg ? "-" : "") + (i ? n.toFixed(1) : n) + " " + units[i];
}
const dash = (v) => (v === null || v === undefined ? "\u2014" : v);
const count = (n) => (n === null || n === undefined ? "\u2014" : Number(n).toLocaleString("en-US"));
const pct = (x) => (x === null || x === undefined ? "\u2014"
  : (100 * x).toFixed(x < 0.1 ? 2 : 1) + "%");
const rate = (x) => (x === null || x === undefined ? "\u2014" : x === 0 ? "0" : x.toExponential(2));
function duration(s) {
  if (s < 0) return "none";
  if (s < 120) return Math.round(s) + " s";
  if (s < 7200) return Math.round(s / 60) + " min";
  if (s < 172800) return (s / 3600).toFixed(1) + " h";
  return (s / 86400).toFixed(1) + " d";
}

// Times are the console server's; it says its "now" in /api/overview, so
// "3 min ago" holds even when this machine's clock is off.
let skewMs = 0;
const serverNow = () => Date.now() + skewMs;
function ago(ms) {
  if (ms === null || ms === undefined) return "never";
  return duration(Math.max(0, (serverNow() - ms) / 1000)) + " ago";
}
const stamp = (ms) => (ms === null || ms === undefined ? null : new Date(ms).toLocaleString());

// A count as typed ("1e6", "2,000,000") in digits, as the commands want
// them; anything else unchanged, for the server to refuse in its words.
function digits(s) {
  const t = String(s).trim().replace(/[,_\s]/g, "");
  if (!/^\d+(\.\d*)?(e\+?\d+)?$/i.test(t)) return s;
  const n = Number(t);
  return Number.isSafeInteger(n) ? String(n) : s;
}

// A search without a wildcard looks for the text anywhere in the name; one
// with a wildcard is the Redis glob as typed.
function glob(text) {
  const t = text.trim();
  if (!t || /[*?[\\]/.test(t)) return t;
  return "*" + t + "*";
}

// ---- requests ----

// A page opened as http://user:pass@host/ keeps the credentials in its base
// URL, and fetch() refuses any URL that carries them: requests are built on
// the origin, which never has them (the browser still sends the password).
function apiUrl(path) { return new URL(path, location.origin).href; }

async function api(path, form) {
  const opts = form
    ? { method: "POST", body: new URLSearchParams(form),
        headers: { "X-Bloomery-Console": "1" } }
    : { cache: "no-store" };
  let resp;
  try {
    resp = await fetch(apiUrl(path), opts);
  } catch (e) {
    throw new Error("cannot reach the console server (" + e.message + ")");
  }
  const text = await resp.text();
  let body = null;
  try { body = JSON.parse(text); } catch (e) { /* a proxy's page, not the API's answer */ }
  if (!resp.ok)
    throw new Error((body && body.error) || (resp.status + " " + resp.statusText + " " +
                                             text.slice(0, 200)).trim());
  if (body === null) throw new Error("the answer is not JSON");
  return body;
}

const query = (path, params) => path + "?" + new URLSearchParams(params);

// ---- the banner: what failed, until it works again ----

const problems = new Map();
function problem(source, what, err) {
  problems.set(source, what + ": " + err.message);
  showProblems();
}
function solved(source) {
  if (problems.delete(source)) showProblems();
}
function showProblems() {
  $("banner-list").replaceChildren(...[...problems.values()].map((t) => el("li", {}, t)));
  $("banner").classList.toggle("hidden", problems.size === 0);
}

// Runs a request for source; its failure goes to the banner, its success
// clears what that source had put there. Returns null on failure, and when
// live() says the view it was for is gone (its answer no longer matters).
async function load(source, what, path, live = () => true) {
  try {
    const body = await api(path);
    if (!live()) return null;
    solved(source);
    return body;
  } catch (e) {
    if (live()) problem(source, what, e);
    return null;
  }
}

// A change: its failure goes to the banner and to the place next to the
// control (out), its success clears both.
async function change(what, path, form, out) {
  try {
    const body = await api(path, form);
    solved("action");
    if (out) { out.className = "ok-text"; out.textContent = ""; }
    return body;
  } catch (e) {
    problem("action", what, e);
    if (out) { out.className = "error-text"; out.textContent = e.message; }
    return null;
  }
}

// ---- who, where, and the header ----

let me = { user: "", may_write: false, mode: null };
let meLoaded = false;
let overview = null;

async function loadMe() {
  const m = await load("me", "Cannot read who is signed in (/api/me)", "/api/me");
  if (!m) return;
  me = m;
  meLoaded = true;
  $("user").textContent = me.user;
  $("ro-user").classList.toggle("hidden", !!me.may_write);
  $("tab-create").classList.toggle("hidden", !me.may_write);
  $("tab-rebalance").classList.toggle("hidden", me.mode !== "cluster");
}

function setOverview(o) {
  overview = o;
  skewMs = o.updated_ms - Date.now();
  const crit = o.alerts.filter((a) => a.severity === "critical").length;
  const badge = $("alert-count");
  badge.textContent = o.alerts.length;
  badge.className = "badge " + (crit ? "critical" : "warning") +
    (o.alerts.length ? "" : " hidden");
  badge.title = o.alerts.length + " alert(s)";
  $("deploy-summary").textContent = o.mode + " \u00b7 " + o.groups.length +
    (o.groups.length === 1 ? " group" : " groups") + " \u00b7 " + count(o.filters_total) +
    " filters" + (o.catalog_complete ? "" : " (catalog still loading)") + " \u00b7 updated " +
    new Date(o.updated_ms).toLocaleTimeString();
}

async function loadOverview() {
  const o = await load("overview", "Cannot read the deployment (/api/overview)", "/api/overview");
  if (o) setOverview(o);
  return o;
}

// ---- the confirmation dialog ----

let pending = null;
function confirmAction(text, action) {
  pending = action;
  $("confirm-text").textContent = text;
  $("confirm").showModal();
}

// ---- paging, shared by the catalog's tables ----

function pageParams(p) {
  return {
    page: Math.max(1, parseInt(p.get("page"), 10) || 1),
    per_page: [25, 50, 100, 500].includes(parseInt(p.get("per_page"), 10))
      ? parseInt(p.get("per_page"), 10) : 50,
  };
}

// box: the pager's element; hashFor(page, per_page): the view's URL.
// Rebuilt only when it changes: a button replaced under the pointer by a
// refresh would lose the click.
function renderPager(box, page, perPage, total, hashFor) {
  const pages = Math.max(1, Math.ceil(total / perPage));
  const key = hashFor(page, perPage) + " " + total; // the view's other parameters too
  if (box.dataset.key === key) return pages;
  box.dataset.key = key;
  const btn = (label, title, to, off) => el("button", {
    type: "button", title, disabled: off, class: "page-" + title.split(" ")[0].toLowerCase(),
    onclick: () => go(hashFor(to, perPage)) }, label);
  const per = el("select", { class: "per-page", onchange: (ev) => go(hashFor(1, ev.target.value)) },
    ...[25, 50, 100, 500].map((n) => el("option", { value: n, selected: n === perPage }, n)));
  box.replaceChildren(
    btn("\u00ab", "first page", 1, page <= 1), btn("\u2039 Prev", "previous page", page - 1, page <= 1),
    el("span", { class: "page-of" }, "page " + count(page) + " of " + count(pages)),
    btn("Next \u203a", "next page", page + 1, page >= pages),
    btn("\u00bb", "last page", pages, page >= pages),
    el("label", {}, "per page", per));
  return pages;
}

// A search box that rewrites the view's URL after the typing stops.
function bindSearch(input, hashFor) {
  let timer = null;
  input.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(() => go(hashFor(input.value), true), 300);
  });
}

function setInput(input, value) {
  // Never under the user's fingers: the box holds what they are typing.
  if (document.activeElement !== input && input.value !== value) input.value = value;
}

// ---- views ----

const filterHash = (name) => "#/filter/" + encodeURIComponent(name);

// hot: red over 90% (a fill, a memory limit); false for a mere proportion.
function fillBar(fill, cls, hot = true) {
  const bar = el("span", { class: "bar" + (cls ? " " + cls : "") + (hot && fill > 0.9 ? " hot" : "") },
    el("span"));
  bar.firstChild.style.width = Math.max(0, Math.min(100, 100 * (fill || 0))) + "%";
  return bar;
}

function typeText(f) { return f.type + (f.layout ? " \u00b7 " + f.layout : ""); }

// Slots are a cluster's: their columns are left out elsewhere.
const slotsHidden = () => (me.mode === "cluster" ? "" : " hidden");
function showSlots(table) {
  for (const th of table.querySelectorAll("th.col-slots"))
    th.classList.toggle("hidden", me.mode !== "cluster");
}

function roBadge(cls) {
  return el("span", { class: "badge ro" + (cls ? " " + cls : ""), title: "read-only" }, "read-only");
}

// Deployment: groups, alerts, nodes.
const nodesView = {
  period: 2000,
  enter() {},
  async refresh(live) {
    const [o, nodes] = await Promise.all([
      loadOverview(),
      load("nodes", "Cannot read the nodes (/api/nodes)", "/api/nodes", live)]);
    if (!live()) return;
    if (o) this.renderGroups(o);
    if (nodes) this.renderNodes(nodes);
  },
  renderGroups(o) {
    const cluster = o.mode === "cluster";
    $("mode").textContent = "\u00b7 " + o.mode;
    const sentinel = o.mode === "sentinel";
    for (const th of document.querySelectorAll("#groups thead .col-slots"))
      th.classList.toggle("hidden", !cluster);
    for (const th of document.querySelectorAll("#groups thead .col-sentinel"))
      th.classList.toggle("hidden", !sentinel);
    const quorumCls = "num col-sentinel" + (sentinel ? "" : " hidden");
    $("groups").tBodies[0].replaceChildren(...o.groups.map((g) => {
      const status = [];
      if (g.master === null) status.push(el("span", { class: "badge critical loud" }, "NO MASTER"));
      if (g.missing_replica)
        status.push(el("span", { class: "badge critical loud missing-replica" }, "MISSING REPLICA"));
      if (!g.ok && g.master !== null && !g.missing_replica)
        status.push(el("span", { class: "badge critical" }, "NOT OK"));
      if (g.ok && !g.missing_replica) status.push(el("span", { class: "badge ok" }, "ok"));
      const replicas = g.replicas.join(", ");
      return el("tr", { "data-group": g.name, class: !g.ok || g.missing_replica ? "alarm" : null },
        el("td", { title: g.name }, g.name),
        el("td", { title: g.master, class: g.master === null ? "err" : null },
          g.master === null ? "none" : g.master),
        el("td", { title: replicas, class: g.replicas.length ? null : "err" },
          replicas || "none"),
        el("td", { class: quorumCls }, dash(g.quorum)),
        el("td", { class: quorumCls }, dash(g.sentinels)),
        el("td", { class: "status pad" }, ...status.flatMap((s) => [s, " "])),
        el("td", { title: stamp(g.last_failover_ms) }, ago(g.last_failover_ms)),
        el("td", { class: "col-slots" + (cluster ? "" : " hidden"), title: g.slots }, dash(g.slots)));
    }));
    $("alerts").replaceChildren(...(o.alerts.length ? o.alerts.map((a) => el("li", {},
      el("span", { class: "badge " + (a.severity === "critical" ? "critical" : "warning") },
        a.severity), " ", a.text))
      : [el("li", { class: "muted" }, "No alerts.")]));
  },
  renderNodes(nodes) {
    $("nodes").tBodies[0].replaceChildren(...nodes.map((n) => {
      const mem = el("td", { title: n.maxmemory ? bytes(n.memory_used) + " of " + bytes(n.maxmemory)
        : bytes(n.memory_used) + ", no maxmemory" });
      if (n.maxmemory) mem.append(fillBar(n.memory_used / n.maxmemory, "wide"));
      mem.append(bytes(n.memory_used) + (n.maxmemory ? " / " + bytes(n.maxmemory) : " (no limit)"));
      return el("tr", { "data-addr": n.addr, class: n.link === "up" ? null : "alarm" },
        el("td", { title: n.id ? n.addr + " (" + n.id + ")" : n.addr }, n.addr),
        el("td", {}, n.role),
        el("td", { title: n.master }, dash(n.master)),
        el("td", { class: n.link === "up" ? "link-up" : "link-down" }, n.link),
        mem,
        el("td", { class: "num" }, count(n.filters)),
        el("td", { class: "num" }, count(n.ops_per_sec)),
        el("td", { class: "num" }, count(n.repl_offset)),
        el("td", { class: "num", title: n.lag_bytes === null ? null : count(n.lag_bytes) + " bytes" },
          n.lag_bytes === null ? "\u2014" : bytes(n.lag_bytes)),
        el("td", { title: stamp(n.last_failover_ms) }, ago(n.last_failover_ms)),
        el("td", { title: n.slots }, dash(n.slots)),
        el("td", { class: "err", title: n.error }, n.error || ""));
    }));
  },
};

// Filters: the catalog, searched, sorted and paged by the server.
const NUMERIC_SORTS = ["capacity", "items", "fill", "memory", "ttl", "fpr"];
const filtersView = {
  period: 5000,
  p: null,
  hash(p) {
    const q = new URLSearchParams();
    if (p.match) q.set("match", p.match);
    if (p.type) q.set("type", p.type);
    if (p.sort !== "name") q.set("sort", p.sort);
    if (p.order !== "asc") q.set("order", p.order);
    if (p.page !== 1) q.set("page", p.page);
    if (p.per_page !== 50) q.set("per_page", p.per_page);
    const s = q.toString();
    return "#/filters" + (s ? "?" + s : "");
  },
  enter(route) {
    const r = route.params;
    this.p = { match: r.get("match") || "", type: r.get("type") || "",
               sort: r.get("sort") || "name", order: r.get("order") === "desc" ? "desc" : "asc",
               ...pageParams(r) };
    setInput($("filters-match"), this.p.match);
    showSlots($("filters-table"));
    $("filters-type").value = this.p.type;
    for (const th of document.querySelectorAll("#filters-table th[data-sort]")) {
      const on = th.dataset.sort === this.p.sort;
      th.setAttribute("aria-sort", on ? (this.p.order === "asc" ? "ascending" : "descending")
        : "none");
      const label = th.dataset.label || (th.dataset.label = th.textContent);
      th.replaceChildren(label, on ? el("span", { class: "arrow" },
        this.p.order === "asc" ? " \u25b2" : " \u25bc") : "");
      th.title = "sort by " + label.toLowerCase();
    }
  },
  async refresh(live) {
    const p = this.p;
    const params = { sort: p.sort, order: p.order, page: p.page, per_page: p.per_page };
    if (glob(p.match)) params.match = glob(p.match);
    if (p.type) params.type = p.type;
    const d = await load("filters", "Cannot list the filters (/api/filters)",
      query("/api/filters", params), live);
    if (!d || !live()) return;
    // The same answer again: the rows stay as they are (and under the pointer).
    const same = JSON.stringify([params, d]);
    if (same === this.shown) return;
    this.shown = same;
    const pages = renderPager($("filters-pager"), d.page, d.per_page, d.total,
      (page, per) => this.hash({ ...p, page, per_page: Number(per) }));
    if (p.page > pages) return go(this.hash({ ...p, page: pages }), true);
    $("filters-total").textContent = count(d.total) + (d.total === 1 ? " filter" : " filters") +
      (params.match ? " matching " + params.match : "");
    $("filters-note").textContent = d.complete ? ""
      : "The catalog is still loading: the count and the pages may change.";
    const rows = d.filters.map((f) => el("tr", { "data-name": f.name,
      onclick: (ev) => { if (!ev.target.closest("a")) location.hash = filterHash(f.name); } },
    el("td", { class: "key", title: f.name }, f.read_only ? roBadge("ro-flag") : null,
      el("a", { href: filterHash(f.name) }, f.name)),
    el("td", { title: typeText(f) }, typeText(f)),
    el("td", { title: f.node }, f.node),
    el("td", { title: f.group }, dash(f.group)),
    el("td", { class: "num col-slots" + slotsHidden() }, dash(f.slot)),
    el("td", { class: "num" }, count(f.capacity)),
    el("td", { class: "num items" }, count(f.items)),
    el("td", { class: "num" }, f.fill === null ? "\u2014" : fillBar(f.fill), pct(f.fill)),
    el("td", { class: "num" + (f.fpr !== null && f.error_rate !== null && f.fpr > f.error_rate
      ? " over" : ""), title: f.error_rate === null ? null : "error rate " + rate(f.error_rate) },
    rate(f.fpr)),
    el("td", { class: "num" }, bytes(f.memory)),
    el("td", { class: "num" }, f.ttl_ms < 0 ? "none" : duration(f.ttl_ms / 1000))));
    $("filters-table").tBodies[0].replaceChildren(...(rows.length ? rows
      : [el("tr", {}, el("td", { colspan: 11, class: "muted" },
        d.total === 0 && params.match ? "No filter matches " + params.match + "." : "No filters."))]));
  },
  init() {
    bindSearch($("filters-match"), (v) => this.hash({ ...this.p, match: v, page: 1 }));
    $("filters-type").addEventListener("change", (ev) =>
      go(this.hash({ ...this.p, type: ev.target.value, page: 1 })));
    for (const th of document.querySelectorAll("#filters-table th[data-sort]"))
      th.addEventListener("click", () => {
        const col = th.dataset.sort, p = this.p;
        const order = col === p.sort ? (p.order === "asc" ? "desc" : "asc")
          : NUMERIC_SORTS.includes(col) ? "desc" : "asc";
        go(this.hash({ ...p, sort: col, order, page: 1 }));
      });
  },
};

// One filter: summary, chart, INFO, and what may be done with it.
const filterView = {
  period: 2000,
  name: null,
  f: null,
  enter(route) {
    if (route.name === this.name) return;
    this.name = route.name;
    this.f = null;
    $("filter-h").replaceChildren(route.name);
    $("filter-summary").replaceChildren(el("div", {}, el("dd", { class: "muted" }, "Loading\u2026")));
    $("filter-info").replaceChildren();
    $("chart").replaceChildren();
    $("item-results").replaceChildren();
    $("manage-result").textContent = "";
    for (const id of ["check-items", "add-items", "expire-seconds"]) $(id).value = "";
    for (const e of document.querySelectorAll("#view-filter .write")) e.classList.add("hidden");
  },
  async refresh(live) {
    const name = this.name;
    const f = await load("filter", "Cannot read the filter \u201c" + name + "\u201d (/api/filter)",
      query("/api/filter", { name }), live);
    if (!live()) return;
    if (!f) {
      $("filter-summary").replaceChildren(el("div", {}, el("dd", { class: "error-text" },
        problems.get("filter") || "")));
      return;
    }
    this.f = f;
    this.render(f);
  },
  render(f) {
    $("filter-h").replaceChildren(f.name, f.read_only ? " " : "", f.read_only ? roBadge() : "");
    const over = f.fpr !== null && f.error_rate !== null && f.fpr > f.error_rate;
    const chips = el("dd", { class: "chips" }, ...(f.replicas.length ? f.replicas.map((r) =>
      el("span", { class: "chip" + (r.present ? "" : " missing"),
                   title: r.present ? "has the filter" : "does not have the filter" },
      (r.present ? "\u2713 " : "\u2717 ") + r.addr + (r.present ? "" : " (missing)")))
      : [el("span", { class: "muted" }, "none")]));
    const items = [
      ["Master", el("dd", {}, dash(f.master))],
      ["Replicas", chips],
      ["Group", el("dd", {}, dash(f.group))],
      me.mode === "cluster" ? ["Slot", el("dd", {}, dash(f.slot))] : null,
      ["Type", el("dd", {}, typeText(f))],
      ["Items / capacity", el("dd", {}, count(f.items) + " of " + count(f.capacity))],
      ["Fill", el("dd", {}, fillBar(f.fill), pct(f.fill))],
      ["Live FPR / error rate", el("dd", { class: over ? "over" : null },
        rate(f.fpr) + " / " + rate(f.error_rate) + (over ? " (over)" : ""))],
      ["Memory", el("dd", {}, bytes(f.memory))],
      ["TTL", el("dd", {}, f.ttl_ms < 0 ? "none" : duration(f.ttl_ms / 1000))],
      ["Read-only", el("dd", {}, f.read_only ? "yes" : "no")],
      ["Updated", el("dd", { title: stamp(f.updated_ms) }, ago(f.updated_ms))],
    ];
    $("filter-summary").replaceChildren(...items.filter((x) => x).map(([k, dd]) =>
      el("div", { "data-field": k }, el("dt", {}, k), dd)));
    $("filter-info").replaceChildren(...Object.entries(f.info || {}).map(([k, v]) =>
      el("div", {}, el("dt", {}, k), el("dd", {},
        v !== null && typeof v === "object" ? JSON.stringify(v) : dash(v)))));
    drawChart(f.history || [], f.error_rate);
    const write = !!(me.may_write && f.may_write);
    for (const e of document.querySelectorAll("#view-filter .write"))
      e.classList.toggle("hidden", !write);
    $("readonly-toggle").textContent = f.read_only ? "Make writable" : "Make read-only";
    $("persist").disabled = f.ttl_ms < 0;
    $("persist").title = f.ttl_ms < 0 ? "it has no TTL" : "";
    $("add-submit").disabled = f.read_only;
    $("add-note").textContent = f.read_only ? "Read-only: make it writable to add items." : "";
  },
  async items(kind) {
    const name = this.name;
    const lines = $(kind + "-items").value.split(/\r?\n/).filter((s) => s !== "");
    const out = $("item-results");
    if (!lines.length) return;
    const r = await change((kind === "add" ? "Adding to" : "Checking") + " \u201c" + name + "\u201d",
      "/api/filter/" + kind, { name, items: lines.join("\n") }, null);
    if (name !== this.name) return;
    if (!r) {
      out.replaceChildren(el("p", { class: "error-text" }, problems.get("action")));
      return;
    }
    const hits = r.results.filter((x) => x).length;
    const word = kind === "add"
      ? (x) => (x ? "added" : "already there (or a false positive)")
      : (x) => (x ? "present (or a false positive)" : "absent");
    out.replaceChildren(
      el("h3", {}, kind === "add" ? "Added " + hits + " of " + lines.length + " items"
        : hits + " of " + lines.length + " items present"),
      el("table", { class: "fixed results", id: "results-" + kind },
        el("thead", {}, el("tr", {}, el("th", {}, "Item"), el("th", { class: "w-l" }, "Result"))),
        el("tbody", {}, ...lines.map((item, i) => el("tr", { "data-result": r.results[i] },
          el("td", { class: "key", title: item }, item),
          el("td", { class: r.results[i] ? "ok-text" : "muted" }, word(r.results[i])))))));
    if (kind === "add") run(true);
  },
  async manage(what, path, form, done) {
    const out = $("manage-result");
    const r = await change(what, path, { name: this.name, ...form }, out);
    if (r) {
      out.className = "ok-text";
      out.textContent = done(r);
      run(true);
    }
    return r;
  },
  init() {
    $("check-form").addEventListener("submit", (ev) => { ev.preventDefault(); this.items("check"); });
    $("add-form").addEventListener("submit", (ev) => { ev.preventDefault(); this.items("add"); });
    $("expire-form").addEventListener("submit", (ev) => {
      ev.preventDefault();
      this.manage("Setting the TTL", "/api/filter/expire", { seconds: $("expire-seconds").value.trim() },
        (r) => (r.reply ? "Expires in " + duration(Number($("expire-seconds").value)) + "."
          : "No such filter."));
    });
    $("persist").addEventListener("click", () => this.manage("Removing the TTL",
      "/api/filter/persist", {}, (r) => (r.reply ? "TTL removed." : "It had no TTL.")));
    $("readonly-toggle").addEventListener("click", () => {
      const ro = !(this.f && this.f.read_only);
      this.manage(ro ? "Making it read-only" : "Making it writable", "/api/filter/readonly",
        { readonly: ro ? "yes" : "no" }, () => (ro ? "Now read-only." : "Now writable."));
    });
    $("delete").addEventListener("click", () => {
      const name = this.name;
      confirmAction("Delete filter \u201c" + name + "\u201d? This cannot be undone.", async () => {
        const r = await change("Deleting \u201c" + name + "\u201d", "/api/filter/delete", { name },
          $("manage-result"));
        if (!r) return;
        flash = r.reply ? "Deleted \u201c" + name + "\u201d." : "\u201c" + name + "\u201d was already gone.";
        go("#/filters");
      });
    });
  },
};
let flash = "";

// The chart of fill and live FPR, drawn as the built-in console's: fill on
// the left axis, FPR on a log axis on the right, the error rate as a line.
function drawChart(points, target) {
  const svg = $("chart");
  const W = 640, H = 200, L = 40, R = 50, T = 10, B = 20;
  const ns = "http://www.w3.org/2000/svg";
  const node = (tag, attrs, text) => {
    const e = document.createElementNS(ns, tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    return e;
  };
  const t1 = points.length ? points[points.length - 1][0] : 0;
  const span = Math.max(60000, points.length ? t1 - points[0][0] : 0);
  const top = Math.max(1, ...points.map((p) => p[1] || 0));
  const x = (t) => L + (W - L - R) * (1 - (t1 - t) / span);
  const yFill = (v) => T + (H - T - B) * (1 - v / top);
  const lo = -12; // FPR axis: 1e-12 .. 1
  const yFpr = (v) => T + (H - T - B) * (Math.max(lo, Math.log10(Math.max(v, 1e-300))) / lo);
  const parts = [
    node("line", { class: "axis", x1: L, y1: H - B, x2: W - R, y2: H - B }),
    node("line", { class: "axis", x1: L, y1: T, x2: L, y2: H - B }),
    node("line", { class: "axis", x1: W - R, y1: T, x2: W - R, y2: H - B }),
    node("text", { x: 4, y: T + 8 }, Math.round(100 * top) + "%"),
    node("text", { x: 10, y: H - B }, "0%"),
    node("text", { x: W - R + 4, y: T + 8 }, "1"), node("text", { x: W - R + 4, y: H - B }, "1e-12"),
    node("text", { x: L, y: H - 4 }, "-" + duration(span / 1000)),
    node("text", { x: W - R - 60, y: H - 4 }, points.length ? "last sample" : "no samples yet"),
  ];
  if (target) {
    const y = yFpr(target).toFixed(1);
    parts.push(node("line", { class: "target", x1: L, y1: y, x2: W - R, y2: y }));
  }
  const line = (f) => points.filter((p) => f(p) !== null)
    .map((p, i) => (i ? "L" : "M") + x(p[0]).toFixed(1) + "," + f(p).toFixed(1)).join(" ");
  parts.push(node("path", { class: "fill", d: line((p) => (p[1] === null ? null : yFill(p[1]))) || "M0,0" }));
  parts.push(node("path", { class: "fpr", d: line((p) => (p[2] === null ? null : yFpr(p[2]))) || "M0,0" }));
  // A dot per sample when they are few: a single one has no line yet.
  if (points.length <= 60)
    for (const p of points) {
      if (p[1] !== null) parts.push(node("circle", { class: "fill", cx: x(p[0]), cy: yFill(p[1]), r: 2.5 }));
      if (p[2] !== null) parts.push(node("circle", { class: "fpr", cx: x(p[0]), cy: yFpr(p[2]), r: 2.5 }));
    }
  svg.replaceChildren(...parts);
}

// Routing: where each filter lives.
const routingView = {
  period: 5000,
  p: null,
  hash(p) {
    const q = new URLSearchParams();
    if (p.match) q.set("match", p.match);
    if (p.page !== 1) q.set("page", p.page);
    if (p.per_page !== 50) q.set("per_page", p.per_page);
    const s = q.toString();
    return "#/routing" + (s ? "?" + s : "");
  },
  enter(route) {
    this.p = { match: route.params.get("match") || "", ...pageParams(route.params) };
    setInput($("routing-match"), this.p.match);
    showSlots($("routing-table"));
  },
  async refresh(live) {
    const p = this.p;
    const params = { page: p.page, per_page: p.per_page };
    if (glob(p.match)) params.match = glob(p.match);
    const d = await load("routing", "Cannot read the routing table (/api/routing)",
      query("/api/routing", params), live);
    if (!d || !live()) return;
    const same = JSON.stringify([p, d]);
    if (same === this.shown) return;
    this.shown = same;
    const pages = renderPager($("routing-pager"), p.page, p.per_page, d.total,
      (page, per) => this.hash({ ...p, page, per_page: Number(per) }));
    if (p.page > pages) return go(this.hash({ ...p, page: pages }), true);
    $("routing-total").textContent = count(d.total) + (d.total === 1 ? " filter" : " filters") +
      (params.match ? " matching " + params.match : "");
    const badge = { ok: "ok", degraded: "warning", down: "critical" };
    const rows = d.rows.map((r) => el("tr", { "data-name": r.name,
      onclick: (ev) => { if (!ev.target.closest("a")) location.hash = filterHash(r.name); } },
    el("td", { class: "key", title: r.name }, el("a", { href: filterHash(r.name) }, r.name)),
    el("td", { class: "num col-slots" + slotsHidden() }, dash(r.slot)),
    el("td", { title: r.group }, dash(r.group)),
    el("td", { title: r.master }, dash(r.master)),
    el("td", { title: r.replicas.join(", ") }, r.replicas.join(", ") || "none"),
    el("td", {}, el("span", { class: "badge " + (badge[r.status] || "warning") }, r.status)),
    el("td", {}, r.read_only ? roBadge() : "no")));
    $("routing-table").tBodies[0].replaceChildren(...(rows.length ? rows
      : [el("tr", {}, el("td", { colspan: 7, class: "muted" }, "No filters."))]));
  },
  init() {
    bindSearch($("routing-match"), (v) => this.hash({ ...this.p, match: v, page: 1 }));
  },
};

// Create: where it will go, what it will cost, then the filter.
const createView = {
  period: Infinity,
  placeSeq: 0,
  sizeSeq: 0,
  enter() {
    $("create-form").classList.toggle("hidden", !me.may_write);
    $("create-denied").classList.toggle("hidden", !!me.may_write || !meLoaded);
    this.groups();
    this.place();
    this.size();
  },
  async refresh() {
    if (!overview) {
      await loadOverview();
      this.groups();
    }
  },
  groups() {
    // A cluster's slot decides the node; elsewhere a group may be chosen.
    const sel = $("c-group");
    $("c-group-label").classList.toggle("hidden", !overview || overview.mode === "cluster");
    if (!overview) return;
    const keep = sel.value;
    sel.replaceChildren(el("option", { value: "" }, "where placement says"),
      ...overview.groups.map((g) => el("option", { value: g.name }, g.name)));
    sel.value = keep;
  },
  place() {
    clearTimeout(this.placeTimer);
    const name = $("c-name").value;
    const out = $("placement");
    if (!name) {
      out.className = "sizing muted";
      out.textContent = "Type a name to see where it will go.";
      return;
    }
    const seq = ++this.placeSeq;
    this.placeTimer = setTimeout(async () => {
      try {
        const p = await api(query("/api/placement", { name }));
        if (seq !== this.placeSeq) return;
        solved("placement");
        out.className = "sizing";
        const chosen = $("c-group").value;
        out.replaceChildren("Will go to ", el("strong", { id: "placement-node" }, p.node),
          " (group " + p.group + (p.slot === null ? "" : ", slot " + p.slot) + "): " + p.reason,
          chosen && chosen !== p.group ? " \u2014 but you chose the group " + chosen + "." : "");
      } catch (e) {
        if (seq !== this.placeSeq) return;
        problem("placement", "Cannot say where \u201c" + name + "\u201d would go (/api/placement)", e);
        out.className = "sizing error";
        out.textContent = e.message;
      }
    }, 250);
  },
  size() {
    clearTimeout(this.sizeTimer);
    const out = $("sizing");
    if (!$("c-capacity").value.trim() || !$("c-error").value.trim()) {
      out.className = "sizing";
      out.textContent = "Enter a capacity and an error rate.";
      return;
    }
    const seq = ++this.sizeSeq;
    this.sizeTimer = setTimeout(async () => {
      const q = { capacity: digits($("c-capacity").value), error_rate: $("c-error").value.trim() };
      if ($("c-layout").value) q.layout = $("c-layout").value;
      if ($("c-window").value.trim()) q.window = $("c-window").value.trim();
      if ($("c-slices").value.trim()) q.slices = $("c-slices").value.trim();
      try {
        const s = await api(query("/api/calc", q));
        if (seq !== this.sizeSeq) return;
        out.className = "sizing";
        out.textContent = "Will allocate " + bytes(s.bytes) + " (" + s.bits_per_key.toFixed(2) +
          " bits per key, " + s.layout + " layout); expected FPR at capacity " +
          s.expected_fpr.toExponential(2) + ".";
      } catch (e) {
        if (seq !== this.sizeSeq) return;
        // The calculator's refusal is the answer to what was typed, not a failure.
        out.className = "sizing error";
        out.textContent = e.message;
      }
    }, 150);
  },
  async submit() {
    const form = {};
    for (const [k, v] of new FormData($("create-form"))) if (String(v).trim() !== "") form[k] = v.trim();
    form.name = $("c-name").value; // a name is taken as typed, spaces and all
    if (form.capacity) form.capacity = digits(form.capacity);
    const out = $("create-result");
    out.className = "";
    out.textContent = "Creating\u2026";
    const r = await change("Creating \u201c" + form.name + "\u201d", "/api/filters", form, out);
    if (!r) return;
    out.className = "ok";
    out.replaceChildren("Created \u201c" + form.name + "\u201d" + (r.node ? " on " + r.node : "") +
      " (" + r.reply + "). ", el("a", { href: filterHash(form.name) }, "Open it"));
  },
  init() {
    $("c-name").addEventListener("input", () => this.place());
    $("c-group").addEventListener("change", () => this.place());
    for (const id of ["c-capacity", "c-error", "c-layout", "c-window", "c-slices"])
      for (const ev of ["input", "change"]) $(id).addEventListener(ev, () => this.size());
    $("create-form").addEventListener("submit", (ev) => { ev.preventDefault(); this.submit(); });
  },
};

// Rebalance (Redis Cluster): the plan, then its run, followed each second.
const rebalanceView = {
  period: 1000,
  plan: null,
  status: null,
  wasRunning: false,
  enter() {
    this.plan = null;
    this.loadPlan();
  },
  async loadPlan() {
    if (me.mode && me.mode !== "cluster") {
      $("reb-summary").textContent = "Rebalancing moves slots between the masters of a Redis " +
        "Cluster; this deployment is " + me.mode + ".";
      return;
    }
    const gen0 = gen;
    const plan = await load("plan", "Cannot read the rebalance plan (/api/rebalance/plan)",
      "/api/rebalance/plan", () => gen0 === gen);
    if (!plan) return;
    this.plan = plan;
    this.renderPlan(plan);
  },
  async refresh(live) {
    if (me.mode && me.mode !== "cluster") return;
    const s = await load("rebalance", "Cannot read the rebalance's progress (/api/rebalance/status)",
      "/api/rebalance/status", live);
    if (!s || !live()) return;
    const box = $("reb-status");
    const bar = el("div", { class: "progress" }, el("span"));
    bar.firstChild.style.width = (s.total ? (100 * s.done) / s.total : 0) + "%";
    box.replaceChildren(
      el("p", { id: "reb-state" }, s.running ? "Running: " + count(s.done) + " of " + count(s.total) +
        " moves done" + (s.current ? ", now " + s.current : "") + "."
        : s.finished_ms !== null ? "Finished " + ago(s.finished_ms) + ": " + count(s.done) + " of " +
          count(s.total) + " moves done." : "Not running."),
      s.running || s.finished_ms !== null ? bar : "",
      s.error ? el("p", { class: "error-text" }, s.error) : "");
    this.status = s;
    this.buttons();
    if (this.wasRunning && !s.running) this.loadPlan(); // what is left to do now
    this.wasRunning = s.running;
  },
  buttons() {
    const moves = this.plan ? this.plan.moves.length : 0;
    $("reb-start").disabled = !this.status || this.status.running || moves === 0;
    $("reb-start").classList.toggle("hidden", !me.may_write);
  },
  renderPlan(plan) {
    this.buttons();
    const keys = plan.moves.reduce((a, m) => a + m.keys, 0);
    const size = plan.moves.reduce((a, m) => a + m.bytes, 0);
    $("reb-summary").textContent = plan.moves.length
      ? plan.moves.length + " moves: " + count(keys) + " keys, " + bytes(size) + "."
      : "Balanced: nothing to move.";
    $("reb-moves").tBodies[0].replaceChildren(...plan.moves.map((m) => el("tr", {},
      el("td", { class: "num" }, m.slot), el("td", { title: m.from }, m.from),
      el("td", { title: m.to }, m.to), el("td", { class: "num" }, count(m.keys)),
      el("td", { class: "num" }, bytes(m.bytes)))));
    const addrs = [...new Set([...Object.keys(plan.before), ...Object.keys(plan.after)])].sort();
    const max = Math.max(1, ...Object.values(plan.before), ...Object.values(plan.after));
    const cell = (v) => el("td", {}, fillBar((v || 0) / max, "wide", false), bytes(v || 0));
    $("reb-memory").tBodies[0].replaceChildren(...addrs.map((a) => {
      const d = (plan.after[a] || 0) - (plan.before[a] || 0);
      return el("tr", {}, el("td", { title: a }, a), cell(plan.before[a]), cell(plan.after[a]),
        el("td", { class: "num" }, (d > 0 ? "+" : "") + bytes(d)));
    }));
    $("reb-refused").replaceChildren(...(plan.refused.length
      ? plan.refused.map((t) => el("li", {}, el("span", { class: "badge warning" }, "refused"), " ", t))
      : [el("li", { class: "muted" }, "None.")]));
  },
  init() {
    $("reb-replan").addEventListener("click", () => this.loadPlan());
    $("reb-start").addEventListener("click", () => {
      const n = this.plan ? this.plan.moves.length : 0;
      confirmAction("Start the rebalance: " + n + " slot moves between the masters?", async () => {
        if (await change("Starting the rebalance", "/api/rebalance/start", {}, null)) run(true);
      });
    });
  },
};

const VIEWS = { nodes: nodesView, filters: filtersView, filter: filterView, routing: routingView,
                create: createView, rebalance: rebalanceView };

// ---- routing between views, and the refresh loop ----

let route = null;
let gen = 0;       // bumped on every route: answers for an older one are dropped
let busy = null;   // the gen whose refresh is in flight
let lastRun = 0;
let lastOverview = 0;

function parseRoute() {
  const h = location.hash.replace(/^#\/?/, "");
  if (h.startsWith("filter/")) {
    let name = h.slice(7);
    try { name = decodeURIComponent(name); } catch (e) { /* shown as written */ }
    return { view: "filter", name, params: new URLSearchParams() };
  }
  const q = h.indexOf("?");
  const path = q < 0 ? h : h.slice(0, q);
  return { view: Object.hasOwn(VIEWS, path) && path !== "filter" ? path : "nodes",
           params: new URLSearchParams(q < 0 ? "" : h.slice(q + 1)) };
}

// To another URL of the page; replace: without a new entry in the history
// (a search being typed).
function go(hash, replace) {
  if (replace) {
    history.replaceState(null, "", hash);
    onRoute();
  } else if (location.hash === hash) {
    onRoute();
  } else {
    location.hash = hash;
  }
}

function onRoute() {
  const prev = route;
  route = parseRoute();
  gen++;
  const tab = route.view === "filter" ? "filters" : route.view;
  for (const a of document.querySelectorAll("#nav a"))
    a.classList.toggle("active", a.dataset.view === tab);
  for (const v of document.querySelectorAll(".view"))
    v.classList.toggle("hidden", v.id !== "view-" + route.view);
  // What the previous view failed to load is no longer on screen.
  if (!prev || prev.view !== route.view)
    for (const s of ["nodes", "filters", "filter", "routing", "placement", "plan", "rebalance"])
      solved(s);
  if (route.view === "filters") {
    $("filters-flash").textContent = flash;
    flash = "";
  }
  document.title = "Bloomery fleet \u00b7 " + (route.view === "filter" ? route.name : tab);
  VIEWS[route.view].enter(route);
  run(true);
}

async function run(force) {
  const v = VIEWS[route.view];
  if (busy === gen && !force) return;
  const mine = gen;
  busy = mine;
  lastRun = Date.now();
  try {
    await v.refresh(() => mine === gen);
  } finally {
    if (busy === mine) busy = null;
  }
}

let lastMe = 0;
function tick() {
  if (document.hidden) return; // a tab in the background asks nothing
  if (!meLoaded && Date.now() - lastMe >= 2000) {
    lastMe = Date.now();
    loadMe().then(() => { if (meLoaded) onRoute(); });
  }
  const v = VIEWS[route.view];
  if (busy !== gen && Date.now() - lastRun >= v.period) run(false);
  if (route.view !== "nodes" && Date.now() - lastOverview >= OVERVIEW_MS) {
    lastOverview = Date.now();
    loadOverview();
  }
}

document.addEventListener("DOMContentLoaded", async () => {
  for (const v of Object.values(VIEWS)) if (v.init) v.init();
  $("banner-close").addEventListener("click", () => { problems.clear(); showProblems(); });
  $("confirm").addEventListener("close", async () => {
    const action = pending;
    pending = null;
    if ($("confirm").returnValue === "ok" && action) await action();
  });
  window.addEventListener("hashchange", onRoute);
  document.addEventListener("visibilitychange", () => { if (!document.hidden) run(true); });
  lastMe = Date.now();
  await loadMe();
  lastOverview = Date.now();
  loadOverview();
  onRoute();
  setInterval(tick, TICK_MS);
});
