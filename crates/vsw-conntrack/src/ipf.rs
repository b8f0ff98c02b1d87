//! IP fragments put back together before the tracker reads them, as Open
//! vSwitch's userspace datapath does (lib/ipf.c): a `ct` that meets a fragment
//! keeps it; the fragment that completes its datagram gives the caller the whole
//! datagram to track and every fragment to send on, in order, with what the
//! tracker said of the datagram ("refragmenting" by forwarding the fragments as
//! they came, NAT written into each).
//!
//! Open vSwitch's limits and defaults: a fragment other than the last smaller than
//! 1,200 bytes (IPv4) or 1,280 (IPv6) is refused; at most 1,000 fragments are
//! kept at once (5,000 at most by configuration); a datagram not complete 15 s
//! after its first fragment is dropped; a fragment overlapping one kept is
//! refused. Unlike Open vSwitch, the port a fragment came in on is part of what
//! it is gathered by: fragments of one datagram through two ports are two
//! datagrams, neither complete.
//!
//! The one lock here is taken for fragments only: whole packets never reach it.
//! Fragments are copied (the PMD's buffer is reused for the next packet): the
//! only allocation on the packet path, and for fragments alone.

use std::collections::{HashMap, VecDeque};
use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use parking_lot::Mutex;

/// Open vSwitch's default smallest fragment (not the last) of IPv4, in bytes of
/// IP packet.
pub const V4_MIN_FRAG_DEFAULT: u32 = 1200;
/// The same for IPv6.
pub const V6_MIN_FRAG_DEFAULT: u32 = 1280;
/// The smallest a smallest fragment may be set to.
pub const MIN_FRAG_LOWEST: u32 = 400;
/// How many fragments are kept at once, by default.
pub const MAX_FRAGS_DEFAULT: u32 = 1000;
/// How many fragments may be kept at once at most.
pub const MAX_FRAGS_HIGHEST: u32 = 5000;
/// How long a datagram's fragments wait for the rest.
pub const LIST_TIMEOUT_MS: u64 = 15_000;

const IP_MAX: usize = 65_535;
const V4_MAX_HEADER: usize = 60;
const V6_HEADER: usize = 40;
const V4_MORE: u16 = 0x2000;
const V4_OFFSET: u16 = 0x1fff;
/// A list of IPv6 fragments is bounded by the datagram's size only.
const V6_MAX_LIST: usize = 65_535;

/// Where a `ct` meets fragments: its zone, the port they came in on and the
/// recirculation they are in (a later `ct` of the same zone gathers them again).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct FragPlace {
    pub zone: u16,
    pub in_port: u32,
    pub recirc_id: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct ListKey {
    src: u128,
    dst: u128,
    id: u32,
    v6: bool,
    /// IPv4's protocol (0 for IPv6, whose fragments may differ in the extension
    /// headers before their fragment header; as Open vSwitch).
    proto: u8,
    place: FragPlace,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ListState {
    OtherSeen,
    FirstSeen,
    LastSeen,
    FirstLastSeen,
    /// Complete, but too big to put together: refused until it expires.
    Failed,
}

impl ListState {
    fn name(self) -> &'static str {
        match self {
            ListState::OtherSeen => "other frag",
            ListState::FirstSeen => "first frag",
            ListState::LastSeen => "last frag",
            ListState::FirstLastSeen => "first/last frag",
            ListState::Failed => "reassemble fail",
        }
    }

    fn after(self, first: bool, last: bool) -> ListState {
        use ListState::*;
        match (self, first, last) {
            (Failed, _, _) => Failed,
            (FirstLastSeen, _, _) | (FirstSeen, _, true) | (LastSeen, true, _) => FirstLastSeen,
            (OtherSeen, true, _) => FirstSeen,
            (OtherSeen, _, true) => LastSeen,
            (s, _, _) => s,
        }
    }
}

/// One fragment kept: its frame, and where its IP header and its part of the
/// datagram's payload are in it.
#[derive(Clone, Debug)]
pub struct HeldFragment {
    pub frame: Vec<u8>,
    pub l3: usize,
    /// Where its part of the payload starts (behind the IPv4 header, or behind
    /// IPv6's fragment header).
    pub payload_at: usize,
    /// The payload's first and last byte in the datagram's.
    start: usize,
    end: usize,
    last: bool,
}

