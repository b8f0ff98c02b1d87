//! What a packet sent to the controller carries up with it: why it was sent, from
//! which table, the rule's cookie and how much of it the controller wants. The
//! datapath action carries only a number ([`vsw_datapath::DpAction::Controller`]);
//! the notes are kept here, each distinct one once, and read back when the packet
//! arrives on the control side.

use std::collections::HashMap;
use std::sync::Mutex;

/// Why a packet went to the controller (OpenFlow's packet-in reasons).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PuntReason {
    /// A table-miss rule (priority 0, matching everything) sent it: OFPR_NO_MATCH.
    NoMatch,
    /// Any other rule's output to CONTROLLER: OFPR_ACTION.
    Action,
    /// A packet-out's own output to CONTROLLER (OFPR_PACKET_OUT in 1.4+, ACTION
    /// before).
    PacketOut,
    /// A group bucket's output to CONTROLLER (OFPR_GROUP in 1.4+, ACTION before).
    Group,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PuntNote {
    pub reason: PuntReason,
    pub table: u8,
    /// The rule's cookie (all ones for a packet-out's, as the spec asks).
    pub cookie: u64,
    /// Bytes of the packet the controller wants (0xffff: all).
    pub max_len: u16,
    /// The OpenFlow port the packet came in by, where the datapath's in_port does
    /// not say it (a patch or a tunnel led it into this bridge; a popped tunnel
    /// packet's pass, whose receive point stands for every tunnel port of its kind).
    pub in_port: Option<u32>,
}

/// Every note handed out, by number. Notes are never taken back: a datapath flow
/// may hold a number until the revalidator retires it, and the kinds of note a
/// pipeline makes are few (one per rule cookie, table and length at most).
#[derive(Debug, Default)]
pub struct PuntNotes {
    inner: Mutex<Interned>,
}

#[derive(Debug, Default)]
struct Interned {
    by_id: Vec<PuntNote>,
    ids: HashMap<PuntNote, u32>,
}

impl PuntNotes {
    /// The number of `note` (the same one every time).
    pub fn intern(&self, note: PuntNote) -> u32 {
        let mut i = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(&id) = i.ids.get(&note) {
            return id;
        }
        let id = i.by_id.len() as u32;
        i.by_id.push(note);
        i.ids.insert(note, id);
        id
    }

    /// The note numbered `id`.
    pub fn get(&self, id: u32) -> Option<PuntNote> {
        let i = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        i.by_id.get(id as usize).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_note_keeps_its_number() {
        let n = PuntNotes::default();
        let a = PuntNote {
            reason: PuntReason::NoMatch,
            table: 0,
            cookie: 7,
            max_len: 0xffff,
            in_port: None,
        };
        let b = PuntNote {
            reason: PuntReason::Action,
            ..a
        };
        let (ia, ib) = (n.intern(a), n.intern(b));
        assert_ne!(ia, ib);
        assert_eq!(n.intern(a), ia);
        assert_eq!(n.get(ia), Some(a));
        assert_eq!(n.get(ib), Some(b));
        assert_eq!(n.get(99), None);
    }
}
