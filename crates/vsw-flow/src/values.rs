//! How flows are written: their tokens, and values (numbers, decimal or hex, with masks),
//! addresses with prefixes or masks, ports by number or name, TCP flags by name.

use std::net::{Ipv4Addr, Ipv6Addr};

use vsw_packet::MacAddr;

use crate::error::{FlowSyntaxError, PortResolver};

/// A flow's tokens: split at commas and blanks outside parentheses, so that the
/// action `resubmit(,2)` and the field `packet_type=(1,0x894f)` stay one each
/// (and `encap(nsh(…))`'s properties, `tlv(…)` among them).
pub(crate) fn tokens(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            c if depth == 0 && (c == ',' || c.is_whitespace()) => {
                if i > start {
                    out.push(&s[start..i]);
                }
                start = i + c.len_utf8();
            }
            _ => {}
        }
    }
    if s.len() > start {
        out.push(&s[start..]);
    }
    out
}

pub(crate) fn bad(field: &str, value: &str, why: impl Into<String>) -> FlowSyntaxError {
    FlowSyntaxError::BadValue {
        field: field.to_string(),
        value: value.to_string(),
        why: why.into(),
    }
}

pub(crate) fn parse_uint(field: &str, s: &str, max: u128) -> Result<u128, FlowSyntaxError> {
    let v = if let Some(hex) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u128::from_str_radix(hex, 16)
    } else {
        s.parse::<u128>()
    }
    .map_err(|_| bad(field, s, "not a number"))?;
    if v > max {
        return Err(bad(field, s, format!("larger than {max}")));
    }
    Ok(v)
}

/// All ones in the low `bits` bits.
pub fn ones(bits: u32) -> u128 {
    if bits >= 128 {
        u128::MAX
    } else {
        (1u128 << bits) - 1
    }
}

/// A number in hex as C's `%#x` prints it (`0` for zero), as `ovs-ofctl` does.
pub(crate) fn c_hex(v: u128) -> String {
    if v == 0 {
        "0".into()
    } else {
        format!("{v:#x}")
    }
}

/// `value` or `value/mask`, both integers.
pub(crate) fn parse_masked_uint(
    field: &str,
    s: &str,
    max: u128,
) -> Result<(u128, u128), FlowSyntaxError> {
    match s.split_once('/') {
        Some((v, m)) => Ok((parse_uint(field, v, max)?, parse_uint(field, m, max)?)),
        None => Ok((parse_uint(field, s, max)?, max)),
    }
}

pub(crate) fn prefix_mask(bits: u32, len: u32) -> u128 {
    let all = if bits == 128 {
        u128::MAX
    } else {
        (1u128 << bits) - 1
    };
    if len == 0 {
        0
    } else {
        (all << (bits - len)) & all
    }
}

pub(crate) fn parse_ipv4(field: &str, s: &str) -> Result<(u128, u128), FlowSyntaxError> {
    let (addr, mask) = s.split_once('/').map_or((s, None), |(a, m)| (a, Some(m)));
    let a: Ipv4Addr = addr
        .parse()
        .map_err(|_| bad(field, s, "not an IPv4 address"))?;
    let m = match mask {
        None => prefix_mask(32, 32),
        Some(m) => match m.parse::<u32>() {
            Ok(len) if len <= 32 => prefix_mask(32, len),
            Ok(_) => return Err(bad(field, s, "prefix longer than 32")),
            Err(_) => u128::from(u32::from(
                m.parse::<Ipv4Addr>()
                    .map_err(|_| bad(field, s, "bad mask"))?,
            )),
        },
    };
    Ok((u128::from(u32::from(a)), m))
}

pub(crate) fn parse_ipv6(field: &str, s: &str) -> Result<(u128, u128), FlowSyntaxError> {
    let (addr, mask) = s.split_once('/').map_or((s, None), |(a, m)| (a, Some(m)));
    let a: Ipv6Addr = addr
        .parse()
        .map_err(|_| bad(field, s, "not an IPv6 address"))?;
    let m = match mask {
        None => u128::MAX,
        Some(m) => match m.parse::<u32>() {
            Ok(len) if len <= 128 => prefix_mask(128, len),
            Ok(_) => return Err(bad(field, s, "prefix longer than 128")),
            Err(_) => u128::from(
                m.parse::<Ipv6Addr>()
                    .map_err(|_| bad(field, s, "bad mask"))?,
            ),
        },
    };
    Ok((u128::from(a), m))
}

pub(crate) fn parse_mac(field: &str, s: &str) -> Result<(MacAddr, MacAddr), FlowSyntaxError> {
    let (addr, mask) = s.split_once('/').map_or((s, None), |(a, m)| (a, Some(m)));
    let a: MacAddr = addr
        .parse()
        .map_err(|e: vsw_packet::mac::BadMac| bad(field, s, e.to_string()))?;
    let m = match mask {
        None => MacAddr::BROADCAST,
        Some(m) => m
            .parse()
            .map_err(|e: vsw_packet::mac::BadMac| bad(field, s, e.to_string()))?,
    };
    Ok((a, m))
}

pub(crate) fn parse_port(
    field: &str,
    s: &str,
    ports: &dyn PortResolver,
) -> Result<u32, FlowSyntaxError> {
    if s.starts_with(|c: char| c.is_ascii_digit()) {
        let v = parse_uint(field, s, u128::from(u32::MAX))?;
        return Ok(v as u32);
    }
    ports
        .port_no(s)
        .ok_or_else(|| FlowSyntaxError::UnknownPort(s.to_string()))
}

