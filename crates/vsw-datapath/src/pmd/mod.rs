//! A poll-mode driver thread: polls the receive queues assigned to it, finds each
//! packet's datapath flow (exact-match cache, then the megaflows, then an upcall to
//! the slow path), runs the flow's actions and sends the output batches.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use arrayvec::ArrayVec;
use vsw_packet::gro::Gro;
use vsw_packet::rewrite::PacketBuf;
use vsw_packet::{extract, FlowKey, VnetHdr};

mod outputs;
mod pass;

use outputs::{send, LocalTx, Outputs, TxTally, FIXUP_BUFFER};
use pass::{run_rewriting, Origin, Recirculation, SavedCopies};

use crate::clock;
use crate::dpaction::MAX_RECIRC_DEPTH;
use crate::dpflow::{DpAction, DpFlow};
use crate::emc::{key_hash, Emc};
use crate::flow_table::FlowTable;
use crate::port::{RxBatch, RxQueue, BATCH_SIZE};
use crate::port_map::PortMap;
use crate::shared::{lock, PmdControl, PortHandle, Shared, Snapshot};
use crate::stats::{PmdCounters, PortStats};
use crate::txbatch::{BatchClock, AUTO_DEFAULT_US};

/// How long a PMD with nothing to poll sleeps before looking for a change again
/// (a change wakes it at once).
const NO_QUEUES_PARK: Duration = Duration::from_millis(100);

/// The largest frame a rewrite copies (a TSO super-frame plus headroom for tags).
const MAX_REWRITE_FRAME: usize = 65_535 + 64;

struct OwnedRxq {
    handle: Arc<PortHandle>,
    index: usize,
    queue: Box<dyn RxQueue>,
    /// Cycles spent on this queue's batches, and the PMD's cycle count when it got
    /// the queue.
    busy_cycles: u64,
    assigned_at: u64,
}

/// Everything a PMD changes while it processes packets.
struct Worker {
    outputs: Outputs,
    emc: Emc<DpFlow>,
    /// Bumped whenever retired flows leave `flows`: the cache forgets its entries.
    emc_generation: u64,
    /// This PMD's datapath flows (megaflows).
    flows: FlowTable,
    /// The slow path the flows were made by (`Snapshot::upcall_epoch`).
    upcall_epoch: u64,
    /// The slow path's generation as the last upcall saw it: a newer one wakes the
    /// revalidator (a host was learned or moved).
    last_generation: u64,
    key: FlowKey,
    scratch: PacketBuf,
    saved: SavedCopies,
    counters: PmdCounters,
    /// Received frames dropped for broken headers (part of `lost`).
    malformed: u64,
}

pub(crate) struct Pmd {
    shared: Arc<Shared>,
    control: Arc<PmdControl>,
    snapshot: Option<Arc<Snapshot>>,
    rxqs: Vec<OwnedRxq>,
    /// Queues assigned to this PMD that another PMD has not handed back yet.
    pending: Vec<(Arc<PortHandle>, usize)>,
    /// Set once the PMD was pinned to its core (whether it could be or not).
    pinned: bool,
    worker: Worker,
    /// `pmd-sleep-max`: the longest an idle PMD sleeps (µs); 0 never sleeps.
    sleep_max_us: u64,
    /// The revalidator's last sweep request this PMD did.
    swept: u64,
    /// The last `install_flows` request this PMD took.
    installs_taken: u64,
}

impl Pmd {
    pub fn new(shared: Arc<Shared>, control: Arc<PmdControl>) -> Pmd {
        Pmd {
            shared,
            control,
            snapshot: None,
            rxqs: Vec::new(),
            pending: Vec::new(),
            pinned: false,
            sleep_max_us: 0,
            swept: 0,
            installs_taken: 0,
            worker: Worker {
                outputs: Outputs {
                    by_port: PortMap::default(),
                    fixup: vec![0u8; FIXUP_BUFFER].into_boxed_slice(),
                    tally: TxTally::default(),
                    tunnel_ip_id: 0,
                },
                emc: Emc::new(crate::emc::DEFAULT_INSERT_INV_PROB),
                emc_generation: 1,
                flows: FlowTable::default(),
                upcall_epoch: 0,
                last_generation: 0,
                key: FlowKey::default(),
                scratch: PacketBuf::new(MAX_REWRITE_FRAME),
                saved: SavedCopies::new(),
                counters: PmdCounters::default(),
                malformed: 0,
            },
        }
    }

