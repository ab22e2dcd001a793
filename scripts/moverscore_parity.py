#!/usr/bin/env python3
"""Golden values that hold Blindspot's MoverScore (src/metrics/moverscore.rs)
to AIPHES/emnlp19-moverscore's `moverscore_v2.word_mover_score`.

`moverscore_v2` loads distilbert-base-uncased from the hub when it is
imported, which cannot happen here, so its steps are reproduced below line
for line on a tiny encoder: [CLS] + WordPiece tokens cut at max_len - 2 +
[SEP]; the last layer of a batched, padded DistilBERT pass; subword pieces
(`##`), single punctuation characters and stop words zeroed (embedding and
weight); embeddings of the reference and hypothesis concatenated and
L2-normalised; `batched_cdist_l2` distances; idf weights normalised to sum
1 per side; pyemd's `emd_with_flow`; score = 1 - sum(flow * distance).

Writes, all committed (small):

- tests/fixtures/moverscore/tiny/: a random DistilBertModel (the v2 default's
  architecture; 64 positions) with a 1000-entry uncased WordPiece tokenizer:
  single characters and the BERT vocabulary entries (all-MiniLM-L6-v2's,
  from models/) most used on tests/data, so `##` pieces and punctuation
  occur;
- tests/golden/moverscore.json: scores of 45 pairs (40 WMT21 segments, 5
  SummEval summaries against their reference, several past 64 tokens) with
  idf dictionaries over the references and over the hypotheses (as the
  README's usage computes them), and with uniform weights
  (`defaultdict(lambda: 1.)`), each as the released code computes them
  (float32 distances) and with the distances in float64, plus an EMD check
  against pyemd on random histograms.

Usage (venv outside the repo):
    ~/.cache/blindspot-py/bin/pip install pyemd
    ~/.cache/blindspot-py/bin/python scripts/moverscore_parity.py
"""
import json
import pathlib
import shutil
import string
from collections import Counter, defaultdict
from math import log

import numpy as np
import torch
import transformers as tf
from pyemd import emd_with_flow
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

