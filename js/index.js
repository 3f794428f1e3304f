// The slidewin package: the wasm-bindgen bindings (./pkg, built by `make js`), the named
// aggregate classes over their one `Aggregate` export, and an init() that loads the .wasm the
// same way in a browser and in node.
//
// Bundler-proof by construction: the aggregate kind is a string each class carries (never
// `cls.name`, which minifiers rename), objects are made by the class's own constructor (so
// subclasses work), and nothing here imports a node module (node's file system is reached
// through `process.getBuiltinModule`, which bundlers for the browser never see). The bindings are
// imported and re-exported by name: Parcel's scope hoisting loses the namespace object of a module
// that is both `import * as`-ed and `export *`-ed by the same file (a ReferenceError at load).
import initWasm, {
  Aggregate,
  BucketWindow as WasmBucketWindow,
  SlidingCounter as WasmSlidingCounter,
  SlidingLog as WasmSlidingLog,
  nowMs as wasmNowMs,
} from "./pkg/slidewin.js";

export { Aggregate, initSync } from "./pkg/slidewin.js";

let ready = false;

/** Throws the error that says what to do when the module is used before init(). */
function checkReady() {
  if (!ready) throw new Error("slidewin: call and await init() before using its classes and functions");
}

// wasm-bindgen's free() throws on a second call; make it idempotent, so `free()` in a `finally`
// after an earlier free is safe. (Objects never freed are reclaimed by wasm-bindgen's
// FinalizationRegistry when they are garbage-collected.)
for (const { prototype: proto } of [Aggregate, WasmBucketWindow, WasmSlidingCounter, WasmSlidingLog]) {
  const free = proto.free;
  proto.free = function () {
    if (this.__wbg_ptr !== 0) free.call(this);
  };
  if (Symbol.dispose) proto[Symbol.dispose] = proto.free;
}

/** The core aggregate kind a class (or its subclasses) makes: a string, which minifiers keep. */
const KIND = Symbol("slidewin.kind");

/** How many samples `add` gathers before it hands them to the wasm side in one call. */
const BATCH = 256;

/**
 * Base of the aggregate classes: the wasm `Aggregate` of the class's kind, plus the per-sample
 * paths: `push(x)` crosses into wasm once (a plain number each way), `add(x)` not at all until
 * BATCH samples are gathered or anything is read (every other method takes them in first).
 */
class Stream extends Aggregate {
  #pending = null;
  #count = 0;

  constructor(mode, param, extra) {
    checkReady();
    super(new.target[KIND], mode, param, extra);
  }

  /** Push the samples `add` gathered. */
  #flush() {
    if (this.#count > 0) {
      const n = this.#count;
      this.#count = 0;
      this.__pushAll(this.#pending.subarray(0, n));
    }
  }

