//! `bundle(…)` and `bundle_load(…)` (Open vSwitch's NXAST_BUNDLE and
//! NXAST_BUNDLE_LOAD): one port out of a list of members, live ones only — the
//! first (`active_backup`) or the one a hash of the packet's fields ranks highest
//! (`hrw`) — sent to, or its number loaded into a field. What it says is here (read,
//! printed, the fields it hashes); choosing is translation's, which knows which
//! ports are live.

use std::fmt;

use crate::error::{FlowSyntaxError, PortResolver};
use crate::match_key::MatchKey;
use crate::subfield::Subfield;
use crate::values::{bad, parse_port, parse_uint};

/// Which of the packet's fields a hash is taken over (Open vSwitch's
/// `NX_HASH_FIELDS_*`, in their wire numbers).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HashFields {
    EthSrc = 0,
    /// Ethernet addresses, type and VLAN, IP addresses and protocol, TCP/UDP/SCTP
    /// ports; each pair the same either way round.
    SymmetricL4 = 1,
    /// IP addresses and protocol, TCP and SCTP ports, either way round.
    SymmetricL3L4 = 2,
    /// The same, UDP's ports too.
    SymmetricL3L4Udp = 3,
    NwSrc = 4,
    NwDst = 5,
    /// IP addresses, either way round.
    SymmetricL3 = 6,
}

const FIELD_NAMES: &[(HashFields, &str)] = &[
    (HashFields::EthSrc, "eth_src"),
    (HashFields::SymmetricL4, "symmetric_l4"),
    (HashFields::SymmetricL3L4, "symmetric_l3l4"),
    (HashFields::SymmetricL3L4Udp, "symmetric_l3l4+udp"),
    (HashFields::NwSrc, "nw_src"),
    (HashFields::NwDst, "nw_dst"),
    (HashFields::SymmetricL3, "symmetric_l3"),
];

impl HashFields {
    /// By its name in `ovs-ofctl`'s syntax.
    pub fn by_name(name: &str) -> Option<HashFields> {
        FIELD_NAMES
            .iter()
            .find(|(_, n)| n.eq_ignore_ascii_case(name))
            .map(|(f, _)| *f)
    }

    pub fn from_wire(n: u16) -> Option<HashFields> {
        FIELD_NAMES.iter().map(|(f, _)| *f).find(|f| *f as u16 == n)
    }

