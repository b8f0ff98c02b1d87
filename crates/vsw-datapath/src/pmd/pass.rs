//! One packet's way through its flow's actions (`Pass::run`): rewrites on the
//! PMD's copy, outputs staged, copies saved and restored for groups, tunnel headers
//! pushed (split where they would not fit) and popped, recirculations looked up
//! again in the same batch.

use std::sync::Arc;

use vsw_packet::gso;
use vsw_packet::key::l4_hash;
use vsw_packet::rewrite::{PacketBuf, RewriteError};
use vsw_packet::tunnel::segment_udp_tunnel;
use vsw_packet::vnet::VNET_F_NEEDS_CSUM;
use vsw_packet::{extract, FlowKey, VnetHdr};

use super::outputs::Outputs;
use super::{Finder, Tally, MAX_REWRITE_FRAME};
use crate::ct::CtMeta;
use crate::dpaction::{MAX_RECIRC_DEPTH, MAX_SAVED};
use crate::dpflow::{DpAction, DpFlow};
use crate::egress::Push;
use crate::meter::{remark_dscp, Verdict};
use crate::port::{PacketMeta, TunnelKey};
use crate::shared::Shared;
use crate::tunnel_push::PushHeader;

/// What a recirculation needs beside the packet: where to find the next flow, the
/// batch's tally to count it in, and the scratch key to look it up by.
pub(super) struct Recirculation<'a, 'b> {
    pub(super) finder: &'a mut Finder<'b>,
    pub(super) tally: &'a mut Tally,
    pub(super) key: &'a mut FlowKey,
}

/// The copies `DpAction::Save` keeps (a group's buckets run on copies), made once
/// per PMD: no allocation per packet. Twice a flow's budget: a popped tunnel
/// packet's pass is translated with a budget of its own while the pass that popped
/// it holds its copies.
pub(crate) struct SavedCopies {
    bufs: Vec<PacketBuf>,
    /// The tunnel each copy's packet had (a push clears it for the outer packet;
    /// the copy's end gives it back), and what the tracker had said of it.
    tunnels: Vec<(TunnelKey, CtMeta)>,
    /// Copies held for the packet being run.
    held: usize,
    /// Where a super-frame too large for a tunnel's outer headers is split: each
    /// part built in `split_build`, then kept in `split_parts` until it is run.
    split_build: Box<[u8]>,
    split_parts: Box<[u8]>,
    /// Where each part is in `split_parts`.
    split_ranges: Vec<(usize, usize)>,
}

/// A super-frame split for a tunnel comes in two parts (three for a jumbo frame's
/// headers at most), each no larger than a rewritten frame; a tunnel super-frame
/// cut for a tunnel, in its outer packets (the headers of each again: room for
/// three frames' worth).
const SPLIT_PARTS: usize = 3;

impl SavedCopies {
    pub(super) fn new() -> SavedCopies {
        SavedCopies {
            bufs: (0..2 * MAX_SAVED)
                .map(|_| PacketBuf::new(MAX_REWRITE_FRAME))
                .collect(),
            tunnels: vec![(TunnelKey::default(), CtMeta::default()); 2 * MAX_SAVED],
            held: 0,
            split_build: vec![0u8; MAX_REWRITE_FRAME].into_boxed_slice(),
            split_parts: vec![0u8; SPLIT_PARTS * MAX_REWRITE_FRAME].into_boxed_slice(),
            split_ranges: Vec::with_capacity(gso::MAX_SEGMENTS),
        }
    }

    fn save(
        &mut self,
        scratch: &PacketBuf,
        tunnel: TunnelKey,
        ct: CtMeta,
    ) -> Result<(), RewriteError> {
        let buf = self.bufs.get_mut(self.held).ok_or(RewriteError::Unsaved)?;
        buf.copy_from(scratch)?;
        self.tunnels[self.held] = (tunnel, ct);
        self.held += 1;
        Ok(())
    }

    /// Puts the last copy back; the tunnel its packet had, and its ct state.
    fn restore(&mut self, scratch: &mut PacketBuf) -> Result<(TunnelKey, CtMeta), RewriteError> {
        self.held = self.held.checked_sub(1).ok_or(RewriteError::Unsaved)?;
        scratch.copy_from(&self.bufs[self.held])?;
        Ok(self.tunnels[self.held])
    }
}

