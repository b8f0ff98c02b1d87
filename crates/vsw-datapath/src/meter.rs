//! Meters as the PMDs run them: one token bucket per band, shared by every PMD
//! through atomics (no lock per packet; a meter's rate holds across PMDs). A
//! packet conforms to a band while the band's bucket has its cost in tokens; the
//! band of the highest rate it exceeds decides what happens to it.
//!
//! Units are chosen so that refilling is one multiplication: a `pktps` bucket holds
//! micro-packets and gains `rate` per microsecond; a `kbps` bucket holds
//! milli-bits and gains `rate` per microsecond too.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwapOption;

use crate::clock;

/// Meters are numbered 1..=MAX_METERS.
pub const MAX_METERS: usize = 4096;

/// What a band does to a packet that exceeds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BandAction {
    Drop,
    /// Raise the DSCP drop precedence by this many levels.
    Remark(u8),
}

/// A band as configured: rate and burst in the meter's units.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BandConfig {
    pub action: BandAction,
    /// Packets or kilobits per second.
    pub rate: u32,
    /// Packets or kilobits.
    pub burst: u32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MeterConfig {
    pub pktps: bool,
    pub bands: Vec<BandConfig>,
}

/// What the meter says of one packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Pass,
    Drop,
    Remark(u8),
}

struct Band {
    config: BandConfig,
    /// Tokens now (micro-packets or milli-bits); at most `cap`.
    tokens: AtomicI64,
    cap: i64,
    /// When the bucket was last filled (µs of the cycle counter).
    filled_us: AtomicU64,
    packets: AtomicU64,
    bytes: AtomicU64,
}

struct Live {
    pktps: bool,
    bands: Vec<Band>,
    packets: AtomicU64,
    bytes: AtomicU64,
}

/// A meter's counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MeterCounts {
    pub packets: u64,
    pub bytes: u64,
    /// Each band's packets and bytes (those that exceeded it).
    pub bands: Vec<(u64, u64)>,
}

/// Every meter, by number.
pub struct Meters {
    slots: Box<[ArcSwapOption<Live>]>,
}

impl Default for Meters {
    fn default() -> Self {
        Meters {
            slots: (0..=MAX_METERS).map(|_| ArcSwapOption::empty()).collect(),
        }
    }
}

fn now_us() -> u64 {
    let per_us = (clock::cycles_per_second() / 1_000_000).max(1);
    clock::cycles() / per_us
}

impl Meters {
    /// Sets meter `id` up (counters start again), or takes it away (`None`).
    pub fn set(&self, id: u32, config: Option<&MeterConfig>) {
        let Some(slot) = self.slots.get(id as usize) else {
            return;
        };
        let now = now_us();
        slot.store(config.map(|c| {
            Arc::new(Live {
                pktps: c.pktps,
                bands: c
                    .bands
                    .iter()
                    .map(|b| {
                        let cap = i64::from(b.burst) * 1_000_000;
                        Band {
                            config: *b,
                            tokens: AtomicI64::new(cap),
                            cap,
                            filled_us: AtomicU64::new(now),
                            packets: AtomicU64::new(0),
                            bytes: AtomicU64::new(0),
                        }
                    })
                    .collect(),
                packets: AtomicU64::new(0),
                bytes: AtomicU64::new(0),
            })
        }));
    }

    /// Measures one packet of `len` bytes against meter `id` (a meter not set up
    /// lets everything pass).
    pub fn apply(&self, id: u32, len: usize) -> Verdict {
        self.apply_at(id, len, now_us())
    }

    /// [`Meters::apply`] at `now` (µs of the cycle counter).
    fn apply_at(&self, id: u32, len: usize, now: u64) -> Verdict {
        let Some(slot) = self.slots.get(id as usize) else {
            return Verdict::Pass;
        };
        let guard = slot.load();
        let Some(live) = guard.as_deref() else {
            return Verdict::Pass;
        };
        live.packets.fetch_add(1, Ordering::Relaxed);
        live.bytes.fetch_add(len as u64, Ordering::Relaxed);
        let cost: i64 = if live.pktps {
            1_000_000
        } else {
            len as i64 * 8 * 1000
        };
        let mut exceeded: Option<&Band> = None;
        for b in &live.bands {
            let before = b.filled_us.fetch_max(now, Ordering::Relaxed);
            if now > before {
                let gained = (now - before).saturating_mul(u64::from(b.config.rate));
                b.tokens.fetch_add(
                    i64::try_from(gained).unwrap_or(i64::MAX / 2),
                    Ordering::Relaxed,
                );
                b.tokens.fetch_min(b.cap, Ordering::Relaxed);
            }
            if b.tokens.fetch_sub(cost, Ordering::Relaxed) >= cost {
                continue;
            }
            b.tokens.fetch_add(cost, Ordering::Relaxed);
            if exceeded.is_none_or(|e| b.config.rate > e.config.rate) {
                exceeded = Some(b);
            }
        }
        let Some(b) = exceeded else {
            return Verdict::Pass;
        };
        b.packets.fetch_add(1, Ordering::Relaxed);
        b.bytes.fetch_add(len as u64, Ordering::Relaxed);
        match b.config.action {
            BandAction::Drop => Verdict::Drop,
            BandAction::Remark(p) => Verdict::Remark(p),
        }
    }

