//! Actions: what a rule does with a matching packet. Each action is defined once, in
//! [`ACTIONS`]: the name `ovs-ofctl` writes it under, how its argument is read, and
//! what the match must promise before it may touch a header. [`Action::def`] and
//! [`Action::argument`] tie each variant to its definition with exhaustive matches,
//! so an action added without one does not compile. Executing an action is the
//! datapath's (`vsw-datapath`, pmd/: also an exhaustive match).

use std::fmt;
use std::net::Ipv4Addr;

use vsw_packet::rewrite::FieldWrite;
use vsw_packet::{EtherType, MacAddr};

use crate::error::{FlowSyntaxError, PortResolver};
use crate::fields::Needs;
use crate::subfield::{ones, Field, Subfield};
use crate::table::MAX_TABLE;
use crate::values::{bad, c_hex, parse_mac, parse_masked_uint, parse_port, parse_uint};

/// The header an `encap` puts in front.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Encap {
    /// An NSH header; `md_type` as written (`encap(nsh)`: MD type 1, none shown).
    Nsh {
        md_type: Option<u8>,
        /// MD type 2 metadata, RFC 8300's TLVs as the header carries them
        /// (`tlv(0xCLASS,TYPE,0xVALUE)`, at most 244 bytes).
        tlvs: Option<std::sync::Arc<[u8]>>,
    },
    /// A label stack entry in front of the whole frame (`encap(mpls)`: ethertype
    /// 0x8847, `encap(mpls_mc)`: 0x8848), Ethernet over MPLS.
    Mpls {
        ethertype: u16,
    },
    Ethernet,
}

/// What a rule does with a matching packet. Actions run in order; a header rewrite
/// applies to the outputs that follow it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// Send to one port (never back to the port it came from; see `InPort`).
    Output(u32),
    /// Send back out of the port the packet came in on.
    InPort,
    /// Behave as a MAC-learning switch.
    Normal,
    /// Send to every port but the one it came from.
    Flood,
    /// Discard; counted on the rule.
    Drop,
    /// Hand the packet to a group (its buckets run on copies of it).
    Group(u32),
    /// Measure the packet against a meter, which may drop or remark it.
    Meter(u32),
    /// Send on this queue of the output port: vsw's ports have one queue each, so
    /// it is kept (and shown) but changes nothing.
    SetQueue(u32),
    /// The next N actions go into the packet's action set, which runs when the
    /// pipeline ends (OpenFlow's write-actions instruction; written
    /// `write_actions(ACTIONS)`).
    WriteActions(u8),
    /// Empty the packet's action set (OpenFlow's clear-actions instruction).
    ClearActions,
    /// Set the metadata bits under `mask` to `value` for the tables that follow
    /// (OpenFlow's write-metadata instruction; written `write_metadata:V[/M]`).
    WriteMetadata {
        value: u64,
        mask: u64,
    },
    /// Set the tunnel key the packet leaves a tunnel port with (`set_tunnel:V`,
    /// OpenFlow's set-field of tunnel_id); later tables match it as `tun_id`. No
    /// port is a tunnel yet, so it changes nothing else.
    SetTunnel(u64),
    /// Set the remote end a tunnel port with `remote_ip=flow` sends the packet to
    /// (`set_field:A->tun_dst`); later tables match it as `tun_dst`.
    SetTunnelDst(Ipv4Addr),
    /// Set the Geneve option a Geneve port sends (the one the TLV map names
    /// `tun_metadata0`: `set_field:V->tun_metadata0`); later tables match it.
    SetTunnelMetadata(u32),
    /// Send to the OpenFlow controllers as a packet-in, at most `max_len` bytes of
    /// it ([`CONTROLLER_NO_BUFFER`]: all of it), with the controller's own bytes
    /// (`controller(userdata=…)`, which a packet-in in NXT_PACKET_IN2's format
    /// carries), through a meter that limits the packet-ins alone
    /// (`controller(meter_id=…)`).
    Controller {
        max_len: u16,
        userdata: Option<std::sync::Arc<[u8]>>,
        meter: Option<u32>,
        /// `controller(pause)`: the translation stops here, and the controller
        /// resumes it (NXT_RESUME) with the packet and the fields it sends back.
        pause: bool,
    },
    SetDlSrc(MacAddr),
    SetDlDst(MacAddr),
    /// Push a new outermost 802.1Q tag (this TPID), VID 0 and PCP 0 unless set later.
    PushVlan(u16),
    /// Set the VID of the outermost tag, pushing a tag when there is none.
    SetVlanVid(u16),
    /// Set the PCP of the outermost tag, pushing a tag when there is none.
    SetVlanPcp(u8),
    /// Remove the outermost tag.
    StripVlan,
    /// IPv4 source and destination; checksums updated incrementally.
    SetNwSrc(Ipv4Addr),
    SetNwDst(Ipv4Addr),
    /// The DSCP bits of the IPv4 TOS / IPv6 traffic class (ECN kept), as a TOS value.
    SetNwTos(u8),
    /// TCP, UDP or SCTP ports.
    SetTpSrc(u16),
    SetTpDst(u16),
    /// Decrement the IPv4 TTL / IPv6 hop limit; a packet at 0 or 1 is dropped.
    DecTtl,
    /// `dec_ttl(ID,…)` (NXAST_DEC_TTL_CNT_IDS): as `dec_ttl`, naming the
    /// controllers an expired packet would go to. vsw sends none (as for
    /// `dec_ttl`, the datapath drops it): kept and echoed.
    DecTtlIds(std::sync::Arc<[u16]>),
    /// Push an MPLS label stack entry after the Ethernet header and its tags, the
    /// ethertype becoming this one (0x8847 or 0x8848): `push_mpls:ETHERTYPE`. The
    /// entry starts as Open vSwitch's does: on an MPLS packet a copy of the
    /// outermost (bottom of stack clear); else label 0 (IPv6: 2), TC from the DSCP,
    /// TTL from the IP header (64 without one), bottom of stack set.
    PushMpls(u16),
    /// Take off the outermost label stack entry; what follows is of this ethertype
    /// (`pop_mpls:ETHERTYPE`).
    PopMpls(u16),
    /// Put a PBB backbone header of this ethertype (0x88e7) and an I-TAG in front
    /// of the frame: `push_pbb:ETHERTYPE`. As OpenFlow's: the backbone addresses
    /// are the frame's own, the I-TAG a copy of the frame's outermost one, or 0.
    /// Open vSwitch has no PBB; vsw takes OpenFlow 1.3's.
    PushPbb(u16),
    /// Take off the backbone header and its I-TAG (`pop_pbb`): what is behind is
    /// seen after a recirculation, as after `pop_mpls`.
    PopPbb,
    /// Put a header in front of the packet (`encap(nsh)`, `encap(nsh(md_type=N))`,
    /// `encap(mpls)`, `encap(mpls_mc)`, `encap(ethernet)`), as Open vSwitch's
    /// generic encapsulation: an NSH header or a label makes the packet NSH or
    /// MPLS without an Ethernet header until an `encap(ethernet)`.
    Encap(Encap),
    /// Take off the outermost header (`decap()`): an Ethernet header in front of
    /// NSH or MPLS, or then the NSH header or label (what it carried is seen
    /// after a recirculation). The packet type it may name
    /// (`decap(packet_type(ns=N,type=T))`) says what a label carries (vsw takes
    /// (0,0), Ethernet); for NSH, as in Open vSwitch, the header's next protocol
    /// decides.
    Decap(Option<(u16, u16)>),
    /// Decrement the NSH header's TTL (`dec_nsh_ttl`); at 1 or 0 the action list
    /// stops (Open vSwitch also sends a packet-in of reason invalid_ttl; vsw has
    /// no such reason yet).
    DecNshTtl,
    /// The outermost label (`set_mpls_label(N)`, `set_field:N->mpls_label`).
    SetMplsLabel(u32),
    /// The outermost entry's traffic class (`set_mpls_tc(N)`).
    SetMplsTc(u8),
    /// The outermost entry's TTL (`set_mpls_ttl(N)`).
    SetMplsTtl(u8),
    /// Decrement the outermost entry's TTL; a packet whose TTL runs out is dropped
    /// (`dec_mpls_ttl`).
    DecMplsTtl,
    /// `ct(…)`: the connection tracker's verdict on the packet (and a commit, NAT,
    /// a recirculation to `table`).
    Ct(Box<crate::ct_action::CtAction>),
    /// `ct_clear`: the packet as no `ct` had seen it.
    CtClear,
    /// Every other field OpenFlow's set-field writes (`set_field:V->F`, and
    /// `mod_nw_ecn`, `mod_nw_ttl`), and the TTL copies of IP-in-IP (`copy_ttl_out`,
    /// `copy_ttl_in`).
    SetField(FieldWrite),
    /// Continue in a later table once this rule's other actions are done (an
    /// OpenFlow instruction: written last).
    GotoTable(u8),
    /// Look the packet up again, as if it came in on `port` (default: where it came
    /// in) in `table` (default: this rule's table), run what matches, and go on with
    /// the actions after this one. Nesting is bounded when translating.
    Resubmit {
        port: Option<u32>,
        table: Option<u8>,
    },
    /// The next N actions run on a copy of the packet: what they change does not
    /// reach the actions after them (Open vSwitch's `clone(…)`; written
    /// `clone(ACTIONS)`).
    Clone(u8),
    /// Sets the bits of a field under a mask: `load:V->DST[a..b]` (Open vSwitch's
    /// NXAST_REG_LOAD: a subfield), or `set_field:V[/M]->F` of a field only the
    /// pipeline has (registers, `pkt_mark`, `metadata`).
    Load(Load),
    /// `move:SRC[a..b]->DST[c..d]`: bits of one field copied into another
    /// (NXAST_REG_MOVE), as wide on both sides.
    Move {
        src: Subfield,
        dst: Subfield,
    },
    /// `push:SRC[a..b]`: the bits onto the translation's stack (NXAST_STACK_PUSH).
    StackPush(Subfield),
    /// `pop:DST[a..b]`: the stack's top into the bits (NXAST_STACK_POP); nothing
    /// when the stack is empty.
    StackPop(Subfield),
    /// `conjunction(ID,K/N)`: this rule's match is clause K (1-based) of N of
    /// conjunctive match ID; a packet that matches a rule of each clause (all of
    /// one priority) is looked up again with `conj_id=ID` (NXAST_CONJUNCTION). A
    /// rule with one has nothing but these.
    Conjunction {
        id: u32,
        clause: u8,
        n_clauses: u8,
    },
    /// `learn(…)`: makes a rule from the packet and puts it in a table
    /// (NXAST_LEARN; see [`crate::learn`]).
    Learn(std::sync::Arc<crate::learn::Learn>),
    /// `output:SRC[a..b]`: out of the port the bits name (NXAST_OUTPUT_REG), an
    /// OpenFlow 1.0 number (0xfff8 IN_PORT, 0xfffb FLOOD, 0xfffe LOCAL …).
    OutputReg {
        src: Subfield,
        max_len: u16,
    },
    /// `exit`: nothing after it runs, in this list or any it was resubmitted from
    /// (a clone's or a bucket's ends only that copy); the action set still does.
    Exit,
    /// `pop_queue`: back to the queue the packet came with — vsw's ports have one.
    PopQueue,
    /// `bundle(…)` / `bundle_load(…)`: a live member port chosen, sent to or loaded
    /// into a field (NXAST_BUNDLE, NXAST_BUNDLE_LOAD; see [`crate::member_bundle`]).
    Bundle(std::sync::Arc<crate::member_bundle::MemberBundle>),
    /// `multipath(…)`: a link number from a hash of the packet's fields, loaded
    /// into a field (NXAST_MULTIPATH; see [`crate::multipath`]).
    Multipath(std::sync::Arc<crate::multipath::Multipath>),
    /// `check_pkt_larger(LEN)->DST`: one bit, 1 when the packet is longer than
    /// LEN bytes, 0 when not, for the actions after it (NXAST_CHECK_PKT_LARGER;
    /// the datapath decides per packet, translation follows both ways).
    CheckPktLarger {
        len: u16,
        dst: Subfield,
    },
    /// `sample(…)`: a packet for an IPFIX collector set (NXAST_SAMPLE…). vsw has no
    /// IPFIX exporter yet: kept, echoed, and it does nothing.
    Sample(Sample),
    /// `output(port=PORT,max_len=N)`: out of PORT, cut to its first N bytes (at
    /// least 14); the actions after it see the packet whole (NXAST_OUTPUT_TRUNC).
    OutputTrunc {
        port: u32,
        max_len: u32,
    },
    /// `fin_timeout(idle_timeout=IDLE,hard_timeout=HARD)`: a TCP FIN or RST that
    /// passes the rule cuts its timeouts to these (seconds; 0 leaves that one) when
    /// they are longer (NXAST_FIN_TIMEOUT).
    FinTimeout {
        idle: u16,
        hard: u16,
    },
}

