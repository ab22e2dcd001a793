//! The one runner of a suite ([`SuiteRun`]): a whole run or one shard,
//! natively (`run`, blocking) or in the browser (`run_async`, with a turn
//! for the caller between batches). Its steps: plan the tests, score the
//! gold texts, then per test perturb every item, score the changed texts
//! (lexically in parallel natively, then with the model scorer in batches)
//! and hand the finished test to whoever streams it.

use rustc_hash::FxHashMap;

use super::{
    ItemCells, MODEL_CHUNK, MetricEntry, ModelRows, ModelScorer, Plan, Planned, Progress,
    SAMPLE_POOL, SetMode, Shard, SuiteConfig, SuiteError, SuiteModels, SuitePart, SuiteReport,
    TestPart, aggregate, aggregate_test, base_means, no_shards, plan,
};
use crate::data::Item;
use crate::inject::masked_lm::MaskedLm;
use crate::inject::other::NgramCorpus;
use crate::inject::{self, Context, Injected, Injection};
use crate::metrics::{Level, MetricSpec, Segment};
use crate::models::tokenizer::LmTokenizer;

/// One run of a suite over a dataset: what to run, on which items (a
/// shard, or all), with which models, telling `progress`. [`SuiteRun::run`]
/// and [`SuiteRun::run_async`] give the items' outcomes ([`SuitePart`]);
/// [`SuitePart::report`] turns a whole run's into its report.
pub struct SuiteRun<'a> {
    /// The dataset's name, for the report.
    pub dataset: &'a str,
    /// Every item of the dataset.
    pub items: &'a [Item],
    /// The injections, metrics and seeds.
    pub config: &'a SuiteConfig,
    /// Language models and the metrics' options, beyond the lexical metrics.
    pub models: SuiteModels<'a>,
    /// The shard to run, or `None` for every item.
    pub shard: Option<Shard>,
    /// Told `(steps done, steps total)`; returning `false` cancels.
    pub progress: Progress<'a>,
}

/// A progress callback that never cancels.
fn go_on(_: usize, _: usize) -> bool {
    true
}

impl<'a> SuiteRun<'a> {
    /// A whole run with lexical metrics only, no progress reports.
    pub fn new(dataset: &'a str, items: &'a [Item], config: &'a SuiteConfig) -> Self {
        Self {
            dataset,
            items,
            config,
            models: SuiteModels::default(),
            shard: None,
            progress: &go_on,
        }
    }

    /// The same run with `models`.
    pub fn models(self, models: SuiteModels<'a>) -> Self {
        Self { models, ..self }
    }

    /// The same run over `shard`'s items (`None`: all).
    pub fn shard(self, shard: Option<Shard>) -> Self {
        Self { shard, ..self }
    }

    /// The same run telling `progress`.
    pub fn progress(self, progress: Progress<'a>) -> Self {
        Self { progress, ..self }
    }

    /// Runs it, blocking (natively: model passes never wait on an event loop).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn run(self) -> Result<SuitePart, SuiteError> {
        futures::executor::block_on(self.run_async(async || {}))
    }

    /// Runs it: `breathe()` is awaited after each batch of items or model
    /// scores, a turn in which `progress` may learn that it should stop (the
    /// page's worker hears its stop request there).
    pub async fn run_async(mut self, breathe: impl AsyncFn()) -> Result<SuitePart, SuiteError> {
        let mut scoring = Scoring {
            scorer: self.models.scorer.take(),
            masked_lm: self.models.masked_lm,
            signatures: Vec::new(),
        };
        let ctx = Ctx::start(&self, scoring.scorer.is_some())?;
        let mut base = ctx.base_scores(&breathe).await?;
        let gold_texts: Vec<Vec<&str>> = ctx.indices.iter().map(|&i| vec![ctx.golds[i]]).collect();
        let columns = ctx.plan.model_columns.clone();
        ctx.model_pass(
            &mut scoring,
            &gold_texts,
            ctx.gold_set(),
            &breathe,
            |k, _, values| {
                for (&m, &v) in columns.iter().zip(values) {
                    base[k][m] = v;
                }
            },
        )
        .await?;
        let metrics = ctx.metric_entries(&scoring.signatures);
        let mut emitter = Emitter::new(&self, &ctx, metrics.clone(), &base);
        let mut tests = Vec::with_capacity(ctx.plan.tests.len());
        for planned in &ctx.plan.tests {
            let test = ctx.test(&mut scoring, planned, &base, &breathe).await?;
            emitter.emit(&test)?;
            tests.push(test);
        }
        Ok(SuitePart {
            tool: tool(),
            dataset: self.dataset.to_owned(),
            items: self.items.len(),
            shard: self.shard,
            config: self.config.clone(),
            metrics,
            indices: ctx.indices,
            base,
            tests,
        })
    }
}

