#!/usr/bin/env python3
"""A BERTScore rescaling baseline for all-MiniLM-L6-v2, which bert_score does
not publish, computed the way bert_score computes its own: the mean P, R and F
of randomly paired, unrelated English news sentences, for every layer (0 = the
embeddings), with bert-score 0.3.13 itself.

Sentences: the English references (ref_a and ref_b) of tests/data's
WMT21 de-en file with fewer than 32 words (bert_score used WMT news crawl 2017
with the same length limit), deduplicated. Pairs: ROUNDS shuffles of the pool
(fixed seed), each paired first half against second half, so no sentence is
paired with itself. Writes tests/golden/bertscore_baseline.json; models.toml
carries the same numbers (a unit test checks they agree). The file also holds
bert_score's own rescaled scores with this baseline (handed to it as a
`baseline_path` file) on PARITY WMT21 pairs, layers 6 and 3, which
tests/bertscore.rs must reproduce.

    ~/.cache/blindspot-py/bin/python scripts/bertscore_baseline.py
"""
import importlib.metadata
import json
import pathlib
import random
import tempfile

import bert_score
import torch

ROOT = pathlib.Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "wmt21_de_en.jsonl"
MODEL = str(ROOT / "models" / "all-MiniLM-L6-v2")
OUT = ROOT / "tests" / "golden" / "bertscore_baseline.json"
ROUNDS = 10
SEED = 0
PARITY = 50


def main():
    rows = [json.loads(l) for l in DATA.read_text(encoding="utf-8").splitlines()]
    pool = sorted({s.strip() for r in rows for s in (r["ref_a"], r["ref_b"])
                   if s.strip() and len(s.split(" ")) < 32})
    rng = random.Random(SEED)
    cands, refs = [], []
    for _ in range(ROUNDS):
        shuffled = pool[:]
        rng.shuffle(shuffled)
        half = len(shuffled) // 2
        cands += shuffled[:half]
        refs += shuffled[half:2 * half]
    # all_layers: one pass scores every layer, P/R/F shaped [layers + 1, pairs].
    p, r, f = bert_score.score(cands, refs, model_type=MODEL, num_layers=6, all_layers=True,
                               batch_size=64, device="cpu")
    layers = [{"layer": layer, "prf": [float(p[layer].mean()), float(r[layer].mean()), float(f[layer].mean())]}
              for layer in range(p.shape[0])]
    # bert_score's own rescaling with this baseline (its CSV layout: LAYER,P,R,F).
    parity_rows = rows[:PARITY]
    system = sorted(parity_rows[0]["systems"])[0]
    hyps = [r["systems"][system] for r in parity_rows]
    parity = []
    with tempfile.NamedTemporaryFile("w", suffix=".tsv") as tsv:
        tsv.write("LAYER,P,R,F\n" + "".join(f"{e['layer']},{e['prf'][0]},{e['prf'][1]},{e['prf'][2]}\n" for e in layers))
        tsv.flush()
        for layer in (6, 3):
            rp, rr, rf = bert_score.score(hyps, [r["ref_a"] for r in parity_rows], model_type=MODEL,
                                          num_layers=layer, lang="en", rescale_with_baseline=True,
                                          baseline_path=tsv.name, device="cpu")
            parity.append({"layer": layer, "P": rp.tolist(), "R": rr.tolist(), "F": rf.tolist()})
    out = {"_about": f"bert-score {importlib.metadata.version('bert-score')}, torch {torch.__version__}, fp32 CPU; "
                     "scripts/bertscore_baseline.py",
           "model": "sentence-transformers/all-MiniLM-L6-v2", "file": DATA.name,
           "sentences": len(pool), "pairs": len(cands), "rounds": ROUNDS, "seed": SEED,
           "layers": layers,
           "parity": {"lines": list(range(1, PARITY + 1)), "system": system, "refs": "ref_a", "runs": parity}}
    OUT.write_text(json.dumps(out, separators=(",", ":")))
    for entry in layers:
        print(entry["layer"], " ".join(f"{x:.8f}" for x in entry["prf"]))


if __name__ == "__main__":
    main()
