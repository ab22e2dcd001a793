//! Every lesson step runs offline (model-free metrics and MiniLM) and its
//! claim holds on the numbers it computes; the checks themselves are
//! recomputed here from the rows, so a wrong verdict cannot pass. The NLI
//! step runs on a tiny random NLI classifier, the GPT-2 steps on a tiny
//! random GPT-2, the UniEval step on a tiny random T5 and the judge step on
//! a tiny random Qwen2 with its chat template (no real ones offline): their
//! verdicts are recomputed, whether they hold or not.

use crate::common;

use std::path::Path;
use std::rc::Rc;

use blindspot::metrics::engine::EngineError;
use blindspot::metrics::{Engine, ModelSlot, ModelStore};
use blindspot::models::Plm;
use blindspot::stress::attack::Neighbours;
use blindspot::stress::lessons::{Claim, LessonError, LessonModels, registry, run_step};
use futures::executor::block_on;

/// MiniLM for every slot but MENLI's, which gets the NLI classifier, and
/// the tiny GPT-2 when a step names it.
struct MiniLm(Rc<Plm>, Option<Rc<Plm>>);

impl ModelStore for MiniLm {
    fn model(&self, slot: ModelSlot, name: Option<&str>) -> Result<Rc<Plm>, EngineError> {
        match (slot, &self.1, name) {
            (_, _, Some(TINY_GPT2)) => Ok(tiny_gpt2()),
            (_, _, Some(TINY_T5)) => Ok(tiny_t5()),
            (_, _, Some(TINY_JUDGE)) => Ok(tiny_judge()),
            (ModelSlot::Menli, Some(nli), _) => Ok(nli.clone()),
            _ => Ok(self.0.clone()),
        }
    }
}

const TINY_GPT2: &str = "tiny-gpt2";
const TINY_T5: &str = "tiny-t5";
const TINY_JUDGE: &str = "tiny-qwen2";

fn tiny_judge() -> Rc<Plm> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/llm/qwen2");
    Rc::new(common::cpu_model(TINY_JUDGE, &dir))
}

fn tiny_t5() -> Rc<Plm> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/t5/tiny");
    Rc::new(common::cpu_model(TINY_T5, &dir))
}

fn tiny_gpt2() -> Rc<Plm> {
    thread_local!(static GPT2: Rc<Plm> = {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/plm/gpt2");
        Rc::new(common::cpu_model(TINY_GPT2, &dir))
    });
    GPT2.with(Rc::clone)
}

fn tiny_nli() -> Rc<Plm> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/plm/roberta_cls");
    Rc::new(common::cpu_model("tiny-roberta-nli", &dir))
}

fn minilm() -> Rc<Plm> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/all-MiniLM-L6-v2");
    Rc::new(common::cpu_model("all-MiniLM-L6-v2", &dir))
}

