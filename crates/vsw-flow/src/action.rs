use std::fmt;

/// What a rule does with a matching packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// Send to one port (never back to the port it came from).
    Output(u32),
    /// Behave as a MAC-learning switch.
    Normal,
    /// Send to every port but the one it came from.
    Flood,
    /// Discard; counted on the rule.
    Drop,
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Action::Output(p) => write!(f, "output:{p}"),
            Action::Normal => f.write_str("NORMAL"),
            Action::Flood => f.write_str("FLOOD"),
            Action::Drop => f.write_str("drop"),
        }
    }
}
