//! MoverScore (Zhao et al. 2019) as AIPHES/emnlp19-moverscore computes it
//! in the PyPI release (`moverscore` 1.0.3), in both of its versions; any
//! encoder runs here.
//!
//! [`Version::V2`], `moverscore_v2.word_mover_score` (its default encoder is
//! distilbert-base-uncased):
//!
//! - each text is `[CLS]` + its tokens (cut at the model's limit) + `[SEP]`,
//!   read at the encoder's last layer;
//! - a token's weight is its idf over the texts of its side (references and
//!   hypotheses each get their own dictionary, `ln((N + 1) / (df + 1))`), or
//!   1 without idf; subword pieces (`##`), single punctuation characters and
//!   stop words weigh 0; the weights of each side are normalised to sum 1;
//! - embeddings are L2-normalised; the cost between two tokens is their
//!   Euclidean distance;
//! - the score is 1 − the Earth mover's distance between the two weighted
//!   sets (the optimal transport cost), solved exactly.
//!
//! v2 accepts an `n_gram` argument but never reads it: unigrams it is.
//!
//! [`Version::V1`], `moverscore.word_mover_score` (the paper's metric, on its
//! authors' BERT fine-tuned on MNLI), differs in every step after the
//! tokenizer:
//!
//! - every layer's output is L2-normalised, and a token's vector is the
//!   element-wise minimum, mean and maximum over the last 5 layers,
//!   concatenated (3 × hidden);
//! - removed tokens are dropped, not weighed 0; the kept ones are grouped in
//!   windows of `ngram` consecutive kept tokens (stride 1; a single window of
//!   all of them when there are fewer), each the idf-weighted mean of its
//!   vectors (`idf / (Σ idf + 1e-5)`) weighing the sum of its idf;
//! - the windows are normalised (`norm + 1e-6`) and the cost is the SQUARED
//!   Euclidean distance (its `pairwise_distances` takes no root);
//! - each side's weights are divided by their sum + 1e-5, so the totals
//!   differ slightly, and pyemd's `emd` is FastEMD's EMD-hat: the smaller
//!   total moves at least cost and the difference is charged at the largest
//!   distance between any two windows (of either text).
//!
//! Where every weight of a side is 0 (an idf over one text, a hypothesis of
//! punctuation only) the released code scores 1 (v2: no mass moves) or
//! something arbitrary (v1); that is an error here instead.

use std::cell::RefCell;
use std::collections::HashMap;

use microlp::{ComparisonOp, OptimizationDirection, Problem};

use std::rc::Rc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::bertscore::{self, EmbeddingCache, TokenEmbeddings};
use super::engine::{Column, Detail, Engine, EngineError, model_error, part_of, truncated_part};
use super::registry::{About, Card, KindAbout, MetricModule, ModelModule, each_alone};
use super::spec::SpecError;
use super::{
    CorpusAggregation, MetricError, MetricSpec, ModelKind, ModelSlot, Scale, Score, Segment,
    Signature,
};
use crate::models::{ModelError, PassLimit, Plm, read_back};
use burn::tensor::Tensor;

/// The implementation whose computation is reproduced: `moverscore_v2` as
/// released on PyPI (1.0.3), whose score is 1 − cost (the GitHub master has
/// since changed it to 1 / (1 + cost)).
pub const CONVENTIONS: &str = "moverscore-v2-1.0.3";

/// v1's: `moverscore.py` as released on PyPI (1.0.3).
pub const CONVENTIONS_V1: &str = "moverscore-v1-1.0.3";

/// The layers v1 reads: the last 5 of the encoder's.
pub const V1_LAYERS: usize = 5;

/// Which released MoverScore is computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// `moverscore.py`: the last 5 layers' min, mean and max, windows of
    /// `ngram` kept tokens, squared distances.
    V1 {
        /// Tokens per window (the released default and the paper's
        /// MoverScore is 1; the paper also reports 2).
        ngram: usize,
    },
    /// `moverscore_v2.py`: the last layer, Euclidean distances.
    V2,
}

/// Texts per encoder pass.
pub const BATCH: usize = 32;

/// Python's `string.punctuation`.
const PUNCTUATION: &str = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";

/// One pair's MoverScore with the transport plan behind it.
#[derive(Debug, Clone, PartialEq)]
pub struct MoverScore {
    /// 1 − the transport cost.
    pub value: f64,
    /// The reference's tokens as the tokenizer spells them.
    pub ref_tokens: Vec<String>,
    /// The hypothesis's tokens.
    pub hyp_tokens: Vec<String>,
    /// Each reference token's mass (normalised weight; 0 where removed).
    pub ref_mass: Vec<f64>,
    /// Each hypothesis token's mass.
    pub hyp_mass: Vec<f64>,
    /// Mass moved from each reference token to each hypothesis token,
    /// row-major `[ref tokens, hyp tokens]`.
    pub flow: Vec<f64>,
    /// A text was cut to the model's limit.
    pub truncated: bool,
}

