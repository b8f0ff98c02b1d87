//! recvmmsg/sendmmsg: one system call per batch each way, frames copied through
//! per-port buffers. The baseline the rings are measured against.

use std::os::fd::OwnedFd;
use std::sync::Arc;

use vsw_datapath::{
    PacketMeta, PortQueues, RxBatch, RxDrops, RxPacket, RxQueue, StageError, TxFactory, TxOffloads,
    TxQueue, BATCH_SIZE,
};
use vsw_packet::vnet::VNET_HDR_LEN;
use vsw_packet::VnetHdr;

use super::{attach, syscall, transient, MAX_FRAME};
use crate::sys::{self, AuxBuffer, Received};
use crate::NetdevError;

const BUF_LEN: usize = VNET_HDR_LEN + MAX_FRAME;

/// Socket buffers: a burst the PMD has not read yet waits in the receive buffer.
const SOCKET_BUFFER: usize = 64 << 20;

pub(super) fn open(fd: OwnedFd, ifname: &str, ifindex: u32) -> Result<PortQueues, NetdevError> {
    crate::sys::set_socket_buffers(&fd, SOCKET_BUFFER, SOCKET_BUFFER)
        .map_err(syscall("SO_RCVBUF/SO_SNDBUF", ifname))?;
    attach(&fd, ifname, ifindex)?;
    let fd = Arc::new(fd);
    let bufs = || {
        (0..BATCH_SIZE)
            .map(|_| vec![0u8; BUF_LEN].into_boxed_slice())
            .collect::<Vec<_>>()
    };
    let name = ifname.to_string();
    // Every further PMD sends through a socket of its own that receives nothing.
    let tx_factory: TxFactory = Box::new(move || {
        let fd = super::offload_socket(&name).map_err(std::io::Error::other)?;
        crate::sys::set_socket_buffers(&fd, SOCKET_BUFFER, SOCKET_BUFFER)?;
        crate::sys::bind_to_interface(&fd, ifindex, false)?;
        Ok(Box::new(MmsgTx {
            fd: Arc::new(fd),
            bufs: tx_bufs(),
            lens: [0; BATCH_SIZE],
            staged: 0,
            mtu: super::port_mtu(&name),
        }) as Box<dyn TxQueue>)
    });
    Ok(PortQueues {
        rx: vec![Box::new(MmsgRx {
            fd: fd.clone(),
            bufs: bufs(),
            ctrl: vec![[0u64; 8]; BATCH_SIZE],
        })],
        tx: Box::new(MmsgTx {
            fd,
            bufs: bufs(),
            lens: [0; BATCH_SIZE],
            staged: 0,
            mtu: super::port_mtu(ifname),
        }),
        tx_factory: Some(tx_factory),
    })
}

fn tx_bufs() -> Vec<Box<[u8]>> {
    (0..BATCH_SIZE)
        .map(|_| vec![0u8; BUF_LEN].into_boxed_slice())
        .collect()
}

struct MmsgRx {
    fd: Arc<OwnedFd>,
    bufs: Vec<Box<[u8]>>,
    /// Control buffers, one per frame (PACKET_AUXDATA).
    ctrl: Vec<AuxBuffer>,
}

impl RxQueue for MmsgRx {
    fn recv<'a>(&'a mut self, batch: &mut RxBatch<'a>) -> RxDrops {
        let want = BATCH_SIZE - batch.len();
        let mut got = [Received::default(); BATCH_SIZE];
        let n = sys::recv_frames(
            &self.fd,
            &mut self.bufs[..want],
            &mut self.ctrl[..want],
            &mut got,
        );
        let mut drops = RxDrops::default();
        for (r, buf) in got.iter().zip(self.bufs.iter()).take(n) {
            if r.truncated || !(VNET_HDR_LEN..=BUF_LEN).contains(&r.len) {
                drops.truncated += 1;
                continue;
            }
            batch.push(RxPacket {
                data: &buf[VNET_HDR_LEN..r.len],
                meta: PacketMeta {
                    vnet: VnetHdr::read(buf).unwrap_or_default(),
                    vlan: r.aux.as_ref().and_then(super::aux_vlan),
                    tunnel: Default::default(),
                },
            });
        }
        drops
    }

    fn release(&mut self) {}

    fn take_overrun_drops(&mut self) -> u64 {
        crate::sys::packet_statistics(&self.fd)
            .map(|(_, d)| d)
            .unwrap_or(0)
    }
}

struct MmsgTx {
    fd: Arc<OwnedFd>,
    bufs: Vec<Box<[u8]>>,
    lens: [usize; BATCH_SIZE],
    staged: usize,
    mtu: usize,
}

impl TxQueue for MmsgTx {
    /// The kernel finishes checksums and segments super-frames (the virtio-net header
    /// goes with every frame).
    fn offloads(&self) -> TxOffloads {
        crate::vnet_frame::kernel_offloads(self.mtu)
    }

    fn stage(&mut self, data: &[u8], meta: &PacketMeta) -> Result<(), StageError> {
        if self.staged == BATCH_SIZE {
            return Err(StageError::QueueFull);
        }
        self.lens[self.staged] =
            crate::vnet_frame::put_vnet_frame(&mut self.bufs[self.staged], data, meta)?;
        self.staged += 1;
        Ok(())
    }

    fn pending(&self) -> usize {
        self.staged
    }

    fn flush(&mut self) -> usize {
        let n = std::mem::take(&mut self.staged);
        let mut frames: [&[u8]; BATCH_SIZE] = [&[]; BATCH_SIZE];
        for (f, (buf, len)) in frames.iter_mut().zip(self.bufs.iter().zip(self.lens)) {
            *f = &buf[..len];
        }
        let mut sent = 0;
        let mut tries = 0;
        while sent < n && tries < 4 {
            tries += 1;
            match sys::send_frames(&self.fd, &frames[sent..n]) {
                Ok(k) if k > 0 => sent += k,
                Ok(_) => {}
                Err(e) if transient(&e) => {}
                Err(e) => {
                    tracing::debug!(error = %e, "sendmmsg failed");
                    break;
                }
            }
        }
        n - sent
    }
}
