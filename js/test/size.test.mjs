import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { gzipSync } from "node:zlib";

// 80/30 KB until six aggregate kinds came (population variance and SD, WMA, EMA by
// period, Bollinger bands, quantiles: 109 KB, 39 KB gzipped), each with its own compiled loop.
test("the .wasm stays within 120 KB, 45 KB gzipped", () => {
  const wasm = readFileSync(new URL("../pkg/slidewin_bg.wasm", import.meta.url));
  const gzipped = gzipSync(wasm, { level: 9 }).length;
  console.log(`slidewin_bg.wasm: ${wasm.length} bytes, ${gzipped} gzipped`);
  assert.ok(wasm.length <= 120 * 1024, `${wasm.length} bytes`);
  assert.ok(gzipped <= 45 * 1024, `${gzipped} bytes gzipped`);
});
