//! The slow path of one datapath that several bridges share (Open vSwitch's
//! `dpif_backer`): the datapath numbers its ports densely across every bridge, each
//! bridge numbers its own the OpenFlow way (LOCAL 65534 in each). A miss is handed
//! to the bridge that owns its input port and translated there in OpenFlow numbers;
//! the bridge emits its actions in datapath numbers: outputs to the ports' datapath
//! numbers, meters to the datapath's meter of that bridge's meter, packets sent up
//! with a note that names the bridge.
//!
//! Every bridge's `Ofproto` counts its changes in the backer's one generation: a
//! datapath flow is as fresh as everything it may have been translated through.
//!
//! Patch ports (Open vSwitch's `patch_port_output`) are the backer's too: two ports
//! that name each other as peers, on any bridges of it, join those bridges inside
//! translation — an output to one continues the translation in the peer's bridge,
//! as a packet received on the peer port; one datapath flow covers both bridges, no
//! packet is copied into a queue or looked up twice. Translations of every bridge
//! are taken one at a time (the backer's lock, before any bridge's MAC table), so a
//! translation may lock the MAC tables of the bridges it crosses in any order.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use arc_swap::ArcSwap;
use vsw_datapath::{NoAttribution, Translation, Upcall};
use vsw_flow::Pipeline;
use vsw_packet::FlowKey;

use crate::frozen::{Frozen, FrozenStates};
use crate::generation::{Changes, Generation};
use crate::ofproto::Ofproto;

/// Bits of a packet's note that number it within its bridge; the bits above name
/// the bridge.
const NOTE_BITS: u32 = 20;
/// Bits of a datapath meter number that number the meter within its bridge
/// (meters are 1..=4096); the bits above name the bridge.
const METER_BITS: u32 = 13;
/// Bridges one backer holds at most (the widest of the two encodings above).
pub const MAX_BRIDGES: u32 = 1 << (32 - NOTE_BITS);

pub use crate::slot::BridgeSlot;

#[derive(Clone)]
pub(crate) struct BridgeEntry {
    pub name: String,
    pub ofproto: Arc<Ofproto>,
    /// OpenFlow port → datapath port.
    pub to_dp: HashMap<u32, u32>,
}

/// One end of a patch: its bridge, its OpenFlow port, the name of its peer port.
#[derive(Clone, Debug, PartialEq, Eq)]
struct PatchEnd {
    slot: BridgeSlot,
    port: u32,
    peer: String,
}

/// Who owns which datapath port; replaced whole on a change.
#[derive(Clone, Default)]
pub(crate) struct PortMap {
    /// Datapath port → (bridge, OpenFlow port).
    by_dp: HashMap<u32, (BridgeSlot, u32)>,
    pub bridges: BTreeMap<BridgeSlot, BridgeEntry>,
    /// Patch ports by name.
    patch_ends: HashMap<String, PatchEnd>,
    /// (bridge, OpenFlow port) of each patch port whose peer names it back → the
    /// peer's (made from `patch_ends` at every change).
    patches: HashMap<(BridgeSlot, u32), (BridgeSlot, u32)>,
}

impl PortMap {
    fn join_patches(&mut self) {
        self.patches = self
            .patch_ends
            .iter()
            .filter_map(|(name, end)| {
                let peer = self.patch_ends.get(&end.peer)?;
                (peer.peer == *name).then_some(((end.slot, end.port), (peer.slot, peer.port)))
            })
            .collect();
    }

