//! Chat templates: a model's `chat_template` (its tokenizer_config.json)
//! rendered as transformers' `apply_chat_template` renders it with jinja2:
//! `trim_blocks` and `lstrip_blocks` on, loop controls, Python's string and
//! dict methods (minijinja-contrib's pycompat), and the globals and filters
//! transformers adds: `raise_exception`, `strftime_now` (local time) and a
//! `tojson` that writes what Python's `json.dumps` writes (no HTML escaping,
//! `", "` and `": "` separators, `indent`, `sort_keys`). The context is
//! transformers': `messages`, `tools` and `documents` (none when not given),
//! `add_generation_prompt`, the special tokens, and any extra variables
//! (`enable_thinking`, `date_string`...).

use minijinja::value::{Kwargs, Value, ValueKind};
use minijinja::{Environment, Error, ErrorKind};
use serde::Deserialize;

use super::ModelError;

/// Operations a render may take before it is stopped (a template that
/// loops forever is refused rather than hanging the page).
const FUEL: u64 = 5_000_000;

/// A parsed chat template and the special tokens it may print.
pub struct ChatTemplate {
    env: Environment<'static>,
    /// The tokens transformers passes to every template (`bos_token`,
    /// `eos_token`, `pad_token`, `unk_token`), where the tokenizer has them.
    special_tokens: serde_json::Map<String, serde_json::Value>,
}

impl std::fmt::Debug for ChatTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatTemplate")
            .field("special_tokens", &self.special_tokens)
            .finish_non_exhaustive()
    }
}

/// A special token in tokenizer_config.json: a string or an added-token
/// object with its `content`.
#[derive(Deserialize)]
#[serde(untagged)]
enum Token {
    Plain(String),
    Added { content: String },
}

/// `chat_template` in tokenizer_config.json: one template, or named ones
/// (`default` is used).
#[derive(Deserialize)]
#[serde(untagged)]
enum Templates {
    One(String),
    Named(Vec<NamedTemplate>),
}

#[derive(Deserialize)]
struct NamedTemplate {
    name: String,
    template: String,
}

#[derive(Deserialize)]
struct TokenizerConfig {
    chat_template: Option<Templates>,
    bos_token: Option<Token>,
    eos_token: Option<Token>,
    pad_token: Option<Token>,
    unk_token: Option<Token>,
}

fn template_error(e: &Error) -> ModelError {
    match e.kind() {
        ErrorKind::InvalidOperation if e.detail().is_some_and(|d| d.starts_with("raised: ")) => {
            ModelError::Input(format!(
                "the chat template refuses these messages: {}",
                &e.detail().unwrap_or_default()["raised: ".len()..]
            ))
        }
        ErrorKind::OutOfFuel => ModelError::Input(
            "the chat template ran too long (more than 5 million operations): is it looping?"
                .into(),
        ),
        _ => ModelError::Input(format!("the chat template fails: {e:#}")),
    }
}

impl ChatTemplate {
    /// `source` with the special tokens given (`bos_token`, `eos_token`...
    /// as names to strings). A template that does not parse is an error
    /// that says where.
    pub fn new(
        source: &str,
        special_tokens: serde_json::Map<String, serde_json::Value>,
    ) -> Result<Self, ModelError> {
        let mut env = Environment::new();
        let syntax = minijinja::syntax::SyntaxConfig::builder()
            .trim_blocks(true)
            .lstrip_blocks(true)
            .build()
            .map_err(|e| template_error(&e))?;
        env.set_syntax(syntax);
        env.set_fuel(Some(FUEL));
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function(
            "raise_exception",
            |message: String| -> Result<Value, Error> {
                Err(Error::new(
                    ErrorKind::InvalidOperation,
                    format!("raised: {message}"),
                ))
            },
        );
        env.add_function("strftime_now", strftime_now);
        env.add_filter("tojson", tojson);
        env.add_template_owned("chat", source.to_owned())
            .map_err(|e| template_error(&e))?;
        Ok(Self {
            env,
            special_tokens,
        })
    }

