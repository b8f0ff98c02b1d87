//! The tunnels' state: routes, neighbours, underlay bridges and tunnel ports, as a
//! snapshot translation reads (`TunnelEgress`: the way out of a tunnel port, what
//! a LOCAL port's packet pops to, the neighbours it tells of), rebuilt by the
//! control side. One per datapath (vswd's `Dpif` holds it), handed to every tunnel
//! port and LOCAL port it opens (`ClassEnv::tunnels`) and to translation.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use arc_swap::{ArcSwap, ArcSwapOption};
use crossbeam_queue::ArrayQueue;
use vsw_packet::tunnel::{DecapError, PacketTypeMode, TunnelKind, TunnelPorts};
use vsw_packet::MacAddr;
use vsw_tunnel::config::{FromFlow, TunnelConfig};
use vsw_tunnel::metadata::MetadataOption;
use vsw_tunnel::neigh::{neighbour_for, Learned, NeighbourTable};
use vsw_tunnel::route::RouteTable;

use super::neighbour_ask::{NeighbourAsk, NeighbourAsks, ASK_INTERVAL_MS};

/// Why tunnel traffic was dropped, each counted: the decapsulation's reasons, then
/// the encapsulation's. Counted by index (`as usize`), named by [`TunnelDrop::name`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TunnelDrop {
    Truncated,
    Fragment,
    BadIpChecksum,
    BadUdpChecksum,
    VxlanNoVni,
    GeneveNotEthernet,
    UnknownCriticalOption,
    InnerTooShort,
    GpeNotCarried,
    NoRoute,
    RouteNotABridge,
    NoSourceAddress,
    NeighbourUnknown,
    NoTunnelDestination,
    UnknownVni,
    /// A popped packet whose VNI's port takes no packet of its layer (IP or NSH
    /// without Ethernet to an Ethernet-only port, or the reverse).
    PacketTypeNotTaken,
    /// A push the datapath could not make (no room in front of the frame, a
    /// super-frame that cannot be cut): the tunnel port's queue drops it.
    NotPushed,
}

impl TunnelDrop {
    /// Every reason, in counting order.
    pub const ALL: [TunnelDrop; 17] = [
        TunnelDrop::Truncated,
        TunnelDrop::Fragment,
        TunnelDrop::BadIpChecksum,
        TunnelDrop::BadUdpChecksum,
        TunnelDrop::VxlanNoVni,
        TunnelDrop::GeneveNotEthernet,
        TunnelDrop::UnknownCriticalOption,
        TunnelDrop::InnerTooShort,
        TunnelDrop::GpeNotCarried,
        TunnelDrop::NoRoute,
        TunnelDrop::RouteNotABridge,
        TunnelDrop::NoSourceAddress,
        TunnelDrop::NeighbourUnknown,
        TunnelDrop::NoTunnelDestination,
        TunnelDrop::UnknownVni,
        TunnelDrop::PacketTypeNotTaken,
        TunnelDrop::NotPushed,
    ];

    /// The reason as counters and metrics name it.
    pub fn name(self) -> &'static str {
        match self {
            TunnelDrop::Truncated => "truncated",
            TunnelDrop::Fragment => "fragment",
            TunnelDrop::BadIpChecksum => "bad_ip_checksum",
            TunnelDrop::BadUdpChecksum => "bad_udp_checksum",
            TunnelDrop::VxlanNoVni => "vxlan_no_vni",
            TunnelDrop::GeneveNotEthernet => "geneve_not_ethernet",
            TunnelDrop::UnknownCriticalOption => "unknown_critical_option",
            TunnelDrop::InnerTooShort => "inner_too_short",
            TunnelDrop::GpeNotCarried => "gpe_not_carried",
            TunnelDrop::NoRoute => "no_route",
            TunnelDrop::RouteNotABridge => "route_not_a_bridge",
            TunnelDrop::NoSourceAddress => "no_source_address",
            TunnelDrop::NeighbourUnknown => "neighbour_unknown",
            TunnelDrop::NoTunnelDestination => "no_tunnel_destination",
            TunnelDrop::UnknownVni => "unknown_vni",
            TunnelDrop::PacketTypeNotTaken => "packet_type_not_taken",
            TunnelDrop::NotPushed => "not_pushed",
        }
    }

    /// Why decapsulation refused a packet; `None` for one that is no tunnel packet
    /// (not a drop: it goes to the host).
    pub fn of_decap(e: &DecapError) -> Option<TunnelDrop> {
        Some(match e {
            DecapError::NotTunnel => return None,
            DecapError::Truncated(_) => TunnelDrop::Truncated,
            DecapError::Fragment => TunnelDrop::Fragment,
            DecapError::BadIpChecksum => TunnelDrop::BadIpChecksum,
            DecapError::BadUdpChecksum => TunnelDrop::BadUdpChecksum,
            DecapError::VxlanNoVni => TunnelDrop::VxlanNoVni,
            DecapError::GeneveNotEthernet => TunnelDrop::GeneveNotEthernet,
            DecapError::UnknownCriticalOption => TunnelDrop::UnknownCriticalOption,
            DecapError::InnerTooShort => TunnelDrop::InnerTooShort,
            DecapError::GpeNotCarried => TunnelDrop::GpeNotCarried,
        })
    }
}

