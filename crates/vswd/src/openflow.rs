//! The OpenFlow management socket: `<directory of the control socket>/br0.mgmt`,
//! Open vSwitch's convention, so `ovs-ofctl -O OpenFlow13 show unix:/run/vsw/br0.mgmt`
//! works as it does against `ovs-vswitchd`.
//!
//! One thread per connection (at most [`MAX_CONNECTIONS`]): a connection's
//! requests are answered in order, each under the switch's lock for as long as the
//! answer takes; writes give up after [`WRITE_TIMEOUT`], so a peer that stops
//! reading loses its connection and holds up nobody; a peer silent for
//! [`PROBE_INTERVAL`] is sent an echo request and closed if it stays silent as long
//! again. What the protocol says is
//! `vsw_openflow::Session`'s; this module is the socket and the switch's side of it
//! (`vsw_openflow::Bridge`).

use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use vsw_openflow::flow_mod::{BadFlowMod, Command, FlowMod, OFPG_ANY, OFPP_ANY};
use vsw_openflow::flow_stats::{FlowStatsEntry, FlowStatsRequest, OFPTT_ALL};
use vsw_openflow::from_vsw::{instructions_from_actions, oxm_from_match};
use vsw_openflow::ofctl_text::{add_text, delete_text};
use vsw_openflow::port_stats::PortStats;
use vsw_openflow::{Bridge, PortInfo, SwitchDesc};

use crate::protocol::Request;
use crate::switch::Switch;

/// OFPFF_CHECK_OVERLAP: not checked yet, so refused rather than ignored.
const OFPFF_CHECK_OVERLAP: u16 = 1 << 1;

/// The bridge's name: vsw has one switch, named as Open vSwitch's usual first one.
pub const BRIDGE_NAME: &str = "br0";
/// OpenFlow connections at once; more are closed at once.
pub const MAX_CONNECTIONS: usize = 64;
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);
/// A connection silent this long is sent an echo request; silent as long again
/// after it, it is closed (a controller that went away without closing).
pub const PROBE_INTERVAL: Duration = Duration::from_secs(5);

/// Where the management socket goes for a control socket at `control`.
pub fn mgmt_path(control: &Path) -> PathBuf {
    control
        .parent()
        .unwrap_or(Path::new("."))
        .join(format!("{BRIDGE_NAME}.mgmt"))
}

struct SwitchBridge<'a>(&'a mut Switch);

