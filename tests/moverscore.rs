//! MoverScore against moverscore_v2's `word_mover_score` steps (run by
//! scripts/moverscore_parity.py on a tiny random DistilBERT with pyemd):
//! 45 pairs with and without idf, through the engine and the CLI; the exact
//! EMD against pyemd; the transport plan; the inputs it refuses.

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::rc::Rc;

use blindspot::metrics::engine::{Detail, Engine, EngineError, ModelStore};
use blindspot::metrics::moverscore::emd;
use blindspot::metrics::{Column, MetricSpec, ModelSlot, Segment};
use blindspot::models::{ModelFiles, Plm, Precision};
use burn::tensor::Device;
use futures::executor::block_on;
use serde_json::Value;

/// The bar.
const TOLERANCE: f64 = 1e-5;

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/moverscore/tiny")
}

fn load() -> Plm {
    let files = ModelFiles::from_path(&fixture()).unwrap();
    Plm::load("tiny-distilbert", files, &Device::flex(), Precision::F32).unwrap()
}

fn spec(idf: bool) -> MetricSpec {
    MetricSpec::MoverScore { model: None, idf }
}

struct One(Rc<Plm>);

impl ModelStore for One {
    fn model(&self, _: ModelSlot, _: Option<&str>) -> Result<Rc<Plm>, EngineError> {
        Ok(self.0.clone())
    }
}

/// `(reference, hypothesis)` of each golden pair, rebuilt from ../shared/data.
fn pairs(g: &Value) -> Vec<(String, String)> {
    g["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let rows = common::rows(p["file"].as_str().unwrap());
            let row = &rows[p["line"].as_u64().unwrap() as usize - 1];
            let get = |key: &str| {
                let path = p[key].as_str().unwrap();
                match &row[path] {
                    Value::Array(items) => items[0].as_str().unwrap().to_owned(),
                    _ => common::field(row, path),
                }
            };
            (get("ref"), get("hyp"))
        })
        .collect()
}

fn column(engine: &Engine, pairs: &[(String, String)], idf: bool) -> Result<Column, EngineError> {
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
    Ok(block_on(engine.score(&[spec(idf)], &segments))?.remove(0))
}

fn golden(g: &Value, key: &str) -> Vec<f64> {
    g["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p[key].as_f64().unwrap())
        .collect()
}

fn max_deviation(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max)
}

fn floats(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .flat_map(|x| match x {
            Value::Array(_) => floats(x),
            _ => vec![x.as_f64().unwrap()],
        })
        .collect()
}

#[test]
fn emd_equals_pyemd() {
    let g = common::golden("moverscore.json");
    for case in g["emd"].as_array().unwrap() {
        let (a, b, cost) = (
            floats(&case["a"]),
            floats(&case["b"]),
            floats(&case["cost"]),
        );
        let t = emd(&a, &b, &cost).unwrap();
        let want = case["emd"].as_f64().unwrap();
        assert!((t.cost - want).abs() < 1e-9, "{} vs {want}", t.cost);
        // The plan moves exactly the masses.
        let m = b.len();
        for (i, &ai) in a.iter().enumerate() {
            let row: f64 = t.flow[i * m..(i + 1) * m].iter().sum();
            assert!((row - ai).abs() < 1e-9);
        }
        for (j, &bj) in b.iter().enumerate() {
            let col: f64 = (0..a.len()).map(|i| t.flow[i * m + j]).sum();
            assert!((col - bj).abs() < 1e-9);
        }
    }
}

#[test]
fn scores_match_moverscore_v2_with_and_without_idf() {
    let g = common::golden("moverscore.json");
    let pairs = pairs(&g);
    assert_eq!(pairs.len(), 45);
    let engine = Engine::new(One(Rc::new(load()))).with_details();
    for (idf, key) in [(true, "idf"), (false, "uniform")] {
        let col = column(&engine, &pairs, idf).unwrap();
        // The released steps with float64 distances: exact agreement.
        let dev = max_deviation(&col.values(), &golden(&g, &format!("{key}_f64")));
        println!("moverscore {key}: max deviation {dev:.2e} from the float64 distances");
        assert!(dev <= TOLERANCE, "{key}: {dev:e}");
        // The released code's float32 |x|² + |y|² − 2xy cancels for close
        // tokens: its own numbers move by about 1e-4 with float64 distances.
        let released = max_deviation(&col.values(), &golden(&g, key));
        println!(
            "moverscore {key}: max deviation {released:.2e} from the released float32 arithmetic"
        );
        assert!(released <= 5e-4, "{key}: {released:e}");
        let sig = col.signature.to_string();
        assert!(
            sig.starts_with(&format!(
                "moverscore|model:tiny-distilbert|layer:last|idf:{}|removed:subwords+punct|ngram:1|conventions:moverscore-v2-1.0.3",
                if idf { "yes" } else { "no" }
            )),
            "{sig}"
        );
        // The plan: masses sum to 1 per side, subword pieces weigh nothing, the flow moves them.
        let Detail::Flow {
            ref_tokens,
            ref_mass,
            hyp_mass,
            flow,
            ..
        } = &col.details[3]
        else {
            panic!("MoverScore details are its transport plan");
        };
        assert!((ref_mass.iter().sum::<f64>() - 1.0).abs() < 1e-9);
        assert!((flow.iter().sum::<f64>() - 1.0).abs() < 1e-9);
        assert_eq!(flow.len(), ref_mass.len() * hyp_mass.len());
        for (t, m) in ref_tokens.iter().zip(ref_mass) {
            if t.starts_with("##") {
                assert_eq!(*m, 0.0, "{t}");
            }
        }
    }
    // Texts past the 64 positions were cut and flagged.
    let col = column(&engine, &pairs, false).unwrap();
    let cut = col
        .scores
        .iter()
        .filter(|s| s.parts[0].value == 1.0)
        .count();
    assert!(cut >= 3, "{cut}");
}

