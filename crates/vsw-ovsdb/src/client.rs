//! A blocking OVSDB client: calls wait for their responses; a reader thread routes
//! responses to their callers, answers the server's echo requests (its liveness
//! probe), and hands notifications (`update`, `locked`, `stolen`) and the end of the
//! connection to the owner as [`Event`]s.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::{json, Value};

use crate::jsonrpc::{Framer, FramingError, Message};
use crate::target::Target;

#[derive(Debug, thiserror::Error)]
pub enum OvsdbError {
    #[error("cannot connect to {target}: {source}")]
    Connect { target: String, source: io::Error },
    #[error("the connection failed: {0}")]
    Io(#[from] io::Error),
    #[error("the connection is closed")]
    Closed,
    #[error("no answer to {0} in time")]
    Timeout(String),
    #[error("{method} failed: {error}")]
    Rpc { method: String, error: Value },
    #[error("the transaction failed: {error}{}", if details.is_empty() { String::new() } else { format!(" ({details})") })]
    Transaction { error: String, details: String },
    #[error("the server sent what is not OVSDB: {0}")]
    Framing(#[from] FramingError),
    #[error("the lock {0} is another client's now")]
    LockLost(String),
}

/// What the server says unasked.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// A monitor's table-updates (RFC 7047 4.1.6).
    Update { monitor: Value, updates: Value },
    /// A lock asked for earlier is now this client's.
    Locked(String),
    /// Another client took the lock.
    Stolen(String),
    /// The connection ended.
    Closed,
}

enum Stream {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl Stream {
    fn connect(target: &Target) -> io::Result<Stream> {
        Ok(match target {
            Target::Unix(p) => Stream::Unix(UnixStream::connect(p)?),
            Target::Tcp(a) => {
                let s = TcpStream::connect_timeout(a, Duration::from_secs(5))?;
                s.set_nodelay(true)?;
                Stream::Tcp(s)
            }
        })
    }

    fn try_clone(&self) -> io::Result<Stream> {
        Ok(match self {
            Stream::Unix(s) => Stream::Unix(s.try_clone()?),
            Stream::Tcp(s) => Stream::Tcp(s.try_clone()?),
        })
    }

    fn shutdown(&self) {
        let _ = match self {
            Stream::Unix(s) => s.shutdown(Shutdown::Both),
            Stream::Tcp(s) => s.shutdown(Shutdown::Both),
        };
    }
}

impl Read for Stream {
    fn read(&mut self, b: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Unix(s) => s.read(b),
            Stream::Tcp(s) => s.read(b),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Unix(s) => s.write(b),
            Stream::Tcp(s) => s.write(b),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

type Pending = Mutex<HashMap<u64, Sender<Result<Value, OvsdbError>>>>;

pub struct Client {
    writer: Arc<Mutex<Stream>>,
    pending: Arc<Pending>,
    events: Receiver<Event>,
    next_id: AtomicU64,
    reader: Option<JoinHandle<()>>,
}

/// How long a call waits for its answer.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(30);

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Client {
    pub fn connect(target: &Target) -> Result<Client, OvsdbError> {
        let stream = Stream::connect(target).map_err(|source| OvsdbError::Connect {
            target: target.to_string(),
            source,
        })?;
        let reading = stream.try_clone()?;
        let writer = Arc::new(Mutex::new(stream));
        let pending: Arc<Pending> = Arc::default();
        let (tx, events) = mpsc::channel();
        let (w, p) = (writer.clone(), pending.clone());
        let reader = std::thread::Builder::new()
            .name("vsw-ovsdb-rx".into())
            .spawn(move || read_loop(reading, &w, &p, &tx))?;
        Ok(Client {
            writer,
            pending,
            events,
            next_id: AtomicU64::new(1),
            reader: Some(reader),
        })
    }

    /// What the server said unasked, in order.
    pub fn events(&self) -> &Receiver<Event> {
        &self.events
    }

    /// Calls `method` and waits for its result.
    pub fn call(&self, method: &str, params: Value) -> Result<Value, OvsdbError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = mpsc::channel();
        lock(&self.pending).insert(id, tx);
        let req = Message::Request {
            method: method.into(),
            params,
            id: json!(id),
        };
        if let Err(e) = lock(&self.writer).write_all(&req.to_bytes()) {
            lock(&self.pending).remove(&id);
            return Err(e.into());
        }
        match rx.recv_timeout(CALL_TIMEOUT) {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(OvsdbError::Rpc { error, .. })) => Err(OvsdbError::Rpc {
                method: method.into(),
                error,
            }),
            Ok(Err(e)) => Err(e),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                lock(&self.pending).remove(&id);
                Err(OvsdbError::Timeout(method.into()))
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => Err(OvsdbError::Closed),
        }
    }

