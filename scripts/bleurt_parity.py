#!/usr/bin/env python3
"""Golden values that hold Blindspot's BLEURT-20 (src/models/bert.rs with an
embedding projection, src/models/sentencepiece.rs, src/metrics/bleurt.rs) to
lucadiliello's PyTorch port (PyPI `bleurt-pytorch`, the code behind the hub's
`lucadiliello/BLEURT-20`, `-D12`, `-D6`, `-D3`).

Writes, all committed (small):

- tests/fixtures/bleurt/tiny/: a tiny random-weight BleurtForSequenceClassification
  in the hub repositories' layout: config.json (model_type bleurt, an
  embedding size below the hidden size, so the embedding projection runs),
  pytorch_model.bin, spm.model (a SentencePiece Unigram model trained here
  on tests/data with nmt_nfkc normalisation and [PAD] [UNK] [CLS] [SEP]
  [MASK] as BLEURT-20's vocabulary has them), tokenizer_config.json and
  special_tokens_map.json, exactly as `save_pretrained` writes them. Its
  positions stop at 128, so long pairs exercise the truncation.
- tests/fixtures/bleurt/tiny-safetensors/model.safetensors: the same weights
  as safetensors (what a browser reads from a hub repository that has them).
- tests/golden/bleurt.json:
  * `tokens`: the SentencePiece ids (`BleurtTokenizer`, no special tokens)
    of edge-case strings written here (spaces, tabs, NFKC forms, characters
    outside the vocabulary, an empty string);
  * `pairs`: 60 (reference, candidate) pairs named by file, line and field
    (WMT21 de-en system outputs, 6-line documents past the limit, German and
    Chinese sources as candidates, TED zh-en) plus 3 literal edge pairs, and
    for each the port's input ids and score
    (`model(**tok(refs, cands, padding="longest", truncation=True,
    max_length=128))`: the pair cut longest-first, as the TF original cuts
    it), no dataset text copied.

Usage (venv outside the repo):
    ~/.cache/blindspot-py/bin/pip install bleurt-pytorch "torch>=2.2" sentencepiece "transformers>=4.40"
    ~/.cache/blindspot-py/bin/python scripts/bleurt_parity.py
"""
import hashlib
import io
import json
import pathlib
import shutil

import sentencepiece as spm
import torch
import transformers
from bleurt_pytorch import BleurtConfig, BleurtForSequenceClassification, BleurtTokenizer
from bleurt_pytorch.bleurt.tokenization_bleurt_sp import BleurtSPTokenizer

ROOT = pathlib.Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
FIXTURE = ROOT / "tests" / "fixtures" / "bleurt" / "tiny"
SAFETENSORS = ROOT / "tests" / "fixtures" / "bleurt" / "tiny-safetensors"
GOLDEN = ROOT / "tests" / "golden" / "bleurt.json"
MAX_POSITIONS = 128

EDGE_TEXTS = [
    "",
    " ",
    "plain words",
    "  leading and trailing spaces  ",
    "many    inner\tspaces\nand lines",
    "\u3000ideographic space and non\u00a0breaking",
    "ligature \ufb01ne, full-width \uff21\uff22\uff23 \uff11\uff12\uff13",
    "Caf\u00e9 vs Cafe\u0301 (composed and decomposed)",
    "emoji \U0001f600 and symbols \u2603 \u00a7",
    "unknown script: \u10d0\u10d1\u10d2 \u0b95\u0b9f",
    "[CLS] and [SEP] typed in a text",
    "Über Größe: Straße, Äpfel!",
    "但首先我有两件事需要说明",
    "x" * 300,
]

EDGE_PAIRS = [
    ("A reference sentence.", ""),
    ("", "A candidate without a reference."),
    ("  Spaces   around  ", "\tspaces\taround\t"),
]


