//! vswd: the vsw daemon.
#![forbid(unsafe_code)]

use std::fs::{File, TryLockError};
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::Parser;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use vswd::protocol::{DEFAULT_SOCKET, DEFAULT_STATE_FILE};
use vswd::switch::Switch;

/// The exit status when a PMD failed (EX_SOFTWARE): an internal error, not a bad
/// configuration or environment.
const EXIT_PMD_FAILED: i32 = 70;

/// How often interfaces are checked for having gone or come back.
const LINK_CHECK_INTERVAL: Duration = Duration::from_millis(200);

#[derive(Parser)]
#[command(version, about = "vsw: a userspace virtual switch daemon")]
struct Args {
    /// Control socket (mode 0600).
    #[arg(long, default_value = DEFAULT_SOCKET)]
    socket: PathBuf,
    /// Where the configuration is kept across restarts.
    #[arg(long, default_value = DEFAULT_STATE_FILE)]
    state_file: PathBuf,
    /// Log filter (tracing env-filter syntax); RUST_LOG overrides it.
    #[arg(long, default_value = "info")]
    log: String,
    /// The bridge this vswd is (its management socket `<run dir>/NAME.mgmt`, its
    /// internal port NAME). With --ovsdb vswd runs every bridge of the database,
    /// and this names the one vswctl's requests go to.
    #[arg(long, default_value = vswd::switch::BRIDGE_NAME, value_parser = bridge_name)]
    bridge: String,
    /// Be configured by the Open_vSwitch database of this ovsdb-server
    /// (`unix:PATH` or `tcp:IP:PORT`), as ovs-vswitchd is; no state file is kept.
    #[arg(long, value_name = "TARGET")]
    ovsdb: Option<vsw_ovsdb::Target>,
    /// Serve the switch's counters for Prometheus at http://ADDR/metrics (off unless
    /// given; 127.0.0.1:9477, say)
    #[arg(long, value_name = "ADDR")]
    metrics_addr: Option<std::net::SocketAddr>,
    /// Where kernel fast paths are pinned with `offload-persist` (a directory on a
    /// BPF filesystem; one directory per port interface under it)
    #[arg(long, value_name = "DIR", default_value = vswd::offload::DEFAULT_PIN_ROOT)]
    bpf_pin_dir: PathBuf,
}

/// A bridge name, checked as an interface name is (its internal port bears it, and
/// its management socket is named after it).
fn bridge_name(name: &str) -> Result<String, String> {
    vswd::bridges::check_name(name).map(|()| name.to_string())
}

/// The daemon's own threads (this one and those it starts later) stay off the PMD's
/// core, so that a control command never preempts packet processing.
fn keep_off_pmd_cores(pmds: &[usize]) {
    let others: Vec<usize> = vswd::options::allowed_cpus()
        .into_iter()
        .filter(|c| !pmds.contains(c))
        .collect();
    if others.is_empty() {
        return;
    }
    if let Err(e) = vsw_netdev::restrict_current_thread(&others) {
        tracing::warn!(error = %e, "cannot keep the daemon's threads off the PMD core");
    }
}

/// Takes `<path>.lock` for as long as the process lives (the kernel lets go of it when
/// the process ends, however it ends), or says which daemon holds it.
fn lock_beside(path: &Path, what: &str) -> anyhow::Result<File> {
    let name = path
        .file_name()
        .with_context(|| format!("the {what} path {} has no file name", path.display()))?;
    let lock = path.with_file_name(format!("{}.lock", name.to_string_lossy()));
    if let Some(dir) = lock.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    // Made if missing, then held through a read-only descriptor: a file open for
    // writing would keep its filesystem from being remounted read-only.
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(&lock)
        .with_context(|| format!("cannot open the lock file {}", lock.display()))?;
    let mut file = File::open(&lock)
        .with_context(|| format!("cannot open the lock file {}", lock.display()))?;
    match file.try_lock() {
        Ok(()) => {
            // Who holds it, for the next daemon's message.
            let _ = std::fs::write(&lock, format!("{}\n", std::process::id()));
            Ok(file)
        }
        Err(TryLockError::WouldBlock) => {
            let mut pid = String::new();
            let _ = file.read_to_string(&mut pid);
            bail!(
                "another vswd (pid {}) is running with the {what} {}: it holds {}",
                pid.trim(),
                path.display(),
                lock.display()
            )
        }
        Err(TryLockError::Error(e)) => {
            Err(e).with_context(|| format!("cannot lock {}", lock.display()))
        }
    }
}

