//! BART and BARTScore against transformers and neulab/BARTScore's
//! `bart_score.py` on a tiny random checkpoint (scripts/bart_parity.py):
//! encoder hidden states and decoder logits, then BARTScore P, R, F and
//! faithfulness on 30 WMT21 segments through the engine (texts past the
//! checkpoint's 64 positions are cut as the released code cuts them), the
//! pickle and prepared files, int8, the CLI and the errors a user meets.

use crate::common;

use std::path::PathBuf;
use std::process::Command;
use std::rc::Rc;

use blindspot::metrics::bartscore;
use blindspot::metrics::bartscore::{BartPart, BartScoreOptions};
use blindspot::metrics::engine::{Detail, Engine, EngineError, ModelStore};
use blindspot::metrics::{Column, MetricSpec, ModelSlot, Segment};
use blindspot::models::weights::prepare;
use blindspot::models::{ModelConfig, ModelFiles, Plm, Precision};
use burn::tensor::Device;
use futures::executor::block_on;
use serde_json::Value;

/// The issue's bar.
const TOLERANCE: f64 = 1e-4;
const PARTS: [BartPart; 4] = [BartPart::P, BartPart::R, BartPart::F, BartPart::Faithful];

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/bart")
        .join(name)
}

fn load_from(name: &str, precision: Precision) -> Plm {
    let files = ModelFiles::from_path(&fixture(name)).unwrap();
    Plm::load("tiny-bart", files, &Device::flex(), precision).unwrap()
}

fn load() -> Plm {
    load_from("tiny", Precision::F32)
}

fn spec(part: BartPart) -> MetricSpec {
    MetricSpec::BartScore(BartScoreOptions { model: None, part })
}

/// One loaded model for every slot.
struct One(Rc<Plm>);

impl ModelStore for One {
    fn model(&self, _: ModelSlot, _: Option<&str>) -> Result<Rc<Plm>, EngineError> {
        Ok(self.0.clone())
    }
}

/// `(reference, hypothesis, source)` of each golden segment, rebuilt from tests/data.
fn triples(g: &Value) -> Vec<(String, String, String)> {
    let rows = common::rows("wmt21_de_en.jsonl");
    g["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let row = &rows[p["line"].as_u64().unwrap() as usize - 1];
            let system = p["system"].as_str().unwrap();
            (
                common::field(row, "ref_a"),
                common::field(row, &format!("systems/{system}")),
                common::field(row, "src"),
            )
        })
        .collect()
}

fn columns(plm: Plm, triples: &[(String, String, String)], details: bool) -> Vec<Column> {
    let refs: Vec<[&str; 1]> = triples.iter().map(|t| [t.0.as_str()]).collect();
    let segments: Vec<Segment> = triples
        .iter()
        .zip(&refs)
        .map(|(t, r)| Segment {
            hyp: &t.1,
            refs: r,
            src: Some(&t.2),
        })
        .collect();
    let mut engine = Engine::new(One(Rc::new(plm)));
    if details {
        engine = engine.with_details();
    }
    block_on(engine.score(&PARTS.map(spec), &segments)).unwrap()
}

