//! One bridge's slow path: its pipeline (swapped whole on a rule change), its MAC
//! table and its ports, and the generation that says when any of them changed.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};

use arc_swap::ArcSwap;
use vsw_datapath::{Translation, Upcall};
use vsw_flow::{Action, MacTable, Pipeline};
use vsw_packet::{FlowKey, MacAddr};

use crate::attribution::{FlowCredit, TableCounters};
use crate::backer::{Backer, BackerView, BridgeSlot};
use crate::frozen::Frozen;
use crate::generation::{Changes, Generation};
use crate::punt_notes::{PuntNote, PuntNotes};
use crate::trace::Trace;
use crate::xlate::{resume, translate, translate_actions, XlateEnv, Xlated};

/// A MAC table entry as `fdb/show` lists it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MacView {
    pub mac: MacAddr,
    pub vlan: u16,
    pub port: u32,
    pub age_s: u64,
}

pub struct Ofproto {
    pipeline: ArcSwap<Pipeline>,
    /// Taken by translations (upcalls and revalidation, never per packet).
    macs: Arc<Mutex<MacTable>>,
    ports: ArcSwap<Vec<u32>>,
    /// Ports whose link is up (fast-failover groups' liveness).
    live_ports: ArcSwap<Vec<u32>>,
    /// Ports whose flows an offload provider may take: their IPv4 TCP/UDP datapath
    /// flows match an exact entry's fields, so that the provider can express them.
    offload_ports: ArcSwap<Vec<u32>>,
    /// This bridge's changes, counted in its datapath's generation.
    generation: Arc<Changes>,
    /// Translations that failed (resubmit loops): their packets were dropped.
    xlate_errors: AtomicU64,
    punt_notes: PuntNotes,
    table_counters: Arc<TableCounters>,
    /// Forwarding as a learning switch whatever the rules say (Open vSwitch's fail
    /// open: standalone, no controller reachable).
    fail_open: AtomicBool,
    /// `flow-restore-wait`: nothing is forwarded until the flows are restored.
    restore_wait: AtomicBool,
    /// The datapath's backer this bridge is in, and its number there: its
    /// translations then emit datapath numbers and cross its patch ports.
    in_backer: OnceLock<(Weak<Backer>, BridgeSlot)>,
}

