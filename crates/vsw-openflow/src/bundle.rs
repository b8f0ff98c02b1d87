//! Bundles: flow-mods and group-mods a controller gathers and then commits as one
//! change — all of them, or (when one is refused) none. OpenFlow 1.4 on has them as
//! OFPT_BUNDLE_CONTROL / OFPT_BUNDLE_ADD_MESSAGE; OpenFlow 1.3 has the same bodies
//! as ONF's experimenter messages (which `ovs-ofctl --bundle -O OpenFlow13` sends),
//! and their errors as ONF's experimenter errors.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::flow_mod::FlowMod;
use crate::frame::{Header, HEADER_LEN};
use crate::group_mod::GroupMod;
use crate::reader::Reader;

pub const OFPT_BUNDLE_CONTROL: u8 = 33;
pub const OFPT_BUNDLE_ADD_MESSAGE: u8 = 34;
/// ONF's experimenter ID, and its bundle messages' types (OpenFlow 1.3).
pub const ONF_VENDOR_ID: u32 = 0x4f4e_4600;
pub const ONFT_BUNDLE_CONTROL: u32 = 2300;
pub const ONFT_BUNDLE_ADD_MESSAGE: u32 = 2301;

/// Bundle flags: carried out all or nothing; in the order added. vsw's commits are
/// always both.
pub const OFPBF_ATOMIC: u16 = 1 << 0;
pub const OFPBF_ORDERED: u16 = 1 << 1;

/// A bundle-control message's type.
pub const OFPBCT_OPEN_REQUEST: u16 = 0;
pub const OFPBCT_OPEN_REPLY: u16 = 1;
pub const OFPBCT_CLOSE_REQUEST: u16 = 2;
pub const OFPBCT_CLOSE_REPLY: u16 = 3;
pub const OFPBCT_COMMIT_REQUEST: u16 = 4;
pub const OFPBCT_COMMIT_REPLY: u16 = 5;
pub const OFPBCT_DISCARD_REQUEST: u16 = 6;
pub const OFPBCT_DISCARD_REPLY: u16 = 7;

/// OFPET_BUNDLE_FAILED (1.4 on).
pub const OFPET_BUNDLE_FAILED: u16 = 17;
/// ONF's bundle error codes start here (1.3): ONF1.3(2300 + the 1.4 code).
pub const ONF_BUNDLE_ERROR_BASE: u16 = 2300;

/// A bundle-control message: a request, or vsw's reply to one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BundleCtrl {
    pub bundle_id: u32,
    pub kind: u16,
    pub flags: u16,
}

/// A message added to a bundle: `message` is all of it, header included.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BundleAdd {
    pub bundle_id: u32,
    pub flags: u16,
    pub message: Vec<u8>,
}

/// Why a bundle request is refused (OFPBFC_*: the code is the 1.4 one).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BadBundle {
    #[error("a bundle request a slave controller may not make (BUNDLE_FAILED/EPERM)")]
    Eperm = 1,
    #[error("no open bundle has this id (BUNDLE_FAILED/BAD_ID)")]
    BadId = 2,
    #[error("a bundle of this id is open already (BUNDLE_FAILED/BUNDLE_EXIST)")]
    Exists = 3,
    #[error("the bundle is closed: nothing more can be added (BUNDLE_FAILED/BUNDLE_CLOSED)")]
    Closed = 4,
    #[error("too many bundles open on this connection (BUNDLE_FAILED/OUT_OF_BUNDLES)")]
    OutOfBundles = 5,
    #[error("a bundle-control type that is none (BUNDLE_FAILED/BAD_TYPE)")]
    BadType = 6,
    #[error("bundle flags vsw does not know, or not those the bundle was opened with (BUNDLE_FAILED/BAD_FLAGS)")]
    BadFlags = 7,
    #[error("a bundled message whose length does not fit (BUNDLE_FAILED/MSG_BAD_LEN)")]
    MsgBadLen = 8,
    #[error("a bundled message whose xid is not its bundle-add's (BUNDLE_FAILED/MSG_BAD_XID)")]
    MsgBadXid = 9,
    #[error(
        "a message a bundle cannot hold: only flow-mods and group-mods (BUNDLE_FAILED/MSG_UNSUP)"
    )]
    MsgUnsup = 10,
    #[error("more messages than a bundle holds (BUNDLE_FAILED/MSG_TOO_MANY)")]
    MsgTooMany = 12,
    #[error(
        "a message of the bundle was refused, so none was carried out (BUNDLE_FAILED/MSG_FAILED)"
    )]
    MsgFailed = 13,
}

