//! COMET's estimator models (unbabel-comet 2.2): an encoder whose hidden
//! states (embeddings and every layer) are mixed by a layer-wise attention,
//! pooled into one sentence embedding per text, and a feed-forward
//! regressor on features of the hypothesis, reference and source
//! embeddings.
//!
//! A hub repository (`Unbabel/wmt22-comet-da`) holds `hparams.yaml` and a
//! PyTorch Lightning checkpoint `checkpoints/model.ckpt`; the encoder's own
//! `config.json` and `tokenizer.json` come from the hub id the hparams name
//! (`pretrained_model`). [`CometHparams`] reads the hparams; [`CometModel`]
//! mirrors the checkpoint (`encoder.model.*`, `layerwise_attention.*`,
//! `estimator.ff.*`).

use burn::module::{Module, Param};
use burn::nn::{Linear, LinearConfig};
use burn::tensor::{Device, Tensor, TensorData, activation};
use serde::Deserialize;

use super::bert::BertModel;
use super::config::{Family, ModelConfig};
use super::dense::Project;
use super::network::Architecture;
use super::{Batch, ModelError};

/// What kind of estimator a checkpoint holds (`class_identifier`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CometKind {
    /// `regression_metric`: scores a hypothesis against a reference and the source.
    Regression,
    /// `referenceless_regression_metric`: COMET-QE, source and hypothesis only.
    Referenceless,
}

/// Which hidden state feeds the pooling (`layer`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LayerChoice {
    /// `mix`: the layer-wise attention over all hidden states.
    Mix,
    /// One hidden state (0 = the embeddings).
    Index(usize),
}

/// Sentence pooling (`pool`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pool {
    /// Mean over the tokens, special tokens included (COMET's default).
    Avg,
    /// Maximum over the tokens.
    Max,
    /// The first token of the chosen layer.
    Cls,
    /// `default`: the first token of the last layer, whatever `layer` says.
    Default,
}

/// Normalisation of the layer-wise attention's weights.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transformation {
    /// Softmax (also what `sparsemax_patch` means: COMET 2.2's loader and its
    /// layer-wise attention both turn it into softmax).
    Softmax,
    /// Sparsemax (entmax's).
    Sparsemax,
}

/// Feed-forward activations COMET builds by name (`getattr(nn, name.title())`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FfActivation {
    /// `Tanh`.
    Tanh,
    /// `Sigmoid`.
    Sigmoid,
}

/// The hparams that change a COMET model's computation, resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct CometHparams {
    /// Estimator kind.
    pub kind: CometKind,
    /// `encoder_model` (`XLM-RoBERTa`, `MiniLM`, `BERT`).
    pub encoder_model: String,
    /// `pretrained_model`: the hub id of the encoder's config and tokenizer.
    pub pretrained_model: String,
    /// Hidden state(s) read.
    pub layer: LayerChoice,
    /// Weight normalisation of the mix.
    pub transformation: Transformation,
    /// Each hidden state normalised (masked) before mixing.
    pub layer_norm: bool,
    /// Sentence pooling.
    pub pool: Pool,
    /// Estimator hidden sizes.
    pub hidden_sizes: Vec<usize>,
    /// Estimator hidden activation.
    pub activations: FfActivation,
    /// Activation on the score, if any.
    pub final_activation: Option<FfActivation>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum RawLayer {
    Index(usize),
    Name(String),
}

#[derive(Deserialize)]
struct RawHparams {
    class_identifier: Option<String>,
    encoder_model: Option<String>,
    pretrained_model: Option<String>,
    pool: Option<String>,
    layer: Option<RawLayer>,
    layer_transformation: Option<String>,
    layer_norm: Option<bool>,
    hidden_sizes: Option<Vec<usize>>,
    activations: Option<String>,
    final_activation: Option<String>,
}

fn activation_named(name: &str) -> Result<FfActivation, ModelError> {
    match name.to_lowercase().as_str() {
        "tanh" => Ok(FfActivation::Tanh),
        "sigmoid" => Ok(FfActivation::Sigmoid),
        other => Err(ModelError::Unsupported(format!(
            "COMET estimator activation `{other}` is not supported (Tanh or Sigmoid)"
        ))),
    }
}

