//! The self-evaluation test ([BS] §5.4) on two tiny random GPT-2s (2 and 4
//! layers) and a copy of the first under another name as the independent
//! judge: the matrix, its consistency with what the generator computed,
//! the findings, reproducibility, the CLI and the errors.

use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use blindspot::models::Plm;
use blindspot::models::generate::{Decoding, GenerateOptions, Sampling};
use blindspot::stress::self_eval::{self, SelfEvalOptions, SelfEvalReport};
use futures::executor::block_on;

use crate::common;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn small() -> Plm {
    common::cpu_model("small", &root().join("tests/fixtures/plm/gpt2"))
}

fn deeper() -> Plm {
    common::cpu_model(
        "deeper",
        &root().join("tests/fixtures/self-eval/gpt2-deeper"),
    )
}

fn prompts() -> Vec<String> {
    let text = std::fs::read_to_string(root().join("tests/data/wikitext_a.txt")).unwrap();
    self_eval::prompts(text.lines(), 12)
        .into_iter()
        .take(4)
        .collect()
}

const OPTIONS: SelfEvalOptions = SelfEvalOptions {
    prompt_words: 12,
    max_new_tokens: 10,
    top_k: 50,
    seed: 3,
    beams: 5,
    evaluation: self_eval::Evaluation::Perplexity,
    dimension: blindspot::metrics::geval::Dimension::Coherence,
};

fn run(models: &[(&str, &Plm)], judge: Option<&str>) -> SelfEvalReport {
    block_on(self_eval::run(
        models,
        prompts(),
        &OPTIONS,
        judge,
        async |_, _| ControlFlow::Continue(()),
    ))
    .unwrap()
}

#[test]
fn matrix_findings_and_reproducibility() {
    let (small, deeper) = (small(), deeper());
    assert!(deeper.parameters() > small.parameters());
    let models = [("small", &small), ("deeper", &deeper), ("judge", &small)];
    let report = run(&models, None);
    assert_eq!(report.prompts.len(), 4);
    assert_eq!(report.texts.len(), 12);
    for row in &report.matrix {
        assert_eq!(row.len(), 3);
        assert!(
            row.iter()
                .all(|v| v.is_some_and(|v| v.is_finite() && v > 1.0)),
            "{row:?}"
        );
    }
    // The same model twice writes the same texts and scores like itself.
    for p in 0..4 {
        let text = |g| {
            &report
                .texts
                .iter()
                .find(|t| t.generator == g && t.prompt == p)
                .unwrap()
                .continuation
        };
        assert_eq!(text(0), text(2));
    }
    assert_eq!(report.matrix[0], report.matrix[2]);
    // small vs deeper, judged by the copy of small (the largest model that is
    // neither), and the copy vs deeper, judged by small.
    let pairs: Vec<(usize, usize, usize)> = report
        .findings
        .iter()
        .map(|f| (f.evaluator, f.larger, f.judge))
        .collect();
    assert_eq!(pairs, [(0, 1, 2), (2, 1, 0)]);
    let f = &report.findings[0];
    let m = &report.matrix;
    assert_eq!(f.evaluator_prefers_own, m[0][0] < m[0][1]);
    assert_eq!(f.judge_prefers_larger, m[2][1] < m[2][0]);
    assert_eq!(report.biased, f.biased);
    // A named judge serves where it is neither model; the larger generator never judges.
    assert_eq!(run(&models, Some("judge")).findings, report.findings[..1]);
    assert!(run(&models, Some("deeper")).findings.is_empty());
    // The same seed, the same report.
    assert_eq!(run(&models, None), report);
}

/// A model's perplexity of its own continuation, given the prompt, is what
/// its generation's log-probability says, where the text reads back as the
/// tokens it wrote.
#[test]
fn own_perplexity_is_the_generations_log_probability() {
    let plm = small();
    let mut checked = 0;
    for (p, prompt) in prompts().iter().enumerate() {
        let options = GenerateOptions {
            max_new_tokens: 10,
            decoding: Decoding::Sample(Sampling {
                top_k: 50,
                seed: 3 + p as u64,
                ..Sampling::default()
            }),
            stop_at_eos: true,
            ..GenerateOptions::default()
        };
        let out =
            block_on(plm.generate(prompt, &options, async |_| ControlFlow::Continue(()))).unwrap();
        let whole = plm.encode(&format!("{prompt}{}", out.text)).unwrap().ids();
        let mut wrote = out.input_tokens.clone();
        wrote.extend(&out.generation.tokens);
        if whole != wrote {
            continue;
        }
        let ppl = block_on(self_eval::conditional_perplexity(
            &plm,
            &[(prompt, &out.text)],
        ))
        .unwrap()[0]
            .unwrap();
        let want = (-out.generation.log_prob / out.generation.tokens.len() as f64).exp();
        assert!((ppl - want).abs() <= 1e-4 * want, "{ppl} vs {want}");
        checked += 1;
    }
    assert!(checked >= 2, "only {checked} texts read back as written");
}

