//! Adversarial search (issue 16): every goal and strategy on lexical
//! metrics over WMT21 (fast, deterministic), MiniLM-BERTScore and the tiny
//! random checkpoints for the model-based paths, the CLI with sharding.
//! Every claimed number is recomputed here from the text the search
//! returned.

use crate::common;

use std::cell::RefCell;
use std::collections::HashMap;
use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::rc::Rc;

use blindspot::data::{self, Item};
use blindspot::inject::masked_lm::PlmMaskedLm;
use blindspot::metrics::engine::EngineError;
use blindspot::metrics::spec::OptionValue;
use blindspot::metrics::{Engine, MetricSpec, ModelSlot, ModelStore, Segment, Settings};
use blindspot::models::Plm;
use blindspot::stress::attack::{
    Attack, AttackConfig, AttackError, AttackOutcome, AttackRun, AttackTools, Goal, HelperError,
    Neighbours, ScorePool, StopReason, Strategy, run_attacks, score_hypotheses, z_norm,
};
use blindspot::stress::suite::Shard;
use common::DATA;
use futures::FutureExt;
use futures::executor::block_on;

fn wmt(limit: usize) -> Vec<Item> {
    let text = std::fs::read_to_string(format!("{DATA}/wmt21_de_en.jsonl")).unwrap();
    let mut items = data::load_wmt(&text).rows;
    items.truncate(limit);
    items
}

fn load(dir: &str) -> Rc<Plm> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    Rc::new(common::cpu_model(dir, &root.join(dir)))
}

fn minilm() -> Rc<Plm> {
    load("models/all-MiniLM-L6-v2")
}

/// Loaded models by slot.
struct Store(HashMap<ModelSlot, Rc<Plm>>);

impl ModelStore for Store {
    fn model(&self, slot: ModelSlot, _: Option<&str>) -> Result<Rc<Plm>, EngineError> {
        self.0
            .get(&slot)
            .cloned()
            .ok_or_else(|| EngineError::NoModel(format!("no {slot} model in this test")))
    }
}

fn spec(id: &str) -> MetricSpec {
    Settings::default().specs(&[id]).unwrap().remove(0)
}

fn try_run(
    engine: &Engine,
    items: &[Item],
    spec: &MetricSpec,
    config: &AttackConfig,
    tools: &AttackTools,
) -> Result<AttackRun, AttackError> {
    block_on(run_attacks(
        engine,
        "wmt21",
        items,
        spec,
        config,
        tools,
        None,
        &mut |_, _| {},
    ))
}

fn run(
    engine: &Engine,
    items: &[Item],
    metric: &str,
    config: &AttackConfig,
    tools: &AttackTools,
) -> AttackRun {
    try_run(engine, items, &spec(metric), config, tools).unwrap()
}

/// The message of a run that must be refused.
fn refusal(
    engine: &Engine,
    items: &[Item],
    spec: &MetricSpec,
    config: &AttackConfig,
    tools: &AttackTools,
) -> String {
    try_run(engine, items, spec, config, tools)
        .unwrap_err()
        .to_string()
}

/// The metric's score of `text` against the item's references, computed
/// afresh.
fn rescore(engine: &Engine, metric: &str, item: &Item, text: &str, against: Option<&str>) -> f64 {
    let refs: Vec<&str> = match against {
        Some(r) => vec![r],
        None => item.refs.iter().map(String::as_str).collect(),
    };
    let seg = Segment {
        hyp: text,
        refs: &refs,
        src: item.src.as_deref(),
    };
    block_on(engine.score(&[spec(metric)], &[seg])).unwrap()[0].values()[0]
}

