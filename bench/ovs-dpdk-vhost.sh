#!/bin/bash
# Not a test: the OVS side of the vhost-user comparison in docs/BENCHMARKS.md.
# Starts a private OVS with DPDK: two dpdkvhostuserclient ports vm1 -> vm2, PMD on CPU 1.
D=$1
rm -rf $D; mkdir -p $D
export OVS_RUNDIR=$D OVS_LOGDIR=$D OVS_DBDIR=$D OVS_SYSCONFDIR=$D
DB=unix:$D/db.sock
ovsdb-tool create $D/conf.db /usr/share/openvswitch/vswitch.ovsschema
ovsdb-server --remote=punix:$D/db.sock --pidfile=$D/ovsdb.pid --detach --log-file=$D/ovsdb.log $D/conf.db
V="ovs-vsctl --db=$DB --no-wait"
$V init
$V set Open_vSwitch . other_config:dpdk-init=true "other_config:dpdk-extra=--no-huge --legacy-mem -m 1024 --no-pci" other_config:pmd-cpu-mask=0x2 other_config:per-port-memory=true other_config:dpdk-lcore-mask=0x1
/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk $DB --pidfile=$D/vswitchd.pid --detach --log-file=$D/vswitchd.log
V="ovs-vsctl --db=$DB"
$V add-br br0 -- set bridge br0 datapath_type=netdev
for p in vm1 vm2; do $V add-port br0 $p -- set Interface $p type=dpdkvhostuserclient options:vhost-server-path=$D/$p.sock; done
OVS_RUNDIR=$D ovs-ofctl del-flows br0
OVS_RUNDIR=$D ovs-ofctl add-flow br0 in_port=vm1,actions=output:vm2
