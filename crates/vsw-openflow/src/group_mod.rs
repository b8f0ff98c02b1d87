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

/// OpenFlow 1.5's bucket ids: the largest a bucket may have, and what a group-mod's
/// `command_bucket_id` says besides one bucket.
pub const OFPG15_BUCKET_MAX: u32 = 0xffff_ff00;
pub const OFPG15_BUCKET_FIRST: u32 = 0xffff_fffd;
pub const OFPG15_BUCKET_LAST: u32 = 0xffff_fffe;
pub const OFPG15_BUCKET_ALL: u32 = 0xffff_ffff;

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
    /// OpenFlow 1.5: the group-mod's buckets go into the group's, where
    /// `command_bucket_id` says (first, last, or after that bucket).
    InsertBucket,
    /// OpenFlow 1.5: the bucket `command_bucket_id` names (first, last, all) goes.
    RemoveBucket,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OfBucket {
    /// OpenFlow 1.5's bucket id (earlier versions have none: their place).
    pub bucket_id: u32,
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
    /// OpenFlow 1.5: which bucket an insert or a remove is about
    /// ([`OFPG15_BUCKET_ALL`] for the other commands).
    pub command_bucket_id: u32,
    /// OpenFlow 1.5's group properties as they came (Netronome's selection
    /// method: `selection_method=`, `fields(…)`), kept and given back.
    pub properties: Vec<u8>,
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
    #[error("no bucket of that id in the group (GROUP_MOD_FAILED/UNKNOWN_BUCKET)")]
    UnknownBucket,
    #[error("a bucket id the group has already (GROUP_MOD_FAILED/BUCKET_EXISTS)")]
    BucketExists,
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
            BadGroupMod::UnknownBucket => (6, 15),
            BadGroupMod::BucketExists => (6, 16),
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
    fn encode(&self, version: Version, out: &mut Vec<u8>) {
        let start = out.len();
        let actions = encode_actions(&self.actions);
        if version >= Version::V1_5 {
            out.extend_from_slice(&[0, 0]); // length, below
            out.extend_from_slice(&len16(actions.len()).to_be_bytes());
            out.extend_from_slice(&self.bucket_id.to_be_bytes());
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

    /// The buckets of a group of type `kind` (1.5's weight, when no property
    /// gives one, is 1 for a select group's bucket and 0 for another's, as Open
    /// vSwitch reads it).
    fn decode_list(version: Version, kind: u8, buf: &[u8]) -> Result<Vec<OfBucket>, BadGroupMod> {
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
                let bucket_id = b.u32().ok_or(BadGroupMod::BadBucket)?;
                if bucket_id > OFPG15_BUCKET_MAX {
                    return Err(BadGroupMod::BadBucket);
                }
                // Two of one id in one message: BAD_BUCKET, as Open vSwitch.
                if out.iter().any(|o: &OfBucket| o.bucket_id == bucket_id) {
                    return Err(BadGroupMod::BadBucket);
                }
                let actions = b.bytes(actions_len).ok_or(BadGroupMod::BadBucket)?;
                let mut bucket = OfBucket {
                    bucket_id,
                    weight: u16::from(kind == OFPGT_SELECT),
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
                    bucket_id: out.len() as u32,
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
    for b in buckets {
        b.encode(version, &mut out);
    }
    out
}

impl GroupMod {
    pub fn encode_body(&self, version: Version, out: &mut Vec<u8>) {
        let command: u16 = match self.command {
            GroupCommand::Add => 0,
            GroupCommand::Modify => 1,
            GroupCommand::Delete => 2,
            GroupCommand::InsertBucket => 3,
            GroupCommand::RemoveBucket => 5,
        };
        out.extend_from_slice(&command.to_be_bytes());
        out.push(self.kind);
        out.push(0);
        out.extend_from_slice(&self.group_id.to_be_bytes());
        let buckets = encode_buckets(version, &self.buckets);
        if version >= Version::V1_5 {
            out.extend_from_slice(&len16(buckets.len()).to_be_bytes());
            out.extend_from_slice(&[0, 0]);
            out.extend_from_slice(&self.command_bucket_id.to_be_bytes());
        }
        out.extend_from_slice(&buckets);
        if version >= Version::V1_5 {
            out.extend_from_slice(&self.properties);
        }
    }

    pub fn decode_body(version: Version, body: &[u8]) -> Result<GroupMod, BadGroupMod> {
        let mut r = Reader::new(body);
        let short = BadGroupMod::Action(BadFlowMod::BadLen);
        let command = match r.u16().ok_or(short)? {
            0 => GroupCommand::Add,
            1 => GroupCommand::Modify,
            2 => GroupCommand::Delete,
            3 if version >= Version::V1_5 => GroupCommand::InsertBucket,
            5 if version >= Version::V1_5 => GroupCommand::RemoveBucket,
            _ => return Err(BadGroupMod::BadCommand),
        };
        let kind = r.u8().ok_or(short)?;
        r.u8().ok_or(short)?;
        let group_id = r.u32().ok_or(short)?;
        let (buckets, command_bucket_id, properties) = if version >= Version::V1_5 {
            let len = usize::from(r.u16().ok_or(short)?);
            r.bytes(2).ok_or(short)?;
            let id = r.u32().ok_or(short)?;
            // As Open vSwitch checks it: one bucket, first or last for an insert
            // (and all for a remove); all for the other commands.
            let one =
                id <= OFPG15_BUCKET_MAX || id == OFPG15_BUCKET_FIRST || id == OFPG15_BUCKET_LAST;
            let fits = match command {
                GroupCommand::InsertBucket => one,
                GroupCommand::RemoveBucket => one || id == OFPG15_BUCKET_ALL,
                _ => id == OFPG15_BUCKET_ALL,
            };
            if !fits {
                return Err(BadGroupMod::BadBucket);
            }
            let buckets = r.bytes(len).ok_or(short)?;
            let buckets = OfBucket::decode_list(version, kind, buckets)?;
            // A remove names its bucket; it carries none.
            if command == GroupCommand::RemoveBucket && !buckets.is_empty() {
                return Err(BadGroupMod::BadBucket);
            }
            (buckets, id, check_group_properties(r.rest())?.to_vec())
        } else {
            let buckets = OfBucket::decode_list(version, kind, r.rest())?;
            (buckets, OFPG15_BUCKET_ALL, Vec::new())
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
            command_bucket_id,
            properties,
        })
    }
}

/// An insert or a remove of buckets (`gm`) on the group as it is (`current`, as a
/// group description says it; `None`: no such group) as the modify it comes to:
/// the group's type and properties, its buckets after the command.
pub fn resolve_bucket_command(
    current: Option<&GroupDescEntry>,
    gm: &GroupMod,
) -> Result<GroupMod, BadGroupMod> {
    let cur = current.ok_or(BadGroupMod::Unknown)?;
    Ok(GroupMod {
        command: GroupCommand::Modify,
        kind: cur.kind,
        group_id: gm.group_id,
        buckets: apply_bucket_command(&cur.buckets, gm)?,
        command_bucket_id: OFPG15_BUCKET_ALL,
        properties: cur.properties.clone(),
    })
}

impl GroupMod {
    /// The group an add or a modify makes, as its description says it.
    pub fn described(&self) -> GroupDescEntry {
        GroupDescEntry {
            kind: self.kind,
            group_id: self.group_id,
            buckets: self.buckets.clone(),
            properties: self.properties.clone(),
        }
    }
}

/// OpenFlow 1.5's group properties, each whole (a type, a length of at least 4,
/// padded to 8): kept as they came.
fn check_group_properties(p: &[u8]) -> Result<&[u8], BadGroupMod> {
    let mut r = Reader::new(p);
    while !r.is_empty() {
        r.u16().ok_or(BadGroupMod::BadBucket)?;
        let len = usize::from(r.u16().ok_or(BadGroupMod::BadBucket)?);
        if len < 4 {
            return Err(BadGroupMod::BadBucket);
        }
        // The length leaves out the padding to 8.
        r.bytes(len.div_ceil(8) * 8 - 4)
            .ok_or(BadGroupMod::BadBucket)?;
    }
    Ok(p)
}

/// The buckets a group has after an insert or a remove (`gm`) on the buckets it
/// had, as Open vSwitch places them: an insert puts its buckets first, last, or
/// right after the bucket named; a remove takes the first, the last, the one
/// named, or all. A bucket id the group has already, or a named bucket it does
/// not have, is refused.
pub fn apply_bucket_command(had: &[OfBucket], gm: &GroupMod) -> Result<Vec<OfBucket>, BadGroupMod> {
    let id = gm.command_bucket_id;
    let named = || {
        had.iter()
            .position(|b| b.bucket_id == id)
            .ok_or(BadGroupMod::UnknownBucket)
    };
    match gm.command {
        GroupCommand::InsertBucket => {
            if gm
                .buckets
                .iter()
                .any(|n| had.iter().any(|b| b.bucket_id == n.bucket_id))
            {
                return Err(BadGroupMod::BucketExists);
            }
            let at = match id {
                OFPG15_BUCKET_FIRST => 0,
                OFPG15_BUCKET_LAST => had.len(),
                _ => named()? + 1,
            };
            let mut out = had[..at].to_vec();
            out.extend(gm.buckets.iter().cloned());
            out.extend_from_slice(&had[at..]);
            Ok(out)
        }
        GroupCommand::RemoveBucket => {
            let gone = match id {
                OFPG15_BUCKET_ALL => return Ok(Vec::new()),
                OFPG15_BUCKET_FIRST => (!had.is_empty()).then_some(0),
                OFPG15_BUCKET_LAST => had.len().checked_sub(1),
                _ => Some(named()?),
            };
            let mut out = had.to_vec();
            if let Some(i) = gone {
                out.remove(i);
            }
            Ok(out)
        }
        _ => Ok(gm.buckets.clone()),
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
        crate::frame::put_duration(self.duration_ms, out);
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
    /// OpenFlow 1.5's group properties, as the group-mod gave them.
    pub properties: Vec<u8>,
}

impl GroupDescEntry {
    pub fn encode(&self, version: Version, out: &mut Vec<u8>) {
        let start = out.len();
        out.extend_from_slice(&[0, 0]);
        out.push(self.kind);
        out.push(0);
        out.extend_from_slice(&self.group_id.to_be_bytes());
        // Each bucket's actions as this version reads them (a bucket written in
        // 1.5 with a copy-field is Nicira's move before 1.5, and so on).
        let as_read: Vec<OfBucket> = self
            .buckets
            .iter()
            .map(|b| OfBucket {
                actions: crate::as_read::actions_as_version(version, &b.actions),
                ..b.clone()
            })
            .collect();
        let buckets = encode_buckets(version, &as_read);
        if version >= Version::V1_5 {
            out.extend_from_slice(&len16(buckets.len()).to_be_bytes());
            out.extend_from_slice(&[0; 6]);
        }
        out.extend_from_slice(&buckets);
        if version >= Version::V1_5 {
            out.extend_from_slice(&self.properties);
        }
        let len = len16(out.len() - start);
        out[start..start + 2].copy_from_slice(&len.to_be_bytes());
    }

    pub(crate) fn decode(version: Version, r: &mut Reader) -> Option<GroupDescEntry> {
        let len = usize::from(r.u16()?);
        let mut e = Reader::new(r.bytes(len.checked_sub(2)?)?);
        let kind = e.u8()?;
        e.u8()?;
        let group_id = e.u32()?;
        let (buckets, properties) = if version >= Version::V1_5 {
            let blen = usize::from(e.u16()?);
            e.bytes(6)?;
            let buckets = OfBucket::decode_list(version, kind, e.bytes(blen)?).ok()?;
            (buckets, check_group_properties(e.rest()).ok()?.to_vec())
        } else {
            (
                OfBucket::decode_list(version, kind, e.rest()).ok()?,
                Vec::new(),
            )
        };
        Some(GroupDescEntry {
            kind,
            group_id,
            buckets,
            properties,
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
                    bucket_id: 0,
                    weight: 3,
                    watch_port: 2,
                    watch_group: OFPG_ANY,
                    actions: vec![Action::Output {
                        port: 2,
                        max_len: 0,
                    }],
                },
                OfBucket {
                    bucket_id: 1,
                    weight: 1,
                    watch_port: OFPP_ANY,
                    watch_group: 9,
                    actions: vec![Action::PopVlan, Action::Group(9)],
                },
            ],
            command_bucket_id: OFPG15_BUCKET_ALL,
            properties: Vec::new(),
        }
    }

    /// Buckets of these ids, each sending to its own id.
    fn buckets(ids: &[u32]) -> Vec<OfBucket> {
        ids.iter()
            .map(|&bucket_id| OfBucket {
                bucket_id,
                weight: 1,
                watch_port: OFPP_ANY,
                watch_group: OFPG_ANY,
                actions: vec![Action::Output {
                    port: bucket_id,
                    max_len: 0,
                }],
            })
            .collect()
    }

    fn ids(b: &[OfBucket]) -> Vec<u32> {
        b.iter().map(|b| b.bucket_id).collect()
    }

    #[test]
    fn buckets_go_in_and_out_where_open_vswitch_puts_them() {
        let had = buckets(&[1, 2, 3]);
        let command = |command, command_bucket_id, new: &[u32]| GroupMod {
            command,
            command_bucket_id,
            buckets: buckets(new),
            ..gm(OFPGT_SELECT)
        };
        let insert = |at, new: &[u32]| {
            apply_bucket_command(&had, &command(GroupCommand::InsertBucket, at, new))
                .map(|b| ids(&b))
        };
        let remove = |at| {
            apply_bucket_command(&had, &command(GroupCommand::RemoveBucket, at, &[]))
                .map(|b| ids(&b))
        };
        assert_eq!(
            insert(OFPG15_BUCKET_FIRST, &[7, 8]),
            Ok(vec![7, 8, 1, 2, 3])
        );
        assert_eq!(insert(OFPG15_BUCKET_LAST, &[7]), Ok(vec![1, 2, 3, 7]));
        assert_eq!(insert(2, &[7, 8]), Ok(vec![1, 2, 7, 8, 3]));
        assert_eq!(insert(9, &[7]), Err(BadGroupMod::UnknownBucket));
        assert_eq!(
            insert(OFPG15_BUCKET_LAST, &[2]),
            Err(BadGroupMod::BucketExists)
        );
        assert_eq!(remove(OFPG15_BUCKET_FIRST), Ok(vec![2, 3]));
        assert_eq!(remove(OFPG15_BUCKET_LAST), Ok(vec![1, 2]));
        assert_eq!(remove(2), Ok(vec![1, 3]));
        assert_eq!(remove(OFPG15_BUCKET_ALL), Ok(vec![]));
        assert_eq!(remove(9), Err(BadGroupMod::UnknownBucket));
        // On the wire: 1.5 only, with a bucket the command may name.
        let mut body = Vec::new();
        command(GroupCommand::InsertBucket, 2, &[7]).encode_body(Version::V1_5, &mut body);
        let back = GroupMod::decode_body(Version::V1_5, &body).unwrap();
        assert_eq!(
            (back.command, back.command_bucket_id),
            (GroupCommand::InsertBucket, 2)
        );
        assert_eq!(
            GroupMod::decode_body(Version::V1_4, &body),
            Err(BadGroupMod::BadCommand)
        );
        let mut all = Vec::new();
        command(GroupCommand::InsertBucket, OFPG15_BUCKET_ALL, &[7])
            .encode_body(Version::V1_5, &mut all);
        assert_eq!(
            GroupMod::decode_body(Version::V1_5, &all),
            Err(BadGroupMod::BadBucket)
        );
        // Two buckets of one id in one group-mod.
        let mut twice = Vec::new();
        command(GroupCommand::Add, OFPG15_BUCKET_ALL, &[4, 4])
            .encode_body(Version::V1_5, &mut twice);
        assert_eq!(
            GroupMod::decode_body(Version::V1_5, &twice),
            Err(BadGroupMod::BadBucket)
        );
        // A remove that carries buckets.
        let mut carrying = Vec::new();
        command(GroupCommand::RemoveBucket, 1, &[4]).encode_body(Version::V1_5, &mut carrying);
        assert_eq!(
            GroupMod::decode_body(Version::V1_5, &carrying),
            Err(BadGroupMod::BadBucket)
        );
    }

    #[test]
    fn group_properties_are_kept_whole_or_refused() {
        let mut g = gm(OFPGT_SELECT);
        // An experimenter property (24 bytes, padded to 24).
        let mut prop = vec![0xff, 0xff, 0, 24, 0, 0, 0x15, 0x4d, 0, 0, 0, 1];
        prop.extend_from_slice(b"hash\0\0\0\0");
        prop.extend_from_slice(&[0; 4]);
        g.properties = prop;
        let mut body = Vec::new();
        g.encode_body(Version::V1_5, &mut body);
        assert_eq!(GroupMod::decode_body(Version::V1_5, &body), Ok(g.clone()));
        body.truncate(body.len() - 4);
        assert_eq!(
            GroupMod::decode_body(Version::V1_5, &body),
            Err(BadGroupMod::BadBucket)
        );
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
                properties: Vec::new(),
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
