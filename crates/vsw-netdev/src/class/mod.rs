//! Port classes: one type per kind of port (`type=`), as Open vSwitch's
//! `netdev_class` is. A class reads and checks the options only its ports take, says
//! how its ports' MTU is given, and makes one [`PortDevice`] per port: what opens and
//! closes the device, where its interface stands, what `show` says of it and what an
//! offload provider may use of it.
//!
//! What holds ports (vswd's switch) knows them only through this interface. A new kind
//! of port is a new file here and a line in [`PortClasses::standard`].

pub mod afpacket;
pub mod memory;
pub mod patch;
pub mod ring;
pub mod tap;
pub mod tunnel;
pub mod vhost;

use std::collections::BTreeMap;
use std::fmt;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use vsw_datapath::txbatch::FlushSetting;
use vsw_datapath::PortQueues;

use crate::NetdevError;

/// `KEY=VALUE` options as given.
pub type Options = BTreeMap<String, String>;

/// An option that cannot be taken; the message names the option and the problem.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OptionError {
    #[error("'{0}' is not KEY=VALUE")]
    NotKeyValue(String),
    #[error("unknown option '{key}' (known: {known})")]
    Unknown { key: String, known: String },
    #[error("bad value '{value}' for {key}: {why}")]
    BadValue {
        key: String,
        value: String,
        why: String,
    },
}

/// A bad value for option `key`, and why.
pub fn bad(key: &str, value: &str, why: impl Into<String>) -> OptionError {
    OptionError::BadValue {
        key: key.to_string(),
        value: value.to_string(),
        why: why.into(),
    }
}

/// What a port's device refused.
#[derive(Debug, thiserror::Error)]
pub enum PortError {
    #[error(transparent)]
    Option(#[from] OptionError),
    #[error(transparent)]
    Netdev(#[from] NetdevError),
    #[error("cannot set the MTU of {port} to {mtu}: {why}")]
    Mtu { port: String, mtu: u32, why: String },
    #[error("vhost-user socket {path}: {why}")]
    Socket { path: PathBuf, why: String },
}

/// What changing one of a class's options on a port does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnChange {
    /// Refused: the port must be deleted and added again (a socket a guest uses).
    Fixed,
    /// The device is opened anew with it.
    Reopen,
}

/// One option a class's ports take.
#[derive(Clone, Copy, Debug)]
pub struct ClassOption {
    pub key: &'static str,
    pub on_change: OnChange,
    /// Written into a port's saved options when it is added, so that a later vsw
    /// with another default keeps the port as it was.
    pub saved_default: Option<&'static str>,
}

/// How a port's MTU is given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MtuHandling {
    /// vsw sets none: `mtu_request` is refused.
    NotSet,
    /// The Linux interface's: set while the device is closed, since the device's
    /// rings are sized by it.
    Interface,
    /// vsw's own, which the device holds its peer to: it changes under an open device.
    Live,
}

/// Where a port's device stands outside vsw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Presence {
    /// vsw makes the device itself when it opens it: it does not come and go.
    Own,
    /// A Linux interface that comes and goes on its own, with its index while it exists.
    Interface(Option<u32>),
}

/// What every port's class may need from where the ports live.
#[derive(Clone, Debug)]
pub struct ClassEnv {
    /// vswd's run directory (where its control socket is): vhost-user sockets go there
    /// by default.
    pub run_dir: PathBuf,
    /// Where kernel fast paths are pinned (`offload-persist`): an interface whose
    /// pinned fast path forwards while its port opens keeps those flows' frames off
    /// vsw's socket from the start.
    pub bpf_pin_root: PathBuf,
    /// The bridge the port is on (a tunnel port's Geneve options follow that
    /// bridge's TLV map).
    pub bridge: String,
    /// The datapath's tunnels: what tunnel ports and `internal` ports open in.
    pub tunnels: std::sync::Arc<crate::tunnel::TunnelWorld>,
}

/// One kind of port.
pub trait PortClass: Sync {
    /// The name `type=` gives it.
    fn name(&self) -> &'static str;

