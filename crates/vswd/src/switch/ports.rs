//! The port commands (`add-port`, `del-port`, `set-port`): each checked whole before
//! anything changes, carried out, and saved.

use super::*;

impl Switch {
    /// The ports as the state file records them.
    pub(super) fn saved_ports(&self) -> Vec<SavedPort> {
        self.ports
            .iter()
            .map(|(no, p)| SavedPort {
                name: p.name.clone(),
                no: *no,
                options: p.options.clone(),
            })
            .collect()
    }

    pub(super) fn add_port(&mut self, name: &str, options: Options) -> Result<Value, SwitchError> {
        self.add_ports(&[(name.to_string(), options)])
            .pop()
            .expect("one result per port")
    }

    /// Adds these ports together, each as `add-port` adds it, each with its own
    /// result (one refused changes nothing of the others). Opening a device waits in
    /// the kernel (each AF_PACKET ring for an RCU grace period), so the devices are
    /// opened at once, each on a thread of its own, and handed to the datapath in
    /// one reconfiguration.
    pub fn add_ports(&mut self, list: &[(String, Options)]) -> Vec<Result<Value, SwitchError>> {
        let started = std::time::Instant::now();
        let mut results: Vec<Option<Result<Value, SwitchError>>> =
            list.iter().map(|_| None).collect();
        let mut staged = Vec::new();
        for (i, (name, options)) in list.iter().enumerate() {
            match self.stage_port(name, options) {
                Ok(st) => staged.push((i, st)),
                Err(e) => results[i] = Some(Err(e)),
            }
        }
        let nos: Vec<u32> = staged.iter().map(|(_, st)| st.no).collect();
        let staged_at = started.elapsed();
        let mut opened = self.open_devices(&nos);
        let opened_at = started.elapsed();
        // Those that opened go to the datapath together.
        let mut handles = Vec::new();
        let mut numbered = Vec::new();
        for (_, st) in &staged {
            match opened.remove(&st.no) {
                Some(Ok(queues)) => match self.dp_number(st.no) {
                    Ok(dp) => {
                        let port = &self.ports[&st.no];
                        handles.push(PortHandle::new(dp, &port.name, queues, port.stats.clone()));
                        numbered.push(st.no);
                    }
                    Err(e) => {
                        opened.insert(
                            st.no,
                            Err(PortError::Netdev(NetdevError::Syscall {
                                op: "number",
                                ifname: self.ports[&st.no].name.clone(),
                                source: std::io::Error::other(e.to_string()),
                            })),
                        );
                    }
                },
                Some(Err(e)) => {
                    opened.insert(st.no, Err(e));
                }
                None => {}
            }
        }
        let handed = if handles.is_empty() {
            Ok(())
        } else {
            self.dpif.dp().add_ports(handles)
        };
        if handed.is_err() {
            // Not in the datapath: their numbers go back.
            for no in numbered {
                self.release_dp_number(no);
            }
        }
        let handed_err = handed.err().map(|e| e.to_string());
        let handed_at = started.elapsed();
        // Each finished in order: its link, queue settings, then the state file (as
        // it will be with the ports finished so far). A port whose device opened went
        // to the datapath with the others (its entry taken above); one that did not
        // still has its error here.
        for k in 0..staged.len() {
            let (i, st) = &staged[k];
            let no = st.no;
            let result = match (&handed_err, opened.remove(&no)) {
                (_, Some(Err(e))) => Err(SwitchError::from(e)),
                (Some(why), _) => Err(SwitchError::NotTaken(why.clone())),
                (None, _) => {
                    self.ports.get_mut(&no).expect("staged").link = Link::Up {
                        ifindex: st.ifindex,
                    };
                    let later: Vec<u32> = staged[k + 1..].iter().map(|(_, s)| s.no).collect();
                    self.settle(no, None).and_then(|()| {
                        let ports = self
                            .saved_ports()
                            .into_iter()
                            .filter(|p| !later.contains(&p.no))
                            .collect();
                        let pending = self.prepare(&self.state_with(None, Some(ports), None))?;
                        self.commit(pending)
                    })
                }
            };
            let name = &list[*i].0;
            results[*i] = Some(match result {
                Ok(()) => {
                    tracing::info!(port = %name, no, "port added");
                    Ok(json!({ "no": no }))
                }
                Err(e) => {
                    // Nothing changes when the port cannot be set up as asked, or
                    // not saved.
                    self.detach(no, "not added");
                    if let Some(mut port) = self.ports.remove(&no) {
                        if let Err(undo) = port.device.set_mtu(st.old_mtu) {
                            tracing::error!(port = %name, error = %undo, "cannot give the interface its MTU back");
                        }
                    }
                    Err(e)
                }
            });
        }
        if list.len() > 1 {
            tracing::info!(
                ports = list.len(),
                staged_ms = staged_at.as_millis() as u64,
                opened_ms = (opened_at - staged_at).as_millis() as u64,
                handed_ms = (handed_at - opened_at).as_millis() as u64,
                finished_ms = (started.elapsed() - handed_at).as_millis() as u64,
                "ports added together"
            );
        }
        self.sync_offloads();
        // Flooded to from the moment this returns (as after any command).
        self.sync_flood_ports();
        results
            .into_iter()
            .map(|r| r.expect("every port has its result"))
            .collect()
    }

