//! The bridges one vswd runs. Each is a switch of its own — pipeline, ports, MAC
//! table, datapath id — with its OpenFlow management socket `<run dir>/<name>.mgmt`
//! and its controllers; all of them are in one datapath (`Dpif`: one set of PMD
//! threads, one revalidator), made with the first bridge. Without an OVSDB server
//! vswd runs one (from its state file); with one, a bridge per `Bridge` row,
//! started and stopped as the database adds and deletes them.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use vsw_netdev::class::PortClasses;
use vsw_netdev::unix_socket::SocketFile;

use crate::dpif::Dpif;
use crate::openflow::{self, OpenFlow};
use crate::switch::{Switch, SwitchError};

/// Whether `name` may name a bridge: as an interface name may (its internal port is
/// an interface of that name, its management socket `<run dir>/<name>.mgmt`), so no
/// `/`, no `..`, at most 15 bytes.
pub fn check_name(name: &str) -> Result<(), String> {
    if vsw_netdev::interface::valid_name(name) {
        Ok(())
    } else {
        Err(format!(
            "{name:?} cannot name a bridge: at most 15 bytes, none of them '/', ':', NUL or white space, and not '.' or '..'"
        ))
    }
}

#[derive(Debug, thiserror::Error)]
pub enum BridgeError {
    #[error("{0}")]
    BadName(String),
    #[error(transparent)]
    Switch(#[from] SwitchError),
    #[error("cannot start the bridge's OpenFlow: {0}")]
    OpenFlow(#[from] io::Error),
}

/// One running bridge.
pub struct RunningBridge {
    pub name: String,
    pub switch: Arc<Mutex<Switch>>,
    pub openflow: Arc<OpenFlow>,
    /// The management socket, when it could be bound.
    mgmt: Option<(PathBuf, SocketFile)>,
}

impl RunningBridge {
    pub fn lock(&self) -> MutexGuard<'_, Switch> {
        self.switch.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Stops the bridge: OpenFlow connections closed, ports let go (devices vswd made
    /// removed, others left), PMD threads ended, the management socket removed.
    /// `daemon_ends`: vswd stops (pinned fast paths stay for the next run), rather
    /// than the bridge being deleted (its fast paths go with it).
    fn stop(&self, daemon_ends: bool) {
        self.openflow.stop();
        self.lock().shutdown(daemon_ends);
        // Its TLV map goes with it (a bridge made again under its name starts
        // without one, as in Open vSwitch).
        let tunnels = self.lock().dpif().tunnels().clone();
        tunnels.set_metadata0(&self.name, None);
        if let Some((path, file)) = &self.mgmt {
            file.remove(path);
        }
    }
}

/// The running bridges, by name.
pub struct Bridges {
    /// vswd's control socket: its directory is the run directory.
    socket: PathBuf,
    running: Mutex<BTreeMap<String, Arc<RunningBridge>>>,
    /// The datapath every bridge is in, once the first has made it (it outlives
    /// the bridges, as Open vSwitch's datapath does).
    dpif: Mutex<Option<Arc<Dpif>>>,
    /// The tunnels' state that datapath's tunnel and LOCAL ports open in (made
    /// with the daemon: the underlay's routes are published to it from the start).
    tunnels: Arc<vsw_netdev::tunnel::TunnelWorld>,
}

impl Bridges {
    pub fn new(socket: &Path) -> Bridges {
        Bridges {
            socket: socket.to_path_buf(),
            running: Mutex::new(BTreeMap::new()),
            dpif: Mutex::new(None),
            tunnels: vsw_netdev::tunnel::TunnelWorld::new(),
        }
    }

    /// The tunnels' state of the daemon's datapath.
    pub fn tunnels(&self) -> &Arc<vsw_netdev::tunnel::TunnelWorld> {
        &self.tunnels
    }

    fn map(&self) -> MutexGuard<'_, BTreeMap<String, Arc<RunningBridge>>> {
        self.running.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `switch` as its bridge: its management socket (listening before this
    /// returns; a socket that cannot be bound is said, not fatal — another daemon's,
    /// say) and OpenFlow.
    pub fn run(&self, mut switch: Switch) -> Result<Arc<RunningBridge>, BridgeError> {
        let name = switch.bridge_name().to_string();
        self.dpif
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_or_insert_with(|| switch.dpif());
        if let Err(why) = check_name(&name) {
            switch.shutdown(false);
            return Err(BridgeError::BadName(why));
        }
        let path = openflow::mgmt_path(&self.socket, &name);
        let (listener, mgmt) = match crate::server::bind(&path) {
            Ok((listener, file)) => (Some((listener, path.clone())), Some((path, file))),
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "no OpenFlow management socket");
                (None, None)
            }
        };
        let switch = Arc::new(Mutex::new(switch));
        let openflow = match openflow::start(switch.clone(), listener) {
            Ok(of) => of,
            Err(e) => {
                let mut sw = switch.lock().unwrap_or_else(PoisonError::into_inner);
                sw.shutdown(false);
                if let Some((path, file)) = &mgmt {
                    file.remove(path);
                }
                return Err(e.into());
            }
        };
        let bridge = Arc::new(RunningBridge {
            name: name.clone(),
            switch,
            openflow,
            mgmt,
        });
        tracing::info!(bridge = %name, "bridge running");
        if let Some(old) = self.map().insert(name, bridge.clone()) {
            old.stop(false);
        }
        Ok(bridge)
    }

    /// Starts bridge `name` anew with `options`, its configuration kept elsewhere
    /// (an OVSDB server).
    pub fn start_unsaved(
        &self,
        name: &str,
        classes: PortClasses,
        options: &crate::options::Options,
    ) -> Result<Arc<RunningBridge>, BridgeError> {
        // Before anything is made of it.
        check_name(name).map_err(BridgeError::BadName)?;
        let socket = self.socket.display().to_string();
        let join = match self.dpif() {
            Some(d) => crate::switch::Join::Datapath(d),
            None => crate::switch::Join::NewDatapath(self.tunnels.clone()),
        };
        let switch = Switch::start_unsaved(&socket, classes, name, options, join)?;
        self.run(switch)
    }

    /// The datapath the bridges are in, once there is one.
    pub fn dpif(&self) -> Option<Arc<Dpif>> {
        self.dpif
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub fn get(&self, name: &str) -> Option<Arc<RunningBridge>> {
        self.map().get(name).cloned()
    }

    /// Takes away every kernel fast path pinned by an earlier run that no bridge
    /// adopted (its port has no persistent offload now, or `offload-persist` is off):
    /// run once the configuration was first carried out.
    pub fn remove_unadopted_offloads(&self) {
        let kept: std::collections::HashSet<String> = self
            .all()
            .iter()
            .flat_map(|b| b.lock().pinned_offload_ports())
            .collect();
        vsw_netdev::ebpf::remove_pinned(crate::offload::pin_root(), |ifname| kept.contains(ifname));
    }

    /// Every running bridge, by name.
    pub fn all(&self) -> Vec<Arc<RunningBridge>> {
        self.map().values().cloned().collect()
    }

    pub fn names(&self) -> Vec<String> {
        self.map().keys().cloned().collect()
    }

    /// Stops bridge `name` (it was deleted); whether it ran.
    pub fn stop(&self, name: &str) -> bool {
        self.stop_one(name, false)
    }

    fn stop_one(&self, name: &str, daemon_ends: bool) -> bool {
        let Some(b) = self.map().remove(name) else {
            return false;
        };
        b.stop(daemon_ends);
        tracing::info!(bridge = %name, "bridge stopped");
        true
    }

    /// Stops every bridge (vswd ends).
    pub fn stop_all(&self) {
        for name in self.names() {
            self.stop_one(&name, true);
        }
    }

    /// The bridge `name`, or an error that names the bridges there are.
    pub fn find(&self, name: &str) -> Result<Arc<RunningBridge>, String> {
        self.get(name).ok_or_else(|| {
            let names = self.names();
            if names.is_empty() {
                format!("no bridge {name}: vswd runs none")
            } else {
                format!("no bridge {name} (bridges: {})", names.join(", "))
            }
        })
    }
}
