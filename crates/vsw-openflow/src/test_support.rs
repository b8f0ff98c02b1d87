//! Builders the unit tests share.

use crate::flow_mod::{Command, FlowMod, Instruction};
use crate::oxm::{OxmField, OxmMatch};

pub(crate) fn field(field: u8, value: &[u8], mask: Option<&[u8]>) -> OxmField {
    OxmField {
        field,
        value: value.to_vec(),
        mask: mask.map(<[u8]>::to_vec),
    }
}

/// An add to table 1 at priority 100, idle timeout 30 s, no buffer, no filters.
pub(crate) fn flow_mod(fields: Vec<OxmField>, instructions: Vec<Instruction>) -> FlowMod {
    FlowMod {
        cookie: 0,
        cookie_mask: 0,
        table_id: 1,
        command: Command::Add,
        idle_timeout: 30,
        hard_timeout: 0,
        priority: 100,
        buffer_id: u32::MAX,
        out_port: u32::MAX,
        out_group: u32::MAX,
        flags: 0,
        importance: 0,
        modify_like_1_0: false,
        matcher: OxmMatch { fields },
        instructions,
    }
}
