//! A poll-mode driver thread: polls the receive queues assigned to it, finds each
//! packet's datapath flow (exact-match cache, then the megaflows, then an upcall to
//! the slow path), runs the flow's actions and sends the output batches.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use arrayvec::ArrayVec;
use vsw_packet::gro::{Gro, Offer};
use vsw_packet::gso;
use vsw_packet::key::l4_hash;
use vsw_packet::rewrite::{PacketBuf, RewriteError};
use vsw_packet::tunnel::segment_udp_tunnel;
use vsw_packet::vnet::VNET_F_NEEDS_CSUM;
use vsw_packet::{extract, FlowKey, VnetHdr};

use crate::clock;
use crate::dpaction::{MAX_RECIRC_DEPTH, MAX_SAVED};
use crate::dpflow::{DpAction, DpFlow};
use crate::egress::{self, Egress, Push};
use crate::emc::{key_hash, Emc};
use crate::flow_table::FlowTable;
use crate::meter::{remark_dscp, Verdict};
use crate::port::{
    PacketMeta, RxBatch, RxQueue, StageError, TunnelKey, TxOffloads, TxQueue, BATCH_SIZE,
};
use crate::port_map::PortMap;
use crate::shared::{lock, PmdControl, PortHandle, Shared, Snapshot};
use crate::stats::{PmdCounters, PortStats};
use crate::tunnel_push::PushHeader;
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

/// One port's transmit queue with what has been staged since the last send.
struct LocalTx {
    handle: Arc<PortHandle>,
    queue: Box<dyn TxQueue>,
    offloads: TxOffloads,
    staged_packets: u64,
    staged_bytes: u64,
    /// Segments being merged for this port (ports that take super-frames).
    gro: Option<Box<Gro>>,
    /// The tunnel of the segments being merged (only segments of one tunnel are).
    gro_tunnel: TunnelKey,
    /// When the batch must leave (`tx-flush-interval`).
    clock: BatchClock,
    /// `auto` for a receiver that may poll: no batching while it does.
    auto: bool,
}

/// What staging on a transmit queue sent and lost, and the PMD's time for this
/// iteration (microseconds), which stamps what is staged.
#[derive(Default)]
struct TxTally {
    batches: u64,
    packets: u64,
    lost: u64,
    now_us: u64,
}

impl LocalTx {
    /// Sends on what the merge holds (it must leave before anything that came after).
    fn flush_gro(&mut self, t: &mut TxTally) {
        let Some(mut gro) = self.gro.take() else {
            return;
        };
        if let Some((frame, vnet, segments)) = gro.take() {
            let meta = PacketMeta {
                vnet,
                vlan: None,
                tunnel: self.gro_tunnel,
            };
            self.stage_ready(frame, &meta, t);
            if segments > 1 {
                PortStats::add_drop(&self.handle.stats.tx_gro_segments, segments as u64);
            }
        }
        self.gro = Some(gro);
    }

    /// Offers a plain TCP segment to the merge; whatever cannot be merged is staged.
    fn stage_merging(&mut self, data: &[u8], meta: &PacketMeta, t: &mut TxTally) {
        if meta.tunnel != self.gro_tunnel {
            self.flush_gro(t);
            self.gro_tunnel = meta.tunnel;
        }
        let Some(mut gro) = self.gro.take() else {
            self.stage_ready(data, meta, t);
            return;
        };
        let mut offer = gro.offer(data, &meta.vnet);
        if offer == Offer::FlushFirst {
            self.gro = Some(gro);
            self.flush_gro(t);
            gro = self.gro.take().expect("just put back");
            offer = gro.offer(data, &meta.vnet);
        }
        self.gro = Some(gro);
        if offer != Offer::Taken {
            self.stage_ready(data, meta, t);
        }
    }

    /// Hands one finished packet to the device's output batch.
    #[inline]
    fn stage_ready(&mut self, data: &[u8], meta: &PacketMeta, t: &mut TxTally) {
        match self.queue.stage(data, meta) {
            Ok(()) => {
                self.staged_packets += 1;
                self.staged_bytes += data.len() as u64;
                self.clock.staged(t.now_us);
                // Counted here rather than asked of the device (a call per packet).
                if self.staged_packets >= BATCH_SIZE as u64 {
                    let (b, p) = send(self, t.now_us);
                    t.batches += b;
                    t.packets += p;
                }
            }
            Err(e) => {
                t.lost += 1;
                let stats = &self.handle.stats;
                match e {
                    StageError::QueueFull => PortStats::add_drop(&stats.tx_queue_full, 1),
                    StageError::TooBig => PortStats::add_drop(&stats.tx_too_big, 1),
                }
            }
        }
    }
}

