//! The `ebpf` offload provider: a kernel fast path at tc ingress of a port's
//! interface (bpf/vsw_offload.c, built by build.rs, loaded with aya).
//!
//! Per port with offload on: the programs and maps are loaded with the maps sized to
//! the provider's capacity, the classifier is attached at tc ingress (a clsact qdisc is
//! added if there is none), and the socket filter to vsw's own receiving socket on the
//! port, so that a frame of an offloaded flow is forwarded once, by the kernel.
//! Dropping the provider takes both away again.
//!
//! With `offload-persist` the maps and the classifier's tcx link are pinned in a
//! directory of the port's own on bpffs (`<root>/<interface>/`), so that they keep
//! forwarding while no vswd runs. The next provider on the interface adopts them: it
//! loads its programs on the pinned maps (entries and all), keeps the attached
//! classifier when it is the same program (else attaches its own first, then lets the
//! old one go), and lists the entries it found as adopted until a flow of the new run
//! takes each over (or the caller withdraws it). A provider dropped without
//! [`OffloadProvider::keep_in_kernel`] removes its pins, and with them the fast path.
use std::collections::HashMap as StdHashMap;
use std::mem::size_of;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::NetdevError;
use aya::maps::{HashMap, MapData, MapError, PerCpuHashMap, PerCpuValues};
use aya::programs::links::{FdLink, PinnedLink};
use aya::programs::{tc, SchedClassifier, SocketFilter, TcAttachType};
use aya::{Ebpf, EbpfLoader};
use vsw_datapath::offload::{
    exact_entry_fits, exact_entry_mask, FlowId, OffloadAction, OffloadError, OffloadFlow,
    OffloadProvider,
};
use vsw_packet::{EtherType, FlowKey, MacAddr};

/// Aligned: the ELF parser reads the object in place.
static PROGRAMS: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/vsw_offload.o"));
/// The same, its maps pinned by name (`offload-persist`).
static PROGRAMS_PINNED: &[u8] =
    aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/vsw_offload_pinned.o"));

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

/// The flow an entry of the program stands for, received on port `in_port`: the
/// inverse of [`key_for`]. `None` when its output is no port's interface (any more).
fn flow_of(
    key: &Key,
    action: &Action,
    in_port: u32,
    port_of: impl Fn(u32) -> Option<u32>,
) -> Option<OffloadFlow> {
    let mask = exact_entry_mask();
    let k = FlowKey {
        in_port,
        dl_src: MacAddr(key.smac),
        dl_dst: MacAddr(key.dmac),
        dl_type: EtherType::IPV4,
        nw_proto: key.proto,
        nw_src: u128::from(u32::from_be_bytes(key.src.to_ne_bytes())),
        nw_dst: u128::from(u32::from_be_bytes(key.dst.to_ne_bytes())),
        tp_src: u16::from_be_bytes(key.sport.to_ne_bytes()),
        tp_dst: u16::from_be_bytes(key.dport.to_ne_bytes()),
        ..FlowKey::default()
    };
    let action = if action.drop != 0 {
        OffloadAction::Drop
    } else {
        OffloadAction::Output(port_of(action.out_ifindex)?)
    };
    Some(OffloadFlow {
        in_port,
        key: k.masked(&mask),
        mask,
        action,
    })
}

/// Port numbers and their interfaces' indexes, for `output` actions (and, for
/// adopted entries, back).
pub type PortIfindexes = Arc<Mutex<StdHashMap<u32, u32>>>;

/// The name the tc classifier is attached under (its function's name).
const TC_PROGRAM: &str = "vsw_tc_ingress";

/// The pinned classifier link's name in a port's pin directory (the maps are pinned
/// beside it under their own names, FLOWS and COUNTS).
const PINNED_LINK: &str = "tc_link";

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
/// process ends, however it ends, unless it is pinned). On older kernels the
/// classifier is a netlink tc filter instead, which `tc filter show` lists and which
/// outlives a killed process until [`remove_leftovers`].
pub fn attached_programs(ifname: &str) -> Vec<u32> {
    attached(ifname).into_iter().map(|(id, _)| id).collect()
}

