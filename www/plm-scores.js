// Live BERTScore for the pair being edited, once a language model is loaded:
// a card with P/R/F and a token-alignment heatmap (hypothesis tokens ×
// reference tokens, each hypothesis token's best match outlined, token
// weights shown). Model passes are asynchronous (WebGPU reads are), so the
// page keeps typing smooth: one pass at a time, and only the newest text is
// scored when the previous pass ends (stale results are never shown).

const $ = (id) => document.getElementById(id);
const run = { wasm: null, model: null, busy: false, pending: false, seq: 0 };

function card() {
  let el = document.querySelector('.card[data-metric="bertscore"]');
  if (el) return el;
  el = document.createElement("article");
  el.className = "card card-wide";
  el.dataset.metric = "bertscore";
  el.innerHTML = `
    <header><h3>BERTScore</h3><span class="scale">0–1</span></header>
    <div class="value" data-role="value">–</div>
    <div class="parts" data-role="parts"></div>
    <div class="delta message" data-role="message"></div>
    <details><summary>Signature</summary><code data-role="signature"></code></details>`;
  $("score-cards").append(el);
  return el;
}

function heatmap(v) {
  const wrap = $("bertscore-heatmap");
  wrap.hidden = false;
  const cell = 18;
  const left = 8 + 7 * Math.max(...v.hypTokens.map((t) => t.length), 4);
  const top = 8 + 7 * Math.max(...v.refTokens.map((t) => t.length), 4);
  const n = v.hypTokens.length, m = v.refTokens.length;
  const svgNs = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(svgNs, "svg");
  svg.setAttribute("width", left + m * cell + 4);
  svg.setAttribute("height", top + n * cell + 4);
  svg.setAttribute("role", "img");
  svg.setAttribute("aria-label", `BERTScore similarity of ${n} hypothesis tokens to ${m} reference tokens`);
  const add = (tag, attrs, text) => {
    const e = document.createElementNS(svgNs, tag);
    for (const [k, val] of Object.entries(attrs)) e.setAttribute(k, val);
    if (text !== undefined) e.textContent = text;
    svg.append(e);
    return e;
  };
  v.refTokens.forEach((t, j) => {
    const x = left + j * cell + cell / 2;
    add("text", { x, y: top - 4, transform: `rotate(-60 ${x} ${top - 4})`, class: v.refWeights[j] ? "tok" : "tok special" }, t);
  });
  v.hypTokens.forEach((t, i) => {
    add("text", { x: left - 4, y: top + i * cell + cell * 0.7, "text-anchor": "end", class: v.hypWeights[i] ? "tok" : "tok special" }, t);
    for (let j = 0; j < m; j++) {
      const s = v.similarity[i * m + j];
      // Sequential blue scale (colour-blind safe): darker = more similar.
      const shade = Math.round(255 - 200 * Math.max(0, Math.min(1, s)));
      const rect = add("rect", { x: left + j * cell, y: top + i * cell, width: cell - 1, height: cell - 1, fill: `rgb(${shade},${shade + 20 > 255 ? 255 : shade + 20},255)` });
      rect.dataset.i = i;
      rect.dataset.j = j;
      const tip = document.createElementNS(svgNs, "title");
      tip.textContent = `${v.hypTokens[i]} ~ ${v.refTokens[j]}: ${s.toFixed(3)}`;
      rect.append(tip);
    }
    const j = v.hypBest[i];
    add("rect", { x: left + j * cell, y: top + i * cell, width: cell - 1, height: cell - 1, class: "best", fill: "none" });
  });
  wrap.replaceChildren(svg);
  const note = document.createElement("p");
  note.className = "muted";
  note.textContent = `Layer ${v.layer}. Rows: hypothesis tokens, columns: reference${v.bestReference ? ` ${v.bestReference + 1}` : ""} tokens; outlined: each hypothesis token's best match (precision). Grey tokens ([CLS], [SEP]) weigh 0; the others weigh 1.`;
  wrap.append(note);
}

async function score() {
  if (!run.model) return;
  if (run.busy) {
    run.pending = true;
    return;
  }
  run.busy = true;
  const seq = ++run.seq;
  const el = card();
  const hyp = $("hypothesis").value;
  const refs = $("reference").value.split(/\n\s*\n/).map((s) => s.trim()).filter(Boolean);
  try {
    const v = await run.wasm.bertScorePair(run.model.handle, hyp, refs, run.model.layer);
    if (seq !== run.seq || run.pending) return; // a newer edit is waiting: do not show stale numbers
    el.classList.remove("unavailable");
    const value = el.querySelector('[data-role="value"]');
    value.textContent = v.f.toFixed(4);
    value.dataset.raw = String(v.f);
    el.dataset.p = String(v.p);
    el.dataset.scoredHypothesis = hyp; // which text the shown numbers belong to
    el.dataset.r = String(v.r);
    el.querySelector('[data-role="parts"]').textContent = `P ${v.p.toFixed(4)} · R ${v.r.toFixed(4)} · F ${v.f.toFixed(4)} · ${v.elapsedMs.toFixed(0)} ms`;
    el.querySelector('[data-role="message"]').textContent = v.truncated ? "a text was cut to the model's limit" : "";
    el.querySelector('[data-role="signature"]').textContent = v.signature;
    heatmap(v);
  } catch (err) {
    if (seq !== run.seq) return;
    el.classList.add("unavailable");
    el.querySelector('[data-role="value"]').textContent = "–";
    delete el.querySelector('[data-role="value"]').dataset.raw;
    el.querySelector('[data-role="message"]').textContent = String(err.message ?? err);
    $("bertscore-heatmap").hidden = true;
  } finally {
    run.busy = false;
    if (run.pending) {
      run.pending = false;
      score();
    }
  }
}

/** Scores live once a model is loaded (the "blindspot:model" event of models.js). */
export function initPlmScores(wasm) {
  run.wasm = wasm;
  document.addEventListener("blindspot:model", (e) => {
    const info = e.detail;
    const entry = wasm.modelRegistry().find((m) => m.id === info.name);
    if (info.labels.length) return; // classification heads are for MENLI, not BERTScore
    run.model = { handle: info.handle, layer: entry?.layer ?? info.layers };
    score();
  });
  // Every scoring pass of the page (typing, injections, examples) announces itself.
  document.addEventListener("blindspot:texts", score);
}
