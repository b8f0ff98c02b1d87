//! OFPT_PORT_MOD (`ovs-ofctl mod-port br0 PORT up|down`): a port's configuration
//! bits changed under a mask, checked against the port's hardware address. Three
//! layouts: 1.0's (16-bit port, type 15), 1.1–1.3's and 1.4's (properties instead
//! of the advertised features; type 16).

use crate::reader::Reader;
use crate::version::Version;

pub const OFPT10_PORT_MOD: u8 = 15;
pub const OFPT_PORT_MOD: u8 = 16;

/// OFPPC_PORT_DOWN: administratively down.
pub const OFPPC_PORT_DOWN: u32 = 1;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortMod {
    pub port_no: u32,
    pub hw_addr: [u8; 6],
    /// The configuration bits, of which those in `mask` change.
    pub config: u32,
    pub mask: u32,
}

/// Why a port-mod was refused (OFPET_PORT_MOD_FAILED's codes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BadPortMod {
    #[error("a port-mod of a port that is none (PORT_MOD_FAILED/BAD_PORT)")]
    BadPort,
    #[error("a port-mod whose hardware address is not the port's (PORT_MOD_FAILED/BAD_HW_ADDR)")]
    BadHwAddr,
    #[error("a port-mod of configuration the port cannot take (PORT_MOD_FAILED/BAD_CONFIG)")]
    BadConfig,
}

impl BadPortMod {
    pub fn type_code(self) -> (u16, u16) {
        let code = match self {
            BadPortMod::BadPort => 0,
            BadPortMod::BadHwAddr => 1,
            BadPortMod::BadConfig => 2,
        };
        (7, code)
    }
}

impl PortMod {
    /// The body in `version` (after the header); `None`: its length does not
    /// fit.
    pub fn decode_body(version: Version, body: &[u8]) -> Option<PortMod> {
        let mut r = Reader::new(body);
        let port_no = if version == Version::V1_0 {
            crate::of10::matching::port_from_16(r.u16()?)
        } else {
            let p = r.u32()?;
            r.bytes(4)?;
            p
        };
        let hw_addr: [u8; 6] = r.bytes(6)?.try_into().ok()?;
        if version > Version::V1_0 {
            r.bytes(2)?;
        }
        let config = r.u32()?;
        let mask = r.u32()?;
        if version < Version::V1_4 {
            // advertise and padding: vsw advertises nothing.
            r.bytes(8)?;
            if !r.is_empty() {
                return None;
            }
        }
        // 1.4's properties (the advertised features) are skipped likewise.
        Some(PortMod {
            port_no,
            hw_addr,
            config,
            mask,
        })
    }

    pub fn encode_body(&self, version: Version, out: &mut Vec<u8>) {
        if version == Version::V1_0 {
            let p = crate::of10::matching::port_to_16(self.port_no).unwrap_or(0);
            out.extend_from_slice(&p.to_be_bytes());
            out.extend_from_slice(&self.hw_addr);
        } else {
            out.extend_from_slice(&self.port_no.to_be_bytes());
            out.extend_from_slice(&[0; 4]);
            out.extend_from_slice(&self.hw_addr);
            out.extend_from_slice(&[0; 2]);
        }
        out.extend_from_slice(&self.config.to_be_bytes());
        out.extend_from_slice(&self.mask.to_be_bytes());
        if version < Version::V1_4 {
            out.extend_from_slice(&[0; 8]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_mod_round_trips_in_each_layout() {
        let pm = PortMod {
            port_no: 3,
            hw_addr: [2, 0, 0, 0, 0, 3],
            config: OFPPC_PORT_DOWN,
            mask: OFPPC_PORT_DOWN,
        };
        for (v, len) in [
            (Version::V1_0, 24),
            (Version::V1_3, 32),
            (Version::V1_5, 24),
        ] {
            let mut body = Vec::new();
            pm.encode_body(v, &mut body);
            assert_eq!(body.len(), len, "{v}");
            assert_eq!(PortMod::decode_body(v, &body), Some(pm.clone()), "{v}");
            assert!(
                PortMod::decode_body(v, &body[..body.len() - 1]).is_none(),
                "{v}: cut short"
            );
        }
    }
}
