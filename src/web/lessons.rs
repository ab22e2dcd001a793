//! Browser bindings of the lessons (`stress::lessons`): the registry, and
//! one step run in the model worker with the page's loaded models.

use wasm_bindgen::prelude::*;

use super::{js_err, to_js};
use crate::stress::lessons::{LessonModels, registry, run_step};

/// Every lesson with its steps (texts, actions, metrics, claims), and
/// `runsWith`: what its steps score with, in words.
#[wasm_bindgen(js_name = lessonRegistry)]
pub fn lesson_registry() -> Result<JsValue, JsError> {
    #[derive(serde::Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Shown<'a> {
        #[serde(flatten)]
        lesson: &'a crate::stress::lessons::Lesson,
        runs_with: String,
    }
    let shown: Vec<Shown> = registry()
        .map_err(js_err)?
        .iter()
        .map(|lesson| Shown {
            runs_with: lesson.runs_with(),
            lesson,
        })
        .collect();
    to_js(&shown)
}

/// Runs step `step` of lesson `lesson`. `bertscore` names the loaded model
/// BERTScore runs on (also the raising search's word neighbours), `nli` the
/// one MENLI runs on, `causal_lm` the one GPT-PPL runs on (and MAUVE's GPT-2
/// features), `seq2seq_lm` the one UniEval runs on; positioned errors use the GPT-2 tokenizer the page loaded
/// (`loadGpt2Tokenizer`). Without them, a step that needs one says what to load.
#[wasm_bindgen(js_name = runLessonStep)]
pub async fn run_lesson_step(
    lesson: String,
    step: usize,
    bertscore: Option<String>,
    nli: Option<String>,
    causal_lm: Option<String>,
    seq2seq_lm: Option<String>,
    judge: Option<String>,
) -> Result<JsValue, JsError> {
    super::count_job();
    let neighbours = match bertscore.as_deref() {
        Some(name) => Some(super::attack::neighbours_of(name).await?),
        None => None,
    };
    // Only positioned-error steps read GPT-2's tokenizer (a copy of ~50k
    // entries): the others are not given it.
    let positioned = registry()
        .map_err(js_err)?
        .iter()
        .find(|l| l.id == lesson)
        .and_then(|l| l.steps.get(step))
        .is_some_and(|s| s.action.uses_lm_tokenizer());
    let lm_tokenizer = positioned
        .then(|| super::with_lm_tokenizer(|t| t.cloned()))
        .flatten();
    let models = LessonModels {
        bertscore,
        nli,
        causal_lm,
        seq2seq_lm,
        judge,
        lm_tokenizer: lm_tokenizer.as_ref(),
        neighbours: neighbours.as_deref(),
    };
    let engine = super::attack::engine();
    let result = run_step(&engine, &lesson, step, &models)
        .await
        .map_err(js_err)?;
    to_js(&result)
}
