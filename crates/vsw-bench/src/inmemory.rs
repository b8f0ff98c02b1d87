//! The datapath alone: a PMD forwarding between two in-memory `ring` ports, so that
//! what is measured is vsw's own per-packet cost (key extraction, exact-match cache,
//! megaflows, datapath actions, the copy into the output batch; upcalls through the
//! pipeline for new flows), without any kernel device. The slow path is what vswd
//! runs: a bridge in the datapath's backer (its ports numbered apart from the
//! datapath's); a patched scenario puts a second bridge behind a patch pair, the
//! sink on it.

use std::time::{Duration, Instant};

use serde::Serialize;
use vsw_datapath::ring::{flow_frames, ring_port, ring_port_with_frames};

use vsw_datapath::{Datapath, DatapathError, PmdConfig, PortHandle, PortStats};
use vsw_flow::{parse_flow, FlowSyntaxError, Pipeline};
use vsw_ofproto::{Backer, BackerError, Ofproto};

/// `max-idle` while measuring: long enough that no flow of a scenario ages out.
const BENCH_MAX_IDLE_MS: u64 = 600_000;

/// How the UDP source ports of the generated flows are laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Layout {
    /// 1, 2, 3, ...
    Consecutive,
    /// 100 ports from each multiple of 128: flow i has port (i / 100) * 128 + i % 100,
    /// so that the 100 flows of block b fall under one rule `tp_src=b*128/0xff80`.
    Blocks,
    /// A grid of sources and destination ports (the conjunction scenarios): flow i
    /// comes from 198.18.1.(i / 100) to UDP port 1000 + i % 100.
    Grid,
}

/// One measured configuration.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Scenario {
    pub name: String,
    pub flows: u32,
    pub layout: Layout,
    pub rules: Vec<String>,
    pub emc_insert_inv_prob: u32,
    /// Add and remove this many rules (250 at a time) while measuring, instead of
    /// leaving the rules alone.
    pub churn: u32,
    /// `flow-limit` (datapath flows per PMD); the datapath's default when `None`.
    pub flow_limit: Option<usize>,
    /// Measure for at most this long, ms (a scenario of new flows runs out of them).
    pub max_seconds_ms: Option<u64>,
    /// The sink is on a second bridge behind a patch pair (the first bridge's port
    /// 2 is the patch; the second's rule sends what crosses to its sink).
    pub patched: bool,
    /// Groups the rules may use (`ovs-ofctl add-group` text).
    pub groups: Vec<String>,
    /// The bridge translates alone, on no backer: a select group is decided in
    /// translation (its flows match every connection's addresses and ports), as
    /// before recirculation.
    pub standalone: bool,
}

impl Scenario {
    fn frames(&self, wire_size: usize) -> Vec<Vec<u8>> {
        match self.layout {
            Layout::Consecutive => flow_frames(self.flows, wire_size),
            Layout::Blocks => (0..self.flows)
                .map(|i| {
                    let sport = ((i / 100) * 128 + i % 100) as u16;
                    vsw_packet::builder::udp4_frame(
                        [198, 18, 0, 1],
                        [198, 18, 0, 2],
                        sport,
                        9,
                        wire_size.saturating_sub(46),
                    )
                })
                .collect(),
            Layout::Grid => (0..self.flows)
                .map(|i| {
                    vsw_packet::builder::udp4_frame(
                        [198, 18, 1, (i / 100) as u8],
                        [198, 18, 0, 2],
                        7,
                        (1000 + i % 100) as u16,
                        wire_size.saturating_sub(46),
                    )
                })
                .collect(),
        }
    }
}

