//! BART: a post-norm transformer encoder-decoder with learned positions
//! (offset by 2, as fairseq numbered them), a layer norm on the embeddings
//! of each stack (`layernorm_embedding`), and a language-model head tied to
//! the shared token embeddings plus `final_logits_bias`.
//!
//! The same module tree runs fairseq's own post-norm transformer, which BART
//! grew from (PRISM's m39v1, `model_type: prism`): sinusoidal positions
//! instead of learned ones (fairseq's `SinusoidalPositionalEmbedding`,
//! numbered from `padding_idx + 1` = 2 as well), no embedding norm, token
//! embeddings scaled by sqrt(d_model), no logits bias. A fairseq checkpoint
//! names its tensors without `model.` and stores the shared table under
//! `encoder.embed_tokens` and `decoder.embed_tokens`.
//!
//! Module names mirror the Hugging Face checkpoint
//! (`model.encoder.layers.N.self_attn.q_proj`...), so loading only drops the
//! `model.` prefix; the tied `embed_tokens` and `lm_head` copies are left
//! over.

use burn::module::{Module, Param};
use burn::nn::{Embedding, EmbeddingConfig, LayerNorm, LayerNormConfig, Linear, LinearConfig};
use burn::tensor::{Bool, Device, Int, Tensor};

use super::ModelError;
use super::config::{Activation, Common, Family, Head, ModelConfig, Sizes, fields, need};
use super::dense::{self, Project};
use super::generate::{KvCache, LayerCache, attend_appending, cross_keys_values};
use super::network::{Architecture, EncoderDecoder, tied_copy};
use super::norm::add_norm;
use super::{Batch, activate};
use crate::models::attention::attend;
use crate::models::bert::split_heads;

/// fairseq's learned positions start at 2 (0 and 1 were padding's).
pub const POSITION_OFFSET: i64 = 2;

/// Multi-head attention: self-attention when `memory` is the input,
/// cross-attention when it is the encoder's output.
#[derive(Module, Debug)]
pub struct Attention {
    /// Query projection.
    pub q_proj: Linear,
    /// Key projection.
    pub k_proj: Linear,
    /// Value projection.
    pub v_proj: Linear,
    /// Output projection.
    pub out_proj: Linear,
    /// Number of heads.
    pub num_heads: usize,
}

/// One post-norm encoder layer.
#[derive(Module, Debug)]
pub struct EncoderLayer {
    /// Self-attention.
    pub self_attn: Attention,
    /// Norm after the attention residual.
    pub self_attn_layer_norm: LayerNorm,
    /// Feed-forward up projection.
    pub fc1: Linear,
    /// Feed-forward down projection.
    pub fc2: Linear,
    /// Norm after the feed-forward residual.
    pub final_layer_norm: LayerNorm,
    /// Feed-forward activation.
    #[module(skip)]
    pub activation: Activation,
    /// The norms' epsilon (for [`add_norm`]).
    #[module(skip)]
    pub norm_eps: f64,
}

/// One post-norm decoder layer: causal self-attention, cross-attention to
/// the encoder, feed-forward.
#[derive(Module, Debug)]
pub struct DecoderLayer {
    /// Causal self-attention.
    pub self_attn: Attention,
    /// Norm after the self-attention residual.
    pub self_attn_layer_norm: LayerNorm,
    /// Attention to the encoder output.
    pub encoder_attn: Attention,
    /// Norm after the cross-attention residual.
    pub encoder_attn_layer_norm: LayerNorm,
    /// Feed-forward up projection.
    pub fc1: Linear,
    /// Feed-forward down projection.
    pub fc2: Linear,
    /// Norm after the feed-forward residual.
    pub final_layer_norm: LayerNorm,
    /// Feed-forward activation.
    #[module(skip)]
    pub activation: Activation,
    /// The norms' epsilon (for [`add_norm`]).
    #[module(skip)]
    pub norm_eps: f64,
}

/// One stack's positions, embedding norm and layers.
#[derive(Module, Debug)]
pub struct Stack<L: Module> {
    /// Learned positions (`max_position_embeddings + 2` rows); none where
    /// they are sinusoidal.
    pub embed_positions: Option<Embedding>,
    /// Sinusoidal positions (the same rows, computed, not stored).
    #[module(skip)]
    pub sinusoids: Option<Tensor<2>>,
    /// Norm of the summed embeddings (BART's; fairseq's transformer has none).
    pub layernorm_embedding: Option<LayerNorm>,
    /// Layers.
    pub layers: Vec<L>,
}

