//! The two spaCy `en_core_web_sm` networks, ported layer by layer.
//!
//! - [`Tok2Vec`]: hash embeddings of the lexical attributes, a maxout +
//!   layer-norm mix, then four residual window encoders (each token sees its
//!   neighbours, so four layers see four tokens either side).
//! - The tagger: a linear softmax over the shared tok2vec.
//! - [`Ner`]: its own tok2vec, projected to 64 dimensions, feeding a greedy
//!   transition-based BILUO parser (state = current token, first token of the
//!   open entity, previous token) with a maxout hidden layer.
//!
//! Plain `f32` loops: the networks are small (about 1.5 M weights each) and
//! run a sentence in well under a millisecond natively.

use std::collections::HashMap;

use safetensors::SafeTensors;
use safetensors::tensor::Dtype;

use super::attrs::hash_key;

/// A weight tensor read from the safetensors file, as f32.
#[derive(Debug, Clone)]
pub struct Weight {
    /// Row-major values.
    pub data: Vec<f32>,
    /// Shape.
    pub shape: Vec<usize>,
}

/// Errors reading the weights.
#[derive(Debug, thiserror::Error)]
pub enum WeightError {
    /// The file is not valid safetensors.
    #[error("tagger weights: {0}")]
    Format(String),
    /// A tensor is missing or has the wrong shape.
    #[error("tagger weights: tensor {0} is missing or malformed")]
    Tensor(String),
}

/// Reads a tensor as f32 (stored as f16 or f32), checking its rank.
pub fn weight(st: &SafeTensors, name: &str, rank: usize) -> Result<Weight, WeightError> {
    let view = st
        .tensor(name)
        .map_err(|_| WeightError::Tensor(name.to_owned()))?;
    let bytes = view.data();
    let data: Vec<f32> = match view.dtype() {
        Dtype::F32 => bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect(),
        Dtype::F16 => bytes
            .chunks_exact(2)
            .map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32())
            .collect(),
        _ => return Err(WeightError::Tensor(name.to_owned())),
    };
    if view.shape().len() != rank {
        return Err(WeightError::Tensor(name.to_owned()));
    }
    Ok(Weight {
        data,
        shape: view.shape().to_vec(),
    })
}

/// Maxout over `pieces` followed by layer normalisation (thinc `Maxout`
/// with `normalize=True`).
#[derive(Debug, Clone)]
struct MaxoutNorm {
    /// [out, pieces, in]
    w: Weight,
    /// [out, pieces]
    b: Weight,
    gain: Vec<f32>,
    beta: Vec<f32>,
}

impl MaxoutNorm {
    fn load(st: &SafeTensors, name: &str) -> Result<Self, WeightError> {
        let layer = Self {
            w: weight(st, &format!("{name}.W"), 3)?,
            b: weight(st, &format!("{name}.b"), 2)?,
            gain: weight(st, &format!("{name}.G"), 1)?.data,
            beta: weight(st, &format!("{name}.beta"), 1)?.data,
        };
        let (o, p) = (layer.w.shape[0], layer.w.shape[1]);
        if layer.b.shape != [o, p] || layer.gain.len() != o || layer.beta.len() != o {
            return Err(WeightError::Tensor(name.to_owned()));
        }
        Ok(layer)
    }

    fn n_in(&self) -> usize {
        self.w.shape[2]
    }

    /// `out` = LayerNorm(max_p(W x + b)).
    fn forward(&self, x: &[f32], out: &mut [f32]) {
        let (n_out, pieces, n_in) = (self.w.shape[0], self.w.shape[1], self.w.shape[2]);
        for (o, y) in out.iter_mut().enumerate().take(n_out) {
            let mut best = f32::NEG_INFINITY;
            for p in 0..pieces {
                let row = &self.w.data[(o * pieces + p) * n_in..][..n_in];
                let v = dot(row, x) + self.b.data[o * pieces + p];
                best = best.max(v);
            }
            *y = best;
        }
        let n = n_out as f32;
        let mean = out.iter().sum::<f32>() / n;
        let var = out.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / n + 1e-8;
        let inv = var.powf(-0.5);
        for (o, y) in out.iter_mut().enumerate() {
            *y = (*y - mean) * inv * self.gain[o] + self.beta[o];
        }
    }
}

