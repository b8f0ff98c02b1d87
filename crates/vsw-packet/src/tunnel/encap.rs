//! Encapsulation (`tnl_push`): the outer headers of a tunnel port toward one
//! neighbour are built once, as a template; per packet the template is copied in
//! front of the inner frame and only what differs per packet is written — the
//! lengths, the UDP source port (from the inner flow's hash, so the underlay spreads
//! flows across paths as it would spread the flows themselves), the IPv4
//! identification and the checksums.

use std::net::IpAddr;

use super::{TunnelKind, UDP_SOURCE_PORTS};
use crate::checksum;
use crate::mac::MacAddr;
use crate::wire::ethernet::{field as eth, EtherType, ETH_HDR_LEN};
use crate::wire::ip::IPPROTO_UDP;
use crate::wire::{geneve, ipv4, ipv6, udp, vxlan};

/// What a tunnel port's outer headers say.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EncapSpec {
    pub kind: TunnelKind,
    /// The underlay: this host's port's MAC, and the next hop's.
    pub eth_src: MacAddr,
    pub eth_dst: MacAddr,
    /// Outer addresses (both IPv4 or both IPv6).
    pub src: IpAddr,
    pub dst: IpAddr,
    pub tos: u8,
    pub ttl: u8,
    /// IPv4: the don't-fragment bit.
    pub df: bool,
    pub udp_dst: u16,
    /// Whether the UDP checksum is computed over IPv4 (otherwise zero: "none"); over
    /// IPv6 it always is.
    pub udp_csum: bool,
    /// The VNI (24 bits).
    pub vni: u32,
    /// Geneve option TLVs, whole (a multiple of 4 bytes); none for VXLAN.
    pub geneve_options: Vec<u8>,
    /// VXLAN-GPE: the next protocol (`None`: plain VXLAN). Any but Ethernet's
    /// carries the inner packet without its Ethernet header (and tags), which the
    /// push takes off.
    pub gpe: Option<u8>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EncapError {
    #[error("the outer addresses are not of one family")]
    MixedFamilies,
    #[error(
        "Geneve options must be whole TLVs of at most {} bytes",
        geneve::MAX_OPTIONS_LEN
    )]
    BadGeneveOptions,
    #[error("VXLAN carries no options")]
    VxlanOptions,
    #[error("only VXLAN has the GPE extension")]
    GpeNotVxlan,
}

/// A tunnel port's outer headers toward one neighbour, ready to be put in front of
/// frames.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct EncapTemplate {
    header: Vec<u8>,
    ipv6: bool,
    udp_csum: bool,
    df: bool,
    /// The IPv4 header checksum with the total length and identification at zero.
    ip_csum_base: u16,
    /// The inner frame's Ethernet header and tags come off before the push.
    strips_ethernet: bool,
}

