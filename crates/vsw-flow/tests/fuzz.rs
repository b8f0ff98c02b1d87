//! Fuzzing the flow-syntax parser on stable Rust: proptest strings built from the
//! parser's own vocabulary (field and action names, values of every shape, stray
//! separators) reach far more of it than random text does. Whatever parses must print
//! back to text that parses to the same flow. `cargo test` runs a short pass; a long
//! one: `PROPTEST_CASES=200000 cargo test --release -p vsw-flow --test fuzz`.

use proptest::prelude::*;
use vsw_flow::syntax::format_flow;
use vsw_flow::{parse_flow, parse_match};

fn names(n: &str) -> Option<u32> {
    (n == "sw0").then_some(1)
}

const WORDS: &[&str] = &[
    "priority",
    "in_port",
    "dl_src",
    "dl_dst",
    "dl_type",
    "dl_vlan",
    "dl_vlan_pcp",
    "vlan_tci",
    "inner_vlan_tci",
    "nw_src",
    "nw_dst",
    "ipv6_src",
    "ipv6_dst",
    "nw_proto",
    "nw_tos",
    "nw_ecn",
    "ip_dscp",
    "nw_ttl",
    "ip_frag",
    "ipv6_label",
    "tp_src",
    "tp_dst",
    "tcp_flags",
    "icmp_type",
    "icmp_code",
    "arp_op",
    "arp_spa",
    "arp_tpa",
    "arp_sha",
    "arp_tha",
    "nd_target",
    "nd_sll",
    "nd_tll",
    "idle_timeout",
    "hard_timeout",
    "table",
    "cookie",
    "ip",
    "ipv6",
    "tcp",
    "udp",
    "sctp",
    "icmp",
    "arp",
    "tcp6",
    "udp6",
    "icmp6",
    "actions",
    "output",
    "drop",
    "normal",
    "flood",
    "in_port",
    "mod_dl_src",
    "mod_dl_dst",
    "push_vlan",
    "mod_vlan_vid",
    "mod_vlan_pcp",
    "strip_vlan",
    "mod_nw_src",
    "mod_nw_dst",
    "mod_nw_tos",
    "mod_tp_src",
    "mod_tp_dst",
    "dec_ttl",
    "set_field",
    "mod_nw_ttl",
    "mod_nw_ecn",
    "copy_ttl_out",
    "sw0",
];

const VALUES: &[&str] = &[
    "0",
    "1",
    "7",
    "53",
    "135",
    "255",
    "4095",
    "65535",
    "70000",
    "0x800",
    "0x86dd",
    "0xffff",
    "0x1000/0xf000",
    "198.18.0.1",
    "198.18.0.0/15",
    "198.18.0.0/255.255.0.0",
    "2001:db8::1",
    "2001:db8::/32",
    "::",
    "02:00:00:00:00:01",
    "01:00:00:00:00:00/01:00:00:00:00:00",
    "+syn",
    "+syn-ack",
    "-fin",
    "no",
    "yes",
    "first",
    "later",
    "not_later",
    "0x8100",
    "0x88a8",
    "",
    "/",
    "x",
    "300.1.1.1",
];

/// Match pieces that are valid on their own, so that many texts parse and the
/// print-back property gets exercised, not only the error paths.
const GOOD_MATCH: &[&str] = &[
    "priority=7",
    "in_port=1",
    "in_port=sw0",
    "ip",
    "ipv6",
    "tcp",
    "udp",
    "sctp",
    "icmp",
    "arp",
    "tcp6",
    "udp6",
    "icmp6",
    "dl_vlan=10",
    "dl_vlan_pcp=3",
    "vlan_tci=0x1000/0x1000",
    "inner_vlan_tci=0x1005",
    "dl_src=02:00:00:00:00:01",
    "dl_dst=01:00:00:00:00:00/01:00:00:00:00:00",
    "nw_src=198.18.0.0/15",
    "nw_dst=198.18.0.2",
    "ipv6_src=2001:db8::/32",
    "tp_dst=53",
    "tp_src=0x1000/0xf000",
    "nw_ttl=1",
    "nw_tos=32",
    "nw_ecn=2",
    "ip_frag=first",
    "ip_frag=no",
    "ipv6_label=0x12345",
    "tcp_flags=+syn-ack",
    "icmp_type=135",
    "icmp_code=0",
    "nd_target=2001:db8::2",
    "nd_sll=02:00:00:00:00:01",
    "arp_op=1",
    "arp_sha=02:00:00:00:00:02",
    "idle_timeout=5",
    "hard_timeout=9",
    "table=0",
    "table=3",
    "table=254",
    "dl_type=0x88cc",
    "mpls",
    "mplsm",
    "rarp",
    "mpls_label=100",
    "mpls_tc=5",
    "mpls_bos=1",
    "mpls_ttl=64",
];

