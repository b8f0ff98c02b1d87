//! Text output, laid out as Open vSwitch's tools print the same things: what
//! `vswctl` prints and what vswd answers `ovs-appctl` with.

use std::fmt::Write;

use crate::{
    DpFlowInfo, DpifInfo, FdbEntryView, FlowInfo, GroupInfo, MdbEntryView, MeterInfo,
    OffloadShowView, PmdRxqView, PmdStatsView, PortInfo, ShowInfo,
};

pub fn show(s: ShowInfo) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "vswd (socket {}, state {})", s.socket, s.state_file);
    let cores: Vec<String> = s.pmd_cores.iter().map(|c| c.to_string()).collect();
    let _ = writeln!(
        o,
        "  pmd: core{} {} (pmd-rxq-assign={}, emc-insert-inv-prob={})",
        if cores.len() == 1 { "" } else { "s" },
        cores.join(","),
        s.pmd_rxq_assign,
        s.emc_insert_inv_prob
    );
    for (k, v) in &s.options {
        let _ = writeln!(o, "  {k}={v}");
    }
    let _ = writeln!(o, "  flows: {}", s.flows);
    for p in &s.ports {
        let opts: Vec<String> = p.options.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let mtu = p.mtu.map_or(String::new(), |m| format!(" mtu={m}"));
        let _ = writeln!(
            o,
            "  port {}: {} ({}){mtu} tx-flush-interval={}us (from {}) {}",
            p.no,
            p.name,
            p.status,
            p.tx_flush_interval_us,
            p.tx_flush_interval_from,
            opts.join(" ")
        );
        if let Some(path) = &p.vhost_server_path {
            let _ = writeln!(o, "    vhost-user socket: {path}");
        }
        if let Some(g) = &p.vhost_guest {
            let _ = writeln!(o, "    guest: {g}");
        }
        if let Some(why) = &p.mtu_problem {
            let _ = writeln!(o, "    mtu_request not in effect: {why}");
        }
    }
    o
}

/// As `ovs-ofctl dump-groups` and `dump-group-stats` together.
pub fn groups(groups: &[GroupInfo]) -> String {
    let mut o = String::new();
    for g in groups {
        let _ = write!(
            o,
            " {}\n   duration={:.3}s, ref_count={}, n_packets={}, n_bytes={}",
            g.group,
            g.duration_ms as f64 / 1000.0,
            g.ref_count,
            g.n_packets,
            g.n_bytes
        );
        for (i, (p, b)) in g.buckets.iter().enumerate() {
            let _ = write!(o, ", bucket{i}:n_packets={p},n_bytes={b}");
        }
        o.push('\n');
    }
    o
}

/// As `ovs-ofctl dump-meters` and `meter-stats` together.
pub fn meters(meters: &[MeterInfo]) -> String {
    let mut o = String::new();
    for m in meters {
        let _ = write!(
            o,
            " {}\n   duration={:.3}s, flow_count={}, packet_in_count={}, byte_in_count={}",
            m.meter,
            m.duration_ms as f64 / 1000.0,
            m.flow_count,
            m.packet_in_count,
            m.byte_in_count
        );
        for (i, (p, b)) in m.bands.iter().enumerate() {
            let _ = write!(o, ", band{i}:packet_count={p},byte_count={b}");
        }
        o.push('\n');
    }
    o
}

pub fn flows(flows: &[FlowInfo]) -> String {
    let mut o = String::new();
    for f in flows {
        let m = if f.matching.is_empty() {
            String::new()
        } else {
            format!(",{}", f.matching)
        };
        let mut timeouts = String::new();
        if f.cookie != 0 {
            timeouts += &format!("cookie={:#x}, ", f.cookie);
        }
        if f.idle_timeout != 0 {
            timeouts += &format!("idle_timeout={}, ", f.idle_timeout);
        }
        if f.hard_timeout != 0 {
            timeouts += &format!("hard_timeout={}, ", f.hard_timeout);
        }
        // Offload state only where offloading is on (as OVS prints it only then).
        let offload = match f.offload_status.as_str() {
            "" | "off" => String::new(),
            "yes" => format!("offloaded:yes, pps={:.0}, ", f.pps),
            why => format!("offloaded:no ({why}), pps={:.0}, ", f.pps),
        };
        let _ = writeln!(
            o,
            " duration={:.3}s, table={}, n_packets={}, n_bytes={}, {timeouts}idle_age={}, {offload}priority={}{} actions={}",
            f.duration_ms as f64 / 1000.0,
            f.table,
            f.n_packets,
            f.n_bytes,
            f.idle_age_s,
            f.priority,
            m,
            f.actions
        );
    }
    o
}