/// What every outcome must satisfy whatever the goal: its numbers are the
/// metric's on its text, the budget holds, a success meets the goal.
fn check(engine: &Engine, run: &AttackRun, items: &[Item], tolerance: f64) {
    // What a reader of the run (`blindspot merge`, the page) checks holds.
    run.check().unwrap();
    let h = &run.header;
    let c = &h.config;
    for o in &run.outcomes {
        let item = &items[o.item];
        assert_eq!(o.original, item.gold);
        let fresh = rescore(engine, &h.metric, item, &o.text, None);
        assert!(
            (fresh - o.final_score).abs() <= tolerance,
            "{}: claimed {} but the text scores {fresh}",
            o.id,
            o.final_score
        );
        let base = rescore(engine, &h.metric, item, &item.gold, None);
        assert!((base - o.score).abs() <= tolerance);
        assert!((o.change_z - (o.final_score - o.score) / h.z.std).abs() < 1e-9);
        assert!(o.queries <= c.budget, "{} > budget", o.queries);
        assert_eq!(o.success, o.stop == StopReason::Success);
        if o.success {
            assert_ne!(o.text, o.original);
            match c.goal {
                Goal::OverPenalise => assert!(-o.change_z > c.threshold),
                Goal::Inconsistency => {
                    assert!(-o.change_z > c.threshold);
                    let self_drop =
                        (rescore(engine, &h.metric, item, &item.gold, Some(&item.gold))
                            - rescore(engine, &h.metric, item, &o.text, Some(&item.gold)))
                            / h.z.std;
                    assert!((self_drop - o.self_drop_z.unwrap()).abs() < 1e-6);
                    assert!(self_drop < c.self_threshold, "self drop {self_drop}");
                }
                Goal::Raise => {
                    assert!(o.change_z > c.threshold && o.perturbation >= c.noise_target);
                }
            }
        }
        // The trajectory ends where the outcome stands.
        let last = o.trajectory.last().unwrap();
        assert_eq!(last.score, o.final_score);
    }
}

fn rate(run: &AttackRun) -> f64 {
    run.summary().success_rate
}

#[test]
fn deepwordbug_over_penalises_chrf_and_bleu_on_most_segments() {
    let items = wmt(30);
    let engine = Engine::lexical();
    let config = AttackConfig::new(Goal::OverPenalise, Strategy::DeepWordBug);
    for metric in ["chrf", "bleu"] {
        let run_a = run(&engine, &items, metric, &config, &AttackTools::default());
        check(&engine, &run_a, &items, 1e-9);
        // Sentence BLEU spreads widely over WMT21, so one z unit is a
        // larger drop for it than for chrF.
        let least = if metric == "chrf" { 0.8 } else { 0.5 };
        assert!(rate(&run_a) >= least, "{metric}: {:?}", run_a.summary());
        // Deterministic for a seed.
        let run_b = run(&engine, &items, metric, &config, &AttackTools::default());
        assert_eq!(run_a, run_b);
        // Character edits only: as many words as before.
        for o in run_a.outcomes.iter().filter(|o| o.success) {
            assert_eq!(
                o.text.split_whitespace().count(),
                o.original.split_whitespace().count()
            );
        }
    }
}

#[test]
fn input_reduction_only_deletes_words() {
    let items = wmt(15);
    let engine = Engine::lexical();
    let config = AttackConfig::new(Goal::OverPenalise, Strategy::InputReduction);
    let run = run(&engine, &items, "chrf", &config, &AttackTools::default());
    check(&engine, &run, &items, 1e-9);
    assert!(rate(&run) > 0.5, "{:?}", run.summary());
    for o in &run.outcomes {
        // The words left are the original's, in order.
        let mut orig = o.original.split_whitespace();
        for w in o.text.split_whitespace() {
            assert!(orig.any(|x| x == w), "{w} not from the original");
        }
    }
}

#[test]
fn a_tiny_budget_stops_the_search_and_is_reported() {
    let items = wmt(5);
    let engine = Engine::lexical();
    let mut config = AttackConfig::new(Goal::OverPenalise, Strategy::DeepWordBug);
    config.budget = 3;
    config.threshold = 50.0;
    let run = run(&engine, &items, "chrf", &config, &AttackTools::default());
    check(&engine, &run, &items, 1e-9);
    for o in &run.outcomes {
        assert_eq!(o.stop, StopReason::Budget);
        assert!(o.queries <= 3);
    }
}

#[test]
fn a_damaged_run_or_outcome_is_refused() {
    let items = wmt(4);
    let engine = Engine::lexical();
    let mut config = AttackConfig::new(Goal::OverPenalise, Strategy::DeepWordBug);
    config.budget = 60;
    let good = run(&engine, &items, "chrf", &config, &AttackTools::default());
    good.check().unwrap();
    let changed = good
        .outcomes
        .iter()
        .position(|o| o.text != o.original)
        .expect("some edit found");
    let refused = |damage: &dyn Fn(&mut AttackRun), why: &str| {
        let mut run = good.clone();
        damage(&mut run);
        let err = run.check().unwrap_err().to_string();
        assert!(err.contains(why), "{err}");
    };
    refused(
        &|r| r.outcomes[changed].edits.clear(),
        "edits are not those",
    );
    refused(
        &|r| r.outcomes[changed].words_changed += 1,
        "edits are not those",
    );
    refused(
        &|r| r.outcomes[changed].text.push_str(" x"),
        "edits are not those",
    );
    refused(&|r| r.outcomes[changed].perturbation *= 2.0, "perturbation");
    refused(&|r| r.outcomes[changed].final_score += 1.0, "change in z");
    refused(&|r| r.outcomes[changed].score = f64::NAN, "not finite");
    refused(&|r| r.outcomes[changed].success ^= true, "success");
    refused(
        &|r| r.outcomes[changed].ppl = Some((-1.0, 3.0)),
        "perplexities",
    );
    refused(
        &|r| r.outcomes[changed].trajectory[0].score = f64::INFINITY,
        "trajectory",
    );
    refused(&|r| r.outcomes[changed].queries = 0, "trajectory");
    refused(&|r| r.header.z.std = 0.0, "z statistics");
    refused(&|r| r.outcomes.swap(0, 1), "out of order");
    refused(&|r| r.header.items = 2, "outside the items");
    refused(
        &|r| r.header.shard = Some(Shard { index: 1, count: 1 }),
        "not a shard",
    );
}

