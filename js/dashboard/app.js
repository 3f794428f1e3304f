// The operator's dashboard: polls the demo nginx's /stats.json (node-wide admitted/refused
// totals per limiter) and /slidewin/top (the most refused keys and the keys nearest their
// limit), turns totals into per-second rates, and charts the chosen limiter's rates smoothed
// by one aggregate with a p10–p90 quantile band (a rate band that never goes below 0), all
// computed here by the slidewin WebAssembly package. An adaptive panel appears only when
// /stats.json has an "adaptive" section, a store panel only when a limiter reports leases or a
// fallback (store "redis"), a units panel only when a limiter reserves (tokens, money:
// resty.slidewin.llm). Without the endpoint it runs on a synthetic feed and says so. State for
// tests and curious users: window.slidewinDashboard.
import init, { SlidingMean, SlidingQuantile, SlidingSum, nowMs } from "./vendor/index.js";
import uPlot from "./vendor/uPlot.esm.js";

const params = new URLSearchParams(location.search);
const statsUrl = params.get("stats") ?? "/stats.json";
const topUrl = params.get("top") ?? "/slidewin/top";
const pollMs = Number(params.get("interval") ?? 1000);
const HISTORY = 300; // points kept (and replayed when the window or the aggregate changes)
const METRICS = ["allowed", "rejected"];
const LABELS = { allowed: "admitted", rejected: "refused" };
const BAND = [0.1, 0.9]; // quantiles of the band
// The one smoothing aggregate, chosen in the page: a slidewin aggregate over the time window.
const SMOOTHERS = {
  mean: (windowMs) => SlidingMean.byTime(windowMs),
  median: (windowMs) => SlidingQuantile.byTime(windowMs, 0.5),
};

const el = (id) => document.getElementById(id);
const state = {
  source: "starting",
  limiter: null,
  limiters: [],
  windowMs: Number(el("window").value) * 1000,
  smoothing: el("smoothing").value,
  ticks: 0,
  previous: {}, // per limiter: the last totals seen, with their source and time
  series: {}, // per limiter: { times, allowed: {rate, smooth, low, high, aggregates}, rejected: ... }
  top: null, // the last /slidewin/top answer, or { error }
  topRows: { refused: [], admitted: [] }, // what the tables show
  adaptive: {}, // per adaptive limiter: { times, limit, p95_ms, last }
  store: {}, // per limiter with leases or a fallback: { previous, rates }
  units: {}, // per limiter that reserves: { previous, rates, deltas, sums: { used, admitted }, window }
  unitsBefore: {}, // per limiter that has not reserved yet: its totals, with zero units
  plotted: () => chart?.data ?? [], // what the chart draws
};
window.slidewinDashboard = state;

// --- slidewin: per limiter and metric, the smoothing aggregate and the band's quantiles -----

function newMetric() {
  return {
    rate: [], smooth: [], low: [], high: [],
    aggregates: [SMOOTHERS[state.smoothing](state.windowMs),
      ...BAND.map((q) => SlidingQuantile.byTime(state.windowMs, q))],
  };
}

function pushMetric(m, rate, tMs) {
  const [smooth, low, high] = m.aggregates.map((a) => a.push(rate, tMs));
  m.rate.push(rate);
  m.smooth.push(smooth);
  m.low.push(low);
  m.high.push(high);
}

function newSeries(old) {
  const s = { times: [] };
  for (const metric of METRICS) s[metric] = newMetric();
  // Replay the kept history so a new window or aggregate applies to what is on screen.
  old?.times.forEach((t, i) => {
    s.times.push(t);
    for (const metric of METRICS) pushMetric(s[metric], old[metric].rate[i], t);
  });
  return s;
}

function freeSeries(s) {
  for (const metric of METRICS) s[metric].aggregates.forEach((a) => a.free());
}

function rebuildSeries() {
  for (const [name, old] of Object.entries(state.series)) {
    state.series[name] = newSeries(old);
    freeSeries(old);
  }
}

// --- feeds: the live endpoints, or a synthetic one when /stats.json is unreachable -----------

