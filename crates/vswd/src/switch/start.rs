//! A switch started: its state file and journal read back (or a new switch with the
//! options given), its datapath made or joined, its ports attached.

use super::*;

impl Switch {
    /// Starts the datapath with vsw's port classes and restores the saved
    /// configuration. A state file that cannot be read or makes no sense is an error:
    /// nothing starts and the file is left as it is.
    pub fn start(state_file: &Path, socket: &str) -> Result<Switch, SwitchError> {
        Switch::start_with(state_file, socket, PortClasses::standard())
    }

    /// [`Switch::start`] as bridge `bridge` (its `internal` port of that name is
    /// LOCAL, its tunnel ports read its TLV map).
    pub fn start_bridge(
        state_file: &Path,
        socket: &str,
        bridge: &str,
        tunnels: Arc<TunnelWorld>,
    ) -> Result<Switch, SwitchError> {
        Switch::start_from(
            Some(state_file),
            socket,
            PortClasses::standard(),
            bridge,
            &Options::new(),
            Join::NewDatapath(tunnels),
        )
    }

    /// [`Switch::start`] with these port classes.
    pub fn start_with(
        state_file: &Path,
        socket: &str,
        classes: PortClasses,
    ) -> Result<Switch, SwitchError> {
        Switch::start_from(
            Some(state_file),
            socket,
            classes,
            BRIDGE_NAME,
            &Options::new(),
            Join::NewDatapath(TunnelWorld::new()),
        )
    }

    /// Bridge `bridge`, whose configuration another keeps (an OVSDB server): it
    /// starts as a new switch with `options` (its fail mode and controllers, so
    /// that a secure bridge never starts as a learning switch) and writes no state
    /// file. It joins the daemon's datapath, or starts one of its own with its
    /// options (`join`).
    pub fn start_unsaved(
        socket: &str,
        classes: PortClasses,
        bridge: &str,
        options: &Options,
        join: Join,
    ) -> Result<Switch, SwitchError> {
        Switch::start_from(None, socket, classes, bridge, options, join)
    }

    pub(super) fn start_from(
        saved_in: Option<&Path>,
        socket: &str,
        classes: PortClasses,
        bridge: &str,
        initial: &Options,
        join: Join,
    ) -> Result<Switch, SwitchError> {
        let persist = saved_in.is_some();
        // Never written when not persisting: a name in the run directory, one per
        // bridge, that the datapath id and messages can show.
        let unsaved = Path::new(socket).with_file_name(format!("{bridge}.unsaved"));
        let state_file = saved_in.unwrap_or(&unsaved);
        let loaded = match saved_in {
            Some(f) => SavedState::load(f)?,
            None => None,
        };
        let file_current = matches!(loaded, Some((_, None)));
        let (saved, migrated_from) = match loaded {
            Some(l) => l,
            None => {
                // A new switch is a learning switch (one rule sends everything to
                // NORMAL) only while it is standalone with no controller.
                let wanted =
                    SwitchOptions::from_options(initial).map_err(|e| SwitchError::BadState {
                        path: state_file.to_path_buf(),
                        why: e.to_string(),
                    })?;
                let flows = if wanted.wants_learning_flow() {
                    vec![LEARNING_SWITCH_FLOW.into()]
                } else {
                    Vec::new()
                };
                let state = SavedState {
                    version: STATE_VERSION,
                    options: initial.clone(),
                    flows,
                    ..SavedState::default()
                };
                (state, None)
            }
        };
        if let Some(old) = migrated_from {
            // The file as the older vswd wrote it stays beside the new one, for going
            // back to that vswd.
            let mut name = state_file.file_name().unwrap_or_default().to_os_string();
            name.push(format!(".v{old}.bak"));
            let backup = state_file.with_file_name(name);
            if !backup.exists() {
                if let Err(e) = std::fs::copy(state_file, &backup) {
                    tracing::warn!(backup = %backup.display(), error = %e, "cannot keep a copy of the older state file");
                }
            }
            tracing::info!(
                state_file = %state_file.display(),
                from = old,
                to = STATE_VERSION,
                backup = %backup.display(),
                "state file of an older vswd migrated (written anew at the next change)"
            );
        }
        let bad = |why: String| SwitchError::BadState {
            path: state_file.to_path_buf(),
            why,
        };
        let env = ClassEnv {
            run_dir: Path::new(socket)
                .parent()
                .map_or_else(|| PathBuf::from("/run/vsw"), Path::to_path_buf),
            bpf_pin_root: crate::offload::pin_root().to_path_buf(),
            bridge: bridge.to_string(),
            tunnels: join.tunnels().clone(),
        };
        let sw_opts =
            SwitchOptions::from_options(&saved.options).map_err(|e| bad(e.to_string()))?;
        let mut ports = BTreeMap::new();
        for p in &saved.ports {
            let (parsed, device) = configure(&classes, &env, &p.name, &p.options)
                .map_err(|e| bad(format!("port {}: {e}", p.name)))?;
            let local = p.no == vsw_flow::LOCAL_PORT && parsed.class.name() == "internal";
            if p.no == 0 || (p.no > MAX_PORT_NO && !local) || ports.contains_key(&p.no) {
                return Err(bad(format!(
                    "port {} has a bad or duplicate number {}",
                    p.name, p.no
                )));
            }
            ports.insert(
                p.no,
                Port {
                    name: p.name.clone(),
                    options: p.options.clone(),
                    parsed,
                    device,
                    stats: Arc::new(PortStats::default()),
                    link: Link::Down {
                        why: "not attached yet".into(),
                    },
                    mtu_problem: None,
                    opened: 0,
                    dp_no: None,
                },
            );
        }
        let numbers = |name: &str| ports.iter().find(|(_, p)| p.name == name).map(|(n, _)| *n);
        let mut pipeline = Pipeline::new();
        for (i, text) in saved.meters.iter().enumerate() {
            let spec =
                vsw_flow::parse_meter(text).map_err(|e| bad(format!("meter {}: {e}", i + 1)))?;
            pipeline
                .set_meter(spec, false, now_ms())
                .map_err(|e| bad(format!("meter {}: {e}", i + 1)))?;
        }
        restore_groups(&mut pipeline, &saved.groups, &numbers).map_err(bad)?;
        for (i, text) in saved.flows.iter().enumerate() {
            let spec =
                parse_flow(text, &numbers).map_err(|e| bad(format!("flow {}: {e}", i + 1)))?;
            pipeline.insert(spec, now_ms());
        }
        // The rule changes made since the file was written whole.
        let (journal, replay) = Journal::open(state_file, saved.journal_seq, saved.generation)?;
        let state_bytes = std::fs::metadata(state_file).map_or(0, |m| m.len());
        for e in &replay {
            replay_entry(&mut pipeline, e, &numbers)
                .map_err(|why| bad(format!("journal entry {}: {why}", e.seq)))?;
        }
        // A datapath of its own, or the daemon's: whose settings stand (a bridge
        // joining it brings the same ones: the database's `Open_vSwitch` row).
        let dpif = match join {
            Join::Datapath(d) => d,
            Join::NewDatapath(tunnels) => Dpif::start(&DaemonSettings::of(&sw_opts), tunnels)?,
        };
        let (slot, ofproto) = Ofproto::join(dpif.backer(), bridge, pipeline)?;
        // Set before the first packet (the bridge has no port in the datapath yet):
        // a restart with it set forwards nothing until the flows are restored and it
        // is cleared.
        ofproto.set_restore_wait(sw_opts.flow_restore_wait);
        ofproto.set_mcast_snooping(sw_opts.mcast_snooping);
        for (m, _) in ofproto.pipeline().meters() {
            dpif.dp()
                .set_meter(Backer::dp_meter(slot, m.id), Some(&meter_config(m)));
        }
        let mut sw = Switch {
            dpif,
            slot,
            ofproto,
            flood_ports: Vec::new(),
            retired_seen: 0,
            options: saved.options,
            ports,
            classes,
            env,
            state_file: state_file.to_path_buf(),
            socket: socket.to_string(),
            offloads: Offloads::default(),
            expiry_failing: false,
            removed: VecDeque::new(),
            journal,
            state_bytes,
            unsaved_rules: false,
            unsaved_tried_ms: 0,
            file_current,
            persist,
            bridge: bridge.to_string(),
            latencies: crate::latency::Latencies::default(),
        };
        // What an earlier run left on the devices (a kernel fast path forwarding with
        // that run's rules, when it was killed) goes before anything is attached.
        for p in sw.ports.values() {
            p.parsed.class.remove_leftovers(&p.name);
        }
        let nos: Vec<u32> = sw.ports.keys().copied().collect();
        for no in nos {
            sw.try_attach(no);
        }
        sw.sync_flood_ports();
        sw.sync_offloads();
        Ok(sw)
    }
}