    pub(crate) fn name(self) -> &'static str {
        FIELD_NAMES
            .iter()
            .find(|(f, _)| *f == self)
            .map_or("eth_src", |(_, n)| n)
    }

    /// The hash of `key`'s fields with `basis`; every bit read is set in `mask`.
    pub fn hash(self, key: &MatchKey, basis: u16, mask: &mut MatchKey) -> u64 {
        use vsw_packet::key::{IPPROTO_SCTP, IPPROTO_TCP, IPPROTO_UDP};
        const VLAN_VID_MASK: u16 = 0x0fff;
        use vsw_packet::EtherType;
        let mut h = Mixer::new(basis);
        let mac =
            |m: vsw_packet::MacAddr| m.0.iter().fold(0u64, |acc, b| (acc << 8) | u64::from(*b));
        let ip = matches!(key.dl_type, EtherType::IPV4 | EtherType::IPV6);
        // A fragment's ports are not its datagram's (later ones have none): every
        // fragment goes the same way.
        let fragment = ip && key.nw_frag != 0;
        let l3 = |h: &mut Mixer, mask: &mut MatchKey| {
            mask.dl_type = u16::MAX;
            if ip {
                mask.nw_src = u128::MAX;
                mask.nw_dst = u128::MAX;
                h.add128(key.nw_src ^ key.nw_dst);
            }
        };
        let l4 = |h: &mut Mixer, mask: &mut MatchKey, udp: bool| {
            if !ip {
                return;
            }
            mask.nw_proto = u8::MAX;
            mask.nw_frag = u8::MAX;
            h.add(u64::from(key.nw_proto));
            let ports = matches!(key.nw_proto, IPPROTO_TCP | IPPROTO_SCTP)
                || (udp && key.nw_proto == IPPROTO_UDP);
            if ports && !fragment {
                mask.tp_src = u16::MAX;
                mask.tp_dst = u16::MAX;
                h.add(u64::from(key.tp_src ^ key.tp_dst));
            }
        };
        match self {
            HashFields::EthSrc => {
                mask.dl_src = vsw_packet::MacAddr::BROADCAST;
                h.add(mac(key.dl_src));
            }
            HashFields::SymmetricL4 => {
                mask.dl_src = vsw_packet::MacAddr::BROADCAST;
                mask.dl_dst = vsw_packet::MacAddr::BROADCAST;
                mask.vlan_tci |= VLAN_VID_MASK;
                h.add(mac(key.dl_src) ^ mac(key.dl_dst));
                h.add(u64::from(key.dl_type));
                h.add(u64::from(key.vlan_tci & VLAN_VID_MASK));
                l3(&mut h, mask);
                // UDP's ports are not hashed here, as in Open vSwitch.
                l4(&mut h, mask, false);
            }
            HashFields::SymmetricL3L4 | HashFields::SymmetricL3L4Udp => {
                l3(&mut h, mask);
                l4(&mut h, mask, self == HashFields::SymmetricL3L4Udp);
            }
            HashFields::NwSrc => {
                mask.dl_type = u16::MAX;
                if ip {
                    mask.nw_src = u128::MAX;
                    h.add128(key.nw_src);
                }
            }
            HashFields::NwDst => {
                mask.dl_type = u16::MAX;
                if ip {
                    mask.nw_dst = u128::MAX;
                    h.add128(key.nw_dst);
                }
            }
            HashFields::SymmetricL3 => l3(&mut h, mask),
        }
        h.finish()
    }
}

/// A small multiply-rotate hash (translation's only: its values are never seen
/// outside one choice).
pub(crate) struct Mixer(u64);

impl Mixer {
    fn new(basis: u16) -> Mixer {
        Mixer(0x9e37_79b9_7f4a_7c15 ^ u64::from(basis))
    }

    fn add(&mut self, v: u64) {
        self.0 = (self.0 ^ v)
            .wrapping_mul(0xff51_afd7_ed55_8ccd)
            .rotate_left(31);
    }

    fn add128(&mut self, v: u128) {
        self.add(v as u64);
        self.add((v >> 64) as u64);
    }

    fn finish(&self) -> u64 {
        let mut x = self.0;
        x ^= x >> 33;
        x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        x ^ (x >> 33)
    }

    /// Member `i`'s weight for a flow of hash `flow` (highest random weight).
    pub(crate) fn member(flow: u64, i: usize) -> u64 {
        let mut m = Mixer(flow);
        m.add(i as u64);
        m.finish()
    }
}

/// How a bundle chooses (`NX_BD_ALG_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BundleAlgorithm {
    ActiveBackup = 0,
    Hrw = 1,
}

/// One `bundle(…)` or `bundle_load(…)`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MemberBundle {
    pub fields: HashFields,
    pub basis: u16,
    pub algorithm: BundleAlgorithm,
    /// `bundle_load`'s destination (at least 16 bits); `None`: `bundle`, an output.
    pub dst: Option<Subfield>,
    /// OpenFlow port numbers, in order.
    pub members: Vec<u32>,
}

/// OpenFlow 1.0's "no port": what a bundle with no live member chooses.
pub const OFPP_NONE: u32 = 0xffff;

/// At most as many members as Open vSwitch takes.
pub const MAX_MEMBERS: usize = 2048;

