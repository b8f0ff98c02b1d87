//! The underlay as tunnel ports reach it (issue 18): the route table Open vSwitch
//! calls `ovs-router` — this namespace's connected routes (the interfaces'
//! addresses) and the kernel's routes through gateways, read over rtnetlink, and the
//! operator's (`ovs/route/add`). A thread of its own listens for the kernel's
//! announcements (links, addresses, routes coming and going) and reads the tables
//! again after each burst of them, as Open vSwitch's `route-table` does; the main
//! loop never reads a route. `ovs-appctl ovs/route/show|add|del|lookup` reach it
//! through `unixctl.rs` (show and lookup read the kernel's tables first, so an
//! address just added is there).

use std::io;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use netlink_packet_core::{
    NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_DUMP, NLM_F_REQUEST,
};
use netlink_packet_route::address::AddressMessage;
use netlink_packet_route::link::LinkMessage;
use netlink_packet_route::route::RouteMessage;
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};
use vsw_tunnel::kernel_routes::KernelTables;
use vsw_tunnel::route::RouteTable;

/// How long a burst of the kernel's announcements may go on before the tables are
/// read again (one read for all of them).
const SETTLE: Duration = Duration::from_millis(50);

/// The rtnetlink groups announcing what the route table is made of: links,
/// IPv4 and IPv6 addresses and routes.
const GROUPS: u32 = (libc::RTMGRP_LINK
    | libc::RTMGRP_IPV4_IFADDR
    | libc::RTMGRP_IPV4_ROUTE
    | libc::RTMGRP_IPV6_IFADDR
    | libc::RTMGRP_IPV6_ROUTE) as u32;

pub struct Underlay {
    /// The tunnels the routes are published to.
    tunnels: Arc<vsw_netdev::tunnel::TunnelWorld>,
    routes: Mutex<RouteTable>,
    /// Serialises reads of the kernel's tables (the watcher's and the commands').
    reading: Mutex<()>,
}

/// Sends one dump request and hands every message of the answer to `each`.
fn dump(
    socket: &Socket,
    request: RouteNetlinkMessage,
    each: &mut impl FnMut(&RouteNetlinkMessage),
) -> io::Result<()> {
    let mut header = NetlinkHeader::default();
    header.flags = NLM_F_REQUEST | NLM_F_DUMP;
    let mut packet = NetlinkMessage::new(header, NetlinkPayload::from(request));
    packet.finalize();
    let mut buf = vec![0u8; packet.buffer_len()];
    packet.serialize(&mut buf);
    socket.send(&buf, 0)?;
    let mut rx = vec![0u8; 1 << 20];
    loop {
        let n = socket.recv(&mut &mut rx[..], 0)?;
        let mut at = 0;
        while at < n {
            let msg = NetlinkMessage::<RouteNetlinkMessage>::deserialize(&rx[at..n])
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
            let len = msg.header.length as usize;
            match msg.payload {
                NetlinkPayload::Done(_) => return Ok(()),
                NetlinkPayload::Error(e) => {
                    return Err(io::Error::other(format!("rtnetlink dump: {e:?}")))
                }
                NetlinkPayload::InnerMessage(m) => each(&m),
                _ => {}
            }
            if len == 0 {
                break;
            }
            at += len;
        }
    }
}

/// The kernel's links, addresses and routes, read now.
fn read_kernel() -> io::Result<KernelTables> {
    let mut socket = Socket::new(NETLINK_ROUTE)?;
    socket.bind_auto()?;
    socket.connect(&SocketAddr::new(0, 0))?;
    let mut tables = KernelTables::default();
    let mut take = |m: &RouteNetlinkMessage| tables.take(m);
    dump(
        &socket,
        RouteNetlinkMessage::GetLink(LinkMessage::default()),
        &mut take,
    )?;
    let mut any_address = AddressMessage::default();
    any_address.header.family = AddressFamily::Unspec;
    dump(
        &socket,
        RouteNetlinkMessage::GetAddress(any_address),
        &mut take,
    )?;
    let mut any_route = RouteMessage::default();
    any_route.header.address_family = AddressFamily::Unspec;
    dump(&socket, RouteNetlinkMessage::GetRoute(any_route), &mut take)?;
    Ok(tables)
}

impl Underlay {
    /// The underlay of `tunnels` (its routes published there).
    pub fn new(tunnels: Arc<vsw_netdev::tunnel::TunnelWorld>) -> Underlay {
        Underlay {
            tunnels,
            routes: Mutex::default(),
            reading: Mutex::default(),
        }
    }

    fn table(&self) -> std::sync::MutexGuard<'_, RouteTable> {
        self.routes.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Reads the kernel's tables again; the tunnel ports see the table as it is
    /// then (published only when it changed).
    pub fn refresh(&self) {
        let _one = self.reading.lock().unwrap_or_else(PoisonError::into_inner);
        match read_kernel() {
            Ok(k) => {
                let mut next = self.table().clone();
                next.set_cached(k.routes());
                let changed = {
                    let mut t = self.table();
                    let changed = *t != next;
                    *t = next;
                    changed
                };
                if changed {
                    self.publish();
                }
            }
            Err(e) => tracing::warn!(error = %e, "cannot read the kernel's routes"),
        }
    }

