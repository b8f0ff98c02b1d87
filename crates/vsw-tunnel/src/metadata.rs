//! Geneve options as flow fields: the option the switch's TLV map names
//! `tun_metadata0` (`ovs-ofctl add-tlv-map br-int
//! "{class=0xffff,type=0x01,len=4}->tun_metadata0"`), read from what a Geneve port
//! receives and written into what it sends.

use vsw_packet::wire::geneve;

/// The Geneve option `tun_metadata0` stands for: its class, type and value length
/// (4 bytes: the flow key holds the value in half a word).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MetadataOption {
    pub class: u16,
    pub kind: u8,
    pub len: u8,
}

impl MetadataOption {
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
            .find(|o| self.is(o.class, o.kind) && o.data.len() == usize::from(self.len))
            .map(|o| o.data.iter().fold(0u32, |n, b| (n << 8) | u32::from(*b)))
    }

    /// The option's TLV with a zero value, for a header template; the value is
    /// written per packet over its last [`MetadataOption::len`] bytes.
    pub fn tlv(&self) -> Vec<u8> {
        let mut t = Vec::with_capacity(4 + usize::from(self.len));
        t.extend_from_slice(&self.class.to_be_bytes());
        t.push(self.kind);
        t.push(self.len / 4);
        t.resize(4 + usize::from(self.len), 0);
        t
    }

    /// `value`'s last [`MetadataOption::len`] bytes, as the option carries them.
    pub fn bytes_of(&self, value: u32) -> ([u8; 4], usize) {
        (
            value.to_be_bytes(),
            4usize.saturating_sub(usize::from(self.len)),
        )
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
            len: 4,
        };
        let mut options = vec![0x01, 0x02, 0x80, 0x01, 9, 9, 9, 9];
        let mut mine = m.tlv();
        assert_eq!(&mine[..4], &[0xff, 0xff, 0x01, 0x01]);
        let (bytes, from) = m.bytes_of(0x1234);
        mine[4..].copy_from_slice(&bytes[from..]);
        options.extend_from_slice(&mine);
        assert_eq!(m.value_in(&options), Some(0x1234));
        // Another type, or the right one of another length: not this option.
        let other = MetadataOption { kind: 2, ..m };
        assert_eq!(other.value_in(&options), None);
        let longer = MetadataOption { len: 4 * 2, ..m };
        assert_eq!(longer.value_in(&options), None);
        assert!(m.is(0xffff, 1) && !m.is(0xfffe, 1));
    }
}
