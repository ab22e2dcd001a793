//! T5: a pre-norm transformer encoder-decoder with RMS norms (no mean, no
//! bias), no positional embeddings but a learned bias per relative-position
//! bucket and head added to the attention scores (computed by each stack's
//! first layer and shared by the rest), attention without the 1/sqrt(d)
//! scale, and projections without biases.
//!
//! Both generations load:
//! - v1.0 (`t5-small`...): ReLU feed-forward (`wi`, `wo`); the head is the
//!   shared embeddings, applied to the decoder's output scaled by
//!   d_model^-0.5;
//! - v1.1 (`google/t5-v1_1-*`, UniEval, mT5): gated-GELU feed-forward
//!   (`gelu_new(wi_0 x) * wi_1 x`, then `wo`) and an untied `lm_head`
//!   (`tie_word_embeddings: false`), unscaled.
//!
//! Module names follow the checkpoint's where they can; its
//! `block.N.layer.K` lists (self-attention, cross-attention, feed-forward
//! by position) become named fields.

use burn::module::Module;
use burn::nn::{Embedding, EmbeddingConfig, Linear, LinearConfig, RmsNorm, RmsNormConfig};
use burn::tensor::ops::AttentionModuleOptions;
use burn::tensor::{Bool, Device, Int, Tensor, TensorData};

use super::ModelError;
use super::bart::DecoderConfig;
use super::config::{Activation, Common, Family, Head, ModelConfig, Sizes, fields, need};
use super::dense::{self, Project};
use super::generate::{KvCache, LayerCache, cross_keys_values};
use super::network::{Architecture, EncoderDecoder, owned_map, tied_copy};
use super::{Batch, activate};
use crate::models::bert::split_heads;

/// The tokens T5 reads at most here. T5 has no position table (its relative
/// buckets cover any length); 1024 is where UniEval's released scorer cuts
/// its inputs (`max_length=1024`), and what its checkpoints were trained on
/// (`max_source_length 1024`). `n_positions` (512 in the hub's configs) is
/// only the tokenizer's default.
pub const MAX_TOKENS: usize = 1024;

/// T5's own settings: the decoder's sizes and start token (in the
/// [`DecoderConfig`] BART uses too), the attention's head width and
/// relative-position buckets, and which generation it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct T5Config {
    /// Decoder layers, heads, feed-forward width and start token.
    pub decoder: DecoderConfig,
    /// Width of one head (`d_kv`); heads x d_kv need not be d_model.
    pub d_kv: usize,
    /// Relative-position buckets (`relative_attention_num_buckets`).
    pub buckets: usize,
    /// Distance beyond which positions share the last bucket
    /// (`relative_attention_max_distance`).
    pub max_distance: usize,
    /// Gated feed-forward (`feed_forward_proj: gated-*`, v1.1).
    pub gated: bool,
    /// The head is the shared embeddings, scaled input (v1.0); else its own
    /// `lm_head` (v1.1).
    pub tied: bool,
}

/// The bucket of a relative position (the key's position minus the
/// query's), as transformers' `T5Attention._relative_position_bucket`
/// computes it: exact below half the buckets (of each direction, when
/// `bidirectional`), logarithmic up to `max_distance`, then the last. The
/// logarithm is taken in f32 as transformers takes it, so a distance on a
/// bucket's edge falls on the same side.
pub fn relative_position_bucket(
    relative: i64,
    bidirectional: bool,
    buckets: usize,
    max_distance: usize,
) -> usize {
    let mut buckets = buckets as i64;
    let mut bucket = 0;
    let distance = if bidirectional {
        buckets /= 2;
        if relative > 0 {
            bucket += buckets;
        }
        relative.abs()
    } else {
        (-relative).max(0)
    };
    let max_exact = buckets / 2;
    if distance < max_exact {
        return (bucket + distance) as usize;
    }
    let ratio = (distance as f32 / max_exact as f32).ln();
    let range = (max_distance as f64 / max_exact as f64).ln() as f32;
    let large = max_exact + (ratio / range * (buckets - max_exact) as f32) as i64;
    (bucket + large.min(buckets - 1)) as usize
}

/// Attention without biases or scale; the relative-position table on a
/// stack's first self-attention only.
#[derive(Module, Debug)]
pub struct Attention {
    /// Query projection `[d_model, heads x d_kv]`.
    pub q: Linear,
    /// Key projection.
    pub k: Linear,
    /// Value projection.
    pub v: Linear,
    /// Output projection `[heads x d_kv, d_model]`.
    pub o: Linear,
    /// Number of heads.
    pub num_heads: usize,
}

