//! Fuzzing vsw's vhost-user backend on stable Rust: sequences of vhost-user messages
//! in any order, with sizes that lie, random payloads shaped like the real messages
//! (memory tables, ring addresses, queue sizes, features) and random descriptors
//! attached (eventfds, pipes, /dev/null, memfds smaller than the memory they claim),
//! while a PMD-like thread keeps polling and filling the port's queues. Nothing may
//! panic, hang or end the process, and after each run of sessions a well-behaved
//! frontend must still set up and pass traffic.
//!
//! `cargo test` runs 2,000 sessions; a long run:
//! `PROPTEST_CASES=200000 cargo test --release -p vsw-netdev --test fuzz_vhost`.

mod common;

use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use vmm_sys_util::sock_ctrl_msg::ScmSocket;
use vsw_datapath::{PacketMeta, PortQueues, RxBatch};
use vsw_netdev::vhost::open_server;

/// What a descriptor attached to a message is.
#[derive(Clone, Debug)]
enum FdKind {
    EventFd,
    Pipe,
    DevNull,
    /// A memfd of this many bytes.
    Memfd(u64),
}

#[derive(Clone, Debug)]
struct Message {
    request: u32,
    flags: u32,
    /// The size the header claims, when it is not the payload's.
    size_lie: Option<u32>,
    payload: Vec<u8>,
    fds: Vec<FdKind>,
}

fn fd_kind() -> impl Strategy<Value = FdKind> {
    prop_oneof![
        3 => Just(FdKind::EventFd),
        1 => Just(FdKind::Pipe),
        1 => Just(FdKind::DevNull),
        2 => prop_oneof![Just(0u64), 1u64..0x10_0000, Just(0x40_0000u64)].prop_map(FdKind::Memfd),
    ]
}

/// Addresses in a small space, so that rings and regions often meet.
fn addr() -> impl Strategy<Value = u64> {
    prop_oneof![
        4 => (0u64..0x400).prop_map(|p| p * 0x1000),
        1 => any::<u64>(),
    ]
}

fn le(parts: &[u64], widths: &[usize]) -> Vec<u8> {
    parts
        .iter()
        .zip(widths)
        .flat_map(|(v, w)| v.to_le_bytes()[..*w].to_vec())
        .collect()
}

/// A message shaped like request `request` (or any bytes).
fn message() -> impl Strategy<Value = Message> {
    let flags = prop_oneof![4 => Just(1u32), 2 => Just(1u32 | 8), 1 => any::<u32>()];
    let size_lie = proptest::option::weighted(0.1, prop_oneof![0u32..300, any::<u32>()]);
    let index = prop_oneof![4 => 0u64..8, 1 => any::<u32>().prop_map(u64::from)];
    let body = prop_oneof![
        // SET_MEM_TABLE: a count, padding, then regions with a memfd each.
        (
            1u64..4,
            proptest::collection::vec((addr(), addr(), addr(), addr()), 0..5),
            proptest::collection::vec(fd_kind(), 0..5)
        )
            .prop_map(|(n, regions, fds)| {
                let mut p = le(&[n, 0], &[4, 4]);
                for (gpa, size, va, off) in &regions {
                    p.extend(le(
                        &[*gpa, *size % 0x80_0000, *va, *off % 0x10_0000],
                        &[8, 8, 8, 8],
                    ));
                }
                (5u32, p, fds)
            }),
        // SET_VRING_NUM, SET_VRING_BASE, GET_VRING_BASE, SET_VRING_ENABLE: index, number.
        (
            prop_oneof![Just(8u32), Just(10), Just(11), Just(18)],
            index.clone(),
            prop_oneof![
                (0u32..11).prop_map(|b| 1u64 << b),
                any::<u32>().prop_map(u64::from)
            ]
        )
            .prop_map(|(r, i, n)| (r, le(&[i, n], &[4, 4]), vec![])),
        // SET_VRING_ADDR: index, flags, descriptor, used, available and log addresses.
        (index.clone(), addr(), addr(), addr()).prop_map(|(i, d, u, a)| (
            9u32,
            le(&[i, 0, d, u, a, 0], &[4, 4, 8, 8, 8, 8]),
            vec![]
        )),
        // SET_VRING_KICK, CALL, ERR: the index (maybe with "no descriptor") and one.
        (
            prop_oneof![Just(12u32), Just(13), Just(14)],
            index,
            any::<bool>(),
            fd_kind()
        )
            .prop_map(|(r, i, nofd, fd)| {
                let v = i | if nofd { 0x100 } else { 0 };
                (r, le(&[v], &[8]), if nofd { vec![] } else { vec![fd] })
            }),
        // SET_FEATURES, SET_PROTOCOL_FEATURES, and the rest with no or any body.
        (prop_oneof![Just(2u32), Just(16)], any::<u64>()).prop_map(|(r, f)| (
            r,
            le(&[f], &[8]),
            vec![]
        )),
        (
            prop_oneof![
                Just(1u32),
                Just(3),
                Just(4),
                Just(15),
                Just(17),
                19u32..45,
                any::<u32>()
            ],
            proptest::collection::vec(any::<u8>(), 0..64),
            proptest::collection::vec(fd_kind(), 0..2)
        )
            .prop_map(|(r, p, fds)| (r, p, fds)),
    ];
    (body, flags, size_lie).prop_map(|((request, payload, fds), flags, size_lie)| Message {
        request,
        flags,
        size_lie,
        payload,
        fds,
    })
}

