#!/usr/bin/env python3
"""Golden values that hold Blindspot's MoverScore v1 (src/metrics/moverscore.rs,
`moverscore-v1`) to AIPHES/emnlp19-moverscore's `moverscore.word_mover_score`
as released on PyPI (moverscore 1.0.3).

`moverscore.py` downloads its BERT-MNLI (MNLI_BERT.zip, a GitHub release) and
moves it to CUDA when it is imported, which cannot happen here, so its steps
are reproduced below line for line on a tiny encoder, with its globals as
arguments:

- [CLS] + WordPiece tokens + [SEP] (1.0.3 cuts at `tokenizer.max_len - 2`:
  pytorch_pretrained_bert leaves it unbounded for a local folder, so its
  model fails past 512 tokens; here texts are cut at the model's limit as
  v2 does, and the golden pairs stay within 64 tokens);
- `output_all_encoded_layers=True` of a batched, padded BERT pass: each
  layer's output, without the embeddings (transformers' hidden_states[1:]);
- every layer's vectors L2-normalised; over the last 5 layers the element-
  wise min, mean and max, concatenated;
- tokens that are single punctuation characters, subword pieces (`##`) or
  stop words dropped; the rest grouped in windows of `n_gram` consecutive
  kept tokens (stride 1; one window of all of them when fewer), each window
  the idf-weighted mean of its vectors (`idf / (sum + 1e-5)`) with the sum of
  its idf as its weight;
- the windows of both texts normalised (`norm + 1e-6`), SQUARED Euclidean
  distances (`pairwise_distances` has no square root), weights divided by
  their sum + 1e-5 (so the two sides' totals differ slightly), and pyemd's
  `emd` (extra mass penalised by the largest distance); score = 1 - emd.

Writes, all committed (small):

- tests/fixtures/moverscore/tiny-bert-mnli/: a random 6-layer
  BertForSequenceClassification with 3 labels (the shape of v1's BERT-MNLI;
  6 layers so that "the last 5" leaves one out) and the tokenizer of
  tests/fixtures/moverscore/tiny (written by scripts/moverscore_parity.py);
- tests/golden/moverscore_v1.json: scores of 36 pairs (WMT21 segments and
  short texts) for n_gram 1 and 2 (and 4 with uniform weights), with idf dictionaries over the references
  and over the hypotheses (as the README's usage computes them) and with
  uniform weights (`defaultdict(lambda: 1.)`), as the released code computes
  them (float32 distances, pyemd's C++ FastEMD as in 2019) and with float64 distances and the exact
  transport (POT's network simplex, with the same extra-mass rule); and 9
  SummEval summaries (3 articles x 3 systems) scored as
  examples/run_summarization.py scores them: the mean over the article's 11
  references, idf over the articles' references and over the summaries.

Usage (venv outside the repo):
    ~/.cache/blindspot-py/bin/pip install torch transformers pyemd pot
    ~/.cache/blindspot-py/bin/python scripts/moverscore_v1_parity.py
"""
import json
import pathlib
import shutil
import string
from collections import defaultdict

import numpy as np
import ot
import torch
import transformers as tf
from pyemd import emd

# The steps moverscore.py shares with moverscore_v2.py word for word
# (truncate, get_idf_dict, padding) and the data reader.
from moverscore_parity import get_idf_dict, padding, rows, truncate

ROOT = pathlib.Path(__file__).resolve().parent.parent
TOKENIZER = ROOT / "tests" / "fixtures" / "moverscore" / "tiny" / "tokenizer.json"
OUT = ROOT / "tests" / "fixtures" / "moverscore" / "tiny-bert-mnli"
GOLDEN = ROOT / "tests" / "golden"
MAX_LEN = 64


