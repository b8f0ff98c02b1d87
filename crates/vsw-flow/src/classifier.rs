//! The rule table: tuple space search.
//!
//! Rules are grouped by mask into subtables; each subtable is a hash table from the
//! masked key to the rules with that match. A lookup masks the packet's key with each
//! subtable's mask and probes, so it costs one hash probe per distinct mask, not one
//! comparison per rule. Subtables are visited in descending order of the highest
//! priority they hold, so the search stops as soon as no later subtable can hold a
//! better rule; a PMD reorders subtables of equal top priority by its own hit counts
//! ([`SubtableOrder`]), so that the busiest are probed first.
//!
//! When rules of the same priority overlap, which one a packet gets is left open, as
//! OpenFlow leaves it: the first found, which can change as the order follows the
//! traffic.
//!
//! Immutable once built: the control plane changes a copy and the datapath swaps it
//! in, so lookups take no lock. A copy is cheap: each subtable's buckets are a
//! persistent map, which a change copies only along the path to what changed.

use std::sync::Arc;

use std::hash::{BuildHasherDefault, Hash, Hasher};

use imbl::shared_ptr::DefaultSharedPtr;
use imbl::{GenericHashMap, OrdMap};
use vsw_packet::key::hash_words;
use vsw_packet::KEY_WORDS;

use crate::match_key::{MatchKey, PIPELINE_WORDS};
use crate::matching::Match;
use crate::rule::{FlowSpec, Rule};

/// A bucket's key: the masked key and its hash (computed once, by
/// [`vsw_packet::key::hash_words`], and handed to the map as is). The pipeline's
/// fields are all zero in a subtable whose mask has none of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct BucketKey {
    hash: u64,
    packet: [u64; KEY_WORDS],
    pipeline: [u64; PIPELINE_WORDS],
}

impl Hash for BucketKey {
    fn hash<H: Hasher>(&self, h: &mut H) {
        h.write_u64(self.hash);
    }
}

/// `key` under `mask`, and its hash: a bucket's key in the subtable of `mask`
/// (`uses_pipeline`: the mask looks at a pipeline field). All words, masked or not:
/// a fixed-length, branch-free loop is cheaper than picking out the few words a
/// mask keeps.
#[inline]
fn pack(mask: &MatchKey, uses_pipeline: bool, key: &MatchKey) -> BucketKey {
    let (k, m) = (key.packet.words(), mask.packet.words());
    let mut packet = [0u64; KEY_WORDS];
    for ((p, k), m) in packet.iter_mut().zip(k).zip(m) {
        *p = k & m;
    }
    let mut hash = hash_words(&packet, KEY_WORDS);
    let mut pipeline = [0u64; PIPELINE_WORDS];
    if uses_pipeline {
        let (k, m) = (key.pipeline.words(), mask.pipeline.words());
        for ((p, k), m) in pipeline.iter_mut().zip(k).zip(m) {
            *p = k & m;
            hash = (hash ^ *p)
                .wrapping_mul(0x9e37_79b9_7f4a_7c15)
                .rotate_left(27);
        }
    }
    BucketKey {
        hash,
        packet,
        pipeline,
    }
}

/// A rule made whole before it is put in a table (a bundled flow-mod's, when it
/// is added to the bundle; Open vSwitch builds a bundle's rules then too): the rule
/// and its bucket's key, so that putting it in allocates nothing of its own. Its
/// place (installation time and order) is given when it is put in. Not `Clone`:
/// its bucket is its own until then.
pub struct PreparedRule {
    /// Seen by no lookup until it is put in (a [`StagedRules`] may hold it too),
    /// so that its place can be written then.
    rule: Arc<Rule>,
    key: SharedKey,
    /// The bucket it makes when its key is new, empty until then.
    bucket: Arc<Vec<Arc<Rule>>>,
}

impl PreparedRule {
    pub fn new(spec: FlowSpec) -> PreparedRule {
        Self::of(Rule::new(spec, 0, 0))
    }

    /// [`PreparedRule::new`] of a rule a `learn` action made.
    pub fn learned(spec: FlowSpec) -> PreparedRule {
        Self::of(Rule::new_learned(spec, 0, 0))
    }

