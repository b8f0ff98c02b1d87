//! One PMD's datapath flows: tuple space search over masks, as the rule classifier,
//! but without priorities — the flows of one PMD do not overlap in what they decide
//! (any that matches gives the translation's answer), so the first hit wins. The PMD
//! is the only one that reads or changes it: no lock.

use std::cell::Cell;
use std::sync::Arc;

use hashbrown::HashTable;
use vsw_packet::key::hash_words;
use vsw_packet::{FlowKey, COMMON_WORDS, KEY_WORDS};

use crate::dpflow::DpFlow;

type Packed = [u64; KEY_WORDS];

/// Words of a subtable whose mask leaves the key's last words alone (the label slot,
/// the datapath's hash and the connection tracker's fields, which few flows match):
/// it packs, hashes and compares those only. Two fixed widths, so that each probe's
/// loops are unrolled.
const NARROW: usize = COMMON_WORDS;

/// `key` under `mask`, its first `N` words (the rest are zero in the mask).
#[inline(always)]
fn pack<const N: usize>(key: &FlowKey, mask: &FlowKey) -> Packed {
    let mut packed = [0u64; KEY_WORDS];
    let (k, m) = (key.words(), mask.words());
    for i in 0..N {
        packed[i] = k[i] & m[i];
    }
    packed
}

#[inline(always)]
fn same<const N: usize>(a: &Packed, b: &FlowKey) -> bool {
    let b = b.words();
    (0..N).fold(0, |acc, i| acc | (a[i] ^ b[i])) == 0
}

/// The words a subtable of `mask` looks at: [`NARROW`] unless one of its last words
/// has a bit set.
fn width(mask: &FlowKey) -> usize {
    if mask.words()[NARROW..].iter().all(|w| *w == 0) {
        NARROW
    } else {
        KEY_WORDS
    }
}

/// The flow of `s` that `key` matches, looking at its first `N` words.
#[inline(always)]
fn probe<'a, const N: usize>(s: &'a Subtable, key: &FlowKey) -> Option<&'a Arc<DpFlow>> {
    let packed = pack::<N>(key, &s.mask);
    let hash = hash_words(&packed, N);
    s.flows
        .find(hash, |f| same::<N>(&packed, f.matcher.value()))
}

struct Subtable {
    mask: FlowKey,
    /// `width(&mask)`.
    words: usize,
    flows: HashTable<Arc<DpFlow>>,
    /// Hits since the last reordering (counted through a shared reference: the
    /// table is one PMD's alone).
    hits: Cell<u64>,
}

fn flow_hash(f: &DpFlow, words: usize) -> u64 {
    hash_words(f.matcher.value().words(), words)
}

/// What a lookup found and how many subtables it probed.
pub struct FlowLookup<'a> {
    pub flow: Option<&'a Arc<DpFlow>>,
    pub probes: u32,
}

#[derive(Default)]
pub struct FlowTable {
    subtables: Vec<Subtable>,
    len: usize,
    /// Subtables that look at the key's last word.
    wide: usize,
}

impl FlowTable {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn masks(&self) -> usize {
        self.subtables.len()
    }

