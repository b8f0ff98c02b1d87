//! What the megaflow property tests share: sending one frame through a running
//! datapath of memory ports and taking what came out.

use std::sync::Arc;
use std::time::{Duration, Instant};

use vsw_datapath::memory::MemoryPeer;
use vsw_datapath::{Datapath, PortStats};

/// How long a PMD may take to receive one frame.
const WAIT: Duration = Duration::from_secs(10);

/// Memory ports 1..=n of a running datapath: their peers and counters, and how many
/// frames were sent into each.
pub struct Ports {
    pub peers: Vec<MemoryPeer>,
    pub stats: Vec<Arc<PortStats>>,
    pub sent: Vec<u64>,
}

impl Ports {
    /// Sends `frame` into port `in_port` and returns what came out of every port,
    /// (port, frame), sorted; an error when the PMD never took it. `emc` is the
    /// datapath's setting, set again as the acknowledgement that the PMD finished
    /// the frame's batch (it takes a change at the top of its next iteration, after
    /// it sent what the batch staged).
    pub fn forward(
        &mut self,
        dp: &mut Datapath,
        in_port: u32,
        frame: &[u8],
        emc: u32,
    ) -> Result<Vec<(u32, Vec<u8>)>, String> {
        let i = (in_port - 1) as usize;
        self.peers[i].send(frame);
        self.sent[i] += 1;
        let deadline = Instant::now() + WAIT;
        while self.stats[i].view().rx_packets < self.sent[i] {
            if Instant::now() >= deadline {
                return Err("the PMD never took the frame".into());
            }
            std::thread::yield_now();
        }
        dp.set_emc_insert_inv_prob(emc).map_err(|e| e.to_string())?;
        let mut got = Vec::new();
        for (n, peer) in self.peers.iter().enumerate() {
            while let Some(f) = peer.try_recv() {
                got.push((n as u32 + 1, f));
            }
        }
        got.sort();
        Ok(got)
    }
}

/// Proptest cases: `PROPTEST_CASES`, or `default`.
pub fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}
