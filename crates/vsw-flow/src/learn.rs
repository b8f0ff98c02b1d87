//! `learn(…)` (Open vSwitch's NXAST_LEARN): an action that makes a rule out of the
//! packet passing — its match from fields of the packet or constants, its actions
//! loads and an output — and puts it in a table, as `ovs-ofctl --strict mod-flows`
//! would. What it says is here (read, printed, checked, the rule it makes for a
//! key); carrying it out is translation's (vsw-ofproto), which owns the tables.

use std::fmt;

use crate::error::{FlowSyntaxError, PortResolver};
use crate::fields::Needs;
use crate::match_key::MatchKey;
use crate::matching::Match;
use crate::subfield::{ones, Field, Subfield};
use crate::table::{DEFAULT_PRIORITY, MAX_TABLE};
use crate::values::{bad, c_hex, parse_ipv4, parse_ipv6, parse_mac, parse_port, parse_uint};

/// Where a spec's bits come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LearnSource {
    /// The packet's (as translation sees it when the learn runs).
    Field(Subfield),
    /// A constant, as wide as the destination.
    Value(u128),
}

/// One part of the rule a learn makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LearnSpec {
    /// The new rule matches `dst` equal to the source's bits.
    Match { dst: Subfield, src: LearnSource },
    /// The new rule loads the source's bits into `dst` (`load:…->DST`).
    Load { dst: Subfield, src: LearnSource },
    /// The new rule outputs to the port the source's bits name (`output:SRC`).
    Output { src: Subfield },
}

impl LearnSpec {
    /// How many bits it carries.
    pub fn n_bits(&self) -> u8 {
        match self {
            LearnSpec::Match { dst, .. } | LearnSpec::Load { dst, .. } => dst.n_bits,
            LearnSpec::Output { src } => src.n_bits,
        }
    }

    /// The packet's bits it reads, if any.
    pub fn source(&self) -> Option<Subfield> {
        match *self {
            LearnSpec::Match {
                src: LearnSource::Field(s),
                ..
            }
            | LearnSpec::Load {
                src: LearnSource::Field(s),
                ..
            }
            | LearnSpec::Output { src: s } => Some(s),
            _ => None,
        }
    }
}

/// The arguments of one `learn(…)`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Learn {
    pub table: u8,
    pub priority: u16,
    pub idle_timeout: u16,
    pub hard_timeout: u16,
    /// Non-zero: the learned rule's actions start with `fin_timeout(…)` of these.
    pub fin_idle_timeout: u16,
    pub fin_hard_timeout: u16,
    pub cookie: u64,
    pub send_flow_rem: bool,
    /// When the last rule whose learn says so for (table, cookie) goes, the rules of
    /// that table with that cookie go too.
    pub delete_learned: bool,
    /// At most this many rules of `table` with `cookie` (0: no limit).
    pub limit: u32,
    /// Set to 1 when the rule is in place (learned or there already), 0 when the
    /// limit kept it out.
    pub result_dst: Option<Subfield>,
    pub specs: Vec<LearnSpec>,
    /// Written as NXAST_LEARN2 (OpenFlow gives it back as it came).
    pub learn2: bool,
}

impl Default for Learn {
    fn default() -> Self {
        Learn {
            table: 1,
            priority: DEFAULT_PRIORITY,
            idle_timeout: 0,
            hard_timeout: 0,
            fin_idle_timeout: 0,
            fin_hard_timeout: 0,
            cookie: 0,
            send_flow_rem: false,
            delete_learned: false,
            limit: 0,
            result_dst: None,
            specs: Vec::new(),
            learn2: false,
        }
    }
}

/// Open vSwitch's special ports an `output:` spec may name (OpenFlow 1.0 numbers).
pub(crate) const OFPP_IN_PORT: u128 = 0xfff8;
pub(crate) const OFPP_FLOOD: u128 = 0xfffb;
pub(crate) const OFPP_LOCAL: u128 = 0xfffe;
pub(crate) const OFPP_MAX: u128 = 0xff00;

