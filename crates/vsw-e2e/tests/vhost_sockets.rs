//! vhost-user sockets as a user meets them: a port cannot take the control socket,
//! another port's socket or a file that is not a socket; its socket gets the mode and
//! group asked for; removing a port never waits on a frontend that is stuck.

use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use vsw_e2e::{serial, Vswd};

fn err_of(d: &Vswd, args: &[&str]) -> String {
    let out = d.ctl(args);
    assert!(!out.status.success(), "vswctl {args:?} should fail");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_vhost_port_cannot_take_what_is_not_its_own() {
    let _g = serial();
    let mut d = Vswd::start();
    // Named like the control socket, the default path would be the control socket.
    let e = err_of(&d, &["add-port", "vswd", "type=vhostuser"]);
    assert!(e.contains("control socket"), "{e}");
    let e = err_of(
        &d,
        &[
            "add-port",
            "x",
            "type=vhostuserclient",
            &format!("vhost-server-path={}", d.socket.display()),
        ],
    );
    assert!(e.contains("control socket"), "{e}");
    assert!(d.socket.metadata().unwrap().file_type().is_socket());
    d.ctl_ok(&["show"]);
    // Another port's socket.
    let shared = d.dir.join("shared.sock").display().to_string();
    d.ctl_ok(&[
        "add-port",
        "vm1",
        "type=vhostuser",
        &format!("vhost-server-path={shared}"),
    ]);
    let e = err_of(
        &d,
        &[
            "add-port",
            "vm2",
            "type=vhostuser",
            &format!("vhost-server-path={shared}"),
        ],
    );
    assert!(e.contains("port vm1 uses it"), "{e}");
    // A file that is not a socket is never replaced.
    let file = d.dir.join("notes.txt");
    std::fs::write(&file, "keep me").unwrap();
    let e = err_of(
        &d,
        &[
            "add-port",
            "vm3",
            "type=vhostuser",
            &format!("vhost-server-path={}", file.display()),
        ],
    );
    assert!(e.contains("not a socket"), "{e}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep me");
    // A stale socket (its process is gone) is replaced.
    let stale = d.dir.join("stale.sock");
    drop(UnixListener::bind(&stale).unwrap());
    d.ctl_ok(&[
        "add-port",
        "vm4",
        "type=vhostuser",
        &format!("vhost-server-path={}", stale.display()),
    ]);
    assert!(UnixStream::connect(&stale).is_ok());
    // The socket is fixed while the port lives.
    let e = err_of(
        &d,
        &["set-port", "vm1", "vhost-server-path=/tmp/elsewhere.sock"],
    );
    assert!(e.contains("fixed when a port is added"), "{e}");
    assert_eq!(d.show().ports.len(), 2);
    // A state file that asks for the control socket anyway (written by hand, or by
    // an older vswd): vswd starts, and that port stays down with the reason.
    d.stop();
    let mut state: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&d.state).unwrap()).unwrap();
    state["ports"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({
            "name": "vswd", "no": 9, "options": {"type": "vhostuser"}
        }));
    std::fs::write(&d.state, state.to_string()).unwrap();
    d.restart();
    let p = d.port("vswd");
    assert!(p.status.starts_with("down"), "{p:?}");
    assert!(p.status.contains("in use"), "{p:?}");
    d.ctl_ok(&["show"]);
}

