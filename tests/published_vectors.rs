//! The test vectors published with sacrebleu (test/test_bleu.py,
//! test/test_sentence_bleu.py, test/test_chrf.py) that apply to our
//! configurations, plus rouge-score's documented behaviour on empty input.

use blindspot::metrics::bleu::{BleuStats, Smoothing};
use blindspot::metrics::{Bleu, Chrf, Metric, Rouge, RougeKind, Segment};

fn corpus_bleu(bleu: &Bleu, hyps: &[&str], refs: &[&[&str]]) -> f64 {
    // sacrebleu passes references as streams; a segment takes one from each.
    let per_segment: Vec<Vec<&str>> = (0..hyps.len())
        .map(|i| refs.iter().map(|s| s[i]).collect())
        .collect();
    let segments: Vec<Segment> = hyps
        .iter()
        .zip(&per_segment)
        .map(|(h, r)| Segment {
            hyp: h,
            refs: r,
            src: None,
        })
        .collect();
    bleu.corpus_score(&segments).unwrap().value
}

#[test]
fn readme_corpus_example() {
    let refs: [&[&str]; 2] = [
        &[
            "The dog bit the man.",
            "It was not unexpected.",
            "The man bit him first.",
        ],
        &[
            "The dog had bit the man.",
            "No one was surprised.",
            "The man had bitten the dog.",
        ],
    ];
    let hyps = [
        "The dog bit the man.",
        "It wasn't surprising.",
        "The man had just bitten him.",
    ];
    assert!((corpus_bleu(&Bleu::default(), &hyps, &refs) - 48.530827).abs() < 1e-6);
    let none = Bleu {
        smoothing: Smoothing::None,
        ..Bleu::default()
    };
    assert!((corpus_bleu(&none, &hyps, &refs) - 48.530827).abs() < 1e-6);
    assert_eq!(corpus_bleu(&Bleu::default(), &["", "", ""], &refs), 0.0);
}

#[test]
fn sentence_bleu_smoothing_variants() {
    let (reference, system) = (
        "producţia de zahăr brut se exprimă în zahăr alb;",
        "Producția de zahăr primă va fi exprimată în ceea ce privește zahărul alb;",
    );
    let cases = [
        (Smoothing::Exp, 8.493),
        (Smoothing::None, 0.0),
        (Smoothing::Floor(0.1), 4.51688),
        (Smoothing::Floor(0.5), 10.10),
        (Smoothing::AddK(1.0), 14.882),
        (Smoothing::AddK(2.0), 21.389),
    ];
    for (smoothing, expected) in cases {
        let bleu = Bleu {
            smoothing,
            ..Bleu::default()
        };
        let refs = [reference];
        let got = bleu
            .sentence_score(&Segment {
                hyp: system,
                refs: &refs,
                src: None,
            })
            .unwrap()
            .value;
        assert!(
            (got - expected).abs() < 1e-3,
            "{smoothing:?}: {got} vs {expected}"
        );
        // #141: no matching unigram gives exactly zero whatever the smoothing.
        let zero = bleu.sentence_score(&Segment {
            hyp: "this is a cat",
            refs: &["okay thanks"],
            src: None,
        });
        assert_eq!(zero.unwrap().value, 0.0);
    }
}

#[test]
fn statistics_and_scoring() {
    let stats = Bleu::default().segment_stats(
        "am I am a character sequence",
        &["I am a symbol string sequence a a"],
    );
    assert_eq!((stats.correct, stats.total), ([4, 2, 1, 0], [6, 5, 4, 3]));
    let stats = BleuStats {
        sys_len: 11,
        ref_len: 11,
        correct: [9, 7, 5, 3],
        total: [10, 8, 6, 4],
    };
    let none = Bleu {
        smoothing: Smoothing::None,
        ..Bleu::default()
    };
    assert!((none.compute(&stats, false).score / 100.0 - 0.8375922397).abs() < 1e-8);
}

#[test]
fn degenerate_statistics_with_floor_smoothing() {
    let cases = [
        ([0, 0, 0, 0], [4, 4, 2, 1], 0, 1, 0.0),
        ([0, 0, 0, 0], [10, 11, 12, 0], 14, 10, 0.0),
        ([0, 0, 0, 0], [0, 0, 0, 0], 0, 0, 0.0),
        ([6, 5, 4, 0], [6, 5, 4, 3], 6, 6, 0.0),
        ([0, 0, 0, 0], [0, 0, 0, 0], 0, 0, 0.1),
        ([0, 0, 0, 0], [0, 0, 0, 0], 1, 5, 0.01),
    ];
    for (correct, total, sys_len, ref_len, offset) in cases {
        let bleu = Bleu {
            smoothing: Smoothing::Floor(offset),
            ..Bleu::default()
        };
        let stats = BleuStats {
            sys_len,
            ref_len,
            correct,
            total,
        };
        assert_eq!(bleu.compute(&stats, false).score, 0.0);
    }
}

#[test]
fn effective_order_examples() {
    // test_bleu.py's effective-order cases, at sentence level (where we use it).
    for (hyp, reference, expected) in [
        ("test", "a test", 0.3678794411714425),
        ("a test", "a test", 1.0),
    ] {
        let refs = [reference];
        let got = Bleu::default()
            .sentence_score(&Segment {
                hyp,
                refs: &refs,
                src: None,
            })
            .unwrap()
            .value;
        assert!((got / 100.0 - expected).abs() < 1e-8, "{hyp}: {got}");
    }
}

#[test]
fn chrf_effective_order_vectors() {
    // test_chrf.py, sacreBLEU's default (non-eps) smoothing with beta = 3.
    let chrf = Chrf {
        beta: 3.0,
        ..Chrf::default()
    };
    let cases: [(&[&str], &[&str], f64); 7] = [
        (&["a"], &["a"], 100.0),
        (&[""], &["reference"], 0.0),
        (&["a b c"], &["a b c"], 100.0),
        (&["a b c"], &["abc"], 100.0),
        (&[""], &["c"], 0.0),
        (&["a", "b"], &["a", "c"], 50.0),
        (&["aa"], &["ab"], 25.0),
    ];
    for (hyps, refs, expected) in cases {
        let one: Vec<[&str; 1]> = refs.iter().map(|r| [*r]).collect();
        let segments: Vec<Segment> = hyps
            .iter()
            .zip(&one)
            .map(|(h, r)| Segment {
                hyp: h,
                refs: r,
                src: None,
            })
            .collect();
        let got = chrf.corpus_score(&segments).unwrap().value;
        assert!((got - expected).abs() < 1e-4, "{hyps:?} vs {refs:?}: {got}");
    }
}

#[test]
fn rouge_empty_inputs_score_zero() {
    for kind in [RougeKind::N(1), RougeKind::N(2), RougeKind::Lcs] {
        let rouge = Rouge::new(kind, false);
        assert_eq!(rouge.score_pair("", "testing one two").fmeasure, 0.0);
        assert_eq!(rouge.score_pair("testing one two", "").fmeasure, 0.0);
    }
    let r1 = Rouge::new(RougeKind::N(1), false).score_pair("testing one two", "testing");
    assert_eq!((r1.precision, r1.recall), (1.0, 1.0 / 3.0));
}
