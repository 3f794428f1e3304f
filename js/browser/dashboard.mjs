// Drive the dashboard in a real headless Chromium (Debian's, through playwright-core) at 1280x800.
// Usage: node browser/dashboard.mjs BASE_URL SCREENSHOT_PATH   (run by tests/tests/dashboard.rs)
//   BASE_URL: where the demo nginx listens (it serves /dashboard/, /stats.json, /slidewin/top, /api/).
// 3 clients send 10x their limit to /api/ (5 per 10 s) and 50 send half of theirs while the page
// polls; then: the top-refused table shows exactly the 3, with the values /slidewin/top gives;
// no plotted rate is below 0; the legend and the page fit the viewport; 16 clients on /slow/
// (the demo's adaptive limit over 4 slots) fill the adaptive panel with live figures, and a
// fixture served as /stats.json shows it renders each one; without its endpoint the page falls
// back to its synthetic feed and says so.
import assert from "node:assert/strict";
import { launchChromium, watchProblems } from "./chromium.mjs";

const [baseUrl, screenshotPath] = process.argv.slice(2);
if (!baseUrl || !screenshotPath) {
  console.error("usage: node browser/dashboard.mjs BASE_URL SCREENSHOT_PATH");
  process.exit(2);
}
const VIEWPORT = { width: 1280, height: 800 };
const LIMIT = 5;
const HOT = ["hot-0", "hot-1", "hot-2"];
const CALM = Array.from({ length: 50 }, (_, i) => `calm-${i}`);

async function get(user) {
  const { status } = await fetch(new URL(`/api/?user=${user}`, baseUrl));
  return status;
}

/** 5 rounds, 150 ms apart: each hot client sends 10 per round, each calm one 1 in rounds 0 and 1. */
async function driveTraffic() {
  const counts = {};
  for (let round = 0; round < 5; round++) {
    const users = [...HOT.flatMap((u) => Array(2 * LIMIT).fill(u)), ...(round < 2 ? CALM : [])];
    for (const user of users) {
      const status = await get(user);
      counts[status] = (counts[status] ?? 0) + 1;
    }
    await new Promise((r) => setTimeout(r, 150));
  }
  return counts;
}

/** 16 clients in a loop on /slow/ for `ms`: the statuses they got. */
async function driveSlow(ms) {
  const counts = {};
  const until = Date.now() + ms;
  await Promise.all(Array.from({ length: 16 }, async () => {
    while (Date.now() < until) {
      const { status } = await fetch(new URL("/slow/", baseUrl));
      counts[status] = (counts[status] ?? 0) + 1;
    }
  }));
  return counts;
}

const adaptiveFixture = {
  "api-adaptive": { limit: 42, inflight: 7, p50_ms: 12.5, p95_ms: 48.25, p99_ms: 90, loss_ratio: 0.02, goodput_rps: 310.5 },
};

