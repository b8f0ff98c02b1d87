//! `KEY=VALUE` options of the switch and of ports: what is known, what values mean.

use vsw_datapath::txbatch::{self, FlushSetting};
use vsw_datapath::RxqAssign;
use vsw_netdev::class::{join_and, PortClass, PortClasses};

pub use vsw_netdev::class::{bad, OptionError, Options};

pub const SWITCH_OPTIONS: &str =
    "pmd-cpu-mask, pmd-rxq-assign, emc-insert-inv-prob, tx-flush-interval, pmd-sleep-max, hw-offload, offload-rebalance, offload-interval, offload-persist, flow-limit, max-idle, revalidator-interval, datapath-id, controller, fail-mode, inactivity-probe, protocols, flow-restore-wait, mcast-snooping-enable, mcast-snooping-aging-time, mcast-snooping-table-size, mcast-snooping-disable-flood-unregistered";
/// Options every port takes, whatever its class (a class's own are its).
pub const COMMON_PORT_OPTIONS: &[&str] = &[
    "type",
    "ofport_request",
    "mtu_request",
    "pmd-rxq-affinity",
    "tx-flush-interval",
    "offload",
    "offload-capacity",
];

/// Splits `KEY=VALUE` words into a map; later words win.
pub fn parse_pairs(words: &[String]) -> Result<Options, OptionError> {
    let mut out = Options::new();
    for w in words {
        let (k, v) = w
            .split_once('=')
            .filter(|(k, _)| !k.is_empty())
            .ok_or_else(|| OptionError::NotKeyValue(w.clone()))?;
        out.insert(k.to_string(), v.to_string());
    }
    Ok(out)
}

/// CPUs this process may run on, as they were when first asked: vswd narrows its own
/// threads' affinity later (to keep them off the PMD core), and that must not narrow
/// what a PMD may be moved to.
pub fn allowed_cpus() -> Vec<usize> {
    static CPUS: std::sync::OnceLock<Vec<usize>> = std::sync::OnceLock::new();
    CPUS.get_or_init(|| {
        core_affinity::get_core_ids()
            .map(|ids| ids.into_iter().map(|c| c.id).collect())
            .unwrap_or_default()
    })
    .clone()
}

/// The core the PMD runs on when none is configured: the last one this process may
/// use, which leaves core 0 to the system and to traffic generators.
pub fn default_pmd_cores() -> Vec<usize> {
    vec![allowed_cpus().into_iter().max().unwrap_or(0)]
}

/// The switch-wide options, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SwitchOptions {
    /// One PMD per core.
    pub pmd_cores: Vec<usize>,
    pub rxq_assign: RxqAssign,
    pub emc_insert_inv_prob: u32,
    /// Microseconds an output batch may wait for more packets (0: none).
    pub tx_flush_interval: u32,
    /// Microseconds an idle PMD may sleep at most (0: it never sleeps).
    pub pmd_sleep_max: u32,
    /// `hw-offload`: flows go to the offload providers of ports that name one.
    pub hw_offload: bool,
    /// `offload-rebalance`: a full provider swaps slow flows for faster waiting ones.
    pub offload_rebalance: bool,
    /// `offload-persist`: the kernel fast paths stay (pinned on bpffs) while vswd is
    /// stopped or restarts, and the next run adopts them; off, they never outlive
    /// the daemon.
    pub offload_persist: bool,
    /// `offload-interval`: milliseconds between offload passes.
    pub offload_interval_ms: u32,
    /// `flow-limit`: the most datapath flows a PMD caches.
    pub flow_limit: usize,
    /// `max-idle`: milliseconds after which an unused datapath flow is removed.
    pub max_idle_ms: u64,
    /// `revalidator-interval`: milliseconds between revalidator passes.
    pub revalidator_interval_ms: u64,
    /// `datapath-id`: the switch's OpenFlow datapath id, when set (16 hex digits).
    pub datapath_id: Option<u64>,
    /// `controller`: the OpenFlow controllers vswd connects to (comma-separated
    /// targets; empty: none). Targets vsw cannot use are kept, as
    /// `Target::Unsupported`.
    pub controllers: Vec<vsw_openflow::Target>,
    /// `fail-mode`: what forwarding does while no controller is connected.
    pub fail_mode: FailMode,
    /// `inactivity-probe`: milliseconds a controller connection may be silent
    /// before it is probed (and as long again before it is dropped).
    pub inactivity_probe_ms: u64,
    /// `protocols`: the OpenFlow versions the bridge speaks (Open vSwitch's names,
    /// `OpenFlow13,OpenFlow14`), of those vsw speaks.
    pub protocols: vsw_openflow::VersionSet,
    /// `flow-restore-wait`: forward nothing until it is set false again (after a
    /// restart, while a controller or `ovs-ofctl add-flows` restores the flows), as
    /// Open vSwitch's.
    pub flow_restore_wait: bool,
    /// NORMAL's multicast snooping (Open vSwitch's `mcast_snooping_enable` and its
    /// `mcast-snooping-*` keys, the aging time in seconds there).
    pub mcast_snooping: vsw_flow::McastConfig,
}