    /// The options only its ports take.
    fn options(&self) -> &'static [ClassOption] {
        &[]
    }

    fn mtu_handling(&self) -> MtuHandling;

    /// The transmit batching its ports have when none is set.
    fn default_tx_flush(&self) -> FlushSetting {
        FlushSetting::Switch
    }

    /// Reads and checks a port's options (only this class's keys, as given) into its
    /// device, not yet opened.
    fn configure(
        &self,
        port: &str,
        options: &Options,
        env: &ClassEnv,
    ) -> Result<Box<dyn PortDevice>, OptionError>;

    /// Takes away what an earlier run of vsw that did not stop cleanly left on a port's
    /// device; called before anything is attached.
    fn remove_leftovers(&self, _port: &str) {}

    /// The Open vSwitch interface type (`Interface:type`) this class carries, if
    /// any: OVSDB's interfaces of that type become its ports.
    fn ovs_type(&self) -> Option<&'static str> {
        None
    }

    /// The options of a port made of Open vSwitch interface `iface` (of this class's
    /// `ovs_type`); `Err`: why such an interface cannot be a port.
    fn options_of_ovs(&self, _iface: &OvsInterface) -> Result<Options, String> {
        Ok(Options::new())
    }
}

/// An Open vSwitch `Interface` row as a port class reads it.
pub struct OvsInterface<'a> {
    pub name: &'a str,
    /// Its `options` column.
    pub options: &'a Options,
    /// Where Open vSwitch puts the sockets it serves (`vhost-server-path` of a
    /// `dpdkvhostuser` port).
    pub run_dir: &'a str,
}

/// `keys` of Open vSwitch's `options`, as this class's options of the same names.
fn same_options(iface: &OvsInterface, keys: &[&str]) -> Options {
    keys.iter()
        .filter_map(|k| Some((k.to_string(), iface.options.get(*k)?.clone())))
        .collect()
}

impl fmt::Debug for dyn PortClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl PartialEq for dyn PortClass {
    fn eq(&self, other: &Self) -> bool {
        self.name() == other.name()
    }
}

impl Eq for dyn PortClass {}

/// One port's device, as its class handles it: configured once, then opened and
/// closed as the port's life goes.
pub trait PortDevice: Send {
    fn presence(&self) -> Presence;

    /// Opens the device; its queues go to the datapath, which closes them when it lets
    /// them go.
    fn open(&mut self) -> Result<PortQueues, PortError>;

    /// Lets go of what the device object holds of an opened device (the datapath has
    /// let go of its queues).
    fn close(&mut self) {}

    /// The MTU the port has now, if it has one.
    fn mtu(&self) -> Option<u32>;

    /// Gives the port the MTU asked for (`None`: the device's default, or leaves an
    /// interface's MTU as it is). With [`MtuHandling::Interface`], only while closed.
    fn set_mtu(&mut self, mtu: Option<u32>) -> Result<(), PortError>;

    /// The receive queues the device has.
    fn rx_queues(&self) -> usize {
        1
    }

    /// A socket file the port owns (a vhost-user port's): no other port, and not vswd's
    /// control socket, may use it.
    fn socket_path(&self) -> Option<&Path> {
        None
    }

    /// Checks, before anything changes, that opening the device takes nothing that is
    /// not the port's.
    fn check_free(&self) -> Result<(), PortError> {
        Ok(())
    }

    /// What its peer (a VM's driver) did and negotiated, for `show`.
    fn peer_status(&self) -> Option<String> {
        None
    }

    /// A vhost-user guest's counters.
    fn guest_counters(&self) -> Option<vsw_protocol::GuestCounters> {
        None
    }

    /// The peer port's name, for a patch port (translation goes on in its bridge).
    fn patch_peer(&self) -> Option<&str> {
        None
    }

    /// Whether it is a tunnel port (translation pushes its outer headers itself
    /// where the tunnels' state knows the way).
    fn is_tunnel(&self) -> bool {
        false
    }

    /// vsw's receiving socket on the open device, for an offload provider that filters
    /// what reaches it.
    fn offload_socket(&self) -> Option<&OwnedFd> {
        None
    }
}

/// The classes ports may be of.
#[derive(Clone)]
pub struct PortClasses {
    classes: Vec<&'static dyn PortClass>,
}

