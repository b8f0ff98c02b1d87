//! What the Open_vSwitch database asks of vswd, read from a replica of it: the
//! switch options (`Open_vSwitch:other_config`), the bridges and each of their
//! interfaces as a vsw port (type and options in vsw's words). Pure: the sync loop
//! (`mod.rs`) carries it out.

use std::collections::BTreeMap;

use vsw_ovsdb::datum::{integer, map, pairs, set_items, string, uuid, uuids};
use vsw_ovsdb::{Replica, Row};

/// `Open_vSwitch:other_config` keys vsw has, under Open vSwitch's names and meanings
/// (vsw's switch options are named the same). Others are ignored, as Open vSwitch
/// ignores keys it does not know.
pub const SWITCH_KEYS: &[&str] = &[
    "pmd-cpu-mask",
    "pmd-rxq-assign",
    "tx-flush-interval",
    "pmd-sleep-max",
    "emc-insert-inv-prob",
    "hw-offload",
    "offload-rebalance",
    "offload-persist",
    "max-idle",
    "flow-limit",
    "flow-restore-wait",
];

/// Everything the database asks for now.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Desired {
    /// The Open_vSwitch row (there is one) and its `next_cfg`.
    pub root: Option<String>,
    pub next_cfg: i64,
    /// Switch options, `key=value`, for the keys of [`SWITCH_KEYS`] that are set.
    pub switch_options: BTreeMap<String, String>,
    /// The bridges, each once (by name).
    pub bridges: Vec<DesiredBridge>,
    /// Zones' timeout policies: the `timeouts` of the CT_Timeout_Policy each
    /// zone's CT_Zone names, in every Datapath row the root names (vsw has one
    /// datapath: a zone's policy is the datapath's, whatever its type).
    pub ct_timeouts: BTreeMap<u16, BTreeMap<String, i64>>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct DesiredBridge {
    pub uuid: String,
    pub name: String,
    /// `datapath-id`, `fail-mode`, `controller` as vsw's switch options.
    pub options: BTreeMap<String, String>,
    pub interfaces: Vec<DesiredInterface>,
    /// The bridge's Controller rows: (UUID, target).
    pub controllers: Vec<(String, String)>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct DesiredInterface {
    pub uuid: String,
    pub name: String,
    /// vsw's port options, or why the interface cannot be a vsw port.
    pub port: Result<BTreeMap<String, String>, String>,
    /// The number the interface had (`ofport`), to have again when it is made
    /// without an `ofport_request`: a restart keeps numbers, as with ovs-vswitchd.
    pub ofport_hint: Option<u32>,
}

/// Reads what the database asks for; `run_dir` is where Open vSwitch's vhost-user
/// server sockets go.
pub fn desired(r: &Replica, run_dir: &str) -> Desired {
    let mut d = Desired::default();
    let Some((root, ovs)) = r.rows("Open_vSwitch").next() else {
        return d;
    };
    d.root = Some(root.to_string());
    d.next_cfg = ovs.get("next_cfg").and_then(integer).unwrap_or(0);
    if let Some(oc) = ovs.get("other_config") {
        d.switch_options = map(oc)
            .into_iter()
            .filter(|(k, _)| SWITCH_KEYS.contains(&k.as_str()))
            .collect();
    }
    d.ct_timeouts = ct_timeouts(r, ovs);
    for b in ovs.get("bridges").map(uuids).unwrap_or_default() {
        let Some(row) = r.row("Bridge", &b) else {
            continue;
        };
        let Some(name) = row.get("name").and_then(string) else {
            continue;
        };
        // The schema keeps names unique; a replica mid-change might not.
        if d.bridges.iter().any(|o| o.name == name) {
            continue;
        }
        d.bridges.push(DesiredBridge {
            uuid: b.clone(),
            name: name.to_string(),
            options: bridge_options(r, row),
            controllers: controllers(r, row),
            interfaces: bridge_interfaces(r, row)
                .into_iter()
                .map(|(u, i)| interface(&u, i, run_dir))
                .collect(),
        });
    }
    d
}

/// Zones' timeout policies: Datapath:ct_zones → CT_Zone:timeout_policy →
/// CT_Timeout_Policy:timeouts (a reference that leads nowhere is skipped).
fn ct_timeouts(r: &Replica, ovs: &Row) -> BTreeMap<u16, BTreeMap<String, i64>> {
    let mut out = BTreeMap::new();
    let Some(datapaths) = ovs.get("datapaths") else {
        return out;
    };
    for (_, dp) in pairs(datapaths) {
        let Some(zones) = uuid(dp)
            .and_then(|u| r.row("Datapath", u))
            .and_then(|row| row.get("ct_zones"))
        else {
            continue;
        };
        for (zone, z) in pairs(zones) {
            let Some(zone) = zone.as_i64().and_then(|z| u16::try_from(z).ok()) else {
                continue;
            };
            let policy = uuid(z)
                .and_then(|u| r.row("CT_Zone", u))
                .and_then(|row| row.get("timeout_policy"))
                .and_then(|p| uuids(p).into_iter().next())
                .and_then(|u| r.row("CT_Timeout_Policy", &u));
            let Some(policy) = policy else {
                continue;
            };
            let timeouts = policy
                .get("timeouts")
                .map(|t| {
                    pairs(t)
                        .into_iter()
                        .filter_map(|(k, v)| Some((k.as_str()?.to_string(), v.as_i64()?)))
                        .collect()
                })
                .unwrap_or_default();
            out.insert(zone, timeouts);
        }
    }
    out
}

fn bridge_interfaces<'a>(r: &'a Replica, bridge: &Row) -> Vec<(String, &'a Row)> {
    let mut out = Vec::new();
    for p in bridge.get("ports").map(uuids).unwrap_or_default() {
        let Some(port) = r.row("Port", &p) else {
            continue;
        };
        for i in port.get("interfaces").map(uuids).unwrap_or_default() {
            if let Some(row) = r.row("Interface", &i) {
                out.push((i, row));
            }
        }
    }
    out
}

