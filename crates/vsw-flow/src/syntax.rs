//! The `ovs-ofctl` flow syntax: `priority=100,in_port=1,udp,tp_dst=53,actions=drop`.
//! What each match field and action means lives in `fields` and `action`; this reads
//! and prints whole flows through them.

use crate::match_key::MatchKey;

use crate::action::{self, Action, Encap};
use crate::fields::{self, FieldDef, Needs, FIELDS, SHORTHANDS};
use crate::matching::Match;
use crate::rule::{FlowSpec, Rule, DEFAULT_PRIORITY, MAX_TABLE};
use crate::values::{self, parse_uint, tokens};

pub use crate::error::{FlowSyntaxError, PortResolver};

/// Builds a match field by field, remembering what was given for the checks.
#[derive(Default)]
struct MatchBuilder {
    value: MatchKey,
    mask: MatchKey,
    /// The parts of the key fields were given for (a part given twice is refused).
    slots: Vec<&'static str>,
    given: Vec<&'static FieldDef>,
}

impl MatchBuilder {
    fn once(&mut self, slot: &'static str) -> Result<(), FlowSyntaxError> {
        if slot.is_empty() {
            return Ok(());
        }
        if self.slots.contains(&slot) {
            return Err(FlowSyntaxError::Duplicate(slot.to_string()));
        }
        self.slots.push(slot);
        Ok(())
    }

    fn shorthand(
        &mut self,
        name: &str,
        dl_type: u16,
        nw_proto: Option<u8>,
    ) -> Result<(), FlowSyntaxError> {
        fields::set_dl_type(name, dl_type, &mut self.value, &mut self.mask)?;
        if let Some(p) = nw_proto {
            self.once("nw_proto")?;
            self.value.nw_proto = p;
            self.mask.nw_proto = 0xff;
        }
        Ok(())
    }

    fn field(
        &mut self,
        name: &str,
        v: &str,
        ports: &dyn PortResolver,
    ) -> Result<(), FlowSyntaxError> {
        let def =
            fields::field(name).ok_or_else(|| FlowSyntaxError::UnknownField(name.to_string()))?;
        self.once(def.slot)?;
        def.parse(name, v, &mut self.value, &mut self.mask, ports)?;
        self.given.push(def);
        Ok(())
    }

    /// The match, once every field given has what it needs.
    fn finish(self) -> Result<Match, FlowSyntaxError> {
        for def in &self.given {
            if !def.needs.met(&self.value, &self.mask) {
                return Err(FlowSyntaxError::Prerequisite {
                    field: def.name,
                    needs: def.needs.describe(),
                });
            }
        }
        Ok(Match::new(self.value, self.mask))
    }
}

/// An action token's name and argument: `name:arg`, `name=arg` or `name(arg)`.
fn split_action(tok: &str) -> (&str, Option<&str>) {
    let paren = tok.find('(');
    let colon = tok.find([':', '=']);
    match (paren, colon) {
        (Some(p), c) if c.is_none_or(|c| p < c) => {
            let inner = &tok[p + 1..];
            (&tok[..p], Some(inner.strip_suffix(')').unwrap_or(inner)))
        }
        (_, Some(c)) => (&tok[..c], Some(&tok[c + 1..])),
        _ => (tok, None),
    }
}

fn split_actions(text: &str) -> (&str, Option<&str>) {
    match text.find("actions=") {
        Some(i) => (&text[..i], Some(&text[i + "actions=".len()..])),
        None => (text, None),
    }
}

/// What a flow's text gives besides the match.
#[derive(Default)]
struct FlowExtras {
    table: Option<u8>,
    priority: Option<u16>,
    idle_timeout: Option<u16>,
    hard_timeout: Option<u16>,
    /// (value, mask); a flow takes only a value (mask all ones).
    cookie: Option<(u64, u64)>,
    out_port: Option<u32>,
    out_group: Option<u32>,
    send_flow_rem: bool,
}

/// Parses the match part (with `priority` and the timeouts) of a flow.
fn parse_match_part(
    text: &str,
    ports: &dyn PortResolver,
) -> Result<(FlowExtras, Match), FlowSyntaxError> {
    let mut b = MatchBuilder::default();
    let mut extras = FlowExtras::default();
    for tok in tokens(text) {
        let (name, value) = match tok.split_once('=') {
            Some((n, v)) => (n, Some(v)),
            None => (tok, None),
        };
        match (name, value) {
            ("priority" | "idle_timeout" | "hard_timeout", Some(v)) => {
                let slot = match name {
                    "priority" => &mut extras.priority,
                    "idle_timeout" => &mut extras.idle_timeout,
                    _ => &mut extras.hard_timeout,
                };
                if slot.is_some() {
                    return Err(FlowSyntaxError::Duplicate(name.into()));
                }
                *slot = Some(parse_uint(name, v, 0xffff)? as u16);
            }
            ("table", Some(v)) => {
                if extras.table.is_some() {
                    return Err(FlowSyntaxError::Duplicate(name.into()));
                }
                extras.table = Some(parse_uint(name, v, u128::from(MAX_TABLE))? as u8);
            }
            ("cookie", Some(v)) => {
                if extras.cookie.is_some() {
                    return Err(FlowSyntaxError::Duplicate(name.into()));
                }
                let max = u128::from(u64::MAX);
                let (value, mask) = match v.split_once('/') {
                    Some((v, m)) => (parse_uint(name, v, max)?, parse_uint(name, m, max)?),
                    None => (parse_uint(name, v, max)?, max),
                };
                extras.cookie = Some((value as u64, mask as u64));
            }
            ("out_port", Some(v)) => {
                if extras.out_port.is_some() {
                    return Err(FlowSyntaxError::Duplicate(name.into()));
                }
                extras.out_port = Some(values::parse_port(name, v, ports)?);
            }
            ("out_group", Some(v)) => {
                if extras.out_group.is_some() {
                    return Err(FlowSyntaxError::Duplicate(name.into()));
                }
                extras.out_group = Some(parse_uint(name, v, u128::from(u32::MAX))? as u32);
            }
            (_, Some(v)) => b.field(name, v, ports)?,
            ("send_flow_rem", None) => extras.send_flow_rem = true,
            (_, None) => match SHORTHANDS.iter().find(|(n, _, _)| *n == name) {
                Some((_, dl_type, proto)) => b.shorthand(name, *dl_type, *proto)?,
                None => return Err(FlowSyntaxError::UnknownField(name.to_string())),
            },
        }
    }
    Ok((extras, b.finish()?))
}

/// A rule's actions, each rewrite checked against what `matcher` promises.
pub fn parse_actions(
    text: &str,
    ports: &dyn PortResolver,
    matcher: &Match,
) -> Result<Vec<Action>, FlowSyntaxError> {
    read_actions(text, ports, Some(matcher))
}

/// Actions without a match to check them against (a group's bucket): a rewrite of
/// a header a packet does not have is skipped when it is translated.
pub fn parse_actions_unchecked(
    text: &str,
    ports: &dyn PortResolver,
) -> Result<Vec<Action>, FlowSyntaxError> {
    read_actions(text, ports, None)
}

fn read_actions(
    text: &str,
    ports: &dyn PortResolver,
    matcher: Option<&Match>,
) -> Result<Vec<Action>, FlowSyntaxError> {
    let mut actions = read_list(text, ports, matcher)?;
    if actions.is_empty() {
        // As in OpenFlow: no actions means drop.
        actions.push(Action::Drop);
    }
    check_actions(&actions, matcher)?;
    Ok(actions)
}

