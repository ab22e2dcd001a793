//! GPT-PPL, MLM pseudo-perplexity and MENLI's NLI scores against
//! transformers on the random checkpoints (golden values from
//! scripts/plm_metrics_golden.py).

use std::path::PathBuf;

use crate::common;

use blindspot::metrics::menli::{self, Direction, Formula, Premise, Setup};
use blindspot::metrics::perplexity;
use blindspot::models::Plm;
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
    common::cpu_model(name, &root().join("tests/fixtures/plm").join(name))
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

/// A checkpoint folder under `tests/fixtures` (its own tokenizer).
fn folder(path: &str) -> Plm {
    common::cpu_model(path, &root().join("tests/fixtures").join(path))
}

/// Runs `scores` on `plm` as the CPU does (no padding) and as a GPU does
/// (passes padded to multiples of 16 tokens), checks the padding happened,
/// and returns the largest difference.
fn padded_deviation(mut plm: Plm, scores: impl Fn(&Plm) -> Vec<f64>) -> f64 {
    assert_eq!(plm.length_step, 1, "the CPU pads nothing");
    let exact = scores(&plm);
    plm.length_step = blindspot::models::GPU_LENGTH_STEP;
    let out = plm
        .forward(&[vec![plm.config.pad_token_id.max(1); 5]])
        .unwrap();
    assert_eq!(out.hidden_states[0].dims()[1], 16, "{}", plm.name);
    let padded = scores(&plm);
    assert!(exact.len() > 3 && exact.iter().all(|v| v.is_finite()));
    common::max_deviation(&exact, &padded)
}

/// A GPU pass is padded to a multiple of [`GPU_LENGTH_STEP`] tokens so that
/// few shapes are compiled: every metric must read the same numbers from a
/// padded pass (only float32 rounding of the masked positions may differ).
#[test]
fn padded_passes_give_every_model_metric_the_same_numbers() {
    use blindspot::inject::masked_lm::PlmMaskedLm;
    use blindspot::metrics::{bartscore, bertscore, bleurt, comet, mauve, moverscore};
    const PADDED: f64 = 1e-5;
    let texts = [
        "The cat sat.",
        "A considerably longer sentence, with a clause or two, about the weather in spring.",
        "Hello",
        "Twelve tokens or so would be about right here.",
    ];
    let pairs: Vec<(&str, &str)> = texts
        .iter()
        .zip(texts.iter().rev())
        .map(|(a, b)| (*a, *b))
        .collect();
    let gpt2 = |plm: &Plm| {
        let ppl = block_on(perplexity::causal(plm, &texts, true)).unwrap();
        let mut v: Vec<f64> = ppl
            .iter()
            .flat_map(|p| p.surprisal.iter().flatten().copied())
            .collect();
        v.extend(
            block_on(mauve::features(plm, &texts))
                .unwrap()
                .iter()
                .map(|&x| f64::from(x)),
        );
        v
    };
    let mlm = |plm: &Plm| {
        let ppl = block_on(perplexity::pseudo(plm, &texts)).unwrap();
        let mut v: Vec<f64> = ppl
            .iter()
            .flat_map(|p| p.surprisal.iter().flatten().copied())
            .collect();
        let embedded = block_on(bertscore::embed(plm, &texts, 2)).unwrap();
        v.extend(
            embedded
                .iter()
                .flat_map(|e| e.rows.iter().map(|&x| f64::from(x))),
        );
        let queries: Vec<(Vec<&str>, usize)> =
            texts.iter().map(|t| (t.split(' ').collect(), 0)).collect();
        let top = block_on(PlmMaskedLm::new(plm).unwrap().top_k_batch(&queries, 3)).unwrap();
        v.extend(top.iter().flatten().map(|(_, p)| f64::from(*p)));
        v
    };
    let nli = |plm: &Plm| {
        let probs = block_on(menli::probabilities(plm, &pairs)).unwrap();
        probs.iter().flat_map(|p| [p.e, p.n, p.c]).collect()
    };
    let bleurt_scores = |plm: &Plm| {
        block_on(bleurt::score(plm, &pairs))
            .unwrap()
            .iter()
            .map(|s| s.value)
            .collect()
    };
    let bart = |plm: &Plm| {
        let scored = block_on(bartscore::score(plm, &pairs)).unwrap();
        scored
            .iter()
            .flat_map(|s| s.logprob.iter().copied())
            .collect()
    };
    let comet_scores = |plm: &Plm| {
        let inputs: Vec<comet::CometInput> = pairs
            .iter()
            .map(|(a, b)| comet::CometInput {
                mt: a,
                reference: Some(b),
                src: b,
            })
            .collect();
        block_on(comet::score(plm, &inputs, None))
            .unwrap()
            .iter()
            .map(|s| s.value)
            .collect()
    };
    let pairs = &pairs;
    let mover = |version| {
        move |plm: &Plm| {
            let scored = block_on(moverscore::score(plm, pairs, version, None, &[], None)).unwrap();
            scored.iter().map(|s| s.value).collect::<Vec<f64>>()
        }
    };
    let checks = [
        (
            "gpt2: GPT-PPL, MAUVE",
            padded_deviation(fixture("gpt2"), gpt2),
        ),
        (
            "bert_mlm: MLM-PPL, BERTScore, masked-LM",
            padded_deviation(fixture("bert_mlm"), mlm),
        ),
        (
            "roberta_cls: MENLI",
            padded_deviation(fixture("roberta_cls"), nli),
        ),
        (
            "BLEURT",
            padded_deviation(folder("bleurt/tiny"), bleurt_scores),
        ),
        ("BARTScore", padded_deviation(folder("bart/tiny"), bart)),
        (
            "COMET",
            padded_deviation(folder("comet/cometinho"), comet_scores),
        ),
        (
            "MoverScore v2",
            padded_deviation(folder("moverscore/tiny"), mover(moverscore::Version::V2)),
        ),
        (
            "MoverScore v1",
            padded_deviation(
                folder("moverscore/tiny-bert-mnli"),
                mover(moverscore::Version::V1 { ngram: 1 }),
            ),
        ),
    ];
    for (what, dev) in checks {
        assert!(dev <= PADDED, "{what}: padding moved a number by {dev:e}");
    }
}

/// A pass's token budget counts the positions it computes, padding included:
/// ten 2-token texts padded to 16 fit four to a 64-position pass.
#[test]
fn token_budgets_count_the_padding() {
    use blindspot::models::PassLimit;
    let mut plm = fixture("gpt2");
    let items = vec![2usize; 10];
    let sizes = |plm: &Plm| -> Vec<usize> {
        let passes = plm.passes(&items, |&n| n, PassLimit::Tokens(64));
        passes.iter().map(|p| p.len()).collect()
    };
    assert_eq!(sizes(&plm), [10]);
    plm.length_step = blindspot::models::GPU_LENGTH_STEP;
    assert_eq!(sizes(&plm), [4, 4, 2]);
}
