//! One OpenFlow connection's protocol state, without its socket: bytes in, bytes
//! out. The connection manager (to come) owns the socket and the timers; the switch
//! gets the events this does not answer itself.

use std::time::Instant;

use crate::async_config::AsyncConfig;
use crate::bundle::{
    BadBundle, BundleAdd, BundleCtrl, BundleItem, Bundled, Control, OpenBundles, Prepared,
    OFPBCT_COMMIT_REPLY,
};
use crate::error::Refusal;
use crate::flow_mod::{BadFlowMod, FlowMod};
use crate::flow_stats::{FlowStatsEntry, FlowStatsRequest};
use crate::frame::HEADER_LEN;
use crate::frame::{next_message, FrameError, Header};
use crate::group_mod::{BadGroupMod, GroupDescEntry, GroupMod, GroupStatsEntry};
use crate::message::{Features, Message, SwitchConfig, OFPT_HELLO};
use crate::meter_mod::{BadMeterMod, MeterConfigEntry, MeterMod, MeterStatsEntry};
use crate::multipart::{
    BodyStream, MultipartReply, MultipartRequest, PortInfo, SwitchDesc, OFPT_MULTIPART_REPLY,
};
use crate::packet::PacketOut;
use crate::port_stats::{selects, PortStats};
use crate::role::{Role, RoleMsg};
use crate::table_stats::{AggregateStats, TableStats};
use crate::tables::table_feature;
use crate::tlv::{BadTlv, TlvMap, TlvTableMod};
use crate::version::{negotiate, Version, VersionSet};

/// What a session asks of the switch it speaks for.
pub trait Bridge {
    /// The datapath id (stable across restarts).
    fn datapath_id(&self) -> u64;
    /// Every port, the LOCAL port included when there is one.
    fn ports(&self) -> Vec<PortInfo>;
    fn desc(&self) -> SwitchDesc;
    /// Carries out a flow-mod; `Err`: why it was refused (nothing changed).
    fn flow_mod(&mut self, fm: &FlowMod) -> Result<(), BadFlowMod>;
    /// Carries out several consecutive flow-mods (of any command), in order, each on
    /// its own terms: one refused changes nothing of the others. (A switch may do
    /// them in one change of its tables.)
    fn flow_mods(&mut self, fms: &[FlowMod]) -> Vec<Result<(), BadFlowMod>> {
        fms.iter().map(|fm| self.flow_mod(fm)).collect()
    }
    /// Every port's counters.
    fn port_stats(&mut self) -> Vec<PortStats>;
    /// The flows a flow-stats request selects, made as they are read (a switch takes
    /// a snapshot and converts each rule when the reply gets to it).
    fn flow_stats(&mut self, req: &FlowStatsRequest) -> Result<FlowStatsIter, BadFlowMod>;
    /// Sends a controller's packet; `Err`: why not (nothing sent).
    fn packet_out(&mut self, po: &PacketOut) -> Result<(), Refusal>;
    /// Continues a paused translation with the packet the controller sent back
    /// (NXT_RESUME); `Err`: why not (nothing sent).
    fn resume(&mut self, r: &crate::packet::Resume) -> Result<(), Refusal>;
    /// Tables 0..`n`'s counters.
    fn table_stats(&mut self, n: u8) -> Vec<TableStats>;
    /// Carries out a group-mod; `Err`: why it was refused (nothing changed).
    fn group_mod(&mut self, gm: &GroupMod) -> Result<(), BadGroupMod>;
    /// Group `id`'s statistics (OFPG_ALL: every group's).
    fn group_stats(&mut self, id: u32) -> Vec<GroupStatsEntry>;
    /// Group `id` as it is (OFPG_ALL: every group).
    fn group_desc(&mut self, id: u32) -> Vec<GroupDescEntry>;
    /// The connection's flow monitors now (it started or cancelled one): from the
    /// tables as they are now, the switch tells it of each change to the flows
    /// they name. A switch that tells nothing has no monitors.
    fn set_flow_monitors(&mut self, _monitors: &[crate::flow_monitor::FlowMonitor]) {}
    /// Changes a port's configuration (`ovs-ofctl mod-port`); `Err`: why not
    /// (nothing changed). A switch that changes none refuses every change.
    fn port_mod(
        &mut self,
        _pm: &crate::port_mod::PortMod,
    ) -> Result<(), crate::port_mod::BadPortMod> {
        Err(crate::port_mod::BadPortMod::BadConfig)
    }
    /// Carries out a meter-mod; `Err`: why it was refused (nothing changed).
    fn meter_mod(&mut self, mm: &MeterMod) -> Result<(), BadMeterMod>;
    /// Flushes the connection tracker's entries `f` names (NXT_CT_FLUSH_ZONE,
    /// NXT_CT_FLUSH). A switch without a tracker has none to flush: done.
    fn ct_flush(&mut self, _f: &crate::ct_flush::CtFlush) {}
    /// Meter `id`'s statistics (OFPM_ALL: every meter's).
    fn meter_stats(&mut self, id: u32) -> Vec<MeterStatsEntry>;
    /// Meter `id`'s configuration (OFPM_ALL: every meter's).
    fn meter_config(&mut self, id: u32) -> Vec<MeterConfigEntry>;
    /// Changes the Geneve TLV map (`ovs-ofctl add-tlv-map`); `Err`: why it was
    /// refused (nothing changed). A switch without Geneve metadata refuses every
    /// mapping as one for a field it does not have.
    fn tlv_table_mod(&mut self, _m: &TlvTableMod) -> Result<(), BadTlv> {
        Err(BadTlv::BadFieldIndex)
    }
    /// The Geneve TLV map.
    fn tlv_table(&self) -> Vec<TlvMap> {
        Vec::new()
    }
    /// Checks a message added to a bundle as far as it can be without the switch's
    /// state (its table, ports, actions), so that it is refused when added, as
    /// Open vSwitch refuses it; the commit checks it again against the tables.
    /// What it makes of the message (its own form of the change) comes back at the
    /// commit, beside the message.
    fn check_bundled(&mut self, _item: &BundleItem) -> Result<Prepared, Refusal> {
        Ok(None)
    }
    /// Gives the stage of a bundle (what the switch makes of its messages
    /// together, `None` at first) a message just taken into it, with what
    /// [`Bridge::check_bundled`] made of it: called for each message taken, in
    /// order.
    fn stage_bundled(&mut self, _stage: &mut Prepared, _prepared: &Prepared) {}
    /// Carries out a committed bundle's messages in order, with their stage, all of
    /// them or — when one is refused — none (no packet sees part of them). `Err`: the index of the
    /// message refused (`None`: the commit as a whole could not be made) and why. A
    /// switch without bundles refuses every one.
    /// `Ok`: what the commit left to let go of, freed with the messages after
    /// the reply.
    fn commit_bundle(
        &mut self,
        _items: &mut [Bundled],
        _stage: Prepared,
    ) -> Result<Prepared, (Option<usize>, Refusal)> {
        Err((None, Refusal::Bundle(BadBundle::MsgUnsup)))
    }
    /// This connection's role now (another's request may have changed it).
    fn role(&self) -> Role {
        Role::Equal
    }
    /// Changes this connection's role (`None`: only asks); the role and the
    /// newest generation id after it.
    fn role_request(
        &mut self,
        role: Option<Role>,
        _generation_id: u64,
    ) -> Result<(Role, u64), Refusal> {
        Ok((role.unwrap_or(Role::Equal), 0))
    }
}

