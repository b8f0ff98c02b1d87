//! OpenFlow packet-ins per second, switch beside switch: a table-miss rule sends
//! every packet to the controller; the generator offers an evenly paced stream into
//! the switch; a controller of this program's own, connected to the switch's
//! management socket (OpenFlow 1.3, a miss_send_len set so that a service connection
//! gets packet-ins), counts the packet-ins that arrive while the stream runs.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use vsw_openflow::{next_message, Message, SwitchConfig, VersionSet};

const OFPT_PACKET_IN: u8 = 10;
const OFPT_ECHO_REQUEST: u8 = 2;

/// A counting controller on one connection; counts until dropped.
pub struct Counter {
    packet_ins: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Counter {
    /// Connects to `mgmt` and starts counting.
    pub fn connect(mgmt: &Path) -> anyhow::Result<Counter> {
        let mut c = UnixStream::connect(mgmt)?;
        c.set_read_timeout(Some(Duration::from_millis(100)))?;
        let hello = Message::Hello {
            versions: Some(VersionSet(1 << 4)),
        };
        c.write_all(&hello.encode(4, 1))?;
        let config = Message::SetConfig(SwitchConfig {
            flags: 0,
            miss_send_len: 0xffff,
        });
        c.write_all(&config.encode(4, 2))?;
        let packet_ins = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (n, s) = (packet_ins.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("packet-in-counter".into())
            .spawn(move || count(c, &n, &s))?;
        Ok(Counter {
            packet_ins,
            stop,
            thread: Some(thread),
        })
    }

    pub fn packet_ins(&self) -> u64 {
        self.packet_ins.load(Ordering::Relaxed)
    }
}

impl Drop for Counter {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn count(mut c: UnixStream, n: &AtomicU64, stop: &AtomicBool) {
    let mut buf = vec![0u8; 1 << 20];
    let mut have = 0;
    while !stop.load(Ordering::Relaxed) {
        match c.read(&mut buf[have..]) {
            Ok(0) => return,
            Ok(k) => have += k,
            Err(_) => continue,
        }
        let mut at = 0;
        while let Ok(Some((h, m))) = next_message(&buf[at..have]) {
            match h.kind {
                OFPT_PACKET_IN => {
                    n.fetch_add(1, Ordering::Relaxed);
                }
                OFPT_ECHO_REQUEST => {
                    let reply = Message::EchoReply(m[8..].to_vec()).encode(h.version, h.xid);
                    let _ = c.write_all(&reply);
                }
                _ => {}
            }
            at += m.len();
        }
        buf.copy_within(at..have, 0);
        have -= at;
    }
}

/// One measurement.
#[derive(Clone, Debug, serde::Serialize)]
pub struct PacketInRun {
    pub switch: String,
    /// What the generator really sent, per second.
    pub offered_pps: f64,
    /// Packet-ins the controller got, per second.
    pub packet_ins_per_s: f64,
}

/// The report: each round's rates and vsw's against Open vSwitch's.
pub fn report_markdown(runs: &[PacketInRun]) -> String {
    let mut o = String::from(
        "| round | switch | offered (pps) | packet-ins/s | share of offered | vsw / ovs |\n|---|---|---|---|---|---|\n",
    );
    for (i, pair) in runs.chunks(2).enumerate() {
        let ratio = match pair {
            [a, b] => {
                let (vsw, ovs) = if a.switch == "vsw" { (a, b) } else { (b, a) };
                format!("{:.3} ×", vsw.packet_ins_per_s / ovs.packet_ins_per_s)
            }
            _ => String::new(),
        };
        for r in pair {
            o.push_str(&format!(
                "| {} | {} | {:.0} | {:.0} | {:.1} % | {ratio} |\n",
                i + 1,
                r.switch,
                r.offered_pps,
                r.packet_ins_per_s,
                100.0 * r.packet_ins_per_s / r.offered_pps
            ));
        }
    }
    o
}