#[test]
fn a_vhost_socket_gets_the_mode_and_group_asked_for() {
    let _g = serial();
    let d = Vswd::start();
    d.ctl_ok(&["add-port", "vm1", "type=vhostuser"]);
    let m = std::fs::metadata(d.dir.join("vm1.sock")).unwrap();
    assert_eq!(
        m.permissions().mode() & 0o777,
        0o600,
        "only root by default"
    );
    d.ctl_ok(&[
        "add-port",
        "vm2",
        "type=vhostuser",
        "vhost-sock-mode=0660",
        "vhost-sock-group=daemon",
    ]);
    let m = std::fs::metadata(d.dir.join("vm2.sock")).unwrap();
    assert_eq!(m.permissions().mode() & 0o777, 0o660);
    let gid = Command::new("getent")
        .args(["group", "daemon"])
        .output()
        .unwrap();
    let gid: u32 = String::from_utf8_lossy(&gid.stdout)
        .split(':')
        .nth(2)
        .and_then(|g| g.trim().parse().ok())
        .expect("the daemon group");
    assert_eq!(m.gid(), gid);
    let e = err_of(
        &d,
        &[
            "add-port",
            "vm3",
            "type=vhostuser",
            "vhost-sock-group=nosuchgroupvsw",
        ],
    );
    assert!(e.contains("no group named"), "{e}");
    let e = err_of(
        &d,
        &["add-port", "vm3", "type=vhostuser", "vhost-sock-mode=0400"],
    );
    assert!(e.contains("vhost-sock-mode"), "{e}");
    let e = err_of(&d, &["add-port", "vm3", "type=tap", "vhost-sock-mode=0660"]);
    assert!(e.contains("applies to vhostuser ports"), "{e}");
    assert_eq!(d.show().ports.len(), 2);
}

/// A VM's socket whose listener never accepts, its backlog full: a connect to it
/// would wait for ever.
fn stuck_vm_socket(path: &std::path::Path) -> std::process::Child {
    let script = format!(
        "import socket, time\n\
         l = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n\
         l.bind('{}'); l.listen(1)\n\
         held = []\n\
         while True:\n\
         \x20   c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); c.setblocking(False)\n\
         \x20   try:\n\
         \x20       c.connect('{}')\n\
         \x20   except (BlockingIOError, OSError):\n\
         \x20       break\n\
         \x20   held.append(c)\n\
         print('ready', flush=True)\n\
         time.sleep(60)\n",
        path.display(),
        path.display()
    );
    let mut child = Command::new("timeout")
        .args(["90", "python3", "-c", &script])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line.trim(), "ready");
    child
}

/// The daemon's thread count.
fn threads(d: &mut Vswd) -> usize {
    let pid = d.pid().expect("running");
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .count()
}

#[test]
fn removing_a_port_never_waits_on_a_stuck_frontend() {
    let _g = serial();
    let mut d = Vswd::start();
    d.ctl_ok(&["show"]);
    let before = threads(&mut d);
    // A client port whose VM never accepts.
    let vm = d.dir.join("stuck-vm.sock");
    let mut stuck = stuck_vm_socket(&vm);
    d.ctl_ok(&[
        "add-port",
        "vmc",
        "type=vhostuserclient",
        &format!("vhost-server-path={}", vm.display()),
    ]);
    std::thread::sleep(Duration::from_millis(500));
    let t = Instant::now();
    d.ctl_ok(&["--timeout", "5", "del-port", "vmc"]);
    assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
    let _ = stuck.kill();
    let _ = stuck.wait();
    // Server ports: a frontend connects and says nothing, the port goes at once;
    // again and again, so that a connection accepted just as the port goes is met.
    for i in 0..30 {
        let name = format!("vs{i}");
        d.ctl_ok(&["add-port", &name, "type=vhostuser"]);
        let sock = d.dir.join(format!("{name}.sock"));
        let _silent = UnixStream::connect(&sock).unwrap();
        if i % 2 == 0 {
            std::thread::sleep(Duration::from_millis(25));
        }
        let t = Instant::now();
        d.ctl_ok(&["--timeout", "5", "del-port", &name]);
        assert!(
            t.elapsed() < Duration::from_secs(1),
            "del-port {name} took {:?}",
            t.elapsed()
        );
        assert!(!sock.exists(), "{name}'s socket is removed with it");
    }
    // Every port's protocol thread ended.
    vsw_e2e::wait_until("the ports' threads to end", Duration::from_secs(5), || {
        threads(&mut d) == before
    });
}
