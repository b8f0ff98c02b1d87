#!/usr/bin/env bash
# How closely vsw's meters hold their rates: a ring port offers a stream far
# above the rate (millions of 64-byte frames a second over 64 flows), a flow
# sends it through one meter to a second ring port, and the rate that port is
# sent is measured over SECONDS (after the first second, so the burst is spent).
# Meters: 10,000 pkt/s and 100,000 kbit/s (100 Mbit/s), each with vsw's default
# burst and with a burst of a tenth of the rate.
#
# Usage (root; release binaries): scripts/bench-meters.sh [SECONDS] [BIN_DIR]
set -euo pipefail
seconds=${1:-10}
bin=${2:-target/release}
dir=$(mktemp -d /tmp/vsw-bench-meters.XXXXXX)
"$bin/vswd" --socket "$dir/vswd.sock" --state-file "$dir/state.json" --log warn 2>"$dir/vswd.log" &
pid=$!
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -rf "$dir"' EXIT
ctl() { "$bin/vswctl" --socket "$dir/vswd.sock" "$@"; }
for _ in $(seq 100); do ctl show >/dev/null 2>&1 && break; sleep 0.1; done
ctl del-flows
ctl add-port gen type=ring ring-flows=64
ctl add-port sink type=ring
sent() {
  ctl --format json dump-ports |
    python3 -c 'import json,sys; print([p["stats"]["tx_packets"] for p in json.load(sys.stdin) if p["name"]=="sink"][0])'
}
echo "| meter | configured | measured over ${seconds} s | error |"
echo "|---|---|---|---|"
for spec in "pktps,bands=type=drop,rate=10000" \
            "pktps,burst,bands=type=drop,rate=10000,burst_size=1000" \
            "kbps,bands=type=drop,rate=100000" \
            "kbps,burst,bands=type=drop,rate=100000,burst_size=10000"; do
  ctl del-flows
  ctl del-meters
  ctl add-meter "meter=1,$spec"
  ctl add-flow "in_port=1,actions=meter:1,output:2"
  sleep 1
  a=$(sent); sleep "$seconds"; b=$(sent)
  python3 - "$spec" "$a" "$b" "$seconds" <<'EOF'
import sys
spec, a, b, s = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
rate = int(spec.split("rate=")[1].split(",")[0])
pps = (b - a) / s
if spec.startswith("pktps"):
    got, want, unit = pps, rate, "pkt/s"
else:
    # kbit/s of frames as the meter counts them: 60 bytes each (64 on the wire
    # less the FCS).
    got, want, unit = pps * 60 * 8 / 1000, rate, "kbit/s"
print(f"| {spec} | {want:,} {unit} | {got:,.0f} {unit} | {100 * (got - want) / want:+.1f} % |")
EOF
done
