//! vswd as `ovs-vswitchd`: configured through the stock `ovsdb-server`.
//!
//! One thread keeps a connection to the database (reconnecting with backoff), takes
//! the lock `ovs_vswitchd` (so two daemons never carry out one database), monitors
//! the tables ovs-vswitchd reads, and after every change carries out what they ask
//! (`config.rs` reads it): a running bridge (`bridges.rs`) per `Bridge` row, started
//! and stopped with it, configured through the same requests as `vswctl`. Then it
//! writes back
//! what ovs-vswitchd writes: each interface's `ofport`, `error`, `admin_state`,
//! `link_state`, `mtu`, `mac_in_use`, the bridge's `datapath_id`, and `cur_cfg =
//! next_cfg` in the same transaction (so `ovs-vsctl` without `--no-wait` returns once
//! the change is live, also when a port failed); interface `statistics` every 5 s.
//! The database is the truth: the switch keeps no state file meanwhile.

pub mod config;
pub mod link;
mod write_back;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::mpsc::RecvTimeoutError;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use vsw_ovsdb::datum::{make_map, make_set, make_uuid};
use vsw_ovsdb::{Client, Event, OvsdbError, Replica, Target};
use vsw_protocol::Request;

use crate::bridges::Bridges;
use crate::switch::Switch;
use config::{desired, Desired, DesiredBridge, DesiredInterface};

/// Where the kernel lists the interfaces of vswd's namespace.
const SYS_CLASS_NET: &str = "/sys/class/net";

/// The database ovs-vswitchd serves.
pub const DB: &str = "Open_vSwitch";
/// The lock ovs-vswitchd takes.
pub const LOCK: &str = "ovs_vswitchd";
/// How often interface statistics are written (as ovs-vswitchd).
pub const STATS_INTERVAL: Duration = Duration::from_secs(5);
/// How often the links are looked at between changes (link_state follows).
const LINK_INTERVAL: Duration = Duration::from_millis(500);
const BACKOFF_MIN: Duration = Duration::from_secs(1);
const BACKOFF_MAX: Duration = Duration::from_secs(8);

/// A bridge's options it is started with, not set after: what decides whether its
/// tables start as a learning switch.
const FROM_THE_START: &[&str] = &["fail-mode", "controller"];

/// Starts the thread that carries out the database at `target`: its bridges run in
/// `bridges`.
pub fn start(bridges: Arc<Bridges>, target: Target, run_dir: PathBuf) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("vsw-ovsdb".into())
        .spawn(move || {
            let mut sync = Sync {
                bridges,
                run_dir: run_dir.display().to_string(),
                applied: BTreeMap::new(),
                errors: BTreeMap::new(),
                written_stats: BTreeMap::new(),
                carrier_base: BTreeMap::new(),
                ct_timeouts: BTreeMap::new(),
            };
            let mut backoff = BACKOFF_MIN;
            loop {
                match Client::connect(&target) {
                    Ok(c) => {
                        backoff = BACKOFF_MIN;
                        let e = sync.session(&c);
                        tracing::warn!(%target, error = %e, "the OVSDB session ended; reconnecting");
                        sync.before_waiting();
                    }
                    Err(e) => {
                        tracing::warn!(%target, error = %e, "no OVSDB server yet");
                        sync.before_waiting();
                    }
                }
                std::thread::sleep(backoff);
                backoff = (backoff * 2).min(BACKOFF_MAX);
            }
        })
        .map(|_| ())
}

/// What the sync loop carried out, kept across reconnections (so a new session
/// changes only what changed; the bridges run on meanwhile).
struct Sync {
    bridges: Arc<Bridges>,
    run_dir: String,
    /// Per bridge (by name), what was carried out on it.
    applied: BTreeMap<String, Applied>,
    /// Interface (UUID) → why it is not a port.
    errors: BTreeMap<String, String>,
    /// Interface (UUID) → the statistics last written.
    written_stats: BTreeMap<String, Value>,
    /// Interface (UUID) → the kernel's carrier change count when vswd first saw
    /// it: `link_resets` counts from there, as ovs-vswitchd counts from its start.
    carrier_base: BTreeMap<String, u64>,
    /// Zones' timeout policies given to the tracker.
    ct_timeouts: BTreeMap<u16, vsw_conntrack::Timeouts>,
}

