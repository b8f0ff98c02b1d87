//! The underlay route table (Open vSwitch's `ovs-router`): which bridge a tunnel's
//! outer packet leaves by, through which gateway, from which source address. Routes
//! come from the kernel (`Cached`, replaced whole when the kernel's change) and from
//! the operator (`ovs/route/add`, `User`); the longest prefix wins, a user route
//! over a cached one of the same length.

use std::fmt::Write as _;
use std::net::IpAddr;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    pub prefix: IpAddr,
    pub plen: u8,
    /// The bridge (its LOCAL port holds the host's underlay address).
    pub dev: String,
    pub gateway: Option<IpAddr>,
    /// The source address outer packets get.
    pub src: Option<IpAddr>,
    /// Added by the operator (kept when the kernel's routes are replaced).
    pub user: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RouteError {
    #[error("{0:?} is not an address with a prefix length (IP/LEN)")]
    BadPrefix(String),
    #[error("{0:?} is not an IP address")]
    BadAddress(String),
    #[error("the gateway and source must be of the prefix's family")]
    MixedFamilies,
    #[error("usage: ovs/route/add IP/LEN BRIDGE [GW] [src=IP]")]
    Usage,
    #[error("no route {0}")]
    NotFound(String),
}

fn max_plen(a: &IpAddr) -> u8 {
    if a.is_ipv4() {
        32
    } else {
        128
    }
}

fn bits(a: &IpAddr) -> u128 {
    match a {
        IpAddr::V4(v) => u128::from(u32::from(*v)),
        IpAddr::V6(v) => u128::from(*v),
    }
}

/// Whether `addr` is in `prefix/plen` (of the same family).
fn contains(prefix: &IpAddr, plen: u8, addr: &IpAddr) -> bool {
    if prefix.is_ipv4() != addr.is_ipv4() {
        return false;
    }
    let width = u32::from(max_plen(prefix));
    let shift = width - u32::from(plen.min(max_plen(prefix)));
    if shift >= width {
        return true;
    }
    bits(prefix) >> shift == bits(addr) >> shift
}

/// `prefix` with the bits past `plen` cleared.
fn masked(prefix: IpAddr, plen: u8) -> IpAddr {
    let width = u32::from(max_plen(&prefix));
    let shift = width - u32::from(plen);
    let b = if shift >= width {
        0
    } else {
        (bits(&prefix) >> shift) << shift
    };
    match prefix {
        IpAddr::V4(_) => IpAddr::V4((b as u32).into()),
        IpAddr::V6(_) => IpAddr::V6(b.into()),
    }
}

fn parse_addr(s: &str) -> Result<IpAddr, RouteError> {
    s.parse().map_err(|_| RouteError::BadAddress(s.to_string()))
}

