//! Match fields, each defined once (as Open vSwitch's meta-flow does): the name it is
//! written under, where it lives in the flow key, how its value is read and printed,
//! and what the rest of the match must promise for it to mean anything (OpenFlow's
//! prerequisites). Parsing, checking and printing a match all walk [`FIELDS`], in
//! the order `ovs-ofctl dump-flows` prints them: a new field is one entry here (and,
//! for a header vsw did not parse before, a member of `FlowKey` and its extraction).

use vsw_packet::key::{
    FRAG_ANY, FRAG_LATER, IPPROTO_ICMP, IPPROTO_ICMPV6, IPPROTO_SCTP, IPPROTO_TCP, IPPROTO_UDP,
    ND_NEIGHBOR_ADVERT, ND_NEIGHBOR_SOLICIT, NSH_FLAGS_SHIFT, NSH_MDTYPE_SHIFT, NSH_NP_SHIFT,
    NSH_TTL_SHIFT, TUN_FLAG_OAM, VLAN_CFI,
};
use vsw_packet::wire::ipv6::exthdr;
use vsw_packet::wire::mpls::{
    BOS_MASK, BOS_SHIFT, LABEL_MASK, LABEL_SHIFT, TC_MASK, TC_SHIFT, TTL_MASK,
};
use vsw_packet::wire::pbb::ISID_MASK;
use vsw_packet::{EtherType, FlowKey, MacAddr};

use crate::error::{FlowSyntaxError, PortResolver};
use crate::match_key::MatchKey;
use crate::values::{
    bad, c_hex, format_hex, format_ipv4, format_ipv6, format_mac, format_u16, masked16, parse_ipv4,
    parse_ipv6, parse_mac, parse_masked_uint, parse_port, parse_tcp_flags, parse_uint,
};

/// What the rest of a match must promise before a field (or an action) means anything.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Needs {
    Nothing,
    /// IPv4 (`ip`).
    Ipv4,
    /// IPv6 (`ipv6`).
    Ipv6,
    /// IPv4 or IPv6.
    Ip,
    /// IPv4 or ARP (their addresses share the key's `nw_src`/`nw_dst`).
    Ipv4OrArp,
    /// IPv4, IPv6 or ARP (a protocol number, or ARP's opcode).
    IpOrArp,
    /// A transport protocol with ports or types: TCP, UDP, SCTP, ICMP or ICMPv6.
    Transport,
    /// TCP, UDP or SCTP (ports a rewrite can change).
    Ports,
    Tcp,
    /// ARP, or an IPv6 neighbour solicitation or advertisement (link-layer addresses).
    ArpOrNd,
    /// An IPv6 neighbour solicitation or advertisement.
    Nd,
    /// ARP (`arp`).
    Arp,
    /// ICMP over IPv4 (`icmp`).
    Icmpv4,
    /// ICMPv6 (`icmp6`).
    Icmpv6,
    /// MPLS (`mpls` or `mplsm`: ethertype 0x8847 or 0x8848).
    Mpls,
    /// PBB (ethertype 0x88e7).
    Pbb,
    /// NSH (ethertype 0x894f).
    Nsh,
    /// A connection the tracker knows (Open vSwitch's CT prerequisite):
    /// `ct_state` with `+new`, `+est`, `+rel`, `+rpl`, `+snat` or `+dnat`, or with
    /// `+trk-inv`.
    Ct,
    /// That, of IPv4 (`ip`).
    CtIpv4,
    /// That, of IPv6 (`ipv6`).
    CtIpv6,
}

/// `ct_state`'s bits, as Open vSwitch numbers them.
const CS_VALID: u8 = 0x01 | 0x02 | 0x04 | 0x08 | 0x40 | 0x80;
const CS_INVALID: u8 = 0x10;
const CS_TRACKED: u8 = 0x20;

impl Needs {
    /// Whether the match (`v` under `m`) promises it.
    pub fn met(self, v: &FlowKey, m: &FlowKey) -> bool {
        let dl = (m.dl_type == 0xffff).then_some(v.dl_type);
        let proto = (m.nw_proto == 0xff).then_some(v.nw_proto);
        let ip = matches!(dl, Some(EtherType::IPV4 | EtherType::IPV6));
        // Reverse ARP has ARP's fields (Open vSwitch's ARP prerequisite is either).
        let arp = dl.is_some_and(EtherType::is_arp);
        let nd = dl == Some(EtherType::IPV6)
            && proto == Some(IPPROTO_ICMPV6)
            && m.tp_src == 0xffff
            && (v.tp_src == u16::from(ND_NEIGHBOR_SOLICIT)
                || v.tp_src == u16::from(ND_NEIGHBOR_ADVERT));
        let (state, set) = (v.ct_state, m.ct_state);
        let ct = state & set & CS_VALID != 0
            || (state & set & CS_TRACKED != 0 && set & CS_INVALID != 0 && state & CS_INVALID == 0);
        match self {
            Needs::Nothing => true,
            Needs::Ct => ct,
            Needs::CtIpv4 => ct && dl == Some(EtherType::IPV4),
            Needs::CtIpv6 => ct && dl == Some(EtherType::IPV6),
            Needs::Ipv4 => dl == Some(EtherType::IPV4),
            Needs::Ipv6 => dl == Some(EtherType::IPV6),
            Needs::Ip => ip,
            Needs::Ipv4OrArp => dl == Some(EtherType::IPV4) || arp,
            Needs::IpOrArp => ip || arp,
            Needs::Transport => {
                ip && matches!(
                    proto,
                    Some(IPPROTO_TCP | IPPROTO_UDP | IPPROTO_SCTP | IPPROTO_ICMP | IPPROTO_ICMPV6)
                )
            }
            Needs::Ports => ip && matches!(proto, Some(IPPROTO_TCP | IPPROTO_UDP | IPPROTO_SCTP)),
            Needs::Tcp => ip && proto == Some(IPPROTO_TCP),
            Needs::ArpOrNd => arp || nd,
            Needs::Nd => nd,
            Needs::Arp => arp,
            Needs::Icmpv4 => dl == Some(EtherType::IPV4) && proto == Some(IPPROTO_ICMP),
            Needs::Icmpv6 => dl == Some(EtherType::IPV6) && proto == Some(IPPROTO_ICMPV6),
            Needs::Mpls => matches!(dl, Some(EtherType::MPLS | EtherType::MPLS_MULTICAST)),
            Needs::Pbb => dl == Some(EtherType::PBB),
            Needs::Nsh => dl == Some(EtherType::NSH),
        }
    }

    /// How a user writes what it needs.
    pub fn describe(self) -> &'static str {
        match self {
            Needs::Nothing => "nothing",
            Needs::Ipv4 => "ip",
            Needs::Ipv6 => "ipv6 (dl_type=0x86dd)",
            Needs::Ip => "ip or ipv6",
            Needs::Ipv4OrArp => "ip, arp or rarp (dl_type=0x0800, 0x0806 or 0x8035)",
            Needs::IpOrArp => "ip, ipv6 or arp",
            Needs::Transport => "a transport protocol (tcp, udp, sctp or icmp)",
            Needs::Ports => "tcp, udp or sctp",
            Needs::Tcp => "tcp or tcp6",
            Needs::ArpOrNd => "arp, or icmp6 with icmp_type=135 or 136",
            Needs::Nd => "icmp6 with icmp_type=135 or 136",
            Needs::Arp => "arp or rarp",
            Needs::Icmpv4 => "icmp",
            Needs::Icmpv6 => "icmp6",
            Needs::Mpls => "mpls or mplsm (dl_type=0x8847 or 0x8848)",
            Needs::Pbb => "dl_type=0x88e7",
            Needs::Nsh => "dl_type=0x894f",
            Needs::Ct => "a tracked connection (ct_state=+trk-inv, +new, +est, …)",
            Needs::CtIpv4 => "a tracked connection (ct_state=+trk-inv, +new, +est, …) and ip",
            Needs::CtIpv6 => "a tracked connection (ct_state=+trk-inv, +new, +est, …) and ipv6",
        }
    }
}