/// Why a transport problem has no plan.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransportError {
    /// A side's histogram is all zeros.
    #[error("one side has no mass to move")]
    NoMass,
    /// The simplex solver failed.
    #[error("the transport problem did not solve: {0}")]
    Solver(String),
}

/// An optimal transport plan and its cost.
#[derive(Debug, Clone, PartialEq)]
pub struct Transport {
    /// Total cost: sum of flow × cost.
    pub cost: f64,
    /// Row-major `[a, b]` flow.
    pub flow: Vec<f64>,
}

/// The Earth mover's distance between histograms `a` and `b` (each summing
/// to 1, up to rounding) with `cost` row-major `[a, b]`: the transportation
/// problem solved exactly by the simplex method. Empty bins are left out of
/// the linear program; one column constraint is dropped, since with equal
/// totals it follows from the others (rounding cannot make it infeasible).
pub fn emd(a: &[f64], b: &[f64], cost: &[f64]) -> Result<Transport, TransportError> {
    transport(a, b, cost, true)
}

/// pyemd's `emd`, which is FastEMD's EMD-hat (Pele and Werman): where the
/// totals of `a` and `b` differ, the smaller total moves at least cost into
/// the other side's bins (none over its mass), and the difference is
/// charged at `penalty` (pyemd's default: the largest entry of its distance
/// matrix). With equal totals it is [`emd`]. Solved exactly; FastEMD itself
/// rounds masses and costs to millionths of their largest value first.
pub fn emd_hat(
    a: &[f64],
    b: &[f64],
    cost: &[f64],
    penalty: f64,
) -> Result<Transport, TransportError> {
    let (sa, sb) = (a.iter().sum::<f64>(), b.iter().sum::<f64>());
    let mut t = transport(a, b, cost, (sa - sb).abs() <= 1e-15 * sa.max(sb))?;
    t.cost += (sa - sb).abs() * penalty;
    Ok(t)
}

/// The least-cost flow from `a` to `b`: with `equal` totals every bin is
/// filled exactly; otherwise the smaller side's bins are emptied exactly and
/// the larger side's receive at most their mass.
fn transport(a: &[f64], b: &[f64], cost: &[f64], equal: bool) -> Result<Transport, TransportError> {
    let (n, m) = (a.len(), b.len());
    assert_eq!(cost.len(), n * m, "cost is [a, b]");
    let rows: Vec<usize> = (0..n).filter(|&i| a[i] > 0.0).collect();
    let cols: Vec<usize> = (0..m).filter(|&j| b[j] > 0.0).collect();
    let mut flow = vec![0.0; n * m];
    if rows.is_empty() || cols.is_empty() {
        return Err(TransportError::NoMass);
    }
    let a_smaller = a.iter().sum::<f64>() <= b.iter().sum::<f64>();
    let (row_op, col_op, col_count) = if equal {
        (ComparisonOp::Eq, ComparisonOp::Eq, cols.len() - 1)
    } else if a_smaller {
        (ComparisonOp::Eq, ComparisonOp::Le, cols.len())
    } else {
        (ComparisonOp::Le, ComparisonOp::Eq, cols.len())
    };
    let mut problem = Problem::new(OptimizationDirection::Minimize);
    let vars: Vec<Vec<_>> = rows
        .iter()
        .map(|&i| {
            cols.iter()
                .map(|&j| problem.add_var(cost[i * m + j], (0.0, f64::INFINITY)))
                .collect()
        })
        .collect();
    for (r, &i) in rows.iter().enumerate() {
        let terms: Vec<_> = vars[r].iter().map(|&v| (v, 1.0)).collect();
        problem.add_constraint(terms.as_slice(), row_op, a[i]);
    }
    for (c, &j) in cols.iter().enumerate().take(col_count) {
        let terms: Vec<_> = vars.iter().map(|row| (row[c], 1.0)).collect();
        problem.add_constraint(terms.as_slice(), col_op, b[j]);
    }
    let solution = problem
        .solve()
        .map_err(|e| TransportError::Solver(e.to_string()))?;
    let mut total = 0.0;
    for (r, &i) in rows.iter().enumerate() {
        for (c, &j) in cols.iter().enumerate() {
            let x = solution.var_value(vars[r][c]).max(0.0);
            flow[i * m + j] = x;
            total += x * cost[i * m + j];
        }
    }
    Ok(Transport { cost: total, flow })
}

/// A text as MoverScore reads it: tokens, their vectors, cut or not.
struct Read {
    ids: Vec<u32>,
    tokens: Vec<String>,
    /// v2: `[tokens, hidden]` at the last layer, L2-normalised (as
    /// `raw.div_(norm + 1e-30)`); v1: `[tokens, 3 × hidden]`, the min, mean
    /// and max over the last 5 L2-normalised layers.
    embeddings: Vec<f32>,
    truncated: bool,
}

