//! A bridge's number within its backer: what the datapath's numbers of ports,
//! meters, notes and frozen translations name a bridge by.

/// A bridge's number within its backer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BridgeSlot(pub u32);
