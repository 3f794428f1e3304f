// A TypeScript consumer (test/types/consumer.ts) type-checks with `tsc --strict` and
// skipLibCheck off, so the package's .d.ts files themselves are checked too.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

const tsc = fileURLToPath(new URL("../node_modules/typescript/bin/tsc", import.meta.url));
const project = fileURLToPath(new URL("./types/", import.meta.url));

test("tsc --strict (no skipLibCheck) accepts a consumer of every class", () => {
  const run = spawnSync(process.execPath, [tsc, "-p", project], { encoding: "utf8" });
  assert.equal(run.stdout + run.stderr, "");
  assert.equal(run.status, 0);
});
