export * from "./pkg/slidewin.js";

/**
 * Load and instantiate the WebAssembly module; call (and await) once before using anything else.
 * `source` is optional: a URL, Response, BufferSource or WebAssembly.Module of slidewin_bg.wasm.
 */
export default function init(source?: RequestInfo | URL | Response | BufferSource | WebAssembly.Module): Promise<unknown>;
export { init };
