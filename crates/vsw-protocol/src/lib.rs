//! vsw's control protocol: one JSON request per line on vswd's unix socket, one JSON
//! reply, and the views of ports, PMDs, flows and offload providers the replies carry.
//! Plain data and serde only, so that a client (vswctl, scripts, the tests) needs
//! nothing else of vsw to speak it.
#![forbid(unsafe_code)]

pub mod render;

use serde::{Deserialize, Serialize};

/// Output batches are counted by size: 1, 2–3, 4–7, 8–15, 16–31 and 32 packets.
pub const BATCH_BUCKETS: usize = 6;

pub const DEFAULT_SOCKET: &str = "/run/vsw/vswd.sock";
pub const DEFAULT_STATE_FILE: &str = "/var/lib/vsw/vswd.json";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Request {
    Show,
    /// Switch-wide options, `KEY=VALUE` each.
    Set {
        options: Vec<String>,
    },
    AddPort {
        name: String,
        options: Vec<String>,
    },
    DelPort {
        name: String,
    },
    SetPort {
        name: String,
        options: Vec<String>,
    },
    AddFlow {
        flow: String,
    },
    /// All or nothing: one bad line and none is added.
    AddFlows {
        flows: Vec<String>,
    },
    DelFlows {
        matching: Option<String>,
        strict: bool,
    },
    /// A group, as `ovs-ofctl add-group` takes it.
    AddGroup {
        group: String,
    },
    /// Replaces a group's type and buckets.
    ModGroup {
        group: String,
    },
    /// Removes a group (all without one) and the flows that use it.
    DelGroups {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        group_id: Option<u32>,
    },
    DumpGroups,
    /// A meter, as `ovs-ofctl add-meter` takes it.
    AddMeter {
        meter: String,
    },
    /// Replaces a meter's bands and flags.
    ModMeter {
        meter: String,
    },
    /// Removes a meter (all without one) and the flows that use it.
    DelMeters {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        meter_id: Option<u32>,
    },
    DumpMeters,
    /// The selection (as `del-flows` takes it) and `actions=…`, as `ovs-ofctl
    /// mod-flows` takes them.
    ModFlows {
        flow: String,
        strict: bool,
        #[serde(default)]
        reset_counts: bool,
    },
    DumpFlows {
        /// `offloaded`, `ovs` (not offloaded) or `all` (the default).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        kind: Option<String>,
        /// One table's flows only.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        table: Option<u8>,
    },
    DumpPorts,
    PmdStatsShow,
    PmdStatsClear,
    PmdRxqShow,
    PmdRxqRebalance,
    OffloadShow,
    /// The hosts NORMAL learned: port, VLAN, MAC, age.
    FdbShow,
    /// Forget every learned host.
    FdbFlush,
    /// A connection tracker command (`dump-conntrack`, `flush-conntrack`,
    /// `ct-stats-show`, `ct-set-limits`, …) with its arguments, answered as
    /// `ovs-appctl dpctl/<command>` answers it.
    Conntrack {
        command: String,
        args: Vec<String>,
    },
    /// The datapath flows (megaflows) the PMDs cache.
    DumpDpFlows {
        /// `offloaded`, `ovs` (not offloaded) or `all` (the default).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        kind: Option<String>,
    },
    /// Translates a flow given as a match (`in_port=1,tcp,tp_dst=80`) through the
    /// pipeline, as `ofproto/trace` does.
    Trace {
        flow: String,
    },
    /// The datapath: flow counts, the flow limit, hits and misses.
    DpifShow,
    /// Makes a PMD fail, to see what vswd does then. Refused unless vswd was started
    /// with `VSWD_FAULT_INJECTION=1` in its environment (tests).
    DebugPmdFailure {
        core: usize,
    },
}

