//! TER, the translation edit rate (Snover et al. 2006), exactly as sacrebleu
//! 2.6 computes it (`sacrebleu.metrics.TER`, a reimplementation of Tercom).
//!
//! The number of edits that turn the hypothesis into the reference
//! (insertions, deletions and substitutions of words, and shifts of word
//! sequences), divided by the reference's length, times 100: lower is better,
//! and a hypothesis far longer than its reference scores above 100.
//!
//! sacrebleu's conventions, reproduced step by step:
//! - Text: trailing whitespace stripped, lowercased unless case-sensitive,
//!   then Tercom's tokenizer when `normalized` (punctuation split off, XML
//!   entities unescaped; CJK characters split too with `asian_support`), and
//!   punctuation removed with `no_punct`; words are whitespace-separated.
//! - Shifts: greedily, the shift that lowers the beam edit distance most
//!   (ties: the longer, then the earlier, then the earlier target), until none
//!   lowers it or 1,000 candidate shifts were tried (sacrebleu's own limit);
//!   a shift moves at most 10 words, between positions at most 50 apart.
//! - The edit distance is computed in a beam of 25 cells around the
//!   length-scaled diagonal, as sacrebleu's `BeamEditDistance` (an
//!   approximation of Levenshtein on extreme length ratios, reproduced, not
//!   corrected). Rows are kept only within the beam, so memory grows with the
//!   hypothesis's length, not with the product of the two.
//! - Several references: the fewest edits to any reference, divided by the
//!   references' mean length. An empty reference: 100 for any non-empty
//!   hypothesis, 0 for an empty one.
//! - Corpus TER: summed edits over summed (mean) reference lengths.

use std::sync::LazyLock;

use regex::Regex;
use rustc_hash::FxHashMap as HashMap;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::registry::{About, Card, KindAbout, LexicalModule, MetricModule};
use super::signature::nrefs_value;
use super::{
    CorpusAggregation, Level, Metric, MetricError, MetricId, MetricInfo, Scale, Score, ScorePart,
    Segment, Signature, require_references, uniform_nrefs,
};
use crate::text::{python_rstrip, python_split};

/// The column TER fills.
const ID: MetricId = MetricId::Ter;

/// The longest word sequence a shift moves (sacrebleu `_MAX_SHIFT_SIZE`, Tercom's).
pub const MAX_SHIFT_SIZE: usize = 10;
/// The farthest a shift moves a sequence (sacrebleu `_MAX_SHIFT_DIST`).
pub const MAX_SHIFT_DIST: usize = 50;
/// Cells computed around the diagonal per row (sacrebleu `_BEAM_WIDTH`).
pub const BEAM_WIDTH: usize = 25;
/// Candidate shifts tried per segment at most (sacrebleu `_MAX_SHIFT_CANDIDATES`).
pub const MAX_SHIFT_CANDIDATES: usize = 1000;

/// TER's scale: edits per 100 reference words, unbounded above, lower better.
pub const EDIT_RATE: Scale = Scale {
    id: "edit-rate",
    label: "0–100+, lower is better",
    digits: 2,
};

/// sacrebleu's `_INT_INFINITY`: the cost of a cell the beam never reached.
const INFINITY: i64 = 10_000_000_000_000_000;

/// TER's options: sacrebleu `TER()`'s arguments, defaults included.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct TerOptions {
    /// # Tercom normalisation
    ///
    /// Tokenize as Tercom's normalizer does: punctuation split off (a period
    /// or comma only away from digits), possessive 's split, XML entities
    /// unescaped, line breaks joined (sacrebleu `normalized`). Default: off.
    pub normalized: bool,
    /// # remove punctuation
    ///
    /// Remove . , ? : ; ! " ( ) before counting edits (sacrebleu
    /// `no_punct`); with Asian support, CJK and full-width punctuation too.
    /// Default: off.
    pub no_punct: bool,
    /// # Asian support
    ///
    /// With normalisation, split CJK characters into words; with punctuation
    /// removal, remove CJK and full-width punctuation too (sacrebleu
    /// `asian_support`). Alone it changes nothing. Default: off.
    pub asian_support: bool,
    /// # case-sensitive
    ///
    /// Count a change of case as an edit (sacrebleu `case_sensitive`).
    /// Default: off (both texts are lowercased).
    pub case_sensitive: bool,
}

