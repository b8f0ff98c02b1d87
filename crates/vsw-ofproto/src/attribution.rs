//! What a datapath flow's packets are credited to once the revalidator pushes them:
//! each rule its translation went through (their `n_packets`, `n_bytes` and idle
//! times), and the MAC entries NORMAL learned for it, which stay fresh while the flow
//! is used although its packets no longer pass through translation.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use vsw_datapath::Attribution;
use vsw_flow::{Group, Learned, MacTable, Rule};
use vsw_packet::MacAddr;

use crate::generation::Changes;

/// Lookups and matches per table, for OpenFlow's table statistics: a packet
/// counts once per table its translation looked up (a miss is a lookup, not a
/// match), credited with the datapath flow's counts.
#[derive(Debug)]
pub struct TableCounters {
    lookups: Vec<AtomicU64>,
    matches: Vec<AtomicU64>,
}

impl Default for TableCounters {
    fn default() -> Self {
        let n = usize::from(vsw_flow::MAX_TABLE) + 1;
        TableCounters {
            lookups: (0..n).map(|_| AtomicU64::new(0)).collect(),
            matches: (0..n).map(|_| AtomicU64::new(0)).collect(),
        }
    }
}

impl TableCounters {
    fn add(&self, table: u8, matched: bool, packets: u64) {
        let i = usize::from(table);
        if let Some(l) = self.lookups.get(i) {
            l.fetch_add(packets, Ordering::Relaxed);
        }
        if matched {
            if let Some(m) = self.matches.get(i) {
                m.fetch_add(packets, Ordering::Relaxed);
            }
        }
    }

    /// (lookups, matches) of `table`.
    pub fn get(&self, table: u8) -> (u64, u64) {
        let i = usize::from(table);
        let read = |v: &Vec<AtomicU64>| v.get(i).map_or(0, |c| c.load(Ordering::Relaxed));
        (read(&self.lookups), read(&self.matches))
    }
}

#[derive(Debug)]
pub(crate) struct FlowCredit {
    /// Each rule once, though the translation may have visited it twice (resubmit).
    pub rules: Vec<Arc<Rule>>,
    /// Each table lookup of the translation, and whether it matched.
    pub tables: Vec<(u8, bool)>,
    pub table_counters: Arc<TableCounters>,
    /// Each group the translation went through (`None`) and bucket it ran.
    pub groups: Vec<(Arc<Group>, Option<usize>)>,
    pub learned: Vec<(MacAddr, u16, u32)>,
    /// What NORMAL learned in the bridges a patch port led to, with their tables.
    pub learned_across: Vec<(Arc<Mutex<MacTable>>, MacAddr, u16, u32)>,
    /// Every part of the slow path the translation read: its bridge, the bridges
    /// patch ports led it to, the backer's map.
    pub depends: Vec<Arc<Changes>>,
    pub macs: Arc<Mutex<MacTable>>,
    /// The rules its `learn`s made (or found in place): their hard timeouts start
    /// over while it is used; removing one makes it be translated again.
    pub learned_rules: Vec<Arc<Rule>>,
    /// The rules whose `fin_timeout(…)` the flow's packets (TCP FIN or RST) cut,
    /// with the timeouts.
    pub fin_timeouts: Vec<(Arc<Rule>, u16, u16)>,
    /// The frozen states the flow's recirculation resumes (or it resumed from):
    /// held (never read) while the flow is.
    pub _frozen: Vec<Arc<crate::frozen::Frozen>>,
    /// The notes of the packets the flow sends up: held (never read) while the
    /// flow is.
    pub _notes: Vec<Arc<crate::punt_notes::PuntNote>>,
}

impl Attribution for FlowCredit {
    fn rules(&self) -> Vec<Arc<Rule>> {
        self.rules.clone()
    }

    fn unchanged_since(&self, generation: u64) -> bool {
        let matched = |removed: &[usize]| {
            self.rules
                .iter()
                .chain(&self.learned_rules)
                .any(|r| removed.binary_search(&(Arc::as_ptr(r) as usize)).is_ok())
        };
        self.depends
            .iter()
            .all(|c| c.right_since(generation, &matched))
    }

    fn credit(&self, packets: u64, bytes: u64, used_ms: u64) {
        for r in &self.rules {
            r.stats.add(packets, bytes, used_ms);
        }
        if packets > 0 {
            for r in &self.learned_rules {
                r.refresh(used_ms);
            }
            for (r, idle, hard) in &self.fin_timeouts {
                r.cut_timeouts(*idle, *hard);
            }
            for &(table, matched) in &self.tables {
                self.table_counters.add(table, matched, packets);
            }
        }
        for (g, bucket) in &self.groups {
            let stats = match bucket {
                None => Some(&g.stats),
                Some(i) => g.bucket_stats.get(*i),
            };
            if let Some(s) = stats {
                s.add(packets, bytes, used_ms);
            }
        }
        if !self.learned.is_empty() {
            let mut macs = self.macs.lock().unwrap_or_else(|e| e.into_inner());
            for &(mac, vlan, port) in &self.learned {
                self.refresh(&mut macs, mac, vlan, port, used_ms);
            }
        }
        for (table, mac, vlan, port) in &self.learned_across {
            let mut macs = table.lock().unwrap_or_else(|e| e.into_inner());
            self.refresh(&mut macs, *mac, *vlan, *port, used_ms);
        }
    }
}

impl FlowCredit {
    /// A host NORMAL learned for this flow is refreshed where it still is; a host
    /// that moved since is not moved back by the counts of its old flow.
    fn refresh(&self, macs: &mut MacTable, mac: MacAddr, vlan: u16, port: u32, used_ms: u64) {
        match macs.lookup(mac, vlan, used_ms) {
            Some(p) if p != port => {}
            _ => {
                if matches!(macs.learn(mac, vlan, port, used_ms), Learned::New) {
                    // Learned again in one of the bridges it went through.
                    for c in &self.depends {
                        c.bump();
                    }
                }
            }
        }
    }
}
