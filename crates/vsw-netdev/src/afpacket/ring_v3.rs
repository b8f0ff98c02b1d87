//! A TPACKET_V3 receive ring (`afpacket-mode=ring-v3`), kept to measure against V2.
//!
//! V3 packs frames of any size back to back in large blocks, so one ring holds many
//! small frames and whole super-frames alike; but a block reaches user space only when
//! it is full or its retire timer fires (here 1 ms, the shortest there is), so at low
//! rates each packet waits for the timer. Transmit uses a TPACKET_V2 TX ring on a
//! second socket (the ring version is per socket).

use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU32, Ordering};

use vsw_datapath::{PacketMeta, PortQueues, RxBatch, RxDrops, RxPacket, RxQueue, BATCH_SIZE};
use vsw_packet::vnet::VNET_HDR_LEN;
use vsw_packet::{VlanTag, VnetHdr};

use super::{attach, ring, syscall};
use crate::sys::{self, RingMap};
use crate::NetdevError;

const TPACKET_V3: libc::c_int = 2;
/// A block must hold a whole super-frame with its headers.
const BLOCK_SIZE: usize = 256 << 10;
const BLOCKS: usize = 32;
/// Nominal frame size the kernel wants to know; V3 does not use it to place frames.
const FRAME_SIZE: usize = 2048;
/// Milliseconds after which the kernel hands over a block that is not full.
const RETIRE_MS: u32 = 1;

// Offsets in struct tpacket_block_desc (its tpacket_hdr_v1) and struct tpacket3_hdr.
const BLOCK_STATUS: usize = 8;
const BLOCK_NUM_PKTS: usize = 12;
const BLOCK_FIRST_PKT: usize = 16;
const PKT_NEXT: usize = 0;
const PKT_SNAPLEN: usize = 12;
const PKT_LEN: usize = 16;
const PKT_STATUS: usize = 20;
const PKT_MAC: usize = 24;
const PKT_VLAN_TCI: usize = 32;
const PKT_VLAN_TPID: usize = 36;

pub(super) fn open(
    fd: OwnedFd,
    ifname: &str,
    ifindex: u32,
    tx_frames: usize,
) -> Result<PortQueues, NetdevError> {
    sys::set_packet_opt(&fd, libc::PACKET_VERSION, &TPACKET_V3)
        .map_err(syscall("PACKET_VERSION", ifname))?;
    let req = libc::tpacket_req3 {
        tp_block_size: BLOCK_SIZE as u32,
        tp_block_nr: BLOCKS as u32,
        tp_frame_size: FRAME_SIZE as u32,
        tp_frame_nr: (BLOCK_SIZE * BLOCKS / FRAME_SIZE) as u32,
        tp_retire_blk_tov: RETIRE_MS,
        tp_sizeof_priv: 0,
        tp_feature_req_word: 0,
    };
    sys::set_packet_opt(&fd, libc::PACKET_RX_RING, &req)
        .map_err(syscall("PACKET_RX_RING", ifname))?;
    let map = RingMap::map(&fd, BLOCK_SIZE * BLOCKS).map_err(syscall("mmap", ifname))?;
    attach(&fd, ifname, ifindex)?;
    let tx = ring::open_tx_only(ifname, ifindex, tx_frames)?;
    Ok(PortQueues {
        rx: vec![Box::new(V3Rx {
            map,
            fd,
            block: 0,
            next: 0,
            left: 0,
            done: 0,
        })],
        tx,
        tx_factory: Some(ring::tx_factory(ifname, ifindex, tx_frames)),
    })
}

/// Field order matters: the mapping goes before the socket.
struct V3Rx {
    map: RingMap,
    fd: OwnedFd,
    /// The block being read.
    block: usize,
    /// Offset of the next packet inside it; 0 when the block has not been started.
    next: usize,
    /// Packets of the block not read yet.
    left: u32,
    /// Blocks before `block` read to the end and not yet handed back.
    done: usize,
}

impl V3Rx {
    fn word(&self, offset: usize) -> u32 {
        // SAFETY: the caller owns the block it reads, so the kernel does not write it
        // meanwhile.
        unsafe { self.map.read(offset) }
    }

