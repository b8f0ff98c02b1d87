//! Translation: a key walks the pipeline from table 0. Each table's lookup adds the
//! bits it looked at to the wildcard mask (the masks of every subtable probed, hit or
//! not); each action of the matching rule either becomes a datapath action or takes
//! the walk to another table (`goto_table`, `resubmit`). `NORMAL` looks at the MAC
//! table and becomes outputs. Rewrites change the working key, so later tables see
//! the packet as it will be.

use std::sync::{Arc, Mutex};

use vsw_datapath::DpAction;
use vsw_flow::fields::Needs;
use vsw_flow::subfield::{ones, Field, Subfield};
use vsw_flow::{Action, Bucket, Group, GroupType, MacTable, MatchKey, Pipeline, Rule};
use vsw_packet::key::VLAN_CFI;
use vsw_packet::rewrite::{is_mpls, FieldWrite, NshField};
use vsw_packet::wire::{mpls, pbb};
use vsw_packet::EtherType;
use vsw_packet::{FlowKey, MacAddr};

use crate::bridge_state::{lock, BridgeState, Learning};
use crate::frozen::{Frozen, Resume};
use crate::punt_notes::{Continuation, Frame, PuntNote, PuntNotes, PuntReason, RuleRef};
use crate::slot::BridgeSlot;
use crate::view::BackerView;

mod encap;

/// How deep `resubmit` and `goto_table` may nest before translation gives up (as
/// Open vSwitch's limit): a loop of resubmits is caught here, the packet dropped.
pub const MAX_RESUBMIT_DEPTH: usize = 64;

/// Copies of the packet a translation may have the datapath hold at once (groups
/// within groups' buckets).
pub const MAX_SAVES: usize = vsw_datapath::MAX_SAVED;

/// The live bucket (of `(bucket, weight)`, in order) at `weight` of their weights
/// laid end to end (`weight` below their sum), and the weights that are its.
fn weighted(live: &[(usize, u32)], weight: u32) -> Option<(usize, std::ops::Range<u32>)> {
    let mut start = 0;
    live.iter().find_map(|&(i, w)| {
        let end = start + w;
        if weight < end {
            Some((i, start..end))
        } else {
            start = end;
            None
        }
    })
}

/// The VID and the "tag present" bit: what NORMAL switches by.
const VLAN_VID_CFI: u16 = 0x0fff | VLAN_CFI;

/// IP-in-IP's inner header protocols: IPv4 and IPv6.
const IPPROTO_IPIP: u8 = 4;
const IPPROTO_IPV6_INNER: u8 = 41;

/// Where each set-field write runs in an action set, after the classic fields.
fn field_write_kind(w: &FieldWrite) -> u8 {
    match w {
        FieldWrite::Ipv6Src(_) => 0,
        FieldWrite::Ipv6Dst(_) => 1,
        FieldWrite::Ipv6Label(_) => 2,
        FieldWrite::IpEcn(_) => 3,
        FieldWrite::NwTtl(_) => 4,
        FieldWrite::ArpOp(_) => 5,
        FieldWrite::ArpSpa(_) => 6,
        FieldWrite::ArpTpa(_) => 7,
        FieldWrite::ArpSha(_) => 8,
        FieldWrite::ArpTha(_) => 9,
        FieldWrite::Icmpv4Type(_) => 10,
        FieldWrite::Icmpv4Code(_) => 11,
        FieldWrite::Icmpv6Type(_) => 12,
        FieldWrite::Icmpv6Code(_) => 13,
        FieldWrite::NdTarget(_) => 14,
        FieldWrite::NdSll(_) => 15,
        FieldWrite::NdTll(_) => 16,
        // Ordered among the pops and pushes (`ActionSet::kind`).
        FieldWrite::CopyTtlOut => 17,
        FieldWrite::CopyTtlIn => 18,
        FieldWrite::PbbIsid(_) => 19,
        // After the tunnel's and MPLS's (40–44), before the queue (60).
        FieldWrite::Nsh(f, _) => 25 + encap::field_index(*f),
    }
}

/// What of `k` a push leaves the key knowing: the pipeline's and the tunnel's
/// fields and the Ethernet addresses; what the pushed header covers is hidden.
fn addresses_only(k: &FlowKey) -> FlowKey {
    FlowKey {
        dl_src: k.dl_src,
        dl_dst: k.dl_dst,
        ..metadata_only(k)
    }
}

/// What of `k` a packet with none of its headers keeps: where it came in, its
/// pass, metadata and tunnel (an encap's new packet, or what a decap uncovered).
fn metadata_only(k: &FlowKey) -> FlowKey {
    FlowKey {
        in_port: k.in_port,
        recirc_id: k.recirc_id,
        metadata: k.metadata,
        tun_id: k.tun_id,
        tun_src: k.tun_src,
        tun_dst: k.tun_dst,
        tun_metadata0: k.tun_metadata0,
        tun_flags: k.tun_flags,
        ..FlowKey::default()
    }
}

/// The key as the packet will be after `w` (later tables see it so). A TTL copy
/// changes a TTL the key does not hold (inwards) or cannot know (outwards: see
/// `Ctx::ttl_unknown`).
fn write_key(k: &mut FlowKey, w: FieldWrite) {
    match w {
        FieldWrite::Ipv6Src(a) => k.nw_src = u128::from_be_bytes(a),
        FieldWrite::Ipv6Dst(a) => k.nw_dst = u128::from_be_bytes(a),
        FieldWrite::Ipv6Label(l) => k.label = l & 0xfffff,
        FieldWrite::IpEcn(e) => k.nw_tos = (k.nw_tos & !3) | (e & 3),
        FieldWrite::NwTtl(t) => k.nw_ttl = t,
        // The key keeps ARP's opcode where IP's protocol is, in 8 bits.
        FieldWrite::ArpOp(o) => k.nw_proto = o as u8,
        FieldWrite::ArpSpa(a) => k.nw_src = u128::from(u32::from_be_bytes(a)),
        FieldWrite::ArpTpa(a) => k.nw_dst = u128::from(u32::from_be_bytes(a)),
        FieldWrite::ArpSha(m) | FieldWrite::NdSll(m) => k.arp_sha = m,
        FieldWrite::ArpTha(m) | FieldWrite::NdTll(m) => k.arp_tha = m,
        FieldWrite::Icmpv4Type(t) | FieldWrite::Icmpv6Type(t) => k.tp_src = u16::from(t),
        FieldWrite::Icmpv4Code(c) | FieldWrite::Icmpv6Code(c) => k.tp_dst = u16::from(c),
        FieldWrite::NdTarget(a) => k.nd_target = u128::from_be_bytes(a),
        FieldWrite::PbbIsid(i) => k.label = (k.label & !pbb::ISID_MASK) | (i & pbb::ISID_MASK),
        FieldWrite::Nsh(f, v) => encap::write_key(k, f, v),
        FieldWrite::CopyTtlOut | FieldWrite::CopyTtlIn => {}
    }
}

/// One table visited (or what NORMAL decided there).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceStep {
    /// 1 for table 0 reached from the packet, deeper for goto_table and resubmit.
    pub depth: usize,
    pub table: u8,
    pub text: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum XlateError {
    #[error("resubmits nested deeper than {MAX_RESUBMIT_DEPTH} (a loop?): dropped")]
    TooDeep,
    #[error(
        "a table or an action read the TTL that copy_ttl_out took from the inner IP \
         header, which translation does not see: dropped"
    )]
    TtlUnknown,
    #[error("more than {MAX_STACK} values pushed on the stack: dropped")]
    StackFull,
    #[error(
        "controller(pause) in a clone, a group bucket, the action set or a bridge a patch \
         port led to: nothing one resume could continue, dropped"
    )]
    PauseNested,
    #[error(
        "after pop_mpls or pop_pbb, an action in a clone, a group bucket or the action set \
         (or the first table of a bridge a patch port led to) needs the packet behind the \
         label or I-TAG, which only a recirculation from the pipeline's own actions shows: \
         dropped"
    )]
    MplsNested,
    #[error(
        "check_pkt_larger nested more than {} deep: dropped",
        vsw_datapath::MAX_FORKS
    )]
    TooManyForks,
    /// An `encap`, `decap` or rewrite on a packet type vsw does not carry (NSH or
    /// MPLS without Ethernet, bare L3).
    #[error("{0}: dropped")]
    Nsh(&'static str),
    /// An action the datapath does not carry out yet.
    #[error("{0}() is not carried out by the datapath yet: dropped")]
    NotCarried(&'static str),
}

/// What a pop took off, leaving the key blind to what is behind it; or an NSH
/// header the packet has without an Ethernet header in front.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Popped {
    Nothing,
    /// An MPLS label (`pop_mpls`): the Ethernet header is still the key's.
    Mpls,
    /// A PBB backbone header and I-TAG (`pop_pbb`): the whole frame is new.
    Pbb,
    /// An Ethernet header and the NSH header or label behind it (`decap()`
    /// twice): the whole frame is new.
    Decapped,
    /// `encap(nsh)` or `encap(mpls)`: the key is the new header's, which the
    /// datapath pushes with the `encap(ethernet)` that must follow (nothing is
    /// pushed before; rewrites change the key the push is made from).
    EncapPending,
    /// A packet without Ethernet whose frame holds it behind an Ethernet header
    /// that is not the packet's: after a `decap()` of Ethernet (the datapath takes
    /// that header off with NSH's or MPLS's at the next `decap()`), or as a
    /// packet-type-aware VXLAN-GPE port received it (the datapath's placeholder);
    /// the push of an L3 tunnel port takes the header off.
    EthernetDecapped,
}

impl Popped {
    /// The key holds nothing of what is behind the pop: tables and most actions
    /// wait for a recirculation.
    fn blind(self) -> bool {
        matches!(self, Popped::Mpls | Popped::Pbb | Popped::Decapped)
    }

    /// The packet has no Ethernet header of its own: no Ethernet port, LOCAL or
    /// controller takes it; only a tunnel port that carries it does (and only
    /// once the frame holds the packet: `EthernetDecapped`).
    fn bare(self) -> bool {
        matches!(self, Popped::EncapPending | Popped::EthernetDecapped)
    }

    fn action(self) -> &'static str {
        match self {
            Popped::Nothing => "nothing",
            Popped::Mpls => "pop_mpls",
            Popped::Pbb => "pop_pbb",
            Popped::Decapped => "decap()",
            Popped::EncapPending => "encap",
            Popped::EthernetDecapped => "decap() of Ethernet",
        }
    }
}

/// Values `push` may hold on a translation's stack.
pub const MAX_STACK: usize = 1024;

/// A translation's result.
#[derive(Clone, Debug, Default)]
pub struct Xlated {
    pub mask: FlowKey,
    /// Empty: drop.
    pub actions: Vec<DpAction>,
    /// Every rule that matched, in the order they did (their counters are credited).
    pub rules: Vec<Arc<Rule>>,
    /// Every table looked up, and whether a rule matched there (table statistics).
    pub tables: Vec<(u8, bool)>,
    /// Every group the packet went through (`None`), and each bucket it ran
    /// (`Some(index)`): their counters are credited.
    pub groups: Vec<(Arc<Group>, Option<usize>)>,
    /// The sources NORMAL learned (or would have): (MAC, VLAN, port).
    pub learned: Vec<(MacAddr, u16, u32)>,
    /// What NORMAL learned in bridges a patch port led to, with their tables.
    pub learned_across: Vec<(Arc<Mutex<MacTable>>, MacAddr, u16, u32)>,
    /// The changes of the bridges patch ports led it to (it depends on them).
    pub(crate) crossed: Vec<Arc<crate::generation::Changes>>,
    /// The frozen states it froze at or resumed from: its datapath flow holds them.
    pub(crate) frozen: Vec<Arc<Frozen>>,
    /// The notes of the packets it sends up: its datapath flow holds them.
    pub(crate) notes: Vec<Arc<PuntNote>>,
    /// The tunnel headers its `TunnelPush(i)` actions push, by index.
    pub pushed: Vec<Arc<vsw_datapath::PushHeader>>,
    /// The key after every rewrite.
    pub final_key: FlowKey,
    /// The pipeline's fields where the translation ended.
    pub final_pipeline: vsw_flow::PipelineFields,
    pub error: Option<XlateError>,
    /// Whether learning changed the MAC table (new or moved host) or snooping
    /// the multicast table (a new member or router port, a member gone).
    pub learning_changed: bool,
    /// The rules its `learn`s found in place or put there (a packet of its flow
    /// keeps them: their hard timeouts start over; if one goes, the flow is
    /// translated again and learns it again).
    pub learned_rules: Vec<Arc<Rule>>,
    /// The rules whose `fin_timeout(…)` a TCP FIN or RST of this flow passed,
    /// with the timeouts it gives (each packet of the flow cuts them).
    pub fin_timeouts: Vec<(Arc<Rule>, u16, u16)>,
    /// A `learn` put a rule in place.
    pub rules_learned: bool,
    /// The answer holds for this packet only (see `Translation::cacheable`).
    pub uncacheable: bool,
    /// Each table visited and what happened there (only when tracing).
    pub steps: Vec<TraceStep>,
}

