#!/usr/bin/env python3
"""Baseline benchmark for issue 2: vsw (both afpacket modes) beside the Linux bridge,
on one topology, in one run.

  generator host (netns, 198.18.0.1) --veth-- switch under test --veth-- receiver host (netns, 198.18.0.2)

For each switch: ping RTT (min/avg/max), iperf3 TCP Gbit/s (veth offloads on), and the
highest rate of 64-byte UDP frames forwarded with loss <= 0.002 % (binary search over
trafgen's offered rate, trials of --trial-seconds, loss counted from the generator's
TX and the receiver's RX interface counters). trafgen runs pinned to CPU 0, vsw's PMD
to CPU 1.

The vsw-bench tool (a later issue) replaces this script with its own generator; until
then, rates near trafgen's own ceiling are reported as generator-limited.

Run as root from the repository root after `cargo build --release`.
"""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

GEN_NS, RCV_NS = "vswbench-gen", "vswbench-rcv"
GEN_PORT, RCV_PORT = "vswbench-g", "vswbench-r"
BRIDGE = "vswbench-br"
GEN_MAC, RCV_MAC = "02:00:c6:12:00:01", "02:00:c6:12:00:02"
LOSS_TOLERANCE = 0.002 / 100
# A frame to a MAC address nobody owns: both switches flood it to the receiver, whose
# interface counts it and whose stack drops it at once (PACKET_OTHERHOST), so the
# receiver's own kernel work stays small and nothing comes back through the switch.
TRAFGEN_FRAME = (
    "{ 0x02,0x00,0xc6,0x12,0x00,0x63, 0x02,0x00,0xc6,0x12,0x00,0x01, 0x08,0x00,"
    " 0x45,0x00,0x00,0x2e, 0x00,0x00,0x40,0x00, 0x40,0x11, csumip(14,33),"
    " 198,18,0,1, 198,18,0,99, 0x04,0x00, 0x00,0x09, 0x00,0x1a, 0x00,0x00, fill(0x00,18) }"
)


def sh(*args, check=True, capture=True, timeout=120):
    r = subprocess.run(args, capture_output=capture, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed: {r.stdout}{r.stderr}")
    return r.stdout if capture else ""


def in_ns(ns, *args, **kw):
    return sh("ip", "netns", "exec", ns, *args, **kw)


def counter(ns, dev, name):
    return int(in_ns(ns, "cat", f"/sys/class/net/{dev}/statistics/{name}").strip())


def teardown():
    for ns in (GEN_NS, RCV_NS):
        sh("ip", "netns", "del", ns, check=False)
    for dev in (GEN_PORT, RCV_PORT, BRIDGE):
        sh("ip", "link", "del", dev, check=False)


def topology():
    teardown()
    for ns, port, mac, addr in ((GEN_NS, GEN_PORT, GEN_MAC, "198.18.0.1"), (RCV_NS, RCV_PORT, RCV_MAC, "198.18.0.2")):
        sh("ip", "netns", "add", ns)
        sh("ip", "link", "add", port, "type", "veth", "peer", "name", "eth0", "address", mac, "netns", ns)
        sh("ip", "link", "set", port, "up")
        # No IPv6 chatter: the hosts send only the benchmark's traffic.
        in_ns(ns, "sysctl", "-q", "-w", "net.ipv6.conf.eth0.disable_ipv6=1")
        in_ns(ns, "ip", "addr", "add", f"{addr}/24", "dev", "eth0")
        in_ns(ns, "ip", "link", "set", "eth0", "up")
        in_ns(ns, "ip", "link", "set", "lo", "up")


class Vsw:
    def __init__(self, mode, bindir):
        self.mode, self.bindir = mode, bindir
        self.name = f"vsw-{mode}"

    def ctl(self, *args):
        return sh(os.path.join(self.bindir, "vswctl"), "--socket", self.sock, *args)

    def start(self):
        self.dir = tempfile.mkdtemp(prefix="vswbench-")
        self.sock = os.path.join(self.dir, "vswd.sock")
        self.proc = subprocess.Popen(
            [os.path.join(self.bindir, "vswd"), "--socket", self.sock, "--state-file",
             os.path.join(self.dir, "state.json"), "--log", "warn"],
            stdin=subprocess.DEVNULL,
            # vswd may use every CPU (it puts its PMD on the last one and keeps its
            # other threads off it); this script itself is confined to CPU 0.
            preexec_fn=lambda: os.sched_setaffinity(0, range(os.cpu_count())))
        deadline = time.time() + 10
        while time.time() < deadline:
            if os.path.exists(self.sock) and subprocess.run(
                    [os.path.join(self.bindir, "vswctl"), "--socket", self.sock, "show"],
                    capture_output=True).returncode == 0:
                break
            time.sleep(0.05)
        else:
            raise RuntimeError("vswd did not come up")
        for port in (GEN_PORT, RCV_PORT):
            self.ctl("add-port", port, f"afpacket-mode={self.mode}")

    def stats(self):
        return json.loads(self.ctl("--format", "json", "pmd-stats-show"))[0]

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=10)


