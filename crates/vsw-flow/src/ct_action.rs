//! `ct(…)` and `ct_clear`, Open vSwitch's connection tracking actions, as
//! `ovs-ofctl` reads and prints them:
//! `ct(commit,force,table=T,zone=N|zone=SUBFIELD,nat(src|dst=A[-B][:P[-Q]],persistent,hash|random),exec(set_field:V[/M]->ct_mark|ct_label),alg=ftp|tftp)`.

use std::fmt;
use std::net::IpAddr;

use crate::error::FlowSyntaxError;
use crate::subfield::Subfield;
use crate::values::{bad, c_hex, parse_masked_uint, parse_uint};

/// The zone a `ct` tracks in: a number, or bits of a field (a register).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CtZone {
    Imm(u16),
    Field(Subfield),
}

/// Which end `nat(…)` rewrites.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NatEnd {
    Src,
    Dst,
}

/// `nat`, or `nat(src|dst=…)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct NatAction {
    /// `None`: `nat` alone (a committed connection's NAT applied, none set up).
    pub end: Option<NatEnd>,
    /// The address range (`None`: no range given).
    pub addrs: Option<(IpAddr, IpAddr)>,
    /// The port range (`None`: the packet's own ports).
    pub ports: Option<(u16, u16)>,
    pub persistent: bool,
    pub hash: bool,
    pub random: bool,
}

/// What `exec(…)` of a `ct(commit…)` writes into the connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CtExec {
    /// `set_field:V/M->ct_mark`.
    Mark(u32, u32),
    /// `set_field:V/M->ct_label`.
    Label(u128, u128),
}

/// `ct(…)`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CtAction {
    pub commit: bool,
    pub force: bool,
    /// Where the packet goes on after tracking (`table=T`: a recirculation).
    pub table: Option<u8>,
    pub zone: CtZone,
    pub nat: Option<NatAction>,
    pub exec: Vec<CtExec>,
    /// `alg=ftp|tftp` (the port of the helper; 0: none).
    pub alg: u16,
}

impl Default for CtAction {
    fn default() -> CtAction {
        CtAction {
            commit: false,
            force: false,
            table: None,
            zone: CtZone::Imm(0),
            nat: None,
            exec: Vec::new(),
            alg: 0,
        }
    }
}

const FTP: u16 = 21;
const TFTP: u16 = 69;

/// Reads the arguments of `ct(…)` (without the parentheses).
pub fn parse_ct(args: &str) -> Result<CtAction, FlowSyntaxError> {
    let mut ct = CtAction::default();
    let whole = || format!("ct({args})");
    for token in crate::values::tokens(args) {
        let (key, value) = match token.split_once(['=', '(']) {
            Some((k, _)) if token.as_bytes()[k.len()] == b'(' => {
                let inner = token[k.len() + 1..]
                    .strip_suffix(')')
                    .ok_or_else(|| bad("ct", &whole(), "an unclosed parenthesis"))?;
                (k, Some(inner))
            }
            Some((k, v)) => (k, Some(v)),
            None => (token, None),
        };
        match (key, value) {
            ("commit", None) => ct.commit = true,
            ("force", None) => ct.force = true,
            ("table", Some(v)) => {
                let t = parse_uint("ct", v, 0xfe)
                    .map_err(|_| bad("ct", &whole(), format!("invalid table {v}")))?;
                ct.table = Some(t as u8);
            }
            ("zone", Some(v)) => {
                ct.zone = match parse_uint("ct", v, 0xffff) {
                    Ok(z) => CtZone::Imm(z as u16),
                    Err(_) => CtZone::Field(Subfield::parse("ct", v)?),
                };
            }
            ("nat", v) => ct.nat = Some(parse_nat(v.unwrap_or(""))?),
            ("exec", Some(v)) => {
                for a in crate::values::tokens(v) {
                    ct.exec.push(parse_exec(a)?);
                }
            }
            ("alg", Some("ftp")) => ct.alg = FTP,
            ("alg", Some("tftp")) => ct.alg = TFTP,
            ("alg", Some(v)) => return Err(bad("ct", v, "alg is ftp or tftp")),
            _ => {
                return Err(bad(
                    "ct",
                    &whole(),
                    format!("invalid argument to \"ct\" action: `{key}'"),
                ))
            }
        }
    }
    if ct.force && !ct.commit {
        return Err(bad(
            "ct",
            &whole(),
            "\"force\" flag requires \"commit\" flag.",
        ));
    }
    if !ct.exec.is_empty() && !ct.commit {
        return Err(bad("ct", &whole(), "exec needs commit"));
    }
    Ok(ct)
}

