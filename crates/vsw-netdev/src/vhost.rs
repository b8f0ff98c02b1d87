//! vhost-user ports (server mode): vsw listens on a unix socket, a VM's frontend
//! connects and shares its memory, and the PMD polls the guest's transmit virtqueue
//! and fills its receive virtqueue directly.
//!
//! Built on rust-vmm: `vhost` for the protocol (one handler thread per socket),
//! `vm-memory` for the guest's memory (every access bounds-checked against the
//! regions the guest shared, so a descriptor pointing elsewhere is an error, not a
//! read), `virtio-queue` for split virtqueues (chains end at the queue size, so a
//! looping chain cannot hang the PMD).
//!
//! Split virtqueues only: packed virtqueues (VIRTIO_F_RING_PACKED) are not offered —
//! every frontend that runs here (QEMU, DPDK's virtio_user, Linux and DPDK guest
//! drivers) falls back to split queues, and a second ring layout would double the
//! code that handles untrusted guest memory for no measured gain.

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
use virtio_queue::{Queue, QueueOwnedT, QueueT};
use vm_memory::{Bytes, FileOffset, GuestAddress, GuestMemory, GuestMemoryMmap};

use crate::guest_memory::GuestMemory as GuardedMemory;
use vsw_datapath::{
    PacketMeta, PortQueues, RxBatch, RxDrops, RxPacket, RxQueue, StageError, TxFactory, TxOffloads,
    TxQueue, BATCH_SIZE,
};
use vsw_packet::ethernet::copy_frame;
use vsw_packet::vnet::{VnetHdr, VNET_GSO_NONE, VNET_HDR_LEN};

use crate::unix_socket::{bind_listener, SocketFile};
use crate::NetdevError;

/// Queue pairs a guest may use: virtqueue 2k receives (vsw → guest), 2k + 1
/// transmits (guest → vsw). Every transmit queue is a receive queue of the port, which
/// the PMDs share out; each PMD writes into a receive queue of its own where the
/// guest enabled enough of them.
pub const MAX_QUEUE_PAIRS: usize = 4;
const QUEUES: usize = 2 * MAX_QUEUE_PAIRS;
const QUEUE_MAX: u16 = 1024;
/// The virtio-net header with VIRTIO_F_VERSION_1 or MRG_RXBUF: 10 bytes and
/// `num_buffers`. A legacy driver that has neither uses the 10 bytes alone.
const HDR: usize = 12;
const LEGACY_HDR: usize = 10;

/// The header length a driver with `features` uses.
fn header_len(features: u64) -> usize {
    if features & (VIRTIO_F_VERSION_1 | VIRTIO_NET_F_MRG_RXBUF) != 0 {
        HDR
    } else {
        LEGACY_HDR
    }
}

