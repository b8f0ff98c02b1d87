//! Flow offload: providers that forward some flows outside the PMDs (a kernel fast
//! path), and the manager that decides which flows they hold. A provider holds a
//! bounded number of flows; when it is full (out of resources, OOR), the manager can
//! swap its slowest flows for faster ones that wait, by packets per second.
//!
//! The manager is pure bookkeeping driven by [`OffloadManager::pass`]: the caller (the
//! revalidator, once per interval) hands it every rule with its userspace counters, and
//! it puts, deletes and swaps through the provider. Rules stay in the userspace
//! classifier all along, so a flow the provider lets go is forwarded by the PMDs from
//! the next packet on: a swap loses nothing.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use vsw_packet::key::{FRAG_ANY, FRAG_LATER, IPPROTO_TCP, IPPROTO_UDP};
use vsw_packet::{EtherType, FlowKey, MacAddr};

use crate::dpflow::{DpAction, DpFlow};
pub use vsw_protocol::OffloadStats;

/// A datapath flow's identity (`DpFlow::id`).
pub type FlowId = u64;

/// What a provider is asked to forward: packets received on `in_port` that match
/// `key` under `mask` (the in-port always exact), and what to do with them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffloadFlow {
    pub in_port: u32,
    pub key: FlowKey,
    pub mask: FlowKey,
    pub action: OffloadAction,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OffloadAction {
    Output(u32),
    Drop,
}

#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum OffloadError {
    /// The provider is full (its out-of-resource condition).
    #[error("out of resources")]
    NoSpace,
    /// The provider cannot take this flow, or failed.
    #[error("{0}")]
    Refused(String),
}

/// A fast path that forwards flows by itself.
pub trait OffloadProvider: Send {
    /// The provider's kind, as `offload=` names it.
    fn kind(&self) -> &'static str;
    /// The most flows it holds.
    fn capacity(&self) -> usize;
    /// Installs (or replaces) a flow.
    fn put(&mut self, id: FlowId, flow: &OffloadFlow) -> Result<(), OffloadError>;
    /// Removes a flow; removing one it does not hold is not an error.
    fn delete(&mut self, id: FlowId) -> Result<(), OffloadError>;
    /// Packets the provider forwarded for a flow it holds (since it was put).
    fn packets(&self, id: FlowId) -> Option<u64>;
    /// Entries an earlier run of vsw left forwarding in this fast path
    /// (`offload-persist`) that no flow of this run holds yet. A `put` of an equal
    /// flow takes its entry over without a moment out of the fast path.
    fn adopted(&mut self) -> Vec<OffloadFlow> {
        Vec::new()
    }
    /// How many adopted entries there are.
    fn adopted_count(&self) -> usize {
        0
    }
    /// Takes an adopted entry out of the fast path.
    fn drop_adopted(&mut self, _flow: &OffloadFlow) {}
    /// From now on, dropping the provider leaves its fast path forwarding (a planned
    /// restart with `offload-persist`) instead of taking it away.
    fn keep_in_kernel(&mut self) {}
}

/// The header fields an exact offload entry pins down: the input port, both MAC
/// addresses, "no VLAN tag", IPv4, and the TCP/UDP 5-tuple. A datapath flow whose
/// megaflow looks at nothing else can be forwarded by an exact entry made from any
/// one packet of it (the first one's key): every packet the entry takes is one the
/// megaflow takes.
pub fn exact_entry_mask() -> FlowKey {
    FlowKey {
        in_port: u32::MAX,
        // Every datapath flow matches its pass; an entry is a packet's first
        // (`offloadable` takes no other).
        recirc_id: u32::MAX,
        dl_src: MacAddr([0xff; 6]),
        dl_dst: MacAddr([0xff; 6]),
        vlan_tci: u16::MAX,
        dl_type: u16::MAX,
        nw_src: u128::MAX,
        nw_dst: u128::MAX,
        nw_proto: u8::MAX,
        nw_frag: FRAG_ANY | FRAG_LATER,
        tp_src: u16::MAX,
        tp_dst: u16::MAX,
        ..FlowKey::default()
    }
}

