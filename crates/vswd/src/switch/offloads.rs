//! The bridge's side of flow offload: the offload managers kept as the options and
//! ports say, fed the datapath flows, and entries a fast path kept across a restart
//! handed back.

use super::*;

impl Switch {
    /// Offload managers as the options now say.
    pub(super) fn sync_offloads(&mut self) {
        // The stored options were validated when they were set.
        let Ok(sw) = SwitchOptions::from_options(&self.options) else {
            return;
        };
        // The offload side works in datapath numbers (the datapath flows' and their
        // actions'); a port not in the datapath has none to offload.
        let ports = self.ports.values().filter_map(|p| {
            Some(OffloadPort {
                no: p.dp_no?,
                name: &p.name,
                options: &p.parsed,
                ifindex: match p.link {
                    Link::Up { ifindex } if ifindex != 0 => Some(ifindex),
                    _ => None,
                },
                rx_socket: p.device.offload_socket(),
                opened: p.opened,
            })
        });
        self.offloads.sync(&sw, ports);
        // Flows received on a port with a provider are made exact enough for it.
        let of_ports = self
            .offloads
            .port_numbers()
            .into_iter()
            .filter_map(|dp| self.of_no(dp))
            .collect();
        if self.ofproto.set_offload_ports(of_ports) {
            if let Err(e) = self.revalidate_now() {
                tracing::error!(error = %e, "cannot revalidate the datapath flows");
            }
        }
    }

    /// Takes out of the fast paths the entries of datapath flows the revalidator
    /// retired (at once: a rule change calls this before it is answered, after its
    /// revalidator pass).
    pub(super) fn withdraw_offloads(&mut self) {
        if self.offloads.any() {
            let flows = self.dpif.dp().dump_flows();
            self.offloads.withdraw(&flows);
            self.hand_back_offloads(false);
        }
    }

    /// Entries an earlier run left forwarding in the kernel (`offload-persist`) are
    /// checked against the pipeline once it is restored (never while
    /// `flow-restore-wait` holds forwarding): what it would not give leaves the fast
    /// path now, what it gives gets its datapath flow cached (`install`: once an
    /// offload interval, not at every rule change), which the next offload pass puts
    /// over the entry in place. Runs until no entry is left adopted.
    pub(super) fn hand_back_offloads(&mut self, install: bool) {
        if !self.offloads.any_adopted() || self.ofproto.restore_wait() {
            return;
        }
        let upcall = self.dpif.dp().upcall();
        let now = vsw_datapath::clock::now_ms();
        let keys = self.offloads.hand_back(|key| {
            let t = upcall.translate(key, now, false);
            // A flow whose answer holds for one packet only (a learn not in
            // place) is not cached, so not kept in the kernel either: its packets
            // must reach a PMD.
            if !t.cacheable {
                return Err("translated-per-packet".to_string());
            }
            vsw_datapath::offload::offloadable(&DpFlow::new(0, 0, key, t, now))
        });
        if install {
            self.dpif.dp().install_flows(keys);
        }
    }

    /// The interfaces whose kernel fast path this switch keeps pinned.
    pub fn pinned_offload_ports(&self) -> Vec<String> {
        self.offloads.pinned_ports()
    }

    /// The offload pass, when its interval has run out; and whenever the revalidator
    /// retired flows since the last look (hosts that moved), their entries leave.
    pub fn revalidate_offloads(&mut self) {
        if !self.offloads.any() {
            return;
        }
        let due = self.offloads.due();
        self.hand_back_offloads(due);
        let retired = self.dpif.dp().retired_flows();
        if retired == self.retired_seen && !due {
            return;
        }
        self.retired_seen = retired;
        let flows = self.dpif.dp().dump_flows();
        self.offloads.withdraw(&flows);
        self.offloads.revalidate(&flows, false);
    }
}
