//! vhost-user ports (server mode): vsw listens on a unix socket, a VM's frontend
//! connects and shares its memory, and the PMD polls the guest's transmit virtqueue
//! and fills its receive virtqueue directly.
//!
//! The protocol comes from rust-vmm's `vhost` (one handler thread per socket) and the
//! mapping of the guest's memory from `vm-memory` (guarded against a frontend that
//! shrinks it, `guest_memory`). The virtqueues themselves are vsw's own (`split_queue`
//! over `guest_map`, the one module here that touches guest memory through pointers):
//! the PMD's cost per packet was in virtio-queue's per-access region lookups and
//! per-chain index updates. Every address and length a guest gives is checked against
//! its memory before a byte is copied, chains end after `MAX_CHAIN_DESCRIPTORS`
//! descriptors (so a looping chain cannot hang the PMD), and indices read from the
//! rings are masked to the queue size.
//!
//! Split virtqueues only: packed virtqueues (VIRTIO_F_RING_PACKED) are not offered —
//! every frontend that runs here (QEMU, DPDK's virtio_user, Linux and DPDK guest
//! drivers) falls back to split queues, and a second ring layout would double the
//! code that handles untrusted guest memory; the split queue already beats OVS-DPDK
//! here (docs/BENCHMARKS.md, issue 15). VIRTIO_F_IN_ORDER is offered: vsw uses
//! buffers in the order they were made available anyway.
//!
//! Here: the socket, its protocol thread and opening a port. `features` is what vsw
//! offers and the limits it holds a guest to, `device` the protocol side (virtqueues,
//! memory, messages), `status` what `show` tells of the guest, `frame_slots` the
//! batch's frame buffers, and `guest_tx` and `guest_rx` the two directions of frames.

use arrayvec::ArrayVec;
use std::fs::File;
use std::io::Write;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use vhost::vhost_user::message::{
    VhostTransferStateDirection, VhostTransferStatePhase, VhostUserConfigFlags, VhostUserInflight,
    VhostUserLog, VhostUserMemoryRegion, VhostUserSharedMsg, VhostUserSingleMemoryRegion,
    VhostUserVringAddrFlags, VhostUserVringState,
};
use vhost::vhost_user::{
    BackendReqHandler, Error as VuError, GpuBackend, Result as VuResult,
    VhostUserBackendReqHandlerMut, VhostUserProtocolFeatures,
};
use vm_memory::{FileOffset, GuestAddress, GuestMemoryMmap};

use crate::guest_memory::GuestMemory as GuardedMemory;
use vsw_datapath::{
    PacketMeta, PortQueues, RxBatch, RxDrops, RxPacket, RxQueue, StageError, TxFactory, TxOffloads,
    TxQueue, BATCH_SIZE,
};
use vsw_packet::ethernet::copy_frame;
use vsw_packet::vnet::{VnetHdr, VNET_GSO_NONE, VNET_HDR_LEN};

use crate::unix_socket::{bind_listener, SocketFile};
use crate::NetdevError;

mod device;
mod features;
mod frame_slots;
#[allow(unsafe_code)]
mod guest_map;
mod guest_rx;
mod guest_tx;
mod split_queue;
mod status;

use device::*;
pub use features::MAX_QUEUE_PAIRS;
use features::*;
use frame_slots::FrameSlots;
use guest_map::{GuestMap, SplitRings};
use guest_rx::*;
use guest_tx::*;
use split_queue::{Batch, Chain, SplitQueue};
pub use status::{GuestStatus, RxMode};

/// The socket and its protocol thread; stopped when the port's last queue goes.
struct Server {
    /// Whether the thread is to stop, and the frontend's connection while there is
    /// one: one lock for both, so that a connection accepted as the port goes is
    /// either seen and shut down here or never served there.
    session: Arc<Mutex<Session>>,
    /// The socket vsw created (server ports), removed with the port if it is still
    /// the one vsw made.
    socket: Option<(PathBuf, SocketFile)>,
}

#[derive(Default)]
struct Session {
    stop: bool,
    conn: Option<UnixStream>,
}

impl Drop for Server {
    /// Never waits for the protocol thread (this may run on a PMD, and the frontend
    /// may be stuck): it is told to stop and its connection is shut down, which ends
    /// any read it is in; it ends within one accept or connect interval.
    fn drop(&mut self) {
        let mut session = self.session.lock().unwrap_or_else(|e| e.into_inner());
        session.stop = true;
        if let Some(c) = session.conn.take() {
            let _ = c.shutdown(std::net::Shutdown::Both);
        }
        drop(session);
        if let Some((path, file)) = &self.socket {
            file.remove(path);
        }
    }
}

/// How a port gets its next frontend: it accepts one (`vhostuser`), or it connects
/// to the VM's socket, again and again while the VM restarts (`vhostuserclient`).
enum Side {
    Server(std::os::unix::net::UnixListener),
    Client(PathBuf),
}

impl Side {
    /// The next session's socket, or `None` to look again a little later. Never
    /// blocks: the listener does not, and a connect to a VM that does not accept
    /// (its backlog full) gives up at once.
    fn next(&self) -> Option<UnixStream> {
        match self {
            Side::Server(l) => match l.accept() {
                Ok((s, _)) => Some(s),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => None,
                Err(e) => {
                    tracing::warn!(error = %e, "vhost-user accept");
                    None
                }
            },
            Side::Client(path) => crate::unix_socket::connect_nonblocking(path).ok(),
        }
    }
}

