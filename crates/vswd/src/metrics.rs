//! `/metrics`: the switch's counters for Prometheus (`vswd --metrics-addr`), in the
//! OpenMetrics text format, encoded by the `prometheus-client` crate and served by
//! a small server of vswd's own (`http.rs`) on a thread of its own.
//!
//! Each scrape reads the bridges afresh: each bridge's switch lock (the control
//! side's; no PMD takes it) is held while its counters are copied — atomics the PMDs
//! write — and let go before anything is encoded.

use std::borrow::Cow;
use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, NoLabelSet};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Registry, Unit};
use vsw_protocol::PortInfo;

use crate::bridges::Bridges;
use crate::latency::LatencyHistogram;
use crate::switch::SwitchMetrics;

/// Every bridge's counters, read at each scrape.
struct SwitchCollector {
    bridges: Arc<Bridges>,
}

impl fmt::Debug for SwitchCollector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SwitchCollector")
    }
}

/// Label names and values (borrowed from the counters, or made for the scrape).
type Labels<'a> = Vec<(&'static str, Cow<'a, str>)>;

/// One metric family: its name (without `_total`, which the encoder adds to
/// counters), help, unit, and a value per label set.
struct Family<'a> {
    name: &'static str,
    help: &'static str,
    unit: Option<Unit>,
    kind: MetricType,
    values: Vec<(Labels<'a>, Value<'a>)>,
}

/// A count (exact), a quantity in a unit (seconds), or a histogram of them.
#[derive(Clone, Copy)]
enum Value<'a> {
    Count(u64),
    Real(f64),
    Histogram(&'a LatencyHistogram),
}

impl<'a> Family<'a> {
    fn counter(name: &'static str, help: &'static str) -> Family<'a> {
        Family {
            name,
            help,
            unit: None,
            kind: MetricType::Counter,
            values: Vec::new(),
        }
    }

    fn gauge(name: &'static str, help: &'static str) -> Family<'a> {
        Family {
            kind: MetricType::Gauge,
            ..Family::counter(name, help)
        }
    }

    fn histogram(name: &'static str, help: &'static str) -> Family<'a> {
        Family {
            kind: MetricType::Histogram,
            ..Family::counter(name, help)
        }
    }

    fn in_unit(mut self, unit: Unit) -> Family<'a> {
        self.unit = Some(unit);
        self
    }

    fn add(&mut self, labels: Labels<'a>, value: u64) {
        self.values.push((labels, Value::Count(value)));
    }

    fn add_real(&mut self, labels: Labels<'a>, value: f64) {
        self.values.push((labels, Value::Real(value)));
    }

    fn add_histogram(&mut self, labels: Labels<'a>, h: &'a LatencyHistogram) {
        self.values.push((labels, Value::Histogram(h)));
    }

    fn encode(&self, encoder: &mut DescriptorEncoder) -> Result<(), fmt::Error> {
        let mut m =
            encoder.encode_descriptor(self.name, self.help, self.unit.as_ref(), self.kind)?;
        for (labels, v) in &self.values {
            let mut family = m.encode_family(labels)?;
            match (self.kind, *v) {
                (_, Value::Histogram(h)) => family.encode_histogram::<NoLabelSet>(
                    h.sum_seconds,
                    h.count,
                    &h.buckets(),
                    None,
                )?,
                (MetricType::Counter, Value::Count(n)) => ConstCounter::new(n).encode(family)?,
                (MetricType::Counter, Value::Real(x)) => ConstCounter::new(x).encode(family)?,
                (_, Value::Count(n)) => {
                    ConstGauge::new(i64::try_from(n).unwrap_or(i64::MAX)).encode(family)?
                }
                (_, Value::Real(x)) => ConstGauge::new(x).encode(family)?,
            }
        }
        Ok(())
    }
}