impl MemberBundle {
    /// Reads `bundle`'s argument (`FIELDS,BASIS,ALGORITHM,ofport,members:P,…`) or,
    /// with `load`, `bundle_load`'s (`…,ofport,DST[…],members:P,…`).
    pub fn parse(
        text: &str,
        load: bool,
        ports: &dyn PortResolver,
    ) -> Result<MemberBundle, FlowSyntaxError> {
        let name = if load { "bundle_load" } else { "bundle" };
        let (head, members) = text
            .split_once("members:")
            .or_else(|| text.split_once("slaves:"))
            .ok_or_else(|| bad(name, text, "the members come last: members:P,P…"))?;
        let args: Vec<&str> = head
            .split([',', ' '])
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .collect();
        let want = if load { 5 } else { 4 };
        if args.len() != want {
            return Err(bad(
                name,
                text,
                if load {
                    "written bundle_load(FIELDS,BASIS,ALGORITHM,ofport,DST,members:…)"
                } else {
                    "written bundle(FIELDS,BASIS,ALGORITHM,ofport,members:…)"
                },
            ));
        }
        let fields = FIELD_NAMES
            .iter()
            .find(|(_, n)| n.eq_ignore_ascii_case(args[0]))
            .map(|(f, _)| *f)
            .ok_or_else(|| bad(name, args[0], "unknown fields"))?;
        let basis = parse_uint(name, args[1], 0xffff)? as u16;
        let algorithm = match args[2] {
            a if a.eq_ignore_ascii_case("active_backup") => BundleAlgorithm::ActiveBackup,
            a if a.eq_ignore_ascii_case("hrw") => BundleAlgorithm::Hrw,
            a => return Err(bad(name, a, "the algorithm is active_backup or hrw")),
        };
        if !args[3].eq_ignore_ascii_case("ofport") {
            return Err(bad(name, args[3], "the member type is ofport"));
        }
        let dst = if load {
            let d = Subfield::parse(name, args[4])?;
            if !(16..=64).contains(&d.n_bits) || !d.field.is_writable() {
                return Err(bad(name, args[4], "a writable field of 16 to 64 bits"));
            }
            Some(d)
        } else {
            None
        };
        let members = members
            .split([',', ' ', '[', ']'])
            .map(str::trim)
            .filter(|m| !m.is_empty())
            .map(|m| match parse_port(name, m, ports)? {
                // A port of the bridge, or a reserved port Open vSwitch takes as
                // a member (IN_PORT, TABLE, NORMAL, FLOOD, ALL, LOCAL, NONE).
                p if p < 0xff00 || (0xffff_fff8..=0xffff_fffc).contains(&p) => Ok(p),
                p if p == crate::LOCAL_PORT || p == 0xffff_ffff => Ok(p),
                _ => Err(bad(name, m, "a member is a port of the bridge")),
            })
            .collect::<Result<Vec<u32>, _>>()?;
        if members.len() > MAX_MEMBERS {
            return Err(bad(name, text, format!("at most {MAX_MEMBERS} members")));
        }
        Ok(MemberBundle {
            fields,
            basis,
            algorithm,
            dst,
            members,
        })
    }

    /// The member it chooses for a packet of `key` (`OFPP_NONE` when none is live),
    /// marking in `mask` what the choice read.
    pub fn choose(&self, key: &MatchKey, mask: &mut MatchKey, live: &dyn Fn(u32) -> bool) -> u32 {
        match self.algorithm {
            BundleAlgorithm::ActiveBackup => self
                .members
                .iter()
                .copied()
                .find(|p| live(*p))
                .unwrap_or(OFPP_NONE),
            BundleAlgorithm::Hrw => {
                // One member: no choice, nothing read (as Open vSwitch).
                let flow = if self.members.len() > 1 {
                    self.fields.hash(key, self.basis, mask)
                } else {
                    0
                };
                self.members
                    .iter()
                    .enumerate()
                    .filter(|(_, p)| live(**p))
                    .max_by_key(|(i, _)| (Mixer::member(flow, *i), std::cmp::Reverse(*i)))
                    .map_or(OFPP_NONE, |(_, p)| *p)
            }
        }
    }
}

