#!/bin/bash
# iperf3 TCP through a VXLAN overlay between two "hosts" (network namespaces joined
# by a veth underlay), one direction: from a workload on host A to host B.
# Host B is always Linux's vxlan device (id 42, dstport 4789). Host A is either
#   kernel: Linux's vxlan device too, the workload's address on it, or
#   vsw:    vswd --ovsdb (release build) with br-phy (the underlay veth, LOCAL
#           198.18.5.2) and br-int (the workload's veth, vx0 type=vxlan);
#   ovs:    Open vSwitch's ovs-vswitchd (netdev datapath, userspace tunneling),
#           configured the same way.
# REVERSE=1 sends from host B to the workload instead (iperf3 -R). PEER_OFFLOADS=off
# turns the offloads of host B's underlay veth and of the workload's veth off
# (checksums and segmentation in software): Open vSwitch 3.1 needs that — it reads
# no virtio-net header, so the checksums a veth leaves unfinished are wrong to it
# (it drops the kernel's VXLAN packets, and passes the workload's TCP on broken).
# The iperf3 client and server are pinned to CPU 0 in both cases; vsw's PMDs run on
# CPU 1. ROUTES=N adds N host routes through the underlay (the issue 29 figure: a
# large routing table must slow neither the tunnel nor vswd) and reports the switch's
# CPU time over 5 idle seconds and a `vswctl show`'s time with them in place.
# VSW_BIN=DIR takes vswd and vswctl from DIR (a build before) instead of target/release.
# Usage: bench/vxlan-overlay.sh kernel|vsw|ovs [seconds]. Root; cleans up after.
# REVERSE=0 (or unset) is the forward direction; any other value reverses it.
reverse_flag=""
if [ -n "${REVERSE:-}" ] && [ "${REVERSE}" != 0 ]; then reverse_flag=-R; fi
set -euo pipefail
mode=${1:?kernel or vsw}
secs=${2:-5}
repo=$(cd "$(dirname "$0")/.." && pwd)
bin=${VSW_BIN:-$repo/target/release}
tag=vxo$$
A=${tag}a; B=${tag}b; W=${tag}w
dir=$(mktemp -d /tmp/vsw-vxlan-overlay.XXXXXX)
cleanup() {
    [ -f "$dir/vswd.pid" ] && kill "$(cat "$dir/vswd.pid")" 2>/dev/null && sleep 2
    [ -f "$dir/ovs-vswitchd.pid" ] && kill "$(cat "$dir/ovs-vswitchd.pid")" 2>/dev/null && sleep 2
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
vsw|ovs)
    ovsdb-tool create "$dir/conf.db" /usr/share/openvswitch/vswitch.ovsschema
    ovsdb-server "$dir/conf.db" --remote=punix:"$dir/db.sock" --pidfile="$dir/ovsdb.pid" \
        --unixctl="$dir/ovsdb.ctl" --no-chdir --detach -vconsole:off
    V="ovs-vsctl --db=unix:$dir/db.sock --timeout=30"
    $V --no-wait init
    $V --no-wait set Open_vSwitch . other_config:pmd-cpu-mask=0x2 other_config:pmd-sleep-max=${PMD_SLEEP_MAX:-0}
    if [ "$mode" = vsw ]; then
        ip netns exec "$A" "$bin/vswd" --socket "$dir/vswd.sock" \
            --state-file "$dir/state.json" --ovsdb unix:"$dir/db.sock" --bridge br-int \
            --log warn 2>"$dir/vswd.log" &
        echo $! > "$dir/vswd.pid"
    else
        # Its own run directory; afpacket and tap ports are polled by its main
        # thread, pinned to CPU 1 like vsw's PMDs.
        OVS_RUNDIR=$dir OVS_LOGDIR=$dir ip netns exec "$A" taskset -c 1 ovs-vswitchd \
            unix:"$dir/db.sock" --pidfile="$dir/ovs-vswitchd.pid" --no-chdir --detach \
            -vconsole:off --log-file="$dir/ovs-vswitchd.log"
    fi
    ip link add w0 netns "$A" type veth peer name eth0 netns "$W"
    ip -n "$A" link set w0 up
    $V add-br br-phy -- set bridge br-phy datapath_type=netdev -- add-port br-phy u0
    ip -n "$A" addr add 198.18.5.2/24 dev br-phy; ip -n "$A" link set br-phy up
    $V add-br br-int -- set bridge br-int datapath_type=netdev -- add-port br-int w0
    $V add-port br-int vx0 -- set Interface vx0 type=vxlan options:remote_ip=198.18.5.1 options:key=42
    ;;
