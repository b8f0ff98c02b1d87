//! Decapsulation (`tnl_pop`): a frame to one of this host's tunnel UDP ports is
//! checked layer by layer and stripped; what the outer headers said becomes the
//! inner packet's tunnel metadata. Anything malformed is refused with its reason (a
//! counter per reason), never forwarded.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::TunnelKind;
use crate::checksum;
use crate::wire::ethernet::{EtherType, Frame, ETH_HDR_LEN};
use crate::wire::ip::IPPROTO_UDP;
use crate::wire::{geneve, ipv4, ipv6, udp, vxlan};

/// Which UDP destination ports this host's tunnel ports listen on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TunnelPorts {
    pub vxlan: Option<u16>,
    pub geneve: Option<u16>,
}

impl TunnelPorts {
    fn kind(&self, port: u16) -> Option<TunnelKind> {
        if self.vxlan == Some(port) {
            Some(TunnelKind::Vxlan)
        } else if self.geneve == Some(port) {
            Some(TunnelKind::Geneve)
        } else {
            None
        }
    }
}

/// What the outer headers said of a decapsulated packet (OpenFlow's `tun_*` fields).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TunnelMeta {
    pub kind: TunnelKind,
    /// The VNI.
    pub id: u32,
    pub src: IpAddr,
    pub dst: IpAddr,
    pub tos: u8,
    pub ttl: u8,
    /// The outer UDP checksum was present (and right).
    pub csum: bool,
    /// IPv4: the don't-fragment bit.
    pub df: bool,
    /// Geneve: the O bit (a control packet).
    pub oam: bool,
}

/// A decapsulated packet: its metadata, the Geneve options (whole TLVs, checked),
/// and the inner packet: an Ethernet frame, or (VXLAN-GPE) a packet of Ethernet
/// type `l3` without an Ethernet header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decapped<'a> {
    pub meta: TunnelMeta,
    pub options: &'a [u8],
    pub inner: &'a [u8],
    pub l3: Option<u16>,
}

/// Why a frame was not decapsulated. [`DecapError::NotTunnel`] is no error: the frame
/// is not for a tunnel port and goes on as any frame; the rest are drops.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecapError {
    #[error("not a tunnel packet")]
    NotTunnel,
    #[error("the outer {0} header is cut short or contradicts itself")]
    Truncated(&'static str),
    #[error("an outer IP fragment")]
    Fragment,
    #[error("the outer IPv4 header checksum is wrong")]
    BadIpChecksum,
    #[error("the outer UDP checksum is wrong")]
    BadUdpChecksum,
    #[error("VXLAN without its VNI flag")]
    VxlanNoVni,
    #[error("Geneve carrying something other than Ethernet")]
    GeneveNotEthernet,
    #[error("a critical Geneve option this switch does not know")]
    UnknownCriticalOption,
    #[error("the inner frame is shorter than an Ethernet header")]
    InnerTooShort,
    #[error("VXLAN-GPE OAM, or a next protocol other than Ethernet, IPv4, IPv6 and NSH")]
    GpeNotCarried,
}

/// The outer IP layer as read: addresses, what is after it, and the UDP datagram.
struct Outer<'a> {
    src: IpAddr,
    dst: IpAddr,
    tos: u8,
    ttl: u8,
    df: bool,
    /// The addresses' bytes as the UDP pseudo-header sums them.
    addresses: &'a [u8],
    datagram: &'a [u8],
}

fn outer_ip(frame: &[u8]) -> Result<Outer<'_>, DecapError> {
    let eth = Frame::new_checked(frame).map_err(|_| DecapError::NotTunnel)?;
    // An underlay VLAN tag is allowed (one).
    let tags = eth.tags(1).map_err(|_| DecapError::NotTunnel)?;
    let payload = &frame[tags.payload..];
    match tags.ethertype {
        EtherType::IPV4 => {
            let ip = ipv4::Packet::new_checked(payload).map_err(|_| DecapError::NotTunnel)?;
            if ip.protocol() != IPPROTO_UDP {
                return Err(DecapError::NotTunnel);
            }
            if ip.total_len() < ip.header_len() || ip.total_len() > payload.len() {
                return Err(DecapError::Truncated("IPv4"));
            }
            if !ip.checksum_right() {
                return Err(DecapError::BadIpChecksum);
            }
            if ip.is_fragment() {
                return Err(DecapError::Fragment);
            }
            Ok(Outer {
                src: IpAddr::V4(Ipv4Addr::from(ip.src_addr())),
                dst: IpAddr::V4(Ipv4Addr::from(ip.dst_addr())),
                tos: ip.tos(),
                ttl: ip.ttl(),
                df: ip.dont_fragment(),
                addresses: &payload[ipv4::field::SRC_ADDR.start..ipv4::field::DST_ADDR.end],
                datagram: &payload[ip.header_len()..ip.total_len()],
            })
        }
        EtherType::IPV6 => {
            let ip = ipv6::Packet::new_checked(payload).map_err(|_| DecapError::NotTunnel)?;
            let end = ipv6::HEADER_LEN + ip.payload_len();
            if end > payload.len() {
                return Err(DecapError::Truncated("IPv6"));
            }
            let up = ip
                .upper_layer(8)
                .map_err(|_| DecapError::Truncated("IPv6"))?;
            if up.fragment.is_some() {
                return Err(DecapError::Fragment);
            }
            if up.protocol != IPPROTO_UDP || up.offset > end {
                return Err(DecapError::NotTunnel);
            }
            Ok(Outer {
                src: IpAddr::V6(Ipv6Addr::from(ip.src_addr())),
                dst: IpAddr::V6(Ipv6Addr::from(ip.dst_addr())),
                tos: ip.traffic_class(),
                ttl: ip.hop_limit(),
                df: false,
                addresses: &payload[ipv6::field::SRC_ADDR.start..ipv6::field::DST_ADDR.end],
                datagram: &payload[up.offset..end],
            })
        }
        _ => Err(DecapError::NotTunnel),
    }
}