/// The feed-forward block: `wo(act(wi_0 x))`, or gated, `wo(act(wi_0 x) *
/// wi_1 x)`.
#[derive(Module, Debug)]
pub struct FeedForward {
    /// The activated projection (v1.0 checkpoints call it `wi`).
    pub wi_0: Linear,
    /// The gate's linear projection (gated variants only).
    pub wi_1: Option<Linear>,
    /// Down projection.
    pub wo: Linear,
    /// The activation (`dense_act_fn`).
    #[module(skip)]
    pub activation: Activation,
}

/// One encoder block: pre-norm self-attention, pre-norm feed-forward.
#[derive(Module, Debug)]
pub struct EncoderBlock {
    /// Norm before the self-attention.
    pub self_norm: RmsNorm,
    /// Self-attention.
    pub self_attn: Attention,
    /// Norm before the feed-forward block.
    pub ff_norm: RmsNorm,
    /// Feed-forward block.
    pub ff: FeedForward,
}

/// One decoder block: causal self-attention, cross-attention to the
/// encoder, feed-forward, each pre-norm.
#[derive(Module, Debug)]
pub struct DecoderBlock {
    /// Norm before the self-attention.
    pub self_norm: RmsNorm,
    /// Causal self-attention.
    pub self_attn: Attention,
    /// Norm before the cross-attention.
    pub cross_norm: RmsNorm,
    /// Attention to the encoder's output (no position bias).
    pub cross_attn: Attention,
    /// Norm before the feed-forward block.
    pub ff_norm: RmsNorm,
    /// Feed-forward block.
    pub ff: FeedForward,
}

/// One stack: its relative-position table, blocks and final norm.
#[derive(Module, Debug)]
pub struct Stack<B: Module> {
    /// `[buckets, heads]`: each bucket's bias per head.
    pub relative_attention_bias: Embedding,
    /// Blocks.
    pub blocks: Vec<B>,
    /// Norm of the last block's output.
    pub final_layer_norm: RmsNorm,
}

/// T5 with its language-model head.
#[derive(Module, Debug)]
pub struct T5Model {
    /// Token embeddings of both stacks (and v1.0's output projection).
    pub shared: Embedding,
    /// The encoder.
    pub encoder: Stack<EncoderBlock>,
    /// The decoder.
    pub decoder: Stack<DecoderBlock>,
    /// v1.1's own output projection; `None` when tied to `shared`.
    pub lm_head: Option<Linear>,
    /// Relative-position buckets.
    #[module(skip)]
    pub buckets: usize,
    /// Distance of the last bucket.
    #[module(skip)]
    pub max_distance: usize,
    /// d_model^-0.5 before a tied head, else 1.
    #[module(skip)]
    pub output_scale: f32,
}

fn linear(d_in: usize, d_out: usize, device: &Device) -> Linear {
    LinearConfig::new(d_in, d_out).with_bias(false).init(device)
}

impl T5Model {
    /// The module tree for `config` and its T5 settings, weights fresh until
    /// a checkpoint loads.
    pub fn new(config: &ModelConfig, t5: &T5Config, device: &Device) -> Self {
        let h = config.hidden_size;
        let norm = || {
            RmsNormConfig::new(h)
                .with_epsilon(config.layer_norm_eps)
                .init(device)
        };
        let attention = |heads: usize| Attention {
            q: linear(h, heads * t5.d_kv, device),
            k: linear(h, heads * t5.d_kv, device),
            v: linear(h, heads * t5.d_kv, device),
            o: linear(heads * t5.d_kv, h, device),
            num_heads: heads,
        };
        let ff = |inner: usize| FeedForward {
            wi_0: linear(h, inner, device),
            wi_1: t5.gated.then(|| linear(h, inner, device)),
            wo: linear(inner, h, device),
            activation: config.activation,
        };
        let d = &t5.decoder;
        let encoder_blocks = (0..config.num_layers)
            .map(|_| EncoderBlock {
                self_norm: norm(),
                self_attn: attention(config.num_heads),
                ff_norm: norm(),
                ff: ff(config.intermediate_size),
            })
            .collect();
        let decoder_blocks = (0..d.num_layers)
            .map(|_| DecoderBlock {
                self_norm: norm(),
                self_attn: attention(d.num_heads),
                cross_norm: norm(),
                cross_attn: attention(d.num_heads),
                ff_norm: norm(),
                ff: ff(d.intermediate_size),
            })
            .collect();
        let table = |heads: usize| EmbeddingConfig::new(t5.buckets, heads).init(device);
        Self {
            shared: EmbeddingConfig::new(config.vocab_size, h).init(device),
            encoder: Stack {
                relative_attention_bias: table(config.num_heads),
                blocks: encoder_blocks,
                final_layer_norm: norm(),
            },
            decoder: Stack {
                relative_attention_bias: table(d.num_heads),
                blocks: decoder_blocks,
                final_layer_norm: norm(),
            },
            lm_head: (!t5.tied).then(|| linear(h, config.vocab_size, device)),
            buckets: t5.buckets,
            max_distance: t5.max_distance,
            output_scale: if t5.tied { (h as f32).powf(-0.5) } else { 1.0 },
        }
    }

