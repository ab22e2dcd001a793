//! Parity with sacrebleu 2.6.0 and rouge-score 0.1.2 on real data.
//!
//! `tests/golden/lexical.json` is written by `scripts/golden_lexical.py`. Each
//! case names a file, line and fields of `tests/data`; this test rebuilds
//! the same pair and compares every value.

use std::collections::HashMap;

use blindspot::metrics::{Bleu, Chrf, Level, Metric, Rouge, RougeKind, Segment};
use blindspot::text::porter;
use serde_json::Value;

use crate::common;
use common::{field, rows};

/// Both references print with 16 significant digits; 1e-6 on the 0-100 and
/// 0-1 scales is the parity bar, far above float noise.
const TOLERANCE: f64 = 1e-6;

fn golden() -> Value {
    common::golden("lexical.json")
}

/// Mirrors `drop_every` in the Python script.
fn drop_every(text: &str, period: usize, offset: usize, chars: bool) -> String {
    if chars {
        text.chars()
            .enumerate()
            .filter(|(i, _)| i % period != offset)
            .map(|(_, c)| c)
            .collect()
    } else {
        let words: Vec<&str> = blindspot::text::python_split(text).collect();
        words
            .iter()
            .enumerate()
            .filter(|(i, _)| i % period != offset)
            .map(|(_, w)| *w)
            .collect::<Vec<_>>()
            .join(" ")
    }
}

fn cases() -> Vec<(String, Vec<String>, Value)> {
    cases_of(&golden())
}

/// The pairs a golden file names (file, line, fields, perturbation) or
/// holds inline, with their expected values: the lexical golden file's
/// layout, which `ter.json` shares.
pub fn cases_of(golden: &Value) -> Vec<(String, Vec<String>, Value)> {
    let mut cache: HashMap<String, Vec<Value>> = HashMap::new();
    golden["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|case| {
            if case.get("inline").is_some() || case.get("hyp_text").is_some() {
                let refs = case["ref_texts"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|r| r.as_str().unwrap().to_string());
                return (
                    case["hyp_text"].as_str().unwrap().to_string(),
                    refs.collect(),
                    case["expected"].clone(),
                );
            }
            let file = case["file"].as_str().unwrap();
            let data = cache.entry(file.to_string()).or_insert_with(|| rows(file));
            let row = &data[case["line"].as_u64().unwrap() as usize];
            let mut hyp = field(row, case["hyp"].as_str().unwrap());
            if let Some(t) = case.get("transform") {
                let n = |k: &str| t[k].as_u64().unwrap() as usize;
                hyp = drop_every(
                    &hyp,
                    n("period"),
                    n("offset"),
                    t["chars"].as_bool().unwrap(),
                );
            }
            let refs = case["refs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| field(row, r.as_str().unwrap()))
                .collect();
            (hyp, refs, case["expected"].clone())
        })
        .collect()
}

fn assert_close(actual: f64, expected: &Value, what: &str) {
    let expected = expected.as_f64().unwrap();
    assert!(
        (actual - expected).abs() <= TOLERANCE,
        "{what}: got {actual}, sacrebleu/rouge-score {expected}"
    );
}

