//! Meters on the wire: OFPT_METER_MOD and the meter multiparts — statistics,
//! configuration, features (one layout in 1.3 to 1.5, but for 1.5's features).

use crate::frame::len16;
use crate::reader::Reader;

pub const OFPT_METER_MOD: u8 = 29;
pub const OFPMP_METER: u16 = 9;
pub const OFPMP_METER_CONFIG: u16 = 10;
pub const OFPMP_METER_FEATURES: u16 = 11;
/// Every meter (a delete's or a request's meter id).
pub const OFPM_ALL: u32 = 0xffff_ffff;

/// Meter flags.
pub const OFPMF_KBPS: u16 = 1;
pub const OFPMF_PKTPS: u16 = 2;
pub const OFPMF_BURST: u16 = 4;
pub const OFPMF_STATS: u16 = 8;

/// Band types.
pub const OFPMBT_DROP: u16 = 1;
pub const OFPMBT_DSCP_REMARK: u16 = 2;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MeterCommand {
    Add,
    Modify,
    Delete,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OfBand {
    pub kind: u16,
    pub rate: u32,
    pub burst_size: u32,
    /// DSCP remark bands: how many levels.
    pub prec_level: u8,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MeterMod {
    pub command: MeterCommand,
    pub flags: u16,
    pub meter_id: u32,
    pub bands: Vec<OfBand>,
}

/// Why a meter-mod was refused: the error (type, code) it is answered with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BadMeterMod {
    #[error("the meter exists already (METER_MOD_FAILED/METER_EXISTS)")]
    Exists,
    #[error("a meter id vsw does not have (METER_MOD_FAILED/INVALID_METER)")]
    Invalid,
    #[error("no such meter (METER_MOD_FAILED/UNKNOWN_METER)")]
    Unknown,
    #[error("a meter-mod command vsw does not know (METER_MOD_FAILED/BAD_COMMAND)")]
    BadCommand,
    #[error("meter flags vsw does not take (METER_MOD_FAILED/BAD_FLAGS)")]
    BadFlags,
    #[error("a band rate of 0 (METER_MOD_FAILED/BAD_RATE)")]
    BadRate,
    #[error("a burst size without the burst flag (METER_MOD_FAILED/BAD_BURST)")]
    BadBurst,
    #[error("a band vsw does not have or that does not fit (METER_MOD_FAILED/BAD_BAND)")]
    BadBand,
    #[error("a band value that does not fit (METER_MOD_FAILED/BAD_BAND_VALUE)")]
    BadBandValue,
    #[error("more bands than vsw keeps (METER_MOD_FAILED/OUT_OF_BANDS)")]
    OutOfBands,
}

impl BadMeterMod {
    pub fn type_code(self) -> (u16, u16) {
        let code = match self {
            BadMeterMod::Exists => 1,
            BadMeterMod::Invalid => 2,
            BadMeterMod::Unknown => 3,
            BadMeterMod::BadCommand => 4,
            BadMeterMod::BadFlags => 5,
            BadMeterMod::BadRate => 6,
            BadMeterMod::BadBurst => 7,
            BadMeterMod::BadBand => 8,
            BadMeterMod::BadBandValue => 9,
            BadMeterMod::OutOfBands => 11,
        };
        (12, code)
    }
}

fn encode_bands(bands: &[OfBand], out: &mut Vec<u8>) {
    for b in bands {
        out.extend_from_slice(&b.kind.to_be_bytes());
        out.extend_from_slice(&16u16.to_be_bytes());
        out.extend_from_slice(&b.rate.to_be_bytes());
        out.extend_from_slice(&b.burst_size.to_be_bytes());
        out.push(b.prec_level);
        out.extend_from_slice(&[0; 3]);
    }
}

fn decode_bands(buf: &[u8]) -> Result<Vec<OfBand>, BadMeterMod> {
    let mut r = Reader::new(buf);
    let mut out = Vec::new();
    while !r.is_empty() {
        let kind = r.u16().ok_or(BadMeterMod::BadBand)?;
        let len = r.u16().ok_or(BadMeterMod::BadBand)?;
        if len != 16 {
            return Err(BadMeterMod::BadBand);
        }
        let rate = r.u32().ok_or(BadMeterMod::BadBand)?;
        let burst_size = r.u32().ok_or(BadMeterMod::BadBand)?;
        let prec_level = r.u8().ok_or(BadMeterMod::BadBand)?;
        r.bytes(3).ok_or(BadMeterMod::BadBand)?;
        out.push(OfBand {
            kind,
            rate,
            burst_size,
            prec_level: if kind == OFPMBT_DSCP_REMARK {
                prec_level
            } else {
                0
            },
        });
    }
    Ok(out)
}

impl MeterMod {
    pub fn encode_body(&self, out: &mut Vec<u8>) {
        let command: u16 = match self.command {
            MeterCommand::Add => 0,
            MeterCommand::Modify => 1,
            MeterCommand::Delete => 2,
        };
        out.extend_from_slice(&command.to_be_bytes());
        out.extend_from_slice(&self.flags.to_be_bytes());
        out.extend_from_slice(&self.meter_id.to_be_bytes());
        encode_bands(&self.bands, out);
    }

    pub fn decode_body(body: &[u8]) -> Result<MeterMod, BadMeterMod> {
        let mut r = Reader::new(body);
        let command = match r.u16().ok_or(BadMeterMod::BadCommand)? {
            0 => MeterCommand::Add,
            1 => MeterCommand::Modify,
            2 => MeterCommand::Delete,
            _ => return Err(BadMeterMod::BadCommand),
        };
        let flags = r.u16().ok_or(BadMeterMod::BadFlags)?;
        let meter_id = r.u32().ok_or(BadMeterMod::Invalid)?;
        let bands = decode_bands(r.rest())?;
        if flags & !(OFPMF_KBPS | OFPMF_PKTPS | OFPMF_BURST | OFPMF_STATS) != 0
            || (flags & OFPMF_KBPS != 0) == (flags & OFPMF_PKTPS != 0)
                && command != MeterCommand::Delete
        {
            return Err(BadMeterMod::BadFlags);
        }
        Ok(MeterMod {
            command,
            flags,
            meter_id,
            bands,
        })
    }
}

/// One meter's statistics.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MeterStatsEntry {
    pub meter_id: u32,
    pub flow_count: u32,
    pub packet_in_count: u64,
    pub byte_in_count: u64,
    pub duration_ms: u64,
    pub bands: Vec<(u64, u64)>,
}