/// Counts what cutting a super-frame for a port came to: its segments, or the
/// super-frame lost and why.
fn count_cut(result: Result<usize, gso::GsoError>, stats: &PortStats, tally: &mut TxTally) {
    match result {
        Ok(n) => PortStats::add_drop(&stats.tx_gso_segments, n as u64),
        Err(e) => {
            tally.lost += 1;
            let counter = match e {
                gso::GsoError::TooBig => &stats.tx_too_big,
                _ => &stats.tx_gso_refused,
            };
            PortStats::add_drop(counter, 1);
        }
    }
}

/// Output batches by port number, and what they sent.
struct Outputs {
    by_port: PortMap<LocalTx>,
    /// Where segments and checksum-completed copies are built, for ports that cannot
    /// finish a packet themselves.
    fixup: Box<[u8]>,
    tally: TxTally,
    /// The IPv4 identification of the next tunnel packet this PMD sends.
    tunnel_ip_id: u16,
}

/// The largest packet vsw builds a software segment or checksum copy of.
const FIXUP_BUFFER: usize = 65_535 + 64;

impl Outputs {
    /// Stages a packet for `port` as the egress stage decides (egress.rs).
    #[inline]
    fn stage(&mut self, port: u32, data: &[u8], meta: &PacketMeta) {
        let Some(tx) = self.by_port.get_mut(port) else {
            return;
        };
        let plan = egress::plan(data, &meta.vnet, &tx.offloads);
        if plan == Egress::AsIs {
            // TCP segments may first be merged for the device.
            if meta.vlan.is_none() && tx.gro.is_some() {
                tx.stage_merging(data, meta, &mut self.tally);
            } else {
                tx.flush_gro(&mut self.tally);
                tx.stage_ready(data, meta, &mut self.tally);
            }
            return;
        }
        self.stage_prepared(port, data, meta, plan);
    }

    /// Anything but a packet as it is: it leaves after what the merge holds.
    #[cold]
    fn stage_prepared(&mut self, port: u32, data: &[u8], meta: &PacketMeta, plan: Egress) {
        let Some(tx) = self.by_port.get_mut(port) else {
            return;
        };
        tx.flush_gro(&mut self.tally);
        let stats = tx.handle.stats.clone();
        let tally = &mut self.tally;
        let lost = |tally: &mut TxTally, counter: &std::sync::atomic::AtomicU64| {
            tally.lost += 1;
            PortStats::add_drop(counter, 1);
        };
        match plan {
            Egress::AsIs | Egress::Whole | Egress::TunnelWhole => {
                tx.stage_ready(data, meta, tally);
            }
            Egress::Cut(mss) => {
                let plain = meta.without_offloads();
                let result = gso::segment_tcp(data, mss, &mut self.fixup, |seg| {
                    tx.stage_ready(seg, &plain, tally)
                });
                count_cut(result, &stats, tally);
            }
            Egress::CutTunnel(t, mss) => {
                if !tx.offloads.tunnel_tso {
                    tx.queue.learn_tunnel_tso();
                }
                let plain = meta.without_offloads();
                let result = segment_udp_tunnel(data, &t, mss, &mut self.fixup, |seg| {
                    tx.stage_ready(seg, &plain, tally)
                });
                count_cut(result, &stats, tally);
            }
            Egress::Uncuttable(e) => count_cut(Err(e), &stats, tally),
            Egress::AboveMtu => lost(tally, &stats.tx_mtu_drops),
            Egress::FinishChecksum => {
                let v = &meta.vnet;
                let Some(copy) = self.fixup.get_mut(..data.len()) else {
                    return lost(tally, &stats.tx_too_big);
                };
                copy.copy_from_slice(data);
                if gso::complete_checksum(copy, v).is_err() {
                    return lost(tally, &stats.tx_errors);
                }
                PortStats::add_drop(&stats.tx_csum_sw, 1);
                let done = PacketMeta {
                    vnet: VnetHdr {
                        flags: v.flags & !VNET_F_NEEDS_CSUM,
                        ..VnetHdr::default()
                    },
                    vlan: meta.vlan,
                    tunnel: meta.tunnel,
                };
                tx.stage_ready(copy, &done, tally);
            }
        }
    }

