//! The `ebpf` offload provider: a kernel fast path at tc ingress of a port's
//! interface (bpf/vsw_offload.c, built by build.rs, loaded with aya).
//!
//! Per port with offload on: the programs and maps are loaded with the maps sized to
//! the provider's capacity, the classifier is attached at tc ingress (a clsact qdisc is
//! added if there is none), and the socket filter to vsw's own receiving socket on the
//! port, so that a frame of an offloaded flow is forwarded once, by the kernel.
//! Dropping the provider takes both away again.

use std::collections::HashMap as StdHashMap;
use std::os::fd::OwnedFd;

use crate::NetdevError;
use aya::maps::{HashMap, MapData, MapError, PerCpuHashMap, PerCpuValues};
use aya::programs::{tc, SchedClassifier, SocketFilter, TcAttachType};
use aya::{Ebpf, EbpfLoader};
use vsw_datapath::offload::{
    exact_entry_fits, exact_entry_mask, FlowId, OffloadAction, OffloadError, OffloadFlow,
    OffloadProvider,
};

/// Aligned: the ELF parser reads the object in place.
static PROGRAMS: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/vsw_offload.o"));

/// `struct flow_key` of the program: addresses and ports as they are on the wire.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(C)]
struct Key {
    ifindex: u32,
    src: u32,
    dst: u32,
    sport: u16,
    dport: u16,
    dmac: [u8; 6],
    smac: [u8; 6],
    proto: u8,
    pad: [u8; 3],
}

#[derive(Clone, Copy, Debug, Default)]
#[repr(C)]
struct Action {
    out_ifindex: u32,
    drop: u32,
}

#[derive(Clone, Copy, Debug, Default)]
#[repr(C)]
struct Count {
    packets: u64,
    bytes: u64,
}

// SAFETY: plain `repr(C)` integers without padding holes the kernel could not fill
// (the key's padding is explicit and always zero): any byte pattern is a valid value.
unsafe impl aya::Pod for Key {}
// SAFETY: as above, two u32 fields.
unsafe impl aya::Pod for Action {}
// SAFETY: as above, two u64 fields.
unsafe impl aya::Pod for Count {}

/// The program's key for `flow`, or why the program cannot key on it. The one kind of
/// entry the program keys on: an exact entry
/// ([`exact_entry_mask`]: in-port, both MACs, untagged, the IPv4 5-tuple) of a TCP or
/// UDP flow.
fn key_for(flow: &OffloadFlow, ifindex: u32) -> Result<Key, String> {
    let (k, m) = (&flow.key, &flow.mask);
    if *m != exact_entry_mask() || !exact_entry_fits(k) {
        return Err("ebpf-needs-an-exact-entry".into());
    }
    Ok(Key {
        ifindex,
        src: u32::from_ne_bytes((k.nw_src as u32).to_be_bytes()),
        dst: u32::from_ne_bytes((k.nw_dst as u32).to_be_bytes()),
        sport: u16::from_ne_bytes(k.tp_src.to_be_bytes()),
        dport: u16::from_ne_bytes(k.tp_dst.to_be_bytes()),
        dmac: k.dl_dst.0,
        smac: k.dl_src.0,
        proto: k.nw_proto,
        pad: [0; 3],
    })
}

/// Port numbers to interface indexes, for `output` actions.
pub type PortIfindex = Box<dyn Fn(u32) -> Option<u32> + Send>;

/// The name the tc classifier is attached under (its function's name).
const TC_PROGRAM: &str = "vsw_tc_ingress";

/// Removes every vsw tc classifier from `ifname`'s ingress (an earlier run's, left
/// behind when it was killed); returns how many there were. An interface that does
/// not exist has none.
pub fn remove_leftovers(ifname: &str) -> Result<usize, NetdevError> {
    if crate::sys::if_index(ifname).is_none() {
        return Ok(0);
    }
    let mut removed = 0;
    loop {
        match tc::qdisc_detach_program(ifname, TcAttachType::Ingress, TC_PROGRAM) {
            Ok(()) => removed += 1,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(removed),
            // No clsact qdisc: nothing was ever attached.
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => return Ok(removed),
            Err(e) => return Err(load_error(ifname, "tc filter del", e)),
        }
        if removed > 64 {
            return Ok(removed);
        }
    }
}