async function getJson(url) {
  const response = await fetch(url, { cache: "no-store" });
  if (!response.ok) throw new Error(`${url}: HTTP ${response.status}`);
  return response.json();
}

// Node-wide totals in /stats.json's shape, from a made-up traffic pattern.
const synthetic = { totals: {}, startMs: null };
function syntheticSample() {
  const now = nowMs();
  synthetic.startMs ??= now;
  const phase = (now - synthetic.startMs) / 10_000;
  const limiters = {};
  for (const [i, name] of ["api", "api-shared"].entries()) {
    const total = synthetic.totals[name] ?? { allowed: 0, rejected: 0, keys: 3 };
    const offered = Math.max(0, 40 + 30 * Math.sin(phase + i) + 10 * (Math.random() - 0.5)) * (pollMs / 1000);
    const admitted = Math.min(offered, 45 * (pollMs / 1000));
    total.allowed += Math.round(admitted);
    total.rejected += Math.round(offered - admitted);
    synthetic.totals[name] = total;
    limiters[name] = { ...total };
  }
  return { now_ms: now, limiters };
}

// --- one tick: read totals, derive rates, update aggregates, tables and charts --------------

const RETRY_MS = 5000;
let liveRetryAt = 0;

async function tick() {
  let sample, source;
  // Once the endpoint failed, ask it again only every RETRY_MS (each failure is a console error).
  if (params.get("feed") === "synthetic" || performance.now() < liveRetryAt) {
    [sample, source] = [syntheticSample(), "synthetic"];
  } else {
    try {
      [sample, source] = [await getJson(statsUrl), "live"];
    } catch (e) {
      liveRetryAt = performance.now() + RETRY_MS;
      [sample, source] = [syntheticSample(), "synthetic"];
    }
  }
  setSource(source);
  updateLimiters(Object.keys(sample.limiters ?? {}));
  for (const [name, totals] of Object.entries(sample.limiters ?? {})) {
    addTotals(name, totals, source, sample.now_ms);
    addStore(name, totals, sample.now_ms);
    addUnits(name, totals, sample.now_ms);
  }
  addAdaptive(sample.adaptive, sample.now_ms);
  if (source === "live") {
    try {
      state.top = await getJson(`${topUrl}?n=10`);
    } catch (e) {
      state.top = { error: e.message };
    }
  } else {
    state.top = { error: "no live feed" };
  }
  state.ticks += 1;
  render();
}

function addTotals(name, totals, source, tMs) {
  const previous = state.previous[name];
  state.previous[name] = { source, tMs, ...totals };
  if (!previous || previous.source !== source) return;
  const seconds = (tMs - previous.tMs) / 1000;
  if (seconds <= 0) return;
  const s = (state.series[name] ??= newSeries());
  s.times.push(tMs);
  // Totals only grow; a restarted nginx starts them again at 0: no negative rate.
  for (const metric of METRICS) pushMetric(s[metric], Math.max(0, totals[metric] - previous[metric]) / seconds, tMs);
  const excess = s.times.length - HISTORY;
  if (excess > 0) {
    s.times.splice(0, excess);
    for (const metric of METRICS) for (const key of ["rate", "smooth", "low", "high"]) s[metric][key].splice(0, excess);
  }
}

// A limiter's lease and fallback counters (totals in /stats.json) as rates per second.
const LEASE_COUNTERS = ["calls", "granted", "spent", "returned", "expired", "local"];
function addStore(name, totals, tMs) {
  if (!totals.lease && totals.fallback_decisions === undefined) return;
  const now = { tMs, fallback: totals.fallback_decisions ?? 0, decisions: totals.allowed + totals.rejected };
  for (const c of LEASE_COUNTERS) now[c] = totals.lease?.[c] ?? 0;
  const s = (state.store[name] ??= { previous: null, rates: null, leases: Boolean(totals.lease) });
  const before = s.previous;
  s.previous = now;
  const seconds = before && (tMs - before.tMs) / 1000;
  if (!(seconds > 0)) return;
  s.rates = {};
  for (const c of [...LEASE_COUNTERS, "fallback"]) s.rates[c] = Math.max(0, now[c] - before[c]) / seconds;
  // Of the decisions in this interval, the share made without a Redis call.
  const decided = now.decisions - before.decisions;
  s.rates.localShare = decided > 0 ? Math.min(1, Math.max(0, now.local - before.local) / decided) : undefined;
}

