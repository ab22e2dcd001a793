#!/usr/bin/env python3
"""Golden values that hold Blindspot's T5 module (src/models/t5.rs) and
UniEval (src/metrics/unieval.rs) to transformers and to the released
UniEval scorer (github maszhongming/UniEval: metric/scorer.py,
metric/evaluator.py, utils.py).

Writes, all committed (small):

- tests/fixtures/t5/tiny/: a random-weight T5ForConditionalGeneration of
  T5 v1.1's kind, as UniEval's checkpoints are (google/t5-v1_1-large):
  gated-GELU feed-forward (wi_0, wi_1), an untied lm_head, RMS norms.
  Heads x d_kv (4 x 8) differs from d_model (24), encoder and decoder
  differ in depth, and relative_attention_max_distance is 20 so that
  texts of a few dozen tokens reach the logarithmic buckets. Its tokenizer
  is a Unigram (SentencePiece's model) trained here on tests/data with 600
  pieces, a Metaspace pre-tokenizer and T5's post-processor (`$A </s>`),
  with `<pad>` 0, `</s>` 1, `<unk>` 2 as T5 numbers them.
- tests/fixtures/t5/tiny-v1/: the same sizes as T5 v1.0: ReLU
  feed-forward (wi) and the head tied to the shared embeddings, scaled by
  d_model^-0.5.
- tests/fixtures/t5/spiece.model: a 400-piece SentencePiece Unigram model
  trained here (sentencepiece, T5's ids: <pad> 0, </s> 1, <unk> 2), for
  the checkpoints that ship spiece.model without tokenizer.json
  (UniEval's); the golden file holds the ids transformers' T5TokenizerFast
  gives when it converts it (T5Converter, "▁" before the first word as
  before transformers 4.41), on questions, spaces and extra ids, and the
  slow T5Tokenizer's for comparison.
- tests/golden/t5_parity.json:
  - `buckets`: transformers' relative-position buckets, both directions,
    for T5's defaults (32 buckets, distance 128) over -300..300;
  - per model: a padded batch's encoder hidden states (every layer, the
    last after the final norm as transformers returns it) and the logits
    of a decoder pass (a spread of columns); greedy and beam-search (3
    beams) generations of 12 new tokens;
  - `unieval`: UniEval's summarization dimensions (coherence, consistency,
    fluency, relevance, overall) and the fact evaluator on 12 SummEval
    summaries (named by line and system; no dataset text is copied),
    computed by the released scorer's steps on tiny/: inputs built as
    `add_question` builds them, batches of 8 padded on the right and cut
    at 1024 tokens, the decoder fed T5's start token once, score =
    P(Yes) / (P(Yes) + P(No)) over the softmax of that step's logits, the
    ids of "Yes" and "No" the first of their encodings. Consistency and
    fluency average the summary's sentences. The released code splits
    sentences with NLTK's Punkt, whose English model is not on PyPI; this
    script splits at `.`, `!` or `?` before whitespace and an uppercase
    letter, a digit or an opening quote, on summaries where that is
    unambiguous, and records the sentences, so the Rust test checks that
    Blindspot's splitter finds the same ones.

Usage (venv outside the repo):
    ~/.cache/blindspot-py/bin/python scripts/t5_parity.py
"""
import json
import pathlib
import re
import shutil

import sentencepiece as spm
import torch
import torch.nn as nn
import transformers as tf
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

ROOT = pathlib.Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
OUT = ROOT / "tests" / "fixtures" / "t5"
GOLDEN = ROOT / "tests" / "golden"
SPECIAL = ["<pad>", "</s>", "<unk>"]
MAX_LENGTH = 1024
ITEMS = 12
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[])")


