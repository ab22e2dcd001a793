//! DeBERTa (v1, `model_type: deberta`: deberta-large-mnli, deberta-xlarge-mnli)
//! and DeBERTa-v2/v3 (`deberta-v2`: deberta-v2-xlarge-mnli, deberta-v3,
//! mDeBERTa-v3): BERT-style post-norm layers whose attention
//! adds, to the content-to-content scores, content-to-position (c2p) and
//! position-to-content (p2c) scores read from relative-position embeddings,
//! with relative distances bucketed logarithmically past half the bucket
//! count; optionally a convolution after the first layer (v2-xlarge),
//! absolute positions and token types, and narrower embeddings projected up.
//! The classifier pools the first token through a dense layer and gelu.
//!
//! v1 differs only in its projections: one bias-free `in_proj` holding each
//! head's query, key and value side by side, with separate query and value
//! biases, and a bias-free c2p position projection (`pos_proj`). Its relative
//! embeddings are sliced to the attention span before indexing, which picks
//! the same rows as indexing the whole table at `distance + max_relative`,
//! as done here for both versions.
//!
//! Parameter names follow the checkpoint once [`checkpoint_key_map`] has
//! renamed `attention.self` (a Rust keyword), `LayerNorm` and the output
//! projections.

use burn::module::{Module, Param};
use burn::nn::conv::{Conv1d, Conv1dConfig};
use burn::nn::{
    Embedding, EmbeddingConfig, LayerNorm, LayerNormConfig, Linear, LinearConfig, PaddingConfig1d,
};
use burn::tensor::{Bool, Device, Int, Tensor, TensorData, activation};

use super::ModelError;
use super::config::{Activation, Common, Family, Head, ModelConfig, Sizes, fields, need};
use super::dense::Project;
use super::network::{Architecture, owned_map};
use super::norm::add_norm;
use super::{Batch, activate};
use crate::models::bert::split_heads;

/// How a checkpoint's attention reads relative positions (`config.json`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DebertaConfig {
    /// DeBERTa v1 (`model_type: deberta`): fused `in_proj`, no buckets.
    pub v1: bool,
    /// Relative attention on at all.
    pub relative_attention: bool,
    /// Content-to-position scores.
    pub c2p: bool,
    /// Position-to-content scores.
    pub p2c: bool,
    /// Position scores reuse the content projections (v3) instead of their own.
    pub share_att_key: bool,
    /// Log buckets (`position_buckets`; 0: exact distances).
    pub position_buckets: usize,
    /// Largest distance told apart (`max_relative_positions`, else the positions).
    pub max_relative_positions: usize,
    /// A layer norm on the relative embeddings (`norm_rel_ebd: layer_norm`).
    pub norm_rel_embeddings: bool,
    /// Kernel of the convolution after the first layer (0: none).
    pub conv_kernel_size: usize,
    /// Its groups.
    pub conv_groups: usize,
    /// Its activation (tanh by default; gelu in v2-xlarge).
    pub conv_activation: ConvActivation,
    /// Absolute positions added to the embeddings (`position_biased_input`).
    pub position_biased_input: bool,
}

impl DebertaConfig {
    /// Relative embeddings per direction: the buckets, else the distances.
    pub fn span(&self) -> usize {
        if self.position_buckets > 0 {
            self.position_buckets
        } else {
            self.max_relative_positions
        }
    }
}

/// Activation of the convolution after the first layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConvActivation {
    /// tanh (the default).
    Tanh,
    /// Exact GELU.
    Gelu,
}

/// Word, optional position and token-type embeddings, projected and normalised.
#[derive(Module, Debug)]
pub struct Embeddings {
    /// Token embeddings.
    pub word_embeddings: Embedding,
    /// Absolute positions (`position_biased_input`).
    pub position_embeddings: Option<Embedding>,
    /// Segment embeddings (`type_vocab_size > 0`).
    pub token_type_embeddings: Option<Embedding>,
    /// Projection of narrower embeddings, without bias.
    pub embed_proj: Option<Linear>,
    /// Norm of the sum.
    pub layer_norm: LayerNorm,
}