impl Request {
    /// The command's name, as its `cmd` tag spells it (for counting requests by
    /// kind without serializing them).
    pub fn kind(&self) -> &'static str {
        match self {
            Request::Show => "show",
            Request::Set { .. } => "set",
            Request::AddPort { .. } => "add-port",
            Request::DelPort { .. } => "del-port",
            Request::SetPort { .. } => "set-port",
            Request::AddFlow { .. } => "add-flow",
            Request::AddFlows { .. } => "add-flows",
            Request::DelFlows { .. } => "del-flows",
            Request::AddGroup { .. } => "add-group",
            Request::ModGroup { .. } => "mod-group",
            Request::DelGroups { .. } => "del-groups",
            Request::DumpGroups => "dump-groups",
            Request::AddMeter { .. } => "add-meter",
            Request::ModMeter { .. } => "mod-meter",
            Request::DelMeters { .. } => "del-meters",
            Request::DumpMeters => "dump-meters",
            Request::ModFlows { .. } => "mod-flows",
            Request::DumpFlows { .. } => "dump-flows",
            Request::DumpPorts => "dump-ports",
            Request::PmdStatsShow => "pmd-stats-show",
            Request::PmdStatsClear => "pmd-stats-clear",
            Request::PmdRxqShow => "pmd-rxq-show",
            Request::PmdRxqRebalance => "pmd-rxq-rebalance",
            Request::OffloadShow => "offload-show",
            Request::FdbShow => "fdb-show",
            Request::FdbFlush => "fdb-flush",
            Request::Conntrack { .. } => "conntrack",
            Request::DumpDpFlows { .. } => "dump-dp-flows",
            Request::Trace { .. } => "trace",
            Request::DpifShow => "dpif-show",
            Request::DebugPmdFailure { .. } => "debug-pmd-failure",
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Reply {
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default)]
    pub result: serde_json::Value,
}

/// Whether a port forwards, as programs read it (`PortInfo::status` says why not).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PortLink {
    #[default]
    Up,
    Down,
    /// Down: the interface it is on does not exist.
    NoDevice,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PortInfo {
    pub no: u32,
    pub name: String,
    /// "up", or "down: why".
    pub status: String,
    /// The same, for programs: up, down, or down because its interface is not
    /// there (what Open vSwitch reports as the interface's error).
    #[serde(default)]
    pub link: PortLink,
    pub options: Vec<(String, String)>,
    pub stats: PortStatsView,
    /// The interface's MTU now (afpacket ports whose interface exists).
    #[serde(default)]
    pub mtu: Option<u32>,
    /// Why the interface does not have the `mtu_request` MTU, when it does not.
    #[serde(default)]
    pub mtu_problem: Option<String>,
    /// The transmit batching interval in effect (µs) and where it comes from
    /// ("port", "switch" or "auto").
    #[serde(default)]
    pub tx_flush_interval_us: u32,
    #[serde(default)]
    pub tx_flush_interval_from: String,
    /// Where a vhostuser port listens.
    #[serde(default)]
    pub vhost_server_path: Option<String>,
    /// For a vhostuser port: how its guest receives, and what it did wrong.
    #[serde(default)]
    pub vhost_guest: Option<String>,
    /// For a vhostuser port: its guest's counters.
    #[serde(default)]
    pub vhost_counters: Option<GuestCounters>,
    /// The kernel interface's index, for a port on one that is attached.
    #[serde(default)]
    pub ifindex: Option<u32>,
}

/// What vsw counted of a vhost-user port's guest.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GuestCounters {
    /// Interrupts vsw raised for the guest (writes to its call eventfds).
    pub notifications: u64,
    /// Accesses to guest memory its frontend had taken away (survived).
    pub memory_faults: u64,
    /// Frames longer than vsw takes from the guest.
    pub too_long: u64,
    /// Descriptor chains that were not well formed.
    pub bad_chains: u64,
    /// Queues refused (size or addresses).
    pub bad_queues: u64,
    /// Frames for the guest that found no receive buffer posted.
    pub no_buffer: u64,
}

/// One host NORMAL learned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FdbEntryView {
    pub port: u32,
    pub vlan: u16,
    pub mac: String,
    pub age_s: u64,
}

/// One group membership or multicast router port snooping learned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MdbEntryView {
    pub port: u32,
    pub vlan: u16,
    /// The group's address; `None` for a router's port (a query came in on it).
    pub group: Option<String>,
    pub age_s: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShowInfo {
    pub options: Vec<(String, String)>,
    pub pmd_cores: Vec<usize>,
    pub pmd_rxq_assign: String,
    pub emc_insert_inv_prob: u32,
    pub socket: String,
    pub state_file: String,
    pub ports: Vec<PortInfo>,
    pub flows: usize,
}

