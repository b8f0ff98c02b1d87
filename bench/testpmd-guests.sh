#!/bin/bash
# Not a test: the guests of the vhost-user comparison in docs/BENCHMARKS.md.
# Two testpmd guests on CPU 0: B receives (rxonly) on $1/vm2.sock, A sends (txonly) on
# $1/vm1.sock; both own their sockets (server=1). Prints B's received rate, averaged
# over the last 5 one-second samples.
D=$1; TAG=$2
timeout 16 dpdk-testpmd --lcores '0@0,1@0' --no-huge -m 512 --no-pci --file-prefix b$TAG \
  --vdev "virtio_user0,path=$D/vm2.sock,queues=1,server=1" -- --forward-mode=rxonly \
  --total-num-mbufs=32768 --stats-period 1 < /dev/null > /tmp/guestB-$TAG.log 2>&1 &
timeout 14 dpdk-testpmd --lcores '0@0,1@0' --no-huge -m 512 --no-pci --file-prefix a$TAG \
  --vdev "virtio_user0,path=$D/vm1.sock,queues=1,server=1" -- --forward-mode=txonly \
  --total-num-mbufs=32768 --stats-period 1 < /dev/null > /tmp/guestA-$TAG.log 2>&1 &
sleep 15
grep "Rx-pps" /tmp/guestB-$TAG.log | awk '{print $2}' | tail -6 | head -5 | awk '{s+=$1; n++} END {printf "%.3f Mpps\n", s/n/1e6}'
wait
