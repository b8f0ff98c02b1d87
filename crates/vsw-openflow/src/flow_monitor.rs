//! Flow monitors (Nicira's NXST_FLOW_MONITOR, `ovs-ofctl monitor br0 watch:`): a
//! connection asks to be told of the flows that match some criteria — those there
//! now, and each one added, changed or deleted from then on, whoever changed it
//! (a controller, `vswctl`, a `learn` action, a timeout).
//!
//! Each update is sent in full: Open vSwitch abbreviates a connection's own changes
//! to the xid that made them unless it asks for them in full (`NXFMF_OWN`); vsw
//! reports changes by comparing the tables before and after, which does not know
//! which connection made one, so every change goes in full — what `NXFMF_OWN` asks
//! for, and what a monitor that did not ask can read just the same.

use std::collections::BTreeMap;

use crate::error::Refusal;
use crate::flow_mod::{Action, Instruction, OFPP_ANY};
use crate::flow_stats::{FlowStatsEntry, OFPTT_ALL};
use crate::frame::{len16, Header, HEADER_LEN};
use crate::oxm::OxmMatch;
use crate::tlv::NX_VENDOR_ID;

/// The Nicira statistics subtype (1.0's vendor statistics).
pub const NXST_FLOW_MONITOR: u32 = 2;
/// NXT_FLOW_MONITOR_CANCEL: a monitor ends.
pub const NXT_FLOW_MONITOR_CANCEL: u32 = 21;

/// When to tell, and what (`nx_flow_monitor_flags`).
pub const NXFMF_INITIAL: u16 = 1 << 0;
pub const NXFMF_ADD: u16 = 1 << 1;
pub const NXFMF_DELETE: u16 = 1 << 2;
pub const NXFMF_MODIFY: u16 = 1 << 3;
pub const NXFMF_ACTIONS: u16 = 1 << 4;
pub const NXFMF_OWN: u16 = 1 << 5;
const NXFMF_ALL: u16 = (1 << 6) - 1;

/// One monitor a connection asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowMonitor {
    pub id: u32,
    pub flags: u16,
    /// Only flows that output to this port (OFPP_ANY: any flow).
    pub out_port: u32,
    /// One table, or every one (OFPTT_ALL).
    pub table_id: u8,
    /// Flows at least as specific as this: each field here is in the flow's
    /// match, with these bits.
    pub matcher: OxmMatch,
}

/// What happened to a flow (`nx_flow_update_event`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UpdateEvent {
    Added = 0,
    Deleted = 1,
    Modified = 2,
}

impl UpdateEvent {
    /// The monitor flag that asks for this event.
    fn flag(self) -> u16 {
        match self {
            UpdateEvent::Added => NXFMF_ADD,
            UpdateEvent::Deleted => NXFMF_DELETE,
            UpdateEvent::Modified => NXFMF_MODIFY,
        }
    }
}

/// One flow's update (`nx_flow_update_full`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowUpdate {
    pub event: UpdateEvent,
    /// Why a deleted flow went (OFPRR_*); 0 otherwise.
    pub reason: u16,
    pub table_id: u8,
    pub priority: u16,
    pub idle_timeout: u16,
    pub hard_timeout: u16,
    pub cookie: u64,
    pub matcher: OxmMatch,
    pub instructions: Vec<Instruction>,
}

impl FlowUpdate {
    /// A flow there now, as an initial reply reports it: added.
    pub fn added(e: FlowStatsEntry) -> FlowUpdate {
        FlowUpdate {
            event: UpdateEvent::Added,
            reason: 0,
            table_id: e.table_id,
            priority: e.priority,
            idle_timeout: e.idle_timeout,
            hard_timeout: e.hard_timeout,
            cookie: e.cookie,
            matcher: e.matcher,
            instructions: e.instructions,
        }
    }

    /// Whether one of the flow's actions outputs to `port`.
    fn outputs_to(&self, port: u32) -> bool {
        fn any(actions: &[Action], port: u32) -> bool {
            actions.iter().any(|a| match a {
                Action::Output { port: p, .. } => *p == port,
                Action::Clone(inner) => any(inner, port),
                _ => false,
            })
        }
        self.instructions.iter().any(|i| match i {
            Instruction::ApplyActions(a) | Instruction::WriteActions(a) => any(a, port),
            _ => false,
        })
    }

