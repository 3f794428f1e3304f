import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { gzipSync } from "node:zlib";

test("the .wasm stays within 80 KB, 30 KB gzipped", () => {
  const wasm = readFileSync(new URL("../pkg/slidewin_bg.wasm", import.meta.url));
  const gzipped = gzipSync(wasm, { level: 9 }).length;
  console.log(`slidewin_bg.wasm: ${wasm.length} bytes, ${gzipped} gzipped`);
  assert.ok(wasm.length <= 80 * 1024, `${wasm.length} bytes`);
  assert.ok(gzipped <= 30 * 1024, `${gzipped} bytes gzipped`);
});