/// [`Action::Sample`]'s arguments, as Open vSwitch names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Sample {
    /// Packets sampled in 65,535 (never 0).
    pub probability: u16,
    pub collector_set_id: u32,
    pub obs_domain_id: u32,
    pub obs_point_id: u32,
    pub sampling_port: Option<u32>,
    /// 0: the default, 1: ingress, 2: egress.
    pub direction: u8,
}

impl fmt::Display for Sample {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "sample(probability={},collector_set_id={},obs_domain_id={},obs_point_id={}",
            self.probability, self.collector_set_id, self.obs_domain_id, self.obs_point_id
        )?;
        if let Some(p) = self.sampling_port {
            write!(f, ",sampling_port={p}")?;
        }
        match self.direction {
            1 => f.write_str(",ingress")?,
            2 => f.write_str(",egress")?,
            _ => {}
        }
        f.write_str(")")
    }
}

fn parse_sample(text: &str, ports: &dyn PortResolver) -> Result<Sample, FlowSyntaxError> {
    let n = "sample";
    let mut s = Sample {
        probability: 0,
        collector_set_id: 0,
        obs_domain_id: 0,
        obs_point_id: 0,
        sampling_port: None,
        direction: 0,
    };
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let u32_of = |v: &str| parse_uint(n, v, u128::from(u32::MAX)).map(|v| v as u32);
        match part.split_once('=') {
            Some(("probability", v)) => s.probability = parse_uint(n, v, 0xffff)? as u16,
            Some(("collector_set_id", v)) => s.collector_set_id = u32_of(v)?,
            Some(("obs_domain_id", v)) => s.obs_domain_id = u32_of(v)?,
            Some(("obs_point_id", v)) => s.obs_point_id = u32_of(v)?,
            Some(("sampling_port", v)) => {
                s.sampling_port = match parse_port(n, v, ports)? {
                    // OpenFlow 1.0's OFPP_NONE, and OpenFlow's ANY: no port.
                    0xffff | 0xffff_ffff => None,
                    p if p < 0xff00 || p == crate::LOCAL_PORT => Some(p),
                    _ => return Err(bad(n, v, "a port a packet is received on")),
                }
            }
            None if part == "ingress" => s.direction = 1,
            None if part == "egress" => s.direction = 2,
            _ => return Err(bad(n, part, "not an argument of sample")),
        }
    }
    if s.probability == 0 {
        return Err(bad(n, text, "a non-zero probability is needed"));
    }
    Ok(s)
}

/// A [`Action::Load`]: the bits of `mask` in `field` become `value`'s.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Load {
    pub field: Field,
    /// In place (not shifted down), within `mask`.
    pub value: u128,
    pub mask: u128,
    /// Written `set_field:V/M->F` (any mask) rather than `load:V->F[a..b]` (a
    /// subfield): printed as it was written.
    pub as_set_field: bool,
}

impl Load {
    /// The bits it sets, as a subfield: `None` when they are not one run (only a
    /// set-field's mask can be).
    pub fn subfield(&self) -> Option<Subfield> {
        let ofs = self.mask.trailing_zeros();
        let n = self.mask.count_ones();
        (self.mask != 0 && (self.mask >> ofs) == ones(n))
            .then(|| Subfield::new(self.field, ofs, n))
            .flatten()
    }
}

/// Builds an action from its written argument (`None`: written without one).
type Build =
    fn(name: &str, arg: Option<&str>, ports: &dyn PortResolver) -> Result<Action, FlowSyntaxError>;

/// One action's definition.
pub struct ActionDef {
    /// The name it is printed under.
    pub name: &'static str,
    /// Other names it is read under.
    pub aliases: &'static [&'static str],
    /// What the match must promise (a rewrite of a header the match does not promise
    /// is refused, as OpenFlow does).
    pub needs: Needs,
    /// Whether it changes the packet (rather than send it somewhere).
    pub rewrites: bool,
    build: Build,
}

impl ActionDef {
    pub fn build(
        &self,
        name: &str,
        arg: Option<&str>,
        ports: &dyn PortResolver,
    ) -> Result<Action, FlowSyntaxError> {
        (self.build)(name, arg, ports)
    }
}

/// An argument the action must have.
fn arg<'a>(name: &str, arg: Option<&'a str>) -> Result<&'a str, FlowSyntaxError> {
    arg.ok_or_else(|| bad(name, "", "needs a value (name:value)"))
}

/// An action written without an argument.
fn bare(name: &str, arg: Option<&str>, action: Action) -> Result<Action, FlowSyntaxError> {
    match arg {
        None => Ok(action),
        Some(a) => Err(bad(name, a, "takes no value")),
    }
}

fn ipv4(name: &str, a: &str) -> Result<Ipv4Addr, FlowSyntaxError> {
    a.parse().map_err(|_| bad(name, a, "not an IPv4 address"))
}

static OUTPUT: ActionDef = ActionDef {
    name: "output",
    aliases: &[],
    needs: Needs::Nothing,
    rewrites: false,
    // `output:PORT`, `output:SRC[a..b]` (a port from a field),
    // `output(port=PORT,max_len=N)` (cut to N bytes) or
    // `output(port=SRC[a..b],max_len=N)`.
    build: |n, a, ports| {
        let a = arg(n, a)?;
        // `port=…` and `max_len=…` in either order (a field's `[a..b]` holds no
        // comma), or the port alone.
        let (mut port, mut max_len) = (a.trim(), None);
        if a.contains('=') {
            port = "";
            for part in a.split(',').map(str::trim) {
                match part.split_once('=') {
                    Some(("port", p)) => port = p.trim(),
                    Some(("max_len", m)) => max_len = Some(m.trim()),
                    _ => return Err(bad(n, part, "port=PORT and max_len=N")),
                }
            }
        }
        if port.contains('[') {
            let src = Subfield::parse(n, port)?;
            if src.n_bits > 64 {
                return Err(bad(n, port, "a port number has at most 64 bits"));
            }
            let max_len = match max_len {
                Some(m) => parse_uint(n, m, 0xffff)? as u16,
                None => u16::MAX,
            };
            return Ok(Action::OutputReg { src, max_len });
        }
        let port = parse_port(n, port, ports)?;
        let Some(max_len) = max_len else {
            return Ok(Action::Output(port));
        };
        let max_len = parse_uint(n, max_len, u128::from(u32::MAX))? as u32;
        if max_len < 14 {
            return Err(bad(n, a, "max_len of at least 14, an Ethernet header"));
        }
        if port >= 0xff00 && port != crate::LOCAL_PORT {
            return Err(bad(n, a, "a port a packet is sent from, or LOCAL"));
        }
        Ok(Action::OutputTrunc { port, max_len })
    },
};
static BUNDLE: ActionDef = ActionDef {
    name: "bundle",
    aliases: &[],
    needs: Needs::Nothing,
    rewrites: false,
    // `bundle(ARGS)`: the parentheses arrive as the argument.
    build: |_, a, ports| {
        Ok(Action::Bundle(std::sync::Arc::new(
            crate::member_bundle::MemberBundle::parse(a.unwrap_or(""), false, ports)?,
        )))
    },
};
static BUNDLE_LOAD: ActionDef = ActionDef {
    name: "bundle_load",
    aliases: &[],
    needs: Needs::Nothing,
    rewrites: false,
    build: |_, a, ports| {
        Ok(Action::Bundle(std::sync::Arc::new(
            crate::member_bundle::MemberBundle::parse(a.unwrap_or(""), true, ports)?,
        )))
    },
};
static MULTIPATH: ActionDef = ActionDef {
    name: "multipath",
    aliases: &[],
    needs: Needs::Nothing,
    rewrites: false,
    // `multipath(ARGS)`: the parentheses arrive as the argument.
    build: |_, a, _| {
        Ok(Action::Multipath(std::sync::Arc::new(
            crate::multipath::Multipath::parse(a.unwrap_or(""))?,
        )))
    },
};
static SAMPLE: ActionDef = ActionDef {
    name: "sample",
    aliases: &[],
    needs: Needs::Nothing,
    rewrites: false,
    build: |_, a, ports| Ok(Action::Sample(parse_sample(a.unwrap_or(""), ports)?)),
};
static FIN_TIMEOUT: ActionDef = ActionDef {
    name: "fin_timeout",
    aliases: &[],
    needs: Needs::Tcp,
    rewrites: false,
    build: |n, a, _| {
        let (mut idle, mut hard) = (0, 0);
        for part in a
            .unwrap_or("")
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
        {
            match part.split_once('=') {
                Some(("idle_timeout", v)) => idle = parse_uint(n, v, 0xffff)? as u16,
                Some(("hard_timeout", v)) => hard = parse_uint(n, v, 0xffff)? as u16,
                _ => return Err(bad(n, part, "idle_timeout=SECONDS or hard_timeout=SECONDS")),
            }
        }
        Ok(Action::FinTimeout { idle, hard })
    },
};
static EXIT: ActionDef = ActionDef {
    name: "exit",
    aliases: &[],
    needs: Needs::Nothing,
    rewrites: false,
    build: |n, a, _| bare(n, a, Action::Exit),
};
static POP_QUEUE: ActionDef = ActionDef {
    name: "pop_queue",
    aliases: &[],
    needs: Needs::Nothing,
    rewrites: false,
    build: |n, a, _| bare(n, a, Action::PopQueue),
};
static IN_PORT: ActionDef = ActionDef {
    name: "IN_PORT",
    aliases: &[],
    needs: Needs::Nothing,
    rewrites: false,
    build: |n, a, _| bare(n, a, Action::InPort),
};
static NORMAL: ActionDef = ActionDef {
    name: "NORMAL",
    aliases: &[],
    needs: Needs::Nothing,
    rewrites: false,
    build: |n, a, _| bare(n, a, Action::Normal),
};
static FLOOD: ActionDef = ActionDef {
    name: "FLOOD",
    aliases: &["all"],
    needs: Needs::Nothing,
    rewrites: false,
    build: |n, a, _| bare(n, a, Action::Flood),
};
/// OpenFlow's OFPCML_NO_BUFFER: the whole packet goes to the controller.
pub const CONTROLLER_NO_BUFFER: u16 = 0xffff;