/// TER's registry entry: its options and description.
pub struct TerMetric;

impl MetricModule for TerMetric {
    type Options = TerOptions;
    const KIND: KindAbout = KindAbout {
        name: "TER",
        about: "The edits (word insertions, deletions, substitutions and shifts of word \
                sequences) that turn the hypothesis into the reference, per 100 \
                reference words, as sacrebleu computes it (Tercom's shift search, a \
                beam edit distance). Lower is better: 0 is the reference itself, and a \
                hypothesis much longer than its reference scores above 100. Corpus TER \
                comes from summed edits and lengths.",
        reference: "sacrebleu 2.6.0",
        truncated: "",
        corpus: CorpusAggregation::SummedStatistics,
        model: None,
        card: Card::OWN,
    };
    const COLUMNS: &'static [About] = &[About {
        higher_is_better: false,
        ..About::reference_based(
            "TER",
            "translation edit rate: word edits and shifts per 100 reference words (sacrebleu 2.6 defaults); lower is better",
            EDIT_RATE,
        )
    }];
}

impl LexicalModule for TerMetric {
    fn metric(options: &TerOptions) -> Box<dyn Metric> {
        Box::new(Ter {
            options: options.clone(),
        })
    }
}

/// TER with its options.
#[derive(Debug, Clone, Default)]
pub struct Ter {
    /// sacrebleu's `TER()` arguments.
    pub options: TerOptions,
}

/// Sufficient statistics: the fewest edits and the mean reference length
/// (sacrebleu's `[best_num_edits, avg_ref_len]`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TerStats {
    /// Edits to the closest reference.
    pub edits: f64,
    /// The references' mean length in words.
    pub ref_len: f64,
}

impl std::ops::AddAssign for TerStats {
    fn add_assign(&mut self, o: Self) {
        self.edits += o.edits;
        self.ref_len += o.ref_len;
    }
}

impl TerStats {
    /// TER on 0-100 (and beyond): sacrebleu's `_compute_score_from_stats`.
    pub fn score(self) -> f64 {
        let rate = if self.ref_len > 0.0 {
            self.edits / self.ref_len
        } else if self.edits > 0.0 {
            1.0
        } else {
            0.0
        };
        100.0 * rate
    }
}

impl Ter {
    /// A text as TER reads it: sacrebleu's `_preprocess_segment`
    /// (`tokenizer(sent.rstrip())`).
    pub fn preprocess(&self, text: &str) -> String {
        tercom(python_rstrip(text), &self.options)
    }

    /// The statistics of one hypothesis against its references.
    pub fn segment_stats(&self, hyp: &str, refs: &[&str]) -> TerStats {
        let mut vocab: HashMap<String, u32> = HashMap::default();
        let mut words = |text: &str| -> Vec<u32> {
            python_split(&self.preprocess(text))
                .map(|w| {
                    let next = vocab.len() as u32;
                    *vocab.entry(w.to_owned()).or_insert(next)
                })
                .collect()
        };
        let hyp = words(hyp);
        let refs: Vec<Vec<u32>> = refs.iter().map(|r| words(r)).collect();
        let mut best = i64::MAX;
        let mut lengths = 0usize;
        for reference in &refs {
            let (edits, len) = edit_rate(&hyp, reference);
            lengths += len;
            best = best.min(edits);
        }
        TerStats {
            edits: best as f64,
            ref_len: lengths as f64 / refs.len().max(1) as f64,
        }
    }

    fn to_score(&self, stats: TerStats, level: Level, nrefs: Option<usize>) -> Score {
        Score {
            metric: ID.as_str(),
            value: stats.score(),
            parts: vec![
                ScorePart {
                    name: "edits",
                    value: stats.edits,
                },
                ScorePart {
                    name: "ref_len",
                    value: stats.ref_len,
                },
            ],
            signature: self.signature_for(level, nrefs).to_string(),
        }
    }

