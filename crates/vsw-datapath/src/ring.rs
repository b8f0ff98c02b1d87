//! The `ring` port: in memory, for measuring the datapath alone. Its receive side
//! replays a fixed set of frames endlessly (one per flow, handed out by reference, so
//! receiving costs no copy), and its transmit side copies what it is sent into a
//! batch buffer and drops it, as a device would after sending. What the datapath
//! costs per packet is then all that is measured.

use vsw_packet::builder;
use vsw_packet::ethernet::copy_frame;

use crate::clock;
use crate::port::{
    PacketMeta, PortQueues, RxBatch, RxDrops, RxPacket, RxQueue, StageError, TxOffloads, TxQueue,
    BATCH_SIZE,
};

/// The largest frame the transmit side takes (a ring port has no real MTU).
const SLOT: usize = 2048;

/// Frames of `flows` distinct UDP flows (source ports 1, 2, ...) of `wire_size` bytes on
/// the wire (FCS included, so 64 gives 60-byte frames), from 198.18.0.1 to 198.18.0.2.
pub fn flow_frames(flows: u32, wire_size: usize) -> Vec<Vec<u8>> {
    // Ethernet 14 + IPv4 20 + UDP 8 + FCS 4 = 46 bytes of headers.
    let payload = wire_size.saturating_sub(46);
    (0..flows)
        .map(|i| {
            let sport = (i % 65_535 + 1) as u16;
            let third = (i / 65_535) as u8;
            builder::udp4_frame([198, 18, third, 1], [198, 18, 0, 2], sport, 9, payload)
        })
        .collect()
}

struct RingSource {
    frames: Vec<Vec<u8>>,
    next: usize,
    pace: Option<Pace>,
}

/// Frames per second, evenly spaced by the TSC: a source that needs no core of its
/// own and no timer (the PMD polling it is the clock).
struct Pace {
    rate: u64,
    cycles_per_second: u64,
    start: Option<u64>,
    given: u64,
}

impl Pace {
    /// How many frames are due now (at most a batch).
    fn due(&mut self) -> usize {
        let now = clock::cycles();
        let start = *self.start.get_or_insert(now);
        let elapsed = u128::from(now.wrapping_sub(start));
        let due =
            (elapsed * u128::from(self.rate) / u128::from(self.cycles_per_second.max(1))) as u64;
        let n = due.saturating_sub(self.given).min(BATCH_SIZE as u64);
        self.given += n;
        // Behind by more than a batch (the PMD was busy): what is late is skipped,
        // not sent in a burst.
        self.given = self.given.max(due.saturating_sub(BATCH_SIZE as u64));
        n as usize
    }
}

impl RxQueue for RingSource {
    fn recv<'a>(&'a mut self, batch: &mut RxBatch<'a>) -> RxDrops {
        if self.frames.is_empty() {
            return RxDrops::default();
        }
        let n = self.frames.len();
        let count = self.pace.as_mut().map_or(BATCH_SIZE, Pace::due);
        for _ in 0..count {
            batch.push(RxPacket {
                data: &self.frames[self.next],
                meta: PacketMeta::default(),
            });
            self.next = if self.next + 1 == n { 0 } else { self.next + 1 };
        }
        RxDrops::default()
    }

    fn release(&mut self) {}
}

struct RingSink {
    slots: Box<[u8]>,
    staged: usize,
}

impl RingSink {
    fn new() -> RingSink {
        RingSink {
            slots: vec![0u8; SLOT * BATCH_SIZE].into_boxed_slice(),
            staged: 0,
        }
    }
}

impl TxQueue for RingSink {
    /// A sink finishes checksums (it drops everything anyway) but takes no frame
    /// larger than its slot, so super-frames are cut for it.
    fn offloads(&self) -> TxOffloads {
        TxOffloads {
            csum: true,
            tso: false,
            merges: false,
            tunnel_tso: false,
            mtu: SLOT - 18,
        }
    }

