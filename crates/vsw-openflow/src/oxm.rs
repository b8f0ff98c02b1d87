//! OXM: OpenFlow's type-length-value match fields (OpenFlow 1.2 on), and
//! `ofp_match`, the list of them a flow-mod, a flow-stats entry or a packet-in
//! carries.
//!
//! Each field is defined once in [`OXM_FIELDS`]: its number in the basic class,
//! its name (OpenFlow's), its value length, whether it may carry a mask, and what
//! the rest of the match must hold for it to mean anything (the spec's
//! prerequisites). Decoding checks every field against that table: a length that
//! does not fit, a mask on a field that takes none, a mask with bits the value has
//! outside it, a field twice, or a missing prerequisite is refused with the error the
//! spec names (BAD_MATCH and its code).

use crate::frame::len16;
use crate::reader::Reader;

/// The basic class, where every OpenFlow-defined field lives.
pub const OFPXMC_OPENFLOW_BASIC: u16 = 0x8000;
/// Nicira's extension class (NXM_1), where Open vSwitch keeps the fields OpenFlow
/// does not define, the tunnel's endpoints among them; `ovs-ofctl` sends them in an
/// OXM match as they are.
pub const NXM1_CLASS: u16 = 0x0001;
/// vsw numbers the NXM_1 fields it knows after the basic class's (whose numbers are
/// 7 bits): NXM_1 field `n` is field `NXM1_BASE + n` of [`OXM_FIELDS`].
pub const NXM1_BASE: u8 = 128;
/// NXM_NX_TUN_IPV4_SRC and _DST (NXM_1 fields 31 and 32).
pub const TUN_IPV4_SRC: u8 = NXM1_BASE + 31;
pub const TUN_IPV4_DST: u8 = NXM1_BASE + 32;
/// NXM_NX_TUN_METADATA0 (NXM_1 field 40): of variable length on the wire, as long as
/// the value written (`ovs-ofctl` sends `tun_metadata0=0x1234` in 2 bytes); vsw's
/// holds up to 4.
pub const TUN_METADATA0: u8 = NXM1_BASE + 40;
/// NXM_NX_TUN_FLAGS (NXM_1 field 104, 16 bits): the OAM flag.
pub const TUN_FLAGS: u8 = NXM1_BASE + 104;
/// NXM_NX_REG0 to REG15 (NXM_1 fields 0–15, 32 bits each).
pub const REG0: u8 = NXM1_BASE;
/// NXM_NX_XXREG0 to XXREG3 (NXM_1 fields 111–114, 128 bits each).
pub const XXREG0: u8 = NXM1_BASE + 111;
/// NXM_NX_IP_FRAG, IP_TTL, PKT_MARK, TCP_FLAGS and CONJ_ID (NXM_1 fields 26, 29,
/// 33, 34 and 37).
pub const IP_FRAG: u8 = NXM1_BASE + 26;
pub const IP_TTL: u8 = NXM1_BASE + 29;
pub const PKT_MARK: u8 = NXM1_BASE + 33;
pub const NX_TCP_FLAGS: u8 = NXM1_BASE + 34;
pub const CONJ_ID: u8 = NXM1_BASE + 37;
/// The connection tracker's fields: NXM_NX_CT_STATE (NXM_1 field 105, 32 bits of
/// which 8 are used), CT_ZONE (106), CT_MARK (107), CT_LABEL (108, 128 bits) and
/// CT_NW_PROTO (119).
pub const CT_STATE: u8 = NXM1_BASE + 105;
pub const CT_ZONE: u8 = NXM1_BASE + 106;
pub const CT_MARK: u8 = NXM1_BASE + 107;
pub const CT_LABEL: u8 = NXM1_BASE + 108;
pub const CT_NW_PROTO: u8 = NXM1_BASE + 119;
/// The connection's original direction: CT_NW_SRC (120), CT_NW_DST (121),
/// CT_IPV6_SRC (122), CT_IPV6_DST (123), CT_TP_SRC (124), CT_TP_DST (125).
pub const CT_NW_SRC: u8 = NXM1_BASE + 120;
pub const CT_NW_DST: u8 = NXM1_BASE + 121;
pub const CT_IPV6_SRC: u8 = NXM1_BASE + 122;
pub const CT_IPV6_DST: u8 = NXM1_BASE + 123;
pub const CT_TP_SRC: u8 = NXM1_BASE + 124;
pub const CT_TP_DST: u8 = NXM1_BASE + 125;
/// NXM_NX_MPLS_TTL (NXM_1 field 30): the outermost MPLS entry's TTL.
pub const MPLS_TTL: u8 = NXM1_BASE + 30;
/// OpenFlow 1.5's OXM_OF_PACKET_TYPE (basic class, field 44): namespace and type.
pub const PACKET_TYPE: u8 = 44;
/// OpenFlow 1.5's OXM_OF_TCP_FLAGS (basic class, field 42).
pub const TCP_FLAGS: u8 = 42;
/// The packet-register class (OFPXMC_PACKET_REGS), where OpenFlow 1.5 puts the
/// 64-bit registers Open vSwitch calls `xreg0`–`xreg7` (and sends every register
/// match in).
pub const PACKET_REGS_CLASS: u16 = 0x8001;
/// vsw numbers packet register `n` as field `XREG0 + n`: the basic class's numbers
/// stop well below it.
pub const XREG0: u8 = 96;
/// Open vSwitch's oldest class (NXM_0), whose NXM_OF_IN_PORT (16 bits) a load of
/// the input port names in OpenFlow 1.5: vsw numbers its field `n` as
/// `NXM0_BASE + n`.
pub const NXM0_CLASS: u16 = 0x0000;
pub const NXM0_BASE: u8 = 110;
/// NXM_OF_IN_PORT.
pub const NXM_IN_PORT: u8 = NXM0_BASE;
/// The experimenter class: the field's number is the experimenter's, whose ID
/// follows the header (and counts in its length).
pub const OFPXMC_EXPERIMENTER: u16 = 0xffff;
/// Open vSwitch's NSH fields (NXOXM_NSH): `nsh_flags` is its field 1, `nsh_mdtype`
/// 2, `nsh_np` 3, `nsh_spi` 4, `nsh_si` 5, `nsh_c1`–`nsh_c4` 6–9, `nsh_ttl` 10.
pub const NXOXM_NSH: u32 = 0x005a_d650;
/// vsw numbers NSH field `n` as `NSH_BASE + n`: above every basic field OpenFlow
/// defines (to 44), which the basic class is read up to.
pub const NSH_BASE: u8 = 80;
pub const NSH_FLAGS: u8 = NSH_BASE + 1;
pub const NSH_MDTYPE: u8 = NSH_BASE + 2;
pub const NSH_NP: u8 = NSH_BASE + 3;
pub const NSH_SPI: u8 = NSH_BASE + 4;
pub const NSH_SI: u8 = NSH_BASE + 5;
pub const NSH_C1: u8 = NSH_BASE + 6;
pub const NSH_TTL: u8 = NSH_BASE + 10;
/// The basic class's numbers read as its own (OpenFlow 1.5 defines 0–44).
const BASIC_END: u8 = 45;

