//! The attention view (src/models/attention_view.rs) against transformers'
//! attention probabilities (scripts/attention_golden.py): MiniLM (a BERT
//! encoder), the tiny random GPT-2, the encoders of the tiny BART and
//! T5 and the tiny DeBERTa v1, v3 and v2-with-convolution (disentangled
//! attention), three texts each, the 10 x 10 block
//! matrix and the mass by offset within 1e-5; a family without the view
//! says so; the CLI prints the same.

use blindspot::models::Plm;
use futures::executor::block_on;
use serde_json::Value;

use crate::common;

const TOLERANCE: f64 = 1e-5;

fn root() -> &'static std::path::Path {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn check(plm: &Plm, cases: &Value) {
    for case in cases.as_array().unwrap() {
        let text = case["text"].as_str().unwrap();
        let view = block_on(plm.attention_view(text)).unwrap();
        assert_eq!(
            view.tokens.len(),
            case["ids"].as_array().unwrap().len(),
            "{text}"
        );
        for (ours, theirs) in view.blocks.iter().flatten().zip(
            case["blocks"]
                .as_array()
                .unwrap()
                .iter()
                .flat_map(|r| r.as_array().unwrap()),
        ) {
            match (ours, theirs.as_f64()) {
                (Some(a), Some(b)) => {
                    assert!((a - b).abs() <= TOLERANCE, "{text}: block {a} vs {b}")
                }
                (None, None) => {}
                other => panic!("{text}: {other:?}"),
            }
        }
        let offsets = case["offsets"].as_array().unwrap();
        assert_eq!(view.offsets.len(), offsets.len());
        for ((d, m), want) in view.offsets.iter().zip(offsets) {
            assert_eq!(*d, want[0].as_i64().unwrap());
            assert!(
                (m - want[1].as_f64().unwrap()).abs() <= TOLERANCE,
                "{text}: offset {d}"
            );
        }
        // Every query's attention sums to 1 over the keys.
        for row in view.blocks.iter().filter(|r| r.iter().any(Option::is_some)) {
            let sum: f64 = row.iter().flatten().sum();
            assert!((sum - 1.0).abs() < 1e-5, "{sum}");
        }
    }
}

#[test]
fn minilm_gpt2_bart_and_t5_match_transformers() {
    let g = common::golden("attention_view.json");
    let minilm = common::cpu_model("minilm", &root().join("models/all-MiniLM-L6-v2"));
    check(&minilm, &g["minilm"]);
    let gpt2 = common::cpu_model("gpt2", &root().join("tests/fixtures/plm/gpt2"));
    check(&gpt2, &g["gpt2"]);
    // The encoders of BART and T5 (T5's with its relative-position bias, unscaled).
    check(
        &common::cpu_model("bart", &root().join("tests/fixtures/bart/tiny")),
        &g["bart"],
    );
    check(
        &common::cpu_model("t5", &root().join("tests/fixtures/t5/tiny")),
        &g["t5"],
    );
    // GPT-2 is causal: no mass on later tokens.
    let view = block_on(gpt2.attention_view(g["gpt2"][0]["text"].as_str().unwrap())).unwrap();
    assert!(
        view.offsets
            .iter()
            .filter(|(d, _)| *d > 0)
            .all(|(_, m)| *m == 0.0)
    );
    assert_eq!((view.layers, view.heads), (2, 2));
}

/// DeBERTa's disentangled attention (content and relative-position terms)
/// as transformers' `output_attentions` gives it: v1's fused projection,
/// v3's log buckets and both position terms, v2's convolution after the
/// first layer. The tiny checkpoints read the golden script's word-level
/// tokenizer.
#[test]
fn deberta_matches_transformers() {
    let g = common::golden("attention_view.json");
    for name in ["deberta_v1", "deberta_v3", "deberta_v2_conv"] {
        let mut files =
            blindspot::models::ModelFiles::from_path(&root().join("tests/fixtures/plm").join(name))
                .unwrap();
        files.tokenizer_json = Some(
            std::fs::read(root().join("tests/fixtures/deberta-words/tokenizer.json")).unwrap(),
        );
        let deberta = Plm::load(
            name,
            files,
            &burn::tensor::Device::flex(),
            blindspot::models::Precision::F32,
        )
        .unwrap();
        check(&deberta, &g[name]);
    }
}

#[test]
fn families_without_the_view_and_empty_texts_say_why() {
    // COMET's estimator shows no attention of its own (its encoder is
    // XLM-R, loaded as a metric rather than a language model).
    let comet = common::cpu_model("comet", &root().join("tests/fixtures/comet/comet-da"));
    let e = block_on(comet.attention_view("a")).unwrap_err().to_string();
    assert!(e.contains("does not show its attention here"), "{e}");
    let gpt2 = common::cpu_model("gpt2", &root().join("tests/fixtures/plm/gpt2"));
    let e = block_on(gpt2.attention_view("")).unwrap_err().to_string();
    assert!(e.contains("no tokens"), "{e}");
}

#[test]
fn cli_prints_the_view() {
    let g = common::golden("attention_view.json");
    let text = g["minilm"][0]["text"].as_str().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_blindspot"))
        .args(["attention", "--model"])
        .arg(root().join("models/all-MiniLM-L6-v2"))
        .arg(text)
        .output()
        .unwrap();
    common::assert_ok(&out);
    let view: Value = serde_json::from_slice(&out.stdout).unwrap();
    let first = view["blocks"][0][0].as_f64().unwrap();
    assert!((first - g["minilm"][0]["blocks"][0][0].as_f64().unwrap()).abs() <= TOLERANCE);
    assert_eq!(view["layers"], 6);
}