    /// Takes up the newest snapshot: queues this PMD no longer polls go back to their
    /// ports, removed ports' transmit queues are flushed and given back, new ports get a
    /// transmit queue, and the flows the revalidator retired leave the caches.
    fn reconfigure(&mut self) {
        let snap = self.shared.snapshot.load_full();
        let core = self.control.core;
        if self.control.fail_on_reconfigure.load(Ordering::Acquire) {
            panic!("failure injected on core {core}");
        }
        if self.control.pin && !self.pinned {
            if core_affinity::set_for_current(core_affinity::CoreId { id: core }) {
                tracing::info!(core, "PMD pinned");
            } else {
                tracing::warn!(core, "could not pin the PMD to its core");
            }
            self.pinned = true;
        }
        let mine = |h: &Arc<PortHandle>, q: usize| {
            snap.ports.iter().any(|p| Arc::ptr_eq(p, h))
                && snap
                    .assignment
                    .iter()
                    .any(|a| a.port == h.no && a.queue == q && a.core == core)
        };
        // Let go of queues first, so that their new PMD can take them.
        let mut kept = Vec::with_capacity(self.rxqs.len());
        for rxq in self.rxqs.drain(..) {
            if mine(&rxq.handle, rxq.index) {
                kept.push(rxq);
            } else {
                give_back_rx(rxq);
            }
        }
        self.rxqs = kept;
        self.pending.retain(|(h, q)| mine(h, *q));
        for a in snap.assignment.iter().filter(|a| a.core == core) {
            let Some(h) = snap.ports.iter().find(|p| p.no == a.port) else {
                continue;
            };
            let held = self
                .rxqs
                .iter()
                .any(|r| Arc::ptr_eq(&r.handle, h) && r.index == a.queue);
            let waiting = self
                .pending
                .iter()
                .any(|(p, q)| Arc::ptr_eq(p, h) && *q == a.queue);
            if !held && !waiting {
                self.pending.push((h.clone(), a.queue));
            }
        }
        let w = &mut self.worker;
        let tally = &mut w.outputs.tally;
        w.outputs.by_port.remove_where(
            |tx| !snap.ports.iter().any(|p| Arc::ptr_eq(p, &tx.handle)),
            |mut tx| {
                tx.flush_gro(tally);
                send(&mut tx, tally.now_us);
                // Back to its port, never closed here: closing a socket can wait in
                // the kernel (an AF_PACKET ring for RCU grace periods), and the PMD
                // waits for nothing. The port's last handle, on the control side,
                // closes it.
                tx.handle.give_back_tx(tx.queue);
            },
        );
        for port in &snap.ports {
            if !w.outputs.by_port.contains(port.no) {
                match port.take_tx() {
                    Some(queue) => {
                        let offloads = queue.offloads();
                        w.outputs.by_port.insert(
                            port.no,
                            LocalTx {
                                handle: port.clone(),
                                offloads,
                                queue,
                                staged_packets: 0,
                                staged_bytes: 0,
                                // Only a device that takes super-frames, on a host's
                                // stack, gets merged ones.
                                gro: (offloads.tso && offloads.merges)
                                    .then(|| Box::new(Gro::new())),
                                gro_tunnel: Default::default(),
                                clock: BatchClock::new(snap.tx_interval(port.no)),
                                auto: false,
                                asked_tunnel_tso: false,
                            },
                        )
                    }
                    None => tracing::warn!(port = %port.name, core, "no transmit queue"),
                }
            }
        }
        // A changed interval applies to what is held now: a shorter one sends it
        // sooner, none strands it.
        for tx in w.outputs.by_port.values_mut() {
            let no = tx.handle.no;
            tx.auto = snap.tx_auto.contains(&no) && tx.queue.receiver_may_poll();
            tx.clock.interval_us = u64::from(if tx.auto && snap.tx_interval_default == 0 {
                AUTO_DEFAULT_US
            } else {
                snap.tx_interval(no)
            });
        }
        self.sleep_max_us = u64::from(snap.pmd_sleep_max_us);
        if w.upcall_epoch != snap.upcall_epoch {
            // Another slow path: nothing the old one said holds.
            w.upcall_epoch = snap.upcall_epoch;
            w.flows.clear();
            lock(&self.control.flows).clear();
            w.emc_generation += 1;
            w.emc.invalidate(w.emc_generation);
        } else if w.flows.remove_dead() > 0 {
            // The revalidator retired flows and waits for this acknowledgement: from
            // here on no packet is forwarded by them.
            w.emc_generation += 1;
            w.emc.invalidate(w.emc_generation);
        }
        w.emc.set_insert_inv_prob(snap.emc_insert_inv_prob);
        let generation = snap.generation;
        self.snapshot = Some(snap);
        self.take_pending();
        self.control.ack(generation);
    }

