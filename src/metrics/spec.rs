//! Parsing what to score: named values ([`named_enum!`]), and [`Settings`],
//! option values for the metrics as the CLI's `--opt kind.name=value` (and
//! its older flags) and the page give them, resolved against each kind's
//! option schema into a [`MetricSpec`]. A spec round-trips through JSON
//! (`{"metric":"bertscore","part":"f","idf":true}`), so the CLI's flags and the
//! page's requests resolve to the same value, and every default is its
//! module's.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::registry::{self, KindInfo};
use super::{MetricId, MetricSpec, ModelSlot};

/// A value that does not parse: an unknown id, format or option.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} '{value}' (known: {known})")]
pub struct ParseError {
    /// What was parsed (`metric`, `MENLI formula`, `dataset format`...).
    pub what: &'static str,
    /// The text given.
    pub value: String,
    /// The accepted values, comma-separated.
    pub known: String,
}

impl ParseError {
    /// `value` is not one of `known`.
    pub fn new<'a>(
        what: &'static str,
        value: &str,
        known: impl IntoIterator<Item = &'a str>,
    ) -> Self {
        Self {
            what,
            value: value.to_owned(),
            known: known.into_iter().collect::<Vec<_>>().join(", "),
        }
    }
}

/// Implements `as_str`, `Display`, `FromStr`, string serde and a JSON
/// Schema (an `enum` of the names, with `x-labels` where labels are given)
/// for a C-like enum from its list of `(variant, name)` or
/// `(variant, name, label)` entries.
macro_rules! named_enum {
    ($ty:ident, $what:literal, [$(($variant:ident, $name:literal $(, $label:literal)?)),+ $(,)?]) => {
        impl $ty {
            /// Every value, in display order.
            pub const ALL: &'static [$ty] = &[$($ty::$variant),+];

            /// The stable name used by the CLI, the page and result files.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($ty::$variant => $name),+
                }
            }

            /// How people see the value: its label, or its name.
            #[allow(dead_code)]
            pub fn label(self) -> &'static str {
                match self {
                    $($ty::$variant => {
                        let label: Option<&'static str> = None $(.or(Some($label)))?;
                        label.unwrap_or($name)
                    }),+
                }
            }
        }

        impl ::std::fmt::Display for $ty {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl ::std::str::FromStr for $ty {
            type Err = $crate::metrics::spec::ParseError;
            fn from_str(s: &str) -> Result<Self, $crate::metrics::spec::ParseError> {
                let s = s.trim();
                $ty::ALL
                    .iter()
                    .copied()
                    .find(|v| v.as_str() == s)
                    .ok_or_else(|| $crate::metrics::spec::ParseError::new($what, s, $ty::ALL.iter().map(|v| v.as_str())))
            }
        }

        impl ::serde::Serialize for $ty {
            fn serialize<S: ::serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $ty {
            fn deserialize<D: ::serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = <String as ::serde::Deserialize>::deserialize(d)?;
                s.parse().map_err(::serde::de::Error::custom)
            }
        }

        impl ::schemars::JsonSchema for $ty {
            fn schema_name() -> ::std::borrow::Cow<'static, str> {
                stringify!($ty).into()
            }

            fn inline_schema() -> bool {
                true
            }

            fn json_schema(_: &mut ::schemars::SchemaGenerator) -> ::schemars::Schema {
                $crate::metrics::registry::enum_schema(
                    &[$($name),+],
                    &[$({
                        let label: Option<&'static str> = None $(.or(Some($label)))?;
                        label
                    }),+],
                )
            }
        }
    };
}
pub(crate) use named_enum;

/// A spec that cannot be scored as given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SpecError(pub String);

/// Why a list of metric ids does not resolve to specs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecsError {
    /// An unknown id.
    #[error(transparent)]
    Parse(#[from] ParseError),
    /// An invalid option.
    #[error(transparent)]
    Spec(#[from] SpecError),
}

/// One option value: `kind.name=value` for one kind, or `name=value` for
/// every kind asked for that has the option (`stemmer=true` for the three
/// ROUGEs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OptionValue {
    /// The kind it is for (`moverscore-v1`); `None`: every kind that has it.
    pub kind: Option<String>,
    /// The option's name (a field of the kind's options).
    pub name: String,
    /// The value: JSON, or text that the option's schema type reads
    /// (`2`, `true`, `e-c`).
    pub value: Value,
    /// Applied where a metric has the option, with no error where none has
    /// it (the CLI's older flags, such as `--idf`).
    #[serde(default)]
    pub lenient: bool,
}