/// A descriptor of `kind`, owned.
fn make_fd(kind: &FdKind) -> OwnedFd {
    // SAFETY: each call returns a fresh descriptor (checked), owned by nobody else.
    unsafe {
        match kind {
            FdKind::EventFd => OwnedFd::from_raw_fd(libc::eventfd(0, libc::EFD_CLOEXEC)),
            FdKind::Pipe => {
                let mut p = [0; 2];
                assert_eq!(libc::pipe(p.as_mut_ptr()), 0);
                libc::close(p[0]);
                OwnedFd::from_raw_fd(p[1])
            }
            FdKind::DevNull => OwnedFd::from_raw_fd(libc::open(
                c"/dev/null".as_ptr(),
                libc::O_RDWR | libc::O_CLOEXEC,
            )),
            FdKind::Memfd(size) => {
                let fd = libc::memfd_create(c"vsw-fuzz".as_ptr(), libc::MFD_CLOEXEC);
                assert!(fd >= 0);
                assert_eq!(libc::ftruncate(fd, *size as libc::off_t), 0);
                OwnedFd::from_raw_fd(fd)
            }
        }
    }
}

/// A session that sets a guest up properly (features, a memory table, both queues of
/// the first pair with addresses inside it), over guest memory full of random bytes:
/// descriptors, rings and indexes are garbage the data path must survive.
#[derive(Clone, Debug)]
struct Setup {
    /// Bytes of the memfd behind the guest's memory, and the size the table claims.
    file_size: u64,
    claimed: u64,
    features: u64,
    queue_size: u16,
    /// Where the rings go (offsets into the memory), per queue: desc, avail, used.
    rings: [(u64, u64, u64); 2],
    /// Seed of the random memory contents.
    fill: u64,
    /// The frontend shrinks its memory after sharing it (the port's next access past
    /// the new end would raise SIGBUS).
    shrink: bool,
    /// How long the session stays open for the port to poll its rings.
    hold_ms: u64,
}

const SETUP_VA: u64 = 0x7f00_0000_0000;

fn setup() -> impl Strategy<Value = Setup> {
    let ring = || (0u64..0x3f).prop_map(|p| p * 0x1000);
    (
        prop_oneof![Just(0x4_0000u64), Just(0x10_0000)],
        prop_oneof![Just(false), Just(true)],
        prop_oneof![
            Just(1u64 << 32),
            Just((1u64 << 32) | (1 << 15) | (1 << 28) | (1 << 29)),
            Just((1u64 << 32) | 0x1883 | (1 << 15)),
            any::<u64>().prop_map(|f| f & 0x1_7060_99ff),
        ],
        (0u32..11).prop_map(|b| 1u16 << b),
        [(ring(), ring(), ring()), (ring(), ring(), ring())],
        any::<u64>(),
        0u64..4,
        proptest::bool::weighted(0.2),
    )
        .prop_map(
            |(file_size, more, features, queue_size, rings, fill, hold_ms, shrink)| Setup {
                file_size,
                claimed: if more { file_size * 4 } else { file_size },
                features,
                queue_size,
                rings,
                fill,
                shrink,
                hold_ms: if shrink { hold_ms + 2 } else { hold_ms },
            },
        )
}