    /// Takes the assigned queues that their former PMD has handed back.
    fn take_pending(&mut self) {
        let now = clock::cycles();
        let rxqs = &mut self.rxqs;
        self.pending.retain(|(h, q)| {
            let Some(slot) = h.rxqs.get(*q) else {
                return false;
            };
            let Some(queue) = slot.queue.lock().unwrap_or_else(|e| e.into_inner()).take() else {
                return true;
            };
            slot.stats.busy_cycles.store(0, Ordering::Relaxed);
            slot.stats.pmd_cycles.store(0, Ordering::Relaxed);
            rxqs.push(OwnedRxq {
                handle: h.clone(),
                index: *q,
                queue,
                busy_cycles: 0,
                assigned_at: now,
            });
            false
        });
    }

    pub fn run(mut self) {
        self.reconfigure();
        let hz = clock::cycles_per_second();
        let mut last = clock::cycles();
        let mut next_housekeeping = last;
        // Milliseconds and microseconds come from the cycle counter read anyway, once
        // per iteration, not from a clock call (see clock.rs for why the TSC).
        let (start_ms, start_cycles) = (clock::now_ms(), last);
        let cycles_per_ms = (hz / 1000).max(1);
        let cycles_per_us = (hz / 1_000_000).max(1);
        clock::allow_precise_sleep();
        // The current idle sleep: doubles with every idle iteration up to the maximum.
        let mut idle_sleep_us = 0u64;
        while !self.control.stop.load(Ordering::Acquire) {
            let generation = self.shared.generation.load(Ordering::Acquire);
            if self
                .snapshot
                .as_ref()
                .is_none_or(|s| s.generation != generation)
            {
                let t = clock::cycles();
                self.reconfigure();
                let took = clock::cycles().wrapping_sub(t);
                let c = &mut self.worker.counters;
                c.max_reconfigure_cycles = c.max_reconfigure_cycles.max(took);
            }
            if !self.pending.is_empty() {
                self.take_pending();
            }
            let sweep = self.control.sweep_requested.load(Ordering::Acquire);
            if sweep != self.swept {
                // The revalidator retired flows and waits: from here on no packet is
                // forwarded by them.
                let w = &mut self.worker;
                w.flows.remove_dead();
                w.emc_generation += 1;
                w.emc.invalidate(w.emc_generation);
                self.swept = sweep;
                self.control.ack_sweep(sweep);
            }
            let installs = self.control.installs_requested.load(Ordering::Acquire);
            if installs != self.installs_taken && self.install_flows() {
                self.installs_taken = installs;
            }
            let Some(snap) = self.snapshot.as_deref() else {
                break;
            };
            self.worker
                .send_injected((snap, &self.shared, &self.control), || {
                    start_ms + last.wrapping_sub(start_cycles) / cycles_per_ms
                });
            if self.rxqs.is_empty() {
                std::thread::park_timeout(NO_QUEUES_PARK);
                last = clock::cycles();
                continue;
            }
            let since_start = last.wrapping_sub(start_cycles);
            let now_ms = start_ms + since_start / cycles_per_ms;
            let now_us = since_start / cycles_per_us;
            self.worker.outputs.tally.now_us = now_us;
            self.worker.outputs.tally.now_ms = now_ms;
            let mut received = 0;
            for rxq in &mut self.rxqs {
                let start = clock::cycles();
                let n = process_batch(
                    &mut self.worker,
                    snap,
                    &self.shared,
                    &self.control,
                    rxq,
                    now_ms,
                );
                if n > 0 {
                    rxq.busy_cycles += clock::cycles().wrapping_sub(start);
                }
                received += n;
            }
            self.worker.outputs.send_due();

            let now = clock::cycles();
            let spent = now.wrapping_sub(last);
            last = now;
            let c = &mut self.worker.counters;
            if self.control.clear_max.swap(false, Ordering::Relaxed) {
                c.max_iteration_cycles = 0;
                c.max_reconfigure_cycles = 0;
            }
            c.max_iteration_cycles = c.max_iteration_cycles.max(spent);
            if received > 0 {
                c.busy_cycles += spent;
                c.packets += received as u64;
            } else {
                c.idle_cycles += spent;
            }
            c.iterations += 1;
            if now >= next_housekeeping {
                next_housekeeping = now + hz;
                self.housekeeping(now);
            }
            let o = &self.worker.outputs.tally;
            let c = &mut self.worker.counters;
            c.tx_batches = o.batches;
            c.tx_packets = o.packets;
            c.lost = o.lost + self.worker.malformed;
            c.flows = self.worker.flows.len() as u64;
            self.control.stats.publish(c);
            if received > 0 || self.sleep_max_us == 0 {
                idle_sleep_us = 0;
                continue;
            }
            // Idle: sleep a little longer each time, never past a held batch's
            // deadline, so no packet waits longer than its interval for the sleep.
            idle_sleep_us = (idle_sleep_us * 2).clamp(1, self.sleep_max_us);
            let now_us = now.wrapping_sub(start_cycles) / cycles_per_us;
            let sleep = match self.worker.outputs.earliest_deadline() {
                Some(d) => idle_sleep_us.min(d.saturating_sub(now_us)),
                None => idle_sleep_us,
            };
            if sleep > 0 {
                std::thread::sleep(Duration::from_micros(sleep));
                let woke = clock::cycles();
                let c = &mut self.worker.counters;
                c.idle_cycles += woke.wrapping_sub(now);
                c.sleep_cycles += woke.wrapping_sub(now);
                last = woke;
            }
        }
        self.shut_down();
    }