impl CometHparams {
    /// Reads `hparams.yaml`; the defaults are `RegressionMetric`'s.
    pub fn from_yaml(text: &str) -> Result<Self, ModelError> {
        let raw: RawHparams = serde_saphyr::from_str(text)
            .map_err(|e| ModelError::Config(format!("hparams.yaml is not valid: {e}")))?;
        let class = raw.class_identifier.ok_or_else(|| {
            ModelError::Config("hparams.yaml has no class_identifier (is it COMET's?)".into())
        })?;
        let kind = match class.as_str() {
            "regression_metric" => CometKind::Regression,
            "referenceless_regression_metric" => CometKind::Referenceless,
            other => {
                return Err(ModelError::Unsupported(format!(
                    "COMET class `{other}` is not supported (regression_metric, as in \
                     wmt22-comet-da and cometinho, or referenceless_regression_metric, as in \
                     wmt20-comet-qe-da)"
                )));
            }
        };
        let encoder_model = raw
            .encoder_model
            .unwrap_or_else(|| "XLM-RoBERTa".to_owned());
        if !["XLM-RoBERTa", "MiniLM", "BERT"].contains(&encoder_model.as_str()) {
            return Err(ModelError::Unsupported(format!(
                "COMET encoder `{encoder_model}` is not supported (XLM-RoBERTa, MiniLM or BERT)"
            )));
        }
        let layer = match raw.layer {
            None => LayerChoice::Mix,
            Some(RawLayer::Name(n)) if n == "mix" => LayerChoice::Mix,
            // COMET compares a non-`mix` layer with numbers: a string fails there.
            Some(RawLayer::Name(n)) => {
                return Err(ModelError::Config(format!(
                    "hparams: layer `{n}` is neither `mix` nor a number"
                )));
            }
            Some(RawLayer::Index(i)) => LayerChoice::Index(i),
        };
        let transformation = match raw.layer_transformation.as_deref().unwrap_or("softmax") {
            "softmax" | "sparsemax_patch" => Transformation::Softmax,
            "sparsemax" => Transformation::Sparsemax,
            other => {
                return Err(ModelError::Unsupported(format!(
                    "layer_transformation `{other}` is not supported (softmax or sparsemax)"
                )));
            }
        };
        let pool = match raw.pool.as_deref().unwrap_or("avg") {
            "avg" => Pool::Avg,
            "max" => Pool::Max,
            "cls" => Pool::Cls,
            "default" => Pool::Default,
            other => {
                return Err(ModelError::Unsupported(format!(
                    "COMET pooling `{other}` is not supported (avg, max, cls or default)"
                )));
            }
        };
        // The constructors' defaults: RegressionMetric [3072, 1024],
        // ReferencelessRegression [2048, 1024].
        let hidden_sizes = raw.hidden_sizes.unwrap_or_else(|| match kind {
            CometKind::Regression => vec![3072, 1024],
            CometKind::Referenceless => vec![2048, 1024],
        });
        if pool == Pool::Default && encoder_model == "BERT" {
            // COMET's BERT encoder has no pooler, so `default` pooling fails there.
            return Err(ModelError::Unsupported(
                "pool `default` with the BERT encoder (COMET itself fails on it)".into(),
            ));
        }
        if hidden_sizes.is_empty() || hidden_sizes.contains(&0) {
            return Err(ModelError::Config(
                "hparams.yaml: hidden_sizes needs at least one positive size".into(),
            ));
        }
        Ok(Self {
            kind,
            encoder_model,
            pretrained_model: raw
                .pretrained_model
                .unwrap_or_else(|| "xlm-roberta-large".to_owned()),
            layer,
            transformation,
            layer_norm: raw.layer_norm.unwrap_or(true),
            pool,
            hidden_sizes,
            activations: activation_named(raw.activations.as_deref().unwrap_or("Tanh"))?,
            final_activation: raw
                .final_activation
                .as_deref()
                .map(activation_named)
                .transpose()?,
        })
    }

