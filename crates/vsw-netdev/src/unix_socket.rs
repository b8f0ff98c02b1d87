//! Unix sockets vsw listens on (its control socket, vhost-user ports) and connects to
//! (a VM's vhost-user socket).
//!
//! A listening socket is created with its final mode and group: it is bound in a
//! private directory, given its mode and group there, and renamed into place, so that
//! under a loose umask there is no moment at which anyone else may connect. Only a
//! socket is ever replaced, and only one nobody listens on any more.

use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// What is at a path where vsw would put a socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathUse {
    Free,
    /// A socket nobody accepts on (left by a process that ended).
    StaleSocket,
    /// A socket something listens on.
    LiveSocket,
    /// A file, directory or anything else that is not a socket.
    NotASocket,
}

/// What is at `path`.
pub fn path_use(path: &Path) -> PathUse {
    match fs::symlink_metadata(path) {
        Err(_) => PathUse::Free,
        Ok(m) if !m.file_type().is_socket() => PathUse::NotASocket,
        Ok(_) => match connect_nonblocking(path) {
            Ok(_) => PathUse::LiveSocket,
            // A full backlog: somebody is there, just busy.
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => PathUse::LiveSocket,
            Err(_) => PathUse::StaleSocket,
        },
    }
}

/// The identity of the socket file vsw made, so that it removes that file and not one
/// that took its place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SocketFile {
    dev: u64,
    ino: u64,
}

impl SocketFile {
    /// Removes `path` if it is still this socket.
    pub fn remove(&self, path: &Path) {
        if let Ok(m) = fs::symlink_metadata(path) {
            if m.dev() == self.dev && m.ino() == self.ino {
                let _ = fs::remove_file(path);
            }
        }
    }
}

/// The group named `group`: a number, or a name as `getent group` knows it.
pub fn group_id(group: &str) -> io::Result<u32> {
    if let Ok(n) = group.parse::<u32>() {
        return Ok(n);
    }
    crate::sys::group_id(group)?.ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!("there is no group named '{group}'"),
        )
    })
}

static NEXT: AtomicU64 = AtomicU64::new(0);

/// Listens on `path` with permission bits `mode` and, if given, group `gid`, from the
/// moment the socket is there. A stale socket at `path` is replaced; a live one, or
/// anything that is not a socket, is an error and left alone.
pub fn bind_listener(
    path: &Path,
    mode: u32,
    gid: Option<u32>,
) -> io::Result<(UnixListener, SocketFile)> {
    match path_use(path) {
        PathUse::Free | PathUse::StaleSocket => {}
        PathUse::LiveSocket => {
            return Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                format!("{} is in use by another process", path.display()),
            ))
        }
        PathUse::NotASocket => {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!(
                    "{} exists and is not a socket; vsw replaces only sockets",
                    path.display()
                ),
            ))
        }
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    fs::create_dir_all(&dir)?;
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "a socket path needs a name"))?;
    // The private directory: mode 0700 (a umask can only take bits away).
    let private = dir.join(format!(
        ".{}.{}.{}",
        name.to_string_lossy(),
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    fs::DirBuilder::new().mode(0o700).create(&private)?;
    let inside = private.join("s");
    let made = (|| {
        let listener = UnixListener::bind(&inside)?;
        fs::set_permissions(&inside, fs::Permissions::from_mode(mode))?;
        if gid.is_some() {
            std::os::unix::fs::chown(&inside, None, gid)?;
        }
        let m = fs::symlink_metadata(&inside)?;
        fs::rename(&inside, path)?;
        Ok((
            listener,
            SocketFile {
                dev: m.dev(),
                ino: m.ino(),
            },
        ))
    })();
    let _ = fs::remove_file(&inside);
    let _ = fs::remove_dir(&private);
    made
}

/// Connects to the socket at `path` without ever waiting: a listener whose backlog is
/// full (a VM that does not accept) is `WouldBlock`, not a hang. The stream returned
/// blocks as usual.
pub fn connect_nonblocking(path: &Path) -> io::Result<UnixStream> {
    let socket = socket2::Socket::new(socket2::Domain::UNIX, socket2::Type::STREAM, None)?;
    socket.set_nonblocking(true)?;
    socket.connect(&socket2::SockAddr::unix(path)?)?;
    socket.set_nonblocking(false)?;
    Ok(UnixStream::from(std::os::fd::OwnedFd::from(socket)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("vsw-unix-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_listener_has_its_mode_and_replaces_only_stale_sockets() {
        let d = temp_dir("bind");
        let p = d.join("a.sock");
        let (l, file) = bind_listener(&p, 0o600, None).unwrap();
        let m = fs::metadata(&p).unwrap();
        assert!(m.file_type().is_socket());
        assert_eq!(m.permissions().mode() & 0o777, 0o600);
        assert_eq!(path_use(&p), PathUse::LiveSocket);
        let e = bind_listener(&p, 0o600, None).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AddrInUse, "{e}");
        drop(l);
        assert_eq!(path_use(&p), PathUse::StaleSocket);
        let (_l2, file2) = bind_listener(&p, 0o660, None).unwrap();
        assert_eq!(
            fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o660
        );
        // The first socket's identity no longer names the file: it stays.
        file.remove(&p);
        assert!(p.exists());
        file2.remove(&p);
        assert!(!p.exists());
        // A regular file is never replaced.
        fs::write(&p, "keep").unwrap();
        let e = bind_listener(&p, 0o600, None).unwrap_err();
        assert!(e.to_string().contains("not a socket"), "{e}");
        assert_eq!(fs::read_to_string(&p).unwrap(), "keep");
        // Nothing is left behind in the directory.
        let names: Vec<_> = fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("a.sock")]);
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn groups_by_name_and_number() {
        assert_eq!(group_id("0").unwrap(), 0);
        assert_eq!(group_id("root").unwrap(), 0);
        let e = group_id("no-such-group-vsw").unwrap_err();
        assert!(e.to_string().contains("no group named"), "{e}");
    }

    #[test]
    fn connecting_to_a_listener_that_never_accepts_does_not_wait() {
        let d = temp_dir("backlog");
        let p = d.join("full.sock");
        let (_l, _) = bind_listener(&p, 0o600, None).unwrap();
        // Fill the backlog (nobody accepts).
        let mut held = Vec::new();
        let started = std::time::Instant::now();
        let refused = loop {
            match connect_nonblocking(&p) {
                Ok(s) => held.push(s),
                Err(e) => break e,
            }
            assert!(held.len() < 100_000, "the backlog never filled");
        };
        assert_eq!(refused.kind(), io::ErrorKind::WouldBlock, "{refused}");
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
        assert_eq!(path_use(&p), PathUse::LiveSocket);
        fs::remove_dir_all(&d).unwrap();
    }
}
