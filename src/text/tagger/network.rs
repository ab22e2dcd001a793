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
//! The networks are small (about 1.5 M weights each). Every token's layer
//! runs as one matrix product over the text's tokens ([`Matrix`], the same
//! bits natively and in wasm), not a dot product per token and output:
//! `cargo bench --bench inject`'s tagger group (release) took 1.32 s with
//! the kernel's AVX lanes instead of 3.33 s. rten-gemm's kernels (1.41 s)
//! fuse multiply-adds and the page's cannot, so a near-tie between two tags
//! could go one way in the CLI and the other in the page. The entity parser's steps depend on
//! its earlier moves, so its upper layer runs one token at a time.

use std::collections::HashMap;

use safetensors::SafeTensors;
use safetensors::tensor::Dtype;

use super::attrs::hash_key;
use crate::kernels::Matrix;

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
    /// `W` [out, pieces, in] as one product per row of inputs, with `b`.
    product: Matrix,
    pieces: usize,
    gain: Vec<f32>,
    beta: Vec<f32>,
}

impl MaxoutNorm {
    fn load(st: &SafeTensors, name: &str) -> Result<Self, WeightError> {
        let w = weight(st, &format!("{name}.W"), 3)?;
        let b = weight(st, &format!("{name}.b"), 2)?;
        let gain = weight(st, &format!("{name}.G"), 1)?.data;
        let beta = weight(st, &format!("{name}.beta"), 1)?.data;
        let (o, p, i) = (w.shape[0], w.shape[1], w.shape[2]);
        if b.shape != [o, p] || gain.len() != o || beta.len() != o || o * p == 0 {
            return Err(WeightError::Tensor(name.to_owned()));
        }
        Ok(Self {
            product: Matrix::from_rows(&w.data, o * p, i, Some(b.data)),
            pieces: p,
            gain,
            beta,
        })
    }

    fn n_in(&self) -> usize {
        self.product.k()
    }

    /// LayerNorm(max_p(W x + b)) of each row of `x` ([rows, in] to [rows, out]).
    fn forward(&self, x: &[f32]) -> Vec<f32> {
        let n_out = self.gain.len();
        let mut out = Vec::with_capacity(x.len() / self.n_in().max(1) * n_out);
        // A book's tokens a block at a time: the products before the maxout
        // are `pieces` times the output, and a block of them stays in cache
        // (all at once, the kernel spent half of a 20k-word text's tagging
        // handing out fresh pages).
        for block in x.chunks(ROWS_PER_PRODUCT * self.n_in().max(1)) {
            self.maxout_norm(&self.product.apply(block), &mut out);
        }
        out
    }

    /// Appends the maxout and normalisation of each row of `unmaxed` to `out`.
    fn maxout_norm(&self, unmaxed: &[f32], out: &mut Vec<f32>) {
        let n_out = self.gain.len();
        for row in unmaxed.chunks_exact(n_out * self.pieces) {
            let start = out.len();
            out.extend(
                row.chunks_exact(self.pieces)
                    .map(|p| p.iter().copied().fold(f32::NEG_INFINITY, f32::max)),
            );
            let y = &mut out[start..];
            let n = n_out as f32;
            let mean = y.iter().sum::<f32>() / n;
            let var = y.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / n + 1e-8;
            let inv = var.powf(-0.5);
            for ((v, g), b) in y.iter_mut().zip(&self.gain).zip(&self.beta) {
                *v = (*v - mean) * inv * g + b;
            }
        }
    }
}

/// Tokens per product of a maxout layer.
const ROWS_PER_PRODUCT: usize = 256;

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
        let width = mix.gain.len();
        let encoders = (0..4)
            .map(|i| MaxoutNorm::load(st, &format!("{prefix}.encode.{i}")))
            .collect::<Result<Vec<_>, _>>()?;
        let bad_table = tables.iter().any(|(_, t)| t.shape[1] != width);
        if bad_table
            || mix.n_in() != width * tables.len()
            || encoders
                .iter()
                .any(|e| e.n_in() != 3 * width || e.gain.len() != width)
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
        let columns = self.tables.len() * w;
        let mut concat = vec![0.0; n * columns];
        for (values, row) in attrs.iter().zip(concat.chunks_exact_mut(columns)) {
            for (c, ((seed, table), &value)) in self.tables.iter().zip(values).enumerate() {
                let rows = table.shape[0] as u32;
                for key in hash_key(value, *seed) {
                    let embedded = &table.data[(key % rows) as usize * w..][..w];
                    for (acc, v) in row[c * w..(c + 1) * w].iter_mut().zip(embedded) {
                        *acc += v;
                    }
                }
            }
        }
        let mut x = self.mix.forward(&concat);
        // Each token's window: itself between its neighbours (zeros past
        // the ends), one row per token, for all tokens' products at once.
        let mut windows = vec![0.0; n * 3 * w];
        for encoder in &self.encoders {
            for (t, window) in windows.chunks_exact_mut(3 * w).enumerate() {
                window.fill(0.0);
                if t > 0 {
                    window[..w].copy_from_slice(&x[(t - 1) * w..t * w]);
                }
                window[w..2 * w].copy_from_slice(&x[t * w..(t + 1) * w]);
                if t + 1 < n {
                    window[2 * w..].copy_from_slice(&x[(t + 1) * w..(t + 2) * w]);
                }
            }
            let delta = encoder.forward(&windows);
            for (o, d) in x.iter_mut().zip(&delta) {
                *o += d;
            }
        }
        x
    }
}

/// A dense layer: `W` [out, in], `b` [out].
#[derive(Debug, Clone)]
pub struct Linear {
    product: Matrix,
}

impl Linear {
    /// Loads `{name}.W` and `{name}.b`.
    pub fn load(st: &SafeTensors, name: &str) -> Result<Self, WeightError> {
        let w = weight(st, &format!("{name}.W"), 2)?;
        let b = weight(st, &format!("{name}.b"), 1)?.data;
        if b.len() != w.shape[0] {
            return Err(WeightError::Tensor(name.to_owned()));
        }
        Ok(Self {
            product: Matrix::from_rows(&w.data, w.shape[0], w.shape[1], Some(b)),
        })
    }

    /// Output size.
    pub fn n_out(&self) -> usize {
        self.product.n()
    }

    /// Input size.
    pub fn n_in(&self) -> usize {
        self.product.k()
    }

    /// W x + b for each row of `x` ([rows, in] to [rows, out]).
    pub fn forward(&self, x: &[f32]) -> Vec<f32> {
        self.product.apply(x)
    }
}

/// The greedy BILUO entity parser on top of its own tok2vec.
#[derive(Debug, Clone)]
pub struct Ner {
    tok2vec: Tok2Vec,
    project: Linear,
    /// [features=3, hidden, pieces, in], one product per token.
    lower: Matrix,
    /// (features, hidden, pieces) of `lower`.
    lower_shape: (usize, usize, usize),
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
            lower: Matrix::from_rows(&lower.data, f * h * p, i, None),
            lower_shape: (f, h, p),
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
        let (f, h, p) = self.lower_shape;
        // Each token's contribution to each feature slot: [n, f, h*p].
        let cached = self.lower.apply(&self.project.forward(&vectors));
        let mut out = Vec::new();
        let mut open: Option<(String, usize)> = None;
        let mut unmaxed = vec![0.0; h * p];
        let mut hidden = vec![0.0; h];
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
            let scores = self.upper.forward(&hidden);
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