/// The two figures and the cache's effect on the second.
pub fn standard_scenarios() -> Vec<Scenario> {
    vec![
        Scenario {
            name: "1 flow, 1 rule (cache hits)".into(),
            flows: 1,
            layout: Layout::Consecutive,
            rules: vec!["in_port=1,actions=output:2".into()],
            emc_insert_inv_prob: 100,
            churn: 0,
            flow_limit: None,
            max_seconds_ms: None,
            patched: false,
            groups: Vec::new(),
            standalone: false,
        },
        Scenario {
            name: "10,000 flows, 100 rules over 10 masks, cache off (megaflows)".into(),
            flows: 10_000,
            layout: Layout::Blocks,
            rules: ten_mask_rules(),
            emc_insert_inv_prob: 0,
            churn: 0,
            flow_limit: None,
            max_seconds_ms: None,
            patched: false,
            groups: Vec::new(),
            standalone: false,
        },
        Scenario {
            name: "10,000 flows, 100 rules over 10 masks, cache on (1 in 100)".into(),
            flows: 10_000,
            layout: Layout::Blocks,
            rules: ten_mask_rules(),
            emc_insert_inv_prob: 100,
            churn: 0,
            flow_limit: None,
            max_seconds_ms: None,
            patched: false,
            groups: Vec::new(),
            standalone: false,
        },
        Scenario {
            name: "1 flow while 10,000 rules are added and removed".into(),
            flows: 1,
            layout: Layout::Consecutive,
            rules: vec!["in_port=1,actions=output:2".into()],
            emc_insert_inv_prob: 100,
            churn: 10_000,
            flow_limit: None,
            max_seconds_ms: None,
            patched: false,
            groups: Vec::new(),
            standalone: false,
        },
        Scenario {
            name: "10,000 flows, 1 table, cache off".into(),
            flows: 10_000,
            layout: Layout::Consecutive,
            rules: vec!["in_port=1,udp,actions=output:2".into()],
            emc_insert_inv_prob: 0,
            churn: 0,
            flow_limit: None,
            max_seconds_ms: None,
            patched: false,
            groups: Vec::new(),
            standalone: false,
        },
        Scenario {
            name: "10,000 flows, 5 tables, cache off".into(),
            flows: 10_000,
            layout: Layout::Consecutive,
            rules: five_table_rules(),
            emc_insert_inv_prob: 0,
            churn: 0,
            flow_limit: None,
            max_seconds_ms: None,
            patched: false,
            groups: Vec::new(),
            standalone: false,
        },
        Scenario {
            name: "10,000 flows, 3 tables as a controller installs them, cache off".into(),
            flows: 10_000,
            layout: Layout::Consecutive,
            rules: controller_three_table_rules(),
            emc_insert_inv_prob: 0,
            churn: 0,
            flow_limit: None,
            max_seconds_ms: None,
            patched: false,
            groups: Vec::new(),
            standalone: false,
        },
        Scenario {
            name: "upcalls: every packet a new datapath flow".into(),
            flows: NEW_FLOWS,
            layout: Layout::Consecutive,
            // The drop rules make every flow's megaflow exact on the UDP source port
            // and the source address, which together tell each generated flow apart.
            rules: vec![
                "priority=20,udp,tp_src=0,actions=drop".into(),
                "priority=20,ip,nw_src=198.18.255.1,actions=drop".into(),
                "priority=10,in_port=1,actions=output:2".into(),
            ],
            emc_insert_inv_prob: 100,
            churn: 0,
            flow_limit: Some(NEW_FLOWS as usize),
            max_seconds_ms: Some(1000),
            patched: false,
            groups: Vec::new(),
            standalone: false,
        },
    ]
}

/// The scenarios of one bridge beside the same across a patch pair to a second
/// bridge (cache hits, megaflows, upcalls): what a patch crossing costs.
pub fn patch_scenarios() -> Vec<Scenario> {
    let all = standard_scenarios();
    let mut out = Vec::new();
    for i in [0, 1, 7] {
        let one = all[i].clone();
        let mut two = one.clone();
        two.name = format!("{} across a patch pair", one.name);
        two.patched = true;
        out.push(one);
        out.push(two);
    }
    out
}

