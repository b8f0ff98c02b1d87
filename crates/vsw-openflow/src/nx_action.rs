//! Nicira's extension actions (experimenter actions of vendor 0x2320) that vsw's
//! datapath already does, as Open vSwitch encodes them: `resubmit` (NXAST_RESUBMIT,
//! NXAST_RESUBMIT_TABLE), `note` (NXAST_NOTE: kept and echoed, does nothing),
//! `dec_ttl` (NXAST_DEC_TTL) and `controller(…)` (NXAST_CONTROLLER). Their ports are
//! OpenFlow 1.0's 16-bit numbers.

use crate::reader::Reader;

/// Why a Nicira action cannot be read (the flow-mod's error says it in OpenFlow's
/// words).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BadNxAction {
    /// Its length is not its kind's.
    Len,
    /// A pad that is not zero.
    Argument,
    /// A subtype vsw does not carry out.
    Subtype,
}

pub const NXAST_RESUBMIT: u16 = 1;
pub const NXAST_NOTE: u16 = 8;
pub const NXAST_RESUBMIT_TABLE: u16 = 14;
pub const NXAST_DEC_TTL: u16 = 18;
pub const NXAST_CONTROLLER: u16 = 20;

/// OpenFlow 1.0's IN_PORT (a resubmit to "the port it came in on").
pub const OFPP10_IN_PORT: u16 = 0xfff8;
/// A resubmit's table that means "this rule's table".
pub const NX_TABLE_CURRENT: u8 = 0xff;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NxAction {
    /// `resubmit:PORT` (NXAST_RESUBMIT: the current table).
    Resubmit {
        in_port: u16,
    },
    /// `resubmit(PORT,TABLE)` (NXAST_RESUBMIT_TABLE): [`OFPP10_IN_PORT`] and
    /// [`NX_TABLE_CURRENT`] leave either as it is.
    ResubmitTable {
        in_port: u16,
        table: u8,
    },
    /// Bytes for the controller's own use: kept with the flow, changes nothing.
    Note(Vec<u8>),
    DecTtl,
    /// A packet-in of at most `max_len` bytes, to controller `controller_id`, with
    /// this reason.
    Controller {
        max_len: u16,
        controller_id: u16,
        reason: u8,
    },
}

impl NxAction {
    pub fn subtype(&self) -> u16 {
        match self {
            NxAction::Resubmit { .. } => NXAST_RESUBMIT,
            NxAction::ResubmitTable { .. } => NXAST_RESUBMIT_TABLE,
            NxAction::Note(_) => NXAST_NOTE,
            NxAction::DecTtl => NXAST_DEC_TTL,
            NxAction::Controller { .. } => NXAST_CONTROLLER,
        }
    }

    /// What follows the subtype (the caller pads the action to 8 bytes).
    pub(crate) fn encode_body(&self, out: &mut Vec<u8>) {
        match self {
            NxAction::Resubmit { in_port } => {
                out.extend_from_slice(&in_port.to_be_bytes());
                out.extend_from_slice(&[0; 4]);
            }
            NxAction::ResubmitTable { in_port, table } => {
                out.extend_from_slice(&in_port.to_be_bytes());
                out.extend_from_slice(&[*table, 0, 0, 0]);
            }
            NxAction::Note(bytes) => out.extend_from_slice(bytes),
            NxAction::DecTtl => out.extend_from_slice(&[0; 6]),
            NxAction::Controller {
                max_len,
                controller_id,
                reason,
            } => {
                out.extend_from_slice(&max_len.to_be_bytes());
                out.extend_from_slice(&controller_id.to_be_bytes());
                out.extend_from_slice(&[*reason, 0]);
            }
        }
    }

    /// The action of `subtype` from its body (after the subtype); `len` is the
    /// whole action's length. Pads must be zero, as Open vSwitch checks.
    pub(crate) fn decode(subtype: u16, body: &[u8], len: usize) -> Result<NxAction, BadNxAction> {
        let mut b = Reader::new(body);
        let fixed = |want: usize| {
            if len == want {
                Ok(())
            } else {
                Err(BadNxAction::Len)
            }
        };
        let zero = |bytes: Option<&[u8]>| match bytes {
            Some(z) if z.iter().all(|x| *x == 0) => Ok(()),
            Some(_) => Err(BadNxAction::Argument),
            None => Err(BadNxAction::Len),
        };
        Ok(match subtype {
            NXAST_RESUBMIT => {
                fixed(16)?;
                let in_port = b.u16().ok_or(BadNxAction::Len)?;
                zero(b.bytes(4))?;
                NxAction::Resubmit { in_port }
            }
            NXAST_RESUBMIT_TABLE => {
                fixed(16)?;
                let in_port = b.u16().ok_or(BadNxAction::Len)?;
                let table = b.u8().ok_or(BadNxAction::Len)?;
                zero(b.bytes(3))?;
                NxAction::ResubmitTable { in_port, table }
            }
            // All of it, padding included, as Open vSwitch keeps it.
            NXAST_NOTE if len >= 16 => NxAction::Note(b.rest().to_vec()),
            NXAST_NOTE => return Err(BadNxAction::Len),
            NXAST_DEC_TTL => {
                fixed(16)?;
                zero(b.bytes(6))?;
                NxAction::DecTtl
            }
            NXAST_CONTROLLER => {
                fixed(16)?;
                let max_len = b.u16().ok_or(BadNxAction::Len)?;
                let controller_id = b.u16().ok_or(BadNxAction::Len)?;
                let reason = b.u8().ok_or(BadNxAction::Len)?;
                zero(b.bytes(1))?;
                NxAction::Controller {
                    max_len,
                    controller_id,
                    reason,
                }
            }
            _ => return Err(BadNxAction::Subtype),
        })
    }
}

/// A 16-bit (OpenFlow 1.0) port number as a 32-bit one: the reserved ports
/// (0xff00 on) move to the top of the 32-bit space.
pub fn port_from_16(p: u16) -> u32 {
    if p >= 0xff00 {
        u32::from(p) | 0xffff_0000
    } else {
        u32::from(p)
    }
}

/// A 32-bit port number as a 16-bit one, where it has one.
pub fn port_to_16(p: u32) -> Option<u16> {
    match p {
        p if p < 0xff00 => u16::try_from(p).ok(),
        p if p >= 0xffff_ff00 => u16::try_from(p & 0xffff).ok(),
        _ => None,
    }
}