    fn signature_for(&self, _: Level, nrefs: Option<usize>) -> Signature {
        let o = &self.options;
        Signature::new("ter")
            .with("nrefs", nrefs_value(nrefs))
            .with("case", if o.case_sensitive { "mixed" } else { "lc" })
            .with("tok", "tercom")
            .flag("norm", o.normalized)
            .flag("punct", !o.no_punct)
            .flag("asian", o.asian_support)
            .with("ref", "sacrebleu-2.6.0")
            .versioned()
    }
}

impl Metric for Ter {
    fn info(&self) -> &'static MetricInfo {
        ID.info()
    }

    fn signature(&self, level: Level, nrefs: Option<usize>) -> Signature {
        self.signature_for(level, nrefs)
    }

    fn sentence_score(&self, segment: &Segment) -> Result<Score, MetricError> {
        require_references(ID.as_str(), std::slice::from_ref(segment))?;
        let stats = self.segment_stats(segment.hyp, segment.refs);
        Ok(self.to_score(stats, Level::Sentence, Some(segment.refs.len())))
    }

    fn corpus_score(&self, segments: &[Segment]) -> Result<Score, MetricError> {
        if segments.is_empty() {
            return Err(MetricError::EmptyCorpus {
                metric: ID.as_str(),
            });
        }
        require_references(ID.as_str(), segments)?;
        let mut total = TerStats::default();
        for s in segments {
            total += self.segment_stats(s.hyp, s.refs);
        }
        Ok(self.to_score(total, Level::Corpus, uniform_nrefs(segments)))
    }
}

// --- Tercom's tokenizer (sacrebleu `tokenizers/tokenizer_ter.py`) -----------

fn regex(pattern: &str) -> Regex {
    Regex::new(pattern).expect("a valid pattern")
}

/// The general and Western part of Tercom's normalizer, in its order.
static WESTERN: LazyLock<[(Regex, &str); 6]> = LazyLock::new(|| {
    [
        // Punctuation and symbols: `{-~`, `[-\``, ` -&`, `(-+`, `:-@`, `/`.
        (regex(r"([\{-~\[-` -&\(-\+:-@/])"), " $1 "),
        // Possessives.
        (regex(r"'s "), " 's "),
        (regex(r"'s$"), " 's"),
        // A period or comma not preceded by a digit...
        (regex(r"([^0-9])([\.,])"), "$1 $2 "),
        // ...or not followed by one.
        (regex(r"([\.,])([^0-9])"), " $1 $2"),
        // A dash after a digit.
        (regex(r"([0-9])(-)"), "$1 $2 "),
    ]
});

/// CJK punctuation (sacrebleu `TercomTokenizer.ASIAN_PUNCT`).
const ASIAN_PUNCT: &str =
    r"([\x{3001}\x{3002}\x{3008}-\x{3011}\x{3014}-\x{301f}\x{ff61}-\x{ff65}\x{30fb}])";
/// Full-width punctuation (`TercomTokenizer.FULL_WIDTH_PUNCT`).
const FULL_WIDTH_PUNCT: &str =
    r"([\x{ff0e}\x{ff0c}\x{ff1f}\x{ff1a}\x{ff1b}\x{ff01}\x{ff02}\x{ff08}\x{ff09}])";

/// The Asian part of the normalizer: CJK characters and punctuation become
/// words of their own. sacrebleu's three kana rules are left out: they are
/// anchored at the start of the text (`^`, no multiline), and the Western
/// part, which always runs first, starts the text with a space, so they
/// never match (a test keeps that true).
static ASIAN: LazyLock<[Regex; 6]> = LazyLock::new(|| {
    [
        // CJK Unified Ideographs and Extension A.
        regex(r"([\x{4e00}-\x{9fff}\x{3400}-\x{4dbf}])"),
        // CJK Strokes, CJK Radicals Supplement.
        regex(r"([\x{31c0}-\x{31ef}\x{2e80}-\x{2eff}])"),
        // CJK Compatibility, Compatibility Ideographs, Compatibility Forms.
        regex(r"([\x{3300}-\x{33ff}\x{f900}-\x{faff}\x{fe30}-\x{fe4f}])"),
        // Enclosed CJK Letters and Months (sacrebleu's range runs to U+3F22).
        regex(r"([\x{3200}-\x{3f22}])"),
        regex(ASIAN_PUNCT),
        regex(FULL_WIDTH_PUNCT),
    ]
});

