//! vhost-user ports with an interrupt-driven guest: QEMU (TCG) booting Debian's kernel,
//! its virtio-net driver negotiating what a Linux guest negotiates (offloads,
//! mergeable buffers, EVENT_IDX) and waiting for interrupts.

use std::time::Duration;

use vsw_e2e::qemu::Guest;
use vsw_e2e::{serial, wait_until, Host, Vswd};

const BOOT: Duration = Duration::from_secs(90);
/// Bytes each way over TCP.
const SENT: usize = 1 << 20;

/// A TCP peer in `host`'s namespace: on port 5001 it prints the bytes it got once the
/// sender closes; on port 5002 it sends `SENT` bytes and closes. Bounded by `timeout`.
fn tcp_peer(host: &Host) -> std::process::Child {
    let script = format!(
        "import socket\ndef listen(port):\n    s = socket.socket()\n    \
         s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n    s.bind(('{}', port))\n    \
         s.listen(1)\n    return s\na = listen(5001)\nb = listen(5002)\nprint('ready', flush=True)\n\
         c, _ = a.accept()\nn = 0\nwhile True:\n    d = c.recv(1 << 16)\n    if not d:\n        break\n    \
         n += len(d)\nc.close()\nprint(n, flush=True)\nc, _ = b.accept()\nc.sendall(bytes({SENT}))\nc.close()\n",
        host.addr
    );
    host.python_ready(&script)
}

#[test]
fn a_qemu_guest_pings_a_host_and_sends_it_tcp_with_offloads_on() {
    let _g = serial();
    let d = Vswd::start();
    let host = Host::new(2);
    d.ctl_ok(&["add-port", &host.port]);
    d.ctl_ok(&["add-port", "vm", "type=vhostuser"]);
    let sock = d.port("vm").vhost_server_path.expect("socket");
    let peer = tcp_peer(&host);
    let script = format!(
        "ping -c 3 -W 10 {h} > /dev/null && echo VSW-PING-OK || echo VSW-PING-FAILED\n\
         dd if=/dev/zero bs=65536 count={blocks} 2>/dev/null | nc {h} 5001 && echo VSW-TCP-SENT || echo VSW-TCP-FAILED\n\
         echo VSW-TCP-RECEIVED $(nc {h} 5002 | wc -c)",
        h = host.addr,
        blocks = SENT / 65536
    );
    let guest = Guest::boot(&sock, false, &script);
    guest.wait_for("VSW-GUEST-UP", BOOT).unwrap();
    wait_until(
        "the guest's link to come up",
        Duration::from_secs(30),
        || {
            d.port("vm")
                .vhost_guest
                .is_some_and(|g| g.contains("link up"))
        },
    );
    let ping = guest.wait_for("VSW-PING", BOOT).unwrap();
    assert!(ping.contains("VSW-PING-OK"), "{ping}\n{}", guest.console());
    let tcp = guest
        .wait_for("VSW-TCP", BOOT)
        .map_err(|e| {
            format!(
                "{e}\nvm: {:?}\nhost: {:?}",
                d.port("vm"),
                d.port(&host.port)
            )
        })
        .unwrap();
    assert!(tcp.contains("VSW-TCP-SENT"), "{tcp}\n{}", guest.console());
    let received = guest.wait_for("VSW-TCP-RECEIVED", BOOT).unwrap();
    assert_eq!(
        received.split_whitespace().last(),
        Some(SENT.to_string().as_str()),
        "every byte the host sent reached the guest: {received}"
    );
    let out = peer.wait_with_output().expect("TCP peer");
    let got: usize = String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("byte count from the TCP peer");
    assert_eq!(got, SENT, "every byte the guest sent arrived");
    let vm = d.port("vm");
    assert!(vm.stats.rx_packets > 10 && vm.stats.tx_packets > 3);
    assert_eq!((vm.stats.tx_too_big, vm.stats.tx_mtu_drops), (0, 0));
    // The guest negotiated checksum and segmentation offloads with vsw.
    let info = vm.vhost_guest.unwrap_or_default();
    let features = info
        .split("features ")
        .nth(1)
        .and_then(|f| f.split(',').next())
        .and_then(|f| u64::from_str_radix(f.trim_start_matches("0x"), 16).ok())
        .expect("features in show");
    for (bit, name) in [
        (0, "CSUM"),
        (1, "GUEST_CSUM"),
        (11, "HOST_TSO4"),
        (15, "MRG_RXBUF"),
    ] {
        assert_ne!(features & (1 << bit), 0, "{name} negotiated: {info}");
    }
}

