// Entry of the node bundle: init() finds the .wasm at pkg/slidewin_bg.wasm beside the bundle.
import init from "slidewin";
import { checks } from "./checks.mjs";

await init();
console.log(JSON.stringify(checks()));
