//! A one-way channel of frames between threads of one vswd (a PMD and another
//! pass of the datapath): a free list and a list of filled frames of preallocated buffers,
//! both lock-free bounded queues (`crossbeam-queue`). Sending copies a frame into a
//! free buffer; the receiving queue lends it to its datapath until the batch is
//! released. Nothing is allocated and no lock is taken per packet. Tunnel ports are
//! made of them.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use crossbeam_queue::ArrayQueue;
use vsw_datapath::{PacketMeta, RxBatch, RxDrops, RxPacket, RxQueue, StageError, BATCH_SIZE};

/// The largest frame a channel for super-frames carries: a 64 KiB IP packet behind
/// its Ethernet header and a VLAN tag.
pub const SUPER_FRAME: usize = 65_535 + 18 + 4;
/// Frames in flight at most: 16 batches. Buffers are made as traffic first needs
/// them (a channel nobody sends on costs no memory), then kept.
const FRAMES: usize = 16 * BATCH_SIZE;

pub(crate) struct Channel {
    /// Each buffer's size.
    frame: usize,
    free: ArrayQueue<Box<[u8]>>,
    /// Buffers made so far.
    made: AtomicUsize,
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
    /// A channel for frames up to `frame` bytes ([`SUPER_FRAME`]: TCP super-frames
    /// cross it whole, each buffer 64 KiB; they are made only as traffic needs them).
    pub(crate) fn with_frames_of(frame: usize) -> Arc<Channel> {
        Arc::new(Channel {
            frame,
            free: ArrayQueue::new(FRAMES),
            made: AtomicUsize::new(0),
            filled: ArrayQueue::new(FRAMES),
            reader: AtomicBool::new(false),
        })
    }

    /// A new buffer while fewer than [`FRAMES`] were made (traffic warming the
    /// channel up; in a steady state every buffer comes back to the free list).
    fn make_buffer(&self) -> Option<Box<[u8]>> {
        self.made
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < FRAMES).then_some(n + 1)
            })
            .ok()
            .map(|_| vec![0u8; self.frame].into_boxed_slice())
    }

    /// Whether a receiving queue is open.
    pub(crate) fn has_reader(&self) -> bool {
        self.reader.load(Ordering::Acquire)
    }

    /// Frames nobody will take any more go back to the free list.
    fn drain(&self) {
        while let Some(f) = self.filled.pop() {
            let _ = self.free.push(f.buf);
        }
    }

    /// Writes a frame with `write` (its length, or `None`: too big) into a free
    /// buffer and queues it. Refused as a full queue when nobody reads, or no buffer
    /// or room is left.
    pub(crate) fn send_with(
        &self,
        meta: PacketMeta,
        write: impl FnOnce(&mut [u8]) -> Option<usize>,
    ) -> Result<(), StageError> {
        if !self.has_reader() {
            return Err(StageError::QueueFull);
        }
        let mut buf = match self.free.pop().or_else(|| self.make_buffer()) {
            Some(buf) => buf,
            None => {
                // Every buffer is queued: the reader, a PMD perhaps on this very
                // core, has not had its turn. Let it run once, then look again.
                std::thread::yield_now();
                self.free.pop().ok_or(StageError::QueueFull)?
            }
        };
        let Some(len) = write(&mut buf) else {
            let _ = self.free.push(buf);
            return Err(StageError::TooBig);
        };
        if let Err(f) = self.filled.push(Frame { buf, len, meta }) {
            let _ = self.free.push(f.buf);
            return Err(StageError::QueueFull);
        }
        Ok(())
    }

    /// The receiving queue, unless one is open already.
    pub(crate) fn reader(self: &Arc<Self>) -> Option<ChannelRx> {
        if self.reader.swap(true, Ordering::AcqRel) {
            return None;
        }
        // Frames sent to an earlier reader are not this one's.
        self.drain();
        Some(ChannelRx {
            channel: self.clone(),
            held: Vec::with_capacity(BATCH_SIZE),
        })
    }
}

/// The receiving end of a channel, as a device's receive queue.
pub(crate) struct ChannelRx {
    channel: Arc<Channel>,
    /// The frames of the last `recv`, lent to the datapath until `release`.
    held: Vec<Frame>,
}

impl RxQueue for ChannelRx {
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

impl Drop for ChannelRx {
    fn drop(&mut self) {
        self.release();
        self.channel.reader.store(false, Ordering::Release);
        self.channel.drain();
    }
}
