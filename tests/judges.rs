//! LLM judges against a Python reference of their arithmetic
//! (scripts/judge_golden.py) on the tiny random decoder LLMs with their
//! chat templates: G-Eval's probability-weighted ratings for every
//! dimension, sent as a system or a user message or as plain text; the
//! CLI's column; sampled ratings repeat for a seed.

use blindspot::metrics::geval::{self, Dimension, Role};
use blindspot::models::Plm;
use futures::executor::block_on;
use serde_json::Value;

use crate::common;

const TOLERANCE: f64 = 1e-5;

fn fixture(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/llm")
        .join(name)
}

fn dimension(case: &Value) -> Dimension {
    case["dimension"].as_str().unwrap().parse().unwrap()
}

fn texts(case: &Value) -> (String, String) {
    let rows = common::rows("summeval.jsonl");
    let row = &rows[case["line"].as_u64().unwrap() as usize];
    let system = case["system"].as_str().unwrap();
    (
        row["src"].as_str().unwrap().to_owned(),
        row["systems"][system]["summary"]
            .as_str()
            .unwrap()
            .to_owned(),
    )
}

#[test]
fn g_eval_weighted_ratings_match_the_reference() {
    let g = common::golden("judge_parity.json");
    let cases = g["g-eval"].as_array().unwrap();
    assert_eq!(cases.len(), 60);
    let mut models: std::collections::HashMap<String, Plm> = Default::default();
    for case in cases {
        let name = case["model"].as_str().unwrap();
        let plm = models
            .entry(name.to_owned())
            .or_insert_with(|| common::cpu_model(name, &fixture(name)));
        let dim = dimension(case);
        let (src, summary) = texts(case);
        let role: Role = case["role"].as_str().unwrap().parse().unwrap();
        let chat = case["chat"].as_bool().unwrap();
        let (ids, truncated, templated) =
            geval::judge_input(plm, &geval::prompt(dim, &src, &summary), role, chat).unwrap();
        assert!(!truncated);
        assert_eq!(templated, chat);
        assert_eq!(ids.len() as u64, case["tokens"].as_u64().unwrap(), "{case}");
        let r = block_on(geval::weighted(plm, &[ids], 1..=dim.top()))
            .unwrap()
            .remove(0);
        let want = case["value"].as_f64().unwrap();
        assert!(
            (r.value - want).abs() <= TOLERANCE,
            "{name} {dim}: {} vs {want}",
            r.value
        );
        let mass = case["mass"].as_f64().unwrap();
        assert!(
            (r.mass - mass).abs() <= TOLERANCE * mass.max(1e-3),
            "{name} {dim} mass"
        );
        for (a, b) in r.shares.iter().zip(case["shares"].as_array().unwrap()) {
            assert!((a - b.as_f64().unwrap()).abs() <= TOLERANCE);
        }
    }
}

