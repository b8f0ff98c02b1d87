//! What goes wrong reading a flow's text, and how port names are resolved in it.

/// Turns a port name into its number.
pub trait PortResolver {
    fn port_no(&self, name: &str) -> Option<u32>;
}

impl<F: Fn(&str) -> Option<u32>> PortResolver for F {
    fn port_no(&self, name: &str) -> Option<u32> {
        self(name)
    }
}

/// A flow text that vsw cannot accept; the message names the field and value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FlowSyntaxError {
    #[error("unknown field '{0}'")]
    UnknownField(String),
    #[error("bad value '{value}' for {field}: {why}")]
    BadValue {
        field: String,
        value: String,
        why: String,
    },
    #[error("field '{0}' is given more than once")]
    Duplicate(String),
    #[error("{field} needs {needs}")]
    Prerequisite {
        field: &'static str,
        needs: &'static str,
    },
    #[error("unknown action '{0}'")]
    UnknownAction(String),
    #[error("no port named '{0}'")]
    UnknownPort(String),
    #[error("'drop' must be the only action")]
    DropWithOthers,
    #[error("missing 'actions=' (every flow needs actions, e.g. actions=drop)")]
    NoActions,
    #[error("del-flows/match text must not contain actions")]
    UnexpectedActions,
    #[error("action {action} needs {needs} in the match")]
    ActionPrerequisite {
        action: &'static str,
        needs: &'static str,
    },
    #[error("{0} belongs in add-flow, not in a match")]
    NotInMatch(&'static str),
    #[error("{0} belongs in a selection (del-flows, mod-flows, dump-flows), not in a flow")]
    NotInFlow(&'static str),
    #[error("goto_table:{to} in table {from}: a rule may only go to a later table")]
    GotoBackwards { from: u8, to: u8 },
    #[error("goto_table must be the last action")]
    GotoNotLast,
}
