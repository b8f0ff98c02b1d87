//! Rules, groups and meters: flow-mods of every kind, carried out on a copy of the
//! pipeline and put in place whole (revalidated before they are answered).

use super::*;

impl Switch {
    /// A revalidator pass now: when it returns, no PMD forwards by a datapath flow
    /// the rules, ports or MAC table no longer give.
    pub(super) fn revalidate_now(&mut self) -> Result<(), SwitchError> {
        let opts = SwitchOptions::from_options(&self.options).ok();
        let max_idle = opts.map_or(crate::options::DEFAULT_MAX_IDLE_MS, |o| o.max_idle_ms);
        self.dpif.dp().revalidate(now_ms(), max_idle)?;
        Ok(())
    }

    /// A revalidation after a change that only removed `rules`: the flows that
    /// matched one of them are translated again, and when it returns no PMD
    /// forwards by a flow the rules no longer give.
    pub(super) fn revalidate_removed(
        &mut self,
        rules: &[Arc<vsw_flow::Rule>],
    ) -> Result<(), SwitchError> {
        let at: Vec<usize> = rules.iter().map(|r| Arc::as_ptr(r) as usize).collect();
        self.dpif.dp().revalidate_removed(&at, now_ms())?;
        Ok(())
    }

    /// Puts `pipeline` in place of the running one, the counts the old rules earned
    /// pushed to them first, and revalidates (no PMD forwards by the old rules once
    /// it returns): the old pipeline, and whether the revalidation failed.
    pub(super) fn install_pipeline(
        &mut self,
        pipeline: Pipeline,
    ) -> (Arc<Pipeline>, Result<(), SwitchError>) {
        self.dpif.dp().push_flow_stats();
        let old = self.ofproto.pipeline();
        for (m, _) in pipeline.meters() {
            self.dpif
                .dp()
                .set_meter(Backer::dp_meter(self.slot, m.id), Some(&meter_config(m)));
        }
        self.ofproto.set_pipeline(pipeline);
        let revalidated = self.revalidate_now();
        self.withdraw_offloads();
        (old, revalidated)
    }

    /// The datapath lets go of the meters `old` had that the running pipeline has not.
    pub(super) fn forget_meters_of(&mut self, old: &Pipeline) {
        let now = self.ofproto.pipeline();
        for (m, _) in old.meters() {
            if now.meter(m.id).is_none() {
                self.dpif
                    .dp()
                    .set_meter(Backer::dp_meter(self.slot, m.id), None);
            }
        }
    }

    pub(super) fn add_flows(&mut self, texts: &[String]) -> Result<Value, SwitchError> {
        let names = |n: &str| self.port_no(n);
        let mut specs = Vec::with_capacity(texts.len());
        for (i, t) in texts.iter().enumerate() {
            let spec = parse_flow(t, &names).map_err(|error| {
                if texts.len() == 1 {
                    SwitchError::Flow(error)
                } else {
                    SwitchError::FlowLine { line: i + 1, error }
                }
            })?;
            specs.push(spec);
        }
        let ofproto = self.ofproto.clone();
        let _writing = ofproto.writing_rules();
        let mut pipeline = (*self.ofproto.pipeline()).clone();
        if let Some(g) = specs
            .iter()
            .find_map(|s| pipeline.missing_group(&s.actions))
        {
            return Err(SwitchError::NoSuchGroup(g));
        }
        if !specs
            .iter()
            .all(vsw_openflow::as_written::rule_fits_openflow)
        {
            return Err(SwitchError::TooLarge("flow"));
        }
        if let Some(m) = specs
            .iter()
            .find_map(|s| pipeline.missing_meter(&s.actions))
        {
            return Err(SwitchError::NoSuchMeter(m));
        }
        let now = now_ms();
        let added: Vec<RecordText> = specs.iter().map(record_text).collect();
        // The rules the adds replace (same match and priority) may have been the
        // last to learn with delete_learned.
        let replaced: Vec<Arc<vsw_flow::Rule>> = specs
            .iter()
            .filter_map(|s| {
                pipeline
                    .find_exact(s.table, &s.matcher, s.priority)
                    .cloned()
            })
            .collect();
        for spec in specs {
            pipeline.insert(spec, now);
        }
        let learned_gone = pipeline.delete_learned_of(&replaced);
        self.replace_rules_noted(pipeline, &[], &added, None)?;
        for r in &learned_gone {
            self.note_removed(r, Removal::Deleted, now);
        }
        Ok(json!({ "added": texts.len() }))
    }

