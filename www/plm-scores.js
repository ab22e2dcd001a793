// Live model-based scores for the pair being edited, once language models
// are loaded: BERTScore (with a token-alignment heatmap), GPT-PPL (with a
// per-token surprisal bar under the hypothesis), MLM-PPL and MENLI (entailment,
// neutral and contradiction probabilities per direction). Each card lists the
// loaded models that can run its metric and says where the chosen one runs.
//
// Model passes run in the model worker (model-engine.js), so typing stays
// smooth: each card runs one pass at a time, and when it ends only the newest
// text is scored (stale results are never shown).

const $ = (id) => document.getElementById(id);

/** Loaded models by handle (infos from models.js's "blindspot:model" event). */
const models = new Map();
let engine = null;

const METRICS = {
  bertscore: { title: "BERTScore", scale: "0–1", needs: "bertscore-f", run: runBertScore, clear: () => { $("bertscore-heatmap").hidden = true; } },
  "gpt-ppl": { title: "GPT-PPL", scale: "−perplexity", needs: "gpt-ppl", run: runPerplexity("causal"), clear: () => { surprisalBar().hidden = true; } },
  "mlm-ppl": { title: "MLM-PPL", scale: "−pseudo-perplexity", needs: "mlm-ppl", run: runPerplexity("masked"), clear: () => {} },
  menli: { title: "MENLI", scale: "NLI", needs: "menli", run: runMenli, clear: () => {} },
};

/** Per-metric pass state: the chosen model, one pass at a time, newest text wins. */
const runs = Object.fromEntries(Object.keys(METRICS).map((id) => [id, { handle: null, busy: false, pending: false, seq: 0 }]));

function capable(metric) {
  return [...models.values()].filter((m) => m.metrics.includes(METRICS[metric].needs));
}

function card(metric) {
  let el = document.querySelector(`.card[data-metric="${metric}"]`);
  if (el) return el;
  const spec = METRICS[metric];
  el = document.createElement("article");
  el.className = "card card-wide plm-card";
  el.dataset.metric = metric;
  el.innerHTML = `
    <header><h3>${spec.title}</h3><span class="scale">${spec.scale}</span></header>
    <div class="plm-model"><label>Model <select data-role="model"></select></label> <span class="pill" data-role="backend"></span></div>
    <div class="plm-options" data-role="options"></div>
    <div class="value" data-role="value">–</div>
    <div class="parts" data-role="parts"></div>
    <div class="plm-detail" data-role="detail"></div>
    <div class="delta message" data-role="message"></div>
    <details><summary>Signature</summary><code data-role="signature"></code></details>`;
  el.querySelector('[data-role="model"]').addEventListener("change", (e) => {
    runs[metric].handle = Number(e.target.value);
    showBackend(metric);
    score(metric);
  });
  addOptions(metric, el.querySelector('[data-role="options"]'));
  $("score-cards").append(el);
  return el;
}

function addOptions(metric, box) {
  const select = (role, label, options) => {
    const l = document.createElement("label");
    l.textContent = `${label} `;
    const s = document.createElement("select");
    s.dataset.role = role;
    for (const [value, text] of options) s.append(new Option(text, value));
    s.addEventListener("change", () => score(metric));
    l.append(s);
    box.append(l, " ");
  };
  if (metric === "menli") {
    select("task", "Task", [["mt", "MT: e, both directions"], ["summ", "summarisation: e−c, hypothesis as premise"], ["summ-free", "reference-free: −c, source as premise"]]);
    select("formula", "Formula", [["", "task default"], ["e", "e"], ["-c", "−c"], ["e-n", "e−n"], ["e-c", "e−c"], ["e-n-2c", "e−n−2c"]]);
    select("direction", "Direction", [["", "task default"], ["ref-hyp", "premise → hypothesis"], ["hyp-ref", "hypothesis → premise"], ["both", "both (averaged)"]]);
  } else if (metric === "bertscore") {
    const l = document.createElement("label");
    l.className = "check";
    l.title = "Weigh tokens by idf ln((M+1)/(df+1)) over the M references (separate references by a blank line)";
    l.innerHTML = `<input type="checkbox" data-role="idf"> idf over the references`;
    l.querySelector("input").addEventListener("change", () => score(metric));
    const r = document.createElement("label");
    r.className = "check";
    r.title = "Rescale P, R and F with the model's baseline, (x − b)/(1 − b), b = the mean score of unrelated sentence pairs at this layer (bert_score's published baselines; Blindspot's own for MiniLM)";
    r.innerHTML = `<input type="checkbox" data-role="rescale"> rescale with baseline`;
    r.querySelector("input").addEventListener("change", () => score(metric));
    box.append(l, " ", r);
  } else if (metric === "gpt-ppl") {
    const l = document.createElement("label");
    l.className = "check";
    l.innerHTML = `<input type="checkbox" data-role="bos"> score the first token after &lt;|endoftext|&gt;`;
    l.querySelector("input").addEventListener("change", () => score(metric));
    box.append(l);
  }
}