    /// Sends every batch, due or not (a port or the PMD goes away).
    fn send_all(&mut self) {
        let now = self.tally.now_us;
        for tx in self.by_port.values_mut() {
            tx.flush_gro(&mut self.tally);
            let (b, p) = send(tx, now);
            self.tally.batches += b;
            self.tally.packets += p;
        }
    }

    /// The end of a received batch or of an idle iteration: batches whose interval
    /// has run out since their last send leave.
    fn send_due(&mut self) {
        let now = self.tally.now_us;
        for tx in self.by_port.values_mut() {
            tx.flush_gro(&mut self.tally);
            // A receiver that polls gets what is held at once: waiting would only add
            // latency (`auto`).
            let polls = tx.auto && tx.clock.pending() > 0 && tx.queue.receiver_polls();
            if polls || tx.clock.due(now) {
                let (b, p) = send(tx, now);
                self.tally.batches += b;
                self.tally.packets += p;
            }
        }
    }

    /// How `header` goes in front of `frame` (`vnet` its offload state, `headroom`
    /// the room in front of it) for its tunnel port (`egress::push_plan`).
    fn tunnel_push_plan(
        &mut self,
        header: &PushHeader,
        frame: &[u8],
        (vnet, headroom): (&VnetHdr, usize),
    ) -> Push {
        match self.by_port.get_mut(header.tunnel_port) {
            Some(tx) => egress::push_plan(header, frame, vnet, headroom, tx.offloads.mtu),
            None => Push::ByQueue,
        }
    }

    /// A packet of `len` bytes pushed in front of `header`: it counts as sent by the
    /// tunnel port.
    fn count_tunnel_packet(&mut self, header: &PushHeader, len: usize) {
        if let Some(tx) = self.by_port.get_mut(header.tunnel_port) {
            tx.staged_packets += 1;
            tx.staged_bytes += len as u64;
            tx.clock.staged(self.tally.now_us);
        }
    }

    /// A packet above `header`'s tunnel port's MTU: dropped and counted there.
    fn tunnel_mtu_drop(&mut self, header: &PushHeader) {
        self.tally.lost += 1;
        if let Some(tx) = self.by_port.get_mut(header.tunnel_port) {
            PortStats::add_drop(&tx.handle.stats.tx_mtu_drops, 1);
        }
    }

    /// The earliest time a held batch must leave, if any is held.
    fn earliest_deadline(&self) -> Option<u64> {
        self.by_port
            .values()
            .filter_map(|tx| tx.clock.deadline())
            .min()
    }
}