    /// Checks a port to add and puts it in the table, numbered and with its MTU, not
    /// opened yet.
    pub(super) fn stage_port(
        &mut self,
        name: &str,
        options: &Options,
    ) -> Result<StagedPort, SwitchError> {
        if self.port_no(name).is_some() {
            return Err(SwitchError::PortExists(name.to_string()));
        }
        if !interface::valid_name(name) {
            return Err(NetdevError::BadInterfaceName(name.to_string()).into());
        }
        let mut opts = options.clone();
        let (parsed, mut device) = configure(&self.classes, &self.env, name, &opts)?;
        // What the port is, written out: a later default cannot change it.
        parsed.write_out_defaults(&mut opts);
        let no = match parsed.ofport_request {
            Some(n) => {
                if let Some(p) = self.ports.get(&n) {
                    return Err(SwitchError::PortNumberTaken(n, p.name.clone()));
                }
                n
            }
            // The bridge's own port is OpenFlow's LOCAL.
            None if parsed.class.name() == "internal"
                && name == self.bridge
                && !self.ports.contains_key(&vsw_flow::LOCAL_PORT) =>
            {
                vsw_flow::LOCAL_PORT
            }
            None => (1..=MAX_PORT_NO)
                .find(|n| !self.ports.contains_key(n))
                .ok_or(SwitchError::NoFreePortNumber)?,
        };
        self.check_mtu_request(&parsed)?;
        self.check_claims(device.as_ref(), no)?;
        let ifindex = match device.presence() {
            Presence::Own => 0,
            Presence::Interface(Some(i)) => i,
            Presence::Interface(None) => {
                return Err(NetdevError::NoSuchInterface(name.to_string()).into())
            }
        };
        // The MTU first: an interface's rings are sized by it. If anything after fails,
        // the interface gets its old MTU back.
        let old_mtu = match parsed.class.mtu_handling() {
            MtuHandling::Interface if parsed.mtu_request.is_some() => device.mtu(),
            _ => None,
        };
        device.set_mtu(parsed.mtu_request)?;
        self.ports.insert(
            no,
            Port {
                name: name.to_string(),
                options: opts,
                parsed,
                device,
                stats: Arc::new(PortStats::default()),
                link: Link::Down {
                    why: "being added".into(),
                },
                mtu_problem: None,
                opened: 0,
                dp_no: None,
            },
        );
        Ok(StagedPort {
            no,
            ifindex,
            old_mtu,
        })
    }

    /// Refuses `mtu_request` on a port whose MTU vsw does not set.
    pub(super) fn check_mtu_request(&self, parsed: &PortOptions) -> Result<(), SwitchError> {
        if parsed.mtu_request.is_some() && parsed.class.mtu_handling() == MtuHandling::NotSet {
            return Err(SwitchError::MtuNotSet {
                class: parsed.class.name(),
                applies_to: join_and(self.classes.with_mtu().into_iter()),
            });
        }
        Ok(())
    }

