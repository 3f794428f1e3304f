// The slidewin package: the wasm-bindgen bindings (./pkg, built by `make js`) plus an init()
// that loads the .wasm the same way in a browser (fetch next to this file) and in node (read it).
import initWasm, * as bindings from "./pkg/slidewin.js";

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

const isNode = typeof process !== "undefined" && process.versions != null && process.versions.node != null;

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
