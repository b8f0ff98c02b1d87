//! The switches under test: how each is started on the topology and stopped.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use crate::topology::{run, run_with_env, Topology};

pub trait SwitchUnderTest {
    fn name(&self) -> String;
    fn start(&mut self, topo: &Topology) -> anyhow::Result<()>;
    fn stop(&mut self, topo: &Topology);
    /// CPU seconds the switch's own process used so far, where it has one.
    fn cpu_seconds(&self) -> Option<f64> {
        None
    }
    /// Resets the switch's own PMD statistics, where it keeps them.
    fn clear_pmd_stats(&self) {}
    /// The switch's own figure since the reset: PMD processing time per packet, in ns
    /// (vsw and OVS both count TSC cycles; this machine's TSC rate converts them).
    fn pmd_ns_per_packet(&self) -> Option<f64> {
        None
    }
    /// Seconds the switch's PMDs spent processing since the reset (busy cycles).
    fn pmd_busy_seconds(&self) -> Option<f64> {
        None
    }
}

fn cycles_to_ns(cycles: f64) -> f64 {
    cycles * 1e9 / vsw_datapath::clock::cycles_per_second() as f64
}

/// vsw: vswd from this build, with its PMD on `pmd_cpu`.
pub struct Vsw {
    pub bin_dir: PathBuf,
    pub mode: String,
    pub pmd_cpu: usize,
    /// `vsw-ebpf`: `hw-offload=true`, an ebpf provider on both ports, no rule written.
    pub offload: bool,
    /// The name it is reported under, when not its kind's (`vsw@DIR`: another
    /// build's binaries).
    pub label: Option<String>,
    child: Option<Child>,
    dir: PathBuf,
}

impl Vsw {
    pub fn new(bin_dir: PathBuf, mode: &str, pmd_cpu: usize) -> Vsw {
        Vsw {
            bin_dir,
            mode: mode.to_string(),
            pmd_cpu,
            offload: false,
            label: None,
            child: None,
            dir: std::env::temp_dir().join(format!("vsw-bench-{}", std::process::id())),
        }
    }

    fn socket(&self) -> PathBuf {
        self.dir.join("vswd.sock")
    }

    /// The OpenFlow management socket (beside the control socket).
    pub fn mgmt(&self) -> PathBuf {
        self.dir.join("br0.mgmt")
    }

    pub fn ctl(&self, args: &[&str]) -> anyhow::Result<String> {
        let ctl = self.bin_dir.join("vswctl");
        let sock = self.socket().display().to_string();
        let mut full = vec![ctl.to_str().context("path")?, "--socket", &sock];
        full.extend_from_slice(args);
        run(&full)
    }
}

impl Vsw {
    /// The issue's configuration: no rule written (a new switch's NORMAL), an ebpf
    /// provider on both ports, `hw-offload=true`. The datapath flows the traffic makes
    /// (one per connection on such ports) go to the kernel within an offload pass of
    /// their first packet.
    fn offload_datapath_flows(&self, topo: &Topology) -> anyhow::Result<()> {
        for p in [&topo.gen_port, &topo.rcv_port] {
            self.ctl(&["set-port", p, "offload=ebpf", "offload-capacity=4096"])?;
        }
        // With the flows in the kernel the PMD has nothing to do: it sleeps.
        self.ctl(&[
            "set",
            "hw-offload=true",
            "offload-interval=100",
            "pmd-sleep-max=500",
        ])?;
        Ok(())
    }
}

impl SwitchUnderTest for Vsw {
    fn name(&self) -> String {
        if let Some(l) = &self.label {
            l.clone()
        } else if self.offload {
            "vsw-ebpf".into()
        } else if self.mode == "ring" {
            "vsw".into()
        } else {
            format!("vsw-{}", self.mode)
        }
    }

