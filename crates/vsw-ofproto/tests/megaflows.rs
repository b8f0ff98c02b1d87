//! The fast path gives what a fresh translation gives. Random multi-table rule sets
//! (goto_table, resubmit — loops included —, overlapping masks and priorities,
//! NORMAL, FLOOD, rewrites) and random packets go through a running datapath; after
//! every packet, what came out of each port must be exactly what translating that
//! packet now, through the current rules and MAC table, says. Rule changes and hosts
//! moving between ports are interleaved with the traffic: what keeps the cached
//! flows right across them is the revalidation, run as vswd runs it (after a rule
//! change, and when a translation changed the MAC table). Rules also hand packets
//! to groups of each type (buckets that rewrite, a group in a bucket, a select
//! group's hash, a fast-failover group's live port). Registers are loaded, moved
//! from and into the packet's fields, pushed and popped, and matched by later
//! tables: what a register holds is translation's alone, so the datapath flow must
//! match the packet bits it came from. Some rules are clauses of conjunctions,
//! answered by rules of `conj_id`. Some learn one rule per source at most, and
//! later tables read whether the packet's source was the one learned: a flow must
//! match the source it learned from.

mod common;

use std::sync::Arc;

use proptest::prelude::*;
use vsw_datapath::memory::memory_port;
use vsw_datapath::{Datapath, DpAction, PmdConfig, PortHandle, PortStats, Upcall};
use vsw_flow::{parse_flow, Pipeline};
use vsw_ofproto::Ofproto;
use vsw_packet::builder::{ethernet, ipv4, tcp, udp, Ipv4};
use vsw_packet::rewrite::PacketBuf;
use vsw_packet::{extract, EtherType, FlowKey, MacAddr, VnetHdr};

const PORTS: u32 = 4;
const TABLES: u8 = 3;
const MAX_IDLE_MS: u64 = 600_000;

/// A packet from the small space the rules are written over.
#[derive(Clone, Debug)]
struct Packet {
    in_port: u32,
    src: u8,
    /// 0: broadcast.
    dst: u8,
    tcp: bool,
    tp_dst: u16,
}

fn mac(n: u8) -> MacAddr {
    if n == 0 {
        MacAddr([0xff; 6])
    } else {
        MacAddr([2, 0, 0, 0, 0, n])
    }
}

impl Packet {
    fn frame(&self) -> Vec<u8> {
        let ip = Ipv4 {
            proto: if self.tcp { 6 } else { 17 },
            ..Ipv4::default()
        };
        let l4 = if self.tcp {
            tcp(1000, self.tp_dst, 0x10, b"data")
        } else {
            udp(1000, self.tp_dst, b"data")
        };
        ethernet(
            mac(self.dst),
            mac(self.src),
            &[],
            EtherType::IPV4,
            &ipv4(&ip, &l4),
        )
    }
}

fn packet() -> impl Strategy<Value = Packet> {
    (
        1..=PORTS,
        1u8..=4,
        0u8..=4,
        any::<bool>(),
        prop_oneof![Just(53u16), Just(80), Just(443)],
    )
        .prop_map(|(in_port, src, dst, tcp, tp_dst)| Packet {
            in_port,
            src,
            dst,
            tcp,
            tp_dst,
        })
}