impl SuitePart {
    /// The report of a whole run ([`aggregate`]; a shard is refused: merge
    /// the shards instead).
    pub fn report(&self) -> Result<SuiteReport, SuiteError> {
        aggregate(self)
    }
}

/// `blindspot X.Y.Z`, as reports name the tool.
fn tool() -> String {
    format!("blindspot {}", env!("CARGO_PKG_VERSION"))
}

/// What a run reads and never changes: shared by the items scored in
/// parallel natively (so `Sync` there).
struct Ctx<'r> {
    items: &'r [Item],
    /// The part's items, by index in the dataset.
    indices: Vec<usize>,
    plan: Plan,
    steps: Steps<'r>,
    /// Every item's gold text.
    golds: Vec<&'r str>,
    /// The frequent n-grams' counts over every gold text (whichever shard runs).
    corpus: Option<NgramCorpus>,
    lm_tokenizer: Option<&'r LmTokenizer>,
}

/// What a run changes as it goes: the model scorer, the masked LM, and the
/// model metrics' signatures (every batch must be scored by the same models).
struct Scoring<'r> {
    scorer: Option<&'r mut dyn ModelScorer>,
    masked_lm: Option<&'r dyn MaskedLm>,
    signatures: Vec<String>,
}

/// One model pass of a test: per item, the texts to score and the cell of
/// each, and the set they are scored within (every item's text), if any.
struct Round<'a> {
    texts: Vec<Vec<&'a str>>,
    cell_of: Vec<Vec<usize>>,
    set: Option<Vec<&'a str>>,
}

impl<'r> Ctx<'r> {
    /// Plans the run and counts its steps.
    fn start(run: &SuiteRun<'r>, has_scorer: bool) -> Result<Self, SuiteError> {
        let plan = plan(run.items, run.config, &run.models, has_scorer)?;
        if plan.set == SetMode::PerCell && run.shard.is_some() {
            return Err(no_shards());
        }
        let items = run.items;
        let indices: Vec<usize> = run
            .shard
            .map_or(0..items.len(), |s| s.range(items.len()))
            .collect();
        let runnable = plan.tests.iter().filter(|t| t.skipped.is_none()).count();
        let steps = Steps {
            done: 0.into(),
            total: indices.len() * (1 + runnable + plan.model_rounds()),
            cancelled: false.into(),
            progress: run.progress,
        };
        let golds: Vec<&str> = items.iter().map(|i| i.gold.as_str()).collect();
        let corpus = plan
            .tests
            .iter()
            .any(|t| t.skipped.is_none() && t.injection.info().counts_corpus)
            .then(|| NgramCorpus::new(&golds));
        Ok(Ctx {
            items,
            indices,
            plan,
            steps,
            golds,
            corpus,
            lm_tokenizer: run.models.lm_tokenizer,
        })
    }

    /// The gold set, where the model metrics read the dataset as a set.
    fn gold_set(&self) -> Option<&[&'r str]> {
        (self.plan.set != SetMode::Alone).then_some(self.golds.as_slice())
    }

    /// Lexical scores of every gold hypothesis (0 where the model scorer fills in).
    async fn base_scores(&self, breathe: &impl AsyncFn()) -> Result<Vec<Vec<f64>>, SuiteError> {
        let mut base = Vec::with_capacity(self.indices.len());
        for range in item_chunks(self.indices.len(), ITEM_CHUNK) {
            base.extend(map_items(range, &|k| {
                self.steps.check()?;
                let item = &self.items[self.indices[k]];
                let scores = self.lexical_scores(item, &item.gold);
                self.steps.step();
                scores
            }));
            breathe().await;
            self.steps.poll();
        }
        base.into_iter().collect()
    }

    /// Lexical scores of `text` for `item` (0 where the model scorer fills in).
    fn lexical_scores(&self, item: &Item, text: &str) -> Result<Vec<f64>, SuiteError> {
        let refs: Vec<&str> = item.refs.iter().map(String::as_str).collect();
        let segment = Segment {
            hyp: text,
            refs: &refs,
            src: item.src.as_deref(),
        };
        self.plan
            .lexical
            .iter()
            .map(|m| match m {
                Some(m) => m
                    .sentence_score(&segment)
                    .map(|s| s.value)
                    .map_err(|e| SuiteError::Metric(format!("item {}: {e}", item.id))),
                None => Ok(0.0),
            })
            .collect()
    }

