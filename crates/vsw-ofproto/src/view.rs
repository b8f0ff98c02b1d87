//! What translation sees of the backer: which bridge owns which datapath port, the
//! bridges' states, the patch pairs joining them (`PortMap`, replaced whole on a
//! change), and how a bridge's own numbers (ports, meters, notes) become the
//! datapath's (`BackerView`).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use crate::bridge_state::BridgeState;
use crate::frozen::{Frozen, FrozenStates};
use crate::slot::BridgeSlot;

pub(crate) use crate::punt_notes::NOTE_BITS;
/// Bits of a datapath meter number that number the meter within its bridge
/// (meters are 1..=4096); the bits above name the bridge.
pub(crate) const METER_BITS: u32 = 13;
/// Bridges one backer holds at most (the widest of the two encodings above).
pub const MAX_BRIDGES: u32 = 1 << (32 - NOTE_BITS);

/// The datapath's number for bridge `slot`'s meter `id`.
pub fn dp_meter(slot: BridgeSlot, id: u32) -> u32 {
    (slot.0 << METER_BITS) | (id & ((1 << METER_BITS) - 1))
}

/// The bridge a punted packet's note names, and the note within the bridge.
pub fn punt_note(userdata: u32) -> (BridgeSlot, u32) {
    (
        BridgeSlot(userdata >> NOTE_BITS),
        userdata & ((1 << NOTE_BITS) - 1),
    )
}

#[derive(Clone)]
pub(crate) struct BridgeEntry {
    pub name: String,
    pub state: Arc<BridgeState>,
    /// OpenFlow port → datapath port.
    pub to_dp: HashMap<u32, u32>,
}

/// One end of a patch: its bridge, its OpenFlow port, the name of its peer port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PatchEnd {
    pub slot: BridgeSlot,
    pub port: u32,
    pub peer: String,
}

/// Who owns which datapath port; replaced whole on a change.
#[derive(Clone, Default)]
pub(crate) struct PortMap {
    /// Datapath port → (bridge, OpenFlow port).
    pub by_dp: HashMap<u32, (BridgeSlot, u32)>,
    pub bridges: BTreeMap<BridgeSlot, BridgeEntry>,
    /// Patch ports by name.
    pub patch_ends: HashMap<String, PatchEnd>,
    /// (bridge, OpenFlow port) of each patch port whose peer names it back → the
    /// peer's (made from `patch_ends` at every change).
    patches: HashMap<(BridgeSlot, u32), (BridgeSlot, u32)>,
    /// (bridge, OpenFlow port) of each tunnel port → its name.
    pub tunnel_ports: HashMap<(BridgeSlot, u32), String>,
    /// Native tunnel output: the tunnel side, and the datapath's header table.
    pub tunnels: Option<NativeTunnels>,
}

/// What native tunnels need (vsw-datapath's `tunnel_egress.rs`).
#[derive(Clone)]
pub(crate) struct NativeTunnels {
    pub egress: Arc<dyn vsw_datapath::TunnelEgress>,
    /// The underlay's changes (routes, neighbours, tunnel ports' options): every
    /// flow that sent through a tunnel port depends on them.
    pub changes: Arc<crate::generation::Changes>,
}

impl PortMap {
    pub fn join_patches(&mut self) {
        self.patches = self
            .patch_ends
            .iter()
            .filter_map(|(name, end)| {
                let peer = self.patch_ends.get(&end.peer)?;
                (peer.peer == *name).then_some(((end.slot, end.port), (peer.slot, peer.port)))
            })
            .collect();
    }

    pub fn forget_patches_of(&mut self, gone: impl Fn(&PatchEnd) -> bool) {
        self.patch_ends.retain(|_, e| !gone(e));
        self.join_patches();
    }
}

/// A translation's view of the backer: every bridge, and the one translating.
#[derive(Clone, Copy)]
pub(crate) struct BackerView<'a> {
    pub map: &'a PortMap,
    pub slot: BridgeSlot,
    /// Where translations freeze for a recirculation.
    pub frozen: &'a Mutex<FrozenStates>,
}

impl<'a> BackerView<'a> {
    /// The `recirc_id` of `state`, and the state to hold while a flow needs it
    /// (`None`: the table is full, do without).
    pub fn freeze(&self, state: Frozen, now_ms: u64) -> Option<(u32, Arc<Frozen>)> {
        self.frozen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .freeze(state, now_ms)
    }

    /// The datapath port of this bridge's OpenFlow port `of_port`.
    pub fn dp_port(&self, of_port: u32) -> Option<u32> {
        self.map
            .bridges
            .get(&self.slot)?
            .to_dp
            .get(&of_port)
            .copied()
    }

    /// The name of this bridge's OpenFlow port `of_port`, when it is a tunnel port.
    pub fn tunnel_port(&self, of_port: u32) -> Option<&'a str> {
        self.map
            .tunnel_ports
            .get(&(self.slot, of_port))
            .map(String::as_str)
    }

    /// The bridge named `name`.
    pub fn bridge_named(&self, name: &str) -> Option<(BridgeSlot, &'a BridgeEntry)> {
        self.map
            .bridges
            .iter()
            .find(|(_, e)| e.name == name)
            .map(|(s, e)| (*s, e))
    }

    /// The far end of this bridge's OpenFlow port `of_port`, when it is a patch
    /// port whose peer is there.
    pub fn patch_peer(&self, of_port: u32) -> Option<(BridgeSlot, u32)> {
        self.map.patches.get(&(self.slot, of_port)).copied()
    }

    /// The datapath's number of this bridge's meter `id`.
    pub fn dp_meter(&self, id: u32) -> u32 {
        dp_meter(self.slot, id)
    }

    /// The datapath note of this bridge's punt note `note` (`None`: the bridge has
    /// more notes than a datapath note can number).
    pub fn dp_note(&self, note: u32) -> Option<u32> {
        (note < 1 << NOTE_BITS).then_some((self.slot.0 << NOTE_BITS) | note)
    }
}