#[test]
fn raising_bleu_while_the_text_degrades() {
    // Token-greedy over deletions and MiniLM input-embedding neighbours.
    let items = wmt(12);
    let engine = Engine::lexical();
    let neighbours = block_on(Neighbours::of(minilm())).unwrap();
    let tools = AttackTools {
        neighbours: Some(&neighbours),
        ..AttackTools::default()
    };
    let config = AttackConfig::new(Goal::Raise, Strategy::TokenGreedy);
    let run = run(&engine, &items, "bleu", &config, &tools);
    check(&engine, &run, &items, 1e-9);
    assert!(rate(&run) > 0.0, "{:?}", run.summary());
    for o in &run.outcomes {
        // Forced steps: the noise only grows along the trajectory.
        for w in o.trajectory.windows(2) {
            assert!(w[1].noise >= w[0].noise);
        }
    }
}

#[test]
fn embedding_neighbours_are_whole_words_not_case_variants() {
    let n = block_on(Neighbours::of(minilm())).unwrap();
    let near = n.nearest("house", 8);
    assert_eq!(near.len(), 8, "{near:?}");
    assert!(near.iter().all(|w| w.to_lowercase() != "house"));
    assert!(near.iter().all(|w| w.chars().all(char::is_alphabetic)));
    assert!(
        near.iter()
            .any(|w| ["houses", "home", "homes", "mansion"].contains(&w.as_str())),
        "{near:?}"
    );
    // Capitalised like the word asked about.
    assert!(
        n.nearest("House", 3)
            .iter()
            .all(|w| w.chars().next().unwrap().is_uppercase())
    );
    assert!(n.nearest("xqzvw", 8).is_empty());
}

#[test]
fn an_item_that_cannot_be_attacked_is_named() {
    let mut items = wmt(3);
    items[1].gold = " ".into();
    let config = AttackConfig::new(Goal::OverPenalise, Strategy::InputReduction);
    let err = refusal(
        &Engine::lexical(),
        &items,
        &spec("chrf"),
        &config,
        &AttackTools::default(),
    );
    let expected = format!("item 2 (id {}): the text to attack is empty", items[1].id);
    assert_eq!(err, expected);
}

#[test]
fn genetic_search_with_embedding_neighbours() {
    let items = wmt(6);
    let engine = Engine::lexical();
    let neighbours = block_on(Neighbours::of(minilm())).unwrap();
    let tools = AttackTools {
        neighbours: Some(&neighbours),
        ..AttackTools::default()
    };
    let mut config = AttackConfig::new(Goal::OverPenalise, Strategy::Genetic);
    config.population = 8;
    config.generations = 5;
    let run_a = run(&engine, &items, "chrf", &config, &tools);
    check(&engine, &run_a, &items, 1e-9);
    assert!(rate(&run_a) > 0.0, "{:?}", run_a.summary());
    // Deterministic for a seed; another seed searches differently.
    assert_eq!(run_a, run(&engine, &items, "chrf", &config, &tools));
    let mut other = config.clone();
    other.seed = 7;
    let run_c = run(&engine, &items, "chrf", &other, &tools);
    assert!(
        run_a
            .outcomes
            .iter()
            .zip(&run_c.outcomes)
            .any(|(a, c)| a.text != c.text || a.queries != c.queries)
    );
    // Substitutions only.
    for o in &run_a.outcomes {
        assert_eq!(
            o.text.split_whitespace().count(),
            o.original.split_whitespace().count()
        );
    }
    let missing = refusal(
        &engine,
        &items,
        &spec("chrf"),
        &config,
        &AttackTools::default(),
    );
    assert!(missing.contains("input embeddings"), "{missing}");
}

