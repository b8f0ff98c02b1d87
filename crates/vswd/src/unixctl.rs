//! Open vSwitch's unixctl protocol, so that `ovs-appctl` (and the scripts around it)
//! reach vswd: JSON-RPC on a unix socket, a request's method the command and its
//! params the arguments, the result the text Open vSwitch prints. The commands call
//! the switch's own typed methods (through `Switch::answered`, counted as `vswctl`'s
//! requests are: no JSON between two parts of one process), and their text comes from
//! the same renderers as `vswctl`'s (`vsw_protocol::render`).

use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use vsw_ovsdb::jsonrpc::{Framer, Message};
use vsw_protocol::render;

use crate::bridges::{Bridges, RunningBridge};
use crate::underlay::Underlay;
use vsw_netdev::unix_socket::SocketFile;

/// Sets the log level from `vlog/set`'s argument (a tracing filter).
pub type SetLog = Box<dyn Fn(&str) -> Result<(), String> + Send + Sync>;

/// What a command needs.
pub struct Context {
    pub bridges: Arc<Bridges>,
    /// The route table tunnel ports will use (`ovs/route/*`).
    pub underlay: Arc<Underlay>,
    /// Set by `exit`: the daemon stops as on SIGTERM.
    pub stop: Arc<AtomicBool>,
    pub set_log: SetLog,
}

/// The commands, with their arguments as `list-commands` shows them.
const COMMANDS: &[(&str, &str)] = &[
    ("dpctl/ct-disable-tcp-seq-chk", "[dp]"),
    ("dpctl/ct-enable-tcp-seq-chk", "[dp]"),
    ("dpctl/ct-del-limits", "[dp] zone=N1[,N2]..."),
    ("dpctl/ct-get-limits", "[dp] [zone=N1[,N2]...]"),
    ("dpctl/ct-get-maxconns", "[dp]"),
    ("dpctl/ct-get-nconns", "[dp]"),
    ("dpctl/ct-get-tcp-seq-chk", "[dp]"),
    (
        "dpctl/ct-set-limits",
        "[dp] [default=L] [zone=N,limit=L]...",
    ),
    ("dpctl/ct-set-maxconns", "[dp] maxconns"),
    ("dpctl/ct-stats-show", "[dp] [zone=N] [verbose]"),
    ("dpctl/dump-conntrack", "[dp] [-m] [-s] [zone=N]"),
    ("dpctl/dump-flows", "[dp]"),
    (
        "dpctl/flush-conntrack",
        "[dp] [zone=N] [mark=X[/M]] [labels=V[/M]] [ct-orig-tuple [ct-reply-tuple]]",
    ),
    ("dpctl/ipf-get-status", "[dp] [-m]"),
    ("dpctl/ipf-set-disabled", "[dp] v4|v6"),
    ("dpctl/ipf-set-enabled", "[dp] v4|v6"),
    ("dpctl/ipf-set-max-nfrags", "[dp] maxfrags"),
    ("dpctl/ipf-set-min-frag", "[dp] v4|v6 minfragment"),
    ("dpif-netdev/pmd-rxq-rebalance", "[dp]"),
    ("dpif-netdev/pmd-rxq-show", "[dp]"),
    ("dpif-netdev/pmd-stats-clear", "[dp]"),
    ("dpif-netdev/pmd-stats-show", "[dp]"),
    ("exit", ""),
    ("fdb/flush", "[bridge]"),
    ("fdb/show", "bridge"),
    ("list-commands", ""),
    ("mdb/flush", "bridge"),
    ("mdb/show", "bridge"),
    ("ofproto/trace", "[bridge] flow"),
    ("ovs/route/add", "ip/plen output_bridge [GW] [src=IP]"),
    ("ovs/route/del", "ip/plen"),
    ("ovs/route/lookup", "ip_addr"),
    ("ovs/route/show", ""),
    ("tnl/neigh/flush", ""),
    ("tnl/neigh/set", "BRIDGE IP MAC"),
    ("tnl/neigh/show", ""),
    ("tnl/ports/show", ""),
    ("version", ""),
    ("vlog/set", "{spec | PATTERN:destination:pattern}"),
];