/// As `ovs-appctl dpctl/dump-flows` (`--more`: with the flow's id, PMD, offload
/// state and datapath).
pub fn dp_flows(flows: &[DpFlowInfo], more: bool) -> String {
    let mut o = String::new();
    for f in flows {
        let used = f
            .used_s
            .map_or_else(|| "never".to_string(), |s| format!("{s:.3}s"));
        if more {
            let offloaded = match (&f.offloaded, &f.offload_reason) {
                (true, _) => "yes".to_string(),
                (false, Some(why)) => format!("no ({why})"),
                (false, None) => "no".to_string(),
            };
            let _ = write!(o, "ufid:{}, pmd:{}, ", f.id, f.core);
            let _ = writeln!(
                o,
                "{}, packets:{}, bytes:{}, used:{used}, offloaded:{offloaded}, dp:{}, actions:{}",
                f.matching, f.packets, f.bytes, f.dp, f.actions
            );
        } else {
            let _ = writeln!(
                o,
                "{}, packets:{}, bytes:{}, used:{used}, actions:{}",
                f.matching, f.packets, f.bytes, f.actions
            );
        }
    }
    o
}

/// As `ovs-appctl dpif/show`.
pub fn dpif_show(d: &DpifInfo) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "vsw@netdev: hit:{} missed:{} lost:{}",
        d.hit, d.missed, d.lost
    );
    let _ = writeln!(
        o,
        "  flows: {} (flow-limit {} per PMD)",
        d.flows, d.flow_limit
    );
    let _ = writeln!(o, "  translation errors: {}", d.xlate_errors);
    for (no, name) in &d.ports {
        let _ = writeln!(o, "  port {no}: {name}");
    }
    for (table, rules) in &d.tables {
        let _ = writeln!(o, "  table {table}: {rules} rules");
    }
    o
}

pub fn ports(ports: &[PortInfo]) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "ports: {}", ports.len());
    for p in ports {
        let s = &p.stats;
        let _ = writeln!(o, "  port {:>2}: {} ({})", p.no, p.name, p.status);
        let _ = writeln!(
            o,
            "           rx pkts={}, bytes={}, drop={} (malformed={}, truncated={}, overrun={})",
            s.rx_packets,
            s.rx_bytes,
            s.rx_dropped(),
            s.rx_malformed,
            s.rx_truncated,
            s.rx_overrun
        );
        let _ = writeln!(
            o,
            "           tx pkts={}, bytes={}, drop={} (queue_full={}, too_big={}, errors={}, mtu={}), batches={}",
            s.tx_packets,
            s.tx_bytes,
            s.tx_dropped(),
            s.tx_queue_full,
            s.tx_too_big,
            s.tx_errors,
            s.tx_mtu_drops,
            s.tx_batches
        );
        let _ = writeln!(
            o,
            "           tx_gso_segments={}, tx_gso_refused={}, tx_csum_sw={}, tx_gro_segments={}",
            s.tx_gso_segments, s.tx_gso_refused, s.tx_csum_sw, s.tx_gro_segments
        );
        let h = s.tx_batch_hist;
        let _ = writeln!(
            o,
            "           kicks/packet={}, batch sizes 1:{} 2-3:{} 4-7:{} 8-15:{} 16-31:{} 32:{}, wait avg={} max={}us",
            s.kicks_per_packet().map_or("-".into(), |k| format!("{k:.3}")),
            h[0],
            h[1],
            h[2],
            h[3],
            h[4],
            h[5],
            s.avg_wait_us().map_or("-".into(), |w| format!("{w:.1}us")),
            s.tx_wait_us_max
        );
    }
    o
}