/// How a stack numbers its positions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Positions {
    /// A learned table (BART).
    Learned,
    /// fairseq's sinusoids (its transformer, PRISM).
    Sinusoidal,
}

/// fairseq's `SinusoidalPositionalEmbedding.get_embedding`: `rows` positions
/// of `dim` values, the sines of position × 10000^(-j / (dim/2 - 1)) then
/// their cosines (a zero column for an odd `dim`), the padding row (1) zero;
/// computed in f32 as torch computes it.
pub fn sinusoids(rows: usize, dim: usize) -> Vec<f32> {
    let half = dim / 2;
    let step = -((10000f64.ln() / (half.max(2) - 1) as f64) as f32);
    let freq: Vec<f32> = (0..half).map(|j| (j as f32 * step).exp()).collect();
    let mut table = vec![0.0f32; rows * dim];
    for (p, row) in table.chunks_mut(dim).enumerate() {
        if p as i64 == PADDING_POSITION {
            continue;
        }
        for (j, &f) in freq.iter().enumerate() {
            let angle = p as f32 * f;
            row[j] = angle.sin();
            row[half + j] = angle.cos();
        }
    }
    table
}

/// The position row fairseq leaves zero (its `padding_idx`).
const PADDING_POSITION: i64 = 1;

/// BART with its tied language-model head.
#[derive(Module, Debug)]
pub struct BartModel {
    /// Token embeddings shared by both stacks and the output projection.
    pub shared: Embedding,
    /// The encoder.
    pub encoder: Stack<EncoderLayer>,
    /// The decoder.
    pub decoder: Stack<DecoderLayer>,
    /// Added to the output logits, `[1, vocab]` (none in a BartModel checkpoint).
    pub final_logits_bias: Option<Param<Tensor<2>>>,
    /// sqrt(hidden) when `scale_embedding`, else 1.
    #[module(skip)]
    pub embed_scale: f32,
}

fn linear(d_in: usize, d_out: usize, device: &Device) -> Linear {
    LinearConfig::new(d_in, d_out).init(device)
}

fn attention(h: usize, heads: usize, device: &Device) -> Attention {
    Attention {
        q_proj: linear(h, h, device),
        k_proj: linear(h, h, device),
        v_proj: linear(h, h, device),
        out_proj: linear(h, h, device),
        num_heads: heads,
    }
}

impl BartModel {
    /// The module tree for `config` and its `decoder`, weights fresh until a
    /// checkpoint loads.
    pub fn new(config: &ModelConfig, decoder: &DecoderConfig, device: &Device) -> Self {
        let h = config.hidden_size;
        let norm = || {
            LayerNormConfig::new(h)
                .with_epsilon(config.layer_norm_eps)
                .init(device)
        };
        let rows = config.max_positions + POSITION_OFFSET as usize;
        let learned = decoder.positions == Positions::Learned;
        let positions = || learned.then(|| EmbeddingConfig::new(rows, h).init(device));
        let table = (!learned).then(|| {
            Tensor::<2>::from_data(
                burn::tensor::TensorData::new(sinusoids(rows, h), [rows, h]),
                device,
            )
        });
        let embedding_norm = || decoder.layernorm_embedding.then(norm);
        let encoder_layers = (0..config.num_layers)
            .map(|_| EncoderLayer {
                self_attn: attention(h, config.num_heads, device),
                self_attn_layer_norm: norm(),
                fc1: linear(h, config.intermediate_size, device),
                fc2: linear(config.intermediate_size, h, device),
                final_layer_norm: norm(),
                activation: config.activation,
                norm_eps: config.layer_norm_eps,
            })
            .collect();
        let decoder_layers = (0..decoder.num_layers)
            .map(|_| DecoderLayer {
                self_attn: attention(h, decoder.num_heads, device),
                self_attn_layer_norm: norm(),
                encoder_attn: attention(h, decoder.num_heads, device),
                encoder_attn_layer_norm: norm(),
                fc1: linear(h, decoder.intermediate_size, device),
                fc2: linear(decoder.intermediate_size, h, device),
                final_layer_norm: norm(),
                activation: config.activation,
                norm_eps: config.layer_norm_eps,
            })
            .collect();
        Self {
            shared: EmbeddingConfig::new(config.vocab_size, h).init(device),
            encoder: Stack {
                embed_positions: positions(),
                sinusoids: table.clone(),
                layernorm_embedding: embedding_norm(),
                layers: encoder_layers,
            },
            decoder: Stack {
                embed_positions: positions(),
                sinusoids: table,
                layernorm_embedding: embedding_norm(),
                layers: decoder_layers,
            },
            final_logits_bias: decoder
                .logits_bias
                .then(|| Param::from_tensor(Tensor::zeros([1, config.vocab_size], device))),
            embed_scale: if decoder.scale_embedding {
                (h as f32).sqrt()
            } else {
                1.0
            },
        }
    }