/// A flow-stats reply's entries, made one at a time.
pub type FlowStatsIter = Box<dyn Iterator<Item = FlowStatsEntry> + Send>;

/// Reply bytes a session writes before it returns to its caller, which sends them
/// (and may take the switch's lock anew) before it asks for more: a peer's requests
/// never build more than this at once, whatever they ask.
pub const OUT_BUDGET: usize = 256 * 1024;

/// Consecutive flow-mods carried out together at most (one change of the tables):
/// the time one batch holds the switch is bounded.
pub const MAX_BATCH: usize = 1024;

/// A multipart reply being sent, a body at a time.
struct Streaming {
    version: u8,
    /// The reply's message type: OFPT_MULTIPART_REPLY, 1.0's OFPT_STATS_REPLY.
    kind: u8,
    xid: u32,
    bodies: BodyStream,
}

impl Streaming {
    /// Writes reply messages to `out` while it holds less than `budget`; whether the
    /// reply is done.
    fn pump(&mut self, out: &mut Vec<u8>, budget: usize) -> bool {
        while out.len() < budget {
            let Some(body) = self.bodies.next_body() else {
                return true;
            };
            Header {
                version: self.version,
                kind: self.kind,
                length: u16::try_from(HEADER_LEN + body.len()).unwrap_or(u16::MAX),
                xid: self.xid,
            }
            .write(out);
            out.extend(body);
        }
        false
    }
}

/// Tables a vsw switch has (0–253; 254 and 255 are reserved numbers).
pub const N_TABLES: u8 = 254;
pub use crate::tables::MAX_ENTRIES;

/// What the switch is told of.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SessionEvent {
    /// The peer's hello was taken: the connection speaks this version.
    Negotiated(Version),
    /// The peer reported an error (type, code) for one of vsw's messages.
    PeerError { xid: u32, kind: u16, code: u16 },
    /// An echo reply: the peer is alive.
    Alive,
    /// The peer changed which asynchronous messages it wants.
    AsyncConfig(AsyncConfig),
    /// The peer set the switch configuration (`miss_send_len`).
    Config(SwitchConfig),
    /// The peer chose how its packet-ins are sent (NXT_SET_PACKET_IN_FORMAT).
    PacketInFormat(crate::packet::PacketInFormat),
    /// A 1.0 peer chose its flow format (NXT_SET_FLOW_FORMAT): with NXM (`true`),
    /// the flows it is told went are Nicira's NXT_FLOW_REMOVED.
    NxmFlowFormat(bool),
}