    /// The template of a tokenizer_config.json, with its special tokens;
    /// `None` when it has none (a base model).
    pub fn from_tokenizer_config(json: &str) -> Result<Option<Self>, ModelError> {
        let config: TokenizerConfig = serde_json::from_str(json)
            .map_err(|e| ModelError::Config(format!("tokenizer_config.json is not valid: {e}")))?;
        let source = match config.chat_template {
            None => return Ok(None),
            Some(Templates::One(s)) => s,
            Some(Templates::Named(named)) => {
                let names: Vec<&str> = named.iter().map(|t| t.name.as_str()).collect();
                match named.iter().find(|t| t.name == "default") {
                    Some(t) => t.template.clone(),
                    None => {
                        return Err(ModelError::Config(format!(
                            "tokenizer_config.json names chat templates {names:?} but none \
                             `default`"
                        )));
                    }
                }
            }
        };
        let mut special = serde_json::Map::new();
        for (name, token) in [
            ("bos_token", config.bos_token),
            ("eos_token", config.eos_token),
            ("pad_token", config.pad_token),
            ("unk_token", config.unk_token),
        ] {
            if let Some(Token::Plain(s) | Token::Added { content: s }) = token {
                special.insert(name.into(), s.into());
            }
        }
        Self::new(&source, special).map(Some)
    }

