//! Decoder LLMs of the Llama family: Llama 2 and 3 (SmolLM2), Qwen2 and
//! Qwen2.5, Qwen3. A pre-norm causal transformer with RMS norms, rotary
//! positions (RoPE, with Llama 3's frequency scaling), grouped-query
//! attention (fewer key/value heads than query heads, each shared by a
//! group), and a SwiGLU feed-forward (`down(silu(gate x) * up x)`); the head
//! is its own `lm_head` or tied to the embeddings. What the three differ in
//! is settings ([`LlamaConfig`]): Qwen2's biases on the query, key and value
//! projections, Qwen3's RMS norm on each head's query and key before RoPE.
//!
//! Module names mirror the checkpoint's (`model.layers.N.self_attn.q_proj`
//! ...), so loading only drops the `model.` prefix.

use burn::module::{Module, Param};
use burn::nn::{Embedding, EmbeddingConfig, Linear, LinearConfig, RmsNorm, RmsNormConfig};
use burn::tensor::activation;
use burn::tensor::{Device, Int, Tensor, TensorData};

use super::config::{Activation, Common, Family, Head, ModelConfig, Sizes, fields, need};
use super::dense::{self, Project};
use super::generate::{KvCache, LayerCache};
use super::network::{Architecture, owned_map};
use super::{Batch, ModelError};
use crate::models::attention::attend;
use crate::models::bert::split_heads;

/// The settings that set the Llama-family architectures apart.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LlamaConfig {
    /// Key/value heads (`num_key_value_heads`); each serves
    /// `num_heads / kv_heads` query heads.
    pub kv_heads: usize,
    /// Width of one head (`head_dim`; hidden / heads by default).
    pub head_dim: usize,
    /// Rotary positions.
    pub rope: Rope,
    /// Biases on the query, key and value projections (Qwen2's always;
    /// `attention_bias` elsewhere).
    pub qkv_bias: bool,
    /// A bias on the output projection (`attention_bias` in Llama and
    /// Qwen3; never in Qwen2).
    pub o_bias: bool,
    /// Biases in the feed-forward block (`mlp_bias`).
    pub mlp_bias: bool,
    /// RMS norms on each head's query and key (Qwen3).
    pub qk_norm: bool,
    /// The head is the input embeddings (`tie_word_embeddings`).
    pub tied: bool,
}

/// Rotary position embedding settings: the base of the frequencies and
/// Llama 3's rescaling of the low ones.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rope {
    /// `rope_theta`.
    pub theta: f64,
    /// `rope_scaling` of type `llama3`, if any.
    pub llama3: Option<Llama3Scaling>,
}

/// Llama 3's `rope_scaling` (`rope_type: llama3`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Llama3Scaling {
    /// `factor`: how much the low frequencies are slowed.
    pub factor: f64,
    /// `low_freq_factor`.
    pub low_freq_factor: f64,
    /// `high_freq_factor`.
    pub high_freq_factor: f64,
    /// `original_max_position_embeddings`.
    pub original_context: f64,
}

impl Rope {
    /// The inverse frequencies of a head of width `dim` (`dim / 2` of
    /// them), in f32 as transformers computes them
    /// (`_compute_default_rope_parameters`, `_compute_llama3_parameters`).
    pub fn inverse_frequencies(&self, dim: usize) -> Vec<f32> {
        let base = self.theta as f32;
        let inv: Vec<f32> = (0..dim)
            .step_by(2)
            .map(|i| 1.0 / base.powf(i as f32 / dim as f32))
            .collect();
        let Some(s) = self.llama3 else {
            return inv;
        };
        let (factor, low, high) = (
            s.factor as f32,
            s.low_freq_factor as f32,
            s.high_freq_factor as f32,
        );
        let old = s.original_context as f32;
        let low_wavelen = old / low;
        let high_wavelen = old / high;
        inv.into_iter()
            .map(|f| {
                let wavelen = 2.0 * std::f32::consts::PI / f;
                let scaled = if wavelen > low_wavelen { f / factor } else { f };
                if wavelen < high_wavelen || wavelen > low_wavelen {
                    scaled
                } else {
                    let smooth = (old / wavelen - low) / (high - low);
                    (1.0 - smooth) * scaled / factor + smooth * scaled
                }
            })
            .collect()
    }

