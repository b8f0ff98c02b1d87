//! Link flaps under traffic: a port whose interface goes down and comes back up must
//! forward again at once, in every afpacket mode and for a tap; and frames read from
//! the socket (too large for a ring slot) must keep their own VLAN tag across a flap.

use std::io::BufRead;
use std::time::{Duration, Instant};

use vsw_e2e::{must, serial, unique, Host, Vswd};

/// Sends UDP datagrams from `from` to `to`:9000, about 100,000 a second, for
/// `seconds`; prints how many it sent when done.
fn udp_stream(from: &Host, to: &Host, seconds: f64) -> std::process::Child {
    let script = format!(
        "import socket, time\n\
         s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
         s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)\n\
         a = ('{}', 9000); b = b'x' * 64; n = 0\n\
         print('ready', flush=True)\n\
         end = time.monotonic() + {seconds}\n\
         while time.monotonic() < end:\n\
         \x20   for i in range(100):\n\
         \x20       try:\n\
         \x20           s.sendto(b, a); n += 1\n\
         \x20       except OSError:\n\
         \x20           pass\n\
         \x20   time.sleep(0.001)\n\
         print(n, flush=True)\n",
        to.addr
    );
    from.python_ready(&script)
}

/// Receives on `host`:9000 and prints `resumed` at the first datagram after a silence
/// of more than a second (the flap), `timeout` when nothing comes for 15 s.
fn resume_watcher(host: &Host) -> std::process::Child {
    let script = format!(
        "import socket, time\n\
         s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
         s.bind(('{}', 9000)); s.settimeout(15)\n\
         print('ready', flush=True)\n\
         last = None\n\
         while True:\n\
         \x20   try:\n\
         \x20       s.recv(2048)\n\
         \x20   except socket.timeout:\n\
         \x20       print('timeout', flush=True); break\n\
         \x20   now = time.monotonic()\n\
         \x20   if last is not None and now - last > 1.0:\n\
         \x20       print('resumed', flush=True); break\n\
         \x20   last = now\n",
        host.addr
    );
    host.python_ready(&script)
}

fn read_line(child: &mut std::process::Child) -> String {
    let out = child.stdout.as_mut().expect("piped");
    let mut line = String::new();
    std::io::BufReader::new(out)
        .read_line(&mut line)
        .expect("child output");
    line.trim().to_string()
}

/// Floods `to` through vsw, takes `set_link(false)` for three seconds and
/// `set_link(true)` again; traffic must reach `to` again within a second of the link
/// coming back, and every frame the port could not send is one drop.
fn flap_under_traffic(d: &Vswd, from: &Host, to: &Host, port: &str, set_link: impl Fn(bool)) {
    assert!(from.ping(to, 2), "ping before the flap\n{}", d.log());
    let mut watcher = resume_watcher(to);
    let mut sender = udp_stream(from, to, 6.0);
    std::thread::sleep(Duration::from_millis(500));
    set_link(false);
    std::thread::sleep(Duration::from_secs(3));
    let before = d.port(port).stats;
    set_link(true);
    let up = Instant::now();
    let seen = read_line(&mut watcher);
    let took = up.elapsed();
    let _ = watcher.wait();
    let sent: u64 = read_line(&mut sender).parse().unwrap_or(0);
    let _ = sender.wait();
    assert_eq!(
        seen,
        "resumed",
        "traffic on {port} never resumed after the flap\n{:#?}\n{}",
        d.port(port),
        d.log()
    );
    assert!(
        took < Duration::from_secs(1),
        "traffic resumed {took:?} after link up"
    );
    let st = d.port(port).stats;
    let dropped = before.tx_errors + before.tx_queue_full;
    assert!(dropped > 0, "frames sent while the link was down are drops");
    assert!(
        st.tx_packets + st.tx_errors + st.tx_queue_full <= sent + 1_000,
        "one drop per frame refused: sent {sent}, port {st:?}"
    );
}

fn two_hosts(mode: &str) -> (Vswd, Host, Host) {
    let d = Vswd::start();
    let (a, b) = (Host::new(1), Host::new(2));
    for h in [&a, &b] {
        d.ctl_ok(&["add-port", &h.port, &format!("afpacket-mode={mode}")]);
    }
    (d, a, b)
}

#[test]
fn a_flapped_link_forwards_again_in_every_afpacket_mode() {
    let _g = serial();
    for mode in ["ring", "ring-v3", "mmsg"] {
        let (d, a, b) = two_hosts(mode);
        flap_under_traffic(&d, &a, &b, &b.port, |up| {
            must(
                "ip",
                &["link", "set", &b.port, if up { "up" } else { "down" }],
            );
        });
        assert!(a.ping(&b, 2), "{mode}: ping after the flap\n{}", d.log());
    }
}

#[test]
fn a_flapped_tap_forwards_again() {
    let _g = serial();
    let d = Vswd::start();
    let a = Host::new(1);
    d.ctl_ok(&["add-port", &a.port]);
    // vsw creates the tap; it is moved into a namespace of its own, as for a container.
    let ns = unique("vt");
    must("ip", &["netns", "add", &ns]);
    let tap = format!("{ns}t");
    let b = Host {
        ns: ns.clone(),
        mac: "02:00:c6:12:00:02".into(),
        port: tap.clone(),
        addr: "198.18.0.2".into(),
    };
    d.ctl_ok(&["add-port", &tap, "type=tap"]);
    must("ip", &["link", "set", &tap, "netns", &ns]);
    b.exec_ok(&["ip", "link", "set", &tap, "address", &b.mac]);
    b.exec_ok(&["ip", "addr", "add", "198.18.0.2/24", "dev", &tap]);
    b.exec_ok(&["ip", "link", "set", &tap, "up"]);
    b.exec_ok(&["ip", "link", "set", "lo", "up"]);
    flap_under_traffic(&d, &a, &b, &tap, |up| {
        b.exec_ok(&["ip", "link", "set", &tap, if up { "up" } else { "down" }]);
    });
    assert!(
        a.ping(&b, 2),
        "ping across the tap after the flap\n{}",
        d.log()
    );
}