/// The most descriptors vsw follows in one chain the guest sends: a 64 KiB frame in
/// 4 KiB pages takes 17, Linux never uses more than 19. A longer chain (an indirect
/// table may hold 65,535 descriptors, zero-length ones included) is dropped.
const MAX_CHAIN_DESCRIPTORS: usize = 64;
/// The most descriptors one poll of a guest's transmit queue follows: whatever the
/// guest puts in its ring, a PMD gets back to its other queues soon.
const POLL_DESCRIPTOR_BUDGET: usize = 1024;
/// The largest frame either way: a TCP super-frame of 64 KiB of IP with an Ethernet
/// header and a tag. Frames above the MTU that are not super-frames are refused.
const MAX_FRAME: usize = 65535 + 18;
/// Ethernet header and one tag on top of the MTU.
const L2_OVERHEAD: usize = 18;
/// The most receive buffers one frame may take with mergeable buffers, and the most
/// descriptors vsw writes one frame through.
const MAX_BUFFERS: usize = 64;
const MAX_SEGMENTS: usize = 256;
/// The guest may leave checksums to vsw (CSUM), takes frames whose checksum is left
/// to it (GUEST_CSUM), sends and takes TCP super-frames (HOST_/GUEST_TSO4/6), posts
/// receive buffers a frame may span (MRG_RXBUF) and learns its MTU (the value is in
/// the frontend's configuration space, e.g. QEMU's `host_mtu`).
const VIRTIO_NET_F_CSUM: u64 = 1 << 0;
const VIRTIO_NET_F_GUEST_CSUM: u64 = 1 << 1;
const VIRTIO_NET_F_MTU: u64 = 1 << 3;
const VIRTIO_NET_F_GUEST_TSO4: u64 = 1 << 7;
const VIRTIO_NET_F_GUEST_TSO6: u64 = 1 << 8;
const VIRTIO_NET_F_HOST_TSO4: u64 = 1 << 11;
const VIRTIO_NET_F_HOST_TSO6: u64 = 1 << 12;
const VIRTIO_NET_F_MRG_RXBUF: u64 = 1 << 15;
const VIRTIO_F_VERSION_1: u64 = 1 << 32;
const VIRTIO_RING_F_INDIRECT_DESC: u64 = 1 << 28;
const VIRTIO_RING_F_EVENT_IDX: u64 = 1 << 29;
/// Several queue pairs; the control queue that sets how many the driver uses is
/// the frontend's (QEMU and DPDK's virtio_user handle it themselves).
const VIRTIO_NET_F_CTRL_VQ: u64 = 1 << 17;
const VIRTIO_NET_F_MQ: u64 = 1 << 22;
/// What vsw offers a guest.
const OFFERED: u64 = VIRTIO_F_VERSION_1
    | VIRTIO_NET_F_CSUM
    | VIRTIO_NET_F_GUEST_CSUM
    | VIRTIO_NET_F_MTU
    | VIRTIO_NET_F_GUEST_TSO4
    | VIRTIO_NET_F_GUEST_TSO6
    | VIRTIO_NET_F_HOST_TSO4
    | VIRTIO_NET_F_HOST_TSO6
    | VIRTIO_NET_F_MRG_RXBUF
    | VIRTIO_RING_F_INDIRECT_DESC
    | VIRTIO_RING_F_EVENT_IDX
    | VIRTIO_NET_F_CTRL_VQ
    | VIRTIO_NET_F_MQ
    | VHOST_USER_F_PROTOCOL_FEATURES;
const VHOST_USER_F_PROTOCOL_FEATURES: u64 = 1 << 30;
const VRING_AVAIL_F_NO_INTERRUPT: u16 = 1;

/// A virtqueue while the frontend has it running, as the PMD uses it.
struct Running {
    queue: Queue,
    mem: Arc<GuardedMemory>,
    /// The driver's call eventfd, non-blocking (only eventfds are taken).
    call: Option<File>,
    /// The used index when vsw last decided whether to notify (EVENT_IDX compares the
    /// driver's used event with what was added since).
    checked_used: u16,
}

impl Running {
    /// Tells the guest about used buffers, if its driver asked to be told: without
    /// EVENT_IDX the avail ring's VRING_AVAIL_F_NO_INTERRUPT flag, with it the used
    /// event index, both read from guest memory every time (the driver may change
    /// its mind at any moment). Records in `wants` whether the driver waits for
    /// interrupts; returns whether the guest was notified.
    fn notify(&mut self, wants: &AtomicBool, notified: &AtomicU64) -> bool {
        // The used entries must be visible before the driver's wishes are read.
        fence(Ordering::SeqCst);
        let new = self.queue.next_used();
        let old = std::mem::replace(&mut self.checked_used, new);
        // `waits`: the driver waits for an interrupt (it polls otherwise);
        // `asked`: this batch is the one it asked to be told of.
        let (waits, asked) = if self.queue.event_idx_enabled() {
            // used_event sits after the avail ring's entries. A driver that waits sets
            // it at or past what it has seen; one that polls leaves it behind.
            let at = self.queue.avail_ring() + 4 + 2 * u64::from(self.queue.size());
            match self.mem.read_obj::<u16>(GuestAddress(at)) {
                Ok(event) => (
                    event.wrapping_sub(old) < 0x8000,
                    new.wrapping_sub(event).wrapping_sub(1) < new.wrapping_sub(old),
                ),
                Err(_) => (true, true),
            }
        } else {
            let flags: u16 = self
                .mem
                .read_obj(GuestAddress(self.queue.avail_ring()))
                .unwrap_or(0);
            let waits = flags & VRING_AVAIL_F_NO_INTERRUPT == 0;
            (waits, waits)
        };
        // A driver that gave no call eventfd cannot be interrupted: it polls.
        wants.store(waits && self.call.is_some(), Ordering::Relaxed);
        if !asked {
            return false;
        }
        if let Some(call) = &mut self.call {
            // Non-blocking: a full counter (EAGAIN) means the guest has been told.
            let _ = call.write(&1u64.to_ne_bytes());
            notified.fetch_add(1, Ordering::Relaxed);
            return true;
        }
        false
    }
}