    /// Refuses an encoder `config.json` that is not the architecture the
    /// hparams name, or a layer it does not have.
    pub fn check_encoder(&self, config: &ModelConfig) -> Result<(), ModelError> {
        let family = match self.encoder_model.as_str() {
            "XLM-RoBERTa" => Family::Roberta,
            _ => Family::Bert,
        };
        if config.family != family {
            return Err(ModelError::Config(format!(
                "hparams.yaml names a {} encoder but config.json is a {:?} model: put the \
                 config.json of {} and the tokenizer.json of {} beside the checkpoint",
                self.encoder_model,
                config.family,
                self.pretrained_model,
                self.tokenizer_source()
            )));
        }
        if let LayerChoice::Index(i) = self.layer
            && i > config.num_layers
        {
            return Err(ModelError::Config(format!(
                "hparams.yaml reads layer {i} but the encoder has 0..={}",
                config.num_layers
            )));
        }
        Ok(())
    }

    /// Where the encoder's tokenizer comes from: COMET's MiniLM encoder always
    /// reads `xlm-roberta-base`'s.
    pub fn tokenizer_source(&self) -> &str {
        match self.encoder_model.as_str() {
            "MiniLM" => "xlm-roberta-base",
            _ => &self.pretrained_model,
        }
    }

    /// Tokens one text may hold: COMET's encoders cut at
    /// `max_position_embeddings - 4`, special tokens included.
    pub fn max_tokens(config: &ModelConfig) -> usize {
        config.max_positions.saturating_sub(4)
    }

    /// Sentence embeddings per estimator input (6 with a reference, 4 without).
    pub fn features(&self) -> usize {
        match self.kind {
            CometKind::Regression => 6,
            CometKind::Referenceless => 4,
        }
    }

    /// The checkpoint's key for each of our parameters' names, as regex
    /// renames: the encoder's (after [`super::bert::checkpoint_key_map`]
    /// strips `encoder.model.`), the layer-wise attention's, and the
    /// estimator's linear layers, which `nn.Sequential` numbers 0, 3, 6...
    /// (each is followed by an activation and a dropout).
    pub fn key_map(&self, family: Family) -> Vec<(String, String)> {
        let mut map = vec![(r"^encoder\.model\.".to_owned(), String::new())];
        map.extend(
            super::bert::checkpoint_key_map(family)
                .into_iter()
                .map(|(a, b)| (a.to_owned(), b.to_owned())),
        );
        map.push((r"^(embeddings|layers)\.".into(), "encoder.$1.".into()));
        for i in 0..=self.hidden_sizes.len() {
            map.push((
                format!(r"^estimator\.ff\.{}\.", 3 * i),
                format!("estimator.ff.{i}."),
            ));
        }
        map
    }
}

/// The hparams COMET computes with: `load_from_checkpoint` reads every
/// hparam from the checkpoint's `hyper_parameters` and only the class from
/// `hparams.yaml` (`hparams_file` is passed only with `reload_hparams`).
/// Returns them as JSON text; `hparams.yaml` alone when the checkpoint
/// stores no plain dictionary of hparams.
#[cfg(not(target_arch = "wasm32"))]
pub fn checkpoint_hparams(yaml: &str, ckpt: &std::path::Path) -> Result<String, ModelError> {
    use burn::store::pytorch_reader::PytorchReader;
    let from_yaml: serde_json::Value = serde_saphyr::from_str(yaml)
        .map_err(|e| ModelError::Config(format!("hparams.yaml is not valid: {e}")))?;
    use burn::store::pytorch_reader::PickleValue;
    fn json(v: PickleValue) -> serde_json::Value {
        use serde_json::Value;
        match v {
            PickleValue::None => Value::Null,
            PickleValue::Bool(b) => Value::Bool(b),
            PickleValue::Int(i) => Value::from(i),
            PickleValue::Float(f) => Value::from(f),
            PickleValue::String(s) => Value::String(s),
            PickleValue::List(items) => Value::Array(items.into_iter().map(json).collect()),
            PickleValue::Dict(map) => {
                Value::Object(map.into_iter().map(|(k, v)| (k, json(v))).collect())
            }
            // Bytes and objects the reader does not interpret: no hparam we read.
            _ => Value::Null,
        }
    }
    let stored = PytorchReader::read_pickle_data(ckpt, Some("hyper_parameters")).map(json);
    let merged = match stored {
        Ok(serde_json::Value::Object(mut stored)) => {
            if let Some(class) = from_yaml.get("class_identifier") {
                stored.insert("class_identifier".into(), class.clone());
            }
            serde_json::Value::Object(stored)
        }
        _ => from_yaml,
    };
    Ok(merged.to_string())
}

