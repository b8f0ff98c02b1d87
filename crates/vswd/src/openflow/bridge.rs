//! The switch as an OpenFlow session sees it (`vsw_openflow::Bridge`): flow-mods
//! and statistics through the switch's own requests, packet-outs translated by the
//! slow path and handed to a PMD.

use vsw_flow::{GroupError, MeterError};
use vsw_openflow::as_written::{
    echo_group_desc, echo_instructions, echo_match, written_instructions,
};
use vsw_openflow::bundle::{BadBundle, BundleItem, Bundled, Prepared};
use vsw_openflow::flow_mod::{
    to_of_port, to_vsw_port, BadFlowMod, Command, FlowMod, OFPFF_CHECK_OVERLAP, OFPFF_RESET_COUNTS,
    OFPG_ANY, OFPP_ANY,
};
use vsw_openflow::flow_stats::{FlowStatsEntry, FlowStatsRequest};
use vsw_openflow::from_vsw::meter_config_from_vsw;
use vsw_openflow::group_mod::{
    resolve_bucket_command, BadGroupMod, GroupCommand, GroupDescEntry, GroupMod, GroupStatsEntry,
    OFPG_ALL,
};
use vsw_openflow::meter_mod::{
    BadMeterMod, MeterCommand, MeterConfigEntry, MeterMod, MeterStatsEntry, OFPM_ALL,
};
use vsw_openflow::port_mod::{BadPortMod, PortMod, OFPPC_PORT_DOWN};
use vsw_openflow::port_stats::PortStats;
use vsw_openflow::table_stats::TableStats;
use vsw_openflow::tlv::{BadTlv, TlvMap, TlvTableMod};
use vsw_openflow::to_vsw::{
    flow_spec, group_spec, meter_spec, modify_actions, packet_out_actions, selection,
    SelectionParts,
};
use vsw_openflow::{Bridge, FlowStatsIter, PacketOut, PortInfo, Refusal, Role, SwitchDesc};
use vsw_tunnel::metadata::MetadataOption;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

// The OpenFlow side refuses any option length but its own: the tunnels' must be it.
const _: () = assert!(MetadataOption::LEN == vsw_openflow::tlv::MAX_OPTION_LEN as usize);

use super::peers::{Peer, Peers};
use crate::protocol::Request;
use crate::switch::{BundleStage, Change, FlowChange, StagedRun, Switch, SwitchError};
use vsw_flow::FlowSyntaxError;

/// A flow-mod as the switch carries it out.
fn flow_change(fm: &FlowMod) -> Result<FlowChange, BadFlowMod> {
    let strict = matches!(fm.command, Command::DeleteStrict | Command::ModifyStrict);
    Ok(match fm.command {
        Command::Add => FlowChange::add(flow_spec(fm)?, fm.flags & OFPFF_CHECK_OVERLAP != 0)
            .map_err(flow_mod_error)?,
        Command::Delete | Command::DeleteStrict => FlowChange::Delete {
            selection: selection(&SelectionParts::of_flow_mod(fm, strict))?,
            strict,
        },
        Command::Modify | Command::ModifyStrict => FlowChange::Modify {
            actions: modify_actions(fm)?,
            written: written_instructions(fm),
            // OpenFlow has modifies ignore the output port and group.
            selection: selection(&SelectionParts {
                out_port: OFPP_ANY,
                out_group: OFPG_ANY,
                ..SelectionParts::of_flow_mod(fm, strict)
            })?,
            strict,
            reset_counts: fm.flags & OFPFF_RESET_COUNTS != 0,
            // As 1.0 says (and Open vSwitch does): a modify that selects nothing
            // adds its flow — when it is one that could be added (its actions
            // checked against its own match); the modify of the rules it selects
            // is checked rule by rule either way.
            or_add: if fm.modify_like_1_0 {
                flow_spec(&FlowMod {
                    command: Command::Add,
                    // A 1.0 modify looks in every table; its add goes to table 0.
                    table_id: if fm.table_id == 0xff { 0 } else { fm.table_id },
                    ..fm.clone()
                })
                .ok()
                .map(|spec| (Box::new(spec), fm.flags & OFPFF_CHECK_OVERLAP != 0))
            } else {
                None
            },
        },
    })
}