static CONTROLLER: ActionDef = ActionDef {
    name: "CONTROLLER",
    aliases: &[],
    needs: Needs::Nothing,
    rewrites: false,
    // `controller`, `controller:LEN` or
    // `controller(max_len=LEN,userdata=HEX.HEX…,meter_id=M)`, as ovs-ofctl; a reason
    // but `action`, a controller id or `pause` are not carried out, and refused.
    build: |n, a, _| {
        let (mut max_len, mut userdata, mut meter) = (CONTROLLER_NO_BUFFER, None, None);
        let mut pause = false;
        for part in a.into_iter().flat_map(|a| a.split(',')).map(str::trim) {
            match part.split_once('=') {
                None if part == "pause" => pause = true,
                None if !part.is_empty() => max_len = parse_uint(n, part, 0xffff)? as u16,
                None => {}
                Some(("max_len", v)) => max_len = parse_uint(n, v, 0xffff)? as u16,
                Some(("reason", "action")) | Some(("id", "0")) => {}
                Some(("userdata", v)) => {
                    let bytes = v
                        .split('.')
                        .filter(|b| !b.is_empty())
                        .map(|b| u8::from_str_radix(b, 16))
                        .collect::<Result<Vec<u8>, _>>()
                        .map_err(|_| bad(n, v, "userdata is hex bytes: 01.02.0a"))?;
                    userdata = Some(std::sync::Arc::from(bytes));
                }
                Some(("meter_id", v)) => {
                    meter = Some(parse_uint(n, v, u128::from(crate::table::MAX_METER_ID))? as u32)
                }
                Some(_) => {
                    return Err(bad(
                        n,
                        part,
                        "vsw sends packet-ins with the reason action to every controller: \
                         max_len, userdata, pause and meter_id are all it takes",
                    ))
                }
            }
        }
        Ok(Action::Controller {
            max_len,
            userdata,
            meter,
            pause,
        })
    },
};
static GROUP: ActionDef = ActionDef {
    name: "group",
    aliases: &[],
    needs: Needs::Nothing,
    rewrites: false,
    build: |n, a, _| {
        Ok(Action::Group(
            parse_uint(n, arg(n, a)?, u128::from(crate::table::MAX_GROUP_ID))? as u32,
        ))
    },
};
static METER: ActionDef = ActionDef {
    name: "meter",
    aliases: &[],
    needs: Needs::Nothing,
    // A remark band may change the packet's DSCP.
    rewrites: true,
    build: |n, a, _| {
        let id = parse_uint(n, arg(n, a)?, u128::from(crate::table::MAX_METER_ID))? as u32;
        if id == 0 {
            return Err(bad(n, "0", "meters are numbered 1..4096"));
        }
        Ok(Action::Meter(id))
    },
};
static SET_QUEUE: ActionDef = ActionDef {
    name: "set_queue",
    aliases: &[],
    needs: Needs::Nothing,
    rewrites: false,
    build: |n, a, _| {
        Ok(Action::SetQueue(
            parse_uint(n, arg(n, a)?, 0xffff_ffff)? as u32
        ))
    },
};
static WRITE_ACTIONS: ActionDef = ActionDef {
    name: "write_actions",
    aliases: &[],
    needs: Needs::Nothing,
    rewrites: false,
    // Read with the actions it holds, by the flow parser (`syntax.rs`).
    build: |n, a, _| {
        Err(bad(
            n,
            a.unwrap_or(""),
            "write_actions(ACTIONS) holds actions",
        ))
    },
};
static CLONE: ActionDef = ActionDef {
    name: "clone",
    aliases: &[],
    needs: Needs::Nothing,
    rewrites: false,
    // Read with the actions it holds, by the flow parser (`syntax.rs`).
    build: |n, a, _| Err(bad(n, a.unwrap_or(""), "clone(ACTIONS) holds actions")),
};
static CLEAR_ACTIONS: ActionDef = ActionDef {
    name: "clear_actions",
    aliases: &[],
    needs: Needs::Nothing,
    rewrites: false,
    build: |n, a, _| bare(n, a, Action::ClearActions),
};
static WRITE_METADATA: ActionDef = ActionDef {
    name: "write_metadata",
    aliases: &[],
    needs: Needs::Nothing,
    rewrites: false,
    build: |n, a, _| {
        let (value, mask) = crate::values::parse_masked_uint(n, arg(n, a)?, u128::from(u64::MAX))?;
        Ok(Action::WriteMetadata {
            value: (value & mask) as u64,
            mask: mask as u64,
        })
    },
};
static SET_TUNNEL: ActionDef = ActionDef {
    name: "set_tunnel",
    aliases: &["set_tunnel64"],
    needs: Needs::Nothing,
    rewrites: false,
    build: |n, a, _| {
        Ok(Action::SetTunnel(
            parse_uint(n, arg(n, a)?, u128::from(u64::MAX))? as u64,
        ))
    },
};
static DROP: ActionDef = ActionDef {
    name: "drop",
    aliases: &[],
    needs: Needs::Nothing,
    rewrites: false,
    build: |n, a, _| bare(n, a, Action::Drop),
};
static MOD_DL_SRC: ActionDef = ActionDef {
    name: "mod_dl_src",
    aliases: &[],
    needs: Needs::Nothing,
    rewrites: true,
    build: |n, a, _| Ok(Action::SetDlSrc(parse_mac(n, arg(n, a)?)?.0)),
};
static MOD_DL_DST: ActionDef = ActionDef {
    name: "mod_dl_dst",
    aliases: &[],
    needs: Needs::Nothing,
    rewrites: true,
    build: |n, a, _| Ok(Action::SetDlDst(parse_mac(n, arg(n, a)?)?.0)),
};
/// A push's argument: the ethertype (or TPID) of the header it pushes, one of
/// `allowed` (`says` names them when it is not).
fn pushed_type(
    n: &str,
    a: Option<&str>,
    allowed: &[u16],
    says: &str,
) -> Result<u16, FlowSyntaxError> {
    let a = arg(n, a)?;
    let t = parse_uint(n, a, 0xffff)? as u16;
    if !allowed.contains(&t) {
        return Err(bad(n, a, says));
    }
    Ok(t)
}

