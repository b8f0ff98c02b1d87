//! An interrupt-driven guest: QEMU under TCG booting Debian's kernel with a busybox
//! initramfs built here, its virtio-net device on a vhost-user socket. The guest runs
//! a script of the test's and reports on its serial console with marker lines.

use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::unique;

/// The guest's address on the benchmarking network and its MAC.
pub const GUEST_ADDR: &str = "198.18.0.10";
pub const GUEST_MAC: &str = "52:54:00:12:00:0a";

/// Modules the guest loads, in the order their dependencies need.
const WANTED: [&str; 2] = ["virtio_pci", "virtio_net"];

/// A running QEMU guest; killed (by PID) when dropped.
pub struct Guest {
    child: Child,
    lines: Receiver<String>,
    console: Arc<Mutex<String>>,
    dir: PathBuf,
}

/// The newest kernel in /boot and its modules directory.
fn kernel() -> (PathBuf, PathBuf) {
    let mut kernels: Vec<PathBuf> = std::fs::read_dir("/boot")
        .expect("/boot (install linux-image-amd64)")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("vmlinuz-"))
        })
        .collect();
    kernels.sort();
    let k = kernels
        .pop()
        .expect("a kernel in /boot (install linux-image-amd64)");
    let version = k
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_prefix("vmlinuz-"))
        .expect("vmlinuz-VERSION")
        .to_string();
    (k, PathBuf::from("/lib/modules").join(version))
}

/// The module files to load for `WANTED`, dependencies first (from modules.dep).
fn modules(dir: &Path) -> Vec<PathBuf> {
    let dep = std::fs::read_to_string(dir.join("modules.dep")).expect("modules.dep");
    let mut order = Vec::new();
    let mut seen = HashSet::new();
    for want in WANTED {
        let line = dep
            .lines()
            .find(|l| {
                l.split(':')
                    .next()
                    .is_some_and(|m| m.ends_with(&format!("/{want}.ko")))
            })
            .unwrap_or_else(|| panic!("{want} in modules.dep"));
        let (module, deps) = line.split_once(':').expect("module: deps");
        // modules.dep lists what a module needs with the most basic last.
        for m in deps.split_whitespace().rev().chain([module]) {
            if seen.insert(m.to_string()) {
                order.push(dir.join(m));
            }
        }
    }
    order
}

/// Appends one file to a newc cpio archive.
fn cpio_entry(out: &mut Vec<u8>, ino: u32, name: &str, mode: u32, data: &[u8]) {
    let header = format!(
        "070701{ino:08x}{mode:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}",
        0,
        0,
        1,
        0,
        data.len(),
        0,
        0,
        0,
        0,
        name.len() + 1,
        0
    );
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(name.as_bytes());
    out.push(0);
    while !out.len().is_multiple_of(4) {
        out.push(0);
    }
    out.extend_from_slice(data);
    while !out.len().is_multiple_of(4) {
        out.push(0);
    }
}

/// An initramfs: busybox, the virtio modules and `/init` running `script`.
fn initramfs(path: &Path, modules_dir: &Path, script: &str) {
    let busybox = std::fs::read("/bin/busybox").expect("/bin/busybox (install busybox-static)");
    let mods = modules(modules_dir);
    let mut load = String::new();
    let mut out = Vec::new();
    let mut ino = 1;
    let mut entry = |out: &mut Vec<u8>, name: &str, mode: u32, data: &[u8]| {
        cpio_entry(out, ino, name, mode, data);
        ino += 1;
    };
    for d in ["bin", "modules", "proc", "sys", "dev", "tmp"] {
        entry(&mut out, d, 0o040755, &[]);
    }
    entry(&mut out, "bin/busybox", 0o100755, &busybox);
    for m in &mods {
        let name = m.file_name().and_then(|n| n.to_str()).expect("module name");
        let data = std::fs::read(m).unwrap_or_else(|e| panic!("{}: {e}", m.display()));
        entry(&mut out, &format!("modules/{name}"), 0o100644, &data);
        load.push_str(&format!(
            "insmod /modules/{name} || echo VSW-INSMOD-FAILED {name}\n"
        ));
    }
    let init = format!(
        "#!/bin/busybox sh\n/bin/busybox --install -s /bin\n\
         mount -t proc proc /proc\nmount -t sysfs sys /sys\nmount -t devtmpfs dev /dev\n\
         {load}ip link set lo up\nip link set eth0 up\nip addr add {GUEST_ADDR}/24 dev eth0\n\
         echo VSW-GUEST-UP\n{script}\necho VSW-GUEST-DONE\nwhile true; do sleep 60; done\n"
    );
    entry(&mut out, "init", 0o100755, init.as_bytes());
    cpio_entry(&mut out, 0, "TRAILER!!!", 0, &[]);
    std::fs::write(path, out).expect("write initramfs");
}

