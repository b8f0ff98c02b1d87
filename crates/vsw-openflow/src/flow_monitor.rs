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

use crate::bundle::ONF_VENDOR_ID;
use crate::error::Refusal;
use crate::flow_mod::{Action, Instruction, OFPP_ANY};
use crate::flow_stats::{FlowStatsEntry, OFPTT_ALL};
use crate::frame::{len16, Header};
use crate::oxm::OxmMatch;
use crate::reader::Reader;
use crate::tlv::NX_VENDOR_ID;
use crate::version::Version;

/// The Nicira statistics subtype (1.0's vendor statistics).
pub const NXST_FLOW_MONITOR: u32 = 2;
/// NXT_FLOW_MONITOR_CANCEL: a monitor ends.
pub const NXT_FLOW_MONITOR_CANCEL: u32 = 21;
/// ONF's 1.3 experimenter multipart and its cancel message (both 1870).
pub const ONF_FLOW_MONITOR: u32 = 1870;
/// OpenFlow 1.4's multipart type.
pub const OFPMP_FLOW_MONITOR: u16 = 16;

/// When to tell, and what (`nx_flow_monitor_flags`).
pub const NXFMF_INITIAL: u16 = 1 << 0;
pub const NXFMF_ADD: u16 = 1 << 1;
pub const NXFMF_DELETE: u16 = 1 << 2;
pub const NXFMF_MODIFY: u16 = 1 << 3;
pub const NXFMF_ACTIONS: u16 = 1 << 4;
pub const NXFMF_OWN: u16 = 1 << 5;
const NXFMF_ALL: u16 = (1 << 6) - 1;

/// What a request does with its monitor (1.4's commands; Nicira's and ONF's
/// requests only add).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MonitorCommand {
    Add = 0,
    Modify = 1,
    Delete = 2,
}