    /// The position bias `[1, heads, queries, keys]` of `queries` tokens
    /// starting at position `first` over keys `0..keys`.
    fn position_bias<B: Module>(
        &self,
        stack: &Stack<B>,
        first: usize,
        queries: usize,
        keys: usize,
        bidirectional: bool,
        device: &Device,
    ) -> Tensor<4> {
        let ids: Vec<i64> = (first..first + queries)
            .flat_map(|q| {
                (0..keys).map(move |k| {
                    relative_position_bucket(
                        k as i64 - q as i64,
                        bidirectional,
                        self.buckets,
                        self.max_distance,
                    ) as i64
                })
            })
            .collect();
        let ids = Tensor::<2, Int>::from_data(TensorData::new(ids, [queries, keys]), device);
        // `[queries, keys, heads]` -> `[1, heads, queries, keys]`.
        stack
            .relative_attention_bias
            .forward(ids)
            .permute([2, 0, 1])
            .unsqueeze_dim(0)
    }

    /// Runs the encoder over a right-padded batch: the embeddings, then each
    /// block's output, the last after the final norm (`num_layers + 1`
    /// tensors, as transformers' `encoder_hidden_states`).
    pub fn encode(&self, batch: &Batch) -> Vec<Tensor<3>> {
        self.run_encoder(batch, true)
    }

    fn run_encoder(&self, batch: &Batch, keep: bool) -> Vec<Tensor<3>> {
        let mut x = self.shared.forward(batch.ids.clone());
        let [_, l, _] = x.dims();
        let bias = self.position_bias(&self.encoder, 0, l, l, true, &x.device());
        let mut states = Vec::with_capacity(self.encoder.blocks.len() + 1);
        for block in &self.encoder.blocks {
            if keep {
                states.push(x.clone());
            }
            let h = block.self_norm.forward(x.clone());
            let attended = block.self_attn.forward(
                h.clone(),
                h,
                Some(bias.clone()),
                Some(batch.padding.clone()),
                false,
            );
            x = x + attended;
            x = x.clone() + block.ff.forward(block.ff_norm.forward(x));
        }
        states.push(self.encoder.final_layer_norm.forward(x));
        states
    }
}

/// softmax(q kᵀ + bias) v without a scale, heads merged back to `[batch,
/// tokens, heads x d_kv]`; `padding` (`[batch, 1, 1, keys]`) hides keys,
/// `causal` later positions (aligned on the last query and key).
fn attend(
    q: Tensor<4>,
    k: Tensor<4>,
    v: Tensor<4>,
    bias: Option<Tensor<4>>,
    padding: Option<Tensor<4, Bool>>,
    causal: bool,
) -> Tensor<3> {
    let [b, heads, l, _] = q.dims();
    let [_, _, keys, dv] = v.dims();
    // The mask as wide as the scores it fills: with a bias or a scale, burn
    // runs its reference attention on WebGPU, not the flash kernel.
    let mask = padding.map(|p| p.expand([b, heads, l, keys]));
    let bias = bias.map(|t| t.expand([b, heads, l, keys]));
    let options = AttentionModuleOptions {
        scale: Some(1.0),
        is_causal: causal,
        ..AttentionModuleOptions::default()
    };
    let out = burn::tensor::module::attention(q, k, v, mask, bias, options);
    out.swap_dims(1, 2).reshape([b, l, heads * dv])
}

impl Attention {
    /// Attention of `x` to `memory` (itself for self-attention).
    fn forward(
        &self,
        x: Tensor<3>,
        memory: Tensor<3>,
        bias: Option<Tensor<4>>,
        padding: Option<Tensor<4, Bool>>,
        causal: bool,
    ) -> Tensor<3> {
        let heads = self.num_heads;
        let q = split_heads(self.q.project(x), heads);
        let k = split_heads(self.k.project(memory.clone()), heads);
        let v = split_heads(self.v.project(memory), heads);
        self.o.project(attend(q, k, v, bias, padding, causal))
    }