/// Whether an exact entry can stand for a packet with this key: untagged, IPv4, TCP
/// or UDP, not a fragment.
pub fn exact_entry_fits(k: &FlowKey) -> bool {
    k.dl_type == EtherType::IPV4
        && (k.nw_proto == IPPROTO_TCP || k.nw_proto == IPPROTO_UDP)
        && k.vlan_tci == 0
        && k.nw_frag == 0
}

/// Why a datapath flow cannot be offloaded, or `Ok` with the exact entry a provider
/// gets on its behalf.
pub fn offloadable(flow: &DpFlow) -> Result<OffloadFlow, String> {
    let exact = exact_entry_mask();
    let wider = flow
        .matcher
        .mask()
        .words()
        .iter()
        .zip(exact.words())
        .any(|(m, e)| m & !e != 0);
    if wider {
        return Err("megaflow-needs-more-fields".into());
    }
    let k = &flow.key;
    if k.recirc_id != 0 || flow.recirculates {
        // The kernel fast path looks a packet up once.
        return Err("recirculation".into());
    }
    if k.tun_id != 0
        || k.tun_src != 0
        || k.tun_dst != 0
        || k.tun_metadata0 != 0
        || k.tun_flags != 0
        || flow.actions.iter().any(|a| {
            matches!(
                a,
                DpAction::SetTunnel(_)
                    | DpAction::SetTunnelDst(_)
                    | DpAction::SetTunnelMetadata(_)
                    | DpAction::TunnelPush(_)
                    | DpAction::TunnelPop(_)
            )
        })
    {
        // Decapsulated or to be encapsulated: the kernel fast path has no tunnel
        // ports (vsw's are userspace's own), so the flow stays here.
        return Err("tunnel-flow".into());
    }
    if !exact_entry_fits(k) {
        return Err("not-untagged-ipv4-tcp-udp".into());
    }
    let action = match &flow.actions[..] {
        [] => OffloadAction::Drop,
        [DpAction::Output(p)] => OffloadAction::Output(*p),
        [_] if flow.rewrites => return Err("actions-rewrite".into()),
        _ => return Err("actions-several-outputs".into()),
    };
    Ok(OffloadFlow {
        in_port: k.in_port,
        key: k.masked(&exact),
        mask: exact,
        action,
    })
}

/// The manager's options.
#[derive(Clone, Copy, Debug)]
pub struct OffloadPolicy {
    /// Swap slow offloaded flows for faster pending ones while the provider is full.
    pub rebalance: bool,
    /// A pending flow replaces an offloaded one only when it is this much faster
    /// (1.1 = 10 %): flows of about equal rate do not flap.
    pub hysteresis: f64,
    /// The most swaps in one pass.
    pub max_swaps: usize,
}

impl Default for OffloadPolicy {
    fn default() -> Self {
        OffloadPolicy {
            rebalance: false,
            hysteresis: 1.1,
            max_swaps: 16,
        }
    }
}

/// One rule as the revalidator sees it in a pass.
#[derive(Clone, Debug)]
pub struct FlowSample {
    pub id: FlowId,
    /// Packets the PMDs counted on the rule.
    pub userspace_packets: u64,
    /// What the provider would get, or why the rule cannot be offloaded.
    pub offload: Result<OffloadFlow, String>,
}

/// Where a flow stands.
#[derive(Clone, Debug, PartialEq)]
pub enum OffloadState {
    Offloaded,
    /// Eligible, waiting for room (the provider is out of resources).
    PendingOor,
    /// Not offloadable: why.
    NotEligible(String),
    /// The provider refused it: why.
    Failed(String),
}

#[derive(Debug)]
struct Tracked {
    state: OffloadState,
    /// Provider packets of earlier stays in the provider (kept when it leaves).
    retired: u64,
    /// The total at the last pass, and the rate it gave.
    last_total: Option<u64>,
    pps: f64,
    /// The provider's count when activity was last looked for.
    seen_provider: u64,
}

/// What the manager reports of one flow.
#[derive(Clone, Debug, PartialEq)]
pub struct FlowOffloadView {
    pub state: OffloadState,
    pub pps: f64,
    /// Userspace and provider packets together: exact across moves.
    pub packets: u64,
}

