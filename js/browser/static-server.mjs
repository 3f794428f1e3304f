// Built pages (a bundle, its .wasm) served as they are on a loopback port, for Chromium: the
// .wasm as application/wasm, so browsers compile it while it streams.
import { readFileSync } from "node:fs";
import { createServer } from "node:http";
import { extname, join } from "node:path";

const TYPES = { ".html": "text/html", ".js": "text/javascript", ".mjs": "text/javascript", ".wasm": "application/wasm" };

/** Serves `dir` at the root of `url` (a directory's index.html at its path); `close()` stops it. */
export async function serveStatic(dir) {
  const server = createServer((req, res) => {
    try {
      const path = join(dir, new URL(req.url, "http://x").pathname);
      const file = path.endsWith("/") ? join(path, "index.html") : path;
      const body = readFileSync(file);
      res.writeHead(200, { "content-type": TYPES[extname(file)] ?? "application/octet-stream" });
      res.end(body);
    } catch {
      res.writeHead(404).end();
    }
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${server.address().port}/`, close: () => server.close() };
}