/// vsw's classifiers attached to `ifname` as tcx links: (id, tag).
fn attached(ifname: &str) -> Vec<(u32, u64)> {
    SchedClassifier::query_tcx(ifname, TcAttachType::Ingress)
        .map(|(_, programs)| {
            programs
                .iter()
                .filter(|p| p.name_as_str() == Some(TC_PROGRAM))
                .map(|p| (p.id(), p.tag()))
                .collect()
        })
        .unwrap_or_default()
}

/// Takes away what is pinned in one port's directory: the classifier's link (detached
/// at once, whoever holds it) and the maps. Returns
/// whether there was anything.
fn remove_pinned_dir(dir: &Path) -> bool {
    // Emptied first: a socket that opened while it forwarded refuses the frames of
    // its entries (`refuse_pinned_flows`) for as long as the map lives.
    if let Ok(map) = MapData::from_pin(dir.join("FLOWS")) {
        if let Ok(mut flows) =
            HashMap::<MapData, Key, Action>::try_from(aya::maps::Map::HashMap(map))
        {
            let keys: Vec<Key> = flows.keys().filter_map(Result::ok).collect();
            for k in keys {
                let _ = flows.remove(&k);
            }
        }
    }
    // Detached first: unlinking the pin alone lets the classifier go only after the
    // kernel's deferred release, and the caller counts on it being gone.
    if let Err(e) = crate::sys::detach_pinned_bpf_link(&dir.join(PINNED_LINK)) {
        if e.kind() != std::io::ErrorKind::NotFound {
            tracing::warn!(dir = %dir.display(), error = %e, "pinned link not detached");
        }
    }
    let mut any = false;
    for name in [PINNED_LINK, "FLOWS", "COUNTS"] {
        any |= std::fs::remove_file(dir.join(name)).is_ok();
    }
    let _ = std::fs::remove_dir(dir);
    any
}

/// Puts the fast path's socket filter on `socket` (not bound yet) when a fast path
/// pinned in `dir` forwards on interface `ifname` (an earlier run's, with
/// `offload-persist`): the kernel forwards its flows, so the socket must never take
/// their frames, from the first one on, also before this run's provider adopts the
/// fast path (which then puts its own, equal, filter in this one's place). Nothing
/// pinned: nothing to do. A filter that cannot be put is said, not fatal.
pub fn refuse_pinned_flows(socket: &OwnedFd, ifname: &str, dir: &Path) {
    if !dir.join(PINNED_LINK).exists() || !dir.join("FLOWS").exists() {
        return;
    }
    let result = (|| -> Result<(), String> {
        // Only the maps there are: a missing one would be made and pinned.
        if !dir.join("COUNTS").exists() {
            return Err("COUNTS is not pinned".into());
        }
        let mut bpf = EbpfLoader::new()
            .map_pin_path(dir)
            .load(PROGRAMS_PINNED)
            .map_err(|e| e.to_string())?;
        let filter: &mut SocketFilter = bpf
            .program_mut("vsw_sock_filter")
            .ok_or("vsw_sock_filter missing")?
            .try_into()
            .map_err(|e: aya::programs::ProgramError| e.to_string())?;
        filter.load().map_err(|e| e.to_string())?;
        let link = filter.attach(socket).map_err(|e| e.to_string())?;
        // The filter stays on the socket when this loader goes (the socket holds
        // the program): its link is taken out of the program's, which are taken
        // off when the program goes (a link alone does not detach when dropped).
        // The provider's own filter replaces it.
        filter.take_link(link).map_err(|e| e.to_string())?;
        Ok(())
    })();
    match result {
        Ok(()) => tracing::info!(ifname, "the socket refuses the pinned fast path's flows"),
        Err(why) => tracing::warn!(
            ifname,
            why,
            "cannot keep the pinned fast path's flows off the socket"
        ),
    }
}