impl BundleCtrl {
    pub(crate) fn decode_body(r: &mut Reader) -> Result<BundleCtrl, BadBundle> {
        let bundle_id = r.u32().ok_or(BadBundle::MsgBadLen)?;
        let kind = r.u16().ok_or(BadBundle::MsgBadLen)?;
        let flags = r.u16().ok_or(BadBundle::MsgBadLen)?;
        // Properties (experimenters' own, and 1.5's scheduling) are passed over, as
        // Open vSwitch passes them over.
        Ok(BundleCtrl {
            bundle_id,
            kind,
            flags,
        })
    }

    pub(crate) fn encode_body(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.bundle_id.to_be_bytes());
        out.extend_from_slice(&self.kind.to_be_bytes());
        out.extend_from_slice(&self.flags.to_be_bytes());
    }
}

impl BundleAdd {
    /// The inner message must be whole (its version is the caller's to check).
    pub(crate) fn decode_body(r: &mut Reader) -> Result<BundleAdd, BadBundle> {
        let bundle_id = r.u32().ok_or(BadBundle::MsgBadLen)?;
        r.u16().ok_or(BadBundle::MsgBadLen)?;
        let flags = r.u16().ok_or(BadBundle::MsgBadLen)?;
        let rest = r.rest();
        let h = Header::parse(rest).ok_or(BadBundle::MsgBadLen)?;
        let len = usize::from(h.length);
        if len < HEADER_LEN || len > rest.len() {
            return Err(BadBundle::MsgBadLen);
        }
        // What follows the message (padding, properties) is passed over.
        Ok(BundleAdd {
            bundle_id,
            flags,
            message: rest[..len].to_vec(),
        })
    }

    pub(crate) fn encode_body(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.bundle_id.to_be_bytes());
        out.extend_from_slice(&[0, 0]);
        out.extend_from_slice(&self.flags.to_be_bytes());
        out.extend_from_slice(&self.message);
    }
}

/// A message a bundle holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BundleItem {
    Flow(FlowMod),
    Group(GroupMod),
}

/// How long a bundle may go unused before it is dropped (Open vSwitch's
/// `bundle-idle-timeout` default).
pub const BUNDLE_IDLE_TIMEOUT: Duration = Duration::from_secs(10);
/// The most bundles one connection has open at once.
pub const MAX_OPEN_BUNDLES: usize = 64;
/// The most messages one connection's open bundles hold together: room for a
/// chassis's whole flow table in one bundle.
pub const MAX_BUNDLED_MESSAGES: usize = 1 << 20;
/// The most bytes one connection's open bundles hold together, counted as the
/// messages came and [`PREPARED_BYTES`] for each the switch made its own form of:
/// what a connection can make vswd keep (the decoded messages take about as much
/// again as they came).
pub const MAX_BUNDLED_BYTES: usize = 512 << 20;
/// What the switch's own form of a bundled message is counted as (vsw's: the rule,
/// its bucket's key, its state-file line and its place in the bundle's stage,
/// about 1.6 KiB).
pub const PREPARED_BYTES: usize = 2 << 10;

/// What the switch made of a bundled message when it was added (its own form of
/// the change, checked), handed back at the commit so that the commit does not
/// make it again; `None`: made at the commit.
pub type Prepared = Option<Box<dyn std::any::Any + Send>>;

