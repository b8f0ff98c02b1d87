use std::any::Any;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use crate::action::Action;
use crate::matching::Match;
pub use crate::table::MAX_TABLE;

pub use crate::table::DEFAULT_PRIORITY;

/// A rule as a user writes it: table, priority, match, actions, timeouts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowSpec {
    /// The pipeline table the rule sits in (0 ..= [`MAX_TABLE`]).
    pub table: u8,
    pub priority: u16,
    pub matcher: Match,
    pub actions: Vec<Action>,
    /// Seconds without a matching packet after which the rule is removed; 0 = never.
    pub idle_timeout: u16,
    /// Seconds after installation at which the rule is removed; 0 = never.
    pub hard_timeout: u16,
    /// The controller's own tag for the rule (OpenFlow's cookie); vsw only keeps it.
    pub cookie: u64,
    /// Tell the OpenFlow controllers when the rule goes (OFPFF_SEND_FLOW_REM).
    pub send_flow_rem: bool,
    /// How the front end that installed the rule wrote it, to be given back as
    /// written (not part of what the rule does).
    pub as_written: AsWritten,
}

/// One half of a rule (or a group's buckets) as a front end wrote it, in that front
/// end's own form — or nothing, for what was written another way: opaque here, read
/// back only by the front end that made it. Equal to every other: two rules that
/// differ only in how they were written are the same rule.
#[derive(Clone, Default)]
pub struct Written(Option<Arc<dyn Any + Send + Sync>>);

impl Written {
    pub fn new<T: Any + Send + Sync>(form: T) -> Written {
        Written(Some(Arc::new(form)))
    }

    /// The form, if one was kept and it is a `T`.
    pub fn get<T: Any>(&self) -> Option<&T> {
        self.0.as_deref()?.downcast_ref()
    }
}

impl PartialEq for Written {
    fn eq(&self, _: &Written) -> bool {
        true
    }
}

impl Eq for Written {}

impl std::fmt::Debug for Written {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "Written(..)"
        } else {
            "Written(none)"
        })
    }
}

/// A rule as its front end wrote it — for an OpenFlow controller, the match's fields
/// in their order with exactly the masks it gave, and its instructions with every
/// argument — so that statistics and removals echo it byte for byte, where vsw's
/// own [`Match`] and [`Action`]s keep only what a rule does.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AsWritten {
    pub matcher: Written,
    pub actions: Written,
}

impl FlowSpec {
    pub fn new(priority: u16, matcher: Match, actions: Vec<Action>) -> FlowSpec {
        FlowSpec {
            table: 0,
            priority,
            matcher,
            actions,
            idle_timeout: 0,
            hard_timeout: 0,
            cookie: 0,
            send_flow_rem: false,
            as_written: AsWritten::default(),
        }
    }
}

/// Counters of one installed rule. The datapath adds to them once per batch.
#[derive(Debug, Default)]
pub struct RuleStats {
    packets: AtomicU64,
    bytes: AtomicU64,
    /// Caller's clock, milliseconds; 0 = never hit.
    last_hit_ms: AtomicU64,
}

