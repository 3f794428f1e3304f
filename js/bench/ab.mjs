// A/B of builds of the package: SlidingMean.byCount(50).pushMany over 10^6 samples (the data
// of bench.mjs), each build in turn in one process, ROUNDS rounds of best-of-5 process CPU
// time per sample. Each DIR holds a build's index.js and pkg/ (see BENCHMARKS.md, "WebAssembly
// and JS", for how the builds of other commits were made).
// Usage: node bench/ab.mjs DIR...        (node --liftoff-only bench/ab.mjs DIR...: V8's baseline
//        tier, which runs a wasm function until its optimised code is ready)
import { readFileSync } from "node:fs";
import { loadavg } from "node:os";
import { basename, resolve } from "node:path";
import { pathToFileURL } from "node:url";

const N = 1_000_000;
const K = 50;
let seed = 42;
const random = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
const xs = Float64Array.from({ length: N }, (_, i) => 1e9 + 1000 * Math.sin(i / 500) + random() * 100 - 50);
const cpuNs = () => {
  const { user, system } = process.cpuUsage();
  return (user + system) * 1000;
};

const builds = [];
for (const dir of process.argv.slice(2)) {
  const slidewin = await import(pathToFileURL(resolve(dir, "index.js")).href);
  await slidewin.default(readFileSync(resolve(dir, "pkg/slidewin_bg.wasm")));
  builds.push({ name: basename(resolve(dir)), slidewin, best: [], last: undefined });
}
if (builds.length === 0) throw new Error("usage: node bench/ab.mjs DIR... (each with index.js and pkg/)");

const rounds = Number(process.env.ROUNDS ?? 3);
for (let round = 0; round < rounds; round++) {
  for (const build of builds) {
    let best = Infinity;
    for (let run = 0; run < 5; run++) {
      const start = cpuNs();
      const sma = build.slidewin.SlidingMean.byCount(K);
      const out = sma.pushMany(xs);
      sma.free();
      best = Math.min(best, (cpuNs() - start) / N);
      build.last = out[N - 1];
    }
    build.best.push(best);
  }
}
const flags = process.execArgv.join(" ") || "default tiers";
console.log(`node ${process.version} (${flags}), ${rounds} rounds of best-of-5 CPU ns/sample, load average ${loadavg().map((l) => l.toFixed(2)).join(" ")}`);
for (const { name, best, last } of builds) {
  console.log(`${name.padEnd(14)} ${best.map((ns) => ns.toFixed(1).padStart(5)).join(" ")}   last value ${last}`);
}
