#!/usr/bin/env python3
"""Golden BERTScore values from bert-score 0.3.13 for tests/bertscore.rs.

all-MiniLM-L6-v2 (models/, from PyPI) on 300 WMT21 de-en pairs from
tests/data: the first system's translation of each of the first 300
segments against ref_a (single reference) and against [ref_a, ref_b]
(multi-reference, bert_score takes the max of P, R and F separately), at
layers 6 and 3, idf off and on (idf over the references of the whole set, as
bert_score computes it). Pairs are named by line and system; no text copied.

    ~/.cache/blindspot-py/bin/pip install bert-score==0.3.13 torch transformers
    ~/.cache/blindspot-py/bin/python scripts/bertscore_golden.py
"""
import json
import pathlib

import bert_score
import torch

ROOT = pathlib.Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "wmt21_de_en.jsonl"
MODEL = str(ROOT / "models" / "all-MiniLM-L6-v2")
OUT = ROOT / "tests" / "golden" / "bertscore.json"
N = 300


def main():
    rows = [json.loads(l) for l in DATA.read_text(encoding="utf-8").splitlines()[:N]]
    system = sorted(rows[0]["systems"])[0]
    cands = [r["systems"][system] for r in rows]
    single = [r["ref_a"] for r in rows]
    multi = [[r["ref_a"], r["ref_b"]] for r in rows]
    out = {"_about": f"bert-score {bert_score.__version__}, torch {torch.__version__}, fp32 CPU; "
                     "scripts/bertscore_golden.py",
           "file": DATA.name, "lines": list(range(1, N + 1)), "system": system, "runs": []}
    for layer in (6, 3):
        for idf in (False, True):
            for refs, name in ((single, "ref_a"), (multi, "ref_a+ref_b")):
                p, r, f = bert_score.score(cands, refs, model_type=MODEL, num_layers=layer, idf=idf,
                                           batch_size=32, device="cpu")
                out["runs"].append({"layer": layer, "idf": idf, "refs": name,
                                    "P": p.tolist(), "R": r.tolist(), "F": f.tolist()})
                print(layer, idf, name, float(f.mean()))
    OUT.write_text(json.dumps(out, separators=(",", ":")))


if __name__ == "__main__":
    main()
