//! BLEURT-20 against lucadiliello's PyTorch port (`bleurt-pytorch`) on a
//! tiny random checkpoint in the hub layout (config.json, pytorch_model.bin,
//! spm.model; golden values from scripts/bleurt_parity.py): the SentencePiece
//! model rebuilt in Rust, the pair cut longest-first, the scores through the
//! engine as every caller scores; then prepared files, int8, the CLI and the
//! errors a user meets.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::rc::Rc;

use blindspot::metrics::bleurt::{BleurtOptions, encode_pair};
use blindspot::metrics::engine::{Engine, EngineError, ModelStore};
use blindspot::metrics::{Column, MetricSpec, ModelSlot, Segment};
use blindspot::models::weights::prepare;
use blindspot::models::{LmTokenizer, ModelFiles, Plm, Precision};
use burn::tensor::Device;
use futures::executor::block_on;
use serde_json::Value;

/// The bar for f32 scores.
const TOLERANCE: f64 = 1e-5;
const SPEC: MetricSpec = MetricSpec::Bleurt(BleurtOptions { model: None });

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/bleurt/tiny")
}

fn load(precision: Precision) -> Plm {
    let files = ModelFiles::from_path(&fixture()).unwrap();
    Plm::load("tiny-bleurt", files, &Device::flex(), precision).unwrap()
}

fn ids(v: &Value) -> Vec<u32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}

/// `(reference, candidate)` of each golden pair, rebuilt from tests/data
/// (or given literally for the edge pairs).
fn pairs(g: &Value) -> Vec<(String, String)> {
    g["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            if let Some(r) = p.get("ref_text") {
                return (
                    r.as_str().unwrap().into(),
                    p["mt_text"].as_str().unwrap().into(),
                );
            }
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
            (text("ref"), text("mt"))
        })
        .collect()
}

