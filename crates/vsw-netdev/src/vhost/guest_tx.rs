//! Frames the guest sends: its transmit queue, polled by a PMD.

use super::*;

/// The guest's transmit queue, polled by a PMD: frames the guest sends.
pub(super) struct GuestTx {
    pub(super) vring: Arc<Vring>,
    /// The virtio-net header length of the frames in `bufs`.
    pub(super) hdr: usize,
    /// Each holds a virtio-net header and a frame.
    pub(super) bufs: Vec<Box<[u8]>>,
    pub(super) lens: [usize; BATCH_SIZE],
    pub(super) status: Arc<GuestStatus>,
    pub(super) _server: Arc<Server>,
}

/// Copies one descriptor chain (virtio-net header and frame) into `buf`; `None` when
/// the chain is unusable (outside guest memory, writable where it should be readable,
/// longer than `buf`, more than [`MAX_CHAIN_DESCRIPTORS`], looping). `walked` counts
/// the descriptors looked at, usable or not.
pub(super) fn read_chain<M: GuestMemory>(
    chain: virtio_queue::DescriptorChain<&M>,
    mem: &M,
    buf: &mut [u8],
    hdr: usize,
    walked: &mut usize,
) -> Option<usize> {
    let mut len = 0usize;
    let mut more = false;
    for (k, d) in chain.enumerate() {
        *walked += 1;
        if k == MAX_CHAIN_DESCRIPTORS {
            return None;
        }
        more = d.has_next();
        if d.is_write_only() {
            return None;
        }
        let n = d.len() as usize;
        let out = buf.get_mut(len..len + n)?;
        mem.read_slice(out, d.addr()).ok()?;
        len += n;
    }
    // A chain still pointing on when the walk stopped looped or was longer than the
    // queue: virtio-queue ends the walk at the queue size, vsw drops the chain.
    (len >= hdr + vsw_packet::ethernet::ETH_HDR_LEN && !more).then_some(len)
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
            let mem = r.mem.clone();
            let mut walked = 0;
            while n < BATCH_SIZE && walked < POLL_DESCRIPTOR_BUDGET {
                let Some(chain) = r.queue.pop_descriptor_chain(&**mem) else {
                    break;
                };
                let head = chain.head_index();
                match read_chain(chain, &**mem, &mut self.bufs[n], hdr, &mut walked) {
                    Some(len) => {
                        let gso = offloads && self.bufs[n][1] != VNET_GSO_NONE;
                        if len - hdr > max_plain && !gso {
                            self.status.too_long.fetch_add(1, Ordering::Relaxed);
                        } else {
                            self.lens[n] = len;
                            n += 1;
                        }
                    }
                    None => {
                        self.status.bad_chains.fetch_add(1, Ordering::Relaxed);
                    }
                }
                // The buffer goes back to the guest either way.
                let _ = r.queue.add_used(&**mem, head, 0);
            }
            if n > 0 {
                r.notify(&self.vring.wants_interrupts, &self.status.notifications);
            }
        }
        let hdr = self.hdr;
        for (buf, len) in self.bufs.iter().zip(&self.lens).take(n) {
            // The header only means something where the guest negotiated offloads;
            // the datapath checks its offsets against the frame either way.
            let vnet = if offloads {
                VnetHdr::read(buf).unwrap_or_default()
            } else {
                VnetHdr::default()
            };
            batch.push(RxPacket {
                data: &buf[hdr..*len],
                meta: PacketMeta { vnet, vlan: None },
            });
        }
        RxDrops::default()
    }

    fn release(&mut self) {}
}