/// Decapsulates `frame` if it is a tunnel packet to one of `ports`. A critical Geneve
/// option is accepted only if `known(class, type)` says this switch knows it.
///
/// `csum_vouched`: the device vouches for the UDP checksum — its virtio-net header
/// says the checksum was checked (DATA_VALID) or is left to be finished
/// (NEEDS_CSUM: a frame from a local sender, the Linux vxlan device among them,
/// whose checksum field holds only the pseudo-header's sum). Otherwise a checksum
/// present is checked here.
// A hint for the PMD's pop (its hot caller), where not inlining it cost ~6 %.
#[inline]
pub fn decap<'a>(
    frame: &'a [u8],
    ports: &TunnelPorts,
    csum_vouched: bool,
    known: impl Fn(u16, u8) -> bool,
) -> Result<Decapped<'a>, DecapError> {
    let outer = outer_ip(frame)?;
    let u = udp::Packet::new_checked(outer.datagram).map_err(|_| DecapError::NotTunnel)?;
    let kind = ports.kind(u.dst_port()).ok_or(DecapError::NotTunnel)?;
    if u.len() < udp::HEADER_LEN || u.len() > outer.datagram.len() {
        return Err(DecapError::Truncated("UDP"));
    }
    let datagram = &outer.datagram[..u.len()];
    let csum = u.checksum() != 0;
    if csum && !csum_vouched {
        let pseudo = u64::from(IPPROTO_UDP) + datagram.len() as u64;
        let sum = checksum::sum(datagram, checksum::sum(outer.addresses, pseudo));
        if checksum::fold(sum) != 0xffff {
            return Err(DecapError::BadUdpChecksum);
        }
    }
    let tunnel = &datagram[udp::HEADER_LEN..];
    let meta = |id: u32, oam: bool| TunnelMeta {
        kind,
        id,
        src: outer.src,
        dst: outer.dst,
        tos: outer.tos,
        ttl: outer.ttl,
        csum,
        df: outer.df,
        oam,
    };
    let mut l3 = None;
    let (meta, options, inner) = match kind {
        TunnelKind::Vxlan => {
            let v =
                vxlan::Packet::new_checked(tunnel).map_err(|_| DecapError::Truncated("VXLAN"))?;
            if !v.vni_valid() {
                return Err(DecapError::VxlanNoVni);
            }
            // GPE, on the same port (as Open vSwitch pops it): which tunnel port
            // takes the packet depends on what it carries.
            if let Some(np) = v.gpe_next_protocol() {
                if v.gpe_oam() {
                    return Err(DecapError::GpeNotCarried);
                }
                if np != vxlan::NP_ETHERNET {
                    l3 = Some(vxlan::ethertype_of(np).ok_or(DecapError::GpeNotCarried)?);
                }
            }
            (meta(v.vni(), false), &[][..], &tunnel[vxlan::HEADER_LEN..])
        }
        TunnelKind::Geneve => {
            let g =
                geneve::Packet::new_checked(tunnel).map_err(|_| DecapError::Truncated("Geneve"))?;
            if g.protocol() != EtherType::TEB {
                return Err(DecapError::GeneveNotEthernet);
            }
            let header_len = g.header_len();
            let options = &tunnel[geneve::field::OPTIONS..header_len];
            for o in geneve::options(options) {
                let o = o.map_err(|_| DecapError::Truncated("Geneve option"))?;
                if o.is_critical() && !known(o.class, o.kind) {
                    return Err(DecapError::UnknownCriticalOption);
                }
            }
            (
                meta(g.vni(), g.is_control()),
                options,
                &tunnel[header_len..],
            )
        }
    };
    if inner.len() < if l3.is_some() { 1 } else { ETH_HDR_LEN } {
        return Err(DecapError::InnerTooShort);
    }
    Ok(Decapped {
        meta,
        options,
        inner,
        l3,
    })
}