/// What a translation reads and may change.
pub(crate) struct XlateEnv<'a> {
    pub pipeline: &'a Pipeline,
    /// The bridge whose pipeline it is: where a `learn` puts its rule.
    pub bridge: &'a BridgeState,
    pub macs: &'a mut MacTable,
    /// Every port, in flood order.
    pub ports: &'a [u32],
    pub now_ms: u64,
    /// A packet is passing: NORMAL learns its source.
    pub learn: bool,
    /// The bytes of the packet passing, when the datapath gave them: NORMAL's
    /// multicast snooping reads the IGMP and MLD reports in them.
    pub frame: Option<&'a [u8]>,
    /// A packet is passing (a packet-out's and a resumed one too): a `learn`
    /// puts its rule in place.
    pub learn_rules: bool,
    pub trace: bool,
    /// Where notes of packets sent to the controller are kept.
    pub punt_notes: &'a PuntNotes,
    /// Fail open: NORMAL decides every packet, the rules are not looked at.
    pub fail_open: bool,
    /// `flow-restore-wait`: every packet is dropped until the flows are restored.
    pub restore_wait: bool,
    /// Ports whose link is up (a fast-failover bucket watching one is live).
    pub live_ports: &'a [u32],
    /// The datapath's backer, when the bridge is in one: actions are emitted in
    /// datapath numbers and patch ports lead into other bridges.
    pub backer: Option<BackerView<'a>>,
    /// A select group may be decided by a recirculation (a packet passing through
    /// the datapath; not a packet-out, whose actions run without lookups).
    pub may_freeze: bool,
    /// The datapath's in_port does not name the packet's port in this bridge (it
    /// crossed a patch or a tunnel into it, or is a popped tunnel packet's pass):
    /// notes of packets sent to the controller carry the port.
    pub in_port_elsewhere: bool,
}

struct Ctx<'a, 'b> {
    env: &'b mut XlateEnv<'a>,
    /// The packet as the tables see it now, with the pipeline's fields.
    key: MatchKey,
    /// Every bit of `key` the translation looked at; its packet part becomes the
    /// datapath flow's mask (`Xlated::mask`), the pipeline's fields are a function
    /// of it.
    mask: MatchKey,
    out: Xlated,
    depth: usize,
    /// A NORMAL of this translation has learned already.
    learned: bool,
    /// Group buckets being run now (a packet sent up from one says so).
    in_group: usize,
    /// This pass is a select group's bucket, chosen by the datapath's hash
    /// after the packet was copied: the bucket is the pass's one rest, so a
    /// `ct(table=…)` or a pause in it may stop it (as in Open vSwitch, whose
    /// bucket finishes its own freeze).
    bucket_pass: bool,
    /// Copies of the packet the datapath holds now (`DpAction::Save`).
    saves: usize,
    /// What write-actions left for the end of the pipeline.
    action_set: ActionSet,
    /// copy_ttl_out gave the packet the inner header's TTL, which the key does not
    /// hold: a table that looks at the TTL after it cannot be answered.
    ttl_unknown: bool,
    /// In a bridge a patch port led to: its MAC table (what NORMAL learns here is
    /// refreshed there), and its tables are not the first bridge's to count.
    across: Option<Arc<Mutex<MacTable>>>,
    /// The bridges this translation went through before this one (their MAC
    /// tables are held): a patch back into one of them goes nowhere.
    path: Vec<BridgeSlot>,
    /// A resumed translation's: the cookie of the rule it froze under (a packet
    /// sent up from what it runs names that rule, as it would have unfrozen).
    resumed_cookie: u64,
    /// What `push` saved for `pop` (a clone's and a crossing's own copy).
    stack: Vec<u128>,
    /// Action lists run on a copy now (clones, buckets).
    copies: usize,
    /// The action set is running (the pipeline ended).
    in_action_set: bool,
    /// `controller(pause)` stopped the translation: what it had left, gathered as
    /// it unwinds.
    paused: Option<Paused>,
    /// `exit`: no action list runs on (but the action set).
    exiting: bool,
    /// The action list being run stops here (`dec_nsh_ttl` at TTL 1); the lists
    /// around it go on.
    stop_list: bool,
    /// This bridge's NORMAL read the passing frame's membership message already
    /// (once a bridge: a second NORMAL would count a leave twice; a bridge a
    /// patch port leads to reads it for its own table).
    frame_read: bool,
    /// MD type 2 TLVs an `encap(nsh)` waits to push at `encap(ethernet)` (set
    /// by every `encap(nsh)`).
    pending_tlvs: Option<Arc<[u8]>>,
    /// A `pop_mpls` took off a label, a `pop_pbb` a backbone header, or two
    /// `decap()`s an Ethernet header and what it carried: the key holds nothing
    /// of what is behind it (the datapath never parsed it), so a table or an
    /// action that may look at it needs the packet looked up again (Open
    /// vSwitch's `was_mpls`). Or the packet has no Ethernet header just now (an
    /// `encap` pending, or one `decap()`).
    popped: Popped,
    /// `check_pkt_larger` ways being translated now (the rest of an action list
    /// twice, once for each answer).
    forks: usize,
}

/// A translation `controller(pause)` stopped (or a recirculation after `pop_mpls`:
/// no note), unwinding.
struct Paused {
    note: Option<PuntNote>,
    meter: Option<u32>,
    table: u8,
    /// The rests of the action lists it was in, innermost first.
    frames: Vec<Frame>,
}

/// OpenFlow's action set: at most one action of each kind (one output, one group,
/// one change per header field …), run when the pipeline ends, in the spec's order
/// — VLAN pop, push, TTL, field changes, queue, then the group or else the output.
#[derive(Default)]
struct ActionSet {
    /// Each with the rule and table that wrote it.
    actions: Vec<(Action, Arc<Rule>, u8)>,
}

impl ActionSet {
    /// Which kind an action is, and where its kind runs (lower first): the spec's
    /// order is copy TTL inwards, pop, push (MPLS, PBB, VLAN), copy TTL outwards,
    /// decrement TTL, set-fields, queue, then group or output.
    fn kind(a: &Action) -> u8 {
        match a {
            Action::SetField(FieldWrite::CopyTtlIn) => 0,
            Action::StripVlan => 1,
            Action::PopMpls(_) => 2,
            Action::PopPbb => 3,
            Action::PushMpls(_) => 4,
            Action::PushPbb(_) => 5,
            Action::PushVlan(_) => 6,
            Action::SetField(FieldWrite::CopyTtlOut) => 7,
            Action::DecTtl | Action::DecTtlIds(_) => 8,
            Action::DecMplsTtl => 9,
            Action::SetDlSrc(_) => 10,
            Action::SetDlDst(_) => 11,
            Action::SetVlanVid(_) => 12,
            Action::SetVlanPcp(_) => 13,
            Action::SetNwSrc(_) => 14,
            Action::SetNwDst(_) => 15,
            Action::SetNwTos(_) => 16,
            Action::SetTpSrc(_) => 17,
            Action::SetTpDst(_) => 18,
            Action::SetTunnel(_) => 19,
            Action::SetTunnelDst(_) => 40,
            Action::SetTunnelMetadata(_) => 41,
            Action::SetMplsLabel(_) => 42,
            Action::SetMplsTc(_) => 43,
            Action::SetMplsTtl(_) => 44,
            Action::SetField(w) => 20 + field_write_kind(w),
            Action::SetQueue(_) => Self::QUEUE,
            Action::Group(_) => Self::GROUP,
            // Everything else that sends the packet somewhere is the output.
            _ => Self::OUTPUT,
        }
    }

    const QUEUE: u8 = 60;
    const GROUP: u8 = 70;
    const OUTPUT: u8 = 71;

    fn write(&mut self, a: Action, table: u8, rule: &Arc<Rule>) {
        let k = Self::kind(&a);
        self.actions.retain(|(b, _, _)| Self::kind(b) != k);
        self.actions.push((a, rule.clone(), table));
    }

    fn clear(&mut self) {
        self.actions.clear();
    }

    /// The actions in the order they run; a group takes the place of the output.
    fn take(&mut self) -> Vec<(Action, Arc<Rule>, u8)> {
        let mut v = std::mem::take(&mut self.actions);
        v.sort_by_key(|(a, _, _)| Self::kind(a));
        if v.iter().any(|(a, _, _)| Self::kind(a) == Self::GROUP) {
            v.retain(|(a, _, _)| Self::kind(a) != Self::OUTPUT);
        }
        v
    }
}

/// Translates `key` through the pipeline from table 0.
pub(crate) fn translate(env: &mut XlateEnv<'_>, key: &MatchKey) -> Xlated {
    run(env, key, |cx| cx.walk())
}

/// Resumes the translation `state` froze, for a packet's next pass (`key`, with
/// what only translation knows put back: [`Frozen::thaw`]).
pub(crate) fn resume(env: &mut XlateEnv<'_>, key: &MatchKey, state: &Arc<Frozen>) -> Xlated {
    run(env, key, |cx| {
        cx.out.frozen.push(state.clone());
        cx.resumed_cookie = state.cookie;
        cx.stack.clone_from(&state.stack);
        cx.saves = state.saves;
        cx.path.clone_from(&state.path);
        match &state.resume {
            Resume::SelectBucket { group, table } => cx.select_by_hash(*group, *table),
            // The first pass credited the rules whose rests these are.
            Resume::Continue(c) => cx.resume_paused(c, false),
        }
    })
}

/// The hash slots a select group of `buckets` live buckets is chosen over (a power
/// of two): 64 per bucket, at least 256, so that each bucket's share is within
/// half a percent of its weight's; at most 65,536. The next pass's flows do not
/// number the slots: each matches the largest aligned run of slots of one bucket
/// its hash falls in ([`bucket_block`]).
pub fn hash_slots(buckets: usize) -> u32 {
    (buckets.saturating_mul(64))
        .clamp(256, 65_536)
        .next_power_of_two() as u32
}