/// One bundled message: the start of the bundle-add that brought it (what an error
/// for it carries, with its xid), the message decoded, and what the switch made
/// of it.
#[derive(Debug)]
pub struct Bundled {
    pub head: Vec<u8>,
    pub item: BundleItem,
    pub prepared: Prepared,
}

/// One open bundle: its flags, whether it was closed, its messages and their size.
#[derive(Debug)]
struct OpenBundle {
    flags: u16,
    closed: bool,
    items: Vec<Bundled>,
    /// What the switch made of the messages together as they came (its
    /// [`crate::Bridge::stage_bundled`]), for the commit.
    stage: Prepared,
    bytes: usize,
    used: Instant,
}

/// What a connection's bundles hold between their messages.
#[derive(Debug)]
pub struct OpenBundles {
    open: BTreeMap<u32, OpenBundle>,
    messages: usize,
    bytes: usize,
    max_messages: usize,
}

impl Default for OpenBundles {
    fn default() -> Self {
        OpenBundles {
            open: BTreeMap::new(),
            messages: 0,
            bytes: 0,
            max_messages: MAX_BUNDLED_MESSAGES,
        }
    }
}

/// What a bundle-control request asks the session to do once it is accepted.
#[derive(Debug)]
pub enum Control {
    /// Answer with this reply type.
    Reply(u16),
    /// Commit these messages, with what the switch staged of them (the bundle is
    /// gone already), then answer.
    Commit(Vec<Bundled>, Prepared),
}

impl OpenBundles {
    /// Takes bundle `id` away (its messages no longer count).
    fn remove(&mut self, id: u32) -> Option<OpenBundle> {
        let b = self.open.remove(&id)?;
        self.messages -= b.items.len();
        self.bytes -= b.bytes;
        Some(b)
    }

    /// Refuses with `why`, taking bundle `id` away as Open vSwitch does when a
    /// request about it is inconsistent (opened twice, added to or closed once
    /// closed, other flags).
    fn drop_for(&mut self, id: u32, why: BadBundle) -> BadBundle {
        self.remove(id);
        why
    }

    /// Drops the bundles unused for [`BUNDLE_IDLE_TIMEOUT`] (looked at whenever a
    /// bundle request comes: a bundle nobody asks about again costs only memory,
    /// bounded by [`MAX_BUNDLED_BYTES`]).
    fn expire(&mut self, now: Instant) {
        let idle: Vec<u32> = self
            .open
            .iter()
            .filter(|(_, b)| now.duration_since(b.used) >= BUNDLE_IDLE_TIMEOUT)
            .map(|(id, _)| *id)
            .collect();
        for id in idle {
            if let Some(b) = self.remove(id) {
                tracing::info!(
                    bundle = id,
                    messages = b.items.len(),
                    "OpenFlow bundle dropped: unused for 10 s"
                );
            }
        }
    }

    /// A bundle-control request: what to do, or why not.
    pub fn control(&mut self, c: &BundleCtrl, now: Instant) -> Result<Control, BadBundle> {
        self.expire(now);
        if c.flags & !(OFPBF_ATOMIC | OFPBF_ORDERED) != 0 {
            return Err(BadBundle::BadFlags);
        }
        let id = c.bundle_id;
        match c.kind {
            OFPBCT_OPEN_REQUEST => {
                if self.open.contains_key(&id) {
                    return Err(self.drop_for(id, BadBundle::Exists));
                }
                if self.open.len() >= MAX_OPEN_BUNDLES {
                    return Err(BadBundle::OutOfBundles);
                }
                self.open.insert(
                    id,
                    OpenBundle {
                        flags: c.flags,
                        closed: false,
                        items: Vec::new(),
                        stage: None,
                        bytes: 0,
                        used: now,
                    },
                );
                Ok(Control::Reply(OFPBCT_OPEN_REPLY))
            }
            OFPBCT_CLOSE_REQUEST => {
                let b = self.open.get_mut(&id).ok_or(BadBundle::BadId)?;
                if b.closed {
                    return Err(self.drop_for(id, BadBundle::Closed));
                }
                if b.flags != c.flags {
                    return Err(self.drop_for(id, BadBundle::BadFlags));
                }
                b.closed = true;
                b.used = now;
                Ok(Control::Reply(OFPBCT_CLOSE_REPLY))
            }
            OFPBCT_COMMIT_REQUEST => {
                let b = self.remove(id).ok_or(BadBundle::BadId)?;
                if b.flags != c.flags {
                    return Err(BadBundle::BadFlags);
                }
                Ok(Control::Commit(b.items, b.stage))
            }
            OFPBCT_DISCARD_REQUEST => {
                self.remove(id).ok_or(BadBundle::BadId)?;
                Ok(Control::Reply(OFPBCT_DISCARD_REPLY))
            }
            _ => Err(BadBundle::BadType),
        }
    }