def get_bert_embedding(model, tokenizer, all_sens, idf_dict):
    tokens = [["[CLS]"] + truncate(tokenizer, tokenizer.tokenize(a)) + ["[SEP]"] for a in all_sens]
    arr = [tokenizer.convert_tokens_to_ids(a) for a in tokens]
    idf_weights = [[idf_dict[i] for i in a] for a in arr]
    pad_token = tokenizer.convert_tokens_to_ids(["[PAD]"])[0]
    padded, lens, mask = padding(arr, pad_token, dtype=torch.long)
    padded_idf, _, _ = padding(idf_weights, pad_token, dtype=torch.float)
    with torch.no_grad():
        out = model.bert(input_ids=padded, token_type_ids=torch.zeros_like(padded),
                         attention_mask=mask, output_hidden_states=True)
    # pytorch_pretrained_bert's encoded layers: every layer, not the embeddings.
    return torch.stack(out.hidden_states[1:]), lens, mask, padded_idf, tokens


def pairwise_distances(x, y, double=False):
    if double:
        x, y = x.double(), y.double()
        return ((x[:, None, :] - y[None, :, :]) ** 2).sum(-1)
    x_norm = (x**2).sum(1).view(-1, 1)
    y_norm = (y**2).sum(1).view(1, -1)
    y_t = torch.transpose(y, 0, 1)
    dist = x_norm + y_norm - 2.0 * torch.mm(x, y_t)
    return torch.clamp(dist, 0.0, np.inf)


def slide_window(a, w=3, o=2):
    if a.size - w + 1 <= 0:
        w = a.size
    sh = (a.size - w + 1, w)
    st = a.strides * 2
    view = np.lib.stride_tricks.as_strided(a, strides=st, shape=sh)[0::o]
    return view.copy().tolist()


def _safe_divide(numerator, denominator):
    return numerator / (denominator + 0.00001)


def load_ngram(ids, embedding, idf, n, o):
    new_a = []
    new_idf = []
    slide_wins = slide_window(np.array(ids), w=n, o=o)
    for slide_win in slide_wins:
        new_idf.append(idf[slide_win].sum().item())
        scale = _safe_divide(idf[slide_win], idf[slide_win].sum(0)).unsqueeze(-1)
        tmp = (scale * embedding[slide_win]).sum(0)
        new_a.append(tmp)
    new_a = torch.stack(new_a, 0)
    return new_a, new_idf


def exact_emd_hat(c1, c2, d):
    """pyemd's emd (FastEMD's emd_hat: the smaller total moved at least cost,
    the difference charged at the largest distance) solved exactly in
    float64: POT's network simplex on the histograms with a dummy bin that
    takes the extra mass at no cost."""
    s1, s2 = c1.sum(), c2.sum()
    a = np.append(c1, max(s2 - s1, 0.0))
    b = np.append(c2, max(s1 - s2, 0.0))
    m = np.zeros((len(a), len(b)))
    m[:-1, :-1] = d
    flow = ot.emd(a, b, m, numItermax=10_000_000)
    return float((flow * m).sum() + abs(s1 - s2) * d.max())