/// `IP/LEN` (or a bare address: a host route).
pub fn parse_prefix(s: &str) -> Result<(IpAddr, u8), RouteError> {
    let bad = || RouteError::BadPrefix(s.to_string());
    let (a, len) = match s.split_once('/') {
        Some((a, l)) => (a, Some(l)),
        None => (s, None),
    };
    let a: IpAddr = a.parse().map_err(|_| bad())?;
    let plen = match len {
        Some(l) => l.parse::<u8>().map_err(|_| bad())?,
        None => max_plen(&a),
    };
    if plen > max_plen(&a) {
        return Err(bad());
    }
    Ok((masked(a, plen), plen))
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RouteTable {
    routes: Vec<Route>,
}

impl RouteTable {
    /// Adds (or replaces) a route of the same prefix and origin.
    pub fn add(&mut self, r: Route) -> Result<(), RouteError> {
        let family = r.prefix.is_ipv4();
        if r.gateway.is_some_and(|g| g.is_ipv4() != family)
            || r.src.is_some_and(|s| s.is_ipv4() != family)
        {
            return Err(RouteError::MixedFamilies);
        }
        let r = Route {
            prefix: masked(r.prefix, r.plen.min(max_plen(&r.prefix))),
            plen: r.plen.min(max_plen(&r.prefix)),
            ..r
        };
        self.routes
            .retain(|o| !(o.prefix == r.prefix && o.plen == r.plen && o.user == r.user));
        self.routes.push(r);
        Ok(())
    }

    /// The operator's `ovs/route/add IP/LEN BRIDGE [GW] [src=IP]`.
    pub fn add_from_args(&mut self, args: &[String]) -> Result<(), RouteError> {
        let (Some(prefix), Some(dev)) = (args.first(), args.get(1)) else {
            return Err(RouteError::Usage);
        };
        let (prefix, plen) = parse_prefix(prefix)?;
        let mut route = Route {
            prefix,
            plen,
            dev: dev.clone(),
            gateway: None,
            src: None,
            user: true,
        };
        for a in &args[2..] {
            match a.strip_prefix("src=") {
                Some(s) => route.src = Some(parse_addr(s)?),
                None if a.starts_with("pkt_mark=") => {}
                None if route.gateway.is_none() => route.gateway = Some(parse_addr(a)?),
                None => return Err(RouteError::Usage),
            }
        }
        self.add(route)
    }

    /// Removes the user route `IP/LEN` (`ovs/route/del`).
    pub fn del(&mut self, prefix: &str) -> Result<(), RouteError> {
        let (p, plen) = parse_prefix(prefix)?;
        let before = self.routes.len();
        self.routes
            .retain(|r| !(r.user && r.prefix == p && r.plen == plen));
        if self.routes.len() == before {
            return Err(RouteError::NotFound(prefix.to_string()));
        }
        Ok(())
    }

    /// Replaces the routes learned from the kernel with these.
    pub fn set_cached(&mut self, routes: impl IntoIterator<Item = Route>) {
        self.routes.retain(|r| r.user);
        for r in routes {
            let _ = self.add(Route { user: false, ..r });
        }
    }

    /// The route to `dst`: the longest prefix holding it, a user route first.
    pub fn lookup(&self, dst: IpAddr) -> Option<&Route> {
        self.routes
            .iter()
            .filter(|r| contains(&r.prefix, r.plen, &dst))
            .max_by_key(|r| (r.plen, r.user))
    }

    /// The table as `ovs-appctl ovs/route/show` prints it.
    pub fn show(&self) -> String {
        let mut sorted: Vec<&Route> = self.routes.iter().collect();
        sorted.sort_by_key(|r| (std::cmp::Reverse(r.plen), r.prefix));
        let mut o = String::from("Route Table:\n");
        for r in sorted {
            let origin = if r.user { "User" } else { "Cached" };
            let _ = write!(o, "{origin}: {}/{} dev {}", r.prefix, r.plen, r.dev);
            if let Some(g) = r.gateway {
                let _ = write!(o, " GW {g}");
            }
            if let Some(s) = r.src {
                let _ = write!(o, " SRC {s}");
            }
            o.push('\n');
        }
        o
    }

    /// The source address packets by route `r` get: its own, or else (a route added
    /// without `src=`) an address of its bridge of the same family, as Open vSwitch
    /// takes the output bridge's.
    pub fn source_for(&self, r: &Route) -> Option<IpAddr> {
        r.src.or_else(|| {
            self.routes
                .iter()
                .filter(|o| !o.user && o.dev == r.dev && o.prefix.is_ipv4() == r.prefix.is_ipv4())
                .find_map(|o| o.src)
        })
    }

    /// The addresses bridge `dev` holds (its routes' sources).
    pub fn addresses_of(&self, dev: &str) -> Vec<IpAddr> {
        let mut own: Vec<IpAddr> = self
            .routes
            .iter()
            .filter(|r| r.dev == dev)
            .filter_map(|r| r.src)
            .collect();
        own.sort_unstable();
        own.dedup();
        own
    }

    /// Whether `ip` is a neighbour of bridge `dev`: the route to it leaves by `dev`
    /// with no gateway between.
    pub fn is_neighbour_of(&self, ip: IpAddr, dev: &str) -> bool {
        self.lookup(ip)
            .is_some_and(|r| r.dev == dev && r.gateway.is_none())
    }

    /// `ovs-appctl ovs/route/lookup IP`'s answer.
    pub fn lookup_text(&self, dst: &str) -> Result<String, RouteError> {
        let ip = parse_addr(dst)?;
        let r = self
            .lookup(ip)
            .ok_or_else(|| RouteError::NotFound(dst.to_string()))?;
        let any = if ip.is_ipv4() { "0.0.0.0" } else { "::" };
        Ok(format!(
            "src {}\ngateway {}\ndev {}\n",
            self.source_for(r)
                .map_or(any.to_string(), |s| s.to_string()),
            r.gateway.map_or(any.to_string(), |g| g.to_string()),
            r.dev
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    fn cached(prefix: &str, dev: &str, src: &str) -> Route {
        let (prefix, plen) = parse_prefix(prefix).unwrap();
        Route {
            prefix,
            plen,
            dev: dev.into(),
            gateway: None,
            src: Some(src.parse().unwrap()),
            user: false,
        }
    }

    #[test]
    fn the_longest_prefix_wins_and_a_user_route_over_a_cached_one() {
        let mut t = RouteTable::default();
        t.set_cached([
            cached("198.18.0.0/15", "br-phy", "198.18.0.1"),
            cached("198.18.7.0/24", "br-ex", "198.18.7.1"),
            cached("2001:db8::/64", "br-phy", "2001:db8::1"),
        ]);
        let dev = |t: &RouteTable, ip: &str| t.lookup(ip.parse().unwrap()).map(|r| r.dev.clone());
        assert_eq!(dev(&t, "198.18.7.9").as_deref(), Some("br-ex"));
        assert_eq!(dev(&t, "198.19.0.9").as_deref(), Some("br-phy"));
        assert_eq!(dev(&t, "10.0.0.1"), None);
        assert_eq!(dev(&t, "2001:db8::42").as_deref(), Some("br-phy"));
        assert_eq!(dev(&t, "2001:db9::42"), None);
        t.add_from_args(&words("198.18.7.0/24 br-user 198.18.7.254 src=198.18.7.2"))
            .unwrap();
        let r = t.lookup("198.18.7.9".parse().unwrap()).unwrap();
        assert_eq!((r.dev.as_str(), r.user), ("br-user", true));
        assert_eq!(r.gateway, Some("198.18.7.254".parse().unwrap()));
        // The kernel's routes replaced: the user's stays.
        t.set_cached([cached("198.18.0.0/16", "br-phy", "198.18.0.1")]);
        assert_eq!(dev(&t, "198.18.7.9").as_deref(), Some("br-user"));
        assert_eq!(dev(&t, "198.19.0.9"), None);
        // A user route without a source takes its bridge's address.
        t.add_from_args(&words("198.18.100.0/24 br-phy 198.18.0.254"))
            .unwrap();
        assert!(t
            .lookup_text("198.18.100.1")
            .unwrap()
            .starts_with("src 198.18.0.1\n"));
        t.del("198.18.100.0/24").unwrap();
        assert_eq!(
            t.lookup_text("198.18.7.9").unwrap(),
            "src 198.18.7.2\ngateway 198.18.7.254\ndev br-user\n"
        );
        let shown = t.show();
        assert!(
            shown.starts_with(
                "Route Table:\nUser: 198.18.7.0/24 dev br-user GW 198.18.7.254 SRC 198.18.7.2\n"
            ),
            "{shown}"
        );
        assert!(
            shown.contains("Cached: 198.18.0.0/16 dev br-phy SRC 198.18.0.1"),
            "{shown}"
        );
        t.del("198.18.7.0/24").unwrap();
        assert_eq!(dev(&t, "198.18.7.9").as_deref(), Some("br-phy"));
    }

    #[test]
    fn bad_routes_are_refused_and_change_nothing() {
        let mut t = RouteTable::default();
        for (args, want) in [
            (
                "198.18.0.0/33 br0",
                RouteError::BadPrefix("198.18.0.0/33".into()),
            ),
            ("nonsense br0", RouteError::BadPrefix("nonsense".into())),
            ("198.18.0.0/24", RouteError::Usage),
            ("198.18.0.0/24 br0 2001:db8::1", RouteError::MixedFamilies),
            (
                "198.18.0.0/24 br0 src=x",
                RouteError::BadAddress("x".into()),
            ),
            ("198.18.0.0/24 br0 198.18.0.1 198.18.0.2", RouteError::Usage),
        ] {
            assert_eq!(t.add_from_args(&words(args)), Err(want), "{args}");
        }
        assert_eq!(t.show(), "Route Table:\n");
        assert_eq!(
            t.del("198.18.0.0/24"),
            Err(RouteError::NotFound("198.18.0.0/24".into()))
        );
        // A prefix with host bits is taken as its network; a bare address is a host route.
        t.add_from_args(&words("198.18.0.77/24 br0")).unwrap();
        assert!(t.show().contains("198.18.0.0/24"));
        assert_eq!(parse_prefix("198.18.0.5").unwrap().1, 32);
        assert_eq!(
            parse_prefix("0.0.0.0/0").unwrap(),
            ("0.0.0.0".parse().unwrap(), 0)
        );
        t.add_from_args(&words("0.0.0.0/0 br-default")).unwrap();
        assert_eq!(
            t.lookup("8.8.8.8".parse().unwrap()).unwrap().dev,
            "br-default"
        );
    }
}
