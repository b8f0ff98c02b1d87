//! Frames for the guest: its receive queue, filled by a PMD once per batch.

use super::*;

/// The guest's receive queue: frames for the guest, staged here and written into its
/// buffers once per batch (one lock and one used-index update per batch, not per
/// packet).
pub(super) struct GuestRx {
    /// Every receive queue of the guest, and the one this transmit queue prefers.
    pub(super) rings: Arc<Vec<Arc<Vring>>>,
    pub(super) pair: usize,
    /// The receive queue the last batch went into.
    pub(super) last_pair: usize,
    /// Each holds a virtio-net header and a frame.
    pub(super) slots: FrameSlots,
    pub(super) staged: usize,
    /// The heads of this batch's fast case, read together.
    pub(super) taken: Batch,
    pub(super) placer: Placer,
    pub(super) status: Arc<GuestStatus>,
    pub(super) _server: Arc<Server>,
}

impl GuestRx {
    pub(super) fn new(
        rings: Arc<Vec<Arc<Vring>>>,
        pair: usize,
        status: Arc<GuestStatus>,
        server: Arc<Server>,
    ) -> GuestRx {
        GuestRx {
            rings,
            pair,
            last_pair: pair,
            slots: FrameSlots::default(),
            staged: 0,
            taken: Batch::default(),
            placer: Placer::default(),
            status,
            _server: server,
        }
    }
}

/// What became of one frame for the guest.
pub(super) enum Placed {
    /// Written into the guest's buffers.
    Buffers,
    /// The guest has no (large enough) buffer now: nothing taken.
    NoBuffer,
    /// The guest's buffers were unusable: given back empty.
    Bad,
}

/// Places frames one by one, for every case the batch's fast case does not take
/// (mergeable buffers, chains, buffers too small). Holds the buffers (chain heads,
/// bytes written) and descriptors of the frame being placed, so that placing
/// allocates nothing.
#[derive(Default)]
pub(super) struct Placer {
    heads: ArrayVec<(u16, u32), MAX_BUFFERS>,
    segments: ArrayVec<(u64, u32, u8), MAX_SEGMENTS>,
    chain: Chain,
}

impl Placer {
    /// Places `frame` (header included) into the guest's receive buffers: one chain,
    /// or with mergeable buffers as many as it takes (their count goes into the
    /// header), from the `available` heads not yet taken (decreased by those used).
    /// The used entries are added; the caller publishes them.
    pub(super) fn place(
        &mut self,
        r: &mut Running,
        frame: &mut [u8],
        mergeable: bool,
        available: &mut u16,
    ) -> Placed {
        self.heads.clear();
        self.segments.clear();
        let most = if mergeable { MAX_BUFFERS } else { 1 };
        let mut room = 0usize;
        let mut usable = true;
        while room < frame.len() && self.heads.len() < most && *available > 0 {
            let head = r.queue.take();
            *available -= 1;
            self.heads.push((head, 0));
            if r.queue.walk(head, &mut self.chain).is_err() {
                usable = false;
                break;
            }
            for s in &self.chain {
                if !s.writable || self.segments.is_full() {
                    usable = false;
                    break;
                }
                self.segments
                    .push((s.addr, s.len, (self.heads.len() - 1) as u8));
                room += s.len as usize;
            }
            if !usable {
                break;
            }
        }
        if usable && room < frame.len() {
            // Not enough buffers (or one too small): they stay the guest's.
            let n = self.heads.len() as u16;
            r.queue.untake(n);
            *available += n;
            return Placed::NoBuffer;
        }
        if usable {
            if mergeable {
                vsw_packet::vnet::write_num_buffers(frame, self.heads.len() as u16);
            }
            let mut done = 0;
            for &(addr, len, buffer) in &self.segments {
                if done == frame.len() {
                    break;
                }
                let n = (len as usize).min(frame.len() - done);
                if !r.queue.write(addr, &frame[done..done + n]) {
                    usable = false;
                    break;
                }
                self.heads[usize::from(buffer)].1 += n as u32;
                done += n;
            }
        }
        for &(head, written) in &self.heads {
            r.queue.add_used(head, if usable { written } else { 0 });
        }
        if usable {
            Placed::Buffers
        } else {
            Placed::Bad
        }
    }
}

impl TxQueue for GuestRx {
    /// What the guest's driver negotiated: frames with checksums left to it
    /// (GUEST_CSUM), TCP super-frames (GUEST_TSO4 and 6), and its MTU.
    fn offloads(&self) -> TxOffloads {
        let tso = self.status.features.load(Ordering::Relaxed)
            & (VIRTIO_NET_F_GUEST_TSO4 | VIRTIO_NET_F_GUEST_TSO6)
            == VIRTIO_NET_F_GUEST_TSO4 | VIRTIO_NET_F_GUEST_TSO6;
        TxOffloads {
            csum: self.status.has(VIRTIO_NET_F_GUEST_CSUM),
            tso,
            merges: tso,
            tunnel_tso: false,
            mtu: self.status.mtu.load(Ordering::Relaxed) as usize,
        }
    }

