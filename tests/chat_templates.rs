//! Chat templates (src/models/chat.rs) against transformers'
//! `apply_chat_template` (scripts/chat_template_golden.py): Qwen2.5's,
//! Qwen3's, Llama 3.2's, SmolLM2's and Gemma's templates over plain, system,
//! Unicode, thinking, tool-call and list-content conversations, with and
//! without the generation prompt; a template's `raise_exception` as an error.

use blindspot::models::chat::ChatTemplate;

use crate::common;

fn root() -> &'static std::path::Path {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn renders_as_transformers_renders() {
    let g = common::golden("chat_templates.json");
    let mut special = serde_json::Map::new();
    special.insert("bos_token".into(), g["bos_token"].clone());
    special.insert("eos_token".into(), g["eos_token"].clone());
    let cases = g["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 30);
    for (i, case) in cases.iter().enumerate() {
        let name = case["template"].as_str().unwrap();
        let source =
            std::fs::read_to_string(root().join(format!("tests/fixtures/chat/{name}.jinja")))
                .unwrap();
        let template = ChatTemplate::new(&source, special.clone()).unwrap();
        let mut extra = case["extra"].as_object().unwrap().clone();
        let tools = extra.remove("tools");
        let out = template.render(
            &case["messages"],
            tools.as_ref(),
            case["add_generation_prompt"].as_bool().unwrap(),
            &extra,
        );
        match (&case["text"], &case["error"]) {
            (serde_json::Value::String(want), _) => {
                assert_eq!(out.unwrap(), *want, "case {i}: {name}")
            }
            (_, serde_json::Value::String(raised)) => {
                let e = out.unwrap_err().to_string();
                assert!(e.ends_with(raised.as_str()), "case {i}: {e} vs {raised}");
            }
            _ => panic!("case {i} has neither text nor error"),
        }
    }
}

/// Llama 3's template dates its system line with `strftime_now` when no
/// `date_string` is given: today's date, as the local clock has it.
#[test]
fn strftime_now_dates_the_llama_system_line() {
    let source =
        std::fs::read_to_string(root().join("tests/fixtures/chat/llama3.2-vision.jinja")).unwrap();
    let template = ChatTemplate::new(&source, serde_json::Map::new()).unwrap();
    let messages = serde_json::json!([{"role": "user", "content": "Hi"}]);
    let before = chrono::Local::now().format("%d %b %Y").to_string();
    let out = template
        .render(&messages, None, true, &serde_json::Map::new())
        .unwrap();
    let after = chrono::Local::now().format("%d %b %Y").to_string();
    assert!(
        out.contains(&format!("Today Date: {before}\n"))
            || out.contains(&format!("Today Date: {after}\n")),
        "{out}"
    );
}

/// tokenizer_config.json's forms: one template, named templates (the
/// `default` one), added-token objects for the special tokens, none at all.
#[test]
fn tokenizer_config_forms() {
    let config = serde_json::json!({
        "chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "{{ bos_token }}{{ messages[0].content }}"}],
        "bos_token": {"content": "<s>", "lstrip": false},
        "eos_token": "</s>"
    });
    let t = ChatTemplate::from_tokenizer_config(&config.to_string())
        .unwrap()
        .unwrap();
    let out = t
        .render(
            &serde_json::json!([{"role": "user", "content": "x"}]),
            None,
            false,
            &serde_json::Map::new(),
        )
        .unwrap();
    assert_eq!(out, "<s>x");
    assert!(
        ChatTemplate::from_tokenizer_config(r#"{"bos_token": "<s>"}"#)
            .unwrap()
            .is_none()
    );
    let e = ChatTemplate::from_tokenizer_config(
        r#"{"chat_template": [{"name": "rag", "template": "T"}]}"#,
    )
    .unwrap_err();
    assert!(e.to_string().contains("none `default`"), "{e}");
}