/// Receive and transmit drops by reason, as the port counters name them.
fn port_drops(p: &PortInfo) -> [(&'static str, &'static str, u64); 8] {
    let s = &p.stats;
    [
        ("rx", "malformed", s.rx_malformed),
        ("rx", "truncated", s.rx_truncated),
        ("rx", "ring_overrun", s.rx_overrun),
        ("tx", "queue_full", s.tx_queue_full),
        ("tx", "too_big", s.tx_too_big),
        ("tx", "device_error", s.tx_errors),
        ("tx", "mtu", s.tx_mtu_drops),
        ("tx", "gso_refused", s.tx_gso_refused),
    ]
}

/// The connection tracker's counters, read at a scrape.
#[derive(Debug)]
struct ConntrackCounts {
    census: std::collections::BTreeMap<vsw_conntrack::Census, u64>,
    committed: u64,
    over_limit: u64,
    invalid: u64,
    nat_exhausted: u64,
    limit: u64,
    fragments_kept: u64,
    fragments: Vec<(&'static str, &'static str, u64)>,
}

impl ConntrackCounts {
    fn read(ct: &vsw_conntrack::Conntrack) -> ConntrackCounts {
        ConntrackCounts {
            census: ct.census(vsw_datapath::clock::now_ms()),
            committed: ct.committed(),
            over_limit: ct.over_limit(),
            invalid: ct.invalid(),
            nat_exhausted: ct.nat_exhausted(),
            limit: ct.limit() as u64,
            fragments_kept: u64::from(ct.ipf().nfrag()),
            fragments: ct.ipf().counts(),
        }
    }
}

/// The tracker's families: connections by zone, protocol and state; made;
/// dropped or refused by reason; the global limit.
fn conntrack_families(ct: &ConntrackCounts) -> Vec<Family<'_>> {
    let mut conns = Family::gauge(
        "vsw_conntrack_connections",
        "Live connections of the connection tracker, by zone, protocol and state.",
    );
    for (c, n) in &ct.census {
        conns.add(
            vec![
                ("zone", Cow::Owned(c.zone.to_string())),
                (
                    "proto",
                    Cow::Owned(vsw_conntrack::dump::proto_name(c.proto)),
                ),
                ("state", c.state.into()),
            ],
            *n,
        );
    }
    let mut committed = Family::counter(
        "vsw_conntrack_committed",
        "Connections the tracker made (committed).",
    );
    committed.add(Vec::new(), ct.committed);
    let mut refused = Family::counter(
        "vsw_conntrack_refused",
        "Packets the tracker found invalid, and commits it refused, by reason.",
    );
    for (reason, n) in [
        ("invalid", ct.invalid),
        ("limit", ct.over_limit),
        ("nat_exhausted", ct.nat_exhausted),
    ] {
        refused.add(vec![("reason", reason.into())], n);
    }
    let mut limit = Family::gauge(
        "vsw_conntrack_limit",
        "The most connections the tracker keeps, all zones together.",
    );
    limit.add(Vec::new(), ct.limit);
    let mut kept = Family::gauge(
        "vsw_ipf_fragments_kept",
        "IP fragments kept until their datagrams are whole.",
    );
    kept.add(Vec::new(), ct.fragments_kept);
    let mut fragments = Family::counter(
        "vsw_ipf_fragments",
        "IP fragments met by a ct, by family and what became of them.",
    );
    for (family, outcome, n) in &ct.fragments {
        fragments.add(
            vec![("family", (*family).into()), ("outcome", (*outcome).into())],
            *n,
        );
    }
    vec![conns, committed, refused, limit, kept, fragments]
}

