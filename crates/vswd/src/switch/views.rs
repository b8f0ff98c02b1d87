//! What the switch shows: flows and datapath flows, groups, meters, ports, PMDs,
//! the MAC table, and the counters `/metrics` exports.

use super::*;

impl Switch {
    /// Every meter with its counters.
    pub fn dump_meters(&self) -> Vec<MeterInfo> {
        let now = now_ms();
        let pipeline = self.ofproto.pipeline();
        let rules = pipeline.rules();
        pipeline
            .meters()
            .map(|(m, since)| {
                let counts = self
                    .dpif
                    .dp()
                    .meter_counts(Backer::dp_meter(self.slot, m.id))
                    .unwrap_or_default();
                MeterInfo {
                    meter: vsw_flow::format_meter(m),
                    meter_id: m.id,
                    flow_count: rules
                        .iter()
                        .filter(|r| r.spec.actions.contains(&vsw_flow::Action::Meter(m.id)))
                        .count() as u32,
                    packet_in_count: counts.packets,
                    byte_in_count: counts.bytes,
                    duration_ms: now.saturating_sub(*since),
                    bands: if counts.bands.is_empty() {
                        vec![(0, 0); m.bands.len()]
                    } else {
                        counts.bands
                    },
                }
            })
            .collect()
    }

    /// Every group with its counters (pushed up to now) and its buckets'.
    pub fn dump_groups(&self) -> Vec<GroupInfo> {
        self.dpif.dp().push_flow_stats();
        let now = now_ms();
        let pipeline = self.ofproto.pipeline();
        let uses = |id: u32| {
            pipeline
                .rules()
                .iter()
                .filter(|r| r.spec.actions.contains(&vsw_flow::Action::Group(id)))
                .count()
        };
        pipeline
            .groups()
            .map(|g| GroupInfo {
                group: vsw_flow::format_group(&g.spec),
                group_id: g.spec.id,
                ref_count: uses(g.spec.id) as u32,
                n_packets: g.stats.packets(),
                n_bytes: g.stats.bytes(),
                duration_ms: now.saturating_sub(g.installed_ms),
                buckets: g
                    .bucket_stats
                    .iter()
                    .map(|b| (b.packets(), b.bytes()))
                    .collect(),
            })
            .collect()
    }

    /// Tables 0..`n`: (table, rules, lookups, matches), counts pushed up to now.
    pub fn table_counts(&self, n: u8) -> Vec<(u8, u32, u64, u64)> {
        self.dpif.dp().push_flow_stats();
        let pipeline = self.ofproto.pipeline();
        (0..n)
            .map(|t| {
                let rules = pipeline.table(t).map_or(0, |c| c.len() as u32);
                let (lookups, matches) = self.ofproto.table_counts(t);
                (t, rules, lookups, matches)
            })
            .collect()
    }

    /// Every rule, its counters up to this moment (what the datapath flows and the
    /// fast paths forwarded is pushed to the rules first), and the time now.
    pub fn rules_counted(&self) -> (Vec<Arc<vsw_flow::Rule>>, u64) {
        self.push_rule_counts();
        (self.ofproto.pipeline().rules(), now_ms())
    }

    /// Counts up to this moment: what the datapath flows (and the fast paths for
    /// them) forwarded goes to the rules. Returns the datapath flows looked at.
    pub(super) fn push_rule_counts(&self) -> Vec<Arc<vsw_datapath::DpFlow>> {
        let flows = self.dpif.dp().dump_flows();
        self.offloads.count(&flows);
        self.dpif.dp().push_flow_stats();
        flows
    }