    /// Each metric's entry in the report: its lexical signature, or the
    /// model scorer's (from the base pass).
    fn metric_entries(&self, model_signatures: &[String]) -> Vec<MetricEntry> {
        let items = self.items;
        let uniform = items.iter().all(|i| i.refs.len() == items[0].refs.len());
        let nrefs = uniform.then(|| items[0].refs.len());
        let mut signatures = model_signatures.iter().cloned();
        self.plan
            .specs
            .iter()
            .zip(&self.plan.lexical)
            .map(|(spec, lexical)| MetricEntry {
                id: spec.id().to_string(),
                name: spec.info().name.to_owned(),
                signature: match lexical {
                    Some(m) => m.signature(Level::Sentence, nrefs).to_string(),
                    None => signatures.next().unwrap_or_default(),
                },
            })
            .collect()
    }

    /// One test: every item perturbed at every level and seed, scored
    /// lexically, then its changed texts by the model scorer.
    async fn test(
        &self,
        scoring: &mut Scoring<'r>,
        planned: &Planned,
        base: &[Vec<f64>],
        breathe: &impl AsyncFn(),
    ) -> Result<TestPart, SuiteError> {
        let injection = planned.injection;
        if planned.skipped.is_some() {
            return Ok(TestPart {
                injection: injection.info().id.to_owned(),
                skipped: planned.skipped.clone(),
                items: vec![],
            });
        }
        let (mut cells_of, texts) = self.perturb(scoring, injection, base, breathe).await?;
        let metric_count = self.plan.specs.len();
        let columns = &self.plan.model_columns;
        for Round {
            texts,
            cell_of,
            set,
        } in &self.rounds(&texts, self.plan.cells(injection))
        {
            self.model_pass(scoring, texts, set.as_deref(), breathe, |k, j, values| {
                let cell = cell_of[k][j];
                for (&m, &v) in columns.iter().zip(values) {
                    cells_of[k].scores[cell * metric_count + m] = v;
                }
            })
            .await?;
        }
        Ok(TestPart {
            injection: injection.info().id.to_owned(),
            skipped: None,
            items: cells_of,
        })
    }

    /// Every item perturbed at every level and seed and scored lexically,
    /// a chunk of items at a time (in parallel natively), with a turn for
    /// the caller between chunks: per item its cells and, per cell, the
    /// changed text (`None` where the injection changed nothing).
    async fn perturb(
        &self,
        scoring: &Scoring<'r>,
        injection: &dyn Injection,
        base: &[Vec<f64>],
        breathe: &impl AsyncFn(),
    ) -> Result<(Vec<ItemCells>, Vec<Vec<Option<String>>>), SuiteError> {
        let mut perturbed = Vec::with_capacity(self.indices.len());
        // A masked LM's passes are long: its progress shows per chunk natively too.
        let chunk = if injection.info().needs_masked_lm {
            MASKED_CHUNK
        } else {
            ITEM_CHUNK
        };
        for range in item_chunks(self.indices.len(), chunk) {
            let asked = match scoring
                .masked_lm
                .filter(|_| injection.info().needs_masked_lm)
            {
                Some(lm) => Some(
                    self.ask_masked_lm(lm, injection, range.clone(), breathe)
                        .await?,
                ),
                None => None,
            };
            let start = range.start;
            perturbed.extend(map_items(range, &|k| {
                self.steps.check()?;
                let asked = asked.as_ref().map(|out| (out.as_slice(), k - start));
                let cells = self.perturb_item(injection, k, asked, &base[k])?;
                self.steps.step();
                Ok(cells)
            }));
            breathe().await;
            self.steps.poll();
        }
        let perturbed = perturbed
            .into_iter()
            .collect::<Result<Vec<(ItemCells, Vec<Option<String>>)>, SuiteError>>()?;
        Ok(perturbed.into_iter().unzip())
    }

