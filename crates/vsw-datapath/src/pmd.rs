//! The poll-mode driver thread: polls every receive queue, classifies each batch,
//! runs actions and sends the output batches.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use arrayvec::ArrayVec;
use vsw_flow::{Action, Classifier, MacTable, Rule};
use vsw_packet::key::VLAN_CFI;
use vsw_packet::{extract, FlowKey};

use crate::clock;
use crate::datapath::{PortHandle, Shared, Snapshot};
use crate::port::{PacketMeta, RxBatch, RxQueue, StageError, TxQueue, BATCH_SIZE};
use crate::stats::PortStats;

/// How long a PMD with nothing to poll sleeps before looking for a change again
/// (a change wakes it at once).
const NO_PORTS_PARK: Duration = Duration::from_millis(100);

/// What is done with a packet no rule matches: the switch works as a plain switch.
const TABLE_MISS: [Action; 1] = [Action::Normal];

struct LocalRx {
    no: u32,
    handle: Arc<PortHandle>,
    queue: Box<dyn RxQueue>,
}

/// A port's transmit queue with what has been staged since the last send.
struct LocalTx {
    queue: Box<dyn TxQueue>,
    stats: Arc<PortStats>,
    staged_packets: u64,
    staged_bytes: u64,
}

impl LocalTx {
    fn stage(&mut self, data: &[u8], meta: &PacketMeta) {
        match self.queue.stage(data, meta) {
            Ok(()) => {
                self.staged_packets += 1;
                self.staged_bytes += data.len() as u64;
                if self.queue.pending() >= BATCH_SIZE {
                    self.send();
                }
            }
            Err(StageError::QueueFull) => PortStats::add_drop(&self.stats.tx_queue_full, 1),
            Err(StageError::TooBig) => PortStats::add_drop(&self.stats.tx_too_big, 1),
        }
    }

    fn send(&mut self) {
        // Some packets leave at once (a device may send large frames by themselves),
        // so what was staged, not what is pending, says whether there is work.
        if self.staged_packets == 0 && self.queue.pending() == 0 {
            return;
        }
        let failed = self.queue.flush() as u64;
        let sent = self.staged_packets.saturating_sub(failed);
        // Bytes of refused packets are not known one by one; they are few and rare.
        self.stats.add_tx(sent, self.staged_bytes);
        PortStats::add_drop(&self.stats.tx_errors, failed);
        self.staged_packets = 0;
        self.staged_bytes = 0;
    }
}

/// Outputs of the current PMD: transmit queues by port number.
struct Outputs {
    by_port: Vec<Option<LocalTx>>,
    /// Port numbers in the order they flood.
    ports: Vec<u32>,
}

impl Outputs {
    fn output(&mut self, port: u32, in_port: u32, data: &[u8], meta: &PacketMeta) {
        if port == in_port {
            return;
        }
        if let Some(Some(tx)) = self.by_port.get_mut(port as usize) {
            tx.stage(data, meta);
        }
    }

    fn flood(&mut self, in_port: u32, data: &[u8], meta: &PacketMeta) {
        for &p in &self.ports {
            if p != in_port {
                if let Some(Some(tx)) = self.by_port.get_mut(p as usize) {
                    tx.stage(data, meta);
                }
            }
        }
    }

    fn send_all(&mut self) {
        for tx in self.by_port.iter_mut().flatten() {
            tx.send();
        }
    }
}

pub(crate) struct Pmd {
    shared: Arc<Shared>,
    snapshot: Option<Arc<Snapshot>>,
    rxqs: Vec<LocalRx>,
    outputs: Outputs,
    mac_table: MacTable,
    pinned: Option<usize>,
    packets: u64,
    rule_hits: u64,
    rule_misses: u64,
    busy_cycles: u64,
    idle_cycles: u64,
    iterations: u64,
}