    fn start(&mut self, topo: &Topology) -> anyhow::Result<()> {
        self.launch(1u64 << self.pmd_cpu)?;
        for p in [&topo.gen_port, &topo.rcv_port] {
            self.ctl(&["add-port", p, &format!("afpacket-mode={}", self.mode)])?;
        }
        if self.offload {
            self.offload_datapath_flows(topo)?;
        }
        Ok(())
    }

    fn stop(&mut self, _topo: &Topology) {
        self.shut_down();
    }

    fn cpu_seconds(&self) -> Option<f64> {
        process_cpu_seconds(self.child.as_ref()?.id())
    }

    fn clear_pmd_stats(&self) {
        let _ = self.ctl(&["pmd-stats-clear"]);
    }

    fn pmd_ns_per_packet(&self) -> Option<f64> {
        Some(cycles_to_ns(self.pmd_cycles_per_packet()?))
    }

    fn pmd_busy_seconds(&self) -> Option<f64> {
        let (busy, _) = self.pmd_totals()?;
        Some(cycles_to_ns(busy) / 1e9)
    }
}

impl Vsw {
    /// Starts vswd with no port, its PMDs on the cores of `pmd_mask`.
    pub fn launch(&mut self, pmd_mask: u64) -> anyhow::Result<()> {
        let vswd = self.bin_dir.join("vswd");
        if !vswd.exists() {
            bail!(
                "{} not found (cargo build --release, or --bin-dir)",
                vswd.display()
            );
        }
        std::fs::create_dir_all(&self.dir)?;
        let _ = std::fs::remove_file(self.dir.join("state.json"));
        let child = Command::new(&vswd)
            .arg("--socket")
            .arg(self.socket())
            .arg("--state-file")
            .arg(self.dir.join("state.json"))
            .arg("--log")
            .arg("warn")
            .stdin(Stdio::null())
            .spawn()
            .context("cannot start vswd")?;
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.ctl(&["show"]).is_err() {
            if Instant::now() > deadline {
                bail!("vswd did not answer within 10 s");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.ctl(&["set", &format!("pmd-cpu-mask={pmd_mask:#x}")])?;
        Ok(())
    }

    /// Ends vswd (the process this started) and removes its directory.
    pub fn shut_down(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = Command::new("kill")
                .args(["-TERM", &c.id().to_string()])
                .output();
            let _ = c.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }

    /// Busy cycles and packets received, summed over the PMDs since the last reset.
    fn pmd_totals(&self) -> Option<(f64, f64)> {
        let v: serde_json::Value =
            serde_json::from_str(&self.ctl(&["--format", "json", "pmd-stats-show"]).ok()?).ok()?;
        let pmds = v.as_array()?;
        let sum = |k: &str| pmds.iter().filter_map(|p| p[k].as_f64()).sum::<f64>();
        Some((sum("busy_cycles"), sum("packets")))
    }

    /// PMD busy TSC cycles per packet received, over all PMDs, since the last reset.
    pub fn pmd_cycles_per_packet(&self) -> Option<f64> {
        let (busy, packets) = self.pmd_totals()?;
        (packets > 0.0).then(|| busy / packets)
    }
}

/// The Linux bridge.
pub struct Bridge {
    name: String,
}

impl Default for Bridge {
    fn default() -> Self {
        Bridge {
            name: format!("vswb{}br", std::process::id() % 100_000),
        }
    }
}

impl SwitchUnderTest for Bridge {
    fn name(&self) -> String {
        "bridge".into()
    }

    fn start(&mut self, topo: &Topology) -> anyhow::Result<()> {
        run(&["ip", "link", "add", &self.name, "type", "bridge"])?;
        for p in [&topo.gen_port, &topo.rcv_port] {
            run(&["ip", "link", "set", p, "master", &self.name])?;
        }
        run(&["ip", "link", "set", &self.name, "up"])?;
        Ok(())
    }

    fn stop(&mut self, _topo: &Topology) {
        let _ = run(&["ip", "link", "del", &self.name]);
    }
}

/// Open vSwitch's userspace (netdev) datapath, from the openvswitch-switch package,
/// started privately: its own database, run directory and logs, its PMD on `pmd_cpu`.
/// Ports are `system` (AF_PACKET in OVS) or `afxdp` in native XDP mode.
pub struct Ovs {
    afxdp: bool,
    pmd_cpu: usize,
    dir: PathBuf,
    /// vswd, when it is the daemon the database drives (`launch_vswd`).
    vswd: Option<Child>,
    /// As a switch under test: vswd (this binary) in place of ovs-vswitchd.
    pub vswd_bin: Option<PathBuf>,
    /// As a switch under test: the generator's port on br0, the receiver's on br1,
    /// the two bridges joined by a patch pair (OVN's br-int and br-ex).
    pub patched: bool,
}

impl Ovs {
    pub fn new(afxdp: bool, pmd_cpu: usize) -> Ovs {
        Ovs::named(afxdp, pmd_cpu, "ovs")
    }

    /// [`Ovs::new`] with a directory of its own, `vsw-bench-NAME-PID` (two at once).
    pub fn named(afxdp: bool, pmd_cpu: usize, name: &str) -> Ovs {
        Ovs {
            afxdp,
            pmd_cpu,
            dir: std::env::temp_dir().join(format!("vsw-bench-{name}-{}", std::process::id())),
            vswd: None,
            vswd_bin: None,
            patched: false,
        }
    }

    /// Bridge br1 beside br0, joined to it by patch ports `patch-br0`/`patch-br1`.
    fn add_patched_bridge(&self) -> anyhow::Result<()> {
        self.vsctl(&[
            "--timeout=20",
            "add-br",
            "br1",
            "--",
            "set",
            "bridge",
            "br1",
            "datapath_type=netdev",
        ])?;
        self.vsctl(&[
            "--timeout=20",
            "add-port",
            "br0",
            "patch-br0",
            "--",
            "set",
            "interface",
            "patch-br0",
            "type=patch",
            "options:peer=patch-br1",
            "--",
            "add-port",
            "br1",
            "patch-br1",
            "--",
            "set",
            "interface",
            "patch-br1",
            "type=patch",
            "options:peer=patch-br0",
        ])?;
        Ok(())
    }

    fn cmd(&self, args: &[&str]) -> anyhow::Result<String> {
        let dir = self.dir.as_path();
        let env = ["OVS_RUNDIR", "OVS_LOGDIR", "OVS_DBDIR", "OVS_SYSCONFDIR"].map(|k| (k, dir));
        run_with_env(args, &env)
    }

    /// Runs ovs-vsctl against this switch's database.
    pub fn vsctl(&self, args: &[&str]) -> anyhow::Result<String> {
        let db = format!("--db=unix:{}/db.sock", self.dir.display());
        let mut full = vec!["ovs-vsctl", db.as_str()];
        full.extend_from_slice(args);
        self.cmd(&full)
    }

    fn appctl(&self, args: &[&str]) -> anyhow::Result<String> {
        if self.vswd.is_some() {
            // vswd answers ovs-appctl on the socket beside its control socket.
            let target = self.dir.join("vswd.ctl").display().to_string();
            let mut full = vec!["ovs-appctl", "-t", target.as_str()];
            full.extend_from_slice(args);
            return self.cmd(&full);
        }
        let pid = self
            .pid("ovs-vswitchd")
            .context("ovs-vswitchd is not running")?;
        // PROGRAM.PID.ctl: ovs-vswitchd, or ovs-vswitchd-dpdk for the DPDK build.
        let suffix = format!(".{pid}.ctl");
        let target = std::fs::read_dir(&self.dir)?
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .find(|p| p.to_string_lossy().ends_with(&suffix))
            .context("no control socket of ovs-vswitchd")?
            .display()
            .to_string();
        let mut full = vec!["ovs-appctl", "-t", target.as_str()];
        full.extend_from_slice(args);
        self.cmd(&full)
    }

    /// Starts a private ovsdb-server and `vswitchd` (a program name or path) with
    /// its PMDs on `pmd_mask` and `other_config` set before it starts, and adds
    /// bridge br0 on the userspace datapath.
    pub fn launch(
        &self,
        vswitchd: &str,
        pmd_mask: u64,
        other_config: &[String],
    ) -> anyhow::Result<()> {
        if !installed(vswitchd) && !std::path::Path::new(vswitchd).is_file() {
            bail!("{vswitchd} is not installed (apt-get install openvswitch-switch)");
        }
        self.start_database(pmd_mask, other_config)?;
        let d = self.dir.display().to_string();
        // Without the openvswitch kernel module ovs-vswitchd logs a netlink error at
        // start and works on with the userspace datapath.
        self.cmd(&[
            vswitchd,
            &format!("unix:{d}/db.sock"),
            &format!("--pidfile={d}/ovs-vswitchd.pid"),
            "--detach",
            &format!("--log-file={d}/ovs-vswitchd.log"),
        ])?;
        self.add_bridge()
    }

    /// [`Ovs::launch`] with vswd (`vswd --ovsdb`) as the daemon the same database
    /// drives, in place of ovs-vswitchd.
    pub fn launch_vswd(&mut self, vswd: &std::path::Path, pmd_mask: u64) -> anyhow::Result<()> {
        self.start_database(pmd_mask, &[])?;
        let child = Command::new(vswd)
            .arg("--ovsdb")
            .arg(format!("unix:{}", self.dir.join("db.sock").display()))
            .arg("--socket")
            .arg(self.dir.join("vswd.sock"))
            .args(["--bridge", "br0", "--log", "warn"])
            .stdin(Stdio::null())
            .spawn()
            .context("cannot start vswd")?;
        self.vswd = Some(child);
        self.add_bridge()
    }

    fn start_database(&self, pmd_mask: u64, other_config: &[String]) -> anyhow::Result<()> {
        for p in ["ovsdb-server", "ovsdb-tool", "ovs-vsctl"] {
            if !installed(p) {
                bail!("{p} is not installed (apt-get install openvswitch-switch)");
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
        std::fs::create_dir_all(&self.dir)?;
        let d = self.dir.display().to_string();
        self.cmd(&[
            "ovsdb-tool",
            "create",
            &format!("{d}/conf.db"),
            "/usr/share/openvswitch/vswitch.ovsschema",
        ])?;
        self.cmd(&[
            "ovsdb-server",
            &format!("{d}/conf.db"),
            &format!("--remote=punix:{d}/db.sock"),
            &format!("--pidfile={d}/ovsdb-server.pid"),
            "--detach",
            &format!("--log-file={d}/ovsdb-server.log"),
        ])?;
        self.vsctl(&["--no-wait", "init"])?;
        let mask = format!("other_config:pmd-cpu-mask={pmd_mask:#x}");
        let mut set = vec!["--no-wait", "set", "Open_vSwitch", ".", mask.as_str()];
        set.extend(other_config.iter().map(String::as_str));
        self.vsctl(&set)?;
        Ok(())
    }

    /// Bridge br0 on the userspace datapath (ovs-vsctl waits for the daemon).
    fn add_bridge(&self) -> anyhow::Result<()> {
        self.vsctl(&[
            "--timeout=20",
            "add-br",
            "br0",
            "--",
            "set",
            "bridge",
            "br0",
            "datapath_type=netdev",
        ])?;
        Ok(())
    }

    /// The OpenFlow management socket of bridge br0.
    pub fn mgmt(&self) -> PathBuf {
        self.dir.join("br0.mgmt")
    }

    /// Runs ovs-ofctl against this switch's bridge br0.
    pub fn ofctl(&self, args: &[&str]) -> anyhow::Result<String> {
        let mut full = vec!["ovs-ofctl"];
        full.extend_from_slice(args);
        self.cmd(&full)
    }

    /// [`Ovs::ofctl`] pinned to core `cpu`.
    pub fn ofctl_on(&self, cpu: usize, args: &[&str]) -> anyhow::Result<String> {
        let cpu = cpu.to_string();
        let mut full = vec!["taskset", "-c", &cpu, "ovs-ofctl"];
        full.extend_from_slice(args);
        self.cmd(&full)
    }

    /// PMD processing cycles and packets received, summed over the PMDs since the
    /// last reset (`dpif-netdev/pmd-stats-show`).
    pub fn pmd_totals(&self) -> Option<(f64, f64)> {
        let out = self.appctl(&["dpif-netdev/pmd-stats-show"]).ok()?;
        let sum = |key: &str| -> f64 {
            out.lines()
                .filter(|l| l.trim_start().starts_with(key))
                .filter_map(|l| {
                    l.split(':')
                        .nth(1)?
                        .split_whitespace()
                        .next()?
                        .parse::<f64>()
                        .ok()
                })
                .sum()
        };
        Some((sum("processing cycles:"), sum("packets received:")))
    }

    /// The datapath flows its userspace datapath caches now.
    pub fn dp_flow_count(&self) -> anyhow::Result<u64> {
        let out = self.appctl(&["dpctl/dump-flows"])?;
        Ok(out.lines().filter(|l| l.contains("actions:")).count() as u64)
    }

    /// Clears OVS's PMD statistics.
    pub fn clear_pmd_statistics(&self) {
        let _ = self.appctl(&["dpif-netdev/pmd-stats-clear"]);
    }

    /// Ends the daemons this started and removes their directory.
    pub fn shut_down(&mut self) {
        let _ = self.vsctl(&["--if-exists", "del-br", "br1"]);
        let _ = self.vsctl(&["--if-exists", "del-br", "br0"]);
        if let Some(mut c) = self.vswd.take() {
            let _ = run(&["kill", "-TERM", &c.id().to_string()]);
            let _ = c.wait();
        }
        for name in ["ovs-vswitchd", "ovsdb-server"] {
            if let Some(pid) = self.pid(name) {
                let _ = run(&["kill", "-TERM", &pid.to_string()]);
                let deadline = Instant::now() + Duration::from_secs(5);
                while std::path::Path::new(&format!("/proc/{pid}")).exists()
                    && Instant::now() < deadline
                {
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }

    fn pid(&self, name: &str) -> Option<u32> {
        std::fs::read_to_string(self.dir.join(format!("{name}.pid")))
            .ok()?
            .trim()
            .parse()
            .ok()
    }
}

/// Whether a program is on the PATH.
fn installed(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()))
}

impl SwitchUnderTest for Ovs {
    fn name(&self) -> String {
        match (self.vswd_bin.is_some(), self.patched, self.afxdp) {
            (true, true, _) => "vsw-patch",
            (true, false, _) => "vsw-ovsdb",
            (false, true, _) => "ovs-patch",
            (false, false, true) => "ovs-afxdp",
            (false, false, false) => "ovs-system",
        }
        .into()
    }

    fn start(&mut self, topo: &Topology) -> anyhow::Result<()> {
        if self.afxdp && !run(&["mount"])?.contains("/sys/fs/bpf") {
            run(&["mount", "-t", "bpf", "bpf", "/sys/fs/bpf"])?;
        }
        match self.vswd_bin.clone() {
            Some(vswd) => self.launch_vswd(&vswd, 1u64 << self.pmd_cpu)?,
            None => self.launch("ovs-vswitchd", 1u64 << self.pmd_cpu, &[])?,
        }
        if self.patched {
            self.add_patched_bridge()?;
            self.vsctl(&["add-port", "br0", &topo.gen_port])?;
            self.vsctl(&["add-port", "br1", &topo.rcv_port])?;
            return Ok(());
        }
        for p in [&topo.gen_port, &topo.rcv_port] {
            if self.afxdp {
                self.vsctl(&[
                    "add-port",
                    "br0",
                    p,
                    "--",
                    "set",
                    "interface",
                    p,
                    "type=afxdp",
                    "options:xdp-mode=native",
                ])?;
            } else {
                self.vsctl(&["add-port", "br0", p])?;
            }
        }
        Ok(())
    }

    fn stop(&mut self, _topo: &Topology) {
        self.shut_down();
    }

    fn cpu_seconds(&self) -> Option<f64> {
        match &self.vswd {
            Some(c) => process_cpu_seconds(c.id()),
            None => process_cpu_seconds(self.pid("ovs-vswitchd")?),
        }
    }

    fn clear_pmd_stats(&self) {
        self.clear_pmd_statistics();
    }

    fn pmd_ns_per_packet(&self) -> Option<f64> {
        let (busy, packets) = self.pmd_totals()?;
        (packets > 0.0).then(|| cycles_to_ns(busy / packets))
    }

    fn pmd_busy_seconds(&self) -> Option<f64> {
        let (busy, _) = self.pmd_totals()?;
        Some(cycles_to_ns(busy) / 1e9)
    }
}

/// User + system CPU seconds of a process, from /proc.
fn process_cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(ticks as f64 / 100.0)
}

/// Makes a switch by the name a user gives.
pub fn by_name(
    name: &str,
    bin_dir: &std::path::Path,
    pmd_cpu: usize,
) -> anyhow::Result<Box<dyn SwitchUnderTest>> {
    // `KIND@DIR`: vswd and vswctl from DIR (another commit's build), so that two
    // builds are measured side by side in one run.
    if let Some((kind, dir)) = name.split_once('@') {
        let mode = match kind {
            "vsw" => "ring",
            "vsw-mmsg" => "mmsg",
            "vsw-ring-v3" => "ring-v3",
            other => bail!("'{other}@DIR': only vsw, vsw-mmsg and vsw-ring-v3 take a DIR"),
        };
        let dir = std::path::Path::new(dir);
        if !dir.join("vswd").exists() {
            bail!("{name}: no vswd in {}", dir.display());
        }
        let mut v = Vsw::new(dir.to_path_buf(), mode, pmd_cpu);
        v.label = Some(name.to_string());
        return Ok(Box::new(v));
    }
    Ok(match name {
        "vsw" => Box::new(Vsw::new(bin_dir.to_path_buf(), "ring", pmd_cpu)),
        "vsw-mmsg" => Box::new(Vsw::new(bin_dir.to_path_buf(), "mmsg", pmd_cpu)),
        "vsw-ring-v3" => Box::new(Vsw::new(bin_dir.to_path_buf(), "ring-v3", pmd_cpu)),
        "vsw-ebpf" => {
            let mut v = Vsw::new(bin_dir.to_path_buf(), "ring", pmd_cpu);
            v.offload = true;
            Box::new(v)
        }
        "bridge" => Box::new(Bridge::default()),
        "ovs-system" => Box::new(Ovs::new(false, pmd_cpu)),
        "ovs-afxdp" => Box::new(Ovs::new(true, pmd_cpu)),
        // Through OVSDB, as Open vSwitch is configured; -patch: the two hosts on
        // two bridges joined by a patch pair.
        "vsw-ovsdb" | "vsw-patch" | "ovs-patch" => {
            let mut o = Ovs::new(false, pmd_cpu);
            o.patched = name.ends_with("-patch");
            if name.starts_with("vsw") {
                o.vswd_bin = Some(bin_dir.join("vswd"));
            }
            Box::new(o)
        }
        other => bail!(
            "unknown switch '{other}' (known: vsw, vsw-mmsg, vsw-ring-v3, vsw-ebpf, bridge, ovs-system, ovs-afxdp, vsw-ovsdb, vsw-patch, ovs-patch, and vsw@DIR for another build's binaries)"
        ),
    })
}
