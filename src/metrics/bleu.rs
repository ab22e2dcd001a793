//! BLEU (Papineni et al., 2002) exactly as sacrebleu 2.6 computes it.
//!
//! Defaults follow sacrebleu: 13a tokenization, mixed case, max order 4,
//! `exp` smoothing (NIST "method 3", Chen & Cherry 2014). Sentence scores use
//! effective order, as `sacrebleu.sentence_bleu` does; corpus scores do not.
//! Corpus BLEU is computed from the summed segment statistics.

use rustc_hash::FxHashMap as HashMap;

use super::signature::nrefs_value;
use super::tokenizer_13a::tokenize_13a;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::registry::{About, Card, KindAbout, LexicalModule, MetricModule};
use super::{
    CorpusAggregation, Level, Metric, MetricError, MetricId, MetricInfo, Scale, Score, ScorePart,
    Segment, Signature, require_references, uniform_nrefs,
};
use crate::text::python_rstrip;

/// BLEU's registry entry: its options and description.
pub struct BleuMetric;

/// BLEU's options: sacrebleu's defaults (13a tokenization, mixed case, `exp`
/// smoothing, max order 4); none is exposed yet, so a spec is `{"metric":
/// "bleu"}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct BleuOptions {}

impl MetricModule for BleuMetric {
    type Options = BleuOptions;
    const KIND: KindAbout = KindAbout {
        name: "BLEU",
        about: "Modified n-gram precision (n = 1..4, geometric mean) times a brevity \
                penalty, on 13a tokens, as sacrebleu computes it; sentence scores use \
                effective order and exp smoothing. Corpus BLEU comes from summed \
                statistics, not a mean of sentence scores.",
        reference: "sacrebleu 2.6.0",
        truncated: "",
        corpus: CorpusAggregation::SummedStatistics,
        model: None,
        card: Card::OWN,
    };
    const COLUMNS: &'static [About] = &[About::reference_based(
        "BLEU",
        "n-gram precision with brevity penalty (sacrebleu 2.6 defaults: 13a, exp smoothing)",
        Scale::PERCENT,
    )];
}

impl LexicalModule for BleuMetric {
    fn metric(_: &BleuOptions) -> Box<dyn Metric> {
        Box::new(Bleu::default())
    }
}

/// The column BLEU fills.
const ID: MetricId = MetricId::Bleu;

/// Maximum n-gram order (sacrebleu `MAX_NGRAM_ORDER`).
pub const MAX_ORDER: usize = 4;

/// sacrebleu's floor for log(0) (`utils.my_log`).
const LOG_ZERO: f64 = -9_999_999_999.0;

/// How zero n-gram matches are smoothed (sacrebleu `SMOOTH_DEFAULTS`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Smoothing {
    /// No smoothing.
    None,
    /// Floor: replace a zero precision by `value / total` (default 0.1).
    Floor(f64),
    /// Add-k to counts and totals of orders 2 and up (default 1).
    AddK(f64),
    /// NIST geometric sequence: the k-th zero precision becomes 1 / (2^k * total).
    Exp,
}

impl Smoothing {
    fn signature(self) -> String {
        match self {
            Smoothing::None => "none".into(),
            Smoothing::Exp => "exp".into(),
            Smoothing::Floor(v) => format!("floor[{v:.2}]"),
            Smoothing::AddK(v) => format!("add-k[{v:.2}]"),
        }
    }
}

/// BLEU with its options.
#[derive(Debug, Clone)]
pub struct Bleu {
    /// Lowercase before tokenizing (sacrebleu `lowercase`, default false).
    pub lowercase: bool,
    /// Smoothing for zero matches (default `exp`).
    pub smoothing: Smoothing,
}

impl Default for Bleu {
    fn default() -> Self {
        Self {
            lowercase: false,
            smoothing: Smoothing::Exp,
        }
    }
}

/// Sufficient statistics of one or more segments.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct BleuStats {
    /// Hypothesis length in tokens.
    pub sys_len: usize,
    /// Closest reference length in tokens.
    pub ref_len: usize,
    /// Clipped n-gram matches per order.
    pub correct: [usize; MAX_ORDER],
    /// Hypothesis n-grams per order.
    pub total: [usize; MAX_ORDER],
}

