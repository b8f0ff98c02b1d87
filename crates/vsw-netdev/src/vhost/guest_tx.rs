//! Frames the guest sends: its transmit queue, polled by a PMD.

use super::*;
use vsw_packet::ethernet::ETH_HDR_LEN;

/// The guest's transmit queue, polled by a PMD: frames the guest sends.
pub(super) struct GuestTx {
    pub(super) vring: Arc<Vring>,
    /// The virtio-net header length of the frames in `slots`.
    pub(super) hdr: usize,
    /// Each holds a virtio-net header and a frame.
    pub(super) slots: FrameSlots,
    /// The heads of this poll and the chain being read: kept here so that reading
    /// allocates nothing.
    pub(super) taken: Batch,
    pub(super) chain: Chain,
    pub(super) status: Arc<GuestStatus>,
    pub(super) _server: Arc<Server>,
}

/// Copies the chain at `head` (virtio-net header and frame) into slot `k`; `None` when
/// it is unusable (a bad shape, writable where it should be readable, outside guest
/// memory, longer than the largest frame, or shorter than a header and an Ethernet
/// header). `walked` counts the descriptors looked at.
pub(super) fn read_chain(
    queue: &mut SplitQueue,
    head: u16,
    chain: &mut Chain,
    slots: &mut FrameSlots,
    k: usize,
    hdr: usize,
    walked: &mut usize,
) -> Option<usize> {
    let shape = queue.walk(head, chain);
    *walked += chain.len().max(1);
    shape.ok()?;
    if chain.iter().any(|s| s.writable) {
        return None;
    }
    let total: u64 = chain.iter().map(|s| u64::from(s.len)).sum();
    let buf = slots.room(k, usize::try_from(total).ok()?)?;
    let mut len = 0usize;
    for s in chain.iter() {
        let out = &mut buf[len..len + s.len as usize];
        if !queue.read(s.addr, out) {
            return None;
        }
        len += s.len as usize;
    }
    (len >= hdr + ETH_HDR_LEN).then_some(len)
}

impl RxQueue for GuestTx {
    fn recv<'a>(&'a mut self, batch: &mut RxBatch<'a>) -> RxDrops {
        let mut n = 0;
        let offloads = self
            .status
            .has(VIRTIO_NET_F_CSUM | VIRTIO_NET_F_HOST_TSO4 | VIRTIO_NET_F_HOST_TSO6);
        let max_plain = self.status.mtu.load(Ordering::Relaxed) as usize + L2_OVERHEAD;
        let hdr = header_len(self.status.features.load(Ordering::Relaxed));
        self.hdr = hdr;
        {
            let mut guard = self.vring.lock();
            let Some(r) = guard.as_mut() else {
                return RxDrops::default();
            };
            let Some(available) = r.queue.available() else {
                // The driver's index is beyond what its ring holds: nothing is taken.
                self.status.bad_chains.fetch_add(1, Ordering::Relaxed);
                return RxDrops::default();
            };
            r.queue.take_batch(usize::from(available), &mut self.taken);
            let taken = self.taken.heads.len();
            let mut walked = 0;
            for k in 0..taken {
                if walked >= POLL_DESCRIPTOR_BUDGET {
                    // The rest stay the guest's, for the next poll.
                    r.queue.untake((taken - k) as u16);
                    break;
                }
                let head = self.taken.heads[k];
                let slots = &mut self.slots;
                let read = match self.taken.single(k, false) {
                    // One descriptor the guest wrote: no walk. Written out rather
                    // than through `read_chain` with a one-segment slice: that cost
                    // 16 PMD cycles per 64-byte packet (252 against 236, three
                    // interleaved rounds of `vsw-bench vhost`).
                    Some(s) => {
                        walked += 1;
                        let len = s.len as usize;
                        match slots.room(n, len) {
                            Some(buf) if len >= hdr + ETH_HDR_LEN => {
                                r.queue.read(s.addr, &mut buf[..len]).then_some(len)
                            }
                            _ => None,
                        }
                    }
                    None => read_chain(
                        &mut r.queue,
                        head,
                        &mut self.chain,
                        slots,
                        n,
                        hdr,
                        &mut walked,
                    ),
                };
                match read {
                    Some(len) => {
                        slots.set_len(n, len);
                        let gso = offloads && slots.frame(n)[1] != VNET_GSO_NONE;
                        if len - hdr > max_plain && !gso {
                            self.status.too_long.fetch_add(1, Ordering::Relaxed);
                        } else {
                            n += 1;
                        }
                    }
                    None => {
                        self.status.bad_chains.fetch_add(1, Ordering::Relaxed);
                    }
                }
                // The buffer goes back to the guest either way.
                r.queue.add_used(head, 0);
            }
            if taken > 0 {
                // One used-index update for the batch.
                r.queue.publish_used();
                r.notify(&self.vring.wants_interrupts, &self.status.notifications);
            }
        }
        let hdr = self.hdr;
        for k in 0..n {
            let buf = self.slots.frame(k);
            // The header only means something where the guest negotiated offloads;
            // the datapath checks its offsets against the frame either way.
            let vnet = if offloads {
                VnetHdr::read(buf).unwrap_or_default()
            } else {
                VnetHdr::default()
            };
            batch.push(RxPacket {
                data: &buf[hdr..],
                meta: PacketMeta {
                    vnet,
                    vlan: None,
                    tunnel: Default::default(),
                },
            });
        }
        RxDrops::default()
    }

    fn release(&mut self) {}
}