    /// Other items' golds, for sentence replacement: the next ones in the
    /// file, cyclically.
    fn samples_of(&self, index: usize) -> Vec<&'r str> {
        (1..=SAMPLE_POOL.min(self.items.len() - 1))
            .map(|j| self.golds[(index + j) % self.items.len()])
            .collect()
    }

    /// An injection driven by a masked LM asks it about the chunk's items,
    /// levels and seeds together, in batches.
    async fn ask_masked_lm(
        &self,
        lm: &dyn MaskedLm,
        injection: &dyn Injection,
        range: std::ops::Range<usize>,
        breathe: &impl AsyncFn(),
    ) -> Result<Vec<Injected>, SuiteError> {
        self.steps.check()?;
        let samples: Vec<Vec<&str>> = range
            .clone()
            .map(|k| self.samples_of(self.indices[k]))
            .collect();
        let mut jobs = Vec::with_capacity(range.len() * self.plan.cells(injection));
        for (k, samples) in range.zip(&samples) {
            let index = self.indices[k];
            let item = &self.items[index];
            for &level in injection.info().default_levels {
                for seed in 0..self.plan.seeds {
                    jobs.push(inject::Job {
                        text: &item.gold,
                        level,
                        seed: cell_seed(seed, index),
                        ctx: Context {
                            source: item.src.as_deref(),
                            samples,
                            masked_lm: Some(lm),
                            lm_tokenizer: self.lm_tokenizer,
                            open_ended: self.plan.open_ended,
                            ngram_corpus: self.corpus.as_ref(),
                        },
                    });
                }
            }
        }
        let between = async || {
            breathe().await;
            self.steps.poll();
            self.steps.check().is_ok()
        };
        let out = inject::apply_many(injection, &jobs, between).await;
        self.steps.check()?;
        Ok(out?)
    }

    /// Item `k` of the part at every level and seed: `asked` holds the
    /// masked LM's rewrites of its chunk (and the item's place in it).
    fn perturb_item(
        &self,
        injection: &dyn Injection,
        k: usize,
        asked: Option<(&[Injected], usize)>,
        base: &[f64],
    ) -> Result<(ItemCells, Vec<Option<String>>), SuiteError> {
        let index = self.indices[k];
        let item = &self.items[index];
        let samples = self.samples_of(index);
        let ctx = Context {
            source: item.src.as_deref(),
            samples: &samples,
            masked_lm: None,
            lm_tokenizer: self.lm_tokenizer,
            open_ended: self.plan.open_ended,
            ngram_corpus: self.corpus.as_ref(),
        };
        let cells = self.plan.cells(injection);
        let mut out = ItemCells {
            noise: Vec::with_capacity(cells),
            applied: Vec::with_capacity(cells),
            scores: Vec::with_capacity(cells * self.plan.specs.len()),
        };
        let mut texts: Vec<Option<String>> = Vec::with_capacity(cells);
        for &level in injection.info().default_levels {
            for seed in 0..self.plan.seeds {
                let result = match asked {
                    Some((out, at)) => out[at * cells + texts.len()].clone(),
                    None => {
                        inject::apply(injection, &item.gold, level, cell_seed(seed, index), &ctx)?
                    }
                };
                let scores = if result.applied {
                    self.lexical_scores(item, &result.text)?
                } else {
                    base.to_vec()
                };
                out.noise.push(result.noise_ratio);
                out.applied.push(result.applied);
                out.scores.extend(scores);
                texts.push(result.applied.then_some(result.text));
            }
        }
        Ok((out, texts))
    }

    /// The model passes of a test. One round of the texts the injection
    /// changed (the others copied the base, model scores included), within
    /// the gold set where metrics read its references; or, where they read
    /// its hypotheses, one round per level and seed, each a set of its own
    /// as [BS] scores each perturbed system output, every item scored in
    /// it, changed or not. A cell that changed no item is the gold set
    /// again: its copies of the base are its scores (its steps are counted
    /// done here, before any pass).
    fn rounds<'t>(&'t self, texts: &'t [Vec<Option<String>>], cells: usize) -> Vec<Round<'t>> {
        if self.plan.set == SetMode::PerCell {
            return (0..cells)
                .filter_map(|cell| {
                    if texts.iter().all(|t| t[cell].is_none()) {
                        self.steps.skip(self.indices.len());
                        return None;
                    }
                    let set: Vec<&str> = texts
                        .iter()
                        .zip(&self.indices)
                        .map(|(t, &i)| t[cell].as_deref().unwrap_or(self.golds[i]))
                        .collect();
                    Some(Round {
                        texts: set.iter().map(|t| vec![*t]).collect(),
                        cell_of: vec![vec![cell]; self.indices.len()],
                        set: Some(set),
                    })
                })
                .collect();
        }
        let changed: Vec<Vec<usize>> = texts
            .iter()
            .map(|t| (0..t.len()).filter(|&c| t[c].is_some()).collect())
            .collect();
        let model_texts = texts
            .iter()
            .zip(&changed)
            .map(|(t, cs)| cs.iter().filter_map(|&c| t[c].as_deref()).collect())
            .collect();
        vec![Round {
            texts: model_texts,
            cell_of: changed,
            set: self.gold_set().map(<[&str]>::to_vec),
        }]
    }

    /// Scores texts of the part's items with the model scorer, `MODEL_CHUNK`
    /// items at a time: `texts[k]` are item `indices[k]`'s texts (each
    /// distinct text once); `write(k, t, values)` receives each text's model
    /// values. Where the plan's metrics read the whole set, `set` holds
    /// every item's text in it (all items, not only the part's).
    async fn model_pass(
        &self,
        scoring: &mut Scoring<'r>,
        texts: &[Vec<&str>],
        set: Option<&[&str]>,
        breathe: &impl AsyncFn(),
        mut write: impl FnMut(usize, usize, &[f64]),
    ) -> Result<(), SuiteError> {
        if self.plan.model_columns.is_empty() {
            return Ok(());
        }
        let specs = self.plan.model_specs();
        let Some(scorer) = scoring.scorer.as_deref_mut() else {
            return Ok(());
        };
        let set = set.map(|texts| {
            debug_assert_eq!(texts.len(), self.items.len(), "a set holds every item");
            let mut set = ModelRows::default();
            for (item, text) in self.items.iter().zip(texts) {
                set.push(item, text);
            }
            std::rc::Rc::new(set)
        });
        for (c, chunk) in texts.chunks(MODEL_CHUNK).enumerate() {
            self.steps.check()?;
            let first = c * MODEL_CHUNK;
            let mut rows = ModelRows {
                set: set.clone(),
                ..ModelRows::default()
            };
            let mut row_of: Vec<Vec<usize>> = Vec::with_capacity(chunk.len());
            for (k, item_texts) in chunk.iter().enumerate() {
                let item = &self.items[self.indices[first + k]];
                let mut seen = FxHashMap::default();
                row_of.push(
                    item_texts
                        .iter()
                        .map(|t| rows.add(&mut seen, item, t))
                        .collect(),
                );
            }
            if rows.hyps.is_empty() {
                // No text of these items changed: nothing to score.
                self.steps.skip(chunk.len());
                continue;
            }
            let scored = scorer.score(&specs, &rows).await?;
            check_scored(
                &specs,
                &rows,
                &scored.values,
                &mut scoring.signatures,
                scored.signatures,
            )?;
            for (k, rows) in row_of.iter().enumerate() {
                for (t, &row) in rows.iter().enumerate() {
                    let values: Vec<f64> = scored.values.iter().map(|v| v[row]).collect();
                    write(first + k, t, &values);
                }
                self.steps.step();
            }
            // A turn for the caller (the page's stop request) after each
            // batch, heard before the next batch starts.
            breathe().await;
            self.steps.poll();
        }
        Ok(())
    }
}

