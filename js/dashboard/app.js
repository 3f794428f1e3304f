// The dashboard: polls the demo nginx's /stats.json (node-wide allowed/rejected totals per
// limiter), turns totals into per-second rates, and charts them with slidewin's moving average,
// EWMA, min/max band, rolling p95 and Bollinger band, all computed here in WebAssembly. Without the endpoint it runs on a
// synthetic feed and says so. State for tests and curious users: window.slidewinDashboard.
import init, { Bollinger, Ewma, SlidingMax, SlidingMean, SlidingMin, SlidingQuantile, nowMs } from "./vendor/index.js";
import uPlot from "./vendor/uPlot.esm.js";

const params = new URLSearchParams(location.search);
const statsUrl = params.get("stats") ?? "/stats.json";
const pollMs = Number(params.get("interval") ?? 1000);
const HISTORY = 300; // points kept (and recomputed when the window or alpha changes)
const METRICS = ["allowed", "rejected"];
const SERIES = ["mean", "ewma", "min", "max", "p95", "bbLower", "bbUpper"]; // per metric

const el = (id) => document.getElementById(id);
const state = {
  source: "starting",
  limiter: null,
  limiters: [],
  windowMs: Number(el("window").value) * 1000,
  alpha: Number(el("alpha").value),
  ticks: 0,
  previous: null, // last totals seen, per source
  times: [],
  rates: { allowed: [], rejected: [] },
  stats: null, // per metric: { aggregates, mean[], ewma[], min[], max[], p95[], bbLower[], bbUpper[] }
};
window.slidewinDashboard = state;

// --- slidewin: one set of aggregates per metric, fed one rate per tick ----------------------

function newStats(metric) {
  const aggregates = {
    mean: SlidingMean.byTime(state.windowMs),
    ewma: new Ewma(state.alpha),
    min: SlidingMin.byTime(state.windowMs),
    max: SlidingMax.byTime(state.windowMs),
    p95: SlidingQuantile.byTime(state.windowMs, 0.95),
  };
  const bollinger = Bollinger.byTime(state.windowMs, 2); // mean ± 2 population SDs
  const series = { aggregates, bollinger, bbLower: [], bbUpper: [] };
  for (const name of SERIES) series[name] ??= [];
  // Replay the kept history so a new window or alpha applies to what is on screen.
  state.times.forEach((t, i) => pushStats(series, state.rates[metric][i], t));
  return series;
}

function pushStats(series, rate, tMs) {
  for (const [name, aggregate] of Object.entries(series.aggregates)) {
    series[name].push(aggregate.push(rate, tMs));
  }
  series.bollinger.push(rate, tMs);
  const bands = series.bollinger.bands;
  series.bbLower.push(bands.lower);
  series.bbUpper.push(bands.upper);
}

function rebuildStats() {
  if (state.stats) {
    for (const metric of METRICS) {
      const s = state.stats[metric];
      [...Object.values(s.aggregates), s.bollinger].forEach((a) => a.free());
    }
  }
  state.stats = Object.fromEntries(METRICS.map((m) => [m, newStats(m)]));
}

// --- feeds: the live endpoint, or a synthetic one when it is unreachable ---------------------