/// The OpenFlow error for a flow change the switch refused.
fn flow_mod_error(e: SwitchError) -> BadFlowMod {
    // The session logs the refusal (rate-limited), as OpenFlow says it.
    tracing::debug!(error = %e, "OpenFlow flow-mod refused");
    match e {
        SwitchError::Overlap => BadFlowMod::Overlap,
        SwitchError::NoSuchGroup(_) => BadFlowMod::BadOutGroup,
        SwitchError::NoSuchMeter(_) => BadFlowMod::UnknownMeter,
        SwitchError::Flow(FlowSyntaxError::ActionPrerequisite { .. }) => {
            BadFlowMod::MatchInconsistent
        }
        SwitchError::Flow(FlowSyntaxError::GotoBackwards { .. }) => BadFlowMod::BadGotoTable,
        _ => BadFlowMod::Refused,
    }
}

/// The OpenFlow error for a group change the switch refused.
fn group_mod_error(e: SwitchError) -> BadGroupMod {
    tracing::debug!(error = %e, "OpenFlow group-mod refused");
    match e {
        SwitchError::Group(GroupError::Exists(_)) => BadGroupMod::Exists,
        SwitchError::Group(GroupError::Unknown(_)) => BadGroupMod::Unknown,
        SwitchError::Group(GroupError::Loop(_)) => BadGroupMod::Loop,
        _ => BadGroupMod::BadBucket,
    }
}

/// The groups as a bundle's messages leave them, one after the other: an insert
/// or a remove of buckets works on the group as the messages before it made it.
struct BundleGroups<'a> {
    /// The switch, its groups as they were before the bundle.
    before: &'a Switch,
    /// Each group a message of the bundle made (`Some`) or deleted (`None`).
    made: HashMap<u32, Option<GroupDescEntry>>,
    /// A message deleted every group.
    all_gone: bool,
}

impl BundleGroups<'_> {
    /// What `gm` (an insert or a remove) comes to: a modify of the group.
    fn resolve(&mut self, gm: &GroupMod) -> Result<GroupMod, BadGroupMod> {
        let current = match self.made.get(&gm.group_id) {
            Some(made) => made.clone(),
            None if self.all_gone => None,
            None => self
                .before
                .group_spec(gm.group_id)
                .as_ref()
                .map(echo_group_desc),
        };
        let modify = resolve_bucket_command(current.as_ref(), gm)?;
        self.made.insert(gm.group_id, Some(modify.described()));
        Ok(modify)
    }

    /// Notes what an add, a modify or a delete leaves.
    fn note(&mut self, gm: &GroupMod) {
        match gm.command {
            GroupCommand::Delete if gm.group_id == OFPG_ALL => {
                self.made.clear();
                self.all_gone = true;
            }
            GroupCommand::Delete => {
                self.made.insert(gm.group_id, None);
            }
            GroupCommand::Add | GroupCommand::Modify => {
                self.made.insert(gm.group_id, Some(gm.described()));
            }
            GroupCommand::InsertBucket | GroupCommand::RemoveBucket => {}
        }
    }
}

/// A bundled message as the switch carries it out (`groups`: the groups as the
/// messages before it leave them; `None` when only checking the message alone).
fn bundle_change(item: &BundleItem, groups: Option<&mut BundleGroups>) -> Result<Change, Refusal> {
    Ok(match item {
        BundleItem::Flow(fm) => Change::Flow(Box::new(flow_change(fm)?)),
        BundleItem::Group(gm)
            if matches!(
                gm.command,
                GroupCommand::InsertBucket | GroupCommand::RemoveBucket
            ) =>
        {
            let Some(groups) = groups else {
                // Alone, an insert's buckets are checked as a select group's.
                group_spec(&GroupMod {
                    command: GroupCommand::Add,
                    kind: vsw_openflow::group_mod::OFPGT_SELECT,
                    ..gm.clone()
                })?;
                return Ok(Change::DelGroups(None));
            };
            Change::SetGroup {
                spec: group_spec(&groups.resolve(gm)?)?,
                modify: true,
            }
        }
        BundleItem::Group(gm) => {
            if let Some(groups) = groups {
                groups.note(gm);
            }
            match gm.command {
                GroupCommand::Add => Change::SetGroup {
                    spec: group_spec(gm)?,
                    modify: false,
                },
                GroupCommand::Modify => Change::SetGroup {
                    spec: group_spec(gm)?,
                    modify: true,
                },
                GroupCommand::Delete => {
                    Change::DelGroups((gm.group_id != OFPG_ALL).then_some(gm.group_id))
                }
                GroupCommand::InsertBucket | GroupCommand::RemoveBucket => unreachable!("above"),
            }
        }
    })
}

