//! vsw-bench: RFC 2544 throughput, latency and CPU cost of vsw beside other switches,
//! on one topology, in one run.
#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::{Parser, Subcommand};
use serde::Serialize;
use vsw_bench::latency::LatencySummary;
use vsw_bench::progress::{self, Plan, Progress};
use vsw_bench::search::{binary_search, SearchConfig, SearchResult, Trial, TrialRunner};
use vsw_bench::switches::{self, SwitchUnderTest};
use vsw_bench::topology::Topology;
use vsw_bench::traffic::{run_trial, Traffic};
use vsw_bench::{frame, plot};

#[derive(Parser)]
#[command(
    version,
    about = "Benchmark vsw beside the Linux bridge: RFC 2544 throughput, latency, CPU"
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Everything for every switch in --switches, in one run: throughput, latency, CPU, TCP.
    Compare(Options),
    /// RFC 2544 throughput only.
    Throughput(Options),
    /// Throughput, then one-way latency at --latency-loads percent of it.
    Latency(Options),
    /// CPU time per forwarded packet at a fixed rate.
    Cpu(CpuArgs),
    /// iperf3 TCP between the hosts, offloads on and off.
    Tcp(Options),
    /// The datapath alone: one PMD between two in-memory ring ports (no devices, no
    /// root needed), in packets per second and cycles per packet.
    Datapath(DatapathArgs),
    /// What reading the time costs here: the TSC against CLOCK_MONOTONIC.
    Clocks,
    /// What software GRO costs per 1,448-byte segment: segments whose checksums it
    /// checks (a sender without checksum offload) against segments the kernel marked
    /// checked (DATA_VALID); and the Internet checksum over such a segment.
    Gro,
    /// What VXLAN and Geneve headers cost per 64-byte packet: encapsulation with a
    /// port's template and decapsulation, beside a plain copy of the frame.
    Tunnel {
        /// Rounds (each case once per round).
        #[arg(long, default_value_t = 3)]
        rounds: u32,
        /// Through the datapath instead: 64-byte frames encapsulated by one VXLAN
        /// port and decapsulated for another, in memory, beside straight forwarding.
        #[arg(long)]
        datapath: bool,
        /// Seconds per case (--datapath).
        #[arg(long, default_value_t = 3.0)]
        seconds: f64,
        /// The PMD's core (--datapath).
        #[arg(long, default_value_t = 1)]
        core: usize,
    },
    /// vsw alone, sweeping tx-flush-interval: kicks per packet, packets per batch,
    /// PMD cycles per packet and latency at several rates, and zero-loss throughput.
    Batching(BatchingArgs),
    /// Guest to guest through vhost-user ports: one testpmd process is both guests
    /// (source -> guest A -> switch -> guest B -> sink) on one core, the switch's PMD
    /// on another; guest B's rate and the PMD's cycles per packet, switch beside switch.
    Vhost(VhostArgs),
    /// OpenFlow flow-mods per second: `ovs-ofctl add-flows` of --flows flows (each
    /// flow-mod confirmed by a barrier, as ovs-ofctl sends them) into vsw and into
    /// Open vSwitch's userspace datapath, in interleaved rounds.
    FlowMods(FlowModsArgs),
    /// Strict deletes of --rules rules beside --dp-flows cached datapath flows (the
    /// generator's, one a rule's source port): a controller's burst (every delete,
    /// then one barrier) and `ovs-ofctl add-flows` of `delete_strict` lines (a barrier
    /// after each); vsw beside Open vSwitch (netdev), the same veths, in one run.
    FlowDeletes(FlowDeletesArgs),
    /// One atomic bundle of --flows flow-mods (OpenFlow 1.4, sent by this program's
    /// own controller): the adds, the commit (request to reply) and the first packet
    /// the new rules forward; vsw beside Open vSwitch (netdev), the same veths.
    BundleCommit(BundleCommitArgs),
    /// The OpenFlow 1.3 switch test tool of os-ken (Ryu's tester.py and its 991
    /// tests) against vswd, Open vSwitch (netdev) the tester switch: tests passed.
    Conformance(ConformanceArgs),
    /// How fast `ovs-vsctl` changes take effect: add-port to the first packet sent on
    /// the port, and --ports ports in one transaction; vswd --ovsdb beside
    /// ovs-vswitchd (netdev) on the same private ovsdb-server set-up.
    OvsdbPorts(OvsdbPortsArgs),
    /// OpenFlow packet-ins per second: a table-miss rule to the controller, an evenly
    /// paced stream of --rate 64-byte frames into the switch, packet-ins counted by a
    /// controller of this program's own; vsw beside Open vSwitch (netdev).
    PacketIns(PacketInsArgs),
    /// The connection tracker alone, in memory: --connections committed (new
    /// connections per second, memory per connection), looked up by one thread and
    /// by two, a zone of --zone of them flushed and the table swept while another
    /// thread looks up (how long each takes, the longest lookup meanwhile).
    ConntrackScale {
        #[arg(long, default_value_t = 1_000_000)]
        connections: usize,
        /// Connections of the zone flushed (part of --connections).
        #[arg(long, default_value_t = 100_000)]
        zone: usize,
        /// Runs, each in a process of its own (so that the memory each measures
        /// is its own tracker's, none left over from the run before).
        #[arg(long, default_value_t = 2)]
        rounds: u32,
        /// Run one round in this process and print its row only (what each round's
        /// process is told).
        #[arg(long, hide = true)]
        one: bool,
    },
    /// What framing an initial OVSDB monitor reply costs: --rows Interface rows with
    /// --keys option keys each, in 64 KiB reads, through vsw-ovsdb's framer beside the
    /// build before's (the pending bytes parsed again at every read). In memory.
    OvsdbFraming {
        /// Row counts, comma-separated.
        #[arg(long, value_delimiter = ',', default_value = "5000,20000")]
        rows: Vec<usize>,
        /// Option keys per row.
        #[arg(long, default_value_t = 50)]
        keys: usize,
        /// Runs of each case.
        #[arg(long, default_value_t = 3)]
        rounds: u32,
        /// Leave out the build before's framer (it is quadratic: minutes at 100,000 rows).
        #[arg(long)]
        linear_only: bool,
    },
}

#[derive(clap::Args, Clone)]
struct PacketInsArgs {
    /// Offered rate, packets per second.
    #[arg(long, default_value_t = 100_000.0)]
    rate: f64,
    /// Seconds per run.
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// Rounds; each switch once per round, the order alternating.
    #[arg(long, default_value_t = 2)]
    rounds: u32,
    /// CPU for the generator (and the counting controller).
    #[arg(long, default_value_t = 0)]
    gen_cpu: usize,
    /// The switches' PMD core.
    #[arg(long, default_value_t = 1)]
    pmd_cpu: usize,
    /// Where vswd and vswctl are (default: beside this program).
    #[arg(long)]
    bin_dir: Option<PathBuf>,
}

#[derive(clap::Args, Clone)]
struct FlowModsArgs {
    /// Distinct flows added (into an empty table).
    #[arg(long, default_value_t = 5000)]
    flows: u32,
    /// Rounds; each switch once per round.
    #[arg(long, default_value_t = 2)]
    rounds: u32,
    /// The switches' PMD core.
    #[arg(long, default_value_t = 1)]
    pmd_cpu: usize,
    /// All the flows in one atomic bundle (`ovs-ofctl -O OpenFlow14 --bundle
    /// add-flows`), committed together.
    #[arg(long)]
    bundle: bool,
    /// The core ovs-ofctl runs on, for both switches.
    #[arg(long, default_value_t = 0)]
    ofctl_cpu: usize,
    /// Where vswd and vswctl are (default: beside this program).
    #[arg(long)]
    bin_dir: Option<PathBuf>,
}

#[derive(clap::Args, Clone)]
struct BundleCommitArgs {
    /// Flow-mods in the bundle (into an empty table).
    #[arg(long, default_value_t = 100_000)]
    flows: u32,
    /// Rounds; each switch once per round.
    #[arg(long, default_value_t = 2)]
    rounds: u32,
    /// The switches' PMD core.
    #[arg(long, default_value_t = 1)]
    pmd_cpu: usize,
    /// The probe's core.
    #[arg(long, default_value_t = 0)]
    gen_cpu: usize,
    /// Measure only vsw (to profile it), not Open vSwitch beside it.
    #[arg(long)]
    vsw_only: bool,
    /// Where vswd and vswctl are (default: beside this program).
    #[arg(long)]
    bin_dir: Option<PathBuf>,
}

#[derive(clap::Args, Clone)]
struct ConformanceArgs {
    /// The tests of one directory of the tool's (`match`, `action`, `group`,
    /// `meter`); all when not given.
    #[arg(long, default_value = "")]
    tests: String,
    /// The switches' PMD core.
    #[arg(long, default_value_t = 1)]
    pmd_cpu: usize,
    /// The longest the run may take, in minutes.
    #[arg(long, default_value_t = 120)]
    minutes: u64,
    /// Where the tool's output goes.
    #[arg(long, default_value = "/tmp/vsw-conformance.log")]
    log: PathBuf,
    /// Where vswd and vswctl are (default: beside this program).
    #[arg(long)]
    bin_dir: Option<PathBuf>,
}