/// `blindspot score --metrics g-eval-...` gives the reference's ratings,
/// with the shares and the mass as parts.
#[test]
fn the_cli_scores_g_eval_columns() {
    let g = common::golden("judge_parity.json");
    let cases: Vec<&Value> = g["g-eval"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["model"] == "qwen3" && c["dimension"] == "relevance")
        .collect();
    let tmp = std::env::temp_dir().join(format!("g-eval-cli-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let (srcs, hyps): (Vec<String>, Vec<String>) = cases.iter().map(|c| texts(c)).unzip();
    std::fs::write(tmp.join("src.txt"), srcs.join("\n") + "\n").unwrap();
    std::fs::write(tmp.join("hyp.txt"), hyps.join("\n") + "\n").unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_blindspot"))
        // G-Eval reads no reference: none is asked for.
        .args(["score", "--format", "jsonl", "--hyps"])
        .arg(tmp.join("hyp.txt"))
        .arg("--srcs")
        .arg(tmp.join("src.txt"))
        .args(["--metrics", "g-eval-relevance", "--model"])
        .arg(format!("g-eval={}", fixture("qwen3").display()))
        .output()
        .unwrap();
    common::assert_ok(&out);
    let mut lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // The last line is the corpus's: the mean, with the signature.
    let corpus = lines.pop().unwrap();
    let signature = corpus["corpus"]["g-eval-relevance"]["signature"]
        .as_str()
        .unwrap();
    assert!(
        signature.starts_with("g-eval|model:qwen3|dimension:relevance|prompt:detailed|input:chat-system|score:weighted|conventions:nlpyang-geval|"),
        "{signature}"
    );
    assert_eq!(lines.len(), cases.len());
    for (line, case) in lines.iter().zip(&cases) {
        let ours = line["g-eval-relevance"].as_f64().unwrap();
        let want = case["value"].as_f64().unwrap();
        assert!((ours - want).abs() <= TOLERANCE, "{ours} vs {want}");
    }
    std::fs::remove_dir_all(&tmp).unwrap();
}

/// Sampled ratings: n answers drawn from seed, seed + 1..., read by the
/// released `parse_output`; the same seed gives the same mean, the shares
/// are of answers in range.
#[test]
fn sampled_ratings_repeat_for_a_seed() {
    let plm = common::cpu_model("qwen2", &fixture("qwen2"));
    let (ids, _, _) = geval::judge_input(
        &plm,
        &geval::prompt(Dimension::Fluency, "", "The cat sat on the mat."),
        Role::User,
        true,
    )
    .unwrap();
    let run = |seed| {
        block_on(geval::sampled(
            &plm,
            std::slice::from_ref(&ids),
            3,
            4,
            2.0,
            seed,
        ))
        .unwrap()
    };
    let a = run(7);
    let b = run(7);
    assert_eq!((a[0].value, &a[0].shares), (b[0].value, &b[0].shares));
    // The second run finds the prompt in the prefix cache: it runs only
    // the prompt's last token and each answer's tokens but its last (4 answers of
    // at most 5 tokens).
    assert_eq!((a[0].tokens, b[0].tokens), (ids.len(), ids.len()));
    assert!(
        a[0].decoded > ids.len() && b[0].decoded <= 4 * 5,
        "{a:?} {b:?}"
    );
    assert_eq!(a[0].shares.len(), 3);
    assert!(a[0].value >= 0.0 && a[0].mass <= 1.0);
}

/// A model that cannot judge, a template that refuses a lone system
/// message, and a segment without the article G-Eval reads say why.
#[test]
fn judges_say_what_they_cannot_do() {
    let mlm = common::cpu_model(
        "mlm",
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/plm/bert_mlm"),
    );
    let e = block_on(geval::weighted(&mlm, &[vec![1, 2, 3]], 1..=5))
        .unwrap_err()
        .to_string();
    assert!(e.contains("not a causal language model"), "{e}");
    let mut files = blindspot::models::ModelFiles::from_path(&fixture("qwen2")).unwrap();
    let gemma = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/chat/gemma.jinja"),
    )
    .unwrap();
    files.tokenizer_config =
        Some(serde_json::json!({"chat_template": gemma, "bos_token": "<|endoftext|>"}).to_string());
    let plm = Plm::load(
        "gemma-template",
        files,
        &burn::tensor::Device::flex(),
        blindspot::models::Precision::F32,
    )
    .unwrap();
    let e = geval::judge_input(&plm, "x", Role::System, true)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("refuses these messages: System role not supported"),
        "{e}"
    );
    assert!(geval::judge_input(&plm, "x", Role::User, true).is_ok());
}