/// Takes away every fast path pinned under `root` whose interface `keep` does not
/// name (an earlier run's, of a port that has no persistent offload now, or of any
/// port when `offload-persist` is off): nothing pinned forwards by a policy no one
/// manages. Returns the interfaces whose fast path went.
pub fn remove_pinned(root: &Path, keep: impl Fn(&str) -> bool) -> Vec<String> {
    let Ok(dirs) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for d in dirs.flatten() {
        let name = d.file_name().to_string_lossy().into_owned();
        if !keep(&name) && remove_pinned_dir(&d.path()) {
            tracing::info!(ifname = %name, "an earlier run's pinned offload fast path removed");
            removed.push(name);
        }
    }
    removed
}

/// Where a provider pins its fast path (`offload-persist`), or where an earlier run
/// may have (and the provider must take it away first).
#[derive(Clone, Debug)]
pub struct Pins {
    /// The directory on bpffs that holds one directory per interface.
    pub root: PathBuf,
    /// Pin (and adopt what is pinned); else only remove what an earlier run pinned.
    pub persist: bool,
}

/// What the provider of one port is made of.
pub struct EbpfPort<'a> {
    pub ifname: &'a str,
    /// The port's number (adopted entries are flows received on it).
    pub port_no: u32,
    /// vsw's receiving socket on the port, for the socket filter.
    pub socket: OwnedFd,
    pub capacity: usize,
    pub ifindexes: PortIfindexes,
    pub pins: Option<Pins>,
}

/// The pinned state of a persistent provider.
struct Pinned {
    dir: PathBuf,
    link: Option<PinnedLink>,
    /// Leave everything pinned when dropped.
    keep: bool,
}

pub struct EbpfProvider {
    bpf: Ebpf,
    ifname: String,
    ifindex: u32,
    port_no: u32,
    capacity: usize,
    ifindexes: PortIfindexes,
    /// Keys of the flows held.
    held: StdHashMap<FlowId, Key>,
    /// Entries found in pinned maps that no flow holds yet.
    adopted: StdHashMap<Key, Action>,
    /// vsw's receiving socket on the port, with the filter on it.
    socket: OwnedFd,
    filter_link: Option<aya::programs::socket_filter::SocketFilterLinkId>,
    pinned: Option<Pinned>,
}

fn load_error(ifname: &str, what: &'static str, e: impl std::fmt::Display) -> NetdevError {
    NetdevError::Syscall {
        op: what,
        ifname: ifname.to_string(),
        source: std::io::Error::other(e.to_string()),
    }
}

/// Whether the maps pinned in `dir` are what this build would make with `capacity`
/// entries (an earlier build's layout, or another capacity, cannot be adopted).
fn pinned_maps_fit(dir: &Path, capacity: usize) -> Result<(), String> {
    use aya::maps::{MapInfo, MapType};
    let want = [
        ("FLOWS", MapType::Hash, size_of::<Action>()),
        ("COUNTS", MapType::PerCpuHash, size_of::<Count>()),
    ];
    for (name, kind, value) in want {
        let info = MapInfo::from_pin(dir.join(name)).map_err(|e| format!("{name}: {e}"))?;
        let same_kind = info.map_type().is_ok_and(|t| t == kind);
        if !same_kind
            || info.key_size() as usize != size_of::<Key>()
            || info.value_size() as usize != value
        {
            return Err(format!("{name} has another layout"));
        }
        if info.max_entries() as usize != capacity {
            return Err(format!(
                "{name} holds {} entries, offload-capacity is {capacity}",
                info.max_entries()
            ));
        }
    }
    Ok(())
}

