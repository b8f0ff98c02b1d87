use std::fmt;
use std::str::FromStr;

/// A 48-bit Ethernet address.
#[derive(
    Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, bytemuck::Pod, bytemuck::Zeroable,
)]
#[repr(transparent)]
pub struct MacAddr(pub [u8; 6]);

impl MacAddr {
    pub const BROADCAST: MacAddr = MacAddr([0xff; 6]);
    pub const ZERO: MacAddr = MacAddr([0; 6]);

    /// Group (multicast or broadcast) addresses have the low bit of the first octet set.
    pub fn is_multicast(&self) -> bool {
        self.0[0] & 1 == 1
    }

    pub fn from_slice(bytes: &[u8]) -> Option<MacAddr> {
        Some(MacAddr(bytes.get(..6)?.try_into().ok()?))
    }

    pub fn to_u64(self) -> u64 {
        self.0.iter().fold(0, |acc, b| (acc << 8) | u64::from(*b))
    }

    pub fn from_u64(v: u64) -> MacAddr {
        let b = v.to_be_bytes();
        MacAddr([b[2], b[3], b[4], b[5], b[6], b[7]])
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        )
    }
}

impl fmt::Debug for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("'{0}' is not an Ethernet address (expected six hex octets like 02:00:00:00:00:01)")]
pub struct BadMac(pub String);

impl FromStr for MacAddr {
    type Err = BadMac;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut out = [0u8; 6];
        let mut parts = s.split([':', '-']);
        for slot in out.iter_mut() {
            let part = parts.next().ok_or_else(|| BadMac(s.to_string()))?;
            if part.is_empty() || part.len() > 2 {
                return Err(BadMac(s.to_string()));
            }
            *slot = u8::from_str_radix(part, 16).map_err(|_| BadMac(s.to_string()))?;
        }
        if parts.next().is_some() {
            return Err(BadMac(s.to_string()));
        }
        Ok(MacAddr(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints() {
        let m: MacAddr = "02:0a:FF:00:00:01".parse().unwrap();
        assert_eq!(m.0, [2, 0x0a, 0xff, 0, 0, 1]);
        assert_eq!(m.to_string(), "02:0a:ff:00:00:01");
        assert_eq!(MacAddr::from_u64(m.to_u64()), m);
    }

    #[test]
    fn rejects_garbage() {
        for bad in [
            "",
            "02:00:00:00:00",
            "02:00:00:00:00:00:00",
            "zz:00:00:00:00:00",
            "020:0:0:0:0:0",
        ] {
            assert!(bad.parse::<MacAddr>().is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn multicast_bit() {
        assert!(MacAddr::BROADCAST.is_multicast());
        assert!("01:00:5e:00:00:01"
            .parse::<MacAddr>()
            .unwrap()
            .is_multicast());
        assert!(!"02:00:00:00:00:01"
            .parse::<MacAddr>()
            .unwrap()
            .is_multicast());
    }
}