/// Listens on `path` and answers each connection on its own thread; the socket made,
/// for removing it (and only it) at the end. Bound as the control socket is: with
/// mode 0600 from its first moment (a command here can stop the daemon), replacing
/// only a stale socket — never a live one, nor anything that is not a socket.
pub fn start(path: &Path, cx: Context) -> io::Result<SocketFile> {
    let (listener, file) = crate::server::bind(path)?;
    let cx = Arc::new(cx);
    std::thread::Builder::new()
        .name("vsw-unixctl".into())
        .spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { continue };
                let cx = cx.clone();
                let _ = std::thread::Builder::new()
                    .name("vsw-unixctl-conn".into())
                    .spawn(move || serve(conn, &cx));
            }
        })?;
    Ok(file)
}

fn serve(mut conn: UnixStream, cx: &Context) {
    // A client that stops talking is let go of.
    let _ = conn.set_read_timeout(Some(Duration::from_secs(300)));
    let mut framer = Framer::default();
    let mut buf = [0u8; 16 * 1024];
    loop {
        let n = match conn.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if framer.push(&buf[..n]).is_err() {
            return;
        }
        loop {
            let msg = match framer.next_value() {
                Ok(Some(v)) => Message::from_value(v),
                Ok(None) => break,
                Err(_) => return,
            };
            let Ok(Message::Request { method, params, id }) = msg else {
                return;
            };
            let args: Vec<String> = params
                .as_array()
                .map(|a| {
                    a.iter()
                        .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string))
                        .collect()
                })
                .unwrap_or_default();
            let (result, error) = match answer(cx, &method, &args) {
                Ok(text) => (json!(text), Value::Null),
                Err(text) => (Value::Null, json!(text)),
            };
            let reply = Message::Response { result, error, id };
            if conn.write_all(&reply.to_bytes()).is_err() {
                return;
            }
            if method == "exit" {
                cx.stop.store(true, Ordering::Relaxed);
            }
        }
    }
}

/// Runs `f` on bridge `b`'s switch as request `kind` (its latency counted as
/// `vswctl`'s are); the switch's error as the text ovs-appctl prints.
fn ask<T>(
    b: &RunningBridge,
    kind: &'static str,
    f: impl FnOnce(&mut crate::switch::Switch) -> Result<T, crate::switch::SwitchError>,
) -> Result<T, String> {
    b.lock().answered(kind, f).map_err(|e| e.to_string())
}

/// The bridge a command names, or the only one when it names none.
fn bridge(cx: &Context, named: Option<&String>) -> Result<Arc<RunningBridge>, String> {
    match named {
        Some(n) => cx.bridges.find(n),
        None => {
            let mut all = cx.bridges.all();
            match all.len() {
                1 => Ok(all.remove(0)),
                0 => Err("vswd runs no bridge".into()),
                _ => Err(format!("which bridge? ({})", cx.bridges.names().join(", "))),
            }
        }
    }
}

/// The datapath's text, as Open vSwitch prints its one datapath: every bridge is
/// in the same one, so any bridge answers for it.
fn per_datapath(
    cx: &Context,
    text: impl Fn(&RunningBridge) -> Result<String, String>,
) -> Result<String, String> {
    match cx.bridges.all().first() {
        Some(b) => text(b),
        None => Ok(String::new()),
    }
}

