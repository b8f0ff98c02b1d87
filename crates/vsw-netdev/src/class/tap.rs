//! `tap`: a tap interface vsw makes (or takes over) and owns, with virtio-net headers
//! and the kernel's checksum and segmentation offloads. `internal` is the same
//! device under Open vSwitch's name for a bridge's own port: named after the
//! bridge, it is the switch's LOCAL port, where the host has its address.

use vsw_datapath::PortQueues;

use super::{
    ClassEnv, MtuHandling, OptionError, Options, PortClass, PortDevice, PortError, Presence,
};
use crate::interface;

pub struct Tap {
    name: &'static str,
}

pub static CLASS: Tap = Tap { name: "tap" };
pub static INTERNAL: Tap = Tap { name: "internal" };

impl PortClass for Tap {
    fn name(&self) -> &'static str {
        self.name
    }

    /// Open vSwitch's names are vsw's.
    fn ovs_type(&self) -> Option<&'static str> {
        Some(self.name)
    }

    fn mtu_handling(&self) -> MtuHandling {
        MtuHandling::NotSet
    }

    fn configure(
        &self,
        port: &str,
        _options: &Options,
        env: &ClassEnv,
    ) -> Result<Box<dyn PortDevice>, OptionError> {
        Ok(Box::new(TapDevice {
            name: port.to_string(),
            internal: self.name == "internal",
            tunnels: env.tunnels.clone(),
            registration: None,
        }))
    }
}

struct TapDevice {
    name: String,
    /// An `internal` port: also the underlay end of tunnels (`crate::tunnel`).
    internal: bool,
    /// The tunnels it is the underlay end of.
    tunnels: std::sync::Arc<crate::tunnel::TunnelWorld>,
    /// An open internal port's place among the tunnels' underlay bridges.
    registration: Option<crate::tunnel::Registration>,
}

impl PortDevice for TapDevice {
    /// A tap moved into another namespace is no longer visible here, and still works.
    fn presence(&self) -> Presence {
        Presence::Own
    }

    fn open(&mut self) -> Result<PortQueues, PortError> {
        let queues = crate::tap::open(&self.name, self.internal)?;
        if !self.internal {
            return Ok(queues);
        }
        let registration = crate::tunnel::open_local(&self.tunnels, &self.name);
        self.registration = Some(registration);
        Ok(queues)
    }

    fn close(&mut self) {
        if let Some(r) = self.registration.take() {
            crate::tunnel::close_local(&self.tunnels, &self.name, r);
        }
    }

    fn mtu(&self) -> Option<u32> {
        interface::mtu(&self.name).ok()
    }

    fn set_mtu(&mut self, mtu: Option<u32>) -> Result<(), PortError> {
        super::mtu_not_set(&self.name, mtu)
    }
}
