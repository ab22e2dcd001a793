//! COMET and COMET-QE against unbabel-comet 2.2 on tiny random checkpoints
//! in the hub layout (hparams.yaml + checkpoints/model.ckpt; golden scores
//! from scripts/comet_parity.py), through the engine as every caller
//! scores; then the CLI, prepared files, int8, and the errors a user meets.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::rc::Rc;

use blindspot::metrics::comet::CometOptions;
use blindspot::metrics::engine::{Engine, EngineError, ModelStore};
use blindspot::metrics::{Column, MetricSpec, ModelSlot, Segment};
use blindspot::models::weights::prepare;
use blindspot::models::{ModelFiles, Plm, Precision};
use burn::tensor::Device;
use futures::executor::block_on;
use serde_json::Value;

/// The bar for f32 scores.
const TOLERANCE: f64 = 1e-5;
const MODELS: [&str; 4] = ["comet-da", "comet-qe", "cometinho", "comet-l1max"];

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/comet")
        .join(name)
}

fn load(name: &str, precision: Precision) -> Plm {
    let files = ModelFiles::from_path(&fixture(name)).unwrap();
    Plm::load(name, files, &Device::flex(), precision).unwrap()
}

/// One loaded model for every slot.
struct One(Rc<Plm>);

impl ModelStore for One {
    fn model(&self, _: ModelSlot, _: Option<&str>) -> Result<Rc<Plm>, EngineError> {
        Ok(self.0.clone())
    }
}

/// `(src, mt, ref)` of each golden pair, rebuilt from tests/data.
fn pairs(g: &Value) -> Vec<[String; 3]> {
    g["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let rows = common::rows(p["file"].as_str().unwrap());
            let text = |key: &str| {
                let lines = p
                    .get(format!("{key}_lines"))
                    .unwrap_or(&p["lines"])
                    .as_array()
                    .unwrap();
                let path = p[key].as_str().unwrap().replace('.', "/");
                lines
                    .iter()
                    .map(|n| common::field(&rows[n.as_u64().unwrap() as usize - 1], &path))
                    .collect::<Vec<_>>()
                    .join(" ")
            };
            [text("src"), text("mt"), text("ref")]
        })
        .collect()
}

fn spec_for(name: &str) -> MetricSpec {
    match name {
        "comet-qe" => MetricSpec::CometQe(CometOptions { model: None }),
        _ => MetricSpec::Comet(CometOptions { model: None }),
    }
}

/// The engine's column for `spec` on `pairs` (source, hypothesis, one reference).
fn column(plm: Plm, spec: &MetricSpec, pairs: &[[String; 3]]) -> Result<Column, EngineError> {
    let refs: Vec<[&str; 1]> = pairs.iter().map(|p| [p[2].as_str()]).collect();
    let segments: Vec<Segment> = pairs
        .iter()
        .zip(&refs)
        .map(|(p, r)| Segment {
            hyp: &p[1],
            refs: r,
            src: Some(&p[0]),
        })
        .collect();
    let engine = Engine::new(One(Rc::new(plm)));
    Ok(block_on(engine.score(std::slice::from_ref(spec), &segments))?.remove(0))
}

fn score(plm: Plm, spec: &MetricSpec, pairs: &[[String; 3]]) -> Result<Vec<f64>, EngineError> {
    Ok(column(plm, spec, pairs)?.values())
}

