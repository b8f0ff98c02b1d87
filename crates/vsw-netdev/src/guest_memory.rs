//! Guest memory a vhost-user frontend shares, mapped so that the frontend cannot end
//! the daemon by shrinking it.
//!
//! A frontend shares its memory as file descriptors (memfd, hugetlbfs or tmpfs files).
//! If it truncates such a file after vsw mapped it, vsw's next access past the new end
//! raises SIGBUS, which ends the whole process. Requiring sealed memfds
//! (F_SEAL_SHRINK) would refuse the hugepage files that DPDK and QEMU deployments use,
//! so instead every mapped region is registered here, and a SIGBUS handler replaces a
//! registered region that faults with anonymous zero pages: the access is retried and
//! succeeds (it reads zeros; what is written goes nowhere), that guest's traffic is
//! garbage, as its frontend asked, and vsw counts the fault and goes on. A SIGBUS
//! anywhere else goes to whatever handled it before (Rust's runtime, or the default:
//! the process ends).
//!
//! Everything the handler touches is a fixed table of atomics; it takes no lock and
//! allocates nothing.

use std::ops::Deref;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Once, OnceLock};

use vm_memory::{GuestMemory as _, GuestMemoryMmap, GuestMemoryRegion};

use crate::sys;

/// Regions registered at once (every port's guest has at most 8).
const SLOTS: usize = 4096;

struct Slot {
    /// Host address of the region (0: the slot is free).
    start: AtomicUsize,
    len: AtomicUsize,
    /// SIGBUS faults repaired in this region since it was registered.
    faults: AtomicU64,
}

#[allow(clippy::declare_interior_mutable_const)]
const FREE: Slot = Slot {
    start: AtomicUsize::new(0),
    len: AtomicUsize::new(0),
    faults: AtomicU64::new(0),
};
static REGIONS: [Slot; SLOTS] = [FREE; SLOTS];
/// Slots handed out and not yet given back (a slot is taken by swapping 0 → 1 here
/// before its address is written).
static TAKEN: [AtomicUsize; SLOTS] = [const { AtomicUsize::new(0) }; SLOTS];

static INSTALL: Once = Once::new();
/// The SIGBUS disposition before vsw's.
static PREVIOUS: OnceLock<libc::sigaction> = OnceLock::new();

/// A region's place in the table; gives it back when dropped.
struct Registration {
    slot: usize,
}

impl Registration {
    fn new(start: usize, len: usize) -> Option<Registration> {
        let slot = (0..SLOTS).find(|&i| {
            TAKEN[i]
                .compare_exchange(0, 1, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        })?;
        let r = &REGIONS[slot];
        r.faults.store(0, Ordering::Relaxed);
        r.len.store(len, Ordering::Release);
        r.start.store(start, Ordering::Release);
        Some(Registration { slot })
    }

    fn faults(&self) -> u64 {
        REGIONS[self.slot].faults.load(Ordering::Relaxed)
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let r = &REGIONS[self.slot];
        r.start.store(0, Ordering::Release);
        r.len.store(0, Ordering::Release);
        TAKEN[self.slot].store(0, Ordering::Release);
    }
}

/// A guest's memory, each region guarded against truncation while it is mapped.
pub struct GuestMemory {
    // Field order matters: the registrations go before the mapping does, so that no
    // address is ever guarded after it was unmapped (and perhaps reused).
    registrations: Vec<Registration>,
    mem: GuestMemoryMmap,
}

impl GuestMemory {
    /// Guards the regions of `mem`. Refused when the table is full.
    pub fn guard(mem: GuestMemoryMmap) -> Result<Arc<GuestMemory>, &'static str> {
        install_handler();
        let mut registrations = Vec::new();
        for region in mem.iter() {
            let r = Registration::new(region.as_ptr() as usize, region.len() as usize)
                .ok_or("too many guest memory regions mapped")?;
            registrations.push(r);
        }
        Ok(Arc::new(GuestMemory { registrations, mem }))
    }

