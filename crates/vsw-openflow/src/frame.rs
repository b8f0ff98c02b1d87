//! Messages on a stream: the 8-byte header every OpenFlow version shares, and
//! cutting whole messages off the bytes a connection received.

use crate::reader::Reader;

/// version, type, length (of the whole message), transaction id.
pub const HEADER_LEN: usize = 8;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub version: u8,
    /// The message type (`ofp_type`).
    pub kind: u8,
    /// The whole message's length, header included.
    pub length: u16,
    pub xid: u32,
}

impl Header {
    /// The header at the start of `buf`, if it holds one.
    pub fn parse(buf: &[u8]) -> Option<Header> {
        let mut r = Reader::new(buf);
        Some(Header {
            version: r.u8()?,
            kind: r.u8()?,
            length: r.u16()?,
            xid: r.u32()?,
        })
    }

    pub fn write(&self, out: &mut Vec<u8>) {
        out.push(self.version);
        out.push(self.kind);
        out.extend_from_slice(&self.length.to_be_bytes());
        out.extend_from_slice(&self.xid.to_be_bytes());
    }
}

/// A stream that cannot be read on: a header whose length does not even cover the
/// header leaves no way to find the next message.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FrameError {
    #[error("a message claims {0} bytes, fewer than its own 8-byte header")]
    LengthBelowHeader(u16),
}

/// The next whole message at the front of `buf` (its header and all its bytes), or
/// `None` while more bytes are needed.
pub fn next_message(buf: &[u8]) -> Result<Option<(Header, &[u8])>, FrameError> {
    let Some(h) = Header::parse(buf) else {
        return Ok(None);
    };
    let len = usize::from(h.length);
    if len < HEADER_LEN {
        return Err(FrameError::LengthBelowHeader(h.length));
    }
    Ok(buf.get(..len).map(|m| (h, m)))
}

/// A length as OpenFlow's 16-bit fields carry it, saturated rather than wrapped: a
/// part longer than 65,535 bytes never gets a length that lies short. (Nothing vsw
/// sends holds one: entries over a message's room are left out of replies, and the
/// switch refuses rules and groups that would make them.)
pub fn len16(n: usize) -> u16 {
    u16::try_from(n).unwrap_or(u16::MAX)
}

/// One OpenFlow property (`ofp_prop_header` and its value): type, length without
/// the padding, the value, zeros to 8 bytes.
pub fn put_property(out: &mut Vec<u8>, kind: u16, value: &[u8]) {
    let len = 4 + value.len();
    out.extend_from_slice(&kind.to_be_bytes());
    out.extend_from_slice(&len16(len).to_be_bytes());
    out.extend_from_slice(value);
    out.extend(std::iter::repeat_n(0u8, len.div_ceil(8) * 8 - len));
}

/// A duration of `ms` milliseconds as OpenFlow's statistics say one: seconds, then
/// the nanoseconds beyond them (32 bits each).
pub(crate) fn put_duration(ms: u64, out: &mut Vec<u8>) {
    out.extend_from_slice(&((ms / 1000) as u32).to_be_bytes());
    out.extend_from_slice(&(((ms % 1000) * 1_000_000) as u32).to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_messages_are_cut_and_partial_ones_wait() {
        let mut stream = Vec::new();
        Header {
            version: 4,
            kind: 2,
            length: 12,
            xid: 7,
        }
        .write(&mut stream);
        stream.extend_from_slice(b"ping");
        Header {
            version: 4,
            kind: 0,
            length: 8,
            xid: 8,
        }
        .write(&mut stream);
        let (h, m) = next_message(&stream).unwrap().unwrap();
        assert_eq!((h.kind, h.xid, m.len()), (2, 7, 12));
        let (h2, _) = next_message(&stream[12..]).unwrap().unwrap();
        assert_eq!(h2.xid, 8);
        assert_eq!(
            next_message(&stream[..11]).unwrap(),
            None,
            "body incomplete"
        );
        assert_eq!(
            next_message(&stream[..5]).unwrap(),
            None,
            "header incomplete"
        );
        let mut bad = Vec::new();
        Header {
            version: 4,
            kind: 0,
            length: 4,
            xid: 1,
        }
        .write(&mut bad);
        assert_eq!(next_message(&bad), Err(FrameError::LengthBelowHeader(4)));
    }
}