const browser = await launchChromium({ viewport: VIEWPORT });
const { context } = browser;
const problems = [];
try {
  const page = context.pages()[0] ?? (await context.newPage());
  watchProblems(page, problems);

  await page.goto(new URL("/dashboard/?interval=250", baseUrl).href);
  await page.waitForFunction(() => window.slidewinDashboard?.source === "live", null, { timeout: 10_000 });

  const statuses = await driveTraffic();
  console.log("traffic to /api/:", JSON.stringify(statuses));
  assert.deepEqual(statuses, { 200: 3 * LIMIT + 2 * CALM.length, 429: 3 * 9 * LIMIT });
  await page.waitForFunction(() => {
    const s = window.slidewinDashboard.series.api;
    return s && s.allowed.rate.some((r) => r > 0) && s.rejected.rate.some((r) => r > 0) && s.times.length >= 4;
  }, null, { timeout: 20_000 });

  // The endpoint names exactly the 3; the table shows what it says (polled until it does).
  const top = await (await fetch(new URL("/slidewin/top?n=10", baseUrl))).json();
  const want = top.limiters.api.refused
    .map(({ key, refused, count, limit, window }) => ({ key, refused, count, limit, window }))
    .sort((a, b) => a.key.localeCompare(b.key));
  assert.deepEqual(want, HOT.map((key) => ({ key, refused: 9 * LIMIT, count: LIMIT, limit: LIMIT, window: 1 })));
  await page.waitForFunction((want) => {
    const rows = window.slidewinDashboard.topRows.refused.slice().sort((a, b) => a.key.localeCompare(b.key));
    return JSON.stringify(rows) === JSON.stringify(want);
  }, want, { timeout: 10_000 });
  // The demo's adaptive limit under 16 clients: refusals at the limit, and a live panel row.
  // (The row is read while the traffic lasts: an interval without answers has no latency.)
  const driving = driveSlow(3_000);
  const adaptiveRow = await (await page.waitForFunction(() => {
    const rows = [...document.querySelectorAll("#adaptive-table tbody tr")].map((tr) => [...tr.cells].map((c) => c.textContent));
    return Number.isFinite(window.slidewinDashboard.adaptive.slow?.last?.p50_ms) && rows.length > 0 && rows[0][3] !== "–" && rows;
  }, null, { timeout: 10_000 })).jsonValue();
  const slow = await driving;
  console.log("traffic to /slow/:", JSON.stringify(slow), "panel:", JSON.stringify(adaptiveRow));
  assert.ok(slow[200] > 0 && slow[429] > 0, `statuses from /slow/: ${JSON.stringify(slow)}`);
  const view = await page.evaluate(() => {
    const d = window.slidewinDashboard;
    const texts = (sel) => [...document.querySelectorAll(sel)].map((tr) => [...tr.cells].map((c) => c.textContent));
    const legend = document.getElementById("legend");
    return {
      limiters: d.limiters,
      refusedTable: texts("#top-refused tbody tr"),
      nearTable: texts("#top-near tbody tr"),
      plotted: d.plotted().slice(1).map((s) => Array.from(s)),
      legend: { items: legend.children.length, scroll: legend.scrollWidth, client: legend.clientWidth, bottom: legend.getBoundingClientRect().bottom },
      pageWidth: document.documentElement.scrollWidth,
      keysBottom: document.getElementById("top-refused").getBoundingClientRect().bottom,
      adaptiveHidden: document.getElementById("adaptive").hidden,
      storeHidden: document.getElementById("store").hidden,
      ratio: document.getElementById("now-ratio").textContent,
    };
  });
  assert.deepEqual(view.limiters.slice().sort(), ["api", "api-dry", "api-legacy", "api-shared", "rules", "tokens"]);
  assert.deepEqual(
    view.refusedTable.sort(),
    want.map((h) => [h.key, String(h.refused), `${h.count} / ${h.limit}`, "100 %", "1"]),
  );
  assert.ok(view.nearTable.length === 10 && view.nearTable.slice(0, 3).every((r) => r[1] === `${LIMIT} / ${LIMIT}`), JSON.stringify(view.nearTable));
  // No plotted value of a rate (raw, smoothed, band) below 0; the band is drawn.
  const values = view.plotted.flat().filter((x) => x !== null && Number.isFinite(x));
  assert.ok(values.length > 0 && values.every((x) => x >= 0), `plotted: ${JSON.stringify(view.plotted)}`);
  assert.ok(view.plotted[3].some((x) => x > 0), "the admitted band's p90");
  assert.match(view.ratio, /^\d+\.\d %$/);
  // Readable at 1280x800: four legend entries that fit, no sideways scrolling, the tables on screen.
  assert.equal(view.legend.items, 4);
  assert.ok(view.legend.scroll <= view.legend.client, `legend overflows: ${JSON.stringify(view.legend)}`);
  assert.ok(view.pageWidth <= VIEWPORT.width, `page is ${view.pageWidth} px wide`);
  assert.ok(view.keysBottom <= VIEWPORT.height, `top-keys table ends at ${view.keysBottom} px`);
  assert.equal(view.adaptiveHidden, false, "the demo's adaptive limit: its panel");
  assert.equal(view.storeHidden, true, "no limiter of the demo uses Redis: no store panel");
  assert.equal(adaptiveRow.length, 1);
  const [name, limit, inflight, p50] = adaptiveRow[0];
  assert.equal(name, "slow");
  assert.ok(Number(limit) >= 1 && Number(limit) <= 256 && Number(inflight) >= 0, JSON.stringify(adaptiveRow));
  // 20 ms in a slot, plus the wait in the stand-in's queue.
  assert.ok(Number(p50) >= 19 && Number(p50) < 1000, JSON.stringify(adaptiveRow));
  // A token-limited call to the demo's stand-in model: the units panel appears, with the
  // tokens the answer reported as used in the window, next to the one request admitted.
  assert.equal(await page.evaluate(() => document.getElementById("units").hidden), true, "no reservation yet");
  const call = await fetch(new URL("/v1/chat/completions?user=dashboard", baseUrl), {
    method: "POST",
    body: JSON.stringify({ model: "demo", messages: [{ role: "user", content: "hello" }], max_tokens: 50 }),
  });
  assert.equal(call.status, 200);
  const { usage } = await call.json();
  const unitsRow = await (await page.waitForFunction(() => {
    const rows = [...document.querySelectorAll("#units-table tbody tr")].map((tr) => [...tr.cells].map((c) => c.textContent));
    return rows.length > 0 && rows[0][3] !== "–" && rows[0][3] !== "0" && rows;
  }, null, { timeout: 10_000 })).jsonValue();
  assert.deepEqual(unitsRow[0].slice(0, 4), ["tokens", unitsRow[0][1], "1", String(usage.total_tokens)]);
  await page.screenshot({ path: screenshotPath });
  assert.deepEqual(problems, [], "the page logged errors");

  // With an "adaptive" section in /stats.json (the adaptive limiter's shape; a fixture here) the panel appears.
  const adaptive = await context.newPage();
  watchProblems(adaptive, problems, "adaptive ");
  await adaptive.route("**/stats.json", async (route) => {
    const body = await (await route.fetch()).json();
    await route.fulfill({ json: { ...body, adaptive: adaptiveFixture } });
  });
  await adaptive.goto(new URL("/dashboard/?interval=200", baseUrl).href);
  await adaptive.waitForFunction(() => window.slidewinDashboard?.ticks >= 3, null, { timeout: 10_000 });
  const panel = await adaptive.evaluate(() => ({
    hidden: document.getElementById("adaptive").hidden,
    row: [...document.querySelectorAll("#adaptive-table tbody tr")].map((tr) => [...tr.cells].map((c) => c.textContent)),
    canvas: document.querySelector("#adaptive-chart canvas") !== null,
    pageWidth: document.documentElement.scrollWidth,
  }));
  assert.deepEqual(panel.row, [["api-adaptive", "42", "7", "12.5", "48.3", "90.0", "2.0 %", "310.5"]]);
  assert.ok(!panel.hidden && panel.canvas, "the adaptive panel and its chart");
  assert.ok(panel.pageWidth <= VIEWPORT.width, `page is ${panel.pageWidth} px wide`);
  await adaptive.screenshot({ path: screenshotPath.replace(/\.png$/, "-adaptive.png") });
  // Its polls go on every 200 ms: a handler still fetching when the browser closes would
  // reject ("Response has been disposed") after every check passed. Let them end first.
  await adaptive.unrouteAll({ behavior: "wait" });
  await adaptive.close();

  // A limiter reporting leases and a fallback (store "redis"; a fixture whose totals grow by
  // the same amounts each poll) fills the store panel with rates.
  const store = await context.newPage();
  watchProblems(store, problems, "store ");
  let polls = 0;
  await store.route("**/stats.json", async (route) => {
    polls += 1;
    const n = polls;
    await route.fulfill({ json: { now_ms: n * 1000, limiters: { "api-redis": {
      allowed: 90 * n, rejected: 10 * n, store_errors: 0, keys: 1, fallback_decisions: 5 * n,
      lease: { calls: 2 * n, granted: 100 * n, spent: 80 * n, returned: 15 * n, expired: 5 * n, local: 98 * n },
    } } } });
  });
  await store.goto(new URL("/dashboard/?interval=200", baseUrl).href);
  await store.waitForFunction(() => window.slidewinDashboard?.ticks >= 3, null, { timeout: 10_000 });
  const storePanel = await store.evaluate(() => ({
    hidden: document.getElementById("store").hidden,
    rows: [...document.querySelectorAll("#store-table tbody tr")].map((tr) => [...tr.cells].map((c) => c.textContent)),
  }));
  assert.equal(storePanel.hidden, false, "the store panel");
  assert.deepEqual(storePanel.rows, [["api-redis", "2.0", "100.0", "80.0", "15.0", "5.0", "98.0 %", "5.0"]]);
  await store.unrouteAll({ behavior: "wait" });
  await store.close();

  // A limiter that reserves (tokens: resty.slidewin.llm) fills the units panel: rates per
  // second, and the units used and requests admitted over the window (10 s: every delta so far).
  const units = await context.newPage();
  watchProblems(units, problems, "units ");
  let unitPolls = 0;
  await units.route("**/stats.json", async (route) => {
    unitPolls += 1;
    const n = unitPolls;
    await route.fulfill({ json: { now_ms: n * 1000, limiters: { "api-llm": {
      allowed: 10 * n, rejected: 2 * n, store_errors: 0, keys: 1,
      reservation_units: { reserved: 500 * n, used: 200 * n, given_back: 280 * n, kept: 20 * n, over: 0, owed: 5 * n },
    } } } });
  });
  await units.goto(new URL("/dashboard/?interval=200", baseUrl).href);
  await units.waitForFunction(() => window.slidewinDashboard?.ticks >= 3, null, { timeout: 10_000 });
  const unitsPanel = await units.evaluate(() => ({
    hidden: document.getElementById("units").hidden,
    deltas: window.slidewinDashboard.units["api-llm"].deltas,
    rows: [...document.querySelectorAll("#units-table tbody tr")].map((tr) => [...tr.cells].map((c) => c.textContent)),
  }));
  assert.equal(unitsPanel.hidden, false, "the units panel");
  // The window's sums are of every delta drawn so far (the last render may be one behind).
  const [row] = unitsPanel.rows;
  const drawn = Number(row[2]) / 10;
  assert.ok(drawn >= 2 && [unitsPanel.deltas, unitsPanel.deltas - 1].includes(drawn), `${row}: ${unitsPanel.deltas} deltas`);
  assert.deepEqual(row, ["api-llm", "10.0", String(10 * drawn), String(200 * drawn), "500.0", "200.0", "280.0", "20.0", "0.0", "5.0"]);
  await units.unrouteAll({ behavior: "wait" });
  await units.close();

  // Without its endpoint the page charts a synthetic feed, and says so.
  const offline = await context.newPage();
  offline.on("pageerror", (e) => problems.push(`offline page error: ${e.message}`));
  await offline.goto(new URL("/dashboard/?interval=100&stats=/no-such-feed.json", baseUrl).href);
  await offline.waitForFunction(() => window.slidewinDashboard?.ticks >= 3, null, { timeout: 10_000 });
  const banner = await offline.evaluate(() => [window.slidewinDashboard.source, document.getElementById("source").textContent]);
  assert.deepEqual(banner, ["synthetic", "Synthetic feed: /no-such-feed.json is unreachable, showing made-up traffic"]);
  assert.deepEqual(problems, [], "a page threw");
  console.log(`dashboard ok: ${view.plotted[0].length} points; screenshot ${screenshotPath}`);
} finally {
  await browser.close();
}
