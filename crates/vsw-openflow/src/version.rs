//! OpenFlow versions and their negotiation.
//!
//! Each side's hello carries the highest version it speaks in its header and, from
//! 1.3.1 on, a bitmap of every version it speaks. With both bitmaps the connection
//! speaks the highest version in both; without one, the lower of the two header
//! versions, if both speak it (OpenFlow 1.3.1 §6.3.1, 1.5.1 §7.5.1).

/// A version by its wire number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum Version {
    V1_0 = 0x01,
    V1_1 = 0x02,
    V1_2 = 0x03,
    V1_3 = 0x04,
    V1_4 = 0x05,
    V1_5 = 0x06,
}

impl Version {
    pub const ALL: [Version; 6] = [
        Version::V1_0,
        Version::V1_1,
        Version::V1_2,
        Version::V1_3,
        Version::V1_4,
        Version::V1_5,
    ];

    pub fn from_wire(v: u8) -> Option<Version> {
        Version::ALL.into_iter().find(|x| *x as u8 == v)
    }

    pub fn wire(self) -> u8 {
        self as u8
    }
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (major, minor) = match self {
            Version::V1_0 => (1, 0),
            Version::V1_1 => (1, 1),
            Version::V1_2 => (1, 2),
            Version::V1_3 => (1, 3),
            Version::V1_4 => (1, 4),
            Version::V1_5 => (1, 5),
        };
        write!(f, "OpenFlow {major}.{minor}")
    }
}

/// A set of wire versions as the hello bitmap holds it: bit n is version n.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct VersionSet(pub u32);

impl VersionSet {
    /// What vsw speaks: OpenFlow 1.0 (with Nicira's extensions, what `ovs-ofctl`
    /// speaks without `-O`) to 1.5.
    pub const VSW: VersionSet =
        VersionSet((1 << 1) | (1 << 2) | (1 << 3) | (1 << 4) | (1 << 5) | (1 << 6));

    pub fn of(versions: &[Version]) -> VersionSet {
        VersionSet(versions.iter().fold(0, |m, v| m | 1 << v.wire()))
    }

    pub fn contains(self, v: u8) -> bool {
        v < 32 && self.0 & (1 << v) != 0
    }

    /// The highest version set in both.
    pub fn highest_common(self, other: VersionSet) -> Option<Version> {
        let both = self.0 & other.0;
        Version::ALL
            .into_iter()
            .rev()
            .find(|v| both & (1 << v.wire()) != 0)
    }

    /// The highest version in the set (what a hello's header carries).
    pub fn highest(self) -> Option<Version> {
        self.highest_common(self)
    }

    /// Open vSwitch's `protocols` list (`OpenFlow10,OpenFlow13`, commas or spaces
    /// between), as a set.
    pub fn parse_protocols(s: &str) -> Result<VersionSet, String> {
        let mut set = 0u32;
        for name in s.split([',', ' ']).filter(|n| !n.is_empty()) {
            let v = match name {
                "OpenFlow10" => Version::V1_0,
                "OpenFlow11" => Version::V1_1,
                "OpenFlow12" => Version::V1_2,
                "OpenFlow13" => Version::V1_3,
                "OpenFlow14" => Version::V1_4,
                "OpenFlow15" => Version::V1_5,
                other => return Err(format!("{other} is not OpenFlow10 .. OpenFlow15")),
            };
            set |= 1 << v.wire();
        }
        Ok(VersionSet(set))
    }
}

/// No version both sides speak: the connection is answered with
/// HELLO_FAILED/INCOMPATIBLE and closed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("no common OpenFlow version: the peer offers {peer}, vsw speaks 1.0 to 1.5")]
pub struct Incompatible {
    pub peer: String,
}

/// The version a connection speaks, from vsw's versions and the peer's hello (its
/// header version and, if it sent one, its bitmap).
pub fn negotiate(
    ours: VersionSet,
    peer_header: u8,
    peer_bitmap: Option<VersionSet>,
) -> Result<Version, Incompatible> {
    let found = match peer_bitmap {
        Some(theirs) => ours.highest_common(theirs),
        None => {
            let ours_highest = ours.highest().map_or(0, Version::wire);
            let v = ours_highest.min(peer_header);
            if ours.contains(v) {
                Version::from_wire(v)
            } else {
                None
            }
        }
    };
    found.ok_or_else(|| Incompatible {
        peer: match peer_bitmap {
            Some(b) => format!("versions bitmap {:#x}", b.0),
            None => format!("version {peer_header:#04x}"),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bitmaps_give_the_highest_common_version() {
        let peer = VersionSet::of(&[Version::V1_0, Version::V1_3, Version::V1_4]);
        assert_eq!(
            negotiate(VersionSet::VSW, 0x05, Some(peer)),
            Ok(Version::V1_4)
        );
        let ovn = VersionSet::of(&[Version::V1_5]);
        assert_eq!(
            negotiate(VersionSet::VSW, 0x06, Some(ovn)),
            Ok(Version::V1_5)
        );
        let old = VersionSet::of(&[Version::V1_0]);
        assert_eq!(
            negotiate(VersionSet::VSW, 0x01, Some(old)),
            Ok(Version::V1_0)
        );
        let between = VersionSet::of(&[Version::V1_1, Version::V1_2]);
        assert_eq!(
            negotiate(VersionSet::VSW, 0x03, Some(between)),
            Ok(Version::V1_2)
        );
        let v11 = VersionSet::of(&[Version::V1_1]);
        assert_eq!(
            negotiate(VersionSet::VSW, 0x02, Some(v11)),
            Ok(Version::V1_1)
        );
        let only_1_0 = VersionSet::of(&[Version::V1_0]);
        assert!(negotiate(only_1_0, 0x02, Some(v11)).is_err());
    }

    #[test]
    fn without_a_bitmap_the_lower_header_version_if_both_speak_it() {
        assert_eq!(negotiate(VersionSet::VSW, 0x04, None), Ok(Version::V1_3));
        // A peer newer than any version: the lower one is vsw's highest.
        assert_eq!(negotiate(VersionSet::VSW, 0x09, None), Ok(Version::V1_5));
        // ovs-ofctl without -O: a 1.0 hello without a bitmap.
        assert_eq!(negotiate(VersionSet::VSW, 0x01, None), Ok(Version::V1_0));
        assert_eq!(negotiate(VersionSet::VSW, 0x02, None), Ok(Version::V1_1));
        let only_1_3 = VersionSet::of(&[Version::V1_3]);
        let e = negotiate(only_1_3, 0x02, None).unwrap_err();
        assert!(e.to_string().contains("version 0x02"), "{e}");
    }

    #[test]
    fn sets_and_names() {
        assert_eq!(VersionSet::VSW.highest(), Some(Version::V1_5));
        assert!(VersionSet::VSW.contains(4) && VersionSet::VSW.contains(1));
        assert!(VersionSet::VSW.contains(2) && VersionSet::VSW.contains(3));
        assert!(!VersionSet::VSW.contains(200));
        assert_eq!(Version::V1_3.to_string(), "OpenFlow 1.3");
        assert_eq!(Version::from_wire(7), None);
    }
}