    /// Refuses a socket path that would take something that is not the port's: the
    /// control socket, another port's socket, or a file its class may not replace.
    pub(super) fn check_claims(&self, device: &dyn PortDevice, no: u32) -> Result<(), SwitchError> {
        let Some(path) = device.socket_path() else {
            return Ok(());
        };
        let refuse = |why: String| {
            Err(SwitchError::SocketTaken {
                path: path.to_path_buf(),
                why,
            })
        };
        if same_path(path, Path::new(&self.socket)) {
            return refuse("that is vswd's control socket".into());
        }
        let taken = self
            .ports
            .iter()
            .find(|(n, p)| **n != no && p.device.socket_path().is_some_and(|o| same_path(o, path)));
        if let Some((_, p)) = taken {
            return refuse(format!("port {} uses it", p.name));
        }
        Ok(device.check_free()?)
    }

    pub(super) fn del_port(&mut self, name: &str) -> Result<Value, SwitchError> {
        self.del_ports(&[name.to_string()])
            .pop()
            .expect("one result per port")
    }

    /// Deletes these ports together (one change of the datapath, their sockets
    /// closed at once), each with its own result: a name that is not a port is
    /// refused, the others go. If the state file cannot be written, none goes.
    pub fn del_ports(&mut self, names: &[String]) -> Vec<Result<Value, SwitchError>> {
        let mut nos = Vec::new();
        let mut results: Vec<Result<Value, SwitchError>> = names
            .iter()
            .map(|name| match self.port_no(name) {
                Some(no) if !nos.contains(&no) => {
                    nos.push(no);
                    Ok(Value::Null)
                }
                _ => Err(SwitchError::NoSuchPort(name.clone())),
            })
            .collect();
        if nos.is_empty() {
            return results;
        }
        let ports = self
            .saved_ports()
            .into_iter()
            .filter(|p| !nos.contains(&p.no))
            .collect();
        let refuse_all = |results: &mut Vec<Result<Value, SwitchError>>, why: String| {
            for r in results.iter_mut().filter(|r| r.is_ok()) {
                *r = Err(SwitchError::Unsaved(why.clone()));
            }
        };
        let pending = match self.prepare(&self.state_with(None, Some(ports), None)) {
            Ok(p) => p,
            Err(e) => {
                refuse_all(&mut results, e.to_string());
                return results;
            }
        };
        let started = std::time::Instant::now();
        self.detach_many(&nos, "deleted");
        if nos.len() > 1 {
            tracing::info!(
                ports = nos.len(),
                detached_ms = started.elapsed().as_millis() as u64,
                "ports deleted together"
            );
        }
        let removed: Vec<(u32, Port)> = nos
            .iter()
            .filter_map(|no| self.ports.remove(no).map(|p| (*no, p)))
            .collect();
        match self.commit(pending) {
            Ok(()) => {
                for (no, p) in &removed {
                    tracing::info!(port = %p.name, no, "port deleted");
                }
            }
            Err(e) => {
                // Back as they were (a guest reconnects, an interface is opened again).
                for (no, p) in removed {
                    self.ports.insert(no, p);
                    self.try_attach(no);
                }
                refuse_all(&mut results, e.to_string());
            }
        }
        self.sync_offloads();
        self.sync_flood_ports();
        results
    }

    /// Changes port `name`'s options (`changes` over those it has).
    pub(super) fn set_port(&mut self, name: &str, changes: &Options) -> Result<Value, SwitchError> {
        let no = self
            .port_no(name)
            .ok_or_else(|| SwitchError::NoSuchPort(name.to_string()))?;
        let port = &self.ports[&no];
        let mut merged = port.options.clone();
        merged.extend(changes.clone());
        let (parsed, fresh) = self.check_port_change(no, name, &merged)?;
        // Nothing changes: nothing is written, nothing reopened.
        if merged == port.options {
            return Ok(Value::Null);
        }
        let mut ports = self.saved_ports();
        if let Some(p) = ports.iter_mut().find(|p| p.no == no) {
            p.options = merged.clone();
        }
        let pending = self.prepare(&self.state_with(None, Some(ports), None))?;
        let port = &self.ports[&no];
        let (old_options, old_parsed) = (port.options.clone(), port.parsed.clone());
        let reopens = fresh.is_some();
        self.apply_port_change(no, merged, parsed, fresh)?;
        if let Err(e) = self.commit(pending) {
            let undo =
                configure(&self.classes, &self.env, name, &old_options).and_then(|(_, device)| {
                    self.apply_port_change(no, old_options, old_parsed, reopens.then_some(device))
                });
            if let Err(undo) = undo {
                tracing::error!(port = name, error = %undo, "cannot put the port's options back");
            }
            self.sync_offloads();
            return Err(e);
        }
        self.sync_offloads();
        Ok(Value::Null)
    }

