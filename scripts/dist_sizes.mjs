// Prints what a first visit to the built site (dist/) downloads: each file of
// the page itself, raw and gzip -9, and the files fetched later on demand
// (the tagger's weights, GPT-2's vocabulary, the bundled MiniLM). `make dist`
// runs it; BENCHMARKS.md quotes it.

import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { gzipSync } from "node:zlib";

const dist = process.argv[2] ?? join(import.meta.dirname, "..", "dist");
const files = (dir) => readdirSync(dir).flatMap((name) => {
  const path = join(dir, name);
  return statSync(path).isDirectory() ? files(path) : [path];
});
const mb = (n) => (n / 1e6).toFixed(2).padStart(7);
const rows = files(dist).map((path) => {
  const bytes = readFileSync(path);
  return { name: relative(dist, path), raw: bytes.length, gzip: gzipSync(bytes, { level: 9 }).length };
});
const onDemand = (name) => /^(models|tagger|tokenizers)\//.test(name) || name === "_headers";
for (const [title, pick] of [["page (first visit)", (r) => !onDemand(r.name)], ["fetched on demand", (r) => onDemand(r.name)]]) {
  const chosen = rows.filter(pick).sort((a, b) => b.raw - a.raw);
  console.log(`${title}:${" ".repeat(Math.max(1, 44 - title.length))}     MB raw    MB gzip`);
  for (const r of chosen) console.log(`  ${r.name.padEnd(46)} ${mb(r.raw)}    ${mb(r.gzip)}`);
  const sum = (k) => chosen.reduce((s, r) => s + r[k], 0);
  console.log(`  ${"total".padEnd(46)} ${mb(sum("raw"))}    ${mb(sum("gzip"))}\n`);
}
