//! GPT-2: pre-norm causal transformer with a language-model head tied to the
//! token embeddings. Module names mirror the Hugging Face checkpoint
//! (`h.N.attn.c_attn`...), so loading only drops the `transformer.` prefix.

use burn::module::{Module, Param};
use burn::nn::{Embedding, EmbeddingConfig, LayerNorm, LayerNormConfig};
use burn::tensor::{Device, Int, Tensor};

use super::ModelError;
use super::config::{Activation, Common, Family, Head, ModelConfig, Sizes, fields, need};
use super::dense::project_tied;
use super::generate::{KvCache, LayerCache, attend_appending};
use super::network::{Architecture, owned_map};
use super::{Batch, activate};
use crate::models::attention::attend;
use crate::models::bert::split_heads;

/// HF's `Conv1D`: a linear layer whose weight is stored `[in, out]` (the
/// layout burn's `Linear` uses, so it loads without the transpose that
/// PyTorch's `nn.Linear` weights get).
#[derive(Module, Debug)]
pub struct Conv1D {
    /// `[in, out]` weight.
    pub weight: Param<Tensor<2>>,
    /// `[out]` bias.
    pub bias: Param<Tensor<1>>,
}

impl Conv1D {
    fn new(d_in: usize, d_out: usize, device: &Device) -> Self {
        Self {
            weight: Param::from_tensor(Tensor::zeros([d_in, d_out], device)),
            bias: Param::from_tensor(Tensor::zeros([d_out], device)),
        }
    }

    /// `x W + b`.
    pub fn forward(&self, x: Tensor<3>) -> Tensor<3> {
        super::dense::project(x, &self.weight, Some(&self.bias))
    }
}

/// Fused query/key/value projection, attention and output projection.
#[derive(Module, Debug)]
pub struct Attention {
    /// Query, key and value in one `[hidden, 3 hidden]` projection.
    pub c_attn: Conv1D,
    /// Output projection.
    pub c_proj: Conv1D,
    /// Number of heads.
    pub num_heads: usize,
}

/// Feed-forward block.
#[derive(Module, Debug)]
pub struct Mlp {
    /// Up projection.
    pub c_fc: Conv1D,
    /// Down projection.
    pub c_proj: Conv1D,
    /// Activation (`gelu_new`).
    #[module(skip)]
    pub activation: Activation,
}

/// One pre-norm block.
#[derive(Module, Debug)]
pub struct Block {
    /// Norm before attention.
    pub ln_1: LayerNorm,
    /// Causal self-attention.
    pub attn: Attention,
    /// Norm before the feed-forward block.
    pub ln_2: LayerNorm,
    /// Feed-forward block.
    pub mlp: Mlp,
}

/// GPT-2 with its tied language-model head.
#[derive(Module, Debug)]
pub struct Gpt2Model {
    /// Token embeddings (also the output projection).
    pub wte: Embedding,
    /// Learned positions.
    pub wpe: Embedding,
    /// Blocks.
    pub h: Vec<Block>,
    /// Final norm.
    pub ln_f: LayerNorm,
}

/// What one forward pass returns.
pub struct DecoderOutput {
    /// As in transformers: the embeddings, the input of every later block,
    /// and last the final-normed output (`num_layers + 1` tensors).
    pub hidden_states: Vec<Tensor<3>>,
}

impl Gpt2Model {
    /// The module tree for `config`, weights zeroed until a checkpoint loads.
    pub fn new(config: &ModelConfig, device: &Device) -> Self {
        let h = config.hidden_size;
        let norm = || {
            LayerNormConfig::new(h)
                .with_epsilon(config.layer_norm_eps)
                .init(device)
        };
        let blocks = (0..config.num_layers)
            .map(|_| Block {
                ln_1: norm(),
                attn: Attention {
                    c_attn: Conv1D::new(h, 3 * h, device),
                    c_proj: Conv1D::new(h, h, device),
                    num_heads: config.num_heads,
                },
                ln_2: norm(),
                mlp: Mlp {
                    c_fc: Conv1D::new(h, config.intermediate_size, device),
                    c_proj: Conv1D::new(config.intermediate_size, h, device),
                    activation: config.activation,
                },
            })
            .collect();
        Self {
            wte: EmbeddingConfig::new(config.vocab_size, h).init(device),
            wpe: EmbeddingConfig::new(config.max_positions, h).init(device),
            h: blocks,
            ln_f: norm(),
        }
    }

    /// Runs the decoder over a right-padded batch. Padding needs no mask: a
    /// real token never attends to a later position.
    pub fn forward(&self, batch: &Batch) -> DecoderOutput {
        let mut x = self.wte.forward(batch.ids.clone()) + self.wpe.forward(batch.positions.clone());
        let mut hidden_states = Vec::with_capacity(self.h.len() + 1);
        for block in &self.h {
            hidden_states.push(x.clone());
            x = block.forward(x);
        }
        hidden_states.push(self.ln_f.forward(x));
        DecoderOutput { hidden_states }
    }

    /// The final-normed hidden states `[rows, new, hidden]` of `ids`
    /// (`[rows, new]`), which follow the tokens `cache` holds; their keys
    /// and values join the cache. Every row has the same length, so no
    /// padding mask is needed; the caller keeps positions within the
    /// model's limit.
    pub fn forward_cached(&self, ids: Tensor<2, Int>, cache: &mut KvCache) -> Tensor<3> {
        let [rows, new] = ids.dims();
        let positions = cache.positions(rows, new, &ids.device());
        let mut x = self.wte.forward(ids) + self.wpe.forward(positions);
        for (i, block) in self.h.iter().enumerate() {
            x = block.forward_cached(x, Some(cache.layer(i)));
        }
        self.ln_f.forward(x)
    }

