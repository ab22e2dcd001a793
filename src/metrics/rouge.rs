//! ROUGE-N and ROUGE-L (Lin, 2004) exactly as Google's rouge-score 0.1.2.
//!
//! Tokens: lowercase, every run of characters outside `[a-z0-9]` becomes a
//! separator, optional NLTK Porter stemming of tokens longer than 3
//! characters. `score(target, prediction)`: precision is over the hypothesis
//! (prediction), recall over the reference (target). With several references
//! the one with the highest F-measure wins (`score_multi`). rouge-score has no
//! corpus statistic: the corpus score here is the mean of segment scores.

use rustc_hash::FxHashMap as HashMap;
use std::sync::LazyLock;

use regex::Regex;

use super::signature::nrefs_value;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::registry::{About, Card, KindAbout, LexicalModule, MetricModule};
use super::{
    CorpusAggregation, Level, Metric, MetricError, MetricId, MetricInfo, Scale, Score, ScorePart,
    Segment, Signature, require_references, uniform_nrefs,
};
use crate::text::{porter, sequences};

/// ROUGE's options (one struct for ROUGE-1, ROUGE-2 and ROUGE-L).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct RougeOptions {
    /// # Porter stemmer
    ///
    /// Stem tokens longer than 3 characters with NLTK's Porter stemmer before
    /// matching (rouge-score `use_stemmer`). Default: off.
    pub stemmer: bool,
}

/// The schema of the stemmer option every ROUGE kind has: what the page's
/// one stemmer switch (and a suite's `rouge_stemmer`) sets.
pub fn stemmer_schema() -> serde_json::Value {
    super::registry::options_schema::<Rouge1Metric>()["properties"]["stemmer"].clone()
}

/// What every ROUGE kind shares.
const fn rouge_kind(name: &'static str) -> KindAbout {
    KindAbout {
        name,
        about: "Overlap F-measure of lowercased [a-z0-9] tokens (optionally Porter-stemmed), \
                as rouge-score computes it: precision over the hypothesis, recall over the \
                reference; with several references the best F counts. rouge-score has no \
                corpus statistic: the corpus score is the mean of segment scores.",
        reference: "rouge-score 0.1.2",
        truncated: "",
        corpus: CorpusAggregation::MeanOfSegments,
        model: None,
        card: Card::OWN,
    }
}

macro_rules! rouge_metric {
    ($marker:ident, $kind:expr, $name:literal, $description:literal) => {
        #[doc = concat!($name, "'s registry entry: its options and description.")]
        pub struct $marker;

        impl MetricModule for $marker {
            type Options = RougeOptions;
            const KIND: KindAbout = rouge_kind($name);
            const COLUMNS: &'static [About] =
                &[About::reference_based($name, $description, Scale::UNIT)];
        }

        impl LexicalModule for $marker {
            fn metric(options: &RougeOptions) -> Box<dyn Metric> {
                Box::new(Rouge::new($kind, options.stemmer))
            }
        }
    };
}

rouge_metric!(
    Rouge1Metric,
    RougeKind::N(1),
    "ROUGE-1",
    "unigram overlap F-measure (rouge-score 0.1.2)"
);
rouge_metric!(
    Rouge2Metric,
    RougeKind::N(2),
    "ROUGE-2",
    "bigram overlap F-measure (rouge-score 0.1.2)"
);
rouge_metric!(
    RougeLMetric,
    RougeKind::Lcs,
    "ROUGE-L",
    "longest-common-subsequence F-measure (rouge-score 0.1.2)"
);

/// Which ROUGE variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RougeKind {
    /// n-gram overlap of order n.
    N(usize),
    /// Longest common subsequence (sentence-level ROUGE-L, not `rougeLsum`).
    Lcs,
}

/// ROUGE with its options.
#[derive(Debug, Clone)]
pub struct Rouge {
    kind: RougeKind,
    stemmer: bool,
}

/// Precision, recall and F-measure, as rouge-score's `Score` tuple.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Prf {
    /// Share of hypothesis units matched.
    pub precision: f64,
    /// Share of reference units matched.
    pub recall: f64,
    /// Harmonic mean of the two.
    pub fmeasure: f64,
}

impl Prf {
    fn new(precision: f64, recall: f64) -> Self {
        let fmeasure = if precision + recall > 0.0 {
            2.0 * precision * recall / (precision + recall)
        } else {
            0.0
        };
        Self {
            precision,
            recall,
            fmeasure,
        }
    }
}

static NON_ALPHANUM: LazyLock<Regex> =
    LazyLock::new(|| Regex::new("[^a-z0-9]+").expect("valid pattern"));

/// rouge-score's `tokenize.tokenize`.
pub fn tokenize(text: &str, stemmer: bool) -> Vec<String> {
    let lower = text.to_lowercase();
    NON_ALPHANUM
        .replace_all(&lower, " ")
        .split(' ')
        .filter(|t| !t.is_empty())
        .map(|t| {
            if stemmer && t.len() > 3 {
                porter::stem(t)
            } else {
                t.to_string()
            }
        })
        .collect()
}

fn ngram_counts(tokens: &[String], n: usize) -> HashMap<&[String], u32> {
    super::count(tokens.windows(n))
}

impl Rouge {
    /// A ROUGE variant, with or without the Porter stemmer.
    pub fn new(kind: RougeKind, stemmer: bool) -> Self {
        Self { kind, stemmer }
    }

