//! TPACKET_V2 mmap rings.
//!
//! Why V2 for receive: a TPACKET_V3 block reaches user space only when it is full or
//! its retire timer (at least a millisecond) fires, so at low rates every packet
//! waits up to that long; V2 hands over each frame as soon as the kernel has written
//! it, which a busy-polling PMD sees within one iteration. docs/BENCHMARKS.md has the
//! measurements behind the choice.

use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use vsw_datapath::{
    PacketMeta, PortQueues, RxBatch, RxDrops, RxPacket, RxQueue, StageError, TxQueue, BATCH_SIZE,
};
use vsw_packet::ethernet::copy_frame;
use vsw_packet::vnet::VNET_HDR_LEN;
use vsw_packet::{VlanTag, VnetHdr};

use super::{attach, set_flag, syscall, transient, MAX_FRAME};
use crate::sys::{self, RingMap, TPACKET_V2};
use crate::NetdevError;

/// Where received data starts in a V2 frame with the virtio-net header: the kernel
/// puts the frame at TPACKET_ALIGN(52 + 14) + 10 - 14 = 76.
const RX_DATA_OFFSET: usize = 76;
/// Where a V2 TX frame's payload (here: virtio-net header, then frame) starts:
/// TPACKET2_HDRLEN - sizeof(sockaddr_ll) = 32.
const TX_DATA_OFFSET: usize = 32;

/// Frames must hold a whole super-frame, or the kernel truncates it.
const FRAME_SIZE: usize = (RX_DATA_OFFSET + MAX_FRAME + 15) & !15;
/// One MiB blocks: the kernel allocates blocks as power-of-two page runs, so a
/// block of exactly one frame would waste almost half of it.
const BLOCK_SIZE: usize = 1 << 20;
const FRAMES_PER_BLOCK: usize = BLOCK_SIZE / FRAME_SIZE;
const RX_BLOCKS: usize = 32;
const TX_BLOCKS: usize = 16;

#[derive(Clone, Copy)]
struct Geometry {
    /// Byte offset of this ring inside the shared mapping.
    start: usize,
    blocks: usize,
}

impl Geometry {
    fn frames(&self) -> usize {
        self.blocks * FRAMES_PER_BLOCK
    }

    fn bytes(&self) -> usize {
        self.blocks * BLOCK_SIZE
    }

    fn frame_offset(&self, i: usize) -> usize {
        self.start + (i / FRAMES_PER_BLOCK) * BLOCK_SIZE + (i % FRAMES_PER_BLOCK) * FRAME_SIZE
    }

    fn request(&self) -> libc::tpacket_req {
        libc::tpacket_req {
            tp_block_size: BLOCK_SIZE as u32,
            tp_block_nr: self.blocks as u32,
            tp_frame_size: FRAME_SIZE as u32,
            tp_frame_nr: self.frames() as u32,
        }
    }
}

/// The socket and its mapping. Field order matters: the mapping goes before the socket.
struct RingSocket {
    map: RingMap,
    fd: OwnedFd,
}

impl RingSocket {
    /// The status word of the frame at `offset`; the kernel and the PMD hand the frame
    /// to each other through it.
    fn status(&self, offset: usize) -> &AtomicU32 {
        let p = self.map.at(offset);
        // SAFETY: every frame starts 16-byte aligned inside the mapping with its
        // tpacket2_hdr, whose first field is the u32 status; the mapping lives as long
        // as `self`. The kernel writes it concurrently, hence atomic access.
        unsafe { &*(p as *const AtomicU32) }
    }

    /// The tpacket2_hdr of a frame this side owns (status says so).
    fn header(&self, offset: usize) -> libc::tpacket2_hdr {
        // SAFETY: as for `status`; the caller owns the frame, so the kernel does not
        // write the header while it is read. read_unaligned copies it out.
        unsafe { std::ptr::read_unaligned(self.map.at(offset) as *const libc::tpacket2_hdr) }
    }
}

pub(super) fn open(fd: OwnedFd, ifname: &str, ifindex: u32) -> Result<PortQueues, NetdevError> {
    sys::set_packet_opt(&fd, libc::PACKET_VERSION, &TPACKET_V2)
        .map_err(syscall("PACKET_VERSION", ifname))?;
    // A frame the kernel cannot send is marked and skipped instead of stopping the ring.
    set_flag(&fd, libc::PACKET_LOSS, "PACKET_LOSS", ifname)?;
    let rx = Geometry {
        start: 0,
        blocks: RX_BLOCKS,
    };
    let tx = Geometry {
        start: rx.bytes(),
        blocks: TX_BLOCKS,
    };
    sys::set_packet_opt(&fd, libc::PACKET_RX_RING, &rx.request())
        .map_err(syscall("PACKET_RX_RING", ifname))?;
    sys::set_packet_opt(&fd, libc::PACKET_TX_RING, &tx.request())
        .map_err(syscall("PACKET_TX_RING", ifname))?;
    let map = RingMap::map(&fd, rx.bytes() + tx.bytes()).map_err(syscall("mmap", ifname))?;
    attach(&fd, ifname, ifindex)?;
    let sock = Arc::new(RingSocket { map, fd });
    Ok(PortQueues {
        rx: Box::new(RingRx {
            sock: sock.clone(),
            geo: rx,
            head: 0,
            taken: 0,
        }),
        tx: Box::new(RingTx {
            sock,
            geo: tx,
            head: 0,
            pending: 0,
            rejected: 0,
        }),
    })
}

struct RingRx {
    sock: Arc<RingSocket>,
    geo: Geometry,
    /// First frame not yet handed back to the kernel.
    head: usize,
    /// Frames from `head` on that the last `recv` took.
    taken: usize,
}

