//! Which connections a flush takes (Open vSwitch's NXT_CT_FLUSH and
//! `dpctl/flush-conntrack [zone=N] 'ORIG-TUPLE' ['REPLY-TUPLE']`): every field a
//! filter leaves empty matches anything; ICMP's id, type and code are compared
//! in a direction the filter names an address of.

use crate::tuple::{Tuple, IPPROTO_ICMP, IPPROTO_ICMPV6};

/// One direction's part of a filter.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TupleFilter {
    pub src: Option<u128>,
    pub dst: Option<u128>,
    /// 0: any.
    pub src_port: u16,
    pub dst_port: u16,
    pub icmp_id: u16,
    pub icmp_type: u8,
    pub icmp_code: u8,
}

impl TupleFilter {
    fn is_empty(&self, icmp: bool) -> bool {
        self.src.is_none()
            && self.dst.is_none()
            && (icmp || (self.src_port == 0 && self.dst_port == 0))
    }

    fn is_whole(&self, icmp: bool) -> bool {
        self.src.is_some()
            && self.dst.is_some()
            && (icmp || (self.src_port != 0 && self.dst_port != 0))
    }

    fn matches(&self, t: &Tuple, icmp: bool) -> bool {
        if self.src.is_some_and(|a| a != t.src) || self.dst.is_some_and(|a| a != t.dst) {
            return false;
        }
        if icmp {
            // A direction left out matches any; Open vSwitch compares its id,
            // type and code (all 0) all the same, and so flushes nothing but a
            // whole original tuple of ICMP.
            if self.is_empty(true) {
                return true;
            }
            // A query's identifier is both of its tuple's ports.
            self.icmp_id == t.src_port
                && self.icmp_type == t.icmp_type
                && self.icmp_code == t.icmp_code
        } else {
            (self.src_port == 0 || self.src_port == t.src_port)
                && (self.dst_port == 0 || self.dst_port == t.dst_port)
        }
    }
}

/// What a flush takes: connections of this protocol (0: any) and family
/// (`None`: any; `Some(true)`: IPv6) whose directions, mark and labels (under
/// their masks) match.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlushFilter {
    pub proto: u8,
    pub v6: Option<bool>,
    pub orig: TupleFilter,
    pub reply: TupleFilter,
    pub mark: u32,
    pub mark_mask: u32,
    pub labels: u128,
    pub labels_mask: u128,
}

impl FlushFilter {
    fn icmp(&self) -> bool {
        matches!(self.proto, IPPROTO_ICMP | IPPROTO_ICMPV6)
    }

    /// Whether it names nothing: a flush of whole zones.
    pub fn is_empty(&self) -> bool {
        self.proto == 0
            && self.v6.is_none()
            && self.orig.is_empty(self.icmp())
            && self.reply.is_empty(self.icmp())
            && self.mark_mask == 0
            && self.labels_mask == 0
    }

    /// Whether it names one original tuple and nothing else (Open vSwitch then
    /// flushes that tuple in zone 0 when no zone is given).
    pub fn is_one_tuple(&self) -> bool {
        self.orig.is_whole(self.icmp())
            && self.reply.is_empty(self.icmp())
            && self.mark_mask == 0
            && self.labels_mask == 0
    }

    /// Whether the connection of these directions, mark and labels matches. A
    /// filter of one whole tuple names its connection by either direction (Open
    /// vSwitch looks that tuple up as a key).
    pub fn matches(&self, orig: &Tuple, reply: &Tuple, mark: u32, labels: u128) -> bool {
        let icmp = self.icmp();
        let directions = self.orig.matches(orig, icmp) && self.reply.matches(reply, icmp)
            || self.is_one_tuple() && self.orig.matches(reply, icmp);
        self.v6.is_none_or(|v6| v6 == orig.v6)
            && (self.proto == 0 || self.proto == orig.proto)
            && directions
            && (mark ^ self.mark) & self.mark_mask == 0
            && (labels ^ self.labels) & self.labels_mask == 0
    }
}

/// Why a flush's words were refused (the message names the word).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BadFlush(String);

impl FlushFilter {
    /// Reads `dpctl/flush-conntrack`'s words after the datapath, as Open vSwitch
    /// does: `[zone=N] [mark=V[/M]] [labels=V[/M]] ['ORIG-TUPLE' ['REPLY-TUPLE']]`,
    /// a tuple being `ct_nw_src=A,ct_nw_dst=A` (or `ct_ipv6_*`), `ct_nw_proto=P`,
    /// `ct_tp_src=N,ct_tp_dst=N` or `icmp_id=N,icmp_type=N,icmp_code=N`.
    pub fn parse(words: &[&str]) -> Result<(Option<u16>, FlushFilter), BadFlush> {
        let bad = |s: &str| BadFlush(s.to_string());
        let mut words = words.iter().peekable();
        let mut zone = None;
        let mut f = FlushFilter::default();
        if let Some(z) = words.peek().and_then(|w| w.strip_prefix("zone=")) {
            zone = Some(z.parse::<u16>().map_err(|_| bad("failed to parse zone"))?);
            words.next();
        }
        if let Some(m) = words.peek().and_then(|w| w.strip_prefix("mark=")) {
            let (v, mask) = masked(m).ok_or_else(|| bad("failed to parse mark"))?;
            (f.mark, f.mark_mask) = (
                u32::try_from(v).map_err(|_| bad("failed to parse mark"))?,
                u32::try_from(mask & u128::from(u32::MAX)).unwrap_or(u32::MAX),
            );
            words.next();
        }
        if let Some(l) = words.peek().and_then(|w| w.strip_prefix("labels=")) {
            (f.labels, f.labels_mask) = masked(l).ok_or_else(|| bad("failed to parse labels"))?;
            words.next();
        }
        for reply in [false, true] {
            let Some(w) = words.next() else { break };
            let t = tuple(w, &mut f)?;
            if reply {
                f.reply = t;
            } else {
                f.orig = t;
            }
        }
        if let Some(w) = words.next() {
            return Err(bad(&format!("invalid arguments: {w}")));
        }
        Ok((zone, f))
    }
}

