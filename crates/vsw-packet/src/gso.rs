//! Software segmentation and checksums, for output ports that cannot take what a
//! kernel handed over: a TCP super-frame (virtio-net GSO) becomes segments no longer
//! than the segment size, each with its own IP length, IP id, sequence number, flags
//! and full checksums; a frame whose checksum was left to the device gets it
//! computed.

use crate::checksum::{fold, sum};
use crate::vnet::{VnetHdr, VNET_F_NEEDS_CSUM};
use crate::wire::ethernet::{self, EtherType};
use crate::wire::ip::IPPROTO_TCP;
use crate::wire::{ipv4, ipv6, tcp};

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

/// Where the layers of a TCP frame start: parsed once when the segment size is
/// decided ([`segment_size_and_layout`]), and handed to the cut
/// ([`segment_tcp_laid_out`]), which then parses nothing again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    l3: usize,
    v6: bool,
    l4: usize,
    /// End of the TCP header.
    payload: usize,
}

impl Layout {
    /// The same layout for the frame placed `by` bytes further on.
    fn shifted(self, by: usize) -> Layout {
        Layout {
            l3: self.l3 + by,
            l4: self.l4 + by,
            payload: self.payload + by,
            ..self
        }
    }
}

fn layout(frame: &[u8]) -> Result<Layout, GsoError> {
    let (t, l3) = ethernet::l3(frame).ok_or(GsoError::Malformed)?;
    let (v6, l4) = match t {
        EtherType::IPV4 => {
            let ip = ipv4::Packet::new_checked(&frame[l3..]).map_err(|_| GsoError::Malformed)?;
            if ip.protocol() != IPPROTO_TCP {
                return Err(GsoError::Unsupported);
            }
            (false, l3 + ip.header_len())
        }
        EtherType::IPV6 => {
            let ip = ipv6::Packet::new_checked(&frame[l3..]).map_err(|_| GsoError::Malformed)?;
            if ip.next_header() != IPPROTO_TCP {
                return Err(GsoError::Unsupported);
            }
            (true, l3 + ipv6::HEADER_LEN)
        }
        _ => return Err(GsoError::Unsupported),
    };
    let tcp = tcp::Packet::new_checked(&frame[l4..]).map_err(|_| GsoError::Malformed)?;
    Ok(Layout {
        l3,
        v6,
        l4,
        payload: l4 + tcp.header_len(),
    })
}

/// The pseudo-header sum for a TCP segment of `tcp_len` bytes.
fn pseudo_header(frame: &[u8], lay: &Layout, tcp_len: usize) -> u64 {
    tcp::pseudo_header_sum(frame, lay.l3, lay.v6, tcp_len)
}

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
    segment_tcp_at(frame, 0, mss, buf, |seg, _| emit(seg))
}

/// Splits the TCP super-frame `frame` (segments of `gso_size` payload bytes) into
/// smaller super-frames whose IP packets are at most `max_ip_len` bytes, each built
/// in `buf` and handed to `emit`: payloads of whole segments, lengths, sequence
/// numbers and flags as [`segment_tcp`] makes them, and the TCP checksum field
/// holding the pseudo-header sum, as a sender leaves it for whoever segments it.
/// For a tunnel, whose outer headers would take a 64 KiB super-frame past IP's
/// largest packet. Returns the number of parts.
pub fn split_super_frame(
    frame: &[u8],
    gso_size: usize,
    max_ip_len: usize,
    buf: &mut [u8],
    mut emit: impl FnMut(&[u8]),
) -> Result<usize, GsoError> {
    let lay = layout(frame)?;
    let per_part = max_ip_len.saturating_sub(lay.payload - lay.l3) / gso_size.max(1) * gso_size;
    segment_tcp_at(frame, 0, per_part, buf, |seg, _| {
        let pseudo = fold(pseudo_header(seg, &lay, seg.len() - lay.l4));
        if let Ok(mut t) = tcp::Packet::new_checked(&mut seg[lay.l4..]) {
            t.set_checksum(pseudo);
        }
        emit(seg);
    })
}

/// [`segment_tcp`] for a TCP frame that starts `at` bytes into `frame` (behind
/// outer headers a tunnel put there, copied unchanged into every segment); `emit`
/// gets each whole segment, outer headers included, and its index, to finish the
/// outer headers.
pub(crate) fn segment_tcp_at(
    frame: &[u8],
    at: usize,
    mss: usize,
    buf: &mut [u8],
    emit: impl FnMut(&mut [u8], usize),
) -> Result<usize, GsoError> {
    if mss == 0 {
        return Err(GsoError::NoSegmentSize);
    }
    let inner = frame.get(at..).ok_or(GsoError::Malformed)?;
    let lay = layout(inner)?.shifted(at);
    segment_tcp_with(frame, &lay, mss, buf, emit)
}