/// Writes this process's pid to `path` and locks it as Open vSwitch's daemons do, so
/// that `ovs-appctl -t ovs-vswitchd` finds this daemon.
fn write_pid_file(path: &Path) -> std::io::Result<File> {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)?;
    vsw_netdev::lock_pid_file(&f)?;
    writeln!(f, "{}", std::process::id())?;
    Ok(f)
}

fn main() -> anyhow::Result<()> {
    vsw_docgen::write_if_asked(<Args as clap::CommandFactory>::command, "8");
    let args = Args::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .or_else(|_| tracing_subscriber::EnvFilter::try_new(&args.log))
        .context("bad --log filter")?;
    // `ovs-appctl vlog/set` changes the filter of the running daemon.
    let (filter, log_filter) = tracing_subscriber::reload::Layer::new(filter);
    // Under systemd, whose journal is on standard error (JOURNAL_STREAM), logs go to
    // the journal with their fields as journal fields (F_PORT=…, F_BRIDGE=…); else
    // as text to standard error.
    let journal = std::env::var_os("JOURNAL_STREAM")
        .and_then(|_| tracing_journald::layer().ok())
        .map(|j| j.with_syslog_identifier("vswd".into()));
    let text = journal.is_none().then(|| {
        tracing_subscriber::fmt::layer()
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .with_writer(std::io::stderr)
    });
    tracing_subscriber::registry()
        .with(filter)
        .with(journal)
        .with(text)
        .init();

    vswd::offload::set_pin_root(args.bpf_pin_dir.clone());
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone()).context("cannot install signal handlers")?;
    }

    // One daemon per state file and per control socket: a second one must not touch
    // the ports, guests' sockets or offloads of the first. The locks come before
    // anything else and are held until the process ends.
    let _state_lock = match args.ovsdb {
        Some(_) => None,
        None => Some(lock_beside(&args.state_file, "state file")?),
    };
    let _socket_lock = lock_beside(&args.socket, "control socket")?;
    match vsw_netdev::raise_open_file_limit() {
        Ok(n) => tracing::debug!(open_files = n, "open file limit"),
        Err(e) => tracing::warn!(error = %e, "cannot raise the open file limit"),
    }
    let (listener, socket_file) = vswd::server::bind(&args.socket)
        .with_context(|| format!("cannot listen on {}", args.socket.display()))?;
    // Read before the daemon's threads are confined (see keep_off_pmd_cores).
    vswd::options::allowed_cpus();
    let socket = args.socket.display().to_string();
    let bridges = Arc::new(vswd::bridges::Bridges::new(&args.socket));
    match &args.ovsdb {
        // The database holds the configuration: its bridges are started as it
        // names them, new, nothing saved.
        Some(_) => keep_off_pmd_cores(&vswd::options::default_pmd_cores()),
        None => {
            let tunnels = bridges.tunnels().clone();
            let switch =
                match Switch::start_bridge(&args.state_file, &socket, &args.bridge, tunnels) {
                    Ok(s) => s,
                    Err(e) => {
                        socket_file.remove(&args.socket);
                        return Err(e.into());
                    }
                };
            keep_off_pmd_cores(&switch.pmd_cores());
            // Its OpenFlow management socket listens before the control socket
            // answers (a client that saw vswd answer finds it).
            if let Err(e) = bridges.run(switch) {
                socket_file.remove(&args.socket);
                return Err(e).context("cannot run the bridge");
            }
            // Its fast paths adopted, an earlier run's others go before anything
            // answers.
            bridges.remove_unadopted_offloads();
        }
    }
    // /metrics listens before the control socket answers (a client that saw vswd
    // answer finds it).
    if let Some(addr) = args.metrics_addr {
        if let Err(e) = vswd::metrics::serve(addr, bridges.clone()) {
            socket_file.remove(&args.socket);
            return Err(e).with_context(|| format!("cannot serve /metrics on {addr}"));
        }
    }
    // vswctl reaches the bridge named by --bridge.
    let for_server: vswd::server::Resolve = {
        let (bridges, name) = (bridges.clone(), args.bridge.clone());
        Arc::new(move || bridges.find(&name).map(|b| b.switch.clone()))
    };
    std::thread::Builder::new()
        .name("control".into())
        .spawn(move || {
            if let Err(e) = vswd::server::serve(listener, for_server) {
                tracing::error!(error = %e, "the control server stopped");
            }
        })
        .context("cannot start the control thread")?;
    let run_dir = args
        .socket
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    // ovs-appctl's socket: as ovs-vswitchd's when vswd stands in for it (with its
    // pid file, so `ovs-appctl -t ovs-vswitchd` finds it), and `vswd.ctl` always.
    let program = if args.ovsdb.is_some() {
        "ovs-vswitchd"
    } else {
        "vswd"
    };
    let ctl = vswd::unixctl::socket_path(&run_dir, program);
    let stable_ctl = run_dir.join("vswd.ctl");
    let pid_file = run_dir.join("ovs-vswitchd.pid");
    // Held (and locked) until the process ends, as Open vSwitch's daemons hold theirs.
    let mut held_pid_file = None;
    let set_log: vswd::unixctl::SetLog = Box::new(move |level: &str| {
        tracing_subscriber::EnvFilter::try_new(level)
            .map_err(|e| e.to_string())
            .and_then(|f| log_filter.reload(f).map_err(|e| e.to_string()))
    });
    let underlay = Arc::new(vswd::underlay::Underlay::new(bridges.tunnels().clone()));
    // The kernel's routes, read now and again whenever the kernel announces a
    // change (never by the main loop).
    if let Err(e) = underlay.watch() {
        tracing::warn!(error = %e, "cannot listen for the kernel's route changes; routes are read only when asked");
    }
    let unixctl = vswd::unixctl::Context {
        bridges: bridges.clone(),
        underlay: underlay.clone(),
        stop: stop.clone(),
        set_log,
    };
    let mut ctl_file = None;
    match vswd::unixctl::start(&ctl, unixctl) {
        Ok(file) => {
            ctl_file = Some(file);
            // A link (an earlier run's) is replaced; anything else is left alone.
            if std::fs::symlink_metadata(&stable_ctl).is_ok_and(|m| m.file_type().is_symlink()) {
                let _ = std::fs::remove_file(&stable_ctl);
            }
            if let Err(e) = std::os::unix::fs::symlink(&ctl, &stable_ctl) {
                tracing::warn!(path = %stable_ctl.display(), error = %e, "no stable name for the appctl socket");
            }
            if args.ovsdb.is_some() {
                match write_pid_file(&pid_file) {
                    Ok(f) => held_pid_file = Some(f),
                    Err(e) => tracing::warn!(path = %pid_file.display(), error = %e, "no pid file"),
                }
            }
        }
        Err(e) => tracing::warn!(path = %ctl.display(), error = %e, "no ovs-appctl socket"),
    }
    if let Some(target) = &args.ovsdb {
        vswd::ovsdb::start(bridges.clone(), target.clone(), run_dir.clone())
            .context("cannot start the OVSDB client")?;
    }
    tracing::info!(socket = %args.socket.display(), state_file = %args.state_file.display(), bridges = ?bridges.names(), ovsdb = ?args.ovsdb.as_ref().map(ToString::to_string), "vswd ready");
    // With a database, ready once it was first carried out (the OVSDB client says so).
    if args.ovsdb.is_none() {
        vswd::service::ready("forwarding by its state file");
    }

    let mut failed = None;
    'running: while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(LINK_CHECK_INTERVAL);
        underlay.tick(vsw_datapath::clock::now_ms());
        for bridge in bridges.all() {
            let mut sw = bridge.lock();
            // A PMD that panicked took its queues with it, and what it held is in an
            // unknown state: vswd stops (cleanly: ports let go, fast paths removed)
            // and leaves restarting to its supervisor, which starts it afresh from
            // its configuration, rather than running on with part of a datapath gone.
            if let Some((core, why)) = sw.failed_pmd() {
                tracing::error!(
                    bridge = %bridge.name,
                    core,
                    why,
                    "the PMD on core {core} failed; vswd stops (exit status {EXIT_PMD_FAILED}) to be started afresh"
                );
                failed = Some(core);
                break 'running;
            }
            sw.check_links();
            sw.expire_flows();
            sw.sync_ports();
            sw.revalidate_offloads();
        }
    }
    tracing::info!("shutting down");
    vswd::service::stopping();
    bridges.stop_all();
    socket_file.remove(&args.socket);
    // Only what this vswd made: another's live socket is never removed.
    if let Some(file) = ctl_file {
        file.remove(&ctl);
        if std::fs::read_link(&stable_ctl).is_ok_and(|to| to == ctl) {
            let _ = std::fs::remove_file(&stable_ctl);
        }
    }
    if held_pid_file.take().is_some() {
        let _ = std::fs::remove_file(&pid_file);
    }
    // The control thread may be blocked in poll; leaving now ends it with the process.
    std::process::exit(if failed.is_some() { EXIT_PMD_FAILED } else { 0 });
}
