#!/usr/bin/env python3
"""Times the reference implementations on the pairs `benches/lexical.rs` uses.

Prints microseconds per sentence-level score for sacrebleu 2.6.0 (BLEU, chrF)
and rouge-score 0.1.2, so `make bench` figures can be reported as ratios
measured in the same session.

    ~/.cache/blindspot-py/bin/python scripts/bench_reference.py
"""
import json
import pathlib
import timeit

from rouge_score import rouge_scorer
from sacrebleu.metrics import BLEU, CHRF

DATA = pathlib.Path(__file__).resolve().parent.parent / "tests" / "data" / "wmt21_de_en.jsonl"
pairs = [(r["ref_a"], r["ref_b"]) for r in map(json.loads, DATA.open(encoding="utf-8"))][:200]

bleu, chrf = BLEU(effective_order=True), CHRF()
scorers = {k: rouge_scorer.RougeScorer([k]) for k in ("rouge1", "rouge2", "rougeL")}
jobs = {
    "bleu": lambda: [bleu.sentence_score(h, [r]) for h, r in pairs],
    "chrf": lambda: [chrf.sentence_score(h, [r]) for h, r in pairs],
    **{k: (lambda s=s: [s.score(r, h) for h, r in pairs]) for k, s in scorers.items()},
}
for name, job in jobs.items():
    seconds = min(timeit.repeat(job, number=3, repeat=3)) / 3
    print(f"{name}\t{seconds / len(pairs) * 1e6:.1f} us/pair")
