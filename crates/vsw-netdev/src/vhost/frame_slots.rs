//! Room for one batch of frames between a guest and the datapath.
//!
//! Frames up to [`SMALL_SLOT`] bytes (every frame of a standard MTU) go into one
//! contiguous block, 2 KiB apart: a batch of them touches 16 pages and spreads over
//! the cache's sets. Only TCP super-frames use the large buffers, which are reserved
//! up front but touched (and so backed by memory) only when such a frame comes.

use super::features::{HDR, MAX_FRAME};
use vsw_datapath::BATCH_SIZE;

/// The largest frame, header included, that takes a small slot.
pub(super) const SMALL_SLOT: usize = 2048;

pub(super) struct FrameSlots {
    small: Box<[u8]>,
    large: Vec<Box<[u8]>>,
    in_large: [bool; BATCH_SIZE],
    lens: [usize; BATCH_SIZE],
}

impl Default for FrameSlots {
    fn default() -> Self {
        FrameSlots {
            small: vec![0u8; BATCH_SIZE * SMALL_SLOT].into_boxed_slice(),
            large: (0..BATCH_SIZE)
                .map(|_| vec![0u8; HDR + MAX_FRAME].into_boxed_slice())
                .collect(),
            in_large: [false; BATCH_SIZE],
            lens: [0; BATCH_SIZE],
        }
    }
}

impl FrameSlots {
    /// Slot `k` with room for at least `len` bytes (the whole slot, to be filled and
    /// then measured with [`FrameSlots::set_len`]); `None` above the largest frame.
    #[inline]
    pub(super) fn room(&mut self, k: usize, len: usize) -> Option<&mut [u8]> {
        self.lens[k] = 0;
        if len <= SMALL_SLOT {
            self.in_large[k] = false;
            Some(&mut self.small[k * SMALL_SLOT..(k + 1) * SMALL_SLOT])
        } else if len <= HDR + MAX_FRAME {
            self.in_large[k] = true;
            Some(&mut self.large[k][..])
        } else {
            None
        }
    }

    /// How many bytes of slot `k` hold the frame.
    #[inline]
    pub(super) fn set_len(&mut self, k: usize, len: usize) {
        self.lens[k] = len;
    }

    /// The frame in slot `k` (header included).
    #[inline]
    pub(super) fn frame(&self, k: usize) -> &[u8] {
        let len = self.lens[k];
        if self.in_large[k] {
            &self.large[k][..len]
        } else {
            &self.small[k * SMALL_SLOT..k * SMALL_SLOT + len]
        }
    }

    /// The frame in slot `k`, to change its header.
    #[inline]
    pub(super) fn frame_mut(&mut self, k: usize) -> &mut [u8] {
        let len = self.lens[k];
        if self.in_large[k] {
            &mut self.large[k][..len]
        } else {
            &mut self.small[k * SMALL_SLOT..k * SMALL_SLOT + len]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_and_large_frames_keep_their_bytes_and_slot() {
        let mut s = FrameSlots::default();
        s.room(0, 100).unwrap()[..3].copy_from_slice(&[1, 2, 3]);
        s.set_len(0, 3);
        let big = SMALL_SLOT + 1;
        s.room(1, big).unwrap()[big - 1] = 9;
        s.set_len(1, big);
        assert_eq!(s.frame(0), &[1, 2, 3]);
        assert_eq!(s.frame(1).len(), big);
        assert_eq!(s.frame(1)[big - 1], 9);
        assert!(s.room(2, HDR + MAX_FRAME + 1).is_none());
        // The same slot used again for a small frame reads the small block.
        s.room(1, 10).unwrap()[0] = 4;
        s.set_len(1, 1);
        assert_eq!(s.frame_mut(1), &[4]);
    }
}
