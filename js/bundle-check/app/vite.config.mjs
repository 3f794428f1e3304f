// The client build emits the .wasm itself; the SSR build bundles the package only with
// ssr.noExternal, and then needs the plugin.
import { slidewinWasm } from "./slidewin-wasm.mjs";

export default ({ isSsrBuild }) => ({
  root: "src",
  ssr: { noExternal: true },
  plugins: isSsrBuild ? [slidewinWasm()] : [],
  build: { outDir: isSsrBuild ? "../dist/vite-ssr" : "../dist/vite-web", emptyOutDir: true },
});