#[derive(clap::Args, Clone)]
struct FlowDeletesArgs {
    /// Rules installed, and deleted one by one (DELETE_STRICT).
    #[arg(long, default_value_t = 10_000)]
    rules: u32,
    /// Datapath flows cached when the deletes begin (the generator's flows).
    #[arg(long, default_value_t = 50_000)]
    dp_flows: u16,
    /// The generator's rate while it makes them, frames per second.
    #[arg(long, default_value_t = 100_000.0)]
    rate: f64,
    /// Rounds; each switch once per round and mode.
    #[arg(long, default_value_t = 1)]
    rounds: u32,
    /// `burst`, `ovs-ofctl`, or `both`.
    #[arg(long, default_value = "both")]
    modes: String,
    /// The switches' PMD core.
    #[arg(long, default_value_t = 1)]
    pmd_cpu: usize,
    /// The generator's core.
    #[arg(long, default_value_t = 0)]
    gen_cpu: usize,
    /// Where vswd and vswctl are (default: beside this program).
    #[arg(long)]
    bin_dir: Option<PathBuf>,
}

#[derive(clap::Args, Clone)]
struct OvsdbPortsArgs {
    /// Ports added in one transaction.
    #[arg(long, default_value_t = 100)]
    ports: u32,
    /// Rounds; each daemon once per round.
    #[arg(long, default_value_t = 2)]
    rounds: u32,
    /// The daemons' PMD core.
    #[arg(long, default_value_t = 1)]
    pmd_cpu: usize,
    /// Where vswd is (default: beside this program).
    #[arg(long)]
    bin_dir: Option<PathBuf>,
    /// `options:n_rxq_desc` on every port added (vsw: receive ring frames).
    #[arg(long)]
    n_rxq_desc: Option<u32>,
    /// `options:n_txq_desc` on every port added (vsw: transmit ring frames).
    #[arg(long)]
    n_txq_desc: Option<u32>,
}

#[derive(clap::Args, Clone)]
struct VhostArgs {
    /// Switches, measured in turn each round: vsw, vsw@DIR (another build), ovs-dpdk
    /// (skipped, with a note, where openvswitch-switch-dpdk is missing).
    #[arg(long, default_value = "vsw,ovs-dpdk", value_delimiter = ',')]
    switches: Vec<String>,
    /// Frame sizes: bytes, or imix (64/594/1518 at 7:4:1).
    #[arg(long, default_value = "64", value_delimiter = ',')]
    frame_size: Vec<String>,
    /// Queue pairs per guest: 1 (one PMD), 2 (two PMDs, one sharing the guests' core).
    #[arg(long, default_value = "1", value_delimiter = ',')]
    queues: Vec<usize>,
    /// Rounds; every switch once per round, interleaved.
    #[arg(long, default_value_t = 2)]
    repeats: usize,
    /// Seconds measured per run (after --warmup from guest B's first frames).
    #[arg(long, default_value_t = 5)]
    seconds: u64,
    #[arg(long, default_value_t = 2)]
    warmup: u64,
    /// The core of the testpmd process (generator and both guests).
    #[arg(long, default_value_t = 0)]
    guest_cpu: usize,
    /// The switch's PMD core (with 2 queues, its second PMD is on --guest-cpu).
    #[arg(long, default_value_t = 1)]
    pmd_cpu: usize,
    /// The longest an idle PMD sleeps, µs, for every switch (vsw pmd-sleep-max, OVS
    /// pmd-maxsleep): a PMD that shares the guests' core gives it back when idle.
    #[arg(long, default_value_t = 0)]
    pmd_sleep_max: u32,
    #[arg(long)]
    bin_dir: Option<PathBuf>,
    #[arg(long, default_value = "bench-results")]
    out: PathBuf,
}

#[derive(Serialize)]
struct VhostReport {
    date: String,
    command: String,
    skipped: Vec<String>,
    runs: Vec<vsw_bench::vhost::RigResult>,
}

fn vhost(a: &VhostArgs) -> anyhow::Result<()> {
    use vsw_bench::vhost::{run, FrameMix, RigConfig, VhostSwitch};
    require_root()?;
    let bin_dir = bin_dir(&a.bin_dir)?;
    let mixes: Vec<FrameMix> = a
        .frame_size
        .iter()
        .map(|s| FrameMix::parse(s))
        .collect::<anyhow::Result<_>>()?;
    if let Some(q) = a.queues.iter().find(|q| !(1..=2).contains(*q)) {
        bail!("--queues {q}: 1 or 2 (this rig has two cores)");
    }
    let mut skipped = Vec::new();
    let mut sws = Vec::new();
    for name in &a.switches {
        match VhostSwitch::by_name(name, &bin_dir)? {
            Ok(s) => sws.push(s),
            Err(why) => {
                eprintln!("{why}");
                skipped.push(why);
            }
        }
    }
    let mut runs = Vec::new();
    for mix in &mixes {
        for &queues in &a.queues {
            let cfg = RigConfig {
                frames: *mix,
                queues,
                warmup: Duration::from_secs(a.warmup),
                measure: Duration::from_secs(a.seconds),
                guest_cpu: a.guest_cpu,
                pmd_cpu: a.pmd_cpu,
                pmd_sleep_us: a.pmd_sleep_max,
            };
            for round in 0..a.repeats {
                for (k, sw) in sws.iter_mut().enumerate() {
                    eprint!(
                        "== {} frames {} queues {queues} round {}: ",
                        sw.name(),
                        mix.label(),
                        round + 1
                    );
                    let r = run(sw, &cfg, &format!("{round}{k}"))?;
                    eprintln!(
                        "guest B {:.3} Mpps, PMD {} cycles/packet",
                        r.guest_b_mpps,
                        r.pmd_cycles_per_packet
                            .map_or("-".into(), |c| format!("{c:.0}"))
                    );
                    runs.push(r);
                }
            }
        }
    }
    let report = VhostReport {
        date: topology_date(),
        command: std::env::args().collect::<Vec<_>>().join(" "),
        skipped,
        runs,
    };
    std::fs::create_dir_all(&a.out)?;
    std::fs::write(
        a.out.join("results.json"),
        serde_json::to_string_pretty(&report)?,
    )?;
    let names: Vec<String> = sws.iter().map(|s| s.name()).collect();
    let md =
        vsw_bench::vhost::report_markdown(&report.runs, &names, &mixes, &a.queues, &report.skipped);
    std::fs::write(a.out.join("results.md"), &md)?;
    print!("{md}");
    Ok(())
}

#[derive(clap::Args, Clone)]
struct BatchingArgs {
    /// Intervals to sweep, microseconds.
    #[arg(long, default_value = "0,10,25,50,100,200", value_delimiter = ',')]
    intervals: Vec<u32>,
    /// Offered rates, pps; "edge" is 90 % of the zero-loss throughput at interval 0.
    #[arg(long, default_value = "10000,150000,edge", value_delimiter = ',')]
    rates: Vec<String>,
    /// Seconds per trial.
    #[arg(long, default_value_t = 2.0)]
    trial_seconds: f64,
    /// Skip the zero-loss search at every interval (interval 0 is searched anyway
    /// when a rate is "edge").
    #[arg(long)]
    no_search: bool,
    /// vsw's pmd-sleep-max for the whole sweep (µs; 0: the PMD never sleeps).
    #[arg(long, default_value_t = 0)]
    pmd_sleep_max: u32,
    #[arg(long, default_value_t = 0)]
    gen_cpu: usize,
    #[arg(long, default_value_t = 1)]
    pmd_cpu: usize,
    #[arg(long)]
    bin_dir: Option<PathBuf>,
    #[arg(long, default_value = "bench-results")]
    out: PathBuf,
}

#[derive(Serialize)]
struct BatchPoint {
    interval_us: u32,
    rate_pps: f64,
    loss: f64,
    kicks_per_packet: Option<f64>,
    packets_per_batch: Option<f64>,
    pmd_cycles_per_packet: Option<f64>,
    latency: LatencySummary,
}

#[derive(Serialize)]
struct BatchSweep {
    date: String,
    command: String,
    throughput_pps: Vec<(u32, Option<f64>)>,
    points: Vec<BatchPoint>,
}

fn ovsdb_ports(a: &OvsdbPortsArgs) -> anyhow::Result<()> {
    use vsw_bench::ovsdb_ports::{measure, report_markdown, Descriptors};
    let desc = Descriptors {
        rx: a.n_rxq_desc,
        tx: a.n_txq_desc,
    };
    require_root()?;
    let vswd = bin_dir(&a.bin_dir)?.join("vswd");
    let mut runs = Vec::new();
    for round in 0..a.rounds {
        // Who goes first alternates.
        let order = if round % 2 == 0 {
            [true, false]
        } else {
            [false, true]
        };
        for vsw in order {
            let r = measure(vsw.then_some(vswd.as_path()), a.pmd_cpu, a.ports, desc)?;
            eprintln!("{}: {}", r.switch, r.summary());
            runs.push(r);
        }
    }
    print!("{}", report_markdown(&runs));
    Ok(())
}

fn flow_mods(a: &FlowModsArgs) -> anyhow::Result<()> {
    use vsw_bench::flow_mods::{measure_ovs, measure_vsw, report_markdown, write_flows};
    require_root()?;
    if a.ofctl_cpu == a.pmd_cpu {
        anyhow::bail!(
            "--ofctl-cpu {} is the PMD's core: choose another",
            a.ofctl_cpu
        );
    }
    let file = std::env::temp_dir().join(format!("vsw-bench-flows-{}.txt", std::process::id()));
    write_flows(&file, a.flows)?;
    let mut vsw = switches::Vsw::new(bin_dir(&a.bin_dir)?, "ring", a.pmd_cpu);
    let mut runs = Vec::new();
    let result = (|| {
        for round in 0..a.rounds {
            // Who goes first alternates.
            let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
            for s in order {
                let r = if s == 0 {
                    measure_vsw(&mut vsw, &file, a.flows, a.bundle, a.ofctl_cpu)?
                } else {
                    measure_ovs(a.pmd_cpu, &file, a.flows, a.bundle, a.ofctl_cpu)?
                };
                eprintln!("{}: {} flows in {:.2} s", r.switch, r.flows, r.seconds);
                runs.push(r);
            }
        }
        anyhow::Ok(())
    })();
    let _ = std::fs::remove_file(&file);
    result?;
    print!("{}", report_markdown(&runs));
    Ok(())
}

