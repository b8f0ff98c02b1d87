//! The switch as the control plane sees it: ports by name, options, flows. Applies
//! commands to the datapath, validating each completely before changing anything, and
//! persists the result.

use std::collections::BTreeMap;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{json, Value};
use vsw_datapath::{Datapath, DatapathError, PmdConfig, PortHandle, PortQueues, PortStats};
use vsw_flow::syntax::{format_actions, format_flow, format_match};
use vsw_flow::{parse_flow, parse_match, Classifier, FlowSyntaxError};
use vsw_netdev::{afpacket, interface, NetdevError};

use crate::offload::{OffloadPort, Offloads};
use crate::options::{
    self, OptionError, Options, PortOptions, PortType, SwitchOptions, MAX_PORT_NO,
};
use crate::protocol::{FlowInfo, PortInfo, Request, ShowInfo};
use crate::state::{
    explicit_port_options, PendingState, SavedPort, SavedState, StateError, STATE_VERSION,
};
use vsw_datapath::txbatch::FlushSetting;

#[derive(Debug, thiserror::Error)]
pub enum SwitchError {
    #[error(transparent)]
    Option(#[from] OptionError),
    #[error("dump-flows type must be offloaded, ovs or all, not '{0}'")]
    BadDumpType(String),
    #[error("bad flow: {0}")]
    Flow(#[from] FlowSyntaxError),
    #[error("bad flow on line {line}: {error}")]
    FlowLine { line: usize, error: FlowSyntaxError },
    #[error("no port named '{0}'")]
    NoSuchPort(String),
    #[error("port '{0}' already exists")]
    PortExists(String),
    #[error("port number {0} is taken by '{1}'")]
    PortNumberTaken(u32, String),
    #[error("all port numbers are in use")]
    NoFreePortNumber,
    #[error(
        "ofport_request is fixed when a port is added; del-port and add-port it again to renumber"
    )]
    Renumber,
    #[error(transparent)]
    Netdev(#[from] NetdevError),
    #[error(transparent)]
    Datapath(#[from] DatapathError),
    #[error(transparent)]
    State(#[from] StateError),
    #[error("state file {path}: {why}")]
    BadState { path: PathBuf, why: String },
    #[error("cannot set the MTU of {port} to {mtu}: {why}")]
    Mtu { port: String, mtu: u32, why: String },
    #[error("mtu_request applies to afpacket ports (the interface's MTU) and vhost-user ports")]
    MtuOnRing,
    #[error("vhost-user socket {path}: {why}")]
    VhostSocket { path: PathBuf, why: String },
    #[error("{0} is fixed when a port is added; del-port and add-port it again to change it")]
    FixedOption(&'static str),
    #[error("debug commands are off (vswd started with VSWD_FAULT_INJECTION=1 takes them)")]
    NoFaultInjection,
}

enum Link {
    Up { ifindex: u32 },
    Down { why: String },
}

struct Port {
    name: String,
    options: Options,
    parsed: PortOptions,
    stats: Arc<PortStats>,
    link: Link,
    /// Why the interface does not have the MTU asked for, when it does not.
    mtu_problem: Option<String>,
    /// What a vhost-user guest did wrong, and how it receives.
    guest: Option<Arc<vsw_netdev::vhost::GuestStatus>>,
    /// vsw's receiving socket of an afpacket port (for the offload socket filter).
    rx_socket: Option<OwnedFd>,
    /// How many times the device was opened: a new socket needs a new fast path.
    opened: u64,
}

pub struct Switch {
    dp: Datapath,
    options: Options,
    ports: BTreeMap<u32, Port>,
    state_file: PathBuf,
    socket: String,
    /// The control socket's directory: vhost-user sockets go there by default.
    run_dir: PathBuf,
    /// The offload managers of ports that name a provider.
    offloads: Offloads,
    /// Timed-out flows could not be removed (the state file could not be written).
    expiry_failing: bool,
}

fn now_ms() -> u64 {
    vsw_datapath::clock::now_ms()
}

impl Switch {
    /// Starts the datapath and restores the saved configuration. A state file that
    /// cannot be read or makes no sense is an error: nothing starts and the file is
    /// left as it is.
    pub fn start(state_file: &Path, socket: &str) -> Result<Switch, SwitchError> {
        let (saved, migrated_from) = SavedState::load(state_file)?.unwrap_or((
            SavedState {
                version: STATE_VERSION,
                ..SavedState::default()
            },
            None,
        ));
        if let Some(old) = migrated_from {
            // The file as the older vswd wrote it stays beside the new one, for going
            // back to that vswd.
            let mut name = state_file.file_name().unwrap_or_default().to_os_string();
            name.push(format!(".v{old}.bak"));
            let backup = state_file.with_file_name(name);
            if !backup.exists() {
                if let Err(e) = std::fs::copy(state_file, &backup) {
                    tracing::warn!(backup = %backup.display(), error = %e, "cannot keep a copy of the older state file");
                }
            }
            tracing::info!(
                state_file = %state_file.display(),
                from = old,
                to = STATE_VERSION,
                backup = %backup.display(),
                "state file of an older vswd migrated (written anew at the next change)"
            );
        }
        let bad = |why: String| SwitchError::BadState {
            path: state_file.to_path_buf(),
            why,
        };
        let sw_opts =
            SwitchOptions::from_options(&saved.options).map_err(|e| bad(e.to_string()))?;
        let mut ports = BTreeMap::new();
        for p in &saved.ports {
            let parsed = PortOptions::from_options(&p.options)
                .map_err(|e| bad(format!("port {}: {e}", p.name)))?;
            if p.no == 0 || p.no > MAX_PORT_NO || ports.contains_key(&p.no) {
                return Err(bad(format!(
                    "port {} has a bad or duplicate number {}",
                    p.name, p.no
                )));
            }
            ports.insert(
                p.no,
                Port {
                    name: p.name.clone(),
                    options: p.options.clone(),
                    parsed,
                    stats: Arc::new(PortStats::default()),
                    link: Link::Down {
                        why: "not attached yet".into(),
                    },
                    mtu_problem: None,
                    guest: None,
                    rx_socket: None,
                    opened: 0,
                },
            );
        }
        let numbers = |name: &str| ports.iter().find(|(_, p)| p.name == name).map(|(n, _)| *n);
        let mut classifier = Classifier::new();
        for (i, text) in saved.flows.iter().enumerate() {
            let spec =
                parse_flow(text, &numbers).map_err(|e| bad(format!("flow {}: {e}", i + 1)))?;
            classifier.insert(spec, now_ms());
        }
        let mut dp = Datapath::start(PmdConfig {
            cores: sw_opts.pmd_cores.clone(),
            pin: true,
        })?;
        dp.set_rxq_assign(sw_opts.rxq_assign)?;
        dp.set_emc_insert_inv_prob(sw_opts.emc_insert_inv_prob)?;
        dp.set_tx_flush_interval(sw_opts.tx_flush_interval)?;
        dp.set_pmd_sleep_max(sw_opts.pmd_sleep_max)?;
        dp.set_classifier(classifier)?;
        let mut sw = Switch {
            dp,
            options: saved.options,
            ports,
            state_file: state_file.to_path_buf(),
            socket: socket.to_string(),
            run_dir: Path::new(socket)
                .parent()
                .map_or_else(|| PathBuf::from("/run/vsw"), Path::to_path_buf),
            offloads: Offloads::default(),
            expiry_failing: false,
        };
        // Fast paths an earlier run left in the kernel (it was killed, or crashed)
        // forward with that run's rules: they go before anything is attached.
        for p in sw.ports.values() {
            if p.parsed.port_type == PortType::Afpacket {
                match vsw_netdev::ebpf::remove_leftovers(&p.name) {
                    Ok(0) => {}
                    Ok(n) => {
                        tracing::warn!(port = %p.name, programs = n, "removed an earlier run's offload fast path")
                    }
                    Err(e) => {
                        tracing::warn!(port = %p.name, error = %e, "cannot look for an earlier run's offload fast path")
                    }
                }
            }
        }
        let nos: Vec<u32> = sw.ports.keys().copied().collect();
        for no in nos {
            sw.try_attach(no);
        }
        sw.sync_offloads();
        Ok(sw)
    }

    pub fn pmd_cores(&self) -> Vec<usize> {
        self.dp.pmd_cores()
    }

    /// A PMD that failed (its thread panicked), and why.
    pub fn failed_pmd(&self) -> Option<(usize, String)> {
        self.dp.failed_pmd()
    }

    /// Offload managers as the options now say.
    fn sync_offloads(&mut self) {
        // The stored options were validated when they were set.
        let Ok(sw) = SwitchOptions::from_options(&self.options) else {
            return;
        };
        let ports = self.ports.iter().map(|(no, p)| OffloadPort {
            no: *no,
            name: &p.name,
            options: &p.parsed,
            ifindex: match p.link {
                Link::Up { ifindex } if ifindex != 0 => Some(ifindex),
                _ => None,
            },
            rx_socket: p.rx_socket.as_ref(),
            opened: p.opened,
        });
        self.offloads.sync(&sw, ports);
    }

    /// Takes flows the rules no longer allow out of the fast paths (at once: before
    /// the change that caused it is answered).
    fn withdraw_offloads(&mut self) {
        if self.offloads.any() {
            let rules = self.dp.classifier().rules();
            self.offloads.withdraw(&rules);
        }
    }

    /// The revalidator's offload pass, when its interval has run out.
    pub fn revalidate_offloads(&mut self) {
        if !self.offloads.any() {
            return;
        }
        let rules = self.dp.classifier().rules();
        self.offloads.revalidate(&rules, false);
    }

    /// The ports as the state file records them.
    fn saved_ports(&self) -> Vec<SavedPort> {
        self.ports
            .iter()
            .map(|(no, p)| SavedPort {
                name: p.name.clone(),
                no: *no,
                options: p.options.clone(),
            })
            .collect()
    }

    /// The state file as a command will leave it: what is now, with the options,
    /// ports or rules it changes.
    fn state_with(
        &self,
        options: Option<&Options>,
        ports: Option<Vec<SavedPort>>,
        classifier: Option<&Classifier>,
    ) -> SavedState {
        let rules = match classifier {
            Some(c) => c.rules(),
            None => self.dp.classifier().rules(),
        };
        SavedState {
            version: STATE_VERSION,
            written_by: String::new(),
            options: options.unwrap_or(&self.options).clone(),
            ports: ports.unwrap_or_else(|| self.saved_ports()),
            flows: rules.iter().map(|r| format_flow(&r.spec)).collect(),
        }
    }

    /// Writes the state a command will leave, before the command changes anything: a
    /// disk that is full or read-only refuses the command, and nothing changes.
    fn prepare(&self, next: &SavedState) -> Result<PendingState, SwitchError> {
        Ok(next.prepare(&self.state_file)?)
    }

    fn port_no(&self, name: &str) -> Option<u32> {
        self.ports
            .iter()
            .find(|(_, p)| p.name == name)
            .map(|(n, _)| *n)
    }

    /// Opens port `no`'s device and hands it to the datapath; on failure the port
    /// stays down with the reason.
    fn try_attach(&mut self, no: u32) {
        let Some(port) = self.ports.get_mut(&no) else {
            return;
        };
        let ifindex = match port.parsed.port_type {
            PortType::Ring | PortType::Tap | PortType::VhostUser | PortType::VhostUserClient => 0,
            PortType::Afpacket => match interface::index(&port.name) {
                Some(i) => i,
                None => {
                    port.link = Link::Down {
                        why: "interface does not exist".into(),
                    };
                    return;
                }
            },
        };
        // The MTU asked for is given before the device is opened (its rings are
        // sized by it); a refusal leaves the port up with the MTU it has, and says why.
        port.mtu_problem = None;
        if let (Some(mtu), PortType::Afpacket) = (port.parsed.mtu_request, port.parsed.port_type) {
            if let Err(e) = apply_mtu(&port.name, mtu) {
                tracing::warn!(port = %port.name, error = %e, "mtu_request refused");
                port.mtu_problem = Some(e.to_string());
            }
        }
        let result = open_device(&port.name, &port.parsed, &self.run_dir).and_then(|o| {
            port.guest = o.guest;
            port.rx_socket = o.rx_socket;
            port.opened += 1;
            self.dp
                .add_port(PortHandle::new(
                    no,
                    &port.name,
                    o.queues,
                    port.stats.clone(),
                ))
                .map_err(SwitchError::from)
        });
        let result = result.and_then(|()| {
            if port.parsed.tx_flush != FlushSetting::Switch {
                self.dp.set_port_tx_flush(no, port.parsed.tx_flush)?;
            }
            if port.parsed.rxq_affinity.is_empty() {
                return Ok(());
            }
            self.dp
                .set_rxq_affinity(no, port.parsed.rxq_affinity.clone())
                .map_err(SwitchError::from)
        });
        match result {
            Ok(()) => {
                tracing::info!(port = %port.name, no, ifindex, mode = %port.parsed.mode, "port attached");
                port.link = Link::Up { ifindex };
            }
            Err(e) => {
                tracing::warn!(port = %port.name, error = %e, "cannot attach port");
                port.link = Link::Down { why: e.to_string() };
            }
        }
    }

    fn detach(&mut self, no: u32, why: &str) {
        if let Some(port) = self.ports.get_mut(&no) {
            if let Link::Up { .. } = port.link {
                if let Err(e) = self.dp.remove_port(no) {
                    tracing::error!(port = %port.name, error = %e, "cannot detach port");
                }
            }
            port.link = Link::Down {
                why: why.to_string(),
            };
            // The device is gone: so is the socket an offload fast path filtered.
            port.rx_socket = None;
            port.opened += 1;
        }
    }

    /// Notices interfaces that went away or came back. Called periodically.
    pub fn check_links(&mut self) {
        let nos: Vec<u32> = self.ports.keys().copied().collect();
        let mut changed = false;
        for no in nos {
            // vsw owns ring and tap devices: they do not come and go on their own (a tap
            // moved into a namespace is no longer visible here, and still works).
            if self.ports[&no].parsed.port_type != PortType::Afpacket {
                continue;
            }
            let (name, up) = match &self.ports[&no] {
                Port {
                    name,
                    link: Link::Up { ifindex },
                    ..
                } => (name.clone(), Some(*ifindex)),
                Port { name, .. } => (name.clone(), None),
            };
            let now = interface::index(&name);
            changed |= up != now;
            match (up, now) {
                (Some(a), Some(b)) if a == b => {}
                (Some(_), _) => {
                    tracing::warn!(port = %name, "interface disappeared; port down until it is back");
                    self.detach(no, "interface disappeared");
                    if now.is_some() {
                        self.try_attach(no);
                    }
                }
                (None, Some(_)) => self.try_attach(no),
                (None, None) => {}
            }
        }
        // A port that went or came back needs its offload fast path set up anew.
        if changed {
            self.sync_offloads();
        }
    }

    /// Detaches every port (closing sockets, unmapping rings, ending promiscuous mode),
    /// after the kernel fast paths are gone: nothing forwards with this daemon's rules
    /// once it has stopped.
    pub fn shutdown(&mut self) {
        self.offloads.clear();
        let nos: Vec<u32> = self.ports.keys().copied().collect();
        for no in nos {
            self.detach(no, "vswd stopped");
        }
    }

    pub fn handle(&mut self, req: Request) -> Result<Value, SwitchError> {
        match req {
            Request::Show => Ok(json!(self.show())),
            Request::Set { options } => self.set(&options),
            Request::AddPort { name, options } => self.add_port(&name, &options),
            Request::DelPort { name } => self.del_port(&name),
            Request::SetPort { name, options } => self.set_port(&name, &options),
            Request::AddFlow { flow } => self.add_flows(&[flow]),
            Request::AddFlows { flows } => self.add_flows(&flows),
            Request::DelFlows { matching, strict } => self.del_flows(matching.as_deref(), strict),
            Request::DumpFlows { kind } => {
                let which = match kind.as_deref() {
                    None | Some("all") => None,
                    Some("offloaded") => Some(true),
                    Some("ovs") => Some(false),
                    Some(other) => {
                        return Err(SwitchError::BadDumpType(other.to_string()));
                    }
                };
                let flows: Vec<FlowInfo> = self
                    .dump_flows()
                    .into_iter()
                    .filter(|f| which.is_none_or(|w| f.offloaded == w))
                    .collect();
                Ok(json!(flows))
            }
            Request::OffloadShow => Ok(json!(self.offloads.show())),
            Request::DumpPorts => Ok(json!(self.port_infos())),
            Request::PmdStatsShow => Ok(json!(self.dp.pmd_stats())),
            Request::PmdStatsClear => {
                self.dp.clear_pmd_stats();
                Ok(Value::Null)
            }
            Request::PmdRxqShow => Ok(json!(self.dp.rxq_show())),
            Request::PmdRxqRebalance => {
                self.dp.rebalance()?;
                Ok(json!(self.dp.rxq_show()))
            }
            Request::DebugPmdFailure { core } => {
                if std::env::var("VSWD_FAULT_INJECTION").as_deref() != Ok("1") {
                    return Err(SwitchError::NoFaultInjection);
                }
                self.dp.inject_pmd_failure(core)?;
                Ok(Value::Null)
            }
        }
    }

    fn set(&mut self, words: &[String]) -> Result<Value, SwitchError> {
        let mut merged = self.options.clone();
        merged.extend(options::parse_pairs(words)?);
        let parsed = SwitchOptions::from_options(&merged)?;
        let pending = self.prepare(&self.state_with(Some(&merged), None, None))?;
        let old = SwitchOptions::from_options(&self.options).ok();
        let undo = |sw: &mut Switch| {
            if let Some(old) = &old {
                if let Err(e) = sw.apply_switch_options(old) {
                    tracing::error!(error = %e, "cannot put the switch options back");
                }
            }
        };
        if let Err(e) = self.apply_switch_options(&parsed) {
            undo(self);
            return Err(e);
        }
        let previous = std::mem::replace(&mut self.options, merged);
        if let Err(e) = pending.commit() {
            undo(self);
            self.options = previous;
            return Err(e.into());
        }
        self.sync_offloads();
        Ok(Value::Null)
    }

    /// Gives the datapath the switch-wide options it does not have yet.
    fn apply_switch_options(&mut self, parsed: &SwitchOptions) -> Result<(), SwitchError> {
        if parsed.pmd_cores != self.dp.pmd_cores() {
            self.dp.set_pmd_cores(parsed.pmd_cores.clone())?;
        }
        if parsed.rxq_assign != self.dp.rxq_assign() {
            self.dp.set_rxq_assign(parsed.rxq_assign)?;
        }
        if parsed.emc_insert_inv_prob != self.dp.emc_insert_inv_prob() {
            self.dp
                .set_emc_insert_inv_prob(parsed.emc_insert_inv_prob)?;
        }
        if parsed.tx_flush_interval != self.dp.tx_flush_interval() {
            self.dp.set_tx_flush_interval(parsed.tx_flush_interval)?;
        }
        if parsed.pmd_sleep_max != self.dp.pmd_sleep_max() {
            self.dp.set_pmd_sleep_max(parsed.pmd_sleep_max)?;
        }
        Ok(())
    }

    fn add_port(&mut self, name: &str, words: &[String]) -> Result<Value, SwitchError> {
        if self.port_no(name).is_some() {
            return Err(SwitchError::PortExists(name.to_string()));
        }
        if !interface::valid_name(name) {
            return Err(NetdevError::BadInterfaceName(name.to_string()).into());
        }
        let mut opts = options::parse_pairs(words)?;
        let parsed = PortOptions::from_options(&opts)?;
        // What the port is, written out: a later default cannot change it.
        explicit_port_options(&mut opts);
        let no = match parsed.ofport_request {
            Some(n) => {
                if let Some(p) = self.ports.get(&n) {
                    return Err(SwitchError::PortNumberTaken(n, p.name.clone()));
                }
                n
            }
            None => (1..=MAX_PORT_NO)
                .find(|n| !self.ports.contains_key(n))
                .ok_or(SwitchError::NoFreePortNumber)?,
        };
        self.check_vhost_path(name, &parsed, no)?;
        let mut ports = self.saved_ports();
        ports.push(SavedPort {
            name: name.to_string(),
            no,
            options: opts.clone(),
        });
        let pending = self.prepare(&self.state_with(None, Some(ports), None))?;
        let ifindex = match parsed.port_type {
            PortType::Ring | PortType::Tap | PortType::VhostUser | PortType::VhostUserClient => 0,
            PortType::Afpacket => interface::index(name)
                .ok_or_else(|| NetdevError::NoSuchInterface(name.to_string()))?,
        };
        // The MTU first: the device's rings are sized by it. If anything after fails,
        // the interface gets its old MTU back.
        let old_mtu = match (parsed.mtu_request, parsed.port_type) {
            (Some(_), PortType::Ring | PortType::Tap) => return Err(SwitchError::MtuOnRing),
            // A vhost-user port's MTU is vsw's own, given when the device opens.
            (Some(_), PortType::VhostUser | PortType::VhostUserClient) => None,
            (Some(mtu), PortType::Afpacket) => {
                let old = interface::mtu(name).ok();
                apply_mtu(name, mtu)?;
                old
            }
            (None, _) => None,
        };
        let put_mtu_back = move || {
            if let Some(old) = old_mtu {
                let _ = interface::set_mtu(name, old);
            }
        };
        let restore_mtu = |e: SwitchError| {
            put_mtu_back();
            e
        };
        let Opened {
            queues,
            guest,
            rx_socket,
        } = open_device(name, &parsed, &self.run_dir).map_err(restore_mtu)?;
        let stats = Arc::new(PortStats::default());
        self.dp
            .add_port(PortHandle::new(no, name, queues, stats.clone()))
            .map_err(|e| restore_mtu(e.into()))?;
        let settled = (|| -> Result<(), SwitchError> {
            if parsed.tx_flush != FlushSetting::Switch {
                self.dp.set_port_tx_flush(no, parsed.tx_flush)?;
            }
            if !parsed.rxq_affinity.is_empty() {
                self.dp.set_rxq_affinity(no, parsed.rxq_affinity.clone())?;
            }
            Ok(())
        })();
        if let Err(e) = settled {
            // Nothing changes when the port cannot be set up as asked: it goes again.
            let _ = self.dp.remove_port(no);
            return Err(restore_mtu(e));
        }
        self.ports.insert(
            no,
            Port {
                name: name.to_string(),
                options: opts,
                parsed,
                stats,
                link: Link::Up { ifindex },
                mtu_problem: None,
                guest,
                rx_socket,
                opened: 1,
            },
        );
        if let Err(e) = pending.commit() {
            self.detach(no, "not saved");
            self.ports.remove(&no);
            put_mtu_back();
            self.sync_offloads();
            return Err(e.into());
        }
        tracing::info!(port = name, no, "port added");
        self.sync_offloads();
        Ok(json!({ "no": no }))
    }

    fn del_port(&mut self, name: &str) -> Result<Value, SwitchError> {
        let no = self
            .port_no(name)
            .ok_or_else(|| SwitchError::NoSuchPort(name.to_string()))?;
        let mut ports = self.saved_ports();
        ports.retain(|p| p.no != no);
        let pending = self.prepare(&self.state_with(None, Some(ports), None))?;
        self.detach(no, "deleted");
        let port = self.ports.remove(&no);
        if let Err(e) = pending.commit() {
            // Back as it was (a guest reconnects, an interface is opened again).
            if let Some(p) = port {
                self.ports.insert(no, p);
                self.try_attach(no);
            }
            self.sync_offloads();
            return Err(e.into());
        }
        tracing::info!(port = name, no, "port deleted");
        self.sync_offloads();
        Ok(Value::Null)
    }

    fn set_port(&mut self, name: &str, words: &[String]) -> Result<Value, SwitchError> {
        let no = self
            .port_no(name)
            .ok_or_else(|| SwitchError::NoSuchPort(name.to_string()))?;
        let port = &self.ports[&no];
        let mut merged = port.options.clone();
        merged.extend(options::parse_pairs(words)?);
        let parsed = self.check_port_change(no, name, &merged)?;
        let mut ports = self.saved_ports();
        if let Some(p) = ports.iter_mut().find(|p| p.no == no) {
            p.options = merged.clone();
        }
        let pending = self.prepare(&self.state_with(None, Some(ports), None))?;
        let port = &self.ports[&no];
        let (old_options, old_parsed) = (port.options.clone(), port.parsed.clone());
        self.apply_port_change(no, name, merged, parsed)?;
        if let Err(e) = pending.commit() {
            if let Err(undo) = self.apply_port_change(no, name, old_options, old_parsed) {
                tracing::error!(port = name, error = %undo, "cannot put the port's options back");
            }
            self.sync_offloads();
            return Err(e.into());
        }
        self.sync_offloads();
        Ok(Value::Null)
    }

    /// What `merged` means for port `no`, if it is a change a port may take.
    fn check_port_change(
        &self,
        no: u32,
        name: &str,
        merged: &Options,
    ) -> Result<PortOptions, SwitchError> {
        let port = &self.ports[&no];
        let parsed = PortOptions::from_options(merged)?;
        if parsed.ofport_request.is_some_and(|n| n != no) {
            return Err(SwitchError::Renumber);
        }
        // Every port type has one receive queue so far: a pin to another is refused
        // before anything is reopened.
        if let Some((q, _)) = parsed.rxq_affinity.iter().find(|(q, _)| *q >= 1) {
            return Err(DatapathError::NoSuchQueue {
                port: name.to_string(),
                queues: 1,
                queue: *q,
            }
            .into());
        }
        if parsed.port_type != port.parsed.port_type {
            return Err(OptionError::BadValue {
                key: "type".into(),
                value: format!("{:?}", parsed.port_type).to_lowercase(),
                why: "a port's type is fixed when it is added".into(),
            }
            .into());
        }
        if parsed.mtu_request.is_some()
            && matches!(parsed.port_type, PortType::Ring | PortType::Tap)
        {
            return Err(SwitchError::MtuOnRing);
        }
        // A vhost-user port's socket is made when it is added; it is not moved or
        // remade under a connected guest.
        for (key, same) in [
            (
                "vhost-server-path",
                parsed.vhost_server_path == port.parsed.vhost_server_path,
            ),
            (
                "vhost-sock-mode",
                parsed.vhost_sock_mode == port.parsed.vhost_sock_mode,
            ),
            (
                "vhost-sock-group",
                parsed.vhost_sock_group == port.parsed.vhost_sock_group,
            ),
        ] {
            if !same {
                return Err(SwitchError::FixedOption(key));
            }
        }
        Ok(parsed)
    }

    /// Applies a checked change of port `no`'s options.
    fn apply_port_change(
        &mut self,
        no: u32,
        name: &str,
        merged: Options,
        parsed: PortOptions,
    ) -> Result<(), SwitchError> {
        let port = &self.ports[&no];
        let up = matches!(port.link, Link::Up { .. });
        if let Some(guest) = &port.guest {
            // No device to reopen: frames are held to the new MTU from the next batch.
            guest.mtu.store(
                parsed.mtu_request.unwrap_or(DEFAULT_VHOST_MTU),
                std::sync::atomic::Ordering::Relaxed,
            );
        } else if up && parsed.mtu_request != port.parsed.mtu_request {
            if let Some(mtu) = parsed.mtu_request {
                self.change_mtu(no, mtu, &parsed)?;
            }
        }
        let port = &self.ports[&no];
        let reopen = up
            && (parsed.mode != port.parsed.mode
                || parsed.ring_flows != port.parsed.ring_flows
                || parsed.ring_rate != port.parsed.ring_rate
                || parsed.ring_frame_size != port.parsed.ring_frame_size);
        // The new device is opened before the old one is let go, so a failure changes nothing.
        let queues = if reopen {
            Some(open_device(name, &parsed, &self.run_dir)?)
        } else {
            None
        };
        // Only afpacket and ring options reopen a device (a vhost-user port keeps its
        // socket and guest).
        let mut new_socket = None;
        if let Some(o) = queues {
            self.dp.remove_port(no)?;
            let stats = self.ports[&no].stats.clone();
            self.dp
                .add_port(PortHandle::new(no, name, o.queues, stats))?;
            new_socket = Some(o.rx_socket);
        }
        if up && (reopen || parsed.rxq_affinity != port.parsed.rxq_affinity) {
            self.dp.set_rxq_affinity(no, parsed.rxq_affinity.clone())?;
        }
        if up && (reopen || parsed.tx_flush != port.parsed.tx_flush) {
            self.dp.set_port_tx_flush(no, parsed.tx_flush)?;
        }
        let port = self.ports.get_mut(&no).expect("checked above");
        if let Some(socket) = new_socket {
            port.rx_socket = socket;
            port.opened += 1;
        }
        port.options = merged;
        port.parsed = parsed;
        Ok(())
    }

    /// Gives port `no`'s interface a new MTU at the right point of the port's life:
    /// the PMDs let go of its queues (sending what they staged), the MTU changes, and
    /// the device opens again with rings for the new size. If the kernel refuses the
    /// MTU, the port opens again as it was and the error says why.
    fn change_mtu(&mut self, no: u32, mtu: u32, parsed: &PortOptions) -> Result<(), SwitchError> {
        let port = &self.ports[&no];
        let name = port.name.clone();
        let old = port.parsed.clone();
        let stats = port.stats.clone();
        self.dp.remove_port(no)?;
        let changed = apply_mtu(&name, mtu);
        let options = if changed.is_ok() { parsed } else { &old };
        let mut new_socket = None;
        let reopened = open_device(&name, options, &self.run_dir).and_then(|o| {
            new_socket = o.rx_socket;
            self.dp
                .add_port(PortHandle::new(no, &name, o.queues, stats))
                .map_err(SwitchError::from)
        });
        let port = self.ports.get_mut(&no).expect("checked above");
        port.rx_socket = new_socket;
        port.opened += 1;
        if let Err(e) = reopened {
            port.link = Link::Down { why: e.to_string() };
            return Err(e);
        }
        if !options.rxq_affinity.is_empty() {
            self.dp.set_rxq_affinity(no, options.rxq_affinity.clone())?;
        }
        let port = self.ports.get_mut(&no).expect("checked above");
        match changed {
            Ok(()) => {
                tracing::info!(port = %name, mtu, "MTU changed");
                port.mtu_problem = None;
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    fn add_flows(&mut self, texts: &[String]) -> Result<Value, SwitchError> {
        let names = |n: &str| self.port_no(n);
        let mut specs = Vec::with_capacity(texts.len());
        for (i, t) in texts.iter().enumerate() {
            let spec = parse_flow(t, &names).map_err(|error| {
                if texts.len() == 1 {
                    SwitchError::Flow(error)
                } else {
                    SwitchError::FlowLine { line: i + 1, error }
                }
            })?;
            specs.push(spec);
        }
        let mut classifier = (*self.dp.classifier()).clone();
        let now = now_ms();
        for spec in specs {
            classifier.insert(spec, now);
        }
        self.replace_rules(classifier)?;
        Ok(json!({ "added": texts.len() }))
    }

    fn del_flows(&mut self, matching: Option<&str>, strict: bool) -> Result<Value, SwitchError> {
        let (priority, m) = match matching {
            Some(text) => parse_match(text, &|n: &str| self.port_no(n))?,
            None => (None, vsw_flow::Match::any()),
        };
        let mut classifier = (*self.dp.classifier()).clone();
        let removed = classifier.remove(&m, priority, strict);
        self.replace_rules(classifier)?;
        Ok(json!({ "removed": removed }))
    }

    /// Puts `classifier`'s rules in place of the running ones: saved first, taken up
    /// by every PMD, then out of the fast paths whatever they no longer allow.
    fn replace_rules(&mut self, classifier: Classifier) -> Result<(), SwitchError> {
        let pending = self.prepare(&self.state_with(None, None, Some(&classifier)))?;
        let old = self.dp.classifier();
        self.dp.set_classifier(classifier)?;
        self.withdraw_offloads();
        if let Err(e) = pending.commit() {
            if let Err(undo) = self.dp.set_classifier((*old).clone()) {
                tracing::error!(error = %undo, "cannot put the rules back");
            }
            return Err(e.into());
        }
        Ok(())
    }

    /// Removes rules whose idle or hard timeout ran out. Called periodically.
    pub fn expire_flows(&mut self) {
        let current = self.dp.classifier();
        let now = now_ms();
        if !current.any_expired(now) {
            return;
        }
        // What a fast path forwarded counts as use: looked at before anything goes.
        if self.offloads.any() {
            self.offloads.note_activity(&current.rules(), now);
            if !current.any_expired(now) {
                return;
            }
        }
        let mut classifier = (*current).clone();
        let gone = classifier.remove_expired(now);
        match self.replace_rules(classifier) {
            Ok(()) => {
                self.expiry_failing = false;
                for r in &gone {
                    tracing::info!(flow = %format_flow(&r.spec), "flow timed out");
                }
            }
            // Until the state can be written, the flows stay (the file, the switch
            // and what `dump-flows` says agree); said once, not every look.
            Err(e) if !self.expiry_failing => {
                self.expiry_failing = true;
                tracing::error!(error = %e, "timed-out flows stay until the state file can be written");
            }
            Err(_) => {}
        }
    }

    fn dump_flows(&self) -> Vec<FlowInfo> {
        let now = now_ms();
        self.dp
            .classifier()
            .rules()
            .iter()
            .map(|r| {
                let o = self.offloads.flow(r);
                FlowInfo {
                    flow: format_flow(&r.spec),
                    priority: r.spec.priority,
                    matching: format_match(&r.spec.matcher),
                    actions: format_actions(&r.spec.actions),
                    n_packets: o.packets,
                    n_bytes: r.stats.bytes(),
                    duration_ms: r.duration_ms(now),
                    idle_age_s: r.idle_age_s(now),
                    idle_timeout: r.spec.idle_timeout,
                    hard_timeout: r.spec.hard_timeout,
                    offloaded: o.offloaded,
                    offload_status: o.status,
                    pps: o.pps,
                }
            })
            .collect()
    }

    fn port_infos(&self) -> Vec<PortInfo> {
        self.ports
            .iter()
            .map(|(no, p)| PortInfo {
                no: *no,
                name: p.name.clone(),
                status: match &p.link {
                    Link::Up { .. } => "up".into(),
                    Link::Down { why } => format!("down: {why}"),
                },
                options: {
                    let mut o: Vec<(String, String)> = p.options.clone().into_iter().collect();
                    if !p.options.contains_key("afpacket-mode")
                        && p.parsed.port_type == PortType::Afpacket
                    {
                        o.push(("afpacket-mode".into(), p.parsed.mode.to_string()));
                    }
                    o
                },
                stats: p.stats.view(),
                mtu: match p.parsed.port_type {
                    PortType::Afpacket => interface::mtu(&p.name).ok(),
                    PortType::Tap => interface::mtu(&p.name).ok(),
                    PortType::VhostUser | PortType::VhostUserClient => p
                        .guest
                        .as_ref()
                        .map(|g| g.mtu.load(std::sync::atomic::Ordering::Relaxed)),
                    PortType::Ring => None,
                },
                mtu_problem: p.mtu_problem.clone(),
                vhost_guest: p.guest.as_ref().map(|g| {
                    let link = g.link_up.load(std::sync::atomic::Ordering::Relaxed);
                    format!(
                        "link {}, features {:#x}, {}; notifications {}, too long {}, bad chains {}, bad queues {}, no buffer {}, memory faults {}",
                        if link { "up" } else { "down" },
                        g.features.load(std::sync::atomic::Ordering::Relaxed),
                        g.describe_rx_queues(),
                        g.notifications.load(std::sync::atomic::Ordering::Relaxed),
                        g.too_long.load(std::sync::atomic::Ordering::Relaxed),
                        g.bad_chains.load(std::sync::atomic::Ordering::Relaxed),
                        g.bad_queues.load(std::sync::atomic::Ordering::Relaxed),
                        g.no_buffer.load(std::sync::atomic::Ordering::Relaxed),
                        g.memory_faults(),
                    )
                }),
                vhost_server_path: matches!(
                    p.parsed.port_type,
                    PortType::VhostUser | PortType::VhostUserClient
                ).then(|| {
                    vhost_path(&p.name, &p.parsed, &self.run_dir)
                        .display()
                        .to_string()
                }),
                tx_flush_interval_us: self.dp.tx_flush_of(*no).0,
                tx_flush_interval_from: format!("{:?}", self.dp.tx_flush_of(*no).1).to_lowercase(),
            })
            .collect()
    }

    fn show(&self) -> ShowInfo {
        ShowInfo {
            options: self.options.clone().into_iter().collect(),
            pmd_cores: self.dp.pmd_cores(),
            pmd_rxq_assign: self.dp.rxq_assign().to_string(),
            emc_insert_inv_prob: self.dp.emc_insert_inv_prob(),
            socket: self.socket.clone(),
            state_file: self.state_file.display().to_string(),
            ports: self.port_infos(),
            flows: self.dp.classifier().len(),
        }
    }
}

/// Sets interface `name`'s MTU, unless it has it already.
fn apply_mtu(name: &str, mtu: u32) -> Result<(), SwitchError> {
    if interface::mtu(name).ok() == Some(mtu) {
        return Ok(());
    }
    interface::set_mtu(name, mtu).map_err(|e| SwitchError::Mtu {
        port: name.to_string(),
        mtu,
        why: e.to_string(),
    })
}

/// A vhost-user port's MTU without `mtu_request`: what a guest's frontend assumes
/// without `host_mtu`.
const DEFAULT_VHOST_MTU: u32 = 1500;

/// Where a vhostuser port listens: its `vhost-server-path`, or `<run dir>/<name>.sock`.
pub fn vhost_path(name: &str, o: &PortOptions, run_dir: &Path) -> PathBuf {
    o.vhost_server_path
        .as_ref()
        .map_or_else(|| run_dir.join(format!("{name}.sock")), PathBuf::from)
}

impl Switch {
    /// Refuses a vhost-user socket path that would take something that is not the
    /// port's: the control socket, another port's socket, or a file that is not a
    /// socket (vsw replaces only sockets, and only ones nobody listens on).
    fn check_vhost_path(&self, name: &str, o: &PortOptions, no: u32) -> Result<(), SwitchError> {
        if !matches!(o.port_type, PortType::VhostUser | PortType::VhostUserClient) {
            return Ok(());
        }
        let path = vhost_path(name, o, &self.run_dir);
        let refuse = |why: String| {
            Err(SwitchError::VhostSocket {
                path: path.clone(),
                why,
            })
        };
        if same_path(&path, Path::new(&self.socket)) {
            return refuse("that is vswd's control socket".into());
        }
        let taken = self.ports.iter().find(|(n, p)| {
            **n != no
                && matches!(
                    p.parsed.port_type,
                    PortType::VhostUser | PortType::VhostUserClient
                )
                && same_path(&vhost_path(&p.name, &p.parsed, &self.run_dir), &path)
        });
        if let Some((_, p)) = taken {
            return refuse(format!("port {} uses it", p.name));
        }
        if o.port_type == PortType::VhostUser {
            use vsw_netdev::unix_socket::{path_use, PathUse};
            match path_use(&path) {
                PathUse::NotASocket => {
                    return refuse("exists and is not a socket; vsw replaces only sockets".into())
                }
                PathUse::LiveSocket => return refuse("another process listens on it".into()),
                PathUse::Free | PathUse::StaleSocket => {}
            }
        }
        Ok(())
    }
}

/// Whether two paths name the same file, as far as can be told before either exists
/// (their directories resolved).
fn same_path(a: &Path, b: &Path) -> bool {
    let resolve = |p: &Path| -> PathBuf {
        match (p.parent(), p.file_name()) {
            (Some(dir), Some(name)) => std::fs::canonicalize(if dir.as_os_str().is_empty() {
                Path::new(".")
            } else {
                dir
            })
            .map(|d| d.join(name))
            .unwrap_or_else(|_| p.to_path_buf()),
            _ => p.to_path_buf(),
        }
    };
    a == b || resolve(a) == resolve(b)
}

/// A device's queues, for a vhost-user port what its guest is up to, and for an
/// afpacket port a handle on its receiving socket.
struct Opened {
    queues: PortQueues,
    guest: Option<Arc<vsw_netdev::vhost::GuestStatus>>,
    rx_socket: Option<OwnedFd>,
}

/// Opens a port's device as its options say.
fn open_device(name: &str, o: &PortOptions, run_dir: &Path) -> Result<Opened, SwitchError> {
    let queues = match o.port_type {
        PortType::VhostUser | PortType::VhostUserClient => {
            let path = vhost_path(name, o, run_dir);
            let (q, g) = if o.port_type == PortType::VhostUser {
                let gid = match &o.vhost_sock_group {
                    Some(g) => Some(vsw_netdev::unix_socket::group_id(g).map_err(|e| {
                        SwitchError::VhostSocket {
                            path: path.clone(),
                            why: e.to_string(),
                        }
                    })?),
                    None => None,
                };
                vsw_netdev::vhost::open_server(&path, o.vhost_sock_mode, gid)?
            } else {
                vsw_netdev::vhost::open_client(&path)?
            };
            g.mtu.store(
                o.mtu_request.unwrap_or(DEFAULT_VHOST_MTU),
                std::sync::atomic::Ordering::Relaxed,
            );
            return Ok(Opened {
                queues: q,
                guest: Some(g),
                rx_socket: None,
            });
        }
        PortType::Afpacket => {
            let (queues, socket) = afpacket::open_tapped(name, o.mode)?;
            return Ok(Opened {
                queues,
                guest: None,
                rx_socket: Some(socket),
            });
        }
        PortType::Tap => vsw_netdev::tap::open(name)?,
        PortType::Ring => {
            vsw_datapath::ring::paced_ring_port(o.ring_flows, o.ring_frame_size, o.ring_rate)
        }
    };
    Ok(Opened {
        queues,
        guest: None,
        rx_socket: None,
    })
}