impl Learn {
    /// Reads `learn`'s argument (what is between its parentheses).
    pub fn parse(text: &str, ports: &dyn PortResolver) -> Result<Learn, FlowSyntaxError> {
        let mut l = Learn::default();
        let words = text
            .split([',', ' ', '\t'])
            .map(str::trim)
            .filter(|w| !w.is_empty());
        for w in words {
            let (key, value) = match w.split_once('=') {
                Some((k, v)) => (k.trim(), Some(v.trim())),
                None => (w, None),
            };
            let number = |max: u128| -> Result<u128, FlowSyntaxError> {
                parse_uint("learn", value.unwrap_or(""), max)
            };
            match (key, value) {
                ("table", Some(_)) => {
                    l.table = number(u128::from(MAX_TABLE))? as u8;
                }
                ("priority", Some(_)) => l.priority = number(0xffff)? as u16,
                ("idle_timeout", Some(_)) => l.idle_timeout = number(0xffff)? as u16,
                ("hard_timeout", Some(_)) => l.hard_timeout = number(0xffff)? as u16,
                ("fin_idle_timeout", Some(_)) => l.fin_idle_timeout = number(0xffff)? as u16,
                ("fin_hard_timeout", Some(_)) => l.fin_hard_timeout = number(0xffff)? as u16,
                ("cookie", Some(_)) => l.cookie = number(u128::from(u64::MAX))? as u64,
                ("limit", Some(_)) => {
                    l.limit = number(u128::from(u32::MAX))? as u32;
                    l.learn2 |= l.limit != 0;
                }
                ("result_dst", Some(v)) => {
                    let s = Subfield::parse("learn", v)?;
                    if s.n_bits != 1 || !s.field.is_writable() {
                        return Err(bad("learn", v, "result_dst is one writable bit"));
                    }
                    l.result_dst = Some(s);
                    l.learn2 = true;
                }
                ("send_flow_rem", None) => l.send_flow_rem = true,
                ("delete_learned", None) => l.delete_learned = true,
                _ => l.specs.push(parse_spec(w, ports)?),
            }
        }
        Ok(l)
    }

    /// Every bit of the packet it reads (the datapath flow of a packet that learns
    /// depends on them).
    pub fn sources(&self) -> impl Iterator<Item = Subfield> + '_ {
        self.specs.iter().filter_map(LearnSpec::source)
    }

    /// Refused unless the rule it makes is one a flow-mod could add: each packet
    /// field it reads promised by the match of the rule it is in (`matcher`, when
    /// known), each field the new rule matches or loads promised by the constants
    /// it matches before, each load's field writable.
    pub fn check(&self, matcher: Option<&Match>) -> Result<(), FlowSyntaxError> {
        let refuse = |needs: Needs| FlowSyntaxError::ActionPrerequisite {
            action: "learn",
            needs: needs.describe(),
        };
        if let Some(m) = matcher {
            for s in self.sources() {
                let needs = s.field.info().needs;
                if !needs.met(m.value(), m.mask()) {
                    return Err(refuse(needs));
                }
            }
        }
        // What the new rule's constants promise so far.
        let (mut value, mut mask) = (MatchKey::default(), MatchKey::default());
        for spec in &self.specs {
            match *spec {
                LearnSpec::Match { dst, src } => {
                    let needs = dst.field.info().needs;
                    if !needs.met(&value, &mask) {
                        return Err(refuse(needs));
                    }
                    if let LearnSource::Value(v) = src {
                        put(&mut value, &mut mask, dst, v);
                    }
                }
                LearnSpec::Load { dst, .. } => {
                    if !dst.field.is_writable() {
                        return Err(bad("learn", &dst.format(), "vsw cannot write this field"));
                    }
                    let needs = dst.field.info().needs;
                    if !needs.met(&value, &mask) {
                        return Err(refuse(needs));
                    }
                }
                LearnSpec::Output { .. } => {}
            }
        }
        Ok(())
    }
}

