//! Open vSwitch's generic encapsulation in translation: `encap(nsh)`,
//! `encap(mpls)`, `encap(ethernet)`, `decap()`, and `dec_nsh_ttl`.
//!
//! Between an `encap(nsh|mpls)` and its `encap(ethernet)`, or between the two
//! `decap()`s, the packet is NSH or MPLS without an Ethernet header (Open
//! vSwitch's packet types (1,0x894f), (1,0x8847)); after one `decap()` of
//! Ethernet, or from a packet-type-aware VXLAN-GPE port, any type (1,T). vsw's
//! datapath frames are always Ethernet: as Open vSwitch commits its pending encap
//! and decap lazily, translation keeps the new header in the key (its set-fields
//! and TTLs too) and pushes Ethernet and that header in one action at
//! `encap(ethernet)` (or where a port is named), and pops both at the second
//! `decap()`; until then the frame keeps an Ethernet header that is not the
//! packet's. Such a packet leaves only by a tunnel port that carries it, whose push
//! takes that header off; an Ethernet port skips it, as Open vSwitch's does.

use vsw_datapath::DpAction;
use vsw_flow::{packet_type, Action, Encap};
use vsw_packet::key::{NSH_NP_SHIFT, NSH_TTL_SHIFT};
use vsw_packet::rewrite::{is_mpls, FieldWrite, NshField};
use vsw_packet::wire::mpls;
use vsw_packet::wire::nsh::{Nsh, NshBase, DEFAULT_TTL, MD_TYPE1, NP_ETHERNET};
use vsw_packet::{EtherType, FlowKey, MacAddr};

use super::{Ctx, Popped};

/// Where an NSH field's write sorts among its kind in an action set.
pub(super) fn field_index(f: NshField) -> u8 {
    match f {
        NshField::Flags => 0,
        NshField::Ttl => 1,
        NshField::Spi => 2,
        NshField::Si => 3,
        NshField::Context(i) => 4 + i.min(3),
        NshField::Md2Word(_) => 8,
    }
}

/// The key as the packet is after the write of `v` to `f`.
pub(super) fn write_key(k: &mut FlowKey, f: NshField, v: u32) {
    let mut h = k.nsh();
    match f {
        NshField::Flags => h.flags = v as u8,
        NshField::Ttl => h.ttl = v as u8 & 0x3f,
        NshField::Spi => h.path = (v << 8) | (h.path & 0xff),
        NshField::Si => h.path = (h.path & !0xff) | (v & 0xff),
        NshField::Context(i) if h.md_type == MD_TYPE1 => h.context[usize::from(i.min(3))] = v,
        NshField::Context(_) | NshField::Md2Word(_) => {}
    }
    k.set_nsh(&h);
}

/// Whether `a` rewrites one of the packet's headers (the actions `rewrite`
/// turns into datapath rewrites, the tunnel's metadata aside).
fn rewrites_a_header(a: &Action) -> bool {
    rewrites_link_layer(a)
        || matches!(
            a,
            Action::SetNwSrc(_)
                | Action::SetNwDst(_)
                | Action::SetNwTos(_)
                | Action::SetTpSrc(_)
                | Action::SetTpDst(_)
                | Action::DecTtl
                | Action::DecTtlIds(_)
                | Action::SetField(_)
        )
}

/// Whether `a` sends the packet out of the bridge as it is (which a packet
/// without an Ethernet header may not be).
pub(super) fn sends(a: &Action) -> bool {
    matches!(
        a,
        Action::Output(_)
            | Action::InPort
            | Action::OutputTrunc { .. }
            | Action::OutputReg { .. }
            | Action::Flood
            | Action::Normal
            | Action::Group(_)
            | Action::Controller { .. }
    )
}

/// The actions of [`sends`] that name ports, each of which says whether it
/// carries a packet without Ethernet (an L3 or packet-type-aware tunnel port
/// does; an Ethernet port skips it).
fn names_ports(a: &Action) -> bool {
    matches!(
        a,
        Action::Output(_)
            | Action::InPort
            | Action::OutputTrunc { .. }
            | Action::OutputReg { .. }
            | Action::Flood
            | Action::Group(_)
    )
}

