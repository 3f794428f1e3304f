// SMA (k = 50) and EMA over 10^6 samples, per sample: slidewin (wasm) `push` (one call per
// sample), `add` (buffered) and `pushMany`, side by side with technicalindicators 3.1 and
// trading-signals 8.3 (one sample at a time and in batch) and a hand-written plain-JS loop;
// drift of the plain running sum; memory of a streaming SMA; size.
// Usage: node bench/bench.mjs   (after `make js`; figures go to BENCHMARKS.md by hand)
import { readFileSync } from "node:fs";
import { gzipSync } from "node:zlib";
import { createRequire } from "node:module";
import { loadavg } from "node:os";
import { EMA as TsEMA, SMA as TsSMA } from "trading-signals";
import init, { Ema, Ewma, SlidingMean, slidingMean, ewma } from "../index.js";

const { SMA, EMA } = createRequire(import.meta.url)("technicalindicators");
const wasm = await init();

const N = 1_000_000;
const K = 50;
const ALPHA = 2 / (K + 1); // technicalindicators' EMA weight for period K
// A noisy series around a large offset, where a naive running sum drifts.
let seed = 42;
const random = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
const xs = Float64Array.from({ length: N }, (_, i) => 1e9 + 1000 * Math.sin(i / 500) + random() * 100 - 50);
const xsArray = Array.from(xs);

/** Process CPU time in ns: less disturbed than wall time when other jobs share the cores. */
const cpuNs = () => {
  const { user, system } = process.cpuUsage();
  return (user + system) * 1000;
};

/** Best of `runs` timings of fn(), in CPU ns per sample. */
function time(fn, runs = 9) {
  let best = Infinity;
  let out;
  for (let r = 0; r < runs; r++) {
    const start = cpuNs();
    out = fn();
    best = Math.min(best, (cpuNs() - start) / N);
  }
  return { ns: best, out };
}

function plainSma(values, k) {
  const out = new Float64Array(values.length);
  const ring = new Float64Array(k);
  let sum = 0;
  for (let i = 0; i < values.length; i++) {
    const x = values[i];
    sum += x - ring[i % k];
    ring[i % k] = x;
    out[i] = sum / Math.min(i + 1, k);
  }
  return out;
}

function plainEwma(values, alpha) {
  const out = new Float64Array(values.length);
  let mean = values[0];
  for (let i = 0; i < values.length; i++) {
    mean += alpha * (values[i] - mean);
    out[i] = mean;
  }
  return out;
}

const results = {
  "SMA slidewin pushMany (streaming object)": time(() => {
    const sma = SlidingMean.byCount(K);
    const out = sma.pushMany(xs);
    sma.free();
    return out;
  }),
  "SMA slidewin slidingMean (batch)": time(() => slidingMean(xs, K)),
  "SMA slidewin push per sample": time(() => {
    const sma = SlidingMean.byCount(K);
    let v;
    for (let i = 0; i < N; i++) v = sma.push(xs[i]);
    sma.free();
    return v;
  }, 5),
  "SMA slidewin add per sample (buffered)": time(() => {
    const sma = SlidingMean.byCount(K);
    for (let i = 0; i < N; i++) sma.add(xs[i]);
    const v = sma.value;
    sma.free();
    return v;
  }, 5),
  "SMA trading-signals add": time(() => {
    const sma = new TsSMA(K);
    let v;
    for (let i = 0; i < N; i++) v = sma.add(xs[i]);
    return v;
  }, 3),
  "SMA technicalindicators nextValue": time(() => {
    const sma = new SMA({ period: K, values: [] });
    let v;
    for (let i = 0; i < N; i++) v = sma.nextValue(xs[i]);
    return v;
  }, 5),
  "SMA technicalindicators calculate": time(() => SMA.calculate({ period: K, values: xsArray }), 5),
  "SMA plain JS running sum": time(() => plainSma(xs, K)),
  "EMA slidewin pushMany (streaming object)": time(() => {
    const e = new Ewma(ALPHA);
    const out = e.pushMany(xs);
    e.free();
    return out;
  }),
  "EMA slidewin ewma (batch)": time(() => ewma(xs, ALPHA)),
  "EMA slidewin push per sample": time(() => {
    const e = new Ema(K);
    let v;
    for (let i = 0; i < N; i++) v = e.push(xs[i]);
    e.free();
    return v;
  }, 5),
  "EMA slidewin add per sample (buffered)": time(() => {
    const e = new Ema(K);
    for (let i = 0; i < N; i++) e.add(xs[i]);
    const v = e.value;
    e.free();
    return v;
  }, 5),
  "EMA trading-signals add": time(() => {
    const e = new TsEMA(K);
    let v;
    for (let i = 0; i < N; i++) v = e.add(xs[i]);
    return v;
  }, 5),
  "EMA technicalindicators nextValue": time(() => {
    const e = new EMA({ period: K, values: [] });
    let v;
    for (let i = 0; i < N; i++) v = e.nextValue(xs[i]);
    return v;
  }, 5),
  "EMA technicalindicators calculate": time(() => EMA.calculate({ period: K, values: xsArray }), 5),
  "EMA plain JS": time(() => plainEwma(xs, ALPHA)),
};