/// `dst`'s bits of the match become `v`'s low bits, looked at.
pub(crate) fn put(value: &mut MatchKey, mask: &mut MatchKey, dst: Subfield, v: u128) {
    let bits = dst.mask();
    let f = dst.field;
    let shifted = (v & ones(u32::from(dst.n_bits))) << dst.ofs;
    f.write(value, (f.read(value) & !bits) | shifted);
    f.write(mask, f.read(mask) | bits);
}

/// One spec: `F`, `F=G`, `F=VALUE`, `load:SRC->DST`, `load:VALUE->DST`, `output:SRC`.
fn parse_spec(w: &str, ports: &dyn PortResolver) -> Result<LearnSpec, FlowSyntaxError> {
    if let Some(rest) = w.strip_prefix("load:") {
        let (s, d) = rest
            .split_once("->")
            .ok_or_else(|| bad("learn", w, "written load:SRC->DST[BITS]"))?;
        let dst = Subfield::parse("learn", d.trim())?;
        let src = match Subfield::parse("learn", s.trim()) {
            Ok(src) => {
                same_width(w, src, dst)?;
                LearnSource::Field(src)
            }
            Err(_) => {
                LearnSource::Value(parse_uint("learn", s.trim(), ones(u32::from(dst.n_bits)))?)
            }
        };
        return Ok(LearnSpec::Load { dst, src });
    }
    if let Some(rest) = w.strip_prefix("output:") {
        return Ok(LearnSpec::Output {
            src: Subfield::parse("learn", rest.trim())?,
        });
    }
    let (d, s) = match w.split_once('=') {
        Some((d, s)) => (d.trim(), Some(s.trim())),
        None => (w, None),
    };
    let dst = Subfield::parse("learn", d)?;
    let src = match s {
        None => LearnSource::Field(dst),
        Some(s) => match Subfield::parse("learn", s) {
            Ok(src) => {
                same_width(w, src, dst)?;
                LearnSource::Field(src)
            }
            Err(_) if is_whole(dst) => LearnSource::Value(field_value(dst.field, s, ports)?),
            Err(_) => LearnSource::Value(parse_uint("learn", s, ones(u32::from(dst.n_bits)))?),
        },
    };
    Ok(LearnSpec::Match { dst, src })
}

fn same_width(w: &str, src: Subfield, dst: Subfield) -> Result<(), FlowSyntaxError> {
    if src.n_bits != dst.n_bits {
        return Err(bad(
            "learn",
            w,
            format!(
                "the source has {} bits and the destination {}",
                src.n_bits, dst.n_bits
            ),
        ));
    }
    Ok(())
}

fn is_whole(s: Subfield) -> bool {
    s.ofs == 0 && s.n_bits == s.field.info().bits
}

/// A whole field's constant, written as the field is in a match (addresses as
/// addresses, ports by name or number).
fn field_value(f: Field, s: &str, ports: &dyn PortResolver) -> Result<u128, FlowSyntaxError> {
    let name = f.info().name;
    let exact = |(v, m): (u128, u128), full: u128| {
        if m == full {
            Ok(v)
        } else {
            Err(bad("learn", s, "a constant of a learned match has no mask"))
        }
    };
    match f {
        Field::EthSrc
        | Field::EthDst
        | Field::ArpSha
        | Field::ArpTha
        | Field::NdSll
        | Field::NdTll => {
            let (v, m) = parse_mac(name, s)?;
            exact(
                (crate::subfield::mac_num(v), crate::subfield::mac_num(m)),
                ones(48),
            )
        }
        Field::IpSrc | Field::IpDst | Field::ArpSpa | Field::ArpTpa => {
            exact(parse_ipv4(name, s)?, ones(32))
        }
        Field::Ipv6Src | Field::Ipv6Dst | Field::NdTarget => exact(parse_ipv6(name, s)?, u128::MAX),
        Field::InPort => Ok(u128::from(parse_port(name, s, ports)?) & ones(16)),
        _ => parse_uint(name, s, ones(u32::from(f.info().bits))),
    }
}