/// The families of every bridge's counters and the tunnels' drops.
fn families<'a>(
    bridges: &'a [(String, SwitchMetrics)],
    tunnel_drops: &'a [(&'static str, u64)],
) -> Vec<Family<'a>> {
    let mut rx_packets = Family::counter("vsw_port_rx_packets", "Packets received on a port.");
    let mut rx_bytes =
        Family::counter("vsw_port_rx", "Bytes received on a port.").in_unit(Unit::Bytes);
    let mut tx_packets = Family::counter("vsw_port_tx_packets", "Packets sent on a port.");
    let mut tx_bytes = Family::counter("vsw_port_tx", "Bytes sent on a port.").in_unit(Unit::Bytes);
    let mut drops = Family::counter(
        "vsw_port_drops",
        "Packets a port dropped, by direction and reason.",
    );
    let mut tx_batches = Family::counter(
        "vsw_port_tx_batches",
        "Output batches (send calls) on a port.",
    );
    let mut tx_wait = Family::counter(
        "vsw_port_tx_flush_wait",
        "Time packets waited in an output batch before it left (tx-flush-interval).",
    )
    .in_unit(Unit::Seconds);
    let mut mtu = Family::gauge("vsw_port_mtu", "A port's interface MTU.").in_unit(Unit::Bytes);
    let mut link = Family::gauge("vsw_port_link_up", "1 when a port's link is up, else 0.");
    let mut pmd_packets = Family::counter("vsw_pmd_rx_packets", "Packets a PMD received.");
    let mut pmd_lookups = Family::counter(
        "vsw_pmd_lookups",
        "Packets by where a PMD found their datapath flow: the exact-match cache, the \
         megaflow classifier, or an upcall to the slow path.",
    );
    let mut pmd_lost = Family::counter(
        "vsw_pmd_lost_packets",
        "Packets a PMD received but did not forward: malformed, or no room to send.",
    );
    let mut pmd_cycles = Family::counter(
        "vsw_pmd_cycles",
        "A PMD's CPU cycles, by state: busy processing, idle polling, asleep (part of idle).",
    );
    let mut pmd_iterations = Family::counter("vsw_pmd_iterations", "A PMD's loop iterations.");
    let mut pmd_batches = Family::counter("vsw_pmd_tx_batches", "Output batches a PMD sent.");
    let mut pmd_tx_packets =
        Family::counter("vsw_pmd_tx_packets", "Packets in a PMD's output batches.");
    let mut flows = Family::gauge(
        "vsw_datapath_flows",
        "Datapath flows (megaflows) in a PMD's table.",
    );
    let mut flow_limit = Family::gauge(
        "vsw_datapath_flow_limit",
        "The most datapath flows a PMD caches (flow-limit).",
    );
    let mut offload_capacity = Family::gauge(
        "vsw_offload_capacity_flows",
        "The flows a port's offload provider can hold.",
    );
    let mut offload_used = Family::gauge(
        "vsw_offload_used_flows",
        "The flows a port's offload provider holds now.",
    );
    let mut offload_oor = Family::gauge(
        "vsw_offload_out_of_resources",
        "1 while a port's offload provider is full and flows wait in userspace.",
    );
    let mut offload_swaps = Family::counter(
        "vsw_offload_swaps",
        "Flows swapped in or out of a port's offload provider by rebalancing (by pps).",
    );
    let mut offload_passes = Family::counter(
        "vsw_offload_passes",
        "Offload passes (placing datapath flows) over a port's provider.",
    );
    let mut offload_adopted = Family::gauge(
        "vsw_offload_adopted_flows",
        "Entries an earlier run left in a port's kernel fast path (offload-persist) that \
         no flow of this run holds yet.",
    );
    let mut vhost_notifications = Family::counter(
        "vsw_vhost_notifications",
        "Interrupts vsw raised for a vhost-user guest (writes to its call eventfds).",
    );
    let mut vhost_faults = Family::counter(
        "vsw_vhost_guest_faults",
        "What a vhost-user guest did wrong, survived and counted: memory its frontend \
         had taken away, frames too long, malformed descriptor chains, refused queues.",
    );
    let mut vhost_no_buffer = Family::counter(
        "vsw_vhost_rx_no_buffer",
        "Frames for a vhost-user guest that found no receive buffer posted.",
    );
    let mut control_latency = Family::histogram(
        "vsw_control_request_duration",
        "How long the switch took to answer a control request (vswctl, OpenFlow, \
         OVSDB, ovs-appctl), by request kind.",
    )
    .in_unit(Unit::Seconds);
    let mut tunnel = Family::counter(
        "vsw_tunnel_drops",
        "Tunnel packets dropped, by reason (malformed, unknown VNI, no route or neighbour).",
    );
    for (bridge, m) in bridges {
        let b = bridge.as_str();
        for p in &m.ports {
            let l = || vec![("bridge", b.into()), ("port", p.name.as_str().into())];
            let s = &p.stats;
            rx_packets.add(l(), s.rx_packets);
            rx_bytes.add(l(), s.rx_bytes);
            tx_packets.add(l(), s.tx_packets);
            tx_bytes.add(l(), s.tx_bytes);
            tx_batches.add(l(), s.tx_batches);
            tx_wait.add_real(l(), s.tx_wait_us_sum as f64 / 1e6);
            for (direction, reason, n) in port_drops(p) {
                let mut with = l();
                with.push(("direction", direction.into()));
                with.push(("reason", reason.into()));
                drops.add(with, n);
            }
            if let Some(bytes) = p.mtu {
                mtu.add(l(), u64::from(bytes));
            }
            link.add(l(), u64::from(p.status == "up"));
            if let Some(g) = &p.vhost_counters {
                vhost_notifications.add(l(), g.notifications);
                vhost_no_buffer.add(l(), g.no_buffer);
                for (fault, n) in [
                    ("memory", g.memory_faults),
                    ("too_long", g.too_long),
                    ("bad_chain", g.bad_chains),
                    ("bad_queue", g.bad_queues),
                ] {
                    let mut with = l();
                    with.push(("fault", fault.into()));
                    vhost_faults.add(with, n);
                }
            }
        }
        for (kind, h) in &m.control_latency {
            control_latency
                .add_histogram(vec![("bridge", b.into()), ("request", (*kind).into())], h);
        }
        for o in &m.offloads {
            let l = || {
                vec![
                    ("bridge", b.into()),
                    ("port", o.port.as_str().into()),
                    ("provider", o.provider.as_str().into()),
                ]
            };
            let s = &o.stats;
            offload_capacity.add(l(), s.capacity as u64);
            offload_used.add(l(), s.used as u64);
            offload_oor.add(l(), u64::from(s.oor));
            offload_swaps.add(l(), s.swaps);
            offload_passes.add(l(), s.passes);
            offload_adopted.add(l(), s.adopted as u64);
        }
    }
    // Every bridge is in the one datapath: its PMDs and flow limit are said once,
    // by core, not per bridge.
    if let Some((_, m)) = bridges.first() {
        flow_limit.add(Vec::new(), m.flow_limit);
        for pmd in &m.pmds {
            let core = pmd.core.to_string();
            let l = || vec![("core", Cow::Owned(core.clone()))];
            pmd_packets.add(l(), pmd.packets);
            for (found, n) in [
                ("exact_match_cache", pmd.emc_hits),
                ("megaflow", pmd.megaflow_hits),
                ("upcall", pmd.upcalls),
            ] {
                let mut with = l();
                with.push(("found", found.into()));
                pmd_lookups.add(with, n);
            }
            pmd_lost.add(l(), pmd.lost);
            for (state, n) in [
                ("busy", pmd.busy_cycles),
                ("idle", pmd.idle_cycles),
                ("sleep", pmd.sleep_cycles),
            ] {
                let mut with = l();
                with.push(("state", state.into()));
                pmd_cycles.add(with, n);
            }
            pmd_iterations.add(l(), pmd.iterations);
            pmd_batches.add(l(), pmd.tx_batches);
            pmd_tx_packets.add(l(), pmd.tx_packets);
            flows.add(l(), pmd.flows);
        }
    }
    for (reason, n) in tunnel_drops {
        tunnel.add(vec![("reason", (*reason).into())], *n);
    }
    vec![
        rx_packets,
        rx_bytes,
        tx_packets,
        tx_bytes,
        drops,
        tx_batches,
        tx_wait,
        mtu,
        link,
        pmd_packets,
        pmd_lookups,
        pmd_lost,
        pmd_cycles,
        pmd_iterations,
        pmd_batches,
        pmd_tx_packets,
        flows,
        flow_limit,
        offload_capacity,
        offload_used,
        offload_oor,
        offload_swaps,
        offload_passes,
        offload_adopted,
        vhost_notifications,
        vhost_faults,
        vhost_no_buffer,
        control_latency,
        tunnel,
    ]
}

