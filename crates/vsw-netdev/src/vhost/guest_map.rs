//! Guest memory as the virtqueue fast path addresses it: the one module of the vhost
//! port that touches guest memory through pointers.
//!
//! vm-memory maps the regions of a memory table (and `guest_memory` guards them
//! against truncation); here they are validated once per table into a short list of
//! (guest-physical range, host address), so that an access is one range check against
//! the region the queue used last, not a search through vm-memory's region tree, and a
//! copy is a `memcpy` sized to the frame. The rings are validated once when a queue
//! starts (inside one region, aligned) and then read and written at fixed host
//! addresses.
//!
//! Guest memory is shared with a guest that may change it at any moment, so nothing
//! here forms a Rust reference into it: ring fields are read and written with
//! volatile or atomic accesses, frames are copied out once into vsw's own buffers
//! (and only those copies are parsed) or copied in from them. Torn or changing bytes
//! are the guest's problem, never vsw's: every index read from the rings is masked
//! or checked against the queue size, and every address and length a guest gives is
//! checked against the regions before a byte is copied.

use std::marker::PhantomData;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::Arc;

use arrayvec::ArrayVec;
use vm_memory::{GuestMemory as _, GuestMemoryRegion};

use crate::guest_memory::GuestMemory as GuardedMemory;

/// The most regions one memory table has (VHOST_MEMORY_BASELINE_NREGIONS).
pub(super) const MAX_REGIONS: usize = 8;

#[derive(Clone, Copy)]
struct Region {
    /// Guest-physical start and end (exclusive).
    start: u64,
    end: u64,
    /// Where `start` is mapped in this process.
    host: *mut u8,
}

/// The regions of one memory table, by guest-physical address.
pub(super) struct GuestMap {
    regions: ArrayVec<Region, MAX_REGIONS>,
    /// Owns the mappings `regions` point into: they live as long as this does.
    mem: Arc<GuardedMemory>,
}

// SAFETY: the raw pointers address mappings owned by `mem`, which is Send and Sync;
// every access through them is a byte copy, a volatile or an atomic access that
// tolerates another thread (or the guest) writing the same bytes.
unsafe impl Send for GuestMap {}
// SAFETY: as above: `&GuestMap` hands out no reference into guest memory.
unsafe impl Sync for GuestMap {}

/// One virtqueue descriptor, as read (once) from guest memory.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Descriptor {
    pub(super) addr: u64,
    pub(super) len: u32,
    pub(super) flags: u16,
    pub(super) next: u16,
}

impl GuestMap {
    /// The regions of `mem`; `None` when it has more than a table may hold.
    pub(super) fn new(mem: Arc<GuardedMemory>) -> Option<GuestMap> {
        let mut regions = ArrayVec::new();
        for r in mem.iter() {
            let start = r.start_addr().0;
            regions
                .try_push(Region {
                    start,
                    end: start.checked_add(r.len())?,
                    host: r.as_ptr(),
                })
                .ok()?;
        }
        Some(GuestMap { regions, mem })
    }

    /// The guarded mapping behind this table.
    pub(super) fn memory(&self) -> &Arc<GuardedMemory> {
        &self.mem
    }

    /// The host address of `[gpa, gpa + len)` when it lies in one region; `hint` is
    /// the region to try first, and becomes the one that held it.
    #[inline]
    fn locate(&self, gpa: u64, len: usize, hint: &mut usize) -> Option<*mut u8> {
        let fits = |r: &Region| gpa >= r.start && gpa < r.end && (len as u64) <= r.end - gpa;
        let k = match self.regions.get(*hint) {
            Some(r) if fits(r) => *hint,
            _ => {
                let k = self.regions.iter().position(fits)?;
                *hint = k;
                k
            }
        };
        let r = &self.regions[k];
        // SAFETY: start <= gpa < end, so gpa - start is inside the region's mapping.
        Some(unsafe { r.host.add((gpa - r.start) as usize) })
    }

    /// Copies guest memory at `gpa` into `dst`; false (nothing defined copied) when
    /// any of it lies outside the regions. A range across adjacent regions is copied
    /// in pieces.
    #[inline]
    pub(super) fn read(&self, gpa: u64, dst: &mut [u8], hint: &mut usize) -> bool {
        if dst.is_empty() {
            return true;
        }
        if let Some(src) = self.locate(gpa, dst.len(), hint) {
            // SAFETY: `src..src + len` lies in one mapped region (checked by locate);
            // `dst` is vsw's own buffer of that length, which no guest can map.
            unsafe { std::ptr::copy_nonoverlapping(src, dst.as_mut_ptr(), dst.len()) };
            return true;
        }
        self.in_pieces(gpa, dst.len(), hint, |host, at, n| {
            // SAFETY: as above, for each piece.
            unsafe { std::ptr::copy_nonoverlapping(host, dst[at..at + n].as_mut_ptr(), n) }
        })
    }