    /// Meter `id`'s counters, if it is set up.
    pub fn counts(&self, id: u32) -> Option<MeterCounts> {
        let guard = self.slots.get(id as usize)?.load();
        let live = guard.as_deref()?;
        Some(MeterCounts {
            packets: live.packets.load(Ordering::Relaxed),
            bytes: live.bytes.load(Ordering::Relaxed),
            bands: live
                .bands
                .iter()
                .map(|b| {
                    (
                        b.packets.load(Ordering::Relaxed),
                        b.bytes.load(Ordering::Relaxed),
                    )
                })
                .collect(),
        })
    }
}

/// A DSCP with its drop precedence raised by `levels` (assured-forwarding classes
/// AF1x–AF4x: the precedence is bits 1–2, at most 3; other code points stay).
pub fn remark_dscp(dscp: u8, levels: u8) -> u8 {
    let class = dscp >> 3;
    let prec = (dscp >> 1) & 3;
    if !(1..=4).contains(&class) || dscp & 1 != 0 || prec == 0 {
        return dscp;
    }
    (class << 3) | ((prec + levels).min(3) << 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meter(pktps: bool, rate: u32, burst: u32, action: BandAction) -> Meters {
        let m = Meters::default();
        m.set(
            1,
            Some(&MeterConfig {
                pktps,
                bands: vec![BandConfig {
                    action,
                    rate,
                    burst,
                }],
            }),
        );
        m
    }

    #[test]
    fn a_burst_passes_then_the_band_decides() {
        let m = meter(true, 1, 10, BandAction::Drop);
        let verdicts: Vec<Verdict> = (0..20).map(|_| m.apply(1, 64)).collect();
        let passed = verdicts.iter().filter(|v| **v == Verdict::Pass).count();
        // Ten of burst, and at 1 packet/s at most one more in the test's time.
        assert!((10..=11).contains(&passed), "{passed}");
        let c = m.counts(1).unwrap();
        assert_eq!(c.packets, 20);
        assert_eq!(c.bands[0].0, 20 - passed as u64);
        // Remark bands remark instead.
        let r = meter(false, 8, 1, BandAction::Remark(1));
        assert_eq!(
            r.apply(1, 100),
            Verdict::Pass,
            "100 bytes is in a 1-kilobit burst"
        );
        assert_eq!(r.apply(1, 100), Verdict::Remark(1));
        assert_eq!(
            m.apply(2, 64),
            Verdict::Pass,
            "no meter 2: nothing measured"
        );
        m.set(1, None);
        assert!(m.counts(1).is_none());
    }

    #[test]
    fn the_bucket_refills_at_its_rate() {
        let m = meter(true, 1000, 1, BandAction::Drop);
        let t = now_us() + 10;
        assert_eq!(m.apply_at(1, 64, t), Verdict::Pass);
        assert_eq!(
            m.apply_at(1, 64, t),
            Verdict::Drop,
            "the one-packet burst is spent"
        );
        // A thousand packets a second: one more after a millisecond, not before.
        assert_eq!(m.apply_at(1, 64, t + 999), Verdict::Drop);
        assert_eq!(m.apply_at(1, 64, t + 1000), Verdict::Pass);
        // 100 kbit/s: a 1500-byte frame's 12 kilobits take 120 ms to earn.
        let k = meter(false, 100, 12, BandAction::Drop);
        let t = now_us() + 10;
        assert_eq!(k.apply_at(1, 1500, t), Verdict::Pass);
        assert_eq!(k.apply_at(1, 1500, t + 100_000), Verdict::Drop);
        assert_eq!(k.apply_at(1, 1500, t + 120_000), Verdict::Pass);
    }

    #[test]
    fn remarking_raises_assured_forwarding_precedence_only() {
        assert_eq!(remark_dscp(10, 1), 12, "AF11 -> AF12");
        assert_eq!(remark_dscp(10, 3), 14, "AF11 -> AF13 at most");
        assert_eq!(remark_dscp(46, 1), 46, "EF stays");
        assert_eq!(remark_dscp(0, 2), 0, "best effort stays");
    }
}
