// tickbus dashboard: plain JavaScript and SVG, no dependencies, nothing
// fetched from anywhere but this server.
"use strict";

const SVGNS = "http://www.w3.org/2000/svg";
const state = { series: new Map(), history: 600000, subject: "", live: false, loaded: false };
let renderQueued = false;

// ---------- formatting ----------
function fmtNs(ns) {
  if (!(ns > 0)) return ns === 0 ? "0ns" : "–";
  let v = ns, unit = "ns";
  if (ns >= 1e9) { v = ns / 1e9; unit = "s"; }
  else if (ns >= 1e6) { v = ns / 1e6; unit = "ms"; }
  else if (ns >= 1e3) { v = ns / 1e3; unit = "µs"; }
  else return Math.round(ns) + "ns";
  return (v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2)) + unit;
}
function fmtCount(n) { return Number(n).toLocaleString("en-US"); }
function fmtRate(r) { return r >= 100 ? Math.round(r).toLocaleString("en-US") : r.toFixed(1); }
function fmtAge(ms) {
  if (ms < 0) ms = 0;
  return ms < 60000 ? (ms / 1000).toFixed(1) + "s" : Math.floor(ms / 60000) + "m" + Math.round((ms % 60000) / 1000) + "s";
}
function nines(q) { // percentile → label on the nines axis
  if (q >= 100) return "max";
  return (Math.round(q * 10000) / 10000) + "%";
}

// ---------- data ----------
// upsert merges a series from /api/state or an event: points are merged by
// time (events and the state may cross in flight), and the summary is taken
// from whichever is newer.
function upsert(v) {
  let s = state.series.get(v.key);
  if (!s) { s = { points: [], last_end: -1 }; state.series.set(v.key, s); }
  const byT = new Map();
  for (const p of s.points) byT.set(p.t, p);
  for (const p of v.points || []) byT.set(p.t, p);
  const pts = [...byT.values()].sort((a, b) => a.t - b.t);
  if (v.last_end >= s.last_end) Object.assign(s, v);
  s.points = pts;
  const cut = pts.length ? pts[pts.length - 1].t - state.history : 0;
  while (s.points.length && s.points[0].t < cut) s.points.shift();
}

async function loadState() {
  const r = await fetch("api/state", { cache: "no-store" });
  if (!r.ok) throw new Error("api/state: " + r.status);
  const st = await r.json();
  state.history = st.history_ms || state.history;
  state.subject = st.subject;
  state.serverNow = st.now;
  state.clientAtLoad = Date.now();
  for (const v of st.series || []) upsert(v);
  state.loaded = true;
  queueRender();
}

// loadState until it succeeds: the dashboard may be restarting.
function loadStateRetrying() {
  loadState().catch((err) => {
    console.error(err);
    setTimeout(loadStateRetrying, 1000);
  });
}

function connect() {
  if (!window.EventSource) return;
  const es = new EventSource("events");
  let broken = false;
  es.onopen = () => {
    state.live = true;
    if (broken) loadStateRetrying(); // catch up on what the outage missed
    broken = false;
    queueRender();
  };
  es.onerror = () => { state.live = false; broken = true; queueRender(); };
  es.addEventListener("series", (e) => {
    try { upsert(JSON.parse(e.data)); } catch (err) { console.error("bad event", err); return; }
    state.live = true;
    queueRender();
  });
}