    /// Caches a flow for each key handed over by `Datapath::install_flows` that no
    /// flow of this PMD matches yet, translated as an upcall would (no packet, so
    /// nothing learned, nothing counted as an upcall) — at most
    /// `INSTALLS_PER_ITERATION` an iteration, so that a long list does not keep the
    /// PMD from its queues. Returns whether the list is done.
    fn install_flows(&mut self) -> bool {
        let (keys, done) = {
            let mut list = lock(&self.control.installs);
            let take = list.len().min(INSTALLS_PER_ITERATION);
            let keys: Vec<FlowKey> = list.drain(..take).collect();
            (keys, list.is_empty())
        };
        let Some(snap) = self.snapshot.as_deref() else {
            return done;
        };
        let w = &mut self.worker;
        let now_ms = clock::now_ms();
        for key in keys {
            if w.flows.lookup(&key).flow.is_some_and(|f| !f.is_dead()) {
                continue;
            }
            let t = snap.upcall.translate(&key, now_ms, false);
            cache_flow(
                snap,
                &self.shared,
                &self.control,
                &mut w.flows,
                &key,
                t,
                now_ms,
            );
        }
        done
    }

    fn housekeeping(&mut self, now_cycles: u64) {
        for rxq in &mut self.rxqs {
            let stats = &rxq.handle.rxqs[rxq.index].stats;
            stats.busy_cycles.store(rxq.busy_cycles, Ordering::Relaxed);
            stats
                .pmd_cycles
                .store(now_cycles.wrapping_sub(rxq.assigned_at), Ordering::Relaxed);
            let overrun = rxq.queue.take_overrun_drops();
            PortStats::add_drop(&rxq.handle.stats.rx_overrun, overrun);
        }
        let w = &mut self.worker;
        if w.flows.remove_dead() > 0 {
            w.emc_generation += 1;
            w.emc.invalidate(w.emc_generation);
        }
        w.flows.resort();
    }