/// Idf of token ids over texts (each text's ids counted once).
fn idf_dictionary(texts: &[Vec<u32>]) -> HashMap<u32, f64> {
    let mut df: HashMap<u32, usize> = HashMap::new();
    for t in texts {
        let mut ids = t.clone();
        ids.sort_unstable();
        ids.dedup();
        for id in ids {
            *df.entry(id).or_default() += 1;
        }
    }
    let n = texts.len() as f64;
    df.into_iter()
        .map(|(id, c)| (id, ((n + 1.0) / (c as f64 + 1.0)).ln()))
        .chain([(UNSEEN, (n + 1.0).ln())])
        .collect()
}

/// Whether a token is removed: a subword piece, a single punctuation
/// character or a stop word.
fn removed(token: &str, stop_words: &[&str]) -> bool {
    token.contains("##")
        || (token.chars().count() == 1 && PUNCTUATION.contains(token))
        || stop_words.contains(&token)
}

/// A token's idf (or 1 without idf); a token the dictionary's texts lack
/// gets `ln(N + 1)`, as the released `defaultdict` gives it (stored under
/// [`UNSEEN`]).
fn idf_of(id: u32, idf: Option<&HashMap<u32, f64>>) -> f64 {
    idf.map_or(1.0, |d| {
        d.get(&id)
            .or_else(|| d.get(&UNSEEN))
            .copied()
            .unwrap_or(0.0)
    })
}

/// The key of the idf of ids no text of the dictionary holds (not a token
/// id: vocabularies stay far below it).
const UNSEEN: u32 = u32::MAX;

/// Token weights: idf (or 1), 0 for subword pieces, punctuation and stop words.
fn weights(read: &Read, idf: Option<&HashMap<u32, f64>>, stop_words: &[&str]) -> Vec<f64> {
    read.ids
        .iter()
        .zip(&read.tokens)
        .map(|(&id, token)| {
            if removed(token, stop_words) {
                0.0
            } else {
                idf_of(id, idf)
            }
        })
        .collect()
}

/// The token strings of `ids` (stop words and subword pieces are told by them).
fn tokens_of(plm: &Plm, ids: &[u32]) -> Vec<String> {
    ids.iter()
        .map(|&id| plm.tokenizer.id_to_token(id).unwrap_or_default())
        .collect()
}

/// A read from token embeddings at the last layer that BERTScore's
/// [`EmbeddingCache`] kept for the same text (the same ids, rows L2-normalised
/// alike: adding 1e-30 to a norm changes no f32 norm above 1e-23).
fn read_of(plm: &Plm, e: &TokenEmbeddings) -> Read {
    Read {
        ids: e.ids.clone(),
        tokens: tokens_of(plm, &e.ids),
        embeddings: e.rows.clone(),
        truncated: e.truncated,
    }
}

/// Encodes `texts` (distinct) at the last layer, in batches. With a
/// `cache`, a text BERTScore embedded at the last layer (the page's MiniLM
/// cards: the same keystroke) is not run again. BERTScore embeds texts
/// trimmed, so a text with surrounding whitespace (a keystroke after a
/// space) reuses that entry only when it tokenizes to the same ids
/// (WordPiece drops the whitespace; byte-level BPE keeps a trailing space as
/// a token). MoverScore only reads the cache.
async fn read_texts(
    plm: &Plm,
    texts: &[&str],
    cache: Option<&RefCell<EmbeddingCache>>,
) -> Result<Vec<Read>, ModelError> {
    let last_layer = plm.config.num_layers;
    let mut out: Vec<Option<Read>> = texts
        .iter()
        .map(|t| {
            let e = cache?.borrow_mut().get(plm.load_id, last_layer, t)?;
            // BERTScore's embeddings of the same ids: of a trimmed text,
            // unless BERTScore opened it with a space (RoBERTa).
            let same = (t.trim() == *t && !bertscore::adds_prefix_space(plm))
                || plm
                    .encode(t)
                    .is_ok_and(|enc| enc.ids() == e.ids && enc.truncated == e.truncated);
            same.then(|| read_of(plm, &e))
        })
        .collect();
    // Only texts the cache did not have are tokenized and run.
    let mut fresh = Vec::new();
    for (i, t) in texts.iter().enumerate().filter(|(i, _)| out[*i].is_none()) {
        fresh.push((i, plm.encode(t)?));
    }
    fresh.sort_by_key(|(_, e)| e.tokens.len());
    for chunk in plm.passes(&fresh, |(_, e)| e.tokens.len(), PassLimit::Sequences(BATCH)) {
        let ids: Vec<Vec<u32>> = chunk.iter().map(|(_, e)| e.ids()).collect();
        let forward = plm.forward(&ids)?;
        let last = forward
            .hidden_states
            .last()
            .expect("a forward pass returns its layers")
            .clone();
        let (values, [_, l, h]) = read_back(last).await?;
        for (r, (i, e)) in chunk.iter().enumerate() {
            let n = ids[r].len();
            let mut embeddings = values[r * l * h..(r * l + n) * h].to_vec();
            for row in embeddings.chunks_mut(h) {
                let norm = row.iter().map(|x| x * x).sum::<f32>().sqrt() + 1e-30;
                row.iter_mut().for_each(|x| *x /= norm);
            }
            out[*i] = Some(Read {
                tokens: tokens_of(plm, &ids[r]),
                ids: ids[r].clone(),
                embeddings,
                truncated: e.truncated,
            });
        }
    }
    Ok(out
        .into_iter()
        .map(|r| r.expect("every text read"))
        .collect())
}