/// One rule's text.
fn rule() -> impl Strategy<Value = String> {
    let matching = (
        proptest::option::of(1..=PORTS),
        proptest::option::of((
            any::<bool>(),
            proptest::option::of(prop_oneof![Just(53u16), Just(80)]),
        )),
        proptest::option::of(0u8..=4),
        proptest::option::of(prop_oneof![
            Just(0u32),
            Just(1),
            Just(2),
            Just(4),
            Just(0xff)
        ]),
    );
    let action = prop_oneof![
        (1..=PORTS).prop_map(|p| format!("output:{p}")),
        ((1..=PORTS), 14u32..120).prop_map(|(p, n)| format!("output(port={p},max_len={n})")),
        Just("NORMAL".to_string()),
        Just("FLOOD".to_string()),
        Just("IN_PORT".to_string()),
        (1u8..=4).prop_map(|m| format!("mod_dl_dst:{}", mac(m))),
        (0..TABLES).prop_map(|t| format!("resubmit(,{t})")),
        ((1..=PORTS), (0..TABLES)).prop_map(|(p, t)| format!("resubmit({p},{t})")),
        Just("mod_tp_dst:443".to_string()),
        Just("dec_ttl".to_string()),
        Just("mod_nw_ttl:9".to_string()),
        Just("mod_nw_ecn:2".to_string()),
        Just("copy_ttl_out".to_string()),
        // The entry a push starts with comes from the IP header: the flow matches
        // what it was made of.
        Just("push_mpls:0x8847,set_mpls_label(7),dec_mpls_ttl".to_string()),
        // A backbone header over the frame: what follows sees a PBB frame.
        Just("push_pbb:0x88e7,set_field:5->pbb_isid".to_string()),
        // NSH over the frame, pushed with its Ethernet header at encap(ethernet);
        // and both taken off again (a later table sees the inner frame).
        Just(
            "encap(nsh),set_field:0x12->nsh_spi,set_field:7->nsh_c1,encap(ethernet),dec_nsh_ttl"
                .to_string()
        ),
        Just("decap(),decap()".to_string()),
        // Ethernet over MPLS: a label and an Ethernet header in front of the frame.
        Just("encap(mpls),set_field:5->mpls_label,encap(ethernet)".to_string()),
        (1u32..=4).prop_map(|g| format!("group:{g}")),
        // What a clone changes stays in it.
        ((1u8..=4), (1..=PORTS))
            .prop_map(|(m, p)| format!("clone(mod_dl_dst:{},output:{p})", mac(m))),
        ((1..=PORTS), (0..TABLES)).prop_map(|(p, t)| format!("clone(dec_ttl,resubmit({p},{t}))")),
        (1u32..=4).prop_map(|g| format!("clone(mod_nw_ttl:9,clone(group:{g}))")),
        (0u32..=4).prop_map(|n| format!("load:{n}->NXM_NX_REG0[0..7]")),
        (0u32..=4).prop_map(|n| format!("set_field:{n}/0xf->reg0")),
        Just("move:NXM_OF_ETH_DST[0..7]->NXM_NX_REG0[0..7]".to_string()),
        Just("move:NXM_NX_REG0[0..7]->NXM_OF_ETH_DST[0..7]".to_string()),
        Just("move:NXM_OF_ETH_SRC[]->NXM_OF_ETH_DST[]".to_string()),
        Just("push:NXM_OF_ETH_DST[0..7]".to_string()),
        Just("pop:NXM_NX_REG0[0..7]".to_string()),
        // A rule learned per source, in a table nothing looks up, one at most: the
        // result bit tells later tables whether this source's was.
        Just("learn(table=7,limit=1,result_dst=NXM_NX_REG0[1],NXM_OF_ETH_SRC[])".to_string()),
        // A link by the source's hash, into the bits later tables match.
        Just("multipath(eth_src,0,modulo_n,3,0,NXM_NX_REG0[0..1])".to_string()),
        // The datapath decides by the packet's length: both ways translated.
        (45u16..=61).prop_map(|l| format!("check_pkt_larger({l})->NXM_NX_REG0[0]")),
    ];
    (
        0..TABLES,
        1u16..=5,
        matching,
        proptest::collection::vec(action, 0..3),
        proptest::option::of(0..TABLES),
        proptest::option::of((1u32..=2, 1u8..=2)),
    )
        .prop_map(
            |(table, prio, (port, l4, dst, reg0), actions, goto, clause)| {
                let mut m = format!("table={table},priority={prio}");
                if let Some(p) = port {
                    m += &format!(",in_port={p}");
                }
                if let Some(r) = reg0 {
                    m += &format!(",reg0={r}");
                }
                match l4 {
                    Some((tcp, tp)) => {
                        m += if tcp { ",tcp" } else { ",udp" };
                        if let Some(tp) = tp {
                            m += &format!(",tp_dst={tp}");
                        }
                    }
                    // dec_ttl and mod_tp_dst need a protocol in the match.
                    None => m += ",ip",
                }
                if let Some(d) = dst {
                    m += &format!(",dl_dst={}", mac(d));
                }
                let mut a: Vec<String> = actions
                    .into_iter()
                    .filter(|a| l4.is_some() || a != "mod_tp_dst:443")
                    .collect();
                // After a decap the packet is of any type, after a push or an
                // encap MPLS, PBB or NSH: no IP rewrite may follow them.
                a.sort_by_key(|x| {
                    if x.starts_with("decap(") {
                        1
                    } else if x.starts_with("push_") || x.starts_with("encap(") {
                        2
                    } else {
                        0
                    }
                });
                if let Some(g) = goto.filter(|g| *g > table) {
                    a.push(format!("goto_table:{g}"));
                }
                if a.is_empty() {
                    a.push("drop".into());
                }
                // A clause of a conjunction has nothing else.
                if let Some((id, k)) = clause {
                    return format!("{m},actions=conjunction({id},{k}/2)");
                }
                format!("{m},actions={}", a.join(","))
            },
        )
}