impl OptionValue {
    /// `name=value` for `kind` (or every kind), strict.
    pub fn new(kind: Option<&str>, name: &str, value: impl Into<Value>) -> Self {
        Self {
            kind: kind.map(str::to_owned),
            name: name.to_owned(),
            value: value.into(),
            lenient: false,
        }
    }

    /// The same, applied only where it fits.
    pub fn lenient(mut self) -> Self {
        self.lenient = true;
        self
    }
}

impl std::str::FromStr for OptionValue {
    type Err = SpecError;

    /// `kind.name=value` or `name=value`; the value is read as JSON where it
    /// is JSON (`2`, `true`, `null`, `"x"`), else as text.
    fn from_str(s: &str) -> Result<Self, SpecError> {
        let (key, value) = s.split_once('=').ok_or_else(|| {
            SpecError(format!(
                "expected KIND.OPTION=VALUE or OPTION=VALUE (e.g. moverscore-v1.ngram=2), got '{s}'"
            ))
        })?;
        let (kind, name) = match key.trim().split_once('.') {
            Some((kind, name)) => (Some(kind.trim()), name.trim()),
            None => (None, key.trim()),
        };
        if name.is_empty() || kind.is_some_and(str::is_empty) {
            return Err(SpecError(format!("no option name in '{s}'")));
        }
        let value = value.trim();
        let value = serde_json::from_str(value).unwrap_or_else(|_| Value::from(value));
        Ok(Self::new(kind, name, value))
    }
}

/// Option values and models for the metrics asked for: the CLI's flags, the
/// page's suite requests. [`Settings::spec`] resolves an id into its spec.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Settings {
    /// Model per slot (a folder natively, a loaded model's name on the page).
    pub models: BTreeMap<ModelSlot, String>,
    /// Option values, applied in order (a later one wins).
    pub options: Vec<OptionValue>,
}

/// How deep a metric option may nest other metrics (MENLI's `combine`).
const MAX_NESTING: usize = 2;

impl Settings {
    /// These settings with one more option value.
    pub fn with(mut self, option: OptionValue) -> Self {
        self.options.push(option);
        self
    }

    /// The spec of `id` under these settings: its module's defaults, the
    /// slot's model, then each option value that applies, read as the
    /// option's schema types it; checked.
    pub fn spec(&self, id: MetricId) -> Result<MetricSpec, SpecError> {
        self.spec_within(id, 0)
    }

    fn spec_within(&self, id: MetricId, depth: usize) -> Result<MetricSpec, SpecError> {
        let defaults = MetricSpec::default_for(id);
        let kind = kind_of(defaults.kind())?;
        let mut fields = match serde_json::to_value(&defaults) {
            Ok(Value::Object(map)) => map,
            _ => return Err(SpecError(format!("{id}: its defaults are not an object"))),
        };
        if let Some(model) = defaults
            .model()
            .and_then(|(slot, _)| self.models.get(&slot))
        {
            fields.insert("model".into(), Value::from(model.as_str()));
        }
        for option in &self.options {
            let schema = match &option.kind {
                Some(k) if k != kind.kind => continue,
                Some(_) => Some(property(kind, &option.name)?),
                None => properties(kind).and_then(|p| p.get(&option.name)),
            };
            let Some(schema) = schema else { continue };
            if kind.column_option == Some(option.name.as_str()) {
                if option.lenient || option.kind.is_none() {
                    continue;
                }
                return Err(SpecError(format!(
                    "{id}: '{}' is set by the metric id: ask for {}",
                    option.name,
                    ids(&kind.columns)
                )));
            }
            let mut value = coerce(&option.value, schema)
                .map_err(|why| SpecError(format!("{}.{}: {why}", kind.kind, option.name)))?;
            if schema.get("x-metric") == Some(&Value::Bool(true)) {
                value = self.nested(kind, &option.name, value, depth)?;
            }
            fields.insert(option.name.clone(), value);
        }
        let spec: MetricSpec = serde_json::from_value(Value::Object(fields))
            .map_err(|e| SpecError(format!("{id}: {e}")))?;
        spec.validate()?;
        Ok(spec)
    }