/// Cache hits and upcalls through two tables, beside the same with every register
/// loaded in the first table and matched in the second (OVN's pipelines carry their
/// decisions so): what 16 registers cost a packet the cache holds, and one it
/// translates. The registers live only in translation, so both give the same
/// datapath flows.
pub fn register_scenarios() -> Vec<Scenario> {
    let all = standard_scenarios();
    let loads: Vec<String> = (0..16)
        .map(|r| format!("set_field:{:#x}->reg{r}", r + 1))
        .collect();
    let matches: Vec<String> = (0..16).map(|r| format!("reg{r}={:#x}", r + 1)).collect();
    let mut out = Vec::new();
    for i in [0, 7] {
        let base = all[i].clone();
        let two_tables = |regs: bool| -> Vec<String> {
            base.rules
                .iter()
                .map(|r| {
                    if !r.contains("output:2") {
                        return r.clone();
                    }
                    let (m, _) = r.split_once(",actions=").expect("a rule with actions");
                    if regs {
                        format!("{m},actions={},resubmit(,1)", loads.join(","))
                    } else {
                        format!("{m},actions=resubmit(,1)")
                    }
                })
                .chain(std::iter::once(if regs {
                    format!("table=1,{},actions=output:2", matches.join(","))
                } else {
                    "table=1,actions=output:2".to_string()
                }))
                .collect()
        };
        let mut plain = base.clone();
        plain.name = format!("{}, two tables", base.name);
        plain.rules = two_tables(false);
        let mut regs = base.clone();
        regs.name = format!("{}, two tables, 16 registers", base.name);
        regs.rules = two_tables(true);
        out.push(plain);
        out.push(regs);
    }
    out
}

/// Connection tracking on the packet path: one flow's cache hits and 10,000 flows
/// with the cache off, each through two tables, beside the same through
/// `ct(commit,table=1,zone=1)` between them (the tracker asked per packet, then a
/// second pass matching `ct_state=+trk`). The generator sends one way, so each
/// packet is of a committed connection the tracker finds (UDP stays `new` until a
/// reply): one lookup and update per packet, as an established connection's.
pub fn conntrack_scenarios() -> Vec<Scenario> {
    let all = standard_scenarios();
    let mut out = Vec::new();
    for i in [0, 4] {
        let base = all[i].clone();
        let mut plain = base.clone();
        plain.name = format!("{}, two tables", base.name);
        plain.rules = vec![
            "in_port=1,udp,actions=resubmit(,1)".into(),
            "table=1,actions=output:2".into(),
        ];
        let mut ct = base.clone();
        ct.name = format!("{}, ct(commit,table=1) between two tables", base.name);
        ct.rules = vec![
            "in_port=1,udp,ct_state=-trk,actions=ct(commit,table=1,zone=1)".into(),
            "table=1,ct_state=+trk,actions=output:2".into(),
        ];
        out.push(plain);
        out.push(ct);
    }
    out
}

/// `learn` on the upcall path: every packet a new flow (as the upcall scenario),
/// forwarded by one rule, beside the same rule learning from each packet a rule of
/// its own (keyed on the flow's source address and port, so that each is new):
/// learned rules per second on one PMD.
pub fn learn_scenarios() -> Vec<Scenario> {
    // As the upcall scenario's: each generated flow its own datapath flow.
    let drops = [
        "priority=20,udp,tp_src=0,actions=drop",
        "priority=20,ip,nw_src=198.18.255.1,actions=drop",
    ];
    let learning = "priority=10,in_port=1,udp,actions=learn(table=1,idle_timeout=60,\
                    eth_type=0x800,nw_proto=17,NXM_OF_IP_DST[]=NXM_OF_IP_SRC[],\
                    NXM_OF_UDP_DST[]=NXM_OF_UDP_SRC[],output:NXM_OF_IN_PORT[]),output:2";
    [
        (
            "upcalls: every packet a new flow, no learn",
            "priority=10,in_port=1,actions=output:2",
        ),
        (
            "upcalls: every packet a new flow, each learning a rule",
            learning,
        ),
    ]
    .into_iter()
    .map(|(name, rule)| Scenario {
        name: name.into(),
        flows: NEW_FLOWS,
        layout: Layout::Consecutive,
        rules: drops
            .iter()
            .map(|d| d.to_string())
            .chain([rule.into()])
            .collect(),
        emc_insert_inv_prob: 100,
        churn: 0,
        flow_limit: Some(NEW_FLOWS as usize),
        max_seconds_ms: Some(1000),
        patched: false,
        groups: Vec::new(),
        standalone: false,
    })
    .collect()
}