    /// Copies `src` into guest memory at `gpa`; false (perhaps part written) when any
    /// of it lies outside the regions.
    #[inline]
    pub(super) fn write(&self, gpa: u64, src: &[u8], hint: &mut usize) -> bool {
        if src.is_empty() {
            return true;
        }
        if let Some(dst) = self.locate(gpa, src.len(), hint) {
            // SAFETY: `dst..dst + len` lies in one mapped region (checked by locate),
            // writable (vm-memory maps regions read-write); `src` is vsw's own.
            unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), dst, src.len()) };
            return true;
        }
        self.in_pieces(gpa, src.len(), hint, |host, at, n| {
            // SAFETY: as above, for each piece.
            unsafe { std::ptr::copy_nonoverlapping(src[at..at + n].as_ptr(), host, n) }
        })
    }

    /// Walks `[gpa, gpa + len)` region by region (a buffer the guest placed across a
    /// region boundary); `f(host, offset, n)` for each piece. False when a piece lies
    /// outside every region.
    #[cold]
    fn in_pieces(
        &self,
        gpa: u64,
        len: usize,
        hint: &mut usize,
        mut f: impl FnMut(*mut u8, usize, usize),
    ) -> bool {
        let mut done = 0usize;
        while done < len {
            let Some(at) = gpa.checked_add(done as u64) else {
                return false;
            };
            let Some(r) = self.regions.iter().find(|r| at >= r.start && at < r.end) else {
                return false;
            };
            let n = ((r.end - at) as usize).min(len - done);
            let Some(host) = self.locate(at, n, hint) else {
                return false;
            };
            f(host, done, n);
            done += n;
        }
        true
    }

    /// Asks the CPU to fetch the cache line at `gpa` (a buffer about to be copied),
    /// so that the misses of a batch overlap instead of coming one after another.
    /// Nothing happens for an address outside guest memory.
    #[inline]
    pub(super) fn prefetch(&self, gpa: u64, hint: &mut usize) {
        if let Some(p) = self.locate(gpa, 1, hint) {
            prefetch_line(p);
        }
    }

    /// A table of `len` bytes of descriptors at `gpa` (an indirect table): in one
    /// region, 16-byte aligned, a whole number of descriptors.
    pub(super) fn descriptor_table(&self, gpa: u64, len: u32) -> Option<DescriptorTable<'_>> {
        if len == 0 || !len.is_multiple_of(16) {
            return None;
        }
        let base = self.aligned(gpa, len as usize, 16)?;
        Some(DescriptorTable {
            base,
            count: len / 16,
            _map: PhantomData,
        })
    }

    fn aligned(&self, gpa: u64, len: usize, align: usize) -> Option<*mut u8> {
        let p = self.locate(gpa, len, &mut 0)?;
        (p as usize).is_multiple_of(align).then_some(p)
    }
}

/// Descriptors in guest memory (a queue's table or an indirect one), bounds-checked
/// and aligned when made.
#[derive(Clone, Copy)]
pub(super) struct DescriptorTable<'a> {
    base: *mut u8,
    count: u32,
    _map: PhantomData<&'a GuestMap>,
}

impl DescriptorTable<'_> {
    /// Descriptor `index`; `None` past the table's end.
    #[inline]
    pub(super) fn get(&self, index: u32) -> Option<Descriptor> {
        if index >= self.count {
            return None;
        }
        // SAFETY: index < count and the table's count * 16 bytes lie in one mapped
        // region, 16-byte aligned (checked when it was made): both 8-byte words are
        // inside and aligned. Volatile: the guest may write them at any moment.
        let (w0, w1) = unsafe {
            let p = self.base.add(16 * index as usize) as *const u64;
            (p.read_volatile(), p.add(1).read_volatile())
        };
        let w1 = u64::from_le(w1);
        Some(Descriptor {
            addr: u64::from_le(w0),
            len: w1 as u32,
            flags: (w1 >> 32) as u16,
            next: (w1 >> 48) as u16,
        })
    }
}

/// The three parts of a split virtqueue in guest memory, validated when the queue
/// starts: the descriptor table, the driver's available ring and vsw's used ring.
pub(super) struct SplitRings {
    map: Arc<GuestMap>,
    desc: *mut u8,
    avail: *mut u8,
    used: *mut u8,
    size: u16,
}

// SAFETY: the pointers address guest memory that `map` keeps mapped; see GuestMap.
unsafe impl Send for SplitRings {}