impl PortClasses {
    /// Every class vsw has; the first is the default type.
    pub fn standard() -> PortClasses {
        PortClasses {
            classes: vec![
                &afpacket::CLASS,
                &tap::CLASS,
                &tap::INTERNAL,
                &vhost::SERVER,
                &vhost::CLIENT,
                &patch::CLASS,
                &tunnel::VXLAN,
                &tunnel::GENEVE,
                &ring::CLASS,
            ],
        }
    }

    /// These classes and `class` (tests add [`memory::CLASS`]).
    pub fn with(mut self, class: &'static dyn PortClass) -> PortClasses {
        self.classes.push(class);
        self
    }

    /// The type a port has when none is given.
    pub fn default_class(&self) -> &'static dyn PortClass {
        self.classes[0]
    }

    pub fn get(&self, name: &str) -> Option<&'static dyn PortClass> {
        self.classes.iter().copied().find(|c| c.name() == name)
    }

    /// The class names, for messages: "a, b and c".
    /// The class that carries Open vSwitch interfaces of type `ovs_type` (`""` is
    /// `system`, as in Open vSwitch).
    pub fn by_ovs_type(&self, ovs_type: &str) -> Option<&'static dyn PortClass> {
        let t = if ovs_type.is_empty() {
            "system"
        } else {
            ovs_type
        };
        self.classes
            .iter()
            .copied()
            .find(|c| c.ovs_type() == Some(t))
    }

    /// Every Open vSwitch interface type these classes carry, sorted.
    pub fn ovs_types(&self) -> Vec<&'static str> {
        let mut t: Vec<&'static str> = self.classes.iter().filter_map(|c| c.ovs_type()).collect();
        t.sort_unstable();
        t
    }

    pub fn names(&self) -> String {
        join_and(self.classes.iter().map(|c| c.name()))
    }

    /// The classes whose ports take option `key`.
    pub fn taking(&self, key: &str) -> Vec<&'static str> {
        self.classes
            .iter()
            .filter(|c| c.options().iter().any(|o| o.key == key))
            .map(|c| c.name())
            .collect()
    }

    /// The classes whose MTU vsw sets.
    pub fn with_mtu(&self) -> Vec<&'static str> {
        self.classes
            .iter()
            .filter(|c| c.mtu_handling() != MtuHandling::NotSet)
            .map(|c| c.name())
            .collect()
    }

    /// Every class's option keys, each once.
    pub fn option_keys(&self) -> Vec<&'static str> {
        let mut keys: Vec<&'static str> = Vec::new();
        for o in self.classes.iter().flat_map(|c| c.options()) {
            if !keys.contains(&o.key) {
                keys.push(o.key);
            }
        }
        keys
    }
}

impl Default for PortClasses {
    fn default() -> Self {
        PortClasses::standard()
    }
}

/// "a", "a and b", "a, b and c".
pub fn join_and<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let names: Vec<&str> = names.collect();
    match names.split_last() {
        None => String::new(),
        Some((last, [])) => last.to_string(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
    }
}

/// `set_mtu` of a device whose MTU vsw does not set.
pub(crate) fn mtu_not_set(port: &str, mtu: Option<u32>) -> Result<(), PortError> {
    match mtu {
        None => Ok(()),
        Some(mtu) => Err(PortError::Mtu {
            port: port.to_string(),
            mtu,
            why: "vsw does not set this port's MTU".into(),
        }),
    }
}