/// One policy over 100 sources × 100 UDP ports, written as a conjunction (100 + 100
/// clauses and the rule of its `conj_id`) and as the cross product (10,000 rules),
/// each measured on cache hits (EMC on) and on misses (`flow-limit` 0: every packet
/// translated).
pub fn conjunction_scenarios() -> Vec<Scenario> {
    let conjunction: Vec<String> = (0..100)
        .map(|a| format!("priority=10,ip,nw_src=198.18.1.{a},actions=conjunction(1,1/2)"))
        .chain((0..100).map(|p| {
            format!(
                "priority=10,udp,tp_dst={},actions=conjunction(1,2/2)",
                1000 + p
            )
        }))
        .chain(std::iter::once(
            "priority=10,conj_id=1,actions=output:2".to_string(),
        ))
        .collect();
    let cross: Vec<String> = (0..100)
        .flat_map(|a| {
            (0..100).map(move |p| {
                format!(
                    "priority=10,udp,nw_src=198.18.1.{a},tp_dst={},actions=output:2",
                    1000 + p
                )
            })
        })
        .collect();
    let mut out = Vec::new();
    for (how, misses) in [("cache hits", false), ("every packet translated", true)] {
        for (written, rules) in [("conjunction", &conjunction), ("cross product", &cross)] {
            out.push(Scenario {
                name: format!("100 x 100 policy as a {written}, 10,000 flows, {how}"),
                flows: 10_000,
                layout: Layout::Grid,
                rules: rules.clone(),
                emc_insert_inv_prob: 1,
                churn: 0,
                flow_limit: misses.then_some(0),
                max_seconds_ms: None,
                patched: false,
                groups: Vec::new(),
                standalone: false,
            });
        }
    }
    out
}

/// A select group of four buckets, all to the sink, that rule sends everything to;
/// `flows` connections, each packet a new one when `new` (as the upcall scenario).
fn select_scenario(name: &str, flows: u32, new: bool, standalone: bool) -> Scenario {
    Scenario {
        name: name.into(),
        flows,
        layout: Layout::Consecutive,
        rules: vec!["in_port=1,actions=group:1".into()],
        emc_insert_inv_prob: 100,
        churn: 0,
        flow_limit: new.then_some(flows as usize),
        max_seconds_ms: new.then_some(1000),
        patched: false,
        groups: vec!["group_id=1,type=select,bucket=output:2,bucket=output:2,\
                      bucket=output:2,bucket=output:2"
            .into()],
        standalone,
    }
}

/// Connections through a select group (10,000 again and again, then a new one
/// every packet): decided in translation (a flow and an upcall per connection),
/// beside decided by the datapath's hash and a recirculation (the flows number the
/// hash's slots).
pub fn select_scenarios() -> Vec<Scenario> {
    let name = |what: &str, how: &str| format!("{what}, select group of 4, {how}");
    let mut out = Vec::new();
    for (what, flows, new) in [
        ("10,000 connections", 10_000, false),
        ("every packet a new connection", NEW_FLOWS, true),
    ] {
        out.push(select_scenario(
            &name(what, "decided in translation"),
            flows,
            new,
            true,
        ));
        out.push(select_scenario(
            &name(what, "by dp_hash and recirculation"),
            flows,
            new,
            false,
        ));
    }
    out
}

