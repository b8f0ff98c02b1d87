//! A vhost-user frontend written for the tests: the test plays the VM (its memory is
//! a file both sides map, its virtqueues are built with virtio-queue's mock rings)
//! and drives vsw's backend through the real protocol.
#![allow(dead_code)]

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use vhost::vhost_user::Frontend;
use vhost::{VhostBackend, VhostUserMemoryRegionInfo, VringConfigData};
use virtio_queue::desc::{split::Descriptor, RawDescriptor};
use virtio_queue::mock::MockSplitQueue;
use vm_memory::{Bytes, FileOffset, GuestAddress, GuestMemory, GuestMemoryMmap};
use vmm_sys_util::eventfd::EventFd;
use vsw_datapath::{PacketMeta, PortQueues, RxBatch, RxQueue};
use vsw_netdev::vhost::{open_server, GuestStatus};

pub const MEM: usize = 4 << 20;
pub const QSIZE: u16 = 64;
pub const RXQ_AT: u64 = 0x1_0000;
pub const TXQ_AT: u64 = 0x2_0000;
pub const BUFS_AT: u64 = 0x10_0000;
pub const VRING_DESC_F_WRITE: u16 = 2;
pub const VERSION_1: u64 = 1 << 32;
pub const CSUM: u64 = 1 << 0;
pub const GUEST_CSUM: u64 = 1 << 1;
pub const GUEST_TSO4: u64 = 1 << 7;
pub const GUEST_TSO6: u64 = 1 << 8;
pub const HOST_TSO4: u64 = 1 << 11;
pub const HOST_TSO6: u64 = 1 << 12;
pub const MRG_RXBUF: u64 = 1 << 15;
pub const EVENT_IDX: u64 = 1 << 29;
pub const INDIRECT_DESC: u64 = 1 << 28;
pub const VRING_DESC_F_NEXT: u16 = 1;
pub const VRING_DESC_F_INDIRECT: u16 = 4;

/// Where one virtqueue's parts are in guest memory.
#[derive(Clone, Copy)]
pub struct Rings {
    pub desc: u64,
    pub avail: u64,
    pub used: u64,
}

pub struct Guest {
    pub mem: GuestMemoryMmap,
    pub rings: [Rings; 2],
    /// The file behind the guest's memory.
    pub file: File,
    pub frontend: Frontend,
    pub call: [EventFd; 2],
}

pub fn temp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("vsw-vhost-{}-{name}", std::process::id()))
}

pub fn connect(path: &PathBuf) -> Frontend {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match Frontend::connect(path, 2) {
            Ok(f) => return f,
            Err(e) if Instant::now() > deadline => panic!("cannot connect: {e}"),
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
}

/// A guest whose two virtqueues are configured and running.
pub fn guest(name: &str) -> (Guest, PortQueues, Arc<GuestStatus>) {
    guest_with(name, VERSION_1)
}

/// The same, with the virtio features the driver accepts.
pub fn guest_with(name: &str, features: u64) -> (Guest, PortQueues, Arc<GuestStatus>) {
    let path = temp(&format!("{name}.sock"));
    let (queues, faults) = open_server(&path, 0o600, None).expect("vhost-user port");
    (set_up_with(name, connect(&path), features), queues, faults)
}

pub fn set_up(name: &str, frontend: Frontend) -> Guest {
    set_up_with(name, frontend, VERSION_1)
}

/// Shares memory with the backend and starts both virtqueues.
pub fn set_up_with(name: &str, frontend: Frontend, accepted: u64) -> Guest {
    let mem_path = temp(&format!("{name}.mem"));
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&mem_path)
        .unwrap();
    file.set_len(MEM as u64).unwrap();
    let _ = std::fs::remove_file(&mem_path);
    let mem = GuestMemoryMmap::<()>::from_ranges_with_files([(
        GuestAddress(0),
        MEM,
        Some(FileOffset::new(file.try_clone().unwrap(), 0)),
    )])
    .unwrap();
    let host = mem.get_host_address(GuestAddress(0)).unwrap() as u64;
    frontend.set_owner().unwrap();
    let features = frontend.get_features().unwrap();
    assert_ne!(features & (1 << 32), 0, "VIRTIO_F_VERSION_1 offered");
    assert_eq!(features & accepted, accepted, "features offered");
    frontend.set_features(accepted).unwrap();
    frontend
        .set_mem_table(&[VhostUserMemoryRegionInfo {
            guest_phys_addr: 0,
            memory_size: MEM as u64,
            userspace_addr: host,
            mmap_offset: 0,
            mmap_handle: file.as_raw_fd(),
        }])
        .unwrap();
    let call = [EventFd::new(0).unwrap(), EventFd::new(0).unwrap()];
    let mut rings = [Rings {
        desc: 0,
        avail: 0,
        used: 0,
    }; 2];
    for (i, at) in [(0usize, RXQ_AT), (1, TXQ_AT)] {
        // Lays the rings out (and zeroes them) once; the test then writes them itself.
        let q = MockSplitQueue::create(&mem, GuestAddress(at), QSIZE);
        rings[i] = Rings {
            desc: q.desc_table_addr().0,
            avail: q.avail_addr().0,
            used: q.used_addr().0,
        };
        frontend.set_vring_num(i, QSIZE).unwrap();
        frontend
            .set_vring_addr(
                i,
                &VringConfigData {
                    queue_max_size: QSIZE,
                    queue_size: QSIZE,
                    flags: 0,
                    desc_table_addr: host + q.desc_table_addr().0,
                    used_ring_addr: host + q.used_addr().0,
                    avail_ring_addr: host + q.avail_addr().0,
                    log_addr: None,
                },
            )
            .unwrap();
        frontend.set_vring_base(i, 0).unwrap();
        frontend.set_vring_call(i, &call[i]).unwrap();
        frontend
            .set_vring_kick(i, &EventFd::new(0).unwrap())
            .unwrap();
    }
    // Messages are handled in order: once this one is answered, the queues run.
    frontend.get_features().unwrap();
    Guest {
        mem,
        rings,
        file,
        frontend,
        call,
    }
}