fn conformance(a: &ConformanceArgs) -> anyhow::Result<()> {
    require_root()?;
    let r = vsw_bench::conformance::run_suite(
        bin_dir(&a.bin_dir)?,
        a.pmd_cpu,
        &a.tests,
        &a.log,
        Duration::from_secs(a.minutes * 60),
    )?;
    println!(
        "vsw: {} of {} tests passed ({} failed; output: {})",
        r.ok,
        r.ok + r.errors,
        r.errors,
        a.log.display()
    );
    Ok(())
}

fn bundle_commit(a: &BundleCommitArgs) -> anyhow::Result<()> {
    use vsw_bench::bundle_commit::{measure, report_markdown};
    require_root()?;
    let topo = Topology::create()?;
    let traffic = topo.traffic(frame_lens("64")?, 1, Duration::ZERO, a.gen_cpu);
    let bin = bin_dir(&a.bin_dir)?;
    let mut runs = Vec::new();
    for round in 0..a.rounds {
        // Who goes first alternates.
        let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for s in order {
            if s == 1 && a.vsw_only {
                continue;
            }
            let r = if s == 0 {
                let mut vsw = switches::Vsw::new(bin.clone(), "ring", a.pmd_cpu);
                let target = format!("unix:{}", vsw.mgmt().display());
                // A new bridge's NORMAL rule would forward the probe at once.
                let r = vsw
                    .start(&topo)
                    .and_then(|_| vsw_bench::topology::run(&["ovs-ofctl", "del-flows", &target]))
                    .and_then(|_| measure("vsw", &vsw.mgmt(), a.flows, &traffic));
                vsw.stop(&topo);
                r?
            } else {
                let mut ovs = switches::Ovs::new(false, a.pmd_cpu);
                let r = ovs
                    .start(&topo)
                    .and_then(|_| ovs.ofctl(&["del-flows", "br0"]))
                    .and_then(|_| measure("ovs-netdev", &ovs.mgmt(), a.flows, &traffic));
                ovs.stop(&topo);
                r?
            };
            eprintln!(
                "{}: adds {:.3} s, commit {:.3} s, first packet {:?} s",
                r.switch, r.add_seconds, r.commit_seconds, r.first_packet_seconds
            );
            runs.push(vsw_bench::bundle_commit::CommitRun {
                round: round + 1,
                ..r
            });
        }
    }
    drop(topo);
    print!("{}", report_markdown(&runs));
    Ok(())
}

fn flow_deletes(a: &FlowDeletesArgs) -> anyhow::Result<()> {
    use vsw_bench::flow_mods::{
        report_deletes_markdown, strict_delete_burst, write_source_port_rules,
        write_strict_deletes, DeleteRun,
    };
    require_root()?;
    if u32::from(a.dp_flows) < a.rules || 1024 + a.rules > 65_535 {
        bail!("--rules must be at most --dp-flows and leave source ports (1024 up)");
    }
    let modes: Vec<&str> = match a.modes.as_str() {
        "both" => vec!["burst", "ovs-ofctl"],
        m @ ("burst" | "ovs-ofctl") => vec![m],
        other => bail!("--modes is burst, ovs-ofctl or both, not {other}"),
    };
    let dir = std::env::temp_dir().join(format!("vsw-bench-deletes-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let (rules, deletes) = (dir.join("rules"), dir.join("deletes"));
    write_source_port_rules(&rules, a.rules)?;
    write_strict_deletes(&deletes, a.rules)?;
    let topo = Topology::create()?;
    let traffic = topo.traffic(
        frame_lens("64")?,
        a.dp_flows,
        Duration::from_secs_f64(f64::from(a.dp_flows) / a.rate + 1.0),
        a.gen_cpu,
    );
    let bin = bin_dir(&a.bin_dir)?;
    let rules_path = rules.to_str().context("path")?.to_string();
    let deletes_path = deletes.to_str().context("path")?.to_string();
    // Rules in, datapath flows made, then the deletes timed, then checked.
    let measure = |name: &str,
                   mode: &str,
                   mgmt: &std::path::Path,
                   ofctl: &dyn Fn(&[&str]) -> anyhow::Result<String>,
                   dp_flows: &dyn Fn() -> anyhow::Result<u64>| {
        ofctl(&["add-flows", &rules_path])?;
        run_trial(&traffic, a.rate)?;
        let cached = dp_flows()?;
        let seconds = match mode {
            "burst" => strict_delete_burst(mgmt, a.rules)?,
            _ => {
                let t = Instant::now();
                ofctl(&["add-flows", &deletes_path])?;
                t.elapsed().as_secs_f64()
            }
        };
        // Every source-port rule gone; the rest (the learning switch's rule of a
        // standalone bridge, the priority-1 rule) stays.
        let left = ofctl(&["dump-flows"])?;
        if let Some(rule) = left.lines().find(|l| l.contains("tp_src=")) {
            bail!("{name} still holds {rule} after the deletes");
        }
        let r = DeleteRun {
            switch: name.into(),
            mode: mode.into(),
            rules: a.rules,
            dp_flows: cached,
            seconds,
        };
        eprintln!(
            "{name} ({mode}): {} deletes beside {cached} datapath flows in {:.3} s",
            a.rules, seconds
        );
        anyhow::Ok(r)
    };
    let mut runs = Vec::new();
    for round in 0..a.rounds {
        for mode in &modes {
            let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
            for s in order {
                if s == 0 {
                    let mut vsw = switches::Vsw::new(bin.clone(), "ring", a.pmd_cpu);
                    vsw.start(&topo)?;
                    // The datapath flows stay while the deletes run.
                    vsw.ctl(&["set", "max-idle=600000"])?;
                    let target = format!("unix:{}", vsw.mgmt().display());
                    let r = measure(
                        "vsw",
                        mode,
                        &vsw.mgmt(),
                        &|args: &[&str]| {
                            let mut full = vec!["ovs-ofctl", "-O", "OpenFlow13", args[0], &target];
                            full.extend_from_slice(&args[1..]);
                            vsw_bench::topology::run(&full)
                        },
                        &|| {
                            let v: serde_json::Value = serde_json::from_str(&vsw.ctl(&[
                                "--format",
                                "json",
                                "dpif-show",
                            ])?)?;
                            Ok(v["flows"].as_u64().unwrap_or(0))
                        },
                    );
                    vsw.stop(&topo);
                    runs.push(r?);
                } else {
                    let mut ovs = switches::Ovs::new(false, a.pmd_cpu);
                    ovs.start(&topo)?;
                    ovs.vsctl(&["set", "Open_vSwitch", ".", "other_config:max-idle=600000"])?;
                    let r = measure(
                        "ovs-netdev",
                        mode,
                        &ovs.mgmt(),
                        &|args: &[&str]| {
                            let mut full = vec!["-O", "OpenFlow13", args[0], "br0"];
                            full.extend_from_slice(&args[1..]);
                            ovs.ofctl(&full)
                        },
                        &|| ovs.dp_flow_count(),
                    );
                    ovs.stop(&topo);
                    runs.push(r?);
                }
            }
        }
    }
    drop(topo);
    let _ = std::fs::remove_dir_all(&dir);
    print!("{}", report_deletes_markdown(&runs));
    Ok(())
}

fn ovsdb_framing(
    rows: &[usize],
    keys: usize,
    rounds: u32,
    linear_only: bool,
) -> anyhow::Result<()> {
    use vsw_bench::ovsdb_framing::{frame, monitor_reply, report_markdown, FramingRun};
    let framers: &[&'static str] = if linear_only {
        &["linear"]
    } else {
        &["linear", "reparsing"]
    };
    let mut runs = Vec::new();
    for &n in rows {
        let stream = monitor_reply(n, keys);
        for _ in 0..rounds {
            for &framer in framers {
                let seconds = frame(framer, &stream)?;
                eprintln!(
                    "{framer}: {n} rows, {} bytes in {seconds:.3} s",
                    stream.len()
                );
                runs.push(FramingRun {
                    framer,
                    rows: n,
                    keys,
                    bytes: stream.len(),
                    seconds,
                });
            }
        }
    }
    print!("{}", report_markdown(&runs));
    Ok(())
}

fn packet_ins(a: &PacketInsArgs) -> anyhow::Result<()> {
    use vsw_bench::packet_ins::{report_markdown, Counter, PacketInRun};
    require_root()?;
    let topo = Topology::create()?;
    let traffic = topo.traffic(
        frame_lens("64")?,
        64,
        Duration::from_secs_f64(a.seconds),
        a.gen_cpu,
    );
    let bin = bin_dir(&a.bin_dir)?;
    // Sends the stream with a table-miss rule to the controller and counts.
    let measure =
        |name: &str, mgmt: &std::path::Path, ofctl: &dyn Fn(&[&str]) -> anyhow::Result<String>| {
            ofctl(&["-O", "OpenFlow13", "del-flows"])?;
            ofctl(&[
                "-O",
                "OpenFlow13",
                "add-flow",
                "priority=0,actions=controller",
            ])?;
            let counter = Counter::connect(mgmt)?;
            std::thread::sleep(Duration::from_millis(300));
            let before = counter.packet_ins();
            let trial = run_trial(&traffic, a.rate)?;
            let got = counter.packet_ins() - before;
            let run = PacketInRun {
                switch: name.into(),
                offered_pps: trial.trial.sent_pps,
                packet_ins_per_s: got as f64 / a.seconds,
            };
            eprintln!(
                "{name}: {:.0} pps offered, {:.0} packet-ins/s",
                run.offered_pps, run.packet_ins_per_s
            );
            anyhow::Ok(run)
        };
    let mut runs = Vec::new();
    for round in 0..a.rounds {
        let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for s in order {
            if s == 0 {
                let mut vsw = switches::Vsw::new(bin.clone(), "ring", a.pmd_cpu);
                vsw.start(&topo)?;
                let target = format!("unix:{}", vsw.mgmt().display());
                let r = measure("vsw", &vsw.mgmt(), &|args: &[&str]| {
                    let mut full = vec!["ovs-ofctl"];
                    full.extend_from_slice(&args[..args.len().min(3)]);
                    full.push(&target);
                    full.extend_from_slice(args.get(3..).unwrap_or(&[]));
                    vsw_bench::topology::run(&full)
                });
                vsw.stop(&topo);
                runs.push(r?);
            } else {
                let mut ovs = switches::Ovs::new(false, a.pmd_cpu);
                ovs.start(&topo)?;
                let r = measure("ovs-netdev", &ovs.mgmt(), &|args: &[&str]| {
                    let mut full: Vec<&str> = args[..args.len().min(3)].to_vec();
                    full.push("br0");
                    full.extend_from_slice(args.get(3..).unwrap_or(&[]));
                    ovs.ofctl(&full)
                });
                ovs.stop(&topo);
                runs.push(r?);
            }
        }
    }
    drop(topo);
    print!("{}", report_markdown(&runs));
    Ok(())
}

/// Where vswd and vswctl are: the directory given, or this program's own.
fn bin_dir(given: &Option<PathBuf>) -> anyhow::Result<PathBuf> {
    match given {
        Some(d) => Ok(d.clone()),
        None => Ok(std::env::current_exe()?
            .parent()
            .context("no directory")?
            .to_path_buf()),
    }
}

/// The measurements build namespaces and open packet sockets.
fn require_root() -> anyhow::Result<()> {
    let uid = std::fs::metadata("/proc/self").map(|m| std::os::unix::fs::MetadataExt::uid(&m));
    if uid.unwrap_or(1) != 0 {
        bail!("vsw-bench needs root for this (network namespaces, AF_PACKET)");
    }
    Ok(())
}

fn batching(a: &BatchingArgs) -> anyhow::Result<()> {
    require_root()?;
    let bin_dir = bin_dir(&a.bin_dir)?;
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone())?;
    }
    let topo = Topology::create()?;
    let mut vsw = switches::Vsw::new(bin_dir, "ring", a.pmd_cpu);
    vsw.start(&topo)?;
    let result = sweep(a, &topo, &vsw, &stop);
    vsw.stop(&topo);
    drop(topo);
    let sweep = result?;
    std::fs::create_dir_all(&a.out)?;
    std::fs::write(
        a.out.join("batching.json"),
        serde_json::to_string_pretty(&sweep)?,
    )?;
    let mut md = String::from("| interval (µs) | rate (pps) | kicks/packet | packets/batch | PMD cycles/packet | latency p50 / p99 / max (µs) | loss |\n|---|---|---|---|---|---|---|\n");
    let opt = |v: Option<f64>, d: usize| v.map_or("-".to_string(), |v| format!("{v:.d$}"));
    for p in &sweep.points {
        md += &format!(
            "| {} | {:.0} | {} | {} | {} | {:.1} / {:.1} / {:.1} | {:.4} % |\n",
            p.interval_us,
            p.rate_pps,
            opt(p.kicks_per_packet, 3),
            opt(p.packets_per_batch, 1),
            opt(p.pmd_cycles_per_packet, 0),
            p.latency.p50_us,
            p.latency.p99_us,
            p.latency.max_us,
            p.loss * 100.0
        );
    }
    md += "\n| interval (µs) | zero-loss throughput (Mpps) |\n|---|---|\n";
    for (i, t) in &sweep.throughput_pps {
        md += &format!(
            "| {i} | {} |\n",
            t.map_or("-".into(), |t| format!("{:.3}", t / 1e6))
        );
    }
    std::fs::write(a.out.join("batching.md"), &md)?;
    let mut rates: Vec<f64> = Vec::new();
    for p in &sweep.points {
        if !rates.contains(&p.rate_pps) {
            rates.push(p.rate_pps);
        }
    }
    let series =
        |f: &dyn Fn(&BatchPoint) -> Option<f64>, dashed: bool, what: &str| -> Vec<plot::Line> {
            rates
                .iter()
                .enumerate()
                .map(|(i, r)| plot::Line {
                    name: format!("{:.0} kpps {what}", r / 1e3),
                    points: sweep
                        .points
                        .iter()
                        .filter(|p| p.rate_pps == *r)
                        .filter_map(|p| Some((f64::from(p.interval_us), f(p)?)))
                        .collect(),
                    dashed,
                    colour: i,
                })
                .collect()
        };
    let mut lat = series(&|p| Some(p.latency.p50_us), false, "p50");
    lat.extend(series(&|p| Some(p.latency.p99_us), true, "p99"));
    plot::lines(
        &a.out.join("batching-latency.svg"),
        "One-way latency vs tx-flush-interval (solid p50, dashed p99)",
        "tx-flush-interval (µs)",
        "latency (µs)",
        true,
        &lat,
    )?;
    plot::lines(
        &a.out.join("batching-cycles.svg"),
        "PMD cycles per packet vs tx-flush-interval",
        "tx-flush-interval (µs)",
        "TSC cycles per packet",
        false,
        &series(&|p| p.pmd_cycles_per_packet, false, ""),
    )?;
    println!("{md}");
    Ok(())
}