/// A judge prompt that starts as the last one did (the instructions and
/// the article, a new summary) reads only what follows the shared start,
/// and gives the logits of a full pass.
#[test]
fn a_shared_start_is_read_once() {
    let plm = common::cpu_model("qwen2", &fixture("qwen2"));
    let fresh = common::cpu_model("qwen2-fresh", &fixture("qwen2"));
    let rows = common::rows("summeval.jsonl");
    let doc = rows[0]["src"].as_str().unwrap();
    let input = |summary: &str| {
        geval::judge_input(
            &plm,
            &geval::prompt(Dimension::Coherence, doc, summary),
            Role::System,
            true,
        )
        .unwrap()
        .0
    };
    let a = input(rows[0]["systems"]["M11"]["summary"].as_str().unwrap());
    let b = input(rows[0]["systems"]["M8"]["summary"].as_str().unwrap());
    let shared = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    assert!(shared > b.len() / 2, "the article comes before the summary");
    let (_, reused) = block_on(plm.next_token_logits(&a)).unwrap();
    assert_eq!(reused, 0);
    let (logits, reused) = block_on(plm.next_token_logits(&b)).unwrap();
    assert_eq!(reused, shared);
    let (full, _) = block_on(fresh.next_token_logits(&b)).unwrap();
    let worst = logits
        .iter()
        .zip(&full)
        .map(|(x, y)| (x - y).abs())
        .fold(0f32, f32::max);
    assert!(worst <= 1e-5, "{worst}");
    // The same text again reads only its last token; a shorter one, its own.
    assert_eq!(block_on(plm.next_token_logits(&b)).unwrap().1, b.len() - 1);
    assert_eq!(block_on(plm.next_token_logits(&b[..10])).unwrap().1, 9);
    assert!(block_on(plm.next_token_logits(&[])).is_err());
    // A one-row generation continues the kept prefix and keeps what it
    // read: its prompt and all but its last new token.
    use blindspot::models::generate::{Decoding, GenerateOptions};
    let options = GenerateOptions {
        max_new_tokens: 6,
        decoding: Decoding::Greedy,
        stop_at_eos: false,
        ..GenerateOptions::default()
    };
    let generate = |plm: &Plm| {
        block_on(plm.generate_ids(&a, &options, async |_| std::ops::ControlFlow::Continue(())))
            .unwrap()
            .tokens
    };
    let (reused, fresh_tokens) = (generate(&plm), generate(&fresh));
    assert_eq!(reused, fresh_tokens);
    let kept = plm.prefix.lock().unwrap()[0].0.clone();
    assert_eq!(kept, [&a[..], &reused[..5]].concat());
    assert_eq!(
        block_on(plm.next_token_logits(&kept)).unwrap().1,
        kept.len() - 1
    );
    // Several judges' prompts in turn each find their own start kept: a
    // prompt that shares nothing with `a` does not push it out.
    let other: Vec<u32> = b.iter().rev().copied().collect();
    assert_ne!(other[0], a[0]);
    block_on(plm.next_token_logits(&a)).unwrap();
    assert_eq!(block_on(plm.next_token_logits(&other)).unwrap().1, 0);
    assert_eq!(block_on(plm.next_token_logits(&a)).unwrap().1, a.len() - 1);
    assert_eq!(
        block_on(plm.next_token_logits(&other)).unwrap().1,
        other.len() - 1
    );
    assert!(plm.prefix.lock().unwrap().len() <= blindspot::models::plm::PREFIX_ENTRIES);
}

