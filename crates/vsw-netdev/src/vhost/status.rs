//! What vsw knows of a port's guest, for `show` and for the datapath: negotiated
//! features, MTU, link, how its driver takes each receive queue, and what it did wrong.

use super::*;

/// What vsw knows of a port's guest: what it negotiated, its MTU and link, and
/// counters of what it did wrong.
#[derive(Debug)]
pub struct GuestStatus {
    /// The virtio features the driver accepted (0 while no frontend is set up).
    pub features: AtomicU64,
    /// The MTU vsw holds the guest to (`mtu_request`; 1,500 by default); the guest
    /// learns it from its frontend (QEMU `host_mtu`).
    pub mtu: AtomicU32,
    /// Up while a frontend runs the first queue pair.
    pub link_up: AtomicBool,
    /// Frames the guest sent above its MTU (and not super-frames): dropped.
    pub too_long: AtomicU64,
    /// Descriptor chains that pointed outside the guest's memory, were too long or
    /// held nothing usable: dropped.
    pub bad_chains: AtomicU64,
    /// Virtqueues refused at start (bad size or addresses).
    pub bad_queues: AtomicU64,
    /// Frames for the guest dropped because it offered no (large enough) buffer.
    pub no_buffer: AtomicU64,
    /// Notifications (call eventfd writes) sent to the guest.
    pub notifications: AtomicU64,
    /// The guest's memory now, and faults of its earlier tables (its frontend shrank
    /// memory it had shared: those regions read as zeros since).
    pub(super) memory: Mutex<std::sync::Weak<GuardedMemory>>,
    pub(super) retired_faults: AtomicU64,
    /// How the guest's driver takes each receive queue right now (`RxMode` as u8).
    pub(super) rx_modes: [AtomicU8; MAX_QUEUE_PAIRS],
}

/// How a guest's driver takes one of its receive queues, as vsw last saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RxMode {
    /// The queue does not run.
    Stopped = 0,
    /// The driver asked not to be notified (or gave no eventfd): it polls.
    Polls = 1,
    /// The driver waits for a notification.
    WantsInterrupts = 2,
}

impl Default for GuestStatus {
    fn default() -> Self {
        GuestStatus {
            features: AtomicU64::new(0),
            mtu: AtomicU32::new(1500),
            link_up: AtomicBool::new(false),
            too_long: AtomicU64::new(0),
            bad_chains: AtomicU64::new(0),
            bad_queues: AtomicU64::new(0),
            no_buffer: AtomicU64::new(0),
            notifications: AtomicU64::new(0),
            memory: Mutex::new(std::sync::Weak::new()),
            retired_faults: AtomicU64::new(0),
            rx_modes: Default::default(),
        }
    }
}

impl GuestStatus {
    /// Accesses to guest memory its frontend had taken away (truncated) since vsw
    /// mapped it: survived, and counted.
    pub fn memory_faults(&self) -> u64 {
        let now = self
            .memory
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .upgrade()
            .map_or(0, |m| m.faults());
        self.retired_faults.load(Ordering::Relaxed) + now
    }

    /// A memory table that goes: its faults are kept.
    pub(super) fn retire_memory(&self, mem: Option<Arc<GuardedMemory>>) {
        if let Some(m) = mem {
            self.retired_faults.fetch_add(m.faults(), Ordering::Relaxed);
        }
    }

    pub(super) fn has(&self, feature: u64) -> bool {
        self.features.load(Ordering::Relaxed) & feature != 0
    }

    pub(super) fn set_rx_mode(&self, pair: usize, mode: RxMode) {
        self.rx_modes[pair].store(mode as u8, Ordering::Relaxed);
    }

    /// How the driver takes receive queue `pair` right now.
    pub fn rx_mode(&self, pair: usize) -> RxMode {
        match self.rx_modes.get(pair).map(|m| m.load(Ordering::Relaxed)) {
            Some(1) => RxMode::Polls,
            Some(2) => RxMode::WantsInterrupts,
            _ => RxMode::Stopped,
        }
    }

    /// "receive queue 0 polls, receive queue 1 wants interrupts" for the queues
    /// that run, or "no receive queue running".
    pub fn describe_rx_queues(&self) -> String {
        let running: Vec<String> = (0..MAX_QUEUE_PAIRS)
            .filter_map(|k| match self.rx_mode(k) {
                RxMode::Stopped => None,
                RxMode::Polls => Some(format!("receive queue {k} polls")),
                RxMode::WantsInterrupts => Some(format!("receive queue {k} wants interrupts")),
            })
            .collect();
        if running.is_empty() {
            "no receive queue running".to_string()
        } else {
            running.join(", ")
        }
    }
}
