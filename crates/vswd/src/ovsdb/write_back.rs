//! What vswd writes back to the database, as ovs-vswitchd does: each interface's
//! `ofport`, `error`, `admin_state`, `link_state`, `mtu`, `mac_in_use`, link facts
//! and (every 5 s) `statistics`; each controller's `is_connected` and `status`; the
//! bridge's `datapath_id`; each Datapath row's `capabilities`; and `iface_types`,
//! `datapath_types` and `cur_cfg` — only
//! the columns that differ from what the database holds, in one transaction that
//! asserts the lock.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{json, Value};
use vsw_ovsdb::datum::{make_map, make_set};
use vsw_ovsdb::{Client, OvsdbError, Replica};
use vsw_protocol::PortLink;

use super::config::Desired;
use super::link::LinkFacts;
use super::{lock_assert, update, Sync, DB, SYS_CLASS_NET};

impl Sync {
    /// Writes what came of the configuration: interfaces' columns that changed,
    /// statistics when `stats`, the bridge's datapath id, and `cur_cfg`.
    pub(super) fn write_back(
        &mut self,
        c: &Client,
        replica: &Replica,
        d: &Desired,
        stats: bool,
    ) -> Result<(), OvsdbError> {
        let Some(root) = &d.root else {
            return Ok(());
        };
        let mut ops = Vec::new();
        for b in &d.bridges {
            let running = self.bridges.get(&b.name);
            let (infos, of_ports, dpid) = match &running {
                Some(rb) => {
                    let sw = rb.lock();
                    (sw.port_infos(), sw.openflow_ports(), Some(sw.datapath_id()))
                }
                None => (Vec::new(), Vec::new(), None),
            };
            let made = self.applied.get(&b.name).map(|a| &a.ports);
            for i in &b.interfaces {
                let (uuid, name) = (i.uuid.as_str(), i.name.as_str());
                let info = (!self.errors.contains_key(uuid))
                    .then(|| infos.iter().find(|p| p.name == name))
                    .flatten();
                let mut row = serde_json::Map::new();
                match info {
                    Some(p) => {
                        let no = i64::from(p.no);
                        // An interface's states are the kernel's (a tap nobody brought
                        // up has no carrier, as Open vSwitch reports it); other ports'
                        // are vsw's.
                        let kernel = made
                            .and_then(|m| m.get(name))
                            .is_some_and(is_interface)
                            .then(|| LinkFacts::read(Path::new(SYS_CLASS_NET), name));
                        let up = p.link == PortLink::Up
                            && kernel.and_then(|k| k.carrier).unwrap_or(true);
                        // An interface that is not there is the error Open vSwitch
                        // reports; a link that is down is only that.
                        let missing = p.link == PortLink::NoDevice;
                        row.insert("ofport".into(), json!(no));
                        row.insert(
                            "error".into(),
                            if missing {
                                json!(format!(
                                    "could not open network device {name} (No such device)"
                                ))
                            } else {
                                make_set(vec![])
                            },
                        );
                        let admin_up = !missing && kernel.and_then(|k| k.admin_up).unwrap_or(true);
                        row.insert(
                            "admin_state".into(),
                            json!(if admin_up { "up" } else { "down" }),
                        );
                        row.insert("link_state".into(), json!(if up { "up" } else { "down" }));
                        if let Some(m) = p.mtu {
                            row.insert("mtu".into(), json!(m));
                        }
                        if let Some(i) = p.ifindex {
                            row.insert("ifindex".into(), json!(i));
                        }
                        // A vhost-user port's socket and who listens on it, as OVS says.
                        if let Some(path) = &p.vhost_server_path {
                            let client = made
                                .and_then(|m| m.get(name))
                                .and_then(|o| o.get("type"))
                                .is_some_and(|t| t == "vhostuserclient");
                            let mode = if client { "client" } else { "server" };
                            row.insert(
                                "status".into(),
                                make_map([
                                    ("mode".to_string(), mode.to_string()),
                                    ("vhost-server-path".to_string(), path.clone()),
                                ]),
                            );
                        }
                        if let Some(of) = of_ports.iter().find(|o| o.name == name) {
                            let mac = of
                                .hw_addr
                                .iter()
                                .map(|b| format!("{b:02x}"))
                                .collect::<Vec<_>>()
                                .join(":");
                            row.insert("mac_in_use".into(), json!(mac));
                        }
                        // The link as the kernel reports it (only what changed is
                        // written).
                        if let Some(facts) = kernel.filter(|_| p.ifindex.is_some()) {
                            row.insert(
                                "link_speed".into(),
                                facts
                                    .speed_bps
                                    .map_or_else(|| make_set(vec![]), |b| json!(b)),
                            );
                            row.insert(
                                "duplex".into(),
                                facts.full_duplex.map_or_else(
                                    || make_set(vec![]),
                                    |full| json!(if full { "full" } else { "half" }),
                                ),
                            );
                            if let Some(n) = facts.carrier_changes {
                                let base = *self.carrier_base.entry(uuid.to_string()).or_insert(n);
                                row.insert("link_resets".into(), json!(n.saturating_sub(base)));
                            }
                        }
                        if stats {
                            let s = &p.stats;
                            let st = make_map([
                                ("rx_bytes".to_string(), s.rx_bytes),
                                ("rx_dropped".to_string(), s.rx_overrun),
                                ("rx_errors".to_string(), s.rx_malformed + s.rx_truncated),
                                ("rx_packets".to_string(), s.rx_packets),
                                ("tx_bytes".to_string(), s.tx_bytes),
                                ("tx_dropped".to_string(), s.tx_queue_full + s.tx_mtu_drops),
                                ("tx_errors".to_string(), s.tx_errors + s.tx_too_big),
                                ("tx_packets".to_string(), s.tx_packets),
                            ]);
                            if self.written_stats.get(uuid) != Some(&st) {
                                self.written_stats.insert(uuid.to_string(), st.clone());
                                ops.push(update("Interface", uuid, json!({ "statistics": st })));
                            }
                        }
                    }
                    None => {
                        let why = self
                            .errors
                            .get(uuid)
                            .cloned()
                            .unwrap_or_else(|| "not a port of this switch".into());
                        row.insert("ofport".into(), json!(-1));
                        row.insert("error".into(), json!(why));
                        row.insert("admin_state".into(), make_set(vec![]));
                        row.insert("link_state".into(), make_set(vec![]));
                    }
                }
                // Only what differs from what the database holds.
                let current = replica.row("Interface", uuid);
                row.retain(|k, v| current.and_then(|r| r.get(k)) != Some(v));
                if !row.is_empty() {
                    ops.push(update("Interface", uuid, Value::Object(row)));
                }
            }
            if let (Some(rb), Some(dpid)) = (&running, dpid) {
                for (uuid, target) in &b.controllers {
                    let status = rb.openflow.controller_status(target);
                    let up = status.as_ref().is_some_and(|s| s.connected);
                    let mut st = vec![(
                        "state".to_string(),
                        if up { "ACTIVE" } else { "BACKOFF" }.to_string(),
                    )];
                    // As Open vSwitch says why a controller is not connected.
                    if let Some(why) = status.and_then(|s| s.unusable) {
                        st = vec![
                            ("last_error".to_string(), why),
                            ("state".to_string(), "VOID".to_string()),
                        ];
                    }
                    let mut row = serde_json::Map::new();
                    row.insert("is_connected".into(), json!(up));
                    row.insert("status".into(), make_map(st));
                    let current = replica.row("Controller", uuid);
                    row.retain(|k, v| current.and_then(|r| r.get(k)) != Some(v));
                    if !row.is_empty() {
                        ops.push(update("Controller", uuid, Value::Object(row)));
                    }
                }
                let id = json!(format!("{dpid:016x}"));
                if replica
                    .row("Bridge", &b.uuid)
                    .and_then(|r| r.get("datapath_id"))
                    != Some(&id)
                {
                    ops.push(update("Bridge", &b.uuid, json!({ "datapath_id": id })));
                }
            }
        }
        let root_row = replica.row("Open_vSwitch", root);
        let mut root_cols = serde_json::Map::new();
        // The interface types the port classes carry.
        let types = make_set(
            vsw_netdev::class::PortClasses::standard()
                .ovs_types()
                .into_iter()
                .map(|t| json!(t))
                .collect(),
        );
        let dp_types = json!("netdev");
        if root_row.and_then(|r| r.get("iface_types")) != Some(&types) {
            root_cols.insert("iface_types".into(), types);
        }
        if root_row.and_then(|r| r.get("datapath_types")) != Some(&dp_types) {
            root_cols.insert("datapath_types".into(), dp_types);
        }
        if root_row.and_then(|r| r.get("cur_cfg")) != Some(&json!(d.next_cfg)) {
            root_cols.insert("cur_cfg".into(), json!(d.next_cfg));
        }
        if !root_cols.is_empty() {
            ops.push(update("Open_vSwitch", root, Value::Object(root_cols)));
        }
        // Every Datapath row the root names (ovn-controller makes one for its
        // integration bridge's type and reads what the datapath can do there).
        let caps = capabilities();
        for uuid in datapath_rows(root_row) {
            let current = replica
                .row("Datapath", &uuid)
                .and_then(|r| r.get("capabilities"));
            if current != Some(&caps) {
                ops.push(update("Datapath", &uuid, json!({ "capabilities": caps })));
            }
        }
        if ops.is_empty() {
            return Ok(());
        }
        ops.insert(0, lock_assert());
        match c.transact(DB, ops) {
            Ok(_) => Ok(()),
            // Refused (a constraint, a conflict): nothing of it was written. It
            // is written again from the replica as it is then, at the next look
            // (within LINK_INTERVAL) or the next change, whichever comes first.
            Err(e @ OvsdbError::Transaction { .. }) => {
                tracing::info!(error = %e, "writing back to the database failed; written again shortly");
                Ok(())
            }
            Err(e) => Err(e),
        }
    }
}

