import assert from "node:assert/strict";
import { test } from "node:test";
import { fixtures, slidewin, wasm } from "./fixtures.mjs";

const xs = Float64Array.from(fixtures.stream.xs);
const times = Float64Array.from(fixtures.stream.times);
const orNull = (v) => (v === undefined || Number.isNaN(v) ? null : v);

function make({ class: name, window, param }) {
  const cls = slidewin[name];
  if (window === "count") return cls.byCount(param);
  if (window === "time") return cls.byTime(param);
  return new cls(param);
}

for (const c of fixtures.stream.cases) {
  const label = `${c.class}(${c.window || "param"} ${c.param})`;

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
