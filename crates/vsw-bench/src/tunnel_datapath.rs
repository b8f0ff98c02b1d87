//! 64-byte frames encapsulated and decapsulated through the datapath, in memory (the
//! issue 18 figure): one PMD forwards a `ring` source's frames to VXLAN port A of an
//! overlay bridge, whose translation pushes the outer headers and goes on in host
//! A's underlay bridge, across a patch to host B's underlay, whose LOCAL port (the
//! host's address) pops them for VXLAN port B (whose remote is A's source
//! address); B's inner frames go to a `ring` sink. Every step is vsw's real code
//! (the tunnels' state, the backer, the datapath); only the devices are in memory.
//! Beside it, in the same run, the same source forwarded straight to the sink.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use vsw_datapath::ring::{flow_frames, ring_port, ring_port_with_frames};
use vsw_datapath::{Datapath, PmdConfig, PortHandle, PortStats};
use vsw_flow::{parse_flow, Pipeline};
use vsw_netdev::tunnel::{close_local, close_tunnel, open_local, open_tunnel, TunnelWorld};
use vsw_ofproto::Ofproto;
use vsw_packet::tunnel::TunnelKind;
use vsw_packet::MacAddr;
use vsw_tunnel::config::TunnelConfig;
use vsw_tunnel::route::RouteTable;

/// What one case measured.
#[derive(Debug)]
pub struct RoundTrip {
    /// Frames that reached the sink, per second.
    pub mpps: f64,
    /// PMD busy cycles per frame that reached the sink (all its passes through the
    /// datapath).
    pub cycles_per_frame: f64,
    /// Datapath passes per frame that reached the sink.
    pub passes: f64,
    /// The tunnels' drops by reason (`reason=count`), those that happened.
    pub drops: Vec<String>,
}

const A: Ipv4Addr = Ipv4Addr::new(198, 18, 77, 2);
const B: Ipv4Addr = Ipv4Addr::new(198, 18, 77, 1);
const BRIDGE_A: &str = "vsw-bench-tna";
const BRIDGE_B: &str = "vsw-bench-tnb";

fn vxlan(options: &[(&str, String)]) -> anyhow::Result<TunnelConfig> {
    let o: BTreeMap<String, String> = options
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    Ok(TunnelConfig::parse(TunnelKind::Vxlan, &o)?)
}

/// How a frame goes from the source to the sink.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Case {
    /// Straight: one rule, no tunnel.
    Straight,
    /// Native: the overlay bridge's translation pushes the outer headers and goes
    /// on in the underlay bridge (two bridges on one backer), in the source
    /// frame's own pass.
    Native,
}

impl Case {
    fn name(self) -> &'static str {
        match self {
            Case::Straight => "straight to the sink              ",
            Case::Native => "VXLAN natively (tnl_push, tnl_pop)",
        }
    }
}

fn pipeline_of(rules: &[&str]) -> anyhow::Result<Pipeline> {
    let mut pipeline = Pipeline::new();
    for r in rules {
        pipeline.insert(parse_flow(r, &|_: &str| None)?, 0);
    }
    Ok(pipeline)
}

