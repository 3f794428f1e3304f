import { Aggregate } from "./pkg/slidewin.js";
export * from "./pkg/slidewin.js";

/**
 * Load and instantiate the WebAssembly module; call (and await) once before using anything else.
 * `source` is optional: a URL, Response, BufferSource or WebAssembly.Module of slidewin_bg.wasm.
 */
export default function init(source?: RequestInfo | URL | Response | BufferSource | WebAssembly.Module): Promise<unknown>;
export { init };

/** A sliding aggregate over the last `k` samples or the last `window_ms` milliseconds. */
declare class Sliding extends Aggregate {
  /** Over the last `k` samples (a positive integer). */
  static byCount<T extends typeof Sliding>(this: T, k: number): InstanceType<T>;
  /** Over the samples with `t > now - window_ms`. */
  static byTime<T extends typeof Sliding>(this: T, window_ms: number): InstanceType<T>;
}
/** Sum of the window (compensated: no drift). */
export class SlidingSum extends Sliding {}
/** Mean of the window (compensated: no drift). */
export class SlidingMean extends Sliding {}
/** Maximum of the window. */
export class SlidingMax extends Sliding {}
/** Minimum of the window. */
export class SlidingMin extends Sliding {}
/** Sample variance of the window (undefined below 2 samples). */
export class SlidingVariance extends Sliding {}
/** Sample standard deviation of the window. */
export class SlidingStdDev extends Sliding {}
/** Sum of the samples (push 1 per event) per second over the last `window_ms`. */
export class Rate extends Aggregate {
  constructor(window_ms: number);
}
/** Exponentially weighted moving average: each new sample weighs `alpha` in (0, 1]. */
export class Ewma extends Aggregate {
  constructor(alpha: number);
}
/** Time-weighted EWMA: a sample's weight halves every `half_life_ms` of its age. */
export class TimeEwma extends Aggregate {
  constructor(half_life_ms: number);
}

/** The compensated sum of every window of `k` samples of `xs` (`xs.length - k + 1` values; none when shorter). */
export function slidingSum(xs: Float64Array | number[], k: number): Float64Array;
/** The mean of every window of `k` samples of `xs`. */
export function slidingMean(xs: Float64Array | number[], k: number): Float64Array;
/** The maximum of every window of `k` samples of `xs`. */
export function slidingMax(xs: Float64Array | number[], k: number): Float64Array;
/** The minimum of every window of `k` samples of `xs`. */
export function slidingMin(xs: Float64Array | number[], k: number): Float64Array;
/** The EWMA (`alpha` in (0, 1]) after each sample of `xs`. */
export function ewma(xs: Float64Array | number[], alpha: number): Float64Array;
