//! COMET and COMET-QE (unbabel-comet 2.2 conventions): each distinct text
//! (hypothesis, reference, source) is encoded once into a sentence
//! embedding, then the estimator scores the features
//! `[h, r, h*r, |h-r|, h*s, |h-s|]` (COMET-QE: `[h, s, h*s, |h-s|]`).
//! Segment scores are the estimator's outputs as COMET prints them; the
//! system score is their mean.
//!
//! Texts are cut at the encoder's limit as COMET's tokenizer call cuts them
//! (`max_position_embeddings - 4` tokens, special tokens included), each
//! text on its own.

use std::cell::RefCell;
use std::collections::HashMap;

use burn::tensor::{Tensor, TensorData};

use super::Signature;
use crate::models::comet::{CometKind, CometModel};
use crate::models::{ModelError, Network, PassLimit, Plm, read_back};

/// Texts per encoder pass.
pub const BATCH: usize = 16;

/// unbabel-comet release whose computation is reproduced (its Python
/// `predict` in f32; 2.2.6 turned wmt22's sparsemax into softmax, and the
/// `comet-score` command runs in f16 on stripped lines).
pub const COMET_VERSION: &str = "2.2.7";

/// One segment's COMET score.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CometScore {
    /// The estimator's output.
    pub value: f64,
    /// A text of the segment was cut to the encoder's limit.
    pub truncated: bool,
}

/// The texts of one segment.
#[derive(Debug, Clone, Copy)]
pub struct CometInput<'a> {
    /// Hypothesis (COMET's `mt`).
    pub mt: &'a str,
    /// Reference (`ref`); `None` for COMET-QE.
    pub reference: Option<&'a str>,
    /// Source (`src`).
    pub src: &'a str,
}

/// Sentence embeddings of recent texts per model load (a page typing into
/// the hypothesis keeps its reference and source).
#[derive(Default)]
pub struct SentenceCache {
    entries: HashMap<(u64, String), (Vec<f32>, bool)>,
}

impl SentenceCache {
    /// Texts kept before the cache starts over.
    pub const CAPACITY: usize = 4096;

    /// Drops every entry of the load `load` (its model was unloaded).
    pub fn forget(&mut self, load: u64) {
        self.entries.retain(|(k, _), _| *k != load);
    }
}

fn comet_of(plm: &Plm) -> Result<&CometModel, ModelError> {
    match &plm.network {
        Network::Comet(m) => Ok(m),
        _ => Err(ModelError::Unsupported(format!(
            "{} is not a COMET model (a COMET folder holds hparams.yaml and \
             checkpoints/model.ckpt)",
            plm.name
        ))),
    }
}

/// The kind of estimator `plm` holds, or an error naming the model.
pub fn kind_of(plm: &Plm) -> Result<CometKind, ModelError> {
    Ok(comet_of(plm)?.hparams.kind)
}

/// Sentence embeddings (`[width]` each) and truncation flags of `texts`, in
/// batches of [`BATCH`] sorted by length.
async fn embed(
    plm: &Plm,
    model: &CometModel,
    texts: &[&str],
) -> Result<Vec<(Vec<f32>, bool)>, ModelError> {
    let pad_id = plm.tokenizer.pad_id().unwrap_or(plm.config.pad_token_id);
    let encoded = texts
        .iter()
        .map(|t| plm.encode(t))
        .collect::<Result<Vec<_>, _>>()?;
    let mut order: Vec<usize> = (0..texts.len()).collect();
    order.sort_by_key(|&i| encoded[i].tokens.len());
    let mut out: Vec<Option<(Vec<f32>, bool)>> = vec![None; texts.len()];
    for chunk in plm.passes(
        &order,
        |&i| encoded[i].tokens.len(),
        PassLimit::Sequences(BATCH),
    ) {
        let ids: Vec<Vec<u32>> = chunk.iter().map(|&i| encoded[i].ids()).collect();
        if ids.iter().any(Vec::is_empty) {
            return Err(ModelError::Input("empty input sequence".into()));
        }
        let batch = plm.batch(&ids, None);
        let pooled = model.sentence_embeddings(&batch, &ids, pad_id);
        let (values, [_, w]) = read_back(pooled).await?;
        for (b, &i) in chunk.iter().enumerate() {
            out[i] = Some((values[b * w..(b + 1) * w].to_vec(), encoded[i].truncated));
        }
    }
    Ok(out
        .into_iter()
        .map(|e| e.expect("every text embedded"))
        .collect())
}

