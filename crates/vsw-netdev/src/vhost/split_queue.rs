//! A split virtqueue as the device side runs it: heads taken from the available
//! ring, their descriptor chains walked (indirect tables included) with every index
//! checked and the length bounded, and used entries written in order and published
//! once per batch.
//!
//! Written for vsw instead of using `virtio-queue`, because the PMD's per-packet cost
//! was there: virtio-queue reads every ring field through vm-memory's region lookup
//! and bounds-checked volatile copies, and publishes the used index (a release store
//! and a fence) per chain. Here the available index is read once per batch and the
//! used index stored once per batch; see docs/BENCHMARKS.md (issue 15) for the
//! measurement. vsw handles every chain in the order the driver made it available and
//! returns it in that order, which is what VIRTIO_F_IN_ORDER asks of a device.

use arrayvec::ArrayVec;

use super::features::MAX_CHAIN_DESCRIPTORS;
use super::guest_map::{Descriptor, DescriptorTable, SplitRings};
use vsw_datapath::BATCH_SIZE;

const VIRTQ_DESC_F_NEXT: u16 = 1;
const VIRTQ_DESC_F_WRITE: u16 = 2;
const VIRTQ_DESC_F_INDIRECT: u16 = 4;
/// In the used ring's flags: the device does not need kicks (it polls).
const VRING_USED_F_NO_NOTIFY: u16 = 1;

/// One buffer of a descriptor chain: guest-physical address, length, and whether the
/// device writes it (receive buffers) or reads it (frames the guest sends).
#[derive(Clone, Copy, Debug)]
pub(super) struct Segment {
    pub(super) addr: u64,
    pub(super) len: u32,
    pub(super) writable: bool,
}

/// Why a chain cannot be used: it goes back to the guest empty, and is counted.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum BadChain {
    /// A head or next index past the table, a chain longer than
    /// [`MAX_CHAIN_DESCRIPTORS`] (or looping), or an indirect table that is empty,
    /// nested, chained on, or outside guest memory.
    Shape,
}

pub(super) type Chain = ArrayVec<Segment, MAX_CHAIN_DESCRIPTORS>;

/// Heads taken together and the first descriptor of each.
#[derive(Default)]
pub(super) struct Batch {
    pub(super) heads: ArrayVec<u16, BATCH_SIZE>,
    pub(super) first: ArrayVec<Descriptor, BATCH_SIZE>,
}

impl Batch {
    fn clear(&mut self) {
        self.heads.clear();
        self.first.clear();
    }

    /// Whether buffer `k` is one descriptor the device reads (`writable` false) or
    /// writes (true): the fast case, which needs no walk.
    #[inline]
    pub(super) fn single(&self, k: usize, writable: bool) -> Option<Segment> {
        let d = self.first[k];
        let want = if writable { VIRTQ_DESC_F_WRITE } else { 0 };
        (d.flags & (VIRTQ_DESC_F_NEXT | VIRTQ_DESC_F_INDIRECT | VIRTQ_DESC_F_WRITE) == want)
            .then_some(Segment {
                addr: d.addr,
                len: d.len,
                writable,
            })
    }
}

/// A running split virtqueue, from the device's side.
pub(super) struct SplitQueue {
    rings: SplitRings,
    next_avail: u16,
    next_used: u16,
    event_idx: bool,
    /// The guest memory region the last access hit.
    hint: usize,
}

impl SplitQueue {
    /// Starts a queue at `base` (both the next available and next used position),
    /// telling the driver that kicks are not needed. A ring whose used index is not
    /// `base` was used before this connection — vswd restarted under a running
    /// driver, which knows no base to give and gives 0: the queue goes on where the
    /// ring's used index says (every chain taken before was returned, as vsw returns
    /// each before it stops), as DPDK's vhost library does.
    pub(super) fn new(rings: SplitRings, base: u16, event_idx: bool) -> SplitQueue {
        rings.set_used_flags(VRING_USED_F_NO_NOTIFY);
        let used = rings.used_idx();
        let base = if used != base {
            tracing::info!(
                base,
                used,
                "vhost-user: a ring used before goes on from its used index"
            );
            used
        } else {
            base
        };
        SplitQueue {
            rings,
            next_avail: base,
            next_used: base,
            event_idx,
            hint: 0,
        }
    }

    pub(super) fn rings(&self) -> &SplitRings {
        &self.rings
    }

    pub(super) fn next_avail(&self) -> u16 {
        self.next_avail
    }

    pub(super) fn next_used(&self) -> u16 {
        self.next_used
    }

    pub(super) fn event_idx(&self) -> bool {
        self.event_idx
    }

