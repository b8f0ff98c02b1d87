//! vhost-user ports with a real frontend: DPDK's testpmd with a virtio_user device
//! (a poll-mode guest, no hugepages) sends through vsw.

use std::time::Duration;

use vsw_e2e::{serial, wait_until, Vswd};

#[test]
fn a_testpmd_guest_sends_through_a_vhostuser_port() {
    let _g = serial();
    let d = Vswd::start();
    d.ctl_ok(&["add-port", "vm1", "type=vhostuser"]);
    d.ctl_ok(&["add-port", "sink", "type=ring"]);
    d.ctl_ok(&["add-flow", "in_port=vm1,actions=output:sink"]);
    let port = d.port("vm1");
    let sock = port
        .vhost_server_path
        .clone()
        .expect("show prints the socket");
    assert_eq!(sock, d.dir.join("vm1.sock").display().to_string());
    let prefix = vsw_e2e::unique("tp");
    let guest = testpmd(&sock, &prefix, false);
    wait_until(
        "100,000 frames from the guest",
        Duration::from_secs(15),
        || d.port("sink").stats.tx_packets > 100_000,
    );
    end(guest);
    let vm = d.port("vm1");
    assert!(vm.stats.rx_packets >= d.port("sink").stats.tx_packets);
    assert_eq!(vm.status, "up");
    // The guest went away: the port stays, ready for the next one.
    assert!(
        std::path::Path::new(&sock).exists(),
        "the socket stays for a reconnect"
    );
}

/// A testpmd guest sending (`txonly`); with `server`, it owns the socket (as QEMU
/// does for a vhostuserclient port). `--stats-period` keeps it forwarding without a
/// terminal; `timeout` bounds it.
fn testpmd(sock: &str, prefix: &str, server: bool) -> std::process::Child {
    testpmd_queues(sock, prefix, server, 1, "txonly")
}

/// A testpmd guest on `queues` queue pairs, at most 20 s.
fn testpmd_queues(
    sock: &str,
    prefix: &str,
    server: bool,
    queues: usize,
    mode: &str,
) -> std::process::Child {
    vsw_e2e::testpmd(sock, prefix, server, queues, mode, 20)
}

fn end(child: std::process::Child) {
    vsw_e2e::end(child)
}

/// A `vhostuserclient` port `vm1` to the guest's socket `sock`, its frames to a ring
/// port `sink`.
fn client_port_into_sink(d: &Vswd, sock: &str) {
    d.ctl_ok(&[
        "add-port",
        "vm1",
        "type=vhostuserclient",
        &format!("vhost-server-path={sock}"),
    ]);
    d.ctl_ok(&["add-port", "sink", "type=ring"]);
    d.ctl_ok(&["add-flow", "in_port=vm1,actions=output:sink"]);
}

#[test]
fn a_client_port_follows_a_guest_that_restarts() {
    let _g = serial();
    let d = Vswd::start();
    let sock = d.dir.join("guest.sock").display().to_string();
    let out = d.ctl(&["add-port", "vm1", "type=vhostuserclient"]);
    assert!(
        !out.status.success(),
        "a client port needs the VM's socket path"
    );
    client_port_into_sink(&d, &sock);
    let prefix = vsw_e2e::unique("tc");
    for round in 1..=2u64 {
        let guest = testpmd(&sock, &prefix, true);
        let before = d.port("sink").stats.tx_packets;
        wait_until(
            &format!("frames from guest run {round}"),
            Duration::from_secs(15),
            || d.port("sink").stats.tx_packets > before + 100_000,
        );
        end(guest);
    }
    assert_eq!(d.port("vm1").status, "up");
}

/// vswd restarts under a running guest that owns its socket (a `vhostuserclient`
/// port, as QEMU's `server=on` chardev): the new vswd connects again by itself, from
/// its state file, and the guest's frames flow again without the guest doing
/// anything.
#[test]
fn a_restarted_vswd_reconnects_to_a_guest_that_kept_running() {
    let _g = serial();
    let mut d = Vswd::start();
    let sock = d.dir.join("guest.sock").display().to_string();
    client_port_into_sink(&d, &sock);
    let prefix = vsw_e2e::unique("tr");
    let guest = vsw_e2e::testpmd(&sock, &prefix, true, 1, "txonly", 40);
    wait_until("frames from the guest", Duration::from_secs(15), || {
        d.port("sink").stats.tx_packets > 100_000
    });
    d.restart();
    wait_until(
        "frames from the same guest through the new vswd",
        Duration::from_secs(15),
        || d.port("sink").stats.tx_packets > 100_000,
    );
    assert_eq!(d.port("vm1").status, "up");
    end(guest);
}