#[test]
fn scores_match_unbabel_comet_on_every_checkpoint() {
    let g = common::golden("comet.json");
    let pairs = pairs(&g);
    assert_eq!(pairs.len(), 70);
    for name in MODELS {
        let want: Vec<f64> = g["models"][name]["scores"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        let ours = score(load(name, Precision::F32), &spec_for(name), &pairs).unwrap();
        let dev = common::max_deviation(&ours, &want);
        assert!(dev <= TOLERANCE, "{name}: max deviation {dev:e}");
        let mean = ours.iter().sum::<f64>() / ours.len() as f64;
        let system = g["models"][name]["system_score"].as_f64().unwrap();
        assert!((mean - system).abs() <= TOLERANCE, "{name} system score");
    }
}

#[test]
fn long_texts_are_cut_as_comet_cuts_them_and_flagged() {
    // The TED documents are far longer than the tiny encoders' 62 tokens.
    let g = common::golden("comet.json");
    let pairs = pairs(&g);
    let plm = load("comet-da", Precision::F32);
    assert_eq!(plm.tokenizer.max_length(), Some(62));
    assert!(plm.encode(&pairs[45][0]).unwrap().truncated);
    let scored = column(
        plm,
        &MetricSpec::Comet(CometOptions { model: None }),
        &pairs,
    )
    .unwrap();
    let truncated = |i: usize| scored.scores[i].parts[0].value;
    assert_eq!(truncated(45), 1.0);
    assert_eq!(truncated(0), 0.0);
    let sig = scored.signature.to_string();
    assert!(
        sig.starts_with("comet|model:comet-da|conventions:unbabel-comet-2.2.7|precision:f32"),
        "{sig}"
    );
}

#[test]
fn prepared_files_give_the_same_scores_and_int8_stays_close() {
    let g = common::golden("comet.json");
    let pairs = &pairs(&g)[..30];
    for name in ["comet-da", "cometinho"] {
        let f32_scores = score(load(name, Precision::F32), &spec_for(name), pairs).unwrap();
        let bpk = prepare(
            ModelFiles::from_path(&fixture(name)).unwrap(),
            Precision::F32,
        )
        .unwrap();
        let files = ModelFiles::from_burnpack(bpk).unwrap();
        assert!(files.comet_hparams.is_some());
        let plm = Plm::load(name, files, &Device::flex(), Precision::F32).unwrap();
        let prepared = score(plm, &spec_for(name), pairs).unwrap();
        assert!(
            common::max_deviation(&prepared, &f32_scores) <= 1e-6,
            "{name} .bpk"
        );

        let int8 = prepare(
            ModelFiles::from_path(&fixture(name)).unwrap(),
            Precision::Int8,
        )
        .unwrap();
        let plm = Plm::load(
            name,
            ModelFiles::from_burnpack(int8).unwrap(),
            &Device::flex(),
            Precision::Int8,
        )
        .unwrap();
        let quantized = score(plm, &spec_for(name), pairs).unwrap();
        let dev = common::max_deviation(&quantized, &f32_scores);
        println!("{name}: int8 max deviation {dev:.2e}");
        assert!(dev > 0.0 && dev < 0.05, "{name}: int8 deviation {dev}");
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

#[test]
fn broken_folders_and_inputs_say_what_is_wrong() {
    let dir = std::env::temp_dir().join(format!("blindspot-comet-{}", std::process::id()));
    let folder = |name: &str| {
        let d = dir.join(name);
        copy_dir(&fixture("comet-da"), &d);
        d
    };
    let error = |path: &Path| match ModelFiles::from_path(path) {
        Err(e) => e.to_string(),
        Ok(files) => Plm::load("x", files, &Device::flex(), Precision::F32)
            .unwrap_err()
            .to_string(),
    };

    let no_hparams = folder("no-hparams");
    std::fs::remove_file(no_hparams.join("hparams.yaml")).unwrap();
    assert!(error(&no_hparams).contains("no hparams.yaml"));

    let no_tokenizer = folder("no-tokenizer");
    std::fs::remove_file(no_tokenizer.join("tokenizer.json")).unwrap();
    let e = error(&no_tokenizer);
    assert!(
        e.contains("no tokenizer.json") && e.contains("huggingface.co/"),
        "{e}"
    );

    let no_config = folder("no-config");
    std::fs::remove_file(no_config.join("config.json")).unwrap();
    assert!(error(&no_config).contains("encoder's config.json"));

    // The class comes from hparams.yaml, as COMET reads it (the rest from
    // the checkpoint): one we do not implement is refused by name.
    let unified = folder("unified");
    let yaml = std::fs::read_to_string(unified.join("hparams.yaml")).unwrap();
    std::fs::write(
        unified.join("hparams.yaml"),
        yaml.replace(
            "class_identifier: regression_metric",
            "class_identifier: unified_metric",
        ),
    )
    .unwrap();
    assert!(error(&unified).contains("`unified_metric` is not supported"));

    let bert_tokenizer = folder("bert-tokenizer");
    std::fs::copy(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("models/all-MiniLM-L6-v2/tokenizer.json"),
        bert_tokenizer.join("tokenizer.json"),
    )
    .unwrap();
    let e = error(&bert_tokenizer);
    assert!(
        e.contains("not XLM-R's") && e.contains("huggingface.co/tests/fixtures/comet/comet-da"),
        "{e}"
    );

    let wrong_encoder = folder("wrong-encoder");
    std::fs::copy(
        fixture("cometinho").join("config.json"),
        wrong_encoder.join("config.json"),
    )
    .unwrap();
    assert!(error(&wrong_encoder).contains("names a XLM-RoBERTa encoder"));

    // COMET computes with the hparams stored in the checkpoint (hparams.yaml
    // names only the class): a hparams.yaml that disagrees changes nothing.
    let disagreeing = folder("disagreeing-yaml");
    let yaml = std::fs::read_to_string(disagreeing.join("hparams.yaml")).unwrap();
    std::fs::write(
        disagreeing.join("hparams.yaml"),
        yaml.replace(
            "layer_transformation: sparsemax",
            "layer_transformation: softmax",
        ),
    )
    .unwrap();
    let g = common::golden("comet.json");
    let some = &pairs(&g)[..5];
    let files = ModelFiles::from_path(&disagreeing).unwrap();
    let plm = Plm::load("comet-da", files, &Device::flex(), Precision::F32).unwrap();
    let ours = score(plm, &MetricSpec::Comet(CometOptions { model: None }), some).unwrap();
    for (i, v) in ours.iter().enumerate() {
        let want = g["models"]["comet-da"]["scores"][i].as_f64().unwrap();
        assert!((v - want).abs() <= TOLERANCE, "pair {i}: {v} vs {want}");
    }

    // Inputs: no source, two references, the QE metric on a reference-based checkpoint.
    let engine = Engine::new(One(Rc::new(load("comet-da", Precision::F32))));
    let comet = MetricSpec::Comet(CometOptions { model: None });
    let run = |spec: &MetricSpec, seg: Segment| {
        block_on(engine.score(std::slice::from_ref(spec), &[seg]))
            .unwrap_err()
            .to_string()
    };
    let e = run(
        &comet,
        Segment {
            hyp: "a",
            refs: &["b"],
            src: None,
        },
    );
    assert!(e.contains("segment 1 has no source"), "{e}");
    let e = run(
        &comet,
        Segment {
            hyp: "a",
            refs: &["b", "c"],
            src: Some("d"),
        },
    );
    assert!(e.contains("COMET scores against one"), "{e}");
    let e = run(
        &MetricSpec::CometQe(CometOptions { model: None }),
        Segment {
            hyp: "a",
            refs: &[],
            src: Some("d"),
        },
    );
    assert!(e.contains("needs a reference-free"), "{e}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn cli_scores_comet_and_comet_qe_from_hub_layout_folders() {
    let g = common::golden("comet.json");
    let pairs = &pairs(&g)[..30];
    let dir = std::env::temp_dir().join(format!("blindspot-comet-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let write = |name: &str, i: usize| {
        let path = dir.join(name);
        let lines: Vec<&str> = pairs.iter().map(|p| p[i].as_str()).collect();
        std::fs::write(&path, lines.join("\n") + "\n").unwrap();
        path.to_string_lossy().into_owned()
    };
    let (s, h, r) = (
        write("src.txt", 0),
        write("hyp.txt", 1),
        write("ref.txt", 2),
    );
    let model = |slot: &str, name: &str| format!("{slot}={}", fixture(name).display());
    let out = Command::new(env!("CARGO_BIN_EXE_blindspot"))
        .args([
            "score", "--hyps", &h, "--refs", &r, "--srcs", &s, "--format", "jsonl",
        ])
        .args(["--metrics", "comet,comet-qe"])
        .args(["--model", &model("comet", "comet-da")])
        .args(["--model", &model("comet-qe", "comet-qe")])
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
    for (i, line) in lines[..pairs.len()].iter().enumerate() {
        for (metric, name) in [("comet", "comet-da"), ("comet-qe", "comet-qe")] {
            let want = g["models"][name]["scores"][i].as_f64().unwrap();
            let ours = line[metric].as_f64().unwrap();
            assert!(
                (ours - want).abs() <= TOLERANCE,
                "{metric} {i}: {ours} vs {want}"
            );
        }
    }
    // Without sources: one clear line.
    let out = Command::new(env!("CARGO_BIN_EXE_blindspot"))
        .args(["score", "--hyps", &h, "--refs", &r, "--metrics", "comet"])
        .args(["--model", &model("comet", "comet-da")])
        .output()
        .unwrap();
    common::assert_user_error(&out, "comet");
    std::fs::remove_dir_all(&dir).ok();
}