    /// Everything staged leaves, and the queues go back to their ports for the PMDs
    /// that stay.
    fn shut_down(&mut self) {
        self.worker.outputs.send_all();
        for rxq in self.rxqs.drain(..) {
            give_back_rx(rxq);
        }
        for tx in self.worker.outputs.by_port.drain() {
            tx.handle.give_back_tx(tx.queue);
        }
    }
}

fn give_back_rx(rxq: OwnedRxq) {
    if let Some(slot) = rxq.handle.rxqs.get(rxq.index) {
        *slot.queue.lock().unwrap_or_else(|e| e.into_inner()) = Some(rxq.queue);
    }
}

/// The most packets of one batch translated by upcalls; the batch's further misses
/// are dropped and counted (`lost_upcalls`), so that a burst of new flows cannot hold
/// the PMD away from its queues for long.
const UPCALLS_PER_BATCH: usize = 16;

/// The most flows an iteration caches for `Datapath::install_flows` (as many as a
/// batch's upcalls, and for the same reason).
const INSTALLS_PER_ITERATION: usize = UPCALLS_PER_BATCH;

/// Translates a packet no cached flow matched, and caches the result unless the
/// flow limit is reached or the rules changed while translating (then the revalidator
/// may have looked at the flows already, and could miss this one).
#[allow(clippy::too_many_arguments)]
fn upcall(
    snap: &Snapshot,
    shared: &Shared,
    control: &PmdControl,
    flows: &mut FlowTable,
    emc: &mut Emc<DpFlow>,
    counters: &mut PmdCounters,
    last_generation: &mut u64,
    (key, frame): (&FlowKey, &[u8]),
    hash: u64,
    now_ms: u64,
) -> Arc<DpFlow> {
    counters.upcalls += 1;
    let t = snap.upcall.translate_packet(key, frame, now_ms);
    if t.generation != *last_generation {
        // Flows made before may be stale now: the revalidator looks at once.
        *last_generation = t.generation;
        shared.kick_revalidator();
    }
    let (flow, cached) = cache_flow(snap, shared, control, flows, key, t, now_ms);
    if cached {
        emc.insert(hash, key, Some(&flow));
    } else {
        counters.uncached_upcalls += 1;
    }
    flow
}

/// Makes the datapath flow of translation `t` and caches it (in `flows` and the
/// revalidator's registry) unless the flow limit is reached or the translation is
/// stale already; says whether it was cached.
fn cache_flow(
    snap: &Snapshot,
    shared: &Shared,
    control: &PmdControl,
    flows: &mut FlowTable,
    key: &FlowKey,
    t: crate::upcall::Translation,
    now_ms: u64,
) -> (Arc<DpFlow>, bool) {
    let (generation, t_cacheable) = (t.generation, t.cacheable);
    let id = shared.next_flow_id.fetch_add(1, Ordering::Relaxed);
    let flow = Arc::new(DpFlow::new(id, control.core, key, t, now_ms));
    let cached = t_cacheable && flows.len() < snap.flow_limit && {
        let mut registry = lock(&control.flows);
        let current = snap.upcall.generation() == generation;
        if current {
            flow.set_cached();
            registry.push(flow.clone());
            // Under the registry's lock: a removal's pass, which takes it first,
            // finds the flow in the index or sees it refused for its generation.
            shared.by_rule.note(&flow, &[]);
        }
        current
    };
    if cached {
        flows.insert(flow.clone());
    }
    (flow, cached)
}

/// Flows a batch's tally holds: one per pass of each of its packets at most, so it
/// never fills.
const TALLY_SIZE: usize = BATCH_SIZE * (1 + MAX_RECIRC_DEPTH);