/// The ids of vsw's classifiers attached to `ifname`'s ingress as tcx links (the way
/// aya attaches on kernels from 6.6: the link is the process's, so it goes when the
/// process ends, however it ends). On older kernels the classifier is a netlink tc
/// filter instead, which `tc filter show` lists and which outlives a killed process
/// until [`remove_leftovers`].
pub fn attached_programs(ifname: &str) -> Vec<u32> {
    SchedClassifier::query_tcx(ifname, TcAttachType::Ingress)
        .map(|(_, programs)| {
            programs
                .iter()
                .filter(|p| p.name_as_str() == Some(TC_PROGRAM))
                .map(|p| p.id())
                .collect()
        })
        .unwrap_or_default()
}

pub struct EbpfProvider {
    bpf: Ebpf,
    ifname: String,
    ifindex: u32,
    capacity: usize,
    outputs: PortIfindex,
    /// Keys of the flows held.
    held: StdHashMap<FlowId, Key>,
    /// vsw's receiving socket on the port, with the filter on it.
    socket: OwnedFd,
    filter_link: Option<aya::programs::socket_filter::SocketFilterLinkId>,
}

fn load_error(ifname: &str, what: &'static str, e: impl std::fmt::Display) -> NetdevError {
    NetdevError::Syscall {
        op: what,
        ifname: ifname.to_string(),
        source: std::io::Error::other(e.to_string()),
    }
}

impl EbpfProvider {
    /// Loads the fast path for interface `ifname` (whose vsw socket is `socket`)
    /// holding up to `capacity` flows.
    pub fn new(
        ifname: &str,
        socket: OwnedFd,
        capacity: usize,
        outputs: PortIfindex,
    ) -> Result<EbpfProvider, NetdevError> {
        let ifindex = crate::sys::if_index(ifname)
            .ok_or_else(|| NetdevError::NoSuchInterface(ifname.to_string()))?;
        let size = capacity as u32;
        let mut bpf = EbpfLoader::new()
            .set_max_entries("FLOWS", size)
            .set_max_entries("COUNTS", size)
            .load(PROGRAMS)
            .map_err(|e| load_error(ifname, "bpf load", e))?;
        // An existing clsact qdisc (another port's, or an earlier run's) is fine.
        if let Err(e) = tc::qdisc_add_clsact(ifname) {
            if e.raw_os_error() != Some(libc::EEXIST) {
                return Err(load_error(ifname, "tc qdisc add clsact", e));
            }
        }
        let classifier: &mut SchedClassifier = bpf
            .program_mut(TC_PROGRAM)
            .ok_or_else(|| load_error(ifname, "bpf program", "vsw_tc_ingress missing"))?
            .try_into()
            .map_err(|e| load_error(ifname, "bpf program", e))?;
        classifier
            .load()
            .map_err(|e| load_error(ifname, "bpf load tc", e))?;
        classifier
            .attach(ifname, TcAttachType::Ingress)
            .map_err(|e| load_error(ifname, "tc attach", e))?;
        let filter: &mut SocketFilter = bpf
            .program_mut("vsw_sock_filter")
            .ok_or_else(|| load_error(ifname, "bpf program", "vsw_sock_filter missing"))?
            .try_into()
            .map_err(|e| load_error(ifname, "bpf program", e))?;
        filter
            .load()
            .map_err(|e| load_error(ifname, "bpf load socket filter", e))?;
        let filter_link = Some(
            filter
                .attach(&socket)
                .map_err(|e| load_error(ifname, "SO_ATTACH_BPF", e))?,
        );
        tracing::info!(ifname, capacity, "ebpf offload attached");
        Ok(EbpfProvider {
            bpf,
            ifname: ifname.to_string(),
            ifindex,
            capacity,
            outputs,
            held: StdHashMap::new(),
            socket,
            filter_link,
        })
    }