/// As `ovs-appctl dpif-netdev/pmd-stats-show` prints it.
pub fn pmd_stats(pmds: &[PmdStatsView]) -> String {
    let mut o = String::new();
    let avg = |v: Option<f64>| v.map_or_else(|| "-".to_string(), |v| format!("{v:.2}"));
    for p in pmds {
        let total = (p.busy_cycles + p.idle_cycles).max(1) as f64;
        let pct = |c: u64| 100.0 * c as f64 / total;
        let _ = writeln!(o, "pmd thread core_id {}:", p.core);
        let _ = writeln!(o, "  packets received: {}", p.packets);
        let _ = writeln!(o, "  packet recirculations: {}", p.recirculations);
        let passes =
            (p.packets > 0).then(|| (p.packets + p.recirculations) as f64 / p.packets as f64);
        let _ = writeln!(o, "  avg. datapath passes per packet: {}", avg(passes));
        let (emc, megaflow, upcall) = match p.shares() {
            Some((e, m, u)) => (
                format!(" ({e:.1}%)"),
                format!(" ({m:.1}%)"),
                format!(" ({u:.1}%)"),
            ),
            None => Default::default(),
        };
        let _ = writeln!(o, "  emc hits: {}{emc}", p.emc_hits);
        let _ = writeln!(o, "  megaflow hits: {}{megaflow}", p.megaflow_hits);
        let _ = writeln!(
            o,
            "  avg. subtable lookups per megaflow hit: {}",
            avg(p.avg_subtable_lookups())
        );
        let _ = writeln!(o, "  miss with success upcall: {}{upcall}", p.upcalls);
        let _ = writeln!(o, "  miss with failed upcall: {}", p.lost_upcalls);
        let _ = writeln!(o, "  upcalls not cached: {}", p.uncached_upcalls);
        let _ = writeln!(o, "  lost: {}", p.lost);
        let _ = writeln!(
            o,
            "  avg. packets per output batch: {}",
            avg(p.avg_packets_per_batch())
        );
        let _ = writeln!(
            o,
            "  idle cycles: {} ({:.2}%)",
            p.idle_cycles,
            pct(p.idle_cycles)
        );
        let _ = writeln!(
            o,
            "  processing cycles: {} ({:.2}%)",
            p.busy_cycles,
            pct(p.busy_cycles)
        );
        match p.avg_cycles_per_packet() {
            Some(c) => {
                let ns = c * 1e9 / p.cycles_per_second.max(1) as f64;
                let _ = writeln!(o, "  avg processing cycles per packet: {c:.2} ({ns:.1} ns)");
            }
            None => {
                let _ = writeln!(o, "  avg processing cycles per packet: -");
            }
        }
        let _ = writeln!(
            o,
            "  longest iteration: {:.1} us (longest reconfiguration: {:.1} us)",
            p.max_iteration_us(),
            p.max_reconfigure_us()
        );
    }
    o
}

/// As `ovs-appctl dpif-netdev/pmd-rxq-show` prints it.
pub fn rxq_show(pmds: &[PmdRxqView]) -> String {
    let mut o = String::new();
    for p in pmds {
        let _ = writeln!(o, "pmd thread core_id {}:", p.core);
        let _ = writeln!(o, "  isolated : {}", p.isolated);
        for q in &p.queues {
            let usage = q
                .usage_percent
                .map_or_else(|| "NOT AVAIL".to_string(), |u| format!("{u:>3.0} %"));
            let _ = writeln!(
                o,
                "  port: {:<16} queue-id: {:>2} {}  pmd usage: {usage}",
                q.port,
                q.queue,
                if q.pinned { "(pinned)" } else { "        " }
            );
        }
    }
    o
}

pub fn offload_show(providers: &[OffloadShowView]) -> String {
    let mut o = String::new();
    if providers.is_empty() {
        o.push_str("no offload providers (hw-offload=true and a port with offload=PROVIDER)\n");
    }
    for p in providers {
        let _ = writeln!(
            o,
            "port {}: provider {}, capacity {}, used {}, {}, passes {}, rebalancing passes {}, swaps {}, last pass {} us",
            p.port,
            p.provider,
            p.stats.capacity,
            p.stats.used,
            if p.stats.oor { "out of resources" } else { "room" },
            p.stats.passes,
            p.stats.rebalance_passes,
            p.stats.swaps,
            p.stats.last_pass_us
        );
    }
    o
}

/// As `ovs-appctl mdb/show` prints it: the memberships, then the router ports
/// ("querier").
pub fn mdb(entries: &[MdbEntryView]) -> String {
    let mut o = String::from(" port  VLAN  GROUP                Age\n");
    for e in entries {
        let port = if e.port == 65534 {
            "LOCAL".to_string()
        } else {
            e.port.to_string()
        };
        let group = e.group.as_deref().unwrap_or("querier");
        let _ = writeln!(o, "{port:>5}  {:>4}  {group:<19}  {:>3}", e.vlan, e.age_s);
    }
    o
}

/// As `ovs-appctl fdb/show` prints it.
pub fn fdb(entries: &[FdbEntryView]) -> String {
    let mut o = String::from(" port  VLAN  MAC                Age\n");
    for e in entries {
        let port = if e.port == 65534 {
            "LOCAL".to_string()
        } else {
            e.port.to_string()
        };
        let _ = writeln!(o, "{port:>5}  {:>4}  {}  {:>3}", e.vlan, e.mac, e.age_s);
    }
    o
}
