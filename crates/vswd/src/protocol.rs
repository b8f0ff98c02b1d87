//! The control protocol is its own crate (`vsw-protocol`), so that clients need nothing
//! else of vsw; vswd's modules name it through here.

pub use vsw_protocol::*;
