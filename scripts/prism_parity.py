#!/usr/bin/env python3
"""Golden values that hold Blindspot's PRISM (src/metrics/prism.rs) and its
fairseq transformer (the sinusoidal-position variant of src/models/bart.rs)
to the released scorer (github thompsonb/prism, prism.py) and to a
maintained implementation of the fairseq architecture.

PRISM's checkpoint (m39v1) is a fairseq file: `checkpoint.pt` (a pickle
with `args`, an argparse.Namespace, and `model`, the state dict),
`spm.model` (SentencePiece) and `dict.src.txt` / `dict.tgt.txt` (fairseq
dictionaries). fairseq itself does not install on this Python, so the
network is computed here with transformers' FSMT, the port of fairseq's
post-norm transformer (sinusoidal positions numbered from padding_idx + 1,
token embeddings scaled by sqrt(d_model), ReLU, no embedding norm), with
the same tensors; prism.py's own arithmetic is restated line by line below
(`encode`, `score`).

Writes, all committed (small):

- tests/fixtures/prism/tiny/: a random fairseq checkpoint as prism.py
  reads one: `checkpoint.pt` with fairseq's key names (shared embeddings
  under `encoder.embed_tokens` and `decoder.embed_tokens`, the
  `_float_tensor` and `version` buffers), `spm.model` (the 400-piece
  Unigram model of tests/fixtures/t5, copied), `dict.src.txt` and
  `dict.tgt.txt` (its normal pieces but two, which map to <unk> as in
  fairseq, then the language tags <de> <en> <fr>, then madeup words up to a
  multiple of 8), and `config.json` holding only the head counts, which a
  pickled Namespace does not give up to a reader that does not run Python.
- tests/fixtures/prism/hub/: the same model in the layout of the hub port
  (dariast/prism, from the closed transformers PR 35281): `config.json` as
  its PrismConfig saves it, `model.safetensors` under its names (the shared
  table once, as `model.shared.weight`), `spm.model` and the dictionary as
  `prism_vocab.json` (token -> id).
- tests/golden/prism_parity.json: ids of texts as prism.py encodes them
  (with and without the language tag), and for pairs of reference,
  hypothesis and source: each direction's token log-probabilities
  (`positional_scores`), PRISM-ref (the mean of hypothesis|reference and
  reference|hypothesis, each the mean over the target tokens after the
  language tag) and PRISM-src (hypothesis|source), at temperature 1 and 2.

Usage (venv outside the repo):
    ~/.cache/blindspot-py/bin/python scripts/prism_parity.py
"""
import argparse
import json
import pathlib
import shutil

import numpy as np
import sentencepiece as spm
import torch
from safetensors.torch import save_file
from transformers import FSMTConfig, FSMTForConditionalGeneration

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "tests/fixtures/prism/tiny"
HUB = ROOT / "tests/fixtures/prism/hub"
GOLDEN = ROOT / "tests/golden/prism_parity.json"

D, HEADS, ENC, DEC, FFN = 32, 4, 3, 2, 48
LANGS = ["de", "en", "fr"]
DROPPED = ["▁ma", "ch"]  # pieces left out of the dictionary: <unk> in fairseq

# fairseq's Dictionary: <s> 0, <pad> 1, </s> 2, <unk> 3, then the file's lines.
BOS, PAD, EOS, UNK = 0, 1, 2, 3