/// What one bridge was given.
#[derive(Default)]
struct Applied {
    /// Ports made from the database: name → the vsw options they were made with.
    ports: BTreeMap<String, BTreeMap<String, String>>,
    /// Options in effect, as the database gave them.
    options: BTreeMap<String, String>,
    /// Options the switch refused (key → the value refused, and why): tried again
    /// at every look until taken, said once per value.
    refused: BTreeMap<String, (String, String)>,
}

fn monitor_requests() -> Value {
    json!({
        "Open_vSwitch": {"columns": ["bridges", "next_cfg", "cur_cfg", "other_config",
                                      "datapath_types", "iface_types", "datapaths"]},
        "Datapath": {"columns": ["capabilities", "ct_zones"]},
        "CT_Zone": {"columns": ["timeout_policy"]},
        "CT_Timeout_Policy": {"columns": ["timeouts"]},
        "Bridge": {"columns": ["name", "ports", "datapath_type", "fail_mode", "other_config",
                               "controller", "datapath_id", "protocols",
                               "mcast_snooping_enable"]},
        "Port": {"columns": ["name", "interfaces"]},
        "Interface": {"columns": ["name", "type", "ofport_request", "mtu_request", "options",
                                  "other_config", "ofport", "error", "admin_state",
                                  "link_state", "mtu", "mac_in_use", "status", "ifindex",
                                  "link_speed", "duplex", "link_resets"]},
        "Controller": {"columns": ["target", "is_connected", "status"]},
    })
}

impl Sync {
    /// Before vswd waits for a database it cannot read yet (no server, or its lock
    /// held elsewhere): the kernel fast paths an earlier run pinned that no port of
    /// a running bridge adopted go now. Nothing forwards by a configuration vswd has
    /// not read, however long the wait.
    fn before_waiting(&self) {
        self.bridges.remove_unadopted_offloads();
    }

    /// One connection's life: lock, monitor, carry out every change; the error that
    /// ended it.
    fn session(&mut self, c: &Client) -> OvsdbError {
        match self.run(c) {
            Ok(never) => match never {},
            Err(e) => e,
        }
    }

    fn run(&mut self, c: &Client) -> Result<std::convert::Infallible, OvsdbError> {
        if !c.lock(LOCK)? {
            tracing::info!(
                lock = LOCK,
                "another daemon holds the database's lock; waiting"
            );
            self.before_waiting();
            loop {
                match c.events().recv() {
                    Ok(Event::Locked(_)) => break,
                    Ok(Event::Closed) | Err(_) => return Err(OvsdbError::Closed),
                    Ok(_) => {}
                }
            }
        }
        let mut replica = Replica::default();
        let initial = c.monitor(DB, json!("vswd"), monitor_requests())?;
        replica
            .apply(&initial)
            .map_err(|e| OvsdbError::Framing(vsw_ovsdb::jsonrpc::FramingError::NotRpc(e.0)))?;
        tracing::info!("carrying out the Open_vSwitch database");
        // Who carries the database out, where ovs-vswitchd writes nothing of its own.
        if let Some((root, _)) = replica.rows("Open_vSwitch").next() {
            let version = make_map([(
                "vswd-version".to_string(),
                env!("CARGO_PKG_VERSION").to_string(),
            )]);
            let identify = json!({"op": "mutate", "table": "Open_vSwitch",
                "where": [["_uuid", "==", make_uuid(root)]],
                "mutations": [["external_ids", "delete", make_set(vec![json!("vswd-version")])],
                              ["external_ids", "insert", version]]});
            c.transact(DB, vec![lock_assert(), identify])?;
        }
        let mut events = Events::new(c);
        self.carry_out(c, &replica, &mut events)?;
        self.bridges.remove_unadopted_offloads();
        crate::service::ready("carrying out the Open_vSwitch database");
        let mut last_stats = Instant::now();
        loop {
            let wait = STATS_INTERVAL
                .saturating_sub(last_stats.elapsed())
                .min(LINK_INTERVAL);
            match events.next(wait)? {
                Some(Event::Update { updates, .. }) => {
                    if let Err(e) = replica.apply(&updates) {
                        tracing::warn!(error = %e, "an OVSDB update vswd cannot read");
                        continue;
                    }
                    // The updates that came meanwhile are carried out with it; the
                    // first other event stops the gathering, in its place.
                    while let Some(updates) = events.next_update()? {
                        if let Err(e) = replica.apply(&updates) {
                            tracing::warn!(error = %e, "an OVSDB update vswd cannot read");
                        }
                    }
                    self.carry_out(c, &replica, &mut events)?;
                }
                Some(_) => {}
                None => {
                    // Ports that could not be made are tried again (an interface
                    // that appears is taken, as ovs-vswitchd takes it); links that
                    // changed, and the statistics when due, are written.
                    let stats = last_stats.elapsed() >= STATS_INTERVAL;
                    if stats {
                        last_stats = Instant::now();
                    }
                    let d = desired(&replica, &self.run_dir);
                    if self.waiting(&d) {
                        self.apply(&d);
                    }
                    events.check_lock()?;
                    self.write_back(c, &replica, &d, stats)?;
                }
            }
        }
    }

