#!/usr/bin/env bash
# Runs benches/gpu.rs's builds on a GPU machine whose container has the NVIDIA
# driver but no Vulkan loader, then scripts/bench_gpu_torch.py, and keeps each
# log in $OUT (or ./gpu-logs). The "Real GPU" figures of BENCHMARKS.md came this way.
#
# Build the binaries on the development machine first and bring them along in
# one folder, stripped and xz-compressed (about 10 MB each):
#   cargo bench --features gpu-wgpu --bench gpu --no-run             -> gpu-nofusion
#   cargo bench --features gpu-fusion --bench gpu --no-run           -> gpu-fusion
#   cargo bench --features gpu --bench gpu --no-run                  -> gpu-autotune (the CLI's)
#   cargo bench --features gpu-wgpu,burn/vulkan --bench gpu --no-run -> gpu-vulkan (SPIR-V)
#   cargo bench --features gpu,burn/vulkan --bench gpu --no-run      -> gpu-vulkan-autotune
# and the loader's Debian packages in another (apt-get download libvulkan1).
#
#   scripts/gpu_run.sh BIN_DIR DEB_DIR
#
# RUNS="nofusion_f32 spirv_f32 ..." picks runs by log name (default: all, then
# the CPU rows and PyTorch: cpu, torch); STEP_LIMIT caps each run's seconds
# (default 200), so one call fits a short lease. BLINDSPOT_GPU_MODEL=F.bpk adds
# the engine's BERTScore with that real model to each run (benches/gpu.rs).
# RUNS=threads (not in the default) sweeps the CPU passes at batch 32 over
# THREADS (default 1,2,4,8,16) rayon threads, then PyTorch over the same counts
# (about 2 minutes each on a 16-core host; one thread is the slowest);
# RUNS=threads_unpacked sweeps ours again without the weights packed at load
# (BLINDSPOT_CPU_PANELS=0), RUNS=parts the parts of one layer
# (BLINDSPOT_CPU_PARTS=1), RUNS=threads_purge ours again with mimalloc purging
# freed pages after 1 s (MIMALLOC_PURGE_DELAY=1000, as before 2026-11-27; the
# benches keep them otherwise; binaries built before that purge in every run,
# and their logs are what threads_purge now gives). All four:
# RUNS="threads threads_unpacked parts threads_purge".
set -uo pipefail
# Absolute: each run starts in /tmp.
bins=$(cd "${1:?folder of gpu-*.xz bench binaries}" && pwd) || exit 2
debs=$(cd "${2:?folder of the Vulkan loader .deb files}" && pwd) || exit 2
if [ -n "${BLINDSPOT_GPU_MODEL:-}" ]; then
  BLINDSPOT_GPU_MODEL=$(realpath "$BLINDSPOT_GPU_MODEL") || exit 2
  export BLINDSPOT_GPU_MODEL
