// Entry of the browser bundle: the .wasm comes through the bundler (esbuild's file loader
// copies it beside the bundle and gives its URL), as a bundled app would load it.
import init from "slidewin";
import wasmUrl from "slidewin/slidewin_bg.wasm";
import { checks } from "./checks.mjs";

try {
  await init(new URL(wasmUrl, import.meta.url));
  window.slidewinChecks = checks();
} catch (e) {
  window.slidewinChecks = { error: String(e?.stack ?? e) };
}
