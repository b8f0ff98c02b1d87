//! vhost-user ports against a frontend written here: the test plays the VM (its
//! memory is a file both sides map, its virtqueues are built with virtio-queue's
//! mock rings) and drives vsw's backend through the real protocol.

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use vhost::vhost_user::Frontend;
use vhost::{VhostBackend, VhostUserMemoryRegionInfo, VringConfigData};
use virtio_queue::desc::{split::Descriptor, RawDescriptor};
use virtio_queue::mock::MockSplitQueue;
use vm_memory::{Bytes, FileOffset, GuestAddress, GuestMemory, GuestMemoryMmap};
use vmm_sys_util::eventfd::EventFd;
use vsw_datapath::{PacketMeta, PortQueues, RxBatch, RxQueue};
use vsw_netdev::vhost::{open_server, GuestStatus, RxMode};

const MEM: usize = 4 << 20;
const QSIZE: u16 = 64;
const RXQ_AT: u64 = 0x1_0000;
const TXQ_AT: u64 = 0x2_0000;
const BUFS_AT: u64 = 0x10_0000;
const VRING_DESC_F_WRITE: u16 = 2;
const VERSION_1: u64 = 1 << 32;
const CSUM: u64 = 1 << 0;
const GUEST_CSUM: u64 = 1 << 1;
const GUEST_TSO4: u64 = 1 << 7;
const GUEST_TSO6: u64 = 1 << 8;
const HOST_TSO4: u64 = 1 << 11;
const HOST_TSO6: u64 = 1 << 12;
const MRG_RXBUF: u64 = 1 << 15;
const EVENT_IDX: u64 = 1 << 29;
const INDIRECT_DESC: u64 = 1 << 28;
const VRING_DESC_F_NEXT: u16 = 1;
const VRING_DESC_F_INDIRECT: u16 = 4;

/// Where one virtqueue's parts are in guest memory.
#[derive(Clone, Copy)]
struct Rings {
    desc: u64,
    avail: u64,
    used: u64,
}

struct Guest {
    mem: GuestMemoryMmap,
    rings: [Rings; 2],
    _file: File,
    _frontend: Frontend,
    _call: [EventFd; 2],
}

fn temp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("vsw-vhost-{}-{name}", std::process::id()))
}

fn connect(path: &PathBuf) -> Frontend {
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
fn guest(name: &str) -> (Guest, PortQueues, Arc<GuestStatus>) {
    guest_with(name, VERSION_1)
}

/// The same, with the virtio features the driver accepts.
fn guest_with(name: &str, features: u64) -> (Guest, PortQueues, Arc<GuestStatus>) {
    let path = temp(&format!("{name}.sock"));
    let (queues, faults) = open_server(&path, 0o600, None).expect("vhost-user port");
    (set_up_with(name, connect(&path), features), queues, faults)
}

fn set_up(name: &str, frontend: Frontend) -> Guest {
    set_up_with(name, frontend, VERSION_1)
}

/// Shares memory with the backend and starts both virtqueues.
fn set_up_with(name: &str, frontend: Frontend, accepted: u64) -> Guest {
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
        _file: file,
        _frontend: frontend,
        _call: call,
    }
}

