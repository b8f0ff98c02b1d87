//! vhost-user ports against a frontend written here (tests/common): the test plays
//! the VM and drives vsw's backend through the real protocol.

mod common;

use std::fs::OpenOptions;
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use common::*;
use vhost::vhost_user::Frontend;
use vhost::{VhostBackend, VhostUserMemoryRegionInfo, VringConfigData};
use virtio_queue::desc::{split::Descriptor, RawDescriptor};
use vm_memory::{Bytes, FileOffset, GuestAddress, GuestMemory, GuestMemoryMmap};
use vmm_sys_util::eventfd::EventFd;
use vsw_datapath::{PacketMeta, PortQueues, RxBatch};
use vsw_netdev::vhost::{open_server, RxMode};

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

#[test]
fn a_legacy_driver_gets_and_gives_ten_byte_headers() {
    // Neither VIRTIO_F_VERSION_1 nor MRG_RXBUF: the header has no num_buffers.
    let (g, mut q, _) = guest_with("legacy", 0);
    g.transmit_after(0, &[0u8; 10], &[frame(1), frame(2)]);
    assert_eq!(take(&mut q.rx[0], 2), vec![frame(1), frame(2)]);
    g.offer_rx_buffers(2);
    q.tx.stage(&frame(3), &PacketMeta::default()).unwrap();
    assert_eq!(q.tx.flush(), 0);
    let rx = g.received();
    assert_eq!(rx.len(), 1);
    assert_eq!(&rx[0][..10], &[0u8; 10], "a 10-byte header");
    assert_eq!(&rx[0][10..], &frame(3)[..], "the frame right after it");
}

#[test]
fn a_call_descriptor_that_is_not_an_eventfd_is_refused() {
    use std::os::fd::FromRawFd;
    let (g, mut q, status) = guest("pipe-call");
    let before = status.bad_queues.load(Ordering::Relaxed);
    // A pipe whose buffer is full: a blocking write to it would never return.
    let mut fds = [0i32; 2];
    // SAFETY: pipe(2) fills the two descriptors.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: fds[1] is a fresh descriptor owned by nobody else; the EventFd type is
    // only how the frontend crate takes a descriptor to send.
    let pipe = unsafe { EventFd::from_raw_fd(fds[1]) };
    let _ = g.frontend.set_vring_call(0, &pipe);
    let deadline = Instant::now() + Duration::from_secs(5);
    while status.bad_queues.load(Ordering::Relaxed) == before {
        assert!(Instant::now() < deadline, "the pipe was taken");
        std::thread::sleep(Duration::from_millis(5));
    }
    // The queue keeps its eventfd and works on.
    g.offer_rx_buffers(2);
    q.tx.stage(&frame(1), &PacketMeta::default()).unwrap();
    assert_eq!(q.tx.flush(), 0);
    assert_eq!(g.received().len(), 1);
    // SAFETY: closing the pipe's read end, which nothing else uses.
    unsafe { libc::close(fds[0]) };
}

#[test]
fn an_eventfd_that_cannot_take_more_does_not_block_the_sender() {
    let (g, mut q, status) = guest("full-eventfd");
    // The eventfd's counter one short of its maximum: a blocking write of 1 waits
    // until the guest reads it, which this guest never does.
    g.call[0].write(u64::MAX - 1).unwrap();
    g.offer_rx_buffers(4);
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = done.clone();
    let sender = std::thread::spawn(move || {
        q.tx.stage(&frame(1), &PacketMeta::default()).unwrap();
        let refused = q.tx.flush();
        flag.store(true, Ordering::Release);
        refused
    });
    let deadline = Instant::now() + Duration::from_secs(5);
    while !done.load(Ordering::Acquire) {
        assert!(
            Instant::now() < deadline,
            "the sender is stuck writing the guest's eventfd"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(sender.join().unwrap(), 0);
    assert_eq!(g.received().len(), 1);
    let _ = status;
}

#[test]
fn a_frontend_that_shrinks_shared_memory_does_not_end_the_process() {
    let (g, mut q, status) = guest("truncate");
    g.transmit(0, &[frame(1)]);
    assert_eq!(take(&mut q.rx[0], 1), vec![frame(1)]);
    // The frontend takes its memory away under vsw. (From here the test, which plays
    // the guest, no longer touches that memory itself: its own mapping would fault.)
    g.file.set_len(0).unwrap();
    q.tx.stage(&frame(2), &PacketMeta::default()).unwrap();
    let _ = q.tx.flush();
    let mut batch = RxBatch::new();
    q.rx[0].recv(&mut batch);
    assert!(batch.is_empty(), "nothing comes from memory that is gone");
    drop(batch);
    q.rx[0].release();
    assert!(status.memory_faults() >= 1, "the fault is counted");
    // The guest's own mapping goes with it, untouched.
    drop(g);
}

#[test]
fn a_new_memory_table_on_a_running_connection_keeps_the_port_working() {
    let (g, mut q, _) = guest("hotplug");
    g.transmit(0, &[frame(1)]);
    assert_eq!(take(&mut q.rx[0], 1), vec![frame(1)]);
    // Memory hot-plug: the frontend sends the table again with one more region.
    let extra = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(temp("hotplug-extra.mem"))
        .unwrap();
    extra.set_len(1 << 20).unwrap();
    let _ = std::fs::remove_file(temp("hotplug-extra.mem"));
    let extra_map = GuestMemoryMmap::<()>::from_ranges_with_files([(
        GuestAddress(MEM as u64),
        1 << 20,
        Some(FileOffset::new(extra.try_clone().unwrap(), 0)),
    )])
    .unwrap();
    let host = g.mem.get_host_address(GuestAddress(0)).unwrap() as u64;
    let extra_host = extra_map
        .get_host_address(GuestAddress(MEM as u64))
        .unwrap() as u64;
    g.frontend
        .set_mem_table(&[
            VhostUserMemoryRegionInfo {
                guest_phys_addr: 0,
                memory_size: MEM as u64,
                userspace_addr: host,
                mmap_offset: 0,
                mmap_handle: g.file.as_raw_fd(),
            },
            VhostUserMemoryRegionInfo {
                guest_phys_addr: MEM as u64,
                memory_size: 1 << 20,
                userspace_addr: extra_host,
                mmap_offset: 0,
                mmap_handle: extra.as_raw_fd(),
            },
        ])
        .unwrap();
    // Handled in order: once this is answered, the new table is in place.
    g.frontend.get_features().unwrap();
    // Both directions go on, with nothing else said.
    g.transmit(1, &[frame(2), frame(3)]);
    assert_eq!(take(&mut q.rx[0], 2), vec![frame(2), frame(3)]);
    g.offer_rx_buffers(2);
    q.tx.stage(&frame(4), &PacketMeta::default()).unwrap();
    assert_eq!(q.tx.flush(), 0);
    assert_eq!(g.received().len(), 1);
}
