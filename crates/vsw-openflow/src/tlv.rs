//! Nicira's TLV table messages (`ovs-ofctl add-tlv-map`, `del-tlv-map`,
//! `dump-tlv-map`): which Geneve option (class, type, length) a `tun_metadata<N>`
//! field stands for. They are experimenter messages (vendor 0x00002320): a table-mod
//! adds, deletes or clears mappings; a request is answered with the table.
//!
//! vsw has one such field, `tun_metadata0`, of [`MAX_OPTION_LEN`] bytes; a
//! mapping for another index or a longer option is refused with the error Open
//! vSwitch gives for it (NXTTMFC_BAD_FIELD_IDX, NXTTMFC_BAD_OPT_LEN).

use crate::reader::Reader;

/// Nicira's experimenter (vendor) ID.
pub const NX_VENDOR_ID: u32 = 0x0000_2320;
/// The experimenter message types.
pub const NXT_TLV_TABLE_MOD: u32 = 24;
pub const NXT_TLV_TABLE_REQUEST: u32 = 25;
pub const NXT_TLV_TABLE_REPLY: u32 = 26;
/// How many `tun_metadata<N>` fields vsw has: `tun_metadata0`.
pub const MAX_FIELDS: u16 = 1;
/// The option value length `tun_metadata0` holds (half of a 64-bit key word; the
/// other half is `tun_flags`). OVN's options are 4 bytes.
pub const MAX_OPTION_LEN: u8 = 4;

/// One mapping: the Geneve option of `class`, `kind` (its type) and `len` value
/// bytes is `tun_metadata<index>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TlvMap {
    pub class: u16,
    pub kind: u8,
    pub len: u8,
    pub index: u16,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TlvCommand {
    Add,
    Delete,
    Clear,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlvTableMod {
    pub command: TlvCommand,
    pub maps: Vec<TlvMap>,
}

/// Why a TLV table-mod was refused: Open vSwitch's NXTTMFC codes (experimenter
/// errors of vendor Nicira from OpenFlow 1.2 on).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BadTlv {
    #[error("a TLV table command that is none of add, delete, clear (NXTTMFC_BAD_COMMAND)")]
    BadCommand,
    #[error("an option length other than 4 bytes (NXTTMFC_BAD_OPT_LEN)")]
    BadOptionLength,
    #[error("a field index other than tun_metadata0's (NXTTMFC_BAD_FIELD_IDX)")]
    BadFieldIndex,
    #[error("a field already mapped to another option (NXTTMFC_ALREADY_MAPPED)")]
    AlreadyMapped,
    #[error("an option or field named twice (NXTTMFC_DUP_ENTRY)")]
    DuplicateEntry,
    #[error("a deletion of a mapping flows use (NXTTMFC_INVALID_TLV_DEL)")]
    InUse,
}

impl BadTlv {
    /// The experimenter error code.
    pub fn code(self) -> u16 {
        match self {
            BadTlv::BadCommand => 16,
            BadTlv::BadOptionLength => 17,
            BadTlv::BadFieldIndex => 18,
            BadTlv::AlreadyMapped => 20,
            BadTlv::DuplicateEntry => 21,
            BadTlv::InUse => 38,
        }
    }
}

impl TlvTableMod {
    /// The body after the experimenter header: command, 6 bytes of padding, then
    /// the mappings (8 bytes each). `None` when the lengths do not fit.
    pub fn decode_body(body: &[u8]) -> Option<Result<TlvTableMod, BadTlv>> {
        let mut r = Reader::new(body);
        let command = r.u16()?;
        r.bytes(6)?;
        let mut maps = Vec::new();
        while !r.is_empty() {
            let class = r.u16()?;
            let kind = r.u8()?;
            let len = r.u8()?;
            let index = r.u16()?;
            r.bytes(2)?;
            maps.push(TlvMap {
                class,
                kind,
                len,
                index,
            });
        }
        let command = match command {
            0 => TlvCommand::Add,
            1 => TlvCommand::Delete,
            2 => TlvCommand::Clear,
            _ => return Some(Err(BadTlv::BadCommand)),
        };
        Some(Ok(TlvTableMod { command, maps }))
    }

    pub fn encode_body(&self, out: &mut Vec<u8>) {
        let command: u16 = match self.command {
            TlvCommand::Add => 0,
            TlvCommand::Delete => 1,
            TlvCommand::Clear => 2,
        };
        out.extend_from_slice(&command.to_be_bytes());
        out.extend_from_slice(&[0; 6]);
        encode_maps(&self.maps, out);
    }

