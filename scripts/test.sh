#!/usr/bin/env bash
# Every test: formatting, lints, unit tests, property tests, the end-to-end tests
# that forward real traffic through vswd between network namespaces, and the Debian
# package installed and removed. Needs root.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "test.sh: run as root (the end-to-end tests create network namespaces)"; exit 1; }
source scripts/setup.sh
for d in "$HOME/.cargo/bin" /usr/local/cargo/bin; do [ -d "$d" ] && PATH="$d:$PATH"; done

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy --workspace --all-targets -q -- -D warnings
echo "== cargo build (the end-to-end tests run the vswd and vswctl binaries)"
cargo build --workspace
echo "== cargo test"
cargo test --workspace
echo "== the Debian package: install, run, remove, purge"
bash packaging/test-deb.sh