impl Guest {
    /// Puts a one-descriptor chain (descriptor `index`) on queue `q`'s available ring,
    /// as a driver does.
    pub fn offer(&self, q: usize, index: u16, addr: u64, len: u32, flags: u16) {
        let r = self.rings[q];
        // A chain of one: `next` points back at the descriptor itself (which only
        // matters when a test sets VRING_DESC_F_NEXT to make it loop).
        let desc = RawDescriptor::from(Descriptor::new(addr, len, flags, index));
        self.mem
            .write_obj(desc, GuestAddress(r.desc + 16 * u64::from(index)))
            .unwrap();
        let idx: u16 = self.mem.read_obj(GuestAddress(r.avail + 2)).unwrap();
        let slot = r.avail + 4 + 2 * u64::from(idx % QSIZE);
        self.mem.write_obj(index, GuestAddress(slot)).unwrap();
        self.mem
            .write_obj(idx.wrapping_add(1), GuestAddress(r.avail + 2))
            .unwrap();
    }

    /// Offers the frames for vsw to take (guest → switch), each in one buffer after
    /// a zeroed 12-byte virtio-net header, descriptors from `first`.
    pub fn transmit(&self, first: u16, frames: &[Vec<u8>]) {
        self.transmit_with(first, [0; 12], frames)
    }

    /// The same, with a virtio-net header of the test's.
    pub fn transmit_with(&self, first: u16, header: [u8; 12], frames: &[Vec<u8>]) {
        self.transmit_after(first, &header, frames)
    }

    /// The same, with a header of any length (10 bytes for a legacy driver).
    pub fn transmit_after(&self, first: u16, header: &[u8], frames: &[Vec<u8>]) {
        for (i, f) in frames.iter().enumerate() {
            let index = first + i as u16;
            let addr = BUFS_AT + u64::from(index) * 2048;
            let mut buf = header.to_vec();
            buf.extend_from_slice(f);
            self.mem.write_slice(&buf, GuestAddress(addr)).unwrap();
            self.offer(1, index, addr, buf.len() as u32, 0);
        }
    }

    /// Offers `n` empty 2 KiB buffers for vsw to fill (switch → guest).
    pub fn offer_rx_buffers(&self, n: u16) {
        self.offer_rx_buffers_of(0..n, 2048)
    }

    /// Offers receive buffers (descriptors `indexes`) of `size` bytes.
    pub fn offer_rx_buffers_of(&self, indexes: std::ops::Range<u16>, size: u32) {
        for i in indexes {
            let addr = BUFS_AT + 0x8_0000 + u64::from(i) * 2048;
            self.offer(0, i, addr, size, VRING_DESC_F_WRITE);
        }
    }

    /// The used entries of the receive queue: (descriptor, bytes written), and the
    /// bytes of each.
    pub fn used_buffers(&self) -> Vec<(u32, Vec<u8>)> {
        let r = self.rings[0];
        let n: u16 = self.mem.read_obj(GuestAddress(r.used + 2)).unwrap();
        (0..n)
            .map(|i| {
                let at = r.used + 4 + 8 * u64::from(i);
                let id: u32 = self.mem.read_obj(GuestAddress(at)).unwrap();
                let len: u32 = self.mem.read_obj(GuestAddress(at + 4)).unwrap();
                let mut buf = vec![0u8; len as usize];
                let addr = BUFS_AT + 0x8_0000 + u64::from(id) * 2048;
                self.mem.read_slice(&mut buf, GuestAddress(addr)).unwrap();
                (id, buf)
            })
            .collect()
    }

    /// The frames vsw put into the receive buffers, in used-ring order.
    pub fn received(&self) -> Vec<Vec<u8>> {
        self.used_buffers().into_iter().map(|(_, b)| b).collect()
    }
}

pub fn frame(n: u8) -> Vec<u8> {
    vsw_packet::builder::udp4_frame([198, 18, 0, 1], [198, 18, 0, 2], 1000, u16::from(n), 30)
}

/// Polls the port's receive queue until `n` frames came or time is up.
pub fn take(rx: &mut Box<dyn RxQueue>, n: usize) -> Vec<Vec<u8>> {
    take_with_meta(rx, n).into_iter().map(|(f, _)| f).collect()
}

pub fn take_with_meta(rx: &mut Box<dyn RxQueue>, n: usize) -> Vec<(Vec<u8>, PacketMeta)> {
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut got = Vec::new();
    while got.len() < n && Instant::now() < deadline {
        let mut batch = RxBatch::new();
        rx.recv(&mut batch);
        got.extend(batch.iter().map(|p| (p.data.to_vec(), p.meta)));
        drop(batch);
        rx.release();
        std::thread::yield_now();
    }
    got
}
