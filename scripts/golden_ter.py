#!/usr/bin/env python3
"""Writes tests/golden/ter.json: sacrebleu 2.6.0's TER on real pairs.

The same pairs as scripts/golden_lexical.py (WMT21 de-en systems against one
or two references, the MENLI paraphrases and adversarial texts, German
sources and Chinese paragraphs against perturbed copies), plus hand-written
cases for shifts, case, punctuation, XML entities and CJK text, each under
sacrebleu `TER()`'s default options and the other option sets. Dataset text
is not copied: each case names its file, line and fields, as in lexical.json.

Usage (a venv outside the repo, see docs/testing.md):
    ~/.cache/blindspot-py/bin/pip install sacrebleu==2.6.0
    ~/.cache/blindspot-py/bin/python scripts/golden_ter.py
"""
import json
import pathlib
import sys

import sacrebleu
from sacrebleu.metrics import TER

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from golden_lexical import load_cases  # noqa: E402  (the same pairs)

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "golden" / "ter.json"

# Option sets: sacrebleu's defaults first, then each option on its own and
# the CJK combinations.
OPTIONS = {
    "default": {},
    "normalized": {"normalized": True},
    "no_punct": {"no_punct": True},
    "case_sensitive": {"case_sensitive": True},
    "asian": {"normalized": True, "asian_support": True},
    "asian_no_punct": {"no_punct": True, "asian_support": True},
}

EDGE = [
    ("on the mat the cat sat", ["the cat sat on the mat"]),
    ("the cat sat on the mat", ["the cat sat on the mat"]),
    ("The Cat Sat", ["the cat sat"]),
    ("", ["The cat sat on the mat."]),
    ("A hypothesis.", [""]),
    ("", [""]),
    ("It's 3.50-4.00, i.e. 1,000 cents.", ["It cost $3.50 - 4.00, that is 1,000 cents!"]),
    ("Tom &amp; Jerry &lt;3 &quot;cartoons&quot;", ['Tom & Jerry <3 "cartoons"']),
    ("line one\n-continued\nline two", ["line one continued line two"]),
    ("猫が座った。", ["猫は座っています。"]),
    ("ひらがなだけ", ["ひらがなだけです"]),
    ("（全角）テスト，です！", ["全角テストです"]),
    ("one two three four five six seven eight nine ten eleven twelve",
     ["seven eight nine ten eleven twelve one two three four five six"]),
    ("a b c d e f g h i j k l m n o p q r s t u v w x y z " * 3,
     ["z y x w v u t s r q p o n m l k j i h g f e d c b a " * 3]),
    ("short", ["a much longer reference than the hypothesis it is compared with here"]),
    ("a much longer hypothesis than the reference it is compared with here", ["short"]),
    ("the same words", ["the same words", "different words entirely"]),
]


def main():
    cases = load_cases()
    out_cases = []
    for case in cases:
        hyp, refs = case["_hyp"], case["_refs"]
        if case.get("inline"):
            entry = {"hyp_text": hyp, "ref_texts": refs}
        else:
            entry = {k: v for k, v in case.items() if not k.startswith("_")}
        entry["expected"] = score_all(hyp, refs)
        out_cases.append(entry)
    for hyp, refs in EDGE:
        out_cases.append({"hyp_text": hyp, "ref_texts": refs, "expected": score_all(hyp, refs)})
    # Corpus TER over the WMT block (one or two references per segment).
    wmt = [c for c in cases if c.get("file") == "wmt21_de_en.jsonl" and "transform" not in c]
    streams = [[c["_refs"][0] for c in wmt], [c["_refs"][1] if len(c["_refs"]) > 1 else None for c in wmt]]
    corpus_ter = TER()
    corpus = {
        "case_range": [0, len(wmt)],
        "ter": corpus_ter.corpus_score([c["_hyp"] for c in wmt], streams).score,
        "signature": str(corpus_ter.get_signature()),
    }
    golden = {
        "generator": "scripts/golden_ter.py",
        "versions": {"sacrebleu": sacrebleu.__version__},
        "tolerance": 1e-9,
        "options": OPTIONS,
        "corpus": corpus,
        "cases": out_cases,
    }
    OUT.write_text(json.dumps(golden, ensure_ascii=False, separators=(",", ":")) + "\n", encoding="utf-8")
    print(f"wrote {len(out_cases)} cases to {OUT}")


def score_all(hyp, refs):
    """Per option set: TER, its edits and mean reference length."""
    out = {}
    for name, options in OPTIONS.items():
        s = TER(**options).sentence_score(hyp, refs)
        out[name] = [s.score, s.num_edits, s.ref_length]
    return out


if __name__ == "__main__":
    main()