impl MeterStatsEntry {
    pub fn encode(&self, out: &mut Vec<u8>) {
        let len = 40 + 16 * self.bands.len();
        out.extend_from_slice(&self.meter_id.to_be_bytes());
        out.extend_from_slice(&len16(len).to_be_bytes());
        out.extend_from_slice(&[0; 6]);
        out.extend_from_slice(&self.flow_count.to_be_bytes());
        out.extend_from_slice(&self.packet_in_count.to_be_bytes());
        out.extend_from_slice(&self.byte_in_count.to_be_bytes());
        crate::frame::put_duration(self.duration_ms, out);
        for (p, b) in &self.bands {
            out.extend_from_slice(&p.to_be_bytes());
            out.extend_from_slice(&b.to_be_bytes());
        }
    }

    pub(crate) fn decode(r: &mut Reader) -> Option<MeterStatsEntry> {
        let meter_id = r.u32()?;
        let len = usize::from(r.u16()?);
        let mut e = Reader::new(r.bytes(len.checked_sub(6)?)?);
        e.bytes(6)?;
        let flow_count = e.u32()?;
        let (packet_in_count, byte_in_count) = (e.u64()?, e.u64()?);
        let (sec, nsec) = (u64::from(e.u32()?), u64::from(e.u32()?));
        let mut bands = Vec::new();
        while !e.is_empty() {
            bands.push((e.u64()?, e.u64()?));
        }
        Some(MeterStatsEntry {
            meter_id,
            flow_count,
            packet_in_count,
            byte_in_count,
            duration_ms: sec * 1000 + nsec / 1_000_000,
            bands,
        })
    }
}

