//! Time as the PMD sees it: a cycle counter for cost accounting and a millisecond
//! clock for rule and MAC-table ages, both read once per loop iteration, never per packet.

use std::sync::OnceLock;
use std::time::Instant;

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// Milliseconds since the process first asked, starting at 1 so that 0 can mean "never".
pub fn now_ms() -> u64 {
    epoch().elapsed().as_millis() as u64 + 1
}

/// Lets the calling thread's sleeps end within a microsecond of when they should:
/// Linux rounds a normal thread's timers up by 50 µs ("timer slack"), more than a
/// short PMD sleep or a small `tx-flush-interval`. Best effort.
pub fn allow_precise_sleep() {
    let _ = std::fs::write("/proc/thread-self/timerslack_ns", "1000");
}

/// The CPU's cycle counter (TSC on x86_64), as Open vSwitch reports PMD cycles.
/// Elsewhere, nanoseconds stand in for cycles.
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
pub fn cycles() -> u64 {
    // SAFETY: RDTSC has no memory effects and exists on every x86_64 CPU.
    unsafe { core::arch::x86_64::_rdtsc() }
}

#[cfg(not(target_arch = "x86_64"))]
pub fn cycles() -> u64 {
    epoch().elapsed().as_nanos() as u64
}

/// How many cycles one second holds, measured once against the monotonic clock.
pub fn cycles_per_second() -> u64 {
    static HZ: OnceLock<u64> = OnceLock::new();
    *HZ.get_or_init(|| {
        let (t0, c0) = (Instant::now(), cycles());
        while t0.elapsed().as_millis() < 20 {
            std::hint::spin_loop();
        }
        let (dt, dc) = (t0.elapsed(), cycles().wrapping_sub(c0));
        (dc as f64 / dt.as_secs_f64()) as u64
    })
}
