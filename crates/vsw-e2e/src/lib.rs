//! Test harness for end-to-end tests: network namespaces wired to vsw by veths, a
//! vswd started for the test, vswctl calls. Everything a test creates is removed when
//! its guards drop, also when the test fails.
//!
//! The tests need root. They run one at a time (a shared lock): each vswd busy-polls a
//! core, and two at once would measure each other.
#![forbid(unsafe_code)]

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use vsw_protocol::{FlowInfo, OffloadShowView, PmdRxqView, PmdStatsView, PortInfo, ShowInfo};

pub mod openflow;
pub mod ovsdb;
pub mod qemu;

static SERIAL: Mutex<()> = Mutex::new(());
static NEXT_ID: AtomicU32 = AtomicU32::new(0);

/// Takes the lock that keeps end-to-end tests from running at the same time, after
/// checking for root.
pub fn serial() -> MutexGuard<'static, ()> {
    let euid = std::fs::metadata("/proc/self")
        .map(|m| m.uid())
        .unwrap_or(u32::MAX);
    assert_eq!(
        euid, 0,
        "end-to-end tests need root (network namespaces, AF_PACKET)"
    );
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// A short name unique to this process and call, usable in interface names (<= 15 bytes).
pub fn unique(prefix: &str) -> String {
    let n = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    format!("{prefix}{}{n}", std::process::id() % 100_000)
}

/// Runs a command and returns its output; panics with the command line if it cannot start.
pub fn run(cmd: &str, args: &[&str]) -> Output {
    Command::new(cmd)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd} {args:?}: {e}"))
}