#[test]
fn every_step_holds_its_claim_on_its_own_numbers() {
    let plm = minilm();
    let neighbours = block_on(Neighbours::of(plm.clone())).unwrap();
    let engine = Engine::new(MiniLm(plm, Some(tiny_nli())));
    let gpt2_tokenizer = common::gpt2_tokenizer();
    let models = LessonModels {
        bertscore: Some("all-MiniLM-L6-v2".into()),
        nli: Some("tiny-roberta-nli".into()),
        causal_lm: Some(TINY_GPT2.into()),
        seq2seq_lm: Some(TINY_T5.into()),
        judge: Some(TINY_JUDGE.into()),
        lm_tokenizer: Some(&gpt2_tokenizer),
        neighbours: Some(&neighbours),
    };
    let mut random_steps = 0;
    let lessons = registry().unwrap();
    assert!(lessons.len() >= 6);
    let mut failed = Vec::new();
    for lesson in lessons {
        for (i, step) in lesson.steps.iter().enumerate() {
            let r = block_on(run_step(&engine, &lesson.id, i, &models)).unwrap();
            eprintln!("{} {i}: {}", lesson.id, r.claim.statement);
            for row in &r.rows {
                eprintln!("   {:<12} {:?}", row.metric, row.values);
                assert_eq!(row.values.len(), r.texts.len());
            }
            // A random NLI classifier or GPT-2 says nothing about the
            // claim: only the verdict is checked there.
            let random_model = step.model_offer.is_some();
            random_steps += usize::from(random_model);
            if !r.claim.held && !random_model {
                failed.push(format!("{} step {i}: {}", lesson.id, r.claim.statement));
                continue;
            }
            let values = |m: &str| &r.rows.iter().find(|x| x.metric == m).unwrap().values;
            // The verdict, recomputed from the rows.
            let held = match &step.claim {
                Claim::Barely {
                    metric,
                    a,
                    b,
                    slack,
                } => values(metric)[*a] - values(metric)[*b] <= *slack,
                Claim::Higher { metric, a, b } => values(metric)[*a] > values(metric)[*b],
                Claim::DropsMore { metric, a, b } => {
                    let v = values(metric);
                    v[0] - v[*a] > v[0] - v[*b]
                }
                Claim::Highest { metric, a } => {
                    let v = values(metric);
                    (0..v.len()).all(|k| k == *a || v[*a] > v[k])
                }
                Claim::Lowest { metric, a } => {
                    let v = values(metric);
                    (0..v.len()).all(|k| k == *a || v[*a] < v[k])
                }
                Claim::TracksMore {
                    metric,
                    correlate,
                    human,
                } => {
                    let at = |c: &str| r.texts.iter().position(|(l, _)| l == c).unwrap();
                    let v = values(metric);
                    v[at(correlate)].abs() > v[at(human)].abs()
                }
                Claim::AttackMet => r.attack.as_ref().unwrap().success,
                Claim::Baseline { .. } => true,
            };
            assert_eq!(held, r.claim.held, "{}", r.claim.statement);
            // An attack's text is the one scored.
            if let Some(o) = &r.attack {
                assert_eq!(r.texts.last().unwrap().1, o.text);
            }
        }
    }
    assert!(failed.is_empty(), "{failed:#?}");
    // The NLI step, the two GPT-2 steps, the UniEval step and the judge step.
    assert_eq!(random_steps, 5);
}

#[test]
fn a_step_without_its_model_says_what_to_load() {
    let engine = Engine::lexical();
    let err = block_on(run_step(&engine, "truncation", 1, &LessonModels::default())).unwrap_err();
    assert!(matches!(err, LessonError::Needs(_)), "{err}");
    assert!(err.to_string().contains("MiniLM"), "{err}");
    // The NLI step names a model small enough for a browser, with its size.
    let bertscore_only = LessonModels {
        bertscore: Some("all-MiniLM-L6-v2".into()),
        ..LessonModels::default()
    };
    let engine_minilm = Engine::new(MiniLm(minilm(), None));
    let err = block_on(run_step(&engine_minilm, "paraphrase", 2, &bertscore_only)).unwrap_err();
    assert!(matches!(err, LessonError::Needs(_)), "{err}");
    assert!(
        err.to_string()
            .contains("cross-encoder/nli-distilroberta-base (329 MB)"),
        "{err}"
    );
    assert_eq!(
        registry().unwrap()[1].steps[2].model_offer.as_deref(),
        Some(blindspot::stress::lessons::BROWSER_NLI)
    );
    // The injection step names UniEval's evaluator, with its size.
    let err = block_on(run_step(&engine_minilm, "injection", 0, &bertscore_only)).unwrap_err();
    assert!(matches!(err, LessonError::Needs(_)), "{err}");
    assert!(
        err.to_string().contains("MingZhong/unieval-sum (3.1 GB)"),
        "{err}"
    );
    // The judge step names the instruction model it offers, with its size.
    let err = block_on(run_step(&engine_minilm, "judge", 0, &bertscore_only)).unwrap_err();
    assert!(matches!(err, LessonError::Needs(_)), "{err}");
    assert!(
        err.to_string()
            .contains("Qwen/Qwen2.5-0.5B-Instruct (988 MB)"),
        "{err}"
    );
    assert!(block_on(run_step(&engine, "nope", 0, &LessonModels::default())).is_err());
    assert!(block_on(run_step(&engine, "truncation", 9, &LessonModels::default())).is_err());
}

