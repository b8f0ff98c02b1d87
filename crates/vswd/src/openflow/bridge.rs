//! The switch as an OpenFlow session sees it (`vsw_openflow::Bridge`): flow-mods
//! and statistics through the switch's own requests, packet-outs translated by the
//! slow path and handed to a PMD.

use vsw_openflow::flow_mod::{BadFlowMod, Command, FlowMod, OFPG_ANY, OFPP_ANY};
use vsw_openflow::flow_stats::{FlowStatsEntry, FlowStatsRequest, OFPTT_ALL};
use vsw_openflow::from_vsw::{instructions_from_actions, oxm_from_match};
use vsw_openflow::ofctl_text::{add_text, delete_text, packet_out_text};
use vsw_openflow::port_stats::PortStats;
use vsw_openflow::{Bridge, PacketOut, PortInfo, Refusal, SwitchDesc};

use super::BRIDGE_NAME;
use crate::protocol::Request;
use crate::switch::Switch;

/// OFPFF_CHECK_OVERLAP: not checked yet, so refused rather than ignored.
const OFPFF_CHECK_OVERLAP: u16 = 1 << 1;

pub(super) struct SwitchBridge<'a>(pub(super) &'a mut Switch);

impl Bridge for SwitchBridge<'_> {
    fn datapath_id(&self) -> u64 {
        self.0.datapath_id()
    }

    fn ports(&self) -> Vec<PortInfo> {
        self.0.openflow_ports()
    }

    fn desc(&self) -> SwitchDesc {
        SwitchDesc {
            manufacturer: "vsw".into(),
            hardware: "vsw userspace datapath".into(),
            software: env!("CARGO_PKG_VERSION").into(),
            serial: "None".into(),
            datapath: BRIDGE_NAME.into(),
        }
    }

    /// Through the same requests as `vswctl add-flow` / `del-flows`: the same
    /// tables, the same checks, and the datapath flows revalidated before the
    /// answer — so a barrier after a flow-mod means the datapath too.
    fn flow_mod(&mut self, fm: &FlowMod) -> Result<(), BadFlowMod> {
        let deleting = matches!(fm.command, Command::Delete | Command::DeleteStrict);
        // Filters and flags vsw does not apply yet: refused, never ignored.
        if (deleting
            && (fm.out_port != OFPP_ANY || fm.out_group != OFPG_ANY || fm.cookie_mask != 0))
            || fm.flags & OFPFF_CHECK_OVERLAP != 0
        {
            return Err(BadFlowMod::UnsupportedFilter);
        }
        let req = match fm.command {
            Command::Add => Request::AddFlow {
                flow: add_text(fm)?,
            },
            Command::Delete | Command::DeleteStrict => {
                let strict = fm.command == Command::DeleteStrict;
                let sel = delete_text(fm, strict)?;
                Request::DelFlows {
                    matching: (!sel.is_empty()).then_some(sel),
                    strict,
                }
            }
            Command::Modify | Command::ModifyStrict => return Err(BadFlowMod::BadCommand),
        };
        self.0.handle(req).map(|_| ()).map_err(|e| {
            tracing::info!(error = %e, "OpenFlow flow-mod refused");
            BadFlowMod::Refused
        })
    }

    /// A receive drop is a frame vsw could not take (malformed, truncated, overrun);
    /// a transmit drop one it could not send (queue full, too big, above the MTU).
    /// How long a port has existed is not kept: duration 0.
    fn port_stats(&mut self) -> Vec<PortStats> {
        self.0
            .port_counters()
            .into_iter()
            .map(|(no, s)| PortStats {
                port_no: no,
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

    /// Every flow of the table asked for (or all), with its counters up to now.
    /// Selecting by match, out_port, out_group or cookie is not done yet: refused.
    fn flow_stats(&mut self, req: &FlowStatsRequest) -> Result<Vec<FlowStatsEntry>, BadFlowMod> {
        if req.out_port != OFPP_ANY
            || req.out_group != OFPG_ANY
            || req.cookie_mask != 0
            || !req.matcher.fields.is_empty()
        {
            return Err(BadFlowMod::UnsupportedFilter);
        }
        let (rules, now) = self.0.rules_counted();
        Ok(rules
            .iter()
            .filter(|r| req.table_id == OFPTT_ALL || r.spec.table == req.table_id)
            .map(|r| FlowStatsEntry {
                table_id: r.spec.table,
                duration_ms: r.duration_ms(now),
                priority: r.spec.priority,
                idle_timeout: r.spec.idle_timeout,
                hard_timeout: r.spec.hard_timeout,
                flags: 0,
                importance: 0,
                cookie: r.spec.cookie,
                packet_count: r.stats.packets(),
                byte_count: r.stats.bytes(),
                matcher: oxm_from_match(&r.spec.matcher),
                instructions: instructions_from_actions(&r.spec.actions),
            })
            .collect())
    }

    /// The packet's actions, read as a flow's are (the packet's own headers are what
    /// a set-field's prerequisites are checked against), translated by the slow
    /// path as if a rule of table 0 held them, and queued for a PMD to send.
    fn packet_out(&mut self, po: &PacketOut) -> Result<(), Refusal> {
        self.0
            .packet_out(po.in_port, &packet_out_text(&po.actions)?, &po.data)
    }
}
