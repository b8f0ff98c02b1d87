//! Fields as `load`, `move` and a masked `set_field` reach them: by name (`reg0`,
//! or Open vSwitch's NXM name `NXM_NX_REG0`) and by bits (`NXM_NX_REG0[0..15]`),
//! read from and written to the working key of a translation.
//!
//! A field is the pipeline's (registers, `pkt_mark`, `metadata`, the input port a
//! resubmit or output compares with: writing it changes only what later tables and
//! actions see) or the packet's (writing it is the rewrite action that field has,
//! with the whole new value). A field of neither kind here is read-only.

use vsw_packet::wire::mpls;
use vsw_packet::MacAddr;

use crate::error::FlowSyntaxError;
use crate::fields::Needs;
use crate::match_key::MatchKey;
pub use crate::values::ones;
use crate::values::{bad, c_hex, format_ipv4, format_ipv6, format_mac, parse_uint};

/// A field `load` and `move` reach.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Field {
    /// `regN`, N < 16.
    Reg(u8),
    /// `xregN`, N < 8: `reg(2N)‖reg(2N+1)`.
    Xreg(u8),
    /// `xxregN`, N < 4: `reg(4N)‖…‖reg(4N+3)`.
    Xxreg(u8),
    PktMark,
    Metadata,
    InPort,
    TunId,
    /// The Geneve option the TLV map names `tun_metadata0` (32 bits in vsw).
    TunMetadata0,
    EthSrc,
    EthDst,
    EthType,
    VlanTci,
    IpSrc,
    IpDst,
    NwProto,
    NwTtl,
    Ipv6Src,
    Ipv6Dst,
    TcpSrc,
    TcpDst,
    UdpSrc,
    UdpDst,
    IcmpType,
    IcmpCode,
    ArpOp,
    ArpSpa,
    ArpTpa,
    ArpSha,
    ArpTha,
    NdTarget,
    NdSll,
    NdTll,
    /// The parts of an MPLS packet's outermost label stack entry.
    MplsLabel,
    MplsTc,
    MplsBos,
    MplsTtl,
    /// The connection tracker's verdict and the connection's original direction
    /// (read-only: a `ct`'s commit writes mark and label).
    CtState,
    CtZone,
    CtMark,
    CtLabel,
    CtNwProto,
    CtNwSrc,
    CtNwDst,
    CtIpv6Src,
    CtIpv6Dst,
    CtTpSrc,
    CtTpDst,
}

/// What a field is, besides how it is read and written.
pub struct FieldInfo {
    /// How `ovs-ofctl` names it in a match or `set_field`.
    pub name: &'static str,
    /// Its NXM (or OXM) name, as `ovs-ofctl` prints a subfield.
    pub nxm_name: &'static str,
    /// Its NXM/OXM class, number and length in bytes, as NXAST_REG_LOAD and
    /// NXAST_REG_MOVE name it.
    pub header: (u16, u8, u8),
    pub bits: u8,
    pub needs: Needs,
}

const fn info(
    name: &'static str,
    nxm_name: &'static str,
    header: (u16, u8, u8),
    bits: u8,
    needs: Needs,
) -> FieldInfo {
    FieldInfo {
        name,
        nxm_name,
        header,
        bits,
        needs,
    }
}

const NXM0: u16 = 0x0000;
const NXM1: u16 = 0x0001;
const OXM: u16 = 0x8000;
const PKT_REGS: u16 = 0x8001;

macro_rules! regs {
    ($($n:literal),*) => {
        [$(info(concat!("reg", $n), concat!("NXM_NX_REG", $n), (NXM1, $n, 4), 32, Needs::Nothing)),*]
    };
}
macro_rules! xregs {
    ($($n:literal),*) => {
        [$(info(concat!("xreg", $n), concat!("OXM_OF_PKT_REG", $n), (PKT_REGS, $n, 8), 64, Needs::Nothing)),*]
    };
}
macro_rules! xxregs {
    ($($n:literal / $f:literal),*) => {
        [$(info(concat!("xxreg", $n), concat!("NXM_NX_XXREG", $n), (NXM1, $f, 16), 128, Needs::Nothing)),*]
    };
}