#[test]
fn the_audit_lesson_correlates_scores_against_the_article() {
    // Recomputed here without the audit: each bundled summary scored against
    // its article, then Kendall's τ with its length and its relevance rating.
    use blindspot::metrics::{MetricSpec, Segment};
    use blindspot::stress::audit::kendall;
    let plm = minilm();
    let engine = Engine::new(MiniLm(plm, None));
    let models = LessonModels {
        bertscore: Some("all-MiniLM-L6-v2".into()),
        ..LessonModels::default()
    };
    let r = block_on(run_step(&engine, "spurious", 0, &models)).unwrap();
    let labels: Vec<&str> = r.texts.iter().map(|(l, _)| l.as_str()).collect();
    assert_eq!(
        labels,
        [
            "coherence",
            "consistency",
            "fluency",
            "relevance",
            "length",
            "coverage",
            "density"
        ]
    );
    let docs = blindspot::data::load_summeval(blindspot::data::BUNDLED_AUDIT).rows;
    let articles: Vec<[&str; 1]> = docs
        .iter()
        .flat_map(|d| d.systems.iter().map(|_| [d.item.src.as_deref().unwrap()]))
        .collect();
    let outputs: Vec<&blindspot::data::SystemOutput> =
        docs.iter().flat_map(|d| &d.systems).collect();
    assert_eq!(outputs.len(), 24);
    let segments: Vec<Segment> = outputs
        .iter()
        .zip(&articles)
        .map(|(o, a)| Segment {
            hyp: &o.summary,
            refs: a,
            src: None,
        })
        .collect();
    let mut bertscore = MetricSpec::default_for("bertscore-f".parse().unwrap());
    if let MetricSpec::BertScore(b) = &mut bertscore {
        b.model = Some("all-MiniLM-L6-v2".into());
    }
    let specs = [MetricSpec::default_for("chrf".parse().unwrap()), bertscore];
    let columns = block_on(engine.score(&specs, &segments)).unwrap();
    let length: Vec<f64> = outputs
        .iter()
        .map(|o| blindspot::text::words::words(&o.summary).len() as f64)
        .collect();
    let relevance: Vec<f64> = outputs
        .iter()
        .map(|o| o.scores.iter().find(|(k, _)| k == "relevance").unwrap().1)
        .collect();
    for (row, column) in r.rows.iter().zip(&columns) {
        let v = column.values();
        assert!(
            (row.values[4] - kendall(&v, &length)).abs() < 1e-12,
            "{}",
            row.metric
        );
        assert!(
            (row.values[3] - kendall(&v, &relevance)).abs() < 1e-12,
            "{}",
            row.metric
        );
    }
    assert!(r.claim.held, "{}", r.claim.statement);
    assert!(r.texts[3].1.contains("demonstration"));
    // The figures the README quotes: chrF with length and relevance,
    // BERTScore with length, density and relevance.
    let near = |x: f64, y: f64| (x - y).abs() < 0.005;
    let (chrf, bs) = (&r.rows[0].values, &r.rows[1].values);
    assert!(near(chrf[4], 0.77) && near(chrf[3], 0.35), "{chrf:?}");
    assert!(
        near(bs[4], 0.66) && near(bs[6], 0.67) && near(bs[3], 0.25),
        "{bs:?}"
    );
}

