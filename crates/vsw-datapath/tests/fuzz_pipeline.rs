//! Fuzzing the whole pipeline on stable Rust: an arbitrary frame (well-formed frames of
//! every protocol and TCP super-frames, mutated) with an arbitrary virtio-net header,
//! matched by rules with random actions, through one PMD to output ports of every
//! capability (checksums, TSO, small and large MTUs). Nothing may panic or hang, and
//! whatever leaves a port must be something that port takes: no super-frame to a
//! port without TSO or beyond what its MTU lets it cut, no checksum left to a port
//! that cannot finish it, no plain frame above its MTU.
//!
//! `cargo test` runs 3,000 cases; a long run:
//! `PROPTEST_CASES=100000 cargo test --release -p vsw-datapath --test fuzz_pipeline`.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use vsw_datapath::memory::{memory_port_with, MemoryPeer, MEMORY_OFFLOADS};
use vsw_datapath::{Datapath, PacketMeta, PmdConfig, PortHandle, PortStats, TxOffloads};
use vsw_flow::parse_flow;
use vsw_packet::builder::{self, samples, Ipv4, Ipv6, DST_MAC, SRC_MAC};
use vsw_packet::ethernet::l3_len;
use vsw_packet::key::IPPROTO_TCP;
use vsw_packet::vnet::{VNET_F_NEEDS_CSUM, VNET_GSO_TCPV4, VNET_GSO_TCPV6, VNET_GSO_UDP};
use vsw_packet::{gso, EtherType, VlanTag, VnetHdr};

/// Output ports 2.. and what each finishes by itself.
const OUTPUTS: [TxOffloads; 6] = [
    TxOffloads {
        csum: false,
        tso: false,
        merges: false,
        tunnel_tso: false,
        mtu: 1500,
    },
    TxOffloads {
        csum: true,
        tso: false,
        merges: false,
        tunnel_tso: false,
        mtu: 1500,
    },
    TxOffloads {
        csum: false,
        tso: true,
        merges: true,
        tunnel_tso: false,
        mtu: 1500,
    },
    TxOffloads {
        csum: true,
        tso: true,
        merges: true,
        tunnel_tso: false,
        mtu: 1500,
    },
    TxOffloads {
        csum: true,
        tso: true,
        merges: true,
        tunnel_tso: false,
        mtu: 576,
    },
    TxOffloads {
        csum: true,
        tso: true,
        merges: true,
        tunnel_tso: false,
        mtu: 9000,
    },
];

/// The marker frame that closes every case (an experimental ethertype).
const MARKER: u16 = 0x88b5;

struct Pipeline {
    dp: Datapath,
    input: MemoryPeer,
    input_stats: Arc<PortStats>,
    outputs: Vec<MemoryPeer>,
}

fn pipeline() -> Pipeline {
    let mut dp = Datapath::start(PmdConfig {
        cores: vec![0],
        pin: false,
    })
    .unwrap();
    let (q, input) = memory_port_with(1, 4096, MEMORY_OFFLOADS);
    let input_stats = Arc::new(PortStats::default());
    dp.add_port(PortHandle::new(1, "in", q, input_stats.clone()))
        .unwrap();
    let mut outputs = Vec::new();
    for (i, o) in OUTPUTS.iter().enumerate() {
        let (q, peer) = memory_port_with(1, 1 << 16, *o);
        let no = i as u32 + 2;
        dp.add_port(PortHandle::new(
            no,
            &format!("out{no}"),
            q,
            Arc::new(PortStats::default()),
        ))
        .unwrap();
        outputs.push(peer);
    }
    Pipeline {
        dp,
        input,
        input_stats,
        outputs,
    }
}

/// Seeds: every protocol's well-formed frame, and TCP super-frames.
fn seeds() -> Vec<Vec<u8>> {
    let mut all: Vec<Vec<u8>> = samples().into_iter().map(|(_, f)| f).collect();
    let data: Vec<u8> = (0..20_000u32).map(|i| i as u8).collect();
    let tcp = builder::tcp(40000, 5201, 0x18, &data);
    let v4 = Ipv4 {
        proto: IPPROTO_TCP,
        ..Ipv4::default()
    };
    let v6 = Ipv6 {
        next: IPPROTO_TCP,
        ..Ipv6::default()
    };
    all.push(builder::ethernet(
        DST_MAC,
        SRC_MAC,
        &[],
        EtherType::IPV4,
        &builder::ipv4(&v4, &tcp),
    ));
    all.push(builder::ethernet(
        DST_MAC,
        SRC_MAC,
        &[(EtherType::VLAN, 7)],
        EtherType::IPV6,
        &builder::ipv6(&v6, &tcp),
    ));
    all.push(builder::ethernet(
        DST_MAC,
        SRC_MAC,
        &[],
        EtherType::IPV4,
        &builder::ipv4(&v4, &tcp[..1500]),
    ));
    all
}

