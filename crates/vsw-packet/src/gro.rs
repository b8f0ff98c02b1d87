//! Software receive coalescing (GRO): consecutive TCP segments of one flow that leave
//! through the same port within one batch become one super-frame with a virtio-net
//! GSO header, so the receiving stack (or device) handles one packet instead of
//! dozens. This is what makes TCP fast when the sender could not segment late
//! (its offloads are off): the per-packet cost of the receiver dominates.
//!
//! Only what the kernel's own GRO would merge is merged: same addresses, ports,
//! acknowledgement, window and TCP options; contiguous sequence numbers; every
//! segment but the last of full segment size; plain ACK (PSH allowed on the last);
//! IPv4 without options or fragments, or IPv6 without extension headers.
//!
//! A merged frame leaves with a fresh checksum to be finished, so a segment whose
//! checksum nobody has checked would be made valid by merging it. Only segments whose
//! checksums are known to be right are merged: checked by the kernel (virtio-net
//! DATA_VALID), not yet computed (NEEDS_CSUM: a local sender's, the data is as it was
//! written), or checked here while they are copied in. A segment that fails the check
//! leaves as it came, for its receiver to drop.

use crate::checksum::{fold, sum, tcp_pseudo_header};
use crate::ethernet::{EtherType, VLAN_TAG_LEN};
use crate::key::IPPROTO_TCP;
use crate::vnet::{VnetHdr, VNET_F_DATA_VALID, VNET_F_NEEDS_CSUM, VNET_GSO_TCPV4, VNET_GSO_TCPV6};

/// TCP flags a merged segment may carry: ACK, and PSH (which ends the merge).
const TCP_ACK: u8 = 0x10;
const TCP_PSH: u8 = 0x08;

/// Where a frame's layers are, for a segment that may be merged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Shape {
    l3: usize,
    l4: usize,
    payload: usize,
    v6: bool,
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// The layout of `frame` if it is a TCP segment GRO may merge.
fn shape(frame: &[u8], vnet: &VnetHdr) -> Option<Shape> {
    if vnet.is_gso() || vnet.flags & !(VNET_F_NEEDS_CSUM | VNET_F_DATA_VALID) != 0 {
        return None;
    }
    let mut off = 12;
    let mut t = be16(frame.get(..14)?, 12);
    for _ in 0..2 {
        if t != EtherType::VLAN && t != EtherType::QINQ {
            break;
        }
        off += VLAN_TAG_LEN;
        t = u16::from_be_bytes(frame.get(off..off + 2)?.try_into().ok()?);
    }
    let l3 = off + 2;
    let (v6, l4, ip_end) = match t {
        EtherType::IPV4 => {
            let ip = frame.get(l3..l3 + 20)?;
            let frag = be16(ip, 6);
            if ip[0] != 0x45 || ip[9] != IPPROTO_TCP || frag & 0x3fff != 0 {
                return None;
            }
            (false, l3 + 20, l3 + usize::from(be16(ip, 2)))
        }
        EtherType::IPV6 => {
            let ip = frame.get(l3..l3 + 40)?;
            if ip[0] >> 4 != 6 || ip[6] != IPPROTO_TCP {
                return None;
            }
            (true, l3 + 40, l3 + 40 + usize::from(be16(ip, 4)))
        }
        _ => return None,
    };
    // Ethernet padding after a short packet: not a segment to merge.
    if ip_end != frame.len() {
        return None;
    }
    let doff = usize::from(*frame.get(l4 + 12)? >> 4) * 4;
    let payload = l4 + doff;
    if doff < 20 || payload >= frame.len() {
        return None;
    }
    let flags = frame[l4 + 13];
    if flags & !(TCP_ACK | TCP_PSH) != 0 || flags & TCP_ACK == 0 {
        return None;
    }
    if vnet.flags & VNET_F_NEEDS_CSUM != 0 && usize::from(vnet.csum_start) != l4 {
        return None;
    }
    Some(Shape {
        l3,
        l4,
        payload,
        v6,
    })
}

