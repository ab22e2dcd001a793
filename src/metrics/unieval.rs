//! UniEval (Zhong et al. 2022) as its released code computes it (github
//! maszhongming/UniEval: `metric/scorer.py`, `metric/evaluator.py`,
//! `utils.py`): a T5 answers a yes/no question about the text, and the
//! score is P(Yes) / (P(Yes) + P(No)) at the decoder's first step.
//!
//! Each dimension asks its own question (`add_question`), with the
//! hypothesis and, where the dimension reads them, the source document or
//! the reference, joined by a literal `</s>` the tokenizer reads as T5's
//! end-of-sequence token:
//!
//! | dimension | reads | scored |
//! |---|---|---|
//! | coherence | hypothesis + source | the whole hypothesis |
//! | consistency | each sentence + source | mean over sentences |
//! | fluency | each sentence | mean over sentences |
//! | relevance | hypothesis + reference | the whole hypothesis |
//!
//! Overall is the mean of the four (`unieval-sum`, the summarization
//! evaluator); the fact evaluator (`unieval-fact`) is consistency alone, on
//! its own checkpoint. Inputs are cut at 1024 tokens keeping the final
//! `</s>`; the decoder reads T5's start token (`<pad>`) once; the ids of
//! "Yes" and "No" are the first of their encodings, as the released code
//! takes them.
//!
//! Where this differs from the released code, and why:
//! - Sentences are split by Blindspot's rules ([`crate::text::sentences`]),
//!   not NLTK's Punkt model (not installable offline here): the two agree on
//!   plain prose; an abbreviation Punkt has not learned, or one it has that
//!   our list lacks, splits differently.
//! - A hypothesis with no sentence (empty, or punctuation alone) is scored as
//!   one sentence, itself; the released code divides by zero there.
//! - Several references: relevance is the mean over them (the released
//!   code reads one).

use std::collections::HashMap;

use burn::tensor::{Int, Tensor, TensorData};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::engine::{Column, Engine, EngineError, model_error, part_of, truncated_part};
use super::registry::{About, Card, KindAbout, MetricModule, ModelModule};
use super::spec::named_enum;
use super::{
    CorpusAggregation, MetricError, MetricId, MetricSpec, ModelKind, ModelSlot, Scale, Score,
    ScorePart, Segment, Signature,
};
use crate::models::{Head, ModelError, PassLimit, Plm, read_back};
use crate::text::sentences::sentences;

/// The implementation whose computation is reproduced.
pub const CONVENTIONS: &str = "maszhongming-unieval";

/// How sentences are found (Punkt in the released code; see the module).
pub const SENTENCES: &str = "blindspot-rules";

/// Padded encoder tokens per pass (the decoder reads one token).
pub const TOKEN_BUDGET: usize = 2048;

/// A UniEval dimension (a column of `unieval`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Dimension {
    /// Is the summary coherent, given the document?
    Coherence,
    /// Is each sentence consistent with the document?
    Consistency,
    /// Is each sentence a fluent paragraph?
    Fluency,
    /// Is the summary relevant to the reference?
    Relevance,
    /// The mean of the four.
    #[default]
    Overall,
}

named_enum!(
    Dimension,
    "UniEval dimension",
    [
        (Coherence, "coherence", "coherence (hypothesis + source)"),
        (
            Consistency,
            "consistency",
            "consistency (each sentence + source)"
        ),
        (Fluency, "fluency", "fluency (each sentence)"),
        (Relevance, "relevance", "relevance (hypothesis + reference)"),
        (Overall, "overall", "overall: the mean of the four")
    ]
);

/// The four questions, in the order the released evaluator asks them.
const ASKED: [Dimension; 4] = [
    Dimension::Coherence,
    Dimension::Consistency,
    Dimension::Fluency,
    Dimension::Relevance,
];