static PUNCT: LazyLock<Regex> = LazyLock::new(|| regex(r#"[\.,\?:;!"\(\)]"#));
static ASIAN_PUNCTS: LazyLock<[Regex; 2]> =
    LazyLock::new(|| [regex(ASIAN_PUNCT), regex(FULL_WIDTH_PUNCT)]);

/// sacrebleu's `TercomTokenizer.__call__`: the text with words separated by
/// single spaces.
fn tercom(text: &str, options: &TerOptions) -> String {
    if text.is_empty() {
        return String::new();
    }
    let mut s = if options.case_sensitive {
        text.to_owned()
    } else {
        text.to_lowercase()
    };
    if options.normalized {
        s = s
            .replace("\n-", "")
            .replace('\n', " ")
            .replace("&quot;", "\"")
            .replace("&amp;", "&")
            .replace("&lt;", "<")
            .replace("&gt;", ">");
        s = format!(" {s} ");
        for (pattern, with) in WESTERN.iter() {
            s = pattern.replace_all(&s, *with).into_owned();
        }
        if options.asian_support {
            for pattern in ASIAN.iter() {
                s = pattern.replace_all(&s, " $1 ").into_owned();
            }
        }
    }
    if options.no_punct {
        s = PUNCT.replace_all(&s, "").into_owned();
        if options.asian_support {
            for pattern in ASIAN_PUNCTS.iter() {
                s = pattern.replace_all(&s, "").into_owned();
            }
        }
    }
    python_split(&s).collect::<Vec<_>>().join(" ")
}

// --- Shifts and the beam edit distance (sacrebleu `metrics/lib_ter.py`) ----

/// An edit operation of the trace (sacrebleu's `_OP_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    /// No change.
    Nop,
    /// Substitution.
    Sub,
    /// Insertion of a reference word.
    Ins,
    /// Deletion of a hypothesis word.
    Del,
    /// A cell the beam never reached.
    Undefined,
}

/// One row of the edit-distance matrix within the beam: the cells from
/// column `start`; every other cell is unreached (cost [`INFINITY`]).
#[derive(Debug, Clone, Default)]
struct Row {
    start: usize,
    cells: Vec<(i64, Op)>,
}

impl Row {
    fn get(&self, j: usize) -> (i64, Op) {
        j.checked_sub(self.start)
            .and_then(|k| self.cells.get(k).copied())
            .unwrap_or((INFINITY, Op::Undefined))
    }
}

/// The edit distance of hypotheses against one reference, as sacrebleu's
/// `BeamEditDistance` computes it (its row cache only saves time, so here the
/// rows of the current hypothesis are kept and a shifted copy reuses those
/// of their common prefix).
struct BeamEditDistance<'a> {
    reference: &'a [u32],
}

