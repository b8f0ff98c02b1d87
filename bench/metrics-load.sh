#!/bin/bash
# /metrics under load: vswd (release build) with --metrics-addr on a loopback port,
# PORTS idle in-memory `type=ring` ports, and a generator port replaying FLOWS
# distinct UDP frames as fast as the PMD takes them into a sink port, with rules
# that make each frame its own datapath flow (megaflows on nw_src and tp_src).
# Prints: the memory a datapath flow takes (vswd's RSS with one flow and with
# FLOWS), the scrape time with them all (20 scrapes, classic text format), and the
# PMD's forwarding rate in ROUNDS pairs of 10 s without and 10 s with a scrape every
# second, side by side. Usage: bench/metrics-load.sh [ports] [flows] [rounds].
# Cleans up after itself.
set -euo pipefail
ports=${1:-1000}
flows=${2:-100000}
rounds=${3:-3}
source "$(dirname "$0")/metrics-common.sh"
add_ring_ports "$ports"
ctl add-port gen type=ring ring-flows="$flows" >/dev/null
ctl add-port sink type=ring >/dev/null
ctl del-flows >/dev/null
ctl add-flow "priority=0,actions=output:sink" >/dev/null
pmd() { ctl --format json pmd-stats-show | python3 -c "import json,sys; print(sum(p['$1'] for p in json.load(sys.stdin)))"; }
rss() { awk '/VmRSS/ {print $2}' "/proc/$pid/status"; }
sleep 3
echo "datapath flows: $(pmd flows); vswd RSS $(rss) KiB"
rss1=$(rss); flows1=$(pmd flows)
# One datapath flow per frame: lookups see subtables on nw_src and on tp_src.
ctl add-flow "priority=10,udp,tp_src=1,actions=drop" >/dev/null
ctl add-flow "priority=10,ip,nw_src=198.18.255.255,actions=drop" >/dev/null
# (two frames of tp_src=1 share the drop rule's megaflow)
for _ in $(seq 120); do [ "$(pmd flows)" -ge $((flows - 1)) ] && break; sleep 0.5; done
sleep 2
rss2=$(rss); flows2=$(pmd flows)
echo "datapath flows: $flows2; vswd RSS $rss2 KiB: $(( (rss2 - rss1) * 1024 / (flows2 - flows1) )) bytes a datapath flow"
scrape_times 20
# The PMD's rate, 10 s at a time, alternately without and with a scrape a second.
rate() {
    local scrape=$1 p0 p1 t0 t1
    p0=$(pmd packets); t0=$(date +%s.%N)
    for _ in $(seq 10); do
        [ "$scrape" = yes ] && curl -s -o /dev/null "127.0.0.1:$port/metrics"
        sleep 1
    done
    p1=$(pmd packets); t1=$(date +%s.%N)
    python3 -c "print(f'{($p1 - $p0) / ($t1 - $t0) / 1e6:.3f}')"
}
for r in $(seq "$rounds"); do
    quiet=$(rate no); scraped=$(rate yes)
    python3 -c "print(f'round $r: PMD {$quiet} Mpps without scrapes, {$scraped} Mpps with one a second ({$scraped / $quiet:.3f} x); flows $(pmd flows)')"
done
