//! A tunnel port's queues: what it sends is encapsulated and handed to the underlay
//! bridge; what it receives is what the underlay bridge decapsulated for it.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use arrayvec::ArrayVec;
use vsw_datapath::{PacketMeta, PortQueues, StageError, TxOffloads, TxQueue};
use vsw_packet::ethernet::copy_frame;
use vsw_packet::gso::complete_checksum;
use vsw_packet::tunnel::TunnelKind;
use vsw_packet::tunnel::{flow_hash, inner_tos_ttl, udp_source_port, EncapSpec, EncapTemplate};
use vsw_packet::VnetHdr;
use vsw_tunnel::config::{FromFlow, Inherit, TunnelConfig};
use vsw_tunnel::metadata::MetadataOption;

use super::neighbour_ask::{arp_request, neighbour_solicitation, ASK_INTERVAL_MS};
use super::world::{BridgeEnd, PortEnd, Registration, Snapshot, TunnelDrop, TunnelWorld};
use crate::channel::Channel;

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

/// Opens tunnel port `name` of bridge `bridge` in `world`; the registration is what
/// closes it again.
pub fn open_tunnel(
    world: &Arc<TunnelWorld>,
    name: &str,
    bridge: &str,
    config: &TunnelConfig,
) -> Result<(PortQueues, Registration), crate::NetdevError> {
    let bridge: Arc<str> = Arc::from(bridge);
    // Decapsulated super-frames (the peer's UDP-tunnel GSO) cross whole.
    let rx_channel = Channel::with_frames_of(crate::channel::SUPER_FRAME);
    let rx = rx_channel.reader().expect("a new channel has no reader");
    let registration = world.register_port(
        name,
        PortEnd {
            config: config.clone(),
            rx: rx_channel,
            bridge: bridge.clone(),
            metadata0: None,
        },
    );
    let c = config.clone();
    let b = bridge.clone();
    let w = world.clone();
    let queues = PortQueues {
        rx: vec![Box::new(rx)],
        tx: Box::new(TunnelTx::new(world.clone(), config, bridge)),
        tx_factory: Some(Box::new(move || {
            Ok(Box::new(TunnelTx::new(w.clone(), &c, b.clone())))
        })),
    };
    Ok((queues, registration))
}

/// Lets go of tunnel port `name`, opened as `registration` (its device closed),
/// unless it was opened again since.
pub fn close_tunnel(world: &TunnelWorld, name: &str, registration: Registration) {
    world.unregister_port(name, registration);
}

/// Where this port's frames go now, as worked out from a snapshot.
enum Resolved {
    Ready {
        template: EncapTemplate,
        /// A Geneve port's template with the option `tun_metadata0` stands for
        /// (value zero), for packets a rule gave one.
        with_metadata: Option<EncapTemplate>,
        inject: Arc<Channel>,
    },
    /// The next hop's MAC is not known: ask for it.
    Unknown {
        bridge: BridgeEnd,
        src: IpAddr,
        next_hop: IpAddr,
        /// When it was last asked for; `None`: not yet.
        asked_ms: Option<u64>,
    },
    Dropped(TunnelDrop),
}

/// Remote ends whose way out a `remote_ip=flow` port remembers at once (a fixed
/// remote needs one). A frame to one not remembered works its way out again (route,
/// neighbour, a header template allocated): with more remotes than this active
/// through one port on one PMD, that happens per frame. Found by a linear scan,
/// which a few dozen entries keep cheap.
const REMOTES_KEPT: usize = 32;

struct TunnelTx {
    world: Arc<TunnelWorld>,
    /// The rest, apart: a frame's way out is worked out on it while the world's
    /// snapshot is read.
    tx: Sender,
}

struct Sender {
    config: TunnelConfig,
    /// The bridge the port is on (whose TLV map its Geneve option follows).
    bridge: Arc<str>,
    /// The snapshot generation `remotes` were worked out from.
    generation: u64,
    /// Where frames to each remote end go, as last worked out; the oldest is
    /// forgotten first.
    remotes: ArrayVec<(IpAddr, Resolved), REMOTES_KEPT>,
    oldest: usize,
    ip_id: u16,
    /// Where a super-frame too large for one outer packet is split.
    split: Box<[u8]>,
}

