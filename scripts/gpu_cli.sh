#!/usr/bin/env bash
# The CLI end to end on a GPU machine whose container has the NVIDIA driver but
# no Vulkan loader: BERTScore-F of a JSONL file of pairs with a random-weight
# encoder (built there with transformers: real weights do not fit the transfer
# beside the CLI) and MiniLM's tokenizer, on the CPU and on the GPU at several
# BLINDSPOT_LENGTH_STEP values, the autotune cache first cold, then warm. Each
# run's time, and how far its scores are from the CPU's, go to $OUT (or
# ./gpu-cli-logs). The "CLI end to end" rows of BENCHMARKS.md came this way.
#
# SHAPE=minilm (default): all-MiniLM-L6-v2's shape, layer 6. SHAPE=large:
# roberta-large's shape (24 layers of 1024, BERT's vocabulary), layer 17 as
# BERTScore's default for roberta-large. A model already built for the shape in
# this process's /tmp is reused, so one call can run several CLI builds.
#
# Build the CLI on the development machine first, stripped and xz-compressed:
#   cargo build --release --features gpu --bin blindspot
#   strip -o X/blindspot target/release/blindspot && xz -9 X/blindspot
# (`--features gpu,burn/vulkan` for burn's SPIR-V compiler).
#
#   scripts/gpu_cli.sh X/blindspot.xz TOKENIZER_JSON PAIRS_JSONL DEB_DIR
#
# RUNS="cpu gpu16_cold ..." picks runs (default: all, in the order below);
# STEP_LIMIT caps each run's seconds (default 300), so one call fits a short lease.
set -uo pipefail
abs() { (cd "$(dirname "$1")" && echo "$PWD/$(basename "$1")"); }
cli_xz=$(abs "${1:?blindspot.xz}") tokenizer=$(abs "${2:?tokenizer.json}")
pairs=$(abs "${3:?pairs.jsonl}") debs=$(cd "${4:?folder of the Vulkan loader .deb files}" && pwd) || exit 2
out=${OUT:-gpu-cli-logs}
mkdir -p "$out" && out=$(cd "$out" && pwd)
for f in "$debs"/*.deb; do dpkg -x "$f" /; done
ldconfig
export VK_DRIVER_FILES=${VK_DRIVER_FILES:-/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
xz -dkf "$cli_xz" && cli=${cli_xz%.xz} && chmod +x "$cli" || exit 2
shape=${SHAPE:-minilm}
case $shape in
  minilm) dims="384 6 12 1536" layer=6 ;;
  large) dims="1024 24 16 4096" layer=17 ;;
  *) echo "SHAPE is minilm or large, not $shape" >&2; exit 2 ;;
esac
model=/tmp/$shape-random
if [ ! -f "$model/tokenizer.json" ]; then
  python3 - "$model" $dims <<'PY'
import sys, torch, transformers as tf
torch.manual_seed(0)
hidden, layers, heads, inner = map(int, sys.argv[2:])
cfg = tf.BertConfig(hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                    intermediate_size=inner, vocab_size=30522, max_position_embeddings=512)
tf.BertModel(cfg).save_pretrained(sys.argv[1], safe_serialization=True)
PY
  [ $? -eq 0 ] && cp "$tokenizer" "$model/" || exit 2
fi
runs=${RUNS:-"cpu gpu16_cold gpu16 gpu16_again gpu1 gpu1_again gpu32 gpu64 f16_16_cold f16_16"}
# One run: its name, the device, the length step ("" for the device's
# default), and "cold" to empty cubecl's cache of GPU measurements and autotune
# choices first (under the user's cache folder, since the CLI runs outside a
# Cargo project; the driver's own shader cache stays).
run() {
  local name=$1 device=$2 step=$3 cold=${4:-}
  [[ " $runs " == *" $name "* ]] || return 0
  [ "$cold" = cold ] && rm -rf "${XDG_CACHE_HOME:-$HOME/.cache}/cubecl"
  local start ms
  start=$(date +%s%N)
  (cd /tmp && timeout "${STEP_LIMIT:-300}" env -u BLINDSPOT_LENGTH_STEP ${step:+BLINDSPOT_LENGTH_STEP=$step} "$cli" --device "$device" score \
    --input "$pairs" --metrics bertscore-f --model-dir "$model" --layer "$layer" --format jsonl \
    > "$out/$name.jsonl" 2> "$out/$name.err")
  local rc=$?
  ms=$((($(date +%s%N) - start) / 1000000))
  printf '%-12s %-8s step %-7s %-4s: %d.%03d s, exit %s, stderr lines %s\n' "$name" "$device" \
    "${step:-default}" "${cold:-warm}" $((ms / 1000)) $((ms % 1000)) "$rc" "$(wc -l < "$out/$name.err")"
  head -c 300 "$out/$name.err" && echo
}
run cpu cpu ""
run gpu16_cold gpu 16 cold
run gpu16 gpu 16
run gpu16_again gpu 16
run gpu1 gpu 1
run gpu1_again gpu 1
run gpu32 gpu 32
run gpu64 gpu 64
run f16_16_cold gpu-f16 16 cold
run f16_16 gpu-f16 16
python3 - "$out" <<'PY'
import json, os, sys
out = sys.argv[1]
def scores(name):
    rows = []
    for line in open(os.path.join(out, name + ".jsonl")):
        try:
            rows.append(json.loads(line))
        except ValueError:  # the last line of a run stopped by STEP_LIMIT
            break
    return [r["bertscore-f"] for r in rows if "pair" in r]
if not os.path.exists(os.path.join(out, "cpu.jsonl")):
    sys.exit("no cpu run to compare the scores with")
cpu = scores("cpu")
for f in sorted(os.listdir(out)):
    name = f[:-6]
    if f.endswith(".jsonl") and name != "cpu":
        ours = scores(name)
        d = [abs(a - b) for a, b in zip(cpu, ours)]
        print(f"{name}: {len(ours)} of {len(cpu)} pairs, max |F - cpu| {max(d, default=float('nan')):.2e}")
PY
