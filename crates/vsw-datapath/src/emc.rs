//! The exact-match cache: one per PMD, in front of its datapath flows (megaflows). It
//! maps a packet's whole flow key to the datapath flow that matched it, so a packet of
//! a known flow costs one hash and one key comparison.
//!
//! Two-way set associative: a key may sit in one of two slots picked by different
//! bits of its hash. Entries carry the generation they were made under; a new
//! generation (flows were retired) makes every older entry a miss at once, without a
//! sweep.
//! Insertion is probabilistic (`emc-insert-inv-prob`, as in Open vSwitch): with
//! thousands of short flows, inserting every miss would only churn the cache.

use std::sync::Arc;

use vsw_packet::key::hash_words;
use vsw_packet::FlowKey;

/// Entries per cache (a power of two).
pub const EMC_ENTRIES: usize = 8192;
const EMC_MASK: usize = EMC_ENTRIES - 1;
/// Bits of the hash that pick the first slot; the second slot uses the next ones.
const EMC_SHIFT: u32 = EMC_ENTRIES.trailing_zeros();

/// Open vSwitch's default: insert one miss in a hundred.
pub const DEFAULT_INSERT_INV_PROB: u32 = 100;

/// The hash of a flow key, used by the cache. Most packets carry nothing in the
/// words past the common ones (no label, no `dp_hash`, no `ct` has seen them):
/// those words are then not multiplied in, which spares every such packet the
/// work of the tracker's fields. (Equal keys take the same way, so a key always
/// hashes alike.)
#[inline]
pub fn key_hash(key: &FlowKey) -> u64 {
    use vsw_packet::{COMMON_WORDS, KEY_WORDS};
    let w = key.words();
    let tail = w[COMMON_WORDS..].iter().fold(0, |acc, x| acc | x);
    hash_words(w, if tail == 0 { COMMON_WORDS } else { KEY_WORDS })
}

/// Whole-key equality, branch-free (the compiler makes a few vector instructions of
/// it; `==` on the arrays calls memcmp).
#[inline]
fn same_key(a: &FlowKey, b: &FlowKey) -> bool {
    a.words()
        .iter()
        .zip(b.words())
        .fold(0, |acc, (x, y)| acc | (x ^ y))
        == 0
}

struct Entry<T> {
    /// 0: empty. Otherwise the classifier generation it was made under.
    generation: u64,
    hash: u64,
    key: FlowKey,
    item: Option<Arc<T>>,
}

pub struct Emc<T> {
    entries: Box<[Entry<T>]>,
    generation: u64,
    /// Insert one miss in this many; 0 turns insertion off, 1 inserts every miss.
    inv_prob: u32,
    rng: u32,
}

impl<T> Emc<T> {
    pub fn new(inv_prob: u32) -> Emc<T> {
        Emc {
            entries: (0..EMC_ENTRIES)
                .map(|_| Entry {
                    generation: 0,
                    hash: 0,
                    key: FlowKey::default(),
                    item: None,
                })
                .collect(),
            generation: 1,
            inv_prob,
            rng: 0x9e37_79b9,
        }
    }

    /// Forgets every entry made before (they belong to another classifier).
    pub fn invalidate(&mut self, generation: u64) {
        self.generation = generation.max(1);
    }

    pub fn set_insert_inv_prob(&mut self, inv_prob: u32) {
        self.inv_prob = inv_prob;
    }

    #[inline]
    fn slots(hash: u64) -> [usize; 2] {
        [
            hash as usize & EMC_MASK,
            (hash >> EMC_SHIFT) as usize & EMC_MASK,
        ]
    }

    /// The slot that holds `key`, if the cache knows it.
    #[inline]
    pub fn lookup(&self, hash: u64, key: &FlowKey) -> Option<usize> {
        Self::slots(hash).into_iter().find(|&slot| {
            let e = &self.entries[slot];
            e.generation == self.generation && e.hash == hash && same_key(&e.key, key)
        })
    }

    /// What the cache knows for the key in `slot`: a rule, or no rule at all.
    #[inline]
    pub fn get(&self, slot: usize) -> Option<&Arc<T>> {
        self.entries[slot].item.as_ref()
    }

    /// Maybe remembers what the classifier said for `key` (see `inv_prob`).
    #[inline]
    pub fn insert(&mut self, hash: u64, key: &FlowKey, item: Option<&Arc<T>>) {
        match self.inv_prob {
            0 => return,
            1 => {}
            n => {
                // xorshift32: cheap, and good enough to thin insertions out.
                self.rng ^= self.rng << 13;
                self.rng ^= self.rng >> 17;
                self.rng ^= self.rng << 5;
                if !self.rng.is_multiple_of(n) {
                    return;
                }
            }
        }
        let [a, b] = Self::slots(hash);
        let live = |e: &Entry<T>| e.generation == self.generation;
        // The first slot when it is free; else the second, so that a flow already
        // in the first survives a newcomer.
        let slot = if live(&self.entries[a]) { b } else { a };
        let e = &mut self.entries[slot];
        e.generation = self.generation;
        e.hash = hash;
        e.key = *key;
        e.item = item.cloned();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the cache holds does not matter to it.
    fn rule() -> Arc<u32> {
        Arc::new(7)
    }

    fn key(n: u32) -> FlowKey {
        FlowKey {
            in_port: n,
            ..FlowKey::default()
        }
    }

    #[test]
    fn remembers_rules_and_misses() {
        let mut emc = Emc::<u32>::new(1);
        let r = rule();
        let (k1, k2) = (key(1), key(2));
        let (h1, h2) = (key_hash(&k1), key_hash(&k2));
        assert_eq!(emc.lookup(h1, &k1), None);
        emc.insert(h1, &k1, Some(&r));
        emc.insert(h2, &k2, None);
        let s1 = emc.lookup(h1, &k1).expect("cached");
        assert!(Arc::ptr_eq(emc.get(s1).unwrap(), &r));
        let s2 = emc.lookup(h2, &k2).expect("a miss is cached too");
        assert!(emc.get(s2).is_none());
        // Same hash, other key: a miss, never the wrong rule.
        assert_eq!(emc.lookup(h1, &k2), None);
    }

    #[test]
    fn a_new_generation_forgets_everything() {
        let mut emc = Emc::<u32>::new(1);
        let k = key(1);
        let h = key_hash(&k);
        emc.insert(h, &k, Some(&rule()));
        emc.invalidate(2);
        assert_eq!(emc.lookup(h, &k), None);
    }

    #[test]
    fn insertion_probability() {
        let mut emc = Emc::<u32>::new(0);
        let k = key(1);
        let h = key_hash(&k);
        emc.insert(h, &k, None);
        assert_eq!(emc.lookup(h, &k), None, "0 turns insertion off");
        let mut emc = Emc::<u32>::new(100);
        let inserted = (0..10_000u32)
            .filter(|n| {
                let k = key(*n);
                let h = key_hash(&k);
                emc.insert(h, &k, None);
                emc.lookup(h, &k).is_some()
            })
            .count();
        assert!(
            (50..200).contains(&inserted),
            "about 1 in 100 inserted, got {inserted} of 10000"
        );
    }

    #[test]
    fn many_flows_fit() {
        let mut emc = Emc::<u32>::new(1);
        let n = 2000u32;
        for i in 0..n {
            let k = key(i);
            emc.insert(key_hash(&k), &k, None);
        }
        let found = (0..n)
            .filter(|i| {
                let k = key(*i);
                emc.lookup(key_hash(&k), &k).is_some()
            })
            .count();
        assert!(found as u32 > n * 9 / 10, "{found} of {n} kept");
    }
}