// ---------- selection ----------
function readHash() {
  const p = new URLSearchParams(location.hash.slice(1));
  return { topic: p.get("topic") || "", subscriber: p.get("subscriber") || "" };
}
function writeHash(sel) {
  const p = new URLSearchParams();
  if (sel.topic) p.set("topic", sel.topic);
  if (sel.subscriber) p.set("subscriber", sel.subscriber);
  const h = p.toString();
  if (h !== location.hash.slice(1)) history.replaceState(null, "", h ? "#" + h : location.pathname + location.search);
}
function selected() {
  const sel = readHash();
  return [...state.series.values()]
    .filter((s) => (!sel.topic || s.topic === sel.topic) && (!sel.subscriber || s.subscriber === sel.subscriber))
    .sort((a, b) => a.topic < b.topic ? -1 : a.topic > b.topic ? 1 : a.subscriber < b.subscriber ? -1 : a.subscriber > b.subscriber ? 1 : 0);
}
function fillSelect(el, values, current, allLabel) {
  const want = [""].concat(values);
  const have = [...el.options].map((o) => o.value);
  if (want.join("\u0000") !== have.join("\u0000")) {
    el.textContent = "";
    for (const v of want) {
      const o = document.createElement("option");
      o.value = v; o.textContent = v || allLabel;
      el.appendChild(o);
    }
  }
  el.value = want.includes(current) ? current : "";
}
function renderControls() {
  const sel = readHash();
  const all = [...state.series.values()];
  const topics = [...new Set(all.map((s) => s.topic))].sort();
  const subs = [...new Set(all.filter((s) => !sel.topic || s.topic === sel.topic).map((s) => s.subscriber))].sort();
  fillSelect(document.getElementById("topic"), topics, sel.topic, "all topics");
  fillSelect(document.getElementById("subscriber"), subs, sel.subscriber, "all subscribers");
}

// ---------- svg helpers ----------
function el(name, attrs, parent, text) {
  const e = document.createElementNS(SVGNS, name);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  if (text !== undefined) e.textContent = text;
  if (parent) parent.appendChild(e);
  return e;
}
function logTicks(lo, hi) { // decades and 2-5 steps between lo and hi (ns)
  const out = [];
  for (let d = Math.pow(10, Math.floor(Math.log10(lo))); d <= hi * 1.0001; d *= 10) {
    for (const m of [1, 2, 5]) { const v = d * m; if (v >= lo * 0.9999 && v <= hi * 1.0001) out.push(v); }
  }
  return out;
}
function niceLinear(max) {
  if (!(max > 0)) return [0, 1];
  const step0 = Math.pow(10, Math.floor(Math.log10(max / 4)));
  const step = [1, 2, 5, 10].map((m) => m * step0).find((s) => max / s <= 6);
  const ticks = [];
  for (let v = 0; v <= max + step * 0.999; v += step) ticks.push(v);
  return ticks;
}

const W = 560, H = 220, M = { l: 54, r: 10, t: 18, b: 28 };

// Time chart: p50, p99, p99.9 and max of each interval over the history,
// on a log latency axis.
function timeChart(s) {
  const svg = el("svg", { viewBox: `0 0 ${W} ${H}`, class: "timechart", "data-key": s.key, role: "img",
    "aria-label": `latency over time for ${s.topic} / ${s.subscriber}` });
  el("text", { x: M.l, y: 12, class: "title" }, svg, "latency per interval (log scale)");
  const pts = s.points || [];
  const lines = [["p50", "p50"], ["p99", "p99"], ["p999", "p99.9"], ["max", "max"]];
  // The window grows with the data from one minute up to the history.
  const tEnd = pts.length ? pts[pts.length - 1].t : Date.now();
  const span = Math.min(state.history, Math.max(60000, pts.length ? tEnd - pts[0].t : 0));
  const tStart = tEnd - span;
  let lo = Infinity, hi = 0;
  for (const p of pts) if (p.n > 0) for (const [k] of lines) { const v = Math.max(p[k], 1); lo = Math.min(lo, v); hi = Math.max(hi, v); }
  if (!(hi > 0)) { lo = 100; hi = 1e6; }
  const llo = Math.floor(Math.log10(lo) * 2) / 2, lhi = Math.max(Math.ceil(Math.log10(hi) * 2) / 2, llo + 0.5);
  const x = (t) => M.l + ((t - tStart) / (tEnd - tStart || 1)) * (W - M.l - M.r);
  const y = (v) => H - M.b - ((Math.log10(Math.max(v, 1)) - llo) / (lhi - llo)) * (H - M.t - M.b);
  for (const v of logTicks(Math.pow(10, llo), Math.pow(10, lhi))) {
    el("line", { x1: M.l, x2: W - M.r, y1: y(v), y2: y(v), class: "grid" }, svg);
    el("text", { x: M.l - 4, y: y(v) + 3, "text-anchor": "end" }, svg, fmtNs(v));
  }
  const step = [5e3, 1e4, 15e3, 3e4, 6e4, 12e4, 3e5, 6e5, 9e5, 18e5, 36e5].find((st) => span / st <= 10) || span;
  for (let t = tEnd; t >= tStart - 1; t -= step) {
    const ago = tEnd - t;
    el("line", { x1: x(t), x2: x(t), y1: M.t, y2: H - M.b, class: "grid" }, svg);
    el("text", { x: x(t), y: H - M.b + 12, "text-anchor": t === tEnd ? "end" : "middle" }, svg,
      ago === 0 ? "now" : ago < 60000 ? "-" + Math.round(ago / 1000) + "s" : "-" + Math.round(ago / 6000) / 10 + "m");
  }
  lines.forEach(([k, label], i) => {
    const visible = pts.filter((p) => p.t >= tStart && p.n > 0); // an interval without ticks has no latency
    el("polyline", { class: "l-" + k, "data-line": k, "data-n": visible.length,
      points: visible.map((p) => x(p.t).toFixed(1) + "," + y(p[k]).toFixed(1)).join(" ") }, svg);
    el("rect", { x: W - M.r - 250 + i * 62, y: H - 10, width: 8, height: 8, class: "k-" + k }, svg);
    el("text", { x: W - M.r - 238 + i * 62, y: H - 2 }, svg, label);
  });
  return svg;
}

