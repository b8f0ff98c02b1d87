//! Frozen translations (Open vSwitch's `recirc_id` nodes): where a translation
//! stopped so that the datapath looks the packet up again, kept under a number the
//! datapath carries as the packet's `recirc_id` on its next pass. The next pass's
//! miss resumes the translation from here: same bridge, same view of what the packet
//! carries only in translation (input port in the bridge's numbers, metadata; no
//! tunnel past a patch), same budget of copies.
//!
//! A state is kept once: the same freeze point reached again gets its number back,
//! so a datapath flow of the next pass serves every flow that froze there. Numbers
//! are never used twice (a flow that outlives its state finds none and drops), and
//! the table is bounded: when it is full, translation does without recirculation.
//!
//! A state lives while a datapath flow needs it (as Open vSwitch's ukeys hold their
//! recirculation ids): the translation that froze or resumed it hands the flow's
//! attribution a reference, and a revalidator pass ([`FrozenStates::sweep`]) lets go
//! of those no flow refers to any more, once [`GRACE_MS`] passed since they were last
//! frozen (a packet between its two passes, or a flow on its way into the cache).

use std::collections::HashMap;
use std::sync::Arc;

use crate::slot::BridgeSlot;

/// Frozen states one backer keeps at most.
pub const MAX_FROZEN: usize = 1 << 16;

/// How long a state no datapath flow refers to is kept after it was last frozen.
pub const GRACE_MS: u64 = 10_000;

/// What the resumed translation does first.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Resume {
    /// Chooses select group `group`'s bucket by the packet's `dp_hash` and runs it
    /// (the group was reached in `table`).
    SelectBucket { group: u32, table: u8 },
    /// Runs what the translation had left when it stopped to see the packet
    /// behind the MPLS labels it popped (the action lists' rests, innermost first,
    /// the action set, the stack), as a resume after a pause does.
    Continue(Arc<crate::punt_notes::Continuation>),
}

/// Where a translation stopped.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Frozen {
    pub slot: BridgeSlot,
    /// The input port in that bridge's numbers (a patch port's peer, after a
    /// crossing).
    pub in_port: u32,
    pub metadata: u64,
    /// The registers and the other fields only the pipeline writes.
    pub pipeline: vsw_flow::PipelineFields,
    /// What `push` left on the stack.
    pub stack: Vec<u128>,
    /// Copies of the packet the datapath holds at the recirculation.
    pub saves: usize,
    /// The bridges the translation went through before this one.
    pub path: Vec<BridgeSlot>,
    /// The cookie of the rule it froze under (`u64::MAX`: none), for the packets
    /// the resumed translation sends up.
    pub cookie: u64,
    pub resume: Resume,
}

impl Frozen {
    /// `key` (a packet's next pass) as the translation saw the packet: the fields
    /// only translation knows put back. The tunnel is the packet's own (the
    /// datapath carries it, as the actions before left it), or none past a patch
    /// (a crossing leaves it behind).
    pub fn thaw(&self, key: &vsw_packet::FlowKey) -> vsw_flow::MatchKey {
        let mut k = vsw_flow::MatchKey {
            packet: vsw_packet::FlowKey {
                in_port: self.in_port,
                metadata: self.metadata,
                ..*key
            },
            pipeline: self.pipeline,
        };
        if !self.path.is_empty() {
            k.tun_id = 0;
            k.tun_src = 0;
            k.tun_dst = 0;
            k.tun_metadata0 = 0;
            k.tun_flags = 0;
        }
        k
    }
}

/// One kept state.
struct Kept {
    state: Arc<Frozen>,
    /// When it was last frozen (given its number).
    frozen_ms: u64,
}

#[derive(Default)]
pub struct FrozenStates {
    ids: HashMap<Arc<Frozen>, u32>,
    states: HashMap<u32, Kept>,
    /// The last number given (0 is every packet's first pass).
    last: u32,
}

/// References the table itself holds to a kept state (its two maps).
const TABLE_REFS: usize = 2;

impl FrozenStates {
    /// The number of `state`, and the state to hold while a flow needs it: the
    /// number it has, or a new one. `None` when the table is full or the numbers ran
    /// out.
    pub fn freeze(&mut self, state: Frozen, now_ms: u64) -> Option<(u32, Arc<Frozen>)> {
        if let Some(id) = self.ids.get(&state).copied() {
            let kept = self.states.get_mut(&id)?;
            kept.frozen_ms = kept.frozen_ms.max(now_ms);
            return Some((id, kept.state.clone()));
        }
        if self.states.len() >= MAX_FROZEN {
            return None;
        }
        let id = self.last.checked_add(1)?;
        self.last = id;
        let state = Arc::new(state);
        self.ids.insert(state.clone(), id);
        self.states.insert(
            id,
            Kept {
                state: state.clone(),
                frozen_ms: now_ms,
            },
        );
        Some((id, state))
    }

