//! OpenFlow 1.2: OXM matches, instructions and most messages as 1.3 has them (1.3
//! grew out of it), so a 1.2 connection is read and answered by 1.3's codec with
//! the few differences kept here: the ports are in the features reply (1.2 has no
//! port description), a packet-in carries no cookie, port, group and queue
//! statistics have no durations, table statistics are 1.2's long form, and what
//! 1.3 added — meters, table features, the asynchronous configuration, port
//! descriptions, bundles — is refused as a type or statistic 1.2 does not have.

use crate::error::Refusal;
use crate::message::Message;
use crate::multipart::{MultipartReply, OFPT_MULTIPART_REQUEST};
use crate::table_stats::TableStats;

/// The statistics 1.2 has: desc, flow, aggregate, table, port, queue, group,
/// group description, group features (0–8).
const LAST_STATS_TYPE: u16 = 8;

/// 1.3's message types past 1.2's last (ROLE_REPLY, 25): asynchronous
/// configuration, meter-mod, bundles.
const LAST_TYPE: u8 = 25;

/// Why a 1.2 connection's message is refused before 1.3's codec reads it: a type or
/// statistic 1.3 added.
pub fn refused(kind: u8, body: &[u8]) -> Option<Refusal> {
    if kind > LAST_TYPE {
        return Some(Refusal::BadType);
    }
    if kind == OFPT_MULTIPART_REQUEST {
        let stat = body.get(..2).map(|b| u16::from_be_bytes([b[0], b[1]]));
        if stat.is_some_and(|s| s > LAST_STATS_TYPE && s != 0xffff) {
            return Some(Refusal::BadMultipart);
        }
    }
    None
}

/// Writes the body of `m` where 1.2 lays it out differently from 1.3; `false`:
/// the body is 1.3's.
pub fn encode_body(m: &Message, out: &mut Vec<u8>) -> bool {
    match m {
        Message::FeaturesReply(f) => {
            out.extend_from_slice(&f.datapath_id.to_be_bytes());
            out.extend_from_slice(&f.n_buffers.to_be_bytes());
            out.extend_from_slice(&[f.n_tables, 0, 0, 0]);
            out.extend_from_slice(&f.capabilities.to_be_bytes());
            out.extend_from_slice(&0u32.to_be_bytes());
            // Ports that would not fit one message are left out, as in 1.0.
            if 8 + 24 + 64 * f.ports.len() <= usize::from(u16::MAX) {
                for p in &f.ports {
                    // 1.2's ofp_port is 1.3's.
                    p.encode(crate::version::Version::V1_3, out);
                }
            }
        }
        Message::PacketIn(p) => {
            out.extend_from_slice(&p.buffer_id.to_be_bytes());
            out.extend_from_slice(&p.total_len.to_be_bytes());
            out.extend_from_slice(&[p.reason, p.table_id]);
            p.matcher.encode(out);
            out.extend_from_slice(&[0, 0]);
            out.extend_from_slice(&p.data);
        }
        _ => return false,
    }
    true
}

/// A reply's entries where 1.2's differ from 1.3's (`None`: 1.3's).
pub fn reply_entries(reply: &MultipartReply) -> Option<Vec<Vec<u8>>> {
    use crate::multipart::each;
    Some(match reply {
        MultipartReply::Table(tables) => each(tables, table_stats),
        MultipartReply::PortStats(ports) => each(ports, |p, b| {
            // 1.3's entry without its duration (the last 8 bytes).
            p.encode(crate::version::Version::V1_3, b);
            b.truncate(b.len() - 8);
        }),
        MultipartReply::Group(groups) => each(groups, |g, b| {
            // 1.3's entry without its duration (8 bytes after the counts).
            let mut e = Vec::with_capacity(64);
            g.encode(&mut e);
            let len = e.len() - 8;
            b.extend_from_slice(&crate::frame::len16(len).to_be_bytes());
            b.extend_from_slice(&e[2..32]);
            b.extend_from_slice(&e[40..]);
        }),
        _ => return None,
    })
}