/// Dot product with eight independent accumulators, so the compiler can
/// vectorise it (a single running sum forces sequential adds).
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = [0f32; 8];
    let chunks = n / 8;
    for (ca, cb) in a.chunks_exact(8).zip(b.chunks_exact(8)) {
        for k in 0..8 {
            acc[k] += ca[k] * cb[k];
        }
    }
    let mut sum: f32 = acc.iter().sum();
    for k in chunks * 8..n {
        sum += a[k] * b[k];
    }
    sum
}

/// Hash embeddings + mix + residual window encoders.
#[derive(Debug, Clone)]
pub struct Tok2Vec {
    /// (seed, table [rows, width]) per attribute.
    tables: Vec<(u32, Weight)>,
    mix: MaxoutNorm,
    encoders: Vec<MaxoutNorm>,
    width: usize,
}

impl Tok2Vec {
    /// Loads `{prefix}.embed.N`, `{prefix}.mix.*`, `{prefix}.encode.N.*`.
    pub fn load(st: &SafeTensors, prefix: &str, seeds: &[u32]) -> Result<Self, WeightError> {
        let tables = seeds
            .iter()
            .enumerate()
            .map(|(i, &seed)| Ok((seed, weight(st, &format!("{prefix}.embed.{i}"), 2)?)))
            .collect::<Result<Vec<_>, WeightError>>()?;
        let mix = MaxoutNorm::load(st, &format!("{prefix}.mix"))?;
        let width = mix.w.shape[0];
        let encoders = (0..4)
            .map(|i| MaxoutNorm::load(st, &format!("{prefix}.encode.{i}")))
            .collect::<Result<Vec<_>, _>>()?;
        let bad_table = tables.iter().any(|(_, t)| t.shape[1] != width);
        if bad_table
            || mix.n_in() != width * tables.len()
            || encoders.iter().any(|e| e.n_in() != 3 * width)
        {
            return Err(WeightError::Tensor(format!("{prefix} shapes")));
        }
        Ok(Self {
            tables,
            mix,
            encoders,
            width,
        })
    }

    /// Output width (96).
    pub fn width(&self) -> usize {
        self.width
    }

    /// Number of attribute columns it reads.
    pub fn columns(&self) -> usize {
        self.tables.len()
    }

    /// Token vectors [n, width] for attribute values [n][columns].
    pub fn forward(&self, attrs: &[Vec<u64>]) -> Vec<f32> {
        let (n, w) = (attrs.len(), self.width);
        let mut concat = vec![0.0; self.tables.len() * w];
        let mut x = vec![0.0; n * w];
        for (t, values) in attrs.iter().enumerate() {
            concat.fill(0.0);
            for (c, ((seed, table), &value)) in self.tables.iter().zip(values).enumerate() {
                let rows = table.shape[0] as u32;
                for key in hash_key(value, *seed) {
                    let row = &table.data[(key % rows) as usize * w..][..w];
                    for (acc, v) in concat[c * w..(c + 1) * w].iter_mut().zip(row) {
                        *acc += v;
                    }
                }
            }
            self.mix.forward(&concat, &mut x[t * w..(t + 1) * w]);
        }
        let mut window = vec![0.0; 3 * w];
        let mut delta = vec![0.0; w];
        let mut next = x.clone();
        for encoder in &self.encoders {
            for t in 0..n {
                window.fill(0.0);
                if t > 0 {
                    window[..w].copy_from_slice(&x[(t - 1) * w..t * w]);
                }
                window[w..2 * w].copy_from_slice(&x[t * w..(t + 1) * w]);
                if t + 1 < n {
                    window[2 * w..].copy_from_slice(&x[(t + 1) * w..(t + 2) * w]);
                }
                encoder.forward(&window, &mut delta);
                for (o, d) in next[t * w..(t + 1) * w].iter_mut().zip(&delta) {
                    *o += d;
                }
            }
            x.copy_from_slice(&next);
        }
        x
    }
}