#[test]
fn a_restarted_qemu_guest_is_reconnected_by_a_vhostuserclient_port() {
    let _g = serial();
    let d = Vswd::start();
    let host = Host::new(2);
    d.ctl_ok(&["add-port", &host.port]);
    let sock = d.dir.join("qemu-vm.sock").display().to_string();
    d.ctl_ok(&[
        "add-port",
        "vm",
        "type=vhostuserclient",
        &format!("vhost-server-path={sock}"),
    ]);
    let script = format!(
        "ping -c 3 -W 10 {} > /dev/null && echo VSW-PING-OK || echo VSW-PING-FAILED",
        host.addr
    );
    let d = &d;
    let link = |up: bool| {
        move || {
            d.port("vm")
                .vhost_guest
                .is_some_and(|g| g.contains(if up { "link up" } else { "link down" }))
        }
    };
    for boot in 1..=2 {
        let mut guest = Guest::boot(&sock, true, &script);
        let ping = guest.wait_for("VSW-PING", BOOT).unwrap();
        assert!(
            ping.contains("VSW-PING-OK"),
            "boot {boot}: {ping}\n{}",
            guest.console()
        );
        wait_until("the link up", Duration::from_secs(5), link(true));
        guest.kill();
        wait_until(
            "the link down after QEMU stopped",
            Duration::from_secs(10),
            link(false),
        );
    }
    assert!(d.port("vm").stats.rx_packets >= 6, "pings of both boots");
}

/// vswd restarts under a running VM whose socket it owns (a `vhostuser` port;
/// QEMU's chardev reconnects): the guest's ring goes on where it was, and the guest
/// reaches the host again without anything done to it.
#[test]
fn a_qemu_guest_reaches_the_host_again_after_vswd_restarts() {
    let _g = serial();
    let mut d = Vswd::start();
    let host = Host::new(2);
    d.ctl_ok(&["add-port", &host.port]);
    d.ctl_ok(&["add-port", "vm", "type=vhostuser"]);
    let sock = d.port("vm").vhost_server_path.expect("socket");
    // The second ping waits for the restart (done while the guest sleeps).
    let script = format!(
        "ping -c 3 -W 10 {h} > /dev/null && echo VSW-PING-OK || echo VSW-PING-FAILED\n\
         sleep 20\n\
         ping -c 3 -W 10 {h} > /dev/null && echo VSW-AGAIN-OK || echo VSW-AGAIN-FAILED",
        h = host.addr
    );
    let guest = Guest::boot(&sock, false, &script);
    let ping = guest.wait_for("VSW-PING", BOOT).unwrap();
    assert!(ping.contains("VSW-PING-OK"), "{ping}\n{}", guest.console());
    d.restart();
    let again = guest
        .wait_for("VSW-AGAIN", Duration::from_secs(60))
        .unwrap();
    assert!(
        again.contains("VSW-AGAIN-OK"),
        "{again}\n{}\n{}",
        guest.console(),
        d.log()
    );
    assert!(d.port("vm").stats.rx_packets >= 3, "the new vswd's pings");
}

/// A VM's interface the way Nova and libvirt configure it on Open vSwitch: an
/// `ovs-vsctl` transaction making a dpdkvhostuserclient interface with QEMU's socket,
/// carried out by vswd through the database.
#[test]
fn a_qemu_guest_configured_as_nova_does_through_ovs_vsctl() {
    let _g = serial();
    let db = vsw_e2e::ovsdb::OvsdbServer::start();
    let d = Vswd::start_with_args(&["--ovsdb", &db.target(), "--bridge", "br-int"]);
    let host = Host::new(2);
    db.add_netdev_bridge("br-int");
    db.add_port("br-int", &host.port, None);
    let sock = d.dir.join("vhu1.sock").display().to_string();
    db.vsctl(&[
        "--",
        "--may-exist",
        "add-port",
        "br-int",
        "vhu1",
        "--",
        "set",
        "Interface",
        "vhu1",
        "type=dpdkvhostuserclient",
        &format!("options:vhost-server-path={sock}"),
        "external-ids:attached-mac=52:54:00:12:34:56",
        "external-ids:iface-id=3f2a1b0c-9d8e-4f7a-8b6c-5d4e3f2a1b0c",
        "external-ids:vm-id=7c6b5a49-3827-4160-9f8e-7d6c5b4a3928",
        "external-ids:iface-status=active",
    ]);
    assert_eq!(
        db.vsctl(&["get", "Interface", "vhu1", "status:mode"]),
        "client"
    );
    let script = format!(
        "ping -c 3 -W 10 {} > /dev/null && echo VSW-PING-OK || echo VSW-PING-FAILED",
        host.addr
    );
    let guest = Guest::boot(&sock, true, &script);
    let ping = guest.wait_for("VSW-PING", BOOT).unwrap();
    assert!(ping.contains("VSW-PING-OK"), "{ping}\n{}", guest.console());
    assert!(d.port("vhu1").stats.rx_packets >= 3);
}
