//! Flow rules: what to match, what to do, how users write them, how packets find them.
//!
//! Pure code: no I/O, no threads. Times are plain numbers of milliseconds that the
//! caller supplies, so aging and idle times are tested with an injected clock.
#![forbid(unsafe_code)]

pub mod action;
pub mod classifier;
pub mod ct_action;
mod error;
pub mod fields;
pub mod group;
pub mod learn;
mod learned_rule;
pub mod mac_table;
pub mod match_key;
pub mod matching;
pub mod mcast_table;
pub mod member_bundle;
pub mod meter;
pub mod multipath;
pub mod pipeline;
pub mod rule;
pub mod samples;
mod set_field;
pub mod subfield;
pub mod syntax;
mod table;
mod values;

pub use action::{Action, Encap, Load};
pub use learn::{Learn, LearnSource, LearnSpec};

/// The bridge's own port (an `internal` port named after the bridge): OpenFlow's
/// LOCAL, numbered as Open vSwitch numbers it in OpenFlow 1.0.
pub const LOCAL_PORT: u32 = 65534;
pub use classifier::{Classifier, Inserted, Lookup, PreparedRule, StagedRules, SubtableOrder};
pub use group::{format_group, parse_group, Bucket, Group, GroupSpec, GroupType};
pub use mac_table::{Learned, MacTable};
pub use match_key::{packet_type, MatchKey, PipelineFields, N_REGS};
pub use matching::{Match, PacketMatch};
pub use mcast_table::{McastConfig, McastEntry, McastTable};
pub use meter::{format_meter, parse_meter, Band, BandType, MeterSpec};
pub use pipeline::{GroupError, LearnOutcome, MeterError, Pipeline};
pub use rule::{AsWritten, FlowSpec, Rule, RuleStats, Written, MAX_TABLE};
pub use syntax::{
    check_actions, check_flow, parse_actions, parse_actions_unchecked, parse_flow, parse_match,
    FlowSyntaxError, PortResolver, Selection,
};
