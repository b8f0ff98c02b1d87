//! The OpenFlow connections that are open, for what the switch says without being
//! asked: packet-ins now (port status and flow removals will join them). Each peer
//! has its writer behind its own lock, so a packet-in and an answer never
//! interleave; a peer is told only what its asynchronous configuration asks for.

use std::io::{self, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use vsw_datapath::{Punted, Punts};
use vsw_ofproto::{Ofproto, PuntReason};
use vsw_openflow::packet::{OFPR_ACTION, OFPR_NO_MATCH, OFPR_PACKET_OUT};
use vsw_openflow::{AsyncConfig, Message, PacketIn, Version};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// One open connection, as the rest of the switch sees it.
pub struct Peer {
    /// Where it is (`unix:…`, `tcp:…`), for the log.
    pub label: String,
    writer: Mutex<Box<dyn Write + Send>>,
    /// Ends the connection (its reader sees the end), when writing to it failed.
    shutdown: Box<dyn Fn() + Send + Sync>,
    state: Mutex<PeerState>,
}

#[derive(Clone, Copy)]
struct PeerState {
    version: Option<Version>,
    async_config: AsyncConfig,
    /// 0: no asynchronous messages at all (Open vSwitch's rule, which a service
    /// connection starts with).
    miss_send_len: u16,
}

impl Peer {
    pub fn new(
        label: String,
        writer: Box<dyn Write + Send>,
        shutdown: Box<dyn Fn() + Send + Sync>,
        async_config: AsyncConfig,
        miss_send_len: u16,
    ) -> Peer {
        Peer {
            label,
            writer: Mutex::new(writer),
            shutdown,
            state: Mutex::new(PeerState {
                version: None,
                async_config,
                miss_send_len,
            }),
        }
    }

    /// Writes whole messages; a failed write ends the connection.
    pub fn send(&self, bytes: &[u8]) -> io::Result<()> {
        let written = lock(&self.writer).write_all(bytes);
        if written.is_err() {
            (self.shutdown)();
        }
        written
    }

    pub fn negotiated(&self, v: Version) {
        lock(&self.state).version = Some(v);
    }

    pub fn set_async(&self, c: AsyncConfig) {
        lock(&self.state).async_config = c;
    }

    pub fn set_miss_send_len(&self, n: u16) {
        lock(&self.state).miss_send_len = n;
    }
}

/// Every open connection.
#[derive(Default)]
pub struct Peers {
    open: Mutex<Vec<Arc<Peer>>>,
    /// Packet-ins sent, and those no connection wanted.
    pub packet_ins: AtomicU64,
    pub unwanted: AtomicU64,
}

impl Peers {
    pub fn add(&self, p: Arc<Peer>) {
        lock(&self.open).push(p);
    }

    pub fn remove(&self, p: &Arc<Peer>) {
        lock(&self.open).retain(|o| !Arc::ptr_eq(o, p));
    }

    /// Sends a packet that came up to every connection that asked for packet-ins of
    /// its reason.
    fn packet_in(&self, p: &Punted, reason: PuntReason, table: u8, cookie: u64, max_len: u16) {
        let peers: Vec<Arc<Peer>> = lock(&self.open).clone();
        let mut sent = false;
        for peer in peers {
            let state = *lock(&peer.state);
            let Some(v) = state.version else { continue };
            if state.miss_send_len == 0 {
                continue;
            }
            let wire_reason = match reason {
                PuntReason::NoMatch => OFPR_NO_MATCH,
                PuntReason::Action => OFPR_ACTION,
                // 1.3 has no reason of its own for it.
                PuntReason::PacketOut if v >= Version::V1_4 => OFPR_PACKET_OUT,
                PuntReason::PacketOut => OFPR_ACTION,
            };
            // Roles are not kept yet: every connection is master or equal.
            if state.async_config.packet_in[0] & (1 << wire_reason) == 0 {
                continue;
            }
            let pi = PacketIn::of_frame(&p.frame, p.in_port, wire_reason, table, cookie, max_len);
            if peer
                .send(&Message::PacketIn(pi).encode(v.wire(), 0))
                .is_ok()
            {
                sent = true;
            } else {
                tracing::info!(peer = %peer.label, "OpenFlow: cannot send a packet-in; connection closed");
            }
        }
        let counter = if sent {
            &self.packet_ins
        } else {
            &self.unwanted
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// Takes what the datapath sends up, until the process ends: each packet becomes a
/// packet-in with what its translation noted (reason, table, cookie, length).
pub fn deliver_punts(punts: Punts, ofproto: Arc<Ofproto>, peers: Arc<Peers>) {
    loop {
        let Some(p) = punts.recv_timeout(Duration::from_secs(1)) else {
            continue;
        };
        match ofproto.punt_note(p.userdata) {
            Some(n) => peers.packet_in(&p, n.reason, n.table, n.cookie, n.max_len),
            None => tracing::warn!(note = p.userdata, "a punted packet with no note: dropped"),
        }
    }
}