impl TunnelTx {
    fn new(world: Arc<TunnelWorld>, config: &TunnelConfig, bridge: Arc<str>) -> TunnelTx {
        TunnelTx {
            world,
            tx: Sender {
                config: config.clone(),
                bridge,
                generation: u64::MAX,
                remotes: ArrayVec::new(),
                oldest: 0,
                ip_id: 0,
                split: vec![0u8; crate::channel::SUPER_FRAME].into_boxed_slice(),
            },
        }
    }
}

impl Sender {
    /// The remote end a frame goes to: the port's, or with `remote_ip=flow` the one
    /// the rules set (`set_field:…->tun_dst`).
    fn remote(&self, meta: &PacketMeta) -> Option<IpAddr> {
        match self.config.remote {
            FromFlow::Fixed(remote) => Some(remote),
            FromFlow::Flow if meta.tunnel.dst != 0 => {
                Some(IpAddr::V4(Ipv4Addr::from(meta.tunnel.dst)))
            }
            FromFlow::Flow => None,
        }
    }

    /// The place in `remotes` of `remote`'s way out, worked out now if it is not
    /// known.
    fn way_to(&mut self, snap: &Snapshot, remote: IpAddr) -> usize {
        if snap.generation != self.generation {
            self.remotes.clear();
            self.oldest = 0;
            self.generation = snap.generation;
        }
        if let Some(i) = self.remotes.iter().position(|(r, _)| *r == remote) {
            return i;
        }
        let resolved = self.resolve(snap, remote);
        if self.remotes.is_full() {
            let i = self.oldest;
            self.oldest = (i + 1) % REMOTES_KEPT;
            self.remotes[i] = (remote, resolved);
            i
        } else {
            self.remotes.push((remote, resolved));
            self.remotes.len() - 1
        }
    }

    fn resolve(&self, snap: &Snapshot, remote: IpAddr) -> Resolved {
        let Some(route) = snap.routes.lookup(remote) else {
            return Resolved::Dropped(TunnelDrop::NoRoute);
        };
        let Some(bridge) = snap.bridges.get(&route.dev) else {
            return Resolved::Dropped(TunnelDrop::RouteNotABridge);
        };
        let src = match self.config.local {
            Some(FromFlow::Fixed(l)) => Some(l),
            _ => snap.routes.source_for(route),
        };
        let Some(src) = src else {
            return Resolved::Dropped(TunnelDrop::NoSourceAddress);
        };
        let next_hop = route.gateway.unwrap_or(remote);
        let Some(mac) = snap.neigh.lookup(&route.dev, next_hop) else {
            return Resolved::Unknown {
                bridge: bridge.clone(),
                src,
                next_hop,
                asked_ms: None,
            };
        };
        let spec = EncapSpec {
            kind: self.config.kind,
            eth_src: bridge.mac,
            eth_dst: mac,
            src,
            dst: remote,
            // Written over per packet where inherited.
            tos: self.config.tos.or_inner(0),
            ttl: self.config.ttl.or_inner(64),
            df: self.config.df,
            udp_dst: self.config.dst_port,
            udp_csum: self.config.csum,
            vni: match self.config.key {
                FromFlow::Fixed(k) => k,
                FromFlow::Flow => 0,
            },
            geneve_options: Vec::new(),
        };
        let with_metadata = match (self.config.kind, snap.metadata0.get(&*self.bridge)) {
            (TunnelKind::Geneve, Some(m)) => EncapTemplate::new(&EncapSpec {
                geneve_options: m.tlv(),
                ..spec.clone()
            })
            .ok(),
            _ => None,
        };
        match EncapTemplate::new(&spec) {
            Ok(template) => Resolved::Ready {
                template,
                with_metadata,
                inject: bridge.inject.clone(),
            },
            Err(_) => Resolved::Dropped(TunnelDrop::NoSourceAddress),
        }
    }
}

