//! `KEY=VALUE` options of the switch and of ports: what is known, what values mean.

use std::collections::BTreeMap;

use vsw_netdev::afpacket::AfPacketMode;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OptionError {
    #[error("'{0}' is not KEY=VALUE")]
    NotKeyValue(String),
    #[error("unknown option '{key}' (known: {known})")]
    Unknown { key: String, known: &'static str },
    #[error("bad value '{value}' for {key}: {why}")]
    BadValue {
        key: String,
        value: String,
        why: String,
    },
}

pub type Options = BTreeMap<String, String>;

pub const SWITCH_OPTIONS: &str = "pmd-cpu-mask";
pub const PORT_OPTIONS: &str = "type, afpacket-mode, ofport_request";

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

fn bad(key: &str, value: &str, why: impl Into<String>) -> OptionError {
    OptionError::BadValue {
        key: key.to_string(),
        value: value.to_string(),
        why: why.into(),
    }
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
pub fn default_pmd_core() -> Option<usize> {
    allowed_cpus().into_iter().max()
}

/// The switch-wide options, validated.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SwitchOptions {
    pub pmd_core: Option<usize>,
}

impl SwitchOptions {
    pub fn from_options(opts: &Options) -> Result<SwitchOptions, OptionError> {
        let mut out = SwitchOptions {
            pmd_core: default_pmd_core(),
        };
        for (k, v) in opts {
            match k.as_str() {
                "pmd-cpu-mask" => out.pmd_core = Some(parse_cpu_mask(v)?),
                _ => {
                    return Err(OptionError::Unknown {
                        key: k.clone(),
                        known: SWITCH_OPTIONS,
                    })
                }
            }
        }
        Ok(out)
    }
}

/// `pmd-cpu-mask`: a hex mask with one bit set (this version runs one PMD thread).
pub fn parse_cpu_mask(v: &str) -> Result<usize, OptionError> {
    let key = "pmd-cpu-mask";
    let hex = v
        .strip_prefix("0x")
        .or_else(|| v.strip_prefix("0X"))
        .unwrap_or(v);
    let mask =
        u64::from_str_radix(hex, 16).map_err(|_| bad(key, v, "not a hex CPU mask like 0x2"))?;
    match mask.count_ones() {
        0 => Err(bad(key, v, "names no CPU")),
        1 => {
            let core = mask.trailing_zeros() as usize;
            let allowed = allowed_cpus();
            if !allowed.is_empty() && !allowed.contains(&core) {
                return Err(bad(
                    key,
                    v,
                    format!("CPU {core} is not available to vswd (available: {allowed:?})"),
                ));
            }
            Ok(core)
        }
        n => Err(bad(
            key,
            v,
            format!("names {n} CPUs; this version runs one PMD thread, so name one"),
        )),
    }
}

/// A port's options, validated.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PortOptions {
    pub mode: AfPacketMode,
    pub ofport_request: Option<u32>,
}

/// The highest port number (OpenFlow's OFPP_MAX).
pub const MAX_PORT_NO: u32 = 0xff00;

impl PortOptions {
    pub fn from_options(opts: &Options) -> Result<PortOptions, OptionError> {
        let mut out = PortOptions::default();
        for (k, v) in opts {
            match k.as_str() {
                "type" if v == "afpacket" => {}
                "type" => return Err(bad(k, v, "this version has one port type, afpacket")),
                "afpacket-mode" => {
                    out.mode = v
                        .parse()
                        .map_err(|e: vsw_netdev::afpacket::BadMode| bad(k, v, e.to_string()))?
                }
                "ofport_request" => {
                    let n: u32 = v.parse().map_err(|_| bad(k, v, "not a port number"))?;
                    if n == 0 || n > MAX_PORT_NO {
                        return Err(bad(k, v, format!("port numbers are 1..{MAX_PORT_NO}")));
                    }
                    out.ofport_request = Some(n);
                }
                _ => {
                    return Err(OptionError::Unknown {
                        key: k.clone(),
                        known: PORT_OPTIONS,
                    })
                }
            }
        }
        Ok(out)
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
        assert_eq!(parse_cpu_mask(&format!("{:#x}", 1u64 << first)), Ok(first));
        assert!(parse_cpu_mask("0x0")
            .unwrap_err()
            .to_string()
            .contains("names no CPU"));
        assert!(parse_cpu_mask("0x3")
            .unwrap_err()
            .to_string()
            .contains("names 2 CPUs"));
        assert!(parse_cpu_mask("zz").is_err());
        assert!(parse_cpu_mask("0x8000000000000000")
            .unwrap_err()
            .to_string()
            .contains("not available"));
    }

    #[test]
    fn port_options() {
        let o = PortOptions::from_options(
            &parse_pairs(&words(&["afpacket-mode=mmsg", "ofport_request=7"])).unwrap(),
        )
        .unwrap();
        assert_eq!(o.mode, AfPacketMode::Mmsg);
        assert_eq!(o.ofport_request, Some(7));
        let e = PortOptions::from_options(&parse_pairs(&words(&["afpacket-mode=fast"])).unwrap())
            .unwrap_err();
        assert_eq!(e.to_string(), "bad value 'fast' for afpacket-mode: afpacket-mode must be 'ring', 'ring-v3' or 'mmsg', not 'fast'");
        let e = PortOptions::from_options(&parse_pairs(&words(&["mtu=1"])).unwrap()).unwrap_err();
        assert!(e.to_string().starts_with("unknown option 'mtu'"));
        assert!(
            PortOptions::from_options(&parse_pairs(&words(&["ofport_request=0"])).unwrap())
                .is_err()
        );
    }

    #[test]
    fn switch_options() {
        let e = SwitchOptions::from_options(&parse_pairs(&words(&["frobnicate=1"])).unwrap())
            .unwrap_err();
        assert!(e.to_string().contains("unknown option 'frobnicate'"));
        assert_eq!(
            SwitchOptions::from_options(&Options::new())
                .unwrap()
                .pmd_core,
            default_pmd_core()
        );
    }
}