    fn info_ref(&self) -> &'static MetricInfo {
        match self.kind {
            RougeKind::N(1) => MetricId::Rouge1.info(),
            RougeKind::N(_) => MetricId::Rouge2.info(),
            RougeKind::Lcs => MetricId::RougeL.info(),
        }
    }

    /// rouge-score's `score(target, prediction)` for one reference.
    pub fn score_pair(&self, target: &str, prediction: &str) -> Prf {
        let t = tokenize(target, self.stemmer);
        let p = tokenize(prediction, self.stemmer);
        match self.kind {
            RougeKind::Lcs => {
                if t.is_empty() || p.is_empty() {
                    return Prf::default();
                }
                let lcs = sequences::lcs_length(
                    t.iter().map(String::as_str),
                    p.iter().map(String::as_str),
                ) as f64;
                Prf::new(lcs / p.len() as f64, lcs / t.len() as f64)
            }
            RougeKind::N(n) => {
                let tc = ngram_counts(&t, n);
                let pc = ngram_counts(&p, n);
                let overlap: u32 = tc
                    .iter()
                    .map(|(g, &c)| c.min(pc.get(g).copied().unwrap_or(0)))
                    .sum();
                let t_total: u32 = tc.values().sum();
                let p_total: u32 = pc.values().sum();
                Prf::new(
                    overlap as f64 / p_total.max(1) as f64,
                    overlap as f64 / t_total.max(1) as f64,
                )
            }
        }
    }

    /// rouge-score's `score_multi`: the reference with the highest F-measure
    /// (the first one on ties, as `np.argmax`).
    pub fn score_multi(&self, targets: &[&str], prediction: &str) -> Prf {
        let mut best: Option<Prf> = None;
        for t in targets {
            let s = self.score_pair(t, prediction);
            if best.is_none_or(|b| s.fmeasure > b.fmeasure) {
                best = Some(s);
            }
        }
        best.unwrap_or_default()
    }

    fn signature_for(&self, level: Level, nrefs: Option<usize>) -> Signature {
        Signature::new(self.info_ref().id)
            .with("nrefs", nrefs_value(nrefs))
            .with("multi", "max-f")
            .with("stem", if self.stemmer { "porter" } else { "no" })
            .with(
                "agg",
                if level == Level::Corpus {
                    "mean"
                } else {
                    "none"
                },
            )
            .with("ref", "rouge-score-0.1.2")
            .versioned()
    }

    fn to_score(&self, prf: Prf, level: Level, nrefs: Option<usize>) -> Score {
        Score {
            metric: self.info_ref().id,
            value: prf.fmeasure,
            parts: vec![
                ScorePart {
                    name: "precision",
                    value: prf.precision,
                },
                ScorePart {
                    name: "recall",
                    value: prf.recall,
                },
                ScorePart {
                    name: "fmeasure",
                    value: prf.fmeasure,
                },
            ],
            signature: self.signature_for(level, nrefs).to_string(),
        }
    }
}

impl Metric for Rouge {
    fn info(&self) -> &'static MetricInfo {
        self.info_ref()
    }

    fn signature(&self, level: Level, nrefs: Option<usize>) -> Signature {
        self.signature_for(level, nrefs)
    }

    fn sentence_score(&self, segment: &Segment) -> Result<Score, MetricError> {
        require_references(self.info_ref().id, std::slice::from_ref(segment))?;
        let prf = self.score_multi(segment.refs, segment.hyp);
        Ok(self.to_score(prf, Level::Sentence, Some(segment.refs.len())))
    }

    fn corpus_score(&self, segments: &[Segment]) -> Result<Score, MetricError> {
        if segments.is_empty() {
            return Err(MetricError::EmptyCorpus {
                metric: self.info_ref().id,
            });
        }
        require_references(self.info_ref().id, segments)?;
        let mut sum = Prf::default();
        for s in segments {
            let prf = self.score_multi(s.refs, s.hyp);
            sum.precision += prf.precision;
            sum.recall += prf.recall;
            sum.fmeasure += prf.fmeasure;
        }
        let n = segments.len() as f64;
        let mean = Prf {
            precision: sum.precision / n,
            recall: sum.recall / n,
            fmeasure: sum.fmeasure / n,
        };
        Ok(self.to_score(mean, Level::Corpus, uniform_nrefs(segments)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokenizer_drops_non_alphanumerics_and_stems_long_tokens() {
        assert_eq!(
            tokenize("The Cats' running-dogs, 3.5!", false),
            ["the", "cats", "running", "dogs", "3", "5"]
        );
        assert_eq!(
            tokenize("The Cats' running-dogs", true),
            ["the", "cat", "run", "dog"]
        );
        assert_eq!(tokenize("Ünïcode café", false), ["n", "code", "caf"]);
    }

    #[test]
    fn corpus_signature_marks_a_varying_reference_count() {
        let rouge = Rouge::new(RougeKind::Lcs, false);
        let segs = [
            Segment {
                hyp: "a b",
                refs: &["a b"],
                src: None,
            },
            Segment {
                hyp: "c d",
                refs: &["c d", "c"],
                src: None,
            },
        ];
        assert!(
            rouge
                .corpus_score(&segs)
                .unwrap()
                .signature
                .starts_with("rougeL|nrefs:var|")
        );
    }

    #[test]
    fn lcs_example_from_rouge_paper() {
        let r = Rouge::new(RougeKind::Lcs, false)
            .score_pair("police killed the gunman", "police kill the gunman");
        assert!((r.recall - 0.75).abs() < 1e-12 && (r.precision - 0.75).abs() < 1e-12);
    }
}