impl BeamEditDistance<'_> {
    /// Row 0: one insertion per reference word.
    fn first_row(&self) -> Row {
        Row {
            start: 0,
            cells: (0..=self.reference.len())
                .map(|j| (j as i64, Op::Ins))
                .collect(),
        }
    }

    /// The beam's bounds for row `i` of a hypothesis of `n` words.
    fn bounds(&self, i: usize, n: usize) -> (usize, usize) {
        let m = self.reference.len();
        let ratio = if n > 0 { m as f64 / n as f64 } else { 1.0 };
        // In very uneven pairs the beam widens so that rows still overlap.
        let beam = if (BEAM_WIDTH as f64) < ratio / 2.0 {
            (ratio / 2.0 + BEAM_WIDTH as f64).ceil() as i64
        } else {
            BEAM_WIDTH as i64
        };
        let diagonal = (i as f64 * ratio).floor() as i64;
        let low = (diagonal - beam).max(0) as usize;
        let high = if i == n {
            m + 1
        } else {
            (diagonal + beam).clamp(0, m as i64 + 1) as usize
        };
        (low, high.max(low))
    }

    /// Row `i` (1-based, for the hypothesis word `word`) from row `i - 1`.
    fn next_row(&self, above: &Row, word: u32, i: usize, n: usize) -> Row {
        let (low, high) = self.bounds(i, n);
        let mut cells: Vec<(i64, Op)> = Vec::with_capacity(high - low);
        for j in low..high {
            let cell = if j == 0 {
                (above.get(0).0 + 1, Op::Del)
            } else {
                let (sub_cost, sub_op) = if word == self.reference[j - 1] {
                    (0, Op::Nop)
                } else {
                    (1, Op::Sub)
                };
                let left = if j > low {
                    cells[j - 1 - low].0
                } else {
                    INFINITY
                };
                // Tercom prefers no-op/substitution, then deletion, then
                // insertion (sacrebleu's order for its flipped trace).
                let mut best = (INFINITY, Op::Undefined);
                for (cost, op) in [
                    (above.get(j - 1).0 + sub_cost, sub_op),
                    (above.get(j).0 + 1, Op::Del),
                    (left + 1, Op::Ins),
                ] {
                    if best.0 > cost {
                        best = (cost, op);
                    }
                }
                best
            };
            cells.push(cell);
        }
        Row { start: low, cells }
    }

    /// Every row for `hyp`, row 0 first.
    fn rows(&self, hyp: &[u32]) -> Vec<Row> {
        let mut rows = Vec::with_capacity(hyp.len() + 1);
        rows.push(self.first_row());
        for (i, &word) in hyp.iter().enumerate() {
            let row = self.next_row(&rows[i], word, i + 1, hyp.len());
            rows.push(row);
        }
        rows
    }

    /// The distance of `hyp`, whose first `prefix` words are those whose
    /// rows `known` holds (`known[..=prefix]`).
    fn distance_from(&self, known: &[Row], prefix: usize, hyp: &[u32]) -> i64 {
        let mut row = known[prefix].clone();
        for (i, &word) in hyp.iter().enumerate().skip(prefix) {
            row = self.next_row(&row, word, i + 1, hyp.len());
        }
        row.get(self.reference.len()).0
    }

    /// The trace of operations behind the last cell of `rows`, first first;
    /// `None` where it would step into a cell the beam never reached (where
    /// sacrebleu raises).
    fn trace(&self, rows: &[Row]) -> Option<Vec<Op>> {
        let (mut i, mut j) = (rows.len() - 1, self.reference.len());
        let mut ops = Vec::with_capacity(i + j);
        while i > 0 || j > 0 {
            let op = rows[i].get(j).1;
            ops.push(op);
            match op {
                Op::Sub | Op::Nop => {
                    i = i.checked_sub(1)?;
                    j = j.checked_sub(1)?;
                }
                Op::Ins => j = j.checked_sub(1)?,
                Op::Del => i = i.checked_sub(1)?,
                Op::Undefined => return None,
            }
        }
        ops.reverse();
        Some(ops)
    }
}

/// The alignment of a trace of rewriting the reference into the hypothesis
/// (sacrebleu's `trace_to_alignment` of the flipped trace): each reference
/// position's hypothesis position (-1 before the first), and which
/// positions of each side are errors.
struct Alignment {
    align: Vec<i64>,
    ref_err: Vec<u8>,
    hyp_err: Vec<u8>,
}

fn alignment(trace: &[Op]) -> Alignment {
    let (mut pos_hyp, mut pos_ref) = (-1i64, -1i64);
    let mut a = Alignment {
        align: Vec::new(),
        ref_err: Vec::new(),
        hyp_err: Vec::new(),
    };
    let set = |align: &mut Vec<i64>, r: i64, h: i64| {
        let r = r as usize;
        if align.len() <= r {
            align.resize(r + 1, -1);
        }
        align[r] = h;
    };
    for &op in trace {
        // The trace is of the hypothesis into the reference; flipped,
        // insertions and deletions swap.
        match op {
            Op::Nop | Op::Sub => {
                pos_hyp += 1;
                pos_ref += 1;
                set(&mut a.align, pos_ref, pos_hyp);
                let err = u8::from(op == Op::Sub);
                a.hyp_err.push(err);
                a.ref_err.push(err);
            }
            // A deletion of a hypothesis word: flipped, an insertion.
            Op::Del => {
                pos_hyp += 1;
                a.hyp_err.push(1);
            }
            // An insertion of a reference word: flipped, a deletion.
            Op::Ins => {
                pos_ref += 1;
                set(&mut a.align, pos_ref, pos_hyp);
                a.ref_err.push(1);
            }
            Op::Undefined => {}
        }
    }
    a
}