static PUSH_VLAN: ActionDef = ActionDef {
    name: "push_vlan",
    aliases: &[],
    needs: Needs::Nothing,
    rewrites: true,
    build: |n, a, _| {
        let tpid = pushed_type(
            n,
            a,
            &[EtherType::VLAN, EtherType::QINQ],
            "the TPID is 0x8100 or 0x88a8",
        )?;
        Ok(Action::PushVlan(tpid))
    },
};
static MOD_VLAN_VID: ActionDef = ActionDef {
    name: "mod_vlan_vid",
    aliases: &[],
    needs: Needs::Nothing,
    rewrites: true,
    build: |n, a, _| Ok(Action::SetVlanVid(parse_uint(n, arg(n, a)?, 4095)? as u16)),
};
static MOD_VLAN_PCP: ActionDef = ActionDef {
    name: "mod_vlan_pcp",
    aliases: &[],
    needs: Needs::Nothing,
    rewrites: true,
    build: |n, a, _| Ok(Action::SetVlanPcp(parse_uint(n, arg(n, a)?, 7)? as u8)),
};
static STRIP_VLAN: ActionDef = ActionDef {
    name: "strip_vlan",
    aliases: &["pop_vlan"],
    needs: Needs::Nothing,
    rewrites: true,
    build: |n, a, _| bare(n, a, Action::StripVlan),
};
static MOD_NW_SRC: ActionDef = ActionDef {
    name: "mod_nw_src",
    aliases: &[],
    needs: Needs::Ipv4,
    rewrites: true,
    build: |n, a, _| Ok(Action::SetNwSrc(ipv4(n, arg(n, a)?)?)),
};
static MOD_NW_DST: ActionDef = ActionDef {
    name: "mod_nw_dst",
    aliases: &[],
    needs: Needs::Ipv4,
    rewrites: true,
    build: |n, a, _| Ok(Action::SetNwDst(ipv4(n, arg(n, a)?)?)),
};
static MOD_NW_TOS: ActionDef = ActionDef {
    name: "mod_nw_tos",
    aliases: &[],
    needs: Needs::Ip,
    rewrites: true,
    build: |n, a, _| {
        let a = arg(n, a)?;
        let tos = parse_uint(n, a, 255)? as u8;
        if tos & 3 != 0 {
            return Err(bad(n, a, "a TOS value with the 2 ECN bits clear"));
        }
        Ok(Action::SetNwTos(tos))
    },
};
static MOD_TP_SRC: ActionDef = ActionDef {
    name: "mod_tp_src",
    aliases: &[],
    needs: Needs::Ports,
    rewrites: true,
    build: |n, a, _| Ok(Action::SetTpSrc(parse_uint(n, arg(n, a)?, 0xffff)? as u16)),
};
static MOD_TP_DST: ActionDef = ActionDef {
    name: "mod_tp_dst",
    aliases: &[],
    needs: Needs::Ports,
    rewrites: true,
    build: |n, a, _| Ok(Action::SetTpDst(parse_uint(n, arg(n, a)?, 0xffff)? as u16)),
};
static DEC_TTL: ActionDef = ActionDef {
    name: "dec_ttl",
    aliases: &[],
    needs: Needs::Ip,
    rewrites: true,
    // `dec_ttl(ID,…)`: the parentheses arrive as the argument.
    build: |n, a, _| match a {
        None => Ok(Action::DecTtl),
        Some(ids) => {
            let ids = ids
                .split([',', ' '])
                .filter(|s| !s.is_empty())
                .map(|id| parse_uint(n, id, 0xffff).map(|v| v as u16))
                .collect::<Result<Vec<u16>, _>>()?;
            // `dec_ttl()` is plain `dec_ttl`, as in Open vSwitch.
            if ids.is_empty() {
                return Ok(Action::DecTtl);
            }
            Ok(Action::DecTtlIds(ids.into()))
        }
    },
};

static MOD_NW_ECN: ActionDef = ActionDef {
    name: "mod_nw_ecn",
    aliases: &[],
    needs: Needs::Ip,
    rewrites: true,
    build: |n, a, _| {
        Ok(Action::SetField(FieldWrite::IpEcn(
            parse_uint(n, arg(n, a)?, 3)? as u8,
        )))
    },
};
static MOD_NW_TTL: ActionDef = ActionDef {
    name: "mod_nw_ttl",
    aliases: &[],
    needs: Needs::Ip,
    rewrites: true,
    build: |n, a, _| {
        Ok(Action::SetField(FieldWrite::NwTtl(
            parse_uint(n, arg(n, a)?, 255)? as u8,
        )))
    },
};
static COPY_TTL_OUT: ActionDef = ActionDef {
    name: "copy_ttl_out",
    aliases: &[],
    needs: Needs::Nothing,
    rewrites: true,
    build: |n, a, _| bare(n, a, Action::SetField(FieldWrite::CopyTtlOut)),
};
static COPY_TTL_IN: ActionDef = ActionDef {
    name: "copy_ttl_in",
    aliases: &[],
    needs: Needs::Nothing,
    rewrites: true,
    build: |n, a, _| bare(n, a, Action::SetField(FieldWrite::CopyTtlIn)),
};

static PUSH_MPLS: ActionDef = ActionDef {
    name: "push_mpls",
    aliases: &[],
    needs: Needs::Nothing,
    rewrites: true,
    build: |n, a, _| {
        let t = pushed_type(
            n,
            a,
            &[EtherType::MPLS, EtherType::MPLS_MULTICAST],
            "the ethertype is 0x8847 or 0x8848",
        )?;
        Ok(Action::PushMpls(t))
    },
};
static POP_MPLS: ActionDef = ActionDef {
    name: "pop_mpls",
    aliases: &[],
    needs: Needs::Nothing,
    rewrites: true,
    build: |n, a, _| Ok(Action::PopMpls(parse_uint(n, arg(n, a)?, 0xffff)? as u16)),
};
static PUSH_PBB: ActionDef = ActionDef {
    name: "push_pbb",
    aliases: &[],
    needs: Needs::Nothing,
    rewrites: true,
    build: |n, a, _| {
        let t = pushed_type(n, a, &[EtherType::PBB], "the ethertype is 0x88e7")?;
        Ok(Action::PushPbb(t))
    },
};
static POP_PBB: ActionDef = ActionDef {
    name: "pop_pbb",
    aliases: &[],
    needs: Needs::Pbb,
    rewrites: true,
    build: |n, a, _| bare(n, a, Action::PopPbb),
};
static ENCAP: ActionDef = ActionDef {
    name: "encap",
    aliases: &[],
    needs: Needs::Nothing,
    rewrites: true,
    build: |n, a, _| {
        let a = arg(n, a)?;
        let header = match a.split_once('(') {
            None => a,
            Some((h, _)) => h,
        };
        match header.trim() {
            "ethernet" if header.len() == a.len() => Ok(Action::Encap(Encap::Ethernet)),
            "nsh" if header.len() == a.len() => Ok(Action::Encap(Encap::Nsh {
                md_type: None,
                tlvs: None,
            })),
            "mpls" if header.len() == a.len() => Ok(Action::Encap(Encap::Mpls {
                ethertype: EtherType::MPLS,
            })),
            "mpls_mc" if header.len() == a.len() => Ok(Action::Encap(Encap::Mpls {
                ethertype: EtherType::MPLS_MULTICAST,
            })),
            "nsh" => {
                let props = a[header.len() + 1..]
                    .strip_suffix(')')
                    .ok_or_else(|| bad(n, a, "an unclosed parenthesis"))?;
                let (mut md_type, mut tlvs) = (None, Vec::new());
                for prop in crate::values::tokens(props) {
                    match prop.split_once('=') {
                        Some(("md_type", v)) => {
                            let t = parse_uint(n, v, 0xff)? as u8;
                            if !matches!(t, 1 | 2) {
                                return Err(bad(n, a, "invalid md_type: MD types are 1 and 2"));
                            }
                            md_type = Some(t);
                        }
                        _ if prop.starts_with("tlv(") => tlvs.extend(nsh_tlv(n, prop)?),
                        _ => return Err(bad(n, a, format!("Invalid property: {prop}"))),
                    }
                }
                if tlvs.len() > vsw_packet::wire::nsh::MAX_CONTEXT {
                    return Err(bad(n, a, "more TLVs than an NSH header holds (244 bytes)"));
                }
                let tlvs = (!tlvs.is_empty()).then(|| tlvs.into());
                Ok(Action::Encap(Encap::Nsh { md_type, tlvs }))
            }
            other => Err(bad(
                n,
                a,
                format!("Encap hdr not supported: {other} (vsw: nsh, mpls, mpls_mc, ethernet)"),
            )),
        }
    },
};
/// `tlv(0xCLASS,TYPE,0xVALUE)` as Open vSwitch writes an MD type 2 TLV: the
/// TLV as RFC 8300 lays it out (class, type, length in bytes, the value padded
/// to 4 bytes).
fn nsh_tlv(n: &str, prop: &str) -> Result<Vec<u8>, FlowSyntaxError> {
    let inner = prop
        .strip_prefix("tlv(")
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| bad(n, prop, "Invalid NSH TLV header"))?;
    let parts: Vec<&str> = inner.split(',').map(str::trim).collect();
    let [class, kind, value] = parts[..] else {
        return Err(bad(
            n,
            prop,
            "Invalid NSH TLV header: tlv(0xCLASS,TYPE,0xVALUE)",
        ));
    };
    if !class.starts_with("0x") {
        return Err(bad(n, prop, "the TLV's class is written in hex (0x…)"));
    }
    let class = parse_uint(n, class, 0xffff)? as u16;
    let kind = parse_uint(n, kind, 0xff)? as u8;
    // Hex digits only, checked before any slicing (a multi-byte character must
    // not be cut, nor a sign taken for a digit); an empty value is a TLV of
    // length 0, as Open vSwitch takes it.
    let hex = value
        .strip_prefix("0x")
        .filter(|h| h.len() % 2 == 0 && h.bytes().all(|b| b.is_ascii_hexdigit()))
        .ok_or_else(|| bad(n, prop, "the TLV's value is 0x and whole bytes of hex"))?;
    let digit = |b: u8| (b as char).to_digit(16).unwrap_or(0) as u8;
    let value: Vec<u8> = hex
        .as_bytes()
        .chunks_exact(2)
        .map(|p| digit(p[0]) << 4 | digit(p[1]))
        .collect();
    if value.len() > 127 {
        return Err(bad(n, prop, "a TLV's value is at most 127 bytes"));
    }
    let mut tlv = class.to_be_bytes().to_vec();
    tlv.extend([kind, value.len() as u8]);
    tlv.extend(&value);
    tlv.resize(tlv.len().div_ceil(4) * 4, 0);
    Ok(tlv)
}

/// `tlv(…)` for each TLV of RFC 8300's layout in `tlvs`, as [`nsh_tlv`] reads.
fn format_tlvs(tlvs: &[u8]) -> String {
    let mut out = String::new();
    let mut rest = tlvs;
    while let [c0, c1, kind, len, tail @ ..] = rest {
        let len = usize::from(*len & 0x7f).min(tail.len());
        let hex: String = tail[..len].iter().map(|b| format!("{b:02x}")).collect();
        out += &format!(
            ",tlv(0x{:04x},{kind},0x{hex})",
            u16::from_be_bytes([*c0, *c1])
        );
        rest = tail.get(len.div_ceil(4) * 4..).unwrap_or_default();
    }
    out
}