    /// `nx_flow_update_full`: the fixed part, the NXM match padded to 8, and the
    /// actions when asked for (never for a deleted flow).
    pub fn encode_nx(&self, with_actions: bool, out: &mut Vec<u8>) {
        let start = out.len();
        out.extend_from_slice(&[0, 0]);
        out.extend_from_slice(&(self.event as u16).to_be_bytes());
        for v in [
            self.reason,
            self.priority,
            self.idle_timeout,
            self.hard_timeout,
        ] {
            out.extend_from_slice(&v.to_be_bytes());
        }
        let match_len_at = out.len();
        out.extend_from_slice(&[0, 0, self.table_id, 0]);
        out.extend_from_slice(&self.cookie.to_be_bytes());
        let n = crate::of10::nxm::encode(&self.matcher, out);
        out[match_len_at..match_len_at + 2].copy_from_slice(&len16(n).to_be_bytes());
        out.extend(std::iter::repeat_n(0u8, n.div_ceil(8) * 8 - n));
        if with_actions && self.event != UpdateEvent::Deleted {
            crate::of10::actions::encode_instructions(&self.instructions, out);
        }
        let len = len16(out.len() - start);
        out[start..start + 2].copy_from_slice(&len.to_be_bytes());
    }
}

/// Whether `rule` is at least as specific as `criteria`: every field the criteria
/// name is in the rule's match, covering the criteria's bits, with their value.
fn loosely_matches(criteria: &OxmMatch, rule: &OxmMatch) -> bool {
    criteria.fields.iter().all(|c| {
        let Some(r) = rule.get(c.field) else {
            return false;
        };
        let all = vec![0xff; c.value.len()];
        let cmask = c.mask.as_deref().unwrap_or(&all);
        let rmask = r.mask.as_deref().unwrap_or(&all);
        r.value.len() == c.value.len()
            && cmask
                .iter()
                .zip(rmask)
                .zip(r.value.iter().zip(&c.value))
                .all(|((cm, rm), (rv, cv))| rm & cm == *cm && rv & cm == *cv)
    })
}

impl FlowMonitor {
    /// Whether this monitor asks to be told of `u`.
    pub fn wants(&self, u: &FlowUpdate, initial: bool) -> bool {
        let flag = if initial {
            NXFMF_INITIAL
        } else {
            u.event.flag()
        };
        self.flags & flag != 0
            && (self.table_id == OFPTT_ALL || self.table_id == u.table_id)
            && (self.out_port == OFPP_ANY || u.outputs_to(self.out_port))
            && loosely_matches(&self.matcher, &u.matcher)
    }
}

/// A connection's monitors, by id.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Monitors(BTreeMap<u32, FlowMonitor>);

impl From<Vec<FlowMonitor>> for Monitors {
    /// Monitors as a session listed them (ids already distinct).
    fn from(list: Vec<FlowMonitor>) -> Monitors {
        Monitors(list.into_iter().map(|m| (m.id, m)).collect())
    }
}

impl Monitors {
    /// Adds the monitors of one request, all or none: an id already in use (or
    /// twice in the request) or flags that ask for nothing known is refused.
    pub fn add(&mut self, requests: &[FlowMonitor]) -> Result<(), Refusal> {
        let mut next = self.0.clone();
        for m in requests {
            if m.flags & !NXFMF_ALL != 0 {
                return Err(Refusal::MonitorBadFlags);
            }
            if next.insert(m.id, m.clone()).is_some() {
                return Err(Refusal::MonitorExists);
            }
        }
        self.0 = next;
        Ok(())
    }

    pub fn cancel(&mut self, id: u32) -> Result<(), Refusal> {
        self.0
            .remove(&id)
            .map(|_| ())
            .ok_or(Refusal::MonitorUnknown)
    }