/// Distinct flows of the upcall scenario: more than one PMD translates in its
/// measuring second here.
const NEW_FLOWS: u32 = 600_000;

/// Five tables, each looking at another field, that together send every generated
/// flow to port 2: after translation, one datapath flow as with one table.
pub fn five_table_rules() -> Vec<String> {
    vec![
        "table=0,in_port=1,actions=goto_table:1".into(),
        "table=1,udp,actions=goto_table:2".into(),
        "table=2,ip,nw_dst=198.18.0.2,actions=goto_table:3".into(),
        "table=3,udp,tp_dst=9,actions=goto_table:4".into(),
        "table=4,ip,nw_ttl=64,actions=output:2".into(),
    ]
}

/// Three tables as an OpenFlow controller writes them: cookies, a classification
/// table, a routing table, a forwarding table, and a table-miss rule to the
/// controller in each (which the measured packets never reach).
pub fn controller_three_table_rules() -> Vec<String> {
    let mut r: Vec<String> = (0..3)
        .map(|t| format!("table={t},cookie=0x{t}ff,priority=0,actions=controller"))
        .collect();
    r.extend([
        "table=0,cookie=0x1,priority=100,in_port=1,actions=goto_table:1".into(),
        "table=1,cookie=0x2,priority=50,ip,nw_dst=198.18.0.2,actions=goto_table:2".into(),
        "table=2,cookie=0x3,priority=10,udp,tp_dst=9,actions=output:2".into(),
    ]);
    r
}

/// Rule `i` of a churn: ten masks, lower priority than any scenario rule, and a UDP
/// destination port no generated frame has.
pub fn churn_rule(i: u32) -> String {
    vsw_flow::samples::churn_rule(i, "drop")
}

/// Adds `n` churn rules and removes them again, 250 per change, each change followed
/// by a revalidator pass (as vswd answers a rule change).
fn churn(dp: &mut Datapath, ofproto: &Ofproto, n: u32) -> Result<(), InMemoryError> {
    const STEP: u32 = 250;
    let parse = |i: u32| {
        let text = churn_rule(i);
        parse_flow(&text, &|_: &str| None)
            .map_err(|error| InMemoryError::Rule { rule: text, error })
    };
    let now = vsw_datapath::clock::now_ms;
    for start in (0..n).step_by(STEP as usize) {
        let mut p = (*ofproto.pipeline()).clone();
        for i in start..(start + STEP).min(n) {
            p.insert(parse(i)?, 0);
        }
        ofproto.set_pipeline(p);
        dp.revalidate(now(), BENCH_MAX_IDLE_MS)?;
    }
    for start in (0..n).step_by(STEP as usize) {
        let mut p = (*ofproto.pipeline()).clone();
        for i in start..(start + STEP).min(n) {
            let spec = parse(i)?;
            let sel = vsw_flow::Selection {
                table: Some(spec.table),
                priority: Some(spec.priority),
                matcher: spec.matcher,
                ..vsw_flow::Selection::all()
            };
            p.remove(&sel, true);
        }
        ofproto.set_pipeline(p);
        dp.revalidate(now(), BENCH_MAX_IDLE_MS)?;
    }
    Ok(())
}

/// 100 rules in 10 subtables, one priority, every flow under exactly one rule: rule
/// b takes the 100 flows of block b (see [`Layout::Blocks`]), and the ten rules of
/// subtable m also match one more header field (one that every generated frame has),
/// which gives each group of ten its own mask.
pub fn ten_mask_rules() -> Vec<String> {
    const EXTRA: [&str; 10] = [
        "",
        ",nw_src=198.18.0.1",
        ",nw_dst=198.18.0.2",
        ",in_port=1",
        ",dl_src=02:00:00:00:00:01",
        ",dl_dst=02:00:00:00:00:02",
        ",nw_ttl=64",
        ",nw_tos=0",
        ",tp_dst=9",
        ",nw_src=198.18.0.0/16",
    ];
    (0..100)
        .map(|b| {
            format!(
                "priority=100,udp,tp_src=0x{:04x}/0xff80{},actions=output:2",
                b * 128,
                EXTRA[b / 10]
            )
        })
        .collect()
}

