//! TER: parity with sacrebleu 2.6.0 on real data under every option set,
//! corpus TER from summed statistics, its options through the CLI's `--opt`,
//! and its direction (lower is better) in the stress suite and the
//! preference suite.
//!
//! `tests/golden/ter.json` is written by `scripts/golden_ter.py` over the
//! pairs of `lexical.json` and hand-written shifts, CJK text and entities.

use std::process::Command;

use blindspot::data::MenliCase;
use blindspot::metrics::ter::{Ter, TerOptions};
use blindspot::metrics::{Engine, Level, Metric, MetricId, Segment, Settings};
use blindspot::stress::Verdict;
use blindspot::stress::prefer::run_preference;
use blindspot::stress::suite::SuiteConfig;
use futures::executor::block_on;
use serde_json::Value;

use crate::common::{self, run_suite};
use crate::golden_lexical::cases_of;

/// sacrebleu prints 16 significant digits; TER is a ratio of small integers.
const TOLERANCE: f64 = 1e-9;

fn golden() -> Value {
    common::golden("ter.json")
}

#[test]
fn ter_matches_sacrebleu_under_every_option_set() {
    let g = golden();
    let cases = cases_of(&g);
    assert!(cases.len() >= 700, "{} cases", cases.len());
    let sets = g["options"].as_object().unwrap();
    assert!(sets.len() >= 6);
    for (name, options) in sets {
        let ter = Ter {
            options: serde_json::from_value::<TerOptions>(options.clone()).unwrap(),
        };
        for (i, (hyp, refs, expected)) in cases.iter().enumerate() {
            let refs: Vec<&str> = refs.iter().map(String::as_str).collect();
            let seg = Segment {
                hyp,
                refs: &refs,
                src: None,
            };
            let s = ter.sentence_score(&seg).unwrap();
            let want = &expected[name];
            let close = |got: f64, k: usize| (got - want[k].as_f64().unwrap()).abs() <= TOLERANCE;
            assert!(
                close(s.value, 0) && close(s.parts[0].value, 1) && close(s.parts[1].value, 2),
                "case {i} ({name}) {hyp:?} vs {refs:?}: TER {} edits {} ref_len {}, sacrebleu {want}",
                s.value,
                s.parts[0].value,
                s.parts[1].value
            );
        }
    }
}

#[test]
fn corpus_ter_sums_edits_and_lengths_as_sacrebleu() {
    let g = golden();
    let cases = cases_of(&g);
    let corpus = &g["corpus"];
    let [from, to] = [0, 1].map(|k| corpus["case_range"][k].as_u64().unwrap() as usize);
    let refs: Vec<Vec<&str>> = cases[from..to]
        .iter()
        .map(|(_, r, _)| r.iter().map(String::as_str).collect())
        .collect();
    let segments: Vec<Segment> = cases[from..to]
        .iter()
        .zip(&refs)
        .map(|((hyp, _, _), refs)| Segment {
            hyp,
            refs,
            src: None,
        })
        .collect();
    let ter = Ter::default();
    let score = ter.corpus_score(&segments).unwrap();
    let want = corpus["ter"].as_f64().unwrap();
    assert!(
        (score.value - want).abs() <= TOLERANCE,
        "{} vs {want}",
        score.value
    );
    // The signature carries sacrebleu's fields, with nrefs varying here.
    let sig = ter.signature(Level::Corpus, None).to_string();
    assert!(
        sig.starts_with("ter|nrefs:var|case:lc|tok:tercom|norm:no|punct:yes|asian:no|"),
        "{sig}"
    );
    assert!(
        corpus["signature"]
            .as_str()
            .unwrap()
            .contains("case:lc|tok:tercom|norm:no|punct:yes|asian:no")
    );
}

#[test]
fn ter_is_registered_lower_is_better_with_sacrebleus_options() {
    let info = MetricId::Ter.info();
    assert!(!info.higher_is_better);
    assert_eq!(info.kind, "ter");
    let listing = blindspot::metrics::registry::listing();
    let ter = listing.iter().find(|l| l.info.id == "ter").unwrap();
    let props = ter.options["properties"].as_object().unwrap();
    let names: Vec<&str> = props.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        ["normalized", "no_punct", "asian_support", "case_sensitive"]
    );
    for p in props.values() {
        assert_eq!(p["default"], false);
    }
}

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_blindspot"))
}

