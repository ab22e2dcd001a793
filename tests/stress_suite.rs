//! The dataset runner against the papers' published findings, with lexical
//! metrics on ../shared/data, plus its own guarantees (determinism across
//! thread counts, cancellation, the CLI writing the library's numbers).

use blindspot::data::{self, Item};
use blindspot::metrics::MetricOptions;
use blindspot::stress::Verdict;
use blindspot::stress::prefer::run_preference;
use blindspot::stress::suite::{SuiteConfig, SuiteError, SuiteReport, run_suite};

mod common;
use common::DATA;

const LEXICAL: &[&str] = &["bleu", "chrf", "rouge1", "rouge2", "rougeL"];

fn wmt(limit: usize) -> Vec<Item> {
    let text = std::fs::read_to_string(format!("{DATA}/wmt21_de_en.jsonl")).unwrap();
    let mut items = data::load_wmt(&text).rows;
    items.truncate(limit);
    items
}

fn summeval() -> Vec<Item> {
    let text = std::fs::read_to_string(format!("{DATA}/summeval.jsonl")).unwrap();
    data::load_summeval(&text)
        .rows
        .into_iter()
        .map(|d| d.item)
        .collect()
}

fn config(injections: &[&str], seeds: u64) -> SuiteConfig {
    SuiteConfig {
        injections: injections.iter().map(|s| s.to_string()).collect(),
        metrics: LEXICAL.iter().map(|s| s.to_string()).collect(),
        seeds,
        rouge_stemmer: false,
    }
}

fn verdict(report: &SuiteReport, injection: &str, metric: &str) -> Verdict {
    let m = report.metrics.iter().position(|m| m.id == metric).unwrap();
    report
        .tests
        .iter()
        .find(|t| t.injection == injection)
        .unwrap()
        .verdicts[m]
}

#[test]
fn rouge_2_and_l_are_not_penalised_by_truncation_on_summeval() {
    // [BS] Table 1 lists ROUGE-2 and ROUGE-L among the metrics truncation fools.
    let report = run_suite(
        "summeval.jsonl",
        &summeval(),
        &config(&["truncation"], 5),
        None,
        &|_, _| true,
    )
    .unwrap();
    let t = &report.tests[0];
    for (m, metric) in report.metrics.iter().enumerate() {
        let means: Vec<f64> = t.levels.iter().map(|l| l.scores[m].mean).collect();
        println!(
            "{:7} base {:.4} truncation {means:.4?} -> {:?}",
            metric.id, report.base[m], t.verdicts[m]
        );
    }
    assert_eq!(verdict(&report, "truncation", "rouge2"), Verdict::Fail);
    assert_eq!(verdict(&report, "truncation", "rougeL"), Verdict::Fail);
    // chrF, by contrast, falls with every level.
    assert_eq!(verdict(&report, "truncation", "chrf"), Verdict::Pass);
}

#[test]
fn bleu_passes_every_fluency_test_on_wmt21() {
    let fluency: Vec<&str> = blindspot::inject::registry()
        .into_iter()
        .filter(|i| i.info().family == blindspot::inject::Family::Fluency)
        .map(|i| i.info().id)
        .collect();
    assert_eq!(fluency.len(), 10);
    let report = run_suite(
        "wmt21_de_en.jsonl",
        &wmt(300),
        &config(&fluency, 5),
        None,
        &|_, _| true,
    )
    .unwrap();
    for id in &fluency {
        println!("{id:20} BLEU {:?}", verdict(&report, id, "bleu"));
        assert_eq!(verdict(&report, id, "bleu"), Verdict::Pass, "{id}");
    }
    // Noise grows with the level, and the std over seeds is reported.
    let drop = report
        .tests
        .iter()
        .find(|t| t.injection == "token_drop")
        .unwrap();
    assert!(
        drop.levels
            .windows(2)
            .all(|w| w[1].noise_ratio.mean > w[0].noise_ratio.mean)
    );
    assert!(drop.levels.iter().all(|l| l.scores[0].std > 0.0));
}