fn sweep(
    a: &BatchingArgs,
    topo: &Topology,
    vsw: &switches::Vsw,
    stop: &AtomicBool,
) -> anyhow::Result<BatchSweep> {
    let traffic = topo.traffic(
        frame_lens("64")?,
        1,
        Duration::from_secs_f64(a.trial_seconds),
        a.gen_cpu,
    );
    let _ = topo.exec(false, &["ping", "-c", "1", "-W", "2", "198.18.0.1"]);
    vsw.ctl(&["set", &format!("pmd-sleep-max={}", a.pmd_sleep_max)])?;
    let cfg = SearchConfig {
        min_pps: 1_000.0,
        max_pps: 3_000_000.0,
        loss_tolerance: 0.002 / 100.0,
        resolution: 0.005,
        max_trials: 20,
    };
    let started = Instant::now();
    let mut progress = Progress::new(Plan {
        switches: 1,
        rounds: a.intervals.len(),
        trials_per_search: if a.no_search {
            0
        } else {
            progress::expected_search_trials(&cfg)
        },
        trials_after: a.rates.len(),
        trial_seconds: a.trial_seconds,
        tcp_seconds: 0.0,
        switch_overhead_seconds: 0.5,
    });
    let search_at = |interval: u32, progress: &mut Progress| -> anyhow::Result<Option<f64>> {
        vsw.ctl(&["set", &format!("tx-flush-interval={interval}")])?;
        let mut runner = Runner {
            traffic: &traffic,
            stop,
            started,
            progress,
            trial: 0,
        };
        Ok(binary_search(&mut runner, &cfg)?.throughput_pps)
    };
    let mut throughput = Vec::new();
    let needs_edge = a.rates.iter().any(|r| r == "edge");
    let edge = if needs_edge || !a.no_search {
        eprintln!("== zero-loss throughput at interval 0");
        let t = search_at(0, &mut progress)?;
        throughput.push((0, t));
        t
    } else {
        None
    };
    let rates: Vec<f64> = a
        .rates
        .iter()
        .map(|r| match r.as_str() {
            "edge" => edge
                .map(|t| t * 0.9)
                .context("no zero-loss rate at interval 0 to take 90 % of"),
            n => n
                .parse::<f64>()
                .with_context(|| format!("--rates: '{n}' is not a rate or edge")),
        })
        .collect::<anyhow::Result<_>>()?;
    let port_stats = || -> anyhow::Result<(u64, u64)> {
        let v: serde_json::Value =
            serde_json::from_str(&vsw.ctl(&["--format", "json", "dump-ports"])?)?;
        let p = v
            .as_array()
            .and_then(|ports| ports.iter().find(|p| p["name"] == topo.rcv_port.as_str()))
            .context("the receiver's port")?;
        Ok((
            p["stats"]["tx_packets"].as_u64().unwrap_or(0),
            p["stats"]["tx_batches"].as_u64().unwrap_or(0),
        ))
    };
    let mut points = Vec::new();
    for &interval in &a.intervals {
        if stop.load(Ordering::Relaxed) {
            bail!("interrupted");
        }
        eprintln!("== tx-flush-interval={interval} us");
        if !a.no_search && interval != 0 {
            throughput.push((interval, search_at(interval, &mut progress)?));
        }
        vsw.ctl(&["set", &format!("tx-flush-interval={interval}")])?;
        for &rate in &rates {
            vsw.ctl(&["pmd-stats-clear"])?;
            let (p0, b0) = port_stats()?;
            let s = run_trial(&traffic, rate)?;
            progress.trial_done();
            let (p1, b1) = port_stats()?;
            let pmd: serde_json::Value =
                serde_json::from_str(&vsw.ctl(&["--format", "json", "pmd-stats-show"])?)?;
            let pmd = &pmd[0];
            let f = |k: &str| pmd[k].as_f64().unwrap_or(0.0);
            let l = s.latency.summary();
            let point = BatchPoint {
                interval_us: interval,
                rate_pps: rate,
                loss: s.trial.loss(),
                kicks_per_packet: (p1 > p0).then(|| (b1 - b0) as f64 / (p1 - p0) as f64),
                packets_per_batch: (f("tx_batches") > 0.0)
                    .then(|| f("tx_packets") / f("tx_batches")),
                pmd_cycles_per_packet: (f("packets") > 0.0)
                    .then(|| f("busy_cycles") / f("packets")),
                latency: l,
            };
            eprintln!(
                "  {rate:.0} pps: kicks/packet {}, packets/batch {}, cycles/packet {}, p50 {:.1} p99 {:.1} max {:.1} us, loss {:.4} %",
                point.kicks_per_packet.map_or("-".into(), |v| format!("{v:.3}")),
                point.packets_per_batch.map_or("-".into(), |v| format!("{v:.1}")),
                point.pmd_cycles_per_packet.map_or("-".into(), |v| format!("{v:.0}")),
                l.p50_us,
                l.p99_us,
                l.max_us,
                point.loss * 100.0
            );
            points.push(point);
        }
        progress.switch_round_done(0, false);
    }
    Ok(BatchSweep {
        date: topology_date(),
        command: std::env::args().collect::<Vec<_>>().join(" "),
        throughput_pps: throughput,
        points,
    })
}