    /// An option naming another metric (MENLI's `combine`): its spec under
    /// these same settings.
    fn nested(
        &self,
        kind: &KindInfo,
        name: &str,
        value: Value,
        depth: usize,
    ) -> Result<Value, SpecError> {
        let Value::String(other) = &value else {
            return Ok(value);
        };
        let other: MetricId = other
            .parse()
            .map_err(|e: ParseError| SpecError(e.to_string()))?;
        if other.info().kind == kind.kind || depth >= MAX_NESTING {
            return Err(SpecError(format!(
                "{}.{name}: {} cannot be combined with itself",
                kind.kind, kind.about.name
            )));
        }
        let spec = self.spec_within(other, depth + 1)?;
        serde_json::to_value(spec).map_err(|e| SpecError(format!("{}.{name}: {e}", kind.kind)))
    }

    /// The specs of `ids` (parsed, trimmed), checked; an option value that is
    /// not lenient must name a known kind and option, and apply to at least
    /// one of them.
    pub fn specs<S: AsRef<str>>(&self, ids: &[S]) -> Result<Vec<MetricSpec>, SpecsError> {
        let ids = ids
            .iter()
            .map(|id| id.as_ref().parse())
            .collect::<Result<Vec<MetricId>, ParseError>>()?;
        for option in self.options.iter().filter(|o| !o.lenient) {
            self.check_applies(option, &ids)?;
        }
        Ok(ids
            .iter()
            .map(|&id| self.spec(id))
            .collect::<Result<_, _>>()?)
    }

    fn check_applies(&self, option: &OptionValue, ids: &[MetricId]) -> Result<(), SpecError> {
        let asked = |k: &str| ids.iter().any(|id| id.info().kind == k);
        match &option.kind {
            Some(k) => {
                let kind = kind_of(k)?;
                property(kind, &option.name)?;
                if !asked(k) {
                    return Err(SpecError(format!(
                        "an option of {k} was given ({}), but none of {} was asked for",
                        option.name,
                        ids_of(&kind.columns)
                    )));
                }
            }
            None => {
                let has = |kind: &KindInfo| {
                    properties(kind).is_some_and(|p| p.contains_key(&option.name))
                };
                if !registry::kinds().iter().any(|k| asked(k.kind) && has(k)) {
                    let with: Vec<&str> = registry::kinds()
                        .iter()
                        .filter(|k| has(k))
                        .map(|k| k.kind)
                        .collect();
                    return Err(SpecError(match with.as_slice() {
                        [] => format!("no metric has an option '{}'", option.name),
                        with => format!(
                            "no metric asked for has an option '{}' (those that do: {})",
                            option.name,
                            with.join(", ")
                        ),
                    }));
                }
            }
        }
        Ok(())
    }
}

fn kind_of(tag: &str) -> Result<&'static KindInfo, SpecError> {
    registry::kind(tag).ok_or_else(|| {
        SpecError(
            ParseError::new("metric kind", tag, registry::kinds().iter().map(|k| k.kind))
                .to_string(),
        )
    })
}

fn properties(kind: &KindInfo) -> Option<&serde_json::Map<String, Value>> {
    kind.options.get("properties")?.as_object()
}

/// The schema of `kind`'s option `name`, or an error listing its options.
fn property<'a>(kind: &'a KindInfo, name: &str) -> Result<&'a Value, SpecError> {
    properties(kind).and_then(|p| p.get(name)).ok_or_else(|| {
        let known: Vec<&str> = properties(kind)
            .map(|p| p.keys().map(String::as_str).collect())
            .unwrap_or_default();
        SpecError(format!(
            "{} has no option '{name}' (its options: {})",
            kind.kind,
            if known.is_empty() {
                "none".to_owned()
            } else {
                known.join(", ")
            }
        ))
    })
}

fn ids(columns: &[MetricId]) -> String {
    let ids: Vec<&str> = columns.iter().map(|c| c.as_str()).collect();
    ids.join(" or ")
}

fn ids_of(columns: &[MetricId]) -> String {
    let ids: Vec<&str> = columns.iter().map(|c| c.as_str()).collect();
    ids.join(", ")
}

/// A value that is none of the types an option takes.
#[derive(Debug, thiserror::Error)]
#[error("{value} is not {types}")]
struct NotOfType {
    /// The value as given.
    value: String,
    /// The types the option takes, joined by "or".
    types: String,
}