    /// Accesses to memory the frontend took away since it was mapped (the regions
    /// concerned now read as zeros).
    pub fn faults(&self) -> u64 {
        self.registrations.iter().map(Registration::faults).sum()
    }
}

impl Deref for GuestMemory {
    type Target = GuestMemoryMmap;

    fn deref(&self) -> &GuestMemoryMmap {
        &self.mem
    }
}

fn install_handler() {
    INSTALL.call_once(|| match sys::install_signal_handler(libc::SIGBUS, on_sigbus) {
        // The previous disposition is recorded before another SIGBUS can need it (a
        // guest region faults only once one is registered, after this).
        Ok(previous) => {
            let _ = PREVIOUS.set(previous);
        }
        Err(e) => {
            tracing::warn!(error = %e, "cannot install the SIGBUS handler that guards guest memory")
        }
    });
}

/// Replaces a faulting guest region with anonymous memory, or passes the signal on.
extern "C" fn on_sigbus(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for a handler installed with
    // SA_SIGINFO; for SIGBUS si_addr is the faulting address.
    let addr = unsafe { (*info).si_addr() } as usize;
    for r in &REGIONS {
        let start = r.start.load(Ordering::Acquire);
        let len = r.len.load(Ordering::Acquire);
        if start == 0 || addr < start || addr - start >= len {
            continue;
        }
        // The whole region: a hugetlbfs mapping cannot be split at a small page.
        // SAFETY: [start, start + len) is a mapping vm-memory made and still holds
        // (the registration goes before the unmapping); its pages are replaced in
        // place, so every pointer into it stays valid.
        if unsafe { sys::replace_with_zero_pages(start, len) } {
            r.faults.fetch_add(1, Ordering::Relaxed);
            return;
        }
    }
    pass_on(sig, info, ctx);
}

/// Hands a SIGBUS that is not about guest memory to the disposition before vsw's.
fn pass_on(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    let Some(previous) = PREVIOUS.get() else {
        return sys::default_signal_action(sig);
    };
    let handler = previous.sa_sigaction;
    if handler == libc::SIG_DFL || handler == libc::SIG_IGN {
        // Back to the default: the access faults again and ends the process, as it
        // would have without vsw's handler.
        return sys::default_signal_action(sig);
    }
    if previous.sa_flags & libc::SA_SIGINFO != 0 {
        // SAFETY: a handler installed with SA_SIGINFO has this signature.
        let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
            unsafe { std::mem::transmute(handler) };
        f(sig, info, ctx);
    } else {
        // SAFETY: a plain handler takes the signal number.
        let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(handler) };
        f(sig);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use vm_memory::{Bytes, FileOffset, GuestAddress};

    #[test]
    fn a_truncated_region_reads_as_zeros_and_is_counted() {
        let mut file = tempfile();
        file.write_all(&[7u8; 64 << 10]).unwrap();
        let mem = GuestMemoryMmap::<()>::from_ranges_with_files([(
            GuestAddress(0),
            64 << 10,
            Some(FileOffset::new(file.try_clone().unwrap(), 0)),
        )])
        .unwrap();
        let mem = GuestMemory::guard(mem).unwrap();
        assert_eq!(mem.read_obj::<u8>(GuestAddress(100)).unwrap(), 7);
        file.set_len(0).unwrap();
        // Without the guard, this read ends the test process with SIGBUS.
        assert_eq!(mem.read_obj::<u32>(GuestAddress(40 << 10)).unwrap(), 0);
        mem.write_obj(5u32, GuestAddress(8)).unwrap();
        assert_eq!(mem.faults(), 1);
        drop(mem);
    }

    fn tempfile() -> std::fs::File {
        let path = std::env::temp_dir().join(format!(
            "vsw-guest-mem-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        let _ = std::fs::remove_file(&path);
        f
    }
}