/// Sends what `tx` has staged; returns (batches, packets) sent.
fn send(tx: &mut LocalTx, now_us: u64) -> (u64, u64) {
    // Some packets leave at once (a device may send large frames by themselves),
    // so what was staged, not what is pending, says whether there is work.
    if tx.staged_packets == 0 && tx.queue.pending() == 0 {
        return (0, 0);
    }
    let waited = tx.clock.sent(now_us);
    tx.handle.stats.add_batch(&waited);
    let failed = tx.queue.flush() as u64;
    let sent = tx.staged_packets.saturating_sub(failed);
    // The device says how many it refused, not which: their bytes are taken as the
    // batch's average (exact when none is refused, the usual case).
    let bytes = match (failed, tx.staged_packets) {
        (0, _) => tx.staged_bytes,
        (_, 0) => 0,
        (_, n) => tx.staged_bytes * sent / n,
    };
    tx.handle.stats.add_tx(sent, bytes);
    PortStats::add_drop(&tx.handle.stats.tx_errors, failed);
    let staged = tx.staged_packets;
    tx.staged_packets = 0;
    tx.staged_bytes = 0;
    // What a device finishes may change while it is attached (a vhost-user guest
    // negotiates its offloads when it connects): looked at again after each batch.
    tx.offloads = tx.queue.offloads();
    if tx.offloads.tso && tx.offloads.merges && tx.gro.is_none() {
        tx.gro = Some(Box::new(Gro::new()));
    }
    (1, staged)
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
            self.worker.send_injected(&self.shared);
            if self.rxqs.is_empty() {
                std::thread::park_timeout(NO_QUEUES_PARK);
                last = clock::cycles();
                continue;
            }
            let since_start = last.wrapping_sub(start_cycles);
            let now_ms = start_ms + since_start / cycles_per_ms;
            let now_us = since_start / cycles_per_us;
            self.worker.outputs.tally.now_us = now_us;
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
    key: &FlowKey,
    hash: u64,
    now_ms: u64,
) -> Arc<DpFlow> {
    counters.upcalls += 1;
    let t = snap.upcall.translate(key, now_ms, true);
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
    let generation = t.generation;
    let id = shared.next_flow_id.fetch_add(1, Ordering::Relaxed);
    let flow = Arc::new(DpFlow::new(id, control.core, key, t, now_ms));
    let cached = flows.len() < snap.flow_limit && {
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
fn count(tally: &mut Tally, flow: &Arc<DpFlow>, len: u64) -> usize {
    let at = match tally.iter().position(|(t, _, _)| Arc::ptr_eq(t, flow)) {
        Some(at) => at,
        None => {
            // At most TALLY_SIZE passes in a batch, so never more flows.
            tally.push((flow.clone(), 0, 0));
            tally.len() - 1
        }
    };
    let (_, packets, bytes) = &mut tally[at];
    *packets += 1;
    *bytes += len;
    at
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
    /// one from an upcall — with a packet of `len` bytes counted on it in `tally`:
    /// where it is there. `None` when the batch's upcalls are spent (the packet is
    /// dropped and counted).
    #[inline]
    fn find(&mut self, key: &FlowKey, tally: &mut Tally, len: u64) -> Option<usize> {
        let hash = key_hash(key);
        let cached = self
            .emc
            .lookup(hash, key)
            .and_then(|slot| self.emc.get(slot))
            .filter(|f| !f.is_dead());
        if let Some(f) = cached {
            self.counters.emc_hits += 1;
            return Some(count(tally, f, len));
        }
        let found = self.flows.lookup(key);
        let retired = found.flow.is_some_and(|f| f.is_dead());
        if let Some(f) = found.flow.filter(|f| !f.is_dead()) {
            self.counters.megaflow_hits += 1;
            self.counters.subtable_lookups += u64::from(found.probes);
            self.emc.insert(hash, key, Some(f));
            return Some(count(tally, f, len));
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
            key,
            hash,
            self.now_ms,
        );
        Some(count(tally, &f, len))
    }
}

/// What a recirculation needs beside the packet: where to find the next flow, the
/// batch's tally to count it in, and the scratch key to look it up by.
struct Recirculation<'a, 'b> {
    finder: &'a mut Finder<'b>,
    tally: &'a mut Tally,
    key: &'a mut FlowKey,
}

/// The copies `DpAction::Save` keeps (a group's buckets run on copies), made once
/// per PMD: no allocation per packet. Twice a flow's budget: a popped tunnel
/// packet's pass is translated with a budget of its own while the pass that popped
/// it holds its copies.
pub(crate) struct SavedCopies {
    bufs: Vec<PacketBuf>,
    /// The tunnel each copy's packet had (a push clears it for the outer packet;
    /// the copy's end gives it back).
    tunnels: Vec<TunnelKey>,
    /// Copies held for the packet being run.
    held: usize,
    /// Where a super-frame too large for a tunnel's outer headers is split: each
    /// part built in `split_build`, then kept in `split_parts` until it is run.
    split_build: Box<[u8]>,
    split_parts: Box<[u8]>,
}

/// A super-frame split for a tunnel comes in two parts (three for a jumbo frame's
/// headers at most), each no larger than a rewritten frame.
const SPLIT_PARTS: usize = 3;

impl SavedCopies {
    fn new() -> SavedCopies {
        SavedCopies {
            bufs: (0..2 * MAX_SAVED)
                .map(|_| PacketBuf::new(MAX_REWRITE_FRAME))
                .collect(),
            tunnels: vec![TunnelKey::default(); 2 * MAX_SAVED],
            held: 0,
            split_build: vec![0u8; MAX_REWRITE_FRAME].into_boxed_slice(),
            split_parts: vec![0u8; SPLIT_PARTS * MAX_REWRITE_FRAME].into_boxed_slice(),
        }
    }

    fn save(&mut self, scratch: &PacketBuf, tunnel: TunnelKey) -> Result<(), RewriteError> {
        let buf = self.bufs.get_mut(self.held).ok_or(RewriteError::Unsaved)?;
        buf.copy_from(scratch)?;
        self.tunnels[self.held] = tunnel;
        self.held += 1;
        Ok(())
    }

    /// Puts the last copy back; the tunnel its packet had.
    fn restore(&mut self, scratch: &mut PacketBuf) -> Result<TunnelKey, RewriteError> {
        self.held = self.held.checked_sub(1).ok_or(RewriteError::Unsaved)?;
        scratch.copy_from(&self.bufs[self.held])?;
        Ok(self.tunnels[self.held])
    }
}

impl Worker {
    /// Sends what the control side injected (at most a batch per call), each
    /// packet by its own actions, and flushes it out at once.
    fn send_injected(&mut self, shared: &Shared) {
        let mut sent = 0;
        while sent < BATCH_SIZE {
            let Some(p) = shared.punts.next_injected() else {
                break;
            };
            sent += 1;
            if self
                .scratch
                .load(&p.frame, None, VnetHdr::default())
                .is_ok()
            {
                run_rewriting(
                    &mut self.outputs,
                    &mut self.scratch,
                    &mut self.saved,
                    (&p.actions, &p.headers),
                    shared,
                    // A packet-out has no tunnel ID until its actions set one.
                    Origin {
                        in_port: p.in_port,
                        tunnel: Default::default(),
                    },
                    // Its actions were translated not to recirculate.
                    None,
                );
            } else {
                self.outputs.tally.lost += 1;
            }
        }
        if sent > 0 {
            self.outputs.send_all();
            shared.punts.injected_done(sent as u64);
        }
    }
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
    let Worker {
        outputs,
        emc,
        emc_generation,
        flows,
        key,
        scratch,
        saved,
        counters,
        malformed: malformed_total,
        last_generation,
        ..
    } = w;
    let mut bytes = 0u64;
    let mut malformed = 0u64;
    let mut finder = Finder {
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
    };
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
        let Some(at) = finder.find(key, &mut tally, len) else {
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
                    DpAction::SetDlSrc(_)
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
                    | DpAction::TunnelPop(_) => {}
                }
            }
        } else if scratch.load(pkt.data, pkt.meta.vlan, pkt.meta.vnet).is_ok() {
            let from = Origin {
                in_port,
                tunnel: pkt.meta.tunnel,
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
    received
}

/// Where a packet came from: its port, and the tunnel it came through.
#[derive(Clone, Copy)]
struct Origin {
    in_port: u32,
    tunnel: TunnelKey,
}

/// Runs actions that change the packet, in order, on the copy in `scratch`: each
/// output sends the packet as the rewrites before it left it (and so does each
/// punt, a packet that came in on `from.in_port`). A recirculation runs the next
/// flow's actions where it stands (`again` finds it; without it, a packet-out's
/// actions, the packet is dropped there).
fn run_rewriting(
    outputs: &mut Outputs,
    scratch: &mut PacketBuf,
    saved: &mut SavedCopies,
    (actions, headers): (&[DpAction], &[Arc<PushHeader>]),
    shared: &Shared,
    from: Origin,
    again: Option<&mut Recirculation<'_, '_>>,
) {
    saved.held = 0;
    let mut pass = Pass {
        recirculations: 0,
        outputs,
        scratch,
        saved,
        shared,
        again,
    };
    pass.run(actions, headers, from, 0);
}

/// One packet's way through its flows' actions.
struct Pass<'a, 'b, 'c> {
    /// Recirculations the packet took so far: at most [`MAX_RECIRC_DEPTH`] in all,
    /// however they nest or follow each other (so a batch's tally never fills).
    recirculations: usize,
    outputs: &'a mut Outputs,
    scratch: &'a mut PacketBuf,
    saved: &'a mut SavedCopies,
    shared: &'a Shared,
    again: Option<&'a mut Recirculation<'b, 'c>>,
}

impl Pass<'_, '_, '_> {
    /// The flow of the packet's pass `depth + 1`, as it is now, with `recirc_id`
    /// `id`: counted as the pass's, or `None` (dropped and counted) past the depth
    /// limit, for a packet-out, or when the batch's upcalls are spent.
    fn next_flow(
        &mut self,
        id: u32,
        from: Origin,
        dp_hash: u32,
        depth: usize,
        parsed: Option<FlowKey>,
    ) -> Option<Arc<DpFlow>> {
        let again = match self.again.as_deref_mut() {
            Some(a) if depth < MAX_RECIRC_DEPTH && self.recirculations < MAX_RECIRC_DEPTH => a,
            _ => {
                self.outputs.tally.lost += 1;
                return None;
            }
        };
        match parsed {
            Some(key) => *again.key = key,
            // The tag is in the frame by now (`PacketBuf::load` put it back).
            None => {
                if extract(self.scratch.data(), from.in_port, None, again.key).is_err() {
                    self.outputs.tally.lost += 1;
                    return None;
                }
            }
        }
        from.tunnel.write_into(again.key);
        again.key.recirc_id = id;
        again.key.dp_hash = dp_hash;
        again.finder.counters.recirculations += 1;
        self.recirculations += 1;
        // Counted as it is now (a popped packet: its inner frame), as Open vSwitch
        // counts each pass.
        let len = self.scratch.data().len() as u64;
        let Some(at) = again.finder.find(again.key, again.tally, len) else {
            self.outputs.tally.lost += 1;
            return None;
        };
        Some(again.tally[at].0.clone())
    }

    /// Splits the super-frame in `scratch` into parts whose IP packets are at most
    /// `max_ip` bytes, and runs `rest` (its tunnel push and what follows it) on
    /// each. Parts that cannot be made are counted lost.
    fn push_split(
        &mut self,
        rest: &[DpAction],
        headers: &[Arc<PushHeader>],
        from: Origin,
        max_ip: usize,
        depth: usize,
    ) {
        let vnet = self.scratch.vnet;
        // Taken out while the parts run (a split within a part has none: its
        // tunnel port's queue takes it).
        let mut parts = std::mem::take(&mut self.saved.split_parts);
        let mut ranges = ArrayVec::<(usize, usize), SPLIT_PARTS>::new();
        let mut fits = true;
        let split = gso::split_super_frame(
            self.scratch.data(),
            usize::from(vnet.gso_size),
            max_ip,
            &mut self.saved.split_build,
            |part| {
                let at = ranges.last().map_or(0, |(a, l)| a + l);
                match parts.get_mut(at..at + part.len()) {
                    Some(out) if !ranges.is_full() => {
                        out.copy_from_slice(part);
                        ranges.push((at, part.len()));
                    }
                    _ => fits = false,
                }
            },
        );
        if split.is_err() || !fits {
            self.outputs.tally.lost += 1;
        }
        if split.is_ok() && fits {
            for &(at, len) in &ranges {
                if self.scratch.load(&parts[at..at + len], None, vnet).is_err() {
                    self.outputs.tally.lost += 1;
                    continue;
                }
                let held = self.saved.held;
                self.run(rest, headers, from, depth);
                self.saved.held = held;
            }
        }
        self.saved.split_parts = parts;
    }

    /// Takes the outer headers off the packet (`TunnelPop`): where its next pass
    /// comes from, or `None` when decapsulation refused it (counted by reason).
    fn pop(&mut self, pop: crate::tunnel_pop::Pop) -> Option<Origin> {
        let crate::tunnel_pop::Pop {
            geneve,
            udp_port,
            option,
        } = pop;
        let ports = vsw_packet::tunnel::TunnelPorts {
            vxlan: (!geneve).then_some(udp_port),
            geneve: geneve.then_some(udp_port),
        };
        let vnet = self.scratch.vnet;
        // The sender's device vouches for the outer checksum (one left to finish,
        // or one the kernel checked).
        let vouched = vnet.flags & (VNET_F_NEEDS_CSUM | vsw_packet::vnet::VNET_F_DATA_VALID) != 0;
        let data = self.scratch.data();
        // The option the Geneve ports' bridges name is known; any other critical
        // one is not.
        let known = |class: u16, kind: u8| option == Some((class, kind));
        let (at, len, key) = match vsw_packet::tunnel::decap(data, &ports, vouched, known) {
            Ok(d) => {
                let at = (d.inner.as_ptr() as usize).wrapping_sub(data.as_ptr() as usize);
                let metadata0 = option.map_or(0, |o| crate::tunnel_pop::option_value(d.options, o));
                let key = TunnelKey::of_decapsulated(&d.meta, metadata0);
                (at, d.inner.len(), key)
            }
            Err(e) => {
                self.shared.decap_drops.count(&e);
                return None;
            }
        };
        self.scratch.keep(at, len, vnet.of_inner(at));
        Some(Origin {
            in_port: if geneve {
                crate::tunnel_pop::GENEVE_RECEIVE
            } else {
                crate::tunnel_pop::VXLAN_RECEIVE
            },
            tunnel: key,
        })
    }

    /// Runs `actions`, `depth` recirculations deep; returns early when the packet
    /// goes no further on this pass.
    fn run(
        &mut self,
        actions: &[DpAction],
        headers: &[Arc<PushHeader>],
        from: Origin,
        depth: usize,
    ) {
        let Origin {
            in_port,
            mut tunnel,
        } = from;
        let mut dp_hash = 0u32;
        // The packet's key as a `Hash` extracted it, while nothing changed the
        // packet since: the recirculation after it need not extract it again.
        let mut parsed: Option<FlowKey> = None;
        // The next action's place (a fallback skips to a copy's end).
        let mut at = 0;
        while let Some(action) = actions.get(at) {
            at += 1;
            if !matches!(
                action,
                DpAction::Output(_) | DpAction::Hash | DpAction::Recirc(_)
            ) {
                parsed = None;
            }
            let result = match *action {
                DpAction::Output(port) => {
                    let meta = PacketMeta {
                        vnet: self.scratch.vnet,
                        vlan: None,
                        tunnel,
                    };
                    self.outputs.stage(port, self.scratch.data(), &meta);
                    Ok(())
                }
                DpAction::SetDlSrc(m) => {
                    self.scratch.set_dl_src(m);
                    Ok(())
                }
                DpAction::SetDlDst(m) => {
                    self.scratch.set_dl_dst(m);
                    Ok(())
                }
                DpAction::PushVlan(tpid) => self.scratch.push_vlan(tpid),
                DpAction::SetVlanVid(vid) => self.scratch.set_vlan_vid(vid),
                DpAction::SetVlanPcp(pcp) => self.scratch.set_vlan_pcp(pcp),
                DpAction::PopVlan => {
                    self.scratch.strip_vlan();
                    Ok(())
                }
                DpAction::SetNwSrc(a) => {
                    self.scratch.set_nw_src(a.octets());
                    Ok(())
                }
                DpAction::SetNwDst(a) => {
                    self.scratch.set_nw_dst(a.octets());
                    Ok(())
                }
                DpAction::SetNwTos(t) => {
                    self.scratch.set_nw_tos(t);
                    Ok(())
                }
                DpAction::SetTpSrc(p) => {
                    self.scratch.set_tp_src(p);
                    Ok(())
                }
                DpAction::SetTpDst(p) => {
                    self.scratch.set_tp_dst(p);
                    Ok(())
                }
                DpAction::DecTtl => self.scratch.dec_ttl(),
                DpAction::SetField(w) => {
                    self.scratch.write_field(w);
                    Ok(())
                }
                DpAction::Controller(note) => {
                    self.shared.punts.punt(in_port, note, self.scratch.data());
                    Ok(())
                }
                DpAction::Meter(id) => {
                    match self.shared.meters.apply(id, self.scratch.data().len()) {
                        Verdict::Pass => Ok(()),
                        // Counted on the meter's band.
                        Verdict::Drop => return,
                        Verdict::Remark(levels) => {
                            if let Some(tos) = self.scratch.nw_tos() {
                                self.scratch.set_nw_tos(remark_dscp(tos >> 2, levels) << 2);
                            }
                            Ok(())
                        }
                    }
                }
                DpAction::SetTunnel(id) => {
                    tunnel.id = id;
                    Ok(())
                }
                DpAction::SetTunnelDst(a) => {
                    tunnel.dst = a.into();
                    Ok(())
                }
                DpAction::SetTunnelMetadata(v) => {
                    tunnel.metadata0 = v;
                    Ok(())
                }
                DpAction::Save => self.saved.save(self.scratch, tunnel),
                DpAction::Restore => self.saved.restore(self.scratch).map(|t| tunnel = t),
                DpAction::Hash => {
                    // Of the packet as the actions before left it (Open vSwitch
                    // extracts it again too); a frame that cannot be parsed hashes as 0.
                    let mut k = FlowKey::default();
                    if extract(self.scratch.data(), in_port, None, &mut k).is_ok() {
                        dp_hash = l4_hash(&k);
                        parsed = Some(k);
                    }
                    Ok(())
                }
                DpAction::TunnelPush(n) => {
                    let Some(header) = headers.get(n as usize) else {
                        self.outputs.tally.lost += 1;
                        return;
                    };
                    let (frame, vnet) = (self.scratch.data(), self.scratch.vnet);
                    let room = self.scratch.headroom();
                    let plan = self.outputs.tunnel_push_plan(header, frame, (&vnet, room));
                    match plan {
                        Push::Whole | Push::Shrink(_) => {
                            if let Push::Shrink(mss) = plan {
                                self.scratch.vnet.gso_size = mss as u16;
                            }
                            self.outputs
                                .count_tunnel_packet(header, self.scratch.data().len());
                            let id = self.outputs.tunnel_ip_id;
                            self.outputs.tunnel_ip_id = id.wrapping_add(1);
                            // The outer packet came through no tunnel.
                            tunnel = TunnelKey::default();
                            self.scratch.push_tunnel(&header.template, id)
                        }
                        Push::Split(max_ip) => {
                            // Each part runs the push and what follows it in this
                            // copy; then the copy is done.
                            let end = end_of_copy(actions, at);
                            let rest = &actions[at - 1..end];
                            self.push_split(
                                rest,
                                headers,
                                Origin { in_port, tunnel },
                                max_ip,
                                depth,
                            );
                            at = end;
                            Ok(())
                        }
                        Push::AboveMtu => {
                            self.outputs.tunnel_mtu_drop(header);
                            at = end_of_copy(actions, at);
                            Ok(())
                        }
                        Push::ByQueue => {
                            let meta = PacketMeta {
                                vnet,
                                vlan: None,
                                tunnel,
                            };
                            self.outputs.stage(header.tunnel_port, frame, &meta);
                            // The underlay's actions were for the outer packet, which
                            // the tunnel port's queue makes now.
                            at = end_of_copy(actions, at);
                            Ok(())
                        }
                    }
                }
                DpAction::TunnelPop(p) => {
                    // Refused (counted): this copy goes no further, what follows
                    // the copy's end runs as it would.
                    if let Some(popped) = self.pop(p) {
                        if let Some(flow) = self.next_flow(0, popped, 0, depth, None) {
                            let held = self.saved.held;
                            self.run(&flow.actions, &flow.headers, popped, depth + 1);
                            self.saved.held = held;
                        }
                    }
                    at = end_of_copy(actions, at);
                    Ok(())
                }
                DpAction::Recirc(id) => {
                    let from = Origin { in_port, tunnel };
                    let next = self.next_flow(id, from, dp_hash, depth, parsed.take());
                    if let Some(flow) = next {
                        // A pass that ends early (a meter's drop, a TTL run out)
                        // leaves the copies it kept: they are let go here, so the
                        // `Restore` after this puts back this pass's copy.
                        let held = self.saved.held;
                        self.run(&flow.actions, &flow.headers, from, depth + 1);
                        self.saved.held = held;
                    }
                    Ok(())
                }
            };
            match result {
                Ok(()) => {}
                // A packet whose TTL ran out goes no further (there is no controller to
                // tell); it is counted on the flow that matched it.
                Err(RewriteError::TtlExpired) => return,
                Err(RewriteError::NoHeadroom | RewriteError::TooBig | RewriteError::Unsaved) => {
                    self.outputs.tally.lost += 1;
                    return;
                }
            }
        }
    }
}

/// Where the copy open at `actions[at]` ends: the `Restore` that closes the `Save`
/// last opened before it, or the end of the actions.
fn end_of_copy(actions: &[DpAction], at: usize) -> usize {
    let mut open = 0usize;
    for (i, a) in actions.iter().enumerate().skip(at) {
        match a {
            DpAction::Save => open += 1,
            DpAction::Restore if open == 0 => return i,
            DpAction::Restore => open -= 1,
            _ => {}
        }
    }
    actions.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A packet the tunnel port's queue takes skips the underlay's actions: up to
    /// the `Restore` that closes the copy the push opened (copies within it are
    /// stepped over), or to the end when the copy was trailing (and dropped).
    #[test]
    fn the_end_of_a_copy_is_its_own_restore() {
        use DpAction::{Output, Restore, Save, TunnelPush};
        let nested = [
            Save,
            TunnelPush(0),
            Save,
            Output(3),
            Restore,
            Output(4),
            Restore,
            Output(1),
        ];
        // Just after the push (index 1): the copy's Restore is at 6, not 4.
        assert_eq!(end_of_copy(&nested, 2), 6);
        let trailing = [Output(1), TunnelPush(0), Output(4)];
        assert_eq!(end_of_copy(&trailing, 2), 3);
    }
}
