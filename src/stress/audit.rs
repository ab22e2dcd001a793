//! The spurious-correlate audit ([SPUR], SPEC 1.4) on SummEval-format data.
//!
//! Every system summary is scored by each metric against the document's
//! references; the audit correlates those scores with each human dimension
//! and with surface correlates of the summary (length in words, coverage and
//! density of its extractive fragments, Grusky et al. 2018), at example
//! level (Pearson, Spearman, Kendall tau-b), and measures system-level
//! pairwise accuracy against each human dimension. A metric is flagged for a
//! correlate when it correlates more strongly (in absolute value) with that
//! correlate than with a human dimension. A GPT-PPL spec adds each
//! summary's GPT-2 perplexity as one more correlate (`blindspot audit
//! --ppl-model`, the page with a GPT-2 loaded).

use serde::{Deserialize, Serialize};

use super::suite::MetricEntry;
use crate::data::{Damage, KeptError, SummEvalDoc, read_kept};
use crate::metrics::engine::Column;
use crate::metrics::perplexity::GptPplOptions;
use crate::metrics::{Engine, EngineError, Level, MetricSpec, Segment, uniform_nrefs};
use crate::text::words::words;

/// Pearson, Spearman and Kendall tau-b of two series.
/// NaN where undefined (a constant series), written to JSON as `null`.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct Correlation {
    /// Pearson's r.
    #[serde(deserialize_with = "super::nan_from_null")]
    pub pearson: f64,
    /// Spearman's rho (Pearson on average ranks).
    #[serde(deserialize_with = "super::nan_from_null")]
    pub spearman: f64,
    /// Kendall's tau-b (ties corrected).
    #[serde(deserialize_with = "super::nan_from_null")]
    pub kendall: f64,
}

/// Pearson correlation; NaN when a series is constant.
pub fn pearson(x: &[f64], y: &[f64]) -> f64 {
    let n = x.len() as f64;
    let (mx, my) = (x.iter().sum::<f64>() / n, y.iter().sum::<f64>() / n);
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for (a, b) in x.iter().zip(y) {
        sxy += (a - mx) * (b - my);
        sxx += (a - mx) * (a - mx);
        syy += (b - my) * (b - my);
    }
    sxy / (sxx * syy).sqrt()
}

/// Average ranks (1-based), ties sharing their mean rank.
pub fn ranks(x: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..x.len()).collect();
    order.sort_by(|&a, &b| x[a].total_cmp(&x[b]));
    let mut out = vec![0.0; x.len()];
    let mut i = 0;
    while i < order.len() {
        let mut j = i;
        while j + 1 < order.len() && x[order[j + 1]] == x[order[i]] {
            j += 1;
        }
        let rank = (i + j) as f64 / 2.0 + 1.0;
        for &k in &order[i..=j] {
            out[k] = rank;
        }
        i = j + 1;
    }
    out
}

/// Kendall's tau-b, O(n^2).
pub fn kendall(x: &[f64], y: &[f64]) -> f64 {
    let (mut concordant, mut discordant, mut ties_x, mut ties_y) = (0f64, 0f64, 0f64, 0f64);
    for i in 0..x.len() {
        for j in i + 1..x.len() {
            let (dx, dy) = (x[i] - x[j], y[i] - y[j]);
            if dx == 0.0 && dy == 0.0 {
                continue;
            } else if dx == 0.0 {
                ties_x += 1.0;
            } else if dy == 0.0 {
                ties_y += 1.0;
            } else if (dx > 0.0) == (dy > 0.0) {
                concordant += 1.0;
            } else {
                discordant += 1.0;
            }
        }
    }
    (concordant - discordant)
        / ((concordant + discordant + ties_x) * (concordant + discordant + ties_y)).sqrt()
}

/// All three coefficients.
pub fn correlation(x: &[f64], y: &[f64]) -> Correlation {
    Correlation {
        pearson: pearson(x, y),
        spearman: pearson(&ranks(x), &ranks(y)),
        kendall: kendall(x, y),
    }
}