/// Encodes `texts` (distinct) as v1 reads them, in batches: each of the
/// last [`V1_LAYERS`] layers L2-normalised, then their element-wise min,
/// mean and max concatenated (on the model's device).
async fn read_texts_v1(plm: &Plm, texts: &[&str]) -> Result<Vec<Read>, ModelError> {
    let last = plm.config.num_layers;
    if last == 0 {
        return Err(ModelError::Unsupported(
            "MoverScore v1 reads the encoder's last layers, and this model has none".into(),
        ));
    }
    // The layers' outputs, not the embeddings (pytorch_pretrained_bert's
    // `output_all_encoded_layers`), of which v1 takes `[-5:]`.
    let first = (last + 1).saturating_sub(V1_LAYERS).max(1);
    let mut fresh = Vec::new();
    for (i, t) in texts.iter().enumerate() {
        fresh.push((i, plm.encode(t)?));
    }
    fresh.sort_by_key(|(_, e)| e.tokens.len());
    let mut out: Vec<Option<Read>> = texts.iter().map(|_| None).collect();
    for chunk in plm.passes(&fresh, |(_, e)| e.tokens.len(), PassLimit::Sequences(BATCH)) {
        let ids: Vec<Vec<u32>> = chunk.iter().map(|(_, e)| e.ids()).collect();
        let forward = plm.forward(&ids)?;
        let layers: Vec<Tensor<3>> = forward.hidden_states[first..=last]
            .iter()
            .map(|t| t.clone() / t.clone().powi_scalar(2).sum_dim(2).sqrt())
            .collect();
        let [b, l, h] = layers[0].dims();
        let stacked = Tensor::stack::<4>(layers, 0);
        let features = Tensor::cat(
            vec![
                stacked.clone().min_dim(0).reshape([b, l, h]),
                stacked.clone().mean_dim(0).reshape([b, l, h]),
                stacked.max_dim(0).reshape([b, l, h]),
            ],
            2,
        );
        let (values, [_, l, w]) = read_back(features).await?;
        for (r, (i, e)) in chunk.iter().enumerate() {
            let n = ids[r].len();
            out[*i] = Some(Read {
                tokens: tokens_of(plm, &ids[r]),
                ids: ids[r].clone(),
                embeddings: values[r * l * w..(r * l + n) * w].to_vec(),
                truncated: e.truncated,
            });
        }
    }
    Ok(out
        .into_iter()
        .map(|r| r.expect("every text read"))
        .collect())
}

/// The texts whose document frequencies give each side's idf weights, as
/// the released code's `get_idf_dict(references)` and
/// `get_idf_dict(hypotheses)` count them (a text listed twice counts twice).
#[derive(Debug, Clone, Default)]
pub struct IdfTexts<'a> {
    /// The reference side's texts.
    pub references: Vec<&'a str>,
    /// The hypothesis side's texts.
    pub hypotheses: Vec<&'a str>,
}

/// Each side's idf dictionary (`ln((N + 1) / (df + 1))` over its texts).
#[derive(Debug, Clone, Default)]
pub struct IdfWeights {
    references: HashMap<u32, f64>,
    hypotheses: HashMap<u32, f64>,
}

/// The idf dictionaries of `texts`' two sides.
pub fn idf_weights(plm: &Plm, texts: &IdfTexts<'_>) -> Result<IdfWeights, ModelError> {
    let dictionary = |texts: &[&str]| -> Result<HashMap<u32, f64>, ModelError> {
        let ids = texts
            .iter()
            .map(|t| Ok(plm.encode(t)?.ids()))
            .collect::<Result<Vec<_>, ModelError>>()?;
        Ok(idf_dictionary(&ids))
    };
    Ok(IdfWeights {
        references: dictionary(&texts.references)?,
        hypotheses: dictionary(&texts.hypotheses)?,
    })
}

