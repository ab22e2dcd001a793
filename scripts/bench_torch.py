#!/usr/bin/env python3
"""PyTorch reference timings for benches/plm.rs: all-MiniLM-L6-v2 forward
passes (fp32, CPU, all cores) on the same WMT21 sentences and batches
(batch 1: the first sentence; batch 32: the first 32, padded to the longest),
and bert-score 0.3.13 on the same 64 (first system, ref_a) pairs, layer 6.

    ~/.cache/blindspot-py/bin/python scripts/bench_torch.py
"""
import importlib.metadata
import json
import os
import pathlib
import statistics
import time

import torch
import transformers as tf

ROOT = pathlib.Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "wmt21_de_en.jsonl"


def main():
    torch.set_num_threads(os.cpu_count())
    texts = [json.loads(l)["ref_a"] for l in DATA.read_text(encoding="utf-8").splitlines()[:32]]
    model = tf.BertModel.from_pretrained(ROOT / "models" / "all-MiniLM-L6-v2").eval()
    tok = tf.AutoTokenizer.from_pretrained(ROOT / "models" / "all-MiniLM-L6-v2")
    for batch in (1, 32):
        enc = tok(texts[:batch], padding=True, truncation=True, max_length=128, return_tensors="pt")
        times = []
        with torch.inference_mode():
            for _ in range(3):
                model(**enc, output_hidden_states=True)
            for _ in range(10):
                start = time.perf_counter()
                model(**enc, output_hidden_states=True)
                times.append(time.perf_counter() - start)
        print(f"minilm_forward/torch_batch{batch}: median {statistics.median(times) * 1e3:.2f} ms "
              f"(torch {torch.__version__}, {torch.get_num_threads()} threads)")

    rows = [json.loads(l) for l in DATA.read_text(encoding="utf-8").splitlines()[:64]]
    cands = [r["systems"][min(r["systems"])] for r in rows]
    refs = [r["ref_a"] for r in rows]
    import bert_score
    model = str(ROOT / "models" / "all-MiniLM-L6-v2")
    scorer = bert_score.BERTScorer(model_type=model, num_layers=6, batch_size=32, device="cpu")
    scorer.score(cands, refs)  # warm-up
    times = []
    for _ in range(5):
        start = time.perf_counter()
        scorer.score(cands, refs)
        times.append(time.perf_counter() - start)
    t = statistics.median(times)
    print(f"bertscore/bert_score_64_pairs: median {t * 1e3:.1f} ms = {64 / t:.1f} pairs/s "
          f"(bert-score {importlib.metadata.version('bert-score')}, model loaded once)")


if __name__ == "__main__":
    main()