/// Whether `a`, an action that changes an Ethernet frame's link layer (addresses,
/// tags, labels), has no header to change on a packet without Ethernet.
fn rewrites_link_layer(a: &Action) -> bool {
    matches!(
        a,
        Action::SetDlSrc(_)
            | Action::SetDlDst(_)
            | Action::PushVlan(_)
            | Action::SetVlanVid(_)
            | Action::SetVlanPcp(_)
            | Action::StripVlan
            | Action::PushMpls(_)
            | Action::PopMpls(_)
            | Action::PushPbb(_)
            | Action::PopPbb
            | Action::SetMplsLabel(_)
            | Action::SetMplsTc(_)
            | Action::SetMplsTtl(_)
            | Action::DecMplsTtl
    )
}

/// The bits of the key's `nw_dst` an NSH base field takes.
fn base_bits(shift: u32) -> u128 {
    0xff << shift
}

impl Ctx<'_, '_> {
    /// Whether `a` sends a packet without Ethernet to ports that each decide (a
    /// tunnel port that carries it takes it, pushing a pending `encap` first; an
    /// Ethernet port skips it).
    pub(super) fn sends_to_ports(&self, a: &Action) -> bool {
        self.popped.bare() && names_ports(a)
    }

    /// Fails the translation (the packet is dropped and counted; nothing after
    /// runs): `why` in the trace, the error's words in the log.
    fn refused(&mut self, table: u8, why: String) {
        self.step(table, format!("{why}: dropped"));
        self.out.error = Some(super::XlateError::Nsh(
            "an encap, decap or rewrite of a packet vsw does not carry (the trace says which)",
        ));
        self.exiting = true;
    }

    /// A rewrite `a` while the packet has no Ethernet header: the new header's
    /// own writes (NSH's fields, MPLS's entry and TTL) change the key, which the
    /// pending push will carry (after `encap`), or the header behind the
    /// Ethernet header the frame keeps (after one `decap()`); any other rewrite
    /// of the packet has no header to act on and is refused. The tunnel's
    /// metadata is not the packet's and is set as ever. True when `a` was dealt
    /// with here.
    pub(super) fn bare_rewrite(&mut self, a: &Action, table: u8) -> bool {
        if !self.popped.bare() || !rewrites_a_header(a) {
            return false;
        }
        // An IP packet without Ethernet (an L3 tunnel port's, or after a decap()
        // of Ethernet) is behind the datapath's placeholder header: its IP and
        // transport fields are rewritten there as ever.
        let ip = self.popped == Popped::EthernetDecapped
            && matches!(self.key.dl_type, EtherType::IPV4 | EtherType::IPV6);
        let own = matches!(
            a,
            Action::SetMplsLabel(_)
                | Action::SetMplsTc(_)
                | Action::SetMplsTtl(_)
                | Action::DecMplsTtl
                | Action::SetField(FieldWrite::Nsh(..))
        ) || (ip && !rewrites_link_layer(a));
        if !own {
            self.refused(
                table,
                format!(
                    "{a} after {}: the packet has no Ethernet header, and not the \
                     header {a} changes",
                    self.popped.action()
                ),
            );
            return true;
        }
        if matches!(a, Action::DecMplsTtl)
            && is_mpls(self.key.dl_type)
            && mpls::ttl(self.key.label) <= 1
        {
            self.refused(table, "dec_mpls_ttl: the label's TTL ran out".into());
            return true;
        }
        let dp = self.rewrite(a);
        if let (Some(dp), Popped::EthernetDecapped) = (dp, self.popped) {
            self.emit(dp);
        }
        true
    }

    /// Pushes what a pending `encap(nsh|mpls)` keeps in the key, behind an
    /// Ethernet header of zero addresses, in one datapath action (and NSH's
    /// context words after it): at `encap(ethernet)`, or where the packet
    /// leaves by a port that carries it without Ethernet (the tunnel's push
    /// takes that header off again).
    fn push_pending(&mut self) {
        if is_mpls(self.key.dl_type) {
            let (ethertype, lse) = (self.key.dl_type, self.key.label);
            self.emit(DpAction::PushMplsEthernet { ethertype, lse });
            return;
        }
        let h = self.key.nsh();
        // Cloned, not taken: each way of a fork, and the packet after a
        // clone, push them too (every encap(nsh) sets them anew).
        let tlvs = self.pending_tlvs.clone().filter(|_| h.md_type != MD_TYPE1);
        let tlvs = tlvs.as_deref().unwrap_or_default();
        let tlvs = &tlvs[..tlvs.len().min(vsw_packet::wire::nsh::MAX_CONTEXT)];
        self.emit(DpAction::PushNsh(NshBase {
            context_len: tlvs.len() as u8,
            ..h.base()
        }));
        // The context that is not 0: MD type 1's words, or MD type 2's
        // TLVs, word by word.
        let words: Vec<(NshField, u32)> = if h.md_type == MD_TYPE1 {
            (0..4)
                .map(|i| (NshField::Context(i as u8), h.context[i]))
                .collect()
        } else {
            tlvs.chunks_exact(4)
                .enumerate()
                .map(|(i, w)| {
                    let w = u32::from_be_bytes([w[0], w[1], w[2], w[3]]);
                    (NshField::Md2Word(i as u8), w)
                })
                .collect()
        };
        for (field, w) in words.into_iter().filter(|(_, w)| *w != 0) {
            self.emit(DpAction::SetField(FieldWrite::Nsh(field, w)));
        }
    }