/// One monitor a connection asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowMonitor {
    pub id: u32,
    pub command: MonitorCommand,
    /// `NXFMF_*`; 1.4's `OFPFMF_*` are the same bits (its NO_ABBREV is Nicira's
    /// OWN).
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

    /// The update as `version` lays it out: Nicira's `nx_flow_update_full` with an
    /// NXM match and 1.0 actions (1.0), with an OXM match and instructions (1.3,
    /// ONF's), or 1.4's `ofp_flow_update_full` (whose flows there at the start are
    /// INITIAL, not ADDED). Actions only when asked for, never for a deleted flow.
    pub fn encode(&self, version: Version, with_actions: bool, initial: bool, out: &mut Vec<u8>) {
        let start = out.len();
        let actions = with_actions && self.event != UpdateEvent::Deleted;
        if version >= Version::V1_4 {
            let event: u16 = match (initial, self.event) {
                (true, _) => 0,
                (false, UpdateEvent::Added) => 1,
                (false, UpdateEvent::Deleted) => 2,
                (false, UpdateEvent::Modified) => 3,
            };
            out.extend_from_slice(&[0, 0]);
            out.extend_from_slice(&event.to_be_bytes());
            out.extend_from_slice(&[self.table_id, self.reason as u8]);
            for v in [self.idle_timeout, self.hard_timeout, self.priority] {
                out.extend_from_slice(&v.to_be_bytes());
            }
            out.extend_from_slice(&[0; 4]);
            out.extend_from_slice(&self.cookie.to_be_bytes());
            self.matcher.encode(out);
            if actions {
                crate::as_read::encode_instructions(version, &self.instructions, out);
            }
        } else {
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
            let n = if version == Version::V1_0 {
                let n = crate::of10::nxm::encode(&self.matcher, out);
                out.extend(std::iter::repeat_n(0u8, n.div_ceil(8) * 8 - n));
                n
            } else {
                // ONF's match_len: the match's own length (header and fields,
                // without the padding), as Open vSwitch writes it.
                let at = out.len();
                self.matcher.encode(out);
                usize::from(u16::from_be_bytes([out[at + 2], out[at + 3]]))
            };
            out[match_len_at..match_len_at + 2].copy_from_slice(&len16(n).to_be_bytes());
            if actions {
                if version == Version::V1_0 {
                    crate::of10::actions::encode_instructions(&self.instructions, out);
                } else {
                    crate::as_read::encode_instructions(version, &self.instructions, out);
                }
            }
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
    /// Carries out the monitors of one request, all or none: an add whose id is
    /// in use (or twice in the request), a modify or delete of an id that is none,
    /// or flags that ask for no change or for what vsw does not know are refused.
    pub fn apply(&mut self, requests: &[FlowMonitor]) -> Result<(), Refusal> {
        let mut next = self.0.clone();
        for m in requests {
            if m.command == MonitorCommand::Delete {
                next.remove(&m.id).ok_or(Refusal::MonitorUnknown)?;
                continue;
            }
            if m.flags & !NXFMF_ALL != 0 || m.flags & (NXFMF_ADD | NXFMF_DELETE | NXFMF_MODIFY) == 0
            {
                return Err(Refusal::MonitorBadFlags);
            }
            let was = next.insert(m.id, m.clone());
            match (m.command, was) {
                (MonitorCommand::Add, Some(_)) => return Err(Refusal::MonitorExists),
                (MonitorCommand::Modify, None) => return Err(Refusal::MonitorUnknown),
                _ => {}
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
pub(crate) fn decode_nx_requests(r: &mut Reader) -> Result<Vec<FlowMonitor>, Refusal> {
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
            command: MonitorCommand::Add,
            flags,
            out_port,
            table_id,
            matcher,
        });
    }
    Ok(out)
}

/// Reads ONF's 1.3 flow monitor requests (`r` after the experimenter multipart
/// header): each with an OXM match.
pub(crate) fn decode_onf_requests(r: &mut Reader) -> Result<Vec<FlowMonitor>, Refusal> {
    let mut out = Vec::new();
    while !r.is_empty() {
        let id = r.u32().ok_or(Refusal::BadLen)?;
        let flags = r.u16().ok_or(Refusal::BadLen)?;
        r.u16().ok_or(Refusal::BadLen)?; // match_len: the match says its own
        let out_port = r.u32().ok_or(Refusal::BadLen)?;
        let table_id = r.u8().ok_or(Refusal::BadLen)?;
        if r.bytes(3).ok_or(Refusal::BadLen)?.iter().any(|b| *b != 0) {
            return Err(Refusal::BadLen);
        }
        let matcher = OxmMatch::decode(r).map_err(|e| Refusal::FlowMod(e.into()))?;
        out.push(FlowMonitor {
            id,
            command: MonitorCommand::Add,
            flags,
            out_port,
            table_id,
            matcher,
        });
    }
    Ok(out)
}

/// 1.4's OFPFMF_NO_ABBREV and OFPFMF_ONLY_OWN (what `ovs-ofctl` calls `own`, and
/// sends for Nicira's OWN).
const OFPFMF_NO_ABBREV: u16 = 1 << 5;
const OFPFMF_ONLY_OWN: u16 = 1 << 6;

/// 1.4's flags as Nicira's: the first five bits are the same; either of 1.4's
/// "own" bits is Nicira's OWN (every change in full, which is all vsw sends).
fn flags_from_of14(flags: u16) -> u16 {
    let own = flags & (OFPFMF_NO_ABBREV | OFPFMF_ONLY_OWN) != 0;
    (flags & !(OFPFMF_NO_ABBREV | OFPFMF_ONLY_OWN)) | if own { NXFMF_OWN } else { 0 }
}

fn flags_to_of14(flags: u16) -> u16 {
    let own = flags & NXFMF_OWN != 0;
    (flags & !NXFMF_OWN) | if own { OFPFMF_ONLY_OWN } else { 0 }
}

/// Reads 1.4's OFPMP_FLOW_MONITOR requests (`r` after the multipart header).
pub(crate) fn decode_of14_requests(r: &mut Reader) -> Result<Vec<FlowMonitor>, Refusal> {
    let mut out = Vec::new();
    while !r.is_empty() {
        let id = r.u32().ok_or(Refusal::BadLen)?;
        let out_port = r.u32().ok_or(Refusal::BadLen)?;
        r.u32().ok_or(Refusal::BadLen)?; // out_group: not a criterion vsw keeps
        let flags = flags_from_of14(r.u16().ok_or(Refusal::BadLen)?);
        let table_id = r.u8().ok_or(Refusal::BadLen)?;
        let command = match r.u8().ok_or(Refusal::BadLen)? {
            0 => MonitorCommand::Add,
            1 => MonitorCommand::Modify,
            2 => MonitorCommand::Delete,
            _ => return Err(Refusal::MonitorBadCommand),
        };
        let matcher = OxmMatch::decode(r).map_err(|e| Refusal::FlowMod(e.into()))?;
        out.push(FlowMonitor {
            id,
            command,
            flags,
            out_port,
            table_id,
            matcher,
        });
    }
    Ok(out)
}

/// A flow monitor request's body in `version` (after the message header): what
/// `ovs-ofctl monitor watch:` sends; vsw's tests send it.
pub fn encode_request_body(version: Version, monitors: &[FlowMonitor], out: &mut Vec<u8>) {
    out.extend_from_slice(&stats_head(version));
    for m in monitors {
        if version >= Version::V1_4 {
            out.extend_from_slice(&m.id.to_be_bytes());
            out.extend_from_slice(&m.out_port.to_be_bytes());
            out.extend_from_slice(&crate::flow_mod::OFPG_ANY.to_be_bytes());
            out.extend_from_slice(&flags_to_of14(m.flags).to_be_bytes());
            out.extend_from_slice(&[m.table_id, m.command as u8]);
            m.matcher.encode(out);
        } else if version == Version::V1_3 {
            out.extend_from_slice(&m.id.to_be_bytes());
            out.extend_from_slice(&m.flags.to_be_bytes());
            let at = out.len();
            out.extend_from_slice(&[0, 0]);
            out.extend_from_slice(&m.out_port.to_be_bytes());
            out.extend_from_slice(&[m.table_id, 0, 0, 0]);
            let start = out.len();
            m.matcher.encode(out);
            // The match's own length, without its padding.
            let n = [out[start + 2], out[start + 3]];
            out[at..at + 2].copy_from_slice(&n);
        } else {
            out.extend_from_slice(&m.id.to_be_bytes());
            out.extend_from_slice(&m.flags.to_be_bytes());
            let port = crate::of10::matching::port_to_16(m.out_port).unwrap_or(0xffff);
            out.extend_from_slice(&port.to_be_bytes());
            let match_len_at = out.len();
            out.extend_from_slice(&[0, 0, m.table_id, 0, 0, 0, 0, 0]);
            let n = crate::of10::nxm::encode(&m.matcher, out);
            out[match_len_at..match_len_at + 2].copy_from_slice(&len16(n).to_be_bytes());
            out.extend(std::iter::repeat_n(0u8, n.div_ceil(8) * 8 - n));
        }
    }
}

/// The head of a flow monitor request's or reply's body, up to its entries: the
/// statistics or multipart type and flags (0), then Nicira's (1.0) or ONF's (1.3)
/// experimenter header.
fn stats_head(version: Version) -> Vec<u8> {
    let mut out = Vec::with_capacity(16);
    if version >= Version::V1_4 {
        out.extend_from_slice(&OFPMP_FLOW_MONITOR.to_be_bytes());
        out.extend_from_slice(&[0; 6]);
    } else if version == Version::V1_3 {
        out.extend_from_slice(&0xffffu16.to_be_bytes());
        out.extend_from_slice(&[0; 6]);
        out.extend_from_slice(&ONF_VENDOR_ID.to_be_bytes());
        out.extend_from_slice(&ONF_FLOW_MONITOR.to_be_bytes());
    } else {
        out.extend_from_slice(&0xffffu16.to_be_bytes());
        out.extend_from_slice(&[0, 0]);
        out.extend_from_slice(&NX_VENDOR_ID.to_be_bytes());
        out.extend_from_slice(&NXST_FLOW_MONITOR.to_be_bytes());
        out.extend_from_slice(&[0; 4]);
    }
    out
}

/// A reply's type and what its body holds between the flags and the entries (for
/// a session's streamed reply).
pub(crate) fn reply_head(version: Version) -> (u16, Vec<u8>) {
    let head = stats_head(version);
    (u16::from_be_bytes([head[0], head[1]]), head[4..].to_vec())
}

fn message(version: Version, kind: u8, xid: u32) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    Header {
        version: version.wire(),
        kind,
        length: 0,
        xid,
    }
    .write(&mut out);
    out
}

fn finish(mut out: Vec<u8>) -> Vec<u8> {
    let len = len16(out.len());
    out[2..4].copy_from_slice(&len.to_be_bytes());
    out
}

fn reply_kind(version: Version) -> u8 {
    if version == Version::V1_0 {
        crate::multipart::OFPT10_STATS_REPLY
    } else {
        crate::multipart::OFPT_MULTIPART_REPLY
    }
}

/// A whole flow monitor request message (for tests and tools).
pub fn encode_request(version: Version, monitors: &[FlowMonitor], xid: u32) -> Vec<u8> {
    let kind = if version == Version::V1_0 {
        crate::multipart::OFPT10_STATS_REQUEST
    } else {
        crate::multipart::OFPT_MULTIPART_REQUEST
    };
    let mut out = message(version, kind, xid);
    encode_request_body(version, monitors, &mut out);
    finish(out)
}

/// The flow monitor replies (xid 0, as Open vSwitch sends them) telling a
/// connection of `version` of these updates (each with whether its actions go
/// too), as many messages as they need.
pub fn update_messages(version: Version, updates: &[(FlowUpdate, bool)]) -> Vec<Vec<u8>> {
    let start = || {
        let mut m = message(version, reply_kind(version), 0);
        m.extend(stats_head(version));
        m
    };
    let head = start().len();
    let mut messages = Vec::new();
    let mut msg = start();
    for (u, actions) in updates {
        let mut e = Vec::with_capacity(128);
        u.encode(version, *actions, false, &mut e);
        if e.len() > usize::from(u16::MAX) - head {
            continue;
        }
        if msg.len() + e.len() > usize::from(u16::MAX) {
            messages.push(finish(std::mem::replace(&mut msg, start())));
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
            command: MonitorCommand::Add,
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
        m.apply(&[monitor(1, NXFMF_ADD, vec![])]).unwrap();
        assert_eq!(
            m.apply(&[monitor(2, NXFMF_ADD, vec![]), monitor(1, NXFMF_ADD, vec![])]),
            Err(Refusal::MonitorExists)
        );
        assert_eq!(m.list().len(), 1, "the refused request added nothing");
        assert_eq!(
            m.apply(&[monitor(3, NXFMF_ADD | 1 << 9, vec![])]),
            Err(Refusal::MonitorBadFlags)
        );
        assert_eq!(
            m.apply(&[monitor(3, NXFMF_INITIAL, vec![])]),
            Err(Refusal::MonitorBadFlags),
            "no change asked for"
        );
        // 1.4's commands: modify and delete need the monitor.
        let modify = FlowMonitor {
            command: MonitorCommand::Modify,
            ..monitor(4, NXFMF_DELETE, vec![])
        };
        assert_eq!(
            m.apply(std::slice::from_ref(&modify)),
            Err(Refusal::MonitorUnknown)
        );
        m.apply(&[FlowMonitor { id: 1, ..modify }]).unwrap();
        assert_eq!(m.list()[0].flags, NXFMF_DELETE);
        let delete = FlowMonitor {
            command: MonitorCommand::Delete,
            ..monitor(1, 0, vec![])
        };
        m.apply(std::slice::from_ref(&delete)).unwrap();
        assert!(m.is_empty());
        assert_eq!(m.apply(&[delete]), Err(Refusal::MonitorUnknown));
        assert_eq!(m.cancel(7), Err(Refusal::MonitorUnknown));
    }

    #[test]
    fn requests_round_trip_in_each_version() {
        let req = vec![
            monitor(9, NXFMF_INITIAL | NXFMF_ADD | NXFMF_ACTIONS, vec![]),
            monitor(10, NXFMF_DELETE, vec![field(5, &[8, 6], None)]),
        ];
        for v in [Version::V1_0, Version::V1_3, Version::V1_4, Version::V1_5] {
            let mut body = Vec::new();
            encode_request_body(v, &req, &mut body);
            let head = stats_head(v).len();
            let mut r = Reader::new(&body[head..]);
            let got = match v {
                Version::V1_0 => decode_nx_requests(&mut r),
                Version::V1_3 => decode_onf_requests(&mut r),
                _ => decode_of14_requests(&mut r),
            };
            assert_eq!(got, Ok(req.clone()), "{v}");
        }
    }

    #[test]
    fn updates_have_each_version_s_layout() {
        let u = update(UpdateEvent::Added, vec![field(5, &[8, 0], None)]);
        let first = |v: Version, with_actions: bool| {
            let msgs = update_messages(v, &[(u.clone(), with_actions)]);
            assert_eq!(msgs.len(), 1);
            let m = &msgs[0];
            assert_eq!(&m[4..8], &[0, 0, 0, 0], "{v}: xid 0");
            m[8 + stats_head(v).len()..].to_vec()
        };
        // 1.0: 24 fixed bytes, eth_type in NXM (6, padded to 8), an output (8).
        let nx = first(Version::V1_0, true);
        assert_eq!(nx.len(), 24 + 8 + 8);
        assert_eq!((&nx[2..4], nx[14]), (&[0, 0][..], 2), "ADDED, table 2");
        assert_eq!(first(Version::V1_0, false).len(), 24 + 8);
        // 1.3: the same head, an OXM match (4 + 6, padded to 16), an
        // apply-actions of one output (8 + 16).
        assert_eq!(first(Version::V1_3, true).len(), 24 + 16 + 24);
        // 1.4: its own head; ADDED is 1.
        let of14 = first(Version::V1_4, true);
        assert_eq!(of14.len(), 24 + 16 + 24);
        assert_eq!((&of14[2..4], of14[4]), (&[0, 1][..], 2));
        let mut initial = Vec::new();
        u.encode(Version::V1_4, false, true, &mut initial);
        assert_eq!(&initial[2..4], &[0, 0], "INITIAL");
    }
}
