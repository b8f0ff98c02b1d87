//! Software segmentation and checksums, for output ports that cannot take what a
//! kernel handed over: a TCP super-frame (virtio-net GSO) becomes segments no longer
//! than the segment size, each with its own IP length, IP id, sequence number, flags
//! and full checksums; a frame whose checksum was left to the device gets it
//! computed.

use crate::checksum::{fold, sum, tcp_pseudo_header};
use crate::ethernet::{EtherType, VLAN_TAG_LEN};
use crate::key::IPPROTO_TCP;
use crate::vnet::{VnetHdr, VNET_F_NEEDS_CSUM};

#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GsoError {
    #[error("not TCP over IPv4 or IPv6 (without extension headers)")]
    Unsupported,
    #[error("headers cut short or inconsistent")]
    Malformed,
    #[error("segment size 0")]
    NoSegmentSize,
    #[error("segment larger than the output buffer")]
    TooBig,
    #[error("checksum offsets outside the frame")]
    BadOffsets,
    #[error("more than {MAX_SEGMENTS} segments")]
    TooManySegments,
}

/// The most segments one super-frame is cut into (64 KiB in segments of 128 bytes).
/// A sender's TCP never cuts smaller; a guest that claims a segment size of 1 would
/// otherwise hold a PMD for as long as 65,535 packets take.
pub const MAX_SEGMENTS: usize = 512;

/// Where the layers of a TCP frame start.
struct Layout {
    l3: usize,
    v6: bool,
    l4: usize,
    /// End of the TCP header.
    payload: usize,
}

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn layout(frame: &[u8]) -> Result<Layout, GsoError> {
    let mut off = 12;
    let mut t = be16(frame, off).ok_or(GsoError::Malformed)?;
    for _ in 0..2 {
        if t != EtherType::VLAN && t != EtherType::QINQ {
            break;
        }
        off += VLAN_TAG_LEN;
        t = be16(frame, off).ok_or(GsoError::Malformed)?;
    }
    let l3 = off + 2;
    let (v6, l4) = match t {
        EtherType::IPV4 => {
            let ihl = usize::from(*frame.get(l3).ok_or(GsoError::Malformed)? & 0x0f) * 4;
            if ihl < 20 || frame.len() < l3 + ihl {
                return Err(GsoError::Malformed);
            }
            if frame[l3 + 9] != IPPROTO_TCP {
                return Err(GsoError::Unsupported);
            }
            (false, l3 + ihl)
        }
        EtherType::IPV6 => {
            if frame.len() < l3 + 40 {
                return Err(GsoError::Malformed);
            }
            if frame[l3 + 6] != IPPROTO_TCP {
                return Err(GsoError::Unsupported);
            }
            (true, l3 + 40)
        }
        _ => return Err(GsoError::Unsupported),
    };
    let doff = usize::from(*frame.get(l4 + 12).ok_or(GsoError::Malformed)? >> 4) * 4;
    if doff < 20 || frame.len() < l4 + doff {
        return Err(GsoError::Malformed);
    }
    Ok(Layout {
        l3,
        v6,
        l4,
        payload: l4 + doff,
    })
}

/// The pseudo-header sum for a TCP segment of `tcp_len` bytes.
fn pseudo_header(frame: &[u8], lay: &Layout, tcp_len: usize) -> u64 {
    tcp_pseudo_header(frame, lay.l3, lay.v6, tcp_len)
}

const TCP_FIN: u8 = 0x01;
const TCP_PSH: u8 = 0x08;
const TCP_CWR: u8 = 0x80;