    fn flows(&mut self) -> Result<HashMap<&mut MapData, Key, Action>, OffloadError> {
        let map = self
            .bpf
            .map_mut("FLOWS")
            .ok_or_else(|| OffloadError::Refused("FLOWS map missing".into()))?;
        HashMap::try_from(map).map_err(|e| OffloadError::Refused(e.to_string()))
    }

    fn counts(&mut self) -> Result<PerCpuHashMap<&mut MapData, Key, Count>, OffloadError> {
        let map = self
            .bpf
            .map_mut("COUNTS")
            .ok_or_else(|| OffloadError::Refused("COUNTS map missing".into()))?;
        PerCpuHashMap::try_from(map).map_err(|e| OffloadError::Refused(e.to_string()))
    }
}

/// E2BIG from a map insert: the map is full.
fn is_full(e: &MapError) -> bool {
    matches!(e, MapError::SyscallError(s) if s.io_error.raw_os_error() == Some(libc::E2BIG))
}

impl OffloadProvider for EbpfProvider {
    fn kind(&self) -> &'static str {
        "ebpf"
    }

    fn capacity(&self) -> usize {
        self.capacity
    }

    fn put(&mut self, id: FlowId, flow: &OffloadFlow) -> Result<(), OffloadError> {
        let key = key_for(flow, self.ifindex).map_err(OffloadError::Refused)?;
        let action = match flow.action {
            OffloadAction::Drop => Action {
                out_ifindex: 0,
                drop: 1,
            },
            OffloadAction::Output(port) => Action {
                out_ifindex: (self.outputs)(port).ok_or_else(|| {
                    OffloadError::Refused("output-not-reachable-in-kernel".into())
                })?,
                drop: 0,
            },
        };
        // The counters first, so that the first packet the classifier forwards is
        // counted.
        let cpus = aya::util::nr_cpus().map_err(|(_, e)| OffloadError::Refused(e.to_string()))?;
        let zero = PerCpuValues::try_from(vec![Count::default(); cpus])
            .map_err(|e| OffloadError::Refused(e.to_string()))?;
        self.counts()?.insert(key, zero, 0).map_err(|e| {
            if is_full(&e) {
                OffloadError::NoSpace
            } else {
                OffloadError::Refused(e.to_string())
            }
        })?;
        if let Err(e) = self.flows()?.insert(key, action, 0) {
            let _ = self.counts()?.remove(&key);
            return Err(if is_full(&e) {
                OffloadError::NoSpace
            } else {
                OffloadError::Refused(e.to_string())
            });
        }
        self.held.insert(id, key);
        Ok(())
    }

    fn delete(&mut self, id: FlowId) -> Result<(), OffloadError> {
        let Some(key) = self.held.remove(&id) else {
            return Ok(());
        };
        let _ = self.flows()?.remove(&key);
        let _ = self.counts()?.remove(&key);
        Ok(())
    }

    fn packets(&self, id: FlowId) -> Option<u64> {
        let key = self.held.get(&id)?;
        let counts: PerCpuHashMap<&MapData, Key, Count> =
            PerCpuHashMap::try_from(self.bpf.map("COUNTS")?).ok()?;
        let values = counts.get(key, 0).ok()?;
        Some(values.iter().map(|c| c.packets).sum())
    }
}