/// Runs a command that must succeed.
pub fn must(cmd: &str, args: &[&str]) -> String {
    let out = run(cmd, args);
    assert!(
        out.status.success(),
        "{cmd} {args:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Polls `cond` every 20 ms until it holds; panics with `what` after `timeout`.
pub fn wait_until(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !cond() {
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A host: a network namespace with `eth0` (address 198.18.0.N/24), wired by a veth
/// whose other end, `port`, stays in the root namespace for vsw to attach.
pub struct Host {
    pub ns: String,
    /// Fixed, so that a host that is unplugged and plugged again keeps it, as a VM does.
    pub mac: String,
    pub port: String,
    pub addr: String,
}

impl Host {
    pub fn new(index: u8) -> Host {
        let ns = unique("vt");
        let port = format!("{ns}p");
        let addr = format!("198.18.0.{index}");
        let mac = format!("02:00:c6:12:00:{index:02x}");
        let host = Host {
            ns,
            mac,
            port,
            addr,
        };
        must("ip", &["netns", "add", &host.ns]);
        host.plug();
        host
    }

    /// Creates the veth pair (again, after `unplug`).
    pub fn plug(&self) {
        must(
            "ip",
            &[
                "link", "add", &self.port, "type", "veth", "peer", "name", "eth0", "address",
                &self.mac, "netns", &self.ns,
            ],
        );
        // The switch side carries no IPv6 of its own either.
        must(
            "sysctl",
            &[
                "-q",
                "-w",
                &format!("net.ipv6.conf.{}.disable_ipv6=1", self.port),
            ],
        );
        must("ip", &["link", "set", &self.port, "up"]);
        self.exec_ok(&[
            "ip",
            "addr",
            "add",
            &format!("{}/24", self.addr),
            "dev",
            "eth0",
        ]);
        self.exec_ok(&["ip", "link", "set", "eth0", "up"]);
        self.exec_ok(&["ip", "link", "set", "lo", "up"]);
    }

    /// Deletes the veth pair, as when a VM or container goes away.
    pub fn unplug(&self) {
        must("ip", &["link", "del", &self.port]);
    }

    pub fn exec(&self, args: &[&str]) -> Output {
        let mut full = vec!["netns", "exec", &self.ns];
        full.extend_from_slice(args);
        run("ip", &full)
    }

    pub fn exec_ok(&self, args: &[&str]) -> String {
        let mut full = vec!["netns", "exec", &self.ns];
        full.extend_from_slice(args);
        must("ip", &full)
    }

    /// Sends `count` copies of a raw Ethernet frame (hex) out of `eth0`.
    pub fn send_raw(&self, frame_hex: &str, count: u32) {
        let script = format!(
            "import socket\ns = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)\ns.bind(('eth0', 0))\n\
             f = bytes.fromhex('{frame_hex}')\nfor i in range({count}): s.send(f)\n"
        );
        self.exec_ok(&["python3", "-c", &script]);
    }

    /// Turns TSO, GSO and checksum offload on or off on `eth0`.
    pub fn set_offloads(&self, on: bool) {
        let v = if on { "on" } else { "off" };
        self.exec_ok(&["ethtool", "-K", "eth0", "tso", v, "gso", v, "tx", v]);
    }

    /// Runs iperf3 (TCP) from this host to `server` for `seconds`; the bytes the
    /// server received, or why there were none. Bounded: a broken path fails, it does
    /// not hang.
    pub fn iperf_to(&self, server: &Host, seconds: u32) -> Result<u64, String> {
        let pidfile = std::env::temp_dir().join(format!("{}-iperf3.pid", server.ns));
        let pid = pidfile.display().to_string();
        server.exec_ok(&[
            "iperf3",
            "-s",
            "-1",
            "-D",
            "-B",
            &server.addr,
            "-I",
            &pid,
            "--logfile",
            "/dev/null",
        ]);
        wait_until("iperf3 server to listen", Duration::from_secs(5), || {
            let ss = server.exec(&["ss", "-ltn"]);
            String::from_utf8_lossy(&ss.stdout).contains(":5201")
        });
        let limit = (seconds + 20).to_string();
        let out = self.exec(&[
            "timeout",
            &limit,
            "iperf3",
            "-c",
            &server.addr,
            "-t",
            &seconds.to_string(),
            "-J",
            "--connect-timeout",
            "3000",
        ]);
        if let Ok(p) = std::fs::read_to_string(&pidfile) {
            let _ = run("kill", &["-TERM", p.trim_matches(char::from(0)).trim()]);
        }
        let _ = std::fs::remove_file(&pidfile);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).map_err(|e| {
            format!(
                "iperf3 gave no JSON ({e}): {}",
                String::from_utf8_lossy(&out.stderr)
            )
        })?;
        if let Some(e) = v["error"].as_str() {
            return Err(e.to_string());
        }
        v["end"]["sum_received"]["bytes"]
            .as_u64()
            .ok_or_else(|| "no byte count".to_string())
    }

    /// Starts a python3 script in the namespace (at most 120 s) and returns once it
    /// printed its first line, `ready`; what it prints later is the caller's.
    pub fn python_ready(&self, script: &str) -> Child {
        self.python_ready_for(script, 120)
    }

    /// The same, for at most `seconds`.
    pub fn python_ready_for(&self, script: &str, seconds: u64) -> Child {
        self.python_started(script, seconds, Stdio::null())
    }

    /// The same, its standard input a pipe the test writes to (commands to the
    /// script).
    pub fn python_ready_with_input(&self, script: &str, seconds: u64) -> Child {
        self.python_started(script, seconds, Stdio::piped())
    }

    fn python_started(&self, script: &str, seconds: u64, stdin: Stdio) -> Child {
        // The script is the child itself (`ip netns exec` execs it), so that
        // killing the child ends the script; its own alarm bounds its life when
        // the test dies first.
        let script = format!("import signal\nsignal.alarm({seconds})\n{script}");
        let mut child = Command::new("ip")
            .args(["netns", "exec", &self.ns, "python3", "-c", &script])
            .stdin(stdin)
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 in the namespace");
        let mut out = std::io::BufReader::new(child.stdout.take().expect("stdout"));
        let mut line = String::new();
        std::io::BufRead::read_line(&mut out, &mut line).expect("the script's output");
        assert_eq!(line.trim(), "ready", "the script did not start");
        assert!(
            out.buffer().is_empty(),
            "the script printed more before it was waited for"
        );
        child.stdout = Some(out.into_inner());
        child
    }

    /// Pings `to` `count` times; true when every reply came back.
    pub fn ping(&self, to: &Host, count: u32) -> bool {
        self.exec(&[
            "ping",
            "-c",
            &count.to_string(),
            "-i",
            "0.1",
            "-W",
            "1",
            "-q",
            &to.addr,
        ])
        .status
        .success()
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = run("ip", &["netns", "del", &self.ns]);
        let _ = run("ip", &["link", "del", &self.port]);
    }
}

/// A network namespace of a test's own (a unique name), deleted with the devices in
/// it when dropped.
pub struct Namespace(pub String);

impl Namespace {
    pub fn new(prefix: &str) -> Namespace {
        let ns = Namespace(unique(prefix));
        must("ip", &["netns", "add", &ns.0]);
        ns
    }

    /// `ip -n NS ARGS…`, which must succeed.
    pub fn ip(&self, args: &[&str]) -> String {
        let mut all = vec!["-n", &self.0];
        all.extend_from_slice(args);
        must("ip", &all)
    }

    /// Runs a command in the namespace.
    pub fn exec(&self, args: &[&str]) -> Output {
        let mut all = vec!["netns", "exec", &self.0];
        all.extend_from_slice(args);
        run("ip", &all)
    }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        let _ = run("ip", &["netns", "del", &self.0]);
    }
}

/// A UDP frame (hex) from `from` to `to`, ports `sport` → 5001.
pub fn udp_frame(from: &Host, to: &Host, sport: u16) -> String {
    let mac = |m: &str| m.replace(':', "");
    let ip = |a: &str| {
        a.split('.')
            .map(|b| format!("{:02x}", b.parse::<u8>().unwrap()))
            .collect::<String>()
    };
    let mut iph = format!(
        "45000030000040004011{}{}{}",
        "0000",
        ip(&from.addr),
        ip(&to.addr)
    );
    // The IPv4 header checksum.
    let words: Vec<u32> = (0..10)
        .map(|i| u32::from_str_radix(&iph[i * 4..i * 4 + 4], 16).unwrap())
        .collect();
    let mut sum: u32 = words.iter().sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    iph.replace_range(20..24, &format!("{:04x}", !sum as u16));
    format!(
        "{}{}0800{iph}{sport:04x}1389001c0000{}",
        mac(&to.mac),
        mac(&from.mac),
        "00".repeat(20)
    )
}

/// Two hosts whose stacks send nothing by themselves (no IPv6: no router
/// solicitations or neighbour discovery), so that counters count only the test's frames.
pub fn quiet_hosts() -> (Host, Host) {
    let (a, b) = (Host::new(1), Host::new(2));
    for h in [&a, &b] {
        h.exec_ok(&["sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1"]);
        h.exec_ok(&["sysctl", "-q", "-w", "net.ipv6.conf.eth0.disable_ipv6=1"]);
    }
    (a, b)
}

/// A binary of the workspace (vswd, vswctl), built next to the test executables.
pub fn binary(name: &str) -> PathBuf {
    // Test executables live in target/<profile>/deps; the binaries one level up.
    let exe = std::env::current_exe().expect("test executable path");
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target directory");
    let path = dir.join(name);
    assert!(
        path.exists(),
        "{} not built (run the tests with cargo test --workspace)",
        path.display()
    );
    path
}

/// Whether a vswd answers a request on `socket` (it listens before it is ready); an
/// error reply counts (with --ovsdb, the bridge vswctl reaches may not be there yet).
fn answers(socket: &Path) -> bool {
    use std::io::{BufRead, Write};
    let Ok(mut s) = std::os::unix::net::UnixStream::connect(socket) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
    if s.write_all(b"{\"cmd\":\"show\"}\n").is_err() {
        return false;
    }
    let mut line = String::new();
    std::io::BufReader::new(s).read_line(&mut line).is_ok() && line.contains("\"ok\":")
}

/// A vswd started for one test, with its own socket and state file; stopped (SIGTERM,
/// by PID) when dropped.
pub struct Vswd {
    pub dir: PathBuf,
    pub socket: PathBuf,
    pub state: PathBuf,
    child: Option<Child>,
    /// A command vswd is started through (`prlimit …`, `sh -c 'umask …'`), if any.
    wrapper: Vec<String>,
    /// Arguments vswd is started with besides its socket and state file.
    extra: Vec<String>,
}

impl Vswd {
    pub fn start() -> Vswd {
        Vswd::start_through(&[])
    }

    /// Starts vswd with these arguments too (`--ovsdb unix:…`, say).
    pub fn start_with_args(args: &[&str]) -> Vswd {
        let mut d = Vswd::prepared();
        d.extra = args.iter().map(|s| s.to_string()).collect();
        d.restart();
        d
    }

    /// Starts vswd through `wrapper` (`ip netns exec NS`, say) with these arguments
    /// too.
    pub fn start_through_with_args(wrapper: &[&str], args: &[&str]) -> Vswd {
        let mut d = Vswd::prepared();
        d.wrapper = wrapper.iter().map(|s| s.to_string()).collect();
        d.extra = args.iter().map(|s| s.to_string()).collect();
        d.restart();
        d
    }

    /// Starts vswd as the last argument of `wrapper` (a command that runs the rest of
    /// its arguments, such as `prlimit --nofile=1024 --`).
    pub fn start_through(wrapper: &[&str]) -> Vswd {
        let mut d = Vswd::prepared();
        d.wrapper = wrapper.iter().map(|s| s.to_string()).collect();
        d.restart();
        d
    }

    /// A vswd's directory, socket and state file, not started yet (the test may put a
    /// state file there, or move it, first; `restart` starts it).
    pub fn prepared() -> Vswd {
        let dir = std::env::temp_dir().join(unique("vsw-e2e-"));
        std::fs::create_dir_all(&dir).expect("temp dir");
        Vswd {
            socket: dir.join("vswd.sock"),
            state: dir.join("state.json"),
            dir,
            child: None,
            wrapper: Vec::new(),
            extra: Vec::new(),
        }
    }

    /// The command line that starts this test's vswd (for a second one, say).
    pub fn command(&self) -> Command {
        let mut cmd = match self.wrapper.split_first() {
            Some((first, rest)) => {
                let mut c = Command::new(first);
                c.args(rest).arg(binary("vswd"));
                c
            }
            None => Command::new(binary("vswd")),
        };
        cmd.arg("--socket")
            .arg(&self.socket)
            .arg("--state-file")
            .arg(&self.state)
            .args(&self.extra);
        cmd
    }

    /// Starts vswd on this test's state file; panics unless it comes up.
    pub fn restart(&mut self) {
        self.stop();
        let log = std::fs::File::create(self.dir.join("vswd.log")).expect("log file");
        let child = self
            .command()
            .arg("--log")
            .arg("debug")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start vswd");
        self.child = Some(child);
        let socket = self.socket.clone();
        let child = self.child.as_mut().expect("just set");
        wait_until(
            "vswd to answer on its socket",
            Duration::from_secs(10),
            || {
                if let Ok(Some(status)) = child.try_wait() {
                    panic!("vswd exited at start with {status}");
                }
                answers(&socket)
            },
        );
    }

    /// Stops vswd with SIGTERM and waits for it; returns whether it exited cleanly.
    pub fn stop(&mut self) -> bool {
        let Some(mut child) = self.child.take() else {
            return true;
        };
        let pid = child.id().to_string();
        let _ = run("kill", &["-TERM", &pid]);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                return status.success();
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The daemon's process id while it runs.
    pub fn pid(&mut self) -> Option<u32> {
        self.is_running()
            .then(|| self.child.as_ref().map(Child::id))
            .flatten()
    }

    /// Waits up to `timeout` for vswd to exit by itself; its exit status, if it did.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            let child = self.child.as_mut()?;
            if let Ok(Some(status)) = child.try_wait() {
                self.child = None;
                return Some(status);
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Sends one raw request line and returns the reply line.
    pub fn raw_request(&self, line: &str) -> String {
        use std::io::{BufRead, Write};
        let mut s = std::os::unix::net::UnixStream::connect(&self.socket).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(format!("{line}\n").as_bytes()).unwrap();
        let mut reply = String::new();
        std::io::BufReader::new(s).read_line(&mut reply).unwrap();
        reply
    }

    pub fn is_running(&mut self) -> bool {
        matches!(self.child.as_mut().map(|c| c.try_wait()), Some(Ok(None)))
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("vswd.log")).unwrap_or_default()
    }

    /// Runs vswctl against this daemon.
    pub fn ctl(&self, args: &[&str]) -> Output {
        let mut full = vec!["--socket".to_string(), self.socket.display().to_string()];
        full.extend(args.iter().map(|s| s.to_string()));
        Command::new(binary("vswctl"))
            .args(&full)
            .stdin(Stdio::null())
            .output()
            .expect("run vswctl")
    }

    /// Runs vswctl and requires success; returns standard output.
    pub fn ctl_ok(&self, args: &[&str]) -> String {
        let out = self.ctl(args);
        assert!(
            out.status.success(),
            "vswctl {args:?} failed: {}\n--- vswd log ---\n{}",
            String::from_utf8_lossy(&out.stderr),
            self.log()
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `ovs-appctl` against vswd's appctl socket by its stable name (`vswd.ctl`,
    /// there with or without a database).
    pub fn appctl(&self, args: &[&str]) -> Output {
        Command::new("ovs-appctl")
            .arg("--timeout=10")
            .arg("-t")
            .arg(self.dir.join("vswd.ctl"))
            .args(args)
            .output()
            .expect("ovs-appctl (openvswitch-common)")
    }

    /// `ovs-appctl`, required to succeed; its standard output.
    pub fn appctl_ok(&self, args: &[&str]) -> String {
        let out = self.appctl(args);
        assert!(
            out.status.success(),
            "ovs-appctl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn json<T: serde::de::DeserializeOwned>(&self, cmd: &str) -> T {
        let text = self.ctl_ok(&["--format", "json", cmd]);
        serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("vswctl {cmd} gave bad JSON ({e}): {text}"))
    }

    pub fn show(&self) -> ShowInfo {
        self.json("show")
    }

    pub fn ports(&self) -> Vec<PortInfo> {
        self.json("dump-ports")
    }

    pub fn port(&self, name: &str) -> PortInfo {
        self.ports()
            .into_iter()
            .find(|p| p.name == name)
            .unwrap_or_else(|| panic!("no port {name}"))
    }

    /// The flows a test added: every flow but the learning switch's
    /// `priority=0,actions=NORMAL` that a new switch starts with.
    pub fn flows(&self) -> Vec<FlowInfo> {
        without_default(self.json("dump-flows"))
    }

    /// Every flow, the learning switch's included.
    pub fn all_flows(&self) -> Vec<FlowInfo> {
        self.json("dump-flows")
    }

    pub fn pmd_stats(&self) -> Vec<PmdStatsView> {
        self.json("pmd-stats-show")
    }

    pub fn rxq_show(&self) -> Vec<PmdRxqView> {
        self.json("pmd-rxq-show")
    }

    /// Flows of one `dump-flows type=…`.
    pub fn flows_of(&self, kind: &str) -> Vec<FlowInfo> {
        let text = self.ctl_ok(&["--format", "json", "dump-flows", &format!("type={kind}")]);
        without_default(
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("bad JSON ({e}): {text}")),
        )
    }

    pub fn offload_show(&self) -> Vec<OffloadShowView> {
        self.json("offload-show")
    }
}

/// The rule a new switch starts with.
pub use vswd::state::LEARNING_SWITCH_FLOW;

fn without_default(mut flows: Vec<FlowInfo>) -> Vec<FlowInfo> {
    flows.retain(|f| f.flow != LEARNING_SWITCH_FLOW);
    flows
}

impl Drop for Vswd {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A DPDK testpmd guest (`virtio_user` on vhost-user socket `sock`, no hugepages) on
/// `queues` queue pairs (one forwarding thread each, all on CPU 0), forwarding as
/// `mode` says (`txonly`, `rxonly`), for at most `seconds`. With `server` it owns the
/// socket (as QEMU does for a vhostuserclient port). `--stats-period` keeps it
/// forwarding without a terminal.
pub fn testpmd(
    sock: &str,
    prefix: &str,
    server: bool,
    queues: usize,
    mode: &str,
    seconds: u32,
) -> Child {
    let server = if server { ",server=1" } else { "" };
    let lcores = (0..=queues)
        .map(|i| format!("{i}@0"))
        .collect::<Vec<_>>()
        .join(",");
    let per_queue = [
        format!("--txq={queues}"),
        format!("--rxq={queues}"),
        format!("--nb-cores={queues}"),
    ];
    Command::new("timeout")
        .args([
            &seconds.to_string(),
            "dpdk-testpmd",
            "--lcores",
            &lcores,
            "--no-huge",
            "-m",
            "512",
        ])
        .args(["--no-pci", "--file-prefix", prefix, "--vdev"])
        .arg(format!("virtio_user0,path={sock},queues={queues}{server}"))
        .arg("--")
        .args(&per_queue)
        .args([
            &format!("--forward-mode={mode}"),
            "--total-num-mbufs=65536",
            "--stats-period",
            "1",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("dpdk-testpmd (apt dpdk-dev)")
}

/// Stops a child process of the test (SIGTERM, by PID) and reaps it.
pub fn end(mut child: Child) {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let _ = child.wait();
}
