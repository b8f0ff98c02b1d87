//! `vsw-bench vhost`: guest to guest through a switch's vhost-user ports, measured
//! the one way that is fair on two cores.
//!
//! Two busy-polling guests in two processes on one core measure the scheduler, not
//! the switch. So **one** DPDK testpmd process plays both guests on one core, with
//! io forwarding over four ports chained in a ring:
//!
//! ```text
//! port 0 source (net_null, or a looping pcap for IMIX) -> port 1 virtio_user0 = guest A
//!   -> switch port vm1 -> switch port vm2 -> port 2 virtio_user1 = guest B -> port 3 sink (net_null, no-rx)
//! ```
//!
//! Guest B's receive rate (testpmd's per-second `Rx-pps` of port 2) is the figure;
//! beside it the switch's own PMD busy cycles per packet received. The switch's
//! ports are vhost-user clients of sockets testpmd serves (`server=1`), so a switch
//! connects (again) whenever the guests come up.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde::Serialize;

use crate::switches::{Ovs, Vsw};

/// What guest A sends. Sizes are Ethernet frame sizes as RFC 2544 counts them, FCS
/// included (64 to 1518); the frames in guest memory are 4 bytes shorter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum FrameMix {
    /// Every frame this long (bytes, without the FCS).
    Fixed(usize),
    /// Simple IMIX: 64, 594 and 1518 bytes, 7:4:1 (361.8 bytes on average).
    Imix,
}

/// The frame check sequence: counted in a frame's size, not stored with it.
const FCS_LEN: usize = 4;

/// The IMIX sequence: twelve frames in an order that spreads the large ones.
pub const IMIX_SEQUENCE: [usize; 12] = [64, 594, 64, 64, 594, 64, 1518, 64, 594, 64, 594, 64];

impl FrameMix {
    pub fn parse(s: &str) -> anyhow::Result<FrameMix> {
        if s.eq_ignore_ascii_case("imix") {
            return Ok(FrameMix::Imix);
        }
        let n: usize = s
            .parse()
            .with_context(|| format!("frame size '{s}': a number of bytes or 'imix'"))?;
        if !(64..=1518).contains(&n) {
            bail!("frame size {n} is outside 64..1518 (FCS included)");
        }
        Ok(FrameMix::Fixed(n))
    }

    pub fn label(&self) -> String {
        match self {
            FrameMix::Fixed(n) => n.to_string(),
            FrameMix::Imix => "imix".into(),
        }
    }

    /// Mean frame length, bytes, FCS included.
    pub fn mean_len(&self) -> f64 {
        match self {
            FrameMix::Fixed(n) => *n as f64,
            FrameMix::Imix => {
                IMIX_SEQUENCE.iter().sum::<usize>() as f64 / IMIX_SEQUENCE.len() as f64
            }
        }
    }
}

/// A pcap file (microsecond timestamps, Ethernet) of `lens.len()` zero-filled frames
/// of those lengths, the IMIX source's loop.
pub fn pcap_of_lengths(lens: &[usize]) -> Vec<u8> {
    let mut f = Vec::new();
    for v in [0xa1b2_c3d4u32, 0x0004_0002, 0, 0, 65535, 1] {
        if v == 0x0004_0002 {
            // version 2.4: two u16 fields.
            f.extend_from_slice(&2u16.to_le_bytes());
            f.extend_from_slice(&4u16.to_le_bytes());
        } else {
            f.extend_from_slice(&v.to_le_bytes());
        }
    }
    for &len in lens {
        for v in [0u32, 0, len as u32, len as u32] {
            f.extend_from_slice(&v.to_le_bytes());
        }
        // A frame that parses as Ethernet with an unknown type, like net_null's zeros.
        f.extend(std::iter::repeat_n(0u8, len));
    }
    f
}

/// One per-second sample testpmd printed: the port and its receive rate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PortSample {
    pub port: u32,
    pub rx_pps: f64,
}