/// One group of `dump-groups`, with its counters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupInfo {
    /// Canonical text, as `add-group` takes it.
    pub group: String,
    pub group_id: u32,
    /// Flows that hand packets to it.
    pub ref_count: u32,
    pub n_packets: u64,
    pub n_bytes: u64,
    pub duration_ms: u64,
    /// Each bucket's (packets, bytes).
    pub buckets: Vec<(u64, u64)>,
}

/// One meter of `dump-meters`, with its counters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MeterInfo {
    /// Canonical text, as `add-meter` takes it.
    pub meter: String,
    pub meter_id: u32,
    /// Flows that use it.
    pub flow_count: u32,
    /// Packets and bytes measured.
    pub packet_in_count: u64,
    pub byte_in_count: u64,
    pub duration_ms: u64,
    /// Each band's (packets, bytes) that exceeded it.
    pub bands: Vec<(u64, u64)>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowInfo {
    /// Canonical text, as `add-flow` takes it.
    pub flow: String,
    #[serde(default)]
    pub table: u8,
    pub priority: u16,
    /// The match alone (without priority).
    pub matching: String,
    pub actions: String,
    pub n_packets: u64,
    pub n_bytes: u64,
    pub duration_ms: u64,
    pub idle_age_s: u64,
    #[serde(default)]
    pub idle_timeout: u16,
    #[serde(default)]
    pub hard_timeout: u16,
    #[serde(default)]
    pub cookie: u64,
    /// Forwarded by an offload provider now.
    #[serde(default)]
    pub offloaded: bool,
    /// "yes", "not-eligible:REASON", "pending:OOR", "failed:REASON", or "off".
    #[serde(default)]
    pub offload_status: String,
    /// Packets per second at the last offload pass.
    #[serde(default)]
    pub pps: f64,
}

/// One datapath flow (megaflow) as `dump-dp-flows` shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DpFlowInfo {
    pub id: u64,
    /// The PMD that caches it.
    pub core: usize,
    /// The masked match, `ovs-ofctl` style (`value/mask` where partly masked).
    pub matching: String,
    pub packets: u64,
    pub bytes: u64,
    /// Seconds since a packet last used it; `None`: never.
    pub used_s: Option<f64>,
    /// Datapath actions (`2,3`, `set(eth(dst=…)),2`, `drop`).
    pub actions: String,
    /// Forwarded by an offload provider.
    pub offloaded: bool,
    /// Why it is not offloaded (when offloading is on).
    #[serde(default)]
    pub offload_reason: Option<String>,
    /// "ovs" (vsw's PMDs) or the provider ("ebpf").
    pub dp: String,
}

/// `dpif-show`: the datapath as a whole.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DpifInfo {
    /// Datapath flows cached, over all PMDs.
    pub flows: usize,
    /// `flow-limit`: per PMD.
    pub flow_limit: usize,
    /// Packets found in a cache (exact-match or megaflow), sent up, and lost.
    pub hit: u64,
    pub missed: u64,
    pub lost: u64,
    /// Translations that failed (resubmit loops).
    pub xlate_errors: u64,
    /// Rules by table.
    pub tables: Vec<(u8, usize)>,
    pub ports: Vec<(u32, String)>,
}

/// A port's counters at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortStatsView {
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    pub tx_batches: u64,
    pub rx_malformed: u64,
    pub rx_truncated: u64,
    pub rx_overrun: u64,
    pub tx_queue_full: u64,
    pub tx_too_big: u64,
    pub tx_errors: u64,
    #[serde(default)]
    pub tx_mtu_drops: u64,
    #[serde(default)]
    pub tx_gso_segments: u64,
    #[serde(default)]
    pub tx_gso_refused: u64,
    #[serde(default)]
    pub tx_csum_sw: u64,
    #[serde(default)]
    pub tx_gro_segments: u64,
    #[serde(default)]
    pub tx_batch_hist: [u64; BATCH_BUCKETS],
    #[serde(default)]
    pub tx_wait_us_sum: u64,
    #[serde(default)]
    pub tx_wait_us_max: u64,
}