    /// `cos` and `sin` `[1, 1, len, dim]` for positions `start..start +
    /// len`: each frequency times the position in f32, the table repeated
    /// for both halves of the head (transformers' `rotate_half` layout).
    fn tables(
        &self,
        dim: usize,
        start: usize,
        len: usize,
        device: &Device,
    ) -> (Tensor<4>, Tensor<4>) {
        let inv = self.inverse_frequencies(dim);
        let mut cos = Vec::with_capacity(len * dim);
        let mut sin = Vec::with_capacity(len * dim);
        for p in start..start + len {
            let angles: Vec<f32> = inv.iter().map(|&f| f * p as f32).collect();
            for _ in 0..2 {
                cos.extend(angles.iter().map(|a| a.cos()));
                sin.extend(angles.iter().map(|a| a.sin()));
            }
        }
        let table = |v: Vec<f32>| Tensor::from_data(TensorData::new(v, [1, 1, len, dim]), device);
        (table(cos), table(sin))
    }
}

/// `x cos + rotate_half(x) sin` over `[batch, heads, tokens, dim]`, where
/// `rotate_half(x) = [-x2, x1]` of the head's two halves.
fn rotate(x: Tensor<4>, cos: &Tensor<4>, sin: &Tensor<4>) -> Tensor<4> {
    let [b, h, l, d] = x.dims();
    let x1 = x.clone().slice([0..b, 0..h, 0..l, 0..d / 2]);
    let x2 = x.clone().slice([0..b, 0..h, 0..l, d / 2..d]);
    let rotated = Tensor::cat(vec![x2.neg(), x1], 3);
    x * cos.clone() + rotated * sin.clone()
}

/// Self-attention with rotary positions and grouped key/value heads.
#[derive(Module, Debug)]
pub struct Attention {
    /// Query projection `[hidden, heads x head_dim]`.
    pub q_proj: Linear,
    /// Key projection `[hidden, kv_heads x head_dim]`.
    pub k_proj: Linear,
    /// Value projection.
    pub v_proj: Linear,
    /// Output projection.
    pub o_proj: Linear,
    /// Qwen3's norm of each query head.
    pub q_norm: Option<RmsNorm>,
    /// Qwen3's norm of each key head.
    pub k_norm: Option<RmsNorm>,
    /// Query heads.
    pub num_heads: usize,
    /// Key/value heads.
    pub kv_heads: usize,
}

/// The SwiGLU feed-forward block.
#[derive(Module, Debug)]
pub struct Mlp {
    /// The activated projection.
    pub gate_proj: Linear,
    /// The linear one it multiplies.
    pub up_proj: Linear,
    /// Down projection.
    pub down_proj: Linear,
}

/// One pre-norm decoder layer.
#[derive(Module, Debug)]
pub struct Layer {
    /// Norm before attention.
    pub input_layernorm: RmsNorm,
    /// Causal self-attention.
    pub self_attn: Attention,
    /// Norm before the feed-forward block.
    pub post_attention_layernorm: RmsNorm,
    /// Feed-forward block.
    pub mlp: Mlp,
}

/// A Llama-family causal LM.
#[derive(Module, Debug)]
pub struct LlamaModel {
    /// Token embeddings.
    pub embed_tokens: Embedding,
    /// Decoder layers.
    pub layers: Vec<Layer>,
    /// Final norm.
    pub norm: RmsNorm,
    /// The head, when not tied to the embeddings.
    pub lm_head: Option<Linear>,
    /// Rotary positions.
    #[module(skip)]
    pub rope: Rope,
    /// Width of one head.
    #[module(skip)]
    pub head_dim: usize,
}

