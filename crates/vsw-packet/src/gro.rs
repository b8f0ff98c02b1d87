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

use crate::checksum::{fold, sum};
use crate::vnet::{VnetHdr, VNET_F_DATA_VALID, VNET_F_NEEDS_CSUM, VNET_GSO_TCPV4, VNET_GSO_TCPV6};
use crate::wire::ethernet::{self, EtherType};
use crate::wire::ip::IPPROTO_TCP;
use crate::wire::{ipv4, ipv6, tcp, Field};

/// Where a frame's layers are, for a segment that may be merged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Shape {
    l3: usize,
    l4: usize,
    payload: usize,
    v6: bool,
}

/// The layout of `frame` if it is a TCP segment GRO may merge.
fn shape(frame: &[u8], vnet: &VnetHdr) -> Option<Shape> {
    if vnet.is_gso() || vnet.flags & !(VNET_F_NEEDS_CSUM | VNET_F_DATA_VALID) != 0 {
        return None;
    }
    let (t, l3) = ethernet::l3(frame)?;
    let (v6, l4, ip_end) = match t {
        EtherType::IPV4 => {
            let ip = ipv4::Packet::new_checked(&frame[l3..]).ok()?;
            if ip.header_len() != ipv4::MIN_HEADER_LEN
                || ip.protocol() != IPPROTO_TCP
                || ip.is_fragment()
            {
                return None;
            }
            (false, l3 + ipv4::MIN_HEADER_LEN, l3 + ip.total_len())
        }
        EtherType::IPV6 => {
            let ip = ipv6::Packet::new_checked(&frame[l3..]).ok()?;
            if ip.next_header() != IPPROTO_TCP {
                return None;
            }
            let l4 = l3 + ipv6::HEADER_LEN;
            (true, l4, l4 + ip.payload_len())
        }
        _ => return None,
    };
    // Ethernet padding after a short packet: not a segment to merge.
    if ip_end != frame.len() {
        return None;
    }
    let tcp = tcp::Packet::new_checked(&frame[l4..]).ok()?;
    let payload = l4 + tcp.header_len();
    if payload >= frame.len() {
        return None;
    }
    let flags = tcp.flags_byte();
    if flags & !(tcp::ACK | tcp::PSH) != 0 || flags & tcp::ACK == 0 {
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
    tcp::pseudo_header_sum(frame, s.l3, s.v6, tcp_len)
}

/// Whether a segment's IPv4 header and TCP checksums are right: `headers` is the
/// frame up to its payload, `payload` the payload (wherever it was copied to).
fn checksums_right(headers: &[u8], payload: &[u8], s: &Shape) -> bool {
    if !s.v6 && !ipv4::Packet::new_checked(&headers[s.l3..]).is_ok_and(|ip| ip.checksum_right()) {
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
    let ip_differs: &[Field] = if s.v6 {
        &[ipv6::field::LENGTH]
    } else {
        &[
            ipv4::field::LENGTH,
            ipv4::field::IDENT,
            ipv4::field::CHECKSUM,
        ]
    };
    let tcp_differs = [
        tcp::field::SEQ_NUM,
        tcp::field::FLAGS..tcp::field::FLAGS + 1,
        tcp::field::CHECKSUM,
    ];
    a[..s.l3] == b[..s.l3]
        && same_but(&a[s.l3..s.l4], &b[s.l3..s.l4], ip_differs)
        && same_but(&a[s.l4..s.payload], &b[s.l4..s.payload], &tcp_differs)
}

/// Whether two headers of one length agree but in `fields` (in order).
fn same_but(a: &[u8], b: &[u8], fields: &[Field]) -> bool {
    let mut at = 0;
    for f in fields {
        if a[at..f.start] != b[at..f.start] {
            return false;
        }
        at = f.end;
    }
    a[at..] == b[at..]
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
        let Ok(tcp) = tcp::Packet::new_checked(&frame[s.l4..]) else {
            return Offer::Refused;
        };
        let seq = tcp.seq_number();
        let psh = tcp.flags_byte() & tcp::PSH != 0;
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
            if let Ok(mut held) = tcp::Packet::new_checked(&mut self.buf[s.l4..self.len]) {
                let f = held.flags_byte();
                held.set_flags_byte(f | tcp::PSH);
            }
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
                    csum_offset: tcp::field::CHECKSUM.start as u16,
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
            if let Ok(mut ip) = ipv6::Packet::new_checked(&mut frame[s.l3..]) {
                ip.set_payload_len((l3_len - ipv6::HEADER_LEN) as u16);
            }
        } else if let Ok(mut ip) = ipv4::Packet::new_checked(&mut frame[s.l3..]) {
            ip.set_total_len(l3_len as u16);
            ip.fill_checksum();
        }
        // The TCP checksum field holds the pseudo-header sum, as a sender with
        // checksum offload leaves it; the device (or the next segmentation) finishes.
        let seed = fold(pseudo_header(frame, &s, tcp_len));
        if let Ok(mut tcp) = tcp::Packet::new_checked(&mut frame[s.l4..]) {
            tcp.set_checksum(seed);
        }
        let vnet = VnetHdr {
            flags: VNET_F_NEEDS_CSUM,
            gso_type: if s.v6 { VNET_GSO_TCPV6 } else { VNET_GSO_TCPV4 },
            hdr_len: s.payload as u16,
            gso_size: self.mss as u16,
            csum_start: s.l4 as u16,
            csum_offset: tcp::field::CHECKSUM.start as u16,
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