    fn embed<L: Module>(
        &self,
        stack: &Stack<L>,
        ids: Tensor<2, Int>,
        positions: Tensor<2, Int>,
    ) -> Tensor<3> {
        let tokens = self.shared.forward(ids).mul_scalar(self.embed_scale);
        let positions = positions.add_scalar(POSITION_OFFSET);
        let placed = match (&stack.embed_positions, &stack.sinusoids) {
            (Some(table), _) => table.forward(positions),
            (None, Some(table)) => {
                let [rows, cols] = positions.dims();
                let [_, h] = table.dims();
                // A skipped field stays where the module was built: an int8
                // load is built on the CPU and then moved.
                let device = positions.device();
                let table = if table.device() == device {
                    table.clone()
                } else {
                    table.clone().to_device(&device)
                };
                table
                    .select(0, positions.reshape([rows * cols]))
                    .reshape([rows, cols, h])
            }
            (None, None) => unreachable!("a stack is built with one kind of positions"),
        };
        let x = tokens + placed;
        match &stack.layernorm_embedding {
            Some(norm) => norm.forward(x),
            None => x,
        }
    }

    /// Runs the encoder over a right-padded batch: the embeddings' output
    /// then every layer's (`num_layers + 1` tensors, as transformers'
    /// `encoder_hidden_states`).
    pub fn encode(&self, batch: &Batch) -> Vec<Tensor<3>> {
        self.run_encoder(batch, true)
    }

    fn run_encoder(&self, batch: &Batch, keep: bool) -> Vec<Tensor<3>> {
        let mut x = self.embed(&self.encoder, batch.ids.clone(), batch.positions.clone());
        let mut hidden_states = Vec::with_capacity(self.encoder.layers.len() + 1);
        for layer in &self.encoder.layers {
            if keep {
                hidden_states.push(x.clone());
            }
            x = layer.forward(x, batch.padding.clone());
        }
        hidden_states.push(x);
        hidden_states
    }
}

impl Attention {
    /// Attention of `x` to `memory` (itself for self-attention), hiding the
    /// keys `padding` marks and, when `causal`, later positions.
    fn forward(
        &self,
        x: Tensor<3>,
        memory: Tensor<3>,
        padding: Option<Tensor<4, Bool>>,
        causal: bool,
    ) -> Tensor<3> {
        let heads = self.num_heads;
        let q = split_heads(self.q_proj.project(x), heads);
        let k = split_heads(self.k_proj.project(memory.clone()), heads);
        let v = split_heads(self.v_proj.project(memory), heads);
        self.out_proj.project(attend(q, k, v, padding, causal))
    }
}

impl EncoderLayer {
    fn forward(&self, x: Tensor<3>, padding: Tensor<4, Bool>) -> Tensor<3> {
        let attended = self
            .self_attn
            .forward(x.clone(), x.clone(), Some(padding), false);
        let x = add_norm(&self.self_attn_layer_norm, self.norm_eps, x, attended);
        let inner = activate(self.fc1.project(x.clone()), self.activation);
        let down = self.fc2.project(inner);
        add_norm(&self.final_layer_norm, self.norm_eps, x, down)
    }
}

impl DecoderLayer {
    fn forward(
        &self,
        x: Tensor<3>,
        memory: Tensor<3>,
        memory_padding: Tensor<4, Bool>,
    ) -> Tensor<3> {
        let attended = self.self_attn.forward(x.clone(), x.clone(), None, true);
        let x = add_norm(&self.self_attn_layer_norm, self.norm_eps, x, attended);
        let crossed = self
            .encoder_attn
            .forward(x.clone(), memory, Some(memory_padding), false);
        self.feed_forward(add_norm(
            &self.encoder_attn_layer_norm,
            self.norm_eps,
            x,
            crossed,
        ))
    }