/// Disentangled self-attention: content and relative-position projections.
#[derive(Module, Debug)]
pub struct Attention {
    /// Query projection (v2).
    pub query_proj: Option<Linear>,
    /// Key projection (v2).
    pub key_proj: Option<Linear>,
    /// Value projection (v2).
    pub value_proj: Option<Linear>,
    /// v1: query, key and value of each head side by side, without bias.
    pub in_proj: Option<Linear>,
    /// v1: the query bias.
    pub q_bias: Option<Param<Tensor<1>>>,
    /// v1: the value bias.
    pub v_bias: Option<Param<Tensor<1>>>,
    /// Position keys for c2p, when not shared with `key_proj`.
    pub pos_key_proj: Option<Linear>,
    /// Position queries for p2c, when not shared with `query_proj`.
    pub pos_query_proj: Option<Linear>,
    /// Number of heads.
    pub num_heads: usize,
}

/// One post-norm layer.
#[derive(Module, Debug)]
pub struct Layer {
    /// Disentangled self-attention.
    pub attention: Attention,
    /// Attention output projection.
    pub attention_output: Linear,
    /// Norm after the attention residual.
    pub attention_norm: LayerNorm,
    /// Feed-forward up projection.
    pub intermediate: Linear,
    /// Feed-forward down projection.
    pub output: Linear,
    /// Norm after the feed-forward residual.
    pub output_norm: LayerNorm,
    /// Feed-forward activation.
    #[module(skip)]
    pub activation: Activation,
    /// The norms' epsilon (for [`add_norm`]).
    #[module(skip)]
    pub norm_eps: f64,
}

/// The convolution over the embeddings added after the first layer.
#[derive(Module, Debug)]
pub struct ConvLayer {
    /// The 1-D convolution over positions.
    pub conv: Conv1d,
    /// Norm of the first layer's output plus the convolution.
    pub layer_norm: LayerNorm,
}

/// The layers with the shared relative embeddings.
#[derive(Module, Debug)]
pub struct Encoder {
    /// Layers.
    pub layer: Vec<Layer>,
    /// Relative-position embeddings (`2 × span` rows).
    pub rel_embeddings: Option<Embedding>,
    /// Norm of the relative embeddings.
    pub layer_norm: Option<LayerNorm>,
    /// Convolution after the first layer.
    pub conv: Option<ConvLayer>,
}

/// A DeBERTa-v2/v3 encoder with its optional classification head.
#[derive(Module, Debug)]
pub struct DebertaModel {
    /// Input embeddings.
    pub embeddings: Embeddings,
    /// The encoder.
    pub encoder: Encoder,
    /// The context pooler's dense layer (classification checkpoints).
    pub pooler: Option<Linear>,
    /// Projection to class logits.
    pub classifier: Option<Linear>,
    /// Relative attention settings.
    #[module(skip)]
    pub settings: DebertaConfig,
    /// The pooler's activation (`pooler_hidden_act`).
    #[module(skip)]
    pub pooler_activation: Activation,
}

fn linear(d_in: usize, d_out: usize, device: &Device) -> Linear {
    LinearConfig::new(d_in, d_out).init(device)
}

