//! Geneve options as flow fields: the option the switch's TLV map names
//! `tun_metadata0` (`ovs-ofctl add-tlv-map br-int
//! "{class=0xffff,type=0x01,len=4}->tun_metadata0"`), read from what a Geneve port
//! receives and written into what it sends.

use vsw_packet::wire::geneve;

/// The Geneve option `tun_metadata0` stands for: its class and type. Its value is
/// [`MetadataOption::LEN`] bytes, the only length the TLV map takes (the flow key
/// holds the value in half a word).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MetadataOption {
    pub class: u16,
    pub kind: u8,
}

impl MetadataOption {
    /// The option's value length, bytes.
    pub const LEN: usize = 4;

    /// Whether an option of `class` and `kind` is this one (a critical option the
    /// switch knows is taken, not dropped).
    pub fn is(&self, class: u16, kind: u8) -> bool {
        self.class == class && self.kind == kind
    }

    /// The value of this option among a packet's (whole TLVs, checked by
    /// decapsulation), as a big-endian number; `None` when the packet carries none
    /// of its length.
    pub fn value_in(&self, options: &[u8]) -> Option<u32> {
        geneve::options(options)
            .filter_map(Result::ok)
            .find(|o| self.is(o.class, o.kind) && o.data.len() == Self::LEN)
            .map(|o| o.data.iter().fold(0u32, |n, b| (n << 8) | u32::from(*b)))
    }

    /// Whether `options` (whole TLVs, checked by decapsulation) hold a critical
    /// option that is not `known` (the TLV map of the tunnel port's bridge): such a
    /// packet must be dropped (RFC 8926).
    pub fn unknown_critical(options: &[u8], known: Option<MetadataOption>) -> bool {
        geneve::options(options)
            .filter_map(Result::ok)
            .any(|o| o.is_critical() && !known.is_some_and(|k| k.is(o.class, o.kind)))
    }

    /// The option's TLV with a zero value, for a header template; the value is
    /// written per packet over its last [`MetadataOption::LEN`] bytes.
    pub fn tlv(&self) -> Vec<u8> {
        let mut t = Vec::with_capacity(4 + Self::LEN);
        t.extend_from_slice(&self.class.to_be_bytes());
        t.push(self.kind);
        t.push((Self::LEN / 4) as u8);
        t.resize(4 + Self::LEN, 0);
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mapped_option_is_read_among_others_and_written_back() {
        let m = MetadataOption {
            class: 0xffff,
            kind: 1,
        };
        let mut options = vec![0x01, 0x02, 0x80, 0x01, 9, 9, 9, 9];
        let mut mine = m.tlv();
        assert_eq!(&mine[..4], &[0xff, 0xff, 0x01, 0x01]);
        mine[4..].copy_from_slice(&0x1234u32.to_be_bytes());
        options.extend_from_slice(&mine);
        assert_eq!(m.value_in(&options), Some(0x1234));
        // Another type, or the right one of another length: not this option.
        let other = MetadataOption { kind: 2, ..m };
        assert_eq!(other.value_in(&options), None);
        let mut longer = vec![0xff, 0xff, 0x01, 0x02];
        longer.extend_from_slice(&[0; 8]);
        assert_eq!(m.value_in(&longer), None);
        assert!(m.is(0xffff, 1) && !m.is(0xfffe, 1));
        // Critical options (type 0x80 and up): known only when mapped.
        let critical = MetadataOption { kind: 0x81, ..m };
        let mut opts = critical.tlv();
        assert!(MetadataOption::unknown_critical(&opts, None));
        assert!(MetadataOption::unknown_critical(&opts, Some(m)));
        assert!(!MetadataOption::unknown_critical(&opts, Some(critical)));
        opts.truncate(0);
        opts.extend_from_slice(&m.tlv());
        assert!(
            !MetadataOption::unknown_critical(&opts, None),
            "not critical"
        );
    }
}
