#!/usr/bin/env python3
"""Golden judge scores that hold Blindspot's LLM judges (src/metrics/geval.rs)
to a Python reference of their arithmetic on the tiny random decoder LLMs
of scripts/llama_parity.py (tests/fixtures/llm/{llama,qwen2,qwen3}, each
with its chat template).

GEMBA-DA and GEMBA-DA_ref on 2 WMT21 de-en translations
(tests/data/wmt21_de_en.jsonl): gemba/prompt.py's prompts filled in, one
user message through the chat template, and the first, greedy answer of
gpt_api.py's request (64 new tokens at most): its stripped text and whether
the model ended it.

GEMBA-MQM: gemba_mqm_utils.py of gemba 0.1.3 (PyPI) itself, loaded alone
(its package's __init__ needs the OpenAI client; its `import ipdb` is
unused): TEMPLATE_GEMBA_MQM equals src/metrics/prompts/gemba/mqm.json;
apply_template fills it for 2 WMT21 translations, through each tiny model's
chat template; the greedy answer (500 new tokens at most), and
parse_mqm_answer's scores (normalize False and True) and error counts of
that answer and of a list of written answers (the parser's cases).

The custom judge (src/metrics/custom_judge.rs): its default prompt filled
with 2 WMT21 references and translations, one user message through the chat
template; the probability-weighted rating over 1-5 and over 0-9, and the
greedy answer (16 new tokens at most) with the first `-?\d+(?:\.\d+)?` in it.

The pairwise judge (AlpacaEval 2's weighted judge) on the same WMT
translations: the source as the instruction, the hypothesis and the
reference as the two outputs in both orders; alpaca_eval's make_prompts and
prompt_to_chatml restated; p(m) / (p(m) + p(M)) after the chat template.

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
import contextlib
import importlib.util
import io
import json
import pathlib
import re
import sys
import types

import torch
import transformers as tf

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROMPTS = ROOT / "src/metrics/prompts/geval"
FILES = {"coherence": "coh", "consistency": "con", "fluency": "flu", "relevance": "rel"}
ITEMS = [(0, "M11"), (3, "M8"), (7, "M23")]


def load(name):
    """A tiny model of tests/fixtures/llm and its tokenizer with its chat template."""
    folder = ROOT / "tests/fixtures/llm" / name
    model = tf.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    tok = tf.PreTrainedTokenizerFast(tokenizer_file=str(folder / "tokenizer.json"),
                                     eos_token=config["eos_token"], pad_token=config.get("pad_token"))
    tok.chat_template = config["chat_template"]
    return model, tok


def rating_tokens(tok, s):
    ids = []
    for text in (str(s), " " + str(s)):
        enc = tok(text, add_special_tokens=False)["input_ids"]
        if len(enc) == 1 and enc[0] not in ids:
            ids.append(enc[0])
    return ids


def weighted(model, tok, ids, top, low=1):
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids])).logits[0, -1].double()
    lp = torch.log_softmax(logits, dim=-1)
    p = [sum(float(lp[t].exp()) for t in rating_tokens(tok, s)) for s in range(low, top + 1)]
    mass = sum(p)
    return {"value": sum((low + k) * q for k, q in enumerate(p)) / mass, "mass": mass,
            "shares": [q / mass for q in p]}


# GEMBA's prompts (gemba/prompt.py), filled by str.format as gemba_da.py fills them.
GEMBA_DA = ('Score the following translation from {source_lang} to {target_lang} on a continuous '
            'scale from 0 to 100, where a score of zero means "no meaning preserved" and score of '
            'one hundred means "perfect meaning and grammar".\n\n{source_lang} source: '
            '"{source_seg}"\n{target_lang} translation: "{target_seg}"\nScore: ')
GEMBA_DA_REF = ('Score the following translation from {source_lang} to {target_lang} with respect '
                'to human reference on a continuous scale 0 to 100 where score of zero means "no '
                'meaning preserved" and score of one hundred means "perfect meaning and grammar".'
                '\n\n{source_lang} source: "{source_seg}"\n{target_lang} human reference: '
                '{reference_seg}\n{target_lang} machine translation: "{target_seg}"\nScore: ')
WMT = [(0, "Online-W"), (5, "ICL")]


def gemba_greedy(model, tok, prompt):
    """The first, greedy answer of gpt_api.py's request: its text, stripped,
    and whether the model ended it (an answer cut for length is none)."""
    ids = tok.apply_chat_template([{"role": "user", "content": prompt}], tokenize=True,
                                  add_generation_prompt=True)
    with torch.no_grad():
        out = model.generate(torch.tensor([ids]), do_sample=False, max_new_tokens=64,
                             pad_token_id=tok.pad_token_id)
    new = out[0, len(ids):].tolist()
    eos = model.config.eos_token_id
    eos = eos if isinstance(eos, list) else [eos]
    return {"tokens": len(ids), "answer": tok.decode(new, skip_special_tokens=True).strip(),
            "ended": bool(new) and new[-1] in eos}


def gemba_mqm_utils():
    sys.modules.setdefault("ipdb", types.ModuleType("ipdb"))
    import site
    for folder in site.getsitepackages():
        path = pathlib.Path(folder) / "gemba/gemba_mqm_utils.py"
        if path.exists():
            spec = importlib.util.spec_from_file_location("gemba_mqm_utils", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return module
    raise SystemExit("pip install --no-deps gemba==0.1.3")


MQM_ANSWERS = [
    "Critical:\nno-error\nMajor:\naccuracy/mistranslation - \"involvement\"\naccuracy/omission - "
    "\"the account holder\"\nMinor:\nfluency/grammar - \"w\u00e4re\"\nfluency/register - \"dir\"",
    "Critical:\naccuracy/addition - \"of high-speed rail\"\nMajor:\naccuracy/mistranslation - "
    "\"go to the reviews\"\nMinor:\nstyle/awkward - \"etc.,\"",
    "Fine.\nMAJOR:\nstyle/awkward - \"x\"",
    "Minor:\nnon-translation - \"x\"",
    "Minor:\na\nb\nc\nd\ne\nf\nMajor:\ng",
    "Critical:\na\nb",
    "no error at all",
    "critical: no-error\nmajor:\n  accuracy \u0130stanbul  \nminor: \nx\x1c",
    "Critical:\r\nfluency/spelling - \"x\"\r\nMajor:\r\ny",
    '{"improved translation": "x", "errors": {"critical": [], "major": [{"class": "accuracy"}], '
    '"minor": ["a", "b"]}}',
    '{"improved translation": "say "hi"", "errors": {"minor": ["a"]}}',
    '{"improved translation": "a"b", "errors": {"major": [{"class": accuracy}, {"class": x}], '
    '"minor": [{class: y}]}}',
    '{"improved translation": "x", "errors": {"major": "ab", "minor": {"k": 1}}}',
    '{"improved translation": "x", "errors": {"major": 3}}',
    '{"improved translation": "x", "errors": ["critical"]}',
    '{"improved translation": "x", "errors": []}',
    '{"improved translation" x", "errors": [}',
]


def mqm_parsed(gemba, answer):
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # its notes on lines without a level
            raw = gemba.parse_mqm_answer(answer, normalize=False)
            norm, classes = gemba.parse_mqm_answer(answer, list_mqm_errors=True)
    except Exception as e:  # GEMBA's parser raises: Blindspot reports an error
        return {"answer": answer, "error": type(e).__name__}
    return {"answer": answer, "penalty": raw, "normalized": norm,
            "counts": [len(classes.get(k, [])) for k in ("critical", "major", "minor")]}


def alpaca_messages(instruction, output_1, output_2):
    """alpaca_eval's make_prompts (each placeholder's first occurrence, in the
    template's order) then prompt_to_chatml (messages, role and content stripped)."""
    prompt = (ROOT / "src/metrics/prompts/alpaca_eval/alpaca_eval_clf.txt").read_text(encoding="utf-8")
    for key, value in [("{instruction}", instruction), ("{output_1}", output_1),
                       ("{output_2}", output_2)]:
        prompt = prompt.replace(key, value, 1)
    messages = []
    for block in prompt.strip().split("<|im_start|>")[1:]:
        role, rest = block.split("\n", 1)
        messages.append({"role": role.strip(), "content": rest.split("<|im_end|>", 1)[0].strip()})
    return messages


