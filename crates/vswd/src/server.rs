//! The control server: JSON requests, one per line, on a unix socket only root can open.

use std::fs;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::protocol::{Reply, Request};
use crate::switch::Switch;

/// The longest request line taken (add-flows with many thousands of flows fits).
const MAX_REQUEST: u64 = 64 << 20;
/// A client that sends nothing for this long is dropped.
const IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// Binds the control socket with mode 0600. A stale socket file left by a crashed
/// daemon is replaced; one a live daemon answers on is not.
pub fn bind(path: &Path) -> io::Result<UnixListener> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs::create_dir_all(dir)?;
    }
    if path.exists() {
        if UnixStream::connect(path).is_ok() {
            return Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                format!("another vswd is listening on {}", path.display()),
            ));
        }
        fs::remove_file(path)?;
    }
    let listener = UnixListener::bind(path)?;
    fs::set_permissions(path, fs::Permissions::from_mode(0o600))?;
    Ok(listener)
}

/// Answers one request line. Garbage gets an error reply; nothing panics.
pub fn answer(switch: &Mutex<Switch>, line: &str) -> Reply {
    let req: Request = match serde_json::from_str(line) {
        Ok(r) => r,
        Err(e) => {
            return Reply {
                ok: false,
                error: Some(format!("bad request: {e}")),
                result: serde_json::Value::Null,
            }
        }
    };
    let mut sw = switch.lock().unwrap_or_else(|e| e.into_inner());
    match sw.handle(req) {
        Ok(result) => Reply {
            ok: true,
            error: None,
            result,
        },
        Err(e) => Reply {
            ok: false,
            error: Some(e.to_string()),
            result: serde_json::Value::Null,
        },
    }
}

fn serve_client(stream: UnixStream, switch: &Mutex<Switch>) -> io::Result<()> {
    stream.set_read_timeout(Some(IDLE_TIMEOUT))?;
    let mut writer = stream.try_clone()?;
    let mut reader = BufReader::new(stream);
    loop {
        let mut line = String::new();
        let n = match reader.by_ref().take(MAX_REQUEST).read_line(&mut line) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                let reply = Reply {
                    ok: false,
                    error: Some("bad request: not UTF-8".into()),
                    result: serde_json::Value::Null,
                };
                writeln!(writer, "{}", serde_json::to_string(&reply)?)?;
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        if n == 0 {
            return Ok(());
        }
        if !line.ends_with('\n') && n as u64 == MAX_REQUEST {
            let reply = Reply {
                ok: false,
                error: Some(format!("bad request: longer than {MAX_REQUEST} bytes")),
                result: serde_json::Value::Null,
            };
            writeln!(writer, "{}", serde_json::to_string(&reply)?)?;
            return Ok(());
        }
        if line.trim().is_empty() {
            continue;
        }
        let reply = answer(switch, line.trim());
        writeln!(writer, "{}", serde_json::to_string(&reply)?)?;
    }
}

/// Accepts clients forever, one thread each.
pub fn serve(listener: UnixListener, switch: Arc<Mutex<Switch>>) {
    for stream in listener.incoming() {
        match stream {
            Ok(s) => {
                let sw = switch.clone();
                let spawned = std::thread::Builder::new()
                    .name("control-client".into())
                    .spawn(move || {
                        if let Err(e) = serve_client(s, &sw) {
                            tracing::debug!(error = %e, "control client ended");
                        }
                    });
                if let Err(e) = spawned {
                    tracing::error!(error = %e, "cannot start a control client thread");
                }
            }
            Err(e) => tracing::warn!(error = %e, "accept on control socket failed"),
        }
    }
}