// A limiter's reservation units (tokens, cents: /stats.json's reservation_units) as rates per
// second, and the units used over the chosen window next to the requests admitted in it.
const UNIT_KINDS = ["reserved", "used", "given_back", "kept", "over", "owed"];
const newUnitSums = () => ({ used: SlidingSum.byTime(state.windowMs), admitted: SlidingSum.byTime(state.windowMs) });
function addUnits(name, totals, tMs) {
  const units = totals.reservation_units;
  const now = { tMs, admitted: totals.allowed };
  for (const k of UNIT_KINDS) now[k] = units?.[k] ?? 0;
  if (!units) {
    // Nothing reserved yet (the member comes with the first reservation): zero units now, so
    // that the first reservations seen count from here.
    state.unitsBefore[name] = now;
    return;
  }
  const u = (state.units[name] ??= {
    previous: state.unitsBefore[name] ?? null, rates: null, deltas: 0, sums: newUnitSums(), window: null,
  });
  const before = u.previous;
  u.previous = now;
  const seconds = before && (tMs - before.tMs) / 1000;
  if (!(seconds > 0)) return;
  const delta = (k) => Math.max(0, now[k] - before[k]);
  u.rates = {};
  for (const k of [...UNIT_KINDS, "admitted"]) u.rates[k] = delta(k) / seconds;
  u.deltas += 1;
  u.window = { used: u.sums.used.push(delta("used"), tMs), admitted: u.sums.admitted.push(delta("admitted"), tMs) };
}

function addAdaptive(section, tMs) {
  for (const [name, now] of Object.entries(section ?? {})) {
    const a = (state.adaptive[name] ??= { times: [], limit: [], p95_ms: [], last: null });
    a.times.push(tMs / 1000);
    a.limit.push(now.limit);
    a.p95_ms.push(now.p95_ms);
    a.last = now;
    if (a.times.length > HISTORY) for (const key of ["times", "limit", "p95_ms"]) a[key].shift();
  }
}

function setSource(source) {
  if (state.source === source) return;
  state.source = source;
  const p = el("source");
  p.className = `source ${source}`;
  p.textContent = source === "live"
    ? `Live: polling ${statsUrl} and ${topUrl} every ${pollMs} ms`
    : `Synthetic feed: ${statsUrl} is unreachable, showing made-up traffic`;
}

function updateLimiters(names) {
  if (names.join() === state.limiters.join()) return;
  state.limiters = names;
  el("limiter").replaceChildren(...names.map((n) => new Option(n, n, false, n === state.limiter)));
  if (!names.includes(state.limiter)) state.limiter = names[0] ?? null;
}

// --- rendering ------------------------------------------------------------------------------

const COLORS = { allowed: "#1b7f3b", rejected: "#c62828" };
let chart, adaptiveChart;

const last = (a) => (a?.length ? a[a.length - 1] : undefined);
const fixed = (x, digits = 1) => (Number.isFinite(x) ? x.toFixed(digits) : "–");

/** The smoothed refusal ratio (refused / all), or undefined before any request. */
function refusalRatio(s) {
  const [admitted, refused] = [last(s?.allowed.smooth), last(s?.rejected.smooth)];
  return admitted + refused > 0 ? refused / (admitted + refused) : undefined;
}

function chartData() {
  const s = state.series[state.limiter] ?? newSeriesView();
  const data = [s.times.map((t) => t / 1000)];
  for (const metric of METRICS) data.push(s[metric].rate, s[metric].smooth, s[metric].low, s[metric].high);
  return data;
}

function newSeriesView() {
  const empty = { rate: [], smooth: [], low: [], high: [] };
  return { times: [], allowed: empty, rejected: empty };
}