/// Open vSwitch's `fail_mode`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FailMode {
    /// With controllers configured and none reachable for three inactivity probes,
    /// the switch forwards as a learning switch (NORMAL), whatever its flows say.
    #[default]
    Standalone,
    /// The flows alone decide, connected or not.
    Secure,
}

/// `inactivity-probe` when none is set (as Open vSwitch's controllers).
pub const DEFAULT_INACTIVITY_PROBE_MS: u64 = 5000;

/// `max-idle` when none is set (as Open vSwitch).
pub const DEFAULT_MAX_IDLE_MS: u64 = 10_000;
/// `revalidator-interval` when none is set (as Open vSwitch).
pub const DEFAULT_REVALIDATOR_INTERVAL_MS: u64 = 500;

/// `offload-interval` when none is set.
pub const DEFAULT_OFFLOAD_INTERVAL_MS: u32 = 1000;

fn parse_bool(k: &str, v: &str) -> Result<bool, OptionError> {
    match v {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(bad(k, v, "true or false")),
    }
}

impl SwitchOptions {
    /// Whether the bridge is a learning switch by a rule of its own: Open vSwitch
    /// adds `priority=0,actions=NORMAL` only while the bridge is standalone and
    /// names no controller (usable or not, listeners included), and flushes the
    /// tables whenever that changes.
    pub fn wants_learning_flow(&self) -> bool {
        self.fail_mode == FailMode::Standalone && self.controllers.is_empty()
    }

