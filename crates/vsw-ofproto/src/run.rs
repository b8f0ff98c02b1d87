//! Running a translation over one bridge's state: from table 0, from where one
//! froze, or a packet-out's actions; and what the datapath keeps of it (the mask,
//! the actions, and what its packets are credited to). The backer runs upcalls
//! through here, `Ofproto` its own bridge's traces and packet-outs.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use vsw_datapath::Translation;
use vsw_flow::{Action, MatchKey};
use vsw_packet::FlowKey;

use crate::attribution::FlowCredit;
use crate::bridge_state::{lock, BridgeState};
use crate::frozen::Frozen;
use crate::generation::Changes;
use crate::view::BackerView;
use crate::xlate::{resume, translate, translate_actions, XlateEnv, Xlated};

/// The datapath actions of a packet-out for a packet of `key`, as if a rule of
/// table 0 held `actions` (NORMAL does not learn from it).
pub(crate) fn packet_out(
    bridge: &BridgeState,
    view: Option<BackerView<'_>>,
    key: &MatchKey,
    actions: &[Action],
    now_ms: u64,
) -> Xlated {
    from_controller(bridge, view, now_ms, |env| {
        translate_actions(env, key, actions)
    })
}

/// The datapath actions of a resumed translation (NXT_RESUME): what `c` had left,
/// for the packet the controller sent back (`key`).
pub(crate) fn resumed(
    bridge: &BridgeState,
    view: Option<BackerView<'_>>,
    key: &MatchKey,
    c: &crate::punt_notes::Continuation,
    now_ms: u64,
) -> Xlated {
    from_controller(bridge, view, now_ms, |env| {
        crate::xlate::translate_resumed(env, key, c)
    })
}

/// Runs `f` over the bridge as a packet a controller sent translates: nothing
/// frozen (it never passes the datapath's lookup), NORMAL learns nothing, a `learn`
/// puts its rule in place.
fn from_controller(
    bridge: &BridgeState,
    view: Option<BackerView<'_>>,
    now_ms: u64,
    f: impl FnOnce(&mut XlateEnv<'_>) -> Xlated,
) -> Xlated {
    let macs = &mut lock(&bridge.macs);
    let pipeline = bridge.pipeline.load();
    let ports = bridge.ports.load();
    let live = bridge.live_ports.load();
    let mut env = XlateEnv {
        pipeline: &pipeline,
        bridge,
        macs,
        ports: &ports,
        live_ports: &live,
        now_ms,
        learn: false,
        learn_rules: true,
        frame: None,
        trace: false,
        punt_notes: &bridge.punt_notes,
        fail_open: false,
        restore_wait: false,
        backer: view,
        may_freeze: false,
        in_port_elsewhere: false,
    };
    f(&mut env)
}

/// Where a translation starts.
#[derive(Clone, Copy, Default)]
pub(crate) struct Entry<'a> {
    /// Where a translation froze (`None`: table 0).
    pub frozen: Option<&'a Arc<Frozen>>,
    /// The datapath's in_port is not the packet's port in this bridge (a popped
    /// tunnel packet's pass, or one resumed in another bridge than it came in by):
    /// what goes to the controller names its port itself.
    pub in_port_elsewhere: bool,
}

impl<'a> Entry<'a> {
    pub fn resumed(state: &'a Arc<Frozen>) -> Entry<'a> {
        Entry {
            frozen: Some(state),
            in_port_elsewhere: false,
        }
    }
}

/// Whether a packet is passing through the datapath now (not a revalidation's
/// key): then NORMAL learns, snooping reads it and a `learn` takes effect.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Passing<'a> {
    pub learn: bool,
    /// The packet's bytes, when the datapath gave them (`Upcall::translate_packet`).
    pub frame: Option<&'a [u8]>,
}

impl<'a> Passing<'a> {
    /// A packet passing without its bytes (`learn`), or no packet.
    pub fn keyed(learn: bool) -> Passing<'static> {
        Passing { learn, frame: None }
    }

    /// A packet passing with its bytes.
    pub fn packet(frame: &'a [u8]) -> Passing<'a> {
        Passing {
            learn: true,
            frame: Some(frame),
        }
    }
}

