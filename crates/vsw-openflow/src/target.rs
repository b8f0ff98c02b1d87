//! Where a controller is: `tcp:IP[:PORT]` (6653 by default, the IANA port) or
//! `unix:PATH`, as Open vSwitch writes controller targets; or where vsw listens
//! for OpenFlow connections itself, `ptcp:PORT[:IP]` (all addresses by default).
//! A target Open vSwitch takes that vsw does not speak (`ssl:`, `pssl:`, `punix:`)
//! is kept as [`Target::Unsupported`]: configured, never connected, so a bridge
//! that names one counts as having a controller and stays fail-closed.

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::str::FromStr;

/// The IANA port for OpenFlow.
pub const DEFAULT_PORT: u16 = 6653;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Target {
    Tcp(SocketAddr),
    Unix(PathBuf),
    /// A listener: whoever connects is a service connection (as the management
    /// socket's), not a controller.
    Ptcp(SocketAddr),
    /// A target vsw cannot use (a transport it does not speak, or text that is no
    /// target at all when read with [`Target::lenient`]): it never connects, and it
    /// still counts as a configured controller.
    Unsupported {
        text: String,
        why: String,
    },
}

/// Transports Open vSwitch takes that vsw does not speak.
const UNSUPPORTED_SCHEMES: &[&str] = &["ssl:", "pssl:", "punix:"];

impl Target {
    /// `text` as a target, or, when it is none, an [`Target::Unsupported`] one that
    /// says why: what a database names as a controller stays one, usable or not.
    pub fn lenient(text: &str) -> Target {
        text.parse()
            .unwrap_or_else(|e: BadTarget| Target::Unsupported {
                text: text.to_string(),
                why: e.to_string(),
            })
    }

    /// Whether vsw can connect to (or listen on) it.
    pub fn is_usable(&self) -> bool {
        !matches!(self, Target::Unsupported { .. })
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{0:?} is not a controller target: tcp:IP[:PORT], unix:PATH or ptcp:PORT[:IP]")]
pub struct BadTarget(pub String);

impl FromStr for Target {
    type Err = BadTarget;

    fn from_str(s: &str) -> Result<Target, BadTarget> {
        let bad = || BadTarget(s.to_string());
        if let Some(scheme) = UNSUPPORTED_SCHEMES.iter().find(|p| s.starts_with(*p)) {
            return Ok(Target::Unsupported {
                text: s.to_string(),
                why: format!(
                    "vsw does not speak {}: it connects over tcp: and unix: and listens on ptcp:",
                    scheme.trim_end_matches(':')
                ),
            });
        }
        if let Some(path) = s.strip_prefix("unix:") {
            return if path.is_empty() {
                Err(bad())
            } else {
                Ok(Target::Unix(path.into()))
            };
        }
        if let Some(rest) = s.strip_prefix("ptcp:") {
            // PORT, PORT:IPv4, or PORT:[IPv6] / PORT:IPv6.
            let (port, ip) = rest.split_once(':').unwrap_or((rest, "0.0.0.0"));
            let port: u16 = port.parse().map_err(|_| bad())?;
            let ip = ip.trim_start_matches('[').trim_end_matches(']');
            let ip: IpAddr = ip.parse().map_err(|_| bad())?;
            return Ok(Target::Ptcp(SocketAddr::new(ip, port)));
        }
        let rest = s.strip_prefix("tcp:").ok_or_else(bad)?;
        // `[v6]:port`, `v4:port`, or an address alone.
        if let Ok(ip) = rest.parse::<IpAddr>() {
            return Ok(Target::Tcp(SocketAddr::new(ip, DEFAULT_PORT)));
        }
        if let Some(v6) = rest.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
            let ip = v6.parse::<IpAddr>().map_err(|_| bad())?;
            return Ok(Target::Tcp(SocketAddr::new(ip, DEFAULT_PORT)));
        }
        rest.parse::<SocketAddr>()
            .map(Target::Tcp)
            .map_err(|_| bad())
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Tcp(a) if a.is_ipv6() => write!(f, "tcp:[{}]:{}", a.ip(), a.port()),
            Target::Tcp(a) => write!(f, "tcp:{}:{}", a.ip(), a.port()),
            Target::Unix(p) => write!(f, "unix:{}", p.display()),
            Target::Ptcp(a) if a.is_ipv6() => write!(f, "ptcp:{}:[{}]", a.port(), a.ip()),
            Target::Ptcp(a) => write!(f, "ptcp:{}:{}", a.port(), a.ip()),
            Target::Unsupported { text, .. } => f.write_str(text),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_read_as_open_vswitch_writes_them() {
        for (text, shown) in [
            ("tcp:127.0.0.1:6633", "tcp:127.0.0.1:6633"),
            ("tcp:127.0.0.1", "tcp:127.0.0.1:6653"),
            ("tcp:[::1]:6653", "tcp:[::1]:6653"),
            ("tcp:::1", "tcp:[::1]:6653"),
            ("unix:/run/c.sock", "unix:/run/c.sock"),
            ("ptcp:6634", "ptcp:6634:0.0.0.0"),
            ("ptcp:6634:127.0.0.1", "ptcp:6634:127.0.0.1"),
            ("ptcp:6634:[::1]", "ptcp:6634:[::1]"),
        ] {
            let t: Target = text.parse().unwrap();
            assert_eq!(t.to_string(), shown);
            assert_eq!(shown.parse::<Target>().unwrap(), t);
        }
        for bad in ["", "tcp:", "tcp:host:1", "unix:", "tcp:1.2.3.4:99999"] {
            assert!(bad.parse::<Target>().is_err(), "{bad}");
            // Kept, as a controller that never connects.
            let kept = Target::lenient(bad);
            assert!(!kept.is_usable());
            assert_eq!(kept.to_string(), bad);
        }
        // Transports Open vSwitch has and vsw does not: targets, not usable ones.
        for text in ["ssl:1.2.3.4:6653", "pssl:6653", "punix:/run/x.sock"] {
            let t: Target = text.parse().unwrap();
            assert!(!t.is_usable(), "{text}");
            assert_eq!(t.to_string(), text);
            let Target::Unsupported { why, .. } = t else {
                unreachable!()
            };
            assert!(why.contains("does not speak"), "{why}");
        }
    }
}
