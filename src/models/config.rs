//! A checkpoint's `config.json`, read into the few numbers our architectures
//! need, whatever spelling the Hugging Face model type uses for them.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::ModelError;
use super::comet::{CometHparams, CometKind};
use super::deberta::{ConvActivation, DebertaConfig};

/// Architecture family a checkpoint belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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
    /// BART encoder-decoders (`model_type: bart`).
    Bart,
    /// DeBERTa (`model_type: deberta`, v1) and DeBERTa-v2/v3 (`deberta-v2`):
    /// disentangled attention.
    Deberta,
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

/// The fields of `config.json` we read, under every spelling in use.
#[derive(Deserialize)]
struct RawConfig {
    model_type: Option<String>,
    #[serde(default)]
    architectures: Vec<String>,
    vocab_size: Option<usize>,
    #[serde(alias = "dim", alias = "n_embd")]
    hidden_size: Option<usize>,
    embedding_size: Option<usize>,
    #[serde(alias = "n_layers", alias = "n_layer")]
    num_hidden_layers: Option<usize>,
    #[serde(alias = "n_heads", alias = "n_head")]
    num_attention_heads: Option<usize>,
    #[serde(alias = "hidden_dim", alias = "n_inner")]
    intermediate_size: Option<usize>,
    #[serde(alias = "n_positions")]
    max_position_embeddings: Option<usize>,
    type_vocab_size: Option<usize>,
    #[serde(alias = "layer_norm_epsilon")]
    layer_norm_eps: Option<f64>,
    #[serde(alias = "activation", alias = "activation_function")]
    hidden_act: Option<String>,
    pad_token_id: Option<serde_json::Value>,
    position_embedding_type: Option<String>,
    #[serde(default)]
    id2label: BTreeMap<String, String>,
    #[serde(default)]
    label2id: BTreeMap<String, serde_json::Value>,
    tie_word_embeddings: Option<bool>,
    sinusoidal_pos_embds: Option<bool>,
    // BART's spellings (its config.json also writes `num_hidden_layers`).
    d_model: Option<usize>,
    encoder_layers: Option<usize>,
    encoder_attention_heads: Option<usize>,
    encoder_ffn_dim: Option<usize>,
    decoder_layers: Option<usize>,
    decoder_attention_heads: Option<usize>,
    decoder_ffn_dim: Option<usize>,
    scale_embedding: Option<bool>,
    decoder_start_token_id: Option<u32>,
    add_final_layer_norm: Option<bool>,
    normalize_before: Option<bool>,
    // DeBERTa-v2's.
    relative_attention: Option<bool>,
    position_buckets: Option<i64>,
    max_relative_positions: Option<i64>,
    pos_att_type: Option<serde_json::Value>,
    share_att_key: Option<bool>,
    norm_rel_ebd: Option<String>,
    conv_kernel_size: Option<usize>,
    conv_groups: Option<usize>,
    conv_act: Option<String>,
    position_biased_input: Option<bool>,
    pooler_hidden_size: Option<usize>,
    pooler_hidden_act: Option<String>,
    talking_head: Option<bool>,
}

/// The decoder of an encoder-decoder (BART).
#[derive(Clone, Debug, PartialEq)]
pub struct DecoderConfig {
    /// Decoder layers.
    pub num_layers: usize,
    /// Decoder attention heads (self- and cross-attention).
    pub num_heads: usize,
    /// Decoder feed-forward inner size.
    pub intermediate_size: usize,
    /// The first decoder input (BART: `</s>`, id 2).
    pub start_token_id: u32,
    /// Token embeddings are multiplied by sqrt(hidden) (`scale_embedding`).
    pub scale_embedding: bool,
    /// The checkpoint has `final_logits_bias` (BartForConditionalGeneration;
    /// a BartModel's is zero).
    pub logits_bias: bool,
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
}

/// Everything our architectures need to know about a checkpoint.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelConfig {
    /// Architecture family.
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
    /// Class labels in output order, from `id2label` (classification heads).
    pub labels: Vec<String>,
    /// COMET's hparams, when the encoder carries a COMET estimator.
    pub comet: Option<CometHparams>,
    /// The decoder, for encoder-decoders (the fields above describe the encoder).
    pub decoder: Option<DecoderConfig>,
    /// DeBERTa's relative attention settings.
    pub deberta: Option<DebertaConfig>,
    /// Activation of a classifier's pooler (DeBERTa's `pooler_hidden_act`).
    pub pooler_activation: Activation,
}

