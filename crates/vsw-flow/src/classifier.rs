//! The rule table. Immutable once built: the control plane builds a new one for every
//! change and the datapath swaps it in, so lookups take no lock.
//!
//! Lookup is a scan in priority order. That is the simple correct baseline; the
//! tuple-space classifier replaces it behind the same interface.

use std::sync::Arc;

use vsw_packet::FlowKey;

use crate::matching::Match;
use crate::rule::{FlowSpec, Rule};

#[derive(Clone, Debug, Default)]
pub struct Classifier {
    /// Highest priority first; among equals, the earlier installed first.
    rules: Vec<Arc<Rule>>,
}

impl Classifier {
    pub fn new() -> Classifier {
        Classifier::default()
    }

    pub fn len(&self) -> usize {
        self.rules.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    pub fn rules(&self) -> &[Arc<Rule>] {
        &self.rules
    }

    /// The highest-priority rule matching `key`.
    pub fn lookup(&self, key: &FlowKey) -> Option<&Arc<Rule>> {
        self.rules.iter().find(|r| r.spec.matcher.matches(key))
    }

    /// Installs a rule. A rule with the same match and priority is replaced (its
    /// counters start again), as `ovs-ofctl add-flow` does.
    pub fn insert(&mut self, spec: FlowSpec, now_ms: u64) {
        self.rules
            .retain(|r| !(r.spec.priority == spec.priority && r.spec.matcher == spec.matcher));
        let pos = self
            .rules
            .partition_point(|r| r.spec.priority >= spec.priority);
        self.rules.insert(pos, Arc::new(Rule::new(spec, now_ms)));
    }

    /// Removes rules as `ovs-ofctl del-flows` does and returns how many. Non-strict:
    /// every rule whose match is at least as specific as `pattern` (and agrees with it).
    /// Strict: the rule with exactly this match and priority.
    pub fn remove(&mut self, pattern: &Match, priority: Option<u16>, strict: bool) -> usize {
        let before = self.rules.len();
        self.rules.retain(|r| {
            let hit = if strict {
                r.spec.matcher == *pattern && priority.is_none_or(|p| p == r.spec.priority)
            } else {
                pattern.covers(&r.spec.matcher) && priority.is_none_or(|p| p == r.spec.priority)
            };
            !hit
        });
        before - self.rules.len()
    }

    /// Removes every rule that names `port` in its match or actions (the port is gone).
    pub fn remove_port(&mut self, port: u32) -> usize {
        let before = self.rules.len();
        self.rules.retain(|r| {
            let m = &r.spec.matcher;
            let in_match = m.mask().in_port != 0 && m.value().in_port == port;
            let in_actions = r.spec.actions.contains(&crate::Action::Output(port));
            !(in_match || in_actions)
        });
        before - self.rules.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::syntax::{parse_flow, parse_match};
    use crate::Action;
    use vsw_packet::EtherType;

    fn no_names(_: &str) -> Option<u32> {
        None
    }

    fn add(c: &mut Classifier, text: &str) {
        c.insert(parse_flow(text, &no_names).unwrap(), 0);
    }

    fn udp_key(in_port: u32, dport: u16) -> FlowKey {
        FlowKey {
            in_port,
            dl_type: EtherType::IPV4,
            nw_proto: 17,
            nw_dst: 0xc612_0002,
            tp_dst: dport,
            ..FlowKey::default()
        }
    }

    #[test]
    fn highest_priority_wins() {
        let mut c = Classifier::new();
        add(&mut c, "priority=10,ip,actions=output:3");
        add(&mut c, "priority=100,in_port=1,udp,tp_dst=53,actions=drop");
        add(&mut c, "priority=50,udp,actions=output:2");
        let hit = |k| c.lookup(&k).map(|r| r.spec.actions.clone());
        assert_eq!(hit(udp_key(1, 53)), Some(vec![Action::Drop]));
        assert_eq!(hit(udp_key(2, 53)), Some(vec![Action::Output(2)]));
        let mut tcp = udp_key(1, 53);
        tcp.nw_proto = 6;
        assert_eq!(hit(tcp), Some(vec![Action::Output(3)]));
        assert_eq!(hit(FlowKey::default()), None);
    }

    #[test]
    fn same_match_and_priority_replaces() {
        let mut c = Classifier::new();
        add(&mut c, "priority=5,in_port=1,actions=drop");
        c.rules()[0].stats.add(3, 300, 1);
        add(&mut c, "priority=5,in_port=1,actions=output:2");
        assert_eq!(c.len(), 1);
        assert_eq!(c.rules()[0].spec.actions, vec![Action::Output(2)]);
        assert_eq!(c.rules()[0].stats.packets(), 0);
        add(&mut c, "priority=6,in_port=1,actions=drop");
        assert_eq!(c.len(), 2);
    }

    #[test]
    fn del_flows_non_strict_and_strict() {
        let mut c = Classifier::new();
        add(&mut c, "priority=5,in_port=1,udp,actions=drop");
        add(&mut c, "priority=6,in_port=1,actions=drop");
        add(&mut c, "priority=7,in_port=2,actions=drop");
        let (p, m) = parse_match("in_port=1", &no_names).unwrap();
        assert_eq!(
            c.remove(&m, p, true),
            1,
            "strict removes only the exact match"
        );
        add(&mut c, "priority=6,in_port=1,actions=drop");
        assert_eq!(
            c.remove(&m, p, false),
            2,
            "non-strict removes every more specific rule"
        );
        assert_eq!(c.len(), 1);
        assert_eq!(c.remove(&Match::any(), None, false), 1);
        assert!(c.is_empty());
    }

    #[test]
    fn removing_a_port_removes_its_rules() {
        let mut c = Classifier::new();
        add(&mut c, "in_port=1,actions=output:2");
        add(&mut c, "in_port=3,actions=output:1");
        add(&mut c, "in_port=3,ip,actions=output:4");
        assert_eq!(c.remove_port(1), 2);
        assert_eq!(c.len(), 1);
    }
}
