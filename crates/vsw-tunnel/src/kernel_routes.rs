//! The kernel's routes as the tunnels' route table takes them, read from what
//! rtnetlink dumps and announces (`RTM_NEWLINK`, `RTM_NEWADDR`, `RTM_NEWROUTE`): the
//! connected routes of the interfaces' addresses (each address's subnet by its
//! interface, from that address) and the main table's routes through gateways. A
//! tunnel to a remote behind a router then goes to the router's MAC, as in Open
//! vSwitch, whose `ovs-router` mirrors the kernel's table. Pure: the caller owns the
//! socket.

use std::collections::BTreeMap;
use std::net::IpAddr;

use netlink_packet_route::address::{AddressAttribute, AddressMessage};
use netlink_packet_route::link::{LinkAttribute, LinkMessage};
use netlink_packet_route::route::{
    RouteAddress, RouteAttribute, RouteHeader, RouteMessage, RouteType,
};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};

use crate::route::{parse_prefix, Route};

/// What one dump of the kernel's links, addresses and routes said.
#[derive(Clone, Debug, Default)]
pub struct KernelTables {
    /// Interface index → name.
    names: BTreeMap<u32, String>,
    /// (interface index, address, prefix length).
    addresses: Vec<(u32, IpAddr, u8)>,
    /// (output interface, destination, prefix length, gateway).
    gateways: Vec<(u32, IpAddr, u8, IpAddr)>,
}

fn ip_of(a: &RouteAddress) -> Option<IpAddr> {
    match a {
        RouteAddress::Inet(v4) => Some(IpAddr::V4(*v4)),
        RouteAddress::Inet6(v6) => Some(IpAddr::V6(*v6)),
        _ => None,
    }
}

impl KernelTables {
    /// Takes in one message of a dump; others are passed over.
    pub fn take(&mut self, msg: &RouteNetlinkMessage) {
        match msg {
            RouteNetlinkMessage::NewLink(l) => self.link(l),
            RouteNetlinkMessage::NewAddress(a) => self.address(a),
            RouteNetlinkMessage::NewRoute(r) => self.route(r),
            _ => {}
        }
    }

    fn link(&mut self, l: &LinkMessage) {
        for a in &l.attributes {
            if let LinkAttribute::IfName(name) = a {
                self.names.insert(l.header.index, name.clone());
            }
        }
    }

    fn address(&mut self, a: &AddressMessage) {
        // IPv4's own address is IFA_LOCAL (IFA_ADDRESS is a point-to-point peer's);
        // IPv6 has IFA_ADDRESS only.
        let local = a.attributes.iter().find_map(|x| match x {
            AddressAttribute::Local(ip) => Some(*ip),
            _ => None,
        });
        let address = a.attributes.iter().find_map(|x| match x {
            AddressAttribute::Address(ip) => Some(*ip),
            _ => None,
        });
        if let Some(ip) = local.or(address) {
            self.addresses
                .push((a.header.index, ip, a.header.prefix_len));
        }
    }

