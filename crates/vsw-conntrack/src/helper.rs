//! Application helpers (`ct(commit,alg=tftp)`): a connection committed with a
//! helper makes the tracker expect the connection its protocol opens next, and
//! that connection is `+rel` to rules (Open vSwitch's userspace `alg_exp`).
//!
//! TFTP: the server answers a request to port 69 from a port of its own, to the
//! client's port; the first packet from the server's address to the client's
//! address and port, from any port, is expected. FTP's control channel (its
//! `PORT`/`PASV` commands, read from the payload) is not read yet: `alg=ftp`
//! commits the control connection and expects nothing.

use crate::tuple::{Tuple, IPPROTO_UDP};

/// The helper a commit names (`alg=`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Helper {
    Ftp,
    Tftp,
}

impl Helper {
    /// The helper of `alg=N` as Open vSwitch encodes it (the protocol's port).
    pub fn of_port(port: u16) -> Option<Helper> {
        match port {
            21 => Some(Helper::Ftp),
            69 => Some(Helper::Tftp),
            _ => None,
        }
    }

    /// Its name as `dpctl/dump-conntrack` prints it (`helper=…`).
    pub fn name(self) -> &'static str {
        match self {
            Helper::Ftp => "ftp",
            Helper::Tftp => "tftp",
        }
    }

    /// The connection that a connection of `reply` (its reply direction's
    /// tuple) committed with this helper makes the tracker expect, if any.
    pub fn expects(self, reply: &Tuple) -> Option<Expected> {
        match self {
            Helper::Tftp if reply.proto == IPPROTO_UDP => Some(Expected::of(reply)),
            _ => None,
        }
    }
}

/// An expected connection's first packet, its source port any: what the tracker
/// looks a packet of no connection up by (in its zone).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Expected {
    pub src: u128,
    pub dst: u128,
    pub dst_port: u16,
    pub proto: u8,
    pub v6: bool,
}

impl Expected {
    /// What a packet of `t` would match.
    pub fn of(t: &Tuple) -> Expected {
        Expected {
            src: t.src,
            dst: t.dst,
            dst_port: t.dst_port,
            proto: t.proto,
            v6: t.v6,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tftp_expects_the_servers_answer_from_any_port() {
        let request = Tuple {
            src: 1,
            dst: 2,
            src_port: 40000,
            dst_port: 69,
            proto: IPPROTO_UDP,
            ..Tuple::default()
        };
        let reply = request.reverse().unwrap();
        let e = Helper::Tftp.expects(&reply).unwrap();
        let answer = Tuple {
            src_port: 50123,
            ..reply
        };
        assert_eq!(Expected::of(&answer), e);
        assert_eq!(Helper::Ftp.expects(&reply), None);
        assert_eq!(Helper::of_port(69), Some(Helper::Tftp));
        assert_eq!(Helper::of_port(70), None);
    }
}
