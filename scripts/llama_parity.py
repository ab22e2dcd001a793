#!/usr/bin/env python3
"""Tiny random decoder LLMs and the golden values that hold Blindspot's
Llama-family module (src/models/llama.rs) to transformers.

Writes, all committed (small):

- in each model's folder, tokenizer.json: a byte-level BPE of 700 tokens
  trained here on tests/data/wikitext_a.txt, with the special tokens of
  both chat formats (Llama 3's `<|begin_of_text|>`, `<|start_header_id|>`,
  `<|end_header_id|>`, `<|eot_id|>`; ChatML's `<|im_start|>`, `<|im_end|>`,
  `<|endoftext|>`); the Llama one with a post-processor that puts
  `<|begin_of_text|>` first, as Llama 3's tokenizer.json does.
- tests/fixtures/llm/llama/: LlamaForCausalLM with grouped-query attention
  (4 query heads, 2 key/value heads), a head width (16) other than
  hidden / heads (8), Llama 3's RoPE frequency scaling (factor 8, low and
  high frequency factors 1 and 4, original context 64, so the head's
  frequencies fall in all three of its bands), an untied head.
- tests/fixtures/llm/qwen2/: Qwen2ForCausalLM (Qwen2.5's architecture:
  biases on the query, key and value projections, rope_theta 1e6), the
  head tied to the embeddings.
- tests/fixtures/llm/qwen3/: Qwen3ForCausalLM (RMS norms on each head's
  query and key before RoPE, head width 16, no biases), tied.
- in each model's folder, tokenizer_config.json with its family's chat
  template from tests/fixtures/chat/ (SmolLM2's for the Llama one, a Llama
  model whose template prints no date) and ChatML's `<|im_end|>` as the end
  token.
- tests/golden/llm_parity.json, per model: the hidden states of every
  layer (the last after the final norm, as transformers returns them) and
  a spread of logit columns for a right-padded batch of two texts; greedy
  and 3-beam generations of 12 new tokens from two prompts.

Every weight is redrawn (norm weights near 1, the rest N(0, 0.3^2)) so each
part matters and the logits spread.

Usage (venv outside the repo):
    ~/.cache/blindspot-py/bin/python scripts/llama_parity.py
"""
import json
import pathlib
import shutil

import torch
import transformers as tf
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "llm"
GOLDEN = ROOT / "tests" / "golden"
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|begin_of_text|>",
           "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]
TEXTS = ["The committee approved the new budget after a long debate on Tuesday.",
         "Berlin is the capital of Germany."]
PROMPTS = ["The river flows", "In 1998 the team"]


def train_tokenizer():
    lines = (ROOT / "tests/data/wikitext_a.txt").read_text(encoding="utf-8").splitlines()[:3000]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=700, special_tokens=SPECIAL, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(lines, trainer)
    return tok


def draw(model, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(1 + 0.2 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.3 * torch.randn(p.shape, generator=g))
    return model


def configs(vocab, ids):
    common = dict(vocab_size=vocab, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                  rms_norm_eps=1e-6, bos_token_id=None, pad_token_id=ids["<|endoftext|>"])
    return {
        "llama": tf.LlamaForCausalLM(tf.LlamaConfig(
            **common, head_dim=16, rope_theta=10000.0, tie_word_embeddings=False,
            eos_token_id=[ids["<|im_end|>"], ids["<|eot_id|>"]],
            rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                          "high_freq_factor": 4.0, "original_max_position_embeddings": 64})),
        "qwen2": tf.Qwen2ForCausalLM(tf.Qwen2Config(
            **common, rope_theta=1000000.0, tie_word_embeddings=True,
            eos_token_id=ids["<|im_end|>"])),
        "qwen3": tf.Qwen3ForCausalLM(tf.Qwen3Config(
            **common, head_dim=16, rope_theta=1000000.0, tie_word_embeddings=True,
            eos_token_id=ids["<|im_end|>"])),
    }


def hidden_and_logits(model, tok, pad):
    batch = [tok.encode(t).ids for t in TEXTS]
    n = max(map(len, batch))
    ids = torch.tensor([s + [pad] * (n - len(s)) for s in batch])
    mask = torch.tensor([[1] * len(s) + [0] * (n - len(s)) for s in batch])
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=mask, output_hidden_states=True)
    cols = list(range(0, model.config.vocab_size, 23))
    return {
        "ids": batch,
        "hidden_states": [[h[i, : len(s)].tolist() for i, s in enumerate(batch)]
                          for h in out.hidden_states],
        "logit_columns": cols,
        "logits": [out.logits[i, : len(s)][:, cols].tolist() for i, s in enumerate(batch)],
    }


def generations(model, tok, pad):
    out = []
    for p in PROMPTS:
        ids = torch.tensor([tok.encode(p).ids])
        common = dict(do_sample=False, max_new_tokens=12, min_length=0, no_repeat_ngram_size=0,
                      pad_token_id=pad)
        with torch.no_grad():
            greedy = model.generate(ids, num_beams=1, **common)
            beam = model.generate(ids, num_beams=3, length_penalty=1.0, early_stopping=False,
                                  num_return_sequences=3, output_scores=True,
                                  return_dict_in_generate=True, **common)
        out.append({"input": ids[0].tolist(), "greedy": greedy[0].tolist(),
                    "beam3": [{"tokens": t.tolist(), "score": float(s)}
                              for t, s in zip(beam.sequences, beam.sequences_scores)]})
    return out


def main():
    tok = train_tokenizer()
    OUT.mkdir(parents=True, exist_ok=True)
    ids = {s: tok.token_to_id(s) for s in SPECIAL}
    golden = {"_about": "transformers %s, torch %s, fp32 CPU; scripts/llama_parity.py"
                        % (tf.__version__, torch.__version__)}
    for seed, (name, model) in enumerate(configs(tok.get_vocab_size(), ids).items()):
        model = draw(model, seed).eval()
        folder = OUT / name
        if folder.exists():
            shutil.rmtree(folder)
        model.save_pretrained(folder, safe_serialization=True)
        model_tok = Tokenizer.from_str(tok.to_str())
        if name == "llama":
            bos = ids["<|begin_of_text|>"]
            model_tok.post_processor = processors.TemplateProcessing(
                single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A <|begin_of_text|> $B",
                special_tokens=[("<|begin_of_text|>", bos)])
        model_tok.save(str(folder / "tokenizer.json"))
        # The chat template of the family (SmolLM2's for the Llama one: a Llama
        # model whose template prints no date), with its special tokens.
        template = {"llama": "smollm2", "qwen2": "qwen2.5", "qwen3": "qwen3"}[name]
        eos = "<|im_end|>"
        (folder / "tokenizer_config.json").write_text(json.dumps({
            "chat_template": (ROOT / "tests/fixtures/chat" / f"{template}.jinja").read_text(
                encoding="utf-8"),
            "bos_token": None, "eos_token": eos, "pad_token": "<|endoftext|>",
        }, indent=1, ensure_ascii=False), encoding="utf-8")
        # generation_config.json is transformers' copy of config.json's settings.
        (folder / "generation_config.json").unlink(missing_ok=True)
        pad = ids["<|endoftext|>"]
        golden[name] = {**hidden_and_logits(model, model_tok, pad),
                        "generate": generations(model, model_tok, pad)}
    (GOLDEN / "llm_parity.json").write_text(json.dumps(golden))


if __name__ == "__main__":
    main()
