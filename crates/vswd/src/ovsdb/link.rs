//! What the kernel says of an interface's link, for the columns ovs-vswitchd fills
//! from ethtool and its carrier watch: `link_speed` (bits/s), `duplex`, and the
//! carrier changes behind `link_resets`. Read from sysfs (`/sys/class/net/NAME`), which
//! answers for the namespace vswd runs in when sysfs was mounted there (as
//! `ip netns exec` does).

use std::path::Path;

/// An interface's link as sysfs reports it; `None` where it reports nothing (a link
/// that is down, a device without the notion).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkFacts {
    pub speed_bps: Option<u64>,
    pub full_duplex: Option<bool>,
    pub carrier_changes: Option<u64>,
}

impl LinkFacts {
    /// The facts of interface `name` under `sys_class_net` (`/sys/class/net`).
    pub fn read(sys_class_net: &Path, name: &str) -> LinkFacts {
        // A name that is not one file name is no interface (and no path to follow).
        if name.is_empty() || name.contains('/') || name == "." || name == ".." {
            return LinkFacts::default();
        }
        let dir = sys_class_net.join(name);
        let read = |f: &str| std::fs::read_to_string(dir.join(f)).ok();
        LinkFacts {
            // Mb/s; -1 (or an error) when unknown.
            speed_bps: read("speed")
                .and_then(|s| s.trim().parse::<u64>().ok())
                .filter(|&mbps| mbps > 0)
                .map(|mbps| mbps * 1_000_000),
            full_duplex: read("duplex").and_then(|d| match d.trim() {
                "full" => Some(true),
                "half" => Some(false),
                _ => None,
            }),
            carrier_changes: read("carrier_changes").and_then(|s| s.trim().parse().ok()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sysfs_files_read_as_ovs_columns() {
        let dir = std::env::temp_dir().join(format!("vsw-link-{}", std::process::id()));
        let up = dir.join("veth9");
        std::fs::create_dir_all(&up).unwrap();
        std::fs::write(up.join("speed"), "10000\n").unwrap();
        std::fs::write(up.join("duplex"), "full\n").unwrap();
        std::fs::write(up.join("carrier_changes"), "4\n").unwrap();
        let unknown = dir.join("eth0");
        std::fs::create_dir_all(&unknown).unwrap();
        std::fs::write(unknown.join("speed"), "-1\n").unwrap();
        std::fs::write(unknown.join("duplex"), "unknown\n").unwrap();
        assert_eq!(
            LinkFacts::read(&dir, "veth9"),
            LinkFacts {
                speed_bps: Some(10_000_000_000),
                full_duplex: Some(true),
                carrier_changes: Some(4),
            }
        );
        assert_eq!(LinkFacts::read(&dir, "eth0"), LinkFacts::default());
        assert_eq!(LinkFacts::read(&dir, "missing"), LinkFacts::default());
        assert_eq!(LinkFacts::read(&dir, "../veth9"), LinkFacts::default());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
