//! UDP-tunnelled super-frames to an underlay interface, whole.
//!
//! A tunnel port encapsulates a TCP super-frame once (one outer header in front of
//! up to 64 KiB of inner TCP); cutting it into outer packets in vsw means the
//! receiving host's whole stack runs once per 1,450-byte packet. The kernel can
//! carry such a frame whole — over a veth to the peer's stack, or to a NIC that
//! segments tunnels — but a packet socket cannot hand it one: its 10-byte
//! virtio-net header has no way to say "UDP tunnel" (docs/BENCHMARKS.md, issue 18).
//! A tap's can (the 24-byte `virtio_net_hdr_v1_hash_tunnel`, kernel 6.17 on). So an
//! underlay port writes such frames into a tap of its own, `vswg<ifindex>q<n>`, whose tc
//! ingress runs `bpf/vsw_tunnel_gso.c`: a redirect to the underlay interface's
//! transmit path. The tap goes when its descriptor closes (it is not persistent),
//! and the classifier with it.

use std::io;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU32, Ordering};

use aya::programs::{SchedClassifier, TcAttachType};
use aya::{Ebpf, EbpfLoader};
use vsw_packet::tunnel::TunnelSuperFrame;
use vsw_packet::vnet::VnetHdr;

use crate::sys;

pub(crate) static PROGRAM: &[u8] =
    aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/vsw_tunnel_gso.o"));

/// `struct virtio_net_hdr_v1_hash_tunnel`: the virtio-net header, `num_buffers`,
/// the hash fields, then the outer transport and inner network header offsets.
pub(crate) const TUNNEL_VNET_HDR_LEN: usize = 24;
/// gso_type bits: a UDP tunnel over outer IPv4 / IPv6 (virtio 1.4).
const GSO_UDP_TUNNEL_IPV4: u8 = 0x20;
const GSO_UDP_TUNNEL_IPV6: u8 = 0x40;
/// TUN_F_* offloads: checksums, TSO over IPv4 and IPv6, and UDP tunnel GSO.
const TUN_F_CSUM: libc::c_uint = 0x01;
const TUN_F_TSO4: libc::c_uint = 0x02;
const TUN_F_TSO6: libc::c_uint = 0x04;
const TUN_F_UDP_TUNNEL_GSO: libc::c_uint = 0x080;

/// An underlay interface's way in for tunnel super-frames.
pub(crate) struct TunnelGsoTap {
    fd: OwnedFd,
    /// Holds the classifier attached (its link is the loaded program's).
    _bpf: Ebpf,
}

impl TunnelGsoTap {
    /// Makes the tap and its redirect to `ifindex`. Fails on a kernel without UDP
    /// tunnel GSO on taps (before 6.17) or without tc BPF: then the port cuts such
    /// frames itself.
    pub(crate) fn open(ifindex: u32) -> io::Result<TunnelGsoTap> {
        let started = std::time::Instant::now();
        // One tap per transmit queue (each PMD has its own): numbered.
        static MADE: AtomicU32 = AtomicU32::new(0);
        let n = MADE.fetch_add(1, Ordering::Relaxed) % 1000;
        let name = format!("vswg{ifindex}q{n}");
        let fd = sys::tap_open_with(
            &name,
            TUNNEL_VNET_HDR_LEN as libc::c_int,
            TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6 | TUN_F_UDP_TUNNEL_GSO,
        )?;
        sys::set_link_up(&name)?;
        let bpf_error = |e: &dyn std::fmt::Display| io::Error::other(format!("{name}: {e}"));
        let mut bpf = EbpfLoader::new()
            .set_global("TARGET_IFINDEX", &ifindex, true)
            .load(PROGRAM)
            .map_err(|e| bpf_error(&e))?;
        let classifier: &mut SchedClassifier = bpf
            .program_mut("vsw_tunnel_gso_redirect")
            .ok_or_else(|| bpf_error(&"program missing"))?
            .try_into()
            .map_err(|e| bpf_error(&e))?;
        classifier.load().map_err(|e| bpf_error(&e))?;
        classifier
            .attach(&name, TcAttachType::Ingress)
            .map_err(|e| bpf_error(&e))?;
        // Made on a PMD, the first time: what that once costs it is in the log.
        let took_us = started.elapsed().as_micros() as u64;
        tracing::info!(tap = %name, ifindex, took_us, "tunnel super-frames go whole to the underlay");
        Ok(TunnelGsoTap { fd, _bpf: bpf })
    }

    /// Sends `frame`, a UDP-tunnelled super-frame at `t` whose inner segmentation
    /// `vnet` describes (the outer UDP checksum zero), to the underlay interface.
    pub(crate) fn send(
        &self,
        frame: &[u8],
        vnet: &VnetHdr,
        t: &TunnelSuperFrame,
    ) -> io::Result<()> {
        let hdr = tunnel_vnet_header(vnet, t);
        sys::write_frame_parts(&self.fd, &hdr, frame)
    }
}

/// The 24-byte header for a UDP-tunnelled super-frame: `vnet` (the inner
/// segmentation and checksum) with the tunnel's gso bit for the outer family, and
/// the offsets of the outer UDP header and the inner IP header.
pub(crate) fn tunnel_vnet_header(
    vnet: &VnetHdr,
    t: &TunnelSuperFrame,
) -> [u8; TUNNEL_VNET_HDR_LEN] {
    let mut hdr = [0u8; TUNNEL_VNET_HDR_LEN];
    let tunnel = if t.ipv6 {
        GSO_UDP_TUNNEL_IPV6
    } else {
        GSO_UDP_TUNNEL_IPV4
    };
    VnetHdr {
        gso_type: vnet.gso_type | tunnel,
        ..*vnet
    }
    .write(
        (&mut hdr[..vsw_packet::vnet::VNET_HDR_LEN])
            .try_into()
            .expect("10 bytes"),
    );
    // num_buffers, hash value, report and padding stay zero.
    let inner_nh = t.inner + vsw_packet::ethernet::ETH_HDR_LEN;
    hdr[20..22].copy_from_slice(&(t.l4 as u16).to_le_bytes());
    hdr[22..24].copy_from_slice(&(inner_nh as u16).to_le_bytes());
    hdr
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_says_where_the_tunnel_is() {
        let vnet = VnetHdr {
            flags: 1,
            gso_type: 1,
            hdr_len: 104,
            gso_size: 1398,
            csum_start: 84,
            csum_offset: 16,
        };
        let t = TunnelSuperFrame {
            l3: 14,
            ipv6: false,
            l4: 34,
            inner: 50,
        };
        let h = tunnel_vnet_header(&vnet, &t);
        assert_eq!((h[0], h[1]), (1, 1 | GSO_UDP_TUNNEL_IPV4));
        assert_eq!(u16::from_le_bytes([h[4], h[5]]), 1398);
        assert_eq!(u16::from_le_bytes([h[6], h[7]]), 84);
        assert_eq!(&h[10..20], &[0; 10]);
        assert_eq!(u16::from_le_bytes([h[20], h[21]]), 34);
        assert_eq!(u16::from_le_bytes([h[22], h[23]]), 64);
    }
}
