// Trunk post-build hook (Trunk.toml): makes the built page work under the
// site's Content-Security-Policy, which allows no inline script.
//
// - Trunk's loader (the inline module that starts the wasm and fires
//   TrunkApplicationStarted) moves to boot-<hash>.js next to index.html.
// - Release builds (`make dist`) also get the policy from www/_headers as a
//   <meta http-equiv> in index.html, for hosts that cannot send headers
//   (frame-ancestors only works as a header, so it is left out there).
//
// Trunk runs this with TRUNK_STAGING_DIR, TRUNK_PROFILE and TRUNK_PUBLIC_URL set.

import { createHash } from "node:crypto";
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";

const staging = process.env.TRUNK_STAGING_DIR;
if (!staging) throw new Error("run by Trunk as a post_build hook (TRUNK_STAGING_DIR is not set)");
const publicUrl = process.env.TRUNK_PUBLIC_URL ?? "/";
const indexPath = join(staging, "index.html");
let html = await readFile(indexPath, "utf8");

const inline = [...html.matchAll(/<script type="module">([\s\S]*?)<\/script>/g)];
if (inline.length !== 1 || !inline[0][1].includes("TrunkApplicationStarted")) {
  throw new Error(`expected Trunk's one inline loader script in index.html, found ${inline.length} inline module scripts`);
}
const [tag, body] = inline[0];
const name = `boot-${createHash("sha256").update(body).digest("hex").slice(0, 16)}.js`;
await writeFile(join(staging, name), `${body.trim()}\n`);
html = html.replace(tag, `<script type="module" src="${publicUrl}${name}"></script>`);

if (process.env.TRUNK_PROFILE === "release") {
  const policy = (await readFile(join(staging, "_headers"), "utf8"))
    .split("\n")
    .map((line) => line.trim())
    .find((line) => line.startsWith("Content-Security-Policy:"))
    ?.slice("Content-Security-Policy:".length)
    .split(";")
    .map((d) => d.trim())
    .filter((d) => d && !d.startsWith("frame-ancestors"))
    .join("; ");
  if (!policy) throw new Error("www/_headers has no Content-Security-Policy line");
  html = html.replace("<head>", `<head>\n  <meta http-equiv="Content-Security-Policy" content="${policy}">`);
}
await writeFile(indexPath, html);
