//! tx-flush-interval through vswd and real veths: a held packet arrives by its
//! deadline and not before; with interval 0 at once; `show` says where the interval
//! comes from.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use vsw_e2e::{serial, Host, Vswd};

/// Sends a frame from `a` to `b` (UDP port 7777), waits until it arrives, then sends
/// a second: the times (CLOCK_MONOTONIC, shared by every namespace) the first
/// arrived, the second was sent, and the second arrived. The second is staged after
/// the first left, so its batch is due one interval after the first's send.
fn frame_after_frame(a: &Host, b: &Host) -> (f64, f64, f64) {
    let recv_script = "import socket, time, sys\n\
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))\n\
        s.bind(('eth0', 0))\ns.settimeout(10)\nprint('ready', flush=True)\n\
        n = 0\n\
        while n < 2:\n    f = s.recv(2048)\n    \
        if len(f) > 37 and f[23] == 17 and f[36:38] == bytes([0x1e, 0x61]):\n        \
        print(time.monotonic(), flush=True)\n        n += 1\n";
    let mut rx = Command::new("ip")
        .args(["netns", "exec", &b.ns, "python3", "-c", recv_script])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("receiver");
    let mut out = BufReader::new(rx.stdout.take().expect("stdout"));
    let mut next_line = || {
        let mut line = String::new();
        out.read_line(&mut line).expect("a line from the receiver");
        line.trim().to_string()
    };
    assert_eq!(next_line(), "ready");
    let mac = |m: &str| m.replace(':', "");
    let frame = format!(
        "{}{}0800450000200000400040110000c6120001c61200020fa01e61000c0000deadbeef",
        mac(&b.mac),
        mac(&a.mac)
    );
    let send_script = format!(
        "import socket, time\ns = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)\n\
         s.bind(('eth0', 0))\nt = time.monotonic()\ns.send(bytes.fromhex('{frame}'))\nprint(t)\n"
    );
    let send = || -> f64 {
        a.exec_ok(&["python3", "-c", &send_script])
            .trim()
            .parse()
            .expect("send time")
    };
    send();
    let first: f64 = next_line().parse().expect("first arrival");
    let sent = send();
    let second: f64 = next_line().parse().expect("second arrival");
    let _ = rx.wait();
    (first, sent, second)
}

#[test]
fn a_held_frame_arrives_by_its_deadline_and_not_before() {
    let _g = serial();
    let d = Vswd::start();
    let (a, b) = (Host::new(1), Host::new(2));
    d.ctl_ok(&["add-port", &a.port]);
    d.ctl_ok(&["add-port", &b.port]);
    d.ctl_ok(&["set", "tx-flush-interval=1000000"]);
    let show = d.ctl_ok(&["show"]);
    assert!(
        show.contains("tx-flush-interval=1000000us (from switch)"),
        "{show}"
    );
    let (first, sent, second) = frame_after_frame(&a, &b);
    assert!(
        second - first >= 0.95,
        "the second frame left {} s after the first, before its batch was due",
        second - first
    );
    assert!(
        second - sent < 1.5,
        "the second frame waited {} s, past 1 s + margin",
        second - sent
    );

    // A port's own interval 0 overrides the switch's: both at once.
    d.ctl_ok(&["set-port", &b.port, "tx-flush-interval=0"]);
    let p = d.port(&b.port);
    assert_eq!(
        (p.tx_flush_interval_us, p.tx_flush_interval_from.as_str()),
        (0, "port")
    );
    let (_, sent, second) = frame_after_frame(&a, &b);
    assert!(
        second - sent < 0.3,
        "interval 0 held a frame {} s",
        second - sent
    );
    let out = d.ctl(&["set-port", &b.port, "tx-flush-interval=2000000"]);
    assert!(!out.status.success(), "an interval above 1 s is refused");
}