    fn publish(&self) {
        let table = Arc::new(self.table().clone());
        self.tunnels.set_routes(table);
    }

    /// Reads the kernel's tables, then listens for their changes on a thread of its
    /// own, reading them again after each burst, until the process ends.
    pub fn watch(self: &Arc<Self>) -> io::Result<()> {
        let mut socket = Socket::new(NETLINK_ROUTE)?;
        socket.bind(&SocketAddr::new(0, GROUPS))?;
        // Announcements that come faster than they are read are lost (ENOBUFS):
        // the tables are read whole again anyway.
        self.refresh();
        let me = self.clone();
        std::thread::Builder::new()
            .name("vsw-routes".into())
            .spawn(move || me.listen(&socket))?;
        Ok(())
    }

    fn listen(&self, socket: &Socket) {
        let mut buf = vec![0u8; 1 << 16];
        loop {
            // Anything announced (or an overrun): wait for the burst to end, then
            // read the tables once.
            if let Err(e) = socket.recv(&mut &mut buf[..], 0) {
                if e.raw_os_error() != Some(libc::ENOBUFS) {
                    tracing::warn!(error = %e, "the kernel's route announcements stopped");
                    return;
                }
            }
            let _ = socket.set_non_blocking(true);
            let settle_until = std::time::Instant::now() + SETTLE;
            while std::time::Instant::now() < settle_until {
                match socket.recv(&mut &mut buf[..], 0) {
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        std::thread::sleep(Duration::from_millis(5))
                    }
                    Err(_) => {}
                }
            }
            let _ = socket.set_non_blocking(false);
            self.refresh();
        }
    }

    /// Looks after the tunnels' state: the neighbours the PMDs saw taken in, old
    /// ones aged out, the bridges' MACs. Called from vswd's main loop.
    pub fn tick(&self, now_ms: u64) {
        self.tunnels.absorb_neighbours(now_ms);
        self.tunnels.refresh_bridge_macs();
    }

    /// Answers an `ovs/route/*` command; `None` for any other.
    pub fn command(&self, method: &str, args: &[String]) -> Option<Result<String, String>> {
        let answer = match method {
            "ovs/route/show" => {
                self.refresh();
                Ok(self.table().show())
            }
            "ovs/route/add" => {
                let added = self.table().add_from_args(args);
                self.publish();
                added
                    .map(|()| "OK\n".to_string())
                    .map_err(|e| e.to_string())
            }
            "ovs/route/del" => match args {
                [prefix, ..] => {
                    let deleted = self.table().del(prefix);
                    self.publish();
                    deleted
                        .map(|()| "OK\n".to_string())
                        .map_err(|e| e.to_string())
                }
                [] => Err("usage: ovs/route/del IP/LEN".into()),
            },
            "ovs/route/lookup" => match args {
                [ip, ..] => {
                    self.refresh();
                    self.table().lookup_text(ip).map_err(|e| e.to_string())
                }
                [] => Err("usage: ovs/route/lookup IP".into()),
            },
            "tnl/neigh/show" => Ok(self.tunnels.neighbours_show()),
            "tnl/neigh/flush" => {
                self.tunnels.neighbours_flush();
                Ok("OK\n".into())
            }
            "tnl/neigh/set" => match args {
                [bridge, ip, mac] => match (ip.parse(), mac.parse()) {
                    (Ok(ip), Ok(mac)) => {
                        self.tunnels.neighbour_set(ip, mac, bridge);
                        Ok("OK\n".into())
                    }
                    _ => Err(format!("bad address {ip} or MAC {mac}")),
                },
                _ => Err("usage: tnl/neigh/set BRIDGE IP MAC".into()),
            },
            "tnl/ports/show" => Ok(self.tunnels.ports_show()),
            _ => return None,
        };
        Some(answer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_operators_routes_through_the_commands() {
        let u = Underlay::new(vsw_netdev::tunnel::TunnelWorld::new());
        let ask = |m: &str, a: &[&str]| {
            u.command(m, &a.iter().map(|s| s.to_string()).collect::<Vec<_>>())
                .unwrap()
        };
        assert_eq!(
            ask("ovs/route/add", &["10.9.0.0/16", "br-phy", "198.18.5.1"]).unwrap(),
            "OK\n"
        );
        assert!(ask("ovs/route/add", &["10.9.0.0/99", "br-phy"]).is_err());
        assert!(u
            .table()
            .show()
            .contains("User: 10.9.0.0/16 dev br-phy GW 198.18.5.1"));
        assert!(ask("ovs/route/del", &["10.8.0.0/16"]).is_err());
        assert_eq!(ask("ovs/route/del", &["10.9.0.0/16"]).unwrap(), "OK\n");
        assert!(u.command("fdb/show", &[]).is_none());
    }

    /// The kernel's own tables, read over rtnetlink: this namespace's loopback
    /// address is a connected route.
    #[test]
    fn the_kernels_tables_are_read() {
        let routes = read_kernel().unwrap().routes();
        assert!(
            routes
                .iter()
                .any(|r| r.dev == "lo" && r.src == Some("127.0.0.1".parse().unwrap())),
            "{routes:?}"
        );
    }
}