impl PortStatsView {
    /// The average time a packet waited in an output batch (µs).
    pub fn avg_wait_us(&self) -> Option<f64> {
        (self.tx_packets > 0).then(|| self.tx_wait_us_sum as f64 / self.tx_packets as f64)
    }

    /// Send calls (kicks) per packet sent.
    pub fn kicks_per_packet(&self) -> Option<f64> {
        (self.tx_packets > 0).then(|| self.tx_batches as f64 / self.tx_packets as f64)
    }

    pub fn rx_dropped(&self) -> u64 {
        self.rx_malformed + self.rx_truncated + self.rx_overrun
    }

    pub fn tx_dropped(&self) -> u64 {
        self.tx_queue_full
            + self.tx_too_big
            + self.tx_errors
            + self.tx_mtu_drops
            + self.tx_gso_refused
    }
}

/// A copy of one PMD's counters at one moment, with the figures of OVS's
/// `pmd-stats-show`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PmdStatsView {
    pub core: usize,
    /// Packets received from the PMD's queues.
    pub packets: u64,
    /// Found in the exact-match cache.
    pub emc_hits: u64,
    /// Found in the PMD's datapath flows (megaflows; the exact-match cache missed).
    pub megaflow_hits: u64,
    /// No datapath flow matched: translated through the pipeline (an upcall).
    pub upcalls: u64,
    /// Upcalls that did not happen because the batch's budget of translations ran
    /// out: the packet was dropped (part of `lost`).
    #[serde(default)]
    pub lost_upcalls: u64,
    /// Passes packets took after their first (recirculations: a select group's
    /// bucket chosen by the datapath's hash, …).
    #[serde(default)]
    pub recirculations: u64,
    /// Upcalls whose result was executed but not cached (the flow limit was reached,
    /// or the rules changed while translating).
    #[serde(default)]
    pub uncached_upcalls: u64,
    /// Received but not forwarded for lack of resources or sense: malformed headers,
    /// full or too-small output queues.
    pub lost: u64,
    /// Subtables probed by the megaflow lookups that found a flow.
    pub subtable_lookups: u64,
    pub busy_cycles: u64,
    pub idle_cycles: u64,
    pub iterations: u64,
    /// Output batches sent and the packets in them.
    pub tx_batches: u64,
    pub tx_packets: u64,
    /// The longest loop iteration since the last clear: how long a change (or
    /// anything else) kept the PMD from its queues.
    #[serde(default)]
    pub max_iteration_cycles: u64,
    /// The longest time the PMD spent taking up a change (new rules, ports, options).
    #[serde(default)]
    pub max_reconfigure_cycles: u64,
    /// Idle cycles spent asleep (`pmd-sleep-max`).
    #[serde(default)]
    pub sleep_cycles: u64,
    /// Datapath flows in the PMD's table now (a gauge: `since` keeps it).
    #[serde(default)]
    pub flows: u64,
    pub cycles_per_second: u64,
}

impl PmdStatsView {
    /// Busy (processing) cycles per received packet.
    pub fn avg_cycles_per_packet(&self) -> Option<f64> {
        (self.packets > 0).then(|| self.busy_cycles as f64 / self.packets as f64)
    }

    /// Subtables probed per megaflow hit (a miss probes every subtable and is not
    /// counted).
    pub fn avg_subtable_lookups(&self) -> Option<f64> {
        (self.megaflow_hits > 0).then(|| self.subtable_lookups as f64 / self.megaflow_hits as f64)
    }

    /// The shares of received packets found in the exact-match cache, in the
    /// megaflows, and sent up, in percent.
    pub fn shares(&self) -> Option<(f64, f64, f64)> {
        let n = self.emc_hits + self.megaflow_hits + self.upcalls;
        (n > 0).then(|| {
            let pct = |v: u64| 100.0 * v as f64 / n as f64;
            (
                pct(self.emc_hits),
                pct(self.megaflow_hits),
                pct(self.upcalls),
            )
        })
    }