/// Reads testpmd's periodic statistics: a "NIC statistics for port N" block names
/// the port that the following "Rx-pps:" line belongs to.
#[derive(Default)]
pub struct StatsParser {
    port: Option<u32>,
}

impl StatsParser {
    pub fn line(&mut self, line: &str) -> Option<PortSample> {
        let t = line.trim();
        if let Some(rest) = t.split("NIC statistics for port").nth(1) {
            self.port = rest
                .trim()
                .trim_end_matches('#')
                .split_whitespace()
                .next()
                .and_then(|p| p.parse().ok());
            return None;
        }
        let rest = t.strip_prefix("Rx-pps:")?;
        let pps = rest.split_whitespace().next()?.parse().ok()?;
        Some(PortSample {
            port: self.port?,
            rx_pps: pps,
        })
    }
}

/// The switches the rig knows.
pub enum VhostSwitch {
    Vsw(Vsw),
    OvsDpdk(Ovs),
}

/// Where OVS's DPDK build of ovs-vswitchd lives (package openvswitch-switch-dpdk).
pub const OVS_DPDK_VSWITCHD: &str = "/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk";

impl VhostSwitch {
    /// `vsw`, `vsw@DIR` (another build's binaries) or `ovs-dpdk`; `None` with the
    /// reason when the switch is not installed here.
    pub fn by_name(name: &str, bin_dir: &Path) -> anyhow::Result<Result<VhostSwitch, String>> {
        if name == "ovs-dpdk" {
            if !Path::new(OVS_DPDK_VSWITCHD).is_file() {
                return Ok(Err(format!(
                    "ovs-dpdk skipped: {OVS_DPDK_VSWITCHD} is missing (apt-get install openvswitch-switch-dpdk)"
                )));
            }
            return Ok(Ok(VhostSwitch::OvsDpdk(Ovs::new(false, 1))));
        }
        let (dir, label) = match name.split_once('@') {
            Some(("vsw", d)) => (PathBuf::from(d), Some(name.to_string())),
            None if name == "vsw" => (bin_dir.to_path_buf(), None),
            _ => bail!("unknown switch '{name}' for vhost (known: vsw, vsw@DIR, ovs-dpdk)"),
        };
        if !dir.join("vswd").exists() {
            bail!("{name}: no vswd in {}", dir.display());
        }
        let mut v = Vsw::new(dir, "ring", 1);
        v.label = label;
        Ok(Ok(VhostSwitch::Vsw(v)))
    }

    pub fn name(&self) -> String {
        match self {
            VhostSwitch::Vsw(v) => v.label.clone().unwrap_or_else(|| "vsw".into()),
            VhostSwitch::OvsDpdk(_) => "ovs-dpdk".into(),
        }
    }

    /// Starts the switch with two vhost-user client ports, vm1 and vm2, on the
    /// sockets `socket(1)` and `socket(2)`, and the one flow vm1 -> vm2.
    fn start(&mut self, pmd_mask: u64, sleep_us: u32, sockets: [&Path; 2]) -> anyhow::Result<()> {
        match self {
            VhostSwitch::Vsw(v) => {
                v.launch(pmd_mask)?;
                if sleep_us > 0 {
                    v.ctl(&["set", &format!("pmd-sleep-max={sleep_us}")])?;
                }
                for (name, path) in ["vm1", "vm2"].iter().zip(sockets) {
                    v.ctl(&[
                        "add-port",
                        name,
                        "type=vhostuserclient",
                        &format!("vhost-server-path={}", path.display()),
                    ])?;
                }
                v.ctl(&["add-flow", "in_port=vm1,actions=output:vm2"])?;
            }
            VhostSwitch::OvsDpdk(o) => {
                o.launch(
                    OVS_DPDK_VSWITCHD,
                    pmd_mask,
                    &[
                        "other_config:dpdk-init=true".into(),
                        format!(
                            "other_config:dpdk-extra=--no-huge --legacy-mem -m 1024 --no-pci --file-prefix ovsbench{}",
                            std::process::id()
                        ),
                        "other_config:per-port-memory=true".into(),
                        format!("other_config:pmd-maxsleep={sleep_us}"),
                    ],
                )?;
                for (name, path) in ["vm1", "vm2"].iter().zip(sockets) {
                    o.vsctl(&[
                        "add-port",
                        "br0",
                        name,
                        "--",
                        "set",
                        "Interface",
                        name,
                        "type=dpdkvhostuserclient",
                        &format!("options:vhost-server-path={}", path.display()),
                    ])?;
                }
                o.ofctl(&["del-flows", "br0"])?;
                o.ofctl(&["add-flow", "br0", "in_port=vm1,actions=output:vm2"])?;
            }
        }
        Ok(())
    }

