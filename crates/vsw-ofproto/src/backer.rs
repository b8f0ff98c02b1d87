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

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use arc_swap::ArcSwap;
use vsw_datapath::{NoAttribution, Translation, Upcall};
use vsw_flow::{MatchKey, Pipeline};
use vsw_packet::FlowKey;

use crate::bridge_state::BridgeState;
use crate::frozen::{Frozen, FrozenStates};
use crate::generation::{Changes, Generation};
use crate::run;
pub use crate::slot::BridgeSlot;
use crate::view::{BackerView, BridgeEntry, PatchEnd, PortMap, MAX_BRIDGES};

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BackerError {
    #[error("a datapath holds at most {MAX_BRIDGES} bridges")]
    TooManyBridges,
    #[error("no bridge {0:?} in this datapath")]
    NoSuchBridge(BridgeSlot),
    #[error("datapath port {0} is another port's")]
    PortInUse(u32),
}

/// Where a translation starts.
enum Start<'a> {
    /// Table 0, as a packet received.
    Table0,
    /// Where this frozen translation stopped; whether the datapath's in_port is a
    /// port of another bridge (or a tunnel's receive point).
    Resumed(&'a Arc<Frozen>, bool),
    /// Table 0 of the bridge of the tunnel port the tunnels' state chose for a
    /// popped packet (the flow depends on that state's changes).
    Popped(Option<Arc<Changes>>),
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

    /// A new bridge `name` with `pipeline`: its state, counting in this backer's
    /// generation, and its number here (`Ofproto::join` makes it a slow path).
    pub(crate) fn add_bridge(
        &self,
        name: &str,
        pipeline: Pipeline,
    ) -> Result<(BridgeSlot, Arc<BridgeState>), BackerError> {
        self.change(|m| {
            let slot = (0..MAX_BRIDGES)
                .map(BridgeSlot)
                .find(|s| !m.bridges.contains_key(s))
                .ok_or(BackerError::TooManyBridges)?;
            let state = Arc::new(BridgeState::new(pipeline, self.generation.clone()));
            m.bridges.insert(
                slot,
                BridgeEntry {
                    name: name.to_string(),
                    state: state.clone(),
                    to_dp: HashMap::new(),
                },
            );
            Ok((slot, state))
        })
    }

    /// Runs `f` with bridge `slot`'s view of this backer, holding the translation
    /// lock: a translation may cross into other bridges, and emits the datapath's
    /// numbers.
    pub(crate) fn with_view<R>(&self, slot: BridgeSlot, f: impl FnOnce(BackerView<'_>) -> R) -> R {
        let _one = self.translating();
        let map = self.map();
        f(BackerView {
            map: &map,
            slot,
            frozen: &self.frozen,
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
            m.tunnel_ports.retain(|(s, _), _| *s != slot);
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

    /// Bridge `slot`'s OpenFlow port `of_port` is tunnel port `name`: packets sent
    /// to it are encapsulated in their datapath pass when the tunnel side knows
    /// their way out ([`Backer::set_tunnel_egress`]).
    pub fn set_tunnel_port(&self, slot: BridgeSlot, of_port: u32, name: &str) {
        let _ = self.change(|m| {
            m.tunnel_ports.insert((slot, of_port), name.to_string());
            Ok(())
        });
    }

    /// Sends through tunnel ports natively: `egress` says the outer headers.
    pub fn set_tunnel_egress(&self, egress: Arc<dyn vsw_datapath::TunnelEgress>) {
        let changes = Changes::new(self.generation.clone());
        let _ = self.change(|m| {
            m.tunnels = Some(crate::view::NativeTunnels { egress, changes });
            Ok(())
        });
    }

    /// What the tunnel side reads changed (routes, neighbours, bridges' MACs, a
    /// tunnel port's options, a TLV map): flows that sent through a tunnel port are
    /// translated again.
    pub fn underlay_changed(&self) {
        if let Some(t) = &self.map.load().tunnels {
            t.changes.bump();
        }
    }

    /// Datapath port `dp_port` is no bridge's any more (nor a patch).
    pub fn remove_port(&self, dp_port: u32) {
        let _ = self.change(|m| {
            if let Some((slot, of)) = m.by_dp.remove(&dp_port) {
                if let Some(e) = m.bridges.get_mut(&slot) {
                    e.to_dp.remove(&of);
                }
                m.forget_patches_of(|e| e.slot == slot && e.port == of);
                m.tunnel_ports.remove(&(slot, of));
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
        crate::view::dp_meter(slot, id)
    }

    /// The bridge a punted packet's note names, and the note within the bridge.
    pub fn punt_note(userdata: u32) -> (BridgeSlot, u32) {
        crate::view::punt_note(userdata)
    }

    /// Bridge `slot`'s state, while it is here.
    pub(crate) fn bridge(&self, slot: BridgeSlot) -> Option<Arc<BridgeState>> {
        Some(self.map.load().bridges.get(&slot)?.state.clone())
    }

    /// Whether bridge `slot` is here.
    pub fn has_bridge(&self, slot: BridgeSlot) -> bool {
        self.map.load().bridges.contains_key(&slot)
    }

    /// A packet bridge `bridge` sends as from its LOCAL port (the host's, as a
    /// tunnel's neighbour request is: Open vSwitch's `xlate_send_packet`),
    /// translated as received there, for a PMD to send. `None`: no such bridge, no
    /// LOCAL port, or not a packet.
    pub fn from_local(
        &self,
        bridge: &str,
        frame: &[u8],
        now_ms: u64,
    ) -> Option<vsw_datapath::Injected> {
        let dp = {
            let map = self.map.load();
            let entry = map.bridges.values().find(|e| e.name == bridge)?;
            *entry.to_dp.get(&vsw_flow::LOCAL_PORT)?
        };
        let mut key = FlowKey::default();
        vsw_packet::extract(frame, dp, None, &mut key).ok()?;
        // With its bytes: the host's own IGMP and MLD reports are snooped too.
        let t = self.translate_packet(&key, frame, now_ms);
        Some(vsw_datapath::Injected {
            in_port: dp,
            actions: t.actions,
            headers: t.headers,
            frame: frame.to_vec(),
        })
    }

    /// A drop, for this input port (or recirculation) only.
    fn dropped(&self) -> Translation {
        Translation {
            mask: FlowKey {
                in_port: u32::MAX,
                recirc_id: u32::MAX,
                ..FlowKey::default()
            },
            actions: Vec::new(),
            headers: Vec::new(),
            attribution: Arc::new(NoAttribution),
            generation: self.generation.get(),
            rx_port: None,
            cacheable: true,
        }
    }

    /// Translates a popped tunnel packet's next pass (`key`: the receive point of its
    /// kind, its tunnel): as received on the tunnel port its tunnel is for, in that
    /// port's bridge; the flow matches the tunnel fields that chose the port.
    fn translate_popped(
        &self,
        point: vsw_datapath::tunnel_pop::ReceivePoint,
        key: &FlowKey,
        now_ms: u64,
        passing: run::Passing<'_>,
    ) -> Translation {
        let map = self.map.load();
        let mut chose = FlowKey::default();
        let port = map.tunnels.as_ref().and_then(|t| {
            t.egress
                .receiving_port(point, key, &mut chose, passing.learn)
        });
        let found = port.and_then(|(name, mode)| {
            map.tunnel_ports
                .iter()
                .find(|(_, n)| **n == name)
                .map(|((slot, of), _)| (*slot, *of, mode))
        });
        let depends = map.tunnels.as_ref().map(|t| t.changes.clone());
        let Some((slot, of_port, mode)) = found else {
            // No port's: dropped, for these tunnel fields alone.
            let mut t = self.dropped();
            t.mask.tun_src = u32::MAX;
            t.mask.tun_dst = u32::MAX;
            t.mask.tun_id = u64::MAX;
            return t;
        };
        let Some(bridge) = map.bridges.get(&slot).map(|e| e.state.clone()) else {
            return self.dropped();
        };
        drop(map);
        let mut k: MatchKey = FlowKey {
            in_port: of_port,
            ..*key
        }
        .into();
        // A packet without Ethernet (behind the datapath's placeholder header): a
        // packet-type-aware port shows the rules its type; an L3 port shows them
        // an Ethernet frame of zero addresses, as Open vSwitch's does.
        if point.l3 && mode == vsw_packet::tunnel::PacketTypeMode::Ptap {
            k.pipeline.packet_type = vsw_flow::packet_type::of_ethertype(key.dl_type);
        }
        let mut t = self.translate_in(slot, &bridge, &k, (now_ms, passing), Start::Popped(depends));
        t.mask.widen(&chose);
        // Its packets count as the tunnel port's.
        t.rx_port = self.dp_port(slot, of_port);
        t
    }

    /// Translates `key` (in bridge `slot`'s numbers) in that bridge, from where
    /// `start` says: what the datapath caches.
    fn translate_in(
        &self,
        slot: BridgeSlot,
        bridge: &BridgeState,
        key: &MatchKey,
        (now_ms, passing): (u64, run::Passing<'_>),
        start: Start<'_>,
    ) -> Translation {
        let entry = match &start {
            Start::Resumed(state, elsewhere) => run::Entry {
                frozen: Some(*state),
                in_port_elsewhere: *elsewhere,
            },
            Start::Table0 => run::Entry::default(),
            Start::Popped(_) => run::Entry {
                frozen: None,
                in_port_elsewhere: true,
            },
        };
        let (mut x, generation) = self.with_view(slot, |view| {
            run::run(bridge, Some(view), key, (now_ms, passing, false), entry)
        });
        // A popped packet's port was chosen by the tunnels' state.
        if let Start::Popped(underlay) = start {
            x.crossed.extend(underlay);
        }
        run::credited(bridge, x, generation, Some(self.changes()))
    }

    /// Translates `key` as its datapath pass says: a later pass where its
    /// translation froze, a popped tunnel packet as its tunnel port's, any other
    /// in the bridge of its port.
    fn translate_passing(
        &self,
        key: &FlowKey,
        now_ms: u64,
        passing: run::Passing<'_>,
    ) -> Translation {
        let dropped = || self.dropped();
        if key.recirc_id != 0 {
            // A later pass: the translation resumes where it froze.
            let Some(state) = self.frozen_state(key.recirc_id) else {
                return dropped();
            };
            let Some(bridge) = self.bridge(state.slot) else {
                return dropped();
            };
            let thawed = state.thaw(key);
            // The datapath's in_port: one of this bridge's ports, or not (a tunnel's
            // receive point, a port of the bridge the packet crossed from).
            let elsewhere = self.of_port(key.in_port).map(|(s, _)| s) != Some(state.slot);
            return self.translate_in(
                state.slot,
                &bridge,
                &thawed,
                (now_ms, passing),
                Start::Resumed(&state, elsewhere),
            );
        }
        if let Some(point) = vsw_datapath::tunnel_pop::receive_point(key.in_port) {
            return self.translate_popped(point, key, now_ms, passing);
        }
        let map = self.map.load();
        let Some((slot, of_port)) = map.by_dp.get(&key.in_port).copied() else {
            // No bridge's port (it is going).
            return dropped();
        };
        let bridge = map.bridges[&slot].state.clone();
        drop(map);
        let mut k = *key;
        k.in_port = of_port;
        // In the bridge's numbers; it emits its actions in the datapath's.
        self.translate_in(slot, &bridge, &k.into(), (now_ms, passing), Start::Table0)
    }
}

impl Upcall for Backer {
    fn generation(&self) -> u64 {
        self.generation.get()
    }

    fn translate(&self, key: &FlowKey, now_ms: u64, learn: bool) -> Translation {
        self.translate_passing(key, now_ms, run::Passing::keyed(learn))
    }

    fn translate_packet(&self, key: &FlowKey, frame: &[u8], now_ms: u64) -> Translation {
        self.translate_passing(key, now_ms, run::Passing::packet(frame))
    }

    fn revalidating(&self, now_ms: u64) {
        for e in self.map.load().bridges.values() {
            e.state.expire_learned(now_ms);
            // Notes no datapath flow holds any more.
            e.state.punt_notes().sweep(now_ms);
        }
        // States no datapath flow holds any more.
        self.frozen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .sweep(now_ms);
    }
}
