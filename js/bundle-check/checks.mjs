// What the bundle tests run: every aggregate class, a subclass, the limiters' decisions and the
// errors, through the package's public name. test/bundle.test.mjs runs it as it is in node, then
// bundled and minified by esbuild in node and in Chromium (test/bundlers.test.mjs: by Parcel,
// webpack, Vite and Rollup), and wants the same answers everywhere.
import * as slidewin from "slidewin";

const xs = [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9];
const values = (aggregate) => Array.from(aggregate.pushMany(xs), (v) => (Number.isNaN(v) ? null : v));

/** A limiter's decisions over a burst and the turn of its window: [allowed, remaining, retryAfterMs]. */
const decisions = (limiter) =>
  [0, 100, 200, 300, 999, 1000, 1100, 1150].map((t) => {
    const { allowed, remaining, retryAfterMs } = limiter.check(t);
    return [allowed, remaining, retryAfterMs];
  });

class MyMean extends slidewin.SlidingMean {
  get doubled() {
    return this.value * 2;
  }
}

export function checks() {
  const mine = MyMean.byCount(3);
  mine.pushMany([1, 2, 3]);
  const bands = slidewin.Bollinger.byCount(4, 2);
  let refused;
  try {
    slidewin.SlidingMean.byCount(3).push(NaN);
  } catch (e) {
    refused = `${e instanceof RangeError}: ${e.message}`;
  }
  return {
    SlidingSum: values(slidewin.SlidingSum.byCount(4)),
    SlidingMean: values(slidewin.SlidingMean.byCount(4)),
    SlidingMax: values(slidewin.SlidingMax.byCount(4)),
    SlidingMin: values(slidewin.SlidingMin.byTime(4)),
    SlidingVariance: values(slidewin.SlidingVariance.byCount(4)),
    SlidingStdDev: values(slidewin.SlidingStdDev.byCount(4)),
    SlidingPopulationVariance: values(slidewin.SlidingPopulationVariance.byCount(4)),
    SlidingPopulationStdDev: values(slidewin.SlidingPopulationStdDev.byCount(4)),
    SlidingWma: values(slidewin.SlidingWma.byCount(4)),
    p50: values(slidewin.SlidingQuantile.byCount(5, 0.5)),
    p95: values(slidewin.SlidingQuantile.byCount(5, 0.95)),
    Bollinger: bands.pushManyBands(xs).upper.map((v) => (Number.isNaN(v) ? -1 : v)).join(" "),
    Ewma: values(new slidewin.Ewma(0.5)),
    Ema: values(new slidewin.Ema(3, { seed: "sma" })),
    TimeEwma: values(new slidewin.TimeEwma(1000)),
    Rate: new slidewin.Rate(1000).push(1, 0),
    push: [1, 2, 3].map((x) => slidewin.SlidingMean.byCount(2).push(x)),
    subclass: [mine instanceof MyMean, mine instanceof slidewin.SlidingMean, mine.value, mine.doubled],
    decisions: {
      SlidingLog: decisions(new slidewin.SlidingLog(3, 1000)),
      SlidingCounter: decisions(new slidewin.SlidingCounter(3, 1000)),
      BucketWindow: decisions(new slidewin.BucketWindow(3, 1000, 100)),
    },
    refused,
  };
}