#[test]
fn the_position_lesson_features_are_recomputed_here() {
    use blindspot::inject::{self, Context};
    use blindspot::metrics::mauve;
    let passages = blindspot::stress::lessons::passages().unwrap();
    let engine = Engine::new(MiniLm(minilm(), None));
    let tokenizer = common::gpt2_tokenizer();
    let models = LessonModels {
        bertscore: Some("all-MiniLM-L6-v2".into()),
        lm_tokenizer: Some(&tokenizer),
        ..LessonModels::default()
    };
    // Without a causal LM, the GPT-2 steps offer GPT-2 with its size; without
    // GPT-2's tokenizer, no step can place its errors.
    for step in [0, 1] {
        let err = block_on(run_step(&engine, "position", step, &models)).unwrap_err();
        assert!(matches!(err, LessonError::Needs(_)), "{err}");
        assert!(err.to_string().contains("gpt2 (548 MB)"), "{err}");
    }
    let no_tokenizer = LessonModels {
        bertscore: Some("all-MiniLM-L6-v2".into()),
        ..LessonModels::default()
    };
    let err = block_on(run_step(&engine, "position", 2, &no_tokenizer)).unwrap_err();
    assert!(err.to_string().contains("GPT-2's tokenizer"), "{err}");
    // The encoder step: for each position, every passage corrupted there,
    // featurised as MAUVE does, and the cosine to the clean passage's
    // features averaged.
    let r = block_on(run_step(&engine, "position", 2, &models)).unwrap();
    let labels: Vec<&str> = r.texts.iter().map(|(l, _)| l.as_str()).collect();
    assert_eq!(
        labels,
        [
            "clean",
            "errors at the start",
            "errors in the middle",
            "errors at the end"
        ]
    );
    let plm = minilm();
    let injection = inject::create("positioned_random").unwrap();
    let ctx = Context {
        lm_tokenizer: Some(&tokenizer),
        ..Context::default()
    };
    let features = |texts: &[String]| {
        let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
        block_on(mauve::features(&plm, &texts)).unwrap()
    };
    // Every text's features, L2-normalised, then centred on the mean of
    // all 32 (as MAUVE's PCA centres); rows: clean, start, middle, end.
    let clean: Vec<String> = passages.iter().map(|p| p.to_string()).collect();
    let mut sets = vec![clean];
    for k in 1..4 {
        let set: Vec<String> = passages
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let out = inject::apply(injection, p, k as f64, i as u64, &ctx).unwrap();
                assert!(out.applied);
                out.text.trim().to_owned()
            })
            .collect();
        assert_eq!(r.texts[k].1, set[0]);
        sets.push(set);
    }
    let mut rows: Vec<Vec<f64>> = Vec::new();
    for set in &sets {
        let f = features(set);
        for row in f.rows() {
            let v: Vec<f64> = row.iter().map(|x| f64::from(*x)).collect();
            let norm = v.iter().map(|x| x * x).sum::<f64>().sqrt();
            rows.push(v.iter().map(|x| x / norm).collect());
        }
    }
    let width = rows[0].len();
    let mean: Vec<f64> = (0..width)
        .map(|j| rows.iter().map(|r| r[j]).sum::<f64>() / rows.len() as f64)
        .collect();
    for r in &mut rows {
        r.iter_mut().zip(&mean).for_each(|(x, m)| *x -= m);
    }
    let cosine = |a: &[f64], b: &[f64]| {
        let dot: f64 = a.iter().zip(b).map(|(x, y)| x * y).sum();
        let norm = |v: &[f64]| v.iter().map(|x| x * x).sum::<f64>().sqrt();
        dot / (norm(a) * norm(b))
    };
    let n = passages.len();
    assert_eq!(r.rows[0].values.len(), 4);
    for k in 0..4 {
        let expected = (0..n)
            .map(|i| cosine(&rows[i], &rows[k * n + i]))
            .sum::<f64>()
            / n as f64;
        assert!(
            (r.rows[0].values[k] - expected).abs() < 1e-9,
            "position {k}: {} vs {expected}",
            r.rows[0].values[k]
        );
    }
    assert!((r.rows[0].values[0] - 1.0).abs() < 1e-9);
    // The errors sit where the labels say: the start's first words, the end's
    // last words differ from the clean passage's.
    let words = |t: &str| t.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
    let (c, start, end) = (
        words(&passages[0]),
        words(&r.texts[1].1),
        words(&r.texts[3].1),
    );
    assert_ne!(start[..2], c[..2]);
    assert_eq!(start[start.len() - 5..], c[c.len() - 5..]);
    assert_eq!(end[..5], c[..5]);
    assert_ne!(end[end.len() - 2..], c[c.len() - 2..]);
}
