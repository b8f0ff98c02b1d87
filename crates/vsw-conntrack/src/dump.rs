//! A connection as `ovs-appctl dpctl/dump-conntrack` prints it (Open vSwitch's
//! `ct_dpif_format_entry`, not verbose, without statistics), so that tests written
//! against Open vSwitch's output read vsw's the same.

use std::net::{Ipv4Addr, Ipv6Addr};

use crate::state::TcpState;
use crate::tracker::ConnView;
use crate::tuple::{Tuple, IPPROTO_ICMP, IPPROTO_ICMPV6, IPPROTO_SCTP, IPPROTO_TCP, IPPROTO_UDP};

/// A protocol as `dpctl/dump-conntrack` names it (its number when it has no name).
pub fn proto_name(p: u8) -> String {
    match p {
        IPPROTO_ICMP => "icmp".into(),
        IPPROTO_ICMPV6 => "icmpv6".into(),
        IPPROTO_TCP => "tcp".into(),
        IPPROTO_UDP => "udp".into(),
        IPPROTO_SCTP => "sctp".into(),
        136 => "udplite".into(),
        33 => "dccp".into(),
        2 => "igmp".into(),
        n => n.to_string(),
    }
}

fn tuple(t: &Tuple) -> String {
    let addr = |a: u128| {
        if t.v6 {
            Ipv6Addr::from(a).to_string()
        } else {
            Ipv4Addr::from(a as u32).to_string()
        }
    };
    let mut s = format!("src={},dst={}", addr(t.src), addr(t.dst));
    if t.is_icmp() {
        s += &format!(
            ",id={},type={},code={}",
            t.src_port, t.icmp_type, t.icmp_code
        );
    } else {
        s += &format!(",sport={},dport={}", t.src_port, t.dst_port);
    }
    s
}

/// What `dpctl/dump-conntrack` adds to each line: `-m` (`verbose`: the entry's
/// id and status, each TCP end's state, window scale and flags) and `-s`
/// (`stats`: the seconds left before it expires).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DumpStyle {
    pub verbose: bool,
    pub stats: bool,
}

/// One line of `dpctl/dump-conntrack` (without options: `DumpStyle::default()`).
/// Open vSwitch's userspace tracker keeps no per-connection counters nor start
/// times, and gives every entry id 0 and status 0: so does vsw.
pub fn format_entry(c: &ConnView, style: DumpStyle) -> String {
    let mut s = format!(
        "{},orig=({}),reply=({})",
        proto_name(c.orig.proto),
        tuple(&c.orig),
        tuple(&c.reply)
    );
    if style.verbose {
        s += ",id=0";
    }
    if c.zone != 0 {
        s += &format!(",zone={}", c.zone);
    }
    if style.verbose {
        s += ",status=0";
    }
    if style.stats {
        s += &format!(",timeout={}", c.expires_in_ms / 1000);
    }
    if c.mark != 0 {
        s += &format!(",mark={}", c.mark);
    }
    if c.label != 0 {
        s += &format!(",labels={:#x}", c.label);
    }
    if let Some([o, r]) = c.tcp {
        if style.verbose {
            s += &format!(
                ",protoinfo=(state_orig={},state_reply={}",
                o.state.name(),
                r.state.name()
            );
            if o.wscale != 0 || r.wscale != 0 {
                s += &format!(",wscale_orig={},wscale_reply={}", o.wscale, r.wscale);
            }
            s += &format!(
                ",flags_orig={},flags_reply={})",
                tcp_flags(&o),
                tcp_flags(&r)
            );
        } else {
            s += &format!(
                ",protoinfo=(state={})",
                TcpState::coalesced((o.state, r.state)).name()
            );
        }
    }
    if let Some(h) = c.helper {
        s += &format!(",helper={}", h.name());
    }
    s
}

/// A TCP end's flags as Open vSwitch names them, `|` between; `0` for none.
fn tcp_flags(p: &crate::tcp::PeerView) -> String {
    let names: Vec<&str> = [(p.window_scale, "WINDOW_SCALE"), (p.liberal, "BE_LIBERAL")]
        .into_iter()
        .filter_map(|(on, name)| on.then_some(name))
        .collect();
    if names.is_empty() {
        "0".into()
    } else {
        names.join("|")
    }
}