static REGS: [FieldInfo; 16] = regs!(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
static XREGS: [FieldInfo; 8] = xregs!(0, 1, 2, 3, 4, 5, 6, 7);
static XXREGS: [FieldInfo; 4] = xxregs!(0 / 111, 1 / 112, 2 / 113, 3 / 114);

/// Every field but the registers, in [`Field`]'s order from `PktMark`.
static OTHERS: &[(Field, FieldInfo)] = &[
    (
        Field::PktMark,
        info(
            "pkt_mark",
            "NXM_NX_PKT_MARK",
            (NXM1, 33, 4),
            32,
            Needs::Nothing,
        ),
    ),
    (
        Field::Metadata,
        info(
            "metadata",
            "OXM_OF_METADATA",
            (OXM, 2, 8),
            64,
            Needs::Nothing,
        ),
    ),
    (
        Field::InPort,
        info(
            "in_port",
            "NXM_OF_IN_PORT",
            (NXM0, 0, 2),
            16,
            Needs::Nothing,
        ),
    ),
    (
        Field::TunId,
        info("tun_id", "NXM_NX_TUN_ID", (NXM1, 16, 8), 64, Needs::Nothing),
    ),
    (
        // Open vSwitch names it in NXM with its longest length (124 bytes), as
        // in `move` and `load`; vsw holds 32 bits of it.
        Field::TunMetadata0,
        info(
            "tun_metadata0",
            "NXM_NX_TUN_METADATA0",
            (NXM1, 40, 124),
            32,
            Needs::Nothing,
        ),
    ),
    (
        Field::EthSrc,
        info(
            "eth_src",
            "NXM_OF_ETH_SRC",
            (NXM0, 2, 6),
            48,
            Needs::Nothing,
        ),
    ),
    (
        Field::EthDst,
        info(
            "eth_dst",
            "NXM_OF_ETH_DST",
            (NXM0, 1, 6),
            48,
            Needs::Nothing,
        ),
    ),
    (
        Field::EthType,
        info(
            "eth_type",
            "NXM_OF_ETH_TYPE",
            (NXM0, 3, 2),
            16,
            Needs::Nothing,
        ),
    ),
    (
        Field::VlanTci,
        info(
            "vlan_tci",
            "NXM_OF_VLAN_TCI",
            (NXM0, 4, 2),
            16,
            Needs::Nothing,
        ),
    ),
    (
        Field::IpSrc,
        info("ip_src", "NXM_OF_IP_SRC", (NXM0, 7, 4), 32, Needs::Ipv4),
    ),
    (
        Field::IpDst,
        info("ip_dst", "NXM_OF_IP_DST", (NXM0, 8, 4), 32, Needs::Ipv4),
    ),
    (
        Field::NwProto,
        info("nw_proto", "NXM_OF_IP_PROTO", (NXM0, 6, 1), 8, Needs::Ip),
    ),
    (
        Field::NwTtl,
        info("nw_ttl", "NXM_NX_IP_TTL", (NXM1, 29, 1), 8, Needs::Ip),
    ),
    (
        Field::Ipv6Src,
        info(
            "ipv6_src",
            "NXM_NX_IPV6_SRC",
            (NXM1, 19, 16),
            128,
            Needs::Ipv6,
        ),
    ),
    (
        Field::Ipv6Dst,
        info(
            "ipv6_dst",
            "NXM_NX_IPV6_DST",
            (NXM1, 20, 16),
            128,
            Needs::Ipv6,
        ),
    ),
    (
        Field::TcpSrc,
        info("tcp_src", "NXM_OF_TCP_SRC", (NXM0, 9, 2), 16, Needs::Tcp),
    ),
    (
        Field::TcpDst,
        info("tcp_dst", "NXM_OF_TCP_DST", (NXM0, 10, 2), 16, Needs::Tcp),
    ),
    (
        Field::UdpSrc,
        info("udp_src", "NXM_OF_UDP_SRC", (NXM0, 11, 2), 16, Needs::Ports),
    ),
    (
        Field::UdpDst,
        info("udp_dst", "NXM_OF_UDP_DST", (NXM0, 12, 2), 16, Needs::Ports),
    ),
    (
        Field::IcmpType,
        info(
            "icmp_type",
            "NXM_OF_ICMP_TYPE",
            (NXM0, 13, 1),
            8,
            Needs::Icmpv4,
        ),
    ),
    (
        Field::IcmpCode,
        info(
            "icmp_code",
            "NXM_OF_ICMP_CODE",
            (NXM0, 14, 1),
            8,
            Needs::Icmpv4,
        ),
    ),
    (
        Field::ArpOp,
        info("arp_op", "NXM_OF_ARP_OP", (NXM0, 15, 2), 16, Needs::Arp),
    ),
    (
        Field::ArpSpa,
        info("arp_spa", "NXM_OF_ARP_SPA", (NXM0, 16, 4), 32, Needs::Arp),
    ),
    (
        Field::ArpTpa,
        info("arp_tpa", "NXM_OF_ARP_TPA", (NXM0, 17, 4), 32, Needs::Arp),
    ),
    (
        Field::ArpSha,
        info("arp_sha", "NXM_NX_ARP_SHA", (NXM1, 17, 6), 48, Needs::Arp),
    ),
    (
        Field::ArpTha,
        info("arp_tha", "NXM_NX_ARP_THA", (NXM1, 18, 6), 48, Needs::Arp),
    ),
    (
        Field::NdTarget,
        info(
            "nd_target",
            "NXM_NX_ND_TARGET",
            (NXM1, 23, 16),
            128,
            Needs::Nd,
        ),
    ),
    (
        Field::NdSll,
        info("nd_sll", "NXM_NX_ND_SLL", (NXM1, 24, 6), 48, Needs::Nd),
    ),
    (
        Field::NdTll,
        info("nd_tll", "NXM_NX_ND_TLL", (NXM1, 25, 6), 48, Needs::Nd),
    ),
    (
        Field::MplsLabel,
        info(
            "mpls_label",
            "OXM_OF_MPLS_LABEL",
            (OXM, 34, 4),
            20,
            Needs::Mpls,
        ),
    ),
    (
        Field::MplsTc,
        info("mpls_tc", "OXM_OF_MPLS_TC", (OXM, 35, 1), 3, Needs::Mpls),
    ),
    (
        Field::MplsBos,
        info("mpls_bos", "OXM_OF_MPLS_BOS", (OXM, 36, 1), 1, Needs::Mpls),
    ),
    (
        Field::MplsTtl,
        info("mpls_ttl", "NXM_NX_MPLS_TTL", (NXM1, 30, 1), 8, Needs::Mpls),
    ),
    (
        Field::CtState,
        info(
            "ct_state",
            "NXM_NX_CT_STATE",
            (NXM1, 105, 4),
            32,
            Needs::Nothing,
        ),
    ),
    (
        Field::CtZone,
        info(
            "ct_zone",
            "NXM_NX_CT_ZONE",
            (NXM1, 106, 2),
            16,
            Needs::Nothing,
        ),
    ),
    (
        Field::CtMark,
        info(
            "ct_mark",
            "NXM_NX_CT_MARK",
            (NXM1, 107, 4),
            32,
            Needs::Nothing,
        ),
    ),
    (
        Field::CtLabel,
        info(
            "ct_label",
            "NXM_NX_CT_LABEL",
            (NXM1, 108, 16),
            128,
            Needs::Nothing,
        ),
    ),
    (
        Field::CtNwProto,
        info(
            "ct_nw_proto",
            "NXM_NX_CT_NW_PROTO",
            (NXM1, 119, 1),
            8,
            Needs::Ct,
        ),
    ),
    (
        Field::CtNwSrc,
        info(
            "ct_nw_src",
            "NXM_NX_CT_NW_SRC",
            (NXM1, 120, 4),
            32,
            Needs::CtIpv4,
        ),
    ),
    (
        Field::CtNwDst,
        info(
            "ct_nw_dst",
            "NXM_NX_CT_NW_DST",
            (NXM1, 121, 4),
            32,
            Needs::CtIpv4,
        ),
    ),
    (
        Field::CtIpv6Src,
        info(
            "ct_ipv6_src",
            "NXM_NX_CT_IPV6_SRC",
            (NXM1, 122, 16),
            128,
            Needs::CtIpv6,
        ),
    ),
    (
        Field::CtIpv6Dst,
        info(
            "ct_ipv6_dst",
            "NXM_NX_CT_IPV6_DST",
            (NXM1, 123, 16),
            128,
            Needs::CtIpv6,
        ),
    ),
    (
        Field::CtTpSrc,
        info(
            "ct_tp_src",
            "NXM_NX_CT_TP_SRC",
            (NXM1, 124, 2),
            16,
            Needs::Ct,
        ),
    ),
    (
        Field::CtTpDst,
        info(
            "ct_tp_dst",
            "NXM_NX_CT_TP_DST",
            (NXM1, 125, 2),
            16,
            Needs::Ct,
        ),
    ),
];

/// The fields OpenFlow's basic class names too (OpenFlow 1.2 on sends these headers
/// rather than the NXM ones), by number; of the same length.
const OXM_BASIC: &[(u8, Field)] = &[
    // OXM_OF_IN_PORT (32 bits) names NXM_OF_IN_PORT's field: os-ken's learn
    // specs say it so.
    (0, Field::InPort),
    (3, Field::EthDst),
    (4, Field::EthSrc),
    (5, Field::EthType),
    (10, Field::NwProto),
    (11, Field::IpSrc),
    (12, Field::IpDst),
    (13, Field::TcpSrc),
    (14, Field::TcpDst),
    (15, Field::UdpSrc),
    (16, Field::UdpDst),
    (19, Field::IcmpType),
    (20, Field::IcmpCode),
    (21, Field::ArpOp),
    (22, Field::ArpSpa),
    (23, Field::ArpTpa),
    (24, Field::ArpSha),
    (25, Field::ArpTha),
    (26, Field::Ipv6Src),
    (27, Field::Ipv6Dst),
    (31, Field::NdTarget),
    (32, Field::NdSll),
    (33, Field::NdTll),
    (34, Field::MplsLabel),
    (35, Field::MplsTc),
    (36, Field::MplsBos),
    (38, Field::TunId),
];

/// Other names fields are read under (`ovs-ofctl`'s older spellings).
const ALIASES: &[(&str, Field)] = &[
    ("dl_src", Field::EthSrc),
    ("dl_dst", Field::EthDst),
    ("dl_type", Field::EthType),
    ("nw_src", Field::IpSrc),
    ("nw_dst", Field::IpDst),
    ("ip_proto", Field::NwProto),
    ("tunnel_id", Field::TunId),
    ("ipv6_nd_target", Field::NdTarget),
    // OpenFlow 1.2's OXM names, which `ovs-ofctl` reads in subfields too.
    ("OXM_OF_IN_PORT", Field::InPort),
    ("OXM_OF_METADATA", Field::Metadata),
    ("OXM_OF_ETH_DST", Field::EthDst),
    ("OXM_OF_ETH_SRC", Field::EthSrc),
    ("OXM_OF_ETH_TYPE", Field::EthType),
    ("OXM_OF_IP_PROTO", Field::NwProto),
    ("OXM_OF_IPV4_SRC", Field::IpSrc),
    ("OXM_OF_IPV4_DST", Field::IpDst),
    ("OXM_OF_TCP_SRC", Field::TcpSrc),
    ("OXM_OF_TCP_DST", Field::TcpDst),
    ("OXM_OF_UDP_SRC", Field::UdpSrc),
    ("OXM_OF_UDP_DST", Field::UdpDst),
    ("OXM_OF_ICMPV4_TYPE", Field::IcmpType),
    ("OXM_OF_ICMPV4_CODE", Field::IcmpCode),
    ("OXM_OF_ARP_OP", Field::ArpOp),
    ("OXM_OF_ARP_SPA", Field::ArpSpa),
    ("OXM_OF_ARP_TPA", Field::ArpTpa),
    ("OXM_OF_ARP_SHA", Field::ArpSha),
    ("OXM_OF_ARP_THA", Field::ArpTha),
    ("OXM_OF_IPV6_SRC", Field::Ipv6Src),
    ("OXM_OF_IPV6_DST", Field::Ipv6Dst),
    ("OXM_OF_IPV6_ND_TARGET", Field::NdTarget),
    ("OXM_OF_IPV6_ND_SLL", Field::NdSll),
    ("OXM_OF_IPV6_ND_TLL", Field::NdTll),
    ("OXM_OF_TUNNEL_ID", Field::TunId),
];

/// Sets the bits of `word` under `mask` to `v` shifted up by `shift`.
fn set_bits(word: &mut u32, mask: u32, shift: u32, v: u128) {
    *word = (*word & !mask) | (((v as u32) << shift) & mask);
}

/// A 48-bit value as a MAC address.
pub fn mac(v: u128) -> MacAddr {
    let b = v.to_be_bytes();
    MacAddr(b[10..16].try_into().expect("6 bytes"))
}

pub(crate) fn mac_num(m: MacAddr) -> u128 {
    m.0.iter().fold(0u128, |n, b| (n << 8) | u128::from(*b))
}

impl Field {
    pub fn info(self) -> &'static FieldInfo {
        match self {
            Field::Reg(n) => &REGS[usize::from(n)],
            Field::Xreg(n) => &XREGS[usize::from(n)],
            Field::Xxreg(n) => &XXREGS[usize::from(n)],
            f => {
                &OTHERS
                    .iter()
                    .find(|(g, _)| *g == f)
                    .expect("every field but the registers is in OTHERS")
                    .1
            }
        }
    }

    /// The field named `name` (its `ovs-ofctl` name, NXM name or an alias).
    pub fn by_name(name: &str) -> Option<Field> {
        let regs = (0..16u8).map(Field::Reg);
        let xregs = (0..8u8).map(Field::Xreg);
        let xxregs = (0..4u8).map(Field::Xxreg);
        let others = OTHERS.iter().map(|(f, _)| *f);
        regs.chain(xregs)
            .chain(xxregs)
            .chain(others)
            .find(|f| {
                let i = f.info();
                i.name == name || i.nxm_name.eq_ignore_ascii_case(name)
            })
            .or_else(|| {
                ALIASES
                    .iter()
                    .find(|(n, _)| n.eq_ignore_ascii_case(name))
                    .map(|(_, f)| *f)
            })
    }

    /// The field of an NXM/OXM class and number, when vsw knows it.
    pub fn by_header(class: u16, number: u8) -> Option<Field> {
        if class == NXM1 && number < 16 {
            return Some(Field::Reg(number));
        }
        if class == PKT_REGS && number < 8 {
            return Some(Field::Xreg(number));
        }
        if class == NXM1 && (111..115).contains(&number) {
            return Some(Field::Xxreg(number - 111));
        }
        if class == OXM {
            if let Some((_, f)) = OXM_BASIC.iter().find(|(n, _)| *n == number) {
                return Some(*f);
            }
        }
        OTHERS
            .iter()
            .find(|(_, i)| (i.header.0, i.header.1) == (class, number))
            .map(|(f, _)| *f)
    }

    /// Writing it changes only what translation sees, not the packet.
    pub fn is_pipelines(self) -> bool {
        matches!(
            self,
            Field::Reg(_)
                | Field::Xreg(_)
                | Field::Xxreg(_)
                | Field::PktMark
                | Field::Metadata
                | Field::InPort
        )
    }

    /// May be written (a pipeline field, or a packet field with a rewrite).
    pub fn is_writable(self) -> bool {
        !matches!(
            self,
            Field::EthType
                | Field::VlanTci
                | Field::NwProto
                | Field::MplsBos
                | Field::CtState
                | Field::CtZone
                | Field::CtMark
                | Field::CtLabel
                | Field::CtNwProto
                | Field::CtNwSrc
                | Field::CtNwDst
                | Field::CtIpv6Src
                | Field::CtIpv6Dst
                | Field::CtTpSrc
                | Field::CtTpDst
        )
    }

    /// Its value in `k`, as a number of [`FieldInfo::bits`] bits.
    pub fn read(self, k: &MatchKey) -> u128 {
        let p = &k.pipeline;
        match self {
            Field::Reg(n) => u128::from(p.regs[usize::from(n)]),
            Field::Xreg(n) => u128::from(p.xreg(usize::from(n))),
            Field::Xxreg(n) => p.xxreg(usize::from(n)),
            Field::PktMark => u128::from(p.pkt_mark),
            Field::Metadata => u128::from(k.metadata),
            Field::InPort => u128::from(k.in_port & 0xffff),
            Field::TunId => u128::from(k.tun_id),
            Field::TunMetadata0 => u128::from(k.tun_metadata0),
            Field::EthSrc => mac_num(k.dl_src),
            Field::EthDst => mac_num(k.dl_dst),
            Field::EthType => u128::from(k.dl_type),
            Field::VlanTci => u128::from(k.vlan_tci),
            Field::IpSrc | Field::ArpSpa => k.nw_src & ones(32),
            Field::IpDst | Field::ArpTpa => k.nw_dst & ones(32),
            Field::NwProto | Field::ArpOp => u128::from(k.nw_proto),
            Field::NwTtl => u128::from(k.nw_ttl),
            Field::Ipv6Src => k.nw_src,
            Field::Ipv6Dst => k.nw_dst,
            Field::NdTarget => k.nd_target,
            Field::TcpSrc | Field::UdpSrc | Field::IcmpType => u128::from(k.tp_src),
            Field::TcpDst | Field::UdpDst | Field::IcmpCode => u128::from(k.tp_dst),
            Field::ArpSha | Field::NdSll => mac_num(k.arp_sha),
            Field::ArpTha | Field::NdTll => mac_num(k.arp_tha),
            Field::MplsLabel => u128::from(mpls::label(k.label)),
            Field::MplsTc => u128::from(mpls::tc(k.label)),
            Field::MplsBos => u128::from(mpls::bos(k.label)),
            Field::MplsTtl => u128::from(mpls::ttl(k.label)),
            Field::CtState => u128::from(k.ct_state),
            Field::CtZone => u128::from(k.ct_zone),
            Field::CtMark => u128::from(k.ct_mark),
            Field::CtLabel => k.ct_label,
            Field::CtNwProto => u128::from(k.ct_nw_proto),
            Field::CtNwSrc => u128::from(k.ct_nw_src),
            Field::CtNwDst => u128::from(k.ct_nw_dst),
            Field::CtIpv6Src => k.ct_ipv6_src,
            Field::CtIpv6Dst => k.ct_ipv6_dst,
            Field::CtTpSrc => u128::from(k.ct_tp_src),
            Field::CtTpDst => u128::from(k.ct_tp_dst),
        }
    }

    /// Sets its value in `k` (the low [`FieldInfo::bits`] bits of `v`): for a mask,
    /// every bit given is looked at.
    pub fn write(self, k: &mut MatchKey, v: u128) {
        let p = &mut k.pipeline;
        match self {
            Field::Reg(n) => p.regs[usize::from(n)] = v as u32,
            Field::Xreg(n) => p.set_xreg(usize::from(n), v as u64),
            Field::Xxreg(n) => p.set_xxreg(usize::from(n), v),
            Field::PktMark => p.pkt_mark = v as u32,
            Field::Metadata => k.metadata = v as u64,
            Field::InPort => k.in_port = (v & 0xffff) as u32,
            Field::TunId => k.tun_id = v as u64,
            Field::TunMetadata0 => k.tun_metadata0 = v as u32,
            Field::EthSrc => k.dl_src = mac(v),
            Field::EthDst => k.dl_dst = mac(v),
            Field::EthType => k.dl_type = v as u16,
            Field::VlanTci => k.vlan_tci = v as u16,
            Field::IpSrc | Field::ArpSpa => k.nw_src = v & ones(32),
            Field::IpDst | Field::ArpTpa => k.nw_dst = v & ones(32),
            // The key keeps ARP's opcode where IP's protocol is, in 8 bits.
            Field::NwProto | Field::ArpOp => k.nw_proto = v as u8,
            Field::NwTtl => k.nw_ttl = v as u8,
            Field::Ipv6Src => k.nw_src = v,
            Field::Ipv6Dst => k.nw_dst = v,
            Field::NdTarget => k.nd_target = v,
            Field::TcpSrc | Field::UdpSrc | Field::IcmpType => k.tp_src = v as u16,
            Field::TcpDst | Field::UdpDst | Field::IcmpCode => k.tp_dst = v as u16,
            Field::ArpSha | Field::NdSll => k.arp_sha = mac(v),
            Field::ArpTha | Field::NdTll => k.arp_tha = mac(v),
            Field::MplsLabel => set_bits(&mut k.label, mpls::LABEL_MASK, mpls::LABEL_SHIFT, v),
            Field::MplsTc => set_bits(&mut k.label, mpls::TC_MASK, mpls::TC_SHIFT, v),
            Field::MplsBos => set_bits(&mut k.label, mpls::BOS_MASK, mpls::BOS_SHIFT, v),
            Field::MplsTtl => set_bits(&mut k.label, mpls::TTL_MASK, 0, v),
            // Written in a mask only (what a move from them looked at): no action
            // writes them (`is_writable`).
            Field::CtState => k.ct_state = v as u8,
            Field::CtZone => k.ct_zone = v as u16,
            Field::CtMark => k.ct_mark = v as u32,
            Field::CtLabel => k.ct_label = v,
            Field::CtNwProto => k.ct_nw_proto = v as u8,
            Field::CtNwSrc => k.ct_nw_src = v as u32,
            Field::CtNwDst => k.ct_nw_dst = v as u32,
            Field::CtIpv6Src => k.ct_ipv6_src = v,
            Field::CtIpv6Dst => k.ct_ipv6_dst = v,
            Field::CtTpSrc => k.ct_tp_src = v as u16,
            Field::CtTpDst => k.ct_tp_dst = v as u16,
        }
    }

    /// `value[/mask]` as `ovs-ofctl` prints a set-field of the field: addresses as
    /// addresses, ports and small numbers in decimal, the rest in hex (masks in hex,
    /// left out when whole).
    pub fn format_value(self, v: u128, m: u128) -> String {
        let full = ones(u32::from(self.info().bits));
        let hex_mask = || {
            if m == full {
                String::new()
            } else {
                format!("/{}", c_hex(m))
            }
        };
        match self {
            Field::EthSrc
            | Field::EthDst
            | Field::ArpSha
            | Field::ArpTha
            | Field::NdSll
            | Field::NdTll => format_mac(mac(v), mac(m)),
            Field::IpSrc
            | Field::IpDst
            | Field::ArpSpa
            | Field::ArpTpa
            | Field::CtNwSrc
            | Field::CtNwDst => format_ipv4(v, m),
            Field::Ipv6Src
            | Field::Ipv6Dst
            | Field::NdTarget
            | Field::CtIpv6Src
            | Field::CtIpv6Dst => format_ipv6(v, m),
            Field::InPort
            | Field::NwProto
            | Field::NwTtl
            | Field::TcpSrc
            | Field::TcpDst
            | Field::UdpSrc
            | Field::UdpDst
            | Field::IcmpType
            | Field::IcmpCode
            | Field::ArpOp
            | Field::MplsLabel
            | Field::MplsTc
            | Field::MplsBos
            | Field::MplsTtl
            | Field::CtNwProto
            | Field::CtTpSrc
            | Field::CtTpDst => format!("{v}{}", hex_mask()),
            _ => format!("{}{}", c_hex(v), hex_mask()),
        }
    }
}

