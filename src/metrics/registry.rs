//! What a metric module declares, and the macro that lists the modules once.
//!
//! A metric *kind* is one spec tag (`bleu`, `bertscore`, `moverscore-v1`):
//! a module that owns its options (a serde struct whose doc comments are its
//! option schema), its description and its scoring. A kind fills one or more
//! *columns*, the metric ids results are reported under (`bertscore` fills
//! `bertscore-p`, `bertscore-r` and `bertscore-f`).
//!
//! [`metric_registry!`], invoked once in `metrics/mod.rs`, turns the list of
//! kinds into [`super::MetricId`], [`super::MetricSpec`] (the tagged union of
//! every kind's options), [`super::ModelSlot`], the info table and the
//! exported schema ([`kinds`]). Everything else (the CLI's `--opt`, the page's
//! cards, `blindspot metrics`) is built from what this module exports.

use std::borrow::Cow;
use std::sync::LazyLock;

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::engine::{Column, Engine, EngineError};
use super::spec::SpecError;
use super::{CorpusAggregation, Metric, MetricId, MetricInfo, ModelKind, Scale, Segment};

/// One column a kind fills: what its number means.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct About {
    /// Display name (`BERTScore F1`).
    pub name: &'static str,
    /// One line: what the number means.
    pub description: &'static str,
    /// True when larger values mean better text.
    pub higher_is_better: bool,
    /// True when the column cannot be computed without a reference.
    pub needs_reference: bool,
    /// True when it cannot be computed without a source.
    pub needs_source: bool,
    /// What it reads, for people (`hypothesis + reference + source`).
    pub reads: &'static str,
    /// The range its values live in.
    pub scale: Scale,
}

impl About {
    /// A reference-based column that reads the hypothesis and its references
    /// and whose larger values are better.
    pub const fn reference_based(
        name: &'static str,
        description: &'static str,
        scale: Scale,
    ) -> Self {
        Self {
            name,
            description,
            higher_is_better: true,
            needs_reference: true,
            needs_source: false,
            reads: "hypothesis + references",
            scale,
        }
    }
}

/// How the page shows a kind: on a card of its own or as a version on
/// another kind's card.
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Card {
    /// The kind whose card this one is a version of (MoverScore v1 on
    /// MoverScore's): the card offers a version choice.
    pub version_of: Option<&'static str>,
    /// The card shows every column of one pass (BERTScore's P, R and F), and
    /// the runs that take the card's metrics take all of them; otherwise the
    /// column option is one of the card's controls.
    pub every_column: bool,
}

impl Card {
    /// A card of its own, its column chosen on it.
    pub const OWN: Card = Card {
        version_of: None,
        every_column: false,
    };
}

/// What a kind is, beyond its columns.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct KindAbout {
    /// Display name of the kind (`BERTScore`, `BARTScore`).
    pub name: &'static str,
    /// A paragraph on what it computes and how to read it (the page's card).
    pub about: &'static str,
    /// The reference implementation reproduced, with its version.
    pub reference: &'static str,
    /// What to say when a text was cut to the model's limit (empty for a
    /// model-free metric).
    pub truncated: &'static str,
    /// How corpus scores are formed.
    pub corpus: CorpusAggregation,
    /// The kind of model it runs on; `None` for a model-free metric.
    pub model: Option<ModelKind>,
    /// How the page shows it.
    pub card: Card,
}

/// A metric module: its options, its description and the rules that depend
/// on the options. Implemented by a unit type per kind (`bleu::BleuMetric`).
pub trait MetricModule {
    /// The options (every field a spec has besides its `metric` tag), with
    /// serde defaults; their doc comments are the option schema: a `# Title`
    /// line (the control's label) and a description (meaning, default, the
    /// reference implementation's name for it).
    type Options: Serialize
        + DeserializeOwned
        + schemars::JsonSchema
        + Default
        + Clone
        + PartialEq
        + std::fmt::Debug;
    /// The kind as a whole.
    const KIND: KindAbout;
    /// Each column, in the order the registry lists the kind's ids.
    const COLUMNS: &'static [About];
    /// The option that picks the column (`part`), for kinds with several.
    const COLUMN_OPTION: Option<&'static str> = None;

