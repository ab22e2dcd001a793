//! A checkpoint's `config.json`, read into what our architectures need.
//!
//! Every family names its sizes its own way (`hidden_size`, `n_embd`,
//! `d_model`, `dim`...): each family's module reads its own fields, under
//! Hugging Face's names and with transformers' defaults (`bert::read_config`,
//! `gpt2::read_config`, `bart::read_config`, `deberta::read_config`), into
//! the [`Sizes`] every family has; this file reads the fields all of them
//! share ([`Common`]: the model type, the head, the labels, the padding id)
//! and checks the result.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde::de::DeserializeOwned;

use super::ModelError;
use super::bart::DecoderConfig;
use super::comet::{CometHparams, CometKind};
use super::deberta::DebertaConfig;
use super::llama::LlamaConfig;
use super::t5::T5Config;

/// Architecture family a checkpoint belongs to, with the settings only
/// that family has.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Family {
    /// BERT, MiniLM and other `model_type: bert` encoders (BLEURT's too:
    /// BERT with an optional embedding projection).
    Bert,
    /// RoBERTa and XLM-RoBERTa: BERT with offset positions and one token type.
    Roberta,
    /// DistilBERT: BERT without token types, under other parameter names.
    DistilBert,
    /// ELECTRA discriminators: BERT with narrower embeddings projected up
    /// (when narrower) and a gelu classification head.
    Electra,
    /// GPT-2 causal language models.
    Gpt2,
    /// BART encoder-decoders (`model_type: bart`), with their decoder (the
    /// shared sizes describe the encoder).
    Bart(DecoderConfig),
    /// DeBERTa (`model_type: deberta`, v1) and DeBERTa-v2/v3 (`deberta-v2`):
    /// disentangled attention, with its relative-position settings.
    Deberta(DebertaConfig),
    /// T5 and mT5 encoder-decoders (`model_type: t5`, `mt5`), with their
    /// decoder and relative-position settings.
    T5(T5Config),
    /// Decoder LLMs of the Llama family (`model_type: llama`, `qwen2`,
    /// `qwen3`), with their attention and position settings.
    Llama(LlamaConfig),
}

impl Family {
    /// The `model_type`s we read, as one line for error messages.
    const SUPPORTED: &str = "bert, bleurt, roberta, xlm-roberta, camembert, distilbert, electra, gpt2, bart, \
         prism, deberta, deberta-v2, t5, mt5, llama, qwen2, qwen3";

    /// Whether this is one of the BERT-family encoders [`super::bert`] runs.
    pub fn is_bert_like(self) -> bool {
        matches!(
            self,
            Self::Bert | Self::Roberta | Self::DistilBert | Self::Electra
        )
    }
}

/// Head on top of the encoder or decoder, from `architectures[0]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Head {
    /// Hidden states only (`BertModel`, `RobertaModel`...).
    None,
    /// Masked-LM head (`BertForMaskedLM`, `RobertaForMaskedLM`...).
    MaskedLm,
    /// Sequence classification (`...ForSequenceClassification`), e.g. NLI.
    SequenceClassification,
    /// GPT-2's tied language-model head (`GPT2LMHeadModel`, `GPT2Model`).
    CausalLm,
    /// A COMET estimator on the encoder (`hparams.yaml` beside the checkpoint).
    Comet(CometKind),
    /// An encoder-decoder with its tied language-model head
    /// (`BartForConditionalGeneration`).
    Seq2SeqLm,
}

impl Head {
    /// Whether the head projects onto the vocabulary through the tied
    /// input embeddings.
    pub fn is_lm(self) -> bool {
        matches!(self, Self::MaskedLm | Self::CausalLm | Self::Seq2SeqLm)
    }
}

/// Activation of the feed-forward layers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activation {
    /// Exact (erf) GELU: BERT's `gelu`.
    Gelu,
    /// tanh-approximated GELU: GPT-2's `gelu_new`.
    GeluTanh,
    /// ReLU.
    Relu,
    /// SiLU (swish): the gate of a SwiGLU feed-forward.
    Silu,
}

impl Activation {
    /// transformers' activation name (`hidden_act`, `activation_function`).
    pub(crate) fn named(name: &str) -> Result<Self, ModelError> {
        match name {
            "gelu" => Ok(Self::Gelu),
            "gelu_new" | "gelu_pytorch_tanh" | "gelu_fast" => Ok(Self::GeluTanh),
            "relu" => Ok(Self::Relu),
            "silu" | "swish" => Ok(Self::Silu),
            other => Err(ModelError::Unsupported(format!(
                "activation `{other}` is not supported"
            ))),
        }
    }
}

