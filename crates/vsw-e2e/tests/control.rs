//! The control plane under faults: a second daemon, a daemon that does not answer,
//! clients that connect and never read, oversized requests, the socket's mode.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use vsw_e2e::{binary, serial, unique, Vswd};

/// Runs a command that must end within `limit`; returns (success, stderr).
fn run_bounded(mut cmd: Command, limit: Duration) -> (bool, String) {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            let mut err = String::new();
            child
                .stderr
                .take()
                .expect("piped")
                .read_to_string(&mut err)
                .ok();
            return (status.success(), err);
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{cmd:?} did not end within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_second_vswd_is_refused_before_it_touches_anything() {
    let _g = serial();
    let a = Vswd::start();
    a.ctl_ok(&["add-port", "vm1", "type=vhostuser"]);
    a.ctl_ok(&["add-flow", "priority=5,actions=drop"]);
    let vm1 = a.dir.join("vm1.sock");
    let state = std::fs::read(&a.state).unwrap();
    let check_first_intact = |what: &str| {
        let m = std::fs::symlink_metadata(&vm1).unwrap_or_else(|e| panic!("{what}: vm1.sock: {e}"));
        assert!(m.file_type().is_socket(), "{what}");
        assert!(
            UnixStream::connect(&vm1).is_ok(),
            "{what}: the first daemon's vhost-user socket no longer answers"
        );
        assert_eq!(
            std::fs::read(&a.state).unwrap(),
            state,
            "{what}: state file"
        );
        assert_eq!(a.show().ports.len(), 1, "{what}");
    };
    // The same socket and state file.
    let (ok, err) = run_bounded(a.command(), Duration::from_secs(10));
    assert!(!ok && err.contains("another vswd"), "{err}");
    check_first_intact("same socket and state");
    // The same state file, another socket.
    let mut other = Command::new(binary("vswd"));
    other
        .arg("--socket")
        .arg(a.dir.join("other.sock"))
        .arg("--state-file")
        .arg(&a.state);
    let (ok, err) = run_bounded(other, Duration::from_secs(10));
    assert!(
        !ok && err.contains("another vswd") && err.contains("state file"),
        "{err}"
    );
    assert!(!a.dir.join("other.sock").exists());
    check_first_intact("same state file");
    // The same socket, another state file.
    let mut other = Command::new(binary("vswd"));
    other
        .arg("--socket")
        .arg(&a.socket)
        .arg("--state-file")
        .arg(a.dir.join("other.json"));
    let (ok, err) = run_bounded(other, Duration::from_secs(10));
    assert!(!ok && err.contains("control socket"), "{err}");
    check_first_intact("same control socket");
    a.ctl_ok(&["show"]);
}

#[test]
fn vswctl_gives_up_on_a_daemon_that_does_not_answer() {
    let _g = serial();
    let dir = std::env::temp_dir().join(unique("vsw-ctl-"));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("mute.sock");
    // Accepts, reads, and never answers.
    let listener = UnixListener::bind(&path).unwrap();
    let mute = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut buf = [0u8; 1024];
        let _ = s.read(&mut buf);
        std::thread::sleep(Duration::from_secs(4));
    });
    let started = Instant::now();
    let mut cmd = Command::new(binary("vswctl"));
    cmd.arg("--socket")
        .arg(&path)
        .args(["--timeout", "1", "show"]);
    let (ok, err) = run_bounded(cmd, Duration::from_secs(10));
    let took = started.elapsed();
    assert!(!ok && err.contains("did not answer within 1.0 s"), "{err}");
    assert!(took < Duration::from_secs(3), "took {took:?}");
    mute.join().unwrap();
    // Nobody listens any more (a socket file left behind), and no file at all.
    for (what, p) in [("stale", path.clone()), ("missing", dir.join("none.sock"))] {
        let mut cmd = Command::new(binary("vswctl"));
        cmd.arg("--socket").arg(&p).arg("show");
        let (ok, err) = run_bounded(cmd, Duration::from_secs(10));
        assert!(
            !ok && err.contains("no vswd is listening on"),
            "{what}: {err}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_control_socket_is_never_seen_before_it_has_its_mode() {
    let _g = serial();
    // A umask that would leave a freshly bound socket open to everyone.
    let mut d = Vswd::start_through(&["sh", "-c", "umask 000; exec \"$0\" \"$@\""]);
    d.stop();
    assert!(!d.socket.exists(), "a stopped vswd removes its socket");
    // Watches the directory: how the control socket and the ovs-appctl socket
    // (`vswd.<pid>.ctl`) appear, and their modes at that moment.
    let script = format!(
        "import ctypes, os, re, select, struct\n\
         libc = ctypes.CDLL('libc.so.6', use_errno=True)\n\
         fd = libc.inotify_init1(0)\n\
         libc.inotify_add_watch(fd, b'{dir}', 0x100 | 0x80)\n\
         print('ready', flush=True)\n\
         seen = set()\n\
         while len(seen) < 2:\n\
         \x20   r, _, _ = select.select([fd], [], [], 15)\n\
         \x20   if not r:\n\
         \x20       print('nothing'); break\n\
         \x20   data = os.read(fd, 65536); i = 0\n\
         \x20   while i < len(data):\n\
         \x20       wd, mask, cookie, n = struct.unpack_from('iIII', data, i)\n\
         \x20       name = data[i + 16:i + 16 + n].rstrip(b'\\0').decode(); i += 16 + n\n\
         \x20       kind = 'control' if name == 'vswd.sock' else 'appctl' if re.fullmatch(r'vswd\\.[0-9]+\\.ctl', name) else None\n\
         \x20       if kind and kind not in seen:\n\
         \x20           seen.add(kind)\n\
         \x20           mode = os.stat('{dir}/' + name).st_mode & 0o777\n\
         \x20           print(kind, 'created' if mask & 0x100 else 'moved', oct(mode), flush=True)\n",
        dir = d.dir.display()
    );
    let mut watcher = Command::new("timeout")
        .args(["30", "python3", "-c", &script])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(watcher.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready");
    d.restart();
    let mut seen = Vec::new();
    for _ in 0..2 {
        line.clear();
        out.read_line(&mut line).unwrap();
        seen.push(line.trim().to_string());
    }
    let _ = watcher.wait();
    seen.sort();
    assert_eq!(
        seen,
        ["appctl moved 0o600", "control moved 0o600"],
        "each socket must appear whole, with its final mode (not be created in place)"
    );
    let m = std::fs::metadata(&d.socket).unwrap();
    assert_eq!(m.permissions().mode() & 0o777, 0o600);
    d.ctl_ok(&["show"]);
}

#[test]
fn a_thousand_clients_that_never_read_do_not_keep_vswctl_waiting() {
    let _g = serial();
    // The soft limit of open files systemd gives a service: vswd raises its own.
    let d = Vswd::start_through(&["prlimit", "--nofile=1024:", "--"]);
    // Replies of a few hundred KiB: more than a socket holds.
    let flows: String = (0..2000)
        .map(|i| {
            format!(
                "priority={},udp,tp_dst={},actions=drop\n",
                i % 100 + 1,
                i + 1
            )
        })
        .collect();
    let file = d.dir.join("flows.txt");
    std::fs::write(&file, flows).unwrap();
    d.ctl_ok(&["add-flows", &file.display().to_string()]);
    let script = format!(
        "import resource, socket, time\n\
         soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)\n\
         resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))\n\
         held = []\n\
         for i in range(1000):\n\
         \x20   s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n\
         \x20   s.connect('{}')\n\
         \x20   if i % 100 == 0:\n\
         \x20       s.setblocking(False)\n\
         \x20       try:\n\
         \x20           s.send(b'{{\"cmd\":\"dump-flows\"}}\\n' * 50)\n\
         \x20       except BlockingIOError:\n\
         \x20           pass\n\
         \x20   held.append(s)\n\
         print('ready', flush=True)\n\
         time.sleep(30)\n",
        d.socket.display()
    );
    let mut clients = Command::new("timeout")
        .args(["60", "python3", "-c", &script])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(clients.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready", "the clients did not connect");
    // The ones that asked got their (first) answer under way by now.
    std::thread::sleep(Duration::from_millis(500));
    for _ in 0..3 {
        let started = Instant::now();
        let mut cmd = Command::new(binary("vswctl"));
        cmd.arg("--socket")
            .arg(&d.socket)
            .args(["--timeout", "10", "show"]);
        let (ok, err) = run_bounded(cmd, Duration::from_secs(15));
        let took = started.elapsed();
        assert!(ok, "{err}\n{}", d.log());
        assert!(took < Duration::from_secs(1), "answered after {took:?}");
    }
    let _ = Command::new("kill")
        .args(["-TERM", &clients.id().to_string()])
        .status();
    let _ = clients.wait();
}

#[test]
fn an_oversized_request_is_refused_and_a_hundred_thousand_flows_are_taken() {
    let _g = serial();
    let d = Vswd::start();
    let mut s = UnixStream::connect(&d.socket).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let writer = {
        let mut s = s.try_clone().unwrap();
        std::thread::spawn(move || {
            let chunk = vec![b' '; 1 << 20];
            // 70 MiB without a newline; vswd stops reading once it has answered.
            for _ in 0..70 {
                if s.write_all(&chunk).is_err() {
                    break;
                }
            }
        })
    };
    let mut reply = String::new();
    BufReader::new(&mut s).read_line(&mut reply).unwrap();
    assert!(
        reply.contains("\"ok\":false") && reply.contains("longer than"),
        "{reply}"
    );
    drop(s);
    writer.join().unwrap();
    // 100,000 flows in one request (~6 MiB) are well within the bound.
    let flows: String = (0..100_000u32)
        .map(|i| {
            format!(
                "priority=10,udp,nw_dst=198.18.{}.{},tp_dst={},actions=drop\n",
                (i >> 8) & 0xff,
                i & 0xff,
                i % 60_000 + 1
            )
        })
        .collect();
    let file = d.dir.join("many.txt");
    std::fs::write(&file, flows).unwrap();
    d.ctl_ok(&["--timeout", "120", "add-flows", &file.display().to_string()]);
    assert_eq!(
        d.show().flows,
        100_001,
        "the flows and the learning switch's NORMAL"
    );
}