def first_preferred(model, tok, messages):
    """The weighted judge's logprob_parser (is_binarize false): p(m) / (p(m) + p(M))."""
    ids = tok.apply_chat_template(messages, tokenize=True, add_generation_prompt=True)
    with torch.no_grad():
        lp = torch.log_softmax(model(input_ids=torch.tensor([ids])).logits[0, -1].double(), -1)
    m, big = (tok(t, add_special_tokens=False)["input_ids"] for t in ("m", "M"))
    assert len(m) == 1 and len(big) == 1
    return len(ids), float(torch.exp(lp[m[0]] - torch.logsumexp(lp[[m[0], big[0]]], 0)))


def main():
    rows = [json.loads(line) for line in (ROOT / "tests/data/summeval.jsonl").open(encoding="utf-8")]
    golden = {"_about": "transformers %s, torch %s, fp32 CPU; scripts/judge_golden.py"
                        % (tf.__version__, torch.__version__), "items": ITEMS, "g-eval": []}
    for name in ["llama", "qwen2", "qwen3"]:
        model, tok = load(name)
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
    wmt = [json.loads(line) for line in (ROOT / "tests/data/wmt21_de_en.jsonl").open(encoding="utf-8")]
    golden["gemba-da"] = []
    for name in ["qwen2", "qwen3"]:
        model, tok = load(name)
        for line, system in WMT:
            row = wmt[line]
            for which, template in [("source", GEMBA_DA), ("reference", GEMBA_DA_REF)]:
                prompt = template.format(source_lang="German", target_lang="English",
                                         source_seg=row["src"], target_seg=row["systems"][system],
                                         reference_seg=row["ref_a"])
                golden["gemba-da"].append({"model": name, "line": line, "system": system,
                                           "prompt": which, **gemba_greedy(model, tok, prompt)})
    gemba = gemba_mqm_utils()
    committed = json.loads((ROOT / "src/metrics/prompts/gemba/mqm.json").read_text(encoding="utf-8"))
    assert committed == gemba.TEMPLATE_GEMBA_MQM, "mqm.json differs from gemba's template"
    golden["gemba-mqm-parse"] = [mqm_parsed(gemba, a) for a in MQM_ANSWERS]
    golden["gemba-mqm"] = []
    for name in ["llama", "qwen2", "qwen3"]:
        model, tok = load(name)
        for line, system in WMT:
            row = wmt[line]
            messages = gemba.apply_template(gemba.TEMPLATE_GEMBA_MQM, {
                "source_lang": "German", "target_lang": "English",
                "source_seg": row["src"], "target_seg": row["systems"][system]})
            ids = tok.apply_chat_template(messages, tokenize=True, add_generation_prompt=True)
            with torch.no_grad():
                out = model.generate(torch.tensor([ids]), do_sample=False, max_new_tokens=500,
                                     pad_token_id=tok.pad_token_id or tok.eos_token_id)
            new = out[0, len(ids):].tolist()
            eos = model.config.eos_token_id
            eos = eos if isinstance(eos, list) else [eos]
            answer = tok.decode(new, skip_special_tokens=True).strip()
            golden["gemba-mqm"].append({"model": name, "line": line, "system": system,
                                        "tokens": len(ids), "new_tokens": len(new),
                                        "ended": bool(new) and new[-1] in eos,
                                        **mqm_parsed(gemba, answer)})
    golden["custom"] = []
    custom = ("Rate how well the candidate text conveys the meaning of the reference text, on a "
              "scale from 1 (not at all) to 5 (completely).\n\nReference: {reference}\n"
              "Candidate: {hypothesis}\n\nAnswer with a single number from 1 to 5.")
    for name in ["llama", "qwen2"]:
        model, tok = load(name)
        for line, system in WMT:
            row = wmt[line]
            text = custom.replace("{reference}", row["ref_a"]).replace(
                "{hypothesis}", row["systems"][system])
            ids = tok.apply_chat_template([{"role": "user", "content": text}], tokenize=True,
                                          add_generation_prompt=True)
            with torch.no_grad():
                out = model.generate(torch.tensor([ids]), do_sample=False, max_new_tokens=16,
                                     pad_token_id=tok.pad_token_id or tok.eos_token_id)
            answer = tok.decode(out[0, len(ids):].tolist(), skip_special_tokens=True)
            found = re.search(r"(-?\d+(?:\.\d+)?)", answer)
            golden["custom"].append({
                "model": name, "line": line, "system": system, "tokens": len(ids),
                "weighted_1_5": weighted(model, tok, ids, 5),
                "weighted_0_9": weighted(model, tok, ids, 9, low=0),
                "answer": answer, "number": float(found.group(1)) if found else None})
    golden["pairwise"] = []
    for name in ["llama", "qwen2", "qwen3"]:
        model, tok = load(name)
        for line, system in WMT:
            row = wmt[line]
            hyp, ref = row["systems"][system], row["ref_a"]
            n1, first = first_preferred(model, tok, alpaca_messages(row["src"], hyp, ref))
            n2, second = first_preferred(model, tok, alpaca_messages(row["src"], ref, hyp))
            golden["pairwise"].append({"model": name, "line": line, "system": system,
                                       "tokens": [n1, n2], "hyp_first": first,
                                       "hyp_second": 1 - second,
                                       "value": (first + 1 - second) / 2})
    (ROOT / "tests/golden/judge_parity.json").write_text(json.dumps(golden, indent=1))


if __name__ == "__main__":
    main()
