//! The control server: JSON requests, one per line, on a unix socket only root can open.
//!
//! One thread serves every client over non-blocking sockets (mio), one request at a
//! time per client: a reply is written before the client's next request is read, so a
//! client that never reads its replies holds at most one of them. Nothing a client
//! does can hold up the others for long: requests are bounded in size, a reply that
//! is not taken up within [`WRITE_TIMEOUT`] ends the client, idle clients are let go
//! after [`IDLE_TIMEOUT`], and when [`MAX_CLIENTS`] are connected the one idle the
//! longest makes room for a new one.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mio::net::UnixStream;
use mio::{Events, Interest, Poll, Token};
use vsw_netdev::unix_socket::{bind_listener, SocketFile};

use crate::protocol::{Reply, Request};
use crate::switch::Switch;

/// The longest request line taken (`add-flows` of 100,000 flows is ~10 MiB).
pub const MAX_REQUEST: usize = 64 << 20;
/// Clients connected at once; a new one beyond this displaces the one idle longest.
pub const MAX_CLIENTS: usize = 1024;
/// A client that sends nothing for this long is let go.
const IDLE_TIMEOUT: Duration = Duration::from_secs(30);
/// A client that takes none of its reply for this long is let go.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(5);

const LISTENER: Token = Token(0);

/// Binds the control socket, mode 0600 from the moment it exists. A stale socket left
/// by a daemon that ended is replaced; one a live daemon answers on is not, nor is
/// anything that is not a socket.
pub fn bind(path: &Path) -> io::Result<(UnixListener, SocketFile)> {
    bind_listener(path, 0o600, None)
}

/// Answers one request line. Garbage gets an error reply; nothing panics.
pub fn answer(switch: &Mutex<Switch>, line: &str) -> Reply {
    let req: Request = match serde_json::from_str(line) {
        Ok(r) => r,
        Err(e) => return error_reply(format!("bad request: {e}")),
    };
    let mut sw = switch.lock().unwrap_or_else(|e| e.into_inner());
    match sw.handle(req) {
        Ok(result) => Reply {
            ok: true,
            error: None,
            result,
        },
        Err(e) => error_reply(e.to_string()),
    }
}

/// The switch a request goes to now (the bridge `vswctl` reaches), or why there is
/// none.
pub type Resolve = Arc<dyn Fn() -> Result<Arc<Mutex<Switch>>, String> + Send + Sync>;

fn error_reply(error: String) -> Reply {
    Reply {
        ok: false,
        error: Some(error),
        result: serde_json::Value::Null,
    }
}

struct Client {
    stream: UnixStream,
    input: Vec<u8>,
    /// How much of `input` is known to hold no newline.
    scanned: usize,
    output: Vec<u8>,
    written: usize,
    /// The last time anything was read from or written to the client.
    active: Instant,
    /// The reply being written is the last (the request was refused outright).
    closing: bool,
}

/// What a client needs next.
#[derive(Debug, PartialEq, Eq)]
enum Next {
    /// Waiting for the socket (more of a request, or room for the reply).
    Wait,
    /// More to do, after the other clients had their turn.
    Again,
    Close,
}

/// Requests answered for one client before the others get a turn.
const REQUESTS_PER_TURN: usize = 16;