    /// Where a packet whose `encap` is pending leaves by a tunnel port: the new
    /// header goes into the frame now, behind a placeholder Ethernet header, as
    /// after a `decap()` of Ethernet (the tunnel's push takes the placeholder off;
    /// what follows sees the packet so).
    pub(super) fn push_pending_now(&mut self) {
        if self.popped == Popped::EncapPending {
            self.push_pending();
            (self.key.dl_src, self.key.dl_dst) = (MacAddr::ZERO, MacAddr::ZERO);
            self.popped = Popped::EthernetDecapped;
        }
    }

    pub(super) fn encap(&mut self, e: &Encap, table: u8) {
        match (e, self.popped) {
            (Encap::Nsh { md_type, tlvs }, Popped::Nothing) => {
                let md_type = md_type.unwrap_or(MD_TYPE1);
                // MD type 2's TLVs go into the push; MD type 1 has no room for
                // them (Open vSwitch leaves them out too).
                self.pending_tlvs = tlvs.clone().filter(|_| md_type != MD_TYPE1);
                // Whatever the frame was, it is behind the header now: the key
                // holds the header's defaults (Open vSwitch's) and the pipeline's
                // and tunnel's fields, nothing of the frame.
                let k = &mut self.key;
                k.packet = FlowKey {
                    dl_type: EtherType::NSH,
                    ..super::metadata_only(k)
                };
                k.set_nsh(&Nsh {
                    flags: 0,
                    ttl: DEFAULT_TTL,
                    md_type,
                    next_proto: NP_ETHERNET,
                    path: 0xff,
                    context: [0; 4],
                });
                self.key.pipeline.packet_type = packet_type::of_ethertype(self.key.dl_type);
                self.popped = Popped::EncapPending;
            }
            (Encap::Mpls { ethertype }, Popped::Nothing) => {
                // As Open vSwitch 3.1's (traced): label 2 (IPv6 explicit null)
                // over IPv6, else 0; TC 0, TTL 64 whatever the IP header says
                // (unlike push_mpls); bottom of the stack.
                self.mask.dl_type = u16::MAX;
                let label = if self.key.dl_type == EtherType::IPV6 {
                    mpls::IPV6_EXPLICIT_NULL
                } else {
                    mpls::IPV4_EXPLICIT_NULL
                };
                let k = &mut self.key;
                k.packet = FlowKey {
                    dl_type: *ethertype,
                    label: mpls::entry(label, 0, true, 64),
                    ..super::metadata_only(k)
                };
                self.key.pipeline.packet_type = packet_type::of_ethertype(*ethertype);
                self.popped = Popped::EncapPending;
            }
            (Encap::Nsh { .. } | Encap::Mpls { .. }, p) => self.refused(
                table,
                format!(
                    "{} after {}: a header in front of a packet that is not Ethernet (or \
                     a second one before encap(ethernet)) is not built",
                    Action::Encap(e.clone()),
                    p.action()
                ),
            ),
            (Encap::Ethernet, Popped::EncapPending) => {
                self.push_pending();
                (self.key.dl_src, self.key.dl_dst) = (MacAddr::ZERO, MacAddr::ZERO);
                self.key.pipeline.packet_type = packet_type::ETHERNET;
                self.popped = Popped::Nothing;
            }
            (Encap::Ethernet, Popped::EthernetDecapped) => {
                // The frame still has the Ethernet header decap() left on it: a
                // new one is that one with Open vSwitch's zero addresses.
                (self.key.dl_src, self.key.dl_dst) = (MacAddr::ZERO, MacAddr::ZERO);
                self.emit(DpAction::SetDlSrc(MacAddr::ZERO));
                self.emit(DpAction::SetDlDst(MacAddr::ZERO));
                self.key.pipeline.packet_type = packet_type::ETHERNET;
                self.popped = Popped::Nothing;
            }
            (Encap::Ethernet, _) => self.refused(
                table,
                "encap(ethernet) of a packet that has an Ethernet header".into(),
            ),
        }
    }

