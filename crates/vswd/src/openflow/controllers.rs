//! The controllers vswd connects to (`vswctl set-controller`): one thread per
//! target keeps a connection open, reconnecting with a backoff that doubles from
//! 1 s to 8 s (as Open vSwitch's rconn); a target may be configured before its
//! controller is up. And the fail mode: in `standalone`, once controllers are
//! configured and none has been connected for three inactivity probes, the
//! switch forwards as a learning switch until one connects again ("fail open");
//! in `secure` the flows alone decide, always. The same loop watches the ports,
//! for the port status messages, and hands on the flows that went.

use std::collections::HashMap;
use std::net::{TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use vsw_openflow::Target;

use super::peers::PortWatch;
use super::{lock, OpenFlow, Stream};
use crate::options::FailMode;

/// How often the configuration is looked at (a changed target is taken up within it).
const LOOK_INTERVAL: Duration = Duration::from_millis(200);
const BACKOFF_MIN: Duration = Duration::from_secs(1);
const BACKOFF_MAX: Duration = Duration::from_secs(8);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// One configured controller, as its thread and the manager share it.
struct Slot {
    stop: AtomicBool,
    connected: AtomicBool,
    /// The open connection's socket, to end it when the target is removed.
    open: Mutex<Option<Stream>>,
}

/// Keeps the configured controllers connected and the fail mode applied; runs until
/// the process ends.
pub fn manage(of: &Arc<OpenFlow>) {
    let mut slots: HashMap<Target, Arc<Slot>> = HashMap::new();
    let mut last_connected = Instant::now();
    let mut fail_open = false;
    let mut ports = PortWatch::default();
    while !of.stopped() {
        let (targets, mode, probe_ms, now_ports, removed, ofproto) = {
            let mut sw = lock(&of.switch);
            let (t, m, p) = sw.controller_config();
            (
                t,
                m,
                p,
                sw.openflow_ports(),
                sw.take_removed(),
                sw.ofproto(),
            )
        };
        ports.look(now_ports, &of.peers);
        of.peers.flows_removed(&removed);
        of.peers.flow_updates(&ofproto, crate::switch::now_ms());
        let probe = Duration::from_millis(probe_ms);
        slots.retain(|t, slot| {
            let keep = targets.contains(t);
            if !keep {
                slot.stop.store(true, Ordering::Release);
                if let Some(s) = lock(&slot.open).as_ref() {
                    s.shutdown();
                }
                tracing::info!(controller = %t, "controller removed");
            }
            keep
        });
        if slots.is_empty() {
            last_connected = Instant::now();
        }
        for t in &targets {
            if slots.contains_key(t) {
                continue;
            }
            let slot = Arc::new(Slot {
                stop: AtomicBool::new(false),
                connected: AtomicBool::new(false),
                open: Mutex::new(None),
            });
            let (of2, t2, slot2) = (of.clone(), t.clone(), slot.clone());
            let spawned = match t {
                // Configured, never connected: the bridge has a controller (and
                // stays fail-closed by it), and says why it is not connected.
                Target::Unsupported { why, .. } => {
                    tracing::warn!(controller = %t, why, "a controller vsw cannot connect to");
                    slots.insert(t.clone(), slot);
                    continue;
                }
                Target::Ptcp(addr) => {
                    let addr = *addr;
                    std::thread::Builder::new()
                        .name("openflow-ptcp".into())
                        .spawn(move || listen(&of2, addr, &slot2))
                }
                _ => std::thread::Builder::new()
                    .name("controller".into())
                    .spawn(move || keep_connected(&of2, &t2, &slot2, probe)),
            };
            match spawned {
                Ok(_) => {
                    slots.insert(t.clone(), slot);
                }
                Err(e) => {
                    tracing::warn!(controller = %t, error = %e, "cannot start a controller's thread")
                }
            }
        }
        if slots.values().any(|s| s.connected.load(Ordering::Acquire)) {
            last_connected = Instant::now();
        }
        *lock(&of.controllers) = slots
            .iter()
            .map(|(t, s)| super::ControllerStatus {
                target: t.to_string(),
                connected: s.connected.load(Ordering::Acquire),
                unusable: match t {
                    Target::Unsupported { why, .. } => Some(why.clone()),
                    _ => None,
                },
            })
            .collect();
        // Listeners are no controllers: only configured controllers fail open.
        let controllers = targets
            .iter()
            .filter(|t| !matches!(t, Target::Ptcp(_)))
            .count();
        if controllers == 0 {
            last_connected = Instant::now();
        }
        let want_open = mode == FailMode::Standalone
            && controllers > 0
            && last_connected.elapsed() >= probe * 3;
        if want_open != fail_open {
            fail_open = want_open;
            if want_open {
                tracing::warn!(
                    "no controller reachable: standalone fail mode forwards as a learning switch"
                );
            } else {
                tracing::info!(
                    "controller connected (or fail mode changed): the flows decide again"
                );
            }
            lock(&of.switch).set_fail_open(want_open);
        }
        std::thread::sleep(LOOK_INTERVAL);
    }
    // The bridge went: so do its controllers' connections and listeners.
    for slot in slots.values() {
        slot.stop.store(true, Ordering::Release);
        if let Some(s) = lock(&slot.open).as_ref() {
            s.shutdown();
        }
    }
}

fn connect(target: &Target) -> std::io::Result<Stream> {
    Ok(match target {
        Target::Tcp(addr) => Stream::Tcp(TcpStream::connect_timeout(addr, CONNECT_TIMEOUT)?),
        Target::Unix(path) => Stream::Unix(UnixStream::connect(path)?),
        Target::Ptcp(_) | Target::Unsupported { .. } => {
            return Err(std::io::ErrorKind::InvalidInput.into())
        }
    })
}

/// Listens on `addr` until the target is removed; each connection is a service
/// connection, as on the management socket, with slots of this listener's own.
fn listen(of: &Arc<OpenFlow>, addr: std::net::SocketAddr, slot: &Slot) {
    let open = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let listener = loop {
        match TcpListener::bind(addr) {
            Ok(l) => break l,
            Err(e) => {
                tracing::warn!(%addr, error = %e, "cannot listen for OpenFlow; trying again");
                wait(slot, BACKOFF_MAX);
                if slot.stop.load(Ordering::Acquire) {
                    return;
                }
            }
        }
    };
    if listener.set_nonblocking(true).is_err() {
        return;
    }
    tracing::info!(%addr, "listening for OpenFlow connections");
    while !slot.stop.load(Ordering::Acquire) {
        match listener.accept() {
            Ok((conn, peer)) => {
                let _ = conn.set_nonblocking(false);
                super::serve_one(of, Stream::Tcp(conn), format!("tcp:{peer}"), &open);
            }
            Err(_) => std::thread::sleep(LOOK_INTERVAL),
        }
    }
    tracing::info!(%addr, "OpenFlow listener closed");
}

/// Connects to `target` and runs the connection, again and again, until the target
/// is removed.
fn keep_connected(of: &OpenFlow, target: &Target, slot: &Slot, probe: Duration) {
    let mut backoff = BACKOFF_MIN;
    while !slot.stop.load(Ordering::Acquire) {
        match connect(target).and_then(|s| Ok((s.try_clone()?, s))) {
            Ok((closer, stream)) => {
                *lock(&slot.open) = Some(closer);
                // Removed while connecting: not run at all.
                if slot.stop.load(Ordering::Acquire) {
                    break;
                }
                tracing::info!(controller = %target, "connected to controller");
                slot.connected.store(true, Ordering::Release);
                let versions = lock(&of.switch).openflow_versions();
                let ended = of.run_peer(
                    stream,
                    target.to_string(),
                    vsw_openflow::Session::controller().restricted_to(versions),
                    probe,
                );
                slot.connected.store(false, Ordering::Release);
                *lock(&slot.open) = None;
                tracing::info!(controller = %target, ?ended, "controller connection ended");
                // A controller that closes at once is not called again at once.
                backoff = BACKOFF_MIN;
                wait(slot, backoff);
            }
            Err(e) => {
                tracing::debug!(controller = %target, error = %e, ?backoff, "cannot connect to controller");
                wait(slot, backoff);
                backoff = (backoff * 2).min(BACKOFF_MAX);
            }
        }
    }
}

/// Waits `d`, or until the target is removed.
fn wait(slot: &Slot, d: Duration) {
    let until = Instant::now() + d;
    while Instant::now() < until && !slot.stop.load(Ordering::Acquire) {
        std::thread::sleep(LOOK_INTERVAL.min(until.saturating_duration_since(Instant::now())));
    }
}
