#!/usr/bin/env python3
"""Golden values that hold Blindspot's COMET (src/models/comet.rs,
src/metrics/comet.rs) to unbabel-comet 2.2.

Writes, all committed (small):

- tests/fixtures/comet/<name>/: tiny random-weight COMET checkpoints in the
  layout of their hub repositories (hparams.yaml, checkpoints/model.ckpt, a
  PyTorch Lightning-style checkpoint with `state_dict` and
  `hyper_parameters`) with the encoder's config.json and tokenizer.json
  beside them, as `blindspot --model comet=DIR` reads them:
    comet-da   regression_metric on a tiny XLM-R, sparsemax mix, no layer
               norm, avg pooling (wmt22-comet-da's settings);
    comet-qe   referenceless_regression_metric on a tiny XLM-R, softmax mix
               with layer norm, sigmoid on the score (wmt20-comet-qe-da's kind);
    cometinho  regression_metric on a tiny BERT-architecture MiniLM read with
               an XLM-R tokenizer (eamt22-cometinho-da's kind);
    comet-l1max  regression_metric reading one layer (1) with max pooling.
  The tokenizer is a small SentencePiece-style Unigram trained here on
  tests/data (the real XLM-R tokenizer needs the hub); the encoders cut
  at 62 and 60 tokens, so long sources exercise COMET's truncation.
- tests/golden/comet.json: for each checkpoint, COMET's own segment scores
  (`load_from_checkpoint(...).predict(..., gpus=0)`) on 70 pairs from
  tests/data (German-English WMT21 and Chinese-English TED; 10 with
  the reference or source of another line), named by
  file, line and field; no dataset text is copied.

Usage (venv outside the repo):
    ~/.cache/blindspot-py/bin/pip install "unbabel-comet>=2.2.7,<2.3" "torch>=2.2" "setuptools<81"
    ~/.cache/blindspot-py/bin/python scripts/comet_parity.py
"""
import hashlib
import json
import pathlib
import shutil

import torch
import yaml
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
import transformers as tf

import comet
import comet.encoders.minilm as comet_minilm
from comet.models import ReferencelessRegression, RegressionMetric

ROOT = pathlib.Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
FIXTURES = ROOT / "tests" / "fixtures" / "comet"
GOLDEN = ROOT / "tests" / "golden" / "comet.json"
SPECIALS = ["<s>", "<pad>", "</s>", "<unk>"]


def rows(file):
    with open(DATA / file, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def pairs():
    """70 (src, mt, ref) pairs with where they come from: 40 WMT21 de-en
    (a system output against ref_a; 10 of them long documents made of
    consecutive lines) and 20 TED zh-en documents (ref_b against ref_a)."""
    wmt = rows("wmt21_de_en.jsonl")
    out = []
    picked = sorted(range(len(wmt)), key=lambda i: hashlib.sha256(f"comet:{i}".encode()).hexdigest())
    for i in picked[:30]:
        row = wmt[i]
        system = sorted(row["systems"])[i % len(row["systems"])]
        out.append({"file": "wmt21_de_en.jsonl", "lines": [i + 1], "mt": f"systems.{system}",
                    "ref": "ref_a", "src": "src"})
    for i in picked[30:40]:
        lines = list(range(i + 1, min(i + 7, len(wmt)) + 1))
        out.append({"file": "wmt21_de_en.jsonl", "lines": lines, "mt": "ref_b", "ref": "ref_a", "src": "src"})
    for i in range(20):
        out.append({"file": "ted_mt_zh_en.jsonl", "lines": [i + 1], "mt": "ref_b", "ref": "ref_a", "src": "src"})
    # Mismatched pairs: the reference (and for half, the source) of another line.
    for n, i in enumerate(picked[40:50]):
        pair = {"file": "wmt21_de_en.jsonl", "lines": [i + 1], "mt": "ref_b", "ref": "ref_a", "src": "src",
                "ref_lines": [picked[n] + 1]}
        if n % 2:
            pair["src_lines"] = [picked[n + 1] + 1]
        out.append(pair)
    return out


def field(row, name):
    if name.startswith("systems."):
        return row["systems"][name.split(".", 1)[1]]
    return row[name]


def texts(pair):
    """The pair's texts: fields of consecutive lines joined by a space (the
    reference and source from `ref_lines` / `src_lines` where given)."""
    data = rows(pair["file"])
    return {k: " ".join(field(data[n - 1], pair[k]) for n in pair.get(f"{k}_lines", pair["lines"]))
            for k in ("src", "mt", "ref")}


def train_tokenizer(path):
    """A Unigram tokenizer in XLM-R's shape (Metaspace, <s> A </s>, ids 0-3
    special, <mask> last), trained on the shared data."""
    corpus = []
    for row in rows("wmt21_de_en.jsonl"):
        corpus += [row["src"], row["ref_a"]]
    for row in rows("ted_mt_zh_en.jsonl"):
        corpus += [row["src"], row["ref_a"]]
    tok = Tokenizer(models.Unigram())
    tok.normalizer = normalizers.NFKC()
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    trainer = trainers.UnigramTrainer(vocab_size=4000, special_tokens=SPECIALS, unk_token="<unk>")
    tok.train_from_iterator(corpus, trainer)
    tok.add_special_tokens(["<mask>"])
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>",
        special_tokens=[("<s>", 0), ("</s>", 2)])
    assert [tok.token_to_id(t) for t in SPECIALS] == [0, 1, 2, 3]
    tok.save(str(path))
    return tok.get_vocab_size()


