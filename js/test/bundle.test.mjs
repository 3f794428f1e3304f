// The package bundled and minified by esbuild, in node and in Chromium, gives the
// same answers as the package itself (minifiers rename classes; browser bundles must not
// reach for node modules; the .wasm must be found beside the bundle).
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";
import { launchChromium, watchProblems } from "../browser/chromium.mjs";
import { serveStatic } from "../browser/static-server.mjs";
import { checks } from "../bundle-check/checks.mjs";
import "./fixtures.mjs"; // init()

const here = (path) => fileURLToPath(new URL(path, import.meta.url));
const out = mkdtempSync(join(tmpdir(), "slidewin-bundle-"));
after(() => rmSync(out, { recursive: true, force: true }));

const expected = checks();

/** Bundles `entry` minified into `dir` for `platform`, the .wasm emitted by esbuild's file loader. */
async function bundleWithWasmFile(entry, dir, platform) {
  const result = await build({
    entryPoints: [here(entry)],
    bundle: true, minify: true, format: "esm", platform,
    loader: { ".wasm": "file" }, outdir: dir, logLevel: "error", metafile: true,
  });
  const emitted = Object.keys(result.metafile.outputs).filter((f) => f.endsWith(".wasm"));
  assert.equal(emitted.length, 1, "the .wasm is emitted beside the bundle");
}

test("the checks themselves hold (so the bundles are compared with right answers)", () => {
  assert.deepEqual(expected.SlidingMean.slice(0, 5), [3, 2, 8 / 3, 2.25, 2.75]);
  assert.deepEqual(expected.p50.slice(0, 5), [3, 2, 3, 2, 3]);
  assert.deepEqual(expected.subclass, [true, true, 2, 4]);
  assert.deepEqual(expected.push, [1, 2, 3]);
  assert.equal(expected.refused, "true: x must be a finite number, got NaN");
  assert.deepEqual(expected.decisions.SlidingLog, [
    [true, 2, 0], [true, 1, 0], [true, 0, 0], [false, 0, 700], [false, 0, 1], [true, 0, 0], [true, 0, 0], [false, 0, 50],
  ]);
});

test("minified node bundle: same answers, the .wasm found at pkg/ beside the bundle", async () => {
  const dir = join(out, "node");
  await build({
    entryPoints: [here("../bundle-check/node.mjs")],
    bundle: true, minify: true, format: "esm", platform: "node",
    outfile: join(dir, "app.mjs"), logLevel: "error",
  });
  mkdirSync(join(dir, "pkg"));
  copyFileSync(here("../pkg/slidewin_bg.wasm"), join(dir, "pkg", "slidewin_bg.wasm"));
  const bundled = readFileSync(join(dir, "app.mjs"), "utf8");
  assert.ok(!bundled.includes("class SlidingMean"), "the bundle is minified");
  const stdout = execFileSync(process.execPath, [join(dir, "app.mjs")], { encoding: "utf8" });
  assert.deepEqual(JSON.parse(stdout), JSON.parse(JSON.stringify(expected)));
});

test("node bundle with the .wasm emitted by the file loader (README's recipe): init(new URL(wasmUrl, import.meta.url))", async () => {
  const dir = join(out, "node-file-loader");
  await bundleWithWasmFile("../bundle-check/node-file-loader.mjs", dir, "node");
  const stdout = execFileSync(process.execPath, [join(dir, "node-file-loader.js")], { encoding: "utf8" });
  assert.deepEqual(JSON.parse(stdout), JSON.parse(JSON.stringify(expected)));
});

test("minified browser bundle (esbuild defaults, .wasm emitted by the file loader) in Chromium", async () => {
  const dir = join(out, "browser");
  await bundleWithWasmFile("../bundle-check/browser.mjs", dir, "browser");
  writeFileSync(join(dir, "index.html"), '<!doctype html><meta charset="utf-8"><link rel="icon" href="data:,"><script type="module" src="browser.js"></script>');
  const server = await serveStatic(dir);
  const browser = await launchChromium();
  try {
    const page = browser.context.pages()[0] ?? (await browser.context.newPage());
    const problems = [];
    watchProblems(page, problems);
    await page.goto(server.url);
    await page.waitForFunction(() => window.slidewinChecks !== undefined, null, { timeout: 10_000 });
    const got = await page.evaluate(() => window.slidewinChecks);
    assert.deepEqual(got, JSON.parse(JSON.stringify(expected)));
    assert.deepEqual(problems, []);
  } finally {
    await browser.close();
    server.close();
  }
});
