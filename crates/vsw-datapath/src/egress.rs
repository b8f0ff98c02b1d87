//! The egress stage: how a packet leaves for a port, decided once, here, from what
//! the port's queue finishes by itself ([`TxOffloads`], read again after every
//! batch: a guest's driver or an underlay's tunnel tap may change it). A device
//! then only copies — it cuts, checksums or splits nothing (after Open vSwitch's
//! `netdev_send`, which segments and checksums in software for a device that
//! cannot).
//!
//! The decision parses each header once: a tunnel super-frame's offsets
//! ([`TunnelSuperFrame`]) travel from the decision to the cut. Whether and how a
//! tunnel's outer headers go in front of a packet in its own pass is decided here
//! too ([`push_plan`]).

use vsw_packet::ethernet::{l3_len, ETH_HDR_LEN};
use vsw_packet::gso::{self, GsoError};
use vsw_packet::tunnel::{tunnel_segment_size, udp_tunnel_super_frame, TunnelSuperFrame};
use vsw_packet::vnet::VNET_F_NEEDS_CSUM;
use vsw_packet::VnetHdr;

use crate::port::TxOffloads;
use crate::tunnel_push::PushHeader;

/// How one packet leaves for a port.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Egress {
    /// The device takes it as it is (a plain TCP segment may first be merged).
    AsIs,
    /// A TCP super-frame the device segments itself.
    Whole,
    /// A TCP super-frame cut here into segments of this size (its headers' places
    /// as the decision parsed them).
    Cut(gso::Layout, usize),
    /// A UDP-tunnelled super-frame the device takes whole.
    TunnelWhole,
    /// A UDP-tunnelled super-frame cut here into outer packets whose inner
    /// segments carry this many bytes.
    CutTunnel(TunnelSuperFrame, usize),
    /// A checksum left to a device that cannot finish it: finished here, on a copy.
    FinishChecksum,
    /// Above the port's MTU and no super-frame: dropped, never cut short.
    AboveMtu,
    /// A super-frame that cannot be cut (malformed, or its segments would not fit).
    Uncuttable(GsoError),
}

/// How `data` (with offload state `vnet`) leaves for a port whose queue finishes
/// what `o` says.
#[cfg(test)]
pub(crate) fn plan(data: &[u8], vnet: &VnetHdr, o: &TxOffloads) -> Egress {
    if as_is(data, vnet, o) {
        return Egress::AsIs;
    }
    plan_other(data, vnet, o)
}

/// The common case, decided without parsing anything: no super-frame, a checksum
/// finished or the device finishes it, within the MTU ([`Egress::AsIs`]).
#[inline(always)]
pub(crate) fn as_is(data: &[u8], vnet: &VnetHdr, o: &TxOffloads) -> bool {
    !vnet.is_gso()
        && (o.csum || vnet.flags & VNET_F_NEEDS_CSUM == 0)
        && data.len() <= o.mtu + ETH_HDR_LEN
}

/// How a packet that is not [`as_is`] leaves.
#[cold]
pub(crate) fn plan_other(data: &[u8], vnet: &VnetHdr, o: &TxOffloads) -> Egress {
    let partial = vnet.flags & VNET_F_NEEDS_CSUM != 0;
    let segment = usize::from(vnet.gso_size);
    if vnet.is_gso() {
        if let Some(t) = udp_tunnel_super_frame(data, vnet) {
            let mss = tunnel_segment_size(data, &t, vnet, o.mtu);
            // A device that takes them (a tunnel tap) leaves the outer UDP checksum
            // alone: one the sender set is kept only by a cut.
            if o.tunnel_tso && mss == Ok(segment) && !has_outer_checksum(data, &t) {
                return Egress::TunnelWhole;
            }
            return match mss {
                Ok(mss) => Egress::CutTunnel(t, mss),
                Err(e) => Egress::Uncuttable(e),
            };
        }
        return match gso::segment_size_and_layout(data, vnet, o.mtu) {
            // The device segments it, and its MTU takes the sender's segments.
            Ok((mss, _)) if o.tso && mss == segment => Egress::Whole,
            Ok((mss, lay)) => Egress::Cut(lay, mss),
            Err(e) => Egress::Uncuttable(e),
        };
    }
    if l3_len(data) > o.mtu {
        return Egress::AboveMtu;
    }
    if partial && !o.csum {
        return Egress::FinishChecksum;
    }
    // Within the MTU once its VLAN tag is set aside.
    Egress::AsIs
}

