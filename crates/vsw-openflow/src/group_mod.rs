//! Groups on the wire: OFPT_GROUP_MOD (add, modify, delete) and the group
//! multiparts — statistics, descriptions, features. 1.3 and 1.4 lay a bucket out
//! with fixed weight and watch fields; 1.5 gives buckets ids and says weight and
//! watches as properties.

use crate::flow_mod::{Action, BadFlowMod};
use crate::frame::len16;
use crate::reader::Reader;
use crate::version::Version;

pub const OFPT_GROUP_MOD: u8 = 15;
pub const OFPMP_GROUP: u16 = 6;
pub const OFPMP_GROUP_DESC: u16 = 7;
pub const OFPMP_GROUP_FEATURES: u16 = 8;
/// Every group (a delete's or a stats request's group id).
pub const OFPG_ALL: u32 = 0xffff_fffc;
/// No group (a bucket that watches none).
pub const OFPG_ANY: u32 = 0xffff_ffff;
/// The largest group id.
pub const OFPG_MAX: u32 = 0xffff_ff00;
/// No port (a bucket that watches none).
const OFPP_ANY: u32 = 0xffff_ffff;

/// Group types on the wire.
pub const OFPGT_ALL: u8 = 0;
pub const OFPGT_SELECT: u8 = 1;
pub const OFPGT_INDIRECT: u8 = 2;
pub const OFPGT_FF: u8 = 3;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupCommand {
    Add,
    Modify,
    Delete,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OfBucket {
    pub weight: u16,
    /// OFPP_ANY: none.
    pub watch_port: u32,
    /// OFPG_ANY: none.
    pub watch_group: u32,
    pub actions: Vec<Action>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupMod {
    pub command: GroupCommand,
    pub kind: u8,
    pub group_id: u32,
    pub buckets: Vec<OfBucket>,
}

/// Why a group-mod was refused: the error (type, code) it is answered with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BadGroupMod {
    #[error("the group exists already (GROUP_MOD_FAILED/GROUP_EXISTS)")]
    Exists,
    #[error("a group id that is none (GROUP_MOD_FAILED/INVALID_GROUP)")]
    Invalid,
    #[error("a group that would reach itself (GROUP_MOD_FAILED/LOOP)")]
    Loop,
    #[error("no such group (GROUP_MOD_FAILED/UNKNOWN_GROUP)")]
    Unknown,
    #[error("a group type vsw does not have (GROUP_MOD_FAILED/BAD_TYPE)")]
    BadType,
    #[error("a group-mod command vsw does not know (GROUP_MOD_FAILED/BAD_COMMAND)")]
    BadCommand,
    #[error("a bucket that does not fit its group (GROUP_MOD_FAILED/BAD_BUCKET)")]
    BadBucket,
    #[error("a watch that does not fit its group (GROUP_MOD_FAILED/BAD_WATCH)")]
    BadWatch,
    #[error(transparent)]
    Action(#[from] BadFlowMod),
}

impl BadGroupMod {
    pub fn type_code(self) -> (u16, u16) {
        match self {
            BadGroupMod::Exists => (6, 0),
            BadGroupMod::Invalid => (6, 1),
            BadGroupMod::Loop => (6, 7),
            BadGroupMod::Unknown => (6, 8),
            BadGroupMod::BadType => (6, 10),
            BadGroupMod::BadCommand => (6, 11),
            BadGroupMod::BadBucket => (6, 12),
            BadGroupMod::BadWatch => (6, 13),
            BadGroupMod::Action(a) => a.type_code(),
        }
    }
}

fn encode_actions(actions: &[Action]) -> Vec<u8> {
    let mut out = Vec::new();
    for a in actions {
        a.encode(&mut out);
    }
    out
}

impl OfBucket {
    fn encode(&self, version: Version, out: &mut Vec<u8>, bucket_id: u32) {
        let start = out.len();
        let actions = encode_actions(&self.actions);
        if version >= Version::V1_5 {
            out.extend_from_slice(&[0, 0]); // length, below
            out.extend_from_slice(&len16(actions.len()).to_be_bytes());
            out.extend_from_slice(&bucket_id.to_be_bytes());
            out.extend_from_slice(&actions);
            // Properties: weight (0), watch port (1), watch group (2).
            out.extend_from_slice(&[0, 0, 0, 8]);
            out.extend_from_slice(&self.weight.to_be_bytes());
            out.extend_from_slice(&[0, 0]);
            for (kind, v) in [(1u16, self.watch_port), (2, self.watch_group)] {
                out.extend_from_slice(&kind.to_be_bytes());
                out.extend_from_slice(&8u16.to_be_bytes());
                out.extend_from_slice(&v.to_be_bytes());
            }
        } else {
            out.extend_from_slice(&[0, 0]);
            out.extend_from_slice(&self.weight.to_be_bytes());
            out.extend_from_slice(&self.watch_port.to_be_bytes());
            out.extend_from_slice(&self.watch_group.to_be_bytes());
            out.extend_from_slice(&[0; 4]);
            out.extend_from_slice(&actions);
        }
        let len = len16(out.len() - start);
        out[start..start + 2].copy_from_slice(&len.to_be_bytes());
    }

    fn decode_list(version: Version, buf: &[u8]) -> Result<Vec<OfBucket>, BadGroupMod> {
        let mut r = Reader::new(buf);
        let mut out = Vec::new();
        while !r.is_empty() {
            let len = usize::from(r.u16().ok_or(BadGroupMod::BadBucket)?);
            let body = r
                .bytes(len.checked_sub(2).ok_or(BadGroupMod::BadBucket)?)
                .ok_or(BadGroupMod::BadBucket)?;
            let mut b = Reader::new(body);
            let bucket = if version >= Version::V1_5 {
                let actions_len = usize::from(b.u16().ok_or(BadGroupMod::BadBucket)?);
                b.u32().ok_or(BadGroupMod::BadBucket)?; // bucket id: vsw numbers them in order
                let actions = b.bytes(actions_len).ok_or(BadGroupMod::BadBucket)?;
                let mut bucket = OfBucket {
                    weight: 1,
                    watch_port: OFPP_ANY,
                    watch_group: OFPG_ANY,
                    actions: Action::decode_list(actions)?,
                };
                while !b.is_empty() {
                    let kind = b.u16().ok_or(BadGroupMod::BadBucket)?;
                    let plen = usize::from(b.u16().ok_or(BadGroupMod::BadBucket)?);
                    let p = b
                        .bytes(plen.checked_sub(4).ok_or(BadGroupMod::BadBucket)?)
                        .ok_or(BadGroupMod::BadBucket)?;
                    let mut p = Reader::new(p);
                    match kind {
                        0 => bucket.weight = p.u16().ok_or(BadGroupMod::BadBucket)?,
                        1 => bucket.watch_port = p.u32().ok_or(BadGroupMod::BadWatch)?,
                        2 => bucket.watch_group = p.u32().ok_or(BadGroupMod::BadWatch)?,
                        _ => return Err(BadGroupMod::BadBucket),
                    }
                }
                bucket
            } else {
                let weight = b.u16().ok_or(BadGroupMod::BadBucket)?;
                let watch_port = b.u32().ok_or(BadGroupMod::BadBucket)?;
                let watch_group = b.u32().ok_or(BadGroupMod::BadBucket)?;
                b.bytes(4).ok_or(BadGroupMod::BadBucket)?;
                OfBucket {
                    weight,
                    watch_port,
                    watch_group,
                    actions: Action::decode_list(b.rest())?,
                }
            };
            out.push(bucket);
        }
        Ok(out)
    }
}

fn encode_buckets(version: Version, buckets: &[OfBucket]) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, b) in buckets.iter().enumerate() {
        b.encode(version, &mut out, i as u32);
    }
    out
}