impl OxmFieldDef {
    /// Whether a value of `n` bytes is one of this field: its length, or for a field
    /// of variable length 1 byte up to it.
    pub fn takes_len(&self, n: usize) -> bool {
        if self.var_len {
            (1..=usize::from(self.len)).contains(&n)
        } else {
            n == usize::from(self.len)
        }
    }
}

/// A field's class and number as they go on the wire (an experimenter field's
/// experimenter: [`experimenter_of`]).
pub fn wire_id(field: u8) -> (u16, u8) {
    if (NSH_FLAGS..=NSH_TTL).contains(&field) {
        (OFPXMC_EXPERIMENTER, field - NSH_BASE)
    } else if field >= NXM1_BASE {
        (NXM1_CLASS, field - NXM1_BASE)
    } else if (XREG0..XREG0 + 8).contains(&field) {
        (PACKET_REGS_CLASS, field - XREG0)
    } else if field >= NXM0_BASE {
        (NXM0_CLASS, field - NXM0_BASE)
    } else {
        (OFPXMC_OPENFLOW_BASIC, field)
    }
}

/// The field a class and number on the wire are, when vsw knows the class.
pub fn field_of_wire(class: u16, number: u8) -> Option<u8> {
    match class {
        OFPXMC_OPENFLOW_BASIC if number < BASIC_END => Some(number),
        NXM1_CLASS if number < NXM1_BASE => Some(NXM1_BASE + number),
        PACKET_REGS_CLASS if number < 8 => Some(XREG0 + number),
        NXM0_CLASS if number < NXM1_BASE - NXM0_BASE => Some(NXM0_BASE + number),
        _ => None,
    }
}

/// The experimenter ID an experimenter field's header carries after it.
pub fn experimenter_of(field: u8) -> Option<u32> {
    (NSH_FLAGS..=NSH_TTL).contains(&field).then_some(NXOXM_NSH)
}

/// The field an experimenter's ID and field number are, when vsw knows it.
pub fn field_of_experimenter(experimenter: u32, number: u8) -> Option<u8> {
    (experimenter == NXOXM_NSH && (1..=10).contains(&number)).then(|| NSH_BASE + number)
}

/// Writes a field's header: class, number, has-mask, the length of what follows
/// (`payload_len`: value and mask), and for an experimenter field its ID (which
/// the length counts).
pub fn put_header(out: &mut Vec<u8>, field: u8, hasmask: bool, payload_len: usize) {
    let (class, number) = wire_id(field);
    out.extend_from_slice(&class.to_be_bytes());
    out.push((number << 1) | u8::from(hasmask));
    match experimenter_of(field) {
        Some(exp) => {
            out.push((payload_len + 4) as u8);
            out.extend_from_slice(&exp.to_be_bytes());
        }
        None => out.push(payload_len as u8),
    }
}

