//! What a packet sent to the controller carries up with it: why it was sent, from
//! which table, the rule's cookie, how much of it the controller wants, and what
//! only translation knew of it (metadata, registers, `pkt_mark`: the packet-in's
//! match says them). The datapath action carries only a number
//! ([`vsw_datapath::DpAction::Controller`]); the notes are kept here, each distinct
//! one once, and read back when the packet arrives on the control side.
//!
//! A note lives while a datapath flow holds it (its attribution keeps a reference,
//! as with frozen translations) or for [`GRACE_MS`] after a translation last asked
//! for it (a packet on its way up still names it); then its number is free for
//! another. Notes differ by the registers a rule set gives packets, so they come
//! and go with the flows.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use vsw_flow::{Action, PipelineFields, Rule};

/// How long a note no datapath flow holds is kept after a translation last asked
/// for it.
pub const GRACE_MS: u64 = 10_000;

/// Bits of a packet's note that number it within its bridge (in the datapath's
/// action); the bits above name the bridge (`view.rs`).
pub(crate) const NOTE_BITS: u32 = 20;

/// Notes a bridge keeps at most: as many as the datapath can number.
pub const MAX_NOTES: usize = 1 << NOTE_BITS;

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

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
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
    /// OpenFlow's metadata where the packet was sent up.
    pub metadata: u64,
    /// The registers, `pkt_mark` and `conj_id` there.
    pub pipeline: PipelineFields,
    /// The controller action's own bytes (`controller(userdata=…)`).
    pub userdata: Option<Arc<[u8]>>,
    /// What the translation had left when `controller(pause)` stopped it: the
    /// controller resumes it (NXT_RESUME) by the note's number.
    pub continuation: Option<Arc<Continuation>>,
}

impl PuntNote {
    /// What a controller's NXT_RESUME must give back besides the note's number for
    /// this continuation: its hash (a number used again for another note is not
    /// taken for this one's).
    pub fn continuation_check(&self) -> Option<u64> {
        use std::hash::{Hash, Hasher};
        let c = self.continuation.as_ref()?;
        // SipHash with fixed keys: the same continuation, the same check, across
        // translations and revalidations.
        let mut h = std::collections::hash_map::DefaultHasher::new();
        c.hash(&mut h);
        Some(h.finish())
    }
}

/// A rule, compared and hashed as the rule it is (by address).
#[derive(Clone, Debug)]
pub struct RuleRef(pub Arc<Rule>);

impl PartialEq for RuleRef {
    fn eq(&self, other: &RuleRef) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for RuleRef {}

impl std::hash::Hash for RuleRef {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        // The rule's match, priority and table, not its address: a check must not
        // change from one run of vswd to the next (it is the same rule's).
        let s = &self.0.spec;
        (s.table, s.priority, s.matcher, s.cookie, self.0.seq()).hash(h);
    }
}

/// What a paused translation had left to do (`controller(pause)`): the rest of each
/// action list it was in, innermost first, the action set, the stack.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Continuation {
    pub frames: Vec<Frame>,
    pub action_set: Vec<(Action, RuleRef, u8)>,
    pub stack: Vec<u128>,
}

/// The rest of one action list: of `rule` (none: a packet-out's) in `table`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Frame {
    pub table: u8,
    pub rule: Option<RuleRef>,
    pub actions: Vec<Action>,
}

/// One kept note.
#[derive(Debug)]
struct Kept {
    note: Arc<PuntNote>,
    /// When a translation last asked for it.
    asked_ms: u64,
    /// When a sweep first found no datapath flow holding it (a packet that flow
    /// sent up may still be on its way).
    unheld_since: Option<u64>,
}

/// Every note handed out, by number.
#[derive(Debug, Default)]
pub struct PuntNotes {
    inner: Mutex<Interned>,
}

#[derive(Debug, Default)]
struct Interned {
    by_id: Vec<Option<Kept>>,
    ids: HashMap<Arc<PuntNote>, u32>,
    /// Numbers of notes let go, for new ones.
    free: Vec<u32>,
}

/// References the table itself holds to a kept note (its two maps).
const TABLE_REFS: usize = 2;