    fn stop(&mut self) {
        match self {
            VhostSwitch::Vsw(v) => v.shut_down(),
            VhostSwitch::OvsDpdk(o) => o.shut_down(),
        }
    }

    fn clear_pmd_stats(&self) {
        match self {
            VhostSwitch::Vsw(v) => {
                let _ = v.ctl(&["pmd-stats-clear"]);
            }
            VhostSwitch::OvsDpdk(o) => o.clear_pmd_statistics(),
        }
    }

    /// PMD busy cycles per packet received since the last clear, over all PMDs.
    fn pmd_cycles_per_packet(&self) -> Option<f64> {
        match self {
            VhostSwitch::Vsw(v) => v.pmd_cycles_per_packet(),
            VhostSwitch::OvsDpdk(o) => {
                let (busy, packets) = o.pmd_totals()?;
                (packets > 0.0).then(|| busy / packets)
            }
        }
    }
}

/// One run's settings.
#[derive(Clone, Debug)]
pub struct RigConfig {
    pub frames: FrameMix,
    /// Queue pairs per guest; the switch gets one PMD per pair (cores 1, 0, …).
    pub queues: usize,
    /// Seconds from the first frame at guest B before measuring.
    pub warmup: Duration,
    pub measure: Duration,
    /// The core testpmd (both guests and the generator) runs on.
    pub guest_cpu: usize,
    pub pmd_cpu: usize,
    /// The longest a PMD with nothing to do may sleep, µs (vsw `pmd-sleep-max`, OVS
    /// `pmd-maxsleep`); 0: PMDs never sleep.
    pub pmd_sleep_us: u32,
}

/// One run's figures.
#[derive(Clone, Debug, Serialize)]
pub struct RigResult {
    pub switch: String,
    pub frames: String,
    pub queues: usize,
    /// Guest B's mean receive rate over the measured seconds.
    pub guest_b_mpps: f64,
    pub guest_b_gbps: f64,
    /// The per-second samples of that mean.
    pub samples_mpps: Vec<f64>,
    pub pmd_cycles_per_packet: Option<f64>,
}

/// The testpmd process of one run: both guests, the source and the sink.
struct Guests {
    child: Child,
    samples: Arc<Mutex<Vec<(Instant, PortSample)>>>,
    log: Arc<Mutex<Vec<String>>>,
}