/// Why a connection ends.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Closed {
    #[error(transparent)]
    Frame(#[from] FrameError),
    #[error("the peer's first message was not a hello")]
    NoHello,
    #[error(transparent)]
    Incompatible(#[from] crate::version::Incompatible),
}

pub struct Session {
    ours: VersionSet,
    version: Option<Version>,
    config: SwitchConfig,
    async_config: AsyncConfig,
    /// Received bytes not yet carried out.
    pending: Vec<u8>,
    next_xid: u32,
    /// A multipart reply not yet all written.
    streaming: Option<Streaming>,
    /// Bundles opened and not yet committed or discarded.
    bundles: OpenBundles,
    /// Refusals logged this second (a controller that sends nothing but refused
    /// requests cannot flood the log).
    refusals: RefusalLog,
    /// The number NXT_SET_CONTROLLER_ID gave the connection (0 until then).
    controller_id: u16,
    /// What a 1.0 connection asked for that changes how its flow-mods read.
    of10: crate::of10::Dialect,
    /// The flow monitors the connection started (NXST_FLOW_MONITOR).
    monitors: crate::flow_monitor::Monitors,
    /// The messages of the bundle last committed, and what its commit left to
    /// let go of: let go when the next bytes come (its reply is out by then), not
    /// between the commit and its reply.
    committed: (Vec<Bundled>, Prepared),
}

/// Refusals logged per connection and second, at most; the others are counted and
/// the count said with the next one logged.
const REFUSALS_LOGGED_PER_SECOND: u32 = 10;

#[derive(Default)]
struct RefusalLog {
    since: Option<Instant>,
    logged: u32,
    unlogged: u64,
}

impl RefusalLog {
    /// Logs a refused request: its type, xid and why (the error names the field,
    /// action or limit at fault as closely as the codec knows it).
    fn note(&mut self, request: Option<Header>, refusal: &Refusal) {
        let now = Instant::now();
        if self
            .since
            .is_none_or(|t| now.duration_since(t) >= std::time::Duration::from_secs(1))
        {
            self.since = Some(now);
            self.logged = 0;
        }
        if self.logged >= REFUSALS_LOGGED_PER_SECOND {
            self.unlogged += 1;
            return;
        }
        self.logged += 1;
        let (kind, xid) = request.map_or((0, 0), |h| (h.kind, h.xid));
        let (error_type, error_code) = refusal.type_code();
        tracing::info!(
            message_type = kind,
            xid,
            error_type,
            error_code,
            not_logged_before = std::mem::take(&mut self.unlogged),
            "OpenFlow request refused: {refusal}"
        );
    }
}

impl Default for Session {
    fn default() -> Self {
        Session::new()
    }
}

impl Session {
    /// A service connection's session (`ovs-ofctl` on the management socket): as
    /// Open vSwitch's, it starts with a `miss_send_len` of 0, which means no
    /// asynchronous messages until the peer sets one (`ovs-ofctl monitor br0 65535`).
    pub fn new() -> Session {
        Session::with_config(SwitchConfig {
            flags: 0,
            miss_send_len: 0,
        })
    }

    /// A controller's session: the spec's defaults, asynchronous messages included.
    pub fn controller() -> Session {
        Session::with_config(SwitchConfig::default())
    }

    /// The number the controller gave this connection (NXT_SET_CONTROLLER_ID).
    pub fn controller_id(&self) -> u16 {
        self.controller_id
    }

    /// Speaks only the versions of `allowed` (a bridge's `protocols`) that vsw
    /// speaks; a peer with none of them is refused at hello (HELLO_FAILED).
    pub fn restricted_to(mut self, allowed: VersionSet) -> Session {
        self.ours = VersionSet(self.ours.0 & allowed.0);
        self
    }

    fn with_config(config: SwitchConfig) -> Session {
        Session {
            ours: VersionSet::VSW,
            version: None,
            config,
            async_config: AsyncConfig::DEFAULT,
            pending: Vec::new(),
            next_xid: 1,
            streaming: None,
            bundles: OpenBundles::default(),
            refusals: RefusalLog::default(),
            controller_id: 0,
            of10: crate::of10::Dialect::default(),
            monitors: crate::flow_monitor::Monitors::default(),
            committed: (Vec::new(), None),
        }
    }

    /// The error answering `request` (its xid), logged.
    fn refuse(&mut self, version: Version, request: &[u8], refusal: Refusal) -> Vec<u8> {
        let h = Header::parse(request);
        self.refusals.note(h, &refusal);
        let xid = h.map_or(0, |h| h.xid);
        refusal
            .answer_in(version, request)
            .encode(version.wire(), xid)
    }

    /// A message of the connection, read as its version (and, in 1.0, what it
    /// asked for) lays it out.
    fn decode(&self, version: Version, m: &[u8]) -> Result<Message, Refusal> {
        Message::decode_in(version, m, self.of10)
    }

    /// A multipart (1.0: statistics) reply to `request`, streamed a body at a
    /// time, its entries made by `entries` (1.3 on) as they are asked for.
    fn stream_reply(
        &mut self,
        version: Version,
        request: &[u8],
        kind: u16,
        entries: Box<dyn Iterator<Item = Vec<u8>> + Send>,
    ) {
        let bodies = if version == Version::V1_0 {
            let (kind, after_flags) = crate::of10::reply_head(request, kind);
            BodyStream::with_head(kind, after_flags, entries)
        } else {
            BodyStream::new(kind, entries)
        };
        self.stream(version, request, bodies);
    }

    /// Streams `bodies` as the reply to `request`: statistics replies in 1.0,
    /// multipart replies after.
    fn stream(&mut self, version: Version, request: &[u8], bodies: BodyStream) {
        let kind = if version == Version::V1_0 {
            crate::of10::OFPT10_STATS_REPLY
        } else {
            OFPT_MULTIPART_REPLY
        };
        self.streaming = Some(Streaming {
            version: version.wire(),
            kind,
            xid: Header::parse(request).map_or(0, |h| h.xid),
            bodies,
        });
    }

    fn xid(&mut self) -> u32 {
        let x = self.next_xid;
        self.next_xid = self.next_xid.wrapping_add(1).max(1);
        x
    }

    /// The hello vsw opens with: its highest version and the bitmap of all.
    pub fn greeting(&mut self) -> Vec<u8> {
        let highest = self.ours.highest().map_or(0, Version::wire);
        let xid = self.xid();
        Message::Hello {
            versions: Some(self.ours),
        }
        .encode(highest, xid)
    }

    /// An echo request to see that the peer is alive (after negotiation).
    pub fn keepalive(&mut self) -> Option<Vec<u8>> {
        let v = self.version?;
        let xid = self.xid();
        Some(Message::EchoRequest(Vec::new()).encode(v.wire(), xid))
    }

    pub fn version(&self) -> Option<Version> {
        self.version
    }

    pub fn config(&self) -> SwitchConfig {
        self.config
    }

    pub fn async_config(&self) -> AsyncConfig {
        self.async_config
    }

    /// Takes received bytes: answers go to `out` (to be sent in order), events are
    /// returned. `Err`: the connection is to be closed after `out` is sent.
    ///
    /// It stops once `out` holds [`OUT_BUDGET`] bytes, keeping what it has not
    /// carried out yet: the caller sends `out` and calls again (with no new bytes)
    /// while [`Session::wants_more`] says so, before it reads more.
    pub fn receive(
        &mut self,
        bytes: &[u8],
        bridge: &mut dyn Bridge,
        out: &mut Vec<u8>,
    ) -> Result<Vec<SessionEvent>, Closed> {
        self.committed = (Vec::new(), None);
        self.pending.extend_from_slice(bytes);
        let mut events = Vec::new();
        let mut used = 0;
        // Consecutive flow-mods are carried out together (one change of the tables
        // for all of them, at most MAX_BATCH), each still answered on its own.
        let mut mods: Vec<(Vec<u8>, FlowMod)> = Vec::new();
        let result = loop {
            if let Some(s) = &mut self.streaming {
                if !s.pump(out, OUT_BUDGET) {
                    break Ok(());
                }
                self.streaming = None;
            }
            if out.len() >= OUT_BUDGET {
                break Ok(());
            }
            let m = match next_message(&self.pending[used..]) {
                Ok(Some((_, m))) => m.to_vec(),
                Ok(None) => break Ok(()),
                Err(e) => break Err(Closed::from(e)),
            };
            used += m.len();
            if let Some(v) = self.version {
                if let Ok(Message::FlowMod(fm)) = self.decode(v, &m) {
                    if bridge.role() != Role::Slave {
                        mods.push((m, fm));
                        if mods.len() >= MAX_BATCH {
                            self.flow_mods(&mut mods, bridge, out);
                        }
                        continue;
                    }
                }
            }
            self.flow_mods(&mut mods, bridge, out);
            if let Err(c) = self.one(&m, bridge, out, &mut events) {
                break Err(c);
            }
        };
        self.flow_mods(&mut mods, bridge, out);
        self.pending.drain(..used);
        result.map(|()| events)
    }

    /// Whether [`Session::receive`] stopped with work left: a reply not all
    /// written, or whole messages not carried out yet.
    pub fn wants_more(&self) -> bool {
        self.streaming.is_some() || matches!(next_message(&self.pending), Ok(Some(_)))
    }

    /// Carries out the flow-mods gathered, answering each that failed.
    fn flow_mods(
        &mut self,
        mods: &mut Vec<(Vec<u8>, FlowMod)>,
        bridge: &mut dyn Bridge,
        out: &mut Vec<u8>,
    ) {
        if mods.is_empty() {
            return;
        }
        let Some(version) = self.version else { return };
        let fms: Vec<FlowMod> = mods.iter().map(|(_, fm)| fm.clone()).collect();
        let results = bridge.flow_mods(&fms);
        for ((raw, _), r) in mods.drain(..).zip(results) {
            if let Err(e) = r {
                out.extend(self.refuse(version, &raw, Refusal::FlowMod(e)));
            }
        }
    }

    fn one(
        &mut self,
        m: &[u8],
        bridge: &mut dyn Bridge,
        out: &mut Vec<u8>,
        events: &mut Vec<SessionEvent>,
    ) -> Result<(), Closed> {
        let Some(h) = Header::parse(m) else {
            return Ok(());
        };
        let Some(version) = self.version else {
            return self.hello(h, m, out, events);
        };
        match self.decode(version, m) {
            // A slave reads; it changes nothing.
            Ok(
                Message::FlowMod(_)
                | Message::PacketOut(_)
                | Message::Resume(_)
                | Message::GroupMod(_)
                | Message::MeterMod(_)
                | Message::PortMod(_)
                | Message::CtFlushZone(_)
                | Message::CtFlush(_)
                | Message::TlvTableMod(_),
            ) if bridge.role() == Role::Slave => {
                out.extend(self.refuse(version, m, Refusal::IsSlave));
            }
            Ok(Message::MeterMod(mm)) => {
                if let Err(e) = bridge.meter_mod(&mm) {
                    out.extend(self.refuse(version, m, Refusal::MeterMod(e)));
                }
            }
            Ok(Message::GroupMod(gm)) => {
                if let Err(e) = bridge.group_mod(&gm) {
                    out.extend(self.refuse(version, m, Refusal::GroupMod(e)));
                }
            }
            Ok(Message::FlowMod(fm)) => {
                if let Err(e) = bridge.flow_mod(&fm) {
                    out.extend(self.refuse(version, m, Refusal::FlowMod(e)));
                }
            }
            Ok(Message::BundleControl(c)) => match self.bundle_control(version, m, &c, bridge) {
                Ok(answer) => {
                    for (msg, xid) in answer {
                        out.extend(msg.encode(version.wire(), xid.unwrap_or(h.xid)));
                    }
                }
                Err(refusal) => out.extend(self.refuse(version, m, refusal)),
            },
            Ok(Message::BundleAdd(a)) => {
                if let Err(refusal) = self.bundle_add(version, m, a, bridge) {
                    out.extend(self.refuse(version, m, refusal));
                }
            }
            Ok(msg) => self.answer(version, m, msg, bridge, out, events),
            Err(refusal) => {
                // In the connection's version, with the request's xid.
                out.extend(self.refuse(version, m, refusal));
            }
        }
        Ok(())
    }

    /// A bundle-control request: its reply, or why it is refused — and for a
    /// commit one of whose messages is refused, that message's own error (with its
    /// xid) before the commit's MSG_FAILED. Each answer with its xid (`None`: the
    /// request's).
    fn bundle_control(
        &mut self,
        version: Version,
        m: &[u8],
        c: &BundleCtrl,
        bridge: &mut dyn Bridge,
    ) -> Result<Vec<(Message, Option<u32>)>, Refusal> {
        // Replies carry no flags, as Open vSwitch's.
        let reply = |kind| {
            vec![(
                Message::BundleControl(BundleCtrl {
                    bundle_id: c.bundle_id,
                    kind,
                    flags: 0,
                }),
                None,
            )]
        };
        if bridge.role() == Role::Slave {
            return Err(Refusal::IsSlave);
        }
        let (mut items, stage) = match self.bundles.control(c, Instant::now())? {
            Control::Reply(kind) => return Ok(reply(kind)),
            Control::Commit(items, stage) => (items, stage),
        };
        let (at, refusal) = match bridge.commit_bundle(&mut items, stage) {
            Ok(leftovers) => {
                self.committed = (items, leftovers);
                return Ok(reply(OFPBCT_COMMIT_REPLY));
            }
            Err(refused) => refused,
        };
        tracing::info!(
            bundle = c.bundle_id,
            message = at,
            of = items.len(),
            error = %refusal,
            "OpenFlow bundle not committed: none of its messages was carried out"
        );
        let mut out = Vec::new();
        // The refused message's own error, with its bundle-add's xid and start.
        if let Some(head) = at.and_then(|i| items.get(i)).map(|b| &b.head) {
            let h = Header::parse(head);
            self.refusals.note(h, &refusal);
            let xid = h.map(|h| h.xid);
            out.push((refusal.answer_in(version, head), xid));
        }
        out.push((BadBundle::MsgFailed.answer(version, m), None));
        Ok(out)
    }

    /// A bundle-add (`m`, all of it): the message decoded, checked as far as it can
    /// be, and kept for the commit (flow-mods and group-mods only), or why not.
    fn bundle_add(
        &mut self,
        version: Version,
        m: &[u8],
        a: BundleAdd,
        bridge: &mut dyn Bridge,
    ) -> Result<(), Refusal> {
        if bridge.role() == Role::Slave {
            return Err(Refusal::IsSlave);
        }
        let outer = Header::parse(m).ok_or(BadBundle::MsgBadLen)?;
        let inner = Header::parse(&a.message).ok_or(BadBundle::MsgBadLen)?;
        if inner.xid != outer.xid {
            return Err(BadBundle::MsgBadXid.into());
        }
        let item = match Message::decode(version, &a.message)? {
            Message::FlowMod(fm) => BundleItem::Flow(fm),
            Message::GroupMod(gm) => BundleItem::Group(gm),
            _ => return Err(BadBundle::MsgUnsup.into()),
        };
        let prepared = bridge.check_bundled(&item)?;
        let message = Bundled {
            head: m[..m.len().min(crate::error::ERROR_DATA_LEN)].to_vec(),
            item,
            prepared,
        };
        self.bundles
            .add(&a, m.len(), message, Instant::now(), |stage, prepared| {
                bridge.stage_bundled(stage, prepared)
            })
            .map_err(Refusal::from)
    }

    fn hello(
        &mut self,
        h: Header,
        m: &[u8],
        out: &mut Vec<u8>,
        events: &mut Vec<SessionEvent>,
    ) -> Result<(), Closed> {
        let reply_version = h.version.min(self.ours.highest().map_or(0, Version::wire));
        if h.kind != OFPT_HELLO {
            out.extend(
                Refusal::HelloIncompatible
                    .answer(m)
                    .encode(reply_version, h.xid),
            );
            return Err(Closed::NoHello);
        }
        let Message::Hello { versions } = Message::decode_hello(&m[crate::frame::HEADER_LEN..])
        else {
            return Ok(());
        };
        match negotiate(self.ours, h.version, versions) {
            Ok(v) => {
                self.version = Some(v);
                events.push(SessionEvent::Negotiated(v));
                Ok(())
            }
            Err(e) => {
                // The data of a HELLO_FAILED error is text for a person.
                let (kind, code) = Refusal::HelloIncompatible.type_code();
                let text = e.to_string().into_bytes();
                out.extend(
                    Message::Error(crate::message::ErrorMsg {
                        kind,
                        code,
                        data: text,
                    })
                    .encode(reply_version, h.xid),
                );
                Err(e.into())
            }
        }
    }

    fn answer(
        &mut self,
        version: Version,
        request: &[u8],
        msg: Message,
        bridge: &mut dyn Bridge,
        out: &mut Vec<u8>,
        events: &mut Vec<SessionEvent>,
    ) {
        let Some(h) = Header::parse(request) else {
            return;
        };
        let v = version.wire();
        let reply = match msg {
            Message::EchoRequest(data) => Some(Message::EchoReply(data)),
            Message::FeaturesRequest => Some(Message::FeaturesReply(Features {
                datapath_id: bridge.datapath_id(),
                n_buffers: 0,
                n_tables: N_TABLES,
                auxiliary_id: 0,
                capabilities: 0,
                // 1.0 lists the ports here; later versions ask for them apart.
                ports: if version <= Version::V1_2 {
                    bridge.ports()
                } else {
                    Vec::new()
                },
            })),
            Message::MultipartRequest(req) => {
                let reply = match req {
                    // Made as the reply gets to each rule, a body at a time.
                    MultipartRequest::Flow(f) => match bridge.flow_stats(&f) {
                        Ok(entries) => {
                            let nicira = crate::of10::is_nicira_stats(request);
                            let encoded = entries.map(move |e| {
                                let mut b = Vec::with_capacity(256);
                                match version {
                                    Version::V1_0 => {
                                        crate::of10::encode_flow_entry(&e, nicira, &mut b)
                                    }
                                    Version::V1_1 => crate::of11::flow_entry(&e, &mut b),
                                    _ => e.encode(version, &mut b),
                                }
                                b
                            });
                            let kind = crate::flow_stats::OFPMP_FLOW;
                            self.stream_reply(version, request, kind, Box::new(encoded));
                            return;
                        }
                        Err(e) => {
                            out.extend(self.refuse(version, request, Refusal::FlowMod(e)));
                            return;
                        }
                    },
                    MultipartRequest::Desc => MultipartReply::Desc(bridge.desc()),
                    MultipartRequest::PortDesc => MultipartReply::PortDesc(bridge.ports()),
                    MultipartRequest::TableFeatures => MultipartReply::TableFeatures(
                        (0..N_TABLES)
                            .map(|t| table_feature(t, N_TABLES, MAX_ENTRIES))
                            .collect(),
                    ),
                    MultipartRequest::PortStats(asked) => MultipartReply::PortStats(
                        bridge
                            .port_stats()
                            .into_iter()
                            .filter(|p| selects(asked, p.port_no))
                            .collect(),
                    ),
                    MultipartRequest::Table => MultipartReply::Table(bridge.table_stats(N_TABLES)),
                    MultipartRequest::QueueStats { .. } => MultipartReply::QueueStats,
                    MultipartRequest::Group(id) => MultipartReply::Group(bridge.group_stats(id)),
                    MultipartRequest::GroupDesc(id) => {
                        MultipartReply::GroupDesc(bridge.group_desc(id))
                    }
                    MultipartRequest::GroupFeatures => MultipartReply::GroupFeatures,
                    MultipartRequest::Meter(id) => MultipartReply::Meter(bridge.meter_stats(id)),
                    MultipartRequest::MeterConfig(id) => {
                        MultipartReply::MeterConfig(bridge.meter_config(id))
                    }
                    MultipartRequest::MeterFeatures => MultipartReply::MeterFeatures,
                    MultipartRequest::Aggregate(f) => match bridge.flow_stats(&f) {
                        Ok(entries) => {
                            let mut a = AggregateStats {
                                packet_count: 0,
                                byte_count: 0,
                                flow_count: 0,
                            };
                            for e in entries {
                                a.packet_count += e.packet_count;
                                a.byte_count += e.byte_count;
                                a.flow_count += 1;
                            }
                            MultipartReply::Aggregate(a)
                        }
                        Err(e) => {
                            out.extend(self.refuse(version, request, Refusal::FlowMod(e)));
                            return;
                        }
                    },
                };
                let entries = match version {
                    Version::V1_0 => crate::of10::reply_entries(&reply, request),
                    Version::V1_1 => crate::of11::reply_entries(&reply)
                        .unwrap_or_else(|| reply.entries_in(version)),
                    Version::V1_2 => crate::of12::reply_entries(&reply)
                        .unwrap_or_else(|| reply.entries_in(version)),
                    _ => reply.entries_in(version),
                };
                self.stream_reply(
                    version,
                    request,
                    reply.kind(),
                    Box::new(entries.into_iter()),
                );
                None
            }
            Message::GetConfigRequest => Some(Message::GetConfigReply(self.config)),
            Message::GetAsyncRequest => Some(Message::GetAsyncReply(self.async_config)),
            Message::RoleRequest(r) => match bridge.role_request(r.role, r.generation_id) {
                Ok((role, generation_id)) => Some(Message::RoleReply(RoleMsg {
                    role: Some(role),
                    generation_id,
                })),
                Err(e) => {
                    out.extend(self.refuse(version, request, e));
                    None
                }
            },
            Message::SetAsync(body) => {
                match self.async_config.decode_body(version, &body) {
                    Ok(c) => {
                        self.async_config = c;
                        events.push(SessionEvent::AsyncConfig(c));
                    }
                    Err(e) => out.extend(self.refuse(version, request, e)),
                }
                None
            }
            Message::SetConfig(c) => {
                self.config = c;
                events.push(SessionEvent::Config(c));
                None
            }
            Message::PacketOut(po) => {
                if let Err(e) = bridge.packet_out(&po) {
                    out.extend(self.refuse(version, request, e));
                }
                None
            }
            Message::Resume(r) => {
                if let Err(e) = bridge.resume(&r) {
                    out.extend(self.refuse(version, request, e));
                }
                None
            }
            // Every request before it was carried out before it was answered (a
            // flow-mod once the datapath flows were revalidated), so a barrier
            // needs no waiting.
            Message::BarrierRequest => Some(Message::BarrierReply),
            Message::TlvTableMod(m) => {
                if let Err(e) = bridge.tlv_table_mod(&m) {
                    out.extend(self.refuse(version, request, Refusal::Tlv(e)));
                }
                None
            }
            Message::TlvTableRequest => Some(Message::TlvTableReply(bridge.tlv_table())),
            Message::EchoReply(_) => {
                events.push(SessionEvent::Alive);
                None
            }
            Message::SetFlowFormat(f) => {
                // Both formats are always read (their flow-mods and statistics
                // are messages of their own); anything else is none.
                if matches!(f, crate::of10::NXFF_OPENFLOW10 | crate::of10::NXFF_NXM) {
                    events.push(SessionEvent::NxmFlowFormat(f == crate::of10::NXFF_NXM));
                } else {
                    out.extend(self.refuse(version, request, Refusal::BadFlowFormat));
                }
                None
            }
            // ovn-controller sends one for every zone it assigns (and starts over
            // on an error), and NXT_CT_FLUSH when a load balancer's backend goes.
            Message::CtFlushZone(zone) => {
                bridge.ct_flush(&crate::ct_flush::CtFlush {
                    zone: Some(zone),
                    ..Default::default()
                });
                None
            }
            Message::CtFlush(f) => {
                bridge.ct_flush(&f);
                None
            }
            Message::PortMod(pm) => {
                if let Err(e) = bridge.port_mod(&pm) {
                    out.extend(self.refuse(version, request, Refusal::PortMod(e)));
                }
                None
            }
            Message::FlowModTableId(on) => {
                self.of10.table_in_command = on;
                None
            }
            Message::FlowMonitorRequest(requests) => {
                if let Err(e) = self.monitors.apply(&requests) {
                    out.extend(self.refuse(version, request, e));
                    return;
                }
                // The switch starts comparing from the tables as they are now,
                // before the initial flows are read from them: a change between
                // is told twice at worst, never lost.
                bridge.set_flow_monitors(&self.monitors.list());
                // The flows there now, for the monitors that asked for them: each
                // once, with its actions if one of them asked for those.
                let mut initial: Vec<(crate::flow_monitor::FlowUpdate, bool)> = Vec::new();
                for m in requests.iter().filter(|m| {
                    m.command != crate::flow_monitor::MonitorCommand::Delete
                        && m.flags & crate::flow_monitor::NXFMF_INITIAL != 0
                }) {
                    let sel = FlowStatsRequest {
                        table_id: m.table_id,
                        out_port: m.out_port,
                        out_group: crate::flow_mod::OFPG_ANY,
                        cookie: 0,
                        cookie_mask: 0,
                        matcher: m.matcher.clone(),
                    };
                    let Ok(entries) = bridge.flow_stats(&sel) else {
                        continue;
                    };
                    for e in entries {
                        let u = crate::flow_monitor::FlowUpdate::added(e);
                        // A flow two monitors select is told once.
                        let place = (u.table_id, u.priority, &u.matcher);
                        if initial
                            .iter()
                            .any(|(v, _)| (v.table_id, v.priority, &v.matcher) == place)
                        {
                            continue;
                        }
                        if let Some(actions) = self.monitors.wants(&u, true) {
                            initial.push((u, actions));
                        }
                    }
                }
                let entries = initial.into_iter().map(|(u, actions)| {
                    let mut b = Vec::with_capacity(128);
                    u.encode(version, actions, true, &mut b);
                    b
                });
                let (kind, after_flags) = crate::flow_monitor::reply_head(version);
                let entries: Vec<Vec<u8>> = entries.collect();
                let bodies =
                    BodyStream::with_head(kind, after_flags, Box::new(entries.into_iter()));
                self.stream(version, request, bodies);
                None
            }
            Message::FlowMonitorCancel(id) => {
                match self.monitors.cancel(id) {
                    Ok(()) => bridge.set_flow_monitors(&self.monitors.list()),
                    Err(e) => out.extend(self.refuse(version, request, e)),
                }
                None
            }
            // Kept: vsw's `controller` actions send to every controller (none
            // names an id yet), so it routes nothing.
            Message::SetControllerId(id) => {
                self.controller_id = id;
                None
            }
            // OpenFlow's packet-ins, Nicira's NXT_PACKET_IN or NXT_PACKET_IN2.
            Message::SetPacketInFormat(f) => {
                let format = match f {
                    crate::packet::NXPIF_STANDARD => Some(crate::packet::PacketInFormat::Standard),
                    crate::packet::NXPIF_NXT_PACKET_IN2 => {
                        Some(crate::packet::PacketInFormat::NxtPacketIn2)
                    }
                    crate::packet::NXPIF_NXT_PACKET_IN => {
                        Some(crate::packet::PacketInFormat::NxtPacketIn)
                    }
                    _ => None,
                };
                match format {
                    Some(f) => events.push(SessionEvent::PacketInFormat(f)),
                    None => out.extend(self.refuse(version, request, Refusal::BadArgument)),
                }
                None
            }
            Message::Error(e) => {
                events.push(SessionEvent::PeerError {
                    xid: h.xid,
                    kind: e.kind,
                    code: e.code,
                });
                None
            }
            // A second hello is harmless; replies are not requests.
            Message::Hello { .. }
            | Message::FeaturesReply(_)
            | Message::GetConfigReply(_)
            | Message::BarrierReply
            | Message::PacketIn(_)
            | Message::PacketIn2(_)
            | Message::NxPacketIn(_)
            | Message::NxFlowRemoved(_)
            | Message::GetAsyncReply(_)
            | Message::TlvTableReply(_)
            | Message::RoleReply(_)
            | Message::RoleStatus(_)
            | Message::PortStatus(..)
            | Message::FlowRemoved(_)
            | Message::GroupMod(_)
            | Message::MeterMod(_)
            | Message::FlowMod(_)
            | Message::BundleControl(_)
            | Message::BundleAdd(_) => None,
        };
        if let Some(r) = reply {
            out.extend(r.encode(v, h.xid));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_past_ten_a_second_are_counted_not_logged() {
        let mut log = RefusalLog::default();
        let request = [4u8, 14, 0, 8, 0, 0, 0, 1];
        for _ in 0..15 {
            log.note(Header::parse(&request), &Refusal::BadType);
        }
        assert_eq!((log.logged, log.unlogged), (10, 5));
    }

    struct TestBridge;

    impl Bridge for TestBridge {
        fn datapath_id(&self) -> u64 {
            0x0000_0000_0000_0001
        }
        fn ports(&self) -> Vec<PortInfo> {
            vec![PortInfo {
                port_no: 1,
                hw_addr: [2, 0, 0, 0, 0, 1],
                name: "vm1".into(),
                admin_down: false,
                link_up: true,
                curr_speed_kbps: 0,
                max_speed_kbps: 0,
            }]
        }
        fn desc(&self) -> SwitchDesc {
            SwitchDesc::default()
        }
        fn flow_mod(&mut self, _: &FlowMod) -> Result<(), BadFlowMod> {
            Err(BadFlowMod::Refused)
        }
        fn flow_stats(&mut self, _: &FlowStatsRequest) -> Result<FlowStatsIter, BadFlowMod> {
            Ok(Box::new(std::iter::empty()))
        }
        fn packet_out(&mut self, _: &crate::PacketOut) -> Result<(), crate::Refusal> {
            Ok(())
        }
        fn resume(&mut self, _: &crate::packet::Resume) -> Result<(), crate::Refusal> {
            Ok(())
        }
        fn table_stats(&mut self, _: u8) -> Vec<crate::table_stats::TableStats> {
            Vec::new()
        }
        fn group_mod(
            &mut self,
            _: &crate::group_mod::GroupMod,
        ) -> Result<(), crate::group_mod::BadGroupMod> {
            Ok(())
        }
        fn group_stats(&mut self, _: u32) -> Vec<crate::group_mod::GroupStatsEntry> {
            Vec::new()
        }
        fn group_desc(&mut self, _: u32) -> Vec<crate::group_mod::GroupDescEntry> {
            Vec::new()
        }
        fn meter_mod(
            &mut self,
            _: &crate::meter_mod::MeterMod,
        ) -> Result<(), crate::meter_mod::BadMeterMod> {
            Ok(())
        }
        fn meter_stats(&mut self, _: u32) -> Vec<crate::meter_mod::MeterStatsEntry> {
            Vec::new()
        }
        fn meter_config(&mut self, _: u32) -> Vec<crate::meter_mod::MeterConfigEntry> {
            Vec::new()
        }
        fn port_stats(&mut self) -> Vec<PortStats> {
            Vec::new()
        }
    }

    fn switch() -> Session {
        Session::new()
    }

    #[test]
    fn a_controller_session_from_hello_to_barrier() {
        let mut s = switch();
        let hello = s.greeting();
        assert_eq!(
            (hello[0], hello[1]),
            (0x06, OFPT_HELLO),
            "1.5 header, bitmap of 1.0 and 1.3–1.5"
        );
        let mut out = Vec::new();
        let mut input = Message::Hello {
            versions: Some(VersionSet(0x10)),
        }
        .encode(0x04, 1);
        input.extend(Message::FeaturesRequest.encode(0x04, 2));
        input.extend(Message::EchoRequest(b"hi".to_vec()).encode(0x04, 3));
        input.extend(
            Message::SetConfig(SwitchConfig {
                flags: 0,
                miss_send_len: 0xffff,
            })
            .encode(0x04, 4),
        );
        input.extend(Message::GetConfigRequest.encode(0x04, 5));
        input.extend(Message::BarrierRequest.encode(0x04, 6));
        // Fed a byte at a time: messages split anywhere are put back together.
        let mut events = Vec::new();
        for b in &input {
            events.extend(
                s.receive(std::slice::from_ref(b), &mut TestBridge, &mut out)
                    .unwrap(),
            );
        }
        assert_eq!(
            events,
            vec![
                SessionEvent::Negotiated(Version::V1_3),
                SessionEvent::Config(SwitchConfig {
                    flags: 0,
                    miss_send_len: 0xffff
                })
            ]
        );
        let mut replies = Vec::new();
        let mut at = 0;
        while let Some((h, m)) = next_message(&out[at..]).unwrap() {
            replies.push((h.xid, Message::decode(Version::V1_3, m).unwrap()));
            at += m.len();
        }
        assert_eq!(
            replies,
            vec![
                (
                    2,
                    Message::FeaturesReply(Features {
                        datapath_id: 1,
                        n_buffers: 0,
                        n_tables: N_TABLES,
                        auxiliary_id: 0,
                        capabilities: 0,
                        ports: Vec::new(),
                    })
                ),
                (3, Message::EchoReply(b"hi".to_vec())),
                (
                    5,
                    Message::GetConfigReply(SwitchConfig {
                        flags: 0,
                        miss_send_len: 0xffff
                    })
                ),
                (6, Message::BarrierReply),
            ]
        );
    }

    #[test]
    fn a_refused_request_is_answered_with_its_xid_and_the_session_goes_on() {
        let mut s = switch();
        let mut out = Vec::new();
        s.receive(
            &Message::Hello { versions: None }.encode(0x04, 1),
            &mut TestBridge,
            &mut out,
        )
        .unwrap();
        let mut unknown = Message::BarrierRequest.encode(0x04, 77);
        unknown[1] = 200;
        s.receive(&unknown, &mut TestBridge, &mut out).unwrap();
        let (h, m) = next_message(&out).unwrap().unwrap();
        assert_eq!(h.xid, 77);
        let Ok(Message::Error(e)) = Message::decode(Version::V1_3, m) else {
            panic!("an error");
        };
        assert_eq!((e.kind, e.code), (1, 1), "BAD_REQUEST/BAD_TYPE");
        out.clear();
        s.receive(
            &Message::BarrierRequest.encode(0x04, 78),
            &mut TestBridge,
            &mut out,
        )
        .unwrap();
        assert_eq!(next_message(&out).unwrap().unwrap().0.xid, 78);
    }

    #[test]
    fn a_controller_id_is_kept_and_not_answered() {
        let mut s = switch();
        let mut out = Vec::new();
        s.receive(
            &Message::Hello { versions: None }.encode(0x04, 1),
            &mut TestBridge,
            &mut out,
        )
        .unwrap();
        out.clear();
        let mut input = Message::SetControllerId(7).encode(0x04, 5);
        input.extend(Message::BarrierRequest.encode(0x04, 6));
        s.receive(&input, &mut TestBridge, &mut out).unwrap();
        assert_eq!(s.controller_id(), 7);
        // Only the barrier's reply: the id itself has none.
        assert_eq!(next_message(&out).unwrap().unwrap().0.xid, 6);
    }

    #[test]
    fn an_old_peer_is_told_why_and_closed() {
        let mut s = switch();
        let mut out = Vec::new();
        // A peer of OpenFlow 1.6 alone (its bitmap says so).
        let r = s.receive(
            &Message::Hello {
                versions: Some(crate::version::VersionSet(1 << 7)),
            }
            .encode(0x07, 5),
            &mut TestBridge,
            &mut out,
        );
        assert!(matches!(r, Err(Closed::Incompatible(_))));
        let (h, m) = next_message(&out).unwrap().unwrap();
        assert_eq!(
            (h.version, h.kind, h.xid),
            (0x06, 1, 5),
            "an error in the latest version both could read"
        );
        assert_eq!(&m[8..12], &[0, 0, 0, 0], "HELLO_FAILED/INCOMPATIBLE");
        assert!(String::from_utf8_lossy(&m[12..]).contains("1.0 to 1.5"));
        let mut s = switch();
        let r = s.receive(
            &Message::FeaturesRequest.encode(0x04, 1),
            &mut TestBridge,
            &mut Vec::new(),
        );
        assert_eq!(r, Err(Closed::NoHello));
        let mut s = switch();
        let r = s.receive(&[4, 0, 0, 3, 0, 0, 0, 1], &mut TestBridge, &mut Vec::new());
        assert!(matches!(r, Err(Closed::Frame(_))));
    }
}
