//! Tap ports: vsw creates a tap interface with virtio-net headers and tells the kernel
//! it takes checksum and segmentation offloads, so TCP super-frames cross a tap as
//! they cross a veth. The tap (or the namespace it is moved into) is the host's side.
//!
//! A tap has no receive ring: the PMD reads up to a batch of frames per poll, one
//! `read` each, and writes each frame with one `write` when the output batch is sent.

use std::os::fd::OwnedFd;
use std::sync::Arc;

use vsw_datapath::{
    PacketMeta, PortQueues, RxBatch, RxDrops, RxPacket, RxQueue, StageError, TxFactory, TxOffloads,
    TxQueue, BATCH_SIZE,
};
use vsw_packet::vnet::VNET_HDR_LEN;
use vsw_packet::VnetHdr;

use crate::afpacket::syscall;
use crate::vnet_frame::{kernel_offloads, put_vnet_frame};
use crate::{sys, NetdevError};

/// Writes retried when the tap is busy for a moment.
const TRANSIENT_TRIES: u32 = 64;

/// A whole super-frame with its header and a tag put back.
const BUF_LEN: usize = VNET_HDR_LEN + 65_535 + 18;

/// Creates tap `name`, or takes over an existing one of that name, as a port; brings
/// it up when `bring_up` (a bridge's own port). A plain tap is left as it is, as Open
/// vSwitch leaves it: its host side (libvirt, a container's tooling, the operator)
/// brings it up, and until then it has no carrier.
pub fn open(name: &str, bring_up: bool) -> Result<PortQueues, NetdevError> {
    if !crate::interface::valid_name(name) {
        return Err(NetdevError::BadInterfaceName(name.to_string()));
    }
    let offloads = libc::TUN_F_CSUM | libc::TUN_F_TSO4 | libc::TUN_F_TSO6;
    let fd = sys::tap_open(name, offloads).map_err(syscall("TUNSETIFF", name))?;
    if bring_up {
        sys::set_link_up(name).map_err(syscall("SIOCSIFFLAGS", name))?;
    }
    let mtu = sys::interface_mtu(name).map_or(1500, |m| m as usize);
    let fd = Arc::new(fd);
    let for_factory = fd.clone();
    let factory: TxFactory = Box::new(move || {
        // Writes through another descriptor of the same tap: no lock between PMDs.
        Ok(Box::new(TapTx::new(Arc::new(sys::dup(&for_factory)?), mtu)) as Box<dyn TxQueue>)
    });
    tracing::debug!(name, mtu, "tap port open");
    Ok(PortQueues {
        rx: vec![Box::new(TapRx {
            fd: fd.clone(),
            bufs: (0..BATCH_SIZE)
                .map(|_| vec![0u8; BUF_LEN].into_boxed_slice())
                .collect(),
            lens: [0; BATCH_SIZE],
        })],
        tx: Box::new(TapTx::new(fd, mtu)),
        tx_factory: Some(factory),
    })
}

struct TapRx {
    fd: Arc<OwnedFd>,
    bufs: Vec<Box<[u8]>>,
    lens: [usize; BATCH_SIZE],
}

impl RxQueue for TapRx {
    fn recv<'a>(&'a mut self, batch: &mut RxBatch<'a>) -> RxDrops {
        let mut drops = RxDrops::default();
        let mut n = 0;
        while n < BATCH_SIZE {
            match sys::read_frame(&self.fd, &mut self.bufs[n]) {
                Ok(Some(len)) if len > VNET_HDR_LEN => {
                    self.lens[n] = len;
                    n += 1;
                }
                Ok(Some(_)) => drops.truncated += 1,
                Ok(None) => break,
                Err(e) => {
                    tracing::debug!(error = %e, "tap read");
                    break;
                }
            }
        }
        for (buf, len) in self.bufs.iter().zip(&self.lens).take(n) {
            let (hdr, frame) = buf[..*len].split_at(VNET_HDR_LEN);
            batch.push(RxPacket {
                data: frame,
                meta: PacketMeta {
                    vnet: VnetHdr::read(hdr).unwrap_or_default(),
                    vlan: None,
                    tunnel: Default::default(),
                },
            });
        }
        drops
    }

    fn release(&mut self) {}
}

struct TapTx {
    fd: Arc<OwnedFd>,
    bufs: Vec<Box<[u8]>>,
    lens: [usize; BATCH_SIZE],
    staged: usize,
    mtu: usize,
}

impl TapTx {
    fn new(fd: Arc<OwnedFd>, mtu: usize) -> TapTx {
        TapTx {
            fd,
            bufs: (0..BATCH_SIZE)
                .map(|_| vec![0u8; BUF_LEN].into_boxed_slice())
                .collect(),
            lens: [0; BATCH_SIZE],
            staged: 0,
            mtu,
        }
    }
}

impl TxQueue for TapTx {
    /// The tap takes checksums and super-frames to finish (it was told the reader
    /// does, and the kernel segments on its way in).
    fn offloads(&self) -> TxOffloads {
        kernel_offloads(self.mtu)
    }

    fn stage(&mut self, data: &[u8], meta: &PacketMeta) -> Result<(), StageError> {
        if self.staged == BATCH_SIZE {
            return Err(StageError::QueueFull);
        }
        self.lens[self.staged] = put_vnet_frame(&mut self.bufs[self.staged], data, meta)?;
        self.staged += 1;
        Ok(())
    }

    fn pending(&self) -> usize {
        self.staged
    }

    fn flush(&mut self) -> usize {
        let mut refused = 0;
        for (buf, len) in self.bufs.iter().zip(&self.lens).take(self.staged) {
            // A tap whose socket buffer is full for a moment says EAGAIN: try a few
            // times before counting the frame as refused.
            let mut tries = 0;
            loop {
                match sys::write_frame(&self.fd, &buf[..*len]) {
                    Ok(()) => break,
                    Err(e) if crate::afpacket::transient(&e) && tries < TRANSIENT_TRIES => {
                        tries += 1;
                        std::hint::spin_loop();
                    }
                    Err(e) => {
                        tracing::debug!(error = %e, "tap write");
                        refused += 1;
                        break;
                    }
                }
            }
        }
        self.staged = 0;
        refused
    }
}
