//! The control protocol: one JSON request per line on the unix socket, one JSON reply.

pub use crate::offload::OffloadShowView;
use serde::{Deserialize, Serialize};
pub use vsw_datapath::{PmdRxqView, PmdStatsView, PortStatsView, RxqView};

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
    DumpFlows {
        /// `offloaded`, `ovs` (not offloaded) or `all` (the default).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        kind: Option<String>,
    },
    DumpPorts,
    PmdStatsShow,
    PmdStatsClear,
    PmdRxqShow,
    PmdRxqRebalance,
    OffloadShow,
    /// Makes a PMD fail, to see what vswd does then. Refused unless vswd was started
    /// with `VSWD_FAULT_INJECTION=1` in its environment (tests).
    DebugPmdFailure {
        core: usize,
    },
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Reply {
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default)]
    pub result: serde_json::Value,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PortInfo {
    pub no: u32,
    pub name: String,
    /// "up", or "down: why".
    pub status: String,
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

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowInfo {
    /// Canonical text, as `add-flow` takes it.
    pub flow: String,
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
