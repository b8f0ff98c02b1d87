//! TCP as Open vSwitch's userspace tracker follows it (lib/conntrack-tcp.c, after
//! pf and Guido van Rooij's "Real Stateful TCP Packet Filtering"): for each end its
//! state, the highest sequence number it sent, the highest the other end allowed
//! it (acknowledged plus window) and its largest window; a segment outside the
//! windows is invalid, unless sequence checking is off (Open vSwitch's
//! `tcp-seq-chk`: then only the flags decide).

use crate::state::TcpState;
use crate::timeouts::TimeoutKind;

pub const FIN: u16 = 0x01;
pub const SYN: u16 = 0x02;
pub const RST: u16 = 0x04;
pub const PSH: u16 = 0x08;
pub const ACK: u16 = 0x10;
pub const URG: u16 = 0x20;

/// What the tracker reads of a TCP segment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpSegment {
    pub flags: u16,
    pub seq: u32,
    pub ack: u32,
    pub window: u16,
    /// The window scale option's shift, when the segment carries one.
    pub wscale: Option<u8>,
    pub payload_len: u32,
}

/// Window scale as one end announced it: the shift, with whether it was seen at
/// all, or unknown (a connection picked up after its SYNs).
const WSCALE_SEEN: u8 = 0x80;
const WSCALE_UNKNOWN: u8 = 0x40;
const WSCALE_SHIFT: u8 = 0x0f;
const MAX_WSCALE: u8 = 14;
/// How far an acknowledgement may lag or lead (a window, plus a packet's worth).
const MAX_ACK_WINDOW: i64 = 0xffff + 1500;

/// One end of a connection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpPeer {
    /// The highest sequence number it sent (its segments' ends).
    seqlo: u32,
    /// The highest the other end allowed it: acknowledged plus window.
    seqhi: u32,
    /// Its largest window, unscaled.
    max_win: u16,
    wscale: u8,
    pub state: TcpState,
}

/// One end of a TCP connection as `dpctl/dump-conntrack -m` shows it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PeerView {
    pub state: TcpState,
    /// The window scale it announced (0 when none).
    pub wscale: u8,
    /// It announced a window scale (Open vSwitch's `WINDOW_SCALE`).
    pub window_scale: bool,
    /// Its windows are not checked: the connection was picked up mid-stream
    /// (`BE_LIBERAL`).
    pub liberal: bool,
}

impl TcpPeer {
    pub fn view(&self) -> PeerView {
        PeerView {
            state: self.state,
            wscale: self.wscale & WSCALE_SHIFT,
            window_scale: self.wscale & WSCALE_SEEN != 0,
            liberal: self.wscale & WSCALE_UNKNOWN != 0,
        }
    }
}

/// What a segment did to a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Update {
    /// In the connection: established (or its reply).
    Valid,
    /// A SYN again, before the other end answered: still new.
    ValidNew,
    Invalid,
    /// A SYN after both ends closed: the old connection ends, a new one starts.
    New,
}

/// Modular sequence comparisons.
fn seq_diff(a: u32, b: u32) -> i32 {
    a.wrapping_sub(b) as i32
}

fn seq_gt(a: u32, b: u32) -> bool {
    seq_diff(a, b) > 0
}

fn seq_geq(a: u32, b: u32) -> bool {
    seq_diff(a, b) >= 0
}

/// Flags no segment carries (pf's normalisation: SYN with RST or FIN; neither ACK
/// nor RST without SYN; FIN, PSH or URG without ACK).
pub fn invalid_flags(flags: u16) -> bool {
    if flags & SYN != 0 {
        if flags & (RST | FIN) != 0 {
            return true;
        }
    } else if flags & (ACK | RST) == 0 {
        return true;
    }
    flags & ACK == 0 && flags & (FIN | PSH | URG) != 0
}

/// Whether a segment may start a connection: valid flags, and not a SYN|ACK (a
/// half-open connection is not picked up; an established one is).
pub fn valid_new(seg: &TcpSegment) -> bool {
    !invalid_flags(seg.flags) && seg.flags & (SYN | ACK) != (SYN | ACK)
}