fn parse_exec(a: &str) -> Result<CtExec, FlowSyntaxError> {
    let set = a.strip_prefix("set_field:").ok_or_else(|| {
        bad(
            "exec",
            a,
            "only set_field of ct_mark or ct_label runs in ct's exec",
        )
    })?;
    let (value, field) = set
        .split_once("->")
        .ok_or_else(|| bad("exec", a, "set_field:VALUE->FIELD"))?;
    match field {
        "ct_mark" => {
            let (v, m) = parse_masked_uint("exec", value, u128::from(u32::MAX))?;
            Ok(CtExec::Mark((v & m) as u32, m as u32))
        }
        "ct_label" => {
            let (v, m) = parse_masked_uint("exec", value, u128::MAX)?;
            Ok(CtExec::Label(v & m, m))
        }
        _ => Err(bad(
            "exec",
            a,
            "only ct_mark and ct_label are set in ct's exec",
        )),
    }
}

fn parse_nat(args: &str) -> Result<NatAction, FlowSyntaxError> {
    let mut nat = NatAction {
        end: None,
        addrs: None,
        ports: None,
        persistent: false,
        hash: false,
        random: false,
    };
    let mut flags = false;
    for token in crate::values::tokens(args) {
        match token.split_once('=') {
            Some((end @ ("src" | "dst"), range)) => {
                if nat.end.is_some() {
                    return Err(bad(
                        "nat",
                        args,
                        "May only specify one of \"src\" or \"dst\".",
                    ));
                }
                nat.end = Some(if end == "src" {
                    NatEnd::Src
                } else {
                    NatEnd::Dst
                });
                (nat.addrs, nat.ports) = parse_nat_range(range)?;
            }
            None if token == "src" || token == "dst" => {
                if nat.end.is_some() {
                    return Err(bad(
                        "nat",
                        args,
                        "May only specify one of \"src\" or \"dst\".",
                    ));
                }
                nat.end = Some(if token == "src" {
                    NatEnd::Src
                } else {
                    NatEnd::Dst
                });
            }
            None if token == "persistent" => (nat.persistent, flags) = (true, true),
            None if token == "hash" => (nat.hash, flags) = (true, true),
            None if token == "random" => (nat.random, flags) = (true, true),
            _ => {
                return Err(bad(
                    "nat",
                    token,
                    format!("invalid key \"{token}\" in \"nat\" argument"),
                ))
            }
        }
    }
    if nat.end.is_none() && flags {
        return Err(bad(
            "nat",
            args,
            "Flags allowed only with \"src\" or \"dst\".",
        ));
    }
    if nat.hash && nat.random {
        return Err(bad(
            "nat",
            args,
            "Both \"hash\" and \"random\" are not allowed.",
        ));
    }
    Ok(nat)
}

type NatRangeText = (Option<(IpAddr, IpAddr)>, Option<(u16, u16)>);

/// `A[-B][:P[-Q]]`, IPv6 addresses in brackets when a port follows.
fn parse_nat_range(s: &str) -> Result<NatRangeText, FlowSyntaxError> {
    let invalid = || bad("nat", s, format!("invalid nat range \"{s}\""));
    let (addrs, ports) = if let Some(rest) = s.strip_prefix('[') {
        // [A]-[B]:P or [A]:P
        let (a, rest) = rest.split_once(']').ok_or_else(invalid)?;
        let (b, rest) = match rest.strip_prefix("-[") {
            Some(r) => {
                let (b, r) = r.split_once(']').ok_or_else(invalid)?;
                (Some(b), r)
            }
            None => (None, rest),
        };
        let ports = match rest.strip_prefix(':') {
            Some(p) => Some(p),
            None if rest.is_empty() => None,
            None => return Err(invalid()),
        };
        ((a.to_string(), b.map(str::to_string)), ports)
    } else if s.matches(':').count() > 1 {
        // Bare IPv6 addresses: no port.
        let (a, b) = match s.split_once('-') {
            Some((a, b)) => (a.to_string(), Some(b.to_string())),
            None => (s.to_string(), None),
        };
        ((a, b), None)
    } else {
        let (addr, ports) = match s.split_once(':') {
            Some((a, p)) => (a, Some(p)),
            None => (s, None),
        };
        let (a, b) = match addr.split_once('-') {
            Some((a, b)) => (a.to_string(), Some(b.to_string())),
            None => (addr.to_string(), None),
        };
        ((a, b), ports)
    };
    let min: IpAddr = addrs.0.parse().map_err(|_| invalid())?;
    let max: IpAddr = match &addrs.1 {
        Some(b) => b.parse().map_err(|_| invalid())?,
        None => min,
    };
    let order = match (min, max) {
        (IpAddr::V4(a), IpAddr::V4(b)) => u32::from(a) <= u32::from(b),
        (IpAddr::V6(a), IpAddr::V6(b)) => u128::from(a) <= u128::from(b),
        _ => false,
    };
    if !order {
        return Err(invalid());
    }
    let ports = match ports {
        None => None,
        Some(p) => {
            let (lo, hi) = match p.split_once('-') {
                Some((lo, hi)) => (lo, Some(hi)),
                None => (p, None),
            };
            let lo = lo.parse::<u16>().map_err(|_| invalid())?;
            let hi = match hi {
                Some(h) => h.parse::<u16>().map_err(|_| invalid())?,
                None => lo,
            };
            if hi < lo || lo == 0 {
                return Err(invalid());
            }
            Some((lo, hi))
        }
    };
    Ok((Some((min, max)), ports))
}

