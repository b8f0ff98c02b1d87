//! Datapath actions: what a cached flow does with its packets, as translation wrote
//! it (the PMD executes them in `pmd/pass.rs`).

use std::fmt;
use std::net::Ipv4Addr;

use vsw_packet::rewrite::FieldWrite;
use vsw_packet::wire::mpls;
use vsw_packet::MacAddr;

/// What the datapath does with a packet of a flow: a small set, each cheap to run.
/// An empty list drops the packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DpAction {
    /// Send to this port as the packet is now.
    Output(u32),
    /// Send to this port the packet's first `max_len` bytes (Open vSwitch's
    /// `trunc(max_len)` before an output); what follows sees the packet whole.
    OutputTrunc {
        port: u32,
        max_len: u32,
    },
    /// Cut the packet to its first N bytes (its offload state dropped if it was
    /// cut): the inner frame of a truncated output to a tunnel port, on a copy.
    Truncate(u32),
    SetDlSrc(MacAddr),
    SetDlDst(MacAddr),
    /// Push an outer tag with this TPID (VID and PCP 0 until set).
    PushVlan(u16),
    /// Set the outer tag's VID (pushing a tag when there is none).
    SetVlanVid(u16),
    /// Set the outer tag's PCP (pushing a tag when there is none).
    SetVlanPcp(u8),
    PopVlan,
    SetNwSrc(Ipv4Addr),
    SetNwDst(Ipv4Addr),
    /// The DSCP bits (ECN kept), as a TOS value.
    SetNwTos(u8),
    SetTpSrc(u16),
    SetTpDst(u16),
    /// Decrement the TTL or hop limit; a packet whose TTL runs out goes no further.
    DecTtl,
    /// Any other header field OpenFlow's set-field writes, or a TTL copy.
    SetField(FieldWrite),
    /// Push this MPLS label stack entry after the Ethernet header and its tags, the
    /// ethertype becoming `ethertype` (0x8847 or 0x8848).
    PushMpls {
        ethertype: u16,
        lse: u32,
    },
    /// Take off the outermost label stack entry; what follows is of this ethertype.
    PopMpls(u16),
    /// Put a backbone header of this ethertype and this I-TAG in front of the
    /// frame, its addresses the frame's own.
    PushPbb {
        ethertype: u16,
        itag: u32,
    },
    /// Take off the backbone header and I-TAG: the customer's frame is left.
    PopPbb,
    /// Put an Ethernet header (addresses 0, ethertype 0x894f) and an NSH header
    /// with these fields and a zero context in front of the frame (Open vSwitch's
    /// `push_nsh` and `push_eth` in one: the frame stays Ethernet between actions).
    /// The context words that are not 0 follow as set-fields.
    PushNsh(vsw_packet::wire::nsh::NshBase),
    /// Take off the Ethernet and NSH headers: the frame the NSH header carried is
    /// left (`pop_eth` and `pop_nsh`).
    PopNsh,
    /// Put an Ethernet header (addresses 0, this ethertype) and this label stack
    /// entry in front of the whole frame: Ethernet over MPLS (Open vSwitch's
    /// `add_mpls` and `push_eth` in one).
    PushMplsEthernet {
        ethertype: u16,
        lse: u32,
    },
    /// Take off the Ethernet header and the bottom label stack entry behind it:
    /// the Ethernet frame it carried is left (`pop_eth`, `pop_mpls(eth_type=0x6558)`).
    PopMplsEthernet,
    /// Set the outermost label stack entry's bits under `mask` to `lse`'s.
    SetMpls {
        lse: u32,
        mask: u32,
    },
    /// Decrement the outermost entry's TTL; a packet whose TTL runs out goes no
    /// further.
    DecMplsTtl,
    /// Two ways on by the packet's length (Open vSwitch's `check_pkt_len`): a
    /// packet longer than `size` bytes runs the `gt` actions after this one and
    /// skips the `le` after those; any other skips the `gt` and runs the `le`.
    /// Then both go on with what follows. At most [`MAX_FORKS`] nested.
    CheckPktLen {
        size: u16,
        gt: u32,
        le: u32,
    },
    /// Measure the packet against this meter, which may drop it or remark its DSCP.
    Meter(u32),
    /// Keep a copy of the packet as it is now (a group bucket that rewrites runs
    /// between this and `Restore`).
    Save,
    /// Put back the copy the matching `Save` kept.
    Restore,
    /// Send a copy up to the control side, as the packet is now, with this note of
    /// the slow path's (`punt.rs`; Open vSwitch's `userspace()` action).
    Controller(u32),
    /// The tunnel ID a flow-keyed tunnel port sends with (`set_field:…->tun_id`).
    SetTunnel(u64),
    /// The remote end a tunnel port with `remote_ip=flow` sends to
    /// (`set_field:…->tun_dst`).
    SetTunnelDst(Ipv4Addr),
    /// The `tun_metadata0` option a Geneve port sends with
    /// (`set_field:…->tun_metadata0`).
    SetTunnelMetadata(u32),
    /// Compute the packet's `dp_hash` from its addresses and ports as they are now
    /// ([`vsw_packet::key::l4_hash`]; Open vSwitch's `hash(l4(0))`), for the
    /// recirculation after it.
    Hash,
    /// Look the packet up again, as the actions before left it, with this
    /// `recirc_id` (and the `dp_hash` a `Hash` before computed), and run that
    /// flow's actions here; then go on with the actions after this one. On the same
    /// PMD, within the same batch; at most [`MAX_RECIRC_DEPTH`] deep.
    Recirc(u32),
    /// Put the flow's tunnel header N (`DpFlow::headers`) in front of the packet
    /// (Open vSwitch's `tnl_push`); the actions after it are the underlay bridge's, for
    /// the packet as it then is. A packet the header cannot take whole (its MTU, a
    /// super-frame the outer packet cannot hold) goes to the tunnel port's own
    /// queue instead, and those actions are left out for it.
    TunnelPush(u32),
    /// Take off the outer headers of a tunnel packet of this kind to this UDP port
    /// (Open vSwitch's `tnl_pop`) and look the inner frame up again, as received on
    /// the kind's receive point (`tunnel_pop::VXLAN_RECEIVE`, `GENEVE_RECEIVE`;
    /// `VXLAN_L3_RECEIVE` for VXLAN-GPE's IP and NSH, behind a placeholder
    /// Ethernet header) with its tunnel in the key, running that flow's actions
    /// here (as `Recirc`). A packet decapsulation refuses is dropped and counted by
    /// reason.
    TunnelPop(crate::tunnel_pop::Pop),
    /// Stages a mark for the next `Ct`'s commit (`ct(commit,exec(set_field:…->ct_mark))`):
    /// the bits of `mask` set to `value`'s.
    CtMark {
        value: u32,
        mask: u32,
    },
    /// Stages half of a label for the next `Ct`'s commit: the high 64 bits when
    /// `high`, else the low.
    CtLabel {
        high: bool,
        value: u64,
        mask: u64,
    },
    /// Tracks the packet in `zone` (Open vSwitch's `ct`), committing its connection
    /// when `commit` with what the `CtMark`/`CtLabel` before it staged: the
    /// tracker's verdict becomes the packet's `ct_*` fields, which the passes
    /// after it (a `Recirc`) are looked up by.
    Ct {
        zone: u16,
        commit: bool,
        nat: bool,
        /// `force`: a reply-direction packet's commit turns the connection around.
        force: bool,
        /// `alg=`: the helper's port (21 FTP, 69 TFTP; 0 none).
        helper: u16,
    },
    /// Stages one end of the next `Ct`'s NAT address range (an IPv4 address in the
    /// low 32 bits), its highest when `max`.
    CtNatAddr {
        max: bool,
        addr: [u8; 16],
    },
    /// Stages the next `Ct`'s NAT: which end it rewrites, and its ports (`None`:
    /// the packet's own); with the addresses `CtNatAddr` staged.
    CtNatRange {
        src: bool,
        ports: Option<(u16, u16)>,
    },
    /// The packet as no `Ct` had seen it (`ct_clear`).
    CtClear,
}

