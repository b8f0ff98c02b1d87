//! The switches under test: how each is started on the topology and stopped.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use crate::topology::{run, Topology};

pub trait SwitchUnderTest {
    fn name(&self) -> String;
    fn start(&mut self, topo: &Topology) -> anyhow::Result<()>;
    fn stop(&mut self, topo: &Topology);
    /// CPU seconds the switch's own process used so far, where it has one.
    fn cpu_seconds(&self) -> Option<f64> {
        None
    }
}

/// vsw: vswd from this build, with its PMD on `pmd_cpu`.
pub struct Vsw {
    pub bin_dir: PathBuf,
    pub mode: String,
    pub pmd_cpu: usize,
    child: Option<Child>,
    dir: PathBuf,
}

impl Vsw {
    pub fn new(bin_dir: PathBuf, mode: &str, pmd_cpu: usize) -> Vsw {
        Vsw {
            bin_dir,
            mode: mode.to_string(),
            pmd_cpu,
            child: None,
            dir: std::env::temp_dir().join(format!("vsw-bench-{}", std::process::id())),
        }
    }

    fn socket(&self) -> PathBuf {
        self.dir.join("vswd.sock")
    }

    pub fn ctl(&self, args: &[&str]) -> anyhow::Result<String> {
        let ctl = self.bin_dir.join("vswctl");
        let sock = self.socket().display().to_string();
        let mut full = vec![ctl.to_str().context("path")?, "--socket", &sock];
        full.extend_from_slice(args);
        run(&full)
    }
}

impl SwitchUnderTest for Vsw {
    fn name(&self) -> String {
        if self.mode == "ring" {
            "vsw".into()
        } else {
            format!("vsw-{}", self.mode)
        }
    }

    fn start(&mut self, topo: &Topology) -> anyhow::Result<()> {
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
        self.ctl(&["set", &format!("pmd-cpu-mask={:#x}", 1u64 << self.pmd_cpu)])?;
        for p in [&topo.gen_port, &topo.rcv_port] {
            self.ctl(&["add-port", p, &format!("afpacket-mode={}", self.mode)])?;
        }
        Ok(())
    }

    fn stop(&mut self, _topo: &Topology) {
        if let Some(mut c) = self.child.take() {
            let _ = Command::new("kill")
                .args(["-TERM", &c.id().to_string()])
                .output();
            let _ = c.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }

    fn cpu_seconds(&self) -> Option<f64> {
        let pid = self.child.as_ref()?.id();
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
        let ticks: u64 =
            fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
        Some(ticks as f64 / 100.0)
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

/// Makes a switch by the name a user gives.
pub fn by_name(
    name: &str,
    bin_dir: &std::path::Path,
    pmd_cpu: usize,
) -> anyhow::Result<Box<dyn SwitchUnderTest>> {
    Ok(match name {
        "vsw" => Box::new(Vsw::new(bin_dir.to_path_buf(), "ring", pmd_cpu)),
        "vsw-mmsg" => Box::new(Vsw::new(bin_dir.to_path_buf(), "mmsg", pmd_cpu)),
        "vsw-ring-v3" => Box::new(Vsw::new(bin_dir.to_path_buf(), "ring-v3", pmd_cpu)),
        "bridge" => Box::new(Bridge::default()),
        "ovs-system" | "ovs-afxdp" => {
            bail!("switch '{name}' is not supported by this version of vsw-bench yet")
        }
        other => bail!("unknown switch '{other}' (known: vsw, vsw-mmsg, vsw-ring-v3, bridge)"),
    })
}
