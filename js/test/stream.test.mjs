import assert from "node:assert/strict";
import { test } from "node:test";
import { fixtures, slidewin, wasm } from "./fixtures.mjs";

const xs = Float64Array.from(fixtures.stream.xs);
const times = Float64Array.from(fixtures.stream.times);
const orNull = (v) => (v === undefined || Number.isNaN(v) ? null : v);

function make({ class: name, window, param, extra }) {
  const cls = slidewin[name];
  if (window === "count") return cls.byCount(param, extra ?? undefined);
  if (window === "time") return cls.byTime(param, extra ?? undefined);
  if (name === "Ema") return new cls(param, { seed: extra });
  return new cls(param);
}

for (const c of fixtures.stream.cases) {
  const label = `${c.class}(${c.window || "param"} ${c.param}${c.extra === null ? "" : `, ${c.extra}`})`;

  test(`${label}: pushMany equals the Rust core on ${xs.length} samples, then replaceLast`, () => {
    const aggregate = make(c);
    assert.ok(aggregate instanceof slidewin[c.class] && aggregate instanceof slidewin.Aggregate);
    const values = c.timed ? aggregate.pushMany(xs, times) : aggregate.pushMany(xs);
    assert.ok(values instanceof Float64Array);
    assert.deepEqual(Array.from(values, orNull), c.values);
    assert.equal(orNull(aggregate.replaceLast(-3.25)), c.afterReplaceLast);
    assert.equal(orNull(aggregate.value), c.afterReplaceLast);
    aggregate.free();
  });

  test(`${label}: push one by one equals the Rust core`, () => {
    const aggregate = make(c);
    xs.forEach((x, i) => {
      const value = c.timed ? aggregate.push(x, times[i]) : aggregate.push(x);
      assert.equal(orNull(value), c.values[i], `sample ${i}`);
    });
    aggregate.free();
  });
}

for (const { function: name, param, values } of fixtures.batch) {
  test(`${name}(xs, ${param}) equals the Rust core`, () => {
    const out = slidewin[name](xs, param);
    assert.ok(out instanceof Float64Array);
    assert.deepEqual(Array.from(out), values);
  });
}

test("time windows empty as time passes; length and isFull follow", () => {
  const max = slidewin.SlidingMax.byTime(1000);
  max.push(5, 10_000);
  max.push(2, 10_400);
  assert.equal(max.valueAt(10_999), 5);
  assert.equal(max.valueAt(11_000), 2);
  assert.equal(max.length, 1);
  assert.equal(max.isFull, true);
  assert.equal(max.valueAt(11_400), undefined);
  max.clear();
  assert.equal(max.length, 0);
  max.free();
});

test("bad input throws RangeErrors naming the argument and value, and changes nothing", () => {
  const mean = slidewin.SlidingMean.byCount(3);
  mean.pushMany(new Float64Array([1, 2, 3]));
  const cases = [
    [() => slidewin.SlidingMean.byCount(0), "k must be a positive integer, got 0"],
    [() => slidewin.SlidingMean.byCount(2.5), "k must be a non-negative integer, got 2.5"],
    [() => slidewin.SlidingMax.byTime(-5), "window_ms must be a positive integer, got -5"],
    [() => new slidewin.Ewma(1.5), "alpha must be a number in (0, 1], got 1.5"],
    [() => new slidewin.Ewma(NaN), "alpha must be a number in (0, 1], got NaN"],
    [() => new slidewin.TimeEwma(0), "half_life_ms must be an integer in 1..=2^52, got 0"],
    [() => new slidewin.Rate(1.5), "window_ms must be an integer, got 1.5"],
    [() => mean.push(NaN), "x must be a finite number, got NaN"],
    [() => mean.push(Infinity), "x must be a finite number, got Infinity"],
    [() => mean.pushMany(new Float64Array([1]), new Float64Array([1, 2])), "times must be as long as xs, got 2"],
    [() => slidewin.slidingMean(xs, 0), "k must be a positive integer, got 0"],
    [() => slidewin.ewma(xs, 0), "alpha must be a number in (0, 1], got 0"],
  ];
  for (const [call, message] of cases) {
    assert.throws(call, (e) => e instanceof RangeError && e.message === message, message);
  }
  assert.equal(mean.value, 2);
  assert.equal(mean.length, 3);

  const timed = slidewin.SlidingSum.byTime(1000);
  timed.push(1, 5000);
  assert.throws(() => timed.push(1, 4000), {
    name: "RangeError",
    message: "t_ms must not be earlier than the newest sample (5000), got 4000",
  });
  assert.throws(() => slidewin.SlidingSum.byCount(2).replaceLast(1), {
    name: "RangeError",
    message: "replace_last needs a sample, the window is empty",
  });
  // A bad sample inside pushMany: the ones before it stay pushed.
  assert.throws(() => mean.pushMany(new Float64Array([10, NaN, 20])), RangeError);
  assert.equal(mean.value, 5);
  mean.free();
  timed.free();
});