impl SplitRings {
    /// The rings of a queue of `size` entries (a power of two) at these
    /// guest-physical addresses: each in one region and aligned as virtio asks
    /// (descriptors 16, available ring 2, used ring 4 bytes).
    pub(super) fn new(
        map: Arc<GuestMap>,
        size: u16,
        desc: u64,
        avail: u64,
        used: u64,
    ) -> Option<SplitRings> {
        if size == 0 || !size.is_power_of_two() {
            return None;
        }
        let n = usize::from(size);
        let desc = map.aligned(desc, 16 * n, 16)?;
        // flags, idx, ring[size], used_event
        let avail = map.aligned(avail, 6 + 2 * n, 2)?;
        // flags, idx, ring[size] of (id, len), avail_event
        let used = map.aligned(used, 6 + 8 * n, 4)?;
        Some(SplitRings {
            map,
            desc,
            avail,
            used,
            size,
        })
    }

    pub(super) fn map(&self) -> &GuestMap {
        &self.map
    }

    pub(super) fn size(&self) -> u16 {
        self.size
    }

    /// The descriptor table.
    pub(super) fn descriptors(&self) -> DescriptorTable<'_> {
        DescriptorTable {
            base: self.desc,
            count: u32::from(self.size),
            _map: PhantomData,
        }
    }

    fn avail_word(&self, k: usize) -> u16 {
        debug_assert!(k < 3 + usize::from(self.size));
        // SAFETY: the available ring's 3 + size words lie in one region, 2-aligned
        // (checked in new); every caller passes k < 3 + size.
        u16::from_le(unsafe { (self.avail as *const u16).add(k).read_volatile() })
    }

    /// The driver's available index; what it made available before is visible after
    /// this (acquire).
    #[inline]
    pub(super) fn avail_idx(&self) -> u16 {
        // SAFETY: word 1 of the available ring, in guest memory mapped for the
        // queue's life and 2-aligned (new); in this process it is only ever accessed
        // atomically. The guest is not bound by that: it may write the word any way
        // it likes, at any moment — from outside this program, so no Rust access
        // races with it; an aligned 2-byte load is single-copy atomic on the
        // hardware, so the load yields some u16, which is untrusted: every use of
        // it is taken modulo the ring size or checked against it (`split_queue`).
        let idx = unsafe { AtomicU16::from_ptr((self.avail as *mut u16).add(1)) };
        u16::from_le(idx.load(Ordering::Acquire))
    }

    pub(super) fn avail_flags(&self) -> u16 {
        self.avail_word(0)
    }

    /// The head in available-ring slot `position` (taken modulo the size).
    #[inline]
    pub(super) fn avail_entry(&self, position: u16) -> u16 {
        self.avail_word(2 + usize::from(position & (self.size - 1)))
    }

    /// With EVENT_IDX: the used index after which the driver wants a notification.
    pub(super) fn used_event(&self) -> u16 {
        self.avail_word(2 + usize::from(self.size))
    }

    /// Writes used-ring slot `position` (modulo the size); published by
    /// [`SplitRings::publish_used`].
    #[inline]
    pub(super) fn set_used(&self, position: u16, id: u32, len: u32) {
        let slot = usize::from(position & (self.size - 1));
        // SAFETY: the used ring's 6 + 8 * size bytes lie in one region, 4-aligned
        // (new); slot < size, so both words of the entry at 4 + 8 * slot are inside
        // and 4-aligned.
        unsafe {
            let p = self.used.add(4 + 8 * slot) as *mut u32;
            p.write_volatile(id.to_le());
            p.add(1).write_volatile(len.to_le());
        }
    }

    /// Publishes the used entries before `idx`: their contents, and the buffers they
    /// name, are visible to the driver before the index is (release).
    #[inline]
    pub(super) fn publish_used(&self, idx: u16) {
        // SAFETY: word 1 of the used ring, in guest memory and 2-aligned (new).
        let at = unsafe { AtomicU16::from_ptr((self.used as *mut u16).add(1)) };
        at.store(idx.to_le(), Ordering::Release);
    }

    /// The used index as the ring holds it (what the device published last, in
    /// this connection or an earlier one).
    pub(super) fn used_idx(&self) -> u16 {
        // SAFETY: word 1 of the used ring, in guest memory and 2-aligned (new).
        let at = unsafe { AtomicU16::from_ptr((self.used as *mut u16).add(1)) };
        u16::from_le(at.load(Ordering::Acquire))
    }

    /// Sets the used ring's flags (VRING_USED_F_NO_NOTIFY: vsw polls, kicks are
    /// not needed).
    pub(super) fn set_used_flags(&self, flags: u16) {
        // SAFETY: word 0 of the used ring, in guest memory and 2-aligned (new).
        unsafe { (self.used as *mut u16).write_volatile(flags.to_le()) };
    }
}

/// A hint to the CPU; it reads nothing Rust can observe and cannot fault.
#[inline]
fn prefetch_line(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint that never faults and changes no memory; SSE is
    // part of every x86-64 CPU.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p as *const i8)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