    pub(super) fn del_flows(
        &mut self,
        matching: Option<&str>,
        strict: bool,
    ) -> Result<Value, SwitchError> {
        let change = FlowChange::Delete {
            selection: self.selection(matching)?,
            strict,
        };
        let removed = self.flow_changes(vec![change])?.remove(0)?;
        Ok(json!({ "removed": removed }))
    }

    /// `mod-flows`' text: a selection, then `actions=`.
    pub(super) fn mod_flows(
        &mut self,
        text: &str,
        strict: bool,
        reset_counts: bool,
    ) -> Result<Value, SwitchError> {
        let (selection, actions) = text
            .split_once("actions=")
            .ok_or(SwitchError::Flow(FlowSyntaxError::NoActions))?;
        let names = |n: &str| self.port_no(n);
        let change = FlowChange::Modify {
            selection: parse_match(selection.trim_end_matches(','), &names)?,
            // Checked against each selected rule's match when they replace its own.
            actions: vsw_flow::parse_actions_unchecked(actions, &names)?,
            written: Default::default(),
            strict,
            reset_counts,
            or_add: None,
        };
        let changed = self.flow_changes(vec![change])?.remove(0)?;
        Ok(json!({ "modified": changed }))
    }

    /// A selection's text (`None`: every rule) in this bridge's port names.
    fn selection(&self, text: Option<&str>) -> Result<Selection, SwitchError> {
        Ok(match text {
            Some(text) => parse_match(text, &|n: &str| self.port_no(n))?,
            None => Selection::all(),
        })
    }

    /// Carries out flow-mods (OpenFlow's, in order), each on its own terms — one
    /// refused changes nothing of the others, and each says how many rules it
    /// touched — in one change of the tables: one journal line (or state write)
    /// and one revalidation for all of them. A batch that changes nothing (deletes
    /// of rules that are not there, say) writes and revalidates nothing. `Err`: the
    /// change itself could not be made, and none was.
    pub fn flow_changes(
        &mut self,
        changes: Vec<FlowChange>,
    ) -> Result<Vec<Result<usize, SwitchError>>, SwitchError> {
        let ofproto = self.ofproto.clone();
        let _writing = ofproto.writing_rules();
        let old = self.ofproto.pipeline();
        let mut pipeline = (*old).clone();
        let now = now_ms();
        let mut log = RuleChanges::default();
        let mut deleted = Vec::new();
        let results: Vec<Result<usize, SwitchError>> = changes
            .into_iter()
            .map(|c| self.apply_change(&mut pipeline, Box::new(c), now, &mut log, &mut deleted))
            .collect();
        delete_learned(&mut pipeline, &mut log, &mut deleted);
        self.publish_flow_batch(pipeline, log, &deleted, now)?;
        Ok(results)
    }

