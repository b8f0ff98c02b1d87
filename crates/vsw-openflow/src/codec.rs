//! A message on the wire in any version vsw speaks: 1.2 on through `message.rs`'s
//! codec, 1.0 through `of10/`, 1.1 rewritten into 1.2's layout and back by
//! `of11.rs`, and 1.2's few layouts of its own through `of12.rs`.
//! Here only the choice of which: the version codecs depend on the messages, not
//! on each other.

use crate::error::Refusal;
use crate::frame::Header;
use crate::message::Message;
use crate::version::Version;

impl Message {
    /// Its type on the wire in `version`.
    fn kind_in(&self, version: u8) -> u8 {
        if version == Version::V1_0.wire() {
            crate::of10::kind(self)
        } else {
            self.kind_from_1_2(version)
        }
    }

    /// The message on the wire, header included, in `version` (a raw wire number:
    /// a hello goes out before any version is agreed, an error perhaps in the
    /// peer's own).
    pub fn encode(&self, version: u8, xid: u32) -> Vec<u8> {
        let mut out = Vec::with_capacity(32);
        Header {
            version,
            kind: self.kind_in(version),
            length: 0,
            xid,
        }
        .write(&mut out);
        let own = (version == Version::V1_0.wire() && crate::of10::encode_body(self, &mut out))
            || (version == Version::V1_1.wire() && crate::of11::encode_body(self, &mut out))
            || (version == Version::V1_2.wire() && crate::of12::encode_body(self, &mut out));
        if own {
            return crate::message::finish(out);
        }
        self.encode_common(version, out)
    }

    /// A message of a connection that speaks `version`; `message` is all of it,
    /// header included (as `next_message` cut it).
    pub fn decode(version: Version, message: &[u8]) -> Result<Message, Refusal> {
        Message::decode_in(version, message, crate::of10::Dialect::default())
    }

    /// As [`Message::decode`], for a 1.0 connection that asked for `dialect`.
    pub fn decode_in(
        version: Version,
        message: &[u8],
        dialect: crate::of10::Dialect,
    ) -> Result<Message, Refusal> {
        match version {
            Version::V1_0 => crate::of10::decode(message, dialect),
            Version::V1_1 => {
                // What 1.2 on added, 1.1 refuses; the rest is read in 1.2's layout.
                let h = Header::parse(message).ok_or(Refusal::BadLen)?;
                let body = message.get(crate::frame::HEADER_LEN..).unwrap_or_default();
                if h.version != version.wire() || h.kind == crate::message::OFPT_HELLO {
                    return Message::decode_from_1_2(version, message);
                }
                if let Some(refusal) = crate::of11::refused(h.kind, body) {
                    return Err(refusal);
                }
                Message::decode_from_1_2(Version::V1_2, &crate::of11::to_1_2(message)?)
            }
            Version::V1_2 => {
                // What 1.3 added, 1.2 refuses before 1.3's codec reads it.
                let h = Header::parse(message).ok_or(Refusal::BadLen)?;
                let body = message.get(crate::frame::HEADER_LEN..).unwrap_or_default();
                match crate::of12::refused(h.kind, body) {
                    Some(refusal) if h.version == version.wire() => Err(refusal),
                    _ => Message::decode_from_1_2(version, message),
                }
            }
            _ => Message::decode_from_1_2(version, message),
        }
    }
}

impl Refusal {
    /// The error message answering `request` in `version`: its code in that
    /// version's words (1.0's own or Nicira's vendor error; a bundle's refusal in
    /// 1.3 is ONF's experimenter error).
    pub fn answer_in(self, version: Version, request: &[u8]) -> Message {
        if version == Version::V1_0 {
            crate::of10::answer(self, request)
        } else {
            self.answer_from_1_2(version, request)
        }
    }
}