#[test]
fn a_guest_sends_on_two_queue_pairs() {
    let _g = serial();
    let d = Vswd::start();
    d.ctl_ok(&["add-port", "vm1", "type=vhostuser"]);
    d.ctl_ok(&["add-port", "sink", "type=ring"]);
    d.ctl_ok(&["add-flow", "in_port=vm1,actions=output:sink"]);
    let sock = d.dir.join("vm1.sock").display().to_string();
    let guest = testpmd_queues(&sock, &vsw_e2e::unique("mq"), false, 2, "txonly");
    wait_until(
        "both guest queues polled with traffic",
        Duration::from_secs(15),
        || {
            let busy: Vec<bool> = d.rxq_show()[0]
                .queues
                .iter()
                .filter(|q| q.port == "vm1" && q.queue < 2)
                .map(|q| q.usage_percent.unwrap_or(0.0) > 1.0)
                .collect();
            busy == vec![true, true]
        },
    );
    // show tells how the driver takes each receive queue.
    let info = d.port("vm1").vhost_guest.unwrap_or_default();
    end(guest);
    assert!(d.port("sink").stats.tx_packets > 0);
    assert!(
        info.contains("receive queue 0 ") && info.contains("receive queue 1 "),
        "{info}"
    );
}

#[test]
fn two_testpmd_guests_exchange_traffic_through_vsw() {
    let _g = serial();
    let d = Vswd::start();
    d.ctl_ok(&["add-port", "vm1", "type=vhostuser"]);
    d.ctl_ok(&["add-port", "vm2", "type=vhostuser"]);
    d.ctl_ok(&["add-flow", "in_port=vm1,actions=output:vm2"]);
    let path = |p: &str| d.port(p).vhost_server_path.expect("socket");
    let receiver = testpmd_queues(&path("vm2"), &vsw_e2e::unique("rx"), false, 1, "rxonly");
    wait_until(
        "the receiving guest's link",
        Duration::from_secs(15),
        || {
            d.port("vm2")
                .vhost_guest
                .is_some_and(|g| g.contains("link up"))
        },
    );
    let sender = testpmd(&path("vm1"), &vsw_e2e::unique("tx"), false);
    wait_until(
        "100,000 frames delivered into the second guest",
        Duration::from_secs(20),
        || d.port("vm2").stats.tx_packets > 100_000,
    );
    end(sender);
    end(receiver);
    let (vm1, vm2) = (d.port("vm1"), d.port("vm2"));
    assert!(vm1.stats.rx_packets >= vm2.stats.tx_packets);
    assert!(vm2
        .vhost_guest
        .unwrap_or_default()
        .contains("bad chains 0,"));
}

#[test]
fn a_polling_guest_is_seen_polling_and_never_notified() {
    let _g = serial();
    let d = Vswd::start();
    d.ctl_ok(&["add-port", "vm1", "type=vhostuser"]);
    d.ctl_ok(&["add-port", "gen", "type=ring", "ring-flows=1"]);
    d.ctl_ok(&["add-flow", "in_port=gen,actions=output:vm1"]);
    let sock = d.port("vm1").vhost_server_path.expect("socket");
    let guest = testpmd_queues(&sock, &vsw_e2e::unique("tp"), false, 1, "rxonly");
    wait_until(
        "frames into the guest and its queue seen polling",
        Duration::from_secs(15),
        || {
            let vm = d.port("vm1");
            vm.stats.tx_packets > 10_000
                && vm
                    .vhost_guest
                    .is_some_and(|g| g.contains("receive queue 0 polls"))
        },
    );
    let info = d.port("vm1").vhost_guest.unwrap_or_default();
    end(guest);
    assert!(info.contains("notifications 0,"), "{info}");
}