class Bridge:
    name = "bridge"

    def start(self):
        sh("ip", "link", "add", BRIDGE, "type", "bridge")
        for port in (GEN_PORT, RCV_PORT):
            sh("ip", "link", "set", port, "master", BRIDGE)
        sh("ip", "link", "set", BRIDGE, "up")

    def stats(self):
        return None

    def stop(self):
        sh("ip", "link", "del", BRIDGE)


def ping_rtt():
    out = in_ns(GEN_NS, "ping", "-c", "200", "-i", "0.01", "-q", "198.18.0.2")
    m = re.search(r"= ([\d.]+)/([\d.]+)/([\d.]+)/", out)
    return tuple(float(x) for x in m.groups())


def iperf(seconds):
    in_ns(RCV_NS, "iperf3", "-s", "-1", "-D", "-B", "198.18.0.2", "--logfile", "/dev/null")
    time.sleep(0.3)
    out = in_ns(GEN_NS, "taskset", "-c", "0", "iperf3", "-c", "198.18.0.2", "-t", str(seconds), "-J",
                timeout=seconds + 30)
    return json.loads(out)["end"]["sum_received"]["bits_per_second"] / 1e9


def trial(rate_pps, seconds, cfg):
    """Offers `rate_pps` (None: as fast as trafgen can) for about `seconds`.
    Returns (sent, received, loss, offered pps)."""
    count = int((rate_pps or 1_000_000) * seconds)
    rate = ["-b", f"{int(rate_pps)}pps"] if rate_pps else []
    tx0, rx0 = counter(GEN_NS, "eth0", "tx_packets"), counter(RCV_NS, "eth0", "rx_packets")
    t0 = time.monotonic()
    in_ns(GEN_NS, "taskset", "-c", "0", "trafgen", "-o", "eth0", "-i", cfg, "-P", "1", *rate,
          "-n", str(count), "--no-sock-mem", "--notouch-irq", "--no-cpu-stats", timeout=seconds * 4 + 30)
    elapsed = time.monotonic() - t0
    # Frames still queued in the switch count once they land: wait until the
    # receiver's counter stops moving (at most 5 s).
    tx = counter(GEN_NS, "eth0", "tx_packets") - tx0
    rx, deadline = -1, time.monotonic() + 5
    while time.monotonic() < deadline:
        time.sleep(0.1)
        now = counter(RCV_NS, "eth0", "rx_packets") - rx0
        if now == rx:
            break
        rx = now
    loss = (tx - rx) / tx if tx else 1.0
    return tx, rx, loss, tx / elapsed


def saturation(seconds, cfg):
    """trafgen at full speed: what the switch delivers when offered more than it takes."""
    tx, rx, loss, offered = trial(None, seconds, cfg)
    return {"offered_pps": offered, "delivered_pps": offered * (1 - loss), "loss": loss}


