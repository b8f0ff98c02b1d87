//! The small HTTP/1.1 server `/metrics` is served by: one thread, every connection
//! a non-blocking socket on one poll (mio), so what any scraper does costs a bounded
//! amount and holds up nobody:
//! - at most [`MAX_CONNECTIONS`] connections; one more makes room by closing the
//!   one idle the longest;
//! - a connection has [`DEADLINE`] to send a whole request (from connecting, or from
//!   its last answer), and an answer [`DEADLINE`] to be taken; past either it is
//!   closed;
//! - one request of a connection is answered at a time: a client that pipelines
//!   requests and reads none has one answer waiting, its other requests unread
//!   (at most [`MAX_REQUEST`] bytes of them);
//! - answers are made by the caller's handler, whole, before they are written (a
//!   scrape copies counters and encodes them: milliseconds), and written as the
//!   client takes them.
//!
//! Requests are read by `httparse` (the parser hyper uses). Written here because no
//! synchronous HTTP server crate bounds its connections and deadlines (`tiny_http`,
//! used before, starts a thread per connection, with no cap and no timeouts).

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::time::{Duration, Instant};

use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token};

/// Connections served at once.
pub const MAX_CONNECTIONS: usize = 256;
/// How long a connection may take to send a whole request, or to take an answer.
pub const DEADLINE: Duration = Duration::from_secs(5);
/// The most a request (its line and headers) may be.
pub const MAX_REQUEST: usize = 16 << 10;

const LISTENER: Token = Token(usize::MAX);

/// A request as the handler sees it.
pub struct Request<'a> {
    pub method: &'a str,
    pub path: &'a str,
    /// Header `name`'s value (names compared without case).
    headers: &'a [httparse::Header<'a>],
}

impl Request<'_> {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .and_then(|h| std::str::from_utf8(h.value).ok())
    }
}

/// An answer: status, content type, body.
pub struct Response {
    pub status: u16,
    pub content_type: &'static str,
    pub body: String,
}

impl Response {
    fn bytes(&self, close: bool) -> Vec<u8> {
        let reason = match self.status {
            200 => "OK",
            400 => "Bad Request",
            404 => "Not Found",
            405 => "Method Not Allowed",
            431 => "Request Header Fields Too Large",
            _ => "",
        };
        let mut out = format!(
            "HTTP/1.1 {} {reason}\r\nContent-Type: {}\r\nContent-Length: {}\r\n{}\r\n",
            self.status,
            self.content_type,
            self.body.len(),
            if close { "Connection: close\r\n" } else { "" }
        )
        .into_bytes();
        out.extend_from_slice(self.body.as_bytes());
        out
    }
}

/// One client.
struct Conn {
    stream: TcpStream,
    /// Bytes of requests not answered yet.
    input: Vec<u8>,
    /// The answer being written, and how much of it went.
    output: Vec<u8>,
    written: usize,
    /// Closed once the answer is written.
    closing: bool,
    /// Past this, the connection is closed (a request not whole, an answer not
    /// taken).
    deadline: Instant,
    /// When it last made progress (the one idle the longest makes room).
    active: Instant,
}

/// What reading a connection's input gave.
enum Parsed {
    /// Not a whole request yet.
    More,
    /// A whole request, answered: the answer, whether to close after it, and the
    /// request's length.
    Answered(Vec<u8>, bool, usize),
}

