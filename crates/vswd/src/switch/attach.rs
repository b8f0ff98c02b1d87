//! A bridge's ports in the datapath: each attached port's datapath number (and the
//! backer's map from it to the port's OpenFlow number, patch pairs included), its
//! device opened into the datapath and let go again, links watched, and the ports
//! NORMAL and FLOOD send to.

use super::*;

impl Switch {
    /// Tells the slow path which ports there are to flood to, after ports came or
    /// went (hosts learned on a port that went are forgotten), and revalidates.
    pub(super) fn sync_flood_ports(&mut self) {
        self.sync_live_ports();
        // This bridge's ports in the datapath, in OpenFlow numbers.
        let ports: Vec<u32> = self
            .ports
            .iter()
            .filter(|(_, p)| p.dp_no.is_some())
            .map(|(no, _)| *no)
            .collect();
        if ports == self.flood_ports {
            return;
        }
        for gone in self.flood_ports.iter().filter(|p| !ports.contains(p)) {
            self.ofproto.flush_port(*gone);
        }
        self.ofproto.set_ports(ports.clone());
        self.flood_ports = ports;
        if let Err(e) = self.revalidate_now() {
            tracing::error!(error = %e, "cannot revalidate the datapath flows");
        }
        self.withdraw_offloads();
    }

    /// Called periodically: the slow path hears of ports that came or went while
    /// no command was running (links watched).
    pub fn sync_ports(&mut self) {
        self.sync_flood_ports();
    }

    pub(super) fn port_no(&self, name: &str) -> Option<u32> {
        self.ports
            .iter()
            .find(|(_, p)| p.name == name)
            .map(|(n, _)| *n)
    }

    /// Opens port `no`'s device and hands it to the datapath; on failure the port
    /// stays down with the reason.
    /// Opens port `no`'s device and hands it to the datapath; on failure the port
    /// stays down with the reason.
    pub(super) fn try_attach(&mut self, no: u32) {
        let Some(port) = self.ports.get_mut(&no) else {
            return;
        };
        let ifindex = match port.device.presence() {
            Presence::Own => 0,
            Presence::Interface(Some(i)) => i,
            Presence::Interface(None) => {
                port.link = Link::NoDevice;
                return;
            }
        };
        // The MTU asked for is given before the device is opened (an interface's rings
        // are sized by it); a refusal leaves the port up with the MTU it has, and says why.
        port.mtu_problem = None;
        if let Err(e) = port.device.set_mtu(port.parsed.mtu_request) {
            tracing::warn!(port = %port.name, error = %e, "mtu_request refused");
            port.mtu_problem = Some(e.to_string());
        }
        let result = self.plug(no).and_then(|()| self.settle(no, None));
        let port = self.ports.get_mut(&no).expect("checked above");
        match result {
            Ok(()) => {
                tracing::info!(port = %port.name, no, ifindex, class = port.parsed.class.name(), "port attached");
                port.link = Link::Up { ifindex };
            }
            Err(e) => {
                tracing::warn!(port = %port.name, error = %e, "cannot attach port");
                port.device.close();
                port.link = Link::Down { why: e.to_string() };
            }
        }
    }

    /// Port `no`'s datapath number: the one it has, or a new one the backer maps
    /// to it (before its queues reach the datapath: its first packet finds it).
    pub(super) fn dp_number(&mut self, no: u32) -> Result<u32, SwitchError> {
        let port = self.ports.get_mut(&no).expect("a port of the switch");
        if let Some(dp) = port.dp_no {
            return Ok(dp);
        }
        let dp = self.dpif.take_port_number();
        if let Err(e) = self.dpif.backer().set_port(self.slot, no, dp) {
            self.dpif.give_back_port_number(dp);
            return Err(e.into());
        }
        port.dp_no = Some(dp);
        self.join_patch(no);
        Ok(dp)
    }

