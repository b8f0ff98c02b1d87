//! JSON-RPC 1.0 as OVSDB speaks it: requests, notifications (a request with a null
//! id) and responses, sent as JSON values one after another on a stream with nothing
//! between them — so the framing is the JSON syntax itself.

use serde_json::{json, Value};

/// The most a peer may send without completing a value: a database's whole initial
/// contents fit many times over; a peer that sends more is cut off.
pub const MAX_PENDING: usize = 64 << 20;

#[derive(Clone, Debug, PartialEq)]
pub enum Message {
    Request {
        method: String,
        params: Value,
        id: Value,
    },
    Notification {
        method: String,
        params: Value,
    },
    Response {
        result: Value,
        error: Value,
        id: Value,
    },
}

#[derive(Debug, thiserror::Error)]
pub enum FramingError {
    #[error("not JSON: {0}")]
    Syntax(serde_json::Error),
    #[error("a value longer than {MAX_PENDING} bytes")]
    TooLong,
    #[error("not a JSON-RPC message: {0}")]
    NotRpc(String),
}

impl Message {
    pub fn from_value(v: Value) -> Result<Message, FramingError> {
        let Value::Object(mut o) = v else {
            return Err(FramingError::NotRpc("not an object".into()));
        };
        match o.remove("method") {
            Some(Value::String(method)) => {
                let params = o.remove("params").unwrap_or(Value::Array(vec![]));
                match o.remove("id") {
                    None | Some(Value::Null) => Ok(Message::Notification { method, params }),
                    Some(id) => Ok(Message::Request { method, params, id }),
                }
            }
            Some(_) => Err(FramingError::NotRpc("a method that is not a string".into())),
            None => {
                let id = o
                    .remove("id")
                    .ok_or_else(|| FramingError::NotRpc("neither method nor id".into()))?;
                Ok(Message::Response {
                    result: o.remove("result").unwrap_or(Value::Null),
                    error: o.remove("error").unwrap_or(Value::Null),
                    id,
                })
            }
        }
    }

    pub fn to_value(&self) -> Value {
        match self {
            Message::Request { method, params, id } => {
                json!({"method": method, "params": params, "id": id})
            }
            Message::Notification { method, params } => {
                json!({"method": method, "params": params, "id": null})
            }
            Message::Response { result, error, id } => {
                json!({"result": result, "error": error, "id": id})
            }
        }
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(&self.to_value()).expect("a JSON value serializes")
    }
}

/// Bytes in, whole JSON values out, in time linear in the bytes: each byte is
/// looked at once to find where a value ends (its brackets, skipping strings), and
/// each value is parsed once, when it is whole — a 20 MB initial monitor reply
/// arriving 64 KiB at a time is not parsed again at every read.
#[derive(Default)]
pub struct Framer {
    buf: Vec<u8>,
    /// Where the values not taken yet begin (bytes before it are taken; the buffer
    /// is compacted once they are half of it).
    head: usize,
    /// How far the scan for the current value's end got.
    scanned: usize,
    /// The current value: where it starts, how deep its brackets are, whether the
    /// scan is inside a string (and just after a backslash there).
    start: Option<usize>,
    depth: usize,
    in_string: bool,
    escaped: bool,
    /// Bytes scanned in all (for the test that holds the framing linear).
    looked_at: u64,
}

impl Framer {
    pub fn push(&mut self, bytes: &[u8]) -> Result<(), FramingError> {
        if self.buf.len() - self.head + bytes.len() > MAX_PENDING {
            return Err(FramingError::TooLong);
        }
        if self.head > 0 && self.head * 2 >= self.buf.len() {
            self.buf.drain(..self.head);
            self.scanned -= self.head;
            self.start = self.start.map(|s| s - self.head);
            self.head = 0;
        }
        self.buf.extend_from_slice(bytes);
        Ok(())
    }

    /// The next whole value, or `None` until more bytes come.
    pub fn next_value(&mut self) -> Result<Option<Value>, FramingError> {
        while self.scanned < self.buf.len() {
            let b = self.buf[self.scanned];
            let at = self.scanned;
            self.scanned += 1;
            self.looked_at += 1;
            let Some(start) = self.start else {
                match b {
                    b' ' | b'\t' | b'\r' | b'\n' => self.head = self.scanned,
                    b'{' | b'[' => {
                        self.start = Some(at);
                        self.depth = 1;
                    }
                    // Not an object or array (JSON-RPC sends only objects): the
                    // parser says what it is, or that it is incomplete.
                    _ => return self.parse_rest(at),
                }
                continue;
            };
            if self.in_string {
                match b {
                    _ if self.escaped => self.escaped = false,
                    b'\\' => self.escaped = true,
                    b'"' => self.in_string = false,
                    _ => {}
                }
                continue;
            }
            match b {
                b'"' => self.in_string = true,
                b'{' | b'[' => self.depth += 1,
                b'}' | b']' => {
                    self.depth -= 1;
                    if self.depth == 0 {
                        let v = serde_json::from_slice(&self.buf[start..self.scanned])
                            .map_err(FramingError::Syntax)?;
                        self.start = None;
                        self.head = self.scanned;
                        return Ok(Some(v));
                    }
                }
                _ => {}
            }
        }
        Ok(None)
    }

