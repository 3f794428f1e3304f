import { nodeResolve } from "@rollup/plugin-node-resolve";
import { slidewinWasm } from "./slidewin-wasm.mjs";

export default {
  input: "src/app.mjs",
  output: { dir: "dist/rollup", format: "es" },
  plugins: [nodeResolve(), slidewinWasm()],
};