    /// Renders `messages` (a list of `{role, content, ...}`), with `tools`
    /// (or none), the generation prompt if asked, and `extra` variables.
    pub fn render(
        &self,
        messages: &serde_json::Value,
        tools: Option<&serde_json::Value>,
        add_generation_prompt: bool,
        extra: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<String, ModelError> {
        if !messages.is_array() {
            return Err(ModelError::Input("messages must be a list".into()));
        }
        let mut context = self.special_tokens.clone();
        context.extend(extra.clone());
        context.insert("messages".into(), messages.clone());
        context.insert("tools".into(), tools.cloned().unwrap_or_default());
        context.insert("documents".into(), serde_json::Value::Null);
        context.insert("add_generation_prompt".into(), add_generation_prompt.into());
        let template = self
            .env
            .get_template("chat")
            .map_err(|e| template_error(&e))?;
        template
            .render(Value::from(minijinja::value::Serde(&context)))
            .map_err(|e| template_error(&e))
    }
}

/// `tokenizer_config` (or an empty one) with its `chat_template` set to
/// `template`: a `chat_template.jinja` file, which transformers prefers to
/// the config's.
pub fn with_template(tokenizer_config: Option<&str>, template: &str) -> Result<String, ModelError> {
    let mut config: serde_json::Map<String, serde_json::Value> = match tokenizer_config {
        Some(text) => serde_json::from_str(text)
            .map_err(|e| ModelError::Config(format!("tokenizer_config.json is not valid: {e}")))?,
        None => serde_json::Map::new(),
    };
    config.insert("chat_template".into(), template.into());
    Ok(serde_json::Value::Object(config).to_string())
}

/// transformers' `strftime_now(format)`: the local time now, formatted.
fn strftime_now(format: String) -> Result<Value, Error> {
    use chrono::format::{Item, StrftimeItems};
    let items: Vec<Item> = StrftimeItems::new(&format).collect();
    if items.iter().any(|i| matches!(i, Item::Error)) {
        return Err(Error::new(
            ErrorKind::InvalidOperation,
            format!("strftime_now: `{format}` is not a strftime format"),
        ));
    }
    Ok(Value::from(
        chrono::Local::now()
            .format_with_items(items.into_iter())
            .to_string(),
    ))
}

/// How `json.dumps` is asked to write.
struct JsonStyle {
    indent: Option<usize>,
    sort: bool,
    ascii: bool,
    /// Between items, and between a key and its value.
    separators: (String, String),
}

/// transformers' `tojson` filter: Python's `json.dumps(value,
/// ensure_ascii=ensure_ascii, indent=indent, separators=separators,
/// sort_keys=sort_keys)`, `ensure_ascii` false unless asked.
fn tojson(value: &Value, kwargs: Kwargs) -> Result<Value, Error> {
    let indent: Option<usize> = kwargs.get("indent")?;
    let sort_keys: Option<bool> = kwargs.get("sort_keys")?;
    let ensure_ascii: Option<bool> = kwargs.get("ensure_ascii")?;
    let separators: Option<Vec<String>> = kwargs.get("separators")?;
    kwargs.assert_all_used()?;
    // json.dumps's defaults: ", " between items without an indent, "," with one.
    let separators = match separators.as_deref() {
        None => (
            if indent.is_some() { "," } else { ", " }.to_owned(),
            ": ".to_owned(),
        ),
        Some([item, key]) => (item.clone(), key.clone()),
        Some(other) => {
            return Err(Error::new(
                ErrorKind::InvalidOperation,
                format!("tojson's separators are two strings, not {}", other.len()),
            ));
        }
    };
    let style = JsonStyle {
        indent,
        sort: sort_keys.unwrap_or(false),
        ascii: ensure_ascii.unwrap_or(false),
        separators,
    };
    let mut out = String::new();
    dump(value, &style, 0, &mut out)?;
    Ok(Value::from_safe_string(out))
}

/// One value as `json.dumps` writes it.
fn dump(value: &Value, style: &JsonStyle, level: usize, out: &mut String) -> Result<(), Error> {
    let newline = |out: &mut String, level: usize| {
        if let Some(n) = style.indent {
            out.push('\n');
            out.extend(std::iter::repeat_n(' ', n * level));
        }
    };
    let comma = style.separators.0.as_str();
    match value.kind() {
        ValueKind::Undefined => {
            return Err(Error::new(
                ErrorKind::InvalidOperation,
                "tojson of an undefined value (json.dumps refuses it too)",
            ));
        }
        ValueKind::None => out.push_str("null"),
        ValueKind::Bool => out.push_str(if value.is_true() { "true" } else { "false" }),
        ValueKind::Number if value.is_integer() => out.push_str(&value.to_string()),
        ValueKind::Number => {
            let x = f64::try_from(value.clone())?;
            out.push_str(&python_float(x));
        }
        ValueKind::String => quote(value.as_str().unwrap_or_default(), style.ascii, out),
        ValueKind::Seq | ValueKind::Iterable => {
            let items: Vec<Value> = value.try_iter()?.collect();
            if items.is_empty() {
                out.push_str("[]");
                return Ok(());
            }
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(comma);
                }
                newline(out, level + 1);
                dump(item, style, level + 1, out)?;
            }
            newline(out, level);
            out.push(']');
        }
        ValueKind::Map => {
            let mut keys: Vec<Value> = value.try_iter()?.collect();
            if style.sort {
                keys.sort();
            }
            if keys.is_empty() {
                out.push_str("{}");
                return Ok(());
            }
            out.push('{');
            for (i, key) in keys.iter().enumerate() {
                if i > 0 {
                    out.push_str(comma);
                }
                newline(out, level + 1);
                match key.as_str() {
                    Some(k) => quote(k, style.ascii, out),
                    None => quote(&key.to_string(), style.ascii, out),
                }
                out.push_str(&style.separators.1);
                dump(&value.get_item(key)?, style, level + 1, out)?;
            }
            newline(out, level);
            out.push('}');
        }
        other => {
            return Err(Error::new(
                ErrorKind::InvalidOperation,
                format!("tojson cannot write a value of kind {other}"),
            ));
        }
    }
    Ok(())
}