    pub(super) fn decap(&mut self, packet_type: Option<(u16, u16)>, table: u8) {
        match self.popped {
            Popped::Nothing => {
                // The packet is of type (1,dl_type) now: its type is the flow's.
                self.mask.dl_type = u16::MAX;
                self.mask.vlan_tci |= super::VLAN_CFI;
                if self.key.vlan_tci & super::VLAN_CFI != 0 {
                    return self.refused(
                        table,
                        "decap() of an Ethernet header with a VLAN tag".into(),
                    );
                }
                (self.key.dl_src, self.key.dl_dst) = (MacAddr::ZERO, MacAddr::ZERO);
                self.key.pipeline.packet_type = packet_type::of_ethertype(self.key.dl_type);
                self.popped = Popped::EthernetDecapped;
            }
            Popped::EthernetDecapped if is_mpls(self.key.dl_type) => {
                // The label must carry an Ethernet frame: so the decap says, and
                // so the bottom-of-stack bit (a label stack would be popped whole
                // by Open vSwitch; vsw pops one entry).
                self.mask.label |= mpls::BOS_MASK;
                if packet_type != Some((0, 0)) {
                    return self.refused(
                        table,
                        format!(
                            "{} of MPLS: only decap(packet_type(ns=0,type=0)), an Ethernet \
                             frame behind the label, is built",
                            Action::Decap(packet_type)
                        ),
                    );
                }
                if self.key.label & mpls::BOS_MASK == 0 {
                    return self.refused(
                        table,
                        "decap() of a label that is not the bottom of its stack".into(),
                    );
                }
                self.emit(DpAction::PopMplsEthernet);
                self.key.packet = super::metadata_only(&self.key);
                self.key.pipeline.packet_type = packet_type::ETHERNET;
                self.popped = Popped::Decapped;
            }
            Popped::EthernetDecapped if self.key.dl_type != EtherType::NSH => {
                let t = self.key.dl_type;
                self.refused(
                    table,
                    format!(
                        "decap() of a packet of type (1,0x{t:04x}): only NSH's and MPLS's \
                         headers come off a packet without Ethernet"
                    ),
                )
            }
            Popped::EthernetDecapped => {
                self.mask.nw_dst |= base_bits(NSH_NP_SHIFT);
                let np = self.key.nsh().next_proto;
                if np != NP_ETHERNET {
                    return self.refused(
                        table,
                        format!(
                            "decap() of NSH carrying next protocol {np}: vsw's bridges carry \
                             Ethernet frames only"
                        ),
                    );
                }
                self.emit(DpAction::PopNsh);
                // What the header carried is new to the key: a recirculation
                // shows it to whatever looks next.
                self.key.packet = super::metadata_only(&self.key);
                self.key.pipeline.packet_type = packet_type::ETHERNET;
                self.popped = Popped::Decapped;
            }
            p => self.refused(table, format!("decap() after {} is not built", p.action())),
        }
    }

    pub(super) fn dec_nsh_ttl(&mut self, table: u8) {
        self.mask.dl_type = u16::MAX;
        if self.key.dl_type != EtherType::NSH {
            return;
        }
        self.mask.nw_dst |= base_bits(NSH_TTL_SHIFT);
        let ttl = self.key.nsh().ttl;
        if ttl <= 1 {
            // Open vSwitch sends it to the controllers (invalid_ttl) and stops
            // this action list; vsw has no such reason yet: the list stops, the
            // lists around it go on.
            self.step(
                table,
                format!("dec_nsh_ttl: TTL {ttl} ran out: this list stops"),
            );
            self.stop_list = true;
            return;
        }
        let w = FieldWrite::Nsh(NshField::Ttl, u32::from(ttl - 1));
        super::write_key(&mut self.key, w);
        if self.popped != Popped::EncapPending {
            self.emit(DpAction::SetField(w));
        }
    }
}
