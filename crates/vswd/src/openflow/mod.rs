//! OpenFlow for vswd: the management socket `<directory of the control socket>/br0.mgmt`
//! (Open vSwitch's convention, so `ovs-ofctl -O OpenFlow13 show unix:/run/vsw/br0.mgmt`
//! works as it does against `ovs-vswitchd`), the controllers vswd connects to
//! (`controllers.rs`), and the packets that go up to them (`peers.rs`).
//!
//! Each connection has a reader thread and a writer thread (`peers.rs`): a
//! connection's requests are answered in order, each taking the switch's lock only
//! for as long as the switch needs it (never while an answer is encoded or sent);
//! answers and asynchronous messages wait in the peer's bounded queue, so a peer
//! that reads slowly or stops reading holds up nobody. A peer that has not said
//! hello within 5 s of connecting is closed; one silent for its probe interval is
//! sent an echo request and closed if it stays silent as long again. Each listener
//! (the management socket, every `ptcp:` one) has [`MAX_CONNECTIONS`] slots of its
//! own, so remote peers never take the local management socket's. What the protocol
//! says is `vsw_openflow::Session`'s; this module is the sockets and the switch's
//! side of it (`bridge.rs`, `vsw_openflow::Bridge`).

mod bridge;
pub mod controllers;
mod flow_watch;
mod peers;

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use vsw_openflow::connection::Ended;
use vsw_openflow::{Session, SessionEvent};

use crate::switch::Switch;
use bridge::SwitchBridge;
use peers::{Peer, Peers};

pub use crate::switch::BRIDGE_NAME;
/// Connections one listener (the management socket, a `ptcp:` listener) serves at
/// once; more are closed at once.
pub const MAX_CONNECTIONS: usize = 64;
/// A management connection silent this long is sent an echo request; silent as
/// long again after it, it is closed (a peer that went away without closing).
pub const PROBE_INTERVAL: Duration = Duration::from_secs(5);

/// Where bridge `bridge`'s management socket goes for a control socket at `control`
/// (Open vSwitch's `<run dir>/<bridge>.mgmt`).
pub fn mgmt_path(control: &Path, bridge: &str) -> PathBuf {
    control
        .parent()
        .unwrap_or(Path::new("."))
        .join(format!("{bridge}.mgmt"))
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What every OpenFlow thread shares.
pub struct OpenFlow {
    switch: Arc<Mutex<Switch>>,
    peers: Arc<Peers>,
    /// The management socket's connections now.
    mgmt_open: Arc<AtomicUsize>,
    /// Each configured controller, as the controllers' manager last saw them.
    controllers: Mutex<Vec<ControllerStatus>>,
    /// The bridge went: every thread of this OpenFlow ends.
    stopped: Arc<AtomicBool>,
    /// The management socket's path, for waking its accepting thread.
    mgmt_path: Option<PathBuf>,
    /// The datapath that hands this bridge what it sends up, and the bridge's
    /// number there.
    dpif: Arc<crate::dpif::Dpif>,
    slot: vsw_ofproto::BridgeSlot,
}

/// A configured controller as the controllers' manager last saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControllerStatus {
    /// Its target, as it prints.
    pub target: String,
    pub connected: bool,
    /// Why vsw never connects to it, for a target it cannot use.
    pub unusable: Option<String>,
}

impl OpenFlow {
    /// The controller at `target` (as the database or `set-controller` names it)
    /// as last seen; `None` for a target that is not configured (yet).
    pub fn controller_status(&self, target: &str) -> Option<ControllerStatus> {
        let normal = vsw_openflow::Target::lenient(target).to_string();
        lock(&self.controllers)
            .iter()
            .find(|c| c.target == normal)
            .cloned()
    }

    /// Whether the bridge went (its threads end).
    pub fn stopped(&self) -> bool {
        self.stopped.load(Ordering::Acquire)
    }

    /// Ends this bridge's OpenFlow: connections closed, controllers let go, the
    /// management socket's listener ended, nothing more sent up taken. The caller
    /// removes the management socket.
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::Release);
        self.dpif.set_punt_handler(self.slot, None);
        self.peers.close_all();
        // accept() returns to see the flag.
        if let Some(path) = &self.mgmt_path {
            let _ = UnixStream::connect(path);
        }
    }
}

/// Starts OpenFlow: packet-ins, the management socket (when it could be bound) and
/// the controller connections. Runs until the process ends.
pub fn start(
    switch: Arc<Mutex<Switch>>,
    mgmt: Option<(UnixListener, PathBuf)>,
) -> io::Result<Arc<OpenFlow>> {
    let (dpif, ofproto, (backer, slot)) = {
        let sw = lock(&switch);
        (sw.dpif(), sw.ofproto(), sw.backer_slot())
    };
    let (mgmt, mgmt_path) = match mgmt {
        Some((l, p)) => (Some(l), Some(p)),
        None => (None, None),
    };
    let of = Arc::new(OpenFlow {
        switch,
        peers: Arc::new(Peers::default()),
        mgmt_open: Arc::new(AtomicUsize::new(0)),
        controllers: Mutex::new(Vec::new()),
        stopped: Arc::new(AtomicBool::new(false)),
        mgmt_path,
        dpif: dpif.clone(),
        slot,
    });
    let peers = of.peers.clone();
    dpif.set_punt_handler(
        slot,
        Some(Arc::new(move |p| {
            peers::deliver_punt(p, &ofproto, (&backer, slot), &peers)
        })),
    );
    if let Some(listener) = mgmt {
        let of = of.clone();
        std::thread::Builder::new()
            .name("openflow-accept".into())
            .spawn(move || serve(listener, &of))?;
    }
    let for_controllers = of.clone();
    std::thread::Builder::new()
        .name("controllers".into())
        .spawn(move || controllers::manage(&for_controllers))?;
    Ok(of)
}

