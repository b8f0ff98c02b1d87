//! The `ovs-ofctl` flow syntax: `priority=100,in_port=1,udp,tp_dst=53,actions=drop`.

use std::net::{Ipv4Addr, Ipv6Addr};

use vsw_packet::key::{
    FRAG_ANY, FRAG_LATER, IPPROTO_ICMP, IPPROTO_ICMPV6, IPPROTO_SCTP, IPPROTO_TCP, IPPROTO_UDP,
    ND_NEIGHBOR_ADVERT, ND_NEIGHBOR_SOLICIT, VLAN_CFI,
};
use vsw_packet::{EtherType, FlowKey, MacAddr};

use crate::action::Action;
use crate::matching::Match;
use crate::rule::{FlowSpec, DEFAULT_PRIORITY};

/// Turns a port name into its number.
pub trait PortResolver {
    fn port_no(&self, name: &str) -> Option<u32>;
}

impl<F: Fn(&str) -> Option<u32>> PortResolver for F {
    fn port_no(&self, name: &str) -> Option<u32> {
        self(name)
    }
}

/// A flow text that vsw cannot accept; the message names the field and value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FlowSyntaxError {
    #[error("unknown field '{0}'")]
    UnknownField(String),
    #[error("bad value '{value}' for {field}: {why}")]
    BadValue {
        field: String,
        value: String,
        why: String,
    },
    #[error("field '{0}' is given more than once")]
    Duplicate(String),
    #[error("{field} needs {needs}")]
    Prerequisite {
        field: &'static str,
        needs: &'static str,
    },
    #[error("unknown action '{0}'")]
    UnknownAction(String),
    #[error("no port named '{0}'")]
    UnknownPort(String),
    #[error("'drop' must be the only action")]
    DropWithOthers,
    #[error("missing 'actions=' (every flow needs actions, e.g. actions=drop)")]
    NoActions,
    #[error("del-flows/match text must not contain actions")]
    UnexpectedActions,
    #[error("action {action} needs {needs} in the match")]
    ActionPrerequisite {
        action: &'static str,
        needs: &'static str,
    },
    #[error("{0} belongs in add-flow, not in a match")]
    NotInMatch(&'static str),
}

fn bad(field: &str, value: &str, why: impl Into<String>) -> FlowSyntaxError {
    FlowSyntaxError::BadValue {
        field: field.to_string(),
        value: value.to_string(),
        why: why.into(),
    }
}