#[test]
fn clare_beam_search_with_a_masked_lm() {
    let items = wmt(4);
    let engine = Engine::lexical();
    let plm = load("tests/fixtures/plm/bert_mlm");
    let mlm = PlmMaskedLm::new(&plm).unwrap();
    let tools = AttackTools {
        masked_lm: Some(&mlm),
        ..AttackTools::default()
    };
    let mut config = AttackConfig::new(Goal::OverPenalise, Strategy::Clare);
    config.iterations = 3;
    config.budget = 300;
    let run_a = run(&engine, &items, "chrf", &config, &tools);
    check(&engine, &run_a, &items, 1e-9);
    assert!(run_a.outcomes.iter().any(|o| o.text != o.original));
    assert_eq!(run_a, run(&engine, &items, "chrf", &config, &tools));
    let missing = refusal(
        &engine,
        &items,
        &spec("chrf"),
        &config,
        &AttackTools::default(),
    );
    assert!(missing.contains("masked language model"), "{missing}");
}

#[test]
fn the_fluency_constraint_holds_for_every_result() {
    let items = wmt(6);
    let gpt2 = load("tests/fixtures/plm/gpt2");
    let engine = Engine::new(Store(HashMap::from([(ModelSlot::GptPpl, gpt2)])));
    let fluency = AttackTools::fluency_spec(None);
    let tools = AttackTools {
        fluency: Some(fluency.clone()),
        ..AttackTools::default()
    };
    let mut config = AttackConfig::new(Goal::OverPenalise, Strategy::DeepWordBug);
    config.max_ppl_rise = 0.0;
    let constrained = run(&engine, &items, "chrf", &config, &tools);
    check(&engine, &constrained, &items, 1e-9);
    let ppl = |t: &str| {
        let seg = Segment {
            hyp: t,
            refs: &[],
            src: None,
        };
        -block_on(engine.score(std::slice::from_ref(&fluency), &[seg])).unwrap()[0].values()[0]
    };
    for o in &constrained.outcomes {
        let (before, after) = o.ppl.unwrap();
        assert!((before - ppl(&o.original)).abs() < 1e-6);
        assert!((after - ppl(&o.text)).abs() < 1e-6);
        assert!(after <= before + 1e-9, "{}: {before} -> {after}", o.id);
        assert!(o.lm_queries > 0);
    }
    // The constraint was exercised: edits were found under it.
    assert!(constrained.outcomes.iter().any(|o| o.text != o.original));
    // Without it the search is free to raise perplexity.
    let free = run(&engine, &items, "chrf", &config, &AttackTools::default());
    assert!(free.outcomes.iter().all(|o| o.ppl.is_none()));
    assert!(rate(&free) >= rate(&constrained));
}

#[test]
fn minilm_bertscore_over_penalised_and_self_inconsistent() {
    let items = wmt(8);
    let engine = Engine::new(Store(HashMap::from([(ModelSlot::BertScore, minilm())])));
    let mut config = AttackConfig::new(Goal::OverPenalise, Strategy::DeepWordBug);
    config.budget = 150;
    let over = run(
        &engine,
        &items,
        "bertscore-f",
        &config,
        &AttackTools::default(),
    );
    check(&engine, &over, &items, 2e-6);
    assert!(rate(&over) >= 0.5, "{:?}", over.summary());
    let mut config = AttackConfig::new(Goal::Inconsistency, Strategy::DeepWordBug);
    config.budget = 150;
    let inconsistent = run(
        &engine,
        &items,
        "bertscore-f",
        &config,
        &AttackTools::default(),
    );
    check(&engine, &inconsistent, &items, 2e-6);
    for o in &inconsistent.outcomes {
        assert!(o.self_drop_z.is_some());
        // Two scores per candidate: against the reference and the original.
        assert_eq!(o.queries % 2, 0);
    }
    // A metric without a reference cannot be made inconsistent with itself.
    let err = refusal(
        &engine,
        &items,
        &spec("gpt-ppl"),
        &config,
        &AttackTools::default(),
    );
    assert!(err.contains("takes no reference"), "{err}");
}

#[test]
fn metrics_whose_scores_depend_on_the_batch_are_refused() {
    let items = wmt(4);
    let engine = Engine::new(Store(HashMap::from([(ModelSlot::BertScore, minilm())])));
    let settings = Settings::default().with(OptionValue::new(None, "idf", true));
    let spec = settings.specs(&["bertscore-f"]).unwrap().remove(0);
    let config = AttackConfig::new(Goal::OverPenalise, Strategy::DeepWordBug);
    let err = refusal(&engine, &items, &spec, &config, &AttackTools::default());
    assert!(err.contains("idf weights"), "{err}");
}

