# Sourced by bench/metrics-*.sh: a vswd (release build) of the script's own with
# --metrics-addr on a free loopback port, stopped and cleaned up on exit.
# Sets: repo, dir (its directory), port (the metrics port), pid; defines ctl (vswctl
# on it), add_ring_ports N (idle in-memory ports r1..rN) and scrape_times N (the
# response size and the min / median / max of N timed scrapes). VSW_BIN=DIR takes
# vswd and vswctl from DIR (a build before) instead of target/release.
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin=${VSW_BIN:-$repo/target/release}
dir=$(mktemp -d /tmp/vsw-metrics.XXXXXX)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$bin/vswd" --socket "$dir/vswd.sock" --state-file "$dir/state.json" \
    --log warn --metrics-addr "127.0.0.1:$port" 2>"$dir/vswd.log" &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 100); do [ -S "$dir/vswd.sock" ] && break; sleep 0.1; done
ctl() { "$bin/vswctl" --socket "$dir/vswd.sock" "$@"; }
add_ring_ports() {
    local start; start=$(date +%s.%N)
    for i in $(seq "$1"); do ctl add-port "r$i" type=ring >/dev/null; done
    echo "$1 ports added in $(python3 -c "print(round($(date +%s.%N) - $start, 1))") s"
}
scrape_times() {
    local bytes times
    bytes=$(curl -s "127.0.0.1:$port/metrics" | wc -c)
    times=$(for _ in $(seq "$1"); do curl -s -o /dev/null -w '%{time_total}\n' "127.0.0.1:$port/metrics"; sleep 0.2; done)
    python3 - "$bytes" $times <<'PY'
import sys, statistics
b = int(sys.argv[1]); t = sorted(float(x) * 1000 for x in sys.argv[2:])
print(f"/metrics: {b} bytes; scrape {t[0]:.1f} / {statistics.median(t):.1f} / {t[-1]:.1f} ms (min / median / max of {len(t)})")
PY
}