    /// A patch port joins its peer (in whichever bridge of the datapath it is, as
    /// soon as both are there): translation goes on across it. A tunnel port is
    /// named to the backer, which pushes its outer headers in translation.
    pub(super) fn join_patch(&self, no: u32) {
        let port = &self.ports[&no];
        if let Some(peer) = port.device.patch_peer() {
            self.dpif
                .backer()
                .set_patch(self.slot, no, &port.name, peer);
        }
        if port.device.is_tunnel() {
            self.dpif
                .backer()
                .set_tunnel_port(self.slot, no, &port.name);
        }
    }

    /// Port `no` lets go of its datapath number (its queues left the datapath).
    pub(super) fn release_dp_number(&mut self, no: u32) {
        if let Some(dp) = self.ports.get_mut(&no).and_then(|p| p.dp_no.take()) {
            self.dpif.backer().remove_port(dp);
            self.dpif.give_back_port_number(dp);
        }
    }

    /// The OpenFlow number of datapath port `dp`, when it is this bridge's.
    pub(super) fn of_no(&self, dp: u32) -> Option<u32> {
        match self.dpif.backer().of_port(dp) {
            Some((slot, of)) if slot == self.slot => Some(of),
            _ => None,
        }
    }

    /// A datapath flow's actions with this bridge's ports in OpenFlow numbers (as
    /// `dump-dp-flows` shows them).
    pub(super) fn actions_in_of_numbers(&self, actions: &[DpAction]) -> Vec<DpAction> {
        actions
            .iter()
            .map(|a| match a {
                DpAction::Output(dp) => DpAction::Output(self.of_no(*dp).unwrap_or(*dp)),
                DpAction::OutputTrunc { port, max_len } => DpAction::OutputTrunc {
                    port: self.of_no(*port).unwrap_or(*port),
                    max_len: *max_len,
                },
                other => *other,
            })
            .collect()
    }

    /// The datapath's in_port of a packet the controller sends as from OpenFlow
    /// port `in_port`: its port's datapath number, a reserved port's number as it
    /// is (no datapath port is numbered that high), else none (`u32::MAX`).
    pub(super) fn injected_in_port(&self, in_port: u32) -> u32 {
        match self.ports.get(&in_port) {
            Some(p) => p.dp_no.unwrap_or(u32::MAX),
            None if in_port > MAX_PORT_NO => in_port,
            None => u32::MAX,
        }
    }

    /// Port `no`'s datapath number; `u32::MAX` (no port) while it has none.
    pub(super) fn dp_no(&self, no: u32) -> u32 {
        self.ports
            .get(&no)
            .and_then(|p| p.dp_no)
            .unwrap_or(u32::MAX)
    }

    /// Opens port `no`'s device and gives its queues to the datapath.
    pub(super) fn plug(&mut self, no: u32) -> Result<(), SwitchError> {
        let dp = self.dp_number(no)?;
        let port = self.ports.get_mut(&no).expect("a port of the switch");
        let queues = port.device.open();
        port.opened += 1;
        let handle = match queues {
            Ok(q) => PortHandle::new(dp, &port.name, q, port.stats.clone()),
            Err(e) => {
                self.release_dp_number(no);
                return Err(e.into());
            }
        };
        let added = self.dpif.dp().add_port(handle);
        if let Err(e) = added {
            self.ports.get_mut(&no).expect("checked").device.close();
            self.release_dp_number(no);
            return Err(e.into());
        }
        Ok(())
    }

    /// Gives the datapath port `no`'s transmit batching and queue pins, as `parsed`
    /// (or the port's options) say, after its device was (re)opened.
    pub(super) fn settle(
        &mut self,
        no: u32,
        parsed: Option<&PortOptions>,
    ) -> Result<(), SwitchError> {
        let parsed = parsed.unwrap_or(&self.ports[&no].parsed);
        let dp = self.dp_no(no);
        if parsed.tx_flush != FlushSetting::Switch {
            self.dpif.dp().set_port_tx_flush(dp, parsed.tx_flush)?;
        }
        if !parsed.rxq_affinity.is_empty() {
            self.dpif
                .dp()
                .set_rxq_affinity(dp, parsed.rxq_affinity.clone())?;
        }
        Ok(())
    }