#[test]
fn a_one_word_text_still_gets_character_edits() {
    let mut items = wmt(3);
    items[0].gold = "Fine.".into();
    let engine = Engine::lexical();
    let mut config = AttackConfig::new(Goal::OverPenalise, Strategy::DeepWordBug);
    config.threshold = 1e9;
    let run = run(&engine, &items, "chrf", &config, &AttackTools::default());
    check(&engine, &run, &items, 1e-9);
    // Without the fallback nothing would be tried (no deletion to rank by).
    assert!(run.outcomes[0].queries > 0);
}

#[test]
fn a_single_item_has_no_z_scale() {
    let items = wmt(1);
    let config = AttackConfig::new(Goal::OverPenalise, Strategy::DeepWordBug);
    let err = refusal(
        &Engine::lexical(),
        &items,
        &spec("chrf"),
        &config,
        &AttackTools::default(),
    );
    assert!(err.contains("at least two texts"), "{err}");
}

fn attack_cli(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_blindspot"))
        .args(["attack", "--data", &format!("{DATA}/wmt21_de_en.jsonl")])
        .args(["--format", "wmt", "--limit", "12"])
        .args(args)
        .output()
        .unwrap()
}

/// Token-greedy without a masked LM searches a smaller candidate set than
/// SPEC's; the CLI says so rather than reporting it as the full search.
#[test]
fn token_greedy_without_a_masked_lm_says_what_it_left_out() {
    let out = attack_cli(&[
        "--metric",
        "chrf",
        "--goal",
        "raise",
        "--strategy",
        "token-greedy",
        "--budget",
        "5",
    ]);
    common::assert_ok(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("no --mlm-model given: token-greedy's edits were deletions and embedding neighbours only"),
        "{stderr}"
    );
}

