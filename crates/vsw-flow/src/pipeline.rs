//! The pipeline: tables 0 to 254, each a [`Classifier`]. A packet starts in table 0;
//! `goto_table` and `resubmit` take it to others (translation, in vsw-ofproto, walks
//! them). A table with no matching rule drops the packet.

use std::collections::BTreeMap;
use std::sync::Arc;

/// Whether `old` is what a learn of `spec` leaves a rule of its match and priority:
/// the learn's actions and cookie.
fn learned_as(old: &Rule, spec: &FlowSpec) -> bool {
    old.spec.actions == spec.actions && old.spec.cookie == spec.cookie
}

#[cfg(test)]
use vsw_packet::FlowKey;

use crate::match_key::MatchKey;

use crate::action::Action;
use crate::classifier::{Classifier, Inserted, PreparedRule, StagedRules};
use crate::error::FlowSyntaxError;
use crate::group::{Group, GroupSpec};
use crate::matching::Match;
use crate::meter::MeterSpec;
use crate::rule::{FlowSpec, Rule, RuleStats, Written, MAX_TABLE};
use crate::syntax::Selection;

/// The rule a new switch starts with: every packet to NORMAL, below any other rule.
pub const LEARNING_SWITCH_FLOW: &str = "priority=0,actions=NORMAL";

/// What a `learn` did ([`Pipeline::learn`]).
#[derive(Clone, Debug)]
pub enum LearnOutcome {
    /// The rule was in place as it would be made (its hard timeout starts over).
    InPlace(Arc<Rule>),
    /// The rule is new, or changed one of its match and priority.
    Added(Arc<Rule>),
    /// `limit` rules of its table have its cookie: nothing was done.
    OverLimit,
}

/// Every table's rules, and the groups they may hand packets to. Immutable once
/// published, like a classifier: the control side changes a copy.
#[derive(Clone, Debug, Default)]
pub struct Pipeline {
    /// By table number; tables never written to are absent or empty.
    tables: Vec<Classifier>,
    groups: BTreeMap<u32, Arc<Group>>,
    /// Meters by number, with when each was set up.
    meters: BTreeMap<u32, (Arc<MeterSpec>, u64)>,
}

/// Why a group change was refused (nothing changed).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GroupError {
    #[error("group {0} exists already")]
    Exists(u32),
    #[error("there is no group {0}")]
    Unknown(u32),
    #[error("group {0} would reach itself through its buckets")]
    Loop(u32),
}

/// Why a meter change was refused (nothing changed).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MeterError {
    #[error("meter {0} exists already")]
    Exists(u32),
    #[error("there is no meter {0}")]
    Unknown(u32),
}

/// The meters a list of actions hands packets to.
fn meters_named(actions: &[Action]) -> impl Iterator<Item = u32> + '_ {
    actions.iter().filter_map(|a| match a {
        Action::Meter(m) | Action::Controller { meter: Some(m), .. } => Some(*m),
        _ => None,
    })
}

/// The groups a list of actions hands packets to.
fn groups_named(actions: &[Action]) -> impl Iterator<Item = u32> + '_ {
    actions.iter().filter_map(|a| match a {
        Action::Group(g) => Some(*g),
        _ => None,
    })
}

impl Pipeline {
    /// No rules at all: every packet is dropped in table 0.
    pub fn new() -> Pipeline {
        Pipeline::default()
    }

    /// What a new switch starts with: `priority=0,actions=NORMAL` in table 0, so that
    /// out of the box it is a learning switch (as Open vSwitch's standalone mode).
    pub fn learning_switch(now_ms: u64) -> Pipeline {
        let mut p = Pipeline::new();
        let spec = crate::syntax::parse_flow(LEARNING_SWITCH_FLOW, &|_: &str| None)
            .expect("the learning switch's rule is well formed");
        p.insert(spec, now_ms);
        p
    }

