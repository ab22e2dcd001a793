#!/usr/bin/env python3
"""Golden values that hold Blindspot's BART module (src/models/bart.rs) and
BARTScore (src/metrics/bartscore.rs) to transformers and to neulab/BARTScore's
`bart_score.py`.

Writes, all committed (small):

- tests/fixtures/bart/tiny/: a random-weight BartForConditionalGeneration in
  Hugging Face format (config.json, model.safetensors, tokenizer.json).
  Encoder and decoder differ in depth, heads and width of the feed-forward
  layers, `scale_embedding` is on and `final_logits_bias` is drawn, so a
  mixed-up stack, a missing scale or bias shows. Its tokenizer is a
  byte-level BPE (BART's pipeline: byte-level pre-tokenizer, RoBERTa
  post-processor with <s> and </s>) trained here on tests/data with 1000
  entries. Positions stop at 64, so long texts are cut as BARTScore cuts
  them (there at 1024).
- tests/fixtures/bart/tiny-torch/: the same weights as pytorch_model.bin and
  the tokenizer as vocab.json + merges.txt without tokenizer.json (how
  sshleifer/distilbart-cnn-12-6 ships), with the same config.
- tests/golden/bart_parity.json:
  - `hidden`: a padded batch's encoder hidden states (every layer) and the
    logits of a decoder pass (a spread of columns), from transformers;
  - `pairs`: 30 WMT21 segments (named by line; no dataset text is copied):
    BARTScore precision (ref -> hyp), recall (hyp -> ref), F = (P + R) / 2
    and faithfulness (src -> hyp), computed by BARTScorer.score's exact
    steps (batch 4, padding, NLLLoss with ignore_index = pad, divided by the
    target length), plus each direction's per-token log-probabilities for
    the first 5 segments.

Usage (venv outside the repo):
    ~/.cache/blindspot-py/bin/python scripts/bart_parity.py
"""
import json
import pathlib
import shutil

import torch
import torch.nn as nn
import transformers as tf
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

ROOT = pathlib.Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
OUT = ROOT / "tests" / "fixtures" / "bart"
GOLDEN = ROOT / "tests" / "golden"
SPECIAL = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
MAX_POSITIONS = 64
PAIRS = 30


def wmt_rows():
    with open(DATA / "wmt21_de_en.jsonl", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def train_tokenizer(rows):
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=1000, special_tokens=SPECIAL, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    texts = [r[k] for r in rows[:400] for k in ("src", "ref_a")]
    tok.train_from_iterator(texts, trainer)
    tok.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0),
                                                      trim_offsets=False, add_prefix_space=False)
    return tok