impl RxQueue for RingRx {
    fn recv<'a>(&'a mut self, batch: &mut RxBatch<'a>) -> RxDrops {
        if self.taken > 0 {
            self.release();
        }
        let mut drops = RxDrops::default();
        let frames = self.geo.frames();
        while batch.len() < BATCH_SIZE && self.taken < frames {
            let offset = self.geo.frame_offset((self.head + self.taken) % frames);
            let status = self.sock.status(offset).load(Ordering::Acquire);
            if status & libc::TP_STATUS_USER == 0 {
                break;
            }
            self.taken += 1;
            let h = self.sock.header(offset);
            let (mac, snap) = (usize::from(h.tp_mac), h.tp_snaplen as usize);
            if snap < h.tp_len as usize || mac < VNET_HDR_LEN || mac + snap > FRAME_SIZE {
                drops.truncated += 1;
                continue;
            }
            // SAFETY: the frame belongs to this side until release() gives it back,
            // which needs `&mut self` and so cannot run while 'a borrows live; the
            // range [offset + mac - 10, offset + mac + snap) lies inside the frame
            // (checked above) and so inside the mapping.
            let (vnet_bytes, data) = unsafe {
                let base = self.sock.map.at(offset);
                (
                    std::slice::from_raw_parts(base.add(mac - VNET_HDR_LEN), VNET_HDR_LEN),
                    std::slice::from_raw_parts(base.add(mac), snap),
                )
            };
            let vlan = (status & libc::TP_STATUS_VLAN_VALID != 0).then_some(VlanTag {
                tpid: if status & libc::TP_STATUS_VLAN_TPID_VALID != 0 {
                    h.tp_vlan_tpid
                } else {
                    vsw_packet::EtherType::VLAN
                },
                tci: h.tp_vlan_tci,
            });
            batch.push(RxPacket {
                data,
                meta: PacketMeta {
                    vnet: VnetHdr::read(vnet_bytes).unwrap_or_default(),
                    vlan,
                },
            });
        }
        drops
    }

    fn release(&mut self) {
        let frames = self.geo.frames();
        for k in 0..self.taken {
            let offset = self.geo.frame_offset((self.head + k) % frames);
            self.sock
                .status(offset)
                .store(libc::TP_STATUS_KERNEL, Ordering::Release);
        }
        self.head = (self.head + self.taken) % frames;
        self.taken = 0;
    }

    fn take_overrun_drops(&mut self) -> u64 {
        sys::packet_statistics(&self.sock.fd)
            .map(|(_, drops)| drops)
            .unwrap_or(0)
    }
}

struct RingTx {
    sock: Arc<RingSocket>,
    geo: Geometry,
    /// Next frame to fill.
    head: usize,
    /// Frames filled since the last kick.
    pending: usize,
    /// Frames the kernel marked as malformed since the last flush.
    rejected: usize,
}

impl TxQueue for RingTx {
    fn stage(&mut self, data: &[u8], meta: &PacketMeta) -> Result<(), StageError> {
        let room = FRAME_SIZE - TX_DATA_OFFSET - VNET_HDR_LEN;
        let tag_len = if meta.vlan.is_some() { 4 } else { 0 };
        if data.len() + tag_len > room {
            return Err(StageError::TooBig);
        }
        let offset = self.geo.frame_offset(self.head);
        let status = self.sock.status(offset);
        match status.load(Ordering::Acquire) {
            libc::TP_STATUS_AVAILABLE => {}
            libc::TP_STATUS_WRONG_FORMAT => self.rejected += 1,
            _ => return Err(StageError::QueueFull),
        }
        // SAFETY: the frame is AVAILABLE (or rejected), so the kernel does not touch it
        // until its status becomes SEND_REQUEST below; the slice lies inside the frame.
        let out = unsafe {
            std::slice::from_raw_parts_mut(
                self.sock.map.at(offset + TX_DATA_OFFSET),
                FRAME_SIZE - TX_DATA_OFFSET,
            )
        };
        let (vnet_out, frame_out) = out.split_at_mut(VNET_HDR_LEN);
        let vnet = if tag_len > 0 {
            meta.vnet.shifted(4)
        } else {
            meta.vnet
        };
        vnet.write(vnet_out.try_into().expect("split at header length"));
        let len = copy_frame(frame_out, data, meta.vlan).ok_or(StageError::TooBig)?;
        // SAFETY: tp_len is the u32 at byte 4 of the frame's header, which this side owns.
        unsafe {
            std::ptr::write_unaligned(
                self.sock.map.at(offset + 4) as *mut u32,
                (VNET_HDR_LEN + len) as u32,
            );
        }
        status.store(libc::TP_STATUS_SEND_REQUEST, Ordering::Release);
        self.head = (self.head + 1) % self.geo.frames();
        self.pending += 1;
        Ok(())
    }

    fn pending(&self) -> usize {
        self.pending
    }

    fn flush(&mut self) -> usize {
        if self.pending == 0 {
            return 0;
        }
        self.pending = 0;
        let mut refused = std::mem::take(&mut self.rejected);
        // The kernel stops at the first frame the device refuses; the frames after it
        // are still marked and go with a retried kick.
        for _ in 0..4 {
            match sys::kick_tx(&self.sock.fd) {
                Ok(()) => return refused,
                Err(e) if transient(&e) => refused += 1,
                Err(e) => {
                    tracing::debug!(error = %e, "TX ring kick failed");
                    return refused + 1;
                }
            }
        }
        refused
    }
}