/// Some bits of a field: `ofs` up to `ofs + n_bits - 1`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Subfield {
    pub field: Field,
    pub ofs: u8,
    pub n_bits: u8,
}

impl Subfield {
    /// The whole of `field`.
    pub fn whole(field: Field) -> Subfield {
        Subfield {
            field,
            ofs: 0,
            n_bits: field.info().bits,
        }
    }

    /// Bits `ofs`.. of `field`, refused unless they lie within it.
    pub fn new(field: Field, ofs: u32, n_bits: u32) -> Option<Subfield> {
        let bits = u32::from(field.info().bits);
        (n_bits >= 1 && ofs < bits && n_bits <= bits - ofs).then_some(Subfield {
            field,
            ofs: ofs as u8,
            n_bits: n_bits as u8,
        })
    }

    /// The bits it covers, in place.
    pub fn mask(&self) -> u128 {
        ones(u32::from(self.n_bits)) << self.ofs
    }

    /// Its bits of `k`, shifted down.
    pub fn read(&self, k: &MatchKey) -> u128 {
        (self.field.read(k) >> self.ofs) & ones(u32::from(self.n_bits))
    }

    /// `NXM_NX_REG0[]`, `NXM_NX_REG0[5]`, `NXM_NX_REG0[0..15]`, as `ovs-ofctl` prints.
    pub fn format(&self) -> String {
        let i = self.field.info();
        if self.ofs == 0 && self.n_bits == i.bits {
            format!("{}[]", i.nxm_name)
        } else if self.n_bits == 1 {
            format!("{}[{}]", i.nxm_name, self.ofs)
        } else {
            format!(
                "{}[{}..{}]",
                i.nxm_name,
                self.ofs,
                u32::from(self.ofs) + u32::from(self.n_bits) - 1
            )
        }
    }

