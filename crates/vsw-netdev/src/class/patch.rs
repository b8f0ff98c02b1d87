//! `patch`: a port joined in memory to its `peer` port, usually on another bridge of
//! the same vswd (Open vSwitch's patch ports). See `crate::patch`.

use vsw_datapath::PortQueues;

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
        Ok(crate::patch::open(&self.name, &self.peer)?)
    }

    fn mtu(&self) -> Option<u32> {
        Some(crate::patch::PATCH_MTU as u32)
    }

    fn set_mtu(&mut self, mtu: Option<u32>) -> Result<(), PortError> {
        super::mtu_not_set(&self.name, mtu)
    }
}