    /// The flow matching `key`, if any (dead or not: the caller decides), and the
    /// subtables probed.
    #[inline]
    pub fn lookup(&self, key: &FlowKey) -> FlowLookup<'_> {
        // Most tables have no subtable that looks at the last word: their loop
        // has no choice to make per subtable.
        if self.wide == 0 {
            self.lookup_in::<false>(key)
        } else {
            self.lookup_in::<true>(key)
        }
    }

    #[inline(always)]
    fn lookup_in<const ANY_WIDE: bool>(&self, key: &FlowKey) -> FlowLookup<'_> {
        let mut probes = 0;
        for s in &self.subtables {
            probes += 1;
            let found = if !ANY_WIDE || s.words == NARROW {
                probe::<NARROW>(s, key)
            } else {
                probe::<KEY_WORDS>(s, key)
            };
            if let Some(f) = found {
                s.hits.set(s.hits.get() + 1);
                return FlowLookup {
                    flow: Some(f),
                    probes,
                };
            }
        }
        FlowLookup { flow: None, probes }
    }

    /// Adds a flow; one of the same match is replaced.
    pub fn insert(&mut self, flow: Arc<DpFlow>) {
        let mask = *flow.matcher.mask();
        let pos = match self.subtables.iter().position(|s| s.mask == mask) {
            Some(p) => p,
            None => {
                let words = width(&mask);
                self.wide += usize::from(words != NARROW);
                self.subtables.push(Subtable {
                    mask,
                    words,
                    flows: HashTable::new(),
                    hits: Cell::new(0),
                });
                self.subtables.len() - 1
            }
        };
        let s = &mut self.subtables[pos];
        let words = s.words;
        let hash = flow_hash(&flow, words);
        let value = *flow.matcher.value();
        match s.flows.find_mut(hash, |f| f.matcher.value() == &value) {
            Some(old) => *old = flow,
            None => {
                s.flows.insert_unique(hash, flow, |f| flow_hash(f, words));
                self.len += 1;
            }
        }
    }

    /// Removes the flows the revalidator retired; returns how many.
    pub fn remove_dead(&mut self) -> usize {
        let mut gone = 0;
        for s in &mut self.subtables {
            s.flows.retain(|f| {
                let dead = f.is_dead();
                gone += usize::from(dead);
                !dead
            });
        }
        self.subtables.retain(|s| !s.flows.is_empty());
        self.wide = self.subtables.iter().filter(|s| s.words != NARROW).count();
        self.len -= gone;
        gone
    }

    /// Removes every flow (the PMD stops caching, or the datapath empties).
    pub fn clear(&mut self) {
        self.subtables.clear();
        self.len = 0;
        self.wide = 0;
    }

    /// Puts the busiest subtables first and halves the counts, so that the order
    /// follows recent traffic.
    pub fn resort(&mut self) {
        self.subtables
            .sort_by_key(|s| std::cmp::Reverse(s.hits.get()));
        for s in &self.subtables {
            s.hits.set(s.hits.get() / 2);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dpflow::DpAction;
    use crate::upcall::{NoAttribution, Translation};

    fn flow(id: u64, key: FlowKey, mask: FlowKey) -> Arc<DpFlow> {
        let t = Translation {
            mask,
            actions: vec![DpAction::Output(id as u32)],
            headers: Vec::new(),
            attribution: Arc::new(NoAttribution),
            generation: 1,
            rx_port: None,
            cacheable: true,
        };
        Arc::new(DpFlow::new(id, 0, &key, t, 1))
    }

    fn key(in_port: u32, tp_dst: u16) -> FlowKey {
        FlowKey {
            in_port,
            tp_dst,
            dl_type: 0x0800,
            ..FlowKey::default()
        }
    }

    #[test]
    fn flows_match_under_their_masks_and_in_port_is_always_exact() {
        let mut t = FlowTable::default();
        let ports = FlowKey {
            tp_dst: 0xffff,
            ..FlowKey::default()
        };
        t.insert(flow(1, key(1, 80), ports));
        t.insert(flow(2, key(1, 0), FlowKey::default()));
        assert_eq!((t.len(), t.masks()), (2, 2));
        let hit = |t: &FlowTable, k| t.lookup(&k).flow.map(|f| f.id);
        assert_eq!(hit(&t, key(1, 80)), Some(1));
        assert_eq!(hit(&t, key(1, 443)), Some(2), "only in_port in the mask");
        assert_eq!(hit(&t, key(2, 80)), None, "another port");
    }

    #[test]
    fn dead_flows_are_removed() {
        let mut t = FlowTable::default();
        let f = flow(1, key(1, 80), FlowKey::default());
        t.insert(f.clone());
        t.insert(flow(2, key(2, 80), FlowKey::default()));
        f.kill();
        assert_eq!(t.remove_dead(), 1);
        assert_eq!(t.len(), 1);
        assert!(t.lookup(&key(1, 80)).flow.is_none());
        assert!(t.lookup(&key(2, 80)).flow.is_some());
    }
}