fn golden_scores(g: &Value) -> Vec<f64> {
    g["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["score"].as_f64().unwrap())
        .collect()
}

/// One loaded model for every slot.
struct One(Rc<Plm>);

impl ModelStore for One {
    fn model(&self, _: ModelSlot, _: Option<&str>) -> Result<Rc<Plm>, EngineError> {
        Ok(self.0.clone())
    }
}

fn column(plm: Plm, pairs: &[(String, String)]) -> Result<Column, EngineError> {
    let refs: Vec<[&str; 1]> = pairs.iter().map(|p| [p.0.as_str()]).collect();
    let segments: Vec<Segment> = pairs
        .iter()
        .zip(&refs)
        .map(|(p, r)| Segment {
            hyp: &p.1,
            refs: r,
            src: None,
        })
        .collect();
    let engine = Engine::new(One(Rc::new(plm)));
    Ok(block_on(engine.score(&[SPEC], &segments))?.remove(0))
}

#[test]
fn sentencepiece_model_tokenizes_as_sentencepiece() {
    let g = common::golden("bleurt.json");
    let bytes = std::fs::read(fixture().join("spm.model")).unwrap();
    let tok = LmTokenizer::from_sentencepiece("tiny", &bytes, false).unwrap();
    for case in g["tokens"].as_array().unwrap() {
        let text = case["text"].as_str().unwrap();
        let got: Vec<u32> = tok.encode(text).unwrap().iter().map(|t| t.id).collect();
        assert_eq!(got, ids(&case["ids"]), "{text:?}");
    }
    // The rebuilt tokenizer survives its tokenizer.json (what .bpk files carry).
    let again =
        LmTokenizer::from_tokenizer_json("tiny", tok.to_json().unwrap().as_bytes()).unwrap();
    let text = g["tokens"][6]["text"].as_str().unwrap();
    assert_eq!(again.encode(text).unwrap(), tok.encode(text).unwrap());
    let e = LmTokenizer::from_sentencepiece("x", b"not a model", false).unwrap_err();
    assert!(e.to_string().contains("not a SentencePiece model"), "{e}");
}

#[test]
fn pairs_are_read_and_cut_as_the_port_reads_them() {
    let g = common::golden("bleurt.json");
    let plm = load(Precision::F32);
    let mut cut = 0;
    for (p, (r, c)) in g["pairs"].as_array().unwrap().iter().zip(pairs(&g)) {
        let (input, types, truncated) = encode_pair(&plm, &r, &c).unwrap();
        assert_eq!(input, ids(&p["input_ids"]), "{r:?} / {c:?}");
        assert_eq!(types, ids(&p["token_type_ids"]));
        cut += usize::from(truncated);
    }
    // Long documents, a document against itself (both sides cut evenly) and
    // a short reference before a long candidate are all in the set.
    assert!(cut >= 20, "{cut} pairs cut");
}

#[test]
fn scores_match_bleurt_pytorch() {
    let g = common::golden("bleurt.json");
    let pairs = pairs(&g);
    assert!(pairs.len() >= 60);
    let scored = column(load(Precision::F32), &pairs).unwrap();
    let dev = common::max_deviation(&scored.values(), &golden_scores(&g));
    println!("bleurt: f32 max deviation {dev:.2e}");
    assert!(dev <= TOLERANCE, "max deviation {dev:e}");
    let truncated = |i: usize| scored.scores[i].parts[0].value;
    assert_eq!(truncated(0), 0.0);
    assert_eq!(truncated(30), 1.0);
    let sig = scored.signature.to_string();
    assert!(
        sig.starts_with("bleurt|model:tiny-bleurt|conventions:bleurt-pytorch-0.0.1|precision:f32"),
        "{sig}"
    );
}

#[test]
fn prepared_files_give_the_same_scores_and_int8_stays_close() {
    let g = common::golden("bleurt.json");
    let pairs = &pairs(&g)[..40];
    let f32_scores = column(load(Precision::F32), pairs).unwrap().values();
    let prepared = |precision| {
        let bpk = prepare(ModelFiles::from_path(&fixture()).unwrap(), precision).unwrap();
        let files = ModelFiles::from_burnpack(bpk).unwrap();
        let plm = Plm::load("tiny-bleurt", files, &Device::flex(), precision).unwrap();
        column(plm, pairs).unwrap().values()
    };
    assert!(common::max_deviation(&prepared(Precision::F32), &f32_scores) <= 1e-6);
    let dev = common::max_deviation(&prepared(Precision::Int8), &f32_scores);
    println!("bleurt: int8 max deviation {dev:.2e}");
    assert!(dev > 0.0 && dev < 0.05, "int8 deviation {dev}");
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

#[test]
fn safetensors_weights_load_as_the_pickle_does() {
    // A repository with model.safetensors (what the browser reads) beside spm.model.
    let dir = std::env::temp_dir().join(format!("blindspot-bleurt-st-{}", std::process::id()));
    copy_dir(&fixture(), &dir);
    std::fs::remove_file(dir.join("pytorch_model.bin")).unwrap();
    std::fs::copy(
        fixture()
            .with_file_name("tiny-safetensors")
            .join("model.safetensors"),
        dir.join("model.safetensors"),
    )
    .unwrap();
    let g = common::golden("bleurt.json");
    let pairs = &pairs(&g)[..20];
    let files = ModelFiles::from_path(&dir).unwrap();
    let plm = Plm::load("tiny-bleurt", files, &Device::flex(), Precision::F32).unwrap();
    let dev = common::max_deviation(
        &column(plm, pairs).unwrap().values(),
        &golden_scores(&g)[..20],
    );
    assert!(dev <= TOLERANCE, "{dev:e}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn broken_folders_and_inputs_say_what_is_wrong() {
    let dir = std::env::temp_dir().join(format!("blindspot-bleurt-{}", std::process::id()));
    let folder = |name: &str| {
        let d = dir.join(name);
        copy_dir(&fixture(), &d);
        d
    };
    let error = |path: &Path| match ModelFiles::from_path(path) {
        Err(e) => e.to_string(),
        Ok(files) => Plm::load("x", files, &Device::flex(), Precision::F32)
            .unwrap_err()
            .to_string(),
    };
    let no_spm = folder("no-spm");
    std::fs::remove_file(no_spm.join("spm.model")).unwrap();
    let e = error(&no_spm);
    assert!(e.contains("neither spm.model nor tokenizer.json"), "{e}");

    let broken_spm = folder("broken-spm");
    std::fs::write(broken_spm.join("spm.model"), b"\x0a\xff\xff").unwrap();
    let e = error(&broken_spm);
    assert!(
        e.contains("spm.model") && e.contains("SentencePiece"),
        "{e}"
    );

    let no_weights = folder("no-weights");
    std::fs::remove_file(no_weights.join("pytorch_model.bin")).unwrap();
    let e = error(&no_weights);
    assert!(e.contains("model.safetensors"), "{e}");

    // Another encoder in BLEURT's slot, and pairs BLEURT cannot score.
    let minilm = ModelFiles::from_path(
        &PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("models/all-MiniLM-L6-v2"),
    )
    .unwrap();
    let minilm = Plm::load("all-MiniLM-L6-v2", minilm, &Device::flex(), Precision::F32).unwrap();
    let pair = [("a".to_owned(), "b".to_owned())];
    let e = column(minilm, &pair).unwrap_err().to_string();
    assert!(e.contains("not a BLEURT checkpoint"), "{e}");
    let engine = Engine::new(One(Rc::new(load(Precision::F32))));
    let run = |refs: &[&str]| {
        block_on(engine.score(
            &[SPEC],
            &[Segment {
                hyp: "a",
                refs,
                src: None,
            }],
        ))
        .unwrap_err()
        .to_string()
    };
    assert!(run(&[]).contains("reference"));
    assert!(run(&["b", "c"]).contains("BLEURT scores against one"));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn cli_scores_bleurt_from_a_hub_layout_folder() {
    let g = common::golden("bleurt.json");
    let pairs = &pairs(&g)[..30];
    let want = golden_scores(&g);
    let dir = std::env::temp_dir().join(format!("blindspot-bleurt-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let write = |name: &str, texts: Vec<&str>| {
        let path = dir.join(name);
        std::fs::write(&path, texts.join("\n") + "\n").unwrap();
        path.to_string_lossy().into_owned()
    };
    let r = write("ref.txt", pairs.iter().map(|p| p.0.as_str()).collect());
    let h = write("hyp.txt", pairs.iter().map(|p| p.1.as_str()).collect());
    let out = Command::new(env!("CARGO_BIN_EXE_blindspot"))
        .args(["score", "--hyps", &h, "--refs", &r, "--format", "jsonl"])
        .args(["--metrics", "bleurt,bleu"])
        .args(["--model", &format!("bleurt={}", fixture().display())])
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
        let ours = line["bleurt"].as_f64().unwrap();
        assert!(
            (ours - want[i]).abs() <= TOLERANCE,
            "{i}: {ours} vs {}",
            want[i]
        );
    }
    std::fs::remove_dir_all(&dir).ok();
}