/// The messages of a proper setup, with the memfd filled with random bytes.
fn setup_messages(s: &Setup) -> (Vec<Message>, OwnedFd) {
    let memfd = make_fd(&FdKind::Memfd(s.file_size));
    // Random contents, from a small generator (xorshift): quick for a megabyte.
    let mut x = s.fill | 1;
    let mut bytes = vec![0u8; s.file_size as usize];
    for chunk in bytes.chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        chunk.copy_from_slice(&x.to_le_bytes()[..chunk.len()]);
    }
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    // Rings a driver could have written, with random contents: descriptors that point
    // anywhere in the memory the table claims (past the file's end too), any flags
    // (chains, loops, indirect tables, read-only buffers), and an avail index a little
    // ahead, so that the port takes them.
    let qsize = u64::from(s.queue_size);
    for (desc, avail, _) in s.rings {
        for i in 0..qsize {
            let at = (desc + 16 * i) as usize;
            if at + 16 > bytes.len() {
                break;
            }
            let d = le(
                &[
                    next() % s.claimed,
                    next() % 4096,
                    next() & 7,
                    next() % qsize,
                ],
                &[8, 4, 2, 2],
            );
            bytes[at..at + 16].copy_from_slice(&d);
        }
        let idx = (next() % (qsize + 1)) as u16;
        let at = avail as usize;
        if at + 4 <= bytes.len() {
            bytes[at + 2..at + 4].copy_from_slice(&idx.to_le_bytes());
        }
        for i in 0..qsize {
            let at = (avail + 4 + 2 * i) as usize;
            if at + 2 <= bytes.len() {
                bytes[at..at + 2].copy_from_slice(&((next() % qsize) as u16).to_le_bytes());
            }
        }
    }
    let mut f = std::fs::File::from(memfd.try_clone().unwrap());
    f.write_all(&bytes).unwrap();
    let plain = |request: u32, payload: Vec<u8>, fds: Vec<FdKind>| Message {
        request,
        flags: 1,
        size_lie: None,
        payload,
        fds,
    };
    let mut m = vec![
        plain(3, vec![], vec![]),
        plain(2, le(&[s.features], &[8]), vec![]),
    ];
    // The memory table carries the memfd made here (sent in `session`).
    m.push(Message {
        fds: vec![FdKind::Memfd(u64::MAX)],
        ..plain(
            5,
            le(&[1, 0, 0, s.claimed, SETUP_VA, 0], &[4, 4, 8, 8, 8, 8]),
            vec![],
        )
    });
    for (q, (desc, avail, used)) in s.rings.iter().enumerate() {
        let q = q as u64;
        m.push(plain(8, le(&[q, u64::from(s.queue_size)], &[4, 4]), vec![]));
        m.push(plain(
            9,
            le(
                &[q, 0, SETUP_VA + desc, SETUP_VA + used, SETUP_VA + avail, 0],
                &[4, 4, 8, 8, 8, 8],
            ),
            vec![],
        ));
        m.push(plain(10, le(&[q, 0], &[4, 4]), vec![]));
        m.push(plain(13, le(&[q], &[8]), vec![FdKind::EventFd]));
        m.push(plain(12, le(&[q], &[8]), vec![FdKind::EventFd]));
    }
    (m, memfd)
}

/// Sends one session's messages and hangs up.
fn session(path: &PathBuf, messages: &[Message]) {
    session_with(path, messages, None, 0)
}

fn session_with(
    path: &PathBuf,
    messages: &[Message],
    memfd: Option<(&OwnedFd, bool)>,
    hold_ms: u64,
) {
    let Ok(s) = UnixStream::connect(path) else {
        return;
    };
    s.set_write_timeout(Some(Duration::from_secs(2))).unwrap();
    for m in messages {
        let size = m.size_lie.unwrap_or(m.payload.len() as u32);
        let mut bytes = le(
            &[u64::from(m.request), u64::from(m.flags), u64::from(size)],
            &[4, 4, 4],
        );
        bytes.extend_from_slice(&m.payload);
        let fds: Vec<OwnedFd> = m
            .fds
            .iter()
            .map(|k| match (k, memfd) {
                // The setup's own memory.
                (FdKind::Memfd(u64::MAX), Some((fd, _))) => fd.try_clone().unwrap(),
                _ => make_fd(k),
            })
            .collect();
        let raw: Vec<RawFd> = fds.iter().map(|f| f.as_raw_fd()).collect();
        let sent = if raw.is_empty() {
            (&s).write_all(&bytes).map(|_| bytes.len())
        } else {
            s.send_with_fds(&[&bytes[..]], &raw)
                .map_err(|e| std::io::Error::from_raw_os_error(e.errno()))
        };
        // The backend may hang up first (a message it refuses outright).
        if sent.is_err() {
            break;
        }
    }
    if let Some((fd, true)) = memfd {
        // Give the port a moment with the memory, then take most of it away.
        std::thread::sleep(Duration::from_millis(1));
        // SAFETY: ftruncate on a memfd this test owns.
        unsafe { libc::ftruncate(fd.as_raw_fd(), 0x1000) };
    }
    if hold_ms > 0 {
        std::thread::sleep(Duration::from_millis(hold_ms));
    }
}