/// The actions written in `text`, as they are (none is none).
fn read_list(
    text: &str,
    ports: &dyn PortResolver,
    matcher: Option<&Match>,
) -> Result<Vec<Action>, FlowSyntaxError> {
    let mut actions = Vec::new();
    for tok in tokens(text) {
        let (verb, arg) = split_action(tok);
        if verb.eq_ignore_ascii_case("write_actions") {
            let written = write_actions_block(arg.unwrap_or(""), ports, matcher)?;
            actions.push(Action::WriteActions(written.len() as u8));
            actions.extend(written);
            continue;
        }
        if verb.eq_ignore_ascii_case("clone") {
            let arg = arg.unwrap_or("");
            let inner = read_list(arg, ports, matcher)?;
            let n = u8::try_from(inner.len())
                .map_err(|_| values::bad("clone", arg, "at most 255 actions"))?;
            actions.push(Action::Clone(n));
            actions.extend(inner);
            continue;
        }
        let a = match action::action(verb) {
            Some(def) => def.build(&verb.to_ascii_lowercase(), arg, ports)?,
            // A bare port number is an output, as in ovs-ofctl.
            None if tok.starts_with(|c: char| c.is_ascii_digit()) => {
                Action::Output(values::parse_port("output", tok, ports)?)
            }
            None => return Err(FlowSyntaxError::UnknownAction(tok.to_string())),
        };
        actions.push(a);
    }
    Ok(actions)
}

/// Every action's headers, as the packet is where it runs: the match's, changed by
/// the pushes and pops of MPLS before it (a push makes an MPLS packet of the
/// ethertype it names, whose IP header no action reaches; a pop makes what it
/// names), each `clone(…)` or `write_actions(…)` block starting from the packet as
/// it is there and leaving it as it was — as Open vSwitch checks them:
/// `ip,actions=push_mpls:0x8847,set_mpls_label(5)` and
/// `mpls,actions=pop_mpls:0x0800,dec_ttl` hold, `ip,actions=pop_mpls:0x0800` and
/// `ip,actions=push_mpls:0x8847,mod_nw_dst:…` do not. A move needs its source's
/// header and its destination's.
fn check_needs(actions: &[Action], m: &Match) -> Result<(), FlowSyntaxError> {
    let (mut v, mut k) = (m.value().packet, m.mask().packet);
    // Where each open block ends, and the packet as it was before it.
    // The packet is NSH or MPLS without an Ethernet header (after an `encap`, or
    // a `decap()` of the Ethernet header in front of it, or as the match's
    // packet type (1,T) says).
    let mut bare = fields::packet_type_says_dl_type(m.value(), m.mask());
    let mut blocks: Vec<(usize, (u16, u16, u8, bool))> = Vec::new();
    for (i, a) in actions.iter().enumerate() {
        while let Some(&(_, (t, tm, pm, b))) = blocks.last().filter(|(end, _)| *end <= i) {
            (v.dl_type, k.dl_type, k.nw_proto, bare) = (t, tm, pm, b);
            blocks.pop();
        }
        let needs = match a {
            Action::Clone(n) | Action::WriteActions(n) => {
                let before = (v.dl_type, k.dl_type, k.nw_proto, bare);
                blocks.push((i + 1 + usize::from(*n), before));
                continue;
            }
            Action::PopMpls(_)
            | Action::SetMplsLabel(_)
            | Action::SetMplsTc(_)
            | Action::SetMplsTtl(_)
            | Action::DecMplsTtl => [Needs::Mpls; 2],
            _ => a.needs_both(),
        };
        if let Some(n) = needs.into_iter().find(|n| !n.met(&v, &k)) {
            return Err(FlowSyntaxError::ActionPrerequisite {
                action: a.def().name,
                needs: n.describe(),
            });
        }
        match a {
            // What the pushed header covers is no longer the packet's type.
            Action::PushMpls(t) | Action::PushPbb(t) => {
                (v.dl_type, k.dl_type) = (*t, u16::MAX);
                k.nw_proto = 0;
            }
            Action::PopMpls(t) => (v.dl_type, k.dl_type) = (*t, u16::MAX),
            // The customer's frame is of any type.
            Action::PopPbb => (v.dl_type, k.dl_type, k.nw_proto) = (0, 0, 0),
            // NSH or a label in front: its fields are the packet's now, Ethernet
            // or not.
            Action::Encap(e @ (Encap::Nsh { .. } | Encap::Mpls { .. })) => {
                let t = match e {
                    Encap::Mpls { ethertype } => *ethertype,
                    _ => vsw_packet::EtherType::NSH,
                };
                (v.dl_type, k.dl_type, k.nw_proto) = (t, u16::MAX, 0);
                bare = true;
            }
            Action::Encap(Encap::Ethernet) => bare = false,
            // An Ethernet header off NSH or MPLS leaves that; NSH or a label off
            // leaves what it carried, of any type.
            Action::Decap(_)
                if !bare
                    && k.dl_type != 0
                    && (v.dl_type == vsw_packet::EtherType::NSH
                        || vsw_packet::rewrite::is_mpls(v.dl_type)) =>
            {
                bare = true
            }
            Action::Decap(_) => {
                (v.dl_type, k.dl_type, k.nw_proto) = (0, 0, 0);
                bare = false;
            }
            _ => {}
        }
    }
    Ok(())
}

/// What an action list must be, however it was written (text or OpenFlow): every
/// rewrite of a header the packet has where it runs (`mod_nw_src` needs `ip`,
/// `mod_tp_dst` tcp, udp or sctp: [`check_needs`]; `None`: a group's bucket,
/// checked per packet instead), `drop` alone, at most one `goto_table` and last,
/// and in a `write_actions` block only what an action set holds.
pub fn check_actions(actions: &[Action], matcher: Option<&Match>) -> Result<(), FlowSyntaxError> {
    for a in actions {
        if let Action::Learn(l) = a {
            l.check(matcher)?;
        }
        // Read and printed, refused until the datapath carries them out (a rule
        // taken and then not done would be worse than a refusal).
        if let Action::Ct(ct) = a {
            // A helper's expected connection is not NATed as its parent (FTP's payload
            // would need its addresses rewritten too): not yet.
            let missing = (ct.alg != 0 && ct.nat.is_some()).then_some("alg with nat");
            if let Some(what) = missing {
                return Err(values::bad(
                    "ct",
                    &a.to_string(),
                    format!("ct's {what} is not in vsw's datapath yet"),
                ));
            }
            check_ct(ct, a, matcher)?;
        }
    }
    if let Some(m) = matcher {
        check_needs(actions, m)?;
    }
    // A clause of a conjunctive match does nothing else (the match it completes
    // decides), and is not itself a conjunction's answer.
    let conjunctive = actions
        .iter()
        .filter(|a| matches!(a, Action::Conjunction { .. }))
        .count();
    if conjunctive > 0 && conjunctive < actions.len() {
        return Err(values::bad(
            "conjunction",
            &format_actions(actions),
            "a rule with conjunction(…) has no other actions",
        ));
    }
    if conjunctive > 0 && matcher.is_some_and(|m| m.mask().pipeline.conj_id != 0) {
        return Err(values::bad(
            "conjunction",
            &format_actions(actions),
            "a rule matching conj_id is a conjunction's answer, not one of its clauses",
        ));
    }
    // What a clone holds runs as the actions around it do, on a copy: nothing
    // that ends the pipeline's walk or touches the action set.
    let mut rest = actions;
    while let Some((a, after)) = rest.split_first() {
        rest = after;
        let Action::Clone(n) = *a else {
            continue;
        };
        let block = &after[..usize::from(n).min(after.len())];
        if let Some(bad) = block.iter().find(|a| {
            matches!(
                a,
                Action::GotoTable(_)
                    | Action::WriteActions(_)
                    | Action::ClearActions
                    | Action::Drop
            )
        }) {
            return Err(values::bad(
                "clone",
                &bad.to_string(),
                "a clone holds actions a packet goes through, not instructions",
            ));
        }
    }
    let mut rest = actions;
    while let Some((a, after)) = rest.split_first() {
        rest = after;
        let Action::WriteActions(n) = *a else {
            continue;
        };
        let (block, after) = rest.split_at(usize::from(n).min(rest.len()));
        rest = after;
        if let Some(bad) = block.iter().find(|a| {
            matches!(
                a,
                Action::GotoTable(_)
                    | Action::Resubmit { .. }
                    | Action::WriteActions(_)
                    | Action::Clone(_)
                    | Action::ClearActions
                    | Action::Meter(_)
                    | Action::Drop
                    | Action::Load(_)
                    | Action::Move { .. }
                    | Action::StackPush(_)
                    | Action::StackPop(_)
                    | Action::Conjunction { .. }
                    | Action::Learn(_)
                    | Action::Exit
                    | Action::PopQueue
                    | Action::OutputReg { .. }
                    | Action::OutputTrunc { .. }
                    | Action::Bundle(_)
                    | Action::CheckPktLarger { .. }
                    | Action::Multipath(_)
                    | Action::Sample(_)
                    | Action::FinTimeout { .. }
                    | Action::Encap(_)
                    | Action::Decap(_)
                    | Action::DecNshTtl
                    | Action::Controller { pause: true, .. }
            )
        }) {
            return Err(values::bad(
                "write_actions",
                &bad.to_string(),
                "an action set holds outputs, groups, queues and header changes \
                 (vsw keeps no loads, moves, pushes or pops in one)",
            ));
        }
    }
    if actions.len() > 1 && actions.contains(&Action::Drop) {
        return Err(FlowSyntaxError::DropWithOthers);
    }
    let gotos = actions
        .iter()
        .filter(|a| matches!(a, Action::GotoTable(_)))
        .count();
    if gotos > 1 || (gotos == 1 && !matches!(actions.last(), Some(Action::GotoTable(_)))) {
        return Err(FlowSyntaxError::GotoNotLast);
    }
    Ok(())
}