    /// Meter `id` and when it was set up.
    pub fn meter(&self, id: u32) -> Option<&(Arc<MeterSpec>, u64)> {
        self.meters.get(&id)
    }

    /// Every meter, by number.
    pub fn meters(&self) -> impl Iterator<Item = &(Arc<MeterSpec>, u64)> {
        self.meters.values()
    }

    /// The first meter `actions` name that does not exist.
    pub fn missing_meter(&self, actions: &[Action]) -> Option<u32> {
        meters_named(actions).find(|m| !self.meters.contains_key(m))
    }

    /// Adds a meter (`modify`: replaces one, which keeps its age).
    pub fn set_meter(
        &mut self,
        spec: MeterSpec,
        modify: bool,
        now_ms: u64,
    ) -> Result<(), MeterError> {
        let since = match (self.meters.get(&spec.id), modify) {
            (Some(_), false) => return Err(MeterError::Exists(spec.id)),
            (None, true) => return Err(MeterError::Unknown(spec.id)),
            (Some((_, since)), true) => *since,
            (None, false) => now_ms,
        };
        self.meters.insert(spec.id, (Arc::new(spec), since));
        Ok(())
    }

    /// Removes meter `id` (`None`: every meter) and, as OpenFlow asks, every rule
    /// that uses a removed meter; returns the rules removed.
    pub fn delete_meters(&mut self, id: Option<u32>) -> Vec<Arc<Rule>> {
        let gone: Vec<u32> = match id {
            Some(m) => self.meters.remove(&m).map(|_| m).into_iter().collect(),
            None => std::mem::take(&mut self.meters).into_keys().collect(),
        };
        if gone.is_empty() {
            return Vec::new();
        }
        let uses = |r: &Rule| {
            r.spec.actions.iter().any(|a| {
                matches!(a, Action::Meter(m) | Action::Controller { meter: Some(m), .. }
                        if gone.contains(m))
            })
        };
        self.selected(None)
            .flat_map(|c| c.remove_if(&uses))
            .collect()
    }

    /// Group `id`.
    pub fn group(&self, id: u32) -> Option<&Arc<Group>> {
        self.groups.get(&id)
    }

    /// Every group, by number.
    pub fn groups(&self) -> impl Iterator<Item = &Arc<Group>> {
        self.groups.values()
    }

    /// Whether `actions` name a group or a meter (whose being there a change of
    /// the tables checks: [`Pipeline::missing_group`], [`Pipeline::missing_meter`]).
    pub fn names_groups_or_meters(actions: &[Action]) -> bool {
        groups_named(actions).next().is_some() || meters_named(actions).next().is_some()
    }

    /// The first group `actions` name that does not exist.
    pub fn missing_group(&self, actions: &[Action]) -> Option<u32> {
        groups_named(actions).find(|g| !self.groups.contains_key(g))
    }

    /// Adds a group (`modify`: replaces one, keeping its counters where its buckets
    /// stay as many). Every group its buckets name must exist, and none may lead
    /// back to it.
    pub fn set_group(
        &mut self,
        spec: GroupSpec,
        modify: bool,
        now_ms: u64,
    ) -> Result<(), GroupError> {
        let id = spec.id;
        match (self.groups.get(&id), modify) {
            (Some(_), false) => return Err(GroupError::Exists(id)),
            (None, true) => return Err(GroupError::Unknown(id)),
            _ => {}
        }
        for b in &spec.buckets {
            if let Some(g) = self.missing_group(&b.actions) {
                return Err(GroupError::Unknown(g));
            }
            if groups_named(&b.actions).any(|g| g == id || self.reaches(g, id, 0)) {
                return Err(GroupError::Loop(id));
            }
        }
        let group = match self.groups.get(&id) {
            Some(old) if old.spec.buckets.len() == spec.buckets.len() => Arc::new(Group {
                installed_ms: old.installed_ms,
                stats: RuleStats::copy_of(&old.stats),
                bucket_stats: old.bucket_stats.iter().map(RuleStats::copy_of).collect(),
                spec,
            }),
            _ => Group::new(spec, now_ms),
        };
        self.groups.insert(id, group);
        Ok(())
    }

