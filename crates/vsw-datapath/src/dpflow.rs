//! Datapath flows (megaflows): a masked match and the datapath actions that
//! translating a packet through the pipeline produced for every packet agreeing with
//! it on the masked bits. A PMD caches them and executes them without looking at the
//! rules again; the revalidator checks them against the rules and the MAC table.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use vsw_flow::PacketMatch;
use vsw_packet::FlowKey;

pub use crate::dpaction::{format_dp_actions, DpAction};
use crate::upcall::{Attribution, Translation};

fn lock(m: &Mutex<Pushed>) -> MutexGuard<'_, Pushed> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// One cached datapath flow. The PMD that made it is the only one that executes it
/// and counts on it; the revalidator reads the counts, pushes them to the rules, and
/// retires the flow (`dead`) when the rules no longer give it.
pub struct DpFlow {
    /// Unique while the datapath runs (in `dump-dp-flows`).
    pub id: u64,
    /// The PMD (core) whose cache holds it.
    pub core: usize,
    /// The key of the packet it was translated from: revalidation translates it
    /// again.
    pub key: FlowKey,
    /// `key` under the translation's mask (in_port always exact).
    pub matcher: PacketMatch,
    pub actions: Box<[DpAction]>,
    /// Some action changes the packet.
    pub rewrites: bool,
    /// Some action looks the packet up again (`DpAction::Recirc`).
    pub recirculates: bool,
    pub created_ms: u64,
    packets: AtomicU64,
    bytes: AtomicU64,
    used_ms: AtomicU64,
    /// Packets an offload provider forwarded for it (set by the offload side).
    provider_packets: AtomicU64,
    /// In its PMD's registry, where the revalidator finds it (an upcall whose result
    /// was not cached makes a flow that is not).
    cached: AtomicBool,
    dead: AtomicBool,
    /// The inputs' generation it was last found right under.
    generation: AtomicU64,
    /// What the revalidator has pushed to the rules, and whom to credit.
    pushed: Mutex<Pushed>,
    /// The tunnel headers its `TunnelPush(i)` actions put in front, by index.
    pub headers: Box<[std::sync::Arc<crate::tunnel_push::PushHeader>]>,
    /// The port its packets count as received by (`Translation::rx_port`).
    pub rx_port: Option<u32>,
}

struct Pushed {
    packets: u64,
    bytes: u64,
    attribution: Arc<dyn Attribution>,
}

impl fmt::Debug for DpFlow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DpFlow")
            .field("id", &self.id)
            .field("core", &self.core)
            .field("matcher", &self.matcher)
            .field("actions", &self.actions)
            .field("dead", &self.is_dead())
            .finish()
    }
}

/// A flow's counters as read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DpFlowStats {
    pub packets: u64,
    pub bytes: u64,
    /// When a packet last used it (the PMD's clock, ms); `None` never.
    pub used_ms: Option<u64>,
}

impl DpFlow {
    pub fn new(id: u64, core: usize, key: &FlowKey, t: Translation, now_ms: u64) -> DpFlow {
        let mask = DpFlow::mask_of(&t.mask);
        DpFlow {
            id,
            core,
            key: *key,
            matcher: PacketMatch::new(*key, mask),
            rewrites: t.actions.iter().any(DpAction::rewrites),
            recirculates: t
                .actions
                .iter()
                .any(|a| matches!(a, DpAction::Recirc(_) | DpAction::TunnelPop(_))),
            actions: t.actions.into_boxed_slice(),
            headers: t.headers.into_boxed_slice(),
            rx_port: t.rx_port,
            created_ms: now_ms,
            packets: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            used_ms: AtomicU64::new(0),
            provider_packets: AtomicU64::new(0),
            cached: AtomicBool::new(false),
            dead: AtomicBool::new(false),
            generation: AtomicU64::new(t.generation),
            pushed: Mutex::new(Pushed {
                packets: 0,
                bytes: 0,
                attribution: t.attribution,
            }),
        }
    }

    /// The mask a datapath flow of translation mask `translated` has: every flow
    /// matches its input port, and its pass (a recirculation's pass is never taken
    /// for the first, nor one for another), exactly.
    pub fn mask_of(translated: &FlowKey) -> FlowKey {
        FlowKey {
            in_port: u32::MAX,
            recirc_id: u32::MAX,
            ..*translated
        }
    }

    /// Counts a batch's packets (the owning PMD, once per batch and flow).
    #[inline]
    pub fn add(&self, packets: u64, bytes: u64, now_ms: u64) {
        self.packets.fetch_add(packets, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
        self.used_ms.store(now_ms, Ordering::Relaxed);
    }

    /// Its counters: packets the PMD forwarded and packets an offload provider
    /// forwarded, together (bytes: the PMD's only).
    pub fn stats(&self) -> DpFlowStats {
        DpFlowStats {
            packets: self.packets.load(Ordering::Relaxed)
                + self.provider_packets.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
            used_ms: match self.used_ms.load(Ordering::Relaxed) {
                0 => None,
                t => Some(t),
            },
        }
    }

    /// Packets the PMD forwarded (an offload provider's left out).
    pub fn pmd_packets(&self) -> u64 {
        self.packets.load(Ordering::Relaxed)
    }

    /// An offload provider has forwarded `total` packets of this flow so far.
    pub fn set_provider_packets(&self, total: u64) {
        self.provider_packets.fetch_max(total, Ordering::Relaxed);
    }

    /// Packets went through it at `now_ms` elsewhere (an offload provider): not idle.
    pub fn seen(&self, now_ms: u64) {
        self.used_ms.fetch_max(now_ms, Ordering::Relaxed);
    }

    /// Registered where the revalidator finds it (and pushes its counts).
    #[inline]
    pub fn is_cached(&self) -> bool {
        self.cached.load(Ordering::Relaxed)
    }

    pub(crate) fn set_cached(&self) {
        self.cached.store(true, Ordering::Relaxed);
    }

    /// Retired: no packet may be forwarded by it once its PMD has seen this.
    #[inline]
    pub fn is_dead(&self) -> bool {
        self.dead.load(Ordering::Acquire)
    }

    pub(crate) fn kill(&self) {
        self.dead.store(true, Ordering::Release);
    }

    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Relaxed)
    }

    /// Found right again under `generation`, crediting `attribution` from now on.
    pub(crate) fn confirm(&self, generation: u64, attribution: Arc<dyn Attribution>) {
        self.generation.store(generation, Ordering::Relaxed);
        lock(&self.pushed).attribution = attribution;
    }

    /// Whether nothing its translation read changed since its generation; if so it
    /// is right under `current` too (read before asking), and says so.
    pub(crate) fn right_without_translation(&self, current: u64) -> bool {
        let p = lock(&self.pushed);
        let right = p.attribution.unchanged_since(self.generation());
        if right {
            self.generation.store(current, Ordering::Relaxed);
        }
        right
    }

    /// The rules its translation went through.
    pub fn rules(&self) -> Vec<Arc<vsw_flow::Rule>> {
        lock(&self.pushed).attribution.rules()
    }

    /// Hands what was counted since the last push to the rules (and whatever else
    /// the translation credits); returns the packets pushed.
    pub(crate) fn push_stats(&self) -> u64 {
        let now = self.stats();
        let mut p = lock(&self.pushed);
        let (packets, bytes) = (now.packets - p.packets, now.bytes - p.bytes);
        if packets > 0 {
            p.attribution
                .credit(packets, bytes, now.used_ms.unwrap_or(self.created_ms));
            p.packets = now.packets;
            p.bytes = now.bytes;
        }
        packets
    }
}
