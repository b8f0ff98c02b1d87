//! The real `ovs-ofctl` (Debian's openvswitch-common, which scripts/setup.sh
//! installs) against a session served on a unix socket, as vswd will serve
//! `<run dir>/br0.mgmt`.

use std::io::Write;
use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::process::Command;

use vsw_openflow::flow_mod::{BadFlowMod, FlowMod};
use vsw_openflow::flow_stats::FlowStatsRequest;
use vsw_openflow::{Bridge, PortInfo, SwitchDesc};

struct TwoPorts;

impl Bridge for TwoPorts {
    fn datapath_id(&self) -> u64 {
        0x0000_0000_0000_00ab
    }
    fn ports(&self) -> Vec<PortInfo> {
        (1..=2)
            .map(|n| PortInfo {
                port_no: n,
                hw_addr: [2, 0, 0, 0, 0, n as u8],
                name: format!("vm{n}"),
                admin_down: false,
                link_up: n == 1,
                curr_speed_kbps: 10_000_000,
                max_speed_kbps: 0,
            })
            .collect()
    }
    fn desc(&self) -> SwitchDesc {
        SwitchDesc {
            manufacturer: "vsw".into(),
            hardware: "vsw".into(),
            software: "vsw test".into(),
            serial: "None".into(),
            datapath: "br0".into(),
        }
    }
    fn flow_mod(&mut self, _: &FlowMod) -> Result<(), BadFlowMod> {
        Err(BadFlowMod::Refused)
    }
    fn flow_stats(
        &mut self,
        _: &FlowStatsRequest,
    ) -> Result<vsw_openflow::FlowStatsIter, BadFlowMod> {
        Ok(Box::new(std::iter::empty()))
    }
    fn packet_out(&mut self, _: &vsw_openflow::PacketOut) -> Result<(), vsw_openflow::Refusal> {
        Ok(())
    }
    fn resume(&mut self, _: &vsw_openflow::packet::Resume) -> Result<(), vsw_openflow::Refusal> {
        Ok(())
    }
    fn table_stats(&mut self, _: u8) -> Vec<vsw_openflow::table_stats::TableStats> {
        Vec::new()
    }
    fn group_mod(
        &mut self,
        _: &vsw_openflow::group_mod::GroupMod,
    ) -> Result<(), vsw_openflow::group_mod::BadGroupMod> {
        Ok(())
    }
    fn group_stats(&mut self, _: u32) -> Vec<vsw_openflow::group_mod::GroupStatsEntry> {
        Vec::new()
    }
    fn group_desc(&mut self, _: u32) -> Vec<vsw_openflow::group_mod::GroupDescEntry> {
        Vec::new()
    }
    fn meter_mod(
        &mut self,
        _: &vsw_openflow::meter_mod::MeterMod,
    ) -> Result<(), vsw_openflow::meter_mod::BadMeterMod> {
        Ok(())
    }
    fn meter_stats(&mut self, _: u32) -> Vec<vsw_openflow::meter_mod::MeterStatsEntry> {
        Vec::new()
    }
    fn meter_config(&mut self, _: u32) -> Vec<vsw_openflow::meter_mod::MeterConfigEntry> {
        Vec::new()
    }
    fn port_stats(&mut self) -> Vec<vsw_openflow::port_stats::PortStats> {
        Vec::new()
    }
}

/// Serves every connection on `path` with a session, each in a thread of its own.
fn serve(path: &PathBuf) {
    let _ = std::fs::remove_file(path);
    let listener = UnixListener::bind(path).expect("bind");
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let Ok(mut writer) = conn.try_clone() else {
                continue;
            };
            std::thread::spawn(move || {
                vsw_openflow::connection::run(
                    vsw_openflow::Session::new(),
                    &mut conn,
                    |bytes| writer.write_all(bytes),
                    |s, bytes, out| s.receive(bytes, &mut TwoPorts, out),
                    |_| {},
                );
            });
        }
    });
}

fn ofctl(args: &[&str]) -> std::process::Output {
    Command::new("ovs-ofctl")
        .args(["-t", "5"])
        .args(args)
        .output()
        .expect("ovs-ofctl (apt-get install openvswitch-common; scripts/setup.sh does)")
}

