//! What a `Ct` action needs beside the tracker (vsw-conntrack): the packet as the
//! tracker reads it — its tuple from the key, TCP's sequence, acknowledgement,
//! window and window scale, ICMP's identifier, the header an ICMP error quotes, all
//! from the frame — and the `ct_*` fields its verdict gives the packet's later
//! passes.

use vsw_conntrack::tcp::TcpSegment;
use vsw_conntrack::tuple::{IPPROTO_ICMP, IPPROTO_ICMPV6, IPPROTO_SCTP, IPPROTO_TCP, IPPROTO_UDP};
use vsw_conntrack::{CtOutcome, CtPacket, CtState, Tuple};
use vsw_packet::wire::{ipv4, ipv6};
use vsw_packet::{EtherType, FlowKey};

/// The `ct_*` fields a packet carries after a `Ct` (all 0 before any).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct CtMeta {
    state: u8,
    zone: u16,
    mark: u32,
    label: u128,
    /// The connection's original direction (none when invalid).
    orig: Option<Tuple>,
}

impl CtMeta {
    pub(crate) fn of(out: &CtOutcome) -> CtMeta {
        CtMeta {
            state: out.state.0,
            zone: out.zone,
            mark: out.mark,
            label: out.label,
            orig: out.orig,
        }
    }

    /// What the tracker says of a packet it cannot read (not IP, a fragment, cut
    /// short): invalid.
    pub(crate) fn invalid(zone: u16) -> CtMeta {
        CtMeta {
            state: CtState::INVALID | CtState::TRACKED,
            zone,
            ..CtMeta::default()
        }
    }

    /// Whether NAT rewrote the packet in `zone` already (a later `ct` there looks
    /// it up as translated and does not rewrite it again).
    pub(crate) fn natted_in(&self, zone: u16) -> bool {
        self.zone == zone && self.state & (CtState::SNAT | CtState::DNAT) != 0
    }

    #[inline]
    pub(crate) fn write_into(&self, key: &mut FlowKey) {
        key.ct_state = self.state;
        key.ct_zone = self.zone;
        key.ct_mark = self.mark;
        key.ct_label = self.label;
        let t = self.orig.unwrap_or_default();
        key.ct_nw_proto = t.proto;
        (
            key.ct_ipv6_src,
            key.ct_ipv6_dst,
            key.ct_nw_src,
            key.ct_nw_dst,
        ) = if t.v6 {
            (t.src, t.dst, 0, 0)
        } else {
            (0, 0, t.src as u32, t.dst as u32)
        };
        // ICMP's are its type and code, as Open vSwitch gives them.
        (key.ct_tp_src, key.ct_tp_dst) = if t.is_icmp() {
            (t.icmp_type.into(), t.icmp_code.into())
        } else {
            (t.src_port, t.dst_port)
        };
    }
}

