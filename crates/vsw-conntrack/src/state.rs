//! What the tracker says of a packet (`ct_state`), and what it keeps of a TCP
//! connection's ends.

/// `ct_state`'s bits, as Open vSwitch numbers them (`CS_*`, NXM_NX_CT_STATE).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct CtState(pub u8);

impl CtState {
    pub const NEW: u8 = 1 << 0;
    pub const ESTABLISHED: u8 = 1 << 1;
    pub const RELATED: u8 = 1 << 2;
    pub const REPLY: u8 = 1 << 3;
    pub const INVALID: u8 = 1 << 4;
    pub const TRACKED: u8 = 1 << 5;
    pub const SNAT: u8 = 1 << 6;
    pub const DNAT: u8 = 1 << 7;

    pub fn has(self, bits: u8) -> bool {
        self.0 & bits == bits
    }
}

impl std::fmt::Display for CtState {
    /// As `ovs-ofctl` prints the field: `+`-less names joined by `|`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        const NAMES: [(u8, &str); 8] = [
            (CtState::NEW, "new"),
            (CtState::ESTABLISHED, "est"),
            (CtState::RELATED, "rel"),
            (CtState::REPLY, "rpl"),
            (CtState::INVALID, "inv"),
            (CtState::TRACKED, "trk"),
            (CtState::SNAT, "snat"),
            (CtState::DNAT, "dnat"),
        ];
        let names: Vec<&str> = NAMES
            .iter()
            .filter(|(b, _)| self.0 & b != 0)
            .map(|(_, n)| *n)
            .collect();
        f.write_str(&names.join("|"))
    }
}

/// One end of a TCP connection, as Open vSwitch's `ct_dpif_tcp_state` orders them
/// (the order is compared: "at least FIN_WAIT_2").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TcpState {
    #[default]
    Closed,
    Listen,
    SynSent,
    SynRecv,
    Established,
    CloseWait,
    FinWait1,
    Closing,
    LastAck,
    FinWait2,
    TimeWait,
}

impl TcpState {
    /// One state for both ends, as Linux's tracker keeps one, the way Open
    /// vSwitch coalesces its two for what it prints.
    pub fn coalesced((orig, reply): (TcpState, TcpState)) -> TcpState {
        match orig.max(reply) {
            TcpState::FinWait2 => TcpState::TimeWait,
            TcpState::SynRecv => TcpState::Established,
            s => s,
        }
    }

    /// Open vSwitch's name (`dpctl/dump-conntrack -m`).
    pub fn name(self) -> &'static str {
        match self {
            TcpState::Closed => "CLOSED",
            TcpState::Listen => "LISTEN",
            TcpState::SynSent => "SYN_SENT",
            TcpState::SynRecv => "SYN_RECV",
            TcpState::Established => "ESTABLISHED",
            TcpState::CloseWait => "CLOSE_WAIT",
            TcpState::FinWait1 => "FIN_WAIT_1",
            TcpState::Closing => "CLOSING",
            TcpState::LastAck => "LAST_ACK",
            TcpState::FinWait2 => "FIN_WAIT_2",
            TcpState::TimeWait => "TIME_WAIT",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_print_as_open_vswitch_names_them() {
        let s = CtState(CtState::TRACKED | CtState::ESTABLISHED | CtState::REPLY);
        assert_eq!(s.to_string(), "est|rpl|trk");
        assert!(s.has(CtState::TRACKED | CtState::REPLY));
        assert!(!s.has(CtState::NEW));
        assert!(TcpState::FinWait2 > TcpState::Closing);
        assert_eq!(TcpState::TimeWait.name(), "TIME_WAIT");
    }
}
