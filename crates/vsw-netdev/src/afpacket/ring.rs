//! TPACKET_V2 mmap rings.
//!
//! Why V2 for receive: a TPACKET_V3 block reaches user space only when it is full or
//! its retire timer (at least a millisecond) fires, so at low rates every packet
//! waits up to that long; V2 hands over each frame as soon as the kernel has written
//! it, which a busy-polling PMD sees within one iteration. docs/BENCHMARKS.md has the
//! measurements behind the choice.
//!
//! Ring frames are 2 KiB: many of them fit in little memory, so the ring rides out a
//! PMD that is briefly off its core. A TSO super-frame (up to 64 KiB) does not fit a
//! frame: on receive the kernel also queues it whole on the socket
//! (`PACKET_COPY_THRESH`, the ring slot says `TP_STATUS_COPY`) and the PMD reads it
//! from there; on transmit it is sent with its own `send` after the ring is kicked,
//! so order is kept. That send goes through a second, ring-less socket: on a socket
//! with a TX ring, the kernel ignores a send's buffer and only kicks the ring.

use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{mpsc, Arc};

use vsw_datapath::{
    PacketMeta, PortQueues, RxBatch, RxDrops, RxPacket, RxQueue, StageError, TxFactory, TxOffloads,
    TxQueue, BATCH_SIZE,
};
use vsw_packet::ethernet::copy_frame;
use vsw_packet::tunnel::udp_tunnel_super_frame;
use vsw_packet::vnet::VNET_HDR_LEN;
use vsw_packet::{VlanTag, VnetHdr};

use super::tunnel_gso::TunnelGsoTap;
use super::{attach, offload_socket, set_flag, syscall, transient, RingFrames, MAX_FRAME};
use crate::sys::{self, RingMap, TPACKET_V2};
use crate::NetdevError;

/// Where a V2 TX frame's payload (here: virtio-net header, then frame) starts:
/// TPACKET2_HDRLEN - sizeof(sockaddr_ll) = 32.
const TX_DATA_OFFSET: usize = 32;

/// A received frame starts at byte 76 of its slot (TPACKET_ALIGN(52 + 14) + 10 - 14,
/// with the virtio-net header before it), so a 2 KiB slot holds any 1500-byte-MTU
/// frame with room to spare.
const FRAME_SIZE: usize = 2048;
/// The largest slot: bigger frames (TSO super-frames, MTUs above ~16,000) take the
/// copy path.
const MAX_SLOT: usize = 16 << 10;
/// Room in a slot before and around the frame: the receive offset (76), a VLAN tag
/// put back, and slack.
const SLOT_OVERHEAD: usize = 76 + 4 + 48;
/// Blocks are allocated by the kernel as runs of pages; 128 KiB keeps each
/// allocation small enough to succeed on a fragmented host.
const BLOCK_SIZE: usize = 128 << 10;
/// The blocks of a ring of `frames` 2 KiB frames (`RingFrames`: by default 4096
/// receive frames, 8 MiB, 40 ms of 64-byte packets at 100 kpps; fewer, larger slots
/// for a larger MTU in the same memory).
fn blocks_for(frames: usize) -> usize {
    (frames * FRAME_SIZE).div_ceil(BLOCK_SIZE).max(1)
}

/// The ring slot for frames of an interface with this MTU: the smallest power of
/// two from 2 KiB that holds a whole frame, at most 16 KiB.
pub(super) fn slot_for_mtu(mtu: usize) -> usize {
    (mtu + vsw_packet::ethernet::ETH_HDR_LEN + SLOT_OVERHEAD)
        .next_power_of_two()
        .clamp(FRAME_SIZE, MAX_SLOT)
}
/// Socket buffer for super-frames waiting to be read, and for those sent directly.
const SOCKET_BUFFER: usize = 8 << 20;

#[derive(Clone, Copy)]
struct Geometry {
    /// Byte offset of this ring inside the shared mapping.
    start: usize,
    blocks: usize,
    /// Bytes per frame slot (a power of two, at most a block).
    slot: usize,
}

impl Geometry {
    fn frames_per_block(&self) -> usize {
        BLOCK_SIZE / self.slot
    }

    fn frames(&self) -> usize {
        self.blocks * self.frames_per_block()
    }

    fn bytes(&self) -> usize {
        self.blocks * BLOCK_SIZE
    }

    fn frame_offset(&self, i: usize) -> usize {
        let per = self.frames_per_block();
        self.start + (i / per) * BLOCK_SIZE + (i % per) * self.slot
    }