/// DeBERTa-v2's attention settings, with transformers' defaults.
fn deberta_config(raw: &RawConfig, v1: bool) -> Result<DebertaConfig, ModelError> {
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

impl ModelConfig {
    /// Reads `config.json`. Unsupported architectures and missing sizes are
    /// errors that name what is wrong.
    pub fn from_json(text: &str) -> Result<Self, ModelError> {
        let raw: RawConfig = serde_json::from_str(text)
            .map_err(|e| ModelError::Config(format!("config.json is not valid: {e}")))?;
        let model_type = raw.model_type.clone().unwrap_or_default();
        let family = match model_type.as_str() {
            "bert" | "bleurt" => Family::Bert,
            "roberta" | "xlm-roberta" | "camembert" => Family::Roberta,
            "distilbert" => Family::DistilBert,
            "electra" => Family::Electra,
            "gpt2" => Family::Gpt2,
            "bart" => Family::Bart,
            "deberta" | "deberta-v2" => Family::Deberta,
            "" => {
                return Err(ModelError::Config(
                    "config.json has no model_type (a checkpoint saved before transformers, \
                     such as pytorch_pretrained_bert's: add \"model_type\": \"bert\", its \
                     class under \"architectures\", e.g. [\"BertForSequenceClassification\"], \
                     and a classifier's \"id2label\")"
                        .into(),
                ));
            }
            other => {
                return Err(ModelError::Unsupported(format!(
                    "model_type `{other}` is not supported (supported: bert, bleurt, roberta, \
                     xlm-roberta, camembert, distilbert, electra, gpt2, bart, deberta, deberta-v2)"
                )));
            }
        };
        let architecture = raw
            .architectures
            .first()
            .cloned()
            .unwrap_or_else(|| model_type.clone());
        let head = if family == Family::Gpt2 {
            Head::CausalLm
        } else if family == Family::Bart {
            // A BartModel checkpoint (facebook/bart-base) gets the tied head with a
            // zero bias, as transformers loads it into BartForConditionalGeneration.
            if !matches!(
                architecture.as_str(),
                "BartForConditionalGeneration" | "BartModel"
            ) {
                return Err(ModelError::Unsupported(format!(
                    "BART architecture `{architecture}` is not supported \
                     (BartForConditionalGeneration or BartModel: BARTScore reads the \
                     language-model head)"
                )));
            }
            Head::Seq2SeqLm
        } else if architecture.ends_with("ForMaskedLM") {
            Head::MaskedLm
        } else if architecture.ends_with("ForSequenceClassification") {
            Head::SequenceClassification
        } else if architecture.ends_with("Model")
            || raw.architectures.is_empty()
            // An ELECTRA discriminator's replaced-token head is not used: its encoder is.
            || (family == Family::Electra && architecture == "ElectraForPreTraining")
        {
            Head::None
        } else {
            return Err(ModelError::Unsupported(format!(
                "architecture `{architecture}` is not supported (a base model, \
                 ...ForMaskedLM or ...ForSequenceClassification)"
            )));
        };
        if raw
            .position_embedding_type
            .as_deref()
            .is_some_and(|p| p != "absolute")
        {
            return Err(ModelError::Unsupported(format!(
                "position_embedding_type `{}` is not supported (absolute only)",
                raw.position_embedding_type.unwrap_or_default()
            )));
        }
        if raw.sinusoidal_pos_embds == Some(true) {
            return Err(ModelError::Unsupported(
                "sinusoidal DistilBERT positions are not supported".into(),
            ));
        }
        if family == Family::Deberta && head == Head::MaskedLm {
            return Err(ModelError::Unsupported(
                "DeBERTa's masked-LM head is not supported; its encoder and classifiers are".into(),
            ));
        }
        let has_lm_head = matches!(head, Head::MaskedLm | Head::CausalLm | Head::Seq2SeqLm);
        if raw.tie_word_embeddings == Some(false) && has_lm_head {
            return Err(ModelError::Unsupported(
                "untied output embeddings are not supported".into(),
            ));
        }
        let need = |v: Option<usize>, name: &str| {
            v.ok_or_else(|| ModelError::Config(format!("config.json lacks {name}")))
        };
        let bart = family == Family::Bart;
        if bart && (raw.add_final_layer_norm == Some(true) || raw.normalize_before == Some(true)) {
            return Err(ModelError::Unsupported(
                "pre-norm BART variants (mBART's normalize_before, add_final_layer_norm) are \
                 not supported"
                    .into(),
            ));
        }
        let hidden_size = if bart {
            need(raw.d_model, "d_model")?
        } else {
            need(raw.hidden_size, "hidden_size")?
        };
        // BLEURT projects whenever it names an embedding size; ELECTRA only
        // when the embeddings are narrower than the layers.
        let embedding_size = match family {
            Family::Electra | Family::Deberta => raw.embedding_size.filter(|&e| e != hidden_size),
            _ => raw.embedding_size,
        };
        if family == Family::Electra && head == Head::MaskedLm {
            return Err(ModelError::Unsupported(
                "ELECTRA generators (ElectraForMaskedLM) are not supported; discriminators are"
                    .into(),
            ));
        }
        if embedding_size.is_some()
            && (!matches!(family, Family::Bert | Family::Electra | Family::Deberta) || has_lm_head)
        {
            return Err(ModelError::Unsupported(
                "an embedding_size is supported on BERT, BLEURT and ELECTRA encoders without a \
                 language-model head only"
                    .into(),
            ));
        }
        let activation_of = |name: &str| match name {
            "gelu" => Ok(Activation::Gelu),
            "gelu_new" | "gelu_pytorch_tanh" | "gelu_fast" => Ok(Activation::GeluTanh),
            "relu" => Ok(Activation::Relu),
            other => Err(ModelError::Unsupported(format!(
                "activation `{other}` is not supported"
            ))),
        };
        let activation = activation_of(raw.hidden_act.as_deref().unwrap_or("gelu"))?;
        let pooler_activation = activation_of(raw.pooler_hidden_act.as_deref().unwrap_or("gelu"))?;
        let deberta = if family == Family::Deberta {
            Some(deberta_config(&raw, model_type == "deberta")?)
        } else {
            None
        };
        if family == Family::Deberta && raw.pooler_hidden_size.is_some_and(|p| p != hidden_size) {
            return Err(ModelError::Unsupported(
                "a DeBERTa pooler narrower or wider than hidden_size is not supported".into(),
            ));
        }
        let labels = (0..raw.id2label.len())
            .map(|i| {
                raw.id2label
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
        if !raw.label2id.is_empty() && raw.label2id.len() != labels.len() {
            return Err(ModelError::Config(format!(
                "label2id has {} labels but id2label has {}: the label map does not match",
                raw.label2id.len(),
                labels.len()
            )));
        }
        let pad_token_id = match raw.pad_token_id {
            Some(serde_json::Value::Number(n)) => n.as_u64().unwrap_or(0) as u32,
            _ if matches!(family, Family::Roberta | Family::Bart) => 1,
            _ => 0,
        };
        let logits_bias = architecture == "BartForConditionalGeneration";
        let config = Self {
            family,
            head,
            architecture,
            vocab_size: need(raw.vocab_size, "vocab_size")?,
            hidden_size,
            embedding_size,
            num_layers: if bart {
                need(raw.encoder_layers, "encoder_layers")?
            } else {
                need(raw.num_hidden_layers, "num_hidden_layers")?
            },
            num_heads: if bart {
                need(raw.encoder_attention_heads, "encoder_attention_heads")?
            } else {
                need(raw.num_attention_heads, "num_attention_heads")?
            },
            intermediate_size: if bart {
                need(raw.encoder_ffn_dim, "encoder_ffn_dim")?
            } else {
                raw.intermediate_size.unwrap_or(4 * hidden_size)
            },
            max_positions: need(raw.max_position_embeddings, "max_position_embeddings")?,
            type_vocab_size: match family {
                Family::DistilBert | Family::Gpt2 | Family::Bart => 0,
                Family::Deberta => raw.type_vocab_size.unwrap_or(0),
                _ => raw.type_vocab_size.unwrap_or(2),
            },
            layer_norm_eps: raw.layer_norm_eps.unwrap_or(match family {
                Family::Gpt2 | Family::Bart => 1e-5,
                Family::Deberta => 1e-7,
                _ => 1e-12,
            }),
            activation,
            pad_token_id,
            labels,
            comet: None,
            decoder: if bart {
                Some(DecoderConfig {
                    num_layers: need(raw.decoder_layers, "decoder_layers")?,
                    num_heads: need(raw.decoder_attention_heads, "decoder_attention_heads")?,
                    intermediate_size: need(raw.decoder_ffn_dim, "decoder_ffn_dim")?,
                    start_token_id: raw.decoder_start_token_id.unwrap_or(2),
                    scale_embedding: raw.scale_embedding.unwrap_or(false),
                    logits_bias,
                })
            } else {
                None
            },
            deberta,
            pooler_activation,
        };
        config.check()?;
        Ok(config)
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
            .decoder
            .as_ref()
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
        if let Some(d) = &self.decoder
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

    #[test]
    fn unsupported_and_broken_configs_say_why() {
        let e = ModelConfig::from_json(r#"{"model_type":"t5"}"#).unwrap_err();
        assert!(e.to_string().contains("`t5` is not supported"), "{e}");
        let e = ModelConfig::from_json(r#"{"model_type":"bert","hidden_size":4}"#).unwrap_err();
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