impl Guest {
    /// Puts a one-descriptor chain (descriptor `index`) on queue `q`'s available ring,
    /// as a driver does.
    fn offer(&self, q: usize, index: u16, addr: u64, len: u32, flags: u16) {
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
    fn transmit(&self, first: u16, frames: &[Vec<u8>]) {
        self.transmit_with(first, [0; 12], frames)
    }

    /// The same, with a virtio-net header of the test's.
    fn transmit_with(&self, first: u16, header: [u8; 12], frames: &[Vec<u8>]) {
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
    fn offer_rx_buffers(&self, n: u16) {
        self.offer_rx_buffers_of(0..n, 2048)
    }

    /// Offers receive buffers (descriptors `indexes`) of `size` bytes.
    fn offer_rx_buffers_of(&self, indexes: std::ops::Range<u16>, size: u32) {
        for i in indexes {
            let addr = BUFS_AT + 0x8_0000 + u64::from(i) * 2048;
            self.offer(0, i, addr, size, VRING_DESC_F_WRITE);
        }
    }

    /// The used entries of the receive queue: (descriptor, bytes written), and the
    /// bytes of each.
    fn used_buffers(&self) -> Vec<(u32, Vec<u8>)> {
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
    fn received(&self) -> Vec<Vec<u8>> {
        let r = self.rings[0];
        let n: u16 = self.mem.read_obj(GuestAddress(r.used + 2)).unwrap();
        (0..n)
            .map(|i| {
                let at = r.used + 4 + 8 * u64::from(i);
                let id: u32 = self.mem.read_obj(GuestAddress(at)).unwrap();
                let len: u32 = self.mem.read_obj(GuestAddress(at + 4)).unwrap();
                let addr = BUFS_AT + 0x8_0000 + u64::from(id) * 2048;
                let mut buf = vec![0u8; len as usize];
                self.mem.read_slice(&mut buf, GuestAddress(addr)).unwrap();
                buf
            })
            .collect()
    }
}

fn frame(n: u8) -> Vec<u8> {
    vsw_packet::builder::udp4_frame([198, 18, 0, 1], [198, 18, 0, 2], 1000, u16::from(n), 30)
}

/// Polls the port's receive queue until `n` frames came or time is up.
fn take(rx: &mut Box<dyn RxQueue>, n: usize) -> Vec<Vec<u8>> {
    take_with_meta(rx, n).into_iter().map(|(f, _)| f).collect()
}

fn take_with_meta(rx: &mut Box<dyn RxQueue>, n: usize) -> Vec<(Vec<u8>, PacketMeta)> {
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

#[test]
fn frames_cross_in_both_directions() {
    let (g, mut q, faults) = guest("both");
    g.transmit(0, &[frame(1), frame(2), frame(3)]);
    let got = take(&mut q.rx[0], 3);
    assert_eq!(got, vec![frame(1), frame(2), frame(3)], "guest → switch");
    g.offer_rx_buffers(4);
    for n in 10..13 {
        q.tx.stage(&frame(n), &PacketMeta::default()).unwrap();
    }
    assert_eq!(q.tx.flush(), 0);
    let rx = g.received();
    assert_eq!(rx.len(), 3, "switch → guest");
    for (i, f) in rx.iter().enumerate() {
        assert_eq!(
            &f[..12],
            &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0],
            "header with num_buffers 1"
        );
        assert_eq!(&f[12..], &frame(10 + i as u8)[..]);
    }
    assert_eq!(faults.bad_chains.load(Ordering::Relaxed), 0);
    assert!(
        faults.link_up.load(Ordering::Relaxed),
        "link up with a guest"
    );
    drop(g);
    let deadline = Instant::now() + Duration::from_secs(5);
    while faults.link_up.load(Ordering::Relaxed) {
        assert!(
            Instant::now() < deadline,
            "link still up after the guest left"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_frame_spans_mergeable_buffers_published_together() {
    let (g, mut q, status) = guest_with("mrg", VERSION_1 | MRG_RXBUF);
    let big = |n| vsw_packet::builder::udp4_frame([198, 18, 0, 1], [198, 18, 0, 2], 1, n, 1000);
    let (a, b) = (big(1), big(2));
    let need = (12 + a.len()).div_ceil(256);
    assert!(need > 2 && 2 * need > 8, "the frames need several buffers");
    g.offer_rx_buffers_of(0..8, 256);
    q.tx.stage(&a, &PacketMeta::default()).unwrap();
    q.tx.stage(&b, &PacketMeta::default()).unwrap();
    assert_eq!(q.tx.flush(), 1, "the second frame finds too few buffers");
    assert_eq!(status.no_buffer.load(Ordering::Relaxed), 1);
    let used = g.used_buffers();
    assert_eq!(used.len(), need, "one frame, {need} buffers");
    let mut whole: Vec<u8> = used.iter().flat_map(|(_, b)| b.clone()).collect();
    assert_eq!(u16::from_le_bytes([whole[10], whole[11]]) as usize, need);
    assert_eq!(whole.split_off(12), a);
    // The buffers the second frame could not use are still the guest's: with more
    // offered, the next frame takes them first.
    g.offer_rx_buffers_of(8..16, 256);
    q.tx.stage(&b, &PacketMeta::default()).unwrap();
    assert_eq!(q.tx.flush(), 0);
    let used = g.used_buffers();
    assert_eq!(used.len(), 2 * need);
    assert_eq!(
        used[need].0, need as u32,
        "the next free buffer comes first"
    );
    let mut whole: Vec<u8> = used[need..].iter().flat_map(|(_, b)| b.clone()).collect();
    assert_eq!(whole.split_off(12), b);
}

#[test]
fn offloads_follow_what_the_guest_negotiated() {
    let (plain, mut q, _) = guest("no-offloads");
    let o = q.tx.offloads();
    assert!(!o.csum && !o.tso, "nothing negotiated, nothing offloaded");
    // A header the guest had no right to fill is ignored.
    let mut hdr = [0u8; 12];
    hdr[0] = 1; // NEEDS_CSUM
    hdr[6] = 34; // csum_start
    hdr[8] = 6; // csum_offset
    plain.transmit_with(0, hdr, &[frame(1)]);
    let got = take_with_meta(&mut q.rx[0], 1);
    assert_eq!(got[0].1.vnet.flags, 0);
    drop(plain);

    let all = VERSION_1 | CSUM | GUEST_CSUM | HOST_TSO4 | HOST_TSO6 | GUEST_TSO4 | GUEST_TSO6;
    let (g, mut q, _) = guest_with("offloads", all);
    let o = q.tx.offloads();
    assert!(o.csum && o.tso, "checksums and TSO negotiated");
    g.transmit_with(0, hdr, &[frame(2)]);
    let got = take_with_meta(&mut q.rx[0], 1);
    assert_eq!(got.len(), 1);
    let vnet = got[0].1.vnet;
    assert_eq!(
        (vnet.flags, vnet.csum_start, vnet.csum_offset),
        (1, 34, 6),
        "the guest's checksum request travels with the frame"
    );
    // A super-frame for the guest keeps its header.
    let mut meta = PacketMeta::default();
    meta.vnet.gso_type = vsw_packet::vnet::VNET_GSO_TCPV4;
    meta.vnet.gso_size = 1448;
    meta.vnet.hdr_len = 54;
    g.offer_rx_buffers(1);
    q.tx.stage(&frame(3), &meta).unwrap();
    assert_eq!(q.tx.flush(), 0);
    let rx = g.received();
    assert_eq!(rx[0][1], vsw_packet::vnet::VNET_GSO_TCPV4);
    assert_eq!(u16::from_le_bytes([rx[0][4], rx[0][5]]), 1448);
}

#[test]
fn a_frame_above_the_mtu_is_dropped_and_counted() {
    let (g, mut q, status) = guest("mtu");
    let big = vsw_packet::builder::udp4_frame([198, 18, 0, 1], [198, 18, 0, 2], 1, 2, 1600);
    g.transmit(0, &[big, frame(1)]);
    let got = take(&mut q.rx[0], 1);
    assert_eq!(got, vec![frame(1)], "only the frame within the MTU");
    assert_eq!(status.too_long.load(Ordering::Relaxed), 1);
    // A larger MTU lets it through.
    status.mtu.store(9000, Ordering::Relaxed);
    let big = vsw_packet::builder::udp4_frame([198, 18, 0, 1], [198, 18, 0, 2], 1, 2, 1600);
    g.transmit(2, std::slice::from_ref(&big));
    assert_eq!(take(&mut q.rx[0], 1), vec![big]);
}

#[test]
fn a_descriptor_outside_guest_memory_is_dropped_and_counted() {
    let (g, mut q, faults) = guest("hostile");
    // A descriptor far past the guest's 4 MiB, then a good frame.
    g.offer(1, 0, 1 << 40, 100, 0);
    g.transmit(1, &[frame(7)]);
    let got = take(&mut q.rx[0], 1);
    assert_eq!(got, vec![frame(7)], "the good frame still comes through");
    assert_eq!(faults.bad_chains.load(Ordering::Relaxed), 1);
    // A frame for the guest when it offers no buffer: dropped and counted.
    q.tx.stage(&frame(9), &PacketMeta::default()).unwrap();
    assert_eq!(q.tx.flush(), 1);
    assert_eq!(faults.no_buffer.load(Ordering::Relaxed), 1);
}

#[test]
fn a_queue_size_that_is_not_a_power_of_two_is_refused() {
    let path = temp("odd.sock");
    let (_q, faults) = open_server(&path, 0o600, None).unwrap();
    let f = connect(&path);
    f.set_owner().unwrap();
    // The backend refuses and counts it; vsw lives on.
    let _ = f.set_vring_num(0, 100);
    let deadline = Instant::now() + Duration::from_secs(5);
    while faults.bad_queues.load(Ordering::Relaxed) == 0 {
        assert!(Instant::now() < deadline, "not counted");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn the_guest_is_notified_only_when_its_driver_asks() {
    let (g, mut q, faults) = guest("notify");
    g.offer_rx_buffers(8);
    let send = |q: &mut PortQueues| {
        q.tx.stage(&frame(1), &PacketMeta::default()).unwrap();
        assert_eq!(q.tx.flush(), 0);
    };
    send(&mut q);
    assert_eq!(faults.notifications.load(Ordering::Relaxed), 1);
    assert!(!q.tx.receiver_polls(), "a driver that wants interrupts");
    // The driver switches to polling: VRING_AVAIL_F_NO_INTERRUPT in its avail ring.
    g.mem
        .write_obj(1u16, GuestAddress(g.rings[0].avail))
        .unwrap();
    send(&mut q);
    assert_eq!(
        faults.notifications.load(Ordering::Relaxed),
        1,
        "not notified"
    );
    assert!(q.tx.receiver_polls());
    assert_eq!(faults.rx_mode(0), RxMode::Polls);
    assert_eq!(faults.describe_rx_queues(), "receive queue 0 polls");
    g.mem
        .write_obj(0u16, GuestAddress(g.rings[0].avail))
        .unwrap();
    send(&mut q);
    assert_eq!(faults.notifications.load(Ordering::Relaxed), 2);
    assert!(!q.tx.receiver_polls());
}

#[test]
fn with_event_idx_the_guest_is_notified_once_its_used_event_is_passed() {
    let (g, mut q, status) = guest_with("event-idx", VERSION_1 | EVENT_IDX);
    g.offer_rx_buffers(8);
    // used_event sits after the avail ring's entries: notify once entry 2 is used.
    let used_event = g.rings[0].avail + 4 + 2 * u64::from(QSIZE);
    g.mem.write_obj(2u16, GuestAddress(used_event)).unwrap();
    let mut notified = Vec::new();
    for n in 0..4 {
        q.tx.stage(&frame(n), &PacketMeta::default()).unwrap();
        assert_eq!(q.tx.flush(), 0);
        notified.push(status.notifications.load(Ordering::Relaxed));
    }
    assert_eq!(
        notified,
        vec![0, 0, 1, 1],
        "only the third frame passes the event"
    );
    // The driver did not move its event on after the third: it is busy taking
    // frames (NAPI polls), and batching would only delay them.
    assert!(q.tx.receiver_polls(), "a stale used event means polling");
    // It waits again: an event ahead of what it has seen.
    g.mem.write_obj(10u16, GuestAddress(used_event)).unwrap();
    q.tx.stage(&frame(5), &PacketMeta::default()).unwrap();
    assert_eq!(q.tx.flush(), 0);
    assert!(!q.tx.receiver_polls(), "waiting for an interrupt");
    assert_eq!(status.notifications.load(Ordering::Relaxed), 1);
}

#[test]
fn a_frame_in_an_indirect_table_is_taken_and_a_bad_table_counted() {
    let (g, mut q, status) = guest_with("indirect", VERSION_1 | INDIRECT_DESC);
    // The header and the frame in two descriptors of a table in guest memory.
    let table = BUFS_AT + 0x4_0000;
    let (hdr_at, frame_at) = (BUFS_AT + 0x5_0000, BUFS_AT + 0x6_0000);
    let f = frame(4);
    g.mem.write_slice(&[0u8; 12], GuestAddress(hdr_at)).unwrap();
    g.mem.write_slice(&f, GuestAddress(frame_at)).unwrap();
    for (i, d) in [
        Descriptor::new(hdr_at, 12, VRING_DESC_F_NEXT, 1),
        Descriptor::new(frame_at, f.len() as u32, 0, 0),
    ]
    .into_iter()
    .enumerate()
    {
        g.mem
            .write_obj(RawDescriptor::from(d), GuestAddress(table + 16 * i as u64))
            .unwrap();
    }
    g.offer(1, 0, table, 32, VRING_DESC_F_INDIRECT);
    // A table outside guest memory, then a good frame.
    g.offer(1, 1, 1 << 40, 32, VRING_DESC_F_INDIRECT);
    g.transmit(2, &[frame(5)]);
    assert_eq!(take(&mut q.rx[0], 2), vec![f, frame(5)]);
    assert_eq!(status.bad_chains.load(Ordering::Relaxed), 1);
}

#[test]
fn hostile_lengths_and_buffers_are_dropped_and_counted() {
    let (g, mut q, status) = guest("lengths");
    // A transmit descriptor claiming 4 GiB inside guest memory, then a good frame.
    g.offer(1, 0, BUFS_AT, u32::MAX, 0);
    g.transmit(1, &[frame(1)]);
    assert_eq!(take(&mut q.rx[0], 1), vec![frame(1)]);
    assert_eq!(status.bad_chains.load(Ordering::Relaxed), 1);
    // Receive buffers vsw may not write (no VRING_DESC_F_WRITE) or outside memory.
    g.offer(0, 0, BUFS_AT + 0x8_0000, 2048, 0);
    g.offer(0, 1, 1 << 40, 2048, VRING_DESC_F_WRITE);
    g.offer_rx_buffers_of(2..3, 2048);
    for n in 0..3 {
        q.tx.stage(&frame(n), &PacketMeta::default()).unwrap();
    }
    assert_eq!(q.tx.flush(), 2, "two frames met unusable buffers");
    assert_eq!(status.bad_chains.load(Ordering::Relaxed), 3);
    let used = g.used_buffers();
    assert_eq!(used.len(), 3, "every buffer went back to the guest");
    assert_eq!(
        (used[0].1.len(), used[1].1.len()),
        (0, 0),
        "the bad ones empty"
    );
    assert_eq!(&used[2].1[12..], &frame(2)[..]);
}

#[test]
fn a_client_port_connects_to_the_vm_and_again_after_it_restarts() {
    let path = temp("client.sock");
    let _ = std::fs::remove_file(&path);
    // The VM (its QEMU) owns the socket; vsw connects, and keeps trying.
    let (mut q, _faults) = vsw_netdev::vhost::open_client(&path).unwrap();
    for round in 0..2u8 {
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let (stream, _) = listener.accept().expect("vsw connects");
        let g = set_up(&format!("client{round}"), Frontend::from_stream(stream, 2));
        g.transmit(0, &[frame(round)]);
        assert_eq!(take(&mut q.rx[0], 1), vec![frame(round)], "round {round}");
        // The VM goes away (and its socket with it), then comes back.
        drop(g);
        drop(listener);
        let _ = std::fs::remove_file(&path);
    }
}

#[test]
fn a_looping_chain_is_dropped_and_counted() {
    let (g, mut q, faults) = guest("loop");
    // Descriptor 0 points on to itself.
    let addr = BUFS_AT;
    g.mem.write_slice(&[0u8; 40], GuestAddress(addr)).unwrap();
    g.offer(1, 0, addr, 40, 1);
    g.transmit(1, &[frame(5)]);
    assert_eq!(
        take(&mut q.rx[0], 1),
        vec![frame(5)],
        "the next frame still comes"
    );
    assert_eq!(faults.bad_chains.load(Ordering::Relaxed), 1);
}

#[test]
fn ring_addresses_before_any_memory_are_refused() {
    let path = temp("order.sock");
    let (_q, faults) = open_server(&path, 0o600, None).unwrap();
    let f = connect(&path);
    f.set_owner().unwrap();
    f.set_features(1 << 32).unwrap();
    // No memory table yet: the addresses cannot be guest addresses.
    let _ = f.set_vring_addr(
        0,
        &VringConfigData {
            queue_max_size: QSIZE,
            queue_size: QSIZE,
            flags: 0,
            desc_table_addr: 0x1000,
            used_ring_addr: 0x2000,
            avail_ring_addr: 0x3000,
            log_addr: None,
        },
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while faults.bad_queues.load(Ordering::Relaxed) == 0 {
        assert!(Instant::now() < deadline, "not counted");
        std::thread::sleep(Duration::from_millis(5));
    }
    // The port lives on: a new frontend can set up from scratch.
    drop(f);
    let g = set_up("order2", connect(&path));
    g.transmit(0, &[frame(3)]);
}
