//! `vhostuser` and `vhostuserclient`: a VM's virtio-net device through a vhost-user
//! socket, which vsw makes and listens on (`vhostuser`) or which the VM's QEMU made and
//! vsw connects to (`vhostuserclient`). The port's MTU is vsw's own, which it holds the
//! guest to; the socket is fixed while the port lives, since a guest uses it.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use vsw_datapath::txbatch::FlushSetting;
use vsw_datapath::PortQueues;

use super::{
    bad, ClassEnv, ClassOption, MtuHandling, OnChange, OptionError, Options, PortClass, PortDevice,
    PortError, Presence,
};
use crate::unix_socket::{group_id, path_use, PathUse};
use crate::vhost::{open_client, open_server, GuestStatus};

/// A port's MTU without `mtu_request`: what a guest's frontend assumes without
/// `host_mtu`.
pub const DEFAULT_MTU: u32 = 1500;

/// A listening socket's mode when none is set: only its owner (root) may connect.
pub const DEFAULT_SOCK_MODE: u32 = 0o600;

/// Which end of the socket vsw is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// vsw makes the socket and listens; the VM's frontend connects.
    Server,
    /// The VM's QEMU made the socket; vsw connects, and reconnects.
    Client,
}

pub struct VhostUser {
    side: Side,
}

pub static SERVER: VhostUser = VhostUser { side: Side::Server };
pub static CLIENT: VhostUser = VhostUser { side: Side::Client };

const fn fixed(key: &'static str) -> ClassOption {
    ClassOption {
        key,
        on_change: OnChange::Fixed,
        saved_default: None,
    }
}

impl PortClass for VhostUser {
    fn name(&self) -> &'static str {
        match self.side {
            Side::Server => "vhostuser",
            Side::Client => "vhostuserclient",
        }
    }

    fn ovs_type(&self) -> Option<&'static str> {
        Some(match self.side {
            Side::Server => "dpdkvhostuser",
            Side::Client => "dpdkvhostuserclient",
        })
    }

    /// A server socket is named after the interface in Open vSwitch's run
    /// directory; a client's is the one `options:vhost-server-path` names.
    fn options_of_ovs(&self, iface: &super::OvsInterface) -> Result<Options, String> {
        let path = match self.side {
            Side::Server => format!("{}/{}", iface.run_dir, iface.name),
            Side::Client => iface
                .options
                .get("vhost-server-path")
                .cloned()
                .ok_or("dpdkvhostuserclient needs options:vhost-server-path")?,
        };
        Ok([("vhost-server-path".to_string(), path)].into())
    }

    fn options(&self) -> &'static [ClassOption] {
        const SERVER_OPTIONS: &[ClassOption] = &[
            fixed("vhost-server-path"),
            fixed("vhost-sock-mode"),
            fixed("vhost-sock-group"),
        ];
        const CLIENT_OPTIONS: &[ClassOption] = &[fixed("vhost-server-path")];
        match self.side {
            Side::Server => SERVER_OPTIONS,
            Side::Client => CLIENT_OPTIONS,
        }
    }

    fn mtu_handling(&self) -> MtuHandling {
        MtuHandling::Live
    }

    /// A guest may poll or wait for interrupts: `auto` follows it.
    fn default_tx_flush(&self) -> FlushSetting {
        FlushSetting::Auto
    }

    fn configure(
        &self,
        port: &str,
        options: &Options,
        env: &ClassEnv,
    ) -> Result<Box<dyn PortDevice>, OptionError> {
        let mut d = VhostDevice {
            side: self.side,
            path: env.run_dir.join(format!("{port}.sock")),
            sock_mode: DEFAULT_SOCK_MODE,
            sock_group: None,
            mtu: DEFAULT_MTU,
            guest: None,
        };
        for (k, v) in options {
            match k.as_str() {
                "vhost-server-path" => {
                    if !v.starts_with('/') {
                        return Err(bad(k, v, "an absolute path for the socket"));
                    }
                    d.path = PathBuf::from(v);
                }
                "vhost-sock-mode" => {
                    d.sock_mode = u32::from_str_radix(v, 8)
                        .ok()
                        .filter(|m| *m <= 0o777 && m & 0o600 == 0o600)
                        .ok_or_else(|| {
                            bad(
                            k,
                            v,
                            "permission bits in octal that let the owner read and write, e.g. 0660",
                        )
                        })?
                }
                "vhost-sock-group" => {
                    let name_ok = !v.is_empty()
                        && v.len() <= 32
                        && v.chars()
                            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
                    if !name_ok {
                        return Err(bad(k, v, "a group name or number"));
                    }
                    d.sock_group = Some(v.clone());
                }
                _ => {}
            }
        }
        if self.side == Side::Client && !options.contains_key("vhost-server-path") {
            return Err(bad(
                "vhost-server-path",
                "",
                "a vhostuserclient port connects to the VM's socket: name it",
            ));
        }
        Ok(Box::new(d))
    }
}

