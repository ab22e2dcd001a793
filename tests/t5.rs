//! T5 against transformers on tiny random checkpoints of both generations
//! (scripts/t5_parity.py): v1.1 (gated GELU, untied head, UniEval's kind)
//! and v1.0 (ReLU, tied head scaled by d_model^-0.5). Relative-position
//! buckets, encoder hidden states, decoder logits, and greedy and
//! beam-search generations.

use std::ops::ControlFlow;
use std::path::PathBuf;

use blindspot::models::generate::{Decoding, GenerateOptions};
use blindspot::models::t5::relative_position_bucket;
use blindspot::models::{Family, ModelConfig, Plm};
use futures::executor::block_on;
use serde_json::Value;

use crate::common;

/// The bar.
const TOLERANCE: f64 = 1e-4;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/t5")
        .join(name)
}

pub fn load(name: &str) -> Plm {
    common::cpu_model(name, &fixture(name))
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

#[test]
fn buckets_are_transformers_buckets() {
    let g = common::golden("t5_parity.json");
    for (key, bidirectional) in [("True", true), ("False", false)] {
        let want: Vec<usize> = g["buckets"][key]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b.as_u64().unwrap() as usize)
            .collect();
        let ours: Vec<usize> = (-300..=300)
            .map(|r| relative_position_bucket(r, bidirectional, 32, 128))
            .collect();
        assert_eq!(ours, want, "bidirectional {bidirectional}");
    }
}

#[test]
fn config_reads_both_generations_and_refuses_what_it_cannot_run() {
    let text = std::fs::read_to_string(fixture("tiny").join("config.json")).unwrap();
    let c = ModelConfig::from_json(&text).unwrap();
    let Family::T5(t5) = c.family else {
        panic!("{:?}", c.family)
    };
    assert!(t5.gated && !t5.tied);
    assert_eq!((c.num_layers, t5.decoder.num_layers, t5.d_kv), (3, 2, 8));
    let text = std::fs::read_to_string(fixture("tiny-v1").join("config.json")).unwrap();
    let Family::T5(t5) = ModelConfig::from_json(&text).unwrap().family else {
        panic!()
    };
    assert!(!t5.gated && t5.tied);
    let mut raw: Value = serde_json::from_str(&text).unwrap();
    raw["architectures"] = serde_json::json!(["T5EncoderModel"]);
    let e = ModelConfig::from_json(&raw.to_string()).unwrap_err();
    assert!(e.to_string().contains("T5ForConditionalGeneration"), "{e}");
    raw["architectures"] = serde_json::json!(["T5ForConditionalGeneration"]);
    raw["feed_forward_proj"] = "gated-swish-x".into();
    let e = ModelConfig::from_json(&raw.to_string()).unwrap_err();
    assert!(e.to_string().contains("gated-ACT"), "{e}");
    raw["feed_forward_proj"] = "gated-mish".into();
    let e = ModelConfig::from_json(&raw.to_string()).unwrap_err();
    assert!(e.to_string().contains("`mish` is not supported"), "{e}");
    raw["feed_forward_proj"] = "relu".into();
    raw["relative_attention_num_buckets"] = 1.into();
    let e = ModelConfig::from_json(&raw.to_string()).unwrap_err();
    assert!(e.to_string().contains("at least 4"), "{e}");
}

#[test]
fn encoder_and_decoder_match_transformers() {
    let g = common::golden("t5_parity.json");
    for name in ["tiny", "tiny-v1"] {
        let h = &g["models"][name]["hidden"];
        let plm = load(name);
        let batch = ids(&h["ids"]);
        assert_eq!(
            plm.tokenizer
                .encode_for_model(
                    common::rows("wmt21_de_en.jsonl")[3]["ref_a"]
                        .as_str()
                        .unwrap()
                )
                .unwrap()
                .ids(),
            batch[0],
            "{name}: T5's tokenizer (</s> appended)"
        );
        let out = plm.forward(&batch).unwrap();
        let worst =
            common::states_deviation(&out.hidden_states, &h["encoder_hidden_states"], &batch);
        assert!(worst <= TOLERANCE, "{name}: hidden states off by {worst:e}");
        let decoder = ids(&h["decoder_ids"]);
        let logits = plm.seq2seq_logits(&batch, &decoder).unwrap();
        let worst = common::logits_deviation(logits, &h["logits"], &h["logit_columns"], &decoder);
        assert!(
            worst <= TOLERANCE,
            "{name}: decoder logits off by {worst:e}"
        );
    }
}