    /// Causal self-attention of `x`'s positions after those whose keys and
    /// values `slot` holds (they join it).
    fn forward_appending(&self, x: Tensor<3>, bias: Tensor<4>, slot: &mut LayerCache) -> Tensor<3> {
        let heads = self.num_heads;
        let q = split_heads(self.q.project(x.clone()), heads);
        let k = split_heads(self.k.project(x.clone()), heads);
        let v = split_heads(self.v.project(x), heads);
        let (k, v) = match slot.take() {
            Some((pk, pv)) => (Tensor::cat(vec![pk, k], 2), Tensor::cat(vec![pv, v], 2)),
            None => (k, v),
        };
        let out = attend(q, k.clone(), v.clone(), Some(bias), None, true);
        *slot = Some((k, v));
        self.o.project(out)
    }
}

impl FeedForward {
    fn forward(&self, x: Tensor<3>) -> Tensor<3> {
        let up = activate(self.wi_0.project(x.clone()), self.activation);
        let inner = match &self.wi_1 {
            Some(gate) => up * gate.project(x),
            None => up,
        };
        self.wo.project(inner)
    }
}

/// Key renames from T5 checkpoints to this module tree. The shared
/// embeddings are stored under `shared` where present, else under the
/// first tied copy the file holds; the other copies are left over.
pub fn checkpoint_key_map(names: &[String]) -> Vec<(String, String)> {
    let mut map = owned_map(vec![
        (
            r"^(encoder|decoder)\.block\.0\.layer\.0\.SelfAttention\.relative_attention_bias\.",
            "$1.relative_attention_bias.",
        ),
        (r"\.DenseReluDense\.wi\.", ".DenseReluDense.wi_0."),
        (
            r"^(encoder|decoder)\.block\.(\d+)\.layer\.0\.SelfAttention\.",
            "$1.blocks.$2.self_attn.",
        ),
        (
            r"^(encoder|decoder)\.block\.(\d+)\.layer\.0\.layer_norm\.",
            "$1.blocks.$2.self_norm.",
        ),
        (
            r"^encoder\.block\.(\d+)\.layer\.1\.DenseReluDense\.",
            "encoder.blocks.$1.ff.",
        ),
        (
            r"^encoder\.block\.(\d+)\.layer\.1\.layer_norm\.",
            "encoder.blocks.$1.ff_norm.",
        ),
        (
            r"^decoder\.block\.(\d+)\.layer\.1\.EncDecAttention\.",
            "decoder.blocks.$1.cross_attn.",
        ),
        (
            r"^decoder\.block\.(\d+)\.layer\.1\.layer_norm\.",
            "decoder.blocks.$1.cross_norm.",
        ),
        (
            r"^decoder\.block\.(\d+)\.layer\.2\.DenseReluDense\.",
            "decoder.blocks.$1.ff.",
        ),
        (
            r"^decoder\.block\.(\d+)\.layer\.2\.layer_norm\.",
            "decoder.blocks.$1.ff_norm.",
        ),
    ]);
    let tied = ["encoder.embed_tokens.weight", "decoder.embed_tokens.weight"];
    if let Some(rename) = tied_copy(names, &["shared.weight"], &tied) {
        map.insert(0, rename);
    }
    map
}

/// T5's `config.json`, under transformers' names (`T5Config`).
#[derive(serde::Deserialize)]
struct T5Json {
    d_model: Option<usize>,
    /// Default 64.
    d_kv: Option<usize>,
    d_ff: Option<usize>,
    num_layers: Option<usize>,
    /// Default `num_layers`.
    num_decoder_layers: Option<usize>,
    num_heads: Option<usize>,
    /// Default 32.
    relative_attention_num_buckets: Option<usize>,
    /// Default 128.
    relative_attention_max_distance: Option<usize>,
    /// Default 1e-6.
    layer_norm_epsilon: Option<f64>,
    /// Default `relu`; `gated-gelu` is v1.1's.
    feed_forward_proj: Option<String>,
    /// Default 0 (`<pad>`).
    decoder_start_token_id: Option<u32>,
}