impl Drop for EbpfProvider {
    fn drop(&mut self) {
        // vsw's socket takes every frame again before the kernel path goes.
        if let Some(link) = self.filter_link.take() {
            if let Some(p) = self.bpf.program_mut("vsw_sock_filter") {
                if let Ok(f) = <&mut SocketFilter>::try_from(p) {
                    let _ = f.detach(link);
                }
            }
        }
        let _ = &self.socket;
        tracing::info!(ifname = %self.ifname, "ebpf offload detached");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vsw_datapath::offload::OffloadAction;
    use vsw_packet::key::IPPROTO_TCP;
    use vsw_packet::{EtherType, FlowKey};

    fn flow(mask: FlowKey, proto: u8) -> OffloadFlow {
        OffloadFlow {
            in_port: 1,
            key: FlowKey {
                in_port: 1,
                dl_src: vsw_packet::MacAddr([2, 0, 0, 0, 0, 1]),
                dl_dst: vsw_packet::MacAddr([2, 0, 0, 0, 0, 2]),
                dl_type: EtherType::IPV4,
                nw_proto: proto,
                nw_src: u128::from(u32::from_be_bytes([198, 18, 0, 1])),
                nw_dst: u128::from(u32::from_be_bytes([198, 18, 0, 2])),
                tp_src: 1000,
                tp_dst: 5201,
                ..FlowKey::default()
            },
            mask,
            action: OffloadAction::Output(2),
        }
    }

    fn exact() -> FlowKey {
        exact_entry_mask()
    }

    #[test]
    fn the_key_is_the_five_tuple_as_on_the_wire() {
        let k = key_for(&flow(exact(), IPPROTO_TCP), 7).unwrap();
        assert_eq!(k.ifindex, 7);
        assert_eq!(k.src.to_ne_bytes(), [198, 18, 0, 1]);
        assert_eq!(k.dst.to_ne_bytes(), [198, 18, 0, 2]);
        assert_eq!(k.sport.to_ne_bytes(), 1000u16.to_be_bytes());
        assert_eq!(k.dport.to_ne_bytes(), 5201u16.to_be_bytes());
        assert_eq!(k.proto, IPPROTO_TCP);
        assert_eq!((k.smac, k.dmac), ([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]));
    }

    /// A classifier attached the way kernels before 6.6 do (a netlink tc filter) and
    /// left behind, as by a killed daemon, is found by name and removed.
    #[test]
    fn a_leftover_netlink_classifier_is_removed() {
        use aya::programs::tc::{NlOptions, TcAttachOptions};
        use std::process::Command;
        let euid = std::fs::metadata("/proc/self")
            .map(|m| std::os::unix::fs::MetadataExt::uid(&m))
            .unwrap_or(u32::MAX);
        assert_eq!(euid, 0, "this test attaches a tc program: it needs root");
        let name = format!("vswlo{}", std::process::id() % 100_000);
        let ip = |args: &[&str]| {
            Command::new("ip")
                .args(args)
                .status()
                .map(|s| s.success())
                .unwrap_or(false)
        };
        assert!(ip(&[
            "link",
            "add",
            &name,
            "type",
            "veth",
            "peer",
            "name",
            &format!("{name}p")
        ]));
        let filters = || {
            let out = Command::new("tc")
                .args(["filter", "show", "dev", &name, "ingress"])
                .output()
                .unwrap();
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .filter(|l| l.contains(TC_PROGRAM))
                .count()
        };
        let result = std::panic::catch_unwind(|| {
            let _ = tc::qdisc_add_clsact(&name);
            let mut bpf = EbpfLoader::new().load(PROGRAMS).unwrap();
            let prog: &mut SchedClassifier =
                bpf.program_mut(TC_PROGRAM).unwrap().try_into().unwrap();
            prog.load().unwrap();
            let link = prog
                .attach_with_options(
                    &name,
                    TcAttachType::Ingress,
                    TcAttachOptions::Netlink(NlOptions::default()),
                )
                .unwrap();
            // The owner goes without detaching, as a killed process would.
            std::mem::forget(prog.take_link(link).unwrap());
            drop(bpf);
            assert_eq!(filters(), 1, "the filter outlives its loader");
            assert_eq!(remove_leftovers(&name).unwrap(), 1);
            assert_eq!(filters(), 0);
            assert_eq!(
                remove_leftovers(&name).unwrap(),
                0,
                "nothing more to remove"
            );
        });
        ip(&["link", "del", &name]);
        if let Err(e) = result {
            std::panic::resume_unwind(e);
        }
    }

    #[test]
    fn flows_the_program_cannot_key_on_are_refused() {
        let mut wild = exact();
        wild.tp_src = 0;
        assert!(key_for(&flow(wild, IPPROTO_TCP), 7).is_err(), "a wildcard");
        let mut more = exact();
        more.nw_ttl = 0xff;
        assert!(
            key_for(&flow(more, IPPROTO_TCP), 7).is_err(),
            "a field it does not key on"
        );
        assert!(key_for(&flow(exact(), 1), 7).is_err(), "ICMP");
    }
}