impl EbpfProvider {
    /// Loads the fast path for `port`'s interface (adopting what an earlier run
    /// pinned, with `offload-persist`).
    pub fn new(port: EbpfPort<'_>) -> Result<EbpfProvider, NetdevError> {
        let ifname = port.ifname;
        let ifindex = crate::sys::if_index(ifname)
            .ok_or_else(|| NetdevError::NoSuchInterface(ifname.to_string()))?;
        let size = port.capacity as u32;
        let mut loader = EbpfLoader::new();
        loader
            .set_max_entries("FLOWS", size)
            .set_max_entries("COUNTS", size);
        let mut pinned = None;
        let bpf = match &port.pins {
            Some(Pins {
                root,
                persist: true,
            }) => {
                let dir = pin_dir(root, ifname)?;
                let pinned_maps = dir.join("FLOWS").exists() || dir.join("COUNTS").exists();
                if pinned_maps {
                    if let Err(why) = pinned_maps_fit(&dir, port.capacity) {
                        tracing::warn!(
                            ifname,
                            why,
                            "the earlier run's pinned fast path does not fit: removed"
                        );
                        remove_pinned_dir(&dir);
                        std::fs::create_dir_all(&dir)
                            .map_err(|e| load_error(ifname, "mkdir", e))?;
                    }
                }
                pinned = Some(Pinned {
                    link: PinnedLink::from_pin(dir.join(PINNED_LINK)).ok(),
                    dir: dir.clone(),
                    keep: false,
                });
                loader
                    .map_pin_path(&dir)
                    .load(PROGRAMS_PINNED)
                    .map_err(|e| load_error(ifname, "bpf load", e))?
            }
            Some(Pins {
                root,
                persist: false,
            }) => {
                // An earlier run's pinned fast path forwards by its rules: it goes
                // before this one comes.
                if remove_pinned_dir(&root.join(ifname)) {
                    tracing::info!(ifname, "an earlier run's pinned offload fast path removed");
                }
                loader
                    .load(PROGRAMS)
                    .map_err(|e| load_error(ifname, "bpf load", e))?
            }
            None => loader
                .load(PROGRAMS)
                .map_err(|e| load_error(ifname, "bpf load", e))?,
        };
        let mut provider = EbpfProvider {
            bpf,
            ifname: ifname.to_string(),
            ifindex,
            port_no: port.port_no,
            capacity: port.capacity,
            ifindexes: port.ifindexes,
            held: StdHashMap::new(),
            adopted: StdHashMap::new(),
            socket: port.socket,
            filter_link: None,
            pinned,
        };
        provider.attach_classifier()?;
        // From here on the provider's Drop takes down what was attached.
        let filter: &mut SocketFilter = provider
            .bpf
            .program_mut("vsw_sock_filter")
            .ok_or_else(|| load_error(ifname, "bpf program", "vsw_sock_filter missing"))?
            .try_into()
            .map_err(|e| load_error(ifname, "bpf program", e))?;
        filter
            .load()
            .map_err(|e| load_error(ifname, "bpf load socket filter", e))?;
        provider.filter_link = Some(
            filter
                .attach(&provider.socket)
                .map_err(|e| load_error(ifname, "SO_ATTACH_BPF", e))?,
        );
        provider.find_adopted();
        tracing::info!(
            ifname,
            capacity = port.capacity,
            persist = provider.pinned.is_some(),
            adopted = provider.adopted.len(),
            "ebpf offload attached"
        );
        Ok(provider)
    }