/// Coverage and density of a summary's extractive fragments in its source
/// (Grusky et al. 2018: greedy longest shared token sequences, lowercase).
pub fn coverage_density(summary: &str, source: &str) -> (f64, f64) {
    let norm = |t: &str| -> Vec<String> {
        words(t)
            .iter()
            .map(|w| w.core().to_lowercase())
            .filter(|w| !w.is_empty())
            .collect()
    };
    let (s, a) = (norm(summary), norm(source));
    if s.is_empty() {
        return (0.0, 0.0);
    }
    let mut fragments = Vec::new();
    let mut i = 0;
    while i < s.len() {
        let mut best = 0;
        for j in 0..a.len() {
            let mut k = 0;
            while i + k < s.len() && j + k < a.len() && s[i + k] == a[j + k] {
                k += 1;
            }
            best = best.max(k);
        }
        if best > 0 {
            fragments.push(best);
        }
        i += best.max(1);
    }
    let n = s.len() as f64;
    let coverage = fragments.iter().sum::<usize>() as f64 / n;
    let density = fragments.iter().map(|&f| (f * f) as f64).sum::<f64>() / n;
    (coverage, density)
}

/// One metric's audit.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MetricAudit {
    /// The metric.
    pub metric: MetricEntry,
    /// Example-level correlation with each human dimension (report order).
    pub human: Vec<Correlation>,
    /// Example-level correlation with each correlate (report order).
    pub correlates: Vec<Correlation>,
    /// System-level pairwise accuracy against each human dimension (NaN
    /// where undefined: one system).
    #[serde(deserialize_with = "super::nans_from_nulls")]
    pub system_accuracy: Vec<f64>,
    /// (correlate, dimension) pairs where |Kendall with the correlate| exceeds
    /// |Kendall with the humans|.
    pub flags: Vec<(String, String)>,
}

/// The audit's results.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct AuditReport {
    /// `blindspot X.Y.Z`.
    pub tool: String,
    /// Dataset name.
    pub dataset: String,
    /// Scored (document, system) summaries.
    pub examples: usize,
    /// Systems.
    pub systems: usize,
    /// Human dimensions.
    pub dimensions: Vec<String>,
    /// Correlates.
    pub correlates: Vec<String>,
    /// How the humans themselves correlate with each correlate (rows:
    /// dimensions, columns: correlates).
    pub human_vs_correlates: Vec<Vec<Correlation>>,
    /// One entry per metric.
    pub metrics: Vec<MetricAudit>,
}

impl AuditReport {
    /// Reads a report written as JSON (`blindspot audit --out`, the page's
    /// download or its kept copy; undefined correlations come back as NaN);
    /// a damaged one (a correlation per dimension or correlate missing or
    /// out of range, flags other than those its correlations give) is
    /// refused.
    pub fn from_json(json: &str) -> Result<Self, KeptError> {
        read_kept(json, "audit report", |r: &Self| {
            let (dims, cors) = (r.dimensions.len(), r.correlates.len());
            if r.human_vs_correlates.len() != dims
                || r.human_vs_correlates.iter().any(|row| row.len() != cors)
            {
                return Err(Damage(
                    "the humans' correlations do not match the dimensions and correlates".into(),
                ));
            }
            // |r| <= 1 up to rounding: Pearson on two exactly linear series
            // may come out as 1.0000000000000002.
            let in_range = |c: &Correlation| {
                [c.pearson, c.spearman, c.kendall]
                    .iter()
                    .all(|v| v.is_nan() || v.abs() <= 1.0 + 1e-12)
            };
            if !r.human_vs_correlates.iter().flatten().all(in_range) {
                return Err(Damage(
                    "a correlation of the humans' is out of range".into(),
                ));
            }
            for m in &r.metrics {
                if m.human.len() != dims
                    || m.correlates.len() != cors
                    || m.system_accuracy.len() != dims
                {
                    return Err(Damage(format!(
                        "{} does not have a value per dimension and correlate",
                        m.metric.id
                    )));
                }
                if !m.human.iter().chain(&m.correlates).all(in_range)
                    || !m
                        .system_accuracy
                        .iter()
                        .all(|a| a.is_nan() || (0.0..=1.0).contains(a))
                {
                    return Err(Damage(format!(
                        "{} has a correlation or accuracy out of range",
                        m.metric.id
                    )));
                }
                if m.flags != flags(&m.correlates, &m.human, &r.correlates, &r.dimensions) {
                    return Err(Damage(format!(
                        "{}'s flags are not those its correlations give",
                        m.metric.id
                    )));
                }
            }
            Ok(())
        })
    }
}

