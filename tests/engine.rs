//! The metric engine from the outside: sharded suites merged back exactly,
//! the preference suite and the audit with model-based metrics (equal to
//! `blindspot score` on the same pairs), and hostile checkpoints and inputs
//! (a clear error or a valid score, never a panic).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use blindspot::data::{self, Item};
use blindspot::metrics::spec::OptionValue;
use blindspot::metrics::{Engine, MetricId, Segment, Settings};
use blindspot::stress::suite::{PartMerger, Shard, SuiteConfig, SuiteModels, SuitePart, merge};
use serde_json::Value;

use crate::common;
use common::{DATA, assert_user_error as user_error, run_part, run_suite};

const MINILM: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/models/all-MiniLM-L6-v2");

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/plm")
        .join(name)
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("blindspot-engine-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn blindspot(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_blindspot"))
        .args(args)
        .output()
        .unwrap()
}

fn ok(out: &Output) -> &Output {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn wmt(limit: usize) -> Vec<Item> {
    let text = std::fs::read_to_string(format!("{DATA}/wmt21_de_en.jsonl")).unwrap();
    let mut items = data::load_wmt(&text).rows;
    items.truncate(limit);
    items
}

#[test]
fn sharded_suites_merge_into_exactly_the_unsharded_report() {
    let items = wmt(10);
    let config = SuiteConfig {
        injections: [
            "truncation",
            "negation",
            "sentence_replacement",
            "token_drop",
            // Samples from the whole dataset's n-gram counts, whatever the shard.
            "frequent_3gram",
        ]
        .map(String::from)
        .to_vec(),
        metrics: ["bleu", "chrf", "rougeL"].map(String::from).to_vec(),
        seeds: 2,
        rouge_stemmer: false,
        open_ended: false,
    };
    let whole = run_suite("wmt", &items, &config, None, &|_, _| true).unwrap();
    let part = |index, count| {
        run_part(
            "wmt",
            &items,
            &config,
            SuiteModels::default(),
            Some(Shard { index, count }),
            &|_, _| true,
        )
        .unwrap()
    };
    // Shards in any order, more shards than some hold items: the same report, bit for bit.
    let parts: Vec<SuitePart> = (0..3).rev().map(|i| part(i, 3)).collect();
    assert_eq!(merge(parts).unwrap(), whole);
    let parts: Vec<SuitePart> = (0..12).map(|i| part(i, 12)).collect();
    assert!(parts.iter().any(|p| p.indices.is_empty()));
    assert_eq!(merge(parts).unwrap(), whole);
    // A missing or repeated shard is refused.
    let err = merge(vec![part(0, 3), part(2, 3)]).unwrap_err();
    assert!(err.to_string().contains("missing"), "{err}");
    let err = merge(vec![part(0, 2), part(0, 2), part(1, 2)]).unwrap_err();
    assert!(err.to_string().contains("repeated"), "{err}");
    // A damaged part (an item's outcomes cut short) is refused, not indexed.
    let mut damaged = part(1, 2);
    damaged.tests[0].items[0].scores.pop();
    let err = merge(vec![part(0, 2), damaged]).unwrap_err();
    assert!(err.to_string().contains("damaged"), "{err}");
    // Parts of another configuration are refused.
    let other = SuiteConfig {
        seeds: 1,
        ..config.clone()
    };
    let stranger = run_part(
        "wmt",
        &items,
        &other,
        SuiteModels::default(),
        Some(Shard { index: 1, count: 2 }),
        &|_, _| true,
    )
    .unwrap();
    let err = merge(vec![part(0, 2), stranger]).unwrap_err().to_string();
    // The message says what differs.
    assert!(err.contains("different runs (configuration {"), "{err}");
    assert!(
        err.contains("\"seeds\":1") && err.contains(&format!("\"seeds\":{}", config.seeds)),
        "{err}"
    );
    assert!("3/3".parse::<Shard>().is_err() && "1/0".parse::<Shard>().is_err());
    assert_eq!(
        "1/4".parse::<Shard>().unwrap(),
        Shard { index: 1, count: 4 }
    );
}

/// The page's workers: each shard streams its tests as it finishes them,
/// and the tests every shard has finished merge into the unsharded
/// report's first tests; all of them into the whole report. A test skipped
/// (no LM tokenizer for positioned_random) is skipped alike.
#[test]
fn streamed_shard_tests_merge_test_by_test_into_the_unsharded_report() {
    let items = wmt(12);
    let config = SuiteConfig {
        injections: ["truncation", "positioned_random", "negation", "token_drop"]
            .map(String::from)
            .to_vec(),
        metrics: ["bleu", "chrf"].map(String::from).to_vec(),
        seeds: 2,
        rouge_stemmer: false,
        open_ended: false,
    };
    let whole = run_suite("wmt", &items, &config, None, &|_, _| true).unwrap();
    let streamed = |index| {
        let sent = std::cell::RefCell::new(Vec::new());
        let tell = |p: &SuitePart| sent.borrow_mut().push(p.clone());
        let models = SuiteModels {
            on_part: Some(&tell),
            ..SuiteModels::default()
        };
        let shard = Some(Shard { index, count: 2 });
        let part = run_part("wmt", &items, &config, models, shard, &|_, _| true).unwrap();
        let sent = sent.into_inner();
        // One message per test, each with the shard's items and that test alone.
        assert_eq!(sent.len(), 4);
        for (t, p) in sent.iter().enumerate() {
            assert_eq!(
                (&p.indices, &p.base, p.shard),
                (&part.indices, &part.base, shard)
            );
            assert_eq!(p.tests, [part.tests[t].clone()]);
        }
        sent
    };
    let (a, b) = (streamed(0), streamed(1));
    let upto = |sent: &[SuitePart], n: usize| SuitePart {
        tests: sent[..n].iter().map(|p| p.tests[0].clone()).collect(),
        ..sent[0].clone()
    };
    assert!(whole.tests[1].skipped.is_some());
    assert_eq!(merge(vec![upto(&a, 4), upto(&b, 4)]).unwrap(), whole);
    // A whole merge refuses parts that stop short.
    let err = merge(vec![upto(&a, 4), upto(&b, 2)])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("different tests") || err.contains("one test per injection"),
        "{err}"
    );

    // The merger worker's merger, fed as the workers' messages come (shard
    // 0 ahead by two tests, then one, then level): a report each time both
    // shards have finished one more test.
    let mut merger = PartMerger::new(2);
    let order = [
        (&a, 0),
        (&a, 1),
        (&b, 0),
        (&a, 2),
        (&b, 1),
        (&b, 2),
        (&a, 3),
        (&b, 3),
    ];
    let mut reports = Vec::new();
    for (sent, t) in order {
        if let Some(report) = merger.add(sent[t].clone()).unwrap() {
            reports.push(report.clone());
        }
    }
    assert_eq!(reports.len(), 4);
    for (n, report) in reports.iter().enumerate() {
        assert_eq!(report.tests, whole.tests[..=n], "after {} tests", n + 1);
        assert_eq!(
            (&report.base, &report.metrics),
            (&whole.base, &whole.metrics)
        );
    }
    assert_eq!(merger.finish().unwrap(), whole);
    // A part of another run's sharding is refused.
    for shard in [Shard { index: 0, count: 3 }, Shard { index: 2, count: 2 }] {
        let mut stranger = a[0].clone();
        stranger.shard = Some(shard);
        let err = PartMerger::new(2).add(stranger).unwrap_err().to_string();
        assert!(err.contains("no shard of this run"), "{err}");
    }
}