impl DebertaModel {
    /// The module tree for `config` with its relative-attention settings
    /// `s`, weights fresh until a checkpoint loads.
    pub fn new(config: &ModelConfig, s: &DebertaConfig, device: &Device) -> Self {
        let h = config.hidden_size;
        let e = config.embedding_size.unwrap_or(h);
        let norm = || {
            LayerNormConfig::new(h)
                .with_epsilon(config.layer_norm_eps)
                .init(device)
        };
        let embeddings = Embeddings {
            word_embeddings: EmbeddingConfig::new(config.vocab_size, e).init(device),
            position_embeddings: s
                .position_biased_input
                .then(|| EmbeddingConfig::new(config.max_positions, e).init(device)),
            token_type_embeddings: (config.type_vocab_size > 0)
                .then(|| EmbeddingConfig::new(config.type_vocab_size, e).init(device)),
            embed_proj: config
                .embedding_size
                .map(|e| LinearConfig::new(e, h).with_bias(false).init(device)),
            layer_norm: norm(),
        };
        let own = |wanted: bool, bias: bool| {
            (wanted && s.relative_attention && !s.share_att_key)
                .then(|| LinearConfig::new(h, h).with_bias(bias).init(device))
        };
        let v2 = || (!s.v1).then(|| linear(h, h, device));
        let bias = || s.v1.then(|| Param::from_tensor(Tensor::zeros([h], device)));
        let layer = (0..config.num_layers)
            .map(|_| Layer {
                attention: Attention {
                    query_proj: v2(),
                    key_proj: v2(),
                    value_proj: v2(),
                    in_proj: s
                        .v1
                        .then(|| LinearConfig::new(h, 3 * h).with_bias(false).init(device)),
                    q_bias: bias(),
                    v_bias: bias(),
                    // v1's c2p projection has no bias; its p2c one has.
                    pos_key_proj: own(s.c2p, !s.v1),
                    pos_query_proj: own(s.p2c, true),
                    num_heads: config.num_heads,
                },
                attention_output: linear(h, h, device),
                attention_norm: norm(),
                intermediate: linear(h, config.intermediate_size, device),
                output: linear(config.intermediate_size, h, device),
                output_norm: norm(),
                activation: config.activation,
                norm_eps: config.layer_norm_eps,
            })
            .collect();
        let conv = (s.conv_kernel_size > 0).then(|| ConvLayer {
            conv: Conv1dConfig::new(h, h, s.conv_kernel_size)
                .with_groups(s.conv_groups)
                .with_padding(PaddingConfig1d::Explicit(
                    (s.conv_kernel_size - 1) / 2,
                    (s.conv_kernel_size - 1) / 2,
                ))
                .init(device),
            layer_norm: norm(),
        });
        let classifier_head = config.head == Head::SequenceClassification;
        Self {
            embeddings,
            encoder: Encoder {
                layer,
                rel_embeddings: s
                    .relative_attention
                    .then(|| EmbeddingConfig::new(2 * s.span(), h).init(device)),
                layer_norm: (s.relative_attention && s.norm_rel_embeddings).then(norm),
                conv,
            },
            pooler: classifier_head.then(|| linear(h, h, device)),
            classifier: classifier_head.then(|| linear(h, config.labels.len(), device)),
            settings: *s,
            pooler_activation: config.pooler_activation,
        }
    }

    /// Runs the encoder over a padded batch: the embeddings' output then
    /// every layer's (`num_layers + 1` tensors, as transformers returns them).
    pub fn forward(&self, batch: &Batch) -> Vec<Tensor<3>> {
        self.forward_layers(batch, self.encoder.layer.len())
    }

    /// The embeddings and the first `layers` layers only: `layers + 1`
    /// hidden states.
    pub fn forward_layers(&self, batch: &Batch, layers: usize) -> Vec<Tensor<3>> {
        let device = batch.ids.device();
        let [b, l] = batch.ids.dims();
        let e = &self.embeddings;
        let mut x = e.word_embeddings.forward(batch.ids.clone());
        if let Some(p) = &e.position_embeddings {
            x = x + p.forward(batch.positions.clone());
        }
        if let Some(t) = &e.token_type_embeddings {
            x = x + t.forward(batch.types.clone());
        }
        if let Some(p) = &e.embed_proj {
            x = p.project(x);
        }
        // Padding is zeroed, as transformers multiplies by the mask (the
        // convolution reads the neighbours of the last real token).
        let mask: Vec<f32> = batch
            .lengths
            .iter()
            .flat_map(|&n| (0..l).map(move |i| if i < n { 1.0 } else { 0.0 }))
            .collect();
        let mask: Tensor<3> = Tensor::from_data(TensorData::new(mask, [b, l, 1]), &device);
        let embedded = e.layer_norm.forward(x) * mask.clone();
        let relative = self.relative(l, b, &device);
        let mut hidden_states = Vec::with_capacity(layers + 1);
        hidden_states.push(embedded.clone());
        let mut x = embedded.clone();
        for (i, layer) in self.encoder.layer.iter().take(layers).enumerate() {
            x = layer.forward(x, batch.padding.clone(), relative.as_ref(), &self.settings);
            if i == 0
                && let Some(conv) = &self.encoder.conv
            {
                x = conv.forward(
                    embedded.clone(),
                    x,
                    mask.clone(),
                    self.settings.conv_activation,
                );
            }
            hidden_states.push(x.clone());
        }
        hidden_states
    }