impl Dimension {
    /// The dimensions this column needs scored.
    fn needs(self) -> &'static [Dimension] {
        match self {
            Dimension::Coherence => &ASKED[0..1],
            Dimension::Consistency => &ASKED[1..2],
            Dimension::Fluency => &ASKED[2..3],
            Dimension::Relevance => &ASKED[3..4],
            Dimension::Overall => &ASKED,
        }
    }

    fn part_name(self) -> &'static str {
        match self {
            Dimension::Coherence => "coherence",
            Dimension::Consistency => "consistency",
            Dimension::Fluency => "fluency",
            Dimension::Relevance => "relevance",
            Dimension::Overall => "overall",
        }
    }

    /// Scored per sentence (the mean), not on the whole hypothesis.
    fn per_sentence(self) -> bool {
        matches!(self, Dimension::Consistency | Dimension::Fluency)
    }
}

/// The boolean question of `dim` about `output` (utils.py's `add_question`
/// for the summarization task); none for overall, which asks no question of
/// its own. `context` is the source for coherence and consistency, the
/// reference for relevance.
pub fn question(dim: Dimension, output: &str, context: &str) -> Option<String> {
    Some(match dim {
        Dimension::Fluency => {
            format!("question: Is this a fluent paragraph? </s> paragraph: {output}")
        }
        Dimension::Coherence => format!(
            "question: Is this a coherent summary to the document? </s> summary: {output} \
             </s> document: {context}"
        ),
        Dimension::Consistency => format!(
            "question: Is this claim consistent with the document? </s> claim: {output} \
             </s> document: {context}"
        ),
        Dimension::Relevance => format!(
            "question: Is this summary relevant to the reference? </s> summary: {output} \
             </s> reference: {context}"
        ),
        Dimension::Overall => return None,
    })
}

/// The units a dimension scores in a hypothesis: its sentences, or itself
/// when it has none (or the dimension reads it whole).
pub fn units(dim: Dimension, hyp: &str) -> Vec<&str> {
    let found = if dim.per_sentence() {
        sentences(hyp)
    } else {
        vec![]
    };
    if found.is_empty() { vec![hyp] } else { found }
}

/// One answer: P(Yes) / (P(Yes) + P(No)), and whether the input was cut.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Answer {
    /// The score in [0, 1].
    pub score: f64,
    /// The input was longer than the model's limit and cut.
    pub truncated: bool,
}