#[test]
fn cli_shards_and_merge_write_the_unsharded_report() {
    let dir = scratch("shards");
    let data = format!("{DATA}/wmt21_de_en.jsonl");
    let common = [
        "stress",
        "--data",
        &data,
        "--format",
        "wmt",
        "--limit",
        "9",
        "--seeds",
        "2",
        "--injections",
        "truncation,negation",
    ];
    let whole: Value = serde_json::from_slice(&ok(&blindspot(&common)).stdout).unwrap();
    let mut parts = Vec::new();
    for i in 0..3 {
        let path = dir.join(format!("part{i}.json")).display().to_string();
        let shard = format!("{i}/3");
        let mut args = common.to_vec();
        args.extend(["--shard", &shard, "--out", &path]);
        ok(&blindspot(&args));
        parts.push(path);
    }
    let mut args = vec!["merge"];
    args.extend(parts.iter().map(String::as_str));
    let merged: Value = serde_json::from_slice(&ok(&blindspot(&args)).stdout).unwrap();
    assert_eq!(merged, whole);
    // A shard alone is not a report; a file that is no part is named.
    user_error(&blindspot(&["merge", &parts[0]]), "missing");
    let bogus = dir.join("report.json");
    std::fs::write(&bogus, r#"{"tool": "blindspot", "tests": []}"#).unwrap();
    user_error(
        &blindspot(&["merge", &bogus.display().to_string()]),
        "not a partial result",
    );
}

/// The first `n` cases of the MENLI WMT20 suite, written as a MENLI CSV.
fn menli_subset(dir: &Path, n: usize) -> (PathBuf, Vec<data::MenliCase>) {
    let mut reader = csv::Reader::from_path(format!("{DATA}/menli_wmt20_de.csv")).unwrap();
    let path = dir.join("menli.csv");
    let mut writer = csv::Writer::from_path(&path).unwrap();
    writer.write_record(reader.headers().unwrap()).unwrap();
    // Two cases of each error type, so that every type is scored.
    let mut per_type = std::collections::HashMap::<String, usize>::new();
    for record in reader.records() {
        let record = record.unwrap();
        let seen = per_type.entry(record[0].to_owned()).or_default();
        if *seen < n {
            *seen += 1;
            writer.write_record(&record).unwrap();
        }
    }
    writer.flush().unwrap();
    let cases = data::load_menli_csv(&std::fs::read_to_string(&path).unwrap())
        .unwrap()
        .rows;
    (path, cases)
}

#[test]
fn prefer_runs_menli_combined_over_the_whole_suite_at_once() {
    // MENLI's min-max combination reads the scores of the whole set: the
    // preference suite scores every case in one call (the batch is the set).
    let dir = scratch("prefer-combined");
    let (csv, cases) = menli_subset(&dir, 1);
    let menli = format!("menli={}", fixture("roberta_cls").display());
    let args = [
        "prefer",
        "--menli",
        csv.to_str().unwrap(),
        "--metrics",
        "menli",
        "--menli-combine",
        "bleu",
        "--model",
        &menli,
    ];
    let report: Value = serde_json::from_slice(&ok(&blindspot(&args)).stdout).unwrap();
    assert_eq!(report["cases"], cases.len());
    let signature = report["metrics"][0]["metric"]["signature"]
        .as_str()
        .unwrap();
    assert!(signature.contains("combine:bleu"), "{signature}");
}

#[test]
fn prefer_with_model_metrics_equals_score_on_the_same_pairs() {
    let dir = scratch("prefer");
    let (csv, cases) = menli_subset(&dir, 2);
    assert_eq!(cases.len(), 24);
    let menli = format!("menli={}", fixture("roberta_cls").display());
    let mover = format!(
        "moverscore-v1={}/tests/fixtures/moverscore/tiny-bert-mnli",
        env!("CARGO_MANIFEST_DIR")
    );
    let models = [
        "--model-dir",
        MINILM,
        "--model",
        &menli,
        "--model",
        &mover,
        "--moverscore-ngram",
        "2",
    ];
    let metrics = "bleu,bertscore-f,menli,moverscore-v1";
    let mut args = vec![
        "prefer",
        "--menli",
        csv.to_str().unwrap(),
        "--metrics",
        metrics,
    ];
    args.extend(models);
    let report: Value = serde_json::from_slice(&ok(&blindspot(&args)).stdout).unwrap();
    // The same four texts per case through `blindspot score`.
    let mut lines = String::new();
    for c in &cases {
        for (hyp, against) in [
            (&c.paraphrase, &c.reference),
            (&c.adversarial_ref_based, &c.reference),
            (&c.reference, &c.source),
            (&c.adversarial_ref_free, &c.source),
        ] {
            let line = serde_json::json!({ "hyp": hyp, "ref": against, "src": c.source });
            lines.push_str(&format!("{line}\n"));
        }
    }
    let input = dir.join("pairs.jsonl");
    std::fs::write(&input, lines).unwrap();
    let mut args = vec![
        "score",
        "--input",
        input.to_str().unwrap(),
        "--metrics",
        metrics,
        "--format",
        "jsonl",
    ];
    args.extend(models);
    let out = ok(&blindspot(&args)).stdout.clone();
    let rows: Vec<Value> = String::from_utf8(out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|v: &Value| v.get("pair").is_some())
        .collect();
    assert_eq!(rows.len(), 4 * cases.len());
    let errors: Vec<String> = report["error_types"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(errors.len(), 12);
    for (m, id) in metrics.split(',').enumerate() {
        let entry = &report["metrics"][m];
        assert_eq!(entry["metric"]["id"], id);
        for (e, error) in errors.iter().enumerate() {
            let (mut based, mut free) = (0, 0);
            for (k, c) in cases.iter().enumerate().filter(|(_, c)| &c.error == error) {
                let v = |j: usize| rows[4 * k + j][id].as_f64().unwrap();
                based += usize::from(v(0) > v(1));
                free += usize::from(v(2) > v(3));
                assert_eq!(c.error, *error);
            }
            assert_eq!(entry["ref_based"][e]["passed"], based, "{id} {error}");
            assert_eq!(entry["ref_free"][e]["passed"], free, "{id} {error}");
            assert_eq!(entry["ref_based"][e]["total"], 2);
        }
    }
    let sig = report["metrics"][1]["metric"]["signature"]
        .as_str()
        .unwrap();
    assert!(
        sig.starts_with("bertscore|model:all-MiniLM-L6-v2|layer:6"),
        "{sig}"
    );
}

#[test]
fn audit_with_model_metrics_equals_score_on_the_same_summaries() {
    let dir = scratch("audit");
    let text = std::fs::read_to_string(format!("{DATA}/summeval.jsonl")).unwrap();
    let head: String = text.lines().take(3).map(|l| format!("{l}\n")).collect();
    let path = dir.join("summeval3.jsonl");
    std::fs::write(&path, &head).unwrap();
    let docs = data::load_summeval(&head).rows;
    let mut args = vec!["audit", "--summeval", path.to_str().unwrap()];
    // MoverScore averages over the 11 references (and reads idf-free weights).
    let mover = format!("moverscore={MINILM}");
    args.extend([
        "--metrics",
        "rouge1,bertscore-f,moverscore",
        "--model-dir",
        MINILM,
    ]);
    args.extend(["--model", &mover]);
    let report: Value = serde_json::from_slice(&ok(&blindspot(&args)).stdout).unwrap();
    // Each summary scored by `blindspot score` against the document's gold
    // summary and its other references.
    let mut lines = String::new();
    let mut humans: Vec<Vec<f64>> = vec![];
    let dims: Vec<String> = report["dimensions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_str().unwrap().to_owned())
        .collect();
    for doc in &docs {
        let mut refs = vec![doc.item.gold.clone()];
        refs.extend(
            doc.item
                .refs
                .iter()
                .filter(|r| **r != doc.item.gold)
                .cloned(),
        );
        for s in &doc.systems {
            let line = serde_json::json!({ "hyp": s.summary, "ref": refs, "src": doc.item.src });
            lines.push_str(&format!("{line}\n"));
            humans.push(
                dims.iter()
                    .map(|d| s.scores.iter().find(|(k, _)| k == d).unwrap().1)
                    .collect(),
            );
        }
    }
    let input = dir.join("summaries.jsonl");
    std::fs::write(&input, lines).unwrap();
    let out = blindspot(&[
        "score",
        "--input",
        input.to_str().unwrap(),
        "--metrics",
        "rouge1,bertscore-f,moverscore",
        "--format",
        "jsonl",
        "--model-dir",
        MINILM,
        "--model",
        &mover,
    ]);
    let rows: Vec<Value> = String::from_utf8(ok(&out).stdout.clone())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|v: &Value| v.get("pair").is_some())
        .collect();
    assert_eq!(rows.len(), 48);
    for (m, id) in ["rouge1", "bertscore-f", "moverscore"].iter().enumerate() {
        let values: Vec<f64> = rows.iter().map(|r| r[id].as_f64().unwrap()).collect();
        for (d, dim) in dims.iter().enumerate() {
            let human: Vec<f64> = humans.iter().map(|h| h[d]).collect();
            let expected = blindspot::stress::audit::correlation(&values, &human);
            let got = &report["metrics"][m]["human"][d];
            assert_eq!(
                got["kendall"].as_f64().unwrap(),
                expected.kendall,
                "{id} {dim}"
            );
            assert_eq!(
                got["pearson"].as_f64().unwrap(),
                expected.pearson,
                "{id} {dim}"
            );
        }
    }
}

/// A copy of a fixture checkpoint with `edit` applied to its config.json.
fn hostile_checkpoint(edit: impl Fn(&mut Value)) -> PathBuf {
    let dir = scratch(&format!("ckpt-{}", rand_name()));
    for file in ["model.safetensors", "tokenizer.json"] {
        std::fs::copy(fixture("bert_cls").join(file), dir.join(file)).unwrap();
    }
    let mut config: Value = serde_json::from_str(
        &std::fs::read_to_string(fixture("bert_cls").join("config.json")).unwrap(),
    )
    .unwrap();
    edit(&mut config);
    std::fs::write(dir.join("config.json"), config.to_string()).unwrap();
    dir
}

fn rand_name() -> String {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    N.fetch_add(1, Ordering::Relaxed).to_string()
}

#[test]
fn hostile_configs_are_refused_at_load_naming_the_field() {
    type Edit = Box<dyn Fn(&mut Value)>;
    let cases: Vec<(&str, Edit, &str)> = vec![
        (
            "zero heads",
            Box::new(|c| c["num_attention_heads"] = 0.into()),
            "num_attention_heads is 0",
        ),
        (
            "heads that do not divide",
            Box::new(|c| c["num_attention_heads"] = 5.into()),
            "num_attention_heads (5) does not divide hidden_size (32)",
        ),
        (
            "zero layers",
            Box::new(|c| c["num_hidden_layers"] = 0.into()),
            "num_hidden_layers is 0",
        ),
        (
            "zero width",
            Box::new(|c| c["hidden_size"] = 0.into()),
            "hidden_size is 0",
        ),
        (
            "no positions",
            Box::new(|c| c["max_position_embeddings"] = 0.into()),
            "max_position_embeddings is 0",
        ),
        (
            "no vocabulary",
            Box::new(|c| c["vocab_size"] = 0.into()),
            "vocab_size is 0",
        ),
        (
            "a negative layer-norm epsilon (every output NaN)",
            Box::new(|c| c["layer_norm_eps"] = (-1).into()),
            "layer_norm_eps is -1",
        ),
        (
            "label maps that disagree",
            Box::new(|c| c["id2label"]["3"] = "other".into()),
            "label2id has 3 labels but id2label has 4",
        ),
        (
            "a label map larger than the classifier",
            Box::new(|c| {
                c["id2label"]["3"] = "other".into();
                c["label2id"]["other"] = 3.into();
            }),
            "classifier",
        ),
    ];
    for (what, edit, needle) in cases {
        let dir = hostile_checkpoint(edit);
        // The CLI: one line naming the field.
        user_error(
            &blindspot(&["embed", "--model", dir.to_str().unwrap(), "a text"]),
            needle,
        );
        // The library the page calls: an error, not a panic.
        let files = blindspot::models::ModelFiles::from_path(&dir).unwrap();
        let loaded = blindspot::models::Plm::load(
            "hostile",
            files,
            &burn::tensor::Device::flex(),
            blindspot::models::Precision::F32,
        );
        let err = loaded.err().unwrap_or_else(|| panic!("{what} loaded"));
        assert!(err.to_string().contains(needle), "{what}: {err}");
    }
}

/// A NaN in a checkpoint's weights (a broken file) makes every model output
/// NaN. It must be an error naming the cause, never a score: a NaN cosine
/// similarity reads as 0 in BERTScore's max.
#[test]
fn nan_weights_give_an_error_not_a_score() {
    let dir = hostile_checkpoint(|_| {});
    let file = dir.join("model.safetensors");
    let mut bytes = std::fs::read(&file).unwrap();
    let header_len = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: Value = serde_json::from_slice(&bytes[8..8 + header_len]).unwrap();
    let (name, tensor) = header
        .as_object()
        .unwrap()
        .iter()
        .find(|(name, _)| name.contains("embeddings.word_embeddings"))
        .unwrap();
    assert_eq!(tensor["dtype"], "F32", "{name}");
    let start = 8 + header_len + tensor["data_offsets"][0].as_u64().unwrap() as usize;
    let end = 8 + header_len + tensor["data_offsets"][1].as_u64().unwrap() as usize;
    for value in bytes[start..end].chunks_mut(4) {
        value.copy_from_slice(&f32::NAN.to_le_bytes());
    }
    std::fs::write(&file, bytes).unwrap();
    let input = dir.join("pairs.jsonl");
    std::fs::write(&input, r#"{"ref": "a cat sat", "hyp": "a cat sits"}"#).unwrap();
    let needle = "the model computed NaN or infinite values";
    user_error(
        &blindspot(&["embed", "--model", dir.to_str().unwrap(), "a text"]),
        needle,
    );
    user_error(
        &blindspot(&[
            "score",
            "--metrics",
            "bertscore-f",
            "--model-dir",
            dir.to_str().unwrap(),
            "--input",
            input.to_str().unwrap(),
        ]),
        needle,
    );
}

/// Texts users paste: empty, blank, emoji and combining marks, right-to-left,
/// NUL bytes, unbalanced quotes, and 20,000 words.
fn hostile_texts() -> Vec<String> {
    let long = (0..20_000)
        .map(|i| format!("w{}", i % 97))
        .collect::<Vec<_>>()
        .join(" ");
    vec![
        String::new(),
        " \n\t  ".into(),
        "🙂👍🏽 e\u{301}te\u{301} cafe\u{301} 👨‍👩‍👧".into(),
        "مرحبا بالعالم، هذا نص من اليمين إلى اليسار".into(),
        "nul\0inside\0".into(),
        "\"unbalanced 'quotes, \"here".into(),
        long,
    ]
}

#[test]
fn hostile_texts_get_a_score_or_a_clear_error_from_every_metric() {
    let texts = hostile_texts();
    let settings = Settings::default();
    let lexical: Vec<_> = MetricId::ALL
        .iter()
        .filter(|id| !id.is_model_based())
        .map(|&id| settings.spec(id).unwrap())
        .collect();
    let refs_of = |r: &str| vec![r.to_owned()];
    for hyp in &texts {
        for reference in &texts {
            let refs = refs_of(reference);
            let refs: Vec<&str> = refs.iter().map(String::as_str).collect();
            // The page passes the reference box through the one reference rule.
            let page_refs = blindspot::text::references(reference);
            for r in [&refs, &page_refs] {
                let seg = [Segment {
                    hyp,
                    refs: r,
                    src: Some(reference),
                }];
                match Engine::score_lexical(&lexical, &seg) {
                    Ok(columns) => {
                        for c in columns {
                            assert!(c.scores[0].value.is_finite(), "{:?}", c.spec);
                        }
                    }
                    Err(e) => assert!(!e.to_string().is_empty()),
                }
            }
        }
        // Every injection that needs no model (on the 20,000 words, one per
        // family, to keep the test short): a text or a clear error.
        let mut families = Vec::new();
        for inj in blindspot::inject::registry()
            .into_iter()
            .filter(|i| !i.info().needs_masked_lm && !i.info().needs_lm_tokenizer)
            .filter(|i| {
                let first = !families.contains(&i.info().family);
                families.push(i.info().family);
                hyp.len() < 10_000 || first
            })
        {
            let ctx = blindspot::inject::Context {
                source: Some("A source sentence."),
                samples: &["Another sample.", "And one more."],
                ..Default::default()
            };
            let level = inj.info().default_levels[0];
            if let Err(e) = blindspot::inject::apply(inj, hyp, level, 1, &ctx) {
                assert!(!e.to_string().is_empty());
            }
        }
    }
    // A model metric on the same texts (MiniLM): truncated, scored or refused.
    struct MiniLm(std::rc::Rc<blindspot::models::Plm>);
    impl blindspot::metrics::ModelStore for MiniLm {
        fn model(
            &self,
            _: blindspot::metrics::ModelSlot,
            _: Option<&str>,
        ) -> Result<std::rc::Rc<blindspot::models::Plm>, blindspot::metrics::EngineError> {
            Ok(self.0.clone())
        }
    }
    let plm = blindspot::models::Plm::load(
        "all-MiniLM-L6-v2",
        blindspot::models::ModelFiles::from_path(MINILM.as_ref()).unwrap(),
        &burn::tensor::Device::flex(),
        blindspot::models::Precision::F32,
    )
    .unwrap();
    let engine = Engine::new(MiniLm(std::rc::Rc::new(plm)));
    let specs = settings.specs(&["bertscore-f"]).unwrap();
    for hyp in &texts {
        let refs = [texts[2].as_str(), texts[6].as_str()];
        let seg = [Segment {
            hyp,
            refs: &refs,
            src: None,
        }];
        match futures::executor::block_on(engine.score(&specs, &seg)) {
            Ok(c) => assert!(c[0].scores[0].value.is_finite(), "{hyp:.40}"),
            Err(e) => assert!(!e.to_string().is_empty()),
        }
    }
}

#[test]
fn hostile_files_give_one_line_errors() {
    let dir = scratch("files");
    // A MENLI CSV whose quote never closes.
    let csv = dir.join("bad.csv");
    std::fs::write(
        &csv,
        "error,id,source,ref,hyp_para,hyp_adv_based,hyp_adv_free\nnum,1,\"open quote,a,b,c,d\n",
    )
    .unwrap();
    let out = blindspot(&["prefer", "--menli", csv.to_str().unwrap()]);
    assert!(!String::from_utf8_lossy(&out.stderr).contains("panicked"));
    assert_ne!(out.status.code(), Some(101));
    // A dataset without sources gives no preference case: an error, not
    // an accuracy of 0 over nothing.
    let data = dir.join("no_source.jsonl");
    std::fs::write(
        &data,
        "{\"hyp\": \"The cat sat on the mat.\", \"ref\": \"A cat was sitting on the mat.\"}\n",
    )
    .unwrap();
    let out = blindspot(&[
        "prefer",
        "--data",
        data.to_str().unwrap(),
        "--format",
        "jsonl",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no preference case"));
    // Hostile texts through `blindspot score`: a score for each, or one line.
    let mut lines = String::new();
    for t in hostile_texts().iter().filter(|t| !t.trim().is_empty()) {
        lines.push_str(&format!("{}\n", serde_json::json!({ "hyp": t, "ref": t })));
    }
    let input = dir.join("hostile.jsonl");
    std::fs::write(&input, lines).unwrap();
    ok(&blindspot(&[
        "score",
        "--input",
        input.to_str().unwrap(),
        "--format",
        "jsonl",
    ]));
    // A report with missing fields for the HTML renderer: refused when read.
    let partial =
        r#"{"tool": "blindspot 0", "dataset": "x", "tests": [{"injection": "truncation"}]}"#;
    let err = serde_json::from_str::<blindspot::stress::suite::SuiteReport>(partial).unwrap_err();
    assert!(err.to_string().contains("missing field"), "{err}");
}

#[test]
fn the_page_engine_shares_embeddings_between_cards_without_changing_a_score() {
    use blindspot::metrics::{EngineError, ModelSlot, ModelStore};
    use blindspot::models::{ModelFiles, Plm, Precision};
    use std::rc::Rc;
    struct MiniLm(Rc<Plm>);
    impl ModelStore for MiniLm {
        fn model(&self, _: ModelSlot, _: Option<&str>) -> Result<Rc<Plm>, EngineError> {
            Ok(self.0.clone())
        }
    }
    let plm = Rc::new(
        Plm::load(
            "all-MiniLM-L6-v2",
            ModelFiles::from_path(MINILM.as_ref()).unwrap(),
            &burn::tensor::Device::flex(),
            Precision::F32,
        )
        .unwrap(),
    );
    let specs = Settings::default()
        .specs(&["bertscore-f", "moverscore"])
        .unwrap();
    let refs = ["The committee approved the new budget on Tuesday."];
    // The page's engine (details on: embeddings kept) scores as a user types,
    // one card at a time; a fresh engine without a cache scores each text alone.
    let page = Engine::new(MiniLm(plm.clone())).with_details();
    for hyp in [
        "The committee approved the budget.",
        "The committee approved the budget on",
        "The committee approved the budget on ",
        "The committee approved the budget on Tuesday.",
        "  The committee approved the budget on Tuesday.  ",
    ] {
        let seg = [Segment {
            hyp,
            refs: &refs,
            src: None,
        }];
        for spec in &specs {
            let kept =
                futures::executor::block_on(page.score(std::slice::from_ref(spec), &seg)).unwrap();
            let alone = futures::executor::block_on(
                Engine::new(MiniLm(plm.clone())).score(std::slice::from_ref(spec), &seg),
            )
            .unwrap();
            assert_eq!(
                kept[0].scores[0].value,
                alone[0].scores[0].value,
                "{:?} on {hyp:?}",
                spec.id()
            );
        }
    }
}

/// Serves one model per slot: MiniLM for BERTScore, the random RoBERTa NLI
/// classifier for MENLI, the tiny MNLI BERT for MoverScore.
struct Slots {
    minilm: std::rc::Rc<blindspot::models::Plm>,
    nli: std::rc::Rc<blindspot::models::Plm>,
    mover: std::rc::Rc<blindspot::models::Plm>,
}

impl blindspot::metrics::ModelStore for Slots {
    fn model(
        &self,
        slot: blindspot::metrics::ModelSlot,
        _: Option<&str>,
    ) -> Result<std::rc::Rc<blindspot::models::Plm>, blindspot::metrics::EngineError> {
        use blindspot::metrics::ModelSlot;
        Ok(match slot {
            ModelSlot::BertScore => self.minilm.clone(),
            ModelSlot::Menli => self.nli.clone(),
            _ => self.mover.clone(),
        })
    }
}

/// The preference suite scores the texts that should win and those with
/// the error in calls of their own, as MENLI's `adv_test.py`: idf counts each
/// reference once and reads each side's hypotheses apart. MENLI's min-max
/// combination normalises one error type's both sides together. Both are
/// checked against the passes those calls give, on cases where scoring
/// both sides as one set (as before) passes a different number.
#[test]
fn prefer_scores_each_side_apart_and_menli_min_max_per_error_type() {
    use blindspot::data::MenliCase;
    use blindspot::models::{ModelFiles, Plm, Precision};
    let dir = scratch("prefer-sides");
    let (_, cases) = menli_subset(&dir, 4);
    let load = |path: &Path| {
        std::rc::Rc::new(
            Plm::load(
                "m",
                ModelFiles::from_path(path).unwrap(),
                &burn::tensor::Device::flex(),
                Precision::F32,
            )
            .unwrap(),
        )
    };
    let engine = Engine::new(Slots {
        minilm: load(MINILM.as_ref()),
        nli: load(&fixture("roberta_cls")),
        mover: load(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/moverscore/tiny-bert-mnli"),
        ),
    });
    let idf = Settings::default().with(OptionValue::new(None, "idf", true));
    let combined = Settings::default().with(OptionValue::new(Some("menli"), "combine", "bleu"));
    let types: Vec<String> = cases.iter().fold(Vec::new(), |mut seen, c| {
        if !seen.contains(&c.error) {
            seen.push(c.error.clone());
        }
        seen
    });
    // Passes per error type, [reference-based, reference-free], with each
    // group of cases (one per error type, or all) scored with both sides
    // apart or as one set.
    let passes = |specs: &[blindspot::metrics::MetricSpec], per_type: bool, apart: bool| {
        let groups: Vec<Vec<&MenliCase>> = if per_type {
            types
                .iter()
                .map(|t| cases.iter().filter(|c| &c.error == t).collect())
                .collect()
        } else {
            vec![cases.iter().collect()]
        };
        let mut out = vec![[0usize; 2]; types.len()];
        for group in groups {
            fn based(c: &MenliCase) -> [&str; 3] {
                [&c.paraphrase, &c.adversarial_ref_based, &c.reference]
            }
            fn free(c: &MenliCase) -> [&str; 3] {
                [&c.reference, &c.adversarial_ref_free, &c.source]
            }
            let settings: [fn(&MenliCase) -> [&str; 3]; 2] = [based, free];
            for (s, texts) in settings.iter().enumerate() {
                let t: Vec<[&str; 3]> = group.iter().map(|c| texts(c)).collect();
                let side = |k: usize| -> Vec<Segment> {
                    t.iter()
                        .zip(&group)
                        .map(|(t, c)| Segment {
                            hyp: t[k],
                            refs: std::slice::from_ref(&t[2]),
                            src: Some(&c.source),
                        })
                        .collect()
                };
                let score = |segs: &[Segment]| {
                    futures::executor::block_on(engine.score(specs, segs)).unwrap()[0].values()
                };
                let (wins, errs) = if apart {
                    (score(&side(0)), score(&side(1)))
                } else {
                    let both = [side(0), side(1)].concat();
                    let v = score(&both);
                    (v[..group.len()].to_vec(), v[group.len()..].to_vec())
                };
                for (i, c) in group.iter().enumerate() {
                    let e = types.iter().position(|t| *t == c.error).unwrap();
                    out[e][s] += usize::from(wins[i] > errs[i]);
                }
            }
        }
        out
    };
    // The suite's passes per error type, [reference-based, reference-free], per metric.
    let run = |specs: &[blindspot::metrics::MetricSpec]| -> Vec<Vec<[usize; 2]>> {
        let report = futures::executor::block_on(blindspot::stress::prefer::run_preference(
            "subset",
            &cases,
            specs,
            &engine,
            async |_, _| true,
        ))
        .unwrap();
        assert_eq!(report.error_types, types);
        report
            .metrics
            .iter()
            .map(|m| {
                (0..types.len())
                    .map(|e| [m.ref_based[e].passed, m.ref_free[e].passed])
                    .collect()
            })
            .collect()
    };
    for (id, settings, per_type, apart) in [
        ("bertscore-f", &idf, false, true),
        ("moverscore-v1", &idf, false, true),
        ("menli", &combined, true, false),
    ] {
        let specs = settings.specs(&[id]).unwrap();
        let got = run(&specs).remove(0);
        let expected = passes(&specs, per_type, apart);
        assert_eq!(got, expected, "{id}");
        assert_ne!(
            passes(&specs, false, false),
            expected,
            "{id}: these cases pass alike either way, so they test nothing"
        );
    }
    // Both in one run: MENLI's calls per error type leave BERTScore's idf
    // (every case's references, each side apart) as it is alone.
    let both = Settings::default()
        .with(OptionValue::new(None, "idf", true))
        .with(OptionValue::new(Some("menli"), "combine", "bleu"));
    let specs = both.specs(&["bertscore-f", "menli"]).unwrap();
    let got = run(&specs);
    for (m, (per_type, apart)) in [(false, true), (true, false)].into_iter().enumerate() {
        assert_eq!(
            got[m],
            passes(&specs[m..=m], per_type, apart),
            "{}",
            specs[m].id()
        );
    }
}
