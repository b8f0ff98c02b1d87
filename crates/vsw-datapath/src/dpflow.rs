//! Datapath flows (megaflows): a masked match and the datapath actions that
//! translating a packet through the pipeline produced for every packet agreeing with
//! it on the masked bits. A PMD caches them and executes them without looking at the
//! rules again; the revalidator checks them against the rules and the MAC table.

use std::fmt;
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use vsw_flow::Match;
use vsw_packet::{FlowKey, MacAddr};

use crate::shared::lock;
use crate::upcall::{Attribution, Translation};

/// What the datapath does with a packet of a flow: a small set, each cheap to run.
/// An empty list drops the packet. Tunnel push/pop and recirculation will join it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DpAction {
    /// Send to this port as the packet is now.
    Output(u32),
    SetDlSrc(MacAddr),
    SetDlDst(MacAddr),
    /// Push an outer tag with this TPID (VID and PCP 0 until set).
    PushVlan(u16),
    /// Set the outer tag's VID (pushing a tag when there is none).
    SetVlanVid(u16),
    /// Set the outer tag's PCP (pushing a tag when there is none).
    SetVlanPcp(u8),
    PopVlan,
    SetNwSrc(Ipv4Addr),
    SetNwDst(Ipv4Addr),
    /// The DSCP bits (ECN kept), as a TOS value.
    SetNwTos(u8),
    SetTpSrc(u16),
    SetTpDst(u16),
    /// Decrement the TTL or hop limit; a packet whose TTL runs out goes no further.
    DecTtl,
}

impl DpAction {
    /// True when the action changes the packet (so it runs on a copy).
    pub fn rewrites(&self) -> bool {
        !matches!(self, DpAction::Output(_))
    }
}

impl fmt::Display for DpAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DpAction::Output(p) => write!(f, "{p}"),
            DpAction::SetDlSrc(m) => write!(f, "set(eth(src={m}))"),
            DpAction::SetDlDst(m) => write!(f, "set(eth(dst={m}))"),
            DpAction::PushVlan(t) => write!(f, "push_vlan(tpid=0x{t:04x})"),
            DpAction::SetVlanVid(v) => write!(f, "set(vlan(vid={v}))"),
            DpAction::SetVlanPcp(p) => write!(f, "set(vlan(pcp={p}))"),
            DpAction::PopVlan => f.write_str("pop_vlan"),
            DpAction::SetNwSrc(a) => write!(f, "set(ipv4(src={a}))"),
            DpAction::SetNwDst(a) => write!(f, "set(ipv4(dst={a}))"),
            DpAction::SetNwTos(t) => write!(f, "set(ip(tos={t}))"),
            DpAction::SetTpSrc(p) => write!(f, "set(l4(src={p}))"),
            DpAction::SetTpDst(p) => write!(f, "set(l4(dst={p}))"),
            DpAction::DecTtl => f.write_str("dec_ttl"),
        }
    }
}

/// Prints a list of datapath actions as `dpctl/dump-flows` does (`drop` when empty).
pub fn format_dp_actions(actions: &[DpAction]) -> String {
    if actions.is_empty() {
        return "drop".into();
    }
    actions
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
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
    pub matcher: Match,
    pub actions: Box<[DpAction]>,
    /// Some action changes the packet.
    pub rewrites: bool,
    pub created_ms: u64,
    packets: AtomicU64,
    bytes: AtomicU64,
    used_ms: AtomicU64,
    dead: AtomicBool,
    /// The inputs' generation it was last found right under.
    generation: AtomicU64,
    /// What the revalidator has pushed to the rules, and whom to credit.
    pushed: Mutex<Pushed>,
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
        let mut mask = t.mask;
        mask.in_port = u32::MAX;
        DpFlow {
            id,
            core,
            key: *key,
            matcher: Match::new(*key, mask),
            rewrites: t.actions.iter().any(DpAction::rewrites),
            actions: t.actions.into_boxed_slice(),
            created_ms: now_ms,
            packets: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            used_ms: AtomicU64::new(0),
            dead: AtomicBool::new(false),
            generation: AtomicU64::new(t.generation),
            pushed: Mutex::new(Pushed {
                packets: 0,
                bytes: 0,
                attribution: t.attribution,
            }),
        }
    }

    /// Counts a batch's packets (the owning PMD, once per batch and flow).
    #[inline]
    pub fn add(&self, packets: u64, bytes: u64, now_ms: u64) {
        self.packets.fetch_add(packets, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
        self.used_ms.store(now_ms, Ordering::Relaxed);
    }

    pub fn stats(&self) -> DpFlowStats {
        DpFlowStats {
            packets: self.packets.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
            used_ms: match self.used_ms.load(Ordering::Relaxed) {
                0 => None,
                t => Some(t),
            },
        }
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
