//! Text generation on the tiny random GPT-2 (`tests/fixtures/plm/gpt2`)
//! and BART (`tests/fixtures/bart/tiny`): the key/value cache gives the
//! logits of a full pass, and decoding with it gives what decoding by full
//! passes gives.

use std::ops::ControlFlow;

use futures::executor::block_on;

use blindspot::models::generate::{
    Decoder, Decoding, End, GenerateOptions, ModelDecoder, Sampling, argmax, log_softmax,
};
use blindspot::models::{Plm, read_back_blocking};

use crate::common;

const TOLERANCE: f32 = 1e-4;

fn gpt2() -> Plm {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/plm/gpt2");
    common::cpu_model("gpt2", &dir)
}

/// Next-token logits at every position of one full pass over `ids`.
fn full_pass(plm: &Plm, ids: &[u32]) -> Vec<Vec<f32>> {
    let out = plm.forward(&[ids.to_vec()]).unwrap();
    let (values, [_, _, vocab]) = read_back_blocking(plm.lm_logits(&out).unwrap()).unwrap();
    values.chunks(vocab).map(<[f32]>::to_vec).collect()
}

fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

#[test]
fn cached_steps_give_the_logits_of_a_full_pass() {
    let plm = gpt2();
    let ids = plm
        .encode("The committee approved the new budget after a long debate on Tuesday.")
        .unwrap()
        .ids();
    assert!(ids.len() > 8);
    let full = full_pass(&plm, &ids);
    let mut decoder = ModelDecoder::new(&plm).unwrap();
    // A prompt of 5 tokens, then one token a step.
    let first = block_on(decoder.next_logits(&[ids[..5].to_vec()])).unwrap();
    assert!(max_diff(&first[0], &full[4]) < TOLERANCE);
    for i in 5..ids.len() {
        let step = block_on(decoder.next_logits(&[vec![ids[i]]])).unwrap();
        let d = max_diff(&step[0], &full[i]);
        assert!(d < TOLERANCE, "position {i}: {d}");
    }
    assert_eq!(decoder.room(), plm.config.max_tokens() - ids.len());
}

#[test]
fn kept_rows_continue_their_own_texts() {
    // Two rows, then the second row twice (a beam that survives in two
    // copies), each extended by a different token.
    let plm = gpt2();
    let a = plm.encode("A dog barked at night").unwrap().ids();
    let b = plm.encode("The cat sat on the mat").unwrap().ids();
    let n = a.len().min(b.len());
    let (a, b) = (a[..n].to_vec(), b[..n].to_vec());
    let mut decoder = ModelDecoder::new(&plm).unwrap();
    block_on(decoder.next_logits(&[a.clone(), b.clone()])).unwrap();
    decoder.keep_rows(&[1, 1]);
    let (x, y) = (262, 13);
    let step = block_on(decoder.next_logits(&[vec![x], vec![y]])).unwrap();
    for (row, token) in [(0, x), (1, y)] {
        let mut ids = b.clone();
        ids.push(token);
        let want = full_pass(&plm, &ids);
        assert!(
            max_diff(&step[row], want.last().unwrap()) < TOLERANCE,
            "row {row}"
        );
    }
}

#[test]
fn greedy_generation_equals_decoding_by_full_passes() {
    let plm = gpt2();
    let prompt = "The minister said that";
    let options = GenerateOptions {
        max_new_tokens: 12,
        ..GenerateOptions::default()
    };
    let mut steps = 0;
    let out = block_on(plm.generate(prompt, &options, async |tokens: &[u32]| {
        steps += 1;
        assert_eq!(tokens.len(), steps);
        ControlFlow::Continue(())
    }))
    .unwrap();
    let mut ids = plm.encode(prompt).unwrap().ids();
    assert_eq!(out.input_tokens, ids);
    let mut want = Vec::new();
    for _ in 0..12 {
        let next = argmax(full_pass(&plm, &ids).last().unwrap()) as u32;
        want.push(next);
        ids.push(next);
    }
    assert_eq!(out.generation.tokens, want);
    assert_eq!(out.generation.end, End::Length);
    assert_eq!(out.text, plm.tokenizer.decode_text(&want).unwrap());
    assert!(out.generation.log_prob < 0.0);
    // One beam is greedy.
    let beam = GenerateOptions {
        decoding: Decoding::Beam {
            beams: 1,
            length_penalty: 1.0,
        },
        ..options.clone()
    };
    let one = block_on(plm.generate(prompt, &beam, async |_| ControlFlow::Continue(()))).unwrap();
    assert_eq!(one.generation.tokens, want);
    assert!((one.generation.log_prob - out.generation.log_prob).abs() < 1e-6);
}