    /// Whether group `from` leads to group `to` through its buckets.
    fn reaches(&self, from: u32, to: u32, depth: usize) -> bool {
        if depth > self.groups.len() {
            return true;
        }
        self.groups.get(&from).is_some_and(|g| {
            g.spec.buckets.iter().any(|b| {
                groups_named(&b.actions).any(|n| n == to || self.reaches(n, to, depth + 1))
            })
        })
    }

    /// Removes group `id` (`None`: every group) and, as OpenFlow asks, every rule
    /// that hands packets to a removed group; returns the rules removed. A group no
    /// longer there is no error.
    pub fn delete_groups(&mut self, id: Option<u32>) -> Vec<Arc<Rule>> {
        let gone: Vec<u32> = match id {
            Some(g) => self.groups.remove(&g).map(|_| g).into_iter().collect(),
            None => std::mem::take(&mut self.groups).into_keys().collect(),
        };
        if gone.is_empty() {
            return Vec::new();
        }
        self.selected(None)
            .flat_map(|c| {
                c.remove_if(&|r: &Rule| groups_named(&r.spec.actions).any(|g| gone.contains(&g)))
            })
            .collect()
    }

    /// Table `id`, if it has ever held a rule.
    pub fn table(&self, id: u8) -> Option<&Classifier> {
        self.tables.get(usize::from(id))
    }