    /// What `merged` means for port `no`, if it is a change a port may take; with a
    /// new device (not yet opened) when the change needs the device opened anew.
    pub(super) fn check_port_change(
        &self,
        no: u32,
        name: &str,
        merged: &Options,
    ) -> Result<(PortOptions, Option<Box<dyn PortDevice>>), SwitchError> {
        let port = &self.ports[&no];
        // Before the options are read: another type's options would be refused first.
        if let Some(t) = merged
            .get("type")
            .filter(|t| *t != port.parsed.class.name())
        {
            return Err(OptionError::BadValue {
                key: "type".into(),
                value: t.clone(),
                why: "a port's type is fixed when it is added".into(),
            }
            .into());
        }
        let (parsed, device) = configure(&self.classes, &self.env, name, merged)?;
        if parsed.ofport_request.is_some_and(|n| n != no) {
            return Err(SwitchError::Renumber);
        }
        // A pin to a queue the device does not have is refused before anything is
        // reopened.
        let queues = port.device.rx_queues();
        if let Some((q, _)) = parsed.rxq_affinity.iter().find(|(q, _)| *q >= queues) {
            return Err(DatapathError::NoSuchQueue {
                port: name.to_string(),
                queues,
                queue: *q,
            }
            .into());
        }
        self.check_mtu_request(&parsed)?;
        let mut reopen = false;
        for o in parsed.class.options() {
            if parsed.class_options.get(o.key) != port.parsed.class_options.get(o.key) {
                match o.on_change {
                    OnChange::Fixed => return Err(SwitchError::FixedOption(o.key)),
                    OnChange::Reopen => reopen = true,
                }
            }
        }
        Ok((parsed, reopen.then_some(device)))
    }

    /// Applies a checked change of port `no`'s options (`fresh`: the device to open in
    /// place of the port's, when the change needs one).
    pub(super) fn apply_port_change(
        &mut self,
        no: u32,
        merged: Options,
        parsed: PortOptions,
        fresh: Option<Box<dyn PortDevice>>,
    ) -> Result<(), SwitchError> {
        let port = &self.ports[&no];
        let up = matches!(port.link, Link::Up { .. });
        let new_interface_mtu = match parsed.mtu_request {
            Some(mtu)
                if up
                    && parsed.class.mtu_handling() == MtuHandling::Interface
                    && parsed.mtu_request != port.parsed.mtu_request =>
            {
                Some(mtu)
            }
            _ => None,
        };
        let reopened = if let Some(mtu) = new_interface_mtu {
            self.change_mtu(no, mtu, fresh)?;
            true
        } else if let Some(fresh) = fresh {
            if up {
                self.replace_device(no, fresh)?;
            } else {
                // Opened as it now is when it comes back.
                self.ports.get_mut(&no).expect("checked above").device = fresh;
            }
            up
        } else {
            false
        };
        let port = self.ports.get_mut(&no).expect("checked above");
        if parsed.class.mtu_handling() == MtuHandling::Live {
            // No device to reopen: frames are held to the new MTU from the next batch.
            port.device.set_mtu(parsed.mtu_request)?;
        }
        let port = &self.ports[&no];
        let dp = self.dp_no(no);
        if up && (reopened || parsed.rxq_affinity != port.parsed.rxq_affinity) {
            self.dpif
                .dp()
                .set_rxq_affinity(dp, parsed.rxq_affinity.clone())?;
        }
        if up && (reopened || parsed.tx_flush != port.parsed.tx_flush) {
            self.dpif.dp().set_port_tx_flush(dp, parsed.tx_flush)?;
        }
        let port = self.ports.get_mut(&no).expect("checked above");
        port.options = merged;
        port.parsed = parsed;
        Ok(())
    }
}