/// Matching word sequences of the two sides, as sacrebleu's
/// `_find_shifted_pairs` yields them: `(hyp start, ref start, length)`,
/// starts at most [`MAX_SHIFT_DIST`] apart, lengths up to
/// [`MAX_SHIFT_SIZE`], in its order.
fn shifted_pairs(h: &[u32], r: &[u32]) -> impl Iterator<Item = (usize, usize, usize)> {
    (0..h.len()).flat_map(move |sh| {
        let first = sh.saturating_sub(MAX_SHIFT_DIST);
        let last = (sh + MAX_SHIFT_DIST + 1).min(r.len());
        (first..last).flat_map(move |sr| {
            let mut length = 0;
            let mut out = Vec::new();
            while length < MAX_SHIFT_SIZE
                && sh + length < h.len()
                && sr + length < r.len()
                && h[sh + length] == r[sr + length]
            {
                length += 1;
                out.push((sh, sr, length));
            }
            out
        })
    })
}

/// Python's `words[a:b]` (indices clamped to the list).
fn slice(words: &[u32], a: usize, b: usize) -> &[u32] {
    let b = b.min(words.len());
    &words[a.min(b)..b]
}

/// sacrebleu's `_perform_shift`: `length` words from `start` moved to `target`.
fn perform_shift(words: &[u32], start: usize, length: usize, target: usize) -> Vec<u32> {
    let n = words.len();
    let parts: [&[u32]; 4] = if target < start {
        [
            slice(words, 0, target),
            slice(words, start, start + length),
            slice(words, target, start),
            slice(words, start + length, n),
        ]
    } else if target > start + length {
        [
            slice(words, 0, start),
            slice(words, start + length, target),
            slice(words, start, start + length),
            slice(words, target, n),
        ]
    } else {
        [
            slice(words, 0, start),
            slice(words, start + length, length + target),
            slice(words, start, start + length),
            slice(words, length + target, n),
        ]
    };
    parts.concat()
}

/// How sacrebleu ranks candidate shifts, the largest first: (gain, length,
/// -start, -target).
type ShiftRank = (i64, usize, i64, i64);

/// The best shift of `hyp` (sacrebleu's `_shift`): how much it lowers the
/// distance (0: no shift found) and the shifted words; `checked` counts the
/// candidates tried.
fn best_shift(
    ed: &BeamEditDistance<'_>,
    hyp: &[u32],
    checked: &mut usize,
) -> Option<(i64, Vec<u32>)> {
    let rows = ed.rows(hyp);
    let before = rows[hyp.len()].get(ed.reference.len()).0;
    let a = alignment(&ed.trace(&rows)?);
    let sum = |v: &[u8], from: usize, len: usize| -> u32 {
        v.iter().skip(from).take(len).map(|&x| u32::from(x)).sum()
    };
    let mut best: Option<(ShiftRank, Vec<u32>)> = None;
    for (sh, sr, length) in shifted_pairs(hyp, ed.reference) {
        if sum(&a.hyp_err, sh, length) == 0 || sum(&a.ref_err, sr, length) == 0 {
            continue;
        }
        let aligned = a.align.get(sr).copied().unwrap_or(-1);
        if sh as i64 <= aligned && aligned < (sh + length) as i64 {
            continue;
        }
        let mut previous: Option<usize> = None;
        for offset in -1..length as i64 {
            let at = sr as i64 + offset;
            let target = if at == -1 {
                0
            } else {
                match a.align.get(at as usize) {
                    Some(&h) => (h + 1) as usize,
                    None => break,
                }
            };
            if previous == Some(target) {
                continue;
            }
            previous = Some(target);
            let shifted = perform_shift(hyp, sh, length, target);
            // The shifted words share their first min(start, target) words
            // with `hyp`, and with them the edit-distance rows.
            let prefix = hyp.iter().zip(&shifted).take_while(|(x, y)| x == y).count();
            let gain = before - ed.distance_from(&rows, prefix, &shifted);
            let key = (gain, length, -(sh as i64), -(target as i64));
            *checked += 1;
            if best.as_ref().is_none_or(|(k, _)| key > *k) {
                best = Some((key, shifted));
            }
        }
        if *checked >= MAX_SHIFT_CANDIDATES {
            break;
        }
    }
    Some(match best {
        Some(((gain, ..), shifted)) => (gain, shifted),
        None => (0, hyp.to_vec()),
    })
}