/// What varies per packet in the outer headers.
struct Outer {
    sport: u16,
    ip_id: u16,
    /// `key=flow`: the VNI the rules set.
    vni: Option<u32>,
    /// `tos=inherit` or `ttl=inherit`: the outer TOS and TTL, copied from the inner
    /// IP header where asked.
    tos_ttl: Option<(u8, u8)>,
    /// `tun_metadata0`'s value as the option carries it.
    option: Option<[u8; MetadataOption::LEN]>,
}

/// Sends `data` behind `template`'s outer headers into the underlay bridge. A
/// super-frame keeps its offload state, moved behind the outer headers (the
/// underlay cuts it); any other frame has its checksum finished first, before the
/// outer UDP checksum covers it.
fn encapsulate(
    world: &TunnelWorld,
    template: &EncapTemplate,
    inject: &Channel,
    data: &[u8],
    meta: &PacketMeta,
    outer: &Outer,
) {
    let at = template.overhead();
    let tag = if meta.vlan.is_some() { 4 } else { 0 };
    let gso = meta.vnet.is_gso();
    let outer_meta = PacketMeta {
        vnet: if gso {
            meta.vnet.shifted((at + tag) as u16)
        } else {
            VnetHdr::default()
        },
        vlan: None,
        tunnel: Default::default(),
    };
    let sent = inject.send_with(outer_meta, |buf| {
        let n = copy_frame(buf.get_mut(at..)?, data, meta.vlan)?;
        if !gso {
            let inner_vnet = meta.vnet.shifted(tag as u16);
            complete_checksum(&mut buf[at..at + n], &inner_vnet).ok()?;
        }
        let option = outer.option.as_ref().map(|b| &b[..]);
        let len = template.finish_keyed(buf, n, outer.sport, outer.ip_id, outer.vni, option)?;
        if let Some((tos, ttl)) = outer.tos_ttl {
            template.set_tos_ttl(&mut buf[..len], tos, ttl)?;
        }
        Some(len)
    });
    // A full underlay is counted as the tunnels' drop, not this port's error.
    match sent {
        Ok(()) => {}
        Err(StageError::QueueFull) => world.count_drop(TunnelDrop::UnderlayFull),
        Err(StageError::TooBig) => world.count_drop(TunnelDrop::InnerTooBig),
    }
}

/// The outer TOS and TTL for a port with `tos=inherit` or `ttl=inherit`: the inner
/// IP header's where inherited (Open vSwitch's defaults, 0 and 64, for a frame that
/// is not IP), the port's own otherwise; `None` when neither is inherited.
fn inherited_tos_ttl(config: &TunnelConfig, data: &[u8]) -> Option<(u8, u8)> {
    if !matches!(config.tos, Inherit::Inherit) && !matches!(config.ttl, Inherit::Inherit) {
        return None;
    }
    let (inner_tos, inner_ttl) = inner_tos_ttl(data).unwrap_or((0, 64));
    Some((
        config.tos.or_inner(inner_tos),
        config.ttl.or_inner(inner_ttl),
    ))
}

/// Asks the underlay for `next_hop`'s MAC (an ARP request from the bridge, or over
/// IPv6 a neighbour solicitation), at most once every [`ASK_INTERVAL_MS`] for each
/// remote end (`asked_ms`: when last).
fn ask(asked_ms: &mut Option<u64>, bridge: &BridgeEnd, src: IpAddr, next_hop: IpAddr) {
    let now = vsw_datapath::clock::now_ms();
    if asked_ms.is_some_and(|then| now.saturating_sub(then) < ASK_INTERVAL_MS) {
        return;
    }
    *asked_ms = Some(now);
    let _ = bridge
        .inject
        .send_with(PacketMeta::default(), |buf| match (src, next_hop) {
            (IpAddr::V4(spa), IpAddr::V4(tpa)) => arp_request(buf, bridge.mac, spa, tpa),
            (IpAddr::V6(spa), IpAddr::V6(tpa)) => neighbour_solicitation(buf, bridge.mac, spa, tpa),
            _ => None,
        });
}