/// Where a packet came from: its port, the tunnel it came through, and what the
/// connection tracker said of it (`ct_*`, after a `Ct`).
#[derive(Clone, Copy)]
pub(super) struct Origin {
    pub(super) in_port: u32,
    pub(super) tunnel: TunnelKey,
    pub(super) ct: CtMeta,
}

/// Where a pass goes on: its next action, the `CheckPktLen` forks open there, the
/// `dp_hash` a `Hash` computed.
#[derive(Clone, Copy)]
struct Resume {
    at: usize,
    forks: [(usize, usize); crate::dpaction::MAX_FORKS],
    open_forks: usize,
    dp_hash: u32,
}

impl Resume {
    const START: Resume = Resume {
        at: 0,
        forks: [(0, 0); crate::dpaction::MAX_FORKS],
        open_forks: 0,
        dp_hash: 0,
    };
}

/// What a `ct` made of a packet. (`Done`, the large one, is every whole packet's:
/// boxing it would allocate per packet.)
#[allow(clippy::large_enum_variant)]
enum Tracked {
    /// Its `ct_*` fields, and its key when the frame is as extracted.
    Done(CtMeta, Option<FlowKey>),
    /// A fragment kept until its datagram is whole.
    Held,
    /// The fragment that made its datagram whole: the datagram and its fragments.
    Whole(Box<vsw_conntrack::ipf::Reassembled>),
}

/// Runs actions that change the packet, in order, on the copy in `scratch`: each
/// output sends the packet as the rewrites before it left it (and so does each
/// punt, a packet that came in on `from.in_port`). A recirculation runs the next
/// flow's actions where it stands (`again` finds it; without it, a packet-out's
/// actions, the packet is dropped there).
pub(super) fn run_rewriting(
    outputs: &mut Outputs,
    scratch: &mut PacketBuf,
    saved: &mut SavedCopies,
    (actions, headers): (&[DpAction], &[Arc<PushHeader>]),
    shared: &Shared,
    from: Origin,
    again: Option<&mut Recirculation<'_, '_>>,
) {
    saved.held = 0;
    let mut pass = Pass {
        recirculations: 0,
        outputs,
        scratch,
        saved,
        shared,
        again,
    };
    pass.run(actions, headers, from, 0, 0);
}

/// One packet's way through its flows' actions.
struct Pass<'a, 'b, 'c> {
    /// Recirculations the packet took so far: at most [`MAX_RECIRC_DEPTH`] in all,
    /// however they nest or follow each other (so a batch's tally never fills).
    recirculations: usize,
    outputs: &'a mut Outputs,
    scratch: &'a mut PacketBuf,
    saved: &'a mut SavedCopies,
    shared: &'a Shared,
    again: Option<&'a mut Recirculation<'b, 'c>>,
}