fn parse(input: &[u8], handler: &dyn Fn(&Request) -> Response) -> Parsed {
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut req = httparse::Request::new(&mut headers);
    match req.parse(input) {
        Ok(httparse::Status::Partial) if input.len() < MAX_REQUEST => Parsed::More,
        Ok(httparse::Status::Partial) => {
            let r = Response {
                status: 431,
                content_type: "text/plain",
                body: "request too large\n".into(),
            };
            Parsed::Answered(r.bytes(true), true, input.len())
        }
        Ok(httparse::Status::Complete(len)) => {
            let close = req.version == Some(0)
                || req.headers.iter().any(|h| {
                    h.name.eq_ignore_ascii_case("connection")
                        && h.value.eq_ignore_ascii_case(b"close")
                });
            let r = Request {
                method: req.method.unwrap_or(""),
                path: req.path.unwrap_or(""),
                headers: req.headers,
            };
            let answer = handler(&r);
            Parsed::Answered(answer.bytes(close), close, len)
        }
        Err(_) => {
            let r = Response {
                status: 400,
                content_type: "text/plain",
                body: "not HTTP\n".into(),
            };
            Parsed::Answered(r.bytes(true), true, input.len())
        }
    }
}

impl Conn {
    /// Writes, answers and reads as far as the socket lets it (mio's notices come
    /// on changes, so it goes until the socket would block); whether it is still
    /// open.
    fn progress(&mut self, handler: &dyn Fn(&Request) -> Response) -> bool {
        let mut buf = [0u8; 4096];
        loop {
            // The answer waiting goes first.
            while self.written < self.output.len() {
                match self.stream.write(&self.output[self.written..]) {
                    Ok(0) => return false,
                    Ok(n) => {
                        self.written += n;
                        self.active = Instant::now();
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => return false,
                }
            }
            if !self.output.is_empty() {
                self.output = Vec::new();
                self.written = 0;
                if self.closing {
                    return false;
                }
                // The next request has its own deadline from now.
                self.deadline = Instant::now() + DEADLINE;
            }
            // A request read already (pipelined) is answered next.
            if let Parsed::Answered(bytes, close, len) = parse(&self.input, handler) {
                self.input.drain(..len.min(self.input.len()));
                self.output = bytes;
                self.closing = close;
                self.deadline = Instant::now() + DEADLINE;
                continue;
            }
            // Only then more is read: a client that takes no answer sends no more.
            match self.stream.read(&mut buf) {
                Ok(0) => return false,
                Ok(n) => {
                    self.input.extend_from_slice(&buf[..n]);
                    self.active = Instant::now();
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return false,
            }
        }
    }
}

/// Connections the kernel holds for the accept loop (the system's `somaxconn`
/// caps it; 4,096 on Debian 12).
const BACKLOG: i32 = 4096;

/// Binds `addr` and serves it with `handler` on a thread of its own (named
/// `name`), for the life of the process. Binding happens before this returns, so
/// an address in use is an error at start-up. The backlog is deep ([`BACKLOG`];
/// std and mio listen with 128): a burst of connections waits in the kernel's queue
/// for the accept loop, where a full queue would drop the handshakes of a scraper
/// arriving behind it, which then waits a second for its retransmission.
pub fn serve(
    addr: std::net::SocketAddr,
    name: &str,
    handler: impl Fn(&Request) -> Response + Send + 'static,
) -> io::Result<()> {
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::STREAM,
        None,
    )?;
    socket.set_reuse_address(true)?;
    socket.bind(&addr.into())?;
    socket.listen(BACKLOG)?;
    socket.set_nonblocking(true)?;
    let mut listener = TcpListener::from_std(socket.into());
    let poll = Poll::new()?;
    poll.registry()
        .register(&mut listener, LISTENER, Interest::READABLE)?;
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || run(poll, listener, &handler))
        .map(drop)
}

fn run(mut poll: Poll, listener: TcpListener, handler: &dyn Fn(&Request) -> Response) {
    let mut events = Events::with_capacity(256);
    let mut conns: HashMap<usize, Conn> = HashMap::new();
    let mut next = 0usize;
    loop {
        if poll
            .poll(&mut events, Some(Duration::from_millis(250)))
            .is_err()
        {
            continue;
        }
        for ev in events.iter() {
            if ev.token() == LISTENER {
                accept_all(&poll, &listener, &mut conns, &mut next);
                continue;
            }
            let key = ev.token().0;
            let open = match conns.get_mut(&key) {
                Some(c) => c.progress(handler),
                None => continue,
            };
            if !open {
                close(&poll, &mut conns, key);
            }
        }
        // Deadlines.
        let now = Instant::now();
        let late: Vec<usize> = conns
            .iter()
            .filter(|(_, c)| now >= c.deadline)
            .map(|(k, _)| *k)
            .collect();
        for k in late {
            close(&poll, &mut conns, k);
        }
    }
}