/// A field as read off the wire: which one (`None`: one vsw does not know), whether
/// masked, its value and mask, and the bytes it took (header included).
pub(crate) struct RawField<'a> {
    pub field: Option<u8>,
    pub hasmask: bool,
    pub payload: &'a [u8],
    pub wire_len: usize,
}

/// Reads one field (header, an experimenter's ID, value and mask) off `r`;
/// `None` when the bytes end first.
pub(crate) fn read_field<'a>(r: &mut Reader<'a>) -> Option<RawField<'a>> {
    let class = r.u16()?;
    let fh = r.u8()?;
    let flen = usize::from(r.u8()?);
    let mut payload = r.bytes(flen)?;
    let field = if class == OFPXMC_EXPERIMENTER {
        let (exp, rest) = payload.split_first_chunk::<4>()?;
        payload = rest;
        field_of_experimenter(u32::from_be_bytes(*exp), fh >> 1)
    } else {
        field_of_wire(class, fh >> 1)
    };
    Some(RawField {
        field,
        hasmask: fh & 1 == 1,
        payload,
        wire_len: 4 + flen,
    })
}

/// `ofp_match` type: OXM (the only one from 1.2 on).
pub const OFPMT_OXM: u16 = 1;

/// What the rest of a match must hold for a field to mean anything.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Prereq {
    None,
    /// `eth_type` is one of these.
    EthType(&'static [u16]),
    /// `eth_type` is IPv4 or IPv6 and `ip_proto` is this.
    IpProto(u8),
    /// `eth_type` IPv4 and `ip_proto` ICMP.
    Icmpv4,
    /// `eth_type` IPv6 and `ip_proto` ICMPv6.
    Icmpv6,
    /// ICMPv6 with `icmpv6_type` one of these (neighbour discovery).
    Icmpv6Type(&'static [u8]),
    /// `vlan_vid` other than none (OFPVID_NONE).
    VlanPresent,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OxmFieldDef {
    pub field: u8,
    pub name: &'static str,
    /// Value length, bytes (the mask, when present, is as long again); the most, for
    /// a field of variable length.
    pub len: u8,
    /// Of variable length on the wire: as long as the value written, up to `len`.
    pub var_len: bool,
    pub maskable: bool,
    pub prereq: Prereq,
}

const IP: &[u16] = &[0x0800, 0x86dd];
const IPV4: &[u16] = &[0x0800];
const IPV6: &[u16] = &[0x86dd];
/// ARP and reverse ARP (Open vSwitch's ARP prerequisite takes either).
const ARP: &[u16] = &[0x0806, 0x8035];
const MPLS: &[u16] = &[0x8847, 0x8848];
const PBB: &[u16] = &[0x88e7];
const NSH: &[u16] = &[0x894f];
const ND_SOLICIT: u8 = 135;
const ND_ADVERT: u8 = 136;

const fn f(field: u8, name: &'static str, len: u8, maskable: bool, prereq: Prereq) -> OxmFieldDef {
    OxmFieldDef {
        field,
        name,
        len,
        var_len: false,
        maskable,
        prereq,
    }
}

/// A field of variable length, up to `len` bytes.
const fn var(field: u8, name: &'static str, len: u8, maskable: bool) -> OxmFieldDef {
    OxmFieldDef {
        var_len: true,
        ..f(field, name, len, maskable, Prereq::None)
    }
}

/// Every basic-class field of OpenFlow 1.3–1.5 that vsw knows, by number.
pub static OXM_FIELDS: &[OxmFieldDef] = &[
    f(0, "in_port", 4, false, Prereq::None),
    f(1, "in_phy_port", 4, false, Prereq::None),
    f(2, "metadata", 8, true, Prereq::None),
    f(3, "eth_dst", 6, true, Prereq::None),
    f(4, "eth_src", 6, true, Prereq::None),
    f(5, "eth_type", 2, false, Prereq::None),
    f(6, "vlan_vid", 2, true, Prereq::None),
    f(7, "vlan_pcp", 1, false, Prereq::VlanPresent),
    f(8, "ip_dscp", 1, false, Prereq::EthType(IP)),
    f(9, "ip_ecn", 1, false, Prereq::EthType(IP)),
    f(10, "ip_proto", 1, false, Prereq::EthType(IP)),
    f(11, "ipv4_src", 4, true, Prereq::EthType(IPV4)),
    f(12, "ipv4_dst", 4, true, Prereq::EthType(IPV4)),
    f(13, "tcp_src", 2, true, Prereq::IpProto(6)),
    f(14, "tcp_dst", 2, true, Prereq::IpProto(6)),
    f(15, "udp_src", 2, true, Prereq::IpProto(17)),
    f(16, "udp_dst", 2, true, Prereq::IpProto(17)),
    f(17, "sctp_src", 2, true, Prereq::IpProto(132)),
    f(18, "sctp_dst", 2, true, Prereq::IpProto(132)),
    f(19, "icmpv4_type", 1, false, Prereq::Icmpv4),
    f(20, "icmpv4_code", 1, false, Prereq::Icmpv4),
    f(21, "arp_op", 2, false, Prereq::EthType(ARP)),
    f(22, "arp_spa", 4, true, Prereq::EthType(ARP)),
    f(23, "arp_tpa", 4, true, Prereq::EthType(ARP)),
    f(24, "arp_sha", 6, true, Prereq::EthType(ARP)),
    f(25, "arp_tha", 6, true, Prereq::EthType(ARP)),
    f(26, "ipv6_src", 16, true, Prereq::EthType(IPV6)),
    f(27, "ipv6_dst", 16, true, Prereq::EthType(IPV6)),
    f(28, "ipv6_flabel", 4, true, Prereq::EthType(IPV6)),
    f(29, "icmpv6_type", 1, false, Prereq::Icmpv6),
    f(30, "icmpv6_code", 1, false, Prereq::Icmpv6),
    f(
        31,
        "ipv6_nd_target",
        16,
        false,
        Prereq::Icmpv6Type(&[ND_SOLICIT, ND_ADVERT]),
    ),
    f(
        32,
        "ipv6_nd_sll",
        6,
        false,
        Prereq::Icmpv6Type(&[ND_SOLICIT]),
    ),
    f(
        33,
        "ipv6_nd_tll",
        6,
        false,
        Prereq::Icmpv6Type(&[ND_ADVERT]),
    ),
    f(34, "mpls_label", 4, false, Prereq::EthType(MPLS)),
    f(35, "mpls_tc", 1, false, Prereq::EthType(MPLS)),
    f(36, "mpls_bos", 1, false, Prereq::EthType(MPLS)),
    f(MPLS_TTL, "mpls_ttl", 1, false, Prereq::EthType(MPLS)),
    f(37, "pbb_isid", 3, true, Prereq::EthType(PBB)),
    f(38, "tunnel_id", 8, true, Prereq::None),
    f(PACKET_TYPE, "packet_type", 4, false, Prereq::None),
    f(39, "ipv6_exthdr", 2, true, Prereq::EthType(IPV6)),
    f(TUN_IPV4_SRC, "tun_ipv4_src", 4, true, Prereq::None),
    f(TUN_IPV4_DST, "tun_ipv4_dst", 4, true, Prereq::None),
    var(TUN_METADATA0, "tun_metadata0", 4, true),
    f(TUN_FLAGS, "tun_flags", 2, true, Prereq::None),
    f(NXM_IN_PORT, "nxm_in_port", 2, false, Prereq::None),
    f(TCP_FLAGS, "tcp_flags", 2, true, Prereq::IpProto(6)),
    f(NX_TCP_FLAGS, "nx_tcp_flags", 2, true, Prereq::IpProto(6)),
    f(IP_FRAG, "nw_frag", 1, true, Prereq::EthType(IP)),
    f(IP_TTL, "nw_ttl", 1, false, Prereq::EthType(IP)),
    f(PKT_MARK, "pkt_mark", 4, true, Prereq::None),
    f(CONJ_ID, "conj_id", 4, false, Prereq::None),
    f(CT_STATE, "ct_state", 4, true, Prereq::None),
    f(CT_ZONE, "ct_zone", 2, false, Prereq::None),
    f(CT_MARK, "ct_mark", 4, true, Prereq::None),
    f(CT_LABEL, "ct_label", 16, true, Prereq::None),
    f(CT_NW_PROTO, "ct_nw_proto", 1, false, Prereq::None),
    f(CT_NW_SRC, "ct_nw_src", 4, true, Prereq::None),
    f(CT_NW_DST, "ct_nw_dst", 4, true, Prereq::None),
    f(CT_IPV6_SRC, "ct_ipv6_src", 16, true, Prereq::None),
    f(CT_IPV6_DST, "ct_ipv6_dst", 16, true, Prereq::None),
    f(CT_TP_SRC, "ct_tp_src", 2, true, Prereq::None),
    f(CT_TP_DST, "ct_tp_dst", 2, true, Prereq::None),
    f(REG0, "reg0", 4, true, Prereq::None),
    f(REG0 + 1, "reg1", 4, true, Prereq::None),
    f(REG0 + 2, "reg2", 4, true, Prereq::None),
    f(REG0 + 3, "reg3", 4, true, Prereq::None),
    f(REG0 + 4, "reg4", 4, true, Prereq::None),
    f(REG0 + 5, "reg5", 4, true, Prereq::None),
    f(REG0 + 6, "reg6", 4, true, Prereq::None),
    f(REG0 + 7, "reg7", 4, true, Prereq::None),
    f(REG0 + 8, "reg8", 4, true, Prereq::None),
    f(REG0 + 9, "reg9", 4, true, Prereq::None),
    f(REG0 + 10, "reg10", 4, true, Prereq::None),
    f(REG0 + 11, "reg11", 4, true, Prereq::None),
    f(REG0 + 12, "reg12", 4, true, Prereq::None),
    f(REG0 + 13, "reg13", 4, true, Prereq::None),
    f(REG0 + 14, "reg14", 4, true, Prereq::None),
    f(REG0 + 15, "reg15", 4, true, Prereq::None),
    f(XREG0, "xreg0", 8, true, Prereq::None),
    f(XREG0 + 1, "xreg1", 8, true, Prereq::None),
    f(XREG0 + 2, "xreg2", 8, true, Prereq::None),
    f(XREG0 + 3, "xreg3", 8, true, Prereq::None),
    f(XREG0 + 4, "xreg4", 8, true, Prereq::None),
    f(XREG0 + 5, "xreg5", 8, true, Prereq::None),
    f(XREG0 + 6, "xreg6", 8, true, Prereq::None),
    f(XREG0 + 7, "xreg7", 8, true, Prereq::None),
    f(XXREG0, "xxreg0", 16, true, Prereq::None),
    f(XXREG0 + 1, "xxreg1", 16, true, Prereq::None),
    f(XXREG0 + 2, "xxreg2", 16, true, Prereq::None),
    f(XXREG0 + 3, "xxreg3", 16, true, Prereq::None),
    f(NSH_FLAGS, "nsh_flags", 1, true, Prereq::EthType(NSH)),
    f(NSH_MDTYPE, "nsh_mdtype", 1, false, Prereq::EthType(NSH)),
    f(NSH_NP, "nsh_np", 1, false, Prereq::EthType(NSH)),
    f(NSH_SPI, "nsh_spi", 4, false, Prereq::EthType(NSH)),
    f(NSH_SI, "nsh_si", 1, false, Prereq::EthType(NSH)),
    f(NSH_C1, "nsh_c1", 4, true, Prereq::EthType(NSH)),
    f(NSH_C1 + 1, "nsh_c2", 4, true, Prereq::EthType(NSH)),
    f(NSH_C1 + 2, "nsh_c3", 4, true, Prereq::EthType(NSH)),
    f(NSH_C1 + 3, "nsh_c4", 4, true, Prereq::EthType(NSH)),
    f(NSH_TTL, "nsh_ttl", 1, false, Prereq::EthType(NSH)),
];

/// The bits a field's value may use, where fewer than its bytes hold (a value with a
/// bit above them is BAD_VALUE).
pub(crate) fn value_bits(field: u8) -> Option<u32> {
    match field {
        6 => Some(13),        // vlan_vid: 12 bits and OFPVID_PRESENT
        7 | 35 => Some(3),    // vlan_pcp, mpls_tc
        8 => Some(6),         // ip_dscp
        9 => Some(2),         // ip_ecn
        28 | 34 => Some(20),  // ipv6_flabel, mpls_label
        TUN_FLAGS => Some(1), // the OAM flag
        36 => Some(1),        // mpls_bos
        39 => Some(9),        // ipv6_exthdr: OFPIEH_NONEXT .. OFPIEH_UNSEQ
        TCP_FLAGS | NX_TCP_FLAGS => Some(12),
        IP_FRAG => Some(2),
        NSH_SPI => Some(24),
        NSH_TTL => Some(6),
        _ => None,
    }
}

pub fn field_def(field: u8) -> Option<&'static OxmFieldDef> {
    OXM_FIELDS.iter().find(|d| d.field == field)
}

/// One field of a match: its value and, when masked, its mask (as on the wire).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OxmField {
    pub field: u8,
    pub value: Vec<u8>,
    pub mask: Option<Vec<u8>>,
}

