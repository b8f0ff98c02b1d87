//! Patch ports: two ports joined in memory, usually on two bridges of one vswd (as
//! Open vSwitch joins bridges, br-int to br-ex). What one sends the other receives.
//!
//! In vsw each bridge has a datapath and PMDs of its own, so a patch is a queue
//! between PMDs: each direction is a channel of preallocated buffers — a free list
//! and a list of filled frames, both lock-free bounded queues (`crossbeam-queue`) —
//! so sending copies a frame into a free buffer and receiving borrows it until the
//! batch is released: nothing is allocated and no lock is taken per packet. Frames
//! sent while the peer is not open are dropped (counted as a full queue), as on a
//! cable with nothing at the other end.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};

use vsw_datapath::{PacketMeta, PortQueues, StageError, TxOffloads, TxQueue};
use vsw_packet::ethernet::copy_frame;

use crate::channel::{Channel, CHANNEL_FRAME};

/// The largest frame a patch carries (a 9,216-byte MTU's).
pub const PATCH_MTU: usize = 9216;

#[derive(Debug, thiserror::Error)]
pub enum PatchError {
    #[error("patch port {0} is already open")]
    AlreadyOpen(String),
    #[error("a patch port cannot be its own peer ({0})")]
    OwnPeer(String),
}

/// The channels, by (sending port, receiving port); held by the open ports only, so
/// a patch both of whose ends are gone frees its buffers.
fn channels() -> &'static Mutex<BTreeMap<(String, String), Weak<Channel>>> {
    static CHANNELS: Mutex<BTreeMap<(String, String), Weak<Channel>>> = Mutex::new(BTreeMap::new());
    &CHANNELS
}

fn channel(from: &str, to: &str) -> Arc<Channel> {
    let mut all = channels().lock().unwrap_or_else(PoisonError::into_inner);
    all.retain(|_, c| c.strong_count() > 0);
    let key = (from.to_string(), to.to_string());
    if let Some(c) = all.get(&key).and_then(Weak::upgrade) {
        return c;
    }
    let c = Channel::new();
    all.insert(key, Arc::downgrade(&c));
    c
}

/// Opens patch port `name`, joined to port `peer` (which may open before or after).
pub fn open(name: &str, peer: &str) -> Result<PortQueues, PatchError> {
    if name == peer {
        return Err(PatchError::OwnPeer(name.to_string()));
    }
    let rx = channel(peer, name)
        .reader()
        .ok_or_else(|| PatchError::AlreadyOpen(name.to_string()))?;
    let outgoing = channel(name, peer);
    let tx = outgoing.clone();
    Ok(PortQueues {
        rx: vec![Box::new(rx)],
        tx: Box::new(PatchTx { channel: outgoing }),
        tx_factory: Some(Box::new(move || {
            Ok(Box::new(PatchTx {
                channel: tx.clone(),
            }))
        })),
    })
}

/// What a port sends goes straight to its peer's channel (no batching: the peer is
/// a queue in memory, not a device to kick).
struct PatchTx {
    channel: Arc<Channel>,
}

impl TxQueue for PatchTx {
    /// Checksums left open travel with the frame (the far side's ports finish them);
    /// super-frames are cut before they cross.
    fn offloads(&self) -> TxOffloads {
        TxOffloads {
            csum: true,
            tso: false,
            tunnel_tso: false,
            mtu: PATCH_MTU,
        }
    }

    fn stage(&mut self, data: &[u8], meta: &PacketMeta) -> Result<(), StageError> {
        if data.len() > PATCH_MTU + 18 {
            return Err(StageError::TooBig);
        }
        // The offload state crosses with the frame, its offsets moved for a tag put
        // back.
        let vnet = match meta.vlan {
            Some(_) => meta.vnet.shifted(4),
            None => meta.vnet,
        };
        // The tunnel ID crosses to the peer bridge, as in Open vSwitch.
        let meta_out = PacketMeta {
            vnet,
            vlan: None,
            tunnel: meta.tunnel,
        };
        self.channel
            .send_with(meta_out, |buf| copy_frame(buf, data, meta.vlan))
    }

    fn pending(&self) -> usize {
        0
    }

    fn flush(&mut self) -> usize {
        0
    }
}

const _: () = assert!(CHANNEL_FRAME >= PATCH_MTU + 18 + 4);

#[cfg(test)]
mod tests {
    use super::*;
    use vsw_datapath::RxBatch;

    fn received(q: &mut PortQueues) -> Vec<Vec<u8>> {
        let mut batch = RxBatch::new();
        q.rx[0].recv(&mut batch);
        let out = batch.iter().map(|p| p.data.to_vec()).collect();
        drop(batch);
        q.rx[0].release();
        out
    }

    #[test]
    fn what_one_end_sends_the_other_receives_and_nothing_is_lost_to_the_pool() {
        let mut a = open("vsw-pa", "vsw-pb").unwrap();
        // Nobody at the other end yet: dropped, counted as a full queue.
        let frame = vec![0xab; 60];
        assert_eq!(
            a.tx.stage(&frame, &PacketMeta::default()),
            Err(StageError::QueueFull)
        );
        let mut b = open("vsw-pb", "vsw-pa").unwrap();
        assert!(matches!(
            open("vsw-pb", "vsw-pa"),
            Err(PatchError::AlreadyOpen(_))
        ));
        // Many times the pool's size: buffers come back.
        for round in 0..64 {
            for i in 0..vsw_datapath::BATCH_SIZE {
                let mut f = frame.clone();
                f[0] = (round + i) as u8;
                a.tx.stage(&f, &PacketMeta::default()).unwrap();
            }
            assert_eq!(a.tx.flush(), 0);
            let got = received(&mut b);
            assert_eq!(got.len(), vsw_datapath::BATCH_SIZE);
            assert_eq!(got[1][0], (round + 1) as u8);
        }
        // The other way, through a second transmit queue (another PMD's).
        let mut more = (b.tx_factory.as_ref().unwrap())().unwrap();
        more.stage(&frame, &PacketMeta::default()).unwrap();
        more.flush();
        assert_eq!(received(&mut a), vec![frame.clone()]);
        // Too big for a patch.
        assert_eq!(
            a.tx.stage(&vec![0; PATCH_MTU + 19], &PacketMeta::default()),
            Err(StageError::TooBig)
        );
        // An end closed: the other's frames are dropped, and it opens again clean.
        drop(b);
        assert_eq!(
            a.tx.stage(&frame, &PacketMeta::default()),
            Err(StageError::QueueFull)
        );
        let mut b = open("vsw-pb", "vsw-pa").unwrap();
        assert!(received(&mut b).is_empty());
        assert!(matches!(
            open("vsw-pq", "vsw-pq"),
            Err(PatchError::OwnPeer(_))
        ));
    }
}