    /// Carries out what the database asks, then writes back what came of it — not
    /// if the lock was stolen meanwhile (then the session ends at once). Statistics
    /// wait for their tick.
    fn carry_out(
        &mut self,
        c: &Client,
        replica: &Replica,
        events: &mut Events<'_>,
    ) -> Result<(), OvsdbError> {
        let d = desired(replica, &self.run_dir);
        self.apply(&d);
        events.check_lock()?;
        self.write_back(c, replica, &d, false)
    }

    /// Whether an interface that could be a port is not one yet, or an option the
    /// switch refused waits to be tried again.
    fn waiting(&self, d: &Desired) -> bool {
        d.bridges.iter().any(|b| {
            let applied = self.applied.get(&b.name);
            let made = applied.map(|a| &a.ports);
            applied.is_some_and(|a| !a.refused.is_empty())
                || b.interfaces
                    .iter()
                    .any(|i| i.port.is_ok() && !made.is_some_and(|m| m.contains_key(&i.name)))
        })
    }

    fn apply(&mut self, d: &Desired) {
        self.errors.clear();
        // Bridges the database no longer has stop (their internal ports with them).
        for name in self.bridges.names() {
            if !d.bridges.iter().any(|b| b.name == name) {
                self.bridges.stop(&name);
                self.applied.remove(&name);
            }
        }
        // Ports that went, from every bridge first: one that moved to another
        // bridge in the same transaction is let go before it is taken again.
        for b in &d.bridges {
            if let (Some(rb), Some(applied)) =
                (self.bridges.get(&b.name), self.applied.get_mut(&b.name))
            {
                remove_gone(&mut rb.lock(), applied, b);
            }
        }
        for b in &d.bridges {
            let rb = match self.bridges.get(&b.name) {
                Some(rb) => rb,
                None => {
                    // Born with its fail mode and controllers: a secure bridge is
                    // never a learning switch, not even before its options are set.
                    let born: BTreeMap<String, String> = b
                        .options
                        .iter()
                        .filter(|(k, _)| FROM_THE_START.contains(&k.as_str()))
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect();
                    match self.bridges.start_unsaved(
                        &b.name,
                        vsw_netdev::class::PortClasses::standard(),
                        &born,
                    ) {
                        Ok(rb) => {
                            self.applied.insert(
                                b.name.clone(),
                                Applied {
                                    options: born,
                                    ..Applied::default()
                                },
                            );
                            rb
                        }
                        Err(e) => {
                            tracing::warn!(bridge = %b.name, error = %e, "cannot start a bridge of the database");
                            for i in &b.interfaces {
                                self.errors.insert(
                                    i.uuid.clone(),
                                    format!("bridge {} cannot start: {e}", b.name),
                                );
                            }
                            continue;
                        }
                    }
                }
            };
            let applied = self.applied.entry(b.name.clone()).or_default();
            let mut sw = rb.lock();
            apply_options(&mut sw, applied, &d.switch_options, b);
            make_ports(&mut sw, applied, &mut self.errors, b);
        }
        self.apply_ct_timeouts(&d.ct_timeouts);
    }