// Percentile distribution as HdrHistogram's plotter draws it: latency
// against percentile on the "nines" axis, x = log10(1 / (1 - q)).
function distChart(s) {
  const svg = el("svg", { viewBox: `0 0 ${W} ${H}`, class: "dist", "data-key": s.key, role: "img",
    "aria-label": `latency by percentile for ${s.topic} / ${s.subscriber}` });
  el("text", { x: M.l, y: 12, class: "title" }, svg, "latency by percentile");
  const curves = [["total", s.curve || [], "since dashboard start"], ["last", s.last_curve || [], "last interval"]];
  const count = Math.max(s.total ? s.total.count : 0, 1);
  const xmax = Math.max(2, Math.ceil(Math.log10(count)));
  const nx = (q) => (q >= 100 ? xmax : Math.min(xmax, Math.log10(100 / (100 - q))));
  let vmax = 0;
  for (const [, c] of curves) for (const p of c) vmax = Math.max(vmax, p.v);
  const yt = niceLinear(vmax);
  const ymax = yt[yt.length - 1] || 1;
  const x = (q) => M.l + (nx(q) / xmax) * (W - M.l - M.r);
  const y = (v) => H - M.b - (v / ymax) * (H - M.t - M.b);
  for (const v of yt) {
    el("line", { x1: M.l, x2: W - M.r, y1: y(v), y2: y(v), class: "grid" }, svg);
    el("text", { x: M.l - 4, y: y(v) + 3, "text-anchor": "end" }, svg, fmtNs(v));
  }
  for (let d = 0; d <= xmax; d++) {
    const q = 100 - 100 / Math.pow(10, d);
    el("line", { x1: x(q), x2: x(q), y1: M.t, y2: H - M.b, class: "grid" }, svg);
    el("text", { x: x(q), y: H - M.b + 12, "text-anchor": d === 0 ? "start" : d === xmax ? "end" : "middle" }, svg,
      d === 0 ? "0%" : nines(q));
  }
  curves.forEach(([k, c, label], i) => {
    el("polyline", { class: "l-" + k, "data-line": k, "data-n": c.length,
      points: c.map((p) => x(p.q).toFixed(1) + "," + y(p.v).toFixed(1)).join(" ") }, svg);
    el("rect", { x: M.l + 8 + i * 150, y: M.t + 4, width: 8, height: 8, class: "k-" + k }, svg);
    el("text", { x: M.l + 20 + i * 150, y: M.t + 12 }, svg, label);
  });
  return svg;
}

// ---------- render ----------
function queueRender() {
  if (renderQueued) return;
  renderQueued = true;
  setTimeout(() => { renderQueued = false; render(); }, 50);
}

function cell(tr, text, cls, ns) {
  const td = document.createElement("td");
  td.textContent = text;
  if (cls) td.className = cls;
  if (ns !== undefined) td.dataset.ns = ns;
  tr.appendChild(td);
  return td;
}