fn announced_wscale(seg: &TcpSegment) -> u8 {
    seg.wscale.map_or(0, |w| w.min(MAX_WSCALE) | WSCALE_SEEN)
}

fn div_round_up(n: u32, shift: u8) -> u16 {
    let d = 1u32 << shift;
    n.div_ceil(d).min(u32::from(u16::MAX)) as u16
}

/// The two ends of a connection its first segment (`seg`, from the first end)
/// starts, and how long it lives.
pub fn new_conn(seg: &TcpSegment) -> ([TcpPeer; 2], TimeoutKind) {
    let mut src = TcpPeer {
        seqlo: seg.seq,
        seqhi: seg.seq.wrapping_add(seg.payload_len).wrapping_add(1),
        ..TcpPeer::default()
    };
    let mut dst = TcpPeer::default();
    if seg.flags & SYN != 0 {
        src.seqhi = src.seqhi.wrapping_add(1);
        src.wscale = announced_wscale(seg);
    } else {
        src.wscale = WSCALE_UNKNOWN;
        dst.wscale = WSCALE_UNKNOWN;
    }
    src.max_win = seg.window.max(1);
    let sws = src.wscale & WSCALE_SHIFT;
    if sws != 0 {
        src.max_win = div_round_up(u32::from(src.max_win), sws);
    }
    if seg.flags & FIN != 0 {
        src.seqhi = src.seqhi.wrapping_add(1);
    }
    dst.seqhi = 1;
    dst.max_win = 1;
    src.state = TcpState::SynSent;
    dst.state = TcpState::Closed;
    ([src, dst], TimeoutKind::TcpFirstPacket)
}