def draw(model, seed):
    """Re-draws every weight (and final_logits_bias) so each part matters,
    small enough that log-probabilities stay in a range f32 compares well."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name and name.endswith("weight"):
                p.copy_(1 + 0.2 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.15 * torch.randn(p.shape, generator=g))
        model.final_logits_bias.copy_(0.5 * torch.randn(model.final_logits_bias.shape, generator=g))
    return model


def bart_score(model, tokenizer, srcs, tgts, batch_size=4):
    """neulab/BARTScore's BARTScorer.score, step for step, plus per-token
    log-probabilities of the labels."""
    loss_fct = nn.NLLLoss(reduction="none", ignore_index=model.config.pad_token_id)
    lsm = nn.LogSoftmax(dim=1)
    scores, token_logprobs = [], []
    for i in range(0, len(srcs), batch_size):
        src_list, tgt_list = srcs[i:i + batch_size], tgts[i:i + batch_size]
        with torch.no_grad():
            enc_src = tokenizer(src_list, max_length=MAX_POSITIONS, truncation=True, padding=True,
                                return_tensors="pt")
            enc_tgt = tokenizer(tgt_list, max_length=MAX_POSITIONS, truncation=True, padding=True,
                                return_tensors="pt")
            tgt_tokens = enc_tgt["input_ids"]
            tgt_len = enc_tgt["attention_mask"].sum(dim=1)
            out = model(input_ids=enc_src["input_ids"], attention_mask=enc_src["attention_mask"],
                        labels=tgt_tokens)
            logits = out.logits.view(-1, model.config.vocab_size)
            logp = lsm(logits)
            loss = loss_fct(logp, tgt_tokens.view(-1)).view(tgt_tokens.shape[0], -1)
            per_token = logp.gather(1, tgt_tokens.view(-1, 1)).view(tgt_tokens.shape[0], -1)
            loss = loss.sum(dim=1) / tgt_len
            scores += [-x.item() for x in loss]
            for row, n in zip(per_token, tgt_len):
                token_logprobs.append(row[: int(n)].tolist())
    return scores, token_logprobs


def main():
    torch.manual_seed(0)
    rows = wmt_rows()
    tok = train_tokenizer(rows)
    tokenizer = tf.PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
        pad_token="<pad>", mask_token="<mask>", cls_token="<s>", sep_token="</s>",
        model_max_length=MAX_POSITIONS)
    config = tf.BartConfig(
        vocab_size=tok.get_vocab_size(), d_model=32, encoder_layers=2, decoder_layers=3,
        encoder_attention_heads=4, decoder_attention_heads=2, encoder_ffn_dim=48,
        decoder_ffn_dim=40, max_position_embeddings=MAX_POSITIONS, scale_embedding=True,
        activation_function="gelu", pad_token_id=1, bos_token_id=0, eos_token_id=2,
        decoder_start_token_id=2, forced_eos_token_id=2)
    model = draw(tf.BartForConditionalGeneration(config), 11).eval()
    if OUT.exists():
        shutil.rmtree(OUT)
    tiny, torch_dir = OUT / "tiny", OUT / "tiny-torch"
    model.save_pretrained(tiny)
    # pytorch_model.bin as older hub repositories hold it: the whole state dict, tied copies too.
    torch_dir.mkdir()
    shutil.copy(tiny / "config.json", torch_dir / "config.json")
    torch.save(model.state_dict(), torch_dir / "pytorch_model.bin")
    (tiny / "generation_config.json").unlink(missing_ok=True)
    tok.save(str(tiny / "tokenizer.json"))
    tok.model.save(str(torch_dir))
    model = tf.BartForConditionalGeneration.from_pretrained(tiny, dtype=torch.float32).eval()

    # Hidden states and decoder logits on a padded batch.
    batch = [tokenizer(t, truncation=True)["input_ids"] for t in
             [rows[3]["ref_a"], rows[8]["ref_a"][:30]]]
    n = max(map(len, batch))
    ids = torch.tensor([s + [1] * (n - len(s)) for s in batch])
    mask = torch.tensor([[1] * len(s) + [0] * (n - len(s)) for s in batch])
    dec = [[2, 0, 17, 250, 31], [2, 0, 99]]
    m = max(map(len, dec))
    dec_ids = torch.tensor([s + [1] * (m - len(s)) for s in dec])
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=mask, decoder_input_ids=dec_ids,
                    output_hidden_states=True)
    cols = list(range(0, config.vocab_size, 37))
    hidden = {
        "ids": batch,
        "decoder_ids": dec,
        "encoder_hidden_states": [[h[i, : len(s)].tolist() for i, s in enumerate(batch)]
                                  for h in out.encoder_hidden_states],
        "logit_columns": cols,
        "logits": [out.logits[i, : len(s)][:, cols].tolist() for i, s in enumerate(dec)],
    }

    segs = [(i, r) for i, r in enumerate(rows) if r.get("systems")][:PAIRS]
    lines = [i + 1 for i, _ in segs]
    refs = [r["ref_a"] for _, r in segs]
    srcs = [r["src"] for _, r in segs]
    hyps = [sorted(r["systems"].items())[0][1] for _, r in segs]
    p, p_tok = bart_score(model, tokenizer, refs, hyps)
    r, r_tok = bart_score(model, tokenizer, hyps, refs)
    faithful, f_tok = bart_score(model, tokenizer, srcs, hyps)
    cut = sum(len(tokenizer(t)["input_ids"]) > MAX_POSITIONS for t in refs + hyps + srcs)
    pairs = [{"line": lines[k], "system": sorted(segs[k][1]["systems"])[0],
              "precision": p[k], "recall": r[k], "f": (p[k] + r[k]) / 2, "faithful": faithful[k]}
             for k in range(len(segs))]
    for k in range(5):
        pairs[k]["tokens"] = {"precision": p_tok[k], "recall": r_tok[k], "faithful": f_tok[k]}
    golden = {
        "_about": ("transformers %s, torch %s, fp32 CPU; scripts/bart_parity.py (%d texts past %d "
                   "tokens)" % (tf.__version__, torch.__version__, cut, MAX_POSITIONS)),
        "hidden": hidden,
        "pairs": pairs,
    }
    GOLDEN.mkdir(parents=True, exist_ok=True)
    (GOLDEN / "bart_parity.json").write_text(json.dumps(golden, separators=(",", ":")))
    print("texts cut:", cut, "files:", sorted(p.name for p in tiny.iterdir()))


if __name__ == "__main__":
    main()
