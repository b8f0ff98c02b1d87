//! UDP-tunnelled TCP super-frames: what a Linux vxlan or geneve device hands a veth
//! (or a packet socket) when its peer takes UDP-tunnel segmentation — one outer
//! Ethernet/IP/UDP/VXLAN-or-Geneve header in front of a 64 KiB inner TCP super-frame,
//! the virtio-net header describing the inner segmentation (segment size, and the
//! checksum to finish at the inner TCP header). Recognised here, and cut into
//! complete outer frames for an output that cannot take one whole.

use crate::gso::{segment_size_at, segment_tcp_at, GsoError};
use crate::vnet::{VnetHdr, VNET_F_NEEDS_CSUM};
use crate::wire::ethernet::{self, EtherType};
use crate::wire::ip::IPPROTO_UDP;
use crate::wire::{geneve, ipv4, ipv6, udp, vxlan};

use super::encap::udp_checksum;

/// Geneve's protocol for an inner Ethernet frame ("transparent Ethernet bridging").
const TRANSPARENT_ETHERNET: u16 = 0x6558;

/// Where the outer headers of a UDP-tunnelled frame are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TunnelSuperFrame {
    /// The outer IP header.
    pub l3: usize,
    pub ipv6: bool,
    /// The outer UDP header.
    pub l4: usize,
    /// The inner Ethernet frame.
    pub inner: usize,
}

/// `Some` when `frame` is a UDP-tunnelled super-frame: `vnet` asks for segmentation,
/// the outer packet is UDP carrying a VXLAN or Geneve header, and the checksum the
/// sender left lies in the inner frame. `None` for a super-frame of any other kind
/// (a plain TCP one, which the ordinary segmentation cuts).
pub fn udp_tunnel_super_frame(frame: &[u8], vnet: &VnetHdr) -> Option<TunnelSuperFrame> {
    if !vnet.is_gso() {
        return None;
    }
    let (ethertype, l3) = ethernet::l3(frame)?;
    let (ipv6, l4) = match ethertype {
        EtherType::IPV4 => {
            let ip = ipv4::Packet::new_checked(frame.get(l3..)?).ok()?;
            (
                false,
                (ip.protocol() == IPPROTO_UDP).then(|| l3 + ip.header_len())?,
            )
        }
        EtherType::IPV6 => {
            let ip = ipv6::Packet::new_checked(frame.get(l3..)?).ok()?;
            (
                true,
                (ip.next_header() == IPPROTO_UDP).then_some(l3 + ipv6::HEADER_LEN)?,
            )
        }
        _ => return None,
    };
    let tunnel_at = l4 + udp::HEADER_LEN;
    let tunnel = frame.get(tunnel_at..)?;
    // Told apart by their fixed bits: Geneve says what it carries, VXLAN has its
    // "VNI valid" flag and nothing else.
    let tunnel_len = match geneve::Packet::new_checked(tunnel) {
        Ok(g) if g.protocol() == TRANSPARENT_ETHERNET => g.header_len(),
        _ => {
            let v = vxlan::Packet::new_checked(tunnel).ok()?;
            v.vni_valid().then_some(vxlan::HEADER_LEN)?
        }
    };
    let inner = tunnel_at + tunnel_len;
    let (inner_type, _) = ethernet::l3(frame.get(inner..)?)?;
    let left_at = usize::from(vnet.csum_start);
    let left_inside = vnet.flags & VNET_F_NEEDS_CSUM != 0
        && left_at > inner
        && left_at + usize::from(vnet.csum_offset) + 2 <= frame.len();
    (matches!(inner_type, EtherType::IPV4 | EtherType::IPV6) && left_inside).then_some(
        TunnelSuperFrame {
            l3,
            ipv6,
            l4,
            inner,
        },
    )
}

/// The inner segment size for `t` on an output whose MTU is `mtu`: the sender's, or
/// smaller when the outer packets would not fit.
pub fn tunnel_segment_size(
    frame: &[u8],
    t: &TunnelSuperFrame,
    vnet: &VnetHdr,
    mtu: usize,
) -> Result<usize, GsoError> {
    segment_size_at(frame, t.inner, vnet, mtu)
}

/// Cuts the UDP-tunnelled super-frame `frame` into outer frames whose inner TCP
/// segments carry at most `mss` bytes, each built in `buf` and handed to `emit`
/// complete: inner as [`crate::gso::segment_tcp`] makes them; outer IP length,
/// IPv4 identification (+1 per segment) and header checksum; UDP length, and the
/// UDP checksum where the sender had one. Returns the number of segments.
pub fn segment_udp_tunnel(
    frame: &[u8],
    t: &TunnelSuperFrame,
    mss: usize,
    buf: &mut [u8],
    mut emit: impl FnMut(&[u8]),
) -> Result<usize, GsoError> {
    let outer_id = if t.ipv6 {
        0
    } else {
        ipv4::Packet::new_checked(&frame[t.l3..])
            .map_err(|_| GsoError::Malformed)?
            .ident()
    };
    let udp0 = udp::Packet::new_checked(&frame[t.l4..]).map_err(|_| GsoError::Malformed)?;
    // IPv6 forbids a zero UDP checksum; over IPv4 zero means the sender had none.
    let with_udp_csum = t.ipv6 || udp0.checksum() != 0;
    segment_tcp_at(frame, t.inner, mss, buf, |seg, i| {
        let len = seg.len();
        if t.ipv6 {
            if let Ok(mut ip) = ipv6::Packet::new_checked(&mut seg[t.l3..]) {
                ip.set_payload_len((len - t.l3 - ipv6::HEADER_LEN) as u16);
            }
        } else if let Ok(mut ip) = ipv4::Packet::new_checked(&mut seg[t.l3..]) {
            ip.set_total_len((len - t.l3) as u16);
            ip.set_ident(outer_id.wrapping_add(i as u16));
            ip.fill_checksum();
        }
        if let Ok(mut u) = udp::Packet::new_checked(&mut seg[t.l4..]) {
            u.set_len((len - t.l4) as u16);
            u.set_checksum(0);
        }
        if with_udp_csum {
            let (head, datagram) = seg.split_at_mut(t.l4);
            let c = udp_checksum(&head[t.l3..], datagram, t.ipv6);
            datagram[udp::field::CHECKSUM].copy_from_slice(&c.to_be_bytes());
        }
        emit(seg);
    })
}