    pub fn list(&self) -> Vec<FlowMonitor> {
        self.0.values().cloned().collect()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether some monitor wants `u`, and whether with its actions.
    pub fn wants(&self, u: &FlowUpdate, initial: bool) -> Option<bool> {
        let mut wanted = None;
        for m in self.0.values().filter(|m| m.wants(u, initial)) {
            let actions = m.flags & NXFMF_ACTIONS != 0;
            wanted = Some(wanted.unwrap_or(false) || actions);
        }
        wanted
    }
}

/// Reads an NXST_FLOW_MONITOR request's monitors (`r` after the statistics'
/// Nicira header).
pub(crate) fn decode_nx_requests(
    r: &mut crate::reader::Reader,
) -> Result<Vec<FlowMonitor>, Refusal> {
    let mut out = Vec::new();
    while !r.is_empty() {
        let id = r.u32().ok_or(Refusal::BadLen)?;
        let flags = r.u16().ok_or(Refusal::BadLen)?;
        let out_port = crate::of10::matching::port_from_16(r.u16().ok_or(Refusal::BadLen)?);
        let match_len = usize::from(r.u16().ok_or(Refusal::BadLen)?);
        let table_id = r.u8().ok_or(Refusal::BadLen)?;
        if r.bytes(5).ok_or(Refusal::BadLen)?.iter().any(|b| *b != 0) {
            return Err(Refusal::BadLen);
        }
        let body = r.bytes(match_len).ok_or(Refusal::BadLen)?;
        r.bytes(match_len.div_ceil(8) * 8 - match_len)
            .ok_or(Refusal::BadLen)?;
        let matcher = crate::of10::nxm::decode(body).map_err(|e| Refusal::FlowMod(e.into()))?;
        out.push(FlowMonitor {
            id,
            flags,
            out_port,
            table_id,
            matcher,
        });
    }
    Ok(out)
}

/// An NXST_FLOW_MONITOR request of these monitors (what `ovs-ofctl monitor
/// watch:` sends a 1.0 switch; vsw's tests send it).
pub fn encode_nx_request(monitors: &[FlowMonitor], xid: u32) -> Vec<u8> {
    let mut out = nx_stats_head(crate::of10::OFPT10_STATS_REQUEST, xid);
    for m in monitors {
        out.extend_from_slice(&m.id.to_be_bytes());
        out.extend_from_slice(&m.flags.to_be_bytes());
        let port = crate::of10::matching::port_to_16(m.out_port).unwrap_or(0xffff);
        out.extend_from_slice(&port.to_be_bytes());
        let match_len_at = out.len();
        out.extend_from_slice(&[0, 0, m.table_id, 0, 0, 0, 0, 0]);
        let n = crate::of10::nxm::encode(&m.matcher, &mut out);
        out[match_len_at..match_len_at + 2].copy_from_slice(&len16(n).to_be_bytes());
        out.extend(std::iter::repeat_n(0u8, n.div_ceil(8) * 8 - n));
    }
    finish(out)
}

fn nx_stats_head(kind: u8, xid: u32) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    Header {
        version: crate::version::Version::V1_0.wire(),
        kind,
        length: 0,
        xid,
    }
    .write(&mut out);
    out.extend_from_slice(&0xffffu16.to_be_bytes());
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&NX_VENDOR_ID.to_be_bytes());
    out.extend_from_slice(&NXST_FLOW_MONITOR.to_be_bytes());
    out.extend_from_slice(&[0; 4]);
    out
}

fn finish(mut out: Vec<u8>) -> Vec<u8> {
    let len = len16(out.len());
    out[2..4].copy_from_slice(&len.to_be_bytes());
    out
}

