// The preference suite (MENLI CSV) and the spurious-correlate audit (SummEval
// JSONL) on the page, with the model-free metrics and every model-based metric
// whose card is showing (its model and options). Both run in the model worker,
// where the models are; every number comes from the wasm core
// (src/stress/prefer.rs, src/stress/audit.rs).

import { download } from "./export.js";
import { loadedCausalLm } from "./models.js";
import { lexicalSpecs, modelSpecs } from "./plm-scores.js";
import { count } from "./suite.js";
import { finished, keptReport } from "./kept-report.js";

const $ = (id) => document.getElementById(id);
/** The analysis chosen, kept across reloads (the file is not: it may be large). */
const STORAGE_KEY = "blindspot.analysis.v1";
const view = { file: null, running: false, stopping: false, engine: null, wasm: null, registry: [], report: null };
/** The results shown, kept across visits: `{kind, stopped, report}`. */
const kept = keptReport("blindspot.analysis-report.v1");

function status(text, kind = "muted") {
  $("analysis-status").textContent = text;
  $("analysis-status").className = kind;
}

function cell(row, text, attrs = {}) {
  const td = row.insertCell();
  td.textContent = text;
  Object.assign(td, attrs);
  return td;
}

function table(headers) {
  const t = document.createElement("table");
  t.className = "card-grid";
  const head = t.createTHead().insertRow();
  for (const h of headers) head.append(Object.assign(document.createElement("th"), { textContent: h }));
  return t;
}

const pct = (a) => `${(100 * a.accuracy).toFixed(1)}%`;

function renderPreference(report) {
  const out = [];
  for (const [key, title] of [["ref_based", "Reference-based: m(ref, paraphrase) > m(ref, adversarial)"],
    ["ref_free", "Reference-free: m(src, ref) > m(src, adversarial)"]]) {
    const caption = Object.assign(document.createElement("h3"), { textContent: title });
    const t = table(["error type", ...report.metrics.map((m) => m.metric.name)]);
    const body = t.createTBody();
    report.error_types.forEach((e, k) => {
      const row = body.insertRow();
      row.dataset.error = e;
      cell(row, e);
      for (const m of report.metrics) cell(row, pct(m[key][k]), { title: `${m[key][k].passed} / ${m[key][k].total}` });
    });
    const all = body.insertRow();
    all.dataset.error = "all";
    cell(all, "all");
    for (const m of report.metrics) {
      const overall = m[`${key}_overall`];
      cell(all, pct(overall), { className: "overall", title: `${overall.passed} / ${overall.total}` });
    }
    out.push(caption, t);
  }
  $("analysis-result").replaceChildren(...out);
}

/** A correlation or accuracy; "n/a" where it is undefined (a column that does not vary: one summary, one system, equal values). */
const fixed = (v, digits = 3) => (Number.isFinite(v) ? v.toFixed(digits) : "n/a");

function renderAudit(report) {
  const t = table(["metric", ...report.dimensions.map((d) => `τ ${d}`), ...report.correlates.map((c) => `τ ${c}`),
    ...report.dimensions.map((d) => `system acc. ${d}`)]);
  const body = t.createTBody();
  for (const m of report.metrics) {
    const row = body.insertRow();
    row.dataset.metric = m.metric.id;
    cell(row, m.metric.name, { title: m.metric.signature });
    for (const h of m.human) cell(row, fixed(h.kendall), { title: `Pearson ${fixed(h.pearson)}, Spearman ${fixed(h.spearman)}` });
    report.correlates.forEach((c, k) => {
      const flagged = m.flags.filter(([fc]) => fc === c).map(([, d]) => d);
      const td = cell(row, fixed(m.correlates[k].kendall), {
        title: flagged.length ? `tracks ${c} more than humans' ${flagged.join(", ")}` : `Pearson ${fixed(m.correlates[k].pearson)}`,
      });
      if (flagged.length) td.className = "flag";
    });
    for (const a of m.system_accuracy) cell(row, Number.isFinite(a) ? `${(100 * a).toFixed(1)}%` : "n/a");
  }
  const note = Object.assign(document.createElement("p"), {
    className: "muted",
    textContent: `${report.examples} ${report.examples === 1 ? "summary" : "summaries"} from ${count(report.systems, "system")}. Example-level Kendall τ-b; ` +
      "a highlighted correlate cell means the metric correlates more with it than with a human dimension; " +
      "n/a: undefined (a column that does not vary, e.g. one summary or one system).",
  });
  $("analysis-result").replaceChildren(note, t);
}