/// TCP flags by name, in OVS's `+syn-ack` form, or as a number with an optional mask.
pub(crate) fn parse_tcp_flags(field: &str, v: &str) -> Result<(u16, u16), FlowSyntaxError> {
    if !v.starts_with(['+', '-']) {
        let (val, mask) = parse_masked_uint(field, v, 0x0fff)?;
        return Ok((val as u16, mask as u16));
    }
    let (mut val, mut mask) = (0u16, 0u16);
    let mut rest = v;
    while let Some(sign) = rest.chars().next() {
        let body = &rest[1..];
        let end = body.find(['+', '-']).unwrap_or(body.len());
        let name = &body[..end];
        let bit = TCP_FLAG_NAMES
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, b)| *b)
            .ok_or_else(|| bad(field, v, format!("unknown TCP flag '{name}'")))?;
        match sign {
            '+' => val |= bit,
            '-' => {}
            _ => return Err(bad(field, v, "flags are written +name or -name")),
        }
        mask |= bit;
        rest = &body[end..];
    }
    Ok((val, mask))
}

pub(crate) const TCP_FLAG_NAMES: [(&str, u16); 9] = [
    ("fin", 0x001),
    ("syn", 0x002),
    ("rst", 0x004),
    ("psh", 0x008),
    ("ack", 0x010),
    ("urg", 0x020),
    ("ece", 0x040),
    ("cwr", 0x080),
    ("ns", 0x100),
];

pub(crate) fn masked16(field: &str, v: &str) -> Result<(u16, u16), FlowSyntaxError> {
    let (a, m) = parse_masked_uint(field, v, 0xffff)?;
    Ok((a as u16, m as u16))
}

pub(crate) fn format_ipv4(v: u128, m: u128) -> String {
    let a = Ipv4Addr::from(v as u32);
    let m32 = m as u32;
    if m32 == u32::MAX {
        a.to_string()
    } else if m32.leading_ones() + m32.trailing_zeros() == 32 {
        format!("{a}/{}", m32.leading_ones())
    } else {
        format!("{a}/{}", Ipv4Addr::from(m32))
    }
}

pub(crate) fn format_ipv6(v: u128, m: u128) -> String {
    let a = Ipv6Addr::from(v);
    if m == u128::MAX {
        a.to_string()
    } else if m.leading_ones() + m.trailing_zeros() == 128 {
        format!("{a}/{}", m.leading_ones())
    } else {
        format!("{a}/{}", Ipv6Addr::from(m))
    }
}

pub(crate) fn format_u16(v: u16, m: u16) -> String {
    if m == 0xffff {
        v.to_string()
    } else {
        format!("0x{v:04x}/0x{m:04x}")
    }
}

/// A hex value of `digits` digits, with its mask unless the mask is `exact`.
pub(crate) fn format_hex(v: u32, m: u32, exact: u32, digits: usize) -> String {
    if m == exact {
        format!("0x{v:0digits$x}")
    } else {
        format!("0x{v:0digits$x}/0x{m:0digits$x}")
    }
}

/// A MAC address, with its mask unless it is exact.
pub(crate) fn format_mac(val: MacAddr, mask: MacAddr) -> String {
    if mask == MacAddr::BROADCAST {
        val.to_string()
    } else {
        format!("{val}/{mask}")
    }
}

/// `ct_state`'s bits in Open vSwitch's order and names.
pub(crate) const CT_STATE_NAMES: [(&str, u8); 8] = [
    ("new", 0x01),
    ("est", 0x02),
    ("rel", 0x04),
    ("rpl", 0x08),
    ("inv", 0x10),
    ("trk", 0x20),
    ("snat", 0x40),
    ("dnat", 0x80),
];

/// `ct_state=+trk+new-est` (the bits named, set or clear), `new|trk` (exactly
/// these), or a number with an optional mask.
pub(crate) fn parse_ct_state(field: &str, v: &str) -> Result<(u8, u8), FlowSyntaxError> {
    let name_bit = |name: &str| {
        CT_STATE_NAMES
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, b)| *b)
            .ok_or_else(|| bad(field, v, format!("unknown connection state '{name}'")))
    };
    if v.starts_with(['+', '-']) {
        let (mut val, mut mask) = (0u8, 0u8);
        let mut rest = v;
        while let Some(sign) = rest.chars().next() {
            let body = &rest[1..];
            let end = body.find(['+', '-']).unwrap_or(body.len());
            let bit = name_bit(&body[..end])?;
            if mask & bit != 0 {
                return Err(bad(field, v, "a state named twice"));
            }
            if sign == '+' {
                val |= bit;
            }
            mask |= bit;
            rest = &body[end..];
        }
        return Ok((val, mask));
    }
    if v.starts_with(|c: char| c.is_ascii_alphabetic()) {
        let mut val = 0u8;
        for name in v.split('|') {
            val |= name_bit(name)?;
        }
        return Ok((val, u8::MAX));
    }
    let (val, mask) = parse_masked_uint(field, v, 0xff)?;
    Ok(((val & mask) as u8, mask as u8))
}

/// As Open vSwitch prints `ct_state`: every bit given as `+name`/`-name`, lowest
/// first; an exact match as the names set joined by `|` (`0` for none).
pub(crate) fn format_ct_state(v: u8, m: u8) -> String {
    if m == u8::MAX {
        let names: Vec<&str> = CT_STATE_NAMES
            .iter()
            .filter(|(_, b)| v & b != 0)
            .map(|(n, _)| *n)
            .collect();
        return if names.is_empty() {
            "0".into()
        } else {
            names.join("|")
        };
    }
    CT_STATE_NAMES
        .iter()
        .filter(|(_, b)| m & b != 0)
        .map(|(n, b)| format!("{}{n}", if v & b != 0 { '+' } else { '-' }))
        .collect()
}
