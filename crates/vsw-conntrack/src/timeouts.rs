//! How long a connection lives without a packet, by what its last packet made of
//! it: Open vSwitch's userspace defaults (lib/conntrack-tp.c), in seconds.

/// What a connection's last packet made it, each with a timeout of its own
/// (Open vSwitch's `CT_TM_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TimeoutKind {
    /// A SYN seen from one end only.
    TcpFirstPacket,
    /// Not yet established both ways.
    TcpOpening,
    TcpEstablished,
    /// A FIN from one end.
    TcpClosing,
    /// FINs from both ends.
    TcpFinWait,
    /// Both ends past FIN_WAIT_2, or reset.
    TcpClosed,
    /// UDP and other protocols: one packet, several one way, and both ways.
    OtherFirst,
    OtherMultiple,
    OtherBidir,
    IcmpFirst,
    IcmpReply,
}

/// A timeout policy: seconds for each kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeouts {
    pub tcp_syn_sent: u32,
    pub tcp_syn_recv: u32,
    pub tcp_established: u32,
    pub tcp_fin_wait: u32,
    pub tcp_time_wait: u32,
    pub tcp_close: u32,
    pub udp_first: u32,
    pub udp_single: u32,
    pub udp_multiple: u32,
    pub icmp_first: u32,
    pub icmp_reply: u32,
}

impl Default for Timeouts {
    /// Open vSwitch's (`ct_dpif_netdev_tp_def`).
    fn default() -> Timeouts {
        Timeouts {
            tcp_syn_sent: 30,
            tcp_syn_recv: 30,
            tcp_established: 24 * 60 * 60,
            tcp_fin_wait: 15 * 60,
            tcp_time_wait: 45,
            tcp_close: 30,
            udp_first: 60,
            udp_single: 60,
            udp_multiple: 30,
            icmp_first: 60,
            icmp_reply: 30,
        }
    }
}

impl Timeouts {
    /// The timeout of `kind` in milliseconds (Open vSwitch's mapping of its
    /// `CT_TM_*` onto the policy's attributes).
    pub fn ms(&self, kind: TimeoutKind) -> u64 {
        let s = match kind {
            TimeoutKind::TcpFirstPacket => self.tcp_syn_sent,
            TimeoutKind::TcpOpening => self.tcp_syn_recv,
            TimeoutKind::TcpEstablished => self.tcp_established,
            TimeoutKind::TcpClosing => self.tcp_fin_wait,
            TimeoutKind::TcpFinWait => self.tcp_time_wait,
            TimeoutKind::TcpClosed => self.tcp_close,
            TimeoutKind::OtherFirst => self.udp_first,
            TimeoutKind::OtherMultiple => self.udp_single,
            TimeoutKind::OtherBidir => self.udp_multiple,
            TimeoutKind::IcmpFirst => self.icmp_first,
            TimeoutKind::IcmpReply => self.icmp_reply,
        };
        u64::from(s) * 1000
    }
}

impl Timeouts {
    /// Sets the timeout Open vSwitch's CT_Timeout_Policy names `name` (its
    /// `timeouts` column's keys) to `secs`; false for a name the userspace tracker
    /// has no timeout of (Open vSwitch's userspace ignores those too:
    /// `tcp_close_wait`, `tcp_last_ack`, `tcp_syn_sent2`, `tcp_retransmit`,
    /// `tcp_unack` are the kernel's).
    pub fn set(&mut self, name: &str, secs: u32) -> bool {
        let slot = match name {
            "tcp_syn_sent" => &mut self.tcp_syn_sent,
            "tcp_syn_recv" => &mut self.tcp_syn_recv,
            "tcp_established" => &mut self.tcp_established,
            "tcp_fin_wait" => &mut self.tcp_fin_wait,
            "tcp_time_wait" => &mut self.tcp_time_wait,
            "tcp_close" => &mut self.tcp_close,
            "udp_first" => &mut self.udp_first,
            "udp_single" => &mut self.udp_single,
            "udp_multiple" => &mut self.udp_multiple,
            "icmp_first" => &mut self.icmp_first,
            "icmp_reply" => &mut self.icmp_reply,
            _ => return false,
        };
        *slot = secs;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_policy_sets_what_it_names_and_keeps_the_rest() {
        let mut t = Timeouts::default();
        assert!(t.set("udp_first", 5));
        assert!(t.set("tcp_established", 600));
        assert!(!t.set("tcp_unack", 5), "the kernel's alone");
        assert_eq!(t.ms(TimeoutKind::OtherFirst), 5000);
        assert_eq!(t.ms(TimeoutKind::TcpEstablished), 600_000);
        assert_eq!(t.ms(TimeoutKind::OtherBidir), 30_000);
    }
}