impl PuntNotes {
    /// The number of `note` (the same one while it is kept), and the note to hold
    /// while a datapath flow needs it; `None` when [`MAX_NOTES`] are kept.
    pub fn intern(&self, note: PuntNote, now_ms: u64) -> Option<(u32, Arc<PuntNote>)> {
        let mut i = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(&id) = i.ids.get(&note) {
            let kept = i.by_id[id as usize]
                .as_mut()
                .expect("a numbered note is kept");
            kept.asked_ms = kept.asked_ms.max(now_ms);
            return Some((id, kept.note.clone()));
        }
        if i.free.is_empty() && i.by_id.len() >= MAX_NOTES {
            return None;
        }
        let note = Arc::new(note);
        let kept = Kept {
            note: note.clone(),
            asked_ms: now_ms,
            unheld_since: None,
        };
        let id = match i.free.pop() {
            Some(id) => {
                i.by_id[id as usize] = Some(kept);
                id
            }
            None => {
                i.by_id.push(Some(kept));
                (i.by_id.len() - 1) as u32
            }
        };
        i.ids.insert(note.clone(), id);
        Some((id, note))
    }

    /// The note numbered `id`.
    pub fn get(&self, id: u32) -> Option<PuntNote> {
        let i = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        i.by_id
            .get(id as usize)
            .and_then(|k| k.as_ref())
            .map(|k| (*k.note).clone())
    }

    /// Lets go of every note nothing outside this table has held for [`GRACE_MS`]
    /// (by the sweeps' count) and no translation asked for in as long; returns how
    /// many went.
    pub fn sweep(&self, now_ms: u64) -> usize {
        let mut i = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let Interned { by_id, ids, free } = &mut *i;
        let mut gone = 0;
        for (id, slot) in by_id.iter_mut().enumerate() {
            let idle = slot.as_mut().is_some_and(|k| {
                if Arc::strong_count(&k.note) > TABLE_REFS {
                    k.unheld_since = None;
                    return false;
                }
                let since = *k.unheld_since.get_or_insert(now_ms);
                now_ms.saturating_sub(since.max(k.asked_ms)) >= GRACE_MS
            });
            if idle {
                if let Some(k) = slot.take() {
                    ids.remove(&k.note);
                }
                free.push(id as u32);
                gone += 1;
            }
        }
        gone
    }

    /// Notes kept.
    pub fn len(&self) -> usize {
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .ids
            .len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn note(reason: PuntReason, reg0: u32) -> PuntNote {
        let mut pipeline = PipelineFields::default();
        pipeline.regs[0] = reg0;
        PuntNote {
            reason,
            table: 0,
            cookie: 7,
            max_len: 0xffff,
            in_port: None,
            metadata: 0,
            pipeline,
            userdata: None,
            continuation: None,
        }
    }

    #[test]
    fn a_note_keeps_its_number_while_held_and_its_number_serves_again_after() {
        let n = PuntNotes::default();
        let a = note(PuntReason::NoMatch, 0);
        let b = note(PuntReason::Action, 5);
        let (ia, held) = n.intern(a.clone(), 0).unwrap();
        let (ib, _) = n.intern(b.clone(), 0).unwrap();
        assert_ne!(ia, ib);
        assert_eq!(n.intern(a.clone(), 1).unwrap().0, ia);
        assert_eq!(n.get(ia), Some(a.clone()));
        assert_eq!(n.get(ib), Some(b));
        assert_eq!(n.get(99), None);
        // Unheld from the first sweep on: kept for the grace after it, then only
        // the one a flow holds stays.
        assert_eq!(n.sweep(1), 0);
        assert_eq!(n.sweep(GRACE_MS), 0);
        assert_eq!(n.sweep(GRACE_MS + 1), 1);
        assert_eq!((n.get(ia), n.get(ib)), (Some(a), None));
        let c = note(PuntReason::Action, 6);
        assert_eq!(
            n.intern(c, GRACE_MS + 2).unwrap().0,
            ib,
            "a free number is used again"
        );
        drop(held);
        assert_eq!(
            n.sweep(3 * GRACE_MS),
            0,
            "a packet of its last flow may be on its way"
        );
        assert_eq!(n.sweep(4 * GRACE_MS), 2);
        assert!(n.is_empty());
    }
}