    /// Rules in all tables.
    pub fn len(&self) -> usize {
        self.tables.iter().map(Classifier::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Tables holding rules, with their rule counts.
    pub fn table_sizes(&self) -> Vec<(u8, usize)> {
        self.tables
            .iter()
            .enumerate()
            .filter(|(_, t)| !t.is_empty())
            .map(|(i, t)| (i as u8, t.len()))
            .collect()
    }

    /// Installs a rule in its table (replacing one of equal match and priority there).
    pub fn insert(&mut self, spec: FlowSpec, now_ms: u64) -> Inserted {
        self.insert_prepared(PreparedRule::new(spec), now_ms)
    }

    /// [`Pipeline::insert`] of a rule made before.
    pub fn insert_prepared(&mut self, rule: PreparedRule, now_ms: u64) -> Inserted {
        let table = rule.spec().table;
        debug_assert!(table <= MAX_TABLE);
        let id = usize::from(table);
        if self.tables.len() <= id {
            self.tables.resize_with(id + 1, Classifier::new);
        }
        self.tables[id].insert_prepared(rule, now_ms)
    }

    /// Puts in a bundle's staged adds whole, at `now_ms`, after every rule of
    /// their tables (`staged` keeps only its list of them). `false` (nothing
    /// changed): some table has rules of a mask they have, or an add took
    /// another's place — they are to be put in one by one.
    pub fn adopt_staged(&mut self, staged: &mut StagedRules, now_ms: u64) -> bool {
        if !staged.fits(&self.tables) {
            return false;
        }
        staged.put_in(&mut self.tables, now_ms);
        true
    }

    fn selected(&mut self, table: Option<u8>) -> impl Iterator<Item = &mut Classifier> {
        self.tables
            .iter_mut()
            .enumerate()
            .filter(move |(i, _)| table.is_none_or(|t| usize::from(t) == *i))
            .map(|(_, c)| c)
    }

    /// Removes rules as `ovs-ofctl del-flows` does (in the selected table, or all);
    /// returns how many.
    pub fn remove(&mut self, selection: &Selection, strict: bool) -> usize {
        self.remove_rules(selection, strict).len()
    }

    /// [`Pipeline::remove`], returning the rules removed.
    pub fn remove_rules(&mut self, selection: &Selection, strict: bool) -> Vec<Arc<Rule>> {
        let also = |r: &Rule| selection.also(r);
        self.selected(selection.table)
            .flat_map(|c| c.remove_selected(&selection.matcher, selection.priority, strict, &also))
            .collect()
    }

    /// The rule of table `table` with exactly this match and priority.
    pub fn find_exact(&self, table: u8, pattern: &Match, priority: u16) -> Option<&Arc<Rule>> {
        self.table(table)?.find_exact(pattern, priority)
    }

    /// The rules a selection picks, by table, best first within a table.
    pub fn select(&self, selection: &Selection, strict: bool) -> Vec<Arc<Rule>> {
        let also = |r: &Rule| selection.also(r);
        self.tables
            .iter()
            .enumerate()
            .filter(|(i, _)| selection.table.is_none_or(|t| usize::from(t) == *i))
            .flat_map(|(_, c)| c.select(&selection.matcher, selection.priority, strict, &also))
            .collect()
    }

    /// Gives the selected rules other actions (`ovs-ofctl mod-flows`, an OpenFlow
    /// modify): `actions` says which for each rule (read against its match), and
    /// may refuse; then nothing changes. `written` is how the front end wrote them
    /// (not kept: said from what they do). Returns how many rules changed.
    pub fn modify(
        &mut self,
        selection: &Selection,
        strict: bool,
        reset_counts: bool,
        written: &Written,
        actions: &dyn Fn(&Rule) -> Result<Vec<Action>, FlowSyntaxError>,
    ) -> Result<usize, FlowSyntaxError> {
        let picked = self.select(selection, strict);
        let mut changed = Vec::with_capacity(picked.len());
        for r in &picked {
            let new = actions(r)?;
            if let Some(Action::GotoTable(to)) = new.last() {
                if *to <= r.spec.table {
                    return Err(FlowSyntaxError::GotoBackwards {
                        from: r.spec.table,
                        to: *to,
                    });
                }
            }
            changed.push(r.with_actions(new, written.clone(), reset_counts));
        }
        for (old, new) in picked.iter().zip(changed) {
            let replaced = self.tables[usize::from(old.spec.table)].replace(old, new);
            debug_assert!(replaced, "a selected rule is in its table");
        }
        Ok(picked.len())
    }

    /// True when a rule of `spec`'s table and priority has a different match that
    /// shares a packet with `spec`'s (OpenFlow's CHECK_OVERLAP).
    pub fn overlaps(&self, spec: &FlowSpec) -> bool {
        self.table(spec.table).is_some_and(|c| {
            c.rules().iter().any(|r| {
                r.spec.priority == spec.priority
                    && r.spec.matcher != spec.matcher
                    && r.spec.matcher.overlaps(&spec.matcher)
            })
        })
    }

    /// Removes every rule naming `port` (the port is gone).
    pub fn remove_port(&mut self, port: u32) -> usize {
        self.selected(None).map(|c| c.remove_port(port)).sum()
    }

    /// The rule `spec` (a rule a `learn` makes) would leave in place, if it is in
    /// place as the learn would leave it: its match and priority, the learn's
    /// actions and cookie (a learn changes nothing else of a rule in place).
    pub fn learned_in_place(&self, spec: &FlowSpec) -> Option<&Arc<Rule>> {
        self.find_exact(spec.table, &spec.matcher, spec.priority)
            .filter(|r| learned_as(r, spec))
    }

    /// Carries out what a `learn` makes, `spec`, as Open vSwitch does (a strict
    /// modify that may add): a rule of its match and priority in place takes its
    /// actions and cookie (keeping its own timeouts, flags, counters, age and
    /// origin: a controller's rule stays a controller's); else it is added,
    /// unless `limit` (non-zero) rules of its table have its cookie already.
    pub fn learn(&mut self, spec: FlowSpec, limit: u32, now_ms: u64) -> LearnOutcome {
        let table = usize::from(spec.table);
        if let Some(old) = self
            .find_exact(spec.table, &spec.matcher, spec.priority)
            .cloned()
        {
            if learned_as(&old, &spec) {
                old.refresh(now_ms);
                return LearnOutcome::InPlace(old);
            }
            let mut new = old.with_actions(spec.actions, Written::default(), false);
            new.spec.cookie = spec.cookie;
            new.refresh(now_ms);
            let replaced = self.tables[table].replace(&old, new);
            debug_assert!(replaced, "a rule just found is in its table");
            let placed = self
                .find_exact(spec.table, &spec.matcher, spec.priority)
                .cloned()
                .expect("the rule just put in place");
            return LearnOutcome::Added(placed);
        }
        let full = limit != 0
            && self
                .tables
                .get(table)
                .is_some_and(|c| c.count_cookie(spec.cookie) >= limit as usize);
        if full {
            return LearnOutcome::OverLimit;
        }
        if self.tables.len() <= table {
            self.tables.resize_with(table + 1, Classifier::new);
        }
        LearnOutcome::Added(self.tables[table].insert_learned(spec, now_ms))
    }

    /// The (table, cookie) of every `learn(…, delete_learned)` in `rules`' actions.
    pub fn learn_owners(rules: &[Arc<Rule>]) -> Vec<(u8, u64)> {
        let mut owners: Vec<(u8, u64)> = rules
            .iter()
            .flat_map(|r| r.spec.actions.iter())
            .filter_map(|a| match a {
                Action::Learn(l) if l.delete_learned => Some((l.table, l.cookie)),
                _ => None,
            })
            .collect();
        owners.sort_unstable();
        owners.dedup();
        owners
    }

    /// After rules were removed or changed (`gone`: their old selves): for each
    /// (table, cookie) a `learn(…, delete_learned)` of theirs owned that no rule
    /// now in place owns, the rules of that table with that cookie go (Open
    /// vSwitch's learned cookies); returns them.
    pub fn delete_learned_of(&mut self, gone: &[Arc<Rule>]) -> Vec<Arc<Rule>> {
        if gone.is_empty() {
            return Vec::new();
        }
        let lost = Self::learn_owners(gone);
        if lost.is_empty() {
            return Vec::new();
        }
        let owned = Self::learn_owners(&self.rules());
        let mut removed = Vec::new();
        for (table, cookie) in lost {
            if owned.binary_search(&(table, cookie)).is_ok() {
                continue;
            }
            if let Some(c) = self.tables.get_mut(usize::from(table)) {
                removed.extend(c.remove_cookie(cookie));
            }
        }
        removed
    }

    /// Removes the rules whose timeout has run out; returns them.
    pub fn remove_expired(&mut self, now_ms: u64) -> Vec<Arc<Rule>> {
        self.selected(None)
            .flat_map(|c| c.remove_expired(now_ms))
            .collect()
    }

    pub fn any_expired(&self, now_ms: u64) -> bool {
        self.tables.iter().any(|c| c.any_expired(now_ms))
    }

    /// Whether some rule has a `learn(…, delete_learned)` (else removing rules
    /// takes nothing else with them).
    pub fn has_learn_owners(&self) -> bool {
        self.tables.iter().any(Classifier::has_learn_owners)
    }

    pub fn has_timeouts(&self) -> bool {
        self.tables.iter().any(Classifier::has_timeouts)
    }

    /// Every rule: by table, best first within a table.
    pub fn rules(&self) -> Vec<Arc<Rule>> {
        self.tables.iter().flat_map(Classifier::rules).collect()
    }

    /// The best rule for `key` in table `id`, adding the bits looked at to
    /// `wildcards` (see [`Classifier::lookup_wc`]).
    pub fn lookup_wc(
        &self,
        id: u8,
        key: &MatchKey,
        wildcards: &mut MatchKey,
    ) -> Option<&Arc<Rule>> {
        self.table(id)?.lookup_wc(key, wildcards)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::syntax::{parse_flow, parse_match};

    pub(super) fn no_names(_: &str) -> Option<u32> {
        None
    }

    pub(super) fn pipeline(flows: &[&str]) -> Pipeline {
        let mut p = Pipeline::new();
        for f in flows {
            p.insert(parse_flow(f, &no_names).unwrap(), 1);
        }
        p
    }

    #[test]
    fn rules_live_in_their_tables() {
        let p = pipeline(&[
            "in_port=1,actions=goto_table:3",
            "table=3,priority=5,udp,actions=output:2",
            "table=3,priority=1,actions=drop",
        ]);
        assert_eq!(p.len(), 3);
        assert_eq!(p.table_sizes(), vec![(0, 1), (3, 2)]);
        let key = FlowKey {
            in_port: 1,
            dl_type: 0x0800,
            nw_proto: 17,
            ..FlowKey::default()
        };
        let mut wc = MatchKey::default();
        let r = p.lookup_wc(3, &key.into(), &mut wc).unwrap();
        assert_eq!(r.spec.priority, 5);
        assert_eq!(wc.nw_proto, 0xff, "the udp rule's mask was looked at");
        assert_eq!(wc.in_port, 0, "no rule of table 3 looks at in_port");
        assert!(
            p.lookup_wc(7, &key.into(), &mut wc).is_none(),
            "an empty table"
        );
    }

    #[test]
    fn the_bits_of_subtables_that_missed_are_looked_at_too() {
        let p = pipeline(&[
            "priority=9,tcp,tp_dst=80,actions=drop",
            "priority=1,actions=NORMAL",
        ]);
        let key = FlowKey {
            dl_type: 0x0800,
            nw_proto: 17,
            tp_dst: 80,
            ..FlowKey::default()
        };
        let mut wc = MatchKey::default();
        let r = p.lookup_wc(0, &key.into(), &mut wc).unwrap();
        assert_eq!(r.spec.priority, 1);
        // The packet missed the tcp rule because of its protocol: a megaflow that
        // ignored nw_proto would wrongly take tcp packets to NORMAL.
        assert_eq!((wc.nw_proto, wc.tp_dst, wc.dl_type), (0xff, 0xffff, 0xffff));
    }

    #[test]
    fn a_search_stops_looking_once_no_better_rule_can_follow() {
        let p = pipeline(&[
            "priority=9,in_port=1,actions=drop",
            "priority=1,tcp,tp_dst=80,actions=drop",
        ]);
        let key = FlowKey {
            in_port: 1,
            ..FlowKey::default()
        };
        let mut wc = MatchKey::default();
        p.lookup_wc(0, &key.into(), &mut wc).unwrap();
        assert_eq!(wc.tp_dst, 0, "the lower subtable was never probed");
    }

    #[test]
    fn del_flows_selects_a_table_or_all() {
        let mut p = pipeline(&[
            "in_port=1,actions=drop",
            "table=1,in_port=1,actions=drop",
            "table=2,in_port=2,actions=drop",
        ]);
        let sel = parse_match("table=1,in_port=1", &no_names).unwrap();
        assert_eq!(p.remove(&sel, false), 1);
        let sel = parse_match("in_port=1", &no_names).unwrap();
        assert_eq!(p.remove(&sel, false), 1, "table 0's");
        assert_eq!(p.remove(&Selection::all(), false), 1);
        assert!(p.is_empty());
    }

    #[test]
    fn a_new_switch_is_a_learning_switch() {
        let p = Pipeline::learning_switch(0);
        let rules = p.rules();
        assert_eq!(rules.len(), 1);
        assert_eq!(rules[0].spec.priority, 0);
        assert_eq!(rules[0].spec.actions, vec![Action::Normal]);
        assert_eq!(
            crate::syntax::format_flow(&rules[0].spec),
            LEARNING_SWITCH_FLOW,
            "printed as it is saved"
        );
    }
}

#[cfg(test)]
mod selection_tests {
    use super::tests::{no_names, pipeline};
    use super::*;
    use crate::syntax::{parse_actions, parse_flow, parse_match};

    fn sel(text: &str) -> Selection {
        parse_match(text, &no_names).unwrap()
    }

    #[test]
    fn cookies_under_a_mask_and_output_ports_select() {
        let mut p = pipeline(&[
            "cookie=0x10,in_port=1,actions=output:2",
            "cookie=0x11,in_port=2,actions=output:3",
            "cookie=0x20,in_port=3,actions=output:2",
        ]);
        assert_eq!(p.select(&sel("cookie=0x10/0xf0"), false).len(), 2);
        assert_eq!(p.select(&sel("cookie=0x11"), false).len(), 1);
        assert_eq!(p.select(&sel("out_port=2"), false).len(), 2);
        assert_eq!(
            p.select(&sel("cookie=0x20/0xf0,out_port=2"), false).len(),
            1
        );
        assert_eq!(p.remove(&sel("cookie=0x10/0xf0,out_port=2"), false), 1);
        assert_eq!(p.len(), 2);
        assert!(parse_flow("out_port=2,actions=drop", &no_names).is_err());
        assert!(parse_flow("out_group=2,actions=drop", &no_names).is_err());
        assert!(parse_flow("cookie=1/1,actions=drop", &no_names).is_err());
    }

    #[test]
    fn out_group_selects_the_rules_that_hand_packets_to_the_group() {
        let mut p = pipeline(&["in_port=1,actions=output:2", "in_port=2,actions=output:3"]);
        p.set_group(
            crate::parse_group("group_id=5,type=all,bucket=output:1", &no_names).unwrap(),
            false,
            0,
        )
        .unwrap();
        p.insert(
            parse_flow("in_port=3,actions=group:5", &no_names).unwrap(),
            0,
        );
        let picked = p.select(&sel("out_group=5"), false);
        assert_eq!(picked.len(), 1);
        assert_eq!(picked[0].spec.actions, vec![Action::Group(5)]);
        assert!(p.select(&sel("out_group=6"), false).is_empty());
        assert_eq!(p.remove(&sel("out_group=5"), false), 1);
        assert_eq!(p.len(), 2);
        // A strict selection finds its rule in one bucket, as a scan would.
        let exact = sel("priority=32768,in_port=1");
        assert_eq!(p.select(&exact, true).len(), 1);
        let m = exact.matcher;
        assert!(p.find_exact(0, &m, 32768).is_some());
        assert!(p.find_exact(0, &m, 1).is_none());
    }

    #[test]
    fn modify_changes_actions_and_keeps_the_rest() {
        let mut p = pipeline(&[
            "cookie=0x7,priority=5,idle_timeout=9,in_port=1,actions=output:2",
            "priority=5,in_port=1,tcp,actions=output:2",
            "table=1,priority=5,in_port=1,actions=drop",
        ]);
        let before = p.select(&Selection::all(), false);
        before[0].stats.add(3, 300, 10);
        let to_3 = |r: &Rule| parse_actions("output:3", &no_names, &r.spec.matcher);
        // Non-strict, table 0: both rules of in_port=1 there.
        let n = p
            .modify(
                &Selection {
                    table: Some(0),
                    ..sel("in_port=1")
                },
                false,
                false,
                &Written::default(),
                &to_3,
            )
            .unwrap();
        assert_eq!(n, 2);
        let after = p.select(&sel("in_port=1,table=0"), false);
        assert!(after
            .iter()
            .all(|r| r.spec.actions == vec![Action::Output(3)]));
        let kept = after.iter().find(|r| r.spec.cookie == 7).unwrap();
        assert_eq!((kept.spec.idle_timeout, kept.stats.packets()), (9, 3));
        assert_eq!(kept.seq(), before[0].seq(), "its place is kept");
        // Strict, reset counts: only the exact match.
        let n = p
            .modify(
                &sel("priority=5,in_port=1"),
                true,
                true,
                &Written::default(),
                &|r: &Rule| parse_actions("drop", &no_names, &r.spec.matcher),
            )
            .unwrap();
        assert_eq!(n, 2, "one per table");
        let reset = p.select(&sel("cookie=7"), false);
        assert_eq!(reset[0].stats.packets(), 0);
        // A refused action changes nothing.
        let bad = p.modify(
            &sel("in_port=1"),
            false,
            false,
            &Written::default(),
            &|r: &Rule| parse_actions("mod_tp_dst:80", &no_names, &r.spec.matcher),
        );
        assert!(bad.is_err());
        assert_eq!(
            p.select(&sel("tcp"), false)[0].spec.actions,
            vec![Action::Output(3)]
        );
        // goto_table backwards from table 1.
        let back = p.modify(
            &sel("table=1"),
            false,
            false,
            &Written::default(),
            &|_: &Rule| Ok(vec![Action::GotoTable(1)]),
        );
        assert!(back.is_err());
    }

    #[test]
    fn overlap_is_same_priority_different_match_sharing_a_packet() {
        let p = pipeline(&["priority=5,in_port=1,actions=drop"]);
        let spec = |t: &str| parse_flow(t, &no_names).unwrap();
        assert!(p.overlaps(&spec("priority=5,tcp,actions=drop")));
        assert!(!p.overlaps(&spec("priority=6,tcp,actions=drop")));
        assert!(!p.overlaps(&spec("priority=5,in_port=2,actions=drop")));
        assert!(
            !p.overlaps(&spec("priority=5,in_port=1,actions=output:3")),
            "the same match replaces"
        );
    }
}

#[cfg(test)]
mod group_tests {
    use super::tests::no_names;
    use super::*;
    use crate::group::parse_group;
    use crate::syntax::parse_flow;

    fn g(text: &str) -> GroupSpec {
        parse_group(text, &no_names).unwrap()
    }

    #[test]
    fn groups_are_added_modified_and_deleted_with_the_rules_that_use_them() {
        let mut p = Pipeline::new();
        p.set_group(
            g("group_id=1,type=all,bucket=output:1,bucket=output:2"),
            false,
            1,
        )
        .unwrap();
        assert_eq!(
            p.set_group(g("group_id=1,type=all,bucket=output:3"), false, 1),
            Err(GroupError::Exists(1))
        );
        assert_eq!(
            p.set_group(g("group_id=2,type=all,bucket=output:3"), true, 1),
            Err(GroupError::Unknown(2))
        );
        assert_eq!(
            p.set_group(g("group_id=2,type=indirect,bucket=group:9"), false, 1),
            Err(GroupError::Unknown(9)),
            "a bucket's group must exist"
        );
        p.set_group(g("group_id=2,type=indirect,bucket=group:1"), false, 1)
            .unwrap();
        assert_eq!(
            p.set_group(g("group_id=1,type=all,bucket=group:2"), true, 1),
            Err(GroupError::Loop(1))
        );
        p.group(1).unwrap().stats.add(5, 500, 2);
        p.set_group(
            g("group_id=1,type=all,bucket=output:3,bucket=output:4"),
            true,
            9,
        )
        .unwrap();
        let kept = p.group(1).unwrap();
        assert_eq!(
            (kept.stats.packets(), kept.installed_ms),
            (5, 1),
            "counters kept"
        );
        let flow = parse_flow("in_port=1,actions=group:2", &no_names).unwrap();
        assert_eq!(p.missing_group(&flow.actions), None);
        p.insert(flow, 1);
        p.insert(
            parse_flow("in_port=2,actions=output:1", &no_names).unwrap(),
            1,
        );
        assert_eq!(p.missing_group(&[Action::Group(3)]), Some(3));
        let gone = p.delete_groups(Some(2));
        assert_eq!(gone.len(), 1, "the rule that used group 2 went with it");
        assert_eq!(p.len(), 1);
        assert!(p.delete_groups(Some(2)).is_empty(), "no group: no error");
        p.delete_groups(None);
        assert_eq!(p.groups().count(), 0);
    }
}
