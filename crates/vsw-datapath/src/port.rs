//! What the datapath needs from a device: receive queues that lend a batch of packets
//! and transmit queues that copy packets into their staging area and send in batches.

use arrayvec::ArrayVec;
use vsw_packet::{VlanTag, VnetHdr};

/// The most packets a PMD takes from one receive queue at a time.
pub const BATCH_SIZE: usize = 32;

/// What a device knows about a frame besides its bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PacketMeta {
    /// Checksum/segmentation offload state (virtio-net header).
    pub vnet: VnetHdr,
    /// A VLAN tag the device took out of the frame on receive.
    pub vlan: Option<VlanTag>,
    /// The tunnel a tunnel port received the frame through, or the one the rules
    /// send it into (for a tunnel port with `key=flow` or `remote_ip=flow`).
    pub tunnel: TunnelKey,
}

/// A tunnel's key as the rules see it (`tun_id`, `tun_src`, `tun_dst`): the VNI and
/// the outer IPv4 endpoints. All 0 for a packet of no tunnel; the endpoints are 0 for
/// a tunnel over IPv6 too (vsw matches no `tun_ipv6_src`/`_dst`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TunnelKey {
    pub id: u64,
    pub src: u32,
    pub dst: u32,
    /// `tun_metadata0`: the value of the Geneve option the TLV map names so (0:
    /// none).
    pub metadata0: u32,
    /// `tun_flags`: the OAM bit (`vsw_packet::key::TUN_FLAG_OAM`).
    pub flags: u16,
}

impl TunnelKey {
    /// What the rules see of the tunnel a decapsulated packet came through: its VNI
    /// and, over IPv4, its outer addresses (`metadata0`: the mapped Geneve option's
    /// value, 0 for none).
    pub fn of_decapsulated(m: &vsw_packet::tunnel::TunnelMeta, metadata0: u32) -> TunnelKey {
        let v4 = |a: std::net::IpAddr| match a {
            std::net::IpAddr::V4(a) => u32::from(a),
            std::net::IpAddr::V6(_) => 0,
        };
        TunnelKey {
            id: u64::from(m.id),
            src: v4(m.src),
            dst: v4(m.dst),
            metadata0,
            flags: if m.oam {
                vsw_packet::key::TUN_FLAG_OAM
            } else {
                0
            },
        }
    }

    /// Puts the tunnel's fields into a packet's flow key (extraction reads the frame
    /// alone, so it leaves them 0).
    #[inline]
    pub fn write_into(&self, key: &mut vsw_packet::FlowKey) {
        key.tun_id = self.id;
        key.tun_src = self.src;
        key.tun_dst = self.dst;
        key.tun_metadata0 = self.metadata0;
        key.tun_flags = self.flags;
    }
}

impl PacketMeta {
    /// The same packet's metadata with nothing left to the device: what each
    /// segment vsw cuts from a super-frame carries.
    pub fn without_offloads(&self) -> PacketMeta {
        PacketMeta {
            vnet: VnetHdr::default(),
            ..*self
        }
    }
}

/// A received packet, borrowed from the device (a ring slot, a guest buffer) until the
/// queue is released.
#[derive(Debug)]
pub struct RxPacket<'a> {
    pub data: &'a [u8],
    pub meta: PacketMeta,
}

pub type RxBatch<'a> = ArrayVec<RxPacket<'a>, BATCH_SIZE>;

/// Frames the device received but could not hand over.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RxDrops {
    /// Longer than the receive buffer; cut short by the device.
    pub truncated: u32,
}

pub trait RxQueue: Send {
    /// Fills `batch` (up to [`BATCH_SIZE`]) with packets borrowed from the device.
    /// They stay valid until [`RxQueue::release`].
    fn recv<'a>(&'a mut self, batch: &mut RxBatch<'a>) -> RxDrops;

    /// Gives the packets of the last `recv` back to the device.
    fn release(&mut self);