function render() {
  renderControls();
  const st = document.getElementById("status");
  st.textContent = state.live ? "live" : (state.loaded ? "reconnecting…" : "connecting…");
  st.className = "status " + (state.live ? "up" : "down");
  document.getElementById("subject").textContent = state.subject;
  const list = selected();
  document.getElementById("count").textContent = list.length + " of " + state.series.size + " series";
  document.getElementById("empty").hidden = state.series.size > 0;
  const now = state.serverNow ? state.serverNow + (Date.now() - state.clientAtLoad) : Date.now();

  const tbody = document.querySelector("#summary tbody");
  tbody.textContent = "";
  const cards = document.getElementById("cards");
  cards.textContent = "";
  const report = { ready: state.loaded, live: state.live, selected: readHash(), series: [] };
  for (const s of list) {
    const tr = document.createElement("tr");
    tr.dataset.key = s.key;
    tr.onclick = () => { writeHash({ topic: s.topic, subscriber: s.subscriber }); queueRender(); };
    cell(tr, s.topic, "topic");
    cell(tr, s.subscriber, "subscriber");
    cell(tr, s.host + (s.cross_host ? " ⇄" : ""), "host");
    cell(tr, s.provider, "provider");
    cell(tr, fmtRate(s.rate), "rate");
    cell(tr, fmtCount(s.received), "received");
    cell(tr, fmtCount(s.gaps), "gaps" + (s.gaps ? " bad" : ""));
    cell(tr, fmtCount(s.overruns), "overruns" + (s.overruns ? " bad" : ""));
    cell(tr, s.tail_unknown ? "?" : fmtCount(s.tail), "tail" + (s.tail || s.tail_unknown ? " bad" : ""));
    for (const k of ["p50", "p90", "p99", "p999", "p9999", "max"]) {
      cell(tr, s.last.count > 0 ? fmtNs(s.last[k]) : "–", k, s.last[k]);
    }
    const age = now - s.last_end;
    cell(tr, fmtAge(age), "age" + (age > 3 * Math.max(s.interval_ms, 1000) ? " bad" : ""));
    tbody.appendChild(tr);

    const card = document.createElement("section");
    card.className = "card";
    card.dataset.key = s.key;
    const h = document.createElement("h2");
    h.textContent = s.topic + " / " + s.subscriber + " ";
    const sm = document.createElement("small");
    sm.textContent = s.host + " · " + s.provider + (s.cross_host ? " · cross-host (clock sync)" : "");
    h.appendChild(sm);
    card.appendChild(h);
    const facts = document.createElement("div");
    facts.className = "facts";
    facts.textContent = `since start: ${fmtCount(s.total.count)} ticks, p50 ${fmtNs(s.total.p50)}, p99 ${fmtNs(s.total.p99)}, ` +
      `p99.9 ${fmtNs(s.total.p999)}, max ${fmtNs(s.total.max)}` +
      (s.negative || s.saturated ? ` · clamped: ${s.negative} below 0, ${s.saturated} above 10s` : "");
    card.appendChild(facts);
    const tc = timeChart(s), dc = distChart(s);
    card.appendChild(tc);
    card.appendChild(dc);
    cards.appendChild(card);

    const drawn = {};
    for (const pl of tc.querySelectorAll("polyline")) drawn[pl.dataset.line] = Number(pl.dataset.n);
    const dist = {};
    for (const pl of dc.querySelectorAll("polyline")) dist[pl.dataset.line] = Number(pl.dataset.n);
    const shown = {};
    for (const td of tr.querySelectorAll("td[data-ns]")) shown[td.className] = { ns: Number(td.dataset.ns), text: td.textContent };
    report.series.push({ key: s.key, topic: s.topic, subscriber: s.subscriber, intervals: s.intervals, last_end: s.last_end, drawn, dist, shown });
  }
  document.getElementById("tb-state").textContent = JSON.stringify(report);
}

// ---------- start ----------
document.getElementById("topic").onchange = (e) => { writeHash({ topic: e.target.value, subscriber: "" }); queueRender(); };
document.getElementById("subscriber").onchange = (e) => {
  writeHash({ topic: document.getElementById("topic").value, subscriber: e.target.value }); queueRender();
};
window.addEventListener("hashchange", queueRender);
setInterval(queueRender, 1000); // ages move on even without messages
loadStateRetrying();
connect();