/** "12 cases", "24 summaries": what a report scored. */
function scored(kind, report) {
  return kind === "prefer" ? count(report.cases, "case") : `${report.examples} ${report.examples === 1 ? "summary" : "summaries"}`;
}

/** Draws a report and offers its download. */
function show(kind, report) {
  (kind === "prefer" ? renderPreference : renderAudit)(report);
  view.report = { kind, report };
  $("analysis-json").disabled = false;
}

/** Shows the results the last visit kept, read and checked by the core (`PreferenceReport::from_json`, `AuditReport::from_json`). */
function restoreResult() {
  kept.restore(
    (json, entry) => view.wasm.readAnalysisReport(entry.kind, json),
    (report, entry) => {
      $("analysis-kind").value = entry.kind;
      show(entry.kind, report);
      const analysis = entry.kind === "prefer" ? "preference suite" : "audit";
      const stopped = entry.stopped ? ", stopped early" : "";
      const skipped = entry.skipped ? `; ${entry.skipped}` : "";
      status(`The last ${analysis}'s results ${finished(entry, report.tool, view.wasm.version())}: ${scored(entry.kind, report)} of ` +
        `${report.dataset}${stopped}${skipped}. Choose a file to run again.`, stopped || skipped ? "bad" : "muted");
    },
    (why) => {
      clearResult();
      status(`The last run's results could not be read back, and were dropped (${why}). Choose a file.`, "bad");
    },
  );
}

async function run() {
  if (!view.file) return status("Choose a file first.", "bad");
  if (view.running) return;
  const kind = $("analysis-kind").value;
  const lexical = lexicalSpecs(view.wasm, view.registry);
  const specs = [...lexical, ...modelSpecs()];
  const request = { dataset: view.file.name, text: view.file.text, specs };
  // The audit adds each summary's perplexity under a loaded GPT-2 as a correlate ([SPUR]).
  const lm = kind === "audit" ? loadedCausalLm() : null;
  if (lm) request.pplModel = lm.name;
  const withModels = specs.length - lexical.length;
  const extras = [withModels ? `${count(withModels, "model-based metric")}` : "", lm ? `${lm.name}'s perplexity as a correlate` : ""].filter(Boolean);
  status(extras.length ? `Running with ${extras.join(" and ")}…` : "Running…");
  clearResult();
  view.running = true;
  view.stopping = false;
  // The file and the kind stay as they are until the run ends (its results are theirs).
  setInputsDisabled(true);
  $("analysis-run").disabled = true;
  const started = performance.now();
  $("analysis-stop").disabled = false;
  try {
    const out = kind === "prefer"
      ? await view.engine.preferenceSuite(request, (done, total) => view.stopping || status(`${done} / ${total} cases`))
      : await view.engine.auditSuite(request, (done, total) => view.stopping || status(`${done} / ${total} documents`));
    show(kind, out.report);
    const millis = performance.now() - started;
    const skipped = out.problems.length ? `; ${count(out.problems.length, "row")} skipped (first: line ${out.problems[0].line}: ${out.problems[0].message})` : "";
    const stopped = out.stopped ? `Stopped after ${(millis / 1000).toFixed(1)} s: the results cover the first ${scored(kind, out.report)} only` : "";
    const note = kept.keep(out.report, { kind, stopped: out.stopped, skipped: skipped.slice(2) });
    status(`${stopped || `Done in ${(millis / 1000).toFixed(1)} s`}${skipped}.${note}`, out.problems.length || out.stopped ? "bad" : "muted");
  } catch (err) {
    status(String(err.message ?? err), "bad");
  } finally {
    view.running = false;
    setInputsDisabled(false);
    $("analysis-run").disabled = false;
    $("analysis-stop").disabled = true;
  }
}