/// Cuts the TCP super-frame `frame` into segments of at most `mss` payload bytes.
/// Each is built in `buf` (which must hold headers + `mss`) and handed to `emit`,
/// complete: lengths, IPv4 id (+1 per segment), sequence numbers, flags (FIN and PSH
/// on the last segment only, CWR on the first only) and checksums. Returns the
/// number of segments.
pub fn segment_tcp(
    frame: &[u8],
    mss: usize,
    buf: &mut [u8],
    mut emit: impl FnMut(&[u8]),
) -> Result<usize, GsoError> {
    if mss == 0 {
        return Err(GsoError::NoSegmentSize);
    }
    let lay = layout(frame)?;
    let hdr = lay.payload;
    let payload = &frame[hdr..];
    if buf.len() < hdr + mss.min(payload.len().max(1)) {
        return Err(GsoError::TooBig);
    }
    let seq0 = u32::from_be_bytes(frame[lay.l4 + 4..lay.l4 + 8].try_into().unwrap_or([0; 4]));
    let id0 = be16(frame, lay.l3 + 4).unwrap_or(0);
    let flags = frame[lay.l4 + 13];
    let chunks = payload.len().div_ceil(mss).max(1);
    if chunks > MAX_SEGMENTS {
        return Err(GsoError::TooManySegments);
    }
    for i in 0..chunks {
        let start = i * mss;
        let chunk = &payload[start.min(payload.len())..(start + mss).min(payload.len())];
        let seg_len = hdr + chunk.len();
        let seg = &mut buf[..seg_len];
        seg[..hdr].copy_from_slice(&frame[..hdr]);
        seg[hdr..].copy_from_slice(chunk);
        let l3_len = seg_len - lay.l3;
        if lay.v6 {
            seg[lay.l3 + 4..lay.l3 + 6].copy_from_slice(&((l3_len - 40) as u16).to_be_bytes());
        } else {
            seg[lay.l3 + 2..lay.l3 + 4].copy_from_slice(&(l3_len as u16).to_be_bytes());
            seg[lay.l3 + 4..lay.l3 + 6].copy_from_slice(&id0.wrapping_add(i as u16).to_be_bytes());
            seg[lay.l3 + 10..lay.l3 + 12].fill(0);
            let c = !fold(sum(&seg[lay.l3..lay.l4], 0));
            seg[lay.l3 + 10..lay.l3 + 12].copy_from_slice(&c.to_be_bytes());
        }
        let seq = seq0.wrapping_add(start as u32);
        seg[lay.l4 + 4..lay.l4 + 8].copy_from_slice(&seq.to_be_bytes());
        let mut f = flags;
        if i + 1 < chunks {
            f &= !(TCP_FIN | TCP_PSH);
        }
        if i > 0 {
            f &= !TCP_CWR;
        }
        seg[lay.l4 + 13] = f;
        seg[lay.l4 + 16..lay.l4 + 18].fill(0);
        let tcp_len = seg_len - lay.l4;
        let c = !fold(sum(&seg[lay.l4..], pseudo_header(seg, &lay, tcp_len)));
        seg[lay.l4 + 16..lay.l4 + 18].copy_from_slice(&c.to_be_bytes());
        emit(seg);
    }
    Ok(chunks)
}

/// Finishes a checksum the sender left to the device (virtio-net NEEDS_CSUM): the
/// field at `csum_start + csum_offset` holds the pseudo-header sum; the sum over
/// everything from `csum_start` on, complemented, goes there.
pub fn complete_checksum(frame: &mut [u8], vnet: &VnetHdr) -> Result<(), GsoError> {
    if vnet.flags & VNET_F_NEEDS_CSUM == 0 {
        return Ok(());
    }
    let start = usize::from(vnet.csum_start);
    let at = start + usize::from(vnet.csum_offset);
    if at + 2 > frame.len() || start > frame.len() {
        return Err(GsoError::BadOffsets);
    }
    let c = !fold(sum(&frame[start..], 0));
    // A UDP checksum of 0 means "none"; 0xffff is the same sum.
    let c = if c == 0 { 0xffff } else { c };
    frame[at..at + 2].copy_from_slice(&c.to_be_bytes());
    Ok(())
}

/// The segment size to use for `vnet`'s super-frame on an output whose MTU is
/// `mtu` (the IP packet's largest size): the sender's, or smaller when the MTU is.
pub fn segment_size(frame: &[u8], vnet: &VnetHdr, mtu: usize) -> Result<usize, GsoError> {
    let lay = layout(frame)?;
    let headers = lay.payload - lay.l3;
    let by_mtu = mtu.saturating_sub(headers);
    let mss = usize::from(vnet.gso_size).min(by_mtu);
    if mss == 0 {
        return Err(GsoError::NoSegmentSize);
    }
    // Refused whole, whoever would cut it (a device that takes super-frames too).
    if frame.len().saturating_sub(lay.payload).div_ceil(mss) > MAX_SEGMENTS {
        return Err(GsoError::TooManySegments);
    }
    Ok(mss)
}

#[cfg(test)]
mod tests;