    /// The column a spec fills (an index into [`Self::COLUMNS`]).
    fn column(_: &Self::Options) -> usize {
        0
    }

    /// `options` set to fill `column`.
    fn with_column(options: Self::Options, _column: usize) -> Self::Options {
        options
    }

    /// Checks what can be checked before any model is loaded.
    fn validate(_: &Self::Options) -> Result<(), SpecError> {
        Ok(())
    }

    /// Why a segment's value depends on the other segments scored with it
    /// (idf, a min-max combination), or `None`.
    fn whole_set(_: &Self::Options) -> Option<&'static str> {
        None
    }

    /// True when the set's hypotheses count, not only its references.
    fn reads_set_hypotheses(_: &Self::Options) -> bool {
        false
    }

    /// True when the set's scores count (a batch cannot be scored alone).
    fn reads_set_scores(_: &Self::Options) -> bool {
        false
    }
}

/// A model-free metric: scored through the [`Metric`] trait.
pub trait LexicalModule: MetricModule {
    /// The metric with these options.
    fn metric(options: &Self::Options) -> Box<dyn Metric>;
}

/// A metric that runs on a language model: the engine calls it with the
/// specs that share a pass, the segments and, when a batch is scored within a
/// larger set, the set.
// The futures hold `Rc` models and WebGPU reads: they are not `Send`, by design.
#[allow(async_fn_in_trait)]
pub trait ModelModule: MetricModule {
    /// The model a spec names (`None`: the slot's default).
    fn model_name(options: &Self::Options) -> Option<&str>;

    /// What must agree for specs to share one model pass (BERTScore's P, R
    /// and F on one model and layer); `None`: each spec is scored alone.
    fn pass_key(_: &Self::Options) -> Option<Self::Options> {
        None
    }

    /// One column per spec of `group` (specs with equal [`Self::pass_key`]),
    /// in order, over `segments`; `set` is the whole set a batch belongs to.
    async fn score(
        engine: &Engine,
        group: &[&Self::Options],
        segments: &[Segment<'_>],
        set: Option<&[Segment<'_>]>,
    ) -> Result<Vec<Column>, EngineError>;
}

/// [`ModelModule::score`] for a kind without a [`ModelModule::pass_key`],
/// whose specs are each scored alone: `column` per spec, in order.
pub(crate) async fn each_alone<O>(
    group: &[&O],
    mut column: impl AsyncFnMut(&O) -> Result<Column, EngineError>,
) -> Result<Vec<Column>, EngineError> {
    let mut out = Vec::with_capacity(group.len());
    for o in group {
        out.push(column(o).await?);
    }
    Ok(out)
}

/// A registered kind as the schema exports it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KindInfo {
    /// The spec tag (`bertscore`).
    pub kind: &'static str,
    /// What the kind is.
    #[serde(flatten)]
    pub about: KindAbout,
    /// The metric ids it fills, in order.
    pub columns: Vec<MetricId>,
    /// The option that picks the column, if several.
    pub column_option: Option<&'static str>,
    /// The model slot its model comes from (`models.toml`), if any.
    pub slot: Option<super::ModelSlot>,
    /// The default spec (the default column).
    pub defaults: super::MetricSpec,
    /// The options' JSON Schema (draft 2020-12, subschemas inlined):
    /// `properties` with `title`, `description`, `type`, `default`,
    /// `enum` (with `x-labels`), `minimum`, and Blindspot's extensions
    /// (`x-choices`: suggested values with labels; `x-null-label`: what an
    /// unset optional value means; `x-metric`: the value is a metric id;
    /// `x-page: false`: not offered on the page's card).
    pub options: serde_json::Value,
}

/// Every registered kind, in registry order.
pub fn kinds() -> &'static [KindInfo] {
    static KINDS: LazyLock<Vec<KindInfo>> = LazyLock::new(super::kind_infos);
    &KINDS
}

/// The kind registered under `tag`.
pub fn kind(tag: &str) -> Option<&'static KindInfo> {
    kinds().iter().find(|k| k.kind == tag)
}