fn parse_uint(field: &str, s: &str, max: u128) -> Result<u128, FlowSyntaxError> {
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

/// `value` or `value/mask`, both integers.
fn parse_masked_uint(field: &str, s: &str, max: u128) -> Result<(u128, u128), FlowSyntaxError> {
    match s.split_once('/') {
        Some((v, m)) => Ok((parse_uint(field, v, max)?, parse_uint(field, m, max)?)),
        None => Ok((parse_uint(field, s, max)?, max)),
    }
}

fn prefix_mask(bits: u32, len: u32) -> u128 {
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

fn parse_ipv4(field: &str, s: &str) -> Result<(u128, u128), FlowSyntaxError> {
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

fn parse_ipv6(field: &str, s: &str) -> Result<(u128, u128), FlowSyntaxError> {
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

fn parse_mac(field: &str, s: &str) -> Result<(MacAddr, MacAddr), FlowSyntaxError> {
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

fn parse_port(field: &str, s: &str, ports: &dyn PortResolver) -> Result<u32, FlowSyntaxError> {
    if s.starts_with(|c: char| c.is_ascii_digit()) {
        let v = parse_uint(field, s, u128::from(u32::MAX))?;
        return Ok(v as u32);
    }
    ports
        .port_no(s)
        .ok_or_else(|| FlowSyntaxError::UnknownPort(s.to_string()))
}

/// Builds a match field by field, remembering what was set for prerequisite checks.
#[derive(Default)]
struct MatchBuilder {
    value: FlowKey,
    mask: FlowKey,
    seen: Vec<String>,
    ipv6_addr: bool,
}

impl MatchBuilder {
    fn once(&mut self, field: &str) -> Result<(), FlowSyntaxError> {
        if self.seen.iter().any(|f| f == field) {
            return Err(FlowSyntaxError::Duplicate(field.to_string()));
        }
        self.seen.push(field.to_string());
        Ok(())
    }

    fn shorthand(
        &mut self,
        name: &str,
        dl_type: u16,
        nw_proto: Option<u8>,
    ) -> Result<(), FlowSyntaxError> {
        self.set_dl_type(name, dl_type)?;
        if let Some(p) = nw_proto {
            self.once("nw_proto")?;
            self.value.nw_proto = p;
            self.mask.nw_proto = 0xff;
        }
        Ok(())
    }

    fn set_dl_type(&mut self, name: &str, t: u16) -> Result<(), FlowSyntaxError> {
        if self.mask.dl_type != 0 && self.value.dl_type != t {
            return Err(bad(name, name, "conflicts with an earlier dl_type"));
        }
        self.value.dl_type = t;
        self.mask.dl_type = 0xffff;
        Ok(())
    }

    fn field(
        &mut self,
        name: &str,
        v: &str,
        ports: &dyn PortResolver,
    ) -> Result<(), FlowSyntaxError> {
        let canonical = match name {
            "icmp_type" | "icmpv6_type" => "tp_src",
            "icmp_code" | "icmpv6_code" => "tp_dst",
            "ipv6_src" => "nw_src",
            "ipv6_dst" => "nw_dst",
            "arp_spa" => "nw_src",
            "arp_tpa" => "nw_dst",
            "arp_op" => "nw_proto",
            "nd_sll" => "arp_sha",
            "nd_tll" => "arp_tha",
            "ip_dscp" => "nw_tos",
            other => other,
        };
        if canonical != "dl_type" {
            self.once(canonical)?;
        }
        match canonical {
            "in_port" => {
                self.value.in_port = parse_port(name, v, ports)?;
                self.mask.in_port = u32::MAX;
            }
            "dl_src" => (self.value.dl_src, self.mask.dl_src) = parse_mac(name, v)?,
            "dl_dst" => (self.value.dl_dst, self.mask.dl_dst) = parse_mac(name, v)?,
            "dl_type" => {
                let t = parse_uint(name, v, 0xffff)? as u16;
                self.set_dl_type(name, t)?;
            }
            "dl_vlan" => {
                let vid = parse_uint(name, v, 0xffff)? as u16;
                self.mask.vlan_tci |= 0x1fff;
                if vid == 0xffff {
                    self.value.vlan_tci = 0;
                } else if vid > 4095 {
                    return Err(bad(name, v, "a VLAN id is 0..4095, or 0xffff for untagged"));
                } else {
                    self.value.vlan_tci = (self.value.vlan_tci & 0xe000) | VLAN_CFI | vid;
                }
            }
            "vlan_tci" => {
                let (val, mask) = parse_masked_uint(name, v, 0xffff)?;
                self.value.vlan_tci = val as u16;
                self.mask.vlan_tci = mask as u16;
            }
            "nw_src" | "nw_dst" => {
                let (a, m) = if name.starts_with("ipv6") {
                    self.ipv6_addr = true;
                    parse_ipv6(name, v)?
                } else {
                    parse_ipv4(name, v)?
                };
                if canonical == "nw_src" {
                    (self.value.nw_src, self.mask.nw_src) = (a, m);
                } else {
                    (self.value.nw_dst, self.mask.nw_dst) = (a, m);
                }
            }
            "nw_proto" => {
                self.value.nw_proto = parse_uint(name, v, 0xff)? as u8;
                self.mask.nw_proto = 0xff;
            }
            "tp_src" => (self.value.tp_src, self.mask.tp_src) = masked16(name, v)?,
            "tp_dst" => (self.value.tp_dst, self.mask.tp_dst) = masked16(name, v)?,
            "dl_vlan_pcp" => {
                let pcp = parse_uint(name, v, 7)? as u16;
                self.value.vlan_tci = (self.value.vlan_tci & !0xe000) | VLAN_CFI | (pcp << 13);
                self.mask.vlan_tci |= 0xe000 | VLAN_CFI;
            }
            "inner_vlan_tci" => {
                let (val, mask) = parse_masked_uint(name, v, 0xffff)?;
                self.value.inner_vlan_tci = val as u16;
                self.mask.inner_vlan_tci = mask as u16;
            }
            "nw_tos" => {
                // As a TOS byte (DSCP << 2), or ip_dscp as the 6-bit DSCP itself.
                let tos = if name == "ip_dscp" {
                    (parse_uint(name, v, 63)? as u8) << 2
                } else {
                    let t = parse_uint(name, v, 255)? as u8;
                    if t & 3 != 0 {
                        return Err(bad(name, v, "the low 2 bits are ECN (use nw_ecn)"));
                    }
                    t
                };
                self.value.nw_tos = (self.value.nw_tos & 3) | tos;
                self.mask.nw_tos |= 0xfc;
            }
            "nw_ecn" => {
                let ecn = parse_uint(name, v, 3)? as u8;
                self.value.nw_tos = (self.value.nw_tos & 0xfc) | ecn;
                self.mask.nw_tos |= 3;
            }
            "nw_ttl" => {
                self.value.nw_ttl = parse_uint(name, v, 255)? as u8;
                self.mask.nw_ttl = 0xff;
            }
            "ip_frag" => {
                (self.value.nw_frag, self.mask.nw_frag) = match v {
                    "no" => (0, FRAG_ANY),
                    "yes" => (FRAG_ANY, FRAG_ANY),
                    "first" => (FRAG_ANY, FRAG_ANY | FRAG_LATER),
                    "later" => (FRAG_ANY | FRAG_LATER, FRAG_ANY | FRAG_LATER),
                    "not_later" => (0, FRAG_LATER),
                    _ => return Err(bad(name, v, "one of no, yes, first, later, not_later")),
                }
            }
            "ipv6_label" => {
                let (val, mask) = parse_masked_uint(name, v, 0xfffff)?;
                self.value.ipv6_label = val as u32;
                self.mask.ipv6_label = mask as u32;
            }
            "tcp_flags" => (self.value.tcp_flags, self.mask.tcp_flags) = parse_tcp_flags(name, v)?,
            "arp_sha" => (self.value.arp_sha, self.mask.arp_sha) = parse_mac(name, v)?,
            "arp_tha" => (self.value.arp_tha, self.mask.arp_tha) = parse_mac(name, v)?,
            "nd_target" => (self.value.nd_target, self.mask.nd_target) = parse_ipv6(name, v)?,
            _ => return Err(FlowSyntaxError::UnknownField(name.to_string())),
        }
        Ok(())
    }

    fn finish(self) -> Result<Match, FlowSyntaxError> {
        let (v, m) = (&self.value, &self.mask);
        let dl = if m.dl_type == 0xffff {
            Some(v.dl_type)
        } else {
            None
        };
        if (m.nw_src != 0 || m.nw_dst != 0)
            && !self.ipv6_addr
            && !matches!(dl, Some(EtherType::IPV4 | EtherType::ARP))
        {
            return Err(FlowSyntaxError::Prerequisite {
                field: "nw_src/nw_dst",
                needs: "ip or arp (dl_type=0x0800 or 0x0806)",
            });
        }
        if self.ipv6_addr && dl != Some(EtherType::IPV6) {
            return Err(FlowSyntaxError::Prerequisite {
                field: "ipv6_src/ipv6_dst",
                needs: "ipv6 (dl_type=0x86dd)",
            });
        }
        if m.nw_proto != 0
            && !matches!(dl, Some(EtherType::IPV4 | EtherType::IPV6 | EtherType::ARP))
        {
            return Err(FlowSyntaxError::Prerequisite {
                field: "nw_proto",
                needs: "ip, ipv6 or arp",
            });
        }
        if (m.tp_src != 0 || m.tp_dst != 0)
            && !(matches!(dl, Some(EtherType::IPV4 | EtherType::IPV6))
                && m.nw_proto == 0xff
                && matches!(
                    v.nw_proto,
                    IPPROTO_TCP | IPPROTO_UDP | IPPROTO_SCTP | IPPROTO_ICMP | IPPROTO_ICMPV6
                ))
        {
            return Err(FlowSyntaxError::Prerequisite {
                field: "tp_src/tp_dst",
                needs: "a transport protocol (tcp, udp, sctp or icmp)",
            });
        }
        let ip = matches!(dl, Some(EtherType::IPV4 | EtherType::IPV6));
        if (m.nw_tos != 0 || m.nw_ttl != 0 || m.nw_frag != 0) && !ip {
            return Err(FlowSyntaxError::Prerequisite {
                field: "nw_tos/nw_ecn/nw_ttl/ip_frag",
                needs: "ip or ipv6",
            });
        }
        if m.ipv6_label != 0 && dl != Some(EtherType::IPV6) {
            return Err(FlowSyntaxError::Prerequisite {
                field: "ipv6_label",
                needs: "ipv6",
            });
        }
        let proto = (m.nw_proto == 0xff).then_some(v.nw_proto);
        if m.tcp_flags != 0 && !(ip && proto == Some(IPPROTO_TCP)) {
            return Err(FlowSyntaxError::Prerequisite {
                field: "tcp_flags",
                needs: "tcp or tcp6",
            });
        }
        let nd = dl == Some(EtherType::IPV6)
            && proto == Some(IPPROTO_ICMPV6)
            && m.tp_src == 0xffff
            && (v.tp_src == u16::from(ND_NEIGHBOR_SOLICIT)
                || v.tp_src == u16::from(ND_NEIGHBOR_ADVERT));
        if (m.arp_sha != MacAddr::ZERO || m.arp_tha != MacAddr::ZERO)
            && dl != Some(EtherType::ARP)
            && !nd
        {
            return Err(FlowSyntaxError::Prerequisite {
                field: "arp_sha/arp_tha/nd_sll/nd_tll",
                needs: "arp, or icmp6 with icmp_type=135 or 136",
            });
        }
        if m.nd_target != 0 && !nd {
            return Err(FlowSyntaxError::Prerequisite {
                field: "nd_target",
                needs: "icmp6 with icmp_type=135 or 136",
            });
        }
        Ok(Match::new(self.value, self.mask))
    }
}

/// TCP flags by name, in OVS's `+syn-ack` form, or as a number with an optional mask.
fn parse_tcp_flags(field: &str, v: &str) -> Result<(u16, u16), FlowSyntaxError> {
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

const TCP_FLAG_NAMES: [(&str, u16); 9] = [
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

fn masked16(field: &str, v: &str) -> Result<(u16, u16), FlowSyntaxError> {
    let (a, m) = parse_masked_uint(field, v, 0xffff)?;
    Ok((a as u16, m as u16))
}

fn tokens(s: &str) -> impl Iterator<Item = &str> {
    s.split(|c: char| c == ',' || c.is_whitespace())
        .filter(|t| !t.is_empty())
}

fn split_actions(text: &str) -> (&str, Option<&str>) {
    match text.find("actions=") {
        Some(i) => (&text[..i], Some(&text[i + "actions=".len()..])),
        None => (text, None),
    }
}

/// What a flow's text gives besides the match.
#[derive(Default)]
struct FlowExtras {
    priority: Option<u16>,
    idle_timeout: Option<u16>,
    hard_timeout: Option<u16>,
}

/// Parses the match part (with `priority` and the timeouts) of a flow.
fn parse_match_part(
    text: &str,
    ports: &dyn PortResolver,
) -> Result<(FlowExtras, Match), FlowSyntaxError> {
    let mut b = MatchBuilder::default();
    let mut extras = FlowExtras::default();
    for tok in tokens(text) {
        let (name, value) = match tok.split_once('=') {
            Some((n, v)) => (n, Some(v)),
            None => (tok, None),
        };
        match (name, value) {
            ("priority" | "idle_timeout" | "hard_timeout", Some(v)) => {
                let slot = match name {
                    "priority" => &mut extras.priority,
                    "idle_timeout" => &mut extras.idle_timeout,
                    _ => &mut extras.hard_timeout,
                };
                if slot.is_some() {
                    return Err(FlowSyntaxError::Duplicate(name.into()));
                }
                *slot = Some(parse_uint(name, v, 0xffff)? as u16);
            }
            // Accepted for familiarity; vsw has one table and no cookies yet.
            ("table", Some("0")) | ("cookie", Some(_)) => {}
            ("table", Some(v)) => return Err(bad("table", v, "vsw has one table, table=0")),
            ("ip", None) => b.shorthand(name, EtherType::IPV4, None)?,
            ("ipv6", None) => b.shorthand(name, EtherType::IPV6, None)?,
            ("arp", None) => b.shorthand(name, EtherType::ARP, None)?,
            ("tcp", None) => b.shorthand(name, EtherType::IPV4, Some(IPPROTO_TCP))?,
            ("udp", None) => b.shorthand(name, EtherType::IPV4, Some(IPPROTO_UDP))?,
            ("sctp", None) => b.shorthand(name, EtherType::IPV4, Some(IPPROTO_SCTP))?,
            ("icmp", None) => b.shorthand(name, EtherType::IPV4, Some(IPPROTO_ICMP))?,
            ("tcp6", None) => b.shorthand(name, EtherType::IPV6, Some(IPPROTO_TCP))?,
            ("udp6", None) => b.shorthand(name, EtherType::IPV6, Some(IPPROTO_UDP))?,
            ("sctp6", None) => b.shorthand(name, EtherType::IPV6, Some(IPPROTO_SCTP))?,
            ("icmp6", None) => b.shorthand(name, EtherType::IPV6, Some(IPPROTO_ICMPV6))?,
            (_, Some(v)) => b.field(name, v, ports)?,
            (_, None) => return Err(FlowSyntaxError::UnknownField(name.to_string())),
        }
    }
    Ok((extras, b.finish()?))
}

fn parse_actions(
    text: &str,
    ports: &dyn PortResolver,
    matcher: &Match,
) -> Result<Vec<Action>, FlowSyntaxError> {
    let mut actions = Vec::new();
    for tok in tokens(text) {
        let lower = tok.to_ascii_lowercase();
        let (verb, arg) = match tok.split_once([':', '=']) {
            Some((v, a)) => (v.to_ascii_lowercase(), Some(a)),
            None => (lower.clone(), None),
        };
        let action = match (verb.as_str(), arg) {
            ("drop", None) => Action::Drop,
            ("normal", None) => Action::Normal,
            ("flood" | "all", None) => Action::Flood,
            ("in_port", None) => Action::InPort,
            ("strip_vlan" | "pop_vlan", None) => Action::StripVlan,
            ("dec_ttl", None) => Action::DecTtl,
            ("mod_dl_src", Some(a)) => Action::SetDlSrc(parse_mac(&verb, a)?.0),
            ("mod_dl_dst", Some(a)) => Action::SetDlDst(parse_mac(&verb, a)?.0),
            ("push_vlan", Some(a)) => {
                let tpid = parse_uint(&verb, a, 0xffff)? as u16;
                if tpid != EtherType::VLAN && tpid != EtherType::QINQ {
                    return Err(bad(&verb, a, "the TPID is 0x8100 or 0x88a8"));
                }
                Action::PushVlan(tpid)
            }
            ("mod_vlan_vid", Some(a)) => Action::SetVlanVid(parse_uint(&verb, a, 4095)? as u16),
            ("mod_vlan_pcp", Some(a)) => Action::SetVlanPcp(parse_uint(&verb, a, 7)? as u8),
            ("mod_nw_src" | "mod_nw_dst", Some(a)) => {
                let ip: Ipv4Addr = a
                    .parse()
                    .map_err(|_| bad(&verb, a, "not an IPv4 address"))?;
                if verb == "mod_nw_src" {
                    Action::SetNwSrc(ip)
                } else {
                    Action::SetNwDst(ip)
                }
            }
            ("mod_nw_tos", Some(a)) => {
                let tos = parse_uint(&verb, a, 255)? as u8;
                if tos & 3 != 0 {
                    return Err(bad(&verb, a, "a TOS value with the 2 ECN bits clear"));
                }
                Action::SetNwTos(tos)
            }
            ("mod_tp_src", Some(a)) => Action::SetTpSrc(parse_uint(&verb, a, 0xffff)? as u16),
            ("mod_tp_dst", Some(a)) => Action::SetTpDst(parse_uint(&verb, a, 0xffff)? as u16),
            _ => {
                let port = if let Some(p) = tok
                    .strip_prefix("output:")
                    .or_else(|| tok.strip_prefix("output="))
                {
                    p
                } else if tok.starts_with(|c: char| c.is_ascii_digit()) {
                    tok
                } else {
                    return Err(FlowSyntaxError::UnknownAction(tok.to_string()));
                };
                Action::Output(parse_port("output", port, ports)?)
            }
        };
        actions.push(action);
    }
    if actions.is_empty() {
        // As in OpenFlow: no actions means drop.
        actions.push(Action::Drop);
    }
    if actions.len() > 1 && actions.contains(&Action::Drop) {
        return Err(FlowSyntaxError::DropWithOthers);
    }
    check_action_prerequisites(&actions, matcher)?;
    Ok(actions)
}

/// A rewrite of a header the match does not promise is refused, as OpenFlow does:
/// `mod_nw_src` needs `ip`, `mod_tp_dst` needs tcp, udp or sctp, `dec_ttl` ip or ipv6.
fn check_action_prerequisites(actions: &[Action], m: &Match) -> Result<(), FlowSyntaxError> {
    let (v, mask) = (m.value(), m.mask());
    let dl = (mask.dl_type == 0xffff).then_some(v.dl_type);
    let proto = (mask.nw_proto == 0xff).then_some(v.nw_proto);
    let ip4 = dl == Some(EtherType::IPV4);
    let ip = ip4 || dl == Some(EtherType::IPV6);
    let ports = ip && matches!(proto, Some(IPPROTO_TCP | IPPROTO_UDP | IPPROTO_SCTP));
    for a in actions {
        let (ok, action, needs) = match a {
            Action::SetNwSrc(_) => (ip4, "mod_nw_src", "ip"),
            Action::SetNwDst(_) => (ip4, "mod_nw_dst", "ip"),
            Action::SetNwTos(_) => (ip, "mod_nw_tos", "ip or ipv6"),
            Action::DecTtl => (ip, "dec_ttl", "ip or ipv6"),
            Action::SetTpSrc(_) => (ports, "mod_tp_src", "tcp, udp or sctp"),
            Action::SetTpDst(_) => (ports, "mod_tp_dst", "tcp, udp or sctp"),
            _ => (true, "", ""),
        };
        if !ok {
            return Err(FlowSyntaxError::ActionPrerequisite { action, needs });
        }
    }
    Ok(())
}

/// Parses a whole flow as `ovs-ofctl add-flow` takes it.
pub fn parse_flow(text: &str, ports: &dyn PortResolver) -> Result<FlowSpec, FlowSyntaxError> {
    let (m, a) = split_actions(text);
    let a = a.ok_or(FlowSyntaxError::NoActions)?;
    let (extras, matcher) = parse_match_part(m, ports)?;
    Ok(FlowSpec {
        priority: extras.priority.unwrap_or(DEFAULT_PRIORITY),
        actions: parse_actions(a, ports, &matcher)?,
        matcher,
        idle_timeout: extras.idle_timeout.unwrap_or(0),
        hard_timeout: extras.hard_timeout.unwrap_or(0),
    })
}

/// Parses a match (with optional priority) as `ovs-ofctl del-flows` takes it.
pub fn parse_match(
    text: &str,
    ports: &dyn PortResolver,
) -> Result<(Option<u16>, Match), FlowSyntaxError> {
    let (m, a) = split_actions(text);
    if a.is_some() {
        return Err(FlowSyntaxError::UnexpectedActions);
    }
    let (extras, matcher) = parse_match_part(m, ports)?;
    if extras.idle_timeout.is_some() {
        return Err(FlowSyntaxError::NotInMatch("idle_timeout"));
    }
    if extras.hard_timeout.is_some() {
        return Err(FlowSyntaxError::NotInMatch("hard_timeout"));
    }
    Ok((extras.priority, matcher))
}

fn format_ipv4(v: u128, m: u128) -> String {
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

fn format_ipv6(v: u128, m: u128) -> String {
    let a = Ipv6Addr::from(v);
    if m == u128::MAX {
        a.to_string()
    } else if m.leading_ones() + m.trailing_zeros() == 128 {
        format!("{a}/{}", m.leading_ones())
    } else {
        format!("{a}/{}", Ipv6Addr::from(m))
    }
}

fn format_u16(v: u16, m: u16) -> String {
    if m == 0xffff {
        v.to_string()
    } else {
        format!("0x{v:04x}/0x{m:04x}")
    }
}

/// Prints a match in the canonical order `ovs-ofctl dump-flows` uses.
pub fn format_match(mt: &Match) -> String {
    let (v, m) = (mt.value(), mt.mask());
    let mut out: Vec<String> = Vec::new();
    let dl = (m.dl_type == 0xffff).then_some(v.dl_type);
    let proto = (m.nw_proto == 0xff).then_some(v.nw_proto);
    let mut proto_printed = false;
    match dl {
        Some(EtherType::IPV4) | Some(EtherType::IPV6) => {
            let v6 = dl == Some(EtherType::IPV6);
            let name = match proto {
                Some(IPPROTO_TCP) => Some("tcp"),
                Some(IPPROTO_UDP) => Some("udp"),
                Some(IPPROTO_SCTP) => Some("sctp"),
                Some(IPPROTO_ICMP) if !v6 => Some("icmp"),
                Some(IPPROTO_ICMPV6) if v6 => Some("icmp6"),
                _ => None,
            };
            match name {
                Some(n) if n == "icmp6" => out.push(n.into()),
                Some(n) => out.push(if v6 { format!("{n}6") } else { n.into() }),
                None => out.push(if v6 { "ipv6".into() } else { "ip".into() }),
            }
            proto_printed = name.is_some();
        }
        Some(EtherType::ARP) => out.push("arp".into()),
        Some(t) => out.push(format!("dl_type=0x{t:04x}")),
        None => {}
    }
    if m.in_port != 0 {
        out.push(format!("in_port={}", v.in_port));
    }
    if m.vlan_tci == 0xf000 && v.vlan_tci & VLAN_CFI != 0 {
        out.push(format!("dl_vlan_pcp={}", v.vlan_tci >> 13));
    } else if m.vlan_tci == 0xffff && v.vlan_tci & VLAN_CFI != 0 {
        out.push(format!("dl_vlan={}", v.vlan_tci & 0x0fff));
        out.push(format!("dl_vlan_pcp={}", v.vlan_tci >> 13));
    } else if m.vlan_tci == 0x1fff {
        if v.vlan_tci == 0 {
            out.push("dl_vlan=0xffff".into());
        } else {
            out.push(format!("dl_vlan={}", v.vlan_tci & 0x0fff));
        }
    } else if m.vlan_tci != 0 {
        out.push(format!(
            "vlan_tci=0x{:04x}/0x{:04x}",
            v.vlan_tci, m.vlan_tci
        ));
    }
    for (name, val, mask) in [
        ("dl_src", v.dl_src, m.dl_src),
        ("dl_dst", v.dl_dst, m.dl_dst),
    ] {
        if mask == MacAddr::BROADCAST {
            out.push(format!("{name}={val}"));
        } else if mask != MacAddr::ZERO {
            out.push(format!("{name}={val}/{mask}"));
        }
    }
    let v6 = dl == Some(EtherType::IPV6);
    for (name, val, mask) in [("src", v.nw_src, m.nw_src), ("dst", v.nw_dst, m.nw_dst)] {
        if mask != 0 {
            if v6 {
                out.push(format!("ipv6_{name}={}", format_ipv6(val, mask)));
            } else {
                out.push(format!("nw_{name}={}", format_ipv4(val, mask)));
            }
        }
    }
    if let (Some(p), false) = (proto, proto_printed) {
        out.push(format!("nw_proto={p}"));
    }
    let icmp = matches!(proto, Some(IPPROTO_ICMP | IPPROTO_ICMPV6));
    let (src, dst) = if icmp {
        ("icmp_type", "icmp_code")
    } else {
        ("tp_src", "tp_dst")
    };
    if m.tp_src != 0 {
        out.push(format!("{src}={}", format_u16(v.tp_src, m.tp_src)));
    }
    if m.tp_dst != 0 {
        out.push(format!("{dst}={}", format_u16(v.tp_dst, m.tp_dst)));
    }
    if m.inner_vlan_tci != 0 {
        out.push(if m.inner_vlan_tci == 0xffff {
            format!("inner_vlan_tci=0x{:04x}", v.inner_vlan_tci)
        } else {
            format!(
                "inner_vlan_tci=0x{:04x}/0x{:04x}",
                v.inner_vlan_tci, m.inner_vlan_tci
            )
        });
    }
    if m.nw_tos & 0xfc != 0 {
        out.push(format!("nw_tos={}", v.nw_tos & 0xfc));
    }
    if m.nw_tos & 3 != 0 {
        out.push(format!("nw_ecn={}", v.nw_tos & 3));
    }
    if m.nw_ttl != 0 {
        out.push(format!("nw_ttl={}", v.nw_ttl));
    }
    if m.nw_frag != 0 {
        let name = match (v.nw_frag, m.nw_frag) {
            (0, FRAG_ANY) => "no",
            (FRAG_ANY, FRAG_ANY) => "yes",
            (0, FRAG_LATER) => "not_later",
            (FRAG_ANY, _) => "first",
            _ => "later",
        };
        out.push(format!("ip_frag={name}"));
    }
    if m.ipv6_label != 0 {
        if m.ipv6_label == 0xfffff {
            out.push(format!("ipv6_label=0x{:05x}", v.ipv6_label));
        } else {
            out.push(format!(
                "ipv6_label=0x{:05x}/0x{:05x}",
                v.ipv6_label, m.ipv6_label
            ));
        }
    }
    if m.tcp_flags != 0 {
        out.push(format!(
            "tcp_flags=0x{:03x}/0x{:03x}",
            v.tcp_flags, m.tcp_flags
        ));
    }
    let arp = dl == Some(EtherType::ARP);
    let (sha, tha) = if arp {
        ("arp_sha", "arp_tha")
    } else {
        ("nd_sll", "nd_tll")
    };
    if m.nd_target != 0 {
        out.push(format!(
            "nd_target={}",
            format_ipv6(v.nd_target, m.nd_target)
        ));
    }
    for (name, val, mask) in [(sha, v.arp_sha, m.arp_sha), (tha, v.arp_tha, m.arp_tha)] {
        if mask == MacAddr::BROADCAST {
            out.push(format!("{name}={val}"));
        } else if mask != MacAddr::ZERO {
            out.push(format!("{name}={val}/{mask}"));
        }
    }
    out.join(",")
}

pub fn format_actions(actions: &[Action]) -> String {
    actions
        .iter()
        .map(|a| a.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// Prints a flow so that [`parse_flow`] gives it back.
pub fn format_flow(spec: &FlowSpec) -> String {
    let m = format_match(&spec.matcher);
    let sep = if m.is_empty() { "" } else { "," };
    let mut timeouts = String::new();
    if spec.idle_timeout != 0 {
        timeouts += &format!("idle_timeout={},", spec.idle_timeout);
    }
    if spec.hard_timeout != 0 {
        timeouts += &format!("hard_timeout={},", spec.hard_timeout);
    }
    format!(
        "{timeouts}priority={}{sep}{m},actions={}",
        spec.priority,
        format_actions(&spec.actions)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn names(n: &str) -> Option<u32> {
        match n {
            "sw0" => Some(1),
            "sw1" => Some(2),
            _ => None,
        }
    }

    fn parse(s: &str) -> Result<FlowSpec, FlowSyntaxError> {
        parse_flow(s, &names)
    }

    #[test]
    fn the_issue_example() {
        let f = parse("priority=100,in_port=1,udp,tp_dst=53,actions=drop").unwrap();
        assert_eq!(f.priority, 100);
        assert_eq!(f.actions, vec![Action::Drop]);
        let (v, m) = (f.matcher.value(), f.matcher.mask());
        assert_eq!((v.in_port, m.in_port), (1, u32::MAX));
        assert_eq!(v.dl_type, EtherType::IPV4);
        assert_eq!(v.nw_proto, IPPROTO_UDP);
        assert_eq!((v.tp_dst, m.tp_dst), (53, 0xffff));
        assert_eq!(
            format_flow(&f),
            "priority=100,udp,in_port=1,tp_dst=53,actions=drop"
        );
    }

    #[test]
    fn ports_by_name() {
        let f = parse("in_port=sw0,actions=output:sw1").unwrap();
        assert_eq!(f.matcher.value().in_port, 1);
        assert_eq!(f.actions, vec![Action::Output(2)]);
        assert_eq!(f.priority, DEFAULT_PRIORITY);
        assert_eq!(
            parse("in_port=nope,actions=drop"),
            Err(FlowSyntaxError::UnknownPort("nope".into()))
        );
    }

    #[test]
    fn prefixes_and_masks() {
        let f = parse("ip,nw_src=198.18.0.0/15,nw_dst=198.19.1.0/255.255.255.0,actions=normal")
            .unwrap();
        assert_eq!(f.matcher.mask().nw_src, 0xfffe_0000);
        assert_eq!(f.matcher.mask().nw_dst, 0xffff_ff00);
        assert_eq!(
            format_flow(&f),
            "priority=32768,ip,nw_src=198.18.0.0/15,nw_dst=198.19.1.0/24,actions=NORMAL"
        );
        let f = parse("dl_dst=01:00:00:00:00:00/01:00:00:00:00:00,actions=flood").unwrap();
        assert_eq!(
            format_flow(&f),
            "priority=32768,dl_dst=01:00:00:00:00:00/01:00:00:00:00:00,actions=FLOOD"
        );
    }

    #[test]
    fn errors_name_field_and_value() {
        let e = parse("priority=1,nw_src=300.1.1.1,ip,actions=drop").unwrap_err();
        assert_eq!(
            e.to_string(),
            "bad value '300.1.1.1' for nw_src: not an IPv4 address"
        );
        let e = parse("tp_dst=80,actions=drop").unwrap_err();
        assert!(
            e.to_string()
                .contains("tp_src/tp_dst needs a transport protocol"),
            "{e}"
        );
        assert_eq!(
            parse("frob=1,actions=drop"),
            Err(FlowSyntaxError::UnknownField("frob".into()))
        );
        assert_eq!(parse("ip"), Err(FlowSyntaxError::NoActions));
        assert_eq!(
            parse("actions=explode"),
            Err(FlowSyntaxError::UnknownAction("explode".into()))
        );
        assert_eq!(
            parse("actions=drop,output:1"),
            Err(FlowSyntaxError::DropWithOthers)
        );
        assert_eq!(
            parse("ip,ip,actions=drop").ok().map(|f| f.priority),
            Some(DEFAULT_PRIORITY)
        );
        assert!(parse("udp,tcp,actions=drop").is_err());
        assert!(matches!(
            parse("priority=70000,actions=drop"),
            Err(FlowSyntaxError::BadValue { .. })
        ));
        assert!(matches!(
            parse("dl_vlan=5000,actions=drop"),
            Err(FlowSyntaxError::BadValue { .. })
        ));
        assert!(matches!(
            parse("in_port=1,in_port=2,actions=drop"),
            Err(FlowSyntaxError::Duplicate(_))
        ));
    }

    #[test]
    fn shorthands_and_vlan() {
        for (text, canon) in [
            ("arp,actions=normal", "priority=32768,arp,actions=NORMAL"),
            (
                "icmp,icmp_type=8,actions=drop",
                "priority=32768,icmp,icmp_type=8,actions=drop",
            ),
            ("ipv6,actions=drop", "priority=32768,ipv6,actions=drop"),
            (
                "tcp6,tp_src=22,actions=drop",
                "priority=32768,tcp6,tp_src=22,actions=drop",
            ),
            (
                "dl_vlan=10,actions=1,2",
                "priority=32768,dl_vlan=10,actions=output:1,output:2",
            ),
            (
                "dl_vlan=0xffff,actions=drop",
                "priority=32768,dl_vlan=0xffff,actions=drop",
            ),
            (
                "dl_type=0x88cc,actions=drop",
                "priority=32768,dl_type=0x88cc,actions=drop",
            ),
            (
                "ip,nw_proto=47,actions=drop",
                "priority=32768,ip,nw_proto=47,actions=drop",
            ),
            (
                "udp,tp_dst=0x1000/0xf000 actions=drop",
                "priority=32768,udp,tp_dst=0x1000/0xf000,actions=drop",
            ),
            (
                "ipv6,ipv6_dst=2001:db8::/32,actions=drop",
                "priority=32768,ipv6,ipv6_dst=2001:db8::/32,actions=drop",
            ),
        ] {
            let f = parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(format_flow(&f), canon, "{text}");
        }
    }

    #[test]
    fn every_field_of_the_key_round_trips() {
        for (text, canon) in [
            (
                "tcp,nw_tos=184,nw_ecn=1,nw_ttl=64,tcp_flags=+syn-ack,actions=drop",
                "priority=32768,tcp,nw_tos=184,nw_ecn=1,nw_ttl=64,tcp_flags=0x002/0x012,actions=drop",
            ),
            (
                "ip,ip_dscp=46,ip_frag=later,actions=drop",
                "priority=32768,ip,nw_tos=184,ip_frag=later,actions=drop",
            ),
            (
                "ip,ip_frag=first,actions=drop",
                "priority=32768,ip,ip_frag=first,actions=drop",
            ),
            (
                "ipv6,ipv6_label=0x12345,actions=drop",
                "priority=32768,ipv6,ipv6_label=0x12345,actions=drop",
            ),
            (
                "arp,arp_op=2,arp_sha=02:00:00:00:00:01,arp_tha=02:00:00:00:00:02,actions=drop",
                "priority=32768,arp,nw_proto=2,arp_sha=02:00:00:00:00:01,arp_tha=02:00:00:00:00:02,actions=drop",
            ),
            (
                "icmp6,icmp_type=135,nd_target=2001:db8::2,nd_sll=02:00:00:00:00:01,actions=drop",
                "priority=32768,icmp6,icmp_type=135,nd_target=2001:db8::2,nd_sll=02:00:00:00:00:01,actions=drop",
            ),
            (
                "dl_vlan=10,dl_vlan_pcp=5,inner_vlan_tci=0x1014,actions=drop",
                "priority=32768,dl_vlan=10,dl_vlan_pcp=5,inner_vlan_tci=0x1014,actions=drop",
            ),
            (
                "dl_vlan_pcp=3,actions=drop",
                "priority=32768,dl_vlan_pcp=3,actions=drop",
            ),
            (
                "idle_timeout=10,hard_timeout=60,in_port=1,actions=drop",
                "idle_timeout=10,hard_timeout=60,priority=32768,in_port=1,actions=drop",
            ),
        ] {
            let f = parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(format_flow(&f), canon, "{text}");
            assert_eq!(parse(&format_flow(&f)).unwrap(), f, "{text}");
        }
    }

    #[test]
    fn field_prerequisites_and_bad_values() {
        for (text, needle) in [
            ("nw_ttl=3,actions=drop", "nw_ttl/ip_frag needs ip or ipv6"),
            ("udp,tcp_flags=+syn,actions=drop", "tcp_flags needs tcp"),
            ("ip,ipv6_label=1,actions=drop", "ipv6_label needs ipv6"),
            ("icmp6,nd_target=::1,actions=drop", "nd_target needs icmp6"),
            ("ip,arp_sha=02:00:00:00:00:01,actions=drop", "needs arp"),
            (
                "tcp,tcp_flags=+syn+bogus,actions=drop",
                "unknown TCP flag 'bogus'",
            ),
            ("ip,nw_tos=3,actions=drop", "ECN"),
            ("ip,ip_frag=maybe,actions=drop", "one of no, yes"),
            ("dl_vlan_pcp=8,actions=drop", "larger than 7"),
        ] {
            let e = parse(text).expect_err(text).to_string();
            assert!(e.contains(needle), "{text}: {e}");
        }
    }

    #[test]
    fn every_action_round_trips() {
        let text = "tcp,actions=mod_dl_src:02:00:00:00:00:0a,mod_dl_dst:02:00:00:00:00:0b,push_vlan:0x8100,mod_vlan_vid:10,mod_vlan_pcp:3,strip_vlan,mod_nw_src:198.18.0.9,mod_nw_dst:198.18.0.10,mod_nw_tos:32,mod_tp_src:1000,mod_tp_dst:2000,dec_ttl,output:1,in_port,IN_PORT";
        let f = parse(text).unwrap();
        assert_eq!(f.actions.len(), 15);
        assert_eq!(f.actions[14], Action::InPort);
        let printed = format_flow(&f);
        assert!(
            printed.ends_with("mod_tp_dst:2000,dec_ttl,output:1,IN_PORT,IN_PORT"),
            "{printed}"
        );
        assert_eq!(parse(&printed).unwrap(), f);
    }

    #[test]
    fn rewrites_need_the_headers_they_rewrite() {
        for (text, needle) in [
            ("actions=mod_nw_src:1.2.3.4,output:1", "mod_nw_src needs ip"),
            (
                "ip,actions=mod_tp_dst:80,output:1",
                "mod_tp_dst needs tcp, udp or sctp",
            ),
            ("arp,actions=dec_ttl,output:1", "dec_ttl needs ip or ipv6"),
            ("ipv6,actions=mod_nw_dst:1.2.3.4", "mod_nw_dst needs ip"),
            ("actions=push_vlan:0x0800", "0x8100 or 0x88a8"),
            ("actions=mod_vlan_vid:4096", "larger than 4095"),
            ("ip,actions=mod_nw_tos:33", "ECN bits clear"),
        ] {
            let e = parse(text).expect_err(text).to_string();
            assert!(e.contains(needle), "{text}: {e}");
        }
        assert!(parse("udp6,actions=mod_tp_dst:80,dec_ttl,output:1").is_ok());
        assert_eq!(
            parse_match("idle_timeout=5,in_port=1", &names),
            Err(FlowSyntaxError::NotInMatch("idle_timeout"))
        );
    }

    #[test]
    fn match_for_del_flows() {
        let (p, m) = parse_match("in_port=1", &names).unwrap();
        assert_eq!(p, None);
        assert_eq!(m.value().in_port, 1);
        assert_eq!(
            parse_match("in_port=1,actions=drop", &names),
            Err(FlowSyntaxError::UnexpectedActions)
        );
    }

    fn arb_spec() -> impl Strategy<Value = FlowSpec> {
        (
            any::<u16>(),
            proptest::option::of(1u32..100),
            proptest::option::of(0u16..4096),
            prop_oneof![
                Just(None),
                Just(Some((EtherType::IPV4, None))),
                Just(Some((EtherType::IPV4, Some(IPPROTO_UDP)))),
                Just(Some((EtherType::IPV6, Some(IPPROTO_TCP)))),
                Just(Some((EtherType::ARP, None)))
            ],
            0u32..=32,
            any::<u32>(),
            proptest::option::of(any::<u16>()),
            proptest::collection::vec(
                prop_oneof![
                    (1u32..10).prop_map(Action::Output),
                    Just(Action::Normal),
                    Just(Action::Flood)
                ],
                0..3,
            ),
        )
            .prop_map(|(priority, port, vlan, l3, plen, addr, tp, actions)| {
                let mut text = format!("priority={priority}");
                if let Some(p) = port {
                    text += &format!(",in_port={p}");
                }
                if let Some(v) = vlan {
                    text += &format!(",dl_vlan={v}");
                }
                match l3 {
                    Some((EtherType::IPV4, None)) => {
                        text += &format!(",ip,nw_dst={}/{plen}", Ipv4Addr::from(addr))
                    }
                    Some((EtherType::IPV4, Some(_))) => {
                        text += ",udp";
                        if let Some(t) = tp {
                            text += &format!(",tp_dst={t}");
                        }
                    }
                    Some((EtherType::IPV6, _)) => {
                        text += &format!(",tcp6,ipv6_src=2001:db8::{:x}", addr & 0xffff)
                    }
                    Some(_) => text += &format!(",arp,nw_src={}", Ipv4Addr::from(addr)),
                    None => {}
                }
                let acts: Vec<String> = actions.iter().map(|a| a.to_string()).collect();
                text += &format!(
                    ",actions={}",
                    if acts.is_empty() {
                        "drop".into()
                    } else {
                        acts.join(",")
                    }
                );
                parse_flow(&text, &names).unwrap_or_else(|e| panic!("{text}: {e}"))
            })
    }

    proptest! {
        #[test]
        fn print_then_parse_is_identity(spec in arb_spec()) {
            let text = format_flow(&spec);
            let again = parse_flow(&text, &names).unwrap();
            prop_assert_eq!(again, spec);
        }

        #[test]
        fn garbage_never_panics(s in "[a-z_=0-9,./:x ]{0,60}") {
            let _ = parse_flow(&s, &names);
            let _ = parse_match(&s, &names);
        }
    }
}
