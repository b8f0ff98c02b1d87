//! The underlay route table (Open vSwitch's `ovs-router`): which bridge a tunnel's
//! outer packet leaves by, through which gateway, from which source address. Routes
//! come from the kernel (`Cached`, replaced whole when the kernel's change) and from
//! the operator (`ovs/route/add`, `User`); the longest prefix wins, a user route
//! over a cached one of the same length.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::IpAddr;

use ipnet::{Ipv4Net, Ipv6Net};
use prefix_trie::PrefixMap;

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

/// The routes of one prefix: the kernel's and the operator's (which wins).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Slot {
    cached: Option<Route>,
    user: Option<Route>,
}

impl Slot {
    fn best(&self) -> Option<&Route> {
        self.user.as_ref().or(self.cached.as_ref())
    }

    fn is_empty(&self) -> bool {
        self.cached.is_none() && self.user.is_none()
    }

    fn routes(&self) -> impl Iterator<Item = &Route> {
        self.user.iter().chain(self.cached.iter())
    }
}

/// The table: a prefix trie per family (longest-prefix lookups cost the prefix's
/// length, not the number of routes: a host with 200,000 kernel routes looks a
/// tunnel's remote up as fast as one with ten), and each bridge's addresses.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RouteTable {
    v4: PrefixMap<Ipv4Net, Slot>,
    v6: PrefixMap<Ipv6Net, Slot>,
    /// Each bridge's addresses: the sources of its routes (the connected routes'
    /// interface addresses, and those the operator's routes send from).
    addresses: BTreeMap<String, Vec<IpAddr>>,
}

/// `prefix/plen` as the trie's key (the bits past `plen` already cleared).
enum Net {
    V4(Ipv4Net),
    V6(Ipv6Net),
}

fn net(prefix: IpAddr, plen: u8) -> Net {
    match prefix {
        IpAddr::V4(a) => Net::V4(Ipv4Net::new(a, plen.min(32)).expect("a length of at most 32")),
        IpAddr::V6(a) => Net::V6(Ipv6Net::new(a, plen.min(128)).expect("a length of at most 128")),
    }
}

impl RouteTable {
    fn slot_mut(&mut self, prefix: IpAddr, plen: u8) -> &mut Slot {
        match net(prefix, plen) {
            Net::V4(n) => self.v4.entry(n).or_default(),
            Net::V6(n) => self.v6.entry(n).or_default(),
        }
    }

    /// Removes the slot of `prefix/plen` if nothing is left in it.
    fn tidy(&mut self, prefix: IpAddr, plen: u8) {
        match net(prefix, plen) {
            Net::V4(n) => {
                if self.v4.get(&n).is_some_and(Slot::is_empty) {
                    self.v4.remove(&n);
                }
            }
            Net::V6(n) => {
                if self.v6.get(&n).is_some_and(Slot::is_empty) {
                    self.v6.remove(&n);
                }
            }
        }
    }

    /// Every route, in no particular order.
    fn routes(&self) -> impl Iterator<Item = &Route> {
        self.v4
            .values()
            .chain(self.v6.values())
            .flat_map(Slot::routes)
    }

    /// How many routes there are.
    pub fn len(&self) -> usize {
        self.routes().count()
    }

    pub fn is_empty(&self) -> bool {
        self.v4.is_empty() && self.v6.is_empty()
    }

    /// Adds (or replaces) a route of the same prefix and origin.
    pub fn add(&mut self, r: Route) -> Result<(), RouteError> {
        let family = r.prefix.is_ipv4();
        if r.gateway.is_some_and(|g| g.is_ipv4() != family)
            || r.src.is_some_and(|s| s.is_ipv4() != family)
        {
            return Err(RouteError::MixedFamilies);
        }
        let plen = r.plen.min(max_plen(&r.prefix));
        let r = Route {
            prefix: masked(r.prefix, plen),
            plen,
            ..r
        };
        let user = r.user;
        let slot = self.slot_mut(r.prefix, r.plen);
        if r.user {
            slot.user = Some(r);
        } else {
            slot.cached = Some(r);
        }
        if user {
            self.reindex();
        }
        Ok(())
    }