fn accept_all(
    poll: &Poll,
    listener: &TcpListener,
    conns: &mut HashMap<usize, Conn>,
    next: &mut usize,
) {
    loop {
        let (mut stream, _) = match listener.accept() {
            Ok(s) => s,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
            Err(e) => {
                // Out of descriptors, say: the connections waiting stay in the
                // backlog; those served go on.
                tracing::debug!(error = %e, "a metrics connection not accepted");
                return;
            }
        };
        if conns.len() >= MAX_CONNECTIONS {
            if let Some(idlest) = conns.iter().min_by_key(|(_, c)| c.active).map(|(k, _)| *k) {
                close(poll, conns, idlest);
            }
        }
        *next = next.wrapping_add(1) % (usize::MAX - 1);
        let key = *next;
        if poll
            .registry()
            .register(
                &mut stream,
                Token(key),
                Interest::READABLE | Interest::WRITABLE,
            )
            .is_err()
        {
            continue;
        }
        let now = Instant::now();
        conns.insert(
            key,
            Conn {
                stream,
                input: Vec::new(),
                output: Vec::new(),
                written: 0,
                closing: false,
                deadline: now + DEADLINE,
                active: now,
            },
        );
    }
}

fn close(poll: &Poll, conns: &mut HashMap<usize, Conn>, key: usize) {
    if let Some(mut c) = conns.remove(&key) {
        let _ = poll.registry().deregister(&mut c.stream);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hello(r: &Request) -> Response {
        Response {
            status: if r.path == "/metrics" { 200 } else { 404 },
            content_type: "text/plain",
            body: format!(
                "{} {} {}\n",
                r.method,
                r.path,
                r.header("accept").unwrap_or("-")
            ),
        }
    }

    #[test]
    fn requests_are_answered_one_at_a_time_and_bad_ones_refused() {
        let whole = b"GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: text/plain\r\n\r\nGET /x HTTP/1.1\r\n\r\n";
        match parse(whole, &hello) {
            Parsed::Answered(bytes, close, len) => {
                let text = String::from_utf8(bytes).unwrap();
                assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
                assert!(text.ends_with("GET /metrics text/plain\n"), "{text}");
                assert!(!close);
                assert_eq!(&whole[len..], b"GET /x HTTP/1.1\r\n\r\n");
            }
            Parsed::More => panic!("a whole request"),
        }
        assert!(matches!(parse(b"GET /metr", &hello), Parsed::More));
        for bad in [&b"\x00\x01garbage\r\n\r\n"[..], &[b'a'; MAX_REQUEST][..]] {
            match parse(bad, &hello) {
                Parsed::Answered(bytes, close, len) => {
                    assert!(close && len == bad.len());
                    assert!(bytes.starts_with(b"HTTP/1.1 4"));
                }
                Parsed::More => panic!("refused"),
            }
        }
        match parse(b"GET /metrics HTTP/1.0\r\n\r\n", &hello) {
            Parsed::Answered(bytes, close, _) => {
                assert!(close, "1.0 closes");
                assert!(String::from_utf8(bytes)
                    .unwrap()
                    .contains("Connection: close"));
            }
            Parsed::More => panic!("a whole request"),
        }
    }

    proptest::proptest! {
        /// Whatever a client sends, the parser answers or waits, and never panics.
        #[test]
        fn any_bytes_are_answered_or_waited_for(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..2000)) {
            let _ = parse(&bytes, &hello);
        }
    }
}