function newChart() {
  const series = [{}];
  const bands = [];
  for (const metric of METRICS) {
    const color = COLORS[metric];
    const base = series.length;
    series.push(
      { label: `${LABELS[metric]}/s`, stroke: color + "55", width: 1, points: { show: true, size: 3, fill: color + "55" } },
      { label: `${LABELS[metric]}/s smoothed`, stroke: color, width: 2 },
      { label: `${LABELS[metric]} p10`, stroke: "transparent", points: { show: false } },
      { label: `${LABELS[metric]} p90`, stroke: "transparent", points: { show: false } },
    );
    bands.push({ series: [base + 3, base + 2], fill: color + "22" });
  }
  const opts = {
    width: el("chart").clientWidth, height: 250, series, bands,
    legend: { show: false }, // the page's own legend (#legend): four entries, never overflowing
    scales: { y: { range: (u, min, max) => [0, Math.max(1, max * 1.1)] } }, // rates start at 0
    axes: [{}, { label: "requests / s", size: 60 }],
  };
  return new uPlot(opts, chartData(), el("chart"));
}

function cell(tr, text, className) {
  const td = tr.appendChild(document.createElement("td"));
  td.textContent = text;
  if (className) td.className = className;
}

function renderSummary() {
  const rows = state.limiters.map((name) => {
    const s = state.series[name];
    const tr = document.createElement("tr");
    tr.dataset.limiter = name;
    if (name === state.limiter) tr.className = "selected";
    const top = state.top?.limiters?.[name];
    cell(tr, name);
    cell(tr, fixed(last(s?.allowed.smooth)));
    cell(tr, fixed(last(s?.rejected.smooth)));
    const ratio = refusalRatio(s);
    cell(tr, ratio === undefined ? "–" : `${(100 * ratio).toFixed(1)} %`);
    cell(tr, top && "at_limit" in top ? `${top.at_limit} / ${top.live}` : "–");
    return tr;
  });
  el("summary").tBodies[0].replaceChildren(...rows);
}

function hitterRows(list) {
  return (list ?? []).map((h) => ({
    key: h.key, refused: h.refused, count: h.count, limit: h.limit, window: h.window,
  }));
}

function renderTop() {
  const top = state.top?.limiters?.[state.limiter];
  const why = state.top?.error ?? top?.unsupported ?? (top ? "" : "no data for this limiter");
  el("top-note").textContent = why ? `Top keys unavailable: ${why}` : "";
  state.topRows = { refused: hitterRows(top?.refused), admitted: hitterRows(top?.admitted) };
  for (const [list, id] of [["refused", "top-refused"], ["admitted", "top-near"]]) {
    const rows = state.topRows[list].map((h) => {
      const tr = document.createElement("tr");
      cell(tr, h.key, "key");
      if (list === "refused") cell(tr, String(h.refused));
      cell(tr, `${h.count} / ${h.limit}`);
      cell(tr, `${Math.round((100 * h.count) / h.limit)} %`);
      cell(tr, String(h.window));
      return tr;
    });
    el(id).tBodies[0].replaceChildren(...rows);
  }
}

function renderAdaptive() {
  const names = Object.keys(state.adaptive);
  const panel = el("adaptive");
  panel.hidden = names.length === 0;
  if (panel.hidden) return;
  const rows = names.map((name) => {
    const a = state.adaptive[name].last;
    const tr = document.createElement("tr");
    cell(tr, name);
    for (const x of [a.limit, a.inflight]) cell(tr, String(x));
    for (const x of [a.p50_ms, a.p95_ms, a.p99_ms]) cell(tr, fixed(x));
    cell(tr, `${fixed(100 * a.loss_ratio)} %`);
    cell(tr, fixed(a.goodput_rps));
    return tr;
  });
  el("adaptive-table").tBodies[0].replaceChildren(...rows);
  const a = state.adaptive[names[0]];
  const data = [a.times, a.limit, a.p95_ms];
  if (!adaptiveChart) {
    adaptiveChart = new uPlot({
      width: el("adaptive-chart").clientWidth, height: 140, legend: { show: false },
      series: [{}, { label: "limit", stroke: "#5c6bc0", width: 2, scale: "limit" },
        { label: "p95 ms", stroke: "#a15c00", width: 1.5, scale: "ms" }],
      scales: { limit: { range: (u, min, max) => [0, Math.max(1, max * 1.1)] },
        ms: { range: (u, min, max) => [0, Math.max(1, max * 1.1)] } },
      axes: [{}, { scale: "limit", size: 45 }, { scale: "ms", side: 1, size: 45 }],
    }, data, el("adaptive-chart"));
  } else {
    adaptiveChart.setData(data);
  }
}