    fn request(&self) -> libc::tpacket_req {
        libc::tpacket_req {
            tp_block_size: BLOCK_SIZE as u32,
            tp_block_nr: self.blocks as u32,
            tp_frame_size: self.slot as u32,
            tp_frame_nr: self.frames() as u32,
        }
    }
}

/// The socket and its mapping. Field order matters: the mapping goes before the socket.
struct RingSocket {
    map: RingMap,
    fd: OwnedFd,
}

impl RingSocket {
    /// The status word of the frame at `offset`; the kernel and the PMD hand the frame
    /// to each other through it.
    fn status(&self, offset: usize) -> &AtomicU32 {
        // Every frame starts with its tpacket2_hdr, whose first field is the status.
        self.map.status(offset)
    }

    /// The tpacket2_hdr of a frame this side owns (status says so).
    fn header(&self, offset: usize) -> libc::tpacket2_hdr {
        // SAFETY: the caller owns the frame, so the kernel does not write the header
        // while it is read.
        unsafe { self.map.read(offset) }
    }
}

pub(super) fn open(
    fd: OwnedFd,
    ifname: &str,
    ifindex: u32,
    frames: RingFrames,
) -> Result<PortQueues, NetdevError> {
    // Making a ring waits in the kernel for an RCU grace period (packet_set_ring calls
    // synchronize_net), ~8 ms here whatever the ring's size: the transmit ring is made
    // on a socket of its own while the receive ring is made on this one, so opening a
    // port waits once rather than twice. The transmit socket receives nothing.
    let (rx, tx) = std::thread::scope(|s| {
        let tx = std::thread::Builder::new()
            .name("vsw-ring".into())
            .spawn_scoped(s, || open_tx_only(ifname, ifindex, frames.tx));
        let rx = open_rx(fd, ifname, ifindex, frames.rx);
        let tx = match tx {
            Ok(t) => t.join().unwrap_or_else(|_| {
                Err(NetdevError::Syscall {
                    op: "PACKET_TX_RING",
                    ifname: ifname.to_string(),
                    source: std::io::Error::other("the thread making the ring failed"),
                })
            }),
            // No thread to spare: made here, after the other.
            Err(_) => open_tx_only(ifname, ifindex, frames.tx),
        };
        (rx, tx)
    });
    let big = || vec![0u8; VNET_HDR_LEN + MAX_FRAME].into_boxed_slice();
    let (sock, geo) = rx?;
    Ok(PortQueues {
        rx: vec![Box::new(RingRx {
            sock,
            geo,
            head: 0,
            taken: 0,
            copies: (0..BATCH_SIZE).map(|_| big()).collect(),
        })],
        tx: tx?,
        tx_factory: Some(tx_factory(ifname, ifindex, frames.tx)),
    })
}

/// The receive side: the ring on `fd`, mapped, then the socket bound (it receives
/// from then on) and the interface taken promiscuous.
fn open_rx(
    fd: OwnedFd,
    ifname: &str,
    ifindex: u32,
    frames: usize,
) -> Result<(Arc<RingSocket>, Geometry), NetdevError> {
    setup_v2(&fd, ifname)?;
    set_flag(&fd, libc::PACKET_COPY_THRESH, "PACKET_COPY_THRESH", ifname)?;
    let rx = Geometry {
        start: 0,
        blocks: blocks_for(frames),
        slot: slot_for_mtu(super::port_mtu(ifname)),
    };
    sys::set_packet_opt(&fd, libc::PACKET_RX_RING, &rx.request())
        .map_err(syscall("PACKET_RX_RING", ifname))?;
    let map = RingMap::map(&fd, rx.bytes()).map_err(syscall("mmap", ifname))?;
    attach(&fd, ifname, ifindex)?;
    Ok((Arc::new(RingSocket { map, fd }), rx))
}

/// More transmit queues for a port, one per extra PMD: each a TX ring on a socket of
/// its own, so PMDs never share one.
pub(super) fn tx_factory(ifname: &str, ifindex: u32, frames: usize) -> TxFactory {
    let ifname = ifname.to_string();
    Box::new(move || open_tx_only(&ifname, ifindex, frames).map_err(std::io::Error::other))
}

/// What every TPACKET_V2 ring socket of a port sets before its rings exist.
fn setup_v2(fd: &OwnedFd, ifname: &str) -> Result<(), NetdevError> {
    sys::set_packet_opt(fd, libc::PACKET_VERSION, &TPACKET_V2)
        .map_err(syscall("PACKET_VERSION", ifname))?;
    // A frame the kernel cannot send is marked and skipped instead of stopping the ring.
    set_flag(fd, libc::PACKET_LOSS, "PACKET_LOSS", ifname)?;
    sys::set_socket_buffers(fd, SOCKET_BUFFER, SOCKET_BUFFER)
        .map_err(syscall("SO_RCVBUF/SO_SNDBUF", ifname))
}