/// Sends 802.1Q frames of `size` bytes out of `from`'s eth0, alternately on VLAN 10
/// and 20, each carrying its VLAN in its payload; returns how many.
fn send_tagged(from: &Host, to_mac: &str, size: usize, count: u32) {
    let script = format!(
        "import socket\n\
         s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)\n\
         s.bind(('eth0', 0))\n\
         dst = bytes.fromhex('{}'); src = bytes.fromhex('{}')\n\
         for i in range({count}):\n\
         \x20   vid = 10 if i % 2 == 0 else 20\n\
         \x20   body = bytes([vid]) * ({size} - 18)\n\
         \x20   s.send(dst + src + b'\\x81\\x00' + vid.to_bytes(2, 'big') + b'\\x88\\xb5' + body)\n",
        to_mac.replace(':', ""),
        from.mac.replace(':', ""),
    );
    from.exec_ok(&["python3", "-c", &script]);
}

/// Counts frames on `host`'s eth0 of ethertype 0x88b5 whose VLAN tag (as the kernel
/// reports it) differs from the VLAN written in their payload; prints
/// `good bad` after `seconds`.
fn tag_checker(host: &Host, seconds: u32) -> std::process::Child {
    let script = format!(
        "import socket, struct, time\n\
         s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))\n\
         s.bind(('eth0', 0))\n\
         s.setsockopt(263, 8, 1)\n\
         s.setsockopt(socket.SOL_SOCKET, 33, 1 << 23)\n\
         s.settimeout(0.2)\n\
         print('ready', flush=True)\n\
         good = bad = 0\n\
         end = time.monotonic() + {seconds}\n\
         while time.monotonic() < end:\n\
         \x20   try:\n\
         \x20       data, anc, flags, addr = s.recvmsg(65535, 256)\n\
         \x20   except socket.timeout:\n\
         \x20       continue\n\
         \x20   if addr[2] == socket.PACKET_OUTGOING or len(data) < 100:\n\
         \x20       continue\n\
         \x20   vid = None\n\
         \x20   for level, kind, c in anc:\n\
         \x20       if level == 263 and kind == 8:\n\
         \x20           st, ln, sn, mac, net, tci, tpid = struct.unpack('IIIHHHH', c[:20])\n\
         \x20           if st & (1 << 4): vid = tci & 0xfff\n\
         \x20   if data[12:14] == b'\\x81\\x00':\n\
         \x20       vid = int.from_bytes(data[14:16], 'big') & 0xfff; data = data[:12] + data[16:]\n\
         \x20   if data[12:14] != b'\\x88\\xb5':\n\
         \x20       continue\n\
         \x20   if vid == data[14]: good += 1\n\
         \x20   else: bad += 1\n\
         print(good, bad, flush=True)\n"
    );
    host.python_ready(&script)
}

#[test]
fn jumbo_tagged_frames_keep_their_own_tag_across_a_flap() {
    let _g = serial();
    let d = Vswd::start();
    let (a, b) = (Host::new(1), Host::new(2));
    // The receiving port's ring slots are sized for its MTU when it is attached
    // (1,500: 2 KiB slots); the MTU grows behind vsw's back afterwards, so 9,000-byte
    // frames take the copy path (the socket queue). The sending side takes them.
    must("ip", &["link", "set", &b.port, "mtu", "9000"]);
    b.exec_ok(&["ip", "link", "set", "eth0", "mtu", "9000"]);
    d.ctl_ok(&["add-port", &a.port]);
    d.ctl_ok(&["add-port", &b.port]);
    must("ip", &["link", "set", &a.port, "mtu", "9000"]);
    a.exec_ok(&["ip", "link", "set", "eth0", "mtu", "9000"]);
    // Learn both hosts' addresses.
    assert!(a.ping(&b, 1), "ping\n{}", d.log());
    let b_mac = b.mac.clone();
    let mut checker = tag_checker(&b, 10);
    send_tagged(&a, &b_mac, 9000, 20);
    // A flap leaves a pending ENETDOWN on vsw's socket for the next receive; three
    // rounds, each followed by more tagged frames.
    for _ in 0..3 {
        must("ip", &["link", "set", &a.port, "down"]);
        must("ip", &["link", "set", &a.port, "up"]);
        // The host side's carrier comes back with the port.
        vsw_e2e::wait_until("the link to come back", Duration::from_secs(5), || {
            a.exec_ok(&["cat", "/sys/class/net/eth0/carrier"]).trim() == "1"
        });
        send_tagged(&a, &b_mac, 9000, 20);
    }
    let line = read_line(&mut checker);
    let _ = checker.wait();
    let v: Vec<u64> = line
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(u64::MAX))
        .collect();
    assert_eq!(v.len(), 2, "checker said {line:?}");
    let (good, bad) = (v[0], v[1]);
    assert_eq!(
        bad,
        0,
        "frames delivered with another frame's VLAN tag (good {good})\n{:#?}",
        d.port(&a.port)
    );
    assert!(
        good >= 75,
        "tagged jumbo frames must get through (good {good} of 80)\n{:#?}\n{}",
        d.port(&a.port),
        d.log()
    );
    assert!(
        d.port(&a.port).stats.rx_packets >= 80,
        "{:#?}",
        d.port(&a.port)
    );
}
