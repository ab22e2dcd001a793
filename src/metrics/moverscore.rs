//! MoverScore (Zhao et al. 2019) as AIPHES/emnlp19-moverscore's
//! `moverscore_v2.word_mover_score` computes it in the PyPI release
//! (`moverscore` 1.0.3; its default encoder is distilbert-base-uncased; any
//! encoder runs here):
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
//! v2 accepts an `n_gram` argument but never reads it: unigrams it is. Where
//! every weight of a side is 0 (an idf over one text, a hypothesis of
//! punctuation only) the released code scores 1 (no mass moves); that is an
//! error here instead.

use std::cell::RefCell;
use std::collections::HashMap;

use microlp::{ComparisonOp, OptimizationDirection, Problem};

use super::Signature;
use super::bertscore::{EmbeddingCache, TokenEmbeddings};
use crate::models::{ModelError, Plm, read_back};

/// The implementation whose computation is reproduced: `moverscore_v2` as
/// released on PyPI (1.0.3), whose score is 1 − cost (the GitHub master has
/// since changed it to 1 / (1 + cost)).
pub const CONVENTIONS: &str = "moverscore-v2-1.0.3";

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
pub fn emd(a: &[f64], b: &[f64], cost: &[f64]) -> Result<Transport, String> {
    let (n, m) = (a.len(), b.len());
    assert_eq!(cost.len(), n * m, "cost is [a, b]");
    let rows: Vec<usize> = (0..n).filter(|&i| a[i] > 0.0).collect();
    let cols: Vec<usize> = (0..m).filter(|&j| b[j] > 0.0).collect();
    let mut flow = vec![0.0; n * m];
    if rows.is_empty() || cols.is_empty() {
        return Err("one side has no mass to move".into());
    }
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
        problem.add_constraint(terms.as_slice(), ComparisonOp::Eq, a[i]);
    }
    for (c, &j) in cols.iter().enumerate().take(cols.len() - 1) {
        let terms: Vec<_> = vars.iter().map(|row| (row[c], 1.0)).collect();
        problem.add_constraint(terms.as_slice(), ComparisonOp::Eq, b[j]);
    }
    let solution = problem
        .solve()
        .map_err(|e| format!("the transport problem did not solve: {e}"))?;
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

/// A text as MoverScore reads it: tokens, last-layer embeddings, cut or not.
struct Read {
    ids: Vec<u32>,
    tokens: Vec<String>,
    /// `[tokens, hidden]`, L2-normalised (as `raw.div_(norm + 1e-30)`).
    embeddings: Vec<f32>,
    truncated: bool,
}

/// Document frequencies of token ids over `texts` (each text's ids counted once).
fn idf_dictionary(texts: &[&Read]) -> HashMap<u32, f64> {
    let mut df: HashMap<u32, usize> = HashMap::new();
    for t in texts {
        let mut ids = t.ids.clone();
        ids.sort_unstable();
        ids.dedup();
        for id in ids {
            *df.entry(id).or_default() += 1;
        }
    }
    let n = texts.len() as f64;
    df.into_iter()
        .map(|(id, c)| (id, ((n + 1.0) / (c as f64 + 1.0)).ln()))
        .collect()
}