impl GroupMod {
    pub fn encode_body(&self, version: Version, out: &mut Vec<u8>) {
        let command: u16 = match self.command {
            GroupCommand::Add => 0,
            GroupCommand::Modify => 1,
            GroupCommand::Delete => 2,
        };
        out.extend_from_slice(&command.to_be_bytes());
        out.push(self.kind);
        out.push(0);
        out.extend_from_slice(&self.group_id.to_be_bytes());
        let buckets = encode_buckets(version, &self.buckets);
        if version >= Version::V1_5 {
            out.extend_from_slice(&len16(buckets.len()).to_be_bytes());
            out.extend_from_slice(&[0, 0]);
            // command_bucket_id: OFPG_BUCKET_ALL.
            out.extend_from_slice(&0xffff_fffcu32.to_be_bytes());
        }
        out.extend_from_slice(&buckets);
    }

    pub fn decode_body(version: Version, body: &[u8]) -> Result<GroupMod, BadGroupMod> {
        let mut r = Reader::new(body);
        let short = BadGroupMod::Action(BadFlowMod::BadLen);
        let command = match r.u16().ok_or(short)? {
            0 => GroupCommand::Add,
            1 => GroupCommand::Modify,
            2 => GroupCommand::Delete,
            _ => return Err(BadGroupMod::BadCommand),
        };
        let kind = r.u8().ok_or(short)?;
        r.u8().ok_or(short)?;
        let group_id = r.u32().ok_or(short)?;
        let buckets = if version >= Version::V1_5 {
            let len = usize::from(r.u16().ok_or(short)?);
            r.bytes(2).ok_or(short)?;
            let command_bucket = r.u32().ok_or(short)?;
            // Insert/remove-bucket commands and a bucket id for them: not taken.
            if command_bucket != 0xffff_fffc && command_bucket != 0xffff_ffff {
                return Err(BadGroupMod::BadCommand);
            }
            let buckets = r.bytes(len).ok_or(short)?;
            // Group properties (experimenter only, in 1.5): skipped.
            OfBucket::decode_list(version, buckets)?
        } else {
            OfBucket::decode_list(version, r.rest())?
        };
        if kind > OFPGT_FF {
            return Err(BadGroupMod::BadType);
        }
        if command != GroupCommand::Delete && group_id > OFPG_MAX {
            return Err(BadGroupMod::Invalid);
        }
        Ok(GroupMod {
            command,
            kind,
            group_id,
            buckets,
        })
    }
}

