#!/usr/bin/env bash
# Installs what vsw needs to build, run its demo and pass its tests on Debian 12 (as root)
# (dpdk-dev provides dpdk-testpmd, the poll-mode guest of the vhost-user tests;
# qemu-system-x86, linux-image-amd64 and busybox-static the interrupt-driven guest;
# openvswitch-common ovs-ofctl and ovsdb-server, openvswitch-switch ovs-vsctl, and a
# venv with os-ken: the OpenFlow and OVSDB tests' peers, each started privately;
# prometheus: promtool and a server that scrapes vswd's /metrics in a test).
# Safe to run again: it only installs what is missing.
set -euo pipefail

need_apt=()
for pair in ip:iproute2 ping:iputils-ping iperf3:iperf3 ethtool:ethtool python3:python3 cc:gcc \
            trafgen:netsniff-ng tcpdump:tcpdump dpdk-testpmd:dpdk-dev ovs-ofctl:openvswitch-common \
            ovs-vsctl:openvswitch-switch qemu-system-x86_64:qemu-system-x86 \
            promtool:prometheus; do
  cmd=${pair%%:*}; pkg=${pair#*:}
  command -v "$cmd" >/dev/null 2>&1 || need_apt+=("$pkg")
done
# The controller test's os-ken lives in a venv of its own (Debian's python3-venv).
python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || need_apt+=(python3-venv)
# The offload fast path's BPF programs are built with clang against libbpf's headers.
command -v clang >/dev/null 2>&1 || need_apt+=(clang)
[ -f /usr/include/bpf/bpf_helpers.h ] || need_apt+=(libbpf-dev)
# The guest's initramfs needs a static busybox (Debian's plain busybox is dynamic).
dpkg -s busybox-static >/dev/null 2>&1 || need_apt+=(busybox-static)
# The guest's kernel (and the virtio modules it loads) come from Debian's kernel package.
compgen -G "/boot/vmlinuz-*" >/dev/null || need_apt+=(linux-image-amd64)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "setup: installing ${need_apt[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # Packages with daemons (openvswitch-switch) must not start them: the tests start
  # their own, privately. policy-rc.d says no to every service start meanwhile.
  made_policy=
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
    chmod +x /usr/sbin/policy-rc.d
    made_policy=1
  fi
  apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
  if [ -n "$made_policy" ]; then rm -f /usr/sbin/policy-rc.d; fi
fi

# os-ken (an OpenFlow controller framework, pinned), for the controller test.
if [ ! -x /opt/vsw-osken/bin/python ] || ! /opt/vsw-osken/bin/python -c 'import os_ken' >/dev/null 2>&1; then
  echo "setup: installing os-ken in /opt/vsw-osken"
  python3 -m venv /opt/vsw-osken
  /opt/vsw-osken/bin/pip install -q 'os-ken==4.2.2'
fi

# cargo: the machine's rustup toolchain if there is one, else Debian's.
if ! command -v cargo >/dev/null 2>&1; then
  for d in "$HOME/.cargo/bin" /usr/local/cargo/bin; do
    [ -x "$d/cargo" ] && export PATH="$d:$PATH"
  done
fi
if ! command -v cargo >/dev/null 2>&1; then
  echo "setup: installing cargo from Debian"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends cargo rustc >/dev/null
fi
if ! cargo clippy --version >/dev/null 2>&1 && command -v rustup >/dev/null 2>&1; then
  rustup component add clippy rustfmt >/dev/null 2>&1 || true
fi