fn controllers(r: &Replica, bridge: &Row) -> Vec<(String, String)> {
    bridge
        .get("controller")
        .map(uuids)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|c| {
            let target = r.row("Controller", &c)?.get("target").and_then(string)?;
            Some((c.clone(), target.to_string()))
        })
        .collect()
}

fn bridge_options(r: &Replica, row: &Row) -> BTreeMap<String, String> {
    let mut o = BTreeMap::new();
    let other = row.get("other_config").map(map).unwrap_or_default();
    if let Some(id) = other.get("datapath-id") {
        o.insert("datapath-id".into(), id.clone());
    }
    if let Some(mode) = row.get("fail_mode").and_then(string) {
        o.insert("fail-mode".into(), mode.to_string());
    }
    // Multicast snooping: the column turns it on, other_config says how.
    if let Some(on) = row.get("mcast_snooping_enable").and_then(|v| v.as_bool()) {
        o.insert("mcast-snooping-enable".into(), on.to_string());
    }
    for key in [
        "mcast-snooping-aging-time",
        "mcast-snooping-table-size",
        "mcast-snooping-disable-flood-unregistered",
    ] {
        if let Some(v) = other.get(key) {
            o.insert(key.into(), v.clone());
        }
    }
    let protocols: Vec<&str> = row
        .get("protocols")
        .map(set_items)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|p| p.as_str())
        .collect();
    if !protocols.is_empty() {
        o.insert("protocols".into(), protocols.join(","));
    }
    let targets: Vec<String> = controllers(r, row).into_iter().map(|(_, t)| t).collect();
    if !targets.is_empty() {
        o.insert("controller".into(), targets.join(","));
    }
    o
}