/// The layer-wise attention's parameters: one scalar per hidden state and a
/// scale.
#[derive(Module, Debug)]
pub struct LayerwiseAttention {
    /// Unnormalised weight of each hidden state, `[1]` each.
    pub scalar_parameters: Vec<Param<Tensor<1>>>,
    /// Scale of the mixture, `[1]`.
    pub gamma: Param<Tensor<1>>,
}

/// The regressor on top of the sentence embeddings.
#[derive(Module, Debug)]
pub struct Estimator {
    /// Linear layers; an activation follows each but the last.
    pub ff: Vec<Linear>,
}

/// A COMET model: encoder, layer-wise attention and estimator.
#[derive(Module, Debug)]
pub struct CometModel {
    /// The encoder (XLM-R, or BERT-architecture MiniLM).
    pub encoder: BertModel,
    /// The mixture over hidden states (`layer: mix`).
    pub layerwise_attention: Option<LayerwiseAttention>,
    /// The regressor.
    pub estimator: Estimator,
    /// The hparams, resolved.
    #[module(skip)]
    pub hparams: CometHparams,
    /// The mixture's normalised weights times gamma, read once after loading.
    #[module(skip)]
    pub mix_weights: Vec<f32>,
}

fn linear(d_in: usize, d_out: usize, device: &Device) -> Linear {
    LinearConfig::new(d_in, d_out).init(device)
}

impl CometModel {
    /// The module tree for `hparams` over an encoder of `config`.
    pub fn new(config: &ModelConfig, hparams: &CometHparams, device: &Device) -> Self {
        let h = config.hidden_size;
        let layerwise_attention = (hparams.layer == LayerChoice::Mix).then(|| LayerwiseAttention {
            scalar_parameters: (0..=config.num_layers)
                .map(|_| Param::from_tensor(Tensor::zeros([1], device)))
                .collect(),
            gamma: Param::from_tensor(Tensor::ones([1], device)),
        });
        let mut sizes = vec![h * hparams.features()];
        sizes.extend(&hparams.hidden_sizes);
        sizes.push(1);
        let ff = sizes
            .windows(2)
            .map(|w| linear(w[0], w[1], device))
            .collect();
        Self {
            encoder: BertModel::new(config, device),
            layerwise_attention,
            estimator: Estimator { ff },
            hparams: hparams.clone(),
            mix_weights: Vec::new(),
        }
    }

    /// Reads the mixture's weights (softmax or sparsemax of the scalars,
    /// times gamma) once, on the CPU the model was loaded on.
    pub fn resolve_mix(&mut self) -> Result<(), ModelError> {
        let Some(mix) = &self.layerwise_attention else {
            return Ok(());
        };
        let scalar = |p: &Param<Tensor<1>>| -> Result<f32, ModelError> {
            p.val()
                .into_data()
                .convert::<f32>()
                .try_to_vec::<f32>()
                .ok()
                .and_then(|v| v.first().copied())
                .ok_or_else(|| ModelError::Weights("a layer-wise attention scalar is empty".into()))
        };
        let weights = mix
            .scalar_parameters
            .iter()
            .map(scalar)
            .collect::<Result<Vec<_>, _>>()?;
        let gamma = scalar(&mix.gamma)?;
        let normed = match self.hparams.transformation {
            Transformation::Softmax => softmax(&weights),
            Transformation::Sparsemax => sparsemax(&weights),
        };
        self.mix_weights = normed.into_iter().map(|w| w * gamma).collect();
        Ok(())
    }