/// Everything our architectures need to know about a checkpoint.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelConfig {
    /// Architecture family, with its own settings.
    pub family: Family,
    /// Head the checkpoint carries.
    pub head: Head,
    /// `architectures[0]`, or the model type when absent.
    pub architecture: String,
    /// Vocabulary size.
    pub vocab_size: usize,
    /// Hidden size.
    pub hidden_size: usize,
    /// Width of the embeddings when it differs from the hidden size
    /// (BLEURT-20): a projection maps them up before the first layer.
    pub embedding_size: Option<usize>,
    /// Number of transformer layers.
    pub num_layers: usize,
    /// Attention heads per layer.
    pub num_heads: usize,
    /// Feed-forward inner size.
    pub intermediate_size: usize,
    /// Learned positions available (inputs are truncated to fit).
    pub max_positions: usize,
    /// Token types (0 for DistilBERT and GPT-2).
    pub type_vocab_size: usize,
    /// Layer-norm epsilon.
    pub layer_norm_eps: f64,
    /// Feed-forward activation.
    pub activation: Activation,
    /// Padding id (RoBERTa's positions start after it).
    pub pad_token_id: u32,
    /// The ids that end a generated text (`eos_token_id`: one or a list;
    /// empty when config.json names none).
    pub eos_token_ids: Vec<u32>,
    /// Class labels in output order, from `id2label` (classification heads).
    pub labels: Vec<String>,
    /// COMET's hparams, when the encoder carries a COMET estimator.
    pub comet: Option<CometHparams>,
    /// Activation of a classifier's pooler (DeBERTa's `pooler_hidden_act`).
    pub pooler_activation: Activation,
}

/// The fields every family's `config.json` has under the same names.
#[derive(Deserialize)]
pub(crate) struct Common {
    model_type: Option<String>,
    #[serde(default)]
    architectures: Vec<String>,
    vocab_size: Option<usize>,
    pad_token_id: Option<serde_json::Value>,
    eos_token_id: Option<serde_json::Value>,
    #[serde(default)]
    id2label: BTreeMap<String, String>,
    #[serde(default)]
    label2id: BTreeMap<String, serde_json::Value>,
    tie_word_embeddings: Option<bool>,
}

impl Common {
    /// `tie_word_embeddings`, taken by a family whose head may be its own
    /// (T5 v1.1); for the others an untied head is refused.
    pub(crate) fn take_tie_word_embeddings(&mut self) -> Option<bool> {
        self.tie_word_embeddings.take()
    }

    /// `architectures[0]`, or the model type when absent.
    pub(crate) fn architecture(&self) -> String {
        self.architectures
            .first()
            .cloned()
            .unwrap_or_else(|| self.model_type.clone().unwrap_or_default())
    }

    /// The head an encoder's architecture names: `...ForMaskedLM`,
    /// `...ForSequenceClassification`, a base model, or none named.
    pub(crate) fn encoder_head(&self) -> Result<Head, ModelError> {
        let architecture = self.architecture();
        if architecture.ends_with("ForMaskedLM") {
            Ok(Head::MaskedLm)
        } else if architecture.ends_with("ForSequenceClassification") {
            Ok(Head::SequenceClassification)
        } else if architecture.ends_with("Model")
            || self.architectures.is_empty()
            // An ELECTRA discriminator's replaced-token head is not used: its encoder is.
            || architecture == "ElectraForPreTraining"
        {
            Ok(Head::None)
        } else {
            Err(ModelError::Unsupported(format!(
                "architecture `{architecture}` is not supported (a base model, \
                 ...ForMaskedLM or ...ForSequenceClassification)"
            )))
        }
    }
}

/// The sizes every family states, each under its own names.
pub(crate) struct Sizes {
    pub hidden_size: usize,
    pub embedding_size: Option<usize>,
    pub num_layers: usize,
    pub num_heads: usize,
    pub intermediate_size: usize,
    pub max_positions: usize,
    pub type_vocab_size: usize,
    pub layer_norm_eps: f64,
    pub activation: Activation,
    pub pooler_activation: Activation,
}

/// A token id as config.json writes it (a non-negative integer).
fn token_id(n: &serde_json::Number, field: &str) -> Result<u32, ModelError> {
    n.as_u64()
        .and_then(|id| u32::try_from(id).ok())
        .ok_or_else(|| ModelError::Config(format!("{field} {n} is not a token id")))
}