/// A batch's flows, each with the packets and bytes it forwarded in the batch: one
/// reference count and one counter update per flow and batch, not per packet.
type Tally = ArrayVec<(Arc<DpFlow>, u64, u64), TALLY_SIZE>;

/// Counts a packet of `len` bytes on `flow` in the batch's tally (added if it is
/// not there yet: the only reference count taken), and says where it is.
#[inline]
fn count(tally: &mut Tally, flow: &Arc<DpFlow>, len: u64) -> Option<usize> {
    let at = match tally.iter().position(|(t, _, _)| Arc::ptr_eq(t, flow)) {
        Some(at) => at,
        None => {
            // At most TALLY_SIZE passes in a batch but for a datagram's fragments
            // sent on together: those past it are lost (counted by the caller).
            tally.try_push((flow.clone(), 0, 0)).ok()?;
            tally.len() - 1
        }
    };
    let (_, packets, bytes) = &mut tally[at];
    *packets += 1;
    *bytes += len;
    Some(at)
}

/// What finding a packet's flow takes: the PMD's caches, the slow path for a miss,
/// and the batch's budget of upcalls. A packet's first lookup and each of its
/// recirculations go through it.
struct Finder<'a> {
    snap: &'a Snapshot,
    shared: &'a Shared,
    control: &'a PmdControl,
    emc: &'a mut Emc<DpFlow>,
    emc_generation: &'a mut u64,
    flows: &'a mut FlowTable,
    counters: &'a mut PmdCounters,
    last_generation: &'a mut u64,
    /// Upcalls made in this batch.
    upcalls: usize,
    now_ms: u64,
}

impl Finder<'_> {
    /// The live flow for `key` — the exact-match cache's, else a megaflow, else a new
    /// one from an upcall — with the packet counted on it in `tally`: where it is
    /// there. `frame`: the bytes `key` came from (a tag the device took out is in
    /// the key only), which an upcall lets the slow path read. `None` when the batch's upcalls are spent (the packet is
    /// dropped and counted).
    #[inline]
    fn find(&mut self, key: &FlowKey, frame: &[u8], tally: &mut Tally) -> Option<usize> {
        let len = frame.len() as u64;
        let hash = key_hash(key);
        let cached = self
            .emc
            .lookup(hash, key)
            .and_then(|slot| self.emc.get(slot))
            .filter(|f| !f.is_dead());
        if let Some(f) = cached {
            self.counters.emc_hits += 1;
            return count(tally, f, len);
        }
        let found = self.flows.lookup(key);
        let retired = found.flow.is_some_and(|f| f.is_dead());
        if let Some(f) = found.flow.filter(|f| !f.is_dead()) {
            self.counters.megaflow_hits += 1;
            self.counters.subtable_lookups += u64::from(found.probes);
            self.emc.insert(hash, key, Some(f));
            return count(tally, f, len);
        }
        if retired {
            // Retired by the revalidator and not swept yet: swept now, and the cache
            // forgets what it had of them.
            self.flows.remove_dead();
            *self.emc_generation += 1;
            self.emc.invalidate(*self.emc_generation);
        }
        if self.upcalls == UPCALLS_PER_BATCH {
            self.counters.lost_upcalls += 1;
            return None;
        }
        self.upcalls += 1;
        let f = upcall(
            self.snap,
            self.shared,
            self.control,
            self.flows,
            self.emc,
            self.counters,
            self.last_generation,
            (key, frame),
            hash,
            self.now_ms,
        );
        count(tally, &f, len)
    }
}