    /// Heads the driver has made available that vsw has not taken; `None` when its
    /// index claims more than the ring holds (a broken driver: nothing is taken).
    #[inline]
    pub(super) fn available(&self) -> Option<u16> {
        let n = self.rings.avail_idx().wrapping_sub(self.next_avail);
        (n <= self.rings.size()).then_some(n)
    }

    /// Takes the next available head (the caller checked [`SplitQueue::available`]).
    #[inline]
    pub(super) fn take(&mut self) -> u16 {
        let head = self.rings.avail_entry(self.next_avail);
        self.next_avail = self.next_avail.wrapping_add(1);
        head
    }

    /// Takes up to `max` heads (the caller checked [`SplitQueue::available`]) with
    /// each one's first descriptor, and prefetches the buffers they point to: the
    /// batch's ring reads issued together, so that their cache misses (the driver
    /// wrote these lines on another core) overlap instead of stalling one by one.
    /// A head past the table gets an empty descriptor marked for the full walk.
    #[inline]
    pub(super) fn take_batch(&mut self, max: usize, batch: &mut Batch) {
        batch.clear();
        let first = self.next_avail;
        let count = max.min(BATCH_SIZE);
        for k in 0..count {
            let head = self.rings.avail_entry(first.wrapping_add(k as u16));
            let _ = batch.heads.try_push(head);
        }
        let table = self.rings.descriptors();
        for &head in &batch.heads {
            let d = table.get(u32::from(head)).unwrap_or(Descriptor {
                flags: VIRTQ_DESC_F_NEXT,
                ..Descriptor::default()
            });
            let _ = batch.first.try_push(d);
        }
        for d in &batch.first {
            self.rings.map().prefetch(d.addr, &mut self.hint);
        }
        self.next_avail = first.wrapping_add(count as u16);
    }

    /// Gives back the last `n` heads taken: they stay the driver's.
    pub(super) fn untake(&mut self, n: u16) {
        self.next_avail = self.next_avail.wrapping_sub(n);
    }

    /// The buffers of the chain at `head` into `chain` (emptied first).
    #[inline]
    pub(super) fn walk(&self, head: u16, chain: &mut Chain) -> Result<(), BadChain> {
        chain.clear();
        let direct = self.rings.descriptors();
        let mut d = direct.get(u32::from(head)).ok_or(BadChain::Shape)?;
        let mut table = direct;
        if d.flags & VIRTQ_DESC_F_INDIRECT != 0 {
            // An indirect table stands alone: not chained on, not nested.
            if d.flags & VIRTQ_DESC_F_NEXT != 0 {
                return Err(BadChain::Shape);
            }
            table = self.indirect(d.addr, d.len)?;
            d = table.get(0).ok_or(BadChain::Shape)?;
        }
        loop {
            if d.flags & VIRTQ_DESC_F_INDIRECT != 0 {
                return Err(BadChain::Shape);
            }
            chain
                .try_push(Segment {
                    addr: d.addr,
                    len: d.len,
                    writable: d.flags & VIRTQ_DESC_F_WRITE != 0,
                })
                .map_err(|_| BadChain::Shape)?;
            if d.flags & VIRTQ_DESC_F_NEXT == 0 {
                return Ok(());
            }
            // A loop runs into the length bound above.
            d = table.get(u32::from(d.next)).ok_or(BadChain::Shape)?;
        }
    }

    fn indirect(&self, addr: u64, len: u32) -> Result<DescriptorTable<'_>, BadChain> {
        self.rings
            .map()
            .descriptor_table(addr, len)
            .ok_or(BadChain::Shape)
    }

    /// Copies the guest's bytes at `addr` into `dst`; false when any lies outside
    /// guest memory.
    #[inline]
    pub(super) fn read(&mut self, addr: u64, dst: &mut [u8]) -> bool {
        self.rings.map().read(addr, dst, &mut self.hint)
    }

    /// Copies `src` into the guest's memory at `addr`; false when any lies outside.
    #[inline]
    pub(super) fn write(&mut self, addr: u64, src: &[u8]) -> bool {
        self.rings.map().write(addr, src, &mut self.hint)
    }

    /// Returns a chain to the driver with `len` bytes written into it; seen by the
    /// driver once published.
    #[inline]
    pub(super) fn add_used(&mut self, head: u16, len: u32) {
        self.rings.set_used(self.next_used, u32::from(head), len);
        self.next_used = self.next_used.wrapping_add(1);
    }

    /// Makes every chain returned so far visible to the driver, with its contents.
    #[inline]
    pub(super) fn publish_used(&mut self) {
        self.rings.publish_used(self.next_used);
    }
}