/// Times `n` calls of `f`, in nanoseconds per call.
fn per_call(n: u32, mut f: impl FnMut() -> u64) -> f64 {
    let start = Instant::now();
    let mut acc = 0u64;
    for _ in 0..n {
        acc = acc.wrapping_add(f());
    }
    std::hint::black_box(acc);
    start.elapsed().as_nanos() as f64 / f64::from(n)
}

fn clocks() {
    const N: u32 = 20_000_000;
    let epoch = Instant::now();
    for round in 1..=3 {
        let tsc = per_call(N, vsw_datapath::clock::cycles);
        let mono = per_call(N, || epoch.elapsed().as_nanos() as u64);
        println!("round {round}: TSC (rdtsc) {tsc:.1} ns per read, CLOCK_MONOTONIC (Instant) {mono:.1} ns per read");
    }
}

fn gro_cost() {
    use vsw_packet::builder::{self, Ipv4, DST_MAC, SRC_MAC};
    use vsw_packet::gro::{Gro, Offer};
    use vsw_packet::vnet::{VnetHdr, VNET_F_DATA_VALID};
    const MSS: usize = 1448;
    const SEGMENTS: usize = 44;
    const ROUNDS: u32 = 20_000;
    let data: Vec<u8> = (0..MSS * SEGMENTS).map(|i| (i * 7) as u8).collect();
    let ip = Ipv4 {
        proto: vsw_packet::key::IPPROTO_TCP,
        ..Ipv4::default()
    };
    let frame = builder::ethernet(
        DST_MAC,
        SRC_MAC,
        &[],
        vsw_packet::EtherType::IPV4,
        &builder::ipv4(&ip, &builder::tcp(40000, 5201, 0x10, &data)),
    );
    let mut buf = vec![0u8; 70_000];
    let mut segs = Vec::new();
    vsw_packet::gso::segment_tcp(&frame, MSS, &mut buf, |s| segs.push(s.to_vec()))
        .expect("segments");
    let mut gro = Gro::new();
    let mut merge = |vnet: VnetHdr| {
        let start = Instant::now();
        for _ in 0..ROUNDS {
            for s in &segs {
                let offer = gro.offer(s, &vnet);
                debug_assert_eq!(offer, Offer::Taken);
                std::hint::black_box(offer);
            }
            std::hint::black_box(gro.take());
        }
        start.elapsed().as_nanos() as f64 / (f64::from(ROUNDS) * segs.len() as f64)
    };
    let trusted = VnetHdr {
        flags: VNET_F_DATA_VALID,
        ..VnetHdr::default()
    };
    for round in 1..=3 {
        let valid = merge(trusted);
        let checked = merge(VnetHdr::default());
        let payload = &segs[1][54..];
        let sum = per_call(2_000_000, || {
            vsw_packet::checksum::sum(std::hint::black_box(payload), 0)
        });
        println!(
            "round {round}: GRO per {MSS}-byte segment: {valid:.1} ns trusted (DATA_VALID), {checked:.1} ns checked here (+{:.1} ns); Internet checksum of {} bytes {sum:.1} ns",
            checked - valid,
            payload.len()
        );
    }
}

#[derive(clap::Args, Clone)]
struct DatapathArgs {
    /// Seconds per scenario (after half a second of warm-up).
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// CPU for the PMD (pinned).
    #[arg(long, default_value_t = 1)]
    pmd_cpu: usize,
    /// Frame size on the wire.
    #[arg(long, default_value_t = 64)]
    frame_size: usize,
    /// Which scenarios (1-based, comma-separated); all by default.
    #[arg(long, value_delimiter = ',')]
    scenarios: Vec<usize>,
    /// The patch scenarios instead: cache hits, megaflows and upcalls on one
    /// bridge, each beside the same across a patch pair to a second bridge.
    #[arg(long)]
    patch: bool,
    /// The select-group scenarios instead: 10,000 connections through a select
    /// group decided in translation, beside decided by the datapath's hash.
    #[arg(long, conflicts_with = "patch")]
    select: bool,
    /// The register scenarios instead: cache hits and upcalls through two tables,
    /// beside the same with all 16 registers loaded in the first and matched in the
    /// second.
    #[arg(long, conflicts_with_all = ["patch", "select"])]
    registers: bool,
    /// The conjunction scenarios instead: one policy over 100 sources × 100 ports
    /// as a conjunction and as the cross product, on cache hits and on misses.
    #[arg(long, conflicts_with_all = ["patch", "select", "registers"])]
    conjunction: bool,
    /// The learn scenarios instead: every packet a new flow, beside the same with
    /// each learning a rule of its own (learned rules per second).
    #[arg(long, conflicts_with_all = ["patch", "select", "registers", "conjunction"])]
    learn: bool,
    /// The connection tracking scenarios instead: cache hits and misses through two
    /// tables, beside the same through ct(commit,table=1) between them.
    #[arg(long, conflicts_with_all = ["patch", "select", "registers", "conjunction", "learn"])]
    conntrack: bool,
    /// Directory for datapath.json and datapath.md.
    #[arg(long, default_value = "bench-results")]
    out: PathBuf,
}

fn datapath(a: &DatapathArgs) -> anyhow::Result<()> {
    if !(64..=1518).contains(&a.frame_size) {
        bail!("--frame-size {} is outside 64..1518", a.frame_size);
    }
    let all = if a.patch {
        vsw_bench::inmemory::patch_scenarios()
    } else if a.select {
        vsw_bench::inmemory::select_scenarios()
    } else if a.registers {
        vsw_bench::inmemory::register_scenarios()
    } else if a.conjunction {
        vsw_bench::inmemory::conjunction_scenarios()
    } else if a.learn {
        vsw_bench::inmemory::learn_scenarios()
    } else if a.conntrack {
        vsw_bench::inmemory::conntrack_scenarios()
    } else {
        vsw_bench::inmemory::standard_scenarios()
    };
    let chosen: Vec<_> = if a.scenarios.is_empty() {
        all
    } else {
        a.scenarios
            .iter()
            .map(|i| {
                all.get(i.wrapping_sub(1))
                    .cloned()
                    .with_context(|| format!("no scenario {i}; there are {} (1-based)", all.len()))
            })
            .collect::<anyhow::Result<_>>()?
    };
    let mut figures = Vec::new();
    let mut md = String::from("| scenario | Mpps | cycles/packet | ns/packet | EMC hits | subtables probed per megaflow hit (rule subtables) | upcalls/s (share of packets) | megaflows | packets per output batch | longest PMD iteration / reconfiguration |\n|---|---|---|---|---|---|---|---|---|---|\n");
    for s in &chosen {
        eprintln!("== {} ({} s)", s.name, a.seconds);
        let f = vsw_bench::inmemory::measure(s, a.frame_size, a.seconds, a.pmd_cpu, true)?;
        let opt = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.2}"));
        let line = format!(
            "| {} | {:.2} | {:.1} | {:.1} | {:.1} % | {} ({} subtables) | {:.0} ({:.1} %) | {} | {} | {:.0} / {:.1} us |",
            s.name,
            f.mpps,
            f.cycles_per_packet,
            f.ns_per_packet,
            f.emc_hit_percent,
            opt(f.avg_subtable_lookups),
            f.subtables,
            f.upcalls_per_second,
            f.upcall_percent,
            f.megaflows,
            opt(f.avg_packets_per_batch),
            f.max_iteration_us,
            f.max_reconfigure_us
        );
        eprintln!("{line}");
        md += &line;
        md.push('\n');
        if f.rules_learned_per_second > 0.0 {
            let learned = format!(
                "| ↳ rules learned per second | {:.0} |\n",
                f.rules_learned_per_second
            );
            eprint!("{learned}");
            md += &learned;
        }
        figures.push(f);
    }
    std::fs::create_dir_all(&a.out)?;
    std::fs::write(
        a.out.join("datapath.json"),
        serde_json::to_string_pretty(&figures)?,
    )?;
    std::fs::write(a.out.join("datapath.md"), &md)?;
    println!("{md}");
    Ok(())
}

#[derive(clap::Args, Clone)]
struct CpuArgs {
    /// Offered rate, packets per second.
    #[arg(long, default_value_t = 100_000.0)]
    rate: f64,
    #[command(flatten)]
    options: Options,
}

