//! OpenFlow peers vsw cannot trust (issue 29): what one peer asks for, how slowly it
//! reads, how many connect, never costs another peer its answers, its packet-ins or
//! its connection, nor the switch its memory; no message leaves with a length that
//! lies.

use std::io::BufRead;
use std::process::{Command, Stdio};
use std::time::Duration;

use vsw_e2e::{serial, wait_until, Vswd};

fn mgmt(d: &Vswd) -> String {
    format!("unix:{}", d.dir.join("br0.mgmt").display())
}

/// `ovs-ofctl -O OpenFlow13 ARGS[0] <br0> ARGS[1..]`, once it succeeded.
fn of13(d: &Vswd, args: &[&str]) -> String {
    let out = Command::new("ovs-ofctl")
        .args(["-t", "10", "-O", "OpenFlow13", args[0], &mgmt(d)])
        .args(&args[1..])
        .output()
        .expect("ovs-ofctl");
    assert!(
        out.status.success(),
        "ovs-ofctl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A frame of `len` bytes (a local experimental ethertype).
fn frame_hex(len: usize) -> String {
    let mut f = vec![0u8; len];
    f[..12].copy_from_slice(&[2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1]);
    f[12..14].copy_from_slice(&[0x88, 0xb5]);
    f.iter().map(|b| format!("{b:02x}")).collect()
}

/// The largest packet-out there is (its message 65,535 bytes), sent to CONTROLLER:
/// the packet-in it makes would be 65,537 bytes whole. It is cut to fit (its
/// total_len says how long the frame was), and the monitoring peer's stream stays
/// whole: the packet-in after it reads as well.
/// `ovs-ofctl monitor` on `d` (miss_send_len 65535), its packet-in lines as they come.
fn monitor(d: &Vswd) -> (std::process::Child, std::sync::mpsc::Receiver<String>) {
    let mut child = Command::new("timeout")
        .args([
            "60",
            "ovs-ofctl",
            "-O",
            "OpenFlow13",
            "monitor",
            &mgmt(d),
            "65535",
        ])
        .env("OVS_RUNDIR", &d.dir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ovs-ofctl monitor");
    let lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for l in lines.map_while(Result::ok) {
            if l.starts_with("OFPT_PACKET_IN") && tx.send(l).is_err() {
                return;
            }
        }
    });
    (child, rx)
}

fn packet_out_to_controller(d: &Vswd, hex: &str) {
    of13(
        d,
        &[
            "packet-out",
            &format!("in_port=CONTROLLER packet={hex} actions=output:CONTROLLER"),
        ],
    );
}

/// The largest packet-out there is (its message 65,535 bytes), sent to CONTROLLER:
/// the packet-in it makes would be 65,537 bytes whole. It is cut to fit (its
/// total_len says how long the frame was), and the monitoring peer's stream stays
/// whole: the packet-in after it reads as well.
#[test]
fn a_maximal_packet_out_to_the_controller_leaves_every_stream_whole() {
    let _g = serial();
    let d = Vswd::start();
    of13(&d, &["del-flows"]);
    let (child, packet_ins) = monitor(&d);
    let (big, small) = (frame_hex(65_495), frame_hex(60));
    // The monitor listens once it has set its miss_send_len: small packet-outs
    // until one reaches it.
    wait_until("the monitor to listen", Duration::from_secs(20), || {
        packet_out_to_controller(&d, &small);
        packet_ins.recv_timeout(Duration::from_millis(300)).is_ok()
    });
    while packet_ins.try_recv().is_ok() {}
    packet_out_to_controller(&d, &big);
    packet_out_to_controller(&d, &small);
    let next = || packet_ins.recv_timeout(Duration::from_secs(10));
    let (first, second) = (next(), next());
    vsw_e2e::end(child);
    let big_in = first.expect("the large frame's packet-in");
    assert!(big_in.contains("total_len=65495"), "{big_in}");
    let data_len: usize = big_in
        .split("data_len=")
        .nth(1)
        .and_then(|t| t.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(
        (65_000..65_495).contains(&data_len),
        "cut to what fits one message: {big_in}"
    );
    let after = second.expect("the stream after the large packet-in reads on");
    assert!(
        after.contains("total_len=60") && after.contains("data_len=60"),
        "{after}"
    );
}