/// An underlay bridge as tunnels reach it: its MAC (the outer headers' source).
#[derive(Clone)]
pub(crate) struct BridgeEnd {
    pub mac: MacAddr,
    /// Its own addresses (set when the snapshot is made, from the routes): only
    /// ARP and neighbour discovery addressed to them teach its neighbour table.
    pub addresses: Vec<IpAddr>,
}

/// Which opening of a tunnel port or underlay bridge holds its name. A device is
/// reopened by opening the new one before the old one is closed (so a failure changes
/// nothing): the old one's close must not take the new one's place away.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Registration(u64);

/// An open tunnel port: what it is.
#[derive(Clone)]
pub(crate) struct PortEnd {
    pub config: TunnelConfig,
    /// The bridge the port is on: its TLV map reads the port's Geneve options.
    pub bridge: Arc<str>,
    /// The Geneve option that bridge's TLV map names `tun_metadata0` (set when the
    /// snapshot is made).
    pub metadata0: Option<MetadataOption>,
}

/// What translation reads (and its neighbour asks and snooping).
pub(crate) struct Snapshot {
    pub routes: Arc<RouteTable>,
    /// A persistent map: the snapshot's copy shares the control side's.
    pub neigh: NeighbourTable,
    pub bridges: BTreeMap<String, BridgeEnd>,
    /// The open tunnel ports.
    pub ports: Vec<PortEnd>,
    /// Each port's name, in the order of `ports`.
    pub names: Vec<String>,
    /// Where each port's name is in `ports`.
    pub by_name: std::collections::HashMap<String, usize>,
    /// The UDP ports tunnel packets arrive on.
    pub listen: TunnelPorts,
}

impl Snapshot {
    /// Whether `p` takes packets of `kind` from `src`.
    fn from_remote(p: &PortEnd, kind: TunnelKind, src: IpAddr) -> bool {
        p.config.kind == kind
            && match p.config.remote {
                FromFlow::Fixed(r) => r == src,
                FromFlow::Flow => true,
            }
    }

    /// The port a packet of `kind` from `src` with VNI `vni` is for: the first that
    /// takes all three (ports in name order) and what it carries (`l3`: a packet
    /// without Ethernet, which only VXLAN-GPE carries) — as Open vSwitch, a legacy
    /// port of that layer before a packet-type-aware one.
    pub(crate) fn port_for(
        &self,
        kind: TunnelKind,
        src: IpAddr,
        vni: u32,
        l3: bool,
    ) -> Option<usize> {
        let legacy = if l3 {
            PacketTypeMode::LegacyL3
        } else {
            PacketTypeMode::LegacyL2
        };
        [legacy, PacketTypeMode::Ptap].into_iter().find_map(|mode| {
            self.ports.iter().position(|p| {
                p.config.packet_type == mode
                    && (p.config.gpe || !l3)
                    && Snapshot::from_remote(p, kind, src)
                    && match p.config.key {
                        FromFlow::Fixed(k) => k == vni,
                        FromFlow::Flow => true,
                    }
            })
        })
    }
}

#[derive(Default)]
struct State {
    routes: Arc<RouteTable>,
    neigh: NeighbourTable,
    bridges: BTreeMap<String, BridgeEnd>,
    ports: BTreeMap<String, PortEnd>,
    /// Who holds each name of `bridges` and `ports`.
    owners: BTreeMap<String, Registration>,
    registrations: u64,
    /// Each bridge's TLV map (Open vSwitch keeps one per bridge): a peer of one
    /// bridge cannot change what another's tunnels read.
    metadata0: BTreeMap<String, MetadataOption>,
}

impl State {
    fn register(&mut self, name: &str) -> Registration {
        self.registrations += 1;
        let r = Registration(self.registrations);
        self.owners.insert(name.to_string(), r);
        r
    }

    /// Whether `r` still holds `name` (then it no longer does).
    fn release(&mut self, name: &str, r: Registration) -> bool {
        let held = self.owners.get(name) == Some(&r);
        if held {
            self.owners.remove(name);
        }
        held
    }
}

