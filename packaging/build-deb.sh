#!/bin/bash
# Builds the Debian package, target/debian/vsw_*.deb: the release build of vswd,
# vswctl and vsw-bench (or with --debug the test build, quicker: what CI installs),
# their man pages and completions generated from the programs themselves
# (VSW_GENERATE_DOCS, crates/vsw-docgen), the systemd unit, a default configuration;
# packed by cargo-deb (installed first if missing). Metadata: crates/vswd/Cargo.toml.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
profile=release; dir=release
if [ "${1:-}" = --debug ]; then profile=dev; dir=debug; fi
command -v cargo-deb >/dev/null 2>&1 || cargo install --locked --quiet cargo-deb
cargo build --quiet --profile "$profile" -p vswd -p vswctl -p vsw-bench
docs=target/docs
rm -rf "$docs"
for program in vswd vswctl vsw-bench; do
    VSW_GENERATE_DOCS="$docs" "target/$dir/$program"
done
gzip -9n "$docs"/man*/*
cargo deb --quiet -p vswd --no-build --profile "$profile" --output target/debian/
ls target/debian/vsw_*.deb