impl fmt::Display for LearnSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            LearnSpec::Match {
                dst,
                src: LearnSource::Value(v),
            } if is_whole(dst) => {
                let i = dst.field.info();
                write!(
                    f,
                    "{}={}",
                    i.name,
                    dst.field.format_value(v, ones(u32::from(i.bits)))
                )
            }
            LearnSpec::Match {
                dst,
                src: LearnSource::Value(v),
            } => write!(f, "{}={}", dst.format(), c_hex(v)),
            LearnSpec::Match {
                dst,
                src: LearnSource::Field(s),
            } if s == dst => f.write_str(&dst.format()),
            LearnSpec::Match {
                dst,
                src: LearnSource::Field(s),
            } => write!(f, "{}={}", dst.format(), s.format()),
            LearnSpec::Load {
                dst,
                src: LearnSource::Value(v),
            } => write!(f, "load:{}->{}", c_hex(v), dst.format()),
            LearnSpec::Load {
                dst,
                src: LearnSource::Field(s),
            } => write!(f, "load:{}->{}", s.format(), dst.format()),
            LearnSpec::Output { src } => write!(f, "output:{}", src.format()),
        }
    }
}

/// As `ovs-ofctl` prints it: `learn(table=T,…,SPECS)`, defaults left out.
impl fmt::Display for Learn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "learn(table={}", self.table)?;
        for (name, v) in [
            ("idle_timeout", self.idle_timeout),
            ("hard_timeout", self.hard_timeout),
            ("fin_idle_timeout", self.fin_idle_timeout),
            ("fin_hard_timeout", self.fin_hard_timeout),
        ] {
            if v != 0 {
                write!(f, ",{name}={v}")?;
            }
        }
        if self.priority != DEFAULT_PRIORITY {
            write!(f, ",priority={}", self.priority)?;
        }
        if self.send_flow_rem {
            f.write_str(",send_flow_rem")?;
        }
        if self.delete_learned {
            f.write_str(",delete_learned")?;
        }
        if self.cookie != 0 {
            write!(f, ",cookie={:#x}", self.cookie)?;
        }
        if self.limit != 0 {
            write!(f, ",limit={}", self.limit)?;
        }
        if let Some(r) = self.result_dst {
            write!(f, ",result_dst={}", r.format())?;
        }
        for s in &self.specs {
            write!(f, ",{s}")?;
        }
        f.write_str(")")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn none(_: &str) -> Option<u32> {
        None
    }

    fn printed(text: &str) -> String {
        Learn::parse(text, &none).unwrap().to_string()
    }

    #[test]
    fn learns_print_as_open_vswitch_prints_them() {
        // Open vSwitch's own tests (tests/learn.at), input and output.
        assert_eq!(printed(""), "learn(table=1)");
        assert_eq!(
            printed("send_flow_rem,delete_learned"),
            "learn(table=1,send_flow_rem,delete_learned)"
        );
        assert_eq!(
            printed(
                "NXM_OF_VLAN_TCI[0..11], NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[], \
                 NXM_NX_REG3[3..19]=0x10011, output:NXM_OF_IN_PORT[], load:10->NXM_NX_REG0[5..10]"
            ),
            "learn(table=1,NXM_OF_VLAN_TCI[0..11],NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],\
             NXM_NX_REG3[3..19]=0x10011,output:NXM_OF_IN_PORT[],load:0xa->NXM_NX_REG0[5..10])"
        );
        assert_eq!(
            printed(
                "table=1,idle_timeout=10, hard_timeout=20, fin_idle_timeout=5, \
                 fin_hard_timeout=10, priority=10, cookie=0xfedcba9876543210, in_port=99,\
                 eth_dst=eth_src,load:in_port->reg1[16..31]"
            ),
            "learn(table=1,idle_timeout=10,hard_timeout=20,fin_idle_timeout=5,\
             fin_hard_timeout=10,priority=10,cookie=0xfedcba9876543210,in_port=99,\
             NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],load:NXM_OF_IN_PORT[]->NXM_NX_REG1[16..31])"
        );
        assert_eq!(
            printed("limit=4096,result_dst=reg0[0]"),
            "learn(table=1,limit=4096,result_dst=NXM_NX_REG0[0])"
        );
        assert_eq!(
            printed("eth_type=0x800,OXM_OF_IPV4_DST[]"),
            "learn(table=1,eth_type=0x800,NXM_OF_IP_DST[])"
        );
        assert_eq!(
            printed("output:NXM_NX_REG7"),
            "learn(table=1,output:NXM_NX_REG7[])"
        );
    }

    #[test]
    fn ovns_load_balancer_hairpin_learn_reads_and_checks() {
        // As ovn-controller writes it (lflow.c, the LB hairpin reply flows).
        let text = "table=69,delete_learned,cookie=0x5c1a,OXM_OF_METADATA[],eth_type=0x800,\
                    NXM_OF_IP_SRC[],ip_dst=198.18.0.10,nw_proto=6,\
                    NXM_OF_TCP_SRC[]=NXM_OF_TCP_DST[],load:0x1->NXM_NX_REG10[7]";
        let l = Learn::parse(text, &none).unwrap();
        let tcp = crate::syntax::parse_match("tcp", &none).unwrap();
        l.check(Some(&tcp.matcher)).unwrap();
        // As `ovs-ofctl parse-flow` prints it.
        assert_eq!(
            format!("learn({text})").replace(['\n', ' '], ""),
            l.to_string()
        );
    }

    #[test]
    fn bad_learns_are_refused_with_the_reason() {
        for bad in [
            "table=255",
            "NXM_OF_ETH_DST[]=NXM_NX_REG0[]",
            "NXM_NX_REG0[0..3]=0x10",
            "result_dst=reg0[0..1]",
            "load:NXM_NX_REG0[]->NXM_NX_REG1[0..7]",
            "NXM_NX_NOPE[]",
        ] {
            assert!(Learn::parse(bad, &none).is_err(), "{bad}");
        }
        // Prerequisites: of the new rule (constants matched before) and of the packet.
        let ip_dst = Learn::parse("NXM_OF_IP_DST[]", &none).unwrap();
        assert!(ip_dst.check(None).is_err());
        let ip = Learn::parse("eth_type=0x800,NXM_OF_IP_DST[]", &none).unwrap();
        assert!(ip.check(None).is_ok());
        assert!(
            ip.check(Some(&Match::any())).is_err(),
            "reads ip_dst of any packet"
        );
        let load = Learn::parse("load:5->NXM_OF_IP_DST[]", &none).unwrap();
        assert!(load.check(None).is_err());
        // A learned rule's fin_timeout comes first among its actions, as in Open
        // vSwitch.
        let fin = Learn::parse(
            "fin_idle_timeout=5,fin_hard_timeout=7,NXM_OF_ETH_DST[],output:NXM_OF_IN_PORT[]",
            &none,
        )
        .unwrap();
        assert!(fin.check(None).is_ok());
        let rule = fin.rule_for(&MatchKey::default());
        assert_eq!(
            rule.actions.first(),
            Some(&crate::Action::FinTimeout { idle: 5, hard: 7 })
        );
        // Not in an action set, as Open vSwitch has it.
        let set = "actions=write_actions(learn(table=1,NXM_OF_ETH_SRC[]))";
        assert!(crate::syntax::parse_flow(set, &none).is_err());
    }
}