test("free twice is safe; a freed aggregate throws a JS Error, not a trap", () => {
  const ewma = new slidewin.Ewma(0.5);
  ewma.free();
  ewma.free();
  assert.throws(() => ewma.push(1), (e) => e instanceof Error && !(e instanceof WebAssembly.RuntimeError));
});

test("a streaming SMA holds O(k) memory over 10^6 samples", () => {
  const k = 50;
  const sma = slidewin.SlidingMean.byCount(k);
  const memory = () => wasm.memory.buffer.byteLength;
  const chunk = new Float64Array(10_000).map((_, i) => i % 97);
  sma.pushMany(chunk); // warm up: the window and the allocator's first pages
  const before = memory();
  for (let i = 0; i < 100; i++) sma.pushMany(chunk); // 10^6 samples
  assert.equal(sma.length, k);
  assert.equal(memory(), before, "wasm memory grew while the window stayed at k samples");
  sma.free();
});

// Huge finite samples used to leave 0 or NaN behind for good.
test("huge finite samples: their true value or Infinity while in the window, exact values after", () => {
  const variance = slidewin.SlidingVariance.byCount(3);
  const mean = slidewin.SlidingMean.byCount(3);
  const wma = slidewin.SlidingWma.byCount(3);
  const huge = [1.7e308, 1.7e308];
  assert.deepEqual(Array.from(mean.pushMany(huge)), [1.7e308, 1.7e308]);
  assert.deepEqual(Array.from(variance.pushMany(huge), (v) => (Number.isNaN(v) ? null : v)), [null, 0]);
  wma.pushMany(huge);
  const after = [1, 2, 3, 4, 5, 6];
  const variances = Array.from(variance.pushMany(after));
  const means = Array.from(mean.pushMany(after));
  assert.ok(variances.slice(0, 2).every((v) => v === Infinity), `${variances}`);
  assert.deepEqual(variances.slice(2), [1, 1, 1, 1]);
  assert.ok(means.slice(0, 2).every((v) => Number.isFinite(v) && v > 1e307), `${means}`);
  assert.deepEqual(means.slice(2), [2, 3, 4, 5]);
  assert.deepEqual(Array.from(wma.pushMany(after)).slice(2), [14 / 6, 20 / 6, 26 / 6, 32 / 6]);
  const one = slidewin.SlidingVariance.byCount(3);
  one.pushMany([1e155, 1, 2, 3, 4]);
  assert.equal(one.value, 1);
  for (const a of [variance, mean, wma, one]) a.free();
});

/** The `q`-quantile of `xs` by sorting (linear interpolation between the nearest ranks). */
function sortedQuantile(xs, q) {
  if (xs.length === 0) return undefined;
  const sorted = [...xs].sort((a, b) => a - b);
  const h = (sorted.length - 1) * q;
  const floor = Math.floor(h);
  const fraction = h - floor;
  return fraction > 0 && floor + 1 < sorted.length ? (1 - fraction) * sorted[floor] + fraction * sorted[floor + 1] : sorted[floor];
}

test("SlidingQuantile equals a sort of the window on random traces (count, time, replaceLast)", () => {
  let seed = 7;
  const random = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
  for (const [window, param] of [["count", 1], ["count", 7], ["count", 100], ["time", 50], ["time", 400]]) {
    for (const q of [0, 0.5, 0.95, 0.99, 1, random()]) {
      const p = window === "count" ? slidewin.SlidingQuantile.byCount(param, q) : slidewin.SlidingQuantile.byTime(param, q);
      const samples = []; // [t, x]
      let t = 0;
      for (let step = 0; step < 1500; step++) {
        const x = Math.round(random() * 200) / 4 - 10; // ties are common
        let got;
        if (samples.length > 0 && random() < 0.15 && p.length > 0) {
          got = p.replaceLast(x);
          samples[samples.length - 1][1] = x;
        } else if (window === "count") {
          got = p.push(x);
          samples.push([t, x]);
        } else {
          t += Math.floor(random() * 12);
          got = p.push(x, t);
          samples.push([t, x]);
        }
        const inWindow = window === "count" ? samples.slice(-param) : samples.filter(([ts]) => ts > t - param);
        assert.equal(got, sortedQuantile(inWindow.map(([, v]) => v), q), `${window} ${param} q=${q} step ${step}`);
      }
      p.free();
    }
  }
});