    /// Loads the classifier and attaches it at tc ingress; with pins, keeps an
    /// earlier run's attached classifier when it is the same program, and pins the
    /// link of a new one.
    fn attach_classifier(&mut self) -> Result<(), NetdevError> {
        let ifname = self.ifname.clone();
        let ifname = ifname.as_str();
        // An existing clsact qdisc (another port's, or an earlier run's) is fine.
        if let Err(e) = tc::qdisc_add_clsact(ifname) {
            if e.raw_os_error() != Some(libc::EEXIST) {
                return Err(load_error(ifname, "tc qdisc add clsact", e));
            }
        }
        let classifier: &mut SchedClassifier = self
            .bpf
            .program_mut(TC_PROGRAM)
            .ok_or_else(|| load_error(ifname, "bpf program", "vsw_tc_ingress missing"))?
            .try_into()
            .map_err(|e| load_error(ifname, "bpf program", e))?;
        classifier
            .load()
            .map_err(|e| load_error(ifname, "bpf load tc", e))?;
        let Some(pinned) = &mut self.pinned else {
            classifier
                .attach(ifname, TcAttachType::Ingress)
                .map_err(|e| load_error(ifname, "tc attach", e))?;
            return Ok(());
        };
        // The kernel's tag is a hash of the instructions, map references left out:
        // the same tag is the same program.
        let tag = classifier
            .info()
            .map_err(|e| load_error(ifname, "bpf prog info", e))?
            .tag();
        let running = attached(ifname);
        if pinned.link.is_some() && running.iter().any(|(_, t)| *t == tag) {
            tracing::info!(ifname, "adopted the pinned classifier of an earlier run");
            return Ok(());
        }
        // A new classifier (or another build's): attached next to the old one, which
        // goes only then, so the pinned entries forward all along.
        let id = classifier
            .attach(ifname, TcAttachType::Ingress)
            .map_err(|e| load_error(ifname, "tc attach", e))?;
        let link = classifier
            .take_link(id)
            .map_err(|e| load_error(ifname, "tc attach", e))?;
        let link = FdLink::try_from(link).map_err(|_| {
            load_error(
                ifname,
                "offload-persist",
                "the classifier is not a tcx link (offload-persist needs Linux 6.6 or later)",
            )
        })?;
        match pinned.link.take() {
            Some(old) => {
                let _ = old.unpin();
            }
            // A file there that is no link (it could not be opened as one) is in the
            // way of the pin.
            None => {
                let _ = std::fs::remove_file(pinned.dir.join(PINNED_LINK));
            }
        }
        pinned.link = Some(
            link.pin(pinned.dir.join(PINNED_LINK))
                .map_err(|e| load_error(ifname, "pin tc link", e))?,
        );
        Ok(())
    }

    /// Lists the entries of (pinned) maps this run did not put: another interface's
    /// entries cannot be this port's and go at once.
    fn find_adopted(&mut self) {
        let Ok(flows) = self.flows() else {
            return;
        };
        let entries: Vec<(Key, Action)> = flows.iter().filter_map(Result::ok).collect();
        let ifindex = self.ifindex;
        let (mine, stale): (Vec<_>, Vec<_>) =
            entries.into_iter().partition(|(k, _)| k.ifindex == ifindex);
        for (k, _) in stale {
            self.remove_entry(&k);
        }
        self.adopted = mine.into_iter().collect();
    }

    fn remove_entry(&mut self, key: &Key) {
        if let Ok(mut f) = self.flows() {
            let _ = f.remove(key);
        }
        if let Ok(mut c) = self.counts() {
            let _ = c.remove(key);
        }
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

/// `root/ifname`, made if need be; `root` must be on bpffs.
fn pin_dir(root: &Path, ifname: &str) -> Result<PathBuf, NetdevError> {
    std::fs::create_dir_all(root).map_err(|e| load_error(ifname, "mkdir", e))?;
    if !crate::sys::is_bpffs(root) {
        return Err(load_error(
            ifname,
            "offload-persist",
            format!(
                "{} is not on a BPF filesystem (mount one: mount -t bpf bpf /sys/fs/bpf)",
                root.display()
            ),
        ));
    }
    let dir = root.join(ifname);
    std::fs::create_dir_all(&dir).map_err(|e| load_error(ifname, "mkdir", e))?;
    Ok(dir)
}

/// E2BIG from a map insert: the map is full.
fn is_full(e: &MapError) -> bool {
    matches!(e, MapError::SyscallError(s) if s.io_error.raw_os_error() == Some(libc::E2BIG))
}

fn lock_indexes(m: &PortIfindexes) -> std::sync::MutexGuard<'_, StdHashMap<u32, u32>> {
    m.lock().unwrap_or_else(|e| e.into_inner())
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
                out_ifindex: lock_indexes(&self.ifindexes)
                    .get(&port)
                    .copied()
                    .ok_or_else(|| {
                        OffloadError::Refused("output-not-reachable-in-kernel".into())
                    })?,
                drop: 0,
            },
        };
        // The counters first, so that the first packet the classifier forwards is
        // counted. An adopted entry is replaced in place: it never leaves the map.
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
        self.adopted.remove(&key);
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

    fn adopted(&mut self) -> Vec<OffloadFlow> {
        let port_of: StdHashMap<u32, u32> = lock_indexes(&self.ifindexes)
            .iter()
            .map(|(port, ifindex)| (*ifindex, *port))
            .collect();
        let mut flows = Vec::new();
        let mut unreachable = Vec::new();
        for (k, a) in &self.adopted {
            match flow_of(k, a, self.port_no, |i| port_of.get(&i).copied()) {
                Some(f) => flows.push(f),
                None => unreachable.push(*k),
            }
        }
        // Its output is no port's any more: nothing of this run would send there.
        for k in unreachable {
            self.adopted.remove(&k);
            self.remove_entry(&k);
        }
        flows
    }

    fn adopted_count(&self) -> usize {
        self.adopted.len()
    }

    fn drop_adopted(&mut self, flow: &OffloadFlow) {
        if let Ok(key) = key_for(flow, self.ifindex) {
            if self.adopted.remove(&key).is_some() {
                self.remove_entry(&key);
            }
        }
    }

    fn keep_in_kernel(&mut self) {
        if let Some(p) = &mut self.pinned {
            p.keep = true;
        }
    }
}