#[test]
fn lexical_metrics_rarely_prefer_the_paraphrase_on_menli_wmt20() {
    let text = std::fs::read_to_string(format!("{DATA}/menli_wmt20_de.csv")).unwrap();
    let cases = data::load_menli_csv(&text).unwrap().rows;
    let ids: Vec<String> = ["bleu", "chrf", "rougeL"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let report = run_preference(
        "menli_wmt20_de.csv",
        &cases,
        &ids,
        MetricOptions::default(),
        &|_, _| true,
    )
    .unwrap();
    assert_eq!(report.cases, 2400);
    assert_eq!(report.error_types.len(), 12);
    for m in &report.metrics {
        let acc = m.ref_based_overall.accuracy;
        println!(
            "{}: paraphrase preferred in {:.1}% of cases",
            m.metric.id,
            100.0 * acc
        );
        assert!(acc < 0.3, "{} prefers the paraphrase {acc}", m.metric.id);
        assert_eq!(m.ref_based_overall.total, 2400);
    }
}

#[test]
fn results_do_not_depend_on_threads_and_runs_can_be_cancelled() {
    let items = wmt(40);
    let cfg = config(&["token_drop", "negation", "sentence_replacement"], 2);
    let parallel = run_suite("wmt", &items, &cfg, None, &|_, _| true).unwrap();
    let single = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap()
        .install(|| run_suite("wmt", &items, &cfg, None, &|_, _| true).unwrap());
    assert_eq!(parallel, single);
    let cancelled = run_suite("wmt", &items, &cfg, None, &|done, _| done < 5);
    assert!(matches!(cancelled, Err(SuiteError::Cancelled)));
    let skipped = run_suite(
        "wmt",
        &items,
        &config(&["bert_diverge", "sentence_switching"], 1),
        None,
        &|_, _| true,
    )
    .unwrap();
    assert!(
        skipped
            .tests
            .iter()
            .all(|t| t.skipped.is_some() && t.verdicts.is_empty())
    );
}

#[test]
fn the_cli_writes_the_library_numbers() {
    let bin = env!("CARGO_BIN_EXE_blindspot");
    let dir = std::env::temp_dir().join(format!("blindspot-stress-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (json, csv, html) = (dir.join("r.json"), dir.join("r.csv"), dir.join("r.html"));
    let out = std::process::Command::new(bin)
        .args([
            "stress",
            "--data",
            &format!("{DATA}/wmt21_de_en.jsonl"),
            "--format",
            "wmt",
            "--limit",
            "30",
        ])
        .args([
            "--injections",
            "truncation,negation",
            "--seeds",
            "2",
            "--out",
        ])
        .arg(&json)
        .arg("--csv")
        .arg(&csv)
        .arg("--html")
        .arg(&html)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let written: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let report = run_suite(
        "wmt21_de_en.jsonl",
        &wmt(30),
        &config(&["truncation", "negation"], 2),
        None,
        &|_, _| true,
    )
    .unwrap();
    assert_eq!(written, serde_json::to_value(&report).unwrap());
    let rows = std::fs::read_to_string(&csv).unwrap();
    // Header + (5 truncation levels + 2 negation levels) x 5 metrics.
    assert_eq!(rows.lines().count(), 1 + 7 * 5);
    assert!(
        rows.lines()
            .nth(1)
            .unwrap()
            .starts_with(&format!("blindspot {}", env!("CARGO_PKG_VERSION")))
    );
}

#[test]
fn audit_flags_metrics_that_track_length_more_than_humans() {
    let text = std::fs::read_to_string(format!("{DATA}/summeval.jsonl")).unwrap();
    let docs = data::load_summeval(&text).rows;
    let ids: Vec<String> = LEXICAL.iter().map(|s| s.to_string()).collect();
    let report = blindspot::stress::audit::run_audit(
        "summeval.jsonl",
        &docs,
        &ids,
        MetricOptions::default(),
        &[],
    )
    .unwrap();
    assert_eq!(report.examples, 1600);
    assert_eq!(report.systems, 16);
    assert_eq!(
        report.dimensions,
        ["coherence", "consistency", "fluency", "relevance"]
    );
    for m in &report.metrics {
        let k = |c: &blindspot::stress::audit::Correlation| c.kendall;
        println!(
            "{:7} humans {:?} correlates {:?} system acc {:?} flags {}",
            m.metric.id,
            m.human
                .iter()
                .map(k)
                .map(|v| (v * 1000.0).round() / 1000.0)
                .collect::<Vec<_>>(),
            m.correlates
                .iter()
                .map(k)
                .map(|v| (v * 1000.0).round() / 1000.0)
                .collect::<Vec<_>>(),
            m.system_accuracy
                .iter()
                .map(|v| (v * 1000.0).round() / 1000.0)
                .collect::<Vec<_>>(),
            m.flags.len()
        );
        for c in m.human.iter().chain(&m.correlates) {
            assert!(c.kendall.abs() <= 1.0 && c.pearson.abs() <= 1.0 + 1e-12);
        }
    }
    // [SPUR]: lexical metrics track surface features; at least one is flagged.
    assert!(report.metrics.iter().any(|m| !m.flags.is_empty()));
}

#[test]
fn preference_suites_built_from_wmt21_show_the_same_blind_spot() {
    let attacks = blindspot::stress::prefer::default_attacks();
    assert_eq!(attacks.len(), 12, "MENLI's twelve error types: {attacks:?}");
    let cases = blindspot::stress::prefer::build_cases(&wmt(100), &attacks, 0).unwrap();
    // 100 items x 12 attacks, minus the attacks an item offers nothing to (no number, pronoun, name...).
    assert!(cases.len() > 700, "{}", cases.len());
    for c in &cases {
        assert_ne!(c.adversarial_ref_based, c.reference);
        assert_eq!(c.adversarial_ref_based, c.adversarial_ref_free);
    }
    let ids: Vec<String> = ["bleu", "chrf"].iter().map(|s| s.to_string()).collect();
    let report = run_preference("wmt21", &cases, &ids, MetricOptions::default(), &|_, _| {
        true
    })
    .unwrap();
    for m in &report.metrics {
        println!(
            "{}: paraphrase preferred in {:.1}% of built cases",
            m.metric.id,
            100.0 * m.ref_based_overall.accuracy
        );
        assert!(m.ref_based_overall.accuracy < 0.3);
    }
}