/// Refuses a batch the scorer scored wrongly: a score missing, or other
/// models than the earlier batches' (a model reloaded or unloaded mid-run,
/// on the page, would mix two models in one column). Keeps the signatures.
fn check_scored(
    specs: &[MetricSpec],
    rows: &ModelRows<'_>,
    values: &[Vec<f64>],
    signatures: &mut Vec<String>,
    now: Vec<String>,
) -> Result<(), SuiteError> {
    if values.len() != specs.len() || values.iter().any(|v| v.len() != rows.hyps.len()) {
        return Err(SuiteError::Metric(
            "the model scorer returned the wrong number of scores".into(),
        ));
    }
    if let Some((was, now)) = signatures.iter().zip(&now).find(|(was, now)| was != now) {
        return Err(SuiteError::Metric(format!(
            "a model changed during the run: scored with {was}, then with {now}"
        )));
    }
    *signatures = now;
    Ok(())
}

/// Hands each finished test on: a whole run streams its report, test by
/// test, to `on_test`; a shard its tests to `on_part`.
struct Emitter<'e> {
    on_test: Option<&'e dyn Fn(&SuiteReport)>,
    on_part: Option<&'e dyn Fn(&SuitePart)>,
    /// The part's header and base, for `on_part`.
    header: SuitePart,
    /// The report so far, for `on_test`.
    streamed: SuiteReport,
    seeds: usize,
}