impl Client {
    fn reply(&mut self, reply: &Reply) {
        let text = serde_json::to_string(reply)
            .unwrap_or_else(|_| r#"{"ok":false,"error":"reply not serialisable"}"#.into());
        self.output.extend_from_slice(text.as_bytes());
        self.output.push(b'\n');
        self.written = 0;
    }

    /// Writes what is pending; `true` when all of it went.
    fn write_pending(&mut self) -> io::Result<bool> {
        while self.written < self.output.len() {
            match self.stream.write(&self.output[self.written..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    self.written += n;
                    self.active = Instant::now();
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        self.output.clear();
        self.written = 0;
        Ok(true)
    }

    /// The next complete request line, if one has arrived.
    fn take_line(&mut self) -> Option<Vec<u8>> {
        let Some(at) = self.input[self.scanned..].iter().position(|&b| b == b'\n') else {
            self.scanned = self.input.len();
            return None;
        };
        let end = self.scanned + at;
        let mut line: Vec<u8> = self.input.drain(..=end).collect();
        line.pop();
        self.scanned = 0;
        Some(line)
    }

    /// Does everything the client's socket allows now: writes the pending reply,
    /// answers the next request, reads more.
    fn pump(&mut self, resolve: &Resolve) -> Next {
        let mut buf = [0u8; 64 << 10];
        let mut answered = 0;
        loop {
            match self.write_pending() {
                Ok(true) => {}
                Ok(false) => return Next::Wait,
                Err(_) => return Next::Close,
            }
            if self.closing {
                return Next::Close;
            }
            if answered == REQUESTS_PER_TURN {
                return Next::Again;
            }
            if let Some(line) = self.take_line() {
                answered += 1;
                let reply = match std::str::from_utf8(&line) {
                    Ok(text) if text.trim().is_empty() => continue,
                    Ok(text) => match resolve() {
                        Ok(switch) => answer(&switch, text.trim()),
                        Err(why) => error_reply(why),
                    },
                    Err(_) => {
                        self.closing = true;
                        error_reply("bad request: not UTF-8".into())
                    }
                };
                self.reply(&reply);
                continue;
            }
            if self.input.len() > MAX_REQUEST {
                self.closing = true;
                self.input.clear();
                self.scanned = 0;
                self.reply(&error_reply(format!(
                    "bad request: longer than {MAX_REQUEST} bytes"
                )));
                continue;
            }
            match self.stream.read(&mut buf) {
                Ok(0) => return Next::Close,
                Ok(n) => {
                    self.input.extend_from_slice(&buf[..n]);
                    self.active = Instant::now();
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Next::Wait,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return Next::Close,
            }
        }
    }

    /// Whether the client has overstayed: idle too long, or not taking its reply.
    fn expired(&self, now: Instant) -> bool {
        let quiet = now.duration_since(self.active);
        if self.output.is_empty() {
            quiet > IDLE_TIMEOUT
        } else {
            quiet > WRITE_TIMEOUT
        }
    }
}

/// Serves clients on `listener` until the process ends; each request goes to the
/// switch `resolve` gives.
pub fn serve(listener: UnixListener, resolve: Resolve) -> io::Result<()> {
    listener.set_nonblocking(true)?;
    let mut listener = mio::net::UnixListener::from_std(listener);
    let mut poll = Poll::new()?;
    poll.registry()
        .register(&mut listener, LISTENER, Interest::READABLE)?;
    let mut clients: HashMap<Token, Client> = HashMap::new();
    let mut next_token = 1usize;
    let mut events = Events::with_capacity(256);
    // Clients that had more to do when their turn ended.
    let mut again: Vec<Token> = Vec::new();
    loop {
        let wait = if again.is_empty() {
            Duration::from_secs(1)
        } else {
            Duration::ZERO
        };
        if let Err(e) = poll.poll(&mut events, Some(wait)) {
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        let mut turn: Vec<Token> = std::mem::take(&mut again);
        for event in events.iter() {
            let token = event.token();
            if token == LISTENER {
                accept_all(&listener, &poll, &mut clients, &mut next_token);
            } else if !turn.contains(&token) {
                turn.push(token);
            }
        }
        for token in turn {
            let Some(c) = clients.get_mut(&token) else {
                continue;
            };
            match c.pump(&resolve) {
                Next::Wait => {}
                Next::Again => again.push(token),
                Next::Close => drop_client(&poll, &mut clients, token),
            }
        }
        let now = Instant::now();
        let expired: Vec<Token> = clients
            .iter()
            .filter(|(_, c)| c.expired(now))
            .map(|(t, _)| *t)
            .collect();
        for t in expired {
            tracing::debug!(client = t.0, "control client let go (idle, or not reading)");
            drop_client(&poll, &mut clients, t);
        }
    }
}

fn drop_client(poll: &Poll, clients: &mut HashMap<Token, Client>, token: Token) {
    if let Some(mut c) = clients.remove(&token) {
        let _ = poll.registry().deregister(&mut c.stream);
    }
}

/// Makes room for one more client: the one idle the longest goes.
fn displace_one(poll: &Poll, clients: &mut HashMap<Token, Client>) -> bool {
    let oldest = clients
        .iter()
        .min_by_key(|(_, c)| (c.output.is_empty(), c.active))
        .map(|(t, _)| *t);
    match oldest {
        Some(t) => {
            tracing::debug!(client = t.0, "control client displaced by a new one");
            drop_client(poll, clients, t);
            true
        }
        None => false,
    }
}

fn accept_all(
    listener: &mio::net::UnixListener,
    poll: &Poll,
    clients: &mut HashMap<Token, Client>,
    next_token: &mut usize,
) {
    loop {
        let stream = match listener.accept() {
            Ok((s, _)) => s,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            // Out of descriptors: a client goes so that this one can come in.
            Err(e) if e.raw_os_error() == Some(libc::EMFILE) => {
                if !displace_one(poll, clients) {
                    tracing::warn!(error = %e, "accept on control socket failed");
                    return;
                }
                continue;
            }
            Err(e) => {
                tracing::warn!(error = %e, "accept on control socket failed");
                return;
            }
        };
        if clients.len() >= MAX_CLIENTS {
            displace_one(poll, clients);
        }
        let token = Token(*next_token);
        *next_token = next_token.wrapping_add(1).max(1);
        let mut c = Client {
            stream,
            input: Vec::new(),
            scanned: 0,
            output: Vec::new(),
            written: 0,
            active: Instant::now(),
            closing: false,
        };
        if poll
            .registry()
            .register(
                &mut c.stream,
                token,
                Interest::READABLE | Interest::WRITABLE,
            )
            .is_err()
        {
            continue;
        }
        // A request already there is reported by the poll: it tells what is ready
        // when a socket is registered.
        clients.insert(token, c);
    }
}