/// The switch as one connection's session asks it. Each request takes the switch's
/// lock for as long as it needs it and no longer (never while an answer is
/// encoded or sent), so one peer's requests never stall another's.
pub(super) struct SwitchBridge<'a> {
    pub(super) switch: &'a Mutex<Switch>,
    /// The connection asking, and the others (roles).
    pub(super) peer: &'a Arc<Peer>,
    pub(super) peers: &'a Peers,
}

impl SwitchBridge<'_> {
    fn sw(&self) -> MutexGuard<'_, Switch> {
        self.switch.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Bridge for SwitchBridge<'_> {
    fn datapath_id(&self) -> u64 {
        self.sw().datapath_id()
    }

    fn ports(&self) -> Vec<PortInfo> {
        self.sw().openflow_ports()
    }

    fn desc(&self) -> SwitchDesc {
        SwitchDesc {
            manufacturer: "vsw".into(),
            hardware: "vsw userspace datapath".into(),
            software: env!("CARGO_PKG_VERSION").into(),
            serial: "None".into(),
            datapath: self.sw().bridge_name().into(),
        }
    }

    fn flow_mod(&mut self, fm: &FlowMod) -> Result<(), BadFlowMod> {
        self.flow_mods(std::slice::from_ref(fm))
            .pop()
            .unwrap_or(Err(BadFlowMod::Refused))
    }

    /// Through the same checks and tables as `vswctl add-flow` / `mod-flows` /
    /// `del-flows`, in one change of the tables for all of them (one journal line,
    /// one revalidation: the datapath flows are revalidated before the answers, so a
    /// barrier after flow-mods means the datapath too), under one hold of the
    /// switch's lock. Deletes select by cookie, output port and group too; modifies
    /// by cookie (OpenFlow has them ignore the output port and group), keep counters
    /// unless RESET_COUNTS, and change nothing when no flow matches.
    fn flow_mods(&mut self, fms: &[FlowMod]) -> Vec<Result<(), BadFlowMod>> {
        tracing::debug!(n = fms.len(), "OpenFlow flow-mods");
        // Each flow-mod's refusal, if it could not be read; the others' changes.
        let mut refused = Vec::with_capacity(fms.len());
        let mut good = Vec::with_capacity(fms.len());
        for fm in fms {
            match flow_change(fm) {
                Ok(c) => {
                    good.push(c);
                    refused.push(None);
                }
                Err(e) => refused.push(Some(e)),
            }
        }
        let mut done = match self.sw().flow_changes(good) {
            Ok(r) => r.into_iter(),
            Err(e) => {
                tracing::info!(error = %e, "OpenFlow flow-mods refused");
                return vec![Err(BadFlowMod::Refused); fms.len()];
            }
        };
        refused
            .into_iter()
            .map(|r| {
                if let Some(e) = r {
                    return Err(e);
                }
                match done.next() {
                    Some(Ok(_)) => Ok(()),
                    Some(Err(e)) => Err(flow_mod_error(e)),
                    None => Err(BadFlowMod::Refused),
                }
            })
            .collect()
    }

    /// Through the same requests as `vswctl add-group` / `mod-group` / `del-groups`
    /// (a deleted group takes the flows that use it along).
    fn group_mod(&mut self, gm: &GroupMod) -> Result<(), BadGroupMod> {
        let done = match gm.command {
            GroupCommand::Add => self.sw().set_group(group_spec(gm)?, false),
            GroupCommand::Modify => self.sw().set_group(group_spec(gm)?, true),
            GroupCommand::Delete => self.sw().handle(Request::DelGroups {
                group_id: (gm.group_id != OFPG_ALL).then_some(gm.group_id),
            }),
            // On the group as it is, under one take of the lock.
            GroupCommand::InsertBucket | GroupCommand::RemoveBucket => {
                let mut sw = self.sw();
                let current = sw.group_spec(gm.group_id).as_ref().map(echo_group_desc);
                let modify = resolve_bucket_command(current.as_ref(), gm)?;
                sw.set_group(group_spec(&modify)?, true)
            }
        };
        done.map(|_| ()).map_err(group_mod_error)
    }

    /// Through the same checks as flow-mods and group-mods one by one, carried out
    /// in one change of the tables, all or none.
    fn commit_bundle(
        &mut self,
        items: &mut [Bundled],
        stage: Prepared,
    ) -> Result<Prepared, (Option<usize>, Refusal)> {
        // The adds staged as they came, when the stage is to be used: the messages
        // from its first add on are all adds.
        let stage = stage
            .and_then(|s| s.downcast::<BundleStage>().ok())
            .and_then(|s| Some((s.first_add()?, s)));
        tracing::debug!(
            n = items.len(),
            staged = stage.is_some(),
            "OpenFlow bundle committed"
        );
        let from = stage.as_ref().map_or(items.len(), |(from, _)| *from);
        let (before, adds) = items.split_at_mut(from);
        // One take of the lock: the groups the bundle starts from are those it
        // changes (a group is looked up only for an insert or a remove of buckets).
        let mut sw = self.sw();
        let mut groups = BundleGroups {
            before: &sw,
            made: HashMap::new(),
            all_gone: false,
        };
        // A flow-mod's change was made when it was added (it depends on nothing
        // the commit changes); a group-mod's is made now, against the groups as
        // the bundle has left them.
        let changes = before
            .iter_mut()
            .enumerate()
            .map(|(i, b)| {
                match b.prepared.take().map(|p| p.downcast::<Change>()) {
                    Some(Ok(change)) => Ok(*change),
                    _ => bundle_change(&b.item, Some(&mut groups)),
                }
                .map_err(|e| (Some(i), e))
            })
            .collect::<Result<Vec<Change>, _>>()?;
        let staged = stage.map(|(from, stage)| StagedRun {
            stage: *stage,
            from,
            one_by_one: Box::new(move || {
                adds.iter_mut()
                    .map(|b| {
                        // The stage took only messages whose change is an add,
                        // and nothing before this takes their changes.
                        let change = b.prepared.take().map(|p| p.downcast::<Change>());
                        *change
                            .and_then(Result::ok)
                            .expect("a staged add keeps its change")
                    })
                    .collect()
            }),
        });
        let leftovers = sw.commit_changes(changes, staged).map_err(|(at, e)| {
            let refusal = match at.and_then(|i| items.get(i)).map(|b| &b.item) {
                Some(BundleItem::Group(_)) => Refusal::GroupMod(group_mod_error(e)),
                Some(BundleItem::Flow(_)) => Refusal::FlowMod(flow_mod_error(e)),
                None => {
                    tracing::error!(error = %e, "OpenFlow bundle not committed: the tables could not be changed");
                    Refusal::Bundle(BadBundle::MsgFailed)
                }
            };
            (at, refusal)
        })?;
        Ok(Some(Box::new(leftovers)))
    }

    /// What a flow-mod or group-mod says alone (its table, ports, actions) is
    /// checked when it is added to a bundle.
    fn check_bundled(&mut self, item: &BundleItem) -> Result<Prepared, Refusal> {
        let mut change = bundle_change(item, None)?;
        // An add's line in the state file depends only on the rule: made now, not
        // at the commit (which then does only what depends on the tables).
        if let Change::Flow(flow) = &mut change {
            if let FlowChange::Add { rule, saved_as, .. } = &mut **flow {
                *saved_as = Some(crate::switch::record_text(rule.spec()));
            }
        }
        Ok(match item {
            BundleItem::Flow(_) => Some(Box::new(change)),
            // Made again at the commit, against the groups the bundle leaves.
            BundleItem::Group(_) => None,
        })
    }

    fn stage_bundled(&mut self, stage: &mut Prepared, prepared: &Prepared) {
        let stage = stage.get_or_insert_with(|| Box::new(BundleStage::default()));
        if let Some(stage) = stage.downcast_mut::<BundleStage>() {
            stage.take(prepared.as_ref().and_then(|p| p.downcast_ref::<Change>()));
        }
    }

    /// Through the same checks as `vswctl add-meter` / `mod-meter` / `del-meters`
    /// (a deleted meter takes the flows that use it along).
    fn set_flow_monitors(&mut self, monitors: &[vsw_openflow::flow_monitor::FlowMonitor]) {
        let ofproto = self.sw().ofproto();
        self.peers.set_monitors(self.peer, monitors, &ofproto);
    }

    /// NXT_CT_FLUSH_ZONE and NXT_CT_FLUSH: the datapath's tracker (which every
    /// bridge of the datapath shares, as Open vSwitch's does) flushes what the
    /// filter names.
    fn ct_flush(&mut self, f: &vsw_openflow::ct_flush::CtFlush) {
        let (zone, filter) = flush_filter(f);
        let gone = self.sw().dpif().conntrack().flush_matching(zone, &filter);
        tracing::debug!(?zone, gone, "OpenFlow conntrack flush");
    }

    /// `ovs-ofctl mod-port PORT up|down`: a port backed by a kernel interface is
    /// set administratively up or down (as Open vSwitch does to a netdev); the
    /// port-status that follows comes from the port watch. The other bits
    /// (`no-flood`, `no-receive`, `no-forward`, `no-packet-in`) vsw does not carry
    /// out: refused, as a configuration the port cannot take.
    fn port_mod(&mut self, pm: &PortMod) -> Result<(), BadPortMod> {
        let port = self
            .sw()
            .openflow_ports()
            .into_iter()
            .find(|p| p.port_no == pm.port_no)
            .ok_or(BadPortMod::BadPort)?;
        if port.hw_addr != pm.hw_addr {
            return Err(BadPortMod::BadHwAddr);
        }
        if pm.mask & !OFPPC_PORT_DOWN != 0 {
            return Err(BadPortMod::BadConfig);
        }
        if pm.mask & OFPPC_PORT_DOWN != 0 {
            let up = pm.config & OFPPC_PORT_DOWN == 0;
            if vsw_netdev::interface::admin_up(&port.name).is_none() {
                // A ring, vhost-user or tunnel port has no link to set.
                return Err(BadPortMod::BadConfig);
            }
            vsw_netdev::interface::set_admin_up(&port.name, up).map_err(|e| {
                tracing::info!(port = %port.name, error = %e, "OpenFlow port-mod not carried out");
                BadPortMod::BadConfig
            })?;
            tracing::info!(port = %port.name, up, "OpenFlow port-mod");
        }
        Ok(())
    }

    fn meter_mod(&mut self, mm: &MeterMod) -> Result<(), BadMeterMod> {
        let done = match mm.command {
            MeterCommand::Add => self.sw().set_meter(meter_spec(mm)?, false),
            MeterCommand::Modify => self.sw().set_meter(meter_spec(mm)?, true),
            MeterCommand::Delete => self.sw().handle(Request::DelMeters {
                meter_id: (mm.meter_id != OFPM_ALL).then_some(mm.meter_id),
            }),
        };
        done.map(|_| ()).map_err(|e| {
            tracing::debug!(error = %e, "OpenFlow meter-mod refused");
            match e {
                SwitchError::Meter(MeterError::Exists(_)) => BadMeterMod::Exists,
                SwitchError::Meter(MeterError::Unknown(_)) => BadMeterMod::Unknown,
                _ => BadMeterMod::BadBand,
            }
        })
    }

    fn meter_stats(&mut self, id: u32) -> Vec<MeterStatsEntry> {
        self.sw()
            .dump_meters()
            .into_iter()
            .filter(|m| id == OFPM_ALL || m.meter_id == id)
            .map(|m| MeterStatsEntry {
                meter_id: m.meter_id,
                flow_count: m.flow_count,
                packet_in_count: m.packet_in_count,
                byte_in_count: m.byte_in_count,
                duration_ms: m.duration_ms,
                bands: m.bands,
            })
            .collect()
    }

    /// Each meter as configured: without the burst flag its bands say burst 0.
    fn meter_config(&mut self, id: u32) -> Vec<MeterConfigEntry> {
        self.sw()
            .meter_specs()
            .iter()
            .filter(|m| id == OFPM_ALL || m.id == id)
            .map(meter_config_from_vsw)
            .collect()
    }

    fn group_stats(&mut self, id: u32) -> Vec<GroupStatsEntry> {
        self.sw()
            .dump_groups()
            .into_iter()
            .filter(|g| id == OFPG_ALL || g.group_id == id)
            .map(|g| GroupStatsEntry {
                group_id: g.group_id,
                ref_count: g.ref_count,
                packet_count: g.n_packets,
                byte_count: g.n_bytes,
                duration_ms: g.duration_ms,
                buckets: g.buckets,
            })
            .collect()
    }

    fn group_desc(&mut self, id: u32) -> Vec<GroupDescEntry> {
        self.sw()
            .group_specs()
            .iter()
            .filter(|g| id == OFPG_ALL || g.id == id)
            .map(echo_group_desc)
            .collect()
    }

    /// A receive drop is a frame vsw could not take (malformed, truncated, overrun);
    /// a transmit drop one it could not send (queue full, too big, above the MTU).
    /// How long a port has existed is not kept: duration 0.
    fn port_stats(&mut self) -> Vec<PortStats> {
        self.sw()
            .port_counters()
            .into_iter()
            .map(|(no, s)| PortStats {
                port_no: to_of_port(no),
                rx_packets: s.rx_packets,
                tx_packets: s.tx_packets,
                rx_bytes: s.rx_bytes,
                tx_bytes: s.tx_bytes,
                rx_dropped: s.rx_malformed + s.rx_truncated + s.rx_overrun,
                tx_dropped: s.tx_queue_full + s.tx_too_big + s.tx_mtu_drops,
                rx_errors: 0,
                tx_errors: s.tx_errors,
                duration_ms: 0,
            })
            .collect()
    }

    /// The flows the request selects (table, match, cookie under its mask, output
    /// port and group), with their counters up to now: the rules are picked under
    /// the switch's lock, each entry made only when the reply gets to it.
    fn flow_stats(&mut self, req: &FlowStatsRequest) -> Result<FlowStatsIter, BadFlowMod> {
        let sel = selection(&SelectionParts {
            table_id: req.table_id,
            strict_priority: None,
            cookie: req.cookie,
            cookie_mask: req.cookie_mask,
            out_port: req.out_port,
            out_group: req.out_group,
            matcher: &req.matcher,
        })?;
        let (rules, now) = self.sw().select_rules(&sel, false);
        Ok(Box::new(rules.into_iter().map(move |r| {
            // As the controller wrote it.
            let (matcher, flags, importance) = echo_match(&r.spec);
            FlowStatsEntry {
                table_id: r.spec.table,
                duration_ms: r.duration_ms(now),
                idle_ms: r.idle_age_s(now) * 1000,
                priority: r.spec.priority,
                idle_timeout: r.idle_timeout(),
                hard_timeout: r.hard_timeout(),
                flags,
                importance,
                cookie: r.spec.cookie,
                packet_count: r.stats.packets(),
                byte_count: r.stats.bytes(),
                matcher,
                instructions: echo_instructions(&r.spec),
            }
        })))
    }

    /// Each table's flows, and the packets looked up and matched there as the
    /// datapath flows' counts have been credited up to now.
    fn table_stats(&mut self, n: u8) -> Vec<TableStats> {
        self.sw()
            .table_counts(n)
            .into_iter()
            .map(|(table_id, active, lookups, matches)| TableStats {
                table_id,
                active_count: active,
                lookup_count: lookups,
                matched_count: matches,
            })
            .collect()
    }

    fn role(&self) -> Role {
        self.peer.role()
    }

    /// The bridge's one Geneve metadata field, `tun_metadata0`, as the map's one
    /// entry; it lives with the tunnels (this bridge's Geneve ports read it). The
    /// option length the map takes is the one the tunnels carry (checked below).
    fn tlv_table(&self) -> Vec<TlvMap> {
        let sw = self.sw();
        sw.dpif()
            .tunnels()
            .metadata0(sw.bridge_name())
            .map(|m| TlvMap {
                class: m.class,
                kind: m.kind,
                len: MetadataOption::LEN as u8,
                index: 0,
            })
            .into_iter()
            .collect()
    }

    /// Changes this bridge's map only. A mapping the bridge's flows use (a match
    /// on `tun_metadata0`, a set-field of it) cannot be taken away, as in Open
    /// vSwitch (NXTTMFC_INVALID_TLV_DEL).
    fn tlv_table_mod(&mut self, m: &TlvTableMod) -> Result<(), BadTlv> {
        let now = self.tlv_table();
        let next = m.apply(&now)?;
        if next.is_empty() && !now.is_empty() && self.sw().uses_tun_metadata0() {
            return Err(BadTlv::InUse);
        }
        // (`apply` took no length but the one vsw has.)
        let option = next.first().map(|e| MetadataOption {
            class: e.class,
            kind: e.kind,
        });
        let bridge = self.sw().bridge_name().to_string();
        tracing::info!(bridge, ?option, "Geneve TLV map changed");
        self.sw().dpif().tunnels().set_metadata0(&bridge, option);
        Ok(())
    }

    /// A master request makes every other master a slave; master and slave
    /// requests must not carry a generation id older than one seen.
    fn role_request(
        &mut self,
        role: Option<Role>,
        generation_id: u64,
    ) -> Result<(Role, u64), Refusal> {
        self.peers.role_request(self.peer, role, generation_id)
    }

    /// The packet's actions, read as a flow's are (the packet's own headers are what
    /// a set-field's prerequisites are checked against), translated by the slow
    /// path as if a rule of table 0 held them — with the metadata and registers
    /// its match gave it —, and queued for a PMD to send.
    fn packet_out(&mut self, po: &PacketOut) -> Result<(), Refusal> {
        let in_port = to_vsw_port(po.in_port);
        let metadata = vsw_openflow::to_vsw::match_to_vsw(&vsw_openflow::oxm::OxmMatch {
            fields: po.metadata.clone(),
        })
        .map_err(|e| Refusal::FlowMod(e.into()))?;
        self.sw().packet_out(
            in_port,
            &metadata,
            &packet_out_actions(&po.actions)?,
            &po.data,
        )
    }

    /// The packet a paused translation sent up, back from the controller: its
    /// continuation names the translation (vsw's token: the note's number and its
    /// check), its metadata the port and fields it carries on with.
    fn resume(&mut self, r: &vsw_openflow::packet::Resume) -> Result<(), Refusal> {
        let metadata = vsw_openflow::to_vsw::match_to_vsw(&r.metadata)
            .map_err(|e| Refusal::FlowMod(e.into()))?;
        let (note, check) = crate::openflow::peers::untoken(&r.continuation);
        self.sw().resume(&metadata, (note, check), &r.packet)
    }
}