    /// Carries out a committed bundle (OpenFlow's): every change in order, all of
    /// them or — when one is refused — none, in one change of the tables (one
    /// revalidation: no packet sees part of it); then its staged adds, when it
    /// has them (they are the messages after `changes`). `Err`: the index of the
    /// change refused (`None`: the changed tables could not be saved or put in
    /// place) and why; the tables are as they were.
    pub fn commit_changes(
        &mut self,
        changes: Vec<Change>,
        staged: Option<StagedRun<'_>>,
    ) -> Result<Leftovers, (Option<usize>, SwitchError)> {
        let ofproto = self.ofproto.clone();
        let _writing = ofproto.writing_rules();
        let old = self.ofproto.pipeline();
        let mut pipeline = (*old).clone();
        let now = now_ms();
        let mut done = BundleDone::default();
        done.log.added.reserve(changes.len());
        for (i, change) in changes.into_iter().enumerate() {
            self.apply_bundled(&mut pipeline, change, now, &mut done)
                .map_err(|e| (Some(i), e))?;
        }
        let mut leftovers = Leftovers::default();
        if let Some(mut run) = staged {
            let put = run
                .stage
                .put_in(&mut pipeline, now, &mut done.log.added)
                .map_err(|(at, e)| (Some(at), e))?;
            leftovers.keep(run.stage);
            if !put {
                // The tables have rules of the staged masks: one by one.
                for (i, change) in (run.one_by_one)().into_iter().enumerate() {
                    self.apply_bundled(&mut pipeline, change, now, &mut done)
                        .map_err(|e| (Some(run.from + i), e))?;
                }
            }
        }
        let BundleDone {
            mut log,
            mut deleted,
            group_deleted,
            groups_changed,
        } = done;
        delete_learned(&mut pipeline, &mut log, &mut deleted);
        deleted.extend(pipeline.delete_learned_of(&group_deleted));
        if groups_changed {
            // Groups are not journalled: the state file is written whole.
            self.replace_rules(pipeline).map_err(|e| (None, e))?;
            for r in &deleted {
                self.note_removed(r, Removal::Deleted, now);
            }
            leftovers.keep(log);
        } else {
            leftovers.keep(
                self.publish_flow_batch(pipeline, log, &deleted, now)
                    .map_err(|e| (None, e))?,
            );
        }
        for r in &group_deleted {
            self.note_removed(r, Removal::GroupDeleted, now);
        }
        Ok(leftovers)
    }

    /// One change of a committed bundle, made on `pipeline`.
    fn apply_bundled(
        &self,
        pipeline: &mut Pipeline,
        change: Change,
        now: u64,
        done: &mut BundleDone,
    ) -> Result<(), SwitchError> {
        match change {
            Change::Flow(c) => self
                .apply_change(pipeline, c, now, &mut done.log, &mut done.deleted)
                .map(|_| ()),
            Change::SetGroup { spec, modify } => {
                done.groups_changed = true;
                check_group(&spec).and_then(|()| {
                    pipeline
                        .set_group(spec, modify, now)
                        .map_err(SwitchError::from)
                })
            }
            Change::DelGroups(id) => {
                done.groups_changed = true;
                done.group_deleted.extend(pipeline.delete_groups(id));
                Ok(())
            }
        }
    }

    /// Makes `pipeline`, the running one with a batch of flow changes made (`log`),
    /// the running one: one journal line for what the batch changed, one
    /// revalidation; the rules it deleted are told of. A batch that changed nothing
    /// writes and revalidates nothing.
    fn publish_flow_batch(
        &mut self,
        pipeline: Pipeline,
        log: RuleChanges,
        deleted: &[Arc<vsw_flow::Rule>],
        now: u64,
    ) -> Result<Leftovers, SwitchError> {
        let mut leftovers = Leftovers::default();
        if log.is_empty() {
            return Ok(leftovers);
        }
        if !self.journal_takes_change() {
            // The state file is written whole: nothing to say rule by rule.
            self.replace_rules(pipeline)?;
            for r in deleted {
                self.note_removed(r, Removal::Deleted, now);
            }
            return Ok(leftovers);
        }
        // What the journal says of the batch: the running pipeline's rules it took
        // away, and the rules it put in that stayed — so a rule added and deleted
        // again in one batch writes nothing.
        let (gone, mut stayed) = log.into_net();
        if gone.is_empty() && stayed.is_empty() {
            return Ok(leftovers);
        }
        // Only deletes (nothing added or changed): the flows that matched none of
        // the deleted rules stay as they are.
        let only_removes = stayed.is_empty();
        // Rules a `learn` made are not saved: they change the tables, not the file.
        let del: Vec<RecordText> = gone
            .iter()
            .filter(|r| !r.learned)
            .map(|r| record_text(&r.spec))
            .collect();
        let add: Vec<RecordText> = stayed
            .iter_mut()
            .filter(|a| !a.rule.learned)
            .map(|a| {
                a.saved_as
                    .take()
                    .unwrap_or_else(|| record_text(&a.rule.spec))
            })
            .collect();
        let only_removed = only_removes.then_some(&gone[..]);
        self.replace_rules_noted(pipeline, &del, &add, only_removed)?;
        for r in deleted {
            self.note_removed(r, Removal::Deleted, now);
        }
        leftovers.keep(del);
        leftovers.keep(add);
        leftovers.keep(stayed);
        leftovers.keep(gone);
        Ok(leftovers)
    }

