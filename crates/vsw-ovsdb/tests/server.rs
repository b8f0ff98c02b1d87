//! The client against the real `ovsdb-server` (Debian's openvswitch-common) with the
//! stock Open_vSwitch schema, started privately in a temporary directory.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};
use vsw_ovsdb::datum::{string, uuids};
use vsw_ovsdb::{Client, Event, OvsdbError, Replica, Target};

const SCHEMA: &str = "/usr/share/openvswitch/vswitch.ovsschema";

/// A private ovsdb-server; stopped (by its pid) and its directory removed on drop.
struct Server {
    dir: PathBuf,
    pid: i32,
}

impl Server {
    fn start(name: &str) -> Server {
        let dir = std::env::temp_dir().join(format!("vsw-ovsdb-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let db = dir.join("conf.db");
        let ok = Command::new("ovsdb-tool")
            .args(["create", db.to_str().unwrap(), SCHEMA])
            .status()
            .expect("ovsdb-tool (openvswitch-common)");
        assert!(ok.success());
        // --detach returns once the server listens: no waiting by time.
        let ok = Command::new("ovsdb-server")
            .arg(&db)
            .arg(format!("--remote=punix:{}", dir.join("db.sock").display()))
            .arg(format!("--unixctl={}", dir.join("ovsdb.ctl").display()))
            .arg(format!("--pidfile={}", dir.join("ovsdb.pid").display()))
            .arg(format!("--log-file={}", dir.join("ovsdb.log").display()))
            .args(["--no-chdir", "--detach", "-vconsole:off"])
            .status()
            .expect("ovsdb-server (openvswitch-common)");
        assert!(ok.success());
        let pid = std::fs::read_to_string(dir.join("ovsdb.pid"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        Server { dir, pid }
    }

    fn target(&self) -> Target {
        Target::Unix(self.dir.join("db.sock"))
    }

    fn vsctl(&self, args: &[&str]) -> String {
        let out = Command::new("ovs-vsctl")
            .arg(format!("--db=unix:{}", self.dir.join("db.sock").display()))
            .args(["--no-wait", "--timeout=10"])
            .args(args)
            .output()
            .expect("ovs-vsctl");
        assert!(
            out.status.success(),
            "ovs-vsctl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // SIGTERM to the server this test started, by its pid.
        let _ = Command::new("kill").arg(self.pid.to_string()).status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn next_update(c: &Client) -> Value {
    match c.events().recv_timeout(Duration::from_secs(10)) {
        Ok(Event::Update { updates, .. }) => updates,
        Ok(other) => panic!("expected an update, got {other:?}"),
        Err(e) => panic!("no update: {e}"),
    }
}

#[test]
fn monitor_follows_ovs_vsctl_and_transactions_write_back() {
    let s = Server::start("monitor");
    s.vsctl(&["init"]);
    let c = Client::connect(&s.target()).unwrap();
    c.echo().unwrap();
    let requests = json!({
        "Open_vSwitch": {"columns": ["bridges", "next_cfg", "cur_cfg"]},
        "Bridge": {"columns": ["name", "ports", "datapath_type"]},
        "Port": {"columns": ["name", "interfaces"]},
        "Interface": {"columns": ["name", "type", "ofport_request"]},
    });
    let initial = c.monitor("Open_vSwitch", json!("vswd"), requests).unwrap();
    let mut r = Replica::default();
    r.apply(&initial).unwrap();
    assert_eq!(r.rows("Open_vSwitch").count(), 1);
    assert_eq!(r.rows("Bridge").count(), 0);

    s.vsctl(&[
        "add-br",
        "br0",
        "--",
        "set",
        "bridge",
        "br0",
        "datapath_type=netdev",
    ]);
    // Changes arrive as updates; ovs-vsctl's transaction may come in more than one.
    while !r.rows("Bridge").any(|(_, b)| {
        string(&b["name"]) == Some("br0") && string(&b["datapath_type"]) == Some("netdev")
    }) {
        r.apply(&next_update(&c)).unwrap();
    }
    let (_, br) = r.rows("Bridge").next().unwrap();
    let port = uuids(&br["ports"]);
    assert_eq!(port.len(), 1, "add-br makes the bridge's own port");
    assert!(r.row("Port", &port[0]).is_some());

    // Writing back as ovs-vswitchd does: the interface's ofport, then cur_cfg.
    let (iface, _) = r.rows("Interface").next().unwrap();
    let iface = iface.to_string();
    c.transact(
        "Open_vSwitch",
        vec![json!({"op": "update", "table": "Interface",
                    "where": [["_uuid", "==", ["uuid", iface]]],
                    "row": {"ofport": 65534}})],
    )
    .unwrap();
    assert_eq!(
        s.vsctl(&["get", "Interface", "br0", "ofport"]).trim(),
        "65534"
    );

    // A transaction the schema refuses is an error that names it, and changes nothing.
    let e = c
        .transact(
            "Open_vSwitch",
            vec![json!({"op": "update", "table": "Interface",
                        "where": [["_uuid", "==", ["uuid", iface]]],
                        "row": {"no_such_column": 1}})],
        )
        .unwrap_err();
    assert!(matches!(e, OvsdbError::Transaction { .. }), "{e}");
    assert_eq!(
        s.vsctl(&["get", "Interface", "br0", "ofport"]).trim(),
        "65534"
    );
}

#[test]
fn one_client_holds_the_lock_and_the_next_gets_it_when_the_first_goes() {
    let s = Server::start("lock");
    let a = Client::connect(&s.target()).unwrap();
    let b = Client::connect(&s.target()).unwrap();
    assert!(a.lock("ovs_vswitchd").unwrap());
    assert!(!b.lock("ovs_vswitchd").unwrap());
    drop(a);
    match b.events().recv_timeout(Duration::from_secs(10)) {
        Ok(Event::Locked(id)) => assert_eq!(id, "ovs_vswitchd"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_server_that_goes_away_ends_calls_and_says_so() {
    let s = Server::start("gone");
    let c = Client::connect(&s.target()).unwrap();
    c.echo().unwrap();
    drop(s);
    match c.events().recv_timeout(Duration::from_secs(10)) {
        Ok(Event::Closed) => {}
        other => panic!("{other:?}"),
    }
    assert!(c.echo().is_err());
}