def word_mover_score(model, tokenizer, refs, hyps, idf_dict_ref, idf_dict_hyp, stop_words=(),
                     n_gram=1, remove_subwords=True, exact=False):
    preds = []
    ref_embedding, _, _, ref_idf, ref_tokens = get_bert_embedding(model, tokenizer, refs, idf_dict_ref)
    hyp_embedding, _, _, hyp_idf, hyp_tokens = get_bert_embedding(model, tokenizer, hyps, idf_dict_hyp)

    ref_embedding.div_(torch.norm(ref_embedding, dim=-1).unsqueeze(-1))
    hyp_embedding.div_(torch.norm(hyp_embedding, dim=-1).unsqueeze(-1))

    ref_embedding_max, _ = torch.max(ref_embedding[-5:], dim=0, out=None)
    hyp_embedding_max, _ = torch.max(hyp_embedding[-5:], dim=0, out=None)

    ref_embedding_min, _ = torch.min(ref_embedding[-5:], dim=0, out=None)
    hyp_embedding_min, _ = torch.min(hyp_embedding[-5:], dim=0, out=None)

    ref_embedding_avg = ref_embedding[-5:].mean(0)
    hyp_embedding_avg = hyp_embedding[-5:].mean(0)

    ref_embedding = torch.cat([ref_embedding_min, ref_embedding_avg, ref_embedding_max], -1)
    hyp_embedding = torch.cat([hyp_embedding_min, hyp_embedding_avg, hyp_embedding_max], -1)

    for i in range(len(ref_tokens)):
        if remove_subwords:
            ref_ids = [k for k, w in enumerate(ref_tokens[i])
                       if w not in set(string.punctuation) and '##' not in w and w not in stop_words]
            hyp_ids = [k for k, w in enumerate(hyp_tokens[i])
                       if w not in set(string.punctuation) and '##' not in w and w not in stop_words]
        else:
            ref_ids = [k for k, w in enumerate(ref_tokens[i])
                       if w not in set(string.punctuation) and w not in stop_words]
            hyp_ids = [k for k, w in enumerate(hyp_tokens[i])
                       if w not in set(string.punctuation) and w not in stop_words]

        ref_embedding_i, ref_idf_i = load_ngram(ref_ids, ref_embedding[i], ref_idf[i], n_gram, 1)
        hyp_embedding_i, hyp_idf_i = load_ngram(hyp_ids, hyp_embedding[i], hyp_idf[i], n_gram, 1)

        raw = torch.cat([ref_embedding_i, hyp_embedding_i], 0)
        raw.div_(torch.norm(raw, dim=-1).unsqueeze(-1) + 0.000001)

        distance_matrix = pairwise_distances(raw, raw, double=exact)

        c1 = np.zeros(len(ref_idf_i) + len(hyp_idf_i), dtype=np.double)
        c2 = np.zeros(len(ref_idf_i) + len(hyp_idf_i), dtype=np.double)

        c1[:len(ref_idf_i)] = ref_idf_i
        c2[-len(hyp_idf_i):] = hyp_idf_i

        c1 = _safe_divide(c1, np.sum(c1))
        c2 = _safe_divide(c2, np.sum(c2))
        d = distance_matrix.double().cpu().numpy()
        score = 1 - (exact_emd_hat(c1, c2, d) if exact else emd(c1, c2, d, backend="cpp"))
        preds.append(score)
    return preds