fn serve(side: Side, device: Arc<Mutex<Device>>, session: Arc<Mutex<Session>>) {
    let stopped = || session.lock().unwrap_or_else(|e| e.into_inner()).stop;
    while !stopped() {
        let Some(stream) = side.next() else {
            std::thread::sleep(match side {
                Side::Server(_) => Duration::from_millis(20),
                // A VM that is not (yet, or again) up: try its socket a few times a
                // second.
                Side::Client(_) => Duration::from_millis(200),
            });
            continue;
        };
        let _ = stream.set_nonblocking(false);
        {
            let mut s = session.lock().unwrap_or_else(|e| e.into_inner());
            if s.stop {
                return;
            }
            s.conn = stream.try_clone().ok();
            if s.conn.is_none() {
                // Without a handle to shut it down with, the port could not be
                // removed while the frontend is silent: not served.
                continue;
            }
        }
        let mut handler = BackendReqHandler::from_stream(stream, device.clone());
        loop {
            if let Err(e) = handler.handle_request() {
                // A refused message is answered (where the protocol asks for a reply)
                // and the session goes on; a broken socket ends it.
                let broken = matches!(
                    e,
                    VuError::Disconnected | VuError::PartialMessage | VuError::SocketError(_)
                );
                if !broken {
                    tracing::warn!(error = %e, "vhost-user: frontend message refused");
                }
                if broken || stopped() {
                    break;
                }
            }
        }
        device.lock().unwrap_or_else(|e| e.into_inner()).reset();
        session.lock().unwrap_or_else(|e| e.into_inner()).conn = None;
        tracing::info!("vhost-user frontend disconnected");
    }
}

/// Opens a vhost-user port listening on `path` (`vhostuser`: vsw creates the socket,
/// with permission bits `mode` and group `gid`). A stale socket there is replaced;
/// a live one or anything that is not a socket is an error.
pub fn open_server(
    path: &Path,
    mode: u32,
    gid: Option<u32>,
) -> Result<(PortQueues, Arc<GuestStatus>), NetdevError> {
    let sys = |op, source| NetdevError::Syscall {
        op,
        ifname: path.display().to_string(),
        source,
    };
    let (listener, file) = bind_listener(path, mode, gid).map_err(|e| sys("bind", e))?;
    listener
        .set_nonblocking(true)
        .map_err(|e| sys("set_nonblocking", e))?;
    open(Side::Server(listener), path, Some(file))
}

/// Opens a vhost-user port that connects to the VM's socket at `path`
/// (`vhostuserclient`), and connects again whenever the VM comes back.
pub fn open_client(path: &Path) -> Result<(PortQueues, Arc<GuestStatus>), NetdevError> {
    open(Side::Client(path.to_path_buf()), path, None)
}

fn open(
    side: Side,
    path: &Path,
    socket: Option<SocketFile>,
) -> Result<(PortQueues, Arc<GuestStatus>), NetdevError> {
    let sys = |op, source| NetdevError::Syscall {
        op,
        ifname: path.display().to_string(),
        source,
    };
    let status = Arc::new(GuestStatus::default());
    let vrings: Vec<Arc<Vring>> = (0..QUEUES).map(|_| Arc::new(Vring::default())).collect();
    let device = Arc::new(Mutex::new(Device {
        regions: Vec::new(),
        map: None,
        features: 0,
        protocol: false,
        config: (0..QUEUES).map(|_| VringConfig::default()).collect(),
        vrings: vrings.clone(),
        status: status.clone(),
    }));
    let session = Arc::new(Mutex::new(Session::default()));
    let server = Arc::new(Server {
        session: session.clone(),
        socket: socket.map(|f| (path.to_path_buf(), f)),
    });
    std::thread::Builder::new()
        .name("vhost-user".into())
        .spawn(move || serve(side, device, session))
        .map_err(|e| sys("spawn", e))?;
    let rx_rings: Arc<Vec<Arc<Vring>>> = Arc::new(vrings.iter().step_by(2).cloned().collect());
    // Each further transmit queue (one per PMD) prefers the next receive queue.
    let next_pair = Arc::new(std::sync::atomic::AtomicUsize::new(1));
    let tx_factory: TxFactory = {
        let (rings, status, server) = (rx_rings.clone(), status.clone(), server.clone());
        Box::new(move || {
            let k = next_pair.fetch_add(1, Ordering::Relaxed) % MAX_QUEUE_PAIRS;
            Ok(Box::new(GuestRx::new(
                rings.clone(),
                k,
                status.clone(),
                server.clone(),
            )) as Box<dyn TxQueue>)
        })
    };
    let rx: Vec<Box<dyn RxQueue>> = vrings
        .iter()
        .skip(1)
        .step_by(2)
        .map(|v| {
            Box::new(GuestTx {
                vring: v.clone(),
                hdr: HDR,
                slots: FrameSlots::default(),
                taken: Batch::default(),
                chain: Chain::new(),
                status: status.clone(),
                _server: server.clone(),
            }) as Box<dyn RxQueue>
        })
        .collect();
    Ok((
        PortQueues {
            rx,
            tx: Box::new(GuestRx::new(rx_rings, 0, status.clone(), server)),
            tx_factory: Some(tx_factory),
        },
        status,
    ))
}