/// Scores `(reference, hypothesis)` pairs with MoverScore `version`. With
/// `idf` ([`idf_weights`]), tokens weigh their side's idf; without, every
/// kept token weighs 1. The `cache` (v2 only) lends last-layer embeddings.
pub async fn score(
    plm: &Plm,
    pairs: &[(&str, &str)],
    version: Version,
    idf: Option<&IdfWeights>,
    stop_words: &[&str],
    cache: Option<&RefCell<EmbeddingCache>>,
) -> Result<Vec<MoverScore>, ModelError> {
    let mut distinct: Vec<&str> = Vec::new();
    let mut index: HashMap<&str, usize> = HashMap::new();
    let mut slot = |t| {
        *index.entry(t).or_insert_with(|| {
            distinct.push(t);
            distinct.len() - 1
        })
    };
    let slots: Vec<(usize, usize)> = pairs.iter().map(|&(r, h)| (slot(r), slot(h))).collect();
    let reads = match version {
        Version::V2 => read_texts(plm, &distinct, cache).await?,
        Version::V1 { .. } => read_texts_v1(plm, &distinct).await?,
    };
    let (ref_idf, hyp_idf) = match idf {
        Some(w) => (Some(&w.references), Some(&w.hypotheses)),
        None => (None, None),
    };
    slots
        .iter()
        .enumerate()
        .map(|(k, &(r, y))| {
            let reference = Side {
                read: &reads[r],
                idf: ref_idf,
                name: "reference",
            };
            let hypothesis = Side {
                read: &reads[y],
                idf: hyp_idf,
                name: "hypothesis",
            };
            let pair = match version {
                Version::V2 => pair_v2(&reference, &hypothesis, plm.config.hidden_size, stop_words),
                Version::V1 { ngram } => pair_v1(&reference, &hypothesis, ngram, stop_words),
            };
            pair.map_err(|e| {
                let hint = if idf.is_some() {
                    ", or occur in every text of the set, which gives idf 0"
                } else {
                    ""
                };
                ModelError::Input(match e {
                    PairError::NoWeight(side) => format!(
                        "pair {}: no {side} token carries weight (all are subword pieces, \
                         punctuation or stop words{hint}), so MoverScore has nothing to compare",
                        k + 1,
                    ),
                    PairError::Transport(e) => format!("pair {}: {e}", k + 1),
                })
            })
        })
        .collect()
}

/// One text of a pair with its side's idf.
struct Side<'a> {
    read: &'a Read,
    idf: Option<&'a HashMap<u32, f64>>,
    name: &'static str,
}