    /// The relative embeddings (normalised where the config says) and the
    /// c2p and p2c gather indices for `l` tokens, expanded over the batch
    /// and heads.
    fn relative(&self, l: usize, b: usize, device: &Device) -> Option<Relative> {
        let table = self.encoder.rel_embeddings.as_ref()?;
        let s = &self.settings;
        let span = s.span();
        let mut rel = table.weight.val();
        if let Some(norm) = &self.encoder.layer_norm {
            rel = norm.forward(rel);
        }
        let heads = self
            .encoder
            .layer
            .first()
            .map_or(1, |x| x.attention.num_heads);
        // idx[q][k]: the bucket of q - k shifted into 0..2·span.
        let index = |q: usize, k: usize| {
            let r = bucket(
                q as i64 - k as i64,
                s.position_buckets,
                s.max_relative_positions,
            );
            (r + span as i64).clamp(0, 2 * span as i64 - 1)
        };
        let c2p: Vec<i64> = (0..l * l).map(|n| index(n / l, n % l)).collect();
        // p2c gathers along the key rows: its matrix is c2p's transposed.
        let p2c: Vec<i64> = (0..l * l).map(|n| index(n % l, n / l)).collect();
        let expand = |v: Vec<i64>| {
            Tensor::<2, Int>::from_data(TensorData::new(v, [l, l]), device)
                .reshape([1, 1, l, l])
                .expand([b, heads, l, l])
        };
        Some(Relative {
            embeddings: rel.unsqueeze::<3>(),
            c2p: expand(c2p),
            p2c: expand(p2c),
        })
    }

    /// Class logits `[batch, classes]`: the first token through the pooler
    /// and its activation, then the classifier; None without that head.
    pub fn class_logits(&self, last_hidden: Tensor<3>) -> Option<Tensor<2>> {
        let (pooler, classifier) = (self.pooler.as_ref()?, self.classifier.as_ref()?);
        let [b, _, h] = last_hidden.dims();
        let first = last_hidden.slice([0..b, 0..1, 0..h]).reshape([b, h]);
        Some(classifier.project(activate(pooler.project(first), self.pooler_activation)))
    }
}

/// What every layer's attention reads of the relative positions.
struct Relative {
    /// `[1, 2·span, hidden]`.
    embeddings: Tensor<3>,
    /// `[batch, heads, q, k]`: column of the c2p scores for each pair.
    c2p: Tensor<4, Int>,
    /// `[batch, heads, k, q]`: column of the p2c scores, by key row.
    p2c: Tensor<4, Int>,
}

/// transformers' `make_log_bucket_position` for one distance, in float32
/// as torch computes it (so bucket edges fall where they fall there).
pub fn bucket(relative: i64, buckets: usize, max_position: usize) -> i64 {
    if buckets == 0 || max_position == 0 {
        return relative;
    }
    let mid = (buckets / 2) as i64;
    let abs = if relative < mid && relative > -mid {
        mid - 1
    } else {
        relative.abs()
    };
    if abs <= mid {
        return relative;
    }
    let ratio = ((max_position as f64 - 1.0) / mid as f64) as f32;
    let log_pos =
        ((abs as f32 / mid as f32).ln() / ratio.ln() * (mid - 1) as f32).ceil() + mid as f32;
    log_pos as i64 * relative.signum()
}

impl Layer {
    fn forward(
        &self,
        x: Tensor<3>,
        padding: Tensor<4, Bool>,
        relative: Option<&Relative>,
        settings: &DebertaConfig,
    ) -> Tensor<3> {
        let attended = self
            .attention
            .forward(x.clone(), padding, relative, settings);
        let projected = self.attention_output.project(attended);
        let x = add_norm(&self.attention_norm, self.norm_eps, x, projected);
        let inner = activate(self.intermediate.project(x.clone()), self.activation);
        let down = self.output.project(inner);
        add_norm(&self.output_norm, self.norm_eps, x, down)
    }
}

impl Attention {
    fn forward(
        &self,
        x: Tensor<3>,
        padding: Tensor<4, Bool>,
        relative: Option<&Relative>,
        s: &DebertaConfig,
    ) -> Tensor<3> {
        let (q, k, v) = self.content(x);
        let [b, heads, l, d] = v.dims();
        let weights = self.weights(q, k, padding, relative, s);
        weights.matmul(v).swap_dims(1, 2).reshape([b, l, heads * d])
    }