/// The pseudo-header sum of a TCP segment of `tcp_len` bytes in `frame`.
fn pseudo_header(frame: &[u8], s: &Shape, tcp_len: usize) -> u64 {
    tcp_pseudo_header(frame, s.l3, s.v6, tcp_len)
}

/// Whether a segment's IPv4 header and TCP checksums are right: `headers` is the
/// frame up to its payload, `payload` the payload (wherever it was copied to).
fn checksums_right(headers: &[u8], payload: &[u8], s: &Shape) -> bool {
    if !s.v6 && fold(sum(&headers[s.l3..s.l4], 0)) != 0xffff {
        return false;
    }
    let tcp_len = headers.len() - s.l4 + payload.len();
    // The TCP header is a whole number of 32-bit words, so the payload's sum starts
    // on a word boundary and the two add up.
    let header = sum(&headers[s.l4..], pseudo_header(headers, s, tcp_len));
    fold(sum(payload, header)) == 0xffff
}

/// The bytes of a header two segments of one merge must share: everything but the
/// IP length, id and checksum, the TCP sequence number, flags and checksum.
fn same_header(a: &[u8], b: &[u8], s: &Shape) -> bool {
    if a.len() < s.payload || b.len() < s.payload {
        return false;
    }
    let skip = |i: usize| {
        let r = i.wrapping_sub(s.l3);
        let t = i.wrapping_sub(s.l4);
        let ip_skip = if s.v6 {
            (4..6).contains(&r) // payload length
        } else {
            (2..6).contains(&r) || (10..12).contains(&r) // length, id, checksum
        };
        ip_skip || (4..8).contains(&t) || t == 13 || (16..18).contains(&t)
    };
    (0..s.payload).all(|i| skip(i) || a[i] == b[i])
}

/// One merge in progress: the super-frame being built and what the next segment
/// must look like.
pub struct Gro {
    buf: Box<[u8]>,
    len: usize,
    shape: Option<Shape>,
    /// Payload bytes of the first segment: every other but the last must match.
    mss: usize,
    next_seq: u32,
    segments: usize,
    /// Whether the merge can take no more (a short or PSH segment ended it).
    closed: bool,
    /// Whether the segments' checksums were left to the device.
    partial: bool,
}

/// What [`Gro::offer`] did with a segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Offer {
    /// Merged (or started a merge); nothing to send yet.
    Taken,
    /// Not mergeable with what is held: send what is held first ([`Gro::take`]),
    /// then offer the segment again.
    FlushFirst,
    /// Not a segment GRO merges: send it as it is (after what is held).
    Refused,
}

/// The largest super-frame: an IP packet of 64 KiB.
const MAX_IP: usize = 65_535;

