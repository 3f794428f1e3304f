// The app every bundler builds: the package's own init() (no bundler-specific import), then the
// checks. The answer goes to globalThis (Chromium) and to stdout (node).
import init from "slidewin";
import { checks } from "./checks.mjs";

const report = (result) => {
  globalThis.slidewinChecks = result;
  if (typeof window === "undefined") console.log(JSON.stringify(result));
};
init()
  .then(checks)
  .then(report, (e) => report({ error: String(e?.stack ?? e) }));