/// A rule answering conjunction 1 or 2.
fn answer() -> impl Strategy<Value = String> {
    (0..TABLES, 1u16..=5, 1u32..=2, 1..=PORTS).prop_map(|(table, prio, id, port)| {
        format!("table={table},priority={prio},conj_id={id},actions=output:{port}")
    })
}

/// The groups every rule set has.
const GROUPS: [&str; 4] = [
    "group_id=1,type=all,bucket=mod_dl_dst:02:00:00:00:00:03,output:1,bucket=output:2",
    "group_id=2,type=select,bucket=weight:1,actions=output:3,bucket=weight:2,actions=mod_tp_dst:443,output:4",
    "group_id=3,type=indirect,bucket=mod_dl_dst:02:00:00:00:00:04,group:1,output:3",
    "group_id=4,type=fast_failover,bucket=watch_port:1,actions=output:1,bucket=watch_port:2,actions=dec_ttl,output:2",
];

fn pipeline(rules: &[String]) -> Pipeline {
    let mut p = Pipeline::new();
    for g in GROUPS {
        let spec = vsw_flow::parse_group(g, &|_: &str| None).unwrap();
        p.set_group(spec, false, 1).unwrap();
    }
    for r in rules {
        p.insert(
            parse_flow(r, &|_: &str| None).unwrap_or_else(|e| panic!("{r}: {e}")),
            1,
        );
    }
    p
}

#[derive(Clone, Debug)]
enum Op {
    Send(Packet),
    /// Replace the rules (as add-flows/del-flows do).
    Rules(Vec<String>),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => packet().prop_map(Op::Send),
        1 => proptest::collection::vec(prop_oneof![4 => rule(), 1 => answer()], 0..8)
            .prop_map(Op::Rules),
    ]
}

struct Rig {
    dp: Datapath,
    ofproto: Arc<Ofproto>,
    ports: common::Ports,
}

fn rig(rules: &[String], emc: u32) -> Rig {
    let mut dp = Datapath::start(PmdConfig {
        cores: vec![0],
        pin: false,
    })
    .unwrap();
    dp.set_emc_insert_inv_prob(emc).unwrap();
    let (mut peers, mut stats) = (Vec::new(), Vec::new());
    for no in 1..=PORTS {
        let (q, peer) = memory_port(256);
        let s = Arc::new(PortStats::default());
        dp.add_port(PortHandle::new(no, &format!("p{no}"), q, s.clone()))
            .unwrap();
        peers.push(peer);
        stats.push(s);
    }
    let ofproto = Ofproto::new(pipeline(rules));
    ofproto.set_ports((1..=PORTS).collect());
    // Port 1's link is down: group 4 fails over to its second bucket.
    ofproto.set_live_ports((2..=PORTS).collect());
    dp.set_upcall(ofproto.clone()).unwrap();
    Rig {
        dp,
        ofproto,
        ports: common::Ports {
            peers,
            stats,
            sent: vec![0; PORTS as usize],
        },
    }
}

