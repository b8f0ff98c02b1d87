//! Packets between the PMDs and the control side, beside the fast path: a datapath
//! action that sends a packet up ([`DpAction::Controller`], OpenFlow's output to
//! CONTROLLER) leaves a copy in the *up* queue; packets the control side wants sent
//! (OpenFlow's packet-out) wait in the *down* queue until a PMD runs their actions.
//!
//! Both queues are bounded and lock-free: a PMD never waits for the control side
//! (a full up queue is a counted loss, as Open vSwitch drops upcalls it cannot
//! queue), and the control side is told when its packet-out cannot be queued. A
//! punted packet is copied into its own buffer — these are the slow path's packets,
//! not the fast path's.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::Thread;
use std::time::{Duration, Instant};

use arc_swap::{ArcSwap, ArcSwapOption};
use crossbeam_queue::ArrayQueue;

use crate::dpaction::DpAction;

/// Packets that may wait in each direction.
pub const PUNT_QUEUE_LEN: usize = 1024;

/// A packet a datapath action sent up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Punted {
    /// The port it came in on.
    pub in_port: u32,
    /// What the action carried (the slow path's note of why it sent the packet up).
    pub userdata: u32,
    /// The frame as the actions before left it (VLAN tags in it).
    pub frame: Vec<u8>,
}

/// A packet the control side wants sent with these datapath actions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Injected {
    /// The port it counts as having come in on (`u32::MAX`: none).
    pub in_port: u32,
    pub actions: Vec<DpAction>,
    /// The tunnel headers its `TunnelPush(i)` actions put in front.
    pub headers: Vec<Arc<crate::tunnel_push::PushHeader>>,
    pub frame: Vec<u8>,
}

/// Both queues and who waits on the up queue.
pub(crate) struct PuntQueues {
    up: ArrayQueue<Punted>,
    down: ArrayQueue<Injected>,
    /// Injected packets queued, and those a PMD has sent (or dropped) since start.
    queued: AtomicU64,
    done: AtomicU64,
    lost: AtomicU64,
    /// The thread waiting in [`Punts::recv_timeout`], woken by a PMD's punt.
    listener: ArcSwapOption<Thread>,
    /// The PMD threads, woken when a packet is injected (an idle PMD may sleep).
    pmds: ArcSwap<Vec<Thread>>,
}

impl PuntQueues {
    pub fn new() -> PuntQueues {
        PuntQueues {
            up: ArrayQueue::new(PUNT_QUEUE_LEN),
            down: ArrayQueue::new(PUNT_QUEUE_LEN),
            queued: AtomicU64::new(0),
            done: AtomicU64::new(0),
            lost: AtomicU64::new(0),
            listener: ArcSwapOption::empty(),
            pmds: ArcSwap::from_pointee(Vec::new()),
        }
    }

    /// A PMD sends a copy of `frame` up (counted as lost when the queue is full).
    pub fn punt(&self, in_port: u32, userdata: u32, frame: &[u8]) {
        let p = Punted {
            in_port,
            userdata,
            frame: frame.to_vec(),
        };
        if self.up.push(p).is_err() {
            self.lost.fetch_add(1, Ordering::Relaxed);
            return;
        }
        if let Some(t) = self.listener.load().as_deref() {
            t.unpark();
        }
    }

    /// The next packet to inject, for a PMD.
    pub fn next_injected(&self) -> Option<Injected> {
        self.down.pop()
    }

    /// The PMD threads there are now.
    pub fn set_pmd_threads(&self, threads: Vec<Thread>) {
        self.pmds.store(Arc::new(threads));
    }

    /// A PMD is through with `n` injected packets (sent, or dropped and counted).
    pub fn injected_done(&self, n: u64) {
        self.done.fetch_add(n, Ordering::Release);
    }
}

/// The control side's end of the queues.
#[derive(Clone)]
pub struct Punts(pub(crate) Arc<PuntQueues>);

impl Punts {
    /// The next punted packet, waiting at most `timeout` for one. One thread
    /// receives (the last to call is the one woken).
    pub fn recv_timeout(&self, timeout: Duration) -> Option<Punted> {
        let q = &self.0;
        if let Some(p) = q.up.pop() {
            return Some(p);
        }
        let me = std::thread::current();
        if q.listener.load().as_deref().map(Thread::id) != Some(me.id()) {
            q.listener.store(Some(Arc::new(me)));
        }
        let deadline = Instant::now() + timeout;
        loop {
            // Looked at again after registering: a punt in between is not missed.
            if let Some(p) = q.up.pop() {
                return Some(p);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            std::thread::park_timeout(left);
        }
    }

    /// Queues a packet for a PMD to send; `Err` gives it back when the queue is full.
    /// `Ok`: the packet's ticket, for [`Punts::wait_sent`].
    pub fn inject(&self, packet: Injected) -> Result<u64, Injected> {
        let q = &self.0;
        // Counted before it is queued: a PMD may take it at once.
        let ticket = q.queued.fetch_add(1, Ordering::AcqRel) + 1;
        if let Err(p) = q.down.push(packet) {
            q.queued.fetch_sub(1, Ordering::AcqRel);
            return Err(p);
        }
        // An idle PMD may be asleep (pmd-sleep-max) or parked (no queues).
        self.0.pmds.load().iter().for_each(Thread::unpark);
        Ok(ticket)
    }

    /// Waits until the packets injected up to `ticket` are sent, at most `timeout`;
    /// false if they were not by then (a PMD that is gone). Packets are taken in
    /// order and counted once sent (with several PMDs, one may count its packet
    /// while another still sends an earlier one: a few microseconds' difference).
    pub fn wait_sent(&self, ticket: u64, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while self.0.done.load(Ordering::Acquire) < ticket {
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::yield_now();
        }
        true
    }

    /// Punted packets dropped because the up queue was full.
    pub fn lost(&self) -> u64 {
        self.0.lost.load(Ordering::Relaxed)
    }
}