impl Guest {
    /// Boots a guest whose NIC uses the vhost-user socket `sock`: QEMU connects to it
    /// (a `vhostuser` port; again whenever it goes away), or with `qemu_listens`
    /// creates it (a `vhostuserclient` port). The guest runs `script` after its network is up.
    pub fn boot(sock: &str, qemu_listens: bool, script: &str) -> Guest {
        let dir = std::env::temp_dir().join(unique("vswq"));
        std::fs::create_dir_all(&dir).expect("guest directory");
        let (kernel, modules_dir) = kernel();
        let initrd = dir.join("initramfs.cpio");
        initramfs(&initrd, &modules_dir, script);
        let chardev = if qemu_listens {
            format!("socket,id=c0,path={sock},server=on,wait=off")
        } else {
            // Connects again a second after vswd went away (a restart), as a VM
            // manager configures it for a switch that owns the socket.
            format!("socket,id=c0,path={sock},reconnect=1")
        };
        let mut child = Command::new("qemu-system-x86_64")
            .args(["-M", "pc", "-accel", "tcg", "-smp", "1", "-m", "512"])
            .args([
                "-object",
                "memory-backend-memfd,id=mem,size=512M,share=on",
                "-machine",
                "memory-backend=mem",
            ])
            .args(["-display", "none", "-serial", "stdio", "-monitor", "none"])
            .args(["-no-reboot", "-nodefaults"])
            .arg("-kernel")
            .arg(&kernel)
            .arg("-initrd")
            .arg(&initrd)
            .args(["-append", "console=ttyS0 panic=-1 loglevel=3"])
            .args(["-chardev", &chardev])
            .args(["-netdev", "vhost-user,id=n0,chardev=c0"])
            .args([
                "-device",
                &format!("virtio-net-pci,netdev=n0,romfile=,vectors=0,mac={GUEST_MAC}"),
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("qemu-system-x86_64 (install qemu-system-x86)");
        let (tx, lines) = channel();
        let console = Arc::new(Mutex::new(String::new()));
        for out in [
            Box::new(child.stdout.take().expect("stdout")) as Box<dyn std::io::Read + Send>,
            Box::new(child.stderr.take().expect("stderr")),
        ] {
            let (tx, console) = (tx.clone(), console.clone());
            std::thread::spawn(move || {
                for line in BufReader::new(out).lines() {
                    let Ok(line) = line else { break };
                    let mut c = console.lock().unwrap_or_else(|e| e.into_inner());
                    c.push_str(&line);
                    c.push('\n');
                    drop(c);
                    let _ = tx.send(line);
                }
            });
        }
        Guest {
            child,
            lines,
            console,
            dir,
        }
    }

    /// Waits for a console line that contains `marker`; the line, or an error with
    /// everything the console said.
    pub fn wait_for(&self, marker: &str, timeout: Duration) -> Result<String, String> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if line.contains(marker) => return Ok(line),
                Ok(line) if line.contains("VSW-INSMOD-FAILED") => {
                    return Err(format!("{line}\n{}", self.console()))
                }
                Ok(_) => {}
                Err(RecvTimeoutError::Timeout) => {
                    return Err(format!(
                        "no '{marker}' from the guest within {timeout:?}; console:\n{}",
                        self.console()
                    ))
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(format!(
                        "QEMU exited before '{marker}'; console:\n{}",
                        self.console()
                    ))
                }
            }
        }
    }

    /// Everything the guest's console said so far.
    pub fn console(&self) -> String {
        self.console
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Stops QEMU (the VM is switched off).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Guest {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