    fn half(&self, offset: usize) -> u16 {
        // SAFETY: as for `word`.
        unsafe { self.map.read(offset) }
    }

    fn block_status(&self, block: usize) -> &AtomicU32 {
        self.map.status(block * BLOCK_SIZE + BLOCK_STATUS)
    }
}

impl RxQueue for V3Rx {
    fn recv<'a>(&'a mut self, batch: &mut RxBatch<'a>) -> RxDrops {
        if self.done > 0 {
            self.release();
        }
        let mut drops = RxDrops::default();
        // Positions are found first, the slices made after, so that no borrow of
        // the mapping is held while `self` changes.
        let mut found: [(usize, usize, usize, PacketMeta); BATCH_SIZE] =
            [(0, 0, 0, PacketMeta::default()); BATCH_SIZE];
        let mut n = 0;
        let mut blocks_seen = 0;
        while n < BATCH_SIZE && blocks_seen < BLOCKS {
            let base = self.block * BLOCK_SIZE;
            if self.next == 0 {
                if self.block_status(self.block).load(Ordering::Acquire) & libc::TP_STATUS_USER == 0
                {
                    break;
                }
                self.left = self.word(base + BLOCK_NUM_PKTS);
                self.next = self.word(base + BLOCK_FIRST_PKT) as usize;
            }
            while self.left > 0 && n < BATCH_SIZE {
                let p = base + self.next;
                let (snap, len, status) = (
                    self.word(p + PKT_SNAPLEN) as usize,
                    self.word(p + PKT_LEN) as usize,
                    self.word(p + PKT_STATUS),
                );
                let mac = usize::from(self.half(p + PKT_MAC));
                let step = self.word(p + PKT_NEXT) as usize;
                self.left -= 1;
                self.next += step;
                if snap < len || mac < VNET_HDR_LEN || self.next - step + mac + snap > BLOCK_SIZE {
                    drops.truncated += 1;
                } else {
                    let vlan = (status & libc::TP_STATUS_VLAN_VALID != 0).then_some(VlanTag {
                        tpid: if status & libc::TP_STATUS_VLAN_TPID_VALID != 0 {
                            self.half(p + PKT_VLAN_TPID)
                        } else {
                            vsw_packet::EtherType::VLAN
                        },
                        tci: self.word(p + PKT_VLAN_TCI) as u16,
                    });
                    found[n] = (
                        p,
                        mac,
                        snap,
                        PacketMeta {
                            vlan,
                            ..PacketMeta::default()
                        },
                    );
                    n += 1;
                }
                if step == 0 {
                    self.left = 0;
                }
            }
            if self.left == 0 {
                self.done += 1;
                self.block = (self.block + 1) % BLOCKS;
                self.next = 0;
                blocks_seen += 1;
            }
        }
        for (p, mac, snap, mut meta) in found.into_iter().take(n) {
            // SAFETY: the packet lies inside a block this side owns (status USER, bounds
            // checked above); blocks go back to the kernel only in release(), which
            // needs `&mut self` and so cannot run while 'a borrows live.
            let (vnet_bytes, data) = unsafe {
                (
                    self.map.bytes(p + mac - VNET_HDR_LEN, VNET_HDR_LEN),
                    self.map.bytes(p + mac, snap),
                )
            };
            meta.vnet = VnetHdr::read(vnet_bytes).unwrap_or_default();
            batch.push(RxPacket { data, meta });
        }
        drops
    }

    fn release(&mut self) {
        // Blocks read to the end are the `done` ones before `block` (a partly read
        // block stays with this side).
        for k in 1..=self.done {
            let b = (self.block + BLOCKS - k) % BLOCKS;
            self.block_status(b)
                .store(libc::TP_STATUS_KERNEL, Ordering::Release);
        }
        self.done = 0;
    }

    fn take_overrun_drops(&mut self) -> u64 {
        sys::packet_statistics(&self.fd)
            .map(|(_, d)| d)
            .unwrap_or(0)
    }
}