/// Why a match was refused: the BAD_MATCH code (OFPET_BAD_MATCH = 4) it is answered
/// with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BadMatch {
    #[error("a match of an unsupported type (BAD_MATCH/BAD_TYPE)")]
    BadType,
    #[error("a match whose length does not fit (BAD_MATCH/BAD_LEN)")]
    BadLen,
    #[error("a field of a class vsw does not know (BAD_MATCH/BAD_FIELD)")]
    BadField,
    #[error("a field of a value it cannot take (BAD_MATCH/BAD_VALUE)")]
    BadValue,
    #[error("a mask on a field that takes none (BAD_MATCH/BAD_MASK)")]
    BadMask,
    #[error("a field without what it needs in the match (BAD_MATCH/BAD_PREREQ)")]
    BadPrereq,
    #[error("a field given twice (BAD_MATCH/DUP_FIELD)")]
    DupField,
}

impl BadMatch {
    /// OFPET_BAD_MATCH's codes.
    pub fn code(self) -> u16 {
        match self {
            BadMatch::BadType => 0,
            BadMatch::BadLen => 1,
            BadMatch::BadField => 6,
            BadMatch::BadValue => 7,
            BadMatch::BadMask => 8,
            BadMatch::BadPrereq => 9,
            BadMatch::DupField => 10,
        }
    }
}