    pub fn from_options(opts: &Options) -> Result<SwitchOptions, OptionError> {
        let mut out = SwitchOptions {
            pmd_cores: default_pmd_cores(),
            rxq_assign: RxqAssign::default(),
            emc_insert_inv_prob: vsw_datapath::emc::DEFAULT_INSERT_INV_PROB,
            tx_flush_interval: 0,
            pmd_sleep_max: 0,
            hw_offload: false,
            offload_rebalance: false,
            offload_persist: false,
            offload_interval_ms: DEFAULT_OFFLOAD_INTERVAL_MS,
            flow_limit: vsw_datapath::DEFAULT_FLOW_LIMIT,
            max_idle_ms: DEFAULT_MAX_IDLE_MS,
            revalidator_interval_ms: DEFAULT_REVALIDATOR_INTERVAL_MS,
            datapath_id: None,
            controllers: Vec::new(),
            fail_mode: FailMode::default(),
            inactivity_probe_ms: DEFAULT_INACTIVITY_PROBE_MS,
            protocols: vsw_openflow::VersionSet::VSW,
            flow_restore_wait: false,
            mcast_snooping: vsw_flow::McastConfig::default(),
        };
        for (k, v) in opts {
            match k.as_str() {
                "pmd-cpu-mask" => out.pmd_cores = parse_cpu_mask(v)?,
                "pmd-rxq-assign" => out.rxq_assign = v.parse().map_err(|e: String| bad(k, v, e))?,
                "tx-flush-interval" => {
                    out.tx_flush_interval = txbatch::parse_interval(v).map_err(|e| bad(k, v, e))?
                }
                "pmd-sleep-max" => {
                    out.pmd_sleep_max = txbatch::parse_interval(v).map_err(|e| bad(k, v, e))?
                }
                "hw-offload" => out.hw_offload = parse_bool(k, v)?,
                "offload-rebalance" => out.offload_rebalance = parse_bool(k, v)?,
                "offload-persist" => out.offload_persist = parse_bool(k, v)?,
                "offload-interval" => {
                    out.offload_interval_ms = v
                        .parse()
                        .ok()
                        .filter(|n| (100..=60_000).contains(n))
                        .ok_or_else(|| bad(k, v, "milliseconds, 100..60000"))?
                }
                "flow-limit" => {
                    out.flow_limit = v
                        .parse()
                        .ok()
                        .filter(|n| *n <= 10_000_000)
                        .ok_or_else(|| bad(k, v, "a number of flows per PMD, 0..10000000"))?
                }
                "max-idle" => {
                    out.max_idle_ms = v
                        .parse()
                        .ok()
                        .filter(|n| (100..=3_600_000).contains(n))
                        .ok_or_else(|| bad(k, v, "milliseconds, 100..3600000"))?
                }
                "revalidator-interval" => {
                    out.revalidator_interval_ms = v
                        .parse()
                        .ok()
                        .filter(|n| (10..=60_000).contains(n))
                        .ok_or_else(|| bad(k, v, "milliseconds, 10..60000"))?
                }
                "datapath-id" => {
                    let hex = v.strip_prefix("0x").unwrap_or(v);
                    out.datapath_id = Some(
                        u64::from_str_radix(hex, 16)
                            .ok()
                            .filter(|_| hex.len() == 16)
                            .ok_or_else(|| bad(k, v, "16 hex digits, like 0000000000000001"))?,
                    )
                }
                // Every target named is a controller, usable or not: a bridge that
                // names one vsw cannot reach (`ssl:`, a typo) has a controller, so
                // it never becomes a learning switch by it (fail-closed).
                "controller" => {
                    out.controllers = v
                        .split(',')
                        .filter(|t| !t.is_empty())
                        .map(vsw_openflow::Target::lenient)
                        .collect()
                }
                "flow-restore-wait" => {
                    out.flow_restore_wait = match v.as_str() {
                        "true" => true,
                        "false" => false,
                        _ => return Err(bad(k, v, "true or false")),
                    }
                }
                "fail-mode" => {
                    out.fail_mode = match v.as_str() {
                        "standalone" => FailMode::Standalone,
                        "secure" => FailMode::Secure,
                        _ => return Err(bad(k, v, "standalone or secure")),
                    }
                }
                "inactivity-probe" => {
                    out.inactivity_probe_ms = v
                        .parse()
                        .ok()
                        .filter(|n| (1000..=3_600_000).contains(n))
                        .ok_or_else(|| bad(k, v, "milliseconds, 1000..3600000"))?
                }
                "protocols" => {
                    let set =
                        vsw_openflow::VersionSet::parse_protocols(v).map_err(|e| bad(k, v, e))?;
                    if set.0 == 0 {
                        return Err(bad(k, v, "at least one of OpenFlow10 to OpenFlow15"));
                    }
                    out.protocols = set;
                }
                "mcast-snooping-enable" => out.mcast_snooping.enabled = parse_bool(k, v)?,
                "mcast-snooping-disable-flood-unregistered" => {
                    out.mcast_snooping.flood_unregistered = !parse_bool(k, v)?
                }
                // Seconds, as Open vSwitch's (which takes 15..3600).
                "mcast-snooping-aging-time" => {
                    out.mcast_snooping.aging_ms = v
                        .parse::<u64>()
                        .ok()
                        .filter(|n| (15..=3600).contains(n))
                        .ok_or_else(|| bad(k, v, "seconds, 15..3600"))?
                        * 1000
                }
                "mcast-snooping-table-size" => {
                    out.mcast_snooping.capacity = v
                        .parse()
                        .ok()
                        .filter(|n| (1..=1_000_000).contains(n))
                        .ok_or_else(|| bad(k, v, "groups, 1..1000000"))?
                }
                "emc-insert-inv-prob" => {
                    out.emc_insert_inv_prob = v
                        .parse()
                        .map_err(|_| bad(k, v, "a whole number: insert 1 in N misses, 0 = never"))?
                }
                _ => {
                    return Err(OptionError::Unknown {
                        key: k.clone(),
                        known: SWITCH_OPTIONS.into(),
                    })
                }
            }
        }
        Ok(out)
    }
}