/// Runs one case for `seconds`.
pub fn measure(case: Case, seconds: f64, core: usize, pin: bool) -> anyhow::Result<RoundTrip> {
    // The case's own tunnels (routes, neighbours, ports).
    let world = TunnelWorld::new();
    let mut dp = Datapath::start(PmdConfig {
        cores: vec![core],
        pin,
    })?;
    let tunnel = case != Case::Straight;
    match case {
        Case::Straight => {
            let ofproto = Ofproto::new(pipeline_of(&["in_port=1,actions=output:6"])?);
            ofproto.set_ports(vec![1, 2, 3, 4, 5, 6]);
            dp.set_upcall(ofproto)?;
        }
        Case::Native => {
            // The overlay bridge: source 1, VXLAN A 2, VXLAN B 5, sink 6 (datapath
            // numbers alike); host A's underlay: its LOCAL port (datapath 3) and a
            // patch to host B's underlay, whose LOCAL port (datapath 4) takes the
            // tunnel packets: pushed, crossed and popped in the source frame's pass.
            let backer = vsw_ofproto::Backer::new();
            let (ovl, o) = Ofproto::join(
                &backer,
                "vsw-bench-ovl",
                pipeline_of(&["in_port=1,actions=output:2", "in_port=5,actions=output:6"])?,
            )?;
            o.set_ports(vec![1, 2, 5, 6]);
            let (und_a, a) = Ofproto::join(
                &backer,
                BRIDGE_A,
                pipeline_of(&["in_port=65534,actions=output:10"])?,
            )?;
            a.set_ports(vec![65534, 10]);
            let (und_b, b) = Ofproto::join(
                &backer,
                BRIDGE_B,
                pipeline_of(&["in_port=10,actions=output:65534"])?,
            )?;
            b.set_ports(vec![65534, 10]);
            for (slot, of, dp_no) in [
                (ovl, 1, 1),
                (ovl, 2, 2),
                (ovl, 5, 5),
                (ovl, 6, 6),
                (und_a, 65534, 3),
                (und_a, 10, 7),
                (und_b, 65534, 4),
                (und_b, 10, 8),
            ] {
                backer.set_port(slot, of, dp_no)?;
            }
            backer.set_patch(und_a, 10, "vsw-bench-pa", "vsw-bench-pb");
            backer.set_patch(und_b, 10, "vsw-bench-pb", "vsw-bench-pa");
            backer.set_tunnel_port(ovl, 2, "vsw-bench-vxa");
            backer.set_tunnel_port(ovl, 5, "vsw-bench-vxb");
            backer.set_tunnel_egress(world.clone());
            dp.set_upcall(backer)?;
        }
    }
    let sink = Arc::new(PortStats::default());
    let mut registrations = None;
    dp.add_port(PortHandle::new(6, "sink", ring_port(0, 64), sink.clone()))?;
    if tunnel {
        let w = &world;
        let mut routes = RouteTable::default();
        routes.add_from_args(&[
            "198.18.77.0/24".to_string(),
            BRIDGE_A.to_string(),
            format!("src={A}"),
        ])?;
        w.set_routes(std::sync::Arc::new(routes));
        w.neighbour_set(IpAddr::V4(B), MacAddr([2, 0, 0, 0, 0x77, 1]), BRIDGE_A);
        let (port_a, reg_a) = open_tunnel(
            &world,
            "vsw-bench-vxa",
            "vsw-bench-ovla",
            &vxlan(&[("remote_ip", B.to_string()), ("key", "42".into())])?,
        )?;
        let (port_b, reg_b) = open_tunnel(
            &world,
            "vsw-bench-vxb",
            "vsw-bench-ovlb",
            &vxlan(&[
                ("remote_ip", A.to_string()),
                ("local_ip", B.to_string()),
                ("key", "42".into()),
            ])?,
        )?;
        let (local_a, reg_la) = (ring_port(0, 64), open_local(&world, BRIDGE_A));
        let (local_b, reg_lb) = (ring_port(0, 64), open_local(&world, BRIDGE_B));
        registrations = Some((reg_a, reg_b, reg_la, reg_lb));
        let stats = || Arc::new(PortStats::default());
        dp.add_port(PortHandle::new(5, "vxb", port_b, stats()))?;
        dp.add_port(PortHandle::new(4, BRIDGE_B, local_b, stats()))?;
        dp.add_port(PortHandle::new(3, BRIDGE_A, local_a, stats()))?;
        dp.add_port(PortHandle::new(2, "vxa", port_a, stats()))?;
    }
    dp.add_port(PortHandle::new(
        1,
        "source",
        ring_port_with_frames(flow_frames(1, 64)),
        Arc::new(PortStats::default()),
    ))?;
    std::thread::sleep(Duration::from_millis(500));
    dp.clear_pmd_stats();
    let before = sink.view().tx_packets;
    let start = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(seconds));
    let p = dp.pmd_stats()[0];
    let delivered = sink.view().tx_packets - before;
    let elapsed = start.elapsed().as_secs_f64();
    drop(dp);
    if let Some((a, b, la, lb)) = registrations {
        close_tunnel(&world, "vsw-bench-vxa", a);
        close_tunnel(&world, "vsw-bench-vxb", b);
        close_local(&world, BRIDGE_A, la);
        close_local(&world, BRIDGE_B, lb);
    }
    anyhow::ensure!(delivered > 0, "nothing reached the sink");
    Ok(RoundTrip {
        mpps: delivered as f64 / elapsed / 1e6,
        cycles_per_frame: p.busy_cycles as f64 / delivered as f64,
        // A received packet's pass, and each lookup again (a popped tunnel packet's).
        passes: (p.packets + p.recirculations) as f64 / delivered as f64,
        drops: world
            .drops()
            .into_iter()
            .filter(|(_, n)| *n > 0)
            .map(|(r, n)| format!("{r}={n}"))
            .collect(),
    })
}

/// Alternates the two cases for `rounds` rounds and prints each.
pub fn run(rounds: u32, seconds: f64, core: usize) -> anyhow::Result<()> {
    let mut drops: Vec<String> = Vec::new();
    for round in 1..=rounds {
        for case in [Case::Straight, Case::Native] {
            let r = measure(case, seconds, core, true).context("measuring")?;
            drops.extend(r.drops.iter().cloned());
            let what = case.name();
            println!(
                "round {round}: {what} {:6.2} Mpps, {:6.1} PMD cycles per frame delivered ({:.2} datapath passes each)",
                r.mpps, r.cycles_per_frame, r.passes
            );
        }
    }
    println!(
        "tunnel drops: {}",
        if drops.is_empty() {
            "none".to_string()
        } else {
            drops.join(" ")
        }
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tunnels' state is the process's: one case at a time.
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

    /// Native, the source frame's pass pushes, crosses to host B's underlay and
    /// pops; its inner frame's lookup is the second pass: two, and the frames
    /// arrive.
    #[test]
    fn frames_pushed_and_popped_natively_cross_in_two_passes_and_arrive() {
        let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        let r = measure(Case::Native, 0.2, 0, false).unwrap();
        assert!(r.mpps > 0.0);
        assert!((r.passes - 2.0).abs() < 0.1, "{r:?}");
    }
}
