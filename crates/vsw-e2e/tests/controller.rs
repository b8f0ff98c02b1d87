//! vswd driven by a real OpenFlow controller: an os-ken app (pip `os-ken`, set up
//! by scripts/setup.sh in /opt/vsw-osken) that learns MAC addresses from
//! packet-ins and installs flows, with vswd connecting to it as to any controller.

use std::io::BufRead;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use vsw_e2e::{end, quiet_hosts, serial, wait_until, Host, Vswd};

/// The Python that has os-ken (`VSW_OSKEN_PYTHON`, else setup.sh's venv).
fn osken_python() -> String {
    std::env::var("VSW_OSKEN_PYTHON").unwrap_or_else(|_| "/opt/vsw-osken/bin/python".into())
}

/// A TCP port nobody listens on now.
fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    l.local_addr().expect("its address").port()
}

/// The controller app, listening on `port`; its output lines come on the channel.
fn start_controller(port: u16) -> (Child, mpsc::Receiver<String>) {
    start_app("learning_switch_13.py", port)
}

/// os-ken app `name` (in tests/osken/), listening on `port`.
fn start_app(name: &str, port: u16) -> (Child, mpsc::Receiver<String>) {
    let app = format!("{}/tests/osken/{name}", env!("CARGO_MANIFEST_DIR"));
    let mut child = Command::new("timeout")
        .args(["300", &osken_python(), &app, &port.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("os-ken (scripts/setup.sh installs it in /opt/vsw-osken)");
    let out = child.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let first = rx.recv_timeout(Duration::from_secs(60));
    assert_eq!(
        first.as_deref(),
        Ok("listening"),
        "the controller did not start"
    );
    (child, rx)
}

fn flows_text(d: &Vswd) -> Vec<String> {
    d.all_flows()
        .iter()
        .map(|f| {
            format!(
                "priority={} {} actions={}",
                f.priority, f.matching, f.actions
            )
        })
        .collect()
}

#[test]
fn an_os_ken_learning_switch_drives_vsw_and_the_fail_modes_hold_without_it() {
    let _g = serial();
    let d = Vswd::start();
    let (a, b): (Host, Host) = quiet_hosts();
    d.ctl_ok(&["add-port", &a.port]);
    d.ctl_ok(&["add-port", &b.port]);
    // No flows, secure: nothing forwards until the controller says so.
    d.ctl_ok(&["del-flows"]);
    d.ctl_ok(&["set", "fail-mode=secure", "inactivity-probe=1000"]);
    assert!(!a.ping(&b, 1), "forwarded with no flows");
    // The controller is configured before it is up: vswd keeps trying.
    let port = free_port();
    d.ctl_ok(&["set-controller", &format!("tcp:127.0.0.1:{port}")]);
    let (ctrl, lines) = start_controller(port);
    let connected = lines.recv_timeout(Duration::from_secs(30));
    assert!(
        connected
            .as_deref()
            .is_ok_and(|l| l.starts_with("connected ")),
        "vswd did not connect: {connected:?}"
    );
    // The app's table-miss flow first (sent after the handshake), then a flow
    // per direction once it learned both hosts.
    wait_until(
        "the controller's table-miss flow",
        Duration::from_secs(10),
        || {
            flows_text(&d)
                .iter()
                .any(|f| f.starts_with("priority=0 ") && f.ends_with("actions=CONTROLLER"))
        },
    );
    // The failed ping left the neighbour entries FAILED: resolved afresh.
    for h in [&a, &b] {
        h.exec_ok(&["ip", "neigh", "flush", "dev", "eth0"]);
    }
    assert!(
        a.ping(&b, 3),
        "no ping through the controller's switch: {:?}\n{}",
        flows_text(&d),
        d.log()
    );
    wait_until("the learned flows", Duration::from_secs(10), || {
        flows_text(&d)
            .iter()
            .filter(|f| f.starts_with("priority=1 ") && f.contains("dl_src="))
            .count()
            >= 2
    });
    let flows = flows_text(&d);
    assert!(
        flows
            .iter()
            .any(|f| f.starts_with("priority=0 ") && f.ends_with("actions=CONTROLLER")),
        "{flows:?}"
    );
    let bytes = a.iperf_to(&b, 2).expect("iperf3 through the learned flows");
    assert!(bytes > 1_000_000, "{bytes} bytes");

    // The controller goes away. Secure: the flows it left forward on...
    end(ctrl);
    assert!(
        a.ping(&b, 3),
        "secure fail mode lost the controller's flows"
    );
    // ...and nothing else does.
    d.ctl_ok(&["del-flows"]);
    assert!(!a.ping(&b, 1), "secure forwarded without flows");
    // Standalone: with no controller for three probes, a learning switch.
    d.ctl_ok(&["set", "fail-mode=standalone"]);
    for h in [&a, &b] {
        h.exec_ok(&["ip", "neigh", "flush", "dev", "eth0"]);
    }
    wait_until("standalone to fail open", Duration::from_secs(15), || {
        a.ping(&b, 1)
    });
    assert!(
        d.log()
            .contains("standalone fail mode forwards as a learning switch"),
        "{}",
        d.log()
    );
    d.ctl_ok(&["del-controller"]);
}

/// An os-ken app installs flows with Nicira's extensions through os-ken's own
/// classes (REG_LOAD2, REG_MOVE, DEC_TTL, RESUBMIT_TABLE, CONJUNCTION and conj_id,
/// LEARN naming fields by OXM headers, NOTE) over OpenFlow 1.3: every one is taken
/// (no error before the barrier's reply), and `ovs-ofctl` reads them back in 1.0,
/// 1.3 and 1.5 as Open vSwitch prints them.
#[test]
fn an_os_ken_app_installs_nicira_actions_and_ovs_ofctl_reads_them() {
    let _g = serial();
    let d = Vswd::start();
    d.ctl_ok(&["del-flows"]);
    let port = free_port();
    let (ctrl, lines) = start_app("nicira_actions_13.py", port);
    d.ctl_ok(&["set-controller", &format!("tcp:127.0.0.1:{port}")]);
    let mut said = Vec::new();
    loop {
        let line = lines
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|e| panic!("the app said {said:?}, then {e}"));
        if line == "installed" {
            break;
        }
        said.push(line);
    }
    assert!(said.iter().all(|l| !l.starts_with("error")), "{said:?}");
    end(ctrl);
    let want = [
        "priority=10,ip,reg0=0x1 actions=set_field:0x5->reg1,move:NXM_NX_REG1[]->NXM_NX_REG2[],dec_ttl,resubmit(,3)",
        "priority=20,ip,nw_src=198.18.0.1 actions=conjunction(7,1/2)",
        "priority=20,tcp,tp_dst=80 actions=conjunction(7,2/2)",
        "priority=20,conj_id=7,ip actions=output:1",
        "table=1, priority=5 actions=learn(table=10,priority=5,NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],output:OXM_OF_IN_PORT[0..15]),note:01.02.03.00.00.00",
        "table=2, priority=10,dl_type=0x894f,nsh_mdtype=1,nsh_spi=0x123,nsh_c1=0xabc actions=set_field:254->nsh_si,set_field:0x7->nsh_c2,output:1",
    ];
    for version in ["OpenFlow10", "OpenFlow13", "OpenFlow15"] {
        let out = vsw_e2e::openflow::ovs_ofctl(&d, &["-O", version, "dump-flows", "--no-stats"]);
        let dump = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{version}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        for w in want {
            assert!(
                dump.lines().any(|l| l.trim() == w),
                "{version}: {w} not in\n{dump}"
            );
        }
    }
}