    pub fn max_iteration_us(&self) -> f64 {
        self.max_iteration_cycles as f64 * 1e6 / self.cycles_per_second.max(1) as f64
    }

    pub fn max_reconfigure_us(&self) -> f64 {
        self.max_reconfigure_cycles as f64 * 1e6 / self.cycles_per_second.max(1) as f64
    }

    pub fn avg_packets_per_batch(&self) -> Option<f64> {
        (self.tx_batches > 0).then(|| self.tx_packets as f64 / self.tx_batches as f64)
    }

    /// Counters since `base` (what `pmd-stats-clear` recorded).
    pub fn since(&self, base: &PmdStatsView) -> PmdStatsView {
        let d = |a: u64, b: u64| a.saturating_sub(b);
        PmdStatsView {
            core: self.core,
            packets: d(self.packets, base.packets),
            emc_hits: d(self.emc_hits, base.emc_hits),
            megaflow_hits: d(self.megaflow_hits, base.megaflow_hits),
            upcalls: d(self.upcalls, base.upcalls),
            lost_upcalls: d(self.lost_upcalls, base.lost_upcalls),
            recirculations: d(self.recirculations, base.recirculations),
            uncached_upcalls: d(self.uncached_upcalls, base.uncached_upcalls),
            lost: d(self.lost, base.lost),
            subtable_lookups: d(self.subtable_lookups, base.subtable_lookups),
            busy_cycles: d(self.busy_cycles, base.busy_cycles),
            idle_cycles: d(self.idle_cycles, base.idle_cycles),
            iterations: d(self.iterations, base.iterations),
            tx_batches: d(self.tx_batches, base.tx_batches),
            tx_packets: d(self.tx_packets, base.tx_packets),
            // A maximum cannot be subtracted: the PMD restarts it on a clear.
            max_iteration_cycles: self.max_iteration_cycles,
            max_reconfigure_cycles: self.max_reconfigure_cycles,
            sleep_cycles: d(self.sleep_cycles, base.sleep_cycles),
            flows: self.flows,
            cycles_per_second: self.cycles_per_second,
        }
    }
}

/// One receive queue in `pmd-rxq-show`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RxqView {
    pub port: String,
    pub port_no: u32,
    pub queue: usize,
    /// Share of its PMD's cycles spent on packets from this queue since it was
    /// assigned, in percent; `None` before the first measurement.
    pub usage_percent: Option<f64>,
    pub pinned: bool,
}

/// One PMD in `pmd-rxq-show`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PmdRxqView {
    pub core: usize,
    /// Polls only queues pinned to it.
    pub isolated: bool,
    pub queues: Vec<RxqView>,
}

/// An offload manager's counters.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OffloadStats {
    pub capacity: usize,
    pub used: usize,
    /// Entries an earlier run left in the fast path (`offload-persist`) that no flow
    /// of this run holds yet: they forward until handed back or withdrawn.
    #[serde(default)]
    pub adopted: usize,
    pub oor: bool,
    pub passes: u64,
    pub rebalance_passes: u64,
    pub swaps: u64,
    pub last_pass_us: u64,
}

/// What `offload-show` prints of one provider.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OffloadShowView {
    pub port: String,
    pub provider: String,
    #[serde(flatten)]
    pub stats: OffloadStats,
}

#[cfg(test)]
mod request_kind_tests {
    use super::Request;

    /// `kind` spells each command as its serialized `cmd` tag does.
    #[test]
    fn a_request_kind_is_its_cmd_tag() {
        for req in [
            Request::Show,
            Request::Set { options: vec![] },
            Request::AddFlows { flows: vec![] },
            Request::DelFlows {
                matching: None,
                strict: false,
            },
            Request::ModFlows {
                flow: String::new(),
                strict: true,
                reset_counts: false,
            },
            Request::PmdStatsShow,
            Request::PmdRxqRebalance,
            Request::DumpDpFlows { kind: None },
            Request::DebugPmdFailure { core: 0 },
        ] {
            let v = serde_json::to_value(&req).unwrap();
            assert_eq!(v["cmd"], req.kind(), "{req:?}");
        }
    }
}