/// ICMP errors (v4: unreachable, source quench, redirect, time exceeded,
/// parameter problem; v6: unreachable, too big, time exceeded, parameter problem).
fn is_icmp_error(v6: bool, t: u8) -> bool {
    if v6 {
        matches!(t, 1..=4)
    } else {
        matches!(t, 3 | 4 | 5 | 11 | 12)
    }
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// An IP packet's (the frame's from `l3`, or an ICMP error's quote) tuple and
/// where its transport header starts; `None` for a fragment or a cut header.
/// `quote`: the packet an ICMP error quotes, whose transport header may be cut to
/// its first 8 bytes and whose lengths may pass the error's end.
fn ip_tuple(ip: &[u8], v6: bool, quote: bool) -> Option<(Tuple, usize, usize)> {
    let (src, dst, proto, l4, end) = if v6 {
        let p = ipv6::Packet::new_checked(ip).ok()?;
        let up = p.upper_layer(8).ok()?;
        if up.fragment.is_some() {
            return None;
        }
        let end = (ipv6::HEADER_LEN + p.payload_len()).min(ip.len());
        (p.src_addr(), p.dst_addr(), up.protocol, up.offset, end)
    } else {
        let p = ipv4::Packet::new_checked(ip).ok()?;
        if p.is_fragment() {
            return None;
        }
        let end = if quote {
            ip.len()
        } else {
            p.total_len().min(ip.len())
        };
        let (s, d) = (p.src_addr(), p.dst_addr());
        (
            u128::from(s),
            u128::from(d),
            p.protocol(),
            p.header_len(),
            end,
        )
    };
    let l4b = ip.get(l4..end)?;
    let mut t = Tuple {
        src,
        dst,
        proto,
        v6,
        ..Tuple::default()
    };
    match proto {
        IPPROTO_TCP | IPPROTO_UDP | IPPROTO_SCTP => {
            t.src_port = u16_at(l4b, 0)?;
            t.dst_port = u16_at(l4b, 2)?;
        }
        IPPROTO_ICMP | IPPROTO_ICMPV6 => {
            t.icmp_type = *l4b.first()?;
            t.icmp_code = *l4b.get(1)?;
            if !is_icmp_error(v6, t.icmp_type) {
                let id = u16_at(l4b, 4)?;
                (t.src_port, t.dst_port) = (id, id);
            }
        }
        _ => {}
    }
    Some((t, l4, end))
}

/// TCP's segment of a transport header `tcp` whose segment ends at `len` bytes.
fn tcp_segment(tcp: &[u8]) -> Option<TcpSegment> {
    let doff = usize::from(*tcp.get(12)? >> 4) * 4;
    if doff < 20 || doff > tcp.len() {
        return None;
    }
    let flags = u16_at(tcp, 12)? & 0x0fff;
    let mut wscale = None;
    if flags & vsw_conntrack::tcp::SYN != 0 {
        let mut opts = &tcp[20..doff];
        while let Some(&kind) = opts.first() {
            match kind {
                0 => break,
                1 => opts = &opts[1..],
                _ => {
                    let len = usize::from(*opts.get(1)?).max(2);
                    if kind == 3 && len == 3 {
                        wscale = Some(*opts.get(2)?);
                    }
                    opts = opts.get(len..).unwrap_or(&[]);
                }
            }
        }
    }
    Some(TcpSegment {
        flags,
        seq: u32_at(tcp, 4)?,
        ack: u32_at(tcp, 8)?,
        window: u16_at(tcp, 14)?,
        wscale,
        payload_len: (tcp.len() - doff) as u32,
    })
}

/// The packet in `frame` (whose key is `key`) as the tracker reads it, and TCP's
/// payload (for a helper; empty for other protocols); `None` when it cannot (not
/// IP, a fragment, headers cut short): invalid.
pub(crate) fn ct_packet<'f>(frame: &'f [u8], key: &FlowKey) -> Option<(CtPacket, &'f [u8])> {
    let v6 = match key.dl_type {
        EtherType::IPV4 => false,
        EtherType::IPV6 => true,
        _ => return None,
    };
    let (_, l3) = vsw_packet::ethernet::l3(frame)?;
    let ip = frame.get(l3..)?;
    let (tuple, l4, end) = ip_tuple(ip, v6, false)?;
    let l4b = ip.get(l4..end)?;
    let mut pkt = CtPacket {
        tuple,
        ..CtPacket::default()
    };
    let mut payload: &[u8] = &[];
    match tuple.proto {
        IPPROTO_TCP => {
            let seg = tcp_segment(l4b)?;
            payload = &l4b[l4b.len() - seg.payload_len as usize..];
            pkt.tcp = Some(seg);
        }
        IPPROTO_ICMP | IPPROTO_ICMPV6 if is_icmp_error(v6, tuple.icmp_type) => {
            // The quoted packet: its IP header and the first bytes behind it. It
            // was sent by the error's addressee (Open vSwitch checks so too): an
            // error quoting someone else's connection relates to nothing.
            let (quoted, _, _) = ip_tuple(l4b.get(8..)?, v6, true)?;
            if quoted.src != tuple.dst {
                return None;
            }
            pkt.quoted = Some(quoted);
        }
        _ => {}
    }
    Some((pkt, payload))
}

