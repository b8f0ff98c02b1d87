//! Builds the BPF programs (bpf/*.c) with clang: the offload fast path (twice: its
//! maps unpinned, and pinned by name for `offload-persist`) and the tunnel
//! super-frame redirect.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    for (name, source, defines) in [
        ("vsw_offload", "vsw_offload", &[][..]),
        ("vsw_offload_pinned", "vsw_offload", &["-DVSW_PIN_MAPS"][..]),
        ("vsw_tunnel_gso", "vsw_tunnel_gso", &[][..]),
    ] {
        let src = format!("bpf/{source}.c");
        println!("cargo:rerun-if-changed={src}");
        let out =
            PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR")).join(format!("{name}.o"));
        // The multiarch include directory has <asm/types.h> for the kernel headers.
        let arch = match std::env::var("CARGO_CFG_TARGET_ARCH").as_deref() {
            Ok("aarch64") => "aarch64-linux-gnu",
            _ => "x86_64-linux-gnu",
        };
        let status = Command::new("clang")
            .args(["-O2", "-g", "-target", "bpf", "-Wall"])
            .args(defines)
            .arg(format!("-I/usr/include/{arch}"))
            .args(["-c", &src, "-o"])
            .arg(&out)
            .status()
            .unwrap_or_else(|e| {
                panic!("clang is needed to build {src} (scripts/setup.sh installs it): {e}")
            });
        assert!(status.success(), "clang failed on {src}");
    }
}