/// The text of command `method`, or the error text ovs-appctl prints.
fn answer(cx: &Context, method: &str, args: &[String]) -> Result<String, String> {
    if let Some(answer) = cx.underlay.command(method, args) {
        return answer;
    }
    match method {
        "version" => Ok(format!(
            "ovs-vswitchd (vsw) {}\n",
            env!("CARGO_PKG_VERSION")
        )),
        "list-commands" => {
            let mut o = String::from("The available commands are:\n");
            for (c, a) in COMMANDS {
                o.push_str(&format!("  {c:<32}{a}\n"));
            }
            Ok(o)
        }
        "exit" => Ok(String::new()),
        "dpif-netdev/pmd-stats-show" => per_datapath(cx, |b| {
            let pmds = ask(b, "pmd-stats-show", |sw| Ok(sw.pmd_stats()))?;
            Ok(render::pmd_stats(&pmds))
        }),
        "dpif-netdev/pmd-stats-clear" => per_datapath(cx, |b| {
            ask(b, "pmd-stats-clear", |sw| {
                sw.clear_pmd_stats();
                Ok(String::new())
            })
        }),
        "dpif-netdev/pmd-rxq-show" => per_datapath(cx, |b| {
            let queues = ask(b, "pmd-rxq-show", |sw| Ok(sw.rxq_show()))?;
            Ok(render::rxq_show(&queues))
        }),
        "dpif-netdev/pmd-rxq-rebalance" => {
            per_datapath(cx, |b| {
                ask(b, "pmd-rxq-rebalance", |sw| sw.rebalance_rxqs()).map(|_| String::new())
            })?;
            Ok("pmd rxq rebalance requested.\n".into())
        }
        // The one datapath, in its port numbers: each bridge's flows (those received
        // on its ports) together, in the order they were made.
        "dpctl/dump-flows" => {
            let mut flows: Vec<_> = cx
                .bridges
                .all()
                .iter()
                .flat_map(|b| b.lock().datapath_flows())
                .collect();
            flows.sort_by_key(|f| f.id);
            Ok(render::dp_flows(&flows, false))
        }
        c if c.starts_with("dpctl/")
            && (c.contains("conntrack") || c.contains("/ct-") || c.contains("/ipf-")) =>
        {
            conntrack_command(cx, c, args)
        }
        "ofproto/trace" => {
            let (named, flow) = match args {
                [flow] => (None, flow),
                [b, flow] => (Some(b), flow),
                _ => return Err("ofproto/trace needs [bridge] flow".into()),
            };
            ask(&*bridge(cx, named)?, "trace", |sw| sw.trace(flow))
        }
        "fdb/show" => {
            let entries = ask(&*bridge(cx, args.first())?, "fdb-show", |sw| {
                Ok(sw.fdb_show())
            })?;
            Ok(render::fdb(&entries))
        }
        "fdb/flush" => {
            let which = match args.first() {
                Some(n) => vec![cx.bridges.find(n)?],
                None => cx.bridges.all(),
            };
            for b in which {
                ask(&b, "fdb-flush", |sw| sw.flush_fdb())?;
            }
            Ok("table successfully flushed\n".into())
        }
        "mdb/show" => {
            let entries = ask(&*bridge(cx, args.first())?, "mdb-show", |sw| {
                Ok(sw.mdb_show())
            })?;
            Ok(render::mdb(&entries))
        }
        "mdb/flush" => {
            ask(&*bridge(cx, args.first())?, "mdb-flush", |sw| sw.flush_mdb())?;
            Ok("table successfully flushed\n".into())
        }
        "vlog/set" => {
            // `module:destination:level` or a level: the level is the last part.
            let spec = args.first().map(String::as_str).unwrap_or("info");
            let level = match spec.rsplit(':').next().unwrap_or(spec) {
                "dbg" | "debug" => "debug",
                "info" => "info",
                "warn" => "warn",
                "err" | "emer" => "error",
                "off" => "off",
                other => return Err(format!("unknown log level {other}")),
            };
            (cx.set_log)(level)?;
            Ok(String::new())
        }
        other => Err(format!(
            "\"{other}\" is not a valid command (use \"list-commands\" to see a list of valid commands)"
        )),
    }
}

/// Where the control socket of a daemon named `program` with this pid goes in
/// `run_dir` (Open vSwitch's `<program>.<pid>.ctl`).
pub fn socket_path(run_dir: &Path, program: &str) -> PathBuf {
    run_dir.join(format!("{program}.{}.ctl", std::process::id()))
}

/// `dpctl/*conntrack*`, `dpctl/ct-*` and `dpctl/ipf-*`: the datapath's tracker's (one
/// for vswd).
fn conntrack_command(cx: &Context, command: &str, args: &[String]) -> Result<String, String> {
    let dpif = cx
        .bridges
        .dpif()
        .ok_or_else(|| "no datapath: no bridge runs".to_string())?;
    crate::conntrack_ctl::run(dpif.conntrack(), command, args)
}