static DECAP: ActionDef = ActionDef {
    name: "decap",
    aliases: &[],
    needs: Needs::Nothing,
    rewrites: true,
    build: |n, a, _| match a.map(str::trim) {
        None | Some("") => Ok(Action::Decap(None)),
        Some(t) => {
            let inner = t
                .strip_prefix("packet_type(")
                .and_then(|r| r.strip_suffix(')'))
                .ok_or_else(|| bad(n, t, "Invalid decap argument"))?;
            let (mut ns, mut ty) = (None, None);
            for part in inner.split(',').map(str::trim) {
                match part.split_once('=') {
                    Some(("ns", v)) => {
                        let v = parse_uint(n, v, 0xffff)? as u16;
                        if v >= 5 {
                            return Err(bad(n, t, format!("Unsupported ns value: {v}")));
                        }
                        ns = Some(v);
                    }
                    Some(("type", v)) => ty = Some(parse_uint(n, v, 0xffff)? as u16),
                    _ => return Err(bad(n, t, "Invalid decap argument")),
                }
            }
            let ns = ns.ok_or_else(|| bad(n, t, "Missing packet_type attribute ns"))?;
            let ty = ty.ok_or_else(|| bad(n, t, "Missing packet_type attribute type"))?;
            Ok(Action::Decap(Some((ns, ty))))
        }
    },
};
static DEC_NSH_TTL: ActionDef = ActionDef {
    name: "dec_nsh_ttl",
    aliases: &[],
    needs: Needs::Nsh,
    rewrites: true,
    build: |n, a, _| bare(n, a, Action::DecNshTtl),
};
static SET_MPLS_LABEL: ActionDef = ActionDef {
    name: "set_mpls_label",
    aliases: &[],
    needs: Needs::Nothing,
    rewrites: true,
    build: |n, a, _| {
        Ok(Action::SetMplsLabel(
            parse_uint(n, arg(n, a)?, 0xfffff)? as u32
        ))
    },
};
static SET_MPLS_TC: ActionDef = ActionDef {
    name: "set_mpls_tc",
    aliases: &[],
    needs: Needs::Nothing,
    rewrites: true,
    build: |n, a, _| Ok(Action::SetMplsTc(parse_uint(n, arg(n, a)?, 7)? as u8)),
};
static SET_MPLS_TTL: ActionDef = ActionDef {
    name: "set_mpls_ttl",
    aliases: &[],
    needs: Needs::Nothing,
    rewrites: true,
    build: |n, a, _| Ok(Action::SetMplsTtl(parse_uint(n, arg(n, a)?, 255)? as u8)),
};
static CT: ActionDef = ActionDef {
    name: "ct",
    aliases: &[],
    // Open vSwitch refuses ct() of a packet that is not IP (MATCH_INCONSISTENT).
    needs: Needs::Ip,
    rewrites: true,
    build: |_, a, _| {
        Ok(Action::Ct(Box::new(crate::ct_action::parse_ct(
            a.unwrap_or(""),
        )?)))
    },
};
static CT_CLEAR: ActionDef = ActionDef {
    name: "ct_clear",
    aliases: &[],
    needs: Needs::Nothing,
    rewrites: true,
    build: |n, a, _| bare(n, a, Action::CtClear),
};
static DEC_MPLS_TTL: ActionDef = ActionDef {
    name: "dec_mpls_ttl",
    aliases: &[],
    needs: Needs::Nothing,
    rewrites: true,
    build: |n, a, _| bare(n, a, Action::DecMplsTtl),
};

/// `set_field:VALUE->FIELD`: a classic field becomes its own action (as it prints);
/// the rest are `FieldWrite`s (set_field.rs).
fn set_field(arg: &str) -> Result<Action, FlowSyntaxError> {
    use crate::set_field::{mac, parse_write, uint, v4};
    let (v, f) = arg
        .split_once("->")
        .ok_or_else(|| bad("set_field", arg, "written set_field:VALUE->FIELD"))?;
    let (v, f) = (v.trim(), f.trim());
    if let Some(field) = Field::by_name(f).filter(|g| g.is_pipelines()) {
        let (value, mask) = parse_masked_uint(f, v, ones(u32::from(field.info().bits)))?;
        return Ok(Action::Load(Load {
            field,
            value: value & mask,
            mask,
            as_set_field: true,
        }));
    }
    Ok(match f {
        "eth_src" | "dl_src" => Action::SetDlSrc(mac(f, v)?),
        "eth_dst" | "dl_dst" => Action::SetDlDst(mac(f, v)?),
        // OpenFlow's vlan_vid carries OFPVID_PRESENT (0x1000) with the VID.
        "vlan_vid" | "dl_vlan" => Action::SetVlanVid(uint(f, v, 0x1fff)? as u16 & 0x0fff),
        "vlan_pcp" | "dl_vlan_pcp" => Action::SetVlanPcp(uint(f, v, 7)? as u8),
        "ipv4_src" | "ip_src" | "nw_src" => Action::SetNwSrc(v4(f, v)?.into()),
        "ipv4_dst" | "ip_dst" | "nw_dst" => Action::SetNwDst(v4(f, v)?.into()),
        "ip_dscp" => Action::SetNwTos((uint(f, v, 63)? as u8) << 2),
        "nw_tos" => MOD_NW_TOS.build(f, Some(v), &|_: &str| None)?,
        "tcp_src" | "udp_src" | "sctp_src" | "tp_src" => {
            Action::SetTpSrc(uint(f, v, 0xffff)? as u16)
        }
        "tcp_dst" | "udp_dst" | "sctp_dst" | "tp_dst" => {
            Action::SetTpDst(uint(f, v, 0xffff)? as u16)
        }
        "tun_id" | "tunnel_id" => Action::SetTunnel(uint(f, v, u128::from(u64::MAX))? as u64),
        "tun_dst" | "tun_ipv4_dst" => Action::SetTunnelDst(v4(f, v)?.into()),
        "tun_metadata0" => Action::SetTunnelMetadata(uint(f, v, u128::from(u32::MAX))? as u32),
        "mpls_label" => Action::SetMplsLabel(uint(f, v, 0xfffff)? as u32),
        "mpls_tc" => Action::SetMplsTc(uint(f, v, 7)? as u8),
        "mpls_ttl" => Action::SetMplsTtl(uint(f, v, 255)? as u8),
        _ => match parse_write(f, v) {
            Some(w) => Action::SetField(w?),
            None => {
                return Err(bad(
                    "set_field",
                    f,
                    "not a field vsw can write (a match field of Ethernet, VLAN, IP, \
                     IPv6, ARP, ICMP, neighbour discovery, MPLS or ports, tun_id, \
                     tun_dst, tun_metadata0, a register, pkt_mark or metadata)",
                ))
            }
        },
    })
}

static SET_FIELD: ActionDef = ActionDef {
    name: "set_field",
    aliases: &[],
    // What each field needs: `Action::needs`.
    needs: Needs::Nothing,
    rewrites: true,
    build: |n, a, _| set_field(a.ok_or_else(|| bad(n, "", "written set_field:VALUE->FIELD"))?),
};

/// A subfield `load` or `move` may write.
fn writable(action: &str, text: &str) -> Result<Subfield, FlowSyntaxError> {
    let s = Subfield::parse(action, text)?;
    if !s.field.is_writable() {
        return Err(bad(action, text, "vsw cannot write this field"));
    }
    Ok(s)
}

static LOAD: ActionDef = ActionDef {
    name: "load",
    aliases: &[],
    // What its field needs: `Action::needs`.
    needs: Needs::Nothing,
    rewrites: true,
    build: |n, a, _| {
        let a = arg(n, a)?;
        let (v, d) = a
            .split_once("->")
            .ok_or_else(|| bad(n, a, "written load:VALUE->DST[BITS]"))?;
        let dst = writable(n, d.trim())?;
        let value = parse_uint(n, v.trim(), ones(u32::from(dst.n_bits)))?;
        Ok(Action::Load(Load {
            field: dst.field,
            value: value << dst.ofs,
            mask: dst.mask(),
            as_set_field: false,
        }))
    },
};

static MOVE: ActionDef = ActionDef {
    name: "move",
    aliases: &[],
    needs: Needs::Nothing,
    rewrites: true,
    build: |n, a, _| {
        let a = arg(n, a)?;
        let (s, d) = a
            .split_once("->")
            .ok_or_else(|| bad(n, a, "written move:SRC[BITS]->DST[BITS]"))?;
        let src = Subfield::parse(n, s.trim())?;
        let dst = writable(n, d.trim())?;
        if src.n_bits != dst.n_bits {
            return Err(bad(
                n,
                a,
                format!(
                    "the source has {} bits and the destination {}",
                    src.n_bits, dst.n_bits
                ),
            ));
        }
        Ok(Action::Move { src, dst })
    },
};

static STACK_PUSH: ActionDef = ActionDef {
    name: "push",
    aliases: &[],
    needs: Needs::Nothing,
    rewrites: false,
    build: |n, a, _| Ok(Action::StackPush(Subfield::parse(n, arg(n, a)?.trim())?)),
};

static CHECK_PKT_LARGER: ActionDef = ActionDef {
    name: "check_pkt_larger",
    aliases: &[],
    // What its field needs: `Action::needs`.
    needs: Needs::Nothing,
    rewrites: false,
    // `check_pkt_larger(LEN)->DST`: the argument arrives as "LEN)->DST".
    build: |n, a, _| {
        let a = arg(n, a)?;
        let Some((len, dst)) = a.split_once(")->") else {
            return Err(bad(n, a, "written check_pkt_larger(LEN)->DST"));
        };
        let len = parse_uint(n, len.trim(), 0xffff)? as u16;
        let dst = writable(n, dst.trim())?;
        if dst.n_bits != 1 {
            return Err(bad(n, a, "the destination is one bit"));
        }
        Ok(Action::CheckPktLarger { len, dst })
    },
};

static STACK_POP: ActionDef = ActionDef {
    name: "pop",
    aliases: &[],
    needs: Needs::Nothing,
    rewrites: true,
    build: |n, a, _| Ok(Action::StackPop(writable(n, arg(n, a)?.trim())?)),
};