/// A whole number option within `range`, or `why` it is not.
pub(crate) fn number<T>(
    key: &str,
    value: &str,
    range: std::ops::RangeInclusive<T>,
    why: &str,
) -> Result<T, OptionError>
where
    T: std::str::FromStr + PartialOrd,
{
    value
        .parse()
        .ok()
        .filter(|n| range.contains(n))
        .ok_or_else(|| bad(key, value, why))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each Open vSwitch interface type is one class's, read into that class's
    /// options; `""` is `system`, an afpacket port.
    #[test]
    fn open_vswitch_types_are_the_classes_own() {
        let classes = PortClasses::standard();
        assert_eq!(
            classes.ovs_types(),
            [
                "dpdkvhostuser",
                "dpdkvhostuserclient",
                "geneve",
                "internal",
                "patch",
                "system",
                "tap",
                "vxlan"
            ]
        );
        assert_eq!(classes.by_ovs_type("").map(|c| c.name()), Some("afpacket"));
        assert!(classes.by_ovs_type("gre").is_none());
        let options: Options = [
            ("n_rxq_desc".to_string(), "2048".to_string()),
            ("peer".to_string(), "p1".to_string()),
        ]
        .into();
        let iface = OvsInterface {
            name: "vm1",
            options: &options,
            run_dir: "/run/openvswitch",
        };
        let of = |t: &str| classes.by_ovs_type(t).unwrap().options_of_ovs(&iface);
        assert_eq!(of("system").unwrap()["rx-ring-frames"], "2048");
        assert_eq!(of("patch").unwrap()["peer"], "p1");
        assert_eq!(
            of("dpdkvhostuser").unwrap()["vhost-server-path"],
            "/run/openvswitch/vm1"
        );
        assert!(of("dpdkvhostuserclient")
            .unwrap_err()
            .contains("vhost-server-path"));
        assert!(of("vxlan").unwrap().is_empty(), "only tunnel options");
    }

    #[test]
    fn names_and_options_are_unique_per_class() {
        let classes = PortClasses::standard().with(&memory::CLASS);
        let mut names = std::collections::HashSet::new();
        for c in &classes.classes {
            assert!(names.insert(c.name()), "{} twice", c.name());
            let mut keys = std::collections::HashSet::new();
            for o in c.options() {
                assert!(keys.insert(o.key), "{}: {} twice", c.name(), o.key);
            }
        }
        assert_eq!(
            PortClasses::standard().names(),
            "afpacket, tap, internal, vhostuser, vhostuserclient, patch, vxlan, geneve and ring"
        );
        assert_eq!(join_and(["a"].into_iter()), "a");
        assert_eq!(join_and(["a", "b"].into_iter()), "a and b");
    }

    #[test]
    fn every_class_checks_its_options() {
        let env = ClassEnv {
            run_dir: PathBuf::from("/nonexistent"),
            bpf_pin_root: PathBuf::from("/nonexistent"),
            bridge: "br0".into(),
            tunnels: crate::tunnel::TunnelWorld::new(),
        };
        let classes = PortClasses::standard();
        for (class, key, value) in [
            ("afpacket", "afpacket-mode", "fast"),
            ("ring", "ring-flows", "-1"),
            ("ring", "ring-rate", "x"),
            ("ring", "ring-frame-size", "63"),
            ("vhostuser", "vhost-server-path", "relative.sock"),
            ("vhostuser", "vhost-sock-mode", "0400"),
            ("vhostuser", "vhost-sock-group", "a b"),
            ("patch", "peer", "p0"),
            ("patch", "peer", "a/b"),
        ] {
            let options = Options::from([(key.to_string(), value.to_string())]);
            let e = classes
                .get(class)
                .unwrap()
                .configure("p0", &options, &env)
                .err()
                .unwrap_or_else(|| panic!("{class} took {key}={value}"));
            assert!(e.to_string().contains(key), "{class} {key}: {e}");
        }
        // A tunnel's key and its remote may come from the flows; a remote that is
        // no address is refused, naming the option.
        let tunnel = |options: &[(&str, &str)]| {
            let o: Options = options
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            classes.get("vxlan").unwrap().configure("vx0", &o, &env)
        };
        assert!(tunnel(&[("remote_ip", "198.18.5.1"), ("key", "flow")]).is_ok());
        assert!(tunnel(&[("remote_ip", "flow"), ("key", "42")]).is_ok());
        let e = tunnel(&[("remote_ip", "nowhere"), ("key", "42")])
            .err()
            .unwrap();
        assert!(e.to_string().contains("remote_ip"), "{e}");
        // A client connects to the VM's socket: it must be named.
        let e = classes
            .get("vhostuserclient")
            .unwrap()
            .configure("p0", &Options::new(), &env)
            .err()
            .unwrap();
        assert!(e.to_string().contains("vhost-server-path"), "{e}");
    }
}
