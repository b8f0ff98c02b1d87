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
        table_id: 1,
        idle_timeout: 30,
        priority: 100,
        instructions,
        ..FlowMod::new(Command::Add, OxmMatch { fields })
    }
}
