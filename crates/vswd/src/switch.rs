//! The switch as the control plane sees it: ports by name, options, flows. Applies
//! commands to the datapath, validating each completely before changing anything, and
//! persists the result. Ports are known through their class (`vsw_netdev::class`):
//! nothing here depends on what kind of device a port is.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use vsw_datapath::txbatch::FlushSetting;
use vsw_datapath::{
    format_dp_actions, DatapathError, DpAction, DpFlow, PortHandle, PortQueues, PortStats,
};
use vsw_flow::syntax::{format_actions, format_flow, format_match};
use vsw_flow::{parse_flow, parse_match, FlowSyntaxError, Pipeline, Selection};
use vsw_netdev::class::{
    join_and, ClassEnv, MtuHandling, OnChange, PortClasses, PortDevice, PortError, Presence,
};
use vsw_netdev::{interface, NetdevError};
use vsw_ofproto::{Backer, BackerError, BridgeSlot, Ofproto};

use crate::dpif::{DaemonSettings, Dpif};

use crate::journal::{Journal, JournalEntry};
use crate::offload::{OffloadPort, Offloads};
use crate::options::{
    self, FailMode, OptionError, Options, PortOptions, SwitchOptions, DEFAULT_INACTIVITY_PROBE_MS,
    MAX_PORT_NO,
};
use crate::protocol::{
    DpFlowInfo, DpifInfo, FlowInfo, GroupInfo, MeterInfo, PortInfo, Request, ShowInfo,
};
use crate::state::{
    PendingState, SavedPort, SavedState, StateError, LEARNING_SWITCH_FLOW, STATE_VERSION,
};