/// Scores `inputs` with the COMET model `plm` (every input of a reference-based
/// model needs its reference; a reference-free one ignores references).
pub async fn score(
    plm: &Plm,
    inputs: &[CometInput<'_>],
    cache: Option<&RefCell<SentenceCache>>,
) -> Result<Vec<CometScore>, ModelError> {
    let model = comet_of(plm)?;
    let kind = model.hparams.kind;
    if inputs.is_empty() {
        return Ok(Vec::new());
    }
    // Every distinct text once, cached ones not again.
    let mut texts: Vec<&str> = Vec::new();
    for input in inputs {
        let reference = match kind {
            CometKind::Regression => Some(input.reference.ok_or_else(|| {
                ModelError::Input("a reference-based COMET model needs a reference".into())
            })?),
            CometKind::Referenceless => None,
        };
        texts.extend([input.mt, input.src].into_iter().chain(reference));
    }
    texts.sort_unstable();
    texts.dedup();
    let mut known: HashMap<&str, (Vec<f32>, bool)> = HashMap::new();
    if let Some(cache) = cache {
        let cache = cache.borrow();
        for &t in &texts {
            if let Some(e) = cache.entries.get(&(plm.load_id, t.to_owned())) {
                known.insert(t, e.clone());
            }
        }
    }
    let missing: Vec<&str> = texts
        .iter()
        .copied()
        .filter(|t| !known.contains_key(t))
        .collect();
    if !missing.is_empty() {
        let embedded = embed(plm, model, &missing).await?;
        if let Some(cache) = cache {
            let mut cache = cache.borrow_mut();
            if cache.entries.len() + missing.len() > SentenceCache::CAPACITY {
                cache.entries.clear();
            }
            for (t, e) in missing.iter().zip(&embedded) {
                cache
                    .entries
                    .insert((plm.load_id, (*t).to_owned()), e.clone());
            }
        }
        known.extend(missing.into_iter().zip(embedded));
    }
    let width = plm.config.hidden_size;
    let k = model.hparams.features();
    let mut features = Vec::with_capacity(inputs.len() * k * width);
    let mut truncated = Vec::with_capacity(inputs.len());
    for input in inputs {
        let (h, th) = &known[input.mt];
        let (s, ts) = &known[input.src];
        let mut cut = *th || *ts;
        match kind {
            CometKind::Regression => {
                let (r, tr) = &known[input.reference.expect("checked above")];
                cut |= *tr;
                features.extend_from_slice(h);
                features.extend_from_slice(r);
                features.extend(h.iter().zip(r).map(|(a, b)| a * b));
                features.extend(h.iter().zip(r).map(|(a, b)| (a - b).abs()));
            }
            CometKind::Referenceless => {
                features.extend_from_slice(h);
                features.extend_from_slice(s);
            }
        }
        features.extend(h.iter().zip(s).map(|(a, b)| a * b));
        features.extend(h.iter().zip(s).map(|(a, b)| (a - b).abs()));
        truncated.push(cut);
    }
    let features = Tensor::<2>::from_data(
        TensorData::new(features, [inputs.len(), k * width]),
        &plm.device,
    );
    let (values, _) = read_back(model.estimate(features)).await?;
    Ok(values
        .into_iter()
        .zip(truncated)
        .map(|(v, truncated)| CometScore {
            value: f64::from(v),
            truncated,
        })
        .collect())
}

/// The signature of COMET scores from `model` (the checkpoint's name) of
/// `kind`, at `precision`.
pub fn signature(model: &str, kind: CometKind, precision: &str) -> Signature {
    Signature::new(match kind {
        CometKind::Regression => "comet",
        CometKind::Referenceless => "comet-qe",
    })
    .with("model", model)
    .with("conventions", format!("unbabel-comet-{COMET_VERSION}"))
    .with("precision", precision)
    .versioned()
}
