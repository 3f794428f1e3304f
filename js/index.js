// The slidewin package: the wasm-bindgen bindings (./pkg, built by `make js`), the named
// aggregate classes over their one `Aggregate` export, and an init() that loads the .wasm the
// same way in a browser (fetched next to this file) and in node (read from disk).
import initWasm, * as bindings from "./pkg/slidewin.js";
import { Aggregate } from "./pkg/slidewin.js";

export * from "./pkg/slidewin.js";

// wasm-bindgen's free() throws on a second call; make it idempotent, so `free()` in a `finally`
// after an earlier free is safe. (Objects never freed are reclaimed by wasm-bindgen's
// FinalizationRegistry when they are garbage-collected.)
for (const value of Object.values(bindings)) {
  const proto = value?.prototype;
  if (typeof proto?.free !== "function") continue;
  const free = proto.free;
  proto.free = function () {
    if (this.__wbg_ptr !== 0) free.call(this);
  };
  if (Symbol.dispose) proto[Symbol.dispose] = proto.free;
}

// The named aggregates: each is an `Aggregate` made by the wasm side's one factory, given the
// named class's prototype (so `instanceof` and the class name work) and its methods.
const create = (cls, window, param) =>
  Object.setPrototypeOf(Aggregate.__create(cls.name, window, param), cls.prototype);

/** Sliding aggregates: `X.byCount(k)` over the last k samples, `X.byTime(window_ms)` over time. */
class Sliding extends Aggregate {
  static byCount(k) {
    return create(this, "count", k);
  }
  static byTime(window_ms) {
    return create(this, "time", window_ms);
  }
}

export class SlidingSum extends Sliding {}
export class SlidingMean extends Sliding {}
export class SlidingMax extends Sliding {}
export class SlidingMin extends Sliding {}
export class SlidingVariance extends Sliding {}
export class SlidingStdDev extends Sliding {}

// A derived constructor may return an object instead of calling super(): the wasm-made one.
export class Rate extends Aggregate {
  constructor(window_ms) {
    return create(new.target, "time", window_ms);
  }
}
export class Ewma extends Aggregate {
  constructor(alpha) {
    return create(new.target, "", alpha);
  }
}
export class TimeEwma extends Aggregate {
  constructor(half_life_ms) {
    return create(new.target, "", half_life_ms);
  }
}

// The batch functions: the streaming aggregate over the whole array, so they share its one
// compiled loop (the tests check them against the core's own batch functions).
const batch = (aggregate, xs, skip) => {
  try {
    return aggregate.pushMany(xs).slice(skip);
  } finally {
    aggregate.free();
  }
};
/** The compensated sum of every window of `k` samples of `xs` (`xs.length - k + 1` values). */
export const slidingSum = (xs, k) => batch(SlidingSum.byCount(k), xs, k - 1);
/** The mean of every window of `k` samples of `xs`. */
export const slidingMean = (xs, k) => batch(SlidingMean.byCount(k), xs, k - 1);
/** The maximum of every window of `k` samples of `xs`. */
export const slidingMax = (xs, k) => batch(SlidingMax.byCount(k), xs, k - 1);
/** The minimum of every window of `k` samples of `xs`. */
export const slidingMin = (xs, k) => batch(SlidingMin.byCount(k), xs, k - 1);
/** The EWMA (`alpha` in (0, 1]) after each sample of `xs`. */
export const ewma = (xs, alpha) => batch(new Ewma(alpha), xs, 0);

const isNode = typeof process !== "undefined" && process.versions?.node != null;

/**
 * Load and instantiate the WebAssembly module; call (and await) once before using anything else.
 * `source` is optional: a URL, Response, BufferSource or WebAssembly.Module of slidewin_bg.wasm.
 */
export default async function init(source) {
  if (source === undefined && isNode) {
    const { readFile } = await import("node:fs/promises");
    source = await readFile(new URL("./pkg/slidewin_bg.wasm", import.meta.url));
  }
  return initWasm(source === undefined ? undefined : { module_or_path: source });
}

export { init };
