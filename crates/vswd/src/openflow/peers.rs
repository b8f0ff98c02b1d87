//! The OpenFlow connections that are open, for what the switch says without being
//! asked: packet-ins, port status, flow removals (and roles, which decide who gets
//! what). A peer is told only what its asynchronous configuration asks for.
//!
//! Each peer has a bounded queue of whole messages and a writer thread of its own,
//! so a peer that reads slowly (or not at all) holds up nobody: its answers wait in
//! its queue — its reader stops taking requests while [`REPLY_QUEUE_BYTES`] wait —
//! and what the switch says unasked is queued without waiting: a packet-in that
//! finds [`QUEUE_BYTES`] waiting is dropped (counted), any other message ends the
//! connection (the controller then learns the state afresh). A message not written
//! within [`MESSAGE_DEADLINE`] of reaching the front of the queue ends the
//! connection too, however it trickles. An answer that finds the queue empty and
//! nobody writing is written by the peer's own thread at once (by the same
//! deadline): a controller that waits for each answer (`ovs-ofctl`, a barrier after
//! every flow-mod) is not made to wait for a second thread to wake up as well.

use std::collections::{BTreeMap, VecDeque};
use std::io::{self, Write};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::switch::{Removal, RemovedFlow};
use vsw_datapath::Punted;
use vsw_ofproto::{Backer, BridgeSlot, Ofproto, PuntNote, PuntReason};
use vsw_openflow::as_written::echo_match;
use vsw_openflow::flow_monitor::{update_messages, FlowMonitor, Monitors};
use vsw_openflow::flow_stats::{
    FlowRemoved, OFPRR_DELETE, OFPRR_GROUP_DELETE, OFPRR_HARD_TIMEOUT, OFPRR_IDLE_TIMEOUT,
    OFPRR_METER_DELETE,
};
use vsw_openflow::message::{OFPPR_ADD, OFPPR_DELETE, OFPPR_MODIFY};
use vsw_openflow::oxs::FlowCounts;
use vsw_openflow::packet::{
    PacketIn2, PacketInFormat, OFPR_ACTION, OFPR_GROUP, OFPR_NO_MATCH, OFPR_PACKET_OUT,
};
use vsw_openflow::role::Generation;
use vsw_openflow::{AsyncConfig, Message, PacketIn, PortInfo, Refusal, Role, Version};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Writes `bytes` whole, by `deadline`: a peer that takes them a byte at a time is
/// given up on then (each write returns within the socket's write timeout).
fn write_by(w: &mut dyn Write, mut bytes: &[u8], deadline: Instant) -> io::Result<()> {
    while !bytes.is_empty() {
        if Instant::now() >= deadline {
            return Err(io::ErrorKind::TimedOut.into());
        }
        match w.write(bytes) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => bytes = &bytes[n..],
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Bytes a peer's queue holds at most; a packet-in that would pass it is dropped,
/// any other asynchronous message ends the connection.
pub const QUEUE_BYTES: usize = 4 << 20;
/// Bytes of queued messages above which the peer's own requests wait to be read.
pub const REPLY_QUEUE_BYTES: usize = 1 << 20;
/// How long a message may take to be written once it is at the front of the queue.
pub const MESSAGE_DEADLINE: Duration = Duration::from_secs(5);
/// How long one write to the socket may block (its write timeout): the writer
/// looks at the message's deadline at least this often.
pub const WRITE_STEP: Duration = Duration::from_millis(500);

/// What waits to be written to a peer.
#[derive(Default)]
struct Outbox {
    messages: VecDeque<Vec<u8>>,
    bytes: usize,
    /// The connection ended: nothing more is queued or written.
    closed: bool,
    /// The reader is done: what is queued is written (each message by its
    /// deadline), then the connection ends.
    finishing: bool,
    /// A message is being written (by the writer thread, or by the peer's own
    /// thread answering): nobody else writes meanwhile.
    writing: bool,
}

/// Whether an asynchronous message may be dropped when the peer's queue is full.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Overflow {
    Drop,
    Disconnect,
}

/// One open connection, as the rest of the switch sees it.
pub struct Peer {
    /// Where it is (`unix:…`, `tcp:…`), for the log.
    pub label: String,
    outbox: Mutex<Outbox>,
    /// Wakes the writer (something queued) and the reader (room made, or closed).
    changed: Condvar,
    /// Ends the connection (its reader sees the end), when writing to it failed.
    shutdown: Box<dyn Fn() + Send + Sync>,
    state: Mutex<PeerState>,
    /// The socket as the peer's own thread writes answers to it (see `send`).
    answers: Mutex<Option<Box<dyn Write + Send>>>,
    /// Packet-ins dropped because its queue was full.
    pub dropped: AtomicU64,
    /// The flow monitors the peer started, and the pipeline it was last told of.
    monitors: Mutex<Watched>,
}

/// A peer's flow monitors and the tables as it last heard of them.
#[derive(Default)]
struct Watched {
    monitors: Monitors,
    seen: Option<Arc<vsw_flow::Pipeline>>,
}

#[derive(Clone, Copy)]
struct PeerState {
    version: Option<Version>,
    async_config: AsyncConfig,
    /// 0: no asynchronous messages at all (Open vSwitch's rule, which a service
    /// connection starts with).
    miss_send_len: u16,
    role: Role,
    /// OpenFlow's packet-in or Nicira's NXT_PACKET_IN2.
    packet_in_format: PacketInFormat,
    /// A 1.0 peer in the NXM flow format: flow removals are NXT_FLOW_REMOVED.
    nxm: bool,
}

impl PeerState {
    /// The asynchronous messages of this kind the peer asked for, in its role.
    fn wants(&self, masks: [u32; 2], reason: u8) -> bool {
        let which = usize::from(self.role == Role::Slave);
        self.miss_send_len != 0 && masks[which] & (1 << reason) != 0
    }
}

impl Peer {
    pub fn new(
        label: String,
        shutdown: Box<dyn Fn() + Send + Sync>,
        async_config: AsyncConfig,
        miss_send_len: u16,
    ) -> Peer {
        Peer {
            label,
            outbox: Mutex::new(Outbox::default()),
            changed: Condvar::new(),
            shutdown,
            state: Mutex::new(PeerState {
                version: None,
                async_config,
                miss_send_len,
                role: Role::Equal,
                packet_in_format: PacketInFormat::Standard,
                nxm: false,
            }),
            answers: Mutex::new(None),
            dropped: AtomicU64::new(0),
            monitors: Mutex::new(Watched::default()),
        }
    }

    /// Starts the thread that writes the queue to `writer` (a socket whose write
    /// timeout is [`WRITE_STEP`]) until the connection ends; `answers` is the same
    /// socket, for the answers the peer's own thread writes at once.
    pub fn start_writer(
        self: &Arc<Self>,
        writer: Box<dyn Write + Send>,
        answers: Box<dyn Write + Send>,
    ) -> io::Result<()> {
        *lock(&self.answers) = Some(answers);
        let me = self.clone();
        std::thread::Builder::new()
            .name("openflow-write".into())
            .spawn(move || me.write_all_queued(writer))
            .map(drop)
    }

    fn write_all_queued(&self, mut writer: Box<dyn Write + Send>) {
        loop {
            let message = {
                let mut o = lock(&self.outbox);
                loop {
                    if o.closed {
                        return;
                    }
                    if !o.writing {
                        if let Some(m) = o.messages.pop_front() {
                            o.writing = true;
                            break m;
                        }
                        if o.finishing {
                            drop(o);
                            self.close();
                            return;
                        }
                    }
                    o = self.changed.wait(o).unwrap_or_else(|e| e.into_inner());
                }
            };
            let written = write_by(&mut writer, &message, Instant::now() + MESSAGE_DEADLINE);
            let mut o = lock(&self.outbox);
            o.writing = false;
            o.bytes -= message.len();
            self.changed.notify_all();
            drop(o);
            if let Err(e) = written {
                tracing::info!(peer = %self.label, error = %e, "OpenFlow: a message not written in time; connection closed");
                self.close();
                return;
            }
        }
    }

    /// Ends the connection once what is queued is written (the last answers: a
    /// refusal before the close, say).
    pub fn finish(&self) {
        let mut o = lock(&self.outbox);
        o.finishing = true;
        self.changed.notify_all();
    }

    /// Ends the connection: nothing more is queued or written, the reader sees the
    /// socket shut.
    pub fn close(&self) {
        let mut o = lock(&self.outbox);
        if !o.closed {
            o.closed = true;
            o.messages.clear();
            o.bytes = 0;
            self.changed.notify_all();
            drop(o);
            (self.shutdown)();
        }
    }

    /// Sends answers to the peer's own requests: written at once when nothing is
    /// queued or being written, else queued — waiting while [`REPLY_QUEUE_BYTES`]
    /// are queued (the peer reads slowly: its next requests wait with it). Only
    /// the peer's own thread calls this, never holding the switch's lock. `Err`:
    /// the connection ended.
    pub fn send(&self, bytes: &[u8]) -> io::Result<()> {
        let mut o = lock(&self.outbox);
        while o.bytes >= REPLY_QUEUE_BYTES && !o.closed {
            o = self.changed.wait(o).unwrap_or_else(|e| e.into_inner());
        }
        if o.closed {
            return Err(io::ErrorKind::BrokenPipe.into());
        }
        if o.messages.is_empty() && !o.writing && !o.finishing {
            if let Some(answers) = lock(&self.answers).as_mut() {
                o.writing = true;
                drop(o);
                let written = write_by(answers, bytes, Instant::now() + MESSAGE_DEADLINE);
                let mut o = lock(&self.outbox);
                o.writing = false;
                // Only the writer thread can wait on this write, and only when a
                // message or a finish came meanwhile (the reader waits on the
                // queue's bytes, which a direct write leaves as they were): else
                // it is not woken (waking it for nothing, on every answer, cost
                // two context switches each).
                if !o.messages.is_empty() || o.finishing {
                    self.changed.notify_all();
                }
                drop(o);
                if let Err(e) = written {
                    tracing::info!(peer = %self.label, error = %e, "OpenFlow: an answer not written in time; connection closed");
                    self.close();
                    return Err(io::ErrorKind::BrokenPipe.into());
                }
                return Ok(());
            }
        }
        o.bytes += bytes.len();
        o.messages.push_back(bytes.to_vec());
        self.changed.notify_all();
        Ok(())
    }

    /// Queues a message the switch sends unasked, without waiting; on a full queue
    /// it is dropped (a packet-in) or the connection ends. Whether it was queued.
    fn send_async(&self, bytes: Vec<u8>, overflow: Overflow) -> bool {
        let mut o = lock(&self.outbox);
        if o.closed {
            return false;
        }
        if o.bytes + bytes.len() > QUEUE_BYTES {
            drop(o);
            match overflow {
                Overflow::Drop => {
                    self.dropped.fetch_add(1, Ordering::Relaxed);
                }
                Overflow::Disconnect => {
                    tracing::info!(peer = %self.label, "OpenFlow: the peer does not read what it is sent; connection closed");
                    self.close();
                }
            }
            return false;
        }
        o.bytes += bytes.len();
        o.messages.push_back(bytes);
        self.changed.notify_all();
        true
    }

    pub fn negotiated(&self, v: Version) {
        lock(&self.state).version = Some(v);
    }

    pub fn set_async(&self, c: AsyncConfig) {
        lock(&self.state).async_config = c;
    }

    pub fn set_packet_in_format(&self, f: PacketInFormat) {
        lock(&self.state).packet_in_format = f;
    }

    pub fn set_nxm_flow_format(&self, nxm: bool) {
        lock(&self.state).nxm = nxm;
    }

    pub fn set_miss_send_len(&self, n: u16) {
        lock(&self.state).miss_send_len = n;
    }

    pub fn role(&self) -> Role {
        lock(&self.state).role
    }
}

/// Every open connection.
#[derive(Default)]
pub struct Peers {
    open: Mutex<Vec<Arc<Peer>>>,
    /// The newest role generation id (one per switch).
    generation: Mutex<Generation>,
    /// Packet-ins sent, and those no connection wanted.
    pub packet_ins: AtomicU64,
    pub unwanted: AtomicU64,
    /// Held by each look for flow monitors (see [`Peers::flow_updates`]).
    watch: Mutex<()>,
    /// Connections with flow monitors: while none has, a change of the tables
    /// looks at no connection.
    monitoring: AtomicUsize,
}

impl Peers {
    pub fn add(&self, p: Arc<Peer>) {
        lock(&self.open).push(p);
    }

    pub fn remove(&self, p: &Arc<Peer>) {
        lock(&self.open).retain(|o| !Arc::ptr_eq(o, p));
        let _watch = lock(&self.watch);
        let mut w = lock(&p.monitors);
        if !w.monitors.is_empty() {
            self.monitoring.fetch_sub(1, Ordering::SeqCst);
            w.monitors = Monitors::default();
            w.seen = None;
        }
    }

    /// Ends every open connection (the bridge goes): each one's thread sees its
    /// socket closed and returns.
    pub fn close_all(&self) {
        for p in lock(&self.open).iter() {
            p.close();
        }
    }

    /// `peer` asks for a role (`None`: only what it is).
    pub fn role_request(
        &self,
        peer: &Arc<Peer>,
        role: Option<Role>,
        generation_id: u64,
    ) -> Result<(Role, u64), Refusal> {
        let mut generation = lock(&self.generation);
        let Some(role) = role else {
            return Ok((peer.role(), generation.current()));
        };
        if role != Role::Equal {
            generation.take(generation_id)?;
        }
        if role == Role::Master {
            let id = generation.current();
            for other in lock(&self.open).iter().filter(|o| !Arc::ptr_eq(o, peer)) {
                let mut s = lock(&other.state);
                if s.role == Role::Master {
                    s.role = Role::Slave;
                    tracing::info!(peer = %other.label, "OpenFlow: master became slave");
                    // From 1.4 on, the old master is told (OFPT_ROLE_STATUS).
                    if let Some(v) = s.version.filter(|v| *v >= Version::V1_4) {
                        drop(s);
                        let status = Message::RoleStatus(vsw_openflow::role::RoleStatus {
                            role: Role::Slave,
                            reason: vsw_openflow::role::OFPCRR_MASTER_REQUEST,
                            generation_id: id,
                        });
                        other.send_async(status.encode(v.wire(), 0), Overflow::Disconnect);
                    }
                }
            }
        }
        lock(&peer.state).role = role;
        tracing::info!(peer = %peer.label, ?role, "OpenFlow role");
        Ok((role, generation.current()))
    }

    /// Sends a packet that came up to every connection that asked for packet-ins of
    /// its reason.
    fn packet_in(&self, p: &Punted, (id, note): (u32, &PuntNote)) {
        let continuation = note.continuation_check().map(|check| token(id, check));
        let (reason, table, cookie, max_len) = (note.reason, note.table, note.cookie, note.max_len);
        let metadata = vsw_openflow::from_vsw::packet_in_metadata(note.metadata, &note.pipeline);
        let peers: Vec<Arc<Peer>> = lock(&self.open).clone();
        let mut sent = false;
        for peer in peers {
            let state = *lock(&peer.state);
            let Some(v) = state.version else { continue };
            let wire_reason = match reason {
                PuntReason::NoMatch => OFPR_NO_MATCH,
                PuntReason::Action => OFPR_ACTION,
                // 1.3 has no reason of its own for it.
                PuntReason::PacketOut if v >= Version::V1_4 => OFPR_PACKET_OUT,
                PuntReason::PacketOut => OFPR_ACTION,
                PuntReason::Group if v >= Version::V1_4 => OFPR_GROUP,
                PuntReason::Group => OFPR_ACTION,
            };
            if !state.wants(state.async_config.packet_in, wire_reason) {
                continue;
            }
            let in_port = vsw_openflow::flow_mod::to_of_port(p.in_port);
            let pi = PacketIn::of_frame(
                &p.frame,
                in_port,
                wire_reason,
                table,
                cookie,
                max_len,
                metadata.clone(),
            );
            let msg = match state.packet_in_format {
                PacketInFormat::Standard => Message::PacketIn(pi),
                PacketInFormat::NxtPacketIn => Message::NxPacketIn(pi),
                PacketInFormat::NxtPacketIn2 => {
                    let userdata = note.userdata.as_deref().map(<[u8]>::to_vec);
                    match PacketIn2::of(pi, p.frame.len(), userdata, continuation) {
                        Some(p2) => Message::PacketIn2(p2),
                        None => continue,
                    }
                }
            };
            if peer.send_async(msg.encode(v.wire(), 0), Overflow::Drop) {
                sent = true;
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

impl Peers {
    /// Tells every connection that wants it that `port` was added, deleted or
    /// changed.
    fn port_status(&self, reason: u8, port: &PortInfo) {
        let peers: Vec<Arc<Peer>> = lock(&self.open).clone();
        for peer in peers {
            let state = *lock(&peer.state);
            let Some(v) = state.version else { continue };
            if !state.wants(state.async_config.port_status, reason) {
                continue;
            }
            let msg = Message::PortStatus(reason, port.clone()).encode(v.wire(), 0);
            peer.send_async(msg, Overflow::Disconnect);
        }
    }
}

impl Peers {
    /// `peer`'s flow monitors now, told of the changes from the tables as they
    /// are now (read under the watch's lock, so that no look compares against
    /// older tables after it).
    pub fn set_monitors(&self, peer: &Peer, monitors: &[FlowMonitor], ofproto: &Ofproto) {
        let _watch = lock(&self.watch);
        let mut w = lock(&peer.monitors);
        let had = !w.monitors.is_empty();
        w.monitors = Monitors::from(monitors.to_vec());
        w.seen = (!w.monitors.is_empty()).then(|| ofproto.pipeline());
        match (had, w.seen.is_some()) {
            (false, true) => _ = self.monitoring.fetch_add(1, Ordering::SeqCst),
            (true, false) => _ = self.monitoring.fetch_sub(1, Ordering::SeqCst),
            _ => {}
        }
    }

    /// Tells every connection that monitors flows of the changes since it was last
    /// told, up to the tables now. One look at a time, each reading the tables
    /// under the watch's lock: a look never compares against tables older than a
    /// connection was last told of, so changes go out in the order they were made.
    pub fn flow_updates(&self, ofproto: &Ofproto, now_ms: u64) {
        if self.monitoring.load(Ordering::SeqCst) == 0 {
            return;
        }
        let _watch = lock(&self.watch);
        let tables = ofproto.pipeline();
        let peers: Vec<Arc<Peer>> = lock(&self.open).clone();
        for peer in peers {
            let Some(version) = lock(&peer.state).version else {
                continue;
            };
            let mut w = lock(&peer.monitors);
            let Some(seen) = w.seen.as_ref() else {
                continue;
            };
            if Arc::ptr_eq(seen, &tables) {
                continue;
            }
            let changes = super::flow_watch::changes(seen, &tables, now_ms);
            w.seen = Some(tables.clone());
            let updates: Vec<_> = changes
                .into_iter()
                .filter_map(|u| w.monitors.wants(&u, false).map(|a| (u, a)))
                .collect();
            for msg in update_messages(version, &updates) {
                if !peer.send_async(msg, Overflow::Disconnect) {
                    break;
                }
            }
        }
    }

    /// Tells every connection that wants it that these rules went.
    pub fn flows_removed(&self, removed: &[RemovedFlow]) {
        if removed.is_empty() {
            return;
        }
        let peers: Vec<Arc<Peer>> = lock(&self.open).clone();
        for peer in peers {
            let state = *lock(&peer.state);
            let Some(v) = state.version else { continue };
            for f in removed {
                let reason = match f.why {
                    Removal::IdleTimeout => OFPRR_IDLE_TIMEOUT,
                    Removal::HardTimeout => OFPRR_HARD_TIMEOUT,
                    Removal::Deleted => OFPRR_DELETE,
                    Removal::GroupDeleted => OFPRR_GROUP_DELETE,
                    // 1.3 has no reason of its own for it.
                    Removal::MeterDeleted if v >= Version::V1_4 => OFPRR_METER_DELETE,
                    Removal::MeterDeleted => OFPRR_DELETE,
                };
                if !state.wants(state.async_config.flow_removed, reason) {
                    continue;
                }
                let r = &f.rule;
                let removed = FlowRemoved {
                    table_id: r.spec.table,
                    reason,
                    priority: r.spec.priority,
                    idle_timeout: r.idle_timeout(),
                    hard_timeout: r.hard_timeout(),
                    cookie: r.spec.cookie,
                    matcher: echo_match(&r.spec).0,
                    counts: FlowCounts {
                        duration_ms: r.duration_ms(f.at_ms),
                        idle_ms: r.idle_age_s(f.at_ms) * 1000,
                        packets: r.stats.packets(),
                        bytes: r.stats.bytes(),
                    },
                };
                let msg = if state.nxm && v == Version::V1_0 {
                    Message::NxFlowRemoved(removed)
                } else {
                    Message::FlowRemoved(removed)
                };
                if !peer.send_async(msg.encode(v.wire(), 0), Overflow::Disconnect) {
                    break;
                }
            }
        }
    }
}

/// The ports as last told, to see what changed (ports come and go by `vswctl`,
/// links by the link watch, both on the control side).
#[derive(Default)]
pub struct PortWatch {
    known: BTreeMap<u32, PortInfo>,
    started: bool,
}

impl PortWatch {
    /// Compares `now` with what was known and sends a port status for each port
    /// added, deleted or changed (the first look only learns).
    pub fn look(&mut self, now: Vec<PortInfo>, peers: &Peers) {
        let now: BTreeMap<u32, PortInfo> = now.into_iter().map(|p| (p.port_no, p)).collect();
        if self.started {
            for (no, old) in &self.known {
                match now.get(no) {
                    None => peers.port_status(OFPPR_DELETE, old),
                    Some(new) if new != old => peers.port_status(OFPPR_MODIFY, new),
                    Some(_) => {}
                }
            }
            for (no, new) in &now {
                if !self.known.contains_key(no) {
                    peers.port_status(OFPPR_ADD, new);
                }
            }
        }
        self.known = now;
        self.started = true;
    }
}

/// A packet bridge `slot`'s datapath actions sent up becomes a packet-in with what
/// its translation noted (reason, table, cookie, length, metadata and registers),
/// in the bridge's port numbers.
pub fn deliver_punt(
    mut p: Punted,
    ofproto: &Ofproto,
    (backer, slot): (&Backer, BridgeSlot),
    peers: &Peers,
) {
    let (_, id) = Backer::punt_note(p.userdata);
    let note = ofproto.punt_note(id);
    // The port the translation named, where the datapath's in_port does not say it.
    p.in_port = match note.as_ref().and_then(|n| n.in_port) {
        Some(of_port) => of_port,
        None => crate::dpif::punted_in_port(backer, slot, p.in_port),
    };
    match note {
        Some(n) => peers.packet_in(&p, (id, &n)),
        None => tracing::warn!(note = p.userdata, "a punted packet with no note: dropped"),
    }
}

/// A paused packet's continuation as vsw gives it to the controller: its note's
/// number and its continuation's check (a note number used again for another note
/// does not resume this one's).
fn token(note: u32, check: u64) -> vsw_openflow::packet::ContinuationToken {
    let mut t = [0u8; 16];
    t[..4].copy_from_slice(&note.to_be_bytes());
    t[4..12].copy_from_slice(&check.to_be_bytes());
    t
}

/// [`token`]'s parts.
pub(crate) fn untoken(t: &vsw_openflow::packet::ContinuationToken) -> (u32, u64) {
    let note = u32::from_be_bytes(t[..4].try_into().expect("4 bytes"));
    let check = u64::from_be_bytes(t[4..12].try_into().expect("8 bytes"));
    (note, check)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    /// Writes nothing until told to go, and says when a write began.
    struct Held {
        began: mpsc::Sender<()>,
        go: mpsc::Receiver<()>,
    }

    impl Write for Held {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            let _ = self.began.send(());
            let _ = self.go.recv();
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    /// Hands on each write.
    struct Told(mpsc::Sender<Vec<u8>>);

    impl Write for Told {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            let _ = self.0.send(buf.to_vec());
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    /// The peer's own thread writes an answer at once; a message queued while it
    /// writes is written by the writer thread once the answer is out (the answer
    /// wakes it only then).
    #[test]
    fn a_message_queued_during_an_answer_is_written_after_it() {
        let peer = Arc::new(Peer::new(
            "test".into(),
            Box::new(|| {}),
            AsyncConfig::default(),
            128,
        ));
        let (began, began_rx) = mpsc::channel();
        let (go, go_rx) = mpsc::channel();
        let (written, written_rx) = mpsc::channel();
        peer.start_writer(Box::new(Told(written)), Box::new(Held { began, go: go_rx }))
            .unwrap();
        let answering = {
            let peer = peer.clone();
            std::thread::spawn(move || peer.send(b"answer"))
        };
        began_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("the answer is being written");
        assert!(peer.send_async(b"queued".to_vec(), Overflow::Drop));
        assert!(
            written_rx.recv_timeout(Duration::from_millis(50)).is_err(),
            "nothing is written beside an answer being written"
        );
        go.send(()).unwrap();
        answering.join().unwrap().unwrap();
        assert_eq!(
            written_rx.recv_timeout(Duration::from_secs(10)).unwrap(),
            b"queued"
        );
        peer.close();
    }
}