/// A JSON string as Python writes it (`ascii`: `ensure_ascii=True`, every
/// character past ASCII as `\\uXXXX`, UTF-16 surrogates past U+FFFF).
fn quote(s: &str, ascii: bool, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c if ascii && !c.is_ascii() => {
                let mut units = [0u16; 2];
                for u in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{u:04x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// A float as Python's `repr`: the shortest digits that read back, with a
/// `.0` on whole numbers and an exponent (two digits at least) outside
/// 1e-4 .. 1e16; `NaN` and `Infinity` as `json.dumps` writes them.
fn python_float(x: f64) -> String {
    if x.is_nan() {
        return "NaN".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    let magnitude = x.abs();
    if magnitude != 0.0 && !(1e-4..1e16).contains(&magnitude) {
        let s = format!("{x:e}");
        let (mantissa, exponent) = s.split_once('e').expect("{:e} writes an exponent");
        let (sign, digits) = match exponent.strip_prefix('-') {
            Some(d) => ('-', d),
            None => ('+', exponent),
        };
        return format!("{mantissa}e{sign}{digits:0>2}");
    }
    let s = format!("{x}");
    if s.contains('.') { s } else { format!("{s}.0") }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(source: &str, context: serde_json::Value) -> String {
        let t = ChatTemplate::new(source, serde_json::Map::new()).unwrap();
        let messages = context["messages"].clone();
        let extra = context.as_object().unwrap().clone();
        t.render(&messages, None, false, &extra).unwrap()
    }

    #[test]
    fn tojson_writes_what_python_writes() {
        let v = serde_json::json!({"messages": [], "x": {"b": [1, 2.5, 1e-7, 3.0, 1e20], "a": "é \"q\" <&>\n", "n": null, "t": true, "e": {}, "l": []}});
        assert_eq!(
            render("{{ x | tojson }}", v.clone()),
            r#"{"b": [1, 2.5, 1e-07, 3.0, 1e+20], "a": "é \"q\" <&>\n", "n": null, "t": true, "e": {}, "l": []}"#
        );
        assert_eq!(
            render("{{ x.b | tojson(indent=2) }}", v.clone()),
            "[\n  1,\n  2.5,\n  1e-07,\n  3.0,\n  1e+20\n]"
        );
        assert_eq!(
            render("{{ x | tojson(sort_keys=true) }}", v.clone())[..10].to_owned(),
            r#"{"a": "é "#
        );
        // ensure_ascii and separators as json.dumps takes them.
        assert_eq!(
            render(
                "{{ {'a': 'é😀', 'b': [1, 2]} | tojson(ensure_ascii=true, separators=[',', ':']) }}",
                v.clone()
            ),
            r#"{"a":"\u00e9\ud83d\ude00","b":[1,2]}"#
        );
        let t = ChatTemplate::new("{{ missing | tojson }}", serde_json::Map::new()).unwrap();
        assert!(
            t.render(&serde_json::json!([]), None, false, &serde_json::Map::new())
                .is_err()
        );
    }

    #[test]
    fn raised_errors_loops_and_bad_formats_say_what_went_wrong() {
        let t = ChatTemplate::new(
            "{{ raise_exception('no system role') }}",
            serde_json::Map::new(),
        )
        .unwrap();
        let e = t
            .render(&serde_json::json!([]), None, true, &serde_json::Map::new())
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "the chat template refuses these messages: no system role"
        );
        let t = ChatTemplate::new(
            "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
            serde_json::Map::new(),
        )
        .unwrap();
        let e = t
            .render(&serde_json::json!([]), None, true, &serde_json::Map::new())
            .unwrap_err();
        assert!(e.to_string().contains("ran too long"), "{e}");
        let e = ChatTemplate::new("{% if %}", serde_json::Map::new()).unwrap_err();
        assert!(e.to_string().contains("the chat template fails"), "{e}");
        let t = ChatTemplate::new("{{ strftime_now('%Q') }}", serde_json::Map::new()).unwrap();
        let e = t
            .render(&serde_json::json!([]), None, true, &serde_json::Map::new())
            .unwrap_err();
        assert!(e.to_string().contains("not a strftime format"), "{e}");
    }
}