/// GEMBA-DA's first, greedy answer is transformers' (token count, text,
/// whether the model ended it), and the whole request (greedy, then seeded
/// samples at rising temperatures) repeats.
#[test]
fn gemba_da_greedy_answers_match_the_reference() {
    use blindspot::metrics::gemba::{self, Prompt};
    use blindspot::models::generate::{Decoding, End, GenerateOptions};
    let g = common::golden("judge_parity.json");
    let wmt = common::rows("wmt21_de_en.jsonl");
    let cases = g["gemba-da"].as_array().unwrap();
    assert_eq!(cases.len(), 8);
    for case in cases {
        let name = case["model"].as_str().unwrap();
        let plm = common::cpu_model(name, &fixture(name));
        let row = &wmt[case["line"].as_u64().unwrap() as usize];
        let which: Prompt = case["prompt"].as_str().unwrap().parse().unwrap();
        let text = gemba::prompt(
            which,
            "German",
            "English",
            row["src"].as_str().unwrap(),
            row["systems"][case["system"].as_str().unwrap()]
                .as_str()
                .unwrap(),
            row["ref_a"].as_str().unwrap(),
        );
        let (ids, _, templated) = geval::judge_input(&plm, &text, Role::User, true).unwrap();
        assert!(templated);
        assert_eq!(ids.len() as u64, case["tokens"].as_u64().unwrap());
        let options = GenerateOptions {
            max_new_tokens: 64,
            decoding: Decoding::Greedy,
            ..GenerateOptions::default()
        };
        let out = block_on(plm.generate_ids(&ids, &options, async |_| {
            std::ops::ControlFlow::Continue(())
        }))
        .unwrap();
        let answer = plm.tokenizer.decode_text(&out.tokens).unwrap();
        assert_eq!(answer.trim(), case["answer"].as_str().unwrap(), "{case}");
        assert_eq!(
            out.end == End::Eos,
            case["ended"].as_bool().unwrap(),
            "{case}"
        );
        // The same request again gives the same score (its costs differ: the
        // prompt is in the prefix cache then).
        let key = |j: Result<gemba::Judged, String>| j.map(|j| (j.score, j.temperature, j.answer));
        let first = block_on(gemba::judge(&plm, &ids, 64, 3)).unwrap();
        let again = block_on(gemba::judge(&plm, &ids, 64, 3)).unwrap();
        assert_eq!(key(first), key(again));
    }
}

/// The pairwise judge (AlpacaEval 2's weighted judge): each order's
/// p(m) / (p(m) + p(M)) equals the reference's, and the CLI's column is
/// their mean for the hypothesis.
#[test]
fn pairwise_preferences_match_the_reference() {
    use blindspot::metrics::pairwise;
    let g = common::golden("judge_parity.json");
    let wmt = common::rows("wmt21_de_en.jsonl");
    let cases = g["pairwise"].as_array().unwrap();
    assert_eq!(cases.len(), 6);
    for case in cases {
        let name = case["model"].as_str().unwrap();
        let plm = common::cpu_model(name, &fixture(name));
        let row = &wmt[case["line"].as_u64().unwrap() as usize];
        let (src, r) = (row["src"].as_str().unwrap(), row["ref_a"].as_str().unwrap());
        let hyp = row["systems"][case["system"].as_str().unwrap()]
            .as_str()
            .unwrap();
        let (a, _) = pairwise::input(&plm, src, hyp, r).unwrap();
        let (b, _) = pairwise::input(&plm, src, r, hyp).unwrap();
        assert_eq!(
            [a.len(), b.len()],
            [0, 1].map(|k| case["tokens"][k].as_u64().unwrap() as usize)
        );
        let p = block_on(pairwise::first_preferred(&plm, &[a, b])).unwrap();
        let close = |x: f64, key: &str| {
            let want = case[key].as_f64().unwrap();
            assert!((x - want).abs() <= TOLERANCE, "{name} {key}: {x} vs {want}");
        };
        close(p[0].0, "hyp_first");
        close(1.0 - p[1].0, "hyp_second");
        let out = common::score_rows(
            &[serde_json::json!({"hyp": hyp, "ref": r, "src": src})],
            &[
                "--metrics".into(),
                "pairwise".into(),
                "--model".into(),
                format!("pairwise={}", fixture(name).display()),
            ],
        );
        let line = &common::jsonl_lines(&out)[0];
        close(line["pairwise"].as_f64().unwrap(), "value");
    }
}

