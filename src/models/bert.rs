//! The BERT family of encoders (BERT, MiniLM, RoBERTa, XLM-R, DistilBERT,
//! BLEURT, ELECTRA): embeddings (narrower than the layers and projected up,
//! in BLEURT-20 and the smaller ELECTRAs), post-norm transformer layers returning every hidden state,
//! and the optional masked-LM and sequence-classification heads.
//!
//! One module tree serves all of them; [`checkpoint_key_map`] renames each
//! family's checkpoint keys onto it (`encoder.layer.N.attention.self.query`
//! and DistilBERT's `transformer.layer.N.attention.q_lin` both become
//! `layers.N.attention.query`).

use burn::module::{Module, Param};
use burn::nn::{Embedding, EmbeddingConfig, LayerNorm, LayerNormConfig, Linear, LinearConfig};
use burn::tensor::{Bool, Device, Tensor, activation};

use super::ModelError;
use super::attention::attend;
use super::config::{Activation, Common, Family, Head, ModelConfig, Sizes, fields, need};
use super::dense::{self, Project};
use super::network::{Architecture, owned_map};
use super::norm::add_norm;
use super::{Batch, activate};

/// Token, position and token-type embeddings, summed and normalised.
#[derive(Module, Debug)]
pub struct Embeddings {
    /// Token embeddings (tied to the masked-LM decoder).
    pub word_embeddings: Embedding,
    /// Learned absolute positions.
    pub position_embeddings: Embedding,
    /// Segment embeddings (absent in DistilBERT).
    pub token_type_embeddings: Option<Embedding>,
    /// Normalisation of the sum.
    pub layer_norm: LayerNorm,
    /// Its epsilon (for [`add_norm`]).
    #[module(skip)]
    pub norm_eps: f64,
}

/// Multi-head self-attention with its output projection.
#[derive(Module, Debug)]
pub struct SelfAttention {
    /// Query projection.
    pub query: Linear,
    /// Key projection.
    pub key: Linear,
    /// Value projection.
    pub value: Linear,
    /// Output projection.
    pub output: Linear,
    /// Number of heads.
    pub num_heads: usize,
}

/// One post-norm transformer layer.
#[derive(Module, Debug)]
pub struct Layer {
    /// Self-attention.
    pub attention: SelfAttention,
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
    /// The norms' epsilon (for [`add_norm`], which burn's norm does not
    /// tell).
    #[module(skip)]
    pub norm_eps: f64,
}

/// Masked-LM head: transform, normalise, project onto the (tied) token
/// embeddings plus a bias.
#[derive(Module, Debug)]
pub struct MaskedLmHead {
    /// Transform before the projection.
    pub dense: Linear,
    /// Norm after the transform.
    pub layer_norm: LayerNorm,
    /// Output bias, one per vocabulary entry.
    pub bias: Param<Tensor<1>>,
    /// Transform activation.
    #[module(skip)]
    pub activation: Activation,
}

/// Sequence-classification head on the first token: dense + activation
/// (BERT's pooler and RoBERTa's classifier use tanh, DistilBERT ReLU), then
/// the output projection to the classes.
#[derive(Module, Debug)]
pub struct ClassifierHead {
    /// Pooling projection.
    pub dense: Linear,
    /// Projection to class logits.
    pub out: Linear,
    /// Pooling activation.
    #[module(skip)]
    pub pool_activation: PoolActivation,
}

/// Activation of the classification pooler.
#[derive(Clone, Copy, Debug)]
pub enum PoolActivation {
    /// BERT and RoBERTa.
    Tanh,
    /// DistilBERT.
    Relu,
    /// ELECTRA (exact GELU).
    Gelu,
}

/// A BERT-family encoder with its optional head.
#[derive(Module, Debug)]
pub struct BertModel {
    /// Input embeddings.
    pub embeddings: Embeddings,
    /// Projection of narrower embeddings to the hidden size (BLEURT-20's
    /// `encoder.embedding_projection`).
    pub embedding_projection: Option<Linear>,
    /// Transformer layers.
    pub layers: Vec<Layer>,
    /// Masked-LM head, when the checkpoint has one.
    pub mlm_head: Option<MaskedLmHead>,
    /// Classification head, when the checkpoint has one.
    pub classifier: Option<ClassifierHead>,
}

