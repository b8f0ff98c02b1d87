//! The switch as the control plane sees it: ports by name, options, flows. Applies
//! commands to the datapath, validating each completely before changing anything, and
//! persists the result. Ports are known through their class (`vsw_netdev::class`):
//! nothing here depends on what kind of device a port is.
//!
//! This file holds the switch's state and the door every request comes through
//! (`Switch::handle`); each of its jobs has a file: `start` (restored or new),
//! `settings` (options), `attach` (ports in the datapath, their numbers, links),
//! `ports` (the port commands), `rules` (flows, groups, meters), `persist` (state
//! file, journal, timeouts), `offloads` (the offload managers), `views` (what it
//! shows).

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
use vsw_netdev::tunnel::TunnelWorld;
use vsw_netdev::{interface, NetdevError};
use vsw_ofproto::{Backer, BackerError, BridgeSlot, Ofproto};

use crate::dpif::{DaemonSettings, Dpif};

use crate::journal::{Journal, JournalEntry, RecordText};
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

mod attach;
mod bundle_stage;
mod offloads;
mod persist;
mod ports;
mod rules;
mod settings;
mod start;
mod views;

pub use bundle_stage::BundleStage;
pub use persist::record_text;
pub use rules::StagedRun;
pub use start::Join;

#[derive(Debug, thiserror::Error)]
pub enum SwitchError {
    #[error(transparent)]
    Option(#[from] OptionError),
    #[error("dump-flows type must be offloaded, ovs or all, not '{0}'")]
    BadDumpType(String),
    #[error("bad flow: {0}")]
    Flow(#[from] FlowSyntaxError),
    #[error("{0}")]
    Conntrack(String),
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
#[derive(Debug)]
pub enum FlowChange {
    /// `add-flow`; `check_overlap`: refused if it overlaps a rule of its table and
    /// priority (OpenFlow's CHECK_OVERLAP).
    Add {
        /// The rule, made whole before the tables are changed.
        rule: vsw_flow::PreparedRule,
        check_overlap: bool,
        /// The rule's line in the state file, when it was made beforehand (a
        /// bundled flow-mod's, when it was added: the commit then does only what
        /// depends on the tables).
        saved_as: Option<RecordText>,
    },
    /// `del-flows`: the rules the selection picks.
    Delete { selection: Selection, strict: bool },
    /// `mod-flows`: the selected rules get these actions (checked against each
    /// rule's match).
    Modify {
        selection: Selection,
        actions: Vec<vsw_flow::Action>,
        /// How the front end wrote the actions (not kept: said from what they do).
        written: vsw_flow::Written,
        strict: bool,
        reset_counts: bool,
        /// OpenFlow 1.0's modify: selecting no rule, it adds this one (and
        /// whether it is refused if it overlaps one, CHECK_OVERLAP).
        or_add: Option<(Box<vsw_flow::FlowSpec>, bool)>,
    },
}

impl FlowChange {
    /// An add of `spec`, refused here if no OpenFlow message could describe the
    /// rule again (so a bundle's commit, which carries out adds made earlier, has
    /// nothing left to check of the rule alone).
    pub fn add(spec: vsw_flow::FlowSpec, check_overlap: bool) -> Result<FlowChange, SwitchError> {
        if !vsw_openflow::as_written::rule_fits_openflow(&spec) {
            return Err(SwitchError::TooLarge("flow"));
        }
        Ok(FlowChange::Add {
            rule: vsw_flow::PreparedRule::new(spec),
            check_overlap,
            saved_as: None,
        })
    }
}

/// What a change of the tables no longer needs, whose freeing can wait until the
/// change is answered: a bundle of 100,000 adds lets go of as many texts and rule
/// handles, and freeing them took a tenth of its commit.
#[derive(Default)]
pub struct Leftovers(Vec<Box<dyn std::any::Any + Send>>);

impl Leftovers {
    fn keep<T: Send + 'static>(&mut self, t: T) {
        self.0.push(Box::new(t));
    }
}

/// One change of a committed bundle ([`Switch::commit_changes`]).
#[derive(Debug)]
pub enum Change {
    Flow(Box<FlowChange>),
    /// `add-group` (`modify`: `mod-group`).
    SetGroup {
        spec: vsw_flow::GroupSpec,
        modify: bool,
    },
    /// `del-groups` (`None`: all), with the rules that hand packets to them.
    DelGroups(Option<u32>),
}

enum Link {
    Up {
        ifindex: u32,
    },
    Down {
        why: String,
    },
    /// Down: its interface does not exist (yet).
    NoDevice,
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

/// The bridge's name unless told otherwise: named as Open vSwitch's usual first one.
pub const BRIDGE_NAME: &str = "br0";

/// Removed rules kept for the controllers at most (nobody may be taking them).
pub const MAX_REMOVED_QUEUED: usize = 10_000;

pub(crate) fn now_ms() -> u64 {
    vsw_datapath::clock::now_ms()
}

impl Switch {
    pub fn pmd_cores(&self) -> Vec<usize> {
        self.dpif.dp().pmd_cores()
    }

    /// A PMD that failed (its thread panicked), and why.
    pub fn failed_pmd(&self) -> Option<(usize, String)> {
        self.dpif.dp().failed_pmd()
    }

    /// The bridge's name.
    pub fn bridge_name(&self) -> &str {
        &self.bridge
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
        let kind = req.kind();
        self.answered(kind, |sw| sw.answer(req))
    }

    /// Carries out a request of `kind` (whichever front end asked): its latency
    /// counted, and the ports it attached or detached flooded to (or not) from the
    /// moment it is answered.
    pub fn answered<T>(
        &mut self,
        kind: &'static str,
        f: impl FnOnce(&mut Switch) -> Result<T, SwitchError>,
    ) -> Result<T, SwitchError> {
        let started = std::time::Instant::now();
        let result = f(self);
        self.sync_flood_ports();
        self.latencies.observe(kind, started.elapsed());
        result
    }

    fn answer(&mut self, req: Request) -> Result<Value, SwitchError> {
        match req {
            Request::Show => Ok(json!(self.show())),
            // Options come as `key=value` words: read here, at the edge.
            Request::Set { options } => self.set(&options::parse_pairs(&options)?),
            Request::AddPort { name, options } => {
                self.add_port(&name, options::parse_pairs(&options)?)
            }
            Request::DelPort { name } => self.del_port(&name),
            Request::SetPort { name, options } => {
                self.set_port(&name, &options::parse_pairs(&options)?)
            }
            Request::AddFlow { flow } => self.add_flows(&[flow]),
            Request::AddFlows { flows } => self.add_flows(&flows),
            Request::DelFlows { matching, strict } => self.del_flows(matching.as_deref(), strict),
            Request::ModFlows {
                flow,
                strict,
                reset_counts,
            } => self.mod_flows(&flow, strict, reset_counts),
            Request::AddGroup { group } => self.set_group_text(&group, false),
            Request::ModGroup { group } => self.set_group_text(&group, true),
            Request::DelGroups { group_id } => self.del_groups(group_id),
            Request::DumpGroups => Ok(json!(self.dump_groups())),
            Request::AddMeter { meter } => self.set_meter(vsw_flow::parse_meter(&meter)?, false),
            Request::ModMeter { meter } => self.set_meter(vsw_flow::parse_meter(&meter)?, true),
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
            Request::Trace { flow } => Ok(json!(self.trace(&flow)?)),
            Request::DpifShow => Ok(json!(self.dpif_show())),
            Request::FdbShow => Ok(json!(self.fdb_show())),
            Request::FdbFlush => self.flush_fdb().map(|()| Value::Null),
            Request::Conntrack { command, args } => {
                crate::conntrack_ctl::run(self.dpif.conntrack(), &command, &args)
                    .map(|text| json!(text))
                    .map_err(SwitchError::Conntrack)
            }
            Request::DumpPorts => Ok(json!(self.port_infos())),
            Request::PmdStatsShow => Ok(json!(self.pmd_stats())),
            Request::PmdStatsClear => {
                self.clear_pmd_stats();
                Ok(Value::Null)
            }
            Request::PmdRxqShow => Ok(json!(self.rxq_show())),
            Request::PmdRxqRebalance => Ok(json!(self.rebalance_rxqs()?)),
            Request::DebugPmdFailure { core } => {
                if std::env::var("VSWD_FAULT_INJECTION").as_deref() != Ok("1") {
                    return Err(SwitchError::NoFaultInjection);
                }
                self.dpif.dp().inject_pmd_failure(core)?;
                Ok(Value::Null)
            }
        }
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

    /// Sends a controller's packet: `actions` are checked against the packet's own
    /// headers, translated as a rule of table 0 would be (with what `metadata`
    /// matches: registers, metadata, a tunnel), and queued
    /// for a PMD, which has sent it when this returns. A packet that finds the
    /// queue full is dropped (said in the log), as a switch drops what it has no
    /// room for.
    pub fn packet_out(
        &self,
        in_port: u32,
        metadata: &vsw_flow::Match,
        actions: &[vsw_flow::Action],
        frame: &[u8],
    ) -> Result<(), vsw_openflow::Refusal> {
        use vsw_openflow::Refusal;
        let mut key = vsw_packet::FlowKey::default();
        vsw_packet::extract(frame, in_port, None, &mut key).map_err(|_| Refusal::BadPacket)?;
        let exact = vsw_flow::Match::new(key, vsw_packet::FlowKey::exact());
        vsw_flow::check_actions(actions, Some(&exact)).map_err(|e| {
            tracing::info!(error = %e, "OpenFlow packet-out refused");
            match e {
                vsw_flow::FlowSyntaxError::ActionPrerequisite { .. } => {
                    Refusal::FlowMod(vsw_openflow::flow_mod::BadFlowMod::MatchInconsistent)
                }
                _ => Refusal::BadArgument,
            }
        })?;
        let carried = carried(key, metadata);
        // In the datapath's numbers (the bridge is in the backer).
        let x = self
            .ofproto
            .translate_packet_out(&carried, actions, now_ms());
        self.inject(in_port, x, frame);
        Ok(())
    }

    /// Continues the translation a `controller(pause)` stopped (its note `note`,
    /// `check` its continuation's) for the packet the controller sent back, with
    /// the fields it said (`metadata`, its `in_port` among them), and queues what
    /// that gives for a PMD, as a packet-out's.
    pub fn resume(
        &self,
        metadata: &vsw_flow::Match,
        (note, check): (u32, u64),
        frame: &[u8],
    ) -> Result<(), vsw_openflow::Refusal> {
        use vsw_openflow::Refusal;
        if metadata.mask().in_port == 0 {
            return Err(Refusal::BadArgument);
        }
        let in_port = metadata.value().in_port;
        let mut key = vsw_packet::FlowKey::default();
        vsw_packet::extract(frame, in_port, None, &mut key).map_err(|_| Refusal::BadPacket)?;
        let carried = carried(key, metadata);
        let Some(x) = self
            .ofproto
            .translate_resume(&carried, note, check, now_ms())
        else {
            tracing::info!(
                note,
                "OpenFlow resume of no paused translation (gone, or another's): refused"
            );
            return Err(Refusal::BadArgument);
        };
        self.inject(in_port, x, frame);
        Ok(())
    }

    /// Queues `frame` with its translation `x` for a PMD, and waits (briefly) until
    /// it is sent: a barrier after a packet-out means the packet went.
    fn inject(&self, in_port: u32, x: vsw_ofproto::Xlated, frame: &[u8]) {
        let packet = vsw_datapath::Injected {
            in_port: self.injected_in_port(in_port),
            actions: x.actions,
            headers: x.pushed,
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
    }
}

/// A packet's key with what a controller says it carries besides its bytes
/// (metadata, registers, a tunnel): `metadata`'s value where it has a mask.
fn carried(key: vsw_packet::FlowKey, metadata: &vsw_flow::Match) -> vsw_flow::MatchKey {
    let mut carried = vsw_flow::MatchKey::from(key);
    let given = metadata.value().words().iter().zip(metadata.mask().words());
    for (w, (v, m)) in carried.words_mut().iter_mut().zip(given) {
        *w = (*w & !m) | (v & m);
    }
    carried
}

impl Drop for Switch {
    /// The bridge leaves its datapath's backer (its ports left with `shutdown`, or
    /// go with the datapath when it is the bridge's own).
    fn drop(&mut self) {
        self.dpif.backer().remove_bridge(self.slot);
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