#[test]
fn beams_and_samples_on_the_model() {
    let plm = gpt2();
    let prompt = "Berlin is";
    let run = |decoding| {
        let options = GenerateOptions {
            max_new_tokens: 8,
            decoding,
            ..GenerateOptions::default()
        };
        block_on(plm.generate(prompt, &options, async |_| ControlFlow::Continue(()))).unwrap()
    };
    let greedy = run(Decoding::Greedy);
    let beams = run(Decoding::Beam {
        beams: 4,
        length_penalty: 1.0,
    });
    // What each reports is the model's log-probability of its tokens.
    let prompt_ids = plm.encode(prompt).unwrap().ids();
    let log_prob = |tokens: &[u32]| {
        let mut ids = prompt_ids.clone();
        ids.extend_from_slice(tokens);
        let logits = full_pass(&plm, &ids);
        (0..tokens.len())
            .map(|i| log_softmax(&logits[prompt_ids.len() - 1 + i])[tokens[i] as usize])
            .sum::<f64>()
    };
    for g in [&greedy, &beams] {
        let want = log_prob(&g.generation.tokens);
        assert!(
            (g.generation.log_prob - want).abs() < 1e-3,
            "{} vs {want}",
            g.generation.log_prob
        );
    }
    let sample = |seed| {
        run(Decoding::Sample(Sampling {
            seed,
            ..Sampling::default()
        }))
    };
    let one = sample(1);
    // The same text again (its cost aside: the prompt is cached then).
    let again = sample(1).generation;
    assert_eq!(
        (
            &one.generation.tokens,
            one.generation.log_prob,
            one.generation.end
        ),
        (&again.tokens, again.log_prob, again.end)
    );
    assert!(again.decoded < one.generation.decoded);
    let want = log_prob(&one.generation.tokens);
    assert!((one.generation.log_prob - want).abs() < 1e-3);
    assert!((2..6).any(|seed| sample(seed).generation.tokens != sample(1).generation.tokens));
}

#[test]
fn generation_stops_at_the_models_limit() {
    let plm = gpt2();
    let limit = plm.config.max_tokens();
    let prompt = plm.encode("Once upon a time").unwrap().ids();
    let options = GenerateOptions {
        max_new_tokens: 500,
        stop_at_eos: false,
        ..GenerateOptions::default()
    };
    let out = block_on(plm.generate("Once upon a time", &options, async |_| {
        ControlFlow::Continue(())
    }))
    .unwrap();
    assert_eq!(out.generation.end, End::ModelLimit);
    // Every token but the last was read: limit - prompt + 1 new ones.
    assert_eq!(out.generation.tokens.len(), limit - prompt.len() + 1);
    // A prompt that fills the model is refused, not cut.
    let long = "word ".repeat(limit + 5);
    let e =
        block_on(plm.generate(&long, &options, async |_| ControlFlow::Continue(()))).unwrap_err();
    assert!(e.to_string().contains("limit"), "{e}");
}

#[test]
fn a_model_without_a_causal_head_cannot_generate() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/plm/bert_mlm");
    let bert = common::cpu_model("bert_mlm", &dir);
    let e = block_on(
        bert.generate("hello", &GenerateOptions::default(), async |_| {
            ControlFlow::Continue(())
        }),
    )
    .unwrap_err();
    assert!(e.to_string().contains("cannot generate text"), "{e}");
    // A decoder-only model reads no source.
    let gpt2 = gpt2();
    assert!(
        !ModelDecoder::new(&gpt2)
            .unwrap()
            .read_source(&[1, 2])
            .unwrap()
    );
}

fn bart() -> Plm {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/bart/tiny");
    common::cpu_model("bart", &dir)
}

/// BART's next-token logits at every decoder input of one full pass.
fn full_seq2seq(plm: &Plm, source: &[u32], inputs: &[u32]) -> Vec<Vec<f32>> {
    let logits = plm
        .seq2seq_logits(&[source.to_vec()], &[inputs.to_vec()])
        .unwrap();
    let (values, [_, _, vocab]) = read_back_blocking(logits).unwrap();
    values.chunks(vocab).map(<[f32]>::to_vec).collect()
}

