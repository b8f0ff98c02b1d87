//! What the switch saves: the state file written whole, the journal of rule changes
//! between, and the rules that time out (removed whatever the disk says).

use super::*;

impl Switch {
    /// The state file as a command will leave it: what is now, with the options,
    /// ports or rules it changes.
    pub(super) fn state_with(
        &self,
        options: Option<&Options>,
        ports: Option<Vec<SavedPort>>,
        pipeline: Option<&Pipeline>,
    ) -> SavedState {
        let current = self.ofproto.pipeline();
        let pipeline = pipeline.unwrap_or(&current);
        let rules = pipeline.rules();
        SavedState {
            version: STATE_VERSION,
            written_by: String::new(),
            options: options.unwrap_or(&self.options).clone(),
            ports: ports.unwrap_or_else(|| self.saved_ports()),
            // What a `learn` made is gone on a restart, as in Open vSwitch.
            flows: rules
                .iter()
                .filter(|r| !r.learned)
                .map(|r| format_flow(&r.spec))
                .collect(),
            groups: pipeline
                .groups()
                .map(|g| vsw_flow::format_group(&g.spec))
                .collect(),
            meters: pipeline
                .meters()
                .map(|(m, _)| vsw_flow::format_meter(m))
                .collect(),
            journal_seq: self.journal.last_seq(),
            // (A new one is given when the file is written.)
            generation: 0,
        }
    }

    /// Writes the state a command will leave, before the command changes anything: a
    /// disk that is full or read-only refuses the command, and nothing changes.
    pub(super) fn prepare(&self, next: &SavedState) -> Result<PendingState, SwitchError> {
        if !self.persist {
            return Ok(PendingState::unsaved());
        }
        Ok(next.prepare(&self.state_file)?)
    }

    /// Puts `pipeline`'s rules in place of the running ones: saved first, then the
    /// datapath flows revalidated (no PMD forwards by what the old rules gave once
    /// this returns), then out of the fast paths whatever they no longer allow.
    pub(super) fn replace_rules(&mut self, pipeline: Pipeline) -> Result<(), SwitchError> {
        let pending = self.prepare(&self.state_with(None, None, Some(&pipeline)))?;
        // The counts the old rules earned are theirs, not the new rules'.
        self.dpif.dp().push_flow_stats();
        let old = self.ofproto.pipeline();
        self.ofproto.set_pipeline(pipeline);
        let revalidated = self.revalidate_now();
        self.withdraw_offloads();
        // The new file goes in place only once the datapath is revalidated.
        let committed = match revalidated {
            Ok(()) => self.commit(pending),
            Err(e) => Err(e),
        };
        if let Err(e) = committed {
            self.ofproto.set_pipeline((*old).clone());
            if let Err(undo) = self.revalidate_now() {
                tracing::error!(error = %undo, "cannot put the rules back");
            }
            return Err(e);
        }
        Ok(())
    }

    /// Puts a state file written beside the old one in its place: it holds
    /// everything now, and the journal starts again, extending it.
    pub(super) fn commit(&mut self, pending: PendingState) -> Result<(), SwitchError> {
        let (generation, bytes) = (pending.generation(), pending.bytes());
        pending.commit()?;
        if self.persist {
            self.journal.clear(generation);
            self.state_bytes = bytes;
            self.file_current = true;
            self.unsaved_rules = false;
        }
        Ok(())
    }

    /// [`Switch::replace_rules`] for a change of rules alone, said as the rules it
    /// removes and adds: one line appended to the journal instead of the whole state
    /// file, while the journal is short enough.
    /// `removed`: the change only removed these rules of the running pipeline (the
    /// datapath flows that matched none of them are kept without a translation).
    pub(super) fn replace_rules_noted(
        &mut self,
        pipeline: Pipeline,
        del: &[RecordText],
        added: &[RecordText],
        removed: Option<&[Arc<vsw_flow::Rule>]>,
    ) -> Result<(), SwitchError> {
        // Nothing to save (only rules a `learn` made changed): no line.
        if !del.is_empty() || !added.is_empty() {
            if !self.journal_takes_change() {
                return self.replace_rules(pipeline);
            }
            // Written before the change is made: a journal that cannot be written
            // refuses it.
            self.journal.append(del, added)?;
        }
        let old = self.ofproto.pipeline();
        // A clause of a conjunction is in no flow's attribution (the rule of its
        // conj_id is), and a learned rule going makes room that flows a learn's
        // limit kept out may take: removing one looks at every flow.
        let removed = removed.filter(|r| !r.iter().any(|r| r.is_conjunction_clause() || r.learned));
        let revalidated = match removed {
            // Only the flows that matched a removed rule are looked at (their
            // counts pushed to it first, by the pass).
            Some(rules) => {
                self.ofproto.set_pipeline_removing(pipeline, rules);
                self.revalidate_removed(rules)
            }
            None => {
                self.dpif.dp().push_flow_stats();
                self.ofproto.set_pipeline(pipeline);
                self.revalidate_now()
            }
        };
        self.withdraw_offloads();
        if let Err(e) = revalidated {
            // Only a PMD that is gone fails this (and vswd stops); the journal
            // holds the change, which a restart carries out.
            self.ofproto.set_pipeline((*old).clone());
            return Err(e);
        }
        Ok(())
    }