/// [`segment_tcp`] with the layout [`segment_size_and_layout`] found for `frame`.
pub fn segment_tcp_laid_out(
    frame: &[u8],
    lay: &Layout,
    mss: usize,
    buf: &mut [u8],
    mut emit: impl FnMut(&[u8]),
) -> Result<usize, GsoError> {
    if mss == 0 {
        return Err(GsoError::NoSegmentSize);
    }
    if lay.payload > frame.len() {
        return Err(GsoError::Malformed);
    }
    segment_tcp_with(frame, lay, mss, buf, |seg, _| emit(seg))
}

fn segment_tcp_with(
    frame: &[u8],
    lay: &Layout,
    mss: usize,
    buf: &mut [u8],
    mut emit: impl FnMut(&mut [u8], usize),
) -> Result<usize, GsoError> {
    let hdr = lay.payload;
    let payload = &frame[hdr..];
    if buf.len() < hdr + mss.min(payload.len().max(1)) {
        return Err(GsoError::TooBig);
    }
    let tcp0 = tcp::Packet::new_checked(&frame[lay.l4..]).map_err(|_| GsoError::Malformed)?;
    let (seq0, flags) = (tcp0.seq_number(), tcp0.flags_byte());
    let id0 = if lay.v6 {
        0
    } else {
        ipv4::Packet::new_checked(&frame[lay.l3..])
            .map_err(|_| GsoError::Malformed)?
            .ident()
    };
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
            let mut ip =
                ipv6::Packet::new_checked(&mut seg[lay.l3..]).map_err(|_| GsoError::Malformed)?;
            ip.set_payload_len((l3_len - ipv6::HEADER_LEN) as u16);
        } else {
            let mut ip =
                ipv4::Packet::new_checked(&mut seg[lay.l3..]).map_err(|_| GsoError::Malformed)?;
            ip.set_total_len(l3_len as u16);
            ip.set_ident(id0.wrapping_add(i as u16));
            ip.fill_checksum();
        }
        let mut f = flags;
        if i + 1 < chunks {
            f &= !(tcp::FIN | tcp::PSH);
        }
        if i > 0 {
            f &= !tcp::CWR;
        }
        let tcp_len = seg_len - lay.l4;
        let pseudo = pseudo_header(seg, lay, tcp_len);
        let mut t =
            tcp::Packet::new_checked(&mut seg[lay.l4..]).map_err(|_| GsoError::Malformed)?;
        t.set_seq_number(seq0.wrapping_add(start as u32));
        t.set_flags_byte(f);
        t.fill_checksum(pseudo);
        emit(seg, i);
    }
    Ok(chunks)
}

/// The segment size to use for the super-frame starting `at` bytes into `frame`
/// (behind a tunnel's outer headers, or at 0) on an output whose MTU is `mtu`.
pub(crate) fn segment_size_at(
    frame: &[u8],
    at: usize,
    vnet: &VnetHdr,
    mtu: usize,
) -> Result<usize, GsoError> {
    segment_size_and_layout_at(frame, at, vnet, mtu).map(|(mss, _)| mss)
}

fn segment_size_and_layout_at(
    frame: &[u8],
    at: usize,
    vnet: &VnetHdr,
    mtu: usize,
) -> Result<(usize, Layout), GsoError> {
    let inner = frame.get(at..).ok_or(GsoError::Malformed)?;
    let lay = layout(inner)?.shifted(at);
    // Everything in front of the payload counts against the MTU, outer IP on.
    let first_ip = ethernet::l3(frame).ok_or(GsoError::Malformed)?.1;
    let headers = lay.payload - first_ip;
    let by_mtu = mtu.saturating_sub(headers);
    let mss = usize::from(vnet.gso_size).min(by_mtu);
    if mss == 0 {
        return Err(GsoError::NoSegmentSize);
    }
    // Refused whole, whoever would cut it (a device that takes super-frames too).
    if frame.len().saturating_sub(lay.payload).div_ceil(mss) > MAX_SEGMENTS {
        return Err(GsoError::TooManySegments);
    }
    Ok((mss, lay))
}

/// [`segment_size`], and the frame's layout for [`segment_tcp_laid_out`].
pub fn segment_size_and_layout(
    frame: &[u8],
    vnet: &VnetHdr,
    mtu: usize,
) -> Result<(usize, Layout), GsoError> {
    segment_size_and_layout_at(frame, 0, vnet, mtu)
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
    segment_size_at(frame, 0, vnet, mtu)
}

#[cfg(test)]
mod tests;
