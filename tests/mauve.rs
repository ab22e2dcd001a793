//! MAUVE against mauve-text 0.4.0 on the same feature matrices (golden
//! values from scripts/mauve_golden.py), and the featurisation against
//! transformers.

use std::path::PathBuf;

use blindspot::metrics::mauve::{self, Options};
use blindspot::models::{ModelFiles, Plm, Precision};
use burn::tensor::Device;
use ndarray::Array2;
use serde_json::Value;

/// The bar: k-means initialisation differs (faiss draws random
/// points, linfa uses k-means++), so the means over ten seeds are compared.
const TOLERANCE: f64 = 0.02;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The bundled all-MiniLM-L6-v2 on the CPU, fp32.
fn minilm() -> Plm {
    let dir = root().join("models/all-MiniLM-L6-v2");
    Plm::load(
        "minilm",
        ModelFiles::from_path(&dir).unwrap(),
        &Device::flex(),
        Precision::F32,
    )
    .unwrap()
}

fn feature_sets() -> std::collections::HashMap<String, Array2<f32>> {
    let bytes = std::fs::read(root().join("tests/golden/mauve_features.safetensors")).unwrap();
    let tensors = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    tensors
        .tensors()
        .into_iter()
        .map(|(name, view)| {
            let values: Vec<f32> = view
                .data()
                .chunks_exact(2)
                .map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32())
                .collect();
            let shape = (view.shape()[0], view.shape()[1]);
            (name, Array2::from_shape_vec(shape, values).unwrap())
        })
        .collect()
}

fn golden() -> Value {
    serde_json::from_str(&std::fs::read_to_string(root().join("tests/golden/mauve.json")).unwrap())
        .unwrap()
}