    /// The attention probabilities `[batch, heads, queries, keys]` of the
    /// content query and key: content-to-content plus the relative terms
    /// the config enables, scaled, masked, softmaxed.
    fn weights(
        &self,
        q: Tensor<4>,
        k: Tensor<4>,
        padding: Tensor<4, Bool>,
        relative: Option<&Relative>,
        s: &DebertaConfig,
    ) -> Tensor<4> {
        let heads = self.num_heads;
        let [b, _, _, d] = q.dims();
        let with_positions = relative.is_some() && s.relative_attention;
        let factor =
            1 + usize::from(with_positions && s.c2p) + usize::from(with_positions && s.p2c);
        let scale = ((d * factor) as f32).sqrt();
        let mut scores = q
            .clone()
            .matmul(k.clone().swap_dims(2, 3))
            .div_scalar(scale);
        if let Some(r) = relative.filter(|_| s.relative_attention) {
            let rows = r.embeddings.dims()[1];
            let project = |own: &Option<Linear>, shared: &Option<Linear>| {
                let layer = own
                    .as_ref()
                    .or(shared.as_ref())
                    .expect("a position projection, own or shared, for each position term");
                let p = layer.project(r.embeddings.clone());
                split_heads(p, heads).expand([b, heads, rows, d])
            };
            if s.c2p {
                let pos_key = project(&self.pos_key_proj, &self.key_proj);
                let c2p = q.matmul(pos_key.swap_dims(2, 3)).gather(3, r.c2p.clone());
                scores = scores + c2p.div_scalar(scale);
            }
            if s.p2c {
                let pos_query = project(&self.pos_query_proj, &self.query_proj);
                let p2c = k
                    .matmul(pos_query.swap_dims(2, 3))
                    .gather(3, r.p2c.clone())
                    .swap_dims(2, 3);
                scores = scores + p2c.div_scalar(scale);
            }
        }
        activation::softmax(scores.mask_fill(padding, f32::NEG_INFINITY), 3)
    }
}

impl Attention {
    /// Query, key and value `[batch, heads, tokens, head_dim]`: v2's three
    /// projections, or v1's fused one with its query and value biases.
    fn content(&self, x: Tensor<3>) -> (Tensor<4>, Tensor<4>, Tensor<4>) {
        let heads = self.num_heads;
        let (Some(in_proj), Some(q_bias), Some(v_bias)) =
            (&self.in_proj, &self.q_bias, &self.v_bias)
        else {
            let project = |p: &Option<Linear>| {
                split_heads(
                    p.as_ref()
                        .expect("v2 attention has its three projections")
                        .project(x.clone()),
                    heads,
                )
            };
            return (
                project(&self.query_proj),
                project(&self.key_proj),
                project(&self.value_proj),
            );
        };
        // transformers' view [b, l, heads, 3 d] then chunk(3) on the last axis.
        let qkv = in_proj.project(x);
        let [b, l, h3] = qkv.dims();
        let d = h3 / (3 * heads);
        let qkv = qkv.reshape([b, l, heads, 3 * d]).swap_dims(1, 2);
        let part = |i: usize| {
            qkv.clone()
                .slice([0..b, 0..heads, 0..l, i * d..(i + 1) * d])
        };
        let per_head = |p: &Param<Tensor<1>>| p.val().reshape([1, heads, 1, d]);
        (
            part(0) + per_head(q_bias),
            part(1),
            part(2) + per_head(v_bias),
        )
    }
}

impl ConvLayer {
    fn forward(
        &self,
        embedded: Tensor<3>,
        residual: Tensor<3>,
        mask: Tensor<3>,
        act: ConvActivation,
    ) -> Tensor<3> {
        let out = self.conv.forward(embedded.swap_dims(1, 2)).swap_dims(1, 2) * mask.clone();
        let out = match act {
            ConvActivation::Tanh => activation::tanh(out),
            ConvActivation::Gelu => activation::gelu(out),
        };
        self.layer_norm.forward(residual + out) * mask
    }
}

/// Key renames from DeBERTa (v1 and v2) checkpoints to this module tree, in order.
pub fn checkpoint_key_map() -> Vec<(&'static str, &'static str)> {
    vec![
        (r"^deberta\.", ""),
        (r"\.attention\.self\.pos_proj\.", ".attention.pos_key_proj."),
        (
            r"\.attention\.self\.pos_q_proj\.",
            ".attention.pos_query_proj.",
        ),
        (r"^pooler\.dense\.", "pooler."),
        (r"\.attention\.self\.", ".attention."),
        (r"\.attention\.output\.dense\.", ".attention_output."),
        (r"\.attention\.output\.LayerNorm\.", ".attention_norm."),
        (r"\.intermediate\.dense\.", ".intermediate."),
        (r"\.output\.dense\.", ".output."),
        (r"\.output\.LayerNorm\.", ".output_norm."),
        (r"LayerNorm\.", "layer_norm."),
    ]
}

