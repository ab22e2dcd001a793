//! PRISM against the released scorer's arithmetic (thompsonb/prism's
//! prism.py, restated by scripts/prism_parity.py on transformers' FSMT, the
//! port of fairseq's transformer) on a tiny random fairseq checkpoint
//! (`tests/fixtures/prism/tiny`, read as the released m39v1 folder is:
//! checkpoint.pt, spm.model, dict.*.txt): the ids of texts, each
//! direction's token log-probabilities, PRISM-ref and PRISM-QE at two
//! temperatures; the `.bpk` a user prepares for the page; the errors a user
//! meets.

use std::rc::Rc;

use blindspot::metrics::engine::{Engine, EngineError, ModelStore};
use blindspot::metrics::prism::{self, PrismOptions, PrismPart};
use blindspot::metrics::{Column, MetricSpec, ModelSlot, Segment};
use blindspot::models::{LmTokenizer, ModelFiles, Plm, Precision};
use burn::tensor::Device;
use futures::executor::block_on;
use serde_json::Value;

/// The issue's bar.
const TOLERANCE: f64 = 1e-5;

struct One(Rc<Plm>);

impl ModelStore for One {
    fn model(&self, _: ModelSlot, _: Option<&str>) -> Result<Rc<Plm>, EngineError> {
        Ok(self.0.clone())
    }
}

fn dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/prism/tiny")
}

fn load() -> Plm {
    let files = ModelFiles::from_path(&dir()).unwrap();
    Plm::load("tiny-prism", files, &Device::flex(), Precision::F32).unwrap()
}

fn golden() -> Value {
    serde_json::from_str(include_str!("golden/prism_parity.json")).unwrap()
}

fn floats(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

fn close(got: &[f64], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() < TOLERANCE, "{what}[{k}]: {g} vs {w}");
    }
}

#[test]
fn a_fairseq_folder_reads_as_prism_reads_it() {
    let plm = load();
    let g = golden();
    assert_eq!(
        plm.config.vocab_size,
        g["dict_size"].as_u64().unwrap() as usize
    );
    assert_eq!(plm.config.architecture, "PrismForConditionalGeneration");
    // The head counts come from config.json beside the checkpoint, the rest
    // from the tensors.
    assert_eq!((plm.config.num_heads, plm.config.num_layers), (4, 3));
    assert_eq!(plm.config.decoder().unwrap().num_layers, 2);
    let ids = |v: &Value| -> Vec<u32> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap() as u32)
            .collect()
    };
    for e in g["encodings"].as_array().unwrap() {
        let text = e["text"].as_str().unwrap();
        let mut got = plm.encode(text).unwrap().ids();
        LmTokenizer::fairseq_unknown(&mut got, plm.config.vocab_size);
        // Pieces the dictionary lacks ("▁ma", "ch") and unknown characters are <unk> (3).
        assert_eq!(got, ids(&e["source"]), "{text:?}");
        let tag = plm.tokenizer.token_id("<en>").unwrap();
        assert_eq!(
            std::iter::once(tag).chain(got).collect::<Vec<_>>(),
            ids(&e["target"]),
            "{text:?}"
        );
    }
    assert!(
        g["encodings"][1]["source"]
            .as_array()
            .unwrap()
            .contains(&3.into())
    );
}

#[test]
fn each_direction_and_both_parts_match_the_released_arithmetic() {
    let plm = load();
    let g = golden();
    for p in g["pairs"].as_array().unwrap() {
        let t = p["temperature"].as_f64().unwrap();
        let (r, h, s) = (
            p["reference"].as_str().unwrap(),
            p["hypothesis"].as_str().unwrap(),
            p["source"].as_str().unwrap(),
        );
        let dirs = block_on(prism::score(&plm, &[(r, h), (h, r), (s, h)], "en", t)).unwrap();
        let what = format!("{h:?} at t={t}");
        close(&dirs[0].logprob, &floats(&p["hyp_given_ref"])[1..], &what);
        close(&dirs[1].logprob, &floats(&p["ref_given_hyp"])[1..], &what);
        close(&dirs[2].logprob, &floats(&p["hyp_given_src"])[1..], &what);
        assert_eq!(dirs[0].tokens.len(), dirs[0].logprob.len());
        // Through the engine: PRISM-ref and PRISM-QE as columns.
        let engine = Engine::new(One(Rc::new(load())));
        let refs = [r];
        let segments = [Segment {
            hyp: h,
            refs: &refs,
            src: Some(s),
        }];
        let specs: Vec<MetricSpec> = [PrismPart::Ref, PrismPart::Qe]
            .map(|part| {
                MetricSpec::Prism(PrismOptions {
                    part,
                    temperature: t,
                    ..PrismOptions::default()
                })
            })
            .to_vec();
        let columns: Vec<Column> = block_on(engine.score(&specs, &segments)).unwrap();
        let value = |c: &Column| c.scores[0].value;
        close(
            &[value(&columns[0]), value(&columns[1])],
            &[
                p["prism_ref"].as_f64().unwrap(),
                p["prism_src"].as_f64().unwrap(),
            ],
            &what,
        );
        let sig = columns[0].signature.to_string();
        assert!(sig.contains("lang:en"), "{sig}");
    }
}