impl std::fmt::Debug for Ofproto {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ofproto")
            .field("rules", &self.pipeline.load().len())
            .field("generation", &self.generation.get())
            .finish()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Ofproto {
    /// A bridge's slow path on a datapath of its own.
    pub fn new(pipeline: Pipeline) -> Arc<Ofproto> {
        Ofproto::with_generation(pipeline, Arc::new(Generation::default()))
    }

    /// A bridge's slow path counting its changes in `generation` (its backer's:
    /// [`crate::Backer`]).
    pub(crate) fn with_generation(pipeline: Pipeline, generation: Arc<Generation>) -> Arc<Ofproto> {
        Arc::new(Ofproto {
            pipeline: ArcSwap::from_pointee(pipeline),
            macs: Arc::new(Mutex::new(MacTable::default())),
            ports: ArcSwap::from_pointee(Vec::new()),
            live_ports: ArcSwap::from_pointee(Vec::new()),
            offload_ports: ArcSwap::from_pointee(Vec::new()),
            generation: Changes::new(generation),
            xlate_errors: AtomicU64::new(0),
            punt_notes: PuntNotes::default(),
            table_counters: Arc::new(TableCounters::default()),
            fail_open: AtomicBool::new(false),
            restore_wait: AtomicBool::new(false),
            in_backer: OnceLock::new(),
        })
    }

    /// Makes this a bridge of `backer`'s, numbered `slot` there (once).
    pub(crate) fn join_backer(&self, backer: Weak<Backer>, slot: BridgeSlot) {
        let _ = self.in_backer.set((backer, slot));
    }

    /// The backer this bridge is in, while it is.
    fn backer(&self) -> Option<(Arc<Backer>, BridgeSlot)> {
        let (b, slot) = self.in_backer.get()?;
        Some((b.upgrade()?, *slot))
    }

    /// This bridge's changes (what a flow that went through it depends on).
    pub(crate) fn changes(&self) -> Arc<Changes> {
        self.generation.clone()
    }

    pub(crate) fn macs(&self) -> &Arc<Mutex<MacTable>> {
        &self.macs
    }

    pub(crate) fn punt_notes(&self) -> &PuntNotes {
        &self.punt_notes
    }

    pub(crate) fn ports(&self) -> Arc<Vec<u32>> {
        self.ports.load_full()
    }

    pub(crate) fn live_ports(&self) -> Arc<Vec<u32>> {
        self.live_ports.load_full()
    }

    pub fn pipeline(&self) -> Arc<Pipeline> {
        self.pipeline.load_full()
    }

    /// Puts new rules in place. Flows translated from the old ones are found by the
    /// next revalidator pass (the caller runs one before it answers).
    pub fn set_pipeline(&self, pipeline: Pipeline) {
        self.pipeline.store(Arc::new(pipeline));
        // After the store: a translation that read the old generation may have seen
        // the new rules, never the other way round.
        self.generation.bump();
    }

    /// [`Ofproto::set_pipeline`] for a change that only removed `removed` (taken
    /// from the running pipeline): the datapath flows whose translation matched
    /// none of them stay right without being translated again.
    pub fn set_pipeline_removing(&self, pipeline: Pipeline, removed: &[Arc<vsw_flow::Rule>]) {
        self.pipeline.store(Arc::new(pipeline));
        let at: Vec<usize> = removed.iter().map(|r| Arc::as_ptr(r) as usize).collect();
        self.generation.bump_removing(&at);
    }

    /// Fail open (every packet to NORMAL) or not; true when that changed (flows
    /// must be revalidated).
    pub fn set_fail_open(&self, open: bool) -> bool {
        let changed = self.fail_open.swap(open, Ordering::AcqRel) != open;
        if changed {
            self.generation.bump();
        }
        changed
    }

    pub fn fail_open(&self) -> bool {
        self.fail_open.load(Ordering::Acquire)
    }

    /// Waits for the flows to be restored (every packet dropped, nothing learned) or
    /// not; true when that changed (flows must be revalidated).
    pub fn set_restore_wait(&self, wait: bool) -> bool {
        let changed = self.restore_wait.swap(wait, Ordering::AcqRel) != wait;
        if changed {
            self.generation.bump();
        }
        changed
    }

    pub fn restore_wait(&self) -> bool {
        self.restore_wait.load(Ordering::Acquire)
    }

    /// The ports, in the order NORMAL and FLOOD send to them.
    pub fn set_ports(&self, mut ports: Vec<u32>) {
        ports.sort_unstable();
        self.ports.store(Arc::new(ports));
        self.generation.bump();
    }

    /// The ports whose link is up; true when that changed (flows must be
    /// revalidated: a fast-failover group may choose another bucket).
    pub fn set_live_ports(&self, mut ports: Vec<u32>) -> bool {
        ports.sort_unstable();
        if **self.live_ports.load() == ports {
            return false;
        }
        self.live_ports.store(Arc::new(ports));
        self.generation.bump();
        true
    }

    /// The ports with an offload provider; true when that changed (flows must be
    /// revalidated).
    pub fn set_offload_ports(&self, mut ports: Vec<u32>) -> bool {
        ports.sort_unstable();
        if **self.offload_ports.load() == ports {
            return false;
        }
        self.offload_ports.store(Arc::new(ports));
        self.generation.bump();
        true
    }

    /// Forgets the hosts learned on `port` (it went away).
    pub fn flush_port(&self, port: u32) {
        lock(&self.macs).flush_port(port);
        self.generation.bump();
    }

    /// Forgets every host learned (`fdb/flush`).
    pub fn flush_macs(&self) {
        lock(&self.macs).clear();
        self.generation.bump();
    }

    /// Ages out MAC entries; true when some went (flows must be revalidated).
    pub fn expire_macs(&self, now_ms: u64) -> bool {
        let gone = lock(&self.macs).expire(now_ms);
        if gone > 0 {
            self.generation.bump();
        }
        gone > 0
    }

    pub fn mac_entries(&self, now_ms: u64) -> Vec<MacView> {
        let mut v: Vec<MacView> = lock(&self.macs)
            .entries()
            .map(|(mac, vlan, e)| MacView {
                mac,
                vlan,
                port: e.port,
                age_s: now_ms.saturating_sub(e.last_seen_ms) / 1000,
            })
            .collect();
        v.sort_by_key(|e| (e.port, e.vlan, e.mac.0));
        v
    }

    pub fn xlate_errors(&self) -> u64 {
        self.xlate_errors.load(Ordering::Relaxed)
    }

    /// (lookups, matches) of a table so far (counts the revalidator has pushed).
    pub fn table_counts(&self, table: u8) -> (u64, u64) {
        self.table_counters.get(table)
    }

    /// What the translation that sent a packet up noted of it
    /// ([`vsw_datapath::DpAction::Controller`]'s number).
    pub fn punt_note(&self, id: u32) -> Option<PuntNote> {
        self.punt_notes.get(id)
    }

    /// The datapath actions of a packet-out: `actions` for a packet of `key` (its
    /// `in_port` the port it counts as coming from), as if a rule of table 0 held
    /// them. NORMAL does not learn from it.
    pub fn translate_packet_out(&self, key: &FlowKey, actions: &[Action], now_ms: u64) -> Xlated {
        self.in_backer(|view| self.packet_out_in(view, key, actions, now_ms))
    }

    /// Runs `f` with the view of the backer this bridge is in (`None` on a datapath
    /// of its own), holding the backer's translation lock: a translation may cross
    /// into other bridges, and emits the datapath's numbers.
    fn in_backer<R>(&self, f: impl FnOnce(Option<BackerView<'_>>) -> R) -> R {
        let backer = self.backer();
        let _one = backer.as_ref().map(|(b, _)| b.translating());
        let map = backer.as_ref().map(|(b, _)| b.map());
        f(backer
            .as_ref()
            .zip(map.as_deref())
            .map(|((b, slot), map)| BackerView {
                map,
                slot: *slot,
                frozen: b.frozen(),
            }))
    }

    fn packet_out_in(
        &self,
        view: Option<BackerView<'_>>,
        key: &FlowKey,
        actions: &[Action],
        now_ms: u64,
    ) -> Xlated {
        let macs = &mut lock(&self.macs);
        let pipeline = self.pipeline.load();
        let ports = self.ports.load();
        let live = self.live_ports.load();
        let mut env = XlateEnv {
            pipeline: &pipeline,
            macs,
            ports: &ports,
            live_ports: &live,
            now_ms,
            learn: false,
            trace: false,
            punt_notes: &self.punt_notes,
            fail_open: false,
            restore_wait: false,
            backer: view,
            may_freeze: false,
        };
        translate_actions(&mut env, key, actions)
    }

    fn run(&self, key: &FlowKey, now_ms: u64, learn: bool, trace: bool) -> (Xlated, u64) {
        self.in_backer(|view| self.run_in(view, key, now_ms, learn, trace, None))
    }

    /// Translates `key` from table 0, or (`from`) from where a translation froze.
    fn run_in(
        &self,
        view: Option<BackerView<'_>>,
        key: &FlowKey,
        now_ms: u64,
        learn: bool,
        trace: bool,
        from: Option<&Frozen>,
    ) -> (Xlated, u64) {
        let mut macs = lock(&self.macs);
        // Read under the MAC table's lock, before the rules: see `set_pipeline`.
        let generation = self.generation.get();
        let pipeline = self.pipeline.load();
        let ports = self.ports.load();
        let live = self.live_ports.load();
        let mut env = XlateEnv {
            pipeline: &pipeline,
            macs: &mut macs,
            ports: &ports,
            live_ports: &live,
            now_ms,
            learn,
            trace,
            punt_notes: &self.punt_notes,
            fail_open: self.fail_open.load(Ordering::Acquire),
            restore_wait: self.restore_wait.load(Ordering::Acquire),
            backer: view,
            may_freeze: true,
        };
        let mut x = match from {
            None => translate(&mut env, key),
            Some(state) => resume(&mut env, key, state),
        };
        if self.offload_ports.load().contains(&key.in_port) {
            exact_for_offload(&mut x.mask, key);
        }
        let generation = if x.mac_changed {
            // This translation saw the table as it learned it; others made before
            // may have sent the host elsewhere (in whichever bridge it learned).
            self.generation.bump();
            for c in &x.crossed {
                c.bump();
            }
            self.generation.get()
        } else {
            generation
        };
        if x.error.is_some() {
            self.xlate_errors.fetch_add(1, Ordering::Relaxed);
        }
        (x, generation)
    }

    /// Translates `key` as `vswctl trace` shows it (no learning).
    pub fn trace(&self, key: &FlowKey, now_ms: u64) -> Trace {
        let (x, _) = self.run(key, now_ms, false, true);
        let mut trace = Trace::of(key, x);
        // Each recirculation, followed as the datapath takes it: the packet as the
        // pass before left it, hashed, resumed where its translation froze.
        let Some((backer, _)) = self.backer() else {
            return trace;
        };
        let mut last = (trace.actions.clone(), trace.final_key);
        while trace.recirculations.len() < vsw_datapath::MAX_RECIRC_DEPTH {
            let Some(id) = last.0.iter().find_map(|a| match a {
                vsw_datapath::DpAction::Recirc(id) => Some(*id),
                _ => None,
            }) else {
                break;
            };
            let (Some(state), packet) = (backer.frozen_state(id), last.1) else {
                break;
            };
            let Some(o) = backer.ofproto(state.slot) else {
                break;
            };
            let next = FlowKey {
                recirc_id: id,
                dp_hash: vsw_packet::key::l4_hash(&packet),
                ..packet
            };
            let thawed = state.thaw(&next);
            let (x, _) =
                o.in_backer(|view| o.run_in(view, &thawed, now_ms, false, true, Some(&state)));
            let pass = Trace::of(&thawed, x);
            last = (pass.actions.clone(), pass.final_key);
            trace.recirculations.push(pass);
        }
        trace
    }

    /// A translation for tests and benchmarks (no learning, no tracing).
    pub fn translate_key(&self, key: &FlowKey, now_ms: u64) -> Xlated {
        self.run(key, now_ms, false, false).0
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
    let exact = vsw_datapath::offload::exact_entry_mask();
    for (m, e) in mask.words_mut().iter_mut().zip(exact.words()) {
        *m |= e;
    }
}

impl Upcall for Ofproto {
    fn generation(&self) -> u64 {
        self.generation.get()
    }

    fn translate(&self, key: &FlowKey, now_ms: u64, learn: bool) -> Translation {
        let (x, generation) = self.run(key, now_ms, learn, false);
        self.credited(x, generation)
    }

    fn revalidating(&self, now_ms: u64) {
        self.expire_macs(now_ms);
    }
}

impl Ofproto {
    /// A packet's next pass (`key`, in the datapath's numbers) translated from where
    /// `state`, one of this bridge's, froze.
    pub(crate) fn resume(
        &self,
        state: &Frozen,
        key: &FlowKey,
        now_ms: u64,
        learn: bool,
    ) -> Translation {
        let thawed = state.thaw(key);
        let (x, generation) =
            self.in_backer(|view| self.run_in(view, &thawed, now_ms, learn, false, Some(state)));
        self.credited(x, generation)
    }

    /// The datapath's view of translation `x`: its mask and actions, and what its
    /// packets are credited to.
    fn credited(&self, mut x: Xlated, generation: u64) -> Translation {
        let mut rules: Vec<Arc<vsw_flow::Rule>> = Vec::with_capacity(x.rules.len());
        for r in x.rules.drain(..) {
            if !rules.iter().any(|o| Arc::ptr_eq(o, &r)) {
                rules.push(r);
            }
        }
        Translation {
            mask: x.mask,
            actions: x.actions,
            attribution: Arc::new(FlowCredit {
                rules,
                tables: x.tables,
                groups: x.groups,
                table_counters: self.table_counters.clone(),
                learned: x.learned,
                learned_across: x.learned_across,
                depends: std::iter::once(self.generation.clone())
                    .chain(x.crossed)
                    .chain(self.backer().map(|(b, _)| b.changes()))
                    .collect(),
                macs: self.macs.clone(),
            }),
            generation,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vsw_datapath::DpAction::{self, Output};
    use vsw_flow::parse_flow;
    use vsw_packet::key::VLAN_CFI;

    fn ofproto(flows: &[&str]) -> Arc<Ofproto> {
        let mut p = Pipeline::new();
        for f in flows {
            p.insert(parse_flow(f, &|_: &str| None).unwrap(), 1);
        }
        let o = Ofproto::new(p);
        o.set_ports(vec![1, 2, 3, 4]);
        o
    }

    fn mac(n: u8) -> MacAddr {
        MacAddr([2, 0, 0, 0, 0, n])
    }

    fn udp(in_port: u32, src: u8, dst: u8, tp_dst: u16) -> FlowKey {
        FlowKey {
            in_port,
            dl_src: mac(src),
            dl_dst: mac(dst),
            dl_type: 0x0800,
            nw_proto: 17,
            nw_src: 0xc612_0001,
            nw_dst: 0xc612_0002,
            nw_ttl: 64,
            tp_src: 1000,
            tp_dst,
            ..FlowKey::default()
        }
    }

    fn actions(o: &Ofproto, k: &FlowKey) -> Vec<DpAction> {
        o.translate_key(k, 1).actions
    }

    #[test]
    fn goto_table_continues_in_a_later_table_after_the_rules_actions() {
        let o = ofproto(&[
            "in_port=1,actions=output:4,goto_table:3",
            "table=3,udp,tp_dst=53,actions=output:2",
            "table=3,priority=1,actions=output:3",
        ]);
        assert_eq!(actions(&o, &udp(1, 1, 2, 53)), vec![Output(4), Output(2)]);
        assert_eq!(actions(&o, &udp(1, 1, 2, 80)), vec![Output(4), Output(3)]);
        assert!(
            actions(&o, &udp(2, 1, 2, 53)).is_empty(),
            "table 0 misses: drop"
        );
    }

    #[test]
    fn the_action_set_runs_when_the_pipeline_ends_one_action_of_each_kind() {
        let o = ofproto(&[
            "in_port=1,actions=output:4,write_actions(output:2,mod_dl_dst:02:00:00:00:00:09),goto_table:1",
            // A later write of the same kind replaces the earlier one.
            "table=1,udp,actions=write_actions(output:3),goto_table:2",
            "table=1,priority=1,actions=goto_table:2",
            "table=2,udp,tp_dst=53,actions=clear_actions",
            "table=2,priority=1,actions=drop",
        ]);
        // Applied at once (output:4), the set at the end: the field change first,
        // then the output table 1 wrote last.
        assert_eq!(
            actions(&o, &udp(1, 1, 2, 80)),
            vec![
                Output(4),
                DpAction::SetDlDst(MacAddr([2, 0, 0, 0, 0, 9])),
                Output(3)
            ]
        );
        // clear_actions in table 2 leaves only what was applied.
        assert_eq!(actions(&o, &udp(1, 1, 2, 53)), vec![Output(4)]);
        // A group in the set takes the place of its output.
        let mut p = (*o.pipeline()).clone();
        let g = vsw_flow::parse_group("group_id=5,type=indirect,bucket=output:4", &|_: &str| None)
            .unwrap();
        p.set_group(g, false, 1).unwrap();
        p.insert(
            parse_flow(
                "priority=9,in_port=2,actions=write_actions(group:5,output:3)",
                &|_: &str| None,
            )
            .unwrap(),
            1,
        );
        o.set_pipeline(p);
        assert_eq!(actions(&o, &udp(2, 1, 2, 80)), vec![Output(4)]);
    }

    #[test]
    fn resubmit_comes_back_and_goes_on() {
        let o = ofproto(&[
            "in_port=1,actions=resubmit(,5),output:3",
            "table=5,actions=output:2",
            "in_port=4,actions=resubmit(2,7)",
            "table=7,in_port=2,actions=output:1",
        ]);
        assert_eq!(actions(&o, &udp(1, 1, 2, 53)), vec![Output(2), Output(3)]);
        // As if it came in on port 2: table 7 matches on that.
        assert_eq!(actions(&o, &udp(4, 1, 2, 53)), vec![Output(1)]);
    }

    #[test]
    fn a_resubmit_loop_is_caught_and_the_packet_dropped() {
        let o = ofproto(&["actions=output:2,resubmit(,0)"]);
        let x = o.translate_key(&udp(1, 1, 2, 53), 1);
        assert_eq!(x.error, Some(crate::XlateError::TooDeep));
        assert!(x.actions.is_empty());
        assert_eq!(o.xlate_errors(), 1);
        let t = o.trace(&udp(1, 1, 2, 53), 1).render();
        assert!(
            t.contains("Translation failed") && t.contains("Datapath actions: drop"),
            "{t}"
        );
    }

    #[test]
    fn the_mask_holds_what_decided_including_rules_that_did_not_match() {
        let o = ofproto(&[
            "priority=9,tcp,tp_dst=80,actions=drop",
            "priority=5,in_port=1,actions=goto_table:1",
            "table=1,udp,actions=output:2",
        ]);
        let x = o.translate_key(&udp(1, 1, 2, 53), 1);
        assert_eq!(x.actions, vec![Output(2)]);
        assert_eq!(x.mask.in_port, u32::MAX);
        assert_eq!(x.mask.nw_proto, 0xff);
        assert_eq!(x.mask.tp_dst, 0xffff, "the tcp rule was probed");
        assert_eq!(x.mask.dl_src, MacAddr::default(), "nothing looked at MACs");
        assert_eq!({ x.mask.nw_src }, 0);
        assert_eq!(x.rules.len(), 2);
    }

    #[test]
    fn normal_learns_floods_the_unknown_and_matches_on_addresses_and_vlan() {
        let o = ofproto(&["priority=0,actions=NORMAL"]);
        let x = o.translate_key(&udp(1, 1, 2, 53), 1);
        assert_eq!(x.actions, vec![Output(2), Output(3), Output(4)], "flood");
        assert_eq!(x.mask.dl_src, MacAddr([0xff; 6]));
        assert_eq!(x.mask.dl_dst, MacAddr([0xff; 6]));
        assert_eq!(x.mask.vlan_tci, 0x0fff | VLAN_CFI);
        assert_eq!(x.mask.tp_dst, 0, "NORMAL does not look at L4");
        // A packet passing (an upcall) teaches the table; a revalidation does not.
        let g = o.generation();
        o.translate(&udp(2, 2, 1, 53), 1, false);
        assert_eq!(o.generation(), g, "no learning without a packet");
        o.translate(&udp(2, 2, 1, 53), 1, true);
        assert!(o.generation() > g, "a new host changes what flows may say");
        assert_eq!(actions(&o, &udp(1, 1, 2, 53)), vec![Output(2)]);
        // The host on the input port itself: dropped, never sent back.
        assert!(actions(&o, &udp(2, 1, 2, 53)).is_empty());
        // Multicast: flood.
        let mut bcast = udp(1, 1, 2, 53);
        bcast.dl_dst = MacAddr([0xff; 6]);
        assert_eq!(actions(&o, &bcast).len(), 3);
    }

    #[test]
    fn rewrites_are_seen_by_later_tables_and_output_never_goes_back_in() {
        let o = ofproto(&[
            "in_port=1,udp,actions=mod_tp_dst:99,goto_table:2",
            "table=2,udp,tp_dst=99,actions=output:1,output:3,dec_ttl,in_port",
        ]);
        let x = o.translate_key(&udp(1, 1, 2, 53), 1);
        assert_eq!(
            x.actions,
            vec![
                DpAction::SetTpDst(99),
                Output(3),
                DpAction::DecTtl,
                Output(1)
            ]
        );
        assert_eq!(x.final_key.tp_dst, 99);
        assert_eq!(x.final_key.nw_ttl, 63);
    }

    #[test]
    fn set_fields_are_seen_by_later_tables_and_an_unknown_ttl_is_not_guessed() {
        use vsw_packet::rewrite::FieldWrite;
        let o = ofproto(&[
            "in_port=1,udp,actions=mod_nw_ttl:9,mod_nw_ecn:1,goto_table:2",
            "table=2,udp,nw_ttl=9,nw_ecn=1,actions=output:2",
            "in_port=3,ip,actions=copy_ttl_out,goto_table:3",
            "table=3,priority=20,ip,nw_ttl=64,actions=output:2",
            "table=3,priority=10,actions=output:4",
            "in_port=4,actions=set_tunnel:0x64,goto_table:4",
            "table=4,tun_id=0x64,actions=output:1",
        ]);
        // A tunnel key set is what later tables match, and what the output carries
        // (a tunnel port with `key=flow` sends with it).
        let x = o.translate_key(&udp(4, 1, 2, 53), 1);
        assert_eq!(x.actions, vec![DpAction::SetTunnel(0x64), Output(1)]);
        assert_eq!(x.final_key.tun_id, 0x64);
        let x = o.translate_key(&udp(1, 1, 2, 53), 1);
        assert_eq!(
            x.actions,
            vec![
                DpAction::SetField(FieldWrite::NwTtl(9)),
                DpAction::SetField(FieldWrite::IpEcn(1)),
                Output(2)
            ]
        );
        // A packet with one IP header keeps its TTL: table 3 may look at it.
        let x = o.translate_key(&udp(3, 1, 2, 53), 1);
        assert_eq!(x.error, None);
        assert_eq!(x.actions.last(), Some(&Output(2)));
        assert_eq!(x.mask.nw_proto, 0xff, "the copy depends on the protocol");
        // IP-in-IP: the outer TTL is now the inner one, which the key does not hold.
        let mut ipip = udp(3, 1, 2, 53);
        ipip.nw_proto = 4;
        let x = o.translate_key(&ipip, 1);
        assert_eq!(x.error, Some(crate::xlate::XlateError::TtlUnknown));
        assert!(x.actions.is_empty());
    }

    #[test]
    fn credit_goes_to_every_rule_once_and_refreshes_learned_hosts() {
        let o = ofproto(&[
            "in_port=1,actions=resubmit(,1),resubmit(,1)",
            "table=1,actions=NORMAL",
        ]);
        let t = o.translate(&udp(1, 1, 2, 53), 1_000, true);
        t.attribution.credit(10, 600, 5_000);
        let rules = o.pipeline().rules();
        assert!(rules.iter().all(|r| r.stats.packets() == 10), "{rules:?}");
        let macs = o.mac_entries(5_000);
        assert_eq!(macs.len(), 1);
        assert_eq!((macs[0].mac, macs[0].port, macs[0].age_s), (mac(1), 1, 0));
    }

    #[test]
    fn on_a_port_with_an_offload_provider_each_connection_gets_its_own_flow() {
        let o = ofproto(&["priority=0,actions=NORMAL"]);
        let normal = o.translate_key(&udp(1, 1, 2, 53), 1).mask;
        assert_eq!((normal.tp_src, normal.nw_src), (0, 0));
        assert!(o.set_offload_ports(vec![1]));
        assert!(!o.set_offload_ports(vec![1]), "no change");
        let exact = o.translate_key(&udp(1, 1, 2, 53), 1).mask;
        assert_eq!(exact, vsw_datapath::offload::exact_entry_mask());
        // Another port: as before.
        assert_eq!(o.translate_key(&udp(2, 1, 2, 53), 1).mask, normal);
        // Not TCP/UDP: kept off them (ethertype and protocol exact), no 5-tuple.
        let mut icmp = udp(1, 1, 2, 0);
        icmp.nw_proto = 1;
        let m = o.translate_key(&icmp, 1).mask;
        assert_eq!((m.dl_type, m.nw_proto, m.tp_src), (0xffff, 0xff, 0));
    }

    #[test]
    fn the_trace_shows_each_table_and_the_megaflow() {
        let o = ofproto(&[
            "in_port=1,actions=goto_table:1",
            "table=1,udp,tp_dst=53,actions=output:2",
        ]);
        let t = o.trace(&udp(1, 1, 2, 53), 1).render();
        for want in [
            " 0. priority=32768,in_port=1,actions=goto_table:1",
            "     1. priority=32768,udp,tp_dst=53,actions=output:2",
            "Megaflow: udp,in_port=1,tp_dst=53",
            "Datapath actions: 2",
        ] {
            assert!(t.contains(want), "no '{want}' in\n{t}");
        }
    }
}