/// A T5 (or mT5) `config.json`: T5ForConditionalGeneration, with the head
/// tied unless `tie_word_embeddings` is false.
pub(crate) fn read_config(
    json: &serde_json::Value,
    mut common: Common,
) -> Result<ModelConfig, ModelError> {
    let architecture = common.architecture();
    if !matches!(
        architecture.as_str(),
        "T5ForConditionalGeneration" | "MT5ForConditionalGeneration"
    ) {
        return Err(ModelError::Unsupported(format!(
            "T5 architecture `{architecture}` is not supported \
             (T5ForConditionalGeneration: UniEval reads the language-model head)"
        )));
    }
    let raw: T5Json = fields(json)?;
    let proj = raw.feed_forward_proj.as_deref().unwrap_or("relu");
    let (gated, act) = match proj.split_once('-') {
        Some(("gated", act)) if !act.contains('-') => (true, act),
        None => (false, proj),
        Some(_) => {
            return Err(ModelError::Config(format!(
                "feed_forward_proj `{proj}` is not `ACT` or `gated-ACT`"
            )));
        }
    };
    // transformers reads `gated-gelu` as the tanh approximation.
    let act = if proj == "gated-gelu" {
        "gelu_new"
    } else {
        act
    };
    let num_layers = need(raw.num_layers, "num_layers")?;
    let num_heads = need(raw.num_heads, "num_heads")?;
    let d_ff = need(raw.d_ff, "d_ff")?;
    let buckets = raw.relative_attention_num_buckets.unwrap_or(32);
    if buckets < 4 {
        return Err(ModelError::Config(format!(
            "relative_attention_num_buckets is {buckets} in config.json: T5 needs at least 4"
        )));
    }
    let t5 = T5Config {
        decoder: DecoderConfig {
            num_layers: raw.num_decoder_layers.unwrap_or(num_layers),
            num_heads,
            intermediate_size: d_ff,
            start_token_id: raw.decoder_start_token_id.unwrap_or(0),
            forced_bos_token_id: None,
            forced_eos_token_id: None,
            scale_embedding: false,
            logits_bias: false,
            positions: super::bart::Positions::Learned,
            layernorm_embedding: false,
        },
        d_kv: raw.d_kv.unwrap_or(64),
        buckets,
        max_distance: raw.relative_attention_max_distance.unwrap_or(128),
        gated,
        tied: common.take_tie_word_embeddings().unwrap_or(true),
    };
    let sizes = Sizes {
        hidden_size: need(raw.d_model, "d_model")?,
        embedding_size: None,
        num_layers,
        num_heads,
        intermediate_size: d_ff,
        max_positions: MAX_TOKENS,
        type_vocab_size: 0,
        layer_norm_eps: raw.layer_norm_epsilon.unwrap_or(1e-6),
        activation: Activation::named(act)?,
        pooler_activation: Activation::Gelu,
    };
    ModelConfig::assemble(common, Family::T5(t5), Head::Seq2SeqLm, sizes)
}

impl EncoderDecoder for T5Model {
    /// The encoder's output only.
    fn encode_last(&self, batch: &Batch) -> Tensor<3> {
        self.run_encoder(batch, false)
            .pop()
            .expect("an encoder returns its output")
    }

    /// The decoder's output `[batch, target tokens, d_model]` (after its
    /// final norm) for the decoder inputs in `targets`, attending to
    /// `memory` (the encoder's output for a batch whose padding
    /// `memory_padding` marks). Padding at the end of a target needs no
    /// mask: no real token attends to a later one.
    fn decode(
        &self,
        targets: &Batch,
        memory: Tensor<3>,
        memory_padding: Tensor<4, Bool>,
    ) -> Tensor<3> {
        let mut x = self.shared.forward(targets.ids.clone());
        let [_, l, _] = x.dims();
        let bias = self.position_bias(&self.decoder, 0, l, l, false, &x.device());
        for block in &self.decoder.blocks {
            let h = block.self_norm.forward(x.clone());
            x = x + block
                .self_attn
                .forward(h.clone(), h, Some(bias.clone()), None, true);
            let h = block.cross_norm.forward(x.clone());
            x = x + block.cross_attn.forward(
                h,
                memory.clone(),
                None,
                Some(memory_padding.clone()),
                false,
            );
            x = x.clone() + block.ff.forward(block.ff_norm.forward(x));
        }
        self.decoder.final_layer_norm.forward(x)
    }

    /// Reads `source` (one sequence, no padding) for decoding: every decoder
    /// block's cross-attention keys and values over the encoder's output go
    /// into `cache`.
    fn read_source(&self, source: &Batch, cache: &mut KvCache) {
        let memory = self.encode_last(source);
        let layers = self.decoder.blocks.iter().map(|b| {
            let a = &b.cross_attn;
            (&a.k, &a.v, a.num_heads)
        });
        cache.set_cross(cross_keys_values(&memory, layers));
    }

