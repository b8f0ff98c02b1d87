//! AF_PACKET ports: a Linux interface (a veth end, a physical NIC) as a vsw port.
//!
//! Two ways to move frames, chosen per port with `afpacket-mode`:
//! - `ring` (default): mmap rings. The PMD reads a TPACKET_V2 receive ring by its
//!   per-frame status words, so receiving costs no system call; transmit frames are
//!   written into a TPACKET_V2 TX ring and sent with one `sendto` kick per batch.
//! - `mmsg`: `recvmmsg`/`sendmmsg`, one system call per batch each way. The baseline.
//!
//! Both carry the virtio-net header (PACKET_VNET_HDR): Linux veths hand over TCP
//! super-frames with partial checksums, and the header lets them leave as they came.
//! Both bypass the qdisc, ignore the switch's own transmissions, and hold the interface
//! in promiscuous mode through a socket membership the kernel drops when the socket
//! closes, so the interface is restored however the switch exits.

mod mmsg;
#[allow(unsafe_code)]
mod ring;
#[allow(unsafe_code)]
mod ring_v3;
pub(crate) mod tunnel_gso;

use std::fmt;
use std::os::fd::OwnedFd;
use std::str::FromStr;

use vsw_datapath::PortQueues;

use crate::sys;
use crate::NetdevError;

/// The largest frame an AF_PACKET port takes: a 64 KiB TCP super-frame with its
/// Ethernet header and one VLAN tag.
pub const MAX_FRAME: usize =
    65535 + vsw_packet::ethernet::ETH_HDR_LEN + vsw_packet::ethernet::VLAN_TAG_LEN;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AfPacketMode {
    #[default]
    Ring,
    /// TPACKET_V3 receive ring: kept to measure V2 against (see ring_v3.rs).
    RingV3,
    Mmsg,
}

impl fmt::Display for AfPacketMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AfPacketMode::Ring => "ring",
            AfPacketMode::RingV3 => "ring-v3",
            AfPacketMode::Mmsg => "mmsg",
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("afpacket-mode must be 'ring', 'ring-v3' or 'mmsg', not '{0}'")]
pub struct BadMode(pub String);

impl FromStr for AfPacketMode {
    type Err = BadMode;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "ring" => Ok(AfPacketMode::Ring),
            "ring-v3" => Ok(AfPacketMode::RingV3),
            "mmsg" => Ok(AfPacketMode::Mmsg),
            other => Err(BadMode(other.to_string())),
        }
    }
}

pub(crate) fn syscall<'a>(
    op: &'static str,
    ifname: &'a str,
) -> impl FnOnce(std::io::Error) -> NetdevError + 'a {
    move |source| NetdevError::Syscall {
        op,
        ifname: ifname.to_string(),
        source,
    }
}

fn set_flag(
    fd: &OwnedFd,
    opt: libc::c_int,
    name: &'static str,
    ifname: &str,
) -> Result<(), NetdevError> {
    sys::set_packet_opt(fd, opt, &1 as &libc::c_int).map_err(syscall(name, ifname))
}

/// A packet socket that carries the virtio-net header and bypasses the qdisc, as every
/// socket of a port does. The header option, like the ring version, must be set before
/// any ring exists, so this comes first.
fn offload_socket(ifname: &str) -> Result<OwnedFd, NetdevError> {
    let fd = sys::packet_socket().map_err(syscall("socket(AF_PACKET)", ifname))?;
    set_flag(&fd, libc::PACKET_VNET_HDR, "PACKET_VNET_HDR", ifname)?;
    set_flag(
        &fd,
        libc::PACKET_QDISC_BYPASS,
        "PACKET_QDISC_BYPASS",
        ifname,
    )?;
    Ok(fd)
}

/// How many frames a port's rings hold: 2 KiB frames (a larger MTU's larger slots
/// keep the ring's memory and are fewer). The kernel allocates, zeroes and maps a
/// ring's memory when the port opens: the default 4096 + 2048 frames are 12 MiB a
/// port, ~15 ms of one core each; smaller rings open faster, in less memory, and
/// ride out shorter stalls of the PMD.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RingFrames {
    pub rx: usize,
    pub tx: usize,
}

impl RingFrames {
    /// The fewest frames a ring holds (one 128 KiB block of 2 KiB frames) and the
    /// most (128 MiB).
    pub const MIN: usize = 64;
    pub const MAX: usize = 65536;