    pub(super) fn detach(&mut self, no: u32, why: &str) {
        self.detach_many(&[no], why);
    }

    /// Detaches these ports together: the datapath lets go of them in one change,
    /// then their sockets are closed at once (closing an AF_PACKET socket with rings
    /// waits in the kernel for RCU grace periods, ~30 ms a port: one at a time, 100
    /// ports would take seconds).
    pub(super) fn detach_many(&mut self, nos: &[u32], why: &str) {
        let up: Vec<u32> = nos
            .iter()
            .copied()
            .filter(|no| matches!(self.ports.get(no).map(|p| &p.link), Some(Link::Up { .. })))
            .collect();
        let mut handles = Vec::new();
        let in_dp: Vec<u32> = up.iter().filter_map(|no| self.ports[no].dp_no).collect();
        if !in_dp.is_empty() {
            let removed = self.dpif.dp().remove_ports(&in_dp);
            match removed {
                Ok(h) => handles = h,
                Err(e) => tracing::error!(ports = ?up, error = %e, "cannot detach ports"),
            }
        }
        for no in nos {
            self.release_dp_number(*no);
            if let Some(port) = self.ports.get_mut(no) {
                port.link = Link::Down {
                    why: why.to_string(),
                };
                // The device is gone: so is the socket an offload fast path filtered.
                port.device.close();
                port.opened += 1;
            }
        }
        drop_at_once(handles);
    }

    /// Notices interfaces that went away or came back. Called periodically.
    pub fn check_links(&mut self) {
        let nos: Vec<u32> = self.ports.keys().copied().collect();
        let mut changed = false;
        for no in nos {
            let port = &self.ports[&no];
            // Devices vsw makes do not come and go on their own.
            let Presence::Interface(now) = port.device.presence() else {
                continue;
            };
            let up = match port.link {
                Link::Up { ifindex } => Some(ifindex),
                Link::Down { .. } | Link::NoDevice => None,
            };
            let name = port.name.clone();
            changed |= up != now;
            match (up, now) {
                (Some(a), Some(b)) if a == b => {}
                (Some(_), _) => {
                    tracing::warn!(port = %name, "interface disappeared; port down until it is back");
                    self.detach(no, "interface disappeared");
                    if now.is_some() {
                        self.try_attach(no);
                    }
                }
                (None, Some(_)) => self.try_attach(no),
                (None, None) => {}
            }
        }
        // A port that went or came back needs its offload fast path set up anew,
        // and a fast-failover group may choose another bucket.
        if changed {
            self.sync_offloads();
            self.sync_live_ports();
        }
    }

    /// Tells the slow path which ports' links are up (fast-failover groups watch
    /// them) and, when that changed, revalidates.
    pub(super) fn sync_live_ports(&mut self) {
        let live: Vec<u32> = self
            .ports
            .iter()
            .filter(|(_, p)| matches!(p.link, Link::Up { .. }))
            .map(|(no, _)| *no)
            .collect();
        if self.ofproto.set_live_ports(live) {
            if let Err(e) = self.revalidate_now() {
                tracing::error!(error = %e, "cannot revalidate the datapath flows");
            }
            self.withdraw_offloads();
        }
    }