impl LlamaModel {
    /// The module tree for `config`, weights zeroed until a checkpoint loads.
    pub fn new(config: &ModelConfig, s: &LlamaConfig, device: &Device) -> Self {
        let h = config.hidden_size;
        let d = s.head_dim;
        let norm = |width: usize| {
            RmsNormConfig::new(width)
                .with_epsilon(config.layer_norm_eps)
                .init(device)
        };
        let linear =
            |i: usize, o: usize, bias: bool| LinearConfig::new(i, o).with_bias(bias).init(device);
        let layers = (0..config.num_layers)
            .map(|_| Layer {
                input_layernorm: norm(h),
                self_attn: Attention {
                    q_proj: linear(h, config.num_heads * d, s.qkv_bias),
                    k_proj: linear(h, s.kv_heads * d, s.qkv_bias),
                    v_proj: linear(h, s.kv_heads * d, s.qkv_bias),
                    o_proj: linear(config.num_heads * d, h, s.o_bias),
                    q_norm: s.qk_norm.then(|| norm(d)),
                    k_norm: s.qk_norm.then(|| norm(d)),
                    num_heads: config.num_heads,
                    kv_heads: s.kv_heads,
                },
                post_attention_layernorm: norm(h),
                mlp: Mlp {
                    gate_proj: linear(h, config.intermediate_size, s.mlp_bias),
                    up_proj: linear(h, config.intermediate_size, s.mlp_bias),
                    down_proj: linear(config.intermediate_size, h, s.mlp_bias),
                },
            })
            .collect();
        Self {
            embed_tokens: EmbeddingConfig::new(config.vocab_size, h).init(device),
            layers,
            norm: norm(h),
            lm_head: (!s.tied).then(|| linear(h, config.vocab_size, false)),
            rope: s.rope,
            head_dim: d,
        }
    }

    /// The hidden states of a right-padded batch as transformers returns
    /// them: the embeddings, the input of every later layer, and last the
    /// final-normed output (`num_layers + 1` tensors). Positions count from
    /// 0 in every row; padding at the end needs no mask, since no real
    /// token attends to a later one.
    pub fn forward(&self, batch: &Batch) -> Vec<Tensor<3>> {
        let [_, l] = batch.ids.dims();
        let (cos, sin) = self.rope.tables(self.head_dim, 0, l, &batch.ids.device());
        let mut x = self.embed_tokens.forward(batch.ids.clone());
        let mut states = Vec::with_capacity(self.layers.len() + 1);
        for layer in &self.layers {
            states.push(x.clone());
            x = layer.forward(x, &cos, &sin, None);
        }
        states.push(self.norm.forward(x));
        states
    }

    /// The final-normed hidden states `[rows, new, hidden]` of `ids`, which
    /// follow the tokens `cache` holds; their keys and values join it.
    pub fn forward_cached(&self, ids: Tensor<2, Int>, cache: &mut KvCache) -> Tensor<3> {
        let [_, new] = ids.dims();
        let past = cache.tokens();
        let (cos, sin) = self.rope.tables(self.head_dim, past, new, &ids.device());
        let mut x = self.embed_tokens.forward(ids);
        for (i, layer) in self.layers.iter().enumerate() {
            x = layer.forward(x, &cos, &sin, Some(cache.layer(i)));
        }
        self.norm.forward(x)
    }

    /// Next-token logits `[batch, tokens, vocab]` from the final hidden state.
    pub fn lm_logits(&self, last_hidden: Tensor<3>) -> Tensor<3> {
        match &self.lm_head {
            Some(head) => head.project(last_hidden),
            None => dense::project_tied(last_hidden, &self.embed_tokens.weight),
        }
    }
}

impl Layer {
    fn forward(
        &self,
        x: Tensor<3>,
        cos: &Tensor<4>,
        sin: &Tensor<4>,
        cache: Option<&mut LayerCache>,
    ) -> Tensor<3> {
        let h = self.input_layernorm.forward(x.clone());
        let x = x + self.self_attn.forward(h, cos, sin, cache);
        let h = self.post_attention_layernorm.forward(x.clone());
        let m = &self.mlp;
        let inner = activation::silu(m.gate_proj.project(h.clone())) * m.up_proj.project(h);
        x + m.down_proj.project(inner)
    }
}

