//! The fields of `set_field:VALUE->FIELD` (as `ovs-ofctl` writes OpenFlow's
//! set-field) beyond the classic ones, which are actions of their own (action.rs):
//! how each is read and printed, and what a rule's match must promise for it. Each
//! is a [`FieldWrite`], which the datapath writes as it is.

use std::net::Ipv6Addr;

use vsw_packet::rewrite::{FieldWrite, NshField};
use vsw_packet::MacAddr;

use crate::error::FlowSyntaxError;
use crate::fields::Needs;
use crate::values::{bad, parse_ipv4, parse_ipv6, parse_mac, parse_uint};

pub(crate) fn mac(f: &str, v: &str) -> Result<MacAddr, FlowSyntaxError> {
    let (m, mask) = parse_mac(f, v)?;
    if mask != MacAddr([0xff; 6]) {
        return Err(bad(
            f,
            v,
            "a set-field writes a whole value, without a mask",
        ));
    }
    Ok(m)
}

pub(crate) fn v4(f: &str, v: &str) -> Result<[u8; 4], FlowSyntaxError> {
    match parse_ipv4(f, v)? {
        (a, m) if m == u128::from(u32::MAX) => Ok((a as u32).to_be_bytes()),
        _ => Err(bad(
            f,
            v,
            "a set-field writes a whole address, without a mask",
        )),
    }
}

fn v6(f: &str, v: &str) -> Result<[u8; 16], FlowSyntaxError> {
    match parse_ipv6(f, v)? {
        (a, u128::MAX) => Ok(a.to_be_bytes()),
        _ => Err(bad(
            f,
            v,
            "a set-field writes a whole address, without a mask",
        )),
    }
}

pub(crate) fn uint(f: &str, v: &str, max: u128) -> Result<u128, FlowSyntaxError> {
    parse_uint(f, v, max)
}

/// The write of `value` to `field`, for the fields [`FieldWrite`] holds; `None` for
/// any other field name.
pub(crate) fn parse_write(f: &str, v: &str) -> Option<Result<FieldWrite, FlowSyntaxError>> {
    let w = || -> Result<Option<FieldWrite>, FlowSyntaxError> {
        Ok(Some(match f {
            "ipv6_src" => FieldWrite::Ipv6Src(v6(f, v)?),
            "ipv6_dst" => FieldWrite::Ipv6Dst(v6(f, v)?),
            "ipv6_label" => FieldWrite::Ipv6Label(uint(f, v, 0xfffff)? as u32),
            "nw_ecn" | "ip_ecn" => FieldWrite::IpEcn(uint(f, v, 3)? as u8),
            "nw_ttl" => FieldWrite::NwTtl(uint(f, v, 255)? as u8),
            "arp_op" => FieldWrite::ArpOp(uint(f, v, 0xffff)? as u16),
            "arp_spa" => FieldWrite::ArpSpa(v4(f, v)?),
            "arp_tpa" => FieldWrite::ArpTpa(v4(f, v)?),
            "arp_sha" => FieldWrite::ArpSha(mac(f, v)?),
            "arp_tha" => FieldWrite::ArpTha(mac(f, v)?),
            "icmp_type" | "icmpv4_type" => FieldWrite::Icmpv4Type(uint(f, v, 255)? as u8),
            "icmp_code" | "icmpv4_code" => FieldWrite::Icmpv4Code(uint(f, v, 255)? as u8),
            "icmpv6_type" => FieldWrite::Icmpv6Type(uint(f, v, 255)? as u8),
            "icmpv6_code" => FieldWrite::Icmpv6Code(uint(f, v, 255)? as u8),
            "nd_target" | "ipv6_nd_target" => FieldWrite::NdTarget(v6(f, v)?),
            "nd_sll" | "ipv6_nd_sll" => FieldWrite::NdSll(mac(f, v)?),
            "nd_tll" | "ipv6_nd_tll" => FieldWrite::NdTll(mac(f, v)?),
            "pbb_isid" => FieldWrite::PbbIsid(uint(f, v, 0xff_ffff)? as u32),
            "nsh_flags" => FieldWrite::Nsh(NshField::Flags, uint(f, v, 0xff)? as u32),
            "nsh_ttl" => FieldWrite::Nsh(NshField::Ttl, uint(f, v, 0x3f)? as u32),
            "nsh_spi" => FieldWrite::Nsh(NshField::Spi, uint(f, v, 0xff_ffff)? as u32),
            "nsh_si" => FieldWrite::Nsh(NshField::Si, uint(f, v, 0xff)? as u32),
            "nsh_c1" | "nsh_c2" | "nsh_c3" | "nsh_c4" => {
                let i = f.as_bytes()[5] - b'1';
                FieldWrite::Nsh(NshField::Context(i), uint(f, v, 0xffff_ffff)? as u32)
            }
            _ => return Ok(None),
        }))
    };
    w().transpose()
}