/// DeBERTa's `config.json`, under transformers' names (`DebertaConfig`,
/// `DebertaV2Config`), with their defaults.
#[derive(serde::Deserialize)]
struct DebertaJson {
    hidden_size: Option<usize>,
    embedding_size: Option<usize>,
    num_hidden_layers: Option<usize>,
    num_attention_heads: Option<usize>,
    /// Default 4 x `hidden_size`.
    intermediate_size: Option<usize>,
    max_position_embeddings: Option<usize>,
    /// Default 0.
    type_vocab_size: Option<usize>,
    /// Default 1e-7.
    layer_norm_eps: Option<f64>,
    /// Default `gelu`.
    hidden_act: Option<String>,
    pooler_hidden_size: Option<usize>,
    /// Default `gelu`.
    pooler_hidden_act: Option<String>,
    relative_attention: Option<bool>,
    position_buckets: Option<i64>,
    max_relative_positions: Option<i64>,
    /// `c2p|p2c` or a list.
    pos_att_type: Option<serde_json::Value>,
    share_att_key: Option<bool>,
    norm_rel_ebd: Option<String>,
    conv_kernel_size: Option<usize>,
    conv_groups: Option<usize>,
    conv_act: Option<String>,
    position_biased_input: Option<bool>,
    talking_head: Option<bool>,
}

/// A DeBERTa `config.json`: v1 (`model_type: deberta`) or v2/v3
/// (`deberta-v2`), an encoder or a classifier.
pub(crate) fn read_config(
    json: &serde_json::Value,
    common: Common,
    v1: bool,
) -> Result<ModelConfig, ModelError> {
    let head = common.encoder_head()?;
    if head == Head::MaskedLm {
        return Err(ModelError::Unsupported(
            "DeBERTa's masked-LM head is not supported; its encoder and classifiers are".into(),
        ));
    }
    let raw: DebertaJson = fields(json)?;
    let hidden_size = need(raw.hidden_size, "hidden_size")?;
    let settings = relative_settings(&raw, v1)?;
    if raw.pooler_hidden_size.is_some_and(|p| p != hidden_size) {
        return Err(ModelError::Unsupported(
            "a DeBERTa pooler narrower or wider than hidden_size is not supported".into(),
        ));
    }
    let sizes = Sizes {
        hidden_size,
        embedding_size: raw.embedding_size.filter(|&e| e != hidden_size),
        num_layers: need(raw.num_hidden_layers, "num_hidden_layers")?,
        num_heads: need(raw.num_attention_heads, "num_attention_heads")?,
        intermediate_size: raw.intermediate_size.unwrap_or(4 * hidden_size),
        max_positions: need(raw.max_position_embeddings, "max_position_embeddings")?,
        type_vocab_size: raw.type_vocab_size.unwrap_or(0),
        layer_norm_eps: raw.layer_norm_eps.unwrap_or(1e-7),
        activation: Activation::named(raw.hidden_act.as_deref().unwrap_or("gelu"))?,
        pooler_activation: Activation::named(raw.pooler_hidden_act.as_deref().unwrap_or("gelu"))?,
    };
    ModelConfig::assemble(common, Family::Deberta(settings), head, sizes)
}

