//! Which asynchronous messages a connection gets (OFPT_SET_ASYNC / GET_ASYNC):
//! packet-in reasons, port-status reasons and flow-removed reasons, each a bit
//! mask, one for a master or equal connection and one for a slave.
//!
//! 1.3 lays them out as three pairs of 32-bit masks; 1.4 and 1.5 as properties
//! (type, length, mask), each optional. Every connection starts with the spec's
//! defaults (a service connection also needs a `miss_send_len`: see
//! `Session::new`).

use crate::error::Refusal;
use crate::reader::Reader;
use crate::version::Version;

pub const OFPT_GET_ASYNC_REQUEST: u8 = 26;
pub const OFPT_GET_ASYNC_REPLY: u8 = 27;
pub const OFPT_SET_ASYNC: u8 = 28;

/// Masks indexed [master or equal, slave].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AsyncConfig {
    pub packet_in: [u32; 2],
    pub port_status: [u32; 2],
    pub flow_removed: [u32; 2],
}

impl AsyncConfig {
    /// What a connection gets before it says otherwise (OpenFlow 1.3, 7.3.10):
    /// packet-ins for no-match and action, every port status, every flow removal;
    /// a slave only port status.
    pub const DEFAULT: AsyncConfig = AsyncConfig {
        packet_in: [0b11, 0],
        port_status: [0b111, 0b111],
        flow_removed: [0b1111, 0],
    };
    /// Nothing at all.
    pub const NONE: AsyncConfig = AsyncConfig {
        packet_in: [0, 0],
        port_status: [0, 0],
        flow_removed: [0, 0],
    };

    pub fn encode_body(&self, version: Version, out: &mut Vec<u8>) {
        if version >= Version::V1_4 {
            // Property types: even = slave, odd = master, in the order packet-in,
            // port-status, flow-removed.
            for (i, pair) in [self.packet_in, self.port_status, self.flow_removed]
                .iter()
                .enumerate()
            {
                for (slave, mask) in [(true, pair[1]), (false, pair[0])] {
                    let kind = (i as u16) * 2 + u16::from(!slave);
                    out.extend_from_slice(&kind.to_be_bytes());
                    out.extend_from_slice(&8u16.to_be_bytes());
                    out.extend_from_slice(&mask.to_be_bytes());
                }
            }
        } else {
            for pair in [self.packet_in, self.port_status, self.flow_removed] {
                out.extend_from_slice(&pair[0].to_be_bytes());
                out.extend_from_slice(&pair[1].to_be_bytes());
            }
        }
    }

    /// A SET_ASYNC's body applied to `self` (1.4+ properties change only what they
    /// name; unknown ones are refused as BAD_TYPE, experimenter ones skipped).
    pub fn decode_body(mut self, version: Version, body: &[u8]) -> Result<AsyncConfig, Refusal> {
        let mut r = Reader::new(body);
        if version < Version::V1_4 {
            let mut next = || r.u32().ok_or(Refusal::BadLen);
            self.packet_in = [next()?, next()?];
            self.port_status = [next()?, next()?];
            self.flow_removed = [next()?, next()?];
            return if r.is_empty() {
                Ok(self)
            } else {
                Err(Refusal::BadLen)
            };
        }
        while !r.is_empty() {
            let kind = r.u16().ok_or(Refusal::BadLen)?;
            let len = usize::from(r.u16().ok_or(Refusal::BadLen)?);
            let payload = r
                .bytes(len.checked_sub(4).ok_or(Refusal::BadLen)?)
                .ok_or(Refusal::BadLen)?;
            r.bytes(len.div_ceil(8) * 8 - len).ok_or(Refusal::BadLen)?;
            if kind >= 0xfffe {
                continue;
            }
            let mask: [u8; 4] = payload.try_into().map_err(|_| Refusal::BadLen)?;
            let mask = u32::from_be_bytes(mask);
            let slot = match kind / 2 {
                0 => &mut self.packet_in,
                1 => &mut self.port_status,
                2 => &mut self.flow_removed,
                // Role, table status and request forwarding: vsw sends none of
                // them, so any mask is as good as what it does.
                3..=5 => continue,
                _ => return Err(Refusal::BadType),
            };
            slot[usize::from(kind % 2 == 0)] = mask;
        }
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_framing_round_trips() {
        let c = AsyncConfig {
            packet_in: [3, 1],
            port_status: [7, 0],
            flow_removed: [15, 2],
        };
        for v in [Version::V1_3, Version::V1_4, Version::V1_5] {
            let mut body = Vec::new();
            c.encode_body(v, &mut body);
            assert_eq!(AsyncConfig::NONE.decode_body(v, &body), Ok(c), "{v:?}");
        }
        // 1.4: one property changes one mask.
        let one = [0u8, 1, 0, 8, 0, 0, 0, 1];
        let got = AsyncConfig::NONE.decode_body(Version::V1_4, &one).unwrap();
        assert_eq!(got.packet_in, [1, 0]);
        assert_eq!(
            AsyncConfig::NONE.decode_body(Version::V1_3, &one),
            Err(Refusal::BadLen)
        );
    }
}
