//! A private `ovsdb-server` with the stock Open_vSwitch schema, for the tests that
//! drive vswd through `ovs-vsctl`: its own directory, socket and log; stopped by its
//! pid and removed when dropped. Never the system service.

use std::path::PathBuf;
use std::process::Command;

use crate::{must, unique};

pub const SCHEMA: &str = "/usr/share/openvswitch/vswitch.ovsschema";

pub struct OvsdbServer {
    pub dir: PathBuf,
    pid: Option<i32>,
}

impl OvsdbServer {
    /// A new database (with its root row, as `ovs-vsctl init` makes it) served on
    /// `<dir>/db.sock`.
    pub fn start() -> OvsdbServer {
        let dir = std::env::temp_dir().join(unique("vsw-ovsdb-"));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let db = dir.join("conf.db");
        must("ovsdb-tool", &["create", db.to_str().unwrap(), SCHEMA]);
        let mut s = OvsdbServer { dir, pid: None };
        s.restart();
        s.vsctl_no_wait(&["init"]);
        s
    }

    /// Starts the server (again) on the same database; `--detach` returns once it
    /// listens.
    pub fn restart(&mut self) {
        self.stop();
        let d = |f: &str| self.dir.join(f).display().to_string();
        must(
            "ovsdb-server",
            &[
                &d("conf.db"),
                &format!("--remote=punix:{}", d("db.sock")),
                &format!("--unixctl={}", d("ovsdb.ctl")),
                &format!("--pidfile={}", d("ovsdb.pid")),
                &format!("--log-file={}", d("ovsdb.log")),
                "--no-chdir",
                "--detach",
                "-vconsole:off",
            ],
        );
        let pid = std::fs::read_to_string(self.dir.join("ovsdb.pid")).expect("pid file");
        self.pid = Some(pid.trim().parse().expect("a pid"));
    }

    /// Stops the server (SIGTERM by its pid, then waits for its pid file to go).
    pub fn stop(&mut self) {
        if let Some(pid) = self.pid.take() {
            let _ = Command::new("kill").arg(pid.to_string()).status();
            crate::wait_until(
                "ovsdb-server to stop",
                std::time::Duration::from_secs(10),
                || !std::path::Path::new(&format!("/proc/{pid}")).exists(),
            );
        }
    }

    /// `unix:<dir>/db.sock`.
    pub fn target(&self) -> String {
        format!("unix:{}", self.dir.join("db.sock").display())
    }

    /// `ovs-vsctl` waiting, as it does by default, for the daemon to carry the
    /// change out (`cur_cfg`), at most 10 s; its output, whatever its status.
    pub fn vsctl_raw(&self, args: &[&str]) -> std::process::Output {
        Command::new("ovs-vsctl")
            .arg(format!("--db={}", self.target()))
            .arg("--timeout=10")
            .args(args)
            .output()
            .expect("ovs-vsctl (openvswitch-switch)")
    }

    pub fn vsctl(&self, args: &[&str]) -> String {
        let out = self.vsctl_raw(args);
        assert!(
            out.status.success(),
            "ovs-vsctl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// `ovs-vsctl add-br NAME -- set bridge NAME datapath_type=netdev`.
    pub fn add_netdev_bridge(&self, name: &str) {
        self.vsctl(&[
            "add-br",
            name,
            "--",
            "set",
            "bridge",
            name,
            "datapath_type=netdev",
        ]);
    }

    /// `ovs-vsctl add-port BRIDGE PORT`, with `ofport_request` when given.
    pub fn add_port(&self, bridge: &str, port: &str, ofport: Option<u32>) {
        match ofport {
            Some(n) => {
                let req = format!("ofport_request={n}");
                self.vsctl(&[
                    "add-port",
                    bridge,
                    port,
                    "--",
                    "set",
                    "Interface",
                    port,
                    &req,
                ])
            }
            None => self.vsctl(&["add-port", bridge, port]),
        };
    }

    /// `ovs-vsctl --no-wait`: the database changed, nobody waited for.
    pub fn vsctl_no_wait(&self, args: &[&str]) -> String {
        let mut a = vec!["--no-wait"];
        a.extend_from_slice(args);
        self.vsctl(&a)
    }
}

impl Drop for OvsdbServer {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A private `ovs-vswitchd` (Open vSwitch itself, the netdev datapath) in namespace
/// `ns`, configured by `db`: the peer vsw is compared with. Its own run directory;
/// stopped by its pid when dropped.
pub struct OvsVswitchd {
    pub dir: std::path::PathBuf,
    pid: Option<i32>,
}

impl OvsVswitchd {
    pub fn start(ns: &crate::Namespace, db: &OvsdbServer) -> OvsVswitchd {
        let dir = std::env::temp_dir().join(crate::unique("vsw-ovs-"));
        std::fs::create_dir_all(&dir).unwrap();
        let pidfile = dir.join("ovs-vswitchd.pid");
        let log = dir.join("ovs-vswitchd.log");
        let status = std::process::Command::new("ip")
            .env("OVS_RUNDIR", &dir)
            .env("OVS_LOGDIR", &dir)
            .args(["netns", "exec", &ns.0, "ovs-vswitchd", &db.target()])
            .arg(format!("--pidfile={}", pidfile.display()))
            .arg(format!("--log-file={}", log.display()))
            .args(["--detach", "--no-chdir", "-vconsole:off"])
            .status()
            .unwrap();
        assert!(status.success(), "ovs-vswitchd did not start");
        let pid = std::fs::read_to_string(&pidfile)
            .ok()
            .and_then(|p| p.trim().parse().ok());
        OvsVswitchd { dir, pid }
    }

    /// `ovs-appctl` against it; its output, once it succeeded.
    pub fn appctl(&self, args: &[&str]) -> String {
        let target = self
            .dir
            .join(format!("ovs-vswitchd.{}.ctl", self.pid.unwrap_or_default()));
        let out = std::process::Command::new("ovs-appctl")
            .arg("-t")
            .arg(&target)
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "ovs-appctl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `ovs-ofctl` against it (bridges by name); its output, once it succeeded.
    pub fn ofctl(&self, args: &[&str]) -> String {
        let out = std::process::Command::new("ovs-ofctl")
            .env("OVS_RUNDIR", &self.dir)
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "ovs-ofctl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for OvsVswitchd {
    fn drop(&mut self) {
        if let Some(pid) = self.pid.take() {
            let _ = std::process::Command::new("kill")
                .arg(pid.to_string())
                .status();
            // Gone before its namespace and run directory are.
            for _ in 0..50 {
                if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