/// What vsw's datapath can do, in the keys and words ovs-vswitchd writes to a
/// Datapath row's `capabilities` (ofproto-dpif's `get_datapath_cap`): only what
/// works says `true` (so OVN, reading `ct_zero_snat` false, does not count on an
/// all-zero SNAT, and reading `ct_flush` true, flushes a load balancer's backend
/// by its tuple).
pub(super) fn capabilities() -> Value {
    let yes_no = |b: bool| if b { "true" } else { "false" }.to_string();
    make_map(
        [
            ("add_mpls", yes_no(true)),
            ("check_pkt_len", yes_no(true)),
            ("clone", yes_no(true)),
            ("ct_clear", yes_no(true)),
            ("ct_eventmask", yes_no(false)),
            ("ct_flush", yes_no(true)),
            ("ct_label", yes_no(true)),
            ("ct_mark", yes_no(true)),
            ("ct_orig_tuple", yes_no(true)),
            ("ct_orig_tuple6", yes_no(true)),
            ("ct_state", yes_no(true)),
            ("ct_state_nat", yes_no(true)),
            ("ct_timeout", yes_no(false)),
            ("ct_zero_snat", yes_no(false)),
            ("ct_zone", yes_no(true)),
            ("explicit_drop_action", yes_no(false)),
            ("lb_output_action", yes_no(false)),
            ("masked_set_action", yes_no(true)),
            // The datapath's hash reads addresses and ports, not symmetrically
            // (Open vSwitch's OVS_HASH_ALG_SYM_L4 is 1).
            ("max_hash_alg", "0".to_string()),
            // The key holds the outermost label stack entry, and two VLAN tags.
            ("max_mpls_depth", "1".to_string()),
            ("max_vlan_headers", "2".to_string()),
            ("nd_ext", yes_no(false)),
            ("psample", yes_no(false)),
            ("recirc", yes_no(true)),
            ("sample_nesting", yes_no(false)),
            ("tnl_push_pop", yes_no(true)),
            ("trunc", yes_no(true)),
            ("ufid", yes_no(true)),
        ]
        .map(|(k, v)| (k.to_string(), v)),
    )
}

