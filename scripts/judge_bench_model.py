#!/usr/bin/env python3
"""A random-weight judge of SmolLM2-135M-Instruct's shape for timing
(benches/judge.rs): LlamaForCausalLM with 30 layers of width 576, 9 query
and 3 key/value heads, a 1536-wide SwiGLU, 49152 embeddings tied to the
head, and the tiny test tokenizer with SmolLM2's chat template
(tests/fixtures/llm/llama). Random weights time like real ones.

Writes $TMPDIR/judge-bench-model (about 540 MB, f32). Usage (venv outside
the repo):
    ~/.cache/blindspot-py/bin/python scripts/judge_bench_model.py
    BLINDSPOT_JUDGE_MODEL=$TMPDIR/judge-bench-model cargo bench --bench judge
"""
import os
import pathlib
import shutil
import tempfile

import torch
import transformers as tf

ROOT = pathlib.Path(__file__).resolve().parent.parent


def main():
    out = pathlib.Path(os.environ.get("TMPDIR", tempfile.gettempdir())) / "judge-bench-model"
    torch.manual_seed(0)
    config = tf.LlamaConfig(vocab_size=49152, hidden_size=576, intermediate_size=1536,
                            num_hidden_layers=30, num_attention_heads=9, num_key_value_heads=3,
                            max_position_embeddings=8192, rms_norm_eps=1e-5, rope_theta=100000.0,
                            tie_word_embeddings=True, bos_token_id=None, eos_token_id=2,
                            pad_token_id=0)
    tf.LlamaForCausalLM(config).save_pretrained(out, safe_serialization=True)
    for name in ["tokenizer.json", "tokenizer_config.json"]:
        shutil.copy(ROOT / "tests/fixtures/llm/llama" / name, out / name)
    print(out)


if __name__ == "__main__":
    main()