/// `ofp12_table_stats`: 128 bytes — what each table matches, writes and does
/// (everything, as 1.3's table features say), then the counts.
fn table_stats(t: &TableStats, out: &mut Vec<u8>) {
    out.extend_from_slice(&[t.table_id, 0, 0, 0, 0, 0, 0, 0]);
    crate::multipart::fixed_string(out, &format!("table{}", t.table_id), 32);
    // match, wildcards: every basic OXM field 1.2 has (0–35).
    let fields: u64 = (1 << 36) - 1;
    out.extend_from_slice(&fields.to_be_bytes());
    out.extend_from_slice(&fields.to_be_bytes());
    // write_actions, apply_actions: every 1.2 action (bits 0, 11–12, 15–25).
    let actions: u32 = 1 | (0b11 << 11) | (((1 << 11) - 1) << 15);
    out.extend_from_slice(&actions.to_be_bytes());
    out.extend_from_slice(&actions.to_be_bytes());
    // write_setfields, apply_setfields.
    out.extend_from_slice(&fields.to_be_bytes());
    out.extend_from_slice(&fields.to_be_bytes());
    // metadata_match, metadata_write: all of it.
    out.extend_from_slice(&u64::MAX.to_be_bytes());
    out.extend_from_slice(&u64::MAX.to_be_bytes());
    // instructions: goto, write-metadata, write/apply/clear actions (1–5).
    out.extend_from_slice(&0b11_1110u32.to_be_bytes());
    // config: a miss drops (OFPTC_TABLE_MISS_DROP), as from 1.3 on; 1.2's 0
    // would say it goes to the controller.
    out.extend_from_slice(&2u32.to_be_bytes());
    out.extend_from_slice(&crate::tables::MAX_ENTRIES.to_be_bytes());
    out.extend_from_slice(&t.active_count.to_be_bytes());
    out.extend_from_slice(&t.lookup_count.to_be_bytes());
    out.extend_from_slice(&t.matched_count.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Features;
    use crate::multipart::PortInfo;

    #[test]
    fn features_carry_the_ports_and_packet_ins_no_cookie() {
        let port = PortInfo {
            port_no: 3,
            hw_addr: [2, 0, 0, 0, 0, 3],
            name: "p3".into(),
            admin_down: false,
            link_up: true,
            curr_speed_kbps: 0,
            max_speed_kbps: 0,
        };
        let f = Message::FeaturesReply(Features {
            datapath_id: 9,
            n_tables: 254,
            ports: vec![port],
            ..Features::default()
        })
        .encode(3, 1);
        assert_eq!(f.len(), 8 + 24 + 64, "one 64-byte ofp_port");
        let pi = crate::packet::PacketIn::of_frame(&[1; 20], 3, 1, 2, 0x77, 0xffff, Vec::new());
        let m = Message::PacketIn(pi.clone()).encode(3, 0);
        let mut v13 = Vec::new();
        pi.encode_body(&mut v13);
        assert_eq!(m.len(), 8 + v13.len() - 8, "no 8-byte cookie");
        assert_eq!(&m[14..16], &[1, 2], "reason and table, then the match");
    }

    #[test]
    fn what_1_3_added_is_refused() {
        assert_eq!(refused(29, &[]), Some(Refusal::BadType), "meter-mod");
        assert_eq!(
            refused(18, &[0, 13]),
            Some(Refusal::BadMultipart),
            "port desc"
        );
        assert_eq!(refused(18, &[0, 1]), None, "flow statistics");
    }

    #[test]
    fn statistics_without_durations_and_1_2_s_table_entry() {
        let t = TableStats {
            table_id: 1,
            active_count: 2,
            lookup_count: 3,
            matched_count: 4,
        };
        let e = reply_entries(&MultipartReply::Table(vec![t])).unwrap();
        assert_eq!(e[0].len(), 128);
        let g = crate::group_mod::GroupStatsEntry {
            group_id: 5,
            ref_count: 1,
            packet_count: 6,
            byte_count: 7,
            duration_ms: 8000,
            buckets: vec![(1, 2)],
        };
        let e = reply_entries(&MultipartReply::Group(vec![g])).unwrap();
        assert_eq!(e[0].len(), 32 + 16);
        assert_eq!(&e[0][..2], &[0, 48]);
        assert_eq!(&e[0][32..40], &1u64.to_be_bytes(), "the bucket's packets");
    }
}
