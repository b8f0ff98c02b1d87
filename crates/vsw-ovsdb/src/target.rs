//! Where the database is: `unix:PATH` or `tcp:IP:PORT`, as Open vSwitch writes it.

use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    Unix(PathBuf),
    Tcp(SocketAddr),
}

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not an OVSDB target: unix:PATH or tcp:IP:PORT")]
pub struct BadTarget(pub String);

impl std::str::FromStr for Target {
    type Err = BadTarget;

    fn from_str(s: &str) -> Result<Target, BadTarget> {
        let bad = || BadTarget(s.to_string());
        match s.split_once(':') {
            Some(("unix", p)) if !p.is_empty() => Ok(Target::Unix(PathBuf::from(p))),
            Some(("tcp", a)) => {
                // `tcp:IP:PORT`, or `tcp:[IPv6]:PORT`.
                a.parse().map(Target::Tcp).map_err(|_| bad())
            }
            _ => Err(bad()),
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Unix(p) => write!(f, "unix:{}", p.display()),
            Target::Tcp(a) => write!(f, "tcp:{a}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_read_and_print_back() {
        for t in [
            "unix:/run/openvswitch/db.sock",
            "tcp:127.0.0.1:6640",
            "tcp:[::1]:6640",
        ] {
            assert_eq!(t.parse::<Target>().unwrap().to_string(), t);
        }
        for t in [
            "",
            "unix:",
            "tcp:127.0.0.1",
            "ssl:1.2.3.4:6640",
            "/run/db.sock",
        ] {
            assert!(t.parse::<Target>().is_err(), "{t}");
        }
    }
}
