//! The seam between the datapath and the slow path above it. On a cache miss a PMD
//! asks an [`Upcall`] to translate the packet's key into datapath actions and the
//! mask of the bits that decided them; the datapath never knows what produced them
//! (rules, tables, MAC learning live in vsw-ofproto, which implements this).

use std::fmt;
use std::sync::Arc;

use vsw_packet::FlowKey;

use crate::dpaction::DpAction;

/// Who a datapath flow's packets are credited to: the rules its translation went
/// through, the MAC entries it relies on. Called by the revalidator, never a PMD.
pub trait Attribution: Send + Sync + fmt::Debug {
    /// `packets` and `bytes` went through the flow since the last call; the last one
    /// at `used_ms`.
    fn credit(&self, packets: u64, bytes: u64, used_ms: u64);

    /// The rules credited (for showing which rule a flow serves).
    fn rules(&self) -> Vec<Arc<vsw_flow::Rule>> {
        Vec::new()
    }

    /// Whether nothing the translation read has changed after `generation` (the
    /// generation it was made or last found right under): then it is right under
    /// the generation now too, without being translated again. Asked after the
    /// current generation was read. `false` when it cannot tell.
    fn unchanged_since(&self, _generation: u64) -> bool {
        false
    }
}

/// Credits nobody.
#[derive(Debug)]
pub struct NoAttribution;

impl Attribution for NoAttribution {
    fn credit(&self, _: u64, _: u64, _: u64) {}
}

/// What translating one key gave.
#[derive(Debug)]
pub struct Translation {
    /// The bits of the key the result depends on (1 = looked at).
    pub mask: FlowKey,
    /// Empty: drop.
    pub actions: Vec<DpAction>,
    /// The tunnel headers its `TunnelPush(i)` actions put in front, by index.
    pub headers: Vec<Arc<crate::tunnel_push::PushHeader>>,
    pub attribution: Arc<dyn Attribution>,
    /// The generation of the inputs (rules, MAC table, ports) it was made from; see
    /// [`Upcall::generation`].
    pub generation: u64,
    /// The datapath port its packets count as received by, where that is not the
    /// datapath's in_port: a popped tunnel packet's pass (received on the kind's
    /// receive point) counts on its tunnel port, as Open vSwitch's do.
    pub rx_port: Option<u32>,
    /// Whether its flow may be cached. Not when the answer holds only for the
    /// packet translated (its `learn` put a rule in place that later packets may
    /// meet, or could not do what the rules say): then every packet of the flow is
    /// translated, and a cached flow the revalidator finds so is retired.
    pub cacheable: bool,
}

/// The slow path, as the datapath sees it.
pub trait Upcall: Send + Sync {
    /// Changes whenever anything a translation reads changes. A flow translated under
    /// an older generation is not cached (it may be stale already), and the
    /// revalidator translates again every flow whose generation is not the current.
    fn generation(&self) -> u64;

    /// Translates `key` (a packet's, or a cached flow's when revalidating). `learn`:
    /// a packet is really passing, so MAC learning may take note of it.
    fn translate(&self, key: &FlowKey, now_ms: u64, learn: bool) -> Translation;

    /// Translates the key of a packet passing now, `frame` the bytes it was
    /// extracted from: as [`Upcall::translate`] with `learn`, and the slow path may
    /// read the packet itself (multicast snooping reads the IGMP and MLD reports).
    fn translate_packet(&self, key: &FlowKey, frame: &[u8], now_ms: u64) -> Translation {
        let _ = frame;
        self.translate(key, now_ms, true)
    }

    /// A revalidator pass begins at `now_ms`: what ages (MAC and multicast group
    /// entries) may age now.
    fn revalidating(&self, _now_ms: u64) {}
}

/// Drops everything: the datapath before a slow path is attached.
#[derive(Debug)]
pub struct DropAll;

impl Upcall for DropAll {
    fn generation(&self) -> u64 {
        0
    }

    fn translate(&self, _: &FlowKey, _: u64, _: bool) -> Translation {
        Translation {
            mask: FlowKey::default(),
            actions: Vec::new(),
            headers: Vec::new(),
            attribution: Arc::new(NoAttribution),
            generation: 0,
            rx_port: None,
            cacheable: true,
        }
    }
}
