use super::*;

/// Eight flows at distinct rates (packets per second), the fastest last, so that
/// the order they appear in is the slowest first.
const RATES: [u64; 8] = [10, 20, 30, 40, 1000, 2000, 3000, 4000];

fn flow(port: u32) -> OffloadFlow {
    OffloadFlow {
        in_port: port,
        key: FlowKey::default(),
        mask: FlowKey::default(),
        action: OffloadAction::Output(2),
    }
}

/// The traffic of a test: each flow's packets go to the provider while it holds the
/// flow, to userspace otherwise.
struct Traffic {
    userspace: Vec<u64>,
    provider: DummyProvider,
}

impl Traffic {
    fn new(provider: &DummyProvider) -> Traffic {
        Traffic {
            userspace: vec![0; RATES.len()],
            provider: provider.clone(),
        }
    }

    /// One second of every flow.
    fn second(&mut self) {
        for (i, rate) in RATES.iter().enumerate() {
            let id = i as FlowId;
            if !self.provider.count(id, *rate) {
                self.userspace[i] += rate;
            }
        }
    }

    fn samples(&self) -> Vec<FlowSample> {
        (0..RATES.len())
            .map(|i| FlowSample {
                id: i as FlowId,
                userspace_packets: self.userspace[i],
                offload: Ok(flow(1)),
            })
            .collect()
    }

    fn offloaded(&self) -> Vec<FlowId> {
        (0..RATES.len() as FlowId)
            .filter(|id| self.provider.holds(*id))
            .collect()
    }
}

fn manager(provider: &DummyProvider, rebalance: bool) -> OffloadManager {
    OffloadManager::new(
        Box::new(provider.clone()),
        OffloadPolicy {
            rebalance,
            max_swaps: 2,
            ..OffloadPolicy::default()
        },
    )
}

/// Runs `seconds` one-second passes; the offloaded set after each.
fn run(m: &mut OffloadManager, t: &mut Traffic, seconds: usize) -> Vec<Vec<FlowId>> {
    (0..seconds)
        .map(|_| {
            m.pass(1000, &t.samples());
            t.second();
            t.offloaded()
        })
        .collect()
}

#[test]
fn without_rebalancing_the_first_flows_stay() {
    let p = DummyProvider::new(4);
    let (mut m, mut t) = (manager(&p, false), Traffic::new(&p));
    // The first pass sees no rates yet: the flows go in as they come.
    let sets = run(&mut m, &mut t, 6);
    assert!(sets.iter().all(|s| s == &vec![0, 1, 2, 3]), "{sets:?}");
    let st = m.stats();
    assert!(st.oor, "four flows wait");
    assert_eq!((st.used, st.capacity, st.swaps), (4, 4, 0));
    assert_eq!(
        m.view(5, t.userspace[5]).unwrap().state,
        OffloadState::PendingOor
    );
}

#[test]
fn with_rebalancing_the_fastest_end_up_offloaded_and_stay() {
    let p = DummyProvider::new(4);
    let (mut m, mut t) = (manager(&p, true), Traffic::new(&p));
    let sets = run(&mut m, &mut t, 8);
    assert_eq!(sets[0], vec![0, 1, 2, 3]);
    let settled = sets.iter().position(|s| s == &vec![4, 5, 6, 7]);
    let settled = settled.unwrap_or_else(|| panic!("never settled: {sets:?}"));
    assert!(settled <= 3, "two swaps per pass: {sets:?}");
    assert!(
        sets[settled..].iter().all(|s| s == &vec![4, 5, 6, 7]),
        "no flapping: {sets:?}"
    );
    assert_eq!(m.stats().swaps, 4);
    assert!(m.stats().oor, "the slow four wait");
    // Rates as measured, and counters exact across the moves.
    let v = m.view(7, t.userspace[7]).unwrap();
    assert_eq!(v.state, OffloadState::Offloaded);
    assert!((v.pps - 4000.0).abs() < 1.0, "{}", v.pps);
    let seconds = sets.len() as u64;
    for (i, rate) in RATES.iter().enumerate() {
        let v = m.view(i as FlowId, t.userspace[i]).unwrap();
        assert_eq!(
            v.packets,
            rate * seconds,
            "flow {i}: every packet counted once"
        );
    }
}

#[test]
fn flows_of_about_equal_rate_are_not_swapped() {
    let p = DummyProvider::new(1);
    let mut m = manager(&p, true);
    let mut packets = [0u64; 2];
    for _ in 0..5 {
        let samples: Vec<FlowSample> = (0..2)
            .map(|i| FlowSample {
                id: i,
                userspace_packets: packets[i as usize],
                offload: Ok(flow(1)),
            })
            .collect();
        m.pass(1000, &samples);
        // 1,000 vs 1,050 per second: within the 10 % hysteresis.
        for (i, rate) in [1000u64, 1050].iter().enumerate() {
            if !p.count(i as FlowId, *rate) {
                packets[i] += rate;
            }
        }
    }
    assert_eq!(m.stats().swaps, 0);
    assert!(p.holds(0));
}

