//! `vxlan` and `geneve`: tunnel ports (`crate::tunnel`), with Open vSwitch's options
//! (`vsw_tunnel::config`).

use vsw_datapath::PortQueues;
use vsw_packet::tunnel::TunnelKind;
use vsw_tunnel::config::{TunnelConfig, OPTION_KEYS};

use super::{
    bad, ClassEnv, ClassOption, MtuHandling, OnChange, OptionError, Options, PortClass, PortDevice,
    PortError, Presence,
};

pub struct Tunnel {
    kind: TunnelKind,
}

pub static VXLAN: Tunnel = Tunnel {
    kind: TunnelKind::Vxlan,
};
pub static GENEVE: Tunnel = Tunnel {
    kind: TunnelKind::Geneve,
};

impl PortClass for Tunnel {
    fn name(&self) -> &'static str {
        match self.kind {
            TunnelKind::Vxlan => "vxlan",
            TunnelKind::Geneve => "geneve",
        }
    }

    fn ovs_type(&self) -> Option<&'static str> {
        Some(self.name())
    }

    /// Open vSwitch's tunnel options, the same names in vsw (only those).
    fn options_of_ovs(&self, iface: &super::OvsInterface) -> Result<Options, String> {
        Ok(super::same_options(iface, OPTION_KEYS))
    }

    fn options(&self) -> &'static [ClassOption] {
        const fn reopen(key: &'static str) -> ClassOption {
            ClassOption {
                key,
                on_change: OnChange::Reopen,
                saved_default: None,
            }
        }
        const OPTIONS: &[ClassOption] = &[
            reopen("remote_ip"),
            reopen("local_ip"),
            reopen("key"),
            reopen("dst_port"),
            reopen("csum"),
            reopen("df_default"),
            reopen("tos"),
            reopen("ttl"),
            reopen("exts"),
            reopen("packet_type"),
        ];
        OPTIONS
    }

    fn mtu_handling(&self) -> MtuHandling {
        MtuHandling::NotSet
    }

    fn configure(
        &self,
        port: &str,
        options: &Options,
        env: &ClassEnv,
    ) -> Result<Box<dyn PortDevice>, OptionError> {
        let mine = options
            .iter()
            .filter(|(k, _)| OPTION_KEYS.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let config = TunnelConfig::parse(self.kind, &mine).map_err(|e| {
            let (k, v) = match &e {
                vsw_tunnel::config::TunnelConfigError::Bad { key, value, .. } => {
                    (key.clone(), value.clone())
                }
                _ => ("remote_ip".into(), String::new()),
            };
            bad(&k, &v, e.to_string())
        })?;
        Ok(Box::new(TunnelDevice {
            name: port.to_string(),
            bridge: env.bridge.clone(),
            tunnels: env.tunnels.clone(),
            config,
            registration: None,
        }))
    }
}

struct TunnelDevice {
    name: String,
    bridge: String,
    /// The tunnels' state it opens in.
    tunnels: std::sync::Arc<crate::tunnel::TunnelWorld>,
    config: TunnelConfig,
    /// While open.
    registration: Option<crate::tunnel::Registration>,
}

impl PortDevice for TunnelDevice {
    fn presence(&self) -> Presence {
        Presence::Own
    }

    fn open(&mut self) -> Result<PortQueues, PortError> {
        let (queues, registration) =
            crate::tunnel::open_tunnel(&self.tunnels, &self.name, &self.bridge, &self.config)?;
        self.registration = Some(registration);
        Ok(queues)
    }

    fn close(&mut self) {
        if let Some(r) = self.registration.take() {
            crate::tunnel::close_tunnel(&self.tunnels, &self.name, r);
        }
    }

    fn mtu(&self) -> Option<u32> {
        Some(crate::tunnel::inner_mtu(&self.config) as u32)
    }

    fn is_tunnel(&self) -> bool {
        true
    }

    fn set_mtu(&mut self, mtu: Option<u32>) -> Result<(), PortError> {
        super::mtu_not_set(&self.name, mtu)
    }
}