def write_fixture():
    OUT.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "tests/fixtures/t5/spiece.model", OUT / "spm.model")
    sp = spm.SentencePieceProcessor(model_file=str(OUT / "spm.model"))
    words = [
        sp.id_to_piece(i)
        for i in range(sp.get_piece_size())
        if not (sp.is_control(i) or sp.is_unknown(i))
        and sp.id_to_piece(i) not in DROPPED
    ]
    words += [f"<{lang}>" for lang in LANGS]
    i = 0
    while (4 + len(words)) % 8:
        words.append(f"madeupword{i:04d}")
        i += 1
    lines = "".join(f"{w} {1000 - k}\n" for k, w in enumerate(words))
    for name in ("dict.src.txt", "dict.tgt.txt"):
        (OUT / name).write_text(lines, encoding="utf-8")
    vocab = 4 + len(words)

    torch.manual_seed(0)
    config = FSMTConfig(
        langs=["en", "en"],
        src_vocab_size=vocab,
        tgt_vocab_size=vocab,
        d_model=D,
        encoder_layers=ENC,
        decoder_layers=DEC,
        encoder_attention_heads=HEADS,
        decoder_attention_heads=HEADS,
        encoder_ffn_dim=FFN,
        decoder_ffn_dim=FFN,
        activation_function="relu",
        max_position_embeddings=1024,
        scale_embedding=True,
        pad_token_id=PAD,
        bos_token_id=BOS,
        eos_token_id=EOS,
        decoder_start_token_id=EOS,
        dropout=0.0,
        attention_dropout=0.0,
        activation_dropout=0.0,
    )
    model = FSMTForConditionalGeneration(config).eval()
    state = model.state_dict()
    embed = torch.randn(vocab, D) * D**-0.5
    embed[PAD] = 0
    fairseq = {}
    for key, value in state.items():
        name = key.removeprefix("model.")
        if "embed_positions" in name or "output_projection" in name:
            continue
        if "embed_tokens" in name:
            value = embed
        elif name.endswith("layer_norm.weight"):
            value = 1 + 0.1 * torch.randn_like(value)
        else:
            value = 0.3 * torch.randn_like(value) if value.dim() > 1 else 0.1 * torch.randn_like(value)
        fairseq[name] = value.clone().contiguous()
    # Both stacks and the output share one table, as fairseq's
    # share_all_embeddings saves it (two names, one storage).
    fairseq["encoder.embed_tokens.weight"] = embed
    fairseq["decoder.embed_tokens.weight"] = embed
    for stack in ("encoder", "decoder"):
        fairseq[f"{stack}.embed_positions._float_tensor"] = torch.FloatTensor(1)
        fairseq[f"{stack}.version"] = torch.Tensor([3])
    args = argparse.Namespace(
        arch="transformer",
        encoder_embed_dim=D,
        decoder_embed_dim=D,
        encoder_layers=ENC,
        decoder_layers=DEC,
        encoder_attention_heads=HEADS,
        decoder_attention_heads=HEADS,
        encoder_ffn_embed_dim=FFN,
        decoder_ffn_embed_dim=FFN,
        share_all_embeddings=True,
        encoder_normalize_before=False,
        decoder_normalize_before=False,
        max_tokens=4000,
        max_sentences=None,
    )
    torch.save({"args": args, "model": fairseq, "optimizer_history": [], "extra_state": {}},
               OUT / "checkpoint.pt")
    (OUT / "config.json").write_text(
        json.dumps({"encoder_attention_heads": HEADS, "decoder_attention_heads": HEADS}, indent=1) + "\n"
    )

    load = {}
    for key in state:
        name = key.removeprefix("model.")
        if "embed_positions" in name:
            load[key] = state[key]
        elif "output_projection" in name:
            load[key] = embed
        else:
            load[key] = fairseq[name]
    model.load_state_dict(load, strict=True)
    write_hub(fairseq, words, vocab)
    return sp, words, model


