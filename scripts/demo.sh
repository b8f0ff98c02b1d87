#!/usr/bin/env bash
# The vsw demo: two hosts (network namespaces) wired by veths to vsw, ping and iperf3
# across, then the switch's counters. Everything is removed at the end unless --keep.
set -euo pipefail
cd "$(dirname "$0")/.."
keep=false
for a in "$@"; do
  case "$a" in
    --keep) keep=true ;;
    -h|--help) echo "usage: $0 [--keep]   (--keep leaves the hosts and vswd running)"; exit 0 ;;
    *) echo "unknown argument $a"; exit 2 ;;
  esac
done
[ "$(id -u)" = 0 ] || { echo "demo.sh: run as root"; exit 1; }
source scripts/setup.sh
for d in "$HOME/.cargo/bin" /usr/local/cargo/bin; do [ -d "$d" ] && PATH="$d:$PATH"; done

echo "== building vsw (release)"
cargo build --release -q -p vswd -p vswctl
bin=$PWD/target/release
run=/run/vsw
sock=$run/vswd.sock
state=$run/demo-state.json
pidfile=$run/demo-vswd.pid
ctl() { "$bin/vswctl" --socket "$sock" "$@"; }

# Leftovers of an earlier `demo.sh --keep` are this script's own: remove them.
cleanup() {
  if [ -f "$pidfile" ]; then
    pid=$(cat "$pidfile")
    if kill -0 "$pid" 2>/dev/null && grep -q vswd "/proc/$pid/cmdline" 2>/dev/null; then
      kill -TERM "$pid"
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    fi
    rm -f "$pidfile"
  fi
  for h in a b; do ip netns del "vsw-demo-$h" 2>/dev/null || true; ip link del "vsw-demo-$h" 2>/dev/null || true; done
  rm -f "$state"
}
cleanup
if [ -S "$sock" ] && "$bin/vswctl" --socket "$sock" show >/dev/null 2>&1; then
  echo "demo.sh: a vswd not started by this demo answers on $sock; stop it first"; exit 1
fi
$keep || trap cleanup EXIT

echo "== hosts: vsw-demo-a (198.18.0.1) and vsw-demo-b (198.18.0.2)"
i=1
for h in a b; do
  ip netns add "vsw-demo-$h"
  ip link add "vsw-demo-$h" type veth peer name eth0 address "02:00:c6:12:00:0$i" netns "vsw-demo-$h"
  ip link set "vsw-demo-$h" up
  ip -n "vsw-demo-$h" addr add "198.18.0.$i/24" dev eth0
  ip -n "vsw-demo-$h" link set eth0 up
  ip -n "vsw-demo-$h" link set lo up
  i=$((i + 1))
done

echo "== starting vswd"
mkdir -p "$run"
"$bin/vswd" --socket "$sock" --state-file "$state" --log warn &
echo $! > "$pidfile"
for _ in $(seq 100); do ctl show >/dev/null 2>&1 && break; sleep 0.1; done
ctl add-port vsw-demo-a
ctl add-port vsw-demo-b
ctl show

echo "== ping a -> b and b -> a"
ip netns exec vsw-demo-a ping -c 3 -i 0.2 198.18.0.2
ip netns exec vsw-demo-b ping -c 3 -i 0.2 198.18.0.1

echo "== iperf3 TCP a -> b (veth offloads left on)"
ip netns exec vsw-demo-b iperf3 -s -1 -D -B 198.18.0.2 --logfile /dev/null
sleep 0.3
ip netns exec vsw-demo-a iperf3 -c 198.18.0.2 -t 3

echo "== vswctl dump-ports"
ctl dump-ports
echo "== vswctl dump-flows (a new switch's one rule: NORMAL)"
ctl dump-flows
echo "== vswctl dump-dp-flows (what it became in the datapath)"
ctl dump-dp-flows
echo "== vswctl pmd-stats-show"
ctl pmd-stats-show

if $keep; then
  echo
  echo "Left running. Try: $bin/vswctl show | dump-flows | add-flow 'priority=100,icmp,actions=drop'"
  echo "                   $bin/vswctl trace 'in_port=1,icmp' | dump-dp-flows --more"
  echo "                   ip netns exec vsw-demo-a ping 198.18.0.2"
  echo "Remove everything with: $0 (it cleans up first), or kill $(cat "$pidfile") and ip netns del vsw-demo-a vsw-demo-b"
fi
