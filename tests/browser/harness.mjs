// What every browser test file sets up: the built playground (dist/) served on
// a free loopback port, one headless Chromium (Debian's, never a download), and
// fresh pages that collect uncaught page errors and Content-Security-Policy
// violations (every file is served with the site's headers, www/_headers).

import { before, after } from "node:test";
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
 * (forget what an earlier page of the same context kept).
 */
export function playground() {
  let server, url, browser;
  before(async () => {
    ({ server, url } = await serveDist());
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
