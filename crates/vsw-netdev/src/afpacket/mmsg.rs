//! recvmmsg/sendmmsg: one system call per batch each way, frames copied through
//! per-port buffers. The baseline the rings are measured against.

use std::mem::zeroed;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;

use vsw_datapath::{
    PacketMeta, PortQueues, RxBatch, RxDrops, RxPacket, RxQueue, StageError, TxFactory, TxOffloads,
    TxQueue, BATCH_SIZE,
};
use vsw_packet::vnet::VNET_HDR_LEN;
use vsw_packet::VnetHdr;

use super::{attach, syscall, transient, MAX_FRAME};
use crate::NetdevError;

const BUF_LEN: usize = VNET_HDR_LEN + MAX_FRAME;
/// Room for one PACKET_AUXDATA control message.
const CTRL_LEN: usize = 64;

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
            ctrl: vec![[0u64; CTRL_LEN / 8]; BATCH_SIZE],
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
    /// Control buffers, u64 for cmsghdr alignment.
    ctrl: Vec<[u64; CTRL_LEN / 8]>,
}

impl RxQueue for MmsgRx {
    fn recv<'a>(&'a mut self, batch: &mut RxBatch<'a>) -> RxDrops {
        let want = BATCH_SIZE - batch.len();
        // SAFETY: iovec and mmsghdr are plain old data; zero is a valid value.
        let mut iov: [libc::iovec; BATCH_SIZE] = unsafe { zeroed() };
        // SAFETY: as above.
        let mut msgs: [libc::mmsghdr; BATCH_SIZE] = unsafe { zeroed() };
        for i in 0..want {
            iov[i].iov_base = self.bufs[i].as_mut_ptr().cast();
            iov[i].iov_len = BUF_LEN;
            msgs[i].msg_hdr.msg_iov = &mut iov[i];
            msgs[i].msg_hdr.msg_iovlen = 1;
            msgs[i].msg_hdr.msg_control = self.ctrl[i].as_mut_ptr().cast();
            msgs[i].msg_hdr.msg_controllen = CTRL_LEN;
        }
        // SAFETY: each message points at a buffer of the length given, all owned by
        // `self` and alive for the call.
        let n = unsafe {
            libc::recvmmsg(
                self.fd.as_raw_fd(),
                msgs.as_mut_ptr(),
                want as u32,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        let mut drops = RxDrops::default();
        if n <= 0 {
            return drops;
        }
        for (msg, buf) in msgs.iter().zip(self.bufs.iter()).take(n as usize) {
            let len = msg.msg_len as usize;
            if msg.msg_hdr.msg_flags & libc::MSG_TRUNC != 0
                || !(VNET_HDR_LEN..=BUF_LEN).contains(&len)
            {
                drops.truncated += 1;
                continue;
            }
            batch.push(RxPacket {
                data: &buf[VNET_HDR_LEN..len],
                meta: PacketMeta {
                    vnet: VnetHdr::read(buf).unwrap_or_default(),
                    vlan: crate::sys::packet_auxdata(&msg.msg_hdr)
                        .as_ref()
                        .and_then(super::aux_vlan),
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
        let mut sent = 0;
        let mut tries = 0;
        while sent < n && tries < 4 {
            tries += 1;
            // SAFETY: as in recv: plain old data, zero is valid.
            let mut iov: [libc::iovec; BATCH_SIZE] = unsafe { zeroed() };
            // SAFETY: as above.
            let mut msgs: [libc::mmsghdr; BATCH_SIZE] = unsafe { zeroed() };
            for i in sent..n {
                iov[i].iov_base = self.bufs[i].as_mut_ptr().cast();
                iov[i].iov_len = self.lens[i];
                msgs[i].msg_hdr.msg_iov = &mut iov[i];
                msgs[i].msg_hdr.msg_iovlen = 1;
            }
            // SAFETY: messages sent..n point at staged buffers owned by `self`.
            let r = unsafe {
                libc::sendmmsg(
                    self.fd.as_raw_fd(),
                    msgs[sent..].as_mut_ptr(),
                    (n - sent) as u32,
                    libc::MSG_DONTWAIT,
                )
            };
            if r > 0 {
                sent += r as usize;
                continue;
            }
            let e = std::io::Error::last_os_error();
            if !transient(&e) {
                tracing::debug!(error = %e, "sendmmsg failed");
                break;
            }
        }
        n - sent
    }
}
