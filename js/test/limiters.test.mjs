import assert from "node:assert/strict";
import { test } from "node:test";
import { fixtures, slidewin } from "./fixtures.mjs";

const { trace, cases } = fixtures.limiters;

for (const { class: name, args, decisions } of cases) {
  test(`${name}(${args}) decides like the Rust core on ${trace.length} calls`, () => {
    const limiter = new slidewin[name](...args);
    trace.forEach(([nowMs, cost], i) => {
      assert.deepEqual(limiter.check(nowMs, cost), decisions[i], `call ${i} at ${nowMs} ms, cost ${cost}`);
    });
    limiter.free();
  });
}

test("peek records nothing, uncommit gives back, reset forgets; cost defaults to 1", () => {
  const limiter = new slidewin.SlidingLog(2, 1000);
  assert.equal(limiter.peek(0).remaining, 1);
  assert.equal(limiter.check(0).remaining, 1);
  assert.equal(limiter.check(1).remaining, 0);
  assert.deepEqual(limiter.check(2), { allowed: false, limit: 2, remaining: 0, retryAfterMs: 998, resetAfterMs: 999 });
  limiter.uncommit(3, 1);
  assert.equal(limiter.check(3).allowed, true);
  limiter.reset();
  assert.equal(limiter.check(4, 2).remaining, 0);
  limiter.free();
});

test("a cost over the limit never fits: retryAfterMs is null", () => {
  const limiter = new slidewin.SlidingCounter(5, 1000);
  assert.deepEqual(limiter.check(10, 6), { allowed: false, limit: 5, remaining: 5, retryAfterMs: null, resetAfterMs: 0 });
  limiter.free();
});

test("now_ms defaults to Date.now()", () => {
  const limiter = new slidewin.SlidingLog(1, 60_000);
  assert.equal(limiter.check().allowed, true);
  // Called again within the minute, with an explicit time just after now: refused.
  assert.equal(limiter.check(Date.now() + 1).allowed, false);
  limiter.free();
});

test("bad arguments throw RangeErrors naming the argument and the value", () => {
  const cases = [
    [() => new slidewin.SlidingLog(0, 1000), "limit must be a positive integer, got 0"],
    [() => new slidewin.SlidingLog(10, -5), "window_ms must be a positive integer, got -5"],
    [() => new slidewin.SlidingLog(10, 1.5), "window_ms must be an integer, got 1.5"],
    [() => new slidewin.SlidingLog(-1, 1000), "limit must be a non-negative integer, got -1"],
    [() => new slidewin.SlidingLog(NaN, 1000), "limit must be a non-negative integer, got NaN"],
    [() => new slidewin.BucketWindow(10, 1000, 300), "bucket_ms must be a divisor of window_ms, got 300"],
    [() => new slidewin.SlidingLog(1, 1000).check(0, -1), "cost must be a non-negative integer, got -1"],
    [() => new slidewin.SlidingLog(1, 1000).check(0.5, 1), "now_ms must be an integer, got 0.5"],
    [() => new slidewin.SlidingLog(1, 1000).check(Infinity), "now_ms must be an integer, got Infinity"],
  ];
  for (const [call, message] of cases) {
    assert.throws(call, (e) => e instanceof RangeError && e.message === message, message);
  }
});

test("free twice is safe; a freed limiter throws a JS Error, not a trap", () => {
  const limiter = new slidewin.SlidingLog(1, 1000);
  limiter.free();
  limiter.free();
  assert.throws(() => limiter.check(0), (e) => e instanceof Error && !(e instanceof WebAssembly.RuntimeError));
});