    /// One change of [`Switch::flow_changes`], made on `pipeline`: the rules it
    /// put in and took out go to `log`, the rules it deleted to `deleted`.
    pub(super) fn apply_change(
        &self,
        pipeline: &mut Pipeline,
        change: Box<FlowChange>,
        now: u64,
        log: &mut RuleChanges,
        deleted: &mut Vec<Arc<vsw_flow::Rule>>,
    ) -> Result<usize, SwitchError> {
        // (Taken apart in its box: a change is large, and a bundle's commit has
        // many.)
        match *change {
            FlowChange::Add {
                rule,
                check_overlap,
                saved_as,
            } => {
                let spec = rule.spec();
                if let Some(g) = pipeline.missing_group(&spec.actions) {
                    return Err(SwitchError::NoSuchGroup(g));
                }
                if let Some(m) = pipeline.missing_meter(&spec.actions) {
                    return Err(SwitchError::NoSuchMeter(m));
                }
                if check_overlap && pipeline.overlaps(spec) {
                    return Err(SwitchError::Overlap);
                }
                let done = pipeline.insert_prepared(rule, now);
                log.removed.extend(done.replaced);
                log.added.push(AddedRule {
                    rule: done.rule,
                    saved_as,
                });
                Ok(1)
            }
            FlowChange::Delete { selection, strict } => {
                let removed = pipeline.remove_rules(&selection, strict);
                log.removed.extend(removed.iter().cloned());
                let n = removed.len();
                deleted.extend(removed);
                Ok(n)
            }
            FlowChange::Modify {
                selection,
                actions,
                written,
                strict,
                reset_counts,
                or_add,
            } => {
                if let Some((spec, check_overlap)) = or_add {
                    if pipeline.select(&selection, strict).is_empty() {
                        let add = FlowChange::add(*spec, check_overlap)?;
                        return self.apply_change(pipeline, Box::new(add), now, log, deleted);
                    }
                }
                // The new actions' groups and meters must exist, as an add's must.
                if let Some(g) = pipeline.missing_group(&actions) {
                    return Err(SwitchError::NoSuchGroup(g));
                }
                if let Some(m) = pipeline.missing_meter(&actions) {
                    return Err(SwitchError::NoSuchMeter(m));
                }
                // Each selected rule with the new actions, checked as a whole flow.
                let with_actions = |r: &vsw_flow::Rule| {
                    let mut spec = vsw_flow::FlowSpec {
                        actions: actions.clone(),
                        ..r.spec.clone()
                    };
                    spec.as_written.actions = written.clone();
                    vsw_flow::check_flow(&spec).map(|()| spec)
                };
                let picked = pipeline.select(&selection, strict);
                // A refusal says why: the action that needs what a match lacks, or
                // a rule too large to describe.
                for r in &picked {
                    if !vsw_openflow::as_written::rule_fits_openflow(&with_actions(r)?) {
                        return Err(SwitchError::TooLarge("flow"));
                    }
                }
                let n = pipeline.modify(&selection, strict, reset_counts, &written, &|r| {
                    with_actions(r).map(|s| s.actions)
                })?;
                // Each picked rule was replaced by one with the new actions.
                log.added.extend(picked.iter().filter_map(|r| {
                    let rule = pipeline
                        .find_exact(r.spec.table, &r.spec.matcher, r.spec.priority)?
                        .clone();
                    Some(AddedRule {
                        rule,
                        saved_as: None,
                    })
                }));
                log.removed.extend(picked);
                Ok(n)
            }
        }
    }

