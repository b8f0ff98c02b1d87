#!/bin/bash
# How long a /metrics scrape takes with N ports: vswd (release build) with
# --metrics-addr on a loopback port, N in-memory `type=ring` ports added, then
# SCRAPES scrapes timed by curl (Prometheus's classic text format). Prints the
# response size and the scrape times (min / median / max). Usage:
# bench/metrics-scrape.sh [ports] [scrapes]. Cleans up after itself.
set -euo pipefail
ports=${1:-1000}
scrapes=${2:-20}
repo=$(cd "$(dirname "$0")/.." && pwd)
dir=$(mktemp -d /tmp/vsw-metrics-scrape.XXXXXX)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$repo/target/release/vswd" --socket "$dir/vswd.sock" --state-file "$dir/state.json" \
    --log warn --metrics-addr "127.0.0.1:$port" 2>"$dir/vswd.log" &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 100); do [ -S "$dir/vswd.sock" ] && break; sleep 0.1; done
ctl() { "$repo/target/release/vswctl" --socket "$dir/vswd.sock" "$@" >/dev/null; }
start=$(date +%s.%N)
for i in $(seq "$ports"); do ctl add-port "r$i" type=ring; done
echo "$ports ports added in $(python3 -c "print(round($(date +%s.%N) - $start, 1))") s"
bytes=$(curl -s "127.0.0.1:$port/metrics" | wc -c)
times=$(for _ in $(seq "$scrapes"); do curl -s -o /dev/null -w '%{time_total}\n' "127.0.0.1:$port/metrics"; done)
python3 - "$bytes" $times <<'PY'
import sys, statistics
b = int(sys.argv[1]); t = sorted(float(x) * 1000 for x in sys.argv[2:])
print(f"/metrics: {b} bytes; scrape {t[0]:.1f} / {statistics.median(t):.1f} / {t[-1]:.1f} ms (min / median / max of {len(t)})")
PY