/// One virtqueue: running or not. The PMD takes the lock once per batch; the
/// protocol thread only to start or stop it.
struct Vring {
    running: Mutex<Option<Running>>,
    /// Whether the guest's driver asked to be notified the last time vsw looked
    /// (it starts as "yes": a driver that polls says so in the ring).
    wants_interrupts: AtomicBool,
}

impl Default for Vring {
    fn default() -> Self {
        Vring {
            running: Mutex::new(None),
            wants_interrupts: AtomicBool::new(true),
        }
    }
}

impl Vring {
    fn lock(&self) -> MutexGuard<'_, Option<Running>> {
        self.running.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// What the frontend configured for one virtqueue.
#[derive(Default)]
struct VringConfig {
    size: u16,
    desc: u64,
    avail: u64,
    used: u64,
    base: u16,
    call: Option<File>,
    kicked: bool,
    /// What SET_VRING_ENABLE said last, if it said anything.
    enabled: Option<bool>,
}

/// What vsw knows of a port's guest: what it negotiated, its MTU and link, and
/// counters of what it did wrong.
#[derive(Debug)]
pub struct GuestStatus {
    /// The virtio features the driver accepted (0 while no frontend is set up).
    pub features: AtomicU64,
    /// The MTU vsw holds the guest to (`mtu_request`; 1,500 by default); the guest
    /// learns it from its frontend (QEMU `host_mtu`).
    pub mtu: AtomicU32,
    /// Up while a frontend runs the first queue pair.
    pub link_up: AtomicBool,
    /// Frames the guest sent above its MTU (and not super-frames): dropped.
    pub too_long: AtomicU64,
    /// Descriptor chains that pointed outside the guest's memory, were too long or
    /// held nothing usable: dropped.
    pub bad_chains: AtomicU64,
    /// Virtqueues refused at start (bad size or addresses).
    pub bad_queues: AtomicU64,
    /// Frames for the guest dropped because it offered no (large enough) buffer.
    pub no_buffer: AtomicU64,
    /// Notifications (call eventfd writes) sent to the guest.
    pub notifications: AtomicU64,
    /// The guest's memory now, and faults of its earlier tables (its frontend shrank
    /// memory it had shared: those regions read as zeros since).
    memory: Mutex<std::sync::Weak<GuardedMemory>>,
    retired_faults: AtomicU64,
    /// How the guest's driver takes each receive queue right now (`RxMode` as u8).
    rx_modes: [AtomicU8; MAX_QUEUE_PAIRS],
}

/// How a guest's driver takes one of its receive queues, as vsw last saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RxMode {
    /// The queue does not run.
    Stopped = 0,
    /// The driver asked not to be notified (or gave no eventfd): it polls.
    Polls = 1,
    /// The driver waits for a notification.
    WantsInterrupts = 2,
}

impl Default for GuestStatus {
    fn default() -> Self {
        GuestStatus {
            features: AtomicU64::new(0),
            mtu: AtomicU32::new(1500),
            link_up: AtomicBool::new(false),
            too_long: AtomicU64::new(0),
            bad_chains: AtomicU64::new(0),
            bad_queues: AtomicU64::new(0),
            no_buffer: AtomicU64::new(0),
            notifications: AtomicU64::new(0),
            memory: Mutex::new(std::sync::Weak::new()),
            retired_faults: AtomicU64::new(0),
            rx_modes: Default::default(),
        }
    }
}

impl GuestStatus {
    /// Accesses to guest memory its frontend had taken away (truncated) since vsw
    /// mapped it: survived, and counted.
    pub fn memory_faults(&self) -> u64 {
        let now = self
            .memory
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .upgrade()
            .map_or(0, |m| m.faults());
        self.retired_faults.load(Ordering::Relaxed) + now
    }