/// A field `config.json` must have.
pub(crate) fn need<T>(v: Option<T>, name: &str) -> Result<T, ModelError> {
    v.ok_or_else(|| ModelError::Config(format!("config.json lacks {name}")))
}

/// `config.json`'s fields as one family's struct (`T` names them).
pub(crate) fn fields<T: DeserializeOwned>(json: &serde_json::Value) -> Result<T, ModelError> {
    T::deserialize(json).map_err(|e| ModelError::Config(format!("config.json is not valid: {e}")))
}

impl ModelConfig {
    /// Reads `config.json`. Unsupported architectures and missing sizes are
    /// errors that name what is wrong.
    pub fn from_json(text: &str) -> Result<Self, ModelError> {
        let json: serde_json::Value = serde_json::from_str(text)
            .map_err(|e| ModelError::Config(format!("config.json is not valid: {e}")))?;
        let common: Common = fields(&json)?;
        let config = match common.model_type.as_deref().unwrap_or_default() {
            "bert" | "bleurt" => super::bert::read_config(&json, common, Family::Bert),
            "roberta" | "xlm-roberta" | "camembert" => {
                super::bert::read_config(&json, common, Family::Roberta)
            }
            "distilbert" => super::bert::read_config(&json, common, Family::DistilBert),
            "electra" => super::bert::read_config(&json, common, Family::Electra),
            "gpt2" => super::gpt2::read_config(&json, common),
            "bart" | "prism" => super::bart::read_config(&json, common),
            "deberta" => super::deberta::read_config(&json, common, true),
            "deberta-v2" => super::deberta::read_config(&json, common, false),
            "t5" | "mt5" => super::t5::read_config(&json, common),
            "llama" => super::llama::read_config(&json, common, super::llama::Kind::Llama),
            "qwen2" => super::llama::read_config(&json, common, super::llama::Kind::Qwen2),
            "qwen3" => super::llama::read_config(&json, common, super::llama::Kind::Qwen3),
            "" => Err(ModelError::Config(
                "config.json has no model_type (a checkpoint saved before transformers, \
                 such as pytorch_pretrained_bert's: add \"model_type\": \"bert\", its \
                 class under \"architectures\", e.g. [\"BertForSequenceClassification\"], \
                 and a classifier's \"id2label\")"
                    .into(),
            )),
            other => Err(ModelError::Unsupported(format!(
                "model_type `{other}` is not supported (supported: {})",
                Family::SUPPORTED
            ))),
        }?;
        config.check()?;
        Ok(config)
    }

