//! `memory`: a Linux interface played in memory, for testing what holds ports without
//! root. Interfaces are made, removed and given an MTU limit through this module's
//! functions; a port of this class sees them as an `afpacket` port sees a real one (it
//! comes and goes, its MTU is the interface's and set while the device is closed), and
//! its device replays generated frames and discards what it is sent, as `ring` does.
//! Not in [`super::PortClasses::standard`]: tests add it.

use std::collections::BTreeMap;
use std::sync::Mutex;

use vsw_datapath::PortQueues;

use super::{
    number, ClassEnv, ClassOption, MtuHandling, OnChange, OptionError, Options, PortClass,
    PortDevice, PortError, Presence,
};
use crate::NetdevError;

#[derive(Clone, Copy, Debug)]
struct Interface {
    ifindex: u32,
    mtu: u32,
    max_mtu: u32,
    /// How many times a port opened it.
    opens: u64,
    /// Whether a port has it open now.
    open: bool,
    /// Opening it fails (as a device that is busy or broken).
    refuses_open: bool,
}

/// The interfaces, by name (tests running at once use distinct names).
static INTERFACES: Mutex<BTreeMap<String, Interface>> = Mutex::new(BTreeMap::new());

fn interfaces() -> std::sync::MutexGuard<'static, BTreeMap<String, Interface>> {
    INTERFACES.lock().unwrap_or_else(|e| e.into_inner())
}

/// Makes interface `name` with MTU 1500 (at most 9000); a new index each time.
pub fn create(name: &str) {
    static NEXT_INDEX: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);
    let ifindex = NEXT_INDEX.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    interfaces().insert(
        name.to_string(),
        Interface {
            ifindex,
            mtu: 1500,
            max_mtu: 9000,
            opens: 0,
            open: false,
            refuses_open: false,
        },
    );
}

/// Removes interface `name`, as a veth is deleted.
pub fn remove(name: &str) {
    interfaces().remove(name);
}

/// The largest MTU interface `name` takes.
pub fn set_max_mtu(name: &str, max: u32) {
    if let Some(i) = interfaces().get_mut(name) {
        i.max_mtu = max;
    }
}

/// Makes opening interface `name` fail (or work again).
pub fn refuse_open(name: &str, refuse: bool) {
    if let Some(i) = interfaces().get_mut(name) {
        i.refuses_open = refuse;
    }
}

/// Interface `name`'s MTU, if it exists.
pub fn mtu(name: &str) -> Option<u32> {
    interfaces().get(name).map(|i| i.mtu)
}

/// How many times a port opened interface `name`.
pub fn opens(name: &str) -> u64 {
    interfaces().get(name).map_or(0, |i| i.opens)
}

/// Whether a port has interface `name` open now.
pub fn is_open(name: &str) -> bool {
    interfaces().get(name).is_some_and(|i| i.open)
}

pub struct Memory;

pub static CLASS: Memory = Memory;

impl PortClass for Memory {
    fn name(&self) -> &'static str {
        "memory"
    }

    fn options(&self) -> &'static [ClassOption] {
        &[ClassOption {
            key: "memory-flows",
            on_change: OnChange::Reopen,
            saved_default: Some("0"),
        }]
    }

    fn mtu_handling(&self) -> MtuHandling {
        MtuHandling::Interface
    }

    fn configure(
        &self,
        port: &str,
        options: &Options,
        _env: &ClassEnv,
    ) -> Result<Box<dyn PortDevice>, OptionError> {
        let flows = match options.get("memory-flows") {
            Some(v) => number("memory-flows", v, 0..=1024, "a number of flows, 0..1024")?,
            None => 0,
        };
        Ok(Box::new(MemoryDevice {
            name: port.to_string(),
            flows,
            open: false,
        }))
    }
}

struct MemoryDevice {
    name: String,
    flows: u32,
    open: bool,
}

impl PortDevice for MemoryDevice {
    fn presence(&self) -> Presence {
        Presence::Interface(interfaces().get(&self.name).map(|i| i.ifindex))
    }

    fn open(&mut self) -> Result<PortQueues, PortError> {
        let mut all = interfaces();
        let i = all
            .get_mut(&self.name)
            .ok_or_else(|| NetdevError::NoSuchInterface(self.name.clone()))?;
        if i.refuses_open {
            return Err(PortError::Netdev(NetdevError::Syscall {
                op: "open",
                ifname: self.name.clone(),
                source: std::io::Error::from_raw_os_error(libc::EBUSY),
            }));
        }
        i.opens += 1;
        i.open = true;
        self.open = true;
        Ok(vsw_datapath::ring::paced_ring_port(self.flows, 64, 0))
    }

    fn close(&mut self) {
        if std::mem::take(&mut self.open) {
            if let Some(i) = interfaces().get_mut(&self.name) {
                i.open = false;
            }
        }
    }

    fn mtu(&self) -> Option<u32> {
        mtu(&self.name)
    }

    fn set_mtu(&mut self, mtu: Option<u32>) -> Result<(), PortError> {
        let Some(mtu) = mtu else {
            return Ok(());
        };
        let refuse = |why: &str| PortError::Mtu {
            port: self.name.clone(),
            mtu,
            why: why.to_string(),
        };
        let mut all = interfaces();
        let i = all
            .get_mut(&self.name)
            .ok_or_else(|| refuse("no such interface"))?;
        if i.mtu == mtu {
            return Ok(());
        }
        // The rings of an open device are sized by its MTU.
        if i.open {
            return Err(refuse("the device is open"));
        }
        if !(68..=i.max_mtu).contains(&mtu) {
            return Err(refuse("Invalid argument (os error 22)"));
        }
        i.mtu = mtu;
        Ok(())
    }
}