impl RuleStats {
    pub fn add(&self, packets: u64, bytes: u64, now_ms: u64) {
        self.packets.fetch_add(packets, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
        self.last_hit_ms.store(now_ms, Ordering::Relaxed);
    }

    /// Packets were seen at `now_ms` elsewhere (an offload provider forwarded some):
    /// the rule is not idle.
    pub fn seen(&self, now_ms: u64) {
        self.last_hit_ms.fetch_max(now_ms, Ordering::Relaxed);
    }

    pub fn packets(&self) -> u64 {
        self.packets.load(Ordering::Relaxed)
    }

    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Counters with the same counts as `other` (a modified rule keeps its own).
    pub fn copy_of(other: &RuleStats) -> RuleStats {
        RuleStats {
            packets: AtomicU64::new(other.packets()),
            bytes: AtomicU64::new(other.bytes()),
            last_hit_ms: AtomicU64::new(other.last_hit_ms.load(Ordering::Relaxed)),
        }
    }

    pub fn last_hit_ms(&self) -> Option<u64> {
        match self.last_hit_ms.load(Ordering::Relaxed) {
            0 => None,
            t => Some(t),
        }
    }
}

/// An installed rule: its spec, when it was installed and its counters.
#[derive(Debug)]
pub struct Rule {
    pub spec: FlowSpec,
    /// When it was put in (set once, before any reader sees it: atomic so that a
    /// rule staged in a bundle, held by the stage too, can be placed at the
    /// commit).
    installed_ms: AtomicU64,
    /// Installation order (rules of one match are kept in it); set as
    /// `installed_ms` is.
    seq: AtomicU64,
    /// Some action changes the packet, so the datapath works on a copy.
    pub rewrites: bool,
    pub stats: RuleStats,
    /// A `learn` action made it (not a front end): not saved, gone on a restart.
    pub learned: bool,
    /// When its hard timeout starts: its installation, or the last time a packet
    /// that learned it again passed (Open vSwitch's `modified`).
    refreshed_ms: AtomicU64,
    /// Timeouts a `fin_timeout` action cut when a TCP FIN or RST passed: the idle
    /// timeout in the low 16 bits, the hard in the high (0: not cut).
    cut_timeouts: AtomicU32,
}

impl Rule {
    pub fn new(spec: FlowSpec, now_ms: u64, seq: u64) -> Rule {
        Rule {
            rewrites: spec.actions.iter().any(Action::rewrites),
            spec,
            installed_ms: AtomicU64::new(now_ms),
            seq: AtomicU64::new(seq),
            stats: RuleStats::default(),
            learned: false,
            refreshed_ms: AtomicU64::new(now_ms),
            cut_timeouts: AtomicU32::new(0),
        }
    }

    /// Its place among the rules, given when it is put in a table (a rule made
    /// before, [`crate::PreparedRule`]): installed at `now_ms`, `seq`-th.
    /// Not to be called once a lookup may find it.
    pub(crate) fn place(&self, now_ms: u64, seq: u64) {
        debug_assert_eq!(
            self.installed_ms(),
            0,
            "a rule is placed before it is in a table"
        );
        self.installed_ms.store(now_ms, Ordering::Relaxed);
        self.seq.store(seq, Ordering::Relaxed);
        self.refreshed_ms.store(now_ms, Ordering::Relaxed);
    }

    /// When it was put in a table.
    pub fn installed_ms(&self) -> u64 {
        self.installed_ms.load(Ordering::Relaxed)
    }

    /// Its place in installation order.
    pub fn seq(&self) -> u64 {
        self.seq.load(Ordering::Relaxed)
    }

    /// [`Rule::new`] for a rule a `learn` action made.
    pub fn new_learned(spec: FlowSpec, now_ms: u64, seq: u64) -> Rule {
        Rule {
            learned: true,
            ..Rule::new(spec, now_ms, seq)
        }
    }

    /// A packet learned it again at `now_ms`: its hard timeout starts over.
    pub fn refresh(&self, now_ms: u64) {
        self.refreshed_ms.fetch_max(now_ms, Ordering::Relaxed);
    }

    fn hard_from_ms(&self) -> u64 {
        self.refreshed_ms.load(Ordering::Relaxed)
    }

    /// Its `learn(…, delete_learned)` owns the rules it makes: they go when it
    /// does.
    pub fn owns_learned(&self) -> bool {
        self.spec
            .actions
            .iter()
            .any(|a| matches!(a, Action::Learn(l) if l.delete_learned))
    }

    /// Precedes `other` in a list of rules: higher priority, then earlier installed.
    /// A clause of a conjunctive match (its actions are `conjunction(…)`): a
    /// lookup's answer never, but what decides whether the rule of `conj_id` is.
    pub fn is_conjunction_clause(&self) -> bool {
        matches!(
            self.spec.actions.first(),
            Some(crate::Action::Conjunction { .. })
        )
    }

    /// Whether it has `spec`'s place: the same match and priority (an add of
    /// `spec` replaces it).
    pub fn same_place(&self, spec: &FlowSpec) -> bool {
        self.spec.priority == spec.priority && self.spec.matcher == spec.matcher
    }