    pub(super) fn dump_flows(&self) -> Vec<FlowInfo> {
        let flows = self.push_rule_counts();
        let served = self.offloads.by_rule(&flows);
        let now = now_ms();
        self.ofproto
            .pipeline()
            .rules()
            .iter()
            .map(|r| {
                let o = served
                    .get(&Arc::as_ptr(r))
                    .cloned()
                    .unwrap_or_else(|| self.offloads.rule_without_flows());
                // With the timeouts it has now (a fin_timeout may have cut them),
                // as the fields below say them.
                let timeouts = (r.idle_timeout(), r.hard_timeout());
                let flow = if timeouts == (r.spec.idle_timeout, r.spec.hard_timeout) {
                    format_flow(&r.spec)
                } else {
                    format_flow(&vsw_flow::FlowSpec {
                        idle_timeout: timeouts.0,
                        hard_timeout: timeouts.1,
                        ..r.spec.clone()
                    })
                };
                FlowInfo {
                    flow,
                    table: r.spec.table,
                    priority: r.spec.priority,
                    matching: format_match(&r.spec.matcher),
                    actions: format_actions(&r.spec.actions),
                    n_packets: r.stats.packets(),
                    n_bytes: r.stats.bytes(),
                    duration_ms: r.duration_ms(now),
                    idle_age_s: r.idle_age_s(now),
                    idle_timeout: r.idle_timeout(),
                    hard_timeout: r.hard_timeout(),
                    cookie: r.spec.cookie,
                    offloaded: o.offloaded,
                    offload_status: o.status,
                    pps: o.pps,
                }
            })
            .collect()
    }

    pub(super) fn dump_dp_flows(&self) -> Vec<DpFlowInfo> {
        self.dp_flow_views(true)
    }

    /// The datapath flows received on this bridge's ports as `dpctl/dump-flows`
    /// shows the datapath: in its port numbers.
    pub fn datapath_flows(&self) -> Vec<DpFlowInfo> {
        self.dp_flow_views(false)
    }

    /// The datapath flows received on this bridge's ports, in its OpenFlow numbers
    /// (`of_numbers`) or the datapath's.
    pub(super) fn dp_flow_views(&self, of_numbers: bool) -> Vec<DpFlowInfo> {
        let now = now_ms();
        let mut flows = self.dpif.dp().dump_flows();
        self.offloads.count(&flows);
        // This bridge's (received on its ports), in its OpenFlow numbers.
        flows.retain(|f| !f.is_dead() && self.of_no(f.key.in_port).is_some());
        flows.sort_by_key(|f| f.id);
        flows
            .iter()
            .map(|f| {
                let s = f.stats();
                let o = self.offloads.dp_flow(f);
                let (mut value, mask) = (*f.matcher.value(), *f.matcher.mask());
                let actions = if of_numbers {
                    value.in_port = self.of_no(value.in_port).unwrap_or(value.in_port);
                    self.actions_in_of_numbers(&f.actions)
                } else {
                    f.actions.to_vec()
                };
                DpFlowInfo {
                    id: f.id,
                    core: f.core,
                    matching: dp_match_text(value, mask),
                    packets: s.packets,
                    bytes: s.bytes,
                    used_s: s.used_ms.map(|t| now.saturating_sub(t) as f64 / 1000.0),
                    actions: format_dp_actions(&actions),
                    offloaded: o.offloaded,
                    offload_reason: (!o.offloaded && o.status != "off").then(|| o.status.clone()),
                    dp: match o.offloaded {
                        true => self.offloads.kind_of(f.key.in_port).into(),
                        false => "ovs".into(),
                    },
                }
            })
            .collect()
    }

    /// `ofproto/trace`'s text for `flow` (a match, in this bridge's port names).
    pub fn trace(&self, flow: &str) -> Result<String, SwitchError> {
        let sel = parse_match(flow, &|n: &str| self.port_no(n))?;
        Ok(self.ofproto.trace(sel.matcher.value(), now_ms()).render())
    }

    /// Forgets every host learned (`fdb/flush`); no datapath flow forwards by them
    /// once it returns.
    pub fn flush_fdb(&mut self) -> Result<(), SwitchError> {
        self.ofproto.flush_macs();
        self.revalidate_now()
    }

