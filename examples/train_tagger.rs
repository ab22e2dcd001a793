//! Trains the shipped tagger model (`src/text/data/tagger.bin`) from spaCy
//! annotations written by `scripts/tagger_data.py`.
//!
//! ```sh
//! ~/.cache/blindspot-py/bin/python scripts/tagger_data.py
//! cargo run --release --example train_tagger
//! cargo test --release --test tagger -- --nocapture   # agreement figures
//! ```
//!
//! Greedy averaged perceptrons, trained in a fixed shuffled order (seeded),
//! so the same annotations give the same model.

use std::collections::BTreeSet;
use std::io::BufRead;

use blindspot::text::perceptron::Trainer;
use blindspot::text::tagger::{
    Context, Tagger, bio_to_bilou, label_allowed, ner_features, pos_features,
};
use rand::SeedableRng;
use rand::seq::SliceRandom;
use serde::Deserialize;

const POS_EPOCHS: usize = 8;
const NER_EPOCHS: usize = 10;
/// Features whose largest averaged weight is below this are dropped.
const MIN_WEIGHT: f32 = 0.0;

#[derive(Deserialize)]
struct Sentence {
    words: Vec<String>,
    tags: Vec<String>,
    pos: Vec<String>,
    ents: Vec<String>,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let home = std::env::var("HOME")?;
    let path = format!("{home}/.cache/blindspot/tagger/train.jsonl");
    let file = std::fs::File::open(&path).map_err(|e| format!("{path}: {e} (run scripts/tagger_data.py)"))?;
    let mut sentences = Vec::new();
    for line in std::io::BufReader::new(file).lines() {
        let mut s: Sentence = serde_json::from_str(&line?)?;
        s.ents = bio_to_bilou(&s.ents);
        sentences.push(s);
    }
    let n_tokens: usize = sentences.iter().map(|s| s.words.len()).sum();
    eprintln!("{} sentences, {n_tokens} tokens", sentences.len());

    let pos_classes: Vec<String> = sentences
        .iter()
        .flat_map(|s| s.tags.iter().zip(&s.pos).map(|(t, p)| format!("{t} {p}")))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let ner_classes: Vec<String> = sentences
        .iter()
        .flat_map(|s| s.ents.iter().cloned())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let class_id = |classes: &[String], name: &str| classes.iter().position(|c| c == name).unwrap();

    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
    let mut order: Vec<usize> = (0..sentences.len()).collect();

    // Part of speech.
    let mut trainer = Trainer::new(pos_classes.clone());
    let mut scores = vec![0.0; pos_classes.len()];
    let mut features = Vec::new();
    for epoch in 0..POS_EPOCHS {
        order.shuffle(&mut rng);
        let mut correct = 0;
        for &k in &order {
            let s = &sentences[k];
            let words: Vec<&str> = s.words.iter().map(String::as_str).collect();
            let context = Context::new(&words);
            let mut guesses: Vec<usize> = Vec::new();
            for i in 0..words.len() {
                let prev = |d: usize| i.checked_sub(d).map_or("-START-", |j| pos_classes[guesses[j]].as_str());
                pos_features(&context, i, prev(1), prev(2), &mut features);
                trainer.score_into(&features, &mut scores);
                let guess = argmax(&scores, |_| true);
                let truth = class_id(&pos_classes, &format!("{} {}", s.tags[i], s.pos[i]));
                trainer.update(&features, truth, guess);
                correct += usize::from(truth == guess);
                guesses.push(guess);
            }
        }
        eprintln!("pos epoch {epoch}: train accuracy {:.4}", correct as f64 / n_tokens as f64);
    }
    let pos = trainer.average(MIN_WEIGHT);
    eprintln!("pos features: {}", pos.feature_count());

    // Entities, trained on the tags the POS model predicts (as at run time).
    let tagger = Tagger::new(pos.clone(), blindspot::text::perceptron::Perceptron::default());
    let predicted: Vec<Vec<String>> = sentences
        .iter()
        .map(|s| {
            let words: Vec<&str> = s.words.iter().map(String::as_str).collect();
            tagger
                .tag_classes(&words)
                .into_iter()
                .map(|c| pos_classes[c].split(' ').next().unwrap().to_owned())
                .collect()
        })
        .collect();
    let mut trainer = Trainer::new(ner_classes.clone());
    let mut scores = vec![0.0; ner_classes.len()];
    for epoch in 0..NER_EPOCHS {
        order.shuffle(&mut rng);
        let mut correct = 0;
        for &k in &order {
            let s = &sentences[k];
            let words: Vec<&str> = s.words.iter().map(String::as_str).collect();
            let tags: Vec<&str> = predicted[k].iter().map(String::as_str).collect();
            let context = Context::new(&words);
            let mut guesses: Vec<usize> = Vec::new();
            for i in 0..words.len() {
                let prev = |d: usize| i.checked_sub(d).map_or("-START-", |j| ner_classes[guesses[j]].as_str());
                let p1 = prev(1);
                ner_features(&context, &tags, i, p1, prev(2), &mut features);
                trainer.score_into(&features, &mut scores);
                let guess = argmax(&scores, |c| label_allowed(p1, &ner_classes[c]));
                let truth = class_id(&ner_classes, &s.ents[i]);
                trainer.update(&features, truth, guess);
                correct += usize::from(truth == guess);
                guesses.push(guess);
            }
        }
        eprintln!("ner epoch {epoch}: train accuracy {:.4}", correct as f64 / n_tokens as f64);
    }
    let ner = trainer.average(MIN_WEIGHT);
    eprintln!("ner features: {}", ner.feature_count());

    let bytes = Tagger::new(pos, ner).to_bytes();
    let out = concat!(env!("CARGO_MANIFEST_DIR"), "/src/text/data/tagger.bin");
    std::fs::write(out, &bytes)?;
    eprintln!("wrote {out} ({} bytes)", bytes.len());
    Ok(())
}

fn argmax(scores: &[f32], allowed: impl Fn(usize) -> bool) -> usize {
    let mut best: Option<(usize, f32)> = None;
    for (c, &s) in scores.iter().enumerate() {
        if allowed(c) && best.is_none_or(|(_, b)| s > b) {
            best = Some((c, s));
        }
    }
    best.map_or(0, |(c, _)| c)
}