/// The (correlate, dimension) pairs where a metric's |Kendall| with the
/// correlate exceeds its |Kendall| with the humans on the dimension, in
/// correlate then dimension order.
fn flags(
    with_correlates: &[Correlation],
    with_humans: &[Correlation],
    correlates: &[String],
    dimensions: &[String],
) -> Vec<(String, String)> {
    let mut flags = Vec::new();
    for (corr, c) in with_correlates.iter().zip(correlates) {
        for (h, d) in with_humans.iter().zip(dimensions) {
            if corr.kendall.abs() > h.kendall.abs() {
                flags.push((c.clone(), d.clone()));
            }
        }
    }
    flags
}

/// Every system summary, in the order the audit visits them (documents in
/// file order, then their systems).
pub fn summaries(docs: &[SummEvalDoc]) -> Vec<&str> {
    docs.iter()
        .flat_map(|d| d.systems.iter().map(|s| s.summary.as_str()))
        .collect()
}

/// Each summary's references: the document's gold summary, then its other
/// references.
fn references(doc: &SummEvalDoc) -> Vec<&str> {
    let mut refs: Vec<&str> = vec![doc.item.gold.as_str()];
    refs.extend(
        doc.item
            .refs
            .iter()
            .map(String::as_str)
            .filter(|r| *r != doc.item.gold),
    );
    refs
}

/// Documents scored per engine call when no metric needs the whole set.
const CHUNK_DOCS: usize = 4;

/// Runs the audit with any metrics, model-based ones included (the
/// engine's models). References: the document's gold summary and
/// references. `ppl_model`: a causal LM (GPT-2; a folder natively, a loaded
/// model's name on the page) whose perplexity of each summary, after
/// `<|endoftext|>`, is one more correlate, `{model}-ppl`, scored in the
/// same calls.
/// Documents are scored a few at a time, idf weights
/// over every summary (all at once where a metric reads the whole set's
/// scores: MENLI's combination), with
/// `progress(documents done, documents)` after each call; returning `false`
/// stops there, and the audit covers the documents scored so far.
pub async fn run_audit(
    dataset: &str,
    docs: &[SummEvalDoc],
    specs: &[MetricSpec],
    engine: &Engine,
    ppl_model: Option<&str>,
    progress: impl AsyncFn(usize, usize) -> bool,
) -> Result<AuditReport, EngineError> {
    // The perplexity is scored with the metrics, last, then set apart.
    let perplexity = ppl_model.map(|model| {
        MetricSpec::GptPpl(GptPplOptions {
            model: Some(model.to_owned()),
            bos: true,
        })
    });
    let specs: Vec<MetricSpec> = specs.iter().cloned().chain(perplexity).collect();
    let specs = specs.as_slice();
    // Batches are scored within the whole set (idf sees every summary),
    // except where a metric reads the set's scores: then all at once.
    let whole = specs.iter().any(MetricSpec::reads_set_scores);
    let chunk = if whole { docs.len().max(1) } else { CHUNK_DOCS };
    let refs: Vec<Vec<&str>> = docs.iter().map(references).collect();
    let segments: Vec<Segment> = docs
        .iter()
        .zip(&refs)
        .flat_map(|(doc, refs)| {
            doc.systems.iter().map(move |out| Segment {
                hyp: &out.summary,
                refs,
                src: doc.item.src.as_deref(),
            })
        })
        .collect();
    let (mut columns, done, scored) =
        score_columns(engine, specs, docs, &segments, chunk, progress).await?;
    let docs = &docs[..done];
    if columns.is_empty() {
        // No summary at all: the engine says what that means for each metric.
        columns = engine
            .score(specs, &[])
            .await?
            .into_iter()
            .map(|c| (c, Vec::new()))
            .collect();
    }
    // A model-free metric's signature counts the references of every
    // summary scored, not of one call's (`nrefs:var` when they vary).
    let nrefs = uniform_nrefs(&segments[..scored]);
    for (column, _) in &mut columns {
        if let Some(metric) = column.spec.lexical() {
            column.signature = metric.signature(Level::Sentence, nrefs);
        }
    }
    // The perplexity column is a correlate: GPT-PPL scores -perplexity.
    let perplexity = if ppl_model.is_some() {
        columns.pop()
    } else {
        None
    };
    let extra: Vec<(String, Vec<f64>)> = match perplexity {
        Some((column, values)) => {
            let model = column.signature.get("model").unwrap_or("gpt2").to_owned();
            vec![(format!("{model}-ppl"), values.iter().map(|v| -v).collect())]
        }
        None => Vec::new(),
    };
    let dimensions = dimensions_of(docs);
    let mut correlates = vec![
        "length".to_owned(),
        "coverage".to_owned(),
        "density".to_owned(),
    ];
    correlates.extend(extra.iter().map(|(name, _)| name.clone()));
    let mut table = Table::of(docs, &dimensions);
    table
        .surface
        .extend(extra.iter().map(|(_, v)| v[..scored].to_vec()));
    let human_system: Vec<Vec<f64>> = table.human.iter().map(|h| table.system_means(h)).collect();
    let audits = columns
        .iter()
        .map(|(column, values)| {
            let with_humans: Vec<Correlation> =
                table.human.iter().map(|h| correlation(values, h)).collect();
            let with_correlates: Vec<Correlation> = table
                .surface
                .iter()
                .map(|c| correlation(values, c))
                .collect();
            let flags = flags(&with_correlates, &with_humans, &correlates, &dimensions);
            let metric_system = table.system_means(values);
            MetricAudit {
                metric: MetricEntry {
                    id: column.spec.id().to_string(),
                    name: column.spec.info().name.to_owned(),
                    signature: column.signature.to_string(),
                },
                human: with_humans,
                correlates: with_correlates,
                system_accuracy: human_system
                    .iter()
                    .map(|h| pairwise(column.spec.info(), &metric_system, h))
                    .collect(),
                flags,
            }
        })
        .collect();
    Ok(AuditReport {
        tool: format!("blindspot {}", env!("CARGO_PKG_VERSION")),
        dataset: dataset.to_owned(),
        examples: table.system_of.len(),
        systems: table.systems.len(),
        human_vs_correlates: table
            .human
            .iter()
            .map(|h| table.surface.iter().map(|c| correlation(h, c)).collect())
            .collect(),
        dimensions,
        correlates,
        metrics: audits,
    })
}