function showBackend(metric) {
  const el = card(metric);
  const info = models.get(runs[metric].handle);
  const pill = el.querySelector('[data-role="backend"]');
  pill.textContent = info ? (info.backend === "webgpu" ? "runs on WebGPU" : "runs on the CPU") : "";
  el.dataset.backend = info?.backend ?? "";
}

/** Shows a card for every metric some loaded model can run, with its model picker. */
function refreshCards() {
  for (const metric of Object.keys(METRICS)) {
    const options = capable(metric);
    const existing = document.querySelector(`.card[data-metric="${metric}"]`);
    if (!options.length) {
      existing?.remove();
      METRICS[metric].clear();
      runs[metric].handle = null;
      continue;
    }
    const el = card(metric);
    const pick = el.querySelector('[data-role="model"]');
    pick.replaceChildren(...options.map((m) => new Option(`${m.name} (${m.precision})`, String(m.handle))));
    if (!options.some((m) => m.handle === runs[metric].handle)) runs[metric].handle = options[options.length - 1].handle;
    pick.value = String(runs[metric].handle);
    showBackend(metric);
  }
}

function texts() {
  return {
    hyp: $("hypothesis").value,
    refs: $("reference").value.split(/\n\s*\n/).map((s) => s.trim()).filter(Boolean),
    src: $("source").value.trim() || undefined,
  };
}

function setValue(el, value, shown) {
  const v = el.querySelector('[data-role="value"]');
  v.textContent = shown;
  v.dataset.raw = String(value);
}

async function score(metric) {
  const run = runs[metric];
  if (run.handle === null) return;
  if (run.busy) {
    run.pending = true;
    return;
  }
  run.busy = true;
  const seq = ++run.seq;
  const el = card(metric);
  const t = texts();
  try {
    const show = await METRICS[metric].run(run.handle, t, el);
    if (seq !== run.seq || run.pending) return; // a newer edit is waiting: do not show stale numbers
    el.classList.remove("unavailable");
    el.dataset.scoredHypothesis = t.hyp; // which text the shown numbers belong to
    el.querySelector('[data-role="message"]').textContent = "";
    show();
  } catch (err) {
    if (seq !== run.seq) return;
    el.classList.add("unavailable");
    el.querySelector('[data-role="value"]').textContent = "–";
    delete el.querySelector('[data-role="value"]').dataset.raw;
    el.querySelector('[data-role="parts"]').textContent = "";
    el.querySelector('[data-role="detail"]').replaceChildren();
    el.querySelector('[data-role="message"]').textContent = String(err.message ?? err);
    METRICS[metric].clear();
  } finally {
    run.busy = false;
    if (run.pending) {
      run.pending = false;
      score(metric);
    }
  }
}

// --- BERTScore -------------------------------------------------------------

async function runBertScore(handle, t, el) {
  const idf = Boolean(el.querySelector('[data-role="idf"]')?.checked);
  const rescale = Boolean(el.querySelector('[data-role="rescale"]')?.checked);
  const v = await engine.bertScorePair(handle, t.hyp, t.refs, models.get(handle).bertScoreLayer, idf, rescale);
  v.idf = idf;
  v.references = t.refs.length;
  return () => {
    setValue(el, v.f, v.f.toFixed(4));
    el.dataset.p = String(v.p);
    el.dataset.r = String(v.r);
    el.querySelector('[data-role="parts"]').textContent = `P ${v.p.toFixed(4)} · R ${v.r.toFixed(4)} · F ${v.f.toFixed(4)}${v.rescaled ? " (rescaled)" : ""} · ${v.elapsedMs.toFixed(0)} ms`;
    el.querySelector('[data-role="message"]').textContent = v.truncated ? "a text was cut to the model's limit" : "";
    el.querySelector('[data-role="signature"]').textContent = v.signature;
    heatmap(v);
  };
}

/** Escapes text for markup. */
function escapeXml(text) {
  return text.replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);
}