/// A ring-less socket that only sends, for frames too large for a ring slot.
fn direct_socket(ifname: &str, ifindex: u32) -> Result<OwnedFd, NetdevError> {
    let direct = offload_socket(ifname)?;
    sys::set_socket_buffers(&direct, SOCKET_BUFFER, SOCKET_BUFFER)
        .map_err(syscall("SO_SNDBUF", ifname))?;
    sys::bind_to_interface(&direct, ifindex, false).map_err(syscall("bind", ifname))?;
    Ok(direct)
}

/// A transmit queue on a socket of its own that receives nothing: the TPACKET_V2 TX
/// ring for a port whose receive side is another socket (a TPACKET_V3 ring).
pub(super) fn open_tx_only(
    ifname: &str,
    ifindex: u32,
    frames: usize,
) -> Result<Box<dyn TxQueue>, NetdevError> {
    Ok(Box::new(open_ring_tx(ifname, ifindex, frames)?))
}

fn open_ring_tx(ifname: &str, ifindex: u32, frames: usize) -> Result<RingTx, NetdevError> {
    let fd = offload_socket(ifname)?;
    setup_v2(&fd, ifname)?;
    let geo = Geometry {
        start: 0,
        blocks: blocks_for(frames),
        slot: slot_for_mtu(super::port_mtu(ifname)),
    };
    sys::set_packet_opt(&fd, libc::PACKET_TX_RING, &geo.request())
        .map_err(syscall("PACKET_TX_RING", ifname))?;
    let map = RingMap::map(&fd, geo.bytes()).map_err(syscall("mmap", ifname))?;
    sys::bind_to_interface(&fd, ifindex, false).map_err(syscall("bind", ifname))?;
    let direct = direct_socket(ifname, ifindex)?;
    Ok(RingTx::new(
        Arc::new(RingSocket { map, fd }),
        geo,
        direct,
        super::port_mtu(ifname),
        ifindex,
    ))
}

struct RingRx {
    sock: Arc<RingSocket>,
    geo: Geometry,
    /// First frame not yet handed back to the kernel.
    head: usize,
    /// Frames from `head` on that the last `recv` took.
    taken: usize,
    /// Buffers for super-frames read from the socket queue, one per batch slot.
    copies: Vec<Box<[u8]>>,
}

impl RxQueue for RingRx {
    fn recv<'a>(&'a mut self, batch: &mut RxBatch<'a>) -> RxDrops {
        if self.taken > 0 {
            self.release();
        }
        let mut drops = RxDrops::default();
        let frames = self.geo.frames();
        let mut copies = self.copies.iter_mut();
        while batch.len() < BATCH_SIZE && self.taken < frames {
            let offset = self.geo.frame_offset((self.head + self.taken) % frames);
            let status = self.sock.status(offset).load(Ordering::Acquire);
            if status & libc::TP_STATUS_USER == 0 {
                break;
            }
            self.taken += 1;
            let h = self.sock.header(offset);
            let vlan = (status & libc::TP_STATUS_VLAN_VALID != 0).then_some(VlanTag {
                tpid: if status & libc::TP_STATUS_VLAN_TPID_VALID != 0 {
                    h.tp_vlan_tpid
                } else {
                    vsw_packet::EtherType::VLAN
                },
                tci: h.tp_vlan_tci,
            });
            let (mac, snap) = (usize::from(h.tp_mac), h.tp_snaplen as usize);
            if status & libc::TP_STATUS_COPY != 0 {
                // The whole frame waits on the socket queue, in ring order.
                let Some(buf) = copies.next() else {
                    // No buffer left in this batch: leave the slot for the next one.
                    self.taken -= 1;
                    break;
                };
                // The slot holds the frame's first bytes: enough to tell it from a
                // frame an earlier slot stood for.
                let seen = snap.min(COPY_MATCH_BYTES);
                let prefix: &[u8] = if mac + seen <= self.geo.slot {
                    // SAFETY: as for the frames below: this side owns the slot until
                    // release(), which cannot run while the slice lives.
                    unsafe { self.sock.map.bytes(offset + mac, seen) }
                } else {
                    &[]
                };
                match read_copied(&self.sock.fd, buf, h.tp_len as usize, prefix, vlan) {
                    Some(n) => {
                        let (hdr, data) = buf.split_at(VNET_HDR_LEN);
                        batch.push(RxPacket {
                            data: &data[..n - VNET_HDR_LEN],
                            meta: PacketMeta {
                                vnet: VnetHdr::read(hdr).unwrap_or_default(),
                                vlan,
                                tunnel: Default::default(),
                            },
                        });
                    }
                    None => drops.truncated += 1,
                }
                continue;
            }
            if snap < h.tp_len as usize || mac < VNET_HDR_LEN || mac + snap > self.geo.slot {
                drops.truncated += 1;
                continue;
            }
            // SAFETY: the frame belongs to this side until release() gives it back,
            // which needs `&mut self` and so cannot run while 'a borrows live; the
            // range lies inside the frame (checked above; the map checks it too).
            let (vnet_bytes, data) = unsafe {
                (
                    self.sock
                        .map
                        .bytes(offset + mac - VNET_HDR_LEN, VNET_HDR_LEN),
                    self.sock.map.bytes(offset + mac, snap),
                )
            };
            batch.push(RxPacket {
                data,
                meta: PacketMeta {
                    vnet: VnetHdr::read(vnet_bytes).unwrap_or_default(),
                    vlan,
                    tunnel: Default::default(),
                },
            });
        }
        drops
    }

    fn release(&mut self) {
        let frames = self.geo.frames();
        for k in 0..self.taken {
            let offset = self.geo.frame_offset((self.head + k) % frames);
            self.sock
                .status(offset)
                .store(libc::TP_STATUS_KERNEL, Ordering::Release);
        }
        self.head = (self.head + self.taken) % frames;
        self.taken = 0;
    }

    fn take_overrun_drops(&mut self) -> u64 {
        sys::packet_statistics(&self.sock.fd)
            .map(|(_, drops)| drops)
            .unwrap_or(0)
    }
}

