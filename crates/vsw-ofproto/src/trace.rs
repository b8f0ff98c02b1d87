//! `vswctl trace`: a translation written out, as `ovs-appctl ofproto/trace` does —
//! each table visited with the rule that matched, the datapath actions, and the
//! megaflow the datapath would cache.

use std::fmt::Write;

use vsw_datapath::{format_dp_actions, DpAction};
use vsw_flow::syntax::format_match;
use vsw_flow::Match;
use vsw_packet::FlowKey;

use crate::xlate::{TraceStep, XlateError};

/// A translation as `trace` shows it.
#[derive(Clone, Debug)]
pub struct Trace {
    pub key: FlowKey,
    pub steps: Vec<TraceStep>,
    pub final_key: FlowKey,
    /// The registers, `pkt_mark` and `conj_id` where the pipeline ended.
    pub final_pipeline: vsw_flow::PipelineFields,
    pub megaflow: Match,
    pub actions: Vec<DpAction>,
    pub error: Option<XlateError>,
    /// The passes after this one, one per recirculation (`recirc(…)` in the
    /// actions), each as its own trace.
    pub recirculations: Vec<Trace>,
}

impl Trace {
    /// The trace of translation `x` of `key`.
    pub(crate) fn of(key: &FlowKey, x: crate::xlate::Xlated) -> Trace {
        Trace {
            key: *key,
            steps: x.steps,
            final_key: x.final_key,
            final_pipeline: x.final_pipeline,
            megaflow: Match::new(*key, x.mask),
            actions: x.actions,
            error: x.error,
            recirculations: Vec::new(),
        }
    }

    /// The text `vswctl trace` prints.
    pub fn render(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(o, "Flow: {}", format_match(&exact(&self.key)));
        let _ = writeln!(o);
        for s in &self.steps {
            let indent = "    ".repeat(s.depth.saturating_sub(1));
            let _ = writeln!(o, "{indent}{:>2}. {}", s.table, s.text);
        }
        let _ = writeln!(o);
        if self.final_key == self.key && self.final_pipeline.is_zero() {
            let _ = writeln!(o, "Final flow: unchanged");
        } else {
            let _ = writeln!(
                o,
                "Final flow: {}",
                format_match(&with_pipeline(exact(&self.final_key), &self.final_pipeline))
            );
        }
        let _ = writeln!(o, "Megaflow: {}", format_match(&self.megaflow));
        if let Some(e) = &self.error {
            let _ = writeln!(o, "Translation failed: {e}");
        }
        let _ = writeln!(o, "Datapath actions: {}", format_dp_actions(&self.actions));
        let rule = "=".repeat(79);
        for pass in &self.recirculations {
            let _ = writeln!(o, "\n{rule}");
            let _ = writeln!(
                o,
                "recirc(0x{:x}) - dp_hash 0x{:x}",
                pass.key.recirc_id, pass.key.dp_hash
            );
            let _ = writeln!(o, "{rule}");
            let _ = write!(o, "{}", pass.render());
        }
        o
    }
}

/// `m` with each non-zero word of the pipeline's fields matched exactly (the
/// registers a translation left show as `ovs-appctl ofproto/trace` shows them).
fn with_pipeline(m: Match, p: &vsw_flow::PipelineFields) -> Match {
    let (mut value, mut mask) = (*m.value(), *m.mask());
    value.pipeline = *p;
    let seen = |v: u32| if v == 0 { 0 } else { u32::MAX };
    for (m, v) in mask.pipeline.regs.iter_mut().zip(p.regs) {
        *m = seen(v);
    }
    mask.pipeline.pkt_mark = seen(p.pkt_mark);
    mask.pipeline.conj_id = seen(p.conj_id);
    Match::new(value, mask)
}

/// The key as a match showing each field it sets (and always the input port).
fn exact(key: &FlowKey) -> Match {
    fn ones<T: Default + PartialEq + Copy>(v: T, all: T) -> T {
        if v == T::default() {
            T::default()
        } else {
            all
        }
    }
    let k = key;
    let mac = |m: vsw_packet::MacAddr| ones(m, vsw_packet::MacAddr([0xff; 6]));
    let mask = FlowKey {
        nw_src: ones(k.nw_src, u128::MAX),
        nw_dst: ones(k.nw_dst, u128::MAX),
        nd_target: ones(k.nd_target, u128::MAX),
        metadata: ones(k.metadata, u64::MAX),
        tun_id: ones(k.tun_id, u64::MAX),
        tun_src: ones(k.tun_src, u32::MAX),
        tun_dst: ones(k.tun_dst, u32::MAX),
        tun_metadata0: ones(k.tun_metadata0, u32::MAX),
        tun_flags: ones(k.tun_flags, u16::MAX),
        ipv6_exthdr: ones(k.ipv6_exthdr, u16::MAX),
        in_port: u32::MAX,
        label: ones(k.label, u32::MAX),
        // Not fields a rule matches (a later pass's trace names them in its heading).
        recirc_id: 0,
        dp_hash: 0,
        dl_src: mac(k.dl_src),
        dl_dst: mac(k.dl_dst),
        arp_sha: mac(k.arp_sha),
        arp_tha: mac(k.arp_tha),
        vlan_tci: ones(k.vlan_tci, u16::MAX),
        inner_vlan_tci: ones(k.inner_vlan_tci, u16::MAX),
        dl_type: ones(k.dl_type, u16::MAX),
        tp_src: ones(k.tp_src, u16::MAX),
        tp_dst: ones(k.tp_dst, u16::MAX),
        tcp_flags: ones(k.tcp_flags, u16::MAX),
        nw_proto: ones(k.nw_proto, u8::MAX),
        nw_tos: ones(k.nw_tos, u8::MAX),
        nw_ttl: ones(k.nw_ttl, u8::MAX),
        nw_frag: ones(k.nw_frag, u8::MAX),
        ct_mark: ones(k.ct_mark, u32::MAX),
        ct_zone: ones(k.ct_zone, u16::MAX),
        ct_state: ones(k.ct_state, u8::MAX),
        ct_nw_proto: ones(k.ct_nw_proto, u8::MAX),
        ct_label: ones(k.ct_label, u128::MAX),
        ct_ipv6_src: ones(k.ct_ipv6_src, u128::MAX),
        ct_ipv6_dst: ones(k.ct_ipv6_dst, u128::MAX),
        ct_nw_src: ones(k.ct_nw_src, u32::MAX),
        ct_nw_dst: ones(k.ct_nw_dst, u32::MAX),
        ct_tp_src: ones(k.ct_tp_src, u16::MAX),
        ct_tp_dst: ones(k.ct_tp_dst, u16::MAX),
        ct_pad: 0,
    };
    Match::new(*key, mask)
}
