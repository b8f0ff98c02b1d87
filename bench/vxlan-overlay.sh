#!/bin/bash
# iperf3 TCP through a VXLAN overlay between two "hosts" (network namespaces joined
# by a veth underlay), one direction: from a workload on host A to host B.
# Host B is always Linux's vxlan device (id 42, dstport 4789). Host A is either
#   kernel: Linux's vxlan device too, the workload's address on it, or
#   vsw:    vswd --ovsdb (release build) with br-phy (the underlay veth, LOCAL
#           198.18.5.2) and br-int (the workload's veth, vx0 type=vxlan).
# The iperf3 client and server are pinned to CPU 0 in both cases; vsw's PMDs run on
# CPU 1. Usage: bench/vxlan-overlay.sh kernel|vsw [seconds]. Root; cleans up after.
set -euo pipefail
mode=${1:?kernel or vsw}
secs=${2:-5}
repo=$(cd "$(dirname "$0")/.." && pwd)
tag=vxo$$
A=${tag}a; B=${tag}b; W=${tag}w
dir=$(mktemp -d /tmp/vsw-vxlan-overlay.XXXXXX)
cleanup() {
    [ -f "$dir/vswd.pid" ] && kill "$(cat "$dir/vswd.pid")" 2>/dev/null && sleep 2
    [ -f "$dir/ovsdb.pid" ] && kill "$(cat "$dir/ovsdb.pid")" 2>/dev/null
    for ns in $A $B $W; do ip netns del "$ns" 2>/dev/null || true; done
    rm -rf "$dir"
}
trap cleanup EXIT
for ns in $A $B $W; do ip netns add "$ns"; done
ip link add u0 netns "$A" type veth peer name u1 netns "$B"
ip -n "$B" addr add 198.18.5.1/24 dev u1; ip -n "$B" link set u1 up
ip -n "$B" link add vx0 type vxlan id 42 remote 198.18.5.2 local 198.18.5.1 dstport 4789 dev u1
ip -n "$B" addr add 198.19.0.1/24 dev vx0; ip -n "$B" link set vx0 up
ip -n "$A" link set u0 up
case $mode in
kernel)
    ip -n "$A" addr add 198.18.5.2/24 dev u0
    ip -n "$A" link add vx0 type vxlan id 42 remote 198.18.5.1 local 198.18.5.2 dstport 4789 dev u0
    ip -n "$A" link set vx0 up
    # The workload behind a veth, bridged to the vxlan device by the kernel.
    ip -n "$A" link add br0 type bridge; ip -n "$A" link set br0 up
    ip -n "$A" link set vx0 master br0
    ip link add w0 netns "$A" type veth peer name eth0 netns "$W"
    ip -n "$A" link set w0 master br0; ip -n "$A" link set w0 up
    ;;
vsw)
    ovsdb-tool create "$dir/conf.db" /usr/share/openvswitch/vswitch.ovsschema
    ovsdb-server "$dir/conf.db" --remote=punix:"$dir/db.sock" --pidfile="$dir/ovsdb.pid" \
        --unixctl="$dir/ovsdb.ctl" --no-chdir --detach -vconsole:off
    V="ovs-vsctl --db=unix:$dir/db.sock --timeout=30"
    $V --no-wait init
    $V --no-wait set Open_vSwitch . other_config:pmd-cpu-mask=0x2 other_config:pmd-sleep-max=${PMD_SLEEP_MAX:-0}
    ip netns exec "$A" "$repo/target/release/vswd" --socket "$dir/vswd.sock" \
        --state-file "$dir/state.json" --ovsdb unix:"$dir/db.sock" --bridge br-int \
        --log warn 2>"$dir/vswd.log" &
    echo $! > "$dir/vswd.pid"
    ip link add w0 netns "$A" type veth peer name eth0 netns "$W"
    ip -n "$A" link set w0 up
    $V add-br br-phy -- set bridge br-phy datapath_type=netdev -- add-port br-phy u0
    ip -n "$A" addr add 198.18.5.2/24 dev br-phy; ip -n "$A" link set br-phy up
    $V add-br br-int -- set bridge br-int datapath_type=netdev -- add-port br-int w0
    $V add-port br-int vx0 -- set Interface vx0 type=vxlan options:remote_ip=198.18.5.1 options:key=42
    ;;
*) echo "kernel or vsw" >&2; exit 2 ;;
esac
ip -n "$W" addr add 198.19.0.2/24 dev eth0
ip -n "$W" link set eth0 mtu 1450; ip -n "$W" link set eth0 up
for _ in $(seq 30); do
    ip netns exec "$W" ping -c 1 -W 1 198.19.0.1 >/dev/null 2>&1 && break
done
ip netns exec "$B" taskset -c 0 iperf3 -s -1 -B 198.19.0.1 >/dev/null &
server=$!
sleep 0.5
ip netns exec "$W" taskset -c 0 iperf3 -c 198.19.0.1 -t "$secs" ${REVERSE:+-R} -J > "$dir/iperf.json"
wait $server || true
if [ "$mode" = vsw ]; then
    # Where packets were lost, if anywhere: the tunnels' drops by reason.
    OVS_RUNDIR=$dir ovs-appctl -t ovs-vswitchd tnl/ports/show | sed -n 's/^Drops: /vsw tunnel drops: /p'
fi
python3 -c "
import json,sys
r=json.load(open('$dir/iperf.json'))['end']
print('$mode: %.2f Gbit/s received, %d retransmits' % (r['sum_received']['bits_per_second']/1e9, r['sum_sent'].get('retransmits',0)))
"