#[test]
fn inputs_moverscore_cannot_score_say_why() {
    let engine = Engine::new(One(Rc::new(load())));
    let one = |refs: &[&str], hyp: &str, idf: bool| {
        block_on(engine.score(
            &[spec(idf)],
            &[Segment {
                hyp,
                refs,
                src: None,
            }],
        ))
    };
    let e = one(&[], "a cat", false).unwrap_err().to_string();
    assert!(e.contains("needs at least one reference"), "{e}");
    let e = one(&["a", "b"], "a cat", false).unwrap_err().to_string();
    assert!(e.contains("scores against one"), "{e}");
    // idf over one pair: every token occurs in every text, so weighs 0.
    let e = one(&["the cat sat"], "a cat sat", true)
        .unwrap_err()
        .to_string();
    assert!(e.contains("idf 0"), "{e}");
    // Without idf, [CLS] and [SEP] always carry weight, as in the released code.
    let v = one(&["the cat sat"], "!?", false).unwrap()[0].values()[0];
    assert!(v.is_finite() && v < 1.0, "{v}");
    let v = one(&["the cat sat"], "the cat sat", false).unwrap()[0].values()[0];
    assert!((v - 1.0).abs() < 1e-6, "a copy moves nothing: {v}");
    // A set where one hypothesis is punctuation only: with idf it has no weight.
    let refs = [["the cat sat"], ["a dog ran"]];
    let segs = [
        Segment {
            hyp: "the cat sat",
            refs: &refs[0],
            src: None,
        },
        Segment {
            hyp: "!",
            refs: &refs[1],
            src: None,
        },
    ];
    let e = block_on(engine.score(&[spec(true)], &segs))
        .unwrap_err()
        .to_string();
    assert!(e.contains("pair 2") && e.contains("hypothesis"), "{e}");
}

#[test]
fn minilm_runs_moverscore_too() {
    let minilm = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("models/all-MiniLM-L6-v2");
    let plm = Plm::load(
        "all-MiniLM-L6-v2",
        ModelFiles::from_path(&minilm).unwrap(),
        &Device::flex(),
        Precision::F32,
    )
    .unwrap();
    let engine = Engine::new(One(Rc::new(plm)));
    let pairs = [
        (
            "The cat sat on the mat.".to_owned(),
            "A cat was sitting on the mat.".to_owned(),
        ),
        (
            "The cat sat on the mat.".to_owned(),
            "Stock prices fell sharply in Tokyo.".to_owned(),
        ),
    ];
    let v = column(&engine, &pairs, false).unwrap().values();
    assert!(
        v[0] > v[1],
        "a paraphrase beats an unrelated sentence: {v:?}"
    );
}

#[test]
fn cli_scores_moverscore_with_idf_over_the_file() {
    let g = common::golden("moverscore.json");
    let pairs = pairs(&g);
    let dir = std::env::temp_dir().join(format!("blindspot-mover-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // JSONL input: SummEval summaries hold newlines.
    let input = dir.join("pairs.jsonl");
    let lines: String = pairs
        .iter()
        .map(|(r, h)| format!("{}\n", serde_json::json!({ "ref": r, "hyp": h })))
        .collect();
    std::fs::write(&input, lines).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_blindspot"))
        .args([
            "score",
            "--input",
            input.to_str().unwrap(),
            "--format",
            "jsonl",
            "--idf",
        ])
        .args(["--metrics", "moverscore"])
        .args(["--model", &format!("moverscore={}", fixture().display())])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|v: &Value| v.get("pair").is_some())
        .collect();
    let want = golden(&g, "idf_f64");
    assert_eq!(rows.len(), want.len());
    for (i, row) in rows.iter().enumerate() {
        let ours = row["moverscore"].as_f64().unwrap();
        assert!(
            (ours - want[i]).abs() <= TOLERANCE,
            "{i}: {ours} vs {}",
            want[i]
        );
    }
    std::fs::remove_dir_all(&dir).ok();
}