/// Greedy and 3-beam search with the key/value cache give transformers'
/// `generate` ids (after its decoder start token).
#[test]
fn generation_gives_transformers_tokens() {
    let g = common::golden("t5_parity.json");
    let wmt = common::rows("wmt21_de_en.jsonl");
    let prompts = [
        wmt[5]["ref_a"].as_str().unwrap().to_owned(),
        wmt[12]["src"].as_str().unwrap().chars().take(60).collect(),
    ];
    for name in ["tiny", "tiny-v1"] {
        let plm = load(name);
        let cases = g["models"][name]["generate"].as_array().unwrap();
        for (prompt, case) in prompts.iter().zip(cases) {
            for (key, decoding) in [
                ("greedy", Decoding::Greedy),
                (
                    "beam3",
                    Decoding::Beam {
                        beams: 3,
                        length_penalty: 1.0,
                    },
                ),
            ] {
                let options = GenerateOptions {
                    max_new_tokens: 12,
                    decoding,
                    stop_at_eos: true,
                    ..GenerateOptions::default()
                };
                let out =
                    block_on(plm.generate(prompt, &options, async |_| ControlFlow::Continue(())))
                        .unwrap();
                let want = ids(&Value::from(vec![case["input"].clone()]));
                assert_eq!(out.input_tokens, want[0], "{name} input");
                let mut ours = vec![0];
                ours.extend(&out.generation.tokens);
                if key == "greedy" {
                    assert_eq!(
                        ours,
                        ids(&Value::from(vec![case[key].clone()]))[0],
                        "{name}"
                    );
                    continue;
                }
                // The best beam, or one whose score ties with it in f32.
                let beams = case[key].as_array().unwrap();
                let best = beams[0]["score"].as_f64().unwrap();
                let tied: Vec<Vec<u32>> = beams
                    .iter()
                    .filter(|b| (b["score"].as_f64().unwrap() - best).abs() < 1e-5)
                    .map(|b| ids(&Value::from(vec![b["tokens"].clone()])).remove(0))
                    .collect();
                assert!(
                    tied.contains(&ours),
                    "{name} {key}: {ours:?} not in {tied:?}"
                );
            }
        }
    }
}

/// A T5 repository with `spiece.model` and no `tokenizer.json` (UniEval's)
/// tokenizes as transformers' `T5TokenizerFast` converts it: questions with
/// `</s>`, runs of spaces, sentinels, characters the model lacks.
#[test]
fn spiece_model_tokenizes_as_transformers_converts_it() {
    let g = common::golden("t5_parity.json");
    let config = std::fs::read_to_string(fixture("tiny").join("config.json")).unwrap();
    let spm = std::fs::read(fixture("spiece.model")).unwrap();
    let json =
        blindspot::models::weights::sentencepiece_tokenizer_json(&spm, None, &config).unwrap();
    let tok = blindspot::models::LmTokenizer::from_tokenizer_json("spiece", &json).unwrap();
    let texts = g["spiece"]["texts"].as_array().unwrap();
    let fast = ids(&g["spiece"]["fast"]);
    for (text, want) in texts.iter().zip(&fast) {
        let text = text.as_str().unwrap();
        assert_eq!(&tok.encode_for_model(text).unwrap().ids(), want, "{text:?}");
    }
    // A folder with spiece.model loads with it.
    let dir = std::env::temp_dir().join(format!("blindspot-spiece-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for f in ["config.json", "model.safetensors"] {
        std::fs::copy(fixture("tiny").join(f), dir.join(f)).unwrap();
    }
    std::fs::copy(fixture("spiece.model"), dir.join("spiece.model")).unwrap();
    let plm = common::cpu_model("spiece", &dir);
    let text = texts[0].as_str().unwrap();
    assert_eq!(plm.tokenizer.encode_for_model(text).unwrap().ids(), fast[0]);
    std::fs::remove_dir_all(&dir).unwrap();
}