/// What one forward pass returns.
pub struct EncoderOutput {
    /// Embedding output then every layer's output: `num_layers + 1` tensors
    /// of `[batch, tokens, hidden]` (index `i` is bert_score's layer `i`).
    pub hidden_states: Vec<Tensor<3>>,
}

fn linear(d_in: usize, d_out: usize, device: &Device) -> Linear {
    LinearConfig::new(d_in, d_out).init(device)
}

fn norm(config: &ModelConfig, device: &Device) -> LayerNorm {
    norm_of(config.hidden_size, config, device)
}

fn norm_of(width: usize, config: &ModelConfig, device: &Device) -> LayerNorm {
    LayerNormConfig::new(width)
        .with_epsilon(config.layer_norm_eps)
        .init(device)
}

fn embedding(n: usize, d: usize, device: &Device) -> Embedding {
    EmbeddingConfig::new(n, d).init(device)
}

impl BertModel {
    /// The module tree for `config`, with freshly initialised weights (load
    /// a checkpoint over them with [`super::load_safetensors`]).
    pub fn new(config: &ModelConfig, device: &Device) -> Self {
        let h = config.hidden_size;
        let e = config.embedding_size.unwrap_or(h);
        let embeddings = Embeddings {
            word_embeddings: embedding(config.vocab_size, e, device),
            position_embeddings: embedding(config.max_positions, e, device),
            token_type_embeddings: (config.type_vocab_size > 0)
                .then(|| embedding(config.type_vocab_size, e, device)),
            layer_norm: norm_of(e, config, device),
            norm_eps: config.layer_norm_eps,
        };
        let embedding_projection = config.embedding_size.map(|e| linear(e, h, device));
        let layers = (0..config.num_layers)
            .map(|_| Layer {
                attention: SelfAttention {
                    query: linear(h, h, device),
                    key: linear(h, h, device),
                    value: linear(h, h, device),
                    output: linear(h, h, device),
                    num_heads: config.num_heads,
                },
                attention_norm: norm(config, device),
                intermediate: linear(h, config.intermediate_size, device),
                output: linear(config.intermediate_size, h, device),
                output_norm: norm(config, device),
                activation: config.activation,
                norm_eps: config.layer_norm_eps,
            })
            .collect();
        let mlm_head = (config.head == Head::MaskedLm).then(|| MaskedLmHead {
            dense: linear(h, h, device),
            layer_norm: norm(config, device),
            bias: Param::from_tensor(Tensor::zeros([config.vocab_size], device)),
            activation: config.activation,
        });
        let classifier = (config.head == Head::SequenceClassification).then(|| ClassifierHead {
            dense: linear(h, h, device),
            out: linear(h, config.labels.len(), device),
            pool_activation: match config.family {
                Family::DistilBert => PoolActivation::Relu,
                Family::Electra => PoolActivation::Gelu,
                _ => PoolActivation::Tanh,
            },
        });
        Self {
            embeddings,
            embedding_projection,
            layers,
            mlm_head,
            classifier,
        }
    }

    /// Runs the encoder over a padded batch, returning every hidden state.
    pub fn forward(&self, batch: &Batch) -> EncoderOutput {
        self.forward_layers(batch, self.layers.len())
    }

    /// Runs the embeddings and the first `layers` layers only (a metric
    /// that reads layer 9 of 12 skips the rest): `layers + 1` hidden states.
    pub fn forward_layers(&self, batch: &Batch, layers: usize) -> EncoderOutput {
        let e = &self.embeddings;
        let x = e.word_embeddings.forward(batch.ids.clone())
            + e.position_embeddings.forward(batch.positions.clone());
        let mut x = match &e.token_type_embeddings {
            Some(types) => add_norm(
                &e.layer_norm,
                e.norm_eps,
                x,
                types.forward(batch.types.clone()),
            ),
            None => e.layer_norm.forward(x),
        };
        if let Some(projection) = &self.embedding_projection {
            x = projection.project(x);
        }
        let padding = batch.padding.clone();
        let mut hidden_states = Vec::with_capacity(layers + 1);
        for layer in self.layers.iter().take(layers) {
            hidden_states.push(x.clone());
            x = layer.forward(x, padding.clone());
        }
        hidden_states.push(x);
        EncoderOutput { hidden_states }
    }

