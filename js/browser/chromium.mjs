// Debian's headless Chromium through playwright-core, as every browser test here starts it
// (flags from /work/shared/PLATFORM.md): a fresh profile, removed by close().
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";

const CHROMIUM_ARGS = [
  "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
  "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic",
];

/** A browser context on a fresh profile; `close()` ends it and removes the profile. */
export async function launchChromium({ viewport = { width: 1200, height: 800 } } = {}) {
  const userDataDir = mkdtempSync(join(tmpdir(), "slidewin-chromium-"));
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: "/usr/bin/chromium",
    headless: true,
    ignoreDefaultArgs: true,
    args: [...CHROMIUM_ARGS, `--user-data-dir=${userDataDir}`, "--remote-debugging-pipe", "about:blank"],
    viewport,
  });
  return {
    context,
    async close() {
      await context.close();
      rmSync(userDataDir, { recursive: true, force: true });
    },
  };
}

/** Collects the page's errors (exceptions, console errors, failed requests) into `problems`. */
export function watchProblems(page, problems, prefix = "") {
  page.on("pageerror", (e) => problems.push(`${prefix}page error: ${e.message}`));
  page.on("console", (m) => m.type() === "error" && problems.push(`${prefix}console error: ${m.text()}`));
  page.on("requestfailed", (r) => problems.push(`${prefix}request failed: ${r.url()} ${r.failure()?.errorText}`));
}
