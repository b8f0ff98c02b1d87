use std::hash::Hash;

#[cfg(test)]
use vsw_packet::FlowKey;

use crate::match_key::MatchKey;

/// A key a match can be over: plain words, compared and masked as such.
pub trait MatchWords: bytemuck::Pod + Default + Eq + Hash + std::fmt::Debug {}

impl<K: bytemuck::Pod + Default + Eq + Hash + std::fmt::Debug> MatchWords for K {}

fn words<K: MatchWords>(k: &K) -> &[u64] {
    bytemuck::cast_slice(std::slice::from_ref(k))
}

/// A masked key: a packet matches when its key, masked, equals the stored
/// (pre-masked) value. A zero mask bit is a wildcard.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Masked<K> {
    value: K,
    mask: K,
}

/// What a rule matches: the packet's key and the pipeline's fields.
pub type Match = Masked<MatchKey>;

/// What a datapath flow matches: the packet's key alone (the pipeline's fields are
/// translation's: see [`crate::match_key`]).
pub type PacketMatch = Masked<vsw_packet::FlowKey>;

impl From<PacketMatch> for Match {
    fn from(m: PacketMatch) -> Match {
        Match {
            value: m.value.into(),
            mask: m.mask.into(),
        }
    }
}

impl<K: MatchWords> Masked<K> {
    /// Matches every packet.
    pub fn any() -> Masked<K> {
        Masked::default()
    }

    /// A match of `value` under `mask` (for a rule's [`Match`]: a packet's key alone,
    /// a `FlowKey`, with no pipeline field matched, or a [`MatchKey`]).
    pub fn new(value: impl Into<K>, mask: impl Into<K>) -> Masked<K> {
        let (mut value, mask) = (value.into(), mask.into());
        let v: &mut [u64] = bytemuck::cast_slice_mut(std::slice::from_mut(&mut value));
        for (w, m) in v.iter_mut().zip(words(&mask)) {
            *w &= m;
        }
        Masked { value, mask }
    }

    pub fn value(&self) -> &K {
        &self.value
    }

    pub fn mask(&self) -> &K {
        &self.mask
    }

    #[inline]
    pub fn matches(&self, key: &K) -> bool {
        words(key)
            .iter()
            .zip(words(&self.mask))
            .zip(words(&self.value))
            .all(|((k, m), v)| k & m == *v)
    }

    /// True when every packet `other` accepts is also accepted by `self`: `self`
    /// constrains no bit that `other` leaves free, and agrees where it constrains.
    pub fn covers(&self, other: &Masked<K>) -> bool {
        let subset = words(&self.mask)
            .iter()
            .zip(words(&other.mask))
            .all(|(s, o)| s & o == *s);
        subset && self.matches(&other.value)
    }

    /// True when some packet is accepted by both: wherever both constrain a bit,
    /// they agree on it.
    pub fn overlaps(&self, other: &Masked<K>) -> bool {
        words(&self.value)
            .iter()
            .zip(words(&other.value))
            .zip(words(&self.mask).iter().zip(words(&other.mask)))
            .all(|((a, b), (ma, mb))| (a ^ b) & ma & mb == 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlapping_matches_share_a_packet() {
        let m = |tp_src: u16, mask: u16, proto: u8| {
            Match::new(
                FlowKey {
                    tp_src,
                    nw_proto: proto,
                    ..FlowKey::default()
                },
                FlowKey {
                    tp_src: mask,
                    nw_proto: 0xff,
                    ..FlowKey::default()
                },
            )
        };
        assert!(m(80, 0xffff, 6).overlaps(&m(80, 0xffff, 6)));
        assert!(
            m(80, 0xffff, 6).overlaps(&m(0, 0, 6)),
            "a wildcard overlaps"
        );
        assert!(!m(80, 0xffff, 6).overlaps(&m(81, 0xffff, 6)));
        assert!(
            !m(80, 0xffff, 6).overlaps(&m(80, 0xffff, 17)),
            "tcp and udp"
        );
        assert!(Match::any().overlaps(&m(80, 0xffff, 6)));
    }

    #[test]
    fn masked_bits_are_wildcards() {
        let value = FlowKey {
            tp_dst: 0x1234,
            nw_dst: 0xc612_0000,
            ..FlowKey::default()
        };
        let mask = FlowKey {
            tp_dst: 0xff00,
            nw_dst: 0xffff_0000,
            ..FlowKey::default()
        };
        let m = Match::new(value, mask);
        assert_eq!(m.value().tp_dst, 0x1200, "the value is stored masked");
        let mut k = FlowKey {
            tp_dst: 0x12ff,
            nw_dst: 0xc612_0102,
            in_port: 9,
            ..FlowKey::default()
        };
        assert!(m.matches(&k.into()));
        k.tp_dst = 0x1300;
        assert!(!m.matches(&k.into()));
        assert!(Match::any().covers(&m));
        assert!(!m.covers(&Match::any()));
        assert!(m.covers(&m));
    }
}
