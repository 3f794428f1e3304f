// Drive the dashboard in a real headless Chromium (Debian's, through playwright-core).
// Usage: node browser/dashboard.mjs BASE_URL SCREENSHOT_PATH   (run by tests/tests/dashboard.rs)
//   BASE_URL: where the demo nginx listens (it serves /dashboard/, /stats.json and /api/).
// Sends traffic to /api/ while the page polls, waits until the page's chart data holds both
// allowed and refused rates from the live feed, and fails on any page error; then checks that
// the page falls back to its synthetic feed (and says so) when the endpoint is missing.
import assert from "node:assert/strict";
import { launchChromium, watchProblems } from "./chromium.mjs";

const [baseUrl, screenshotPath] = process.argv.slice(2);
if (!baseUrl || !screenshotPath) {
  console.error("usage: node browser/dashboard.mjs BASE_URL SCREENSHOT_PATH");
  process.exit(2);
}

/** `requests` requests to /api/ from 20 users (the demo admits 5 per 10 s each); status counts. */
async function driveTraffic(requests) {
  const counts = {};
  for (let i = 0; i < requests; i++) {
    const { status } = await fetch(new URL(`/api/?user=u${i % 20}`, baseUrl));
    counts[status] = (counts[status] ?? 0) + 1;
  }
  return counts;
}

const browser = await launchChromium();
const { context } = browser;
const problems = [];
try {
  const page = context.pages()[0] ?? (await context.newPage());
  watchProblems(page, problems);

  await page.goto(new URL("/dashboard/?interval=250", baseUrl).href);
  await page.waitForFunction(() => window.slidewinDashboard?.source === "live", null, { timeout: 10_000 });

  // Keep traffic flowing while the page polls, so several ticks see both kinds.
  const traffic = (async () => {
    const all = {};
    for (let round = 0; round < 8; round++) {
      for (const [status, n] of Object.entries(await driveTraffic(60))) all[status] = (all[status] ?? 0) + n;
      await new Promise((r) => setTimeout(r, 150));
    }
    return all;
  })();
  await page.waitForFunction(() => {
    const d = window.slidewinDashboard;
    return d.rates.allowed.some((r) => r > 0) && d.rates.rejected.some((r) => r > 0) && d.ticks >= 4;
  }, null, { timeout: 20_000 });
  const statuses = await traffic;
  console.log("traffic to /api/:", JSON.stringify(statuses));
  assert.ok(statuses[200] > 0 && statuses[429] > 0, `the demo should allow and refuse some: ${JSON.stringify(statuses)}`);

  const view = await page.evaluate(() => {
    const d = window.slidewinDashboard;
    return {
      source: d.source,
      sourceText: document.getElementById("source").textContent,
      limiters: d.limiters,
      allowed: d.rates.allowed, rejected: d.rates.rejected,
      mean: d.stats.allowed.mean, ewma: d.stats.allowed.ewma, min: d.stats.allowed.min, max: d.stats.allowed.max,
      p95: d.stats.allowed.p95, bbLower: d.stats.allowed.bbLower, bbUpper: d.stats.allowed.bbUpper,
      legend: [...document.querySelectorAll(".u-legend .u-label")].map((e) => e.textContent),
      headers: [...document.querySelectorAll("#latest thead th")].map((e) => e.textContent),
      tableRows: document.querySelectorAll("#latest tbody tr").length,
      canvas: document.querySelector("#chart canvas") !== null,
    };
  });
  assert.equal(view.source, "live");
  assert.match(view.sourceText, /^Live: polling/);
  assert.deepEqual(view.limiters.slice().sort(), ["api", "api-dry", "api-legacy", "api-shared", "rules"]);
  assert.ok(view.canvas, "the chart draws on a canvas");
  assert.equal(view.tableRows, 2);
  // The band holds the mean: computed by slidewin in the page.
  for (let i = 0; i < view.allowed.length; i++) {
    assert.ok(view.min[i] <= view.mean[i] + 1e-9 && view.mean[i] <= view.max[i] + 1e-9, `band at ${i}`);
    // Issue 13: the rolling p95 lies within the window's range, the Bollinger band around the mean.
    assert.ok(view.min[i] <= view.p95[i] && view.p95[i] <= view.max[i], `p95 at ${i}`);
    const slack = 1e-9 * Math.max(1, Math.abs(view.mean[i]));
    assert.ok(view.bbLower[i] <= view.mean[i] + slack && view.mean[i] <= view.bbUpper[i] + slack, `Bollinger at ${i}`);
    assert.ok(Math.abs(view.bbUpper[i] + view.bbLower[i] - 2 * view.mean[i]) <= 4 * slack, `Bollinger centred at ${i}`);
  }
  assert.ok(view.p95.some((p, i) => p !== view.mean[i]), "the p95 line is its own line");
  for (const label of ["allowed p95", "allowed Bollinger upper", "allowed Bollinger lower"]) {
    assert.ok(view.legend.includes(label), `the chart shows ${label}: ${view.legend}`);
  }
  assert.deepEqual(view.headers.slice(-2), ["p95", "Bollinger band"]);
  await page.screenshot({ path: screenshotPath, fullPage: true });
  assert.deepEqual(problems, [], "the page logged errors");

  // Without its endpoint the page charts a synthetic feed, and says so.
  const offline = await context.newPage();
  offline.on("pageerror", (e) => problems.push(`offline page error: ${e.message}`));
  await offline.goto(new URL("/dashboard/?interval=100&stats=/no-such-feed.json", baseUrl).href);
  await offline.waitForFunction(() => window.slidewinDashboard?.ticks >= 3, null, { timeout: 10_000 });
  const banner = await offline.evaluate(() => [window.slidewinDashboard.source, document.getElementById("source").textContent]);
  assert.deepEqual(banner, ["synthetic", "Synthetic feed: /no-such-feed.json is unreachable, showing made-up traffic"]);
  assert.deepEqual(problems, [], "the offline page threw");
  console.log(`dashboard ok: ${view.allowed.length} points; screenshot ${screenshotPath}`);
} finally {
  await browser.close();
}