def widen(model, seed):
    """Re-draws every weight wide enough that each part matters: encoder
    weights as in plm_parity.py, layer-wise scalars spread so sparsemax
    zeroes some layers, estimator layers scaled by their fan-in."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.startswith("estimator."):
                fan_in = p.shape[-1] if p.dim() == 2 else 1
                p.copy_(torch.randn(p.shape, generator=g) / fan_in ** 0.5)
            elif name.startswith("layerwise_attention.scalar"):
                p.copy_(0.6 * torch.randn(p.shape, generator=g))
            elif name == "layerwise_attention.gamma":
                p.copy_(1 + 0.3 * torch.randn(p.shape, generator=g))
            elif "LayerNorm.weight" in name:
                p.copy_(1 + 0.2 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.3 * torch.randn(p.shape, generator=g))
    return model


def encoder_config(kind, vocab):
    if kind == "XLM-RoBERTa":
        return tf.XLMRobertaConfig(vocab_size=vocab, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                   intermediate_size=48, max_position_embeddings=66, pad_token_id=1,
                                   bos_token_id=0, eos_token_id=2, type_vocab_size=1)
    # Multilingual MiniLM: the BERT architecture (padding id left at BERT's 0,
    # while COMET pools with the XLM-R tokenizer's <pad> = 1).
    return tf.BertConfig(vocab_size=vocab, hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
                         intermediate_size=48, max_position_embeddings=64, tokenizer_class="XLMRobertaTokenizer")


CHECKPOINTS = [
    ("comet-da", RegressionMetric, "XLM-RoBERTa",
     dict(layer="mix", layer_transformation="sparsemax", layer_norm=False, pool="avg",
          hidden_sizes=[64, 32], activations="Tanh", final_activation=None)),
    ("comet-qe", ReferencelessRegression, "XLM-RoBERTa",
     dict(layer="mix", layer_transformation="softmax", layer_norm=True, pool="avg",
          hidden_sizes=[48], activations="Tanh", final_activation="Sigmoid")),
    ("cometinho", RegressionMetric, "MiniLM",
     dict(layer="mix", layer_transformation="softmax", layer_norm=True, pool="avg",
          hidden_sizes=[64, 32], activations="Tanh", final_activation=None)),
    ("comet-l1max", RegressionMetric, "XLM-RoBERTa",
     dict(layer=1, layer_transformation="softmax", layer_norm=False, pool="max",
          hidden_sizes=[32], activations="Tanh", final_activation=None)),
]


def main():
    if FIXTURES.exists():
        shutil.rmtree(FIXTURES)
    FIXTURES.mkdir(parents=True)
    tokenizer_json = FIXTURES / "tokenizer.json"
    vocab = train_tokenizer(tokenizer_json)
    # COMET's MiniLM encoder always loads the hub's xlm-roberta-base tokenizer;
    # offline, it gets the one trained above.
    real = comet_minilm.XLMRobertaTokenizerFast.from_pretrained

    class LocalTokenizer:
        @staticmethod
        def from_pretrained(name, **kw):
            return real(str(FIXTURES / "cometinho") if name == "xlm-roberta-base" else name, **kw)

    comet_minilm.XLMRobertaTokenizerFast = LocalTokenizer

    data = pairs()
    samples = [texts(p) for p in data]
    golden = {"pairs": data, "models": {}}
    for seed, (name, cls, encoder, hparams) in enumerate(CHECKPOINTS):
        folder = FIXTURES / name
        (folder / "checkpoints").mkdir(parents=True)
        shutil.copy(tokenizer_json, folder / "tokenizer.json")
        encoder_config(encoder, vocab).save_pretrained(folder)
        rel = str(folder.relative_to(ROOT))
        torch.manual_seed(seed)
        model = cls(encoder_model=encoder, pretrained_model=rel, load_pretrained_weights=False, **hparams)
        widen(model, seed).eval()
        hp = dict(model.hparams)
        ckpt = folder / "checkpoints" / "model.ckpt"
        torch.save({"epoch": 0, "global_step": 0, "pytorch-lightning_version": "2.6.6",
                    "state_dict": model.state_dict(), "hyper_parameters": hp}, ckpt)
        with open(folder / "hparams.yaml", "w") as f:
            yaml.safe_dump(hp, f)
        # The golden scores come from the files as COMET loads them.
        loaded = comet.load_from_checkpoint(str(ckpt))
        out = loaded.predict(samples, batch_size=8, gpus=0, progress_bar=False)
        golden["models"][name] = {"scores": [float(s) for s in out.scores],
                                  "system_score": float(out.system_score)}
        print(name, out.system_score)
    tokenizer_json.unlink()
    GOLDEN.write_text(json.dumps(golden, indent=1) + "\n")


if __name__ == "__main__":
    main()
