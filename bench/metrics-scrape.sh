#!/bin/bash
# How long a /metrics scrape takes with N ports: vswd (release build) with
# --metrics-addr on a loopback port, N in-memory `type=ring` ports added, then
# SCRAPES scrapes timed by curl (Prometheus's classic text format). Prints the
# response size and the scrape times (min / median / max). Usage:
# bench/metrics-scrape.sh [ports] [scrapes]. Cleans up after itself.
set -euo pipefail
ports=${1:-1000}
scrapes=${2:-20}
source "$(dirname "$0")/metrics-common.sh"
add_ring_ports "$ports"
scrape_times "$scrapes"
