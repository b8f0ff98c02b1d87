//! The switch's port life cycle without root: ports of the in-memory class
//! (`vsw_netdev::class::memory`, Linux interfaces played in memory), `ring` ports and
//! `vhostuser` ports in a private directory, driven through `Switch::handle` as vswctl
//! drives it. Each test uses its own interface names: the in-memory interfaces are
//! shared by the tests of this process.

use std::path::{Path, PathBuf};

use vsw_netdev::class::{memory, PortClasses};
use vsw_netdev::tunnel::TunnelWorld;
use vsw_protocol::{PortInfo, Request, ShowInfo};
use vswd::switch::{Join, Switch};

/// A private directory for one test's state file and sockets, removed at the end.
struct TestDir(PathBuf);

impl TestDir {
    fn new(test: &str) -> TestDir {
        let dir = std::env::temp_dir().join(format!("vswd-switch-{}-{test}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TestDir(dir)
    }

    fn state(&self) -> PathBuf {
        self.0.join("state.json")
    }

    fn socket(&self) -> String {
        self.0.join("vswd.sock").display().to_string()
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn start(dir: &TestDir) -> Switch {
    let mut sw = Switch::start_with(
        &dir.state(),
        &dir.socket(),
        PortClasses::standard().with(&memory::CLASS),
    )
    .unwrap();
    // The PMD sleeps when idle: tests running at once share two cores.
    sw.handle(Request::Set {
        options: words(&["pmd-sleep-max=1000"]),
    })
    .unwrap();
    sw
}

fn words(w: &[&str]) -> Vec<String> {
    w.iter().map(|s| s.to_string()).collect()
}

fn add_port(sw: &mut Switch, name: &str, options: &[&str]) -> Result<u32, String> {
    sw.handle(Request::AddPort {
        name: name.into(),
        options: words(options),
    })
    .map(|v| v["no"].as_u64().unwrap() as u32)
    .map_err(|e| e.to_string())
}

fn set_port(sw: &mut Switch, name: &str, options: &[&str]) -> Result<(), String> {
    sw.handle(Request::SetPort {
        name: name.into(),
        options: words(options),
    })
    .map(drop)
    .map_err(|e| e.to_string())
}

fn show(sw: &mut Switch) -> ShowInfo {
    serde_json::from_value(sw.handle(Request::Show).unwrap()).unwrap()
}

fn port(sw: &mut Switch, name: &str) -> PortInfo {
    show(sw)
        .ports
        .into_iter()
        .find(|p| p.name == name)
        .unwrap_or_else(|| panic!("no port {name}"))
}

fn option(p: &PortInfo, key: &str) -> Option<String> {
    p.options
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.clone())
}

fn saved(dir: &TestDir) -> String {
    std::fs::read_to_string(dir.state()).unwrap_or_default()
}

#[test]
fn ports_are_added_changed_and_deleted() {
    let dir = TestDir::new("life");
    memory::create("mlife0");
    let mut sw = start(&dir);
    let no = add_port(&mut sw, "mlife0", &["type=memory", "ofport_request=7"]).unwrap();
    assert_eq!(no, 7);
    let p = port(&mut sw, "mlife0");
    assert_eq!(p.status, "up");
    assert!(memory::is_open("mlife0"));
    assert_eq!(memory::opens("mlife0"), 1);
    // The class's default is written out with the port.
    assert_eq!(option(&p, "memory-flows").as_deref(), Some("0"));
    assert!(saved(&dir).contains("memory-flows"));

    // Refusals change nothing and name the problem.
    let before = (show(&mut sw), saved(&dir));
    for (name, options, needle) in [
        ("mlife0", &["type=memory"][..], "already exists"),
        (
            "mlife-none",
            &["type=memory"][..],
            "no network interface named 'mlife-none'",
        ),
        (
            "mlife1",
            &["type=memory", "ofport_request=7"][..],
            "port number 7 is taken",
        ),
        (
            "mlife1",
            &["type=memory", "afpacket-mode=mmsg"][..],
            "applies to afpacket ports",
        ),
        (
            "mlife1",
            &["type=ring", "mtu_request=1400"][..],
            "mtu_request applies to",
        ),
        ("mlife1", &["type=floppy"][..], "port types are afpacket"),
    ] {
        let e = add_port(&mut sw, name, options).unwrap_err();
        assert!(e.contains(needle), "{name} {options:?}: {e}");
    }
    for (options, needle) in [
        (&["type=ring"][..], "type is fixed"),
        (&["ofport_request=8"][..], "ofport_request is fixed"),
        (&["memory-flows=many"][..], "memory-flows"),
        (&["pmd-rxq-affinity=1:0"][..], "queue"),
    ] {
        let e = set_port(&mut sw, "mlife0", options).unwrap_err();
        assert!(e.contains(needle), "{options:?}: {e}");
    }
    assert_eq!((show(&mut sw), saved(&dir)), before);
    assert_eq!(
        memory::opens("mlife0"),
        1,
        "a refused change reopens nothing"
    );

    // A class option that needs the device anew reopens it; a common one does not.
    set_port(&mut sw, "mlife0", &["memory-flows=4"]).unwrap();
    assert_eq!(memory::opens("mlife0"), 2);
    set_port(&mut sw, "mlife0", &["tx-flush-interval=50"]).unwrap();
    assert_eq!(memory::opens("mlife0"), 2);
    let p = port(&mut sw, "mlife0");
    assert_eq!((p.status.as_str(), p.tx_flush_interval_us), ("up", 50));
    assert!(
        saved(&dir).contains("\"memory-flows\": \"4\""),
        "{}",
        saved(&dir)
    );

    sw.handle(Request::DelPort {
        name: "mlife0".into(),
    })
    .unwrap();
    assert!(!memory::is_open("mlife0"));
    assert!(show(&mut sw).ports.is_empty());
    assert!(!saved(&dir).contains("mlife0"));
    sw.shutdown(true);
    memory::remove("mlife0");
}

#[test]
fn a_port_follows_its_interface_away_and_back() {
    let dir = TestDir::new("reattach");
    memory::create("mback0");
    let mut sw = start(&dir);
    add_port(&mut sw, "mback0", &["type=memory", "pmd-rxq-affinity=0:0"]).unwrap();
    sw.check_links();
    assert_eq!(
        memory::opens("mback0"),
        1,
        "an interface that stays is left alone"
    );

    memory::remove("mback0");
    sw.check_links();
    let p = port(&mut sw, "mback0");
    assert_eq!(p.status, "down: interface disappeared");
    assert!(!memory::is_open("mback0"));

    // Back (a new interface of that name, another index): opened again as configured.
    memory::create("mback0");
    sw.check_links();
    assert_eq!(port(&mut sw, "mback0").status, "up");
    assert!(memory::is_open("mback0"));
    let rxqs = serde_json::to_string(&sw.handle(Request::PmdRxqShow).unwrap()).unwrap();
    assert!(rxqs.contains("mback0"), "{rxqs}");

    // Removed and made again between two looks: a new index is a new interface.
    memory::remove("mback0");
    memory::create("mback0");
    let opens = memory::opens("mback0");
    sw.check_links();
    assert_eq!(port(&mut sw, "mback0").status, "up");
    assert_eq!(memory::opens("mback0"), opens + 1);
    sw.shutdown(true);
    assert!(!memory::is_open("mback0"), "shutdown closes every device");
    memory::remove("mback0");
}

#[test]
fn the_mtu_is_given_while_the_device_is_closed_and_kept_when_refused() {
    let dir = TestDir::new("mtu");
    memory::create("mmtu0");
    memory::create("mmtu1");
    let mut sw = start(&dir);
    add_port(&mut sw, "mmtu0", &["type=memory", "mtu_request=9000"]).unwrap();
    assert_eq!(memory::mtu("mmtu0"), Some(9000));
    assert_eq!(port(&mut sw, "mmtu0").mtu, Some(9000));

    // A new MTU: closed, changed, opened again (the in-memory interface refuses an
    // MTU change while open, as a device's rings would not fit).
    set_port(&mut sw, "mmtu0", &["mtu_request=1400"]).unwrap();
    assert_eq!(memory::mtu("mmtu0"), Some(1400));
    assert_eq!(memory::opens("mmtu0"), 2);
    assert_eq!(port(&mut sw, "mmtu0").status, "up");

    // Refused by the interface: the port is up again as it was, and says why.
    memory::set_max_mtu("mmtu0", 2000);
    let e = set_port(&mut sw, "mmtu0", &["mtu_request=4000"]).unwrap_err();
    assert!(e.contains("cannot set the MTU of mmtu0 to 4000"), "{e}");
    let p = port(&mut sw, "mmtu0");
    assert_eq!((p.status.as_str(), p.mtu), ("up", Some(1400)));
    assert_eq!(option(&p, "mtu_request").as_deref(), Some("1400"));
    assert!(memory::is_open("mmtu0"));

    // A port that cannot be added gives its interface the MTU back.
    memory::refuse_open("mmtu1", true);
    let e = add_port(&mut sw, "mmtu1", &["type=memory", "mtu_request=3000"]).unwrap_err();
    assert!(e.contains("Device or resource busy"), "{e}");
    assert_eq!(memory::mtu("mmtu1"), Some(1500));
    assert!(!memory::is_open("mmtu1"));
    assert!(!saved(&dir).contains("mmtu1"));

    // At restore, an MTU the interface refuses leaves the port up, with the reason.
    sw.shutdown(true);
    drop(sw);
    memory::remove("mmtu0");
    memory::create("mmtu0");
    memory::set_max_mtu("mmtu0", 1000);
    let mut sw = start(&dir);
    let p = port(&mut sw, "mmtu0");
    assert_eq!(p.status, "up");
    assert_eq!(p.mtu, Some(1500), "the interface's own");
    let problem = p.mtu_problem.unwrap_or_default();
    assert!(
        problem.contains("cannot set the MTU of mmtu0 to 1400"),
        "{problem}"
    );
    sw.shutdown(true);
    memory::remove("mmtu0");
    memory::remove("mmtu1");
}

#[test]
fn a_guest_port_mtu_changes_live() {
    let dir = TestDir::new("guestmtu");
    let mut sw = start(&dir);
    add_port(&mut sw, "vm0", &["type=vhostuser", "mtu_request=2000"]).unwrap();
    let p = port(&mut sw, "vm0");
    assert_eq!(p.mtu, Some(2000));
    let path = p.vhost_server_path.unwrap();
    assert_eq!(Path::new(&path), dir.0.join("vm0.sock"));
    set_port(&mut sw, "vm0", &["mtu_request=3000"]).unwrap();
    assert_eq!(port(&mut sw, "vm0").mtu, Some(3000));
    // The socket is the guest's: fixed while the port lives, and no other port's.
    let e = set_port(&mut sw, "vm0", &["vhost-sock-mode=0660"]).unwrap_err();
    assert!(e.contains("vhost-sock-mode is fixed"), "{e}");
    let e = add_port(
        &mut sw,
        "vm1",
        &["type=vhostuserclient", &format!("vhost-server-path={path}")],
    )
    .unwrap_err();
    assert!(e.contains("port vm0 uses it"), "{e}");
    let e = add_port(
        &mut sw,
        "vm1",
        &[
            "type=vhostuser",
            &format!("vhost-server-path={}", dir.socket()),
        ],
    )
    .unwrap_err();
    assert!(e.contains("control socket"), "{e}");
    sw.shutdown(true);
}

#[test]
fn a_restart_restores_ports_numbers_options_and_flows() {
    let dir = TestDir::new("restore");
    memory::create("mrest0");
    memory::create("mrest1");
    let mut sw = start(&dir);
    add_port(&mut sw, "mrest0", &["type=memory", "memory-flows=2"]).unwrap();
    add_port(&mut sw, "mrest1", &["type=memory", "ofport_request=20"]).unwrap();
    add_port(&mut sw, "gen0", &["type=ring", "ring-flows=3"]).unwrap();
    sw.handle(Request::AddFlow {
        flow: "in_port=mrest0,actions=output:mrest1".into(),
    })
    .unwrap();
    let before = show(&mut sw);
    let flows = sw
        .handle(Request::DumpFlows {
            kind: None,
            table: None,
        })
        .unwrap();
    sw.shutdown(true);
    drop(sw);
    assert!(!memory::is_open("mrest0"));

    // One interface is gone while vswd is down: its port comes back down, then up.
    memory::remove("mrest1");
    let mut sw = start(&dir);
    let after = show(&mut sw);
    let summary = |s: &ShowInfo| -> Vec<String> {
        s.ports
            .iter()
            .map(|p| format!("{} {} {:?}", p.no, p.name, p.options))
            .collect()
    };
    assert_eq!(summary(&after), summary(&before));
    assert_eq!(after.flows, 2, "the flow and the learning switch's NORMAL");
    let again = sw
        .handle(Request::DumpFlows {
            kind: None,
            table: None,
        })
        .unwrap();
    assert_eq!(again[0]["flow"], flows[0]["flow"]);
    assert_eq!(port(&mut sw, "mrest0").status, "up");
    assert_eq!(port(&mut sw, "gen0").status, "up");
    assert_eq!(
        port(&mut sw, "mrest1").status,
        "down: interface does not exist"
    );
    memory::create("mrest1");
    sw.check_links();
    assert_eq!(port(&mut sw, "mrest1").status, "up");
    sw.shutdown(true);
    memory::remove("mrest0");
    memory::remove("mrest1");
}

fn add_flow(sw: &mut Switch, flow: &str) -> Result<(), String> {
    sw.handle(Request::AddFlow { flow: flow.into() })
        .map(drop)
        .map_err(|e| e.to_string())
}

#[test]
fn a_select_group_recirculates_and_trace_and_dump_flows_follow_it() {
    let dir = TestDir::new("select");
    let mut sw = start(&dir);
    add_port(&mut sw, "gen7", &["type=ring", "ring-flows=64"]).unwrap();
    add_port(&mut sw, "sinka", &["type=ring"]).unwrap();
    add_port(&mut sw, "sinkb", &["type=ring"]).unwrap();
    sw.handle(Request::AddGroup {
        group: "group_id=1,type=select,bucket=output:sinka,bucket=output:sinkb".into(),
    })
    .unwrap();
    add_flow(&mut sw, "priority=10,in_port=gen7,actions=group:1").unwrap();
    let trace = sw
        .handle(Request::Trace {
            flow: "in_port=gen7,udp,tp_src=5,tp_dst=9".into(),
        })
        .unwrap();
    let trace = trace.as_str().unwrap().to_string();
    for want in [
        "group:1 (select): bucket by the datapath's hash: recirc(0x",
        "Datapath actions: hash(l4(0)),recirc(0x",
        "=====",
        " - dp_hash 0x",
        "(select): dp_hash 0x",
        "Megaflow: in_port=1",
    ] {
        assert!(trace.contains(want), "no '{want}' in\n{trace}");
    }
    // The second pass sends it out of one of the two.
    let last = trace.lines().last().unwrap();
    assert!(
        last == "Datapath actions: 2" || last == "Datapath actions: 3",
        "{trace}"
    );
    // The generator's 64 flows: one first-pass flow, the second pass's by the
    // hash's low bits, both sinks used.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let flows: Vec<vsw_protocol::DpFlowInfo> =
            serde_json::from_value(sw.handle(Request::DumpDpFlows { kind: None }).unwrap())
                .unwrap();
        let first: Vec<_> = flows
            .iter()
            .filter(|f| !f.matching.starts_with("recirc_id("))
            .collect();
        let later: Vec<_> = flows
            .iter()
            .filter(|f| f.matching.starts_with("recirc_id("))
            .collect();
        let outs: std::collections::BTreeSet<&str> =
            later.iter().map(|f| f.actions.as_str()).collect();
        if first.len() == 1 && outs.len() == 2 {
            assert!(
                first[0].actions.starts_with("hash(l4(0)),recirc(0x"),
                "{flows:?}"
            );
            // Two equal buckets: one flow each, on the hash's top slot bit.
            assert_eq!(later.len(), 2, "{flows:?}");
            assert!(
                later.iter().all(|f| f.matching.contains(",dp_hash(0x")),
                "{flows:?}"
            );
            assert!(
                later.iter().all(|f| f.matching.contains("/0x80),")),
                "{flows:?}"
            );
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{flows:?}");
        std::thread::yield_now();
    }
    sw.shutdown(true);
}

#[test]
fn tables_trace_and_the_datapath_views() {
    let dir = TestDir::new("tables");
    let mut sw = start(&dir);
    add_port(&mut sw, "gen9", &["type=ring", "ring-flows=1"]).unwrap();
    add_port(&mut sw, "sink9", &["type=ring"]).unwrap();
    // A new switch: one rule, NORMAL, in table 0.
    let flows = sw
        .handle(Request::DumpFlows {
            kind: None,
            table: None,
        })
        .unwrap();
    assert_eq!(flows.as_array().unwrap().len(), 1);
    assert_eq!(flows[0]["flow"], "priority=0,actions=NORMAL");
    add_flow(
        &mut sw,
        "table=0,priority=10,in_port=gen9,actions=goto_table:2",
    )
    .unwrap();
    add_flow(&mut sw, "table=2,udp,actions=resubmit(,4),output:sink9").unwrap();
    add_flow(&mut sw, "table=4,udp,tp_dst=9,actions=mod_tp_dst:99").unwrap();
    let trace = sw
        .handle(Request::Trace {
            flow: "in_port=gen9,udp,tp_dst=9".into(),
        })
        .unwrap();
    let trace = trace.as_str().unwrap();
    for want in [
        " 0. priority=10,in_port=1,actions=goto_table:2",
        "     2. priority=32768,udp,actions=resubmit(,4),output:2",
        "         4. priority=32768,udp,tp_dst=9,actions=mod_tp_dst:99",
        "Final flow: udp,in_port=1,tp_dst=99",
        "Megaflow: udp,in_port=1,tp_dst=9",
        "Datapath actions: set(l4(dst=99)),2",
    ] {
        assert!(trace.contains(want), "no '{want}' in\n{trace}");
    }
    let dpif: vsw_protocol::DpifInfo =
        serde_json::from_value(sw.handle(Request::DpifShow).unwrap()).unwrap();
    assert_eq!(dpif.tables, vec![(0, 2), (2, 1), (4, 1)]);
    let table2 = sw
        .handle(Request::DumpFlows {
            kind: None,
            table: Some(2),
        })
        .unwrap();
    assert_eq!(table2.as_array().unwrap().len(), 1);
    assert_eq!(table2[0]["table"], 2);
    assert_eq!(dpif.flow_limit, 200_000);
    // The generator's frames go through the tables into one datapath flow.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut sw_flows = Vec::new();
    while sw_flows.is_empty() {
        assert!(std::time::Instant::now() < deadline, "no datapath flow");
        std::thread::yield_now();
        sw_flows = serde_json::from_value::<Vec<vsw_protocol::DpFlowInfo>>(
            sw.handle(Request::DumpDpFlows { kind: None }).unwrap(),
        )
        .unwrap();
    }
    assert_eq!(sw_flows[0].actions, "set(l4(dst=99)),2");
    assert!(sw_flows[0].matching.contains("in_port=1"), "{sw_flows:?}");
    // Bad input names the problem and changes nothing.
    let before = saved(&dir);
    let e = add_flow(&mut sw, "table=2,actions=goto_table:1").unwrap_err();
    assert!(e.contains("later table"), "{e}");
    let e = sw
        .handle(Request::Trace {
            flow: "in_port=nosuch".into(),
        })
        .unwrap_err()
        .to_string();
    assert!(e.contains("nosuch"), "{e}");
    let e = sw
        .handle(Request::DumpDpFlows {
            kind: Some("fast".into()),
        })
        .unwrap_err()
        .to_string();
    assert!(e.contains("fast"), "{e}");
    let e = sw
        .handle(Request::Set {
            options: words(&["flow-limit=-1"]),
        })
        .unwrap_err()
        .to_string();
    assert!(e.contains("flow-limit"), "{e}");
    assert_eq!(saved(&dir), before);
    sw.handle(Request::Set {
        options: words(&["flow-limit=10", "max-idle=1000", "revalidator-interval=100"]),
    })
    .unwrap();
    let dpif: vsw_protocol::DpifInfo =
        serde_json::from_value(sw.handle(Request::DpifShow).unwrap()).unwrap();
    assert_eq!(dpif.flow_limit, 10);
    sw.shutdown(true);
}

/// The flow texts, as dump-flows gives them.
fn flow_texts(sw: &mut Switch) -> Vec<String> {
    let v = sw
        .handle(Request::DumpFlows {
            kind: None,
            table: None,
        })
        .unwrap();
    let mut t: Vec<String> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["flow"].as_str().unwrap().to_string())
        .collect();
    t.sort();
    t
}

#[test]
fn rule_changes_go_to_the_journal_and_come_back_after_a_restart() {
    let dir = TestDir::new("journal");
    let mut sw = start(&dir);
    let journal = dir.0.join("state.json.journal");
    // Written whole (the option above), then rule changes are journal lines.
    assert!(dir.state().exists());
    add_flow(&mut sw, "priority=5,udp,actions=drop").unwrap();
    add_flow(&mut sw, "cookie=0x7,priority=6,tcp,actions=drop").unwrap();
    sw.handle(Request::ModFlows {
        flow: "tcp,actions=output:3".into(),
        strict: false,
        reset_counts: false,
    })
    .unwrap();
    sw.handle(Request::DelFlows {
        matching: Some("udp".into()),
        strict: false,
    })
    .unwrap();
    assert!(
        !saved(&dir).contains("tcp"),
        "the state file itself was not written for rule changes"
    );
    // A header, then one record a change.
    assert_eq!(
        std::fs::read_to_string(&journal).unwrap().lines().count(),
        1 + 4
    );
    let before = flow_texts(&mut sw);
    sw.shutdown(true);
    drop(sw);
    let mut sw = start(&dir);
    assert_eq!(flow_texts(&mut sw), before);
    // A change of something else writes the file whole and empties the journal;
    // the next restart gives the same rules from the file alone.
    sw.handle(Request::Set {
        options: words(&["pmd-sleep-max=500"]),
    })
    .unwrap();
    assert!(!journal.exists());
    assert!(saved(&dir).contains("cookie=0x7"));
    sw.shutdown(true);
    drop(sw);
    let mut sw = start(&dir);
    assert_eq!(flow_texts(&mut sw), before);
    sw.shutdown(true);
}

#[test]
fn ports_added_together_each_stand_or_fall_alone() {
    let dir = TestDir::new("batch");
    for n in ["mbat0", "mbat1", "mbat2", "mbat3"] {
        memory::create(n);
    }
    memory::refuse_open("mbat2", true);
    let mut sw = start(&dir);
    let list: Vec<(String, vswd::options::Options)> = [
        ("mbat0", &["type=memory", "ofport_request=3"][..]),
        ("mbat1", &["type=memory"][..]),
        // Its device refuses to open.
        ("mbat2", &["type=memory"][..]),
        // Asks for a number another of the same batch took.
        ("mbat3", &["type=memory", "ofport_request=3"][..]),
        ("mbat-none", &["type=memory"][..]),
        ("mbat1", &["type=memory"][..]),
    ]
    .iter()
    .map(|(n, o)| {
        (
            n.to_string(),
            vswd::options::parse_pairs(&words(o)).unwrap(),
        )
    })
    .collect();
    let results = sw.add_ports(&list);
    let no = |k: usize| results[k].as_ref().map(|v| v["no"].as_u64().unwrap());
    assert_eq!(no(0).unwrap(), 3);
    assert_eq!(no(1).unwrap(), 1, "the first free number");
    let failed = |k: usize| results[k].as_ref().unwrap_err().to_string();
    assert!(!failed(2).is_empty());
    assert!(
        failed(3).contains("port number 3 is taken"),
        "{}",
        failed(3)
    );
    assert!(failed(4).contains("no network interface"), "{}", failed(4));
    assert!(failed(5).contains("already exists"), "{}", failed(5));
    // Those added are up and saved; the refused ones left nothing behind.
    let names: Vec<String> = show(&mut sw).ports.into_iter().map(|p| p.name).collect();
    assert_eq!(names.len(), 2, "{names:?}");
    for n in ["mbat0", "mbat1"] {
        assert_eq!(port(&mut sw, n).status, "up");
        assert!(memory::is_open(n));
        assert!(saved(&dir).contains(n));
    }
    assert!(!memory::is_open("mbat2") && !saved(&dir).contains("mbat2"));
    // A restart finds the batch's ports as they were numbered.
    sw.shutdown(true);
    drop(sw);
    let mut sw = start(&dir);
    assert_eq!(port(&mut sw, "mbat0").no, 3);
    assert_eq!(port(&mut sw, "mbat1").no, 1);
    // Deleted together: each its own result.
    let results = sw.del_ports(&words(&["mbat0", "mbat-none", "mbat1", "mbat0"]));
    assert!(results[0].is_ok() && results[2].is_ok());
    for k in [1, 3] {
        let e = results[k].as_ref().unwrap_err().to_string();
        assert!(e.contains("no port named"), "{e}");
    }
    assert!(show(&mut sw).ports.is_empty());
    assert!(!memory::is_open("mbat0") && !memory::is_open("mbat1"));
    assert!(!saved(&dir).contains("mbat"), "{}", saved(&dir));
    sw.shutdown(true);
    for n in ["mbat0", "mbat1", "mbat2", "mbat3"] {
        memory::remove(n);
    }
}

fn set(sw: &mut Switch, options: &[&str]) {
    sw.handle(Request::Set {
        options: words(options),
    })
    .unwrap();
}

/// Open vSwitch's rule: a bridge is a learning switch by a rule of its own only
/// while it is standalone with no controller; the tables are flushed when
/// controllers come or all go, or the fail mode changes while there are none.
#[test]
fn only_a_standalone_bridge_without_controllers_is_a_learning_switch() {
    const NORMAL: &str = "priority=0,actions=NORMAL";
    let dir = TestDir::new("failmode");
    let mut sw = start(&dir);
    assert_eq!(flow_texts(&mut sw), [NORMAL], "a new standalone bridge");
    add_flow(&mut sw, "priority=5,udp,actions=drop").unwrap();
    // Secure with no controller: flushed, and nothing forwards by NORMAL.
    set(&mut sw, &["fail-mode=secure"]);
    assert!(flow_texts(&mut sw).is_empty(), "{:?}", flow_texts(&mut sw));
    add_flow(&mut sw, "priority=5,udp,actions=drop").unwrap();
    // A controller vsw cannot reach still is one: flushed once more, no NORMAL back
    // when the bridge goes standalone beside it.
    set(&mut sw, &["controller=ssl:198.18.0.1:6653"]);
    assert!(flow_texts(&mut sw).is_empty());
    add_flow(&mut sw, "priority=7,tcp,actions=drop").unwrap();
    set(&mut sw, &["fail-mode=standalone"]);
    assert_eq!(
        flow_texts(&mut sw),
        ["priority=7,tcp,actions=drop"],
        "a fail mode change with controllers flushes nothing"
    );
    // The controllers go: flushed, and standalone makes it a learning switch.
    set(&mut sw, &["controller="]);
    assert_eq!(flow_texts(&mut sw), [NORMAL]);
    // Saved as it is: a restart brings back what the tables held.
    set(&mut sw, &["fail-mode=secure"]);
    sw.shutdown(true);
    drop(sw);
    let mut sw = start(&dir);
    assert!(flow_texts(&mut sw).is_empty());
    sw.shutdown(true);
    // A bridge the database starts secure has no rule from its first moment.
    let other = TestDir::new("failmode-unsaved");
    let born: vswd::options::Options = [("fail-mode".to_string(), "secure".to_string())]
        .into_iter()
        .collect();
    let mut sw = Switch::start_unsaved(
        &other.socket(),
        PortClasses::standard().with(&memory::CLASS),
        "br-int",
        &born,
        Join::NewDatapath(TunnelWorld::new()),
    )
    .unwrap();
    assert!(flow_texts(&mut sw).is_empty());
    sw.shutdown(false);
}

/// A rule or group too large to describe in one OpenFlow message is refused (no
/// controller could read it back, and a dump would break on it).
#[test]
fn a_rule_or_group_openflow_cannot_carry_is_refused() {
    let dir = TestDir::new("toolarge");
    let mut sw = start(&dir);
    // 5,000 outputs: 80,000 bytes of OpenFlow actions.
    let outputs: Vec<String> = (1..=5000)
        .map(|p| format!("output:{}", p % 60 + 1))
        .collect();
    let big = format!("priority=9,udp,actions={}", outputs.join(","));
    let err = add_flow(&mut sw, &big).unwrap_err();
    assert!(err.contains("too large"), "{err}");
    // Through a modify too, and a group of as many buckets.
    add_flow(&mut sw, "priority=9,tcp,actions=drop").unwrap();
    let err = sw
        .handle(Request::ModFlows {
            flow: format!("tcp,actions={}", outputs.join(",")),
            strict: false,
            reset_counts: false,
        })
        .unwrap_err();
    assert!(err.to_string().contains("too large"), "{err}");
    // (64 buckets at most, of 100 outputs each: 102,400 bytes.)
    let hundred = outputs[..100].join(",");
    let buckets: Vec<String> = (1..=64).map(|_| format!("bucket={hundred}")).collect();
    let err = sw
        .handle(Request::AddGroup {
            group: format!("group_id=1,type=all,{}", buckets.join(",")),
        })
        .unwrap_err();
    assert!(err.to_string().contains("too large"), "{err}");
    assert!(flow_texts(&mut sw).contains(&"priority=9,tcp,actions=drop".to_string()));
    // A large one that fits is taken.
    let fits: Vec<String> = (1..=1000)
        .map(|p| format!("output:{}", p % 60 + 1))
        .collect();
    add_flow(
        &mut sw,
        &format!("priority=9,udp,actions={}", fits.join(",")),
    )
    .unwrap();
    sw.shutdown(true);
}

/// A journal left beside a state file deleted to start afresh is not replayed onto
/// the new switch (it extends another file); it is kept aside.
#[test]
fn a_journal_of_a_deleted_state_file_is_not_replayed() {
    let dir = TestDir::new("stalejournal");
    let mut sw = start(&dir);
    add_flow(&mut sw, "priority=5,udp,actions=drop").unwrap();
    sw.handle(Request::DelFlows {
        matching: None,
        strict: false,
    })
    .unwrap();
    sw.shutdown(true);
    drop(sw);
    let journal = dir.0.join("state.json.journal");
    assert!(journal.exists());
    std::fs::remove_file(dir.state()).unwrap();
    let mut sw = start(&dir);
    assert_eq!(
        flow_texts(&mut sw),
        ["priority=0,actions=NORMAL"],
        "an earlier run's del-flows came back"
    );
    assert!(dir.0.join("state.json.journal.stale").exists());
    sw.shutdown(true);
}

/// The journal stays within a constant factor of the state file however large each
/// change is (each mod-flows of 2,000 rules is a ~250 KB record); changes that
/// change nothing write nothing.
#[test]
fn the_journal_is_bounded_by_bytes_and_no_op_changes_write_nothing() {
    let dir = TestDir::new("journalbytes");
    let mut sw = start(&dir);
    let flows: Vec<String> = (1..=2000)
        .map(|i| format!("priority=5,udp,tp_dst={i},actions=drop"))
        .collect();
    sw.handle(Request::AddFlows { flows }).unwrap();
    let journal = dir.0.join("state.json.journal");
    let size = |p: &Path| std::fs::metadata(p).map_or(0, |m| m.len());
    let mut largest = 0;
    for round in 0..40 {
        let port = round % 2 + 1;
        sw.handle(Request::ModFlows {
            flow: format!("udp,actions=output:{port}"),
            strict: false,
            reset_counts: false,
        })
        .unwrap();
        largest = largest.max(size(&journal));
    }
    let state = size(&dir.state());
    assert!(
        largest <= (1 << 20).max(2 * state) + 300_000,
        "the journal grew to {largest} bytes beside a state file of {state}"
    );
    // Nothing to change: nothing written.
    let (j, s) = (
        std::fs::read(&journal).ok(),
        std::fs::read(dir.state()).unwrap(),
    );
    sw.handle(Request::DelFlows {
        matching: Some("priority=9,tcp".into()),
        strict: true,
    })
    .unwrap();
    sw.handle(Request::Set {
        options: words(&["pmd-sleep-max=1000"]),
    })
    .unwrap();
    assert_eq!(std::fs::read(&journal).ok(), j, "the journal was written");
    assert_eq!(
        std::fs::read(dir.state()).unwrap(),
        s,
        "the state file was written"
    );
    sw.shutdown(true);
}

/// Waits (yielding, at most 10 s) until `f` holds.
fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !f() {
        assert!(std::time::Instant::now() < deadline, "never: {what}");
        std::thread::yield_now();
    }
}

/// Bridges `a` and `b` (idle PMDs sleep), `b` joining `a`'s datapath; their
/// directories with them (dropped after the switches).
fn two_bridges(a: &str, b: &str) -> (Switch, Switch, [TestDir; 2]) {
    let dirs = [TestDir::new(a), TestDir::new(b)];
    let classes = || PortClasses::standard().with(&memory::CLASS);
    let opts = vswd::options::Options::from([("pmd-sleep-max".to_string(), "1000".to_string())]);
    let sa = Switch::start_unsaved(
        &dirs[0].socket(),
        classes(),
        a,
        &opts,
        Join::NewDatapath(TunnelWorld::new()),
    )
    .unwrap();
    let sb = Switch::start_unsaved(
        &dirs[1].socket(),
        classes(),
        b,
        &opts,
        Join::Datapath(sa.dpif()),
    )
    .unwrap();
    (sa, sb, dirs)
}

#[test]
fn two_bridges_share_one_datapath_each_with_its_own_port_numbers() {
    let (mut a, mut b, _dirs) = two_bridges("bra", "brb");
    // Both bridges number their ports 1 and 2; the datapath numbers them apart.
    for (sw, gen, sink) in [(&mut a, "gena", "sinka"), (&mut b, "genb", "sinkb")] {
        assert_eq!(
            add_port(sw, gen, &["type=ring", "ring-flows=1"]).unwrap(),
            1
        );
        assert_eq!(add_port(sw, sink, &["type=ring"]).unwrap(), 2);
        add_flow(sw, "priority=10,in_port=1,actions=output:2").unwrap();
    }
    assert_eq!(a.dpif().dp().pmd_cores().len(), 1, "one set of PMDs");
    assert_eq!(a.dpif().dp().ports().len(), 4);
    let tx = |sw: &mut Switch, name: &str| port(sw, name).stats.tx_packets;
    eventually("each bridge forwards its own", || {
        tx(&mut a, "sinka") > 100 && tx(&mut b, "sinkb") > 100
    });
    // Each bridge sees its own datapath flow, in its own numbers.
    for sw in [&mut a, &mut b] {
        let flows: Vec<vsw_protocol::DpFlowInfo> =
            serde_json::from_value(sw.handle(Request::DumpDpFlows { kind: None }).unwrap())
                .unwrap();
        assert_eq!(flows.len(), 1, "{flows:?}");
        assert!(flows[0].matching.contains("in_port=1"), "{flows:?}");
        assert_eq!(flows[0].actions, "2");
    }
    // A rule change in one bridge changes nothing in the other.
    add_flow(&mut b, "priority=20,in_port=1,actions=drop").unwrap();
    let before = tx(&mut b, "sinkb");
    eventually("bridge a forwards on", || tx(&mut a, "sinka") > 10_000);
    assert_eq!(tx(&mut b, "sinkb"), before, "b drops from its drop rule on");
    // A bridge that goes takes its ports out of the datapath; the other goes on.
    b.shutdown(false);
    drop(b);
    assert_eq!(a.dpif().dp().ports().len(), 2);
    let now = tx(&mut a, "sinka");
    eventually("bridge a forwards after b went", || {
        tx(&mut a, "sinka") > now + 1000
    });
    a.shutdown(false);
}

#[test]
fn a_patch_pair_joins_two_bridges_inside_one_translation() {
    let (mut a, mut b, _dirs) = two_bridges("brpa", "brpb");
    add_port(&mut a, "genp", &["type=ring", "ring-flows=1"]).unwrap();
    add_port(&mut a, "ppa", &["type=patch", "peer=ppb"]).unwrap();
    add_port(&mut b, "sinkp", &["type=ring"]).unwrap();
    add_port(&mut b, "ppb", &["type=patch", "peer=ppa"]).unwrap();
    add_flow(&mut a, "priority=10,in_port=genp,actions=output:ppa").unwrap();
    add_flow(
        &mut b,
        "priority=10,in_port=ppb,udp,actions=mod_tp_dst:7,output:sinkp",
    )
    .unwrap();
    let trace = a
        .handle(Request::Trace {
            flow: "in_port=genp,udp".into(),
        })
        .unwrap();
    let trace = trace.as_str().unwrap();
    assert!(
        trace.contains("on to bridge brpb as from its port 2"),
        "{trace}"
    );
    assert!(trace.contains("mod_tp_dst:7"), "{trace}");
    let tx = |sw: &mut Switch, name: &str| port(sw, name).stats.tx_packets;
    eventually("b's sink to get a's packets", || tx(&mut b, "sinkp") > 1000);
    // One datapath flow for both bridges: the packet is looked up once, on a's port.
    let flows: Vec<vsw_protocol::DpFlowInfo> =
        serde_json::from_value(a.handle(Request::DumpDpFlows { kind: None }).unwrap()).unwrap();
    assert_eq!(flows.len(), 1, "{flows:?}");
    assert!(flows[0].actions.contains("set(l4(dst=7))"), "{flows:?}");
    let none: Vec<vsw_protocol::DpFlowInfo> =
        serde_json::from_value(b.handle(Request::DumpDpFlows { kind: None }).unwrap()).unwrap();
    assert!(none.is_empty(), "no packet entered b's ports: {none:?}");
    assert_eq!(a.dpif().dp().flow_count(), 1);
    // b's rules decide: a drop there stops a's packets before the command returns.
    add_flow(&mut b, "priority=20,in_port=ppb,actions=drop").unwrap();
    let before = tx(&mut b, "sinkp");
    let sent = port(&mut a, "genp").stats.rx_packets;
    eventually("a to go on receiving", || {
        port(&mut a, "genp").stats.rx_packets > sent + 1000
    });
    assert_eq!(tx(&mut b, "sinkp"), before);
    b.shutdown(false);
    drop(b);
    a.shutdown(false);
}

/// A mod-flows whose action the selected rule's match cannot take is refused with
/// the reason (the action and what it needs), and changes nothing.
#[test]
fn a_modify_that_a_rules_match_cannot_take_says_why() {
    let dir = TestDir::new("modwhy");
    let mut sw = start(&dir);
    add_flow(&mut sw, "priority=5,arp,actions=drop").unwrap();
    let e = sw
        .handle(Request::ModFlows {
            flow: "arp,actions=mod_tp_dst:80".into(),
            strict: false,
            reset_counts: false,
        })
        .unwrap_err();
    assert!(
        matches!(
            e,
            vswd::switch::SwitchError::Flow(vsw_flow::FlowSyntaxError::ActionPrerequisite { .. })
        ),
        "{e}"
    );
    let flows = sw
        .handle(Request::DumpFlows {
            kind: None,
            table: None,
        })
        .unwrap();
    assert_eq!(flows[0]["actions"], "drop", "{flows}");
}