#[derive(Debug, thiserror::Error)]
pub enum SwitchError {
    #[error(transparent)]
    Option(#[from] OptionError),
    #[error("dump-flows type must be offloaded, ovs or all, not '{0}'")]
    BadDumpType(String),
    #[error("bad flow: {0}")]
    Flow(#[from] FlowSyntaxError),
    #[error("{0}")]
    Group(#[from] vsw_flow::GroupError),
    #[error("the flow hands packets to group {0}, which does not exist")]
    NoSuchGroup(u32),
    #[error("{0}")]
    Meter(#[from] vsw_flow::MeterError),
    #[error("the flow uses meter {0}, which does not exist")]
    NoSuchMeter(u32),
    #[error("bad flow on line {line}: {error}")]
    FlowLine { line: usize, error: FlowSyntaxError },
    #[error("no port named '{0}'")]
    NoSuchPort(String),
    #[error("port '{0}' already exists")]
    PortExists(String),
    #[error("port number {0} is taken by '{1}'")]
    PortNumberTaken(u32, String),
    #[error("the datapath did not take the port: {0}")]
    NotTaken(String),
    #[error("the configuration cannot be saved: {0}")]
    Unsaved(String),
    #[error("all port numbers are in use")]
    NoFreePortNumber,
    #[error(
        "ofport_request is fixed when a port is added; del-port and add-port it again to renumber"
    )]
    Renumber,
    #[error(transparent)]
    Netdev(#[from] NetdevError),
    #[error(transparent)]
    Port(#[from] PortError),
    #[error(transparent)]
    Datapath(#[from] DatapathError),
    #[error(transparent)]
    Backer(#[from] BackerError),
    #[error(transparent)]
    State(#[from] StateError),
    #[error("state file {path}: {why}")]
    BadState { path: PathBuf, why: String },
    #[error("mtu_request applies to {applies_to} ports, not to {class} ports")]
    MtuNotSet {
        class: &'static str,
        applies_to: String,
    },
    #[error("vhost-user socket {path}: {why}")]
    SocketTaken { path: PathBuf, why: String },
    #[error("{0} is fixed when a port is added; del-port and add-port it again to change it")]
    FixedOption(&'static str),
    #[error("debug commands are off (vswd started with VSWD_FAULT_INJECTION=1 takes them)")]
    NoFaultInjection,
    #[error("the flow overlaps one of its table and priority")]
    Overlap,
    #[error("the {0} is too large to describe in one OpenFlow message (64 KiB): no controller could read it back")]
    TooLarge(&'static str),
}

/// One flow-mod, as [`Switch::flow_changes`] carries it out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FlowChange {
    /// `add-flow`; `check_overlap`: refused if it overlaps a rule of its table and
    /// priority (OpenFlow's CHECK_OVERLAP).
    Add { flow: String, check_overlap: bool },
    /// `del-flows`: the rules the selection picks (`None`: all).
    Delete {
        matching: Option<String>,
        strict: bool,
    },
    /// `mod-flows`: the selected rules get the flow's actions.
    Modify {
        flow: String,
        strict: bool,
        reset_counts: bool,
    },
}

enum Link {
    Up { ifindex: u32 },
    Down { why: String },
}

struct Port {
    name: String,
    options: Options,
    parsed: PortOptions,
    /// The device, as its class handles it.
    device: Box<dyn PortDevice>,
    stats: Arc<PortStats>,
    link: Link,
    /// Why the port does not have the MTU asked for, when it does not.
    mtu_problem: Option<String>,
    /// How many times the device was opened: a new socket needs a new fast path.
    opened: u64,
    /// Its number in the datapath, while it has one (from when its device is
    /// handed to the datapath until the port is detached).
    dp_no: Option<u32>,
}

/// One switch's counters at one moment, as `/metrics` exports them.
#[derive(Debug)]
pub struct SwitchMetrics {
    pub ports: Vec<PortInfo>,
    pub pmds: Vec<vsw_protocol::PmdStatsView>,
    pub flow_limit: u64,
    /// Each port's offload provider (`offload-show`).
    pub offloads: Vec<vsw_protocol::OffloadShowView>,
    /// How long control requests took, by kind.
    pub control_latency: Vec<(&'static str, crate::latency::LatencyHistogram)>,
}

pub struct Switch {
    /// The datapath this bridge's ports are in.
    dpif: Arc<Dpif>,
    /// This bridge's number in the datapath's backer.
    slot: BridgeSlot,
    /// The pipeline, MAC learning and translation: the bridge's slow path.
    ofproto: Arc<Ofproto>,
    /// The ports NORMAL and FLOOD send to, as last told to `ofproto`.
    flood_ports: Vec<u32>,
    /// The datapath's count of retired flows when the offload side last looked.
    retired_seen: u64,
    options: Options,
    ports: BTreeMap<u32, Port>,
    /// The kinds of port there are.
    classes: PortClasses,
    /// What ports' classes need to know of where vswd runs.
    env: ClassEnv,
    state_file: PathBuf,
    socket: String,
    /// The offload managers of ports that name a provider.
    offloads: Offloads,
    /// Timed-out flows could not be removed (the state file could not be written).
    expiry_failing: bool,
    /// Rules that went and asked to be told of (`send_flow_rem`), for the OpenFlow
    /// controllers; at most [`MAX_REMOVED_QUEUED`], the oldest dropped.
    removed: VecDeque<RemovedFlow>,
    /// Rule changes since the state file was last written whole.
    journal: Journal,
    /// The state file's size when last written whole.
    state_bytes: u64,
    /// Rules changed (timed out) that neither file says yet: the disk refused them.
    /// The state file is written whole as soon as it can be.
    unsaved_rules: bool,
    /// When writing them was last tried.
    unsaved_tried_ms: u64,
    /// The state file is this vswd's, whole (not missing, nor an older schema's
    /// awaiting its first write): only then do rule changes go to the journal.
    file_current: bool,
    /// Whether the configuration is saved (the state file and its journal): not when
    /// an OVSDB server holds it.
    persist: bool,
    /// The bridge's name: its management socket and its `internal` port (OpenFlow's
    /// LOCAL) are named after it.
    bridge: String,
    /// How long requests took to answer, by kind (for `/metrics`).
    latencies: crate::latency::Latencies,
}

/// A rule change goes to the journal while it holds fewer bytes than this and than
/// twice the state file; then the state file is written whole (and the journal
/// emptied): each change costs what it says, a full write's cost is shared by the
/// changes that make as many bytes, and the disk holds at most about three times
/// the state file.
const JOURNAL_MIN_BYTES: u64 = 1 << 20;

/// Devices opened together at most, each on a thread of its own.
const OPEN_AT_ONCE: usize = 64;

/// Drops these at once, each on a thread of its own (at most [`OPEN_AT_ONCE`]
/// together): dropping a port's last handle closes its sockets, which waits in the
/// kernel.
fn drop_at_once<T: Send>(mut items: Vec<T>) {
    if items.len() <= 1 {
        return;
    }
    while !items.is_empty() {
        let chunk: Vec<T> = items.drain(..items.len().min(OPEN_AT_ONCE)).collect();
        std::thread::scope(|s| {
            for item in chunk {
                // A thread that cannot be made drops its item here, on this one
                // (the closure it was given goes, and the item with it).
                let _ = std::thread::Builder::new()
                    .name("vsw-close".into())
                    .spawn_scoped(s, move || drop(item));
            }
        });
    }
}

/// A port being added: in the table, not opened yet.
struct StagedPort {
    no: u32,
    ifindex: u32,
    /// The interface's MTU before the port asked for another.
    old_mtu: Option<u32>,
}

/// A rule that went, and why.
#[derive(Clone, Debug)]
pub struct RemovedFlow {
    pub rule: Arc<vsw_flow::Rule>,
    pub why: Removal,
    pub at_ms: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Removal {
    IdleTimeout,
    HardTimeout,
    Deleted,
    /// Its group was deleted.
    GroupDeleted,
    /// Its meter was deleted.
    MeterDeleted,
}

/// A meter as the datapath runs it: each band's burst in its units.
fn meter_config(m: &vsw_flow::MeterSpec) -> vsw_datapath::meter::MeterConfig {
    use vsw_datapath::meter::{BandAction, BandConfig, MeterConfig};
    MeterConfig {
        pktps: m.pktps,
        bands: m
            .bands
            .iter()
            .map(|b| BandConfig {
                action: match b.kind {
                    vsw_flow::BandType::Drop => BandAction::Drop,
                    vsw_flow::BandType::DscpRemark(p) => BandAction::Remark(p),
                },
                rate: b.rate,
                burst: m.burst_of(b),
            })
            .collect(),
    }
}

/// Carries out one journal entry on rules being restored: its removals (each rule
/// by its table, priority and match), then its additions.
fn replay_entry(
    pipeline: &mut Pipeline,
    e: &JournalEntry,
    ports: &dyn vsw_flow::PortResolver,
) -> Result<(), String> {
    for t in &e.del {
        let spec = parse_flow(t, ports).map_err(|err| err.to_string())?;
        let selection = Selection {
            table: Some(spec.table),
            priority: Some(spec.priority),
            matcher: spec.matcher,
            ..Selection::all()
        };
        pipeline.remove(&selection, true);
    }
    for t in &e.add {
        let spec = parse_flow(t, ports).map_err(|err| err.to_string())?;
        pipeline.insert(spec, now_ms());
    }
    Ok(())
}

/// Puts saved groups back (in whatever order they were saved: one whose buckets
/// name a group not back yet waits for it).
fn restore_groups(
    pipeline: &mut Pipeline,
    texts: &[String],
    ports: &dyn vsw_flow::PortResolver,
) -> Result<(), String> {
    let mut waiting = Vec::new();
    for (i, text) in texts.iter().enumerate() {
        let spec =
            vsw_flow::parse_group(text, ports).map_err(|e| format!("group {}: {e}", i + 1))?;
        waiting.push(spec);
    }
    while !waiting.is_empty() {
        let before = waiting.len();
        let mut last = None;
        waiting.retain(
            |spec| match pipeline.set_group(spec.clone(), false, now_ms()) {
                Ok(()) => false,
                Err(e) => {
                    last = Some(e);
                    true
                }
            },
        );
        if waiting.len() == before {
            return Err(format!(
                "groups: {}",
                last.map(|e| e.to_string()).unwrap_or_default()
            ));
        }
    }
    Ok(())
}

/// The bridge's name unless told otherwise: named as Open vSwitch's usual first one.
pub const BRIDGE_NAME: &str = "br0";

/// Removed rules kept for the controllers at most (nobody may be taking them).
pub const MAX_REMOVED_QUEUED: usize = 10_000;

fn now_ms() -> u64 {
    vsw_datapath::clock::now_ms()
}

impl Switch {
    /// Starts the datapath with vsw's port classes and restores the saved
    /// configuration. A state file that cannot be read or makes no sense is an error:
    /// nothing starts and the file is left as it is.
    pub fn start(state_file: &Path, socket: &str) -> Result<Switch, SwitchError> {
        Switch::start_with(state_file, socket, PortClasses::standard())
    }

    /// [`Switch::start`] as bridge `bridge` (its `internal` port of that name is
    /// LOCAL, its tunnel ports read its TLV map).
    pub fn start_bridge(
        state_file: &Path,
        socket: &str,
        bridge: &str,
    ) -> Result<Switch, SwitchError> {
        Switch::start_from(
            Some(state_file),
            socket,
            PortClasses::standard(),
            bridge,
            &Options::new(),
            None,
        )
    }

    /// [`Switch::start`] with these port classes.
    pub fn start_with(
        state_file: &Path,
        socket: &str,
        classes: PortClasses,
    ) -> Result<Switch, SwitchError> {
        Switch::start_from(
            Some(state_file),
            socket,
            classes,
            BRIDGE_NAME,
            &Options::new(),
            None,
        )
    }

    /// Bridge `bridge`, whose configuration another keeps (an OVSDB server): it
    /// starts as a new switch with `options` (its fail mode and controllers, so
    /// that a secure bridge never starts as a learning switch) and writes no state
    /// file. It joins datapath `dpif` when given one (the other bridges' of its
    /// daemon), else starts a datapath of its own with its options.
    pub fn start_unsaved(
        socket: &str,
        classes: PortClasses,
        bridge: &str,
        options: &Options,
        dpif: Option<Arc<Dpif>>,
    ) -> Result<Switch, SwitchError> {
        Switch::start_from(None, socket, classes, bridge, options, dpif)
    }

    fn start_from(
        saved_in: Option<&Path>,
        socket: &str,
        classes: PortClasses,
        bridge: &str,
        initial: &Options,
        dpif: Option<Arc<Dpif>>,
    ) -> Result<Switch, SwitchError> {
        let persist = saved_in.is_some();
        // Never written when not persisting: a name in the run directory, one per
        // bridge, that the datapath id and messages can show.
        let unsaved = Path::new(socket).with_file_name(format!("{bridge}.unsaved"));
        let state_file = saved_in.unwrap_or(&unsaved);
        let loaded = match saved_in {
            Some(f) => SavedState::load(f)?,
            None => None,
        };
        let file_current = matches!(loaded, Some((_, None)));
        let (saved, migrated_from) = match loaded {
            Some(l) => l,
            None => {
                // A new switch is a learning switch (one rule sends everything to
                // NORMAL) only while it is standalone with no controller.
                let wanted =
                    SwitchOptions::from_options(initial).map_err(|e| SwitchError::BadState {
                        path: state_file.to_path_buf(),
                        why: e.to_string(),
                    })?;
                let flows = if wanted.wants_learning_flow() {
                    vec![LEARNING_SWITCH_FLOW.into()]
                } else {
                    Vec::new()
                };
                let state = SavedState {
                    version: STATE_VERSION,
                    options: initial.clone(),
                    flows,
                    ..SavedState::default()
                };
                (state, None)
            }
        };
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
        let env = ClassEnv {
            run_dir: Path::new(socket)
                .parent()
                .map_or_else(|| PathBuf::from("/run/vsw"), Path::to_path_buf),
            bpf_pin_root: crate::offload::pin_root().to_path_buf(),
            bridge: bridge.to_string(),
        };
        let sw_opts =
            SwitchOptions::from_options(&saved.options).map_err(|e| bad(e.to_string()))?;
        let mut ports = BTreeMap::new();
        for p in &saved.ports {
            let (parsed, device) = configure(&classes, &env, &p.name, &p.options)
                .map_err(|e| bad(format!("port {}: {e}", p.name)))?;
            let local = p.no == vsw_flow::LOCAL_PORT && parsed.class.name() == "internal";
            if p.no == 0 || (p.no > MAX_PORT_NO && !local) || ports.contains_key(&p.no) {
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
                    device,
                    stats: Arc::new(PortStats::default()),
                    link: Link::Down {
                        why: "not attached yet".into(),
                    },
                    mtu_problem: None,
                    opened: 0,
                    dp_no: None,
                },
            );
        }
        let numbers = |name: &str| ports.iter().find(|(_, p)| p.name == name).map(|(n, _)| *n);
        let mut pipeline = Pipeline::new();
        for (i, text) in saved.meters.iter().enumerate() {
            let spec =
                vsw_flow::parse_meter(text).map_err(|e| bad(format!("meter {}: {e}", i + 1)))?;
            pipeline
                .set_meter(spec, false, now_ms())
                .map_err(|e| bad(format!("meter {}: {e}", i + 1)))?;
        }
        restore_groups(&mut pipeline, &saved.groups, &numbers).map_err(bad)?;
        for (i, text) in saved.flows.iter().enumerate() {
            let spec =
                parse_flow(text, &numbers).map_err(|e| bad(format!("flow {}: {e}", i + 1)))?;
            pipeline.insert(spec, now_ms());
        }
        // The rule changes made since the file was written whole.
        let (journal, replay) = Journal::open(state_file, saved.journal_seq, saved.generation)?;
        let state_bytes = std::fs::metadata(state_file).map_or(0, |m| m.len());
        for e in &replay {
            replay_entry(&mut pipeline, e, &numbers)
                .map_err(|why| bad(format!("journal entry {}: {why}", e.seq)))?;
        }
        // A datapath of its own, or the daemon's: whose settings stand (a bridge
        // joining it brings the same ones: the database's `Open_vSwitch` row).
        let dpif = match dpif {
            Some(d) => d,
            None => Dpif::start(&DaemonSettings::of(&sw_opts))?,
        };
        let (slot, ofproto) = dpif.backer().add_bridge(bridge, pipeline)?;
        // Set before the first packet (the bridge has no port in the datapath yet):
        // a restart with it set forwards nothing until the flows are restored and it
        // is cleared.
        ofproto.set_restore_wait(sw_opts.flow_restore_wait);
        for (m, _) in ofproto.pipeline().meters() {
            dpif.dp()
                .set_meter(Backer::dp_meter(slot, m.id), Some(&meter_config(m)));
        }
        let mut sw = Switch {
            dpif,
            slot,
            ofproto,
            flood_ports: Vec::new(),
            retired_seen: 0,
            options: saved.options,
            ports,
            classes,
            env,
            state_file: state_file.to_path_buf(),
            socket: socket.to_string(),
            offloads: Offloads::default(),
            expiry_failing: false,
            removed: VecDeque::new(),
            journal,
            state_bytes,
            unsaved_rules: false,
            unsaved_tried_ms: 0,
            file_current,
            persist,
            bridge: bridge.to_string(),
            latencies: crate::latency::Latencies::default(),
        };
        // What an earlier run left on the devices (a kernel fast path forwarding with
        // that run's rules, when it was killed) goes before anything is attached.
        for p in sw.ports.values() {
            p.parsed.class.remove_leftovers(&p.name);
        }
        let nos: Vec<u32> = sw.ports.keys().copied().collect();
        for no in nos {
            sw.try_attach(no);
        }
        sw.sync_flood_ports();
        sw.sync_offloads();
        Ok(sw)
    }

    pub fn pmd_cores(&self) -> Vec<usize> {
        self.dpif.dp().pmd_cores()
    }

    /// A PMD that failed (its thread panicked), and why.
    pub fn failed_pmd(&self) -> Option<(usize, String)> {
        self.dpif.dp().failed_pmd()
    }

    /// Offload managers as the options now say.
    fn sync_offloads(&mut self) {
        // The stored options were validated when they were set.
        let Ok(sw) = SwitchOptions::from_options(&self.options) else {
            return;
        };
        // The offload side works in datapath numbers (the datapath flows' and their
        // actions'); a port not in the datapath has none to offload.
        let ports = self.ports.values().filter_map(|p| {
            Some(OffloadPort {
                no: p.dp_no?,
                name: &p.name,
                options: &p.parsed,
                ifindex: match p.link {
                    Link::Up { ifindex } if ifindex != 0 => Some(ifindex),
                    _ => None,
                },
                rx_socket: p.device.offload_socket(),
                opened: p.opened,
            })
        });
        self.offloads.sync(&sw, ports);
        // Flows received on a port with a provider are made exact enough for it.
        let of_ports = self
            .offloads
            .port_numbers()
            .into_iter()
            .filter_map(|dp| self.of_no(dp))
            .collect();
        if self.ofproto.set_offload_ports(of_ports) {
            if let Err(e) = self.revalidate_now() {
                tracing::error!(error = %e, "cannot revalidate the datapath flows");
            }
        }
    }

    /// Takes out of the fast paths the entries of datapath flows the revalidator
    /// retired (at once: a rule change calls this before it is answered, after its
    /// revalidator pass).
    fn withdraw_offloads(&mut self) {
        if self.offloads.any() {
            let flows = self.dpif.dp().dump_flows();
            self.offloads.withdraw(&flows);
            self.hand_back_offloads(false);
        }
    }

    /// Entries an earlier run left forwarding in the kernel (`offload-persist`) are
    /// checked against the pipeline once it is restored (never while
    /// `flow-restore-wait` holds forwarding): what it would not give leaves the fast
    /// path now, what it gives gets its datapath flow cached (`install`: once an
    /// offload interval, not at every rule change), which the next offload pass puts
    /// over the entry in place. Runs until no entry is left adopted.
    fn hand_back_offloads(&mut self, install: bool) {
        if !self.offloads.any_adopted() || self.ofproto.restore_wait() {
            return;
        }
        let upcall = self.dpif.dp().upcall();
        let now = vsw_datapath::clock::now_ms();
        let keys = self.offloads.hand_back(|key| {
            let t = upcall.translate(key, now, false);
            vsw_datapath::offload::offloadable(&DpFlow::new(0, 0, key, t, now))
        });
        if install {
            self.dpif.dp().install_flows(keys);
        }
    }

    /// The interfaces whose kernel fast path this switch keeps pinned.
    pub fn pinned_offload_ports(&self) -> Vec<String> {
        self.offloads.pinned_ports()
    }

    /// The offload pass, when its interval has run out; and whenever the revalidator
    /// retired flows since the last look (hosts that moved), their entries leave.
    pub fn revalidate_offloads(&mut self) {
        if !self.offloads.any() {
            return;
        }
        let due = self.offloads.due();
        self.hand_back_offloads(due);
        let retired = self.dpif.dp().retired_flows();
        if retired == self.retired_seen && !due {
            return;
        }
        self.retired_seen = retired;
        let flows = self.dpif.dp().dump_flows();
        self.offloads.withdraw(&flows);
        self.offloads.revalidate(&flows, false);
    }

    /// Tells the slow path which ports there are to flood to, after ports came or
    /// went (hosts learned on a port that went are forgotten), and revalidates.
    fn sync_flood_ports(&mut self) {
        self.sync_live_ports();
        // This bridge's ports in the datapath, in OpenFlow numbers.
        let ports: Vec<u32> = self
            .ports
            .iter()
            .filter(|(_, p)| p.dp_no.is_some())
            .map(|(no, _)| *no)
            .collect();
        if ports == self.flood_ports {
            return;
        }
        for gone in self.flood_ports.iter().filter(|p| !ports.contains(p)) {
            self.ofproto.flush_port(*gone);
        }
        self.ofproto.set_ports(ports.clone());
        self.flood_ports = ports;
        if let Err(e) = self.revalidate_now() {
            tracing::error!(error = %e, "cannot revalidate the datapath flows");
        }
        self.withdraw_offloads();
    }

    /// A revalidator pass now: when it returns, no PMD forwards by a datapath flow
    /// the rules, ports or MAC table no longer give.
    fn revalidate_now(&mut self) -> Result<(), SwitchError> {
        let opts = SwitchOptions::from_options(&self.options).ok();
        let max_idle = opts.map_or(crate::options::DEFAULT_MAX_IDLE_MS, |o| o.max_idle_ms);
        self.dpif.dp().revalidate(now_ms(), max_idle)?;
        Ok(())
    }

    /// Called periodically: the slow path hears of ports that came or went while
    /// no command was running (links watched).
    pub fn sync_ports(&mut self) {
        self.sync_flood_ports();
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
        pipeline: Option<&Pipeline>,
    ) -> SavedState {
        let current = self.ofproto.pipeline();
        let pipeline = pipeline.unwrap_or(&current);
        let rules = pipeline.rules();
        SavedState {
            version: STATE_VERSION,
            written_by: String::new(),
            options: options.unwrap_or(&self.options).clone(),
            ports: ports.unwrap_or_else(|| self.saved_ports()),
            flows: rules.iter().map(|r| format_flow(&r.spec)).collect(),
            groups: pipeline
                .groups()
                .map(|g| vsw_flow::format_group(&g.spec))
                .collect(),
            meters: pipeline
                .meters()
                .map(|(m, _)| vsw_flow::format_meter(m))
                .collect(),
            journal_seq: self.journal.last_seq(),
            // (A new one is given when the file is written.)
            generation: 0,
        }
    }

    /// Writes the state a command will leave, before the command changes anything: a
    /// disk that is full or read-only refuses the command, and nothing changes.
    fn prepare(&self, next: &SavedState) -> Result<PendingState, SwitchError> {
        if !self.persist {
            return Ok(PendingState::unsaved());
        }
        Ok(next.prepare(&self.state_file)?)
    }

    /// The bridge's name.
    pub fn bridge_name(&self) -> &str {
        &self.bridge
    }

    fn port_no(&self, name: &str) -> Option<u32> {
        self.ports
            .iter()
            .find(|(_, p)| p.name == name)
            .map(|(n, _)| *n)
    }

    /// Opens port `no`'s device and hands it to the datapath; on failure the port
    /// stays down with the reason.
    /// Opens port `no`'s device and hands it to the datapath; on failure the port
    /// stays down with the reason.
    fn try_attach(&mut self, no: u32) {
        let Some(port) = self.ports.get_mut(&no) else {
            return;
        };
        let ifindex = match port.device.presence() {
            Presence::Own => 0,
            Presence::Interface(Some(i)) => i,
            Presence::Interface(None) => {
                port.link = Link::Down {
                    why: "interface does not exist".into(),
                };
                return;
            }
        };
        // The MTU asked for is given before the device is opened (an interface's rings
        // are sized by it); a refusal leaves the port up with the MTU it has, and says why.
        port.mtu_problem = None;
        if let Err(e) = port.device.set_mtu(port.parsed.mtu_request) {
            tracing::warn!(port = %port.name, error = %e, "mtu_request refused");
            port.mtu_problem = Some(e.to_string());
        }
        let result = self.plug(no).and_then(|()| self.settle(no, None));
        let port = self.ports.get_mut(&no).expect("checked above");
        match result {
            Ok(()) => {
                tracing::info!(port = %port.name, no, ifindex, class = port.parsed.class.name(), "port attached");
                port.link = Link::Up { ifindex };
            }
            Err(e) => {
                tracing::warn!(port = %port.name, error = %e, "cannot attach port");
                port.device.close();
                port.link = Link::Down { why: e.to_string() };
            }
        }
    }

    /// Port `no`'s datapath number: the one it has, or a new one the backer maps
    /// to it (before its queues reach the datapath: its first packet finds it).
    fn dp_number(&mut self, no: u32) -> Result<u32, SwitchError> {
        let port = self.ports.get_mut(&no).expect("a port of the switch");
        if let Some(dp) = port.dp_no {
            return Ok(dp);
        }
        let dp = self.dpif.take_port_number();
        if let Err(e) = self.dpif.backer().set_port(self.slot, no, dp) {
            self.dpif.give_back_port_number(dp);
            return Err(e.into());
        }
        port.dp_no = Some(dp);
        self.join_patch(no);
        Ok(dp)
    }

    /// A patch port joins its peer (in whichever bridge of the datapath it is, as
    /// soon as both are there): translation goes on across it.
    fn join_patch(&self, no: u32) {
        let port = &self.ports[&no];
        if let Some(peer) = port.device.patch_peer() {
            self.dpif
                .backer()
                .set_patch(self.slot, no, &port.name, peer);
        }
    }

    /// Port `no` lets go of its datapath number (its queues left the datapath).
    fn release_dp_number(&mut self, no: u32) {
        if let Some(dp) = self.ports.get_mut(&no).and_then(|p| p.dp_no.take()) {
            self.dpif.backer().remove_port(dp);
            self.dpif.give_back_port_number(dp);
        }
    }

    /// The OpenFlow number of datapath port `dp`, when it is this bridge's.
    fn of_no(&self, dp: u32) -> Option<u32> {
        match self.dpif.backer().of_port(dp) {
            Some((slot, of)) if slot == self.slot => Some(of),
            _ => None,
        }
    }

    /// A datapath flow's actions with this bridge's ports in OpenFlow numbers (as
    /// `dump-dp-flows` shows them).
    fn actions_in_of_numbers(&self, actions: &[DpAction]) -> Vec<DpAction> {
        actions
            .iter()
            .map(|a| match a {
                DpAction::Output(dp) => DpAction::Output(self.of_no(*dp).unwrap_or(*dp)),
                other => *other,
            })
            .collect()
    }

    /// The datapath's in_port of a packet the controller sends as from OpenFlow
    /// port `in_port`: its port's datapath number, a reserved port's number as it
    /// is (no datapath port is numbered that high), else none (`u32::MAX`).
    fn injected_in_port(&self, in_port: u32) -> u32 {
        match self.ports.get(&in_port) {
            Some(p) => p.dp_no.unwrap_or(u32::MAX),
            None if in_port > MAX_PORT_NO => in_port,
            None => u32::MAX,
        }
    }

    /// Port `no`'s datapath number; `u32::MAX` (no port) while it has none.
    fn dp_no(&self, no: u32) -> u32 {
        self.ports
            .get(&no)
            .and_then(|p| p.dp_no)
            .unwrap_or(u32::MAX)
    }

    /// Opens port `no`'s device and gives its queues to the datapath.
    fn plug(&mut self, no: u32) -> Result<(), SwitchError> {
        let dp = self.dp_number(no)?;
        let port = self.ports.get_mut(&no).expect("a port of the switch");
        let queues = port.device.open();
        port.opened += 1;
        let handle = match queues {
            Ok(q) => PortHandle::new(dp, &port.name, q, port.stats.clone()),
            Err(e) => {
                self.release_dp_number(no);
                return Err(e.into());
            }
        };
        let added = self.dpif.dp().add_port(handle);
        if let Err(e) = added {
            self.ports.get_mut(&no).expect("checked").device.close();
            self.release_dp_number(no);
            return Err(e.into());
        }
        Ok(())
    }

    /// Gives the datapath port `no`'s transmit batching and queue pins, as `parsed`
    /// (or the port's options) say, after its device was (re)opened.
    fn settle(&mut self, no: u32, parsed: Option<&PortOptions>) -> Result<(), SwitchError> {
        let parsed = parsed.unwrap_or(&self.ports[&no].parsed);
        let dp = self.dp_no(no);
        if parsed.tx_flush != FlushSetting::Switch {
            self.dpif.dp().set_port_tx_flush(dp, parsed.tx_flush)?;
        }
        if !parsed.rxq_affinity.is_empty() {
            self.dpif
                .dp()
                .set_rxq_affinity(dp, parsed.rxq_affinity.clone())?;
        }
        Ok(())
    }

    fn detach(&mut self, no: u32, why: &str) {
        self.detach_many(&[no], why);
    }

    /// Detaches these ports together: the datapath lets go of them in one change,
    /// then their sockets are closed at once (closing an AF_PACKET socket with rings
    /// waits in the kernel for RCU grace periods, ~30 ms a port: one at a time, 100
    /// ports would take seconds).
    fn detach_many(&mut self, nos: &[u32], why: &str) {
        let up: Vec<u32> = nos
            .iter()
            .copied()
            .filter(|no| matches!(self.ports.get(no).map(|p| &p.link), Some(Link::Up { .. })))
            .collect();
        let mut handles = Vec::new();
        let in_dp: Vec<u32> = up.iter().filter_map(|no| self.ports[no].dp_no).collect();
        if !in_dp.is_empty() {
            let removed = self.dpif.dp().remove_ports(&in_dp);
            match removed {
                Ok(h) => handles = h,
                Err(e) => tracing::error!(ports = ?up, error = %e, "cannot detach ports"),
            }
        }
        for no in nos {
            self.release_dp_number(*no);
            if let Some(port) = self.ports.get_mut(no) {
                port.link = Link::Down {
                    why: why.to_string(),
                };
                // The device is gone: so is the socket an offload fast path filtered.
                port.device.close();
                port.opened += 1;
            }
        }
        drop_at_once(handles);
    }

    /// Notices interfaces that went away or came back. Called periodically.
    pub fn check_links(&mut self) {
        let nos: Vec<u32> = self.ports.keys().copied().collect();
        let mut changed = false;
        for no in nos {
            let port = &self.ports[&no];
            // Devices vsw makes do not come and go on their own.
            let Presence::Interface(now) = port.device.presence() else {
                continue;
            };
            let up = match port.link {
                Link::Up { ifindex } => Some(ifindex),
                Link::Down { .. } => None,
            };
            let name = port.name.clone();
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
        // A port that went or came back needs its offload fast path set up anew,
        // and a fast-failover group may choose another bucket.
        if changed {
            self.sync_offloads();
            self.sync_live_ports();
        }
    }

    /// Tells the slow path which ports' links are up (fast-failover groups watch
    /// them) and, when that changed, revalidates.
    fn sync_live_ports(&mut self) {
        let live: Vec<u32> = self
            .ports
            .iter()
            .filter(|(_, p)| matches!(p.link, Link::Up { .. }))
            .map(|(no, _)| *no)
            .collect();
        if self.ofproto.set_live_ports(live) {
            if let Err(e) = self.revalidate_now() {
                tracing::error!(error = %e, "cannot revalidate the datapath flows");
            }
            self.withdraw_offloads();
        }
    }

    /// Stops the switch; `daemon_ends`: vswd stops, and fast paths pinned with
    /// `offload-persist` stay forwarding for the next run to adopt.
    pub fn shutdown(&mut self, daemon_ends: bool) {
        // The process exits without dropping the switch: the last rule changes are
        // made durable here, not by the journal's thread.
        self.journal.sync();
        self.offloads.clear(daemon_ends);
        let nos: Vec<u32> = self.ports.keys().copied().collect();
        self.detach_many(&nos, "vswd stopped");
        // The datapath may go on for other bridges: this one's meters leave it.
        for (m, _) in self.ofproto.pipeline().meters() {
            self.dpif
                .dp()
                .set_meter(Backer::dp_meter(self.slot, m.id), None);
        }
    }

    pub fn handle(&mut self, req: Request) -> Result<Value, SwitchError> {
        let started = std::time::Instant::now();
        let kind = req.kind();
        let result = self.answer(req);
        // Ports a command attached or detached are flooded to (or not) from the
        // moment it is answered.
        self.sync_flood_ports();
        self.latencies.observe(kind, started.elapsed());
        result
    }

    fn answer(&mut self, req: Request) -> Result<Value, SwitchError> {
        match req {
            Request::Show => Ok(json!(self.show())),
            Request::Set { options } => self.set(&options),
            Request::AddPort { name, options } => self.add_port(&name, &options),
            Request::DelPort { name } => self.del_port(&name),
            Request::SetPort { name, options } => self.set_port(&name, &options),
            Request::AddFlow { flow } => self.add_flows(&[flow]),
            Request::AddFlows { flows } => self.add_flows(&flows),
            Request::DelFlows { matching, strict } => self.del_flows(matching.as_deref(), strict),
            Request::ModFlows {
                flow,
                strict,
                reset_counts,
            } => self.mod_flows(&flow, strict, reset_counts),
            Request::AddGroup { group } => self.set_group(&group, false),
            Request::ModGroup { group } => self.set_group(&group, true),
            Request::DelGroups { group_id } => self.del_groups(group_id),
            Request::DumpGroups => Ok(json!(self.dump_groups())),
            Request::AddMeter { meter } => self.set_meter(&meter, false),
            Request::ModMeter { meter } => self.set_meter(&meter, true),
            Request::DelMeters { meter_id } => self.del_meters(meter_id),
            Request::DumpMeters => Ok(json!(self.dump_meters())),
            Request::DumpFlows { kind, table } => {
                let which = offloaded_filter(kind.as_deref())?;
                let flows: Vec<FlowInfo> = self
                    .dump_flows()
                    .into_iter()
                    .filter(|f| which.is_none_or(|w| f.offloaded == w))
                    .filter(|f| table.is_none_or(|t| f.table == t))
                    .collect();
                Ok(json!(flows))
            }
            Request::OffloadShow => Ok(json!(self.offloads.show())),
            Request::DumpDpFlows { kind } => {
                let which = offloaded_filter(kind.as_deref())?;
                let flows: Vec<DpFlowInfo> = self
                    .dump_dp_flows()
                    .into_iter()
                    .filter(|f| which.is_none_or(|w| f.offloaded == w))
                    .collect();
                Ok(json!(flows))
            }
            Request::Trace { flow } => {
                let sel = parse_match(&flow, &|n: &str| self.port_no(n))?;
                let trace = self.ofproto.trace(sel.matcher.value(), now_ms());
                Ok(json!(trace.render()))
            }
            Request::DpifShow => Ok(json!(self.dpif_show())),
            Request::FdbShow => Ok(json!(self.fdb_show())),
            Request::FdbFlush => {
                self.ofproto.flush_macs();
                self.revalidate_now()?;
                Ok(Value::Null)
            }
            Request::DumpPorts => Ok(json!(self.port_infos())),
            Request::PmdStatsShow => Ok(json!(self.dpif.dp().pmd_stats())),
            Request::PmdStatsClear => {
                self.dpif.dp().clear_pmd_stats();
                Ok(Value::Null)
            }
            Request::PmdRxqShow => Ok(json!(self.rxq_show())),
            Request::PmdRxqRebalance => {
                self.dpif.dp().rebalance()?;
                Ok(json!(self.rxq_show()))
            }
            Request::DebugPmdFailure { core } => {
                if std::env::var("VSWD_FAULT_INJECTION").as_deref() != Ok("1") {
                    return Err(SwitchError::NoFaultInjection);
                }
                self.dpif.dp().inject_pmd_failure(core)?;
                Ok(Value::Null)
            }
        }
    }

    fn set(&mut self, words: &[String]) -> Result<Value, SwitchError> {
        let mut merged = self.options.clone();
        // `key=` with nothing after it takes the option back to its default.
        for (k, v) in options::parse_pairs(words)? {
            if v.is_empty() {
                merged.remove(&k);
            } else {
                merged.insert(k, v);
            }
        }
        let parsed = SwitchOptions::from_options(&merged)?;
        // Nothing changes: nothing is written.
        if merged == self.options {
            return Ok(Value::Null);
        }
        let old = SwitchOptions::from_options(&self.options).ok();
        // As Open vSwitch: the tables are flushed when controllers come or all go,
        // or when the fail mode changes while there are none; a standalone bridge
        // with no controller then gets its learning-switch rule (and only then).
        let flushed = old
            .as_ref()
            .filter(|o| flushes_tables(o, &parsed))
            .map(|_| flushed_pipeline(&parsed));
        let pending = self.prepare(&self.state_with(Some(&merged), None, flushed.as_ref()))?;
        let undo = |sw: &mut Switch| {
            if let Some(old) = &old {
                if let Err(e) = sw.apply_switch_options(Some(&parsed), old) {
                    tracing::error!(error = %e, "cannot put the switch options back");
                }
            }
        };
        if let Err(e) = self.apply_switch_options(old.as_ref(), &parsed) {
            undo(self);
            return Err(e);
        }
        let previous = std::mem::replace(&mut self.options, merged);
        let (before, revalidated) = match flushed {
            Some(p) => {
                let (old, r) = self.install_pipeline(p);
                (Some(old), r)
            }
            None => (None, Ok(())),
        };
        let committed = match revalidated {
            Ok(()) => self.commit(pending),
            Err(e) => Err(e),
        };
        if let Err(e) = committed {
            if let Some(old_pipeline) = before {
                let _ = self.install_pipeline((*old_pipeline).clone());
            }
            undo(self);
            self.options = previous;
            return Err(e);
        }
        if let Some(old_pipeline) = before {
            tracing::info!(
                rules = old_pipeline.len(),
                learning_switch = parsed.wants_learning_flow(),
                "controllers or fail mode changed: the tables were flushed"
            );
            self.forget_meters_of(&old_pipeline);
            let now = now_ms();
            for r in old_pipeline.rules() {
                self.note_removed(&r, Removal::Deleted, now);
            }
        }
        self.sync_offloads();
        Ok(Value::Null)
    }

    /// Puts `pipeline` in place of the running one, the counts the old rules earned
    /// pushed to them first, and revalidates (no PMD forwards by the old rules once
    /// it returns): the old pipeline, and whether the revalidation failed.
    fn install_pipeline(&mut self, pipeline: Pipeline) -> (Arc<Pipeline>, Result<(), SwitchError>) {
        self.dpif.dp().push_flow_stats();
        let old = self.ofproto.pipeline();
        for (m, _) in pipeline.meters() {
            self.dpif
                .dp()
                .set_meter(Backer::dp_meter(self.slot, m.id), Some(&meter_config(m)));
        }
        self.ofproto.set_pipeline(pipeline);
        let revalidated = self.revalidate_now();
        self.withdraw_offloads();
        (old, revalidated)
    }

    /// The datapath lets go of the meters `old` had that the running pipeline has not.
    fn forget_meters_of(&mut self, old: &Pipeline) {
        let now = self.ofproto.pipeline();
        for (m, _) in old.meters() {
            if now.meter(m.id).is_none() {
                self.dpif
                    .dp()
                    .set_meter(Backer::dp_meter(self.slot, m.id), None);
            }
        }
    }

    /// Going from options `from` to `parsed`: the datapath gets the daemon-wide
    /// settings when they are what changed (the datapath is the daemon's: another
    /// bridge's unchanged options never undo them), the bridge its own.
    fn apply_switch_options(
        &mut self,
        from: Option<&SwitchOptions>,
        parsed: &SwitchOptions,
    ) -> Result<(), SwitchError> {
        let wanted = DaemonSettings::of(parsed);
        if from.is_none_or(|f| DaemonSettings::of(f) != wanted) {
            self.dpif.apply(&wanted)?;
        }
        if self.ofproto.set_restore_wait(parsed.flow_restore_wait) {
            tracing::info!(
                wait = parsed.flow_restore_wait,
                "flow-restore-wait: forwarding {}",
                if parsed.flow_restore_wait {
                    "held"
                } else {
                    "resumed"
                }
            );
            // No packet is forwarded by the other state's flows.
            self.revalidate_now()?;
            self.withdraw_offloads();
        }
        Ok(())
    }

    fn add_port(&mut self, name: &str, words: &[String]) -> Result<Value, SwitchError> {
        self.add_ports(&[(name.to_string(), words.to_vec())])
            .pop()
            .expect("one result per port")
    }

    /// Adds these ports together, each as `add-port` adds it, each with its own
    /// result (one refused changes nothing of the others). Opening a device waits in
    /// the kernel (each AF_PACKET ring for an RCU grace period), so the devices are
    /// opened at once, each on a thread of its own, and handed to the datapath in
    /// one reconfiguration.
    pub fn add_ports(&mut self, list: &[(String, Vec<String>)]) -> Vec<Result<Value, SwitchError>> {
        let started = std::time::Instant::now();
        let mut results: Vec<Option<Result<Value, SwitchError>>> =
            list.iter().map(|_| None).collect();
        let mut staged = Vec::new();
        for (i, (name, words)) in list.iter().enumerate() {
            match self.stage_port(name, words) {
                Ok(st) => staged.push((i, st)),
                Err(e) => results[i] = Some(Err(e)),
            }
        }
        let nos: Vec<u32> = staged.iter().map(|(_, st)| st.no).collect();
        let staged_at = started.elapsed();
        let mut opened = self.open_devices(&nos);
        let opened_at = started.elapsed();
        // Those that opened go to the datapath together.
        let mut handles = Vec::new();
        let mut numbered = Vec::new();
        for (_, st) in &staged {
            match opened.remove(&st.no) {
                Some(Ok(queues)) => match self.dp_number(st.no) {
                    Ok(dp) => {
                        let port = &self.ports[&st.no];
                        handles.push(PortHandle::new(dp, &port.name, queues, port.stats.clone()));
                        numbered.push(st.no);
                    }
                    Err(e) => {
                        opened.insert(
                            st.no,
                            Err(PortError::Netdev(NetdevError::Syscall {
                                op: "number",
                                ifname: self.ports[&st.no].name.clone(),
                                source: std::io::Error::other(e.to_string()),
                            })),
                        );
                    }
                },
                Some(Err(e)) => {
                    opened.insert(st.no, Err(e));
                }
                None => {}
            }
        }
        let handed = if handles.is_empty() {
            Ok(())
        } else {
            self.dpif.dp().add_ports(handles)
        };
        if handed.is_err() {
            // Not in the datapath: their numbers go back.
            for no in numbered {
                self.release_dp_number(no);
            }
        }
        let handed_err = handed.err().map(|e| e.to_string());
        let handed_at = started.elapsed();
        // Each finished in order: its link, queue settings, then the state file (as
        // it will be with the ports finished so far). A port whose device opened went
        // to the datapath with the others (its entry taken above); one that did not
        // still has its error here.
        for k in 0..staged.len() {
            let (i, st) = &staged[k];
            let no = st.no;
            let result = match (&handed_err, opened.remove(&no)) {
                (_, Some(Err(e))) => Err(SwitchError::from(e)),
                (Some(why), _) => Err(SwitchError::NotTaken(why.clone())),
                (None, _) => {
                    self.ports.get_mut(&no).expect("staged").link = Link::Up {
                        ifindex: st.ifindex,
                    };
                    let later: Vec<u32> = staged[k + 1..].iter().map(|(_, s)| s.no).collect();
                    self.settle(no, None).and_then(|()| {
                        let ports = self
                            .saved_ports()
                            .into_iter()
                            .filter(|p| !later.contains(&p.no))
                            .collect();
                        let pending = self.prepare(&self.state_with(None, Some(ports), None))?;
                        self.commit(pending)
                    })
                }
            };
            let name = &list[*i].0;
            results[*i] = Some(match result {
                Ok(()) => {
                    tracing::info!(port = %name, no, "port added");
                    Ok(json!({ "no": no }))
                }
                Err(e) => {
                    // Nothing changes when the port cannot be set up as asked, or
                    // not saved.
                    self.detach(no, "not added");
                    if let Some(mut port) = self.ports.remove(&no) {
                        if let Err(undo) = port.device.set_mtu(st.old_mtu) {
                            tracing::error!(port = %name, error = %undo, "cannot give the interface its MTU back");
                        }
                    }
                    Err(e)
                }
            });
        }
        if list.len() > 1 {
            tracing::info!(
                ports = list.len(),
                staged_ms = staged_at.as_millis() as u64,
                opened_ms = (opened_at - staged_at).as_millis() as u64,
                handed_ms = (handed_at - opened_at).as_millis() as u64,
                finished_ms = (started.elapsed() - handed_at).as_millis() as u64,
                "ports added together"
            );
        }
        self.sync_offloads();
        // Flooded to from the moment this returns (as after any command).
        self.sync_flood_ports();
        results
            .into_iter()
            .map(|r| r.expect("every port has its result"))
            .collect()
    }

    /// Opens these ports' devices, at once (each on a thread of its own, at most
    /// [`OPEN_AT_ONCE`] together): a device's opening mostly waits in the kernel.
    fn open_devices(&mut self, nos: &[u32]) -> BTreeMap<u32, Result<PortQueues, PortError>> {
        let mut devices: Vec<(u32, &mut Box<dyn PortDevice>)> = self
            .ports
            .iter_mut()
            .filter(|(n, _)| nos.contains(n))
            .map(|(n, p)| {
                p.opened += 1;
                (*n, &mut p.device)
            })
            .collect();
        let mut out = BTreeMap::new();
        if let [(no, device)] = devices.as_mut_slice() {
            out.insert(*no, device.open());
            return out;
        }
        while !devices.is_empty() {
            let chunk: Vec<_> = devices.drain(..devices.len().min(OPEN_AT_ONCE)).collect();
            std::thread::scope(|s| {
                let failed = |why: &str| {
                    Err(PortError::Netdev(NetdevError::Syscall {
                        op: "open",
                        ifname: String::new(),
                        source: std::io::Error::other(why.to_string()),
                    }))
                };
                let opening: Vec<_> = chunk
                    .into_iter()
                    .map(|(no, device)| {
                        let t = std::thread::Builder::new()
                            .name("vsw-open".into())
                            .spawn_scoped(s, move || device.open());
                        (no, t)
                    })
                    .collect();
                for (no, t) in opening {
                    // A port whose thread could not be made stays down with the
                    // reason (and is tried again when its link is looked at).
                    let opened = match t {
                        Ok(t) => t
                            .join()
                            .unwrap_or_else(|_| failed("the thread opening it failed")),
                        Err(e) => failed(&format!("no thread to open it: {e}")),
                    };
                    out.insert(no, opened);
                }
            });
        }
        out
    }

    /// Checks a port to add and puts it in the table, numbered and with its MTU, not
    /// opened yet.
    fn stage_port(&mut self, name: &str, words: &[String]) -> Result<StagedPort, SwitchError> {
        if self.port_no(name).is_some() {
            return Err(SwitchError::PortExists(name.to_string()));
        }
        if !interface::valid_name(name) {
            return Err(NetdevError::BadInterfaceName(name.to_string()).into());
        }
        let mut opts = options::parse_pairs(words)?;
        let (parsed, mut device) = configure(&self.classes, &self.env, name, &opts)?;
        // What the port is, written out: a later default cannot change it.
        parsed.write_out_defaults(&mut opts);
        let no = match parsed.ofport_request {
            Some(n) => {
                if let Some(p) = self.ports.get(&n) {
                    return Err(SwitchError::PortNumberTaken(n, p.name.clone()));
                }
                n
            }
            // The bridge's own port is OpenFlow's LOCAL.
            None if parsed.class.name() == "internal"
                && name == self.bridge
                && !self.ports.contains_key(&vsw_flow::LOCAL_PORT) =>
            {
                vsw_flow::LOCAL_PORT
            }
            None => (1..=MAX_PORT_NO)
                .find(|n| !self.ports.contains_key(n))
                .ok_or(SwitchError::NoFreePortNumber)?,
        };
        self.check_mtu_request(&parsed)?;
        self.check_claims(device.as_ref(), no)?;
        let ifindex = match device.presence() {
            Presence::Own => 0,
            Presence::Interface(Some(i)) => i,
            Presence::Interface(None) => {
                return Err(NetdevError::NoSuchInterface(name.to_string()).into())
            }
        };
        // The MTU first: an interface's rings are sized by it. If anything after fails,
        // the interface gets its old MTU back.
        let old_mtu = match parsed.class.mtu_handling() {
            MtuHandling::Interface if parsed.mtu_request.is_some() => device.mtu(),
            _ => None,
        };
        device.set_mtu(parsed.mtu_request)?;
        self.ports.insert(
            no,
            Port {
                name: name.to_string(),
                options: opts,
                parsed,
                device,
                stats: Arc::new(PortStats::default()),
                link: Link::Down {
                    why: "being added".into(),
                },
                mtu_problem: None,
                opened: 0,
                dp_no: None,
            },
        );
        Ok(StagedPort {
            no,
            ifindex,
            old_mtu,
        })
    }

    /// Refuses `mtu_request` on a port whose MTU vsw does not set.
    fn check_mtu_request(&self, parsed: &PortOptions) -> Result<(), SwitchError> {
        if parsed.mtu_request.is_some() && parsed.class.mtu_handling() == MtuHandling::NotSet {
            return Err(SwitchError::MtuNotSet {
                class: parsed.class.name(),
                applies_to: join_and(self.classes.with_mtu().into_iter()),
            });
        }
        Ok(())
    }

    /// Refuses a socket path that would take something that is not the port's: the
    /// control socket, another port's socket, or a file its class may not replace.
    fn check_claims(&self, device: &dyn PortDevice, no: u32) -> Result<(), SwitchError> {
        let Some(path) = device.socket_path() else {
            return Ok(());
        };
        let refuse = |why: String| {
            Err(SwitchError::SocketTaken {
                path: path.to_path_buf(),
                why,
            })
        };
        if same_path(path, Path::new(&self.socket)) {
            return refuse("that is vswd's control socket".into());
        }
        let taken = self
            .ports
            .iter()
            .find(|(n, p)| **n != no && p.device.socket_path().is_some_and(|o| same_path(o, path)));
        if let Some((_, p)) = taken {
            return refuse(format!("port {} uses it", p.name));
        }
        Ok(device.check_free()?)
    }

    fn del_port(&mut self, name: &str) -> Result<Value, SwitchError> {
        self.del_ports(&[name.to_string()])
            .pop()
            .expect("one result per port")
    }

    /// Deletes these ports together (one change of the datapath, their sockets
    /// closed at once), each with its own result: a name that is not a port is
    /// refused, the others go. If the state file cannot be written, none goes.
    pub fn del_ports(&mut self, names: &[String]) -> Vec<Result<Value, SwitchError>> {
        let mut nos = Vec::new();
        let mut results: Vec<Result<Value, SwitchError>> = names
            .iter()
            .map(|name| match self.port_no(name) {
                Some(no) if !nos.contains(&no) => {
                    nos.push(no);
                    Ok(Value::Null)
                }
                _ => Err(SwitchError::NoSuchPort(name.clone())),
            })
            .collect();
        if nos.is_empty() {
            return results;
        }
        let ports = self
            .saved_ports()
            .into_iter()
            .filter(|p| !nos.contains(&p.no))
            .collect();
        let refuse_all = |results: &mut Vec<Result<Value, SwitchError>>, why: String| {
            for r in results.iter_mut().filter(|r| r.is_ok()) {
                *r = Err(SwitchError::Unsaved(why.clone()));
            }
        };
        let pending = match self.prepare(&self.state_with(None, Some(ports), None)) {
            Ok(p) => p,
            Err(e) => {
                refuse_all(&mut results, e.to_string());
                return results;
            }
        };
        let started = std::time::Instant::now();
        self.detach_many(&nos, "deleted");
        if nos.len() > 1 {
            tracing::info!(
                ports = nos.len(),
                detached_ms = started.elapsed().as_millis() as u64,
                "ports deleted together"
            );
        }
        let removed: Vec<(u32, Port)> = nos
            .iter()
            .filter_map(|no| self.ports.remove(no).map(|p| (*no, p)))
            .collect();
        match self.commit(pending) {
            Ok(()) => {
                for (no, p) in &removed {
                    tracing::info!(port = %p.name, no, "port deleted");
                }
            }
            Err(e) => {
                // Back as they were (a guest reconnects, an interface is opened again).
                for (no, p) in removed {
                    self.ports.insert(no, p);
                    self.try_attach(no);
                }
                refuse_all(&mut results, e.to_string());
            }
        }
        self.sync_offloads();
        self.sync_flood_ports();
        results
    }

    fn set_port(&mut self, name: &str, words: &[String]) -> Result<Value, SwitchError> {
        let no = self
            .port_no(name)
            .ok_or_else(|| SwitchError::NoSuchPort(name.to_string()))?;
        let port = &self.ports[&no];
        let mut merged = port.options.clone();
        merged.extend(options::parse_pairs(words)?);
        let (parsed, fresh) = self.check_port_change(no, name, &merged)?;
        // Nothing changes: nothing is written, nothing reopened.
        if merged == port.options {
            return Ok(Value::Null);
        }
        let mut ports = self.saved_ports();
        if let Some(p) = ports.iter_mut().find(|p| p.no == no) {
            p.options = merged.clone();
        }
        let pending = self.prepare(&self.state_with(None, Some(ports), None))?;
        let port = &self.ports[&no];
        let (old_options, old_parsed) = (port.options.clone(), port.parsed.clone());
        let reopens = fresh.is_some();
        self.apply_port_change(no, merged, parsed, fresh)?;
        if let Err(e) = self.commit(pending) {
            let undo =
                configure(&self.classes, &self.env, name, &old_options).and_then(|(_, device)| {
                    self.apply_port_change(no, old_options, old_parsed, reopens.then_some(device))
                });
            if let Err(undo) = undo {
                tracing::error!(port = name, error = %undo, "cannot put the port's options back");
            }
            self.sync_offloads();
            return Err(e);
        }
        self.sync_offloads();
        Ok(Value::Null)
    }

    /// What `merged` means for port `no`, if it is a change a port may take; with a
    /// new device (not yet opened) when the change needs the device opened anew.
    fn check_port_change(
        &self,
        no: u32,
        name: &str,
        merged: &Options,
    ) -> Result<(PortOptions, Option<Box<dyn PortDevice>>), SwitchError> {
        let port = &self.ports[&no];
        // Before the options are read: another type's options would be refused first.
        if let Some(t) = merged
            .get("type")
            .filter(|t| *t != port.parsed.class.name())
        {
            return Err(OptionError::BadValue {
                key: "type".into(),
                value: t.clone(),
                why: "a port's type is fixed when it is added".into(),
            }
            .into());
        }
        let (parsed, device) = configure(&self.classes, &self.env, name, merged)?;
        if parsed.ofport_request.is_some_and(|n| n != no) {
            return Err(SwitchError::Renumber);
        }
        // A pin to a queue the device does not have is refused before anything is
        // reopened.
        let queues = port.device.rx_queues();
        if let Some((q, _)) = parsed.rxq_affinity.iter().find(|(q, _)| *q >= queues) {
            return Err(DatapathError::NoSuchQueue {
                port: name.to_string(),
                queues,
                queue: *q,
            }
            .into());
        }
        self.check_mtu_request(&parsed)?;
        let mut reopen = false;
        for o in parsed.class.options() {
            if parsed.class_options.get(o.key) != port.parsed.class_options.get(o.key) {
                match o.on_change {
                    OnChange::Fixed => return Err(SwitchError::FixedOption(o.key)),
                    OnChange::Reopen => reopen = true,
                }
            }
        }
        Ok((parsed, reopen.then_some(device)))
    }

    /// Applies a checked change of port `no`'s options (`fresh`: the device to open in
    /// place of the port's, when the change needs one).
    fn apply_port_change(
        &mut self,
        no: u32,
        merged: Options,
        parsed: PortOptions,
        fresh: Option<Box<dyn PortDevice>>,
    ) -> Result<(), SwitchError> {
        let port = &self.ports[&no];
        let up = matches!(port.link, Link::Up { .. });
        let new_interface_mtu = match parsed.mtu_request {
            Some(mtu)
                if up
                    && parsed.class.mtu_handling() == MtuHandling::Interface
                    && parsed.mtu_request != port.parsed.mtu_request =>
            {
                Some(mtu)
            }
            _ => None,
        };
        let reopened = if let Some(mtu) = new_interface_mtu {
            self.change_mtu(no, mtu, fresh)?;
            true
        } else if let Some(fresh) = fresh {
            if up {
                self.replace_device(no, fresh)?;
            } else {
                // Opened as it now is when it comes back.
                self.ports.get_mut(&no).expect("checked above").device = fresh;
            }
            up
        } else {
            false
        };
        let port = self.ports.get_mut(&no).expect("checked above");
        if parsed.class.mtu_handling() == MtuHandling::Live {
            // No device to reopen: frames are held to the new MTU from the next batch.
            port.device.set_mtu(parsed.mtu_request)?;
        }
        let port = &self.ports[&no];
        let dp = self.dp_no(no);
        if up && (reopened || parsed.rxq_affinity != port.parsed.rxq_affinity) {
            self.dpif
                .dp()
                .set_rxq_affinity(dp, parsed.rxq_affinity.clone())?;
        }
        if up && (reopened || parsed.tx_flush != port.parsed.tx_flush) {
            self.dpif.dp().set_port_tx_flush(dp, parsed.tx_flush)?;
        }
        let port = self.ports.get_mut(&no).expect("checked above");
        port.options = merged;
        port.parsed = parsed;
        Ok(())
    }

    /// Opens `fresh` and puts it in place of port `no`'s device; the new device is
    /// opened before the old one is let go, so a failure changes nothing.
    fn replace_device(
        &mut self,
        no: u32,
        mut fresh: Box<dyn PortDevice>,
    ) -> Result<(), SwitchError> {
        let queues = fresh.open()?;
        // The port keeps its datapath number (and the backer its place) while its
        // queues are swapped.
        let dp = self.dp_no(no);
        self.dpif.dp().remove_port(dp)?;
        let port = self.ports.get_mut(&no).expect("a port of the switch");
        let mut old = std::mem::replace(&mut port.device, fresh);
        old.close();
        port.opened += 1;
        let handle = PortHandle::new(dp, &port.name, queues, port.stats.clone());
        let added = self.dpif.dp().add_port(handle);
        if let Err(e) = added {
            let port = self.ports.get_mut(&no).expect("a port of the switch");
            port.device.close();
            port.link = Link::Down { why: e.to_string() };
            self.release_dp_number(no);
            return Err(e.into());
        }
        // A patch port's peer may be another now.
        self.join_patch(no);
        Ok(())
    }

    /// Gives port `no`'s interface a new MTU at the right point of the port's life:
    /// the PMDs let go of its queues (sending what they staged), the MTU changes, and
    /// the device (`fresh`, if the change brings one) opens again with rings for the
    /// new size. If the interface refuses the MTU, the port opens again as it was and
    /// the error says why.
    fn change_mtu(
        &mut self,
        no: u32,
        mtu: u32,
        fresh: Option<Box<dyn PortDevice>>,
    ) -> Result<(), SwitchError> {
        let dp = self.dp_no(no);
        self.dpif.dp().remove_port(dp)?;
        let port = self.ports.get_mut(&no).expect("a port of the switch");
        port.device.close();
        let changed = port.device.set_mtu(Some(mtu));
        if let (Ok(()), Some(fresh)) = (&changed, fresh) {
            port.device = fresh;
        }
        let name = port.name.clone();
        if let Err(e) = self.plug(no) {
            let port = self.ports.get_mut(&no).expect("a port of the switch");
            port.link = Link::Down { why: e.to_string() };
            return Err(e);
        }
        match changed {
            Ok(()) => {
                tracing::info!(port = %name, mtu, "MTU changed");
                self.ports
                    .get_mut(&no)
                    .expect("a port of the switch")
                    .mtu_problem = None;
                Ok(())
            }
            Err(e) => {
                // Back as it was, pins and batching included.
                self.settle(no, None)?;
                Err(e.into())
            }
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
        let mut pipeline = (*self.ofproto.pipeline()).clone();
        if let Some(g) = specs
            .iter()
            .find_map(|s| pipeline.missing_group(&s.actions))
        {
            return Err(SwitchError::NoSuchGroup(g));
        }
        if !specs.iter().all(vsw_openflow::from_vsw::rule_fits_openflow) {
            return Err(SwitchError::TooLarge("flow"));
        }
        if let Some(m) = specs
            .iter()
            .find_map(|s| pipeline.missing_meter(&s.actions))
        {
            return Err(SwitchError::NoSuchMeter(m));
        }
        let now = now_ms();
        let added = specs.iter().map(format_flow).collect();
        for spec in specs {
            pipeline.insert(spec, now);
        }
        self.replace_rules_noted(pipeline, Vec::new(), added)?;
        Ok(json!({ "added": texts.len() }))
    }

    fn del_flows(&mut self, matching: Option<&str>, strict: bool) -> Result<Value, SwitchError> {
        let change = FlowChange::Delete {
            matching: matching.map(str::to_string),
            strict,
        };
        let removed = self.flow_changes(&[change])?.remove(0)?;
        Ok(json!({ "removed": removed }))
    }

    fn mod_flows(
        &mut self,
        text: &str,
        strict: bool,
        reset_counts: bool,
    ) -> Result<Value, SwitchError> {
        let change = FlowChange::Modify {
            flow: text.to_string(),
            strict,
            reset_counts,
        };
        let changed = self.flow_changes(&[change])?.remove(0)?;
        Ok(json!({ "modified": changed }))
    }

    /// Carries out flow-mods (OpenFlow's, in order), each on its own terms — one
    /// refused changes nothing of the others, and each says how many rules it
    /// touched — in one change of the tables: one journal line (or state write)
    /// and one revalidation for all of them. A batch that changes nothing (deletes
    /// of rules that are not there, say) writes and revalidates nothing. `Err`: the
    /// change itself could not be made, and none was.
    pub fn flow_changes(
        &mut self,
        changes: &[FlowChange],
    ) -> Result<Vec<Result<usize, SwitchError>>, SwitchError> {
        let old = self.ofproto.pipeline();
        let mut pipeline = (*old).clone();
        let now = now_ms();
        let mut touched = HashSet::new();
        let mut deleted = Vec::new();
        let results: Vec<Result<usize, SwitchError>> = changes
            .iter()
            .map(|c| self.apply_change(&mut pipeline, c, now, &mut touched, &mut deleted))
            .collect();
        // What the journal says of the batch: for every rule key it touched, the
        // rule it had before (removed) and the one it has now (added), when they
        // differ — so a rule added and deleted again in one batch writes nothing.
        let (mut del, mut add) = (Vec::new(), Vec::new());
        for (table, priority, m) in &touched {
            let before = old.find_exact(*table, m, *priority);
            let after = pipeline.find_exact(*table, m, *priority);
            match (before, after) {
                (Some(b), Some(a)) if Arc::ptr_eq(b, a) => {}
                (b, a) => {
                    del.extend(b.map(|r| format_flow(&r.spec)));
                    add.extend(a.map(|r| format_flow(&r.spec)));
                }
            }
        }
        if del.is_empty() && add.is_empty() {
            return Ok(results);
        }
        self.replace_rules_noted(pipeline, del, add)?;
        for r in &deleted {
            self.note_removed(r, Removal::Deleted, now);
        }
        Ok(results)
    }

    /// One change of [`Switch::flow_changes`], made on `pipeline`: the keys (table,
    /// priority, match) of the rules it touched go to `touched`, the rules it
    /// deleted to `deleted`.
    fn apply_change(
        &self,
        pipeline: &mut Pipeline,
        change: &FlowChange,
        now: u64,
        touched: &mut HashSet<(u8, u16, vsw_flow::Match)>,
        deleted: &mut Vec<Arc<vsw_flow::Rule>>,
    ) -> Result<usize, SwitchError> {
        let names = |n: &str| self.port_no(n);
        let key = |r: &Arc<vsw_flow::Rule>| (r.spec.table, r.spec.priority, r.spec.matcher);
        match change {
            FlowChange::Add {
                flow,
                check_overlap,
            } => {
                let spec = parse_flow(flow, &names)?;
                if let Some(g) = pipeline.missing_group(&spec.actions) {
                    return Err(SwitchError::NoSuchGroup(g));
                }
                if let Some(m) = pipeline.missing_meter(&spec.actions) {
                    return Err(SwitchError::NoSuchMeter(m));
                }
                if *check_overlap && pipeline.overlaps(&spec) {
                    return Err(SwitchError::Overlap);
                }
                if !vsw_openflow::from_vsw::rule_fits_openflow(&spec) {
                    return Err(SwitchError::TooLarge("flow"));
                }
                touched.insert((spec.table, spec.priority, spec.matcher));
                pipeline.insert(spec, now);
                Ok(1)
            }
            FlowChange::Delete { matching, strict } => {
                let selection = match matching {
                    Some(text) => parse_match(text, &names)?,
                    None => Selection::all(),
                };
                let removed = pipeline.remove_rules(&selection, *strict);
                touched.extend(removed.iter().map(key));
                let n = removed.len();
                deleted.extend(removed);
                Ok(n)
            }
            FlowChange::Modify {
                flow,
                strict,
                reset_counts,
            } => {
                let (selection, actions) = flow
                    .split_once("actions=")
                    .ok_or(SwitchError::Flow(FlowSyntaxError::NoActions))?;
                let selection = parse_match(selection.trim_end_matches(','), &names)?;
                // The new actions' groups and meters must exist, as an add's must.
                let any = vsw_flow::parse_actions_unchecked(actions, &names)?;
                if let Some(g) = pipeline.missing_group(&any) {
                    return Err(SwitchError::NoSuchGroup(g));
                }
                if let Some(m) = pipeline.missing_meter(&any) {
                    return Err(SwitchError::NoSuchMeter(m));
                }
                let picked = pipeline.select(&selection, *strict);
                let fits = picked.iter().all(|r| {
                    vsw_flow::parse_actions(actions, &names, &r.spec.matcher).is_ok_and(|a| {
                        vsw_openflow::from_vsw::rule_fits_openflow(&vsw_flow::FlowSpec {
                            actions: a,
                            ..r.spec.clone()
                        })
                    })
                });
                if !fits {
                    return Err(SwitchError::TooLarge("flow"));
                }
                let n = pipeline.modify(&selection, *strict, *reset_counts, &|r| {
                    vsw_flow::parse_actions(actions, &names, &r.spec.matcher)
                })?;
                touched.extend(picked.iter().map(key));
                Ok(n)
            }
        }
    }

    fn set_group(&mut self, text: &str, modify: bool) -> Result<Value, SwitchError> {
        let spec = vsw_flow::parse_group(text, &|n: &str| self.port_no(n))?;
        if !vsw_openflow::from_vsw::group_fits_openflow(&spec) {
            return Err(SwitchError::TooLarge("group"));
        }
        let mut pipeline = (*self.ofproto.pipeline()).clone();
        pipeline.set_group(spec, modify, now_ms())?;
        self.replace_rules(pipeline)?;
        Ok(Value::Null)
    }

    /// Removes a group (`None`: all) and the rules that hand packets to it.
    fn del_groups(&mut self, id: Option<u32>) -> Result<Value, SwitchError> {
        let mut pipeline = (*self.ofproto.pipeline()).clone();
        let removed = pipeline.delete_groups(id);
        self.replace_rules(pipeline)?;
        let now = now_ms();
        for r in &removed {
            self.note_removed(r, Removal::GroupDeleted, now);
        }
        Ok(json!({ "flows_removed": removed.len() }))
    }

    fn set_meter(&mut self, text: &str, modify: bool) -> Result<Value, SwitchError> {
        let spec = vsw_flow::parse_meter(text)?;
        let mut pipeline = (*self.ofproto.pipeline()).clone();
        let (id, config) = (spec.id, meter_config(&spec));
        pipeline.set_meter(spec, modify, now_ms())?;
        self.replace_rules(pipeline)?;
        self.dpif
            .dp()
            .set_meter(Backer::dp_meter(self.slot, id), Some(&config));
        Ok(Value::Null)
    }

    /// Removes a meter (`None`: all) and the rules that use it.
    fn del_meters(&mut self, id: Option<u32>) -> Result<Value, SwitchError> {
        let current = self.ofproto.pipeline();
        let gone: Vec<u32> = current
            .meters()
            .map(|(m, _)| m.id)
            .filter(|m| id.is_none_or(|i| i == *m))
            .collect();
        let mut pipeline = (*current).clone();
        let removed = pipeline.delete_meters(id);
        self.replace_rules(pipeline)?;
        for m in gone {
            self.dpif
                .dp()
                .set_meter(Backer::dp_meter(self.slot, m), None);
        }
        let now = now_ms();
        for r in &removed {
            self.note_removed(r, Removal::MeterDeleted, now);
        }
        Ok(json!({ "flows_removed": removed.len() }))
    }

    /// Every meter with its counters.
    pub fn dump_meters(&self) -> Vec<MeterInfo> {
        let now = now_ms();
        let pipeline = self.ofproto.pipeline();
        let rules = pipeline.rules();
        pipeline
            .meters()
            .map(|(m, since)| {
                let counts = self
                    .dpif
                    .dp()
                    .meter_counts(Backer::dp_meter(self.slot, m.id))
                    .unwrap_or_default();
                MeterInfo {
                    meter: vsw_flow::format_meter(m),
                    meter_id: m.id,
                    flow_count: rules
                        .iter()
                        .filter(|r| r.spec.actions.contains(&vsw_flow::Action::Meter(m.id)))
                        .count() as u32,
                    packet_in_count: counts.packets,
                    byte_in_count: counts.bytes,
                    duration_ms: now.saturating_sub(*since),
                    bands: if counts.bands.is_empty() {
                        vec![(0, 0); m.bands.len()]
                    } else {
                        counts.bands
                    },
                }
            })
            .collect()
    }

    /// Every meter as it is.
    pub fn meter_specs(&self) -> Vec<vsw_flow::MeterSpec> {
        self.ofproto
            .pipeline()
            .meters()
            .map(|(m, _)| (**m).clone())
            .collect()
    }

    /// Every group as it is.
    pub fn group_specs(&self) -> Vec<vsw_flow::GroupSpec> {
        self.ofproto
            .pipeline()
            .groups()
            .map(|g| g.spec.clone())
            .collect()
    }

    /// Every group with its counters (pushed up to now) and its buckets'.
    pub fn dump_groups(&self) -> Vec<GroupInfo> {
        self.dpif.dp().push_flow_stats();
        let now = now_ms();
        let pipeline = self.ofproto.pipeline();
        let uses = |id: u32| {
            pipeline
                .rules()
                .iter()
                .filter(|r| r.spec.actions.contains(&vsw_flow::Action::Group(id)))
                .count()
        };
        pipeline
            .groups()
            .map(|g| GroupInfo {
                group: vsw_flow::format_group(&g.spec),
                group_id: g.spec.id,
                ref_count: uses(g.spec.id) as u32,
                n_packets: g.stats.packets(),
                n_bytes: g.stats.bytes(),
                duration_ms: now.saturating_sub(g.installed_ms),
                buckets: g
                    .bucket_stats
                    .iter()
                    .map(|b| (b.packets(), b.bytes()))
                    .collect(),
            })
            .collect()
    }

    /// The rules a selection (as `del-flows` takes it; `None`: all) picks, with
    /// their counters up to now, and the time.
    pub fn select_rules(
        &self,
        selection: Option<&str>,
        strict: bool,
    ) -> Result<(Vec<Arc<vsw_flow::Rule>>, u64), SwitchError> {
        let selection = match selection {
            Some(text) => parse_match(text, &|n: &str| self.port_no(n))?,
            None => Selection::all(),
        };
        self.dpif.dp().push_flow_stats();
        Ok((self.ofproto.pipeline().select(&selection, strict), now_ms()))
    }

    /// Tables 0..`n`: (table, rules, lookups, matches), counts pushed up to now.
    pub fn table_counts(&self, n: u8) -> Vec<(u8, u32, u64, u64)> {
        self.dpif.dp().push_flow_stats();
        let pipeline = self.ofproto.pipeline();
        (0..n)
            .map(|t| {
                let rules = pipeline.table(t).map_or(0, |c| c.len() as u32);
                let (lookups, matches) = self.ofproto.table_counts(t);
                (t, rules, lookups, matches)
            })
            .collect()
    }

    /// Whether a rule or group bucket of the bridge reads or writes `tun_metadata0`
    /// (then its TLV mapping cannot be taken away).
    pub fn uses_tun_metadata0(&self) -> bool {
        let writes = |actions: &[vsw_flow::Action]| {
            actions
                .iter()
                .any(|a| matches!(a, vsw_flow::Action::SetTunnelMetadata(_)))
        };
        let pipeline = self.ofproto.pipeline();
        pipeline
            .rules()
            .iter()
            .any(|r| r.spec.matcher.mask().tun_metadata0 != 0 || writes(&r.spec.actions))
            || pipeline
                .groups()
                .any(|g| g.spec.buckets.iter().any(|b| writes(&b.actions)))
    }

    /// True when `flow` would overlap a rule of its table and priority (OpenFlow's
    /// CHECK_OVERLAP).
    pub fn overlaps(&self, flow: &str) -> Result<bool, SwitchError> {
        let spec = parse_flow(flow, &|n: &str| self.port_no(n))?;
        Ok(self.ofproto.pipeline().overlaps(&spec))
    }

    /// Puts `pipeline`'s rules in place of the running ones: saved first, then the
    /// datapath flows revalidated (no PMD forwards by what the old rules gave once
    /// this returns), then out of the fast paths whatever they no longer allow.
    fn replace_rules(&mut self, pipeline: Pipeline) -> Result<(), SwitchError> {
        let pending = self.prepare(&self.state_with(None, None, Some(&pipeline)))?;
        // The counts the old rules earned are theirs, not the new rules'.
        self.dpif.dp().push_flow_stats();
        let old = self.ofproto.pipeline();
        self.ofproto.set_pipeline(pipeline);
        let revalidated = self.revalidate_now();
        self.withdraw_offloads();
        // The new file goes in place only once the datapath is revalidated.
        let committed = match revalidated {
            Ok(()) => self.commit(pending),
            Err(e) => Err(e),
        };
        if let Err(e) = committed {
            self.ofproto.set_pipeline((*old).clone());
            if let Err(undo) = self.revalidate_now() {
                tracing::error!(error = %undo, "cannot put the rules back");
            }
            return Err(e);
        }
        Ok(())
    }

    /// Puts a state file written beside the old one in its place: it holds
    /// everything now, and the journal starts again, extending it.
    fn commit(&mut self, pending: PendingState) -> Result<(), SwitchError> {
        let (generation, bytes) = (pending.generation(), pending.bytes());
        pending.commit()?;
        if self.persist {
            self.journal.clear(generation);
            self.state_bytes = bytes;
            self.file_current = true;
            self.unsaved_rules = false;
        }
        Ok(())
    }

    /// [`Switch::replace_rules`] for a change of rules alone, said as the rules it
    /// removes and adds: one line appended to the journal instead of the whole state
    /// file, while the journal is short enough.
    fn replace_rules_noted(
        &mut self,
        pipeline: Pipeline,
        del: Vec<String>,
        added: Vec<String>,
    ) -> Result<(), SwitchError> {
        // The journal is kept within a constant factor of the state file: past it,
        // the state file is written whole (and the journal starts again).
        let limit = JOURNAL_MIN_BYTES.max(2 * self.state_bytes);
        if !self.persist
            || !self.file_current
            || !self.journal.usable()
            || self.journal.bytes() >= limit
        {
            return self.replace_rules(pipeline);
        }
        // Written before the change is made: a journal that cannot be written
        // refuses it.
        self.journal.append(del, added)?;
        self.dpif.dp().push_flow_stats();
        let old = self.ofproto.pipeline();
        self.ofproto.set_pipeline(pipeline);
        let revalidated = self.revalidate_now();
        self.withdraw_offloads();
        if let Err(e) = revalidated {
            // Only a PMD that is gone fails this (and vswd stops); the journal
            // holds the change, which a restart carries out.
            self.ofproto.set_pipeline((*old).clone());
            return Err(e);
        }
        Ok(())
    }

    fn note_removed(&mut self, rule: &Arc<vsw_flow::Rule>, why: Removal, at_ms: u64) {
        if !rule.spec.send_flow_rem {
            return;
        }
        if self.removed.len() == MAX_REMOVED_QUEUED {
            self.removed.pop_front();
        }
        self.removed.push_back(RemovedFlow {
            rule: rule.clone(),
            why,
            at_ms,
        });
    }

    /// The rules that went since the last call and asked to be told of.
    pub fn take_removed(&mut self) -> Vec<RemovedFlow> {
        self.removed.drain(..).collect()
    }

    /// Removes rules whose idle or hard timeout ran out. Called periodically.
    pub fn expire_flows(&mut self) {
        let current = self.ofproto.pipeline();
        let now = now_ms();
        self.save_unsaved_rules(now);
        if !current.has_timeouts() {
            return;
        }
        // The rules' idle times count what the datapath flows forwarded.
        self.dpif.dp().push_flow_stats();
        if !current.any_expired(now) {
            return;
        }
        // What a fast path forwarded counts as use: looked at before anything goes.
        if self.offloads.any() {
            let flows = self.dpif.dp().dump_flows();
            self.offloads.note_activity(&flows, now);
            self.dpif.dp().push_flow_stats();
            if !current.any_expired(now) {
                return;
            }
        }
        let mut pipeline = (*current).clone();
        let gone = pipeline.remove_expired(now);
        let del = gone.iter().map(|r| format_flow(&r.spec)).collect();
        let kept = pipeline.clone();
        if let Err(e) = self.replace_rules_noted(pipeline, del, Vec::new()) {
            // A timeout holds in the running switch whatever the disk says: the
            // rules go now, and the state file is written whole once it can be
            // (until then a restart brings them back, their timeouts afresh).
            if !self.expiry_failing {
                tracing::error!(error = %e, "timed-out flows removed, but not yet from the state file (written whole once the disk takes it)");
            }
            self.expiry_failing = true;
            self.unsaved_rules = true;
            if let (_, Err(e)) = self.install_pipeline(kept) {
                tracing::error!(error = %e, "cannot revalidate the datapath flows");
            }
        }
        for r in &gone {
            tracing::info!(flow = %format_flow(&r.spec), "flow timed out");
            let why = if r.hard_expired(now) {
                Removal::HardTimeout
            } else {
                Removal::IdleTimeout
            };
            self.note_removed(r, why, now);
        }
    }

    /// Rules changed that the disk refused to hold: the state file written whole,
    /// tried at most once a second.
    fn save_unsaved_rules(&mut self, now: u64) {
        if !self.unsaved_rules || now.saturating_sub(self.unsaved_tried_ms) < 1000 {
            return;
        }
        self.unsaved_tried_ms = now;
        let saved = self
            .prepare(&self.state_with(None, None, None))
            .and_then(|p| self.commit(p));
        if saved.is_ok() {
            tracing::info!("the rules as they run are in the state file again");
            self.expiry_failing = false;
        }
    }

    /// Every rule, its counters up to this moment (what the datapath flows and the
    /// fast paths forwarded is pushed to the rules first), and the time now.
    pub fn rules_counted(&self) -> (Vec<Arc<vsw_flow::Rule>>, u64) {
        self.push_rule_counts();
        (self.ofproto.pipeline().rules(), now_ms())
    }

    /// Counts up to this moment: what the datapath flows (and the fast paths for
    /// them) forwarded goes to the rules. Returns the datapath flows looked at.
    fn push_rule_counts(&self) -> Vec<Arc<vsw_datapath::DpFlow>> {
        let flows = self.dpif.dp().dump_flows();
        self.offloads.count(&flows);
        self.dpif.dp().push_flow_stats();
        flows
    }

    fn dump_flows(&self) -> Vec<FlowInfo> {
        let flows = self.push_rule_counts();
        let served = self.offloads.by_rule(&flows);
        let now = now_ms();
        self.ofproto
            .pipeline()
            .rules()
            .iter()
            .map(|r| {
                let o = served
                    .get(&Arc::as_ptr(r))
                    .cloned()
                    .unwrap_or_else(|| self.offloads.rule_without_flows());
                FlowInfo {
                    flow: format_flow(&r.spec),
                    table: r.spec.table,
                    priority: r.spec.priority,
                    matching: format_match(&r.spec.matcher),
                    actions: format_actions(&r.spec.actions),
                    n_packets: r.stats.packets(),
                    n_bytes: r.stats.bytes(),
                    duration_ms: r.duration_ms(now),
                    idle_age_s: r.idle_age_s(now),
                    idle_timeout: r.spec.idle_timeout,
                    hard_timeout: r.spec.hard_timeout,
                    cookie: r.spec.cookie,
                    offloaded: o.offloaded,
                    offload_status: o.status,
                    pps: o.pps,
                }
            })
            .collect()
    }

    fn dump_dp_flows(&self) -> Vec<DpFlowInfo> {
        self.dp_flow_views(true)
    }

    /// The datapath flows received on this bridge's ports as `dpctl/dump-flows`
    /// shows the datapath: in its port numbers.
    pub fn datapath_flows(&self) -> Vec<DpFlowInfo> {
        self.dp_flow_views(false)
    }

    /// The datapath flows received on this bridge's ports, in its OpenFlow numbers
    /// (`of_numbers`) or the datapath's.
    fn dp_flow_views(&self, of_numbers: bool) -> Vec<DpFlowInfo> {
        let now = now_ms();
        let mut flows = self.dpif.dp().dump_flows();
        self.offloads.count(&flows);
        // This bridge's (received on its ports), in its OpenFlow numbers.
        flows.retain(|f| !f.is_dead() && self.of_no(f.key.in_port).is_some());
        flows.sort_by_key(|f| f.id);
        flows
            .iter()
            .map(|f| {
                let s = f.stats();
                let o = self.offloads.dp_flow(f);
                let (mut value, mask) = (*f.matcher.value(), *f.matcher.mask());
                let actions = if of_numbers {
                    value.in_port = self.of_no(value.in_port).unwrap_or(value.in_port);
                    self.actions_in_of_numbers(&f.actions)
                } else {
                    f.actions.to_vec()
                };
                DpFlowInfo {
                    id: f.id,
                    core: f.core,
                    matching: format_match(&vsw_flow::Match::new(value, mask)),
                    packets: s.packets,
                    bytes: s.bytes,
                    used_s: s.used_ms.map(|t| now.saturating_sub(t) as f64 / 1000.0),
                    actions: format_dp_actions(&actions),
                    offloaded: o.offloaded,
                    offload_reason: (!o.offloaded && o.status != "off").then(|| o.status.clone()),
                    dp: match o.offloaded {
                        true => self.offloads.kind_of(f.key.in_port).into(),
                        false => "ovs".into(),
                    },
                }
            })
            .collect()
    }

    /// Which PMD polls which queue, this bridge's ports in OpenFlow numbers.
    pub fn rxq_show(&self) -> Vec<vsw_datapath::stats::PmdRxqView> {
        let mut views = self.dpif.dp().rxq_show();
        for v in &mut views {
            for q in &mut v.queues {
                q.port_no = self.of_no(q.port_no).unwrap_or(q.port_no);
            }
        }
        views
    }

    fn dpif_show(&self) -> DpifInfo {
        let (mut hit, mut missed, mut lost) = (0, 0, 0);
        let dp = self.dpif.dp();
        for p in dp.pmd_stats() {
            hit += p.emc_hits + p.megaflow_hits;
            missed += p.upcalls + p.lost_upcalls;
            lost += p.lost_upcalls;
        }
        DpifInfo {
            flows: dp.flow_count(),
            flow_limit: dp.flow_limit(),
            hit,
            missed,
            lost,
            xlate_errors: self.ofproto.xlate_errors(),
            tables: self.ofproto.pipeline().table_sizes(),
            ports: self
                .ports
                .iter()
                .map(|(no, p)| (*no, p.name.clone()))
                .collect(),
        }
    }

    fn fdb_show(&self) -> Vec<vsw_protocol::FdbEntryView> {
        self.ofproto
            .mac_entries(now_ms())
            .into_iter()
            .map(|e| vsw_protocol::FdbEntryView {
                port: e.port,
                vlan: e.vlan,
                mac: e.mac.to_string(),
                age_s: e.age_s,
            })
            .collect()
    }

    pub fn port_infos(&self) -> Vec<PortInfo> {
        let dp = self.dpif.dp();
        self.ports
            .iter()
            .map(|(no, p)| {
                // What the port is, with the defaults its options were saved without.
                let mut options = p.options.clone();
                p.parsed.write_out_defaults(&mut options);
                PortInfo {
                    no: *no,
                    name: p.name.clone(),
                    status: match &p.link {
                        Link::Up { .. } => "up".into(),
                        Link::Down { why } => format!("down: {why}"),
                    },
                    options: options.into_iter().collect(),
                    stats: p.stats.view(),
                    mtu: p.device.mtu(),
                    mtu_problem: p.mtu_problem.clone(),
                    vhost_guest: p.device.peer_status(),
                    vhost_counters: p.device.guest_counters(),
                    vhost_server_path: p.device.socket_path().map(|s| s.display().to_string()),
                    ifindex: match p.link {
                        Link::Up { ifindex } if ifindex != 0 => Some(ifindex),
                        _ => None,
                    },
                    tx_flush_interval_us: dp.tx_flush_of(self.dp_no(*no)).0,
                    tx_flush_interval_from: format!("{:?}", dp.tx_flush_of(self.dp_no(*no)).1)
                        .to_lowercase(),
                }
            })
            .collect()
    }

    /// The OpenFlow datapath id: `datapath-id` when set, else one made from the
    /// state file's path (stable across restarts; two switches with different state
    /// files differ), in the low 48 bits as Open vSwitch's MAC-derived ids are.
    pub fn datapath_id(&self) -> u64 {
        if let Some(id) = SwitchOptions::from_options(&self.options)
            .ok()
            .and_then(|o| o.datapath_id)
        {
            return id;
        }
        let path = std::fs::canonicalize(&self.state_file).unwrap_or(self.state_file.clone());
        // FNV-1a: small, stable across builds and platforms.
        let hash = path
            .as_os_str()
            .as_encoded_bytes()
            .iter()
            .fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
                (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
            });
        hash & 0x0000_ffff_ffff_ffff
    }

    /// The slow path (for what comes up from the datapath: punted packets' notes).
    pub fn ofproto(&self) -> Arc<Ofproto> {
        self.ofproto.clone()
    }

    /// Fail open or not (the controllers' manager decides): the datapath flows are
    /// revalidated at once, so no packet is forwarded by the other mode's flows.
    pub fn set_fail_open(&mut self, open: bool) {
        if self.ofproto.set_fail_open(open) {
            if let Err(e) = self.revalidate_now() {
                tracing::error!(error = %e, "cannot revalidate the datapath flows");
            }
            self.withdraw_offloads();
        }
    }

    /// The datapath this bridge is in.
    pub fn dpif(&self) -> Arc<Dpif> {
        self.dpif.clone()
    }

    /// The datapath's backer and this bridge's number in it (for what comes up from
    /// the datapath: the bridge a punted packet's note names, its input port).
    pub fn backer_slot(&self) -> (Arc<Backer>, BridgeSlot) {
        (self.dpif.backer().clone(), self.slot)
    }

    /// The datapath's queues of packets to and from the control side.
    pub fn punts(&self) -> vsw_datapath::Punts {
        self.dpif.dp().punts()
    }

    /// The controllers to connect to, the fail mode and the inactivity probe (ms).
    /// The OpenFlow versions the bridge speaks (`protocols`).
    pub fn openflow_versions(&self) -> vsw_openflow::VersionSet {
        SwitchOptions::from_options(&self.options)
            .map_or(vsw_openflow::VersionSet::VSW, |o| o.protocols)
    }

    pub fn controller_config(&self) -> (Vec<vsw_openflow::Target>, FailMode, u64) {
        match SwitchOptions::from_options(&self.options) {
            Ok(o) => (o.controllers, o.fail_mode, o.inactivity_probe_ms),
            Err(_) => (Vec::new(), FailMode::default(), DEFAULT_INACTIVITY_PROBE_MS),
        }
    }

    /// Sends a controller's packet: `actions` (flow syntax) are read against the
    /// packet's own headers, translated as a rule of table 0 would be, and queued
    /// for a PMD, which has sent it when this returns. A packet that finds the
    /// queue full is dropped (said in the log), as a switch drops what it has no
    /// room for.
    pub fn packet_out(
        &self,
        in_port: u32,
        actions: &str,
        frame: &[u8],
    ) -> Result<(), vsw_openflow::Refusal> {
        use vsw_openflow::Refusal;
        let mut key = vsw_packet::FlowKey::default();
        vsw_packet::extract(frame, in_port, None, &mut key).map_err(|_| Refusal::BadPacket)?;
        let exact = vsw_flow::Match::new(key, vsw_packet::FlowKey::exact());
        let actions = vsw_flow::parse_actions(actions, &|n: &str| self.port_no(n), &exact)
            .map_err(|e| {
                tracing::info!(error = %e, "OpenFlow packet-out refused");
                Refusal::BadArgument
            })?;
        // In the datapath's numbers (the bridge is in the backer).
        let x = self.ofproto.translate_packet_out(&key, &actions, now_ms());
        let packet = vsw_datapath::Injected {
            in_port: self.injected_in_port(in_port),
            actions: x.actions,
            frame: frame.to_vec(),
        };
        // Sent before the answer: a barrier after a packet-out means the packet went.
        let punts = self.dpif.dp().punts();
        match punts.inject(packet) {
            Ok(ticket) => {
                if !punts.wait_sent(ticket, Duration::from_millis(100)) {
                    tracing::warn!("OpenFlow packet-out not sent within 100 ms");
                }
            }
            Err(_) => tracing::warn!("OpenFlow packet-out dropped: the PMDs' queue is full"),
        }
        Ok(())
    }

    /// What `/metrics` reads of this switch: copies of its ports' and PMDs' counters
    /// (atomics the PMDs write; nothing a PMD locks) and its flow limit.
    pub fn metrics(&self) -> SwitchMetrics {
        let (pmds, flow_limit) = {
            let dp = self.dpif.dp();
            (dp.pmd_stats_total(), dp.flow_limit() as u64)
        };
        SwitchMetrics {
            ports: self.port_infos(),
            pmds,
            flow_limit,
            offloads: self.offloads.show(),
            control_latency: self.latencies.snapshot(),
        }
    }

    /// Each port's number and counters.
    pub fn port_counters(&self) -> Vec<(u32, vsw_protocol::PortStatsView)> {
        self.ports
            .iter()
            .map(|(no, p)| (*no, p.stats.view()))
            .collect()
    }

    /// The ports as OpenFlow describes them: number, name, link, and the
    /// interface's MAC address where there is an interface (else one made from the
    /// port number, locally administered).
    pub fn openflow_ports(&self) -> Vec<vsw_openflow::PortInfo> {
        self.ports
            .iter()
            .map(|(no, p)| {
                let hw_addr = vsw_netdev::interface::mac(&p.name).map_or_else(
                    || {
                        let n = no.to_be_bytes();
                        [0x02, 0, n[0], n[1], n[2], n[3]]
                    },
                    |m| m.0,
                );
                vsw_openflow::PortInfo {
                    port_no: vsw_openflow::flow_mod::to_of_port(*no),
                    hw_addr,
                    name: p.name.clone(),
                    admin_down: false,
                    link_up: matches!(p.link, Link::Up { .. }),
                    curr_speed_kbps: 0,
                    max_speed_kbps: 0,
                }
            })
            .collect()
    }

    fn show(&self) -> ShowInfo {
        // One look at the datapath (its lock is taken once: not again while held).
        let (pmd_cores, pmd_rxq_assign, emc_insert_inv_prob) = {
            let dp = self.dpif.dp();
            (
                dp.pmd_cores(),
                dp.rxq_assign().to_string(),
                dp.emc_insert_inv_prob(),
            )
        };
        ShowInfo {
            options: self.options.clone().into_iter().collect(),
            pmd_cores,
            pmd_rxq_assign,
            emc_insert_inv_prob,
            socket: self.socket.clone(),
            state_file: self.state_file.display().to_string(),
            ports: self.port_infos(),
            flows: self.ofproto.pipeline().len(),
        }
    }
}

impl Drop for Switch {
    /// The bridge leaves its datapath's backer (its ports left with `shutdown`, or
    /// go with the datapath when it is the bridge's own).
    fn drop(&mut self) {
        self.dpif.backer().remove_bridge(self.slot);
    }
}

/// Whether going from options `old` to `new` flushes the tables, as Open vSwitch's
/// connection manager does: controllers came where there were none (or all went),
/// or the fail mode changed while there are none.
fn flushes_tables(old: &SwitchOptions, new: &SwitchOptions) -> bool {
    let (had, has) = (!old.controllers.is_empty(), !new.controllers.is_empty());
    had != has || (old.fail_mode != new.fail_mode && !has)
}

/// The tables after a flush: nothing, or for a standalone bridge without a
/// controller the learning switch's rule.
fn flushed_pipeline(opts: &SwitchOptions) -> Pipeline {
    if opts.wants_learning_flow() {
        Pipeline::learning_switch(now_ms())
    } else {
        Pipeline::new()
    }
}

/// `type=offloaded|ovs|all` of the dumps: whether to keep offloaded flows, others,
/// or all.
fn offloaded_filter(kind: Option<&str>) -> Result<Option<bool>, SwitchError> {
    match kind {
        None | Some("all") => Ok(None),
        Some("offloaded") => Ok(Some(true)),
        Some("ovs") => Ok(Some(false)),
        Some(other) => Err(SwitchError::BadDumpType(other.to_string())),
    }
}

/// A port's options read, and its class's own checked into its device (not opened).
fn configure(
    classes: &PortClasses,
    env: &ClassEnv,
    name: &str,
    options: &Options,
) -> Result<(PortOptions, Box<dyn PortDevice>), SwitchError> {
    let parsed = PortOptions::from_options(options, classes)?;
    let device = parsed.class.configure(name, &parsed.class_options, env)?;
    Ok((parsed, device))
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
