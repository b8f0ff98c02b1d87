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
    /// Administratively up (IFF_UP): Open vSwitch's `admin_state`.
    pub admin_up: Option<bool>,
    /// Has a carrier (the kernel's operational state is up): Open vSwitch's
    /// `link_state`. A tap nobody brought up, or whose file nobody holds, has none.
    pub carrier: Option<bool>,
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
            admin_up: read("flags")
                .and_then(|f| u32::from_str_radix(f.trim().trim_start_matches("0x"), 16).ok())
                .map(|f| f & libc::IFF_UP as u32 != 0),
            // `carrier` cannot be read while the link is down: no carrier then.
            carrier: read("operstate").map(|_| read("carrier").is_some_and(|c| c.trim() == "1")),
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
        std::fs::write(up.join("flags"), "0x1003\n").unwrap();
        std::fs::write(up.join("operstate"), "up\n").unwrap();
        std::fs::write(up.join("carrier"), "1\n").unwrap();
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
                admin_up: Some(true),
                carrier: Some(true),
            }
        );
        assert_eq!(LinkFacts::read(&dir, "eth0"), LinkFacts::default());
        // Down: no carrier file to read, the flags without IFF_UP.
        let down = dir.join("tap9");
        std::fs::create_dir_all(&down).unwrap();
        std::fs::write(down.join("flags"), "0x1002\n").unwrap();
        std::fs::write(down.join("operstate"), "down\n").unwrap();
        let facts = LinkFacts::read(&dir, "tap9");
        assert_eq!((facts.admin_up, facts.carrier), (Some(false), Some(false)));
        assert_eq!(LinkFacts::read(&dir, "missing"), LinkFacts::default());
        assert_eq!(LinkFacts::read(&dir, "../veth9"), LinkFacts::default());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