struct FragList {
    frags: Vec<HeldFragment>,
    state: ListState,
    expires_ms: u64,
}

/// What a fragment that completed its datagram gives: the datagram (a frame as
/// the first fragment's, whole) and its fragments in order.
#[derive(Clone, Debug)]
pub struct Reassembled {
    pub datagram: Vec<u8>,
    pub fragments: Vec<HeldFragment>,
    pub v6: bool,
    /// Where the datagram's IP header and payload start (the first fragment's).
    l3: usize,
    payload_at: usize,
}

impl Reassembled {
    /// Writes into `frag` (one of [`Reassembled::fragments`]) what was written
    /// into the datagram since it was put together (NAT's addresses, and, into
    /// the first fragment, its transport header): each fragment goes on as the
    /// datagram would have.
    pub fn carry_into(&self, frag: &mut HeldFragment) {
        let (dl3, dpay) = (self.l3, self.payload_at);
        let d = &self.datagram;
        let l3 = frag.l3;
        let f = &mut frag.frame;
        if self.v6 {
            f[l3 + 8..l3 + V6_HEADER].copy_from_slice(&d[dl3 + 8..dl3 + V6_HEADER]);
        } else {
            f[l3 + 12..l3 + 20].copy_from_slice(&d[dl3 + 12..dl3 + 20]);
            let ihl = usize::from(f[l3] & 0x0f) * 4;
            f[l3 + 10..l3 + 12].fill(0);
            let sum = ipv4_header_sum(&f[l3..l3 + ihl]);
            f[l3 + 10..l3 + 12].copy_from_slice(&(!sum).to_be_bytes());
        }
        if frag.start == 0 {
            let len = frag.end + 1;
            let at = frag.payload_at;
            f[at..at + len].copy_from_slice(&d[dpay..dpay + len]);
        }
    }
}

/// What a `ct` does with a packet, fragment or not.
#[derive(Debug)]
pub enum Defrag {
    /// Not a fragment: tracked as it is.
    Whole,
    /// A fragment refused (malformed, too small, overlapping, over a limit,
    /// reassembly off): invalid to the tracker.
    Invalid,
    /// Kept until its datagram is complete: it goes no further now.
    Held,
    /// It completed its datagram.
    Complete(Box<Reassembled>),
}

#[derive(Clone, Copy, Debug)]
enum Counter {
    Accepted,
    CompletedSent,
    Expired,
    TooSmall,
    Overlap,
    Purged,
}

/// Each counter under its name (metrics'; `ipf-get-status` prints it with spaces).
const COUNTERS: [(&str, Counter); 6] = [
    ("accepted", Counter::Accepted),
    ("completed", Counter::CompletedSent),
    ("expired", Counter::Expired),
    ("too_small", Counter::TooSmall),
    ("overlapped", Counter::Overlap),
    ("purged", Counter::Purged),
];

/// One family's counters and settings.
#[derive(Default)]
struct Family {
    enabled: AtomicBool,
    min_frag: AtomicU32,
    counts: [AtomicU64; 6],
}

impl Family {
    fn count(&self, c: Counter) {
        self.counts[c as usize].fetch_add(1, Ordering::Relaxed);
    }

    fn add(&self, c: Counter, n: usize) {
        self.counts[c as usize].fetch_add(n as u64, Ordering::Relaxed);
    }

    fn get(&self, c: Counter) -> u64 {
        self.counts[c as usize].load(Ordering::Relaxed)
    }
}

#[derive(Default)]
struct Lists {
    lists: HashMap<ListKey, FragList>,
    /// Lists in the order they expire (made, plus the same timeout each); a key
    /// whose list was completed or replaced since is passed over.
    expiry: VecDeque<(u64, ListKey)>,
}

/// The fragments kept, their limits and counters.
pub struct Ipf {
    lists: Mutex<Lists>,
    nfrag: AtomicU32,
    max_nfrags: AtomicU32,
    v4: Family,
    v6: Family,
}