/// `V` or `V/M` in decimal or 0x hex; no mask: all ones.
fn masked(s: &str) -> Option<(u128, u128)> {
    let num = |s: &str| match s.strip_prefix("0x") {
        Some(h) => u128::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    };
    match s.split_once('/') {
        Some((v, m)) => Some((num(v)?, num(m)?)),
        None => Some((num(s)?, u128::MAX)),
    }
}

fn tuple(s: &str, f: &mut FlushFilter) -> Result<TupleFilter, BadFlush> {
    let mut t = TupleFilter::default();
    for kv in s.split(',').filter(|kv| !kv.is_empty()) {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| BadFlush(format!("field {kv} missing value")))?;
        let failed = || BadFlush(format!("failed to parse field {k}"));
        let mut family = |v6: bool| match f.v6 {
            Some(was) if was != v6 => Err(BadFlush(format!("the L3 protocol does not match {v}"))),
            _ => {
                f.v6 = Some(v6);
                Ok(())
            }
        };
        match k {
            "ct_nw_src" | "ct_nw_dst" => {
                family(false)?;
                let a: std::net::Ipv4Addr = v.parse().map_err(|_| failed())?;
                let a = Some(u128::from(u32::from(a)));
                if k == "ct_nw_src" {
                    t.src = a
                } else {
                    t.dst = a
                }
            }
            "ct_ipv6_src" | "ct_ipv6_dst" => {
                family(true)?;
                let a: std::net::Ipv6Addr = v.parse().map_err(|_| failed())?;
                let a = Some(u128::from(a));
                if k == "ct_ipv6_src" {
                    t.src = a
                } else {
                    t.dst = a
                }
            }
            "ct_nw_proto" => f.proto = v.parse().map_err(|_| failed())?,
            "ct_tp_src" => t.src_port = v.parse().map_err(|_| failed())?,
            "ct_tp_dst" => t.dst_port = v.parse().map_err(|_| failed())?,
            "icmp_id" | "icmp_type" | "icmp_code" => {
                if !f.icmp() {
                    return Err(BadFlush("invalid L4 fields".into()));
                }
                match k {
                    "icmp_id" => t.icmp_id = v.parse().map_err(|_| failed())?,
                    "icmp_type" => t.icmp_type = v.parse().map_err(|_| failed())?,
                    _ => t.icmp_code = v.parse().map_err(|_| failed())?,
                }
            }
            _ => return Err(BadFlush(format!("invalid conntrack tuple field: {k}"))),
        }
    }
    if f.proto == 0 && (t.src_port != 0 || t.dst_port != 0) {
        return Err(BadFlush("port is set without protocol".into()));
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_open_vswitchs_words() {
        let (zone, f) = FlushFilter::parse(&[
            "zone=5",
            "mark=0x1/0xf",
            "ct_nw_src=198.18.0.1,ct_nw_dst=198.18.0.2,ct_nw_proto=17,ct_tp_src=5000,ct_tp_dst=53",
            "ct_nw_src=198.18.0.2",
        ])
        .unwrap();
        assert_eq!(zone, Some(5));
        assert_eq!(
            (f.proto, f.v6, f.mark, f.mark_mask),
            (17, Some(false), 1, 0xf)
        );
        assert_eq!(f.orig.src, Some(0xc612_0001));
        assert_eq!((f.orig.src_port, f.orig.dst_port), (5000, 53));
        assert_eq!(f.reply.src, Some(0xc612_0002));
        assert!(!f.is_empty());
        assert!(FlushFilter::parse(&[]).unwrap().1.is_empty());
        for (words, why) in [
            (&["zone=x"][..], "failed to parse zone"),
            (&["ct_tp_src=1"][..], "port is set without protocol"),
            (
                &["ct_nw_src=198.18.0.1", "ct_ipv6_src=::1"][..],
                "the L3 protocol does not match ::1",
            ),
            (&["icmp_id=3"][..], "invalid L4 fields"),
            (
                &["ct_nw_src=nowhere"][..],
                "failed to parse field ct_nw_src",
            ),
            (&["foo=1"][..], "invalid conntrack tuple field: foo"),
            (
                &["ct_nw_proto=6", "ct_nw_proto=6", "extra"][..],
                "invalid arguments: extra",
            ),
        ] {
            assert_eq!(
                FlushFilter::parse(words).unwrap_err().to_string(),
                why,
                "{words:?}"
            );
        }
    }
}
