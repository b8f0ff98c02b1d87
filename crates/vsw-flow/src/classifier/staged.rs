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
    subtables: Vec<(u8, Subtable)>,
    /// Where each (table, mask) is in `subtables`; looked at only when an add is
    /// not of the last add's (a bulk add's rules mostly come in runs of one shape,
    /// and a mask is 400 bytes to hash).
    index: HashMap<(u8, MatchKey), usize>,
    last: usize,
    /// Rules staged, by table: each has its place among its table's as its `seq`
    /// until the commit places it after the table's rules.
    per_table: HashMap<u8, u64>,
    staged: u64,
    /// The staged rules in the order staged (placed in it: a walk of a vector,
    /// not of the subtables' tries).
    in_order: Vec<Arc<crate::Rule>>,
    /// An add took the place of an earlier one (same table, match and priority):
    /// the stage is not put in (the earlier one would be said to stay).
    replaced_within: bool,
}

impl std::fmt::Debug for StagedRules {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StagedRules")
            .field("subtables", &self.subtables.len())
            .field("staged", &self.staged)
            .finish()
    }
}

impl StagedRules {
    /// Stages the rule of an add (the add keeps its rule: the stage holds it too).
    pub fn stage(&mut self, prepared: &PreparedRule) {
        let rule = &prepared.rule;
        let spec = &rule.spec;
        self.staged += 1;
        let nth = self.per_table.entry(spec.table).or_default();
        *nth += 1;
        rule.place(0, *nth);
        self.in_order.push(rule.clone());
        let mask = spec.matcher.mask();
        let same_as_last = self
            .subtables
            .get(self.last)
            .is_some_and(|(t, s)| *t == spec.table && s.mask == *mask);
        if !same_as_last {
            let n = self.subtables.len();
            self.last = *self.index.entry((spec.table, *mask)).or_insert(n);
            if self.last == n {
                self.subtables.push((spec.table, Subtable::new(*mask)));
            }
        }
        let (_, sub) = &mut self.subtables[self.last];
        let gone = sub.add_replacing(
            prepared.key.clone(),
            rule.clone(),
            Arc::new(Vec::with_capacity(1)),
            &mut |r| r.spec.priority == spec.priority && r.spec.matcher == spec.matcher,
        );
        self.replaced_within |= !gone.is_empty();
    }

    /// Rules staged.
    pub fn len(&self) -> u64 {
        self.staged
    }

    pub fn is_empty(&self) -> bool {
        self.staged == 0
    }

    /// Whether it can be put in `tables` as it is: no add of it took another's
    /// place, and no table has rules of the masks it has rules of.
    pub(crate) fn fits(&self, tables: &[Classifier]) -> bool {
        !self.replaced_within
            && self.subtables.iter().all(|(table, sub)| {
                tables
                    .get(usize::from(*table))
                    .is_none_or(|c| !c.has_rules_of(&sub.mask))
            })
    }

    /// Puts it in `tables`, which it [`StagedRules::fits`], at `now_ms`: its rules
    /// after every rule of their tables, in the order staged. It keeps only its
    /// list of them (to be let go of when it suits the caller).
    pub(crate) fn put_in(&mut self, tables: &mut Vec<Classifier>, now_ms: u64) {
        let mut base = [0u64; 256];
        for (table, sub) in std::mem::take(&mut self.subtables) {
            let id = usize::from(table);
            if tables.len() <= id {
                tables.resize_with(id + 1, Classifier::new);
            }
            base[id] = tables[id].next_seq;
            tables[id].adopt(sub);
        }
        self.index.clear();
        for (id, n) in &self.per_table {
            let t = &mut tables[usize::from(*id)];
            t.next_seq += n;
            t.sort_subtables();
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