/// sacrebleu's `translation_edit_rate`: the edits (shifts included) that
/// turn `hyp` into `reference`, and the reference's length.
pub fn edit_rate(hyp: &[u32], reference: &[u32]) -> (i64, usize) {
    if reference.is_empty() {
        return (hyp.len() as i64, 0);
    }
    let ed = BeamEditDistance { reference };
    let mut input = hyp.to_vec();
    let mut shifts = 0i64;
    let mut checked = 0usize;
    // Shift while a shift lowers the distance, within the candidate budget;
    // a trace the beam cannot give ends the search with the shifts found.
    while let Some((gain, shifted)) = best_shift(&ed, &input, &mut checked) {
        if checked >= MAX_SHIFT_CANDIDATES || gain <= 0 {
            break;
        }
        shifts += 1;
        input = shifted;
    }
    let rows = ed.rows(&input);
    (
        shifts + rows[input.len()].get(reference.len()).0,
        reference.len(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ter(hyp: &str, refs: &[&str], options: TerOptions) -> f64 {
        Ter { options }.segment_stats(hyp, refs).score()
    }

    #[test]
    fn identical_texts_score_zero_and_empty_references_score_the_hypothesis() {
        let d = TerOptions::default;
        assert_eq!(ter("the cat sat", &["the cat sat"], d()), 0.0);
        assert_eq!(ter("The Cat sat", &["the cat sat"], d()), 0.0);
        assert_eq!(
            ter(
                "The Cat sat",
                &["the cat sat"],
                TerOptions {
                    case_sensitive: true,
                    ..d()
                }
            ),
            100.0 * (2.0 / 3.0)
        );
        assert_eq!(ter("a b", &[""], d()), 100.0);
        assert_eq!(ter("", &[""], d()), 0.0);
        assert_eq!(ter("", &["a b c"], d()), 100.0);
    }

    #[test]
    fn a_moved_phrase_is_one_shift_not_two_edits() {
        // "on the mat" moved to the front: one shift.
        let s = Ter::default().segment_stats("on the mat the cat sat", &["the cat sat on the mat"]);
        assert_eq!((s.edits, s.ref_len), (1.0, 6.0));
        // The closest of several references counts; lengths are averaged.
        let s = Ter::default().segment_stats("a b c", &["a b c d", "x y"]);
        assert_eq!((s.edits, s.ref_len), (1.0, 3.0));
    }

    #[test]
    fn shifts_follow_sacrebleus_slicing() {
        let w = [0, 1, 2, 3, 4, 5];
        assert_eq!(perform_shift(&w, 3, 2, 1), [0, 3, 4, 1, 2, 5]);
        assert_eq!(perform_shift(&w, 0, 2, 4), [2, 3, 0, 1, 4, 5]);
        // A target inside the moved span: sacrebleu's third case.
        assert_eq!(perform_shift(&w, 1, 2, 2), [0, 3, 1, 2, 4, 5]);
        assert_eq!(perform_shift(&w, 1, 2, 1), w);
    }

    #[test]
    fn the_tokenizer_follows_tercom() {
        let norm = TerOptions {
            normalized: true,
            ..TerOptions::default()
        };
        assert_eq!(
            tercom("It's 3.50, isn't it? (Tom&amp;Jerry)", &norm),
            "it 's 3.50 , isn't it ? ( tom & jerry )"
        );
        let punct = TerOptions {
            no_punct: true,
            ..TerOptions::default()
        };
        assert_eq!(tercom("Yes, (really)!", &punct), "yes really");
        // Kana runs anchored at the start never match after the leading space.
        let asian = TerOptions {
            normalized: true,
            asian_support: true,
            ..TerOptions::default()
        };
        assert_eq!(tercom("ひらがな", &asian), "ひらがな");
        assert_eq!(tercom("漢字。", &asian), "漢 字 。");
    }
}