impl Guests {
    fn start(cfg: &RigConfig, dir: &Path, tag: &str) -> anyhow::Result<Guests> {
        let q = cfg.queues.to_string();
        let source = match cfg.frames {
            FrameMix::Fixed(n) => format!("net_null0,size={}", n - FCS_LEN),
            FrameMix::Imix => {
                let pcap = dir.join("imix.pcap");
                let lens: Vec<usize> = IMIX_SEQUENCE.iter().map(|n| n - FCS_LEN).collect();
                std::fs::write(&pcap, pcap_of_lengths(&lens))?;
                // The pcap device has one receive queue per rx_pcap given.
                let mut arg = String::from("net_pcap0,infinite_rx=1");
                for k in 0..cfg.queues {
                    arg += &format!(
                        ",rx_pcap={},tx_pcap={}",
                        pcap.display(),
                        dir.join(format!("imix-tx{k}.pcap")).display()
                    );
                }
                arg
            }
        };
        let guest = |k: usize| {
            format!(
                "virtio_user{},path={},queues={q},server=1",
                k - 1,
                dir.join(format!("vm{k}.sock")).display()
            )
        };
        let lcores = format!("0@{c},1@{c}", c = cfg.guest_cpu);
        let prefix = format!("vswbench{tag}{}", std::process::id());
        let mut child = Command::new("dpdk-testpmd")
            .args(["--lcores", &lcores, "--no-huge", "-m", "512", "--no-pci"])
            .args(["--file-prefix", &prefix, "--log-level", "*:notice"])
            .args(["--vdev", &source, "--vdev", &guest(1), "--vdev", &guest(2)])
            .args(["--vdev", "net_null1,no-rx=1", "--"])
            .args([
                "--forward-mode=io",
                "--port-topology=chained",
                "--nb-cores=1",
            ])
            .args(["--rxq", &q, "--txq", &q, "--total-num-mbufs=65536"])
            .args(["--stats-period", "1"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .context("cannot start dpdk-testpmd (apt-get install dpdk-dev)")?;
        let samples = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::new(Mutex::new(Vec::new()));
        let out = child.stdout.take().context("stdout")?;
        let err = child.stderr.take().context("stderr")?;
        {
            let (samples, log) = (samples.clone(), log.clone());
            std::thread::spawn(move || {
                let mut parser = StatsParser::default();
                for line in BufReader::new(out).lines().map_while(Result::ok) {
                    if let Some(s) = parser.line(&line) {
                        samples.lock().unwrap().push((Instant::now(), s));
                    } else if !line.contains("##") && !line.trim().is_empty() {
                        let mut l = log.lock().unwrap();
                        if l.len() < 200 {
                            l.push(line);
                        }
                    }
                }
            });
        }
        {
            let log = log.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(err).lines().map_while(Result::ok) {
                    let mut l = log.lock().unwrap();
                    if l.len() < 400 {
                        l.push(line);
                    }
                }
            });
        }
        Ok(Guests {
            child,
            samples,
            log,
        })
    }

    /// Guest B's samples taken after `since`.
    fn guest_b_since(&self, since: Instant) -> Vec<f64> {
        self.samples
            .lock()
            .unwrap()
            .iter()
            .filter(|(t, s)| *t > since && s.port == 2)
            .map(|(_, s)| s.rx_pps)
            .collect()
    }