/// A whole match: its fields in the order given.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct OxmMatch {
    pub fields: Vec<OxmField>,
}

impl OxmMatch {
    pub fn get(&self, field: u8) -> Option<&OxmField> {
        self.fields.iter().find(|f| f.field == field)
    }

    /// An exact (unmasked) value of a field, as a number.
    fn exact(&self, field: u8) -> Option<u64> {
        let f = self.get(field)?;
        if f.mask.is_some() {
            return None;
        }
        Some(f.value.iter().fold(0u64, |n, b| (n << 8) | u64::from(*b)))
    }

    fn prereq_met(&self, p: Prereq) -> bool {
        // A packet type of the Ethernet-type namespace (1,T) says T (as Open
        // vSwitch takes `packet_type=(1,0x894f)` for NSH's fields).
        let by_type = self
            .exact(PACKET_TYPE)
            .and_then(|pt| vsw_flow::packet_type::ethertype(pt as u32));
        let eth = self.exact(5).map(|t| t as u16).or(by_type);
        let proto = self.exact(10).map(|p| p as u8);
        let ip = matches!(eth, Some(0x0800 | 0x86dd));
        match p {
            Prereq::None => true,
            Prereq::EthType(types) => eth.is_some_and(|t| types.contains(&t)),
            Prereq::IpProto(n) => ip && proto == Some(n),
            Prereq::Icmpv4 => eth == Some(0x0800) && proto == Some(1),
            Prereq::Icmpv6 => eth == Some(0x86dd) && proto == Some(58),
            Prereq::Icmpv6Type(types) => {
                eth == Some(0x86dd)
                    && proto == Some(58)
                    && self.exact(29).is_some_and(|t| types.contains(&(t as u8)))
            }
            // OFPVID_NONE (0) is "no tag"; anything with OFPVID_PRESENT is a tag.
            Prereq::VlanPresent => self
                .get(6)
                .is_some_and(|f| f.value.first().is_some_and(|b| b & 0x10 != 0)),
        }
    }