ROOT = pathlib.Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
OUT = ROOT / "tests" / "fixtures" / "moverscore" / "tiny"
GOLDEN = ROOT / "tests" / "golden"
MINILM = ROOT / "models" / "all-MiniLM-L6-v2"
MAX_LEN = 64
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def rows(name):
    with open(DATA / name, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def build_tokenizer(texts):
    """A 1000-entry uncased WordPiece vocabulary, chosen deterministically
    (tokenizers' WordPiece trainer is not): the special tokens, single
    characters with and without `##`, then the entries of MiniLM's BERT
    vocabulary most used on `texts` (ties by spelling)."""
    minilm = Tokenizer.from_file(str(MINILM / "tokenizer.json"))
    counts = Counter(t for text in texts for t in minilm.encode(text, add_special_tokens=False).tokens)
    chars = sorted(set(string.ascii_lowercase + string.digits + string.punctuation))
    vocab = SPECIAL + chars + ["##" + c for c in chars]
    for token, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        if len(vocab) == 1000:
            break
        if token not in vocab:
            vocab.append(token)
    tok = Tokenizer(models.WordPiece({t: i for i, t in enumerate(vocab)}, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    return tok


# --- moverscore_v2's steps, with its globals as arguments -------------------

def truncate(tokenizer, tokens):
    if len(tokens) > tokenizer.model_max_length - 2:
        tokens = tokens[0:(tokenizer.model_max_length - 2)]
    return tokens


def get_idf_dict(tokenizer, arr):
    idf_count = Counter()
    for a in arr:
        a = ["[CLS]"] + truncate(tokenizer, tokenizer.tokenize(a)) + ["[SEP]"]
        idf_count.update(set(tokenizer.convert_tokens_to_ids(a)))
    idf_dict = defaultdict(lambda: log((len(arr) + 1) / 1))
    idf_dict.update({idx: log((len(arr) + 1) / (c + 1)) for (idx, c) in idf_count.items()})
    return idf_dict


def padding(arr, pad_token, dtype=torch.long):
    lens = torch.LongTensor([len(a) for a in arr])
    max_len = lens.max().item()
    padded = torch.ones(len(arr), max_len, dtype=dtype) * pad_token
    mask = torch.zeros(len(arr), max_len, dtype=torch.long)
    for i, a in enumerate(arr):
        padded[i, :lens[i]] = torch.tensor(a, dtype=dtype)
        mask[i, :lens[i]] = 1
    return padded, lens, mask


def get_bert_embedding(model, tokenizer, all_sens, idf_dict):
    tokens = [["[CLS]"] + truncate(tokenizer, tokenizer.tokenize(a)) + ["[SEP]"] for a in all_sens]
    arr = [tokenizer.convert_tokens_to_ids(a) for a in tokens]
    idf_weights = [[idf_dict[i] for i in a] for a in arr]
    pad_token = tokenizer.convert_tokens_to_ids(["[PAD]"])[0]
    padded, lens, mask = padding(arr, pad_token, dtype=torch.long)
    padded_idf, _, _ = padding(idf_weights, pad_token, dtype=torch.float)
    with torch.no_grad():
        out = model(input_ids=padded, attention_mask=mask, output_hidden_states=True)
    return torch.stack(out.hidden_states), lens, mask, padded_idf, tokens


def batched_cdist_l2(x1, x2, double=False):
    if double:
        x1, x2 = x1.double(), x2.double()
    x1_norm = x1.pow(2).sum(dim=-1, keepdim=True)
    x2_norm = x2.pow(2).sum(dim=-1, keepdim=True)
    return torch.baddbmm(x2_norm.transpose(-2, -1), x1, x2.transpose(-2, -1),
                         alpha=-2).add_(x1_norm).clamp_min_(1e-30).sqrt_()


def word_mover_score(model, tokenizer, refs, hyps, idf_dict_ref, idf_dict_hyp, stop_words=(),
                     double=False):
    ref_embedding, _, _, ref_idf, ref_tokens = get_bert_embedding(model, tokenizer, refs, idf_dict_ref)
    hyp_embedding, _, _, hyp_idf, hyp_tokens = get_bert_embedding(model, tokenizer, hyps, idf_dict_hyp)
    ref_embedding = ref_embedding[-1]
    hyp_embedding = hyp_embedding[-1]
    for i in range(len(ref_tokens)):
        ref_ids = [k for k, w in enumerate(ref_tokens[i])
                   if w in stop_words or "##" in w or w in set(string.punctuation)]
        hyp_ids = [k for k, w in enumerate(hyp_tokens[i])
                   if w in stop_words or "##" in w or w in set(string.punctuation)]
        ref_embedding[i, ref_ids, :] = 0
        hyp_embedding[i, hyp_ids, :] = 0
        ref_idf[i, ref_ids] = 0
        hyp_idf[i, hyp_ids] = 0
    raw = torch.cat([ref_embedding, hyp_embedding], 1)
    raw.div_(torch.norm(raw, dim=-1).unsqueeze(-1) + 1e-30)
    distance_matrix = batched_cdist_l2(raw, raw, double).double().cpu().numpy()
    preds = []
    for i in range(len(ref_tokens)):
        c1 = np.zeros(raw.shape[1], dtype=float)
        c2 = np.zeros(raw.shape[1], dtype=float)
        c1[:len(ref_idf[i])] = ref_idf[i]
        c2[len(ref_idf[i]):] = hyp_idf[i]
        c1 = c1 / (np.sum(c1) + 1e-30)
        c2 = c2 / (np.sum(c2) + 1e-30)
        dst = distance_matrix[i]
        _, flow = emd_with_flow(c1, c2, dst)
        flow = np.array(flow, dtype=np.float32)
        preds.append(float(1 - np.sum(flow * dst)))
    return preds


def main():
    torch.manual_seed(0)
    wmt, summeval = rows("wmt21_de_en.jsonl"), rows("summeval.jsonl")
    tok = build_tokenizer([r[k] for r in wmt[:400] for k in ("ref_a", "src")])
    tokenizer = tf.PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
        sep_token="[SEP]", mask_token="[MASK]", model_max_length=MAX_LEN)
    config = tf.DistilBertConfig(vocab_size=tok.get_vocab_size(), dim=32, n_layers=2, n_heads=4,
                                 hidden_dim=48, max_position_embeddings=MAX_LEN, activation="gelu")
    model = tf.DistilBertModel(config)
    g = torch.Generator().manual_seed(5)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "layer_norm.weight" in name or "LayerNorm.weight" in name:
                p.copy_(1 + 0.2 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.3 * torch.randn(p.shape, generator=g))
    model.eval()
    if OUT.exists():
        shutil.rmtree(OUT)
    model.save_pretrained(OUT)
    tok.save(str(OUT / "tokenizer.json"))
    model = tf.DistilBertModel.from_pretrained(OUT, dtype=torch.float32).eval()

    pairs = []
    for line, r in enumerate(wmt, 1):
        if r.get("systems") and len(pairs) < 40:
            system = sorted(r["systems"])[1]
            pairs.append({"file": "wmt21_de_en.jsonl", "line": line, "ref": "ref_a",
                          "hyp": f"systems/{system}"})
    for line, r in enumerate(summeval[:5], 1):
        system = sorted(r["systems"])[0]
        pairs.append({"file": "summeval.jsonl", "line": line, "ref": "ref",
                      "hyp": f"systems/{system}/summary"})

    def field(p, key):
        row = (wmt if p["file"].startswith("wmt") else summeval)[p["line"] - 1]
        value = row
        for part in p[key].split("/"):
            value = value[part]
        return value[0] if isinstance(value, list) else value

    refs = [field(p, "ref") for p in pairs]
    hyps = [field(p, "hyp") for p in pairs]
    uniform = defaultdict(lambda: 1.0)
    idf_dicts = (get_idf_dict(tokenizer, refs), get_idf_dict(tokenizer, hyps))
    idf = word_mover_score(model, tokenizer, refs, hyps, *idf_dicts)
    plain = word_mover_score(model, tokenizer, refs, hyps, uniform, uniform)
    # The released code's distances are float32 |x|^2 + |y|^2 - 2xy: for close
    # tokens that cancels to noise of about 1e-4 in the score. The same steps
    # with the distances in float64 are what an exact implementation matches.
    idf64 = word_mover_score(model, tokenizer, refs, hyps, *idf_dicts, double=True)
    plain64 = word_mover_score(model, tokenizer, refs, hyps, uniform, uniform, double=True)
    cut = sum(len(tokenizer.tokenize(t)) > MAX_LEN - 2 for t in refs + hyps)
    for k, p in enumerate(pairs):
        p.update(idf=idf[k], uniform=plain[k], idf_f64=idf64[k], uniform_f64=plain64[k])

    # pyemd on random histograms (some bins empty) and random costs.
    rng = np.random.default_rng(3)
    emd_cases = []
    for n, m in [(3, 4), (7, 5), (12, 12), (20, 9)]:
        a = rng.random(n) * (rng.random(n) > 0.2)
        b = rng.random(m) * (rng.random(m) > 0.2)
        a, b = a / a.sum(), b / b.sum()
        cost = rng.random((n, m))
        c1 = np.concatenate([a, np.zeros(m)])
        c2 = np.concatenate([np.zeros(n), b])
        d = np.zeros((n + m, n + m))
        d[:n, n:] = cost
        d[n:, :n] = cost.T
        value, _ = emd_with_flow(c1, c2, d)
        emd_cases.append({"a": a.tolist(), "b": b.tolist(), "cost": cost.tolist(), "emd": value})

    GOLDEN.mkdir(parents=True, exist_ok=True)
    (GOLDEN / "moverscore.json").write_text(json.dumps({
        "_about": ("moverscore_v2.word_mover_score's steps (AIPHES/emnlp19-moverscore), "
                   "transformers %s, torch %s, pyemd, fp32 CPU; scripts/moverscore_parity.py "
                   "(%d texts past %d tokens)" % (tf.__version__, torch.__version__, cut, MAX_LEN)),
        "pairs": pairs,
        "emd": emd_cases,
    }, separators=(",", ":")))
    print("texts cut:", cut, "idf:", idf[:3], "uniform:", plain[:3])


if __name__ == "__main__":
    main()
