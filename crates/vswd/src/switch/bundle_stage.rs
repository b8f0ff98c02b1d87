//! A bundle's flow adds made ready for its commit as they come: their rules in
//! subtables of their own ([`vsw_flow::StagedRules`]) and each one's journal line,
//! so that a commit into tables with no rules of their masks — a controller's full
//! install, adds after a delete of everything — puts whole subtables in. Used when
//! every message from the first add on is an add, none asking CHECK_OVERLAP; else,
//! or when the tables have rules of their masks, the commit carries out each
//! message as it would without a stage.

use std::sync::Arc;

use vsw_flow::{Pipeline, PreparedRule, StagedRules};

use super::rules::AddedRule;
use super::{Change, FlowChange, SwitchError};

#[derive(Default)]
pub struct BundleStage {
    rules: StagedRules,
    /// The staged adds' rules and lines, in the bundle's order.
    added: Vec<AddedRule>,
    /// Messages taken into the bundle.
    messages: usize,
    /// The bundle's first add, by its place among the messages.
    first_add: Option<usize>,
    /// A message other than a plain add came after the first add: not used.
    spoiled: bool,
    /// The staged rules that name groups or meters, by their message's place
    /// (whether those are there is known only at the commit).
    naming: Vec<(usize, Arc<vsw_flow::Rule>)>,
}

impl std::fmt::Debug for BundleStage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BundleStage")
            .field("rules", &self.rules)
            .field("first_add", &self.first_add)
            .field("spoiled", &self.spoiled)
            .finish()
    }
}

impl BundleStage {
    /// The next message taken into the bundle, as the switch made it (`None`: a
    /// group-mod, made at the commit).
    pub fn take(&mut self, change: Option<&Change>) {
        let at = self.messages;
        self.messages += 1;
        if self.spoiled {
            return;
        }
        let add = match change {
            Some(Change::Flow(flow)) => match &**flow {
                FlowChange::Add {
                    rule,
                    check_overlap: false,
                    saved_as,
                } => Some((rule, saved_as)),
                _ => None,
            },
            _ => None,
        };
        match add {
            Some((rule, saved_as)) => self.stage(at, rule, saved_as.clone()),
            // Before the first add: carried out as without a stage.
            None if self.first_add.is_none() => {}
            None => self.spoil(at, "a bundle's adds are followed by another change"),
        }
    }

    /// Not to be used: what it holds is let go of, and it stages nothing more.
    fn spoil(&mut self, at: usize, why: &str) {
        tracing::debug!(
            message = at,
            "{why}: its commit carries out its adds one by one"
        );
        *self = BundleStage {
            messages: self.messages,
            spoiled: true,
            ..BundleStage::default()
        };
    }

    fn stage(
        &mut self,
        at: usize,
        rule: &PreparedRule,
        saved_as: Option<crate::journal::RecordText>,
    ) {
        self.first_add.get_or_insert(at);
        self.rules.stage(rule);
        if !self.rules.usable() {
            return self.spoil(at, "an add of a bundle replaces another of it");
        }
        if Pipeline::names_groups_or_meters(&rule.spec().actions) {
            self.naming.push((at, rule.rule().clone()));
        }
        self.added
            .push(AddedRule::new(rule.rule().clone(), saved_as));
    }

    /// Where the staged adds start among the bundle's messages, when the stage is
    /// to be used.
    pub fn first_add(&self) -> Option<usize> {
        self.first_add.filter(|_| !self.spoiled)
    }

    /// Puts the staged adds in `pipeline` at `now`, their rules to `added`:
    /// `Ok(false)` (nothing changed) when the tables have rules of their masks.
    /// `Err`: the place of the message whose group or meter is not there, and why.
    /// What it keeps after is to be let go of after the reply.
    pub(super) fn put_in(
        &mut self,
        pipeline: &mut Pipeline,
        now: u64,
        added: &mut Vec<AddedRule>,
    ) -> Result<bool, (usize, SwitchError)> {
        for (at, rule) in &self.naming {
            if let Some(g) = pipeline.missing_group(&rule.spec.actions) {
                return Err((*at, SwitchError::NoSuchGroup(g)));
            }
            if let Some(m) = pipeline.missing_meter(&rule.spec.actions) {
                return Err((*at, SwitchError::NoSuchMeter(m)));
            }
        }
        if !pipeline.adopt_staged(&mut self.rules, now) {
            return Ok(false);
        }
        if added.is_empty() {
            *added = std::mem::take(&mut self.added);
        } else {
            added.append(&mut self.added);
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn add(text: &str, check_overlap: bool) -> Change {
        let spec = vsw_flow::parse_flow(text, &|_: &str| None).unwrap();
        Change::Flow(Box::new(FlowChange::Add {
            rule: PreparedRule::new(spec),
            check_overlap,
            saved_as: None,
        }))
    }

    fn delete_all() -> Change {
        Change::Flow(Box::new(FlowChange::Delete {
            selection: vsw_flow::Selection::all(),
            strict: false,
        }))
    }

    fn first_add(changes: &[Option<Change>]) -> Option<usize> {
        let mut stage = BundleStage::default();
        for c in changes {
            stage.take(c.as_ref());
        }
        stage.first_add()
    }

    #[test]
    fn a_stage_is_used_only_when_every_message_from_the_first_add_is_a_plain_add() {
        let a = || Some(add("priority=1,in_port=1,actions=drop", false));
        let b = || Some(add("priority=1,in_port=2,actions=drop", false));
        assert_eq!(first_add(&[a(), b()]), Some(0));
        // What comes before the adds is carried out first, as without a stage.
        assert_eq!(first_add(&[Some(delete_all()), None, a(), b()]), Some(2));
        // An add replacing an earlier one of the bundle (same match and priority).
        assert_eq!(first_add(&[a(), b(), a()]), None);
        // A delete, a group-mod or a CHECK_OVERLAP add after an add: not used.
        assert_eq!(first_add(&[a(), Some(delete_all()), a()]), None);
        assert_eq!(first_add(&[a(), None]), None);
        let overlap = Some(add("priority=1,in_port=2,actions=drop", true));
        assert_eq!(first_add(&[a(), overlap]), None);
        assert_eq!(
            first_add(&[Some(delete_all())]),
            None,
            "no adds: nothing staged"
        );
    }
}