impl EncapTemplate {
    pub fn new(spec: &EncapSpec) -> Result<EncapTemplate, EncapError> {
        let tunnel_len = match spec.kind {
            TunnelKind::Geneve if spec.gpe.is_some() => return Err(EncapError::GpeNotVxlan),
            TunnelKind::Vxlan if !spec.geneve_options.is_empty() => {
                return Err(EncapError::VxlanOptions)
            }
            TunnelKind::Vxlan => vxlan::HEADER_LEN,
            TunnelKind::Geneve => {
                let o = &spec.geneve_options;
                if !o.len().is_multiple_of(4)
                    || o.len() > geneve::MAX_OPTIONS_LEN
                    || geneve::options(o).any(|r| r.is_err())
                {
                    return Err(EncapError::BadGeneveOptions);
                }
                geneve::MIN_HEADER_LEN + o.len()
            }
        };
        let (ipv6, ip_len) = match (spec.src, spec.dst) {
            (IpAddr::V4(_), IpAddr::V4(_)) => (false, ipv4::MIN_HEADER_LEN),
            (IpAddr::V6(_), IpAddr::V6(_)) => (true, ipv6::HEADER_LEN),
            _ => return Err(EncapError::MixedFamilies),
        };
        let mut h = vec![0u8; ETH_HDR_LEN + ip_len + udp::HEADER_LEN + tunnel_len];
        h[eth::DESTINATION].copy_from_slice(&spec.eth_dst.0);
        h[eth::SOURCE].copy_from_slice(&spec.eth_src.0);
        let ethertype = if ipv6 {
            EtherType::IPV6
        } else {
            EtherType::IPV4
        };
        h[eth::ETHERTYPE].copy_from_slice(&ethertype.to_be_bytes());
        let mut ip_csum_base = 0;
        match (spec.src, spec.dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                ipv4::Repr {
                    header_len: ipv4::MIN_HEADER_LEN,
                    tos: spec.tos,
                    total_len: 0,
                    frag: if spec.df { ipv4::FLAG_DF } else { 0 },
                    ttl: spec.ttl,
                    protocol: IPPROTO_UDP,
                    src: s.octets(),
                    dst: d.octets(),
                }
                .emit(&mut h[ETH_HDR_LEN..]);
                ip_csum_base = ipv4::Packet::new_checked(&h[ETH_HDR_LEN..])
                    .expect("just written")
                    .checksum();
            }
            (IpAddr::V6(s), IpAddr::V6(d)) => ipv6::Repr {
                traffic_class: spec.tos,
                flow_label: 0,
                payload_len: 0,
                next_header: IPPROTO_UDP,
                hop_limit: spec.ttl,
                src: u128::from(s),
                dst: u128::from(d),
            }
            .emit(&mut h[ETH_HDR_LEN..]),
            _ => unreachable!("families checked above"),
        }
        let at = ETH_HDR_LEN + ip_len;
        udp::emit(&mut h[at..], 0, spec.udp_dst, 0);
        let at = at + udp::HEADER_LEN;
        match spec.kind {
            TunnelKind::Vxlan => match spec.gpe {
                Some(np) => vxlan::emit_gpe(&mut h[at..], spec.vni, np),
                None => vxlan::emit(&mut h[at..], spec.vni),
            },
            TunnelKind::Geneve => geneve::emit_with_options(
                &mut h[at..],
                EtherType::TEB,
                spec.vni,
                &spec.geneve_options,
            ),
        }
        Ok(EncapTemplate {
            header: h,
            ipv6,
            // Over IPv6 a zero UDP checksum is refused by receivers (Linux's vxlan
            // and geneve devices unless told otherwise, RFC 6935): always computed.
            udp_csum: spec.udp_csum || ipv6,
            df: spec.df,
            ip_csum_base,
            strips_ethernet: spec.gpe.is_some_and(|np| np != vxlan::NP_ETHERNET),
        })
    }

    /// Whether the inner frame's Ethernet header and tags come off before the push
    /// (VXLAN-GPE carrying IP or NSH).
    pub fn strips_ethernet(&self) -> bool {
        self.strips_ethernet
    }

    /// The outer headers' length: what the tunnel adds to a frame.
    pub fn overhead(&self) -> usize {
        self.header.len()
    }

    /// The largest inner frame (Ethernet header included) that fits an underlay
    /// port of this MTU.
    pub fn inner_frame_max(&self, underlay_mtu: usize) -> usize {
        (underlay_mtu + ETH_HDR_LEN).saturating_sub(self.header.len())
    }

    fn ip_len(&self) -> usize {
        if self.ipv6 {
            ipv6::HEADER_LEN
        } else {
            ipv4::MIN_HEADER_LEN
        }
    }

    /// Writes the outer headers and `inner` into `out`; the frame's length, or `None`
    /// when `out` is too small or the frame too large for IP. `udp_src` comes from
    /// [`udp_source_port`]; `ip_id` is the IPv4 identification when the template
    /// does not set DF (a counter of the sender's).
    pub fn push(&self, inner: &[u8], out: &mut [u8], udp_src: u16, ip_id: u16) -> Option<usize> {
        let at = self.header.len();
        out.get_mut(at..at + inner.len())?.copy_from_slice(inner);
        self.finish(out, inner.len(), udp_src, ip_id)
    }

    /// As [`EncapTemplate::push`] for an inner frame of `inner_len` bytes already
    /// written at `out[overhead()..]` (copied there with its VLAN tag put back, say).
    pub fn finish(
        &self,
        out: &mut [u8],
        inner_len: usize,
        udp_src: u16,
        ip_id: u16,
    ) -> Option<usize> {
        self.finish_keyed(out, inner_len, udp_src, ip_id, None, None)
    }

    /// As [`EncapTemplate::finish`], the VNI (24 bits) written over the template's
    /// when given: a port with `key=flow` sends with the ID a rule set; and
    /// `last_option_value` written over the value of the template's last Geneve
    /// option (the headers' last bytes): `tun_metadata0` as a rule set it.
    pub fn finish_keyed(
        &self,
        out: &mut [u8],
        inner_len: usize,
        udp_src: u16,
        ip_id: u16,
        vni: Option<u32>,
        last_option_value: Option<&[u8]>,
    ) -> Option<usize> {
        let total = self.header.len() + inner_len;
        // IPv4's length field counts its header, IPv6's does not.
        let length_field = if self.ipv6 {
            total - ETH_HDR_LEN - self.ip_len()
        } else {
            total - ETH_HDR_LEN
        };
        if total > out.len() || length_field > usize::from(u16::MAX) {
            return None;
        }
        let out = &mut out[..total];
        out[..self.header.len()].copy_from_slice(&self.header);
        let ip_at = ETH_HDR_LEN;
        let udp_at = ip_at + self.ip_len();
        let udp_len = total - udp_at;
        if self.ipv6 {
            ipv6::Packet::new_checked(&mut out[ip_at..])
                .ok()?
                .set_payload_len(udp_len as u16);
        } else {
            let id = if self.df { 0 } else { ip_id };
            let ip_total = (total - ip_at) as u16;
            let mut ip = ipv4::Packet::new_checked(&mut out[ip_at..]).ok()?;
            ip.set_total_len(ip_total);
            ip.set_ident(id);
            // The template's checksum covered zeros there: add what was written.
            let sum = u64::from(!self.ip_csum_base) + u64::from(ip_total) + u64::from(id);
            ip.set_checksum(!checksum::fold(sum));
        }
        if let Some(vni) = vni {
            // VXLAN and Geneve both carry it in bytes 4..7 of their header.
            let at = udp_at + udp::HEADER_LEN + 4;
            out.get_mut(at..at + 3)?
                .copy_from_slice(&(vni & 0x00ff_ffff).to_be_bytes()[1..]);
        }
        if let Some(v) = last_option_value {
            let end = self.header.len();
            out.get_mut(end.checked_sub(v.len())?..end)?
                .copy_from_slice(v);
        }
        let mut u = udp::Packet::new_checked(&mut out[udp_at..]).ok()?;
        u.set_src_port(udp_src);
        u.set_len(udp_len as u16);
        if self.udp_csum {
            let c = udp_checksum(&out[ip_at..udp_at], &out[udp_at..], self.ipv6);
            udp::Packet::new_checked(&mut out[udp_at..])
                .ok()?
                .set_checksum(c);
        }
        Some(total)
    }
}