    /// Masked-LM logits `[batch, tokens, vocab]` from the last hidden state,
    /// or None without a masked-LM head.
    pub fn mlm_logits(&self, last_hidden: Tensor<3>) -> Option<Tensor<3>> {
        let head = self.mlm_head.as_ref()?;
        let x = activate(head.dense.project(last_hidden), head.activation);
        let x = head.layer_norm.forward(x);
        let decoder = self.embeddings.word_embeddings.weight.val().transpose();
        Some(dense::linear(x, decoder, Some(head.bias.val())))
    }

    /// Class logits `[batch, classes]` from the first token of the last
    /// hidden state, or None without a classification head.
    pub fn class_logits(&self, last_hidden: Tensor<3>) -> Option<Tensor<2>> {
        let head = self.classifier.as_ref()?;
        let [batch, _, hidden] = last_hidden.dims();
        let first = last_hidden
            .slice([0..batch, 0..1, 0..hidden])
            .reshape([batch, hidden]);
        let pooled = head.dense.project(first);
        let pooled = match head.pool_activation {
            PoolActivation::Tanh => activation::tanh(pooled),
            PoolActivation::Relu => activation::relu(pooled),
            PoolActivation::Gelu => activation::gelu(pooled),
        };
        Some(head.out.project(pooled))
    }
}

impl Layer {
    fn forward(&self, x: Tensor<3>, padding: Tensor<4, Bool>) -> Tensor<3> {
        let attended = self.attention.forward(x.clone(), padding);
        let x = add_norm(&self.attention_norm, self.norm_eps, x, attended);
        let inner = activate(self.intermediate.project(x.clone()), self.activation);
        let down = self.output.project(inner);
        add_norm(&self.output_norm, self.norm_eps, x, down)
    }
}

impl SelfAttention {
    /// Scaled dot-product attention over all heads; `padding` (`[batch, 1,
    /// 1, tokens]`, true for padding) hides padding.
    pub fn forward(&self, x: Tensor<3>, padding: Tensor<4, Bool>) -> Tensor<3> {
        let q = split_heads(self.query.project(x.clone()), self.num_heads);
        let k = split_heads(self.key.project(x.clone()), self.num_heads);
        let v = split_heads(self.value.project(x), self.num_heads);
        self.output.project(attend(q, k, v, Some(padding), false))
    }
}

/// `[batch, tokens, hidden]` to `[batch, heads, tokens, head_dim]`.
pub(crate) fn split_heads(x: Tensor<3>, heads: usize) -> Tensor<4> {
    let [b, l, h] = x.dims();
    x.reshape([b, l, heads, h / heads]).swap_dims(1, 2)
}

/// Key renames from a family's checkpoint names to this module tree, in
/// the order they apply (each is a regex and its replacement). Tensors
/// with no place here (tied decoders, an unused pooler) are left over and
/// ignored.
pub fn checkpoint_key_map(family: Family) -> Vec<(&'static str, &'static str)> {
    let mut map = vec![
        (r"^(bert|roberta|distilbert|bleurt|electra)\.", ""),
        (r"^encoder\.embedding_projection\.", "embedding_projection."),
        (r"^embeddings_project\.", "embedding_projection."),
        (r"^encoder\.layer\.(\d+)\.", "layers.$1."),
        (r"^transformer\.layer\.(\d+)\.", "layers.$1."),
        (r"^embeddings\.LayerNorm\.", "embeddings.layer_norm."),
        (r"\.attention\.self\.(query|key|value)\.", ".attention.$1."),
        (r"\.attention\.output\.dense\.", ".attention.output."),
        (r"\.attention\.output\.LayerNorm\.", ".attention_norm."),
        (r"\.intermediate\.dense\.", ".intermediate."),
        (r"\.output\.dense\.", ".output."),
        (r"\.output\.LayerNorm\.", ".output_norm."),
        // BERT's heads.
        (r"^cls\.predictions\.transform\.dense\.", "mlm_head.dense."),
        (
            r"^cls\.predictions\.transform\.LayerNorm\.",
            "mlm_head.layer_norm.",
        ),
        (r"^cls\.predictions\.bias$", "mlm_head.bias"),
        (r"^pooler\.dense\.", "classifier.dense."),
        (r"^classifier\.(weight|bias)$", "classifier.out.$1"),
        // RoBERTa's heads.
        (r"^lm_head\.dense\.", "mlm_head.dense."),
        (r"^lm_head\.layer_norm\.", "mlm_head.layer_norm."),
        (r"^lm_head\.bias$", "mlm_head.bias"),
        (r"^classifier\.out_proj\.", "classifier.out."),
    ];
    if family == Family::DistilBert {
        map.extend([
            (r"\.attention\.q_lin\.", ".attention.query."),
            (r"\.attention\.k_lin\.", ".attention.key."),
            (r"\.attention\.v_lin\.", ".attention.value."),
            (r"\.attention\.out_lin\.", ".attention.output."),
            (r"\.sa_layer_norm\.", ".attention_norm."),
            (r"\.ffn\.lin1\.", ".intermediate."),
            (r"\.ffn\.lin2\.", ".output."),
            (r"\.output_layer_norm\.", ".output_norm."),
            (r"^vocab_transform\.", "mlm_head.dense."),
            (r"^vocab_layer_norm\.", "mlm_head.layer_norm."),
            (r"^vocab_projector\.bias$", "mlm_head.bias"),
            (r"^pre_classifier\.", "classifier.dense."),
        ]);
    }
    map
}

