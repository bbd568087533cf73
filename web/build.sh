#!/usr/bin/env bash
# Build the browser demo into web/pkg: the release wasm, then wasm-bindgen at exactly the version
# Cargo.lock pins (installed with cargo if missing).
set -euo pipefail
cd "$(dirname "$0")/.."
rustup target add wasm32-unknown-unknown >/dev/null 2>&1 || true
version=$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/[^0-9.]/, ""); print; exit }' Cargo.lock)
if [ "$(wasm-bindgen --version 2>/dev/null | awk '{print $2}')" != "$version" ]; then
  cargo install wasm-bindgen-cli --version "$version"
fi
cargo build -p wgtorch-web --release --target wasm32-unknown-unknown
wasm-bindgen --target web --no-typescript --out-dir web/pkg target/wasm32-unknown-unknown/release/wgtorch_web.wasm
echo "built web/pkg (wasm-bindgen $version); serve web/ and open index.html"