/// What Open vSwitch refuses of a `ct(…)` however it was written (its text, or
/// NXAST_CT): a zone field not 16 bits wide, `force`, `exec` or a NAT range without
/// `commit`, and a NAT range of the other IP family than the match's.
fn check_ct(
    ct: &crate::ct_action::CtAction,
    a: &Action,
    matcher: Option<&Match>,
) -> Result<(), FlowSyntaxError> {
    let refuse = |why: &str| Err(values::bad("ct", &a.to_string(), why));
    if let crate::ct_action::CtZone::Field(sf) = ct.zone {
        if sf.n_bits != 16 {
            return refuse("a zone field is 16 bits");
        }
    }
    let ranged = ct.nat.is_some_and(|n| n.addrs.is_some());
    if !ct.commit && (ct.force || !ct.exec.is_empty() || ranged) {
        return refuse("force, exec and a NAT range need commit");
    }
    if let (Some(m), Some((min, _))) = (matcher, ct.nat.and_then(|n| n.addrs)) {
        let (v, k) = (m.value(), m.mask());
        if k.dl_type == u16::MAX {
            let want = if min.is_ipv4() {
                vsw_packet::EtherType::IPV4
            } else {
                vsw_packet::EtherType::IPV6
            };
            if v.dl_type != want {
                return refuse("the NAT range's family is not the match's");
            }
        }
    }
    Ok(())
}

/// What a whole flow must be, however it was written: its match's fields with what
/// they need, its actions as [`check_actions`] has them, and a `goto_table` only to
/// a later table.
pub fn check_flow(spec: &FlowSpec) -> Result<(), FlowSyntaxError> {
    fields::check_match(&spec.matcher)?;
    check_actions(&spec.actions, Some(&spec.matcher))?;
    if let Some(Action::GotoTable(to)) = spec.actions.last() {
        if *to <= spec.table {
            return Err(FlowSyntaxError::GotoBackwards {
                from: spec.table,
                to: *to,
            });
        }
    }
    Ok(())
}

/// Parses a whole flow as `ovs-ofctl add-flow` takes it.
pub fn parse_flow(text: &str, ports: &dyn PortResolver) -> Result<FlowSpec, FlowSyntaxError> {
    let (m, a) = split_actions(text);
    let a = a.ok_or(FlowSyntaxError::NoActions)?;
    let (extras, matcher) = parse_match_part(m, ports)?;
    let table = extras.table.unwrap_or(0);
    let actions = parse_actions(a, ports, &matcher)?;
    let spec = FlowSpec {
        table,
        priority: extras.priority.unwrap_or(DEFAULT_PRIORITY),
        actions,
        matcher,
        idle_timeout: extras.idle_timeout.unwrap_or(0),
        hard_timeout: extras.hard_timeout.unwrap_or(0),
        send_flow_rem: extras.send_flow_rem,
        cookie: match extras.cookie {
            _ if extras.out_port.is_some() => return Err(FlowSyntaxError::NotInFlow("out_port")),
            _ if extras.out_group.is_some() => return Err(FlowSyntaxError::NotInFlow("out_group")),
            None => 0,
            Some((v, u64::MAX)) => v,
            Some(_) => return Err(FlowSyntaxError::NotInFlow("a cookie mask")),
        },
        as_written: Default::default(),
    };
    check_flow(&spec)?;
    Ok(spec)
}

/// What `del-flows`, `mod-flows` and `dump-flows` select by: a match, and optionally
/// a table, a priority, a cookie under a mask and an output port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Selection {
    /// `None`: every table.
    pub table: Option<u8>,
    pub priority: Option<u16>,
    pub matcher: Match,
    /// (value, mask): rules whose cookie agrees with the value under the mask.
    pub cookie: Option<(u64, u64)>,
    /// Rules that output to this port.
    pub out_port: Option<u32>,
    /// Rules that hand packets to this group.
    pub out_group: Option<u32>,
}

impl Selection {
    /// Every rule of every table.
    pub fn all() -> Selection {
        Selection {
            table: None,
            priority: None,
            matcher: Match::any(),
            cookie: None,
            out_port: None,
            out_group: None,
        }
    }

    /// What the selection asks of a rule besides its match and priority.
    pub fn also(&self, r: &Rule) -> bool {
        let cookie_ok = self.cookie.is_none_or(|(v, m)| r.spec.cookie & m == v & m);
        let out_ok = self.out_port.is_none_or(|p| {
            r.spec.actions.iter().any(
                |a| matches!(*a, Action::Output(o) | Action::OutputTrunc { port: o, .. } if o == p),
            )
        });
        let group_ok = self.out_group.is_none_or(|g| {
            r.spec
                .actions
                .iter()
                .any(|a| matches!(*a, Action::Group(o) if o == g))
        });
        cookie_ok && out_ok && group_ok
    }
}

/// Parses a match (with optional table and priority) as `ovs-ofctl del-flows` takes
/// it.
pub fn parse_match(text: &str, ports: &dyn PortResolver) -> Result<Selection, FlowSyntaxError> {
    let (m, a) = split_actions(text);
    if a.is_some() {
        return Err(FlowSyntaxError::UnexpectedActions);
    }
    let (extras, matcher) = parse_match_part(m, ports)?;
    if extras.idle_timeout.is_some() {
        return Err(FlowSyntaxError::NotInMatch("idle_timeout"));
    }
    if extras.hard_timeout.is_some() {
        return Err(FlowSyntaxError::NotInMatch("hard_timeout"));
    }
    if extras.send_flow_rem {
        return Err(FlowSyntaxError::NotInMatch("send_flow_rem"));
    }
    Ok(Selection {
        table: extras.table,
        priority: extras.priority,
        matcher,
        cookie: extras.cookie,
        out_port: extras.out_port,
        out_group: extras.out_group,
    })
}

