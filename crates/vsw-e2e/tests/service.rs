//! vswd as a systemd service: the unit in contrib/ passes `systemd-analyze verify`, and
//! vswd speaks `Type=notify` exactly — READY only once its ports are attached, STOPPING
//! when it is told to stop.

use std::os::unix::net::UnixDatagram;
use std::process::Command;
use std::time::Duration;

use vsw_e2e::{binary, serial, Vswd};

#[test]
fn the_unit_file_verifies() {
    let unit = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../contrib/vswd.service"
    ))
    .expect("contrib/vswd.service");
    // The unit names the installed binary; here, the one just built.
    let dir = std::env::temp_dir().join(format!("vsw-unit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("vswd.service");
    std::fs::write(
        &path,
        unit.replace("/usr/sbin/vswd", &binary("vswd").display().to_string()),
    )
    .unwrap();
    // (--man=no: the man page is the package's, not installed here.)
    let out = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(&path)
        .output()
        .expect("systemd-analyze");
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn ready_comes_once_the_ports_are_back_and_stopping_when_told_to_stop() {
    let _g = serial();
    let mut d = Vswd::start();
    d.ctl_ok(&["add-port", "p1", "type=ring"]);
    assert!(d.stop(), "{}", d.log());
    // Started again by a "service manager": this test, listening on NOTIFY_SOCKET.
    let notify = d.dir.join("notify.sock");
    let manager = UnixDatagram::bind(&notify).unwrap();
    manager
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut child = Started(
        d.command()
            .env("NOTIFY_SOCKET", &notify)
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("vswd"),
    );
    let mut buf = [0u8; 512];
    let n = manager.recv(&mut buf).expect("READY from vswd");
    let said = String::from_utf8_lossy(&buf[..n]).into_owned();
    assert!(said.lines().any(|l| l == "READY=1"), "{said}");
    // At READY the restored port is there already.
    let show = Command::new(binary("vswctl"))
        .arg("--socket")
        .arg(&d.socket)
        .arg("show")
        .output()
        .unwrap();
    let show = String::from_utf8_lossy(&show.stdout);
    assert!(show.contains("p1"), "{show}");
    let stopped = Command::new("kill")
        .arg(child.0.id().to_string())
        .status()
        .unwrap();
    assert!(stopped.success());
    let n = manager.recv(&mut buf).expect("STOPPING from vswd");
    assert!(
        String::from_utf8_lossy(&buf[..n])
            .lines()
            .any(|l| l == "STOPPING=1"),
        "{}",
        String::from_utf8_lossy(&buf[..n])
    );
    assert!(child.0.wait().unwrap().success());
}

/// The vswd this test started; ended by its pid if the test fails before it does.
struct Started(std::process::Child);

impl Drop for Started {
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_none() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// Under systemd (JOURNAL_STREAM set), vswd logs to the journal with its fields as
/// journal fields. Here the journal is this test, on journald's socket path — only
/// where no journald runs (the test leaves a machine with one alone).
#[test]
fn under_systemd_logs_go_to_the_journal_with_their_fields() {
    let _g = serial();
    let path = std::path::Path::new("/run/systemd/journal/socket");
    if path.exists() {
        eprintln!("a journald runs here: not standing in for it");
        return;
    }
    let made = ["/run/systemd", "/run/systemd/journal"]
        .into_iter()
        .filter(|d| !std::path::Path::new(d).exists())
        .collect::<Vec<_>>();
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let journal = UnixDatagram::bind(path).unwrap();
    journal
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let d = Vswd::prepared();
    let mut child = Started(
        d.command()
            .env("JOURNAL_STREAM", "8:12345")
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("vswd"),
    );
    let mut buf = vec![0u8; 65536];
    let mut seen = Vec::new();
    let ready = loop {
        let Ok(n) = journal.recv(&mut buf) else {
            break None;
        };
        let entry = journal_fields(&buf[..n]);
        if entry
            .iter()
            .any(|(k, v)| k == "MESSAGE" && v == "vswd ready")
        {
            break Some(entry);
        }
        seen.push(entry);
    };
    let _ = std::fs::remove_file(path);
    for d in made.iter().rev() {
        let _ = std::fs::remove_dir(d);
    }
    let _ = Command::new("kill").arg(child.0.id().to_string()).status();
    let _ = child.0.wait();
    let entry = ready.unwrap_or_else(|| panic!("no 'vswd ready' entry in {seen:?}"));
    let field = |k: &str| {
        entry
            .iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.clone())
    };
    assert_eq!(
        field("SYSLOG_IDENTIFIER").as_deref(),
        Some("vswd"),
        "{entry:?}"
    );
    // tracing's INFO is the journal's "notice" (5) or "info" (6).
    assert!(
        matches!(field("PRIORITY").as_deref(), Some("5" | "6")),
        "{entry:?}"
    );
    // The event's own fields, as journal fields.
    assert!(
        field("F_SOCKET").is_some_and(|s| s.ends_with("vswd.sock")),
        "{entry:?}"
    );
}

/// The fields of one entry in journald's native protocol: `KEY=VALUE` lines, or a
/// `KEY` line, a little-endian 64-bit length, the value and a newline.
fn journal_fields(mut b: &[u8]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    while let Some(nl) = b.iter().position(|&c| c == b'\n') {
        let line = &b[..nl];
        b = &b[nl + 1..];
        if let Some(eq) = line.iter().position(|&c| c == b'=') {
            out.push((
                String::from_utf8_lossy(&line[..eq]).into_owned(),
                String::from_utf8_lossy(&line[eq + 1..]).into_owned(),
            ));
        } else if b.len() >= 8 {
            let len = u64::from_le_bytes(b[..8].try_into().unwrap()) as usize;
            let value = b.get(8..8 + len).unwrap_or_default();
            out.push((
                String::from_utf8_lossy(line).into_owned(),
                String::from_utf8_lossy(value).into_owned(),
            ));
            b = b.get(8 + len + 1..).unwrap_or_default();
        }
    }
    out
}
