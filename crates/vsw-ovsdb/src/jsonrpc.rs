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

/// Bytes in, whole JSON values out.
#[derive(Default)]
pub struct Framer {
    buf: Vec<u8>,
}

impl Framer {
    pub fn push(&mut self, bytes: &[u8]) -> Result<(), FramingError> {
        if self.buf.len() + bytes.len() > MAX_PENDING {
            return Err(FramingError::TooLong);
        }
        self.buf.extend_from_slice(bytes);
        Ok(())
    }

    /// The next whole value, or `None` until more bytes come.
    pub fn next_value(&mut self) -> Result<Option<Value>, FramingError> {
        let mut values = serde_json::Deserializer::from_slice(&self.buf).into_iter::<Value>();
        match values.next() {
            None => {
                // Only white space.
                self.buf.clear();
                Ok(None)
            }
            Some(Ok(v)) => {
                let used = values.byte_offset();
                self.buf.drain(..used);
                Ok(Some(v))
            }
            Some(Err(e)) if e.is_eof() => Ok(None),
            Some(Err(e)) => Err(FramingError::Syntax(e)),
        }
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
