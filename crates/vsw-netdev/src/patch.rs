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
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};

use crossbeam_queue::ArrayQueue;
use vsw_datapath::{
    PacketMeta, PortQueues, RxBatch, RxDrops, RxPacket, RxQueue, StageError, TxOffloads, TxQueue,
    BATCH_SIZE,
};
use vsw_packet::ethernet::copy_frame;

/// The largest frame a patch carries (a 9,216-byte MTU's, a VLAN tag put back).
pub const PATCH_MTU: usize = 9216;
const BUFFER: usize = PATCH_MTU + 18 + 4;
/// Frames in flight one way: 16 batches.
const FRAMES: usize = 16 * BATCH_SIZE;

#[derive(Debug, thiserror::Error)]
pub enum PatchError {
    #[error("patch port {0} is already open")]
    AlreadyOpen(String),
    #[error("a patch port cannot be its own peer ({0})")]
    OwnPeer(String),
}

/// One direction of a patch.
struct Channel {
    free: ArrayQueue<Box<[u8]>>,
    filled: ArrayQueue<Frame>,
    /// The receiving end is open: frames are taken.
    reader: AtomicBool,
}

struct Frame {
    buf: Box<[u8]>,
    len: usize,
    meta: PacketMeta,
}

impl Channel {
    fn new() -> Channel {
        let free = ArrayQueue::new(FRAMES);
        for _ in 0..FRAMES {
            let _ = free.push(vec![0u8; BUFFER].into_boxed_slice());
        }
        Channel {
            free,
            filled: ArrayQueue::new(FRAMES),
            reader: AtomicBool::new(false),
        }
    }

    /// Frames nobody will take any more (an earlier reader's) go back to the free list.
    fn drain(&self) {
        while let Some(f) = self.filled.pop() {
            let _ = self.free.push(f.buf);
        }
    }
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
    let c = Arc::new(Channel::new());
    all.insert(key, Arc::downgrade(&c));
    c
}

/// Opens patch port `name`, joined to port `peer` (which may open before or after).
pub fn open(name: &str, peer: &str) -> Result<PortQueues, PatchError> {
    if name == peer {
        return Err(PatchError::OwnPeer(name.to_string()));
    }
    let incoming = channel(peer, name);
    if incoming.reader.swap(true, Ordering::AcqRel) {
        return Err(PatchError::AlreadyOpen(name.to_string()));
    }
    incoming.drain();
    let outgoing = channel(name, peer);
    let tx = outgoing.clone();
    Ok(PortQueues {
        rx: vec![Box::new(PatchRx {
            channel: incoming,
            held: Vec::with_capacity(BATCH_SIZE),
        })],
        tx: Box::new(PatchTx::new(outgoing)),
        tx_factory: Some(Box::new(move || Ok(Box::new(PatchTx::new(tx.clone()))))),
    })
}

struct PatchRx {
    channel: Arc<Channel>,
    /// The frames of the last `recv`, lent to the datapath until `release`.
    held: Vec<Frame>,
}

impl RxQueue for PatchRx {
    fn recv<'a>(&'a mut self, batch: &mut RxBatch<'a>) -> RxDrops {
        self.release();
        while self.held.len() < BATCH_SIZE {
            match self.channel.filled.pop() {
                Some(f) => self.held.push(f),
                None => break,
            }
        }
        for f in &self.held {
            batch.push(RxPacket {
                data: &f.buf[..f.len],
                meta: f.meta,
            });
        }
        RxDrops::default()
    }

    fn release(&mut self) {
        for f in self.held.drain(..) {
            let _ = self.channel.free.push(f.buf);
        }
    }
}

impl Drop for PatchRx {
    fn drop(&mut self) {
        self.release();
        self.channel.reader.store(false, Ordering::Release);
        self.channel.drain();
    }
}

struct PatchTx {
    channel: Arc<Channel>,
    staged: Vec<Frame>,
}

impl PatchTx {
    fn new(channel: Arc<Channel>) -> PatchTx {
        PatchTx {
            channel,
            staged: Vec::with_capacity(BATCH_SIZE),
        }
    }
}

impl TxQueue for PatchTx {
    /// Checksums left open travel with the frame (the far side's ports finish them);
    /// super-frames are cut before they cross.
    fn offloads(&self) -> TxOffloads {
        TxOffloads {
            csum: true,
            tso: false,
            mtu: PATCH_MTU,
        }
    }

    fn stage(&mut self, data: &[u8], meta: &PacketMeta) -> Result<(), StageError> {
        if self.staged.len() >= BATCH_SIZE || !self.channel.reader.load(Ordering::Acquire) {
            return Err(StageError::QueueFull);
        }
        let Some(mut buf) = self.channel.free.pop() else {
            return Err(StageError::QueueFull);
        };
        let Some(len) = copy_frame(&mut buf, data, meta.vlan) else {
            let _ = self.channel.free.push(buf);
            return Err(StageError::TooBig);
        };
        // The offload state crosses with the frame, its offsets moved for a tag put
        // back.
        let vnet = match meta.vlan {
            Some(_) => meta.vnet.shifted(4),
            None => meta.vnet,
        };
        self.staged.push(Frame {
            buf,
            len,
            meta: PacketMeta { vnet, vlan: None },
        });
        Ok(())
    }

    fn pending(&self) -> usize {
        self.staged.len()
    }

    fn flush(&mut self) -> usize {
        let mut refused = 0;
        for f in self.staged.drain(..) {
            if let Err(f) = self.channel.filled.push(f) {
                let _ = self.channel.free.push(f.buf);
                refused += 1;
            }
        }
        refused
    }
}

impl Drop for PatchTx {
    fn drop(&mut self) {
        for f in self.staged.drain(..) {
            let _ = self.channel.free.push(f.buf);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        for round in 0..(4 * FRAMES / BATCH_SIZE) {
            for i in 0..BATCH_SIZE {
                let mut f = frame.clone();
                f[0] = (round + i) as u8;
                a.tx.stage(&f, &PacketMeta::default()).unwrap();
            }
            assert_eq!(a.tx.flush(), 0);
            let got = received(&mut b);
            assert_eq!(got.len(), BATCH_SIZE);
            assert_eq!(got[1][0], (round + 1) as u8);
        }
        // The other way, through a second transmit queue (another PMD's).
        let mut more = (b.tx_factory.as_ref().unwrap())().unwrap();
        more.stage(&frame, &PacketMeta::default()).unwrap();
        more.flush();
        assert_eq!(received(&mut a), vec![frame.clone()]);
        // Too big for a buffer.
        assert_eq!(
            a.tx.stage(&vec![0; BUFFER + 1], &PacketMeta::default()),
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
