// init(source) in node with every local form of the .wasm's place: node's fetch has no file:
// URLs, so each runs in a fresh node (one init per process) and must read the file itself.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { copyFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { after, test } from "node:test";
import { fileURLToPath, pathToFileURL } from "node:url";

const index = pathToFileURL(fileURLToPath(new URL("../index.js", import.meta.url))).href;
// A copy outside the package: init must load what it is given, not its default beside index.js.
const dir = mkdtempSync(join(tmpdir(), "slidewin-init-"));
after(() => rmSync(dir, { recursive: true, force: true }));
const wasmPath = join(dir, "copy.wasm");
copyFileSync(fileURLToPath(new URL("../pkg/slidewin_bg.wasm", import.meta.url)), wasmPath);

/** Runs `init(<source>)` then a SlidingMean in a fresh node (cwd `dir`): its stdout, or throws. */
function runInit(sourceExpression) {
  const program = `import init, { SlidingMean } from ${JSON.stringify(index)};
    await init(${sourceExpression});
    console.log(JSON.stringify(Array.from(SlidingMean.byCount(2).pushMany([1, 3, 5]))));`;
  return execFileSync(process.execPath, ["--input-type=module", "-e", program], {
    cwd: dir,
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"],
  });
}

const sources = {
  "a file: URL": `new URL(${JSON.stringify(pathToFileURL(wasmPath).href)})`,
  "a file: URL's string": JSON.stringify(pathToFileURL(wasmPath).href),
  "an absolute path": JSON.stringify(wasmPath),
  "a relative path (to the working directory)": JSON.stringify(`./${relative(dir, wasmPath)}`),
  "nothing (pkg/ beside the module)": "",
};
for (const [name, expression] of Object.entries(sources)) {
  test(`init() in node with ${name}`, () => {
    assert.deepEqual(JSON.parse(runInit(expression)), [1, 2, 4]);
  });
}

test("init() with a path that does not exist fails naming the path", () => {
  const missing = join(dir, "missing.wasm");
  assert.throws(() => runInit(JSON.stringify(missing)), (e) => e.stderr.includes(`ENOENT`) && e.stderr.includes(missing));
});
