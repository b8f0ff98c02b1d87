//! `afpacket`: a Linux interface (a veth, a NIC) vsw reads and writes through an
//! AF_PACKET socket. The interface comes and goes on its own; its MTU is the
//! interface's; the offload fast path filters vsw's receiving socket.

use std::os::fd::OwnedFd;

use vsw_datapath::PortQueues;

use super::{
    bad, ClassEnv, ClassOption, MtuHandling, OnChange, OptionError, Options, PortClass, PortDevice,
    PortError, Presence,
};
use crate::afpacket::{open_tapped, AfPacketMode, BadMode, RingFrames};
use crate::interface;

pub struct Afpacket;

pub static CLASS: Afpacket = Afpacket;

impl PortClass for Afpacket {
    fn name(&self) -> &'static str {
        "afpacket"
    }

    fn ovs_type(&self) -> Option<&'static str> {
        Some("system")
    }

    /// Open vSwitch's descriptor counts per queue are vsw's ring sizes.
    fn options_of_ovs(&self, iface: &super::OvsInterface) -> Result<Options, String> {
        Ok([
            ("n_rxq_desc", "rx-ring-frames"),
            ("n_txq_desc", "tx-ring-frames"),
        ]
        .iter()
        .filter_map(|(ovs, vsw)| Some((vsw.to_string(), iface.options.get(*ovs)?.clone())))
        .collect())
    }

    fn options(&self) -> &'static [ClassOption] {
        &[
            ClassOption {
                key: "afpacket-mode",
                on_change: OnChange::Reopen,
                saved_default: Some("ring"),
            },
            // Ring sizes (ring modes): frames of 2 KiB, a power of two.
            ClassOption {
                key: "rx-ring-frames",
                on_change: OnChange::Reopen,
                saved_default: None,
            },
            ClassOption {
                key: "tx-ring-frames",
                on_change: OnChange::Reopen,
                saved_default: None,
            },
        ]
    }

    fn mtu_handling(&self) -> MtuHandling {
        MtuHandling::Interface
    }

    fn configure(
        &self,
        port: &str,
        options: &Options,
        env: &ClassEnv,
    ) -> Result<Box<dyn PortDevice>, OptionError> {
        let mut mode = AfPacketMode::default();
        if let Some(v) = options.get("afpacket-mode") {
            mode = v
                .parse()
                .map_err(|e: BadMode| bad("afpacket-mode", v, e.to_string()))?;
        }
        let mut frames = RingFrames::default();
        for (key, slot) in [
            ("rx-ring-frames", &mut frames.rx),
            ("tx-ring-frames", &mut frames.tx),
        ] {
            if let Some(v) = options.get(key) {
                *slot = RingFrames::parse(v).map_err(|why| bad(key, v, why))?;
            }
        }
        Ok(Box::new(AfpacketDevice {
            name: port.to_string(),
            mode,
            frames,
            rx_socket: None,
            pin_dir: env.bpf_pin_root.join(port),
        }))
    }

    fn remove_leftovers(&self, port: &str) {
        match crate::ebpf::remove_leftovers(port) {
            Ok(0) => {}
            Ok(n) => {
                tracing::warn!(
                    port,
                    programs = n,
                    "removed an earlier run's offload fast path"
                )
            }
            Err(e) => {
                tracing::warn!(port, error = %e, "cannot look for an earlier run's offload fast path")
            }
        }
    }
}

struct AfpacketDevice {
    name: String,
    mode: AfPacketMode,
    frames: RingFrames,
    /// A second handle on the open socket that receives.
    rx_socket: Option<OwnedFd>,
    /// Where a kernel fast path of this interface would be pinned.
    pin_dir: std::path::PathBuf,
}

impl PortDevice for AfpacketDevice {
    fn presence(&self) -> Presence {
        Presence::Interface(interface::index(&self.name))
    }

    fn open(&mut self) -> Result<PortQueues, PortError> {
        let (queues, socket) =
            open_tapped(&self.name, self.mode, self.frames, Some(&self.pin_dir))?;
        tracing::debug!(port = %self.name, mode = %self.mode, "afpacket device open");
        self.rx_socket = Some(socket);
        Ok(queues)
    }

    fn close(&mut self) {
        self.rx_socket = None;
    }

    fn mtu(&self) -> Option<u32> {
        interface::mtu(&self.name).ok()
    }

    fn set_mtu(&mut self, mtu: Option<u32>) -> Result<(), PortError> {
        let Some(mtu) = mtu else {
            return Ok(());
        };
        if self.mtu() == Some(mtu) {
            return Ok(());
        }
        interface::set_mtu(&self.name, mtu).map_err(|e| PortError::Mtu {
            port: self.name.clone(),
            mtu,
            why: e.to_string(),
        })
    }

    fn offload_socket(&self) -> Option<&OwnedFd> {
        self.rx_socket.as_ref()
    }
}
