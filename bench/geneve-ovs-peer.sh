#!/bin/bash
# iperf3 TCP through a Geneve overlay to an Open vSwitch 3.1 peer: two "hosts"
# (network namespaces joined by a veth underlay), each with a workload behind a veth
# on br-int. Host B is always Open vSwitch's ovs-vswitchd (netdev datapath, userspace
# tunneling, its own ovsdb-server). Host A is either
#   vsw: vswd --ovsdb (release build), br-phy on the underlay veth (LOCAL
#        198.18.5.2), br-int with the workload and gv0 type=geneve; or
#   ovs: Open vSwitch, configured the same way (the OVS <-> OVS baseline).
# The workloads' offloads are off (what a userspace Open vSwitch peer needs: it reads
# its veths through packet sockets, without a virtio-net header) and their MTU 1,400.
# One direction: from host A's workload to host B's; REVERSE=1 the other way.
# Host A's switch has CPU 1 to itself (vsw's PMD, or ovs-vswitchd); host B's
# ovs-vswitchd shares CPU 0 with both iperf3 ends, the same in both modes.
# VSW_BIN=DIR takes vswd from DIR instead of target/release. DIAG=1 also prints, after
# the run, where packets went: every veth's kernel counters, both workloads' TCP
# counters and, for vsw, its ports' counters and PMD statistics.
# Usage: bench/geneve-ovs-peer.sh vsw|ovs [seconds]. Root; cleans up after.
# REVERSE=0 (or unset) is the forward direction; any other value reverses it.
reverse_flag=""
if [ -n "${REVERSE:-}" ] && [ "${REVERSE}" != 0 ]; then reverse_flag=-R; fi
set -euo pipefail
mode=${1:?vsw or ovs}
secs=${2:-5}
repo=$(cd "$(dirname "$0")/.." && pwd)
bin=${VSW_BIN:-$repo/target/release}
tag=gvo$$
A=${tag}a; B=${tag}b; WA=${tag}x; WB=${tag}y
dir=$(mktemp -d /tmp/vsw-geneve-ovs.XXXXXX)
mkdir -p "$dir/a" "$dir/b"
cleanup() {
    [ -f "$dir/a/vswd.pid" ] && kill "$(cat "$dir/a/vswd.pid")" 2>/dev/null && sleep 2
    for h in a b; do
        [ -f "$dir/$h/ovs-vswitchd.pid" ] && kill "$(cat "$dir/$h/ovs-vswitchd.pid")" 2>/dev/null && sleep 1
        [ -f "$dir/$h/ovsdb.pid" ] && kill "$(cat "$dir/$h/ovsdb.pid")" 2>/dev/null
    done
    for ns in $A $B $WA $WB; do ip netns del "$ns" 2>/dev/null || true; done
    rm -rf "$dir"
}
trap cleanup EXIT
for ns in $A $B $WA $WB; do ip netns add "$ns"; done
ip link add u0 netns "$A" type veth peer name u1 netns "$B"
ip -n "$A" link set u0 up; ip -n "$B" link set u1 up