/// NXT_CT_FLUSH's filter as the tracker takes it: IPv4 addresses out of their
/// mapping into IPv6.
fn flush_filter(f: &vsw_openflow::ct_flush::CtFlush) -> (Option<u16>, vsw_conntrack::FlushFilter) {
    use vsw_openflow::ct_flush::{is_v4_mapped, CtTupleFilter};
    let mut v6 = None;
    let mut addr = |a: Option<[u8; 16]>| {
        a.map(|a| {
            let mapped = is_v4_mapped(&a);
            v6 = Some(!mapped);
            let n = u128::from_be_bytes(a);
            if mapped {
                n & 0xffff_ffff
            } else {
                n
            }
        })
    };
    let mut tuple = |t: &CtTupleFilter| vsw_conntrack::TupleFilter {
        src: addr(t.src),
        dst: addr(t.dst),
        src_port: t.src_port,
        dst_port: t.dst_port,
        icmp_id: t.icmp_id,
        icmp_type: t.icmp_type,
        icmp_code: t.icmp_code,
    };
    let (orig, reply) = (tuple(&f.orig), tuple(&f.reply));
    let filter = vsw_conntrack::FlushFilter {
        proto: f.ip_proto,
        v6,
        orig,
        reply,
        mark: f.mark,
        mark_mask: f.mark_mask,
        labels: f.labels,
        labels_mask: f.labels_mask,
    };
    (f.zone, filter)
}