    fn exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }

    fn tail_of_log(&self) -> String {
        let l = self.log.lock().unwrap();
        l.iter()
            .skip(l.len().saturating_sub(15))
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn stop(mut self) {
        let _ = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .output();
        let deadline = Instant::now() + Duration::from_secs(10);
        while !self.exited() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Measures one switch once: starts it, then the guests, waits for frames at guest
/// B, lets it settle, and measures.
pub fn run(sw: &mut VhostSwitch, cfg: &RigConfig, tag: &str) -> anyhow::Result<RigResult> {
    let pmd_mask = match cfg.queues {
        1 => 1u64 << cfg.pmd_cpu,
        _ => (1u64 << cfg.pmd_cpu) | (1u64 << cfg.guest_cpu),
    };
    // The sockets live in a directory of the rig's own, served by testpmd.
    let dir = std::env::temp_dir().join(format!("vsw-bench-vhost-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let sockets = [dir.join("vm1.sock"), dir.join("vm2.sock")];
    let result = (|| {
        sw.start(pmd_mask, cfg.pmd_sleep_us, [&sockets[0], &sockets[1]])?;
        let mut guests = Guests::start(cfg, &dir, tag)?;
        let r = measure(sw, cfg, &mut guests);
        if r.is_err() {
            eprintln!("testpmd said:\n{}", guests.tail_of_log());
        }
        guests.stop();
        r
    })();
    sw.stop();
    let _ = std::fs::remove_dir_all(&dir);
    result
}

fn measure(sw: &VhostSwitch, cfg: &RigConfig, guests: &mut Guests) -> anyhow::Result<RigResult> {
    let start = Instant::now();
    // Frames at guest B: both guests connected and the switch forwarding.
    loop {
        if guests.exited() {
            bail!("dpdk-testpmd ended early");
        }
        if guests.guest_b_since(start).iter().any(|&pps| pps > 1000.0) {
            break;
        }
        if start.elapsed() > Duration::from_secs(30) {
            bail!("no frames reached guest B within 30 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(cfg.warmup);
    sw.clear_pmd_stats();
    let from = Instant::now();
    std::thread::sleep(cfg.measure);
    let cycles = sw.pmd_cycles_per_packet();
    // The sample printed just after the window still covers its last second.
    std::thread::sleep(Duration::from_millis(1100));
    let mut samples = guests.guest_b_since(from);
    samples.truncate(cfg.measure.as_secs().max(1) as usize);
    if samples.is_empty() {
        bail!("testpmd printed no statistics for guest B");
    }
    let mean = samples.iter().sum::<f64>() / samples.len() as f64;
    Ok(RigResult {
        switch: sw.name(),
        frames: cfg.frames.label(),
        queues: cfg.queues,
        guest_b_mpps: mean / 1e6,
        guest_b_gbps: mean * cfg.frames.mean_len() * 8.0 / 1e9,
        samples_mpps: samples.iter().map(|s| s / 1e6).collect(),
        pmd_cycles_per_packet: cycles,
    })
}

/// The report: each switch's runs per frame mix and queue count, then the first
/// switch's medians against each other's, then what was skipped.
pub fn report_markdown(
    runs: &[RigResult],
    switches: &[String],
    mixes: &[FrameMix],
    queues: &[usize],
    skipped: &[String],
) -> String {
    let mut md = String::from("| frames | queue pairs | switch | guest B Mpps (runs) | Gbit/s | PMD cycles/packet (runs) |\n|---|---|---|---|---|---|\n");
    let list = |v: &[f64], d: usize| {
        v.iter()
            .map(|x| format!("{x:.d$}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut ratios = String::new();
    for mix in mixes {
        for &q in queues {
            let mut medians = Vec::new();
            for name in switches {
                let mine: Vec<&RigResult> = runs
                    .iter()
                    .filter(|r| &r.switch == name && r.frames == mix.label() && r.queues == q)
                    .collect();
                let mpps: Vec<f64> = mine.iter().map(|r| r.guest_b_mpps).collect();
                let gbps: Vec<f64> = mine.iter().map(|r| r.guest_b_gbps).collect();
                let cycles: Vec<f64> = mine
                    .iter()
                    .filter_map(|r| r.pmd_cycles_per_packet)
                    .collect();
                md += &format!(
                    "| {} | {q} | {name} | {} (median {:.3}) | {:.2} | {} |\n",
                    mix.label(),
                    list(&mpps, 3),
                    median(&mpps).unwrap_or(0.0),
                    median(&gbps).unwrap_or(0.0),
                    list(&cycles, 0),
                );
                medians.push((name, median(&mpps), median(&cycles)));
            }
            let Some((first, rest)) = medians.split_first() else {
                continue;
            };
            for other in rest {
                let (Some(a), Some(b)) = (first.1, other.1) else {
                    continue;
                };
                let cycles = match (first.2, other.2) {
                    (Some(c1), Some(c2)) => format!(
                        ", {:.2} × the PMD cycles per packet ({c1:.0} against {c2:.0})",
                        c1 / c2
                    ),
                    _ => String::new(),
                };
                ratios += &format!(
                    "- {} frames, {q} queue pair(s): {} / {} = **{:.2} ×** guest B's rate{cycles}\n",
                    mix.label(),
                    first.0,
                    other.0,
                    a / b,
                );
            }
        }
    }
    md += "\n";
    md += &ratios;
    for s in skipped {
        md += &format!("\n{s}\n");
    }
    md
}

/// The median of some figures (the mean of the middle two for an even count).
pub fn median(v: &[f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let m = s.len() / 2;
    Some(if s.len().is_multiple_of(2) {
        (s[m - 1] + s[m]) / 2.0
    } else {
        s[m]
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn testpmd_statistics_are_read_per_port() {
        let out = "\n  ######################## NIC statistics for port 1  ########################\n  RX-packets: 0          RX-missed: 0          RX-bytes:  0\n  Throughput (since last show)\n  Rx-pps:            5          Rx-bps:            0\n  Tx-pps:      4000000          Tx-bps:   2048000000\n  ######################## NIC statistics for port 2  ########################\n  Rx-pps:      3512345          Rx-bps:   1798320640\n";
        let mut p = StatsParser::default();
        let got: Vec<PortSample> = out.lines().filter_map(|l| p.line(l)).collect();
        assert_eq!(
            got,
            vec![
                PortSample {
                    port: 1,
                    rx_pps: 5.0
                },
                PortSample {
                    port: 2,
                    rx_pps: 3_512_345.0
                }
            ]
        );
    }

    #[test]
    fn the_imix_pcap_holds_the_sequence() {
        let f = pcap_of_lengths(&IMIX_SEQUENCE);
        assert_eq!(&f[..4], &0xa1b2_c3d4u32.to_le_bytes());
        let mut at = 24;
        let mut lens = Vec::new();
        while at < f.len() {
            let caplen = u32::from_le_bytes(f[at + 8..at + 12].try_into().unwrap()) as usize;
            lens.push(caplen);
            at += 16 + caplen;
        }
        assert_eq!(at, f.len());
        assert_eq!(lens, IMIX_SEQUENCE);
        assert!((FrameMix::Imix.mean_len() - 361.83).abs() < 0.01);
        let counts = |n| IMIX_SEQUENCE.iter().filter(|&&l| l == n).count();
        assert_eq!((counts(64), counts(594), counts(1518)), (7, 4, 1));
    }

    #[test]
    fn the_report_gives_medians_and_the_ratio_to_the_first_switch() {
        let r = |switch: &str, mpps: f64, cycles: f64| RigResult {
            switch: switch.into(),
            frames: "64".into(),
            queues: 1,
            guest_b_mpps: mpps,
            guest_b_gbps: mpps * 64.0 * 8.0 / 1e3,
            samples_mpps: vec![mpps],
            pmd_cycles_per_packet: Some(cycles),
        };
        let runs = [
            r("vsw", 10.0, 230.0),
            r("ovs-dpdk", 8.0, 300.0),
            r("vsw", 12.0, 240.0),
        ];
        let md = report_markdown(
            &runs,
            &["vsw".into(), "ovs-dpdk".into()],
            &[FrameMix::Fixed(64)],
            &[1],
            &["ovs-afxdp skipped".into()],
        );
        assert!(
            md.contains("| 64 | 1 | vsw | 10.000, 12.000 (median 11.000) |"),
            "{md}"
        );
        assert!(
            md.contains("vsw / ovs-dpdk = **1.38 ×** guest B's rate, 0.78 ×"),
            "{md}"
        );
        assert!(md.contains("(235 against 300)"), "{md}");
        assert!(md.ends_with("ovs-afxdp skipped\n"));
    }

    #[test]
    fn frame_sizes_parse() {
        assert_eq!(FrameMix::parse("64").unwrap(), FrameMix::Fixed(64));
        assert_eq!(FrameMix::parse("IMIX").unwrap(), FrameMix::Imix);
        assert!(FrameMix::parse("9000").is_err());
        assert!(FrameMix::parse("big").is_err());
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
    }
}
