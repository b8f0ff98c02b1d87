use vsw_packet::FlowKey;

/// A masked flow key: a packet matches when its key, masked, equals the stored
/// (pre-masked) value. A zero mask bit is a wildcard.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Match {
    value: FlowKey,
    mask: FlowKey,
}

impl Match {
    /// Matches every packet.
    pub fn any() -> Match {
        Match::default()
    }

    pub fn new(value: FlowKey, mask: FlowKey) -> Match {
        Match {
            value: value.masked(&mask),
            mask,
        }
    }

    pub fn value(&self) -> &FlowKey {
        &self.value
    }

    pub fn mask(&self) -> &FlowKey {
        &self.mask
    }

    #[inline]
    pub fn matches(&self, key: &FlowKey) -> bool {
        key.words()
            .iter()
            .zip(self.mask.words())
            .zip(self.value.words())
            .all(|((k, m), v)| k & m == *v)
    }

    /// True when every packet `other` accepts is also accepted by `self`: `self`
    /// constrains no bit that `other` leaves free, and agrees where it constrains.
    pub fn covers(&self, other: &Match) -> bool {
        let subset = self
            .mask
            .words()
            .iter()
            .zip(other.mask.words())
            .all(|(s, o)| s & o == *s);
        subset && self.matches(&other.value)
    }

    /// True when some packet is accepted by both: wherever both constrain a bit,
    /// they agree on it.
    pub fn overlaps(&self, other: &Match) -> bool {
        self.value
            .words()
            .iter()
            .zip(other.value.words())
            .zip(self.mask.words().iter().zip(other.mask.words()))
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
        assert!(m.matches(&k));
        k.tp_dst = 0x1300;
        assert!(!m.matches(&k));
        assert!(Match::any().covers(&m));
        assert!(!m.covers(&Match::any()));
        assert!(m.covers(&m));
    }
}