#[test]
fn ovs_ofctl_negotiates_probes_and_reads_the_configuration() {
    let path = std::env::temp_dir().join(format!("vsw-of-{}.mgmt", std::process::id()));
    serve(&path);
    let target = format!("unix:{}", path.display());
    for version in [
        "OpenFlow13",
        "OpenFlow14",
        "OpenFlow15",
        "OpenFlow10,OpenFlow13",
    ] {
        let out = ofctl(&["-O", version, "probe", &target]);
        assert!(
            out.status.success(),
            "probe with {version}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let out = ofctl(&["-O", "OpenFlow13", "get-frags", &target]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "normal");
    // `show`: features, the port description (64-byte ports in 1.3, ports with an
    // Ethernet property in 1.5) and the configuration.
    for version in ["OpenFlow13", "OpenFlow15"] {
        let out = ofctl(&["-O", version, "show", &target]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{version}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(text.contains("dpid:00000000000000ab"), "{text}");
        assert!(text.contains("n_tables:254"), "{text}");
        assert!(text.contains(" 1(vm1): addr:02:00:00:00:00:01"), "{text}");
        assert!(text.contains(" 2(vm2): addr:02:00:00:00:00:02"), "{text}");
        assert!(text.contains("LINK_DOWN"), "port 2's link: {text}");
        assert!(text.contains("10000 Mbps now"), "{text}");
    }
    let out = ofctl(&["-O", "OpenFlow13", "dump-desc", &target]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("Software: vsw test") && text.contains("DP Description: br0"),
        "{text}"
    );
    // Without -O, ovs-ofctl speaks only 1.0: the ports are in the features reply.
    let out = ofctl(&["show", &target]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("OFPT_FEATURES_REPLY (xid="), "{text}");
    assert!(text.contains("dpid:00000000000000ab"), "{text}");
    assert!(text.contains(" 2(vm2): addr:02:00:00:00:00:02"), "{text}");
    assert!(text.contains("10GB-FD"), "port 2's speed: {text}");
    assert!(text.contains("OFPT_GET_CONFIG_REPLY"), "{text}");
    // 1.1 and 1.2: the ports in the features reply too (a 64-byte ofp_port, as
    // 1.3's).
    for (version, name) in [("OpenFlow11", "OF1.1"), ("OpenFlow12", "OF1.2")] {
        let out = ofctl(&["-O", version, "show", &target]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            text.contains(&format!("OFPT_FEATURES_REPLY ({name})")),
            "{text}"
        );
        assert!(text.contains(" 2(vm2): addr:02:00:00:00:00:02"), "{text}");
        assert!(text.contains("10000 Mbps now"), "{text}");
    }
    let _ = std::fs::remove_file(&path);
}

/// How `ovs-ofctl ofp-print` reads a message vsw writes.
fn ofp_print(message: &[u8]) -> String {
    let hex: String = message.iter().map(|b| format!("{b:02x}")).collect();
    let out = Command::new("ovs-ofctl")
        .args(["ofp-print", &hex])
        .output()
        .expect("ovs-ofctl ofp-print");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Messages vsw sends a 1.0 connection, as Open vSwitch's own decoder reads them.
#[test]
fn open_vswitch_reads_the_1_0_and_nicira_messages_vsw_sends() {
    use vsw_openflow::flow_stats::FlowRemoved;
    use vsw_openflow::oxm::{OxmField, OxmMatch};
    use vsw_openflow::oxs::FlowCounts;
    use vsw_openflow::{Message, PacketIn};
    let reg3 = OxmField {
        field: vsw_openflow::oxm::REG0 + 3,
        value: vec![0, 0, 0, 0x2a],
        mask: None,
    };
    let frame = [
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 2, 2, 2, 2, 2, 0x08, 0x06,
    ];
    let pi = PacketIn::of_frame(&frame, 2, 1, 3, 9, 0xffff, vec![reg3.clone()]);
    let text = ofp_print(&Message::NxPacketIn(pi.clone()).encode(1, 5));
    assert!(
        text.contains("NXT_PACKET_IN (xid=0x5): table_id=3 cookie=0x9 total_len=14 reg3=0x2a,in_port=2 (via action)"),
        "{text}"
    );
    let text = ofp_print(&Message::PacketIn(pi).encode(1, 6));
    assert!(
        text.contains("OFPT_PACKET_IN (xid=0x6): total_len=14 in_port=2 (via action)"),
        "{text}"
    );
    let removed = FlowRemoved {
        table_id: 4,
        reason: 0,
        priority: 7,
        idle_timeout: 10,
        hard_timeout: 0,
        cookie: 0x11,
        matcher: OxmMatch {
            fields: vec![
                reg3,
                OxmField {
                    field: 5,
                    value: vec![8, 0],
                    mask: None,
                },
            ],
        },
        counts: FlowCounts {
            duration_ms: 2500,
            idle_ms: 0,
            packets: 3,
            bytes: 180,
        },
    };
    let text = ofp_print(&Message::NxFlowRemoved(removed.clone()).encode(1, 7));
    assert!(
        text.contains("NXT_FLOW_REMOVED (xid=0x7): priority=7,ip,reg3=0x2a reason=idle table_id=4 cookie:0x11 duration2.500s idle10 pkts3 bytes180"),
        "{text}"
    );
    let text = ofp_print(&Message::FlowRemoved(removed).encode(1, 8));
    assert!(
        text.contains("OFPT_FLOW_REMOVED (xid=0x8): priority=7,ip reason=idle cookie:0x11 duration2.500s idle10 pkts3 bytes180"),
        "{text}"
    );
}

/// Messages vsw writes in OpenFlow 1.1, as Open vSwitch's own decoder reads them:
/// the packet-in that names its ports, the flow removal and the flow-mod with the
/// 88-byte `ofp11_match` and 1.1's own set actions — an independent check of the
/// layouts vsw's 1.1 reader and writer share.
#[test]
fn open_vswitch_reads_the_1_1_messages_vsw_writes() {
    use vsw_openflow::flow_mod::{Action, Command, FlowMod, Instruction};
    use vsw_openflow::flow_stats::FlowRemoved;
    use vsw_openflow::oxm::{OxmField, OxmMatch};
    use vsw_openflow::oxs::FlowCounts;
    use vsw_openflow::{Message, PacketIn};
    let field = |field: u8, value: &[u8], mask: Option<&[u8]>| OxmField {
        field,
        value: value.to_vec(),
        mask: mask.map(<[u8]>::to_vec),
    };
    let frame = [
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 2, 2, 2, 2, 2, 0x08, 0x06,
    ];
    let pi = PacketIn::of_frame(&frame, 2, 1, 3, 9, 0xffff, Vec::new());
    let text = ofp_print(&Message::PacketIn(pi).encode(2, 6));
    assert!(
        text.contains(
            "OFPT_PACKET_IN (OF1.1) (xid=0x6): table_id=3 total_len=14 in_port=2 (via action)"
        ),
        "{text}"
    );
    let udp = vec![
        field(5, &[8, 0], None),
        field(10, &[17], None),
        field(11, &[198, 18, 0, 0], Some(&[255, 255, 0, 0])),
        field(16, &[0, 53], None),
    ];
    let removed = FlowRemoved {
        table_id: 4,
        reason: 0,
        priority: 7,
        idle_timeout: 10,
        hard_timeout: 0,
        cookie: 0x11,
        matcher: OxmMatch {
            fields: udp.clone(),
        },
        counts: FlowCounts {
            duration_ms: 2500,
            idle_ms: 0,
            packets: 3,
            bytes: 180,
        },
    };
    let text = ofp_print(&Message::FlowRemoved(removed).encode(2, 7));
    assert!(
        text.contains("OFPT_FLOW_REMOVED (OF1.1) (xid=0x7): priority=7,udp,nw_src=198.18.0.0/16,tp_dst=53 reason=idle table_id=4 cookie:0x11 duration2.500s idle10 pkts3 bytes180"),
        "{text}"
    );
    let set = |f: u8, v: &[u8]| Action::SetField(field(f, v, None));
    let fm = FlowMod {
        table_id: 1,
        priority: 100,
        instructions: vec![Instruction::ApplyActions(vec![
            set(6, &[0x10, 9]),
            set(4, &[2, 0, 0, 0, 0, 8]),
            set(12, &[198, 18, 0, 2]),
            set(8, &[10]),
            set(9, &[1]),
            set(15, &[0, 99]),
            Action::Output {
                port: 2,
                max_len: 0,
            },
        ])],
        ..FlowMod::new(
            Command::Add,
            OxmMatch {
                fields: vec![
                    field(0, &[0, 0, 0, 3], None),
                    field(6, &[0x10, 10], None),
                    field(7, &[5], None),
                ]
                .into_iter()
                .chain(udp)
                .collect(),
            },
        )
    };
    let text = ofp_print(&Message::FlowMod(fm).encode(2, 8));
    assert!(
        text.contains("OFPT_FLOW_MOD (OF1.1) (xid=0x8): ADD table:1 priority=100,udp,in_port=3,dl_vlan=10,dl_vlan_pcp=5,nw_src=198.18.0.0/16,tp_dst=53"),
        "{text}"
    );
    assert!(
        text.contains("actions=set_vlan_vid:9,mod_dl_src:02:00:00:00:00:08,mod_nw_dst:198.18.0.2,mod_nw_tos:40,mod_nw_ecn:1,mod_tp_src:99,output:2"),
        "{text}"
    );
}