    /// Whether the next change of rules goes to the journal (else the state file
    /// is written whole): the journal is kept within a constant factor of the
    /// state file; past it, the state file is written whole and the journal starts
    /// again.
    pub(super) fn journal_takes_change(&self) -> bool {
        let limit = JOURNAL_MIN_BYTES.max(2 * self.state_bytes);
        self.persist && self.file_current && self.journal.usable() && self.journal.bytes() < limit
    }

    pub(super) fn note_removed(&mut self, rule: &Arc<vsw_flow::Rule>, why: Removal, at_ms: u64) {
        if !rule.spec.send_flow_rem {
            return;
        }
        if self.removed.len() == MAX_REMOVED_QUEUED {
            self.removed.pop_front();
        }
        self.removed.push_back(RemovedFlow {
            rule: rule.clone(),
            why,
            at_ms,
        });
    }

    /// The rules that went since the last call and asked to be told of.
    pub fn take_removed(&mut self) -> Vec<RemovedFlow> {
        self.removed.drain(..).collect()
    }

    /// Removes rules whose idle or hard timeout ran out. Called periodically.
    pub fn expire_flows(&mut self) {
        let current = self.ofproto.pipeline();
        let now = now_ms();
        self.save_unsaved_rules(now);
        if !current.has_timeouts() {
            return;
        }
        // The rules' idle times count what the datapath flows forwarded.
        self.dpif.dp().push_flow_stats();
        if !current.any_expired(now) {
            return;
        }
        // What a fast path forwarded counts as use: looked at before anything goes.
        if self.offloads.any() {
            let flows = self.dpif.dp().dump_flows();
            self.offloads.note_activity(&flows, now);
            self.dpif.dp().push_flow_stats();
            if !current.any_expired(now) {
                return;
            }
        }
        let ofproto = self.ofproto.clone();
        let _writing = ofproto.writing_rules();
        // Read again under the lock: a learn may have added a rule since.
        let current = self.ofproto.pipeline();
        let mut pipeline = (*current).clone();
        let gone = pipeline.remove_expired(now);
        // The rules the last learn(…, delete_learned) of theirs made go with it.
        let cascade = pipeline.delete_learned_of(&gone);
        let del: Vec<RecordText> = gone
            .iter()
            .chain(&cascade)
            .filter(|r| !r.learned)
            .map(|r| record_text(&r.spec))
            .collect();
        let kept = pipeline.clone();
        // Only removals: the flows that matched none of them stay.
        let removed: Vec<Arc<vsw_flow::Rule>> = gone.iter().chain(&cascade).cloned().collect();
        if let Err(e) = self.replace_rules_noted(pipeline, &del, &[], Some(&removed)) {
            // A timeout holds in the running switch whatever the disk says: the
            // rules go now, and the state file is written whole once it can be
            // (until then a restart brings them back, their timeouts afresh).
            if !self.expiry_failing {
                tracing::error!(error = %e, "timed-out flows removed, but not yet from the state file (written whole once the disk takes it)");
            }
            self.expiry_failing = true;
            self.unsaved_rules = true;
            if let (_, Err(e)) = self.install_pipeline(kept) {
                tracing::error!(error = %e, "cannot revalidate the datapath flows");
            }
        }
        for r in &cascade {
            self.note_removed(r, Removal::Deleted, now);
        }
        for r in &gone {
            // What learns made comes and goes with the traffic: not news.
            if r.learned {
                tracing::debug!(flow = %format_flow(&r.spec), "learned flow timed out");
            } else {
                tracing::info!(flow = %format_flow(&r.spec), "flow timed out");
            }
            let why = if r.hard_expired(now) {
                Removal::HardTimeout
            } else {
                Removal::IdleTimeout
            };
            self.note_removed(r, why, now);
        }
    }

    /// Rules changed that the disk refused to hold: the state file written whole,
    /// tried at most once a second.
    pub(super) fn save_unsaved_rules(&mut self, now: u64) {
        if !self.unsaved_rules || now.saturating_sub(self.unsaved_tried_ms) < 1000 {
            return;
        }
        self.unsaved_tried_ms = now;
        let saved = self
            .prepare(&self.state_with(None, None, None))
            .and_then(|p| self.commit(p));
        if saved.is_ok() {
            tracing::info!("the rules as they run are in the state file again");
            self.expiry_failing = false;
        }
    }
}

/// A rule's text in the journal (and the state file): what `format_flow` says of
/// it, quoted.
pub fn record_text(spec: &vsw_flow::FlowSpec) -> RecordText {
    RecordText::new(&format_flow(spec))
}