/// The NXST_FLOW_MONITOR replies (xid 0, as Open vSwitch sends them) telling a 1.0
/// connection of these updates (each with whether its actions go too), as many
/// messages as they need.
pub fn nx_update_messages(updates: &[(FlowUpdate, bool)]) -> Vec<Vec<u8>> {
    let head = HEADER_LEN + 16;
    let mut messages = Vec::new();
    let mut msg = nx_stats_head(crate::of10::OFPT10_STATS_REPLY, 0);
    for (u, actions) in updates {
        let mut e = Vec::with_capacity(128);
        u.encode_nx(*actions, &mut e);
        if e.len() > usize::from(u16::MAX) - head {
            continue;
        }
        if msg.len() + e.len() > usize::from(u16::MAX) {
            messages.push(finish(std::mem::replace(
                &mut msg,
                nx_stats_head(crate::of10::OFPT10_STATS_REPLY, 0),
            )));
        }
        msg.extend(e);
    }
    if msg.len() > head {
        messages.push(finish(msg));
    }
    messages
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::field;

    fn update(event: UpdateEvent, fields: Vec<crate::oxm::OxmField>) -> FlowUpdate {
        FlowUpdate {
            event,
            reason: 0,
            table_id: 2,
            priority: 10,
            idle_timeout: 0,
            hard_timeout: 0,
            cookie: 3,
            matcher: OxmMatch { fields },
            instructions: vec![Instruction::ApplyActions(vec![Action::Output {
                port: 4,
                max_len: 0,
            }])],
        }
    }

    fn monitor(id: u32, flags: u16, fields: Vec<crate::oxm::OxmField>) -> FlowMonitor {
        FlowMonitor {
            id,
            flags,
            out_port: OFPP_ANY,
            table_id: OFPTT_ALL,
            matcher: OxmMatch { fields },
        }
    }

    #[test]
    fn a_monitor_wants_the_events_tables_ports_and_flows_it_names() {
        let tcp = vec![field(5, &[8, 0], None), field(10, &[6], None)];
        let u = update(UpdateEvent::Added, tcp.clone());
        let all = monitor(1, NXFMF_ADD, vec![]);
        assert!(all.wants(&u, false));
        assert!(!all.wants(&update(UpdateEvent::Deleted, tcp.clone()), false));
        assert!(!all.wants(&u, true), "not asked for initial flows");
        let ip = monitor(2, NXFMF_ADD, vec![field(5, &[8, 0], None)]);
        assert!(ip.wants(&u, false), "a tcp flow is an ip flow");
        let udp = monitor(3, NXFMF_ADD, vec![field(10, &[17], None)]);
        assert!(!udp.wants(&u, false));
        let wider = update(UpdateEvent::Added, vec![field(5, &[8, 0], None)]);
        let narrow = monitor(4, NXFMF_ADD, tcp.clone());
        assert!(!narrow.wants(&wider, false), "an ip flow is not a tcp flow");
        let port = FlowMonitor {
            out_port: 4,
            ..monitor(5, NXFMF_ADD, vec![])
        };
        assert!(port.wants(&u, false));
        let other_port = FlowMonitor {
            out_port: 5,
            ..port.clone()
        };
        assert!(!other_port.wants(&u, false));
        let table = FlowMonitor {
            table_id: 1,
            ..port
        };
        assert!(!table.wants(&u, false));
    }

    #[test]
    fn monitors_are_added_all_or_none_and_cancelled_by_id() {
        let mut m = Monitors::default();
        m.add(&[monitor(1, NXFMF_ADD, vec![])]).unwrap();
        assert_eq!(
            m.add(&[monitor(2, NXFMF_ADD, vec![]), monitor(1, NXFMF_ADD, vec![])]),
            Err(Refusal::MonitorExists)
        );
        assert_eq!(m.list().len(), 1, "the refused request added nothing");
        assert_eq!(
            m.add(&[monitor(3, 1 << 9, vec![])]),
            Err(Refusal::MonitorBadFlags)
        );
        assert_eq!(m.cancel(7), Err(Refusal::MonitorUnknown));
        m.cancel(1).unwrap();
        assert!(m.is_empty());
    }

    #[test]
    fn a_request_round_trips_and_updates_are_nicira_s_layout() {
        let req = vec![
            monitor(9, NXFMF_INITIAL | NXFMF_ADD | NXFMF_ACTIONS, vec![]),
            monitor(10, NXFMF_DELETE, vec![field(5, &[8, 6], None)]),
        ];
        let wire = encode_nx_request(&req, 5);
        let mut r = crate::reader::Reader::new(&wire[HEADER_LEN + 16..]);
        assert_eq!(decode_nx_requests(&mut r), Ok(req));
        let u = update(UpdateEvent::Added, vec![field(5, &[8, 0], None)]);
        let msgs = nx_update_messages(&[(u.clone(), true), (u, false)]);
        assert_eq!(msgs.len(), 1);
        let m = &msgs[0];
        assert_eq!((m[1], &m[4..8]), (17, &[0, 0, 0, 0][..]), "a reply, xid 0");
        let first = &m[HEADER_LEN + 16..];
        let len = usize::from(u16::from_be_bytes([first[0], first[1]]));
        // 24 fixed bytes, eth_type in NXM (6, padded to 8), an output (8).
        assert_eq!(len, 24 + 8 + 8);
        assert_eq!(&first[2..4], &[0, 0], "ADDED");
        assert_eq!(first[14], 2, "table 2");
        assert_eq!(first.len() - len, 24 + 8, "the second without actions");
    }
}