impl DpAction {
    /// True when the action changes the packet (so it runs on a copy). Sending a
    /// packet up runs on the copy too: it holds the whole frame, VLAN tag included.
    pub fn rewrites(&self) -> bool {
        !matches!(self, DpAction::Output(_))
    }
}

impl fmt::Display for DpAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DpAction::Output(p) => write!(f, "{p}"),
            DpAction::OutputTrunc { port, max_len } => write!(f, "trunc({max_len}),{port}"),
            DpAction::Truncate(n) => write!(f, "trunc({n})"),
            DpAction::SetDlSrc(m) => write!(f, "set(eth(src={m}))"),
            DpAction::SetDlDst(m) => write!(f, "set(eth(dst={m}))"),
            DpAction::PushVlan(t) => write!(f, "push_vlan(tpid=0x{t:04x})"),
            DpAction::SetVlanVid(v) => write!(f, "set(vlan(vid={v}))"),
            DpAction::SetVlanPcp(p) => write!(f, "set(vlan(pcp={p}))"),
            DpAction::PopVlan => f.write_str("pop_vlan"),
            DpAction::SetNwSrc(a) => write!(f, "set(ipv4(src={a}))"),
            DpAction::SetNwDst(a) => write!(f, "set(ipv4(dst={a}))"),
            DpAction::SetNwTos(t) => write!(f, "set(ip(tos={t}))"),
            DpAction::SetTpSrc(p) => write!(f, "set(l4(src={p}))"),
            DpAction::SetTpDst(p) => write!(f, "set(l4(dst={p}))"),
            DpAction::DecTtl => f.write_str("dec_ttl"),
            DpAction::SetField(w) => write!(f, "{w}"),
            DpAction::PushMpls { ethertype, lse } => {
                write!(
                    f,
                    "push_mpls(label={},tc={},ttl={},bos={},eth_type=0x{ethertype:x})",
                    mpls::label(*lse),
                    mpls::tc(*lse),
                    mpls::ttl(*lse),
                    u8::from(mpls::bos(*lse))
                )
            }
            DpAction::PopMpls(t) => write!(f, "pop_mpls(eth_type=0x{t:x})"),
            DpAction::PushPbb { ethertype, itag } => {
                write!(f, "push_pbb(itag=0x{itag:08x},eth_type=0x{ethertype:x})")
            }
            DpAction::PopPbb => f.write_str("pop_pbb"),
            DpAction::PushNsh(h) => {
                write!(
                    f,
                    "push_nsh(flags={},ttl={},mdtype={},np={},spi=0x{:x},si={}",
                    h.flags,
                    h.ttl,
                    h.md_type,
                    h.next_proto,
                    h.path >> 8,
                    h.path & 0xff
                )?;
                if h.md_type != 1 && h.context_len != 0 {
                    write!(f, ",md2_len={}", h.context_len)?;
                }
                f.write_str("),push_eth(src=00:00:00:00:00:00,dst=00:00:00:00:00:00)")
            }
            DpAction::PopNsh => f.write_str("pop_eth,pop_nsh()"),
            DpAction::PushMplsEthernet { ethertype, lse } => write!(
                f,
                "add_mpls(label={},tc={},ttl={},bos={},eth_type=0x{ethertype:x}),push_eth(src=00:00:00:00:00:00,dst=00:00:00:00:00:00)",
                mpls::label(*lse),
                mpls::tc(*lse),
                mpls::ttl(*lse),
                u8::from(mpls::bos(*lse))
            ),
            DpAction::PopMplsEthernet => f.write_str("pop_eth,pop_mpls(eth_type=0x6558)"),
            DpAction::SetMpls { lse, mask } => {
                write!(f, "set(mpls(lse=0x{lse:08x}/0x{mask:08x}))")
            }
            DpAction::DecMplsTtl => f.write_str("dec_mpls_ttl"),
            DpAction::CheckPktLen { size, gt, le } => {
                write!(f, "check_pkt_len(size={size},gt={gt},le={le})")
            }
            DpAction::Controller(note) => write!(f, "userspace(controller,{note})"),
            DpAction::Meter(m) => write!(f, "meter({m})"),
            DpAction::SetTunnel(id) => write!(f, "set(tunnel(tun_id=0x{id:x}))"),
            DpAction::SetTunnelDst(a) => write!(f, "set(tunnel(dst={a}))"),
            DpAction::SetTunnelMetadata(v) => write!(f, "set(tunnel(tun_metadata0=0x{v:x}))"),
            DpAction::Save => f.write_str("clone("),
            DpAction::Restore => f.write_str(")"),
            DpAction::Hash => f.write_str("hash(l4(0))"),
            DpAction::Recirc(id) => write!(f, "recirc(0x{id:x})"),
            DpAction::TunnelPush(n) => write!(f, "tnl_push(header({n}))"),
            DpAction::CtMark { value, mask } => write!(f, "ct_mark(0x{value:x}/0x{mask:x})"),
            DpAction::CtLabel { high, value, mask } => {
                let half = if *high { "hi" } else { "lo" };
                write!(f, "ct_label_{half}(0x{value:x}/0x{mask:x})")
            }
            DpAction::Ct {
                zone,
                commit,
                nat,
                force,
                helper,
            } => {
                let c = match (*commit, *force) {
                    (true, true) => "commit,force,",
                    (true, false) => "commit,",
                    _ => "",
                };
                let n = if *nat { ",nat" } else { "" };
                write!(f, "ct({c}zone={zone}{n}")?;
                if let Some(h) = vsw_conntrack::helper::Helper::of_port(*helper) {
                    write!(f, ",helper={}", h.name())?;
                }
                f.write_str(")")
            }
            DpAction::CtNatAddr { max, addr } => {
                let which = if *max { "max" } else { "min" };
                write!(f, "ct_nat_{which}({:#x})", u128::from_be_bytes(*addr))
            }
            DpAction::CtNatRange { src, ports } => {
                let end = if *src { "src" } else { "dst" };
                match ports {
                    Some((lo, hi)) => write!(f, "ct_nat({end},{lo}-{hi})"),
                    None => write!(f, "ct_nat({end})"),
                }
            }
            DpAction::CtClear => f.write_str("ct_clear"),
            DpAction::TunnelPop(p) => {
                let kind = if p.geneve { "genev_sys" } else { "vxlan_sys" };
                write!(f, "tnl_pop({kind}_{}", p.udp_port)?;
                for (class, kind) in [p.option, p.other_option].into_iter().flatten() {
                    write!(f, ",tun_metadata0=0x{class:04x}/0x{kind:02x}")?;
                }
                if let Some(i) = crate::tunnel_pop::remote6_of(p.receive) {
                    write!(f, ",ipv6_remote={i}")?;
                }
                f.write_str(")")
            }
        }
    }
}

/// How many recirculations one packet may take (each a lookup and its actions
/// again): more is dropped and counted (`lost`), so that no chain of frozen states
/// can hold a PMD on one packet. Open vSwitch's datapath allows 6.
pub const MAX_RECIRC_DEPTH: usize = 6;

/// `CheckPktLen`s one may be within at once: translation keeps to it.
pub const MAX_FORKS: usize = 8;

/// Copies of a packet `Save` may hold at once (groups within buckets): translation
/// keeps to it.
pub const MAX_SAVED: usize = 4;

/// Prints a list of datapath actions as `dpctl/dump-flows` does (`drop` when empty).
pub fn format_dp_actions(actions: &[DpAction]) -> String {
    if actions.is_empty() {
        return "drop".into();
    }
    // A saved copy reads as Open vSwitch's clone(…): no comma inside its edges.
    let mut s = String::new();
    let mut after_open = true;
    for a in actions {
        if !after_open && *a != DpAction::Restore {
            s.push(',');
        }
        s.push_str(&a.to_string());
        after_open = *a == DpAction::Save;
    }
    s
}