/// GEMBA-MQM's parser equals gemba's `parse_mqm_answer` on written answers
/// (scores in both ranges, errors per severity, and where it raises).
#[test]
fn gemba_mqm_parses_answers_as_gemba_does() {
    use blindspot::metrics::gemba_mqm::{Range, parse_answer};
    let g = common::golden("judge_parity.json");
    let cases = g["gemba-mqm-parse"].as_array().unwrap();
    assert!(cases.len() >= 15);
    for case in cases {
        let answer = case["answer"].as_str().unwrap();
        let parsed = parse_answer(answer);
        if case.get("error").is_some() {
            assert!(parsed.is_err(), "{answer:?}: {parsed:?}");
            continue;
        }
        let errors = parsed.unwrap_or_else(|e| panic!("{answer:?}: {e}"));
        let counts: Vec<u64> = errors.0.iter().map(|e| e.len() as u64).collect();
        assert_eq!(serde_json::json!(counts), case["counts"], "{answer:?}");
        assert_eq!(
            errors.score(Range::Penalty),
            case["penalty"].as_f64().unwrap()
        );
        assert_eq!(
            errors.score(Range::Normalized),
            case["normalized"].as_f64().unwrap()
        );
    }
}

/// GEMBA-MQM on the tiny models: the few-shot conversation's tokens, the
/// greedy answer and whether it ended equal transformers'; an ended answer
/// scores as gemba scores it, through the CLI too; one cut for length is
/// an error that says so.
#[test]
fn gemba_mqm_answers_match_the_reference() {
    use blindspot::metrics::gemba_mqm::{self, Range};
    let g = common::golden("judge_parity.json");
    let wmt = common::rows("wmt21_de_en.jsonl");
    let cases = g["gemba-mqm"].as_array().unwrap();
    assert_eq!(cases.len(), 6);
    assert!(cases.iter().any(|c| c["ended"] == true) && cases.iter().any(|c| c["ended"] == false));
    for case in cases {
        let name = case["model"].as_str().unwrap();
        let plm = common::cpu_model(name, &fixture(name));
        let row = &wmt[case["line"].as_u64().unwrap() as usize];
        let (src, hyp) = (
            row["src"].as_str().unwrap(),
            row["systems"][case["system"].as_str().unwrap()]
                .as_str()
                .unwrap(),
        );
        let messages = gemba_mqm::messages("German", "English", src, hyp);
        let template = geval::chat_template(&plm).unwrap().unwrap();
        let (ids, _) = geval::encode_chat(&plm, template, &messages).unwrap();
        assert_eq!(ids.len() as u64, case["tokens"].as_u64().unwrap(), "{name}");
        let judged = block_on(gemba_mqm::judge(&plm, &ids, 500)).unwrap();
        let ended = case["ended"].as_bool().unwrap();
        let answer = case["answer"].as_str().unwrap();
        let parsed = gemba_mqm::parse_answer(answer).unwrap();
        assert_eq!(
            parsed.score(Range::Penalty),
            case["penalty"].as_f64().unwrap()
        );
        match judged {
            Ok(j) => {
                assert!(ended, "{name}: ended here, not in transformers");
                assert_eq!(j.answer, answer);
                assert_eq!(j.errors, parsed);
            }
            Err(why) => {
                assert!(!ended, "{name}: {why}");
                assert!(why.contains("did not end within 500 tokens"), "{why}");
            }
        }
        let out = common::score_rows(
            &[serde_json::json!({"hyp": hyp, "src": src})],
            &[
                "--metrics".into(),
                "gemba-mqm,gemba-mqm-norm".into(),
                "--opt".into(),
                "gemba-mqm.target_lang=English".into(),
                "--model".into(),
                format!("gemba-mqm={}", fixture(name).display()),
            ],
        );
        if ended {
            let lines = common::jsonl_lines(&out);
            for (column, key) in [("gemba-mqm", "penalty"), ("gemba-mqm-norm", "normalized")] {
                assert_eq!(lines[0][column].as_f64(), case[key].as_f64(), "{column}");
            }
        } else {
            common::assert_user_error(&out, "did not end within 500 tokens");
        }
    }
}