    fn route(&mut self, r: &RouteMessage) {
        let table = r
            .attributes
            .iter()
            .find_map(|a| match a {
                RouteAttribute::Table(t) => Some(*t),
                _ => None,
            })
            .unwrap_or(u32::from(r.header.table));
        if table != u32::from(RouteHeader::RT_TABLE_MAIN) || r.header.kind != RouteType::Unicast {
            return;
        }
        let attr = |want: fn(&RouteAttribute) -> Option<&RouteAddress>| {
            r.attributes.iter().find_map(want).and_then(ip_of)
        };
        let gateway = attr(|a| match a {
            RouteAttribute::Gateway(g) => Some(g),
            _ => None,
        });
        let oif = r.attributes.iter().find_map(|a| match a {
            RouteAttribute::Oif(i) => Some(*i),
            _ => None,
        });
        // Several next hops (ECMP): the first through a gateway.
        let (oif, gateway) = match (oif, gateway) {
            (Some(o), Some(g)) => (o, g),
            _ => match r.attributes.iter().find_map(|a| match a {
                RouteAttribute::MultiPath(hops) => hops.iter().find_map(|h| {
                    h.attributes.iter().find_map(|a| match a {
                        RouteAttribute::Gateway(g) => ip_of(g).map(|g| (h.interface_index, g)),
                        _ => None,
                    })
                }),
                _ => None,
            }) {
                Some(hop) => hop,
                None => return,
            },
        };
        let dst = attr(|a| match a {
            RouteAttribute::Destination(d) => Some(d),
            _ => None,
        })
        .unwrap_or(match r.header.address_family {
            AddressFamily::Inet6 => IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED),
            _ => IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
        });
        self.gateways
            .push((oif, dst, r.header.destination_prefix_length, gateway));
    }

    /// The routes: each address's connected route, then the routes through
    /// gateways, on interfaces that have a name.
    pub fn routes(&self) -> Vec<Route> {
        let route = |ifindex: &u32, dst: IpAddr, plen: u8| -> Option<Route> {
            let dev = self.names.get(ifindex)?;
            let (prefix, plen) = parse_prefix(&format!("{dst}/{plen}")).ok()?;
            Some(Route {
                prefix,
                plen,
                dev: dev.clone(),
                gateway: None,
                src: None,
                user: false,
            })
        };
        let connected = self.addresses.iter().filter_map(|(i, ip, plen)| {
            route(i, *ip, *plen).map(|r| Route {
                src: Some(*ip),
                ..r
            })
        });
        let through = self.gateways.iter().filter_map(|(i, dst, plen, gw)| {
            route(i, *dst, *plen)
                .filter(|r| r.prefix.is_ipv4() == gw.is_ipv4())
                .map(|r| Route {
                    gateway: Some(*gw),
                    ..r
                })
        });
        connected.chain(through).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use netlink_packet_route::route::RouteProtocol;
    use std::net::Ipv4Addr;

    fn link(index: u32, name: &str) -> RouteNetlinkMessage {
        let mut l = LinkMessage::default();
        l.header.index = index;
        l.attributes.push(LinkAttribute::IfName(name.into()));
        RouteNetlinkMessage::NewLink(l)
    }

    fn address(index: u32, ip: IpAddr, plen: u8) -> RouteNetlinkMessage {
        let mut a = AddressMessage::default();
        a.header.index = index;
        a.header.prefix_len = plen;
        if ip.is_ipv4() {
            a.attributes.push(AddressAttribute::Local(ip));
        }
        a.attributes.push(AddressAttribute::Address(ip));
        RouteNetlinkMessage::NewAddress(a)
    }

    fn route(
        family: AddressFamily,
        dst: Option<IpAddr>,
        plen: u8,
        gw: Option<IpAddr>,
        oif: u32,
    ) -> RouteNetlinkMessage {
        let mut r = RouteMessage::default();
        r.header.address_family = family;
        r.header.destination_prefix_length = plen;
        r.header.table = RouteHeader::RT_TABLE_MAIN;
        r.header.kind = RouteType::Unicast;
        r.header.protocol = RouteProtocol::Static;
        if let Some(d) = dst {
            r.attributes.push(RouteAttribute::Destination(d.into()));
        }
        if let Some(g) = gw {
            r.attributes.push(RouteAttribute::Gateway(g.into()));
        }
        r.attributes.push(RouteAttribute::Oif(oif));
        RouteNetlinkMessage::NewRoute(r)
    }

    proptest::proptest! {
        /// Whatever the kernel's socket hands over (here: random bytes, and random
        /// route messages of every attribute the tables read) reads into routes
        /// without a panic.
        #[test]
        fn any_rtnetlink_message_is_taken_without_panicking(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300),
            plen in proptest::prelude::any::<u8>(),
            table in proptest::prelude::any::<u8>(),
            oif in 0u32..4,
            v6 in proptest::prelude::any::<bool>(),
        ) {
            let mut k = KernelTables::default();
            if let Ok(m) = netlink_packet_core::NetlinkMessage::<RouteNetlinkMessage>::deserialize(&bytes) {
                if let netlink_packet_core::NetlinkPayload::InnerMessage(m) = m.payload {
                    k.take(&m);
                }
            }
            let family = if v6 { AddressFamily::Inet6 } else { AddressFamily::Inet };
            let gw: IpAddr = if v6 { "2001:db8::1".parse().unwrap() } else { "198.18.0.1".parse().unwrap() };
            let mut r = route(family, None, plen, Some(gw), oif);
            if let RouteNetlinkMessage::NewRoute(m) = &mut r {
                m.header.table = table;
            }
            k.take(&link(1, "br-phy"));
            k.take(&r);
            k.take(&address(oif, gw, plen));
            let _ = k.routes();
        }
    }

    #[test]
    fn addresses_and_gateway_routes_become_the_tables_routes() {
        let mut k = KernelTables::default();
        let v4 = |a: [u8; 4]| IpAddr::V4(Ipv4Addr::from(a));
        let v6: IpAddr = "2001:db8::2".parse().unwrap();
        for m in [
            link(7, "br-phy"),
            address(7, v4([198, 18, 5, 2]), 24),
            address(7, v6, 64),
            // A connected route the kernel lists too: taken from the address.
            route(AddressFamily::Inet, Some(v4([198, 18, 5, 0])), 24, None, 7),
            route(
                AddressFamily::Inet,
                Some(v4([198, 18, 10, 0])),
                24,
                Some(v4([198, 18, 5, 254])),
                7,
            ),
            route(AddressFamily::Inet, None, 0, Some(v4([198, 18, 5, 1])), 7),
            route(
                AddressFamily::Inet6,
                None,
                0,
                Some("2001:db8::1".parse().unwrap()),
                7,
            ),
            // On an interface the dump did not name: passed over.
            route(
                AddressFamily::Inet,
                Some(v4([10, 0, 0, 0])),
                8,
                Some(v4([10, 0, 0, 1])),
                9,
            ),
        ] {
            k.take(&m);
        }
        let mut shown: Vec<String> = k
            .routes()
            .iter()
            .map(|r| {
                format!(
                    "{}/{} {} {:?} {:?}",
                    r.prefix, r.plen, r.dev, r.gateway, r.src
                )
            })
            .collect();
        shown.sort();
        assert_eq!(
            shown,
            [
                "0.0.0.0/0 br-phy Some(198.18.5.1) None",
                "198.18.10.0/24 br-phy Some(198.18.5.254) None",
                "198.18.5.0/24 br-phy None Some(198.18.5.2)",
                "2001:db8::/64 br-phy None Some(2001:db8::2)",
                "::/0 br-phy Some(2001:db8::1) None",
            ]
        );
        // Another table's routes are not the main table's.
        let mut other = route(AddressFamily::Inet, None, 0, Some(v4([198, 18, 5, 9])), 7);
        if let RouteNetlinkMessage::NewRoute(r) = &mut other {
            r.header.table = 100;
        }
        let before = k.routes().len();
        k.take(&other);
        assert_eq!(k.routes().len(), before);
    }
}