    pub fn get(&self, id: u32) -> Option<Arc<Frozen>> {
        self.states.get(&id).map(|k| k.state.clone())
    }

    /// Lets go of every state nothing outside this table holds (no datapath flow's
    /// attribution, no translation under way) that was last frozen `GRACE_MS` or
    /// more before `now_ms`. Returns how many went; their numbers are not given
    /// again.
    // A continuation's rules have counters inside (atomics), but a key hashes and
    // compares a rule by its spec and sequence number, which never change.
    #[allow(clippy::mutable_key_type)]
    pub fn sweep(&mut self, now_ms: u64) -> usize {
        let before = self.states.len();
        let ids = &mut self.ids;
        self.states.retain(|_, k| {
            let keep = Arc::strong_count(&k.state) > TABLE_REFS
                || now_ms.saturating_sub(k.frozen_ms) < GRACE_MS;
            if !keep {
                ids.remove(&k.state);
            }
            keep
        });
        before - self.states.len()
    }

    /// Forgets the states of a bridge that goes (their numbers are not given again).
    pub fn forget_bridge(&mut self, slot: BridgeSlot) {
        self.ids.retain(|s, _| s.slot != slot);
        self.states.retain(|_, k| k.state.slot != slot);
    }

    pub fn len(&self) -> usize {
        self.states.len()
    }

    pub fn is_empty(&self) -> bool {
        self.states.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(group: u32, metadata: u64) -> Frozen {
        Frozen {
            slot: BridgeSlot(0),
            in_port: 1,
            metadata,
            pipeline: Default::default(),
            stack: Vec::new(),
            saves: 1,
            path: Vec::new(),
            cookie: u64::MAX,
            resume: Resume::SelectBucket { group, table: 0 },
        }
    }

    #[test]
    fn a_state_keeps_its_number_and_a_forgotten_one_is_not_given_again() {
        let mut f = FrozenStates::default();
        let a = f.freeze(state(1, 0), 0).unwrap().0;
        let b = f.freeze(state(2, 0), 0).unwrap().0;
        assert_ne!(a, 0);
        assert_ne!(a, b);
        assert_eq!(f.freeze(state(1, 0), 0).map(|(id, _)| id), Some(a));
        assert_eq!(f.get(a).unwrap().resume, state(1, 0).resume);
        f.forget_bridge(BridgeSlot(0));
        assert!(f.get(a).is_none() && f.is_empty());
        let c = f.freeze(state(1, 0), 0).unwrap().0;
        assert!(c > b, "{c} after {b}");
    }

    #[test]
    fn a_full_table_freezes_nothing_more() {
        let mut f = FrozenStates::default();
        for m in 0..MAX_FROZEN as u64 {
            assert!(f.freeze(state(1, m), 0).is_some());
        }
        assert!(f.freeze(state(1, u64::MAX), 0).is_none());
        assert!(
            f.freeze(state(1, 0), 0).is_some(),
            "a kept state still has its number"
        );
        assert_eq!(f.len(), MAX_FROZEN);
    }

    #[test]
    fn a_state_goes_once_nothing_holds_it_and_its_grace_passed() {
        let mut f = FrozenStates::default();
        let (held, h) = f.freeze(state(1, 0), 1_000).unwrap();
        let (free, _) = f.freeze(state(2, 0), 1_000).unwrap();
        // Within the grace both stay: a packet may be between its two passes.
        assert_eq!(f.sweep(1_000 + GRACE_MS - 1), 0);
        assert_eq!(f.sweep(1_000 + GRACE_MS), 1);
        assert!(f.get(held).is_some(), "a flow holds it");
        assert!(f.get(free).is_none());
        // Frozen again later: its grace starts again.
        drop(h);
        let _ = f.freeze(state(1, 0), 50_000).unwrap();
        assert_eq!(f.sweep(50_000 + GRACE_MS - 1), 0);
        assert_eq!(f.sweep(50_000 + GRACE_MS), 1);
        assert!(f.is_empty());
        // The same point frozen after its state went gets a number never given.
        let again = f.freeze(state(2, 0), 70_000).unwrap().0;
        assert!(again > held && again > free);
    }

    /// A full table makes room again once flows let go of their states.
    #[test]
    fn a_full_table_frees_what_no_flow_holds() {
        let mut f = FrozenStates::default();
        for m in 0..MAX_FROZEN as u64 {
            let _ = f.freeze(state(1, m), 0).unwrap();
        }
        assert!(f.freeze(state(1, u64::MAX), 0).is_none());
        assert_eq!(f.sweep(GRACE_MS), MAX_FROZEN);
        assert!(f.freeze(state(1, u64::MAX), GRACE_MS).is_some());
    }
}
