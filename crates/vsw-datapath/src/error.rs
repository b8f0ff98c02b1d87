//! What can go wrong when the datapath changes.

use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum DatapathError {
    #[error("port number {0} is already in use")]
    PortNumberInUse(u32),
    #[error("no port number {0}")]
    NoSuchPort(u32),
    #[error("the PMD on core {core} did not take up the change within {waited:?}")]
    PmdStalled { core: usize, waited: Duration },
    #[error("the PMD on core {core} has failed ({why}); the datapath cannot change until vswd starts again")]
    PmdFailed { core: usize, why: String },
    #[error("cannot start the PMD thread: {0}")]
    Spawn(#[source] std::io::Error),
    #[error("at least one PMD core is needed")]
    NoPmds,
    #[error("cannot open another transmit queue on port {port}: {source}")]
    TxQueue {
        port: String,
        #[source]
        source: std::io::Error,
    },
    #[error("port {port} has {queues} receive queue(s); queue {queue} does not exist")]
    NoSuchQueue {
        port: String,
        queues: usize,
        queue: usize,
    },
}
