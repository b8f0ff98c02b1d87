//! A tiny `vsw-bench compare` (vsw and the bridge, short trials) end to end: the report
//! must exist and hold sane values. Needs root, like the other end-to-end tests.

use std::os::unix::fs::MetadataExt;
use std::process::Command;

/// The tests that send traffic run one at a time: a rate measured while another test
/// floods the machine says nothing.
static TRAFFIC: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn traffic_lock() -> std::sync::MutexGuard<'static, ()> {
    TRAFFIC.lock().unwrap_or_else(|e| e.into_inner())
}

#[test]
fn tiny_compare_writes_a_sane_report() {
    let _g = traffic_lock();
    let euid = std::fs::metadata("/proc/self")
        .map(|m| m.uid())
        .unwrap_or(u32::MAX);
    assert_eq!(euid, 0, "vsw-bench's end-to-end test needs root");
    let out_dir = std::env::temp_dir().join(format!("vsw-bench-test-{}", std::process::id()));
    let child = Command::new(env!("CARGO_BIN_EXE_vsw-bench"))
        .args([
            "compare",
            "--switches",
            "vsw,bridge",
            "--trial-seconds",
            "0.3",
        ])
        .args([
            "--max-trials",
            "4",
            "--max-rate",
            "100000",
            "--latency-loads",
            "50",
        ])
        .args(["--iperf-seconds", "0", "--out"])
        .arg(&out_dir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run vsw-bench");
    // vsw-bench names its namespaces after its process id.
    let ours = format!("vswb{}", child.id() % 100_000);
    let out = child.wait_with_output().expect("vsw-bench output");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "vsw-bench failed:\n{stderr}");
    let report: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out_dir.join("results.json")).expect("results.json"),
    )
    .expect("results.json is JSON");
    let results = report["results"].as_array().expect("results");
    assert_eq!(results.len(), 2);
    for r in results {
        let name = r["switch"].as_str().unwrap();
        // What a switch reaches on this machine at a given moment is not for a test to
        // assert; that the report is consistent is: a throughput within the range
        // searched that some trial reached without loss (beyond the tolerance).
        let tput = r["throughput"]["throughput_pps"].as_f64().unwrap_or(0.0);
        assert!(tput > 0.0 && tput <= 100_001.0, "{name}: throughput {tput}");
        let trials = r["throughput"]["trials"].as_array().expect("trials");
        let passed_at_or_above = trials.iter().any(|t| {
            let (sent, received) = (t["sent"].as_u64().unwrap(), t["received"].as_u64().unwrap());
            sent > 0
                && sent.saturating_sub(received) as f64 <= 0.00002 * sent as f64
                && t["sent_pps"].as_f64().unwrap() >= tput * 0.999
        });
        assert!(
            passed_at_or_above,
            "{name}: no trial backs {tput}: {trials:?}"
        );
        let lat = &r["latency"][0]["latency"];
        assert!(lat["count"].as_u64().unwrap() > 1000, "{name}: {lat}");
        let (min, p50, max) = (
            lat["min_us"].as_f64().unwrap(),
            lat["p50_us"].as_f64().unwrap(),
            lat["max_us"].as_f64().unwrap(),
        );
        assert!(
            min > 0.0 && min <= p50 && p50 <= max && p50 < 10_000.0,
            "{name}: {lat}"
        );
    }
    let md = std::fs::read_to_string(out_dir.join("results.md")).expect("results.md");
    assert!(md.contains("| vsw |") && md.contains("| bridge |"), "{md}");
    // The topology is gone.
    let ns = Command::new("ip").args(["netns", "list"]).output().unwrap();
    let ns = String::from_utf8_lossy(&ns.stdout);
    assert!(!ns.contains(&ours), "namespaces {ours}* left behind: {ns}");
    std::fs::remove_dir_all(&out_dir).unwrap();
}

#[test]
fn unknown_switch_is_a_clear_error() {
    let out = Command::new(env!("CARGO_BIN_EXE_vsw-bench"))
        .args(["compare", "--switches", "vsw,frobswitch"])
        .output()
        .expect("run vsw-bench");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unknown switch 'frobswitch'"), "{err}");
}

#[test]
fn cpu_subcommand_reports_cpu_per_packet_at_a_fixed_rate() {
    let _g = traffic_lock();
    let out_dir = std::env::temp_dir().join(format!("vsw-bench-cpu-test-{}", std::process::id()));
    let out = Command::new(env!("CARGO_BIN_EXE_vsw-bench"))
        .args([
            "cpu",
            "--rate",
            "20000",
            "--switches",
            "vsw",
            "--trial-seconds",
            "0.5",
            "--out",
        ])
        .arg(&out_dir)
        .output()
        .expect("run vsw-bench");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("results.json")).unwrap())
            .unwrap();
    let vsw = &report["results"][0];
    assert!(
        vsw["throughput"]["trials"].as_array().unwrap().is_empty(),
        "cpu runs no search"
    );
    // A busy-polling PMD burns its core: at 20 kpps that is tens of microseconds a packet.
    let cpu = vsw["cpu_ns_per_packet"].as_f64().expect("CPU per packet");
    assert!(cpu > 1_000.0, "{cpu}");
    let pmd = vsw["pmd_ns_per_packet"]
        .as_f64()
        .expect("vsw's own PMD figure");
    assert!(
        pmd > 0.0 && pmd < cpu,
        "PMD busy time {pmd} is part of the process's {cpu}"
    );
    std::fs::remove_dir_all(&out_dir).unwrap();
}
