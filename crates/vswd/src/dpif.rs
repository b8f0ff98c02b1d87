//! The datapath bridges run on (Open vSwitch's `dp_netdev` with its `dpif_backer`):
//! the PMD threads with their flow caches, the revalidator and the queues of
//! packets to and from the control side, with the backer that hands each miss to
//! the bridge that owns its input port. The datapath numbers ports densely from 1
//! across its bridges; a bridge keeps its own OpenFlow numbers and asks here for a
//! datapath number for each port it attaches.
//!
//! Locks: a bridge (its `Switch`) takes the datapath's lock, never the other way
//! round; the PMDs and the revalidator take neither.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use arc_swap::ArcSwap;
use vsw_datapath::assign::RxqAssign;
use vsw_datapath::{Datapath, DatapathError, PmdConfig, Punted, Punts, RevalidatorConfig};
use vsw_netdev::tunnel::TunnelWorld;
use vsw_ofproto::{Backer, BridgeSlot};

use crate::options::SwitchOptions;

/// What the datapath runs with, whichever bridge's options say it: one set for
/// the daemon (Open vSwitch's `Open_vSwitch` `other_config`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DaemonSettings {
    pub pmd_cores: Vec<usize>,
    pub rxq_assign: RxqAssign,
    pub emc_insert_inv_prob: u32,
    pub tx_flush_interval: u32,
    pub pmd_sleep_max: u32,
    pub flow_limit: usize,
    pub revalidator: RevalidatorConfig,
}

impl DaemonSettings {
    pub fn of(o: &SwitchOptions) -> DaemonSettings {
        DaemonSettings {
            pmd_cores: o.pmd_cores.clone(),
            rxq_assign: o.rxq_assign,
            emc_insert_inv_prob: o.emc_insert_inv_prob,
            tx_flush_interval: o.tx_flush_interval,
            pmd_sleep_max: o.pmd_sleep_max,
            flow_limit: o.flow_limit,
            revalidator: RevalidatorConfig {
                interval_ms: o.revalidator_interval_ms,
                max_idle_ms: o.max_idle_ms,
            },
        }
    }
}

/// Takes the packets a bridge's datapath actions send up.
pub type PuntHandler = Arc<dyn Fn(Punted) + Send + Sync>;

/// Datapath port numbers handed out: the lowest free one first, so that they stay
/// dense.
#[derive(Debug, Default)]
struct PortNumbers {
    /// Every number below it has been handed out once.
    next: u32,
    /// Handed out and given back.
    free: BTreeSet<u32>,
}

impl PortNumbers {
    fn take(&mut self) -> u32 {
        if let Some(n) = self.free.pop_first() {
            return n;
        }
        self.next += 1;
        self.next
    }

    fn give_back(&mut self, n: u32) {
        if n == self.next {
            self.next -= 1;
            // Numbers freed below it join it.
            while self.next > 0 && self.free.remove(&self.next) {
                self.next -= 1;
            }
        } else if n < self.next {
            self.free.insert(n);
        }
    }
}

thread_local! {
    /// Whether this thread holds a datapath's lock.
    static HELD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// The datapath while its lock is held.
pub struct DpGuard<'a>(MutexGuard<'a, Datapath>);

impl std::ops::Deref for DpGuard<'_> {
    type Target = Datapath;
    fn deref(&self) -> &Datapath {
        &self.0
    }
}

impl std::ops::DerefMut for DpGuard<'_> {
    fn deref_mut(&mut self) -> &mut Datapath {
        &mut self.0
    }
}

impl Drop for DpGuard<'_> {
    fn drop(&mut self) {
        HELD.with(|held| held.set(false));
    }
}

pub struct Dpif {
    dp: Mutex<Datapath>,
    backer: Arc<Backer>,
    numbers: Mutex<PortNumbers>,
    /// What the datapath runs with now.
    settings: Mutex<DaemonSettings>,
    /// Who takes what each bridge sends up (the punt thread reads it per packet).
    punt_handlers: Arc<ArcSwap<HashMap<BridgeSlot, PuntHandler>>>,
    /// Ends the punt thread.
    stop: Arc<AtomicBool>,
    /// The tunnels' state: routes, neighbours, tunnel ports, TLV maps.
    tunnels: Arc<TunnelWorld>,
    /// The datapath's connection tracker (`dpctl/*conntrack*`).
    conntrack: Arc<vsw_conntrack::Conntrack>,
}

