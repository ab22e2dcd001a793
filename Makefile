# Blindspot: the two set-up commands are `make serve` and `make test`.
# The cargo target dir lives outside the clone so rebuilds (and CI) reuse it.
export CARGO_TARGET_DIR ?= $(HOME)/.cache/blindspot/target
export CARGO_TERM_COLOR ?= never
BIN := $(CARGO_TARGET_DIR)/debug/blindspot

.PHONY: serve test test-native test-browser build-web dist pkg bench golden lint

## Serve the playground at http://127.0.0.1:8080 (installs what it needs).
serve:
	scripts/setup.sh serve
	trunk serve --dist dist-dev

## Run every test: native (metrics, golden parity, CLI) and headless Chromium.
test: 
	scripts/setup.sh test
	$(MAKE) test-native
	$(MAKE) test-browser

test-native:
	cargo test --all-targets

## The development build the browser tests load, in dist-dev/: dist/ keeps
## what `make dist` put there, which the browser benches measure.
build-web:
	trunk build --dist dist-dev

test-browser: build-web
	cargo build --bin blindspot
	BLINDSPOT_DIST=$(CURDIR)/dist-dev BLINDSPOT_BIN=$(BIN) node --test --test-concurrency=1 tests/browser/

## The production site in dist/, ready for static hosting: release wasm with
## simd128 (.cargo/config.toml), wasm-opt -O3 (npm binaryen, on the PATH for
## Trunk), Trunk's loader moved out of index.html and the CSP from www/_headers
## in a <meta> (scripts/trunk_post_build.mjs). Prints the download sizes.
## The native CLI (the build `make test` uses) first writes MiniLM's int8 file,
## which the page reads for an int8 load: a quarter of the f32 download, the
## same numbers as an int8 load of the f32 files.
MINILM := models/all-MiniLM-L6-v2
dist:
	scripts/setup.sh serve
	cargo build --bin blindspot
	$(BIN) prepare $(MINILM) $(MINILM)/model.int8.bpk --quant q8
	python3 scripts/fetch_models.py --manifest
	PATH="$(CURDIR)/node_modules/.bin:$$PATH" trunk build --release
	node scripts/dist_sizes.mjs

## wasm-bindgen --target web output for JS users, in pkg/.
pkg:
	scripts/setup.sh serve
	cargo build --lib --release --no-default-features --target wasm32-unknown-unknown
	wasm-bindgen --target web --out-dir pkg $(CARGO_TARGET_DIR)/wasm32-unknown-unknown/release/blindspot.wasm

bench:
	cargo bench --bench lexical --bench inject --bench emd --bench attack

## Regenerate tests/golden/*.json (needs the Python venv, see docs/testing.md).
golden:
	$(HOME)/.cache/blindspot-py/bin/python scripts/golden_lexical.py
	$(HOME)/.cache/blindspot-py/bin/python scripts/golden_ter.py

lint:
	cargo fmt --all -- --check
	cargo clippy --all-targets -- -D warnings
	cargo clippy --lib --target wasm32-unknown-unknown --no-default-features -- -D warnings