#[derive(Clone, Debug, Serialize)]
pub struct Figures {
    pub scenario: Scenario,
    pub seconds: f64,
    pub packets: u64,
    /// Packets since the PMD started, warm-up included (to divide a whole-run
    /// instruction count by, under callgrind).
    pub packets_total: u64,
    pub mpps: f64,
    /// PMD processing cycles per packet (TSC).
    pub cycles_per_packet: f64,
    pub ns_per_packet: f64,
    pub emc_hit_percent: f64,
    pub avg_subtable_lookups: Option<f64>,
    pub avg_packets_per_batch: Option<f64>,
    pub subtables: usize,
    /// The PMD's longest loop iteration while measuring (preemption by the host
    /// included), and the longest time it spent taking up a change.
    pub max_iteration_us: f64,
    pub max_reconfigure_us: f64,
    /// Translations per second, and the share of packets that were translated.
    pub upcalls_per_second: f64,
    pub upcall_percent: f64,
    /// Datapath flows cached at the end.
    pub megaflows: usize,
    /// Rules `learn` actions put in the bridge's tables per second while measuring.
    pub rules_learned_per_second: f64,
}

#[derive(Debug, thiserror::Error)]
pub enum InMemoryError {
    #[error(transparent)]
    Datapath(#[from] DatapathError),
    #[error(transparent)]
    Backer(#[from] BackerError),
    #[error("rule '{rule}': {error}")]
    Rule {
        rule: String,
        error: FlowSyntaxError,
    },
    #[error("group: {0}")]
    Group(String),
    #[error("the PMD forwarded nothing in {0:?}")]
    NoTraffic(Duration),
}

/// Runs `s` for `seconds` after a warm-up, on a PMD on `core` (pinned when `pin`).
pub fn measure(
    s: &Scenario,
    wire_size: usize,
    seconds: f64,
    core: usize,
    pin: bool,
) -> Result<Figures, InMemoryError> {
    let mut dp = Datapath::start(PmdConfig {
        cores: vec![core],
        pin,
    })?;
    dp.set_emc_insert_inv_prob(s.emc_insert_inv_prob)?;
    if let Some(limit) = s.flow_limit {
        dp.set_flow_limit(limit)?;
    }
    let mut pipeline = Pipeline::new();
    for r in &s.rules {
        let spec = parse_flow(r, &|_: &str| None).map_err(|error| InMemoryError::Rule {
            rule: r.clone(),
            error,
        })?;
        pipeline.insert(spec, 0);
    }
    for g in &s.groups {
        let spec =
            vsw_flow::parse_group(g, &|_: &str| None).map_err(|error| InMemoryError::Rule {
                rule: g.clone(),
                error,
            })?;
        pipeline
            .set_group(spec, false, 0)
            .map_err(|e| InMemoryError::Group(e.to_string()))?;
    }
    let subtables = pipeline.table(0).map_or(0, |t| t.subtables());
    if s.standalone {
        // The bridge alone: the datapath numbers its ports as the bridge does.
        let ofproto = Ofproto::new(pipeline);
        ofproto.set_ports(vec![1, 2]);
        let up = ofproto.clone();
        return run(s, dp, up, &ofproto, (1, 2), subtables, wire_size, seconds);
    }
    // The bridge numbers its ports 1 (source) and 2 (sink, or the patch); the
    // datapath numbers them 11 and 12 (the sink on the second bridge: 12 too).
    let backer = Backer::new();
    let (first, ofproto) = Ofproto::join(&backer, "bench", pipeline)?;
    ofproto.set_ports(vec![1, 2]);
    backer.set_port(first, 1, 11)?;
    if s.patched {
        let mut peer = Pipeline::new();
        let rule = "in_port=2,actions=output:1";
        peer.insert(
            parse_flow(rule, &|_: &str| None).map_err(|error| InMemoryError::Rule {
                rule: rule.into(),
                error,
            })?,
            0,
        );
        let (second, peer) = Ofproto::join(&backer, "bench-peer", peer)?;
        peer.set_ports(vec![1, 2]);
        backer.set_port(second, 1, 12)?;
        backer.set_patch(first, 2, "bench-patch", "bench-peer-patch");
        backer.set_patch(second, 2, "bench-peer-patch", "bench-patch");
    } else {
        backer.set_port(first, 2, 12)?;
    }
    run(
        s,
        dp,
        backer,
        &ofproto,
        (11, 12),
        subtables,
        wire_size,
        seconds,
    )
}

/// Runs the traffic of `s` through `dp` translated by `upcall`, from and to the
/// datapath ports `(source, sink)`, and measures.
#[allow(clippy::too_many_arguments)]
fn run(
    s: &Scenario,
    mut dp: Datapath,
    upcall: std::sync::Arc<dyn vsw_datapath::Upcall>,
    ofproto: &Ofproto,
    (source, sink_no): (u32, u32),
    subtables: usize,
    wire_size: usize,
    seconds: f64,
) -> Result<Figures, InMemoryError> {
    dp.set_upcall(upcall)?;
    let sink = std::sync::Arc::new(PortStats::default());
    dp.add_port(PortHandle::new(
        sink_no,
        "sink",
        ring_port(0, wire_size),
        sink.clone(),
    ))?;
    dp.add_port(PortHandle::new(
        source,
        "source",
        ring_port_with_frames(s.frames(wire_size)),
        std::sync::Arc::new(PortStats::default()),
    ))?;
    // A scenario of new flows warms up briefly: it would run out of them.
    let warm_up = if s.max_seconds_ms.is_some() { 50 } else { 500 };
    std::thread::sleep(Duration::from_millis(warm_up));
    let warm_up = dp.pmd_stats()[0].packets;
    dp.clear_pmd_stats();
    let rules_before = ofproto.pipeline().len();
    let start = Instant::now();
    if s.churn > 0 {
        churn(&mut dp, ofproto, s.churn)?;
    } else {
        let seconds = s
            .max_seconds_ms
            .map_or(seconds, |m| (m as f64 / 1000.0).min(seconds));
        std::thread::sleep(Duration::from_secs_f64(seconds));
    }
    let p = dp.pmd_stats()[0];
    let elapsed = start.elapsed().as_secs_f64();
    let learned = ofproto.pipeline().len().saturating_sub(rules_before);
    let megaflows = dp.flow_count();
    drop(dp);
    // Forwarded: received by the PMD and sent to the sink (the drop rules of the
    // upcall scenario drop a few flows only).
    if p.packets == 0 || sink.view().tx_packets == 0 {
        return Err(InMemoryError::NoTraffic(Duration::from_secs_f64(seconds)));
    }
    let cpp = p.avg_cycles_per_packet().unwrap_or(0.0);
    Ok(Figures {
        scenario: s.clone(),
        seconds: elapsed,
        packets: p.packets,
        packets_total: warm_up + p.packets,
        mpps: p.packets as f64 / elapsed / 1e6,
        cycles_per_packet: cpp,
        ns_per_packet: cpp * 1e9 / p.cycles_per_second.max(1) as f64,
        emc_hit_percent: 100.0 * p.emc_hits as f64 / p.packets as f64,
        avg_subtable_lookups: p.avg_subtable_lookups(),
        avg_packets_per_batch: p.avg_packets_per_batch(),
        subtables,
        max_iteration_us: p.max_iteration_us(),
        max_reconfigure_us: p.max_reconfigure_us(),
        upcalls_per_second: p.upcalls as f64 / elapsed,
        upcall_percent: 100.0 * p.upcalls as f64 / p.packets as f64,
        megaflows,
        rules_learned_per_second: learned as f64 / elapsed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ten_mask_rules_make_ten_subtables_and_each_flow_has_one_rule() {
        let mut c = vsw_flow::Classifier::new();
        let rules: Vec<_> = ten_mask_rules()
            .iter()
            .map(|r| parse_flow(r, &|_: &str| None).unwrap())
            .collect();
        for r in &rules {
            c.insert(r.clone(), 0);
        }
        assert_eq!((c.len(), c.subtables()), (100, 10));
        let s = &standard_scenarios()[1];
        for (i, f) in s.frames(64).iter().enumerate() {
            let mut k = vsw_packet::FlowKey::default();
            vsw_packet::extract(f, 1, None, &mut k).unwrap();
            let matching: Vec<usize> = (0..rules.len())
                .filter(|r| rules[*r].matcher.matches(&k.into()))
                .collect();
            assert_eq!(matching, vec![i / 100], "flow {i}");
        }
    }

    #[test]
    fn the_register_scenarios_parse_and_forward_through_their_registers() {
        let s = register_scenarios();
        assert_eq!(s.len(), 4);
        for sc in &s {
            for r in &sc.rules {
                parse_flow(r, &|_: &str| None).unwrap_or_else(|e| panic!("{r}: {e}"));
            }
        }
        assert!(s[1].rules.iter().any(|r| r.contains("reg15=0x10")));
        // Only a packet whose registers table 1 matched reaches the sink.
        let f = measure(&s[1], 64, 0.2, 0, false).unwrap();
        assert!(f.packets > 0 && f.mpps > 0.0, "{f:?}");
    }

    /// Only a packet the tracker saw (`ct_state=+trk` on its second pass) reaches
    /// the sink.
    #[test]
    fn the_conntrack_scenarios_forward_through_the_tracker() {
        let s = conntrack_scenarios();
        assert_eq!(s.len(), 4);
        for sc in [&s[1], &s[3]] {
            let f = measure(sc, 64, 0.2, 0, false).unwrap();
            assert!(f.packets > 0 && f.mpps > 0.0, "{}: {f:?}", sc.name);
        }
    }

    #[test]
    fn each_new_flow_of_the_learn_scenario_learns_a_rule() {
        let s = learn_scenarios();
        let plain = measure(&s[0], 64, 0.2, 0, false).unwrap();
        assert_eq!(plain.rules_learned_per_second, 0.0);
        let learning = measure(&s[1], 64, 0.2, 0, false).unwrap();
        assert!(learning.rules_learned_per_second > 0.0);
    }

    #[test]
    fn both_policies_reach_the_sink() {
        let s = conjunction_scenarios();
        assert_eq!(s.len(), 4);
        assert_eq!(s[1].rules.len(), 10_000);
        for sc in [&s[0], &s[2]] {
            // Only a completed conjunction sends anything to the sink.
            measure(sc, 64, 0.2, 0, false).unwrap();
        }
    }

    #[test]
    fn a_patched_run_reaches_the_second_bridges_sink_in_one_datapath_flow() {
        let s = &patch_scenarios()[1];
        assert!(s.patched);
        let f = measure(s, 64, 0.2, 0, false).unwrap();
        assert!(f.packets > 0, "{f:?}");
        assert_eq!(f.megaflows, 1, "one flow covers both bridges");
    }

    #[test]
    fn a_short_run_forwards_and_counts() {
        let f = measure(&standard_scenarios()[0], 64, 0.2, 0, false).unwrap();
        assert!(f.packets > 0 && f.mpps > 0.0);
        assert!(f.cycles_per_packet > 0.0);
        assert!(f.emc_hit_percent > 50.0, "{f:?}");
        assert_eq!(f.avg_packets_per_batch, Some(32.0));
    }
}
