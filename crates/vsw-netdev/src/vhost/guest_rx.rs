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
    pub(super) bufs: Vec<Box<[u8]>>,
    pub(super) lens: [usize; BATCH_SIZE],
    pub(super) staged: usize,
    /// The buffers (chain heads, bytes written) and descriptors of the frame being
    /// placed: kept here so that placing allocates nothing.
    pub(super) heads: ArrayVec<(u16, u32), MAX_BUFFERS>,
    pub(super) segments: ArrayVec<(GuestAddress, u32, u8), MAX_SEGMENTS>,
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
            bufs: (0..BATCH_SIZE)
                .map(|_| vec![0u8; HDR + MAX_FRAME].into_boxed_slice())
                .collect(),
            lens: [0; BATCH_SIZE],
            staged: 0,
            heads: ArrayVec::new(),
            segments: ArrayVec::new(),
            status,
            _server: server,
        }
    }
}

/// What became of one frame for the guest.
pub(super) enum Placed {
    /// Written into this many buffers.
    Buffers(u16),
    /// The guest has no (large enough) buffer now: nothing taken.
    NoBuffer,
    /// The guest's buffers were unusable: given back empty, this many.
    Bad(u16),
}

/// Writes a used-ring entry at position `index` (not yet published).
pub(super) fn write_used<M: GuestMemory>(q: &Queue, mem: &M, index: u16, head: u16, len: u32) {
    let slot = u64::from(index % q.size());
    let at = q.used_ring() + 4 + 8 * slot;
    let mut elem = [0u8; 8];
    elem[..4].copy_from_slice(&u32::from(head).to_le_bytes());
    elem[4..].copy_from_slice(&len.to_le_bytes());
    // The used ring was checked to lie in guest memory when the queue started.
    let _ = mem.write_slice(&elem, GuestAddress(at));
}

impl GuestRx {
    /// Places `frame` (header included) into the guest's receive buffers: one chain,
    /// or with mergeable buffers as many as it takes (their count goes into the
    /// header). The used entries go at `used_at..`; the caller publishes them.
    pub(super) fn place(
        &mut self,
        r: &mut Running,
        frame: &mut [u8],
        mergeable: bool,
        used_at: u16,
    ) -> Placed {
        let mem = r.mem.clone();
        self.heads.clear();
        self.segments.clear();
        let most = if mergeable { MAX_BUFFERS } else { 1 };
        let mut room = 0usize;
        let mut usable = true;
        while room < frame.len() && self.heads.len() < most {
            let Some(chain) = r.queue.pop_descriptor_chain(&**mem) else {
                break;
            };
            let head = chain.head_index();
            let mut more = false;
            for d in chain {
                more = d.has_next();
                if !d.is_write_only() || self.segments.is_full() {
                    usable = false;
                    break;
                }
                self.segments
                    .push((d.addr(), d.len(), self.heads.len() as u8));
                room += d.len() as usize;
            }
            usable &= !more;
            self.heads.push((head, 0));
            if !usable {
                break;
            }
        }
        if usable && room < frame.len() {
            // Not enough buffers (or one too small): they stay the guest's.
            for _ in 0..self.heads.len() {
                r.queue.go_to_previous_position();
            }
            return Placed::NoBuffer;
        }
        let count = self.heads.len() as u16;
        if usable {
            if mergeable {
                vsw_packet::vnet::write_num_buffers(frame, count);
            }
            let mut done = 0;
            for &(addr, len, buffer) in &self.segments {
                if done == frame.len() {
                    break;
                }
                let n = (len as usize).min(frame.len() - done);
                if mem.write_slice(&frame[done..done + n], addr).is_err() {
                    usable = false;
                    break;
                }
                self.heads[usize::from(buffer)].1 += n as u32;
                done += n;
            }
        }
        for (k, &(head, written)) in self.heads.iter().enumerate() {
            let len = if usable { written } else { 0 };
            write_used(&r.queue, &**mem, used_at.wrapping_add(k as u16), head, len);
        }
        if usable {
            Placed::Buffers(count)
        } else {
            Placed::Bad(count)
        }
    }
}

impl TxQueue for GuestRx {
    /// What the guest's driver negotiated: frames with checksums left to it
    /// (GUEST_CSUM), TCP super-frames (GUEST_TSO4 and 6), and its MTU.
    fn offloads(&self) -> TxOffloads {
        TxOffloads {
            csum: self.status.has(VIRTIO_NET_F_GUEST_CSUM),
            tso: self.status.features.load(Ordering::Relaxed)
                & (VIRTIO_NET_F_GUEST_TSO4 | VIRTIO_NET_F_GUEST_TSO6)
                == VIRTIO_NET_F_GUEST_TSO4 | VIRTIO_NET_F_GUEST_TSO6,
            mtu: self.status.mtu.load(Ordering::Relaxed) as usize,
        }
    }

    fn stage(&mut self, data: &[u8], meta: &PacketMeta) -> Result<(), StageError> {
        if self.staged == BATCH_SIZE {
            return Err(StageError::QueueFull);
        }
        let hdr_len = header_len(self.status.features.load(Ordering::Relaxed));
        let buf = &mut self.bufs[self.staged];
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
        self.lens[self.staged] = hdr_len + len;
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
        let first = r.queue.next_used();
        let mut used: u16 = 0;
        let mut refused = 0;
        let mut bufs = std::mem::take(&mut self.bufs);
        for (buf, len) in bufs.iter_mut().zip(self.lens).take(n) {
            match self.place(r, &mut buf[..len], mergeable, first.wrapping_add(used)) {
                Placed::Buffers(k) => used += k,
                Placed::NoBuffer => {
                    refused += 1;
                    self.status.no_buffer.fetch_add(1, Ordering::Relaxed);
                }
                Placed::Bad(k) => {
                    used += k;
                    refused += 1;
                    self.status.bad_chains.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        self.bufs = bufs;
        if used > 0 {
            // One used-index update for the batch: a frame's buffers become visible
            // to the driver together, after their contents.
            let next = first.wrapping_add(used);
            let _ = r.mem.store(
                next.to_le(),
                GuestAddress(r.queue.used_ring() + 2),
                Ordering::Release,
            );
            r.queue.set_next_used(next);
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