fi
out=${OUT:-gpu-logs}
runs=${RUNS:-"nofusion_f32 nofusion_f16 fusion_f32 autotune_f32 autotune_f16 spirv_f32 spirv_f16 spirv_int8 spirv_autotune_f32 spirv_autotune_f16 cpu torch"}
limit=${STEP_LIMIT:-200}
wanted() { [[ " $runs " == *" $1 "* ]]; }
mkdir -p "$out"
for f in "$debs"/*.deb; do dpkg -x "$f" /; done
ldconfig
export VK_DRIVER_FILES=${VK_DRIVER_FILES:-/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for x in "$bins"/gpu-*.xz; do xz -dkf "$x" && chmod +x "${x%.xz}"; done

# One bench run: log name, then environment assignments, then the binary's
# arguments (criterion filter). The filter `gpu_` leaves the CPU rows out.
run() {
  local name=$1 build=$2
  shift 2
  wanted "$name" || return 0
  local bin="$bins/gpu-$build"
  [ -x "$bin" ] || { echo "== $name: no $bin, skipped"; return; }
  echo "== $name"
  (cd /tmp && env "$@" timeout "$limit" "$bin" --bench gpu_) 2>&1 | tee "$out/$name.log" |
    grep -E "adapter|parity|time:|panicked|^[a-z0-9_]+_(30tok|sample16)/" | cut -c1-300
}
run nofusion_f32 nofusion
run nofusion_f16 nofusion BLINDSPOT_GPU_DTYPE=f16
run fusion_f32 fusion
run autotune_f32 autotune BLINDSPOT_GPU_BUILD=autotune
run autotune_f16 autotune BLINDSPOT_GPU_BUILD=autotune BLINDSPOT_GPU_DTYPE=f16
run spirv_f32 vulkan BLINDSPOT_GPU_BUILD=spirv
run spirv_f16 vulkan BLINDSPOT_GPU_BUILD=spirv BLINDSPOT_GPU_DTYPE=f16
run spirv_int8 vulkan BLINDSPOT_GPU_BUILD=spirv BLINDSPOT_GPU_INT8=1
run spirv_autotune_f32 vulkan-autotune BLINDSPOT_GPU_BUILD=spirv_autotune
run spirv_autotune_f16 vulkan-autotune BLINDSPOT_GPU_BUILD=spirv_autotune BLINDSPOT_GPU_DTYPE=f16
# The CPU rows once, beside the GPU's, from the build without autotune.
if wanted cpu; then
  echo "== cpu"
  (cd /tmp && BLINDSPOT_CPU_PANELS=1 timeout "$limit" "$bins/gpu-nofusion" --bench cpu_) 2>&1 | tee "$out/cpu.log" |
    grep -E "time:|panicked|^[a-z0-9_]+_(30tok|sample16)/"
fi
if wanted torch; then
  PYTHONUNBUFFERED=1 timeout "$limit" python3 "$(dirname "$0")/bench_gpu_torch.py" 2>&1 |
    tee "$out/torch.log"
fi
if wanted threads; then
  counts=${THREADS:-1,2,4,8,16}
  echo "== threads ($counts)"
  (cd /tmp && BLINDSPOT_CPU_PARTS=0 BLINDSPOT_CPU_PANELS=1 BLINDSPOT_CPU_THREADS=$counts timeout "$limit" "$bins/gpu-nofusion" --bench cpu_threads) 2>&1 |
    tee "$out/threads.log" | grep -E "time:|panicked|^cpu_threads"
  BLINDSPOT_CPU_THREADS=$counts PYTHONUNBUFFERED=1 timeout "$limit" \
    python3 "$(dirname "$0")/bench_gpu_torch.py" 2>&1 | tee "$out/torch-threads.log"
fi
# The same sweep with the weights left unpacked (each product packs its
# weight first, as before 2026-11-27): the panels' share on this host.
if wanted threads_unpacked; then
  counts=${THREADS:-1,2,4,8,16}
  echo "== threads_unpacked ($counts)"
  (cd /tmp && BLINDSPOT_CPU_PARTS=0 BLINDSPOT_CPU_PANELS=0 BLINDSPOT_CPU_THREADS=$counts timeout "$limit" "$bins/gpu-nofusion" --bench cpu_threads) 2>&1 |
    tee "$out/threads-unpacked.log" | grep -E "time:|panicked|^cpu_threads"
fi
# The same sweep with mimalloc returning freed pages to the OS after its
# default delay, so that passes fault them back in (src/allocator.rs): what
# keeping them gains on this host.
if wanted threads_purge; then
  counts=${THREADS:-1,2,4,8,16}
  echo "== threads_purge ($counts)"
  (cd /tmp && MIMALLOC_PURGE_DELAY=1000 BLINDSPOT_CPU_PARTS=0 BLINDSPOT_CPU_PANELS=1 BLINDSPOT_CPU_THREADS=$counts timeout "$limit" "$bins/gpu-nofusion" --bench cpu_threads) 2>&1 |
    tee "$out/threads-purge.log" | grep -E "time:|panicked|^cpu_threads"
fi
# The parts of one layer over the same thread counts (BLINDSPOT_CPU_PARTS):
# which of attention, add + norm, up + GELU and down stops scaling.
if wanted parts; then
  counts=${THREADS:-1,2,4,8,16}
  echo "== parts ($counts)"
  (cd /tmp && BLINDSPOT_CPU_PARTS=1 BLINDSPOT_CPU_PANELS=1 BLINDSPOT_CPU_THREADS=$counts timeout "$limit" "$bins/gpu-nofusion" --bench cpu_threads) 2>&1 |
    tee "$out/parts.log" | grep -E "time:|panicked|^cpu_threads"
fi