/// A part of an MPLS packet's outermost label stack entry (the key's `label`),
/// matched whole and printed in decimal, as Open vSwitch has them. (Its masks,
/// not subfield.rs's `Field`: subfield.rs takes `Needs` from here, and the other
/// way round would make the two modules import each other.)
macro_rules! mpls_field {
    ($name:literal, $mask:expr, $shift:expr, $max:literal) => {
        FieldDef {
            name: $name,
            aliases: &[],
            slot: $name,
            needs: Needs::Mpls,
            parse: |n, t, v, m, _| {
                let x = parse_uint(n, t, $max)? as u32;
                v.label = (v.label & !$mask) | (x << $shift);
                m.label |= $mask;
                Ok(())
            },
            shown: |v, m| m.label & $mask != 0 && Needs::Mpls.met(v, m),
            print: |v, _| ((v.label & $mask) >> $shift).to_string(),
        }
    };
}

/// A field of an NSH header, kept in bits `$shift..` of the key's `$slot`
/// (vsw_packet's `NSH_FLAGS_SHIFT` says where), as Open vSwitch reads and prints
/// it: in hex when `$hex`, with a mask when `$maskable` and one is given.
macro_rules! nsh_field {
    ($name:literal, $aliases:expr, $slot:ident, $shift:expr, $max:expr, $maskable:literal, $hex:literal) => {
        FieldDef {
            name: $name,
            aliases: $aliases,
            slot: $name,
            needs: Needs::Nsh,
            parse: |n, t, v, m, _| {
                let max: u128 = $max;
                let (val, mask) = if $maskable {
                    parse_masked_uint(n, t, max)?
                } else {
                    (parse_uint(n, t, max)?, max)
                };
                // Open vSwitch knows MD types 1 and 2 only, in a match too.
                if n == "nsh_mdtype" && !matches!(val, 1 | 2) {
                    return Err(bad(n, t, "MD types are 1 and 2"));
                }
                let at = max << $shift;
                v.$slot = ((v.$slot as u128 & !at) | ((val & mask) << $shift)) as _;
                m.$slot = ((m.$slot as u128 & !at) | (mask << $shift)) as _;
                Ok(())
            },
            shown: |v, m| (m.$slot as u128 >> $shift) & $max != 0 && Needs::Nsh.met(v, m),
            print: |v, m| {
                let max: u128 = $max;
                let val = (v.$slot as u128 >> $shift) & max;
                let mask = (m.$slot as u128 >> $shift) & max;
                match ($hex, mask == max) {
                    (true, true) => format!("{val:#x}"),
                    (true, false) => format!("{val:#x}/{mask:#x}"),
                    (false, true) => val.to_string(),
                    (false, false) => format!("0x{val:02x}/0x{mask:02x}"),
                }
            },
        }
    };
}

/// Reads one field's written value into a match being built (`value`, `mask`).
type Parse = fn(
    name: &str,
    text: &str,
    value: &mut MatchKey,
    mask: &mut MatchKey,
    ports: &dyn PortResolver,
) -> Result<(), FlowSyntaxError>;

/// One match field.
pub struct FieldDef {
    /// The name it is printed under (and read under).
    pub name: &'static str,
    /// Other names it is read under.
    pub aliases: &'static [&'static str],
    /// The part of the flow key it sets: a field given twice, under any of the names
    /// that set this part, is refused.
    pub slot: &'static str,
    /// What the rest of the match must promise.
    pub needs: Needs,
    parse: Parse,
    /// Whether a match (value, mask) sets the field, and writes it under this name.
    shown: fn(&MatchKey, &MatchKey) -> bool,
    /// The field's value as printed (called only where `shown` says so).
    print: fn(&MatchKey, &MatchKey) -> String,
}

impl FieldDef {
    pub fn parse(
        &self,
        name: &str,
        text: &str,
        value: &mut MatchKey,
        mask: &mut MatchKey,
        ports: &dyn PortResolver,
    ) -> Result<(), FlowSyntaxError> {
        (self.parse)(name, text, value, mask, ports)
    }

    /// Whether the match (value `v`, mask `m`) sets the field and is written under
    /// this name.
    pub fn is_set(&self, v: &MatchKey, m: &MatchKey) -> bool {
        (self.shown)(v, m)
    }

    /// `name=value` when the match sets the field and writes it under this name.
    pub fn format(&self, v: &MatchKey, m: &MatchKey) -> Option<String> {
        (self.shown)(v, m).then(|| format!("{}={}", self.name, (self.print)(v, m)))
    }
}

/// Whether every field a match sets has what it needs (OpenFlow's prerequisites),
/// however the match was made: the first that does not, by name.
pub fn check_match(m: &crate::Match) -> Result<(), FlowSyntaxError> {
    let (v, k) = (m.value(), m.mask());
    match FIELDS.iter().find(|f| f.is_set(v, k) && !f.needs.met(v, k)) {
        Some(f) => Err(FlowSyntaxError::Prerequisite {
            field: f.name,
            needs: f.needs.describe(),
        }),
        None => Ok(()),
    }
}

/// The field read under `name`.
pub fn field(name: &str) -> Option<&'static FieldDef> {
    FIELDS
        .iter()
        .find(|f| f.name == name || f.aliases.contains(&name))
}

fn dl(v: &FlowKey, m: &FlowKey) -> Option<u16> {
    (m.dl_type == 0xffff).then_some(v.dl_type)
}

fn proto(v: &FlowKey, m: &FlowKey) -> Option<u8> {
    (m.nw_proto == 0xff).then_some(v.nw_proto)
}

/// Whether the match names its IP protocol through a shorthand (`tcp`, `udp6`, ...).
fn proto_in_shorthand(v: &FlowKey, m: &FlowKey) -> bool {
    let v6 = dl(v, m) == Some(EtherType::IPV6);
    matches!(dl(v, m), Some(EtherType::IPV4 | EtherType::IPV6))
        && match proto(v, m) {
            Some(IPPROTO_TCP | IPPROTO_UDP | IPPROTO_SCTP) => true,
            Some(IPPROTO_ICMP) => !v6,
            Some(IPPROTO_ICMPV6) => v6,
            _ => false,
        }
}

fn icmp(v: &FlowKey, m: &FlowKey) -> bool {
    matches!(proto(v, m), Some(IPPROTO_ICMP | IPPROTO_ICMPV6))
}

/// The shorthand that opens a printed match (`tcp`, `ipv6`, `arp`,
/// `dl_type=0x88b5`), if the match names an Ethernet type.
pub fn shorthand(v: &FlowKey, m: &FlowKey) -> Option<String> {
    let v6 = dl(v, m) == Some(EtherType::IPV6);
    Some(match dl(v, m)? {
        EtherType::IPV4 | EtherType::IPV6 => {
            let base = match proto(v, m) {
                Some(IPPROTO_TCP) => "tcp",
                Some(IPPROTO_UDP) => "udp",
                Some(IPPROTO_SCTP) => "sctp",
                Some(IPPROTO_ICMP) if !v6 => "icmp",
                Some(IPPROTO_ICMPV6) if v6 => return Some("icmp6".into()),
                _ => return Some(if v6 { "ipv6" } else { "ip" }.into()),
            };
            if v6 {
                format!("{base}6")
            } else {
                base.into()
            }
        }
        EtherType::ARP => "arp".into(),
        EtherType::RARP => "rarp".into(),
        EtherType::MPLS => "mpls".into(),
        EtherType::MPLS_MULTICAST => "mplsm".into(),
        t => format!("dl_type=0x{t:04x}"),
    })
}

/// The shorthands a match may start with: name, Ethernet type, IP protocol.
pub const SHORTHANDS: &[(&str, u16, Option<u8>)] = &[
    ("ip", EtherType::IPV4, None),
    ("ipv6", EtherType::IPV6, None),
    ("arp", EtherType::ARP, None),
    ("rarp", EtherType::RARP, None),
    ("mpls", EtherType::MPLS, None),
    ("mplsm", EtherType::MPLS_MULTICAST, None),
    ("tcp", EtherType::IPV4, Some(IPPROTO_TCP)),
    ("udp", EtherType::IPV4, Some(IPPROTO_UDP)),
    ("sctp", EtherType::IPV4, Some(IPPROTO_SCTP)),
    ("icmp", EtherType::IPV4, Some(IPPROTO_ICMP)),
    ("tcp6", EtherType::IPV6, Some(IPPROTO_TCP)),
    ("udp6", EtherType::IPV6, Some(IPPROTO_UDP)),
    ("sctp6", EtherType::IPV6, Some(IPPROTO_SCTP)),
    ("icmp6", EtherType::IPV6, Some(IPPROTO_ICMPV6)),
];