#[derive(clap::Args, Clone)]
struct Options {
    /// Switches, in the order they run: vsw, vsw-mmsg, vsw-ring-v3, bridge.
    #[arg(long, default_value = "vsw,bridge", value_delimiter = ',')]
    switches: Vec<String>,
    /// Frame size on the wire (64..1518) or "imix".
    #[arg(long, default_value = "64")]
    frame_size: String,
    /// Distinct UDP flows.
    #[arg(long, default_value_t = 1)]
    flows: u16,
    /// Seconds per trial.
    #[arg(long, default_value_t = 2.0)]
    trial_seconds: f64,
    /// Acceptable loss in percent (RFC 2544 style search).
    #[arg(long, default_value_t = 0.002)]
    loss_tolerance: f64,
    /// Highest rate tried, packets per second.
    #[arg(long, default_value_t = 3_000_000.0)]
    max_rate: f64,
    /// Throughput searches per switch, in rounds that interleave the switches; the report
    /// gives the median and the spread.
    #[arg(long, default_value_t = 1)]
    repeats: usize,
    /// Most trials in the throughput search (the validation trial comes on top).
    #[arg(long, default_value_t = 20)]
    max_trials: usize,
    /// Loads for the latency measurement, percent of the measured throughput.
    #[arg(long, default_value = "10,50,90", value_delimiter = ',')]
    latency_loads: Vec<f64>,
    /// CPU for the generator and receiver.
    #[arg(long, default_value_t = 0)]
    gen_cpu: usize,
    /// CPU for vsw's PMD.
    #[arg(long, default_value_t = 1)]
    pmd_cpu: usize,
    /// Where vswd and vswctl are (default: beside this program).
    #[arg(long)]
    bin_dir: Option<PathBuf>,
    /// Seconds of iperf3 TCP per switch (0: skip).
    #[arg(long, default_value_t = 5)]
    iperf_seconds: u32,
    /// Let iperf3 run on any CPU instead of the generator's (then it competes with a
    /// PMD for its core, and the scheduler's choice shows in the result).
    #[arg(long)]
    iperf_unpinned: bool,
    /// Run the throughput search (off for `cpu` and `tcp`).
    #[arg(skip = true)]
    search: bool,
    /// Measure CPU per packet at this rate instead of at 50 % load (`cpu`).
    #[arg(skip)]
    cpu_rate: Option<f64>,
    /// Run TCP in every round (`tcp`: --repeats then repeats it).
    #[arg(skip)]
    tcp_every_round: bool,
    /// Directory for results.json and results.md.
    #[arg(long, default_value = "bench-results")]
    out: PathBuf,
}

#[derive(Serialize)]
struct LatencyAt {
    load_percent: f64,
    rate_pps: f64,
    loss: f64,
    latency: LatencySummary,
}

#[derive(Serialize)]
struct SwitchResult {
    switch: String,
    /// The median of the repeated searches (by throughput; none passing counts lowest).
    throughput: SearchResult,
    /// Every search's result, in order: min, median and max show the run-to-run noise.
    throughput_runs: Vec<Option<f64>>,
    latency: Vec<LatencyAt>,
    /// CPU time of the switch's process per forwarded packet at 50 % load, where it has one.
    cpu_ns_per_packet: Option<f64>,
    /// Busy CPU time of the whole machine (every core, /proc/stat) per packet: where
    /// the kernel does the forwarding (offloaded flows), the switch process shows none
    /// of it.
    #[serde(default)]
    system_ns_per_packet: Option<f64>,
    /// The switch's own PMD processing time per packet at 50 % load (pmd-stats-show).
    pmd_ns_per_packet: Option<f64>,
    /// iperf3 with the hosts' veth offloads as Linux sets them (TSO, checksum offload on).
    iperf_gbps: Option<f64>,
    /// iperf3 with TSO, GSO and checksum offload turned off on both hosts.
    iperf_gbps_offloads_off: Option<f64>,
    /// CPU seconds of the switch's process per gigabit moved, offloads on.
    iperf_cpu_s_per_gbit: Option<f64>,
    /// Of those, the seconds its PMDs were busy (the rest is polling for nothing).
    iperf_pmd_busy_s_per_gbit: Option<f64>,
    /// Every TCP run (offloads on, off), in order; the figures above are medians.
    iperf_runs: Vec<(Option<f64>, Option<f64>)>,
}

/// One round's TCP figures for one switch.
#[derive(Clone, Copy, Default)]
struct TcpRun {
    on: Option<f64>,
    off: Option<f64>,
    cpu: Option<f64>,
    pmd: Option<f64>,
}

#[derive(Serialize)]
struct Report {
    date: String,
    command: String,
    frame_size: String,
    flows: u16,
    trial_seconds: f64,
    loss_tolerance_percent: f64,
    results: Vec<SwitchResult>,
}

struct Runner<'a> {
    traffic: &'a Traffic,
    stop: &'a AtomicBool,
    started: Instant,
    progress: &'a mut Progress,
    /// Trials of this search so far.
    trial: usize,
}

impl Runner<'_> {
    /// "[ 12 s, about 3 min 05 s left]".
    fn clock(&self) -> String {
        let elapsed = self.started.elapsed();
        match self.progress.remaining(elapsed) {
            Some(left) => format!(
                "[{}, about {} left]",
                progress::human(elapsed),
                progress::human(left)
            ),
            None => format!("[{}]", progress::human(elapsed)),
        }
    }

    /// A trial outside the search (latency, CPU), counted in the progress.
    fn measure_at(&mut self, rate: f64) -> anyhow::Result<vsw_bench::traffic::TrialStats> {
        if self.stop.load(Ordering::Relaxed) {
            bail!("interrupted");
        }
        let s = run_trial(self.traffic, rate)?;
        self.progress.trial_done();
        Ok(s)
    }
}

impl TrialRunner for Runner<'_> {
    type Error = anyhow::Error;
    fn run(&mut self, rate: f64) -> anyhow::Result<Trial> {
        if self.stop.load(Ordering::Relaxed) {
            bail!("interrupted");
        }
        let s = run_trial(self.traffic, rate)?;
        self.progress.trial_done();
        self.trial += 1;
        eprintln!(
            "    trial {:>2}: {:>8.0} pps asked, {:>8.0} sent, loss {:.4} %  {}",
            self.trial,
            rate,
            s.trial.sent_pps,
            s.trial.loss() * 100.0,
            self.clock()
        );
        Ok(s.trial)
    }
}

fn frame_lens(size: &str) -> anyhow::Result<Vec<usize>> {
    if size == "imix" {
        return Ok(frame::IMIX
            .iter()
            .filter_map(|w| frame::frame_len_for_wire_size(*w))
            .collect());
    }
    let wire: usize = size
        .parse()
        .with_context(|| format!("--frame-size '{size}' is not a number or imix"))?;
    let len = frame::frame_len_for_wire_size(wire)
        .with_context(|| format!("--frame-size {wire} is outside 64..1518"))?;
    Ok(vec![len])
}

/// Turns the hosts' TSO, GSO and checksum offloads on or off.
fn set_offloads(topo: &Topology, on: bool) -> anyhow::Result<()> {
    let v = if on { "on" } else { "off" };
    for gen in [true, false] {
        topo.exec(gen, &["ethtool", "-K", "eth0", "tso", v, "gso", v, "tx", v])?;
    }
    Ok(())
}