/// The Datapath rows the root's `datapaths` map names.
fn datapath_rows(root: Option<&vsw_ovsdb::Row>) -> Vec<String> {
    let Some(Value::Array(map)) = root.and_then(|r| r.get("datapaths")) else {
        return Vec::new();
    };
    // ["map", [[type, ["uuid", U]], …]]
    let pairs = match map.as_slice() {
        [tag, Value::Array(pairs)] if tag == "map" => pairs,
        _ => return Vec::new(),
    };
    pairs
        .iter()
        .filter_map(|pair| match pair.as_array()?.as_slice() {
            [_, Value::Array(uuid)] => match uuid.as_slice() {
                [tag, Value::String(u)] if tag == "uuid" => Some(u.clone()),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

/// Whether a port made with these options is a Linux interface (its link is the
/// kernel's to report): an afpacket port (Open vSwitch's `system`), a tap, an
/// internal port.
fn is_interface(options: &BTreeMap<String, String>) -> bool {
    matches!(
        options.get("type").map(String::as_str),
        None | Some("afpacket" | "tap" | "internal")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_datapath_rows_are_read_from_the_root_whatever_it_holds() {
        let row = |v: Value| {
            let mut r = vsw_ovsdb::Row::new();
            r.insert("datapaths".into(), v);
            r
        };
        let good = row(json!([
            "map",
            [["netdev", ["uuid", "u1"]], ["system", ["uuid", "u2"]]]
        ]));
        assert_eq!(datapath_rows(Some(&good)), vec!["u1", "u2"]);
        for hostile in [
            json!(["map", []]),
            json!(["set", [["netdev", ["uuid", "u1"]]]]),
            json!(["map", [["netdev", "u1"], ["x"], 7]]),
            json!("netdev"),
            json!(["map", [["netdev", ["named-uuid", "u1"]]]]),
        ] {
            assert!(
                datapath_rows(Some(&row(hostile.clone()))).is_empty(),
                "{hostile}"
            );
        }
        assert!(datapath_rows(None).is_empty());
        // Sorted by key, as the database keeps a map: written once, not at every look.
        let Value::Array(caps) = capabilities() else {
            panic!()
        };
        let keys: Vec<&str> = caps[1]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p[0].as_str().unwrap())
            .collect();
        let mut sorted = keys.clone();
        sorted.sort_unstable();
        assert_eq!(keys, sorted);
    }
}