/// One group's statistics (the same in 1.3 to 1.5).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupStatsEntry {
    pub group_id: u32,
    pub ref_count: u32,
    pub packet_count: u64,
    pub byte_count: u64,
    pub duration_ms: u64,
    pub buckets: Vec<(u64, u64)>,
}

impl GroupStatsEntry {
    pub fn encode(&self, out: &mut Vec<u8>) {
        let len = 40 + 16 * self.buckets.len();
        out.extend_from_slice(&len16(len).to_be_bytes());
        out.extend_from_slice(&[0, 0]);
        out.extend_from_slice(&self.group_id.to_be_bytes());
        out.extend_from_slice(&self.ref_count.to_be_bytes());
        out.extend_from_slice(&[0; 4]);
        out.extend_from_slice(&self.packet_count.to_be_bytes());
        out.extend_from_slice(&self.byte_count.to_be_bytes());
        out.extend_from_slice(&((self.duration_ms / 1000) as u32).to_be_bytes());
        out.extend_from_slice(&(((self.duration_ms % 1000) * 1_000_000) as u32).to_be_bytes());
        for (p, b) in &self.buckets {
            out.extend_from_slice(&p.to_be_bytes());
            out.extend_from_slice(&b.to_be_bytes());
        }
    }

    pub(crate) fn decode(r: &mut Reader) -> Option<GroupStatsEntry> {
        let len = usize::from(r.u16()?);
        let mut e = Reader::new(r.bytes(len.checked_sub(2)?)?);
        e.bytes(2)?;
        let group_id = e.u32()?;
        let ref_count = e.u32()?;
        e.bytes(4)?;
        let (packet_count, byte_count) = (e.u64()?, e.u64()?);
        let (sec, nsec) = (u64::from(e.u32()?), u64::from(e.u32()?));
        let mut buckets = Vec::new();
        while !e.is_empty() {
            buckets.push((e.u64()?, e.u64()?));
        }
        Some(GroupStatsEntry {
            group_id,
            ref_count,
            packet_count,
            byte_count,
            duration_ms: sec * 1000 + nsec / 1_000_000,
            buckets,
        })
    }
}

/// One group as it is (type, id, buckets).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupDescEntry {
    pub kind: u8,
    pub group_id: u32,
    pub buckets: Vec<OfBucket>,
}

impl GroupDescEntry {
    pub fn encode(&self, version: Version, out: &mut Vec<u8>) {
        let start = out.len();
        out.extend_from_slice(&[0, 0]);
        out.push(self.kind);
        out.push(0);
        out.extend_from_slice(&self.group_id.to_be_bytes());
        let buckets = encode_buckets(version, &self.buckets);
        if version >= Version::V1_5 {
            out.extend_from_slice(&len16(buckets.len()).to_be_bytes());
            out.extend_from_slice(&[0; 6]);
        }
        out.extend_from_slice(&buckets);
        let len = len16(out.len() - start);
        out[start..start + 2].copy_from_slice(&len.to_be_bytes());
    }

    pub(crate) fn decode(version: Version, r: &mut Reader) -> Option<GroupDescEntry> {
        let len = usize::from(r.u16()?);
        let mut e = Reader::new(r.bytes(len.checked_sub(2)?)?);
        let kind = e.u8()?;
        e.u8()?;
        let group_id = e.u32()?;
        let buckets = if version >= Version::V1_5 {
            let blen = usize::from(e.u16()?);
            e.bytes(6)?;
            OfBucket::decode_list(version, e.bytes(blen)?).ok()?
        } else {
            OfBucket::decode_list(version, e.rest()).ok()?
        };
        Some(GroupDescEntry {
            kind,
            group_id,
            buckets,
        })
    }
}