/// A dense layer: `W` [out, in], `b` [out].
#[derive(Debug, Clone)]
pub struct Linear {
    w: Weight,
    b: Vec<f32>,
}

impl Linear {
    /// Loads `{name}.W` and `{name}.b`.
    pub fn load(st: &SafeTensors, name: &str) -> Result<Self, WeightError> {
        let w = weight(st, &format!("{name}.W"), 2)?;
        let b = weight(st, &format!("{name}.b"), 1)?.data;
        if b.len() != w.shape[0] {
            return Err(WeightError::Tensor(name.to_owned()));
        }
        Ok(Self { w, b })
    }

    /// Output size.
    pub fn n_out(&self) -> usize {
        self.w.shape[0]
    }

    /// Input size.
    pub fn n_in(&self) -> usize {
        self.w.shape[1]
    }

    /// `out` = W x + b.
    pub fn forward(&self, x: &[f32], out: &mut [f32]) {
        let n_in = self.n_in();
        for (o, y) in out.iter_mut().enumerate() {
            *y = dot(&self.w.data[o * n_in..(o + 1) * n_in], x) + self.b[o];
        }
    }
}

/// The greedy BILUO entity parser on top of its own tok2vec.
#[derive(Debug, Clone)]
pub struct Ner {
    tok2vec: Tok2Vec,
    project: Linear,
    /// [features=3, hidden, pieces, in]
    lower: Weight,
    /// [hidden, pieces]
    lower_bias: Vec<f32>,
    /// [1, features, hidden, pieces]
    pad: Vec<f32>,
    upper: Linear,
    moves: Vec<Move>,
}

/// One transition of the entity parser.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Move {
    /// Open an entity of this label.
    Begin(String),
    /// Continue the open entity.
    In(String),
    /// Close the open entity on this token.
    Last(String),
    /// A one-token entity.
    Unit(String),
    /// Outside any entity.
    Out,
    /// A move the model never predicts (spaCy's empty-label unit).
    Never,
}

impl Move {
    fn parse(name: &str) -> Self {
        match name.split_once('-') {
            Some((_, "")) => Move::Never,
            Some(("B", l)) => Move::Begin(l.to_owned()),
            Some(("I", l)) => Move::In(l.to_owned()),
            Some(("L", l)) => Move::Last(l.to_owned()),
            Some(("U", l)) => Move::Unit(l.to_owned()),
            _ if name == "O" => Move::Out,
            _ => Move::Never,
        }
    }
}

/// What the entity parser needs to know about each token.
#[derive(Debug, Clone, Copy)]
pub struct NerToken {
    /// The token starts a sentence (entities never cross one).
    pub sent_start: bool,
    /// A whitespace token (never starts an entity).
    pub is_space: bool,
}

impl Ner {
    /// Loads the `ner.*` tensors.
    pub fn load(st: &SafeTensors, seeds: &[u32], moves: &[String]) -> Result<Self, WeightError> {
        let tok2vec = Tok2Vec::load(st, "ner.tok2vec", seeds)?;
        let project = Linear::load(st, "ner.project")?;
        let lower = weight(st, "ner.lower.W", 4)?;
        let lower_bias = weight(st, "ner.lower.b", 2)?.data;
        let pad = weight(st, "ner.lower.pad", 4)?.data;
        let upper = Linear::load(st, "ner.upper")?;
        let (f, h, p, i) = (
            lower.shape[0],
            lower.shape[1],
            lower.shape[2],
            lower.shape[3],
        );
        let ok = f == 3
            && i == project.n_out()
            && project.n_in() == tok2vec.width()
            && lower_bias.len() == h * p
            && pad.len() == f * h * p
            && upper.n_in() == h
            && upper.n_out() == moves.len();
        if !ok {
            return Err(WeightError::Tensor("ner shapes".into()));
        }
        Ok(Self {
            tok2vec,
            project,
            lower,
            lower_bias,
            pad,
            upper,
            moves: moves.iter().map(|m| Move::parse(m)).collect(),
        })
    }