/// The TOS (traffic class) and TTL (hop limit) of `inner`'s IP header, for a tunnel
/// with `tos=inherit` or `ttl=inherit`; `None` for a frame that is not IP.
pub fn inner_tos_ttl(inner: &[u8]) -> Option<(u8, u8)> {
    let (ethertype, l3) = crate::wire::ethernet::l3(inner)?;
    let ip = inner.get(l3..)?;
    match ethertype {
        crate::wire::ethernet::EtherType::IPV4 => {
            let p = ipv4::Packet::new_checked(ip).ok()?;
            Some((p.tos(), p.ttl()))
        }
        crate::wire::ethernet::EtherType::IPV6 => {
            let p = ipv6::Packet::new_checked(ip).ok()?;
            Some((p.traffic_class(), p.hop_limit()))
        }
        _ => None,
    }
}

impl EncapTemplate {
    /// Writes `tos` and `ttl` over the outer IP header of `frame` (one this template
    /// finished), the IPv4 header checksum again with them. The UDP checksum does not
    /// cover either.
    pub fn set_tos_ttl(&self, frame: &mut [u8], tos: u8, ttl: u8) -> Option<()> {
        let ip = frame.get_mut(ETH_HDR_LEN..)?;
        if self.ipv6 {
            let mut p = ipv6::Packet::new_checked(ip).ok()?;
            p.set_traffic_class(tos);
            p.set_hop_limit(ttl);
        } else {
            let mut p = ipv4::Packet::new_checked(ip).ok()?;
            p.set_tos(tos);
            p.set_ttl(ttl);
            p.fill_checksum();
        }
        Some(())
    }
}