fn golden_values(g: &Value, key: &str) -> Vec<f64> {
    g["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p[key].as_f64().unwrap())
        .collect()
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
fn config_reads_bart_and_refuses_what_it_cannot_run() {
    let text = std::fs::read_to_string(fixture("tiny").join("config.json")).unwrap();
    let config = ModelConfig::from_json(&text).unwrap();
    let decoder = config.decoder().unwrap();
    assert_eq!(
        (
            config.num_layers,
            config.num_heads,
            config.intermediate_size
        ),
        (2, 4, 48)
    );
    assert_eq!(
        (
            decoder.num_layers,
            decoder.num_heads,
            decoder.intermediate_size
        ),
        (3, 2, 40)
    );
    assert!(decoder.scale_embedding);
    assert_eq!((config.pad_token_id, decoder.start_token_id), (1, 2));
    let mut raw: Value = serde_json::from_str(&text).unwrap();
    raw["architectures"] = serde_json::json!(["BartForSequenceClassification"]);
    let e = ModelConfig::from_json(&raw.to_string()).unwrap_err();
    assert!(
        e.to_string()
            .contains("BartForConditionalGeneration, BartModel or PrismForConditionalGeneration"),
        "{e}"
    );
    raw["architectures"] = serde_json::json!(["BartForConditionalGeneration"]);
    raw["add_final_layer_norm"] = Value::Bool(true);
    let e = ModelConfig::from_json(&raw.to_string()).unwrap_err();
    assert!(e.to_string().contains("pre-norm BART"), "{e}");
    let e = ModelConfig::from_json(r#"{"model_type":"llama"}"#).unwrap_err();
    assert!(e.to_string().contains("`llama` is not supported"), "{e}");
}

#[test]
fn encoder_and_decoder_match_transformers() {
    let g = common::golden("bart_parity.json");
    let h = &g["hidden"];
    let plm = load();
    let batch = ids(&h["ids"]);
    let out = plm.forward(&batch).unwrap();
    let worst = common::states_deviation(&out.hidden_states, &h["encoder_hidden_states"], &batch);
    assert!(worst <= TOLERANCE, "encoder hidden states off by {worst:e}");
    // Decoder logits at a spread of columns.
    let decoder = ids(&h["decoder_ids"]);
    let logits = plm.seq2seq_logits(&batch, &decoder).unwrap();
    let worst = common::logits_deviation(logits, &h["logits"], &h["logit_columns"], &decoder);
    assert!(worst <= TOLERANCE, "decoder logits off by {worst:e}");
}

#[test]
fn bartscore_matches_the_released_code() {
    let g = common::golden("bart_parity.json");
    let triples = triples(&g);
    assert_eq!(triples.len(), 30);
    let cols = columns(load(), &triples, true);
    for (col, key) in cols.iter().zip(["precision", "recall", "f", "faithful"]) {
        let dev = common::max_deviation(&col.values(), &golden_values(&g, key));
        println!("bartscore {key}: max deviation {dev:.2e}");
        assert!(dev <= TOLERANCE, "{key}: {dev:e}");
    }
    // F is the arithmetic mean, not a harmonic one.
    let (p, r, f) = (cols[0].values(), cols[1].values(), cols[2].values());
    for i in 0..p.len() {
        assert!((f[i] - (p[i] + r[i]) / 2.0).abs() < 1e-12);
    }
    // Texts past the 64 positions were cut (the golden file counts them), and said so.
    let cut = cols[3]
        .scores
        .iter()
        .filter(|s| {
            s.parts
                .iter()
                .any(|p| p.name == "truncated" && p.value == 1.0)
        })
        .count();
    assert!(cut >= 5, "{cut} segments cut");
    // Per-token log-probabilities of the first segments, as the page shows them.
    for (k, pair) in g["pairs"].as_array().unwrap()[..5].iter().enumerate() {
        for (col, key) in [(0, "precision"), (1, "recall"), (3, "faithful")] {
            let Detail::TokenLogprobs { tokens, target, .. } = &cols[col].details[k] else {
                panic!("BARTScore details are token log-probabilities");
            };
            assert_eq!(
                *target,
                if key == "recall" {
                    "reference"
                } else {
                    "hypothesis"
                }
            );
            let ours: Vec<f64> = tokens.iter().map(|t| t.1).collect();
            let dev = common::max_deviation(&ours, &common::flat(&pair["tokens"][key]));
            assert!(dev <= TOLERANCE, "{k} {key}: {dev:e}");
        }
    }
    let sig = cols[2].signature.to_string();
    assert!(
        sig.starts_with(
            "bartscore|model:tiny-bart|part:f|refs:mean|conventions:neulab-bartscore|precision:f32"
        ),
        "{sig}"
    );
}

#[test]
fn several_references_average_precision_and_recall() {
    let g = common::golden("bart_parity.json");
    let t = &triples(&g)[..3];
    let engine = Engine::new(One(Rc::new(load())));
    let score = |refs: &[&str]| {
        block_on(engine.score(
            &[spec(BartPart::P), spec(BartPart::R)],
            &[Segment {
                hyp: &t[0].1,
                refs,
                src: None,
            }],
        ))
        .unwrap()
        .iter()
        .map(|c| c.values()[0])
        .collect::<Vec<_>>()
    };
    let (a, b) = (score(&[&t[0].0]), score(&[&t[1].0]));
    let both = score(&[&t[0].0, &t[1].0]);
    for k in 0..2 {
        assert!(
            (both[k] - (a[k] + b[k]) / 2.0).abs() < 1e-9,
            "{both:?} {a:?} {b:?}"
        );
    }
}

#[test]
fn pickle_and_prepared_files_give_the_same_scores_and_int8_stays_close() {
    let g = common::golden("bart_parity.json");
    let triples = &triples(&g)[..12];
    let values = |plm: Plm| -> Vec<f64> {
        columns(plm, triples, false)
            .iter()
            .flat_map(Column::values)
            .collect()
    };
    let f32_values = values(load());
    assert!(
        common::max_deviation(
            &values(load_from("tiny-torch", Precision::F32)),
            &f32_values
        ) <= 1e-6
    );
    let prepared = |precision| {
        let bpk = prepare(ModelFiles::from_path(&fixture("tiny")).unwrap(), precision).unwrap();
        let files = ModelFiles::from_burnpack(bpk).unwrap();
        values(Plm::load("tiny-bart", files, &Device::flex(), precision).unwrap())
    };
    assert!(common::max_deviation(&prepared(Precision::F32), &f32_values) <= 1e-6);
    let dev = common::max_deviation(&prepared(Precision::Int8), &f32_values);
    println!("bartscore: int8 max deviation {dev:.2e}");
    assert!(dev > 0.0 && dev < 0.05, "int8 deviation {dev}");
}

#[test]
fn inputs_and_models_bartscore_cannot_use_say_why() {
    let engine = Engine::new(One(Rc::new(load())));
    let run = |part, refs: &[&str], src| {
        block_on(engine.score(
            &[spec(part)],
            &[Segment {
                hyp: "a cat",
                refs,
                src,
            }],
        ))
        .unwrap_err()
        .to_string()
    };
    let e = run(BartPart::F, &[], Some("x"));
    assert!(e.contains("needs at least one reference"), "{e}");
    let e = run(BartPart::Faithful, &["a"], None);
    assert!(e.contains("has no source"), "{e}");
    // Any empty text is still scored: <s></s> is a target like any other.
    let empty = block_on(engine.score(
        &[spec(BartPart::F)],
        &[Segment {
            hyp: "",
            refs: &[""],
            src: None,
        }],
    ))
    .unwrap();
    assert!(empty[0].values()[0].is_finite());
    // An encoder in BARTScore's slot.
    let minilm = ModelFiles::from_path(
        &PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("models/all-MiniLM-L6-v2"),
    )
    .unwrap();
    let minilm = Plm::load("all-MiniLM-L6-v2", minilm, &Device::flex(), Precision::F32).unwrap();
    let e = block_on(bartscore::score(&minilm, &[("a", "b")]))
        .unwrap_err()
        .to_string();
    assert!(e.contains("not an encoder-decoder"), "{e}");
}

#[test]
fn cli_scores_bartscore_from_a_folder() {
    let g = common::golden("bart_parity.json");
    let triples = &triples(&g)[..10];
    let dir = std::env::temp_dir().join(format!("blindspot-bart-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let write = |name: &str, texts: Vec<&str>| {
        let path = dir.join(name);
        std::fs::write(&path, texts.join("\n") + "\n").unwrap();
        path.to_string_lossy().into_owned()
    };
    let r = write("ref.txt", triples.iter().map(|t| t.0.as_str()).collect());
    let h = write("hyp.txt", triples.iter().map(|t| t.1.as_str()).collect());
    let s = write("src.txt", triples.iter().map(|t| t.2.as_str()).collect());
    let out = Command::new(env!("CARGO_BIN_EXE_blindspot"))
        .args([
            "score", "--hyps", &h, "--refs", &r, "--srcs", &s, "--format", "jsonl",
        ])
        .args(["--metrics", "bartscore-f,bartscore-faithful"])
        .args([
            "--model",
            &format!("bartscore={}", fixture("tiny").display()),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let (f, faithful) = (golden_values(&g, "f"), golden_values(&g, "faithful"));
    for (i, line) in lines[..triples.len()].iter().enumerate() {
        for (key, want) in [("bartscore-f", f[i]), ("bartscore-faithful", faithful[i])] {
            let ours = line[key].as_f64().unwrap();
            assert!(
                (ours - want).abs() <= TOLERANCE,
                "{i} {key}: {ours} vs {want}"
            );
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// `blindspot` with `args`, which must succeed.
fn blindspot(args: &[&str]) -> Vec<u8> {
    let out = Command::new(env!("CARGO_BIN_EXE_blindspot"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

#[test]
fn preference_suite_and_audit_score_bartscore_as_score_does() {
    let dir = std::env::temp_dir().join(format!("blindspot-bart-suites-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // One MENLI case per error type.
    let mut reader =
        csv::Reader::from_path(format!("{}/menli_wmt20_de.csv", common::DATA)).unwrap();
    let csv_path = dir.join("menli.csv");
    let mut writer = csv::Writer::from_path(&csv_path).unwrap();
    writer.write_record(reader.headers().unwrap()).unwrap();
    let mut seen = std::collections::HashSet::new();
    for record in reader.records() {
        let record = record.unwrap();
        if seen.insert(record[0].to_owned()) {
            writer.write_record(&record).unwrap();
        }
    }
    writer.flush().unwrap();
    let cases = blindspot::data::load_menli_csv(&std::fs::read_to_string(&csv_path).unwrap())
        .unwrap()
        .rows;
    let model = format!("bartscore={}", fixture("tiny").display());
    let metrics = "bartscore-f,bartscore-faithful";
    let report: Value = serde_json::from_slice(&blindspot(&[
        "prefer",
        "--menli",
        csv_path.to_str().unwrap(),
        "--metrics",
        metrics,
        "--model",
        &model,
    ]))
    .unwrap();
    // The same four texts per case through `blindspot score`.
    let mut lines = String::new();
    for c in &cases {
        for (hyp, against) in [
            (&c.paraphrase, &c.reference),
            (&c.adversarial_ref_based, &c.reference),
            (&c.reference, &c.source),
            (&c.adversarial_ref_free, &c.source),
        ] {
            let line = serde_json::json!({ "hyp": hyp, "ref": against, "src": c.source });
            lines.push_str(&format!("{line}\n"));
        }
    }
    let input = dir.join("pairs.jsonl");
    std::fs::write(&input, lines).unwrap();
    let out = blindspot(&[
        "score",
        "--input",
        input.to_str().unwrap(),
        "--metrics",
        metrics,
        "--format",
        "jsonl",
        "--model",
        &model,
    ]);
    let rows: Vec<Value> = String::from_utf8(out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|v: &Value| v.get("pair").is_some())
        .collect();
    assert_eq!(rows.len(), 4 * cases.len());
    let errors = report["error_types"].as_array().unwrap();
    for (m, id) in metrics.split(',').enumerate() {
        let entry = &report["metrics"][m];
        assert_eq!(entry["metric"]["id"], id);
        for (e, error) in errors.iter().enumerate() {
            let (mut based, mut free) = (0, 0);
            for (k, _) in cases.iter().enumerate().filter(|(_, c)| c.error == *error) {
                let v = |j: usize| rows[4 * k + j][id].as_f64().unwrap();
                based += usize::from(v(0) > v(1));
                free += usize::from(v(2) > v(3));
            }
            assert_eq!(entry["ref_based"][e]["passed"], based, "{id} {error}");
            assert_eq!(entry["ref_free"][e]["passed"], free, "{id} {error}");
        }
    }
    // The audit reads the same metrics over SummEval (two documents).
    let text = std::fs::read_to_string(format!("{}/summeval.jsonl", common::DATA)).unwrap();
    let head: String = text.lines().take(2).map(|l| format!("{l}\n")).collect();
    let summeval = dir.join("summeval2.jsonl");
    std::fs::write(&summeval, head).unwrap();
    let audit: Value = serde_json::from_slice(&blindspot(&[
        "audit",
        "--summeval",
        summeval.to_str().unwrap(),
        "--metrics",
        metrics,
        "--model",
        &model,
    ]))
    .unwrap();
    for m in 0..2 {
        let kendall = audit["metrics"][m]["human"][0]["kendall"].as_f64().unwrap();
        assert!((-1.0..=1.0).contains(&kendall), "{kendall}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn hostile_texts_are_scored_or_refused_clearly() {
    let long = (0..20_000)
        .map(|i| format!("w{}", i % 97))
        .collect::<Vec<_>>()
        .join(" ");
    let texts = [
        "",
        " \n\t ",
        "🙂👍🏽 e\u{301}te\u{301} 👨‍👩‍👧",
        "مرحبا بالعالم",
        "nul\0inside\0",
        "<pad> <s> </s> <mask>",
        long.as_str(),
    ];
    let engine = Engine::new(One(Rc::new(load())));
    for hyp in texts {
        for other in texts {
            let refs = [other];
            let seg = [Segment {
                hyp,
                refs: &refs,
                src: Some(other),
            }];
            let cols = block_on(engine.score(&PARTS.map(spec), &seg)).unwrap();
            for c in cols {
                assert!(
                    c.values()[0].is_finite() && c.values()[0] <= 0.0,
                    "{hyp:.20} {other:.20}"
                );
            }
        }
    }
}

/// A copy of the tiny BART with its safetensors rewritten by `edit` (names
/// and tensors) and its config.json by `config`.
fn rewritten(
    name: &str,
    edit: impl Fn(&str) -> Option<String>,
    config: impl Fn(&mut Value),
) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("blindspot-bart-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(
        fixture("tiny").join("tokenizer.json"),
        dir.join("tokenizer.json"),
    )
    .unwrap();
    let bytes = std::fs::read(fixture("tiny").join("model.safetensors")).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let kept: Vec<(String, safetensors::tensor::TensorView)> = st
        .tensors()
        .into_iter()
        .filter_map(|(n, t)| edit(&n).map(|n| (n, t)))
        .collect();
    std::fs::write(
        dir.join("model.safetensors"),
        safetensors::serialize(kept, None).unwrap(),
    )
    .unwrap();
    let mut cfg: Value = serde_json::from_str(
        &std::fs::read_to_string(fixture("tiny").join("config.json")).unwrap(),
    )
    .unwrap();
    config(&mut cfg);
    std::fs::write(dir.join("config.json"), cfg.to_string()).unwrap();
    dir
}

#[test]
fn hub_layouts_of_the_real_checkpoints_load() {
    let g = common::golden("bart_parity.json");
    let triples = &triples(&g)[..6];
    let want = columns(load(), triples, false);
    let load_dir = |dir: &PathBuf| {
        Plm::load(
            "tiny-bart",
            ModelFiles::from_path(dir).unwrap(),
            &Device::flex(),
            Precision::F32,
        )
        .unwrap()
    };
    // facebook/bart-large-cnn's safetensors keep the shared embeddings only
    // as model.decoder.embed_tokens.
    let decoder_only = rewritten(
        "tied",
        |n| Some(n.replace("model.shared.", "model.decoder.embed_tokens.")),
        |_| {},
    );
    let got = columns(load_dir(&decoder_only), triples, false);
    assert_eq!(got[2].values(), want[2].values());
    // facebook/bart-base: a BartModel (no model. prefix, no final_logits_bias),
    // read with a zero bias as transformers reads it into the LM class.
    let base = rewritten(
        "base",
        |n| (n != "final_logits_bias").then(|| n.trim_start_matches("model.").to_owned()),
        |c| c["architectures"] = serde_json::json!(["BartModel"]),
    );
    let got = columns(load_dir(&base), triples, false);
    assert!(got[2].values().iter().all(|v| v.is_finite()));
    assert_ne!(got[2].values(), want[2].values(), "the drawn bias is gone");
    // An id past the embeddings (bart-large-cnn's <mask> is 50264 of 50264 rows).
    let plm = load();
    let Err(e) = plm.forward(&[vec![0, 1000, 2]]) else {
        panic!("an id past the embeddings is refused");
    };
    let e = e.to_string();
    assert!(e.contains("vocab_size 1000"), "{e}");
    let e = plm
        .seq2seq_logits(&[vec![0, 5, 2]], &[vec![2, 1000]])
        .unwrap_err()
        .to_string();
    assert!(e.contains("vocab_size"), "{e}");
    for d in [decoder_only, base] {
        std::fs::remove_dir_all(d).ok();
    }
}
