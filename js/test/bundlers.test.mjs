// The package as a user installs it (the npm pack tarball) in a tiny app (bundle-check/app/),
// built by Parcel, webpack, Vite and Rollup with their defaults (plus the README's plugin where
// the .wasm needs one), then run in node and in Chromium: each build must give the package's own
// answers (limiter decisions, every aggregate), so a bundler that breaks the package fails here.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath, pathToFileURL } from "node:url";
import webpack from "webpack";
import { launchChromium, watchProblems } from "../browser/chromium.mjs";
import { serveStatic } from "../browser/static-server.mjs";
import { checks } from "../bundle-check/checks.mjs";
import { slidewin } from "./fixtures.mjs"; // init()

const here = (path) => fileURLToPath(new URL(path, import.meta.url));
const expected = JSON.parse(JSON.stringify(checks()));

// Inside the package's directory (git ignores it), so the app's config files find the bundlers
// and their plugins in ../node_modules, and every cache the builds write is removed with it.
const work = mkdtempSync(here("../.bundlers-"));
const app = join(work, "app");
const dist = (name) => join(app, "dist", name);
after(() => rmSync(work, { recursive: true, force: true }));

let browser;
after(() => browser?.close());

const npm = (cwd, ...args) =>
  execFileSync("npm", [...args, "--cache", join(work, "npm-cache")], { cwd, encoding: "utf8", stdio: "pipe" });
/** Runs a bundler's command line (a script in ../node_modules) in the app: its output, or throws it. */
const cli = (script, ...args) =>
  execFileSync(process.execPath, [here(`../node_modules/${script}`), ...args], { cwd: app, encoding: "utf8", stdio: "pipe" });

before(() => {
  const [{ filename }] = JSON.parse(npm(here(".."), "pack", "--pack-destination", work, "--ignore-scripts", "--json"));
  cpSync(here("../bundle-check/app"), app, { recursive: true });
  cpSync(here("../bundle-check/checks.mjs"), join(app, "src", "checks.mjs"));
  npm(app, "install", "--offline", "--no-audit", "--no-fund", join(work, filename));
});

/** The checks' answers from the bundle `file` run by node (the error's last lines if it throws). */
function runInNode(file) {
  // The package's glue inside the bundle, not imported from node_modules at run time.
  assert.match(readFileSync(file, "utf8"), /__wbindgen_malloc/, `${file} bundles the package`);
  try {
    return JSON.parse(execFileSync(process.execPath, [file], { encoding: "utf8", stdio: "pipe" }));
  } catch (e) {
    // Node prints the failing source line first: a whole minified bundle.
    throw new Error(`node ${file}: ${String(e.stderr ?? e).split("\n").filter((line) => line.length < 400).join("\n")}`);
  }
}

/** The checks' answers from the page at `dir`'s index.html in Chromium; a page error throws. */
async function runInChromium(dir) {
  browser ??= await launchChromium();
  const server = await serveStatic(dir);
  const page = await browser.context.newPage();
  try {
    const problems = [];
    watchProblems(page, problems);
    const failed = new Promise((_, reject) => page.once("pageerror", reject));
    await page.goto(server.url);
    await Promise.race([page.waitForFunction(() => globalThis.slidewinChecks !== undefined, null, { timeout: 10_000 }), failed]);
    assert.deepEqual(problems, []);
    return await page.evaluate(() => globalThis.slidewinChecks);
  } finally {
    await page.close();
    server.close();
  }
}

/** A page beside a bundle that loads it (for bundlers that take a script, not a page, as entry). */
const writePage = (dir, script) =>
  writeFileSync(join(dir, "index.html"), `<!doctype html><meta charset="utf-8"><link rel="icon" href="data:,"><script type="module" src="${script}"></script>`);

test("the package exports every binding by name (nothing lost with the re-exports)", async () => {
  const bindings = await import("../pkg/slidewin.js");
  const missing = Object.keys(bindings).filter((name) => name !== "default" && !(name in slidewin));
  assert.deepEqual(missing, []);
});

test("Parcel (default build, scope hoisting): the browser target in Chromium, the node target in node", async () => {
  cli("parcel/lib/bin.js", "build", "--no-autoinstall", "--log-level", "error");
  assert.deepEqual(runInNode(join(dist("parcel-node"), "app.js")), expected);
  assert.deepEqual(await runInChromium(dist("parcel-web")), expected);
});

test("webpack 5 (production): target web in Chromium, target node in node", async () => {
  const { default: configs } = await import(pathToFileURL(join(app, "webpack.config.mjs")));
  const stats = await new Promise((resolve, reject) => webpack(configs, (e, s) => (e ? reject(e) : resolve(s))));
  assert.ok(!stats.hasErrors(), stats.toString("errors-only"));
  assert.deepEqual(runInNode(join(dist("webpack-node"), "app.cjs")), expected);
  writePage(dist("webpack-web"), "app.js");
  assert.deepEqual(await runInChromium(dist("webpack-web")), expected);
});

test("Vite: the client build in Chromium, the SSR build (package bundled, README's plugin) in node", async () => {
  cli("vite/bin/vite.js", "build", "--logLevel", "error");
  cli("vite/bin/vite.js", "build", "--ssr", "app.mjs", "--logLevel", "error");
  assert.deepEqual(await runInChromium(dist("vite-web")), expected);
  assert.deepEqual(runInNode(join(dist("vite-ssr"), "app.js")), expected);
});

test("Rollup (node-resolve, README's plugin): the same bundle in node and in Chromium", async () => {
  cli("rollup/dist/bin/rollup", "--config", "--silent");
  assert.deepEqual(runInNode(join(dist("rollup"), "app.js")), expected);
  writePage(dist("rollup"), "app.js");
  assert.deepEqual(await runInChromium(dist("rollup")), expected);
});
