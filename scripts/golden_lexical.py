#!/usr/bin/env python3
"""Writes tests/golden/lexical.json: reference values for the lexical metrics.

Runs sacrebleu 2.6.0 and rouge-score 0.1.2 (NLTK Porter stemmer) over real
pairs from tests/data. Dataset text is not copied into the golden file:
each case names its file, line and fields, and the Rust test rebuilds the same
pair from tests/data. A few hand-written edge cases are stored inline.

Usage (a venv outside the repo, see docs/testing.md):
    ~/.cache/blindspot-py/bin/pip install sacrebleu==2.6.0 rouge-score==0.1.2
    ~/.cache/blindspot-py/bin/python scripts/golden_lexical.py
"""
import csv
import json
import pathlib
import re

import nltk
import rouge_score
import sacrebleu
from nltk.stem.porter import PorterStemmer
from rouge_score import rouge_scorer
from sacrebleu.metrics import BLEU, CHRF

ROOT = pathlib.Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
OUT = ROOT / "tests" / "golden" / "lexical.json"


def drop_every(text, period, offset, chars=False):
    """The deterministic perturbation used for non-English pairs (mirrored in Rust)."""
    units = list(text) if chars else text.split()
    kept = [u for i, u in enumerate(units) if i % period != offset]
    return "".join(kept) if chars else " ".join(kept)


def field(row, path):
    for part in path.split("/"):
        row = row[part]
    return row


def load_cases():
    cases = []
    wmt = [json.loads(l) for l in open(DATA / "wmt21_de_en.jsonl", encoding="utf-8")]
    for i, row in enumerate(wmt[:300]):
        system = sorted(row["systems"])[i % len(row["systems"])]
        refs = ["ref_a"] if i % 2 == 0 else ["ref_a", "ref_b"]
        cases.append({"file": "wmt21_de_en.jsonl", "line": i, "hyp": f"systems/{system}", "refs": refs})
    menli = list(csv.DictReader(open(DATA / "menli_wmt20_de.csv", encoding="utf-8")))
    for i in range(0, len(menli), 16):
        for hyp in ("hyp_para", "hyp_adv_based"):
            cases.append({"file": "menli_wmt20_de.csv", "line": i, "hyp": hyp, "refs": ["ref"]})
    # Non-ASCII: German sources and Chinese paragraphs against a perturbed copy.
    for i in range(0, 50):
        cases.append({"file": "wmt21_de_en.jsonl", "line": 300 + i, "hyp": "src", "refs": ["src"],
                      "transform": {"period": 5, "offset": 2, "chars": False}})
    for i in range(0, 30):
        cases.append({"file": "ted_mt_zh_en.jsonl", "line": i, "hyp": "src", "refs": ["src"],
                      "transform": {"period": 7, "offset": 3, "chars": True}})
    rows = {
        "wmt21_de_en.jsonl": wmt,
        "menli_wmt20_de.csv": menli,
        "ted_mt_zh_en.jsonl": [json.loads(l) for l in open(DATA / "ted_mt_zh_en.jsonl", encoding="utf-8")],
    }
    for case in cases:
        row = rows[case["file"]][case["line"]]
        hyp = field(row, case["hyp"])
        if "transform" in case:
            t = case["transform"]
            hyp = drop_every(hyp, t["period"], t["offset"], t["chars"])
        case["_hyp"], case["_refs"] = hyp, [field(row, r) for r in case["refs"]]
    # Hand-written edge cases (inline text).
    edge = [
        ("", ["The cat sat on the mat."]),
        ("   ", ["A reference."]),
        ("The cat sat on the mat.", [""]),
        ("a b", ["a b"]),
        ("It costs $3.50-4.00, i.e. 1,000 cents.", ["It cost $3.50 - 4.00, that is 1,000 cents!"]),
        ("Tom &amp; Jerry &lt;3 &quot;cartoons&quot;", ["Tom & Jerry <3 \"cartoons\""]),
        ("Line one-\ntwo\nthree <skipped> four", ["Line onetwo three four"]),
        ("sep\u001cchars\u001f\u00a0here", ["sep chars here"]),
        ("Running runners ran; generously relational dying skies.", ["The runner runs generously, relations die under the sky."]),
        ("Ça coûte 5 € — naïve façade?", ["Ça coûte cinq euros : façade naïve !"]),
        ("The the the the the.", ["The cat.", "A the the dog."]),
    ]
    for hyp, refs in edge:
        cases.append({"inline": True, "_hyp": hyp, "_refs": refs})
    return cases


def main():
    cases = load_cases()
    sent_bleu, sent_chrf = BLEU(effective_order=True), CHRF()
    plain = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=False)
    stem = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)
    out_cases = []
    for case in cases:
        hyp, refs = case.pop("_hyp"), case.pop("_refs")
        if case.get("inline"):
            case = {"hyp_text": hyp, "ref_texts": refs}
        b = sent_bleu.sentence_score(hyp, refs)
        expected = {
            "bleu": b.score,
            "bleu_precisions": b.precisions,
            "bleu_bp": b.bp,
            "chrf": sent_chrf.sentence_score(hyp, refs).score,
        }
        for name, scorer in (("plain", plain), ("stem", stem)):
            scores = scorer.score_multi(refs, hyp)
            for key, s in scores.items():
                expected[f"{key}_{name}"] = [s.precision, s.recall, s.fmeasure]
        case["expected"] = expected
        out_cases.append((case, hyp, refs))

    # Corpus scores over the WMT block (mixed one/two references per segment).
    wmt = [(h, r) for c, h, r in out_cases if c.get("file") == "wmt21_de_en.jsonl" and "transform" not in c]
    hyps = [h for h, _ in wmt]
    streams = [[r[0] for _, r in wmt], [r[1] if len(r) > 1 else None for _, r in wmt]]
    corpus_bleu, corpus_chrf = BLEU(), CHRF()
    corpus = {
        "case_range": [0, len(wmt)],
        "bleu": corpus_bleu.corpus_score(hyps, streams).score,
        "bleu_signature": str(corpus_bleu.get_signature()),
        "chrf": corpus_chrf.corpus_score(hyps, streams).score,
        "chrf_signature": str(corpus_chrf.get_signature()),
    }

    # Stemmer vocabulary: every distinct rouge token longer than 3 chars.
    stemmer = PorterStemmer()
    vocab = set()
    for _, h, refs in out_cases:
        for text in [h] + refs:
            vocab.update(t for t in re.split(r"[^a-z0-9]+", text.lower()) if len(t) > 3)
    stems = {w: stemmer.stem(w) for w in sorted(vocab)}

    golden = {
        "generator": "scripts/golden_lexical.py",
        "versions": {"sacrebleu": sacrebleu.__version__, "rouge_score": "0.1.2", "nltk": nltk.__version__},
        "tolerance": 1e-6,
        "cases": [c for c, _, _ in out_cases],
        "corpus": corpus,
        "porter_stems": stems,
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    # One case per line keeps the file small and its diffs readable.
    compact = lambda v: json.dumps(v, ensure_ascii=False, separators=(",", ":"))
    lines = ["{"]
    for key, value in golden.items():
        if key == "cases":
            lines.append('"cases":[')
            lines.append(",\n".join(compact(c) for c in value))
            lines.append("],")
        else:
            lines.append(f"{compact(key)}:{compact(value)},")
    lines[-1] = lines[-1].rstrip(",")
    lines.append("}")
    OUT.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {OUT} with {len(out_cases)} cases and {len(stems)} stems")


if __name__ == "__main__":
    main()