  /** `push(x)` without reading the value: buffered, for ingest loops. */
  add(x) {
    if (!Number.isFinite(x)) {
      this.#flush();
      super.push(x); // throws the core's RangeError naming x
    }
    if (this.#count === BATCH) this.#flush();
    (this.#pending ??= new Float64Array(BATCH))[this.#count++] = x;
  }

  push(x, t_ms) {
    this.#flush();
    if (t_ms === undefined && Number.isFinite(x)) {
      const value = this.__push(x);
      return value === value ? value : undefined;
    }
    return super.push(x, t_ms);
  }

  pushMany(xs, times) {
    this.#flush();
    return super.pushMany(xs, times);
  }

  replaceLast(x) {
    this.#flush();
    return super.replaceLast(x);
  }

  valueAt(now_ms) {
    this.#flush();
    return super.valueAt(now_ms);
  }

  get value() {
    this.#flush();
    return super.value;
  }

  get length() {
    this.#flush();
    return super.length;
  }

  get isFull() {
    this.#flush();
    return super.isFull;
  }

  get __bands() {
    this.#flush();
    return super.__bands;
  }

  __pushManyBands(xs, times) {
    this.#flush();
    return super.__pushManyBands(xs, times);
  }

  clear() {
    this.#count = 0;
    super.clear();
  }
}

/** Sliding aggregates: `X.byCount(k)` over the last k samples, `X.byTime(window_ms)` over time. */
class Sliding extends Stream {
  static byCount(k, extra) {
    return new this("count", k, extra);
  }
  static byTime(window_ms, extra) {
    return new this("time", window_ms, extra);
  }
}

/** Declares `cls` as making the core aggregate `kind`. */
const kind = (cls, name) => {
  Object.defineProperty(cls, KIND, { value: name });
  return cls;
};

export const SlidingSum = kind(class SlidingSum extends Sliding {}, "SlidingSum");
export const SlidingMean = kind(class SlidingMean extends Sliding {}, "SlidingMean");
export const SlidingMax = kind(class SlidingMax extends Sliding {}, "SlidingMax");
export const SlidingMin = kind(class SlidingMin extends Sliding {}, "SlidingMin");
export const SlidingVariance = kind(class SlidingVariance extends Sliding {}, "SlidingVariance");
export const SlidingStdDev = kind(class SlidingStdDev extends Sliding {}, "SlidingStdDev");
export const SlidingPopulationVariance = kind(
  class SlidingPopulationVariance extends Sliding {},
  "SlidingPopulationVariance",
);
export const SlidingPopulationStdDev = kind(
  class SlidingPopulationStdDev extends Sliding {},
  "SlidingPopulationStdDev",
);
export const SlidingWma = kind(class SlidingWma extends Sliding {}, "SlidingWma");
export const SlidingQuantile = kind(class SlidingQuantile extends Sliding {}, "SlidingQuantile");

/** `[lower, middle, upper]` triples as three arrays. */
function splitBands(triples) {
  const n = triples.length / 3;
  const lower = new Float64Array(n);
  const middle = new Float64Array(n);
  const upper = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    lower[i] = triples[3 * i];
    middle[i] = triples[3 * i + 1];
    upper[i] = triples[3 * i + 2];
  }
  return { lower, middle, upper };
}

export const Bollinger = kind(
  class Bollinger extends Sliding {
    get bands() {
      const b = this.__bands;
      return b === undefined ? undefined : { lower: b[0], middle: b[1], upper: b[2] };
    }
    pushManyBands(xs, times) {
      return splitBands(this.__pushManyBands(xs, times));
    }
  },
  "Bollinger",
);

export const Rate = kind(
  class Rate extends Stream {
    constructor(window_ms) {
      super("time", window_ms);
    }
  },
  "Rate",
);
export const Ewma = kind(
  class Ewma extends Stream {
    constructor(alpha) {
      super("", alpha);
    }
  },
  "Ewma",
);
export const Ema = kind(
  class Ema extends Stream {
    constructor(period, { seed = "first" } = {}) {
      if (seed !== "first" && seed !== "sma") {
        throw new RangeError(`seed must be "first" or "sma", got ${String(seed)}`);
      }
      super(seed, period);
    }
  },
  "Ema",
);
export const TimeEwma = kind(
  class TimeEwma extends Stream {
    constructor(half_life_ms) {
      super("", half_life_ms);
    }
  },
  "TimeEwma",
);

// The limiters and the clock, refusing (with a clear error) to run before init().
export class SlidingLog extends WasmSlidingLog {
  constructor(...args) {
    checkReady();
    super(...args);
  }
}
export class BucketWindow extends WasmBucketWindow {
  constructor(...args) {
    checkReady();
    super(...args);
  }
}
export class SlidingCounter extends WasmSlidingCounter {
  constructor(...args) {
    checkReady();
    super(...args);
  }
}
export function nowMs() {
  checkReady();
  return wasmNowMs();
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

/** Where the .wasm is: `pkg/slidewin_bg.wasm` beside this module (or beside a bundle of it). */
const defaultWasm = () => new URL("./pkg/slidewin_bg.wasm", import.meta.url);

/** A string with a URL scheme (`https:`, `file:`); `C:\x` is a Windows path, not a scheme. */
const hasScheme = (text) => /^[a-z][a-z\d+.-]+:/i.test(text);

/**
 * In node, what fetch cannot load (node's fetch has no `file:` URLs) as the file's bytes: a
 * `file:` URL (or its string) or a path; anything else, and everything in a browser, as it is.
 */
function readLocal(source) {
  const fs = globalThis.process?.getBuiltinModule?.("node:fs");
  if (!fs) return source;
  if (source instanceof URL) return source.protocol === "file:" ? fs.readFileSync(source) : source;
  if (typeof source !== "string") return source;
  if (!hasScheme(source)) return fs.readFileSync(source);
  return source.startsWith("file:") ? fs.readFileSync(new URL(source)) : source;
}

/**
 * Load and instantiate the WebAssembly module; call (and await) once before using anything else.
 * `source` is optional: a URL (or its string), a path (node), Response, BufferSource or
 * WebAssembly.Module of slidewin_bg.wasm. Without it: `pkg/slidewin_bg.wasm` beside this module
 * (read from disk in node, fetched in a browser). In node, `file:` URLs and paths are read with
 * `fs`, so a bundler's `new URL(wasmUrl, import.meta.url)` works there too.
 */
export default async function init(source = defaultWasm()) {
  const exports = await initWasm({ module_or_path: readLocal(source) });
  ready = true;
  return exports;
}

export { init };