impl Collector for SwitchCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        // Copied under each switch's lock in turn; encoded after.
        let bridges: Vec<(String, SwitchMetrics)> = self
            .bridges
            .all()
            .iter()
            .map(|b| (b.name.clone(), b.lock().metrics()))
            .collect();
        let tunnel_drops = self.bridges.tunnels().drops();
        for family in families(&bridges, &tunnel_drops) {
            family.encode(&mut encoder)?;
        }
        // The datapath's tracker, which every bridge shares.
        if let Some(dpif) = self.bridges.dpif() {
            let ct = ConntrackCounts::read(dpif.conntrack());
            for family in conntrack_families(&ct) {
                family.encode(&mut encoder)?;
            }
        }
        Ok(())
    }
}

/// The registry a scrape encodes.
pub fn registry(bridges: Arc<Bridges>) -> Registry {
    let mut r = Registry::default();
    r.register_collector(Box::new(SwitchCollector { bridges }));
    r
}

/// The formats a scrape may ask for: OpenMetrics (what Prometheus asks for first) or
/// Prometheus's classic text format (0.0.4: curl, promtool, older scrapers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    OpenMetrics,
    PrometheusText,
}

impl Format {
    /// The format an `Accept` header asks for.
    pub fn accepted(accept: Option<&str>) -> Format {
        match accept {
            Some(a) if a.contains("application/openmetrics-text") => Format::OpenMetrics,
            _ => Format::PrometheusText,
        }
    }