    /// `add-group`'s / `mod-group`'s text, in this bridge's port names.
    pub(super) fn set_group_text(
        &mut self,
        text: &str,
        modify: bool,
    ) -> Result<Value, SwitchError> {
        let spec = vsw_flow::parse_group(text, &|n: &str| self.port_no(n))?;
        self.set_group(spec, modify)
    }

    /// Adds a group (`modify`: changes one), checked by `GroupSpec::check`.
    pub fn set_group(
        &mut self,
        spec: vsw_flow::GroupSpec,
        modify: bool,
    ) -> Result<Value, SwitchError> {
        check_group(&spec)?;
        let ofproto = self.ofproto.clone();
        let _writing = ofproto.writing_rules();
        let mut pipeline = (*self.ofproto.pipeline()).clone();
        pipeline.set_group(spec, modify, now_ms())?;
        self.replace_rules(pipeline)?;
        Ok(Value::Null)
    }

    /// Removes a group (`None`: all) and the rules that hand packets to it.
    pub(super) fn del_groups(&mut self, id: Option<u32>) -> Result<Value, SwitchError> {
        let ofproto = self.ofproto.clone();
        let _writing = ofproto.writing_rules();
        let mut pipeline = (*self.ofproto.pipeline()).clone();
        let removed = pipeline.delete_groups(id);
        let learned_gone = pipeline.delete_learned_of(&removed);
        self.replace_rules(pipeline)?;
        let now = now_ms();
        for r in &removed {
            self.note_removed(r, Removal::GroupDeleted, now);
        }
        for r in &learned_gone {
            self.note_removed(r, Removal::Deleted, now);
        }
        Ok(json!({ "flows_removed": removed.len() }))
    }

    /// Adds a meter (`modify`: changes one), checked by `MeterSpec::check`.
    pub fn set_meter(
        &mut self,
        spec: vsw_flow::MeterSpec,
        modify: bool,
    ) -> Result<Value, SwitchError> {
        spec.check()?;
        let ofproto = self.ofproto.clone();
        let _writing = ofproto.writing_rules();
        let mut pipeline = (*self.ofproto.pipeline()).clone();
        let (id, config) = (spec.id, meter_config(&spec));
        pipeline.set_meter(spec, modify, now_ms())?;
        self.replace_rules(pipeline)?;
        self.dpif
            .dp()
            .set_meter(Backer::dp_meter(self.slot, id), Some(&config));
        Ok(Value::Null)
    }

    /// Removes a meter (`None`: all) and the rules that use it.
    pub(super) fn del_meters(&mut self, id: Option<u32>) -> Result<Value, SwitchError> {
        let ofproto = self.ofproto.clone();
        let _writing = ofproto.writing_rules();
        let current = self.ofproto.pipeline();
        let gone: Vec<u32> = current
            .meters()
            .map(|(m, _)| m.id)
            .filter(|m| id.is_none_or(|i| i == *m))
            .collect();
        let mut pipeline = (*current).clone();
        let removed = pipeline.delete_meters(id);
        let learned_gone = pipeline.delete_learned_of(&removed);
        self.replace_rules(pipeline)?;
        for r in &learned_gone {
            self.note_removed(r, Removal::Deleted, now_ms());
        }
        for m in gone {
            self.dpif
                .dp()
                .set_meter(Backer::dp_meter(self.slot, m), None);
        }
        let now = now_ms();
        for r in &removed {
            self.note_removed(r, Removal::MeterDeleted, now);
        }
        Ok(json!({ "flows_removed": removed.len() }))
    }

    /// Every meter as it is.
    pub fn meter_specs(&self) -> Vec<vsw_flow::MeterSpec> {
        self.ofproto
            .pipeline()
            .meters()
            .map(|(m, _)| (**m).clone())
            .collect()
    }