impl Attention {
    /// Queries `[b, heads, l, d]` and keys `[b, kv_heads, l, d]`, normed
    /// (Qwen3) and rotated, and values `[b, kv_heads, l, d]`.
    fn project(
        &self,
        x: Tensor<3>,
        cos: &Tensor<4>,
        sin: &Tensor<4>,
    ) -> (Tensor<4>, Tensor<4>, Tensor<4>) {
        let mut q = split_heads(self.q_proj.project(x.clone()), self.num_heads);
        let mut k = split_heads(self.k_proj.project(x.clone()), self.kv_heads);
        let v = split_heads(self.v_proj.project(x), self.kv_heads);
        if let (Some(qn), Some(kn)) = (&self.q_norm, &self.k_norm) {
            q = qn.forward(q);
            k = kn.forward(k);
        }
        (rotate(q, cos, sin), rotate(k, cos, sin), v)
    }

    /// Each key/value head repeated for the query heads of its group
    /// (transformers' `repeat_kv`).
    fn repeat(&self, x: Tensor<4>) -> Tensor<4> {
        let groups = self.num_heads / self.kv_heads;
        if groups == 1 {
            return x;
        }
        let [b, kv, l, d] = x.dims();
        x.unsqueeze_dim::<5>(2)
            .expand([b, kv, groups, l, d])
            .reshape([b, kv * groups, l, d])
    }

    /// Causal self-attention of `x`'s positions; with a cache slot, after
    /// the keys and values it holds (kept per key/value head), which then
    /// hold `x`'s too.
    fn forward(
        &self,
        x: Tensor<3>,
        cos: &Tensor<4>,
        sin: &Tensor<4>,
        cache: Option<&mut LayerCache>,
    ) -> Tensor<3> {
        let (q, k, v) = self.project(x, cos, sin);
        let (k, v) = match cache {
            None => (k, v),
            Some(slot) => {
                let (k, v) = match slot.take() {
                    Some((pk, pv)) => (Tensor::cat(vec![pk, k], 2), Tensor::cat(vec![pv, v], 2)),
                    None => (k, v),
                };
                *slot = Some((k.clone(), v.clone()));
                (k, v)
            }
        };
        let out = attend(q, self.repeat(k), self.repeat(v), None, true);
        self.o_proj.project(out)
    }
}

/// Key renames from a checkpoint to this module tree: the `model.` prefix
/// goes. A tied checkpoint's `lm_head.weight`, where a file keeps it, is
/// left over.
pub fn checkpoint_key_map() -> Vec<(&'static str, &'static str)> {
    vec![(r"^model\.", "")]
}

/// The fields of a Llama, Qwen2 or Qwen3 `config.json`, under
/// transformers' names.
#[derive(serde::Deserialize)]
struct LlamaJson {
    hidden_size: Option<usize>,
    intermediate_size: Option<usize>,
    num_hidden_layers: Option<usize>,
    num_attention_heads: Option<usize>,
    /// Default `num_attention_heads`.
    num_key_value_heads: Option<usize>,
    /// Default hidden / heads.
    head_dim: Option<usize>,
    max_position_embeddings: Option<usize>,
    /// Default 1e-6.
    rms_norm_eps: Option<f64>,
    /// Default 10000.
    rope_theta: Option<f64>,
    rope_scaling: Option<serde_json::Value>,
    /// transformers 5's home for `rope_theta` and the scaling.
    rope_parameters: Option<serde_json::Value>,
    /// Default `silu`.
    hidden_act: Option<String>,
    #[serde(default)]
    attention_bias: bool,
    #[serde(default)]
    mlp_bias: bool,
    #[serde(default)]
    use_sliding_window: bool,
}

/// Which of the family a config is (`model_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `llama`.
    Llama,
    /// `qwen2`.
    Qwen2,
    /// `qwen3`.
    Qwen3,
}

