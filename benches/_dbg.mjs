import { chromium } from "playwright-core";
import { serveDist, CHROMIUM_ARGS } from "../tests/browser/static-server.mjs";
const broken = process.argv[2] === "broken";
const { server, url } = await serveDist(broken ? { replace: { "/score-helper.js": 'throw new Error("this helper is broken");' } } : {});
const browser = await chromium.launch({ executablePath: "/usr/bin/chromium", args: CHROMIUM_ARGS });
try {
const page = await browser.newPage();
page.on("console", (m) => { if (!/integrity/.test(m.text())) console.log("console:", m.text()); });
await page.goto(url);
await page.waitForSelector("body[data-ready=true]", { timeout: 120_000 });
await page.selectOption("#example", "custom");
await page.fill("#reference", "The committee approved the new budget after a long debate on Tuesday.");
await page.fill("#hypothesis", "After a long debate on Tuesday, the committee passed the new budget.");
await page.selectOption("#model-pick", "sentence-transformers/all-MiniLM-L6-v2");
await page.selectOption("#model-backend", "cpu");
await page.click("#model-load");
await page.waitForSelector('.card[data-metric="bertscore"] [data-role="value"][data-raw]', { timeout: 120_000 });
await page.waitForFunction(() => [...document.querySelectorAll("#attack-metric option")].some((o) => o.value.startsWith("bertscore-f@")));
const key = await page.evaluate(() => [...document.querySelectorAll("#attack-metric option")].find((o) => o.value.startsWith("bertscore-f@")).value);
console.log("key", key);
await page.selectOption("#attack-metric", key);
await page.selectOption("#attack-goal", "over-penalise");
await page.fill("#attack-budget", "150");
await page.fill("#attack-workers", "2");
for (let k = 0; k < 3; k++) {
  await page.click("#attack-run");
  await page.waitForFunction(() => ["done", "error"].includes(document.getElementById("attack-panel").dataset.state), null, { timeout: 240_000 });
  console.log(await page.getAttribute("#attack-panel", "data-workers"), await page.textContent("#attack-status"));
}
} finally { await browser.close(); server.close(); }