impl TxQueue for TunnelTx {
    /// Super-frames cross whole (encapsulated as one, the underlay bridge cuts them
    /// into outer packets, or hands them on whole where a port takes them so); other
    /// frames have their checksums finished here. The inner MTU is what a 1,500-byte
    /// underlay leaves. Segments are never merged for it: they leave the host, and a
    /// peer switch gets what the sender sent (one that reads its underlay through a
    /// packet socket, as Open vSwitch's userspace datapath, takes no super-frame).
    fn offloads(&self) -> TxOffloads {
        TxOffloads {
            csum: true,
            tso: true,
            merges: false,
            tunnel_tso: false,
            mtu: inner_mtu(&self.tx.config),
        }
    }

    fn stage(&mut self, data: &[u8], meta: &PacketMeta) -> Result<(), StageError> {
        let w = &*self.world;
        let snap = w.snapshot();
        let Some(remote) = self.tx.remote(meta) else {
            // `remote_ip=flow` and no rule said where to.
            w.count_drop(TunnelDrop::NoTunnelDestination);
            return Ok(());
        };
        let way = self.tx.way_to(&snap, remote);
        match &mut self.tx.remotes[way].1 {
            Resolved::Ready {
                template,
                with_metadata,
                inject,
            } => {
                // A rule gave the packet tun_metadata0: the template with its option.
                let (template, option) = match with_metadata {
                    Some(t) if meta.tunnel.metadata0 != 0 => {
                        (&*t, Some(meta.tunnel.metadata0.to_be_bytes()))
                    }
                    _ => (&*template, None),
                };
                let sport = udp_source_port(flow_hash(data));
                // `key=flow`: the ID the rules set (`set_field:…->tun_id`).
                let vni = (self.tx.config.key == FromFlow::Flow).then_some(meta.tunnel.id as u32);
                let mut outer = Outer {
                    sport,
                    ip_id: 0,
                    vni,
                    tos_ttl: inherited_tos_ttl(&self.tx.config, data),
                    option,
                };
                let tag = if meta.vlan.is_some() { 4 } else { 0 };
                let fits = data.len() + tag <= template.inner_frame_max(usize::from(u16::MAX));
                if fits || !meta.vnet.is_gso() {
                    self.tx.ip_id = self.tx.ip_id.wrapping_add(1);
                    outer.ip_id = self.tx.ip_id;
                    encapsulate(w, template, inject, data, meta, &outer);
                } else {
                    // A 64 KiB super-frame and the outer headers would pass IP's
                    // largest packet: sent as two (or more) smaller ones.
                    let max_ip = template.inner_frame_max(usize::from(u16::MAX))
                        - tag
                        - vsw_packet::ethernet::ETH_HDR_LEN;
                    let ip_id = &mut self.tx.ip_id;
                    let split = vsw_packet::gso::split_super_frame(
                        data,
                        usize::from(meta.vnet.gso_size),
                        max_ip,
                        &mut self.tx.split,
                        |part| {
                            *ip_id = ip_id.wrapping_add(1);
                            outer.ip_id = *ip_id;
                            encapsulate(w, template, inject, part, meta, &outer);
                        },
                    );
                    if split.is_err() {
                        w.count_drop(TunnelDrop::InnerTooBig);
                    }
                }
            }
            Resolved::Dropped(why) => w.count_drop(*why),
            Resolved::Unknown {
                bridge,
                src,
                next_hop,
                asked_ms,
            } => {
                w.count_drop(TunnelDrop::NeighbourUnknown);
                ask(asked_ms, bridge, *src, *next_hop);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A tunnel takes super-frames whole, but its frames leave the host: a sender's
    /// segments are never merged for it (a peer switch gets what was sent).
    #[test]
    fn a_tunnel_port_takes_super_frames_but_never_merged_ones() {
        let options = [("remote_ip".to_string(), "198.18.0.1".to_string())].into();
        let config = TunnelConfig::parse(TunnelKind::Geneve, &options).unwrap();
        let o = TunnelTx::new(TunnelWorld::new(), &config, Arc::from("br-int")).offloads();
        assert!(o.tso && o.csum && !o.merges, "{o:?}");
    }
}
