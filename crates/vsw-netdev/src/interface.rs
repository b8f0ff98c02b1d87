//! Facts about Linux network interfaces.

use crate::sys;

/// The kernel's index of interface `name`, or `None` when it does not exist.
pub fn index(name: &str) -> Option<u32> {
    sys::if_index(name)
}

/// Interface names are 1 to 15 bytes with no '/', whitespace or NUL (IFNAMSIZ).
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() < 16
        && name != "."
        && name != ".."
        && !name
            .bytes()
            .any(|b| b == b'/' || b == 0 || b.is_ascii_whitespace() || b == b':')
}

/// The MTU of interface `name` (what its largest IP packet may be).
pub fn mtu(name: &str) -> std::io::Result<u32> {
    sys::interface_mtu(name)
}

/// Sets the MTU of interface `name`; the kernel's error when it refuses.
pub fn set_mtu(name: &str, mtu: u32) -> std::io::Result<()> {
    sys::set_interface_mtu(name, mtu)
}

/// Whether interface `name` is administratively up (IFF_UP); `None` when there
/// is no such interface.
pub fn admin_up(name: &str) -> Option<bool> {
    if !valid_name(name) {
        return None;
    }
    let flags = std::fs::read_to_string(format!("/sys/class/net/{name}/flags")).ok()?;
    let flags = u32::from_str_radix(flags.trim().trim_start_matches("0x"), 16).ok()?;
    Some(flags & libc::IFF_UP as u32 != 0)
}

/// Sets interface `name` administratively up or down (`ip link set … up|down`).
pub fn set_admin_up(name: &str, up: bool) -> std::io::Result<()> {
    sys::set_link_admin(name, up)
}

/// The hardware address of interface `name`, or `None` when there is no such
/// interface (or it has none of six bytes).
pub fn mac(name: &str) -> Option<vsw_packet::MacAddr> {
    if !valid_name(name) {
        return None;
    }
    std::fs::read_to_string(format!("/sys/class/net/{name}/address"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn loopback_has_a_mac_and_a_bad_name_none() {
        assert_eq!(super::mac("lo"), Some(vsw_packet::MacAddr([0; 6])));
        assert_eq!(super::mac("../lo"), None);
        assert_eq!(super::mac("no-such-if0"), None);
    }
}