const GOOD_ACTIONS: &[&str] = &[
    "encap(nsh)",
    "encap(nsh(md_type=2,tlv(0x1000,10,0x12345678)))",
    "encap(mpls)",
    "encap(ethernet)",
    "decap()",
    "decap(packet_type(ns=0,type=0))",
    "output:1",
    "2",
    "drop",
    "normal",
    "flood",
    "in_port",
    "mod_dl_src:02:00:00:00:00:0a",
    "mod_dl_dst:02:00:00:00:00:0b",
    "push_vlan:0x8100",
    "mod_vlan_vid:9",
    "mod_vlan_pcp:1",
    "strip_vlan",
    "mod_nw_src:198.18.0.9",
    "mod_nw_dst:198.18.0.8",
    "mod_nw_tos:8",
    "mod_tp_src:1",
    "mod_tp_dst:2",
    "dec_ttl",
    "push_mpls:0x8847",
    "push_pbb:0x88e7",
    "pop_pbb",
    "pop_mpls:0x0800",
    "set_mpls_label(7)",
    "set_mpls_tc:2",
    "set_mpls_ttl(9)",
    "dec_mpls_ttl",
    "set_field:100->mpls_label",
    "set_field:2001:db8::1->ipv6_dst",
    "set_field:0x1->ipv6_label",
    "set_field:2->arp_op",
    "set_field:0->icmp_type",
    "set_field:02:00:00:00:00:0c->nd_sll",
    "set_field:3->ip_ecn",
    "set_field:1->",
    "set_field:->ipv6_src",
    "mod_nw_ttl:7",
    "copy_ttl_out",
    "copy_ttl_in",
    "output:sw0",
    "goto_table:4",
    "resubmit(,2)",
    "resubmit(sw0,1)",
    "resubmit(1,)",
    "resubmit:sw0",
    "resubmit(,",
    "resubmit((,1))",
];

fn piece(good: &'static [&'static str]) -> impl Strategy<Value = String> {
    prop_oneof![
        8 => proptest::sample::select(good).prop_map(str::to_string),
        2 => (proptest::sample::select(WORDS), proptest::sample::select(VALUES))
            .prop_map(|(w, v)| format!("{w}={v}")),
        1 => (proptest::sample::select(WORDS), proptest::sample::select(VALUES))
            .prop_map(|(w, v)| format!("{w}:{v}")),
        1 => proptest::sample::select(WORDS).prop_map(str::to_string),
        1 => "[ -~]{0,8}",
        // Any characters, those of several bytes among them.
        1 => "\\PC{0,8}",
        // An MD type 2 TLV whose value is anything.
        1 => "\\PC{0,6}".prop_map(|v| format!("encap(nsh(md_type=2,tlv(0x1,2,0x{v})))")),
    ]
}

fn flow_text() -> impl Strategy<Value = String> {
    (
        proptest::collection::vec(piece(GOOD_MATCH), 0..6),
        proptest::collection::vec(piece(GOOD_ACTIONS), 0..5),
        prop_oneof![9 => Just(true), 1 => Just(false)],
    )
        .prop_map(|(m, a, with_actions)| {
            let mut t = m.join(",");
            if with_actions {
                t += ",actions=";
                t += &a.join(",");
            }
            t
        })
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3000)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn whatever_parses_prints_back_to_itself(text in flow_text()) {
        if let Ok(flow) = parse_flow(&text, &names) {
            let printed = format_flow(&flow);
            let again = parse_flow(&printed, &names);
            prop_assert_eq!(again.as_ref(), Ok(&flow), "{} printed as {}", text, printed);
        }
        let _ = parse_match(&text, &names);
    }
}
