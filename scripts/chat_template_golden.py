#!/usr/bin/env python3
"""Golden renderings that hold Blindspot's chat templates
(src/models/chat.rs) to transformers' `apply_chat_template`.

The templates are in tests/fixtures/chat/ as the model repositories'
tokenizer_config.json carry them (copied from public copies, since the hub
cannot be reached here): Qwen2.5-Instruct's, Qwen3's (its thinking blocks
and `enable_thinking`), Llama 3.2 Vision-Instruct's (Llama 3's format with
`strftime_now`, `namespace`, `tojson(indent=4)`, list contents), SmolLM2's
(ChatML with a default system prompt) and Gemma's (which refuses a system
message by `raise_exception`).

Each case renders `messages` (with `tools`, `add_generation_prompt` and
extra variables such as `enable_thinking` or `date_string`) with
tokenize=False, and records the text or, where the template raises, the
message. Writes tests/golden/chat_templates.json.

Usage (venv outside the repo):
    ~/.cache/blindspot-py/bin/python scripts/chat_template_golden.py
"""
import json
import pathlib

import transformers as tf

ROOT = pathlib.Path(__file__).resolve().parent.parent
TEMPLATES = ROOT / "tests" / "fixtures" / "chat"

BASIC = [
    {"role": "user", "content": "Hello, how are you?"},
    {"role": "assistant", "content": "I'm doing great. How can I help you today?"},
    {"role": "user", "content": "I'd like to show off how chat templating works!"},
]
SYSTEM = [{"role": "system", "content": "  You grade summaries from 1 to 5.  "}] + BASIC
UNICODE = [
    {"role": "user", "content": 'Grüße, "quoted" & <tags> \\ back — 東京\n\nnew paragraph'},
    {"role": "assistant", "content": "<think>\nweighing it\n</think>\n\nScore: 4"},
    {"role": "user", "content": "And this one?"},
]
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather in a city, \"now\".",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                                                    "unit": {"type": "string", "enum": ["c", "f"]}},
                   "required": ["city"]}}}]
TOOL_CALL = [
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": "",
     "tool_calls": [{"type": "function", "function": {"name": "get_weather",
                                                      "arguments": {"city": "Paris", "unit": "c"}}}]},
    {"role": "tool", "content": "18 degrees, dry"},
]
PARTS = [{"role": "user", "content": [{"type": "text", "text": "Rate this summary."}]},
         {"role": "assistant", "content": [{"type": "text", "text": "3"}]}]


def cases():
    for template in ["qwen2.5", "qwen3", "smollm2"]:
        for messages in [BASIC, SYSTEM, UNICODE]:
            for gen in [True, False]:
                yield template, messages, gen, {}
    for template in ["qwen2.5", "qwen3"]:
        yield template, TOOL_CALL, True, {"tools": TOOLS}
    yield "qwen3", UNICODE, True, {"enable_thinking": False}
    yield "qwen3", BASIC, True, {"enable_thinking": True}
    for messages in [BASIC, SYSTEM, UNICODE, PARTS]:
        yield "llama3.2-vision", messages, True, {"date_string": "26 Jul 2024"}
    yield "llama3.2-vision", BASIC, True, {"date_string": "26 Jul 2024", "tools": TOOLS}
    yield "llama3.2-vision", BASIC, False, {"date_string": "26 Jul 2024", "tools": TOOLS,
                                             "tools_in_user_message": False}
    yield "gemma", BASIC, True, {}
    yield "gemma", SYSTEM, True, {}


def main():
    tok = tf.PreTrainedTokenizerFast(
        tokenizer_file=str(ROOT / "tests/fixtures/llm/llama/tokenizer.json"),
        bos_token="<|begin_of_text|>", eos_token="<|eot_id|>")
    out = []
    for template, messages, gen, extra in cases():
        source = (TEMPLATES / f"{template}.jinja").read_text(encoding="utf-8")
        case = {"template": template, "messages": messages, "add_generation_prompt": gen,
                "extra": extra}
        kwargs = dict(extra)
        tools = kwargs.pop("tools", None)
        try:
            case["text"] = tok.apply_chat_template(messages, tools=tools, chat_template=source,
                                                   tokenize=False, add_generation_prompt=gen,
                                                   **kwargs)
        except Exception as e:  # a template's raise_exception
            case["error"] = str(e)
        out.append(case)
    golden = {"_about": "transformers %s; scripts/chat_template_golden.py" % tf.__version__,
              "bos_token": tok.bos_token, "eos_token": tok.eos_token, "cases": out}
    (ROOT / "tests/golden/chat_templates.json").write_text(
        json.dumps(golden, indent=1, ensure_ascii=False), encoding="utf-8")


if __name__ == "__main__":
    main()