#[test]
fn a_deleted_flow_frees_its_place_and_oor_clears() {
    let p = DummyProvider::new(4);
    let (mut m, mut t) = (manager(&p, false), Traffic::new(&p));
    run(&mut m, &mut t, 2);
    assert!(m.stats().oor);
    // Flows 0..4 are deleted from the table: the waiting ones take their places.
    let rest: Vec<FlowSample> = t.samples().into_iter().skip(4).collect();
    m.pass(1000, &rest);
    assert_eq!(t.offloaded(), vec![4, 5, 6, 7]);
    assert!(!m.stats().oor, "everything that waits fits");
    assert_eq!(m.view(0, 0), None, "a deleted flow is forgotten");
}

#[test]
fn a_failing_provider_leaves_flows_in_userspace_with_the_reason() {
    let p = DummyProvider::new(4);
    p.fail_with(Some("device gone"));
    let (mut m, mut t) = (manager(&p, true), Traffic::new(&p));
    run(&mut m, &mut t, 3);
    assert!(t.offloaded().is_empty());
    assert_eq!(
        m.view(0, 0).unwrap().state,
        OffloadState::Failed("device gone".into())
    );
    assert!(!m.stats().oor, "a failure is not out-of-resources");
    // Userspace carried everything.
    assert_eq!(t.userspace[7], 3 * 4000);
}

#[test]
fn datapath_flows_that_cannot_be_offloaded_say_why() {
    use crate::dpflow::{DpAction, DpFlow};
    use crate::upcall::{NoAttribution, Translation};
    use std::sync::Arc;
    let key = FlowKey {
        in_port: 1,
        dl_src: MacAddr([2, 0, 0, 0, 0, 1]),
        dl_dst: MacAddr([2, 0, 0, 0, 0, 2]),
        dl_type: EtherType::IPV4,
        nw_proto: IPPROTO_TCP,
        nw_src: 0xc612_0001,
        nw_dst: 0xc612_0002,
        nw_ttl: 64,
        tp_src: 40000,
        tp_dst: 5201,
        ..FlowKey::default()
    };
    // NORMAL's megaflow: in_port, MACs, VLAN.
    let normal = FlowKey {
        in_port: u32::MAX,
        dl_src: MacAddr([0xff; 6]),
        dl_dst: MacAddr([0xff; 6]),
        vlan_tci: 0x1fff,
        ..FlowKey::default()
    };
    let dp = |key: &FlowKey, mask: FlowKey, actions: Vec<DpAction>| {
        let t = Translation {
            mask,
            actions,
            headers: Vec::new(),
            attribution: Arc::new(NoAttribution),
            generation: 1,
            rx_port: None,
            cacheable: true,
        };
        DpFlow::new(1, 0, key, t, 1)
    };
    let f = offloadable(&dp(&key, normal, vec![DpAction::Output(2)])).unwrap();
    assert_eq!(f.action, OffloadAction::Output(2));
    assert_eq!(f.mask, exact_entry_mask());
    assert_eq!(f.key.tp_dst, 5201, "the entry is the packet's own 5-tuple");
    assert_eq!(f.key.nw_ttl, 0, "and nothing outside the entry");
    assert_eq!(
        offloadable(&dp(&key, normal, vec![])).map(|f| f.action),
        Ok(OffloadAction::Drop)
    );
    // The kernel looks a packet up once: no later pass, nor a flow that makes one.
    let later = FlowKey {
        recirc_id: 3,
        ..key
    };
    assert_eq!(
        offloadable(&dp(&later, normal, vec![DpAction::Output(2)])).map(|f| f.action),
        Err("recirculation".to_string())
    );
    let hashing = vec![DpAction::Hash, DpAction::Recirc(3)];
    assert_eq!(
        offloadable(&dp(&key, normal, hashing)).map(|f| f.action),
        Err("recirculation".to_string())
    );
    let ttl = FlowKey {
        nw_ttl: 0xff,
        ..normal
    };
    assert_eq!(
        offloadable(&dp(&key, ttl, vec![DpAction::Output(2)])),
        Err("megaflow-needs-more-fields".into())
    );
    assert_eq!(
        offloadable(&dp(
            &key,
            normal,
            vec![DpAction::Output(2), DpAction::Output(3)]
        )),
        Err("actions-several-outputs".into())
    );
    assert_eq!(
        offloadable(&dp(
            &key,
            normal,
            vec![DpAction::DecTtl, DpAction::Output(2)]
        )),
        Err("actions-several-outputs".into())
    );
    assert_eq!(
        offloadable(&dp(&key, normal, vec![DpAction::SetTpDst(1)])),
        Err("actions-rewrite".into())
    );
    let arp = FlowKey {
        dl_type: EtherType::ARP,
        ..key
    };
    assert_eq!(
        offloadable(&dp(&arp, normal, vec![DpAction::Output(2)])),
        Err("not-untagged-ipv4-tcp-udp".into())
    );
    let tagged = FlowKey {
        vlan_tci: 0x100a,
        ..key
    };
    assert_eq!(
        offloadable(&dp(&tagged, normal, vec![DpAction::Output(2)])),
        Err("not-untagged-ipv4-tcp-udp".into())
    );
    let tunnelled = FlowKey { tun_id: 42, ..key };
    assert_eq!(
        offloadable(&dp(&tunnelled, normal, vec![DpAction::Output(2)])),
        Err("tunnel-flow".into())
    );
    assert_eq!(
        offloadable(&dp(
            &key,
            normal,
            vec![DpAction::SetTunnel(7), DpAction::Output(2)]
        )),
        Err("tunnel-flow".into())
    );
    let mut samples = vec![FlowSample {
        id: 9,
        userspace_packets: 0,
        offload: Err("no-in_port".into()),
    }];
    let p = DummyProvider::new(4);
    let mut m = manager(&p, false);
    m.pass(1000, &samples);
    assert_eq!(
        m.view(9, 0).unwrap().state,
        OffloadState::NotEligible("no-in_port".into())
    );
    samples[0].offload = Ok(flow(1));
    m.pass(1000, &samples);
    assert_eq!(m.view(9, 0).unwrap().state, OffloadState::Offloaded);
    // It can no longer be (a rule above it came): it leaves the provider, its
    // provider packets still counted.
    assert!(p.count(9, 5));
    samples[0].offload = Err("shadowed-by-higher-priority".into());
    m.pass(1000, &samples);
    assert!(!p.holds(9));
    let v = m.view(9, 0).unwrap();
    assert_eq!(
        v.state,
        OffloadState::NotEligible("shadowed-by-higher-priority".into())
    );
    assert_eq!(v.packets, 5);
}