struct Port {
    path: PathBuf,
    queues: Arc<Mutex<PortQueues>>,
    status: Arc<vsw_netdev::vhost::GuestStatus>,
    polling: Arc<AtomicBool>,
    poller: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Port {
    /// The poller lets go of the queues, and with them the port removes its socket.
    fn drop(&mut self) {
        self.stop_polling();
    }
}

impl Port {
    fn new(name: &str) -> Port {
        let path = temp(&format!("{name}.sock"));
        let (queues, status) = open_server(&path, 0o600, None).unwrap();
        let mut p = Port {
            path,
            queues: Arc::new(Mutex::new(queues)),
            status,
            polling: Arc::new(AtomicBool::new(false)),
            poller: None,
        };
        p.start_polling();
        p
    }

    /// A thread that does what a PMD does with the port, without end.
    fn start_polling(&mut self) {
        self.polling.store(true, Ordering::Release);
        let (queues, polling) = (self.queues.clone(), self.polling.clone());
        self.poller = Some(std::thread::spawn(move || {
            let f = frame(1);
            while polling.load(Ordering::Acquire) {
                let mut q = queues.lock().unwrap();
                let q = &mut *q;
                for rx in q.rx.iter_mut() {
                    let mut batch = RxBatch::new();
                    rx.recv(&mut batch);
                    drop(batch);
                    rx.release();
                }
                let _ = q.tx.stage(&f, &PacketMeta::default());
                q.tx.flush();
            }
        }));
    }

    fn stop_polling(&mut self) {
        self.polling.store(false, Ordering::Release);
        if let Some(t) = self.poller.take() {
            t.join().expect("the poller panicked");
        }
    }

    /// A well-behaved frontend sets up and passes a frame each way, in bounded time.
    fn still_works(&mut self) -> Result<(), String> {
        self.stop_polling();
        let started = Instant::now();
        let name = self
            .path
            .file_stem()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let g = set_up(&format!("{name}-check"), connect(&self.path));
        let mut q = self.queues.lock().unwrap();
        g.transmit(0, &[frame(9)]);
        let got = take(&mut q.rx[0], 1);
        g.offer_rx_buffers(1);
        q.tx.stage(&frame(8), &PacketMeta::default()).unwrap();
        let refused = q.tx.flush();
        let received = g.received();
        drop(q);
        drop(g);
        if got != vec![frame(9)] || refused != 0 || received.len() != 1 {
            return Err(format!(
                "after fuzzing, a good frontend got {got:?}, refused {refused}, received {}",
                received.len()
            ));
        }
        if started.elapsed() > Duration::from_secs(10) {
            return Err(format!("setting up took {:?}", started.elapsed()));
        }
        self.start_polling();
        Ok(())
    }
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000)
}

thread_local! {
    static PORT: std::cell::RefCell<Option<(Port, u32)>> = const { std::cell::RefCell::new(None) };
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn any_session_leaves_the_port_working(
        set_up_first in proptest::option::weighted(0.5, setup()),
        messages in proptest::collection::vec(message(), 0..24),
    ) {
        let result = PORT.with(|cell| {
            let mut cell = cell.borrow_mut();
            let (port, sessions) = cell.get_or_insert_with(|| (Port::new("fuzz"), 0));
            match &set_up_first {
                Some(setup) => {
                    let (mut all, memfd) = setup_messages(setup);
                    all.extend(messages.iter().cloned());
                    session_with(
                        &port.path,
                        &all,
                        Some((&memfd, setup.shrink)),
                        setup.hold_ms,
                    );
                }
                None => session(&port.path, &messages),
            }
            *sessions += 1;
            // A good frontend checks the port now and then (its session also ends
            // whatever the fuzzed ones left half done).
            if *sessions % 100 == 0 {
                port.still_works()
            } else {
                Ok(())
            }
        });
        prop_assert!(result.is_ok(), "{}", result.unwrap_err());
    }
}

#[test]
fn after_fuzzing_the_counters_and_port_are_sane() {
    let mut port = Port::new("fuzz-fixed");
    // A session of each kind the fuzz makes, then the check.
    let runner = &mut proptest::test_runner::TestRunner::deterministic();
    for _ in 0..200 {
        let messages = proptest::collection::vec(message(), 1..24)
            .new_tree(runner)
            .unwrap()
            .current();
        session(&port.path, &messages);
    }
    port.still_works().unwrap();
    let _ = port.status.bad_queues.load(Ordering::Relaxed);
    port.stop_polling();
}