/// Keeps one provider's flows: which it holds, their rates, and the swaps.
pub struct OffloadManager {
    provider: Box<dyn OffloadProvider>,
    pub policy: OffloadPolicy,
    flows: HashMap<FlowId, Tracked>,
    stats: OffloadStats,
}

impl OffloadManager {
    pub fn new(provider: Box<dyn OffloadProvider>, policy: OffloadPolicy) -> OffloadManager {
        OffloadManager {
            stats: OffloadStats {
                capacity: provider.capacity(),
                ..OffloadStats::default()
            },
            provider,
            policy,
            flows: HashMap::new(),
        }
    }

    pub fn kind(&self) -> &'static str {
        self.provider.kind()
    }

    pub fn stats(&self) -> OffloadStats {
        OffloadStats {
            adopted: self.provider.adopted_count(),
            ..self.stats.clone()
        }
    }

    /// The provider's adopted entries (see [`OffloadProvider::adopted`]).
    pub fn adopted(&mut self) -> Vec<OffloadFlow> {
        self.provider.adopted()
    }

    pub fn adopted_count(&self) -> usize {
        self.provider.adopted_count()
    }

    /// Takes an adopted entry out of the fast path.
    pub fn drop_adopted(&mut self, flow: &OffloadFlow) {
        self.provider.drop_adopted(flow);
    }

    /// The fast path outlives the manager (see [`OffloadProvider::keep_in_kernel`]).
    pub fn keep_in_kernel(&mut self) {
        self.provider.keep_in_kernel();
    }

    /// A flow's state, rate and exact packet count, given its userspace packets.
    pub fn view(&self, id: FlowId, userspace_packets: u64) -> Option<FlowOffloadView> {
        let t = self.flows.get(&id)?;
        Some(FlowOffloadView {
            state: t.state.clone(),
            pps: t.pps,
            packets: userspace_packets + self.provider_total(id, t),
        })
    }

    fn provider_total(&self, id: FlowId, t: &Tracked) -> u64 {
        let now = if t.state == OffloadState::Offloaded {
            self.provider.packets(id).unwrap_or(0)
        } else {
            0
        };
        t.retired + now
    }

    /// Takes a flow out of the provider, keeping what it counted.
    fn retire(&mut self, id: FlowId) {
        let counted = self.provider.packets(id).unwrap_or(0);
        if let Err(e) = self.provider.delete(id) {
            tracing::warn!(flow = id, error = %e, "offload delete failed");
        }
        if let Some(t) = self.flows.get_mut(&id) {
            t.retired += counted;
            // The provider counts afresh when the flow comes back.
            t.seen_provider = 0;
        }
    }

    /// One revalidator pass, `elapsed_ms` after the last: rates from `samples` (every
    /// installed rule),
    /// rules that went away let go, new flows put while there is room, and with
    /// rebalancing the slowest offloaded flows swapped for faster pending ones.
    pub fn pass(&mut self, elapsed_ms: u64, samples: &[FlowSample]) {
        let started = std::time::Instant::now();
        self.withdraw(samples);
        self.rates_and_puts(elapsed_ms, samples);
        self.stats.passes += 1;
        self.stats.last_pass_us = started.elapsed().as_micros() as u64;
    }

    /// The part of a pass that must not wait for the next one: flows whose rule went
    /// away, or can no longer be offloaded (a rule above them came), leave the
    /// provider, so that the fast path never forwards what userspace would not. Run
    /// by every change of the rules before it is answered.
    pub fn withdraw(&mut self, samples: &[FlowSample]) {
        // Rules removed from the table leave the provider.
        let present: std::collections::HashSet<FlowId> = samples.iter().map(|s| s.id).collect();
        let gone: Vec<FlowId> = self
            .flows
            .keys()
            .filter(|id| !present.contains(id))
            .copied()
            .collect();
        for id in gone {
            if self.flows[&id].state == OffloadState::Offloaded {
                let _ = self.provider.delete(id);
            }
            self.flows.remove(&id);
        }
        // Flows that can no longer be offloaded (a rule above them came) leave.
        let unfit: Vec<(FlowId, String)> = samples
            .iter()
            .filter(|s| {
                self.flows
                    .get(&s.id)
                    .is_some_and(|t| t.state == OffloadState::Offloaded)
            })
            .filter_map(|s| Some((s.id, s.offload.clone().err()?)))
            .collect();
        for (id, why) in unfit {
            self.retire(id);
            self.set_state(id, OffloadState::NotEligible(why));
        }
        self.count_used();
    }

    fn count_used(&mut self) {
        self.stats.oor = self
            .flows
            .values()
            .any(|t| t.state == OffloadState::PendingOor);
        self.stats.used = self
            .flows
            .values()
            .filter(|t| t.state == OffloadState::Offloaded)
            .count();
    }

    /// Flows the provider forwarded packets of since the last call: their rules are
    /// in use even though userspace sees nothing of them (idle timeouts).
    pub fn active(&mut self) -> Vec<FlowId> {
        let mut out = Vec::new();
        for (id, t) in self.flows.iter_mut() {
            if t.state != OffloadState::Offloaded {
                continue;
            }
            let now = self.provider.packets(*id).unwrap_or(0);
            if now != t.seen_provider {
                t.seen_provider = now;
                out.push(*id);
            }
        }
        out
    }

    fn rates_and_puts(&mut self, elapsed_ms: u64, samples: &[FlowSample]) {
        // Rates.
        for s in samples {
            let total = {
                let t = self.flows.entry(s.id).or_insert_with(|| Tracked {
                    state: match &s.offload {
                        Ok(_) => OffloadState::PendingOor,
                        Err(why) => OffloadState::NotEligible(why.clone()),
                    },
                    retired: 0,
                    last_total: None,
                    pps: 0.0,
                    seen_provider: 0,
                });
                match (&s.offload, &t.state) {
                    (Err(why), _) => t.state = OffloadState::NotEligible(why.clone()),
                    (Ok(_), OffloadState::NotEligible(_)) => t.state = OffloadState::PendingOor,
                    _ => {}
                }
                let t = &self.flows[&s.id];
                s.userspace_packets + self.provider_total(s.id, t)
            };
            let t = self.flows.get_mut(&s.id).expect("just inserted");
            if let Some(last) = t.last_total {
                if elapsed_ms > 0 {
                    t.pps = total.saturating_sub(last) as f64 * 1000.0 / elapsed_ms as f64;
                }
            }
            t.last_total = Some(total);
        }
        // New flows, fastest first, while the provider takes them.
        let mut waiting: Vec<&FlowSample> = samples
            .iter()
            .filter(|s| s.offload.is_ok() && self.flows[&s.id].state == OffloadState::PendingOor)
            .collect();
        waiting.sort_by(|a, b| self.flows[&b.id].pps.total_cmp(&self.flows[&a.id].pps));
        let mut full = false;
        let mut still_waiting = Vec::new();
        for s in waiting {
            if full {
                still_waiting.push(s);
                continue;
            }
            let flow = s.offload.as_ref().expect("filtered");
            match self.provider.put(s.id, flow) {
                Ok(()) => self.set_state(s.id, OffloadState::Offloaded),
                Err(OffloadError::NoSpace) => {
                    full = true;
                    still_waiting.push(s);
                }
                Err(OffloadError::Refused(why)) => self.set_state(s.id, OffloadState::Failed(why)),
            }
        }
        if full && self.policy.rebalance {
            self.rebalance(&mut still_waiting);
        }
        self.count_used();
    }

    fn set_state(&mut self, id: FlowId, state: OffloadState) {
        if let Some(t) = self.flows.get_mut(&id) {
            t.state = state;
        }
    }

    /// Pairs the slowest offloaded flows with the fastest waiting ones and swaps
    /// while the waiting one is faster by the hysteresis.
    fn rebalance(&mut self, waiting: &mut [&FlowSample]) {
        self.stats.rebalance_passes += 1;
        // `waiting` is fastest first already.
        let mut offloaded: Vec<(FlowId, f64)> = self
            .flows
            .iter()
            .filter(|(_, t)| t.state == OffloadState::Offloaded)
            .map(|(id, t)| (*id, t.pps))
            .collect();
        offloaded.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
        for (s, (slow, slow_pps)) in waiting.iter().zip(offloaded).take(self.policy.max_swaps) {
            let fast_pps = self.flows[&s.id].pps;
            if fast_pps <= slow_pps * self.policy.hysteresis || fast_pps == 0.0 {
                break;
            }
            // The slow flow goes back to the PMDs (its rule is there all along),
            // then the fast one takes its place.
            self.retire(slow);
            self.set_state(slow, OffloadState::PendingOor);
            let flow = s.offload.as_ref().expect("eligible");
            match self.provider.put(s.id, flow) {
                Ok(()) => {
                    self.set_state(s.id, OffloadState::Offloaded);
                    self.stats.swaps += 1;
                }
                Err(OffloadError::NoSpace) => break,
                Err(OffloadError::Refused(why)) => {
                    self.set_state(s.id, OffloadState::Failed(why));
                }
            }
        }
    }
}