function heatmap(v) {
  const wrap = $("bertscore-heatmap");
  wrap.hidden = false;
  const cell = 18;
  // With idf each token's label carries its weight (uniform weights are 0 or 1).
  const label = (t, w) => (v.idf ? `${t} ·${w.toFixed(2)}` : t);
  const hypLabels = v.hypTokens.map((t, i) => label(t, v.hypWeights[i]));
  const refLabels = v.refTokens.map((t, j) => label(t, v.refWeights[j]));
  const left = 8 + 7 * Math.max(...hypLabels.map((t) => t.length), 4);
  const top = 8 + 7 * Math.max(...refLabels.map((t) => t.length), 4);
  const n = v.hypTokens.length, m = v.refTokens.length;
  // Built as one markup string: hundreds of cells per keystroke cost a few ms this way
  // (element by element, creation and layout took most of a frame).
  const parts = [];
  const tokenText = (x, y, extra, text, weight) =>
    parts.push(`<text x="${x}" y="${y}" ${extra} class="${weight ? "tok" : "tok special"}" data-weight="${weight}">${escapeXml(text)}<title>weight ${weight.toFixed(4)}</title></text>`);
  refLabels.forEach((t, j) => {
    const x = left + j * cell + cell / 2;
    tokenText(x, top - 4, `transform="rotate(-60 ${x} ${top - 4})"`, t, v.refWeights[j]);
  });
  hypLabels.forEach((t, i) => {
    const y = top + i * cell;
    tokenText(left - 4, y + cell * 0.7, 'text-anchor="end"', t, v.hypWeights[i]);
    for (let j = 0; j < m; j++) {
      // Sequential blue scale (colour-blind safe): darker = more similar.
      const shade = Math.round(255 - 200 * Math.max(0, Math.min(1, v.similarity[i * m + j])));
      // No <title> per cell: the readout below the map follows the pointer.
      parts.push(`<rect x="${left + j * cell}" y="${y}" width="${cell - 1}" height="${cell - 1}" fill="rgb(${shade},${Math.min(255, shade + 20)},255)" data-i="${i}" data-j="${j}"/>`);
    }
    parts.push(`<rect x="${left + v.hypBest[i] * cell}" y="${y}" width="${cell - 1}" height="${cell - 1}" class="best" fill="none"/>`);
  });
  wrap.innerHTML = `<svg xmlns="http://www.w3.org/2000/svg" width="${left + m * cell + 4}" height="${top + n * cell + 4}" role="img" aria-label="BERTScore similarity of ${n} hypothesis tokens to ${m} reference tokens">${parts.join("")}</svg>`;
  const svg = wrap.firstElementChild;
  const readout = document.createElement("p");
  readout.className = "heatmap-readout";
  readout.textContent = "Point at a cell to read its similarity.";
  svg.addEventListener("pointerover", (e) => {
    const { i, j } = e.target.dataset;
    if (i === undefined) return;
    readout.textContent = `${v.hypTokens[i]} ~ ${v.refTokens[j]}: ${v.similarity[i * m + Number(j)].toFixed(3)}`;
  });
  wrap.append(readout);
  const note = document.createElement("p");
  note.className = "muted";
  note.textContent = `Layer ${v.layer}. Rows: hypothesis tokens, columns: reference${v.bestReference ? ` ${v.bestReference + 1}` : ""} tokens; outlined: each hypothesis token's best match (precision). Grey tokens ([CLS], [SEP]) weigh 0; ${v.idf ? `the others weigh their idf over the ${v.references} references (shown after each token)` : "the others weigh 1"}.`;
  wrap.append(note);
}

// --- Perplexities --------------------------------------------------------

function surprisalBar() {
  let bar = $("surprisal-bar");
  if (!bar) {
    bar = document.createElement("div");
    bar.id = "surprisal-bar";
    bar.className = "surprisal";
    bar.hidden = true;
    $("hypothesis-diff").after(bar);
  }
  return bar;
}

function drawSurprisal(v) {
  const bar = surprisalBar();
  const scored = v.tokens.map(([, s]) => s).filter((s) => s !== null && s !== undefined);
  const top = Math.max(...scored, 1);
  const spans = v.tokens.map(([text, s]) => {
    const span = document.createElement("span");
    span.className = "tok";
    span.textContent = text;
    if (s === null || s === undefined) {
      span.classList.add("unscored");
      span.title = `${JSON.stringify(text)}: not scored (no context before it)`;
    } else {
      // Sequential orange scale (colour-blind safe): darker = more surprising.
      const a = Math.max(0.05, s / top);
      span.style.background = `rgba(230, 159, 0, ${a.toFixed(3)})`;
      span.dataset.surprisal = String(s);
      span.title = `${JSON.stringify(text)}: ${s.toFixed(2)} nats (p = ${Math.exp(-s).toPrecision(2)})`;
    }
    return span;
  });
  const label = document.createElement("span");
  label.className = "muted surprisal-label";
  label.textContent = "GPT-PPL surprisal per token (darker = less expected):";
  bar.replaceChildren(label, ...spans);
  bar.hidden = false;
}