    /// Next-token logits `[batch, tokens, vocab]` from the final hidden
    /// state (the head is the token embedding matrix).
    pub fn lm_logits(&self, last_hidden: Tensor<3>) -> Tensor<3> {
        project_tied(last_hidden, &self.wte.weight)
    }
}

impl Block {
    fn forward(&self, x: Tensor<3>) -> Tensor<3> {
        self.forward_cached(x, None)
    }

    /// The block over `x`; with a cache slot, attention also reads the
    /// slot's keys and values and leaves all of them there.
    fn forward_cached(&self, x: Tensor<3>, cache: Option<&mut LayerCache>) -> Tensor<3> {
        let x = x.clone() + self.attn.forward(self.ln_1.forward(x), cache);
        let inner = activate(
            self.mlp.c_fc.forward(self.ln_2.forward(x.clone())),
            self.mlp.activation,
        );
        x + self.mlp.c_proj.forward(inner)
    }
}

impl Attention {
    /// Causal self-attention of `x`'s positions. With a cache slot they
    /// follow the positions whose keys and values it holds (the causal
    /// mask offset by them), and it then holds `x`'s too.
    fn forward(&self, x: Tensor<3>, cache: Option<&mut LayerCache>) -> Tensor<3> {
        let heads = self.num_heads;
        // `[b, 3 * heads, l, d]`: q, k and v are its three blocks of heads,
        // views of the one product (slicing its columns first would make
        // splitting the heads copy them).
        let qkv = split_heads(self.c_attn.forward(x), 3 * heads);
        let [b, _, l, d] = qkv.dims();
        let part = |i: usize| {
            qkv.clone()
                .slice([0..b, i * heads..(i + 1) * heads, 0..l, 0..d])
        };
        let (q, k, v) = (part(0), part(1), part(2));
        let out = match cache {
            None => attend(q, k, v, None, true),
            Some(slot) => attend_appending(q, k, v, slot),
        };
        self.c_proj.forward(out)
    }
}

/// Key renames from GPT-2 checkpoints (with or without the `transformer.`
/// prefix) to this module tree. `lm_head.weight` is tied and left over.
pub fn checkpoint_key_map() -> Vec<(&'static str, &'static str)> {
    vec![(r"^transformer\.", "")]
}

/// GPT-2's `config.json`, under transformers' names (`GPT2Config`).
#[derive(serde::Deserialize)]
struct Gpt2Json {
    n_embd: Option<usize>,
    n_layer: Option<usize>,
    n_head: Option<usize>,
    /// Default 4 x `n_embd` (`null` in the hub's configs).
    n_inner: Option<usize>,
    n_positions: Option<usize>,
    /// Default 1e-5.
    layer_norm_epsilon: Option<f64>,
    /// Default `gelu_new`.
    activation_function: Option<String>,
}

/// A GPT-2 `config.json`: a causal LM whatever its class (`GPT2Model`'s
/// weights get the tied head).
pub(crate) fn read_config(
    json: &serde_json::Value,
    common: Common,
) -> Result<ModelConfig, ModelError> {
    let raw: Gpt2Json = fields(json)?;
    let hidden_size = need(raw.n_embd, "n_embd")?;
    let sizes = Sizes {
        hidden_size,
        embedding_size: None,
        num_layers: need(raw.n_layer, "n_layer")?,
        num_heads: need(raw.n_head, "n_head")?,
        intermediate_size: raw.n_inner.unwrap_or(4 * hidden_size),
        max_positions: need(raw.n_positions, "n_positions")?,
        type_vocab_size: 0,
        layer_norm_eps: raw.layer_norm_epsilon.unwrap_or(1e-5),
        activation: Activation::named(raw.activation_function.as_deref().unwrap_or("gelu_new"))?,
        pooler_activation: Activation::Gelu,
    };
    ModelConfig::assemble(common, Family::Gpt2, Head::CausalLm, sizes)
}

impl Architecture for Gpt2Model {
    fn build(config: &ModelConfig, device: &Device) -> Result<Self, ModelError> {
        Ok(Self::new(config, device))
    }

    fn key_map(_config: &ModelConfig, _names: Option<&[String]>) -> Vec<(String, String)> {
        owned_map(checkpoint_key_map())
    }

    /// All of the decoder's states, whatever `layers` asks.
    fn hidden_states(&self, batch: &Batch, _layers: usize) -> Vec<Tensor<3>> {
        self.forward(batch).hidden_states
    }

    fn input_embeddings(&self) -> Tensor<2> {
        self.wte.weight.val()
    }

    fn tied_head(&self) -> Option<&Param<Tensor<2>>> {
        Some(&self.wte.weight)
    }

    /// Each block's causal attention over its normed input.
    fn attention_probabilities(&self, batch: &Batch) -> Option<Vec<Tensor<4>>> {
        let states = self.forward(batch).hidden_states;
        Some(
            self.h
                .iter()
                .zip(&states)
                .map(|(block, x)| {
                    let heads = block.attn.num_heads;
                    let qkv = split_heads(
                        block.attn.c_attn.forward(block.ln_1.forward(x.clone())),
                        3 * heads,
                    );
                    let [b, _, l, d] = qkv.dims();
                    let part = |i: usize| {
                        qkv.clone()
                            .slice([0..b, i * heads..(i + 1) * heads, 0..l, 0..d])
                    };
                    super::attention::probabilities(part(0), part(1), None, None, true, false)
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
