//! One bridge's slow path: its state (`BridgeState`: pipeline, MAC table, ports)
//! and its place in a backer, if it is in one. It translates its own traces and
//! packet-outs, and upcalls when it has a datapath of its own (tests, benches); in a
//! backer, the backer translates its upcalls.

use std::ops::Deref;
use std::sync::{Arc, OnceLock, Weak};

use vsw_datapath::{Translation, Upcall};
use vsw_flow::{Action, MatchKey, Pipeline};
use vsw_packet::FlowKey;

use crate::backer::{Backer, BackerError};
use crate::bridge_state::BridgeState;
use crate::generation::Generation;
use crate::run;
use crate::slot::BridgeSlot;
use crate::trace::Trace;
use crate::view::BackerView;
use crate::xlate::Xlated;

pub use crate::bridge_state::MacView;

pub struct Ofproto {
    state: Arc<BridgeState>,
    /// The datapath's backer this bridge is in, and its number there: its
    /// translations then emit datapath numbers and cross its patch ports.
    in_backer: OnceLock<(Weak<Backer>, BridgeSlot)>,
}

impl std::fmt::Debug for Ofproto {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.state.fmt(f)
    }
}

/// An `Ofproto` is its bridge's state (rules, ports, MAC table, switches) and more.
impl Deref for Ofproto {
    type Target = BridgeState;

    fn deref(&self) -> &BridgeState {
        &self.state
    }
}

impl Ofproto {
    /// A bridge's slow path on a datapath of its own.
    pub fn new(pipeline: Pipeline) -> Arc<Ofproto> {
        Arc::new(Ofproto {
            state: Arc::new(BridgeState::new(pipeline, Arc::new(Generation::default()))),
            in_backer: OnceLock::new(),
        })
    }

    /// A new bridge `name` with `pipeline` in `backer`: its slow path, counting in
    /// the backer's generation and translating through it, and its number there.
    pub fn join(
        backer: &Arc<Backer>,
        name: &str,
        pipeline: Pipeline,
    ) -> Result<(BridgeSlot, Arc<Ofproto>), BackerError> {
        let (slot, state) = backer.add_bridge(name, pipeline)?;
        let in_backer = OnceLock::new();
        let _ = in_backer.set((Arc::downgrade(backer), slot));
        Ok((slot, Arc::new(Ofproto { state, in_backer })))
    }

    /// The backer this bridge is in, while it is.
    fn backer(&self) -> Option<(Arc<Backer>, BridgeSlot)> {
        let (b, slot) = self.in_backer.get()?;
        Some((b.upgrade()?, *slot))
    }

    /// Runs `f` with the view of the backer this bridge is in (`None` on a datapath
    /// of its own), holding the backer's translation lock.
    fn in_backer<R>(&self, f: impl FnOnce(Option<BackerView<'_>>) -> R) -> R {
        match self.backer() {
            Some((b, slot)) => b.with_view(slot, |view| f(Some(view))),
            None => f(None),
        }
    }

    /// The datapath actions of a packet-out: `actions` for a packet of `key` (its
    /// `in_port` the port it counts as coming from), as if a rule of table 0 held
    /// them. NORMAL does not learn from it.
    pub fn translate_packet_out(&self, key: &MatchKey, actions: &[Action], now_ms: u64) -> Xlated {
        self.in_backer(|view| run::packet_out(&self.state, view, key, actions, now_ms))
    }

    /// The datapath actions that continue the translation a `controller(pause)`
    /// stopped: note `note` of this bridge, whose check (`PuntNote::
    /// continuation_check`) the controller gave back, for the packet it sent back
    /// (`key`, with the fields it said). `None`: no such paused translation (its
    /// note is gone, or the check is another's).
    pub fn translate_resume(
        &self,
        key: &MatchKey,
        note: u32,
        check: u64,
        now_ms: u64,
    ) -> Option<Xlated> {
        let n = self.state.punt_notes.get(note)?;
        if n.continuation_check() != Some(check) {
            return None;
        }
        let c = n.continuation?;
        Some(self.in_backer(|view| run::resumed(&self.state, view, key, &c, now_ms)))
    }

    fn run(
        &self,
        key: &FlowKey,
        now_ms: u64,
        passing: run::Passing<'_>,
        trace: bool,
        from: Option<&Arc<crate::frozen::Frozen>>,
    ) -> (Xlated, u64) {
        let entry = run::Entry {
            frozen: from,
            in_port_elsewhere: false,
        };
        self.in_backer(|view| {
            run::run(
                &self.state,
                view,
                &MatchKey::from(*key),
                (now_ms, passing, trace),
                entry,
            )
        })
    }

    /// Translates `key` as `vswctl trace` shows it (no learning).
    pub fn trace(&self, key: &FlowKey, now_ms: u64) -> Trace {
        let (x, _) = self.run(key, now_ms, run::Passing::keyed(false), true, None);
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
            let Some(bridge) = backer.bridge(state.slot) else {
                break;
            };
            let next = FlowKey {
                recirc_id: id,
                dp_hash: vsw_packet::key::l4_hash(&packet),
                ..packet
            };
            let thawed = state.thaw(&next);
            let (x, _) = backer.with_view(state.slot, |view| {
                run::run(
                    &bridge,
                    Some(view),
                    &thawed,
                    (now_ms, run::Passing::keyed(false), true),
                    run::Entry::resumed(&state),
                )
            });
            let pass = Trace::of(&thawed, x);
            last = (pass.actions.clone(), pass.final_key);
            trace.recirculations.push(pass);
        }
        trace
    }

