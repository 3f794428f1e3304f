// The README's plugin for Rollup and Vite's SSR build, which bundle the package but leave its
// .wasm behind: init() looks for pkg/slidewin_bg.wasm beside the bundle, so emit it there.
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

export const slidewinWasm = () => ({
  name: "slidewin-wasm",
  generateBundle() {
    this.emitFile({
      type: "asset",
      fileName: "pkg/slidewin_bg.wasm",
      source: readFileSync(fileURLToPath(import.meta.resolve("slidewin/slidewin_bg.wasm"))),
    });
  },
});
