//! OpenFlow 1.5's OXS: a flow's statistics as typed fields (`ofp_stats`), which
//! 1.5's flow stats and flow-removed messages carry instead of fixed counters.
//! vsw says a flow's duration, idle time, packets and bytes.

use crate::frame::len16;
use crate::reader::Reader;

/// OFPXSC_OPENFLOW_BASIC.
const OFPXSC_OPENFLOW_BASIC: u16 = 0x8002;
const OXS_DURATION: u8 = 0;
const OXS_IDLE_TIME: u8 = 1;
const OXS_PACKET_COUNT: u8 = 4;
const OXS_BYTE_COUNT: u8 = 5;

/// The statistics of one flow.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowCounts {
    pub duration_ms: u64,
    pub idle_ms: u64,
    pub packets: u64,
    pub bytes: u64,
}

fn field(out: &mut Vec<u8>, id: u8, value: &[u8]) {
    out.extend_from_slice(&OFPXSC_OPENFLOW_BASIC.to_be_bytes());
    out.push(id << 1);
    out.push(value.len() as u8);
    out.extend_from_slice(value);
}

fn time(ms: u64) -> [u8; 8] {
    let mut b = [0u8; 8];
    b[..4].copy_from_slice(&((ms / 1000) as u32).to_be_bytes());
    b[4..].copy_from_slice(&(((ms % 1000) * 1_000_000) as u32).to_be_bytes());
    b
}

impl FlowCounts {
    /// `ofp_stats`: reserved, length (without padding), the fields, padding to 8.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.extend_from_slice(&[0, 0, 0, 0]);
        field(out, OXS_DURATION, &time(self.duration_ms));
        field(out, OXS_IDLE_TIME, &time(self.idle_ms));
        field(out, OXS_PACKET_COUNT, &self.packets.to_be_bytes());
        field(out, OXS_BYTE_COUNT, &self.bytes.to_be_bytes());
        let len = out.len() - start;
        out[start + 2..start + 4].copy_from_slice(&len16(len).to_be_bytes());
        out.extend(std::iter::repeat_n(0u8, len.div_ceil(8) * 8 - len));
    }

    /// The counts at the front of `r` (fields vsw does not know are skipped).
    pub(crate) fn decode(r: &mut Reader) -> Option<FlowCounts> {
        r.u16()?;
        let len = usize::from(r.u16()?);
        let mut f = Reader::new(r.bytes(len.checked_sub(4)?)?);
        r.bytes(len.div_ceil(8) * 8 - len)?;
        let mut c = FlowCounts::default();
        let ms = |v: &[u8]| -> Option<u64> {
            let sec = u64::from(u32::from_be_bytes(v.get(..4)?.try_into().ok()?));
            let nsec = u64::from(u32::from_be_bytes(v.get(4..8)?.try_into().ok()?));
            Some(sec * 1000 + nsec / 1_000_000)
        };
        while !f.is_empty() {
            f.u16()?;
            let id = f.u8()? >> 1;
            let n = usize::from(f.u8()?);
            let v = f.bytes(n)?;
            let word = || Some(u64::from_be_bytes(v.try_into().ok()?));
            match id {
                OXS_DURATION => c.duration_ms = ms(v)?,
                OXS_IDLE_TIME => c.idle_ms = ms(v)?,
                OXS_PACKET_COUNT => c.packets = word()?,
                OXS_BYTE_COUNT => c.bytes = word()?,
                _ => {}
            }
        }
        Some(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_round_trip_padded_to_8() {
        let c = FlowCounts {
            duration_ms: 12_345,
            idle_ms: 678,
            packets: 9,
            bytes: 900,
        };
        let mut out = Vec::new();
        c.encode(&mut out);
        // 4 + (4 + 8) * 4 = 52, padded to 56.
        assert_eq!(out.len(), 56);
        assert_eq!(&out[2..4], &52u16.to_be_bytes());
        assert_eq!(FlowCounts::decode(&mut Reader::new(&out)), Some(c));
    }
}
