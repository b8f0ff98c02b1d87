//! The connection tracker's control commands (`dpctl/dump-conntrack`,
//! `dpctl/ct-set-limits`, …), in Open vSwitch's words: one answer for
//! `ovs-appctl` and for `vswctl conntrack`.

use vsw_conntrack::Conntrack;

/// Answers `command` (`dump-conntrack`, `ct-set-limits`, …, with or without
/// `dpctl/` in front) about `ct`, as Open vSwitch answers it. A datapath name
/// among the arguments (`netdev@ovs-netdev`) is taken and ignored: vswd has one.
pub fn run(ct: &Conntrack, command: &str, args: &[String]) -> Result<String, String> {
    let command = command.strip_prefix("dpctl/").unwrap_or(command);
    let args: Vec<&str> = args
        .iter()
        .map(String::as_str)
        .filter(|a| !a.contains('@') && !a.starts_with("ovs-"))
        .collect();
    let zone = || -> Result<Option<u16>, String> {
        match args.iter().find_map(|a| a.strip_prefix("zone=")) {
            None => Ok(None),
            Some(z) => z
                .parse::<u16>()
                .map(Some)
                .map_err(|_| format!("invalid zone: {z}")),
        }
    };
    let now = vsw_datapath::clock::now_ms();
    match command {
        "dump-conntrack" => {
            let style = vsw_conntrack::dump::DumpStyle {
                verbose: args.iter().any(|a| matches!(*a, "-m" | "--more")),
                stats: args.iter().any(|a| matches!(*a, "-s" | "--statistics")),
            };
            Ok(ct
                .connections(zone()?, now)
                .iter()
                .map(|c| vsw_conntrack::dump::format_entry(c, style) + "\n")
                .collect())
        }
        "flush-conntrack" => {
            let (zone, filter) =
                vsw_conntrack::FlushFilter::parse(&args).map_err(|e| e.to_string())?;
            ct.flush_matching(zone, &filter);
            Ok(String::new())
        }
        "ct-stats-show" => {
            let verbose = args
                .iter()
                .any(|a| matches!(*a, "-m" | "--more" | "verbose"));
            let conns = ct.connections(zone()?, now);
            Ok(vsw_conntrack::dump::format_stats(&conns, verbose))
        }
        "ct-get-nconns" => Ok(format!("{}\n", ct.len())),
        "ct-get-maxconns" => Ok(format!("{}\n", ct.limit())),
        "ct-set-maxconns" => {
            let n = args
                .last()
                .and_then(|n| n.parse::<u32>().ok())
                .ok_or_else(|| "ct-set-maxconns needs a number".to_string())?;
            ct.set_limit(n as usize);
            Ok("setting maxconns successful".into())
        }
        "ct-enable-tcp-seq-chk" | "ct-disable-tcp-seq-chk" => {
            let on = command.ends_with("enable-tcp-seq-chk");
            ct.set_tcp_seq_check(on);
            let what = if on { "enabling" } else { "disabling" };
            Ok(format!("{what} TCP sequence checking successful"))
        }
        "ct-set-limits" => {
            // All checked first: a bad argument changes nothing.
            let mut default = None;
            let mut zones = Vec::new();
            for a in &args {
                if let Some(l) = a.strip_prefix("default=") {
                    default = Some(
                        l.parse::<u32>()
                            .map_err(|_| "invalid default limit".to_string())?,
                    );
                    continue;
                }
                let (mut zone, mut limit) = (None, None);
                for kv in a.split(',') {
                    match kv.split_once('=') {
                        Some(("zone", z)) => zone = z.parse::<u16>().ok(),
                        Some(("limit", l)) => limit = l.parse::<u32>().ok(),
                        _ => return Err(format!("invalid zone limit field: {kv}")),
                    }
                }
                match (zone, limit) {
                    (Some(z), Some(l)) => zones.push((z, l)),
                    _ => return Err(format!("failed to parse zone limit: {a}")),
                }
            }
            if let Some(d) = default {
                ct.set_default_zone_limit(d);
            }
            for (z, l) in zones {
                ct.set_zone_limit(z, Some(l));
            }
            Ok(String::new())
        }
        "ct-del-limits" => {
            let zones = zone_list(&args)?;
            if zones.is_empty() {
                return Err("no zone limit to delete".into());
            }
            for z in zones {
                ct.set_zone_limit(z, None);
            }
            Ok(String::new())
        }
        "ct-get-limits" => {
            let mut zones = zone_list(&args)?;
            if zones.is_empty() {
                zones = ct.limited_zones();
            }
            let mut out = format!("default limit={}", ct.default_zone_limit());
            for z in zones {
                let limit = ct.zone_limit(z).unwrap_or_else(|| ct.default_zone_limit());
                out += &format!("\nzone={z},limit={limit},count={}", ct.zone_len(z));
            }
            Ok(out + "\n")
        }
        "ct-get-tcp-seq-chk" => Ok(format!(
            "TCP sequence checking: {}\n",
            if ct.tcp_seq_check() {
                "enabled"
            } else {
                "disabled"
            }
        )),
        "ipf-get-status" => {
            let verbose = args.iter().any(|a| matches!(*a, "-m" | "--more"));
            Ok(ct.ipf().format_status(verbose))
        }
        "ipf-set-enabled" | "ipf-set-disabled" => {
            let on = command == "ipf-set-enabled";
            let v6 = family(args.first().copied())
                .ok_or("parameter missing: 'v4' for IPv4 or 'v6' for IPv6")?;
            ct.ipf().set_enabled(v6, on);
            let what = if on { "enabling" } else { "disabling" };
            Ok(format!("{what} fragmentation reassembly successful"))
        }
        "ipf-set-min-frag" => {
            let v6 = family(args.first().copied())
                .ok_or("parameter missing: v4 for IPv4 or v6 for IPv6")?;
            let bytes = args
                .get(1)
                .and_then(|n| n.parse::<u32>().ok())
                .ok_or("parameter missing for minimum fragment size")?;
            ct.ipf()
                .set_min_frag(v6, bytes)
                .map_err(|e| e.to_string())?;
            Ok("setting minimum fragment size successful".into())
        }
        "ipf-set-max-nfrags" => {
            let n = args
                .first()
                .and_then(|n| n.parse::<u32>().ok())
                .ok_or("parameter missing for maximum fragments")?;
            ct.ipf().set_max_nfrags(n).map_err(|e| e.to_string())?;
            Ok("setting maximum fragments successful".into())
        }
        _ => Err(format!("unknown command '{command}'")),
    }
}

/// `zone=N1[,N2]...` among `args`: the zones named.
fn zone_list(args: &[&str]) -> Result<Vec<u16>, String> {
    match args.iter().find_map(|a| a.strip_prefix("zone=")) {
        None => Ok(Vec::new()),
        Some(list) => list
            .split(',')
            .map(|z| z.parse::<u16>().map_err(|_| format!("invalid zone: {z}")))
            .collect(),
    }
}

/// `v4` or `v6`: whether IPv6 is meant.
fn family(word: Option<&str>) -> Option<bool> {
    match word? {
        "v4" => Some(false),
        "v6" => Some(true),
        _ => None,
    }
}