    /// The bridges' addresses, from the routes as they are.
    fn reindex(&mut self) {
        let mut addresses: BTreeMap<String, Vec<IpAddr>> = BTreeMap::new();
        for r in self.routes() {
            if let Some(src) = r.src {
                addresses.entry(r.dev.clone()).or_default().push(src);
            }
        }
        for a in addresses.values_mut() {
            a.sort_unstable();
            a.dedup();
        }
        self.addresses = addresses;
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
        let gone = match net(p, plen) {
            Net::V4(n) => self.v4.get_mut(&n).and_then(|s| s.user.take()),
            Net::V6(n) => self.v6.get_mut(&n).and_then(|s| s.user.take()),
        };
        if gone.is_none() {
            return Err(RouteError::NotFound(prefix.to_string()));
        }
        self.tidy(p, plen);
        self.reindex();
        Ok(())
    }

    /// Replaces the routes learned from the kernel with these.
    pub fn set_cached(&mut self, routes: impl IntoIterator<Item = Route>) {
        for slot in self.v4.values_mut().chain(self.v6.values_mut()) {
            slot.cached = None;
        }
        self.v4.retain(|_, s| !s.is_empty());
        self.v6.retain(|_, s| !s.is_empty());
        for r in routes {
            let _ = self.add(Route { user: false, ..r });
        }
        self.reindex();
    }

    /// The route to `dst`: the longest prefix holding it, a user route first.
    pub fn lookup(&self, dst: IpAddr) -> Option<&Route> {
        match dst {
            IpAddr::V4(a) => self
                .v4
                .get_lpm(&Ipv4Net::from(a))
                .and_then(|(_, s)| s.best()),
            IpAddr::V6(a) => self
                .v6
                .get_lpm(&Ipv6Net::from(a))
                .and_then(|(_, s)| s.best()),
        }
    }

    /// The table as `ovs-appctl ovs/route/show` prints it.
    pub fn show(&self) -> String {
        let mut sorted: Vec<&Route> = self.routes().collect();
        sorted.sort_by_key(|r| (std::cmp::Reverse(r.plen), r.prefix, !r.user));
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
            self.addresses
                .get(&r.dev)?
                .iter()
                .copied()
                .find(|a| a.is_ipv4() == r.prefix.is_ipv4())
        })
    }

    /// The addresses bridge `dev` holds (its connected routes' sources).
    pub fn addresses_of(&self, dev: &str) -> Vec<IpAddr> {
        self.addresses.get(dev).cloned().unwrap_or_default()
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

#[cfg(test)]
mod lpm {
    use super::*;
    use proptest::prelude::*;

    /// What the table must answer, by a scan of every route: the longest prefix
    /// holding the address, a user route over a cached one of the same length.
    fn reference(routes: &[Route], dst: IpAddr) -> Option<&Route> {
        routes
            .iter()
            .filter(|r| {
                let width = u32::from(max_plen(&r.prefix));
                r.prefix.is_ipv4() == dst.is_ipv4()
                    && (r.plen == 0
                        || bits(&r.prefix) >> (width - u32::from(r.plen))
                            == bits(&dst) >> (width - u32::from(r.plen)))
            })
            .max_by_key(|r| (r.plen, r.user))
    }

    proptest! {
        #[test]
        fn lookups_agree_with_a_scan_of_every_route(
            raw in proptest::collection::vec((any::<u32>(), 0u8..=32, any::<bool>(), 0u8..4), 0..200),
            probes in proptest::collection::vec(any::<u32>(), 1..50),
        ) {
            let mut t = RouteTable::default();
            // Later routes of the same prefix and origin replace earlier ones.
            let mut kept: Vec<Route> = Vec::new();
            let (mut cached, mut user) = (Vec::new(), Vec::new());
            for (addr, plen, is_user, dev) in raw {
                let prefix = masked(IpAddr::V4(addr.into()), plen);
                let r = Route { prefix, plen, dev: format!("br{dev}"), gateway: None, src: None, user: is_user };
                kept.retain(|o| !(o.prefix == r.prefix && o.plen == r.plen && o.user == r.user));
                kept.push(r.clone());
                if is_user { user.push(r) } else { cached.push(r) }
            }
            for r in user { t.add(r).unwrap(); }
            t.set_cached(cached);
            prop_assert_eq!(t.len(), kept.len());
            // Probes inside the routes' prefixes and anywhere.
            let inside: Vec<u32> = kept.iter().map(|r| bits(&r.prefix) as u32 | 1).collect();
            for p in probes.into_iter().chain(inside) {
                let dst = IpAddr::V4(p.into());
                prop_assert_eq!(t.lookup(dst), reference(&kept, dst), "{}", dst);
            }
        }
    }
}