def throughput(seconds, cfg, lo=50_000, hi=1_200_000, steps=7):
    """RFC 2544-style binary search for the highest offered rate with loss <= tolerance."""
    best = None
    for _ in range(steps):
        mid = (lo + hi) / 2
        tx, rx, loss, offered = trial(mid, seconds, cfg)
        ok = loss <= LOSS_TOLERANCE
        print(f"    trial {mid / 1e3:7.0f} kpps requested, {offered / 1e3:7.0f} kpps offered:"
              f" loss {loss * 100:.4f} % -> {'pass' if ok else 'fail'}", flush=True)
        if ok:
            best = (mid, offered)
            lo = mid
        else:
            hi = mid
    if best is None:
        return None
    # Validation at the found rate.
    tx, rx, loss, offered = trial(best[0], seconds, cfg)
    print(f"    validation {best[0] / 1e3:7.0f} kpps: loss {loss * 100:.4f} %", flush=True)
    return {"requested_pps": best[0], "offered_pps": offered, "validation_loss": loss,
            "generator_limited": offered < 0.95 * best[0]}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trial-seconds", type=float, default=2.0)
    ap.add_argument("--iperf-seconds", type=int, default=5)
    ap.add_argument("--bindir", default="target/release")
    ap.add_argument("--switches", default="vsw-ring,vsw-ring-v3,vsw-mmsg,bridge")
    ap.add_argument("--json", help="write results here")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("run as root")
    # This script, the generator and every helper it starts stay on CPU 0, off the
    # core vsw's PMD polls on.
    os.sched_setaffinity(0, {0})
    makers = {"vsw-ring": lambda: Vsw("ring", args.bindir), "vsw-ring-v3": lambda: Vsw("ring-v3", args.bindir),
              "vsw-mmsg": lambda: Vsw("mmsg", args.bindir), "bridge": Bridge}
    results = {}
    cfg = tempfile.NamedTemporaryFile("w", suffix=".cfg", delete=False)
    cfg.write(TRAFGEN_FRAME + "\n")
    cfg.close()
    try:
        topology()
        for name in args.switches.split(","):
            sw = makers[name]()
            print(f"== {name}", flush=True)
            sw.start()
            try:
                in_ns(RCV_NS, "ping", "-c", "1", "-W", "2", "198.18.0.1")
                rtt = ping_rtt()
                print(f"  ping rtt min/avg/max {rtt[0]:.3f}/{rtt[1]:.3f}/{rtt[2]:.3f} ms", flush=True)
                gbps = iperf(args.iperf_seconds)
                print(f"  iperf3 {gbps:.2f} Gbit/s", flush=True)
                tput = throughput(args.trial_seconds, cfg.name)
                print(f"  64-byte no-loss rate: {tput}", flush=True)
                sat = saturation(args.trial_seconds, cfg.name)
                print(f"  64-byte at full generator speed: {sat}", flush=True)
                results[name] = {"rtt_ms": rtt, "iperf_gbps": gbps, "throughput": tput, "saturation": sat,
                                 "pmd": sw.stats()}
            finally:
                sw.stop()
    finally:
        teardown()
        os.unlink(cfg.name)
    print("\n| switch | 64 B no-loss rate (Mpps) | 64 B full speed: offered -> delivered (Mpps, loss) "
          "| iperf3 TCP (Gbit/s) | ping RTT min/avg/max (ms) |")
    print("|---|---|---|---|---|")
    for name, r in results.items():
        t = r["throughput"]
        rate = "-" if t is None else f"{t['offered_pps'] / 1e6:.3f}" + (" (generator-limited)" if t["generator_limited"] else "")
        sat = r["saturation"]
        full = f"{sat['offered_pps'] / 1e6:.3f} -> {sat['delivered_pps'] / 1e6:.3f} ({sat['loss'] * 100:.2f} %)"
        print(f"| {name} | {rate} | {full} | {r['iperf_gbps']:.2f} | {'/'.join(f'{x:.3f}' for x in r['rtt_ms'])} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
