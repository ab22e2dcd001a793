//! BERTScore against bert-score 0.3.13 (tests/golden/bertscore.json from
//! scripts/bertscore_golden.py): all-MiniLM-L6-v2, 300 WMT21 pairs, layers 6
//! and 3, idf off and on, one and two references; and the int8 deviation.

use crate::common;

use blindspot::metrics::bertscore::{self, TokenEmbeddings, Weights};
use blindspot::models::{ModelFiles, Plm, Precision};
use burn::tensor::Device;

/// fp32 against bert_score (the bar).
const TOLERANCE: f64 = 1e-5;

fn model(precision: Precision) -> Plm {
    model_with(precision, false)
}

/// With `integer`, an int8 model's projections are integer products (what
/// the browser runs; natively the same kernel through SSE2).
fn model_with(precision: Precision, integer: bool) -> Plm {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/models/all-MiniLM-L6-v2");
    Plm::load_with(
        "all-MiniLM-L6-v2",
        ModelFiles::from_path(dir.as_ref()).unwrap(),
        &Device::flex(),
        precision,
        integer,
    )
    .unwrap()
}

fn embed(plm: &Plm, texts: &[String], layer: usize) -> Vec<TokenEmbeddings> {
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    futures::executor::block_on(bertscore::embed(plm, &refs, layer)).unwrap()
}

/// The texts at `path` of the data rows a golden file names by (1-based) line.
fn golden_texts(rows: &[serde_json::Value], lines: &serde_json::Value, path: &str) -> Vec<String> {
    lines
        .as_array()
        .unwrap()
        .iter()
        .map(|l| common::field(&rows[l.as_u64().unwrap() as usize - 1], path))
        .collect()
}

#[test]
fn matches_bert_score_on_300_wmt21_pairs() {
    let golden = common::golden("bertscore.json");
    let rows = common::rows(golden["file"].as_str().unwrap());
    let system = golden["system"].as_str().unwrap();
    let hyps = golden_texts(&rows, &golden["lines"], &format!("systems/{system}"));
    assert!(hyps.len() >= 300);
    let ref_a = golden_texts(&rows, &golden["lines"], "ref_a");
    let ref_b = golden_texts(&rows, &golden["lines"], "ref_b");
    let f32_model = model(Precision::F32);
    let int8_model = model(Precision::Int8);
    let integer_model = model_with(Precision::Int8, true);
    let q4_model = model(Precision::Q4);
    // All 36 projections (6 layers of query, key, value, attention output,
    // intermediate, output) run as integer products.
    assert_eq!(integer_model.packed.integers(), 36);
    assert_eq!(integer_model.precision_label(), "int8-i16");
    assert_eq!(int8_model.packed.integers(), 0);
    // Natively the others' 36 run from rten-gemm's panels.
    assert_eq!(int8_model.packed.len(), 36);
    assert_eq!(f32_model.packed.len(), 36);
    for layer in [6usize, 3] {
        let (h, a, b) = (
            embed(&f32_model, &hyps, layer),
            embed(&f32_model, &ref_a, layer),
            embed(&f32_model, &ref_b, layer),
        );
        for run in golden["runs"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["layer"] == layer)
        {
            let multi = run["refs"] == "ref_a+ref_b";
            let idf = run["idf"].as_bool().unwrap();
            let all_refs: Vec<&[u32]> = a
                .iter()
                .chain(if multi { b.iter() } else { [].iter() })
                .map(|e| e.ids.as_slice())
                .collect();
            let weights = if idf {
                Weights::idf(&f32_model, &all_refs)
            } else {
                Weights::uniform(&f32_model)
            };
            let mut worst = 0f64;
            for i in 0..hyps.len() {
                let refs: Vec<TokenEmbeddings> = if multi {
                    vec![a[i].clone(), b[i].clone()]
                } else {
                    vec![a[i].clone()]
                };
                let s = bertscore::score(&h[i], &refs, &weights);
                for (k, v) in [("P", s.p), ("R", s.r), ("F", s.f)] {
                    worst = worst.max((v - run[k][i].as_f64().unwrap()).abs());
                }
            }
            eprintln!(
                "layer {layer} idf {idf} multi {multi}: max |diff| vs bert_score {worst:.2e}"
            );
            assert!(
                worst <= TOLERANCE,
                "layer {layer} idf {idf} multi {multi}: {worst}"
            );
        }
        // int8: how far F moves (reported in the README; the target is 0.005).
        let (hq, aq) = (
            embed(&int8_model, &hyps, layer),
            embed(&int8_model, &ref_a, layer),
        );
        let (hi, ai) = (
            embed(&integer_model, &hyps, layer),
            embed(&integer_model, &ref_a, layer),
        );
        let w = Weights::uniform(&f32_model);
        let f = |h: &[TokenEmbeddings], a: &[TokenEmbeddings], i: usize| {
            bertscore::score(&h[i], &[a[i].clone()], &w).f
        };
        let worst = |x: &dyn Fn(usize) -> f64, y: &dyn Fn(usize) -> f64| {
            (0..hyps.len())
                .map(|i| (x(i) - y(i)).abs())
                .fold(0f64, f64::max)
        };
        let fp32 = |i| f(&h, &a, i);
        let int8 = |i| f(&hq, &aq, i);
        let integer = |i| f(&hi, &ai, i);
        let dev = worst(&fp32, &int8);
        let dev_integer = worst(&fp32, &integer);
        let integer_vs_int8 = worst(&int8, &integer);
        eprintln!(
            "layer {layer}: F max |diff| vs fp32: int8 {dev:.4}, int8 with integer products \
             {dev_integer:.4} ({integer_vs_int8:.4} from int8's)"
        );
        assert!(dev <= 0.005, "int8 moves F by {dev}");
        assert!(
            dev_integer <= 0.005,
            "integer products move F by {dev_integer}"
        );
        assert!(
            integer_vs_int8 <= 0.0012,
            "integer products move int8's F by {integer_vs_int8}"
        );
        // q4: the same projections at 4-bit levels move F farther (measured:
        // 0.025 at layer 6, 0.012 at layer 3; int8 0.002 and 0.0006).
        let (h4, a4) = (
            embed(&q4_model, &hyps, layer),
            embed(&q4_model, &ref_a, layer),
        );
        let q4 = |i| f(&h4, &a4, i);
        let dev_q4 = worst(&fp32, &q4);
        eprintln!("layer {layer}: F max |diff| vs fp32: q4 {dev_q4:.4}");
        assert!(dev_q4 > dev && dev_q4 <= 0.03, "q4 moves F by {dev_q4}");
    }
}