    fn forget_patches_of(&mut self, gone: impl Fn(&PatchEnd) -> bool) {
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

impl BackerView<'_> {
    /// The `recirc_id` of `state` (`None`: the table is full, do without).
    pub fn freeze(&self, state: Frozen) -> Option<u32> {
        self.frozen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .freeze(state)
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

    /// The far end of this bridge's OpenFlow port `of_port`, when it is a patch
    /// port whose peer is there.
    pub fn patch_peer(&self, of_port: u32) -> Option<(BridgeSlot, u32)> {
        self.map.patches.get(&(self.slot, of_port)).copied()
    }

    /// The datapath's number of this bridge's meter `id`.
    pub fn dp_meter(&self, id: u32) -> u32 {
        Backer::dp_meter(self.slot, id)
    }

    /// The datapath note of this bridge's punt note `note` (`None`: the bridge has
    /// more notes than a datapath note can number).
    pub fn dp_note(&self, note: u32) -> Option<u32> {
        (note < 1 << NOTE_BITS).then_some((self.slot.0 << NOTE_BITS) | note)
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BackerError {
    #[error("a datapath holds at most {MAX_BRIDGES} bridges")]
    TooManyBridges,
    #[error("no bridge {0:?} in this datapath")]
    NoSuchBridge(BridgeSlot),
    #[error("datapath port {0} is another port's")]
    PortInUse(u32),
}

pub struct Backer {
    generation: Arc<Generation>,
    /// The map's own changes (every flow depends on them).
    changes: Arc<Changes>,
    map: ArcSwap<PortMap>,
    /// Serialises changes to `map` (readers never wait).
    changing: Mutex<()>,
    /// Held by a translation of any bridge (see the module's comment).
    translating: Mutex<()>,
    /// The translations frozen for a recirculation, by `recirc_id`.
    frozen: Mutex<FrozenStates>,
}

impl std::fmt::Debug for Backer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let m = self.map.load();
        f.debug_struct("Backer")
            .field("bridges", &m.bridges.len())
            .field("ports", &m.by_dp.len())
            .finish()
    }
}

impl Default for Backer {
    fn default() -> Self {
        let generation = Arc::new(Generation::default());
        Backer {
            changes: Changes::new(generation.clone()),
            generation,
            map: ArcSwap::from_pointee(PortMap::default()),
            changing: Mutex::new(()),
            translating: Mutex::new(()),
            frozen: Mutex::new(FrozenStates::default()),
        }
    }
}

impl Backer {
    pub fn new() -> Arc<Backer> {
        Arc::new(Backer::default())
    }

    fn changing(&self) -> MutexGuard<'_, ()> {
        self.changing.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Changes the map under the change lock and counts the change.
    fn change<T>(
        &self,
        f: impl FnOnce(&mut PortMap) -> Result<T, BackerError>,
    ) -> Result<T, BackerError> {
        let _one = self.changing();
        let mut next = (**self.map.load()).clone();
        let out = f(&mut next)?;
        self.map.store(Arc::new(next));
        // After the store: see `Ofproto::set_pipeline`.
        self.changes.bump();
        Ok(out)
    }

    /// The map's changes.
    pub(crate) fn changes(&self) -> Arc<Changes> {
        self.changes.clone()
    }

    /// Held while a translation runs (see the module's comment).
    pub(crate) fn translating(&self) -> MutexGuard<'_, ()> {
        self.translating.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The map as it is now.
    pub(crate) fn map(&self) -> arc_swap::Guard<Arc<PortMap>> {
        self.map.load()
    }

    /// The frozen translations (see `frozen.rs`).
    pub(crate) fn frozen(&self) -> &Mutex<FrozenStates> {
        &self.frozen
    }

    /// The frozen translation of `recirc_id`, if it is still kept.
    pub fn frozen_state(&self, recirc_id: u32) -> Option<Arc<Frozen>> {
        self.frozen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(recirc_id)
    }

    /// How many frozen translations are kept.
    pub fn frozen_count(&self) -> usize {
        self.frozen.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// A new bridge `name` with `pipeline`: its slow path, counting in this
    /// backer's generation and translating through it, and its number here.
    pub fn add_bridge(
        self: &Arc<Self>,
        name: &str,
        pipeline: Pipeline,
    ) -> Result<(BridgeSlot, Arc<Ofproto>), BackerError> {
        self.change(|m| {
            let slot = (0..MAX_BRIDGES)
                .map(BridgeSlot)
                .find(|s| !m.bridges.contains_key(s))
                .ok_or(BackerError::TooManyBridges)?;
            let ofproto = Ofproto::with_generation(pipeline, self.generation.clone());
            ofproto.join_backer(Arc::downgrade(self), slot);
            m.bridges.insert(
                slot,
                BridgeEntry {
                    name: name.to_string(),
                    ofproto: ofproto.clone(),
                    to_dp: HashMap::new(),
                },
            );
            Ok((slot, ofproto))
        })
    }

    /// The bridge goes, with whatever ports it still had here.
    pub fn remove_bridge(&self, slot: BridgeSlot) {
        self.frozen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .forget_bridge(slot);
        let _ = self.change(|m| {
            m.bridges.remove(&slot);
            m.by_dp.retain(|_, (s, _)| *s != slot);
            m.forget_patches_of(|e| e.slot == slot);
            Ok(())
        });
    }

    /// Bridge `slot`'s OpenFlow port `of_port` is datapath port `dp_port`.
    pub fn set_port(
        &self,
        slot: BridgeSlot,
        of_port: u32,
        dp_port: u32,
    ) -> Result<(), BackerError> {
        self.change(|m| {
            if m.by_dp.get(&dp_port).is_some_and(|o| *o != (slot, of_port)) {
                return Err(BackerError::PortInUse(dp_port));
            }
            let entry = m
                .bridges
                .get_mut(&slot)
                .ok_or(BackerError::NoSuchBridge(slot))?;
            if let Some(old) = entry.to_dp.insert(of_port, dp_port) {
                m.by_dp.remove(&old);
            }
            m.by_dp.insert(dp_port, (slot, of_port));
            Ok(())
        })
    }

    /// Bridge `slot`'s OpenFlow port `of_port`, named `name`, is a patch port to
    /// the port named `peer` (joined once that one names it back, on any bridge of
    /// this datapath). It goes with the port's datapath number.
    pub fn set_patch(&self, slot: BridgeSlot, of_port: u32, name: &str, peer: &str) {
        let _ = self.change(|m| {
            m.patch_ends.insert(
                name.to_string(),
                PatchEnd {
                    slot,
                    port: of_port,
                    peer: peer.to_string(),
                },
            );
            m.join_patches();
            Ok(())
        });
    }

    /// Datapath port `dp_port` is no bridge's any more (nor a patch).
    pub fn remove_port(&self, dp_port: u32) {
        let _ = self.change(|m| {
            if let Some((slot, of)) = m.by_dp.remove(&dp_port) {
                if let Some(e) = m.bridges.get_mut(&slot) {
                    e.to_dp.remove(&of);
                }
                m.forget_patches_of(|e| e.slot == slot && e.port == of);
            }
            Ok(())
        });
    }

    /// Which bridge's which OpenFlow port datapath port `dp_port` is.
    pub fn of_port(&self, dp_port: u32) -> Option<(BridgeSlot, u32)> {
        self.map.load().by_dp.get(&dp_port).copied()
    }

    /// The datapath port of bridge `slot`'s OpenFlow port `of_port`.
    pub fn dp_port(&self, slot: BridgeSlot, of_port: u32) -> Option<u32> {
        self.map
            .load()
            .bridges
            .get(&slot)?
            .to_dp
            .get(&of_port)
            .copied()
    }

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

    /// Bridge `slot`'s slow path, while it is here.
    pub fn ofproto(&self, slot: BridgeSlot) -> Option<Arc<Ofproto>> {
        Some(self.map.load().bridges.get(&slot)?.ofproto.clone())
    }
}

impl Upcall for Backer {
    fn generation(&self) -> u64 {
        self.generation.get()
    }

    fn translate(&self, key: &FlowKey, now_ms: u64, learn: bool) -> Translation {
        let dropped = || Translation {
            // For this input port (or recirculation) only.
            mask: FlowKey {
                in_port: u32::MAX,
                recirc_id: u32::MAX,
                ..FlowKey::default()
            },
            actions: Vec::new(),
            attribution: Arc::new(NoAttribution),
            generation: self.generation.get(),
        };
        if key.recirc_id != 0 {
            // A later pass: the translation resumes where it froze.
            let Some(state) = self.frozen_state(key.recirc_id) else {
                return dropped();
            };
            let Some(ofproto) = self.ofproto(state.slot) else {
                return dropped();
            };
            return ofproto.resume(&state, key, now_ms, learn);
        }
        let map = self.map.load();
        let Some((slot, of_port)) = map.by_dp.get(&key.in_port).copied() else {
            // No bridge's port (it is going).
            return dropped();
        };
        let ofproto = map.bridges[&slot].ofproto.clone();
        drop(map);
        let mut k = *key;
        k.in_port = of_port;
        // In the bridge's numbers; it emits its actions in the datapath's.
        ofproto.translate(&k, now_ms, learn)
    }

    fn revalidating(&self, now_ms: u64) {
        for e in self.map.load().bridges.values() {
            e.ofproto.revalidating(now_ms);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vsw_datapath::DpAction::{self, Controller, Meter, Output};
    use vsw_flow::parse_flow;

    /// Select group 1 of every test pipeline: three buckets by weight 1, 2, 1;
    /// the last one out of port 2 (a patch port, where there is one).
    const SELECT: &str = "group_id=1,type=select,\
        bucket=weight:1,actions=output:1,\
        bucket=weight:2,actions=mod_tp_dst:7,output:1,\
        bucket=weight:1,actions=output:2";

    fn pipeline(flows: &[&str]) -> Pipeline {
        let mut p = Pipeline::new();
        let select = vsw_flow::parse_group(SELECT, &|_: &str| None).unwrap();
        p.set_group(select, false, 1).unwrap();
        for f in flows {
            p.insert(parse_flow(f, &|_: &str| None).unwrap(), 1);
        }
        p
    }

    fn key(in_port: u32) -> FlowKey {
        FlowKey {
            in_port,
            dl_type: 0x0800,
            ..FlowKey::default()
        }
    }

    fn udp_from(in_port: u32, src: u8, dst: u8) -> FlowKey {
        FlowKey {
            in_port,
            dl_src: vsw_packet::MacAddr([2, 0, 0, 0, 0, src]),
            dl_dst: vsw_packet::MacAddr([2, 0, 0, 0, 0, dst]),
            dl_type: 0x0800,
            nw_proto: 17,
            nw_src: 0xc612_0001,
            nw_dst: 0xc612_0002,
            nw_ttl: 64,
            tp_src: 1000,
            tp_dst: 53,
            ..FlowKey::default()
        }
    }

    /// Bridges a (ports 1, 2 = patch to b's 2) and b (ports 1, 2 = patch), in
    /// datapath ports a1 = 1, apatch = 2, b1 = 3, bpatch = 4.
    fn patched(a_flows: &[&str], b_flows: &[&str]) -> (Arc<Backer>, BridgeSlot, BridgeSlot) {
        let backer = Backer::new();
        let (a, oa) = backer.add_bridge("bra", pipeline(a_flows)).unwrap();
        let (b, ob) = backer.add_bridge("brb", pipeline(b_flows)).unwrap();
        oa.set_ports(vec![1, 2]);
        ob.set_ports(vec![1, 2]);
        for (slot, of, dp) in [(a, 1, 1), (a, 2, 2), (b, 1, 3), (b, 2, 4)] {
            backer.set_port(slot, of, dp).unwrap();
        }
        backer.set_patch(a, 2, "pa", "pb");
        (backer, a, b)
    }

    #[test]
    fn a_patch_port_continues_the_translation_in_its_peers_bridge() {
        let (backer, _a, b) = patched(
            &["in_port=1,actions=output:2"],
            &["in_port=2,udp,actions=mod_tp_dst:99,output:1"],
        );
        // One end alone joins nothing: the output goes to the patch's own datapath
        // port (which carries nothing).
        assert_eq!(
            backer.translate(&udp_from(1, 1, 2), 0, false).actions,
            vec![Output(2)]
        );
        backer.set_patch(b, 2, "pb", "pa");
        let t = backer.translate(&udp_from(1, 1, 2), 0, false);
        // b's rewrite: on the packet itself, as nothing of a's follows it.
        assert_eq!(t.actions, vec![DpAction::SetTpDst(99), Output(3)]);
        let (backer, _a, b) = patched(
            &["in_port=1,actions=output:2,in_port"],
            &["in_port=2,udp,actions=mod_tp_dst:99,output:1"],
        );
        backer.set_patch(b, 2, "pb", "pa");
        // With a's output after it: on a copy.
        assert_eq!(
            backer.translate(&udp_from(1, 1, 2), 0, false).actions,
            vec![
                DpAction::Save,
                DpAction::SetTpDst(99),
                Output(3),
                DpAction::Restore,
                Output(1)
            ]
        );
        // b's tables looked at the packet's protocol: one megaflow for both.
        assert_eq!(t.mask.nw_proto, u8::MAX);
        assert_eq!(t.mask.in_port, u32::MAX);
        // The other way, and NORMAL across.
        let (backer, _, b) = patched(&["actions=NORMAL"], &["actions=NORMAL"]);
        backer.set_patch(b, 2, "pb", "pa");
        // Unknown destination: a floods to its port 1 and across; b floods to its 1.
        let t = backer.translate(&udp_from(3, 7, 8), 0, true);
        assert_eq!(
            t.actions,
            vec![Output(1)],
            "from b's 1: b floods across to a's 1"
        );
        let t = backer.translate(&udp_from(1, 8, 7), 0, true);
        assert_eq!(
            t.actions,
            vec![Output(3)],
            "a learned 8 on its 1, b learned 7 on its 1"
        );
        // Gone with a port: the patch joins nothing any more.
        backer.remove_port(4);
        let t = backer.translate(&udp_from(1, 8, 9), 0, false);
        assert_eq!(
            t.actions,
            vec![Output(2)],
            "flooded to a's patch port alone"
        );
    }

    #[test]
    fn a_patch_back_into_a_bridge_on_the_way_and_one_within_a_bridge_go_nowhere() {
        // a's 2 ↔ b's 2, and b sends everything back across.
        let (backer, _, b) = patched(&["actions=output:2"], &["actions=IN_PORT"]);
        backer.set_patch(b, 2, "pb", "pa");
        let t = backer.translate(&udp_from(1, 1, 2), 0, false);
        assert!(t.actions.is_empty(), "{:?}", t.actions);
        let (backer, a, _) = patched(&["in_port=1,actions=output:2"], &[]);
        backer.set_port(a, 3, 5).unwrap();
        backer.set_patch(a, 2, "pa", "pa3");
        backer.set_patch(a, 3, "pa3", "pa");
        assert!(backer
            .translate(&udp_from(1, 1, 2), 0, false)
            .actions
            .is_empty());
    }

    #[test]
    fn each_bridge_translates_its_own_ports_in_its_own_numbers() {
        let b = Backer::new();
        let (a, oa) = b
            .add_bridge("br", pipeline(&["in_port=1,actions=output:2"]))
            .unwrap();
        let (c, oc) = b
            .add_bridge("br", pipeline(&["in_port=1,actions=meter:3,output:65534"]))
            .unwrap();
        assert_ne!(a, c);
        oa.set_ports(vec![1, 2]);
        oc.set_ports(vec![1, 65534]);
        // a: 1 → dp 1, 2 → dp 2; c: 1 → dp 3, LOCAL → dp 4.
        b.set_port(a, 1, 1).unwrap();
        b.set_port(a, 2, 2).unwrap();
        b.set_port(c, 1, 3).unwrap();
        b.set_port(c, 65534, 4).unwrap();
        assert_eq!(b.translate(&key(1), 0, false).actions, vec![Output(2)]);
        assert_eq!(
            b.translate(&key(3), 0, false).actions,
            vec![Meter(Backer::dp_meter(c, 3)), Output(4)]
        );
        assert_ne!(Backer::dp_meter(a, 3), Backer::dp_meter(c, 3));
        // Not a port of any bridge: dropped, its in_port in the mask.
        let t = b.translate(&key(9), 0, false);
        assert!(t.actions.is_empty());
        assert_eq!(t.mask.in_port, u32::MAX);
        assert_eq!(b.of_port(4), Some((c, 65534)));
        assert_eq!(b.dp_port(a, 2), Some(2));
        assert_eq!(b.set_port(c, 2, 1), Err(BackerError::PortInUse(1)));
    }

    #[test]
    fn an_output_to_a_port_with_no_datapath_port_is_left_out() {
        let b = Backer::new();
        let (a, o) = b
            .add_bridge("br", pipeline(&["in_port=1,actions=output:2,output:3"]))
            .unwrap();
        o.set_ports(vec![1, 2, 3]);
        b.set_port(a, 1, 7).unwrap();
        b.set_port(a, 3, 8).unwrap();
        assert_eq!(b.translate(&key(7), 0, false).actions, vec![Output(8)]);
        b.remove_port(8);
        assert!(b.translate(&key(7), 0, false).actions.is_empty());
    }

    #[test]
    fn notes_name_their_bridge_and_every_change_moves_the_generation() {
        let b = Backer::new();
        let (_, _) = b.add_bridge("br", Pipeline::new()).unwrap();
        let (c, o) = b
            .add_bridge("br", pipeline(&["actions=controller"]))
            .unwrap();
        o.set_ports(vec![1]);
        let g = b.generation();
        b.set_port(c, 1, 5).unwrap();
        assert!(b.generation() > g, "a port mapped");
        let g = b.generation();
        o.set_pipeline(pipeline(&["actions=controller:100"]));
        assert!(b.generation() > g, "a bridge's change is the backer's");
        let t = b.translate(&key(5), 0, false);
        let [Controller(n)] = t.actions[..] else {
            panic!("{:?}", t.actions)
        };
        let (slot, note) = Backer::punt_note(n);
        assert_eq!(slot, c);
        assert_eq!(o.punt_note(note).unwrap().max_len, 100);
        b.remove_bridge(c);
        assert!(b.translate(&key(5), 0, false).actions.is_empty());
        assert!(b.ofproto(c).is_none());
    }

    /// The next pass of `key` after `recirc(id)`, with hash `dp_hash`.
    fn next_pass(key: &FlowKey, id: u32, dp_hash: u32) -> FlowKey {
        FlowKey {
            recirc_id: id,
            dp_hash,
            ..*key
        }
    }

    fn recirc_of(actions: &[DpAction]) -> Option<u32> {
        actions.iter().find_map(|a| match a {
            DpAction::Recirc(id) => Some(*id),
            _ => None,
        })
    }

    #[test]
    fn a_select_group_is_decided_by_the_datapaths_hash_on_a_second_pass() {
        let (backer, a, _) = patched(&["in_port=2,ip,actions=mod_nw_tos:8,group:1,output:1"], &[]);
        // From port 2 (only a's end of the patch is there: a plain port).
        let k = udp_from(2, 1, 2);
        let t = backer.translate(&k, 0, false);
        let Some(id) = recirc_of(&t.actions) else {
            panic!("{:?}", t.actions)
        };
        assert_eq!(
            t.actions,
            vec![
                DpAction::SetNwTos(8),
                DpAction::Save,
                DpAction::Hash,
                DpAction::Recirc(id),
                DpAction::Restore,
                Output(1)
            ],
            "the group on a copy; what follows it on the packet as it was"
        );
        // The first pass looks at no address or port for the group.
        assert_eq!((t.mask.nw_src, t.mask.tp_src, t.mask.tp_dst), (0, 0, 0));
        let state = backer.frozen_state(id).unwrap();
        assert_eq!((state.slot, state.in_port), (a, 2));
        // The same freeze point gets the same number.
        let again = backer.translate(&udp_from(2, 5, 6), 0, false);
        assert_eq!(recirc_of(&again.actions), Some(id));
        // The second pass: the bucket by the hash's low bits, in proportion to the
        // weights (1:2:1 over 16 slots: 4, 8, 4).
        let slots = crate::xlate::hash_slots(3);
        assert_eq!(slots, 16);
        let mut chosen = [0; 3];
        for h in 0..slots {
            let p = backer.translate(&next_pass(&k, id, h | 0xabc0_0000), 0, false);
            let (dp_hash, nw_src) = (p.mask.dp_hash, p.mask.nw_src);
            assert_eq!(dp_hash, slots - 1, "the hash's low bits only");
            assert_eq!(nw_src, 0);
            let bucket = match &p.actions[..] {
                [Output(1)] => 0,
                [DpAction::SetTpDst(7), Output(1)] => 1,
                // Out of the port it came in by: nowhere.
                [] => 2,
                other => panic!("{other:?}"),
            };
            chosen[bucket] += 1;
        }
        assert_eq!(chosen, [4, 8, 4]);
        // A number no state has (or a bridge's that went) drops, for itself alone.
        let gone = backer.translate(&next_pass(&k, id + 100, 0), 0, false);
        assert!(gone.actions.is_empty());
        assert_eq!(gone.mask.recirc_id, u32::MAX);
        backer.remove_bridge(a);
        assert!(backer.frozen_state(id).is_none());
        assert!(backer
            .translate(&next_pass(&k, id, 0), 0, false)
            .actions
            .is_empty());
    }

    #[test]
    fn a_resumed_pass_sees_its_own_packets_tunnel() {
        // Group 2's one bucket looks at the tunnel ID (table 1): packets of two
        // tunnels share the first pass's flow and its number, not the second's.
        let mut p = pipeline(&[
            "table=0,in_port=2,actions=group:2",
            "table=1,tun_id=5,actions=output:1",
            "table=1,tun_id=6,actions=in_port",
        ]);
        let group = "group_id=2,type=select,bucket=resubmit(,1)";
        p.set_group(
            vsw_flow::parse_group(group, &|_: &str| None).unwrap(),
            false,
            1,
        )
        .unwrap();
        let backer = Backer::new();
        let (a, o) = backer.add_bridge("br", p).unwrap();
        o.set_ports(vec![1, 2]);
        backer.set_port(a, 1, 1).unwrap();
        backer.set_port(a, 2, 2).unwrap();
        let tunnel = |id: u64| FlowKey {
            tun_id: id,
            ..udp_from(2, 1, 2)
        };
        let first = |k: &FlowKey| recirc_of(&backer.translate(k, 0, false).actions).unwrap();
        let id = first(&tunnel(5));
        assert_eq!(first(&tunnel(6)), id);
        let five = backer.translate(&next_pass(&tunnel(5), id, 0), 0, false);
        let six = backer.translate(&next_pass(&tunnel(6), id, 0), 0, false);
        assert_eq!(five.actions, vec![Output(1)]);
        assert_eq!(six.actions, vec![Output(2)]);
        let tun_id = five.mask.tun_id;
        assert_eq!(
            tun_id,
            u64::MAX,
            "the second pass's flow matches the tunnel"
        );
    }

    #[test]
    fn a_select_group_past_a_patch_resumes_in_that_bridge_and_a_packet_out_never_freezes() {
        let (backer, a, b) = patched(&["in_port=1,actions=output:2"], &["actions=group:1"]);
        backer.set_patch(b, 2, "pb", "pa");
        let k = udp_from(1, 1, 2);
        let t = backer.translate(&k, 0, false);
        let id = recirc_of(&t.actions).unwrap_or_else(|| panic!("{:?}", t.actions));
        let state = backer.frozen_state(id).unwrap();
        assert_eq!(
            (state.slot, state.in_port, state.path.clone()),
            (b, 2, vec![a])
        );
        // Every bucket resumes in b: its port 1 is datapath port 3; its bucket out
        // of its patch port back into a (which the packet came through) goes nowhere.
        let outs: Vec<Vec<DpAction>> = (0..16)
            .map(|h| backer.translate(&next_pass(&k, id, h), 0, false).actions)
            .collect();
        assert!(outs.contains(&vec![Output(3)]), "{outs:?}");
        assert!(outs.contains(&Vec::new()), "{outs:?}");
        // A packet-out runs its actions without lookups: the group decides at once.
        let o = backer.ofproto(b).unwrap();
        let x = o.translate_packet_out(
            &FlowKey { in_port: 1, ..k },
            &[vsw_flow::Action::Group(1)],
            0,
        );
        assert!(recirc_of(&x.actions).is_none(), "{:?}", x.actions);
    }

    mod megaflows {
        use super::*;
        use proptest::prelude::*;

        /// A rule of either bridge: a match on a few of the fields the keys vary,
        /// and actions among outputs (the patch port 2 included), rewrites and
        /// NORMAL.
        fn rule() -> impl Strategy<Value = String> {
            let matching = prop_oneof![
                Just(String::new()),
                (1u32..3).prop_map(|p| format!("in_port={p},")),
                (0u16..4).prop_map(|d| format!("udp,tp_dst={d},")),
                (0u8..4).prop_map(|s| format!("ip,nw_src=10.0.0.{s},")),
            ];
            let action = prop_oneof![
                (1u32..3).prop_map(|p| format!("output:{p}")),
                Just("NORMAL".to_string()),
                Just("mod_tp_dst:3".to_string()),
                Just("mod_nw_src:10.0.0.1".to_string()),
                Just("group:1".to_string()),
                Just("drop".to_string()),
            ];
            (matching, 1u16..4, proptest::collection::vec(action, 1..3)).prop_map(
                |(m, prio, mut acts)| {
                    if acts.iter().any(|a| a == "drop") {
                        acts = vec!["drop".to_string()];
                    }
                    let m = if acts.iter().any(|a| a.starts_with("mod_tp")) && !m.contains("udp") {
                        format!("udp,{m}")
                    } else if acts.iter().any(|a| a.starts_with("mod_nw")) && !m.contains("p,") {
                        format!("ip,{m}")
                    } else {
                        m
                    };
                    format!("priority={prio},{m}actions={}", acts.join(","))
                },
            )
        }

        fn key() -> impl Strategy<Value = FlowKey> {
            (
                prop_oneof![Just(1u32), Just(3u32)],
                0u16..4,
                0u8..4,
                0u8..3,
                0u8..3,
            )
                .prop_map(|(in_port, tp_dst, src, smac, dmac)| FlowKey {
                    in_port,
                    tp_dst,
                    nw_src: u128::from(0x0a00_0000 + u32::from(src)),
                    dl_src: vsw_packet::MacAddr([2, 0, 0, 0, 0, smac]),
                    dl_dst: vsw_packet::MacAddr([2, 0, 0, 0, 0, dmac]),
                    ..udp_from(in_port, 0, 0)
                })
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(256))]
            /// The megaflow a translation across the patch gives holds for every
            /// key it covers: a key that agrees with it under its mask translates
            /// to the same actions (what a cached datapath flow does for it).
            #[test]
            fn a_megaflow_across_a_patch_holds_for_every_key_it_covers(
                a_rules in proptest::collection::vec(rule(), 0..5),
                b_rules in proptest::collection::vec(rule(), 0..5),
                keys in proptest::collection::vec(key(), 2..12),
                hashes in proptest::collection::vec(any::<u32>(), 3),
            ) {
                let a_rules: Vec<&str> = a_rules.iter().map(String::as_str).collect();
                let b_rules: Vec<&str> = b_rules.iter().map(String::as_str).collect();
                let (backer, _, b) = patched(&a_rules, &b_rules);
                backer.set_patch(b, 2, "pb", "pa");
                // Every first pass, and every pass after a recirculation one made
                // (select groups: the same keys, each with the hashes).
                let mut passes: Vec<FlowKey> = keys.clone();
                for k in &keys {
                    if let Some(id) = recirc_of(&backer.translate(k, 0, false).actions) {
                        passes.extend(hashes.iter().map(|h| next_pass(k, id, *h)));
                    }
                }
                for k1 in &passes {
                    let t1 = backer.translate(k1, 0, false);
                    // As the datapath makes every flow: its pass exact.
                    let mask = FlowKey { recirc_id: u32::MAX, ..t1.mask };
                    for k2 in &passes {
                        if k2.masked(&mask) != k1.masked(&mask) {
                            continue;
                        }
                        let t2 = backer.translate(k2, 0, false);
                        prop_assert_eq!(&t2.actions, &t1.actions, "{:?} covers {:?}", k1, k2);
                    }
                }
            }
        }
    }
}