#[test]
fn mauve_matches_mauve_text_on_the_same_features() {
    let sets = feature_sets();
    let g = golden();
    for case in g["cases"].as_array().unwrap() {
        let n = case["n"].as_u64().unwrap() as usize;
        let p = sets[case["p"].as_str().unwrap()]
            .slice(ndarray::s![..n, ..])
            .to_owned();
        let q = sets[case["q"].as_str().unwrap()]
            .slice(ndarray::s![..n, ..])
            .to_owned();
        let seeds = [25u64, 1, 2, 3, 4, 5, 6, 7, 8, 9];
        let runs: Vec<_> = seeds
            .iter()
            .map(|&seed| {
                mauve::compute(
                    &p,
                    &q,
                    &Options {
                        seed,
                        ..Options::default()
                    },
                )
                .unwrap()
            })
            .collect();
        assert_eq!(
            runs[0].clusters as u64,
            case["num_buckets"].as_u64().unwrap()
        );
        let ours = runs.iter().map(|r| r.mauve).sum::<f64>() / runs.len() as f64;
        let theirs = case["mauve_mean"].as_f64().unwrap();
        let spread: Vec<f64> = case["mauve_by_seed"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        eprintln!(
            "MAUVE {} vs {} (n={n}): ours {ours:.4}, mauve-text {theirs:.4} (its seeds span {:.4}..{:.4}), {} PCA dims",
            case["p"],
            case["q"],
            spread.iter().copied().fold(f64::INFINITY, f64::min),
            spread.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            runs[0].dimensions
        );
        assert!(
            (ours - theirs).abs() <= TOLERANCE,
            "MAUVE {ours} vs {theirs}"
        );
        let fi = runs.iter().map(|r| r.frontier_integral).sum::<f64>() / runs.len() as f64;
        let fi_theirs = case["frontier_integral_mean"].as_f64().unwrap();
        assert!(
            (fi - fi_theirs).abs() <= TOLERANCE,
            "frontier {fi} vs {fi_theirs}"
        );
        // The same seed gives the same value.
        let again = mauve::compute(&p, &q, &Options::default()).unwrap();
        assert_eq!(again, runs[0]);
    }
}

#[test]
fn featurisation_is_the_last_tokens_final_state() {
    let plm = minilm();
    let text = std::fs::read_to_string(root().join("tests/data/wikitext_a.txt")).unwrap();
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .take(6)
        .map(str::trim)
        .collect();
    let ours = futures::executor::block_on(mauve::features(&plm, &lines)).unwrap();
    let theirs = &feature_sets()["a"];
    for i in 0..lines.len() {
        for (a, b) in ours.row(i).iter().zip(theirs.row(i)) {
            // The golden features are stored f16.
            assert!(
                (a - b).abs() <= 2e-3 * b.abs().max(1.0),
                "row {i}: {a} vs {b}"
            );
        }
    }
}

#[test]
fn featurising_reports_progress_and_can_be_stopped() {
    let plm = minilm();
    let text = std::fs::read_to_string(root().join("tests/data/wikitext_a.txt")).unwrap();
    let lines: Vec<String> = text
        .lines()
        .map(|l| l.split(". ").next().unwrap_or("").trim().to_owned())
        .filter(|l| !l.is_empty())
        .take(40)
        .collect();
    let (hyps, refs) = lines.split_at(20);
    let calls = std::cell::RefCell::new(Vec::new());
    let run = |stop_after: usize| {
        calls.borrow_mut().clear();
        futures::executor::block_on(mauve::score_texts(
            &plm,
            hyps,
            refs,
            &Options::default(),
            async |done, total| {
                calls.borrow_mut().push((done, total));
                done < stop_after
            },
        ))
    };
    let whole = run(usize::MAX).unwrap();
    let seen = calls.borrow().clone();
    // One call per model pass, texts counted over both sets, ending at all of them.
    assert!(seen.len() >= 2, "{seen:?}");
    assert!(seen.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 == 40));
    assert_eq!(seen.last(), Some(&(40, 40)));
    assert!(
        seen.iter().any(|&(done, _)| done == 20),
        "P then Q: {seen:?}"
    );
    assert!(whole.result.mauve > 0.0);
    // What `blindspot mauve --json` writes, and the page keeps, reads back
    // as it was; a damaged copy is refused.
    let json = serde_json::to_string(&whole).unwrap();
    let record = mauve::MauveRecord::from_json(&json).unwrap();
    assert_eq!(record.result, whole.result);
    assert_eq!(record.signature, whole.signature.to_string());
    assert_eq!((record.hypotheses, record.references), (20, 20));
    assert_eq!(serde_json::to_string(&record).unwrap(), json);
    let refused = |edit: &dyn Fn(&mut mauve::MauveRecord)| {
        let mut damaged = record.clone();
        edit(&mut damaged);
        mauve::MauveRecord::from_json(&serde_json::to_string(&damaged).unwrap())
            .unwrap_err()
            .to_string()
    };
    assert!(refused(&|r| r.result.mauve = 1.5).contains("out of range"));
    assert!(refused(&|r| r.result.curve[1].0 = -0.1).contains("unit square"));
    assert!(refused(&|r| r.result.curve.clear()).contains("unit square"));
    assert!(
        refused(&|r| {
            r.result.p_hist.pop();
        })
        .contains("a bin per cluster")
    );
    assert!(refused(&|r| r.result.q_hist[0] += 0.5).contains("not distributions"));
    assert!(refused(&|r| r.result.frontier_integral = 1.5).contains("out of range"));
    assert!(refused(&|r| r.signature = "bleu|v:0".into()).contains("not MAUVE's"));
    assert!(refused(&|r| r.references = 1).contains("too few"));
    assert!(
        mauve::MauveRecord::from_json("{\"result\": 1}")
            .unwrap_err()
            .to_string()
            .starts_with("not a valid MAUVE result")
    );
    // Stopped after the first pass: an error, not a score of part of the texts.
    let first = seen[0].0;
    assert!(matches!(run(first), Err(mauve::MauveError::Stopped)));
    assert_eq!(calls.borrow().len(), 1);
}