/// How many of a frame's first bytes identify it on the copy path.
const COPY_MATCH_BYTES: usize = 64;
/// How many queued frames a copy-path read passes over (frames whose slots were
/// already given up) before it gives the slot up too.
const COPY_MAX_SKIPS: usize = 8;

/// Reads the frame a `TP_STATUS_COPY` slot stands for from the socket queue: `len`
/// bytes long, starting with `prefix`, carrying the VLAN tag `vlan` (the kernel took
/// both out of the same frame). Returns its length with the virtio-net header.
///
/// The queue and the ring hold the same frames in the same order, but a receive can
/// fail without taking a frame: after a link flap the socket reports ENETDOWN once,
/// and the frame stays queued. Each frame is therefore checked against its slot
/// (length, first bytes and tag, the tag read from the copy itself with
/// PACKET_AUXDATA); frames that belonged to slots given up earlier are passed over.
/// Without that, every later frame would be read one behind, with the next frame's
/// VLAN tag.
fn read_copied(
    fd: &OwnedFd,
    buf: &mut [u8],
    len: usize,
    prefix: &[u8],
    vlan: Option<VlanTag>,
) -> Option<usize> {
    for _ in 0..=COPY_MAX_SKIPS {
        match sys::recv_frame_aux(fd, buf) {
            Ok(Some((n, aux))) => {
                let whole = (VNET_HDR_LEN..=buf.len()).contains(&n);
                if whole
                    && n - VNET_HDR_LEN == len
                    && buf[VNET_HDR_LEN..].starts_with(prefix)
                    && aux.as_ref().and_then(super::aux_vlan) == vlan
                {
                    return Some(n);
                }
                tracing::debug!(n, len, "copy path: passed over a frame of an earlier slot");
            }
            // Not there (the kernel could not queue it): the slot is given up.
            Ok(None) => return None,
            // A pending socket error is reported once, by this receive; the frame
            // is still queued, so read again.
            Err(e) => tracing::debug!(error = %e, "copy path: receive failed"),
        }
    }
    None
}

struct RingTx {
    sock: Arc<RingSocket>,
    geo: Geometry,
    /// Next frame to fill.
    head: usize,
    /// The oldest frame handed to the kernel that it has not taken up yet (still
    /// `SEND_REQUEST`): where the kernel's own send position is. The kernel takes
    /// frames strictly in ring order and stops at the first it cannot send, so the
    /// `unsent` frames from here up to `head` are exactly the ones still waiting.
    unsent_at: usize,
    unsent: usize,
    /// Frames filled since the last kick.
    pending: usize,
    /// Super-frames the kernel would not take, since the last flush.
    rejected: usize,
    /// A ring-less socket on the same interface for frames too large for a slot.
    direct: OwnedFd,
    /// Where a super-frame is assembled for its own send.
    scratch: Box<[u8]>,
    /// The interface's MTU when the queue was opened.
    mtu: usize,
    ifindex: u32,
    /// Where UDP-tunnelled super-frames go whole.
    tunnel_gso: TunnelGso,
}