/// The UDP checksum of `datagram` (its checksum field zero) under the addresses of
/// `ip_header`; 0 is sent as 0xffff (0 means "none").
pub(crate) fn udp_checksum(ip_header: &[u8], datagram: &[u8], ipv6: bool) -> u16 {
    let pseudo = u64::from(IPPROTO_UDP) + datagram.len() as u64;
    let with_addresses = if ipv6 {
        ipv6::Packet::new_checked(ip_header).map(|p| checksum::sum(p.addresses(), pseudo))
    } else {
        ipv4::Packet::new_checked(ip_header).map(|p| checksum::sum(p.addresses(), pseudo))
    };
    let c = !checksum::fold(checksum::sum(datagram, with_addresses.unwrap_or(pseudo)));
    if c == 0 {
        0xffff
    } else {
        c
    }
}

/// The UDP source port for a flow of this hash, spread evenly over the range Linux
/// uses for tunnels (its ephemeral ports), as the kernel's `udp_flow_src_port` does.
pub fn udp_source_port(hash: u32) -> u16 {
    let (lo, hi) = (u64::from(UDP_SOURCE_PORTS.0), u64::from(UDP_SOURCE_PORTS.1));
    ((u64::from(hash) * (hi - lo)) >> 32) as u16 + UDP_SOURCE_PORTS.0
}

/// A hash of an inner frame's flow — its Ethernet addresses, its IP addresses and,
/// for TCP and UDP, its ports — for the outer UDP source port: the packets of one
/// flow take one path through the underlay, different flows spread.
pub fn flow_hash(frame: &[u8]) -> u32 {
    use crate::wire::ethernet::Frame;
    use crate::wire::ip::IPPROTO_TCP;
    let mut h = crc32c::crc32c(frame.get(..12).unwrap_or(frame));
    let Ok(eth) = Frame::new_checked(frame) else {
        return h;
    };
    let Ok(tags) = eth.tags(2) else {
        return h;
    };
    let payload = &frame[tags.payload..];
    let v4 = ipv4::field::SRC_ADDR.start..ipv4::field::DST_ADDR.end;
    let v6 = ipv6::field::SRC_ADDR.start..ipv6::field::DST_ADDR.end;
    let (addresses, l4, proto) = match tags.ethertype {
        EtherType::IPV4 => match ipv4::Packet::new_checked(payload) {
            Ok(ip) if !ip.is_fragment() => (v4, ip.header_len(), ip.protocol()),
            Ok(_) => (v4, 0, 0),
            Err(_) => return h,
        },
        EtherType::IPV6 => match ipv6::Packet::new_checked(payload) {
            Ok(ip) => match ip.upper_layer(8) {
                Ok(up) if up.fragment.is_none() => (v6, up.offset, up.protocol),
                _ => (v6, 0, 0),
            },
            Err(_) => return h,
        },
        _ => return h,
    };
    let addresses = &payload[addresses];
    h = crc32c::crc32c_append(h, addresses);
    if proto == IPPROTO_TCP || proto == IPPROTO_UDP {
        if let Some(ports) = payload.get(l4..l4 + 4) {
            h = crc32c::crc32c_append(h, ports);
        }
    }
    h
}
