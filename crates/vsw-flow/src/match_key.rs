//! What rules match: a packet's flow key, and the fields only the pipeline writes
//! (registers, `pkt_mark`, `conj_id`, `packet_type`).
//!
//! The pipeline's fields start at zero for every packet and change only by actions,
//! so their value is a function of the packet's key and the rules: the datapath never
//! needs them. They live here, beside the key rather than in it, so that the datapath's
//! caches hash and compare 17 words whatever the rules use, and a rule set without
//! registers costs nothing more (Open vSwitch's datapath flows leave its registers out
//! for the same reason). Only translation, the classifier and a frozen translation
//! carry them.

use std::ops::{Deref, DerefMut};

use vsw_packet::{FlowKey, KEY_WORDS};

/// Open vSwitch's 32-bit registers `reg0`–`reg15`.
pub const N_REGS: usize = 16;

/// The words of [`PipelineFields`].
pub const PIPELINE_WORDS: usize = 10;

/// The words of a [`MatchKey`].
pub const MATCH_WORDS: usize = KEY_WORDS + PIPELINE_WORDS;

/// Packet types as `PipelineFields::packet_type` holds them (OpenFlow 1.5's):
/// namespace << 16 | type.
pub mod packet_type {
    /// Ethernet, (0,0): every packet as it arrives.
    pub const ETHERNET: u32 = 0;

    /// (NS,TYPE).
    pub fn new(ns: u16, ty: u16) -> u32 {
        u32::from(ns) << 16 | u32::from(ty)
    }

    /// (1,T): a header of Ethernet type T without an Ethernet header.
    pub fn of_ethertype(t: u16) -> u32 {
        new(1, t)
    }

    /// T of a (1,T) packet type.
    pub fn ethertype(pt: u32) -> Option<u16> {
        (pt >> 16 == 1).then_some(pt as u16)
    }

    /// Its namespace and type.
    pub fn parts(pt: u32) -> (u16, u16) {
        ((pt >> 16) as u16, pt as u16)
    }
}

/// What only the pipeline reads and writes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct PipelineFields {
    /// `reg0`–`reg15`; `xregN` is `reg(2N)‖reg(2N+1)` and `xxregN` is
    /// `reg(4N)‖…‖reg(4N+3)`, the lower-numbered register the more significant half,
    /// as in Open vSwitch.
    pub regs: [u32; N_REGS],
    /// `pkt_mark`: the packet's mark (zero as it arrives: vsw's ports carry none).
    pub pkt_mark: u32,
    /// `conj_id`: the conjunction a conjunctive match completed.
    pub conj_id: u32,
    /// `packet_type`: namespace << 16 | type, 0 (Ethernet) as every packet arrives
    /// (vsw's ports are all Ethernet); (1,0x894f), (1,0x8847) or (1,0x8848) while
    /// translation holds an NSH or MPLS packet without its Ethernet header (after
    /// an `encap`, or a `decap()` of the Ethernet header).
    pub packet_type: u32,
    /// Keeps the fields whole words.
    pub reserved: u32,
}

const _: () = assert!(std::mem::size_of::<PipelineFields>() == PIPELINE_WORDS * 8);

impl PipelineFields {
    #[inline]
    pub fn words(&self) -> &[u64; PIPELINE_WORDS] {
        bytemuck::cast_ref(self)
    }

    #[inline]
    pub fn words_mut(&mut self) -> &mut [u64; PIPELINE_WORDS] {
        bytemuck::cast_mut(self)
    }

    #[inline]
    pub fn is_zero(&self) -> bool {
        self.words().iter().all(|w| *w == 0)
    }

    /// `xregN` (N < 8).
    pub fn xreg(&self, n: usize) -> u64 {
        (u64::from(self.regs[2 * n]) << 32) | u64::from(self.regs[2 * n + 1])
    }

    pub fn set_xreg(&mut self, n: usize, v: u64) {
        self.regs[2 * n] = (v >> 32) as u32;
        self.regs[2 * n + 1] = v as u32;
    }

    /// `xxregN` (N < 4).
    pub fn xxreg(&self, n: usize) -> u128 {
        (0..4).fold(0u128, |acc, i| {
            (acc << 32) | u128::from(self.regs[4 * n + i])
        })
    }

    pub fn set_xxreg(&mut self, n: usize, v: u128) {
        for i in 0..4 {
            self.regs[4 * n + i] = (v >> (32 * (3 - i))) as u32;
        }
    }
}

/// A packet's key and the pipeline's fields: what a rule matches, and what a
/// translation carries from table to table.
///
/// It dereferences to its [`FlowKey`] so that the many places that read or write a
/// packet field (`key.tp_src`) read the same whichever of the two they hold.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct MatchKey {
    pub packet: FlowKey,
    pub pipeline: PipelineFields,
}

const _: () = assert!(std::mem::size_of::<MatchKey>() == MATCH_WORDS * 8);

impl MatchKey {
    /// A mask that looks at every bit.
    pub fn exact() -> MatchKey {
        bytemuck::cast([u64::MAX; MATCH_WORDS])
    }

    #[inline]
    pub fn words(&self) -> &[u64; MATCH_WORDS] {
        bytemuck::cast_ref(self)
    }

    #[inline]
    pub fn words_mut(&mut self) -> &mut [u64; MATCH_WORDS] {
        bytemuck::cast_mut(self)
    }

    /// The key with only the bits of `mask` kept.
    pub fn masked(&self, mask: &MatchKey) -> MatchKey {
        let mut out = *self;
        for (w, m) in out.words_mut().iter_mut().zip(mask.words()) {
            *w &= m;
        }
        out
    }
}

impl From<FlowKey> for MatchKey {
    fn from(packet: FlowKey) -> MatchKey {
        MatchKey {
            packet,
            pipeline: PipelineFields::default(),
        }
    }
}

impl Deref for MatchKey {
    type Target = FlowKey;

    #[inline]
    fn deref(&self) -> &FlowKey {
        &self.packet
    }
}

impl DerefMut for MatchKey {
    #[inline]
    fn deref_mut(&mut self) -> &mut FlowKey {
        &mut self.packet
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wide_registers_are_the_narrow_ones_most_significant_first() {
        let mut p = PipelineFields::default();
        p.set_xxreg(1, 0x0011_2233_4455_6677_8899_aabb_ccdd_eeff);
        assert_eq!(
            p.regs[4..8],
            [0x0011_2233, 0x4455_6677, 0x8899_aabb, 0xccdd_eeff]
        );
        assert_eq!(p.xreg(2), 0x0011_2233_4455_6677);
        assert_eq!(p.xreg(3), 0x8899_aabb_ccdd_eeff);
        assert_eq!(p.xxreg(1), 0x0011_2233_4455_6677_8899_aabb_ccdd_eeff);
        p.set_xreg(0, 0x1_0000_0002);
        assert_eq!((p.regs[0], p.regs[1]), (1, 2));
    }
}