/** Forgets the report shown and its kept copy (another analysis or file is chosen, or a run starts). */
function clearResult() {
  $("analysis-result").replaceChildren();
  view.report = null;
  kept.forget();
  $("analysis-json").disabled = true;
}

function setInputsDisabled(disabled) {
  for (const id of ["analysis-kind", "analysis-file", "analysis-sample"]) $(id).disabled = disabled;
}

/** Asks the running analysis to end after its current batch (its results so far are shown). */
async function stop() {
  if (!view.running) return;
  $("analysis-stop").disabled = true;
  view.stopping = true;
  status("Stopping after this batch…");
  try {
    await view.engine.stopAnalysis();
  } catch (err) {
    status(`Could not stop: ${err.message ?? err}`, "bad");
  }
}

/** Wires the preference / audit view. */
export function initAnalyses(wasm, engine, registry) {
  Object.assign(view, { wasm, registry, engine });
  // The bundled samples (written for Blindspot), one per analysis.
  const samples = Object.fromEntries(wasm.bundledSamples().map((s) => [s.kind, s]));
  const useSample = () => {
    const s = samples[$("analysis-kind").value === "prefer" ? "preference" : "audit"];
    view.file = { name: s.file, text: wasm.bundledSample(s.kind), bundled: true };
    $("analysis-file").value = "";
    clearResult();
    $("analysis-sample").title = s.about;
    status(`${s.file} loaded: ${s.about}.`);
    $("analysis-run").disabled = false;
  };
  $("analysis-sample").title = `${samples.preference.about}; or, for the audit, ${samples.audit.about}`;
  $("analysis-sample").addEventListener("click", useSample);
  try {
    const kind = JSON.parse(localStorage.getItem(STORAGE_KEY))?.kind;
    if ([...$("analysis-kind").options].some((o) => o.value === kind)) $("analysis-kind").value = kind;
  } catch {
    // A damaged entry: the default analysis.
  }
  const saveKind = () => {
    try {
      localStorage.setItem(STORAGE_KEY, JSON.stringify({ kind: $("analysis-kind").value }));
    } catch {
      // Storage full or disabled: the choice is just not kept.
    }
  };
  // A bundled sample follows the analysis chosen (a file of the user's stays).
  $("analysis-kind").addEventListener("change", () => {
    saveKind();
    // The tables shown were the other analysis's.
    clearResult();
    if (view.file?.bundled) useSample();
  });
  $("analysis-file").addEventListener("change", async (e) => {
    const file = e.target.files[0];
    if (!file) return;
    try {
      view.file = { name: file.name, text: await file.text() };
    } catch (err) {
      status(`Could not read ${file.name}: ${err.message ?? err}`, "bad");
      return;
    }
    if (file.name.endsWith(".csv")) $("analysis-kind").value = "prefer";
    else if (file.name.endsWith(".jsonl")) $("analysis-kind").value = "audit";
    saveKind();
    clearResult();
    status(`${file.name} loaded.`);
    $("analysis-run").disabled = false;
  });
  $("analysis-run").addEventListener("click", run);
  $("analysis-stop").addEventListener("click", stop);
  restoreResult();
  $("analysis-json").addEventListener("click", () => {
    if (!view.report) return;
    const name = view.report.kind === "prefer" ? "blindspot-preference.json" : "blindspot-audit.json";
    download(new Blob([JSON.stringify(view.report.report, null, 2)], { type: "application/json" }), name);
  });
}