def main():
    wmt = rows("wmt21_de_en.jsonl")
    tokenizer = tf.PreTrainedTokenizerFast(
        tokenizer_file=str(TOKENIZER), unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
        sep_token="[SEP]", mask_token="[MASK]", model_max_length=MAX_LEN)
    config = tf.BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=6,
                           num_attention_heads=4, intermediate_size=48,
                           max_position_embeddings=MAX_LEN, num_labels=3,
                           id2label={0: "contradiction", 1: "entailment", 2: "neutral"},
                           label2id={"contradiction": 0, "entailment": 1, "neutral": 2})
    torch.manual_seed(0)
    model = tf.BertForSequenceClassification(config)
    g = torch.Generator().manual_seed(11)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "LayerNorm.weight" in name:
                p.copy_(1 + 0.2 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.3 * torch.randn(p.shape, generator=g))
    model.eval()
    if OUT.exists():
        shutil.rmtree(OUT)
    model.save_pretrained(OUT)
    shutil.copy(TOKENIZER, OUT / "tokenizer.json")
    model = tf.BertForSequenceClassification.from_pretrained(OUT, dtype=torch.float32).eval()

    pairs = []
    for line, r in enumerate(wmt, 1):
        if r.get("systems") and len(pairs) < 32:
            system = sorted(r["systems"])[2]
            ref, hyp = r["ref_a"], r["systems"][system]
            if len(tokenizer.tokenize(ref)) <= MAX_LEN - 2 and len(tokenizer.tokenize(hyp)) <= MAX_LEN - 2:
                # The texts stay in tests/data: the golden file names them.
                pairs.append({"file": "wmt21_de_en.jsonl", "line": line, "ref": "ref_a",
                              "hyp": f"systems/{system}", "texts": (ref, hyp)})
    # Short texts: a copy, one kept token (a window of all of them for n = 2),
    # stop words, punctuation and subword pieces.
    for ref, hyp in [("The cat sat on the mat.", "The cat sat on the mat."),
                     ("Storms closed the airport.", "Airport!"),
                     ("The minister resigned on Tuesday.", "On Tuesday, the minister did not resign."),
                     ("Unbelievably, prices dropped.", "Prices fell, unbelievably.")]:
        pairs.append({"ref_text": ref, "hyp_text": hyp, "texts": (ref, hyp)})
    refs = [p["texts"][0] for p in pairs]
    hyps = [p["texts"][1] for p in pairs]
    for p in pairs:
        del p["texts"]
    uniform = defaultdict(lambda: 1.0)
    idf_dicts = (get_idf_dict(tokenizer, refs), get_idf_dict(tokenizer, hyps))
    stop = ["the", "on", "of", "a", "and"]
    for n in (1, 2):
        for key, dicts in (("idf", idf_dicts), ("uniform", (uniform, uniform))):
            released = word_mover_score(model, tokenizer, refs, hyps, *dicts, n_gram=n)
            exact = word_mover_score(model, tokenizer, refs, hyps, *dicts, n_gram=n, exact=True)
            for k, p in enumerate(pairs):
                p[f"{key}_n{n}"] = released[k]
                p[f"{key}_n{n}_exact"] = exact[k]
            print(f"n_gram {n} {key}: max |released - exact| "
                  f"{max(abs(a - b) for a, b in zip(released, exact)):.2e}")
    with_stop = word_mover_score(model, tokenizer, refs, hyps, uniform, uniform, stop_words=stop,
                                 exact=True)
    # Windows of 4: "Airport!" keeps 3 tokens ([CLS] a [SEP] in the tiny
    # vocabulary), so its one window is all of them.
    four = word_mover_score(model, tokenizer, refs, hyps, uniform, uniform, n_gram=4, exact=True)
    for k, p in enumerate(pairs):
        p["uniform_n1_stop_exact"] = with_stop[k]
        p["uniform_n4_exact"] = four[k]
    # Several references, as examples/run_summarization.py scores summaries:
    # each against every reference of its article, the mean; idf over the
    # articles' references (each once) and over the summaries.
    summeval = rows("summeval.jsonl")
    articles = [(line, summeval[line - 1]) for line in (1, 2, 3)]
    summaries = [(line, name) for line, r in articles for name in sorted(r["systems"])[:3]]
    references = [ref for _, r in articles for ref in r["refs"]]
    texts = [summeval[line - 1]["systems"][name]["summary"] for line, name in summaries]
    multi_dicts = (get_idf_dict(tokenizer, references), get_idf_dict(tokenizer, texts))
    multi = []
    for (line, name), text in zip(summaries, texts):
        refs_k = summeval[line - 1]["refs"]
        scores = word_mover_score(model, tokenizer, refs_k, [text] * len(refs_k), *multi_dicts,
                                  n_gram=1, exact=True)
        multi.append({"line": line, "system": name, "idf_n1_exact": float(np.mean(scores))})
    GOLDEN.mkdir(parents=True, exist_ok=True)
    (GOLDEN / "moverscore_v1.json").write_text(json.dumps({
        "_about": ("moverscore.word_mover_score's steps (AIPHES/emnlp19-moverscore, PyPI 1.0.3), "
                   "transformers %s, torch %s, pyemd, POT %s, fp32 CPU; "
                   "scripts/moverscore_v1_parity.py" % (tf.__version__, torch.__version__, ot.__version__)),
        "stop_words": stop,
        "pairs": pairs,
        "summeval_multi_reference": multi,
    }, separators=(",", ":"), ensure_ascii=False))
    print("pairs:", len(pairs), "idf n1:", [round(p["idf_n1"], 6) for p in pairs[:3]])


if __name__ == "__main__":
    main()