def train_tokenizer(texts):
    tok = Tokenizer(models.Unigram())
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    trainer = trainers.UnigramTrainer(vocab_size=600, special_tokens=SPECIAL, unk_token="<unk>",
                                      show_progress=False)
    tok.train_from_iterator(texts, trainer)
    tok.post_processor = processors.TemplateProcessing(
        single="$A </s>", pair="$A </s> $B </s>", special_tokens=[("</s>", 1)])
    return tok


def draw(model, seed):
    """Re-draws every weight so each part matters, small enough that the
    logits stay in a range f32 compares well."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "layer_norm" in name:
                p.copy_(1 + 0.2 * torch.randn(p.shape, generator=g))
            elif "relative_attention_bias" in name:
                p.copy_(0.5 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.3 * torch.randn(p.shape, generator=g))
    return model


def t5_config(vocab, v1_1):
    return tf.T5Config(
        vocab_size=vocab, d_model=24, d_kv=8, num_heads=4, d_ff=40, num_layers=3,
        num_decoder_layers=2, relative_attention_num_buckets=32,
        relative_attention_max_distance=20, layer_norm_epsilon=1e-6,
        feed_forward_proj="gated-gelu" if v1_1 else "relu", tie_word_embeddings=not v1_1,
        pad_token_id=0, eos_token_id=1, decoder_start_token_id=0)


def hidden_and_logits(model, tokenizer, texts, vocab):
    batch = [tokenizer(t)["input_ids"] for t in texts]
    n = max(map(len, batch))
    ids = torch.tensor([s + [0] * (n - len(s)) for s in batch])
    mask = torch.tensor([[1] * len(s) + [0] * (n - len(s)) for s in batch])
    dec = [[0, 17, 250, 31, 5, 88, 9, 140], [0, 99]]
    m = max(map(len, dec))
    dec_ids = torch.tensor([s + [0] * (m - len(s)) for s in dec])
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=mask, decoder_input_ids=dec_ids,
                    output_hidden_states=True)
    cols = list(range(0, vocab, 29))
    return {
        "ids": batch,
        "decoder_ids": dec,
        "encoder_hidden_states": [[h[i, : len(s)].tolist() for i, s in enumerate(batch)]
                                  for h in out.encoder_hidden_states],
        "logit_columns": cols,
        "logits": [out.logits[i, : len(s)][:, cols].tolist() for i, s in enumerate(dec)],
    }


def generations(model, tokenizer, prompts):
    out = []
    for p in prompts:
        ids = tokenizer(p, return_tensors="pt")["input_ids"]
        with torch.no_grad():
            greedy = model.generate(ids, do_sample=False, num_beams=1, max_new_tokens=12,
                                    min_length=0, no_repeat_ngram_size=0)
            beam = model.generate(ids, do_sample=False, num_beams=3, max_new_tokens=12,
                                  length_penalty=1.0, early_stopping=False, min_length=0,
                                  no_repeat_ngram_size=0, num_return_sequences=3,
                                  output_scores=True, return_dict_in_generate=True)
        # Every returned beam with its score: on a random checkpoint two can tie in f32,
        # and which of them comes first is then a matter of sort order.
        out.append({"input": ids[0].tolist(), "greedy": greedy[0].tolist(),
                    "beam3": [{"tokens": t.tolist(), "score": float(sc)}
                              for t, sc in zip(beam.sequences, beam.sequences_scores)]})
    return out


# UniEval's boolean questions (utils.py, add_question), per dimension.
def question(dim, output, src=None, ref=None):
    if dim == "fluency":
        return "question: Is this a fluent paragraph? </s> paragraph: " + output
    if dim == "coherence":
        return ("question: Is this a coherent summary to the document? </s> summary: " + output
                + " </s> document: " + src)
    if dim == "consistency":
        return ("question: Is this claim consistent with the document? </s> claim: " + output
                + " </s> document: " + src)
    if dim == "relevance":
        return ("question: Is this summary relevant to the reference? </s> summary: " + output
                + " </s> reference: " + ref)
    raise ValueError(dim)


def unieval_scores(model, tokenizer, inputs, batch_size=8):
    """The released scorer's steps (metric/scorer.py, UniEvaluator.score)."""
    pos_id = tokenizer("Yes")["input_ids"][0]
    neg_id = tokenizer("No")["input_ids"][0]
    softmax = nn.Softmax(dim=1)
    scores = []
    for i in range(0, len(inputs), batch_size):
        src_list = inputs[i:i + batch_size]
        tgt_list = ["No"] * len(src_list)
        with torch.no_grad():
            enc_src = tokenizer(src_list, max_length=MAX_LENGTH, truncation=True, padding=True,
                                return_tensors="pt")
            enc_tgt = tokenizer(tgt_list, max_length=MAX_LENGTH, truncation=True, padding=True,
                                return_tensors="pt")
            tgt_tokens = enc_tgt["input_ids"][:, 0].unsqueeze(-1)
            out = model(input_ids=enc_src["input_ids"], attention_mask=enc_src["attention_mask"],
                        labels=tgt_tokens)
            logits = out.logits.view(-1, model.config.vocab_size)
            pos = softmax(logits)[:, pos_id]
            neg = softmax(logits)[:, neg_id]
        scores += [(p / (p + n)).item() for p, n in zip(pos, neg)]
    return scores