    /// A value that is no object or array, starting at `at`: whole, incomplete, or
    /// not JSON.
    fn parse_rest(&mut self, at: usize) -> Result<Option<Value>, FramingError> {
        let mut values = serde_json::Deserializer::from_slice(&self.buf[at..]).into_iter::<Value>();
        match values.next() {
            None => Ok(None),
            Some(Ok(v)) => {
                self.head = at + values.byte_offset();
                self.scanned = self.head;
                Ok(Some(v))
            }
            Some(Err(e)) if e.is_eof() => {
                self.scanned = at;
                Ok(None)
            }
            Some(Err(e)) => Err(FramingError::Syntax(e)),
        }
    }

    /// Bytes looked at so far to find where values end.
    pub fn bytes_looked_at(&self) -> u64 {
        self.looked_at
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn messages_read_as_their_kind() {
        let r = Message::from_value(json!({"method":"echo","params":[],"id":"echo"})).unwrap();
        assert!(matches!(r, Message::Request { ref method, .. } if method == "echo"));
        let n = Message::from_value(json!({"method":"update","params":[1,{}],"id":null})).unwrap();
        assert!(matches!(n, Message::Notification { .. }));
        let a = Message::from_value(json!({"result":[],"error":null,"id":3})).unwrap();
        assert!(matches!(a, Message::Response { ref id, .. } if *id == json!(3)));
        for bad in [json!([1]), json!({"method": 3}), json!({"result": 1})] {
            assert!(Message::from_value(bad).is_err());
        }
        for m in [r, n, a] {
            assert_eq!(Message::from_value(m.to_value()).unwrap(), m);
        }
    }

    proptest! {
        /// However the stream is cut, the same values come out, in order.
        #[test]
        fn values_come_out_whole_however_the_stream_is_cut(
            n in 1usize..6,
            cuts in proptest::collection::vec(1usize..40, 1..20),
        ) {
            let values: Vec<Value> = (0..n)
                .map(|i| json!({"id": i, "result": {"s": "x\"}{".repeat(i), "n": [i, 1.5]}, "error": null}))
                .collect();
            let mut stream: Vec<u8> = Vec::new();
            for v in &values {
                stream.extend(serde_json::to_vec(v).unwrap());
                stream.push(b'\n');
            }
            let mut f = Framer::default();
            let mut out = Vec::new();
            let mut at = 0;
            for c in cuts.iter().cycle() {
                if at >= stream.len() {
                    break;
                }
                let end = (at + c).min(stream.len());
                f.push(&stream[at..end]).unwrap();
                at = end;
                while let Some(v) = f.next_value().unwrap() {
                    out.push(v);
                }
            }
            prop_assert_eq!(out, values);
        }

        /// The same values as serde_json reads from the whole stream at once, and
        /// every byte looked at once however small the pieces it comes in.
        #[test]
        fn framing_agrees_with_serde_and_is_linear(
            n in 1usize..8,
            cut in 1usize..64,
        ) {
            let values: Vec<Value> = (0..n)
                .map(|i| json!({"method": "update", "params": [null, {"T": {"u": {"new": {"k": ["map", [["a\\\"]", "}}"], ["b", i]]]}}}}], "id": null}))
                .collect();
            let mut stream = Vec::new();
            for v in &values {
                stream.extend(serde_json::to_vec(v).unwrap());
                stream.extend(b" \n");
            }
            let mut f = Framer::default();
            let mut out = Vec::new();
            for piece in stream.chunks(cut) {
                f.push(piece).unwrap();
                while let Some(v) = f.next_value().unwrap() {
                    out.push(v);
                }
            }
            prop_assert_eq!(out, values);
            prop_assert!(f.bytes_looked_at() <= stream.len() as u64);
        }

        /// Garbage is an error or more waiting, never a panic.
        #[test]
        fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let mut f = Framer::default();
            f.push(&bytes).unwrap();
            for _ in 0..4 {
                match f.next_value() {
                    Ok(Some(v)) => { let _ = Message::from_value(v); }
                    Ok(None) | Err(_) => break,
                }
            }
        }
    }
}