/// Whether the tunnel super-frame `t` in `frame` carries an outer UDP checksum.
fn has_outer_checksum(frame: &[u8], t: &TunnelSuperFrame) -> bool {
    frame.get(t.l4 + 6..t.l4 + 8).is_some_and(|c| c != [0, 0])
}

/// How a tunnel's outer headers go in front of a packet, in its own pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Push {
    /// As it is.
    Whole,
    /// A super-frame whose segments the tunnel's MTU does not take: pushed with
    /// segments of this size (the device that cuts it later cuts them smaller; the
    /// bytes on the wire are as if its sender had sent them so).
    Shrink(usize),
    /// A super-frame that would pass IP's largest packet with the outer headers:
    /// split into super-frames whose IP packets are at most this long, each pushed.
    Split(usize),
    /// A tunnel super-frame (a tunnel device's, inside this tunnel): cut into its
    /// outer packets (inner segments of this size), each pushed.
    CutTunnel(TunnelSuperFrame, usize),
    /// A super-frame for a header that takes its Ethernet header off (VXLAN-GPE
    /// carrying IP), which no device would cut: cut here into complete packets of
    /// segments of this size, each pushed.
    Segment(usize),
    /// Above the tunnel's MTU and no super-frame: dropped and counted at the tunnel
    /// port, never fragmented.
    AboveMtu,
    /// Not in this pass (no room in front, even with the frame moved back; a
    /// super-frame that cannot be cut): the tunnel port's queue drops it, counted.
    ByQueue,
}

/// How `header` goes in front of `frame` (offload state `vnet`, `headroom` bytes
/// free in front of it) for a tunnel port of MTU `mtu`.
pub(crate) fn push_plan(
    header: &PushHeader,
    frame: &[u8],
    vnet: &VnetHdr,
    headroom: usize,
    mtu: usize,
) -> Push {
    if headroom < header.template.overhead() {
        return Push::ByQueue;
    }
    if !vnet.is_gso() {
        return if l3_len(frame) <= mtu {
            Push::Whole
        } else {
            Push::AboveMtu
        };
    }
    if let Some(t) = udp_tunnel_super_frame(frame, vnet) {
        return match tunnel_segment_size(frame, &t, vnet, mtu) {
            Ok(mss) => Push::CutTunnel(t, mss),
            Err(_) => Push::ByQueue,
        };
    }
    let Ok(mss) = gso::segment_size(frame, vnet, mtu) else {
        return Push::ByQueue;
    };
    if header.template.strips_ethernet() {
        return Push::Segment(mss.min(usize::from(vnet.gso_size)));
    }
    let max_frame = header.template.inner_frame_max(usize::from(u16::MAX));
    if frame.len() > max_frame {
        let Some((_, l3)) = vsw_packet::ethernet::l3(frame) else {
            return Push::ByQueue;
        };
        return Push::Split(max_frame - l3);
    }
    if mss < usize::from(vnet.gso_size) {
        return Push::Shrink(mss);
    }
    Push::Whole
}

#[cfg(test)]
mod tests {
    use super::*;
    use vsw_packet::builder::{self, Ipv4};
    use vsw_packet::key::IPPROTO_TCP;
    use vsw_packet::tunnel::{EncapSpec, EncapTemplate, TunnelKind};
    use vsw_packet::vnet::VNET_GSO_TCPV4;
    use vsw_packet::{EtherType, MacAddr};

    const PLAIN: TxOffloads = TxOffloads {
        csum: false,
        tso: false,
        tunnel_tso: false,
        merges: false,
        mtu: 1500,
    };
    const FULL: TxOffloads = TxOffloads {
        csum: true,
        tso: true,
        tunnel_tso: false,
        merges: true,
        mtu: 1500,
    };