#[derive(Clone, Debug)]
enum Mutation {
    SetByte(usize, u8),
    Cut(usize),
    Insert(usize, Vec<u8>),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(at, v)| Mutation::SetByte(at, v)),
        any::<usize>().prop_map(Mutation::Cut),
        (any::<usize>(), proptest::collection::vec(any::<u8>(), 1..8))
            .prop_map(|(at, b)| Mutation::Insert(at, b)),
    ]
}

fn apply(frame: &mut Vec<u8>, m: &Mutation) {
    let n = frame.len();
    if n == 0 {
        return;
    }
    match m {
        Mutation::SetByte(at, v) => frame[at % n] = *v,
        Mutation::Cut(at) => frame.truncate(at % n),
        Mutation::Insert(at, b) => {
            let at = at % n;
            frame.splice(at..at, b.iter().copied());
        }
    }
}

/// A virtio-net header: often one a kernel would send for the frame, sometimes any.
fn vnet() -> impl Strategy<Value = VnetHdr> {
    let gso_type = prop_oneof![
        Just(0u8),
        Just(VNET_GSO_TCPV4),
        Just(VNET_GSO_TCPV6),
        Just(VNET_GSO_UDP),
        Just(VNET_GSO_TCPV4 | 0x80),
        any::<u8>(),
    ];
    let small = prop_oneof![Just(0u16), 1u16..100, 500u16..1500, any::<u16>()];
    (
        prop_oneof![Just(0u8), Just(VNET_F_NEEDS_CSUM), Just(2u8), any::<u8>()],
        gso_type,
        small.clone(),
        small.clone(),
        small.clone(),
        prop_oneof![Just(16u16), Just(6u16), any::<u16>()],
    )
        .prop_map(
            |(flags, gso_type, hdr_len, gso_size, csum_start, csum_offset)| VnetHdr {
                flags,
                gso_type,
                hdr_len,
                gso_size,
                csum_start,
                csum_offset,
            },
        )
}

const L2_ACTIONS: &[&str] = &[
    "output:2",
    "output:3",
    "output:4",
    "output:5",
    "output:6",
    "output:7",
    "in_port",
    "flood",
    "normal",
    "mod_dl_src:02:00:00:00:00:09",
    "mod_dl_dst:02:00:00:00:00:0a",
    "push_vlan:0x8100",
    "mod_vlan_vid:33",
    "mod_vlan_pcp:5",
    "strip_vlan",
];
const IP_ACTIONS: &[&str] = &[
    "mod_nw_src:198.18.9.9",
    "mod_nw_dst:198.18.9.10",
    "mod_nw_tos:32",
    "dec_ttl",
    "mod_nw_ttl:9",
    "mod_nw_ecn:3",
    "copy_ttl_out",
    "copy_ttl_in",
];
const L4_ACTIONS: &[&str] = &["mod_tp_src:999", "mod_tp_dst:1000"];

/// A rule's actions: `picks` index into what its match allows.
fn actions(picks: &[usize], allowed: &[&[&str]]) -> String {
    let pool: Vec<&str> = allowed.iter().flat_map(|a| a.iter().copied()).collect();
    picks
        .iter()
        .map(|p| pool[p % pool.len()])
        .collect::<Vec<_>>()
        .join(",")
}

fn rules(tcp: &[usize], udp: &[usize], ip: &[usize], other: &[usize]) -> vsw_flow::Pipeline {
    let marker = format!(
        "priority=50,in_port=1,dl_type={MARKER:#06x},actions=output:2,output:3,output:4,output:5,output:6,output:7"
    );
    let texts = [
        marker,
        format!(
            "priority=40,in_port=1,tcp,actions={}",
            actions(tcp, &[L2_ACTIONS, IP_ACTIONS, L4_ACTIONS])
        ),
        format!(
            "priority=30,in_port=1,udp,actions={}",
            actions(udp, &[L2_ACTIONS, IP_ACTIONS, L4_ACTIONS])
        ),
        format!(
            "priority=20,in_port=1,ip,actions={}",
            actions(ip, &[L2_ACTIONS, IP_ACTIONS])
        ),
        format!(
            "priority=10,in_port=1,actions={}",
            actions(other, &[L2_ACTIONS])
        ),
    ];
    let mut c = vsw_flow::Pipeline::new();
    for t in texts {
        // A combination the syntax refuses (a rewrite without its header) becomes drop.
        let spec = parse_flow(&t, &|_: &str| None)
            .or_else(|_| parse_flow("priority=1,actions=drop", &|_: &str| None))
            .unwrap();
        c.insert(spec, 1);
    }
    c
}