#[test]
fn golden_file_covers_at_least_500_real_pairs() {
    let golden = golden();
    let real = golden["cases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c.get("file").is_some())
        .count();
    assert!(real >= 500, "only {real} real pairs");
}

#[test]
fn sentence_bleu_and_chrf_match_sacrebleu() {
    let (bleu, chrf) = (Bleu::default(), Chrf::default());
    for (i, (hyp, refs, expected)) in cases().iter().enumerate() {
        let refs: Vec<&str> = refs.iter().map(String::as_str).collect();
        let seg = Segment {
            hyp,
            refs: &refs,
            src: None,
        };
        let b = bleu.sentence_score(&seg).unwrap();
        assert_close(
            b.value,
            &expected["bleu"],
            &format!("case {i} BLEU {hyp:?}"),
        );
        for (n, p) in expected["bleu_precisions"]
            .as_array()
            .unwrap()
            .iter()
            .enumerate()
        {
            assert_close(b.parts[n].value, p, &format!("case {i} BLEU p{}", n + 1));
        }
        assert_close(
            b.parts[4].value,
            &expected["bleu_bp"],
            &format!("case {i} BLEU bp"),
        );
        assert_close(
            chrf.sentence_score(&seg).unwrap().value,
            &expected["chrf"],
            &format!("case {i} chrF {hyp:?}"),
        );
    }
}

#[test]
fn rouge_matches_rouge_score_with_and_without_stemmer() {
    for stem in [false, true] {
        for (kind, id) in [
            (RougeKind::N(1), "rouge1"),
            (RougeKind::N(2), "rouge2"),
            (RougeKind::Lcs, "rougeL"),
        ] {
            let rouge = Rouge::new(kind, stem);
            let key = format!("{id}_{}", if stem { "stem" } else { "plain" });
            for (i, (hyp, refs, expected)) in cases().iter().enumerate() {
                let refs: Vec<&str> = refs.iter().map(String::as_str).collect();
                let prf = rouge.score_multi(&refs, hyp);
                let exp = expected[&key].as_array().unwrap();
                assert_close(prf.precision, &exp[0], &format!("case {i} {key} precision"));
                assert_close(prf.recall, &exp[1], &format!("case {i} {key} recall"));
                assert_close(prf.fmeasure, &exp[2], &format!("case {i} {key} fmeasure"));
            }
        }
    }
}

#[test]
fn corpus_bleu_and_chrf_match_sacrebleu() {
    let golden = golden();
    let corpus = &golden["corpus"];
    let end = corpus["case_range"][1].as_u64().unwrap() as usize;
    let all = cases();
    let refs: Vec<Vec<&str>> = all[..end]
        .iter()
        .map(|(_, r, _)| r.iter().map(String::as_str).collect())
        .collect();
    let segments: Vec<Segment> = all[..end]
        .iter()
        .zip(&refs)
        .map(|((h, _, _), r)| Segment {
            hyp: h,
            refs: r,
            src: None,
        })
        .collect();
    let bleu = Bleu::default().corpus_score(&segments).unwrap();
    assert_close(bleu.value, &corpus["bleu"], "corpus BLEU");
    let chrf = Chrf::default().corpus_score(&segments).unwrap();
    assert_close(chrf.value, &corpus["chrf"], "corpus chrF");
    // Our signatures carry sacrebleu's fields in sacrebleu's order.
    let ours = |sig: &str| {
        sig.split('|')
            .skip(1)
            .take_while(|f| !f.starts_with("ref:"))
            .collect::<Vec<_>>()
            .join("|")
    };
    let theirs = |sig: &Value| {
        sig.as_str()
            .unwrap()
            .rsplit_once("|version")
            .unwrap()
            .0
            .to_string()
    };
    assert_eq!(ours(&bleu.signature), theirs(&corpus["bleu_signature"]));
    assert_eq!(ours(&chrf.signature), theirs(&corpus["chrf_signature"]));
    assert_eq!(
        Bleu::default()
            .signature(Level::Sentence, Some(1))
            .to_string()
            .split('|')
            .nth(3),
        Some("eff:yes")
    );
}

#[test]
fn porter_stemmer_matches_nltk_on_every_data_token() {
    let golden = golden();
    let stems = golden["porter_stems"].as_object().unwrap();
    assert!(stems.len() > 1000);
    let wrong: Vec<String> = stems
        .iter()
        .filter(|(w, s)| porter::stem(w) != s.as_str().unwrap())
        .map(|(w, s)| format!("{w}: ours {} nltk {}", porter::stem(w), s))
        .collect();
    assert!(
        wrong.is_empty(),
        "{} mismatches, e.g. {:?}",
        wrong.len(),
        &wrong[..wrong.len().min(10)]
    );
}
