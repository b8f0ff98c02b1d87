//! What every vsw table can match and do, as a table-features reply says it:
//! `ovs-ofctl` reads it before any flow-mod and checks flows against it. The lists
//! are what `to_vsw` can put into vsw-flow's tables; every table has the same.

use crate::multipart::TableFeature;
use crate::oxm::{field_def, wire_id, TUN_FLAGS, TUN_IPV4_DST, TUN_IPV4_SRC, TUN_METADATA0};

const OFPTFPT_INSTRUCTIONS: u16 = 0;
const OFPTFPT_NEXT_TABLES: u16 = 2;
const OFPTFPT_WRITE_ACTIONS: u16 = 4;
const OFPTFPT_APPLY_ACTIONS: u16 = 6;
const OFPTFPT_MATCH: u16 = 8;
const OFPTFPT_WILDCARDS: u16 = 10;
const OFPTFPT_WRITE_SETFIELD: u16 = 12;
const OFPTFPT_APPLY_SETFIELD: u16 = 14;

/// Instructions vsw carries out: goto-table, write-metadata, write-, apply- and
/// clear-actions, meter.
const INSTRUCTIONS: &[u16] = &[1, 2, 3, 4, 5, 6];
/// Actions vsw applies: output, copy-ttl-out, copy-ttl-in, push-vlan, pop-vlan,
/// set-queue, group, set-nw-ttl, dec-nw-ttl, set-field.
const APPLY_ACTIONS: &[u16] = &[0, 11, 12, 17, 18, 21, 22, 23, 24, 25];
/// Fields vsw matches (see `to_vsw::match_to_vsw`).
#[rustfmt::skip]
const MATCH_FIELDS: &[u8] = &[
    0, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22,
    23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 38, TUN_IPV4_SRC, TUN_IPV4_DST, TUN_METADATA0,
    TUN_FLAGS,
];
/// Fields vsw's actions set (see `to_vsw`'s set-field).
#[rustfmt::skip]
const SET_FIELDS: &[u8] = &[
    3, 4, 6, 7, 8, 9, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25,
    26, 27, 28, 29, 30, 31, 32, 33, 38, TUN_IPV4_DST, TUN_METADATA0,
];

/// An OXM header: class, field, has-mask, length.
fn oxm_header(field: u8, masked: bool) -> [u8; 4] {
    let def = field_def(field).expect("a known field");
    let len = def.len * if masked { 2 } else { 1 };
    let (class, number) = wire_id(field);
    let c = class.to_be_bytes();
    [c[0], c[1], (number << 1) | u8::from(masked), len]
}

fn headers(kinds: &[u16]) -> Vec<u8> {
    // Instruction and action headers: type and a length of 4.
    kinds
        .iter()
        .flat_map(|k| {
            let t = k.to_be_bytes();
            [t[0], t[1], 0, 4]
        })
        .collect()
}

fn oxm_list(fields: &[u8], with_masks: bool) -> Vec<u8> {
    fields
        .iter()
        .flat_map(|&f| oxm_header(f, with_masks && field_def(f).is_some_and(|d| d.maskable)))
        .collect()
}

/// Table `id`'s features, of `n_tables` tables.
/// What a table's `max_entries` says: the classifier has no fixed size; this is
/// Open vSwitch's figure.
pub const MAX_ENTRIES: u32 = 1_000_000;

pub fn table_feature(id: u8, n_tables: u8, max_entries: u32) -> TableFeature {
    let next: Vec<u8> = (id.saturating_add(1)..n_tables).collect();
    TableFeature {
        table_id: id,
        name: format!("table{id}"),
        max_entries,
        properties: vec![
            (OFPTFPT_INSTRUCTIONS, headers(INSTRUCTIONS)),
            (OFPTFPT_NEXT_TABLES, next),
            (OFPTFPT_WRITE_ACTIONS, headers(APPLY_ACTIONS)),
            (OFPTFPT_APPLY_ACTIONS, headers(APPLY_ACTIONS)),
            (OFPTFPT_MATCH, oxm_list(MATCH_FIELDS, true)),
            (OFPTFPT_WILDCARDS, oxm_list(MATCH_FIELDS, false)),
            (OFPTFPT_WRITE_SETFIELD, oxm_list(SET_FIELDS, false)),
            (OFPTFPT_APPLY_SETFIELD, oxm_list(SET_FIELDS, false)),
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::multipart::MultipartReply;
    use crate::version::Version;

    #[test]
    fn every_table_is_described_and_the_reply_reads_back() {
        let tables: Vec<TableFeature> = (0..254).map(|t| table_feature(t, 254, 1000)).collect();
        assert_eq!(tables[253].properties[1], (OFPTFPT_NEXT_TABLES, Vec::new()));
        assert_eq!(tables[0].properties[1].1.len(), 253);
        let reply = MultipartReply::TableFeatures(tables.clone());
        let bodies = reply.encode_bodies(Version::V1_3);
        assert!(bodies.len() > 1, "more than one message's worth");
        let mut back = Vec::new();
        for b in &bodies {
            assert!(b.len() <= 65535 - 8);
            let (MultipartReply::TableFeatures(t), _) =
                MultipartReply::decode_body(Version::V1_3, b).unwrap()
            else {
                panic!("table features");
            };
            back.extend(t);
        }
        assert_eq!(back, tables);
    }
}