fn is_marker(frame: &[u8]) -> bool {
    frame.get(12..14) == Some(&MARKER.to_be_bytes()[..]) && frame.get(14..20) == Some(b"MARKER")
}

fn marker() -> Vec<u8> {
    let mut f = builder::ethernet(DST_MAC, SRC_MAC, &[], MARKER, b"MARKER");
    f.resize(60, 0);
    f
}

/// What may leave a port that finishes `o`.
fn check_output(
    port: usize,
    o: &TxOffloads,
    frame: &[u8],
    meta: &PacketMeta,
) -> Result<(), String> {
    let v = &meta.vnet;
    if frame.len() > 65_535 + 18 {
        return Err(format!("port {port}: a frame of {} bytes", frame.len()));
    }
    if v.is_gso() {
        if !o.tso {
            return Err(format!("port {port} without TSO got a super-frame {v:?}"));
        }
        if gso::segment_size(frame, v, o.mtu) != Ok(usize::from(v.gso_size)) {
            return Err(format!(
                "port {port} (MTU {}) got a super-frame it cannot cut into segments within it: {v:?}",
                o.mtu
            ));
        }
        return Ok(());
    }
    if v.flags & VNET_F_NEEDS_CSUM != 0 && !o.csum {
        return Err(format!(
            "port {port} cannot finish checksums but got one to finish"
        ));
    }
    if l3_len(frame) > o.mtu {
        return Err(format!(
            "port {port} (MTU {}) got a packet of {}",
            o.mtu,
            l3_len(frame)
        ));
    }
    Ok(())
}

/// Sends one case and its marker; checks every output up to the marker.
fn run_case(p: &Pipeline, frame: &[u8], meta: PacketMeta) -> Result<(), String> {
    let before = p.input_stats.view().rx_packets;
    p.input.send_with(frame, meta);
    p.input.send(&marker());
    let deadline = Instant::now() + Duration::from_secs(10);
    for (i, peer) in p.outputs.iter().enumerate() {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let Some((f, m)) = peer.recv_with(left) else {
                return Err(format!(
                    "port {} never got the marker: the pipeline hung (received {} of 2)",
                    i + 2,
                    p.input_stats.view().rx_packets - before
                ));
            };
            if is_marker(&f) {
                break;
            }
            check_output(i + 2, &OUTPUTS[i], &f, &m)?;
        }
    }
    Ok(())
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3000)
}

thread_local! {
    static PIPELINE: std::cell::RefCell<Option<Pipeline>> = const { std::cell::RefCell::new(None) };
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn whatever_comes_in_leaves_as_its_output_port_takes_it(
        seed in any::<usize>(),
        mutations in proptest::collection::vec(mutation(), 0..4),
        vnet in vnet(),
        tag in proptest::option::of((prop_oneof![Just(EtherType::VLAN), Just(EtherType::QINQ)], any::<u16>())),
        tcp in proptest::collection::vec(any::<usize>(), 1..5),
        udp in proptest::collection::vec(any::<usize>(), 1..5),
        ip in proptest::collection::vec(any::<usize>(), 1..5),
        other in proptest::collection::vec(any::<usize>(), 1..5),
    ) {
        let all = seeds();
        let mut frame = all[seed % all.len()].clone();
        for m in &mutations {
            apply(&mut frame, m);
        }
        let meta = PacketMeta {
            vnet,
            vlan: tag.map(|(tpid, tci)| VlanTag { tpid, tci }),
            tunnel: Default::default(),
        };
        let result = PIPELINE.with(|cell| {
            let mut cell = cell.borrow_mut();
            let p = cell.get_or_insert_with(pipeline);
            let ofproto = vsw_ofproto::Ofproto::new(rules(&tcp, &udp, &ip, &other));
            ofproto.set_ports(p.dp.ports().iter().map(|h| h.no).collect());
            p.dp.set_upcall(ofproto).unwrap();
            run_case(p, &frame, meta)
        });
        prop_assert!(result.is_ok(), "{}", result.unwrap_err());
    }
}