/// Asks `plm` each boolean question in `inputs` (identical ones once).
pub async fn answers(plm: &Plm, inputs: &[String]) -> Result<Vec<Answer>, ModelError> {
    if plm.config.head != Head::Seq2SeqLm {
        return Err(ModelError::Unsupported(format!(
            "{} is not an encoder-decoder with a language-model head (config.json names {}); \
             UniEval needs its T5 checkpoint, such as MingZhong/unieval-sum",
            plm.name, plm.config.architecture
        )));
    }
    let start = plm
        .config
        .decoder()
        .map(|d| d.start_token_id)
        .ok_or_else(|| ModelError::Unsupported(format!("{} has no decoder", plm.name)))?;
    let first_id = |word: &str| -> Result<u32, ModelError> {
        let ids = plm.tokenizer.encode_for_model(word)?.ids();
        ids.first().copied().ok_or_else(|| {
            ModelError::Unsupported(format!(
                "{}'s tokenizer gives no token for `{word}`",
                plm.name
            ))
        })
    };
    let (yes, no) = (first_id("Yes")?, first_id("No")?);
    let mut distinct: Vec<&str> = Vec::new();
    let mut index: HashMap<&str, usize> = HashMap::new();
    let slots: Vec<usize> = inputs
        .iter()
        .map(|s| {
            *index.entry(s.as_str()).or_insert_with(|| {
                distinct.push(s);
                distinct.len() - 1
            })
        })
        .collect();
    let mut encoded = Vec::with_capacity(distinct.len());
    for text in &distinct {
        let e = plm.tokenizer.encode_for_model(text)?;
        encoded.push((e.ids(), e.truncated));
    }
    let mut order: Vec<usize> = (0..distinct.len()).collect();
    order.sort_by_key(|&i| encoded[i].0.len());
    let mut scored: Vec<Option<Answer>> = vec![None; distinct.len()];
    let pick = Tensor::<1, Int>::from_data(
        TensorData::new(vec![i64::from(yes), i64::from(no)], [2]),
        &plm.device,
    );
    for chunk in plm.passes(
        &order,
        |&i| encoded[i].0.len(),
        PassLimit::Tokens(TOKEN_BUDGET),
    ) {
        let sources: Vec<Vec<u32>> = chunk.iter().map(|&i| encoded[i].0.clone()).collect();
        let targets = vec![vec![start]; chunk.len()];
        let logits = plm.seq2seq_logits(&sources, &targets)?;
        // The first step's logits (a GPU pass pads the one-token target).
        let [b, _, v] = logits.dims();
        let first = logits.slice([0..b, 0..1, 0..v]);
        let (values, _) = read_back(first.select(2, pick.clone()).reshape([b, 2])).await?;
        for (r, &i) in chunk.iter().enumerate() {
            let (l_yes, l_no) = (f64::from(values[2 * r]), f64::from(values[2 * r + 1]));
            // exp(yes) / (exp(yes) + exp(no)): the softmax's shared
            // denominator cancels.
            scored[i] = Some(Answer {
                score: 1.0 / (1.0 + (l_no - l_yes).exp()),
                truncated: encoded[i].1,
            });
        }
    }
    Ok(slots
        .into_iter()
        .map(|s| scored[s].expect("every input scored"))
        .collect())
}

/// The signature of a UniEval column.
pub fn signature(kind: &'static str, model: &str, dim: Dimension, precision: &str) -> Signature {
    let s = Signature::new(kind).with("model", model);
    let s = if kind == "unieval" {
        s.with("dimension", dim)
    } else {
        s
    };
    let s = if dim == Dimension::Relevance || dim == Dimension::Overall {
        s.with("refs", "mean")
    } else {
        s
    };
    s.with("sentences", SENTENCES)
        .with("conventions", CONVENTIONS)
        .with("precision", precision)
        .versioned()
}

/// UniEval's options (the summarization evaluator).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct UniEvalOptions {
    /// # Model
    ///
    /// The T5 evaluator; unset: the registry's default (MingZhong/unieval-sum).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-page" = false))]
    pub model: Option<String>,
    /// # Dimension
    ///
    /// The question this column reports (the released evaluator's `dims`):
    /// coherence, consistency, fluency, relevance, or overall, their mean.
    /// Default: overall.
    pub dimension: Dimension,
}

/// UniEval-fact's options.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct UniEvalFactOptions {
    /// # Model
    ///
    /// The T5 evaluator; unset: the registry's default (MingZhong/unieval-fact).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-page" = false))]
    pub model: Option<String>,
}

/// UniEval's registry entry (the summarization evaluator).
pub struct UniEvalMetric;

/// UniEval-fact's registry entry.
pub struct UniEvalFactMetric;

const fn column(
    name: &'static str,
    description: &'static str,
    needs_reference: bool,
    needs_source: bool,
    reads: &'static str,
) -> About {
    About {
        name,
        description,
        higher_is_better: true,
        needs_reference,
        needs_source,
        reads,
        scale: Scale::UNIT,
    }
}

