//! A tunnel port's queues: what it sends is encapsulated and handed to the underlay
//! bridge; what it receives is what the underlay bridge decapsulated for it.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use vsw_datapath::{PacketMeta, PortQueues, StageError, TxOffloads, TxQueue};
use vsw_packet::ethernet::copy_frame;
use vsw_packet::tunnel::{flow_hash, udp_source_port, EncapSpec, EncapTemplate};
use vsw_packet::wire::arp;
use vsw_packet::{EtherType, MacAddr};
use vsw_tunnel::config::{FromFlow, Inherit, TunnelConfig};

use super::world::{world, BridgeEnd, PortEnd, Snapshot};
use crate::channel::Channel;

/// How often a next hop whose MAC is unknown is asked for it.
const ARP_INTERVAL_MS: u64 = 1000;

/// The largest inner IP packet, for an underlay MTU of 1,500 and this tunnel's
/// outer headers (outer IP, UDP, an 8-byte VXLAN or option-less Geneve header, the
/// inner Ethernet header): 1,450 over IPv4, as Linux's vxlan device.
pub fn inner_mtu(config: &TunnelConfig) -> usize {
    let ip = match config.remote {
        FromFlow::Fixed(IpAddr::V6(_)) => 40,
        _ => 20,
    };
    1500 - ip - 8 - 8 - 14
}

/// Opens tunnel port `name`.
pub fn open_tunnel(name: &str, config: &TunnelConfig) -> Result<PortQueues, crate::NetdevError> {
    let rx_channel = Channel::new();
    let rx = rx_channel.reader().expect("a new channel has no reader");
    world().register_port(
        name,
        PortEnd {
            config: config.clone(),
            rx: rx_channel,
        },
    );
    let c = config.clone();
    Ok(PortQueues {
        rx: vec![Box::new(rx)],
        tx: Box::new(TunnelTx::new(config)),
        tx_factory: Some(Box::new(move || Ok(Box::new(TunnelTx::new(&c))))),
    })
}

/// Lets go of tunnel port `name` (its device closed).
pub fn close_tunnel(name: &str) {
    world().unregister_port(name);
}

/// Where this port's frames go now, as worked out from a snapshot.
enum Resolved {
    Ready {
        template: EncapTemplate,
        inject: Arc<Channel>,
    },
    /// The next hop's MAC is not known: ask for it.
    Unknown {
        bridge: BridgeEnd,
        src: IpAddr,
        next_hop: IpAddr,
    },
    Dropped(&'static str),
}

struct TunnelTx {
    config: TunnelConfig,
    /// The snapshot generation `resolved` was worked out from.
    generation: u64,
    resolved: Resolved,
    ip_id: u16,
    /// When the next hop was last asked for.
    asked_ms: u64,
}

impl TunnelTx {
    fn new(config: &TunnelConfig) -> TunnelTx {
        TunnelTx {
            config: config.clone(),
            generation: u64::MAX,
            resolved: Resolved::Dropped("no_route"),
            ip_id: 0,
            asked_ms: 0,
        }
    }