/// Prints a match in the canonical order `ovs-ofctl dump-flows` uses.
pub fn format_match(mt: &Match) -> String {
    let (v, m) = (mt.value(), mt.mask());
    let (leading, rest) = FIELDS.split_at(fields::LEADING_FIELDS);
    let shorthand = if fields::packet_type_says_dl_type(v, m) {
        None
    } else {
        fields::shorthand(v, m)
    };
    leading
        .iter()
        .filter_map(|f| f.format(v, m))
        .chain(shorthand)
        .chain(rest.iter().filter_map(|f| f.format(v, m)))
        .collect::<Vec<_>>()
        .join(",")
}

pub fn format_actions(actions: &[Action]) -> String {
    let mut out = Vec::new();
    let mut rest = actions;
    while let Some((a, after)) = rest.split_first() {
        if let Action::WriteActions(n) | Action::Clone(n) = *a {
            let n = usize::from(n).min(after.len());
            let (block, after) = after.split_at(n);
            out.push(format!("{}({})", a.def().name, format_actions(block)));
            rest = after;
            continue;
        }
        out.push(a.to_string());
        rest = after;
    }
    out.join(",")
}

/// The actions of `write_actions(…)`: what an action set holds (outputs, groups,
/// queues, header changes), each checked against the match as the rule's own.
fn write_actions_block(
    text: &str,
    ports: &dyn PortResolver,
    matcher: Option<&Match>,
) -> Result<Vec<Action>, FlowSyntaxError> {
    let written = read_actions(text, ports, matcher)?;
    if written.len() > usize::from(u8::MAX) {
        return Err(values::bad("write_actions", text, "at most 255 actions"));
    }
    Ok(written)
}

