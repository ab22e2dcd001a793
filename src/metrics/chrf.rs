//! chrF (Popović, 2015) exactly as sacrebleu 2.6 computes it.
//!
//! Defaults follow sacrebleu: character n-grams up to order 6, no word
//! n-grams (chrF, not chrF++), beta = 2, whitespace removed, sacrebleu's
//! effective-order averaging (not eps smoothing). With several references the
//! one with the best segment F-score is used. Corpus chrF comes from summed
//! statistics.

use rustc_hash::FxHashMap as HashMap;

use super::signature::nrefs_value;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::registry::{About, Card, KindAbout, LexicalModule, MetricModule};
use super::{
    CorpusAggregation, Level, Metric, MetricError, MetricId, MetricInfo, Scale, Score, ScorePart,
    Segment, Signature, require_references, uniform_nrefs,
};
use crate::text::python_split;

/// chrF's registry entry: its options and description.
pub struct ChrfMetric;

/// chrF's options: sacrebleu's defaults (character order 6, word order 0,
/// beta 2, whitespace removed); none is exposed yet.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct ChrfOptions {}

impl MetricModule for ChrfMetric {
    type Options = ChrfOptions;
    const KIND: KindAbout = KindAbout {
        name: "chrF",
        about: "Character n-gram F-score (n = 1..6, recall weighted by beta = 2) with \
                whitespace removed, as sacrebleu computes it; with several references \
                the best-matching one counts. Corpus chrF comes from summed statistics.",
        reference: "sacrebleu 2.6.0",
        truncated: "",
        corpus: CorpusAggregation::SummedStatistics,
        model: None,
        card: Card::OWN,
    };
    const COLUMNS: &'static [About] = &[About::reference_based(
        "chrF",
        "character n-gram F-score (sacrebleu 2.6 defaults: order 6, beta 2)",
        Scale::PERCENT,
    )];
}

impl LexicalModule for ChrfMetric {
    fn metric(_: &ChrfOptions) -> Box<dyn Metric> {
        Box::new(Chrf::default())
    }
}

/// The column chrF fills.
const ID: MetricId = MetricId::Chrf;

/// Character n-gram order (sacrebleu `CHRF.CHAR_ORDER`).
pub const CHAR_ORDER: usize = 6;
/// Recall weight (sacrebleu `CHRF.BETA`, from Popović 2016, WMT16 metrics task).
pub const BETA: f64 = 2.0;

/// chrF with its options.
#[derive(Debug, Clone)]
pub struct Chrf {
    /// Lowercase before extracting n-grams (default false).
    pub lowercase: bool,
    /// Recall weight (default [`BETA`]).
    pub beta: f64,
}

impl Default for Chrf {
    fn default() -> Self {
        Self {
            lowercase: false,
            beta: BETA,
        }
    }
}

/// Per-order `[hyp n-grams, ref n-grams, matches]`.
pub type ChrfStats = [[usize; 3]; CHAR_ORDER];

/// Removes all whitespace (sacrebleu's `''.join(line.split())`).
fn strip_whitespace(text: &str) -> String {
    python_split(text).collect()
}

/// Character n-gram counts per order. An n-gram is keyed by its code
/// points, 21 bits each, packed into one integer (six fit in 128 bits):
/// cheaper to hash and compare than the string slice.
fn char_ngrams(text: &str) -> Vec<HashMap<u128, u32>> {
    const _: () = assert!(CHAR_ORDER * 21 <= 128);
    let chars: Vec<u32> = text.chars().map(u32::from).collect();
    (1..=CHAR_ORDER)
        .map(|n| {
            super::count(
                chars
                    .windows(n)
                    .map(|w| w.iter().fold(0u128, |key, &c| key << 21 | u128::from(c))),
            )
        })
        .collect()
}

impl Chrf {
    fn preprocess(&self, text: &str) -> String {
        strip_whitespace(&if self.lowercase {
            text.to_lowercase()
        } else {
            text.to_string()
        })
    }