# A host's database, its switch (vsw or ovs) in namespace $2, and its bridges: br-phy
# on the underlay port $3 with address $4, br-int with the workload's veth $5 and a
# Geneve port to $6.
host() {
    local h=$1 ns=$2 underlay=$3 addr=$4 wport=$5 remote=$6 kind=$7 cpu=$8
    local d=$dir/$h
    ovsdb-tool create "$d/conf.db" /usr/share/openvswitch/vswitch.ovsschema
    ovsdb-server "$d/conf.db" --remote=punix:"$d/db.sock" --pidfile="$d/ovsdb.pid" \
        --unixctl="$d/ovsdb.ctl" --no-chdir --detach -vconsole:off
    local V="ovs-vsctl --db=unix:$d/db.sock --timeout=30"
    $V --no-wait init
    $V --no-wait set Open_vSwitch . other_config:pmd-cpu-mask=$((1 << cpu)) other_config:pmd-sleep-max=0
    if [ "$kind" = vsw ]; then
        ip netns exec "$ns" "$bin/vswd" --socket "$d/vswd.sock" --state-file "$d/state.json" \
            --ovsdb unix:"$d/db.sock" --bridge br-int --log warn 2>"$d/vswd.log" &
        echo $! > "$d/vswd.pid"
    else
        OVS_RUNDIR=$d OVS_LOGDIR=$d ip netns exec "$ns" taskset -c "$cpu" ovs-vswitchd \
            unix:"$d/db.sock" --pidfile="$d/ovs-vswitchd.pid" --no-chdir --detach \
            -vconsole:off --log-file="$d/ovs-vswitchd.log"
    fi
    $V add-br br-phy -- set bridge br-phy datapath_type=netdev -- add-port br-phy "$underlay"
    ip -n "$ns" addr add "$addr/24" dev br-phy; ip -n "$ns" link set br-phy up
    $V add-br br-int -- set bridge br-int datapath_type=netdev -- add-port br-int "$wport"
    $V add-port br-int gv0 -- set Interface gv0 type=geneve options:remote_ip="$remote" options:key=42
}
ip link add wa netns "$A" type veth peer name eth0 netns "$WA"
ip link add wb netns "$B" type veth peer name eth0 netns "$WB"
ip -n "$A" link set wa up; ip -n "$B" link set wb up
host a "$A" u0 198.18.5.2 wa 198.18.5.1 "$mode" 1
host b "$B" u1 198.18.5.1 wb 198.18.5.2 ovs 0
for w in "$WA:198.19.0.2" "$WB:198.19.0.1"; do
    ns=${w%%:*}; ip=${w#*:}
    ip -n "$ns" addr add "$ip/24" dev eth0
    ip -n "$ns" link set eth0 mtu 1400; ip -n "$ns" link set eth0 up
    ip netns exec "$ns" ethtool -K eth0 tx off tso off gso off >/dev/null
done
for _ in $(seq 30); do
    ip netns exec "$WA" ping -c 1 -W 1 198.19.0.1 >/dev/null 2>&1 && break
done
ip netns exec "$WB" timeout $((secs + 30)) taskset -c 0 iperf3 -s -1 -B 198.19.0.1 >/dev/null &
server=$!
sleep 0.5
ip netns exec "$WA" timeout $((secs + 20)) taskset -c 0 iperf3 -c 198.19.0.1 -t "$secs" \
    $reverse_flag --connect-timeout 3000 -J > "$dir/iperf.json" || true
wait $server || true
if [ "${DIAG:-0}" != 0 ]; then
    for l in "$A:u0" "$B:u1" "$WA:eth0" "$WB:eth0"; do
        echo "== ${l#*:} in ${l%%:*}"; ip -s -n "${l%%:*}" link show "${l#*:}" | sed -n 3,6p
    done
    for w in "$WA" "$WB"; do
        echo "== TCP in $w"; ip netns exec "$w" nstat -az TcpInSegs TcpOutSegs TcpRetransSegs
    done
    if [ -f "$dir/a/vswd.pid" ]; then
        ip netns exec "$A" "$bin/vswctl" --socket "$dir/a/vswd.sock" dump-ports
        ip netns exec "$A" "$bin/vswctl" --socket "$dir/a/vswd.sock" pmd-stats-show
    fi
fi
python3 -c "
import json,sys
j=json.load(open('$dir/iperf.json'))
if 'error' in j: sys.exit('$mode: ' + j['error'])
r=j['end']
way = 'from B (OVS) to A' if '$reverse_flag' else 'from A to B (OVS)'
print('$mode <-> ovs, %s: %.2f Gbit/s received, %d retransmits' % (
    way, r['sum_received']['bits_per_second'] / 1e9, r['sum_sent'].get('retransmits', 0)))
"