    /// Group `id` as it is.
    pub fn group_spec(&self, id: u32) -> Option<vsw_flow::GroupSpec> {
        self.ofproto.pipeline().group(id).map(|g| g.spec.clone())
    }

    /// Every group as it is.
    pub fn group_specs(&self) -> Vec<vsw_flow::GroupSpec> {
        self.ofproto
            .pipeline()
            .groups()
            .map(|g| g.spec.clone())
            .collect()
    }

    /// The rules a selection (as `del-flows` takes it; `None`: all) picks, with
    /// their counters up to now, and the time.
    pub fn select_rules(
        &self,
        selection: &Selection,
        strict: bool,
    ) -> (Vec<Arc<vsw_flow::Rule>>, u64) {
        self.dpif.dp().push_flow_stats();
        (self.ofproto.pipeline().select(selection, strict), now_ms())
    }

    /// Whether a rule or group bucket of the bridge reads or writes `tun_metadata0`
    /// (then its TLV mapping cannot be taken away).
    pub fn uses_tun_metadata0(&self) -> bool {
        let writes = |actions: &[vsw_flow::Action]| {
            actions
                .iter()
                .any(|a| matches!(a, vsw_flow::Action::SetTunnelMetadata(_)))
        };
        let pipeline = self.ofproto.pipeline();
        pipeline
            .rules()
            .iter()
            .any(|r| r.spec.matcher.mask().tun_metadata0 != 0 || writes(&r.spec.actions))
            || pipeline
                .groups()
                .any(|g| g.spec.buckets.iter().any(|b| writes(&b.actions)))
    }

    /// True when `flow` would overlap a rule of its table and priority (OpenFlow's
    /// CHECK_OVERLAP).
    pub fn overlaps(&self, flow: &str) -> Result<bool, SwitchError> {
        let spec = parse_flow(flow, &|n: &str| self.port_no(n))?;
        Ok(self.ofproto.pipeline().overlaps(&spec))
    }
}

/// A group as every front end's is checked: its own rules, and small enough to
/// describe in one OpenFlow message.
fn check_group(spec: &vsw_flow::GroupSpec) -> Result<(), SwitchError> {
    spec.check()?;
    if !vsw_openflow::as_written::group_fits_openflow(spec) {
        return Err(SwitchError::TooLarge("group"));
    }
    Ok(())
}

/// The rules a batch took away or changed (the running pipeline's rules that
/// `pipeline` no longer has) may have been the last to `learn(…, delete_learned)`
/// into a table with a cookie: then the rules of that table with that cookie go
/// too, in the same change (Open vSwitch's learned cookies).
fn delete_learned(
    pipeline: &mut Pipeline,
    log: &mut RuleChanges,
    deleted: &mut Vec<Arc<vsw_flow::Rule>>,
) {
    // Only a removed rule with such a learn can take others along: a batch of
    // adds looks at nothing.
    if !log.removed.iter().any(|r| r.owns_learned()) {
        return;
    }
    let gone = pipeline.delete_learned_of(&log.taken_from_running());
    log.removed.extend(gone.iter().cloned());
    deleted.extend(gone);
}

/// What a batch of flow changes did, rule by rule: every rule it put in (an add, a
/// modify's new version) and every rule it took out (deleted, replaced, a modify's
/// old version) — the journal's line and the revalidation come from these, with no
/// lookup of the tables.
#[derive(Default)]
pub(super) struct RuleChanges {
    added: Vec<AddedRule>,
    removed: Vec<Arc<vsw_flow::Rule>>,
}

/// A rule's address: which rule it is, whatever its match.
fn address(r: &Arc<vsw_flow::Rule>) -> usize {
    Arc::as_ptr(r) as usize
}

/// A rule a batch put in, with its line in the state file when that was made
/// beforehand.
pub(super) struct AddedRule {
    rule: Arc<vsw_flow::Rule>,
    saved_as: Option<RecordText>,
}

