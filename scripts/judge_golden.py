#!/usr/bin/env python3
"""Golden judge scores that hold Blindspot's LLM judges (src/metrics/geval.rs)
to a Python reference of their arithmetic on the tiny random decoder LLMs
of scripts/llama_parity.py (tests/fixtures/llm/{llama,qwen2,qwen3}, each
with its chat template).

G-Eval, probability-weighted, for each dimension on 3 SummEval summaries
(tests/data/summeval.jsonl, named by line and system; no text is copied
here): the released prompt (src/metrics/prompts/geval/, nlpyang/geval's
files with Python's line ends) with {{Document}} and {{Summary}} replaced,
sent as one system message (and, for one model, as a user message and as
plain text) through `apply_chat_template(..., add_generation_prompt=True)`;
the next-token distribution after it; p(s) the summed probability of the
single tokens spelling "s" and " s"; score = sum s p(s) / sum p(s).

Writes tests/golden/judge_parity.json. Usage (venv outside the repo):
    ~/.cache/blindspot-py/bin/python scripts/judge_golden.py
"""
import json
import pathlib

import torch
import transformers as tf

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROMPTS = ROOT / "src/metrics/prompts/geval"
FILES = {"coherence": "coh", "consistency": "con", "fluency": "flu", "relevance": "rel"}
ITEMS = [(0, "M11"), (3, "M8"), (7, "M23")]


def rating_tokens(tok, s):
    ids = []
    for text in (str(s), " " + str(s)):
        enc = tok(text, add_special_tokens=False)["input_ids"]
        if len(enc) == 1 and enc[0] not in ids:
            ids.append(enc[0])
    return ids


def weighted(model, tok, ids, top):
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids])).logits[0, -1].double()
    lp = torch.log_softmax(logits, dim=-1)
    p = [sum(float(lp[t].exp()) for t in rating_tokens(tok, s)) for s in range(1, top + 1)]
    mass = sum(p)
    return {"value": sum((k + 1) * q for k, q in enumerate(p)) / mass, "mass": mass,
            "shares": [q / mass for q in p]}


def main():
    rows = [json.loads(line) for line in (ROOT / "tests/data/summeval.jsonl").open(encoding="utf-8")]
    golden = {"_about": "transformers %s, torch %s, fp32 CPU; scripts/judge_golden.py"
                        % (tf.__version__, torch.__version__), "items": ITEMS, "g-eval": []}
    for name in ["llama", "qwen2", "qwen3"]:
        folder = ROOT / "tests/fixtures/llm" / name
        model = tf.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
        config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
        tok = tf.PreTrainedTokenizerFast(tokenizer_file=str(folder / "tokenizer.json"),
                                         eos_token=config["eos_token"])
        tok.chat_template = config["chat_template"]
        modes = [("system", True)] + ([("user", True), ("system", False)] if name == "qwen2" else [])
        for role, chat in modes:
            for dim, short in FILES.items():
                template = (PROMPTS / f"{short}_detailed.txt").read_text(encoding="utf-8")
                top = 3 if dim == "fluency" else 5
                for line, system in ITEMS:
                    row = rows[line]
                    text = template.replace("{{Document}}", row["src"]).replace(
                        "{{Summary}}", row["systems"][system]["summary"])
                    if chat:
                        ids = tok.apply_chat_template([{"role": role, "content": text}],
                                                      tokenize=True, add_generation_prompt=True)
                    else:
                        ids = tok(text)["input_ids"]
                    golden["g-eval"].append({"model": name, "role": role, "chat": chat,
                                             "dimension": dim, "line": line, "system": system,
                                             "tokens": len(ids), **weighted(model, tok, ids, top)})
    (ROOT / "tests/golden/judge_parity.json").write_text(json.dumps(golden, indent=1))


if __name__ == "__main__":
    main()