    /// A memory table that goes: its faults are kept.
    fn retire_memory(&self, mem: Option<Arc<GuardedMemory>>) {
        if let Some(m) = mem {
            self.retired_faults.fetch_add(m.faults(), Ordering::Relaxed);
        }
    }

    fn has(&self, feature: u64) -> bool {
        self.features.load(Ordering::Relaxed) & feature != 0
    }

    fn set_rx_mode(&self, pair: usize, mode: RxMode) {
        self.rx_modes[pair].store(mode as u8, Ordering::Relaxed);
    }

    /// How the driver takes receive queue `pair` right now.
    pub fn rx_mode(&self, pair: usize) -> RxMode {
        match self.rx_modes.get(pair).map(|m| m.load(Ordering::Relaxed)) {
            Some(1) => RxMode::Polls,
            Some(2) => RxMode::WantsInterrupts,
            _ => RxMode::Stopped,
        }
    }

    /// "receive queue 0 polls, receive queue 1 wants interrupts" for the queues
    /// that run, or "no receive queue running".
    pub fn describe_rx_queues(&self) -> String {
        let running: Vec<String> = (0..MAX_QUEUE_PAIRS)
            .filter_map(|k| match self.rx_mode(k) {
                RxMode::Stopped => None,
                RxMode::Polls => Some(format!("receive queue {k} polls")),
                RxMode::WantsInterrupts => Some(format!("receive queue {k} wants interrupts")),
            })
            .collect();
        if running.is_empty() {
            "no receive queue running".to_string()
        } else {
            running.join(", ")
        }
    }
}

/// The protocol side of one port.
struct Device {
    regions: Vec<VhostUserMemoryRegion>,
    mem: Option<Arc<GuardedMemory>>,
    features: u64,
    protocol: bool,
    config: Vec<VringConfig>,
    vrings: Vec<Arc<Vring>>,
    status: Arc<GuestStatus>,
}

fn invalid(why: &'static str) -> VuError {
    VuError::InvalidOperation(why)
}

impl Device {
    /// A frontend address (its own virtual address space) in guest-physical terms.
    fn to_guest(&self, va: u64) -> Option<u64> {
        self.regions.iter().find_map(|r| {
            (va >= r.user_addr && va - r.user_addr < r.memory_size)
                .then(|| va - r.user_addr + r.guest_phys_addr)
        })
    }

    /// Starts queue `i` if the frontend has given it everything it needs.
    fn maybe_start(&mut self, i: usize) {
        let c = &self.config[i];
        // QEMU enables the first queue pair before it sets the features, and the
        // protocol handler refuses SET_VRING_ENABLE until they are set: that pair
        // runs once kicked unless the frontend disables it later.
        let enabled = c.enabled.unwrap_or(i < 2);
        if !c.kicked || (self.protocol && !enabled) {
            return;
        }
        let Some(mem) = self.mem.clone() else {
            return;
        };
        let started = (|| -> Option<Queue> {
            let mut q = Queue::new(QUEUE_MAX).ok()?;
            q.try_set_size(c.size).ok()?;
            q.try_set_desc_table_address(GuestAddress(c.desc)).ok()?;
            q.try_set_avail_ring_address(GuestAddress(c.avail)).ok()?;
            q.try_set_used_ring_address(GuestAddress(c.used)).ok()?;
            q.set_next_avail(c.base);
            q.set_next_used(c.base);
            q.set_event_idx(self.features & VIRTIO_RING_F_EVENT_IDX != 0);
            q.set_ready(true);
            q.is_valid(&**mem).then_some(q)
        })();
        match started {
            Some(queue) => {
                let call = c.call.as_ref().and_then(|f| f.try_clone().ok());
                *self.vrings[i].lock() = Some(Running {
                    queue,
                    mem,
                    call,
                    checked_used: c.base,
                });
                if i.is_multiple_of(2) {
                    self.vrings[i]
                        .wants_interrupts
                        .store(true, Ordering::Relaxed);
                    self.status.set_rx_mode(i / 2, RxMode::WantsInterrupts);
                }
                self.update_link();
            }
            None => {
                self.status.bad_queues.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(queue = i, "vhost-user: queue refused (size or addresses)");
            }
        }
    }