console.log(`node ${process.version}, N = ${N}, k = ${K}, alpha = 2/${K + 1}; best-of-runs process CPU time; load average ${loadavg().map((l) => l.toFixed(2)).join(" ")}`);
for (const [name, { ns }] of Object.entries(results)) console.log(`${name.padEnd(44)} ${ns.toFixed(1).padStart(7)} ns/sample`);

const ns = (name) => results[name].ns;
console.log("\nratios:");
console.log(`SMA: technicalindicators nextValue / slidewin pushMany = ${(ns("SMA technicalindicators nextValue") / ns("SMA slidewin pushMany (streaming object)")).toFixed(1)}x`);
console.log(`SMA: technicalindicators calculate / slidewin pushMany = ${(ns("SMA technicalindicators calculate") / ns("SMA slidewin pushMany (streaming object)")).toFixed(1)}x`);
console.log(`SMA: slidewin pushMany / plain JS = ${(ns("SMA slidewin pushMany (streaming object)") / ns("SMA plain JS running sum")).toFixed(2)}x`);
console.log(`EMA: technicalindicators nextValue / slidewin pushMany = ${(ns("EMA technicalindicators nextValue") / ns("EMA slidewin pushMany (streaming object)")).toFixed(1)}x`);
console.log(`EMA: technicalindicators calculate / slidewin pushMany = ${(ns("EMA technicalindicators calculate") / ns("EMA slidewin pushMany (streaming object)")).toFixed(1)}x`);
console.log(`EMA: slidewin pushMany / plain JS = ${(ns("EMA slidewin pushMany (streaming object)") / ns("EMA plain JS")).toFixed(2)}x`);
for (const kind of ["SMA", "EMA"]) {
  const peer = ns(`${kind} trading-signals add`);
  console.log(`${kind}: trading-signals add / slidewin push = ${(peer / ns(`${kind} slidewin push per sample`)).toFixed(2)}x, / slidewin add = ${(peer / ns(`${kind} slidewin add per sample (buffered)`)).toFixed(2)}x`);
}

// The same answers: trading-signals' EMA is first-sample seeded like Ema(K) (bit for bit);
// technicalindicators' is SMA-seeded like Ema(K, { seed: "sma" }).
const head = xs.subarray(0, 2_000);
const ts = new TsEMA(K);
const tsValues = Array.from(head, (x) => ts.add(x));
const ours = new Ema(K);
const identical = tsValues.every((v, i) => v === ours.push(head[i]));
const ti = EMA.calculate({ period: K, values: Array.from(head) });
const seeded = new Ema(K, { seed: "sma" }).pushMany(head).slice(K - 1);
const worst = ti.reduce((m, v, i) => Math.max(m, Math.abs(v - seeded[i]) / Math.abs(v)), 0);
console.log(`agreement: EMA vs trading-signals bit-identical on ${head.length} samples: ${identical}; ` +
  `Ema(seed "sma") vs technicalindicators: worst relative difference ${worst.toExponential(2)}`);

// Drift: the last window's exact mean (summed afresh) against each running method.
const exactLast = xs.subarray(N - K).reduce((a, b) => a + b, 0) / K;
const plainLast = results["SMA plain JS running sum"].out[N - 1];
const oursLast = results["SMA slidewin pushMany (streaming object)"].out[N - 1];
console.log(`\ndrift after ${N} samples (last window's mean, summed afresh = ${exactLast}):`);
console.log(`  plain JS running sum: ${(plainLast - exactLast).toExponential(3)}`);
console.log(`  slidewin:             ${(oursLast - exactLast).toExponential(3)}`);

// Memory: wasm linear memory while one streaming SMA takes 10^6 samples, one at a time.
const sma = SlidingMean.byCount(K);
for (let i = 0; i < 1000; i++) sma.push(xs[i]);
const before = wasm.memory.buffer.byteLength;
for (let i = 0; i < N; i++) sma.push(xs[i]);
console.log(`\nmemory: wasm linear memory ${before} bytes before, ${wasm.memory.buffer.byteLength} after 10^6 pushes (window holds ${sma.length})`);
sma.free();

const bytes = readFileSync(new URL("../pkg/slidewin_bg.wasm", import.meta.url));
console.log(`size: slidewin_bg.wasm ${bytes.length} bytes, ${gzipSync(bytes, { level: 9 }).length} gzipped`);