/// `pmd-cpu-mask`: a hex mask (`0x6`) or a list of cores (`1,3` or `1-3`), one PMD
/// per core named.
pub fn parse_cpu_mask(v: &str) -> Result<Vec<usize>, OptionError> {
    let key = "pmd-cpu-mask";
    let cores: Vec<usize> = if let Some(hex) = v.strip_prefix("0x").or_else(|| v.strip_prefix("0X"))
    {
        let mask = u64::from_str_radix(hex, 16).map_err(|_| {
            bad(
                key,
                v,
                "not a hex CPU mask like 0x2, or a core list like 1,3",
            )
        })?;
        (0..64).filter(|b| mask & (1 << b) != 0).collect()
    } else {
        let mut cores = Vec::new();
        for part in v.split(',').filter(|p| !p.is_empty()) {
            let (a, b) = part.split_once('-').unwrap_or((part, part));
            let (a, b): (usize, usize) = match (a.trim().parse(), b.trim().parse()) {
                (Ok(a), Ok(b)) if a <= b && b < 1024 => (a, b),
                _ => {
                    return Err(bad(
                        key,
                        v,
                        "not a hex CPU mask like 0x2, or a core list like 1,3",
                    ))
                }
            };
            cores.extend(a..=b);
        }
        cores
    };
    if cores.is_empty() {
        return Err(bad(key, v, "names no CPU"));
    }
    let allowed = allowed_cpus();
    if let Some(c) = cores
        .iter()
        .find(|c| !allowed.is_empty() && !allowed.contains(c))
    {
        return Err(bad(
            key,
            v,
            format!("CPU {c} is not available to vswd (available: {allowed:?})"),
        ));
    }
    let mut cores = cores;
    cores.sort_unstable();
    cores.dedup();
    Ok(cores)
}

/// `pmd-rxq-affinity`: `queue:core` pairs, comma-separated (`0:3,1:7`).
pub fn parse_rxq_affinity(v: &str) -> Result<Vec<(usize, usize)>, OptionError> {
    let key = "pmd-rxq-affinity";
    let mut pins: Vec<(usize, usize)> = Vec::new();
    for part in v.split(',').filter(|p| !p.trim().is_empty()) {
        let pair = part
            .split_once(':')
            .and_then(|(q, c)| Some((q.trim().parse().ok()?, c.trim().parse().ok()?)));
        let Some((q, c)) = pair else {
            return Err(bad(key, v, "queue:core pairs like 0:3,1:7"));
        };
        if pins.iter().any(|(pq, _)| *pq == q) {
            return Err(bad(key, v, format!("queue {q} is pinned twice")));
        }
        pins.push((q, c));
    }
    Ok(pins)
}

/// A port's options that every class takes, validated; its class's own options are
/// checked by the class ([`PortClass::configure`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortOptions {
    pub class: &'static dyn PortClass,
    /// The options only ports of its class take, as given.
    pub class_options: Options,
    pub ofport_request: Option<u32>,
    /// Queue → core pins.
    pub rxq_affinity: Vec<(usize, usize)>,
    /// The MTU to give the port (its interface's, or vsw's own for a guest).
    pub mtu_request: Option<u32>,
    /// `tx-flush-interval` of this port (or its class's default).
    pub tx_flush: FlushSetting,
    /// `offload`: the provider that takes this port's flows (with `hw-offload=true`).
    pub offload: Option<OffloadKind>,
    /// `offload-capacity`: the most flows the provider holds.
    pub offload_capacity: usize,
}

/// Offload providers a port may name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffloadKind {
    /// In-process, holds flows but forwards nothing itself: for trying the manager.
    Dummy,
    /// The kernel fast path at tc ingress (afpacket ports).
    Ebpf,
}

/// `offload-capacity` when none is set.
pub const DEFAULT_OFFLOAD_CAPACITY: usize = 1024;

/// The highest port number (OpenFlow's OFPP_MAX).
pub const MAX_PORT_NO: u32 = 0xff00;