/// The field a write is written under, and what a rule's match must promise for it.
pub(crate) fn field_of(w: &FieldWrite) -> (&'static str, Needs) {
    match w {
        FieldWrite::Ipv6Src(_) => ("ipv6_src", Needs::Ipv6),
        FieldWrite::Ipv6Dst(_) => ("ipv6_dst", Needs::Ipv6),
        FieldWrite::Ipv6Label(_) => ("ipv6_label", Needs::Ipv6),
        FieldWrite::IpEcn(_) => ("nw_ecn", Needs::Ip),
        FieldWrite::NwTtl(_) => ("nw_ttl", Needs::Ip),
        FieldWrite::ArpOp(_) => ("arp_op", Needs::Arp),
        FieldWrite::ArpSpa(_) => ("arp_spa", Needs::Arp),
        FieldWrite::ArpTpa(_) => ("arp_tpa", Needs::Arp),
        FieldWrite::ArpSha(_) => ("arp_sha", Needs::Arp),
        FieldWrite::ArpTha(_) => ("arp_tha", Needs::Arp),
        FieldWrite::Icmpv4Type(_) => ("icmp_type", Needs::Icmpv4),
        FieldWrite::Icmpv4Code(_) => ("icmp_code", Needs::Icmpv4),
        FieldWrite::Icmpv6Type(_) => ("icmpv6_type", Needs::Icmpv6),
        FieldWrite::Icmpv6Code(_) => ("icmpv6_code", Needs::Icmpv6),
        FieldWrite::NdTarget(_) => ("nd_target", Needs::Nd),
        FieldWrite::NdSll(_) => ("nd_sll", Needs::Nd),
        FieldWrite::NdTll(_) => ("nd_tll", Needs::Nd),
        FieldWrite::PbbIsid(_) => ("pbb_isid", Needs::Pbb),
        FieldWrite::Nsh(field, _) => (nsh_name(*field), Needs::Nsh),
        FieldWrite::CopyTtlOut | FieldWrite::CopyTtlIn => ("", Needs::Nothing),
    }
}

/// `VALUE->FIELD`, as [`parse`] reads it.
pub(crate) fn argument(w: &FieldWrite) -> String {
    let value = match w {
        FieldWrite::Ipv6Src(a) | FieldWrite::Ipv6Dst(a) | FieldWrite::NdTarget(a) => {
            Ipv6Addr::from(*a).to_string()
        }
        FieldWrite::Ipv6Label(l) => format!("{l:#x}"),
        FieldWrite::IpEcn(n)
        | FieldWrite::NwTtl(n)
        | FieldWrite::Icmpv4Type(n)
        | FieldWrite::Icmpv4Code(n)
        | FieldWrite::Icmpv6Type(n)
        | FieldWrite::Icmpv6Code(n) => n.to_string(),
        FieldWrite::ArpOp(o) => o.to_string(),
        FieldWrite::PbbIsid(i) => i.to_string(),
        FieldWrite::Nsh(NshField::Spi | NshField::Context(_), v) => format!("{v:#x}"),
        FieldWrite::Nsh(_, v) => v.to_string(),
        FieldWrite::ArpSpa(a) | FieldWrite::ArpTpa(a) => std::net::Ipv4Addr::from(*a).to_string(),
        FieldWrite::ArpSha(m)
        | FieldWrite::ArpTha(m)
        | FieldWrite::NdSll(m)
        | FieldWrite::NdTll(m) => m.to_string(),
        FieldWrite::CopyTtlOut | FieldWrite::CopyTtlIn => String::new(),
    };
    format!("{value}->{}", field_of(w).0)
}

/// The name an NSH field is written under.
pub(crate) fn nsh_name(field: NshField) -> &'static str {
    match field {
        NshField::Flags => "nsh_flags",
        NshField::Ttl => "nsh_ttl",
        NshField::Spi => "nsh_spi",
        NshField::Si => "nsh_si",
        NshField::Context(0) => "nsh_c1",
        NshField::Context(1) => "nsh_c2",
        NshField::Context(2) => "nsh_c3",
        NshField::Context(_) => "nsh_c4",
        // Only a push writes these (its MD type 2 TLVs): no rule names them.
        NshField::Md2Word(_) => "",
    }
}