impl Default for Ipf {
    fn default() -> Ipf {
        let ipf = Ipf {
            lists: Mutex::default(),
            nfrag: AtomicU32::new(0),
            max_nfrags: AtomicU32::new(MAX_FRAGS_DEFAULT),
            v4: Family::default(),
            v6: Family::default(),
        };
        for (f, min) in [
            (&ipf.v4, V4_MIN_FRAG_DEFAULT),
            (&ipf.v6, V6_MIN_FRAG_DEFAULT),
        ] {
            f.enabled.store(true, Ordering::Relaxed);
            f.min_frag.store(min, Ordering::Relaxed);
        }
        ipf
    }
}

/// Why a setting was refused, in Open vSwitch's words.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum IpfSetError {
    #[error("requested minimum fragment size too small; see documentation")]
    MinFragTooSmall,
    #[error("setting maximum fragments failed")]
    TooManyFrags,
}

/// A fragment as read from its frame.
struct Parsed {
    key_src: u128,
    key_dst: u128,
    id: u32,
    proto: u8,
    /// The IP packet's length (the frame may be padded past it).
    ip_len: usize,
    payload_at: usize,
    start: usize,
    end: usize,
    first: bool,
    last: bool,
}

/// The ones' complement sum of an IPv4 header (0xffff when its checksum is right).
fn ipv4_header_sum(h: &[u8]) -> u16 {
    let mut sum: u32 = h
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

enum Read {
    Whole,
    Bad,
    TooSmall,
    Frag(Parsed),
}

fn read_v4(ip: &[u8], min_frag: u32) -> Read {
    if ip.len() < 20 || ip[0] >> 4 != 4 {
        return Read::Bad;
    }
    let off_m = u16_at(ip, 6);
    let (offset, more) = (usize::from(off_m & V4_OFFSET) * 8, off_m & V4_MORE != 0);
    if offset == 0 && !more {
        return Read::Whole;
    }
    let ihl = usize::from(ip[0] & 0x0f) * 4;
    let total = usize::from(u16_at(ip, 2));
    if ihl < 20 || total <= ihl || total > ip.len() || ipv4_header_sum(&ip[..ihl]) != 0xffff {
        return Read::Bad;
    }
    let last = !more;
    if !last && total < min_frag as usize {
        return Read::TooSmall;
    }
    let end = offset + (total - ihl) - 1;
    // All but the last end on a multiple of 8 (or no fragment could follow).
    if end >= IP_MAX || (more && !(end + 1).is_multiple_of(8)) {
        return Read::Bad;
    }
    Read::Frag(Parsed {
        key_src: u128::from(u32::from_be_bytes(ip[12..16].try_into().unwrap_or([0; 4]))),
        key_dst: u128::from(u32::from_be_bytes(ip[16..20].try_into().unwrap_or([0; 4]))),
        id: u32::from(u16_at(ip, 4)),
        proto: ip[9],
        ip_len: total,
        payload_at: ihl,
        start: offset,
        end,
        first: offset == 0,
        last,
    })
}

fn read_v6(ip: &[u8], min_frag: u32) -> Read {
    if ip.len() < V6_HEADER || ip[0] >> 4 != 6 {
        return Read::Bad;
    }
    let total = V6_HEADER + usize::from(u16_at(ip, 4));
    if total > ip.len() {
        return Read::Bad;
    }
    let ip = &ip[..total];
    let (mut next, mut at) = (ip[6], V6_HEADER);
    // Extension headers before the fragment header (as many as the tracker's own
    // walk follows).
    for _ in 0..8 {
        let len = match next {
            0 | 43 | 60 => match ip.get(at + 1) {
                Some(&l) => (usize::from(l) + 1) * 8,
                None => return Read::Bad,
            },
            51 => match ip.get(at + 1) {
                Some(&l) => (usize::from(l) + 2) * 4,
                None => return Read::Bad,
            },
            44 => {
                let Some(fh) = ip.get(at..at + 8) else {
                    return Read::Bad;
                };
                let off_m = u16_at(fh, 2);
                let (offset, more) = (usize::from(off_m & 0xfff8), off_m & 1 != 0);
                if offset == 0 && !more {
                    return Read::Whole;
                }
                let payload_at = at + 8;
                if total <= payload_at {
                    return Read::Bad;
                }
                if more && total < min_frag as usize {
                    return Read::TooSmall;
                }
                let end = offset + (total - payload_at) - 1;
                if end >= IP_MAX || (more && !(end + 1).is_multiple_of(8)) {
                    return Read::Bad;
                }
                let addr = |r: std::ops::Range<usize>| {
                    u128::from_be_bytes(ip[r].try_into().unwrap_or([0; 16]))
                };
                return Read::Frag(Parsed {
                    key_src: addr(8..24),
                    key_dst: addr(24..40),
                    id: u32::from_be_bytes(fh[4..8].try_into().unwrap_or([0; 4])),
                    proto: 0,
                    ip_len: total,
                    payload_at,
                    start: offset,
                    end,
                    first: offset == 0,
                    last: !more,
                });
            }
            _ => return Read::Whole,
        };
        if at + len > total {
            return Read::Bad;
        }
        next = ip[at];
        at += len;
    }
    Read::Whole
}

impl Ipf {
    fn family(&self, v6: bool) -> &Family {
        if v6 {
            &self.v6
        } else {
            &self.v4
        }
    }

    /// What a `ct` at `place` does with the IP packet at `l3` in `frame` at
    /// `now_ms`.
    pub fn gather(
        &self,
        frame: &[u8],
        l3: usize,
        v6: bool,
        place: FragPlace,
        now_ms: u64,
    ) -> Defrag {
        let fam = self.family(v6);
        let Some(ip) = frame.get(l3..) else {
            return Defrag::Invalid;
        };
        let min = fam.min_frag.load(Ordering::Relaxed);
        let p = match if v6 {
            read_v6(ip, min)
        } else {
            read_v4(ip, min)
        } {
            Read::Whole => return Defrag::Whole,
            Read::Bad => return Defrag::Invalid,
            Read::TooSmall => {
                fam.count(Counter::TooSmall);
                return Defrag::Invalid;
            }
            Read::Frag(p) => p,
        };
        if !fam.enabled.load(Ordering::Relaxed) {
            return Defrag::Invalid;
        }
        let mut g = self.lists.lock();
        self.expire_locked(&mut g, now_ms, 1);
        if self.nfrag.load(Ordering::Relaxed) >= self.max_nfrags.load(Ordering::Relaxed) {
            return Defrag::Invalid;
        }
        let key = ListKey {
            src: p.key_src,
            dst: p.key_dst,
            id: p.id,
            v6,
            proto: p.proto,
            place,
        };
        let max_list = if v6 {
            V6_MAX_LIST
        } else {
            // As many of the smallest fragments as a largest datagram takes.
            (IP_MAX - V4_MAX_HEADER).div_ceil((min as usize).saturating_sub(V4_MAX_HEADER).max(1))
        };
        let Lists { lists, expiry } = &mut *g;
        if !lists.contains_key(&key) {
            let expires_ms = now_ms + LIST_TIMEOUT_MS;
            // Lists completed leave their place in the queue until it comes up:
            // those places are let go when they outnumber the lists.
            if expiry.len() > 2 * lists.len() + 64 {
                expiry.retain(|(at, k)| lists.get(k).is_some_and(|l| l.expires_ms == *at));
            }
            expiry.push_back((expires_ms, key));
            lists.insert(
                key,
                FragList {
                    frags: Vec::new(),
                    state: ListState::OtherSeen,
                    expires_ms,
                },
            );
        }
        let list = lists.get_mut(&key).expect("just made");
        if list.state == ListState::Failed || list.frags.len() >= max_list {
            return Defrag::Invalid;
        }
        if list
            .frags
            .iter()
            .any(|f| p.start <= f.end && p.end >= f.start)
        {
            fam.count(Counter::Overlap);
            return Defrag::Invalid;
        }
        // Nothing past the last fragment, and one last fragment.
        if list
            .frags
            .iter()
            .any(|f| (f.last && p.start > f.end) || (p.last && f.end > p.end))
        {
            return Defrag::Invalid;
        }
        list.frags.push(HeldFragment {
            frame: frame[..l3 + p.ip_len].to_vec(),
            l3,
            payload_at: l3 + p.payload_at,
            start: p.start,
            end: p.end,
            last: p.last,
        });
        self.nfrag.fetch_add(1, Ordering::Relaxed);
        fam.count(Counter::Accepted);
        list.state = list.state.after(p.first, p.last);
        if list.state != ListState::FirstLastSeen {
            return Defrag::Held;
        }
        list.frags.sort_by_key(|f| f.start);
        let contiguous = list.frags.windows(2).all(|w| w[0].end + 1 == w[1].start);
        if !contiguous || !list.frags.last().is_some_and(|f| f.last) {
            return Defrag::Held;
        }
        match put_together(&list.frags, v6) {
            Some(datagram) => {
                let list = lists.remove(&key).expect("the list just looked at");
                let n = list.frags.len();
                self.nfrag.fetch_sub(n as u32, Ordering::Relaxed);
                fam.add(Counter::CompletedSent, n);
                let (l3, payload_at) = (list.frags[0].l3, list.frags[0].payload_at);
                Defrag::Complete(Box::new(Reassembled {
                    datagram,
                    fragments: list.frags,
                    v6,
                    l3,
                    payload_at,
                }))
            }
            None => {
                list.state = ListState::Failed;
                Defrag::Held
            }
        }
    }

    /// Drops the fragments of datagrams not complete by `now_ms`; how many.
    pub fn expire(&self, now_ms: u64) -> usize {
        let mut g = self.lists.lock();
        self.expire_locked(&mut g, now_ms, usize::MAX)
    }

    fn expire_locked(&self, g: &mut Lists, now_ms: u64, most: usize) -> usize {
        let mut dropped = 0;
        let mut lists_gone = 0;
        while lists_gone < most {
            let Some(&(at, key)) = g.expiry.front() else {
                break;
            };
            if at > now_ms {
                break;
            }
            g.expiry.pop_front();
            if g.lists.get(&key).is_some_and(|l| l.expires_ms == at) {
                let l = g.lists.remove(&key).expect("present");
                let n = l.frags.len();
                self.nfrag.fetch_sub(n as u32, Ordering::Relaxed);
                self.family(key.v6).add(Counter::Expired, n);
                dropped += n;
                lists_gone += 1;
            }
        }
        dropped
    }

    /// Every counter: (family `v4`/`v6`, what became of the fragments, how many):
    /// `accepted`, `completed` (sent on with their datagram), `expired`,
    /// `too_small`, `overlapped`, `purged`.
    pub fn counts(&self) -> Vec<(&'static str, &'static str, u64)> {
        let mut out = Vec::with_capacity(12);
        for (name, fam) in [("v4", &self.v4), ("v6", &self.v6)] {
            for (what, c) in COUNTERS {
                out.push((name, what, fam.get(c)));
            }
        }
        out
    }

    /// Fragments kept now.
    pub fn nfrag(&self) -> u32 {
        self.nfrag.load(Ordering::Relaxed)
    }

    pub fn set_enabled(&self, v6: bool, on: bool) {
        self.family(v6).enabled.store(on, Ordering::Relaxed);
    }

    pub fn enabled(&self, v6: bool) -> bool {
        self.family(v6).enabled.load(Ordering::Relaxed)
    }

    /// Sets the smallest fragment (other than a last) taken.
    pub fn set_min_frag(&self, v6: bool, bytes: u32) -> Result<(), IpfSetError> {
        if bytes < MIN_FRAG_LOWEST {
            return Err(IpfSetError::MinFragTooSmall);
        }
        self.family(v6).min_frag.store(bytes, Ordering::Relaxed);
        Ok(())
    }

    pub fn min_frag(&self, v6: bool) -> u32 {
        self.family(v6).min_frag.load(Ordering::Relaxed)
    }

    /// Sets how many fragments are kept at once at most.
    pub fn set_max_nfrags(&self, n: u32) -> Result<(), IpfSetError> {
        if n > MAX_FRAGS_HIGHEST {
            return Err(IpfSetError::TooManyFrags);
        }
        self.max_nfrags.store(n, Ordering::Relaxed);
        Ok(())
    }

    pub fn max_nfrags(&self) -> u32 {
        self.max_nfrags.load(Ordering::Relaxed)
    }

    /// `dpctl/ipf-get-status [-m]` as Open vSwitch prints it; `verbose` adds the
    /// datagrams being gathered.
    pub fn format_status(&self, verbose: bool) -> String {
        let mut s = String::new();
        let mut line = |l: String| {
            s.push_str("        ");
            s.push_str(&l);
            s.push('\n');
        };
        line("Fragmentation Module Status".into());
        line("---------------------------".into());
        line(format!("v4 enabled: {}", u8::from(self.enabled(false))));
        line(format!("v6 enabled: {}", u8::from(self.enabled(true))));
        line(format!("max num frags (v4/v6): {}", self.max_nfrags()));
        line(format!("num frag: {}", self.nfrag()));
        for (name, fam) in [("v4", &self.v4), ("v6", &self.v6)] {
            line(format!(
                "min {name} frag size: {}",
                fam.min_frag.load(Ordering::Relaxed)
            ));
            for (what, c) in COUNTERS {
                // Open vSwitch's words: the metric's with spaces.
                let what = what.replace('_', " ");
                line(format!("{name} frags {what}: {}", fam.get(c)));
            }
        }
        if verbose {
            s.push_str("\n        Fragment Lists:\n\n");
            let g = self.lists.lock();
            for (k, l) in &g.lists {
                s.push_str(&format_list(k, l));
                s.push('\n');
            }
        }
        s
    }
}

fn format_list(k: &ListKey, l: &FragList) -> String {
    let (src, dst, dl_type) = if k.v6 {
        (
            Ipv6Addr::from(k.src).to_string(),
            Ipv6Addr::from(k.dst).to_string(),
            0x86dd,
        )
    } else {
        (
            Ipv4Addr::from(k.src as u32).to_string(),
            Ipv4Addr::from(k.dst as u32).to_string(),
            0x800,
        )
    };
    format!(
        "(src={src},dst={dst},recirc_id={},ip_id={},dl_type=0x{dl_type:x},zone={},nw_proto={},num_fragments={},state={})",
        k.place.recirc_id,
        k.id,
        k.place.zone,
        k.proto,
        l.frags.len(),
        l.state.name()
    )
}

/// The datagram of `frags` (sorted, contiguous, first to last): the first
/// fragment's frame with every fragment's payload behind it, its lengths and
/// fragment fields those of a whole packet. `None` past IP's largest packet.
fn put_together(frags: &[HeldFragment], v6: bool) -> Option<Vec<u8>> {
    let first = &frags[0];
    let payload: usize = frags.iter().map(|f| f.end - f.start + 1).sum();
    let header = first.payload_at - first.l3;
    if header + payload > IP_MAX + if v6 { V6_HEADER } else { 0 } {
        return None;
    }
    let mut d = Vec::with_capacity(first.payload_at + payload);
    d.extend_from_slice(&first.frame);
    for f in &frags[1..] {
        d.extend_from_slice(&f.frame[f.payload_at..]);
    }
    let l3 = first.l3;
    if v6 {
        let plen = (header - V6_HEADER + payload) as u16;
        d[l3 + 4..l3 + 6].copy_from_slice(&plen.to_be_bytes());
        // An atomic fragment (offset 0, no more): a whole packet to the tracker,
        // at the same offsets as the first fragment's.
        let fh = first.payload_at - 8;
        d[fh + 2..fh + 4].fill(0);
    } else {
        let total = (header + payload) as u16;
        d[l3 + 2..l3 + 4].copy_from_slice(&total.to_be_bytes());
        // Keeps don't-fragment; no more fragments, offset 0.
        d[l3 + 6] &= 0x40;
        d[l3 + 7] = 0;
        d[l3 + 10..l3 + 12].fill(0);
        let sum = ipv4_header_sum(&d[l3..l3 + header]);
        d[l3 + 10..l3 + 12].copy_from_slice(&(!sum).to_be_bytes());
    }
    Some(d)
}