    /// Number of attribute columns its tok2vec reads.
    pub fn columns(&self) -> usize {
        self.tok2vec.columns()
    }

    /// Entities as (label, token range), greedy as spaCy decodes (beam 1).
    pub fn entities(
        &self,
        attrs: &[Vec<u64>],
        tokens: &[NerToken],
    ) -> Vec<(String, std::ops::Range<usize>)> {
        let n = tokens.len();
        let vectors = self.tok2vec.forward(attrs);
        let width = self.tok2vec.width();
        let (f, h, p, i) = (
            self.lower.shape[0],
            self.lower.shape[1],
            self.lower.shape[2],
            self.lower.shape[3],
        );
        // Precompute each token's contribution to each feature slot: [n, f, h*p].
        let mut projected = vec![0.0; i];
        let mut cached = vec![0.0; n * f * h * p];
        for t in 0..n {
            self.project
                .forward(&vectors[t * width..(t + 1) * width], &mut projected);
            for slot in 0..f {
                for hp in 0..h * p {
                    let row = &self.lower.data[(slot * h * p + hp) * i..][..i];
                    cached[(t * f + slot) * h * p + hp] = dot(row, &projected);
                }
            }
        }
        let mut out = Vec::new();
        let mut open: Option<(String, usize)> = None;
        let mut unmaxed = vec![0.0; h * p];
        let mut hidden = vec![0.0; h];
        let mut scores = vec![0.0; self.moves.len()];
        for b0 in 0..n {
            let ids = match &open {
                Some((_, start)) => [b0 as isize, *start as isize, b0 as isize - 1],
                None => [b0 as isize, -1, -1],
            };
            unmaxed.copy_from_slice(&self.lower_bias);
            for (slot, &id) in ids.iter().enumerate() {
                let feature = match usize::try_from(id) {
                    Ok(t) => &cached[(t * f + slot) * h * p..][..h * p],
                    Err(_) => &self.pad[slot * h * p..][..h * p],
                };
                for (u, v) in unmaxed.iter_mut().zip(feature) {
                    *u += v;
                }
            }
            for (o, y) in hidden.iter_mut().enumerate() {
                *y = unmaxed[o * p..(o + 1) * p]
                    .iter()
                    .copied()
                    .fold(f32::NEG_INFINITY, f32::max);
            }
            self.upper.forward(&hidden, &mut scores);
            let has_next = b0 + 1 < n;
            let next_starts = has_next && tokens[b0 + 1].sent_start;
            let open_label = open.as_ref().map(|(l, _)| l.as_str());
            let valid = |m: &Move| match m {
                Move::Begin(_) => {
                    open.is_none() && has_next && !next_starts && !tokens[b0].is_space
                }
                Move::In(l) => open_label == Some(l) && has_next && !next_starts,
                Move::Last(l) => open_label == Some(l),
                Move::Unit(_) => open.is_none() && !tokens[b0].is_space,
                Move::Out => open.is_none(),
                Move::Never => false,
            };
            let mut best: Option<usize> = None;
            for (k, m) in self.moves.iter().enumerate() {
                if valid(m) && best.is_none_or(|b| scores[k] > scores[b]) {
                    best = Some(k);
                }
            }
            match best.map(|k| &self.moves[k]) {
                Some(Move::Begin(l)) => open = Some((l.clone(), b0)),
                Some(Move::Last(_)) => {
                    if let Some((l, start)) = open.take() {
                        out.push((l, start..b0 + 1));
                    }
                }
                Some(Move::Unit(l)) => out.push((l.clone(), b0..b0 + 1)),
                _ => {}
            }
        }
        out
    }
}

/// Parses the JSON list stored in a metadata field.
pub fn metadata_json<T: serde::de::DeserializeOwned>(
    metadata: &HashMap<String, String>,
    key: &str,
) -> Result<T, WeightError> {
    let text = metadata
        .get(key)
        .ok_or_else(|| WeightError::Format(format!("metadata {key} missing")))?;
    serde_json::from_str(text).map_err(|e| WeightError::Format(format!("metadata {key}: {e}")))
}