/// Token weights: idf (or 1), 0 for subword pieces, punctuation and stop words.
fn weights(read: &Read, idf: Option<&HashMap<u32, f64>>, stop_words: &[&str]) -> Vec<f64> {
    read.ids
        .iter()
        .zip(&read.tokens)
        .map(|(id, token)| {
            let removed = token.contains("##")
                || (token.chars().count() == 1 && PUNCTUATION.contains(token.as_str()))
                || stop_words.contains(&token.as_str());
            if removed {
                0.0
            } else {
                idf.map_or(1.0, |d| d.get(id).copied().unwrap_or(0.0))
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
/// cards: the same keystroke) is not run again; texts with surrounding
/// whitespace are always run (BERTScore embeds them trimmed). MoverScore
/// only reads the cache.
async fn read_texts(
    plm: &Plm,
    texts: &[&str],
    cache: Option<&RefCell<EmbeddingCache>>,
) -> Result<Vec<Read>, ModelError> {
    let last_layer = plm.config.num_layers;
    let mut out: Vec<Option<Read>> = texts
        .iter()
        .map(|t| {
            let kept = cache.filter(|_| t.trim() == *t)?;
            let e = kept.borrow_mut().get(plm.load_id, last_layer, t)?;
            Some(read_of(plm, &e))
        })
        .collect();
    // Only texts the cache did not have are tokenized and run.
    let mut fresh = Vec::new();
    for (i, t) in texts.iter().enumerate().filter(|(i, _)| out[*i].is_none()) {
        fresh.push((i, plm.encode(t)?));
    }
    fresh.sort_by_key(|(_, e)| e.tokens.len());
    for chunk in fresh.chunks(BATCH) {
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

/// Scores `(reference, hypothesis)` pairs. With `idf`, weights come from
/// the references and the hypotheses of this set, each side its own.
pub async fn score(
    plm: &Plm,
    pairs: &[(&str, &str)],
    idf: bool,
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
    let reads = read_texts(plm, &distinct, cache).await?;
    let (ref_idf, hyp_idf) = if idf {
        let refs: Vec<&Read> = slots.iter().map(|s| &reads[s.0]).collect();
        let hyps: Vec<&Read> = slots.iter().map(|s| &reads[s.1]).collect();
        (Some(idf_dictionary(&refs)), Some(idf_dictionary(&hyps)))
    } else {
        (None, None)
    };
    let h = plm.config.hidden_size;
    let mut out = Vec::with_capacity(pairs.len());
    for (k, &(r, y)) in slots.iter().enumerate() {
        let (reference, hypothesis) = (&reads[r], &reads[y]);
        let mass = |read: &Read, dict: Option<&HashMap<u32, f64>>, side: &str| {
            let w = weights(read, dict, stop_words);
            let total: f64 = w.iter().sum();
            if total <= 0.0 {
                return Err(ModelError::Unsupported(format!(
                    "pair {}: no {side} token carries weight (all are subword pieces, \
                     punctuation or stop words{}), so MoverScore has nothing to compare",
                    k + 1,
                    if idf {
                        ", or occur in every text of the set, which gives idf 0"
                    } else {
                        ""
                    }
                )));
            }
            Ok(w.into_iter().map(|x| x / total).collect::<Vec<f64>>())
        };
        let a = mass(reference, ref_idf.as_ref(), "reference")?;
        let b = mass(hypothesis, hyp_idf.as_ref(), "hypothesis")?;
        let (n, m) = (a.len(), b.len());
        let mut cost = vec![0.0; n * m];
        for i in 0..n {
            let x = &reference.embeddings[i * h..(i + 1) * h];
            for j in 0..m {
                let y = &hypothesis.embeddings[j * h..(j + 1) * h];
                let squared: f64 = x.iter().zip(y).map(|(p, q)| f64::from(p - q).powi(2)).sum();
                cost[i * m + j] = squared.max(1e-30).sqrt();
            }
        }
        let plan = emd(&a, &b, &cost)
            .map_err(|e| ModelError::Unsupported(format!("pair {}: {e}", k + 1)))?;
        out.push(MoverScore {
            value: 1.0 - plan.cost,
            ref_tokens: reference.tokens.clone(),
            hyp_tokens: hypothesis.tokens.clone(),
            ref_mass: a,
            hyp_mass: b,
            flow: plan.flow,
            truncated: reference.truncated || hypothesis.truncated,
        });
    }
    Ok(out)
}

/// The signature of MoverScore from `model` at `precision`.
pub fn signature(model: &str, idf: bool, precision: &str) -> Signature {
    Signature::new("moverscore")
        .with("model", model)
        .with("layer", "last")
        .flag("idf", idf)
        .with("removed", "subwords+punct")
        .with("ngram", 1)
        .with("conventions", CONVENTIONS)
        .with("precision", precision)
        .versioned()
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