struct VhostDevice {
    side: Side,
    path: PathBuf,
    sock_mode: u32,
    /// The group that owns a listening socket (a name or a number), so that a frontend
    /// running as another user (libvirt's QEMU) can connect.
    sock_group: Option<String>,
    mtu: u32,
    /// What vsw knows of the guest; kept after the device closes, for `show`.
    guest: Option<Arc<GuestStatus>>,
}

impl VhostDevice {
    fn socket_error(&self, why: String) -> PortError {
        PortError::Socket {
            path: self.path.clone(),
            why,
        }
    }
}

impl PortDevice for VhostDevice {
    fn presence(&self) -> Presence {
        Presence::Own
    }

    fn open(&mut self) -> Result<PortQueues, PortError> {
        let (queues, guest) = match self.side {
            Side::Server => {
                let gid = match &self.sock_group {
                    Some(g) => Some(group_id(g).map_err(|e| self.socket_error(e.to_string()))?),
                    None => None,
                };
                open_server(&self.path, self.sock_mode, gid)?
            }
            Side::Client => open_client(&self.path)?,
        };
        guest.mtu.store(self.mtu, Ordering::Relaxed);
        self.guest = Some(guest);
        Ok(queues)
    }

    fn mtu(&self) -> Option<u32> {
        Some(self.mtu)
    }

    /// Frames are held to the new MTU from the next batch: nothing reopens.
    fn set_mtu(&mut self, mtu: Option<u32>) -> Result<(), PortError> {
        self.mtu = mtu.unwrap_or(DEFAULT_MTU);
        if let Some(g) = &self.guest {
            g.mtu.store(self.mtu, Ordering::Relaxed);
        }
        Ok(())
    }

    fn socket_path(&self) -> Option<&Path> {
        Some(&self.path)
    }

    /// vsw replaces only a socket nobody listens on.
    fn check_free(&self) -> Result<(), PortError> {
        if self.side == Side::Client {
            return Ok(());
        }
        match path_use(&self.path) {
            PathUse::NotASocket => {
                Err(self
                    .socket_error("exists and is not a socket; vsw replaces only sockets".into()))
            }
            PathUse::LiveSocket => Err(self.socket_error("another process listens on it".into())),
            PathUse::Free | PathUse::StaleSocket => Ok(()),
        }
    }

    fn peer_status(&self) -> Option<String> {
        let g = self.guest.as_ref()?;
        Some(format!(
            "link {}, features {:#x}, {}; notifications {}, too long {}, bad chains {}, bad queues {}, no buffer {}, memory faults {}",
            if g.link_up.load(Ordering::Relaxed) { "up" } else { "down" },
            g.features.load(Ordering::Relaxed),
            g.describe_rx_queues(),
            g.notifications.load(Ordering::Relaxed),
            g.too_long.load(Ordering::Relaxed),
            g.bad_chains.load(Ordering::Relaxed),
            g.bad_queues.load(Ordering::Relaxed),
            g.no_buffer.load(Ordering::Relaxed),
            g.memory_faults(),
        ))
    }

    fn guest_counters(&self) -> Option<vsw_protocol::GuestCounters> {
        let g = self.guest.as_ref()?;
        Some(vsw_protocol::GuestCounters {
            notifications: g.notifications.load(Ordering::Relaxed),
            memory_faults: g.memory_faults(),
            too_long: g.too_long.load(Ordering::Relaxed),
            bad_chains: g.bad_chains.load(Ordering::Relaxed),
            bad_queues: g.bad_queues.load(Ordering::Relaxed),
            no_buffer: g.no_buffer.load(Ordering::Relaxed),
        })
    }
}