    /// Adds a message to a bundle (opening it, as the spec allows, if it is not
    /// open yet); `len` is the bundle-add's length. Once it is taken, `stage` is
    /// given the bundle's stage with what the switch made of the message.
    pub fn add(
        &mut self,
        a: &BundleAdd,
        len: usize,
        message: Bundled,
        now: Instant,
        stage: impl FnOnce(&mut Prepared, &Prepared),
    ) -> Result<(), BadBundle> {
        self.expire(now);
        if a.flags & !(OFPBF_ATOMIC | OFPBF_ORDERED) != 0 {
            return Err(BadBundle::BadFlags);
        }
        let len = len
            + if message.prepared.is_some() {
                PREPARED_BYTES
            } else {
                0
            };
        if self.messages >= self.max_messages || self.bytes + len > MAX_BUNDLED_BYTES {
            return Err(BadBundle::MsgTooMany);
        }
        let id = a.bundle_id;
        match self.open.get(&id) {
            None if self.open.len() >= MAX_OPEN_BUNDLES => return Err(BadBundle::OutOfBundles),
            Some(b) if b.closed => return Err(self.drop_for(id, BadBundle::Closed)),
            Some(b) if b.flags != a.flags => return Err(self.drop_for(id, BadBundle::BadFlags)),
            _ => {}
        }
        let b = self.open.entry(id).or_insert(OpenBundle {
            flags: a.flags,
            closed: false,
            items: Vec::new(),
            stage: None,
            bytes: 0,
            used: now,
        });
        stage(&mut b.stage, &message.prepared);
        b.items.push(message);
        b.bytes += len;
        b.used = now;
        self.messages += 1;
        self.bytes += len;
        Ok(())
    }

