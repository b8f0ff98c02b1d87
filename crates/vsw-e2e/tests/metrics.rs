//! `vswd --metrics-addr`: the switch's counters for Prometheus, checked by Prometheus's
//! own `promtool` and scraped by a real Prometheus server (Debian's `prometheus`,
//! started privately: its own directory, port and configuration).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use vsw_e2e::{serial, wait_until, Host, Vswd};

/// A loopback port free now (the tests bind it a moment later).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// `GET path` on 127.0.0.1:`port` with an optional `Accept` header: the status line,
/// the headers and the body.
fn get(port: u16, path: &str, accept: Option<&str>) -> (String, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("the metrics server");
    let accept = accept.map_or(String::new(), |a| format!("Accept: {a}\r\n"));
    write!(s, "GET {path} HTTP/1.0\r\nHost: localhost\r\n{accept}\r\n").unwrap();
    let mut reply = String::new();
    s.read_to_string(&mut reply).unwrap();
    let (head, body) = reply.split_once("\r\n\r\n").unwrap_or((&reply, ""));
    (head.to_string(), body.to_string())
}

/// The value of the sample `name{labels}` in Prometheus text.
fn sample(text: &str, name_and_labels: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name_and_labels)?.trim().parse().ok())
}

#[test]
fn metrics_are_served_checked_by_promtool_and_scraped_by_prometheus() {
    let _g = serial();
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let d = Vswd::start_with_args(&["--metrics-addr", &addr]);
    let (a, b) = (Host::new(1), Host::new(2));
    d.ctl_ok(&["add-port", &a.port]);
    d.ctl_ok(&["add-port", &b.port]);
    d.ctl_ok(&["add-port", "vm1", "type=vhostuser"]);
    assert!(a.ping(&b, 3), "{}", d.log());

    // Prometheus's classic text format unless OpenMetrics is asked for.
    let (head, text) = get(port, "/metrics", None);
    assert!(
        head.contains("200") && head.contains("text/plain; version=0.0.4"),
        "{head}"
    );
    let rx = format!(
        "vsw_port_rx_packets_total{{bridge=\"br0\",port=\"{}\"}}",
        a.port
    );
    assert!(
        sample(&text, &rx).is_some_and(|n| n >= 3.0),
        "{rx} in\n{text}"
    );
    for family in [
        "vsw_port_tx_bytes_total",
        "vsw_port_drops_total",
        "vsw_port_link_up",
        "vsw_port_mtu_bytes",
        "vsw_pmd_lookups_total",
        "vsw_pmd_cycles_total",
        "vsw_datapath_flows",
        "vsw_datapath_flow_limit",
        "vsw_tunnel_drops_total",
        "vsw_offload_adopted_flows",
        "vsw_control_request_duration_seconds",
    ] {
        assert!(
            text.contains(&format!("# TYPE {family} ")),
            "{family} in\n{text}"
        );
    }
    // A vhost-user port's guest counters (no guest yet: nothing raised, no fault).
    let vm = "bridge=\"br0\",port=\"vm1\"";
    assert_eq!(
        sample(&text, &format!("vsw_vhost_notifications_total{{{vm}}}")),
        Some(0.0),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            &format!("vsw_vhost_guest_faults_total{{{vm},fault=\"memory\"}}")
        ),
        Some(0.0),
        "{text}"
    );
    // Control-plane latency: the three add-ports, each observed once.
    assert!(
        text.contains("# TYPE vsw_control_request_duration_seconds histogram"),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            "vsw_control_request_duration_seconds_count{bridge=\"br0\",request=\"add-port\"}"
        ),
        Some(3.0),
        "{text}"
    );
    // The pings were forwarded by datapath flows: the PMD counted where it found them.
    let upcalls: f64 = text
        .lines()
        .filter(|l| l.starts_with("vsw_pmd_lookups_total{") && l.contains("found=\"upcall\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert!(upcalls >= 1.0, "{text}");
    // The datapath's connection tracker is scraped too (checked by promtool below).
    assert!(text.contains("vsw_conntrack_limit 3000000"), "{text}");
    assert!(
        text.contains("vsw_conntrack_refused_total{reason=\"invalid\"} 0"),
        "{text}"
    );
    let mut check = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool (Debian's prometheus package)");
    check
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let checked = check.wait_with_output().unwrap();
    assert!(
        checked.status.success(),
        "promtool: {}{}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );
    // OpenMetrics when asked for, and nothing but /metrics.
    let (head, om) = get(
        port,
        "/metrics",
        Some("application/openmetrics-text; version=1.0.0"),
    );
    assert!(head.contains("application/openmetrics-text"), "{head}");
    assert!(om.ends_with("# EOF\n"), "{om}");
    let (head, _) = get(port, "/", None);
    assert!(head.contains("404"), "{head}");

    // A real Prometheus server scrapes it every second.
    let dir = std::env::temp_dir().join(format!("vsw-prometheus-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: vsw\n    \
             static_configs:\n      - targets: ['{addr}']\n"
        ),
    )
    .unwrap();
    let web = free_port();
    let server = PrivateProcess(
        Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{web}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("prometheus (Debian's prometheus package)"),
    );
    // Prometheus's answer to a PromQL query.
    let ask = |q: &str| -> serde_json::Value {
        let q: String = q
            .bytes()
            .map(|c| match c {
                b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' => (c as char).to_string(),
                _ => format!("%{c:02X}"),
            })
            .collect();
        let (_, body) = get(web, &format!("/api/v1/query?query={q}"), None);
        serde_json::from_str(&body).unwrap_or_default()
    };
    let query = |q: &str| -> Option<f64> {
        ask(q)["data"]["result"][0]["value"][1]
            .as_str()?
            .parse()
            .ok()
    };
    let wanted = format!("vsw_port_rx_packets_total{{port=\"{}\"}}", a.port);
    wait_until("Prometheus to scrape vswd", Duration::from_secs(60), || {
        TcpStream::connect(("127.0.0.1", web)).is_ok()
            && query("up{job=\"vsw\"}") == Some(1.0)
            && query(&wanted).is_some_and(|n| n >= 3.0)
    });
    // Every query of the Grafana dashboard in contrib/ is PromQL Prometheus runs, on
    // metrics vswd exports.
    let dashboard: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../contrib/grafana-vsw.json"
        ))
        .unwrap(),
    )
    .unwrap();
    let panels = dashboard["panels"].as_array().unwrap();
    assert!(panels.len() >= 8);
    for target in panels.iter().flat_map(|p| p["targets"].as_array().unwrap()) {
        let expr = target["expr"].as_str().unwrap();
        let metric = expr
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .find(|w| w.starts_with("vsw_"))
            .unwrap_or_else(|| panic!("no vsw metric in {expr}"));
        // A histogram's series are its family's name and a suffix.
        let metric = metric.strip_suffix("_bucket").unwrap_or(metric);
        assert!(
            text.contains(&format!("# TYPE {metric} ")),
            "{metric} is not exported"
        );
        let q = expr.replace("$instance", ".*").replace("$bridge", ".*");
        let answer = ask(&q);
        assert_eq!(answer["status"], "success", "{q}: {answer}");
    }
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A process this test started, ended (by its pid) when the test ends.
struct PrivateProcess(Child);

impl Drop for PrivateProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Whether the kernel holds nothing for the listener on `port`: no connection
/// waiting to be accepted (a listening socket's Recv-Q), no handshake half done.
fn listener_settled(port: u16) -> bool {
    let ss = |args: &[&str]| {
        let out = Command::new("ss").args(args).output().expect("ss");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let sport = format!("sport = :{port}");
    let queued = ss(&["-Hltn", &sport])
        .lines()
        .all(|l| l.split_whitespace().nth(1) == Some("0"));
    let half_open = ss(&["-Htn", "state", "syn-recv", &sport]);
    queued && half_open.trim().is_empty()
}

/// vswd's threads now.
fn threads(d: &mut Vswd) -> usize {
    let pid = d.pid().expect("running");
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .count()
}

/// 5,000 idle connections and a client that pipelines requests and reads no answer
/// cost vswd no thread and no scrape: scrapes still answer within a second.
#[test]
fn idle_and_unread_connections_never_stall_a_scrape() {
    let _g = serial();
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let mut d = Vswd::start_with_args(&["--metrics-addr", &addr]);
    let (head, _) = get(port, "/metrics", None);
    assert!(head.contains("200"), "{head}");
    let before = threads(&mut d);
    // The idle connections and the non-reader, held open by a process of their own
    // (one with room for 5,000 descriptors).
    let script = format!(
        "import resource, socket, sys\n\
         resource.setrlimit(resource.RLIMIT_NOFILE, (8192, 8192))\n\
         idle = []\n\
         for i in range(5000):\n\
         \x20   s = socket.socket(); s.setblocking(False)\n\
         \x20   try: s.connect(('127.0.0.1', {port}))\n\
         \x20   except BlockingIOError: pass\n\
         \x20   idle.append(s)\n\
         p = socket.create_connection(('127.0.0.1', {port}))\n\
         p.setblocking(False)\n\
         req = b'GET /metrics HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n' * 200\n\
         try: p.send(req)\n\
         except BlockingIOError: pass\n\
         # Every connect settled (accepted into the queue, or refused) before the\n\
         # scrapes: a SYN still waiting for its retransmission is the kernel's\n\
         # queue, not vswd.\n\
         import select, time\n\
         waiting = select.poll()\n\
         for s in idle: waiting.register(s, select.POLLOUT)\n\
         left = len(idle); end = time.time() + 30\n\
         while left and time.time() < end:\n\
         \x20   for fd, _ in waiting.poll(1000): waiting.unregister(fd); left -= 1\n\
         print('ready', flush=True)\n\
         sys.stdin.read()\n"
    );
    let mut holder = Command::new("python3")
        .args(["-c", &script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(holder.stdout.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line.trim(), "ready");
    // And the kernel's side settled: no handshake half done, nothing waiting in the
    // listener's queue — every connection offered is vswd's by now (a scrape timed
    // behind a burst still in the kernel's queues measures the kernel).
    wait_until(
        "vswd to have taken every connection offered",
        Duration::from_secs(30),
        || listener_settled(port),
    );
    let mut slowest = Duration::ZERO;
    for _ in 0..10 {
        let t = std::time::Instant::now();
        let (head, body) = get(port, "/metrics", None);
        slowest = slowest.max(t.elapsed());
        assert!(head.contains("200") && body.contains("vsw_"), "{head}");
    }
    let during = threads(&mut d);
    drop(holder.stdin.take());
    let _ = holder.wait();
    eprintln!("scrapes took at most {slowest:?}; vswd's threads {before} -> {during}");
    assert!(
        slowest < Duration::from_secs(1),
        "a scrape took {slowest:?}"
    );
    assert!(
        during <= before + 2,
        "threads grew from {before} to {during}"
    );
}