    fn stage(&mut self, data: &[u8], meta: &PacketMeta) -> Result<(), StageError> {
        if self.staged == BATCH_SIZE {
            return Err(StageError::QueueFull);
        }
        let hdr_len = header_len(self.status.features.load(Ordering::Relaxed));
        let most = hdr_len + data.len() + if meta.vlan.is_some() { 4 } else { 0 };
        let buf = self
            .slots
            .room(self.staged, most)
            .ok_or(StageError::TooBig)?;
        let hdr: &mut [u8; VNET_HDR_LEN] = (&mut buf[..VNET_HDR_LEN])
            .try_into()
            .map_err(|_| StageError::TooBig)?;
        // The datapath finished what offloads() says the guest cannot.
        meta.vnet.write(hdr);
        if hdr_len == HDR {
            // num_buffers: 1 unless the frame spans several mergeable buffers.
            vsw_packet::vnet::write_num_buffers(buf, 1);
        }
        let len = copy_frame(&mut buf[hdr_len..], data, meta.vlan).ok_or(StageError::TooBig)?;
        self.slots.set_len(self.staged, hdr_len + len);
        self.staged += 1;
        Ok(())
    }

    fn pending(&self) -> usize {
        self.staged
    }

    fn flush(&mut self) -> usize {
        let n = std::mem::take(&mut self.staged);
        if n == 0 {
            return 0;
        }
        // This transmit queue's own receive queue when the guest runs it, else the
        // first (a guest that enabled fewer queue pairs than vsw has PMDs).
        let rings = self.rings.clone();
        self.last_pair = self.pair;
        let mut ring = &rings[self.pair];
        let mut guard = ring.lock();
        if guard.is_none() && self.pair != 0 {
            drop(guard);
            self.last_pair = 0;
            ring = &rings[0];
            guard = ring.lock();
        }
        let Some(r) = guard.as_mut() else {
            // No guest (yet, or any more): like a cable nobody listens on.
            self.status.no_buffer.fetch_add(n as u64, Ordering::Relaxed);
            return n;
        };
        let mergeable = self.status.has(VIRTIO_NET_F_MRG_RXBUF);
        let mut refused = 0;
        let Some(mut available) = r.queue.available() else {
            // The driver's index is beyond what its ring holds: nothing is taken.
            self.status.bad_chains.fetch_add(1, Ordering::Relaxed);
            self.status.no_buffer.fetch_add(n as u64, Ordering::Relaxed);
            return n;
        };
        let first = r.queue.next_used();
        // The fast case: a buffer of one descriptor per frame, large enough. The
        // batch's heads and descriptors are read together; from the first frame that
        // does not fit that way on, frames are placed one by one.
        let want = n.min(usize::from(available));
        r.queue.take_batch(want, &mut self.taken);
        available -= want as u16;
        let mut fast = 0;
        while fast < want {
            let frame = self.slots.frame(fast);
            let len = frame.len();
            let Some(s) = self.taken.single(fast, true) else {
                break;
            };
            if (s.len as usize) < len {
                break;
            }
            let head = self.taken.heads[fast];
            if r.queue.write(s.addr, frame) {
                r.queue.add_used(head, len as u32);
            } else {
                r.queue.add_used(head, 0);
                refused += 1;
                self.status.bad_chains.fetch_add(1, Ordering::Relaxed);
            }
            fast += 1;
        }
        let rest = (want - fast) as u16;
        r.queue.untake(rest);
        available += rest;
        for k in fast..n {
            match self
                .placer
                .place(r, self.slots.frame_mut(k), mergeable, &mut available)
            {
                Placed::Buffers => {}
                Placed::NoBuffer => {
                    refused += 1;
                    self.status.no_buffer.fetch_add(1, Ordering::Relaxed);
                }
                Placed::Bad => {
                    refused += 1;
                    self.status.bad_chains.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        if r.queue.next_used() != first {
            // One used-index update for the batch: a frame's buffers become visible
            // to the driver together, after their contents.
            r.queue.publish_used();
        }
        r.notify(&ring.wants_interrupts, &self.status.notifications);
        let mode = if ring.wants_interrupts.load(Ordering::Relaxed) {
            RxMode::WantsInterrupts
        } else {
            RxMode::Polls
        };
        self.status.set_rx_mode(self.last_pair, mode);
        refused
    }

    fn receiver_may_poll(&self) -> bool {
        true
    }

    fn receiver_polls(&self) -> bool {
        self.status.rx_mode(self.last_pair) == RxMode::Polls
    }
}