#[test]
fn bart_cached_steps_give_the_logits_of_a_full_decoder_pass() {
    let plm = bart();
    let source = plm
        .encode("The committee approved the budget on Tuesday.")
        .unwrap()
        .ids();
    let target = plm
        .encode("The budget passed after a debate.")
        .unwrap()
        .ids();
    let start = plm.config.decoder().unwrap().start_token_id;
    // The decoder inputs as BARTScore feeds them: the start token, then the target.
    let mut inputs = vec![start];
    inputs.extend_from_slice(&target);
    let full = full_seq2seq(&plm, &source, &inputs);
    let mut decoder = ModelDecoder::new(&plm).unwrap();
    assert!(decoder.read_source(&source).unwrap());
    let first = block_on(decoder.next_logits(&[inputs[..2].to_vec()])).unwrap();
    assert!(max_diff(&first[0], &full[1]) < TOLERANCE);
    for i in 2..inputs.len() {
        let step = block_on(decoder.next_logits(&[vec![inputs[i]]])).unwrap();
        let d = max_diff(&step[0], &full[i]);
        assert!(d < TOLERANCE, "position {i}: {d}");
    }
    // Two beams from the one row, each extended by its own token.
    decoder.keep_rows(&[0, 0]);
    let (x, y) = (100, 200);
    let step = block_on(decoder.next_logits(&[vec![x], vec![y]])).unwrap();
    for (row, token) in [(0, x), (1, y)] {
        let mut ids = inputs.clone();
        ids.push(token);
        let want = full_seq2seq(&plm, &source, &ids);
        assert!(
            max_diff(&step[row], want.last().unwrap()) < TOLERANCE,
            "row {row}"
        );
    }
}

#[test]
fn bart_generates_from_its_source_as_full_passes_decode() {
    let plm = bart();
    let article = "The regional council said on Monday that the new bridge will open in spring.";
    let options = GenerateOptions {
        max_new_tokens: 10,
        stop_at_eos: false,
        ..GenerateOptions::default()
    };
    let out =
        block_on(plm.generate(article, &options, async |_| ControlFlow::Continue(()))).unwrap();
    let source = plm.encode(article).unwrap().ids();
    assert_eq!(out.input_tokens, source);
    let mut inputs = vec![plm.config.decoder().unwrap().start_token_id];
    let mut want = Vec::new();
    for _ in 0..10 {
        let next = argmax(full_seq2seq(&plm, &source, &inputs).last().unwrap()) as u32;
        want.push(next);
        inputs.push(next);
    }
    assert_eq!(out.generation.tokens, want);
    // Beam search reports its text's log-probability under the model.
    let beams = GenerateOptions {
        decoding: Decoding::Beam {
            beams: 3,
            length_penalty: 1.0,
        },
        ..options
    };
    let b = block_on(plm.generate(article, &beams, async |_| ControlFlow::Continue(()))).unwrap();
    let mut inputs = vec![plm.config.decoder().unwrap().start_token_id];
    inputs.extend_from_slice(&b.generation.tokens[..b.generation.tokens.len() - 1]);
    let logits = full_seq2seq(&plm, &source, &inputs);
    let want: f64 = b
        .generation
        .tokens
        .iter()
        .enumerate()
        .map(|(i, &t)| log_softmax(&logits[i])[t as usize])
        .sum();
    assert!(
        (b.generation.log_prob - want).abs() < 1e-3,
        "{} vs {want}",
        b.generation.log_prob
    );
}

/// Greedy and 3-beam search give transformers' `generate` ids on the tiny
/// GPT-2 and BART (scripts/generate_parity.py); BART's config forces `</s>`
/// as the last token, as transformers does. A beam may be any of those tied
/// with transformers' best in f32.
#[test]
fn greedy_and_beams_give_transformers_tokens() {
    let g = common::golden("generate_parity.json");
    let bart_dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/bart/tiny");
    let models = [
        ("gpt2", gpt2()),
        ("bart", common::cpu_model("bart", &bart_dir)),
    ];
    let ids = |v: &serde_json::Value| -> Vec<u32> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap() as u32)
            .collect()
    };
    for (key, plm) in &models {
        for case in g[key].as_array().unwrap() {
            let input = ids(&case["input"]);
            // transformers returns the decoder's prompt too: the input (GPT-2) or </s> (BART).
            let prompt = if *key == "gpt2" { input.len() } else { 1 };
            let run = |decoding| {
                let options = GenerateOptions {
                    max_new_tokens: 12,
                    decoding,
                    stop_at_eos: true,
                    ..GenerateOptions::default()
                };
                block_on(plm.generate_ids(&input, &options, async |_| ControlFlow::Continue(())))
                    .unwrap()
                    .tokens
            };
            let greedy = ids(&case["greedy"]);
            assert_eq!(run(Decoding::Greedy), greedy[prompt..], "{key} greedy");
            let beam = run(Decoding::Beam {
                beams: 3,
                length_penalty: 1.0,
            });
            let beams = case["beam3"].as_array().unwrap();
            let best = beams[0]["score"].as_f64().unwrap();
            let tied: Vec<Vec<u32>> = beams
                .iter()
                .filter(|b| (b["score"].as_f64().unwrap() - best).abs() < 1e-5)
                .map(|b| ids(&b["tokens"])[prompt..].to_vec())
                .collect();
            assert!(tied.contains(&beam), "{key}: {beam:?} not in {tied:?}");
        }
    }
}