/// Position ids of `ids` (then padding up to `len`) as the family numbers
/// them: `0..len` for BERT; for RoBERTa as transformers does,
/// `pad + cumsum(id != pad)` on real tokens and `pad` on padding ids, so a
/// literal `<pad>` in a text takes no position.
pub fn position_ids(family: Family, pad_token_id: u32, ids: &[u32], len: usize) -> Vec<i64> {
    match family {
        Family::Roberta => {
            let pad = i64::from(pad_token_id);
            let mut seen = 0;
            (0..len)
                .map(|i| match ids.get(i) {
                    Some(&id) if id != pad_token_id => {
                        seen += 1;
                        pad + seen
                    }
                    _ => pad,
                })
                .collect()
        }
        _ => (0..len as i64).collect(),
    }
}

/// `config.json` of BERT, RoBERTa, XLM-R, ELECTRA and BLEURT, under
/// transformers' names (`BertConfig`...), with its defaults.
#[derive(serde::Deserialize)]
struct BertJson {
    hidden_size: Option<usize>,
    embedding_size: Option<usize>,
    num_hidden_layers: Option<usize>,
    num_attention_heads: Option<usize>,
    /// Default 4 x `hidden_size`.
    intermediate_size: Option<usize>,
    max_position_embeddings: Option<usize>,
    /// Default 2 (RoBERTa's checkpoints say 1).
    type_vocab_size: Option<usize>,
    /// Default 1e-12.
    layer_norm_eps: Option<f64>,
    /// Default `gelu`.
    hidden_act: Option<String>,
    /// `absolute` only.
    position_embedding_type: Option<String>,
}

/// `config.json` of DistilBERT, under its own names (`DistilBertConfig`).
#[derive(serde::Deserialize)]
struct DistilBertJson {
    dim: Option<usize>,
    n_layers: Option<usize>,
    n_heads: Option<usize>,
    /// Default 4 x `dim`.
    hidden_dim: Option<usize>,
    max_position_embeddings: Option<usize>,
    /// Default `gelu`.
    activation: Option<String>,
    /// Unsupported when true.
    sinusoidal_pos_embds: Option<bool>,
}