    /// Zones' timeout policies to the datapath's tracker: what changed since the
    /// last time (none while no bridge runs: taken when one does).
    fn apply_ct_timeouts(&mut self, wanted: &BTreeMap<u16, BTreeMap<String, i64>>) {
        let Some(dpif) = self.bridges.dpif() else {
            return;
        };
        let ct = dpif.conntrack();
        let mut now = BTreeMap::new();
        for (zone, timeouts) in wanted {
            let mut t = vsw_conntrack::Timeouts::default();
            for (name, secs) in timeouts {
                let secs = u32::try_from(*secs).unwrap_or(u32::MAX);
                if !t.set(name, secs) {
                    tracing::debug!(zone, name, "a timeout the userspace tracker has not");
                }
            }
            now.insert(*zone, t);
        }
        for zone in self.ct_timeouts.keys() {
            if !now.contains_key(zone) {
                ct.set_zone_timeouts(*zone, None);
            }
        }
        for (zone, t) in &now {
            if self.ct_timeouts.get(zone) != Some(t) {
                ct.set_zone_timeouts(*zone, Some(*t));
            }
        }
        self.ct_timeouts = now;
    }
}

/// The operation every write transaction starts with: the database refuses the
/// transaction ("not owner") unless this client holds `ovs_vswitchd`, as
/// ovs-vswitchd's IDL asserts it.
fn lock_assert() -> Value {
    json!({"op": "assert", "lock": LOCK})
}

/// The session's events, taken in the order the server sent them: an event looked
/// at early (to see whether the lock went) waits in `backlog` for its turn.
struct Events<'a> {
    client: &'a Client,
    backlog: std::collections::VecDeque<Event>,
}