impl Bridge for SwitchBridge<'_> {
    fn datapath_id(&self) -> u64 {
        self.0.datapath_id()
    }

    fn ports(&self) -> Vec<PortInfo> {
        self.0.openflow_ports()
    }

    fn desc(&self) -> SwitchDesc {
        SwitchDesc {
            manufacturer: "vsw".into(),
            hardware: "vsw userspace datapath".into(),
            software: env!("CARGO_PKG_VERSION").into(),
            serial: "None".into(),
            datapath: BRIDGE_NAME.into(),
        }
    }

    /// Through the same requests as `vswctl add-flow` / `del-flows`: the same
    /// tables, the same checks, and the datapath flows revalidated before the
    /// answer — so a barrier after a flow-mod means the datapath too.
    fn flow_mod(&mut self, fm: &FlowMod) -> Result<(), BadFlowMod> {
        let deleting = matches!(fm.command, Command::Delete | Command::DeleteStrict);
        // Filters and flags vsw does not apply yet: refused, never ignored.
        if (deleting
            && (fm.out_port != OFPP_ANY || fm.out_group != OFPG_ANY || fm.cookie_mask != 0))
            || fm.flags & OFPFF_CHECK_OVERLAP != 0
        {
            return Err(BadFlowMod::UnsupportedFilter);
        }
        let req = match fm.command {
            Command::Add => Request::AddFlow {
                flow: add_text(fm)?,
            },
            Command::Delete | Command::DeleteStrict => {
                let strict = fm.command == Command::DeleteStrict;
                let sel = delete_text(fm, strict)?;
                Request::DelFlows {
                    matching: (!sel.is_empty()).then_some(sel),
                    strict,
                }
            }
            Command::Modify | Command::ModifyStrict => return Err(BadFlowMod::BadCommand),
        };
        self.0.handle(req).map(|_| ()).map_err(|e| {
            tracing::info!(error = %e, "OpenFlow flow-mod refused");
            BadFlowMod::Refused
        })
    }

    /// A receive drop is a frame vsw could not take (malformed, truncated, overrun);
    /// a transmit drop one it could not send (queue full, too big, above the MTU).
    /// How long a port has existed is not kept: duration 0.
    fn port_stats(&mut self) -> Vec<PortStats> {
        self.0
            .port_counters()
            .into_iter()
            .map(|(no, s)| PortStats {
                port_no: no,
                rx_packets: s.rx_packets,
                tx_packets: s.tx_packets,
                rx_bytes: s.rx_bytes,
                tx_bytes: s.tx_bytes,
                rx_dropped: s.rx_malformed + s.rx_truncated + s.rx_overrun,
                tx_dropped: s.tx_queue_full + s.tx_too_big + s.tx_mtu_drops,
                rx_errors: 0,
                tx_errors: s.tx_errors,
                duration_ms: 0,
            })
            .collect()
    }

    /// Every flow of the table asked for (or all), with its counters up to now.
    /// Selecting by match, out_port, out_group or cookie is not done yet: refused.
    fn flow_stats(&mut self, req: &FlowStatsRequest) -> Result<Vec<FlowStatsEntry>, BadFlowMod> {
        if req.out_port != OFPP_ANY
            || req.out_group != OFPG_ANY
            || req.cookie_mask != 0
            || !req.matcher.fields.is_empty()
        {
            return Err(BadFlowMod::UnsupportedFilter);
        }
        let (rules, now) = self.0.rules_counted();
        Ok(rules
            .iter()
            .filter(|r| req.table_id == OFPTT_ALL || r.spec.table == req.table_id)
            .map(|r| FlowStatsEntry {
                table_id: r.spec.table,
                duration_ms: r.duration_ms(now),
                priority: r.spec.priority,
                idle_timeout: r.spec.idle_timeout,
                hard_timeout: r.spec.hard_timeout,
                flags: 0,
                importance: 0,
                cookie: 0,
                packet_count: r.stats.packets(),
                byte_count: r.stats.bytes(),
                matcher: oxm_from_match(&r.spec.matcher),
                instructions: instructions_from_actions(&r.spec.actions),
            })
            .collect())
    }
}

/// Accepts connections until the process ends.
pub fn serve(listener: UnixListener, switch: Arc<Mutex<Switch>>) {
    let open = Arc::new(AtomicUsize::new(0));
    for conn in listener.incoming() {
        let Ok(conn) = conn else { continue };
        if open.fetch_add(1, Ordering::AcqRel) >= MAX_CONNECTIONS {
            open.fetch_sub(1, Ordering::AcqRel);
            tracing::warn!("OpenFlow: {MAX_CONNECTIONS} connections already; one more refused");
            continue;
        }
        let (switch, open) = (switch.clone(), open.clone());
        let spawned = std::thread::Builder::new()
            .name("openflow".into())
            .spawn(move || {
                connection(conn, &switch);
                open.fetch_sub(1, Ordering::AcqRel);
            });
        if spawned.is_err() {
            tracing::warn!("OpenFlow: cannot start a connection's thread");
        }
    }
}

fn connection(mut conn: UnixStream, switch: &Mutex<Switch>) {
    let _ = conn.set_write_timeout(Some(WRITE_TIMEOUT));
    let _ = conn.set_read_timeout(Some(PROBE_INTERVAL));
    let ended = vsw_openflow::connection::run(
        &mut conn,
        |session, bytes, out| {
            let mut sw = switch.lock().unwrap_or_else(|e| e.into_inner());
            session.receive(bytes, &mut SwitchBridge(&mut sw), out)
        },
        |e| tracing::debug!(event = ?e, "OpenFlow"),
    );
    tracing::info!(?ended, "OpenFlow connection closed");
}
