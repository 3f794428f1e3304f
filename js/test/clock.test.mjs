import assert from "node:assert/strict";
import { test } from "node:test";
import init, { nowMs } from "../index.js";

await init();

test("nowMs is Date.now(): integer milliseconds on the server's scale", () => {
  const before = Date.now();
  const now = nowMs();
  const after = Date.now();
  assert.ok(Number.isInteger(now), `got ${now}`);
  assert.ok(before <= now && now <= after, `${before} <= ${now} <= ${after}`);
});