function renderStore() {
  const names = Object.keys(state.store);
  el("store").hidden = names.length === 0;
  const rows = names.map((name) => {
    const { rates, leases } = state.store[name];
    const tr = document.createElement("tr");
    cell(tr, name);
    for (const c of LEASE_COUNTERS.slice(0, 5)) cell(tr, leases && rates ? fixed(rates[c]) : "–");
    cell(tr, leases && rates?.localShare !== undefined ? `${(100 * rates.localShare).toFixed(1)} %` : "–");
    cell(tr, rates ? fixed(rates.fallback) : "–");
    return tr;
  });
  el("store-table").tBodies[0].replaceChildren(...rows);
}

function renderUnits() {
  const names = Object.keys(state.units);
  el("units").hidden = names.length === 0;
  const rows = names.map((name) => {
    const { rates, window } = state.units[name];
    const tr = document.createElement("tr");
    cell(tr, name);
    cell(tr, rates ? fixed(rates.admitted) : "–");
    cell(tr, window ? fixed(window.admitted, 0) : "–");
    cell(tr, window ? fixed(window.used, 0) : "–");
    for (const k of UNIT_KINDS) cell(tr, rates ? fixed(rates[k]) : "–");
    return tr;
  });
  el("units-table").tBodies[0].replaceChildren(...rows);
}

function render() {
  chart.setData(chartData());
  const s = state.series[state.limiter];
  el("now-admitted").textContent = fixed(last(s?.allowed.smooth));
  el("now-refused").textContent = fixed(last(s?.rejected.smooth));
  const ratio = refusalRatio(s);
  el("now-ratio").textContent = ratio === undefined ? "–" : `${(100 * ratio).toFixed(1)} %`;
  el("chart-title").textContent = `${state.limiter ?? "–"}: requests per second`;
  renderSummary();
  renderTop();
  renderAdaptive();
  renderStore();
  renderUnits();
}

// --- controls: a new window or aggregate -> new aggregates replayed over the history --------

function applyControls() {
  const windowMs = Number(el("window").value) * 1000;
  const smoothing = el("smoothing").value;
  try {
    // Validate before replacing anything: slidewin throws a RangeError naming the argument.
    SlidingMean.byTime(windowMs).free();
    el("error").textContent = "";
  } catch (e) {
    el("error").textContent = e.message;
    return;
  }
  Object.assign(state, { windowMs, smoothing });
  // The units over the window start again over the new one.
  for (const u of Object.values(state.units)) {
    for (const sum of Object.values(u.sums)) sum.free();
    Object.assign(u, { sums: newUnitSums(), window: null });
  }
  el("smoothing-label").textContent = el("smoothing").selectedOptions[0].textContent;
  rebuildSeries();
  render();
}

function selectLimiter(name) {
  state.limiter = name;
  el("limiter").value = name;
  render();
}

async function main() {
  await init();
  chart = newChart();
  el("controls").addEventListener("change", (event) => {
    if (event.target.id === "limiter") selectLimiter(event.target.value);
    else applyControls();
  });
  el("controls").addEventListener("submit", (event) => event.preventDefault());
  el("summary").addEventListener("click", (event) => {
    const row = event.target.closest("tr[data-limiter]");
    if (row) selectLimiter(row.dataset.limiter);
  });
  for (;;) {
    await tick();
    await new Promise((resolve) => setTimeout(resolve, pollMs));
  }
}

main();