    /// Stops queue `i`; returns where the guest's driver is to go on from.
    fn stop(&mut self, i: usize) -> u16 {
        let was = self.vrings[i].lock().take();
        let base = was.map_or(self.config[i].base, |r| r.queue.next_avail());
        self.config[i].base = base;
        self.config[i].kicked = false;
        if i.is_multiple_of(2) {
            self.status.set_rx_mode(i / 2, RxMode::Stopped);
        }
        self.update_link();
        base
    }

    /// The link is up while the first queue pair runs.
    fn update_link(&self) {
        let up = self.vrings[0].lock().is_some() && self.vrings[1].lock().is_some();
        let was = self.status.link_up.swap(up, Ordering::Relaxed);
        if was != up {
            tracing::info!(up, "vhost-user link");
        }
    }

    /// The frontend went away: everything stops and is forgotten.
    fn reset(&mut self) {
        for i in 0..QUEUES {
            self.stop(i);
            self.config[i] = VringConfig::default();
        }
        self.status.retire_memory(self.mem.take());
        self.regions.clear();
        self.features = 0;
        self.status.features.store(0, Ordering::Relaxed);
        self.protocol = false;
    }

    fn queue(&self, index: u32) -> VuResult<usize> {
        let i = index as usize;
        if i < QUEUES {
            Ok(i)
        } else {
            tracing::warn!(index, "vhost-user: no such queue");
            Err(VuError::InvalidParam)
        }
    }
}

impl VhostUserBackendReqHandlerMut for Device {
    fn set_owner(&mut self) -> VuResult<()> {
        Ok(())
    }

    fn reset_owner(&mut self) -> VuResult<()> {
        self.reset();
        Ok(())
    }

    fn reset_device(&mut self) -> VuResult<()> {
        self.reset();
        Ok(())
    }

    fn get_features(&mut self) -> VuResult<u64> {
        Ok(OFFERED)
    }

    fn set_features(&mut self, features: u64) -> VuResult<()> {
        if features & !OFFERED != 0 {
            tracing::warn!(features, "vhost-user: features not offered");
            return Err(VuError::InvalidParam);
        }
        self.features = features;
        self.status.features.store(features, Ordering::Relaxed);
        self.protocol = features & VHOST_USER_F_PROTOCOL_FEATURES != 0;
        Ok(())
    }

    fn set_mem_table(&mut self, ctx: &[VhostUserMemoryRegion], files: Vec<File>) -> VuResult<()> {
        if ctx.len() != files.len() || ctx.is_empty() {
            return Err(VuError::InvalidParam);
        }
        let ranges: Vec<(GuestAddress, usize, Option<FileOffset>)> = ctx
            .iter()
            .zip(files)
            .map(|(r, f)| {
                (
                    GuestAddress(r.guest_phys_addr),
                    r.memory_size as usize,
                    Some(FileOffset::new(f, r.mmap_offset)),
                )
            })
            .collect();
        let mem = GuestMemoryMmap::from_ranges_with_files(ranges)
            .map_err(|_| invalid("guest memory regions cannot be mapped"))?;
        let mem = GuardedMemory::guard(mem).map_err(invalid)?;
        // A new table on a running connection (memory hot-plug): the queues that
        // run stop (no PMD touches the old mapping once its lock is let go), and start
        // again from where they were, on the new memory. Their rings are at guest
        // physical addresses, which the new table still maps.
        let running: Vec<usize> = (0..QUEUES)
            .filter(|&i| self.vrings[i].lock().is_some())
            .collect();
        for i in 0..QUEUES {
            self.stop(i);
        }
        self.status.retire_memory(self.mem.take());
        *self.status.memory.lock().unwrap_or_else(|e| e.into_inner()) = Arc::downgrade(&mem);
        self.mem = Some(mem);
        self.regions = ctx.to_vec();
        for i in running {
            self.config[i].kicked = true;
            self.maybe_start(i);
        }
        Ok(())
    }

    fn set_vring_num(&mut self, index: u32, num: u32) -> VuResult<()> {
        let i = self.queue(index)?;
        if num == 0 || num > u32::from(QUEUE_MAX) || !num.is_power_of_two() {
            self.status.bad_queues.fetch_add(1, Ordering::Relaxed);
            return Err(VuError::InvalidParam);
        }
        self.config[i].size = num as u16;
        Ok(())
    }

