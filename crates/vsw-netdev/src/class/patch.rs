//! `patch`: a port joined to its `peer` port, usually on another bridge of the same
//! vswd (Open vSwitch's patch ports). Nothing crosses it as a packet: translation
//! goes on in the peer's bridge (`vsw_ofproto::Backer`). The port is in the datapath
//! so that it has a number there, with no receive queue and a transmit queue that
//! takes nothing (a patch whose peer is not there is a cable with nothing at the
//! other end).

use vsw_datapath::{PacketMeta, PortQueues, StageError, TxOffloads, TxQueue};

use super::{
    bad, ClassEnv, ClassOption, MtuHandling, OnChange, OptionError, Options, PortClass, PortDevice,
    PortError, Presence,
};

pub struct Patch;

pub static CLASS: Patch = Patch;

impl PortClass for Patch {
    fn name(&self) -> &'static str {
        "patch"
    }

    fn ovs_type(&self) -> Option<&'static str> {
        Some("patch")
    }

    /// Joined in memory to its peer, on this bridge or another of this vswd.
    fn options_of_ovs(&self, iface: &super::OvsInterface) -> Result<Options, String> {
        let o = super::same_options(iface, &["peer"]);
        if o.is_empty() {
            return Err("patch needs options:peer".into());
        }
        Ok(o)
    }

    fn options(&self) -> &'static [ClassOption] {
        &[ClassOption {
            key: "peer",
            on_change: OnChange::Reopen,
            saved_default: None,
        }]
    }

    fn mtu_handling(&self) -> MtuHandling {
        MtuHandling::NotSet
    }

    fn configure(
        &self,
        port: &str,
        options: &Options,
        _env: &ClassEnv,
    ) -> Result<Box<dyn PortDevice>, OptionError> {
        let peer = match options.get("peer") {
            Some(p) if crate::interface::valid_name(p) && p != port => p.clone(),
            Some(p) => return Err(bad("peer", p, "another port's name")),
            None => return Err(bad("peer", "", "a patch port needs peer=NAME")),
        };
        Ok(Box::new(PatchDevice {
            name: port.to_string(),
            peer,
        }))
    }
}

struct PatchDevice {
    name: String,
    peer: String,
}

impl PortDevice for PatchDevice {
    fn presence(&self) -> Presence {
        Presence::Own
    }

    fn open(&mut self) -> Result<PortQueues, PortError> {
        Ok(PortQueues {
            rx: Vec::new(),
            tx: Box::new(Unjoined),
            tx_factory: None,
        })
    }

    fn mtu(&self) -> Option<u32> {
        Some(PATCH_MTU)
    }

    fn patch_peer(&self) -> Option<&str> {
        Some(&self.peer)
    }

    fn set_mtu(&mut self, mtu: Option<u32>) -> Result<(), PortError> {
        super::mtu_not_set(&self.name, mtu)
    }
}

/// The MTU a patch port reports (nothing limits what crosses it).
pub const PATCH_MTU: u32 = 9216;

/// A patch port's transmit queue: what is sent to it while its peer is not there
/// is dropped (counted as a full queue).
struct Unjoined;

impl TxQueue for Unjoined {
    fn offloads(&self) -> TxOffloads {
        TxOffloads {
            csum: true,
            tso: true,
            merges: false,
            tunnel_tso: true,
            mtu: PATCH_MTU as usize,
        }
    }

    fn stage(&mut self, _data: &[u8], _meta: &PacketMeta) -> Result<(), StageError> {
        Err(StageError::QueueFull)
    }

    fn pending(&self) -> usize {
        0
    }

    fn flush(&mut self) -> usize {
        0
    }
}