/// `value` as the JSON type `schema` asks for: text given on a command line
/// (`"2"`, `"yes"`) becomes a number or a boolean where the option is one,
/// and a number becomes text where the option is text.
fn coerce(value: &Value, schema: &Value) -> Result<Value, NotOfType> {
    let types: Vec<&str> = match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => return Ok(value.clone()),
    };
    let allows = |t: &str| types.contains(&t);
    match value {
        Value::Null if allows("null") => Ok(Value::Null),
        Value::Bool(_) if allows("boolean") => Ok(value.clone()),
        Value::Number(n) if allows("integer") && (n.is_u64() || n.is_i64()) => Ok(value.clone()),
        Value::Number(_) if allows("number") => Ok(value.clone()),
        Value::Number(n) if allows("string") => Ok(Value::from(n.to_string())),
        // `--opt x=1` for a switch.
        Value::Number(n) if allows("boolean") && matches!(n.as_u64(), Some(0 | 1)) => {
            Ok(Value::Bool(n.as_u64() == Some(1)))
        }
        Value::String(s) if allows("string") => Ok(Value::from(s.as_str())),
        Value::String(s) => {
            let s = s.trim();
            if allows("null") && matches!(s, "null" | "none" | "default") {
                return Ok(Value::Null);
            }
            if allows("boolean") {
                match s {
                    "true" | "yes" | "on" | "1" => return Ok(Value::Bool(true)),
                    "false" | "no" | "off" | "0" => return Ok(Value::Bool(false)),
                    _ => {}
                }
            }
            if allows("integer")
                && let Ok(n) = s.parse::<i64>()
            {
                return Ok(Value::from(n));
            }
            if allows("number")
                && let Some(n) = s.parse::<f64>().ok().and_then(serde_json::Number::from_f64)
            {
                return Ok(Value::Number(n));
            }
            Err(NotOfType {
                value: format!("'{s}'"),
                types: types.join(" or "),
            })
        }
        Value::Object(_) | Value::Array(_) if allows("object") || allows("array") => {
            Ok(value.clone())
        }
        // Objects for options typed as text are specs of nested metrics.
        Value::Object(_) if allows("string") => Ok(value.clone()),
        other => Err(NotOfType {
            value: other.to_string(),
            types: types.join(" or "),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::menli::{Direction, Formula, MenliOptions};

    fn opt(s: &str) -> OptionValue {
        s.parse().unwrap()
    }

    #[test]
    fn ids_round_trip_and_unknown_ids_list_the_known_ones() {
        for &id in MetricId::ALL {
            assert_eq!(id.as_str().parse::<MetricId>().unwrap(), id);
            assert_eq!(id.info().id, id.as_str());
            assert_eq!(MetricSpec::default_for(id).id(), id);
        }
        let err = "bleurt-21".parse::<MetricId>().unwrap_err();
        assert!(
            err.to_string()
                .starts_with("unknown metric 'bleurt-21' (known: bleu, chrf, "),
            "{err}"
        );
        assert!(err.to_string().contains("moverscore-v1"), "{err}");
    }

    #[test]
    fn specs_round_trip_through_json() {
        let settings = Settings::default()
            .with(opt("idf=true").lenient())
            .with(opt("bertscore.layer=6"))
            .with(opt("menli.combine=bertscore-f"))
            .with(opt("menli.formula=e-c"));
        for &id in MetricId::ALL {
            let spec = settings.spec(id).unwrap();
            let json = serde_json::to_string(&spec).unwrap();
            assert_eq!(
                serde_json::from_str::<MetricSpec>(&json).unwrap(),
                spec,
                "{json}"
            );
            assert_eq!(spec.id(), id);
        }
        let bs: MetricSpec = serde_json::from_str(
            r#"{"metric":"bertscore","model":"m","layer":6,"idf":false,"rescale":true,"part":"f"}"#,
        )
        .unwrap();
        assert_eq!(bs.id(), MetricId::BertScoreF);
        let menli: MetricSpec = serde_json::from_str(
            r#"{"metric":"menli","formula":"e-c","direction":"both","task":"mt"}"#,
        )
        .unwrap();
        assert_eq!(
            menli,
            MetricSpec::Menli(MenliOptions {
                formula: Some(Formula::EMinusC),
                direction: Some(Direction::Both),
                ..MenliOptions::default()
            })
        );
        assert_eq!(
            serde_json::to_string(&MetricSpec::default_for(MetricId::Bleu)).unwrap(),
            r#"{"metric":"bleu"}"#
        );
        let typo = serde_json::from_str::<MetricSpec>(r#"{"metric":"bertscore","lyer":6}"#);
        assert!(typo.unwrap_err().to_string().contains("lyer"));
    }

    #[test]
    fn options_are_read_as_their_schema_types_and_bad_ones_name_themselves() {
        let s = Settings::default()
            .with(opt("moverscore-v1.ngram=2"))
            .with(opt("stemmer=yes"))
            .with(opt("menli.weight=0.5"));
        let specs = s.specs(&["moverscore-v1", "rouge2", "menli"]).unwrap();
        assert_eq!(
            serde_json::to_value(&specs[0]).unwrap()["ngram"],
            serde_json::json!(2)
        );
        assert_eq!(
            serde_json::to_value(&specs[1]).unwrap()["stemmer"],
            serde_json::json!(true)
        );
        let err = |s: Settings, ids: &[&str]| s.specs(ids).unwrap_err().to_string();
        let bad = err(
            Settings::default().with(opt("moverscore-v1.ngrm=2")),
            &["moverscore-v1"],
        );
        assert!(
            bad.contains("has no option 'ngrm'") && bad.contains("ngram"),
            "{bad}"
        );
        let bad = err(
            Settings::default().with(opt("moverscore-v1.ngram=two")),
            &["moverscore-v1"],
        );
        assert!(
            bad.contains("moverscore-v1.ngram") && bad.contains("'two'"),
            "{bad}"
        );
        let bad = err(
            Settings::default().with(opt("moverscore-v1.ngram=0")),
            &["moverscore-v1"],
        );
        assert!(bad.contains("at least 1"), "{bad}");
        let bad = err(Settings::default().with(opt("idf=true")), &["bleu"]);
        assert!(
            bad.contains("no metric asked for has an option 'idf'"),
            "{bad}"
        );
        let bad = err(
            Settings::default().with(opt("bertscore.idf=true")),
            &["bleu"],
        );
        assert!(
            bad.contains("none of bertscore-p, bertscore-r, bertscore-f"),
            "{bad}"
        );
        let bad = err(
            Settings::default().with(opt("bertscore.part=r")),
            &["bertscore-f"],
        );
        assert!(
            bad.contains("ask for bertscore-p or bertscore-r or bertscore-f"),
            "{bad}"
        );
        let bad = err(
            Settings::default().with(opt("bertscor.idf=true")),
            &["bleu"],
        );
        assert!(bad.contains("unknown metric kind 'bertscor'"), "{bad}");
        // A lenient value applies where it fits and nowhere else.
        assert!(
            Settings::default()
                .with(opt("idf=true").lenient())
                .specs(&["bleu"])
                .is_ok()
        );
        assert!("ngram".parse::<OptionValue>().is_err());
    }

    #[test]
    fn whole_set_specs_say_why() {
        let idf = Settings::default().with(opt("idf=true"));
        assert!(
            idf.spec(MetricId::BertScoreF)
                .unwrap()
                .whole_set()
                .is_some()
        );
        assert!(
            MetricSpec::default_for(MetricId::BertScoreF)
                .whole_set()
                .is_none()
        );
        let bad = Settings::default().with(opt("menli.combine=menli"));
        assert!(
            bad.specs(&["menli"])
                .unwrap_err()
                .to_string()
                .contains("cannot be combined with itself")
        );
        let heavy = Settings::default().with(opt("menli.weight=1.5"));
        assert!(
            heavy
                .specs(&["menli"])
                .unwrap_err()
                .to_string()
                .contains("between 0 and 1")
        );
        // MENLI combined with BERTScore takes BERTScore's options and model.
        let mut models = BTreeMap::new();
        models.insert(ModelSlot::BertScore, "enc".to_owned());
        let combined = Settings {
            models,
            ..Settings::default()
        }
        .with(opt("idf=true").lenient())
        .with(opt("menli.combine=bertscore-f"));
        let MetricSpec::Menli(m) = combined.spec(MetricId::Menli).unwrap() else {
            panic!("a MENLI spec")
        };
        let inner = serde_json::to_value(m.combine.unwrap()).unwrap();
        assert_eq!(inner["model"], "enc");
        assert_eq!(inner["idf"], true);
    }
}
