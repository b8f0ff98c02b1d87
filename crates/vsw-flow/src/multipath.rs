//! `multipath(…)` (Open vSwitch's NXAST_MULTIPATH): a link number out of
//! `n_links`, from a hash of the packet's fields, loaded into a field — for a later
//! table to send each flow one way, the same way for all its packets.

use std::fmt;

use crate::error::FlowSyntaxError;
use crate::match_key::MatchKey;
use crate::member_bundle::{HashFields, Mixer};
use crate::subfield::Subfield;
use crate::values::{bad, parse_uint};

/// How the hash becomes a link (`NX_MP_ALG_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MultipathAlgorithm {
    ModuloN = 0,
    HashThreshold = 1,
    Hrw = 2,
    IterHash = 3,
}

const ALGORITHMS: &[(MultipathAlgorithm, &str)] = &[
    (MultipathAlgorithm::ModuloN, "modulo_n"),
    (MultipathAlgorithm::HashThreshold, "hash_threshold"),
    (MultipathAlgorithm::Hrw, "hrw"),
    (MultipathAlgorithm::IterHash, "iter_hash"),
];

impl MultipathAlgorithm {
    pub fn from_wire(n: u16) -> Option<MultipathAlgorithm> {
        ALGORITHMS.iter().map(|(a, _)| *a).find(|a| *a as u16 == n)
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Multipath {
    pub fields: HashFields,
    pub basis: u16,
    pub algorithm: MultipathAlgorithm,
    /// 1 ..= 65,536.
    pub n_links: u32,
    /// The algorithm's own argument (iter_hash: log2 of its modulus, at least).
    pub arg: u32,
    /// Wide enough for `n_links - 1`, at most 64 bits.
    pub dst: Subfield,
}

/// Bits needed to number `n` links.
fn bits_for(n: u32) -> u8 {
    (32 - (n - 1).leading_zeros()) as u8
}

impl Multipath {
    /// Reads `FIELDS,BASIS,ALGORITHM,N_LINKS,ARG,DST[…]`.
    pub fn parse(text: &str) -> Result<Multipath, FlowSyntaxError> {
        let n = "multipath";
        let args: Vec<&str> = text
            .split([',', ' '])
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .collect();
        let [fields, basis, algorithm, n_links, arg, dst] = args[..] else {
            return Err(bad(
                n,
                text,
                "written multipath(FIELDS,BASIS,ALGORITHM,N_LINKS,ARG,DST)",
            ));
        };
        let mp = Multipath {
            fields: HashFields::by_name(fields).ok_or_else(|| bad(n, fields, "unknown fields"))?,
            basis: parse_uint(n, basis, 0xffff)? as u16,
            algorithm: ALGORITHMS
                .iter()
                .find(|(_, name)| name.eq_ignore_ascii_case(algorithm))
                .map(|(a, _)| *a)
                .ok_or_else(|| bad(n, algorithm, "unknown algorithm"))?,
            n_links: parse_uint(n, n_links, 65_536)? as u32,
            arg: parse_uint(n, arg, u128::from(u32::MAX))? as u32,
            dst: Subfield::parse(n, dst)?,
        };
        mp.check().map_err(|why| bad(n, text, why))?;
        Ok(mp)
    }

    /// Refused unless it can say every link in its destination.
    pub fn check(&self) -> Result<(), &'static str> {
        if self.n_links == 0 || self.n_links > 65_536 {
            return Err("n_links is 1 to 65536");
        }
        if self.dst.n_bits < bits_for(self.n_links) || self.dst.n_bits > 64 {
            return Err("the destination holds every link number, in at most 64 bits");
        }
        if !self.dst.field.is_writable() {
            return Err("vsw cannot write the destination");
        }
        Ok(())
    }

    /// The link for a packet of `key`; what it read is marked in `mask`.
    pub fn link(&self, key: &MatchKey, mask: &mut MatchKey) -> u32 {
        let hash = self.fields.hash(key, self.basis, mask);
        let n = u64::from(self.n_links);
        match self.algorithm {
            MultipathAlgorithm::ModuloN => (hash % n) as u32,
            MultipathAlgorithm::HashThreshold => (((hash >> 32) * n) >> 32) as u32,
            // Past 64 links, iter_hash, as Open vSwitch does (one hash per link
            // is too many for an upcall).
            MultipathAlgorithm::Hrw if self.n_links <= 64 => (0..self.n_links as usize)
                .max_by_key(|i| (Mixer::member(hash, *i), std::cmp::Reverse(*i)))
                .unwrap_or(0) as u32,
            MultipathAlgorithm::Hrw | MultipathAlgorithm::IterHash => {
                // `arg` is the modulus, as in Open vSwitch: the links' power of two
                // when it is smaller than the links or more than twice them. The
                // hash is hashed again until it falls on a link (each round does
                // with a chance of one half at least; bounded all the same).
                let arg = u64::from(self.arg);
                let modulus = if arg < n || arg / 2 > n {
                    n.next_power_of_two()
                } else {
                    arg
                };
                let mut link = n;
                for i in 0..64 {
                    link = Mixer::member(hash, i) % modulus;
                    if link < n {
                        break;
                    }
                }
                (link % n) as u32
            }
        }
    }
}

/// As `ovs-ofctl` prints it.
impl fmt::Display for Multipath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let algorithm = ALGORITHMS
            .iter()
            .find(|(a, _)| *a == self.algorithm)
            .map_or("modulo_n", |(_, n)| n);
        write!(
            f,
            "multipath({},{},{algorithm},{},{},{})",
            self.fields.name(),
            self.basis,
            self.n_links,
            self.arg,
            self.dst.format()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vsw_packet::FlowKey;

    #[test]
    fn multipath_prints_as_open_vswitch_prints_it_and_refuses_a_narrow_destination() {
        let text = "symmetric_l4,1024,hash_threshold,4,0,NXM_NX_REG0[0..1]";
        let mp = Multipath::parse(text).unwrap();
        assert_eq!(mp.to_string(), format!("multipath({text})"));
        assert!(Multipath::parse("eth_src,0,modulo_n,5,0,NXM_NX_REG0[0..1]").is_err());
        assert!(Multipath::parse("eth_src,0,modulo_n,0,0,NXM_NX_REG0[]").is_err());
        assert!(Multipath::parse("eth_src,0,round,2,0,NXM_NX_REG0[]").is_err());
        // Into a header the rule's match does not promise: refused, as a load is.
        let none = |_: &str| None;
        let into_tcp = "multipath(eth_src,0,modulo_n,2,0,NXM_OF_TCP_SRC[])";
        assert!(crate::syntax::parse_flow(&format!("actions={into_tcp}"), &none).is_err());
        assert!(crate::syntax::parse_flow(&format!("tcp,actions={into_tcp}"), &none).is_ok());
    }

    #[test]
    fn every_algorithm_spreads_flows_over_every_link_and_keeps_each_flow_on_one() {
        for alg in ["modulo_n", "hash_threshold", "hrw", "iter_hash"] {
            let mp = Multipath::parse(&format!("nw_src,7,{alg},3,0,NXM_NX_REG1[]")).unwrap();
            let mut seen = [0u32; 3];
            for i in 0..300u32 {
                let key = MatchKey::from(FlowKey {
                    dl_type: 0x0800,
                    nw_src: u128::from(0xc612_0000 + i),
                    ..FlowKey::default()
                });
                let mut mask = MatchKey::default();
                let link = mp.link(&key, &mut mask);
                assert!(link < 3, "{alg}");
                assert_eq!({ mask.nw_src }, u128::MAX);
                assert_eq!(mp.link(&key, &mut MatchKey::default()), link);
                seen[link as usize] += 1;
            }
            assert!(seen.iter().all(|n| *n > 40), "{alg}: {seen:?}");
        }
    }
}
