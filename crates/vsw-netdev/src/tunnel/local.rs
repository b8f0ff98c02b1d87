//! A bridge's LOCAL port (its `internal` port) as the underlay end of tunnels: a
//! second receive queue through which tunnel ports hand it their encapsulated
//! frames, and a check in front of its transmit queue that takes tunnel packets out
//! (decapsulated, to their port) and learns neighbours from ARP and neighbour
//! discovery, before the rest goes to the host.

use std::sync::Arc;

use vsw_datapath::{PacketMeta, PortQueues, StageError, TxFactory, TxOffloads, TxQueue};
use vsw_packet::key::{extract, FlowKey};
use vsw_packet::tunnel::{decap, DecapError, Decapped};
use vsw_packet::vnet::{VNET_F_DATA_VALID, VNET_F_NEEDS_CSUM};
use vsw_packet::wire::ip::{IPPROTO_ICMPV6, IPPROTO_UDP};
use vsw_packet::{EtherType, MacAddr};
use vsw_tunnel::config::FromFlow;

use super::world::{world, BridgeEnd, PortEnd, Snapshot};
use crate::channel::Channel;

/// Makes internal port `name`'s queues the underlay end of tunnels.
pub(crate) fn open_local(name: &str, mut queues: PortQueues) -> PortQueues {
    let mac = crate::interface::mac(name).unwrap_or(MacAddr::ZERO);
    let inject = Channel::new();
    let rx = inject.reader().expect("a new channel has no reader");
    world().register_bridge(name, BridgeEnd { mac, inject });
    queues.rx.push(Box::new(rx));
    let bridge: Arc<str> = Arc::from(name);
    let factory = queues.tx_factory.take();
    queues.tx = Box::new(LocalTx {
        inner: queues.tx,
        bridge: bridge.clone(),
    });
    queues.tx_factory = factory.map(|f| -> TxFactory {
        Box::new(move || {
            f().map(|q| -> Box<dyn TxQueue> {
                Box::new(LocalTx {
                    inner: q,
                    bridge: bridge.clone(),
                })
            })
        })
    });
    queues
}

/// Internal port `name` is closed: tunnels no longer reach the underlay through it.
pub(crate) fn close_local(name: &str) {
    world().unregister_bridge(name);
}

struct LocalTx {
    inner: Box<dyn TxQueue>,
    bridge: Arc<str>,
}

/// The ethertype and (for IP) the protocol of an untagged frame, cheaply.
fn kind_of(data: &[u8]) -> (u16, u8) {
    let ethertype = match data.get(12..14) {
        Some(t) => u16::from_be_bytes([t[0], t[1]]),
        None => return (0, 0),
    };
    let proto = match ethertype {
        EtherType::IPV4 => data.get(14 + 9).copied().unwrap_or(0),
        EtherType::IPV6 => data.get(14 + 6).copied().unwrap_or(0),
        _ => 0,
    };
    (ethertype, proto)
}

/// The open tunnel port a decapsulated packet is for.
fn port_for<'a>(snap: &'a Snapshot, d: &Decapped<'_>) -> Option<&'a PortEnd> {
    snap.ports.iter().map(|(_, p)| p).find(|p| {
        p.config.kind == d.meta.kind
            && (match p.config.remote {
                FromFlow::Fixed(r) => r == d.meta.src,
                FromFlow::Flow => true,
            })
            && (match p.config.key {
                FromFlow::Fixed(k) => k == d.meta.id,
                FromFlow::Flow => true,
            })
    })
}

impl LocalTx {
    /// Takes a tunnel packet for an open tunnel port out of the host's way: `true`
    /// when it was taken (forwarded to its port, or dropped as malformed).
    fn took_tunnel_packet(&self, data: &[u8], meta: &PacketMeta) -> bool {
        let w = world();
        let snap = w.snapshot();
        if snap.ports.is_empty() {
            return false;
        }
        // The sender's device vouches for the checksum (a local sender's, left to
        // finish; or one the kernel checked).
        let vouched = meta.vnet.flags & (VNET_F_NEEDS_CSUM | VNET_F_DATA_VALID) != 0;
        match decap(data, &snap.listen, vouched, |_, _| false) {
            Ok(d) => match port_for(&snap, &d) {
                Some(port) => {
                    let inner = d.inner;
                    let _ = port.rx.send_with(PacketMeta::default(), |buf| {
                        buf.get_mut(..inner.len())?.copy_from_slice(inner);
                        Some(inner.len())
                    });
                    true
                }
                // For the host's own socket on that port, not a tunnel port's.
                None => false,
            },
            Err(DecapError::NotTunnel) => false,
            Err(e) => {
                w.count_drop(e.reason());
                true
            }
        }
    }
}

impl TxQueue for LocalTx {
    fn offloads(&self) -> TxOffloads {
        self.inner.offloads()
    }

    fn receiver_may_poll(&self) -> bool {
        self.inner.receiver_may_poll()
    }

    fn receiver_polls(&self) -> bool {
        self.inner.receiver_polls()
    }

    fn stage(&mut self, data: &[u8], meta: &PacketMeta) -> Result<(), StageError> {
        match kind_of(data) {
            (EtherType::ARP, _) | (EtherType::IPV6, IPPROTO_ICMPV6) => {
                let mut key = FlowKey::default();
                if extract(data, 0, meta.vlan, &mut key).is_ok() {
                    if let Some((ip, mac)) = vsw_tunnel::neigh::neighbour_in(&key) {
                        world().saw_neighbour(ip, mac, &self.bridge);
                    }
                }
            }
            (EtherType::IPV4 | EtherType::IPV6, IPPROTO_UDP)
                if self.took_tunnel_packet(data, meta) =>
            {
                return Ok(());
            }
            _ => {}
        }
        self.inner.stage(data, meta)
    }

    fn pending(&self) -> usize {
        self.inner.pending()
    }

    fn flush(&mut self) -> usize {
        self.inner.flush()
    }
}