    /// [`DecoderLayer::forward`] for positions after those whose keys and
    /// values `slot` holds (they join it), over the source's cross-attention
    /// keys and values (no padding: one source, read whole).
    fn forward_cached(
        &self,
        x: Tensor<3>,
        slot: &mut LayerCache,
        cross_k: Tensor<4>,
        cross_v: Tensor<4>,
    ) -> Tensor<3> {
        let a = &self.self_attn;
        let q = split_heads(a.q_proj.project(x.clone()), a.num_heads);
        let k = split_heads(a.k_proj.project(x.clone()), a.num_heads);
        let v = split_heads(a.v_proj.project(x.clone()), a.num_heads);
        let attended = a.out_proj.project(attend_appending(q, k, v, slot));
        let x = add_norm(&self.self_attn_layer_norm, self.norm_eps, x, attended);
        let c = &self.encoder_attn;
        let q = split_heads(c.q_proj.project(x.clone()), c.num_heads);
        let crossed = c.out_proj.project(attend(q, cross_k, cross_v, None, false));
        self.feed_forward(add_norm(
            &self.encoder_attn_layer_norm,
            self.norm_eps,
            x,
            crossed,
        ))
    }

    fn feed_forward(&self, x: Tensor<3>) -> Tensor<3> {
        let inner = activate(self.fc1.project(x.clone()), self.activation);
        let down = self.fc2.project(inner);
        add_norm(&self.final_layer_norm, self.norm_eps, x, down)
    }
}

/// Key renames from BART checkpoints (with or without the `model.` prefix)
/// to this module tree, given the checkpoint's tensor names. The shared
/// embeddings are stored under one of their tied names: `model.shared` where
/// present (the other copies are left over), else the first tied copy the
/// file holds (facebook/bart-large-cnn's safetensors keep only
/// `model.decoder.embed_tokens`).
pub fn checkpoint_key_map(names: &[String]) -> Vec<(String, String)> {
    let mut map = vec![(r"^model\.".to_owned(), String::new())];
    let tied = [
        "model.decoder.embed_tokens.weight",
        "model.encoder.embed_tokens.weight",
        "decoder.embed_tokens.weight",
        "encoder.embed_tokens.weight",
        "lm_head.weight",
    ];
    if let Some(rename) = tied_copy(names, &["model.shared.weight", "shared.weight"], &tied) {
        map.insert(0, rename);
    }
    map
}

/// The decoder of an encoder-decoder (its encoder's sizes are the shared
/// ones of [`ModelConfig`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecoderConfig {
    /// Decoder layers.
    pub num_layers: usize,
    /// Decoder attention heads (self- and cross-attention).
    pub num_heads: usize,
    /// Decoder feed-forward inner size.
    pub intermediate_size: usize,
    /// The first decoder input (BART: `</s>`, id 2).
    pub start_token_id: u32,
    /// The token generation must begin with (`forced_bos_token_id`:
    /// bart-large-cnn's `<s>`), if any.
    pub forced_bos_token_id: Option<u32>,
    /// The token a text that reaches its length limit must end with
    /// (`forced_eos_token_id`: BART's `</s>`), if any.
    pub forced_eos_token_id: Option<u32>,
    /// Token embeddings are multiplied by sqrt(hidden) (`scale_embedding`).
    pub scale_embedding: bool,
    /// The checkpoint has `final_logits_bias` (BartForConditionalGeneration;
    /// a BartModel's is zero).
    pub logits_bias: bool,
    /// Learned (BART) or sinusoidal (fairseq's transformer) positions.
    pub positions: Positions,
    /// A layer norm on each stack's summed embeddings (BART's).
    pub layernorm_embedding: bool,
}