    fn of(rule: Rule) -> PreparedRule {
        let mask = rule.spec.matcher.mask();
        let key = pack(mask, !mask.pipeline.is_zero(), rule.spec.matcher.value());
        PreparedRule {
            rule: Arc::new(rule),
            key: SharedKey(Arc::new(key)),
            bucket: Arc::new(Vec::with_capacity(1)),
        }
    }

    pub fn spec(&self) -> &FlowSpec {
        &self.rule.spec
    }

    /// The rule it puts in.
    pub fn rule(&self) -> &Arc<Rule> {
        &self.rule
    }
}

impl std::fmt::Debug for PreparedRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("PreparedRule")
            .field(&self.rule.spec)
            .finish()
    }
}

/// A bucket's key as the map holds it: out of line, so that the map's nodes hold a
/// pointer a key and not 216 bytes (a node has room for 32 entries; inline keys
/// made each 7 KiB, and adding 100,000 rules allocated and touched hundreds of MiB).
/// Looked up by a [`BucketKey`] (as `Borrow`): the same hash, the same equality.
#[derive(Clone, Debug, PartialEq, Eq)]
struct SharedKey(Arc<BucketKey>);

impl Hash for SharedKey {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.0.hash(h);
    }
}

impl std::borrow::Borrow<BucketKey> for SharedKey {
    fn borrow(&self) -> &BucketKey {
        &self.0
    }
}

/// Passes a [`BucketKey`]'s own hash through.
#[derive(Clone, Copy, Default)]
struct PassHasher(u64);

