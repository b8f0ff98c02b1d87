//! OpenFlow peers that misbehave — a burst of 10,000 flow-mods, malformed
//! messages, a controller that goes away mid-message — get error replies or a
//! closed connection; vswd neither crashes nor stops forwarding.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use vsw_e2e::{serial, wait_until, Vswd};
use vsw_openflow::flow_mod::{Action, Command, FlowMod, Instruction};
use vsw_openflow::oxm::{OxmField, OxmMatch};
use vsw_openflow::{next_message, Message, Version, VersionSet};

/// A connection to the management socket that has said hello in 1.3.
fn connect(d: &Vswd) -> UnixStream {
    let mut c = UnixStream::connect(d.dir.join("br0.mgmt")).expect("the management socket");
    c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let hello = Message::Hello {
        versions: Some(VersionSet(1 << 4)),
    };
    c.write_all(&hello.encode(4, 1)).unwrap();
    c
}

/// Reads messages until one of type `kind` with `xid`; returns it and whatever
/// else came first.
fn read_until(c: &mut UnixStream, kind: u8, xid: u32) -> (Message, Vec<Message>) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 65536];
    let mut before = Vec::new();
    loop {
        while let Ok(Some((h, m))) = next_message(&buf) {
            let len = m.len();
            let msg = Message::decode(Version::V1_3, m).expect("vswd's messages decode");
            buf.drain(..len);
            if h.kind == kind && h.xid == xid {
                return (msg, before);
            }
            before.push(msg);
        }
        let n = c.read(&mut chunk).expect("vswd answers within 30 s");
        assert!(n > 0, "vswd closed the connection");
        buf.extend_from_slice(&chunk[..n]);
    }
}

fn add(i: u32) -> FlowMod {
    // OXM basic fields: ETH_TYPE (5), IPV4_DST (12).
    let matcher = OxmMatch {
        fields: vec![
            OxmField {
                field: 5,
                value: vec![0x08, 0x00],
                mask: None,
            },
            OxmField {
                field: 12,
                value: (0x0a00_0000 | i).to_be_bytes().to_vec(),
                mask: None,
            },
        ],
    };
    FlowMod {
        cookie: u64::from(i),
        priority: 10,
        instructions: vec![Instruction::ApplyActions(vec![Action::Output {
            port: 3,
            max_len: 0,
        }])],
        ..FlowMod::new(Command::Add, matcher)
    }
}

#[test]
fn ten_thousand_flow_mods_in_a_burst_land_and_forwarding_goes_on() {
    let _g = serial();
    let d = Vswd::start();
    d.ctl_ok(&["add-port", "gen", "type=ring", "ring-flows=4"]);
    d.ctl_ok(&["add-port", "sink", "type=ring"]);
    d.ctl_ok(&["add-flow", "priority=100,in_port=1,actions=output:2"]);
    wait_until("traffic", Duration::from_secs(10), || {
        d.port("sink").stats.tx_packets > 1000
    });
    let mut c = connect(&d);
    let mut burst = Vec::new();
    for i in 0..10_000u32 {
        burst.extend(Message::FlowMod(add(i)).encode(4, 100 + i));
    }
    burst.extend(Message::BarrierRequest.encode(4, 99));
    let started = Instant::now();
    // Written from a thread: vswd reads as it goes; this thread reads the answers.
    let mut writer = c.try_clone().unwrap();
    let sending = std::thread::spawn(move || writer.write_all(&burst));
    let (_, before) = read_until(&mut c, 21, 99);
    sending.join().unwrap().unwrap();
    let took = started.elapsed();
    assert!(
        !before.iter().any(|m| matches!(m, Message::Error(_))),
        "an error for a good flow-mod"
    );
    // With the learning switch's rule and the one forwarding the generator's.
    assert_eq!(d.all_flows().len(), 10_002, "every flow, after the barrier");
    eprintln!("10,000 flow-mods and a barrier: {took:?}");
    // Forwarding went on through it all.
    let sent = d.port("sink").stats.tx_packets;
    wait_until("forwarding to go on", Duration::from_secs(10), || {
        d.port("sink").stats.tx_packets > sent + 1000
    });
}

