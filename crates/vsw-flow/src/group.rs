//! Groups (OpenFlow's group table): a rule's `group:N` action hands the packet to
//! group N, which runs one or more *buckets* of actions on copies of it:
//!
//! - `all`: every bucket (flooding, multicast);
//! - `select`: one bucket, chosen by a hash of the packet's addresses and ports,
//!   weighted (load balancing across next hops);
//! - `indirect`: its one bucket (many rules share one next hop);
//! - `fast_failover`: the first bucket whose watched port (or group) is live.
//!
//! Written as `ovs-ofctl add-group` takes them:
//! `group_id=1,type=select,bucket=weight:10,watch_port:2,actions=output:2,bucket=…`.

use std::sync::Arc;

use crate::action::Action;
use crate::error::{FlowSyntaxError, PortResolver};
use crate::rule::RuleStats;
use crate::syntax::parse_actions_unchecked;
use crate::values::{bad, parse_port, parse_uint};

pub use crate::table::MAX_GROUP_ID;
/// The most buckets a group has.
pub const MAX_BUCKETS: usize = 64;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GroupType {
    All,
    Select,
    Indirect,
    FastFailover,
}

impl GroupType {
    pub fn name(self) -> &'static str {
        match self {
            GroupType::All => "all",
            GroupType::Select => "select",
            GroupType::Indirect => "indirect",
            GroupType::FastFailover => "fast_failover",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bucket {
    /// A select group's share (0: never chosen).
    pub weight: u16,
    /// The bucket is live only while this port's link is up.
    pub watch_port: Option<u32>,
    /// The bucket is live only while this group has a live bucket.
    pub watch_group: Option<u32>,
    pub actions: Vec<Action>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupSpec {
    pub id: u32,
    pub kind: GroupType,
    pub buckets: Vec<Bucket>,
    /// The buckets as the front end that installed the group wrote them, to be
    /// given back as written (group descriptions); not kept: said from what they do.
    pub as_written: crate::rule::Written,
}

/// Counters of one bucket or group.
pub type GroupStats = RuleStats;

/// An installed group: its spec, when it was installed, its counters and its
/// buckets' counters.
#[derive(Debug)]
pub struct Group {
    pub spec: GroupSpec,
    pub installed_ms: u64,
    pub stats: GroupStats,
    pub bucket_stats: Vec<GroupStats>,
}

impl Group {
    pub fn new(spec: GroupSpec, now_ms: u64) -> Arc<Group> {
        let bucket_stats = spec.buckets.iter().map(|_| GroupStats::default()).collect();
        Arc::new(Group {
            spec,
            installed_ms: now_ms,
            stats: GroupStats::default(),
            bucket_stats,
        })
    }
}

impl GroupSpec {
    /// What a group must be, whichever way it was written: a type's number of
    /// buckets (indirect: exactly one), weights only in select groups, watches in
    /// fast-failover groups (and select, where they decide liveness too), no
    /// goto_table in a bucket.
    pub fn check(&self) -> Result<(), FlowSyntaxError> {
        let why = |w: &str| Err(bad("group", &self.id.to_string(), w));
        if self.id > MAX_GROUP_ID {
            return why("a group number is at most 0xffffff00");
        }
        if self.kind == GroupType::Indirect && self.buckets.len() != 1 {
            return why("an indirect group has exactly one bucket");
        }
        if self.buckets.len() > MAX_BUCKETS {
            return why("at most 64 buckets");
        }
        for b in &self.buckets {
            if self.kind == GroupType::FastFailover
                && b.watch_port.is_none()
                && b.watch_group.is_none()
            {
                return why("a fast_failover bucket watches a port or a group");
            }
            if b.weight != 1 && self.kind != GroupType::Select {
                return why("only a select group's buckets have weights");
            }
            if b.actions.iter().any(|a| {
                matches!(
                    a,
                    Action::GotoTable(_) | Action::WriteActions(_) | Action::ClearActions
                )
            }) {
                return why("a bucket cannot goto_table or write to the action set");
            }
        }
        Ok(())
    }
}

/// Parses a group as `ovs-ofctl add-group` takes it.
pub fn parse_group(text: &str, ports: &dyn PortResolver) -> Result<GroupSpec, FlowSyntaxError> {
    let mut parts = text.split("bucket=");
    let head = parts.next().unwrap_or("");
    let (mut id, mut kind) = (None, None);
    for tok in head.split(',').map(str::trim).filter(|t| !t.is_empty()) {
        match tok.split_once('=') {
            Some(("group_id", v)) => {
                id = Some(parse_uint("group_id", v, u128::from(MAX_GROUP_ID))? as u32)
            }
            Some(("type", v)) => {
                kind = Some(match v {
                    "all" => GroupType::All,
                    "select" => GroupType::Select,
                    "indirect" => GroupType::Indirect,
                    "fast_failover" | "ff" => GroupType::FastFailover,
                    _ => return Err(bad("type", v, "all, select, indirect or fast_failover")),
                })
            }
            _ => return Err(FlowSyntaxError::UnknownField(tok.to_string())),
        }
    }
    let id = id.ok_or_else(|| bad("group_id", "", "a group needs its group_id"))?;
    let kind = kind.unwrap_or(GroupType::All);
    let mut buckets = Vec::new();
    for part in parts {
        buckets.push(parse_bucket(part.trim().trim_end_matches(','), ports)?);
    }
    let spec = GroupSpec {
        id,
        kind,
        buckets,
        as_written: Default::default(),
    };
    spec.check()?;
    Ok(spec)
}

/// `weight:N,watch_port:P,watch_group:G,actions=…` (the attributes first, all
/// optional; `actions=` may be left out).
fn parse_bucket(text: &str, ports: &dyn PortResolver) -> Result<Bucket, FlowSyntaxError> {
    let mut b = Bucket {
        weight: 1,
        watch_port: None,
        watch_group: None,
        actions: Vec::new(),
    };
    let mut rest = text;
    loop {
        let (tok, after) = rest.split_once(',').unwrap_or((rest, ""));
        let attr = tok.split_once([':', '=']);
        match attr {
            Some(("weight", v)) => b.weight = parse_uint("weight", v, 0xffff)? as u16,
            Some(("watch_port", v)) => b.watch_port = Some(parse_port("watch_port", v, ports)?),
            Some(("watch_group", v)) => {
                b.watch_group = Some(parse_uint("watch_group", v, u128::from(MAX_GROUP_ID))? as u32)
            }
            _ => break,
        }
        rest = after;
    }
    let actions = rest.strip_prefix("actions=").unwrap_or(rest);
    // What a bucket may rewrite is checked against each packet when it is
    // translated (a bucket has no match of its own).
    b.actions = if actions.is_empty() {
        Vec::new()
    } else {
        parse_actions_unchecked(actions, ports)?
    };
    Ok(b)
}

/// Prints a group as `ovs-ofctl dump-groups` writes it.
pub fn format_group(g: &GroupSpec) -> String {
    let mut s = format!("group_id={},type={}", g.id, g.kind.name());
    for b in &g.buckets {
        s.push_str(",bucket=");
        if g.kind == GroupType::Select {
            s.push_str(&format!("weight:{},", b.weight));
        }
        if let Some(p) = b.watch_port {
            s.push_str(&format!("watch_port:{p},"));
        }
        if let Some(w) = b.watch_group {
            s.push_str(&format!("watch_group:{w},"));
        }
        s.push_str("actions=");
        s.push_str(&crate::syntax::format_actions(&b.actions));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_names(_: &str) -> Option<u32> {
        None
    }

    #[test]
    fn groups_read_and_print_as_ovs_ofctl_writes_them() {
        for (text, canon) in [
            (
                "group_id=1,type=all,bucket=output:1,bucket=output:2",
                "group_id=1,type=all,bucket=actions=output:1,bucket=actions=output:2",
            ),
            (
                "group_id=2,type=select,bucket=weight:10,actions=mod_dl_dst:02:00:00:00:00:01,output:3,bucket=weight:20,watch_port:4,actions=output:4",
                "group_id=2,type=select,bucket=weight:10,actions=mod_dl_dst:02:00:00:00:00:01,output:3,bucket=weight:20,watch_port:4,actions=output:4",
            ),
            (
                "group_id=3,type=indirect,bucket=actions=output:5",
                "group_id=3,type=indirect,bucket=actions=output:5",
            ),
            (
                "group_id=4,type=fast_failover,bucket=watch_port:1,actions=output:1,bucket=watch_group:3,actions=group:3",
                "group_id=4,type=fast_failover,bucket=watch_port:1,actions=output:1,bucket=watch_group:3,actions=group:3",
            ),
        ] {
            let g = parse_group(text, &no_names).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(format_group(&g), canon);
            assert_eq!(parse_group(canon, &no_names).unwrap(), g);
        }
    }

    #[test]
    fn bad_groups_name_the_problem() {
        for (text, needle) in [
            ("type=all,bucket=output:1", "group_id"),
            ("group_id=1,type=indirect", "exactly one bucket"),
            ("group_id=1,type=fast_failover,bucket=output:1", "watches"),
            ("group_id=1,type=all,bucket=weight:5,output:1", "weights"),
            ("group_id=1,type=any", "all, select"),
            ("group_id=1,bucket=goto_table:3", "goto_table"),
            ("group_id=1,bucket=write_actions(output:1)", "action set"),
            ("group_id=1,bucket=actions=frobnicate", "frobnicate"),
        ] {
            let e = parse_group(text, &no_names).unwrap_err().to_string();
            assert!(e.contains(needle), "{text}: {e}");
        }
    }
}