    fn translate_passing(
        &self,
        key: &FlowKey,
        now_ms: u64,
        passing: run::Passing<'_>,
    ) -> Translation {
        let (x, generation) = self.run(key, now_ms, passing, false, None);
        let backer_changes = self.backer().map(|(b, _)| b.changes());
        run::credited(&self.state, x, generation, backer_changes)
    }

    /// A translation for tests and benchmarks (no learning, no tracing).
    pub fn translate_key(&self, key: &FlowKey, now_ms: u64) -> Xlated {
        self.run(key, now_ms, run::Passing::keyed(false), false, None)
            .0
    }
}

impl Upcall for Ofproto {
    fn generation(&self) -> u64 {
        self.state.generation.get()
    }

    fn translate(&self, key: &FlowKey, now_ms: u64, learn: bool) -> Translation {
        self.translate_passing(key, now_ms, run::Passing::keyed(learn))
    }

    fn translate_packet(&self, key: &FlowKey, frame: &[u8], now_ms: u64) -> Translation {
        self.translate_passing(key, now_ms, run::Passing::packet(frame))
    }

    fn revalidating(&self, now_ms: u64) {
        self.expire_learned(now_ms);
        // Notes no datapath flow holds any more (a backer sweeps its bridges').
        self.state.punt_notes().sweep(now_ms);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vsw_datapath::DpAction::{self, Output};
    use vsw_flow::parse_flow;
    use vsw_packet::key::VLAN_CFI;
    use vsw_packet::MacAddr;

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
    fn a_metered_packet_in_is_metered_on_a_copy() {
        let mut p = Pipeline::new();
        p.set_meter(
            vsw_flow::parse_meter("meter=1,pktps,bands=type=drop,rate=1").unwrap(),
            false,
            1,
        )
        .unwrap();
        p.insert(
            parse_flow(
                "in_port=1,actions=controller(userdata=01,meter_id=1),output:2",
                &|_: &str| None,
            )
            .unwrap(),
            1,
        );
        let o = Ofproto::new(p);
        o.set_ports(vec![1, 2]);
        // The meter's drop takes the packet-in only: the output after it stays.
        let got = actions(&o, &udp(1, 1, 2, 53));
        assert!(
            matches!(
                got.as_slice(),
                [
                    DpAction::Save,
                    DpAction::Meter(1),
                    DpAction::Controller(_),
                    DpAction::Restore,
                    Output(2)
                ]
            ),
            "{got:?}"
        );
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
        assert_eq!(x.error, Some(crate::xlate::XlateError::TooDeep));
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
    fn normal_snoops_reports_and_sends_a_group_to_its_members_only() {
        use vsw_packet::builder::{igmp, igmp_frame, multicast_mac, udp4_frame};
        let o = ofproto(&["priority=0,actions=NORMAL"]);
        let group = [239, 1, 1, 1];
        let mut data = udp4_frame([198, 18, 0, 1], group, 5000, 5001, 20);
        data[..6].copy_from_slice(&multicast_mac(group.into()).0);
        let key_of = |frame: &[u8], port| {
            let mut k = FlowKey::default();
            vsw_packet::extract(frame, port, None, &mut k).unwrap();
            k
        };
        assert_eq!(
            actions(&o, &key_of(&data, 1)).len(),
            3,
            "snooping off: flooded"
        );
        assert!(o.set_mcast_snooping(vsw_flow::McastConfig {
            enabled: true,
            ..Default::default()
        }));
        let report = igmp_frame(
            (mac(3), [198, 18, 0, 3]),
            group,
            &igmp(vsw_packet::mcast::igmp::V2_REPORT, group),
        );
        // A report's key without its bytes (a revalidation's) teaches nothing.
        o.translate(&key_of(&report, 3), 1, true);
        assert!(o.mcast_entries(1).is_empty());
        let g = o.generation();
        let t = o.translate_packet(&key_of(&report, 3), &report, 1);
        assert!(!t.cacheable, "every report passes through the slow path");
        assert!(
            o.generation() > g,
            "a new member changes what flows may say"
        );
        assert_eq!(actions(&o, &key_of(&data, 1)), vec![Output(3)]);
        let shown = o.mcast_entries(1);
        assert_eq!(shown.len(), 1);
        assert_eq!(
            (shown[0].port, shown[0].group.map(|g| g.to_string())),
            (3, Some("239.1.1.1".into()))
        );
        // The member's port goes: the group is unregistered again.
        o.flush_port(3);
        assert_eq!(actions(&o, &key_of(&data, 1)).len(), 3);
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