/// Llama 3's `rope_scaling`, or none; other scalings are refused.
fn rope_scaling(raw: Option<&serde_json::Value>) -> Result<Option<Llama3Scaling>, ModelError> {
    let Some(v) = raw.filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let kind = v
        .get("rope_type")
        .or_else(|| v.get("type"))
        .and_then(|t| t.as_str())
        .unwrap_or("default");
    let number = |key: &str| {
        v.get(key)
            .and_then(serde_json::Value::as_f64)
            .ok_or_else(|| ModelError::Config(format!("rope_scaling of type llama3 lacks {key}")))
    };
    match kind {
        "default" => Ok(None),
        "llama3" => Ok(Some(Llama3Scaling {
            factor: number("factor")?,
            low_freq_factor: number("low_freq_factor")?,
            high_freq_factor: number("high_freq_factor")?,
            original_context: number("original_max_position_embeddings")?,
        })),
        other => Err(ModelError::Unsupported(format!(
            "rope_scaling of type `{other}` is not supported (the default and llama3 are)"
        ))),
    }
}

/// A Llama, Qwen2 or Qwen3 `config.json` (`...ForCausalLM`).
pub(crate) fn read_config(
    json: &serde_json::Value,
    mut common: Common,
    kind: Kind,
) -> Result<ModelConfig, ModelError> {
    let architecture = common.architecture();
    let expected = match kind {
        Kind::Llama => "LlamaForCausalLM",
        Kind::Qwen2 => "Qwen2ForCausalLM",
        Kind::Qwen3 => "Qwen3ForCausalLM",
    };
    if architecture != expected {
        return Err(ModelError::Unsupported(format!(
            "architecture `{architecture}` is not supported ({expected}: the language-model head)"
        )));
    }
    let raw: LlamaJson = fields(json)?;
    if raw.use_sliding_window {
        return Err(ModelError::Unsupported(
            "sliding-window attention (use_sliding_window: true) is not supported".into(),
        ));
    }
    let act = raw.hidden_act.as_deref().unwrap_or("silu");
    if act != "silu" {
        return Err(ModelError::Unsupported(format!(
            "hidden_act `{act}` is not supported (SwiGLU's silu)"
        )));
    }
    let hidden_size = need(raw.hidden_size, "hidden_size")?;
    let num_heads = need(raw.num_attention_heads, "num_attention_heads")?;
    let kv_heads = raw.num_key_value_heads.unwrap_or(num_heads);
    if num_heads == 0 || kv_heads == 0 || num_heads % kv_heads != 0 {
        return Err(ModelError::Config(format!(
            "num_attention_heads ({num_heads}) is not a multiple of num_key_value_heads \
             ({kv_heads})"
        )));
    }
    let head_dim = match kind {
        // transformers 4.57's Qwen2 reads no head_dim (hidden / heads); a
        // config that names another width is refused below by the weights'
        // shapes rather than read two ways.
        Kind::Qwen2 => hidden_size / num_heads,
        _ => raw.head_dim.unwrap_or(hidden_size / num_heads),
    };
    if head_dim == 0 || head_dim % 2 != 0 {
        return Err(ModelError::Config(format!(
            "head_dim {head_dim} is not an even width (RoPE rotates pairs)"
        )));
    }
    // transformers 5 writes `rope_parameters` (theta and scaling in one
    // object) where 4.x wrote `rope_theta` and `rope_scaling`.
    let parameters = raw.rope_parameters.as_ref().filter(|v| !v.is_null());
    let theta = match parameters.and_then(|p| p.get("rope_theta")) {
        Some(t) => t.as_f64().ok_or_else(|| {
            ModelError::Config(format!("rope_parameters.rope_theta is {t}, not a number"))
        })?,
        None => raw.rope_theta.unwrap_or(10000.0),
    };
    let scaling = match parameters {
        Some(p) => rope_scaling(Some(p))?,
        None => rope_scaling(raw.rope_scaling.as_ref())?,
    };
    let settings = LlamaConfig {
        kv_heads,
        head_dim,
        rope: Rope {
            theta,
            llama3: scaling,
        },
        qkv_bias: kind == Kind::Qwen2 || raw.attention_bias,
        o_bias: kind != Kind::Qwen2 && raw.attention_bias,
        mlp_bias: kind == Kind::Llama && raw.mlp_bias,
        qk_norm: kind == Kind::Qwen3,
        tied: common.take_tie_word_embeddings().unwrap_or(false),
    };
    let sizes = Sizes {
        hidden_size,
        embedding_size: None,
        num_layers: need(raw.num_hidden_layers, "num_hidden_layers")?,
        num_heads,
        intermediate_size: need(raw.intermediate_size, "intermediate_size")?,
        max_positions: need(raw.max_position_embeddings, "max_position_embeddings")?,
        type_vocab_size: 0,
        layer_norm_eps: raw.rms_norm_eps.unwrap_or(1e-6),
        activation: Activation::Silu,
        pooler_activation: Activation::Gelu,
    };
    ModelConfig::assemble(common, Family::Llama(settings), Head::CausalLm, sizes)
}