/// Carries out one journal entry on rules being restored: its removals (each rule
/// by its table, priority and match), then its additions.
fn replay_entry(
    pipeline: &mut Pipeline,
    e: &JournalEntry,
    ports: &dyn vsw_flow::PortResolver,
) -> Result<(), String> {
    for t in &e.del {
        let spec = parse_flow(t, ports).map_err(|err| err.to_string())?;
        let selection = Selection {
            table: Some(spec.table),
            priority: Some(spec.priority),
            matcher: spec.matcher,
            ..Selection::all()
        };
        pipeline.remove(&selection, true);
    }
    for t in &e.add {
        let spec = parse_flow(t, ports).map_err(|err| err.to_string())?;
        pipeline.insert(spec, now_ms());
    }
    Ok(())
}

/// Puts saved groups back (in whatever order they were saved: one whose buckets
/// name a group not back yet waits for it).
fn restore_groups(
    pipeline: &mut Pipeline,
    texts: &[String],
    ports: &dyn vsw_flow::PortResolver,
) -> Result<(), String> {
    let mut waiting = Vec::new();
    for (i, text) in texts.iter().enumerate() {
        let spec =
            vsw_flow::parse_group(text, ports).map_err(|e| format!("group {}: {e}", i + 1))?;
        waiting.push(spec);
    }
    while !waiting.is_empty() {
        let before = waiting.len();
        let mut last = None;
        waiting.retain(
            |spec| match pipeline.set_group(spec.clone(), false, now_ms()) {
                Ok(()) => false,
                Err(e) => {
                    last = Some(e);
                    true
                }
            },
        );
        if waiting.len() == before {
            return Err(format!(
                "groups: {}",
                last.map(|e| e.to_string()).unwrap_or_default()
            ));
        }
    }
    Ok(())
}

/// The datapath a starting bridge is in.
pub enum Join {
    /// The daemon's (the other bridges').
    Datapath(Arc<Dpif>),
    /// One of its own, its tunnel ports and LOCAL port opening in `tunnels`.
    NewDatapath(Arc<TunnelWorld>),
}

impl Join {
    fn tunnels(&self) -> &Arc<TunnelWorld> {
        match self {
            Join::Datapath(d) => d.tunnels(),
            Join::NewDatapath(t) => t,
        }
    }
}