/// iperf3 between the hosts; with `cpu`, both ends run on that CPU (the hosts' core,
/// as the generator does), so that they never compete with a switch's PMD core.
fn iperf(topo: &Topology, seconds: u32, cpu: Option<usize>) -> anyhow::Result<f64> {
    let cpu_arg = cpu.map(|c| c.to_string());
    let pin: Vec<&str> = match &cpu_arg {
        Some(c) => vec!["taskset", "-c", c],
        None => Vec::new(),
    };
    let pidfile = std::env::temp_dir().join(format!("vsw-bench-iperf3-{}.pid", std::process::id()));
    let pid_arg = pidfile.display().to_string();
    let server_cmd = [
        "iperf3",
        "-s",
        "-1",
        "-D",
        "-B",
        "198.18.0.2",
        "--logfile",
        "/dev/null",
        "-I",
        &pid_arg,
    ];
    let server: Vec<&str> = pin.iter().copied().chain(server_cmd).collect();
    topo.exec(false, &server)?;
    std::thread::sleep(Duration::from_millis(300));
    // A switch that breaks TCP must not hang the run: connect and total time are bounded.
    let (limit, secs) = ((seconds + 15).to_string(), seconds.to_string());
    let client_cmd = [
        "timeout",
        &limit,
        "iperf3",
        "-c",
        "198.18.0.2",
        "-t",
        &secs,
        "-J",
        "--connect-timeout",
        "3000",
    ];
    let client: Vec<&str> = pin.iter().copied().chain(client_cmd).collect();
    let result = topo.exec(true, &client);
    // The one-shot server is still waiting when no client got through: end it.
    if let Ok(pid) = std::fs::read_to_string(&pidfile) {
        let _ =
            vsw_bench::topology::run(&["kill", "-TERM", pid.trim_matches(char::from(0)).trim()]);
    }
    let _ = std::fs::remove_file(&pidfile);
    let v: serde_json::Value = serde_json::from_str(&result?).context("iperf3 JSON")?;
    Ok(v["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .unwrap_or(0.0)
        / 1e9)
}

/// A guess at the seconds a switch takes to start, learn and stop; the progress
/// estimate corrects itself from the real pace.
const SWITCH_OVERHEAD_SECONDS: f64 = 3.0;

fn search_config(o: &Options) -> SearchConfig {
    SearchConfig {
        min_pps: 1_000.0,
        max_pps: o.max_rate,
        loss_tolerance: o.loss_tolerance / 100.0,
        resolution: 0.005,
        max_trials: o.max_trials,
    }
}

/// One round for one switch: a throughput search, added to `searches`; in the last
/// round also latency, CPU and TCP, which give the switch's result.
#[allow(clippy::too_many_arguments)]
fn measure(
    sw: &mut dyn SwitchUnderTest,
    topo: &Topology,
    o: &Options,
    traffic: &Traffic,
    stop: &AtomicBool,
    started: Instant,
    progress: &mut Progress,
    searches: &mut Vec<SearchResult>,
    tcp_runs: &mut Vec<TcpRun>,
    last: bool,
) -> anyhow::Result<Option<SwitchResult>> {
    // One frame each way first, so that every switch has learned both hosts.
    let _ = topo.exec(false, &["ping", "-c", "1", "-W", "2", "198.18.0.1"]);
    let cfg = search_config(o);
    eprintln!(
        "  throughput ({} trials of {} s at most)",
        cfg.max_trials, o.trial_seconds
    );
    let trials_before = progress.trials();
    let mut runner = Runner {
        traffic,
        stop,
        started,
        progress,
        trial: 0,
    };
    if o.repeats > 1 {
        eprintln!("  search {} of {}", searches.len() + 1, o.repeats);
    }
    searches.push(if o.search {
        let r = binary_search(&mut runner, &cfg)?;
        let how = match (r.throughput_pps, r.generator_limited) {
            (Some(p), false) => format!("{:.3} Mpps", p / 1e6),
            (Some(p), true) => format!("at least {:.3} Mpps (generator-limited)", p / 1e6),
            (None, _) => "no rate passed".into(),
        };
        eprintln!("  throughput: {how} after {} trials", r.trials.len());
        r
    } else {
        SearchResult {
            throughput_pps: None,
            trials: Vec::new(),
            generator_limited: false,
        }
    });
    // Gbit/s, and CPU and PMD busy seconds per gigabit moved.
    let tcp = |offloads: bool| -> (Option<f64>, Option<f64>, Option<f64>) {
        if o.iperf_seconds == 0 {
            return (None, None, None);
        }
        sw.clear_pmd_stats();
        let cpu0 = sw.cpu_seconds();
        let cpu = (!o.iperf_unpinned).then_some(o.gen_cpu);
        let r = set_offloads(topo, offloads).and_then(|()| iperf(topo, o.iperf_seconds, cpu));
        let (cpu1, busy) = (sw.cpu_seconds(), sw.pmd_busy_seconds());
        let _ = set_offloads(topo, true);
        match r {
            Ok(g) => {
                let gbits = g * f64::from(o.iperf_seconds);
                let per = |s: Option<f64>| s.filter(|_| gbits > 0.0).map(|s| s / gbits);
                let cpu = per(cpu0.zip(cpu1).map(|(a, b)| b - a));
                let pmd = per(busy);
                eprintln!(
                    "  iperf3 TCP, offloads {}: {g:.2} Gbit/s, CPU {} s/Gbit (PMD busy {} s/Gbit)",
                    if offloads { "on" } else { "off" },
                    cpu.map_or("-".into(), |c| format!("{c:.3}")),
                    pmd.map_or("-".into(), |c| format!("{c:.3}")),
                );
                (Some(g), cpu, pmd)
            }
            Err(e) => {
                eprintln!("  iperf3 skipped: {e:#}");
                (None, None, None)
            }
        }
    };
    // TCP in every round when it is what the run measures, so that its spread shows.
    if o.tcp_every_round || last {
        let (on, cpu, pmd) = tcp(true);
        let (off, _, _) = tcp(false);
        tcp_runs.push(TcpRun { on, off, cpu, pmd });
    }
    if !last {
        let run = runner.progress.trials() - trials_before;
        runner.progress.switch_round_done(run, false);
        return Ok(None);
    }
    eprintln!("  latency, CPU and TCP {}", runner.clock());
    let mut searches = std::mem::take(searches);
    let throughput_runs: Vec<Option<f64>> = searches.iter().map(|r| r.throughput_pps).collect();
    searches.sort_by(|a, b| {
        a.throughput_pps
            .unwrap_or(0.0)
            .total_cmp(&b.throughput_pps.unwrap_or(0.0))
    });
    let throughput = searches.swap_remove(searches.len() / 2);
    let base = throughput.throughput_pps.unwrap_or(0.0);
    let mut latency = Vec::new();
    let mut cpu_ns_per_packet = None;
    let mut pmd_ns_per_packet = None;
    for load in &o.latency_loads {
        let rate = base * load / 100.0;
        if rate < 1.0 {
            continue;
        }
        let half = (*load - 50.0).abs() < 1e-9;
        if half {
            sw.clear_pmd_stats();
        }
        let cpu0 = sw.cpu_seconds();
        let s = runner.measure_at(rate)?;
        if half {
            pmd_ns_per_packet = sw.pmd_ns_per_packet();
            if let (Some(a), Some(b)) = (cpu0, sw.cpu_seconds()) {
                cpu_ns_per_packet = Some((b - a) * 1e9 / s.trial.received.max(1) as f64);
            }
        }
        let l = s.latency.summary();
        eprintln!(
            "  latency at {load} % ({rate:.0} pps): min {:.1} avg {:.1} p50 {:.1} p99 {:.1} p99.9 {:.1} max {:.1} us",
            l.min_us, l.avg_us, l.p50_us, l.p99_us, l.p999_us, l.max_us
        );
        latency.push(LatencyAt {
            load_percent: *load,
            rate_pps: rate,
            loss: s.trial.loss(),
            latency: l,
        });
    }
    let mut system_ns_per_packet = None;
    if let Some(rate) = o.cpu_rate {
        sw.clear_pmd_stats();
        let cpu0 = sw.cpu_seconds();
        let busy0 = system_busy_seconds();
        let s = runner.measure_at(rate)?;
        pmd_ns_per_packet = sw.pmd_ns_per_packet();
        if let (Some(a), Some(b)) = (cpu0, sw.cpu_seconds()) {
            cpu_ns_per_packet = Some((b - a) * 1e9 / s.trial.received.max(1) as f64);
        }
        if let (Some(a), Some(b)) = (busy0, system_busy_seconds()) {
            system_ns_per_packet = Some((b - a) * 1e9 / s.trial.received.max(1) as f64);
        }
        eprintln!(
            "  CPU at {rate:.0} pps: switch process {:.0} ns, PMD busy {:.0} ns, whole machine {:.0} ns per packet (loss {:.4} %)",
            cpu_ns_per_packet.unwrap_or(f64::NAN),
            pmd_ns_per_packet.unwrap_or(f64::NAN),
            system_ns_per_packet.unwrap_or(f64::NAN),
            s.trial.loss() * 100.0
        );
    }
    let iperf_runs: Vec<(Option<f64>, Option<f64>)> =
        tcp_runs.iter().map(|r| (r.on, r.off)).collect();
    let mut sorted = std::mem::take(tcp_runs);
    sorted.sort_by(|a, b| a.on.unwrap_or(0.0).total_cmp(&b.on.unwrap_or(0.0)));
    let median = sorted.get(sorted.len() / 2).copied().unwrap_or_default();
    let (iperf_gbps, iperf_cpu_s_per_gbit, iperf_pmd_busy_s_per_gbit) =
        (median.on, median.cpu, median.pmd);
    let mut offs: Vec<f64> = sorted.iter().filter_map(|r| r.off).collect();
    offs.sort_by(f64::total_cmp);
    let iperf_gbps_offloads_off = offs.get(offs.len() / 2).copied();
    let run = runner.progress.trials() - trials_before;
    runner.progress.switch_round_done(run, true);
    Ok(Some(SwitchResult {
        switch: sw.name(),
        throughput,
        throughput_runs,
        latency,
        cpu_ns_per_packet,
        pmd_ns_per_packet,
        system_ns_per_packet,
        iperf_gbps,
        iperf_gbps_offloads_off,
        iperf_cpu_s_per_gbit,
        iperf_pmd_busy_s_per_gbit,
        iperf_runs,
    }))
}

/// The lowest and highest throughput of repeated searches (a search where nothing
/// passed counts as 0); `None` for a single search.
fn spread(runs: &[Option<f64>]) -> Option<(f64, f64)> {
    if runs.len() < 2 || runs.iter().all(Option::is_none) {
        return None;
    }
    let v = runs.iter().map(|r| r.unwrap_or(0.0));
    Some((
        v.clone().fold(f64::INFINITY, f64::min),
        v.fold(0.0, f64::max),
    ))
}

fn markdown(r: &Report) -> String {
    let mut s = format!(
        "| switch | throughput ({} B, {} flow(s), loss <= {} %) | latency at 50 %: avg / p99 / p99.9 (us) | CPU per packet | iperf3 TCP, offloads on / off | CPU s per Gbit, offloads on (PMD busy) |\n|---|---|---|---|---|---|\n",
        r.frame_size, r.flows, r.loss_tolerance_percent
    );
    for x in &r.results {
        let tput = match x.throughput.throughput_pps {
            Some(p) if x.throughput.generator_limited => {
                format!("≥ {:.3} Mpps (generator-limited)", p / 1e6)
            }
            Some(p) => format!("{:.3} Mpps", p / 1e6),
            None if x.throughput.trials.is_empty() => "-".into(),
            None => "none passed".into(),
        };
        let tput = match spread(&x.throughput_runs) {
            Some((lo, hi)) => format!(
                "{tput} (min {:.3}, max {:.3} of {})",
                lo / 1e6,
                hi / 1e6,
                x.throughput_runs.len()
            ),
            None => tput,
        };
        let lat = x
            .latency
            .iter()
            .find(|l| (l.load_percent - 50.0).abs() < 1e-9)
            .map_or("-".into(), |l| {
                format!(
                    "{:.1} / {:.1} / {:.1}",
                    l.latency.avg_us, l.latency.p99_us, l.latency.p999_us
                )
            });
        let cpu = match (x.cpu_ns_per_packet, x.pmd_ns_per_packet) {
            (Some(c), Some(p)) => format!("{c:.0} ns (PMD busy: {p:.0} ns)"),
            (Some(c), None) => format!("{c:.0} ns"),
            _ => "-".into(),
        };
        let gbps = |g: Option<f64>| g.map_or("-".into(), |g| format!("{g:.2}"));
        let mut tcp = format!(
            "{} / {} Gbit/s",
            gbps(x.iperf_gbps),
            gbps(x.iperf_gbps_offloads_off)
        );
        if x.iperf_runs.len() > 1 {
            let on: Vec<f64> = x.iperf_runs.iter().map(|r| r.0.unwrap_or(0.0)).collect();
            let off: Vec<f64> = x.iperf_runs.iter().map(|r| r.1.unwrap_or(0.0)).collect();
            let range = |v: &[f64]| {
                let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
                let hi = v.iter().copied().fold(0.0, f64::max);
                format!("{lo:.2}–{hi:.2}")
            };
            tcp += &format!(
                " (medians of {}; on {}, off {})",
                on.len(),
                range(&on),
                range(&off)
            );
        }
        let per_gbit = match (x.iperf_cpu_s_per_gbit, x.iperf_pmd_busy_s_per_gbit) {
            (Some(c), Some(p)) => format!("{c:.3} ({p:.3})"),
            (Some(c), None) => format!("{c:.3}"),
            _ => "-".into(),
        };
        s += &format!(
            "| {} | {tput} | {lat} | {cpu} | {tcp} | {per_gbit} |\n",
            x.switch
        );
    }
    s
}

fn main() -> anyhow::Result<()> {
    vsw_docgen::write_if_asked(<Cli as clap::CommandFactory>::command, "1");
    let cli = Cli::parse();
    let o = match cli.command {
        Cmd::Datapath(a) => return datapath(&a),
        Cmd::Clocks => {
            clocks();
            return Ok(());
        }
        Cmd::Gro => {
            gro_cost();
            return Ok(());
        }
        Cmd::Tunnel {
            rounds,
            datapath,
            seconds,
            core,
        } => {
            if datapath {
                return vsw_bench::tunnel_datapath::run(rounds, seconds, core);
            }
            vsw_bench::tunnel_cost::run(rounds);
            return Ok(());
        }
        Cmd::Batching(a) => return batching(&a),
        Cmd::Vhost(a) => return vhost(&a),
        Cmd::FlowMods(a) => return flow_mods(&a),
        Cmd::FlowDeletes(a) => return flow_deletes(&a),
        Cmd::BundleCommit(a) => return bundle_commit(&a),
        Cmd::Conformance(a) => return conformance(&a),
        Cmd::OvsdbPorts(a) => return ovsdb_ports(&a),
        Cmd::PacketIns(a) => return packet_ins(&a),
        Cmd::OvsdbFraming {
            rows,
            keys,
            rounds,
            linear_only,
        } => return ovsdb_framing(&rows, keys, rounds, linear_only),
        Cmd::ConntrackScale {
            connections,
            zone,
            rounds,
            one,
        } => {
            anyhow::ensure!(zone < connections, "--zone must be under --connections");
            if !one {
                println!(
                    "connections | commits/s | bytes/conn | lookup ns (1 thread) | lookups/s 1 thread | 2 threads | flush of {zone} ms | worst lookup during flush us (idle) | sweep ms | worst lookup during sweep us"
                );
                for _ in 0..rounds {
                    let status = std::process::Command::new(std::env::current_exe()?)
                        .args(["conntrack-scale", "--one"])
                        .arg(format!("--connections={connections}"))
                        .arg(format!("--zone={zone}"))
                        .status()?;
                    anyhow::ensure!(status.success(), "a round failed");
                }
                return Ok(());
            }
            {
                let r = vsw_bench::conntrack_scale::run(connections, zone);
                println!(
                    "{} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.2} | {:.0} ({:.0}) | {:.1} | {:.0}",
                    r.connections,
                    r.commits_per_sec,
                    r.bytes_per_connection,
                    r.lookup_ns_one_thread,
                    r.lookups_per_sec_one_thread,
                    r.lookups_per_sec_two_threads,
                    r.flush_ms,
                    r.worst_lookup_during_flush_us,
                    r.worst_lookup_idle_us,
                    r.sweep_ms,
                    r.worst_lookup_during_sweep_us
                );
            }
            return Ok(());
        }
        Cmd::Compare(o) => o,
        Cmd::Throughput(o) => Options {
            latency_loads: Vec::new(),
            iperf_seconds: 0,
            ..o
        },
        Cmd::Latency(o) => Options {
            iperf_seconds: 0,
            ..o
        },
        Cmd::Cpu(c) => Options {
            search: false,
            latency_loads: Vec::new(),
            iperf_seconds: 0,
            cpu_rate: Some(c.rate),
            ..c.options
        },
        Cmd::Tcp(o) => Options {
            search: false,
            latency_loads: Vec::new(),
            tcp_every_round: true,
            ..o
        },
    };
    require_root()?;
    let lens = frame_lens(&o.frame_size)?;
    let bin_dir = bin_dir(&o.bin_dir)?;
    // Every switch is checked before anything is built.
    let mut sws = Vec::new();
    for name in &o.switches {
        sws.push(switches::by_name(name, &bin_dir, o.pmd_cpu)?);
    }
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone())?;
    }
    let started = Instant::now();
    let topo = Topology::create()?;
    let traffic = topo.traffic(
        lens,
        o.flows,
        Duration::from_secs_f64(o.trial_seconds),
        o.gen_cpu,
    );
    let mut results = Vec::new();
    let search_cfg = search_config(&o);
    let mut progress = Progress::new(Plan {
        switches: sws.len(),
        rounds: o.repeats.max(1),
        trials_per_search: if o.search {
            progress::expected_search_trials(&search_cfg)
        } else {
            0
        },
        trials_after: o.latency_loads.len() + usize::from(o.cpu_rate.is_some()),
        trial_seconds: o.trial_seconds,
        // Two iperf3 runs (offloads on and off), each with its server start.
        tcp_seconds: 2.0
            * (f64::from(o.iperf_seconds) + 1.0)
            * f64::from(u8::from(o.iperf_seconds > 0)),
        switch_overhead_seconds: SWITCH_OVERHEAD_SECONDS,
    });
    // Rounds interleave the switches (a, b, a, b, ...), so that a slow drift of the
    // machine spreads over all of them instead of favouring the first.
    let rounds = o.repeats.max(1);
    let mut searches: Vec<Vec<SearchResult>> = sws.iter().map(|_| Vec::new()).collect();
    let mut tcp_runs: Vec<Vec<TcpRun>> = sws.iter().map(|_| Vec::new()).collect();
    for round in 0..rounds {
        for ((sw, searches), tcp_runs) in sws
            .iter_mut()
            .zip(searches.iter_mut())
            .zip(tcp_runs.iter_mut())
        {
            eprintln!(
                "== {} (round {} of {rounds}) [{:.0} s]",
                sw.name(),
                round + 1,
                started.elapsed().as_secs_f64()
            );
            if let Err(e) = sw.start(&topo) {
                sw.stop(&topo);
                return Err(e.context(format!("cannot start {}", sw.name())));
            }
            let r = measure(
                sw.as_mut(),
                &topo,
                &o,
                &traffic,
                &stop,
                started,
                &mut progress,
                searches,
                tcp_runs,
                round + 1 == rounds,
            );
            sw.stop(&topo);
            if let Some(r) = r? {
                results.push(r);
            }
        }
    }
    drop(topo);
    let report = Report {
        date: topology_date(),
        command: std::env::args().collect::<Vec<_>>().join(" "),
        frame_size: o.frame_size.clone(),
        flows: o.flows,
        trial_seconds: o.trial_seconds,
        loss_tolerance_percent: o.loss_tolerance,
        results,
    };
    std::fs::create_dir_all(&o.out)?;
    std::fs::write(
        o.out.join("results.json"),
        serde_json::to_string_pretty(&report)?,
    )?;
    let md = markdown(&report);
    std::fs::write(o.out.join("results.md"), &md)?;
    let figures: Vec<plot::SwitchFigures> = report
        .results
        .iter()
        .map(|x| plot::SwitchFigures {
            name: x.switch.clone(),
            throughput_pps: x.throughput.throughput_pps.unwrap_or(0.0),
            latency: x
                .latency
                .iter()
                .map(|l| (l.rate_pps, l.latency.avg_us, l.latency.p99_us))
                .collect(),
        })
        .collect();
    let what = format!("{} B, {} flow(s)", report.frame_size, report.flows);
    plot::throughput(
        &o.out.join("throughput.svg"),
        &format!("Throughput at {} % loss, {what}", o.loss_tolerance),
        &figures,
    )?;
    plot::latency(
        &o.out.join("latency.svg"),
        &format!("One-way latency vs offered load, {what}"),
        &figures,
    )?;
    println!("{md}");
    for x in &report.results {
        if x.throughput.generator_limited {
            println!(
                "note: {}: the generator could not reach the offered rate; its throughput is a lower bound",
                x.switch
            );
        }
    }
    Ok(())
}

fn topology_date() -> String {
    vsw_bench::topology::run(&["date", "-u", "+%Y-%m-%d %H:%M UTC"])
        .map_or_else(|_| "?".into(), |d| d.trim().to_string())
}

/// Seconds every CPU of the machine spent not idle, from /proc/stat.
fn system_busy_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal ...
    let total: u64 = v.iter().take(8).sum();
    let idle = v.get(3)? + v.get(4)?;
    Some((total - idle) as f64 / 100.0)
}