/// A BERT-family `config.json` (`family` from its `model_type`).
pub(crate) fn read_config(
    json: &serde_json::Value,
    common: Common,
    family: Family,
) -> Result<ModelConfig, ModelError> {
    let head = common.encoder_head()?;
    if family == Family::Electra && head == Head::MaskedLm {
        return Err(ModelError::Unsupported(
            "ELECTRA generators (ElectraForMaskedLM) are not supported; discriminators are".into(),
        ));
    }
    let sizes = if family == Family::DistilBert {
        let raw: DistilBertJson = fields(json)?;
        if raw.sinusoidal_pos_embds == Some(true) {
            return Err(ModelError::Unsupported(
                "sinusoidal DistilBERT positions are not supported".into(),
            ));
        }
        let hidden_size = need(raw.dim, "dim")?;
        Sizes {
            hidden_size,
            embedding_size: None,
            num_layers: need(raw.n_layers, "n_layers")?,
            num_heads: need(raw.n_heads, "n_heads")?,
            intermediate_size: raw.hidden_dim.unwrap_or(4 * hidden_size),
            max_positions: need(raw.max_position_embeddings, "max_position_embeddings")?,
            type_vocab_size: 0,
            layer_norm_eps: 1e-12,
            activation: Activation::named(raw.activation.as_deref().unwrap_or("gelu"))?,
            pooler_activation: Activation::Gelu,
        }
    } else {
        let raw: BertJson = fields(json)?;
        if let Some(p) = raw
            .position_embedding_type
            .as_deref()
            .filter(|&p| p != "absolute")
        {
            return Err(ModelError::Unsupported(format!(
                "position_embedding_type `{p}` is not supported (absolute only)"
            )));
        }
        let hidden_size = need(raw.hidden_size, "hidden_size")?;
        // BLEURT projects whenever it names an embedding size; ELECTRA only
        // when the embeddings are narrower than the layers.
        let embedding_size = match family {
            Family::Electra => raw.embedding_size.filter(|&e| e != hidden_size),
            _ => raw.embedding_size,
        };
        if embedding_size.is_some() && (family == Family::Roberta || head.is_lm()) {
            return Err(ModelError::Unsupported(
                "an embedding_size is supported on BERT, BLEURT and ELECTRA encoders without a \
                 language-model head only"
                    .into(),
            ));
        }
        Sizes {
            hidden_size,
            embedding_size,
            num_layers: need(raw.num_hidden_layers, "num_hidden_layers")?,
            num_heads: need(raw.num_attention_heads, "num_attention_heads")?,
            intermediate_size: raw.intermediate_size.unwrap_or(4 * hidden_size),
            max_positions: need(raw.max_position_embeddings, "max_position_embeddings")?,
            type_vocab_size: raw.type_vocab_size.unwrap_or(2),
            layer_norm_eps: raw.layer_norm_eps.unwrap_or(1e-12),
            activation: Activation::named(raw.hidden_act.as_deref().unwrap_or("gelu"))?,
            pooler_activation: Activation::Gelu,
        }
    };
    ModelConfig::assemble(common, family, head, sizes)
}

impl Architecture for BertModel {
    fn build(config: &ModelConfig, device: &Device) -> Result<Self, ModelError> {
        Ok(Self::new(config, device))
    }

    fn key_map(config: &ModelConfig, _names: Option<&[String]>) -> Vec<(String, String)> {
        owned_map(checkpoint_key_map(config.family))
    }

    fn hidden_states(&self, batch: &Batch, layers: usize) -> Vec<Tensor<3>> {
        self.forward_layers(batch, layers).hidden_states
    }

    fn input_embeddings(&self) -> Tensor<2> {
        self.embeddings.word_embeddings.weight.val()
    }

    /// Each layer's attention over its input (the hidden state before it).
    fn attention_probabilities(&self, batch: &Batch) -> Option<Vec<Tensor<4>>> {
        let states = self.forward(batch).hidden_states;
        Some(
            self.layers
                .iter()
                .zip(&states)
                .map(|(layer, x)| {
                    let a = &layer.attention;
                    let q = split_heads(a.query.project(x.clone()), a.num_heads);
                    let k = split_heads(a.key.project(x.clone()), a.num_heads);
                    super::attention::probabilities(
                        q,
                        k,
                        None,
                        Some(batch.padding.clone()),
                        false,
                        false,
                    )
                })
                .collect(),
        )
    }

    fn mlm_logits(&self, hidden: Tensor<3>) -> Option<Tensor<3>> {
        BertModel::mlm_logits(self, hidden)
    }

    fn class_logits(&self, last_hidden: Tensor<3>) -> Option<Tensor<2>> {
        BertModel::class_logits(self, last_hidden)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roberta_positions_skip_literal_padding_ids_as_transformers_does() {
        // <s> a <pad> b </s>, padded to 7: transformers gives 2 3 1 4 5 1 1.
        assert_eq!(
            position_ids(Family::Roberta, 1, &[0, 9, 1, 8, 2], 7),
            [2, 3, 1, 4, 5, 1, 1]
        );
        assert_eq!(
            position_ids(Family::Bert, 0, &[101, 0, 102], 4),
            [0, 1, 2, 3]
        );
    }
}
