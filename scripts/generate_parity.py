#!/usr/bin/env python3
"""Golden generations that hold Blindspot's decoding (src/models/generate.rs)
to transformers' `generate` on the tiny random GPT-2
(tests/fixtures/plm/gpt2) and BART (tests/fixtures/bart/tiny); T5's are in
scripts/t5_parity.py.

Writes tests/golden/generate_parity.json: per model and input (token ids,
so no tokenizer is needed here), greedy and 3-beam search generations of
12 new tokens (transformers' defaults otherwise: no minimum length, no
repeated-n-gram ban, length penalty 1, early_stopping False), every
returned beam with its score (two beams can tie in f32 on a random
checkpoint, and which comes first is then sort order). `constrained`:
the same with `no_repeat_ngram_size=2` and `min_new_tokens=10`, greedy
and 3-beam, and the tiny BART with `forced_bos_token_id=0` (a forced
first token counts as a new one).

Seeded sampling is not here: transformers draws from torch's Mersenne
Twister, Blindspot from ChaCha8 (the same stream natively and in the
browser), so the same seed gives different texts by design.

Usage (venv outside the repo):
    ~/.cache/blindspot-py/bin/python scripts/generate_parity.py
"""
import json
import pathlib

import torch
import transformers as tf

ROOT = pathlib.Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden"

# GPT-2 prompts: ids of "The minister said that", "Berlin is" and a longer
# one under GPT-2's real vocabulary (the tiny model's table has all 50257).
GPT2_INPUTS = [[464, 5342, 531, 326], [24814, 318], [464, 5583, 3066, 262, 649, 4466, 706, 257, 890, 4384]]
# BART sources: ids under the tiny BART's own 1000-entry vocabulary, <s> .. </s>.
BART_INPUTS = [[0, 17, 250, 31, 99, 412, 8, 2], [0, 640, 12, 77, 5, 2]]


def generations(model, inputs, **extra):
    out = []
    for ids in inputs:
        x = torch.tensor([ids])
        with torch.no_grad():
            greedy = model.generate(x, do_sample=False, num_beams=1, max_new_tokens=12,
                                    min_length=0, no_repeat_ngram_size=0, **extra)
            beam = model.generate(x, do_sample=False, num_beams=3, max_new_tokens=12,
                                  min_length=0, no_repeat_ngram_size=0, length_penalty=1.0,
                                  early_stopping=False, num_return_sequences=3,
                                  output_scores=True, return_dict_in_generate=True, **extra)
        out.append({"input": ids, "greedy": greedy[0].tolist(),
                    "beam3": [{"tokens": t.tolist(), "score": float(s)}
                              for t, s in zip(beam.sequences, beam.sequences_scores)]})
    return out


def constrained(model, inputs, **extra):
    out = []
    for ids in inputs:
        x = torch.tensor([ids])
        common = dict(do_sample=False, max_new_tokens=12, min_new_tokens=10, no_repeat_ngram_size=2,
                      **extra)
        with torch.no_grad():
            greedy = model.generate(x, num_beams=1, **common)
            beam = model.generate(x, num_beams=3, length_penalty=1.0, early_stopping=False,
                                  num_return_sequences=3, output_scores=True,
                                  return_dict_in_generate=True, **common)
        out.append({"input": ids, "greedy": greedy[0].tolist(),
                    "beam3": [{"tokens": t.tolist(), "score": float(s)}
                              for t, s in zip(beam.sequences, beam.sequences_scores)]})
    return out


def main():
    gpt2 = tf.GPT2LMHeadModel.from_pretrained(ROOT / "tests/fixtures/plm/gpt2",
                                              dtype=torch.float32).eval()
    bart = tf.BartForConditionalGeneration.from_pretrained(ROOT / "tests/fixtures/bart/tiny",
                                                           dtype=torch.float32).eval()
    golden = {
        "_about": "transformers %s, torch %s, fp32 CPU; scripts/generate_parity.py"
                  % (tf.__version__, torch.__version__),
        # GPT-2 has no padding token: transformers pads with eos, as here.
        "gpt2": generations(gpt2, GPT2_INPUTS, pad_token_id=50256),
        # The tiny BART's config names no forced BOS: decoding starts from </s> alone.
        "bart": generations(bart, BART_INPUTS),
        "constrained": {
            "gpt2": constrained(gpt2, GPT2_INPUTS, pad_token_id=50256),
            "bart": constrained(bart, BART_INPUTS),
            "bart_forced_bos": constrained(bart, BART_INPUTS, forced_bos_token_id=0),
        },
    }
    (GOLDEN / "generate_parity.json").write_text(json.dumps(golden, indent=1))


if __name__ == "__main__":
    main()