def rows(file):
    with open(DATA / file, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def field(row, name):
    if name.startswith("systems."):
        return row["systems"][name.split(".", 1)[1]]
    return row[name]


def pairs():
    """60 (ref, mt) pairs with where they come from: 30 WMT21 de-en system
    outputs against ref_a, 8 six-line documents (ref_b against ref_a; 2 of
    them a document against itself, so both sides are cut evenly), 4 where
    the short side comes first and the long second, 8 German sources and 5
    Chinese sources as candidates, 5 TED zh-en ref_b against ref_a."""
    wmt = rows("wmt21_de_en.jsonl")
    out = []
    picked = sorted(range(len(wmt)), key=lambda i: hashlib.sha256(f"bleurt:{i}".encode()).hexdigest())
    for i in picked[:30]:
        row = wmt[i]
        system = sorted(row["systems"])[i % len(row["systems"])]
        out.append({"file": "wmt21_de_en.jsonl", "lines": [i + 1], "ref": "ref_a", "mt": f"systems.{system}"})
    for n, i in enumerate(picked[30:38]):
        lines = list(range(i + 1, min(i + 7, len(wmt)) + 1))
        out.append({"file": "wmt21_de_en.jsonl", "lines": lines, "ref": "ref_a", "mt": "ref_a" if n < 2 else "ref_b"})
    for i in picked[38:42]:
        lines = list(range(i + 1, min(i + 7, len(wmt)) + 1))
        out.append({"file": "wmt21_de_en.jsonl", "lines": lines, "ref": "ref_a", "mt": "ref_b",
                    "ref_lines": [i + 1]})
    for i in picked[42:50]:
        out.append({"file": "wmt21_de_en.jsonl", "lines": [i + 1], "ref": "ref_a", "mt": "src"})
    for i in range(5):
        out.append({"file": "ted_mt_zh_en.jsonl", "lines": [i + 1], "ref": "ref_a", "mt": "src"})
    for i in range(5, 10):
        out.append({"file": "ted_mt_zh_en.jsonl", "lines": [i + 1], "ref": "ref_a", "mt": "ref_b"})
    return out


def texts(pair):
    data = rows(pair["file"])
    return tuple(" ".join(field(data[n - 1], pair[k]) for n in pair.get(f"{k}_lines", pair["lines"]))
                 for k in ("ref", "mt"))


def train_spm(folder):
    """A Unigram SentencePiece model shaped like BLEURT-20's: nmt_nfkc, a
    dummy prefix, [PAD] at 0, [UNK], [CLS], [SEP], [MASK]; character coverage
    below 1 so rare characters stay unknown."""
    corpus = []
    for row in rows("wmt21_de_en.jsonl"):
        corpus += [row["src"], row["ref_a"]]
    for row in rows("ted_mt_zh_en.jsonl")[20:]:
        corpus += [row["src"], row["ref_a"]]
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(corpus), model_writer=model, model_type="unigram", vocab_size=3000,
        character_coverage=0.995, normalization_rule_name="nmt_nfkc", pad_id=0, pad_piece="[PAD]",
        unk_id=1, unk_piece="[UNK]", bos_id=-1, eos_id=-1, control_symbols=["[CLS]", "[SEP]", "[MASK]"],
        num_threads=2, seed_sentencepiece_size=200000, input_sentence_size=0)
    path = folder / "source.spm"
    path.write_bytes(model.getvalue())
    return path


def widen(model, seed):
    """Re-draws every weight wide enough that each part matters (random
    initialisation at 0.02 makes every score nearly the same)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "LayerNorm.weight" in name:
                p.copy_(1 + 0.2 * torch.randn(p.shape, generator=g))
            elif name.startswith("classifier.") or "pooler" in name:
                fan_in = p.shape[-1] if p.dim() == 2 else 1
                p.copy_(torch.randn(p.shape, generator=g) / fan_in ** 0.5)
            else:
                p.copy_(0.3 * torch.randn(p.shape, generator=g))
    return model


def main():
    transformers.logging.set_verbosity_error()
    if FIXTURE.exists():
        shutil.rmtree(FIXTURE)
    FIXTURE.mkdir(parents=True)
    source = train_spm(FIXTURE)
    tok = BleurtSPTokenizer(str(source))
    tok.save_pretrained(str(FIXTURE))
    source.unlink()
    config = BleurtConfig(vocab_size=len(tok.vocab), embedding_size=24, hidden_size=32, num_hidden_layers=2,
                          num_attention_heads=4, intermediate_size=48, max_position_embeddings=MAX_POSITIONS,
                          num_labels=1, architectures=["BleurtForSequenceClassification"])
    torch.manual_seed(0)
    model = widen(BleurtForSequenceClassification(config), 0).eval()
    model.save_pretrained(str(FIXTURE), safe_serialization=False)
    assert not (FIXTURE / "model.safetensors").exists()

    # Everything below from the files, as a user loads the hub repository.
    tok = BleurtTokenizer.from_pretrained(str(FIXTURE))
    assert isinstance(tok, BleurtSPTokenizer), type(tok)
    model = BleurtForSequenceClassification.from_pretrained(str(FIXTURE)).eval()
    SAFETENSORS.mkdir(exist_ok=True)
    model.save_pretrained(str(SAFETENSORS), safe_serialization=True)
    (SAFETENSORS / "config.json").unlink()
    golden = {"max_positions": MAX_POSITIONS,
              "tokens": [{"text": t, "ids": tok(t, add_special_tokens=False)["input_ids"]} for t in EDGE_TEXTS],
              "pairs": []}
    entries = [dict(p) for p in pairs()] + [{"ref_text": r, "mt_text": c} for r, c in EDGE_PAIRS]
    samples = [texts(e) if "file" in e else (e["ref_text"], e["mt_text"]) for e in entries]
    for start in range(0, len(samples), 8):
        chunk = samples[start:start + 8]
        enc = tok([r for r, _ in chunk], [c for _, c in chunk], padding="longest", truncation=True,
                  max_length=MAX_POSITIONS, return_tensors="pt")
        with torch.no_grad():
            scores = model(**enc).logits.flatten().tolist()
        for k, score in enumerate(scores):
            n = int(enc["attention_mask"][k].sum())
            e = entries[start + k]
            e["input_ids"] = enc["input_ids"][k][:n].tolist()
            e["token_type_ids"] = enc["token_type_ids"][k][:n].tolist()
            e["score"] = score
            golden["pairs"].append(e)
    cut = sum(len(e["input_ids"]) == MAX_POSITIONS for e in golden["pairs"])
    print(f"{len(golden['pairs'])} pairs, {cut} cut at {MAX_POSITIONS}; "
          f"scores {min(e['score'] for e in golden['pairs']):.3f}..{max(e['score'] for e in golden['pairs']):.3f}")
    GOLDEN.write_text(json.dumps(golden, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