    /// A TCP frame of `payload` bytes whose checksum is left to the device.
    fn partial_tcp(payload: usize) -> (Vec<u8>, VnetHdr) {
        let ip = Ipv4 {
            proto: IPPROTO_TCP,
            ..Ipv4::default()
        };
        let f = builder::ethernet(
            MacAddr([2, 0, 0, 0, 0, 2]),
            MacAddr([2, 0, 0, 0, 0, 1]),
            &[],
            EtherType::IPV4,
            &builder::ipv4(&ip, &builder::tcp(40000, 5201, 0x18, &vec![7u8; payload])),
        );
        let vnet = VnetHdr {
            flags: VNET_F_NEEDS_CSUM,
            csum_start: 34,
            csum_offset: 16,
            ..VnetHdr::default()
        };
        (f, vnet)
    }

    fn super_frame(payload: usize, mss: u16) -> (Vec<u8>, VnetHdr) {
        let (f, v) = partial_tcp(payload);
        let vnet = VnetHdr {
            gso_type: VNET_GSO_TCPV4,
            gso_size: mss,
            hdr_len: 54,
            ..v
        };
        (f, vnet)
    }

    /// The VXLAN header these tests push.
    fn vxlan_template() -> EncapTemplate {
        EncapTemplate::new(&vxlan_spec()).expect("a template")
    }

    fn vxlan_spec() -> EncapSpec {
        EncapSpec {
            kind: TunnelKind::Vxlan,
            eth_src: MacAddr([2, 0, 0, 0, 0, 3]),
            eth_dst: MacAddr([2, 0, 0, 0, 0, 4]),
            src: "198.18.1.1".parse().unwrap(),
            dst: "198.18.1.2".parse().unwrap(),
            tos: 0,
            ttl: 64,
            df: false,
            udp_dst: 4789,
            udp_csum: false,
            vni: 7,
            geneve_options: Vec::new(),
            gpe: None,
        }
    }

    /// `inner` behind VXLAN, its offload state moved behind the outer headers;
    /// with an outer UDP checksum when `outer_csum`.
    fn vxlan(inner: &[u8], vnet: VnetHdr, outer_csum: bool) -> (Vec<u8>, VnetHdr) {
        let t = vxlan_template();
        let mut out = vec![0u8; inner.len() + 200];
        let n = t.push(inner, &mut out, 40000, 1).expect("fits");
        out.truncate(n);
        if outer_csum {
            // Any non-zero value: the decision reads only whether one is set.
            out[14 + 20 + 6] = 0x12;
        }
        (out, vnet.shifted(t.overhead() as u16))
    }

    #[test]
    fn a_packet_the_device_finishes_leaves_as_it_is() {
        let (f, v) = partial_tcp(100);
        assert_eq!(plan(&f, &v, &FULL), Egress::AsIs);
        assert_eq!(plan(&f, &VnetHdr::default(), &PLAIN), Egress::AsIs);
    }

    #[test]
    fn a_checksum_the_device_cannot_finish_is_finished_here() {
        let (f, v) = partial_tcp(100);
        assert_eq!(plan(&f, &v, &PLAIN), Egress::FinishChecksum);
    }

    #[test]
    fn a_packet_above_the_mtu_is_dropped_never_cut() {
        let (f, v) = partial_tcp(1600);
        assert_eq!(plan(&f, &v, &FULL), Egress::AboveMtu);
        assert_eq!(plan(&f, &VnetHdr::default(), &PLAIN), Egress::AboveMtu);
    }

    #[test]
    fn a_super_frame_goes_whole_only_where_the_device_cuts_it_to_the_same_size() {
        let (f, v) = super_frame(10_000, 1448);
        assert_eq!(plan(&f, &v, &FULL), Egress::Whole);
        assert!(matches!(plan(&f, &v, &PLAIN), Egress::Cut(_, 1448)));
        let small = TxOffloads { mtu: 1000, ..FULL };
        assert!(matches!(plan(&f, &v, &small), Egress::Cut(_, 960)));
    }