/// The first of `slots` whose weight ([`slot_weight`], which grows with the slot)
/// is `weight` or more; `slots` when none is.
fn first_slot_at(weight: u32, slots: u32, total: u32) -> u32 {
    let (mut lo, mut hi) = (0, slots);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if slot_weight(mid, slots, total) >= weight {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    lo
}

/// The mask of the hash's bits a flow of the next pass matches for slot `at` of
/// `slots`, when the slots `lo..hi` are its bucket's: the largest power-of-two run
/// of slots, aligned, holding `at` and no other bucket's. Weights 1:2 over 256
/// slots are 9 flows (runs of 64, 16, 4, 1 … slots), not 256.
pub fn bucket_block(at: u32, slots: u32, lo: u32, hi: u32) -> u32 {
    let mut size = slots;
    while size > 1 {
        let base = at & !(size - 1);
        if base >= lo && base + size <= hi {
            break;
        }
        size /= 2;
    }
    (slots - 1) & !(size - 1)
}

/// The weight (of `total`) hash slot `at` of `slots` stands for: the weight at the
/// slot's middle, so that each bucket gets the slots nearest its share (weights 1:2
/// over 16 slots: 5 and 11, the first bucket 6 % under its third; the slot's start
/// gave 6 and 10, 12 % over). Finer shares need more slots.
pub fn slot_weight(at: u32, slots: u32, total: u32) -> u32 {
    ((2 * u64::from(at) + 1) * u64::from(total) / (2 * u64::from(slots))) as u32
}

/// Continues what `controller(pause)` stopped (`c`) for the packet the controller
/// sent back (`key`, with the fields it said).
pub(crate) fn translate_resumed(
    env: &mut XlateEnv<'_>,
    key: &MatchKey,
    c: &Continuation,
) -> Xlated {
    run(env, key, |cx| cx.resume_paused(c, true))
}

/// Translates a list of actions for a packet of `key` (an OpenFlow packet-out's): as
/// if a rule of table 0 held them.
pub(crate) fn translate_actions(
    env: &mut XlateEnv<'_>,
    key: &MatchKey,
    actions: &[Action],
) -> Xlated {
    run(env, key, |cx| cx.actions(actions, 0, None))
}

fn run(env: &mut XlateEnv<'_>, key: &MatchKey, walk: impl FnOnce(&mut Ctx<'_, '_>)) -> Xlated {
    let mut cx = Ctx {
        env,
        key: *key,
        mask: MatchKey::default(),
        out: Xlated::default(),
        depth: 0,
        learned: false,
        in_group: 0,
        bucket_pass: false,
        saves: 0,
        action_set: ActionSet::default(),
        ttl_unknown: false,
        across: None,
        path: Vec::new(),
        resumed_cookie: u64::MAX,
        stack: Vec::new(),
        copies: 0,
        in_action_set: false,
        paused: None,
        exiting: false,
        stop_list: false,
        frame_read: false,
        pending_tlvs: None,
        // A packet that comes in without Ethernet (a packet-type-aware tunnel
        // port's IP or NSH, or one thawed after a decap()) is behind the
        // datapath's placeholder header, as after a decap() of Ethernet.
        popped: if key.pipeline.packet_type == vsw_flow::packet_type::ETHERNET {
            Popped::Nothing
        } else {
            Popped::EthernetDecapped
        },
        forks: 0,
    };
    // Every datapath flow matches one input port exactly.
    cx.mask.in_port = u32::MAX;
    walk(&mut cx);
    cx.finish_pause();
    if cx.out.error.is_some() {
        cx.out.actions.clear();
    }
    drop_trailing_copies(&mut cx.out.actions);
    cx.out.mask = cx.mask.packet;
    cx.out.final_key = cx.key.packet;
    cx.out.final_pipeline = cx.key.pipeline;
    cx.out
}

/// A copy kept for what follows it, with nothing following, is no copy at all: the
/// trailing `Save` … `Restore` pairs go (the datapath then changes the packet itself,
/// with no copy made; a later pass of a recirculation runs last, on it).
fn drop_trailing_copies(actions: &mut Vec<DpAction>) {
    // A fork's ways are counted: nothing in them moves.
    if actions
        .iter()
        .any(|a| matches!(a, DpAction::CheckPktLen { .. }))
    {
        return;
    }
    while actions.last() == Some(&DpAction::Restore) {
        let mut open = 0usize;
        let save = actions.iter().rposition(|a| {
            match a {
                DpAction::Restore => open += 1,
                DpAction::Save => open -= 1,
                _ => {}
            }
            open == 0
        });
        let Some(at) = save else {
            return;
        };
        actions.pop();
        actions.remove(at);
    }
}

impl Ctx<'_, '_> {
    /// The bridge's pipeline from table 0 (or what stands for it), then the action
    /// set.
    fn walk(&mut self) {
        if self.env.restore_wait {
            // No half-built pipeline forwards (nor does NORMAL learn) before the
            // controller or the operator says the flows are back.
            self.step(
                0,
                "flow-restore-wait: dropped until the flows are restored".into(),
            );
            return;
        }
        if self.env.fail_open {
            self.step(0, "fail open: NORMAL".into());
            self.normal(0);
            return;
        }
        self.table(0);
        self.end_of_pipeline();
    }

    /// The pipeline ended: the action set runs (unless a pause stopped it: the
    /// action set is the continuation's).
    fn end_of_pipeline(&mut self) {
        if self.paused.is_some() {
            return;
        }
        // After an exit too.
        self.exiting = false;
        self.in_action_set = true;
        for (a, rule, table) in self.action_set.take() {
            if self.out.error.is_some() {
                break;
            }
            if self.needs_recirculation(&a) {
                self.out.error = Some(XlateError::MplsNested);
                self.step(table, format!("{}", XlateError::MplsNested));
                break;
            }
            self.action(&a, table, Some(&rule));
        }
        self.in_action_set = false;
    }

    /// Resumes what `c` had left: each action list's rest, innermost first, then
    /// the action set (what was written before the pause, and since).
    fn resume_paused(&mut self, c: &Continuation, credit_rules: bool) {
        self.stack.clone_from(&c.stack);
        for (a, r, t) in &c.action_set {
            self.action_set.write(a.clone(), *t, &r.0);
        }
        for (k, f) in c.frames.iter().enumerate() {
            let rule = f.rule.as_ref().map(|r| r.0.clone());
            if let Some(r) = rule.as_ref().filter(|_| credit_rules) {
                self.out.rules.push(r.clone());
            }
            self.rule_actions(&f.actions, f.table, rule.as_ref());
            if self.out.error.is_some() {
                return;
            }
            if let Some(p) = self.paused.as_mut() {
                // Paused again: what the outer lists had left stays to do.
                p.frames.extend(c.frames[k + 1..].iter().cloned());
                return;
            }
            if self.exiting {
                break;
            }
        }
        self.end_of_pipeline();
    }

    /// Sends the packet to this bridge's port `of_port`: the port's datapath port,
    /// on into the peer's bridge for a patch port, nowhere for a port not in the
    /// datapath (down).
    fn output(&mut self, of_port: u32) {
        self.output_cut(of_port, None);
    }

    /// [`Self::output`], the packet cut to `max_len` bytes when there is one
    /// (`output(port=P,max_len=N)`; what follows sees it whole). As Open vSwitch:
    /// not to a patch port (what the peer bridge would make of a cut packet is not
    /// said); to a tunnel port the inner frame is cut, on a copy, and then
    /// encapsulated; to LOCAL the packet goes to the host as it is cut, never into
    /// a tunnel port's decapsulation.
    fn output_cut(&mut self, of_port: u32, max_len: Option<u32>) {
        let out = |dp: u32| match max_len {
            Some(max_len) => DpAction::OutputTrunc { port: dp, max_len },
            None => DpAction::Output(dp),
        };
        let Some(b) = self.env.backer else {
            // (No backer, no tunnel ports: a packet without Ethernet goes nowhere.)
            if !self.popped.bare() {
                self.emit(out(of_port));
            }
            return;
        };
        if let Some((slot, port)) = b.patch_peer(of_port) {
            if let Some(n) = max_len {
                self.step(
                    0,
                    format!("output(port={of_port},max_len={n}): not to a patch port"),
                );
                return;
            }
            self.cross(b, of_port, slot, port);
        } else if let Some(dp) = b.dp_port(of_port) {
            if self.popped.bare() && b.tunnel_port(of_port).is_none() {
                // As Open vSwitch: a legacy L2 port sends no packet without
                // Ethernet; the rest of the actions go on.
                self.step(
                    0,
                    format!(
                        "output to port {of_port}: a packet without an Ethernet header \
                         through an Ethernet port: skipped"
                    ),
                );
                return;
            }
            if b.tunnel_port(of_port).is_some() {
                self.push_pending_now();
            }
            let native = match (b.tunnel_port(of_port), max_len) {
                (Some(name), None) => self.tunnel_out(b, of_port, dp, name),
                (Some(name), Some(n)) => {
                    if self.saves == MAX_SAVES {
                        self.out.error = Some(XlateError::TooDeep);
                        return;
                    }
                    self.saves += 1;
                    self.emit(DpAction::Save);
                    self.emit(DpAction::Truncate(n));
                    if !self.tunnel_out(b, of_port, dp, name) {
                        self.emit(DpAction::Output(dp));
                    }
                    self.emit(DpAction::Restore);
                    self.saves -= 1;
                    true
                }
                (None, None) => of_port == vsw_flow::LOCAL_PORT && self.tunnel_in(b),
                (None, Some(_)) => false,
            };
            if !native {
                self.emit(out(dp));
            }
        }
    }

    /// `output(port=P,max_len=N)`: never back out of the port it came in on.
    fn output_truncated(&mut self, port: u32, max_len: u32, table: u8) {
        if port == self.key.in_port {
            self.step(
                table,
                "output with max_len: not back out of the input port".into(),
            );
            return;
        }
        self.output_cut(port, Some(max_len));
    }

    /// Takes a tunnel packet this bridge sends to its LOCAL port (the host's
    /// address) out of the host's way: its outer headers come off in the datapath
    /// and its inner frame is looked up again as its tunnel port received it
    /// (vsw-datapath's tunnel_egress.rs). False (nothing emitted) for the host's packets.
    fn tunnel_in(&mut self, b: BackerView<'_>) -> bool {
        let (Some(native), Some(me)) = (b.map.tunnels.as_ref(), b.map.bridges.get(&b.slot)) else {
            return false;
        };
        self.out.crossed.push(native.changes.clone());
        native
            .egress
            .snoop(&me.name, &self.key, &mut self.mask, self.env.learn);
        // The pop's copy must fit the budget (a packet-out's pops are looked up
        // again too: the PMD finds an injected packet's next pass as a received
        // one's).
        if self.saves == MAX_SAVES {
            return false;
        }
        let Some(pop) = native
            .egress
            .terminates(&me.name, &self.key, &mut self.mask)
        else {
            return false;
        };
        self.step(
            0,
            "output to LOCAL: a tunnel packet for a tunnel port: tnl_pop, looked up again".into(),
        );
        // What follows sees the packet as it was (the copy goes where nothing does).
        self.emit(DpAction::Save);
        self.emit(DpAction::TunnelPop(pop));
        self.emit(DpAction::Restore);
        true
    }

    /// Sends the packet out of tunnel port `of_port` (datapath port `dp`, named
    /// `name`) natively (vsw-datapath's tunnel_egress.rs): its outer headers pushed, then on in the
    /// underlay bridge as from its LOCAL port. False (nothing emitted) where it
    /// cannot: a port the tunnels' state does not have yet, an underlay bridge this
    /// translation holds already, no room; the packet goes to the tunnel port then,
    /// whose queue drops it (counted).
    fn tunnel_out(&mut self, b: BackerView<'_>, of_port: u32, dp: u32, name: &str) -> bool {
        let Some(native) = b.map.tunnels.as_ref() else {
            return false;
        };
        // Whatever the answer, it holds until the underlay changes.
        self.out.crossed.push(native.changes.clone());
        // What the answer read decides the flow whatever it is (a flow that falls
        // back to the port's queue must not take packets whose way is known).
        // A packet without Ethernet says its type (its frame's header is the
        // datapath's placeholder).
        let l3 = (self.popped == Popped::EthernetDecapped).then_some(self.key.dl_type);
        if l3.is_some() {
            // The type the GPE header says is read.
            self.mask.dl_type = u16::MAX;
        }
        let asked = native
            .egress
            .way_out(name, &self.key, l3, &mut self.mask, self.env.learn);
        let way = match asked {
            Ok(way) => way,
            Err(vsw_datapath::NoWay::ByQueue) => return false,
            Err(vsw_datapath::NoWay::NotCarried) => {
                // Open vSwitch's "Trying to send non-Ethernet packet through
                // legacy L2 port" (and GPE's protocols): this output is skipped.
                let what = match l3 {
                    Some(t) => format!("a packet of type (1,0x{t:04x})"),
                    None => format!("an Ethernet frame of type 0x{:04x}", self.key.dl_type),
                };
                self.step(
                    0,
                    format!("output to tunnel port {of_port}: it does not carry {what}: skipped"),
                );
                return true;
            }
            Err(vsw_datapath::NoWay::Dropped) => {
                // Open vSwitch's "neighbor cache miss" (or no route): nothing is
                // sent; the underlay's change re-translates the flow.
                self.step(
                    0,
                    format!("output to tunnel port {of_port}: no way out now, dropped"),
                );
                return true;
            }
        };
        let Ok(template) = vsw_packet::tunnel::EncapTemplate::new(&way.spec) else {
            return false;
        };
        let Some((slot, underlay)) = b.bridge_named(&way.underlay) else {
            return false;
        };
        if template.overhead() > vsw_packet::rewrite::MAX_PUSHED_HEADER
            || !underlay.to_dp.contains_key(&vsw_flow::LOCAL_PORT)
            || slot == b.slot
            || self.path.contains(&slot)
            || self.depth >= MAX_RESUBMIT_DEPTH
            || self.saves == MAX_SAVES
        {
            return false;
        }
        // The outer packet as the underlay bridge's rules see it (its UDP source
        // port is the inner flow's hash, written per packet: 0 here).
        let mut sample = [0u8; 512];
        let inner = [0u8; vsw_packet::ethernet::ETH_HDR_LEN];
        let Some(n) = template.push(&inner, &mut sample, 0, 0) else {
            return false;
        };
        let mut outer = FlowKey::default();
        if vsw_packet::extract(&sample[..n], vsw_flow::LOCAL_PORT, None, &mut outer).is_err() {
            return false;
        }
        let header = vsw_datapath::PushHeader {
            template,
            tunnel_port: dp,
        };
        // The flow's own header list: one entry per distinct header.
        let number = match self.out.pushed.iter().position(|h| **h == header) {
            Some(i) => i,
            None => {
                self.out.pushed.push(Arc::new(header));
                self.out.pushed.len() - 1
            }
        } as u32;
        self.step(
            0,
            format!(
                "output to tunnel port {of_port}: {} → {}, on to bridge {} as from its LOCAL port",
                way.spec.src, way.spec.dst, way.underlay
            ),
        );
        // The outer packet's fields decide nothing for the inner flow: they follow
        // from what `way_out` read (in `mask`) and the underlay's state.
        let kept = self.mask;
        self.continue_in(b, slot, outer.into(), Some(DpAction::TunnelPush(number)));
        self.mask = kept;
        true
    }

    /// Continues the translation in bridge `slot` as a packet received on its port
    /// `port` (a patch port's peer): its metadata and tunnel fields cleared, its own tables, MAC
    /// learning and ports, the megaflow's mask and the datapath actions growing on.
    /// What the peer's actions change of the packet, they change on a copy: what
    /// this bridge does after sees the packet as it was.
    fn cross(&mut self, b: BackerView<'_>, of_port: u32, slot: BridgeSlot, port: u32) {
        let Some(peer) = b.map.bridges.get(&slot) else {
            return;
        };
        if slot == b.slot || self.path.contains(&slot) {
            // Its MAC table is held by this translation already.
            self.step(
                0,
                format!(
                    "output to patch port {of_port}: back into bridge {}, which the packet \
                     went through: dropped",
                    peer.name
                ),
            );
            return;
        }
        if self.depth >= MAX_RESUBMIT_DEPTH || self.saves == MAX_SAVES {
            self.out.error = Some(XlateError::TooDeep);
            self.step(0, format!("{}", XlateError::TooDeep));
            return;
        }
        self.step(
            0,
            format!(
                "output to patch port {of_port}: on to bridge {} as from its port {port}",
                peer.name
            ),
        );
        // As Open vSwitch: the metadata, the registers and the tunnel it came from
        // stay behind; the packet's mark goes with it.
        let key = MatchKey {
            packet: FlowKey {
                in_port: port,
                metadata: 0,
                tun_id: 0,
                tun_src: 0,
                tun_dst: 0,
                tun_metadata0: 0,
                tun_flags: 0,
                ..self.key.packet
            },
            pipeline: vsw_flow::PipelineFields {
                pkt_mark: self.key.pipeline.pkt_mark,
                // The packet is what it was (its type too); only metadata goes.
                packet_type: self.key.pipeline.packet_type,
                ..Default::default()
            },
        };
        self.continue_in(b, slot, key, None);
    }

    /// Translates on in bridge `slot` for a packet of `key` (a port of that bridge
    /// received it), after `first` (an action that makes the packet that one): its
    /// own tables, MAC learning and ports, the megaflow's mask and the datapath
    /// actions growing on. What happens there to the packet happens to a copy: what
    /// this bridge does after sees the packet as it was.
    fn continue_in(
        &mut self,
        b: BackerView<'_>,
        slot: BridgeSlot,
        key: MatchKey,
        first: Option<DpAction>,
    ) {
        let Some(peer) = b.map.bridges.get(&slot) else {
            return;
        };
        let o = &peer.state;
        self.out.crossed.push(o.changes());
        let (pipeline, ports, live) = (o.pipeline(), o.ports(), o.live_ports());
        let table = o.macs().clone();
        let mut macs = table.lock().unwrap_or_else(|e| e.into_inner());
        let mut env = XlateEnv {
            pipeline: &pipeline,
            macs: &mut macs,
            ports: &ports,
            now_ms: self.env.now_ms,
            learn: self.env.learn,
            frame: self.env.frame,
            learn_rules: self.env.learn_rules,
            trace: self.env.trace,
            punt_notes: o.punt_notes(),
            fail_open: o.fail_open(),
            restore_wait: o.restore_wait(),
            bridge: o,
            live_ports: &live,
            backer: Some(BackerView {
                map: b.map,
                slot,
                frozen: b.frozen,
            }),
            may_freeze: self.env.may_freeze,
            in_port_elsewhere: true,
        };
        let start = self.out.actions.len();
        if let Some(a) = first {
            self.emit(a);
        }
        let mut inner = Ctx {
            env: &mut env,
            key,
            mask: self.mask,
            out: std::mem::take(&mut self.out),
            depth: self.depth + 1,
            learned: false,
            in_group: 0,
            bucket_pass: false,
            // One copy kept for this crossing, should it need one.
            saves: self.saves + 1,
            action_set: ActionSet::default(),
            ttl_unknown: self.ttl_unknown,
            across: Some(table.clone()),
            path: self.path.iter().copied().chain([b.slot]).collect(),
            // The peer's own rules send up what it sends.
            resumed_cookie: u64::MAX,
            // Its own stack, as Open vSwitch gives a patch port's peer.
            stack: Vec::new(),
            copies: 0,
            in_action_set: false,
            paused: None,
            exiting: false,
            stop_list: false,
            frame_read: false,
            pending_tlvs: None,
            // After a push, the outer packet: Ethernet, with nothing popped.
            popped: if first.is_some() {
                Popped::Nothing
            } else {
                self.popped
            },
            forks: self.forks,
        };
        inner.walk();
        // A stop for the next pass after a pop_mpls there.
        inner.finish_pause();
        self.out = std::mem::take(&mut inner.out);
        self.mask = inner.mask;
        drop(inner);
        if self.out.actions[start..]
            .iter()
            .any(|a| !matches!(a, DpAction::Output(_)))
        {
            self.out.actions.insert(start, DpAction::Save);
            self.out.actions.push(DpAction::Restore);
        }
    }

    fn step(&mut self, table: u8, text: String) {
        if self.env.trace {
            self.out.steps.push(TraceStep {
                depth: self.depth,
                table,
                text,
            });
        }
    }

    fn table(&mut self, id: u8) {
        if self.depth >= MAX_RESUBMIT_DEPTH {
            self.out.error = Some(XlateError::TooDeep);
            self.step(id, format!("{}", XlateError::TooDeep));
            return;
        }
        if self.popped.blind() {
            // Only a bridge a patch port led to looks a table up before an action
            // could stop for the next pass: it stops here, its next pass starting
            // with this lookup (as Open vSwitch freezes before a table).
            if !self.in_one_rest() || !self.env.may_freeze {
                self.out.error = Some(XlateError::MplsNested);
                self.step(id, format!("{}", XlateError::MplsNested));
            } else {
                self.paused = Some(Paused {
                    note: None,
                    meter: None,
                    table: id,
                    frames: vec![Frame {
                        table: id,
                        rule: None,
                        actions: vec![Action::GotoTable(id)],
                    }],
                });
            }
            return;
        }
        self.depth += 1;
        let ttl_mask = std::mem::take(&mut self.mask.nw_ttl);
        let label_ttl_mask = self.mask.label & mpls::TTL_MASK;
        self.mask.label &= !mpls::TTL_MASK;
        let rule = self
            .env
            .pipeline
            .lookup_wc(id, &self.key, &mut self.mask)
            .cloned();
        let mpls_ttl_read = is_mpls(self.key.dl_type) && self.mask.label & mpls::TTL_MASK != 0;
        if self.ttl_unknown && (self.mask.nw_ttl != 0 || mpls_ttl_read) {
            self.out.error = Some(XlateError::TtlUnknown);
            self.step(id, format!("{}", XlateError::TtlUnknown));
        }
        self.mask.nw_ttl |= ttl_mask;
        self.mask.label |= label_ttl_mask;
        if self.across.is_none() {
            self.out.tables.push((id, rule.is_some()));
        }
        match rule {
            None => self.step(id, "no match: drop".into()),
            Some(rule) => {
                if self.env.trace {
                    // The table is the step's number already.
                    let mut spec = rule.spec.clone();
                    spec.table = 0;
                    self.step(id, vsw_flow::syntax::format_flow(&spec));
                }
                self.out.rules.push(rule.clone());
                self.rule_actions(&rule.spec.actions, id, Some(&rule));
            }
        }
        self.depth -= 1;
    }

    /// A rule's actions (`None`: a resumed packet-out's), as the pipeline runs them:
    /// write-actions blocks into the action set, clones on a copy. A pause keeps
    /// what follows it.
    fn rule_actions(&mut self, acts: &[Action], id: u8, rule: Option<&Arc<Rule>>) {
        let mut i = 0;
        while i < acts.len() && self.out.error.is_none() {
            if self.stop_for_pop(acts, i, id, rule) {
                return;
            }
            match &acts[i] {
                // The next n go into the action set, for the pipeline's end.
                &Action::WriteActions(n) => {
                    let end = (i + 1 + usize::from(n)).min(acts.len());
                    if let Some(rule) = rule {
                        for a in &acts[i + 1..end] {
                            self.action_set.write(a.clone(), id, rule);
                        }
                    }
                    i = end;
                    continue;
                }
                // The next n on a copy of the packet.
                &Action::Clone(n) => {
                    let end = (i + 1 + usize::from(n)).min(acts.len());
                    self.on_copy(&acts[i + 1..end], id, rule);
                    i = end;
                    continue;
                }
                Action::ClearActions => self.action_set.clear(),
                // The rest of the list, once for each answer (nothing after it:
                // no answer is read, as Open vSwitch leaves it out).
                &Action::CheckPktLarger { len, dst } if i + 1 < acts.len() => {
                    let rest = &acts[i + 1..];
                    self.fork_on_length(len, dst, id, |cx| cx.rule_actions(rest, id, rule));
                    return;
                }
                a => self.action(a, id, rule),
            }
            i += 1;
            if std::mem::take(&mut self.stop_list)
                || self.exiting
                || self.rest_of(acts, i, id, rule)
            {
                return;
            }
        }
    }

    /// `check_pkt_larger(LEN)->DST` with `rest` after it (as Open vSwitch's
    /// `check_pkt_len`): the datapath decides by each packet's length, so the rest
    /// is translated twice — DST set to 1, then to 0, each way ending with the
    /// action set — into the two ways of one `CheckPktLen`. The flow's mask is
    /// both ways'; what follows the list runs after either.
    fn fork_on_length(&mut self, len: u16, dst: Subfield, table: u8, rest: impl Fn(&mut Self)) {
        if self.forks == vsw_datapath::MAX_FORKS {
            self.out.error = Some(XlateError::TooManyForks);
            self.step(table, format!("{}", XlateError::TooManyForks));
            return;
        }
        let at = self.out.actions.len();
        // A packet without Ethernet is measured without the header its frame
        // holds in front (exactly 14 bytes: decap() takes no tagged header).
        let size = if self.popped == Popped::EthernetDecapped {
            len.saturating_add(vsw_packet::ethernet::ETH_HDR_LEN as u16)
        } else {
            len
        };
        self.emit(DpAction::CheckPktLen { size, gt: 0, le: 0 });
        let (key, stack, ttl_unknown, popped) =
            (self.key, self.stack.clone(), self.ttl_unknown, self.popped);
        // As Open vSwitch since 2.17: each way starts with an empty action set
        // and runs what it writes; the set from before the fork is back after.
        let action_set = std::mem::take(&mut self.action_set.actions);
        let in_action_set = self.in_action_set;
        self.forks += 1;
        let mut ways = [0u32; 2];
        for (way, answer) in ways.iter_mut().zip([1u128, 0]) {
            self.key = key;
            self.stack.clone_from(&stack);
            self.ttl_unknown = ttl_unknown;
            self.popped = popped;
            self.action_set.clear();
            self.in_action_set = false;
            self.step(table, format!("check_pkt_larger({len}): {answer}"));
            let start = self.out.actions.len();
            self.load(dst.field, answer << dst.ofs, dst.mask());
            rest(self);
            self.end_of_pipeline();
            *way = (self.out.actions.len() - start) as u32;
            if self.out.error.is_some() {
                break;
            }
        }
        self.forks -= 1;
        self.out.actions[at] = DpAction::CheckPktLen {
            size: len,
            gt: ways[0],
            le: ways[1],
        };
        // Both ways ran the list's rest: what follows (an outer list's rest, the
        // action set from before) sees the packet as before the fork.
        self.key = key;
        self.stack = stack;
        self.ttl_unknown = ttl_unknown;
        self.popped = popped;
        self.action_set.actions = action_set;
        self.in_action_set = in_action_set;
        self.exiting = false;
    }

    fn emit(&mut self, a: DpAction) {
        self.out.actions.push(a);
    }

    /// Translates one action of `rule` (none: a packet-out's) in `table`.
    fn action(&mut self, a: &Action, table: u8, rule: Option<&Arc<Rule>>) {
        if self.bare_rewrite(a, table) {
            return;
        }
        let dp = self.rewrite(a);
        if let Some(dp) = dp {
            self.emit(dp);
            return;
        }
        if self.popped.bare() && encap::sends(a) && !self.sends_to_ports(a) {
            self.step(
                table,
                format!(
                    "{a}: after {}, the packet has no Ethernet header, which no \
                     Ethernet port takes: dropped (encap(ethernet) first)",
                    self.popped.action()
                ),
            );
            return;
        }
        let k = &self.key;
        match *a {
            Action::Encap(ref e) => self.encap(e, table),
            Action::Decap(pt) => self.decap(pt, table),
            Action::DecNshTtl => self.dec_nsh_ttl(table),
            Action::Ct(ref ct) => self.ct(ct, table),
            Action::CtClear => {
                self.emit(DpAction::CtClear);
                self.forget_conntrack();
            }
            // Never back out of the port it came in on: that is IN_PORT.
            Action::Output(p) => {
                if p != k.in_port {
                    self.output(p);
                }
            }
            Action::InPort => {
                let p = k.in_port;
                self.output(p);
            }
            Action::OutputTrunc { port, max_len } => self.output_truncated(port, max_len, table),
            Action::Flood => self.flood(),
            Action::Normal => self.normal(table),
            Action::Drop => {}
            Action::Group(id) => self.group(id, table, rule),
            Action::Meter(id) => {
                let id = self.env.backer.map_or(id, |b| b.dp_meter(id));
                self.emit(DpAction::Meter(id));
            }
            // One queue per port: nothing to choose.
            Action::SetQueue(_) => {}
            // The table walk and the action lists take these (they hold no packet
            // action of their own).
            Action::WriteActions(_) | Action::Clone(_) | Action::ClearActions => {}
            // For the tables that follow: the packet itself is not changed (and every
            // packet starts with metadata 0, so the datapath flow need not say it).
            Action::WriteMetadata { value, mask } => {
                self.key.metadata = (self.key.metadata & !mask) | (value & mask);
            }
            Action::Controller {
                max_len,
                ref userdata,
                meter,
                pause,
            } => {
                let note = PuntNote {
                    reason: match rule {
                        _ if self.in_group > 0 => PuntReason::Group,
                        Some(r) if r.is_table_miss() => PuntReason::NoMatch,
                        Some(_) => PuntReason::Action,
                        None => PuntReason::PacketOut,
                    },
                    table,
                    cookie: rule.map_or(self.resumed_cookie, |r| r.spec.cookie),
                    max_len,
                    in_port: self.env.in_port_elsewhere.then_some(self.key.in_port),
                    // What only translation knows goes up in the note: a function of
                    // the flow's match, as the registers are.
                    metadata: self.key.metadata,
                    pipeline: self.key.pipeline,
                    userdata: userdata.clone(),
                    continuation: None,
                };
                if pause {
                    self.pause(note, meter, table);
                } else {
                    self.punt(note, meter, table);
                }
            }
            // Rewrites became datapath actions above.
            Action::SetTunnel(_)
            | Action::SetTunnelDst(_)
            | Action::SetTunnelMetadata(_)
            | Action::SetDlSrc(_)
            | Action::SetDlDst(_)
            | Action::PushVlan(_)
            | Action::SetVlanVid(_)
            | Action::SetVlanPcp(_)
            | Action::StripVlan
            | Action::SetNwSrc(_)
            | Action::SetNwDst(_)
            | Action::SetNwTos(_)
            | Action::SetTpSrc(_)
            | Action::SetTpDst(_)
            | Action::DecTtl
            | Action::DecTtlIds(_)
            | Action::PushMpls(_)
            | Action::PopMpls(_)
            | Action::PushPbb(_)
            | Action::PopPbb
            | Action::SetMplsLabel(_)
            | Action::SetMplsTc(_)
            | Action::SetMplsTtl(_)
            | Action::DecMplsTtl
            | Action::SetField(_) => {}
            Action::Load(l) => self.load(l.field, l.value, l.mask),
            Action::Move { src, dst } => {
                let v = src.read(&self.key);
                self.looked_at(src.field, src.mask());
                self.load(dst.field, v << dst.ofs, dst.mask());
            }
            Action::StackPush(src) => {
                if self.stack.len() == MAX_STACK {
                    self.out.error = Some(XlateError::StackFull);
                    return;
                }
                self.looked_at(src.field, src.mask());
                let v = src.read(&self.key);
                self.stack.push(v);
            }
            // An empty stack leaves the field as it is, as in Open vSwitch.
            Action::StackPop(dst) => {
                if let Some(v) = self.stack.pop() {
                    let v = v & ones(u32::from(dst.n_bits));
                    self.load(dst.field, v << dst.ofs, dst.mask());
                }
            }
            // A clause's rule is never a lookup's answer (the classifier's
            // conjunctive match is).
            Action::Conjunction { .. } => {}
            Action::Exit => self.exiting = true,
            // No IPFIX exporter: nothing is sampled.
            Action::Sample(_) => {}
            // Last in its list: nothing reads its answer.
            Action::CheckPktLarger { .. } => {}
            Action::Multipath(ref m) => {
                let link = m.link(&self.key, &mut self.mask);
                let d = m.dst;
                self.load(d.field, u128::from(link) << d.ofs, d.mask());
            }
            Action::Bundle(ref b) => {
                let live_ports = self.env.live_ports;
                // As Open vSwitch: a reserved port but CONTROLLER is always live.
                // (A member from the wire names one in 32 bits, from 0xffffff00.)
                let live = |p: u32| match p {
                    0xffff_fffd => false,
                    p if p >= 0xffff_ff00 => true,
                    p => live_ports.contains(&p),
                };
                let port = b.choose(&self.key, &mut self.mask, &live);
                // The 16-bit number of a 32-bit reserved port.
                let port = if port >= 0xffff_ff00 {
                    port & 0xffff
                } else {
                    port
                };
                match b.dst {
                    Some(d) => {
                        let v = u128::from(port & 0xffff) & ones(u32::from(d.n_bits));
                        self.load(d.field, v << d.ofs, d.mask());
                    }
                    None if port != vsw_flow::member_bundle::OFPP_NONE => {
                        self.output_numbered(u128::from(port), table, rule)
                    }
                    None => self.step(table, "bundle: no live member, dropped".into()),
                }
            }
            // One queue per port.
            Action::PopQueue => {}
            // The rule's, from its own list, a clone in it or a group bucket it
            // sent to (a packet-out's names no rule: nothing to cut).
            Action::FinTimeout { idle, hard } => self.fin_timeout(idle, hard, rule),
            Action::OutputReg { src, .. } => {
                self.looked_at(src.field, src.mask());
                let port = src.read(&self.key);
                self.output_numbered(port, table, rule);
            }
            Action::Learn(ref l) => self.learn(l, table),
            Action::GotoTable(t) => self.table(t),
            Action::Resubmit { port, table: t } => {
                let saved = self.key.in_port;
                if let Some(p) = port {
                    self.key.in_port = p;
                }
                self.table(t.unwrap_or(table));
                self.key.in_port = saved;
            }
        }
    }

    /// An output to the OpenFlow 1.0 port number `port` (what `output:SRC[…]`
    /// read): its special ports as their actions, a number past 16 bits nowhere.
    fn output_numbered(&mut self, port: u128, table: u8, rule: Option<&Arc<Rule>>) {
        let a = match port {
            0xfff8 => Action::InPort,
            0xfffa => Action::Normal,
            0xfffb | 0xfffc => Action::Flood,
            0xfffd => Action::Controller {
                max_len: vsw_flow::action::CONTROLLER_NO_BUFFER,
                userdata: None,
                meter: None,
                pause: false,
            },
            0xfffe => Action::Output(vsw_flow::LOCAL_PORT),
            p if p < 0xff00 => Action::Output(p as u32),
            _ => return,
        };
        self.action(&a, table, rule);
    }

    /// Sends the packet up with `note` (through `meter`, which limits the packet-ins
    /// alone).
    fn punt(&mut self, note: PuntNote, meter: Option<u32>, table: u8) {
        let interned = self.env.punt_notes.intern(note, self.env.now_ms);
        let dp = interned.and_then(|(id, held)| {
            self.out.notes.push(held);
            self.env.backer.map_or(Some(id), |b| b.dp_note(id))
        });
        match dp {
            // A meter of the packet-in's alone: on a copy, whose drop ends only
            // the copy.
            Some(id) if meter.is_some() => {
                if self.saves == MAX_SAVES {
                    self.out.error = Some(XlateError::TooDeep);
                    return;
                }
                let m = meter.unwrap_or_default();
                let m = self.env.backer.map_or(m, |b| b.dp_meter(m));
                self.emit(DpAction::Save);
                self.emit(DpAction::Meter(m));
                self.emit(DpAction::Controller(id));
                self.emit(DpAction::Restore);
            }
            Some(id) => self.emit(DpAction::Controller(id)),
            None => self.step(
                table,
                "more packet-in notes than the datapath can number: not sent up".into(),
            ),
        }
    }

    /// `controller(pause)`: the translation stops here. Each action list it is in
    /// keeps its rest as it unwinds (`rest_of`), and the packet goes up at the end
    /// with all of it (`finish_pause`). Only from the pipeline's own lists: in a
    /// copy (a clone, a bucket), the action set or another bridge there is no one
    /// rest to resume, and the packet is dropped (counted) as Open vSwitch cannot
    /// either.
    fn pause(&mut self, note: PuntNote, meter: Option<u32>, table: u8) {
        if !self.in_one_rest() || self.across.is_some() {
            self.out.error = Some(XlateError::PauseNested);
            self.step(table, format!("{}", XlateError::PauseNested));
            return;
        }
        self.step(
            table,
            "controller(pause): the translation stops here".into(),
        );
        self.paused = Some(Paused {
            note: Some(note),
            meter,
            table,
            frames: Vec::new(),
        });
    }

    /// Whether what follows here is one rest that a stop (a pause, a freeze after
    /// `pop_mpls`) can keep and resume: not in a copy (a clone, a group bucket), a
    /// `check_pkt_larger` way, or the action set.
    fn in_one_rest(&self) -> bool {
        self.in_group == usize::from(self.bucket_pass)
            && self.copies == 0
            && self.forks == 0
            && !self.in_action_set
    }

    /// A paused translation unwinding through an action list: its rest, from
    /// `at`, is kept to be resumed. True when paused (the list stops).
    fn rest_of(&mut self, acts: &[Action], at: usize, table: u8, rule: Option<&Arc<Rule>>) -> bool {
        let Some(p) = self.paused.as_mut() else {
            return false;
        };
        if at < acts.len() {
            p.frames.push(Frame {
                table,
                rule: rule.map(|r| RuleRef(r.clone())),
                actions: acts[at..].to_vec(),
            });
        }
        true
    }

    /// The translation paused: the packet goes up with what it had left.
    fn finish_pause(&mut self) {
        let Some(p) = self.paused.take() else {
            return;
        };
        let cookie = p
            .frames
            .first()
            .and_then(|f| f.rule.as_ref())
            .map_or(self.resumed_cookie, |r| r.0.spec.cookie);
        let continuation = Arc::new(Continuation {
            frames: p.frames,
            action_set: self
                .action_set
                .take()
                .into_iter()
                .map(|(a, r, t)| (a, RuleRef(r), t))
                .collect(),
            stack: self.stack.clone(),
        });
        match p.note {
            Some(mut note) => {
                note.continuation = Some(continuation);
                self.punt(note, p.meter, p.table);
            }
            None => self.recirculate(continuation, cookie, p.table),
        }
    }

    /// The packet is looked up again as the actions so far left it (its labels
    /// popped), and the next pass runs `rest` for it.
    fn recirculate(&mut self, rest: Arc<Continuation>, cookie: u64, table: u8) {
        let Some(b) = self.env.backer else {
            self.out.error = Some(XlateError::MplsNested);
            return;
        };
        let state = Frozen {
            slot: b.slot,
            in_port: self.key.in_port,
            metadata: self.key.metadata,
            pipeline: self.key.pipeline,
            stack: self.stack.clone(),
            saves: self.saves,
            path: self.path.clone(),
            cookie,
            resume: Resume::Continue(rest),
        };
        let Some((id, held)) = b.freeze(state, self.env.now_ms) else {
            self.step(table, "no recirculation number left: dropped".into());
            self.out.error = Some(XlateError::MplsNested);
            return;
        };
        self.out.frozen.push(held);
        self.step(
            table,
            format!(
                "after {}: the packet behind it is looked up again: recirc(0x{id:x})",
                self.popped.action()
            ),
        );
        self.emit(DpAction::Recirc(id));
    }

    /// After a `pop_mpls`, `pop_pbb` or two `decap()`s, whether `a` may look at
    /// what is behind the label, I-TAG or NSH header (and so must run on the
    /// packet's next pass). After a label, as Open vSwitch: outputs, groups and
    /// rewrites of Ethernet, VLAN, tunnel and pipeline fields need not. After a
    /// backbone header or the decaps, the frame's addresses and tags are new to
    /// the key too: only what sends the packet out as it is goes on in the same
    /// pass (not NORMAL, which learns and looks up addresses, nor a group, whose
    /// buckets may hash or rewrite).
    fn needs_recirculation(&self, a: &Action) -> bool {
        match self.popped {
            Popped::Nothing | Popped::EncapPending | Popped::EthernetDecapped => return false,
            Popped::Pbb | Popped::Decapped => {
                return match a {
                    Action::Drop | Action::SetQueue(_) => false,
                    Action::Output(p) | Action::OutputTrunc { port: p, .. } => {
                        !self.sends_as_it_is(*p)
                    }
                    _ => true,
                }
            }
            Popped::Mpls => {}
        }
        match a {
            Action::Output(_)
            | Action::InPort
            | Action::Normal
            | Action::Flood
            | Action::Drop
            | Action::Group(_)
            | Action::SetQueue(_)
            | Action::SetDlSrc(_)
            | Action::SetDlDst(_)
            | Action::SetVlanVid(_)
            | Action::SetVlanPcp(_)
            | Action::SetTunnel(_)
            | Action::SetTunnelDst(_)
            | Action::SetTunnelMetadata(_)
            | Action::OutputReg { .. }
            | Action::OutputTrunc { .. } => false,
            Action::Load(l) => {
                !(l.field.is_pipelines()
                    || matches!(
                        l.field,
                        Field::EthSrc | Field::EthDst | Field::TunId | Field::TunMetadata0
                    ))
            }
            _ => true,
        }
    }

    /// Whether an output to `of_port` sends the packet as it is, reading nothing
    /// of its headers from the key: not LOCAL (whose output may decapsulate a
    /// tunnel packet for the host), a tunnel port (whose header and route come
    /// from the inner packet) or a patch port (whose bridge goes on translating).
    fn sends_as_it_is(&self, of_port: u32) -> bool {
        of_port != vsw_flow::LOCAL_PORT
            && self
                .env
                .backer
                .is_none_or(|b| b.tunnel_port(of_port).is_none() && b.patch_peer(of_port).is_none())
    }

    /// After a `pop_mpls`, `pop_pbb` or the decaps, `a` (at `at` of `acts`) needs the next
    /// pass: from the pipeline's own lists the translation stops here, keeping
    /// `a` and what follows (as a pause does); anywhere else it cannot, and the
    /// packet is dropped. True when the list stops.
    fn stop_for_pop(
        &mut self,
        acts: &[Action],
        at: usize,
        table: u8,
        rule: Option<&Arc<Rule>>,
    ) -> bool {
        if !self.needs_recirculation(&acts[at]) {
            return false;
        }
        // A bridge a patch port led to may stop too (its next pass resumes there,
        // as a select group's does); a copy or the action set has no one rest.
        if !self.in_one_rest() || !self.env.may_freeze {
            self.out.error = Some(XlateError::MplsNested);
            self.step(table, format!("{}", XlateError::MplsNested));
            return true;
        }
        self.paused = Some(Paused {
            note: None,
            meter: None,
            table,
            frames: Vec::new(),
        });
        self.rest_of(acts, at, table, rule);
        true
    }

    /// `fin_timeout(…)` of `rule`: a TCP FIN or RST cuts the rule's timeouts. The
    /// flow tells those packets from the connection's others (they get flows of
    /// their own), and such a flow cuts them for each packet it forwards (as Open
    /// vSwitch's cache of translations does with the TCP flags a flow saw), this
    /// packet's at once.
    fn fin_timeout(&mut self, idle: u16, hard: u16, rule: Option<&Arc<Rule>>) {
        const FIN_OR_RST: u16 = 0x001 | 0x004;
        let Some(rule) = rule else {
            return;
        };
        // The rule's match promises TCP (the action needs it).
        self.mask.tcp_flags |= FIN_OR_RST;
        if self.key.tcp_flags & FIN_OR_RST == 0 {
            return;
        }
        if self.env.learn_rules {
            rule.cut_timeouts(idle, hard);
        }
        self.out.fin_timeouts.push((rule.clone(), idle, hard));
        if self.env.trace {
            self.step(
                rule.spec.table,
                format!("fin_timeout: a FIN or RST cuts the rule's timeouts to idle {idle} s, hard {hard} s"),
            );
        }
    }

    /// `learn(…)`: the rule it makes for the packet as it is now, put in place when
    /// a packet is passing. The flow depends on every bit the rule was made from;
    /// the packet that put a rule in place is not cached (its translation saw the
    /// tables without it, as Open vSwitch's does; the next packet's sees them with).
    fn learn(&mut self, l: &vsw_flow::Learn, table: u8) {
        for s in l.sources() {
            self.looked_at(s.field, s.mask());
        }
        let spec = l.rule_for(&self.key);
        let text = self.env.trace.then(|| vsw_flow::syntax::format_flow(&spec));
        let learning = self
            .env
            .bridge
            .learn(spec, l.limit, self.env.now_ms, self.env.learn_rules);
        let (placed, what) = match learning {
            Learning::InPlace(r) => {
                self.out.learned_rules.push(r);
                (true, "in place already")
            }
            Learning::Added(r) => {
                self.out.learned_rules.push(r);
                self.out.rules_learned = true;
                self.out.uncacheable = true;
                (true, "learned")
            }
            Learning::NotInPlace => {
                self.out.uncacheable = true;
                (false, "not in place: a packet passing learns it")
            }
            Learning::Busy => {
                self.out.uncacheable = true;
                (
                    false,
                    "not learned now (the rules are being changed): the next packet tries",
                )
            }
            // Cached: a rule of its table going (the only way room is made) has
            // every flow of the bridge looked at again (vswd's revalidation).
            Learning::OverLimit => (false, "not learned: its limit is reached"),
        };
        if let Some(r) = l.result_dst {
            self.load(r.field, u128::from(placed) << r.ofs, r.mask());
        }
        if let Some(text) = text {
            self.step(table, format!("learn: {text}: {what}"));
        }
    }

    /// Sets the bits of `mask` in `field` to `value`'s: in the working key for a
    /// field of the pipeline's, by the field's rewrite (of its whole new value) for
    /// a field of the packet's.
    fn load(&mut self, field: Field, value: u128, mask: u128) {
        let new = (field.read(&self.key) & !mask) | (value & mask);
        match Action::writing(field, new) {
            None => field.write(&mut self.key, new),
            Some(a) => {
                // The bits not loaded are the packet's own, written back as they were.
                let kept = ones(u32::from(field.info().bits)) & !mask;
                self.looked_at(field, kept);
                if self.bare_rewrite(&a, 0) {
                    return;
                }
                if let Some(dp) = self.rewrite(&a) {
                    self.emit(dp);
                }
            }
        }
    }

    /// The datapath flow depends on these bits of a packet field (what a `move`
    /// copies, what a partial load keeps). A pipeline field's value follows from
    /// the packet's, already looked at.
    fn looked_at(&mut self, field: Field, bits: u128) {
        if field.is_pipelines() || bits == 0 {
            return;
        }
        if matches!(field, Field::NwTtl | Field::MplsTtl) && self.ttl_unknown {
            // The TTL copy_ttl_out gave the packet is not in the key.
            self.out.error = Some(XlateError::TtlUnknown);
        }
        let had = field.read(&self.mask);
        field.write(&mut self.mask, had | bits);
    }

    /// A rewrite changes the working key (later tables see the packet as it will
    /// be) and becomes its datapath action; `None` for every other action.
    fn rewrite(&mut self, a: &Action) -> Option<DpAction> {
        let (k, mask) = (&mut self.key, &mut self.mask);
        match *a {
            Action::SetDlSrc(m) => {
                k.dl_src = m;
                Some(DpAction::SetDlSrc(m))
            }
            Action::SetDlDst(m) => {
                k.dl_dst = m;
                Some(DpAction::SetDlDst(m))
            }
            Action::PushVlan(tpid) => {
                // The old outer tag becomes the inner one: what later tables see of
                // the inner tag came from the packet's outer tag.
                mask.vlan_tci = 0xffff;
                k.inner_vlan_tci = k.vlan_tci;
                k.vlan_tci = VLAN_CFI;
                Some(DpAction::PushVlan(tpid))
            }
            Action::SetVlanVid(vid) => {
                k.vlan_tci = (k.vlan_tci & !0x0fff) | vid | VLAN_CFI;
                Some(DpAction::SetVlanVid(vid))
            }
            Action::SetVlanPcp(pcp) => {
                k.vlan_tci = (k.vlan_tci & 0x1fff) | (u16::from(pcp) << 13) | VLAN_CFI;
                Some(DpAction::SetVlanPcp(pcp))
            }
            Action::StripVlan => {
                // What is outer after the pop came from the inner tag.
                mask.vlan_tci |= VLAN_CFI;
                mask.inner_vlan_tci = 0xffff;
                k.vlan_tci = k.inner_vlan_tci;
                k.inner_vlan_tci = 0;
                Some(DpAction::PopVlan)
            }
            Action::SetNwSrc(a) => {
                k.nw_src = u128::from(u32::from(a));
                Some(DpAction::SetNwSrc(a))
            }
            Action::SetNwDst(a) => {
                k.nw_dst = u128::from(u32::from(a));
                Some(DpAction::SetNwDst(a))
            }
            Action::SetNwTos(t) => {
                k.nw_tos = (k.nw_tos & 0x03) | (t & 0xfc);
                Some(DpAction::SetNwTos(t))
            }
            Action::SetTpSrc(p) => {
                k.tp_src = p;
                Some(DpAction::SetTpSrc(p))
            }
            Action::SetTpDst(p) => {
                k.tp_dst = p;
                Some(DpAction::SetTpDst(p))
            }
            Action::DecTtl | Action::DecTtlIds(_) => {
                // The datapath checks each packet's TTL itself (one at 0 or 1 goes
                // no further), so the megaflow need not match on it.
                k.nw_ttl = k.nw_ttl.saturating_sub(1);
                Some(DpAction::DecTtl)
            }
            // For the tables that follow, and for a tunnel port with `key=flow`,
            // which puts it in the header it pushes.
            Action::SetTunnel(id) => {
                k.tun_id = id;
                Some(DpAction::SetTunnel(id))
            }
            // For the tables that follow, and for a tunnel port with
            // `remote_ip=flow`, which sends to it.
            Action::SetTunnelDst(a) => {
                k.tun_dst = a.into();
                Some(DpAction::SetTunnelDst(a))
            }
            // For the tables that follow, and for a Geneve port, which sends it as
            // the option the TLV map names tun_metadata0.
            Action::SetTunnelMetadata(v) => {
                k.tun_metadata0 = v;
                Some(DpAction::SetTunnelMetadata(v))
            }
            Action::PushMpls(_) if self.ttl_unknown => {
                // The entry's TTL would be one the key does not hold.
                self.out.error = Some(XlateError::TtlUnknown);
                None
            }
            Action::PushMpls(t) => {
                mask.dl_type = u16::MAX;
                let lse = if is_mpls(k.dl_type) {
                    // A copy of the outermost entry, no longer the bottom one.
                    mask.label = u32::MAX;
                    k.label & !mpls::BOS_MASK
                } else {
                    let ip = matches!(k.dl_type, EtherType::IPV4 | EtherType::IPV6);
                    let label = if k.dl_type == EtherType::IPV6 {
                        mpls::IPV6_EXPLICIT_NULL
                    } else {
                        mpls::IPV4_EXPLICIT_NULL
                    };
                    let (tc, ttl) = if ip {
                        mask.nw_tos |= 0xfc;
                        mask.nw_ttl = u8::MAX;
                        // As Open vSwitch: the DSCP's low 3 bits.
                        let ttl = if k.nw_ttl != 0 { k.nw_ttl } else { 64 };
                        ((k.nw_tos >> 2) & 7, ttl)
                    } else {
                        (0, 64)
                    };
                    // What was behind the Ethernet header is behind the label now:
                    // no table sees it.
                    k.packet = FlowKey {
                        vlan_tci: k.vlan_tci,
                        inner_vlan_tci: k.inner_vlan_tci,
                        ..addresses_only(k)
                    };
                    mpls::entry(label, tc, true, ttl)
                };
                k.label = lse;
                k.dl_type = t;
                Some(DpAction::PushMpls { ethertype: t, lse })
            }
            Action::PopMpls(t) => {
                mask.dl_type = u16::MAX;
                if !is_mpls(k.dl_type) {
                    return None;
                }
                k.dl_type = t;
                k.label = 0;
                self.popped = Popped::Mpls;
                Some(DpAction::PopMpls(t))
            }
            Action::PushPbb(t) => {
                // As OpenFlow's: the I-TAG is a copy of the outermost one, or 0.
                mask.dl_type = u16::MAX;
                let itag = if k.dl_type == EtherType::PBB {
                    mask.label = u32::MAX;
                    k.label
                } else {
                    0
                };
                // The whole frame is behind the I-TAG now: the key keeps its
                // addresses (the backbone header's, copied) and nothing behind them.
                k.packet = FlowKey {
                    dl_type: t,
                    label: itag,
                    ..addresses_only(k)
                };
                Some(DpAction::PushPbb { ethertype: t, itag })
            }
            Action::PopPbb => {
                mask.dl_type = u16::MAX;
                if k.dl_type != EtherType::PBB {
                    return None;
                }
                self.popped = Popped::Pbb;
                Some(DpAction::PopPbb)
            }
            Action::SetMplsLabel(l) => {
                Self::set_mpls(k, mask, l << mpls::LABEL_SHIFT, mpls::LABEL_MASK)
            }
            Action::SetMplsTc(tc) => {
                Self::set_mpls(k, mask, u32::from(tc) << mpls::TC_SHIFT, mpls::TC_MASK)
            }
            Action::SetMplsTtl(ttl) => Self::set_mpls(k, mask, u32::from(ttl), mpls::TTL_MASK),
            Action::DecMplsTtl => {
                mask.dl_type = u16::MAX;
                if !is_mpls(k.dl_type) {
                    return None;
                }
                // As dec_ttl: the datapath checks each packet's TTL itself (one at
                // 0 or 1 goes no further), so the megaflow need not match on it.
                let ttl = mpls::ttl(k.label).saturating_sub(1);
                k.label = (k.label & !mpls::TTL_MASK) | u32::from(ttl);
                Some(DpAction::DecMplsTtl)
            }
            // A header behind a label is not the key's to write (the checks keep
            // rules from asking; a packet-out's are skipped too).
            Action::SetField(w)
                if is_mpls(k.dl_type)
                    && !matches!(w, FieldWrite::CopyTtlOut | FieldWrite::CopyTtlIn) =>
            {
                mask.dl_type = u16::MAX;
                None
            }
            // An NSH field of a frame that is not NSH: nothing to write.
            Action::SetField(FieldWrite::Nsh(..)) if k.dl_type != EtherType::NSH => {
                mask.dl_type = u16::MAX;
                None
            }
            // A context word is written into an MD type 1 header only.
            Action::SetField(w @ FieldWrite::Nsh(NshField::Context(_), _)) => {
                mask.nw_dst |= 0xff << vsw_packet::key::NSH_MDTYPE_SHIFT;
                write_key(k, w);
                Some(DpAction::SetField(w))
            }
            // The I-SID of a frame that is not PBB (a group's bucket is checked
            // per packet): nothing to write.
            Action::SetField(FieldWrite::PbbIsid(_)) if k.dl_type != EtherType::PBB => {
                mask.dl_type = u16::MAX;
                None
            }
            Action::SetField(w) => {
                if w == FieldWrite::CopyTtlOut && is_mpls(k.dl_type) {
                    // The TTL comes from behind the label, which the key does not
                    // hold.
                    mask.dl_type = u16::MAX;
                    self.ttl_unknown = true;
                }
                if w == FieldWrite::CopyTtlOut {
                    // Whether there is an inner header to copy from is the IP
                    // protocol's to say.
                    mask.dl_type = 0xffff;
                    mask.nw_proto = 0xff;
                    let ip = matches!(k.dl_type, EtherType::IPV4 | EtherType::IPV6);
                    if ip && matches!(k.nw_proto, IPPROTO_IPIP | IPPROTO_IPV6_INNER) {
                        self.ttl_unknown = true;
                    }
                }
                write_key(k, w);
                Some(DpAction::SetField(w))
            }
            Action::Output(_)
            | Action::InPort
            | Action::Normal
            | Action::Flood
            | Action::Drop
            | Action::Group(_)
            | Action::Meter(_)
            | Action::SetQueue(_)
            | Action::WriteActions(_)
            | Action::Clone(_)
            | Action::ClearActions
            | Action::WriteMetadata { .. }
            | Action::Controller { .. }
            | Action::GotoTable(_)
            | Action::Resubmit { .. }
            | Action::Load(_)
            | Action::Move { .. }
            | Action::StackPush(_)
            | Action::StackPop(_)
            | Action::Conjunction { .. }
            | Action::Learn(_)
            | Action::OutputReg { .. }
            | Action::Exit
            | Action::PopQueue
            | Action::Bundle(_)
            | Action::Multipath(_)
            | Action::CheckPktLarger { .. }
            | Action::FinTimeout { .. }
            | Action::OutputTrunc { .. }
            | Action::Encap(_)
            | Action::Decap(_)
            | Action::DecNshTtl
            | Action::Ct(_)
            | Action::CtClear
            | Action::Sample(_) => None,
        }
    }

    /// A set of bits of the outermost MPLS label stack entry: nothing on a packet
    /// without one (as Open vSwitch).
    fn set_mpls(k: &mut MatchKey, mask: &mut MatchKey, value: u32, bits: u32) -> Option<DpAction> {
        mask.dl_type = u16::MAX;
        if !is_mpls(k.dl_type) {
            return None;
        }
        k.label = (k.label & !bits) | (value & bits);
        Some(DpAction::SetMpls {
            lse: value & bits,
            mask: bits,
        })
    }

    /// Runs group `id`'s chosen buckets, each on a copy of the packet: what a bucket
    /// rewrites stays in it (the datapath saves the packet before such a bucket and
    /// puts it back after), and so does the working key here.
    fn group(&mut self, id: u32, table: u8, rule: Option<&Arc<Rule>>) {
        let Some(g) = self.env.pipeline.group(id).cloned() else {
            self.step(table, format!("group:{id}: no such group: drop"));
            return;
        };
        if self.depth >= MAX_RESUBMIT_DEPTH {
            self.out.error = Some(XlateError::TooDeep);
            return;
        }
        let chosen: Vec<usize> = match g.spec.kind {
            GroupType::All => (0..g.spec.buckets.len()).collect(),
            GroupType::Indirect => (0..g.spec.buckets.len().min(1)).collect(),
            GroupType::FastFailover => {
                let live =
                    (0..g.spec.buckets.len()).find(|&i| self.bucket_live(&g.spec.buckets[i], 0));
                live.into_iter().collect()
            }
            GroupType::Select => {
                if self.freeze_select(&g, table, rule) {
                    return;
                }
                self.select(&g).into_iter().collect()
            }
        };
        self.step(
            table,
            format!("group:{id} ({}): buckets {chosen:?}", g.spec.kind.name()),
        );
        self.out.groups.push((g.clone(), None));
        self.depth += 1;
        self.in_group += 1;
        for i in chosen {
            self.out.groups.push((g.clone(), Some(i)));
            self.bucket(&g.spec.buckets[i], table, rule);
            if self.out.error.is_some() {
                break;
            }
        }
        self.in_group -= 1;
        self.depth -= 1;
    }

    fn bucket(&mut self, b: &Bucket, table: u8, rule: Option<&Arc<Rule>>) {
        self.on_copy(&b.actions, table, rule);
    }

    /// Actions with no match of their own to promise their headers (a packet-out's,
    /// a bucket's), a `clone` block among them run on a copy.
    fn actions(&mut self, actions: &[Action], table: u8, rule: Option<&Arc<Rule>>) {
        let mut i = 0;
        while i < actions.len() && self.out.error.is_none() {
            // A pause (a packet-out's list: nowhere else may one stop here) keeps
            // the rest; an exit drops it.
            if self.exiting || self.rest_of(actions, i, table, None) {
                return;
            }
            let a = &actions[i];
            if self.needs_recirculation(a) {
                self.out.error = Some(XlateError::MplsNested);
                self.step(table, format!("{}", XlateError::MplsNested));
                return;
            }
            i += 1;
            if let Action::CheckPktLarger { len, dst } = *a {
                if i < actions.len() {
                    let rest = &actions[i..];
                    self.fork_on_length(len, dst, table, |cx| cx.actions(rest, table, rule));
                    return;
                }
                continue;
            }
            if let Action::Clone(n) = *a {
                let end = (i + usize::from(n)).min(actions.len());
                self.on_copy(&actions[i..end], table, rule);
                i = end;
                continue;
            }
            // A rewrite of a header this packet lacks is skipped, and that depended
            // on its protocol.
            // (A move: its source's header and its destination's.)
            let needs = a.needs_both();
            // What the check read: the protocol, and for the tracker's fields the
            // packet's ct_state.
            let read_ct = needs
                .iter()
                .any(|n| matches!(n, Needs::Ct | Needs::CtIpv4 | Needs::CtIpv6));
            if read_ct {
                self.mask.ct_state = u8::MAX;
            }
            if needs.iter().any(|n| !n.met(&self.key, &FlowKey::exact())) {
                self.mask.dl_type = u16::MAX;
                self.mask.nw_proto = u8::MAX;
                continue;
            }
            if needs.iter().any(|n| *n != Needs::Nothing) {
                self.mask.dl_type = u16::MAX;
                self.mask.nw_proto = u8::MAX;
            }
            self.action(a, table, rule);
            if std::mem::take(&mut self.stop_list) {
                return;
            }
        }
    }

    /// Runs `actions` on a copy of the packet (a bucket's, a `clone`'s): what they
    /// change reaches neither the packet nor the working key after them.
    fn on_copy(&mut self, actions: &[Action], table: u8, rule: Option<&Arc<Rule>>) {
        let key = self.key;
        let stack = self.stack.clone();
        let popped = self.popped;
        // Actions that may change the packet run on a copy the datapath makes.
        // (A fork's ways may rewrite, whatever its own bit is; while an encap is
        // pending, an output pushes the new header.)
        let copy = popped == Popped::EncapPending
            || actions.iter().any(|a| {
                a.rewrites() || matches!(a, Action::Group(_) | Action::CheckPktLarger { .. })
            });
        if copy {
            if self.saves == MAX_SAVES {
                self.out.error = Some(XlateError::TooDeep);
                return;
            }
            self.saves += 1;
            self.emit(DpAction::Save);
        }
        self.copies += 1;
        self.actions(actions, table, rule);
        self.copies -= 1;
        // An exit in a copy ends the copy alone.
        self.exiting = false;
        if self.out.error.is_some() {
            return;
        }
        if copy {
            self.emit(DpAction::Restore);
            self.saves -= 1;
        }
        self.key = key;
        self.stack = stack;
        self.popped = popped;
    }

    /// A bucket is live when its watched port's link is up and its watched group
    /// has a live bucket (both when it watches both).
    fn bucket_live(&self, b: &Bucket, depth: usize) -> bool {
        let port_ok = b
            .watch_port
            .is_none_or(|p| self.env.live_ports.contains(&p));
        let group_ok = b.watch_group.is_none_or(|g| {
            depth < MAX_RESUBMIT_DEPTH
                && self.env.pipeline.group(g).is_some_and(|g| {
                    g.spec
                        .buckets
                        .iter()
                        .any(|b| self.bucket_live(b, depth + 1))
                })
        });
        port_ok && group_ok
    }

    /// Leaves select group `g`'s choice to the datapath, as Open vSwitch's
    /// `dp_hash` selection does: the datapath hashes the packet's addresses and
    /// ports and looks it up again, on a copy, with a `recirc_id` that resumes here
    /// ([`Resume::SelectBucket`]); that pass's flow matches the hash's low bits
    /// only. So the flow of this pass matches no address or port for the group's
    /// sake, and the next pass's flows number the hash's buckets, not the
    /// connections. False (and nothing done) where the datapath cannot: no backer,
    /// a packet-out, no copy left, or the table of frozen states full.
    fn freeze_select(&mut self, g: &Arc<Group>, table: u8, rule: Option<&Arc<Rule>>) -> bool {
        let Some(b) = self.env.backer else {
            return false;
        };
        if !self.env.may_freeze || self.saves == MAX_SAVES {
            return false;
        }
        let state = Frozen {
            slot: b.slot,
            in_port: self.key.in_port,
            metadata: self.key.metadata,
            pipeline: self.key.pipeline,
            stack: self.stack.clone(),
            saves: self.saves + 1,
            path: self.path.clone(),
            cookie: rule.map_or(u64::MAX, |r| r.spec.cookie),
            resume: Resume::SelectBucket {
                group: g.spec.id,
                table,
            },
        };
        let Some((id, held)) = b.freeze(state, self.env.now_ms) else {
            return false;
        };
        self.out.frozen.push(held);
        self.step(
            table,
            format!(
                "group:{} (select): bucket by the datapath's hash: recirc(0x{id:x})",
                g.spec.id
            ),
        );
        // The group's counters are credited on the next pass, with its bucket's:
        // one flow counts both, so they always add up.
        for a in [
            DpAction::Save,
            DpAction::Hash,
            DpAction::Recirc(id),
            DpAction::Restore,
        ] {
            self.emit(a);
        }
        true
    }

    /// The next pass of a packet that froze at select group `group`: the bucket its
    /// `dp_hash` falls in, run as the group would have. The flow matches the hash's
    /// low bits: enough for every bucket to get its share by weight
    /// ([`hash_slots`]).
    fn select_by_hash(&mut self, group: u32, table: u8) {
        let Some(g) = self.env.pipeline.group(group).cloned() else {
            self.step(table, format!("group:{group}: no such group: drop"));
            return;
        };
        self.out.groups.push((g.clone(), None));
        let live = self.live_weights(&g);
        let total: u32 = live.iter().map(|(_, w)| w).sum();
        if total == 0 {
            self.step(
                table,
                format!("group:{group} (select): no live bucket: drop"),
            );
            return;
        }
        let slots = hash_slots(live.len());
        let at = self.key.dp_hash & (slots - 1);
        // The bucket and the slots that fall in its weights (slot_weight grows
        // with the slot).
        let Some((i, its)) = weighted(&live, slot_weight(at, slots, total)) else {
            return;
        };
        let (lo, hi) = (
            first_slot_at(its.start, slots, total),
            first_slot_at(its.end, slots, total),
        );
        self.mask.dp_hash |= bucket_block(at, slots, lo, hi);
        self.step(
            table,
            format!(
                "group:{group} (select): dp_hash 0x{:x} is bucket {i}",
                self.key.dp_hash
            ),
        );
        self.out.groups.push((g.clone(), Some(i)));
        self.depth += 1;
        self.in_group += 1;
        // The pass runs on the copy the first pass made (its `Save` before the
        // `Recirc`): the bucket's actions are this pass's own.
        let was = std::mem::replace(&mut self.bucket_pass, true);
        self.actions(&g.spec.buckets[i].actions, table, None);
        self.bucket_pass = was;
        self.in_group -= 1;
        self.depth -= 1;
    }

    /// The live buckets of `g` that have a weight, with it.
    fn live_weights(&self, g: &Group) -> Vec<(usize, u32)> {
        g.spec
            .buckets
            .iter()
            .enumerate()
            .filter(|(_, b)| b.weight > 0 && self.bucket_live(b, 0))
            .map(|(i, b)| (i, u32::from(b.weight)))
            .collect()
    }

    /// A select group's bucket for this packet: among the live buckets with a
    /// weight, by a hash of its addresses and ports (so one connection stays on one
    /// bucket), in proportion to the weights. The datapath flow then matches what
    /// the hash read: one flow per connection, each with its bucket.
    fn select(&mut self, g: &Group) -> Option<usize> {
        let live = self.live_weights(g);
        let total: u32 = live.iter().map(|(_, w)| w).sum();
        if total == 0 {
            return None;
        }
        // What the hash reads, as the datapath's `hash` action reads it.
        self.mask
            .packet
            .widen(&vsw_packet::key::l4_hash_mask(&self.key));
        weighted(&live, vsw_packet::key::l4_hash(&self.key) % total).map(|(i, _)| i)
    }

    fn flood(&mut self) {
        let in_port = self.key.in_port;
        for i in 0..self.env.ports.len() {
            let p = self.env.ports[i];
            if p != in_port {
                self.output(p);
            }
        }
    }

    /// NORMAL's way for a multicast packet when the bridge snoops
    /// (crate::snooping); false when snooping does not decide. The frame is read
    /// by the first NORMAL only.
    fn snooped(&mut self, table: u8, vlan: u16) -> bool {
        let bridge = self.env.bridge;
        let frame = self.env.frame.filter(|_| !self.frame_read);
        let decided = crate::snooping::snoop(
            &mut lock(&bridge.mcast),
            &self.key.packet,
            &mut self.mask.packet,
            frame,
            (vlan, self.env.now_ms),
        );
        let Some(s) = decided else {
            return false;
        };
        self.frame_read = true;
        self.out.learning_changed |= s.changed;
        self.out.uncacheable |= s.per_packet;
        match s.way {
            crate::snooping::Way::Flood(why) => {
                self.step(table, format!("NORMAL: {why}"));
                self.flood();
            }
            crate::snooping::Way::Ports(ports, why) => {
                self.step(table, format!("NORMAL: {why}"));
                for p in ports {
                    self.output(p);
                }
            }
        }
        true
    }

    /// Whether the packet came in by an L3 tunnel port (`legacy_l3`).
    fn in_port_is_l3(&self) -> bool {
        let Some(b) = self.env.backer else {
            return false;
        };
        let (Some(name), Some(native)) = (b.tunnel_port(self.key.in_port), b.map.tunnels.as_ref())
        else {
            return false;
        };
        native.egress.packet_type_mode(name) == vsw_packet::tunnel::PacketTypeMode::LegacyL3
    }

    /// `ct(…)` (Open vSwitch's `compose_conntrack_action`): the datapath asks the
    /// tracker (committing, with the mark and label `exec` writes); the rest of
    /// this pass sees the packet as untracked; with `table=T` the packet is looked
    /// up again, with the tracker's verdict, from table T (what followed the `ct`
    /// runs after that table's actions, on the next pass).
    fn ct(&mut self, ct: &vsw_flow::ct_action::CtAction, table: u8) {
        use vsw_flow::ct_action::{CtExec, CtZone};
        if ct.alg != 0 && ct.nat.is_some() {
            // Refused when the rule went in (vsw-flow's check_actions).
            self.step(
                table,
                format!("ct({}): not carried out yet: dropped", ct.format_args()),
            );
            self.out.error = Some(XlateError::NotCarried("ct"));
            self.exiting = true;
            return;
        }
        let zone = match ct.zone {
            CtZone::Imm(z) => z,
            CtZone::Field(sf) => {
                self.looked_at(sf.field, sf.mask());
                sf.read(&self.key) as u16
            }
        };
        if ct.commit {
            for e in &ct.exec {
                match *e {
                    CtExec::Mark(value, mask) => self.emit(DpAction::CtMark { value, mask }),
                    CtExec::Label(value, mask) => {
                        for high in [true, false] {
                            let shift = if high { 64 } else { 0 };
                            let (v, m) = ((value >> shift) as u64, (mask >> shift) as u64);
                            if m != 0 {
                                self.emit(DpAction::CtLabel {
                                    high,
                                    value: v,
                                    mask: m,
                                });
                            }
                        }
                    }
                }
            }
        }
        // A committed NAT range: the new connection's translation chosen from it.
        if let (true, Some(n)) = (ct.commit, &ct.nat) {
            if let (Some(end), Some((min, max))) = (n.end, n.addrs) {
                let bytes = |a: std::net::IpAddr| match a {
                    std::net::IpAddr::V4(a) => u128::from(u32::from(a)).to_be_bytes(),
                    std::net::IpAddr::V6(a) => u128::from(a).to_be_bytes(),
                };
                self.emit(DpAction::CtNatAddr {
                    max: false,
                    addr: bytes(min),
                });
                self.emit(DpAction::CtNatAddr {
                    max: true,
                    addr: bytes(max),
                });
                self.emit(DpAction::CtNatRange {
                    src: end == vsw_flow::ct_action::NatEnd::Src,
                    ports: n.ports,
                });
            }
        }
        self.emit(DpAction::Ct {
            zone,
            commit: ct.commit,
            nat: ct.nat.is_some(),
            force: ct.force,
            helper: ct.alg,
        });
        self.step(
            table,
            format!("ct({}): tracked in zone {zone}", ct.format_args()),
        );
        self.forget_conntrack();
        let Some(next) = ct.table else {
            return;
        };
        if !self.in_one_rest() || !self.env.may_freeze {
            self.out.error = Some(XlateError::MplsNested);
            self.step(table, format!("{}", XlateError::MplsNested));
            return;
        }
        self.paused = Some(Paused {
            note: None,
            meter: None,
            table: next,
            frames: vec![Frame {
                table: next,
                rule: None,
                actions: vec![Action::Resubmit {
                    port: None,
                    table: Some(next),
                }],
            }],
        });
    }

    /// The packet as no `ct` has seen it, for what follows in this pass (Open
    /// vSwitch's `flow_clear_conntrack`).
    fn forget_conntrack(&mut self) {
        let k = &mut self.key;
        (k.ct_state, k.ct_zone, k.ct_mark, k.ct_label, k.ct_nw_proto) = (0, 0, 0, 0, 0);
        (k.ct_ipv6_src, k.ct_ipv6_dst, k.ct_nw_src, k.ct_nw_dst) = (0, 0, 0, 0);
        (k.ct_tp_src, k.ct_tp_dst) = (0, 0);
    }

    /// A MAC-learning switch: learn the source, send to where the destination was
    /// seen, flood what is unknown or multicast (unless snooping says where).
    fn normal(&mut self, table: u8) {
        let m = &mut self.mask;
        m.dl_src = MacAddr([0xff; 6]);
        m.dl_dst = MacAddr([0xff; 6]);
        m.vlan_tci |= VLAN_VID_CFI;
        let k = self.key;
        let vlan = if k.vlan_tci & VLAN_CFI != 0 {
            k.vlan_tci & 0x0fff
        } else {
            0
        };
        // Only the first NORMAL learns: every lookup of the translation then sees the
        // table as it is once this packet has passed, so a translation made again
        // later (by the revalidator) gives the same answer. A second NORMAL (after a
        // resubmit as from another port) would otherwise move the host it looks up.
        // Nor from an L3 tunnel port (legacy_l3), whose packets' addresses are
        // none of a host's, as Open vSwitch.
        if !k.dl_src.is_multicast() && !self.learned && !self.in_port_is_l3() {
            self.learned = true;
            match &self.across {
                Some(t) => self
                    .out
                    .learned_across
                    .push((t.clone(), k.dl_src, vlan, k.in_port)),
                None => self.out.learned.push((k.dl_src, vlan, k.in_port)),
            }
            if self.env.learn {
                use vsw_flow::Learned;
                let l = self
                    .env
                    .macs
                    .learn(k.dl_src, vlan, k.in_port, self.env.now_ms);
                if matches!(l, Learned::New | Learned::Moved) {
                    self.out.learning_changed = true;
                }
            }
        }
        if k.dl_dst.is_multicast() {
            if !self.snooped(table, vlan) {
                self.step(table, "NORMAL: multicast destination: flood".into());
                self.flood();
            }
            return;
        }
        match self.env.macs.lookup(k.dl_dst, vlan, self.env.now_ms) {
            Some(p) if p == k.in_port => {
                self.step(
                    table,
                    format!("NORMAL: {} is on the input port: drop", k.dl_dst),
                );
            }
            Some(p) => {
                self.step(table, format!("NORMAL: {} learned on port {p}", k.dl_dst));
                self.output(p);
            }
            None => {
                self.step(table, format!("NORMAL: {} not learned: flood", k.dl_dst));
                self.flood();
            }
        }
    }
}