/// `dpctl/ct-stats-show [-m]`: connections in all, and by protocol (TCP's by
/// state when `verbose`), as Open vSwitch prints them. (Its ICMPv6 connections
/// count in the total only: Open vSwitch counts them and prints no line of them.)
pub fn format_stats(conns: &[ConnView], verbose: bool) -> String {
    use crate::tuple::{IPPROTO_ICMPV6, IPPROTO_SCTP, IPPROTO_UDP};
    const IPPROTO_IGMP: u8 = 2;
    const IPPROTO_DCCP: u8 = 33;
    const IPPROTO_UDPLITE: u8 = 136;
    let count = |p: u8| conns.iter().filter(|c| c.orig.proto == p).count();
    let mut out = format!("Connections Stats:\n    Total: {}\n", conns.len());
    let tcp = count(IPPROTO_TCP);
    if tcp != 0 {
        out += &format!("  TCP: {tcp}\n");
        if verbose {
            out += "    Conn per TCP states:\n";
            let mut by_state = std::collections::BTreeMap::new();
            for [o, r] in conns.iter().filter_map(|c| c.tcp) {
                *by_state
                    .entry(TcpState::coalesced((o.state, r.state)))
                    .or_insert(0) += 1;
            }
            for (state, n) in by_state {
                out += &format!("\t  [{}]={n}\n", state.name());
            }
        }
    }
    let known = [
        IPPROTO_TCP,
        IPPROTO_UDP,
        IPPROTO_UDPLITE,
        IPPROTO_SCTP,
        IPPROTO_ICMP,
        IPPROTO_DCCP,
        IPPROTO_IGMP,
        IPPROTO_ICMPV6,
    ];
    for (proto, name) in [
        (IPPROTO_UDP, "UDP"),
        (IPPROTO_UDPLITE, "UDPLITE"),
        (IPPROTO_SCTP, "SCTP"),
        (IPPROTO_ICMP, "ICMP"),
        (IPPROTO_DCCP, "DCCP"),
        (IPPROTO_IGMP, "IGMP"),
    ] {
        let n = count(proto);
        if n != 0 {
            out += &format!("  {name}: {n}\n");
        }
    }
    let other = conns
        .iter()
        .filter(|c| !known.contains(&c.orig.proto))
        .count();
    if other != 0 {
        out += &format!("  Other: {other}\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tcp::PeerView;

    fn end(state: TcpState) -> PeerView {
        PeerView {
            state,
            ..PeerView::default()
        }
    }

    #[test]
    fn entries_print_as_open_vswitch_prints_them() {
        let orig = Tuple {
            src: 0x0a01_0101,
            dst: 0x0a01_0102,
            src_port: 7,
            dst_port: 7,
            proto: IPPROTO_ICMP,
            icmp_type: 8,
            ..Tuple::default()
        };
        let c = ConnView {
            zone: 7,
            orig,
            reply: orig.reverse().unwrap(),
            mark: 42,
            label: 0,
            expires_in_ms: 1000,
            tcp: None,
            helper: None,
        };
        assert_eq!(
            format_entry(&c, DumpStyle::default()),
            "icmp,orig=(src=10.1.1.1,dst=10.1.1.2,id=7,type=8,code=0),\
             reply=(src=10.1.1.2,dst=10.1.1.1,id=7,type=0,code=0),zone=7,mark=42"
        );
        // `-m -s`, as Open vSwitch 3.1 printed a ping's 0.4 s after it.
        let c = ConnView {
            expires_in_ms: 29_600,
            ..c
        };
        assert_eq!(
            format_entry(
                &c,
                DumpStyle {
                    verbose: true,
                    stats: true
                }
            ),
            "icmp,orig=(src=10.1.1.1,dst=10.1.1.2,id=7,type=8,code=0),\
             reply=(src=10.1.1.2,dst=10.1.1.1,id=7,type=0,code=0),id=0,zone=7,status=0,\
             timeout=29,mark=42"
        );
        let t = Tuple {
            src_port: 40000,
            dst_port: 80,
            proto: IPPROTO_TCP,
            icmp_type: 0,
            ..orig
        };
        let c = ConnView {
            zone: 0,
            orig: t,
            reply: t.reverse().unwrap(),
            mark: 0,
            label: 1 << 64,
            tcp: Some([end(TcpState::FinWait2), end(TcpState::Closing)]),
            ..c
        };
        assert_eq!(
            format_entry(&c, DumpStyle::default()),
            "tcp,orig=(src=10.1.1.1,dst=10.1.1.2,sport=40000,dport=80),\
             reply=(src=10.1.1.2,dst=10.1.1.1,sport=80,dport=40000),\
             labels=0x10000000000000000,protoinfo=(state=TIME_WAIT)"
        );
        let established = ConnView {
            tcp: Some([end(TcpState::Established), end(TcpState::SynRecv)]),
            ..c.clone()
        };
        // `-m`: each end, as Open vSwitch 3.1 printed a connection whose ends
        // announced a window scale of 10, and one whose ends announced none.
        let scaled = PeerView {
            state: TcpState::Established,
            wscale: 10,
            window_scale: true,
            liberal: false,
        };
        let verbose = DumpStyle {
            verbose: true,
            stats: false,
        };
        let line = |ends| {
            format_entry(
                &ConnView {
                    tcp: Some(ends),
                    label: 0,
                    zone: 7,
                    ..c.clone()
                },
                verbose,
            )
        };
        assert!(line([scaled, scaled]).ends_with(
            ",id=0,zone=7,status=0,protoinfo=(state_orig=ESTABLISHED,state_reply=ESTABLISHED,\
             wscale_orig=10,wscale_reply=10,flags_orig=WINDOW_SCALE,flags_reply=WINDOW_SCALE)"
        ));
        let plain = end(TcpState::Established);
        assert!(line([plain, plain]).ends_with(
            ",protoinfo=(state_orig=ESTABLISHED,state_reply=ESTABLISHED,flags_orig=0,flags_reply=0)"
        ));
        let icmp6 = ConnView {
            orig: Tuple {
                proto: crate::tuple::IPPROTO_ICMPV6,
                v6: true,
                ..orig
            },
            tcp: None,
            ..c.clone()
        };
        let all = [c.clone(), established.clone(), established, icmp6];
        assert_eq!(
            format_stats(&all, false),
            "Connections Stats:\n    Total: 4\n  TCP: 3\n"
        );
        assert_eq!(
            format_stats(&all, true),
            "Connections Stats:\n    Total: 4\n  TCP: 3\n    Conn per TCP states:\n\
             \t  [ESTABLISHED]=2\n\t  [TIME_WAIT]=1\n"
        );
    }
}
