//! Application helpers (`ct(commit,alg=tftp)`): a connection committed with a
//! helper makes the tracker expect the connection its protocol opens next, and
//! that connection is `+rel` to rules (Open vSwitch's userspace `alg_exp`).
//!
//! TFTP: the server answers a request to port 69 from a port of its own, to the
//! client's port; the first packet from the server's address to the client's
//! address and port, from any port, is expected.
//!
//! FTP: the control connection's payload is read. A client's `PORT` or `EPRT`
//! makes the server's data connection to the port it names expected; a server's
//! `227` (passive) or `229` (extended passive) makes the client's data connection
//! to that port expected. The address named must be the one the command's sender
//! uses, or nothing is expected (no bounce through the firewall). Not with NAT:
//! the addresses in the payload are not rewritten.

use std::net::{Ipv4Addr, Ipv6Addr};

use crate::tuple::{Tuple, IPPROTO_TCP, IPPROTO_UDP};

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

impl Helper {
    /// What a payload of a connection (`orig`: its original direction; `reply`:
    /// the payload came the other way) with this helper makes expected.
    pub fn read(self, payload: &[u8], orig: &Tuple, reply: bool) -> Option<Expected> {
        if self != Helper::Ftp || orig.proto != IPPROTO_TCP {
            return None;
        }
        // Every line of the segment (a client may send `TYPE I` and `PORT` in
        // one), each read on its own; the first that names a connection counts.
        payload
            .split(|&b| b == b'\n')
            .take(MAX_LINES)
            .filter_map(|l| std::str::from_utf8(l).ok())
            .find_map(|l| ftp_line(l.trim_end(), orig, reply))
    }
}

/// Lines of one segment an FTP helper reads at most.
const MAX_LINES: usize = 16;

/// What one line of an FTP control connection makes expected.
fn ftp_line(line: &str, orig: &Tuple, reply: bool) -> Option<Expected> {
    let (client, server) = (orig.src, orig.dst);
    let expect = |src: u128, dst: u128, dst_port: u16| Expected {
        src,
        dst,
        dst_port,
        proto: IPPROTO_TCP,
        v6: orig.v6,
    };
    if !reply {
        let verb = line.get(..5).map(str::to_ascii_uppercase);
        match verb.as_deref() {
            Some("PORT ") => {
                let (addr, port) = six_numbers(&line[5..])?;
                (!orig.v6 && addr == client).then(|| expect(server, client, port))
            }
            Some("EPRT ") => {
                let (addr, port) = eprt(&line[5..])?;
                (addr == (orig.v6, client)).then(|| expect(server, client, port))
            }
            _ => None,
        }
    } else if let Some(rest) = line.strip_prefix("227 ") {
        let inner = rest.split_once('(')?.1.split_once(')')?.0;
        let (addr, port) = six_numbers(inner)?;
        (!orig.v6 && addr == server).then(|| expect(client, server, port))
    } else if let Some(rest) = line.strip_prefix("229 ") {
        // `(|||port|)`, any one delimiter.
        let inner = rest.split_once('(')?.1.split_once(')')?.0;
        let d = inner.chars().next()?;
        let parts: Vec<&str> = inner.split(d).collect();
        let ["", "", "", port, ""] = parts[..] else {
            return None;
        };
        let port: u16 = port.parse().ok().filter(|&p| p != 0)?;
        Some(expect(client, server, port))
    } else {
        None
    }
}

/// `h1,h2,h3,h4,p1,p2`: an IPv4 address and a port.
fn six_numbers(s: &str) -> Option<(u128, u16)> {
    let n: Vec<u8> = s
        .trim()
        .split(',')
        .map(|p| p.trim().parse().ok())
        .collect::<Option<_>>()?;
    let [a, b, c, d, p1, p2] = n[..] else {
        return None;
    };
    let port = u16::from_be_bytes([p1, p2]);
    (port != 0).then(|| (u128::from(u32::from_be_bytes([a, b, c, d])), port))
}