impl Worker {
    /// The worker taken apart for a batch: its caches as a [`Finder`], and the rest.
    fn parts<'a>(
        &'a mut self,
        (snap, shared, control): (&'a Snapshot, &'a Shared, &'a PmdControl),
        now_ms: u64,
    ) -> Parts<'a> {
        let Worker {
            outputs,
            emc,
            emc_generation,
            flows,
            key,
            scratch,
            saved,
            counters,
            malformed,
            last_generation,
            ..
        } = self;
        Parts {
            finder: Finder {
                snap,
                shared,
                control,
                emc,
                emc_generation,
                flows,
                counters,
                last_generation,
                upcalls: 0,
                now_ms,
            },
            outputs,
            key,
            scratch,
            saved,
            malformed,
        }
    }

    /// Sends what the control side injected (at most a batch per call), each
    /// packet by its own actions, and flushes it out at once. A packet-out's pass
    /// after a pop or a recirculation is looked up as a received packet's is.
    fn send_injected(
        &mut self,
        (snap, shared, control): (&Snapshot, &Shared, &PmdControl),
        now_ms: impl FnOnce() -> u64,
    ) {
        // Nearly always none: nothing is set up for them then.
        let Some(first) = shared.punts.next_injected() else {
            return;
        };
        let now_ms = now_ms();
        let Parts {
            mut finder,
            outputs,
            key,
            scratch,
            saved,
            ..
        } = self.parts((snap, shared, control), now_ms);
        // The tracker's clock for these packets' `ct`s (a PMD with no queues
        // never set it).
        outputs.tally.now_ms = now_ms;
        let mut tally = Tally::new();
        let mut sent = 0;
        let injected = std::iter::once(first)
            .chain(std::iter::from_fn(|| shared.punts.next_injected()))
            .take(BATCH_SIZE);
        for p in injected {
            sent += 1;
            if scratch.load(&p.frame, None, VnetHdr::default()).is_err() {
                outputs.tally.lost += 1;
                continue;
            }
            let mut again = Recirculation {
                finder: &mut finder,
                tally: &mut tally,
                key,
            };
            run_rewriting(
                outputs,
                scratch,
                saved,
                (&p.actions, &p.headers),
                shared,
                // A packet-out has no tunnel ID until its actions set one.
                Origin {
                    in_port: p.in_port,
                    tunnel: Default::default(),
                    ct: Default::default(),
                },
                Some(&mut again),
            );
        }
        credit_tally(&mut tally, outputs, now_ms);
        outputs.send_all();
        shared.punts.injected_done(sent as u64);
    }
}

/// A [`Worker`]'s parts while a batch is run.
struct Parts<'a> {
    finder: Finder<'a>,
    outputs: &'a mut Outputs,
    key: &'a mut FlowKey,
    scratch: &'a mut PacketBuf,
    saved: &'a mut SavedCopies,
    /// Received frames dropped for broken headers, in all.
    malformed: &'a mut u64,
}