/// Why a pair has no score.
enum PairError {
    /// No token of this side carries weight.
    NoWeight(&'static str),
    /// The transport problem failed.
    Transport(TransportError),
}

/// Weights divided by their sum plus `epsilon`, or the side's error when
/// nothing weighs.
fn normalised(w: Vec<f64>, epsilon: f64, side: &Side) -> Result<Vec<f64>, PairError> {
    let total: f64 = w.iter().sum();
    if total <= 0.0 {
        return Err(PairError::NoWeight(side.name));
    }
    Ok(w.into_iter().map(|x| x / (total + epsilon)).collect())
}

/// v2: every token a point (removed ones weigh 0), Euclidean costs.
fn pair_v2(
    reference: &Side,
    hypothesis: &Side,
    h: usize,
    stop_words: &[&str],
) -> Result<MoverScore, PairError> {
    let mass = |side: &Side| normalised(weights(side.read, side.idf, stop_words), 0.0, side);
    let (a, b) = (mass(reference)?, mass(hypothesis)?);
    let (x, y) = (reference.read, hypothesis.read);
    let (n, m) = (a.len(), b.len());
    let mut cost = vec![0.0; n * m];
    for i in 0..n {
        let p = &x.embeddings[i * h..(i + 1) * h];
        for j in 0..m {
            let q = &y.embeddings[j * h..(j + 1) * h];
            let squared: f64 = p.iter().zip(q).map(|(p, q)| f64::from(p - q).powi(2)).sum();
            cost[i * m + j] = squared.max(1e-30).sqrt();
        }
    }
    let plan = emd(&a, &b, &cost).map_err(PairError::Transport)?;
    Ok(MoverScore {
        value: 1.0 - plan.cost,
        ref_tokens: x.tokens.clone(),
        hyp_tokens: y.tokens.clone(),
        ref_mass: a,
        hyp_mass: b,
        flow: plan.flow,
        truncated: x.truncated || y.truncated,
    })
}

/// v1's windows of one text: labels, weights (Σ idf) and vectors
/// `[windows, 3 × hidden]` normalised as `raw.div_(norm + 1e-6)`.
fn windows(side: &Side, ngram: usize, stop_words: &[&str]) -> (Vec<String>, Vec<f64>, Vec<f64>) {
    let read = side.read;
    let width = read.embeddings.len() / read.ids.len().max(1);
    let kept: Vec<usize> = (0..read.ids.len())
        .filter(|&k| !removed(&read.tokens[k], stop_words))
        .collect();
    // The released code keeps idf in a float32 tensor.
    let idf: Vec<f32> = read
        .ids
        .iter()
        .map(|&id| idf_of(id, side.idf) as f32)
        .collect();
    let n = ngram.min(kept.len()).max(1);
    let (mut labels, mut weight, mut vectors) = (Vec::new(), Vec::new(), Vec::new());
    for window in kept.windows(n) {
        let sum: f32 = window.iter().map(|&k| idf[k]).sum();
        let mut v = vec![0f32; width];
        for &k in window {
            let scale = idf[k] / (sum + 1e-5);
            let e = &read.embeddings[k * width..(k + 1) * width];
            v.iter_mut().zip(e).for_each(|(v, e)| *v += scale * e);
        }
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt() + 1e-6;
        vectors.extend(v.iter().map(|x| f64::from(x / norm)));
        weight.push(f64::from(sum));
        labels.push(
            window
                .iter()
                .map(|&k| read.tokens[k].as_str())
                .collect::<Vec<_>>()
                .join(" "),
        );
    }
    (labels, weight, vectors)
}

/// v1: windows of kept tokens, squared distances, pyemd's EMD-hat.
fn pair_v1(
    reference: &Side,
    hypothesis: &Side,
    ngram: usize,
    stop_words: &[&str],
) -> Result<MoverScore, PairError> {
    let (ref_labels, ref_weight, x) = windows(reference, ngram, stop_words);
    let (hyp_labels, hyp_weight, y) = windows(hypothesis, ngram, stop_words);
    let a = normalised(ref_weight, 1e-5, reference)?;
    let b = normalised(hyp_weight, 1e-5, hypothesis)?;
    let w = x.len() / a.len();
    let squared = |p: &[f64], q: &[f64]| p.iter().zip(q).map(|(p, q)| (p - q).powi(2)).sum::<f64>();
    let (xs, ys): (Vec<&[f64]>, Vec<&[f64]>) = (x.chunks(w).collect(), y.chunks(w).collect());
    let cost: Vec<f64> = xs
        .iter()
        .flat_map(|p| ys.iter().map(|q| squared(p, q)))
        .collect();
    // pyemd's penalty: the largest distance in its matrix over both texts' windows.
    let all: Vec<&[f64]> = xs.iter().chain(&ys).copied().collect();
    let largest = all
        .iter()
        .enumerate()
        .flat_map(|(i, p)| all[i + 1..].iter().map(|q| squared(p, q)))
        .fold(0.0, f64::max);
    let plan = emd_hat(&a, &b, &cost, largest).map_err(PairError::Transport)?;
    Ok(MoverScore {
        value: 1.0 - plan.cost,
        ref_tokens: ref_labels,
        hyp_tokens: hyp_labels,
        ref_mass: a,
        hyp_mass: b,
        flow: plan.flow,
        truncated: reference.read.truncated || hypothesis.read.truncated,
    })
}

/// The signature of MoverScore `version` from `model` at `precision`.
pub fn signature(version: Version, model: &str, idf: bool, precision: &str) -> Signature {
    let (layer, ngram, conventions) = match version {
        Version::V2 => ("last", 1, CONVENTIONS),
        Version::V1 { ngram } => ("last5-min+mean+max", ngram, CONVENTIONS_V1),
    };
    Signature::new(match version {
        Version::V2 => "moverscore",
        Version::V1 { .. } => "moverscore-v1",
    })
    .with("model", model)
    .with("layer", layer)
    .flag("idf", idf)
    .with("removed", "subwords+punct")
    .with("ngram", ngram)
    .with("conventions", conventions)
    .with("precision", precision)
    .versioned()
}

/// MoverScore's (v2) options.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct MoverScoreOptions {
    /// # Model
    ///
    /// The encoder; unset: the registry's default.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-page" = false))]
    pub model: Option<String>,
    /// # idf over the set
    ///
    /// Weigh tokens by idf over the scored set, references and hypotheses
    /// apart (moverscore's `idf_dict_ref` and `idf_dict_hyp`); default: off
    /// (every token weighs 1, as moverscore's `defaultdict(lambda: 1.)`).
    pub idf: bool,
}

/// MoverScore v1's options.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct MoverScoreV1Options {
    /// # Model
    ///
    /// The encoder (the paper's: BERT fine-tuned on MNLI); unset: the
    /// registry's default.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-page" = false))]
    pub model: Option<String>,
    /// # idf over the set
    ///
    /// Weigh tokens by idf over the scored set, references and hypotheses
    /// apart (moverscore's `idf_dict_ref` and `idf_dict_hyp`); default: off.
    pub idf: bool,
    /// # n-gram
    ///
    /// Kept tokens per window (moverscore's `n_gram`): 1 is the paper's
    /// MoverScore, 2 its bigram variant. Default: 1.
    #[schemars(
        range(min = 1),
        extend("x-choices" = [
            {"value": 1, "label": "1 (the paper's MoverScore)"},
            {"value": 2, "label": "2 (its bigram variant)"}
        ])
    )]
    pub ngram: usize,
}

impl Default for MoverScoreV1Options {
    fn default() -> Self {
        Self {
            model: None,
            idf: false,
            ngram: 1,
        }
    }
}

/// MoverScore's (v2) registry entry.
pub struct MoverScoreMetric;