    /// `ofp_match` on the wire: type, length (without padding), fields, padding to 8.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.extend_from_slice(&OFPMT_OXM.to_be_bytes());
        out.extend_from_slice(&[0, 0]);
        self.encode_fields(out);
        let len = len16(out.len() - start);
        out[start + 2..start + 4].copy_from_slice(&len.to_be_bytes());
        let pad = usize::from(len).div_ceil(8) * 8 - usize::from(len);
        out.extend(std::iter::repeat_n(0u8, pad));
    }

    /// The fields alone, each header, value and mask (NXT_PACKET_IN2's metadata).
    pub fn encode_fields(&self, out: &mut Vec<u8>) {
        for f in &self.fields {
            let len = f.value.len() + f.mask.as_ref().map_or(0, Vec::len);
            put_header(out, f.field, f.mask.is_some(), len);
            out.extend_from_slice(&f.value);
            if let Some(m) = &f.mask {
                out.extend_from_slice(m);
            }
        }
    }

    /// The match at the front of `r` (padding included), checked field by field.
    pub(crate) fn decode(r: &mut Reader) -> Result<OxmMatch, BadMatch> {
        let kind = r.u16().ok_or(BadMatch::BadLen)?;
        if kind != OFPMT_OXM {
            return Err(BadMatch::BadType);
        }
        let len = usize::from(r.u16().ok_or(BadMatch::BadLen)?);
        let body = r
            .bytes(len.checked_sub(4).ok_or(BadMatch::BadLen)?)
            .ok_or(BadMatch::BadLen)?;
        r.bytes(len.div_ceil(8) * 8 - len).ok_or(BadMatch::BadLen)?;
        OxmMatch::checked(decode_fields(body)?)
    }

    /// `fields` as one match: none given twice, each with what it needs in the rest
    /// (the prerequisites), as every match vsw reads is checked.
    pub(crate) fn checked(fields: Vec<OxmField>) -> Result<OxmMatch, BadMatch> {
        let mut m = OxmMatch::default();
        for f in fields {
            if m.get(f.field).is_some() {
                return Err(BadMatch::DupField);
            }
            m.fields.push(f);
        }
        for f in &m.fields {
            let def = field_def(f.field).ok_or(BadMatch::BadField)?;
            if !m.prereq_met(def.prereq) {
                return Err(BadMatch::BadPrereq);
            }
        }
        Ok(m)
    }

    /// Decodes a match from the front of `buf` (as a flow-mod holds it); the bytes
    /// after it are returned.
    pub fn decode_from(buf: &[u8]) -> Result<(OxmMatch, &[u8]), BadMatch> {
        let mut r = Reader::new(buf);
        let m = OxmMatch::decode(&mut r)?;
        Ok((m, r.rest()))
    }
}

/// The type-length-value fields of `body` (a match without its header and
/// padding), each checked against its definition: length, mask, value bits.
pub(crate) fn decode_fields(body: &[u8]) -> Result<Vec<OxmField>, BadMatch> {
    let mut fields = Reader::new(body);
    let mut out = Vec::new();
    while !fields.is_empty() {
        let f = read_field(&mut fields).ok_or(BadMatch::BadLen)?;
        let field = f.field.ok_or(BadMatch::BadField)?;
        out.push(checked_field(field, f.hasmask, f.payload)?);
    }
    Ok(out)
}