#[test]
fn the_cli_scores_ter_with_options_from_the_schema() {
    let dir = std::env::temp_dir().join(format!("blindspot-ter-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (hyps, refs) = (dir.join("h.txt"), dir.join("r.txt"));
    std::fs::write(&hyps, "The Cat, sat on the mat.\n").unwrap();
    std::fs::write(&refs, "the cat sat on the mat\n").unwrap();
    let score = |extra: &[&str]| -> Result<f64, String> {
        let out = bin()
            .args(["score", "--metrics", "ter", "--format", "jsonl"])
            .arg("--hyps")
            .arg(&hyps)
            .arg("--refs")
            .arg(&refs)
            .args(extra)
            .output()
            .unwrap();
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).into_owned());
        }
        let first: Value =
            serde_json::from_slice(out.stdout.split(|&b| b == b'\n').next().unwrap()).unwrap();
        Ok(first["ter"].as_f64().unwrap())
    };
    let expect = |hyp: &str, options: TerOptions| {
        Ter { options }
            .segment_stats(hyp, &["the cat sat on the mat"])
            .score()
    };
    let hyp = "The Cat, sat on the mat.";
    assert_eq!(score(&[]).unwrap(), expect(hyp, TerOptions::default()));
    assert_eq!(
        score(&["--opt", "ter.no_punct=true"]).unwrap(),
        expect(
            hyp,
            TerOptions {
                no_punct: true,
                ..TerOptions::default()
            }
        )
    );
    assert_eq!(score(&["--opt", "ter.no_punct=true"]).unwrap(), 0.0);
    assert!(score(&["--opt", "ter.case_sensitive=yes", "--opt", "ter.no_punct=1"]).unwrap() > 0.0);
    let err = score(&["--opt", "ter.nopunct=true"]).unwrap_err();
    assert!(
        err.starts_with("error: ter has no option 'nopunct'") && err.contains("no_punct"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

fn wmt(n: usize) -> Vec<blindspot::data::Item> {
    let text = std::fs::read_to_string(format!("{}/wmt21_de_en.jsonl", common::DATA)).unwrap();
    let mut items = blindspot::data::load_wmt(&text).rows;
    items.truncate(n);
    items
}

#[test]
fn the_rank_rule_wants_ter_to_rise_with_noise() {
    // Truncation removes words: TER rises with every level, which passes,
    // where a rising BLEU would fail.
    let config = SuiteConfig {
        injections: vec!["truncation".into()],
        metrics: vec!["bleu".into(), "ter".into()],
        seeds: 2,
        rouge_stemmer: false,
        open_ended: false,
    };
    let report = run_suite("wmt21_de_en.jsonl", &wmt(40), &config, None, &|_, _| true).unwrap();
    let test = &report.tests[0];
    let means: Vec<f64> = test.levels.iter().map(|l| l.scores[1].mean).collect();
    assert!(
        means.windows(2).all(|w| w[1] > w[0]) && means[0] > report.base[1],
        "TER rises with truncation: {} then {means:?}",
        report.base[1]
    );
    assert_eq!(test.verdicts, [Verdict::Pass, Verdict::Pass]);
    // A report read back derives TER's verdict again the same way.
    let json = serde_json::to_string(&report).unwrap();
    assert!(blindspot::stress::suite::SuiteReport::from_json(&json).is_ok());
}

#[test]
fn the_preference_suite_prefers_the_lower_ter() {
    let text = std::fs::read_to_string(format!("{}/menli_wmt20_de.csv", common::DATA)).unwrap();
    let mut cases: Vec<MenliCase> = blindspot::data::load_menli_csv(&text).unwrap().rows;
    cases.truncate(96);
    let specs = Settings::default().specs(&["ter"]).unwrap();
    let report = block_on(run_preference(
        "menli",
        &cases,
        &specs,
        &Engine::lexical(),
        async |_, _| true,
    ))
    .unwrap();
    let ter = Ter::default();
    let passed = cases
        .iter()
        .filter(|c| {
            let score = |hyp: &str| ter.segment_stats(hyp, &[c.reference.as_str()]).score();
            score(&c.paraphrase) < score(&c.adversarial_ref_based)
        })
        .count();
    let overall = &report.metrics[0].ref_based_overall;
    assert_eq!((overall.passed, overall.total), (passed, cases.len()));
}
