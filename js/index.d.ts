import { Aggregate } from "./pkg/slidewin.js";
export * from "./pkg/slidewin.js";

/**
 * Load and instantiate the WebAssembly module; call (and await) once before using anything else
 * (before it, constructors throw "call and await init() ...").
 * `source` is optional: a URL (or its string), a path (node), Response, BufferSource or
 * WebAssembly.Module of slidewin_bg.wasm. Without it, node reads and a browser fetches
 * `pkg/slidewin_bg.wasm` next to this module (next to the bundle, once bundled). In node,
 * `file:` URLs and paths are read from disk (node's fetch has no `file:` URLs).
 */
export default function init(
  source?: string | URL | Response | BufferSource | WebAssembly.Module,
): Promise<unknown>;
export { init };

/** Samples: a Float64Array, or an array of numbers. */
export type Samples = Float64Array | number[];

/** A band: Bollinger's lower, middle and upper lines. */
export interface Bands {
  lower: number;
  middle: number;
  upper: number;
}

/** The methods every aggregate has (see README.md): push, pushMany, replaceLast, valueAt, value, ... */
declare class Stream extends Aggregate {
  protected constructor(mode: string, param: number, extra?: number);
  /** Add sample `x` (finite) at `t_ms`, or without `t_ms` at the latest time seen; the new value. */
  push(x: number, t_ms?: number): number | undefined;
  /** `push(x)` without reading the value: buffered in JS and handed over in batches (for ingest loops). */
  add(x: number): void;
  /** Push every sample (at the matching `times`); the value after each (NaN where undefined). */
  pushMany(xs: Samples, times?: Samples): Float64Array;
}

/** A sliding aggregate over the last `k` samples or the last `window_ms` milliseconds. */
declare class Sliding extends Stream {
  /** Over the last `k` samples (a positive integer). */
  static byCount<T extends Sliding>(this: { prototype: T }, k: number): T;
  /** Over the samples with `t > now - window_ms`. */
  static byTime<T extends Sliding>(this: { prototype: T }, window_ms: number): T;
}
/** Sum of the window (compensated: no drift). */
export class SlidingSum extends Sliding {}
/** Mean of the window, the SMA (compensated: no drift). */
export class SlidingMean extends Sliding {}
/** Maximum of the window. */
export class SlidingMax extends Sliding {}
/** Minimum of the window. */
export class SlidingMin extends Sliding {}
/** Sample variance of the window (divided by n - 1; undefined below 2 samples). */
export class SlidingVariance extends Sliding {}
/** Sample standard deviation of the window (n - 1; undefined below 2 samples). */
export class SlidingStdDev extends Sliding {}
/** Population variance of the window (divided by n). */
export class SlidingPopulationVariance extends Sliding {}
/** Population standard deviation of the window (divided by n: the SD of charting libraries). */
export class SlidingPopulationStdDev extends Sliding {}
/** Weighted moving average: weights 1 (oldest) to n (newest). */
export class SlidingWma extends Sliding {}

/**
 * The `q`-quantile of the window (p95: `q = 0.95`), exact, O(log k) per sample: linear
 * interpolation between the two nearest ranks (numpy's default).
 */
export class SlidingQuantile extends Stream {
  /** Over the last `k` samples. */
  static byCount<T extends SlidingQuantile>(this: { prototype: T }, k: number, q: number): T;
  /** Over the samples with `t > now - window_ms`. */
  static byTime<T extends SlidingQuantile>(this: { prototype: T }, window_ms: number, q: number): T;
}

/** Bollinger bands: the mean (`value`, the middle line) ± `width` population standard deviations. */
export class Bollinger extends Stream {
  /** Over the last `k` samples; `width` defaults to 2. */
  static byCount<T extends Bollinger>(this: { prototype: T }, k: number, width?: number): T;
  /** Over the samples with `t > now - window_ms`; `width` defaults to 2. */
  static byTime<T extends Bollinger>(this: { prototype: T }, window_ms: number, width?: number): T;
  /** The three lines now; undefined for an empty window. */
  get bands(): Bands | undefined;
  /** Like pushMany: the three lines after each sample (NaN where undefined). */
  pushManyBands(xs: Samples, times?: Samples): { lower: Float64Array; middle: Float64Array; upper: Float64Array };
}

/** Sum of the samples (push 1 per event) per second over the last `window_ms`. */
export class Rate extends Stream {
  constructor(window_ms: number);
}
/** Exponentially weighted moving average: the first sample is the mean, then each weighs `alpha` in (0, 1]. */
export class Ewma extends Stream {
  constructor(alpha: number);
}
/**
 * EMA by period: each sample weighs `2 / (period + 1)`. `seed: "first"` (default, as
 * trading-signals): the first sample starts it; `seed: "sma"` (as technicalindicators, TA-Lib):
 * undefined before `period` samples, then their mean starts it.
 */
export class Ema extends Stream {
  constructor(period: number, options?: { seed?: "first" | "sma" });
}
/** Time-weighted EWMA: a sample's weight halves every `half_life_ms` of its age. */
export class TimeEwma extends Stream {
  constructor(half_life_ms: number);
}

/** The compensated sum of every window of `k` samples of `xs` (`xs.length - k + 1` values; none when shorter). */
export function slidingSum(xs: Samples, k: number): Float64Array;
/** The mean of every window of `k` samples of `xs`. */
export function slidingMean(xs: Samples, k: number): Float64Array;
/** The maximum of every window of `k` samples of `xs`. */
export function slidingMax(xs: Samples, k: number): Float64Array;
/** The minimum of every window of `k` samples of `xs`. */
export function slidingMin(xs: Samples, k: number): Float64Array;
/** The EWMA (`alpha` in (0, 1]) after each sample of `xs`. */
export function ewma(xs: Samples, alpha: number): Float64Array;