/// An in-process provider with a capacity, for tests of the manager and for trying
/// the CLI: it holds flows and counts what the test (or nobody) tells it to; the
/// PMDs keep forwarding.
#[derive(Clone)]
pub struct DummyProvider {
    inner: Arc<Mutex<DummyState>>,
}

#[derive(Default)]
struct DummyState {
    capacity: usize,
    flows: HashMap<FlowId, (OffloadFlow, u64)>,
    /// Entries "left by an earlier run" (see [`DummyProvider::leave`]).
    adopted: Vec<OffloadFlow>,
    fail: Option<String>,
}

impl DummyProvider {
    pub fn new(capacity: usize) -> DummyProvider {
        DummyProvider {
            inner: Arc::new(Mutex::new(DummyState {
                capacity,
                ..DummyState::default()
            })),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, DummyState> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts `n` packets on a flow it holds (false when it does not hold it).
    pub fn count(&self, id: FlowId, n: u64) -> bool {
        match self.state().flows.get_mut(&id) {
            Some((_, c)) => {
                *c += n;
                true
            }
            None => false,
        }
    }

    pub fn holds(&self, id: FlowId) -> bool {
        self.state().flows.contains_key(&id)
    }

    /// Holds `flow` as if an earlier run had left it (an adopted entry).
    pub fn leave(&self, flow: OffloadFlow) {
        self.state().adopted.push(flow);
    }

    /// From now on every put fails with `why` (`None`: works again).
    pub fn fail_with(&self, why: Option<&str>) {
        self.state().fail = why.map(String::from);
    }
}

impl OffloadProvider for DummyProvider {
    fn kind(&self) -> &'static str {
        "dummy"
    }

    fn capacity(&self) -> usize {
        self.state().capacity
    }

    fn put(&mut self, id: FlowId, flow: &OffloadFlow) -> Result<(), OffloadError> {
        let mut s = self.state();
        if let Some(why) = &s.fail {
            return Err(OffloadError::Refused(why.clone()));
        }
        if let Some(held) = s.flows.get_mut(&id) {
            held.0 = flow.clone();
            return Ok(());
        }
        let adopted = s.adopted.iter().position(|a| a == flow);
        if adopted.is_none() && s.flows.len() + s.adopted.len() >= s.capacity {
            return Err(OffloadError::NoSpace);
        }
        if let Some(at) = adopted {
            s.adopted.remove(at);
        }
        s.flows.insert(id, (flow.clone(), 0));
        Ok(())
    }

    fn adopted(&mut self) -> Vec<OffloadFlow> {
        self.state().adopted.clone()
    }

    fn adopted_count(&self) -> usize {
        self.state().adopted.len()
    }

    fn drop_adopted(&mut self, flow: &OffloadFlow) {
        self.state().adopted.retain(|a| a != flow);
    }

    fn delete(&mut self, id: FlowId) -> Result<(), OffloadError> {
        self.state().flows.remove(&id);
        Ok(())
    }

    fn packets(&self, id: FlowId) -> Option<u64> {
        self.state().flows.get(&id).map(|(_, c)| *c)
    }
}

#[cfg(test)]
mod tests;