/// The way for UDP-tunnelled super-frames (`tunnel_gso.rs`): made the first time the
/// egress stage has one to cut for this port (most ports never carry one), once, by a
/// thread of its own — making it takes ~40 ms, which the PMD does not wait for: the
/// egress stage cuts such frames until the port's offloads say it takes them whole.
enum TunnelGso {
    Untried,
    Making(mpsc::Receiver<std::io::Result<TunnelGsoTap>>),
    Tap(TunnelGsoTap),
    /// Not on this kernel: such frames stay cut.
    Unavailable,
}

impl TunnelGso {
    /// Starts making the tap, the first time it is asked for.
    fn start(&mut self, ifindex: u32) {
        if !matches!(self, TunnelGso::Untried) {
            return;
        }
        let (done, made) = mpsc::channel();
        // The new thread is in the PMD's network namespace, as the port is.
        let spawned = std::thread::Builder::new()
            .name("vsw-tunnel-tap".into())
            .spawn(move || {
                let _ = done.send(TunnelGsoTap::open(ifindex));
            });
        *self = match spawned {
            Ok(_) => TunnelGso::Making(made),
            Err(_) => TunnelGso::Unavailable,
        };
    }

    /// Takes the tap once it is made (or learns that it cannot be).
    fn advance(&mut self, ifindex: u32) {
        let TunnelGso::Making(made) = self else {
            return;
        };
        match made.try_recv() {
            Ok(Ok(tap)) => *self = TunnelGso::Tap(tap),
            Ok(Err(e)) => {
                tracing::warn!(error = %e, ifindex,
                    "no tap for tunnel super-frames: they are cut in vsw");
                *self = TunnelGso::Unavailable;
            }
            Err(mpsc::TryRecvError::Empty) => {}
            Err(mpsc::TryRecvError::Disconnected) => *self = TunnelGso::Unavailable,
        }
    }

    fn tap(&self) -> Option<&TunnelGsoTap> {
        match self {
            TunnelGso::Tap(tap) => Some(tap),
            _ => None,
        }
    }
}

impl RingTx {
    fn new(
        sock: Arc<RingSocket>,
        geo: Geometry,
        direct: OwnedFd,
        mtu: usize,
        ifindex: u32,
    ) -> RingTx {
        RingTx {
            sock,
            geo,
            head: 0,
            unsent_at: 0,
            unsent: 0,
            pending: 0,
            rejected: 0,
            direct,
            scratch: vec![0u8; MAX_FRAME].into_boxed_slice(),
            mtu,
            ifindex,
            tunnel_gso: TunnelGso::Untried,
        }
    }

    /// Sends a UDP-tunnelled super-frame (`vnet` describing its inner segmentation,
    /// offsets as `data` goes out, tag included) whole through the port's tunnel tap.
    /// `None`: `data` is no such frame. The egress stage sends one only once
    /// `offloads` says the tap is there, and cuts any with an outer checksum.
    fn stage_tunnel_super_frame(
        &mut self,
        data: &[u8],
        meta: &PacketMeta,
        vnet: VnetHdr,
    ) -> Option<Result<(), StageError>> {
        // Taken out of `self` while the frame may live in it (a tag put back).
        let mut scratch = std::mem::take(&mut self.scratch);
        let result = self.tunnel_super_frame_in(&mut scratch, data, meta, vnet);
        self.scratch = scratch;
        result
    }

    fn tunnel_super_frame_in(
        &mut self,
        scratch: &mut [u8],
        data: &[u8],
        meta: &PacketMeta,
        vnet: VnetHdr,
    ) -> Option<Result<(), StageError>> {
        let frame = match meta.vlan {
            None => data,
            Some(_) => {
                let len = copy_frame(scratch, data, meta.vlan)?;
                &scratch[..len]
            }
        };
        let t = udp_tunnel_super_frame(frame, &vnet)?;
        if self.tunnel_gso.tap().is_none() {
            // A packet socket's header cannot say "UDP tunnel".
            return Some(Err(StageError::TooBig));
        }
        // After what the ring holds, so that a flow's packets keep their order.
        self.rejected += self.kick();
        let tap = self.tunnel_gso.tap().expect("checked above");
        if let Err(e) = tap.send(frame, &vnet, &t) {
            tracing::debug!(error = %e, "a tunnel super-frame was refused");
            self.rejected += 1;
        }
        Some(Ok(()))
    }