    pub fn echo(&self) -> Result<(), OvsdbError> {
        self.call("echo", json!([])).map(|_| ())
    }

    /// Starts monitor `id` of database `db` (RFC 7047 4.1.5); returns the initial
    /// table-updates.
    pub fn monitor(&self, db: &str, id: Value, requests: Value) -> Result<Value, OvsdbError> {
        self.call("monitor", json!([db, id, requests]))
    }

    /// Runs a transaction; each operation's result, or the first error in it.
    pub fn transact(&self, db: &str, ops: Vec<Value>) -> Result<Vec<Value>, OvsdbError> {
        let mut params = vec![json!(db)];
        params.extend(ops);
        let results = self.call("transact", Value::Array(params))?;
        let results = match results {
            Value::Array(r) => r,
            other => {
                return Err(OvsdbError::Transaction {
                    error: "not an array of results".into(),
                    details: other.to_string(),
                })
            }
        };
        if let Some(e) = results.iter().find_map(|r| r.get("error")) {
            let details = results
                .iter()
                .find_map(|r| r.get("details").and_then(Value::as_str))
                .unwrap_or("");
            // An `assert` of a lock this client does not hold (RFC 7047 5.2.11).
            if e.as_str() == Some("not owner") {
                return Err(OvsdbError::LockLost(details.to_string()));
            }
            return Err(OvsdbError::Transaction {
                error: e.as_str().unwrap_or("error").to_string(),
                details: details.to_string(),
            });
        }
        Ok(results)
    }

    /// Asks for lock `id`: true if it is this client's now; otherwise a
    /// [`Event::Locked`] says when it becomes so.
    pub fn lock(&self, id: &str) -> Result<bool, OvsdbError> {
        let r = self.call("lock", json!([id]))?;
        Ok(r.get("locked").and_then(Value::as_bool).unwrap_or(false))
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        lock(&self.writer).shutdown();
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
    }
}

fn read_loop(
    mut stream: Stream,
    writer: &Mutex<Stream>,
    pending: &Pending,
    events: &Sender<Event>,
) {
    let mut framer = Framer::default();
    let mut buf = vec![0u8; 64 * 1024];
    let result: Result<(), OvsdbError> = (|| loop {
        let n = stream.read(&mut buf)?;
        if n == 0 {
            return Err(OvsdbError::Closed);
        }
        framer.push(&buf[..n])?;
        while let Some(v) = framer.next_value()? {
            match Message::from_value(v)? {
                Message::Response { result, error, id } => {
                    let Some(tx) = id.as_u64().and_then(|id| lock(pending).remove(&id)) else {
                        tracing::debug!(?id, "an OVSDB response nobody waits for");
                        continue;
                    };
                    let answer = if error.is_null() {
                        Ok(result)
                    } else {
                        Err(OvsdbError::Rpc {
                            method: String::new(),
                            error,
                        })
                    };
                    let _ = tx.send(answer);
                }
                Message::Request { method, params, id } => {
                    // The server's liveness probe; anything else it may not ask.
                    let reply = if method == "echo" {
                        Message::Response {
                            result: params,
                            error: Value::Null,
                            id,
                        }
                    } else {
                        Message::Response {
                            result: Value::Null,
                            error: json!("unknown method"),
                            id,
                        }
                    };
                    lock(writer).write_all(&reply.to_bytes())?;
                }
                Message::Notification { method, params } => {
                    let first = || params.get(0).cloned().unwrap_or(Value::Null);
                    let event = match method.as_str() {
                        "update" => Event::Update {
                            monitor: first(),
                            updates: params.get(1).cloned().unwrap_or(Value::Null),
                        },
                        "locked" => Event::Locked(first().as_str().unwrap_or("").into()),
                        "stolen" => Event::Stolen(first().as_str().unwrap_or("").into()),
                        _ => continue,
                    };
                    let _ = events.send(event);
                }
            }
        }
    })();
    if let Err(e) = &result {
        if !matches!(e, OvsdbError::Closed) {
            tracing::info!(error = %e, "the OVSDB connection ended");
        }
    }
    // Every caller still waiting is told; the owner hears it last.
    for (_, tx) in lock(pending).drain() {
        let _ = tx.send(Err(OvsdbError::Closed));
    }
    let _ = events.send(Event::Closed);
}
