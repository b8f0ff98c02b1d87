//! vswctl: talks to vswd over its control socket.
#![forbid(unsafe_code)]

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::{Parser, Subcommand, ValueEnum};
use vsw_protocol::render;
use vsw_protocol::{Reply, Request, DEFAULT_SOCKET};

#[derive(Parser)]
#[command(version, about = "Control the vsw userspace switch")]
struct Cli {
    /// vswd's control socket.
    #[arg(long, global = true, default_value = DEFAULT_SOCKET)]
    socket: PathBuf,
    /// Seconds to wait for vswd's answer before giving up.
    #[arg(long, global = true, default_value_t = 30.0, value_name = "S")]
    timeout: f64,
    /// Output for people (text) or scripts (json).
    #[arg(long, global = true, value_enum, default_value_t = Format::Text)]
    format: Format,
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Format {
    Text,
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Options, PMD and ports.
    Show,
    /// Set switch-wide options, e.g. pmd-cpu-mask=0x2.
    Set {
        #[arg(required = true, value_name = "KEY=VALUE")]
        options: Vec<String>,
    },
    /// Connect to OpenFlow controllers (tcp:IP[:PORT] or unix:PATH), or listen for
    /// OpenFlow connections (ptcp:PORT[:IP]), replacing any configured before; vswd
    /// keeps retrying a controller that is not up.
    SetController {
        #[arg(required = true, value_name = "TARGET")]
        targets: Vec<String>,
    },
    /// Disconnect from every OpenFlow controller.
    DelController,
    /// Attach a Linux interface as a port.
    AddPort {
        name: String,
        #[arg(value_name = "KEY=VALUE")]
        options: Vec<String>,
    },
    /// Remove a port (the interface is left as it was before).
    DelPort { name: String },
    /// Change a port's options, e.g. afpacket-mode=mmsg.
    SetPort {
        name: String,
        #[arg(required = true, value_name = "KEY=VALUE")]
        options: Vec<String>,
    },
    /// Add a flow, e.g. "priority=100,in_port=1,udp,tp_dst=53,actions=drop".
    AddFlow { flow: String },
    /// Add the flows in FILE (one per line, '#' comments; '-' reads standard input).
    AddFlows { file: PathBuf },
    /// Delete flows matching MATCH (all flows without one).
    DelFlows {
        /// Only the flow with exactly this match and priority.
        #[arg(long)]
        strict: bool,
        #[arg(value_name = "MATCH")]
        matching: Option<String>,
    },
    /// Add a group, e.g. "group_id=1,type=select,bucket=weight:1,output:2,bucket=weight:3,output:3".
    AddGroup { group: String },
    /// Replace a group's type and buckets (same syntax as add-group).
    ModGroup { group: String },
    /// Remove a group (all groups without one), with the flows that use it.
    DelGroups {
        #[arg(value_name = "group_id=N")]
        group: Option<String>,
    },
    /// Groups with their counters and their buckets'.
    DumpGroups,
    /// Add a meter, e.g. "meter=1,kbps,bands=type=drop,rate=100000".
    AddMeter { meter: String },
    /// Replace a meter's flags and bands (same syntax as add-meter).
    ModMeter { meter: String },
    /// Remove a meter (all meters without one), with the flows that use it.
    DelMeters {
        #[arg(value_name = "meter=N")]
        meter: Option<String>,
    },
    /// Meters with their counters and their bands'.
    DumpMeters,
    /// Give the flows matching the selection other actions, e.g.
    /// "in_port=1,actions=output:3" (counters kept unless --reset-counts).
    ModFlows {
        /// Only the flow with exactly this match and priority.
        #[arg(long)]
        strict: bool,
        /// Start the changed flows' counters at zero.
        #[arg(long)]
        reset_counts: bool,
        #[arg(value_name = "MATCH,actions=ACTIONS")]
        flow: String,
    },
    /// Flows with their counters and offload state; `table=N` (that table's only),
    /// `type=offloaded` (those an offload provider forwards), `type=ovs` (the others)
    /// or `type=all`.
    DumpFlows {
        #[arg(value_name = "table=N|type=offloaded|ovs|all")]
        filters: Vec<String>,
    },
    /// Port counters.
    DumpPorts,
    /// PMD thread statistics.
    PmdStatsShow,
    /// Reset PMD statistics.
    PmdStatsClear,
    /// Which PMD polls which receive queue, and each queue's share of its PMD.
    PmdRxqShow,
    /// Place the receive queues on the PMDs again, by measured load.
    PmdRxqRebalance,
    /// Offload providers: capacity, flows held, out-of-resources, rebalancing.
    OffloadShow,
    /// The datapath flows (megaflows) the PMDs cache, as `ovs-appctl dpctl/dump-flows`.
    DumpDpFlows {
        #[arg(value_name = "type=offloaded|ovs|all")]
        filter: Option<String>,
        /// Also each flow's id, PMD, offload state and datapath.
        #[arg(long)]
        more: bool,
    },
    /// How a packet goes through the pipeline, as `ovs-appctl ofproto/trace`:
    /// e.g. "in_port=1,dl_dst=02:00:00:00:00:02,tcp,tp_dst=80".
    Trace { flow: String },
    /// The datapath: flows cached, flow limit, hits, misses, tables.
    DpifShow,
    /// The hosts NORMAL learned (port, VLAN, MAC, age), as `ovs-appctl fdb/show`.
    FdbShow,
    /// Forget every learned host.
    FdbFlush,
    /// The connection tracker, as `ovs-appctl dpctl/COMMAND` answers: e.g.
    /// `conntrack dump-conntrack zone=7`, `conntrack flush-conntrack zone=7`,
    /// `conntrack ct-stats-show -m`, `conntrack ct-set-limits zone=7,limit=100`.
    Conntrack {
        command: String,
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

/// `type=X` → `X`.
fn type_filter(filter: Option<&str>) -> anyhow::Result<Option<String>> {
    filter
        .map(|f| {
            f.strip_prefix("type=")
                .map(String::from)
                .with_context(|| format!("expected type=offloaded|ovs|all, not '{f}'"))
        })
        .transpose()
}

fn read_flows(file: &PathBuf) -> anyhow::Result<Vec<String>> {
    let mut text = String::new();
    if file.as_os_str() == "-" {
        std::io::stdin()
            .read_to_string(&mut text)
            .context("reading flows from standard input")?;
    } else {
        text =
            std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    }
    Ok(text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(String::from)
        .collect())
}

/// One connection attempt that never waits: a daemon whose queue of new connections
/// is full answers WouldBlock.
fn connect_nonblocking(socket: &Path) -> std::io::Result<UnixStream> {
    let s = socket2::Socket::new(socket2::Domain::UNIX, socket2::Type::STREAM, None)?;
    s.set_nonblocking(true)?;
    s.connect(&socket2::SockAddr::unix(socket)?)?;
    s.set_nonblocking(false)?;
    Ok(UnixStream::from(std::os::fd::OwnedFd::from(s)))
}

/// Connects to vswd, waiting at most until `deadline` (a daemon whose queue of new
/// connections is full is retried, not waited on without end).
fn connect(socket: &Path, deadline: Instant) -> anyhow::Result<UnixStream> {
    loop {
        match connect_nonblocking(socket) {
            Ok(s) => return Ok(s),
            Err(e) if e.kind() == ErrorKind::WouldBlock && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::ConnectionRefused) => {
                bail!(
                    "no vswd is listening on {} ({e}; is vswd running?)",
                    socket.display()
                )
            }
            Err(e) => {
                return Err(e).with_context(|| format!("cannot connect to {}", socket.display()))
            }
        }
    }
}

fn call(socket: &Path, req: &Request, timeout: Duration) -> anyhow::Result<serde_json::Value> {
    let deadline = Instant::now() + timeout;
    let mut stream = connect(socket, deadline)?;
    let left = || {
        deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(1))
    };
    let late = |e: std::io::Error| {
        if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) {
            anyhow::anyhow!(
                "vswd on {} did not answer within {:.1} s (--timeout)",
                socket.display(),
                timeout.as_secs_f64()
            )
        } else {
            anyhow::Error::new(e).context("talking to vswd")
        }
    };
    let mut line = serde_json::to_string(req)?;
    line.push('\n');
    stream.set_write_timeout(Some(left())).map_err(late)?;
    stream.write_all(line.as_bytes()).map_err(late)?;
    stream.set_read_timeout(Some(left())).map_err(late)?;
    let mut reply = String::new();
    BufReader::new(stream).read_line(&mut reply).map_err(late)?;
    if reply.is_empty() {
        bail!("vswd closed the connection without a reply");
    }
    let reply: Reply = serde_json::from_str(&reply).context("vswd's reply is not valid")?;
    if !reply.ok {
        bail!("{}", reply.error.unwrap_or_else(|| "unknown error".into()));
    }
    Ok(reply.result)
}