impl Architecture for LlamaModel {
    fn build(config: &ModelConfig, device: &Device) -> Result<Self, ModelError> {
        let Family::Llama(s) = &config.family else {
            return Err(ModelError::Config(format!(
                "{} is not a Llama-family checkpoint",
                config.architecture
            )));
        };
        Ok(Self::new(config, s, device))
    }

    fn key_map(_config: &ModelConfig, _names: Option<&[String]>) -> Vec<(String, String)> {
        owned_map(checkpoint_key_map())
    }

    /// All of the decoder's states, whatever `layers` asks.
    fn hidden_states(&self, batch: &Batch, _layers: usize) -> Vec<Tensor<3>> {
        self.forward(batch)
    }

    fn input_embeddings(&self) -> Tensor<2> {
        self.embed_tokens.weight.val()
    }

    fn tied_head(&self) -> Option<&Param<Tensor<2>>> {
        self.lm_head.is_none().then_some(&self.embed_tokens.weight)
    }

    /// Each layer's causal attention over its normed input.
    fn attention_probabilities(&self, batch: &Batch) -> Option<Vec<Tensor<4>>> {
        let states = self.forward(batch);
        let [_, l] = batch.ids.dims();
        let (cos, sin) = self.rope.tables(self.head_dim, 0, l, &batch.ids.device());
        Some(
            self.layers
                .iter()
                .zip(&states)
                .map(|(layer, x)| {
                    let a = &layer.self_attn;
                    let (q, k, _) = a.project(layer.input_layernorm.forward(x.clone()), &cos, &sin);
                    super::attention::probabilities(q, a.repeat(k), None, None, true, false)
                })
                .collect(),
        )
    }

    fn causal_lm_logits(&self, last_hidden: Tensor<3>) -> Option<Tensor<3>> {
        Some(self.lm_logits(last_hidden))
    }

    fn can_decode(&self) -> bool {
        true
    }

    fn decode_step(&self, ids: Tensor<2, Int>, cache: &mut KvCache) -> Option<Tensor<3>> {
        let hidden = self.forward_cached(ids, cache);
        let [rows, new, width] = hidden.dims();
        // The head (a vocabulary-wide product) runs on the last position only.
        Some(self.lm_logits(hidden.slice([0..rows, new - 1..new, 0..width])))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Llama 3's scaling leaves the high frequencies, divides the low ones
    /// by the factor and blends the ones between (Llama 3.1's settings:
    /// theta 500000, factor 8, 1 and 4, 8192).
    #[test]
    fn llama3_scaling_keeps_high_and_slows_low_frequencies() {
        let plain = Rope {
            theta: 500000.0,
            llama3: None,
        };
        let scaled = Rope {
            llama3: Some(Llama3Scaling {
                factor: 8.0,
                low_freq_factor: 1.0,
                high_freq_factor: 4.0,
                original_context: 8192.0,
            }),
            ..plain
        };
        let (a, b) = (
            plain.inverse_frequencies(128),
            scaled.inverse_frequencies(128),
        );
        assert_eq!(a.len(), 64);
        assert_eq!(a[0], b[0]);
        assert_eq!(a[63] / 8.0, b[63]);
        let wavelen = |f: f32| 2.0 * std::f32::consts::PI / f;
        let medium = (0..64)
            .find(|&i| wavelen(a[i]) >= 2048.0 && wavelen(a[i]) <= 8192.0)
            .unwrap();
        assert!(b[medium] < a[medium] && b[medium] > a[medium] / 8.0);
    }
}