/// One meter's configuration (`ofp_meter_config`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MeterConfigEntry {
    pub flags: u16,
    pub meter_id: u32,
    pub bands: Vec<OfBand>,
}

impl MeterConfigEntry {
    pub fn encode(&self, out: &mut Vec<u8>) {
        let len = 8 + 16 * self.bands.len();
        out.extend_from_slice(&len16(len).to_be_bytes());
        out.extend_from_slice(&self.flags.to_be_bytes());
        out.extend_from_slice(&self.meter_id.to_be_bytes());
        encode_bands(&self.bands, out);
    }

    pub(crate) fn decode(r: &mut Reader) -> Option<MeterConfigEntry> {
        let len = usize::from(r.u16()?);
        let flags = r.u16()?;
        let meter_id = r.u32()?;
        let bands = decode_bands(r.bytes(len.checked_sub(8)?)?).ok()?;
        Some(MeterConfigEntry {
            flags,
            meter_id,
            bands,
        })
    }
}

/// What vsw's meters can do: 4,096 meters, drop and DSCP remark bands, every
/// flag, four bands each. (1.5 appends a `features` word; Open vSwitch 3.1, the
/// peer tested against, reads 1.5's reply as 1.3's, so vsw sends that.)
pub fn meter_features_body(out: &mut Vec<u8>) {
    out.extend_from_slice(&4096u32.to_be_bytes());
    let band_types: u32 = (1 << OFPMBT_DROP) | (1 << OFPMBT_DSCP_REMARK);
    out.extend_from_slice(&band_types.to_be_bytes());
    let capabilities = u32::from(OFPMF_KBPS | OFPMF_PKTPS | OFPMF_BURST | OFPMF_STATS);
    out.extend_from_slice(&capabilities.to_be_bytes());
    out.push(4); // max bands
    out.push(0); // max color
    out.extend_from_slice(&[0, 0]);
}

/// A meter stats or config request's meter id.
pub fn decode_meter_request(body: &[u8]) -> Option<u32> {
    let mut r = Reader::new(body);
    let id = r.u32()?;
    r.bytes(4)?;
    r.is_empty().then_some(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meter_messages_round_trip_and_bad_ones_are_refused() {
        let m = MeterMod {
            command: MeterCommand::Add,
            flags: OFPMF_PKTPS | OFPMF_BURST | OFPMF_STATS,
            meter_id: 3,
            bands: vec![
                OfBand {
                    kind: OFPMBT_DROP,
                    rate: 10_000,
                    burst_size: 100,
                    prec_level: 0,
                },
                OfBand {
                    kind: OFPMBT_DSCP_REMARK,
                    rate: 5_000,
                    burst_size: 50,
                    prec_level: 2,
                },
            ],
        };
        let mut body = Vec::new();
        m.encode_body(&mut body);
        assert_eq!(MeterMod::decode_body(&body), Ok(m.clone()));
        let mut both = body.clone();
        both[3] |= OFPMF_KBPS as u8;
        assert_eq!(MeterMod::decode_body(&both), Err(BadMeterMod::BadFlags));
        let mut short = body.clone();
        short.pop();
        assert_eq!(MeterMod::decode_body(&short), Err(BadMeterMod::BadBand));
        let s = MeterStatsEntry {
            meter_id: 3,
            flow_count: 1,
            packet_in_count: 9,
            byte_in_count: 900,
            duration_ms: 1500,
            bands: vec![(1, 100), (2, 200)],
        };
        let mut out = Vec::new();
        s.encode(&mut out);
        assert_eq!(MeterStatsEntry::decode(&mut Reader::new(&out)), Some(s));
        let c = MeterConfigEntry {
            flags: m.flags,
            meter_id: 3,
            bands: m.bands,
        };
        let mut out = Vec::new();
        c.encode(&mut out);
        assert_eq!(MeterConfigEntry::decode(&mut Reader::new(&out)), Some(c));
        assert_eq!(BadMeterMod::Unknown.type_code(), (12, 3));
    }
}