static CONJUNCTION: ActionDef = ActionDef {
    name: "conjunction",
    aliases: &[],
    needs: Needs::Nothing,
    rewrites: false,
    // `conjunction(ID,K/N)`: the parentheses arrive as the argument "ID,K/N".
    build: |n, a, _| {
        let a = arg(n, a)?;
        let parts = a
            .split_once(',')
            .and_then(|(id, kn)| Some((id.trim(), kn.split_once('/')?)));
        let Some((id, (k, of))) = parts else {
            return Err(bad(n, a, "written conjunction(ID,K/N)"));
        };
        let id = parse_uint(n, id, u128::from(u32::MAX))? as u32;
        let n_clauses = parse_uint(n, of.trim(), 64)? as u8;
        let clause = parse_uint(n, k.trim(), 64)? as u8;
        if n_clauses < 2 || clause == 0 || clause > n_clauses {
            return Err(bad(n, a, "clause K of N: 1 <= K <= N, 2 <= N <= 64"));
        }
        Ok(Action::Conjunction {
            id,
            clause,
            n_clauses,
        })
    },
};

static LEARN: ActionDef = ActionDef {
    name: "learn",
    aliases: &[],
    // What it reads and makes: `Learn::check`.
    needs: Needs::Nothing,
    rewrites: false,
    // `learn(ARGS)`: the parentheses arrive as the argument.
    build: |_, a, ports| {
        Ok(Action::Learn(std::sync::Arc::new(
            crate::learn::Learn::parse(a.unwrap_or(""), ports)?,
        )))
    },
};

fn table_no(name: &str, a: &str) -> Result<u8, FlowSyntaxError> {
    Ok(parse_uint(name, a, u128::from(MAX_TABLE))? as u8)
}

static GOTO_TABLE: ActionDef = ActionDef {
    name: "goto_table",
    aliases: &[],
    needs: Needs::Nothing,
    rewrites: false,
    build: |n, a, _| Ok(Action::GotoTable(table_no(n, arg(n, a)?)?)),
};
static RESUBMIT: ActionDef = ActionDef {
    name: "resubmit",
    aliases: &[],
    needs: Needs::Nothing,
    rewrites: false,
    // `resubmit:PORT`, or `resubmit(PORT,TABLE)` with either part empty (the
    // parentheses arrive here as the argument "PORT,TABLE").
    build: |n, a, ports| {
        let a = arg(n, a)?;
        let (port, table) = match a.split_once(',') {
            Some((p, t)) => (p.trim(), t.trim()),
            None => (a.trim(), ""),
        };
        if port.is_empty() && table.is_empty() {
            return Err(bad(n, a, "names a port, a table or both: resubmit(,TABLE)"));
        }
        let port = match port {
            "" | "in_port" => None,
            p => Some(parse_port(n, p, ports)?),
        };
        let table = match table {
            "" => None,
            t => Some(table_no(n, t)?),
        };
        Ok(Action::Resubmit { port, table })
    },
};

/// Every action, as names are looked up.
pub static ACTIONS: &[&ActionDef] = &[
    &OUTPUT,
    &IN_PORT,
    &NORMAL,
    &FLOOD,
    &DROP,
    &GROUP,
    &METER,
    &SET_QUEUE,
    &WRITE_ACTIONS,
    &CLONE,
    &CLEAR_ACTIONS,
    &WRITE_METADATA,
    &SET_TUNNEL,
    &CONTROLLER,
    &MOD_DL_SRC,
    &MOD_DL_DST,
    &PUSH_VLAN,
    &MOD_VLAN_VID,
    &MOD_VLAN_PCP,
    &STRIP_VLAN,
    &MOD_NW_SRC,
    &MOD_NW_DST,
    &MOD_NW_TOS,
    &MOD_TP_SRC,
    &MOD_TP_DST,
    &DEC_TTL,
    &MOD_NW_ECN,
    &MOD_NW_TTL,
    &COPY_TTL_OUT,
    &COPY_TTL_IN,
    &SET_FIELD,
    &GOTO_TABLE,
    &RESUBMIT,
    &LOAD,
    &MOVE,
    &STACK_PUSH,
    &STACK_POP,
    &CONJUNCTION,
    &LEARN,
    &EXIT,
    &POP_QUEUE,
    &BUNDLE,
    &BUNDLE_LOAD,
    &MULTIPATH,
    &SAMPLE,
    &CHECK_PKT_LARGER,
    &FIN_TIMEOUT,
    &PUSH_MPLS,
    &POP_MPLS,
    &PUSH_PBB,
    &POP_PBB,
    &ENCAP,
    &DECAP,
    &DEC_NSH_TTL,
    &SET_MPLS_LABEL,
    &SET_MPLS_TC,
    &SET_MPLS_TTL,
    &DEC_MPLS_TTL,
    &CT,
    &CT_CLEAR,
];

/// The action written under `name`, in either case (as `ovs-ofctl` takes it).
pub fn action(name: &str) -> Option<&'static ActionDef> {
    ACTIONS.iter().copied().find(|d| {
        d.name.eq_ignore_ascii_case(name) || d.aliases.iter().any(|a| a.eq_ignore_ascii_case(name))
    })
}