    /// The decoder's output `[rows, new, d_model]` for `ids` (`[rows,
    /// new]`), which follow the tokens `cache` holds, over the source
    /// [`T5Model::read_source`] put there; `None` before it.
    fn decode_cached(&self, ids: Tensor<2, Int>, cache: &mut KvCache) -> Option<Tensor<3>> {
        let [_, new] = ids.dims();
        let past = cache.tokens();
        let mut x = self.shared.forward(ids);
        let bias = self.position_bias(&self.decoder, past, new, past + new, false, &x.device());
        for (i, block) in self.decoder.blocks.iter().enumerate() {
            let (ck, cv) = cache.cross(i)?.clone();
            let h = block.self_norm.forward(x.clone());
            x = x + block
                .self_attn
                .forward_appending(h, bias.clone(), cache.layer(i));
            let h = block.cross_norm.forward(x.clone());
            let c = &block.cross_attn;
            let q = split_heads(c.q.project(h), c.num_heads);
            x = x + c.o.project(attend(q, ck, cv, None, None, false));
            x = x.clone() + block.ff.forward(block.ff_norm.forward(x));
        }
        Some(self.decoder.final_layer_norm.forward(x))
    }

    /// Next-token logits `[batch, tokens, vocab]` from the decoder's output.
    fn lm_logits(&self, hidden: Tensor<3>) -> Tensor<3> {
        match &self.lm_head {
            Some(head) => head.project(hidden),
            None => dense::linear(
                hidden.mul_scalar(self.output_scale),
                self.shared.weight.val().transpose(),
                None,
            ),
        }
    }
}

impl Architecture for T5Model {
    fn encoder_decoder(&self) -> Option<&dyn EncoderDecoder> {
        Some(self)
    }

    fn build(config: &ModelConfig, device: &Device) -> Result<Self, ModelError> {
        let Family::T5(t5) = &config.family else {
            return Err(ModelError::Config(format!(
                "{} is not a T5 checkpoint",
                config.architecture
            )));
        };
        Ok(Self::new(config, t5, device))
    }

    /// A pickle holds every tied copy, `shared` included.
    fn key_map(_config: &ModelConfig, names: Option<&[String]>) -> Vec<(String, String)> {
        checkpoint_key_map(names.unwrap_or(&["shared.weight".to_owned()]))
    }

    /// An encoder-decoder's hidden states are its encoder's (all of them).
    fn hidden_states(&self, batch: &Batch, _layers: usize) -> Vec<Tensor<3>> {
        self.encode(batch)
    }

    fn input_embeddings(&self) -> Tensor<2> {
        self.shared.weight.val()
    }

    /// Each encoder block's self-attention over its normed input, with the
    /// relative-position bias and without the 1/sqrt(d) scale.
    fn attention_probabilities(&self, batch: &Batch) -> Option<Vec<Tensor<4>>> {
        let states = self.encode(batch);
        let [_, l] = batch.ids.dims();
        let bias = self.position_bias(&self.encoder, 0, l, l, true, &batch.ids.device());
        Some(
            self.encoder
                .blocks
                .iter()
                .zip(&states)
                .map(|(block, x)| {
                    let a = &block.self_attn;
                    let h = block.self_norm.forward(x.clone());
                    let q = split_heads(a.q.project(h.clone()), a.num_heads);
                    let k = split_heads(a.k.project(h), a.num_heads);
                    let padding = Some(batch.padding.clone());
                    super::attention::probabilities(q, k, Some(bias.clone()), padding, false, true)
                })
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The buckets of T5's defaults at a few distances, by hand from
    /// transformers' formula (tests/t5.rs checks them all against it).
    #[test]
    fn buckets_follow_transformers_formula() {
        let b = |r, bi| relative_position_bucket(r, bi, 32, 128);
        // Bidirectional: 16 per direction, exact below 8, later keys after 16.
        assert_eq!((b(0, true), b(-7, true), b(7, true)), (0, 7, 23));
        assert_eq!((b(-8, true), b(-16, true), b(-1000, true)), (8, 10, 15));
        // Causal: later keys all bucket 0, exact below 16.
        assert_eq!((b(5, false), b(-15, false), b(-16, false)), (0, 15, 16));
        assert_eq!(b(-5000, false), 31);
    }
}