    /// Frames the kernel dropped because the queue was full, since the last call.
    /// Called about once a second, not per batch.
    fn take_overrun_drops(&mut self) -> u64 {
        0
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StageError {
    #[error("transmit queue full")]
    QueueFull,
    #[error("frame larger than the transmit buffer")]
    TooBig,
}

/// What a transmit queue's device can finish by itself, and how large a packet it
/// takes: what the egress stage decides by (egress.rs). The MTU is fixed for the
/// queue's life (a change opens new queues); the rest may grow while it is attached
/// (a guest negotiates, a tunnel tap is made), and is read again after each batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxOffloads {
    /// Takes frames whose checksum is left to it (virtio-net NEEDS_CSUM).
    pub csum: bool,
    /// Takes TCP super-frames (virtio-net GSO) and segments them itself.
    pub tso: bool,
    /// Takes UDP-tunnelled TCP super-frames (outer VXLAN or Geneve headers in front
    /// of an inner super-frame, as Linux's tunnel devices hand them over) whole —
    /// those with no outer UDP checksum (the only kind a tunnel tap takes).
    pub tunnel_tso: bool,
    /// A sender's TCP segments may be merged into super-frames for it (software
    /// GRO): its far side is a host's network stack (a veth's, a tap's, a guest's).
    /// Never for a port whose frames leave for another switch (a tunnel): what
    /// crosses the wire is what the sender sent, which any peer can take — a
    /// userspace Open vSwitch reading a veth cannot take a super-frame.
    pub merges: bool,
    /// The largest IP packet (the interface MTU).
    pub mtu: usize,
}

impl Default for TxOffloads {
    /// A plain Ethernet device: finishes nothing, 1500-byte MTU.
    fn default() -> Self {
        TxOffloads {
            csum: false,
            tso: false,
            merges: false,
            tunnel_tso: false,
            mtu: 1500,
        }
    }
}

pub trait TxQueue: Send {
    /// What the device finishes by itself; asked when a PMD takes the queue and
    /// after each batch it sends.
    fn offloads(&self) -> TxOffloads {
        TxOffloads::default()
    }

    /// The egress stage cut a UDP-tunnelled super-frame for this queue, whose
    /// offloads said it takes none whole. A queue that can learn to (an underlay
    /// port's tunnel tap, made on a thread of its own) starts to, and says so in
    /// [`TxQueue::offloads`] once it can.
    fn learn_tunnel_tso(&mut self) {}

    /// Whether the receiver on the far side may poll instead of waiting to be
    /// notified (a vhost-user guest). `tx-flush-interval=auto` batches only for a
    /// receiver that does not.
    fn receiver_may_poll(&self) -> bool {
        false
    }

    /// Whether the receiver polls right now (as last seen), so that batching would
    /// only add latency. Read once per PMD iteration; must be cheap.
    fn receiver_polls(&self) -> bool {
        false
    }

    /// Copies a packet into the device's transmit staging; it leaves with the next
    /// [`TxQueue::flush`]. This copy is the one copy a packet pays.
    fn stage(&mut self, data: &[u8], meta: &PacketMeta) -> Result<(), StageError>;

    /// Packets staged and not yet sent.
    fn pending(&self) -> usize;

    /// Sends everything staged with one kick. Returns how many packets the device
    /// refused (counted as transmit errors).
    fn flush(&mut self) -> usize;
}

/// Opens one more transmit queue on a device (for one more PMD).
pub type TxFactory = Box<dyn Fn() -> std::io::Result<Box<dyn TxQueue>> + Send + Sync>;

/// The queues of a port: its receive queues, each polled by one PMD, and a transmit
/// queue. Every PMD sends through a transmit queue of its own, so a device that can
/// open more gives a factory; without one, PMDs share the one queue under a lock.
pub struct PortQueues {
    pub rx: Vec<Box<dyn RxQueue>>,
    pub tx: Box<dyn TxQueue>,
    pub tx_factory: Option<TxFactory>,
}

impl PortQueues {
    /// One receive and one transmit queue, no more.
    pub fn single(rx: Box<dyn RxQueue>, tx: Box<dyn TxQueue>) -> PortQueues {
        PortQueues {
            rx: vec![rx],
            tx,
            tx_factory: None,
        }
    }
}