impl MetricModule for UniEvalMetric {
    type Options = UniEvalOptions;
    const KIND: KindAbout = KindAbout {
        name: "UniEval",
        about: "A T5 trained to answer yes/no questions about a summary. Each dimension asks \
                its own (\"Is this a coherent summary to the document?\"), and the score is \
                P(Yes) / (P(Yes) + P(No)): 0 to 1, higher is better. Coherence reads the \
                hypothesis and the source; consistency and fluency average the hypothesis's \
                sentences (consistency with the source); relevance reads the reference; \
                overall is the mean of the four. The question travels in the same input as \
                the text, so a text can answer it: the Blind Spots paper's injection test.",
        reference: "maszhongming/UniEval (metric/evaluator.py, SumEvaluator)",
        truncated: "an input was cut to 1024 tokens",
        corpus: CorpusAggregation::MeanOfSegments,
        model: Some(ModelKind::Seq2SeqLm),
        card: Card::OWN,
    };
    const COLUMNS: &'static [About] = &[
        column(
            "UniEval coherence",
            "UniEval coherence: P(Yes) to \"Is this a coherent summary to the document?\"",
            false,
            true,
            "hypothesis + source",
        ),
        column(
            "UniEval consistency",
            "UniEval consistency: P(Yes) to \"Is this claim consistent with the document?\", the mean over the hypothesis's sentences",
            false,
            true,
            "hypothesis + source",
        ),
        column(
            "UniEval fluency",
            "UniEval fluency: P(Yes) to \"Is this a fluent paragraph?\", the mean over the hypothesis's sentences",
            false,
            false,
            "hypothesis",
        ),
        column(
            "UniEval relevance",
            "UniEval relevance: P(Yes) to \"Is this summary relevant to the reference?\"",
            true,
            false,
            "hypothesis + references",
        ),
        column(
            "UniEval overall",
            "UniEval overall: the mean of coherence, consistency, fluency and relevance",
            true,
            true,
            "hypothesis + references + source",
        ),
    ];
    const COLUMN_OPTION: Option<&'static str> = Some("dimension");

    fn column(o: &UniEvalOptions) -> usize {
        o.dimension as usize
    }

    fn with_column(o: UniEvalOptions, column: usize) -> UniEvalOptions {
        UniEvalOptions {
            dimension: Dimension::ALL.get(column).copied().unwrap_or_default(),
            ..o
        }
    }
}

impl MetricModule for UniEvalFactMetric {
    type Options = UniEvalFactOptions;
    const KIND: KindAbout = KindAbout {
        name: "UniEval-fact",
        about: "UniEval's fact-checking evaluator: a T5 asked \"Is this claim consistent with \
                the document?\" of each sentence of the hypothesis, with the source as the \
                document. The score is the mean over sentences of P(Yes) / (P(Yes) + P(No)): \
                0 to 1, higher is better.",
        reference: "maszhongming/UniEval (metric/evaluator.py, FactEvaluator)",
        truncated: "an input was cut to 1024 tokens",
        corpus: CorpusAggregation::MeanOfSegments,
        model: Some(ModelKind::Seq2SeqLm),
        card: Card::OWN,
    };
    const COLUMNS: &'static [About] = &[column(
        "UniEval-fact",
        "UniEval-fact: P(Yes) to \"Is this claim consistent with the document?\", the mean over the hypothesis's sentences",
        false,
        true,
        "hypothesis + source",
    )];
}

impl ModelModule for UniEvalMetric {
    fn model_name(o: &UniEvalOptions) -> Option<&str> {
        o.model.as_deref()
    }

    fn pass_key(o: &UniEvalOptions) -> Option<UniEvalOptions> {
        Some(UniEvalOptions {
            dimension: Dimension::Overall,
            ..o.clone()
        })
    }

