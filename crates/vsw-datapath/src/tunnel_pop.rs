//! What `DpAction::TunnelPop` needs beside the packet: the receive points its next
//! pass starts from, and the count of what decapsulation refused.
//!
//! A popped packet is looked up again as received on a receive point — one
//! pseudo-port per tunnel kind, Open vSwitch's `vxlan_sys_4789` and
//! `genev_sys_6081` — with its tunnel (VNI, outer addresses) in the key: the slow
//! path says which tunnel port of which bridge that is, and the flow matches those
//! fields, so one flow serves a tunnel port however many remote ends share it.
//! The key's tunnel addresses are IPv4: a packet from an IPv6 remote end comes in
//! on a receive point of that remote end's own (numbered by the tunnels' state),
//! which says the address instead.

use std::sync::atomic::{AtomicU64, Ordering};

use vsw_packet::tunnel::DecapError;

/// The datapath port a popped VXLAN packet's next pass comes in on.
pub const VXLAN_RECEIVE: u32 = 0xffff_ff00;
/// The datapath port a popped Geneve packet's next pass comes in on.
pub const GENEVE_RECEIVE: u32 = 0xffff_ff01;
/// The datapath port a popped VXLAN-GPE packet that carries no Ethernet frame (IP,
/// NSH) comes in on, behind a placeholder Ethernet header: the flow's `in_port`
/// (always matched) tells such a packet from an Ethernet frame.
pub const VXLAN_L3_RECEIVE: u32 = 0xffff_ff02;
/// The first receive point of IPv6 remote ends: `RECEIVE6_BASE + 3 × index`, one
/// more for Geneve, two more for VXLAN-GPE without Ethernet, for the remote end the
/// tunnels' state numbered `index`.
pub const RECEIVE6_BASE: u32 = 0xfffe_0000;
/// IPv6 remote ends numbered at most (the receive points stay below
/// [`VXLAN_RECEIVE`]).
pub const MAX_REMOTES6: u32 = 0x7f00;

/// What a `TunnelPop` takes off: tunnel packets of this kind to this UDP port, and
/// for Geneve the option (class, type) the bridges of the ports with the packet's
/// remote end name `tun_metadata0` — two, where two bridges' TLV maps differ: the
/// one the packet carries is read (its value goes to the key; any other critical
/// option drops the packet); and the receive point its next pass comes in on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Pop {
    pub geneve: bool,
    pub udp_port: u16,
    pub option: Option<(u16, u8)>,
    pub other_option: Option<(u16, u8)>,
    pub receive: u32,
}

impl Pop {
    /// Whether `(class, type)` is an option this pop reads (a critical one it does
    /// not is refused).
    pub fn knows(&self, class: u16, kind: u8) -> bool {
        self.option == Some((class, kind)) || self.other_option == Some((class, kind))
    }

    /// `tun_metadata0` of a packet with Geneve `options`: the value of the first of
    /// its options the packet carries, 0 for none.
    pub fn metadata0(&self, options: &[u8]) -> u32 {
        [self.option, self.other_option]
            .into_iter()
            .flatten()
            .find_map(|o| option_found(options, o))
            .unwrap_or(0)
    }
}

/// The receive point of this kind (`geneve`) for an IPv4 remote end, or for the
/// IPv6 remote end numbered `remote6`.
pub fn receive_point_of(geneve: bool, remote6: Option<u32>) -> u32 {
    match remote6 {
        None if geneve => GENEVE_RECEIVE,
        None => VXLAN_RECEIVE,
        Some(i) => RECEIVE6_BASE + 3 * i.min(MAX_REMOTES6 - 1) + u32::from(geneve),
    }
}

/// The receive point of VXLAN receive point `vxlan`'s packets that carry no
/// Ethernet frame.
pub fn l3_point_of(vxlan: u32) -> u32 {
    vxlan + 2
}

/// What the packets that come in on a receive point are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReceivePoint {
    pub geneve: bool,
    /// VXLAN-GPE's IP or NSH, behind a placeholder Ethernet header.
    pub l3: bool,
}

/// What kind of receive point `in_port` is, if it is one.
pub fn receive_point(in_port: u32) -> Option<ReceivePoint> {
    let which = match in_port {
        VXLAN_RECEIVE..=VXLAN_L3_RECEIVE => in_port - VXLAN_RECEIVE,
        p => {
            remote6_of(p)?;
            (p - RECEIVE6_BASE) % 3
        }
    };
    Some(ReceivePoint {
        geneve: which == 1,
        l3: which == 2,
    })
}

/// The number of the IPv6 remote end whose receive point `in_port` is, if it is one.
pub fn remote6_of(in_port: u32) -> Option<u32> {
    (RECEIVE6_BASE..RECEIVE6_BASE + 3 * MAX_REMOTES6)
        .contains(&in_port)
        .then(|| (in_port - RECEIVE6_BASE) / 3)
}

/// The value of Geneve option `(class, type)` among `options` (whole TLVs), as
/// `tun_metadata0` holds it; `None` when the packet carries none of its length (4
/// bytes).
fn option_found(options: &[u8], (class, kind): (u16, u8)) -> Option<u32> {
    vsw_packet::wire::geneve::options(options)
        .filter_map(Result::ok)
        .find(|o| o.class == class && o.kind == kind && o.data.len() == 4)
        .map(|o| o.data.iter().fold(0u32, |n, b| (n << 8) | u32::from(*b)))
}