/// Accepts management connections until the process ends.
fn serve(listener: UnixListener, of: &Arc<OpenFlow>) {
    for conn in listener.incoming() {
        if of.stopped() {
            return;
        }
        let Ok(conn) = conn else { continue };
        let open = of.mgmt_open.clone();
        serve_one(of, Stream::Unix(conn), "management socket".into(), &open);
    }
}

/// Runs a service connection (management socket, `ptcp:` listener) in a thread of
/// its own; at most [`MAX_CONNECTIONS`] at once per listener (`open` counts its
/// connections), more are closed at once.
pub(crate) fn serve_one(of: &Arc<OpenFlow>, conn: Stream, label: String, open: &Arc<AtomicUsize>) {
    if open.fetch_add(1, Ordering::AcqRel) >= MAX_CONNECTIONS {
        open.fetch_sub(1, Ordering::AcqRel);
        tracing::warn!(%label, "OpenFlow: {MAX_CONNECTIONS} connections already; one more refused");
        return;
    }
    let (of2, open2) = (of.clone(), open.clone());
    let spawned = std::thread::Builder::new()
        .name("openflow".into())
        .spawn(move || {
            let versions = lock(&of2.switch).openflow_versions();
            let session = Session::new().restricted_to(versions);
            let ended = of2.run_peer(conn, label, session, PROBE_INTERVAL);
            tracing::info!(?ended, "OpenFlow connection closed");
            open2.fetch_sub(1, Ordering::AcqRel);
        });
    if let Err(e) = spawned {
        open.fetch_sub(1, Ordering::AcqRel);
        tracing::warn!(error = %e, "OpenFlow: cannot start a connection's thread");
    }
}

/// A connection's socket, whichever kind.
pub(crate) enum Stream {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl Stream {
    fn try_clone(&self) -> io::Result<Stream> {
        Ok(match self {
            Stream::Unix(s) => Stream::Unix(s.try_clone()?),
            Stream::Tcp(s) => Stream::Tcp(s.try_clone()?),
        })
    }

    fn set_timeouts(&self, read: Duration) -> io::Result<()> {
        match self {
            Stream::Unix(s) => {
                s.set_read_timeout(Some(read))?;
                s.set_write_timeout(Some(peers::WRITE_STEP))
            }
            Stream::Tcp(s) => {
                s.set_read_timeout(Some(read))?;
                s.set_write_timeout(Some(peers::WRITE_STEP))?;
                s.set_nodelay(true)
            }
        }
    }

    pub(crate) fn shutdown(&self) {
        let _ = match self {
            Stream::Unix(s) => s.shutdown(Shutdown::Both),
            Stream::Tcp(s) => s.shutdown(Shutdown::Both),
        };
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Unix(s) => s.read(buf),
            Stream::Tcp(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Unix(s) => s.write(buf),
            Stream::Tcp(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl OpenFlow {
    /// Runs one connection (either side opened it) until it ends; while it is open
    /// it gets the asynchronous messages its configuration asks for.
    pub(crate) fn run_peer(
        &self,
        mut stream: Stream,
        label: String,
        session: Session,
        probe: Duration,
    ) -> Ended {
        let (Ok(writer), Ok(answers), Ok(closer), Ok(timer)) = (
            stream.try_clone(),
            stream.try_clone(),
            stream.try_clone(),
            stream.try_clone(),
        ) else {
            return Ended::Gone;
        };
        // Before its hello, a peer is read at least once a second: the hello
        // deadline holds however it trickles.
        if stream
            .set_timeouts(probe.min(Duration::from_secs(1)))
            .is_err()
        {
            return Ended::Gone;
        }
        let peer = Arc::new(Peer::new(
            label,
            Box::new(move || closer.shutdown()),
            session.async_config(),
            session.config().miss_send_len,
        ));
        if let Err(e) = peer.start_writer(Box::new(writer), Box::new(answers)) {
            tracing::warn!(peer = %peer.label, error = %e, "OpenFlow: cannot start a connection's writer");
            return Ended::Gone;
        }
        self.peers.add(peer.clone());
        let ofproto = lock(&self.switch).ofproto();
        let ended = vsw_openflow::connection::run(
            session,
            &mut stream,
            |bytes| peer.send(bytes),
            |session, bytes, out| {
                let mut bridge = SwitchBridge {
                    switch: &self.switch,
                    peer: &peer,
                    peers: &self.peers,
                };
                let received = session.receive(bytes, &mut bridge, out);
                // Monitors hear of this connection's changes at once, not at the
                // next look (a flow added and deleted between two would be lost).
                self.peers.flow_updates(&ofproto, crate::switch::now_ms());
                received
            },
            |e| match e {
                SessionEvent::Negotiated(v) => {
                    peer.negotiated(v);
                    // Said hello: silence is measured by the probe interval now.
                    if timer.set_timeouts(probe).is_err() {
                        peer.close();
                    }
                }
                SessionEvent::AsyncConfig(c) => peer.set_async(c),
                SessionEvent::PacketInFormat(f) => peer.set_packet_in_format(f),
                SessionEvent::NxmFlowFormat(nxm) => peer.set_nxm_flow_format(nxm),
                SessionEvent::Config(c) => peer.set_miss_send_len(c.miss_send_len),
                e => tracing::debug!(peer = %peer.label, event = ?e, "OpenFlow"),
            },
        );
        self.peers.remove(&peer);
        peer.finish();
        ended
    }
}
