//! Meters: a rule's `meter:N` action measures the packets that pass through it
//! against meter N's bands — rates in kilobits or packets per second, each with a
//! burst — and the band of the highest rate the traffic exceeds decides: `drop`
//! discards the packet, `dscp_remark` raises its drop precedence.
//!
//! Written as `ovs-ofctl add-meter` takes them:
//! `meter=1,kbps,burst,stats,bands=type=drop,rate=1000,burst_size=100`.

use crate::error::FlowSyntaxError;
use crate::values::{bad, parse_uint};

pub use crate::table::MAX_METER_ID;
/// Bands a meter has at most.
pub const MAX_BANDS: usize = 4;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BandType {
    Drop,
    /// Raise the drop precedence of the packet's DSCP by this many levels.
    DscpRemark(u8),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Band {
    pub kind: BandType,
    /// Kilobits or packets per second.
    pub rate: u32,
    /// Kilobits or packets; 0 unless the meter has the `burst` flag.
    pub burst_size: u32,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MeterSpec {
    pub id: u32,
    /// Rates in packets per second (else kilobits per second).
    pub pktps: bool,
    /// The bands' burst sizes are the user's (else vsw picks: a tenth of a
    /// second's worth).
    pub burst: bool,
    /// Keep counters (vsw always does; kept to echo the meter as configured).
    pub stats: bool,
    pub bands: Vec<Band>,
}

impl MeterSpec {
    pub fn check(&self) -> Result<(), FlowSyntaxError> {
        let why = |w: &str| Err(bad("meter", &self.id.to_string(), w));
        if self.id == 0 || self.id > MAX_METER_ID {
            return why("meters are numbered 1..4096");
        }
        if self.bands.is_empty() || self.bands.len() > MAX_BANDS {
            return why("a meter has 1 to 4 bands");
        }
        for b in &self.bands {
            if b.rate == 0 {
                return why("a band's rate is at least 1");
            }
            if !self.burst && b.burst_size != 0 {
                return why("a burst_size needs the meter's burst flag");
            }
            if let BandType::DscpRemark(p) = b.kind {
                if p == 0 || p > 3 {
                    return why("prec_level is 1..3");
                }
            }
        }
        Ok(())
    }

    /// A band's burst in its own units: the user's, or a tenth of a second's worth
    /// (at least one packet, or one 1500-byte frame's kilobits).
    pub fn burst_of(&self, b: &Band) -> u32 {
        if self.burst && b.burst_size > 0 {
            return b.burst_size;
        }
        let floor = if self.pktps { 1 } else { 12 };
        (b.rate / 10).max(floor)
    }
}

/// Parses a meter as `ovs-ofctl add-meter` takes it.
pub fn parse_meter(text: &str) -> Result<MeterSpec, FlowSyntaxError> {
    let (head, bands) = match text.split_once("bands=") {
        Some((h, b)) => (h, b),
        None => (text, ""),
    };
    let mut m = MeterSpec {
        id: 0,
        pktps: false,
        burst: false,
        stats: false,
        bands: Vec::new(),
    };
    for tok in head.split(',').map(str::trim).filter(|t| !t.is_empty()) {
        match tok.split_once('=') {
            Some(("meter", v)) => m.id = parse_uint("meter", v, u128::from(MAX_METER_ID))? as u32,
            None if tok == "kbps" => m.pktps = false,
            None if tok == "pktps" => m.pktps = true,
            None if tok == "burst" => m.burst = true,
            None if tok == "stats" => m.stats = true,
            _ => return Err(FlowSyntaxError::UnknownField(tok.to_string())),
        }
    }
    // Bands: each starts with `type=`.
    let mut current: Option<Band> = None;
    let mut prec: Option<u8> = None;
    for tok in bands.split(',').map(str::trim).filter(|t| !t.is_empty()) {
        let (k, v) = tok
            .split_once('=')
            .ok_or_else(|| bad("bands", tok, "name=value"))?;
        match k {
            "type" => {
                if let Some(b) = current.take() {
                    m.bands.push(finish(b, prec.take())?);
                }
                let kind = match v {
                    "drop" => BandType::Drop,
                    "dscp_remark" => BandType::DscpRemark(0),
                    _ => return Err(bad("type", v, "drop or dscp_remark")),
                };
                current = Some(Band {
                    kind,
                    rate: 0,
                    burst_size: 0,
                });
            }
            "rate" | "burst_size" | "prec_level" => {
                let b = current
                    .as_mut()
                    .ok_or_else(|| bad(k, v, "a band starts with type="))?;
                let n = parse_uint(k, v, u128::from(u32::MAX))? as u32;
                match k {
                    "rate" => b.rate = n,
                    "burst_size" => b.burst_size = n,
                    _ => prec = Some(u8::try_from(n).map_err(|_| bad(k, v, "1..3"))?),
                }
            }
            _ => return Err(FlowSyntaxError::UnknownField(k.to_string())),
        }
    }
    if let Some(b) = current.take() {
        m.bands.push(finish(b, prec.take())?);
    }
    m.check()?;
    Ok(m)
}

fn finish(mut b: Band, prec: Option<u8>) -> Result<Band, FlowSyntaxError> {
    match (&mut b.kind, prec) {
        (BandType::DscpRemark(p), Some(n)) => *p = n,
        (BandType::DscpRemark(_), None) => {
            return Err(bad("prec_level", "", "a dscp_remark band needs one"))
        }
        (BandType::Drop, Some(_)) => return Err(bad("prec_level", "", "only for dscp_remark")),
        (BandType::Drop, None) => {}
    }
    Ok(b)
}

/// Prints a meter as `ovs-ofctl dump-meters` writes it.
pub fn format_meter(m: &MeterSpec) -> String {
    let mut s = format!("meter={},{}", m.id, if m.pktps { "pktps" } else { "kbps" });
    if m.burst {
        s.push_str(",burst");
    }
    if m.stats {
        s.push_str(",stats");
    }
    s.push_str(",bands=");
    let bands: Vec<String> = m
        .bands
        .iter()
        .map(|b| {
            let mut t = match b.kind {
                BandType::Drop => format!("type=drop,rate={}", b.rate),
                BandType::DscpRemark(p) => {
                    format!("type=dscp_remark,rate={},prec_level={p}", b.rate)
                }
            };
            if m.burst {
                t.push_str(&format!(",burst_size={}", b.burst_size));
            }
            t
        })
        .collect();
    s.push_str(&bands.join(","));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meters_read_and_print_as_ovs_ofctl_writes_them() {
        for (text, canon) in [
            (
                "meter=1,kbps,bands=type=drop,rate=100000",
                "meter=1,kbps,bands=type=drop,rate=100000",
            ),
            (
                "meter=2,pktps,burst,stats,bands=type=drop,rate=10000,burst_size=100",
                "meter=2,pktps,burst,stats,bands=type=drop,rate=10000,burst_size=100",
            ),
            (
                "meter=3,kbps,bands=type=dscp_remark,rate=500,prec_level=1,type=drop,rate=1000",
                "meter=3,kbps,bands=type=dscp_remark,rate=500,prec_level=1,type=drop,rate=1000",
            ),
        ] {
            let m = parse_meter(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(format_meter(&m), canon);
            assert_eq!(parse_meter(canon).unwrap(), m);
        }
        let m = parse_meter("meter=4,pktps,bands=type=drop,rate=10000").unwrap();
        assert_eq!(m.burst_of(&m.bands[0]), 1000, "a tenth of a second");
    }

    #[test]
    fn bad_meters_name_the_problem() {
        for (text, needle) in [
            ("meter=0,kbps,bands=type=drop,rate=1", "1..4096"),
            ("meter=5000,kbps,bands=type=drop,rate=1", "meter"),
            ("meter=1,kbps", "1 to 4 bands"),
            ("meter=1,kbps,bands=type=drop,rate=0", "at least 1"),
            (
                "meter=1,kbps,bands=type=drop,rate=5,burst_size=9",
                "burst flag",
            ),
            ("meter=1,kbps,bands=type=dscp_remark,rate=5", "needs one"),
            (
                "meter=1,kbps,bands=type=police,rate=5",
                "drop or dscp_remark",
            ),
            ("meter=1,kbps,bands=rate=5", "type="),
        ] {
            let e = parse_meter(text).unwrap_err().to_string();
            assert!(e.contains(needle), "{text}: {e}");
        }
    }
}