    /// Sends a frame too large for a ring slot by itself, after what the ring holds.
    fn send_direct(
        &mut self,
        data: &[u8],
        meta: &PacketMeta,
        vnet: VnetHdr,
    ) -> Result<(), StageError> {
        self.rejected += self.kick();
        let mut hdr = [0u8; VNET_HDR_LEN];
        vnet.write(&mut hdr);
        // Only a frame whose VLAN tag must be put back is assembled in the scratch buffer;
        // any other goes straight from where it was received.
        let frame = match meta.vlan {
            None => data,
            Some(_) => {
                let len =
                    copy_frame(&mut self.scratch, data, meta.vlan).ok_or(StageError::TooBig)?;
                &self.scratch[..len]
            }
        };
        match sys::send_frame(&self.direct, &hdr, frame) {
            Ok(()) => Ok(()),
            Err(e) if transient(&e) => Err(StageError::QueueFull),
            Err(e) => {
                tracing::debug!(error = %e, "sending a super-frame failed");
                self.rejected += 1;
                Ok(())
            }
        }
    }

    /// Moves `unsent_at` past the frames the kernel has taken up since the last look.
    fn note_taken(&mut self) {
        let frames = self.geo.frames();
        while self.unsent > 0 {
            let offset = self.geo.frame_offset(self.unsent_at);
            if self.sock.status(offset).load(Ordering::Acquire) == libc::TP_STATUS_SEND_REQUEST {
                break;
            }
            self.unsent_at = (self.unsent_at + 1) % frames;
            self.unsent -= 1;
        }
    }

    /// Tells the kernel to send the marked frames; returns how many it refused.
    ///
    /// Kicks whenever a frame still waits, not only after new ones were filled: frames
    /// a busy device left behind (EAGAIN, ENOBUFS) go with the next kick. A device
    /// that cannot send at all (down: ENETDOWN, gone: ENXIO) sends none of them, and
    /// they are taken back and counted, one drop per frame, so that the ring never
    /// fills with frames that wait for a link.
    fn kick(&mut self) -> usize {
        self.note_taken();
        self.pending = 0;
        if self.unsent == 0 {
            return 0;
        }
        match sys::kick_tx(&self.sock.fd) {
            Ok(()) => 0,
            Err(e) if transient(&e) => 0,
            Err(e) => {
                tracing::debug!(error = %e, frames = self.unsent, "TX ring kick failed; frames dropped");
                self.take_back_unsent()
            }
        }
    }

    /// Gives the frames the kernel did not take back to this side, unsent: the next
    /// frame filled is the first of them, which is where the kernel will look next.
    fn take_back_unsent(&mut self) -> usize {
        let frames = self.geo.frames();
        let n = self.unsent;
        for k in 0..n {
            let offset = self.geo.frame_offset((self.unsent_at + k) % frames);
            self.sock
                .status(offset)
                .store(libc::TP_STATUS_AVAILABLE, Ordering::Release);
        }
        self.head = self.unsent_at;
        self.unsent = 0;
        n
    }
}

impl TxQueue for RingTx {
    /// The kernel finishes checksums and segments super-frames (the virtio-net header
    /// goes with every frame); UDP-tunnelled ones too, once the port's tunnel tap is
    /// made.
    fn offloads(&self) -> TxOffloads {
        TxOffloads {
            tunnel_tso: self.tunnel_gso.tap().is_some(),
            ..crate::vnet_frame::kernel_offloads(self.mtu)
        }
    }

    fn learn_tunnel_tso(&mut self) {
        self.tunnel_gso.start(self.ifindex);
    }

