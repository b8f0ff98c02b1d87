//! vswd: the vsw daemon.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use vswd::protocol::{DEFAULT_SOCKET, DEFAULT_STATE_FILE};
use vswd::switch::Switch;

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

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .or_else(|_| tracing_subscriber::EnvFilter::try_new(&args.log))
        .context("bad --log filter")?;
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr)
        .init();

    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone()).context("cannot install signal handlers")?;
    }

    // Read before the daemon's threads are confined (see keep_off_pmd_cores).
    vswd::options::allowed_cpus();
    let switch = Switch::start(&args.state_file, &args.socket.display().to_string())?;
    keep_off_pmd_cores(&switch.pmd_cores());
    let listener = vswd::server::bind(&args.socket)
        .with_context(|| format!("cannot listen on {}", args.socket.display()))?;
    let switch = Arc::new(Mutex::new(switch));
    let for_server = switch.clone();
    std::thread::Builder::new()
        .name("control".into())
        .spawn(move || vswd::server::serve(listener, for_server))
        .context("cannot start the control thread")?;
    tracing::info!(socket = %args.socket.display(), state_file = %args.state_file.display(), "vswd ready");

    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(LINK_CHECK_INTERVAL);
        let mut sw = switch.lock().unwrap_or_else(|e| e.into_inner());
        sw.check_links();
        sw.expire_flows();
        sw.revalidate_offloads();
    }
    tracing::info!("shutting down");
    let mut sw = switch.lock().unwrap_or_else(|e| e.into_inner());
    sw.shutdown();
    let _ = std::fs::remove_file(&args.socket);
    // The control thread may be blocked in accept(); leaving now ends it with the process.
    std::process::exit(0);
}
