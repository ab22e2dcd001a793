// Serves dist/ (the built playground) on a free loopback port, for the browser
// tests and benchmarks.

import { createServer } from "node:http";
import { readFile } from "node:fs/promises";
import { extname, join, normalize, resolve } from "node:path";

// BLINDSPOT_DIST serves another build (benchmarks of a release build).
export const DIST = process.env.BLINDSPOT_DIST ?? resolve(import.meta.dirname, "..", "..", "dist");
const TYPES = { ".html": "text/html", ".js": "text/javascript", ".wasm": "application/wasm", ".css": "text/css" };

/** Starts the server; resolves with `{ server, url }`. */
export function serveDist() {
  const server = createServer(async (req, res) => {
    const path = normalize(decodeURIComponent(new URL(req.url, "http://x").pathname));
    const file = join(DIST, path.endsWith("/") ? `${path}index.html` : path);
    let body;
    try {
      body = await readFile(file);
    } catch {
      res.writeHead(404).end("not found");
      return;
    }
    res.writeHead(200, { "content-type": TYPES[extname(file)] ?? "application/octet-stream" });
    res.end(body);
  });
  return new Promise((done) =>
    server.listen(0, "127.0.0.1", () => done({ server, url: `http://127.0.0.1:${server.address().port}/` })));
}

/** Chromium flags shared by tests and benchmarks (no background traffic; WebGPU on SwiftShader). */
export const CHROMIUM_ARGS = [
  "--no-sandbox",
  "--enable-unsafe-webgpu",
  "--enable-features=Vulkan",
  "--use-angle=swiftshader",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--disable-quic",
  "--no-first-run",
];
