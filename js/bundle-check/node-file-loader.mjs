// Entry of the node bundle made with esbuild's file loader (`--platform=node --loader:.wasm=file`):
// the README's recipe as it is, where the .wasm's URL is a file: URL that node's fetch refuses.
import init from "slidewin";
import wasmUrl from "slidewin/slidewin_bg.wasm";
import { checks } from "./checks.mjs";

await init(new URL(wasmUrl, import.meta.url));
console.log(JSON.stringify(checks()));