#[test]
fn a_prepared_file_scores_as_the_folder_does() {
    let folder = load();
    let bytes =
        blindspot::models::weights::prepare(ModelFiles::from_path(&dir()).unwrap(), Precision::F32)
            .unwrap();
    let prepared = Plm::load(
        "tiny-prism.bpk",
        ModelFiles::from_burnpack(bytes).unwrap(),
        &Device::flex(),
        Precision::F32,
    )
    .unwrap();
    let pairs = [("The cat sat on the mat.", "A cat was sitting on the mat.")];
    let a = block_on(prism::score(&folder, &pairs, "en", 1.0)).unwrap();
    let b = block_on(prism::score(&prepared, &pairs, "en", 1.0)).unwrap();
    assert_eq!(a[0].score, b[0].score);
}

#[test]
fn what_a_user_gets_wrong_is_named() {
    let plm = load();
    let err = |pairs: &[(&str, &str)], lang: &str, t: f64| {
        block_on(prism::score(&plm, pairs, lang, t))
            .unwrap_err()
            .to_string()
    };
    let e = err(&[("a", "b")], "xx", 1.0);
    assert!(
        e.contains("<xx>") && e.contains("(it has: de, en, fr)"),
        "{e}"
    );
    let e = err(&[("a", "b")], "en", 0.0);
    assert!(e.contains("temperature"), "{e}");
    let e = err(&[("the <en> tag", "b")], "en", 1.0);
    assert!(e.contains("\"<en>\""), "{e}");
    // One that becomes the tag only once normalised (NFKC's full-width signs).
    let e = err(&[("the ＜en＞ tag", "b")], "en", 1.0);
    assert!(e.contains("\"<en>\""), "{e}");
    // A fairseq folder without head counts, at a width that is not m39v1's.
    let tmp = std::env::temp_dir().join(format!("prism-heads-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    for f in ["checkpoint.pt", "spm.model", "dict.src.txt", "dict.tgt.txt"] {
        std::fs::copy(dir().join(f), tmp.join(f)).unwrap();
    }
    let e = ModelFiles::from_path(&tmp).err().unwrap().to_string();
    assert!(e.contains("encoder_attention_heads"), "{e}");
    std::fs::write(tmp.join("dict.src.txt"), "other 1\n").unwrap();
    std::fs::write(
        tmp.join("config.json"),
        r#"{"encoder_attention_heads": 4, "decoder_attention_heads": 4}"#,
    )
    .unwrap();
    let e = ModelFiles::from_path(&tmp).err().unwrap().to_string();
    assert!(e.contains("differ"), "{e}");
    std::fs::remove_dir_all(&tmp).unwrap();
}

#[test]
fn the_cli_scores_prism_from_the_released_folder_layout() {
    let g = golden();
    let pairs: Vec<&Value> = g["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["temperature"].as_f64() == Some(1.0))
        .collect();
    let tmp = std::env::temp_dir().join(format!("prism-cli-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let write = |name: &str, key: &str| {
        let path = tmp.join(name);
        let lines: Vec<&str> = pairs.iter().map(|p| p[key].as_str().unwrap()).collect();
        std::fs::write(&path, lines.join("\n") + "\n").unwrap();
        path.to_string_lossy().into_owned()
    };
    let (h, r, s) = (
        write("hyp.txt", "hypothesis"),
        write("ref.txt", "reference"),
        write("src.txt", "source"),
    );
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_blindspot"))
        .args([
            "score", "--hyps", &h, "--refs", &r, "--srcs", &s, "--format", "jsonl",
        ])
        .args(["--metrics", "prism-ref,prism-qe"])
        .args(["--model", &format!("prism={}", dir().display())])
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
    for (line, p) in lines.iter().zip(&pairs) {
        close(
            &[
                line["prism-ref"].as_f64().unwrap(),
                line["prism-qe"].as_f64().unwrap(),
            ],
            &[
                p["prism_ref"].as_f64().unwrap(),
                p["prism_src"].as_f64().unwrap(),
            ],
            "CLI",
        );
    }
    std::fs::remove_dir_all(&tmp).unwrap();
}

#[test]
fn the_hub_ports_layout_reads_as_the_released_folder() {
    let hub = dir().with_file_name("hub");
    let plm = Plm::load(
        "tiny-prism-hub",
        ModelFiles::from_path(&hub).unwrap(),
        &Device::flex(),
        Precision::F32,
    )
    .unwrap();
    let g = golden();
    let p = &g["pairs"][2];
    let (r, h) = (
        p["reference"].as_str().unwrap(),
        p["hypothesis"].as_str().unwrap(),
    );
    let dirs = block_on(prism::score(&plm, &[(r, h)], "en", 1.0)).unwrap();
    close(
        &dirs[0].logprob,
        &floats(&p["hyp_given_ref"])[1..],
        "hub layout",
    );
}