    fn content_type(self) -> &'static str {
        match self {
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
            Format::PrometheusText => "text/plain; version=0.0.4; charset=utf-8",
        }
    }
}

/// The text a scrape returns.
pub fn render(registry: &Registry, format: Format) -> String {
    let mut out = String::new();
    // Writing into a String cannot fail.
    let _ = match format {
        Format::OpenMetrics => prometheus_client::encoding::text::encode(&mut out, registry),
        Format::PrometheusText => {
            prometheus_client::encoding::prometheus_text::encode(&mut out, registry)
        }
    };
    out
}

/// Serves `GET /metrics` on `addr` from a thread of its own (`http.rs`: bounded
/// connections, deadlines), for the life of the process. Binding happens before
/// this returns, so an address in use is an error at start-up.
pub fn serve(addr: SocketAddr, bridges: Arc<Bridges>) -> std::io::Result<()> {
    let registry = registry(bridges);
    crate::http::serve(addr, "metrics", move |r| match (r.method, r.path) {
        ("GET", "/metrics") => {
            let format = Format::accepted(r.header("Accept"));
            crate::http::Response {
                status: 200,
                content_type: format.content_type(),
                body: render(&registry, format),
            }
        }
        _ => crate::http::Response {
            status: 404,
            content_type: "text/plain; charset=utf-8",
            body: "only GET /metrics is here\n".into(),
        },
    })?;
    tracing::info!(%addr, "serving /metrics");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use vsw_protocol::{OffloadShowView, PmdStatsView};

    #[test]
    fn the_format_follows_the_accept_header() {
        let prometheus = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert_eq!(Format::accepted(Some(prometheus)), Format::OpenMetrics);
        assert_eq!(Format::accepted(Some("*/*")), Format::PrometheusText);
        assert_eq!(Format::accepted(None), Format::PrometheusText);
    }

    #[test]
    fn families_follow_prometheus_naming() {
        let m = SwitchMetrics {
            ports: vec![],
            pmds: vec![PmdStatsView {
                core: 3,
                packets: 10,
                emc_hits: 7,
                ..PmdStatsView::default()
            }],
            flow_limit: 200_000,
            offloads: vec![OffloadShowView {
                port: "eth1".into(),
                provider: "ebpf".into(),
                stats: vsw_protocol::OffloadStats {
                    capacity: 1024,
                    used: 1024,
                    oor: true,
                    swaps: 3,
                    adopted: 5,
                    ..Default::default()
                },
            }],
            control_latency: vec![("add-flow", {
                let mut h = LatencyHistogram::default();
                h.observe(std::time::Duration::from_micros(700));
                h.observe(std::time::Duration::from_millis(30));
                h
            })],
        };
        let bridges = vec![("br0".to_string(), m)];
        let fams = families(&bridges, &[("unknown_vni", 2)]);
        for f in &fams {
            assert!(f.name.starts_with("vsw_"), "{}", f.name);
            assert!(
                !f.name.ends_with("_total"),
                "the encoder adds _total: {}",
                f.name
            );
        }
        let mut r = Registry::default();
        #[derive(Debug)]
        struct Fixed(Vec<(String, SwitchMetrics)>);
        impl Collector for Fixed {
            fn encode(&self, mut e: DescriptorEncoder) -> Result<(), fmt::Error> {
                for f in families(&self.0, &[("unknown_vni", 2)]) {
                    f.encode(&mut e)?;
                }
                Ok(())
            }
        }
        let (_, m) = bridges.into_iter().next().unwrap();
        r.register_collector(Box::new(Fixed(vec![("br0".into(), m)])));
        let text = render(&r, Format::PrometheusText);
        assert!(text.contains("vsw_pmd_lookups_total{core=\"3\",found=\"exact_match_cache\"} 7"));
        assert!(text.contains("vsw_datapath_flow_limit 200000"));
        assert!(text.contains("vsw_tunnel_drops_total{reason=\"unknown_vni\"} 2"));
        assert!(text.contains(
            "vsw_offload_out_of_resources{bridge=\"br0\",port=\"eth1\",provider=\"ebpf\"} 1"
        ));
        assert!(text
            .contains("vsw_offload_swaps_total{bridge=\"br0\",port=\"eth1\",provider=\"ebpf\"} 3"));
        assert!(text.contains(
            "vsw_offload_adopted_flows{bridge=\"br0\",port=\"eth1\",provider=\"ebpf\"} 5"
        ));
        // The tracker's, with a connection of each kind it names.
        let tracker = vsw_conntrack::Conntrack::default();
        let udp = vsw_conntrack::CtPacket {
            tuple: vsw_conntrack::Tuple {
                src: 1,
                dst: 2,
                src_port: 1000,
                dst_port: 53,
                proto: 17,
                ..Default::default()
            },
            ..Default::default()
        };
        tracker.execute(&udp, 7, Some(&vsw_conntrack::Commit::default()), 0);
        let counts = ConntrackCounts::read(&tracker);
        let mut r = Registry::default();
        #[derive(Debug)]
        struct Tracker(ConntrackCounts);
        impl Collector for Tracker {
            fn encode(&self, mut e: DescriptorEncoder) -> Result<(), fmt::Error> {
                for f in conntrack_families(&self.0) {
                    f.encode(&mut e)?;
                }
                Ok(())
            }
        }
        r.register_collector(Box::new(Tracker(counts)));
        let ct_text = render(&r, Format::PrometheusText);
        for line in [
            "vsw_conntrack_connections{zone=\"7\",proto=\"udp\",state=\"FIRST\"} 1",
            "vsw_conntrack_committed_total 1",
            "vsw_conntrack_refused_total{reason=\"nat_exhausted\"} 0",
            "vsw_conntrack_limit 3000000",
            "vsw_ipf_fragments_kept 0",
            "vsw_ipf_fragments_total{family=\"v6\",outcome=\"too_small\"} 0",
        ] {
            assert!(ct_text.contains(line), "{line} in\n{ct_text}");
        }
        // A histogram: cumulative buckets, its sum and count.
        let l = "bridge=\"br0\",request=\"add-flow\"";
        for line in [
            format!("vsw_control_request_duration_seconds_bucket{{{l},le=\"0.0005\"}} 0"),
            format!("vsw_control_request_duration_seconds_bucket{{{l},le=\"0.001\"}} 1"),
            format!("vsw_control_request_duration_seconds_bucket{{{l},le=\"0.05\"}} 2"),
            format!("vsw_control_request_duration_seconds_bucket{{{l},le=\"+Inf\"}} 2"),
            format!("vsw_control_request_duration_seconds_count{{{l}}} 2"),
        ] {
            assert!(text.contains(&line), "{line} in\n{text}");
        }
    }
}