/// BART's `config.json`, under transformers' names (`BartConfig`).
#[derive(serde::Deserialize)]
struct BartJson {
    d_model: Option<usize>,
    encoder_layers: Option<usize>,
    encoder_attention_heads: Option<usize>,
    encoder_ffn_dim: Option<usize>,
    decoder_layers: Option<usize>,
    decoder_attention_heads: Option<usize>,
    decoder_ffn_dim: Option<usize>,
    max_position_embeddings: Option<usize>,
    /// Default `gelu`.
    activation_function: Option<String>,
    /// Default false.
    scale_embedding: Option<bool>,
    /// Default 2 (`</s>`).
    decoder_start_token_id: Option<u32>,
    /// Default none.
    forced_bos_token_id: Option<u32>,
    /// Default none.
    forced_eos_token_id: Option<u32>,
    /// mBART's pre-norm options: unsupported when true.
    add_final_layer_norm: Option<bool>,
    normalize_before: Option<bool>,
    /// fairseq's flag (PRISM's config): a norm on the embeddings. BART
    /// always has one; default false for `prism`.
    layernorm_embedding: Option<bool>,
}

/// A BART `config.json` (BartForConditionalGeneration, or a BartModel,
/// which gets the tied head with a zero bias as transformers loads it into
/// BartForConditionalGeneration), or PRISM's (`model_type: prism`, the
/// fields of the hub port's `PrismConfig`: fairseq's transformer, with
/// `scale_embedding` and ReLU by default).
pub(crate) fn read_config(
    json: &serde_json::Value,
    common: Common,
) -> Result<ModelConfig, ModelError> {
    let architecture = common.architecture();
    let fairseq = architecture == "PrismForConditionalGeneration" || architecture == "prism";
    let logits_bias = match architecture.as_str() {
        "BartForConditionalGeneration" => true,
        "BartModel" => false,
        _ if fairseq => false,
        _ => {
            return Err(ModelError::Unsupported(format!(
                "architecture `{architecture}` is not supported \
                 (BartForConditionalGeneration, BartModel or PrismForConditionalGeneration: \
                 BARTScore and PRISM read the language-model head)"
            )));
        }
    };
    let raw: BartJson = fields(json)?;
    if raw.add_final_layer_norm == Some(true) || raw.normalize_before == Some(true) {
        return Err(ModelError::Unsupported(
            "pre-norm BART variants (mBART's normalize_before, add_final_layer_norm) are \
             not supported"
                .into(),
        ));
    }
    let sizes = Sizes {
        hidden_size: need(raw.d_model, "d_model")?,
        embedding_size: None,
        num_layers: need(raw.encoder_layers, "encoder_layers")?,
        num_heads: need(raw.encoder_attention_heads, "encoder_attention_heads")?,
        intermediate_size: need(raw.encoder_ffn_dim, "encoder_ffn_dim")?,
        max_positions: need(raw.max_position_embeddings, "max_position_embeddings")?,
        type_vocab_size: 0,
        // transformers' BART norms use torch's default.
        layer_norm_eps: 1e-5,
        activation: Activation::named(raw.activation_function.as_deref().unwrap_or(if fairseq {
            "relu"
        } else {
            "gelu"
        }))?,
        pooler_activation: Activation::Gelu,
    };
    let decoder = DecoderConfig {
        num_layers: need(raw.decoder_layers, "decoder_layers")?,
        num_heads: need(raw.decoder_attention_heads, "decoder_attention_heads")?,
        intermediate_size: need(raw.decoder_ffn_dim, "decoder_ffn_dim")?,
        start_token_id: raw.decoder_start_token_id.unwrap_or(2),
        forced_bos_token_id: raw.forced_bos_token_id,
        forced_eos_token_id: raw.forced_eos_token_id,
        scale_embedding: raw.scale_embedding.unwrap_or(fairseq),
        logits_bias,
        positions: if fairseq {
            Positions::Sinusoidal
        } else {
            Positions::Learned
        },
        layernorm_embedding: raw.layernorm_embedding.unwrap_or(!fairseq),
    };
    ModelConfig::assemble(common, Family::Bart(decoder), Head::Seq2SeqLm, sizes)
}

impl EncoderDecoder for BartModel {
    /// The encoder's output only (earlier states are not kept).
    fn encode_last(&self, batch: &Batch) -> Tensor<3> {
        self.run_encoder(batch, false)
            .pop()
            .expect("an encoder returns its output")
    }