def write_hub(fairseq, words, vocab):
    HUB.mkdir(parents=True, exist_ok=True)
    shutil.copy(OUT / "spm.model", HUB / "spm.model")
    tensors = {"model.shared.weight": fairseq["encoder.embed_tokens.weight"].clone()}
    for name, value in fairseq.items():
        if ".layers." in name:
            tensors["model." + name] = value.clone().contiguous()
    save_file(tensors, HUB / "model.safetensors")
    ids = {w: i for i, w in enumerate(["<s>", "<pad>", "</s>", "<unk>"] + words)}
    (HUB / "prism_vocab.json").write_text(json.dumps(ids, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    config = {
        "architectures": ["PrismForConditionalGeneration"],
        "model_type": "prism",
        "vocab_size": vocab,
        "d_model": D,
        "encoder_layers": ENC,
        "decoder_layers": DEC,
        "encoder_attention_heads": HEADS,
        "decoder_attention_heads": HEADS,
        "encoder_ffn_dim": FFN,
        "decoder_ffn_dim": FFN,
        "max_position_embeddings": 1024,
        "activation_function": "relu",
        "scale_embedding": True,
        "layernorm_embedding": False,
        "tie_word_embeddings": True,
        "pad_token_id": PAD,
        "bos_token_id": BOS,
        "eos_token_id": EOS,
        "decoder_start_token_id": EOS,
        "is_encoder_decoder": True,
    }
    (HUB / "config.json").write_text(json.dumps(config, indent=1) + "\n")


class Prism:
    """prism.py's `Prism`, on the FSMT network: `_encode`, `_score_forward`
    (SequenceScorer: logits divided by the temperature, log-softmax, the
    target's log-probabilities, the mean after the language tag) and
    `score`."""

    def __init__(self, sp, words, model, lang, temperature=1.0):
        self.sp, self.model, self.lang, self.temperature = sp, model, lang, temperature
        self.index = {w: 4 + k for k, w in enumerate(words)}

    def binarize(self, line):
        # fairseq's Dictionary.encode_line: split on whitespace, unknown
        # words to <unk>, </s> appended.
        return [self.index.get(w, UNK) for w in line.split()] + [EOS]

    def encode(self, sent, prepend=True):
        sent = " ".join(self.sp.EncodeAsPieces(sent))
        if prepend:
            sent = f"<{self.lang}> " + sent
        return self.binarize(sent)

    @torch.no_grad()
    def positional_scores(self, src, tgt):
        prev = [EOS] + tgt[:-1]  # LanguagePairDataset's prev_output_tokens
        logits = self.model(
            input_ids=torch.tensor([src]),
            attention_mask=torch.ones(1, len(src), dtype=torch.long),
            decoder_input_ids=torch.tensor([prev]),
            use_cache=False,  # transformers 4.57's FSMT fails building its cache
        ).logits[0]
        lprobs = torch.log_softmax(logits.float() / self.temperature, dim=-1)
        return lprobs.gather(1, torch.tensor(tgt).unsqueeze(1)).squeeze(1).numpy()

    def score_forward(self, src, tgt):
        scores = self.positional_scores(src, tgt)
        return float(np.mean(scores[1:])), scores  # [1:]: skip the language tag

    def score(self, cand, ref=None, src=None):
        if src is not None:
            return self.score_forward(self.encode(src, False), self.encode(cand))[0]
        forward = self.score_forward(self.encode(ref, False), self.encode(cand))[0]
        reverse = self.score_forward(self.encode(cand, False), self.encode(ref))[0]
        return 0.5 * forward + 0.5 * reverse


PAIRS = [
    ("The cat sat on the mat.", "A cat was sitting on the mat.", "Die Katze saß auf der Matte."),
    ("It rained all day in the city.", "It rained.", "Es regnete den ganzen Tag in der Stadt."),
    ("Übermensch ☃ and the machine", "the machine and ☃", "Maschine"),
    ("A very long reference about the weather, the sea and the ships that sail on it at night.",
     "The ships sail at night on the sea.", "Schiffe fahren nachts."),
]


def main():
    sp, words, model = write_fixture()
    golden = {"lang": "en", "dict_size": 4 + len(words), "encodings": [], "pairs": []}
    prism = Prism(sp, words, model, "en")
    for text in ["The cat sat on the mat.", "Übermensch ☃ and the machine", "  spaces   here  "]:
        golden["encodings"].append(
            {"text": text, "source": prism.encode(text, False), "target": prism.encode(text)}
        )
    for temperature in (1.0, 2.0):
        prism.temperature = temperature
        for ref, hyp, src in PAIRS:
            fwd, fwd_tokens = prism.score_forward(prism.encode(ref, False), prism.encode(hyp))
            rev, rev_tokens = prism.score_forward(prism.encode(hyp, False), prism.encode(ref))
            qe, qe_tokens = prism.score_forward(prism.encode(src, False), prism.encode(hyp))
            assert abs(prism.score(hyp, ref=ref) - (0.5 * fwd + 0.5 * rev)) < 1e-12
            golden["pairs"].append({
                "temperature": temperature,
                "reference": ref,
                "hypothesis": hyp,
                "source": src,
                "hyp_given_ref": fwd_tokens.tolist(),
                "ref_given_hyp": rev_tokens.tolist(),
                "hyp_given_src": qe_tokens.tolist(),
                "prism_ref": prism.score(hyp, ref=ref),
                "prism_src": prism.score(hyp, src=src),
            })
    GOLDEN.write_text(json.dumps(golden, indent=1) + "\n")
    print(f"wrote {OUT} and {GOLDEN}")


if __name__ == "__main__":
    main()