impl std::ops::AddAssign for BleuStats {
    fn add_assign(&mut self, o: Self) {
        self.sys_len += o.sys_len;
        self.ref_len += o.ref_len;
        for n in 0..MAX_ORDER {
            self.correct[n] += o.correct[n];
            self.total[n] += o.total[n];
        }
    }
}

/// The BLEU value with its breakdown (sacrebleu's `BLEUScore`).
#[derive(Debug, Clone, PartialEq)]
pub struct BleuValue {
    /// BLEU on 0-100.
    pub score: f64,
    /// n-gram precisions (0-100) after smoothing.
    pub precisions: [f64; MAX_ORDER],
    /// Brevity penalty.
    pub bp: f64,
}

fn ngrams(ids: &[u32]) -> HashMap<[u32; MAX_ORDER], u32> {
    let mut counts = HashMap::default();
    // Room for a sentence's n-grams, as `count` makes for others.
    counts.reserve((MAX_ORDER * ids.len()).min(super::COUNT_ROOM));
    for n in 1..=MAX_ORDER {
        for w in ids.windows(n) {
            let mut key = [NO_TOKEN; MAX_ORDER];
            key[..n].copy_from_slice(w);
            *counts.entry(key).or_insert(0) += 1;
        }
    }
    counts
}

/// The ids of `text`'s tokens (whitespace-separated, as sacrebleu splits),
/// new tokens numbered on.
fn intern<'t>(vocab: &mut HashMap<&'t str, u32>, text: &'t str) -> Vec<u32> {
    crate::text::python_split(text)
        .map(|t| {
            let next = vocab.len() as u32;
            *vocab.entry(t).or_insert(next)
        })
        .collect()
}

/// Fills the places of an n-gram key past its order.
const NO_TOKEN: u32 = u32::MAX;

/// The order of an n-gram key.
fn order(key: &[u32; MAX_ORDER]) -> usize {
    key.iter().take_while(|&&id| id != NO_TOKEN).count()
}

/// sacrebleu's `_get_closest_ref_len`: ties go to the shorter reference.
fn closest_ref_len(hyp_len: usize, ref_lens: &[usize]) -> usize {
    let mut best: Option<(usize, usize)> = None;
    for &len in ref_lens {
        let diff = hyp_len.abs_diff(len);
        best = match best {
            Some((d, l)) if diff > d || (diff == d && len >= l) => Some((d, l)),
            _ => Some((diff, len)),
        };
    }
    best.map_or(0, |(_, l)| l)
}

impl Bleu {
    fn preprocess(&self, text: &str) -> String {
        let text = if self.lowercase {
            text.to_lowercase()
        } else {
            text.to_string()
        };
        tokenize_13a(python_rstrip(&text))
    }

    /// Statistics of one hypothesis against its references.
    pub fn segment_stats(&self, hyp: &str, refs: &[&str]) -> BleuStats {
        let ref_texts: Vec<String> = refs.iter().map(|r| self.preprocess(r)).collect();
        let hyp_text = self.preprocess(hyp);
        // Tokens as ids, so an n-gram is hashed as a few integers rather
        // than as its strings.
        let mut vocab: HashMap<&str, u32> = HashMap::default();
        let ref_ids: Vec<Vec<u32>> = ref_texts.iter().map(|r| intern(&mut vocab, r)).collect();
        let hyp_ids = intern(&mut vocab, &hyp_text);
        let mut ref_max: HashMap<[u32; MAX_ORDER], u32> = HashMap::default();
        for ids in &ref_ids {
            for (gram, c) in ngrams(ids) {
                let slot = ref_max.entry(gram).or_insert(0);
                *slot = (*slot).max(c);
            }
        }
        let ref_lens: Vec<usize> = ref_ids.iter().map(Vec::len).collect();
        let mut stats = BleuStats {
            sys_len: hyp_ids.len(),
            ref_len: closest_ref_len(hyp_ids.len(), &ref_lens),
            ..Default::default()
        };
        for (gram, c) in ngrams(&hyp_ids) {
            let n = order(&gram) - 1;
            stats.total[n] += c as usize;
            stats.correct[n] += c.min(ref_max.get(&gram).copied().unwrap_or(0)) as usize;
        }
        stats
    }

