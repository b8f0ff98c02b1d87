//! A tunnel port's options, as Open vSwitch names and means them (`ovs-vsctl set
//! Interface vx0 type=vxlan options:remote_ip=… options:key=…`): where its packets go
//! and what their outer headers say. Values may be `flow`: set per packet by the
//! rules (`set_field:…->tun_dst`, `->tun_id`), as in Open vSwitch.

use std::collections::BTreeMap;
use std::net::IpAddr;

use vsw_packet::tunnel::{PacketTypeMode, TunnelKind};

/// The options tunnel ports take, under Open vSwitch's names.
pub const OPTION_KEYS: &[&str] = &[
    "remote_ip",
    "local_ip",
    "key",
    "dst_port",
    "csum",
    "df_default",
    "tos",
    "ttl",
    "exts",
    "packet_type",
];

/// A value fixed by the port, or taken from the flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FromFlow<T> {
    Fixed(T),
    Flow,
}

/// TOS and TTL: fixed, or inherited from the inner packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Inherit {
    Fixed(u8),
    Inherit,
}

impl Inherit {
    /// The fixed value, or `inner` (the inner packet's) when inherited.
    pub fn or_inner(self, inner: u8) -> u8 {
        match self {
            Inherit::Fixed(n) => n,
            Inherit::Inherit => inner,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TunnelConfig {
    pub kind: TunnelKind,
    pub remote: FromFlow<IpAddr>,
    /// The outer source; `None`: the route's.
    pub local: Option<FromFlow<IpAddr>>,
    pub key: FromFlow<u32>,
    pub dst_port: u16,
    pub csum: bool,
    pub df: bool,
    pub tos: Inherit,
    pub ttl: Inherit,
    /// VXLAN with the Generic Protocol Extension (`exts=gpe`): it carries IP and
    /// NSH packets without an Ethernet header too.
    pub gpe: bool,
    /// What the port does with packets that are not Ethernet (`packet_type`).
    pub packet_type: PacketTypeMode,
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TunnelConfigError {
    #[error("a {0} port needs options:remote_ip (an address, or flow)")]
    NoRemote(&'static str),
    #[error("options:{key}={value:?}: {why}")]
    Bad {
        key: String,
        value: String,
        why: &'static str,
    },
    #[error("remote_ip and local_ip must be of one family")]
    MixedFamilies,
}

fn bad(key: &str, value: &str, why: &'static str) -> TunnelConfigError {
    TunnelConfigError::Bad {
        key: key.to_string(),
        value: value.to_string(),
        why,
    }
}

fn address(key: &str, v: &str) -> Result<FromFlow<IpAddr>, TunnelConfigError> {
    if v == "flow" {
        return Ok(FromFlow::Flow);
    }
    let ip: IpAddr = v
        .parse()
        .map_err(|_| bad(key, v, "an IPv4 or IPv6 address, or flow"))?;
    if ip.is_unspecified() || ip.is_multicast() {
        return Err(bad(key, v, "a unicast address"));
    }
    Ok(FromFlow::Fixed(ip))
}

fn boolean(key: &str, v: &str) -> Result<bool, TunnelConfigError> {
    match v {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(bad(key, v, "true or false")),
    }
}

fn byte_or_inherit(key: &str, v: &str, max: u8) -> Result<Inherit, TunnelConfigError> {
    if v == "inherit" {
        return Ok(Inherit::Inherit);
    }
    match v.parse::<u8>() {
        Ok(n) if n <= max => Ok(Inherit::Fixed(n)),
        _ => Err(bad(key, v, "a number, or inherit")),
    }
}

impl TunnelConfig {
    /// Reads a `kind` port's options. Keys of other port types are left to them;
    /// an unknown tunnel option is an error, so a typo is not silently ignored.
    pub fn parse(
        kind: TunnelKind,
        options: &BTreeMap<String, String>,
    ) -> Result<TunnelConfig, TunnelConfigError> {
        let name = match kind {
            TunnelKind::Vxlan => "vxlan",
            TunnelKind::Geneve => "geneve",
        };
        let mut c = TunnelConfig {
            kind,
            remote: FromFlow::Flow,
            local: None,
            key: FromFlow::Fixed(0),
            dst_port: kind.default_port(),
            csum: false,
            df: true,
            tos: Inherit::Fixed(0),
            ttl: Inherit::Fixed(64),
            gpe: false,
            packet_type: PacketTypeMode::LegacyL2,
        };
        let mut remote = None;
        for (k, v) in options {
            match k.as_str() {
                "remote_ip" => remote = Some(address(k, v)?),
                "local_ip" => c.local = Some(address(k, v)?),
                "key" => {
                    c.key = match v.as_str() {
                        "flow" => FromFlow::Flow,
                        n => FromFlow::Fixed(
                            n.parse::<u32>()
                                .ok()
                                .filter(|&n| n < 1 << 24)
                                .ok_or_else(|| bad(k, v, "a 24-bit VNI, or flow"))?,
                        ),
                    }
                }
                "dst_port" => {
                    c.dst_port = v
                        .parse::<u16>()
                        .ok()
                        .filter(|&p| p != 0)
                        .ok_or_else(|| bad(k, v, "a UDP port"))?
                }
                "csum" => c.csum = boolean(k, v)?,
                "df_default" => c.df = boolean(k, v)?,
                "tos" => c.tos = byte_or_inherit(k, v, 255)?,
                "ttl" => c.ttl = byte_or_inherit(k, v, 255)?,
                "exts" if kind == TunnelKind::Vxlan => {
                    for ext in v.split(',').map(str::trim) {
                        match ext {
                            "gpe" => c.gpe = true,
                            "gbp" => return Err(bad(k, v, "gbp (group policy) is not built")),
                            _ => return Err(bad(k, v, "an extension of VXLAN: gpe")),
                        }
                    }
                }
                "exts" => return Err(bad(k, v, "only VXLAN takes extensions")),
                "packet_type" => {
                    c.packet_type = match v.as_str() {
                        "legacy_l2" => PacketTypeMode::LegacyL2,
                        "legacy_l3" => PacketTypeMode::LegacyL3,
                        "ptap" => PacketTypeMode::Ptap,
                        _ => return Err(bad(k, v, "legacy_l2, legacy_l3 or ptap")),
                    }
                }
                _ => return Err(bad(k, v, "not an option of tunnel ports")),
            }
        }
        // As Open vSwitch: only a tunnel that carries packets without Ethernet
        // (VXLAN-GPE here) may be an L3 port.
        if c.packet_type == PacketTypeMode::LegacyL3 && !c.gpe {
            return Err(bad(
                "packet_type",
                "legacy_l3",
                "only a tunnel that carries L3 packets (VXLAN with exts=gpe) takes it",
            ));
        }
        c.remote = remote.ok_or(TunnelConfigError::NoRemote(name))?;
        if let (FromFlow::Fixed(r), Some(FromFlow::Fixed(l))) = (c.remote, c.local) {
            if r.is_ipv4() != l.is_ipv4() {
                return Err(TunnelConfigError::MixedFamilies);
            }
        }
        if matches!(c.ttl, Inherit::Fixed(0)) {
            return Err(bad("ttl", "0", "1 to 255, or inherit"));
        }
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn open_vswitch_options_read_as_it_means_them() {
        let c = TunnelConfig::parse(
            TunnelKind::Vxlan,
            &opts(&[("remote_ip", "198.18.5.1"), ("key", "42")]),
        )
        .unwrap();
        assert_eq!(c.remote, FromFlow::Fixed("198.18.5.1".parse().unwrap()));
        assert_eq!(
            (c.key, c.dst_port, c.csum, c.df),
            (FromFlow::Fixed(42), 4789, false, true)
        );
        assert_eq!(
            (c.tos, c.ttl, c.local),
            (Inherit::Fixed(0), Inherit::Fixed(64), None)
        );
        let c = TunnelConfig::parse(
            TunnelKind::Geneve,
            &opts(&[
                ("remote_ip", "flow"),
                ("local_ip", "2001:db8::1"),
                ("key", "flow"),
                ("dst_port", "16081"),
                ("csum", "true"),
                ("df_default", "false"),
                ("tos", "inherit"),
                ("ttl", "inherit"),
            ]),
        )
        .unwrap();
        assert_eq!((c.remote, c.key), (FromFlow::Flow, FromFlow::Flow));
        assert_eq!(
            c.local,
            Some(FromFlow::Fixed("2001:db8::1".parse().unwrap()))
        );
        assert_eq!((c.dst_port, c.csum, c.df), (16081, true, false));
        assert_eq!((c.tos, c.ttl), (Inherit::Inherit, Inherit::Inherit));
    }

    #[test]
    fn bad_options_name_the_problem() {
        let parse = |pairs: &[(&str, &str)]| {
            TunnelConfig::parse(TunnelKind::Vxlan, &opts(pairs))
                .unwrap_err()
                .to_string()
        };
        assert!(parse(&[("key", "1")]).contains("needs options:remote_ip"));
        for (k, v) in [
            ("remote_ip", "nonsense"),
            ("remote_ip", "0.0.0.0"),
            ("remote_ip", "224.0.0.1"),
            ("key", "16777216"),
            ("key", "-1"),
            ("dst_port", "0"),
            ("csum", "yes"),
            ("ttl", "0"),
            ("tos", "256"),
            ("remote_port", "1"),
        ] {
            let e = parse(&[("remote_ip", "198.18.0.1"), (k, v)]);
            assert!(e.contains(k), "{k}={v}: {e}");
        }
        assert!(parse(&[("remote_ip", "198.18.0.1"), ("local_ip", "::1")]).contains("one family"));
        for (k, v) in [
            ("exts", "gbp"),
            ("exts", "gpe,nonsense"),
            ("packet_type", "l3"),
            ("packet_type", "legacy_l3"),
        ] {
            let e = parse(&[("remote_ip", "198.18.0.1"), (k, v)]);
            assert!(e.contains(k), "{k}={v}: {e}");
        }
        let e = TunnelConfig::parse(
            TunnelKind::Geneve,
            &opts(&[("remote_ip", "198.18.0.1"), ("exts", "gpe")]),
        )
        .unwrap_err();
        assert!(e.to_string().contains("exts"), "{e}");
    }

    #[test]
    fn vxlan_gpe_takes_every_packet_type_mode() {
        let parse = |pairs: &[(&str, &str)]| {
            let mut all = vec![("remote_ip", "198.18.0.1")];
            all.extend_from_slice(pairs);
            TunnelConfig::parse(TunnelKind::Vxlan, &opts(&all)).unwrap()
        };
        let c = parse(&[("exts", "gpe")]);
        assert_eq!((c.gpe, c.packet_type), (true, PacketTypeMode::LegacyL2));
        assert_eq!(c.dst_port, 4789, "Open vSwitch's default for GPE too");
        for mode in [PacketTypeMode::LegacyL3, PacketTypeMode::Ptap] {
            let c = parse(&[("exts", "gpe"), ("packet_type", mode.name())]);
            assert_eq!((c.gpe, c.packet_type), (true, mode));
        }
        assert!(!parse(&[]).gpe);
    }
}