    fn stage(&mut self, data: &[u8], meta: &PacketMeta) -> Result<(), StageError> {
        let tag_len = if meta.vlan.is_some() { 4 } else { 0 };
        if data.len() + tag_len > MAX_FRAME {
            return Err(StageError::TooBig);
        }
        let vnet = if tag_len > 0 {
            meta.vnet.shifted(4)
        } else {
            meta.vnet
        };
        // Told apart on the frame as it came (no tag put back yet), so that a plain
        // super-frame with a tag is not copied for nothing.
        if vnet.is_gso() && udp_tunnel_super_frame(data, &meta.vnet).is_some() {
            if let Some(sent) = self.stage_tunnel_super_frame(data, meta, vnet) {
                return sent;
            }
        }
        if data.len() + tag_len > self.geo.slot - TX_DATA_OFFSET - VNET_HDR_LEN {
            return self.send_direct(data, meta, vnet);
        }
        if self.unsent == self.geo.frames() {
            return Err(StageError::QueueFull);
        }
        let offset = self.geo.frame_offset(self.head);
        let status = self.sock.status(offset);
        // With PACKET_LOSS the kernel marks a frame it could not parse AVAILABLE again
        // (WRONG_FORMAT only without it); a frame still SENDING is in flight.
        match status.load(Ordering::Acquire) {
            libc::TP_STATUS_AVAILABLE | libc::TP_STATUS_WRONG_FORMAT => {}
            _ => return Err(StageError::QueueFull),
        }
        // SAFETY: the frame is AVAILABLE (or rejected), so the kernel does not touch it
        // until its status becomes SEND_REQUEST below, after the slice is gone.
        let out = unsafe {
            self.sock
                .map
                .bytes_mut(offset + TX_DATA_OFFSET, self.geo.slot - TX_DATA_OFFSET)
        };
        let (vnet_out, frame_out) = out.split_at_mut(VNET_HDR_LEN);
        let len = copy_frame(frame_out, data, meta.vlan).ok_or(StageError::TooBig)?;
        let mut vnet = vnet;
        if !vnet.is_gso() {
            // hdr_len tells the kernel how much to copy into the socket buffer's own
            // memory; the rest it would leave in the ring page, which a veth must then
            // copy into a freshly allocated page for every packet. Copying a whole
            // small frame is far cheaper.
            vnet.hdr_len = len as u16;
        }
        vnet.write(vnet_out.try_into().expect("split at header length"));
        // SAFETY: tp_len is the u32 at byte 4 of the frame's header, which this side
        // owns; the frame's slice above is gone.
        unsafe {
            self.sock
                .map
                .write_u32(offset + 4, (VNET_HDR_LEN + len) as u32)
        };
        status.store(libc::TP_STATUS_SEND_REQUEST, Ordering::Release);
        self.head = (self.head + 1) % self.geo.frames();
        self.pending += 1;
        self.unsent += 1;
        Ok(())
    }

    fn pending(&self) -> usize {
        self.pending
    }

