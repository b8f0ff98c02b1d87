//! A bundle's adds put in subtables of their own as they arrive, so that its
//! commit into tables with no rule of their masks (an empty table, or one a delete
//! earlier in the bundle emptied: a controller's full install) puts whole
//! subtables in instead of inserting each rule (Open vSwitch's commit inserts
//! each). What cannot be put in so is put in rule by rule, as without a stage.

use std::collections::HashMap;
use std::sync::Arc;

use super::{Classifier, PreparedRule, Subtable};
use crate::MatchKey;

/// Staged adds, by table and mask.
#[derive(Default)]
pub struct StagedRules {
    /// Each (table, mask)'s subtable, with the place of the add that last raised
    /// its highest priority (the order one-by-one inserts would give subtables of
    /// equal highest priority: the one that reached it first comes first).
    subtables: Vec<(u8, Subtable, usize)>,
    /// Where each (table, mask) is in `subtables`; looked at only when an add is
    /// not of the last add's (a bulk add's rules mostly come in runs of one shape,
    /// and a mask is 400 bytes to hash).
    index: HashMap<(u8, MatchKey), usize>,
    last: usize,
    /// Rules staged, by table: each has its place among its table's as its `seq`
    /// until the commit places it after the table's rules.
    per_table: Vec<u64>,
    /// The staged rules in the order staged (placed in it: a walk of a vector,
    /// not of the subtables' tries).
    in_order: Vec<Arc<crate::Rule>>,
    /// An add took the place of an earlier one (same table, match and priority):
    /// the stage is not put in (the earlier one would be said to stay), and
    /// stages nothing more.
    replaced_within: bool,
}

impl std::fmt::Debug for StagedRules {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StagedRules")
            .field("subtables", &self.subtables.len())
            .field("staged", &self.in_order.len())
            .field("replaced_within", &self.replaced_within)
            .finish()
    }
}

impl StagedRules {
    /// Stages the rule of an add, which is in no table (the add keeps its rule:
    /// the stage holds it too).
    pub fn stage(&mut self, prepared: &PreparedRule) {
        if self.replaced_within {
            return;
        }
        let rule = &prepared.rule;
        let spec = &rule.spec;
        let table = usize::from(spec.table);
        if self.per_table.len() <= table {
            self.per_table.resize(table + 1, 0);
        }
        let nth = &mut self.per_table[table];
        *nth += 1;
        rule.place(0, *nth);
        self.in_order.push(rule.clone());
        let mask = spec.matcher.mask();
        let same_as_last = self
            .subtables
            .get(self.last)
            .is_some_and(|(t, s, _)| *t == spec.table && s.mask == *mask);
        if !same_as_last {
            let n = self.subtables.len();
            self.last = *self.index.entry((spec.table, *mask)).or_insert(n);
            if self.last == n {
                self.subtables.push((spec.table, Subtable::new(*mask), 0));
            }
        }
        let at = self.in_order.len();
        let (_, sub, raised_at) = &mut self.subtables[self.last];
        let highest_before = (sub.n_rules > 0).then_some(sub.max_priority);
        let gone = sub.add_replacing(
            prepared.key.clone(),
            rule.clone(),
            Arc::new(Vec::with_capacity(1)),
            &mut |r| r.same_place(spec),
        );
        if highest_before.is_none_or(|p| sub.max_priority > p) {
            *raised_at = at;
        }
        if !gone.is_empty() {
            // Put in one by one, as the commit then does: what is staged is let go.
            *self = StagedRules {
                replaced_within: true,
                ..StagedRules::default()
            };
        }
    }

    /// Whether it may still be put in whole (no add of it took another's place).
    pub fn usable(&self) -> bool {
        !self.replaced_within
    }

    /// Rules staged.
    pub fn len(&self) -> usize {
        self.in_order.len()
    }

    pub fn is_empty(&self) -> bool {
        self.in_order.is_empty()
    }

    /// Whether it can be put in `tables` as it is: no add of it took another's
    /// place, and no table has rules of the masks it has rules of.
    pub(crate) fn fits(&self, tables: &[Classifier]) -> bool {
        !self.replaced_within
            && self.subtables.iter().all(|(table, sub, _)| {
                tables
                    .get(usize::from(*table))
                    .is_none_or(|c| !c.has_rules_of(&sub.mask))
            })
    }

    /// Puts it in `tables`, which it [`StagedRules::fits`], at `now_ms`: its rules
    /// after every rule of their tables, in the order staged; its subtables after
    /// theirs of the same highest priority, in the order they reached it. What it
    /// keeps after is only its list of the rules (to be let go of when it suits the
    /// caller): it stages nothing more.
    pub(crate) fn put_in(&mut self, tables: &mut Vec<Classifier>, now_ms: u64) {
        let mut subtables = std::mem::take(&mut self.subtables);
        subtables.sort_by_key(|(_, _, raised_at)| *raised_at);
        let mut base = [0u64; 256];
        for (table, sub, _) in subtables {
            let id = usize::from(table);
            if tables.len() <= id {
                tables.resize_with(id + 1, Classifier::new);
            }
            base[id] = tables[id].next_seq;
            tables[id].adopt(sub);
        }
        self.index.clear();
        self.replaced_within = true;
        for (id, n) in std::mem::take(&mut self.per_table).into_iter().enumerate() {
            if n > 0 {
                let t = &mut tables[id];
                t.next_seq += n;
                t.sort_subtables();
            }
        }
        for r in &self.in_order {
            r.place(now_ms, base[usize::from(r.spec.table)] + r.seq());
        }
    }
}

impl Classifier {
    /// Whether it has rules of exactly `mask`.
    fn has_rules_of(&self, mask: &MatchKey) -> bool {
        self.subtables
            .iter()
            .any(|s| s.mask == *mask && s.n_rules > 0)
    }

    /// Puts in a staged subtable (of a mask it has no rules of; its rules placed by
    /// the caller after every rule it has, and its subtables sorted).
    fn adopt(&mut self, sub: Subtable) {
        self.n_rules += sub.n_rules;
        self.subtables.retain(|s| s.mask != sub.mask);
        self.subtables.push(sub);
    }
}