*) echo "kernel, vsw or ovs" >&2; exit 2 ;;
esac
ip -n "$W" addr add 198.19.0.2/24 dev eth0
ip -n "$W" link set eth0 mtu 1450; ip -n "$W" link set eth0 up
if [ "${PEER_OFFLOADS:-on}" = off ]; then
    ip netns exec "$B" ethtool -K u1 tx off tso off gso off >/dev/null
    ip netns exec "$W" ethtool -K eth0 tx off tso off gso off >/dev/null
fi
for _ in $(seq 30); do
    ip netns exec "$W" ping -c 1 -W 1 198.19.0.1 >/dev/null 2>&1 && break
done
switch_pid=
[ -f "$dir/vswd.pid" ] && switch_pid=$(cat "$dir/vswd.pid")
[ -f "$dir/ovs-vswitchd.pid" ] && switch_pid=$(cat "$dir/ovs-vswitchd.pid")
cpu_ticks() { [ -n "$switch_pid" ] && awk '{print $14 + $15}' "/proc/$switch_pid/stat" || echo 0; }
# Every thread but the PMDs (which poll all the time).
control_ticks() {
    local t=0 task
    for task in /proc/"$switch_pid"/task/*; do
        case $(cat "$task/comm") in pmd-*) continue ;; esac
        t=$(( t + $(awk '{print $14 + $15}' "$task/stat") ))
    done
    echo $t
}
if [ "${ROUTES:-0}" -gt 0 ]; then
    python3 -c "
for i in range(${ROUTES}):
    a = 0x0a000000 + i
    print('route add %d.%d.%d.%d/32 via 198.18.5.1' % (a >> 24, (a >> 16) & 255, (a >> 8) & 255, a & 255))
" > "$dir/routes.batch"
    t0=$(date +%s.%N)
    ip -n "$A" -batch "$dir/routes.batch"
    echo "routes: ${ROUTES} added in $(python3 -c "print('%.2f' % ($(date +%s.%N) - $t0))") s"
    sleep 2
    idle0=$(control_ticks); sleep 5; idle1=$(control_ticks)
    echo "routes: $mode CPU (all but PMD threads) over 5 idle seconds with them: $(python3 -c "print('%.2f' % (($idle1 - $idle0) / $(getconf CLK_TCK)))") s"
    if [ "$mode" = vsw ]; then
        t0=$(date +%s.%N)
        "$bin/vswctl" --socket "$dir/vswd.sock" show >/dev/null
        echo "routes: vswctl show in $(python3 -c "print('%.1f' % (($(date +%s.%N) - $t0) * 1e3))") ms"
    fi
fi
ip netns exec "$B" timeout $((secs + 30)) taskset -c 0 iperf3 -s -1 -B 198.19.0.1 >/dev/null &
server=$!
sleep 0.5
# The switch's CPU time (user + system, all threads) across the test.
cpu_before=$(cpu_ticks)
ip netns exec "$W" timeout $((secs + 20)) taskset -c 0 iperf3 -c 198.19.0.1 -t "$secs" \
    $reverse_flag --connect-timeout 3000 -J > "$dir/iperf.json" || true
wait $server || true
cpu_s=$(( $(cpu_ticks) - cpu_before ))
if [ "$mode" != kernel ]; then
    # Where packets were lost, if anywhere: the tunnels' drops by reason.
    OVS_RUNDIR=$dir ovs-appctl -t ovs-vswitchd tnl/ports/show | sed -n 's/^Drops: /vsw tunnel drops: /p' || true
fi
python3 -c "
import json,sys
j=json.load(open('$dir/iperf.json'))
if 'error' in j: sys.exit('$mode: ' + j['error'])
r=j['end']
gbit = r['sum_received']['bits_per_second'] / 1e9
cpu = $cpu_s / $(getconf CLK_TCK)
line = '$mode: %.2f Gbit/s received, %d retransmits' % (gbit, r['sum_sent'].get('retransmits', 0))
if '$mode' != 'kernel':
    line += ', switch CPU %.2f s (%.2f s per Gbit)' % (cpu, cpu / max(gbit * $secs, 1e-9))
print(line)
"