    /// Opens these ports' devices, at once (each on a thread of its own, at most
    /// [`OPEN_AT_ONCE`] together): a device's opening mostly waits in the kernel.
    pub(super) fn open_devices(
        &mut self,
        nos: &[u32],
    ) -> BTreeMap<u32, Result<PortQueues, PortError>> {
        let mut devices: Vec<(u32, &mut Box<dyn PortDevice>)> = self
            .ports
            .iter_mut()
            .filter(|(n, _)| nos.contains(n))
            .map(|(n, p)| {
                p.opened += 1;
                (*n, &mut p.device)
            })
            .collect();
        let mut out = BTreeMap::new();
        if let [(no, device)] = devices.as_mut_slice() {
            out.insert(*no, device.open());
            return out;
        }
        while !devices.is_empty() {
            let chunk: Vec<_> = devices.drain(..devices.len().min(OPEN_AT_ONCE)).collect();
            std::thread::scope(|s| {
                let failed = |why: &str| {
                    Err(PortError::Netdev(NetdevError::Syscall {
                        op: "open",
                        ifname: String::new(),
                        source: std::io::Error::other(why.to_string()),
                    }))
                };
                let opening: Vec<_> = chunk
                    .into_iter()
                    .map(|(no, device)| {
                        let t = std::thread::Builder::new()
                            .name("vsw-open".into())
                            .spawn_scoped(s, move || device.open());
                        (no, t)
                    })
                    .collect();
                for (no, t) in opening {
                    // A port whose thread could not be made stays down with the
                    // reason (and is tried again when its link is looked at).
                    let opened = match t {
                        Ok(t) => t
                            .join()
                            .unwrap_or_else(|_| failed("the thread opening it failed")),
                        Err(e) => failed(&format!("no thread to open it: {e}")),
                    };
                    out.insert(no, opened);
                }
            });
        }
        out
    }

    /// Opens `fresh` and puts it in place of port `no`'s device; the new device is
    /// opened before the old one is let go, so a failure changes nothing.
    pub(super) fn replace_device(
        &mut self,
        no: u32,
        mut fresh: Box<dyn PortDevice>,
    ) -> Result<(), SwitchError> {
        let queues = fresh.open()?;
        // The port keeps its datapath number (and the backer its place) while its
        // queues are swapped.
        let dp = self.dp_no(no);
        self.dpif.dp().remove_port(dp)?;
        let port = self.ports.get_mut(&no).expect("a port of the switch");
        let mut old = std::mem::replace(&mut port.device, fresh);
        old.close();
        port.opened += 1;
        let handle = PortHandle::new(dp, &port.name, queues, port.stats.clone());
        let added = self.dpif.dp().add_port(handle);
        if let Err(e) = added {
            let port = self.ports.get_mut(&no).expect("a port of the switch");
            port.device.close();
            port.link = Link::Down { why: e.to_string() };
            self.release_dp_number(no);
            return Err(e.into());
        }
        // A patch port's peer may be another now.
        self.join_patch(no);
        Ok(())
    }

    /// Gives port `no`'s interface a new MTU at the right point of the port's life:
    /// the PMDs let go of its queues (sending what they staged), the MTU changes, and
    /// the device (`fresh`, if the change brings one) opens again with rings for the
    /// new size. If the interface refuses the MTU, the port opens again as it was and
    /// the error says why.
    pub(super) fn change_mtu(
        &mut self,
        no: u32,
        mtu: u32,
        fresh: Option<Box<dyn PortDevice>>,
    ) -> Result<(), SwitchError> {
        let dp = self.dp_no(no);
        self.dpif.dp().remove_port(dp)?;
        let port = self.ports.get_mut(&no).expect("a port of the switch");
        port.device.close();
        let changed = port.device.set_mtu(Some(mtu));
        if let (Ok(()), Some(fresh)) = (&changed, fresh) {
            port.device = fresh;
        }
        let name = port.name.clone();
        if let Err(e) = self.plug(no) {
            let port = self.ports.get_mut(&no).expect("a port of the switch");
            port.link = Link::Down { why: e.to_string() };
            return Err(e);
        }
        match changed {
            Ok(()) => {
                tracing::info!(port = %name, mtu, "MTU changed");
                self.ports
                    .get_mut(&no)
                    .expect("a port of the switch")
                    .mtu_problem = None;
                Ok(())
            }
            Err(e) => {
                // Back as it was, pins and batching included.
                self.settle(no, None)?;
                Err(e.into())
            }
        }
    }
}
