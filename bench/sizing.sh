#!/bin/bash
# What vswd's memory grows by per port: vswd (release build) with N veth ports
# (afpacket, default rings) attached, its resident set (VmRSS) and the kernel memory
# its packet rings hold (Shmem-like: the rings are mapped into vswd, counted in
# VmRSS once touched) read after each step. Usage: bench/sizing.sh [steps...]
# (port counts, default 0 10 50). TYPE=vhostuser: vhost-user ports instead (no guest
# connected: what vsw holds per port before a VM maps its own memory in).
# Root; cleans up after itself.
set -euo pipefail
steps=("${@:-0 10 50}")
[ $# -eq 0 ] && steps=(0 10 50)
repo=$(cd "$(dirname "$0")/.." && pwd)
dir=$(mktemp -d /tmp/vsw-sizing.XXXXXX)
tag=sz$$
ns=${tag}n
ip netns add "$ns"
"$repo/target/release/vswd" --socket "$dir/vswd.sock" --state-file "$dir/state.json" --log warn 2>"$dir/log" &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; ip netns del $ns 2>/dev/null; for i in $(seq 0 200); do ip link del ${tag}$i 2>/dev/null || true; done; rm -rf "$dir"' EXIT
for _ in $(seq 100); do [ -S "$dir/vswd.sock" ] && break; sleep 0.05; done
have=0
rss() { awk '/VmRSS/ {print $2}' "/proc/$pid/status"; }
base=$(rss)
for n in "${steps[@]}"; do
    while [ "$have" -lt "$n" ]; do
        if [ "${TYPE:-afpacket}" = vhostuser ]; then
            "$repo/target/release/vswctl" --socket "$dir/vswd.sock" add-port "vm$have" type=vhostuser >/dev/null
        else
            ip link add "${tag}$have" type veth peer name "p$have" netns "$ns"
            ip link set "${tag}$have" up
            "$repo/target/release/vswctl" --socket "$dir/vswd.sock" add-port "${tag}$have" >/dev/null
        fi
        have=$((have + 1))
    done
    sleep 1
    now=$(rss)
    per=$([ "$n" -gt 0 ] && echo "$(( (now - base) / n )) KiB per port" || echo "-")
    echo "$n ports: VmRSS $((now / 1024)) MiB ($per over none)"
done
