//! Browser bindings of the adversarial search (`stress::attack`): the
//! goals and strategies with their defaults, and one pair attacked step by
//! step in the model worker, reporting after each step and yielding to the
//! event loop so a stop request gets through.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;

use serde::{Deserialize, Serialize};
use wasm_bindgen::prelude::*;

use super::models::{PageModels, loaded};
use super::{JsEdit, js_err, to_js};
use crate::data::bundled_pairs;
use crate::metrics::{Engine, MetricSpec};
use crate::stress::attack::{
    Attack, AttackConfig, AttackOutcome, AttackTools, Goal, HelperError, Neighbours, ScorePool,
    Strategy, ZNorm, check, pair_z_norm, score_hypotheses,
};

thread_local! {
    /// Set by `stopAttack`, read between steps.
    static STOP: Cell<bool> = const { Cell::new(false) };
    /// Input-embedding neighbours of the last model asked, by load id.
    static NEIGHBOURS: RefCell<Option<(u64, Rc<Neighbours>)>> = const { RefCell::new(None) };
    /// An engine without the cards' details (thousands of candidates).
    static ENGINE: Rc<Engine> = Rc::new(Engine::new(PageModels).with_reference_cache());
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct GoalView {
    id: Goal,
    description: &'static str,
    default_strategy: Strategy,
    /// The papers' settings for this goal with its default strategy.
    defaults: AttackConfig,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct StrategyView {
    id: Strategy,
    description: &'static str,
    needs_masked_lm: bool,
    needs_neighbours: bool,
    /// Uses the embedding neighbours and masked LM when given (token-greedy).
    uses_models: bool,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct AttackRegistry {
    goals: Vec<GoalView>,
    strategies: Vec<StrategyView>,
    /// Pairs the z scale comes from besides the user's.
    z_pairs: usize,
}

/// Goals and strategies with their descriptions and the papers' defaults.
#[wasm_bindgen(js_name = attackRegistry)]
pub fn attack_registry() -> Result<JsValue, JsError> {
    to_js(&AttackRegistry {
        goals: Goal::ALL
            .iter()
            .map(|&g| GoalView {
                id: g,
                description: g.description(),
                default_strategy: g.default_strategy(),
                defaults: AttackConfig::new(g, g.default_strategy()),
            })
            .collect(),
        strategies: Strategy::ALL
            .iter()
            .map(|&s| StrategyView {
                id: s,
                description: s.description(),
                needs_masked_lm: s.needs_masked_lm(),
                needs_neighbours: s.needs_neighbours(),
                uses_models: s == Strategy::TokenGreedy,
            })
            .collect(),
        z_pairs: bundled_pairs().len(),
    })
}

/// What the attack panel asks.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct AttackRequest {
    spec: MetricSpec,
    config: AttackConfig,
    hypothesis: String,
    /// The reference box as typed.
    references: String,
    #[serde(default)]
    source: Option<String>,
    /// A loaded masked LM's name (CLARE; token-greedy's top-k).
    #[serde(default)]
    masked_lm: Option<String>,
    /// A loaded model whose input embeddings give neighbours.
    #[serde(default)]
    neighbours: Option<String>,
    /// A loaded causal LM for the fluency constraint.
    #[serde(default)]
    fluency: Option<String>,
}

/// What `attackPair` gives the page, which keeps it across a reload and
/// reads it back with `readAttackResult`.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct AttackView {
    outcome: AttackOutcome,
    /// `outcome.edits` in UTF-16 code units of `outcome.text` (derived
    /// again when a kept copy is read back).
    #[serde(skip_deserializing)]
    edits: Vec<JsEdit>,
    z: ZNorm,
    signature: String,
    tools: Vec<String>,
    /// The whole call (z scale, setup and search).
    elapsed_ms: f64,
    /// The search steps only (what queries per second are measured over).
    search_ms: f64,
    /// Workers that scored the candidates: this one and the most helpers
    /// whose scores one batch used.
    workers: usize,
    /// Why the helpers were given up mid-search (their shares were then
    /// scored here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pool_failure: Option<String>,
}

/// An attack result the page kept as JSON (across a reload): `attackPair`'s
/// value, checked by the core ([`ZNorm::check`], [`AttackOutcome::check`]:
/// edits, words changed and change in z derived again), or an error for a
/// damaged one.
#[wasm_bindgen(js_name = readAttackResult)]
pub fn read_attack_result(json: &str) -> Result<JsValue, JsError> {
    let mut view: AttackView = crate::data::read_kept(json, "attack result", |v: &AttackView| {
        v.z.check()?;
        v.outcome.check(&v.z)?;
        if v.signature.is_empty() || v.workers == 0 {
            return Err(crate::data::Damage(
                "it names no metric signature or no worker".into(),
            ));
        }
        Ok(())
    })
    .map_err(js_err)?;
    view.edits = JsEdit::of(&view.outcome.text, &view.outcome.edits);
    to_js(&view)
}

/// The model worker's helper workers (`model-worker.js`): `{size,
/// score(helper, spec, texts, references, source) -> Promise<Float64Array>,
/// failure}`, each helper running [`attack_scores`] on its own copy of the
/// engine. `size` (the helpers ready now) and `failure` (why a helper could
/// not start) are read when needed: they may be getters.
struct JsPool {
    pool: JsValue,
    score: js_sys::Function,
}

impl JsPool {
    /// `None` for `undefined` or `null`; an error for anything else that is
    /// not such a pool.
    fn of(value: &JsValue) -> Result<Option<Self>, JsError> {
        if value.is_undefined() || value.is_null() {
            return Ok(None);
        }
        let score = js_sys::Reflect::get(value, &"score".into())
            .ok()
            .and_then(|f| f.dyn_into::<js_sys::Function>().ok());
        match score {
            Some(score) => Ok(Some(JsPool {
                pool: value.clone(),
                score,
            })),
            None => Err(JsError::new(
                "invalid scoring pool: expected {size, score(helper, spec, texts, references, source)}",
            )),
        }
    }

    fn get(&self, key: &str) -> JsValue {
        js_sys::Reflect::get(&self.pool, &key.into()).unwrap_or(JsValue::UNDEFINED)
    }

    /// Why a helper could not start, if one could not.
    fn failure(&self) -> Option<String> {
        self.get("failure").as_string()
    }
}

impl ScorePool for JsPool {
    fn size(&self) -> usize {
        self.get("size")
            .as_f64()
            .filter(|n| n.is_finite() && *n >= 0.0)
            .map_or(0, |n| n as usize)
    }

    fn score(
        &self,
        helper: usize,
        spec: &MetricSpec,
        texts: &[String],
        refs: &[&str],
        src: Option<&str>,
    ) -> Pin<Box<dyn Future<Output = Result<Vec<f64>, HelperError>>>> {
        let strings =
            |v: &mut dyn Iterator<Item = &str>| v.map(JsValue::from_str).collect::<js_sys::Array>();
        let args = js_sys::Array::of5(
            &JsValue::from(helper as u32),
            &to_js(spec).unwrap_or(JsValue::NULL),
            &strings(&mut texts.iter().map(String::as_str)),
            &strings(&mut refs.iter().copied()),
            &src.map_or(JsValue::UNDEFINED, JsValue::from_str),
        );
        // Called now: the helper starts while the search scores its share.
        let started = self.score.apply(&JsValue::NULL, &args);
        Box::pin(async move {
            let message = |e: JsValue| {
                HelperError(
                    e.dyn_ref::<js_sys::Error>()
                        .map(|e| String::from(e.message()))
                        .or_else(|| e.as_string())
                        .unwrap_or_else(|| "a scoring helper failed".into()),
                )
            };
            let promise = started.map_err(message)?;
            let value = wasm_bindgen_futures::JsFuture::from(js_sys::Promise::resolve(&promise))
                .await
                .map_err(message)?;
            if !js_sys::Array::is_array(&value) && !value.is_instance_of::<js_sys::Float64Array>() {
                return Err(HelperError("a scoring helper returned no scores".into()));
            }
            Ok(js_sys::Float64Array::new(&value).to_vec())
        })
    }
}

/// A helper worker's share of an attack's batch: `texts` scored as
/// hypotheses against `references` (and `source`) with `spec`, exactly as
/// the search scores its own share ([`score_hypotheses`]).
#[wasm_bindgen(js_name = attackScores)]
pub async fn attack_scores(
    spec: JsValue,
    texts: Vec<String>,
    references: Vec<String>,
    source: Option<String>,
) -> Result<Vec<f64>, JsError> {
    super::count_job();
    let spec: MetricSpec = serde_wasm_bindgen::from_value(spec)
        .map_err(|e| JsError::new(&format!("invalid metric spec: {e}")))?;
    let refs: Vec<&str> = references.iter().map(String::as_str).collect();
    let engine = engine();
    let (values, _) = score_hypotheses(&engine, &spec, &texts, &refs, source.as_deref())
        .await
        .map_err(js_err)?;
    Ok(values)
}

/// The engine attacks and lessons score with (no card details).
pub(super) fn engine() -> Rc<Engine> {
    ENGINE.with(Rc::clone)
}

/// Resolves after the event loop has run (a message can arrive).
pub(super) async fn yield_to_events() {
    let promise = js_sys::Promise::new(&mut |resolve, _| {
        let global = js_sys::global();
        let set_timeout = js_sys::Reflect::get(&global, &"setTimeout".into())
            .ok()
            .and_then(|f| f.dyn_into::<js_sys::Function>().ok());
        match set_timeout {
            Some(f) => {
                let _ = f.call2(&global, &resolve, &JsValue::from(0));
            }
            None => {
                let _ = resolve.call0(&JsValue::NULL);
            }
        }
    });
    let _ = wasm_bindgen_futures::JsFuture::from(promise).await;
}

pub(super) async fn neighbours_of(name: &str) -> Result<Rc<Neighbours>, JsError> {
    let plm = loaded(name)?;
    if let Some(n) = NEIGHBOURS.with(|c| {
        c.borrow()
            .as_ref()
            .filter(|(id, _)| *id == plm.load_id)
            .map(|(_, n)| n.clone())
    }) {
        return Ok(n);
    }
    let id = plm.load_id;
    let n = Rc::new(Neighbours::of(plm).await.map_err(js_err)?);
    NEIGHBOURS.with(|c| *c.borrow_mut() = Some((id, n.clone())));
    Ok(n)
}

/// Attacks the page's pair: `{spec, config, hypothesis, references,
/// source?, maskedLm?, neighbours?, fluency?}`. The z scale is the metric's
/// spread over the bundled pairs and this one. `progress(AttackProgress)`
/// after each step; `stopAttack()` ends the search after the current step
/// (the best so far is returned). `pool` (optional): helper workers that
/// score shares of each batch ([`JsPool`]).
#[wasm_bindgen(js_name = attackPair)]
pub async fn attack_pair(
    request: JsValue,
    progress: js_sys::Function,
    pool: JsValue,
) -> Result<JsValue, JsError> {
    super::count_job();
    let start = js_sys::Date::now();
    STOP.with(|s| s.set(false));
    let r: AttackRequest = serde_wasm_bindgen::from_value(request)
        .map_err(|e| JsError::new(&format!("invalid attack request: {e}")))?;
    let pool = JsPool::of(&pool)?;
    let refs = crate::text::references(&r.references);
    let src = r.source.as_deref().filter(|s| !s.trim().is_empty());
    let mlm_plm = r.masked_lm.as_deref().map(loaded).transpose()?;
    let masked_lm = super::masked_lm_of(mlm_plm.as_deref())?;
    let neighbours = match r.neighbours.as_deref() {
        Some(name) => Some(neighbours_of(name).await?),
        None => None,
    };
    let fluency = match r.fluency.as_deref() {
        Some(name) => Some(AttackTools::fluency_spec(Some(loaded(name)?.name.clone()))),
        None => None,
    };
    let tools = AttackTools {
        masked_lm: masked_lm.as_ref(),
        neighbours: neighbours.as_deref(),
        fluency,
        pool: pool.as_ref().map(|p| p as &dyn ScorePool),
    };
    check(&r.spec, &r.config, &tools).map_err(js_err)?;
    let engine = engine();
    let z = pair_z_norm(&engine, &r.spec, &r.hypothesis, &refs)
        .await
        .map_err(js_err)?;
    let mut attack = Attack::new(
        &engine,
        &r.spec,
        &r.config,
        &tools,
        z,
        &r.hypothesis,
        &refs,
        src,
    )
    .await
    .map_err(js_err)?;
    let search_start = js_sys::Date::now();
    loop {
        let done = attack.step().await.map_err(js_err)?;
        let _ = progress.call1(&JsValue::NULL, &to_js(&attack.progress())?);
        if done {
            break;
        }
        yield_to_events().await;
        if STOP.with(Cell::get) {
            attack.stop();
        }
    }
    let outcome = attack.outcome(0, "yours");
    to_js(&AttackView {
        edits: JsEdit::of(&outcome.text, &outcome.edits),
        outcome,
        z,
        signature: attack.signature.clone(),
        tools: tools.names(r.config.goal),
        elapsed_ms: js_sys::Date::now() - start,
        search_ms: js_sys::Date::now() - search_start,
        workers: 1 + attack.helpers_used(),
        pool_failure: attack
            .pool_failure()
            .or_else(|| pool.as_ref().and_then(JsPool::failure)),
    })
}

/// Drops the neighbour table and cached embeddings of an unloaded model.
pub(super) fn forget(load: u64) {
    engine().forget(load);
    NEIGHBOURS.with(|c| {
        let mut c = c.borrow_mut();
        if c.as_ref().is_some_and(|(id, _)| *id == load) {
            *c = None;
        }
    });
}

/// Ends the running attack after its current step.
#[wasm_bindgen(js_name = stopAttack)]
pub fn stop_attack() {
    STOP.with(|s| s.set(true));
}
