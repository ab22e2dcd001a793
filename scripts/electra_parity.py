#!/usr/bin/env python3
"""Golden values that hold Blindspot's ELECTRA support (src/models/bert.rs,
src/models/config.rs) to transformers, in the shape of scripts/plm_parity.py
(whose helpers it reuses) but for ELECTRA only, so the older fixtures stay
byte-identical.

Writes, all committed (small):

- tests/fixtures/plm/electra/: an ElectraForPreTraining discriminator
  (`google/electra-*-discriminator`'s architecture) whose 24-wide embeddings
  are projected up to 32 (`embeddings_project`, as in electra-small/base);
- tests/fixtures/plm/electra_wide/: an ElectraModel whose embeddings are as
  wide as the layers, so it has no projection (as electra-large);
- tests/fixtures/plm/electra_cls/: an ElectraForSequenceClassification (its
  head: dense, gelu, out_proj), labels contradiction/neutral/entailment;
- tests/golden/electra_parity.json: a padded batch's ids and transformers'
  hidden states (every layer) and classifier logits, fp32 on CPU.

Usage (venv outside the repo):
    ~/.cache/blindspot-py/bin/python scripts/electra_parity.py
"""
import json
import shutil

import torch
import transformers as tf

from plm_parity import BATCH, FIXTURES, GOLDEN, LABELS, SMALL, padded, real, widen


def checkpoints():
    electra = dict(SMALL, embedding_size=24)
    cls = dict(id2label=LABELS, label2id={v: k for k, v in LABELS.items()})
    return [
        ("electra", tf.ElectraForPreTraining(tf.ElectraConfig(**electra))),
        ("electra_wide", tf.ElectraModel(tf.ElectraConfig(**dict(electra, embedding_size=32)))),
        ("electra_cls", tf.ElectraForSequenceClassification(tf.ElectraConfig(**electra, **cls))),
    ]


def main():
    torch.manual_seed(0)
    golden = {"_about": "transformers %s, torch %s, fp32 CPU; scripts/electra_parity.py"
                        % (tf.__version__, torch.__version__)}
    for seed, (name, model) in enumerate(checkpoints(), start=100):
        widen(model, seed).eval()
        out_dir = FIXTURES / name
        if out_dir.exists():
            shutil.rmtree(out_dir)
        model.save_pretrained(out_dir)
        (out_dir / "generation_config.json").unlink(missing_ok=True)
        model = type(model).from_pretrained(out_dir, dtype=torch.float32).eval()
        assert hasattr(model.base_model, "embeddings_project") == (name != "electra_wide"), name
        ids, mask = padded(BATCH, model.config.pad_token_id or 0)
        with torch.no_grad():
            out = model(input_ids=ids, attention_mask=mask, output_hidden_states=True)
        entry = {"ids": BATCH, "hidden_states": [real(h, BATCH) for h in out.hidden_states]}
        if name == "electra_cls":
            entry["logits"] = out.logits.tolist()
        golden[name] = entry
        print(name, sorted(p.name for p in out_dir.iterdir()))
    (GOLDEN / "electra_parity.json").write_text(json.dumps(golden, separators=(",", ":")))


if __name__ == "__main__":
    main()