impl Pmd {
    pub fn new(shared: Arc<Shared>) -> Pmd {
        Pmd {
            shared,
            snapshot: None,
            rxqs: Vec::new(),
            outputs: Outputs {
                by_port: Vec::new(),
                ports: Vec::new(),
            },
            mac_table: MacTable::default(),
            pinned: None,
            packets: 0,
            rule_hits: 0,
            rule_misses: 0,
            busy_cycles: 0,
            idle_cycles: 0,
            iterations: 0,
        }
    }

    /// Takes up the newest snapshot: new ports' queues are taken, removed ports' queues
    /// are flushed and dropped.
    fn reconfigure(&mut self) {
        let snap = self.shared.snapshot.load_full();
        if snap.pmd_core != self.pinned {
            if let Some(core) = snap.pmd_core {
                if core_affinity::set_for_current(core_affinity::CoreId { id: core }) {
                    tracing::info!(core, "PMD pinned");
                } else {
                    tracing::warn!(core, "could not pin the PMD to its core");
                }
            }
            self.pinned = snap.pmd_core;
        }
        let keep = |no: u32| snap.ports.iter().any(|p| p.no == no);
        self.rxqs.retain(|r| keep(r.no));
        for (no, slot) in self.outputs.by_port.iter_mut().enumerate() {
            if slot.is_some() && !keep(no as u32) {
                if let Some(mut tx) = slot.take() {
                    tx.send();
                }
                self.mac_table.flush_port(no as u32);
            }
        }
        for port in &snap.ports {
            if self.rxqs.iter().any(|r| Arc::ptr_eq(&r.handle, port)) {
                continue;
            }
            let Some(queues) = port.take_queues() else {
                tracing::warn!(port = %port.name, "port has no queues to poll");
                continue;
            };
            let idx = port.no as usize;
            if self.outputs.by_port.len() <= idx {
                self.outputs.by_port.resize_with(idx + 1, || None);
            }
            self.outputs.by_port[idx] = Some(LocalTx {
                queue: queues.tx,
                stats: port.stats.clone(),
                staged_packets: 0,
                staged_bytes: 0,
            });
            self.rxqs.push(LocalRx {
                no: port.no,
                handle: port.clone(),
                queue: queues.rx,
            });
        }
        self.outputs.ports = self.rxqs.iter().map(|r| r.no).collect();
        let generation = snap.generation;
        self.snapshot = Some(snap);
        self.shared.ack(generation);
    }

    pub fn run(mut self) {
        self.reconfigure();
        let hz = clock::cycles_per_second();
        let mut last = clock::cycles();
        let mut next_housekeeping = last;
        while !self.shared.stop.load(Ordering::Acquire) {
            let generation = self.shared.generation.load(Ordering::Acquire);
            if self
                .snapshot
                .as_ref()
                .is_none_or(|s| s.generation != generation)
            {
                self.reconfigure();
            }
            if self.rxqs.is_empty() {
                std::thread::park_timeout(NO_PORTS_PARK);
                last = clock::cycles();
                continue;
            }
            let now_ms = clock::now_ms();
            let mut received = 0;
            for i in 0..self.rxqs.len() {
                received += self.poll_queue(i, now_ms);
            }
            self.outputs.send_all();

            let now = clock::cycles();
            let spent = now.wrapping_sub(last);
            last = now;
            if received > 0 {
                self.busy_cycles += spent;
                self.packets += received as u64;
            } else {
                self.idle_cycles += spent;
            }
            self.iterations += 1;
            if now >= next_housekeeping {
                next_housekeeping = now + hz;
                self.housekeeping(now_ms);
            }
            self.publish_stats();
        }
        // Everything staged leaves before the queues close.
        self.outputs.send_all();
    }

    fn housekeeping(&mut self, now_ms: u64) {
        self.mac_table.expire(now_ms);
        for rx in &mut self.rxqs {
            let overrun = rx.queue.take_overrun_drops();
            PortStats::add_drop(&rx.handle.stats.rx_overrun, overrun);
        }
    }