#[test]
fn withdrawing_takes_gone_and_unfit_flows_out_and_nothing_else() {
    let provider = DummyProvider::new(8);
    let mut m = manager(&provider, false);
    let mut t = Traffic::new(&provider);
    run(&mut m, &mut t, 1);
    assert_eq!(t.offloaded().len(), 8);
    provider.count(3, 500);
    let mut samples = t.samples();
    // Flow 0's rule went; flow 1 is now overlapped by a rule above it.
    samples.remove(0);
    samples[0].offload = Err("shadowed-by-higher-priority".into());
    m.withdraw(&samples);
    assert!(!provider.holds(0) && !provider.holds(1));
    assert_eq!(t.offloaded().len(), 6, "the others stay where they are");
    assert_eq!(
        m.view(1, 0).unwrap().state,
        OffloadState::NotEligible("shadowed-by-higher-priority".into())
    );
    assert_eq!(m.stats().passes, 1, "a withdrawal is not a pass");
    assert_eq!(m.stats().used, 6);
}

#[test]
fn flows_the_provider_forwarded_are_reported_active_once() {
    let provider = DummyProvider::new(8);
    let mut m = manager(&provider, false);
    let mut t = Traffic::new(&provider);
    run(&mut m, &mut t, 1);
    assert_eq!(m.active().len(), 8, "every flow forwarded in that second");
    assert!(m.active().is_empty(), "nothing since");
    provider.count(2, 10);
    provider.count(5, 1);
    let mut active = m.active();
    active.sort_unstable();
    assert_eq!(active, vec![2, 5]);
    assert!(m.active().is_empty(), "no more since");
}

/// An entry an earlier run left (`offload-persist`) fills a slot until a flow of this
/// run equal to it is put, which takes it over in place (even with the provider
/// full); a withdrawn one frees its slot.
#[test]
fn a_flow_equal_to_an_adopted_entry_takes_it_over() {
    let provider = DummyProvider::new(2);
    let mut left = flow(1);
    left.key.tp_src = 1000;
    let mut other = flow(1);
    other.key.tp_src = 2000;
    provider.leave(left.clone());
    provider.leave(other.clone());
    let mut m = manager(&provider, false);
    assert_eq!(m.stats().adopted, 2);
    let mut new = flow(1);
    new.key.tp_src = 3000;
    let samples = |ids: &[(FlowId, &OffloadFlow)]| -> Vec<FlowSample> {
        ids.iter()
            .map(|(id, f)| FlowSample {
                id: *id,
                userspace_packets: 0,
                offload: Ok((*f).clone()),
            })
            .collect()
    };
    // Full of adopted entries: a new flow waits, the equal one takes its entry.
    m.pass(1000, &samples(&[(7, &left), (8, &new)]));
    assert!(
        provider.holds(7),
        "the equal flow took the adopted entry over"
    );
    assert!(!provider.holds(8), "no room for another flow");
    assert_eq!(m.adopted(), vec![other.clone()]);
    assert_eq!(m.stats().adopted, 1);
    // The other adopted entry withdrawn: its slot is free for the waiting flow.
    m.drop_adopted(&other);
    assert!(m.adopted().is_empty());
    m.pass(1000, &samples(&[(7, &left), (8, &new)]));
    assert!(provider.holds(8));
}