impl fmt::Display for NatAction {
    /// As Open vSwitch's `format_NAT`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("nat")?;
        let Some(end) = self.end else {
            return Ok(());
        };
        let mut parts = vec![String::from(match end {
            NatEnd::Src => "src",
            NatEnd::Dst => "dst",
        })];
        if let Some((min, max)) = self.addrs {
            let v6 = min.is_ipv6();
            let addr = |a: IpAddr| {
                if v6 && self.ports.is_some() {
                    format!("[{a}]")
                } else {
                    a.to_string()
                }
            };
            let mut r = format!("={}", addr(min));
            if max != min {
                r += &format!("-{}", addr(max));
            }
            if let Some((lo, hi)) = self.ports {
                r += &format!(":{lo}");
                if hi != lo {
                    r += &format!("-{hi}");
                }
            }
            parts[0] += &r;
            if self.persistent {
                parts.push("persistent".into());
            }
            if self.hash {
                parts.push("hash".into());
            }
            if self.random {
                parts.push("random".into());
            }
        }
        write!(f, "({})", parts.join(","))
    }
}

impl fmt::Display for CtExec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            CtExec::Mark(v, m) if m == u32::MAX => {
                write!(f, "set_field:{}->ct_mark", c_hex(v.into()))
            }
            CtExec::Mark(v, m) => write!(
                f,
                "set_field:{}/{}->ct_mark",
                c_hex(v.into()),
                c_hex(m.into())
            ),
            CtExec::Label(v, m) if m == u128::MAX => write!(f, "set_field:{}->ct_label", c_hex(v)),
            CtExec::Label(v, m) => write!(f, "set_field:{}/{}->ct_label", c_hex(v), c_hex(m)),
        }
    }
}