    /// One sentence embedding per sequence of `batch` (`pad_id`: the
    /// tokenizer's padding id, whose tokens COMET leaves out of the pooled
    /// sum but not out of the count).
    pub fn sentence_embeddings(&self, batch: &Batch, ids: &[Vec<u32>], pad_id: u32) -> Tensor<2> {
        let hidden = self.encoder.forward(batch).hidden_states;
        let [b, l, h] = hidden[0].dims();
        let device = hidden[0].device();
        let real: Vec<f32> = batch
            .lengths
            .iter()
            .flat_map(|&n| (0..l).map(move |i| f32::from(u8::from(i < n))))
            .collect();
        let attention = Tensor::<2>::from_data(TensorData::new(real, [b, l]), &device);
        // `default` pooling reads the last layer whatever `layer` says: no mixture then.
        let embeddings = match (self.hparams.pool, self.hparams.layer) {
            (Pool::Default, _) => hidden[hidden.len() - 1].clone(),
            (_, LayerChoice::Mix) => self.mix(&hidden, attention.clone()),
            (_, LayerChoice::Index(i)) => hidden[i].clone(),
        };
        // COMET's mask_fill: tokens equal to the padding id (padding, or a
        // literal `<pad>` in the text) are filled before pooling.
        let kept: Vec<f32> = (0..b)
            .flat_map(|s| {
                (0..l)
                    .map(move |i| f32::from(u8::from(ids[s].get(i).is_some_and(|&t| t != pad_id))))
            })
            .collect();
        let kept =
            Tensor::<2>::from_data(TensorData::new(kept, [b, l]), &device).reshape([b, l, 1]);
        match self.hparams.pool {
            Pool::Avg => {
                let lengths: Vec<f32> = batch.lengths.iter().map(|&n| n as f32).collect();
                let lengths = Tensor::<2>::from_data(TensorData::new(lengths, [b, 1]), &device);
                (embeddings * kept).sum_dim(1).reshape([b, h]) / lengths
            }
            Pool::Max => {
                let filled = kept.equal_elem(0.0).expand([b, l, h]);
                embeddings
                    .mask_fill(filled, f32::NEG_INFINITY)
                    .max_dim(1)
                    .reshape([b, h])
            }
            Pool::Cls | Pool::Default => embeddings.slice([0..b, 0..1, 0..h]).reshape([b, h]),
        }
    }

    /// gamma * sum_k w_k * h_k, each h_k first normalised over its real
    /// tokens when the hparams say `layer_norm`.
    fn mix(&self, hidden: &[Tensor<3>], attention: Tensor<2>) -> Tensor<3> {
        let [b, l, h] = hidden[0].dims();
        let mask = attention.clone().reshape([b, l, 1]);
        let count = attention.sum_dim(1).mul_scalar(h as f32).reshape([b, 1, 1]);
        let mut mixed: Option<Tensor<3>> = None;
        for (w, t) in self.mix_weights.iter().zip(hidden) {
            let t = if self.hparams.layer_norm {
                let masked = t.clone() * mask.clone();
                let mean = masked.clone().sum_dim(2).sum_dim(1) / count.clone();
                let centred = (masked - mean.clone()) * mask.clone();
                let variance = centred.powi_scalar(2).sum_dim(2).sum_dim(1) / count.clone();
                (t.clone() - mean) / variance.add_scalar(1e-12).sqrt()
            } else {
                t.clone()
            };
            let piece = t.mul_scalar(*w);
            mixed = Some(match mixed {
                None => piece,
                Some(m) => m + piece,
            });
        }
        mixed.expect("a mixture has at least the embeddings")
    }

    /// The estimator's score for each row of `features` (`[n, k * hidden]`).
    pub fn estimate(&self, features: Tensor<2>) -> Tensor<2> {
        let last = self.estimator.ff.len() - 1;
        let mut x = features;
        for (i, layer) in self.estimator.ff.iter().enumerate() {
            x = layer.project(x);
            let act = if i < last {
                Some(self.hparams.activations)
            } else {
                self.hparams.final_activation
            };
            x = match act {
                Some(FfActivation::Tanh) => activation::tanh(x),
                Some(FfActivation::Sigmoid) => activation::sigmoid(x),
                None => x,
            };
        }
        x
    }
}