    /// The decoder's last hidden state `[batch, target tokens, hidden]` for
    /// the decoder inputs in `targets`, attending to `memory` (the encoder's
    /// output for a batch whose padding `memory_padding` marks). Padding at the
    /// end of a target needs no mask: no real token attends to a later one.
    fn decode(
        &self,
        targets: &Batch,
        memory: Tensor<3>,
        memory_padding: Tensor<4, Bool>,
    ) -> Tensor<3> {
        let mut x = self.embed(
            &self.decoder,
            targets.ids.clone(),
            targets.positions.clone(),
        );
        for layer in &self.decoder.layers {
            x = layer.forward(x, memory.clone(), memory_padding.clone());
        }
        x
    }

    /// Reads `source` (one sequence, no padding) for decoding: every decoder
    /// layer's cross-attention keys and values over the encoder's output go
    /// into `cache`.
    fn read_source(&self, source: &Batch, cache: &mut KvCache) {
        let memory = self.encode_last(source);
        let layers = self.decoder.layers.iter().map(|l| {
            let a = &l.encoder_attn;
            (&a.k_proj, &a.v_proj, a.num_heads)
        });
        cache.set_cross(cross_keys_values(&memory, layers));
    }

    /// The decoder's last hidden state `[rows, new, hidden]` for `ids`
    /// (`[rows, new]`), which follow the tokens `cache` holds, over the
    /// source [`BartModel::read_source`] put there; `None` before it.
    fn decode_cached(&self, ids: Tensor<2, Int>, cache: &mut KvCache) -> Option<Tensor<3>> {
        let [rows, new] = ids.dims();
        let positions = cache.positions(rows, new, &ids.device());
        let mut x = self.embed(&self.decoder, ids, positions);
        for (i, layer) in self.decoder.layers.iter().enumerate() {
            let (k, v) = cache.cross(i)?.clone();
            x = layer.forward_cached(x, cache.layer(i), k, v);
        }
        Some(x)
    }

    /// Next-token logits `[batch, tokens, vocab]`: the shared embeddings
    /// as the output projection, plus `final_logits_bias`.
    fn lm_logits(&self, hidden: Tensor<3>) -> Tensor<3> {
        let logits = dense::linear(hidden, self.shared.weight.val().transpose(), None);
        match &self.final_logits_bias {
            Some(bias) => {
                let [_, vocab] = bias.dims();
                logits + bias.val().reshape([1, 1, vocab])
            }
            None => logits,
        }
    }
}

impl Architecture for BartModel {
    fn encoder_decoder(&self) -> Option<&dyn EncoderDecoder> {
        Some(self)
    }

    fn build(config: &ModelConfig, device: &Device) -> Result<Self, ModelError> {
        let decoder = config.decoder().ok_or_else(|| {
            ModelError::Config(format!("{} is not an encoder-decoder", config.architecture))
        })?;
        Ok(Self::new(config, decoder, device))
    }

    /// A BART pickle holds every tied copy, `model.shared` included; a
    /// fairseq one (PRISM's `checkpoint.pt`) has `encoder.embed_tokens`.
    fn key_map(config: &ModelConfig, names: Option<&[String]>) -> Vec<(String, String)> {
        let fairseq = config
            .decoder()
            .is_some_and(|d| d.positions == Positions::Sinusoidal);
        let pickled = if fairseq {
            "encoder.embed_tokens.weight"
        } else {
            "model.shared.weight"
        };
        checkpoint_key_map(names.unwrap_or(&[pickled.to_owned()]))
    }

    /// An encoder-decoder's hidden states are its encoder's (all of them).
    fn hidden_states(&self, batch: &Batch, _layers: usize) -> Vec<Tensor<3>> {
        self.encode(batch)
    }

    fn input_embeddings(&self) -> Tensor<2> {
        self.shared.weight.val()
    }

    /// Each encoder layer's self-attention over its input.
    fn attention_probabilities(&self, batch: &Batch) -> Option<Vec<Tensor<4>>> {
        let states = self.encode(batch);
        Some(
            self.encoder
                .layers
                .iter()
                .zip(&states)
                .map(|(layer, x)| {
                    let a = &layer.self_attn;
                    let q = split_heads(a.q_proj.project(x.clone()), a.num_heads);
                    let k = split_heads(a.k_proj.project(x.clone()), a.num_heads);
                    let padding = Some(batch.padding.clone());
                    super::attention::probabilities(q, k, None, padding, false, false)
                })
                .collect(),
        )
    }
}