/// A metric id as `blindspot metrics` lists it: its info, the reference
/// implementation, and the options it takes (its kind's, without the one its
/// id fixes).
#[derive(Debug, Clone, Serialize)]
pub struct Listing {
    /// The registry's information.
    #[serde(flatten)]
    pub info: &'static MetricInfo,
    /// The reference implementation reproduced.
    pub reference: &'static str,
    /// The options' JSON Schema (see [`KindInfo::options`]).
    pub options: serde_json::Value,
}

/// Every metric id with its options, in registry order.
pub fn listing() -> Vec<Listing> {
    MetricId::ALL
        .iter()
        .filter_map(|&id| {
            let info = id.info();
            let kind = kind(info.kind)?;
            let mut options = kind.options.clone();
            if let (Some(fixed), Some(props)) = (
                kind.column_option,
                options
                    .get_mut("properties")
                    .and_then(|p| p.as_object_mut()),
            ) {
                props.remove(fixed);
            }
            Some(Listing {
                info,
                reference: kind.about.reference,
                options,
            })
        })
        .collect()
}

/// The metrics a run scores when it names none: every model-free metric,
/// in registry order. The CLI's `--metrics` default and the page's lexical
/// cards are this one list.
pub fn default_metrics() -> Vec<MetricId> {
    MetricId::ALL
        .iter()
        .copied()
        .filter(|id| !id.is_model_based())
        .collect()
}

/// [`default_metrics`] as comma-separated ids, the CLI's `--metrics` default.
pub static DEFAULT_METRIC_IDS: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    default_metrics()
        .into_iter()
        .map(|id| id.info().id)
        .collect::<Vec<_>>()
        .join(",")
});

/// The metrics table of the README (`blindspot metrics --format
/// markdown`): one row per metric id, from the registry.
pub fn markdown_table() -> String {
    let mut out =
        String::from("| id | metric | reads | scale | reproduces |\n|---|---|---|---|---|\n");
    for l in listing() {
        let i = l.info;
        out.push_str(&format!(
            "| `{}` | {} | {} | {} | {} |\n",
            i.id, i.name, i.reads, i.scale_label, l.reference
        ));
    }
    out
}

/// The JSON Schema of `M`'s options.
pub(crate) fn options_schema<M: MetricModule>() -> serde_json::Value {
    let generator = schemars::generate::SchemaSettings::draft2020_12()
        .with(|s| s.inline_subschemas = true)
        .into_generator();
    let mut schema = serde_json::Value::from(generator.into_root_schema_for::<M::Options>());
    if let Some(map) = schema.as_object_mut() {
        // The struct's own name and the draft say nothing to a reader.
        for key in ["$schema", "title", "description"] {
            map.remove(key);
        }
        // A kind without options has an empty object of them.
        let properties = map
            .entry("properties")
            .or_insert_with(|| serde_json::Value::Object(Default::default()));
        // Doc comments wrap lines; help text reads as paragraphs.
        for p in properties
            .as_object_mut()
            .into_iter()
            .flat_map(|p| p.values_mut())
        {
            if let Some(serde_json::Value::String(text)) = p.get_mut("description") {
                *text = text
                    .split("\n\n")
                    .map(|para| para.split_whitespace().collect::<Vec<_>>().join(" "))
                    .collect::<Vec<_>>()
                    .join("\n\n");
            }
        }
    }
    schema
}

/// The info table: one entry per column, in registry order.
pub(crate) fn info_of<M: MetricModule>(
    id: &'static str,
    kind: &'static str,
    column: usize,
    slot: Option<super::ModelSlot>,
) -> MetricInfo {
    let about = &M::COLUMNS[column];
    MetricInfo {
        id,
        kind,
        name: about.name,
        description: about.description,
        higher_is_better: about.higher_is_better,
        needs_reference: about.needs_reference,
        needs_source: about.needs_source,
        reads: about.reads,
        scale: about.scale,
        scale_label: about.scale.label,
        digits: about.scale.digits,
        corpus: M::KIND.corpus,
        model: M::KIND.model,
        slot,
    }
}