impl<'a> Events<'a> {
    fn new(client: &'a Client) -> Events<'a> {
        Events {
            client,
            backlog: std::collections::VecDeque::new(),
        }
    }

    /// Everything the server sent so far, into the backlog.
    fn gather(&mut self) {
        while let Ok(e) = self.client.events().try_recv() {
            self.backlog.push_back(e);
        }
    }

    /// The lock was stolen, or the connection ended, before anything now waiting:
    /// nothing more may be written.
    fn check_lock(&mut self) -> Result<(), OvsdbError> {
        self.gather();
        for e in &self.backlog {
            match e {
                Event::Stolen(_) => {
                    tracing::error!(
                        lock = LOCK,
                        "another daemon took the database's lock; vswd writes nothing more"
                    );
                    return Err(OvsdbError::LockLost(LOCK.into()));
                }
                Event::Closed => return Err(OvsdbError::Closed),
                _ => {}
            }
        }
        Ok(())
    }

    /// The next event within `wait` (`None`: none came); a stolen lock or a closed
    /// connection ends the session.
    fn next(&mut self, wait: Duration) -> Result<Option<Event>, OvsdbError> {
        let e = match self.backlog.pop_front() {
            Some(e) => e,
            None => match self.client.events().recv_timeout(wait) {
                Ok(e) => e,
                Err(RecvTimeoutError::Timeout) => return Ok(None),
                Err(RecvTimeoutError::Disconnected) => return Err(OvsdbError::Closed),
            },
        };
        match e {
            Event::Stolen(_) => {
                tracing::error!(lock = LOCK, "another daemon took the database's lock");
                Err(OvsdbError::LockLost(LOCK.into()))
            }
            Event::Closed => Err(OvsdbError::Closed),
            e => Ok(Some(e)),
        }
    }

    /// The next event if it is an update waiting already: its table-updates.
    fn next_update(&mut self) -> Result<Option<Value>, OvsdbError> {
        self.gather();
        match self.backlog.front() {
            Some(Event::Update { .. }) => match self.backlog.pop_front() {
                Some(Event::Update { updates, .. }) => Ok(Some(updates)),
                _ => Ok(None),
            },
            _ => Ok(None),
        }
    }
}

fn update(table: &str, uuid: &str, row: Value) -> Value {
    json!({"op": "update", "table": table, "where": [["_uuid", "==", make_uuid(uuid)]], "row": row})
}

/// Sets the switch-wide options and the bridge's, each when it changes; an option
/// the database no longer sets goes back to its default; one the switch refused is
/// tried again at every look (what it depends on may have come).
fn apply_options(
    sw: &mut Switch,
    applied: &mut Applied,
    switch_options: &BTreeMap<String, String>,
    b: &DesiredBridge,
) {
    let mut wanted = switch_options.clone();
    wanted.extend(b.options.clone());
    let said = settle_options(
        &mut applied.options,
        &mut applied.refused,
        &wanted,
        |k, v| {
            sw.set_options(&[(k.to_string(), v.to_string())].into())
                .map(drop)
                .map_err(|e| e.to_string())
        },
    );
    for s in said {
        match s {
            Settled::Taken(k, v) => {
                tracing::info!(bridge = %b.name, key = %k, value = %v, "option from the database")
            }
            Settled::Refused(k, v, e) => {
                tracing::warn!(bridge = %b.name, key = %k, value = %v, error = %e, "option from the database refused (tried again at every look)")
            }
            Settled::NotReset(k, e) => {
                tracing::warn!(bridge = %b.name, key = %k, error = %e, "cannot take an option back to its default")
            }
        }
    }
}

/// What [`settle_options`] did that is worth saying.
#[derive(Debug, PartialEq, Eq)]
enum Settled {
    Taken(String, String),
    /// Refused, the first time for this value.
    Refused(String, String, String),
    NotReset(String, String),
}

/// Brings `applied` (options in effect) to `wanted` through `set` (`KEY`, `VALUE`;
/// an empty value: back to the default), option by option: one refused stays out
/// of `applied` and in `refused`, so it is tried again at the next call.
fn settle_options(
    applied: &mut BTreeMap<String, String>,
    refused: &mut BTreeMap<String, (String, String)>,
    wanted: &BTreeMap<String, String>,
    mut set: impl FnMut(&str, &str) -> Result<(), String>,
) -> Vec<Settled> {
    let mut said = Vec::new();
    refused.retain(|k, (v, _)| wanted.get(k) == Some(v));
    for (k, v) in wanted {
        if applied.get(k) == Some(v) {
            continue;
        }
        match set(k, v) {
            Ok(()) => {
                applied.insert(k.clone(), v.clone());
                refused.remove(k);
                said.push(Settled::Taken(k.clone(), v.clone()));
            }
            Err(e) => {
                let again = refused.get(k).is_some_and(|(rv, re)| rv == v && *re == e);
                if !again {
                    said.push(Settled::Refused(k.clone(), v.clone(), e.clone()));
                }
                refused.insert(k.clone(), (v.clone(), e));
            }
        }
    }
    let dropped: Vec<String> = applied
        .keys()
        .filter(|k| !wanted.contains_key(*k))
        .cloned()
        .collect();
    for k in dropped {
        if let Err(e) = set(&k, "") {
            said.push(Settled::NotReset(k.clone(), e));
        }
        applied.remove(&k);
    }
    said
}

/// Removes the ports the bridge no longer has (or that can no longer be ports).
fn remove_gone(sw: &mut Switch, applied: &mut Applied, b: &DesiredBridge) {
    let gone: Vec<String> = applied
        .ports
        .keys()
        .filter(|n| !b.interfaces.iter().any(|i| i.name == **n && i.port.is_ok()))
        .cloned()
        .collect();
    if gone.is_empty() {
        return;
    }
    // Together: one change of the datapath, their sockets closed at once.
    for (name, r) in gone.iter().zip(sw.del_ports(&gone)) {
        if let Err(e) = r {
            tracing::warn!(port = %name, error = %e, "cannot remove a port the database no longer has");
        }
        applied.ports.remove(name);
    }
}

/// Makes the bridge's ports, remakes those whose options changed (in place when it
/// can); why an interface is not a port goes to `errors`.
fn make_ports(
    sw: &mut Switch,
    applied: &mut Applied,
    errors: &mut BTreeMap<String, String>,
    b: &DesiredBridge,
) {
    let mut to_add: Vec<(&DesiredInterface, &BTreeMap<String, String>)> = Vec::new();
    for i in &b.interfaces {
        let opts = match &i.port {
            Ok(o) => o,
            Err(why) => {
                errors.insert(i.uuid.clone(), why.clone());
                continue;
            }
        };
        match applied.ports.get(&i.name) {
            Some(now) if now == opts => continue,
            Some(now) => {
                // Changed in place when it only gains or changes options (an MTU,
                // an affinity: traffic goes on); made again otherwise.
                let changes: BTreeMap<String, String> = opts
                    .iter()
                    .filter(|(k, v)| now.get(*k) != Some(*v))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                let in_place = now.keys().all(|k| opts.contains_key(k))
                    && sw.set_port_options(&i.name, &changes).is_ok();
                if in_place {
                    applied.ports.insert(i.name.clone(), opts.clone());
                    continue;
                }
                let _ = sw.handle(Request::DelPort {
                    name: i.name.clone(),
                });
                applied.ports.remove(&i.name);
            }
            None => {}
        }
        to_add.push((i, opts));
    }
    if to_add.is_empty() {
        return;
    }
    // Added together (their devices opened at once). An interface asking for no
    // number gets the one it had when that is free; if not, any.
    let hint = |i: &DesiredInterface, opts: &BTreeMap<String, String>| {
        i.ofport_hint
            .filter(|_| !opts.contains_key("ofport_request"))
    };
    // Those asking for a number, or having one, are numbered first.
    to_add.sort_by_key(|(i, opts)| hint(i, opts).is_none() && !opts.contains_key("ofport_request"));
    let first: Vec<(String, BTreeMap<String, String>)> = to_add
        .iter()
        .map(|(i, opts)| {
            let mut o = (*opts).clone();
            if let Some(n) = hint(i, opts) {
                o.insert("ofport_request".into(), n.to_string());
            }
            (i.name.clone(), o)
        })
        .collect();
    let mut results = sw.add_ports(&first);
    let again: Vec<usize> = (0..to_add.len())
        .filter(|&k| results[k].is_err() && hint(to_add[k].0, to_add[k].1).is_some())
        .collect();
    if !again.is_empty() {
        let second: Vec<(String, BTreeMap<String, String>)> = again
            .iter()
            .map(|&k| (to_add[k].0.name.clone(), to_add[k].1.clone()))
            .collect();
        for (k, r) in again.into_iter().zip(sw.add_ports(&second)) {
            results[k] = r;
        }
    }
    for ((i, opts), added) in to_add.into_iter().zip(results) {
        match added {
            Ok(_) => {
                applied.ports.insert(i.name.clone(), opts.clone());
            }
            Err(e) => {
                let why = match e {
                    // As Open vSwitch says it (and tried again until it is there).
                    crate::switch::SwitchError::Netdev(
                        vsw_netdev::NetdevError::NoSuchInterface(_),
                    ) => format!("could not open network device {} (No such device)", i.name),
                    e => e.to_string(),
                };
                tracing::debug!(port = %i.name, error = %why, "a port from the database refused");
                errors.insert(i.uuid.clone(), why);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::unix::net::UnixListener;
    use std::sync::mpsc;
    use vsw_ovsdb::jsonrpc::{Framer, Message};

    const ROOT: &str = "5a2f0c1e-0d2b-4c3e-9f10-7a8b9c0d1e2f";

    /// The `cur_cfg` a transaction writes, if it writes one.
    fn cur_cfg_written(ops: &[Value]) -> Option<i64> {
        ops.iter()
            .filter(|op| op["table"] == "Open_vSwitch" && op["op"] == "update")
            .find_map(|op| op["row"]["cur_cfg"].as_i64())
    }

    /// A server that speaks just enough OVSDB: grants the lock, monitors a database
    /// of one root row asking for revision 3, refuses the first transaction that
    /// writes `cur_cfg` (as a server refuses a transaction that conflicts) and
    /// accepts the rest; every transaction's operations go to `seen`.
    fn refusing_server(listener: UnixListener, seen: mpsc::Sender<Vec<Value>>) {
        let (mut conn, _) = listener.accept().unwrap();
        let mut framer = Framer::default();
        let mut refused = false;
        let mut buf = [0u8; 65536];
        loop {
            let n = match conn.read(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            framer.push(&buf[..n]).unwrap();
            while let Some(v) = framer.next_value().unwrap() {
                let Ok(Message::Request { method, params, id }) = Message::from_value(v) else {
                    continue;
                };
                let result = match method.as_str() {
                    "lock" => json!({"locked": true}),
                    "monitor" => json!({"Open_vSwitch": {ROOT: {"new": {
                        "next_cfg": 3, "cur_cfg": 0, "bridges": ["set", []],
                        "other_config": ["map", []]}}}}),
                    "transact" => {
                        let ops: Vec<Value> = params.as_array().unwrap()[1..].to_vec();
                        let refuse = !refused && cur_cfg_written(&ops).is_some();
                        let _ = seen.send(ops.clone());
                        if refuse {
                            refused = true;
                            json!([{"error": "constraint violation", "details": "provoked by the test"}])
                        } else {
                            Value::Array(ops.iter().map(|_| json!({"count": 1})).collect())
                        }
                    }
                    _ => json!([]),
                };
                let reply = Message::Response {
                    result,
                    error: Value::Null,
                    id,
                };
                if conn.write_all(&reply.to_bytes()).is_err() {
                    return;
                }
            }
        }
    }

    #[test]
    fn a_refused_option_is_tried_again_until_taken_and_said_once() {
        let (mut applied, mut refused) = (BTreeMap::new(), BTreeMap::new());
        let wanted: BTreeMap<String, String> = [("flow-limit", "500"), ("max-idle", "20000")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        // The switch refuses flow-limit until what it depends on is there.
        let mut tries = 0;
        let mut not_yet = |k: &str, _: &str| {
            if k == "flow-limit" {
                tries += 1;
                return Err("not yet".to_string());
            }
            Ok(())
        };
        let said = settle_options(&mut applied, &mut refused, &wanted, &mut not_yet);
        assert!(said.contains(&Settled::Refused(
            "flow-limit".into(),
            "500".into(),
            "not yet".into()
        )));
        assert!(!applied.contains_key("flow-limit"));
        // Tried again, not said again.
        let said = settle_options(&mut applied, &mut refused, &wanted, &mut not_yet);
        assert!(said.is_empty(), "{said:?}");
        assert_eq!(tries, 2);
        let said = settle_options(&mut applied, &mut refused, &wanted, |_, _| Ok(()));
        assert_eq!(
            said,
            vec![Settled::Taken("flow-limit".into(), "500".into())]
        );
        assert_eq!(applied.get("flow-limit").map(String::as_str), Some("500"));
        assert!(refused.is_empty());
    }

    #[test]
    fn a_write_back_the_server_refuses_is_written_again() {
        let dir = std::env::temp_dir().join(format!("vsw-ovsdb-refuse-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("db.sock");
        let listener = UnixListener::bind(&path).unwrap();
        let (seen_tx, seen) = mpsc::channel();
        std::thread::spawn(move || refusing_server(listener, seen_tx));
        let bridges = Arc::new(Bridges::new(&dir.join("vswd.sock")));
        start(bridges, Target::Unix(path), dir.clone()).unwrap();
        // The first write of cur_cfg is refused; the same is written again, without
        // any change in the database to prompt it.
        let mut writes = Vec::new();
        while writes.len() < 2 {
            let ops = seen
                .recv_timeout(Duration::from_secs(5))
                .expect("vswd writes cur_cfg again after a refusal");
            if let Some(cfg) = cur_cfg_written(&ops) {
                writes.push(cfg);
            }
        }
        assert_eq!(writes, vec![3, 3]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