function runPerplexity(kind) {
  return async (handle, t, el) => {
    const bos = kind === "causal" && Boolean(el.querySelector('[data-role="bos"]')?.checked);
    const v = await engine.perplexityText(handle, t.hyp, kind, bos);
    if (v.perplexity === undefined || v.perplexity === null) {
      throw new Error(kind === "causal"
        ? "one token has no context to be scored: tick “score the first token” or type more"
        : "no token to score");
    }
    return () => {
      setValue(el, -v.perplexity, (-v.perplexity).toPrecision(5));
      const scored = v.tokens.filter(([, s]) => s !== null && s !== undefined).length;
      el.querySelector('[data-role="parts"]').textContent = `perplexity ${v.perplexity.toPrecision(5)} over ${scored} tokens · ${v.elapsedMs.toFixed(0)} ms`;
      el.querySelector('[data-role="message"]').textContent = v.truncated ? "the hypothesis was cut to the model's limit" : "";
      el.querySelector('[data-role="signature"]').textContent = v.signature;
      if (kind === "causal") drawSurprisal(v);
    };
  };
}

// --- MENLI ---------------------------------------------------------------

function probsRow(label, p) {
  const row = document.createElement("div");
  row.className = "nli-row";
  const name = document.createElement("span");
  name.className = "nli-dir";
  name.textContent = label;
  row.append(name);
  for (const [k, title] of [["e", "entailment"], ["n", "neutral"], ["c", "contradiction"]]) {
    const cell = document.createElement("span");
    cell.className = `nli-prob nli-${k}`;
    cell.dataset.label = k;
    cell.dataset.value = String(p[k]);
    cell.title = `${title} ${p[k].toFixed(4)}`;
    cell.innerHTML = `<b>${k}</b> <span class="nli-bar" style="width:${(40 * p[k]).toFixed(1)}px"></span> ${p[k].toFixed(3)}`;
    row.append(cell);
  }
  return row;
}

async function runMenli(handle, t, el) {
  const get = (role) => el.querySelector(`[data-role="${role}"]`).value;
  const v = await engine.menliPair(handle, t.hyp, t.refs, t.src, get("task"), get("formula") || undefined, get("direction") || undefined);
  return () => {
    setValue(el, v.value, v.value.toFixed(4));
    const premise = v.premiseKind === "source" ? "source" : `reference${t.refs.length > 1 ? ` ${v.premise + 1}` : ""}`;
    el.querySelector('[data-role="parts"]').textContent = `${v.formula}, ${v.direction === "both" ? "both directions averaged" : v.direction === "ref-hyp" ? `${premise} → hypothesis` : `hypothesis → ${premise}`} · ${v.elapsedMs.toFixed(0)} ms`;
    el.querySelector('[data-role="detail"]').replaceChildren(
      probsRow(`${premise} → hyp`, v.forward),
      probsRow(`hyp → ${premise}`, v.backward),
    );
    el.querySelector('[data-role="signature"]').textContent = v.signature;
  };
}

/** Scores live once models are loaded (the "blindspot:model" event of models.js). */
export function initPlmScores(modelEngine) {
  engine = modelEngine;
  document.addEventListener("blindspot:model", (e) => {
    const info = e.detail;
    for (const [handle, m] of models) if (m.name === info.name) models.delete(handle); // reloaded
    // The registry's BERTScore layer for this checkpoint (else its last), looked up once.
    const entry = engine.modelRegistry().find((m) => m.id === info.name);
    models.set(info.handle, { ...info, bertScoreLayer: entry?.layer ?? info.layers });
    // A newly loaded model becomes the pick of every metric it can run.
    for (const metric of Object.keys(METRICS)) {
      if (info.metrics.includes(METRICS[metric].needs)) runs[metric].handle = info.handle;
    }
    refreshCards();
    for (const metric of Object.keys(METRICS)) score(metric);
  });
  document.addEventListener("blindspot:model-unloaded", (e) => {
    models.delete(e.detail.handle);
    refreshCards();
  });
  // Every scoring pass of the page (typing, injections, examples) announces itself.
  // The page announces an edit at once (before its own frame) and again after scoring; a
  // pass starts only when the texts differ from the last ones announced.
  let announced = "";
  document.addEventListener("blindspot:texts", () => {
    const key = JSON.stringify(texts());
    if (key === announced) return;
    announced = key;
    for (const metric of Object.keys(METRICS)) score(metric);
  });
}