#[test]
fn malformed_openflow_is_refused_and_changes_nothing() {
    let _g = serial();
    let d = Vswd::start();
    d.ctl_ok(&["add-port", "gen", "type=ring", "ring-flows=4"]);
    d.ctl_ok(&["add-port", "sink", "type=ring"]);
    d.ctl_ok(&["add-flow", "priority=100,in_port=1,actions=output:2"]);
    let flows = d.all_flows().len();

    // An unknown type and a known one cut short: errors with their xids.
    let mut c = connect(&d);
    c.write_all(&[4, 200, 0, 8, 0, 0, 0, 7]).unwrap();
    let (m, _) = read_until(&mut c, 1, 7);
    assert!(
        matches!(m, Message::Error(ref e) if (e.kind, e.code) == (1, 1)),
        "{m:?}"
    );
    let mut fm = Message::FlowMod(add(1)).encode(4, 8);
    fm.truncate(fm.len() - 8);
    let len = fm.len() as u16;
    fm[2..4].copy_from_slice(&len.to_be_bytes());
    c.write_all(&fm).unwrap();
    let (m, _) = read_until(&mut c, 1, 8);
    assert!(matches!(m, Message::Error(_)), "{m:?}");
    // A multipart request as long as a message can be, of garbage: refused.
    let mut huge = vec![4u8, 18, 0xff, 0xff, 0, 0, 0, 9, 0, 1, 0, 0, 0, 0, 0, 0];
    huge.resize(65535, 0xee);
    c.write_all(&huge).unwrap();
    let (m, _) = read_until(&mut c, 1, 9);
    assert!(matches!(m, Message::Error(_)), "{m:?}");

    // A flow-mod naming a buffered packet (vsw keeps none), and a set-field of an
    // IPv6 address in a flow that matches IPv4: each refused with its own error,
    // nothing installed.
    let mut buffered = add(3);
    buffered.buffer_id = 42;
    c.write_all(&Message::FlowMod(buffered).encode(4, 11))
        .unwrap();
    let (m, _) = read_until(&mut c, 1, 11);
    assert!(
        matches!(m, Message::Error(ref e) if (e.kind, e.code) == (1, 8)),
        "{m:?}"
    );
    let mut inconsistent = add(4);
    inconsistent.instructions = vec![Instruction::ApplyActions(vec![Action::SetField(
        OxmField {
            field: 26,
            value: vec![0xfe; 16],
            mask: None,
        },
    )])];
    c.write_all(&Message::FlowMod(inconsistent).encode(4, 12))
        .unwrap();
    let (m, _) = read_until(&mut c, 1, 12);
    assert!(
        matches!(m, Message::Error(ref e) if (e.kind, e.code) == (2, 10)),
        "{m:?}"
    );

    // A length shorter than a header: the connection is closed.
    let mut c = connect(&d);
    c.write_all(&[4, 14, 0, 4, 0, 0, 0, 1]).unwrap();
    let mut rest = Vec::new();
    let _ = c.read_to_end(&mut rest);

    // A controller that goes away halfway through a message.
    let mut c = connect(&d);
    let fm = Message::FlowMod(add(2)).encode(4, 10);
    c.write_all(&fm[..fm.len() / 2]).unwrap();
    drop(c);
    // Some bytes, then nothing: not even a hello.
    let mut c = UnixStream::connect(d.dir.join("br0.mgmt")).unwrap();
    c.write_all(&[4, 0]).unwrap();
    drop(c);

    // Nothing changed, and vswd still answers and forwards.
    assert_eq!(d.all_flows().len(), flows);
    let sent = d.port("sink").stats.tx_packets;
    wait_until("forwarding to go on", Duration::from_secs(10), || {
        d.port("sink").stats.tx_packets > sent + 1000
    });
}