/// As `ovs-ofctl` prints it.
impl fmt::Display for MemberBundle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let algorithm = match self.algorithm {
            BundleAlgorithm::ActiveBackup => "active_backup",
            BundleAlgorithm::Hrw => "hrw",
        };
        let name = if self.dst.is_some() {
            "bundle_load"
        } else {
            "bundle"
        };
        write!(
            f,
            "{name}({},{},{algorithm},ofport,",
            self.fields.name(),
            self.basis
        )?;
        if let Some(d) = self.dst {
            write!(f, "{},", d.format())?;
        }
        f.write_str("members:")?;
        for (i, m) in self.members.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{m}")?;
        }
        f.write_str(")")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vsw_packet::FlowKey;

    fn none(_: &str) -> Option<u32> {
        None
    }

    #[test]
    fn bundles_print_as_open_vswitch_prints_them() {
        for (text, load) in [
            ("eth_src,0,active_backup,ofport,members:1,2", false),
            ("symmetric_l4,60,hrw,ofport,members:2,3,4", false),
            (
                "symmetric_l3l4+udp,0,hrw,ofport,NXM_NX_REG0[],members:1,2",
                true,
            ),
        ] {
            let b = MemberBundle::parse(text, load, &none).unwrap();
            let name = if load { "bundle_load" } else { "bundle" };
            assert_eq!(b.to_string(), format!("{name}({text})"));
        }
        for (bad, load) in [
            ("eth_src,0,active_backup,ofport", false),
            ("nope,0,hrw,ofport,members:1", false),
            ("eth_src,0,round_robin,ofport,members:1", false),
            ("eth_src,0,hrw,port,members:1", false),
            ("eth_src,0,hrw,ofport,NXM_NX_REG0[0..7],members:1", true),
        ] {
            assert!(MemberBundle::parse(bad, load, &none).is_err(), "{bad}");
        }
    }

    #[test]
    fn symmetric_hashes_skip_udp_and_fragments_ports_as_open_vswitch_does() {
        let key = |proto: u8, frag: u8, sport: u16| {
            MatchKey::from(FlowKey {
                dl_type: 0x0800,
                nw_proto: proto,
                nw_frag: frag,
                tp_src: sport,
                ..FlowKey::default()
            })
        };
        let hash = |f: HashFields, k: &MatchKey| f.hash(k, 0, &mut MatchKey::default());
        let l4 = HashFields::SymmetricL4;
        assert_eq!(hash(l4, &key(17, 0, 1)), hash(l4, &key(17, 0, 2)), "udp");
        assert_ne!(hash(l4, &key(6, 0, 1)), hash(l4, &key(6, 0, 2)), "tcp");
        let udp = HashFields::SymmetricL3L4Udp;
        assert_ne!(hash(udp, &key(17, 0, 1)), hash(udp, &key(17, 0, 2)));
        assert_eq!(
            hash(udp, &key(17, 1, 1)),
            hash(udp, &key(17, 1, 2)),
            "a fragment"
        );
    }

    #[test]
    fn active_backup_takes_the_first_live_member_and_reads_no_field() {
        let b = MemberBundle::parse("eth_src,0,active_backup,ofport,members:3,1,2", false, &none)
            .unwrap();
        let key = MatchKey::default();
        let mut mask = MatchKey::default();
        assert_eq!(b.choose(&key, &mut mask, &|p| p != 3), 1);
        assert_eq!(b.choose(&key, &mut mask, &|_| false), OFPP_NONE);
        assert_eq!(mask, MatchKey::default());
    }

    #[test]
    fn hrw_spreads_flows_over_the_live_members_and_reads_its_fields() {
        let b = MemberBundle::parse("nw_src,7,hrw,ofport,members:1,2,3,4", false, &none).unwrap();
        let mut seen = [0usize; 5];
        for i in 0..400u32 {
            let key = MatchKey::from(FlowKey {
                dl_type: 0x0800,
                nw_src: u128::from(0xc612_0000 + i),
                ..FlowKey::default()
            });
            let mut mask = MatchKey::default();
            let p = b.choose(&key, &mut mask, &|p| p != 2);
            assert_ne!(p, 2, "a dead member is never chosen");
            assert_eq!({ mask.nw_src }, u128::MAX);
            // The same flow, the same member.
            assert_eq!(b.choose(&key, &mut MatchKey::default(), &|p| p != 2), p);
            seen[p as usize] += 1;
        }
        assert!(seen[1] > 50 && seen[3] > 50 && seen[4] > 50, "{seen:?}");
    }
}
