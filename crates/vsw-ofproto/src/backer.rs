//! The slow path of one datapath that several bridges share (Open vSwitch's
//! `dpif_backer`): the datapath numbers its ports densely across every bridge, each
//! bridge numbers its own the OpenFlow way (LOCAL 65534 in each). A miss is handed
//! to the bridge that owns its input port, translated there in OpenFlow numbers, and
//! its actions put back into datapath numbers: outputs to the ports' datapath
//! numbers, meters to the datapath's meter of that bridge's meter, packets sent up
//! with a note that names the bridge.
//!
//! Every bridge's `Ofproto` counts its changes in the backer's one generation: a
//! datapath flow is as fresh as everything it may have been translated through.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use arc_swap::ArcSwap;
use vsw_datapath::{DpAction, NoAttribution, Translation, Upcall};
use vsw_flow::Pipeline;
use vsw_packet::FlowKey;

use crate::generation::Generation;
use crate::ofproto::Ofproto;

/// Bits of a packet's note that number it within its bridge; the bits above name
/// the bridge.
const NOTE_BITS: u32 = 20;
/// Bits of a datapath meter number that number the meter within its bridge
/// (meters are 1..=4096); the bits above name the bridge.
const METER_BITS: u32 = 13;
/// Bridges one backer holds at most (the widest of the two encodings above).
pub const MAX_BRIDGES: u32 = 1 << (32 - NOTE_BITS);

/// A bridge's number within its backer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BridgeSlot(pub u32);

#[derive(Clone)]
struct BridgeEntry {
    ofproto: Arc<Ofproto>,
    /// OpenFlow port → datapath port.
    to_dp: HashMap<u32, u32>,
}

/// Who owns which datapath port; replaced whole on a change.
#[derive(Clone, Default)]
struct PortMap {
    /// Datapath port → (bridge, OpenFlow port).
    by_dp: HashMap<u32, (BridgeSlot, u32)>,
    bridges: BTreeMap<BridgeSlot, BridgeEntry>,
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
    map: ArcSwap<PortMap>,
    /// Serialises changes to `map` (readers never wait).
    changing: Mutex<()>,
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
        Backer {
            generation: Arc::new(Generation::default()),
            map: ArcSwap::from_pointee(PortMap::default()),
            changing: Mutex::new(()),
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
        self.generation.bump();
        Ok(out)
    }

    /// A new bridge with `pipeline`: its slow path, counting in this backer's
    /// generation, and its number here.
    pub fn add_bridge(
        &self,
        pipeline: Pipeline,
    ) -> Result<(BridgeSlot, Arc<Ofproto>), BackerError> {
        self.change(|m| {
            let slot = (0..MAX_BRIDGES)
                .map(BridgeSlot)
                .find(|s| !m.bridges.contains_key(s))
                .ok_or(BackerError::TooManyBridges)?;
            let ofproto = Ofproto::with_generation(pipeline, self.generation.clone());
            m.bridges.insert(
                slot,
                BridgeEntry {
                    ofproto: ofproto.clone(),
                    to_dp: HashMap::new(),
                },
            );
            Ok((slot, ofproto))
        })
    }

    /// The bridge goes, with whatever ports it still had here.
    pub fn remove_bridge(&self, slot: BridgeSlot) {
        let _ = self.change(|m| {
            m.bridges.remove(&slot);
            m.by_dp.retain(|_, (s, _)| *s != slot);
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

    /// Datapath port `dp_port` is no bridge's any more.
    pub fn remove_port(&self, dp_port: u32) {
        let _ = self.change(|m| {
            if let Some((slot, of)) = m.by_dp.remove(&dp_port) {
                if let Some(e) = m.bridges.get_mut(&slot) {
                    e.to_dp.remove(&of);
                }
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

    /// The note a packet sent up by bridge `slot` carries for its note `note`, or
    /// `None` when the bridge has more notes than a datapath note can number.
    fn dp_note(slot: BridgeSlot, note: u32) -> Option<u32> {
        (note < 1 << NOTE_BITS).then_some((slot.0 << NOTE_BITS) | note)
    }

    /// Bridge `slot`'s slow path, while it is here.
    pub fn ofproto(&self, slot: BridgeSlot) -> Option<Arc<Ofproto>> {
        Some(self.map.load().bridges.get(&slot)?.ofproto.clone())
    }

    /// Actions in OpenFlow numbers of bridge `slot` in datapath numbers: an output
    /// to a port with no datapath port is left out (the port is not attached).
    pub fn to_datapath(&self, slot: BridgeSlot, actions: &mut Vec<DpAction>) {
        let map = self.map.load();
        let Some(entry) = map.bridges.get(&slot) else {
            actions.clear();
            return;
        };
        to_datapath(slot, entry, actions);
    }
}

fn to_datapath(slot: BridgeSlot, entry: &BridgeEntry, actions: &mut Vec<DpAction>) {
    actions.retain_mut(|a| match a {
        DpAction::Output(p) => match entry.to_dp.get(p) {
            Some(dp) => {
                *p = *dp;
                true
            }
            None => false,
        },
        DpAction::Meter(m) => {
            *m = Backer::dp_meter(slot, *m);
            true
        }
        DpAction::Controller(n) => match Backer::dp_note(slot, *n) {
            Some(dp) => {
                *n = dp;
                true
            }
            None => {
                tracing::warn!(note = *n, "a bridge with more packet-in notes than a datapath can number: packet not sent up");
                false
            }
        },
        _ => true,
    });
}

impl Upcall for Backer {
    fn generation(&self) -> u64 {
        self.generation.get()
    }

    fn translate(&self, key: &FlowKey, now_ms: u64, learn: bool) -> Translation {
        let map = self.map.load();
        let Some((slot, of_port)) = map.by_dp.get(&key.in_port).copied() else {
            // No bridge's port (it is going): dropped, for this input port only.
            return Translation {
                mask: FlowKey {
                    in_port: u32::MAX,
                    ..FlowKey::default()
                },
                actions: Vec::new(),
                attribution: Arc::new(NoAttribution),
                generation: self.generation.get(),
            };
        };
        let entry = &map.bridges[&slot];
        let mut k = *key;
        k.in_port = of_port;
        let mut t = entry.ofproto.translate(&k, now_ms, learn);
        to_datapath(slot, entry, &mut t.actions);
        t
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
    use vsw_datapath::DpAction::{Controller, Meter, Output};
    use vsw_flow::parse_flow;

    fn pipeline(flows: &[&str]) -> Pipeline {
        let mut p = Pipeline::new();
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

    #[test]
    fn each_bridge_translates_its_own_ports_in_its_own_numbers() {
        let b = Backer::new();
        let (a, oa) = b
            .add_bridge(pipeline(&["in_port=1,actions=output:2"]))
            .unwrap();
        let (c, oc) = b
            .add_bridge(pipeline(&["in_port=1,actions=meter:3,output:65534"]))
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
            .add_bridge(pipeline(&["in_port=1,actions=output:2,output:3"]))
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
        let (_, _) = b.add_bridge(Pipeline::new()).unwrap();
        let (c, o) = b.add_bridge(pipeline(&["actions=controller"])).unwrap();
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
}