impl PortOptions {
    /// Reads the options every port takes, and sorts out its class's own; an option
    /// no class takes, or that another class takes, is refused by name.
    pub fn from_options(opts: &Options, classes: &PortClasses) -> Result<PortOptions, OptionError> {
        let class = match opts.get("type") {
            Some(t) => classes
                .get(t)
                .ok_or_else(|| bad("type", t, format!("port types are {}", classes.names())))?,
            None => classes.default_class(),
        };
        let mut out = PortOptions {
            class,
            class_options: Options::new(),
            ofport_request: None,
            rxq_affinity: Vec::new(),
            mtu_request: None,
            tx_flush: class.default_tx_flush(),
            offload: None,
            offload_capacity: DEFAULT_OFFLOAD_CAPACITY,
        };
        for (k, v) in opts {
            match k.as_str() {
                "type" => {}
                "pmd-rxq-affinity" => out.rxq_affinity = parse_rxq_affinity(v)?,
                "tx-flush-interval" => {
                    out.tx_flush = v.parse().map_err(|e: String| bad(k, v, e))?
                }
                "mtu_request" => {
                    out.mtu_request = Some(
                        v.parse()
                            .ok()
                            .filter(|n| (68..=65_535).contains(n))
                            .ok_or_else(|| bad(k, v, "an MTU, 68..65535"))?,
                    )
                }
                "offload" => {
                    out.offload = match v.as_str() {
                        "dummy" => Some(OffloadKind::Dummy),
                        "none" | "" => None,
                        "ebpf" => Some(OffloadKind::Ebpf),
                        _ => {
                            return Err(bad(k, v, "offload providers are ebpf and dummy (or none)"))
                        }
                    }
                }
                "offload-capacity" => {
                    out.offload_capacity = v
                        .parse()
                        .ok()
                        .filter(|n| (1..=1_000_000).contains(n))
                        .ok_or_else(|| bad(k, v, "a number of flows, 1..1000000"))?
                }
                "ofport_request" => {
                    let n: u32 = v.parse().map_err(|_| bad(k, v, "not a port number"))?;
                    if n == 0 || n > MAX_PORT_NO {
                        return Err(bad(k, v, format!("port numbers are 1..{MAX_PORT_NO}")));
                    }
                    out.ofport_request = Some(n);
                }
                _ if class.options().iter().any(|o| o.key == k) => {
                    out.class_options.insert(k.clone(), v.clone());
                }
                _ => {
                    let taking = classes.taking(k);
                    if !taking.is_empty() {
                        return Err(bad(
                            k,
                            v,
                            format!("applies to {} ports", join_and(taking.into_iter())),
                        ));
                    }
                    let known: Vec<&str> = COMMON_PORT_OPTIONS
                        .iter()
                        .copied()
                        .chain(classes.option_keys())
                        .collect();
                    return Err(OptionError::Unknown {
                        key: k.clone(),
                        known: known.join(", "),
                    });
                }
            }
        }
        Ok(out)
    }