    fn flush(&mut self) -> usize {
        let refused = self.kick();
        // The PMD reads the offloads again after this batch.
        self.tunnel_gso.advance(self.ifindex);
        refused + std::mem::take(&mut self.rejected)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A UDP-tunnelled TCP super-frame (20,000 bytes of inner TCP in segments of
    /// 1,398, VXLAN over IPv4 without an outer checksum) and its virtio-net header.
    fn tunnel_super_frame() -> (Vec<u8>, VnetHdr) {
        use std::net::{IpAddr, Ipv4Addr};
        use vsw_packet::tunnel::{EncapSpec, TunnelKind};
        let spec = EncapSpec {
            kind: TunnelKind::Vxlan,
            eth_src: vsw_packet::MacAddr([2, 0, 0, 0, 0, 1]),
            eth_dst: vsw_packet::MacAddr([2, 0, 0, 0, 0, 2]),
            src: IpAddr::V4(Ipv4Addr::new(198, 18, 83, 1)),
            dst: IpAddr::V4(Ipv4Addr::new(198, 18, 83, 2)),
            tos: 0,
            ttl: 64,
            df: true,
            udp_dst: 4789,
            udp_csum: false,
            vni: 42,
            geneve_options: Vec::new(),
            gpe: None,
        };
        vsw_packet::builder::tunnelled_tcp_super_frame(&spec, &[7u8; 20_000], 1398)
    }

    /// A ring port takes no tunnel super-frame (the egress stage cuts them) until it
    /// is asked to learn to; then, once its tunnel tap is made, its offloads say so
    /// and such a frame reaches the veth's peer whole. Root: a namespace of its own,
    /// the test's thread in it.
    #[test]
    fn tunnel_super_frames_leave_whole_once_the_port_learned_to_take_them() {
        use std::process::Command;
        use std::time::{Duration, Instant};
        let ns = format!("vswtg{}", std::process::id() % 100_000);
        let ip = |args: &[&str]| {
            Command::new("ip")
                .args(args)
                .status()
                .is_ok_and(|s| s.success())
        };
        assert!(ip(&["netns", "add", &ns]), "this test needs root");
        let result = std::panic::catch_unwind(|| {
            // No IPv6 of the kernel's own (router solicitations) in the counts.
            let quiet = Command::new("ip")
                .args(["netns", "exec", &ns, "sysctl", "-q", "-w"])
                .args([
                    "net.ipv6.conf.all.disable_ipv6=1",
                    "net.ipv6.conf.default.disable_ipv6=1",
                ])
                .status();
            assert!(quiet.is_ok_and(|s| s.success()));
            assert!(ip(&[
                "-n", &ns, "link", "add", "ua", "type", "veth", "peer", "name", "ub"
            ]));
            assert!(ip(&["-n", &ns, "link", "set", "ua", "up"]));
            assert!(ip(&["-n", &ns, "link", "set", "ub", "up"]));
            let ns_path = std::path::PathBuf::from(format!("/run/netns/{ns}"));
            std::thread::spawn(move || {
                crate::sys::enter_netns(&ns_path).unwrap();
                // Through `ip`, which asks this thread's namespace over netlink (/sys
                // is the mount's: the test's own namespace).
                let received = || {
                    let out = Command::new("ip")
                        .args(["-s", "-o", "link", "show", "dev", "ub"])
                        .output()
                        .unwrap();
                    let text = String::from_utf8_lossy(&out.stdout).into_owned();
                    // "… RX: bytes packets … \\    BYTES PACKETS …" on one line.
                    let after = text.split("RX:").nth(1).unwrap_or_default().to_string();
                    let nums: Vec<u64> = after
                        .split(|c: char| c.is_whitespace() || c == '\\')
                        .filter_map(|w| w.parse().ok())
                        .collect();
                    (nums[1], nums[0])
                };
                let (frame, vnet) = tunnel_super_frame();
                let meta = PacketMeta {
                    vnet,
                    ..PacketMeta::default()
                };
                let ifindex = crate::sys::if_index("ua").unwrap();
                let mut tx = open_ring_tx("ua", ifindex, 64).unwrap();
                // Sends the frame; what the peer received of it.
                let send = |tx: &mut RingTx| {
                    let before = received();
                    tx.stage(&frame, &meta).unwrap();
                    assert_eq!(tx.flush(), 0);
                    let deadline = Instant::now() + Duration::from_secs(5);
                    loop {
                        let now = received();
                        let got = (now.0 - before.0, now.1 - before.1);
                        // All of it: the outer headers once, or once per packet.
                        if got.1 >= frame.len() as u64 || Instant::now() > deadline {
                            break got;
                        }
                        std::thread::yield_now();
                    }
                };
                // Before: refused, and nothing is made until asked.
                assert!(!tx.offloads().tunnel_tso);
                assert_eq!(tx.stage(&frame, &meta), Err(StageError::TooBig));
                assert_eq!(tx.flush(), 0);
                assert!(matches!(tx.tunnel_gso, TunnelGso::Untried));
                tx.learn_tunnel_tso();
                let deadline = Instant::now() + Duration::from_secs(5);
                while !tx.offloads().tunnel_tso {
                    assert!(Instant::now() < deadline, "the tap was not made");
                    std::thread::sleep(Duration::from_millis(5));
                    // Where the PMD would look: after a batch.
                    tx.flush();
                }
                assert_eq!(send(&mut tx), (1, frame.len() as u64), "whole");
            })
            .join()
            .unwrap();
        });
        ip(&["netns", "del", &ns]);
        if let Err(e) = result {
            std::panic::resume_unwind(e);
        }
    }

    #[test]
    fn slots_follow_the_mtu() {
        assert_eq!(slot_for_mtu(1500), 2048);
        assert_eq!(slot_for_mtu(1900), 2048);
        assert_eq!(slot_for_mtu(3900), 4096);
        assert_eq!(slot_for_mtu(4000), 8192);
        assert_eq!(slot_for_mtu(9000), 16 << 10);
        assert_eq!(
            slot_for_mtu(65_535),
            16 << 10,
            "super-frames take the copy path"
        );
        for mtu in [68, 1500, 9000] {
            let g = Geometry {
                start: 0,
                blocks: blocks_for(RingFrames::default().rx),
                slot: slot_for_mtu(mtu),
            };
            assert_eq!(
                g.bytes(),
                8 << 20,
                "the ring's memory does not grow with the MTU"
            );
            assert_eq!(g.frame_offset(g.frames() - 1) + g.slot, g.bytes());
        }
        // A ring's size in frames of 2 KiB: whole blocks of 128 KiB.
        assert_eq!(blocks_for(64), 1);
        assert_eq!(blocks_for(512), 8);
        assert_eq!(blocks_for(2048), 32);
    }

    #[test]
    fn ring_sizes_are_powers_of_two_in_range() {
        assert_eq!(RingFrames::parse("512"), Ok(512));
        assert_eq!(RingFrames::parse("64"), Ok(64));
        for bad in ["0", "32", "100", "131072", "-64", "many"] {
            assert!(RingFrames::parse(bad).is_err(), "{bad}");
        }
    }
}
