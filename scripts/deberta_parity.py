#!/usr/bin/env python3
"""Golden values that hold Blindspot's DeBERTa-v2/v3 module
(src/models/deberta.rs) to transformers, in the shape of
scripts/electra_parity.py (helpers from scripts/plm_parity.py), so the older
fixtures stay byte-identical.

Writes, all committed (small):

- tests/fixtures/plm/deberta_v3/: a DebertaV2Model as DeBERTa-v3 and
  mDeBERTa-v3 are configured: relative attention with log-bucketed
  positions (8 buckets over 64 positions, so distances past 4 are bucketed),
  c2p and p2c sharing the content projections (`share_att_key`), a layer
  norm on the relative embeddings, no absolute positions, no token types;
- tests/fixtures/plm/deberta_v2_conv/: as deberta-v2-xlarge(-mnli) is
  configured: the convolution after the first layer (kernel 3, gelu),
  separate position projections (`pos_key_proj`, `pos_query_proj`),
  absolute positions and token types too, and narrower embeddings projected
  up (`embed_proj`, no bias);
- tests/fixtures/plm/deberta_cls/: a DebertaV2ForSequenceClassification
  (context pooler with gelu, then the classifier), labels contradiction /
  neutral / entailment;
- tests/fixtures/plm/deberta_v1/ and deberta_v1_cls/: DeBERTa v1
  (`model_type: deberta`) as microsoft/deberta-large-mnli is configured: the
  fused `in_proj` with `q_bias` and `v_bias`, `pos_proj` (no bias) and
  `pos_q_proj`, 32 relative positions (so the 40-token input is clamped), no
  absolute positions, no token types; the second with the classifier;
- tests/golden/deberta_parity.json: a padded batch (40 and 23 tokens) and
  transformers' hidden states (every layer) and classifier logits, fp32 on CPU.

Usage (venv outside the repo):
    ~/.cache/blindspot-py/bin/python scripts/deberta_parity.py
"""
import json
import shutil

import torch
import transformers as tf

from plm_parity import FIXTURES, GOLDEN, LABELS, padded, real, widen

BATCH = [
    [1] + [(37 * i + 11) % 990 + 5 for i in range(38)] + [2],
    [1] + [(53 * i + 7) % 990 + 5 for i in range(21)] + [2],
]

V3 = dict(vocab_size=1000, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
          intermediate_size=48, max_position_embeddings=64, relative_attention=True,
          position_buckets=8, max_relative_positions=-1, pos_att_type=["p2c", "c2p"],
          share_att_key=True, norm_rel_ebd="layer_norm", position_biased_input=False,
          type_vocab_size=0, hidden_act="gelu", pad_token_id=0, layer_norm_eps=1e-7)


def checkpoints():
    conv = dict(V3, share_att_key=False, norm_rel_ebd="none", position_biased_input=True,
                type_vocab_size=2, conv_kernel_size=3, conv_act="gelu", embedding_size=24,
                position_buckets=16)
    cls = dict(id2label=LABELS, label2id={v: k for k, v in LABELS.items()}, pooler_hidden_size=32,
               pooler_hidden_act="gelu")
    v1 = dict(vocab_size=1000, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
              intermediate_size=48, max_position_embeddings=64, relative_attention=True,
              max_relative_positions=32, pos_att_type="c2p|p2c", position_biased_input=False,
              type_vocab_size=0, hidden_act="gelu", pad_token_id=0, layer_norm_eps=1e-7)
    return [
        ("deberta_v3", tf.DebertaV2Model(tf.DebertaV2Config(**V3))),
        ("deberta_v2_conv", tf.DebertaV2Model(tf.DebertaV2Config(**conv))),
        ("deberta_cls", tf.DebertaV2ForSequenceClassification(tf.DebertaV2Config(**V3, **cls))),
        ("deberta_v1", tf.DebertaModel(tf.DebertaConfig(**v1))),
        ("deberta_v1_cls", tf.DebertaForSequenceClassification(tf.DebertaConfig(**v1, **cls))),
    ]


def main():
    torch.manual_seed(0)
    golden = {"_about": "transformers %s, torch %s, fp32 CPU; scripts/deberta_parity.py"
                        % (tf.__version__, torch.__version__)}
    for seed, (name, model) in enumerate(checkpoints(), start=200):
        widen(model, seed).eval()
        out_dir = FIXTURES / name
        if out_dir.exists():
            shutil.rmtree(out_dir)
        model.save_pretrained(out_dir)
        (out_dir / "generation_config.json").unlink(missing_ok=True)
        model = type(model).from_pretrained(out_dir, dtype=torch.float32).eval()
        ids, mask = padded(BATCH, 0)
        types = torch.zeros_like(ids)
        types[:, 20:] = 1
        types = types * mask
        kwargs = {"token_type_ids": types} if model.config.type_vocab_size > 0 else {}
        with torch.no_grad():
            out = model(input_ids=ids, attention_mask=mask, output_hidden_states=True, **kwargs)
        entry = {"ids": BATCH, "hidden_states": [real(h, BATCH) for h in out.hidden_states]}
        if kwargs:
            entry["types"] = real(types, BATCH)
        if name.endswith("_cls"):
            entry["logits"] = out.logits.tolist()
        golden[name] = entry
        print(name, sorted(p.name for p in out_dir.iterdir()))
    (GOLDEN / "deberta_parity.json").write_text(json.dumps(golden, separators=(",", ":")))


if __name__ == "__main__":
    main()