/// Writes NAT's rewrite `r` into the frame in `buf` (whose key is `key`): the
/// addresses, and the ports of TCP, UDP and SCTP, checksums kept right.
pub(crate) fn apply_nat(
    buf: &mut vsw_packet::rewrite::PacketBuf,
    key: &FlowKey,
    r: &vsw_conntrack::NatRewrite,
) {
    use vsw_packet::rewrite::FieldWrite;
    let ports = matches!(key.nw_proto, IPPROTO_TCP | IPPROTO_UDP | IPPROTO_SCTP);
    let v6 = key.dl_type == EtherType::IPV6;
    if let Some((addr, port)) = r.src {
        if v6 {
            buf.write_field(FieldWrite::Ipv6Src(addr.to_be_bytes()));
        } else {
            buf.set_nw_src((addr as u32).to_be_bytes());
        }
        if ports {
            buf.set_tp_src(port);
        }
    }
    if let Some((addr, port)) = r.dst {
        if v6 {
            buf.write_field(FieldWrite::Ipv6Dst(addr.to_be_bytes()));
        } else {
            buf.set_nw_dst((addr as u32).to_be_bytes());
        }
        if ports {
            buf.set_tp_dst(port);
        }
    }
}

/// Writes `r`, the rewrite of the packet an ICMP error quotes, into that quote
/// (the error's own headers take NAT's rewrite through [`apply_nat`] first).
pub(crate) fn apply_nat_to_quote(
    buf: &mut vsw_packet::rewrite::PacketBuf,
    key: &FlowKey,
    r: &vsw_conntrack::NatRewrite,
) {
    use vsw_packet::rewrite::QuoteEnd;
    let v6 = key.dl_type == EtherType::IPV6;
    for (end, to) in [(QuoteEnd::Src, r.src), (QuoteEnd::Dst, r.dst)] {
        if let Some((addr, port)) = to {
            let bytes = addr.to_be_bytes();
            let addr = if v6 { &bytes[..] } else { &bytes[12..] };
            buf.set_icmp_quote(end, addr, port);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vsw_packet::builder;

    fn key_of(f: &[u8]) -> FlowKey {
        let mut k = FlowKey::default();
        vsw_packet::extract(f, 1, None, &mut k).unwrap();
        k
    }

    #[test]
    fn udp_and_tcp_read_as_the_tracker_wants_them() {
        let f = builder::udp4_frame([10, 0, 0, 1], [10, 0, 0, 2], 1234, 53, 20);
        let p = ct_packet(&f, &key_of(&f)).unwrap().0;
        assert_eq!(
            (
                p.tuple.src,
                p.tuple.dst,
                p.tuple.src_port,
                p.tuple.dst_port,
                p.tuple.proto
            ),
            (0x0a00_0001, 0x0a00_0002, 1234, 53, IPPROTO_UDP)
        );
        assert_eq!((p.tcp, p.quoted), (None, None));
        // A TCP SYN.
        let ip = builder::ipv4(
            &builder::Ipv4 {
                proto: vsw_packet::key::IPPROTO_TCP,
                ..builder::Ipv4::default()
            },
            &builder::tcp(40000, 80, 0x002, &[]),
        );
        let mac = vsw_packet::MacAddr([2, 0, 0, 0, 0, 1]);
        let mut f = builder::ethernet(mac, mac, &[], EtherType::IPV4, &ip);
        let l4 = 14 + 20;
        f[l4 + 4..l4 + 8].copy_from_slice(&1000u32.to_be_bytes());
        f[l4 + 14..l4 + 16].copy_from_slice(&64240u16.to_be_bytes());
        let p = ct_packet(&f, &key_of(&f)).unwrap().0;
        let seg = p.tcp.unwrap();
        assert_eq!(
            (seg.flags, seg.seq, seg.window, seg.payload_len),
            (0x002, 1000, 64240, 0)
        );
        assert_eq!(p.tuple.dst_port, 80);
        // Not IP: nothing to track.
        let arp = builder::ethernet(
            mac,
            mac,
            &[],
            EtherType::ARP,
            &builder::arp(1, mac, [10, 0, 0, 1], mac, [10, 0, 0, 2]),
        );
        assert_eq!(ct_packet(&arp, &key_of(&arp)), None);
    }
}
