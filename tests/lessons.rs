//! Every lesson step runs offline (model-free metrics and MiniLM) and its
//! claim holds on the numbers it computes; the checks themselves are
//! recomputed here from the rows, so a wrong verdict cannot pass.

use std::path::Path;
use std::rc::Rc;

use blindspot::metrics::engine::EngineError;
use blindspot::metrics::{Engine, ModelSlot, ModelStore};
use blindspot::models::{ModelFiles, Plm, Precision};
use blindspot::stress::attack::Neighbours;
use blindspot::stress::lessons::{Claim, LessonError, LessonModels, registry, run_step};
use burn::tensor::Device;
use futures::executor::block_on;

struct MiniLm(Rc<Plm>);

impl ModelStore for MiniLm {
    fn model(&self, _: ModelSlot, _: Option<&str>) -> Result<Rc<Plm>, EngineError> {
        Ok(self.0.clone())
    }
}

fn minilm() -> Rc<Plm> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/all-MiniLM-L6-v2");
    Rc::new(
        Plm::load(
            "all-MiniLM-L6-v2",
            ModelFiles::from_path(&dir).unwrap(),
            &Device::flex(),
            Precision::F32,
        )
        .unwrap(),
    )
}

#[test]
fn every_step_holds_its_claim_on_its_own_numbers() {
    let plm = minilm();
    let neighbours = block_on(Neighbours::of(plm.clone())).unwrap();
    let engine = Engine::new(MiniLm(plm));
    let models = LessonModels {
        bertscore: Some("all-MiniLM-L6-v2".into()),
        neighbours: Some(&neighbours),
    };
    let lessons = registry();
    assert!(lessons.len() >= 5);
    let mut failed = Vec::new();
    for lesson in &lessons {
        for (i, step) in lesson.steps.iter().enumerate() {
            let r = block_on(run_step(&engine, lesson.id, i, &models)).unwrap();
            eprintln!("{} {i}: {}", lesson.id, r.claim.statement);
            for row in &r.rows {
                eprintln!("   {:<12} {:?}", row.metric, row.values);
                assert_eq!(row.values.len(), r.texts.len());
            }
            if !r.claim.held {
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
                Claim::AttackMet => r.attack.as_ref().unwrap().success,
                Claim::Baseline { .. } => true,
            };
            assert!(held);
            // An attack's text is the one scored.
            if let Some(o) = &r.attack {
                assert_eq!(r.texts.last().unwrap().1, o.text);
            }
        }
    }
    assert!(failed.is_empty(), "{failed:#?}");
}

#[test]
fn a_step_without_its_model_says_what_to_load() {
    let engine = Engine::lexical();
    let err = block_on(run_step(&engine, "truncation", 1, &LessonModels::default())).unwrap_err();
    assert!(matches!(err, LessonError::Needs(_)), "{err}");
    assert!(err.to_string().contains("MiniLM"), "{err}");
    assert!(block_on(run_step(&engine, "nope", 0, &LessonModels::default())).is_err());
    assert!(block_on(run_step(&engine, "truncation", 9, &LessonModels::default())).is_err());
}