def summarization(model, tokenizer, items):
    """SumEvaluator.evaluate: consistency and fluency per sentence (mean),
    coherence and relevance on the whole summary, overall the mean."""
    result = [{} for _ in items]
    for dim in ["coherence", "consistency", "fluency", "relevance"]:
        if dim in ("consistency", "fluency"):
            flat, counts = [], []
            for it in items:
                counts.append(len(it["sentences"]))
                flat += [question(dim, s, src=it["src"]) for s in it["sentences"]]
            sent = unieval_scores(model, tokenizer, flat)
            start = 0
            for k, n in enumerate(counts):
                result[k][dim] = sum(sent[start:start + n]) / n
                start += n
        else:
            inputs = [question(dim, it["summary"], src=it["src"], ref=it["ref"]) for it in items]
            for k, s in enumerate(unieval_scores(model, tokenizer, inputs)):
                result[k][dim] = s
    for r in result:
        r["overall"] = sum(r.values()) / len(r)
    return result


def unambiguous(text):
    """No abbreviation, initial or decimal a splitter could read two ways."""
    words = text.split()
    return not any(re.fullmatch(r"[A-Za-z]{1,3}\.", w) or re.search(r"\.\w", w) for w in words)


SPIECE_TEXTS = [
    "question: Is this a fluent paragraph? </s> paragraph: The cat sat on the mat.",
    "  Leading and  double   spaces, trailing ones   ",
    "Yes",
    "No",
    "fill <extra_id_0> and <extra_id_99> here",
    "Ünïcödé café naïve — “quotes” 12.5%",
    "",
]


def spiece_golden(texts):
    model = OUT / "spiece.model"
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(texts), model_prefix=str(OUT / "spiece"), vocab_size=400,
        model_type="unigram", pad_id=0, eos_id=1, unk_id=2, bos_id=-1,
        character_coverage=1.0, minloglevel=2)
    (OUT / "spiece.vocab").unlink()
    # add_prefix_space=True as the converter read it when UniEval was released
    # (transformers 4.x before 4.41 prepended "▁" to the first word; 4.57 converts a
    # repository without tokenizer.json with prepend_scheme "never", a regression).
    fast = tf.T5TokenizerFast(vocab_file=str(model), from_slow=True, legacy=True,
                              add_prefix_space=True)
    slow = tf.T5Tokenizer(vocab_file=str(model), legacy=True)
    return {
        "texts": SPIECE_TEXTS,
        "fast": [fast(t)["input_ids"] for t in SPIECE_TEXTS],
        "slow": [slow(t)["input_ids"] for t in SPIECE_TEXTS],
    }