    pub fn beats(&self, other: &Rule) -> bool {
        (self.spec.priority, std::cmp::Reverse(self.seq()))
            > (other.spec.priority, std::cmp::Reverse(other.seq()))
    }

    /// The rule with other actions (an OpenFlow modify), written as `written`: the
    /// same match, priority, cookie, timeouts, age and place; its counters kept unless
    /// `reset_counts`.
    pub fn with_actions(&self, actions: Vec<Action>, written: Written, reset_counts: bool) -> Rule {
        let mut spec = FlowSpec {
            actions,
            ..self.spec.clone()
        };
        spec.as_written.actions = written;
        Rule {
            rewrites: spec.actions.iter().any(Action::rewrites),
            spec,
            installed_ms: AtomicU64::new(self.installed_ms()),
            seq: AtomicU64::new(self.seq()),
            stats: if reset_counts {
                RuleStats::default()
            } else {
                RuleStats::copy_of(&self.stats)
            },
            learned: self.learned,
            refreshed_ms: AtomicU64::new(self.hard_from_ms()),
            cut_timeouts: AtomicU32::new(self.cut_timeouts.load(Ordering::Relaxed)),
        }
    }

    /// OpenFlow's table-miss rule: priority 0, matching every packet.
    pub fn is_table_miss(&self) -> bool {
        self.spec.priority == 0 && self.spec.matcher.mask().words().iter().all(|w| *w == 0)
    }

    /// `fin_timeout(idle_timeout=IDLE,hard_timeout=HARD)` saw a TCP FIN or RST:
    /// each timeout that is not already shorter becomes the one given (0: that one
    /// is left as it is), as Open vSwitch reduces a rule's timeouts.
    pub fn cut_timeouts(&self, idle: u16, hard: u16) {
        let _ = self
            .cut_timeouts
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |now| {
                let (i, h) = (now as u16, (now >> 16) as u16);
                let cut = |max: u16, t: u16| {
                    if max != 0 && (t == 0 || t > max) {
                        max
                    } else {
                        t
                    }
                };
                let (i, h) = (cut(idle, i), cut(hard, h));
                Some(u32::from(i) | (u32::from(h) << 16))
            });
    }

    /// The idle timeout in seconds now: the rule's, or shorter where a
    /// `fin_timeout` cut it (0: none).
    pub fn idle_timeout(&self) -> u16 {
        shorter(
            self.spec.idle_timeout,
            self.cut_timeouts.load(Ordering::Relaxed) as u16,
        )
    }

    /// The hard timeout in seconds now (see [`Rule::idle_timeout`]).
    pub fn hard_timeout(&self) -> u16 {
        shorter(
            self.spec.hard_timeout,
            (self.cut_timeouts.load(Ordering::Relaxed) >> 16) as u16,
        )
    }

    /// True when a timeout has run out at `now_ms`.
    pub fn expired(&self, now_ms: u64) -> bool {
        let hard = u64::from(self.hard_timeout()) * 1000;
        let idle = u64::from(self.idle_timeout()) * 1000;
        let last = self.stats.last_hit_ms().unwrap_or(self.installed_ms());
        (hard != 0 && now_ms.saturating_sub(self.hard_from_ms()) >= hard)
            || (idle != 0 && now_ms.saturating_sub(last) >= idle)
    }

    /// Whether the hard timeout (rather than the idle one) ran out at `now_ms`.
    pub fn hard_expired(&self, now_ms: u64) -> bool {
        let hard = u64::from(self.hard_timeout()) * 1000;
        hard != 0 && now_ms.saturating_sub(self.hard_from_ms()) >= hard
    }

    /// Seconds since the rule last matched a packet, or since it was installed.
    pub fn idle_age_s(&self, now_ms: u64) -> u64 {
        let since = self.stats.last_hit_ms().unwrap_or(self.installed_ms());
        now_ms.saturating_sub(since) / 1000
    }

    pub fn duration_ms(&self, now_ms: u64) -> u64 {
        now_ms.saturating_sub(self.installed_ms())
    }
}

/// Of two timeouts (0: none), the one that runs out first.
fn shorter(a: u16, b: u16) -> u16 {
    match (a, b) {
        (0, t) | (t, 0) => t,
        (a, b) => a.min(b),
    }
}
