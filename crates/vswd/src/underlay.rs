//! The underlay as tunnel ports reach it (issue 18): the route table Open vSwitch
//! calls `ovs-router` — this namespace's connected routes and the kernel's routes
//! through gateways, read again whenever the table is asked (an address put on a
//! bridge's LOCAL port with `ip addr add`, a route with `ip route add … via …`, is
//! seen at once), and the operator's (`ovs/route/add`). `ovs-appctl
//! ovs/route/show|add|del|lookup` reach it through `unixctl.rs`.

use std::sync::{Mutex, PoisonError};

use vsw_tunnel::kernel_routes::{gateway_routes_v4, gateway_routes_v6};
use vsw_tunnel::route::{parse_prefix, Route, RouteTable};

#[derive(Default)]
pub struct Underlay {
    routes: Mutex<RouteTable>,
}

/// The connected routes of these interface addresses: each address's subnet, by its
/// interface, from that address.
pub fn connected_routes(addrs: &[if_addrs::Interface]) -> Vec<Route> {
    addrs
        .iter()
        .filter_map(|i| {
            let (ip, plen) = match &i.addr {
                if_addrs::IfAddr::V4(a) => (std::net::IpAddr::V4(a.ip), a.prefixlen),
                if_addrs::IfAddr::V6(a) => (std::net::IpAddr::V6(a.ip), a.prefixlen),
            };
            let (prefix, plen) = parse_prefix(&format!("{ip}/{plen}")).ok()?;
            Some(Route {
                prefix,
                plen,
                dev: i.name.clone(),
                gateway: None,
                src: Some(ip),
                user: false,
            })
        })
        .collect()
}

impl Underlay {
    fn table(&self) -> std::sync::MutexGuard<'_, RouteTable> {
        self.routes.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Reads the interfaces' addresses again; the tunnel ports see the table as it
    /// is then.
    pub fn refresh(&self) {
        match if_addrs::get_if_addrs() {
            Ok(addrs) => {
                let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
                let mut routes = connected_routes(&addrs);
                routes.extend(gateway_routes_v4(&read("/proc/net/route")));
                routes.extend(gateway_routes_v6(&read("/proc/net/ipv6_route")));
                self.table().set_cached(routes);
            }
            Err(e) => tracing::warn!(error = %e, "cannot read the interfaces' addresses"),
        }
        self.publish();
    }

    fn publish(&self) {
        let table = std::sync::Arc::new(self.table().clone());
        vsw_netdev::tunnel::world().set_routes(table);
    }

    /// Looks after the tunnels' state: routes read again, the neighbours the PMDs
    /// saw taken in, old ones aged out. Called from vswd's main loop.
    pub fn tick(&self, now_ms: u64) {
        self.refresh();
        let world = vsw_netdev::tunnel::world();
        world.absorb_neighbours(now_ms);
        world.refresh_bridge_macs();
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
            "tnl/neigh/show" => Ok(vsw_netdev::tunnel::world().neighbours_show()),
            "tnl/neigh/flush" => {
                vsw_netdev::tunnel::world().neighbours_flush();
                Ok("OK\n".into())
            }
            "tnl/neigh/set" => match args {
                [bridge, ip, mac] => match (ip.parse(), mac.parse()) {
                    (Ok(ip), Ok(mac)) => {
                        vsw_netdev::tunnel::world().neighbour_set(ip, mac, bridge);
                        Ok("OK\n".into())
                    }
                    _ => Err(format!("bad address {ip} or MAC {mac}")),
                },
                _ => Err("usage: tnl/neigh/set BRIDGE IP MAC".into()),
            },
            "tnl/ports/show" => Ok(vsw_netdev::tunnel::world().ports_show()),
            _ => return None,
        };
        Some(answer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    #[test]
    fn addresses_become_connected_routes() {
        let addrs = vec![if_addrs::Interface {
            name: "br-phy".into(),
            addr: if_addrs::IfAddr::V4(if_addrs::Ifv4Addr {
                ip: Ipv4Addr::new(198, 18, 5, 2),
                netmask: Ipv4Addr::new(255, 255, 255, 0),
                prefixlen: 24,
                broadcast: None,
            }),
            index: Some(7),
        }];
        let routes = connected_routes(&addrs);
        assert_eq!(routes.len(), 1);
        assert_eq!(
            routes[0].prefix,
            "198.18.5.0".parse::<std::net::IpAddr>().unwrap()
        );
        assert_eq!((routes[0].plen, routes[0].dev.as_str()), (24, "br-phy"));
        assert_eq!(routes[0].src, Some("198.18.5.2".parse().unwrap()));
        // The operator's routes through the commands; a bad one changes nothing.
        let u = Underlay::default();
        u.table().set_cached(routes);
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
}
