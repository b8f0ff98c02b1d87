//! Linux devices turned into vsw ports. All of vsw's `unsafe` for devices lives here,
//! each block behind a safe type: `sys` wraps the system calls, `afpacket` the
//! AF_PACKET socket with its mmap rings.

pub mod afpacket;
pub mod interface;
mod sys;

use std::io;

#[derive(Debug, thiserror::Error)]
pub enum NetdevError {
    #[error("no network interface named '{0}'")]
    NoSuchInterface(String),
    #[error("'{0}' is not a valid interface name")]
    BadInterfaceName(String),
    #[error("{op} on '{ifname}' failed: {source}")]
    Syscall {
        op: &'static str,
        ifname: String,
        #[source]
        source: io::Error,
    },
}

/// Keeps the calling thread, and the threads it starts from now on, off every CPU but
/// `cpus` (the daemon's own threads stay off the PMD's core).
pub fn restrict_current_thread(cpus: &[usize]) -> Result<(), std::io::Error> {
    sys::set_thread_cpus(cpus)
}