#[test]
fn identical_texts_score_one_and_alignment_points_home() {
    let plm = model(Precision::F32);
    let e = embed(
        &plm,
        &[
            "The cat sat on the mat.".into(),
            "A dog ran in the park.".into(),
        ],
        6,
    );
    let w = Weights::uniform(&plm);
    let same = bertscore::score_pair(&e[0], &e[0], &w);
    assert!((same.f - 1.0).abs() < 1e-6, "{}", same.f);
    assert_eq!(same.hyp_best, (0..e[0].ids.len()).collect::<Vec<_>>());
    let other = bertscore::score(&e[0], &[e[1].clone()], &w);
    assert!(other.f < 0.9);
    // [CLS]/[SEP] weigh 0, words 1; idf over one reference gives ln 2 to its words.
    assert_eq!(w.of(101), 0.0);
    assert_eq!(w.of(4937), 1.0);
    let idf = Weights::idf(&plm, &[&e[1].ids]);
    assert!(idf.is_idf() && (idf.of(e[1].ids[1]) - (2f32 / 2.0).ln()).abs() < 1e-6);
    assert!(
        (idf.of(4937) - 2f32.ln()).abs() < 1e-6,
        "unseen token: ln(M+1)"
    );
    let e = futures::executor::block_on(bertscore::embed(&plm, &["x"], 9)).unwrap_err();
    assert!(e.to_string().contains("layer 9 does not exist"));
}

/// Blindspot's MiniLM baseline (scripts/bertscore_baseline.py): models.toml
/// carries the computed numbers, and rescaling with it equals bert_score's
/// own rescaling given the same baseline file, layers 6 and 3.
#[test]
fn minilm_baseline_matches_its_computation_and_bert_score_rescaling() {
    let golden = common::golden("bertscore_baseline.json");
    let model_id = golden["model"].as_str().unwrap();
    for entry in golden["layers"].as_array().unwrap() {
        let layer = entry["layer"].as_u64().unwrap() as usize;
        let known = bertscore::baseline_for(model_id, layer).unwrap();
        assert_eq!(known.by, "blindspot");
        for k in 0..3 {
            assert_eq!(
                known.prf[k],
                entry["prf"][k].as_f64().unwrap(),
                "layer {layer}"
            );
        }
    }
    let rescaled_by = |model: &str, layer: usize| {
        let baseline = bertscore::baseline_for(model, layer).unwrap();
        bertscore::signature(model, layer, false, Some(&baseline), "f32")
            .get("rescale")
            .map(str::to_owned)
    };
    assert_eq!(
        rescaled_by("all-MiniLM-L6-v2", 6).as_deref(),
        Some("blindspot")
    );
    assert_eq!(
        rescaled_by("roberta-large", 17).as_deref(),
        Some("bert_score")
    );
    assert!(
        bertscore::baseline_for("roberta-large", 16)
            .unwrap_err()
            .to_string()
            .contains("baselines are for layer 17, not 16")
    );
    let parity = &golden["parity"];
    let rows = common::rows(golden["file"].as_str().unwrap());
    let system = parity["system"].as_str().unwrap();
    let hyps = golden_texts(&rows, &parity["lines"], &format!("systems/{system}"));
    let refs = golden_texts(&rows, &parity["lines"], "ref_a");
    let plm = model(Precision::F32);
    let weights = Weights::uniform(&plm);
    for run in parity["runs"].as_array().unwrap() {
        let layer = run["layer"].as_u64().unwrap() as usize;
        let baseline = bertscore::baseline_for(model_id, layer).unwrap();
        let (h, r) = (embed(&plm, &hyps, layer), embed(&plm, &refs, layer));
        let mut worst = 0f64;
        for i in 0..hyps.len() {
            let s = bertscore::rescale(
                bertscore::score(&h[i], &[r[i].clone()], &weights),
                baseline.prf,
            );
            for (k, v) in [("P", s.p), ("R", s.r), ("F", s.f)] {
                worst = worst.max((v - run[k][i].as_f64().unwrap()).abs());
            }
        }
        eprintln!("layer {layer}: rescaled, max |diff| vs bert_score {worst:.2e}");
        assert!(worst <= TOLERANCE, "layer {layer}: {worst}");
    }
}