    /// Every PMD's counters (the datapath's: every bridge's packets).
    pub fn pmd_stats(&self) -> Vec<vsw_datapath::stats::PmdStatsView> {
        self.dpif.dp().pmd_stats()
    }

    /// Zeroes every PMD's counters.
    pub fn clear_pmd_stats(&self) {
        self.dpif.dp().clear_pmd_stats();
    }

    /// Places the receive queues on the PMDs again; where they went.
    pub fn rebalance_rxqs(&self) -> Result<Vec<vsw_datapath::stats::PmdRxqView>, SwitchError> {
        self.dpif.dp().rebalance()?;
        Ok(self.rxq_show())
    }

    /// Which PMD polls which queue, this bridge's ports in OpenFlow numbers.
    pub fn rxq_show(&self) -> Vec<vsw_datapath::stats::PmdRxqView> {
        let mut views = self.dpif.dp().rxq_show();
        for v in &mut views {
            for q in &mut v.queues {
                q.port_no = self.of_no(q.port_no).unwrap_or(q.port_no);
            }
        }
        views
    }

    pub(super) fn dpif_show(&self) -> DpifInfo {
        let (mut hit, mut missed, mut lost) = (0, 0, 0);
        let dp = self.dpif.dp();
        for p in dp.pmd_stats() {
            hit += p.emc_hits + p.megaflow_hits;
            missed += p.upcalls + p.lost_upcalls;
            lost += p.lost_upcalls;
        }
        DpifInfo {
            flows: dp.flow_count(),
            flow_limit: dp.flow_limit(),
            hit,
            missed,
            lost,
            xlate_errors: self.ofproto.xlate_errors(),
            tables: self.ofproto.pipeline().table_sizes(),
            ports: self
                .ports
                .iter()
                .map(|(no, p)| (*no, p.name.clone()))
                .collect(),
        }
    }

    pub fn fdb_show(&self) -> Vec<vsw_protocol::FdbEntryView> {
        self.ofproto
            .mac_entries(now_ms())
            .into_iter()
            .map(|e| vsw_protocol::FdbEntryView {
                port: e.port,
                vlan: e.vlan,
                mac: e.mac.to_string(),
                age_s: e.age_s,
            })
            .collect()
    }

    /// What multicast snooping learned (`mdb/show`).
    pub fn mdb_show(&self) -> Vec<vsw_protocol::MdbEntryView> {
        self.ofproto
            .mcast_entries(now_ms())
            .into_iter()
            .map(|e| vsw_protocol::MdbEntryView {
                port: e.port,
                vlan: e.vlan,
                group: e.group.map(|g| g.to_string()),
                age_s: e.age_ms / 1000,
            })
            .collect()
    }

    /// Forgets every membership and router port (`mdb/flush`); no datapath flow
    /// forwards by them once it returns.
    pub fn flush_mdb(&mut self) -> Result<(), SwitchError> {
        self.ofproto.flush_mcast();
        self.revalidate_now()
    }

    pub fn port_infos(&self) -> Vec<PortInfo> {
        let dp = self.dpif.dp();
        self.ports
            .iter()
            .map(|(no, p)| {
                // What the port is, with the defaults its options were saved without.
                let mut options = p.options.clone();
                p.parsed.write_out_defaults(&mut options);
                PortInfo {
                    no: *no,
                    name: p.name.clone(),
                    status: match &p.link {
                        Link::Up { .. } => "up".into(),
                        Link::Down { why } => format!("down: {why}"),
                        Link::NoDevice => "down: interface does not exist".into(),
                    },
                    link: match p.link {
                        Link::Up { .. } => vsw_protocol::PortLink::Up,
                        Link::Down { .. } => vsw_protocol::PortLink::Down,
                        Link::NoDevice => vsw_protocol::PortLink::NoDevice,
                    },
                    options: options.into_iter().collect(),
                    stats: p.stats.view(),
                    mtu: p.device.mtu(),
                    mtu_problem: p.mtu_problem.clone(),
                    vhost_guest: p.device.peer_status(),
                    vhost_counters: p.device.guest_counters(),
                    vhost_server_path: p.device.socket_path().map(|s| s.display().to_string()),
                    ifindex: match p.link {
                        Link::Up { ifindex } if ifindex != 0 => Some(ifindex),
                        _ => None,
                    },
                    tx_flush_interval_us: dp.tx_flush_of(self.dp_no(*no)).0,
                    tx_flush_interval_from: format!("{:?}", dp.tx_flush_of(self.dp_no(*no)).1)
                        .to_lowercase(),
                }
            })
            .collect()
    }