    /// sacrebleu's `_compute_f_score` (effective-order averaging).
    pub fn f_score(&self, stats: &ChrfStats) -> f64 {
        let factor = self.beta * self.beta;
        let (mut avg_prec, mut avg_rec, mut effective) = (0.0, 0.0, 0usize);
        for &[n_hyp, n_ref, n_match] in stats {
            if n_hyp > 0 && n_ref > 0 {
                avg_prec += n_match as f64 / n_hyp as f64;
                avg_rec += n_match as f64 / n_ref as f64;
                effective += 1;
            }
        }
        if effective == 0 {
            return 0.0;
        }
        avg_prec /= effective as f64;
        avg_rec /= effective as f64;
        if avg_prec + avg_rec == 0.0 {
            return 0.0;
        }
        let score = (1.0 + factor) * avg_prec * avg_rec / (factor * avg_prec + avg_rec);
        100.0 * score
    }

    /// Statistics of one hypothesis against its best-matching reference.
    pub fn segment_stats(&self, hyp: &str, refs: &[&str]) -> ChrfStats {
        let hyp = self.preprocess(hyp);
        let hyp_grams = char_ngrams(&hyp);
        let mut best: (f64, ChrfStats) = (-1.0, [[0; 3]; CHAR_ORDER]);
        for reference in refs {
            let reference = self.preprocess(reference);
            let ref_grams = char_ngrams(&reference);
            let mut stats = [[0; 3]; CHAR_ORDER];
            for (n, (h, r)) in hyp_grams.iter().zip(&ref_grams).enumerate() {
                let matches: u32 = h
                    .iter()
                    .map(|(g, &c)| c.min(r.get(g).copied().unwrap_or(0)))
                    .sum();
                stats[n] = [
                    h.values().sum::<u32>() as usize,
                    r.values().sum::<u32>() as usize,
                    matches as usize,
                ];
            }
            let f = self.f_score(&stats);
            if f > best.0 {
                best = (f, stats);
            }
        }
        best.1
    }

    fn to_score(&self, stats: &ChrfStats, level: Level, nrefs: Option<usize>) -> Score {
        let (mut prec, mut rec, mut eff) = (0.0, 0.0, 0.0);
        for &[h, r, m] in stats {
            if h > 0 && r > 0 {
                prec += m as f64 / h as f64;
                rec += m as f64 / r as f64;
                eff += 1.0;
            }
        }
        let avg = |x: f64| if eff > 0.0 { 100.0 * x / eff } else { 0.0 };
        Score {
            metric: ID.as_str(),
            value: self.f_score(stats),
            parts: vec![
                ScorePart {
                    name: "char_precision",
                    value: avg(prec),
                },
                ScorePart {
                    name: "char_recall",
                    value: avg(rec),
                },
            ],
            signature: self.signature_for(level, nrefs).to_string(),
        }
    }

    fn signature_for(&self, _level: Level, nrefs: Option<usize>) -> Signature {
        let sig = Signature::new("chrf")
            .with("nrefs", nrefs_value(nrefs))
            .with("case", if self.lowercase { "lc" } else { "mixed" })
            .flag("eff", true)
            .with("nc", CHAR_ORDER)
            .with("nw", 0)
            .flag("space", false)
            .with("ref", "sacrebleu-2.6.0")
            .versioned();
        if self.beta == BETA {
            sig
        } else {
            sig.with("beta", self.beta)
        }
    }
}

impl Metric for Chrf {
    fn info(&self) -> &'static MetricInfo {
        ID.info()
    }

    fn signature(&self, level: Level, nrefs: Option<usize>) -> Signature {
        self.signature_for(level, nrefs)
    }

    fn sentence_score(&self, segment: &Segment) -> Result<Score, MetricError> {
        require_references(ID.as_str(), std::slice::from_ref(segment))?;
        let stats = self.segment_stats(segment.hyp, segment.refs);
        Ok(self.to_score(&stats, Level::Sentence, Some(segment.refs.len())))
    }

    fn corpus_score(&self, segments: &[Segment]) -> Result<Score, MetricError> {
        if segments.is_empty() {
            return Err(MetricError::EmptyCorpus {
                metric: ID.as_str(),
            });
        }
        require_references(ID.as_str(), segments)?;
        let mut sum: ChrfStats = [[0; 3]; CHAR_ORDER];
        for s in segments {
            for (acc, st) in sum.iter_mut().zip(self.segment_stats(s.hyp, s.refs)) {
                for k in 0..3 {
                    acc[k] += st[k];
                }
            }
        }
        Ok(self.to_score(&sum, Level::Corpus, uniform_nrefs(segments)))
    }
}
