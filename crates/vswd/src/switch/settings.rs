//! The switch's options (`vswctl set`, OVSDB's `other_config`): the daemon-wide ones
//! to the datapath when they are what changed, the bridge's own to the bridge; the
//! tables flushed as Open vSwitch flushes them when controllers or the fail mode
//! change.

use super::*;

impl Switch {
    /// [`Switch::set`] for a front end other than the control socket's (OVSDB's
    /// `other_config`), as a request is answered: flood ports and latency kept.
    pub fn set_options(&mut self, changes: &Options) -> Result<Value, SwitchError> {
        self.answered("set", |sw| sw.set(changes))
    }

    /// [`Switch::set_port`] for a front end other than the control socket's.
    pub fn set_port_options(
        &mut self,
        name: &str,
        changes: &Options,
    ) -> Result<Value, SwitchError> {
        self.answered("set-port", |sw| sw.set_port(name, changes))
    }

    /// Changes the switch's options; a key with an empty value (`key=`) goes back to
    /// its default.
    pub(super) fn set(&mut self, changes: &Options) -> Result<Value, SwitchError> {
        let mut merged = self.options.clone();
        for (k, v) in changes.clone() {
            if v.is_empty() {
                merged.remove(&k);
            } else {
                merged.insert(k, v);
            }
        }
        let parsed = SwitchOptions::from_options(&merged)?;
        // Nothing changes: nothing is written.
        if merged == self.options {
            return Ok(Value::Null);
        }
        let old = SwitchOptions::from_options(&self.options).ok();
        // As Open vSwitch: the tables are flushed when controllers come or all go,
        // or when the fail mode changes while there are none; a standalone bridge
        // with no controller then gets its learning-switch rule (and only then).
        let flushed = old
            .as_ref()
            .filter(|o| flushes_tables(o, &parsed))
            .map(|_| flushed_pipeline(&parsed));
        let ofproto = self.ofproto.clone();
        let _writing = ofproto.writing_rules();
        let pending = self.prepare(&self.state_with(Some(&merged), None, flushed.as_ref()))?;
        let undo = |sw: &mut Switch| {
            if let Some(old) = &old {
                if let Err(e) = sw.apply_switch_options(Some(&parsed), old) {
                    tracing::error!(error = %e, "cannot put the switch options back");
                }
            }
        };
        if let Err(e) = self.apply_switch_options(old.as_ref(), &parsed) {
            undo(self);
            return Err(e);
        }
        let previous = std::mem::replace(&mut self.options, merged);
        let (before, revalidated) = match flushed {
            Some(p) => {
                let (old, r) = self.install_pipeline(p);
                (Some(old), r)
            }
            None => (None, Ok(())),
        };
        let committed = match revalidated {
            Ok(()) => self.commit(pending),
            Err(e) => Err(e),
        };
        if let Err(e) = committed {
            if let Some(old_pipeline) = before {
                let _ = self.install_pipeline((*old_pipeline).clone());
            }
            undo(self);
            self.options = previous;
            return Err(e);
        }
        if let Some(old_pipeline) = before {
            tracing::info!(
                rules = old_pipeline.len(),
                learning_switch = parsed.wants_learning_flow(),
                "controllers or fail mode changed: the tables were flushed"
            );
            self.forget_meters_of(&old_pipeline);
            let now = now_ms();
            for r in old_pipeline.rules() {
                self.note_removed(&r, Removal::Deleted, now);
            }
        }
        self.sync_offloads();
        Ok(Value::Null)
    }

    /// Going from options `from` to `parsed`: the datapath gets the daemon-wide
    /// settings when they are what changed (the datapath is the daemon's: another
    /// bridge's unchanged options never undo them), the bridge its own.
    pub(super) fn apply_switch_options(
        &mut self,
        from: Option<&SwitchOptions>,
        parsed: &SwitchOptions,
    ) -> Result<(), SwitchError> {
        let wanted = DaemonSettings::of(parsed);
        if from.is_none_or(|f| DaemonSettings::of(f) != wanted) {
            self.dpif.apply(&wanted)?;
        }
        if self.ofproto.set_mcast_snooping(parsed.mcast_snooping) {
            tracing::info!(
                enabled = parsed.mcast_snooping.enabled,
                "multicast snooping changed"
            );
            self.revalidate_now()?;
        }
        if self.ofproto.set_restore_wait(parsed.flow_restore_wait) {
            tracing::info!(
                wait = parsed.flow_restore_wait,
                "flow-restore-wait: forwarding {}",
                if parsed.flow_restore_wait {
                    "held"
                } else {
                    "resumed"
                }
            );
            // No packet is forwarded by the other state's flows.
            self.revalidate_now()?;
            self.withdraw_offloads();
        }
        Ok(())
    }
}

/// Whether going from options `old` to `new` flushes the tables, as Open vSwitch's
/// connection manager does: controllers came where there were none (or all went),
/// or the fail mode changed while there are none.
fn flushes_tables(old: &SwitchOptions, new: &SwitchOptions) -> bool {
    let (had, has) = (!old.controllers.is_empty(), !new.controllers.is_empty());
    had != has || (old.fail_mode != new.fail_mode && !has)
}

/// The tables after a flush: nothing, or for a standalone bridge without a
/// controller the learning switch's rule.
fn flushed_pipeline(opts: &SwitchOptions) -> Pipeline {
    if opts.wants_learning_flow() {
        Pipeline::learning_switch(now_ms())
    } else {
        Pipeline::new()
    }
}