/// Sets the Ethernet type (a shorthand or `dl_type`), refusing one that contradicts
/// an earlier one.
pub fn set_dl_type(
    name: &str,
    t: u16,
    v: &mut FlowKey,
    m: &mut FlowKey,
) -> Result<(), FlowSyntaxError> {
    if m.dl_type != 0 && v.dl_type != t {
        return Err(bad(name, name, "conflicts with an earlier dl_type"));
    }
    v.dl_type = t;
    m.dl_type = 0xffff;
    Ok(())
}

/// `(NS,TYPE)`, each part in decimal up to 9 and in hex above, as Open vSwitch
/// prints a packet type.
pub fn format_packet_type(pt: u32) -> String {
    let part = |n: u32| {
        if n <= 9 {
            n.to_string()
        } else {
            format!("{n:#x}")
        }
    };
    let (ns, ty) = crate::packet_type::parts(pt);
    format!("({},{})", part(ns.into()), part(ty.into()))
}

/// Whether a match's packet type is of the Ethernet-type namespace (1,T): T is
/// then its `dl_type`, which is not printed again.
pub fn packet_type_says_dl_type(v: &MatchKey, m: &MatchKey) -> bool {
    m.pipeline.packet_type == u32::MAX
        && crate::packet_type::ethertype(v.pipeline.packet_type).is_some()
}

/// A 64-bit `value[/mask]`: the value with only the mask's bits, and the mask.
fn masked_u64(n: &str, t: &str) -> Result<(u64, u64), FlowSyntaxError> {
    let (val, mask) = parse_masked_uint(n, t, u128::from(u64::MAX))?;
    Ok(((val & mask) as u64, mask as u64))
}

/// A 64-bit value in hex, with its mask unless it is exact (zero as `0`, as C's
/// `%#x` prints it).
fn format_u64(v: u64, m: u64) -> String {
    if m == u64::MAX {
        c_hex(v.into())
    } else {
        format!("{}/{}", c_hex(v.into()), c_hex(m.into()))
    }
}

/// A 32-bit value in hex, with its mask unless it is exact (`reg0=0x5/0xff`).
fn format_u32(v: u32, m: u32) -> String {
    if m == u32::MAX {
        c_hex(v.into())
    } else {
        format!("{}/{}", c_hex(v.into()), c_hex(m.into()))
    }
}

/// `regN` (printed: Open vSwitch prints every register match as its 32-bit ones).
macro_rules! reg_field {
    ($n:literal) => {
        FieldDef {
            name: concat!("reg", $n),
            aliases: &[],
            slot: concat!("reg", $n),
            needs: Needs::Nothing,
            parse: |n, t, v, m, _| {
                let (val, mask) = parse_masked_uint(n, t, u128::from(u32::MAX))?;
                if m.pipeline.regs[$n] != 0 {
                    return Err(FlowSyntaxError::Duplicate(n.to_string()));
                }
                v.pipeline.regs[$n] = (val & mask) as u32;
                m.pipeline.regs[$n] = mask as u32;
                Ok(())
            },
            shown: |_, m| m.pipeline.regs[$n] != 0,
            print: |v, m| format_u32(v.pipeline.regs[$n], m.pipeline.regs[$n]),
        }
    };
}

/// `xregN` and `xxregN`: read, and printed as the registers they are made of.
macro_rules! wide_reg_field {
    ($name:literal, $bits:literal, $get:ident, $set:ident, $n:literal) => {
        FieldDef {
            name: $name,
            aliases: &[],
            slot: $name,
            needs: Needs::Nothing,
            parse: |n, t, v, m, _| {
                let (val, mask) = parse_masked_uint(n, t, crate::values::ones($bits))?;
                // The registers it is made of, given already (by any name).
                if m.pipeline.$get($n) != 0 {
                    return Err(FlowSyntaxError::Duplicate(n.to_string()));
                }
                v.pipeline.$set($n, (val & mask) as _);
                m.pipeline.$set($n, mask as _);
                Ok(())
            },
            shown: |_, _| false,
            print: |v, _| v.pipeline.$get($n).to_string(),
        }
    };
}

/// How many of [`FIELDS`] are printed before the shorthand (`ip`, `tcp`, …), as
/// Open vSwitch prints them: `pkt_mark`, `conj_id`, the tracker's eleven and
/// `packet_type`.
pub const LEADING_FIELDS: usize = 14;