impl AddedRule {
    pub(super) fn new(rule: Arc<vsw_flow::Rule>, saved_as: Option<RecordText>) -> AddedRule {
        AddedRule { rule, saved_as }
    }
}

/// What a bundle's commit did so far.
#[derive(Default)]
struct BundleDone {
    log: RuleChanges,
    deleted: Vec<Arc<vsw_flow::Rule>>,
    group_deleted: Vec<Arc<vsw_flow::Rule>>,
    groups_changed: bool,
}

/// A bundle's staged adds at its commit ([`Switch::commit_changes`]): the stage,
/// where the adds start among the bundle's messages, and their changes, to be
/// made one by one when the stage cannot be put in whole.
pub struct StagedRun<'a> {
    pub stage: BundleStage,
    pub from: usize,
    pub one_by_one: Box<dyn FnOnce() -> Vec<Change> + 'a>,
}

impl RuleChanges {
    fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty()
    }

    /// The running pipeline's rules the batch took away: those it removed that it
    /// had not put in itself.
    fn taken_from_running(&self) -> Vec<Arc<vsw_flow::Rule>> {
        if self.removed.is_empty() {
            return Vec::new();
        }
        let added: HashSet<usize> = self.added.iter().map(|a| address(&a.rule)).collect();
        self.removed
            .iter()
            .filter(|r| !added.contains(&address(r)))
            .cloned()
            .collect()
    }

    /// [`RuleChanges::taken_from_running`], and the rules the batch put in that are
    /// still there.
    fn into_net(self) -> (Vec<Arc<vsw_flow::Rule>>, Vec<AddedRule>) {
        // A batch of adds removes nothing: nothing is hashed.
        if self.removed.is_empty() {
            return (Vec::new(), self.added);
        }
        let gone = self.taken_from_running();
        let removed: HashSet<usize> = self.removed.iter().map(address).collect();
        let stayed = self
            .added
            .into_iter()
            .filter(|a| !removed.contains(&address(&a.rule)))
            .collect();
        (gone, stayed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(text: &str) -> Arc<vsw_flow::Rule> {
        let spec = parse_flow(text, &|_: &str| None).unwrap();
        Arc::new(vsw_flow::Rule::new(spec, 0, 0))
    }

    fn added(r: &Arc<vsw_flow::Rule>) -> AddedRule {
        AddedRule {
            rule: r.clone(),
            saved_as: None,
        }
    }

    fn same(a: &[Arc<vsw_flow::Rule>], b: &[&Arc<vsw_flow::Rule>]) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| Arc::ptr_eq(x, y))
    }

    #[test]
    fn a_batch_says_the_running_rules_it_took_and_the_rules_it_left() {
        let old = [1, 2].map(|p| rule(&format!("priority=1,in_port={p},actions=drop")));
        let new = [1, 3, 4].map(|p| rule(&format!("priority=1,in_port={p},actions=output:9")));
        // old[0] replaced by new[0]; new[1] added and deleted again; new[2]
        // added; old[1] deleted.
        let log = RuleChanges {
            added: new.iter().map(added).collect(),
            removed: vec![old[0].clone(), new[1].clone(), old[1].clone()],
        };
        assert!(same(&log.taken_from_running(), &[&old[0], &old[1]]));
        let (gone, stayed) = log.into_net();
        assert!(same(&gone, &[&old[0], &old[1]]));
        let stayed: Vec<_> = stayed.into_iter().map(|a| a.rule).collect();
        assert!(same(&stayed, &[&new[0], &new[2]]));
    }

    #[test]
    fn a_batch_of_adds_takes_nothing_and_leaves_them_all() {
        let new = [1, 2].map(|p| rule(&format!("priority=1,in_port={p},actions=drop")));
        let log = RuleChanges {
            added: new.iter().map(added).collect(),
            removed: Vec::new(),
        };
        assert!(log.taken_from_running().is_empty());
        let (gone, stayed) = log.into_net();
        assert!(gone.is_empty());
        assert_eq!(stayed.len(), 2);
    }
}
