//! What tunnel headers cost per packet, alone (no devices, no datapath): encapsulating
//! a 64-byte frame (60 bytes, FCS aside) with a port's template (`push`) and
//! decapsulating it again (`decap`), for VXLAN and Geneve over IPv4 and IPv6, with
//! and without the outer UDP checksum; beside a plain copy of the frame, what any
//! transmit costs anyway.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Instant;

use vsw_packet::tunnel::{
    decap, udp_source_port, EncapSpec, EncapTemplate, TunnelKind, TunnelPorts,
};
use vsw_packet::MacAddr;

const PACKETS: u32 = 5_000_000;

struct Case {
    name: &'static str,
    spec: EncapSpec,
}

fn cases() -> Vec<Case> {
    let v4 = |n: u8| IpAddr::V4(Ipv4Addr::new(198, 18, 0, n));
    let v6 = |n: u8| IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, u16::from(n)));
    let spec = |kind, ipv6: bool, csum, options: Vec<u8>| EncapSpec {
        kind,
        eth_src: MacAddr([2, 0, 0, 0, 0, 1]),
        eth_dst: MacAddr([2, 0, 0, 0, 0, 2]),
        src: if ipv6 { v6(1) } else { v4(1) },
        dst: if ipv6 { v6(2) } else { v4(2) },
        tos: 0,
        ttl: 64,
        df: true,
        udp_dst: kind.default_port(),
        udp_csum: csum,
        vni: 42,
        geneve_options: options,
        gpe: None,
    };
    let mut option = [0u8; 8];
    vsw_packet::wire::geneve::emit_option(&mut option, 0xffff, 1, &[1, 2, 3, 4]);
    vec![
        Case {
            name: "VXLAN/IPv4",
            spec: spec(TunnelKind::Vxlan, false, false, Vec::new()),
        },
        Case {
            name: "VXLAN/IPv4 csum",
            spec: spec(TunnelKind::Vxlan, false, true, Vec::new()),
        },
        Case {
            name: "Geneve/IPv4 1 option",
            spec: spec(TunnelKind::Geneve, false, false, option.to_vec()),
        },
        Case {
            name: "VXLAN/IPv6 csum",
            spec: spec(TunnelKind::Vxlan, true, true, Vec::new()),
        },
    ]
}

/// Nanoseconds and TSC cycles per call of `f`.
fn per_packet(mut f: impl FnMut(u32) -> usize) -> (f64, f64) {
    let (start, c0) = (Instant::now(), vsw_datapath::clock::cycles());
    let mut acc = 0usize;
    for i in 0..PACKETS {
        acc = acc.wrapping_add(f(i));
    }
    std::hint::black_box(acc);
    let cycles = vsw_datapath::clock::cycles().wrapping_sub(c0) as f64;
    (
        start.elapsed().as_nanos() as f64 / f64::from(PACKETS),
        cycles / f64::from(PACKETS),
    )
}

pub fn run(rounds: u32) {
    let inner = vsw_packet::builder::udp4_frame([10, 0, 0, 1], [10, 0, 0, 2], 1000, 7, 18);
    let ports = TunnelPorts {
        vxlan: Some(4789),
        geneve: Some(6081),
    };
    let mut out = vec![0u8; 2048];
    for round in 1..=rounds {
        let (copy_ns, copy_cycles) = per_packet(|_| {
            out[..inner.len()].copy_from_slice(std::hint::black_box(&inner));
            out[3] as usize
        });
        println!(
            "round {round}: copy of the {}-byte frame {copy_ns:.1} ns, {copy_cycles:.0} cycles",
            inner.len()
        );
        for case in cases() {
            let t = EncapTemplate::new(&case.spec).expect("a valid spec");
            let (push_ns, push_cycles) = per_packet(|i| {
                t.push(
                    std::hint::black_box(&inner),
                    &mut out,
                    udp_source_port(i),
                    i as u16,
                )
                .unwrap_or(0)
            });
            let n = t.push(&inner, &mut out, 40000, 1).expect("room");
            let frame = out[..n].to_vec();
            let (pop_ns, pop_cycles) = per_packet(|_| {
                decap(std::hint::black_box(&frame), &ports, false, |_, _| false)
                    .map_or(0, |d| d.inner.len())
            });
            println!(
                "round {round}: {:<22} encap {push_ns:5.1} ns {push_cycles:4.0} cycles, decap {pop_ns:5.1} ns {pop_cycles:4.0} cycles ({n}-byte outer frame)",
                case.name
            );
        }
    }
}