    /// What `/metrics` reads of this switch: copies of its ports' and PMDs' counters
    /// (atomics the PMDs write; nothing a PMD locks) and its flow limit.
    pub fn metrics(&self) -> SwitchMetrics {
        let (pmds, flow_limit) = {
            let dp = self.dpif.dp();
            (dp.pmd_stats_total(), dp.flow_limit() as u64)
        };
        SwitchMetrics {
            ports: self.port_infos(),
            pmds,
            flow_limit,
            offloads: self.offloads.show(),
            control_latency: self.latencies.snapshot(),
        }
    }

    /// Each port's number and counters.
    pub fn port_counters(&self) -> Vec<(u32, vsw_protocol::PortStatsView)> {
        self.ports
            .iter()
            .map(|(no, p)| (*no, p.stats.view()))
            .collect()
    }

    /// The ports as OpenFlow describes them: number, name, link, and the
    /// interface's MAC address where there is an interface (else one made from the
    /// port number, locally administered).
    pub fn openflow_ports(&self) -> Vec<vsw_openflow::PortInfo> {
        self.ports
            .iter()
            .map(|(no, p)| {
                let hw_addr = vsw_netdev::interface::mac(&p.name).map_or_else(
                    || {
                        let n = no.to_be_bytes();
                        [0x02, 0, n[0], n[1], n[2], n[3]]
                    },
                    |m| m.0,
                );
                vsw_openflow::PortInfo {
                    port_no: vsw_openflow::flow_mod::to_of_port(*no),
                    hw_addr,
                    name: p.name.clone(),
                    admin_down: vsw_netdev::interface::admin_up(&p.name) == Some(false),
                    link_up: matches!(p.link, Link::Up { .. }),
                    curr_speed_kbps: 0,
                    max_speed_kbps: 0,
                }
            })
            .collect()
    }

    pub(super) fn show(&self) -> ShowInfo {
        // One look at the datapath (its lock is taken once: not again while held).
        let (pmd_cores, pmd_rxq_assign, emc_insert_inv_prob) = {
            let dp = self.dpif.dp();
            (
                dp.pmd_cores(),
                dp.rxq_assign().to_string(),
                dp.emc_insert_inv_prob(),
            )
        };
        ShowInfo {
            options: self.options.clone().into_iter().collect(),
            pmd_cores,
            pmd_rxq_assign,
            emc_insert_inv_prob,
            socket: self.socket.clone(),
            state_file: self.state_file.display().to_string(),
            ports: self.port_infos(),
            flows: self.ofproto.pipeline().len(),
        }
    }
}

/// A datapath flow's match as `dpctl/dump-flows` prints it: a later pass's flow
/// names its recirculation, and a flow that looks at the datapath's hash the bits it
/// matches, before the fields rules match.
fn dp_match_text(value: vsw_packet::FlowKey, mask: vsw_packet::FlowKey) -> String {
    let mut text = String::new();
    if value.recirc_id != 0 {
        text.push_str(&format!("recirc_id(0x{:x}),", value.recirc_id));
    }
    if mask.dp_hash != 0 {
        text.push_str(&format!(
            "dp_hash(0x{:x}/0x{:x}),",
            value.dp_hash & mask.dp_hash,
            mask.dp_hash
        ));
    }
    text + &format_match(&vsw_flow::Match::new(value, mask))
}