    /// Assembles a family's reading of `config.json` with the shared
    /// fields: the labels, the padding id (1 by default where the family's
    /// vocabulary puts `<pad>` there), and the checks on the head.
    pub(crate) fn assemble(
        common: Common,
        family: Family,
        head: Head,
        sizes: Sizes,
    ) -> Result<Self, ModelError> {
        if common.tie_word_embeddings == Some(false) && head.is_lm() {
            return Err(ModelError::Unsupported(
                "untied output embeddings are not supported".into(),
            ));
        }
        let labels = (0..common.id2label.len())
            .map(|i| {
                common
                    .id2label
                    .get(&i.to_string())
                    .cloned()
                    .ok_or_else(|| ModelError::Config(format!("id2label lacks class {i}")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        if head == Head::SequenceClassification && labels.is_empty() {
            return Err(ModelError::Config(
                "a classification checkpoint needs id2label in config.json".into(),
            ));
        }
        if !common.label2id.is_empty() && common.label2id.len() != labels.len() {
            return Err(ModelError::Config(format!(
                "label2id has {} labels but id2label has {}: the label map does not match",
                common.label2id.len(),
                labels.len()
            )));
        }
        let pad_token_id = match &common.pad_token_id {
            Some(serde_json::Value::Number(n)) => n.as_u64().unwrap_or(0) as u32,
            _ if matches!(family, Family::Roberta | Family::Bart(_)) => 1,
            _ => 0,
        };
        let eos_token_ids = match &common.eos_token_id {
            None | Some(serde_json::Value::Null) => Vec::new(),
            Some(serde_json::Value::Number(n)) => vec![token_id(n, "eos_token_id")?],
            Some(serde_json::Value::Array(ids)) => ids
                .iter()
                .map(|v| match v {
                    serde_json::Value::Number(n) => token_id(n, "eos_token_id"),
                    other => Err(ModelError::Config(format!(
                        "eos_token_id lists {other}, not a token id"
                    ))),
                })
                .collect::<Result<_, _>>()?,
            Some(other) => {
                return Err(ModelError::Config(format!(
                    "eos_token_id is {other}, not a token id or a list of them"
                )));
            }
        };
        Ok(Self {
            family,
            head,
            architecture: common.architecture(),
            vocab_size: need(common.vocab_size, "vocab_size")?,
            hidden_size: sizes.hidden_size,
            embedding_size: sizes.embedding_size,
            num_layers: sizes.num_layers,
            num_heads: sizes.num_heads,
            intermediate_size: sizes.intermediate_size,
            max_positions: sizes.max_positions,
            type_vocab_size: sizes.type_vocab_size,
            layer_norm_eps: sizes.layer_norm_eps,
            activation: sizes.activation,
            pad_token_id,
            eos_token_ids,
            labels,
            comet: None,
            pooler_activation: sizes.pooler_activation,
        })
    }

    /// The decoder of an encoder-decoder.
    pub fn decoder(&self) -> Option<&DecoderConfig> {
        match &self.family {
            Family::Bart(decoder) => Some(decoder),
            Family::T5(t5) => Some(&t5.decoder),
            _ => None,
        }
    }

    /// DeBERTa's relative-attention settings.
    pub fn deberta(&self) -> Option<&DebertaConfig> {
        match &self.family {
            Family::Deberta(settings) => Some(settings),
            _ => None,
        }
    }

    /// This encoder config under a COMET estimator (`hparams.yaml`): the head
    /// becomes the estimator, and the hparams must fit the encoder.
    pub fn with_comet(mut self, hparams: CometHparams) -> Result<Self, ModelError> {
        hparams.check_encoder(&self)?;
        self.head = Head::Comet(hparams.kind);
        self.comet = Some(hparams);
        Ok(self)
    }

    /// Refuses sizes the model code cannot run with (they would fail deep in
    /// a tensor operation), naming the `config.json` field.
    fn check(&self) -> Result<(), ModelError> {
        let positive = [
            ("vocab_size", self.vocab_size),
            ("hidden_size", self.hidden_size),
            ("embedding_size", self.embedding_size.unwrap_or(1)),
            ("num_hidden_layers", self.num_layers),
            ("num_attention_heads", self.num_heads),
            ("intermediate_size", self.intermediate_size),
            ("max_position_embeddings", self.max_positions),
        ];
        let decoder = self
            .decoder()
            .map_or([1; 3], |d| [d.num_layers, d.num_heads, d.intermediate_size]);
        let mut positive = positive.into_iter().chain([
            ("decoder_layers", decoder[0]),
            ("decoder_attention_heads", decoder[1]),
            ("decoder_ffn_dim", decoder[2]),
        ]);
        if let Some((field, _)) = positive.find(|(_, v)| *v == 0) {
            return Err(ModelError::Config(format!(
                "{field} is 0 in config.json: a model needs at least one"
            )));
        }
        if !self.hidden_size.is_multiple_of(self.num_heads) {
            return Err(ModelError::Config(format!(
                "num_attention_heads ({}) does not divide hidden_size ({}) in config.json",
                self.num_heads, self.hidden_size
            )));
        }
        if let Some(d) = self.decoder()
            && !self.hidden_size.is_multiple_of(d.num_heads)
        {
            return Err(ModelError::Config(format!(
                "decoder_attention_heads ({}) does not divide d_model ({}) in config.json",
                d.num_heads, self.hidden_size
            )));
        }
        if self.family == Family::Roberta && self.max_tokens() < 3 {
            return Err(ModelError::Config(format!(
                "max_position_embeddings ({}) leaves no room for a token after RoBERTa's \
                 padding offset (pad_token_id {})",
                self.max_positions, self.pad_token_id
            )));
        }
        // A negative epsilon takes the square root of a negative variance:
        // every output would be NaN.
        if !(self.layer_norm_eps.is_finite() && self.layer_norm_eps >= 0.0) {
            return Err(ModelError::Config(format!(
                "layer_norm_eps is {} in config.json: it must be a small number of at least 0",
                self.layer_norm_eps
            )));
        }
        if self.pad_token_id as usize >= self.vocab_size {
            return Err(ModelError::Config(format!(
                "pad_token_id ({}) is outside the vocabulary (vocab_size {})",
                self.pad_token_id, self.vocab_size
            )));
        }
        Ok(())
    }

    /// Tokens one sequence may hold: RoBERTa loses two positions to its
    /// padding offset; COMET cuts four below the positions.
    pub fn max_tokens(&self) -> usize {
        if self.comet.is_some() {
            return CometHparams::max_tokens(self);
        }
        match self.family {
            Family::Roberta => self
                .max_positions
                .saturating_sub(self.pad_token_id as usize + 1),
            _ => self.max_positions,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_minilm_and_gpt2_spellings() {
        let bert = ModelConfig::from_json(
            r#"{"model_type":"bert","architectures":["BertModel"],"vocab_size":30522,
            "hidden_size":384,"num_hidden_layers":6,"num_attention_heads":12,
            "intermediate_size":1536,"max_position_embeddings":512,"hidden_act":"gelu"}"#,
        )
        .unwrap();
        assert_eq!(
            (bert.family, bert.head, bert.type_vocab_size),
            (Family::Bert, Head::None, 2)
        );
        let gpt2 = ModelConfig::from_json(
            r#"{"model_type":"gpt2","architectures":["GPT2LMHeadModel"],"vocab_size":50257,
            "n_embd":768,"n_layer":12,"n_head":12,"n_positions":1024,
            "activation_function":"gelu_new","layer_norm_epsilon":1e-5}"#,
        )
        .unwrap();
        assert_eq!(gpt2.intermediate_size, 3072);
        assert_eq!(gpt2.activation, Activation::GeluTanh);
    }

    /// A family's fields are read under its own names only: GPT-2's
    /// `hidden_size` is not its width, DistilBERT's `dim` is.
    #[test]
    fn each_family_reads_its_own_names() {
        let e = ModelConfig::from_json(
            r#"{"model_type":"gpt2","vocab_size":10,"hidden_size":8,"n_layer":1,
            "n_head":1,"n_positions":8}"#,
        )
        .unwrap_err();
        assert!(e.to_string().contains("lacks n_embd"), "{e}");
        let distil = ModelConfig::from_json(
            r#"{"model_type":"distilbert","architectures":["DistilBertModel"],"vocab_size":10,
            "dim":8,"n_layers":2,"n_heads":2,"hidden_dim":16,"max_position_embeddings":8}"#,
        )
        .unwrap();
        assert_eq!(
            (
                distil.hidden_size,
                distil.num_layers,
                distil.intermediate_size
            ),
            (8, 2, 16)
        );
        assert_eq!(distil.type_vocab_size, 0);
        let bart = ModelConfig::from_json(
            r#"{"model_type":"bart","architectures":["BartModel"],"vocab_size":10,"d_model":8,
            "encoder_layers":1,"encoder_attention_heads":2,"encoder_ffn_dim":16,
            "decoder_layers":3,"decoder_attention_heads":4,"decoder_ffn_dim":32,
            "max_position_embeddings":8}"#,
        )
        .unwrap();
        let decoder = bart.decoder().unwrap();
        assert_eq!((decoder.num_layers, decoder.start_token_id), (3, 2));
        assert!(!decoder.logits_bias, "a BartModel's logits bias is zero");
        assert_eq!(bart.pad_token_id, 1);
    }

    #[test]
    fn unsupported_and_broken_configs_say_why() {
        let e = ModelConfig::from_json(r#"{"model_type":"llama"}"#).unwrap_err();
        assert!(e.to_string().contains("`llama` is not supported"), "{e}");
        let e = ModelConfig::from_json(
            r#"{"model_type":"bert","hidden_size":4,"num_hidden_layers":1,
            "num_attention_heads":1,"max_position_embeddings":8}"#,
        )
        .unwrap_err();
        assert!(e.to_string().contains("lacks vocab_size"), "{e}");
        let e = ModelConfig::from_json("{").unwrap_err();
        assert!(e.to_string().contains("not valid"), "{e}");
        let e = ModelConfig::from_json(
            r#"{"model_type":"bert","architectures":["BertForSequenceClassification"],
            "vocab_size":5,"hidden_size":4,"num_hidden_layers":1,"num_attention_heads":1,
            "max_position_embeddings":8}"#,
        )
        .unwrap_err();
        assert!(e.to_string().contains("id2label"), "{e}");
        let e = ModelConfig::from_json(
            r#"{"model_type":"electra","architectures":["ElectraForMaskedLM"],
            "vocab_size":5,"embedding_size":2,"hidden_size":4,"num_hidden_layers":1,
            "num_attention_heads":1,"max_position_embeddings":8}"#,
        )
        .unwrap_err();
        assert!(e.to_string().contains("ELECTRA generators"), "{e}");
    }
}