    fn resolve(&self, snap: &Snapshot) -> Resolved {
        let FromFlow::Fixed(remote) = self.config.remote else {
            return Resolved::Dropped("no_route");
        };
        let Some(route) = snap.routes.lookup(remote) else {
            return Resolved::Dropped("no_route");
        };
        let Some(bridge) = snap.bridges.get(&route.dev) else {
            return Resolved::Dropped("route_not_a_bridge");
        };
        let src = match self.config.local {
            Some(FromFlow::Fixed(l)) => Some(l),
            _ => snap.routes.source_for(route),
        };
        let Some(src) = src else {
            return Resolved::Dropped("no_source_address");
        };
        let next_hop = route.gateway.unwrap_or(remote);
        let now = vsw_datapath::clock::now_ms();
        let Some(mac) = snap.neigh.lookup(next_hop, now) else {
            return Resolved::Unknown {
                bridge: bridge.clone(),
                src,
                next_hop,
            };
        };
        let fixed = |v: Inherit, default: u8| match v {
            Inherit::Fixed(n) => n,
            Inherit::Inherit => default,
        };
        let spec = EncapSpec {
            kind: self.config.kind,
            eth_src: bridge.mac,
            eth_dst: mac,
            src,
            dst: remote,
            tos: fixed(self.config.tos, 0),
            ttl: fixed(self.config.ttl, 64),
            df: self.config.df,
            udp_dst: self.config.dst_port,
            udp_csum: self.config.csum,
            vni: match self.config.key {
                FromFlow::Fixed(k) => k,
                FromFlow::Flow => 0,
            },
            geneve_options: Vec::new(),
        };
        match EncapTemplate::new(&spec) {
            Ok(template) => Resolved::Ready {
                template,
                inject: bridge.inject.clone(),
            },
            Err(_) => Resolved::Dropped("no_source_address"),
        }
    }
}

/// Asks the underlay for `next_hop`'s MAC (IPv4: an ARP request from the bridge), at
/// most once every [`ARP_INTERVAL_MS`] (`asked_ms`: when last).
fn ask(asked_ms: &mut u64, bridge: &BridgeEnd, src: IpAddr, next_hop: IpAddr) {
    let now = vsw_datapath::clock::now_ms();
    if now.saturating_sub(*asked_ms) < ARP_INTERVAL_MS {
        return;
    }
    let (IpAddr::V4(spa), IpAddr::V4(tpa)) = (src, next_hop) else {
        // IPv6 next hops are learned from the advertisements the bridge sees.
        return;
    };
    *asked_ms = now;
    let _ = bridge.inject.send_with(PacketMeta::default(), |buf| {
        arp_request(buf, bridge.mac, spa, tpa)
    });
}

/// Writes a broadcast ARP request for `tpa` from `sha`/`spa` into `buf`.
fn arp_request(buf: &mut [u8], sha: MacAddr, spa: Ipv4Addr, tpa: Ipv4Addr) -> Option<usize> {
    use vsw_packet::ethernet::{field, ETH_HDR_LEN};
    /// ARP's opcode for a request.
    const REQUEST: u16 = 1;
    // Padded to Ethernet's minimum frame.
    let len = (ETH_HDR_LEN + arp::ETHERNET_IPV4_LEN).max(60);
    let f = buf.get_mut(..len)?;
    f.fill(0);
    f[field::DESTINATION].copy_from_slice(&MacAddr::BROADCAST.0);
    f[field::SOURCE].copy_from_slice(&sha.0);
    f[field::ETHERTYPE].copy_from_slice(&EtherType::ARP.to_be_bytes());
    arp::emit_ethernet_ipv4(
        &mut f[ETH_HDR_LEN..],
        REQUEST,
        sha.0,
        spa.octets(),
        MacAddr::ZERO.0,
        tpa.octets(),
    );
    Some(len)
}

impl TxQueue for TunnelTx {
    /// Inner checksums are finished and super-frames cut before encapsulation; the
    /// inner MTU is what a 1,500-byte underlay leaves.
    fn offloads(&self) -> TxOffloads {
        TxOffloads {
            csum: false,
            tso: false,
            tunnel_tso: false,
            mtu: inner_mtu(&self.config),
        }
    }

    fn stage(&mut self, data: &[u8], meta: &PacketMeta) -> Result<(), StageError> {
        let w = world();
        let snap = w.snapshot();
        if snap.generation != self.generation {
            self.resolved = self.resolve(&snap);
            self.generation = snap.generation;
        }
        match &self.resolved {
            Resolved::Ready { template, inject } => {
                let sport = udp_source_port(flow_hash(data));
                self.ip_id = self.ip_id.wrapping_add(1);
                let id = self.ip_id;
                let at = template.overhead();
                let sent = inject.send_with(PacketMeta::default(), |buf| {
                    let n = copy_frame(buf.get_mut(at..)?, data, meta.vlan)?;
                    template.finish(buf, n, sport, id)
                });
                // A full underlay is counted as the tunnels' drop, not this port's
                // error.
                if sent.is_err() {
                    w.count_drop("underlay_full");
                }
            }
            Resolved::Dropped(why) => w.count_drop(why),
            Resolved::Unknown {
                bridge,
                src,
                next_hop,
            } => {
                w.count_drop("neighbour_unknown");
                ask(&mut self.asked_ms, bridge, *src, *next_hop);
            }
        }
        Ok(())
    }

    fn pending(&self) -> usize {
        0
    }

    fn flush(&mut self) -> usize {
        0
    }
}