impl<'e> Emitter<'e> {
    fn new(
        run: &SuiteRun<'e>,
        ctx: &Ctx<'_>,
        metrics: Vec<MetricEntry>,
        base: &[Vec<f64>],
    ) -> Self {
        let whole = run.shard.is_none();
        let on_test = run.models.on_test.filter(|_| whole);
        let base_mean = base_means(base, ctx.plan.specs.len());
        Emitter {
            on_test,
            on_part: run.models.on_part.filter(|_| !whole),
            streamed: SuiteReport {
                tool: tool(),
                dataset: run.dataset.to_owned(),
                items: run.items.len(),
                config: run.config.clone(),
                metrics: if on_test.is_some() {
                    metrics.clone()
                } else {
                    Vec::new()
                },
                base: base_mean,
                tests: Vec::new(),
                attacks: Vec::new(),
            },
            header: SuitePart {
                tool: tool(),
                dataset: run.dataset.to_owned(),
                items: run.items.len(),
                shard: run.shard,
                config: run.config.clone(),
                metrics,
                indices: ctx.indices.clone(),
                base: base.to_vec(),
                tests: Vec::new(),
            },
            seeds: ctx.plan.seeds,
        }
    }

    fn emit(&mut self, test: &TestPart) -> Result<(), SuiteError> {
        if let Some(f) = self.on_part {
            f(&SuitePart {
                tests: vec![test.clone()],
                ..self.header.clone()
            });
        }
        if let Some(f) = self.on_test {
            let result =
                aggregate_test(test, &self.header.metrics, &self.streamed.base, self.seeds)?;
            self.streamed.tests.push(result);
            f(&self.streamed);
        }
        Ok(())
    }
}

/// Counts finished steps and asks the caller whether to go on.
struct Steps<'a> {
    done: std::sync::atomic::AtomicUsize,
    total: usize,
    cancelled: std::sync::atomic::AtomicBool,
    progress: Progress<'a>,
}

impl Steps<'_> {
    fn step(&self) {
        self.skip(1);
    }

    /// Counts `n` steps done (without work where a pass need not run).
    fn skip(&self, n: usize) {
        let done = self.done.fetch_add(n, std::sync::atomic::Ordering::Relaxed) + n;
        self.tell(done);
    }

    /// Asks the caller again (after a turn of its event loop, where a stop
    /// request may have arrived) without finishing a step.
    fn poll(&self) {
        self.tell(self.done.load(std::sync::atomic::Ordering::Relaxed));
    }

    /// Reports `done` steps; a `false` from the caller cancels.
    fn tell(&self, done: usize) {
        if !(self.progress)(done, self.total) {
            self.cancelled
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }

    fn check(&self) -> Result<(), SuiteError> {
        if self.cancelled.load(std::sync::atomic::Ordering::Relaxed) {
            Err(SuiteError::Cancelled)
        } else {
            Ok(())
        }
    }
}

/// Items perturbed and scored between two turns for the caller: in the
/// browser a stop request is heard there; natively nothing waits for one,
/// and every item goes to the thread pool at once.
const ITEM_CHUNK: usize = if cfg!(target_arch = "wasm32") {
    64
} else {
    usize::MAX
};

/// Items perturbed between two steps of progress where a masked LM rewrites
/// them (its passes, batched across the chunk's items, levels and seeds, take
/// long): at 4 levels and 5 seeds, 320 rewrites asked in batches of 32.
const MASKED_CHUNK: usize = 16;

/// `0..n` in ranges of `size`.
fn item_chunks(n: usize, size: usize) -> impl Iterator<Item = std::ops::Range<usize>> {
    (0..n)
        .step_by(size)
        .map(move |start| start..start.saturating_add(size).min(n))
}

/// The seed of an item's cell: each item draws its own stream for each seed.
fn cell_seed(seed: usize, index: usize) -> u64 {
    seed as u64 * 1_000_003 + index as u64
}

/// Runs `f` on every index of `range`: in parallel natively, in order in the browser.
#[cfg(not(target_arch = "wasm32"))]
fn map_items<T: Send>(range: std::ops::Range<usize>, f: &(dyn Fn(usize) -> T + Sync)) -> Vec<T> {
    use rayon::prelude::*;
    range.into_par_iter().map(f).collect()
}

/// Runs `f` on every index of `range`: in parallel natively, in order in the browser.
#[cfg(target_arch = "wasm32")]
fn map_items<T>(range: std::ops::Range<usize>, f: &dyn Fn(usize) -> T) -> Vec<T> {
    range.map(f).collect()
}