pub struct TunnelWorld {
    snapshot: ArcSwap<Snapshot>,
    state: Mutex<State>,
    /// Neighbours PMDs saw: (address, MAC, bridge).
    learned: ArrayQueue<(IpAddr, MacAddr, Arc<str>)>,
    drops: [AtomicU64; TunnelDrop::ALL.len()],
    /// Told of every new snapshot (false: it is gone, forget it).
    watchers: Mutex<Vec<Watcher>>,
    /// What datapaths' `TunnelPop` refused, counted there (added to `drops`).
    datapath_drops: Mutex<Vec<Arc<vsw_datapath::tunnel_pop::DecapDrops>>>,
    /// Next hops translations met without a MAC (taken only then, and by the
    /// asker), and the thread that sends the asks, woken when one is due.
    asks: Mutex<NeighbourAsks>,
    asker: ArcSwapOption<std::thread::Thread>,
    /// IPv6 remote ends as natively popped packets' receive points number them
    /// (`tunnel_pop::RECEIVE6_BASE`): never renumbered, at most
    /// `tunnel_pop::MAX_REMOTES6`.
    remotes6: Mutex<Vec<std::net::Ipv6Addr>>,
}

/// What a new snapshot is told to (a slow path whose flows send through tunnels).
pub type Watcher = Box<dyn Fn() -> bool + Send>;

impl std::fmt::Debug for TunnelWorld {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let snap = self.snapshot();
        f.debug_struct("TunnelWorld")
            .field("ports", &snap.ports.len())
            .field("bridges", &snap.bridges.len())
            .finish()
    }
}

impl TunnelWorld {
    /// A datapath's tunnel state, empty: what its tunnel ports, its underlay
    /// bridges' LOCAL ports, its translation and the control side share.
    pub fn new() -> Arc<TunnelWorld> {
        Arc::new(TunnelWorld {
            snapshot: ArcSwap::from_pointee(Snapshot {
                routes: Arc::default(),
                neigh: NeighbourTable::default(),
                bridges: BTreeMap::new(),
                ports: Vec::new(),
                names: Vec::new(),
                by_name: Default::default(),
                listen: TunnelPorts::default(),
            }),
            state: Mutex::new(State::default()),
            learned: ArrayQueue::new(4096),
            drops: TunnelDrop::ALL.map(|_| AtomicU64::new(0)),
            watchers: Mutex::new(Vec::new()),
            datapath_drops: Mutex::new(Vec::new()),
            asks: Mutex::new(NeighbourAsks::default()),
            asker: ArcSwapOption::empty(),
            remotes6: Mutex::new(Vec::new()),
        })
    }
}

impl TunnelWorld {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Publishes the state as a new snapshot.
    fn publish(&self, s: &mut State) {
        let mut listen = TunnelPorts::default();
        for p in s.ports.values() {
            match p.config.kind {
                vsw_packet::tunnel::TunnelKind::Vxlan => {
                    listen.vxlan.get_or_insert(p.config.dst_port);
                }
                vsw_packet::tunnel::TunnelKind::Geneve => {
                    listen.geneve.get_or_insert(p.config.dst_port);
                }
            }
        }
        self.snapshot.store(Arc::new(Snapshot {
            routes: s.routes.clone(),
            neigh: s.neigh.clone(),
            bridges: s
                .bridges
                .iter()
                .map(|(name, end)| {
                    let end = BridgeEnd {
                        addresses: s.routes.addresses_of(name),
                        ..end.clone()
                    };
                    (name.clone(), end)
                })
                .collect(),
            ports: s
                .ports
                .values()
                .map(|p| PortEnd {
                    metadata0: s.metadata0.get(&*p.bridge).copied(),
                    ..p.clone()
                })
                .collect(),
            names: s.ports.keys().cloned().collect(),
            by_name: s
                .ports
                .keys()
                .enumerate()
                .map(|(i, n)| (n.clone(), i))
                .collect(),
            listen,
        }));
        self.tell_watchers();
    }