async function liveSample() {
  const response = await fetch(statsUrl, { cache: "no-store" });
  if (!response.ok) throw new Error(`${statsUrl}: HTTP ${response.status}`);
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

// --- one tick: read totals, derive rates, update aggregates and chart ------------------------

const RETRY_MS = 5000;
let liveRetryAt = 0;

async function tick() {
  let sample, source;
  // Once the endpoint failed, ask it again only every RETRY_MS (each failure is a console error).
  if (params.get("feed") === "synthetic" || performance.now() < liveRetryAt) {
    [sample, source] = [syntheticSample(), "synthetic"];
  } else {
    try {
      [sample, source] = [await liveSample(), "live"];
    } catch (e) {
      liveRetryAt = performance.now() + RETRY_MS;
      [sample, source] = [syntheticSample(), "synthetic"];
    }
  }
  setSource(source);
  updateLimiters(Object.keys(sample.limiters ?? {}));
  const totals = sample.limiters?.[state.limiter];
  const previous = state.previous;
  state.previous = totals && { source, limiter: state.limiter, tMs: sample.now_ms, ...totals };
  if (!totals || !previous || previous.source !== source || previous.limiter !== state.limiter) return;
  const seconds = (sample.now_ms - previous.tMs) / 1000;
  if (seconds <= 0) return;

  state.times.push(sample.now_ms);
  for (const metric of METRICS) {
    const rate = Math.max(0, totals[metric] - previous[metric]) / seconds;
    state.rates[metric].push(rate);
    pushStats(state.stats[metric], rate, sample.now_ms);
  }
  trimHistory();
  state.ticks += 1;
  render();
}

function trimHistory() {
  const excess = state.times.length - HISTORY;
  if (excess <= 0) return;
  state.times.splice(0, excess);
  for (const metric of METRICS) {
    state.rates[metric].splice(0, excess);
    for (const name of SERIES) state.stats[metric][name].splice(0, excess);
  }
}

function setSource(source) {
  if (state.source === source) return;
  state.source = source;
  const p = el("source");
  p.className = `source ${source}`;
  p.textContent = source === "live"
    ? `Live: polling ${statsUrl} every ${pollMs} ms`
    : `Synthetic feed: ${statsUrl} is unreachable, showing made-up traffic`;
}

function updateLimiters(names) {
  const known = names.join();
  if (known === state.limiters.join()) return;
  state.limiters = names;
  el("limiter").replaceChildren(...names.map((n) => new Option(n, n, false, n === state.limiter)));
  if (!names.includes(state.limiter)) state.limiter = names[0] ?? null;
}

// --- chart ------------------------------------------------------------------------------------

const COLORS = { allowed: "#1b7f3b", rejected: "#c62828" };
let chart;

function chartData() {
  const data = [state.times.map((t) => t / 1000)];
  for (const metric of METRICS) {
    const s = state.stats[metric];
    data.push(state.rates[metric], s.mean, s.ewma, s.max, s.min, s.p95, s.bbUpper, s.bbLower);
  }
  return data;
}

function newChart() {
  const series = [{}];
  const bands = [];
  for (const metric of METRICS) {
    const color = COLORS[metric];
    const base = series.length;
    series.push(
      { label: `${metric}/s`, stroke: color, width: 1, points: { show: true, size: 4 } },
      { label: `${metric} moving avg`, stroke: color, width: 2.5 },
      { label: `${metric} EWMA`, stroke: color, width: 1.5, dash: [6, 4] },
      { label: `${metric} max`, stroke: color + "55", width: 1 },
      { label: `${metric} min`, stroke: color + "55", width: 1 },
      { label: `${metric} p95`, stroke: color, width: 2, dash: [2, 3] },
      { label: `${metric} Bollinger upper`, stroke: "#5c6bc0", width: 1, dash: [8, 3] },
      { label: `${metric} Bollinger lower`, stroke: "#5c6bc0", width: 1, dash: [8, 3] },
    );
    bands.push({ series: [base + 3, base + 4], fill: color + "22" });
    bands.push({ series: [base + 6, base + 7], fill: "#5c6bc01a" });
  }
  const width = Math.min(1100, document.body.clientWidth);
  return new uPlot({ width, height: 420, series, bands, axes: [{}, { label: "requests / s" }] }, chartData(), el("chart"));
}

function render() {
  chart.setData(chartData());
  const rows = METRICS.map((metric) => {
    const s = state.stats[metric];
    const last = (a) => (a.length ? a[a.length - 1].toFixed(1) : "–");
    const tr = document.createElement("tr");
    const band = s.bbLower.length ? `${last(s.bbLower)} – ${last(s.bbUpper)}` : "–";
    for (const text of [metric, last(state.rates[metric]), last(s.mean), last(s.ewma), last(s.min), last(s.max), last(s.p95), band]) {
      tr.appendChild(document.createElement("td")).textContent = text;
    }
    return tr;
  });
  el("latest").tBodies[0].replaceChildren(...rows);
}

// --- controls: new window or alpha -> new aggregates replayed over the history ---------------

function applyControls() {
  const windowMs = Number(el("window").value) * 1000;
  const alpha = Number(el("alpha").value);
  try {
    // Validate both before replacing anything: slidewin throws a RangeError naming the argument.
    SlidingMean.byTime(windowMs).free();
    new Ewma(alpha).free();
    el("error").textContent = "";
  } catch (e) {
    el("error").textContent = e.message;
    return;
  }
  Object.assign(state, { windowMs, alpha });
  rebuildStats();
  render();
}

async function main() {
  await init();
  rebuildStats();
  chart = newChart();
  el("controls").addEventListener("change", (event) => {
    if (event.target.id === "limiter") {
      state.limiter = event.target.value;
      state.times = [];
      for (const metric of METRICS) state.rates[metric] = [];
      rebuildStats();
      render();
    } else {
      applyControls();
    }
  });
  el("controls").addEventListener("submit", (event) => event.preventDefault());
  for (;;) {
    await tick();
    await new Promise((resolve) => setTimeout(resolve, pollMs));
  }
}

main();
