//! The rule a `learn` makes for a packet (see [`crate::learn`], which says what a
//! learn is): its match from the packet's bits or constants, its actions loads and
//! an output. Apart from the learn itself because a rule is made of actions, one of
//! which is a learn.

use crate::action::{Action, Load};
use crate::learn::{
    put, Learn, LearnSource, LearnSpec, OFPP_FLOOD, OFPP_IN_PORT, OFPP_LOCAL, OFPP_MAX,
};
use crate::match_key::MatchKey;
use crate::matching::Match;
use crate::rule::FlowSpec;
use crate::subfield::ones;
use crate::LOCAL_PORT;

impl Learn {
    /// The rule it makes for a packet of `key`.
    pub fn rule_for(&self, key: &MatchKey) -> FlowSpec {
        let (mut value, mut mask) = (MatchKey::default(), MatchKey::default());
        let mut actions = Vec::new();
        // First, as Open vSwitch puts it.
        if self.fin_idle_timeout != 0 || self.fin_hard_timeout != 0 {
            actions.push(Action::FinTimeout {
                idle: self.fin_idle_timeout,
                hard: self.fin_hard_timeout,
            });
        }
        let read = |src: LearnSource| match src {
            LearnSource::Field(s) => s.read(key),
            LearnSource::Value(v) => v,
        };
        for spec in &self.specs {
            match *spec {
                LearnSpec::Match { dst, src } => put(&mut value, &mut mask, dst, read(src)),
                LearnSpec::Load { dst, src } => actions.push(Action::Load(Load {
                    field: dst.field,
                    value: (read(src) & ones(u32::from(dst.n_bits))) << dst.ofs,
                    mask: dst.mask(),
                    as_set_field: false,
                })),
                LearnSpec::Output { src } => {
                    // As Open vSwitch: a port that no output could name is left out.
                    let port = src.read(key);
                    match port {
                        OFPP_IN_PORT => actions.push(Action::InPort),
                        OFPP_FLOOD => actions.push(Action::Flood),
                        OFPP_LOCAL => actions.push(Action::Output(LOCAL_PORT)),
                        p if p < OFPP_MAX => actions.push(Action::Output(p as u32)),
                        _ => {}
                    }
                }
            }
        }
        if actions.is_empty() {
            // As a flow written with no actions.
            actions.push(Action::Drop);
        }
        FlowSpec {
            table: self.table,
            priority: self.priority,
            matcher: Match::new(value, mask),
            actions,
            idle_timeout: self.idle_timeout,
            hard_timeout: self.hard_timeout,
            cookie: self.cookie,
            send_flow_rem: self.send_flow_rem,
            as_written: Default::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::subfield::Field;
    use vsw_packet::FlowKey;

    fn none(_: &str) -> Option<u32> {
        None
    }

    #[test]
    fn the_rule_learned_matches_and_does_what_the_packet_said() {
        let l = Learn::parse(
            "table=10,hard_timeout=7,priority=5,cookie=0x99,NXM_OF_VLAN_TCI[0..11],\
             NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],load:NXM_OF_IN_PORT[]->NXM_NX_REG1[16..31],\
             load:0x3->NXM_NX_REG2[0..3],output:NXM_OF_IN_PORT[]",
            &none,
        )
        .unwrap();
        let mut key = MatchKey::from(FlowKey {
            in_port: 7,
            vlan_tci: 0x1000 | 42,
            ..FlowKey::default()
        });
        key.dl_src = "00:00:00:00:00:0a".parse().unwrap();
        let spec = l.rule_for(&key);
        assert_eq!(
            (spec.table, spec.priority, spec.hard_timeout, spec.cookie),
            (10, 5, 7, 0x99)
        );
        let mut hit = MatchKey::from(FlowKey {
            vlan_tci: 42,
            dl_dst: key.dl_src,
            ..FlowKey::default()
        });
        assert!(spec.matcher.matches(&hit));
        hit.vlan_tci = 43;
        assert!(!spec.matcher.matches(&hit));
        assert_eq!(
            spec.actions,
            vec![
                Action::Load(Load {
                    field: Field::Reg(1),
                    value: 7 << 16,
                    mask: 0xffff_0000,
                    as_set_field: false
                }),
                Action::Load(Load {
                    field: Field::Reg(2),
                    value: 3,
                    mask: 0xf,
                    as_set_field: false
                }),
                Action::Output(7),
            ]
        );
        let sources: Vec<_> = l.sources().map(|s| s.format()).collect();
        assert_eq!(
            sources,
            [
                "NXM_OF_VLAN_TCI[0..11]",
                "NXM_OF_ETH_SRC[]",
                "NXM_OF_IN_PORT[]",
                "NXM_OF_IN_PORT[]"
            ]
        );
    }

    #[test]
    fn a_pipeline_learns_as_a_strict_modify_that_may_add() {
        use crate::pipeline::{LearnOutcome, Pipeline};
        let l = Learn::parse(
            "table=1,idle_timeout=5,cookie=0x7,limit=2,NXM_OF_ETH_SRC[]",
            &none,
        )
        .unwrap();
        let key = |n: u8| {
            MatchKey::from(FlowKey {
                dl_src: vsw_packet::MacAddr([2, 0, 0, 0, 0, n]),
                ..FlowKey::default()
            })
        };
        let mut p = Pipeline::new();
        let LearnOutcome::Added(a) = p.learn(l.rule_for(&key(1)), l.limit, 1_000) else {
            panic!("added");
        };
        assert!(a.learned);
        assert!(matches!(
            p.learn(l.rule_for(&key(1)), l.limit, 2_000),
            LearnOutcome::InPlace(_)
        ));
        assert!(matches!(
            p.learn(l.rule_for(&key(2)), l.limit, 2_000),
            LearnOutcome::Added(_)
        ));
        assert!(matches!(
            p.learn(l.rule_for(&key(3)), l.limit, 2_000),
            LearnOutcome::OverLimit
        ));
        // A rule of the same match and priority takes the new actions, keeping its
        // own timeouts.
        let mut other = l.rule_for(&key(1));
        other.actions = vec![Action::Output(4)];
        other.idle_timeout = 99;
        let LearnOutcome::Added(m) = p.learn(other, 0, 3_000) else {
            panic!("modified");
        };
        assert_eq!(
            (m.spec.idle_timeout, &m.spec.actions[..]),
            (5, &[Action::Output(4)][..])
        );
        assert_eq!(p.len(), 2);
        // Learned again with other timeouts: in place (a learn would change only
        // actions and cookie).
        let mut again = l.rule_for(&key(1));
        again.actions = vec![Action::Output(4)];
        again.hard_timeout = 7;
        assert!(p.learned_in_place(&again).is_some());
        assert!(matches!(p.learn(again, 0, 4_000), LearnOutcome::InPlace(_)));
        // A controller's rule a learn changes stays the controller's, with its
        // counters.
        let mut theirs = l.rule_for(&key(9));
        theirs.actions = vec![Action::Output(1)];
        p.insert(theirs.clone(), 1);
        let r = p.learned_in_place(&theirs).unwrap().clone();
        r.stats.add(3, 300, 2);
        let LearnOutcome::Added(m) = p.learn(l.rule_for(&key(9)), 0, 5_000) else {
            panic!("modified");
        };
        assert!(!m.learned);
        assert_eq!((m.stats.packets(), m.seq()), (3, r.seq()));
    }

    #[test]
    fn learned_rules_go_with_the_last_rule_that_learns_them_with_delete_learned() {
        use crate::pipeline::Pipeline;
        use crate::syntax::{parse_flow, parse_match};
        let mut p = Pipeline::new();
        for f in [
            "priority=5,actions=learn(table=1,cookie=0x7,delete_learned,NXM_OF_ETH_SRC[])",
            "priority=6,actions=learn(table=1,cookie=0x7,delete_learned,NXM_OF_ETH_DST[])",
            "table=1,cookie=0x7,priority=1,actions=drop",
            "table=1,cookie=0x8,priority=2,actions=drop",
        ] {
            p.insert(parse_flow(f, &none).unwrap(), 1);
        }
        let l = Learn::parse("table=1,cookie=0x7,NXM_OF_ETH_SRC[]", &none).unwrap();
        p.learn(l.rule_for(&MatchKey::default()), 0, 1);
        assert_eq!(p.len(), 5);
        let remove = |p: &mut Pipeline, prio: &str| {
            let sel = parse_match(&format!("priority={prio}"), &none).unwrap();
            let gone = p.remove_rules(&sel, true);
            assert_eq!(gone.len(), 1);
            p.delete_learned_of(&gone)
        };
        assert!(
            remove(&mut p, "5").is_empty(),
            "the other rule still learns them"
        );
        let gone = remove(&mut p, "6");
        // Every rule of table 1 with the cookie, whoever put it there.
        assert_eq!(gone.len(), 2);
        assert!(gone.iter().all(|r| r.spec.cookie == 7));
        assert_eq!(p.len(), 1);
    }
}