def main():
    torch.manual_seed(0)
    summeval = [json.loads(line) for line in open(DATA / "summeval.jsonl", encoding="utf-8")]
    wmt = [json.loads(line) for line in open(DATA / "wmt21_de_en.jsonl", encoding="utf-8")]
    texts = [r["src"] for r in summeval[:60]] + [r["ref_a"] for r in wmt[:300]]
    texts += ["question: Is this a fluent paragraph? Yes No"] * 5
    tok = train_tokenizer(texts)
    if OUT.exists():
        shutil.rmtree(OUT)
    OUT.mkdir(parents=True)
    vocab = tok.get_vocab_size()
    golden = {"models": {}}
    for name, v1_1, seed in [("tiny", True, 5), ("tiny-v1", False, 6)]:
        model = draw(tf.T5ForConditionalGeneration(t5_config(vocab, v1_1)), seed).eval()
        folder = OUT / name
        model.save_pretrained(folder)
        (folder / "generation_config.json").unlink(missing_ok=True)
        tok.save(str(folder / "tokenizer.json"))
        tokenizer = tf.PreTrainedTokenizerFast(
            tokenizer_file=str(folder / "tokenizer.json"), eos_token="</s>", unk_token="<unk>",
            pad_token="<pad>", model_max_length=MAX_LENGTH)
        model = tf.T5ForConditionalGeneration.from_pretrained(folder, dtype=torch.float32).eval()
        rows = [wmt[3]["ref_a"], wmt[8]["ref_a"][:40]]
        golden["models"][name] = {
            "hidden": hidden_and_logits(model, tokenizer, rows, vocab),
            "generate": generations(model, tokenizer, [wmt[5]["ref_a"], wmt[12]["src"][:60]]),
        }
        if name == "tiny":
            items = []
            for line, row in enumerate(summeval, 1):
                for system, out in sorted(row["systems"].items()):
                    summary = out["summary"]
                    if len(items) < ITEMS and unambiguous(summary) and line % 7 == 1:
                        items.append({"line": line, "system": system, "summary": summary,
                                      "src": row["src"], "ref": row["ref"],
                                      "sentences": SENTENCE_END.split(summary.strip())})
                        break
            sums = summarization(model, tokenizer, items)
            cut = sum(len(tokenizer(question("coherence", it["summary"], src=it["src"]))
                          ["input_ids"]) > MAX_LENGTH for it in items)
            golden["unieval"] = {
                "yes_no": [tokenizer("Yes")["input_ids"][0], tokenizer("No")["input_ids"][0]],
                "cut": cut,
                "items": [{"line": it["line"], "system": it["system"],
                           "sentences": len(it["sentences"]), **s}
                          for it, s in zip(items, sums)],
            }
            # Fact is consistency alone, per sentence, without an overall.
            golden["unieval"]["first_input_ids"] = tokenizer(
                question("consistency", items[0]["sentences"][0], src=items[0]["src"])
            )["input_ids"][:40]
    golden["spiece"] = spiece_golden(texts)
    golden["buckets"] = {
        str(bidirectional): [
            int(tf.models.t5.modeling_t5.T5Attention._relative_position_bucket(
                torch.tensor([rel]), bidirectional=bidirectional, num_buckets=32,
                max_distance=128)[0])
            for rel in range(-300, 301)]
        for bidirectional in (True, False)
    }
    golden["_about"] = ("transformers %s, torch %s, fp32 CPU; scripts/t5_parity.py"
                        % (tf.__version__, torch.__version__))
    GOLDEN.mkdir(parents=True, exist_ok=True)
    (GOLDEN / "t5_parity.json").write_text(json.dumps(golden, separators=(",", ":")))
    print("unieval inputs cut:", golden["unieval"]["cut"],
          "files:", sorted(p.name for p in (OUT / "tiny").iterdir()))


if __name__ == "__main__":
    main()
