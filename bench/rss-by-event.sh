#!/usr/bin/env bash
# Resident memory of a vswd (release build) after rounds of one kind of event at a
# time: rule churn (200 rules added and deleted), tap ports, afpacket ports, PMD-count
# changes, vhost-user ports, and testpmd guest sessions on one vhost-user port.
# A leak grows round after round; an allocator's caches level off after the first.
# Usage (root, after cargo build --release): bench/rss-by-event.sh [rounds per phase, 200]
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-200}
B=target/release
D=$(mktemp -d)
$B/vswd --socket "$D/s.sock" --state-file "$D/st.json" --log warn 2>"$D/log" &
P=$!
V=vswrss$$
cleanup() { kill "$P" 2>/dev/null || true; wait "$P" 2>/dev/null || true; ip link del "$V" 2>/dev/null || true; rm -rf "$D"; }
trap cleanup EXIT
for _ in $(seq 50); do [ -S "$D/s.sock" ] && break; sleep 0.1; done
C="$B/vswctl --socket $D/s.sock"
rss() { awk '{print $2 * 4}' "/proc/$P/statm"; }
python3 -c "
for i in range(200): print(f'priority={100 + i % 7},in_port=99,udp,tp_dst={i + 1},actions=drop')" >"$D/rules.txt"
ip link add "$V" type veth peer name "${V}p"
ip link set "$V" up
ip link set "${V}p" up
churn() { $C add-flows "$D/rules.txt" >/dev/null; $C del-flows in_port=99 >/dev/null; }
tap() { $C add-port "${V}t" type=tap >/dev/null; $C del-port "${V}t" >/dev/null; }
afpacket() { $C add-port "$V" >/dev/null; $C del-port "$V" >/dev/null; }
pmds() { $C set pmd-cpu-mask=0x3 >/dev/null; $C set pmd-cpu-mask=0x2 >/dev/null; }
vhost() { $C add-port "${V}v" type=vhostuser >/dev/null; $C del-port "${V}v" >/dev/null; }
echo "start: $(rss) KiB"
for event in churn tap afpacket pmds vhost; do
  for round in 1 2 3; do
    for _ in $(seq "$N"); do $event; done
    echo "$event, round $round of $N: $(rss) KiB"
  done
done
$C add-port vm type=vhostuser "vhost-server-path=$D/vm.sock" >/dev/null
$C add-port sink type=ring >/dev/null
$C add-flow "in_port=vm,actions=output:sink" >/dev/null
for round in 1 2 3; do
  for _ in $(seq 15); do
    timeout 20 dpdk-testpmd --lcores 0@0,1@0 --no-huge -m 512 --no-pci --file-prefix "rss$$" \
      --vdev "virtio_user0,path=$D/vm.sock,queues=1" -- --forward-mode=txonly \
      --total-num-mbufs=65536 --stats-period 1 >/dev/null 2>&1 &
    T=$!
    sleep 1.2
    kill "$T" 2>/dev/null || true
    wait "$T" 2>/dev/null || true
  done
  echo "guest sessions, round $round of 15: $(rss) KiB"
done