/// What the datapath actions do to `frame`: (port, frame) for each output.
fn expected(frame: &[u8], actions: &[DpAction]) -> Vec<(u32, Vec<u8>)> {
    let mut buf = PacketBuf::new(4096);
    buf.load(frame, None, VnetHdr::default()).unwrap();
    let mut out = Vec::new();
    let mut saved: Vec<Vec<u8>> = Vec::new();
    // Where a longer packet's way ends, and where to go on from there.
    let mut forks: Vec<(usize, usize)> = Vec::new();
    let mut at = 0;
    loop {
        if forks.last().is_some_and(|f| f.0 == at) {
            at = forks.pop().unwrap().1;
            continue;
        }
        let Some(a) = actions.get(at) else { break };
        at += 1;
        let r = match *a {
            DpAction::CheckPktLen { size, gt, le } => {
                let (gt, le) = (gt as usize, le as usize);
                if buf.data().len() > usize::from(size) {
                    forks.push((at + gt, at + gt + le));
                } else {
                    at += gt;
                }
                Ok(())
            }
            DpAction::Save => {
                saved.push(buf.data().to_vec());
                Ok(())
            }
            DpAction::Restore => {
                let copy = saved.pop().expect("a saved copy");
                buf.load(&copy, None, VnetHdr::default()).unwrap();
                Ok(())
            }
            DpAction::Output(p) => {
                if (1..=PORTS).contains(&p) {
                    out.push((p, buf.data().to_vec()));
                }
                Ok(())
            }
            DpAction::Truncate(n) => {
                let cut = buf.data()[..buf.data().len().min(n as usize)].to_vec();
                buf.load(&cut, None, VnetHdr::default()).unwrap();
                Ok(())
            }
            DpAction::OutputTrunc { port, max_len } => {
                if (1..=PORTS).contains(&port) {
                    let data = buf.data();
                    out.push((port, data[..data.len().min(max_len as usize)].to_vec()));
                }
                Ok(())
            }
            // The rules of this test send nothing to a controller and use no meters.
            DpAction::Controller(_)
            | DpAction::Meter(_)
            | DpAction::SetTunnel(_)
            | DpAction::SetTunnelDst(_)
            | DpAction::SetTunnelMetadata(_)
            // (The tracker's verdict is for later passes, which a bridge alone has
            // none of; the frame stays as it is.)
            | DpAction::CtMark { .. }
            | DpAction::CtLabel { .. }
                    | DpAction::CtNatAddr { .. }
                    | DpAction::CtNatRange { .. }
            | DpAction::Ct { .. }
            | DpAction::CtClear => Ok(()),
            // A bridge on no backer decides its select groups in translation; the
            // backer's property test covers recirculation.
            // A bridge on no backer has no tunnel ports of its own either.
            DpAction::Hash
            | DpAction::Recirc(_)
            | DpAction::TunnelPush(_)
            | DpAction::TunnelPop(_) => {
                panic!("{a} from a bridge alone")
            }
            DpAction::SetDlSrc(m) => {
                buf.set_dl_src(m);
                Ok(())
            }
            DpAction::SetDlDst(m) => {
                buf.set_dl_dst(m);
                Ok(())
            }
            DpAction::PushVlan(t) => buf.push_vlan(t),
            DpAction::PushMpls { ethertype, lse } => buf.push_mpls(ethertype, lse),
            DpAction::PopMpls(t) => {
                buf.pop_mpls(t);
                Ok(())
            }
            DpAction::SetMpls { lse, mask } => {
                buf.set_mpls(lse, mask);
                Ok(())
            }
            DpAction::PushPbb { ethertype, itag } => buf.push_pbb(ethertype, itag),
            DpAction::PopPbb => {
                buf.pop_pbb();
                Ok(())
            }
            DpAction::PushNsh(h) => buf.push_nsh_base(&h),
            DpAction::PushMplsEthernet { ethertype, lse } => buf.push_mpls_ethernet(ethertype, lse),
            DpAction::PopMplsEthernet => buf.pop_mpls_ethernet(),
            DpAction::PopNsh => buf.pop_nsh_ethernet(),
            DpAction::DecMplsTtl => buf.dec_mpls_ttl(),
            DpAction::SetVlanVid(v) => buf.set_vlan_vid(v),
            DpAction::SetVlanPcp(p) => buf.set_vlan_pcp(p),
            DpAction::PopVlan => {
                buf.strip_vlan();
                Ok(())
            }
            DpAction::SetNwSrc(a) => {
                buf.set_nw_src(a.octets());
                Ok(())
            }
            DpAction::SetNwDst(a) => {
                buf.set_nw_dst(a.octets());
                Ok(())
            }
            DpAction::SetNwTos(t) => {
                buf.set_nw_tos(t);
                Ok(())
            }
            DpAction::SetTpSrc(p) => {
                buf.set_tp_src(p);
                Ok(())
            }
            DpAction::SetTpDst(p) => {
                buf.set_tp_dst(p);
                Ok(())
            }
            DpAction::DecTtl => buf.dec_ttl(),
            DpAction::SetField(w) => {
                buf.write_field(w);
                Ok(())
            }
        };
        if r.is_err() {
            break;
        }
    }
    out.sort();
    out
}