    /// sacrebleu's `compute_bleu` from (summed) statistics.
    pub fn compute(&self, stats: &BleuStats, effective_order: bool) -> BleuValue {
        let (sys_len, ref_len) = (stats.sys_len as f64, stats.ref_len as f64);
        let bp = if stats.sys_len < stats.ref_len {
            if stats.sys_len > 0 {
                (1.0 - ref_len / sys_len).exp()
            } else {
                0.0
            }
        } else {
            1.0
        };
        let mut precisions = [0.0; MAX_ORDER];
        if stats.correct.iter().all(|&c| c == 0) {
            return BleuValue {
                score: 0.0,
                precisions,
                bp,
            };
        }
        let mut correct = stats.correct.map(|c| c as f64);
        let mut total = stats.total.map(|t| t as f64);
        let mut smooth_mteval = 1.0;
        let mut eff_order = MAX_ORDER;
        for n in 0..MAX_ORDER {
            if let Smoothing::AddK(k) = self.smoothing
                && n > 0
            {
                correct[n] += k;
                total[n] += k;
            }
            if total[n] == 0.0 {
                break;
            }
            if effective_order {
                eff_order = n + 1;
            }
            if correct[n] == 0.0 {
                match self.smoothing {
                    Smoothing::Exp => {
                        smooth_mteval *= 2.0;
                        precisions[n] = 100.0 / (smooth_mteval * total[n]);
                    }
                    Smoothing::Floor(v) => precisions[n] = 100.0 * v / total[n],
                    Smoothing::None | Smoothing::AddK(_) => {}
                }
            } else {
                precisions[n] = 100.0 * correct[n] / total[n];
            }
        }
        let log_sum: f64 = precisions[..eff_order]
            .iter()
            .map(|&p| if p == 0.0 { LOG_ZERO } else { p.ln() })
            .sum();
        BleuValue {
            score: bp * (log_sum / eff_order as f64).exp(),
            precisions,
            bp,
        }
    }

    fn to_score(&self, stats: &BleuStats, level: Level, nrefs: Option<usize>) -> Score {
        let v = self.compute(stats, level == Level::Sentence);
        let mut parts: Vec<ScorePart> = ["p1", "p2", "p3", "p4"]
            .into_iter()
            .zip(v.precisions)
            .map(|(name, value)| ScorePart { name, value })
            .collect();
        parts.push(ScorePart {
            name: "bp",
            value: v.bp,
        });
        parts.push(ScorePart {
            name: "sys_len",
            value: stats.sys_len as f64,
        });
        parts.push(ScorePart {
            name: "ref_len",
            value: stats.ref_len as f64,
        });
        Score {
            metric: ID.as_str(),
            value: v.score,
            parts,
            signature: self.signature_for(level, nrefs).to_string(),
        }
    }

    fn signature_for(&self, level: Level, nrefs: Option<usize>) -> Signature {
        Signature::new("bleu")
            .with("nrefs", nrefs_value(nrefs))
            .with("case", if self.lowercase { "lc" } else { "mixed" })
            .flag("eff", level == Level::Sentence)
            .with("tok", "13a")
            .with("smooth", self.smoothing.signature())
            .with("ref", "sacrebleu-2.6.0")
            .versioned()
    }
}

impl Metric for Bleu {
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
        let mut sum = BleuStats::default();
        for s in segments {
            sum += self.segment_stats(s.hyp, s.refs);
        }
        Ok(self.to_score(&sum, Level::Corpus, uniform_nrefs(segments)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sentence(hyp: &str, refs: &[&str]) -> f64 {
        Bleu::default()
            .sentence_score(&Segment {
                hyp,
                refs,
                src: None,
            })
            .unwrap()
            .value
    }

    #[test]
    fn identical_is_100_and_empty_is_0() {
        assert!(
            (sentence("The cat sat on the mat.", &["The cat sat on the mat."]) - 100.0).abs()
                < 1e-9
        );
        assert_eq!(sentence("", &["The cat sat on the mat."]), 0.0);
    }

    #[test]
    fn closest_reference_length_prefers_shorter_on_ties() {
        assert_eq!(closest_ref_len(5, &[7, 3]), 3);
        assert_eq!(closest_ref_len(5, &[3, 7]), 3);
        assert_eq!(closest_ref_len(5, &[6, 9]), 6);
    }

    #[test]
    fn signature_matches_sacrebleu_fields() {
        let sig = Bleu::default()
            .signature(Level::Corpus, Some(2))
            .to_string();
        assert!(sig.starts_with("bleu|nrefs:2|case:mixed|eff:no|tok:13a|smooth:exp|"));
    }
}