fn main() {
    vsw_docgen::write_if_asked(<Cli as clap::CommandFactory>::command, "8");
    let cli = Cli::parse();
    if let Err(e) = run(cli) {
        eprintln!("vswctl: {e:#}");
        std::process::exit(1);
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    let req = match &cli.command {
        Command::Show => Request::Show,
        Command::Set { options } => Request::Set {
            options: options.clone(),
        },
        // The `controller` option, as `ovs-vsctl set-controller` sets the bridge's.
        Command::SetController { targets } => Request::Set {
            options: vec![format!("controller={}", targets.join(","))],
        },
        Command::DelController => Request::Set {
            options: vec!["controller=".into()],
        },
        Command::AddPort { name, options } => Request::AddPort {
            name: name.clone(),
            options: options.clone(),
        },
        Command::DelPort { name } => Request::DelPort { name: name.clone() },
        Command::SetPort { name, options } => Request::SetPort {
            name: name.clone(),
            options: options.clone(),
        },
        Command::AddFlow { flow } => Request::AddFlow { flow: flow.clone() },
        Command::AddFlows { file } => Request::AddFlows {
            flows: read_flows(file)?,
        },
        Command::DelFlows { strict, matching } => Request::DelFlows {
            matching: matching.clone(),
            strict: *strict,
        },
        Command::AddGroup { group } => Request::AddGroup {
            group: group.clone(),
        },
        Command::ModGroup { group } => Request::ModGroup {
            group: group.clone(),
        },
        Command::DelGroups { group } => Request::DelGroups {
            group_id: match group {
                None => None,
                Some(g) => Some(
                    g.strip_prefix("group_id=")
                        .unwrap_or(g)
                        .parse()
                        .with_context(|| format!("del-groups takes group_id=N, not '{g}'"))?,
                ),
            },
        },
        Command::DumpGroups => Request::DumpGroups,
        Command::AddMeter { meter } => Request::AddMeter {
            meter: meter.clone(),
        },
        Command::ModMeter { meter } => Request::ModMeter {
            meter: meter.clone(),
        },
        Command::DelMeters { meter } => Request::DelMeters {
            meter_id: match meter {
                None => None,
                Some(m) => Some(
                    m.strip_prefix("meter=")
                        .unwrap_or(m)
                        .parse()
                        .with_context(|| format!("del-meters takes meter=N, not '{m}'"))?,
                ),
            },
        },
        Command::DumpMeters => Request::DumpMeters,
        Command::ModFlows {
            strict,
            reset_counts,
            flow,
        } => Request::ModFlows {
            flow: flow.clone(),
            strict: *strict,
            reset_counts: *reset_counts,
        },
        Command::DumpFlows { filters } => {
            let (mut kind, mut table) = (None, None);
            for f in filters {
                if let Some(t) = f.strip_prefix("table=") {
                    table = Some(
                        t.parse::<u8>()
                            .ok()
                            .filter(|t| *t <= 254)
                            .with_context(|| format!("table=N takes 0..254, not '{t}'"))?,
                    );
                } else {
                    kind = type_filter(Some(f))?;
                }
            }
            Request::DumpFlows { kind, table }
        }
        Command::DumpPorts => Request::DumpPorts,
        Command::PmdStatsShow => Request::PmdStatsShow,
        Command::PmdStatsClear => Request::PmdStatsClear,
        Command::PmdRxqShow => Request::PmdRxqShow,
        Command::PmdRxqRebalance => Request::PmdRxqRebalance,
        Command::OffloadShow => Request::OffloadShow,
        Command::DumpDpFlows { filter, .. } => Request::DumpDpFlows {
            kind: type_filter(filter.as_deref())?,
        },
        Command::Trace { flow } => Request::Trace { flow: flow.clone() },
        Command::DpifShow => Request::DpifShow,
        Command::FdbShow => Request::FdbShow,
        Command::FdbFlush => Request::FdbFlush,
        Command::Conntrack { command, args } => Request::Conntrack {
            command: command.clone(),
            args: args.clone(),
        },
    };
    if !(cli.timeout > 0.0 && cli.timeout.is_finite()) {
        bail!(
            "--timeout must be a positive number of seconds, not {}",
            cli.timeout
        );
    }
    let result = call(&cli.socket, &req, Duration::from_secs_f64(cli.timeout))?;
    if cli.format == Format::Json {
        println!("{}", serde_json::to_string_pretty(&result)?);
        return Ok(());
    }
    let text = match req {
        Request::Show => render::show(serde_json::from_value(result)?),
        Request::DumpFlows { .. } => render::flows(&serde_json::from_value::<Vec<_>>(result)?),
        Request::OffloadShow => render::offload_show(&serde_json::from_value::<Vec<_>>(result)?),
        Request::DumpDpFlows { .. } => {
            let more = matches!(cli.command, Command::DumpDpFlows { more: true, .. });
            render::dp_flows(&serde_json::from_value::<Vec<_>>(result)?, more)
        }
        Request::Trace { .. } => serde_json::from_value::<String>(result)?,
        // ovs-appctl ends an answer with a newline; so does vswctl.
        Request::Conntrack { .. } => {
            let text = serde_json::from_value::<String>(result)?;
            if text.is_empty() || text.ends_with('\n') {
                text
            } else {
                text + "\n"
            }
        }
        Request::DpifShow => render::dpif_show(&serde_json::from_value(result)?),
        Request::FdbShow => render::fdb(&serde_json::from_value::<Vec<_>>(result)?),
        Request::DumpMeters => render::meters(&serde_json::from_value::<Vec<_>>(result)?),
        Request::DumpGroups => render::groups(&serde_json::from_value::<Vec<_>>(result)?),
        Request::DumpPorts => render::ports(&serde_json::from_value::<Vec<_>>(result)?),
        Request::PmdStatsShow => render::pmd_stats(&serde_json::from_value::<Vec<_>>(result)?),
        Request::PmdRxqShow | Request::PmdRxqRebalance => {
            render::rxq_show(&serde_json::from_value::<Vec<_>>(result)?)
        }
        _ => String::new(),
    };
    print!("{text}");
    Ok(())
}