impl Hasher for PassHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u64` is used; anything else still hashes (FNV-1a).
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// The rules of one masked key, best first (see [`Rule::beats`]). Shared: a change
/// of the map copies the nodes on its path, every bucket of them — a reference
/// count each, not a list.
#[derive(Clone, Debug)]
struct Bucket {
    rules: Arc<Vec<Arc<Rule>>>,
}

/// A persistent hash map (a hash array mapped trie): a copy costs nothing, and a
/// change of a copy copies only the path to what changed — so a new pipeline with
/// one rule more is made in time that does not grow with the rules (the control
/// side changes a copy while translations read the published one).
type Buckets = GenericHashMap<SharedKey, Bucket, BuildHasherDefault<PassHasher>, DefaultSharedPtr>;

/// What an insert did: the rule put in, and the rule of the same match and priority
/// it took the place of (the caller says so to the journal and the revalidator).
#[derive(Debug)]
pub struct Inserted {
    pub rule: Arc<Rule>,
    pub replaced: Vec<Arc<Rule>>,
}

#[derive(Clone, Debug)]
struct Subtable {
    mask: MatchKey,
    /// The mask looks at some pipeline field (a register): only then are they
    /// masked and hashed, so that rules without registers cost what they did.
    uses_pipeline: bool,
    buckets: Buckets,
    /// How many rules of each priority (the highest is the subtable's).
    priorities: OrdMap<u16, u32>,
    max_priority: u16,
    n_rules: usize,
    /// Rules with an idle or hard timeout: the control plane looks at the clock
    /// only while some rule has one, and asks without a walk over every rule.
    timed: usize,
    /// Rules that are clauses of conjunctive matches: only while some subtable has
    /// one does a lookup gather them.
    conjunctive: usize,
    /// Rules whose `learn(…, delete_learned)` owns the rules it makes: only while
    /// some rule has one does a change look for what goes with a rule it removes.
    learn_owners: usize,
}

/// A rule that may time out: with a timeout, one a `fin_timeout` may give it, or
/// one a `fin_timeout` gave it before a modify took the action away.
fn is_timed(r: &Rule) -> bool {
    r.idle_timeout() != 0
        || r.hard_timeout() != 0
        || r.spec
            .actions
            .iter()
            .any(|a| matches!(a, crate::Action::FinTimeout { .. }))
}

fn is_clause(r: &Rule) -> bool {
    r.is_conjunction_clause()
}

impl Subtable {
    fn new(mask: MatchKey) -> Subtable {
        Subtable {
            mask,
            uses_pipeline: !mask.pipeline.is_zero(),
            buckets: Buckets::default(),
            priorities: OrdMap::new(),
            max_priority: 0,
            n_rules: 0,
            timed: 0,
            conjunctive: 0,
            learn_owners: 0,
        }
    }

    /// Whether this subtable's rules may match `key`'s packet type: a rule that
    /// names no `packet_type` is for Ethernet frames (Open vSwitch's implied
    /// `packet_type=(0,0)`), so a packet without Ethernet (an L3 tunnel port's, or
    /// after a `decap()`) skips it. `packet_type` is never masked in part.
    #[inline]
    fn takes_type_of(&self, key: &MatchKey) -> bool {
        key.pipeline.packet_type == crate::packet_type::ETHERNET
            || self.mask.pipeline.packet_type != 0
    }

    #[inline]
    fn pack(&self, key: &MatchKey) -> BucketKey {
        pack(&self.mask, self.uses_pipeline, key)
    }

    #[inline]
    fn find(&self, key: &MatchKey) -> Option<&Arc<Rule>> {
        self.buckets
            .get(&self.pack(key))
            .and_then(|b| b.rules.first())
    }

    /// Every rule of `key`'s bucket, best first.
    fn bucket(&self, key: &MatchKey) -> &[Arc<Rule>] {
        self.buckets
            .get(&self.pack(key))
            .map_or(&[], |b| &b.rules[..])
    }

    fn count(&mut self, priority: u16, added: bool) {
        // One more of a priority there is already (a bulk add's usual case): the
        // count changes in place, the highest priority does not.
        if added {
            if let Some(n) = self.priorities.get_mut(&priority) {
                *n += 1;
                return;
            }
        }
        let n = self.priorities.get(&priority).copied().unwrap_or(0);
        if added {
            self.priorities.insert(priority, n + 1);
        } else if n <= 1 {
            self.priorities.remove(&priority);
        } else {
            self.priorities.insert(priority, n - 1);
        }
        self.max_priority = self.priorities.get_max().map_or(0, |(p, _)| *p);
    }

    /// Adds `rule` under `key`, taking out the rules of its bucket that `replaced`
    /// picks (returned); a new bucket is `bucket` (empty, made before). One walk
    /// of the map: the bucket found is changed in place.
    fn add_replacing(
        &mut self,
        key: SharedKey,
        rule: Arc<Rule>,
        mut bucket: Arc<Vec<Arc<Rule>>>,
        replaced: &mut dyn FnMut(&Rule) -> bool,
    ) -> Vec<Arc<Rule>> {
        let priority = rule.spec.priority;
        self.timed += usize::from(is_timed(&rule));
        self.conjunctive += usize::from(is_clause(&rule));
        self.learn_owners += usize::from(rule.owns_learned());
        let mut gone = Vec::new();
        // The new bucket goes in first: a key new to the table (a bulk add's
        // usual case) then costs one walk of the map, not a look-up and an insert.
        Arc::get_mut(&mut bucket)
            .expect("a prepared bucket is held by nothing else")
            .push(rule);
        let again = key.clone();
        if let Some(before) = self.buckets.insert(key, Bucket { rules: bucket }) {
            // The key had a bucket: the new rule joins its rules there, in place
            // of those `replaced` picks.
            let slot = self.buckets.get_mut(&*again.0).expect("just put in");
            let rule = Arc::get_mut(&mut slot.rules)
                .and_then(|new| new.pop())
                .expect("a bucket of the new rule alone, held by the map only");
            let mut kept = before.rules;
            let rules = Arc::make_mut(&mut kept);
            if rules.iter().any(|r| replaced(r)) {
                rules.retain(|r| {
                    let doomed = replaced(r);
                    if doomed {
                        gone.push(r.clone());
                    }
                    !doomed
                });
            }
            let at = rules.partition_point(|r| r.beats(&rule));
            rules.insert(at, rule);
            slot.rules = kept;
        }
        self.forget(&gone);
        self.n_rules += 1;
        self.count(priority, true);
        gone
    }

    fn forget(&mut self, gone: &[Arc<Rule>]) {
        self.n_rules -= gone.len();
        for r in gone {
            self.timed -= usize::from(is_timed(r));
            self.conjunctive -= usize::from(is_clause(r));
            self.learn_owners -= usize::from(r.owns_learned());
            self.count(r.spec.priority, false);
        }
    }

    /// The rules of exactly the masked value `value` (one bucket).
    fn exact(&self, value: &MatchKey) -> &[Arc<Rule>] {
        self.buckets
            .get(&self.pack(value))
            .map_or(&[], |b| &b.rules[..])
    }

    /// Removes the rules with exactly the masked value `value` that `doomed` picks:
    /// one bucket is looked at, not the whole table (every insert does this, so adding
    /// n rules stays linear in n).
    fn remove_exact(
        &mut self,
        value: &MatchKey,
        doomed: &mut dyn FnMut(&Rule) -> bool,
    ) -> Vec<Arc<Rule>> {
        let key = self.pack(value);
        self.remove_packed(&key, doomed)
    }

    /// [`Subtable::remove_exact`] of a value packed already.
    fn remove_packed(
        &mut self,
        key: &BucketKey,
        doomed: &mut dyn FnMut(&Rule) -> bool,
    ) -> Vec<Arc<Rule>> {
        // Nothing to remove (an insert's usual case): the map is not touched.
        match self.buckets.get(key) {
            Some(b) if b.rules.iter().any(|r| doomed(r)) => {}
            _ => return Vec::new(),
        }
        let Some(bucket) = self.buckets.get_mut(key) else {
            return Vec::new();
        };
        let mut gone = Vec::new();
        Arc::make_mut(&mut bucket.rules).retain(|r| {
            let d = doomed(r);
            if d {
                gone.push(r.clone());
            }
            !d
        });
        if bucket.rules.is_empty() {
            self.buckets.remove(key);
        }
        self.forget(&gone);
        gone
    }

    /// Removes the rules `doomed` picks; returns them.
    fn remove_where(&mut self, doomed: &mut dyn FnMut(&Rule) -> bool) -> Vec<Arc<Rule>> {
        let mut gone = Vec::new();
        let mut changed = Vec::new();
        for (k, b) in self.buckets.iter() {
            let before = gone.len();
            let kept: Vec<Arc<Rule>> = b
                .rules
                .iter()
                .filter(|r| {
                    let d = doomed(r);
                    if d {
                        gone.push((*r).clone());
                    }
                    !d
                })
                .cloned()
                .collect();
            if gone.len() > before {
                changed.push((k.clone(), kept));
            }
        }
        for (k, kept) in changed {
            if kept.is_empty() {
                self.buckets.remove(&k);
            } else {
                self.buckets.insert(
                    k,
                    Bucket {
                        rules: Arc::new(kept),
                    },
                );
            }
        }
        self.forget(&gone);
        gone
    }
}

#[derive(Clone, Debug, Default)]
pub struct Classifier {
    /// Highest `max_priority` first.
    subtables: Vec<Subtable>,
    n_rules: usize,
    next_seq: u64,
}

/// What one lookup found and how much searching it took.
#[derive(Clone, Copy, Debug)]
pub struct Lookup<'a> {
    pub rule: Option<&'a Arc<Rule>>,
    /// Subtables probed.
    pub probes: u32,
}

impl Classifier {
    pub fn new() -> Classifier {
        Classifier::default()
    }

    pub fn len(&self) -> usize {
        self.n_rules
    }

    pub fn is_empty(&self) -> bool {
        self.n_rules == 0
    }

    /// Distinct masks.
    pub fn subtables(&self) -> usize {
        self.subtables.len()
    }

    /// Every rule, best first (priority, then installation order).
    pub fn rules(&self) -> Vec<Arc<Rule>> {
        let mut all: Vec<Arc<Rule>> = self
            .subtables
            .iter()
            .flat_map(|s| s.buckets.values().flat_map(|b| b.rules.iter().cloned()))
            .collect();
        all.sort_by(|a, b| {
            b.spec
                .priority
                .cmp(&a.spec.priority)
                .then(a.seq().cmp(&b.seq()))
        });
        all
    }

    /// The best rule matching `key`.
    #[inline]
    pub fn lookup(&self, key: &MatchKey) -> Option<&Arc<Rule>> {
        if self.subtables.iter().any(|s| s.conjunctive > 0) {
            return self.lookup_wc(key, &mut MatchKey::default());
        }
        self.search(key, None).rule
    }

    /// The best rule matching `key`, visiting subtables in `order` (kept by one PMD)
    /// and counting the hit there.
    #[inline]
    pub fn lookup_ordered(&self, key: &MatchKey, order: &mut SubtableOrder) -> Lookup<'_> {
        if self.subtables.iter().any(|s| s.conjunctive > 0) {
            return Lookup {
                rule: self.lookup_wc(key, &mut MatchKey::default()),
                probes: self.subtables.len() as u32,
            };
        }
        self.search(key, Some(order))
    }

    /// The best rule matching `key`, in the classifier's own order (the same answer
    /// for the same rules, whichever thread asks), adding to `wildcards` every bit the
    /// search looked at: the masks of the subtables it probed, hit or not. A packet
    /// that agrees with `key` on those bits gets the same answer.
    pub fn lookup_wc(&self, key: &MatchKey, wildcards: &mut MatchKey) -> Option<&Arc<Rule>> {
        if self.subtables.iter().any(|s| s.conjunctive > 0) {
            return self.lookup_conjunctive(key, wildcards);
        }
        self.lookup_hard_wc(key, wildcards)
    }

    /// [`Classifier::lookup_wc`] of the rules that are no clause of a conjunction
    /// (the only kind, in a table without them).
    fn lookup_hard_wc(&self, key: &MatchKey, wildcards: &mut MatchKey) -> Option<&Arc<Rule>> {
        let mut best: Option<&Arc<Rule>> = None;
        // Which subtables apply depends on the packet's type.
        wildcards.pipeline.packet_type = u32::MAX;
        for table in &self.subtables {
            if best.is_some_and(|b| table.max_priority <= b.spec.priority) {
                // No later subtable can hold a better rule, whatever the packet.
                break;
            }
            if !table.takes_type_of(key) {
                continue;
            }
            for (w, m) in wildcards.words_mut().iter_mut().zip(table.mask.words()) {
                *w |= m;
            }
            let found = if table.conjunctive == 0 {
                table.find(key)
            } else {
                table.bucket(key).iter().find(|r| !is_clause(r))
            };
            if let Some(r) = found {
                if best.is_none_or(|b| r.spec.priority > b.spec.priority) {
                    best = Some(r);
                }
            }
        }
        best
    }

    /// A lookup where some rules are clauses of conjunctive matches (Open vSwitch's
    /// `conjunction`): the best ordinary rule, unless a conjunction of higher
    /// priority is complete — every one of its clauses matched by a rule of that
    /// priority — and a rule matches the packet with `conj_id` set to it; the
    /// highest such conjunction wins. The search stops where ordinary rules alone
    /// would, so the clauses looked at are those above the best ordinary rule, and
    /// the wildcards cover every subtable probed.
    fn lookup_conjunctive(&self, key: &MatchKey, wildcards: &mut MatchKey) -> Option<&Arc<Rule>> {
        let mut best: Option<&Arc<Rule>> = None;
        // (priority, id, clause, of n): the clauses matched above `best`.
        let mut clauses: Vec<(u16, u32, u8, u8)> = Vec::new();
        wildcards.pipeline.packet_type = u32::MAX;
        for table in &self.subtables {
            if best.is_some_and(|b| table.max_priority <= b.spec.priority) {
                break;
            }
            if !table.takes_type_of(key) {
                continue;
            }
            for (w, m) in wildcards.words_mut().iter_mut().zip(table.mask.words()) {
                *w |= m;
            }
            for r in table.bucket(key) {
                if best.is_some_and(|b| r.spec.priority <= b.spec.priority) {
                    break;
                }
                if !is_clause(r) {
                    best = Some(r);
                    break;
                }
                for a in &r.spec.actions {
                    if let crate::Action::Conjunction {
                        id,
                        clause,
                        n_clauses,
                    } = *a
                    {
                        clauses.push((r.spec.priority, id, clause, n_clauses));
                    }
                }
            }
        }
        let floor = best.map_or(0, |b| u32::from(b.spec.priority) + 1);
        clauses.retain(|(p, ..)| u32::from(*p) >= floor);
        // Highest priority first, then by id: a conjunction's clauses together.
        clauses.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        for group in clauses.chunk_by(|a, b| (a.0, a.1) == (b.0, b.1)) {
            let n = group[0].3;
            let all = if n >= 64 { u64::MAX } else { (1u64 << n) - 1 };
            let seen = group
                .iter()
                .filter(|c| c.3 == n)
                .fold(0u64, |m, c| m | (1u64 << (c.2 - 1)));
            if seen != all {
                continue;
            }
            let mut answered = *key;
            answered.pipeline.conj_id = group[0].1;
            wildcards.pipeline.conj_id = u32::MAX;
            if let Some(r) = self.lookup_hard_wc(&answered, wildcards) {
                return Some(r);
            }
        }
        best
    }

    fn search(&self, key: &MatchKey, mut order: Option<&mut SubtableOrder>) -> Lookup<'_> {
        // An order kept for another classifier does not apply.
        if order
            .as_ref()
            .is_some_and(|o| o.order.len() != self.subtables.len())
        {
            order = None;
        }
        let mut best: Option<(&Arc<Rule>, usize)> = None;
        let mut probes = 0;
        for pos in 0..self.subtables.len() {
            let index = match &order {
                Some(o) => usize::from(o.order[pos]),
                None => pos,
            };
            let table = &self.subtables[index];
            if let Some((b, _)) = best {
                // Subtables come in non-increasing max priority: none further on can
                // hold a rule of higher priority. Among rules of equal priority that
                // match one packet, the first found wins (as in OpenFlow, which
                // leaves the choice open), so the search stops here.
                if table.max_priority <= b.spec.priority {
                    break;
                }
            }
            if !table.takes_type_of(key) {
                continue;
            }
            probes += 1;
            if let Some(r) = table.find(key) {
                if best.is_none_or(|(b, _)| r.spec.priority > b.spec.priority) {
                    best = Some((r, index));
                }
            }
        }
        if let (Some(o), Some((_, index))) = (order, best) {
            o.hits[index] += 1;
        }
        Lookup {
            rule: best.map(|(r, _)| r),
            probes,
        }
    }

    /// Installs a rule. A rule with the same match and priority is replaced (its
    /// counters start again), as `ovs-ofctl add-flow` does.
    pub fn insert(&mut self, spec: FlowSpec, now_ms: u64) -> Inserted {
        self.insert_prepared(PreparedRule::new(spec), now_ms)
    }

    /// [`Classifier::insert`] of a rule a `learn` action made; the rule in place.
    pub fn insert_learned(&mut self, spec: FlowSpec, now_ms: u64) -> Arc<Rule> {
        self.insert_prepared(PreparedRule::learned(spec), now_ms)
            .rule
    }

    /// [`Classifier::insert`] of a rule made before.
    pub fn insert_prepared(&mut self, prepared: PreparedRule, now_ms: u64) -> Inserted {
        let PreparedRule { rule, key, bucket } = prepared;
        self.next_seq += 1;
        rule.place(now_ms, self.next_seq);
        // (The rule's match is looked at where it is: it is large, and a bundle
        // puts in many rules.)
        let spec = &rule.spec;
        let mask = spec.matcher.mask();
        let (pos, created) = match self.subtables.iter().position(|s| s.mask == *mask) {
            Some(p) => (p, false),
            None => {
                self.subtables.push(Subtable::new(*mask));
                (self.subtables.len() - 1, true)
            }
        };
        let table = &mut self.subtables[pos];
        let highest_before = table.max_priority;
        // The rule of the same match and priority goes (one bucket looked at).
        let replaced = table.add_replacing(key, rule.clone(), bucket, &mut |r| r.same_place(spec));
        debug_assert!(table.max_priority >= spec.priority);
        self.n_rules = self.n_rules + 1 - replaced.len();
        // The order only changes with a new subtable or a new highest priority (a
        // bulk add of rules of one mask sorts nothing).
        if created || table.max_priority != highest_before {
            self.sort_subtables();
        }
        Inserted { rule, replaced }
    }

    fn sort_subtables(&mut self) {
        self.subtables.retain(|s| s.n_rules > 0);
        self.subtables
            .sort_by_key(|s| std::cmp::Reverse(s.max_priority));
    }

    fn remove_where(&mut self, mut doomed: impl FnMut(&Rule) -> bool) -> Vec<Arc<Rule>> {
        let mut gone = Vec::new();
        for s in &mut self.subtables {
            gone.extend(s.remove_where(&mut doomed));
        }
        self.n_rules -= gone.len();
        if !gone.is_empty() {
            self.sort_subtables();
        }
        gone
    }

    /// Removes rules as `ovs-ofctl del-flows` does and returns how many. Non-strict:
    /// every rule whose match is at least as specific as `pattern` (and agrees with it).
    /// Strict: the rule with exactly this match and priority.
    pub fn remove(&mut self, pattern: &Match, priority: Option<u16>, strict: bool) -> usize {
        self.remove_selected(pattern, priority, strict, &|_| true)
            .len()
    }

    /// [`Classifier::remove`], of the rules `also` picks too (a cookie, an output);
    /// returns them.
    pub fn remove_selected(
        &mut self,
        pattern: &Match,
        priority: Option<u16>,
        strict: bool,
        also: &dyn Fn(&Rule) -> bool,
    ) -> Vec<Arc<Rule>> {
        let prio_ok = |r: &Rule| priority.is_none_or(|p| p == r.spec.priority) && also(r);
        if strict {
            let Some(table) = self
                .subtables
                .iter_mut()
                .find(|s| s.mask == *pattern.mask())
            else {
                return Vec::new();
            };
            let gone = table.remove_exact(pattern.value(), &mut |r| {
                r.spec.matcher == *pattern && prio_ok(r)
            });
            self.n_rules -= gone.len();
            if !gone.is_empty() {
                self.sort_subtables();
            }
            return gone;
        }
        self.remove_where(|r| pattern.covers(&r.spec.matcher) && prio_ok(r))
    }

    /// The rule of exactly this match and priority, if there is one (one bucket
    /// looked at).
    pub fn find_exact(&self, pattern: &Match, priority: u16) -> Option<&Arc<Rule>> {
        self.subtables
            .iter()
            .find(|s| s.mask == *pattern.mask())?
            .exact(pattern.value())
            .iter()
            .find(|r| r.spec.matcher == *pattern && r.spec.priority == priority)
    }

    /// The rules [`Classifier::remove_selected`] would remove, best first.
    pub fn select(
        &self,
        pattern: &Match,
        priority: Option<u16>,
        strict: bool,
        also: &dyn Fn(&Rule) -> bool,
    ) -> Vec<Arc<Rule>> {
        // Strict: one bucket, not the whole table.
        if strict {
            return self
                .subtables
                .iter()
                .find(|s| s.mask == *pattern.mask())
                .map(|s| {
                    s.exact(pattern.value())
                        .iter()
                        .filter(|r| {
                            r.spec.matcher == *pattern
                                && priority.is_none_or(|p| p == r.spec.priority)
                                && also(r)
                        })
                        .cloned()
                        .collect()
                })
                .unwrap_or_default();
        }
        let mut picked = self.rules();
        picked.retain(|r| {
            let m = &r.spec.matcher;
            let matched = if strict {
                m == pattern
            } else {
                pattern.covers(m)
            };
            matched && priority.is_none_or(|p| p == r.spec.priority) && also(r)
        });
        picked
    }

    /// Puts `new` in the place of `old` (same match and priority); false when `old`
    /// is not here.
    pub fn replace(&mut self, old: &Arc<Rule>, new: Rule) -> bool {
        debug_assert!(
            new.spec.matcher == old.spec.matcher && new.spec.priority == old.spec.priority
        );
        let mask = *old.spec.matcher.mask();
        let Some(table) = self.subtables.iter_mut().find(|s| s.mask == mask) else {
            return false;
        };
        let key = table.pack(old.spec.matcher.value());
        let Some(bucket) = table.buckets.get_mut(&key) else {
            return false;
        };
        match Arc::make_mut(&mut bucket.rules)
            .iter_mut()
            .find(|r| Arc::ptr_eq(r, old))
        {
            Some(slot) => {
                let timed = (is_timed(old), is_timed(&new));
                let clause = (is_clause(old), is_clause(&new));
                let owner = (old.owns_learned(), new.owns_learned());
                *slot = Arc::new(new);
                table.learn_owners =
                    table.learn_owners + usize::from(owner.1) - usize::from(owner.0);
                table.timed = table.timed + usize::from(timed.1) - usize::from(timed.0);
                table.conjunctive =
                    table.conjunctive + usize::from(clause.1) - usize::from(clause.0);
                true
            }
            None => false,
        }
    }

    /// Removes the rules `doomed` picks; returns them.
    pub fn remove_if(&mut self, doomed: &dyn Fn(&Rule) -> bool) -> Vec<Arc<Rule>> {
        self.remove_where(doomed)
    }

    /// Removes every rule that names `port` in its match or actions (the port is gone).
    pub fn remove_port(&mut self, port: u32) -> usize {
        self.remove_where(|r| {
            let m = &r.spec.matcher;
            let in_match = m.mask().in_port != 0 && m.value().in_port == port;
            let in_actions = r.spec.actions.iter().any(|a| {
                matches!(a, crate::Action::Output(p)
                    | crate::Action::OutputTrunc { port: p, .. }
                    | crate::Action::Resubmit { port: Some(p), .. } if *p == port)
            });
            in_match || in_actions
        })
        .len()
    }

    /// Removes the rules with exactly this cookie; returns them.
    pub fn remove_cookie(&mut self, cookie: u64) -> Vec<Arc<Rule>> {
        self.remove_where(|r| r.spec.cookie == cookie)
    }

    /// How many rules have exactly this cookie.
    pub fn count_cookie(&self, cookie: u64) -> usize {
        self.subtables
            .iter()
            .flat_map(|s| s.buckets.values())
            .flat_map(|b| b.rules.iter())
            .filter(|r| r.spec.cookie == cookie)
            .count()
    }

    /// Removes the rules whose idle or hard timeout has run out; returns them.
    pub fn remove_expired(&mut self, now_ms: u64) -> Vec<Arc<Rule>> {
        self.remove_where(|r| r.expired(now_ms))
    }

    /// True when some rule's timeout has run out at `now_ms` (checked without copying
    /// the classifier, which removing them needs).
    pub fn any_expired(&self, now_ms: u64) -> bool {
        self.subtables.iter().any(|s| {
            s.buckets
                .values()
                .any(|b| b.rules.iter().any(|r| r.expired(now_ms)))
        })
    }

    /// True when some rule has a timeout (so the control plane must watch the clock).
    pub fn has_timeouts(&self) -> bool {
        self.subtables.iter().any(|s| s.timed > 0)
    }

    /// True when some rule has a `learn(…, delete_learned)`.
    pub fn has_learn_owners(&self) -> bool {
        self.subtables.iter().any(|s| s.learn_owners > 0)
    }
}

/// One PMD's visiting order over a classifier's subtables, by its own hit counts.
/// Only subtables of equal top priority trade places, so a search can still stop
/// early. Rebuilt from scratch for every new classifier.
#[derive(Clone, Debug, Default)]
pub struct SubtableOrder {
    order: Vec<u16>,
    hits: Vec<u64>,
}

impl SubtableOrder {
    /// The classifier's own order, no hits yet.
    pub fn new(c: &Classifier) -> SubtableOrder {
        // More than 65,535 distinct masks: the classifier's order is used instead.
        let n = c.subtables.len();
        let n = if n > usize::from(u16::MAX) { 0 } else { n };
        SubtableOrder {
            order: (0..n as u16).collect(),
            hits: vec![0; c.subtables.len()],
        }
    }

    /// Puts subtables with more hits first within each priority level, and halves
    /// the counts so that the order follows the recent traffic.
    pub fn resort(&mut self, c: &Classifier) {
        let hits = &self.hits;
        self.order.sort_by(|a, b| {
            let (sa, sb) = (&c.subtables[usize::from(*a)], &c.subtables[usize::from(*b)]);
            sb.max_priority
                .cmp(&sa.max_priority)
                .then(hits[usize::from(*b)].cmp(&hits[usize::from(*a)]))
        });
        for h in &mut self.hits {
            *h /= 2;
        }
    }
}

mod staged;
pub use staged::StagedRules;

#[cfg(test)]
mod tests;
