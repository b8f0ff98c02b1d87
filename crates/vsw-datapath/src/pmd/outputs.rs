//! A PMD's output batches, one per port: each packet staged as the egress stage
//! decides (`egress.rs`: as it is — maybe merged with the segments before it —
//! whole, cut, or with its checksum finished), counted, and sent in batches when
//! they are due (`tx-flush-interval`); tunnel pushes counted on their tunnel port.

use std::sync::Arc;

use vsw_packet::gro::{Gro, Offer};
use vsw_packet::gso;
use vsw_packet::tunnel::segment_udp_tunnel;
use vsw_packet::vnet::VNET_F_NEEDS_CSUM;
use vsw_packet::VnetHdr;

use crate::egress::{self, Egress, Push};
use crate::port::{PacketMeta, StageError, TunnelKey, TxOffloads, TxQueue, BATCH_SIZE};
use crate::port_map::PortMap;
use crate::shared::PortHandle;
use crate::stats::PortStats;
use crate::tunnel_push::PushHeader;
use crate::txbatch::BatchClock;

/// One port's transmit queue with what has been staged since the last send.
pub(super) struct LocalTx {
    pub(super) handle: Arc<PortHandle>,
    pub(super) queue: Box<dyn TxQueue>,
    pub(super) offloads: TxOffloads,
    pub(super) staged_packets: u64,
    pub(super) staged_bytes: u64,
    /// Segments being merged for this port (ports that take super-frames).
    pub(super) gro: Option<Box<Gro>>,
    /// The tunnel of the segments being merged (only segments of one tunnel are).
    pub(super) gro_tunnel: TunnelKey,
    /// When the batch must leave (`tx-flush-interval`).
    pub(super) clock: BatchClock,
    /// `auto` for a receiver that may poll: no batching while it does.
    pub(super) auto: bool,
    /// The queue was asked to learn to take tunnel super-frames (once is enough).
    pub(super) asked_tunnel_tso: bool,
}

/// What staging on a transmit queue sent and lost, and the PMD's time for this
/// iteration (microseconds), which stamps what is staged.
#[derive(Default)]
pub(super) struct TxTally {
    pub(super) batches: u64,
    pub(super) packets: u64,
    pub(super) lost: u64,
    pub(super) now_us: u64,
    /// The same time on `clock::now_ms`'s scale, which every PMD shares (the
    /// connection tracker's timeouts are read on it).
    pub(super) now_ms: u64,
}

impl LocalTx {
    /// Sends on what the merge holds (it must leave before anything that came after).
    pub(super) fn flush_gro(&mut self, t: &mut TxTally) {
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
    pub(super) fn stage_merging(&mut self, data: &[u8], meta: &PacketMeta, t: &mut TxTally) {
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
    pub(super) fn stage_ready(&mut self, data: &[u8], meta: &PacketMeta, t: &mut TxTally) {
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
pub(super) fn count_cut(
    result: Result<usize, gso::GsoError>,
    stats: &PortStats,
    tally: &mut TxTally,
) {
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
pub(super) struct Outputs {
    pub(super) by_port: PortMap<LocalTx>,
    /// Where segments and checksum-completed copies are built, for ports that cannot
    /// finish a packet themselves.
    pub(super) fixup: Box<[u8]>,
    pub(super) tally: TxTally,
    /// The IPv4 identification of the next tunnel packet this PMD sends.
    pub(super) tunnel_ip_id: u16,
}

/// The largest packet vsw builds a software segment or checksum copy of.
pub(super) const FIXUP_BUFFER: usize = 65_535 + 64;

impl Outputs {
    /// Stages a packet for `port` as the egress stage decides (egress.rs).
    #[inline]
    pub(super) fn stage(&mut self, port: u32, data: &[u8], meta: &PacketMeta) {
        let Some(tx) = self.by_port.get_mut(port) else {
            return;
        };
        if egress::as_is(data, &meta.vnet, &tx.offloads) {
            // TCP segments may first be merged for the device.
            if meta.vlan.is_none() && tx.gro.is_some() {
                tx.stage_merging(data, meta, &mut self.tally);
            } else {
                tx.flush_gro(&mut self.tally);
                tx.stage_ready(data, meta, &mut self.tally);
            }
            return;
        }
        let plan = egress::plan_other(data, &meta.vnet, &tx.offloads);
        self.stage_prepared(port, data, meta, plan);
    }

    /// Hands a packet to `port`'s queue as it is, the egress stage not asked (a
    /// push that could not be made: the tunnel port's queue drops it, once, not
    /// cut first).
    #[cold]
    pub(super) fn stage_as_is(&mut self, port: u32, data: &[u8], meta: &PacketMeta) {
        let Some(tx) = self.by_port.get_mut(port) else {
            self.tally.lost += 1;
            return;
        };
        tx.flush_gro(&mut self.tally);
        tx.stage_ready(data, meta, &mut self.tally);
    }

    /// Anything but a packet as it is: it leaves after what the merge holds.
    #[cold]
    pub(super) fn stage_prepared(
        &mut self,
        port: u32,
        data: &[u8],
        meta: &PacketMeta,
        plan: Egress,
    ) {
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
            Egress::Cut(lay, mss) => {
                let plain = meta.without_offloads();
                let result = gso::segment_tcp_laid_out(data, &lay, mss, &mut self.fixup, |seg| {
                    tx.stage_ready(seg, &plain, tally)
                });
                count_cut(result, &stats, tally);
            }
            Egress::CutTunnel(t, mss) => {
                if !tx.offloads.tunnel_tso && !tx.asked_tunnel_tso {
                    tx.asked_tunnel_tso = true;
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
    pub(super) fn send_all(&mut self) {
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
    pub(super) fn send_due(&mut self) {
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
    pub(super) fn tunnel_push_plan(
        &mut self,
        header: &PushHeader,
        frame: &[u8],
        (vnet, headroom): (&VnetHdr, usize),
    ) -> Push {
        match self.by_port.get_mut(header.tunnel_port) {
            Some(tx) => egress::push_plan(header, frame, vnet, headroom, tx.offloads.mtu),
            // No such port here: `stage_as_is` counts the loss.
            None => Push::ByQueue,
        }
    }

    /// A packet of `len` bytes pushed in front of `header`: it counts as sent by the
    /// tunnel port.
    pub(super) fn count_tunnel_packet(&mut self, header: &PushHeader, len: usize) {
        if let Some(tx) = self.by_port.get_mut(header.tunnel_port) {
            tx.staged_packets += 1;
            tx.staged_bytes += len as u64;
            tx.clock.staged(self.tally.now_us);
        }
    }

    /// A packet above `header`'s tunnel port's MTU: dropped and counted there.
    pub(super) fn tunnel_mtu_drop(&mut self, header: &PushHeader) {
        self.tally.lost += 1;
        if let Some(tx) = self.by_port.get_mut(header.tunnel_port) {
            PortStats::add_drop(&tx.handle.stats.tx_mtu_drops, 1);
        }
    }

    /// The earliest time a held batch must leave, if any is held.
    pub(super) fn earliest_deadline(&self) -> Option<u64> {
        self.by_port
            .values()
            .filter_map(|tx| tx.clock.deadline())
            .min()
    }
}

/// Sends what `tx` has staged; returns (batches, packets) sent.
pub(super) fn send(tx: &mut LocalTx, now_us: u64) -> (u64, u64) {
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