/// What vsw's groups can do (OFPMP_GROUP_FEATURES): every type, weights,
/// liveness, chaining; up to 65,536 groups of each type; the actions
/// vsw's buckets take (output, push/pop VLAN, dec TTL, set-field, group).
pub fn group_features_body(out: &mut Vec<u8>) {
    let types: u32 = 0b1111;
    // SELECT_WEIGHT | SELECT_LIVENESS | CHAINING | CHAINING_CHECKS.
    let capabilities: u32 = 0b1111;
    out.extend_from_slice(&types.to_be_bytes());
    out.extend_from_slice(&capabilities.to_be_bytes());
    for _ in 0..4 {
        out.extend_from_slice(&65_536u32.to_be_bytes());
    }
    let actions: u32 = (1 << 0) | (1 << 17) | (1 << 18) | (1 << 22) | (1 << 24) | (1 << 25);
    for _ in 0..4 {
        out.extend_from_slice(&actions.to_be_bytes());
    }
}

/// A group stats or group desc request's group id (1.5's desc request has one; the
/// others' is everything).
pub fn decode_group_request(body: &[u8]) -> Option<u32> {
    let mut r = Reader::new(body);
    let id = r.u32()?;
    r.bytes(4)?;
    r.is_empty().then_some(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gm(kind: u8) -> GroupMod {
        GroupMod {
            command: GroupCommand::Add,
            kind,
            group_id: 7,
            buckets: vec![
                OfBucket {
                    weight: 3,
                    watch_port: 2,
                    watch_group: OFPG_ANY,
                    actions: vec![Action::Output {
                        port: 2,
                        max_len: 0,
                    }],
                },
                OfBucket {
                    weight: 1,
                    watch_port: OFPP_ANY,
                    watch_group: 9,
                    actions: vec![Action::PopVlan, Action::Group(9)],
                },
            ],
        }
    }

    #[test]
    fn group_mods_round_trip_in_each_framing() {
        for v in [Version::V1_3, Version::V1_4, Version::V1_5] {
            let g = gm(OFPGT_SELECT);
            let mut body = Vec::new();
            g.encode_body(v, &mut body);
            assert_eq!(GroupMod::decode_body(v, &body), Ok(g), "{v:?}");
            let d = GroupDescEntry {
                kind: OFPGT_FF,
                group_id: 7,
                buckets: gm(0).buckets,
            };
            let mut out = Vec::new();
            d.encode(v, &mut out);
            assert_eq!(GroupDescEntry::decode(v, &mut Reader::new(&out)), Some(d));
        }
    }

    #[test]
    fn bad_group_mods_are_refused_with_their_codes() {
        let mut body = Vec::new();
        gm(9).encode_body(Version::V1_3, &mut body);
        assert_eq!(
            GroupMod::decode_body(Version::V1_3, &body),
            Err(BadGroupMod::BadType)
        );
        body[1] = 7;
        assert_eq!(
            GroupMod::decode_body(Version::V1_3, &body),
            Err(BadGroupMod::BadCommand)
        );
        let mut g = gm(0);
        g.group_id = OFPG_ALL;
        let mut body = Vec::new();
        g.encode_body(Version::V1_3, &mut body);
        assert_eq!(
            GroupMod::decode_body(Version::V1_3, &body),
            Err(BadGroupMod::Invalid)
        );
        // A bucket longer than what is left.
        let mut body = Vec::new();
        gm(0).encode_body(Version::V1_3, &mut body);
        body[8..10].copy_from_slice(&200u16.to_be_bytes());
        assert_eq!(
            GroupMod::decode_body(Version::V1_3, &body),
            Err(BadGroupMod::BadBucket)
        );
        assert_eq!(BadGroupMod::Unknown.type_code(), (6, 8));
    }

    #[test]
    fn group_stats_round_trip() {
        let s = GroupStatsEntry {
            group_id: 3,
            ref_count: 2,
            packet_count: 10,
            byte_count: 1000,
            duration_ms: 2500,
            buckets: vec![(4, 400), (6, 600)],
        };
        let mut out = Vec::new();
        s.encode(&mut out);
        assert_eq!(out.len(), 72);
        assert_eq!(GroupStatsEntry::decode(&mut Reader::new(&out)), Some(s));
    }
}
