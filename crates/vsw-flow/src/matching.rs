use vsw_packet::{FlowKey, MacAddr};

/// A masked flow key: a packet matches when each of its key's fields, masked, equals
/// the stored (pre-masked) value. A zero mask is a wildcard.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Match {
    value: FlowKey,
    mask: FlowKey,
}

fn mac_and(a: MacAddr, b: MacAddr) -> MacAddr {
    MacAddr::from_u64(a.to_u64() & b.to_u64())
}

impl Match {
    /// Matches every packet.
    pub fn any() -> Match {
        Match::default()
    }

    pub fn new(value: FlowKey, mask: FlowKey) -> Match {
        Match {
            value: apply_mask(&value, &mask),
            mask,
        }
    }

    pub fn value(&self) -> &FlowKey {
        &self.value
    }

    pub fn mask(&self) -> &FlowKey {
        &self.mask
    }

    pub fn matches(&self, key: &FlowKey) -> bool {
        let (v, m) = (&self.value, &self.mask);
        key.in_port & m.in_port == v.in_port
            && key.dl_type & m.dl_type == v.dl_type
            && key.nw_proto & m.nw_proto == v.nw_proto
            && key.tp_dst & m.tp_dst == v.tp_dst
            && key.tp_src & m.tp_src == v.tp_src
            && key.nw_dst & m.nw_dst == v.nw_dst
            && key.nw_src & m.nw_src == v.nw_src
            && key.vlan_tci & m.vlan_tci == v.vlan_tci
            && key.dl_dst.to_u64() & m.dl_dst.to_u64() == v.dl_dst.to_u64()
            && key.dl_src.to_u64() & m.dl_src.to_u64() == v.dl_src.to_u64()
    }

    /// True when every packet this match accepts is also accepted by `self`: `self`
    /// constrains no field more than `other` does, and agrees where it constrains.
    pub fn covers(&self, other: &Match) -> bool {
        let (s, o) = (&self.mask, &other.mask);
        let subset = |sm: u128, om: u128| sm & om == sm;
        subset(s.in_port.into(), o.in_port.into())
            && subset(s.dl_type.into(), o.dl_type.into())
            && subset(s.nw_proto.into(), o.nw_proto.into())
            && subset(s.tp_src.into(), o.tp_src.into())
            && subset(s.tp_dst.into(), o.tp_dst.into())
            && subset(s.nw_src, o.nw_src)
            && subset(s.nw_dst, o.nw_dst)
            && subset(s.vlan_tci.into(), o.vlan_tci.into())
            && subset(s.dl_src.to_u64().into(), o.dl_src.to_u64().into())
            && subset(s.dl_dst.to_u64().into(), o.dl_dst.to_u64().into())
            && self.matches(&other.value)
    }
}

fn apply_mask(v: &FlowKey, m: &FlowKey) -> FlowKey {
    FlowKey {
        in_port: v.in_port & m.in_port,
        dl_src: mac_and(v.dl_src, m.dl_src),
        dl_dst: mac_and(v.dl_dst, m.dl_dst),
        vlan_tci: v.vlan_tci & m.vlan_tci,
        dl_type: v.dl_type & m.dl_type,
        nw_src: v.nw_src & m.nw_src,
        nw_dst: v.nw_dst & m.nw_dst,
        nw_proto: v.nw_proto & m.nw_proto,
        tp_src: v.tp_src & m.tp_src,
        tp_dst: v.tp_dst & m.tp_dst,
    }
}
