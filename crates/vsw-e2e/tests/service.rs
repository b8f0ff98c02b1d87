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