    /// A ring size as the options say it: a power of two from [`Self::MIN`] to
    /// [`Self::MAX`].
    pub fn parse(v: &str) -> Result<usize, String> {
        match v.parse::<usize>() {
            Ok(n) if n.is_power_of_two() && (Self::MIN..=Self::MAX).contains(&n) => Ok(n),
            _ => Err(format!(
                "a power of two from {} to {} frames",
                Self::MIN,
                Self::MAX
            )),
        }
    }
}

impl Default for RingFrames {
    fn default() -> RingFrames {
        RingFrames { rx: 4096, tx: 2048 }
    }
}

/// Opens interface `ifname` as a port, with rings of the default size.
pub fn open(ifname: &str, mode: AfPacketMode) -> Result<PortQueues, NetdevError> {
    open_tapped(ifname, mode, RingFrames::default(), None).map(|(q, _)| q)
}

/// Opens interface `ifname` as a port, and gives a second handle on the socket that
/// receives, for attaching a socket filter to it later (the offload fast path's).
pub fn open_tapped(
    ifname: &str,
    mode: AfPacketMode,
    frames: RingFrames,
    pinned_fast_path: Option<&std::path::Path>,
) -> Result<(PortQueues, OwnedFd), NetdevError> {
    if !crate::interface::valid_name(ifname) {
        return Err(NetdevError::BadInterfaceName(ifname.to_string()));
    }
    let ifindex =
        sys::if_index(ifname).ok_or_else(|| NetdevError::NoSuchInterface(ifname.to_string()))?;
    let fd = offload_socket(ifname)?;
    set_flag(
        &fd,
        libc::PACKET_IGNORE_OUTGOING,
        "PACKET_IGNORE_OUTGOING",
        ifname,
    )?;
    let tap = fd.try_clone().map_err(syscall("dup", ifname))?;
    // A fast path an earlier run left forwarding: its flows' frames are the
    // kernel's from the first one this socket could see (it is not bound yet).
    if let Some(dir) = pinned_fast_path {
        crate::ebpf::refuse_pinned_flows(&fd, ifname, dir);
    }
    // The kernel's VLAN tag of each frame read from the socket (mmsg, and the ring's
    // copy path for frames too large for a slot).
    set_flag(&fd, libc::PACKET_AUXDATA, "PACKET_AUXDATA", ifname)?;
    let queues = match mode {
        AfPacketMode::Ring => ring::open(fd, ifname, ifindex, frames)?,
        AfPacketMode::RingV3 => ring_v3::open(fd, ifname, ifindex, frames.tx)?,
        AfPacketMode::Mmsg => mmsg::open(fd, ifname, ifindex)?,
    };
    tracing::debug!(ifname, ifindex, %mode, "afpacket port open");
    Ok((queues, tap))
}

/// The interface's MTU, for the transmit queues' size check (1500 if it cannot be
/// read; the kernel refuses a larger frame anyway).
fn port_mtu(ifname: &str) -> usize {
    sys::interface_mtu(ifname).map_or(1500, |m| m as usize)
}

/// Binds the socket and takes the interface promiscuous; the last step of opening.
fn attach(fd: &OwnedFd, ifname: &str, ifindex: u32) -> Result<(), NetdevError> {
    sys::bind_to_interface(fd, ifindex, true).map_err(syscall("bind", ifname))?;
    sys::add_promiscuous_membership(fd, ifindex).map_err(syscall("PACKET_ADD_MEMBERSHIP", ifname))
}

/// The VLAN tag the kernel took out of a frame, as its PACKET_AUXDATA says.
fn aux_vlan(aux: &libc::tpacket_auxdata) -> Option<vsw_packet::VlanTag> {
    (aux.tp_status & libc::TP_STATUS_VLAN_VALID != 0).then_some(vsw_packet::VlanTag {
        tpid: if aux.tp_status & libc::TP_STATUS_VLAN_TPID_VALID != 0 {
            aux.tp_vlan_tpid
        } else {
            vsw_packet::EtherType::VLAN
        },
        tci: aux.tp_vlan_tci,
    })
}

/// Whether an error from a send is the device being busy for a moment.
pub(crate) fn transient(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EAGAIN) | Some(libc::ENOBUFS) | Some(libc::EINTR)
    )
}