/// A labelled value of a `named_enum!` type, for its schema.
pub(crate) fn enum_schema(
    names: &[&'static str],
    labels: &[Option<&'static str>],
) -> schemars::Schema {
    let mut schema = schemars::json_schema!({
        "type": "string",
        "enum": names,
    });
    if labels.iter().any(Option::is_some) {
        let labels: Vec<Cow<'static, str>> = names
            .iter()
            .zip(labels)
            .map(|(n, l)| Cow::Borrowed(l.unwrap_or(n)))
            .collect();
        schema.insert("x-labels".into(), serde_json::json!(labels));
    }
    schema
}

/// Lists every metric kind once and generates, from that list:
/// [`super::MetricId`] (one variant per column, with its name),
/// [`super::MetricSpec`] (a variant per kind, holding its options, tagged
/// `metric` in JSON), [`super::ModelSlot`] (the model kinds and the
/// set-level metrics' slots), the info table and the dispatch to each
/// module.
///
/// ```text
/// lexical { Kind("tag") = module::Marker [ColumnVariant "id", ...], ... }
/// model   { Kind("tag") = module::Marker [ColumnVariant "id", ...], ... }
/// sets    { Slot("tag"), ... }
/// ```
macro_rules! metric_registry {
    (
        lexical { $($lkind:ident($ltag:literal) = $lmod:ident::$lmark:ident [$($lcol:ident $lid:literal),+ $(,)?]),+ $(,)? }
        model { $($mkind:ident($mtag:literal) = $mmod:ident::$mmark:ident [$($mcol:ident $mid:literal),+ $(,)?]),+ $(,)? }
        sets { $($skind:ident($stag:literal)),* $(,)? }
    ) => {
        /// A registered metric column (the id results are reported under).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum MetricId {
            $($(
                #[doc = concat!("`", $lid, "` (", stringify!($lmod), ")")]
                $lcol,
            )+)+
            $($(
                #[doc = concat!("`", $mid, "` (", stringify!($mmod), ")")]
                $mcol,
            )+)+
        }

        $crate::metrics::spec::named_enum!(
            MetricId,
            "metric",
            [$($(($lcol, $lid),)+)+ $($(($mcol, $mid),)+)+]
        );

        /// The model a model-based metric (or a set-level one) runs on comes
        /// from its slot: `--model SLOT=DIR`, `models.toml`'s defaults.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum ModelSlot {
            $(
                #[doc = concat!("`", $mtag, "`")]
                $mkind,
            )+
            $(
                #[doc = concat!("`", $stag, "`")]
                $skind,
            )*
        }

        $crate::metrics::spec::named_enum!(
            ModelSlot,
            "model-based metric",
            [$(($mkind, $mtag),)+ $(($skind, $stag),)*]
        );

        /// One metric with every option that changes its value: a kind and
        /// its options. Round-trips through JSON as
        /// `{"metric": "bertscore", "part": "f", "idf": true, ...}`.
        #[derive(Debug, Clone, PartialEq, ::serde::Serialize, ::serde::Deserialize)]
        #[serde(tag = "metric", deny_unknown_fields)]
        pub enum MetricSpec {
            $(
                #[doc = concat!("`", $ltag, "`")]
                #[serde(rename = $ltag)]
                $lkind(<$lmod::$lmark as $crate::metrics::registry::MetricModule>::Options),
            )+
            $(
                #[doc = concat!("`", $mtag, "`")]
                #[serde(rename = $mtag)]
                $mkind(<$mmod::$mmark as $crate::metrics::registry::MetricModule>::Options),
            )+
        }

        // A module describes as many columns as the registry lists ids for it.
        $(const _: () = assert!(
            <$lmod::$lmark as $crate::metrics::registry::MetricModule>::COLUMNS.len()
                == [$($lid),+].len()
        );)+
        $(const _: () = assert!(
            <$mmod::$mmark as $crate::metrics::registry::MetricModule>::COLUMNS.len()
                == [$($mid),+].len()
        );)+

        impl MetricId {
            /// What the registry knows about the metric.
            pub fn info(self) -> &'static MetricInfo {
                static INFOS: ::std::sync::LazyLock<Vec<MetricInfo>> =
                    ::std::sync::LazyLock::new(|| {
                        let mut infos = Vec::new();
                        $({
                            let ids = [$($lid),+];
                            for (k, id) in ids.into_iter().enumerate() {
                                infos.push($crate::metrics::registry::info_of::<$lmod::$lmark>(
                                    id, $ltag, k, None,
                                ));
                            }
                        })+
                        $({
                            let ids = [$($mid),+];
                            for (k, id) in ids.into_iter().enumerate() {
                                infos.push($crate::metrics::registry::info_of::<$mmod::$mmark>(
                                    id, $mtag, k, Some(ModelSlot::$mkind),
                                ));
                            }
                        })+
                        infos
                    });
                &INFOS[self as usize]
            }

            /// True when the metric runs on a language model.
            pub fn is_model_based(self) -> bool {
                self.info().model.is_some()
            }
        }

        impl MetricSpec {
            /// The metric's defaults.
            pub fn default_for(id: MetricId) -> Self {
                use $crate::metrics::registry::MetricModule;
                $({
                    let ids = [$(MetricId::$lcol),+];
                    if let Some(k) = ids.iter().position(|&c| c == id) {
                        return MetricSpec::$lkind(<$lmod::$lmark>::with_column(Default::default(), k));
                    }
                })+
                $({
                    let ids = [$(MetricId::$mcol),+];
                    if let Some(k) = ids.iter().position(|&c| c == id) {
                        return MetricSpec::$mkind(<$mmod::$mmark>::with_column(Default::default(), k));
                    }
                })+
                unreachable!("every id belongs to a kind")
            }

            /// The spec's kind (its JSON tag).
            pub fn kind(&self) -> &'static str {
                match self {
                    $(MetricSpec::$lkind(_) => $ltag,)+
                    $(MetricSpec::$mkind(_) => $mtag,)+
                }
            }

            /// The id of the column this spec fills.
            pub fn id(&self) -> MetricId {
                use $crate::metrics::registry::MetricModule;
                match self {
                    $(MetricSpec::$lkind(o) => [$(MetricId::$lcol),+][<$lmod::$lmark>::column(o)],)+
                    $(MetricSpec::$mkind(o) => [$(MetricId::$mcol),+][<$mmod::$mmark>::column(o)],)+
                }
            }

            /// The model-free metric, or `None` for one that runs on a model.
            pub fn lexical(&self) -> Option<Box<dyn Metric>> {
                use $crate::metrics::registry::LexicalModule;
                match self {
                    $(MetricSpec::$lkind(o) => Some(<$lmod::$lmark>::metric(o)),)+
                    _ => None,
                }
            }

            /// The model slot and the model named (None: the slot's
            /// default), for a model-based metric.
            pub fn model(&self) -> Option<(ModelSlot, Option<&str>)> {
                use $crate::metrics::registry::ModelModule;
                match self {
                    $(MetricSpec::$mkind(o) => Some((ModelSlot::$mkind, <$mmod::$mmark>::model_name(o))),)+
                    _ => None,
                }
            }

            /// Checks what can be checked before any model is loaded.
            pub fn validate(&self) -> Result<(), $crate::metrics::spec::SpecError> {
                use $crate::metrics::registry::MetricModule;
                match self {
                    $(MetricSpec::$lkind(o) => <$lmod::$lmark>::validate(o),)+
                    $(MetricSpec::$mkind(o) => <$mmod::$mmark>::validate(o),)+
                }
            }

            /// Why a segment's value depends on the other segments scored
            /// with it (idf, MENLI's min-max combination), or `None` when it
            /// does not. Batches of such specs are scored within their whole
            /// set ([`crate::metrics::Engine::score_within`]), except those
            /// that read the set's scores ([`MetricSpec::reads_set_scores`]).
            pub fn whole_set(&self) -> Option<&'static str> {
                use $crate::metrics::registry::MetricModule;
                match self {
                    $(MetricSpec::$lkind(o) => <$lmod::$lmark>::whole_set(o),)+
                    $(MetricSpec::$mkind(o) => <$mmod::$mmark>::whole_set(o),)+
                }
            }

            /// True when the spec reads the hypotheses of the whole set, not
            /// only its references (MoverScore's idf weighs each side by its
            /// own texts; BERTScore's idf reads references only).
            pub fn reads_set_hypotheses(&self) -> bool {
                use $crate::metrics::registry::MetricModule;
                match self {
                    $(MetricSpec::$lkind(o) => <$lmod::$lmark>::reads_set_hypotheses(o),)+
                    $(MetricSpec::$mkind(o) => <$mmod::$mmark>::reads_set_hypotheses(o),)+
                }
            }

            /// True when the spec reads the scores of the whole set (MENLI's
            /// min-max combination), not only its texts: such a spec cannot
            /// be scored a batch at a time even with the set's texts at hand
            /// ([`crate::metrics::Engine::score_within`]).
            pub fn reads_set_scores(&self) -> bool {
                use $crate::metrics::registry::MetricModule;
                match self {
                    $(MetricSpec::$lkind(o) => <$lmod::$lmark>::reads_set_scores(o),)+
                    $(MetricSpec::$mkind(o) => <$mmod::$mmark>::reads_set_scores(o),)+
                }
            }

            /// True when `self` and `other` are scored in one model pass
            /// (same kind, equal pass keys).
            pub(crate) fn shares_pass(&self, other: &MetricSpec) -> bool {
                use $crate::metrics::registry::ModelModule;
                match (self, other) {
                    $((MetricSpec::$mkind(a), MetricSpec::$mkind(b)) => {
                        let key = <$mmod::$mmark>::pass_key(a);
                        key.is_some() && key == <$mmod::$mmark>::pass_key(b)
                    })+
                    _ => false,
                }
            }

            /// One column per spec of `group` (specs of this kind sharing a
            /// pass, this one first), in order.
            pub(crate) fn score_group<'a>(
                engine: &'a $crate::metrics::Engine,
                group: &'a [&'a MetricSpec],
                segments: &'a [Segment<'a>],
                set: Option<&'a [Segment<'a>]>,
            ) -> ::std::pin::Pin<Box<dyn ::std::future::Future<
                Output = Result<Vec<$crate::metrics::Column>, $crate::metrics::EngineError>,
            > + 'a>> {
                use $crate::metrics::registry::ModelModule;
                Box::pin(async move {
                    match group.first() {
                        $(Some(MetricSpec::$mkind(_)) => {
                            let options: Vec<_> = group
                                .iter()
                                .filter_map(|s| match s {
                                    MetricSpec::$mkind(o) => Some(o),
                                    _ => None,
                                })
                                .collect();
                            <$mmod::$mmark>::score(engine, &options, segments, set).await
                        })+
                        _ => group
                            .iter()
                            .map(|s| $crate::metrics::engine::lexical_column(s, segments))
                            .collect(),
                    }
                })
            }
        }

        /// The schema of every kind, in registry order.
        fn kind_infos() -> Vec<$crate::metrics::registry::KindInfo> {
            use $crate::metrics::registry::{KindInfo, MetricModule, options_schema};
            vec![
                $(KindInfo {
                    kind: $ltag,
                    about: <$lmod::$lmark>::KIND,
                    columns: vec![$(MetricId::$lcol),+],
                    column_option: <$lmod::$lmark>::COLUMN_OPTION,
                    slot: None,
                    defaults: MetricSpec::$lkind(Default::default()),
                    options: options_schema::<$lmod::$lmark>(),
                },)+
                $(KindInfo {
                    kind: $mtag,
                    about: <$mmod::$mmark>::KIND,
                    columns: vec![$(MetricId::$mcol),+],
                    column_option: <$mmod::$mmark>::COLUMN_OPTION,
                    slot: Some(ModelSlot::$mkind),
                    defaults: MetricSpec::$mkind(Default::default()),
                    options: options_schema::<$mmod::$mmark>(),
                },)+
            ]
        }
    };
}
pub(crate) use metric_registry;