impl Drop for EbpfProvider {
    fn drop(&mut self) {
        let keep = self.pinned.as_ref().is_some_and(|p| p.keep);
        // vsw's socket takes every frame again before the kernel path goes; one the
        // kernel path stays for keeps refusing them until it closes.
        if let Some(link) = self.filter_link.take() {
            if let Some(p) = self.bpf.program_mut("vsw_sock_filter") {
                if let Ok(f) = <&mut SocketFilter>::try_from(p) {
                    if keep {
                        // Out of the program's links, which are taken off when the
                        // program goes: the socket keeps the filter until it closes.
                        let _ = f.take_link(link);
                    } else {
                        let _ = f.detach(link);
                    }
                }
            }
        }
        let _ = &self.socket;
        match &self.pinned {
            Some(p) if p.keep => {
                tracing::info!(ifname = %self.ifname, dir = %p.dir.display(), "ebpf offload left forwarding in the kernel (offload-persist)");
                return;
            }
            // Not kept: the classifier is detached and the pins go.
            Some(p) => {
                remove_pinned_dir(&p.dir);
            }
            None => {}
        }
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

    /// An entry found in a pinned map reads back as the flow it was made for (the
    /// adopted entry is compared with what the restored pipeline gives).
    #[test]
    fn an_entry_reads_back_as_the_flow_it_was_made_for() {
        let f = flow(exact(), IPPROTO_TCP);
        let key = key_for(&f, 7).unwrap();
        let out = Action {
            out_ifindex: 12,
            drop: 0,
        };
        let port_of = |i| (i == 12).then_some(2);
        let back = flow_of(&key, &out, 1, port_of).unwrap();
        assert_eq!(back.key, f.key.masked(&exact()));
        assert_eq!(
            (back.in_port, back.mask, back.action),
            (1, exact(), f.action)
        );
        let dropped = Action {
            out_ifindex: 0,
            drop: 1,
        };
        assert_eq!(
            flow_of(&key, &dropped, 1, port_of).unwrap().action,
            OffloadAction::Drop
        );
        let gone = Action {
            out_ifindex: 13,
            drop: 0,
        };
        assert!(
            flow_of(&key, &gone, 1, port_of).is_none(),
            "an output that is no port's"
        );
    }

    /// An upgrade whose classifier changed: the new provider keeps the pinned maps
    /// (the entry an earlier run put is adopted), attaches its own classifier, and
    /// lets the earlier one go (here another program stands for the earlier build's).
    #[test]
    fn an_upgrade_adopts_the_pinned_maps_and_replaces_a_changed_classifier() {
        use aya::programs::tc::TcAttachOptions;
        use aya::programs::LinkOrder;
        use std::process::Command;
        let euid = std::fs::metadata("/proc/self")
            .map(|m| std::os::unix::fs::MetadataExt::uid(&m))
            .unwrap_or(u32::MAX);
        assert_eq!(
            euid, 0,
            "this test mounts bpffs and attaches tc programs: it needs root"
        );
        let name = format!("vswup{}", std::process::id() % 100_000);
        let peer = format!("{name}p");
        let fs = std::env::temp_dir().join(format!("vsw-bpffs-{name}"));
        let run = |cmd: &str, args: &[&str]| {
            Command::new(cmd)
                .args(args)
                .status()
                .map(|s| s.success())
                .unwrap_or(false)
        };
        assert!(run(
            "ip",
            &["link", "add", &name, "type", "veth", "peer", "name", &peer]
        ));
        std::fs::create_dir_all(&fs).unwrap();
        assert!(run("mount", &["-t", "bpf", "bpf", fs.to_str().unwrap()]));
        let result = std::panic::catch_unwind(|| {
            for i in [&name, &peer] {
                assert!(run("ip", &["link", "set", i, "up"]));
            }
            let root = fs.join("vsw");
            let out = crate::sys::if_index(&peer).unwrap();
            let ifindexes: PortIfindexes = Arc::new(Mutex::new([(2, out)].into()));
            let provider = |ifindexes: &PortIfindexes| {
                EbpfProvider::new(EbpfPort {
                    ifname: &name,
                    port_no: 1,
                    socket: crate::sys::packet_socket().unwrap(),
                    capacity: 16,
                    ifindexes: ifindexes.clone(),
                    pins: Some(Pins {
                        root: root.clone(),
                        persist: true,
                    }),
                })
                .unwrap()
            };
            // The earlier run: one flow offloaded, left in the kernel.
            let mut first = provider(&ifindexes);
            first.put(7, &flow(exact(), IPPROTO_TCP)).unwrap();
            first.keep_in_kernel();
            drop(first);
            // Its classifier swapped for another program, as an older build's.
            let dir = root.join(&name);
            std::fs::remove_file(dir.join(PINNED_LINK)).unwrap();
            let mut older = EbpfLoader::new()
                .load(crate::afpacket::tunnel_gso::PROGRAM)
                .unwrap();
            let prog: &mut SchedClassifier = older
                .program_mut("vsw_tunnel_gso_redirect")
                .unwrap()
                .try_into()
                .unwrap();
            prog.load().unwrap();
            let id = prog
                .attach_with_options(
                    &name,
                    TcAttachType::Ingress,
                    TcAttachOptions::TcxOrder(LinkOrder::default()),
                )
                .unwrap();
            let link = FdLink::try_from(prog.take_link(id).unwrap()).unwrap();
            drop(link.pin(dir.join(PINNED_LINK)).unwrap());
            drop(older);
            let names = || -> Vec<String> {
                SchedClassifier::query_tcx(&name, TcAttachType::Ingress)
                    .map(|(_, p)| {
                        p.iter()
                            .filter_map(|p| p.name_as_str().map(String::from))
                            .collect()
                    })
                    .unwrap_or_default()
            };
            // (the kernel keeps 15 bytes of a program's name)
            assert_eq!(names(), ["vsw_tunnel_gso_"]);
            // The upgrade.
            let mut second = provider(&ifindexes);
            assert_eq!(
                names(),
                [TC_PROGRAM],
                "the older classifier went, ours came"
            );
            let adopted = second.adopted();
            assert_eq!(adopted.len(), 1, "the pinned entry is adopted");
            assert_eq!(
                adopted[0].key,
                flow(exact(), IPPROTO_TCP).key.masked(&exact())
            );
            assert_eq!(adopted[0].action, OffloadAction::Output(2));
            drop(second);
            assert!(names().is_empty(), "not kept: the fast path went with it");
            assert!(!dir.exists());
        });
        run("umount", &[fs.to_str().unwrap()]);
        let _ = std::fs::remove_dir_all(&fs);
        run("ip", &["link", "del", &name]);
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
