//! `OFPMP_PORT_STATS`: each port's counters (OpenFlow 1.3's fixed layout; 1.4 and
//! 1.5 put the Ethernet error counters in a property).

use crate::error::Refusal;
use crate::flow_mod::OFPP_ANY;
use crate::reader::Reader;
use crate::version::Version;

pub const OFPMP_PORT_STATS: u16 = 4;

/// One port's counters. Counters a port does not keep are `u64::MAX` on the wire, as
/// the spec asks (`None` here).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct PortStats {
    pub port_no: u32,
    pub rx_packets: u64,
    pub tx_packets: u64,
    pub rx_bytes: u64,
    pub tx_bytes: u64,
    pub rx_dropped: u64,
    pub tx_dropped: u64,
    pub rx_errors: u64,
    pub tx_errors: u64,
    pub duration_ms: u64,
}

/// The port a request asks for (`OFPP_ANY`: all); the body after the multipart header.
pub fn decode_request(body: &[u8]) -> Result<u32, Refusal> {
    let mut r = Reader::new(body);
    let port = r.u32().ok_or(Refusal::BadLen)?;
    r.bytes(4).ok_or(Refusal::BadLen)?;
    if !r.is_empty() {
        return Err(Refusal::BadLen);
    }
    Ok(port)
}

pub fn encode_request(port: u32, out: &mut Vec<u8>) {
    out.extend_from_slice(&port.to_be_bytes());
    out.extend_from_slice(&[0; 4]);
}

/// Whether a request for `asked` covers `port`.
pub fn selects(asked: u32, port: u32) -> bool {
    asked == OFPP_ANY || asked == port
}

const UNKNOWN: u64 = u64::MAX;
const OFPPSPT_ETHERNET: u16 = 0;

impl PortStats {
    pub fn encode(&self, version: Version, out: &mut Vec<u8>) {
        let secs = (self.duration_ms / 1000) as u32;
        let nsecs = ((self.duration_ms % 1000) * 1_000_000) as u32;
        let counters = [
            self.rx_packets,
            self.tx_packets,
            self.rx_bytes,
            self.tx_bytes,
            self.rx_dropped,
            self.tx_dropped,
            self.rx_errors,
            self.tx_errors,
        ];
        if version >= Version::V1_4 {
            // length, pad, port, duration, counters, Ethernet property.
            out.extend_from_slice(&(80u16 + 40).to_be_bytes());
            out.extend_from_slice(&[0; 2]);
            out.extend_from_slice(&self.port_no.to_be_bytes());
            out.extend_from_slice(&secs.to_be_bytes());
            out.extend_from_slice(&nsecs.to_be_bytes());
            for c in counters {
                out.extend_from_slice(&c.to_be_bytes());
            }
            out.extend_from_slice(&OFPPSPT_ETHERNET.to_be_bytes());
            out.extend_from_slice(&40u16.to_be_bytes());
            out.extend_from_slice(&[0; 4]);
            for _ in 0..4 {
                out.extend_from_slice(&UNKNOWN.to_be_bytes());
            }
        } else {
            out.extend_from_slice(&self.port_no.to_be_bytes());
            out.extend_from_slice(&[0; 4]);
            for c in counters {
                out.extend_from_slice(&c.to_be_bytes());
            }
            // rx_frame_err, rx_over_err, rx_crc_err, collisions: not kept.
            for _ in 0..4 {
                out.extend_from_slice(&UNKNOWN.to_be_bytes());
            }
            out.extend_from_slice(&secs.to_be_bytes());
            out.extend_from_slice(&nsecs.to_be_bytes());
        }
    }

    /// The entries of one reply body.
    pub fn decode_entries(version: Version, body: &[u8]) -> Option<Vec<PortStats>> {
        let mut r = Reader::new(body);
        let mut out = Vec::new();
        while !r.is_empty() {
            let (port_no, secs, nsecs, c) = if version >= Version::V1_4 {
                let len = usize::from(r.u16()?);
                let mut e = Reader::new(r.bytes(len.checked_sub(2)?)?);
                e.bytes(2)?;
                let port = e.u32()?;
                let (s, n) = (e.u32()?, e.u32()?);
                let mut c = [0u64; 8];
                for x in &mut c {
                    *x = e.u64()?;
                }
                (port, s, n, c)
            } else {
                let port = r.u32()?;
                r.bytes(4)?;
                let mut c = [0u64; 8];
                for x in &mut c {
                    *x = r.u64()?;
                }
                r.bytes(32)?;
                (port, r.u32()?, r.u32()?, c)
            };
            out.push(PortStats {
                port_no,
                rx_packets: c[0],
                tx_packets: c[1],
                rx_bytes: c[2],
                tx_bytes: c[3],
                rx_dropped: c[4],
                tx_dropped: c[5],
                rx_errors: c[6],
                tx_errors: c[7],
                duration_ms: u64::from(secs) * 1000 + u64::from(nsecs) / 1_000_000,
            });
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_layouts_read_back() {
        let s = PortStats {
            port_no: 7,
            rx_packets: 1,
            tx_packets: 2,
            rx_bytes: 3,
            tx_bytes: 4,
            rx_dropped: 5,
            tx_dropped: 6,
            rx_errors: 7,
            tx_errors: 8,
            duration_ms: 12_345,
        };
        for (v, len) in [
            (Version::V1_3, 112),
            (Version::V1_4, 120),
            (Version::V1_5, 120),
        ] {
            let mut b = Vec::new();
            s.encode(v, &mut b);
            assert_eq!(b.len(), len, "{v}");
            assert_eq!(PortStats::decode_entries(v, &b), Some(vec![s.clone()]));
        }
    }
}
