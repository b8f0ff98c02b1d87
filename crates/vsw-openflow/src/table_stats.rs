//! Table and aggregate statistics (`OFPMP_TABLE`, `OFPMP_AGGREGATE`), and the queue
//! statistics of a switch without queues (`OFPMP_QUEUE_STATS`: none).

use crate::frame::len16;
use crate::reader::Reader;
use crate::version::Version;

pub const OFPMP_AGGREGATE: u16 = 2;
pub const OFPMP_TABLE: u16 = 3;
pub const OFPMP_QUEUE_STATS: u16 = 5;

/// One table's counters: its flows, the packets looked up in it and those a flow
/// matched (a miss is a lookup, not a match).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableStats {
    pub table_id: u8,
    pub active_count: u32,
    pub lookup_count: u64,
    pub matched_count: u64,
}

impl TableStats {
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.push(self.table_id);
        out.extend_from_slice(&[0; 3]);
        out.extend_from_slice(&self.active_count.to_be_bytes());
        out.extend_from_slice(&self.lookup_count.to_be_bytes());
        out.extend_from_slice(&self.matched_count.to_be_bytes());
    }

    pub(crate) fn decode(r: &mut Reader) -> Option<TableStats> {
        let table_id = r.u8()?;
        r.bytes(3)?;
        Some(TableStats {
            table_id,
            active_count: r.u32()?,
            lookup_count: r.u64()?,
            matched_count: r.u64()?,
        })
    }
}

/// The sums over the flows a flow-stats-like request selects.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AggregateStats {
    pub packet_count: u64,
    pub byte_count: u64,
    pub flow_count: u32,
}

/// OXS field numbers 1.5 says an aggregate with.
const OXS_FLOW_COUNT: u8 = 3;
const OXS_PACKET_COUNT: u8 = 4;
const OXS_BYTE_COUNT: u8 = 5;

impl AggregateStats {
    pub fn encode(&self, version: Version, out: &mut Vec<u8>) {
        if version >= Version::V1_5 {
            // `ofp_stats`: reserved, length, OXS fields, padding to 8.
            let start = out.len();
            out.extend_from_slice(&[0; 4]);
            for (id, value) in [
                (OXS_FLOW_COUNT, self.flow_count.to_be_bytes().to_vec()),
                (OXS_PACKET_COUNT, self.packet_count.to_be_bytes().to_vec()),
                (OXS_BYTE_COUNT, self.byte_count.to_be_bytes().to_vec()),
            ] {
                out.extend_from_slice(&0x8002u16.to_be_bytes());
                out.push(id << 1);
                out.push(value.len() as u8);
                out.extend_from_slice(&value);
            }
            let len = out.len() - start;
            out[start + 2..start + 4].copy_from_slice(&len16(len).to_be_bytes());
            out.extend(std::iter::repeat_n(0u8, len.div_ceil(8) * 8 - len));
            return;
        }
        out.extend_from_slice(&self.packet_count.to_be_bytes());
        out.extend_from_slice(&self.byte_count.to_be_bytes());
        out.extend_from_slice(&self.flow_count.to_be_bytes());
        out.extend_from_slice(&[0; 4]);
    }

    pub(crate) fn decode(version: Version, r: &mut Reader) -> Option<AggregateStats> {
        if version >= Version::V1_5 {
            r.u16()?;
            let len = usize::from(r.u16()?);
            let mut f = Reader::new(r.bytes(len.checked_sub(4)?)?);
            r.bytes(len.div_ceil(8) * 8 - len)?;
            let mut a = AggregateStats::default();
            while !f.is_empty() {
                f.u16()?;
                let id = f.u8()? >> 1;
                let n = usize::from(f.u8()?);
                let v = f.bytes(n)?;
                let n = v.iter().fold(0u64, |n, b| (n << 8) | u64::from(*b));
                match id {
                    OXS_FLOW_COUNT => a.flow_count = n as u32,
                    OXS_PACKET_COUNT => a.packet_count = n,
                    OXS_BYTE_COUNT => a.byte_count = n,
                    _ => {}
                }
            }
            return Some(a);
        }
        let a = AggregateStats {
            packet_count: r.u64()?,
            byte_count: r.u64()?,
            flow_count: r.u32()?,
        };
        r.bytes(4)?;
        Some(a)
    }
}