/// transformers' `min_new_tokens` and `no_repeat_ngram_size` (2 and 10
/// here), greedy and 3 beams, on GPT-2 and BART, and BART with a forced
/// first token (which transformers counts as new).
#[test]
fn constraints_give_transformers_tokens() {
    let g = common::golden("generate_parity.json");
    let bart_dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/bart/tiny");
    let mut files = blindspot::models::ModelFiles::from_path(&bart_dir).unwrap();
    let mut config: serde_json::Value = serde_json::from_str(&files.config_json).unwrap();
    config["forced_bos_token_id"] = 0.into();
    files.config_json = config.to_string();
    let forced = Plm::load(
        "bart-forced",
        files,
        &burn::tensor::Device::flex(),
        blindspot::models::Precision::F32,
    )
    .unwrap();
    let models = [
        ("gpt2", gpt2()),
        ("bart", common::cpu_model("bart", &bart_dir)),
        ("bart_forced_bos", forced),
    ];
    let ids = |v: &serde_json::Value| -> Vec<u32> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap() as u32)
            .collect()
    };
    for (key, plm) in &models {
        for case in g["constrained"][key].as_array().unwrap() {
            let input = ids(&case["input"]);
            // transformers returns the decoder's prompt: the input (GPT-2) or </s> (BART),
            // and the forced first token, which Blindspot puts in the prompt.
            let prompt = match *key {
                "gpt2" => input.len(),
                "bart" => 1,
                _ => 2,
            };
            let run = |decoding| {
                let options = GenerateOptions {
                    max_new_tokens: 12,
                    decoding,
                    min_new_tokens: 10,
                    no_repeat_ngram_size: 2,
                    ..GenerateOptions::default()
                };
                block_on(plm.generate_ids(&input, &options, async |_| ControlFlow::Continue(())))
                    .unwrap()
                    .tokens
            };
            let greedy = ids(&case["greedy"]);
            assert_eq!(run(Decoding::Greedy), greedy[prompt..], "{key} greedy");
            let beam = run(Decoding::Beam {
                beams: 3,
                length_penalty: 1.0,
            });
            let beams = case["beam3"].as_array().unwrap();
            let best = beams[0]["score"].as_f64().unwrap();
            let tied: Vec<Vec<u32>> = beams
                .iter()
                .filter(|b| (b["score"].as_f64().unwrap() - best).abs() < 1e-5)
                .map(|b| ids(&b["tokens"])[prompt..].to_vec())
                .collect();
            assert!(tied.contains(&beam), "{key}: {beam:?} not in {tied:?}");
            // No bigram twice in the decoder's whole sequence.
            let all: Vec<u32> = greedy[..prompt].iter().chain(&beam).copied().collect();
            let mut seen = std::collections::HashSet::new();
            assert!(
                all.windows(2).all(|w| seen.insert(w.to_vec())),
                "{key}: {all:?}"
            );
        }
    }
    // A minimum above the maximum is refused before any pass.
    let options = GenerateOptions {
        max_new_tokens: 3,
        min_new_tokens: 4,
        ..GenerateOptions::default()
    };
    let e = block_on(
        models[0]
            .1
            .generate_ids(&[464], &options, async |_| ControlFlow::Continue(())),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("min_new_tokens (4) exceeds max_new_tokens (3)"),
        "{e}"
    );
}

/// A forced end token is not banned: BART's forced `</s>` at the length
/// limit still ends a text whose minimum length is that limit, or whose
/// no-repeat rule bans the decoder start token `</s>` (transformers applies
/// the forced-EOS processor after the bans).
#[test]
fn a_forced_end_token_wins_over_the_bans() {
    let bart_dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/bart/tiny");
    let plm = common::cpu_model("bart", &bart_dir);
    let source = [0, 17, 250, 31, 99, 412, 8, 2];
    for (min, ngram) in [(3, 0), (0, 1)] {
        for decoding in [
            Decoding::Greedy,
            Decoding::Beam {
                beams: 3,
                length_penalty: 1.0,
            },
        ] {
            let options = GenerateOptions {
                max_new_tokens: 3,
                decoding,
                min_new_tokens: min,
                no_repeat_ngram_size: ngram,
                ..GenerateOptions::default()
            };
            let out =
                block_on(plm.generate_ids(&source, &options, async |_| ControlFlow::Continue(())))
                    .unwrap();
            assert_eq!(out.tokens.last(), Some(&2), "{options:?}: {out:?}");
            assert!(out.log_prob.is_finite(), "{options:?}: {out:?}");
        }
    }
}