fn run(ops: &[Op], first: &[String], emc: u32) -> Result<(), TestCaseError> {
    let mut r = rig(first, emc);
    let now = vsw_datapath::clock::now_ms;
    for op in ops {
        match op {
            Op::Rules(rules) => {
                r.ofproto.set_pipeline(pipeline(rules));
                r.dp.revalidate(now(), MAX_IDLE_MS).unwrap();
            }
            Op::Send(p) => {
                let generation = r.ofproto.generation();
                let frame = p.frame();
                let got = r
                    .ports
                    .forward(&mut r.dp, p.in_port, &frame, emc)
                    .map_err(TestCaseError::fail)?;
                let mut key = FlowKey::default();
                extract(&frame, p.in_port, None, &mut key).unwrap();
                let fresh = r.ofproto.translate_key(&key, now());
                let want = expected(&frame, &fresh.actions);
                prop_assert_eq!(
                    &got,
                    &want,
                    "{:?} through {:?}: datapath flows {:?}",
                    p,
                    fresh.actions,
                    r.dp.dump_flows()
                );
                if r.ofproto.generation() != generation {
                    // The translation learned a host or saw it move: the revalidator
                    // runs at once (vswd's is woken by the PMD).
                    r.dp.revalidate(now(), MAX_IDLE_MS).unwrap();
                }
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(common::cases(160)))]

    #[test]
    fn the_fast_path_forwards_as_a_fresh_translation_says(
        first in proptest::collection::vec(rule(), 1..10),
        ops in proptest::collection::vec(op(), 1..40),
        emc in prop_oneof![Just(1u32), Just(0)],
    ) {
        run(&ops, &first, emc)?;
    }
}

#[test]
fn a_learning_switch_through_moves_and_rule_changes() {
    let normal = vec!["table=0,priority=0,actions=NORMAL".to_string()];
    let p = |in_port, src, dst| {
        Op::Send(Packet {
            in_port,
            src,
            dst,
            tcp: false,
            tp_dst: 53,
        })
    };
    let ops = vec![
        p(1, 1, 2),
        p(2, 2, 1),
        p(1, 1, 2),
        // Host 1 moves to port 3: flows towards it must follow.
        p(3, 1, 2),
        p(2, 2, 1),
        Op::Rules(vec![
            "table=0,priority=9,udp,tp_dst=53,actions=drop".into(),
            "table=0,priority=0,actions=NORMAL".into(),
        ]),
        p(2, 2, 1),
        Op::Rules(normal.clone()),
        p(2, 2, 1),
    ];
    run(&ops, &normal, 1).unwrap();
}

#[test]
fn a_flow_that_learned_matches_the_source_it_learned_from() {
    let rules = vec![
        "table=0,priority=1,ip,actions=learn(table=7,limit=1,result_dst=NXM_NX_REG0[1],\
         NXM_OF_ETH_SRC[]),resubmit(,1)"
            .to_string(),
        "table=1,priority=2,ip,reg0=2,actions=output:2".into(),
        "table=1,priority=1,ip,actions=output:3".into(),
    ];
    let p = |src| {
        Op::Send(Packet {
            in_port: 1,
            src,
            dst: 9,
            tcp: false,
            tp_dst: 53,
        })
    };
    // Source 1 learns (to port 2), and its flow is cached on its next packet;
    // source 2 is over the limit (to port 3) whatever source 1's flow says.
    for emc in [1, 0] {
        run(&[p(1), p(1), p(1), p(2), p(2), p(1)], &rules, emc).unwrap();
    }
}

#[test]
fn a_flow_through_multipath_matches_the_fields_it_hashed() {
    let rules = vec![
        "table=0,priority=1,ip,actions=multipath(eth_src,0,modulo_n,3,0,NXM_NX_REG0[0..1]),\
         resubmit(,1)"
            .to_string(),
        "table=1,priority=1,ip,reg0=0,actions=output:2".into(),
        "table=1,priority=1,ip,reg0=1,actions=output:3".into(),
        "table=1,priority=1,ip,reg0=2,actions=output:4".into(),
    ];
    let p = |src| {
        Op::Send(Packet {
            in_port: 1,
            src,
            dst: 9,
            tcp: false,
            tp_dst: 53,
        })
    };
    let ops: Vec<Op> = (1..=4).flat_map(|s| [p(s), p(s)]).collect();
    for emc in [1, 0] {
        run(&ops, &rules, emc).unwrap();
    }
}

/// A fresh translation of a TCP (58 bytes) or UDP (46 bytes) packet from port 1
/// through `rules`: its datapath actions, and the ports they send to.
fn translated(rules: &[String], tcp: bool) -> (Vec<DpAction>, Vec<u32>) {
    let p = Packet {
        in_port: 1,
        src: 1,
        dst: 9,
        tcp,
        tp_dst: 53,
    };
    let frame = p.frame();
    let mut key = FlowKey::default();
    extract(&frame, 1, None, &mut key).unwrap();
    let r = rig(rules, 1);
    let fresh = r.ofproto.translate_key(&key, vsw_datapath::clock::now_ms());
    let ports = expected(&frame, &fresh.actions)
        .into_iter()
        .map(|(p, _)| p)
        .collect();
    (fresh.actions, ports)
}

/// `check_pkt_larger`: one datapath flow for both lengths, each packet the way
/// its own length says — a TCP frame (58 bytes) is longer than 50, a UDP one
/// (46) is not, the same rules for both.
#[test]
fn a_packet_goes_the_way_its_length_says() {
    let rules = vec![
        "table=0,priority=1,ip,actions=check_pkt_larger(50)->NXM_NX_REG0[0],resubmit(,1)"
            .to_string(),
        "table=1,priority=2,reg0=1,actions=output:2".into(),
        "table=1,priority=1,actions=output:3".into(),
    ];
    for (tcp, port) in [(true, 2), (false, 3)] {
        let (actions, ports) = translated(&rules, tcp);
        assert!(
            matches!(
                actions[..],
                [
                    DpAction::CheckPktLen {
                        size: 50,
                        gt: 1,
                        le: 1
                    },
                    ..
                ]
            ),
            "{actions:?}"
        );
        assert_eq!(ports, vec![port], "tcp: {tcp}");
    }
    // In a clone, beside an action set written before it: the clone's ways run
    // on a copy; the action set runs once, at the pipeline's end.
    let in_clone = vec![
        "table=0,priority=1,ip,actions=write_actions(output:4),\
         clone(check_pkt_larger(50)->NXM_NX_REG0[0],resubmit(,1))"
            .to_string(),
        "table=1,priority=2,reg0=1,actions=output:2".into(),
        "table=1,priority=1,actions=output:3".into(),
    ];
    for (tcp, port) in [(true, 2), (false, 3)] {
        let (actions, ports) = translated(&in_clone, tcp);
        assert_eq!(ports, vec![port, 4], "{actions:?}");
    }
    // Through the datapath's own caches too.
    let ops: Vec<Op> = [true, false, true, false]
        .into_iter()
        .map(|tcp| {
            Op::Send(Packet {
                in_port: 1,
                src: 1,
                dst: 9,
                tcp,
                tp_dst: 53,
            })
        })
        .collect();
    for emc in [1, 0] {
        run(&ops, &rules, emc).unwrap();
    }
}