/// `EPRT |1|a.b.c.d|port|` or `|2|v6|port|`: (IPv6, the address) and the port.
fn eprt(s: &str) -> Option<((bool, u128), u16)> {
    let s = s.trim();
    let d = s.chars().next()?;
    let parts: Vec<&str> = s.split(d).collect();
    let [_, proto, addr, port, _] = parts[..] else {
        return None;
    };
    let port: u16 = port.parse().ok().filter(|&p| p != 0)?;
    let addr = match proto {
        "1" => (false, u128::from(u32::from(addr.parse::<Ipv4Addr>().ok()?))),
        "2" => (true, u128::from(addr.parse::<Ipv6Addr>().ok()?)),
        _ => return None,
    };
    Some((addr, port))
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
    use proptest::prelude::*;

    proptest! {
        /// Whatever a control connection carries: no panic, and nothing expected
        /// but from and to the connection's own ends.
        #[test]
        fn any_payload_is_read_safely(payload in proptest::collection::vec(any::<u8>(), 0..300), reply in any::<bool>()) {
            let control = Tuple { src: 1, dst: 2, src_port: 40000, dst_port: 21, proto: IPPROTO_TCP, ..Tuple::default() };
            if let Some(e) = Helper::Ftp.read(&payload, &control, reply) {
                prop_assert!(e.src != e.dst && [1, 2].contains(&e.src) && [1, 2].contains(&e.dst));
            }
        }
    }

    #[test]
    fn ftp_commands_make_the_data_connection_expected() {
        let client = u128::from(0xc612_0001u32);
        let server = u128::from(0xc612_0002u32);
        let control = Tuple {
            src: client,
            dst: server,
            src_port: 40000,
            dst_port: 21,
            proto: IPPROTO_TCP,
            ..Tuple::default()
        };
        let ftp = Helper::Ftp;
        // Active: the server connects to the client's port 0x1f90 = 8080.
        let active = Some(Expected {
            src: server,
            dst: client,
            dst_port: 8080,
            proto: IPPROTO_TCP,
            v6: false,
        });
        assert_eq!(
            ftp.read(b"PORT 198,18,0,1,31,144\r\n", &control, false),
            active
        );
        assert_eq!(
            ftp.read(b"port 198,18,0,1,31,144\r\n", &control, false),
            active
        );
        assert_eq!(
            ftp.read(b"EPRT |1|198.18.0.1|8080|\r\n", &control, false),
            active
        );
        // Another host's address (a bounce): nothing. Garbage: nothing.
        assert_eq!(
            ftp.read(b"PORT 198,18,0,9,31,144\r\n", &control, false),
            None
        );
        assert_eq!(ftp.read(b"PORT 1,2,3\r\n", &control, false), None);
        assert_eq!(ftp.read(b"PORT 198,18,0,1,0,0\r\n", &control, false), None);
        assert_eq!(ftp.read(&[0xff, 0xfe, b'P'], &control, false), None);
        // A server's command from the client is nothing either.
        assert_eq!(
            ftp.read(
                b"227 Entering Passive Mode (198,18,0,2,31,144)\r\n",
                &control,
                false
            ),
            None
        );
        // Passive: the client connects to the server's port.
        let passive = Some(Expected {
            src: client,
            dst: server,
            dst_port: 8080,
            proto: IPPROTO_TCP,
            v6: false,
        });
        assert_eq!(
            ftp.read(
                b"227 Entering Passive Mode (198,18,0,2,31,144).\r\n",
                &control,
                true
            ),
            passive
        );
        assert_eq!(
            ftp.read(
                b"229 Entering Extended Passive Mode (|||8080|)\r\n",
                &control,
                true
            ),
            passive
        );
        assert_eq!(
            Helper::Tftp.read(b"PORT 198,18,0,1,31,144\r\n", &control, false),
            None
        );
        // Two commands in one segment; a line of bytes no text before it.
        assert_eq!(
            ftp.read(b"TYPE I\r\nPORT 198,18,0,1,31,144\r\n", &control, false),
            active
        );
        assert_eq!(
            ftp.read(b"\xff\xfe\r\nPORT 198,18,0,1,31,144\r\n", &control, false),
            active
        );
        // 229 only in its own form, and never port 0.
        for bad in [
            &b"229 Entering Extended Passive Mode (8080)\r\n"[..],
            b"229 Entering Extended Passive Mode (|||0|)\r\n",
            b"229 Entering Extended Passive Mode (||1|8080|)\r\n",
        ] {
            assert_eq!(ftp.read(bad, &control, true), None);
        }
    }

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
        assert_eq!(Helper::Tftp.name(), "tftp");
        assert_eq!(Helper::of_port(69), Some(Helper::Tftp));
        assert_eq!(Helper::of_port(70), None);
    }
}