    /// Every question the group's dimensions ask is asked once.
    async fn score(
        engine: &Engine,
        group: &[&UniEvalOptions],
        segments: &[Segment<'_>],
        _: Option<&[Segment<'_>]>,
    ) -> Result<Vec<Column>, EngineError> {
        let Some(first) = group.first() else {
            return Ok(vec![]);
        };
        let plm = engine.model(ModelSlot::UniEval, first.model.as_deref())?;
        let dims: Vec<Dimension> = group.iter().map(|o| o.dimension).collect();
        let table = ask(&plm, &dims, segments, |d| {
            MetricSpec::UniEval(UniEvalOptions {
                dimension: d,
                ..(*first).clone()
            })
            .id()
        })
        .await?;
        let precision = plm.precision_label();
        Ok(group
            .iter()
            .map(|o| {
                let spec = MetricSpec::UniEval((*o).clone());
                let sig = signature("unieval", &plm.name, o.dimension, &precision);
                table.column(spec, o.dimension, sig)
            })
            .collect())
    }
}

impl ModelModule for UniEvalFactMetric {
    fn model_name(o: &UniEvalFactOptions) -> Option<&str> {
        o.model.as_deref()
    }

    async fn score(
        engine: &Engine,
        group: &[&UniEvalFactOptions],
        segments: &[Segment<'_>],
        _: Option<&[Segment<'_>]>,
    ) -> Result<Vec<Column>, EngineError> {
        super::registry::each_alone(group, async |o| {
            let plm = engine.model(ModelSlot::UniEvalFact, o.model.as_deref())?;
            let dim = Dimension::Consistency;
            let table = ask(&plm, &[dim], segments, |_| MetricId::UniEvalFact).await?;
            let spec = MetricSpec::UniEvalFact(o.clone());
            let sig = signature("unieval-fact", &plm.name, dim, &plm.precision_label());
            Ok(table.column(spec, dim, sig))
        })
        .await
    }
}

/// Each segment's answers per asked dimension.
struct Table {
    /// `[segment][dimension in ASKED order]`: the value, the units scored
    /// and whether an input was cut; `None` where not asked.
    rows: Vec<[Option<(f64, usize, bool)>; 4]>,
}

impl Table {
    fn column(&self, spec: MetricSpec, dim: Dimension, signature: Signature) -> Column {
        let id = spec.id();
        let scores = self
            .rows
            .iter()
            .map(|row| {
                let asked: Vec<(Dimension, (f64, usize, bool))> = ASKED
                    .iter()
                    .zip(row)
                    .filter(|(d, _)| dim.needs().contains(d))
                    .filter_map(|(&d, v)| v.map(|v| (d, v)))
                    .collect();
                let value = asked.iter().map(|(_, (v, _, _))| v).sum::<f64>() / asked.len() as f64;
                let mut parts: Vec<ScorePart> = asked
                    .iter()
                    .map(|&(d, (v, _, _))| part_of(d.part_name(), v))
                    .collect();
                if let Some(&(_, (_, n, _))) = asked.iter().find(|(d, _)| d.per_sentence()) {
                    parts.push(part_of("sentences", n as f64));
                }
                parts.push(truncated_part(asked.iter().any(|(_, (_, _, t))| *t)));
                Score {
                    metric: id.as_str(),
                    value,
                    parts,
                    signature: signature.to_string(),
                }
            })
            .collect();
        Column::new(spec, scores, signature)
    }
}

/// Asks the questions of `dims` (overall: all four) about every segment.
async fn ask(
    plm: &Plm,
    dims: &[Dimension],
    segments: &[Segment<'_>],
    id_of: impl Fn(Dimension) -> MetricId,
) -> Result<Table, EngineError> {
    let asked: Vec<Dimension> = ASKED
        .into_iter()
        .filter(|d| dims.iter().any(|c| c.needs().contains(d)))
        .collect();
    // Per question: (segment, dimension index, reference or unit).
    let mut inputs: Vec<String> = Vec::new();
    let mut owners: Vec<(usize, usize)> = Vec::new();
    // Units scored per (segment, dimension): its sentences, or itself.
    let mut counts = vec![[0usize; 4]; segments.len()];
    for (i, s) in segments.iter().enumerate() {
        // Split once, for consistency and fluency both.
        let split = units(Dimension::Fluency, s.hyp);
        let whole = [s.hyp];
        for &d in &asked {
            let k = ASKED.iter().position(|&a| a == d).expect("asked");
            let contexts: Vec<&str> = match d {
                Dimension::Relevance => {
                    if s.refs.is_empty() {
                        return Err(MetricError::MissingReference {
                            metric: id_of(dims_column(dims, d)).as_str(),
                            segment: i + 1,
                        }
                        .into());
                    }
                    s.refs.to_vec()
                }
                Dimension::Coherence | Dimension::Consistency => {
                    vec![s.src.ok_or_else(|| EngineError::Input {
                        metric: id_of(dims_column(dims, d)),
                        message: format!(
                            "segment {} has no source: UniEval's {} reads the document \
                             (fill in the source)",
                            i + 1,
                            d.part_name()
                        ),
                    })?]
                }
                _ => vec![""],
            };
            let units: &[&str] = if d.per_sentence() { &split } else { &whole };
            counts[i][k] = units.len();
            for &unit in units {
                // `asked` holds the four questioned dimensions only.
                for q in contexts.iter().filter_map(|c| question(d, unit, c)) {
                    inputs.push(q);
                    owners.push((i, k));
                }
            }
        }
    }
    let answers = answers(plm, &inputs).await.map_err(model_error(plm))?;
    // Sum, count and cut flag per (segment, dimension); relevance's several
    // references average like sentences do.
    let mut acc: Vec<[Option<(f64, usize, bool)>; 4]> = vec![[None; 4]; segments.len()];
    for (&(i, k), a) in owners.iter().zip(&answers) {
        let slot = acc[i][k].get_or_insert((0.0, 0, false));
        slot.0 += a.score;
        slot.1 += 1;
        slot.2 |= a.truncated;
    }
    let rows = acc
        .into_iter()
        .zip(&counts)
        .map(|(row, units)| {
            let mut out = row;
            for (k, v) in out.iter_mut().enumerate() {
                if let Some((sum, n, cut)) = *v {
                    *v = Some((sum / n as f64, units[k], cut));
                }
            }
            out
        })
        .collect();
    Ok(Table { rows })
}

/// The column of `dims` an error about dimension `d` names: `d`'s own when
/// asked for, else overall's.
fn dims_column(dims: &[Dimension], d: Dimension) -> Dimension {
    if dims.contains(&d) {
        d
    } else {
        Dimension::Overall
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn questions_are_the_released_strings() {
        assert_eq!(
            question(Dimension::Fluency, "A b.", "").unwrap(),
            "question: Is this a fluent paragraph? </s> paragraph: A b."
        );
        assert_eq!(
            question(Dimension::Relevance, "S.", "R.").unwrap(),
            "question: Is this summary relevant to the reference? </s> summary: S. </s> \
             reference: R."
        );
        assert_eq!(
            question(Dimension::Consistency, "C.", "D.").unwrap(),
            "question: Is this claim consistent with the document? </s> claim: C. </s> \
             document: D."
        );
        assert_eq!(question(Dimension::Overall, "O.", ""), None);
    }

    #[test]
    fn per_sentence_dimensions_split_and_empty_texts_count_once() {
        assert_eq!(
            units(Dimension::Fluency, "It rained. Then it stopped."),
            ["It rained.", "Then it stopped."]
        );
        assert_eq!(
            units(Dimension::Coherence, "It rained. Then it stopped."),
            ["It rained. Then it stopped."]
        );
        assert_eq!(units(Dimension::Consistency, ""), [""]);
    }

    #[test]
    fn signatures_name_the_dimension_and_the_splitter() {
        let s = signature(
            "unieval",
            "MingZhong/unieval-sum",
            Dimension::Overall,
            "f32",
        );
        let s = s.to_string();
        assert!(
            s.starts_with("unieval|model:MingZhong/unieval-sum|dimension:overall|refs:mean|sentences:blindspot-rules|"),
            "{s}"
        );
        let s = signature("unieval-fact", "m", Dimension::Consistency, "int8").to_string();
        assert!(!s.contains("dimension:") && !s.contains("refs:"), "{s}");
    }
}
