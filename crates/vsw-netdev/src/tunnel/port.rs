//! A tunnel port as the datapath sees it: a number, and no queue a packet waits
//! in. Its packets get their outer headers in their own datapath pass, and lose
//! them in theirs (vsw-datapath's `TunnelPush` and `TunnelPop`, translated from the
//! tunnels' state: `world.rs`). Its transmit queue takes only what a push could
//! not be made for — no room in front of the frame, a super-frame that cannot be
//! cut — and drops it, counted (`not_pushed`).

use std::net::IpAddr;
use std::sync::Arc;

use vsw_datapath::{PacketMeta, PortQueues, StageError, TxOffloads, TxQueue};
use vsw_tunnel::config::{FromFlow, TunnelConfig};

use super::world::{PortEnd, Registration, TunnelDrop, TunnelWorld};

/// The largest inner IP packet, for an underlay MTU of 1,500 and this tunnel's
/// outer headers (outer IP, UDP, an 8-byte VXLAN or option-less Geneve header, the
/// inner Ethernet header): 1,450 over IPv4, as Linux's vxlan device.
pub fn inner_mtu(config: &TunnelConfig) -> usize {
    let ip = match config.remote {
        FromFlow::Fixed(IpAddr::V6(_)) => 40,
        _ => 20,
    };
    1500 - ip - 8 - 8 - 14
}

/// Opens tunnel port `name` of bridge `bridge` in `world`; the registration is what
/// closes it again.
pub fn open_tunnel(
    world: &Arc<TunnelWorld>,
    name: &str,
    bridge: &str,
    config: &TunnelConfig,
) -> Result<(PortQueues, Registration), crate::NetdevError> {
    let registration = world.register_port(
        name,
        PortEnd {
            config: config.clone(),
            bridge: Arc::from(bridge),
            metadata0: None,
        },
    );
    let (w, mtu) = (world.clone(), inner_mtu(config));
    let queues = PortQueues {
        rx: Vec::new(),
        tx: Box::new(NotPushed {
            world: world.clone(),
            mtu,
        }),
        tx_factory: Some(Box::new(move || {
            Ok(Box::new(NotPushed {
                world: w.clone(),
                mtu,
            }))
        })),
    };
    Ok((queues, registration))
}

/// Lets go of tunnel port `name`, opened as `registration` (its device closed),
/// unless it was opened again since.
pub fn close_tunnel(world: &TunnelWorld, name: &str, registration: Registration) {
    world.unregister_port(name, registration);
}

/// What a packet no push was made for reaches: dropped, counted.
struct NotPushed {
    world: Arc<TunnelWorld>,
    /// The inner MTU, which the push fits packets to.
    mtu: usize,
}

impl TxQueue for NotPushed {
    /// Takes anything as it is (nothing is cut or finished for a packet that is
    /// dropped). Its MTU is the tunnel's inner MTU, which pushes fit packets to.
    /// Segments are never merged for it: they leave the host, and a peer switch
    /// gets what the sender sent.
    fn offloads(&self) -> TxOffloads {
        TxOffloads {
            csum: true,
            tso: true,
            merges: false,
            tunnel_tso: true,
            mtu: self.mtu,
        }
    }

    fn stage(&mut self, _data: &[u8], _meta: &PacketMeta) -> Result<(), StageError> {
        self.world.count_drop(TunnelDrop::NotPushed);
        Err(StageError::TooBig)
    }

    fn pending(&self) -> usize {
        0
    }

    fn flush(&mut self) -> usize {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vsw_packet::tunnel::TunnelKind;

    /// A tunnel's frames leave the host: a sender's segments are never merged for
    /// it (a peer switch gets what was sent); and what reaches its queue is a
    /// counted drop.
    #[test]
    fn a_tunnel_ports_queue_merges_nothing_and_drops_what_reaches_it() {
        let options = [("remote_ip".to_string(), "198.18.0.1".to_string())].into();
        let config = TunnelConfig::parse(TunnelKind::Geneve, &options).unwrap();
        let world = TunnelWorld::new();
        let mut q = NotPushed {
            world: world.clone(),
            mtu: inner_mtu(&config),
        };
        let o = q.offloads();
        assert!(!o.merges && o.mtu == 1450, "{o:?}");
        assert_eq!(
            q.stage(&[0u8; 64], &PacketMeta::default()),
            Err(StageError::TooBig)
        );
        let dropped = world.drops().into_iter().find(|(r, _)| *r == "not_pushed");
        assert_eq!(dropped, Some(("not_pushed", 1)));
    }
}