#[test]
fn cli_prints_the_matrix_and_writes_the_report() {
    let dir = std::env::temp_dir().join(format!("blindspot-self-eval-{}", std::process::id()));
    let tokenizer = common::gpt2_tokenizer().to_json().unwrap();
    let folders: Vec<PathBuf> = [
        ("small", "tests/fixtures/plm/gpt2"),
        ("deeper", "tests/fixtures/self-eval/gpt2-deeper"),
        ("judge", "tests/fixtures/plm/gpt2"),
    ]
    .iter()
    .map(|(name, from)| {
        let to = dir.join(name);
        std::fs::create_dir_all(&to).unwrap();
        for f in ["config.json", "model.safetensors"] {
            std::fs::copy(root().join(from).join(f), to.join(f)).unwrap();
        }
        std::fs::write(to.join("tokenizer.json"), &tokenizer).unwrap();
        to
    })
    .collect();
    let json = dir.join("report.json");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_blindspot"))
        .arg("self-eval")
        .arg("--models")
        .args(&folders)
        .args([
            "--prompts",
            &root()
                .join("tests/data/wikitext_a.txt")
                .display()
                .to_string(),
        ])
        .args([
            "--limit",
            "4",
            "--prompt-words",
            "12",
            "--max-new-tokens",
            "10",
            "--seed",
            "3",
        ])
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    common::assert_ok(&out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("mean over 4 prompts") && stdout.contains("verdict: "),
        "{stdout}"
    );
    let from_cli: SelfEvalReport =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let (small, deeper) = (small(), deeper());
    let library = run(
        &[("small", &small), ("deeper", &deeper), ("judge", &small)],
        None,
    );
    assert_eq!(from_cli.texts, library.texts);
    assert_eq!(from_cli.findings, library.findings);
    // Two models: no independent judge, so no finding, and the verdict says why.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_blindspot"))
        .arg("self-eval")
        .arg("--models")
        .args(&folders[..2])
        .args([
            "--prompts",
            &root()
                .join("tests/data/wikitext_a.txt")
                .display()
                .to_string(),
        ])
        .args(["--limit", "2", "--max-new-tokens", "4"])
        .output()
        .unwrap();
    common::assert_ok(&out);
    assert!(String::from_utf8_lossy(&out.stdout).contains("verdict: no finding"));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn inputs_it_cannot_run_say_why() {
    let plm = small();
    let err = |models: &[(&str, &Plm)], prompts: Vec<String>, judge| {
        block_on(self_eval::run(
            models,
            prompts,
            &OPTIONS,
            judge,
            async |_, _| ControlFlow::Continue(()),
        ))
        .unwrap_err()
        .to_string()
    };
    assert!(err(&[("a", &plm)], prompts(), None).contains("at least two models"));
    assert!(err(&[("a", &plm), ("b", &plm)], vec![], None).contains("more than 12 words"));
    assert!(
        err(&[("a", &plm), ("b", &plm)], prompts(), Some("c"))
            .contains("`c` is not one of the models")
    );
}

/// The encoder-decoder half: BART and T5 write from the paragraph's first
/// words by beam search, and each scores each text by exp(-BARTScore) given
/// its source. Models of both kinds in one run are refused.
#[test]
fn encoder_decoders_write_by_beam_search_and_score_by_bartscore() {
    let bart = common::cpu_model("bart", &root().join("tests/fixtures/bart/tiny"));
    let t5 = common::cpu_model("t5", &root().join("tests/fixtures/t5/tiny"));
    let t5v1 = common::cpu_model("t5-v1", &root().join("tests/fixtures/t5/tiny-v1"));
    let models = [("bart", &bart), ("t5", &t5), ("t5-v1", &t5v1)];
    let options = SelfEvalOptions {
        max_new_tokens: 8,
        beams: 3,
        ..OPTIONS
    };
    let report = block_on(self_eval::run(
        &models,
        prompts(),
        &options,
        None,
        async |_, _| ControlFlow::Continue(()),
    ))
    .unwrap();
    assert_eq!(report.texts.len(), 12);
    for row in &report.matrix {
        assert!(
            row.iter()
                .all(|v| v.is_some_and(|v| v.is_finite() && v > 1.0)),
            "{row:?}"
        );
    }
    // A cell is the mean over its texts of exp(-BARTScore) given the source.
    let texts: Vec<(&str, &str)> = report
        .texts
        .iter()
        .filter(|t| t.generator == 0)
        .map(|t| (report.prompts[t.prompt].as_str(), t.continuation.as_str()))
        .collect();
    let scored = block_on(blindspot::metrics::bartscore::score(&t5, &texts)).unwrap();
    let mean = scored.iter().map(|s| (-s.score).exp()).sum::<f64>() / scored.len() as f64;
    assert!((report.matrix[1][0].unwrap() - mean).abs() <= 1e-9 * mean);
    // Beam search is deterministic: the same report again.
    let again = block_on(self_eval::run(
        &models,
        prompts(),
        &options,
        None,
        async |_, _| ControlFlow::Continue(()),
    ))
    .unwrap();
    assert_eq!(again, report);
    let gpt2 = small();
    let e = block_on(self_eval::run(
        &[("bart", &bart), ("gpt2", &gpt2)],
        prompts(),
        &options,
        None,
        async |_, _| ControlFlow::Continue(()),
    ))
    .unwrap_err()
    .to_string();
    assert!(e.contains("mix causal LMs and encoder-decoders"), "{e}");
}

/// The LLM-judge form: three tiny instruction models (Llama, Qwen2, Qwen3
/// with their chat templates) summarise two SummEval articles greedily and
/// rate every summary with G-Eval; each summary is the model's greedy
/// answer to the request, each cell the mean of G-Eval's weighted rating
/// computed apart, findings rank higher as better, and the CLI's report is
/// the library's. Models without a chat template are refused.
#[test]
fn g_eval_self_preference_matrix() {
    use blindspot::metrics::geval::{self, Dimension, Role};
    let dir = |n: &str| root().join("tests/fixtures/llm").join(n);
    let names = ["llama", "qwen2", "qwen3"];
    let plms: Vec<Plm> = names
        .iter()
        .map(|n| common::cpu_model(n, &dir(n)))
        .collect();
    let models: Vec<(&str, &Plm)> = names.iter().copied().zip(plms.iter()).collect();
    let rows = common::rows("summeval.jsonl");
    let docs: Vec<String> = [0, 3]
        .iter()
        .map(|&i| rows[i]["src"].as_str().unwrap().to_owned())
        .collect();
    let options = SelfEvalOptions {
        evaluation: self_eval::Evaluation::GEval,
        dimension: Dimension::Coherence,
        max_new_tokens: 12,
        ..SelfEvalOptions::default()
    };
    let report = block_on(self_eval::run(
        &models,
        docs.clone(),
        &options,
        None,
        async |_, _| ControlFlow::Continue(()),
    ))
    .unwrap();
    assert!(report.higher_is_better);
    assert!(
        report.measure.starts_with("G-Eval coherence (1–5"),
        "{}",
        report.measure
    );
    assert_eq!(report.texts.len(), 6);
    let greedy = GenerateOptions {
        max_new_tokens: 12,
        decoding: Decoding::Greedy,
        ..GenerateOptions::default()
    };
    for t in &report.texts {
        let (name, plm) = models[t.generator];
        let ids = self_eval::summary_request(name, plm, &docs[t.prompt]).unwrap();
        let out =
            block_on(plm.generate_ids(&ids, &greedy, async |_| ControlFlow::Continue(()))).unwrap();
        assert_eq!(
            plm.tokenizer.decode_text(&out.tokens).unwrap().trim(),
            t.continuation
        );
    }
    for (e, (_, plm)) in models.iter().enumerate() {
        for g in 0..models.len() {
            let mut values = Vec::new();
            for t in report.texts.iter().filter(|t| t.generator == g) {
                let text = geval::prompt(Dimension::Coherence, &docs[t.prompt], &t.continuation);
                let (ids, _, _) = geval::judge_input(plm, &text, Role::System, true).unwrap();
                values.push(block_on(geval::weighted(plm, &[ids], 1..=5)).unwrap()[0].value);
            }
            let mean = values.iter().sum::<f64>() / values.len() as f64;
            let cell = report.matrix[e][g].unwrap();
            assert!((cell - mean).abs() <= 1e-5, "{e},{g}: {cell} vs {mean}");
            assert!((1.0..=5.0).contains(&cell));
        }
    }
    for f in &report.findings {
        let (own, larger) = (
            report.matrix[f.evaluator][f.evaluator],
            report.matrix[f.evaluator][f.larger],
        );
        assert_eq!(f.evaluator_prefers_own, own.unwrap() > larger.unwrap());
    }
    // The CLI: the same report from the folders.
    let tmp = std::env::temp_dir().join(format!("self-eval-geval-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let paragraphs = tmp.join("docs.txt");
    std::fs::write(&paragraphs, docs.join("\n") + "\n").unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_blindspot"))
        .arg("self-eval")
        .arg("--models")
        .args(names.map(dir))
        .arg("--prompts")
        .arg(&paragraphs)
        .args([
            "--evaluation",
            "g-eval",
            "--max-new-tokens",
            "12",
            "--json",
            "-",
        ])
        .output()
        .unwrap();
    common::assert_ok(&out);
    let cli: SelfEvalReport = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(cli.texts, report.texts);
    assert_eq!(cli.matrix, report.matrix);
    // GPT-2s have no chat template: refused before any text is written.
    let (small, deeper) = (small(), deeper());
    let err = block_on(self_eval::run(
        &[("small", &small), ("deeper", &deeper)],
        docs,
        &options,
        None,
        async |_, _| ControlFlow::Continue(()),
    ))
    .unwrap_err();
    assert!(
        err.to_string().contains("small has no chat template"),
        "{err}"
    );
}