/// Receives one batch from `rxq` and sends each packet on its way; returns how many
/// packets it received.
// Kept out of line so that profilers can count its instructions per packet.
#[inline(never)]
fn process_batch(
    w: &mut Worker,
    snap: &Snapshot,
    shared: &Shared,
    control: &PmdControl,
    rxq: &mut OwnedRxq,
    now_ms: u64,
) -> usize {
    let in_port = rxq.handle.no;
    let stats = &rxq.handle.stats;
    let mut batch = RxBatch::new();
    let drops = rxq.queue.recv(&mut batch);
    PortStats::add_drop(&stats.rx_truncated, u64::from(drops.truncated));
    let received = batch.len();
    if received == 0 {
        drop(batch);
        rxq.queue.release();
        return 0;
    }
    let Parts {
        mut finder,
        outputs,
        key,
        scratch,
        saved,
        malformed: malformed_total,
    } = w.parts((snap, shared, control), now_ms);
    let mut bytes = 0u64;
    let mut malformed = 0u64;
    // Flow counters are added once per batch and flow, not per packet.
    let mut tally = Tally::new();
    for pkt in &batch {
        let len = pkt.data.len() as u64;
        bytes += len;
        if extract(pkt.data, in_port, pkt.meta.vlan, key).is_err() {
            malformed += 1;
            continue;
        }
        pkt.meta.tunnel.write_into(key);
        let Some(at) = finder.find(key, pkt.data, &mut tally) else {
            outputs.tally.lost += 1;
            continue;
        };
        let flow = &tally[at].0;
        if !flow.rewrites {
            for action in flow.actions.iter() {
                match *action {
                    DpAction::Output(port) => outputs.stage(port, pkt.data, &pkt.meta),
                    // A flow with any of these takes the rewriting way below
                    // (`DpFlow::rewrites`); listed so that a new action must say which
                    // way it takes.
                    DpAction::OutputTrunc { .. }
                    | DpAction::Truncate(_)
                    | DpAction::SetDlSrc(_)
                    | DpAction::SetDlDst(_)
                    | DpAction::PushVlan(_)
                    | DpAction::SetVlanVid(_)
                    | DpAction::SetVlanPcp(_)
                    | DpAction::PopVlan
                    | DpAction::SetNwSrc(_)
                    | DpAction::SetNwDst(_)
                    | DpAction::SetNwTos(_)
                    | DpAction::SetTpSrc(_)
                    | DpAction::SetTpDst(_)
                    | DpAction::DecTtl
                    | DpAction::SetField(_)
                    | DpAction::PushMpls { .. }
                    | DpAction::PopMpls(_)
                    | DpAction::PushPbb { .. }
                    | DpAction::PopPbb
                    | DpAction::PushNsh(_)
                    | DpAction::PopNsh
                    | DpAction::PushMplsEthernet { .. }
                    | DpAction::PopMplsEthernet
                    | DpAction::SetMpls { .. }
                    | DpAction::DecMplsTtl
                    | DpAction::CheckPktLen { .. }
                    | DpAction::Save
                    | DpAction::Restore
                    | DpAction::Meter(_)
                    | DpAction::SetTunnel(_)
                    | DpAction::SetTunnelDst(_)
                    | DpAction::SetTunnelMetadata(_)
                    | DpAction::Controller(_)
                    | DpAction::Hash
                    | DpAction::Recirc(_)
                    | DpAction::TunnelPush(_)
                    | DpAction::TunnelPop(_)
                    | DpAction::CtMark { .. }
                    | DpAction::CtLabel { .. }
                    | DpAction::CtNatAddr { .. }
                    | DpAction::CtNatRange { .. }
                    | DpAction::Ct { .. }
                    | DpAction::CtClear => {}
                }
            }
        } else if scratch.load(pkt.data, pkt.meta.vlan, pkt.meta.vnet).is_ok() {
            let from = Origin {
                in_port,
                tunnel: pkt.meta.tunnel,
                ct: Default::default(),
            };
            if flow.recirculates {
                // Its later passes count in the tally too: the flow is held on its
                // own meanwhile (a reference count for these packets only).
                let flow = flow.clone();
                let mut again = Recirculation {
                    finder: &mut finder,
                    tally: &mut tally,
                    key,
                };
                run_rewriting(
                    outputs,
                    scratch,
                    saved,
                    (&flow.actions, &flow.headers),
                    shared,
                    from,
                    Some(&mut again),
                );
            } else {
                let todo = (&flow.actions[..], &flow.headers[..]);
                run_rewriting(outputs, scratch, saved, todo, shared, from, None);
            }
        } else {
            outputs.tally.lost += 1;
        }
    }
    drop(batch);
    rxq.queue.release();
    stats.add_rx(received as u64, bytes);
    PortStats::add_drop(&stats.rx_malformed, malformed);
    *malformed_total += malformed;
    credit_tally(&mut tally, outputs, now_ms);
    received
}

/// Adds what a batch's tally counted to each flow (and to the port its packets
/// count as received by).
fn credit_tally(tally: &mut Tally, outputs: &mut Outputs, now_ms: u64) {
    // Drained in place: the tally is a few kilobytes, not to be moved.
    for (flow, packets, bytes) in tally.drain(..) {
        flow.add(packets, bytes, now_ms);
        if let Some(tx) = flow.rx_port.and_then(|p| outputs.by_port.get_mut(p)) {
            tx.handle.stats.add_rx(packets, bytes);
        }
        if !flow.is_cached() {
            // No revalidator will see it: its packets go to the rules now (this
            // follows an upcall, never a cached flow's packet).
            flow.push_stats();
        }
    }
}