/// Scores every summary with `specs`, `chunk` documents per call within the
/// whole set, telling `progress` after each; returning `false` stops there.
/// Per metric its column and every value; the documents and summaries done.
async fn score_columns(
    engine: &Engine,
    specs: &[MetricSpec],
    docs: &[SummEvalDoc],
    segments: &[Segment<'_>],
    chunk: usize,
    progress: impl AsyncFn(usize, usize) -> bool,
) -> Result<(Vec<(Column, Vec<f64>)>, usize, usize), EngineError> {
    let mut columns: Vec<(Column, Vec<f64>)> = Vec::new();
    let (mut done, mut scored) = (0, 0);
    while done < docs.len() {
        let part = &docs[done..(done + chunk).min(docs.len())];
        let batch = &segments[scored..scored + part.iter().map(|d| d.systems.len()).sum::<usize>()];
        // Documents without summaries add nothing (and a corpus score of
        // nothing is an error).
        if !batch.is_empty() {
            let part_columns = engine.score_within(specs, batch, segments).await?;
            if columns.is_empty() {
                columns = part_columns
                    .into_iter()
                    .map(|c| {
                        let values = c.values();
                        (c, values)
                    })
                    .collect();
            } else {
                for ((_, values), c) in columns.iter_mut().zip(&part_columns) {
                    values.extend(c.values());
                }
            }
        }
        done += part.len();
        scored += batch.len();
        if !progress(done, docs.len()).await {
            break;
        }
    }
    Ok((columns, done, scored))
}

/// The human dimensions, in first-seen order.
fn dimensions_of(docs: &[SummEvalDoc]) -> Vec<String> {
    docs.iter()
        .flat_map(|d| &d.systems)
        .flat_map(|s| s.scores.iter().map(|(k, _)| k.clone()))
        .fold(Vec::new(), |mut acc, k| {
            if !acc.contains(&k) {
                acc.push(k);
            }
            acc
        })
}

/// Per summary: its system, its human scores and its surface correlates.
struct Table {
    /// Systems in first-seen order.
    systems: Vec<String>,
    /// Each summary's system.
    system_of: Vec<usize>,
    /// Per dimension, each summary's human score (NaN where missing).
    human: Vec<Vec<f64>>,
    /// Per correlate (length, coverage, density, then any extra), each
    /// summary's value.
    surface: Vec<Vec<f64>>,
}

impl Table {
    fn of(docs: &[SummEvalDoc], dimensions: &[String]) -> Self {
        let mut t = Table {
            systems: Vec::new(),
            system_of: Vec::new(),
            human: vec![Vec::new(); dimensions.len()],
            surface: vec![Vec::new(); 3],
        };
        for doc in docs {
            let source = doc.item.src.as_deref().unwrap_or("");
            for out in &doc.systems {
                for (d, dim) in dimensions.iter().enumerate() {
                    let value = out
                        .scores
                        .iter()
                        .find(|(k, _)| k == dim)
                        .map_or(f64::NAN, |(_, v)| *v);
                    t.human[d].push(value);
                }
                let (coverage, density) = coverage_density(&out.summary, source);
                t.surface[0].push(words(&out.summary).len() as f64);
                t.surface[1].push(coverage);
                t.surface[2].push(density);
                let s = match t.systems.iter().position(|x| *x == out.system) {
                    Some(s) => s,
                    None => {
                        t.systems.push(out.system.clone());
                        t.systems.len() - 1
                    }
                };
                t.system_of.push(s);
            }
        }
        t
    }

    /// Each system's mean of `values` (one per summary).
    fn system_means(&self, values: &[f64]) -> Vec<f64> {
        let mut sums = vec![(0.0, 0usize); self.systems.len()];
        for (v, &s) in values.iter().zip(&self.system_of) {
            sums[s].0 += v;
            sums[s].1 += 1;
        }
        sums.iter().map(|(t, n)| t / *n as f64).collect()
    }
}

/// The share of system pairs a metric ranks as the humans do (pairs the
/// humans tie are left out): agreement in the metric's own direction
/// (lower TER is better).
fn pairwise(info: &crate::metrics::MetricInfo, metric: &[f64], humans: &[f64]) -> f64 {
    let (mut agree, mut total) = (0usize, 0usize);
    for i in 0..metric.len() {
        for j in i + 1..metric.len() {
            let dh = humans[i] - humans[j];
            if dh == 0.0 {
                continue;
            }
            total += 1;
            agree += usize::from(info.oriented(metric[i] - metric[j]) * dh > 0.0);
        }
    }
    agree as f64 / total.max(1) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coefficients_match_textbook_values() {
        let x = [1.0, 2.0, 3.0, 4.0, 5.0];
        let y = [2.0, 1.0, 4.0, 3.0, 5.0];
        assert!((pearson(&x, &y) - 0.8).abs() < 1e-12);
        assert!((correlation(&x, &y).spearman - 0.8).abs() < 1e-12);
        // 8 concordant, 2 discordant pairs: (8 - 2) / 10.
        assert!((kendall(&x, &y) - 0.6).abs() < 1e-12);
        assert_eq!(ranks(&[3.0, 1.0, 3.0, 2.0]), [3.5, 1.0, 3.5, 2.0]);
        // tau-b with ties: scipy.stats.kendalltau([1,2,2,3],[1,2,3,3]) = 0.8.
        assert!((kendall(&[1.0, 2.0, 2.0, 3.0], &[1.0, 2.0, 3.0, 3.0]) - 0.8).abs() < 1e-12);
    }

    #[test]
    fn extractive_fragments() {
        let (coverage, density) =
            coverage_density("the cat sat on a mat", "the cat sat on the mat");
        // Fragments: "the cat sat on" (4), "mat" (1); "a" is novel.
        assert!((coverage - 5.0 / 6.0).abs() < 1e-12);
        assert!((density - 17.0 / 6.0).abs() < 1e-12);
    }
}