    /// The table after this change, or why the change is refused (the table then
    /// stays as it was): each mapping checked as Open vSwitch checks it.
    pub fn apply(&self, table: &[TlvMap]) -> Result<Vec<TlvMap>, BadTlv> {
        let mut next = table.to_vec();
        match self.command {
            TlvCommand::Clear => return Ok(Vec::new()),
            TlvCommand::Add => {
                for m in &self.maps {
                    if m.len != MAX_OPTION_LEN {
                        return Err(BadTlv::BadOptionLength);
                    }
                    if m.index >= MAX_FIELDS {
                        return Err(BadTlv::BadFieldIndex);
                    }
                    if next.iter().any(|n| n.class == m.class && n.kind == m.kind) {
                        return Err(BadTlv::DuplicateEntry);
                    }
                    if next.iter().any(|n| n.index == m.index) {
                        return Err(BadTlv::AlreadyMapped);
                    }
                    next.push(*m);
                }
            }
            // As Open vSwitch: a field vsw does not have is refused, a mapping that
            // is not there is deleted already.
            TlvCommand::Delete => {
                for m in &self.maps {
                    if m.index >= MAX_FIELDS {
                        return Err(BadTlv::BadFieldIndex);
                    }
                    next.retain(|n| n.index != m.index);
                }
            }
        }
        Ok(next)
    }
}

fn encode_maps(maps: &[TlvMap], out: &mut Vec<u8>) {
    for m in maps {
        out.extend_from_slice(&m.class.to_be_bytes());
        out.push(m.kind);
        out.push(m.len);
        out.extend_from_slice(&m.index.to_be_bytes());
        out.extend_from_slice(&[0; 2]);
    }
}

/// The body of a TLV table reply: the option space and fields the switch has, and
/// its mappings.
pub fn encode_reply_body(maps: &[TlvMap], out: &mut Vec<u8>) {
    let space = u32::from(MAX_OPTION_LEN) * u32::from(MAX_FIELDS);
    out.extend_from_slice(&space.to_be_bytes());
    out.extend_from_slice(&MAX_FIELDS.to_be_bytes());
    out.extend_from_slice(&[0; 10]);
    encode_maps(maps, out);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(class: u16, kind: u8, len: u8, index: u16) -> TlvMap {
        TlvMap {
            class,
            kind,
            len,
            index,
        }
    }

    #[test]
    fn a_table_mod_round_trips() {
        let m = TlvTableMod {
            command: TlvCommand::Add,
            maps: vec![map(0xffff, 1, 4, 0)],
        };
        let mut body = Vec::new();
        m.encode_body(&mut body);
        assert_eq!(body.len(), 8 + 8);
        assert_eq!(TlvTableMod::decode_body(&body), Some(Ok(m)));
        // A mapping cut short, and a command that is none.
        assert_eq!(TlvTableMod::decode_body(&body[..12]), None);
        let mut bad = body.clone();
        bad[1] = 9;
        assert_eq!(
            TlvTableMod::decode_body(&bad),
            Some(Err(BadTlv::BadCommand))
        );
    }

    #[test]
    fn changes_are_checked_as_open_vswitch_checks_them() {
        let add = |maps| TlvTableMod {
            command: TlvCommand::Add,
            maps,
        };
        let table = add(vec![map(0xffff, 1, 4, 0)]).apply(&[]).unwrap();
        assert_eq!(table, vec![map(0xffff, 1, 4, 0)]);
        assert_eq!(
            add(vec![map(0xffff, 2, 4, 0)]).apply(&table),
            Err(BadTlv::AlreadyMapped)
        );
        assert_eq!(
            add(vec![map(0xffff, 1, 4, 0)]).apply(&table),
            Err(BadTlv::DuplicateEntry)
        );
        for len in [0, 3, 8, 124] {
            assert_eq!(
                add(vec![map(1, 1, len, 0)]).apply(&[]),
                Err(BadTlv::BadOptionLength),
                "{len}"
            );
        }
        assert_eq!(
            add(vec![map(1, 1, 4, 1)]).apply(&[]),
            Err(BadTlv::BadFieldIndex)
        );
        let del = |maps| TlvTableMod {
            command: TlvCommand::Delete,
            maps,
        };
        assert_eq!(del(vec![map(0, 0, 0, 0)]).apply(&table), Ok(vec![]));
        assert_eq!(del(vec![map(0, 0, 0, 0)]).apply(&[]), Ok(vec![]));
        assert_eq!(
            del(vec![map(0, 0, 0, 1)]).apply(&table),
            Err(BadTlv::BadFieldIndex)
        );
        let clear = TlvTableMod {
            command: TlvCommand::Clear,
            maps: vec![],
        };
        assert_eq!(clear.apply(&table), Ok(vec![]));
    }

    #[test]
    fn the_reply_says_what_the_switch_has() {
        let mut body = Vec::new();
        encode_reply_body(&[map(0xffff, 1, 4, 0)], &mut body);
        assert_eq!(&body[..6], &[0, 0, 0, 4, 0, 1]);
        assert_eq!(&body[16..], &[0xff, 0xff, 1, 4, 0, 0, 0, 0]);
    }
}
