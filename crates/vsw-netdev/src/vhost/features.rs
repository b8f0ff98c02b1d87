//! What vsw offers a guest and the limits it holds it to: virtio feature bits, header
//! lengths, and how much of a guest's rings one poll follows.

/// Queue pairs a guest may use: virtqueue 2k receives (vsw → guest), 2k + 1
/// transmits (guest → vsw). Every transmit queue is a receive queue of the port, which
/// the PMDs share out; each PMD writes into a receive queue of its own where the
/// guest enabled enough of them.
pub const MAX_QUEUE_PAIRS: usize = 4;
pub(super) const QUEUES: usize = 2 * MAX_QUEUE_PAIRS;
pub(super) const QUEUE_MAX: u16 = 1024;
/// The virtio-net header with VIRTIO_F_VERSION_1 or MRG_RXBUF: 10 bytes and
/// `num_buffers`. A legacy driver that has neither uses the 10 bytes alone.
pub(super) const HDR: usize = vsw_packet::vnet::VNET_HDR_MRG_LEN;
pub(super) const LEGACY_HDR: usize = vsw_packet::vnet::VNET_HDR_LEN;

/// The header length a driver with `features` uses.
pub(super) fn header_len(features: u64) -> usize {
    if features & (VIRTIO_F_VERSION_1 | VIRTIO_NET_F_MRG_RXBUF) != 0 {
        HDR
    } else {
        LEGACY_HDR
    }
}

/// The most descriptors vsw follows in one chain the guest sends: a 64 KiB frame in
/// 4 KiB pages takes 17, Linux never uses more than 19. A longer chain (an indirect
/// table may hold 65,535 descriptors, zero-length ones included) is dropped.
pub(super) const MAX_CHAIN_DESCRIPTORS: usize = 64;
/// The most descriptors one poll of a guest's transmit queue follows: whatever the
/// guest puts in its ring, a PMD gets back to its other queues soon.
pub(super) const POLL_DESCRIPTOR_BUDGET: usize = 1024;
/// The largest frame either way: a TCP super-frame of 64 KiB of IP with an Ethernet
/// header and a tag. Frames above the MTU that are not super-frames are refused.
pub(super) const MAX_FRAME: usize = 65535 + 18;
/// Ethernet header and one tag on top of the MTU.
pub(super) const L2_OVERHEAD: usize = 18;
/// The most receive buffers one frame may take with mergeable buffers, and the most
/// descriptors vsw writes one frame through.
pub(super) const MAX_BUFFERS: usize = 64;
pub(super) const MAX_SEGMENTS: usize = 256;
/// The guest may leave checksums to vsw (CSUM), takes frames whose checksum is left
/// to it (GUEST_CSUM), sends and takes TCP super-frames (HOST_/GUEST_TSO4/6), posts
/// receive buffers a frame may span (MRG_RXBUF) and learns its MTU (the value is in
/// the frontend's configuration space, e.g. QEMU's `host_mtu`).
pub(super) const VIRTIO_NET_F_CSUM: u64 = 1 << 0;
pub(super) const VIRTIO_NET_F_GUEST_CSUM: u64 = 1 << 1;
pub(super) const VIRTIO_NET_F_MTU: u64 = 1 << 3;
pub(super) const VIRTIO_NET_F_GUEST_TSO4: u64 = 1 << 7;
pub(super) const VIRTIO_NET_F_GUEST_TSO6: u64 = 1 << 8;
pub(super) const VIRTIO_NET_F_HOST_TSO4: u64 = 1 << 11;
pub(super) const VIRTIO_NET_F_HOST_TSO6: u64 = 1 << 12;
pub(super) const VIRTIO_NET_F_MRG_RXBUF: u64 = 1 << 15;
pub(super) const VIRTIO_F_VERSION_1: u64 = 1 << 32;
pub(super) const VIRTIO_RING_F_INDIRECT_DESC: u64 = 1 << 28;
pub(super) const VIRTIO_RING_F_EVENT_IDX: u64 = 1 << 29;
/// The device uses buffers in the order the driver made them available (vsw always
/// does): a driver that knows it can free and refill its rings without looking up
/// which buffer came back (DPDK's virtio driver then takes its in-order paths).
pub(super) const VIRTIO_F_IN_ORDER: u64 = 1 << 35;
/// Several queue pairs; the control queue that sets how many the driver uses is
/// the frontend's (QEMU and DPDK's virtio_user handle it themselves).
pub(super) const VIRTIO_NET_F_CTRL_VQ: u64 = 1 << 17;
pub(super) const VIRTIO_NET_F_MQ: u64 = 1 << 22;
/// What vsw offers a guest.
pub(super) const OFFERED: u64 = VIRTIO_F_VERSION_1
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
    | VIRTIO_F_IN_ORDER
    | VIRTIO_NET_F_CTRL_VQ
    | VIRTIO_NET_F_MQ
    | VHOST_USER_F_PROTOCOL_FEATURES;
pub(super) const VHOST_USER_F_PROTOCOL_FEATURES: u64 = 1 << 30;
pub(super) const VRING_AVAIL_F_NO_INTERRUPT: u16 = 1;
