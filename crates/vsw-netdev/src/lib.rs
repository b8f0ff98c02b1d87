//! Linux devices turned into vsw ports. All of vsw's `unsafe` for devices lives here,
//! each block behind a safe type: `sys` wraps the system calls, `afpacket` the
//! AF_PACKET socket with its mmap rings, `tap` tap interfaces vsw creates.

// `unsafe` is allowed only where the edges are: system calls and the ring mapping
// (`sys`), frames in the rings (`afpacket`'s ring modules), guest memory's SIGBUS
// guard (`guest_memory`) and the BPF maps' plain-data types (`ebpf`).
#![deny(unsafe_code)]

pub mod afpacket;
pub mod class;
#[allow(unsafe_code)]
pub mod ebpf;
#[allow(unsafe_code)]
pub mod guest_memory;
pub mod interface;
#[allow(unsafe_code)]
mod sys;
pub mod tap;
pub mod tunnel;
pub mod unix_socket;
pub mod vhost;
mod vnet_frame;

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

/// Moves the calling thread into the named network namespace (made by `ip netns add`).
pub fn enter_netns(name: &str) -> Result<(), std::io::Error> {
    if name.is_empty() || name.contains('/') {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("'{name}' is not a network namespace name"),
        ));
    }
    sys::enter_netns(&std::path::Path::new("/run/netns").join(name))
}

/// Raises this process's limit of open files to the most it may have, and returns the
/// new limit: every port, guest and control client holds descriptors.
/// Takes a POSIX write lock on `file` for as long as the process lives (a daemon's
/// pid file, as Open vSwitch's tools check it).
pub fn lock_pid_file(file: &std::fs::File) -> Result<(), std::io::Error> {
    sys::lock_whole_file(file)
}

pub fn raise_open_file_limit() -> Result<u64, std::io::Error> {
    sys::raise_open_file_limit()
}