/// One field's value (and mask, when `hasmask`: the second half of `payload`),
/// checked against the field's definition.
pub(crate) fn checked_field(
    field: u8,
    hasmask: bool,
    payload: &[u8],
) -> Result<OxmField, BadMatch> {
    let def = field_def(field).ok_or(BadMatch::BadField)?;
    let parts = if hasmask { 2 } else { 1 };
    let value_len = payload.len() / parts;
    if !payload.len().is_multiple_of(parts) || !def.takes_len(value_len) {
        return Err(BadMatch::BadLen);
    }
    if hasmask && !def.maskable {
        return Err(BadMatch::BadMask);
    }
    let (value, mask) = payload.split_at(value_len);
    if hasmask && value.iter().zip(mask).any(|(v, k)| v & !k != 0) {
        // A value bit outside its mask: the spec makes it an error.
        return Err(BadMatch::BadValue);
    }
    if let Some(bits) = value_bits(field) {
        let n = value.iter().fold(0u64, |n, b| (n << 8) | u64::from(*b));
        if n >> bits != 0 {
            return Err(BadMatch::BadValue);
        }
    }
    Ok(OxmField {
        field,
        value: value.to_vec(),
        mask: hasmask.then(|| mask.to_vec()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::field;

    #[test]
    fn a_tcp_match_round_trips_with_its_padding() {
        let m = OxmMatch {
            fields: vec![
                field(0, &[0, 0, 0, 1], None),
                field(5, &[0x08, 0x00], None),
                field(12, &[198, 18, 0, 0], Some(&[255, 255, 0, 0])),
                field(10, &[6], None),
                field(14, &[0, 80], None),
            ],
        };
        let mut wire = Vec::new();
        m.encode(&mut wire);
        assert_eq!(wire.len() % 8, 0);
        assert_eq!(&wire[..4], &[0, 1, 0, 4 + 8 + 6 + 12 + 5 + 6]);
        let (back, rest) = OxmMatch::decode_from(&wire).unwrap();
        assert_eq!((back, rest.len()), (m, 0));
    }

    #[test]
    fn refusals_follow_the_spec() {
        let enc = |fields: Vec<OxmField>| {
            let mut w = Vec::new();
            OxmMatch { fields }.encode(&mut w);
            OxmMatch::decode_from(&w).map(|(m, _)| m)
        };
        // tcp_dst without ip_proto=6: no prerequisite.
        assert_eq!(
            enc(vec![field(5, &[8, 0], None), field(14, &[0, 80], None)]),
            Err(BadMatch::BadPrereq)
        );
        assert_eq!(
            enc(vec![field(0, &[0, 0, 0, 1], Some(&[0, 0, 0, 1]))]),
            Err(BadMatch::BadMask),
            "in_port takes no mask"
        );
        assert_eq!(
            enc(vec![field(
                3,
                &[1, 0, 0, 0, 0, 1],
                Some(&[0xfe, 0, 0, 0, 0, 1])
            )]),
            Err(BadMatch::BadValue),
            "a value bit outside the mask"
        );
        assert_eq!(
            enc(vec![field(5, &[8, 0], None), field(5, &[8, 0], None)]),
            Err(BadMatch::DupField)
        );
        // OpenFlow 1.5's actset_output, which vsw does not match.
        assert_eq!(
            enc(vec![field(43, &[0, 0, 0, 1], None)]),
            Err(BadMatch::BadField)
        );
        assert_eq!(
            enc(vec![field(37, &[0, 0, 1], None)]),
            Err(BadMatch::BadPrereq),
            "pbb_isid without eth_type 0x88e7"
        );
        let v6 = field(5, &[0x86, 0xdd], None);
        assert_eq!(
            enc(vec![v6.clone(), field(39, &[2, 0], None)]),
            Err(BadMatch::BadValue),
            "an ipv6_exthdr bit past OFPIEH_UNSEQ"
        );
        assert!(enc(vec![v6, field(39, &[1, 0x44], Some(&[1, 0xff]))]).is_ok());
        assert_eq!(
            enc(vec![field(6, &[0x10, 5], None), field(7, &[3], None)]),
            Ok(OxmMatch {
                fields: vec![field(6, &[0x10, 5], None), field(7, &[3], None)]
            }),
            "vlan_pcp with a tag present"
        );
        assert_eq!(enc(vec![field(7, &[3], None)]), Err(BadMatch::BadPrereq));
        assert_eq!(
            enc(vec![field(5, &[8, 0], None), field(8, &[0x40], None)]),
            Err(BadMatch::BadValue),
            "ip_dscp is 6 bits"
        );
        let mut short = Vec::new();
        OxmMatch {
            fields: vec![field(0, &[0, 0, 0, 1], None)],
        }
        .encode(&mut short);
        short[7] = 3; // the field claims 3 bytes of value
        assert_eq!(OxmMatch::decode_from(&short), Err(BadMatch::BadLen));
    }

    #[test]
    fn tunnel_endpoints_travel_in_nicira_s_class() {
        let m = OxmMatch {
            fields: vec![
                field(TUN_IPV4_SRC, &[198, 18, 5, 1], None),
                field(TUN_IPV4_DST, &[198, 18, 5, 0], Some(&[255, 255, 255, 0])),
            ],
        };
        let mut wire = Vec::new();
        m.encode(&mut wire);
        // NXM_NX_TUN_IPV4_SRC as ovs-ofctl writes it: class 1, field 31, 4 bytes.
        assert_eq!(&wire[4..8], &[0x00, 0x01, 31 << 1, 4]);
        assert_eq!(&wire[12..16], &[0x00, 0x01, (32 << 1) | 1, 8]);
        assert_eq!(OxmMatch::decode_from(&wire).unwrap().0, m);
        // A Nicira field vsw does not know, and a class it does not know.
        let mut unknown = wire.clone();
        unknown[6] = 99 << 1;
        assert_eq!(OxmMatch::decode_from(&unknown), Err(BadMatch::BadField));
        // tun_metadata0 as long as its value (here 2 bytes), masked or not; never
        // longer than vsw's 4.
        for (value, mask) in [
            (&[0x12, 0x34][..], None),
            (&[0, 0, 0x12, 0x34][..], Some(&[0, 0, 0xff, 0xff][..])),
        ] {
            let m = OxmMatch {
                fields: vec![field(TUN_METADATA0, value, mask)],
            };
            let mut w = Vec::new();
            m.encode(&mut w);
            assert_eq!(
                &w[4..7],
                &[0x00, 0x01, (40 << 1) | u8::from(mask.is_some())]
            );
            assert_eq!(OxmMatch::decode_from(&w).unwrap().0, m);
        }
        let long = OxmMatch {
            fields: vec![field(TUN_METADATA0, &[1; 5], None)],
        };
        let mut w = Vec::new();
        long.encode(&mut w);
        assert_eq!(OxmMatch::decode_from(&w), Err(BadMatch::BadLen));
        let mut other_class = wire;
        other_class[5] = 0x02;
        assert_eq!(OxmMatch::decode_from(&other_class), Err(BadMatch::BadField));
    }

    #[test]
    fn nsh_fields_are_open_vswitchs_experimenter_fields() {
        let m = OxmMatch {
            fields: vec![
                field(5, &[0x89, 0x4f], None),
                field(NSH_SPI, &[0, 0, 1, 0x23], None),
                field(NSH_C1, &[0, 0, 0x0a, 0xbc], Some(&[0, 0, 0xff, 0xff])),
            ],
        };
        let mut wire = Vec::new();
        m.encode(&mut wire);
        // Class 0xffff, field 4, length 4 + 4, NXOXM_NSH, then the value: as
        // Open vSwitch writes nsh_spi.
        assert_eq!(
            &wire[10..22],
            &[0xff, 0xff, 4 << 1, 8, 0x00, 0x5a, 0xd6, 0x50, 0, 0, 1, 0x23]
        );
        assert_eq!(&wire[22..26], &[0xff, 0xff, (6 << 1) | 1, 12]);
        assert_eq!(OxmMatch::decode_from(&wire).unwrap().0, m);
        // Another experimenter's field 4, and NSH's without NSH.
        let mut other = wire.clone();
        other[17] = 0x51;
        assert_eq!(OxmMatch::decode_from(&other), Err(BadMatch::BadField));
        let bare = OxmMatch {
            fields: vec![field(NSH_SI, &[255], None)],
        };
        let mut w = Vec::new();
        bare.encode(&mut w);
        assert_eq!(OxmMatch::decode_from(&w), Err(BadMatch::BadPrereq));
        // A packet type of (1,0x894f) says NSH, as an Ethernet type would.
        let typed = OxmMatch {
            fields: vec![
                field(PACKET_TYPE, &[0, 1, 0x89, 0x4f], None),
                field(NSH_SI, &[255], None),
            ],
        };
        let mut w = Vec::new();
        typed.encode(&mut w);
        assert_eq!(OxmMatch::decode_from(&w).unwrap().0, typed);
        // An SPI past 24 bits; a header too short for its experimenter ID.
        let mut big = wire.clone();
        big[18] = 1;
        assert_eq!(OxmMatch::decode_from(&big), Err(BadMatch::BadValue));
        let mut short = wire;
        short[13] = 3;
        assert!(OxmMatch::decode_from(&short).is_err());
        // The basic class past OpenFlow's own numbers is not read as NSH's.
        assert_eq!(field_of_wire(OFPXMC_OPENFLOW_BASIC, NSH_SPI), None);
    }

    #[test]
    fn every_field_has_one_definition() {
        for (i, a) in OXM_FIELDS.iter().enumerate() {
            assert!(OXM_FIELDS[i + 1..]
                .iter()
                .all(|b| b.field != a.field && b.name != a.name));
        }
    }
}
