//! One connection over a byte stream: the greeting, reading and answering, and the
//! echo probe of a silent peer. The caller owns the socket (and its timeouts: a
//! read that times out is silence) and gives the session its bridge for each
//! received piece, under whatever lock the switch needs. Writing goes through the
//! caller's `send`, so that others (packet-ins, port status) can write whole
//! messages to the same peer between the answers.

use std::io::{self, ErrorKind, Read};
use std::time::{Duration, Instant};

use crate::session::{Closed, Session, SessionEvent};

/// Why a connection ended.
#[derive(Debug)]
pub enum Ended {
    /// The peer closed it, or reading or writing failed.
    Gone,
    /// Silent for a read timeout after an echo request (or before its hello).
    Silent,
    /// The session refused to go on (no hello, no common version, a broken frame).
    Closed(Closed),
}

/// How long a peer has from connecting to its hello: a peer that trickles bytes
/// without ever saying hello holds a connection slot no longer.
pub const HELLO_DEADLINE: Duration = Duration::from_secs(5);

/// Runs a connection with `session` until it ends. `receive` hands the bytes to the session with
/// the switch's bridge (`Session::receive`); `event` is told what the session saw.
/// What the session answers is sent before more is read, and a session that stopped
/// with work left (its output budget spent) is called again first: a peer's requests
/// never make more than one budget of answers wait in memory.
pub fn run<R: Read>(
    mut session: Session,
    conn: &mut R,
    mut send: impl FnMut(&[u8]) -> io::Result<()>,
    mut receive: impl FnMut(&mut Session, &[u8], &mut Vec<u8>) -> Result<Vec<SessionEvent>, Closed>,
    mut event: impl FnMut(SessionEvent),
) -> Ended {
    let connected = Instant::now();
    if send(&session.greeting()).is_err() {
        return Ended::Gone;
    }
    let mut buf = vec![0u8; 64 << 10];
    let mut probed = false;
    let mut out = Vec::new();
    loop {
        if session.version().is_none() && connected.elapsed() >= HELLO_DEADLINE {
            return Ended::Silent;
        }
        let n = match conn.read(&mut buf) {
            Ok(0) => return Ended::Gone,
            Ok(n) => n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                // Before the hello there is nothing to probe with: the peer had its
                // interval to say hello.
                let echo = session.keepalive();
                match echo {
                    Some(echo) if !probed => {
                        if send(&echo).is_err() {
                            return Ended::Gone;
                        }
                        probed = true;
                        continue;
                    }
                    _ => return Ended::Silent,
                }
            }
            Err(_) => return Ended::Gone,
        };
        probed = false;
        let mut input = &buf[..n];
        loop {
            out.clear();
            let result = receive(&mut session, input, &mut out);
            input = &[];
            // What the session learned (its version, above all) takes effect
            // before its answers go out: a peer that reads an answer and acts on
            // it finds the connection as the answer says (another controller's
            // role request then tells this one of its demotion).
            let closed = match result {
                Ok(events) => {
                    events.into_iter().for_each(&mut event);
                    None
                }
                Err(why) => Some(why),
            };
            if !out.is_empty() && send(&out).is_err() {
                return Ended::Gone;
            }
            if let Some(why) = closed {
                return Ended::Closed(why);
            }
            if !session.wants_more() {
                break;
            }
        }
        // A buffer grown by one large reply is not kept for the connection's life.
        if out.capacity() > 4 * crate::session::OUT_BUDGET {
            out = Vec::new();
        }
    }
}