/// Prints a flow so that [`parse_flow`] gives it back.
pub fn format_flow(spec: &FlowSpec) -> String {
    let m = format_match(&spec.matcher);
    let sep = if m.is_empty() { "" } else { "," };
    let mut timeouts = String::new();
    if spec.cookie != 0 {
        timeouts += &format!("cookie={:#x},", spec.cookie);
    }
    if spec.table != 0 {
        timeouts += &format!("table={},", spec.table);
    }
    if spec.idle_timeout != 0 {
        timeouts += &format!("idle_timeout={},", spec.idle_timeout);
    }
    if spec.hard_timeout != 0 {
        timeouts += &format!("hard_timeout={},", spec.hard_timeout);
    }
    if spec.send_flow_rem {
        timeouts += "send_flow_rem,";
    }
    format!(
        "{timeouts}priority={}{sep}{m},actions={}",
        spec.priority,
        format_actions(&spec.actions)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::net::Ipv4Addr;
    use vsw_packet::ethernet::EtherType;
    use vsw_packet::key::{IPPROTO_TCP, IPPROTO_UDP};

    fn names(n: &str) -> Option<u32> {
        match n {
            "sw0" => Some(1),
            "sw1" => Some(2),
            _ => None,
        }
    }

    fn parse(s: &str) -> Result<FlowSpec, FlowSyntaxError> {
        parse_flow(s, &names)
    }

    #[test]
    fn the_issue_example() {
        let f = parse("priority=100,in_port=1,udp,tp_dst=53,actions=drop").unwrap();
        assert_eq!(f.priority, 100);
        assert_eq!(f.actions, vec![Action::Drop]);
        let (v, m) = (f.matcher.value(), f.matcher.mask());
        assert_eq!((v.in_port, m.in_port), (1, u32::MAX));
        assert_eq!(v.dl_type, EtherType::IPV4);
        assert_eq!(v.nw_proto, IPPROTO_UDP);
        assert_eq!((v.tp_dst, m.tp_dst), (53, 0xffff));
        assert_eq!(
            format_flow(&f),
            "priority=100,udp,in_port=1,tp_dst=53,actions=drop"
        );
    }

    #[test]
    fn ports_by_name() {
        let f = parse("in_port=sw0,actions=output:sw1").unwrap();
        assert_eq!(f.matcher.value().in_port, 1);
        assert_eq!(f.actions, vec![Action::Output(2)]);
        assert_eq!(f.priority, DEFAULT_PRIORITY);
        assert_eq!(
            parse("in_port=nope,actions=drop"),
            Err(FlowSyntaxError::UnknownPort("nope".into()))
        );
    }

    #[test]
    fn prefixes_and_masks() {
        let f = parse("ip,nw_src=198.18.0.0/15,nw_dst=198.19.1.0/255.255.255.0,actions=normal")
            .unwrap();
        assert_eq!({ f.matcher.mask().nw_src }, 0xfffe_0000);
        assert_eq!({ f.matcher.mask().nw_dst }, 0xffff_ff00);
        assert_eq!(
            format_flow(&f),
            "priority=32768,ip,nw_src=198.18.0.0/15,nw_dst=198.19.1.0/24,actions=NORMAL"
        );
        let f = parse("dl_dst=01:00:00:00:00:00/01:00:00:00:00:00,actions=flood").unwrap();
        assert_eq!(
            format_flow(&f),
            "priority=32768,dl_dst=01:00:00:00:00:00/01:00:00:00:00:00,actions=FLOOD"
        );
    }

    #[test]
    fn errors_name_field_and_value() {
        let e = parse("priority=1,nw_src=300.1.1.1,ip,actions=drop").unwrap_err();
        assert_eq!(
            e.to_string(),
            "bad value '300.1.1.1' for nw_src: not an IPv4 address"
        );
        let e = parse("tp_dst=80,actions=drop").unwrap_err();
        assert!(
            e.to_string().contains("tp_dst needs a transport protocol"),
            "{e}"
        );
        assert_eq!(
            parse("frob=1,actions=drop"),
            Err(FlowSyntaxError::UnknownField("frob".into()))
        );
        assert_eq!(parse("ip"), Err(FlowSyntaxError::NoActions));
        assert_eq!(
            parse("actions=explode"),
            Err(FlowSyntaxError::UnknownAction("explode".into()))
        );
        assert_eq!(
            parse("actions=drop,output:1"),
            Err(FlowSyntaxError::DropWithOthers)
        );
        assert_eq!(
            parse("ip,ip,actions=drop").ok().map(|f| f.priority),
            Some(DEFAULT_PRIORITY)
        );
        assert!(parse("udp,tcp,actions=drop").is_err());
        assert!(matches!(
            parse("priority=70000,actions=drop"),
            Err(FlowSyntaxError::BadValue { .. })
        ));
        assert!(matches!(
            parse("dl_vlan=5000,actions=drop"),
            Err(FlowSyntaxError::BadValue { .. })
        ));
        assert!(matches!(
            parse("in_port=1,in_port=2,actions=drop"),
            Err(FlowSyntaxError::Duplicate(_))
        ));
    }

    #[test]
    fn shorthands_and_vlan() {
        for (text, canon) in [
            ("arp,actions=normal", "priority=32768,arp,actions=NORMAL"),
            (
                "icmp,icmp_type=8,actions=drop",
                "priority=32768,icmp,icmp_type=8,actions=drop",
            ),
            ("ipv6,actions=drop", "priority=32768,ipv6,actions=drop"),
            (
                "tcp6,tp_src=22,actions=drop",
                "priority=32768,tcp6,tp_src=22,actions=drop",
            ),
            (
                "dl_vlan=10,actions=1,2",
                "priority=32768,dl_vlan=10,actions=output:1,output:2",
            ),
            (
                "dl_vlan=0xffff,actions=drop",
                "priority=32768,dl_vlan=0xffff,actions=drop",
            ),
            (
                "dl_type=0x88cc,actions=drop",
                "priority=32768,dl_type=0x88cc,actions=drop",
            ),
            (
                "ip,nw_proto=47,actions=drop",
                "priority=32768,ip,nw_proto=47,actions=drop",
            ),
            (
                "udp,tp_dst=0x1000/0xf000 actions=drop",
                "priority=32768,udp,tp_dst=0x1000/0xf000,actions=drop",
            ),
            (
                "ipv6,ipv6_dst=2001:db8::/32,actions=drop",
                "priority=32768,ipv6,ipv6_dst=2001:db8::/32,actions=drop",
            ),
        ] {
            let f = parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(format_flow(&f), canon, "{text}");
        }
    }

    #[test]
    fn every_field_of_the_key_round_trips() {
        for (text, canon) in [
            (
                "tcp,nw_tos=184,nw_ecn=1,nw_ttl=64,tcp_flags=+syn-ack,actions=drop",
                "priority=32768,tcp,nw_tos=184,nw_ecn=1,nw_ttl=64,tcp_flags=0x002/0x012,actions=drop",
            ),
            (
                "ip,ip_dscp=46,ip_frag=later,actions=drop",
                "priority=32768,ip,nw_tos=184,ip_frag=later,actions=drop",
            ),
            (
                "ip,ip_frag=first,actions=drop",
                "priority=32768,ip,ip_frag=first,actions=drop",
            ),
            (
                "ipv6,ipv6_label=0x12345,actions=drop",
                "priority=32768,ipv6,ipv6_label=0x12345,actions=drop",
            ),
            (
                "arp,arp_op=2,arp_sha=02:00:00:00:00:01,arp_tha=02:00:00:00:00:02,actions=drop",
                "priority=32768,arp,nw_proto=2,arp_sha=02:00:00:00:00:01,arp_tha=02:00:00:00:00:02,actions=drop",
            ),
            (
                "icmp6,icmp_type=135,nd_target=2001:db8::2,nd_sll=02:00:00:00:00:01,actions=drop",
                "priority=32768,icmp6,icmp_type=135,nd_target=2001:db8::2,nd_sll=02:00:00:00:00:01,actions=drop",
            ),
            (
                "dl_vlan=10,dl_vlan_pcp=5,inner_vlan_tci=0x1014,actions=drop",
                "priority=32768,dl_vlan=10,dl_vlan_pcp=5,inner_vlan_tci=0x1014,actions=drop",
            ),
            (
                "dl_vlan_pcp=3,actions=drop",
                "priority=32768,dl_vlan_pcp=3,actions=drop",
            ),
            (
                "idle_timeout=10,hard_timeout=60,in_port=1,actions=drop",
                "idle_timeout=10,hard_timeout=60,priority=32768,in_port=1,actions=drop",
            ),
            (
                "cookie=42,priority=0,actions=controller",
                "cookie=0x2a,priority=0,actions=CONTROLLER",
            ),
            (
                "in_port=1,actions=output:4,clear_actions,write_actions(mod_dl_dst:02:00:00:00:00:09,output:2),goto_table:1",
                "priority=32768,in_port=1,actions=output:4,clear_actions,write_actions(mod_dl_dst:02:00:00:00:00:09,output:2),goto_table:1",
            ),
            (
                "send_flow_rem,idle_timeout=5,in_port=1,actions=drop",
                "idle_timeout=5,send_flow_rem,priority=32768,in_port=1,actions=drop",
            ),
            (
                "priority=1,actions=controller(max_len=128),CONTROLLER:65535",
                "priority=1,actions=CONTROLLER:128,CONTROLLER",
            ),
            (
                "ip,actions=clone(mod_dl_dst:02:00:00:00:00:09,clone(dec_ttl,output:3),output:2),clone(),output:4",
                "priority=32768,ip,actions=clone(mod_dl_dst:02:00:00:00:00:09,clone(dec_ttl,output:3),output:2),clone(),output:4",
            ),
        ] {
            let f = parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(format_flow(&f), canon, "{text}");
            assert_eq!(parse(&format_flow(&f)).unwrap(), f, "{text}");
        }
    }

    #[test]
    fn fin_timeout_and_truncation_read_and_print_as_open_vswitch() {
        for (text, canon) in [
            (
                "tcp,actions=fin_timeout(idle_timeout=10, hard_timeout=20),output:1",
                "priority=32768,tcp,actions=fin_timeout(idle_timeout=10,hard_timeout=20),output:1",
            ),
            (
                "tcp,actions=fin_timeout(hard_timeout=5)",
                "priority=32768,tcp,actions=fin_timeout(hard_timeout=5)",
            ),
            (
                "tcp6,actions=fin_timeout()",
                "priority=32768,tcp6,actions=fin_timeout()",
            ),
        ] {
            let f = parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(format_flow(&f), canon, "{text}");
            assert_eq!(parse(&format_flow(&f)).unwrap(), f, "{text}");
        }
        // Truncation: a port and a length of at least an Ethernet header.
        let cut = parse("actions=output(port=2,max_len=100),output:3").unwrap();
        assert_eq!(
            format_flow(&cut),
            "priority=32768,actions=output(port=2,max_len=100),output:3"
        );
        // The keys in either order, spaces between, as Open vSwitch reads them.
        let again = parse("actions=output(max_len=100, port=2),output:3").unwrap();
        assert_eq!(again, cut);
        for bad in [
            "actions=output(port=2,max_len=13)",
            "actions=output(port=65533,max_len=100)",
            "actions=output(port=2,max=100)",
            "actions=write_actions(output(port=2,max_len=100))",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        for (text, needle) in [
            (
                "udp,actions=fin_timeout(idle_timeout=1)",
                "fin_timeout needs tcp",
            ),
            ("tcp,actions=fin_timeout(idle=1)", "idle_timeout=SECONDS"),
            ("tcp,actions=fin_timeout(idle_timeout=65536)", "larger than"),
            (
                "tcp,actions=write_actions(fin_timeout(idle_timeout=1))",
                "write_actions",
            ),
        ] {
            let e = parse(text).unwrap_err().to_string();
            assert!(e.contains(needle), "{text}: {e}");
        }
    }

    #[test]
    fn mpls_actions_read_print_and_check_the_packet_they_run_on() {
        for (text, canon) in [
            (
                "ip,actions=push_mpls:0x8847,set_mpls_label(10),set_mpls_tc:3,set_mpls_ttl(9),dec_mpls_ttl,output:2",
                "priority=32768,ip,actions=push_mpls:0x8847,set_mpls_label(10),set_mpls_tc(3),set_mpls_ttl(9),dec_mpls_ttl,output:2",
            ),
            (
                "mpls,mpls_label=10,actions=set_field:20->mpls_label,pop_mpls:0x0800,output:1",
                "priority=32768,mpls,mpls_label=10,actions=set_mpls_label(20),pop_mpls:0x0800,output:1",
            ),
            (
                "mpls,actions=pop_mpls:0x0800,dec_ttl,clone(push_mpls:0x8847,set_mpls_ttl(1)),mod_nw_dst:198.18.0.1,output:1",
                "priority=32768,mpls,actions=pop_mpls:0x0800,dec_ttl,clone(push_mpls:0x8847,set_mpls_ttl(1)),mod_nw_dst:198.18.0.1,output:1",
            ),
            (
                "ip,actions=check_pkt_larger(1500)->NXM_NX_REG9[1],resubmit(,2)",
                "priority=32768,ip,actions=check_pkt_larger(1500)->NXM_NX_REG9[1],resubmit(,2)",
            ),
            (
                "rarp,arp_op=3,arp_sha=02:00:00:00:00:01,actions=set_field:4->arp_op,output:1",
                "priority=32768,rarp,nw_proto=3,arp_sha=02:00:00:00:00:01,actions=set_field:4->arp_op,output:1",
            ),
            (
                "ip,actions=dec_ttl(1, 2),dec_ttl,output:1",
                "priority=32768,ip,actions=dec_ttl(1,2),dec_ttl,output:1",
            ),
            (
                "mplsm,actions=push_mpls:0x8848,copy_ttl_in,copy_ttl_out,set_field:7->mpls_tc",
                "priority=32768,mplsm,actions=push_mpls:0x8848,copy_ttl_in,copy_ttl_out,set_mpls_tc(7)",
            ),
        ] {
            let f = parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(format_flow(&f), canon, "{text}");
            assert_eq!(parse(&format_flow(&f)).unwrap(), f, "{text}");
        }
        for (text, needle) in [
            ("ip,actions=pop_mpls:0x0800", "pop_mpls needs mpls"),
            ("actions=set_mpls_label(1)", "set_mpls_label needs mpls"),
            (
                "mpls,actions=pop_mpls:0x0800,dec_mpls_ttl",
                "dec_mpls_ttl needs mpls",
            ),
            ("ip,actions=push_mpls:0x0800", "0x8847 or 0x8848"),
            (
                "ip,actions=write_actions(check_pkt_larger(9)->NXM_NX_REG0[0])",
                "write_actions",
            ),
            (
                "actions=check_pkt_larger(1500)->NXM_NX_REG0[0..1]",
                "one bit",
            ),
            (
                "actions=check_pkt_larger(1500)",
                "check_pkt_larger(LEN)->DST",
            ),
            ("arp,actions=dec_ttl(1)", "dec_ttl needs ip"),
            (
                "ip,actions=push_mpls:0x8847,mod_nw_dst:198.18.0.1",
                "mod_nw_dst needs ip",
            ),
            (
                "mpls,actions=clone(pop_mpls:0x0800),dec_ttl",
                "dec_ttl needs ip",
            ),
            ("mpls,actions=set_mpls_label(1048576)", "larger than"),
            ("mpls,actions=set_field:1->mpls_bos", "vsw can write"),
        ] {
            let e = parse(text).expect_err(text).to_string();
            assert!(e.contains(needle), "{text}: {e}");
        }
    }

    #[test]
    fn nsh_actions_read_print_and_check_the_packet_they_run_on() {
        for (text, canon) in [
            (
                "ip,actions=encap(nsh(md_type=1)),set_field:0x1234->nsh_spi,set_field:0x11223344->nsh_c1,encap(ethernet),set_field:11:22:33:44:55:66->eth_dst,output:2",
                "priority=32768,ip,actions=encap(nsh(md_type=1)),set_field:0x1234->nsh_spi,set_field:0x11223344->nsh_c1,encap(ethernet),mod_dl_dst:11:22:33:44:55:66,output:2",
            ),
            (
                "in_port=1,actions=encap(nsh),encap(ethernet),output:2",
                "priority=32768,in_port=1,actions=encap(nsh),encap(ethernet),output:2",
            ),
            (
                "in_port=1,actions=encap(nsh(md_type=2,tlv(0x1000,10,0x),tlv(0x2,3,0x0001))),encap(ethernet),output:2",
                "priority=32768,in_port=1,actions=encap(nsh(md_type=2,tlv(0x1000,10,0x),tlv(0x0002,3,0x0001))),encap(ethernet),output:2",
            ),
            (
                "in_port=1,actions=encap(nsh(md_type=2,tlv(0x1000,10,0x12345678),tlv(0x2000,20,0xfedcba9876543210))),encap(ethernet),output:2",
                "priority=32768,in_port=1,actions=encap(nsh(md_type=2,tlv(0x1000,10,0x12345678),tlv(0x2000,20,0xfedcba9876543210))),encap(ethernet),output:2",
            ),
            (
                "dl_type=0x894f,nsh_spi=0x1234,nsh_si=255,actions=dec_nsh_ttl,set_field:254->nsh_si,decap(),decap(),output:3",
                "priority=32768,dl_type=0x894f,nsh_spi=0x1234,nsh_si=255,actions=dec_nsh_ttl,set_field:254->nsh_si,decap(),decap(),output:3",
            ),
            (
                "dl_type=0x894f,actions=decap(packet_type(ns=1,type=0x894f)),decap(packet_type(ns=0,type=0)),output:3",
                "priority=32768,dl_type=0x894f,actions=decap(packet_type(ns=1,type=0x894f)),decap(packet_type(ns=0,type=0)),output:3",
            ),
            (
                "ip,actions=encap(mpls),set_field:100->mpls_label,dec_mpls_ttl,encap(ethernet),output:2",
                "priority=32768,ip,actions=encap(mpls),set_mpls_label(100),dec_mpls_ttl,encap(ethernet),output:2",
            ),
            (
                "mplsm,actions=decap(),decap(packet_type(ns=0,type=0)),encap(mpls_mc),encap(ethernet),output:2",
                "priority=32768,mplsm,actions=decap(),decap(packet_type(ns=0,type=0)),encap(mpls_mc),encap(ethernet),output:2",
            ),
            // A packet type (1,T) says the Ethernet type: not printed again.
            (
                "table=1,packet_type=(1,0x894f),nsh_spi=0x5,actions=decap(),output:3",
                "table=1,priority=32768,packet_type=(1,0x894f),nsh_spi=0x5,actions=decap(),output:3",
            ),
            (
                "packet_type=(0,0),ip,actions=output:3",
                "priority=32768,packet_type=(0,0),ip,actions=output:3",
            ),
        ] {
            let f = parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(format_flow(&f), canon, "{text}");
            assert_eq!(parse(&format_flow(&f)).unwrap(), f, "{text}");
        }
        for (text, needle) in [
            ("ip,actions=dec_nsh_ttl", "dec_nsh_ttl needs dl_type=0x894f"),
            ("ip,actions=set_field:1->nsh_si", "needs dl_type=0x894f"),
            ("ip,actions=encap(nsh(md_type=3))", "invalid md_type"),
            ("ip,actions=encap(gre)", "Encap hdr not supported"),
            (
                "ip,actions=encap(nsh(md_type=2,tlv(1000,10,0x12345678)))",
                "class is written in hex",
            ),
            (
                "ip,actions=encap(nsh(md_type=2,tlv(0x1000,10,0x123)))",
                "whole bytes of hex",
            ),
            // A character of two bytes, and a sign, are no hex digits.
            (
                "ip,actions=encap(nsh(md_type=2,tlv(0x1,2,0x1\u{e9}1)))",
                "whole bytes of hex",
            ),
            (
                "ip,actions=encap(nsh(md_type=2,tlv(0x1,2,0x+f+f)))",
                "whole bytes of hex",
            ),
            (
                "ip,actions=encap(nsh(md_type=2,tlv(0x1000,10)))",
                "Invalid NSH TLV header",
            ),
            (
                "ip,actions=decap(packet_type(ns=9,type=0))",
                "Unsupported ns value",
            ),
            ("ip,actions=decap(foo)", "Invalid decap argument"),
            ("packet_type=1,actions=drop", "written (NS,TYPE)"),
            (
                "packet_type=(1,0x800),ipv6,actions=drop",
                "conflicts with an earlier dl_type",
            ),
            // After both decaps, what the NSH header carried is of any type.
            (
                "dl_type=0x894f,actions=decap(),decap(),set_field:1->nsh_si",
                "needs dl_type=0x894f",
            ),
            (
                "ip,actions=encap(nsh),mod_nw_dst:198.18.0.1",
                "mod_nw_dst needs ip",
            ),
        ] {
            let e = parse(text).expect_err(text).to_string();
            assert!(e.contains(needle), "{text}: {e}");
        }
    }

    #[test]
    fn pbb_actions_and_fields_read_print_and_check_the_packet_they_run_on() {
        for (text, canon) in [
            (
                "ip,actions=push_pbb:0x88e7,push_pbb:0x88e7,output:2",
                "priority=32768,ip,actions=push_pbb:0x88e7,push_pbb:0x88e7,output:2",
            ),
            (
                "dl_type=0x88e7,pbb_isid=100,actions=pop_pbb,goto_table:1",
                "priority=32768,dl_type=0x88e7,pbb_isid=0x000064,actions=pop_pbb,goto_table:1",
            ),
            (
                "dl_type=0x88e7,pbb_isid=0x60/0xf0,actions=pop_pbb,output:1",
                "priority=32768,dl_type=0x88e7,pbb_isid=0x000060/0x0000f0,actions=pop_pbb,output:1",
            ),
            (
                "ipv6,ipv6_exthdr=68,actions=output:1",
                "priority=32768,ipv6,ipv6_exthdr=0x044,actions=output:1",
            ),
            (
                "ipv6,ipv6_exthdr=0x40/0x1f0,actions=output:1",
                "priority=32768,ipv6,ipv6_exthdr=0x040/0x1f0,actions=output:1",
            ),
        ] {
            let f = parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(format_flow(&f), canon, "{text}");
            assert_eq!(parse(&format_flow(&f)).unwrap(), f, "{text}");
        }
        for (text, needle) in [
            ("ip,actions=pop_pbb", "pop_pbb needs dl_type=0x88e7"),
            ("ip,actions=push_pbb:0x8100", "0x88e7"),
            (
                "ip,pbb_isid=1,actions=drop",
                "pbb_isid needs dl_type=0x88e7",
            ),
            ("ip,ipv6_exthdr=1,actions=drop", "ipv6_exthdr needs ipv6"),
            ("ipv6,ipv6_exthdr=0x200,actions=drop", "larger than"),
            (
                "dl_type=0x88e7,pbb_isid=0x1000000,actions=drop",
                "larger than",
            ),
            // What the customer's frame is, is not known after the pop.
            (
                "dl_type=0x88e7,actions=pop_pbb,mod_nw_dst:198.18.0.1",
                "mod_nw_dst needs ip",
            ),
            (
                "ip,actions=push_pbb:0x88e7,mod_nw_dst:198.18.0.1",
                "mod_nw_dst needs ip",
            ),
        ] {
            let e = parse(text).expect_err(text).to_string();
            assert!(e.contains(needle), "{text}: {e}");
        }
    }

    #[test]
    fn field_prerequisites_and_bad_values() {
        for (text, needle) in [
            ("nw_ttl=3,actions=drop", "nw_ttl needs ip or ipv6"),
            ("udp,tcp_flags=+syn,actions=drop", "tcp_flags needs tcp"),
            ("ip,ipv6_label=1,actions=drop", "ipv6_label needs ipv6"),
            ("icmp6,nd_target=::1,actions=drop", "nd_target needs icmp6"),
            ("ip,arp_sha=02:00:00:00:00:01,actions=drop", "needs arp"),
            (
                "tcp,tcp_flags=+syn+bogus,actions=drop",
                "unknown TCP flag 'bogus'",
            ),
            ("ip,nw_tos=3,actions=drop", "ECN"),
            ("ip,ip_frag=maybe,actions=drop", "one of no, yes"),
            ("dl_vlan_pcp=8,actions=drop", "larger than 7"),
        ] {
            let e = parse(text).expect_err(text).to_string();
            assert!(e.contains(needle), "{text}: {e}");
        }
    }

    #[test]
    fn set_fields_check_their_prerequisites_and_round_trip() {
        for (text, needle) in [
            ("ip,actions=set_field:2001:db8::1->ipv6_src", "needs ipv6"),
            ("ipv6,actions=set_field:1->arp_op", "needs arp"),
            ("icmp6,actions=set_field:0->icmp_type", "needs icmp"),
            ("icmp,actions=set_field:0->icmpv6_code", "needs icmp6"),
            (
                "icmp6,actions=set_field:::1->nd_target",
                "needs icmp6 with icmp_type=135",
            ),
            ("arp,actions=mod_nw_ttl:3", "needs ip or ipv6"),
            (
                "ipv6,actions=set_field:1->mpls_label",
                "set_mpls_label needs mpls",
            ),
            (
                "ipv6,actions=set_field:1->pbb_isid",
                "set_field needs dl_type=0x88e7",
            ),
            (
                "dl_type=0x88e7,actions=set_field:0x1000000->pbb_isid",
                "larger than",
            ),
            ("ipv6,actions=set_field:1", "VALUE->FIELD"),
            ("ipv6,actions=set_field:0x100000->ipv6_label", "larger than"),
            ("ip,actions=mod_nw_ecn:4", "larger than 3"),
        ] {
            let e = parse(text).expect_err(text).to_string();
            assert!(e.contains(needle), "{text}: {e}");
        }
        for (text, printed) in [
            (
                "ipv6,actions=set_field:2001:db8::1->ipv6_src,set_field:0x12345->ipv6_label,mod_nw_ecn:1,mod_nw_ttl:9,output:1",
                "ipv6,actions=set_field:2001:db8::1->ipv6_src,set_field:0x12345->ipv6_label,mod_nw_ecn:1,mod_nw_ttl:9,output:1",
            ),
            (
                "arp,actions=set_field:2->arp_op,set_field:198.18.0.1->arp_spa,set_field:02:00:00:00:00:01->arp_tha",
                "arp,actions=set_field:2->arp_op,set_field:198.18.0.1->arp_spa,set_field:02:00:00:00:00:01->arp_tha",
            ),
            (
                "icmp6,icmp_type=136,actions=set_field:::2->nd_target,set_field:02:00:00:00:00:02->nd_tll,set_field:1->icmpv6_code",
                "icmp6,icmp_type=136,actions=set_field:::2->nd_target,set_field:02:00:00:00:00:02->nd_tll,set_field:1->icmpv6_code",
            ),
            // The classic fields become their own actions.
            (
                "tcp,actions=set_field:02:00:00:00:00:09->eth_src,set_field:198.18.0.7->ipv4_dst,set_field:80->tcp_dst,set_field:10->ip_dscp,copy_ttl_in,set_field:100->tun_id",
                "tcp,actions=mod_dl_src:02:00:00:00:00:09,mod_nw_dst:198.18.0.7,mod_tp_dst:80,mod_nw_tos:40,copy_ttl_in,set_tunnel:0x64",
            ),
        ] {
            let f = parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert!(format_flow(&f).ends_with(printed), "{}", format_flow(&f));
            assert_eq!(parse(&format_flow(&f)).unwrap(), f);
        }
    }

    #[test]
    fn every_action_round_trips() {
        let text = "tcp,actions=mod_dl_src:02:00:00:00:00:0a,mod_dl_dst:02:00:00:00:00:0b,push_vlan:0x8100,mod_vlan_vid:10,mod_vlan_pcp:3,strip_vlan,mod_nw_src:198.18.0.9,mod_nw_dst:198.18.0.10,mod_nw_tos:32,mod_tp_src:1000,mod_tp_dst:2000,dec_ttl,output:1,in_port,IN_PORT";
        let f = parse(text).unwrap();
        assert_eq!(f.actions.len(), 15);
        assert_eq!(f.actions[14], Action::InPort);
        let printed = format_flow(&f);
        assert!(
            printed.ends_with("mod_tp_dst:2000,dec_ttl,output:1,IN_PORT,IN_PORT"),
            "{printed}"
        );
        assert_eq!(parse(&printed).unwrap(), f);
    }

    #[test]
    fn rewrites_need_the_headers_they_rewrite() {
        for (text, needle) in [
            ("actions=mod_nw_src:1.2.3.4,output:1", "mod_nw_src needs ip"),
            (
                "ip,actions=mod_tp_dst:80,output:1",
                "mod_tp_dst needs tcp, udp or sctp",
            ),
            ("arp,actions=dec_ttl,output:1", "dec_ttl needs ip or ipv6"),
            ("ipv6,actions=mod_nw_dst:1.2.3.4", "mod_nw_dst needs ip"),
            ("actions=push_vlan:0x0800", "0x8100 or 0x88a8"),
            ("actions=mod_vlan_vid:4096", "larger than 4095"),
            ("ip,actions=mod_nw_tos:33", "ECN bits clear"),
        ] {
            let e = parse(text).expect_err(text).to_string();
            assert!(e.contains(needle), "{text}: {e}");
        }
        assert!(parse("udp6,actions=mod_tp_dst:80,dec_ttl,output:1").is_ok());
        assert_eq!(
            parse_match("idle_timeout=5,in_port=1", &names),
            Err(FlowSyntaxError::NotInMatch("idle_timeout"))
        );
    }

    #[test]
    fn tables_goto_and_resubmit() {
        let f = parse_flow(
            "table=2,priority=5,tcp,actions=resubmit(,7),resubmit(sw0,3),resubmit:sw1,goto_table:9",
            &names,
        )
        .unwrap();
        assert_eq!(f.table, 2);
        assert_eq!(
            f.actions,
            vec![
                Action::Resubmit {
                    port: None,
                    table: Some(7)
                },
                Action::Resubmit {
                    port: Some(1),
                    table: Some(3)
                },
                Action::Resubmit {
                    port: Some(2),
                    table: None
                },
                Action::GotoTable(9),
            ]
        );
        let text = format_flow(&f);
        assert_eq!(
            text,
            "table=2,priority=5,tcp,actions=resubmit(,7),resubmit(1,3),resubmit(2,),goto_table:9"
        );
        assert_eq!(parse_flow(&text, &names).unwrap(), f, "printed as read");
        for (text, want) in [
            (
                "table=3,actions=goto_table:3",
                FlowSyntaxError::GotoBackwards { from: 3, to: 3 },
            ),
            (
                "table=3,actions=goto_table:1",
                FlowSyntaxError::GotoBackwards { from: 3, to: 1 },
            ),
            (
                "actions=goto_table:1,output:2",
                FlowSyntaxError::GotoNotLast,
            ),
            (
                "actions=goto_table:1,goto_table:2",
                FlowSyntaxError::GotoNotLast,
            ),
        ] {
            assert_eq!(parse_flow(text, &names), Err(want), "{text}");
        }
        for (text, needle) in [
            ("table=255,actions=drop", "table"),
            ("actions=goto_table:255", "goto_table"),
            ("actions=resubmit(,)", "resubmit"),
            ("actions=resubmit(,300)", "resubmit"),
            ("actions=resubmit(nosuch,1)", "nosuch"),
            ("table=1,table=2,actions=drop", "table"),
            // A clone holds actions, not instructions, and is not an action set's.
            ("actions=clone(output:1,goto_table:2)", "clone"),
            ("actions=clone(write_actions(output:1))", "clone"),
            ("actions=write_actions(clone(output:1))", "write_actions"),
            ("actions=clone(mod_tp_dst:80)", "mod_tp_dst"),
        ] {
            let e = parse_flow(text, &names).expect_err(text).to_string();
            assert!(e.contains(needle), "{text}: {e}");
        }
    }

    #[test]
    fn match_for_del_flows() {
        let sel = parse_match("in_port=1", &names).unwrap();
        assert_eq!((sel.table, sel.priority), (None, None));
        assert_eq!(sel.matcher.value().in_port, 1);
        let sel = parse_match("table=3,priority=7", &names).unwrap();
        assert_eq!((sel.table, sel.priority), (Some(3), Some(7)));
        assert_eq!(
            parse_match("in_port=1,actions=drop", &names),
            Err(FlowSyntaxError::UnexpectedActions)
        );
    }

    fn arb_spec() -> impl Strategy<Value = FlowSpec> {
        (
            any::<u16>(),
            proptest::option::of(1u32..100),
            proptest::option::of(0u16..4096),
            prop_oneof![
                Just(None),
                Just(Some((EtherType::IPV4, None))),
                Just(Some((EtherType::IPV4, Some(IPPROTO_UDP)))),
                Just(Some((EtherType::IPV6, Some(IPPROTO_TCP)))),
                Just(Some((EtherType::ARP, None)))
            ],
            0u32..=32,
            any::<u32>(),
            proptest::option::of(any::<u16>()),
            proptest::collection::vec(
                prop_oneof![
                    (1u32..10).prop_map(Action::Output),
                    Just(Action::Normal),
                    Just(Action::Flood),
                    (0u8..10).prop_map(|t| Action::Resubmit {
                        port: None,
                        table: Some(t)
                    })
                ],
                0..3,
            ),
        )
            .prop_map(|(priority, port, vlan, l3, plen, addr, tp, actions)| {
                let mut text = format!("priority={priority}");
                if let Some(p) = port {
                    text += &format!(",in_port={p}");
                }
                if let Some(v) = vlan {
                    text += &format!(",dl_vlan={v}");
                }
                match l3 {
                    Some((EtherType::IPV4, None)) => {
                        text += &format!(",ip,nw_dst={}/{plen}", Ipv4Addr::from(addr))
                    }
                    Some((EtherType::IPV4, Some(_))) => {
                        text += ",udp";
                        if let Some(t) = tp {
                            text += &format!(",tp_dst={t}");
                        }
                    }
                    Some((EtherType::IPV6, _)) => {
                        text += &format!(",tcp6,ipv6_src=2001:db8::{:x}", addr & 0xffff)
                    }
                    Some(_) => text += &format!(",arp,nw_src={}", Ipv4Addr::from(addr)),
                    None => {}
                }
                let acts: Vec<String> = actions.iter().map(|a| a.to_string()).collect();
                text += &format!(
                    ",actions={}",
                    if acts.is_empty() {
                        "drop".into()
                    } else {
                        acts.join(",")
                    }
                );
                parse_flow(&text, &names).unwrap_or_else(|e| panic!("{text}: {e}"))
            })
    }

    proptest! {
        #[test]
        fn print_then_parse_is_identity(spec in arb_spec()) {
            let text = format_flow(&spec);
            let again = parse_flow(&text, &names).unwrap();
            prop_assert_eq!(again, spec);
        }

        #[test]
        fn garbage_never_panics(s in "[a-z_=0-9,./:x ]{0,60}") {
            let _ = parse_flow(&s, &names);
            let _ = parse_match(&s, &names);
        }
    }
}