    fn publish_stats(&self) {
        let s = &self.shared.stats;
        s.packets.store(self.packets, Ordering::Relaxed);
        s.rule_hits.store(self.rule_hits, Ordering::Relaxed);
        s.rule_misses.store(self.rule_misses, Ordering::Relaxed);
        s.busy_cycles.store(self.busy_cycles, Ordering::Relaxed);
        s.idle_cycles.store(self.idle_cycles, Ordering::Relaxed);
        s.iterations.store(self.iterations, Ordering::Relaxed);
    }

    /// Receives one batch from queue `i` and sends each packet on its way.
    fn poll_queue(&mut self, i: usize, now_ms: u64) -> usize {
        let Some(snapshot) = self.snapshot.as_ref() else {
            return 0;
        };
        let classifier: &Classifier = &snapshot.classifier;
        let rx = &mut self.rxqs[i];
        let in_port = rx.no;
        let stats = &rx.handle.stats;
        let mut batch = RxBatch::new();
        let drops = rx.queue.recv(&mut batch);
        PortStats::add_drop(&stats.rx_truncated, u64::from(drops.truncated));
        let received = batch.len();
        if received == 0 {
            drop(batch);
            rx.queue.release();
            return 0;
        }
        let mut bytes = 0u64;
        let mut malformed = 0u64;
        let mut tally: ArrayVec<(&Arc<Rule>, u64, u64), BATCH_SIZE> = ArrayVec::new();
        for pkt in &batch {
            let len = pkt.data.len() as u64;
            bytes += len;
            let key = match extract(pkt.data, in_port, pkt.meta.vlan) {
                Ok(k) => k,
                Err(_) => {
                    malformed += 1;
                    continue;
                }
            };
            let actions: &[Action] = match classifier.lookup(&key) {
                Some(rule) => {
                    self.rule_hits += 1;
                    match tally.iter_mut().find(|(r, _, _)| Arc::ptr_eq(r, rule)) {
                        Some(t) => {
                            t.1 += 1;
                            t.2 += len;
                        }
                        None => tally.push((rule, 1, len)),
                    }
                    &rule.spec.actions
                }
                None => {
                    self.rule_misses += 1;
                    &TABLE_MISS
                }
            };
            for action in actions {
                match *action {
                    Action::Output(port) => self.outputs.output(port, in_port, pkt.data, &pkt.meta),
                    Action::Flood => self.outputs.flood(in_port, pkt.data, &pkt.meta),
                    Action::Normal => normal(
                        &mut self.outputs,
                        &mut self.mac_table,
                        &key,
                        pkt.data,
                        &pkt.meta,
                        now_ms,
                    ),
                    Action::Drop => {}
                }
            }
        }
        drop(batch);
        rx.queue.release();
        stats.add_rx(received as u64, bytes);
        PortStats::add_drop(&stats.rx_malformed, malformed);
        for (rule, packets, bytes) in tally {
            rule.stats.add(packets, bytes, now_ms);
        }
        received
    }
}

/// The `normal` action: a MAC-learning switch.
fn normal(
    outputs: &mut Outputs,
    macs: &mut MacTable,
    key: &FlowKey,
    data: &[u8],
    meta: &PacketMeta,
    now_ms: u64,
) {
    let vlan = if key.vlan_tci & VLAN_CFI != 0 {
        key.vlan_tci & 0x0fff
    } else {
        0
    };
    macs.learn(key.dl_src, vlan, key.in_port, now_ms);
    if key.dl_dst.is_multicast() {
        outputs.flood(key.in_port, data, meta);
        return;
    }
    match macs.lookup(key.dl_dst, vlan, now_ms) {
        Some(port) => outputs.output(port, key.in_port, data, meta),
        None => outputs.flood(key.in_port, data, meta),
    }
}