    /// Messages held, over all open bundles.
    pub fn messages(&self) -> usize {
        self.messages
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::flow_mod;

    const FLAGS: u16 = OFPBF_ATOMIC | OFPBF_ORDERED;

    fn ctrl(bundle_id: u32, kind: u16) -> BundleCtrl {
        BundleCtrl {
            bundle_id,
            kind,
            flags: FLAGS,
        }
    }

    fn add(b: &mut OpenBundles, bundle_id: u32, now: Instant) -> Result<(), BadBundle> {
        let a = BundleAdd {
            bundle_id,
            flags: FLAGS,
            message: Vec::new(),
        };
        b.add(&a, 64, bundled(Vec::new(), None), now, |_, _| {})
    }

    fn bundled(head: Vec<u8>, prepared: Prepared) -> Bundled {
        Bundled {
            head,
            item: BundleItem::Flow(flow_mod(Vec::new(), Vec::new())),
            prepared,
        }
    }

    #[test]
    fn a_bundle_unused_for_ten_seconds_is_gone_with_its_messages() {
        let mut b = OpenBundles::default();
        let t0 = Instant::now();
        add(&mut b, 1, t0).unwrap();
        add(&mut b, 1, t0).unwrap();
        assert_eq!(b.messages(), 2);
        let later = t0 + BUNDLE_IDLE_TIMEOUT;
        assert!(matches!(
            b.control(&ctrl(1, OFPBCT_COMMIT_REQUEST), later),
            Err(BadBundle::BadId)
        ));
        assert_eq!(b.messages(), 0);
    }

    #[test]
    fn open_bundles_and_their_messages_are_bounded() {
        let mut b = OpenBundles {
            max_messages: 3,
            ..OpenBundles::default()
        };
        let now = Instant::now();
        for id in 0..MAX_OPEN_BUNDLES as u32 {
            assert!(matches!(
                b.control(&ctrl(id, OFPBCT_OPEN_REQUEST), now),
                Ok(Control::Reply(OFPBCT_OPEN_REPLY))
            ));
        }
        let full = b.control(&ctrl(1000, OFPBCT_OPEN_REQUEST), now);
        assert!(matches!(full, Err(BadBundle::OutOfBundles)));
        assert_eq!(
            add(&mut b, 1000, now),
            Err(BadBundle::OutOfBundles),
            "an add opens none either"
        );
        for _ in 0..3 {
            add(&mut b, 0, now).unwrap();
        }
        assert_eq!(add(&mut b, 1, now), Err(BadBundle::MsgTooMany));
        // A discard gives the room back.
        assert!(b.control(&ctrl(0, OFPBCT_DISCARD_REQUEST), now).is_ok());
        assert_eq!(add(&mut b, 1, now), Ok(()));
    }

    #[test]
    fn what_the_switch_made_of_a_message_counts_against_what_a_connection_may_keep() {
        let mut b = OpenBundles::default();
        let now = Instant::now();
        let a = BundleAdd {
            bundle_id: 1,
            flags: FLAGS,
            message: Vec::new(),
        };
        let mut add = |prepared: bool| {
            let p: Prepared = prepared.then(|| Box::new(()) as Box<dyn std::any::Any + Send>);
            b.add(&a, 64, bundled(Vec::new(), p), now, |_, _| {})
        };
        let fits = MAX_BUNDLED_BYTES / (64 + PREPARED_BYTES);
        for _ in 0..fits {
            add(true).unwrap();
        }
        assert_eq!(add(true), Err(BadBundle::MsgTooMany));
        // The room left takes a message the switch made nothing of.
        assert_eq!(add(false), Ok(()));
    }

    #[test]
    fn a_commit_takes_the_messages_in_the_order_added_with_the_stage_of_those_taken() {
        let mut b = OpenBundles {
            max_messages: 3,
            ..OpenBundles::default()
        };
        let now = Instant::now();
        let a = BundleAdd {
            bundle_id: 9,
            flags: FLAGS,
            message: Vec::new(),
        };
        // The stage lists the messages it was given.
        let stage = |stage: &mut Prepared, p: &Prepared| {
            let seen = stage.get_or_insert_with(|| Box::new(Vec::<u8>::new()));
            let of = p.as_ref().and_then(|p| p.downcast_ref::<u8>()).copied();
            seen.downcast_mut::<Vec<u8>>().unwrap().push(of.unwrap());
        };
        for priority in [3u8, 1, 2] {
            let p: Prepared = Some(Box::new(priority));
            b.add(&a, 64, bundled(vec![priority], p), now, stage)
                .unwrap();
        }
        // Refused (too many): not staged.
        let refused = b.add(&a, 64, bundled(vec![4], Some(Box::new(4u8))), now, stage);
        assert_eq!(refused, Err(BadBundle::MsgTooMany));
        let Ok(Control::Commit(items, stage)) = b.control(&ctrl(9, OFPBCT_COMMIT_REQUEST), now)
        else {
            panic!("no commit")
        };
        let order: Vec<u8> = items.iter().map(|b| b.head[0]).collect();
        assert_eq!(order, vec![3, 1, 2]);
        assert_eq!(
            *stage.unwrap().downcast::<Vec<u8>>().unwrap(),
            vec![3, 1, 2]
        );
        assert_eq!(b.messages(), 0);
    }
}