/// Updates the connection `peers` ([original end, reply end]) with `seg` from the
/// original end or, when `reply`, the other; the timeout it now has, when the
/// segment moved it (a segment let through loosely moves none).
pub fn update(
    peers: &mut [TcpPeer; 2],
    seg: &TcpSegment,
    reply: bool,
    seq_check: bool,
) -> (Update, Option<TimeoutKind>) {
    let flags = seg.flags;
    if invalid_flags(flags) {
        return (Update::Invalid, None);
    }
    let [orig, other] = peers;
    let (src, dst) = if reply { (other, orig) } else { (orig, other) };
    if flags & (SYN | ACK) == SYN {
        if dst.state >= TcpState::FinWait2 && src.state >= TcpState::FinWait2 {
            src.state = TcpState::Closed;
            dst.state = TcpState::Closed;
            return (Update::New, None);
        } else if src.state <= TcpState::SynSent {
            src.state = TcpState::SynSent;
            return (Update::ValidNew, Some(TimeoutKind::TcpFirstPacket));
        }
    }
    let (mut sws, mut dws) = (0u8, 0u8);
    if flags & SYN == 0 {
        if src.wscale & WSCALE_SEEN != 0 && dst.wscale & WSCALE_SEEN != 0 {
            sws = src.wscale & WSCALE_SHIFT;
            dws = dst.wscale & WSCALE_SHIFT;
        } else if src.wscale & WSCALE_UNKNOWN != 0 && dst.wscale & WSCALE_UNKNOWN != 0 {
            sws = MAX_WSCALE;
            dws = MAX_WSCALE;
        }
    }
    let mut win = seg.window;
    let orig_seq = seg.seq;
    let mut seq = seg.seq;
    let mut ack = seg.ack;
    let mut end = seq.wrapping_add(seg.payload_len);
    if flags & SYN != 0 {
        end = end.wrapping_add(1);
    }
    if flags & FIN != 0 {
        end = end.wrapping_add(1);
    }
    let mut check_ackskew = true;
    if src.state < TcpState::SynSent {
        // This end's first segment.
        if flags & SYN != 0 && dst.wscale & WSCALE_SEEN != 0 {
            src.wscale = announced_wscale(seg);
            if src.wscale & WSCALE_SEEN != 0 {
                sws = src.wscale & WSCALE_SHIFT;
                win = div_round_up(u32::from(win), sws);
                dws = dst.wscale & WSCALE_SHIFT;
            } else {
                // The other end's window was scaled for nothing.
                let shift = u32::from(dst.wscale & WSCALE_SHIFT);
                dst.max_win = (u32::from(dst.max_win) << shift) as u16;
                dst.wscale = 0;
            }
        }
        src.seqlo = seq;
        src.state = TcpState::SynSent;
        // Slide the window (picked up late, or a SYN seen before).
        let reach = end.wrapping_add((u32::from(dst.max_win) << dws).max(1));
        if src.seqhi == 1 || seq_geq(reach, src.seqhi) {
            src.seqhi = reach;
            check_ackskew = false;
        }
        if win > src.max_win {
            src.max_win = win;
        }
    }
    if flags & ACK == 0 || (ack == 0 && flags & (ACK | RST) == (ACK | RST)) {
        // No acknowledgement to check (or a stack that sends none with RST).
        ack = dst.seqlo;
    }
    if seq == end {
        // No data: no sequence to hold it to.
        seq = src.seqlo;
        end = seq;
    }
    let ackskew = if check_ackskew {
        i64::from(seq_diff(dst.seqlo, ack))
    } else {
        0
    };
    let dst_window = u32::from(dst.max_win) << dws;
    let within = seq_geq(src.seqhi, end)
        && seq_geq(seq, src.seqlo.wrapping_sub(dst_window))
        && ackskew >= -MAX_ACK_WINDOW
        && ackskew <= (MAX_ACK_WINDOW << sws)
        && (flags & RST == 0
            || orig_seq == src.seqlo
            || orig_seq == src.seqlo.wrapping_add(1)
            || orig_seq.wrapping_add(1) == src.seqlo);
    let scaled_win = u32::from(win) << sws;
    let synchronise = |src: &mut TcpPeer, dst: &mut TcpPeer| {
        if src.max_win < win {
            src.max_win = win;
        }
        if seq_gt(end, src.seqlo) {
            src.seqlo = end;
        }
        if seq_geq(ack.wrapping_add(scaled_win), dst.seqhi) {
            dst.seqhi = ack.wrapping_add(scaled_win.max(1));
        }
    };
    if within || !seq_check {
        synchronise(src, dst);
        if flags & SYN != 0 && src.state < TcpState::SynSent {
            src.state = TcpState::SynSent;
        }
        if flags & FIN != 0 && src.state < TcpState::Closing {
            src.state = TcpState::Closing;
        }
        if flags & ACK != 0 {
            if dst.state == TcpState::SynSent {
                dst.state = TcpState::Established;
            } else if dst.state == TcpState::Closing {
                dst.state = TcpState::FinWait2;
            }
        }
        if flags & RST != 0 {
            src.state = TcpState::TimeWait;
            dst.state = TcpState::TimeWait;
        }
        let kind = if src.state >= TcpState::FinWait2 && dst.state >= TcpState::FinWait2 {
            TimeoutKind::TcpClosed
        } else if src.state >= TcpState::Closing && dst.state >= TcpState::Closing {
            TimeoutKind::TcpFinWait
        } else if src.state < TcpState::Established || dst.state < TcpState::Established {
            TimeoutKind::TcpOpening
        } else if src.state >= TcpState::Closing || dst.state >= TcpState::Closing {
            TimeoutKind::TcpClosing
        } else {
            TimeoutKind::TcpEstablished
        };
        return (Update::Valid, Some(kind));
    }
    let loose = (dst.state < TcpState::SynSent
        || dst.state >= TcpState::FinWait2
        || src.state >= TcpState::FinWait2)
        && i64::from(seq_diff(src.seqhi, end)) + MAX_ACK_WINDOW >= 0
        && i64::from(seq_diff(seq, src.seqlo)) + MAX_ACK_WINDOW >= 0;
    if loose {
        // SYNs shot before an answer, a connection picked up established, odd
        // segments just after a close: let through without moving the timeout,
        // so that a flood of them keeps nothing alive.
        synchronise(src, dst);
        if flags & FIN != 0 && src.state < TcpState::Closing {
            src.state = TcpState::Closing;
        }
        if flags & RST != 0 {
            src.state = TcpState::TimeWait;
            dst.state = TcpState::TimeWait;
        }
        return (Update::Valid, None);
    }
    (Update::Invalid, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(flags: u16, seq: u32, ack: u32, len: u32) -> TcpSegment {
        TcpSegment {
            flags,
            seq,
            ack,
            window: 65535,
            wscale: Some(7),
            payload_len: len,
        }
    }

    /// A handshake, data both ways, a close: each end's state as Open vSwitch's
    /// tracker moves it, and the timeouts it picks.
    #[test]
    fn a_connection_opens_carries_and_closes() {
        let (mut p, t) = new_conn(&seg(SYN, 1000, 0, 0));
        assert_eq!(t, TimeoutKind::TcpFirstPacket);
        assert_eq!(
            (p[0].state, p[1].state),
            (TcpState::SynSent, TcpState::Closed)
        );
        let r = update(&mut p, &seg(SYN | ACK, 5000, 1001, 0), true, true);
        assert_eq!(r, (Update::Valid, Some(TimeoutKind::TcpOpening)));
        assert_eq!(p[0].state, TcpState::Established);
        let r = update(&mut p, &seg(ACK, 1001, 5001, 0), false, true);
        assert_eq!(r, (Update::Valid, Some(TimeoutKind::TcpEstablished)));
        assert_eq!(p[1].state, TcpState::Established);
        assert_eq!(
            update(&mut p, &seg(ACK | PSH, 1001, 5001, 100), false, true).0,
            Update::Valid
        );
        assert_eq!(
            update(&mut p, &seg(ACK, 5001, 1101, 0), true, true).0,
            Update::Valid
        );
        // Far outside the window: invalid, unless sequence checking is off.
        let wild = seg(ACK | PSH, 1001u32.wrapping_add(0x4000_0000), 5001, 100);
        assert_eq!(update(&mut p, &wild, false, true).0, Update::Invalid);
        let mut q = p;
        assert_eq!(update(&mut q, &wild, false, false).0, Update::Valid);
        let r = update(&mut p, &seg(FIN | ACK, 1101, 5001, 0), false, true);
        assert_eq!(r, (Update::Valid, Some(TimeoutKind::TcpClosing)));
        let r = update(&mut p, &seg(FIN | ACK, 5001, 1102, 0), true, true);
        assert_eq!(r, (Update::Valid, Some(TimeoutKind::TcpFinWait)));
        assert_eq!(
            (p[0].state, p[1].state),
            (TcpState::FinWait2, TcpState::Closing)
        );
        let r = update(&mut p, &seg(ACK, 1102, 5002, 0), false, true);
        assert_eq!(r, (Update::Valid, Some(TimeoutKind::TcpClosed)));
        // A new SYN on the closed pair starts a new connection.
        assert_eq!(
            update(&mut p, &seg(SYN, 9000, 0, 0), false, true).0,
            Update::New
        );
    }

    #[test]
    fn flags_no_segment_carries_are_invalid() {
        for f in [SYN | RST, SYN | FIN, 0, FIN, PSH, URG | FIN] {
            assert!(invalid_flags(f), "{f:#x}");
        }
        for f in [SYN, SYN | ACK, ACK, RST, RST | ACK, FIN | ACK, PSH | ACK] {
            assert!(!invalid_flags(f), "{f:#x}");
        }
        assert!(!valid_new(&seg(SYN | ACK, 1, 1, 0)));
        assert!(valid_new(&seg(ACK, 1, 1, 0)), "picked up established");
    }

    #[test]
    fn a_reset_ends_both_ends() {
        let (mut p, _) = new_conn(&seg(SYN, 1000, 0, 0));
        update(&mut p, &seg(SYN | ACK, 5000, 1001, 0), true, true);
        let r = update(&mut p, &seg(RST, 1001, 0, 0), false, true);
        assert_eq!(r, (Update::Valid, Some(TimeoutKind::TcpClosed)));
        assert_eq!(
            (p[0].state, p[1].state),
            (TcpState::TimeWait, TcpState::TimeWait)
        );
    }
}