#[test]
fn the_cli_attacks_in_shards_that_merge_into_the_whole_run() {
    let dir = std::env::temp_dir().join(format!("blindspot-attack-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = |n: &str| dir.join(n).display().to_string();
    let whole = attack_cli(&[
        "--metric",
        "chrf",
        "--budget",
        "200",
        "--html",
        &path("report.html"),
        "--summary",
        &path("summary.json"),
    ]);
    common::assert_ok(&whole);
    let stderr = String::from_utf8_lossy(&whole.stderr);
    assert!(stderr.contains("succeeded"), "{stderr}");
    assert!(stderr.contains("no fluency constraint"), "{stderr}");
    let text = String::from_utf8(whole.stdout).unwrap();
    assert_eq!(text.lines().count(), 13);
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path("summary.json")).unwrap()).unwrap();
    let html = std::fs::read_to_string(path("report.html")).unwrap();
    assert!(html.contains(&format!(
        "<tr><th>succeeded</th><td>{} (",
        summary["succeeded"]
    )));
    assert!(html.contains("<mark>") && html.contains("blindspot-results"));
    // The outcomes are the library's.
    let items = wmt(12);
    let mut config = AttackConfig::new(Goal::OverPenalise, Strategy::DeepWordBug);
    config.budget = 200;
    let lib = run(
        &Engine::lexical(),
        &items,
        "chrf",
        &config,
        &AttackTools::default(),
    );
    for (line, o) in text.lines().skip(1).zip(&lib.outcomes) {
        let parsed: AttackOutcome = serde_json::from_str(line).unwrap();
        assert_eq!(&parsed, o);
    }
    for i in 0..3 {
        let out = attack_cli(&[
            "--metric",
            "chrf",
            "--budget",
            "200",
            "--shard",
            &format!("{i}/3"),
            "--out",
            &path(&format!("part{i}.jsonl")),
        ]);
        common::assert_ok(&out);
    }
    let merged = std::process::Command::new(env!("CARGO_BIN_EXE_blindspot"))
        .arg("merge")
        .args((0..3).map(|i| path(&format!("part{i}.jsonl"))))
        .output()
        .unwrap();
    common::assert_ok(&merged);
    assert_eq!(String::from_utf8(merged.stdout).unwrap(), text);
    // Missing a part is an error, not a short report.
    let short = std::process::Command::new(env!("CARGO_BIN_EXE_blindspot"))
        .arg("merge")
        .args((0..2).map(|i| path(&format!("part{i}.jsonl"))))
        .output()
        .unwrap();
    common::assert_user_error(&short, "give every shard once");
    // A damaged part (a score edited by hand) is refused, not merged.
    let part = std::fs::read_to_string(path("part1.jsonl")).unwrap();
    let mut lines: Vec<serde_json::Value> = part
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    lines[1]["final_score"] = serde_json::json!(99.0);
    let damaged: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(path("part1.jsonl"), damaged).unwrap();
    let refused = std::process::Command::new(env!("CARGO_BIN_EXE_blindspot"))
        .arg("merge")
        .args((0..3).map(|i| path(&format!("part{i}.jsonl"))))
        .output()
        .unwrap();
    common::assert_user_error(&refused, "the attack run is damaged: item");
    // Bad settings are one-line errors.
    common::assert_user_error(
        &attack_cli(&["--strategy", "clare"]),
        "needs a masked language model",
    );
    let bad_goal = attack_cli(&["--goal", "sideways"]);
    assert_eq!(bad_goal.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad_goal.stderr).contains("over-penalise"));
    common::assert_user_error(&attack_cli(&["--budget", "0"]), "budget");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_stress_report_carries_the_summaries_of_attacks_on_its_dataset() {
    let dir = std::env::temp_dir().join(format!("blindspot-attack-suite-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = |n: &str| dir.join(n).display().to_string();
    let stress = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_blindspot"))
            .args(["stress", "--data", &format!("{DATA}/wmt21_de_en.jsonl")])
            .args(["--format", "wmt", "--limit", "12", "--seeds", "1"])
            .args(["--injections", "truncation", "--metrics", "chrf"])
            .args(args)
            .output()
            .unwrap()
    };
    for (goal, file) in [("over-penalise", "over.jsonl"), ("raise", "raise.jsonl")] {
        let out = attack_cli(&[
            "--metric",
            "chrf",
            "--goal",
            goal,
            "--budget",
            "150",
            "--out",
            &path(file),
        ]);
        common::assert_ok(&out);
    }
    let out = stress(&[
        "--attack",
        &path("over.jsonl"),
        "--attack",
        &path("raise.jsonl"),
        "--html",
        &path("report.html"),
    ]);
    common::assert_ok(&out);
    let report: blindspot::stress::suite::SuiteReport =
        serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report.attacks.len(), 2);
    let html = std::fs::read_to_string(path("report.html")).unwrap();
    let card = String::from_utf8_lossy(&out.stderr);
    for (entry, file) in report.attacks.iter().zip(["over.jsonl", "raise.jsonl"]) {
        // The summary is the run's, recomputed from its outcomes.
        let text = std::fs::read_to_string(path(file)).unwrap();
        let mut lines = text.lines();
        let header: serde_json::Value = serde_json::from_str(lines.next().unwrap()).unwrap();
        let outcomes: Vec<AttackOutcome> =
            lines.map(|l| serde_json::from_str(l).unwrap()).collect();
        let summary = blindspot::stress::attack::AttackSummary::of(&outcomes);
        assert_eq!(entry.summary, summary);
        assert_eq!(entry.summary.attempted, 12);
        assert!(entry.summary.succeeded > 0, "{summary:?}");
        assert_eq!(entry.header.metric, "chrf");
        assert_eq!(serde_json::to_value(&entry.header).unwrap(), header);
        // The HTML report and the terminal card show it.
        assert!(html.contains(&format!(
            "<td>{} ({:.1}%)</td><td>{:.1}</td>",
            summary.succeeded,
            100.0 * summary.success_rate,
            summary.mean_queries
        )));
        assert!(card.contains(&format!(
            "attack {} / {} on chrf: {} of 12 succeeded",
            entry.header.config.goal, entry.header.config.strategy, summary.succeeded
        )));
    }
    assert!(html.contains("<h2 id=\"attacks\">Attacks</h2>"));
    // Merged suite shards take attacks too, and give the same report.
    for i in 0..2 {
        let out = stress(&[
            "--shard",
            &format!("{i}/2"),
            "--out",
            &path(&format!("s{i}.json")),
        ]);
        common::assert_ok(&out);
    }
    let merged = std::process::Command::new(env!("CARGO_BIN_EXE_blindspot"))
        .args(["merge", &path("s0.json"), &path("s1.json")])
        .args([
            "--attack",
            &path("over.jsonl"),
            "--attack",
            &path("raise.jsonl"),
        ])
        .output()
        .unwrap();
    common::assert_ok(&merged);
    assert_eq!(merged.stdout, out.stdout);
    // A shard of an attack, another dataset's attack and a file that is not
    // an attack's results are refused.
    let part = attack_cli(&[
        "--metric",
        "chrf",
        "--shard",
        "0/2",
        "--out",
        &path("part.jsonl"),
    ]);
    common::assert_ok(&part);
    common::assert_user_error(&stress(&["--attack", &path("part.jsonl")]), "merge");
    let other = std::fs::read_to_string(path("over.jsonl"))
        .unwrap()
        .replacen(
            "\"dataset\":\"wmt21_de_en.jsonl\"",
            "\"dataset\":\"other.jsonl\"",
            1,
        );
    assert_ne!(other, std::fs::read_to_string(path("over.jsonl")).unwrap());
    std::fs::write(path("other.jsonl"), other).unwrap();
    common::assert_user_error(
        &stress(&["--attack", &path("other.jsonl")]),
        "the attack ran on other.jsonl, the suite on wmt21_de_en.jsonl",
    );
    common::assert_user_error(
        &stress(&["--attack", &path("s0.json")]),
        "not the results of `blindspot attack`",
    );
    // A run over the first 8 items (its header and their outcomes).
    let fewer: String = std::fs::read_to_string(path("over.jsonl"))
        .unwrap()
        .replacen("\"items\":12", "\"items\":8", 1)
        .lines()
        .take(9)
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(path("fewer.jsonl"), fewer).unwrap();
    common::assert_user_error(
        &stress(&["--attack", &path("fewer.jsonl")]),
        "the attack ran on 8 items of wmt21_de_en.jsonl, the suite on 12",
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// Helpers as the page's are, each with its own engine; they score at once
/// (when asked, as the trait requires) and keep the size of every share.
struct Helpers {
    engines: Vec<Engine>,
    shares: RefCell<Vec<(usize, usize)>>,
    /// Every call fails with this, returns one score too few ("short"), or
    /// scores every text -inf or NaN ("not finite").
    broken: Option<&'static str>,
    /// Batches asked about before the helpers are ready (loading models).
    loading: std::cell::Cell<usize>,
}

impl Helpers {
    fn new(engines: Vec<Engine>) -> Self {
        Helpers {
            engines,
            shares: RefCell::new(Vec::new()),
            broken: None,
            loading: std::cell::Cell::new(0),
        }
    }
}

impl ScorePool for Helpers {
    fn size(&self) -> usize {
        let loading = self.loading.get();
        self.loading.set(loading.saturating_sub(1));
        if loading > 0 { 0 } else { self.engines.len() }
    }

    fn score(
        &self,
        helper: usize,
        spec: &MetricSpec,
        texts: &[String],
        refs: &[&str],
        src: Option<&str>,
    ) -> Pin<Box<dyn Future<Output = Result<Vec<f64>, HelperError>>>> {
        self.shares.borrow_mut().push((helper, texts.len()));
        let result = match self.broken {
            Some("short") => Ok(vec![0.0; texts.len() - 1]),
            Some("not finite") => Ok(texts
                .iter()
                .enumerate()
                .map(|(i, _)| {
                    if i % 2 == 0 {
                        f64::NEG_INFINITY
                    } else {
                        f64::NAN
                    }
                })
                .collect()),
            Some(why) => Err(HelperError(why.to_owned())),
            None => score_hypotheses(&self.engines[helper], spec, texts, refs, src)
                .now_or_never()
                .expect("a CPU engine scores without waiting")
                .map(|(v, _)| v)
                .map_err(|e| HelperError(e.to_string())),
        };
        Box::pin(std::future::ready(result))
    }
}

#[test]
fn helpers_score_shares_of_each_batch_and_change_nothing() {
    let items = wmt(8);
    let engine = Engine::lexical();
    let config = AttackConfig::new(Goal::OverPenalise, Strategy::DeepWordBug);
    let alone = run(&engine, &items, "chrf", &config, &AttackTools::default());
    let helpers = Helpers::new(vec![Engine::lexical(), Engine::lexical()]);
    let tools = AttackTools {
        pool: Some(&helpers),
        ..AttackTools::default()
    };
    let pooled = run(&engine, &items, "chrf", &config, &tools);
    assert_eq!(alone, pooled);
    // Both helpers took shares; none larger than a third of a batch plus one
    // (the first step's batch is one deletion per word, ~20 texts).
    let shares = helpers.shares.borrow();
    assert!(shares.iter().any(|s| s.0 == 0) && shares.iter().any(|s| s.0 == 1));
    assert!(shares.iter().any(|s| s.1 >= 5), "{shares:?}");
    let asked: usize = shares.iter().map(|s| s.1).sum();
    let queries: usize = alone.outcomes.iter().map(|o| o.queries).sum();
    assert!(
        asked * 3 <= queries * 2 + 2 * shares.len() && asked * 3 >= queries,
        "{asked} of {queries}"
    );
}

#[test]
fn candidates_scored_infinite_or_nan_are_skipped_not_picked() {
    // -inf would be the largest drop of all: picked, it would give an outcome
    // no JSON can hold. Skipped, the search goes on with the finite scores.
    let items = wmt(4);
    let engine = Engine::lexical();
    let config = AttackConfig::new(Goal::OverPenalise, Strategy::DeepWordBug);
    let mut helpers = Helpers::new(vec![Engine::lexical()]);
    helpers.broken = Some("not finite");
    let tools = AttackTools {
        pool: Some(&helpers),
        ..AttackTools::default()
    };
    let run = run(&engine, &items, "chrf", &config, &tools);
    assert!(!helpers.shares.borrow().is_empty());
    run.check().unwrap();
    for o in &run.outcomes {
        assert!(o.final_score.is_finite() && o.trajectory.iter().all(|t| t.score.is_finite()));
    }
    serde_json::from_str::<AttackOutcome>(&serde_json::to_string(&run.outcomes[0]).unwrap())
        .unwrap();
}

#[test]
fn helpers_give_a_model_metric_the_scores_it_gets_alone() {
    let items = wmt(3);
    let store = || Store(HashMap::from([(ModelSlot::BertScore, minilm())]));
    let engine = Engine::new(store()).with_reference_cache();
    let mut config = AttackConfig::new(Goal::Inconsistency, Strategy::DeepWordBug);
    config.budget = 60;
    let alone = run(
        &engine,
        &items,
        "bertscore-f",
        &config,
        &AttackTools::default(),
    );
    let helpers = Helpers::new(vec![Engine::new(store()).with_reference_cache()]);
    let tools = AttackTools {
        pool: Some(&helpers),
        ..AttackTools::default()
    };
    let pooled = run(&engine, &items, "bertscore-f", &config, &tools);
    assert!(!helpers.shares.borrow().is_empty());
    check(&engine, &pooled, &items, 2e-6);
    for (a, p) in alone.outcomes.iter().zip(&pooled.outcomes) {
        // A text's score depends on the other texts of its pass only
        // through padding (below 1e-6): the same search, step by step.
        assert_eq!((&a.text, a.queries, a.stop), (&p.text, p.queries, p.stop));
        assert!((a.final_score - p.final_score).abs() < 1e-6);
        let trajectory =
            |o: &AttackOutcome| o.trajectory.iter().map(|t| t.score).collect::<Vec<_>>();
        assert!(common::max_deviation(&trajectory(a), &trajectory(p)) < 1e-6);
    }
}

#[test]
fn a_failing_helper_is_given_up_and_its_share_scored_here() {
    let items = wmt(4);
    let engine = Engine::lexical();
    let spec = spec("chrf");
    let config = AttackConfig::new(Goal::OverPenalise, Strategy::DeepWordBug);
    let z = block_on(z_norm(&engine, &spec, &items)).unwrap();
    let item = &items[0];
    let refs: Vec<&str> = item.refs.iter().map(String::as_str).collect();
    let outcome = |tools: &AttackTools| {
        let mut attack = block_on(Attack::new(
            &engine,
            &spec,
            &config,
            tools,
            z,
            &item.gold,
            &refs,
            item.src.as_deref(),
        ))
        .unwrap();
        while !block_on(attack.step()).unwrap() {}
        (
            attack.outcome(0, &item.id),
            attack.pool_failure(),
            attack.helpers_used(),
        )
    };
    let (alone, none, used) = outcome(&AttackTools::default());
    assert_eq!((none, used), (None, 0));
    // Helpers that are ready only from the third batch on: the first two are
    // scored here, the rest shared; the same search.
    let late = Helpers::new(vec![Engine::lexical(), Engine::lexical()]);
    late.loading.set(2);
    let tools = AttackTools {
        pool: Some(&late),
        ..AttackTools::default()
    };
    let (pooled, failure, used) = outcome(&tools);
    assert_eq!((pooled, failure, used), (alone.clone(), None, 2));
    assert!(!late.shares.borrow().is_empty());
    for (broken, says) in [
        (
            "the helper ran out of memory",
            "the helper ran out of memory",
        ),
        ("short", "returned"),
    ] {
        let mut helpers = Helpers::new(vec![Engine::lexical()]);
        helpers.broken = Some(broken);
        let tools = AttackTools {
            pool: Some(&helpers),
            ..AttackTools::default()
        };
        let (pooled, failure, used) = outcome(&tools);
        assert_eq!((pooled, used), (alone.clone(), 0));
        let failure = failure.expect("the failure is reported");
        assert!(failure.contains(says), "{failure}");
        // Asked once, then never again.
        assert_eq!(helpers.shares.borrow().len(), 1);
    }
}