impl Gro {
    pub fn new() -> Gro {
        Gro {
            buf: vec![0u8; MAX_IP + 64].into_boxed_slice(),
            len: 0,
            shape: None,
            mss: 0,
            next_seq: 0,
            segments: 0,
            closed: false,
            partial: false,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.segments == 0
    }

    /// Offers a segment (a frame as it will be sent, with its offload state).
    pub fn offer(&mut self, frame: &[u8], vnet: &VnetHdr) -> Offer {
        let Some(s) = shape(frame, vnet) else {
            return if self.is_empty() {
                Offer::Refused
            } else {
                Offer::FlushFirst
            };
        };
        let payload = frame.len() - s.payload;
        let seq = be32(frame, s.l4 + 4);
        let psh = frame[s.l4 + 13] & TCP_PSH != 0;
        let partial = vnet.flags & VNET_F_NEEDS_CSUM != 0;
        // Checked here, on the copy (hot in the cache), unless already known right.
        let check = !partial && vnet.flags & VNET_F_DATA_VALID == 0;
        if self.is_empty() {
            self.buf[..frame.len()].copy_from_slice(frame);
            if check && !checksums_right(&frame[..s.payload], &self.buf[s.payload..frame.len()], &s)
            {
                return Offer::Refused;
            }
            self.len = frame.len();
            self.shape = Some(s);
            self.mss = payload;
            self.next_seq = seq.wrapping_add(payload as u32);
            self.segments = 1;
            self.closed = psh;
            self.partial = partial;
            return Offer::Taken;
        }
        let Some(held) = self.shape else {
            return Offer::FlushFirst;
        };
        let fits = self.len + payload <= held.l3 + MAX_IP;
        let mergeable = !self.closed
            && held == s
            && seq == self.next_seq
            && payload <= self.mss
            && partial == self.partial
            && fits
            && same_header(&self.buf[..self.len], frame, &s);
        if !mergeable {
            return Offer::FlushFirst;
        }
        let copy = &mut self.buf[self.len..self.len + payload];
        copy.copy_from_slice(&frame[s.payload..]);
        if check && !checksums_right(&frame[..s.payload], copy, &s) {
            // Sent by itself after what is held (and checked again then: refused).
            return Offer::FlushFirst;
        }
        self.len += payload;
        self.next_seq = seq.wrapping_add(payload as u32);
        self.segments += 1;
        // A short segment or a PSH ends the merge, as it ends a TCP send.
        self.closed = psh || payload < self.mss;
        if psh {
            self.buf[s.l4 + 13] |= TCP_PSH;
        }
        Offer::Taken
    }

    /// The frame held, finished (lengths and IPv4 header checksum; a merge of several
    /// segments leaves the TCP checksum to the device with a GSO header, a single
    /// segment goes out as it came), and the number of segments in it. Empties the
    /// merge; `None` when there was nothing.
    pub fn take(&mut self) -> Option<(&[u8], VnetHdr, usize)> {
        let s = self.shape.take()?;
        let segments = std::mem::take(&mut self.segments);
        let len = std::mem::take(&mut self.len);
        let frame = &mut self.buf[..len];
        if segments == 1 {
            let vnet = if self.partial {
                VnetHdr {
                    flags: VNET_F_NEEDS_CSUM,
                    csum_start: s.l4 as u16,
                    csum_offset: 16,
                    ..VnetHdr::default()
                }
            } else {
                VnetHdr::default()
            };
            return Some((frame, vnet, 1));
        }
        let l3_len = len - s.l3;
        let tcp_len = len - s.l4;
        if s.v6 {
            frame[s.l3 + 4..s.l3 + 6].copy_from_slice(&((l3_len - 40) as u16).to_be_bytes());
        } else {
            frame[s.l3 + 2..s.l3 + 4].copy_from_slice(&(l3_len as u16).to_be_bytes());
            frame[s.l3 + 10..s.l3 + 12].fill(0);
            let c = !fold(sum(&frame[s.l3..s.l4], 0));
            frame[s.l3 + 10..s.l3 + 12].copy_from_slice(&c.to_be_bytes());
        }
        // The TCP checksum field holds the pseudo-header sum, as a sender with
        // checksum offload leaves it; the device (or the next segmentation) finishes.
        let seed = fold(pseudo_header(frame, &s, tcp_len));
        frame[s.l4 + 16..s.l4 + 18].copy_from_slice(&seed.to_be_bytes());
        let vnet = VnetHdr {
            flags: VNET_F_NEEDS_CSUM,
            gso_type: if s.v6 { VNET_GSO_TCPV6 } else { VNET_GSO_TCPV4 },
            hdr_len: s.payload as u16,
            gso_size: self.mss as u16,
            csum_start: s.l4 as u16,
            csum_offset: 16,
        };
        Some((frame, vnet, segments))
    }
}

impl Default for Gro {
    fn default() -> Self {
        Gro::new()
    }
}

#[cfg(test)]
mod tests;