/// An Interface row as a vsw port: Open vSwitch's types in vsw's words.
fn interface(uuid: &str, row: &Row, run_dir: &str) -> DesiredInterface {
    let name = row
        .get("name")
        .and_then(string)
        .unwrap_or_default()
        .to_string();
    let kind = row.get("type").and_then(string).unwrap_or("");
    let options = row.get("options").map(map).unwrap_or_default();
    let other = row.get("other_config").map(map).unwrap_or_default();
    // The port class that carries the type reads the row's options into its own.
    let classes = vsw_netdev::class::PortClasses::standard();
    let made = match classes.by_ovs_type(kind) {
        Some(class) => class
            .options_of_ovs(&vsw_netdev::class::OvsInterface {
                name: &name,
                options: &options,
                run_dir,
            })
            .map(|o| (class, o)),
        None => Err(format!("vswd does not carry interfaces of type {kind:?}")),
    };
    let (class, mut port) = match made {
        Ok(made) => made,
        Err(why) => {
            return DesiredInterface {
                uuid: uuid.into(),
                name,
                port: Err(why),
                ofport_hint: None,
            }
        }
    };
    // afpacket is the type a port without one has.
    if class.name() != "afpacket" {
        port.insert("type".into(), class.name().into());
    }
    if let Some(n) = row.get("ofport_request").and_then(integer) {
        port.insert("ofport_request".into(), n.to_string());
    }
    let ofport_hint = row
        .get("ofport")
        .and_then(integer)
        .and_then(|n| u32::try_from(n).ok())
        .filter(|n| (1..=crate::options::MAX_PORT_NO).contains(n));
    if let Some(m) = row.get("mtu_request").and_then(integer) {
        port.insert("mtu_request".into(), m.to_string());
    }
    for key in ["pmd-rxq-affinity", "tx-flush-interval"] {
        if let Some(v) = other.get(key) {
            port.insert(key.into(), v.clone());
        }
    }
    DesiredInterface {
        uuid: uuid.into(),
        name,
        port: Ok(port),
        ofport_hint,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn replica() -> Replica {
        let mut r = Replica::default();
        r.apply(&json!({
            "Open_vSwitch": {"root": {"new": {
                "next_cfg": 7,
                "bridges": ["set", [["uuid", "b0"], ["uuid", "b1"]]],
                "other_config": ["map", [["pmd-cpu-mask", "0x2"], ["n-handler-threads", "4"]]],
            }}},
            "Bridge": {
                "b0": {"new": {"name": "br-int", "ports": ["set", [["uuid", "p0"], ["uuid", "p1"]]],
                                "fail_mode": "secure", "mcast_snooping_enable": true,
                                "other_config": ["map", [["datapath-id", "0000000000000001"],
                                                         ["mcast-snooping-aging-time", "60"]]],
                                "controller": ["uuid", "c0"]}},
                "b1": {"new": {"name": "br-ex", "ports": ["uuid", "p2"], "fail_mode": ["set", []],
                                "other_config": ["map", []], "controller": ["set", []]}},
            },
            "Controller": {"c0": {"new": {"target": "tcp:127.0.0.1:6653"}}},
            "Port": {
                "p0": {"new": {"name": "br-int", "interfaces": ["uuid", "i0"]}},
                "p1": {"new": {"name": "vhu1", "interfaces": ["uuid", "i1"]}},
                "p2": {"new": {"name": "eth9", "interfaces": ["uuid", "i2"]}},
            },
            "Interface": {
                "i0": {"new": {"name": "br-int", "type": "internal", "ofport_request": ["set", []],
                               "ofport": 65534, "mtu_request": ["set", []], "options": ["map", []],
                               "other_config": ["map", []]}},
                "i1": {"new": {"name": "vhu1", "type": "dpdkvhostuserclient", "ofport_request": 5,
                               "ofport": ["set", []], "mtu_request": 9000,
                               "options": ["map", [["vhost-server-path", "/run/vm1.sock"]]],
                               "other_config": ["map", [["pmd-rxq-affinity", "0:1"]]]}},
                "i2": {"new": {"name": "eth9", "type": "", "ofport_request": ["set", []],
                               "ofport": 12, "mtu_request": ["set", []],
                               "options": ["map", [["n_rxq_desc", "512"], ["n_txq_desc", "256"]]],
                               "other_config": ["map", []]}},
            },
        }))
        .unwrap();
        r
    }

    #[test]
    fn zones_timeout_policies_are_read_through_their_references() {
        let mut r = replica();
        r.apply(&json!({
            "Open_vSwitch": {"root": {"new": {
                "next_cfg": 7,
                "bridges": ["set", []],
                "datapaths": ["map", [["netdev", ["uuid", "dp"]], ["system", ["uuid", "nowhere"]]]],
            }}},
            "Datapath": {"dp": {"new": {"ct_zones": ["map", [
                [7, ["uuid", "z7"]], [8, ["uuid", "z8"]], [70000, ["uuid", "z7"]],
            ]]}}},
            "CT_Zone": {
                "z7": {"new": {"timeout_policy": ["uuid", "tp"]}},
                "z8": {"new": {"timeout_policy": ["set", []]}},
            },
            "CT_Timeout_Policy": {"tp": {"new": {"timeouts": ["map", [
                ["udp_first", 5], ["tcp_established", 600],
            ]]}}},
        }))
        .unwrap();
        let d = desired(&r, "/run/openvswitch");
        let want: BTreeMap<u16, BTreeMap<String, i64>> = [(
            7,
            [
                ("tcp_established".to_string(), 600),
                ("udp_first".to_string(), 5),
            ]
            .into(),
        )]
        .into();
        assert_eq!(
            d.ct_timeouts, want,
            "zone 8 has no policy; 70000 is no zone"
        );
    }

    #[test]
    fn the_database_reads_as_vsw_ports_and_options() {
        let d = desired(&replica(), "/run/openvswitch");
        assert_eq!(d.next_cfg, 7);
        assert_eq!(
            d.switch_options,
            BTreeMap::from([("pmd-cpu-mask".to_string(), "0x2".to_string())]),
            "unknown keys are ignored"
        );
        assert_eq!(d.bridges.len(), 2, "every bridge");
        let b = &d.bridges[0];
        assert_eq!(b.name, "br-int");
        assert_eq!(b.options["fail-mode"], "secure");
        assert_eq!(b.options["datapath-id"], "0000000000000001");
        assert_eq!(b.options["mcast-snooping-enable"], "true");
        assert_eq!(b.options["mcast-snooping-aging-time"], "60");
        assert_eq!(b.options["controller"], "tcp:127.0.0.1:6653");
        assert_eq!(
            b.controllers,
            vec![("c0".to_string(), "tcp:127.0.0.1:6653".to_string())]
        );
        let by_name = |n: &str| {
            b.interfaces
                .iter()
                .find(|i| i.name == n)
                .unwrap()
                .port
                .clone()
        };
        let local = by_name("br-int").unwrap();
        assert_eq!(local["type"], "internal");
        assert!(
            !local.contains_key("ofport_request"),
            "LOCAL is numbered by its name"
        );
        assert_eq!(b.interfaces[0].ofport_hint, None);
        let vhu = by_name("vhu1").unwrap();
        assert_eq!(vhu["type"], "vhostuserclient");
        assert_eq!(vhu["vhost-server-path"], "/run/vm1.sock");
        assert_eq!(vhu["ofport_request"], "5");
        assert_eq!(vhu["mtu_request"], "9000");
        assert_eq!(vhu["pmd-rxq-affinity"], "0:1");
        // The other bridge, with its options unset.
        let b = &d.bridges[1];
        assert_eq!(b.name, "br-ex");
        assert!(b.options.is_empty(), "{:?}", b.options);
        let eth9 = b.interfaces[0].port.as_ref().unwrap();
        assert!(!eth9.contains_key("type"));
        assert_eq!(eth9["rx-ring-frames"], "512", "n_rxq_desc");
        assert_eq!(eth9["tx-ring-frames"], "256", "n_txq_desc");
        assert_eq!(b.interfaces[0].ofport_hint, Some(12), "the number it had");
    }

    #[test]
    fn interfaces_vsw_cannot_carry_say_why() {
        let mut r = replica();
        r.apply(
            &json!({"Interface": {"i2": {"new": {"name": "eth9", "type": "gre",
            "options": ["map", []], "other_config": ["map", []]}}}}),
        )
        .unwrap();
        let d = desired(&r, "/run/openvswitch");
        let e = d.bridges[1].interfaces[0].port.clone().unwrap_err();
        assert!(e.contains("gre"), "{e}");
        // A VXLAN port with Open vSwitch's options, in vsw's words (the same).
        r.apply(
            &json!({"Interface": {"i2": {"new": {"name": "vx0", "type": "vxlan",
            "options": ["map", [["remote_ip", "198.18.5.1"], ["key", "42"], ["other", "x"]]],
            "other_config": ["map", []]}}}}),
        )
        .unwrap();
        let d = desired(&r, "/run/openvswitch");
        let p = d.bridges[1].interfaces[0].port.clone().unwrap();
        assert_eq!(p["type"], "vxlan");
        assert_eq!(
            (p["remote_ip"].as_str(), p["key"].as_str()),
            ("198.18.5.1", "42")
        );
        assert!(!p.contains_key("other"), "only tunnel options");
        // A patch port is carried with its peer; without one it says so.
        r.apply(
            &json!({"Interface": {"i2": {"new": {"name": "eth9", "type": "patch",
            "options": ["map", [["peer", "patch-int"]]], "other_config": ["map", []]}}}}),
        )
        .unwrap();
        let d = desired(&r, "/run/openvswitch");
        let p = d.bridges[1].interfaces[0].port.clone().unwrap();
        assert_eq!(
            (p["type"].as_str(), p["peer"].as_str()),
            ("patch", "patch-int")
        );
        r.apply(
            &json!({"Interface": {"i2": {"new": {"name": "eth9", "type": "patch",
            "options": ["map", []], "other_config": ["map", []]}}}}),
        )
        .unwrap();
        let d = desired(&r, "/run/openvswitch");
        let e = d.bridges[1].interfaces[0].port.clone().unwrap_err();
        assert!(e.contains("options:peer"), "{e}");
        // An empty database asks for nothing.
        assert_eq!(desired(&Replica::default(), "/run"), Desired::default());
    }

    mod hostile {
        use super::*;
        use proptest::prelude::*;
        use serde_json::Value;

        const UUIDS: &[&str] = &["u1", "u2", "u3"];
        const COLUMNS: &[&str] = &[
            "name",
            "ports",
            "interfaces",
            "bridges",
            "type",
            "options",
            "ofport",
            "ofport_request",
            "mtu_request",
            "other_config",
            "next_cfg",
            "controller",
            "target",
            "fail_mode",
            "protocols",
            "mcast_snooping_enable",
            "datapaths",
            "ct_zones",
            "timeout_policy",
            "timeouts",
        ];

        /// Any datum-looking value: atoms, UUID references to the rows there are,
        /// sets and maps, and things that are none of those.
        fn datum() -> impl Strategy<Value = Value> {
            let atom = prop_oneof![
                Just(Value::Null),
                any::<bool>().prop_map(Value::from),
                any::<i64>().prop_map(Value::from),
                "[a-z0-9:/._-]{0,12}".prop_map(Value::from),
                proptest::sample::select(UUIDS).prop_map(|u| json!(["uuid", u])),
            ];
            atom.prop_recursive(3, 32, 4, |inner| {
                prop_oneof![
                    proptest::collection::vec(inner.clone(), 0..4).prop_map(|v| json!(["set", v])),
                    proptest::collection::vec((inner.clone(), inner.clone()), 0..4).prop_map(
                        |kv| json!([
                            "map",
                            kv.into_iter()
                                .map(|(k, v)| json!([k, v]))
                                .collect::<Vec<_>>()
                        ])
                    ),
                    proptest::collection::vec(inner, 0..4).prop_map(Value::Array),
                ]
            })
        }

        /// A table-updates value over the tables vswd reads.
        fn updates() -> impl Strategy<Value = Value> {
            let table = proptest::sample::select(
                &[
                    "Open_vSwitch",
                    "Bridge",
                    "Port",
                    "Interface",
                    "Controller",
                    "Datapath",
                    "CT_Zone",
                    "CT_Timeout_Policy",
                ][..],
            );
            let row = proptest::collection::btree_map(
                proptest::sample::select(COLUMNS).prop_map(str::to_string),
                datum(),
                0..6,
            );
            let change = (any::<bool>(), row).prop_map(|(delete, row)| {
                if delete {
                    json!({"old": row})
                } else {
                    json!({"new": row})
                }
            });
            proptest::collection::vec((table, proptest::sample::select(UUIDS), change), 1..6)
                .prop_map(|changes| {
                    let mut u = serde_json::Map::new();
                    for (t, uuid, c) in changes {
                        let entry = u.entry(t.to_string()).or_insert_with(|| json!({}));
                        entry[uuid] = c;
                    }
                    Value::Object(u)
                })
        }

        proptest! {
            /// Whatever a server sends, vswd reads it or refuses it; it never panics,
            /// and what it asks for names only interfaces the database has.
            #[test]
            fn any_database_reads_without_panicking(batches in proptest::collection::vec(updates(), 1..5)) {
                let mut r = Replica::default();
                for u in &batches {
                    let _ = r.apply(u);
                    let d = desired(&r, "/run/openvswitch");
                    for b in &d.bridges {
                        for i in &b.interfaces {
                            prop_assert!(r.row("Interface", &i.uuid).is_some());
                        }
                    }
                }
            }
        }
    }
}