    fn tell_watchers(&self) {
        self.watchers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|w| w());
    }

    /// The number of IPv6 remote end `addr` (given it the first time; `None` when
    /// all are given).
    fn remote6_number(&self, addr: std::net::Ipv6Addr) -> Option<u32> {
        let mut r = self.remotes6.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(i) = r.iter().position(|a| *a == addr) {
            return Some(i as u32);
        }
        if r.len() as u32 >= vsw_datapath::tunnel_pop::MAX_REMOTES6 {
            return None;
        }
        r.push(addr);
        Some(r.len() as u32 - 1)
    }

    /// The IPv6 remote end numbered `i`.
    fn remote6(&self, i: u32) -> Option<std::net::Ipv6Addr> {
        let r = self.remotes6.lock().unwrap_or_else(PoisonError::into_inner);
        r.get(i as usize).copied()
    }

    /// A translation needs `next_hop`'s MAC on `bridge` (MAC `mac`, address `src`):
    /// asked for by the asker ([`TunnelWorld::next_asks`]), woken if it is due.
    fn want_neighbour(&self, bridge: &str, mac: MacAddr, src: IpAddr, next_hop: IpAddr) {
        let now = vsw_datapath::clock::now_ms();
        let due = self
            .asks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .want(bridge, mac, src, next_hop, now);
        if due {
            if let Some(asker) = &*self.asker.load() {
                asker.unpark();
            }
        }
    }

    /// The neighbour requests due now (ARP, neighbour solicitations), for the
    /// caller to send through each bridge as from its LOCAL port; waits up to `wait`
    /// for one (the caller becomes the thread woken when one is due). Next hops
    /// forgotten after their tries re-translate the flows that wanted them.
    pub fn next_asks(&self, wait: std::time::Duration) -> Vec<NeighbourAsk> {
        let me = std::thread::current();
        if self.asker.load().as_deref().map(std::thread::Thread::id) != Some(me.id()) {
            self.asker.store(Some(Arc::new(me)));
        }
        let mut parked = false;
        loop {
            let snap = self.snapshot();
            let (due, any) = {
                let mut asks = self.asks.lock().unwrap_or_else(PoisonError::into_inner);
                let due = asks.due(vsw_datapath::clock::now_ms(), |bridge, ip| {
                    snap.neigh.lookup(bridge, ip).is_some()
                });
                (due, asks.any())
            };
            if due.forgot {
                self.tell_watchers();
            }
            if !due.asks.is_empty() || parked {
                return due.asks;
            }
            // Tries still to come: looked at again when the next may be due.
            let nap = if any {
                wait.min(std::time::Duration::from_millis(ASK_INTERVAL_MS))
            } else {
                wait
            };
            std::thread::park_timeout(nap);
            parked = true;
        }
    }

    /// Calls `watcher` after every change of what tunnels read, until it returns
    /// false.
    pub fn watch(&self, watcher: Watcher) {
        self.watchers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(watcher);
    }

    /// The Geneve option `tun_metadata0` stands for on `bridge` from now on
    /// (`None`: none): what that bridge's Geneve ports send and read. A packet is
    /// decapsulated on the underlay bridge by the map of the bridge its tunnel port
    /// is on.
    pub fn set_metadata0(&self, bridge: &str, option: Option<MetadataOption>) {
        let mut s = self.state();
        let changed = match option {
            Some(o) => s.metadata0.insert(bridge.to_string(), o) != Some(o),
            None => s.metadata0.remove(bridge).is_some(),
        };
        if changed {
            self.publish(&mut s);
        }
    }

    /// What `bridge`'s TLV map names `tun_metadata0`.
    pub fn metadata0(&self, bridge: &str) -> Option<MetadataOption> {
        self.state().metadata0.get(bridge).copied()
    }

    pub(crate) fn snapshot(&self) -> arc_swap::Guard<Arc<Snapshot>> {
        self.snapshot.load()
    }

    pub(crate) fn register_bridge(&self, name: &str, end: BridgeEnd) -> Registration {
        let mut s = self.state();
        s.bridges.insert(name.to_string(), end);
        let r = s.register(name);
        self.publish(&mut s);
        r
    }

    /// Reads the underlay bridges' MACs again (an operator may change one with `ip
    /// link set … address`): tunnel packets leave from the MAC the host's stack
    /// answers ARP with. Whether one changed.
    pub fn refresh_bridge_macs(&self) -> bool {
        let mut s = self.state();
        let mut changed = false;
        for (name, end) in s.bridges.iter_mut() {
            if let Some(mac) = crate::interface::mac(name).filter(|m| *m != end.mac) {
                end.mac = mac;
                changed = true;
            }
        }
        if changed {
            self.publish(&mut s);
        }
        changed
    }

    pub(crate) fn unregister_bridge(&self, name: &str, r: Registration) {
        let mut s = self.state();
        if s.release(name, r) && s.bridges.remove(name).is_some() {
            self.publish(&mut s);
        }
    }

    pub(crate) fn register_port(&self, name: &str, end: PortEnd) -> Registration {
        let mut s = self.state();
        s.ports.insert(name.to_string(), end);
        let r = s.register(name);
        self.publish(&mut s);
        r
    }

    pub(crate) fn unregister_port(&self, name: &str, r: Registration) {
        let mut s = self.state();
        if s.release(name, r) && s.ports.remove(name).is_some() {
            self.publish(&mut s);
        }
    }

    /// A neighbour a PMD saw (no lock: queued for the control side).
    pub(crate) fn saw_neighbour(&self, ip: IpAddr, mac: MacAddr, bridge: &Arc<str>) {
        let _ = self.learned.push((ip, mac, bridge.clone()));
    }

    pub(crate) fn count_drop(&self, reason: TunnelDrop) {
        self.drops[reason as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// Counts what datapath `drops` (its `TunnelPop`s refused) among the tunnels'
    /// drops.
    pub fn count_datapath_drops(&self, drops: Arc<vsw_datapath::tunnel_pop::DecapDrops>) {
        self.datapath_drops
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(drops);
    }

    /// Tunnel drops by reason, as [`TunnelDrop::name`] names them: the tunnel
    /// ports' and LOCAL ports' own, and the datapaths' decapsulations.
    pub fn drops(&self) -> Vec<(&'static str, u64)> {
        let mut counts: Vec<u64> = self
            .drops
            .iter()
            .map(|n| n.load(Ordering::Relaxed))
            .collect();
        for d in self
            .datapath_drops
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
        {
            for (e, n) in d.counts() {
                if let Some(r) = TunnelDrop::of_decap(&e) {
                    counts[r as usize] += n;
                }
            }
        }
        TunnelDrop::ALL
            .iter()
            .zip(counts)
            .map(|(r, n)| (r.name(), n))
            .collect()
    }

    /// The underlay routes, as the control side read them (it calls this when they
    /// changed: a table of 200,000 routes is not compared here).
    pub fn set_routes(&self, routes: Arc<RouteTable>) {
        let mut s = self.state();
        s.routes = routes;
        self.publish(&mut s);
    }

    /// Takes in the neighbours PMDs saw, and ages the table; whether readers see it
    /// changed (a neighbour seen again with the MAC it had changes nothing they
    /// read). A neighbour is learned only on the bridge the route to it leaves by,
    /// with no gateway between; the next hops of the tunnel ports' remotes are
    /// never evicted to make room.
    pub fn absorb_neighbours(&self, now_ms: u64) -> bool {
        let mut s = self.state();
        let mut changed = false;
        if !self.learned.is_empty() {
            let needed: Vec<(String, IpAddr)> = s
                .ports
                .values()
                .filter_map(|p| match p.config.remote {
                    vsw_tunnel::config::FromFlow::Fixed(r) => s
                        .routes
                        .lookup(r)
                        .map(|route| (route.dev.clone(), route.gateway.unwrap_or(r))),
                    vsw_tunnel::config::FromFlow::Flow => None,
                })
                .collect();
            let is_needed =
                |b: &str, ip: IpAddr| needed.iter().any(|(nb, nip)| nb == b && *nip == ip);
            while let Some((ip, mac, bridge)) = self.learned.pop() {
                if !s.routes.is_neighbour_of(ip, &bridge) {
                    continue;
                }
                let State { neigh, .. } = &mut *s;
                changed |= neigh.learn(&bridge, ip, mac, now_ms, is_needed) == Learned::Changed;
            }
        }
        changed |= s.neigh.expire(now_ms);
        if changed {
            self.publish(&mut s);
        }
        changed
    }

    pub fn neighbours_show(&self) -> String {
        self.state().neigh.show()
    }

    pub fn neighbours_flush(&self) {
        let mut s = self.state();
        s.neigh.flush(None);
        self.publish(&mut s);
    }

    pub fn neighbour_set(&self, ip: IpAddr, mac: MacAddr, bridge: &str) {
        let mut s = self.state();
        s.neigh.set(ip, mac, bridge);
        self.publish(&mut s);
    }

    /// `tnl/ports/show`: the open tunnel ports.
    pub fn ports_show(&self) -> String {
        let s = self.state();
        let mut o = String::from("Listening ports:\n");
        for (name, p) in &s.ports {
            let kind = match p.config.kind {
                vsw_packet::tunnel::TunnelKind::Vxlan => "vxlan",
                vsw_packet::tunnel::TunnelKind::Geneve => "geneve",
            };
            // VXLAN-GPE and a packet type mode other than the default, as Open
            // vSwitch's `tnl/ports/show -v` names them.
            let gpe = if p.config.gpe { ", gpe" } else { "" };
            let mode = match p.config.packet_type {
                PacketTypeMode::LegacyL2 => String::new(),
                m => format!(", {}", m.name()),
            };
            o.push_str(&format!(
                "{name} ({}) {kind}_sys_{}{gpe}{mode}\n",
                p.config.dst_port, p.config.dst_port
            ));
        }
        // What was dropped, by reason (malformed tunnel packets, unknown next hops).
        let drops: Vec<String> = self
            .drops()
            .into_iter()
            .filter(|(_, n)| *n > 0)
            .map(|(r, n)| format!("{r}={n}"))
            .collect();
        if !drops.is_empty() {
            o.push_str(&format!("Drops: {}\n", drops.join(" ")));
        }
        o
    }
}

/// What translation asks of the tunnels (native push and pop), answered from the
/// snapshot.
impl vsw_datapath::TunnelEgress for TunnelWorld {
    /// ARP and neighbour discovery an underlay bridge sends to its LOCAL port,
    /// addressed to its own addresses, teach its neighbour table; every field that
    /// decides it is
    /// matched, so each neighbour's message is a flow of its own, seen when it
    /// passes.
    fn snoop(
        &self,
        bridge: &str,
        key: &vsw_packet::FlowKey,
        mask: &mut vsw_packet::FlowKey,
        passing: bool,
    ) {
        let snap = self.snapshot();
        let Some(end) = snap.bridges.get(bridge) else {
            return;
        };
        mask.dl_type = u16::MAX;
        match key.dl_type {
            vsw_packet::EtherType::ARP => {}
            vsw_packet::EtherType::IPV6 => {
                mask.nw_proto = u8::MAX;
                if key.nw_proto != vsw_packet::wire::ip::IPPROTO_ICMPV6 {
                    return;
                }
                mask.tp_src = u16::MAX;
                mask.nd_target = u128::MAX;
                mask.arp_tha = MacAddr([0xff; 6]);
            }
            _ => return,
        }
        mask.nw_proto = u8::MAX;
        mask.nw_src = u128::MAX;
        mask.nw_dst = u128::MAX;
        mask.arp_sha = MacAddr([0xff; 6]);
        if passing {
            if let Some((ip, mac)) = neighbour_for(key, &end.addresses) {
                self.saw_neighbour(ip, mac, &Arc::from(bridge));
            }
        }
    }

    /// Whether a packet (`key`) bridge `bridge` sends to its LOCAL port is one a
    /// tunnel port takes, decapsulated in the datapath: what to take off. By the
    /// outer packet's fields: IPv4 or IPv6, UDP to a port tunnels listen on, from the
    /// remote end of a port of that kind (over IPv4 or IPv6: an IPv6 one comes in on
    /// a receive point of its own). For Geneve, the options the bridges of the
    /// ports with that remote end name `tun_metadata0`: the datapath reads the
    /// value before it knows the port (a third bridge's different option for one
    /// remote end is not read). `None` for the rest.
    fn terminates(
        &self,
        bridge: &str,
        key: &vsw_packet::FlowKey,
        mask: &mut vsw_packet::FlowKey,
    ) -> Option<vsw_datapath::tunnel_pop::Pop> {
        use vsw_packet::tunnel::TunnelKind;
        let snap = self.snapshot();
        if snap.ports.is_empty() || !snap.bridges.contains_key(bridge) {
            return None;
        }
        mask.dl_type = u16::MAX;
        if !matches!(
            key.dl_type,
            vsw_packet::EtherType::IPV4 | vsw_packet::EtherType::IPV6
        ) {
            return None;
        }
        mask.nw_proto = u8::MAX;
        if key.nw_proto != vsw_packet::wire::ip::IPPROTO_UDP {
            return None;
        }
        mask.tp_dst = u16::MAX;
        let kind = if snap.listen.vxlan == Some(key.tp_dst) {
            TunnelKind::Vxlan
        } else if snap.listen.geneve == Some(key.tp_dst) {
            TunnelKind::Geneve
        } else {
            return None;
        };
        mask.nw_src = u128::MAX;
        let src = if key.dl_type == vsw_packet::EtherType::IPV4 {
            IpAddr::V4(std::net::Ipv4Addr::from(key.nw_src as u32))
        } else {
            IpAddr::V6(std::net::Ipv6Addr::from(key.nw_src))
        };
        let mut ports = snap
            .ports
            .iter()
            .filter(|p| Snapshot::from_remote(p, kind, src))
            .peekable();
        // No port of this kind has that remote end: the host's own.
        ports.peek()?;
        let geneve = kind == TunnelKind::Geneve;
        // Geneve: the options the bridges of the ports this remote end may be for
        // name `tun_metadata0` (the datapath reads the value before it knows the
        // port): at most two different ones are read, whichever the packet carries.
        let mut options = ports
            .filter_map(|p| p.metadata0)
            .map(|m| (m.class, m.kind))
            .filter(|_| geneve);
        let option = options.next();
        let other_option = options.find(|o| Some(*o) != option);
        // An IPv6 remote end comes in on a receive point of its own (the key's
        // tunnel addresses are IPv4).
        let remote6 = match src {
            IpAddr::V4(_) => None,
            IpAddr::V6(a) => Some(self.remote6_number(a)?),
        };
        Some(vsw_datapath::tunnel_pop::Pop {
            geneve,
            udp_port: key.tp_dst,
            option,
            other_option,
            receive: vsw_datapath::tunnel_pop::receive_point_of(geneve, remote6),
        })
    }

    /// The tunnel port a packet decapsulated in the datapath is for (`key`: its
    /// tunnel): of this kind, from its remote end, with its VNI. The fields read are set in `mask`. A VNI no
    /// port has is counted (`unknown_vni`) when a packet is `passing`.
    fn receiving_port(
        &self,
        point: vsw_datapath::tunnel_pop::ReceivePoint,
        key: &vsw_packet::FlowKey,
        mask: &mut vsw_packet::FlowKey,
        passing: bool,
    ) -> Option<(String, PacketTypeMode)> {
        let kind = if point.geneve {
            vsw_packet::tunnel::TunnelKind::Geneve
        } else {
            vsw_packet::tunnel::TunnelKind::Vxlan
        };
        mask.tun_id = u64::MAX;
        // An IPv6 remote end: the receive point says which (in_port is always
        // matched exactly); an IPv4 one is in the key.
        let src = match vsw_datapath::tunnel_pop::remote6_of(key.in_port) {
            Some(i) => IpAddr::V6(self.remote6(i)?),
            None => {
                mask.tun_src = u32::MAX;
                IpAddr::V4(std::net::Ipv4Addr::from(key.tun_src))
            }
        };
        let snap = self.snapshot();
        match snap.port_for(kind, src, key.tun_id as u32, point.l3) {
            // The key's tunnel ID is the VNI (24 bits): no other is any port's.
            Some(i) if key.tun_id <= 0x00ff_ffff => {
                let mode = snap.ports.get(i)?.config.packet_type;
                snap.names.get(i).map(|n| (n.clone(), mode))
            }
            _ => {
                if passing {
                    // A port of that VNI that takes the other layer only (an
                    // Ethernet-only port, a GPE packet of IP; or the reverse).
                    let other = snap.port_for(kind, src, key.tun_id as u32, !point.l3);
                    self.count_drop(if other.is_some() && key.tun_id <= 0x00ff_ffff {
                        TunnelDrop::PacketTypeNotTaken
                    } else {
                        TunnelDrop::UnknownVni
                    });
                }
                None
            }
        }
    }

    fn packet_type_mode(&self, port: &str) -> PacketTypeMode {
        let snap = self.snapshot();
        snap.by_name
            .get(port)
            .and_then(|&i| snap.ports.get(i))
            .map_or(PacketTypeMode::LegacyL2, |p| p.config.packet_type)
    }

    /// The outer headers of a packet (`key`) leaving by tunnel port `port`, and the
    /// underlay bridge they enter, as the snapshot says now: the way the port's
    /// queue would send it (`port.rs`). The key's fields read are set in `mask`.
    /// No way now (no route, no source address, no destination from the flow, the
    /// next hop's MAC not known: asked for): dropped, counted when a packet is
    /// `passing`. To the port's queue: a port the snapshot does not have yet.
    /// `tos`/`ttl=inherit` read the inner packet's (Open vSwitch's defaults, 0 and
    /// 64, for one that is not IP), which the flow then matches exactly, as Open
    /// vSwitch's does.
    fn way_out(
        &self,
        port: &str,
        key: &vsw_packet::FlowKey,
        l3: Option<u16>,
        mask: &mut vsw_packet::FlowKey,
        passing: bool,
    ) -> Result<vsw_datapath::TunnelWay, vsw_datapath::NoWay> {
        use vsw_datapath::NoWay;
        use vsw_tunnel::config::{FromFlow, Inherit};
        let snap = self.snapshot();
        let p = snap
            .by_name
            .get(port)
            .and_then(|&i| snap.ports.get(i))
            .ok_or(NoWay::ByQueue)?;
        let c = &p.config;
        let gpe = gpe_next_protocol(c, key, l3, mask)?;
        let (inherit_tos, inherit_ttl) = (
            matches!(c.tos, Inherit::Inherit),
            matches!(c.ttl, Inherit::Inherit),
        );
        let (inner_tos, inner_ttl) = if inherit_tos || inherit_ttl {
            use vsw_packet::EtherType;
            mask.dl_type = u16::MAX;
            if matches!(key.dl_type, EtherType::IPV4 | EtherType::IPV6) {
                mask.nw_tos |= if inherit_tos { u8::MAX } else { 0 };
                mask.nw_ttl |= if inherit_ttl { u8::MAX } else { 0 };
                (key.nw_tos, key.nw_ttl)
            } else {
                (0, 64)
            }
        } else {
            (0, 64)
        };
        let dropped = |why: TunnelDrop| {
            if passing {
                self.count_drop(why);
            }
            NoWay::Dropped
        };
        let remote = match c.remote {
            FromFlow::Fixed(r) => r,
            FromFlow::Flow => {
                mask.tun_dst = u32::MAX;
                if key.tun_dst == 0 {
                    return Err(dropped(TunnelDrop::NoTunnelDestination));
                }
                IpAddr::V4(std::net::Ipv4Addr::from(key.tun_dst))
            }
        };
        let route = snap
            .routes
            .lookup(remote)
            .ok_or_else(|| dropped(TunnelDrop::NoRoute))?;
        let bridge = snap
            .bridges
            .get(&route.dev)
            .ok_or_else(|| dropped(TunnelDrop::RouteNotABridge))?;
        let src = match c.local {
            Some(FromFlow::Fixed(l)) => l,
            _ => snap
                .routes
                .source_for(route)
                .ok_or_else(|| dropped(TunnelDrop::NoSourceAddress))?,
        };
        let next_hop = route.gateway.unwrap_or(remote);
        let Some(mac) = snap.neigh.lookup(&route.dev, next_hop) else {
            self.want_neighbour(&route.dev, bridge.mac, src, next_hop);
            return Err(dropped(TunnelDrop::NeighbourUnknown));
        };
        let vni = match c.key {
            FromFlow::Fixed(k) => k,
            FromFlow::Flow => {
                mask.tun_id = u64::MAX;
                key.tun_id as u32
            }
        };
        let mut geneve_options = Vec::new();
        if let (vsw_packet::tunnel::TunnelKind::Geneve, Some(m)) = (c.kind, p.metadata0) {
            // The option is sent when a rule gave the packet a value.
            mask.tun_metadata0 = u32::MAX;
            if key.tun_metadata0 != 0 {
                geneve_options = m.tlv();
                let end = geneve_options.len();
                geneve_options[end - MetadataOption::LEN..]
                    .copy_from_slice(&key.tun_metadata0.to_be_bytes());
            }
        }
        let spec = vsw_packet::tunnel::EncapSpec {
            kind: c.kind,
            eth_src: bridge.mac,
            eth_dst: mac,
            src,
            dst: remote,
            tos: c.tos.or_inner(inner_tos),
            ttl: c.ttl.or_inner(inner_ttl),
            df: c.df,
            udp_dst: c.dst_port,
            udp_csum: c.csum,
            vni,
            geneve_options,
            gpe,
        };
        Ok(vsw_datapath::TunnelWay {
            spec,
            underlay: route.dev.clone(),
        })
    }
}

/// What a packet (`key`; `l3`: its Ethernet type when it has no Ethernet header)
/// leaving by a port of config `c` carries: VXLAN-GPE's next protocol (`None`:
/// plain VXLAN or Geneve), or `NotCarried` — as Open vSwitch: an Ethernet-only
/// port sends no packet without Ethernet, an L3 port's Ethernet frames lose their
/// Ethernet header (and say their type, which the flow then matches), and GPE
/// carries IPv4, IPv6 and NSH only.
fn gpe_next_protocol(
    c: &vsw_tunnel::config::TunnelConfig,
    key: &vsw_packet::FlowKey,
    l3: Option<u16>,
    mask: &mut vsw_packet::FlowKey,
) -> Result<Option<u8>, vsw_datapath::NoWay> {
    use vsw_packet::wire::vxlan;
    let l3 = match (c.packet_type, l3) {
        (PacketTypeMode::LegacyL2, Some(_)) => return Err(vsw_datapath::NoWay::NotCarried),
        (_, Some(t)) => Some(t),
        (PacketTypeMode::LegacyL3, None) => {
            mask.dl_type = u16::MAX;
            Some(key.dl_type)
        }
        (_, None) => None,
    };
    if !c.gpe {
        // (A ptap port of a tunnel that carries Ethernet only.)
        return match l3 {
            Some(_) => Err(vsw_datapath::NoWay::NotCarried),
            None => Ok(None),
        };
    }
    match l3 {
        None => Ok(Some(vxlan::NP_ETHERNET)),
        Some(t) => vxlan::next_protocol_of(t)
            .filter(|np| *np != vxlan::NP_ETHERNET)
            .map(Some)
            .ok_or(vsw_datapath::NoWay::NotCarried),
    }
}

#[cfg(test)]
mod drop_tests {
    use super::*;

    /// Each reason counts in its own slot and has its own name; every refusal of
    /// decapsulation (but "no tunnel packet") is one of them.
    #[test]
    fn every_drop_reason_has_its_slot_and_name() {
        for (i, r) in TunnelDrop::ALL.iter().enumerate() {
            assert_eq!(*r as usize, i, "{r:?} out of order in ALL");
        }
        let names: std::collections::BTreeSet<_> =
            TunnelDrop::ALL.iter().map(|r| r.name()).collect();
        assert_eq!(names.len(), TunnelDrop::ALL.len());
        assert_eq!(
            TunnelDrop::of_decap(&DecapError::BadUdpChecksum).map(TunnelDrop::name),
            Some("bad_udp_checksum")
        );
        assert_eq!(TunnelDrop::of_decap(&DecapError::NotTunnel), None);
    }
}