impl Dpif {
    /// Starts a datapath with `settings` (its PMDs pinned to their cores), every
    /// miss handed to its backer, and the thread that hands what the datapath sends
    /// up to the bridge it came from.
    /// `tunnels` is the state its tunnel ports and LOCAL ports open in.
    pub fn start(
        settings: &DaemonSettings,
        tunnels: Arc<TunnelWorld>,
    ) -> Result<Arc<Dpif>, DatapathError> {
        let mut dp = Datapath::start(PmdConfig {
            cores: settings.pmd_cores.clone(),
            pin: true,
        })?;
        let backer = Backer::new();
        dp.set_upcall(backer.clone())?;
        // Tunnel ports send natively (their outer headers pushed in the packet's
        // own datapath pass) where the tunnels' state knows the way.
        backer.set_tunnel_egress(tunnels.clone());
        tunnels.count_datapath_drops(dp.decap_drops());
        // A change of routes, neighbours or tunnel ports re-translates the flows
        // that sent through a tunnel, at once.
        let watcher = Arc::downgrade(&backer);
        let kick = dp.revalidation_kick();
        tunnels.watch(Box::new(move || match watcher.upgrade() {
            Some(b) => {
                b.underlay_changed();
                kick.kick()
            }
            None => false,
        }));
        dp.set_rxq_assign(settings.rxq_assign)?;
        dp.set_emc_insert_inv_prob(settings.emc_insert_inv_prob)?;
        dp.set_tx_flush_interval(settings.tx_flush_interval)?;
        dp.set_pmd_sleep_max(settings.pmd_sleep_max)?;
        dp.set_flow_limit(settings.flow_limit)?;
        dp.start_revalidator(settings.revalidator)?;
        let punt_handlers: Arc<ArcSwap<HashMap<BridgeSlot, PuntHandler>>> =
            Arc::new(ArcSwap::from_pointee(HashMap::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (punts, handlers, halt) = (dp.punts(), punt_handlers.clone(), stop.clone());
        std::thread::Builder::new()
            .name("packet-in".into())
            .spawn(move || hand_punts_up(&punts, &handlers, &halt))
            .map_err(DatapathError::Spawn)?;
        let (world, asking_backer) = (Arc::downgrade(&tunnels), Arc::downgrade(&backer));
        let (punts, halt) = (dp.punts(), stop.clone());
        std::thread::Builder::new()
            .name("tunnel-neigh".into())
            .spawn(move || ask_for_neighbours(&world, &asking_backer, &punts, &halt))
            .map_err(DatapathError::Spawn)?;
        let conntrack = dp.conntrack();
        Ok(Arc::new(Dpif {
            conntrack,
            dp: Mutex::new(dp),
            backer,
            numbers: Mutex::new(PortNumbers::default()),
            settings: Mutex::new(settings.clone()),
            punt_handlers,
            stop,
            tunnels,
        }))
    }

    /// The datapath's connection tracker.
    pub fn conntrack(&self) -> &Arc<vsw_conntrack::Conntrack> {
        &self.conntrack
    }

    /// The tunnels' state its ports open in.
    pub fn tunnels(&self) -> &Arc<TunnelWorld> {
        &self.tunnels
    }

    /// Runs the datapath with `new`: what differs from what it runs with changes
    /// (the revalidator starts again only when its settings change). On an error
    /// the settings that were changed before it stay changed, and the ones after
    /// it are not: the caller puts back the old ones.
    pub fn apply(&self, new: &DaemonSettings) -> Result<(), DatapathError> {
        let mut now = self.settings.lock().unwrap_or_else(PoisonError::into_inner);
        let mut dp = self.dp();
        if new.pmd_cores != now.pmd_cores {
            dp.set_pmd_cores(new.pmd_cores.clone())?;
            now.pmd_cores = new.pmd_cores.clone();
        }
        if new.rxq_assign != now.rxq_assign {
            dp.set_rxq_assign(new.rxq_assign)?;
            now.rxq_assign = new.rxq_assign;
        }
        if new.emc_insert_inv_prob != now.emc_insert_inv_prob {
            dp.set_emc_insert_inv_prob(new.emc_insert_inv_prob)?;
            now.emc_insert_inv_prob = new.emc_insert_inv_prob;
        }
        if new.tx_flush_interval != now.tx_flush_interval {
            dp.set_tx_flush_interval(new.tx_flush_interval)?;
            now.tx_flush_interval = new.tx_flush_interval;
        }
        if new.pmd_sleep_max != now.pmd_sleep_max {
            dp.set_pmd_sleep_max(new.pmd_sleep_max)?;
            now.pmd_sleep_max = new.pmd_sleep_max;
        }
        if new.flow_limit != now.flow_limit {
            dp.set_flow_limit(new.flow_limit)?;
            now.flow_limit = new.flow_limit;
        }
        if new.revalidator != now.revalidator {
            dp.start_revalidator(new.revalidator)?;
            now.revalidator = new.revalidator;
        }
        Ok(())
    }

    /// What the datapath runs with.
    pub fn settings(&self) -> DaemonSettings {
        self.settings
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Bridge `slot`'s packets sent up go to `handler` (`None`: nowhere, dropped).
    pub fn set_punt_handler(&self, slot: BridgeSlot, handler: Option<PuntHandler>) {
        let mut next = (**self.punt_handlers.load()).clone();
        match handler {
            Some(h) => next.insert(slot, h),
            None => next.remove(&slot),
        };
        self.punt_handlers.store(Arc::new(next));
    }

    /// The datapath, for a change or a look. One thread takes it once at a time:
    /// taking it again while it holds it (two `dp()` in one expression keep both
    /// guards alive) panics rather than deadlocks.
    pub fn dp(&self) -> DpGuard<'_> {
        HELD.with(|held| {
            assert!(
                !held.get(),
                "the datapath's lock taken twice by one thread (a guard still alive)"
            );
            held.set(true);
        });
        DpGuard(self.dp.lock().unwrap_or_else(PoisonError::into_inner))
    }

    pub fn backer(&self) -> &Arc<Backer> {
        &self.backer
    }

    /// A datapath port number no port has.
    pub fn take_port_number(&self) -> u32 {
        self.numbers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    /// `n` is no port's any more.
    pub fn give_back_port_number(&self, n: u32) {
        self.numbers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .give_back(n);
    }
}

impl Drop for Dpif {
    fn drop(&mut self) {
        // The punt and neighbour threads see it within their waits (a second).
        self.stop.store(true, Ordering::Release);
    }
}

/// The punt thread: each packet a datapath action sent up goes to the handler of
/// the bridge its note names.
fn hand_punts_up(
    punts: &Punts,
    handlers: &ArcSwap<HashMap<BridgeSlot, PuntHandler>>,
    stop: &AtomicBool,
) {
    while !stop.load(Ordering::Acquire) {
        let Some(p) = punts.recv_timeout(Duration::from_secs(1)) else {
            continue;
        };
        let (slot, _) = Backer::punt_note(p.userdata);
        let handler = handlers.load().get(&slot).cloned();
        match handler {
            Some(h) => h(p),
            None => tracing::debug!(
                note = p.userdata,
                "a packet sent up by a bridge that is gone: dropped"
            ),
        }
    }
}

/// The neighbour thread: the ARP requests and neighbour solicitations the tunnels
/// need (a translation met a next hop without a MAC), each sent through its
/// underlay bridge's rules as from its LOCAL port (Open vSwitch's
/// `tnl_send_arp_request`).
fn ask_for_neighbours(
    world: &std::sync::Weak<TunnelWorld>,
    backer: &std::sync::Weak<Backer>,
    punts: &Punts,
    stop: &AtomicBool,
) {
    while !stop.load(Ordering::Acquire) {
        let Some(asks) = world.upgrade().map(|w| w.next_asks(Duration::from_secs(1))) else {
            return;
        };
        let Some(backer) = backer.upgrade() else {
            return;
        };
        for ask in asks {
            let now = vsw_datapath::clock::now_ms();
            let Some(packet) = backer.from_local(&ask.bridge, &ask.frame, now) else {
                continue;
            };
            if punts.inject(packet).is_err() {
                tracing::debug!(bridge = %ask.bridge, "a neighbour request found the PMDs' queue full");
            }
        }
    }
}

/// The OpenFlow in_port of a packet a datapath action sent up from datapath port
/// `dp`, for bridge `slot`: its OpenFlow number when it is one of the bridge's
/// ports, a reserved port's number as it is (a packet-out's, which no datapath port
/// is numbered as), else none (`u32::MAX`).
pub fn punted_in_port(backer: &Backer, slot: BridgeSlot, dp: u32) -> u32 {
    match backer.of_port(dp) {
        Some((s, of)) if s == slot => of,
        _ if dp > crate::options::MAX_PORT_NO => dp,
        _ => u32::MAX,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_numbers_stay_dense() {
        let mut n = PortNumbers::default();
        let taken: Vec<u32> = (0..5).map(|_| n.take()).collect();
        assert_eq!(taken, [1, 2, 3, 4, 5]);
        n.give_back(2);
        n.give_back(4);
        assert_eq!(n.take(), 2, "the lowest free first");
        n.give_back(5);
        assert_eq!(n.take(), 4);
        assert_eq!(n.take(), 5);
        for k in [1, 2, 3, 4, 5] {
            n.give_back(k);
        }
        assert_eq!((n.next, n.free.len()), (0, 0), "all given back: none kept");
        assert_eq!(n.take(), 1);
    }
}
