//! The virtio-net header (`struct virtio_net_hdr`, 10 bytes, little-endian on every Linux
//! host vsw runs on) that AF_PACKET with PACKET_VNET_HDR, tap and vhost-user put before a
//! frame to describe checksum and segmentation offload.

pub const VNET_HDR_LEN: usize = 10;

/// `struct virtio_net_hdr_mrg_rxbuf`: the header and `num_buffers` after it, as a
/// guest with mergeable receive buffers (or virtio 1.0) takes it.
pub const VNET_HDR_MRG_LEN: usize = 12;
const NUM_BUFFERS: core::ops::Range<usize> = 10..12;

/// Writes `num_buffers` (the guest buffers one received frame spans) into a header of
/// [`VNET_HDR_MRG_LEN`] bytes.
pub fn write_num_buffers(hdr: &mut [u8], n: u16) {
    hdr[NUM_BUFFERS].copy_from_slice(&n.to_le_bytes());
}

pub const VNET_F_NEEDS_CSUM: u8 = 1;
pub const VNET_F_DATA_VALID: u8 = 2;

pub const VNET_GSO_NONE: u8 = 0;
pub const VNET_GSO_TCPV4: u8 = 1;
pub const VNET_GSO_UDP: u8 = 3;
pub const VNET_GSO_TCPV6: u8 = 4;
pub const VNET_GSO_ECN: u8 = 0x80;

/// Offload state of one frame, as the kernel or guest described it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VnetHdr {
    pub flags: u8,
    pub gso_type: u8,
    pub hdr_len: u16,
    pub gso_size: u16,
    pub csum_start: u16,
    pub csum_offset: u16,
}

impl VnetHdr {
    /// Reads a header; `None` when fewer than 10 bytes are given.
    pub fn read(bytes: &[u8]) -> Option<VnetHdr> {
        let b: &[u8; VNET_HDR_LEN] = bytes.get(..VNET_HDR_LEN)?.try_into().ok()?;
        Some(VnetHdr {
            flags: b[0],
            gso_type: b[1],
            hdr_len: u16::from_le_bytes([b[2], b[3]]),
            gso_size: u16::from_le_bytes([b[4], b[5]]),
            csum_start: u16::from_le_bytes([b[6], b[7]]),
            csum_offset: u16::from_le_bytes([b[8], b[9]]),
        })
    }

    /// Writes the header into the first 10 bytes of `out` (which must hold them).
    pub fn write(&self, out: &mut [u8; VNET_HDR_LEN]) {
        out[0] = self.flags;
        out[1] = self.gso_type;
        out[2..4].copy_from_slice(&self.hdr_len.to_le_bytes());
        out[4..6].copy_from_slice(&self.gso_size.to_le_bytes());
        out[6..8].copy_from_slice(&self.csum_start.to_le_bytes());
        out[8..10].copy_from_slice(&self.csum_offset.to_le_bytes());
    }

    pub fn is_gso(&self) -> bool {
        self.gso_type & !VNET_GSO_ECN != VNET_GSO_NONE
    }

    /// The same offload state for a frame whose headers grew by `by` bytes in front of
    /// the checksummed region (a VLAN tag put back in).
    pub fn shifted(&self, by: u16) -> VnetHdr {
        let mut h = *self;
        if h.flags & VNET_F_NEEDS_CSUM != 0 {
            h.csum_start = h.csum_start.saturating_add(by);
        }
        if h.hdr_len != 0 {
            h.hdr_len = h.hdr_len.saturating_add(by);
        }
        h
    }

    /// The offload state a decapsulated inner frame keeps, `at` bytes into the outer
    /// one: a checksum its sender left to finish inside it (Linux's vxlan device
    /// leaves the inner TCP or UDP checksum so), moved to where the inner frame
    /// starts; none when what was left was in the outer headers.
    pub fn of_inner(&self, at: usize) -> VnetHdr {
        match u16::try_from(at) {
            Ok(off) if self.flags & VNET_F_NEEDS_CSUM != 0 && self.csum_start >= off => {
                self.unshifted(off)
            }
            _ => VnetHdr::default(),
        }
    }

    /// The same offload state for a frame whose headers shrank by `by` bytes in front
    /// of the checksummed region (a VLAN tag taken out).
    pub fn unshifted(&self, by: u16) -> VnetHdr {
        let mut h = *self;
        if h.flags & VNET_F_NEEDS_CSUM != 0 {
            h.csum_start = h.csum_start.saturating_sub(by);
        }
        if h.hdr_len != 0 {
            h.hdr_len = h.hdr_len.saturating_sub(by);
        }
        h
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let h = VnetHdr {
            flags: VNET_F_NEEDS_CSUM,
            gso_type: VNET_GSO_TCPV4,
            hdr_len: 66,
            gso_size: 1448,
            csum_start: 34,
            csum_offset: 16,
        };
        let mut buf = [0u8; VNET_HDR_LEN];
        h.write(&mut buf);
        assert_eq!(VnetHdr::read(&buf), Some(h));
        assert!(h.is_gso());
        assert_eq!(h.shifted(4).csum_start, 38);
        assert_eq!(h.shifted(4).hdr_len, 70);
    }

    #[test]
    fn short_input_is_none() {
        assert_eq!(VnetHdr::read(&[0; 9]), None);
    }

    #[test]
    fn shift_leaves_plain_frames_alone() {
        let h = VnetHdr::default();
        assert_eq!(h.shifted(4), h);
    }
}