    fn set_vring_addr(
        &mut self,
        index: u32,
        _flags: VhostUserVringAddrFlags,
        descriptor: u64,
        used: u64,
        available: u64,
        _log: u64,
    ) -> VuResult<()> {
        let i = self.queue(index)?;
        let (Some(d), Some(u), Some(a)) = (
            self.to_guest(descriptor),
            self.to_guest(used),
            self.to_guest(available),
        ) else {
            self.status.bad_queues.fetch_add(1, Ordering::Relaxed);
            return Err(VuError::InvalidParam);
        };
        let c = &mut self.config[i];
        (c.desc, c.used, c.avail) = (d, u, a);
        Ok(())
    }

    fn set_vring_base(&mut self, index: u32, base: u32) -> VuResult<()> {
        let i = self.queue(index)?;
        self.config[i].base = base as u16;
        Ok(())
    }

    fn get_vring_base(&mut self, index: u32) -> VuResult<VhostUserVringState> {
        let i = self.queue(index)?;
        Ok(VhostUserVringState::new(index, u32::from(self.stop(i))))
    }

    fn set_vring_kick(&mut self, index: u8, _fd: Option<File>) -> VuResult<()> {
        // The PMD polls: kicks are not waited for.
        let i = self.queue(u32::from(index))?;
        self.config[i].kicked = true;
        self.maybe_start(i);
        Ok(())
    }

    fn set_vring_call(&mut self, index: u8, fd: Option<File>) -> VuResult<()> {
        let i = self.queue(u32::from(index))?;
        // Anything but an eventfd (a pipe, a FUSE file) could block the PMD that
        // writes it: refused. The eventfd is written without blocking.
        let fd = match fd {
            Some(f) if crate::sys::is_eventfd(&f) => {
                crate::sys::set_nonblocking(&f).map_err(VuError::ReqHandlerError)?;
                Some(f)
            }
            Some(_) => {
                self.status.bad_queues.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(
                    queue = i,
                    "vhost-user: a call descriptor that is not an eventfd, refused"
                );
                return Err(VuError::InvalidParam);
            }
            None => None,
        };
        self.config[i].call = fd;
        if let Some(r) = self.vrings[i].lock().as_mut() {
            r.call = self.config[i]
                .call
                .as_ref()
                .and_then(|f| f.try_clone().ok());
        }
        Ok(())
    }

    fn set_vring_err(&mut self, _index: u8, _fd: Option<File>) -> VuResult<()> {
        Ok(())
    }

    fn get_protocol_features(&mut self) -> VuResult<VhostUserProtocolFeatures> {
        // Several queue pairs, and replies to messages that ask for one (the
        // protocol handler sends them).
        Ok(VhostUserProtocolFeatures::MQ | VhostUserProtocolFeatures::REPLY_ACK)
    }

    fn set_protocol_features(&mut self, features: u64) -> VuResult<()> {
        let offered = VhostUserProtocolFeatures::MQ | VhostUserProtocolFeatures::REPLY_ACK;
        if features & !offered.bits() != 0 {
            tracing::warn!(features, "vhost-user: protocol features not offered");
            return Err(VuError::InvalidParam);
        }
        Ok(())
    }

    fn get_queue_num(&mut self) -> VuResult<u64> {
        Ok(MAX_QUEUE_PAIRS as u64)
    }

    fn set_vring_enable(&mut self, index: u32, enable: bool) -> VuResult<()> {
        let i = self.queue(index)?;
        self.config[i].enabled = Some(enable);
        if enable {
            self.maybe_start(i);
        } else {
            let base = self.stop(i);
            self.config[i].base = base;
            self.config[i].kicked = true;
        }
        Ok(())
    }

    fn get_config(&mut self, _: u32, _: u32, _: VhostUserConfigFlags) -> VuResult<Vec<u8>> {
        Err(invalid("no device configuration space"))
    }

    fn set_config(&mut self, _: u32, _: &[u8], _: VhostUserConfigFlags) -> VuResult<()> {
        Err(invalid("no device configuration space"))
    }

    fn set_gpu_socket(&mut self, _: GpuBackend) -> VuResult<()> {
        Err(invalid("not a GPU"))
    }