    fn stage(&mut self, data: &[u8], meta: &PacketMeta) -> Result<(), StageError> {
        if self.staged >= BATCH_SIZE {
            return Err(StageError::QueueFull);
        }
        let slot = &mut self.slots[self.staged * SLOT..(self.staged + 1) * SLOT];
        copy_frame(slot, data, meta.vlan).ok_or(StageError::TooBig)?;
        self.staged += 1;
        Ok(())
    }

    fn pending(&self) -> usize {
        self.staged
    }

    fn flush(&mut self) -> usize {
        self.staged = 0;
        0
    }
}

/// A ring port: `flows` generated flows of `wire_size`-byte frames (0 flows: it
/// receives nothing), and a transmit side per PMD that discards.
pub fn ring_port(flows: u32, wire_size: usize) -> PortQueues {
    ring_port_with_frames(flow_frames(flows, wire_size))
}

/// A ring port whose source gives `rate` frames per second, evenly spaced (0: as
/// many as the PMD takes).
pub fn paced_ring_port(flows: u32, wire_size: usize, rate: u64) -> PortQueues {
    let mut q = ring_port(flows, wire_size);
    if rate > 0 {
        q.rx = vec![Box::new(RingSource {
            frames: flow_frames(flows, wire_size),
            next: 0,
            pace: Some(Pace {
                rate,
                cycles_per_second: clock::cycles_per_second(),
                start: None,
                given: 0,
            }),
        })];
    }
    q
}

/// A ring port that replays `frames` in order, over and over.
pub fn ring_port_with_frames(frames: Vec<Vec<u8>>) -> PortQueues {
    PortQueues {
        rx: vec![Box::new(RingSource {
            frames,
            next: 0,
            pace: None,
        })],
        tx: Box::new(RingSink::new()),
        tx_factory: Some(Box::new(|| {
            Ok(Box::new(RingSink::new()) as Box<dyn TxQueue>)
        })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vsw_packet::{extract, FlowKey};

    #[test]
    fn frames_are_distinct_flows_of_the_asked_size() {
        let frames = flow_frames(3, 64);
        assert_eq!(frames.len(), 3);
        let keys: Vec<FlowKey> = frames
            .iter()
            .map(|f| {
                assert_eq!(f.len(), 60);
                let mut k = FlowKey::default();
                extract(f, 1, None, &mut k).unwrap();
                k
            })
            .collect();
        assert_eq!(
            keys.iter().map(|k| k.tp_src).collect::<Vec<_>>(),
            vec![1, 2, 3]
        );
        assert_eq!(flow_frames(1, 1518)[0].len(), 1514);
    }

    #[test]
    fn a_paced_source_gives_no_more_than_its_rate() {
        let mut q = paced_ring_port(1, 64, 1000);
        let start = std::time::Instant::now();
        let mut got = 0;
        while start.elapsed() < std::time::Duration::from_millis(50) {
            let mut batch = RxBatch::new();
            q.rx[0].recv(&mut batch);
            got += batch.len();
        }
        // 1,000 per second for 50 ms: about 50, never a free-running burst.
        assert!((1..=60).contains(&got), "{got} frames in 50 ms at 1,000/s");
    }

    #[test]
    fn the_source_replays_and_the_sink_takes_a_batch() {
        let mut q = ring_port(2, 64);
        let mut batch = RxBatch::new();
        q.rx[0].recv(&mut batch);
        assert_eq!(batch.len(), BATCH_SIZE);
        assert_ne!(batch[0].data, batch[1].data);
        assert_eq!(batch[0].data, batch[2].data);
        let frame = batch[0].data.to_vec();
        drop(batch);
        for _ in 0..BATCH_SIZE {
            q.tx.stage(&frame, &PacketMeta::default()).unwrap();
        }
        assert_eq!(
            q.tx.stage(&frame, &PacketMeta::default()),
            Err(StageError::QueueFull)
        );
        assert_eq!(q.tx.flush(), 0);
        assert_eq!(q.tx.pending(), 0);
        let mut silent = ring_port(0, 64);
        let mut batch = RxBatch::new();
        silent.rx[0].recv(&mut batch);
        assert!(batch.is_empty());
    }
}
