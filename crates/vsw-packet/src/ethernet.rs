//! Ethernet II and 802.1Q framing.

pub const ETH_HDR_LEN: usize = 14;
pub const VLAN_TAG_LEN: usize = 4;

/// Ethertypes vsw understands.
pub struct EtherType;

impl EtherType {
    pub const IPV4: u16 = 0x0800;
    pub const ARP: u16 = 0x0806;
    pub const VLAN: u16 = 0x8100;
    pub const QINQ: u16 = 0x88a8;
    pub const IPV6: u16 = 0x86dd;
}

/// An 802.1Q tag: its TPID and the 16-bit tag control information (PCP, DEI, VID).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VlanTag {
    pub tpid: u16,
    pub tci: u16,
}

impl VlanTag {
    pub fn vid(&self) -> u16 {
        self.tci & 0x0fff
    }
}

/// Copies `frame` into `out`, putting `tag` back after the two MAC addresses when the
/// receiving device took it out of the frame (Linux does so on receive).
/// Returns the bytes written, or `None` when `out` is too small or the frame has no
/// room for addresses.
pub fn copy_frame(out: &mut [u8], frame: &[u8], tag: Option<VlanTag>) -> Option<usize> {
    match tag {
        None => {
            out.get_mut(..frame.len())?.copy_from_slice(frame);
            Some(frame.len())
        }
        Some(tag) => {
            if frame.len() < 12 {
                return None;
            }
            let total = frame.len() + VLAN_TAG_LEN;
            let out = out.get_mut(..total)?;
            out[..12].copy_from_slice(&frame[..12]);
            out[12..14].copy_from_slice(&tag.tpid.to_be_bytes());
            out[14..16].copy_from_slice(&tag.tci.to_be_bytes());
            out[16..].copy_from_slice(&frame[12..]);
            Some(total)
        }
    }
}

/// The length of what follows the Ethernet header and any VLAN tags in it (at most
/// two): the IP packet's length, which an MTU limits.
pub fn l3_len(frame: &[u8]) -> usize {
    let ethertype = |at: usize| {
        frame
            .get(at..at + 2)
            .map_or(0, |b| u16::from_be_bytes([b[0], b[1]]))
    };
    let mut l2 = ETH_HDR_LEN;
    let mut t = ethertype(12);
    for _ in 0..2 {
        if t != EtherType::VLAN && t != EtherType::QINQ {
            break;
        }
        l2 += VLAN_TAG_LEN;
        t = ethertype(l2 - 2);
    }
    frame.len().saturating_sub(l2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn l3_length_after_tags() {
        let mut f = vec![0u8; 14 + 100];
        f[12..14].copy_from_slice(&EtherType::IPV4.to_be_bytes());
        assert_eq!(l3_len(&f), 100);
        // QinQ: two tags before the IP packet.
        let mut q = vec![0u8; 22 + 100];
        q[12..14].copy_from_slice(&EtherType::QINQ.to_be_bytes());
        q[16..18].copy_from_slice(&EtherType::VLAN.to_be_bytes());
        q[20..22].copy_from_slice(&EtherType::IPV6.to_be_bytes());
        assert_eq!(l3_len(&q), 100);
        assert_eq!(l3_len(&[0u8; 5]), 0, "a stub of a frame");
    }

    #[test]
    fn copy_reinserts_tag() {
        let frame: Vec<u8> = (0u8..20).collect();
        let mut out = [0u8; 64];
        let n = copy_frame(
            &mut out,
            &frame,
            Some(VlanTag {
                tpid: EtherType::VLAN,
                tci: 0x2064,
            }),
        )
        .unwrap();
        assert_eq!(n, 24);
        assert_eq!(&out[..12], &frame[..12]);
        assert_eq!(&out[12..16], &[0x81, 0x00, 0x20, 0x64]);
        assert_eq!(&out[16..24], &frame[12..]);
    }

    #[test]
    fn copy_refuses_small_output() {
        let mut out = [0u8; 4];
        assert_eq!(copy_frame(&mut out, &[0u8; 14], None), None);
        assert_eq!(
            copy_frame(
                &mut [0u8; 64],
                &[0u8; 6],
                Some(VlanTag {
                    tpid: 0x8100,
                    tci: 1
                })
            ),
            None
        );
    }
}