    /// Writes out what the port is (its type and its class's saved defaults), so that
    /// a later vsw with other defaults keeps it as it was.
    pub fn write_out_defaults(&self, opts: &mut Options) {
        opts.entry("type".into())
            .or_insert_with(|| self.class.name().into());
        for o in self.class.options() {
            if let Some(d) = o.saved_default {
                opts.entry(o.key.into()).or_insert_with(|| d.into());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(w: &[&str]) -> Vec<String> {
        w.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn pairs() {
        let o = parse_pairs(&words(&["a=1", "b=x=y", "a=2"])).unwrap();
        assert_eq!(o.get("a").map(String::as_str), Some("2"));
        assert_eq!(o.get("b").map(String::as_str), Some("x=y"));
        assert_eq!(
            parse_pairs(&words(&["novalue"])),
            Err(OptionError::NotKeyValue("novalue".into()))
        );
        assert!(parse_pairs(&words(&["=1"])).is_err());
    }

    #[test]
    fn cpu_mask() {
        let first = allowed_cpus()[0];
        assert_eq!(
            parse_cpu_mask(&format!("{:#x}", 1u64 << first)),
            Ok(vec![first])
        );
        assert_eq!(parse_cpu_mask(&first.to_string()), Ok(vec![first]));
        let all = allowed_cpus();
        let list: Vec<String> = all.iter().map(|c| c.to_string()).collect();
        assert_eq!(parse_cpu_mask(&list.join(",")), Ok(all.clone()));
        assert!(parse_cpu_mask("0x0")
            .unwrap_err()
            .to_string()
            .contains("names no CPU"));
        assert!(parse_cpu_mask("zz").is_err());
        assert!(parse_cpu_mask("3-1").is_err());
        assert!(parse_cpu_mask("0x8000000000000000")
            .unwrap_err()
            .to_string()
            .contains("not available"));
    }

    #[test]
    fn port_options() {
        let classes = PortClasses::standard();
        let port =
            |w: &[&str]| PortOptions::from_options(&parse_pairs(&words(w)).unwrap(), &classes);
        let o = port(&["afpacket-mode=mmsg", "ofport_request=7"]).unwrap();
        assert_eq!(o.class.name(), "afpacket");
        assert_eq!(o.ofport_request, Some(7));
        assert_eq!(
            o.class_options.get("afpacket-mode").map(String::as_str),
            Some("mmsg")
        );
        let e = port(&["mtu=1"]).unwrap_err();
        assert!(e.to_string().starts_with("unknown option 'mtu'"));
        assert!(e.to_string().contains("afpacket-mode"), "{e}");
        assert!(port(&["ofport_request=0"]).is_err());
        let e = port(&["type=bogus"]).unwrap_err();
        assert!(
            e.to_string().ends_with(
                "port types are afpacket, tap, internal, vhostuser, vhostuserclient, patch, vxlan, geneve and ring"
            ),
            "{e}"
        );
        // Another class's option names the classes that take it.
        let e = port(&["type=tap", "ring-rate=10"]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "bad value '10' for ring-rate: applies to ring ports"
        );
        let e = port(&["vhost-server-path=/x"]).unwrap_err();
        assert!(
            e.to_string()
                .ends_with("applies to vhostuser and vhostuserclient ports"),
            "{e}"
        );
        // A guest may poll: its port follows it unless told otherwise.
        assert_eq!(
            port(&["type=vhostuser"]).unwrap().tx_flush,
            FlushSetting::Auto
        );
        assert_eq!(port(&["type=tap"]).unwrap().tx_flush, FlushSetting::Switch);
    }

    #[test]
    fn saved_defaults_are_written_out() {
        let classes = PortClasses::standard();
        let mut opts = Options::new();
        let o = PortOptions::from_options(&opts, &classes).unwrap();
        o.write_out_defaults(&mut opts);
        assert_eq!(
            opts,
            parse_pairs(&words(&["type=afpacket", "afpacket-mode=ring"])).unwrap()
        );
        let mut opts = parse_pairs(&words(&["type=ring"])).unwrap();
        let o = PortOptions::from_options(&opts, &classes).unwrap();
        o.write_out_defaults(&mut opts);
        assert_eq!(opts, parse_pairs(&words(&["type=ring"])).unwrap());
    }

    #[test]
    fn protocols_are_open_vswitchs_names_of_what_vsw_speaks() {
        let o = |v: &str| SwitchOptions::from_options(&parse_pairs(&words(&[v])).unwrap());
        assert_eq!(
            o("protocols=OpenFlow10,OpenFlow11,OpenFlow13,OpenFlow15")
                .unwrap()
                .protocols,
            vsw_openflow::VersionSet((1 << 1) | (1 << 2) | (1 << 4) | (1 << 6)),
        );
        assert_eq!(
            SwitchOptions::from_options(&Options::new())
                .unwrap()
                .protocols,
            vsw_openflow::VersionSet::VSW
        );
        assert_eq!(
            o("protocols=OpenFlow11").unwrap().protocols,
            vsw_openflow::VersionSet(1 << 2)
        );
        assert!(o("protocols=,")
            .unwrap_err()
            .to_string()
            .contains("at least one"));
        assert!(o("protocols=OpenFlow16").is_err());
    }

    #[test]
    fn switch_options() {
        let e = SwitchOptions::from_options(&parse_pairs(&words(&["frobnicate=1"])).unwrap())
            .unwrap_err();
        assert!(e.to_string().contains("unknown option 'frobnicate'"));
        assert_eq!(
            SwitchOptions::from_options(&Options::new())
                .unwrap()
                .pmd_cores,
            default_pmd_cores()
        );
        let o = SwitchOptions::from_options(
            &parse_pairs(&words(&[
                "pmd-rxq-assign=roundrobin",
                "emc-insert-inv-prob=1",
            ]))
            .unwrap(),
        )
        .unwrap();
        assert_eq!(
            (o.rxq_assign, o.emc_insert_inv_prob),
            (RxqAssign::RoundRobin, 1)
        );
        for bad in ["pmd-rxq-assign=best", "emc-insert-inv-prob=-1"] {
            assert!(SwitchOptions::from_options(&parse_pairs(&words(&[bad])).unwrap()).is_err());
        }
    }

    #[test]
    fn rxq_affinity() {
        assert_eq!(parse_rxq_affinity("0:3, 1:7"), Ok(vec![(0, 3), (1, 7)]));
        assert_eq!(parse_rxq_affinity(""), Ok(vec![]));
        for bad in ["0", "0:x", "0:1,0:2"] {
            assert!(parse_rxq_affinity(bad).is_err(), "{bad}");
        }
    }
}
