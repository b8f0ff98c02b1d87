//! An in-memory port: frames go in and come out through channels. It lets the datapath
//! be tested without devices or privileges.

use std::sync::mpsc::{self, Receiver, Sender, SyncSender, TrySendError};
use std::time::Duration;

use vsw_packet::ethernet::copy_frame;

use crate::port::{
    PacketMeta, PortQueues, RxBatch, RxDrops, RxPacket, RxQueue, StageError, TxOffloads, TxQueue,
    BATCH_SIZE,
};

/// The far end of an in-memory port: what a test uses to send into the switch and to
/// see what the switch sent out.
pub struct MemoryPeer {
    /// One sender per receive queue of the switch's port.
    to_switch: Vec<Sender<(Vec<u8>, PacketMeta)>>,
    from_switch: Receiver<(Vec<u8>, PacketMeta)>,
}

impl MemoryPeer {
    /// Sends into the port's first receive queue.
    pub fn send(&self, frame: &[u8]) {
        self.send_to(0, frame);
    }

    /// Sends into receive queue `queue` (modulo the number of queues).
    pub fn send_to(&self, queue: usize, frame: &[u8]) {
        // The switch side only goes away when the port is removed; then frames are lost,
        // as on a cable that was pulled.
        let _ = self.to_switch[queue % self.to_switch.len()]
            .send((frame.to_vec(), PacketMeta::default()));
    }

    /// Sends a frame with offload state (as a kernel hands over a super-frame).
    pub fn send_with(&self, frame: &[u8], meta: PacketMeta) {
        let _ = self.to_switch[0].send((frame.to_vec(), meta));
    }

    /// The next frame the switch sent out of this port, waiting at most `timeout`.
    pub fn recv_timeout(&self, timeout: Duration) -> Option<Vec<u8>> {
        self.recv_with(timeout).map(|(f, _)| f)
    }

    /// The next frame and the offload state it was sent with.
    pub fn recv_with(&self, timeout: Duration) -> Option<(Vec<u8>, PacketMeta)> {
        self.from_switch.recv_timeout(timeout).ok()
    }

    pub fn try_recv(&self) -> Option<Vec<u8>> {
        self.from_switch.try_recv().ok().map(|(f, _)| f)
    }
}

struct MemoryRx {
    incoming: Receiver<(Vec<u8>, PacketMeta)>,
    held: Vec<(Vec<u8>, PacketMeta)>,
}

impl RxQueue for MemoryRx {
    fn recv<'a>(&'a mut self, batch: &mut RxBatch<'a>) -> RxDrops {
        self.held.clear();
        while self.held.len() < BATCH_SIZE {
            match self.incoming.try_recv() {
                Ok(f) => self.held.push(f),
                Err(_) => break,
            }
        }
        for (f, meta) in &self.held {
            batch.push(RxPacket {
                data: f,
                meta: *meta,
            });
        }
        RxDrops::default()
    }

    fn release(&mut self) {
        self.held.clear();
    }
}

struct MemoryTx {
    outgoing: SyncSender<(Vec<u8>, PacketMeta)>,
    staged: Vec<(Vec<u8>, PacketMeta)>,
    max_frame: usize,
    offloads: TxOffloads,
}

impl TxQueue for MemoryTx {
    fn offloads(&self) -> TxOffloads {
        self.offloads
    }

    fn stage(&mut self, data: &[u8], meta: &PacketMeta) -> Result<(), StageError> {
        if self.staged.len() >= BATCH_SIZE {
            return Err(StageError::QueueFull);
        }
        let mut buf = vec![0u8; data.len() + 4];
        let n = copy_frame(&mut buf, data, meta.vlan).ok_or(StageError::TooBig)?;
        if n > self.max_frame {
            return Err(StageError::TooBig);
        }
        buf.truncate(n);
        // The offload state leaves with the frame, its offsets moved for a tag put back.
        let vnet = match meta.vlan {
            Some(_) => meta.vnet.shifted(4),
            None => meta.vnet,
        };
        let kept = PacketMeta {
            vnet,
            vlan: None,
            tunnel: meta.tunnel,
        };
        self.staged.push((buf, kept));
        Ok(())
    }

    fn pending(&self) -> usize {
        self.staged.len()
    }

    fn flush(&mut self) -> usize {
        let mut refused = 0;
        for f in self.staged.drain(..) {
            if let Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) =
                self.outgoing.try_send(f)
            {
                refused += 1;
            }
        }
        refused
    }
}

/// Creates an in-memory port whose peer holds up to `capacity` frames the switch sent
/// (more are refused, as a full device queue would).
pub fn memory_port(capacity: usize) -> (PortQueues, MemoryPeer) {
    memory_port_with_queues(1, capacity)
}

/// What an in-memory port's transmit side takes by default: everything (checksums
/// left open, super-frames, any size up to 64 KiB).
pub const MEMORY_OFFLOADS: TxOffloads = TxOffloads {
    csum: true,
    tso: true,
    merges: true,
    tunnel_tso: false,
    mtu: 65_535,
};

/// An in-memory port with `rx_queues` receive queues; every PMD gets a transmit queue
/// of its own, all feeding the one peer.
pub fn memory_port_with_queues(rx_queues: usize, capacity: usize) -> (PortQueues, MemoryPeer) {
    memory_port_with(rx_queues, capacity, MEMORY_OFFLOADS)
}

/// An in-memory port whose transmit side finishes only what `offloads` says.
pub fn memory_port_with(
    rx_queues: usize,
    capacity: usize,
    offloads: TxOffloads,
) -> (PortQueues, MemoryPeer) {
    let (outgoing, from_switch) = mpsc::sync_channel(capacity);
    let (senders, rx): (Vec<_>, Vec<_>) = (0..rx_queues.max(1))
        .map(|_| {
            let (to_switch, incoming) = mpsc::channel();
            let q: Box<dyn RxQueue> = Box::new(MemoryRx {
                incoming,
                held: Vec::with_capacity(BATCH_SIZE),
            });
            (to_switch, q)
        })
        .unzip();
    let new_tx = move || -> Box<dyn TxQueue> {
        Box::new(MemoryTx {
            outgoing: outgoing.clone(),
            staged: Vec::with_capacity(BATCH_SIZE),
            max_frame: 65535 + 18,
            offloads,
        })
    };
    let queues = PortQueues {
        rx,
        tx: new_tx(),
        tx_factory: Some(Box::new(move || Ok(new_tx()))),
    };
    let to_switch = senders;
    (
        queues,
        MemoryPeer {
            to_switch,
            from_switch,
        },
    )
}