/// MoverScore v1's registry entry.
pub struct MoverScoreV1Metric;

const MOVERSCORE_ABOUT: &str = "Each text's tokens become points in the encoder's space; \
    MoverScore is 1 minus the least total cost of moving the reference's points onto the \
    hypothesis's (the Earth mover's distance), so 1 means the same tokens in the same \
    contexts. v2 (moverscore_v2): the last layer and Euclidean costs; subword pieces and \
    punctuation weigh nothing, [CLS] and [SEP] count, as in the released code. v1 (the \
    paper's moverscore.py, made for a BERT fine-tuned on MNLI): each token is the min, mean \
    and max of the last 5 layers, windows of n kept tokens are the points, costs are \
    squared distances. idf weights need a set of texts: on one pair every token weighs the \
    same.";

impl MetricModule for MoverScoreMetric {
    type Options = MoverScoreOptions;
    const KIND: KindAbout = KindAbout {
        name: "MoverScore",
        about: MOVERSCORE_ABOUT,
        reference: "moverscore 1.0.3 (moverscore_v2.py)",
        truncated: "a text was cut to the model's limit",
        corpus: CorpusAggregation::MeanOfSegments,
        model: Some(ModelKind::Encoder),
        card: Card::OWN,
    };
    const COLUMNS: &'static [About] = &[About::reference_based(
        "MoverScore",
        "MoverScore (v2): 1 minus the Earth mover's distance between the reference's and the hypothesis's token embeddings",
        Scale::UNIT,
    )];

    fn whole_set(o: &MoverScoreOptions) -> Option<&'static str> {
        o.idf.then_some("MoverScore's idf weights")
    }

    fn reads_set_hypotheses(o: &MoverScoreOptions) -> bool {
        o.idf
    }
}

impl MetricModule for MoverScoreV1Metric {
    type Options = MoverScoreV1Options;
    const KIND: KindAbout = KindAbout {
        name: "MoverScore v1",
        about: MOVERSCORE_ABOUT,
        reference: "moverscore 1.0.3 (moverscore.py)",
        truncated: "a text was cut to the model's limit",
        corpus: CorpusAggregation::MeanOfSegments,
        model: Some(ModelKind::Encoder),
        card: Card {
            version_of: Some("moverscore"),
            every_column: false,
        },
    };
    const COLUMNS: &'static [About] = &[About::reference_based(
        "MoverScore v1",
        "MoverScore as the paper computes it (moverscore.py): the last 5 layers' min, mean and max per token, n-grams of kept tokens, squared distances",
        Scale::UNIT,
    )];

    fn validate(o: &MoverScoreV1Options) -> Result<(), SpecError> {
        if o.ngram == 0 {
            return Err(SpecError(
                "MoverScore v1's n-gram must be at least 1 (1: the paper's MoverScore)".into(),
            ));
        }
        Ok(())
    }

    fn whole_set(o: &MoverScoreV1Options) -> Option<&'static str> {
        o.idf.then_some("MoverScore's idf weights")
    }

    fn reads_set_hypotheses(o: &MoverScoreV1Options) -> bool {
        o.idf
    }
}

impl ModelModule for MoverScoreMetric {
    fn model_name(o: &MoverScoreOptions) -> Option<&str> {
        o.model.as_deref()
    }