/// Translates `key` from table 0, or from where a translation froze (`entry`).
pub(crate) fn run(
    bridge: &BridgeState,
    view: Option<BackerView<'_>>,
    key: &MatchKey,
    (now_ms, passing, trace): (u64, Passing<'_>, bool),
    entry: Entry<'_>,
) -> (Xlated, u64) {
    let learn = passing.learn;
    let mut macs = lock(&bridge.macs);
    // Read under the MAC table's lock, before the rules: see `set_pipeline`.
    let generation = bridge.generation.get();
    let pipeline = bridge.pipeline.load();
    let ports = bridge.ports.load();
    let live = bridge.live_ports.load();
    let mut env = XlateEnv {
        pipeline: &pipeline,
        bridge,
        macs: &mut macs,
        ports: &ports,
        live_ports: &live,
        now_ms,
        learn,
        learn_rules: learn,
        frame: passing.frame.filter(|_| learn),
        trace,
        punt_notes: &bridge.punt_notes,
        fail_open: bridge.fail_open.load(Ordering::Acquire),
        restore_wait: bridge.restore_wait.load(Ordering::Acquire),
        backer: view,
        may_freeze: true,
        in_port_elsewhere: entry.in_port_elsewhere,
    };
    let mut x = match entry.frozen {
        None => translate(&mut env, key),
        Some(state) => resume(&mut env, key, state),
    };
    if bridge.offload_ports.load().contains(&key.in_port) {
        exact_for_offload(&mut x.mask, key);
    }
    let generation = if x.learning_changed {
        // This translation saw the table as it learned it; others made before
        // may have sent the host elsewhere (in whichever bridge it learned).
        bridge.generation.bump();
        for c in &x.crossed {
            c.bump();
        }
        bridge.generation.get()
    } else if x.rules_learned {
        // Its learn moved the generation: the PMD has the revalidator look at once
        // (the flow itself is not cached).
        bridge.generation.get()
    } else {
        generation
    };
    if x.error.is_some() {
        bridge.xlate_errors.fetch_add(1, Ordering::Relaxed);
    }
    (x, generation)
}

/// The datapath's view of translation `x`: its mask and actions, and what its
/// packets are credited to.
/// `backer_changes`: the backer's map's, when the bridge is in one.
pub(crate) fn credited(
    bridge: &BridgeState,
    mut x: Xlated,
    generation: u64,
    backer_changes: Option<Arc<Changes>>,
) -> Translation {
    let mut rules: Vec<Arc<vsw_flow::Rule>> = Vec::with_capacity(x.rules.len());
    for r in x.rules.drain(..) {
        if !rules.iter().any(|o| Arc::ptr_eq(o, &r)) {
            rules.push(r);
        }
    }
    Translation {
        mask: x.mask,
        actions: x.actions,
        headers: x.pushed,
        attribution: Arc::new(FlowCredit {
            rules,
            tables: x.tables,
            groups: x.groups,
            table_counters: bridge.table_counters.clone(),
            learned: x.learned,
            learned_across: x.learned_across,
            depends: std::iter::once(bridge.generation.clone())
                .chain(x.crossed)
                .chain(backer_changes)
                .collect(),
            macs: bridge.macs.clone(),
            learned_rules: x.learned_rules,
            fin_timeouts: x.fin_timeouts,
            _frozen: x.frozen,
            _notes: x.notes,
        }),
        generation,
        rx_port: None,
        cacheable: !x.uncacheable,
    }
}

/// Widens `mask` to an exact entry's fields for an untagged IPv4 TCP/UDP packet: one
/// datapath flow per connection, which a provider of exact entries can take whatever
/// the rules looked at (NORMAL looks at addresses only: its flow would carry every
/// connection between two hosts, and no exact entry could stand for it). Any other
/// packet's flow is kept off TCP/UDP (its ethertype and protocol exact), so that it
/// never carries a connection the provider could have taken.
fn exact_for_offload(mask: &mut FlowKey, key: &FlowKey) {
    mask.dl_type = u16::MAX;
    mask.vlan_tci |= vsw_packet::key::VLAN_CFI;
    if key.dl_type != vsw_packet::EtherType::IPV4 {
        return;
    }
    mask.nw_proto = u8::MAX;
    if !vsw_datapath::offload::exact_entry_fits(key) {
        return;
    }
    mask.widen(&vsw_datapath::offload::exact_entry_mask());
}