/// The custom judge with its default prompt: the probability-weighted
/// rating over 1-5 and 0-9 and the number in the greedy answer equal the
/// reference's, through the CLI; an answer without a number is an error
/// that quotes it; a bad template or pattern is refused before any pass.
#[test]
fn the_custom_judge_matches_the_reference() {
    use blindspot::metrics::custom_judge::{self, Template};
    let g = common::golden("judge_parity.json");
    let wmt = common::rows("wmt21_de_en.jsonl");
    let cases = g["custom"].as_array().unwrap();
    assert_eq!(cases.len(), 4);
    assert!(
        cases.iter().any(|c| c["number"].is_null()) && cases.iter().any(|c| c["number"].is_f64())
    );
    let template = Template::parse(custom_judge::DEFAULT_TEMPLATE).unwrap();
    for case in cases {
        let name = case["model"].as_str().unwrap();
        let plm = common::cpu_model(name, &fixture(name));
        let row = &wmt[case["line"].as_u64().unwrap() as usize];
        let (r, hyp) = (
            row["ref_a"].as_str().unwrap(),
            row["systems"][case["system"].as_str().unwrap()]
                .as_str()
                .unwrap(),
        );
        let text = template.fill(hyp, r, "");
        let (ids, _, templated) = geval::judge_input(&plm, &text, Role::User, true).unwrap();
        assert!(templated);
        assert_eq!(ids.len() as u64, case["tokens"].as_u64().unwrap());
        let run = |opts: &[&str]| {
            let mut args = vec![
                "--metrics".to_owned(),
                "custom-judge".into(),
                "--model".into(),
                format!("custom-judge={}", fixture(name).display()),
            ];
            for o in opts {
                args.extend(["--opt".to_owned(), format!("custom-judge.{o}")]);
            }
            common::score_rows(&[serde_json::json!({"hyp": hyp, "ref": r})], &args)
        };
        for (opts, key) in [
            (&[][..], "weighted_1_5"),
            (&["low=0", "high=9"][..], "weighted_0_9"),
        ] {
            let line = &common::jsonl_lines(&run(opts))[0];
            let want = &case[key];
            let close =
                |x: f64, y: f64| assert!((x - y).abs() <= TOLERANCE, "{name} {key}: {x} vs {y}");
            close(
                line["custom-judge"].as_f64().unwrap(),
                want["value"].as_f64().unwrap(),
            );
        }
        let out = run(&["scoring=answer"]);
        match case["number"].as_f64() {
            Some(n) => assert_eq!(
                common::jsonl_lines(&out)[0]["custom-judge"].as_f64(),
                Some(n)
            ),
            None => {
                let answer = case["answer"].as_str().unwrap();
                common::assert_user_error(&out, "the pattern finds no number in the answer");
                let quoted = format!("{:?}", answer.trim());
                assert!(
                    String::from_utf8_lossy(&out.stderr).contains(&quoted),
                    "{quoted}"
                );
            }
        }
    }
    // Refused before a model is read: a placeholder it does not know, a
    // pattern that does not compile, ratings that are not digits.
    let hyp = serde_json::json!({"hyp": "a", "ref": "b"});
    for (opt, needle) in [
        (
            "template={hypothesis} {answer}",
            "the prompt names {answer}",
        ),
        ("scoring=answer", ""),
        ("high=12", "ratings run from a digit"),
    ] {
        let mut args = vec!["--metrics", "custom-judge", "--opt"];
        let extra = format!("custom-judge.{opt}");
        args.push(&extra);
        if needle.is_empty() {
            args.extend(["--opt", "custom-judge.pattern=("]);
        }
        let out = common::score_rows(std::slice::from_ref(&hyp), &args);
        common::assert_user_error(
            &out,
            if needle.is_empty() {
                "is not a regular expression (unclosed group)"
            } else {
                needle
            },
        );
    }
}