/// Every reason decapsulation refuses a packet, in counting order.
pub const DECAP_DROPS: [DecapError; 9] = [
    DecapError::Truncated(""),
    DecapError::Fragment,
    DecapError::BadIpChecksum,
    DecapError::BadUdpChecksum,
    DecapError::VxlanNoVni,
    DecapError::GeneveNotEthernet,
    DecapError::UnknownCriticalOption,
    DecapError::InnerTooShort,
    DecapError::GpeNotCarried,
];

/// Packets `TunnelPop` dropped, by reason.
#[derive(Debug, Default)]
pub struct DecapDrops {
    counts: [AtomicU64; DECAP_DROPS.len()],
}

fn slot(e: &DecapError) -> Option<usize> {
    Some(match e {
        DecapError::NotTunnel => return None,
        DecapError::Truncated(_) => 0,
        DecapError::Fragment => 1,
        DecapError::BadIpChecksum => 2,
        DecapError::BadUdpChecksum => 3,
        DecapError::VxlanNoVni => 4,
        DecapError::GeneveNotEthernet => 5,
        DecapError::UnknownCriticalOption => 6,
        DecapError::InnerTooShort => 7,
        DecapError::GpeNotCarried => 8,
    })
}

impl DecapDrops {
    /// Counts a refusal; "not a tunnel packet" too, as a truncated one (translation
    /// saw a tunnel packet: the frame contradicts its own headers).
    pub fn count(&self, e: &DecapError) {
        let i = slot(e).unwrap_or(0);
        self.counts[i].fetch_add(1, Ordering::Relaxed);
    }

    /// Each reason with its count.
    pub fn counts(&self) -> Vec<(DecapError, u64)> {
        DECAP_DROPS
            .iter()
            .zip(&self.counts)
            .map(|(e, n)| (*e, n.load(Ordering::Relaxed)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Geneve TLVs: (class, type, 4-byte value) each.
    fn tlvs(options: &[(u16, u8, u32)]) -> Vec<u8> {
        let mut out = Vec::new();
        for (class, kind, value) in options {
            out.extend_from_slice(&class.to_be_bytes());
            out.push(*kind);
            out.push(1); // one 4-byte word of data
            out.extend_from_slice(&value.to_be_bytes());
        }
        out
    }

    #[test]
    fn a_pop_reads_whichever_of_its_options_the_packet_carries() {
        let pop = Pop {
            geneve: true,
            udp_port: 6081,
            option: Some((0x0102, 0x80)),
            other_option: Some((0x0103, 0x81)),
            receive: GENEVE_RECEIVE,
        };
        assert_eq!(pop.metadata0(&tlvs(&[(0x0102, 0x80, 7)])), 7);
        assert_eq!(pop.metadata0(&tlvs(&[(0x0103, 0x81, 9)])), 9);
        assert_eq!(pop.metadata0(&tlvs(&[(0x0104, 0x81, 9)])), 0);
        assert!(pop.knows(0x0103, 0x81) && !pop.knows(0x0104, 0x81));
        let one = Pop {
            other_option: None,
            ..pop
        };
        assert_eq!(one.metadata0(&tlvs(&[(0x0103, 0x81, 9)])), 0);
        assert!(!one.knows(0x0103, 0x81));
    }

    #[test]
    fn receive_points_say_their_kind_and_remote_end() {
        for geneve in [false, true] {
            let what = |l3| Some(ReceivePoint { geneve, l3 });
            let v4 = receive_point_of(geneve, None);
            assert_eq!((receive_point(v4), remote6_of(v4)), (what(false), None));
            for i in [0, 7, MAX_REMOTES6 - 1] {
                let p = receive_point_of(geneve, Some(i));
                assert_eq!((receive_point(p), remote6_of(p)), (what(false), Some(i)));
                assert!(p < VXLAN_RECEIVE);
                if !geneve {
                    let l3 = l3_point_of(p);
                    assert_eq!((receive_point(l3), remote6_of(l3)), (what(true), Some(i)));
                }
            }
        }
        let l3 = l3_point_of(VXLAN_RECEIVE);
        assert_eq!(l3, VXLAN_L3_RECEIVE);
        assert_eq!(
            receive_point(l3),
            Some(ReceivePoint {
                geneve: false,
                l3: true
            })
        );
        assert_eq!(receive_point(7), None);
        assert_eq!(receive_point(VXLAN_L3_RECEIVE + 1), None);
        assert_eq!(remote6_of(VXLAN_RECEIVE), None);
        assert_eq!(remote6_of(l3), None);
    }

    #[test]
    fn each_reason_counts_in_its_own_slot() {
        let d = DecapDrops::default();
        for (i, e) in DECAP_DROPS.iter().enumerate() {
            assert_eq!(slot(e), Some(i));
            for _ in 0..=i {
                d.count(e);
            }
        }
        let counts = d.counts();
        for (i, (_, n)) in counts.iter().enumerate() {
            assert_eq!(*n, i as u64 + 1);
        }
        assert_eq!(slot(&DecapError::NotTunnel), None);
    }
}
