// The Rust core's answers on shared vectors (written by `make test-js` from
// crates/slidewin-wasm/examples/fixtures.rs), and the initialised package.
import { readFileSync } from "node:fs";
import init from "../index.js";
import * as slidewin from "../index.js";

// init() resolves to the instance's exports (its memory, for the memory test).
export const wasm = await init();

export const fixtures = JSON.parse(readFileSync(new URL("./fixtures.json", import.meta.url), "utf8"));
export { slidewin };