    async fn score(
        engine: &Engine,
        group: &[&MoverScoreOptions],
        segments: &[Segment<'_>],
        set: Option<&[Segment<'_>]>,
    ) -> Result<Vec<Column>, EngineError> {
        each_alone(group, async |o| {
            let plm = engine.model(ModelSlot::MoverScore, o.model.as_deref())?;
            let spec = MetricSpec::MoverScore(o.clone());
            column(engine, spec, &plm, Version::V2, o.idf, segments, set).await
        })
        .await
    }
}

impl ModelModule for MoverScoreV1Metric {
    fn model_name(o: &MoverScoreV1Options) -> Option<&str> {
        o.model.as_deref()
    }

    async fn score(
        engine: &Engine,
        group: &[&MoverScoreV1Options],
        segments: &[Segment<'_>],
        set: Option<&[Segment<'_>]>,
    ) -> Result<Vec<Column>, EngineError> {
        each_alone(group, async |o| {
            let plm = engine.model(ModelSlot::MoverScoreV1, o.model.as_deref())?;
            let spec = MetricSpec::MoverScoreV1(o.clone());
            let version = Version::V1 { ngram: o.ngram };
            column(engine, spec, &plm, version, o.idf, segments, set).await
        })
        .await
    }
}

/// idf as the released usages build it: with one reference per segment,
/// over the references as listed (the README's `get_idf_dict(references)`,
/// a repeated reference counting again); with several, over each distinct
/// reference once (run_summarization.py: an article's references, however
/// many summaries share them). Hypotheses: each segment's once.
fn weights_of(plm: &Plm, counted: &[Segment<'_>]) -> Result<IdfWeights, ModelError> {
    let single = counted.iter().all(|s| s.refs.len() == 1);
    let mut seen = std::collections::HashSet::new();
    let texts = IdfTexts {
        references: counted
            .iter()
            .flat_map(|s| s.refs.iter().copied())
            .filter(|r| single || seen.insert(*r))
            .collect(),
        hypotheses: counted.iter().map(|s| s.hyp).collect(),
    };
    idf_weights(plm, &texts)
}

async fn column(
    engine: &Engine,
    spec: MetricSpec,
    plm: &Plm,
    version: Version,
    idf: bool,
    segments: &[Segment<'_>],
    set: Option<&[Segment<'_>]>,
) -> Result<Column, EngineError> {
    let id = spec.id();
    // Several references: the hypothesis is scored against each and the
    // scores averaged, as the released examples do (example.py's
    // `sentence_score`, run_summarization.py).
    let mut pairs = Vec::new();
    let mut first = Vec::with_capacity(segments.len());
    for (i, s) in segments.iter().enumerate() {
        if s.refs.is_empty() {
            return Err(MetricError::MissingReference {
                metric: id.as_str(),
                segment: i + 1,
            }
            .into());
        }
        first.push(pairs.len());
        pairs.extend(s.refs.iter().map(|r| (*r, s.hyp)));
    }
    // Within a larger set, the set's texts count instead (its weights
    // counted once for all its batches).
    let weights = match (idf, set) {
        (false, _) => None,
        (true, None) => Some(Rc::new(
            weights_of(plm, segments).map_err(model_error(plm))?,
        )),
        (true, Some(set)) => Some(
            engine
                .set_weights("moverscore-idf", plm.load_id, set, true, || {
                    weights_of(plm, set)
                })
                .map_err(model_error(plm))?,
        ),
    };
    let scored = score(
        plm,
        &pairs,
        version,
        weights.as_deref(),
        &[],
        engine.embedding_cache(),
    )
    .await
    .map_err(model_error(plm))?;
    let signature = signature(version, &plm.name, idf, &plm.precision_label());
    let scores = segments
        .iter()
        .zip(&first)
        .map(|(s, &k)| {
            let mine = &scored[k..k + s.refs.len()];
            let value = mine.iter().map(|m| m.value).sum::<f64>() / mine.len() as f64;
            let truncated = mine.iter().any(|m| m.truncated);
            Score {
                metric: id.as_str(),
                value,
                parts: vec![
                    truncated_part(truncated),
                    part_of("references", mine.len() as f64),
                ],
                signature: signature.to_string(),
            }
        })
        .collect();
    let mut column = Column::new(spec, scores, signature);
    if engine.details() {
        // The plan against each segment's first reference.
        let mut plans: Vec<Option<MoverScore>> = scored.into_iter().map(Some).collect();
        column.details = first
            .iter()
            .filter_map(|&k| plans.get_mut(k).and_then(Option::take))
            .map(|m| Detail::Flow {
                ref_tokens: m.ref_tokens,
                hyp_tokens: m.hyp_tokens,
                ref_mass: m.ref_mass,
                hyp_mass: m.hyp_mass,
                flow: m.flow,
                truncated: m.truncated,
            })
            .collect();
    }
    Ok(column)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emd_moves_mass_along_the_cheapest_routes() {
        // Two bins each side; crossing costs 1, staying costs 0 or 10.
        let t = emd(&[0.5, 0.5], &[0.5, 0.5], &[0.0, 1.0, 1.0, 10.0]).unwrap();
        // Staying on the diagonal costs 0.5 * 10; swapping costs 1.
        assert!((t.cost - 1.0).abs() < 1e-9, "{}", t.cost);
        assert_eq!(t.flow, vec![0.0, 0.5, 0.5, 0.0]);
        let t = emd(&[1.0], &[0.25, 0.75], &[2.0, 4.0]).unwrap();
        assert!((t.cost - (0.5 + 3.0)).abs() < 1e-9, "{}", t.cost);
        assert_eq!(t.flow.len(), 2);
        // Empty bins carry nothing and need no variables.
        let t = emd(&[0.0, 1.0], &[1.0, 0.0], &[5.0, 5.0, 3.0, 9.0]).unwrap();
        assert!((t.cost - 3.0).abs() < 1e-12);
        assert_eq!(t.flow, vec![0.0, 0.0, 1.0, 0.0]);
        assert!(emd(&[0.0], &[1.0], &[1.0]).is_err());
    }

    #[test]
    fn punctuation_subwords_and_stop_words_weigh_nothing() {
        let read = Read {
            ids: vec![1, 2, 3, 4, 5, 6],
            tokens: ["[CLS]", "play", "##ing", ",", "the", "--"]
                .map(String::from)
                .to_vec(),
            embeddings: vec![],
            truncated: false,
        };
        assert_eq!(
            weights(&read, None, &["the"]),
            [1.0, 1.0, 0.0, 0.0, 0.0, 1.0]
        );
    }
}
