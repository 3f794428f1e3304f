// The npm tarball carries its README and both license files.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

test("npm pack ships the README, the licenses, the code and the .wasm, nothing else", () => {
  const cwd = fileURLToPath(new URL("..", import.meta.url));
  const [pack] = JSON.parse(execFileSync("npm", ["pack", "--dry-run", "--json", "--ignore-scripts"], { cwd, encoding: "utf8" }));
  const files = pack.files.map((f) => f.path).sort();
  assert.deepEqual(files, [
    "LICENSE-APACHE", "LICENSE-MIT", "README.md", "index.d.ts", "index.js", "package.json",
    "pkg/slidewin.d.ts", "pkg/slidewin.js", "pkg/slidewin_bg.wasm", "pkg/slidewin_bg.wasm.d.ts",
  ]);
});