    #[test]
    fn a_super_frame_that_cannot_be_cut_says_why() {
        let (mut f, v) = super_frame(10_000, 1448);
        f.truncate(30);
        assert!(matches!(plan(&f, &v, &PLAIN), Egress::Uncuttable(_)));
        let (f, v) = super_frame(10_000, 0);
        assert_eq!(
            plan(&f, &v, &PLAIN),
            Egress::Uncuttable(GsoError::NoSegmentSize)
        );
    }

    #[test]
    fn a_tunnel_super_frame_goes_whole_only_to_a_port_that_takes_it_without_outer_checksum() {
        let (inner, v) = super_frame(10_000, 1400);
        let (f, tv) = vxlan(&inner, v, false);
        let taker = TxOffloads {
            tunnel_tso: true,
            ..FULL
        };
        assert_eq!(plan(&f, &tv, &taker), Egress::TunnelWhole);
        let Egress::CutTunnel(t, mss) = plan(&f, &tv, &FULL) else {
            panic!("cut for a port that takes no tunnel super-frames")
        };
        assert_eq!((t.inner, mss), (50, 1400));
        let (f, tv) = vxlan(&inner, v, true);
        assert!(matches!(plan(&f, &tv, &taker), Egress::CutTunnel(_, 1400)));
    }

    fn vxlan_header() -> PushHeader {
        let template = vxlan_template();
        PushHeader {
            template,
            tunnel_port: 9,
        }
    }

    #[test]
    fn a_push_goes_whole_shrunk_split_dropped_or_to_the_queue() {
        let h = vxlan_header();
        let room = 100;
        let (small, v) = partial_tcp(100);
        assert_eq!(push_plan(&h, &small, &v, room, 1450), Push::Whole);
        assert_eq!(
            push_plan(&h, &small, &v, 10, 1450),
            Push::ByQueue,
            "no room"
        );
        let (big, v) = partial_tcp(1420);
        assert_eq!(push_plan(&h, &big, &v, room, 1450), Push::AboveMtu);
        // The sender's segments (1,448) are larger than the tunnel takes (1,410).
        let (sf, v) = super_frame(10_000, 1448);
        assert_eq!(push_plan(&h, &sf, &v, room, 1450), Push::Shrink(1450 - 40));
        let (sf, v) = super_frame(1000, 1000);
        assert_eq!(push_plan(&h, &sf, &v, room, 1450), Push::Whole);
        // 64 KiB and the outer headers pass IP's largest packet.
        let (huge, v) = super_frame(65_535 - 40, 1400);
        assert_eq!(
            push_plan(&h, &huge, &v, room, 1450),
            Push::Split(65_535 + 14 - 50 - 14)
        );
        // A tunnel super-frame inside: cut into its outer packets, each pushed
        // (inner segments of what the tunnel's MTU leaves after both headers).
        let (inner, iv) = super_frame(10_000, 1400);
        let (tf, tv) = vxlan(&inner, iv, false);
        let Push::CutTunnel(t, mss) = push_plan(&h, &tf, &tv, room, 1450) else {
            panic!("not cut")
        };
        assert_eq!((t.inner, mss), (50, 1450 - 50 - 40));
    }

    /// A header that takes the Ethernet header off (VXLAN-GPE carrying IP): a
    /// super-frame is cut here into complete packets, at most the sender's
    /// segment size, within the tunnel's MTU.
    #[test]
    fn a_push_without_ethernet_cuts_a_super_frame_into_packets() {
        let template = EncapTemplate::new(&EncapSpec {
            gpe: Some(vsw_packet::wire::vxlan::NP_IPV4),
            ..vxlan_spec()
        })
        .expect("a template");
        let h = PushHeader {
            template,
            tunnel_port: 9,
        };
        let (sf, v) = super_frame(10_000, 1000);
        assert_eq!(push_plan(&h, &sf, &v, 100, 1450), Push::Segment(1000));
        let (sf, v) = super_frame(10_000, 1448);
        assert_eq!(push_plan(&h, &sf, &v, 100, 1450), Push::Segment(1410));
        let (small, v) = partial_tcp(100);
        assert_eq!(push_plan(&h, &small, &v, 100, 1450), Push::Whole);
    }
}
