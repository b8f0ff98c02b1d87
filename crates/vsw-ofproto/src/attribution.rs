//! What a datapath flow's packets are credited to once the revalidator pushes them:
//! each rule its translation went through (their `n_packets`, `n_bytes` and idle
//! times), and the MAC entries NORMAL learned for it, which stay fresh while the flow
//! is used although its packets no longer pass through translation.

use std::sync::{Arc, Mutex};

use vsw_datapath::Attribution;
use vsw_flow::{Learned, MacTable, Rule};
use vsw_packet::MacAddr;

use crate::generation::Generation;

#[derive(Debug)]
pub(crate) struct FlowCredit {
    /// Each rule once, though the translation may have visited it twice (resubmit).
    pub rules: Vec<Arc<Rule>>,
    pub learned: Vec<(MacAddr, u16, u32)>,
    pub macs: Arc<Mutex<MacTable>>,
    pub generation: Arc<Generation>,
}

impl Attribution for FlowCredit {
    fn rules(&self) -> Vec<Arc<Rule>> {
        self.rules.clone()
    }

    fn credit(&self, packets: u64, bytes: u64, used_ms: u64) {
        for r in &self.rules {
            r.stats.add(packets, bytes, used_ms);
        }
        if self.learned.is_empty() {
            return;
        }
        let mut macs = self.macs.lock().unwrap_or_else(|e| e.into_inner());
        for &(mac, vlan, port) in &self.learned {
            // Refreshed where it still is; a host that moved since is not moved
            // back by the counts of its old flow.
            match macs.lookup(mac, vlan, used_ms) {
                Some(p) if p != port => {}
                _ => {
                    if matches!(macs.learn(mac, vlan, port, used_ms), Learned::New) {
                        self.generation.bump();
                    }
                }
            }
        }
    }
}
