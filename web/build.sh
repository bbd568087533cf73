#!/usr/bin/env bash
# Build the browser demo into web/pkg: the release wasm, then wasm-bindgen at exactly the version
# Cargo.lock pins (installed with cargo if missing).
set -euo pipefail
cd "$(dirname "$0")/.."
rustup target add wasm32-unknown-unknown >/dev/null 2>&1 || true
version=$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/[^0-9.]/, ""); print; exit }' Cargo.lock)
if [ "$(wasm-bindgen --version 2>/dev/null | awk '{print $2}')" != "$version" ]; then
  # CI installs it for one run: unoptimised it builds in half the time (2 min instead of 4.5 on
  # 2 cores) and takes 9 s instead of 2 s here, with the same output.
  cargo install wasm-bindgen-cli --version "$version" ${CI:+--debug}
fi
cargo build -p wgtorch-web --release --target wasm32-unknown-unknown
raw=target/wasm32-unknown-unknown/release/wgtorch_web.wasm
size() { echo "$(wc -c < "$1") bytes, $(gzip -9 -c "$1" | wc -c) gzipped"; }
# binaryen's wasm-opt (Debian: apt-get install binaryen) shrinks the module and speeds it up; it
# runs before wasm-bindgen, which then lays out the externref table itself (Debian's binaryen 108
# breaks that table when run after it). Without wasm-opt the page works the same, only bigger.
input=$raw
if command -v wasm-opt >/dev/null; then
  input=target/wasm32-unknown-unknown/release/wgtorch_web.opt.wasm
  wasm-opt -O3 "$raw" -o "$input"
fi
wasm-bindgen --target web --no-typescript --out-dir web/pkg --out-name wgtorch_web "$input"
echo "wasm: rustc $(size "$raw"); served (web/pkg) $(size web/pkg/wgtorch_web_bg.wasm)"
echo "built web/pkg (wasm-bindgen $version); serve web/ and open index.html"
