//! An OpenFlow peer played by a test, through vsw-openflow's codec: a controller
//! vswd connects to, or a client of a management socket or `ptcp:` listener.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::time::{Duration, Instant};

use vsw_openflow::role::RoleMsg;
use vsw_openflow::{next_message, Message, Role, Version, VersionSet};

/// A byte stream a peer speaks over.
pub trait Conn: Read + Write + Send {}
impl<T: Read + Write + Send> Conn for T {}

/// One OpenFlow connection, from the test's side.
pub struct OfPeer {
    pub conn: Box<dyn Conn>,
    pending: Vec<u8>,
    xid: u32,
    version: Version,
}

impl OfPeer {
    /// Waits (15 s at most) for vswd to connect to `listener`, then says hello in
    /// `version`.
    pub fn accept(listener: &TcpListener, version: Version) -> OfPeer {
        listener.set_nonblocking(true).unwrap();
        let deadline = Instant::now() + Duration::from_secs(15);
        let conn = loop {
            match listener.accept() {
                Ok((c, _)) => break c,
                Err(_) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50))
                }
                Err(e) => panic!("vswd did not connect: {e}"),
            }
        };
        conn.set_nonblocking(false).unwrap();
        conn.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let mut c = OfPeer::over(Box::new(conn), version);
        c.greet();
        c
    }

    /// A peer over `conn` (whose reads should time out now and then, so that
    /// waiting for a message can end), not greeted yet.
    pub fn over(conn: Box<dyn Conn>, version: Version) -> OfPeer {
        OfPeer {
            conn,
            pending: Vec::new(),
            xid: 100,
            version,
        }
    }

    /// Says hello in its version and waits for vswd's.
    pub fn greet(&mut self) {
        self.send(Message::Hello {
            versions: Some(VersionSet(1 << self.version.wire())),
        });
        let hello = self.next(|m| matches!(m, Message::Hello { .. }));
        assert!(hello.is_some(), "no hello from vswd");
    }

    pub fn send(&mut self, m: Message) -> u32 {
        self.xid += 1;
        self.conn
            .write_all(&m.encode(self.version.wire(), self.xid))
            .unwrap();
        self.xid
    }

    /// The next message `want` picks within 10 s (echo requests answered, others
    /// passed over).
    pub fn next(&mut self, want: impl Fn(&Message) -> bool) -> Option<(u32, Message)> {
        self.next_within(Duration::from_secs(10), want)
    }

    pub fn next_within(
        &mut self,
        wait: Duration,
        want: impl Fn(&Message) -> bool,
    ) -> Option<(u32, Message)> {
        let deadline = Instant::now() + wait;
        let mut buf = [0u8; 65536];
        while Instant::now() < deadline {
            while let Ok(Some((h, whole))) = next_message(&self.pending) {
                let len = whole.len();
                let m = Message::decode(self.version, whole);
                self.pending.drain(..len);
                match m {
                    Ok(Message::EchoRequest(d)) => {
                        let reply = Message::EchoReply(d).encode(self.version.wire(), h.xid);
                        self.conn.write_all(&reply).unwrap();
                    }
                    Ok(m) if want(&m) => return Some((h.xid, m)),
                    _ => {}
                }
            }
            match self.conn.read(&mut buf) {
                Ok(0) => return None,
                Ok(n) => self.pending.extend_from_slice(&buf[..n]),
                Err(_) => {}
            }
        }
        None
    }

    /// The next message of type `kind` within `wait`, as it came (header
    /// included): for replies the codec reads in parts (multipart replies).
    pub fn next_raw_within(&mut self, wait: Duration, kind: u8) -> Option<Vec<u8>> {
        let deadline = Instant::now() + wait;
        let mut buf = [0u8; 65536];
        while Instant::now() < deadline {
            while let Ok(Some((h, whole))) = next_message(&self.pending) {
                let m = whole.to_vec();
                self.pending.drain(..m.len());
                if h.kind == kind {
                    return Some(m);
                }
            }
            match self.conn.read(&mut buf) {
                Ok(0) => return None,
                Ok(n) => self.pending.extend_from_slice(&buf[..n]),
                Err(_) => {}
            }
        }
        None
    }

    /// Asks for a role; the reply or the error's (type, code).
    pub fn role(&mut self, role: Option<Role>, generation_id: u64) -> Result<Role, (u16, u16)> {
        let xid = self.send(Message::RoleRequest(RoleMsg {
            role,
            generation_id,
        }));
        match self.next(|m| matches!(m, Message::RoleReply(_) | Message::Error(_))) {
            Some((x, Message::RoleReply(r))) if x == xid => Ok(r.role.expect("a role")),
            Some((x, Message::Error(e))) if x == xid => Err((e.kind, e.code)),
            other => panic!("no answer to the role request: {other:?}"),
        }
    }
}

/// Runs `ovs-ofctl [OPTIONS] COMMAND unix:<d's br0.mgmt> ARGS…` (the target after the
/// command, as ovs-ofctl wants it; `-O` takes a value); its output, whatever its
/// status.
pub fn ovs_ofctl(d: &crate::Vswd, args: &[&str]) -> std::process::Output {
    let target = format!("unix:{}", d.dir.join("br0.mgmt").display());
    let mut cmd = 0;
    while cmd < args.len() && args[cmd].starts_with('-') {
        cmd += if args[cmd] == "-O" { 2 } else { 1 };
    }
    let (head, tail) = args.split_at((cmd + 1).min(args.len()));
    std::process::Command::new("ovs-ofctl")
        .args(["-t", "10"])
        .args(head)
        .arg(&target)
        .args(tail)
        .output()
        .expect("ovs-ofctl (openvswitch-common)")
}

/// How `ovs-ofctl -O VERSION parse-flow` prints `flow`, as a dump prints it.
pub fn ovs_prints(version: &str, flow: &str) -> String {
    let parsed = std::process::Command::new("ovs-ofctl")
        .args(["-O", version, "parse-flow", flow])
        .output()
        .expect("ovs-ofctl parse-flow");
    let parsed = String::from_utf8_lossy(&parsed.stdout).into_owned();
    let flow = parsed
        .lines()
        .last()
        .and_then(|l| l.split_once(" ADD "))
        .map(|(_, flow)| flow.trim().to_string())
        .unwrap_or_else(|| panic!("parse-flow printed {parsed}"));
    // parse-flow says `table:1 …` where a dump says `table=1, …`.
    match flow.strip_prefix("table:").and_then(|r| r.split_once(' ')) {
        Some((t, rest)) => format!("table={t}, {rest}"),
        None => flow,
    }
}

/// `flow` is in `dump` exactly as Open vSwitch prints it (`what` says which).
pub fn assert_dumped_as_ovs_prints(dump: &str, version: &str, flow: &str, what: &str) {
    let want = ovs_prints(version, flow);
    assert!(
        dump.lines().any(|l| l.trim() == want),
        "{what}: {want} not in\n{dump}"
    );
}
