//! What changed in the flow tables between two pipelines, for flow monitors: the
//! rules added, deleted and modified, whoever made the change (a controller,
//! `vswctl`, a `learn` action, a timeout). Comparing the tables catches every way a
//! rule comes or goes without each of them having to say so; it costs one pass
//! over the rules per change seen, and only while some connection monitors.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use vsw_flow::{Match, Pipeline, Rule};
use vsw_openflow::as_written::{echo_instructions, echo_match};
use vsw_openflow::flow_monitor::{FlowUpdate, UpdateEvent};
use vsw_openflow::flow_stats::{OFPRR_DELETE, OFPRR_HARD_TIMEOUT, OFPRR_IDLE_TIMEOUT};

/// A rule's place: two rules of one place are one flow, changed.
type Place = (u8, u16, Match);

fn place(r: &Rule) -> Place {
    (r.spec.table, r.spec.priority, r.spec.matcher)
}

fn update(r: &Rule, event: UpdateEvent, reason: u8) -> FlowUpdate {
    FlowUpdate {
        event,
        reason: u16::from(reason),
        table_id: r.spec.table,
        priority: r.spec.priority,
        idle_timeout: r.idle_timeout(),
        hard_timeout: r.hard_timeout(),
        cookie: r.spec.cookie,
        matcher: echo_match(&r.spec).0,
        instructions: echo_instructions(&r.spec),
    }
}

/// Why a rule that went went, as far as its own clocks tell: its hard or idle
/// timeout if one has run out, else a delete.
fn why_gone(r: &Rule, now_ms: u64) -> u8 {
    if r.hard_expired(now_ms) {
        OFPRR_HARD_TIMEOUT
    } else if r.expired(now_ms) {
        OFPRR_IDLE_TIMEOUT
    } else {
        OFPRR_DELETE
    }
}

/// The changes from `old` to `new`: rules (the same `Arc`) in both are unchanged;
/// a rule of `new` whose place `old` had with another rule is modified.
pub fn changes(old: &Pipeline, new: &Pipeline, now_ms: u64) -> Vec<FlowUpdate> {
    let old_rules = old.rules();
    let new_rules = new.rules();
    let kept: HashSet<*const Rule> = new_rules.iter().map(Arc::as_ptr).collect();
    let was: HashSet<*const Rule> = old_rules.iter().map(Arc::as_ptr).collect();
    let gone: HashMap<Place, &Arc<Rule>> = old_rules
        .iter()
        .filter(|r| !kept.contains(&Arc::as_ptr(r)))
        .map(|r| (place(r), r))
        .collect();
    let mut out = Vec::new();
    let mut replaced = HashSet::new();
    for r in new_rules.iter().filter(|r| !was.contains(&Arc::as_ptr(r))) {
        let p = place(r);
        if gone.contains_key(&p) {
            replaced.insert(p);
            out.push(update(r, UpdateEvent::Modified, 0));
        } else {
            out.push(update(r, UpdateEvent::Added, 0));
        }
    }
    for (p, r) in gone {
        if !replaced.contains(&p) {
            out.push(update(r, UpdateEvent::Deleted, why_gone(r, now_ms)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use vsw_flow::syntax::{parse_flow as parse_named, parse_match};

    fn parse_flow(text: &str) -> Result<vsw_flow::FlowSpec, vsw_flow::syntax::FlowSyntaxError> {
        parse_named(text, &|_: &str| None)
    }

    #[test]
    fn added_deleted_and_modified_rules_are_told_apart() {
        let mut old = Pipeline::default();
        for f in [
            "priority=5,ip,actions=drop",
            "priority=6,tcp,actions=output:1",
            "priority=7,udp,actions=drop",
        ] {
            old.insert(parse_flow(f).unwrap(), 0);
        }
        // The next pipeline shares the rules it keeps with the last.
        let mut new = old.clone();
        new.insert(parse_flow("priority=6,tcp,actions=output:2").unwrap(), 0);
        new.insert(
            parse_flow("table=1,priority=8,arp,actions=drop").unwrap(),
            0,
        );
        let udp = parse_match("priority=7,udp", &|_: &str| None).unwrap();
        assert_eq!(new.remove(&udp, true), 1);
        let mut got: Vec<(UpdateEvent, u16, u8)> = changes(&old, &new, 0)
            .into_iter()
            .map(|u| (u.event, u.priority, u.reason as u8))
            .collect();
        got.sort_by_key(|x| x.1);
        assert_eq!(
            got,
            [
                (UpdateEvent::Modified, 6, 0),
                (UpdateEvent::Deleted, 7, OFPRR_DELETE),
                (UpdateEvent::Added, 8, 0),
            ]
        );
        assert!(changes(&new, &new, 0).is_empty());
    }
}
