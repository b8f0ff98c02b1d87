//! The kernel's routes through gateways, read from the text Linux gives in
//! `/proc/net/route` and `/proc/net/ipv6_route` (the same table `ip route` reads
//! over netlink; connected routes come from the interfaces' addresses instead). A
//! tunnel to a remote behind a router then goes to the router's MAC, as in Open
//! vSwitch, whose `ovs-router` mirrors the kernel's table.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::route::{parse_prefix, Route};

/// The route's next hop is a gateway (`RTF_GATEWAY`).
const RTF_GATEWAY: u32 = 0x2;

/// The IPv4 routes with a gateway in `/proc/net/route`'s text; lines that do not
/// read are passed over.
pub fn gateway_routes_v4(text: &str) -> Vec<Route> {
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let (dev, dst, gw, flags, mask) =
                (f.first()?, f.get(1)?, f.get(2)?, f.get(3)?, f.get(7)?);
            // The kernel prints each address as the hex of its in-memory (network
            // order) bytes read as a little-endian word.
            let addr = |h: &str| {
                u32::from_str_radix(h, 16)
                    .ok()
                    .map(|v| Ipv4Addr::from(v.swap_bytes()))
            };
            if u32::from_str_radix(flags, 16).ok()? & RTF_GATEWAY == 0 {
                return None;
            }
            let plen = u32::from_str_radix(mask, 16).ok()?.count_ones() as u8;
            route(IpAddr::V4(addr(dst)?), plen, dev, IpAddr::V4(addr(gw)?))
        })
        .collect()
}

/// The IPv6 routes with a gateway in `/proc/net/ipv6_route`'s text.
pub fn gateway_routes_v6(text: &str) -> Vec<Route> {
    text.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let (dst, plen, gw, flags, dev) =
                (f.first()?, f.get(1)?, f.get(4)?, f.get(8)?, f.get(9)?);
            let addr = |h: &str| u128::from_str_radix(h, 16).ok().map(Ipv6Addr::from);
            if u32::from_str_radix(flags, 16).ok()? & RTF_GATEWAY == 0 {
                return None;
            }
            let plen = u8::from_str_radix(plen, 16).ok()?;
            route(IpAddr::V6(addr(dst)?), plen, dev, IpAddr::V6(addr(gw)?))
        })
        .collect()
}

fn route(dst: IpAddr, plen: u8, dev: &str, gateway: IpAddr) -> Option<Route> {
    let (prefix, plen) = parse_prefix(&format!("{dst}/{plen}")).ok()?;
    Some(Route {
        prefix,
        plen,
        dev: dev.to_string(),
        gateway: Some(gateway),
        src: None,
        user: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gateway_routes_are_read_and_the_rest_passed_over() {
        // `ip route add 198.18.10.0/24 via 198.18.9.254 dev br-phy`, a default
        // route, a connected route and a line cut short.
        let v4 =
            "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
                  br-phy\t000A12C6\tFE0912C6\t0003\t0\t0\t0\t00FFFFFF\t0\t0\t0\n\
                  eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n\
                  br-phy\t000912C6\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n\
                  eth0\t0000\n";
        let r = gateway_routes_v4(v4);
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].prefix, IpAddr::V4(Ipv4Addr::new(198, 18, 10, 0)));
        assert_eq!(r[0].plen, 24);
        assert_eq!(r[0].dev, "br-phy");
        assert_eq!(
            r[0].gateway,
            Some(IpAddr::V4(Ipv4Addr::new(198, 18, 9, 254)))
        );
        assert_eq!(
            (r[1].plen, r[1].gateway),
            (0, Some(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1))))
        );
        let v6 = "20010db8000000010000000000000000 40 00000000000000000000000000000000 00 20010db8000000000000000000000001 00000400 00000003 00000000 00000003   br-phy\n\
                  fe800000000000000000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000002 00000000 00000001     eth0\n";
        let r = gateway_routes_v6(v6);
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].prefix, "2001:db8:0:1::".parse::<IpAddr>().unwrap());
        assert_eq!(r[0].plen, 64);
        assert_eq!(r[0].gateway, Some("2001:db8::1".parse().unwrap()));
    }
}