    /// Reads `FIELD`, `FIELD[]`, `FIELD[N]` or `FIELD[A..B]` (either name).
    pub fn parse(action: &str, text: &str) -> Result<Subfield, FlowSyntaxError> {
        let (name, range) = match text.split_once('[') {
            Some((n, r)) => (
                n,
                Some(
                    r.strip_suffix(']')
                        .ok_or_else(|| bad(action, text, "a subfield ends with ]"))?,
                ),
            ),
            None => (text, None),
        };
        let field = Field::by_name(name).ok_or_else(|| bad(action, text, "no such field"))?;
        let bits = u128::from(field.info().bits);
        let (ofs, end) = match range {
            None | Some("") => return Ok(Subfield::whole(field)),
            Some(r) => match r.split_once("..") {
                Some((a, b)) => (parse_uint(action, a, bits)?, parse_uint(action, b, bits)?),
                None => {
                    let n = parse_uint(action, r, bits)?;
                    (n, n)
                }
            },
        };
        if end < ofs {
            return Err(bad(action, text, "a subfield's end comes before its start"));
        }
        Subfield::new(field, ofs as u32, (end - ofs + 1) as u32)
            .ok_or_else(|| bad(action, text, format!("the field has {bits} bits")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subfields_read_as_open_vswitch_writes_them() {
        let s = Subfield::parse("move", "NXM_NX_REG3[0..15]").unwrap();
        assert_eq!((s.field, s.ofs, s.n_bits), (Field::Reg(3), 0, 16));
        assert_eq!(s.format(), "NXM_NX_REG3[0..15]");
        let s = Subfield::parse("move", "reg0[5]").unwrap();
        assert_eq!(s.format(), "NXM_NX_REG0[5]");
        let s = Subfield::parse("move", "NXM_NX_XXREG0[]").unwrap();
        assert_eq!(s, Subfield::whole(Field::Xxreg(0)));
        assert_eq!(
            Subfield::parse("move", "eth_src").unwrap().format(),
            "NXM_OF_ETH_SRC[]"
        );
        assert!(Subfield::parse("move", "NXM_NX_REG0[0..32]").is_err());
        assert!(Subfield::parse("move", "NXM_NX_REG0[5..4]").is_err());
        assert!(Subfield::parse("move", "NXM_NX_NOPE[]").is_err());
    }

    #[test]
    fn the_trackers_fields_are_read_not_written() {
        use crate::syntax::{format_flow, parse_flow};
        let no_ports = |_: &str| None;
        let text = "ct_state=+est+trk,ip,actions=move:NXM_NX_CT_NW_DST[]->NXM_NX_REG1[],\
                    move:NXM_NX_CT_TP_DST[]->NXM_NX_REG2[0..15],\
                    move:NXM_NX_CT_LABEL[96..127]->NXM_NX_REG3[]";
        let flow = parse_flow(text, &no_ports).unwrap();
        assert!(
            format_flow(&flow).contains(
                "actions=move:NXM_NX_CT_NW_DST[]->NXM_NX_REG1[],\
                 move:NXM_NX_CT_TP_DST[]->NXM_NX_REG2[0..15],\
                 move:NXM_NX_CT_LABEL[96..127]->NXM_NX_REG3[]"
            ),
            "{}",
            format_flow(&flow)
        );
        for write in [
            "ip,actions=set_field:1->ct_state",
            "ip,actions=move:NXM_NX_REG1[]->NXM_NX_CT_MARK[]",
            "ip,actions=load:1->NXM_NX_CT_ZONE[]",
        ] {
            assert!(parse_flow(write, &no_ports).is_err(), "{write}");
        }
    }

    #[test]
    fn every_field_writes_what_it_reads() {
        let fields = (0..16u8)
            .map(Field::Reg)
            .chain((0..8).map(Field::Xreg))
            .chain((0..4).map(Field::Xxreg))
            .chain(OTHERS.iter().map(|(f, _)| *f));
        for f in fields {
            let mut k = MatchKey::default();
            // ARP's opcode is kept in 8 bits, as Open vSwitch keeps it; so are
            // ct_state's 8 states, of its 32 bits on the wire.
            let bits = if matches!(f, Field::ArpOp | Field::CtState) {
                8
            } else {
                f.info().bits
            };
            let v = 0x0123_4567_89ab_cdef_fedc_ba98_7654_3210 & ones(u32::from(bits));
            f.write(&mut k, v);
            assert_eq!(f.read(&k), v, "{f:?}");
            assert_eq!(Field::by_name(f.info().name), Some(f));
            let (class, number, len) = f.info().header;
            assert_eq!(Field::by_header(class, number), Some(f));
            if let Some((n, _)) = OXM_BASIC.iter().find(|(_, g)| *g == f) {
                assert_eq!(Field::by_header(OXM, *n), Some(f));
            }
            assert!(u32::from(len) * 8 >= u32::from(f.info().bits));
        }
    }
}