/// DeBERTa's relative-attention settings, with transformers' defaults.
fn relative_settings(raw: &DebertaJson, v1: bool) -> Result<DebertaConfig, ModelError> {
    if raw.talking_head == Some(true) {
        return Err(ModelError::Unsupported(
            "DeBERTa's talking heads (`talking_head`) are not supported".into(),
        ));
    }
    if v1 && (raw.position_buckets.is_some_and(|b| b > 0) || raw.share_att_key == Some(true)) {
        return Err(ModelError::Config(
            "a DeBERTa v1 config (`model_type: deberta`) with v2 options (position_buckets, \
             share_att_key): is its model_type deberta-v2?"
                .into(),
        ));
    }
    let kinds: Vec<String> = match &raw.pos_att_type {
        None | Some(serde_json::Value::Null) => vec![],
        Some(serde_json::Value::String(s)) => {
            s.split('|').map(|t| t.trim().to_lowercase()).collect()
        }
        Some(serde_json::Value::Array(items)) => items
            .iter()
            .filter_map(|v| v.as_str().map(str::to_lowercase))
            .collect(),
        Some(other) => {
            return Err(ModelError::Config(format!(
                "pos_att_type {other} is not a list"
            )));
        }
    };
    if let Some(k) = kinds
        .iter()
        .find(|k| !matches!(k.as_str(), "c2p" | "p2c" | ""))
    {
        return Err(ModelError::Unsupported(format!(
            "pos_att_type `{k}` is not supported"
        )));
    }
    let max_positions = raw.max_position_embeddings.unwrap_or(512);
    let max_relative = raw
        .max_relative_positions
        .filter(|&m| m >= 1)
        .map_or(max_positions, |m| m as usize);
    Ok(DebertaConfig {
        v1,
        relative_attention: raw.relative_attention.unwrap_or(false),
        c2p: kinds.iter().any(|k| k == "c2p"),
        p2c: kinds.iter().any(|k| k == "p2c"),
        share_att_key: raw.share_att_key.unwrap_or(false),
        position_buckets: raw
            .position_buckets
            .filter(|&b| b > 0)
            .map_or(0, |b| b as usize),
        max_relative_positions: max_relative,
        norm_rel_embeddings: raw.norm_rel_ebd.as_deref().is_some_and(|n| {
            n.to_lowercase()
                .split('|')
                .any(|x| x.trim() == "layer_norm")
        }),
        conv_kernel_size: raw.conv_kernel_size.unwrap_or(0),
        conv_groups: raw.conv_groups.unwrap_or(1).max(1),
        conv_activation: match raw.conv_act.as_deref().unwrap_or("tanh") {
            "tanh" => ConvActivation::Tanh,
            "gelu" => ConvActivation::Gelu,
            other => {
                return Err(ModelError::Unsupported(format!(
                    "conv_act `{other}` is not supported (tanh, gelu)"
                )));
            }
        },
        position_biased_input: raw.position_biased_input.unwrap_or(true),
    })
}

impl Architecture for DebertaModel {
    fn build(config: &ModelConfig, device: &Device) -> Result<Self, ModelError> {
        let settings = config.deberta().ok_or_else(|| {
            ModelError::Config(format!("{} is not a DeBERTa model", config.architecture))
        })?;
        Ok(Self::new(config, settings, device))
    }

    fn key_map(_config: &ModelConfig, _names: Option<&[String]>) -> Vec<(String, String)> {
        owned_map(checkpoint_key_map())
    }

    fn hidden_states(&self, batch: &Batch, layers: usize) -> Vec<Tensor<3>> {
        self.forward_layers(batch, layers)
    }

    fn input_embeddings(&self) -> Tensor<2> {
        self.embeddings.word_embeddings.weight.val()
    }

    /// Each layer's attention over its input (the hidden state before it),
    /// the relative terms included.
    fn attention_probabilities(&self, batch: &Batch) -> Option<Vec<Tensor<4>>> {
        let states = self.forward(batch);
        let [b, l] = batch.ids.dims();
        let relative = self.relative(l, b, &batch.ids.device());
        Some(
            self.encoder
                .layer
                .iter()
                .zip(states)
                .map(|(layer, x)| {
                    let a = &layer.attention;
                    let (q, k, _) = a.content(x);
                    a.weights(
                        q,
                        k,
                        batch.padding.clone(),
                        relative.as_ref(),
                        &self.settings,
                    )
                })
                .collect(),
        )
    }

    fn class_logits(&self, last_hidden: Tensor<3>) -> Option<Tensor<2>> {
        DebertaModel::class_logits(self, last_hidden)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_buckets_match_transformers() {
        // make_log_bucket_position(arange(-40, 41), 8, 64) in torch.
        let ours: Vec<i64> = [-40, -20, -9, -5, -4, -3, 0, 3, 4, 5, 6, 9, 20, 40, 63]
            .iter()
            .map(|&r| bucket(r, 8, 64))
            .collect();
        assert_eq!(ours, [-7, -6, -5, -5, -4, -3, 0, 3, 4, 5, 5, 5, 6, 7, 7]);
        assert_eq!(bucket(-300, 0, 512), -300);
    }
}
