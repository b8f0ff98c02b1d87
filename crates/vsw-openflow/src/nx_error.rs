//! Why a Nicira action cannot be read (shared by every Nicira action's decoder).

/// Why a Nicira action cannot be read (the flow-mod's error says it in OpenFlow's
/// words).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BadNxAction {
    /// Its length is not its kind's.
    Len,
    /// A pad that is not zero.
    Argument,
    /// A subtype vsw does not carry out.
    Subtype,
}