impl Action {
    /// The action's definition.
    pub fn def(&self) -> &'static ActionDef {
        match self {
            Action::Output(_) => &OUTPUT,
            Action::InPort => &IN_PORT,
            Action::Normal => &NORMAL,
            Action::Flood => &FLOOD,
            Action::Drop => &DROP,
            Action::Controller { .. } => &CONTROLLER,
            Action::Group(_) => &GROUP,
            Action::Meter(_) => &METER,
            Action::SetQueue(_) => &SET_QUEUE,
            Action::WriteActions(_) => &WRITE_ACTIONS,
            Action::Clone(_) => &CLONE,
            Action::ClearActions => &CLEAR_ACTIONS,
            Action::WriteMetadata { .. } => &WRITE_METADATA,
            Action::SetTunnel(_) => &SET_TUNNEL,
            Action::SetTunnelDst(_) | Action::SetTunnelMetadata(_) => &SET_FIELD,
            Action::SetDlSrc(_) => &MOD_DL_SRC,
            Action::SetDlDst(_) => &MOD_DL_DST,
            Action::PushVlan(_) => &PUSH_VLAN,
            Action::SetVlanVid(_) => &MOD_VLAN_VID,
            Action::SetVlanPcp(_) => &MOD_VLAN_PCP,
            Action::StripVlan => &STRIP_VLAN,
            Action::SetNwSrc(_) => &MOD_NW_SRC,
            Action::SetNwDst(_) => &MOD_NW_DST,
            Action::SetNwTos(_) => &MOD_NW_TOS,
            Action::SetTpSrc(_) => &MOD_TP_SRC,
            Action::SetTpDst(_) => &MOD_TP_DST,
            Action::DecTtl | Action::DecTtlIds(_) => &DEC_TTL,
            Action::PushMpls(_) => &PUSH_MPLS,
            Action::PopMpls(_) => &POP_MPLS,
            Action::PushPbb(_) => &PUSH_PBB,
            Action::PopPbb => &POP_PBB,
            Action::Encap(_) => &ENCAP,
            Action::Decap(_) => &DECAP,
            Action::DecNshTtl => &DEC_NSH_TTL,
            Action::SetMplsLabel(_) => &SET_MPLS_LABEL,
            Action::SetMplsTc(_) => &SET_MPLS_TC,
            Action::SetMplsTtl(_) => &SET_MPLS_TTL,
            Action::DecMplsTtl => &DEC_MPLS_TTL,
            Action::Ct(_) => &CT,
            Action::CtClear => &CT_CLEAR,
            Action::SetField(FieldWrite::IpEcn(_)) => &MOD_NW_ECN,
            Action::SetField(FieldWrite::NwTtl(_)) => &MOD_NW_TTL,
            Action::SetField(FieldWrite::CopyTtlOut) => &COPY_TTL_OUT,
            Action::SetField(FieldWrite::CopyTtlIn) => &COPY_TTL_IN,
            Action::SetField(_) => &SET_FIELD,
            Action::GotoTable(_) => &GOTO_TABLE,
            Action::Resubmit { .. } => &RESUBMIT,
            Action::Load(l) if l.as_set_field => &SET_FIELD,
            Action::Load(_) => &LOAD,
            Action::Move { .. } => &MOVE,
            Action::StackPush(_) => &STACK_PUSH,
            Action::StackPop(_) => &STACK_POP,
            Action::Conjunction { .. } => &CONJUNCTION,
            Action::Learn(_) => &LEARN,
            Action::OutputReg { .. } | Action::OutputTrunc { .. } => &OUTPUT,
            Action::Exit => &EXIT,
            Action::PopQueue => &POP_QUEUE,
            Action::Bundle(b) if b.dst.is_some() => &BUNDLE_LOAD,
            Action::Bundle(_) => &BUNDLE,
            Action::Multipath(_) => &MULTIPATH,
            Action::Sample(_) => &SAMPLE,
            Action::CheckPktLarger { .. } => &CHECK_PKT_LARGER,
            Action::FinTimeout { .. } => &FIN_TIMEOUT,
        }
    }

    /// Its argument as written, if it has one.
    pub fn argument(&self) -> Option<String> {
        match self {
            Action::Ct(ct) => Some(ct.format_args()),
            Action::Output(p) | Action::Group(p) | Action::Meter(p) | Action::SetQueue(p) => {
                Some(p.to_string())
            }
            Action::WriteActions(n) | Action::Clone(n) => Some(n.to_string()),
            Action::WriteMetadata { value, mask } if *mask == u64::MAX => {
                Some(format!("{value:#x}"))
            }
            Action::WriteMetadata { value, mask } => Some(format!("{value:#x}/{mask:#x}")),
            Action::SetTunnel(id) => Some(format!("{id:#x}")),
            Action::SetTunnelDst(a) => Some(format!("{a}->tun_dst")),
            Action::SetTunnelMetadata(v) => Some(format!("{v:#x}->tun_metadata0")),
            Action::Controller {
                max_len,
                userdata: None,
                meter: None,
                pause: false,
            } => (*max_len != CONTROLLER_NO_BUFFER).then(|| max_len.to_string()),
            // As ovs-ofctl: `controller(max_len=N,userdata=01.02,meter_id=M)`.
            Action::Controller {
                max_len,
                userdata,
                meter,
                pause,
            } => {
                let mut parts = Vec::new();
                if *max_len != CONTROLLER_NO_BUFFER {
                    parts.push(format!("max_len={max_len}"));
                }
                if let Some(u) = userdata {
                    let hex: Vec<String> = u.iter().map(|b| format!("{b:02x}")).collect();
                    parts.push(format!("userdata={}", hex.join(".")));
                }
                if *pause {
                    parts.push("pause".into());
                }
                if let Some(m) = meter {
                    parts.push(format!("meter_id={m}"));
                }
                Some(parts.join(","))
            }
            Action::SetDlSrc(m) | Action::SetDlDst(m) => Some(m.to_string()),
            Action::PushVlan(t) | Action::PushMpls(t) | Action::PopMpls(t) | Action::PushPbb(t) => {
                Some(format!("0x{t:04x}"))
            }
            Action::Encap(Encap::Ethernet) => Some("ethernet".into()),
            Action::Encap(Encap::Mpls { ethertype }) => Some(
                if *ethertype == EtherType::MPLS_MULTICAST {
                    "mpls_mc"
                } else {
                    "mpls"
                }
                .into(),
            ),
            Action::Encap(Encap::Nsh {
                md_type: None,
                tlvs: None,
            }) => Some("nsh".into()),
            Action::Encap(Encap::Nsh { md_type, tlvs }) => {
                let t = md_type.map(|t| format!("md_type={t}")).unwrap_or_default();
                let tlvs = tlvs.as_deref().map(format_tlvs).unwrap_or_default();
                let props = format!("{t}{tlvs}");
                Some(format!("nsh({})", props.trim_start_matches(',')))
            }
            Action::Decap(None) => Some(String::new()),
            Action::Decap(Some((ns, t))) => Some(format!(
                "packet_type(ns={ns},type={})",
                crate::values::c_hex((*t).into())
            )),
            Action::SetMplsLabel(l) => Some(l.to_string()),
            Action::DecTtlIds(ids) => {
                Some(ids.iter().map(u16::to_string).collect::<Vec<_>>().join(","))
            }
            Action::SetMplsTc(n) | Action::SetMplsTtl(n) => Some(n.to_string()),
            Action::SetVlanVid(v) => Some(v.to_string()),
            Action::SetVlanPcp(p) => Some(p.to_string()),
            Action::SetNwSrc(a) | Action::SetNwDst(a) => Some(a.to_string()),
            Action::SetNwTos(t) => Some(t.to_string()),
            Action::SetTpSrc(p) | Action::SetTpDst(p) => Some(p.to_string()),
            Action::SetField(FieldWrite::IpEcn(n) | FieldWrite::NwTtl(n)) => Some(n.to_string()),
            Action::SetField(FieldWrite::CopyTtlOut | FieldWrite::CopyTtlIn) => None,
            Action::SetField(w) => Some(crate::set_field::argument(w)),
            Action::GotoTable(t) => Some(t.to_string()),
            Action::Load(l) if l.as_set_field => Some(format!(
                "{}->{}",
                l.field.format_value(l.value, l.mask),
                l.field.info().name
            )),
            Action::Load(l) => Some(match l.subfield() {
                Some(s) => format!("{}->{}", c_hex(l.value >> s.ofs), s.format()),
                None => format!("{}->{}", c_hex(l.value), l.field.info().nxm_name),
            }),
            Action::Move { src, dst } => Some(format!("{}->{}", src.format(), dst.format())),
            Action::StackPush(s) | Action::StackPop(s) => Some(s.format()),
            Action::CheckPktLarger { len, dst } => {
                Some(format!("check_pkt_larger({len})->{}", dst.format()))
            }
            Action::Conjunction {
                id,
                clause,
                n_clauses,
            } => Some(format!("{id},{clause}/{n_clauses}")),
            Action::Learn(l) => Some(l.to_string()),
            Action::Bundle(b) => Some(b.to_string()),
            Action::Multipath(m) => Some(m.to_string()),
            Action::Sample(sa) => Some(sa.to_string()),
            // As Open vSwitch writes it: the timeouts that are not 0.
            Action::FinTimeout { idle, hard } => {
                let set = [("idle_timeout", idle), ("hard_timeout", hard)]
                    .iter()
                    .filter(|(_, t)| **t != 0)
                    .map(|(k, t)| format!("{k}={t}"))
                    .collect::<Vec<_>>();
                Some(format!("fin_timeout({})", set.join(",")))
            }
            Action::OutputReg {
                src,
                max_len: u16::MAX,
            } => Some(src.format()),
            Action::OutputReg { src, max_len } => {
                Some(format!("port={},max_len={max_len}", src.format()))
            }
            Action::OutputTrunc { port, max_len } => Some(format!("port={port},max_len={max_len}")),
            Action::Resubmit { port, table } => Some(format!(
                "{},{}",
                port.map(|p| p.to_string()).unwrap_or_default(),
                table.map(|t| t.to_string()).unwrap_or_default()
            )),
            Action::InPort
            | Action::Normal
            | Action::Flood
            | Action::Drop
            | Action::ClearActions
            | Action::StripVlan
            | Action::DecTtl
            | Action::DecMplsTtl
            | Action::CtClear
            | Action::PopPbb
            | Action::DecNshTtl
            | Action::Exit
            | Action::PopQueue => None,
        }
    }

    /// The rewrite that gives packet field `field` the whole value `v`; `None` for
    /// a pipeline field (or one vsw cannot write).
    pub fn writing(field: Field, v: u128) -> Option<Action> {
        let v4 = || Ipv4Addr::from(v as u32);
        let w = Action::SetField;
        Some(match field {
            Field::TunId => Action::SetTunnel(v as u64),
            Field::TunMetadata0 => Action::SetTunnelMetadata(v as u32),
            Field::EthSrc => Action::SetDlSrc(crate::subfield::mac(v)),
            Field::EthDst => Action::SetDlDst(crate::subfield::mac(v)),
            Field::IpSrc => Action::SetNwSrc(v4()),
            Field::IpDst => Action::SetNwDst(v4()),
            Field::TcpSrc | Field::UdpSrc => Action::SetTpSrc(v as u16),
            Field::TcpDst | Field::UdpDst => Action::SetTpDst(v as u16),
            Field::NwTtl => w(FieldWrite::NwTtl(v as u8)),
            Field::Ipv6Src => w(FieldWrite::Ipv6Src(v.to_be_bytes())),
            Field::Ipv6Dst => w(FieldWrite::Ipv6Dst(v.to_be_bytes())),
            Field::IcmpType => w(FieldWrite::Icmpv4Type(v as u8)),
            Field::IcmpCode => w(FieldWrite::Icmpv4Code(v as u8)),
            Field::ArpOp => w(FieldWrite::ArpOp(v as u16)),
            Field::ArpSpa => w(FieldWrite::ArpSpa((v as u32).to_be_bytes())),
            Field::ArpTpa => w(FieldWrite::ArpTpa((v as u32).to_be_bytes())),
            Field::ArpSha => w(FieldWrite::ArpSha(crate::subfield::mac(v))),
            Field::ArpTha => w(FieldWrite::ArpTha(crate::subfield::mac(v))),
            Field::NdTarget => w(FieldWrite::NdTarget(v.to_be_bytes())),
            Field::NdSll => w(FieldWrite::NdSll(crate::subfield::mac(v))),
            Field::NdTll => w(FieldWrite::NdTll(crate::subfield::mac(v))),
            Field::MplsLabel => Action::SetMplsLabel(v as u32),
            Field::MplsTc => Action::SetMplsTc(v as u8),
            Field::MplsTtl => Action::SetMplsTtl(v as u8),
            _ => return None,
        })
    }

    /// What a rule's match must promise for the action, for each field it touches
    /// (a move: its source's and its destination's).
    pub fn needs_both(&self) -> [Needs; 2] {
        match self {
            Action::Move { src, dst } => [src.field.info().needs, dst.field.info().needs],
            _ => [self.needs(); 2],
        }
    }

    /// What a rule's match must promise for the action (a set-field's depends on
    /// its field).
    pub fn needs(&self) -> Needs {
        match self {
            Action::SetField(w) if std::ptr::eq(self.def(), &SET_FIELD) => {
                crate::set_field::field_of(w).1
            }
            Action::Load(l) => l.field.info().needs,
            // A source's header is what it reads; else the destination's.
            Action::Move { src, dst } => match src.field.info().needs {
                Needs::Nothing => dst.field.info().needs,
                n => n,
            },
            Action::StackPush(s) | Action::StackPop(s) => s.field.info().needs,
            Action::CheckPktLarger { dst, .. } => dst.field.info().needs,
            // What they load into must be there (a field of a header the match
            // does not promise is refused, as a load's is).
            Action::Bundle(b) => b.dst.map_or(Needs::Nothing, |d| d.field.info().needs),
            Action::Multipath(m) => m.dst.field.info().needs,
            _ => self.def().needs,
        }
    }

    /// True for the actions that change the packet rather than send it somewhere.
    pub fn rewrites(&self) -> bool {
        match self {
            Action::Load(Load { field, .. })
            | Action::Move {
                dst: Subfield { field, .. },
                ..
            } => !field.is_pipelines(),
            Action::Bundle(b) => b.dst.is_some_and(|d| !d.field.is_pipelines()),
            Action::Multipath(m) => !m.dst.field.is_pipelines(),
            Action::CheckPktLarger { dst, .. } => !dst.field.is_pipelines(),
            _ => self.def().rewrites,
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.argument() {
            // Written with parentheses: its argument holds a comma.
            // Its argument is the whole of it, parentheses and all.
            Some(a)
                if matches!(
                    self,
                    Action::Learn(_)
                        | Action::Bundle(_)
                        | Action::Multipath(_)
                        | Action::Sample(_)
                        | Action::CheckPktLarger { .. }
                        | Action::FinTimeout { .. }
                ) =>
            {
                f.write_str(&a)
            }
            Some(a)
                if matches!(self, Action::OutputReg { max_len, .. } if *max_len != u16::MAX)
                    || matches!(self, Action::OutputTrunc { .. }) =>
            {
                write!(f, "output({a})")
            }
            Some(a)
                if matches!(
                    self,
                    Action::Resubmit { .. }
                        | Action::Conjunction { .. }
                        | Action::DecTtlIds(_)
                        | Action::Encap(_)
                        | Action::Decap(_)
                        | Action::Ct(_)
                        | Action::SetMplsLabel(_)
                        | Action::SetMplsTc(_)
                        | Action::SetMplsTtl(_)
                ) =>
            {
                write!(f, "{}({a})", self.def().name)
            }
            Some(a)
                if matches!(
                    self,
                    Action::Controller { userdata, meter, pause, .. }
                        if userdata.is_some() || meter.is_some() || *pause
                ) =>
            {
                write!(f, "controller({a})")
            }
            Some(a) => write!(f, "{}:{a}", self.def().name),
            None => f.write_str(self.def().name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_finds_its_own_definition() {
        let mut seen = std::collections::HashSet::new();
        for def in ACTIONS {
            for name in std::iter::once(&def.name).chain(def.aliases) {
                assert!(seen.insert(name.to_ascii_lowercase()), "{name} twice");
                assert!(std::ptr::eq(action(name).unwrap(), *def), "{name}");
                assert!(std::ptr::eq(
                    action(&name.to_ascii_uppercase()).unwrap(),
                    *def
                ));
            }
        }
    }

    #[test]
    fn each_variant_is_printed_under_its_definition_and_read_back() {
        let ports = |_: &str| None;
        for a in [
            Action::Output(7),
            Action::OutputReg {
                src: Subfield::parse("output", "NXM_NX_REG3[0..15]").unwrap(),
                max_len: u16::MAX,
            },
            Action::Exit,
            Action::PopQueue,
            Action::InPort,
            Action::Normal,
            Action::Flood,
            Action::Drop,
            Action::Controller {
                max_len: CONTROLLER_NO_BUFFER,
                userdata: None,
                meter: None,
                pause: false,
            },
            Action::Controller {
                max_len: 128,
                userdata: None,
                meter: None,
                pause: false,
            },
            Action::Group(7),
            Action::Meter(3),
            Action::SetQueue(1),
            Action::ClearActions,
            Action::WriteMetadata {
                value: 5,
                mask: 0xff,
            },
            Action::WriteMetadata {
                value: 7,
                mask: u64::MAX,
            },
            Action::SetTunnel(0x1234),
            Action::SetDlSrc(MacAddr([2, 0, 0, 0, 0, 1])),
            Action::SetDlDst(MacAddr([2, 0, 0, 0, 0, 2])),
            Action::PushVlan(EtherType::VLAN),
            Action::SetVlanVid(42),
            Action::SetVlanPcp(3),
            Action::StripVlan,
            Action::SetNwSrc(Ipv4Addr::new(198, 18, 0, 1)),
            Action::SetNwDst(Ipv4Addr::new(198, 18, 0, 2)),
            Action::SetNwTos(32),
            Action::SetTpSrc(53),
            Action::SetTpDst(80),
            Action::DecTtl,
            Action::SetField(FieldWrite::Ipv6Src([
                0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1,
            ])),
            Action::SetField(FieldWrite::Ipv6Dst([0xfe; 16])),
            Action::SetField(FieldWrite::Ipv6Label(0xabcde)),
            Action::SetField(FieldWrite::IpEcn(3)),
            Action::SetField(FieldWrite::NwTtl(9)),
            Action::SetField(FieldWrite::ArpOp(2)),
            Action::SetField(FieldWrite::ArpSpa([198, 18, 0, 1])),
            Action::SetField(FieldWrite::ArpTpa([198, 18, 0, 2])),
            Action::SetField(FieldWrite::ArpSha(MacAddr([2, 0, 0, 0, 0, 3]))),
            Action::SetField(FieldWrite::ArpTha(MacAddr([2, 0, 0, 0, 0, 4]))),
            Action::SetField(FieldWrite::Icmpv4Type(8)),
            Action::SetField(FieldWrite::Icmpv4Code(1)),
            Action::SetField(FieldWrite::Icmpv6Type(128)),
            Action::SetField(FieldWrite::Icmpv6Code(2)),
            Action::SetField(FieldWrite::NdTarget([0xfe; 16])),
            Action::SetField(FieldWrite::NdSll(MacAddr([2, 0, 0, 0, 0, 5]))),
            Action::SetField(FieldWrite::NdTll(MacAddr([2, 0, 0, 0, 0, 6]))),
            Action::SetField(FieldWrite::CopyTtlOut),
            Action::SetField(FieldWrite::CopyTtlIn),
            Action::GotoTable(3),
            Action::Resubmit {
                port: None,
                table: Some(2),
            },
            Action::Resubmit {
                port: Some(4),
                table: None,
            },
            Action::Resubmit {
                port: Some(4),
                table: Some(9),
            },
        ] {
            let def = a.def();
            assert!(ACTIONS.iter().any(|d| std::ptr::eq(*d, def)), "{a:?}");
            let built = def
                .build(def.name, a.argument().as_deref(), &ports)
                .unwrap();
            assert_eq!(built, a);
            assert_eq!(a.rewrites(), def.rewrites);
            // And as a flow prints it (resubmit's parentheses are the flow
            // parser's to split).
            if !matches!(a, Action::Resubmit { .. }) {
                let text = a.to_string();
                let (name, arg) = text.split_once(':').unwrap_or((&text, ""));
                let arg = (!arg.is_empty()).then_some(arg);
                let read = action(name).unwrap().build(name, arg, &ports);
                assert_eq!(read.unwrap(), a, "{text}");
            }
        }
    }

    #[test]
    fn register_actions_print_as_they_read_and_refuse_what_does_not_fit() {
        let ports = |_: &str| None;
        let read = |text: &str| {
            let (name, arg) = text.split_once(':').unwrap();
            action(name).unwrap().build(name, Some(arg), &ports)
        };
        // As `ovs-ofctl parse-flow` prints each (OpenFlow 1.3).
        for text in [
            "load:0x5->NXM_NX_REG1[0..7]",
            "load:0->NXM_OF_IN_PORT[]",
            "load:0x3->NXM_NX_XXREG0[0..15]",
            "set_field:0x5->reg2",
            "set_field:0x7/0xf->reg3",
            "set_field:0xa->pkt_mark",
            "set_field:0x5->xxreg1",
            "move:NXM_OF_ETH_SRC[]->NXM_OF_ETH_DST[]",
            "move:NXM_NX_REG14[0..1]->NXM_NX_REG15[1..2]",
            "push:NXM_NX_REG0[]",
            "pop:NXM_NX_XXREG1[0..15]",
        ] {
            assert_eq!(read(text).unwrap().to_string(), text);
        }
        // Only a write into the packet changes it.
        assert!(!read("load:1->NXM_NX_REG0[]").unwrap().rewrites());
        assert!(read("load:1->NXM_OF_ETH_DST[0]").unwrap().rewrites());
        assert!(read("pop:NXM_OF_IP_DST[]").unwrap().rewrites());
        assert!(!read("push:NXM_OF_IP_DST[]").unwrap().rewrites());
        assert_eq!(
            read("move:NXM_OF_IP_SRC[]->NXM_NX_REG0[]").unwrap().needs(),
            Needs::Ipv4
        );
        for bad in [
            "load:0x100->NXM_NX_REG0[0..7]",
            "load:1->NXM_NX_REG0[32]",
            "load:1->NXM_OF_ETH_TYPE[]",
            "load:1->NXM_NX_NOPE[]",
            "move:NXM_NX_REG0[0..7]->NXM_NX_REG1[0..8]",
            "pop:NXM_OF_ETH_TYPE[]",
        ] {
            assert!(read(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn conjunction_clauses_read_print_and_stand_alone() {
        let ports = |_: &str| None;
        let flow = crate::syntax::parse_flow(
            "priority=5,ip,actions=conjunction(7,2/3),conjunction(8,1/2)",
            &ports,
        )
        .unwrap();
        assert_eq!(
            crate::syntax::format_flow(&flow),
            "priority=5,ip,actions=conjunction(7,2/3),conjunction(8,1/2)"
        );
        for bad in [
            "ip,actions=conjunction(1,0/2)",
            "ip,actions=conjunction(1,3/2)",
            "ip,actions=conjunction(1,1/1)",
            "ip,actions=conjunction(1,1/65)",
            "ip,actions=conjunction(1,1/2),output:1",
            "conj_id=1,actions=conjunction(1,1/2)",
        ] {
            assert!(crate::syntax::parse_flow(bad, &ports).is_err(), "{bad}");
        }
    }

    #[test]
    fn output_from_a_field_reads_and_prints_as_ovs_ofctl() {
        let ports = |_: &str| None;
        for text in [
            "priority=5,actions=output:NXM_NX_REG0[0..15]",
            "priority=5,actions=output(port=NXM_NX_REG1[16..31],max_len=128)",
            "priority=5,actions=pop_queue,exit",
        ] {
            let flow = crate::syntax::parse_flow(text, &ports).unwrap();
            assert_eq!(crate::syntax::format_flow(&flow), text);
        }
        // A port's packets cut: read (it is `OutputTrunc`), not refused.
        assert_eq!(
            crate::syntax::parse_flow("actions=output(port=1,max_len=64)", &ports)
                .unwrap()
                .actions,
            vec![Action::OutputTrunc {
                port: 1,
                max_len: 64
            }]
        );
        let sample = "priority=5,actions=sample(probability=10,collector_set_id=1,\
                      obs_domain_id=2,obs_point_id=3,sampling_port=4,egress)";
        let flow = crate::syntax::parse_flow(sample, &ports).unwrap();
        assert_eq!(crate::syntax::format_flow(&flow), sample.replace(' ', ""));
        assert!(crate::syntax::parse_flow("actions=sample(probability=0)", &ports).is_err());
    }

    #[test]
    fn a_controller_action_with_userdata_reads_and_prints_as_ovs_ofctl() {
        let ports = |_: &str| None;
        for text in [
            "priority=5,actions=controller(userdata=01.02.0a)",
            "priority=5,actions=controller(max_len=100,userdata=ff)",
            "priority=5,actions=controller(userdata=01,meter_id=3)",
            "priority=5,actions=controller(max_len=100,userdata=ff,pause,meter_id=2)",
            "priority=5,actions=controller(pause)",
            "priority=5,actions=CONTROLLER:64",
        ] {
            let flow = crate::syntax::parse_flow(text, &ports).unwrap();
            assert_eq!(crate::syntax::format_flow(&flow), text);
        }
        for bad in [
            "actions=controller(reason=no_match)",
            "actions=controller(userdata=zz)",
        ] {
            assert!(crate::syntax::parse_flow(bad, &ports).is_err(), "{bad}");
        }
    }
}