/// Every match field, in printing order.
pub static FIELDS: &[FieldDef] = &[
    FieldDef {
        name: "pkt_mark",
        aliases: &[],
        slot: "pkt_mark",
        needs: Needs::Nothing,
        parse: |n, t, v, m, _| {
            let (val, mask) = parse_masked_uint(n, t, u128::from(u32::MAX))?;
            (v.pipeline.pkt_mark, m.pipeline.pkt_mark) = ((val & mask) as u32, mask as u32);
            Ok(())
        },
        shown: |_, m| m.pipeline.pkt_mark != 0,
        print: |v, m| format_u32(v.pipeline.pkt_mark, m.pipeline.pkt_mark),
    },
    // The conjunction a conjunctive match completed: exact only.
    FieldDef {
        name: "conj_id",
        aliases: &[],
        slot: "conj_id",
        needs: Needs::Nothing,
        parse: |n, t, v, m, _| {
            v.pipeline.conj_id = parse_uint(n, t, u128::from(u32::MAX))? as u32;
            m.pipeline.conj_id = u32::MAX;
            Ok(())
        },
        shown: |_, m| m.pipeline.conj_id != 0,
        print: |v, _| v.pipeline.conj_id.to_string(),
    },
    // The connection tracker's fields (what the last `ct` said of the packet),
    // printed as Open vSwitch prints them.
    FieldDef {
        name: "ct_state",
        aliases: &[],
        slot: "ct_state",
        needs: Needs::Nothing,
        parse: |n, t, v, m, _| {
            (v.ct_state, m.ct_state) = crate::values::parse_ct_state(n, t)?;
            Ok(())
        },
        shown: |_, m| m.ct_state != 0,
        print: |v, m| crate::values::format_ct_state(v.ct_state, m.ct_state),
    },
    FieldDef {
        name: "ct_zone",
        aliases: &[],
        slot: "ct_zone",
        needs: Needs::Nothing,
        parse: |n, t, v, m, _| {
            (v.ct_zone, m.ct_zone) = masked16(n, t)?;
            Ok(())
        },
        shown: |_, m| m.ct_zone != 0,
        print: |v, m| {
            if m.ct_zone == u16::MAX {
                v.ct_zone.to_string()
            } else {
                format!("{}/{}", c_hex(v.ct_zone.into()), c_hex(m.ct_zone.into()))
            }
        },
    },
    FieldDef {
        name: "ct_mark",
        aliases: &[],
        slot: "ct_mark",
        needs: Needs::Nothing,
        parse: |n, t, v, m, _| {
            let (val, mask) = parse_masked_uint(n, t, u128::from(u32::MAX))?;
            (v.ct_mark, m.ct_mark) = ((val & mask) as u32, mask as u32);
            Ok(())
        },
        shown: |_, m| m.ct_mark != 0,
        print: |v, m| format_u32(v.ct_mark, m.ct_mark),
    },
    FieldDef {
        name: "ct_label",
        aliases: &[],
        slot: "ct_label",
        needs: Needs::Nothing,
        parse: |n, t, v, m, _| {
            let (val, mask) = parse_masked_uint(n, t, u128::MAX)?;
            (v.ct_label, m.ct_label) = (val & mask, mask);
            Ok(())
        },
        shown: |_, m| m.ct_label != 0,
        print: |v, m| {
            let (val, mask) = (v.ct_label, m.ct_label);
            if mask == u128::MAX {
                format!("{val:#x}")
            } else {
                format!("{val:#x}/{mask:#x}")
            }
        },
    },
    // The connection's original direction, as the tracker said (read-only).
    FieldDef {
        name: "ct_nw_src",
        aliases: &[],
        slot: "ct_nw_src",
        needs: Needs::CtIpv4,
        parse: |n, t, v, m, _| {
            let (val, mask) = parse_ipv4(n, t)?;
            (v.ct_nw_src, m.ct_nw_src) = (val as u32, mask as u32);
            Ok(())
        },
        shown: |_, m| m.ct_nw_src != 0,
        print: |v, m| format_ipv4(v.ct_nw_src.into(), m.ct_nw_src.into()),
    },
    FieldDef {
        name: "ct_ipv6_src",
        aliases: &[],
        slot: "ct_ipv6_src",
        needs: Needs::CtIpv6,
        parse: |n, t, v, m, _| {
            (v.ct_ipv6_src, m.ct_ipv6_src) = parse_ipv6(n, t)?;
            Ok(())
        },
        shown: |_, m| m.ct_ipv6_src != 0,
        print: |v, m| format_ipv6(v.ct_ipv6_src, m.ct_ipv6_src),
    },
    FieldDef {
        name: "ct_nw_dst",
        aliases: &[],
        slot: "ct_nw_dst",
        needs: Needs::CtIpv4,
        parse: |n, t, v, m, _| {
            let (val, mask) = parse_ipv4(n, t)?;
            (v.ct_nw_dst, m.ct_nw_dst) = (val as u32, mask as u32);
            Ok(())
        },
        shown: |_, m| m.ct_nw_dst != 0,
        print: |v, m| format_ipv4(v.ct_nw_dst.into(), m.ct_nw_dst.into()),
    },
    FieldDef {
        name: "ct_ipv6_dst",
        aliases: &[],
        slot: "ct_ipv6_dst",
        needs: Needs::CtIpv6,
        parse: |n, t, v, m, _| {
            (v.ct_ipv6_dst, m.ct_ipv6_dst) = parse_ipv6(n, t)?;
            Ok(())
        },
        shown: |_, m| m.ct_ipv6_dst != 0,
        print: |v, m| format_ipv6(v.ct_ipv6_dst, m.ct_ipv6_dst),
    },
    FieldDef {
        name: "ct_nw_proto",
        aliases: &[],
        slot: "ct_nw_proto",
        needs: Needs::Ct,
        parse: |n, t, v, m, _| {
            v.ct_nw_proto = parse_uint(n, t, 0xff)? as u8;
            m.ct_nw_proto = u8::MAX;
            Ok(())
        },
        shown: |_, m| m.ct_nw_proto != 0,
        print: |v, _| v.ct_nw_proto.to_string(),
    },
    FieldDef {
        name: "ct_tp_src",
        aliases: &[],
        slot: "ct_tp_src",
        needs: Needs::Ct,
        parse: |n, t, v, m, _| {
            (v.ct_tp_src, m.ct_tp_src) = masked16(n, t)?;
            Ok(())
        },
        shown: |_, m| m.ct_tp_src != 0,
        print: |v, m| format_u16(v.ct_tp_src, m.ct_tp_src),
    },
    FieldDef {
        name: "ct_tp_dst",
        aliases: &[],
        slot: "ct_tp_dst",
        needs: Needs::Ct,
        parse: |n, t, v, m, _| {
            (v.ct_tp_dst, m.ct_tp_dst) = masked16(n, t)?;
            Ok(())
        },
        shown: |_, m| m.ct_tp_dst != 0,
        print: |v, m| format_u16(v.ct_tp_dst, m.ct_tp_dst),
    },
    // A packet's type (OpenFlow 1.5's): `(NS,TYPE)`, exact; (1,T) says the
    // Ethernet type T too, which is then not printed (as Open vSwitch prints it).
    // A packet's type (OpenFlow 1.5's): `(NS,TYPE)`, exact; (1,T) says the
    // Ethernet type T too, which is then not printed (as Open vSwitch prints it).
    FieldDef {
        name: "packet_type",
        aliases: &[],
        slot: "packet_type",
        needs: Needs::Nothing,
        parse: |n, t, v, m, _| {
            let inner = t
                .strip_prefix('(')
                .and_then(|r| r.strip_suffix(')'))
                .ok_or_else(|| bad(n, t, "written (NS,TYPE), as (1,0x894f)"))?;
            let (ns, ty) = inner
                .split_once(',')
                .ok_or_else(|| bad(n, t, "written (NS,TYPE), as (1,0x894f)"))?;
            let ns = parse_uint(n, ns.trim(), 0xffff)? as u16;
            let ty = parse_uint(n, ty.trim(), 0xffff)? as u16;
            let pt = crate::packet_type::new(ns, ty);
            (v.pipeline.packet_type, m.pipeline.packet_type) = (pt, u32::MAX);
            if let Some(t) = crate::packet_type::ethertype(pt) {
                set_dl_type(n, t, v, m)?;
            }
            Ok(())
        },
        shown: |_, m| m.pipeline.packet_type != 0,
        print: |v, _| format_packet_type(v.pipeline.packet_type),
    },
    reg_field!(0),
    reg_field!(1),
    reg_field!(2),
    reg_field!(3),
    reg_field!(4),
    reg_field!(5),
    reg_field!(6),
    reg_field!(7),
    reg_field!(8),
    reg_field!(9),
    reg_field!(10),
    reg_field!(11),
    reg_field!(12),
    reg_field!(13),
    reg_field!(14),
    reg_field!(15),
    wide_reg_field!("xreg0", 64, xreg, set_xreg, 0),
    wide_reg_field!("xreg1", 64, xreg, set_xreg, 1),
    wide_reg_field!("xreg2", 64, xreg, set_xreg, 2),
    wide_reg_field!("xreg3", 64, xreg, set_xreg, 3),
    wide_reg_field!("xreg4", 64, xreg, set_xreg, 4),
    wide_reg_field!("xreg5", 64, xreg, set_xreg, 5),
    wide_reg_field!("xreg6", 64, xreg, set_xreg, 6),
    wide_reg_field!("xreg7", 64, xreg, set_xreg, 7),
    wide_reg_field!("xxreg0", 128, xxreg, set_xxreg, 0),
    wide_reg_field!("xxreg1", 128, xxreg, set_xxreg, 1),
    wide_reg_field!("xxreg2", 128, xxreg, set_xxreg, 2),
    wide_reg_field!("xxreg3", 128, xxreg, set_xxreg, 3),
    FieldDef {
        name: "tun_id",
        aliases: &["tunnel_id"],
        slot: "tun_id",
        needs: Needs::Nothing,
        parse: |n, t, v, m, _| {
            (v.tun_id, m.tun_id) = masked_u64(n, t)?;
            Ok(())
        },
        shown: |_, m| m.tun_id != 0,
        print: |v, m| format_u64(v.tun_id, m.tun_id),
    },
    // The tunnel's outer IPv4 endpoints (Open vSwitch's `tun_src`/`tun_dst`, also
    // spelled `tun_ipv4_src`/`_dst`): the key holds them as u32s.
    FieldDef {
        name: "tun_src",
        aliases: &["tun_ipv4_src"],
        slot: "tun_src",
        needs: Needs::Nothing,
        parse: |n, t, v, m, _| {
            let (a, k) = parse_ipv4(n, t)?;
            (v.tun_src, m.tun_src) = (a as u32, k as u32);
            Ok(())
        },
        shown: |_, m| m.tun_src != 0,
        print: |v, m| format_ipv4(v.tun_src.into(), m.tun_src.into()),
    },
    FieldDef {
        name: "tun_dst",
        aliases: &["tun_ipv4_dst"],
        slot: "tun_dst",
        needs: Needs::Nothing,
        parse: |n, t, v, m, _| {
            let (a, k) = parse_ipv4(n, t)?;
            (v.tun_dst, m.tun_dst) = (a as u32, k as u32);
            Ok(())
        },
        shown: |_, m| m.tun_dst != 0,
        print: |v, m| format_ipv4(v.tun_dst.into(), m.tun_dst.into()),
    },
    // Open vSwitch's syntax: `+oam` (the flag set), `-oam` (clear), or a number.
    FieldDef {
        name: "tun_flags",
        aliases: &[],
        slot: "tun_flags",
        needs: Needs::Nothing,
        parse: |n, t, v, m, _| {
            (v.tun_flags, m.tun_flags) = match t {
                "+oam" | "oam" => (TUN_FLAG_OAM, TUN_FLAG_OAM),
                "-oam" => (0, TUN_FLAG_OAM),
                _ => {
                    let (val, mask) = parse_masked_uint(n, t, u128::from(TUN_FLAG_OAM))?;
                    ((val & mask) as u16, mask as u16)
                }
            };
            Ok(())
        },
        shown: |_, m| m.tun_flags != 0,
        print: |v, _| {
            if v.tun_flags & TUN_FLAG_OAM != 0 {
                "+oam".into()
            } else {
                "-oam".into()
            }
        },
    },
    FieldDef {
        name: "tun_metadata0",
        aliases: &[],
        slot: "tun_metadata0",
        needs: Needs::Nothing,
        parse: |n, t, v, m, _| {
            let (val, mask) = parse_masked_uint(n, t, u128::from(u32::MAX))?;
            (v.tun_metadata0, m.tun_metadata0) = ((val & mask) as u32, mask as u32);
            Ok(())
        },
        shown: |_, m| m.tun_metadata0 != 0,
        print: |v, m| format_u64(v.tun_metadata0.into(), m.tun_metadata0.into()),
    },
    FieldDef {
        name: "metadata",
        aliases: &[],
        slot: "metadata",
        needs: Needs::Nothing,
        parse: |n, t, v, m, _| {
            (v.metadata, m.metadata) = masked_u64(n, t)?;
            Ok(())
        },
        shown: |_, m| m.metadata != 0,
        print: |v, m| format_u64(v.metadata, m.metadata),
    },
    FieldDef {
        name: "in_port",
        aliases: &[],
        slot: "in_port",
        needs: Needs::Nothing,
        parse: |n, t, v, m, ports| {
            v.in_port = parse_port(n, t, ports)?;
            m.in_port = u32::MAX;
            Ok(())
        },
        shown: |_, m| m.in_port != 0,
        print: |v, _| v.in_port.to_string(),
    },
    FieldDef {
        name: "dl_vlan",
        aliases: &[],
        slot: "dl_vlan",
        needs: Needs::Nothing,
        parse: |n, t, v, m, _| {
            let vid = parse_uint(n, t, 0xffff)? as u16;
            m.vlan_tci |= 0x1fff;
            if vid == 0xffff {
                v.vlan_tci = 0;
            } else if vid > 4095 {
                return Err(bad(n, t, "a VLAN id is 0..4095, or 0xffff for untagged"));
            } else {
                v.vlan_tci = (v.vlan_tci & 0xe000) | VLAN_CFI | vid;
            }
            Ok(())
        },
        shown: |v, m| (m.vlan_tci == 0xffff && v.vlan_tci & VLAN_CFI != 0) || m.vlan_tci == 0x1fff,
        print: |v, m| {
            if m.vlan_tci == 0x1fff && v.vlan_tci == 0 {
                "0xffff".into()
            } else {
                (v.vlan_tci & 0x0fff).to_string()
            }
        },
    },
    FieldDef {
        name: "dl_vlan_pcp",
        aliases: &[],
        slot: "dl_vlan_pcp",
        needs: Needs::Nothing,
        parse: |n, t, v, m, _| {
            let pcp = parse_uint(n, t, 7)? as u16;
            v.vlan_tci = (v.vlan_tci & !0xe000) | VLAN_CFI | (pcp << 13);
            m.vlan_tci |= 0xe000 | VLAN_CFI;
            Ok(())
        },
        shown: |v, m| matches!(m.vlan_tci, 0xf000 | 0xffff) && v.vlan_tci & VLAN_CFI != 0,
        print: |v, _| (v.vlan_tci >> 13).to_string(),
    },
    FieldDef {
        name: "vlan_tci",
        aliases: &[],
        slot: "vlan_tci",
        needs: Needs::Nothing,
        parse: |n, t, v, m, _| {
            let (val, mask) = parse_masked_uint(n, t, 0xffff)?;
            v.vlan_tci = val as u16;
            m.vlan_tci = mask as u16;
            Ok(())
        },
        // What dl_vlan and dl_vlan_pcp cannot say.
        shown: |v, m| {
            m.vlan_tci != 0
                && !(matches!(m.vlan_tci, 0xf000 | 0xffff) && v.vlan_tci & VLAN_CFI != 0)
                && m.vlan_tci != 0x1fff
        },
        print: |v, m| format!("0x{:04x}/0x{:04x}", v.vlan_tci, m.vlan_tci),
    },
    FieldDef {
        name: "dl_src",
        aliases: &[],
        slot: "dl_src",
        needs: Needs::Nothing,
        parse: |n, t, v, m, _| {
            (v.dl_src, m.dl_src) = parse_mac(n, t)?;
            Ok(())
        },
        shown: |_, m| m.dl_src != MacAddr::ZERO,
        print: |v, m| format_mac(v.dl_src, m.dl_src),
    },
    FieldDef {
        name: "dl_dst",
        aliases: &[],
        slot: "dl_dst",
        needs: Needs::Nothing,
        parse: |n, t, v, m, _| {
            (v.dl_dst, m.dl_dst) = parse_mac(n, t)?;
            Ok(())
        },
        shown: |_, m| m.dl_dst != MacAddr::ZERO,
        print: |v, m| format_mac(v.dl_dst, m.dl_dst),
    },
    FieldDef {
        name: "dl_type",
        aliases: &[],
        // Shorthands set it too; it may repeat as long as it agrees.
        slot: "",
        needs: Needs::Nothing,
        parse: |n, t, v, m, _| {
            let ty = parse_uint(n, t, 0xffff)? as u16;
            set_dl_type(n, ty, v, m)
        },
        // Printed as the shorthand that opens the match.
        shown: |_, _| false,
        print: |v, _| format!("0x{:04x}", v.dl_type),
    },
    FieldDef {
        name: "nw_src",
        aliases: &["arp_spa"],
        slot: "nw_src",
        needs: Needs::Ipv4OrArp,
        parse: |n, t, v, m, _| {
            (v.nw_src, m.nw_src) = parse_ipv4(n, t)?;
            Ok(())
        },
        // The slot holds an IPv6 packet's address and NSH's fields too.
        shown: |v, m| m.nw_src != 0 && !matches!(dl(v, m), Some(EtherType::IPV6 | EtherType::NSH)),
        print: |v, m| format_ipv4(v.nw_src, m.nw_src),
    },
    FieldDef {
        name: "nw_dst",
        aliases: &["arp_tpa"],
        slot: "nw_dst",
        needs: Needs::Ipv4OrArp,
        parse: |n, t, v, m, _| {
            (v.nw_dst, m.nw_dst) = parse_ipv4(n, t)?;
            Ok(())
        },
        // The slot holds an IPv6 packet's address and NSH's fields too.
        shown: |v, m| m.nw_dst != 0 && !matches!(dl(v, m), Some(EtherType::IPV6 | EtherType::NSH)),
        print: |v, m| format_ipv4(v.nw_dst, m.nw_dst),
    },
    FieldDef {
        name: "ipv6_src",
        aliases: &[],
        slot: "nw_src",
        needs: Needs::Ipv6,
        parse: |n, t, v, m, _| {
            (v.nw_src, m.nw_src) = parse_ipv6(n, t)?;
            Ok(())
        },
        shown: |v, m| m.nw_src != 0 && dl(v, m) == Some(EtherType::IPV6),
        print: |v, m| format_ipv6(v.nw_src, m.nw_src),
    },
    FieldDef {
        name: "ipv6_dst",
        aliases: &[],
        slot: "nw_dst",
        needs: Needs::Ipv6,
        parse: |n, t, v, m, _| {
            (v.nw_dst, m.nw_dst) = parse_ipv6(n, t)?;
            Ok(())
        },
        shown: |v, m| m.nw_dst != 0 && dl(v, m) == Some(EtherType::IPV6),
        print: |v, m| format_ipv6(v.nw_dst, m.nw_dst),
    },
    FieldDef {
        name: "nw_proto",
        aliases: &["arp_op"],
        slot: "nw_proto",
        needs: Needs::IpOrArp,
        parse: |n, t, v, m, _| {
            v.nw_proto = parse_uint(n, t, 0xff)? as u8;
            m.nw_proto = 0xff;
            Ok(())
        },
        shown: |v, m| m.nw_proto != 0 && !proto_in_shorthand(v, m),
        print: |v, _| v.nw_proto.to_string(),
    },
    FieldDef {
        name: "tp_src",
        aliases: &[],
        slot: "tp_src",
        needs: Needs::Transport,
        parse: |n, t, v, m, _| {
            (v.tp_src, m.tp_src) = masked16(n, t)?;
            Ok(())
        },
        shown: |v, m| m.tp_src != 0 && !icmp(v, m),
        print: |v, m| format_u16(v.tp_src, m.tp_src),
    },
    FieldDef {
        name: "tp_dst",
        aliases: &[],
        slot: "tp_dst",
        needs: Needs::Transport,
        parse: |n, t, v, m, _| {
            (v.tp_dst, m.tp_dst) = masked16(n, t)?;
            Ok(())
        },
        shown: |v, m| m.tp_dst != 0 && !icmp(v, m),
        print: |v, m| format_u16(v.tp_dst, m.tp_dst),
    },
    FieldDef {
        name: "icmp_type",
        aliases: &["icmpv6_type"],
        slot: "tp_src",
        needs: Needs::Transport,
        parse: |n, t, v, m, _| {
            (v.tp_src, m.tp_src) = masked16(n, t)?;
            Ok(())
        },
        shown: |v, m| m.tp_src != 0 && icmp(v, m),
        print: |v, m| format_u16(v.tp_src, m.tp_src),
    },
    FieldDef {
        name: "icmp_code",
        aliases: &["icmpv6_code"],
        slot: "tp_dst",
        needs: Needs::Transport,
        parse: |n, t, v, m, _| {
            (v.tp_dst, m.tp_dst) = masked16(n, t)?;
            Ok(())
        },
        shown: |v, m| m.tp_dst != 0 && icmp(v, m),
        print: |v, m| format_u16(v.tp_dst, m.tp_dst),
    },
    FieldDef {
        name: "inner_vlan_tci",
        aliases: &[],
        slot: "inner_vlan_tci",
        needs: Needs::Nothing,
        parse: |n, t, v, m, _| {
            let (val, mask) = parse_masked_uint(n, t, 0xffff)?;
            v.inner_vlan_tci = val as u16;
            m.inner_vlan_tci = mask as u16;
            Ok(())
        },
        shown: |_, m| m.inner_vlan_tci != 0,
        print: |v, m| format_hex(v.inner_vlan_tci.into(), m.inner_vlan_tci.into(), 0xffff, 4),
    },
    FieldDef {
        name: "nw_tos",
        aliases: &[],
        slot: "nw_tos",
        needs: Needs::Ip,
        // As a TOS byte (DSCP << 2).
        parse: |n, t, v, m, _| {
            let tos = parse_uint(n, t, 255)? as u8;
            if tos & 3 != 0 {
                return Err(bad(n, t, "the low 2 bits are ECN (use nw_ecn)"));
            }
            v.nw_tos = (v.nw_tos & 3) | tos;
            m.nw_tos |= 0xfc;
            Ok(())
        },
        shown: |_, m| m.nw_tos & 0xfc != 0,
        print: |v, _| (v.nw_tos & 0xfc).to_string(),
    },
    FieldDef {
        name: "ip_dscp",
        aliases: &[],
        slot: "nw_tos",
        needs: Needs::Ip,
        // The 6-bit DSCP itself; printed as nw_tos.
        parse: |n, t, v, m, _| {
            let tos = (parse_uint(n, t, 63)? as u8) << 2;
            v.nw_tos = (v.nw_tos & 3) | tos;
            m.nw_tos |= 0xfc;
            Ok(())
        },
        shown: |_, _| false,
        print: |v, _| (v.nw_tos >> 2).to_string(),
    },
    FieldDef {
        name: "nw_ecn",
        aliases: &[],
        slot: "nw_ecn",
        needs: Needs::Ip,
        parse: |n, t, v, m, _| {
            let ecn = parse_uint(n, t, 3)? as u8;
            v.nw_tos = (v.nw_tos & 0xfc) | ecn;
            m.nw_tos |= 3;
            Ok(())
        },
        shown: |_, m| m.nw_tos & 3 != 0,
        print: |v, _| (v.nw_tos & 3).to_string(),
    },
    FieldDef {
        name: "nw_ttl",
        aliases: &[],
        slot: "nw_ttl",
        needs: Needs::Ip,
        parse: |n, t, v, m, _| {
            v.nw_ttl = parse_uint(n, t, 255)? as u8;
            m.nw_ttl = 0xff;
            Ok(())
        },
        shown: |_, m| m.nw_ttl != 0,
        print: |v, _| v.nw_ttl.to_string(),
    },
    mpls_field!("mpls_label", LABEL_MASK, LABEL_SHIFT, 0xfffff),
    mpls_field!("mpls_tc", TC_MASK, TC_SHIFT, 7),
    mpls_field!("mpls_ttl", TTL_MASK, 0, 255),
    mpls_field!("mpls_bos", BOS_MASK, BOS_SHIFT, 1),
    FieldDef {
        name: "ip_frag",
        aliases: &[],
        slot: "ip_frag",
        needs: Needs::Ip,
        parse: |n, t, v, m, _| {
            (v.nw_frag, m.nw_frag) = match t {
                "no" => (0, FRAG_ANY),
                "yes" => (FRAG_ANY, FRAG_ANY),
                "first" => (FRAG_ANY, FRAG_ANY | FRAG_LATER),
                "later" => (FRAG_ANY | FRAG_LATER, FRAG_ANY | FRAG_LATER),
                "not_later" => (0, FRAG_LATER),
                _ => return Err(bad(n, t, "one of no, yes, first, later, not_later")),
            };
            Ok(())
        },
        shown: |_, m| m.nw_frag != 0,
        print: |v, m| {
            match (v.nw_frag, m.nw_frag) {
                (0, FRAG_ANY) => "no",
                (FRAG_ANY, FRAG_ANY) => "yes",
                (0, FRAG_LATER) => "not_later",
                (FRAG_ANY, _) => "first",
                _ => "later",
            }
            .into()
        },
    },
    FieldDef {
        name: "ipv6_label",
        aliases: &[],
        slot: "ipv6_label",
        needs: Needs::Ipv6,
        parse: |n, t, v, m, _| {
            let (val, mask) = parse_masked_uint(n, t, 0xfffff)?;
            v.label = val as u32;
            m.label = mask as u32;
            Ok(())
        },
        // The slot holds an MPLS packet's label stack entry and a PBB packet's
        // I-TAG too.
        shown: |v, m| m.label != 0 && dl(v, m) == Some(EtherType::IPV6),
        print: |v, m| format_hex(v.label, m.label, 0xfffff, 5),
    },
    // OpenFlow's IPv6 extension header bits (OFPIEH_*); Open vSwitch has no such
    // field, so vsw writes it under OpenFlow's name, as a number.
    FieldDef {
        name: "ipv6_exthdr",
        aliases: &[],
        slot: "ipv6_exthdr",
        needs: Needs::Ipv6,
        parse: |n, t, v, m, _| {
            let (val, mask) = parse_masked_uint(n, t, u128::from(exthdr::ALL))?;
            (v.ipv6_exthdr, m.ipv6_exthdr) = (val as u16, mask as u16);
            Ok(())
        },
        shown: |_, m| m.ipv6_exthdr != 0,
        print: |v, m| {
            format_hex(
                v.ipv6_exthdr.into(),
                m.ipv6_exthdr.into(),
                exthdr::ALL.into(),
                3,
            )
        },
    },
    // A PBB packet's service instance (the I-TAG's low 24 bits, in the key's
    // `label`). Open vSwitch has none; written under OpenFlow's name.
    FieldDef {
        name: "pbb_isid",
        aliases: &[],
        slot: "pbb_isid",
        needs: Needs::Pbb,
        parse: |n, t, v, m, _| {
            let (val, mask) = parse_masked_uint(n, t, u128::from(ISID_MASK))?;
            v.label = (v.label & !ISID_MASK) | val as u32;
            m.label = (m.label & !ISID_MASK) | mask as u32;
            Ok(())
        },
        shown: |v, m| m.label & ISID_MASK != 0 && Needs::Pbb.met(v, m),
        print: |v, m| format_hex(v.label & ISID_MASK, m.label & ISID_MASK, ISID_MASK, 6),
    },
    nsh_field!("nsh_flags", &[], nw_dst, NSH_FLAGS_SHIFT, 0xff, true, false),
    nsh_field!("nsh_ttl", &[], nw_dst, NSH_TTL_SHIFT, 0x3f, false, false),
    nsh_field!(
        "nsh_mdtype",
        &[],
        nw_dst,
        NSH_MDTYPE_SHIFT,
        0xff,
        false,
        false
    ),
    nsh_field!("nsh_np", &[], nw_dst, NSH_NP_SHIFT, 0xff, false, false),
    nsh_field!("nsh_spi", &["nsp"], label, 8, 0xff_ffff, false, true),
    nsh_field!("nsh_si", &["nsi"], label, 0, 0xff, false, false),
    nsh_field!("nsh_c1", &["nshc1"], nw_src, 96, 0xffff_ffff, true, true),
    nsh_field!("nsh_c2", &["nshc2"], nw_src, 64, 0xffff_ffff, true, true),
    nsh_field!("nsh_c3", &["nshc3"], nw_src, 32, 0xffff_ffff, true, true),
    nsh_field!("nsh_c4", &["nshc4"], nw_src, 0, 0xffff_ffff, true, true),
    FieldDef {
        name: "tcp_flags",
        aliases: &[],
        slot: "tcp_flags",
        needs: Needs::Tcp,
        parse: |n, t, v, m, _| {
            (v.tcp_flags, m.tcp_flags) = parse_tcp_flags(n, t)?;
            Ok(())
        },
        shown: |_, m| m.tcp_flags != 0,
        print: |v, m| format!("0x{:03x}/0x{:03x}", v.tcp_flags, m.tcp_flags),
    },
    FieldDef {
        name: "nd_target",
        aliases: &[],
        slot: "nd_target",
        needs: Needs::Nd,
        parse: |n, t, v, m, _| {
            (v.nd_target, m.nd_target) = parse_ipv6(n, t)?;
            Ok(())
        },
        shown: |_, m| m.nd_target != 0,
        print: |v, m| format_ipv6(v.nd_target, m.nd_target),
    },
    FieldDef {
        name: "arp_sha",
        aliases: &[],
        slot: "arp_sha",
        needs: Needs::ArpOrNd,
        parse: |n, t, v, m, _| {
            (v.arp_sha, m.arp_sha) = parse_mac(n, t)?;
            Ok(())
        },
        shown: |v, m| m.arp_sha != MacAddr::ZERO && dl(v, m).is_some_and(EtherType::is_arp),
        print: |v, m| format_mac(v.arp_sha, m.arp_sha),
    },
    FieldDef {
        name: "arp_tha",
        aliases: &[],
        slot: "arp_tha",
        needs: Needs::ArpOrNd,
        parse: |n, t, v, m, _| {
            (v.arp_tha, m.arp_tha) = parse_mac(n, t)?;
            Ok(())
        },
        shown: |v, m| m.arp_tha != MacAddr::ZERO && dl(v, m).is_some_and(EtherType::is_arp),
        print: |v, m| format_mac(v.arp_tha, m.arp_tha),
    },
    FieldDef {
        name: "nd_sll",
        aliases: &[],
        slot: "arp_sha",
        needs: Needs::ArpOrNd,
        parse: |n, t, v, m, _| {
            (v.arp_sha, m.arp_sha) = parse_mac(n, t)?;
            Ok(())
        },
        shown: |v, m| m.arp_sha != MacAddr::ZERO && !dl(v, m).is_some_and(EtherType::is_arp),
        print: |v, m| format_mac(v.arp_sha, m.arp_sha),
    },
    FieldDef {
        name: "nd_tll",
        aliases: &[],
        slot: "arp_tha",
        needs: Needs::ArpOrNd,
        parse: |n, t, v, m, _| {
            (v.arp_tha, m.arp_tha) = parse_mac(n, t)?;
            Ok(())
        },
        shown: |v, m| m.arp_tha != MacAddr::ZERO && !dl(v, m).is_some_and(EtherType::is_arp),
        print: |v, m| format_mac(v.arp_tha, m.arp_tha),
    },
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::syntax::{format_flow, parse_flow};

    fn no_ports(_: &str) -> Option<u32> {
        None
    }

    /// A value each field accepts, and what to write before it to meet its prerequisites.
    fn sample(f: &FieldDef) -> (&'static str, &'static str) {
        let value = match f.name {
            "in_port" => "3",
            "metadata" => "0x5/0xff",
            "tun_id" => "0x2a",
            "tun_src" | "tun_dst" => "198.18.5.0/24",
            "tun_metadata0" => "0x1234",
            "tun_flags" => "+oam",
            "dl_vlan" => "10",
            "dl_vlan_pcp" => "5",
            "vlan_tci" => "0x1000/0x1000",
            "dl_src" | "dl_dst" | "arp_sha" | "arp_tha" | "nd_sll" | "nd_tll" => {
                "02:00:00:00:00:01"
            }
            "dl_type" => "0x88b5",
            "nw_src" | "nw_dst" => "198.18.0.0/15",
            "ipv6_src" | "ipv6_dst" | "nd_target" => "fd00::1",
            "nw_proto" => "47",
            "tp_src" | "tp_dst" | "icmp_type" | "icmp_code" => "8",
            "inner_vlan_tci" => "0x1014",
            "nw_tos" => "32",
            "ip_dscp" => "8",
            "nw_ecn" => "1",
            "nw_ttl" => "64",
            "ip_frag" => "first",
            "ipv6_label" => "0x12345",
            "tcp_flags" => "+syn-ack",
            "pkt_mark" => "0x5/0xff",
            "conj_id" => "7",
            "ct_state" => "+est+trk",
            "ct_zone" => "5",
            "ct_mark" => "0x5/0xff",
            "ct_label" => "0x1/0x1",
            "ct_nw_proto" => "6",
            "ct_nw_src" => "198.18.0.0/16",
            "ct_nw_dst" => "198.18.0.1",
            "ct_ipv6_src" => "2001:db8::/32",
            "ct_ipv6_dst" => "2001:db8::1",
            "ct_tp_src" => "0x1000/0xf000",
            "ct_tp_dst" => "80",
            "mpls_label" => "1000",
            "mpls_tc" => "5",
            "mpls_ttl" => "63",
            "mpls_bos" => "1",
            "ipv6_exthdr" => "0x044/0x1f4",
            "pbb_isid" => "0x000064",
            "packet_type" => "(0,0)",
            "nsh_flags" => "0x02/0x02",
            "nsh_ttl" => "63",
            "nsh_mdtype" => "1",
            "nsh_np" => "3",
            "nsh_spi" => "0x123456",
            "nsh_si" => "255",
            n if n.starts_with("nsh_c") => "0x11223344/0xffff0000",
            n if n.starts_with("reg") => "0x5/0xff",
            n if n.starts_with("xreg") => "0x500000000/0xff00000000",
            n if n.starts_with("xxreg") => "0x1/0xff",
            other => panic!("no sample for {other}: add one"),
        };
        let shorthand = match f.needs {
            Needs::Nothing => "",
            Needs::Ipv4 | Needs::Ip | Needs::Ipv4OrArp | Needs::IpOrArp => "ip,",
            Needs::Ipv6 => "ipv6,",
            Needs::Transport | Needs::Ports => "udp,",
            Needs::Tcp => "tcp,",
            Needs::ArpOrNd | Needs::Nd => "icmp6,icmp_type=135,",
            Needs::Arp => "arp,",
            Needs::Icmpv4 => "icmp,",
            Needs::Icmpv6 => "icmp6,",
            Needs::Mpls => "mpls,",
            Needs::Pbb => "dl_type=0x88e7,",
            Needs::Nsh => "dl_type=0x894f,",
            Needs::Ct => "ct_state=+trk-inv,",
            Needs::CtIpv4 => "ct_state=+trk-inv,ip,",
            Needs::CtIpv6 => "ct_state=+trk-inv,ipv6,",
        };
        (value, shorthand)
    }

    /// The connection tracker's fields read and print as Open vSwitch writes them.
    #[test]
    fn the_ct_fields_read_and_print_as_open_vswitch_writes_them() {
        for (text, printed) in [
            ("ct_state=+trk+new", "ct_state=+new+trk"),
            ("ct_state=-trk", "ct_state=-trk"),
            ("ct_state=+est-rel+trk-inv", "ct_state=+est-rel-inv+trk"),
            ("ct_state=new|trk", "ct_state=new|trk"),
            ("ct_state=0x21/0x21", "ct_state=+new+trk"),
            ("ct_state=0", "ct_state=0"),
            ("ct_zone=1", "ct_zone=1"),
            ("ct_mark=0x1", "ct_mark=0x1"),
            ("ct_mark=0x2/0x3", "ct_mark=0x2/0x3"),
            ("ct_label=0x1", "ct_label=0x1"),
            (
                "ct_label=0x80000000000000000000000000000000/0x80000000000000000000000000000000",
                "ct_label=0x80000000000000000000000000000000/0x80000000000000000000000000000000",
            ),
            (
                "ct_state=+trk-inv,ct_nw_proto=17",
                "ct_state=-inv+trk,ct_nw_proto=17",
            ),
            (
                "ct_state=+est+trk,ip,ct_nw_src=198.18.0.0/255.255.0.0,ct_nw_dst=198.18.0.100,ct_nw_proto=6,ct_tp_dst=80",
                "ct_state=+est+trk,ct_nw_src=198.18.0.0/16,ct_nw_dst=198.18.0.100,ct_nw_proto=6,ct_tp_dst=80,ip",
            ),
            (
                "ct_state=+rpl+trk,ipv6,ct_ipv6_src=2001:db8::1,ct_ipv6_dst=2001:db8::/64,ct_tp_src=0x8000/0x8000",
                "ct_state=+rpl+trk,ct_ipv6_src=2001:db8::1,ct_ipv6_dst=2001:db8::/64,ct_tp_src=0x8000/0x8000,ipv6",
            ),
        ] {
            let flow = parse_flow(&format!("{text},actions=drop"), &no_ports).unwrap();
            assert_eq!(
                format_flow(&flow),
                format!("priority=32768,{printed},actions=drop"),
                "{text}"
            );
        }
        let flow = parse_flow("ct_state=+trk,ct_zone=3,ip,actions=drop", &no_ports).unwrap();
        let (v, m) = (flow.matcher.value(), flow.matcher.mask());
        assert_eq!(
            (v.ct_state, m.ct_state, v.ct_zone, m.ct_zone),
            (0x20, 0x20, 3, 0xffff)
        );
        for bad in [
            "ct_state=+foo",
            "ct_state=+trk+trk",
            "ct_state=0x100",
            "ct_zone=65536",
        ] {
            assert!(
                parse_flow(&format!("{bad},actions=drop"), &no_ports).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn the_nsh_fields_read_print_and_keep_to_their_bits() {
        let text = "dl_type=0x894f,nsh_flags=0x02/0x02,nsh_ttl=63,nsh_mdtype=1,nsh_np=3,\
                    nsh_spi=0x123456,nsh_si=255,nsh_c1=0x11223344,nsh_c4=0x5/0xff,actions=drop";
        let flow = parse_flow(text, &no_ports).unwrap();
        let (v, m) = (flow.matcher.value(), flow.matcher.mask());
        assert_eq!(v.nsh().path, 0x1234_56ff);
        assert_eq!(v.nsh().context, [0x1122_3344, 0, 0, 5]);
        assert_eq!({ m.label }, u32::MAX);
        assert_eq!({ m.nw_src }, 0xffff_ffff << 96 | 0xff);
        // Printed back as written (Open vSwitch's order).
        assert_eq!(format_flow(&flow), format!("priority=32768,{text}"));
        // Aliases, as Open vSwitch reads them; values past their bits are refused.
        let flow = parse_flow(
            "dl_type=0x894f,nsp=0x10,nsi=3,nshc2=1,actions=drop",
            &no_ports,
        )
        .unwrap();
        assert_eq!(
            format_flow(&flow),
            "priority=32768,dl_type=0x894f,nsh_spi=0x10,nsh_si=3,nsh_c2=0x1,actions=drop"
        );
        for (text, needle) in [
            ("dl_type=0x894f,nsh_ttl=64,actions=drop", "larger than"),
            (
                "dl_type=0x894f,nsh_spi=0x1000000,actions=drop",
                "larger than",
            ),
            (
                "dl_type=0x894f,nsh_mdtype=3,actions=drop",
                "MD types are 1 and 2",
            ),
            ("ip,nsh_si=1,actions=drop", "nsh_si needs dl_type=0x894f"),
        ] {
            let e = parse_flow(text, &no_ports).expect_err(text).to_string();
            assert!(e.contains(needle), "{text}: {e}");
        }
    }

    #[test]
    fn the_mpls_fields_share_the_label_slot_without_overlapping() {
        let flow = parse_flow(
            "mplsm,mpls_label=0xabcde,mpls_tc=5,mpls_bos=1,mpls_ttl=63,actions=drop",
            &no_ports,
        )
        .unwrap();
        assert_eq!(flow.matcher.value().label, 0xabcd_eb3f);
        assert_eq!(flow.matcher.mask().label, u32::MAX);
        assert_eq!(
            format_flow(&flow),
            "priority=32768,mplsm,mpls_label=703710,mpls_tc=5,mpls_ttl=63,mpls_bos=1,actions=drop"
        );
        // Each part alone masks its own bits only.
        let tc = parse_flow("mpls,mpls_tc=5,actions=drop", &no_ports).unwrap();
        assert_eq!(tc.matcher.mask().label, 0x0000_0e00);
        let err = parse_flow("ip,mpls_label=1,actions=drop", &no_ports).unwrap_err();
        assert!(err.to_string().contains("mpls"), "{err}");
    }

    #[test]
    fn names_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for f in FIELDS {
            for name in std::iter::once(&f.name).chain(f.aliases) {
                assert!(seen.insert(*name), "{name} defined twice");
                assert!(std::ptr::eq(field(name).unwrap(), f), "{name}");
            }
        }
    }

    #[test]
    fn every_field_reads_prints_and_reads_back() {
        for f in FIELDS {
            let (value, shorthand) = sample(f);
            let text = format!("{shorthand}{}={value},actions=drop", f.name);
            let flow = parse_flow(&text, &no_ports).unwrap_or_else(|e| panic!("{text}: {e}"));
            let printed = format_flow(&flow);
            let again = parse_flow(&printed, &no_ports)
                .unwrap_or_else(|e| panic!("{text} printed as {printed}: {e}"));
            assert_eq!(again, flow, "{text} printed as {printed}");
            // The field set something the printed match carries.
            let plain = parse_flow(&format!("{shorthand}actions=drop"), &no_ports).unwrap();
            assert_ne!(flow.matcher, plain.matcher, "{text} set nothing");
        }
    }

    #[test]
    fn every_field_refuses_a_match_without_its_prerequisites() {
        for f in FIELDS.iter().filter(|f| f.needs != Needs::Nothing) {
            let (value, _) = sample(f);
            let text = format!("{}={value},actions=drop", f.name);
            let e = parse_flow(&text, &no_ports).expect_err(&text).to_string();
            assert!(
                e.contains(&format!("{} needs {}", f.name, f.needs.describe())),
                "{text}: {e}"
            );
        }
    }

    #[test]
    fn registers_print_as_open_vswitch_prints_them() {
        let flow = parse_flow(
            "in_port=1,reg3=0x5/0xff,tcp,pkt_mark=1,xreg0=0x100000002,metadata=0x3,\
             xxreg3=0x7,tun_id=0,actions=drop",
            &no_ports,
        )
        .unwrap();
        // Open vSwitch's order (lib/match.c): pkt_mark before the shorthand, then
        // each 32-bit register, the tunnel, metadata and in_port; zero as `0`.
        assert_eq!(
            crate::syntax::format_match(&flow.matcher),
            "pkt_mark=0x1,tcp,reg0=0x1,reg1=0x2,reg3=0x5/0xff,reg12=0,reg13=0,reg14=0,\
             reg15=0x7,tun_id=0,metadata=0x3,in_port=1"
        );
    }

    #[test]
    fn a_field_given_twice_is_refused_under_any_name() {
        for text in [
            "nw_src=10.0.0.1,arp,arp_spa=10.0.0.2,actions=drop",
            "reg1=5,xreg0=0x100000000/0xffffffff00000000,actions=drop",
            "xxreg0=1,reg3=1,actions=drop",
            "udp,tp_src=1,tp_src=2,actions=drop",
            "ip,nw_tos=4,ip_dscp=1,actions=drop",
        ] {
            assert!(parse_flow(text, &no_ports).is_err(), "{text}");
        }
    }
}