    fn get_shared_object(&mut self, _: VhostUserSharedMsg) -> VuResult<File> {
        Err(invalid("no shared objects"))
    }

    fn get_inflight_fd(&mut self, _: &VhostUserInflight) -> VuResult<(VhostUserInflight, File)> {
        Err(invalid("no inflight tracking"))
    }

    fn set_inflight_fd(&mut self, _: &VhostUserInflight, _: File) -> VuResult<()> {
        Err(invalid("no inflight tracking"))
    }

    fn get_max_mem_slots(&mut self) -> VuResult<u64> {
        Err(invalid("no memory slots protocol"))
    }

    fn add_mem_region(&mut self, _: &VhostUserSingleMemoryRegion, _: File) -> VuResult<()> {
        Err(invalid("no memory slots protocol"))
    }

    fn remove_mem_region(&mut self, _: &VhostUserSingleMemoryRegion) -> VuResult<()> {
        Err(invalid("no memory slots protocol"))
    }

    fn set_device_state_fd(
        &mut self,
        _: VhostTransferStateDirection,
        _: VhostTransferStatePhase,
        _: File,
    ) -> VuResult<Option<File>> {
        Err(invalid("no migration"))
    }

    fn check_device_state(&mut self) -> VuResult<()> {
        Err(invalid("no migration"))
    }

    fn set_log_base(&mut self, _: &VhostUserLog, _: File) -> VuResult<()> {
        Err(invalid("no dirty logging"))
    }
}

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
        mem: None,
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
                bufs: (0..BATCH_SIZE)
                    .map(|_| vec![0u8; HDR + MAX_FRAME].into_boxed_slice())
                    .collect(),
                lens: [0; BATCH_SIZE],
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

/// The guest's transmit queue, polled by a PMD: frames the guest sends.
struct GuestTx {
    vring: Arc<Vring>,
    /// The virtio-net header length of the frames in `bufs`.
    hdr: usize,
    /// Each holds a virtio-net header and a frame.
    bufs: Vec<Box<[u8]>>,
    lens: [usize; BATCH_SIZE],
    status: Arc<GuestStatus>,
    _server: Arc<Server>,
}

/// Copies one descriptor chain (virtio-net header and frame) into `buf`; `None` when
/// the chain is unusable (outside guest memory, writable where it should be readable,
/// longer than `buf`, more than [`MAX_CHAIN_DESCRIPTORS`], looping). `walked` counts
/// the descriptors looked at, usable or not.
fn read_chain<M: GuestMemory>(
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
    (len >= hdr + 14 && !more).then_some(len)
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

/// The guest's receive queue: frames for the guest, staged here and written into its
/// buffers once per batch (one lock and one used-index update per batch, not per
/// packet).
struct GuestRx {
    /// Every receive queue of the guest, and the one this transmit queue prefers.
    rings: Arc<Vec<Arc<Vring>>>,
    pair: usize,
    /// The receive queue the last batch went into.
    last_pair: usize,
    /// Each holds a virtio-net header and a frame.
    bufs: Vec<Box<[u8]>>,
    lens: [usize; BATCH_SIZE],
    staged: usize,
    /// The buffers (chain heads, bytes written) and descriptors of the frame being
    /// placed: kept here so that placing allocates nothing.
    heads: ArrayVec<(u16, u32), MAX_BUFFERS>,
    segments: ArrayVec<(GuestAddress, u32, u8), MAX_SEGMENTS>,
    status: Arc<GuestStatus>,
    _server: Arc<Server>,
}

impl GuestRx {
    fn new(
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
enum Placed {
    /// Written into this many buffers.
    Buffers(u16),
    /// The guest has no (large enough) buffer now: nothing taken.
    NoBuffer,
    /// The guest's buffers were unusable: given back empty, this many.
    Bad(u16),
}

/// Writes a used-ring entry at position `index` (not yet published).
fn write_used<M: GuestMemory>(q: &Queue, mem: &M, index: u16, head: u16, len: u32) {
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
    fn place(
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
                frame[10..12].copy_from_slice(&count.to_le_bytes());
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
            buf[10..12].copy_from_slice(&1u16.to_le_bytes());
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