test("Bollinger bands are the mean ± width population SDs; Ema seeds by SMA on request", () => {
  const bands = slidewin.Bollinger.byCount(4, 2);
  const lines = bands.pushManyBands([1, 3, 1, 3]);
  assert.deepEqual([lines.middle[0], lines.middle[1], lines.middle[3]], [1, 2, 2]);
  assert.ok(Math.abs(lines.middle[2] - 5 / 3) <= 2 ** -52 * 2, `${lines.middle[2]}`);
  assert.deepEqual([lines.lower[3], lines.upper[3]], [0, 4]);
  assert.deepEqual(bands.bands, { lower: 0, middle: 2, upper: 4 });
  assert.equal(bands.value, 2);
  assert.equal(slidewin.Bollinger.byCount(4).bands, undefined);
  const sma = new slidewin.Ema(3, { seed: "sma" });
  assert.deepEqual([2, 4, 6, 8].map((x) => sma.push(x)), [undefined, undefined, 4, 6]);
  const first = new slidewin.Ema(3);
  assert.deepEqual([2, 4].map((x) => first.push(x)), [2, 3]);
  assert.throws(() => new slidewin.Ema(3, { seed: "last" }), { name: "RangeError", message: 'seed must be "first" or "sma", got last' });
  assert.throws(() => slidewin.SlidingQuantile.byCount(3, 1.5), { name: "RangeError", message: "q must be a number in [0, 1], got 1.5" });
  assert.throws(() => slidewin.SlidingQuantile.byCount(3), { name: "RangeError", message: "q must be a number in [0, 1], got NaN" });
  assert.throws(() => slidewin.Bollinger.byCount(3, -1), { name: "RangeError", message: "width must be a finite number >= 0, got -1" });
});

test("push's fast path and the general one agree, also on undefined values and errors", () => {
  const fast = slidewin.SlidingVariance.byCount(3);
  const timed = slidewin.SlidingVariance.byCount(3);
  for (const x of [5, 7, 7.5, -2, 1e9]) assert.equal(fast.push(x), timed.push(x, 0));
  assert.equal(slidewin.SlidingVariance.byCount(3).push(1), undefined);
  assert.throws(() => fast.push(Infinity), { name: "RangeError", message: "x must be a finite number, got Infinity" });
});

test("using the package before init() says so", async () => {
  const { execFileSync } = await import("node:child_process");
  const script = `import { SlidingMean, SlidingLog, nowMs } from ${JSON.stringify(new URL("../index.js", import.meta.url).href)};
    for (const f of [() => SlidingMean.byCount(3), () => new SlidingLog(1, 1000), () => nowMs()]) {
      try { f(); console.log("no error"); } catch (e) { console.log(e.message); }
    }`;
  const out = execFileSync(process.execPath, ["--input-type=module", "-e", script], { encoding: "utf8" });
  assert.deepEqual(out.trim().split("\n"), Array(3).fill("slidewin: call and await init() before using its classes and functions"));
});

test("add buffers samples: every read and method sees them, in order, as push would", () => {
  let seed = 3;
  const random = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
  const xs = Float64Array.from({ length: 1000 }, () => 1e6 + random() * 100);
  const pushed = slidewin.SlidingMean.byCount(20);
  const added = slidewin.SlidingMean.byCount(20);
  xs.forEach((x, i) => {
    pushed.push(x);
    added.add(x);
    if (i % 97 === 0) assert.equal(added.value, pushed.value, `value after ${i}`);
    if (i % 301 === 0) assert.equal(added.replaceLast(x + 1), pushed.replaceLast(x + 1));
  });
  assert.equal(added.length, pushed.length);
  assert.equal(added.value, pushed.value);
  added.add(5);
  assert.throws(() => added.add(NaN), { name: "RangeError", message: "x must be a finite number, got NaN" });
  pushed.push(5);
  assert.equal(added.value, pushed.value, "the refused sample changed nothing, the one before it counts");
  added.add(7);
  added.clear();
  assert.equal(added.length, 0, "clear forgets gathered samples too");
  const ema = new slidewin.Ema(3, { seed: "sma" });
  [2, 4, 6, 8].forEach((x) => ema.add(x));
  assert.deepEqual(Array.from(ema.pushMany([10])), [8]);
  pushed.free();
  added.free();
});