impl Pass<'_, '_, '_> {
    /// The flow of the packet's pass `depth + 1`, as it is now, with `recirc_id`
    /// `id`: counted as the pass's, or `None` (dropped and counted) past the depth
    /// limit, or when the batch's upcalls are spent.
    fn next_flow(
        &mut self,
        id: u32,
        from: Origin,
        dp_hash: u32,
        depth: usize,
        parsed: Option<FlowKey>,
    ) -> Option<Arc<DpFlow>> {
        let again = match self.again.as_deref_mut() {
            Some(a) if depth < MAX_RECIRC_DEPTH && self.recirculations < MAX_RECIRC_DEPTH => a,
            _ => {
                self.outputs.tally.lost += 1;
                return None;
            }
        };
        match parsed {
            Some(key) => *again.key = key,
            // The tag is in the frame by now (`PacketBuf::load` put it back).
            None => {
                if extract(self.scratch.data(), from.in_port, None, again.key).is_err() {
                    self.outputs.tally.lost += 1;
                    return None;
                }
            }
        }
        from.tunnel.write_into(again.key);
        from.ct.write_into(again.key);
        again.key.recirc_id = id;
        again.key.dp_hash = dp_hash;
        again.finder.counters.recirculations += 1;
        self.recirculations += 1;
        // Counted as it is now (a popped packet: its inner frame), as Open vSwitch
        // counts each pass.
        let Some(at) = again
            .finder
            .find(again.key, self.scratch.data(), again.tally)
        else {
            self.outputs.tally.lost += 1;
            return None;
        };
        Some(again.tally[at].0.clone())
    }

    /// Makes the super-frame in `scratch` into parts as `cut` says — split into
    /// smaller super-frames, or a tunnel super-frame cut into its outer packets —
    /// and runs `rest` (its tunnel push and what follows it) on each. A packet whose
    /// parts cannot be made is counted lost.
    fn push_parts(
        &mut self,
        rest: &[DpAction],
        headers: &[Arc<PushHeader>],
        from: Origin,
        cut: Push,
        (depth, recirc_id): (usize, u32),
    ) {
        let vnet = self.scratch.vnet;
        // Taken out while the parts run (parts within a part have none: lost).
        let mut parts = std::mem::take(&mut self.saved.split_parts);
        let mut ranges = std::mem::take(&mut self.saved.split_ranges);
        ranges.clear();
        let mut fits = true;
        let mut keep = |part: &[u8]| {
            let at = ranges.last().map_or(0, |(a, l)| a + l);
            match parts.get_mut(at..at + part.len()) {
                Some(out) if ranges.len() < ranges.capacity() => {
                    out.copy_from_slice(part);
                    ranges.push((at, part.len()));
                }
                _ => fits = false,
            }
        };
        let (made, part_vnet) = match cut {
            Push::Split(max_ip) => (
                gso::split_super_frame(
                    self.scratch.data(),
                    usize::from(vnet.gso_size),
                    max_ip,
                    &mut self.saved.split_build,
                    &mut keep,
                ),
                vnet,
            ),
            Push::Segment(mss) => (
                gso::segment_tcp(
                    self.scratch.data(),
                    mss,
                    &mut self.saved.split_build,
                    &mut keep,
                ),
                // Complete packets: nothing left to a device.
                VnetHdr::default(),
            ),
            Push::CutTunnel(t, mss) => (
                segment_udp_tunnel(
                    self.scratch.data(),
                    &t,
                    mss,
                    &mut self.saved.split_build,
                    &mut keep,
                ),
                // Complete outer packets: nothing left to a device.
                VnetHdr::default(),
            ),
            _ => (Err(gso::GsoError::Unsupported), vnet),
        };
        if made.is_ok() && fits {
            for &(at, len) in &ranges {
                if self
                    .scratch
                    .load(&parts[at..at + len], None, part_vnet)
                    .is_err()
                {
                    self.outputs.tally.lost += 1;
                    continue;
                }
                let held = self.saved.held;
                self.run(rest, headers, from, depth, recirc_id);
                self.saved.held = held;
            }
        } else {
            self.outputs.tally.lost += 1;
        }
        self.saved.split_parts = parts;
        self.saved.split_ranges = ranges;
    }

    /// Takes the outer headers off the packet (`TunnelPop`): where its next pass
    /// comes from, or `None` when decapsulation refused it (counted by reason).
    fn pop(&mut self, pop: crate::tunnel_pop::Pop) -> Option<Origin> {
        let crate::tunnel_pop::Pop {
            geneve,
            udp_port,
            receive,
            ..
        } = pop;
        let ports = vsw_packet::tunnel::TunnelPorts {
            vxlan: (!geneve).then_some(udp_port),
            geneve: geneve.then_some(udp_port),
        };
        let vnet = self.scratch.vnet;
        // The sender's device vouches for the outer checksum (one left to finish,
        // or one the kernel checked).
        let vouched = vnet.flags & (VNET_F_NEEDS_CSUM | vsw_packet::vnet::VNET_F_DATA_VALID) != 0;
        let data = self.scratch.data();
        // The options the Geneve ports' bridges name are known; any other critical
        // one is not.
        let known = |class: u16, kind: u8| pop.knows(class, kind);
        let (at, len, key, l3) = match vsw_packet::tunnel::decap(data, &ports, vouched, known) {
            Ok(d) => {
                let at = (d.inner.as_ptr() as usize).wrapping_sub(data.as_ptr() as usize);
                let metadata0 = pop.metadata0(d.options);
                let key = TunnelKey::of_decapsulated(&d.meta, metadata0);
                (at, d.inner.len(), key, d.l3)
            }
            Err(e) => {
                self.shared.decap_drops.count(&e);
                return None;
            }
        };
        let in_port = match l3 {
            None => {
                self.scratch.keep(at, len, vnet.of_inner(at));
                receive
            }
            // VXLAN-GPE's IP or NSH: behind a placeholder Ethernet header, on the
            // receive point that says so.
            Some(ethertype) => {
                let front = at.saturating_sub(vsw_packet::ethernet::ETH_HDR_LEN);
                let kept =
                    self.scratch
                        .keep_behind_ethernet(at, len, ethertype, vnet.of_inner(front));
                if kept.is_err() {
                    self.shared
                        .decap_drops
                        .count(&vsw_packet::tunnel::DecapError::Truncated("outer"));
                    return None;
                }
                crate::tunnel_pop::l3_point_of(receive)
            }
        };
        Some(Origin {
            in_port,
            tunnel: key,
            // Decapsulated: a packet no `Ct` has seen.
            ct: CtMeta::default(),
        })
    }

    /// The tracker's verdict on the packet as it is now, in `place`'s zone
    /// (committing its connection with `commit`; its NAT applied to the frame when
    /// `nat`). Also the packet's key as extracted, for the next pass to look up by,
    /// when the frame did not change since. A fragment is kept until its datagram
    /// is whole ([`Tracked::Held`]), and the one that completes it gives the
    /// datagram and its fragments back.
    fn track(
        &mut self,
        place: vsw_conntrack::ipf::FragPlace,
        commit: Option<&vsw_conntrack::Commit>,
        (nat, natted): (bool, bool),
    ) -> Tracked {
        let zone = place.zone;
        let mut k = FlowKey::default();
        let data = self.scratch.data();
        if extract(data, place.in_port, None, &mut k).is_err() {
            self.shared.conntrack.count_unreadable();
            return Tracked::Done(CtMeta::invalid(zone), None);
        }
        let now_ms = self.outputs.tally.now_ms;
        if k.nw_frag & vsw_packet::key::FRAG_ANY != 0 {
            use vsw_conntrack::ipf::Defrag;
            let v6 = k.dl_type == vsw_packet::EtherType::IPV6;
            let l3 = vsw_packet::ethernet::l3(data).map_or(0, |(_, at)| at);
            match self
                .shared
                .conntrack
                .ipf()
                .gather(data, l3, v6, place, now_ms)
            {
                Defrag::Whole => {}
                Defrag::Invalid => {
                    self.shared.conntrack.count_unreadable();
                    return Tracked::Done(CtMeta::invalid(zone), Some(k));
                }
                Defrag::Held => return Tracked::Held,
                Defrag::Complete(r) => return Tracked::Whole(r),
            }
        }
        let Some((p, payload)) = crate::ct::ct_packet(data, &k) else {
            self.shared.conntrack.count_unreadable();
            return Tracked::Done(CtMeta::invalid(zone), Some(k));
        };
        // On the clock every PMD and the sweeper share (a PMD's own microseconds
        // count from its start).
        let ct = vsw_conntrack::Ct {
            zone,
            commit,
            nat,
            natted,
            payload,
        };
        let out = self.shared.conntrack.track(&p, &ct, now_ms);
        let meta = CtMeta::of(&out);
        match out.rewrite {
            Some(r) => {
                crate::ct::apply_nat(self.scratch, &k, &r);
                if p.quoted.is_some() {
                    crate::ct::apply_nat_to_quote(self.scratch, &k, &r.of_quote());
                }
                Tracked::Done(meta, None)
            }
            None => Tracked::Done(meta, Some(k)),
        }
    }

    /// Tracks the datagram `r`'s fragments made whole, and sends each fragment on
    /// through `actions` from where `resume` says (what follows the `ct`, to the
    /// end of the copy it is in) with what the tracker said of the datagram and
    /// what its NAT wrote. Each fragment has the recirculations the packet that
    /// completed the datagram had left.
    fn send_fragments(
        &mut self,
        mut r: vsw_conntrack::ipf::Reassembled,
        (actions, headers, resume): (&[DpAction], &[Arc<PushHeader>], Resume),
        (place, tunnel): (vsw_conntrack::ipf::FragPlace, crate::port::TunnelKey),
        (commit, nat): (Option<&vsw_conntrack::Commit>, (bool, bool)),
        depth: usize,
    ) {
        let whole = VnetHdr::default();
        if self.scratch.load(&r.datagram, None, whole).is_err() {
            self.outputs.tally.lost += r.fragments.len() as u64;
            return;
        }
        let Tracked::Done(ct, key) = self.track(place, commit, nat) else {
            // Whole: never held or gathered again.
            self.outputs.tally.lost += r.fragments.len() as u64;
            return;
        };
        let rewritten = key.is_none();
        if rewritten {
            r.datagram.clear();
            r.datagram.extend_from_slice(self.scratch.data());
        }
        let fragments = std::mem::take(&mut r.fragments);
        let budget = self.recirculations;
        let from = Origin {
            in_port: place.in_port,
            tunnel,
            ct,
        };
        for mut f in fragments {
            if rewritten {
                r.carry_into(&mut f);
            }
            if self.scratch.load(&f.frame, None, whole).is_err() {
                self.outputs.tally.lost += 1;
                continue;
            }
            self.recirculations = budget;
            let held = self.saved.held;
            self.run_from(actions, headers, from, (depth, place.recirc_id), resume);
            self.saved.held = held;
        }
        self.recirculations = budget;
    }

    /// Runs `actions`, `depth` recirculations deep (the pass of `recirc_id`);
    /// returns early when the packet goes no further on this pass.
    fn run(
        &mut self,
        actions: &[DpAction],
        headers: &[Arc<PushHeader>],
        from: Origin,
        depth: usize,
        recirc_id: u32,
    ) {
        self.run_from(actions, headers, from, (depth, recirc_id), Resume::START);
    }

    /// [`Pass::run`] from where `resume` says (a datagram's fragments go on from
    /// the `ct` that gathered them).
    fn run_from(
        &mut self,
        actions: &[DpAction],
        headers: &[Arc<PushHeader>],
        from: Origin,
        (depth, recirc_id): (usize, u32),
        resume: Resume,
    ) {
        let Origin {
            in_port,
            mut tunnel,
            mut ct,
        } = from;
        // What `CtMark`/`CtLabel` staged for the next `Ct`'s commit.
        let mut staged = vsw_conntrack::Commit::default();
        // The packet's key as a `Hash` extracted it, while nothing changed the
        // packet since: the recirculation after it need not extract it again.
        let mut parsed: Option<FlowKey> = None;
        // The next action's place (a fallback skips to a copy's end), the open
        // `CheckPktLen` forks (where a longer packet's way of each ends, and where
        // the shorter one's, skipped, ends; innermost last), the `Hash`'s value.
        let Resume {
            mut at,
            mut forks,
            mut open_forks,
            mut dp_hash,
        } = resume;
        loop {
            // A fork left by a jump past it (a copy's end): gone.
            while open_forks > 0 && forks[open_forks - 1].0 < at {
                open_forks -= 1;
            }
            if open_forks > 0 && forks[open_forks - 1].0 == at {
                open_forks -= 1;
                at = forks[open_forks].1;
                continue;
            }
            let Some(action) = actions.get(at) else {
                break;
            };
            at += 1;
            if !matches!(
                action,
                DpAction::Output(_) | DpAction::Hash | DpAction::Recirc(_) | DpAction::Ct { .. }
            ) {
                parsed = None;
            }
            let result = match *action {
                DpAction::Output(port) => {
                    let meta = PacketMeta {
                        vnet: self.scratch.vnet,
                        vlan: None,
                        tunnel,
                    };
                    self.outputs.stage(port, self.scratch.data(), &meta);
                    Ok(())
                }
                DpAction::OutputTrunc { port, max_len } => {
                    let data = self.scratch.data();
                    let keep = data.len().min(max_len as usize);
                    // A cut frame is no longer what its offload state describes
                    // (a checksum or segments past its end): it goes as it is.
                    let vnet = if keep < data.len() {
                        vsw_packet::VnetHdr::default()
                    } else {
                        self.scratch.vnet
                    };
                    let meta = PacketMeta {
                        vnet,
                        vlan: None,
                        tunnel,
                    };
                    self.outputs.stage(port, &data[..keep], &meta);
                    Ok(())
                }
                DpAction::Truncate(n) => {
                    if self.scratch.data().len() > n as usize {
                        self.scratch
                            .keep(0, n as usize, vsw_packet::VnetHdr::default());
                    }
                    Ok(())
                }
                DpAction::SetDlSrc(m) => {
                    self.scratch.set_dl_src(m);
                    Ok(())
                }
                DpAction::SetDlDst(m) => {
                    self.scratch.set_dl_dst(m);
                    Ok(())
                }
                DpAction::PushVlan(tpid) => self.scratch.push_vlan(tpid),
                DpAction::SetVlanVid(vid) => self.scratch.set_vlan_vid(vid),
                DpAction::SetVlanPcp(pcp) => self.scratch.set_vlan_pcp(pcp),
                DpAction::PopVlan => {
                    self.scratch.strip_vlan();
                    Ok(())
                }
                DpAction::SetNwSrc(a) => {
                    self.scratch.set_nw_src(a.octets());
                    Ok(())
                }
                DpAction::SetNwDst(a) => {
                    self.scratch.set_nw_dst(a.octets());
                    Ok(())
                }
                DpAction::SetNwTos(t) => {
                    self.scratch.set_nw_tos(t);
                    Ok(())
                }
                DpAction::SetTpSrc(p) => {
                    self.scratch.set_tp_src(p);
                    Ok(())
                }
                DpAction::SetTpDst(p) => {
                    self.scratch.set_tp_dst(p);
                    Ok(())
                }
                DpAction::DecTtl => self.scratch.dec_ttl(),
                DpAction::PushMpls { ethertype, lse } => self.scratch.push_mpls(ethertype, lse),
                DpAction::PopMpls(ethertype) => {
                    self.scratch.pop_mpls(ethertype);
                    Ok(())
                }
                DpAction::PushPbb { ethertype, itag } => self.scratch.push_pbb(ethertype, itag),
                DpAction::PopPbb => {
                    self.scratch.pop_pbb();
                    Ok(())
                }
                DpAction::PushNsh(h) => self.scratch.push_nsh_base(&h),
                DpAction::PushMplsEthernet { ethertype, lse } => {
                    self.scratch.push_mpls_ethernet(ethertype, lse)
                }
                DpAction::PopMplsEthernet => self.scratch.pop_mpls_ethernet(),
                DpAction::PopNsh => self.scratch.pop_nsh_ethernet(),
                DpAction::SetMpls { lse, mask } => {
                    self.scratch.set_mpls(lse, mask);
                    Ok(())
                }
                DpAction::DecMplsTtl => self.scratch.dec_mpls_ttl(),
                DpAction::CheckPktLen { size, gt, le } => {
                    let (gt, le) = (gt as usize, le as usize);
                    if self.scratch.wire_len() > usize::from(size) {
                        if open_forks == forks.len() {
                            // Deeper than translation makes: not run.
                            self.outputs.tally.lost += 1;
                            return;
                        }
                        forks[open_forks] = (at + gt, at + gt + le);
                        open_forks += 1;
                    } else {
                        at += gt;
                    }
                    Ok(())
                }
                DpAction::SetField(w) => {
                    self.scratch.write_field(w);
                    Ok(())
                }
                DpAction::Controller(note) => {
                    self.shared.punts.punt(in_port, note, self.scratch.data());
                    Ok(())
                }
                DpAction::Meter(id) => {
                    match self.shared.meters.apply(id, self.scratch.data().len()) {
                        Verdict::Pass => Ok(()),
                        // Counted on the meter's band. Within a copy (a bucket,
                        // a metered packet-in) only the copy goes.
                        Verdict::Drop => {
                            let end = end_of_copy(actions, at);
                            if end == actions.len() {
                                return;
                            }
                            at = end;
                            Ok(())
                        }
                        Verdict::Remark(levels) => {
                            if let Some(tos) = self.scratch.nw_tos() {
                                self.scratch.set_nw_tos(remark_dscp(tos >> 2, levels) << 2);
                            }
                            Ok(())
                        }
                    }
                }
                DpAction::SetTunnel(id) => {
                    tunnel.id = id;
                    Ok(())
                }
                DpAction::SetTunnelDst(a) => {
                    tunnel.dst = a.into();
                    Ok(())
                }
                DpAction::SetTunnelMetadata(v) => {
                    tunnel.metadata0 = v;
                    Ok(())
                }
                DpAction::Save => self.saved.save(self.scratch, tunnel, ct),
                DpAction::Restore => self.saved.restore(self.scratch).map(|(t, c)| {
                    tunnel = t;
                    ct = c;
                }),
                DpAction::Hash => {
                    // Of the packet as the actions before left it (Open vSwitch
                    // extracts it again too); a frame that cannot be parsed hashes as 0.
                    let mut k = FlowKey::default();
                    if extract(self.scratch.data(), in_port, None, &mut k).is_ok() {
                        dp_hash = l4_hash(&k);
                        parsed = Some(k);
                    }
                    Ok(())
                }
                DpAction::TunnelPush(n) => {
                    let Some(header) = headers.get(n as usize) else {
                        self.outputs.tally.lost += 1;
                        return;
                    };
                    // A tunnel in a tunnel may have used the room in front: the
                    // frame moves back to make more, where the buffer has it.
                    self.scratch.make_headroom(header.template.overhead());
                    let (frame, vnet) = (self.scratch.data(), self.scratch.vnet);
                    let room = self.scratch.headroom();
                    let plan = self.outputs.tunnel_push_plan(header, frame, (&vnet, room));
                    match plan {
                        Push::Whole | Push::Shrink(_) => {
                            if let Push::Shrink(mss) = plan {
                                self.scratch.vnet.gso_size = mss as u16;
                            }
                            let inner_len = self.scratch.data().len();
                            let id = self.outputs.tunnel_ip_id;
                            self.outputs.tunnel_ip_id = id.wrapping_add(1);
                            // The outer packet came through no tunnel.
                            tunnel = TunnelKey::default();
                            let pushed = self.scratch.push_tunnel(&header.template, id);
                            if pushed.is_ok() {
                                self.outputs.count_tunnel_packet(header, inner_len);
                            }
                            pushed
                        }
                        Push::Split(_) | Push::CutTunnel(..) | Push::Segment(_) => {
                            // Each part runs the push and what follows it in this
                            // copy; then the copy is done.
                            let end = end_of_copy(actions, at);
                            let rest = &actions[at - 1..end];
                            let from = Origin {
                                in_port,
                                tunnel,
                                ct,
                            };
                            self.push_parts(rest, headers, from, plan, (depth, recirc_id));
                            at = end;
                            Ok(())
                        }
                        Push::AboveMtu => {
                            self.outputs.tunnel_mtu_drop(header);
                            at = end_of_copy(actions, at);
                            Ok(())
                        }
                        Push::ByQueue => {
                            let meta = PacketMeta {
                                vnet,
                                vlan: None,
                                tunnel,
                            };
                            self.outputs.stage_as_is(header.tunnel_port, frame, &meta);
                            // The underlay's actions were for the outer packet, which
                            // is not made (the tunnel port's queue drops the packet).
                            at = end_of_copy(actions, at);
                            Ok(())
                        }
                    }
                }
                // Several writes of one commit add up, each under its mask.
                DpAction::CtMark { value, mask } => {
                    let (v, m) = staged.mark.unwrap_or((0, 0));
                    staged.mark = Some(((v & !mask) | (value & mask), m | mask));
                    Ok(())
                }
                DpAction::CtLabel { high, value, mask } => {
                    let (v, m) = staged.label.unwrap_or((0, 0));
                    let shift = if high { 64 } else { 0 };
                    let (value, mask) = (u128::from(value) << shift, u128::from(mask) << shift);
                    staged.label = Some(((v & !mask) | (value & mask), m | mask));
                    Ok(())
                }
                DpAction::Ct {
                    zone,
                    commit,
                    nat,
                    force,
                    helper,
                } => {
                    staged.force = force;
                    staged.helper = vsw_conntrack::helper::Helper::of_port(helper);
                    let natted = ct.natted_in(zone);
                    let place = vsw_conntrack::ipf::FragPlace {
                        zone,
                        in_port,
                        recirc_id,
                    };
                    let commit = commit.then_some(&staged);
                    match self.track(place, commit, (nat, natted)) {
                        Tracked::Done(meta, key) => {
                            ct = meta;
                            parsed = key;
                        }
                        // Kept: it goes on with its datagram's last fragment. Within
                        // a copy (a clone, a bucket) only the copy waits.
                        Tracked::Held => {
                            let end = end_of_copy(actions, at);
                            if end == actions.len() {
                                return;
                            }
                            at = end;
                        }
                        // Each fragment goes on to the copy's end; then the packet
                        // as it was before the copy.
                        Tracked::Whole(r) => {
                            let end = end_of_copy(actions, at);
                            let resume = Resume {
                                at,
                                forks,
                                open_forks,
                                dp_hash,
                            };
                            self.send_fragments(
                                *r,
                                (&actions[..end], headers, resume),
                                (place, tunnel),
                                (commit, (nat, natted)),
                                depth,
                            );
                            if end == actions.len() {
                                return;
                            }
                            at = end;
                        }
                    }
                    staged = vsw_conntrack::Commit::default();
                    Ok(())
                }
                DpAction::CtNatAddr { max, addr } => {
                    let a = u128::from_be_bytes(addr);
                    let r = staged.nat.get_or_insert(vsw_conntrack::NatRange {
                        kind: vsw_conntrack::NatKind::Src,
                        addr_min: a,
                        addr_max: a,
                        ports: None,
                    });
                    if max {
                        r.addr_max = a;
                    } else {
                        r.addr_min = a;
                    }
                    Ok(())
                }
                DpAction::CtNatRange { src, ports } => {
                    if let Some(r) = staged.nat.as_mut() {
                        r.kind = if src {
                            vsw_conntrack::NatKind::Src
                        } else {
                            vsw_conntrack::NatKind::Dst
                        };
                        r.ports = ports;
                    }
                    Ok(())
                }
                DpAction::CtClear => {
                    ct = CtMeta::default();
                    Ok(())
                }
                DpAction::TunnelPop(p) => {
                    // Refused (counted): this copy goes no further, what follows
                    // the copy's end runs as it would.
                    if let Some(popped) = self.pop(p) {
                        if let Some(flow) = self.next_flow(0, popped, 0, depth, None) {
                            let held = self.saved.held;
                            self.run(&flow.actions, &flow.headers, popped, depth + 1, 0);
                            self.saved.held = held;
                        }
                    }
                    at = end_of_copy(actions, at);
                    Ok(())
                }
                DpAction::Recirc(id) => {
                    let from = Origin {
                        in_port,
                        tunnel,
                        ct,
                    };
                    let next = self.next_flow(id, from, dp_hash, depth, parsed.take());
                    if let Some(flow) = next {
                        // A pass that ends early (a meter's drop, a TTL run out)
                        // leaves the copies it kept: they are let go here, so the
                        // `Restore` after this puts back this pass's copy.
                        let held = self.saved.held;
                        self.run(&flow.actions, &flow.headers, from, depth + 1, id);
                        self.saved.held = held;
                    }
                    Ok(())
                }
            };
            match result {
                Ok(()) => {}
                // A packet whose TTL ran out goes no further (there is no controller to
                // tell); it is counted on the flow that matched it.
                Err(RewriteError::TtlExpired) => return,
                // Its flow said the frame carries what a decap takes off, and it
                // does not (cut short): dropped, counted on that flow.
                Err(RewriteError::NotDecapsulable) => return,
                Err(RewriteError::NoHeadroom | RewriteError::TooBig | RewriteError::Unsaved) => {
                    self.outputs.tally.lost += 1;
                    return;
                }
            }
        }
    }
}

/// Where the copy open at `actions[at]` ends: the `Restore` that closes the `Save`
/// last opened before it, or the end of the actions.
fn end_of_copy(actions: &[DpAction], at: usize) -> usize {
    let mut open = 0usize;
    for (i, a) in actions.iter().enumerate().skip(at) {
        match a {
            DpAction::Save => open += 1,
            DpAction::Restore if open == 0 => return i,
            DpAction::Restore => open -= 1,
            _ => {}
        }
    }
    actions.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A packet no push was made for skips the underlay's actions: up to
    /// the `Restore` that closes the copy the push opened (copies within it are
    /// stepped over), or to the end when the copy was trailing (and dropped).
    #[test]
    fn the_end_of_a_copy_is_its_own_restore() {
        use DpAction::{Output, Restore, Save, TunnelPush};
        let nested = [
            Save,
            TunnelPush(0),
            Save,
            Output(3),
            Restore,
            Output(4),
            Restore,
            Output(1),
        ];
        // Just after the push (index 1): the copy's Restore is at 6, not 4.
        assert_eq!(end_of_copy(&nested, 2), 6);
        let trailing = [Output(1), TunnelPush(0), Output(4)];
        assert_eq!(end_of_copy(&trailing, 2), 3);
    }
}