fn softmax(z: &[f32]) -> Vec<f32> {
    let max = z.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let e: Vec<f32> = z.iter().map(|v| (v - max).exp()).collect();
    let sum: f32 = e.iter().sum();
    e.into_iter().map(|v| v / sum).collect()
}

/// Sparsemax (Martins & Astudillo 2016): the Euclidean projection of `z`
/// onto the probability simplex, `max(z - tau, 0)`.
pub fn sparsemax(z: &[f32]) -> Vec<f32> {
    let mut sorted = z.to_vec();
    sorted.sort_by(|a, b| b.total_cmp(a));
    let mut cumulative = 0.0f32;
    let mut tau = 0.0f32;
    for (k, &v) in sorted.iter().enumerate() {
        cumulative += v;
        let candidate = (cumulative - 1.0) / (k + 1) as f32;
        if v > candidate {
            tau = candidate;
        }
    }
    z.iter().map(|v| (v - tau).max(0.0)).collect()
}

impl Architecture for CometModel {
    fn build(config: &ModelConfig, device: &Device) -> Result<Self, ModelError> {
        let hparams = config.comet.as_ref().ok_or_else(|| {
            ModelError::Config("a COMET estimator needs its hparams (hparams.yaml)".into())
        })?;
        Ok(Self::new(config, hparams, device))
    }

    fn key_map(config: &ModelConfig, _names: Option<&[String]>) -> Vec<(String, String)> {
        config
            .comet
            .as_ref()
            .map(|h| h.key_map(config.family))
            .unwrap_or_default()
    }

    /// The encoder's states, all of them.
    fn hidden_states(&self, batch: &Batch, _layers: usize) -> Vec<Tensor<3>> {
        self.encoder.forward(batch).hidden_states
    }

    fn input_embeddings(&self) -> Tensor<2> {
        self.encoder.embeddings.word_embeddings.weight.val()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sparsemax_projects_onto_the_simplex() {
        let p = sparsemax(&[1.0, 0.5, -1.0]);
        assert!((p.iter().sum::<f32>() - 1.0).abs() < 1e-6);
        assert!((p[0] - 0.75).abs() < 1e-6 && (p[1] - 0.25).abs() < 1e-6 && p[2] == 0.0);
        let uniform = sparsemax(&[0.0; 4]);
        assert!(uniform.iter().all(|&v| (v - 0.25).abs() < 1e-7));
    }

    #[test]
    fn hparams_read_the_hub_layout_and_refuse_what_we_lack() {
        let h = CometHparams::from_yaml(
            "activations: Tanh\nclass_identifier: regression_metric\nencoder_model: XLM-RoBERTa\n\
             final_activation: null\nhidden_sizes:\n- 3072\n- 1024\nlayer: mix\nlayer_norm: false\n\
             layer_transformation: sparsemax\npool: avg\npretrained_model: xlm-roberta-large\n\
             train_data:\n- data/1720-da.csv\n",
        )
        .unwrap();
        assert_eq!(h.kind, CometKind::Regression);
        assert_eq!(h.transformation, Transformation::Sparsemax);
        assert_eq!(
            (h.layer, h.layer_norm, h.final_activation),
            (LayerChoice::Mix, false, None)
        );
        assert_eq!(h.hidden_sizes, [3072, 1024]);
        let e = CometHparams::from_yaml("class_identifier: unified_metric\n").unwrap_err();
        assert!(
            e.to_string().contains("`unified_metric` is not supported"),
            "{e}"
        );
        let e = CometHparams::from_yaml(
            "class_identifier: regression_metric\nencoder_model: RemBERT\n",
        )
        .unwrap_err();
        assert!(e.to_string().contains("`RemBERT` is not supported"), "{e}");
        let e = CometHparams::from_yaml("pool: avg\n").unwrap_err();
        assert!(e.to_string().contains("class_identifier"), "{e}");
    }
}
