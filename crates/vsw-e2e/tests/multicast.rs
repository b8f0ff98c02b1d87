//! NORMAL's multicast snooping with real hosts: the kernel's own IGMP reports teach
//! vswd which port wants a group, and the group's traffic goes there only.

use std::io::{BufRead, BufReader, Write};
use std::process::Child;
use std::time::Duration;

use vsw_e2e::{serial, wait_until, Host, Vswd};

const GROUP: &str = "239.1.1.1";

/// Three hosts without IPv6 (no MLD or neighbour discovery of their own), so that a
/// port's counters count what the test sends.
fn quiet_host(index: u8) -> Host {
    let h = Host::new(index);
    h.exec_ok(&["sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1"]);
    h.exec_ok(&["sysctl", "-q", "-w", "net.ipv6.conf.eth0.disable_ipv6=1"]);
    h
}

/// Joins GROUP on `h` (its kernel sends the IGMPv3 report), prints each datagram
/// received; `leave` on its input drops the membership (the kernel reports that too),
/// the input's end ends it.
fn member(h: &Host) -> Child {
    let script = format!(
        "import os, socket, struct, sys, threading\n\
         s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
         s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n\
         s.bind(('{GROUP}', 5001))\n\
         mreq = struct.pack('4s4s', socket.inet_aton('{GROUP}'), socket.inet_aton('{addr}'))\n\
         s.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, mreq)\n\
         def commands():\n\
         \x20   for line in sys.stdin:\n\
         \x20       if line.strip() == 'leave':\n\
         \x20           s.setsockopt(socket.IPPROTO_IP, socket.IP_DROP_MEMBERSHIP, mreq)\n\
         \x20           print('left', flush=True)\n\
         \x20   os._exit(0)\n\
         threading.Thread(target=commands, daemon=True).start()\n\
         print('ready', flush=True)\n\
         while True:\n\
         \x20   s.recv(2048)\n\
         \x20   print('got', flush=True)\n",
        addr = h.addr
    );
    h.python_ready_with_input(&script, 60)
}

/// Sends `n` datagrams to GROUP from `h`.
fn send_to_group(h: &Host, n: u32) {
    let script = format!(
        "import socket\n\
         s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
         s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton('{addr}'))\n\
         s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 1)\n\
         for i in range({n}): s.sendto(b'x' * 32, ('{GROUP}', 5001))\n",
        addr = h.addr
    );
    h.exec_ok(&["python3", "-c", &script]);
}

fn mdb(d: &Vswd) -> String {
    d.appctl_ok(&["mdb/show", "br0"])
}

#[test]
fn a_group_goes_to_its_members_until_they_leave() {
    let _g = serial();
    let d = Vswd::start();
    let (a, b, c) = (quiet_host(1), quiet_host(2), quiet_host(3));
    for h in [&a, &b, &c] {
        d.ctl_ok(&["add-port", &h.port]);
    }
    d.ctl_ok(&["set", "mcast-snooping-enable=true"]);
    let mut joined = member(&a);
    let mut heard = BufReader::new(joined.stdout.take().unwrap());
    wait_until("the report to be snooped", Duration::from_secs(10), || {
        mdb(&d).contains(GROUP)
    });
    let shown = mdb(&d);
    assert!(shown.starts_with(" port  VLAN  GROUP"), "{shown}");
    let a_port = d.port(&a.port).no;
    assert!(
        shown
            .lines()
            .any(|l| l.contains(GROUP) && l.split_whitespace().next() == Some(&a_port.to_string())),
        "the member's port: {shown}"
    );

    let b_before = d.port(&b.port).stats.tx_packets;
    send_to_group(&c, 10);
    let mut line = String::new();
    for i in 0..10 {
        line.clear();
        heard.read_line(&mut line).unwrap();
        assert_eq!(
            line.trim(),
            "got",
            "datagram {i} to the member: {}",
            d.log()
        );
    }
    let b_sent = d.port(&b.port).stats.tx_packets - b_before;
    assert!(
        b_sent < 10,
        "the group's traffic reached a port that did not ask for it ({b_sent} frames)"
    );

    // The kernel reports the leave; the group is unregistered then, and flooded.
    writeln!(joined.stdin.as_mut().unwrap(), "leave").unwrap();
    line.clear();
    heard.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "left");
    wait_until("the leave to be snooped", Duration::from_secs(10), || {
        !mdb(&d).contains(GROUP)
    });
    let b_before = d.port(&b.port).stats.tx_packets;
    send_to_group(&c, 10);
    wait_until(
        "an unregistered group to be flooded",
        Duration::from_secs(5),
        || d.port(&b.port).stats.tx_packets - b_before >= 10,
    );
    assert!(d.appctl_ok(&["mdb/flush", "br0"]).contains("flushed"));
    drop(joined.stdin.take());
    let _ = joined.wait();
}
