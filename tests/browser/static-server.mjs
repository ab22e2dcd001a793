// Serves dist/ (the built playground) on a free loopback port, for the browser
// tests and benchmarks.

import { createServer } from "node:http";
import { readFile } from "node:fs/promises";
import { extname, join, normalize, resolve } from "node:path";
import { gzipSync } from "node:zlib";

// BLINDSPOT_DIST serves another build (benchmarks of a release build).
export const DIST = process.env.BLINDSPOT_DIST ?? resolve(import.meta.dirname, "..", "..", "dist");
const TYPES = { ".html": "text/html", ".js": "text/javascript", ".wasm": "application/wasm", ".css": "text/css" };

/**
 * The headers the site's `_headers` file (www/_headers, Netlify format) sets
 * for every path (`/*`): the tests run under the production CSP.
 */
export async function siteHeaders(dist = DIST) {
  let text;
  try {
    text = await readFile(join(dist, "_headers"), "utf8");
  } catch {
    throw new Error(`${dist}/_headers is missing: build the site first (make build-web or make dist)`);
  }
  const headers = {};
  let all = false;
  for (const line of text.split("\n")) {
    if (!line.trim() || line.trim().startsWith("#")) continue;
    if (!/^\s/.test(line)) {
      all = line.trim() === "/*";
      continue;
    }
    const colon = line.indexOf(":");
    if (all && colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  return headers;
}

/**
 * Starts the server; resolves with `{ server, url }`. With `gzip`, text and
 * wasm go out gzip-compressed (level 9, as `scripts/dist_sizes.mjs` counts)
 * to browsers that accept it, as a static host would send them (benchmarks
 * of the first load). `replace` maps paths ("/score-helper.js") to bodies
 * served instead of the files: a broken file for a test, where a page route
 * cannot reach (a worker started by a worker fetches past the page's routes).
 */
export async function serveDist({ gzip = false, replace = {} } = {}) {
  const headers = await siteHeaders();
  const compressed = new Map();
  const server = createServer(async (req, res) => {
    const path = normalize(decodeURIComponent(new URL(req.url, "http://x").pathname));
    const file = join(DIST, path.endsWith("/") ? `${path}index.html` : path);
    let body;
    try {
      body = path in replace ? Buffer.from(replace[path]) : await readFile(file);
    } catch {
      res.writeHead(404).end("not found");
      return;
    }
    const type = TYPES[extname(file)] ?? "application/octet-stream";
    if (gzip && type !== "application/octet-stream" && /\bgzip\b/.test(req.headers["accept-encoding"] ?? "")) {
      if (!compressed.has(file)) compressed.set(file, gzipSync(body, { level: 9 }));
      res.writeHead(200, { ...headers, "content-type": type, "content-encoding": "gzip" });
      res.end(compressed.get(file));
      return;
    }
    res.writeHead(200, { ...headers, "content-type": type });
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