impl CtAction {
    /// The arguments as Open vSwitch's `format_CT` writes them (inside `ct(…)`).
    pub fn format_args(&self) -> String {
        let mut p: Vec<String> = Vec::new();
        if self.commit {
            p.push("commit".into());
        }
        if self.force {
            p.push("force".into());
        }
        if let Some(t) = self.table {
            p.push(format!("table={t}"));
        }
        match self.zone {
            CtZone::Field(s) => p.push(format!("zone={}", s.format())),
            CtZone::Imm(0) => {}
            CtZone::Imm(z) => p.push(format!("zone={z}")),
        }
        if let Some(n) = &self.nat {
            p.push(n.to_string());
        }
        if !self.exec.is_empty() {
            let e: Vec<String> = self.exec.iter().map(ToString::to_string).collect();
            p.push(format!("exec({})", e.join(",")));
        }
        match self.alg {
            0 => {}
            FTP => p.push("alg=ftp".into()),
            TFTP => p.push("alg=tftp".into()),
            n => p.push(format!("alg={n}")),
        }
        p.join(",")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ct_reads_and_prints_as_ovs_ofctl() {
        for (text, printed) in [
            ("", ""),
            ("commit", "commit"),
            ("zone=1,table=2,commit", "commit,table=2,zone=1"),
            (
                "commit,zone=NXM_NX_REG13[0..15],table=3",
                "commit,table=3,zone=NXM_NX_REG13[0..15]",
            ),
            ("table=1,zone=5,nat", "table=1,zone=5,nat"),
            (
                "commit,nat(src=10.0.0.1-10.0.0.3:1000-2000,random)",
                "commit,nat(src=10.0.0.1-10.0.0.3:1000-2000,random)",
            ),
            (
                "commit,nat(dst=198.18.0.5:8080)",
                "commit,nat(dst=198.18.0.5:8080)",
            ),
            (
                "commit,nat(dst=[fd00::1]:80)",
                "commit,nat(dst=[fd00::1]:80)",
            ),
            (
                "commit,nat(src=fd00::1-fd00::5)",
                "commit,nat(src=fd00::1-fd00::5)",
            ),
            (
                "commit,exec(set_field:0x1->ct_mark,set_field:0x2/0x3->ct_label)",
                "commit,exec(set_field:0x1->ct_mark,set_field:0x2/0x3->ct_label)",
            ),
            ("commit,force,alg=ftp", "commit,force,alg=ftp"),
        ] {
            let ct = parse_ct(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(ct.format_args(), printed, "{text}");
            assert_eq!(parse_ct(printed).unwrap(), ct, "{text}");
        }
        // In rules: what the datapath carries out; the helpers refused.
        let no_ports = |_: &str| None;
        for text in [
            "ip,actions=ct(commit,zone=1)",
            "actions=ct_clear",
            "ipv6,actions=ct(table=3)",
        ] {
            assert!(crate::syntax::parse_flow(text, &no_ports).is_ok(), "{text}");
        }
        assert!(
            crate::syntax::parse_flow("ip,actions=ct(commit,nat(src=10.0.0.1))", &no_ports).is_ok()
        );
        assert!(crate::syntax::parse_flow("ip,actions=ct(commit,force)", &no_ports).is_ok());
        assert!(crate::syntax::parse_flow("udp,actions=ct(commit,alg=tftp)", &no_ports).is_ok());
        assert!(crate::syntax::parse_flow("tcp,actions=ct(commit,alg=ftp)", &no_ports).is_ok());
        let text = "ip,actions=ct(commit,nat(src=10.0.0.1),alg=ftp)";
        let e = crate::syntax::parse_flow(text, &no_ports)
            .unwrap_err()
            .to_string();
        assert!(e.contains("not in vsw's datapath yet"), "{text}: {e}");
        let text = "udp,actions=ct(commit,nat(src=10.0.0.1),alg=tftp)";
        assert!(
            crate::syntax::parse_flow(text, &no_ports).is_err(),
            "{text}"
        );
        assert!(
            crate::syntax::parse_flow("arp,actions=ct(commit)", &no_ports).is_err(),
            "ct needs IP"
        );
        for (text, needle) in [
            ("ip,actions=ct(zone=NXM_NX_REG0[0..7])", "16 bits"),
            ("ip,actions=ct(nat(src=10.0.0.1))", "need commit"),
            ("ipv6,actions=ct(commit,nat(src=10.0.0.1))", "family"),
            ("ip,actions=ct(commit,nat(dst=[fd00::1]:80))", "family"),
        ] {
            let e = crate::syntax::parse_flow(text, &no_ports)
                .unwrap_err()
                .to_string();
            assert!(e.contains(needle), "{text}: {e}");
        }
        assert!(crate::syntax::parse_flow("ip,actions=ct(nat)", &no_ports).is_ok());
        let build = |name: &str, arg| {
            let def = crate::action::action(name).unwrap();
            def.build(name, arg, &no_ports).unwrap().to_string()
        };
        assert_eq!(build("ct", Some("commit,table=1")), "ct(commit,table=1)");
        assert_eq!(build("ct_clear", None), "ct_clear");
        for (text, needle) in [
            ("force", "requires \"commit\""),
            ("table=255", "invalid table"),
            ("nat(src=10.0.0.2-10.0.0.1)", "invalid nat range"),
            ("nat(src,dst)", "only specify one"),
            ("nat(random)", "Flags allowed only"),
            ("nat(src=1.2.3.4,hash,random)", "Both \"hash\""),
            (
                "commit,exec(set_field:1->reg0)",
                "only ct_mark and ct_label",
            ),
            ("exec(set_field:1->ct_mark)", "needs commit"),
            ("frobnicate", "invalid argument"),
            ("zone=NXM_NX_FOO[]", ""),
        ] {
            let e = parse_ct(text).unwrap_err().to_string();
            assert!(e.contains(needle), "{text}: {e}");
        }
    }
}
