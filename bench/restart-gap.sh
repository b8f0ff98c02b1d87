#!/bin/bash
# The traffic gap across a planned restart of the switch: two hosts (namespaces, a
# veth each) on one bridge, `ping -i 0.001` (1,000 a second) from one to the other
# for 6 s, the switch stopped and started again after 2 s (its own way: SIGTERM,
# then the same command line; its configuration comes back from its state file or
# database). The lost pings, at the rate ping sent, are the gap. Userspace flows (a
# learning switch), unless `offload`. Usage:
# bench/restart-gap.sh vsw|ovs [ping|tcp|udp] [offload]. Root; cleans up after itself.
set -euo pipefail
mode=${1:?vsw or ovs}
# `tcp` as the second argument: an iperf3 stream (100 ms reports) instead of ping;
# the gap is the 100 ms intervals in which nothing arrived. `udp`: an iperf3 UDP
# stream at 100 Mbit/s, whose receiver counts the datagrams lost.
traffic=${2:-ping}
# `offload` as the third argument (vsw): both ports on the ebpf fast path with
# offload-persist (pinned on a BPF filesystem of the script's own), the flows
# offloaded before the restart.
offload=${3:-}
repo=$(cd "$(dirname "$0")/.." && pwd)
tag=rg$$
A=${tag}a; B=${tag}b
dir=$(mktemp -d /tmp/vsw-restart-gap.XXXXXX)
pids=()
cleanup() {
    for f in "$dir"/*.pid; do [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null || true; done
    sleep 1
    if mountpoint -q "$dir/bpf" 2>/dev/null; then umount "$dir/bpf"; fi
    for ns in $A $B; do ip netns del "$ns" 2>/dev/null || true; done
    ip link del "${A}p" 2>/dev/null || true; ip link del "${B}p" 2>/dev/null || true
    rm -rf "$dir"
}
trap cleanup EXIT
for ns in $A $B; do ip netns add "$ns"; done
i=1
for ns in $A $B; do
    ip link add "${ns}p" type veth peer name eth0 netns "$ns"
    ip link set "${ns}p" up
    ip -n "$ns" addr add "198.18.0.$i/24" dev eth0; ip -n "$ns" link set eth0 up
    i=$((i + 1))
done
start_switch() {
    if [ "$mode" = vsw ]; then
        "$repo/target/release/vswd" --socket "$dir/vswd.sock" --state-file "$dir/state.json" \
            --bpf-pin-dir "$dir/bpf/vsw" --log info 2>>"$dir/vswd.log" &
        echo $! > "$dir/vswd.pid"
        for _ in $(seq 100); do [ -S "$dir/vswd.sock" ] && break; sleep 0.05; done
    else
        OVS_RUNDIR=$dir OVS_LOGDIR=$dir ovs-vswitchd unix:"$dir/db.sock" \
            --pidfile="$dir/ovs-vswitchd.pid" --no-chdir --detach -vconsole:off \
            --log-file="$dir/ovs-vswitchd.log"
    fi
}
stop_switch() {
    local f="$dir/$([ "$mode" = vsw ] && echo vswd || echo ovs-vswitchd).pid"
    local pid; pid=$(cat "$f")
    kill "$pid"
    while kill -0 "$pid" 2>/dev/null; do sleep 0.01; done
}
if [ "$mode" = ovs ]; then
    ovsdb-tool create "$dir/conf.db" /usr/share/openvswitch/vswitch.ovsschema
    ovsdb-server "$dir/conf.db" --remote=punix:"$dir/db.sock" --pidfile="$dir/ovsdb.pid" \
        --unixctl="$dir/ovsdb.ctl" --no-chdir --detach -vconsole:off
    V="ovs-vsctl --db=unix:$dir/db.sock --timeout=30"
    $V --no-wait init
    # Its PMD on core 1, as vsw's: the hosts' programs run on core 0 for both.
    $V --no-wait set Open_vSwitch . other_config:pmd-cpu-mask=0x2
    start_switch
    $V add-br br0 -- set bridge br0 datapath_type=netdev -- add-port br0 "${A}p" -- add-port br0 "${B}p"
else
    start_switch
    ctl() { "$repo/target/release/vswctl" --socket "$dir/vswd.sock" "$@" >/dev/null; }
    if [ "$offload" = offload ]; then
        mkdir -p "$dir/bpf"; mount -t bpf bpf "$dir/bpf"
        ctl add-port "${A}p" offload=ebpf; ctl add-port "${B}p" offload=ebpf
        ctl set hw-offload=true offload-persist=true offload-interval=100
    else
        ctl add-port "${A}p"; ctl add-port "${B}p"
    fi
fi
for _ in $(seq 50); do ip netns exec "$A" ping -c 1 -W 1 198.18.0.2 >/dev/null 2>&1 && break; done
if [ "$traffic" = tcp ] || [ "$traffic" = udp ]; then
    ip netns exec "$A" nstat -n  # the sender's TCP counters from here on
    # Offloads off on both hosts, for both switches: Open vSwitch 3.1 netdev reads no
    # virtio-net headers and cannot carry TCP whose checksums a veth left unfinished.
    for ns in $A $B; do ip netns exec "$ns" ethtool -K eth0 tx off tso off gso off >/dev/null; done
    # Both ends on core 0, the switches' PMD on core 1: a program the PMD pushes from
    # one core to the other leaves packets in two cores' backlogs (veth), which
    # reorders them, whatever the switch does.
    ip netns exec "$B" timeout 30 taskset -c 0 iperf3 -s -1 -B 198.18.0.2 >/dev/null 2>&1 &
    sleep 0.5
    # TCP at full speed, or paced (RATE=1G, say) so that the hosts' CPUs are not
    # what loses packets.
    udp=(); [ "$traffic" = udp ] && udp=(-u -b 100M -l 1200)
    [ "$traffic" = tcp ] && [ -n "${RATE:-}" ] && udp=(-b "$RATE")
    ip netns exec "$A" timeout 30 taskset -c 0 iperf3 -c 198.18.0.2 "${udp[@]}" -t 6 -i 0.1 -J \
        > "$dir/iperf.json" 2>&1 &
else
    ip netns exec "$A" taskset -c 0 ping -i 0.001 -w 6 -q 198.18.0.2 > "$dir/ping.txt" 2>&1 &
fi
ping_pid=$!
sleep 2
if [ "$offload" = offload ]; then
    offloaded=$("$repo/target/release/vswctl" --socket "$dir/vswd.sock" dump-dp-flows type=offloaded | grep -c . || true)
    echo "datapath flows offloaded before the restart: $offloaded"
fi
t0=$(date +%s.%N)
# RESTART=0: the same run without the restart, for what the path loses anyway.
if [ "${RESTART:-1}" = 1 ]; then
    stop_switch
    start_switch
fi
t1=$(date +%s.%N)
wait $ping_pid || true
if [ "$offload" = offload ]; then
    cp "$dir/vswd.log" /tmp/restart-gap-vswd.log
    grep -c "does not give: withdrawn" "$dir/vswd.log" | sed 's/^/adopted entries withdrawn: /' || true
    grep "withdrawn" "$dir/vswd.log" | head -3 || true
fi
if [ "$traffic" = udp ]; then
    python3 -c "
import json
j = json.load(open('$dir/iperf.json'))
s = j['end']['sum']
iv = [i['sum'] for i in j['intervals']]
empty = sum(1 for i in iv if i['bytes'] == 0)
print(f'$mode udp${offload:+ (offloaded)}: {s[\"packets\"]} datagrams sent in 6 s, {s[\"lost_packets\"]} lost '
      f'(at 100 Mbit/s, ~{s[\"packets\"] / 6000:.1f} a ms: a gap of ~{s[\"lost_packets\"] / (s[\"packets\"] / 6000):.0f} ms), '
      f'{empty} of {len(iv)} 100 ms intervals empty (stop to started again: {($t1 - $t0) * 1000:.0f} ms)')
"
    exit 0
fi
if [ "$traffic" = tcp ]; then
    python3 -c "
import json
j = json.load(open('$dir/iperf.json'))
iv = [i['sum'] for i in j['intervals']]
empty = sum(1 for i in iv if i['bytes'] == 0)
print(f'$mode tcp${offload:+ (offloaded)}: {j[\"end\"][\"sum_received\"][\"bits_per_second\"] / 1e9:.2f} Gbit/s over 6 s, '
      f'{empty} of {len(iv)} 100 ms intervals with nothing sent (a gap of ~{empty * 100} ms), '
      f'{j[\"end\"][\"sum_sent\"].get(\"retransmits\", 0)} retransmits '
      f'(stop to started again: {($t1 - $t0) * 1000:.0f} ms)')
# What the retransmits were: lost segments, or probes of a tail that was only
# late (a tail loss probe answered by a duplicate SACK: nothing was lost).
import subprocess
out = subprocess.run(['ip', 'netns', 'exec', '$A', 'nstat', '-az'], capture_output=True, text=True).stdout
c = {l.split()[0]: int(l.split()[1]) for l in out.splitlines() if l and not l.startswith('#')}
print('sender TCP: ' + ', '.join(f'{k} {c.get(k, 0)}' for k in ['TcpRetransSegs', 'TcpExtTCPLossProbes', 'TcpExtTCPLossProbeRecovery', 'TcpExtTCPDSACKRecv', 'TcpExtTCPSACKReorder', 'TcpExtTCPLostRetransmit', 'TcpExtTCPFastRetrans', 'TcpExtTCPTimeouts']))
# When they came (the restart began at ~2.0 s).
print('retransmits by 100 ms interval (start s: count):',
      ', '.join(f'{i[\"start\"]:.1f}: {i[\"retransmits\"]}' for i in iv if i.get('retransmits')))
"
    exit 0
fi
sent=$(sed -n 's/^\([0-9]*\) packets transmitted.*/\1/p' "$dir/ping.txt")
got=$(sed -n 's/.* \([0-9]*\) received.*/\1/p' "$dir/ping.txt")
# The gap: the lost pings at the rate ping actually sent (below 1 a ms when replies
# are slow to come back).
python3 -c "
sent, got = $sent, $got
rate = sent / 6000
print(f'$mode: {sent} pings sent in 6 s, {sent - got} lost across the restart: a gap of '
      f'~{(sent - got) / rate:.0f} ms (stop to started again: {($t1 - $t0) * 1000:.0f} ms)')
"
