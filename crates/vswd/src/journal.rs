//! The journal of rule changes beside the state file: between full writes of the
//! state file, each change of the rules is one record appended to it — a cost that
//! does not grow with the rules installed, where a full write formats every rule.
//!
//! Durability, in two steps: a record is written (in the kernel's page cache) before
//! its change is applied and answered, so a vswd that crashes or is killed loses no
//! change; it is synced to the disk within [`SYNC_WINDOW`] by a thread of the
//! journal's, one sync for every record written in the window (a group commit). A
//! host that loses power may lose the changes of that last window — the price of
//! taking an OpenFlow controller's flow-mods at its pace (a synced line costs about
//! 180 µs on this machine's disk; ovs-vswitchd keeps no flows at all). The state
//! file itself is written whole and synced on every other change.
//!
//! The file: a header line naming the format and the state file it extends (that
//! file's `generation`, new at every full write), then one record a line, each
//! `CRC32C JSON`. So:
//! - a journal beside another state file than the one it extends (the state file
//!   was deleted to start afresh, or written whole after the journal's last record)
//!   is not replayed: it is moved aside (`.stale`), said in the log;
//! - a record an append could not finish (a full disk) is cut off again at once; if
//!   even that fails the journal takes no more records (changes write the state
//!   file whole) — later records never land behind a fragment;
//! - a reader skips a damaged line (its checksum, its end) and goes on, as long as
//!   the records after it follow on in sequence (a refused append leaves a fragment
//!   whose sequence number the next record takes); any record lost is said loudly,
//!   and nothing after a gap is replayed;
//! - a header or record of a newer vswd (its format, fields this vswd does not know)
//!   is refused with a message, never cut away.
//!
//! The state file says which records it already holds (`journal_seq`), so a record
//! written before a crash between the two files' writes is never applied twice.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::state::StateError;

/// How long a written record may wait for the sync that makes it durable.
pub const SYNC_WINDOW: Duration = Duration::from_millis(100);

/// The journal format this vswd writes (and the newest it reads).
pub const JOURNAL_FORMAT: u32 = 1;

/// One change of the rules: the rules removed (by their table, priority and match)
/// and then the rules added, as canonical flow texts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JournalEntry {
    pub seq: u64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub del: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub add: Vec<String>,
}

/// A rule's text as a record holds it: a JSON string, quoted and escaped when it
/// is made — a bundle's adds are made when each arrives, so that its commit, which
/// may carry 100,000 of them, only copies them into its record.
/// Shared: a bundle's stage holds its adds' texts beside the adds themselves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordText(Arc<str>);

impl RecordText {
    pub fn new(text: &str) -> RecordText {
        RecordText(
            serde_json::to_string(text)
                .expect("a string serializes")
                .into(),
        )
    }
}

/// The JSON of the record `{seq, del, add}`, as serde_json writes a
/// [`JournalEntry`] (empty lists left out), from texts quoted beforehand.
fn record_json(seq: u64, del: &[RecordText], add: &[RecordText]) -> String {
    let texts: usize = del.iter().chain(add).map(|t| t.0.len() + 1).sum();
    let mut json = String::with_capacity(texts + 48);
    json.push_str("{\"seq\":");
    json.push_str(&seq.to_string());
    for (name, list) in [("del", del), ("add", add)] {
        if list.is_empty() {
            continue;
        }
        json.push_str(",\"");
        json.push_str(name);
        json.push_str("\":[");
        for (i, t) in list.iter().enumerate() {
            if i > 0 {
                json.push(',');
            }
            json.push_str(&t.0);
        }
        json.push(']');
    }
    json.push('}');
    json
}

/// The journal's first line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct Header {
    vsw_journal: u32,
    /// The `generation` of the state file the records extend.
    state_generation: u64,
}

/// `json` as a line of the journal: its checksum, then itself.
fn framed(json: &str) -> String {
    format!("{:08x} {json}\n", crc32c::crc32c(json.as_bytes()))
}

/// A line's JSON, if its checksum holds.
fn unframed(line: &str) -> Option<&str> {
    let (crc, json) = line.split_once(' ')?;
    let crc = u32::from_str_radix(crc, 16)
        .ok()
        .filter(|_| crc.len() == 8)?;
    (crc32c::crc32c(json.as_bytes()) == crc).then_some(json)
}

#[derive(Debug)]
pub struct Journal {
    path: PathBuf,
    /// Records in the file now.
    entries: u64,
    last_seq: u64,
    /// The file's length up to its last whole record (0: no file yet).
    good_len: u64,
    /// The state file generation new records extend.
    generation: u64,
    /// An append failed and its fragment could not be cut off: no more records
    /// until the state file is written whole.
    broken: bool,
    syncer: Syncer,
}

/// What reading a journal found.
struct Read {
    entries: Vec<JournalEntry>,
    /// Whole, checked records (stale ones included).
    records: u64,
    /// Lines dropped (damaged, or cut short at the end), and their bytes.
    dropped: (u64, u64),
    /// A record missing before the ones it had to stop at.
    gap: bool,
    /// Written by the vswd before framed journals: to be written again framed.
    legacy: bool,
}

impl Journal {
    /// Where the journal of the state file `state` is.
    pub fn path_of(state: &Path) -> PathBuf {
        let mut name = state.file_name().unwrap_or_default().to_os_string();
        name.push(".journal");
        state.with_file_name(name)
    }

    /// The journal's records after `after_seq`, in order, for the state file of
    /// `generation`, and the journal itself to append to. A journal of another
    /// state file is moved aside, not replayed; one of a newer vswd is refused.
    pub fn open(
        state: &Path,
        after_seq: u64,
        generation: u64,
    ) -> Result<(Journal, Vec<JournalEntry>), StateError> {
        let path = Journal::path_of(state);
        let text = match fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => String::new(),
            Err(source) => return Err(StateError::Read { path, source }),
        };
        let mut journal = Journal {
            syncer: Syncer::start(path.clone()),
            path: path.clone(),
            entries: 0,
            last_seq: after_seq,
            good_len: 0,
            generation,
            broken: false,
        };
        if text.is_empty() {
            let _ = fs::remove_file(&path);
            return Ok((journal, Vec::new()));
        }
        let read = match read_journal(&path, &text, after_seq, generation)? {
            Some(r) => r,
            None => {
                // Another state file's: keep it for whoever wants to look, out of
                // the way.
                let mut aside = path.clone().into_os_string();
                aside.push(".stale");
                tracing::warn!(journal = %path.display(), moved_to = %PathBuf::from(&aside).display(), "the journal extends another state file than this one (deleted or replaced): not replayed");
                if let Err(e) = fs::rename(&path, &aside) {
                    tracing::warn!(error = %e, "cannot move the stale journal aside; removing it");
                    let _ = fs::remove_file(&path);
                }
                return Ok((journal, Vec::new()));
            }
        };
        let (lines, bytes) = read.dropped;
        if lines > 0 {
            tracing::error!(journal = %path.display(), lines, bytes, "damaged journal lines dropped (a change refused while the disk was full, or a crash mid-write)");
        }
        if read.gap {
            tracing::error!(journal = %path.display(), "a journal record is missing: the records after it are NOT replayed (rule changes made after it are lost)");
        }
        journal.last_seq = read
            .entries
            .last()
            .map_or(after_seq, |e| e.seq)
            .max(after_seq);
        // Written again clean (header, the records kept) when anything was dropped,
        // so that what is appended next follows a whole record.
        if lines > 0 || read.gap || read.legacy {
            journal.rewrite(&read.entries)?;
        } else {
            journal.entries = read.records;
            journal.good_len = text.len() as u64;
        }
        Ok((journal, read.entries))
    }

    /// The file anew, holding `entries` (after a damaged one was read).
    fn rewrite(&mut self, entries: &[JournalEntry]) -> Result<(), StateError> {
        let err = |source| StateError::Write {
            path: self.path.clone(),
            source,
        };
        let mut text = self.header_line();
        for e in entries {
            text.push_str(&framed(
                &serde_json::to_string(e).map_err(|e| err(io::Error::other(e)))?,
            ));
        }
        let mut tmp = self.path.clone().into_os_string();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        (|| {
            let mut f = fs::File::create(&tmp)?;
            f.write_all(text.as_bytes())?;
            f.sync_all()?;
            fs::rename(&tmp, &self.path)?;
            sync_dir(&self.path)
        })()
        .map_err(err)?;
        self.entries = entries.len() as u64;
        self.good_len = text.len() as u64;
        Ok(())
    }

    fn header_line(&self) -> String {
        let h = Header {
            vsw_journal: JOURNAL_FORMAT,
            state_generation: self.generation,
        };
        framed(&serde_json::to_string(&h).expect("a header serializes"))
    }

    pub fn entries(&self) -> u64 {
        self.entries
    }

    /// The journal's size on disk.
    pub fn bytes(&self) -> u64 {
        self.good_len
    }

    /// Whether it takes records (an append whose fragment could not be cut off
    /// makes it refuse them until the state file is written whole).
    pub fn usable(&self) -> bool {
        !self.broken
    }

    pub fn last_seq(&self) -> u64 {
        self.last_seq
    }

    /// Appends a change, to be synced within [`SYNC_WINDOW`]; `Err`: nothing was
    /// written that counts (what was written of it is cut off again). The file is
    /// opened for each record and closed after it: vswd holds no descriptor on it
    /// between changes (a disk can be remounted read-only under it).
    pub fn append(&mut self, del: &[RecordText], add: &[RecordText]) -> Result<(), StateError> {
        let err = |source| StateError::Write {
            path: self.path.clone(),
            source,
        };
        if self.broken {
            return Err(err(io::Error::other(
                "the journal takes no records until the state file is written whole",
            )));
        }
        let seq = self.last_seq + 1;
        let mut line = framed(&record_json(seq, del, add));
        let new_file = self.good_len == 0;
        if new_file {
            line = self.header_line() + &line;
        }
        let written = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .and_then(|mut f| {
                let w = f.write_all(line.as_bytes());
                if w.is_err() {
                    // Cut back to the last whole record: nothing of this one stays
                    // for the next to land behind.
                    if f.set_len(self.good_len).is_err() {
                        self.broken = true;
                    }
                }
                w
            });
        if let Err(e) = written {
            if self.broken {
                tracing::error!(journal = %self.path.display(), "a refused change's fragment cannot be cut off the journal: rule changes write the state file whole until it can be");
            }
            if new_file && !self.broken {
                let _ = fs::remove_file(&self.path);
            }
            return Err(err(e));
        }
        // A new journal's name is made durable before anything counts on it.
        if new_file {
            if let Err(e) = sync_dir(&self.path) {
                tracing::warn!(error = %e, "cannot sync the journal's directory");
            }
        }
        self.good_len += line.len() as u64;
        self.syncer.written();
        self.entries += 1;
        self.last_seq = seq;
        Ok(())
    }

    /// Syncs what was written now, without waiting for the window (a clean stop).
    pub fn sync(&self) {
        self.syncer.sync_now();
    }

    /// The state file now holds every record, and is of `generation`: the journal
    /// starts again empty, extending it.
    pub fn clear(&mut self, generation: u64) {
        match fs::remove_file(&self.path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(path = %self.path.display(), error = %e, "cannot remove the journal (its records are in the state file)")
            }
        }
        self.entries = 0;
        self.good_len = 0;
        self.broken = false;
        self.generation = generation;
    }
}

/// Reads a journal's text: `None` when it extends another state file than the one
/// of `generation`.
fn read_journal(
    path: &Path,
    text: &str,
    after_seq: u64,
    generation: u64,
) -> Result<Option<Read>, StateError> {
    let newer = |why: String| StateError::Corrupt {
        path: path.to_path_buf(),
        why: format!("{why}: written by a newer vswd (run it, or move the journal away)"),
    };
    let mut read = Read {
        entries: Vec::new(),
        records: 0,
        dropped: (0, 0),
        gap: false,
        legacy: false,
    };
    if !text.lines().any(|l| unframed(l).is_some()) {
        return Ok(read_legacy(text, after_seq, generation, read));
    }
    let mut header = None;
    let mut expected = after_seq + 1;
    for line in text.split_inclusive('\n') {
        if line.trim().is_empty() {
            continue;
        }
        let json = line.strip_suffix('\n').and_then(unframed);
        let Some(json) = json else {
            // A fragment, or a line damaged on the disk: passed over.
            read.dropped.0 += 1;
            read.dropped.1 += line.len() as u64;
            continue;
        };
        if header.is_none() {
            // No header: which state file it extends cannot be told.
            let Ok(h) = serde_json::from_str::<Header>(json) else {
                return Ok(None);
            };
            if h.vsw_journal > JOURNAL_FORMAT {
                return Err(newer(format!("journal format {}", h.vsw_journal)));
            }
            if h.state_generation != generation {
                return Ok(None);
            }
            header = Some(h);
            continue;
        }
        // A checked record this vswd cannot read is a newer vswd's: refused.
        let e: JournalEntry = serde_json::from_str(json)
            .map_err(|e| newer(format!("a journal record this vswd cannot read ({e})")))?;
        read.records += 1;
        if read.gap || e.seq < expected {
            continue;
        }
        if e.seq > expected {
            read.gap = true;
            continue;
        }
        expected += 1;
        read.entries.push(e);
    }
    Ok(Some(read))
}

/// A journal of the vswd before framed journals (plain JSON lines, no header): read
/// as that vswd read it (up to its first line that does not read) — only beside a
/// state file of that vswd too (generation 0); else it is another file's.
fn read_legacy(text: &str, after_seq: u64, generation: u64, mut read: Read) -> Option<Read> {
    if generation != 0 {
        return None;
    }
    read.legacy = true;
    for line in text.split_inclusive('\n') {
        let Ok(e) = serde_json::from_str::<JournalEntry>(line.trim_end()) else {
            break;
        };
        if !line.ends_with('\n') {
            break;
        }
        read.records += 1;
        if e.seq > after_seq {
            read.entries.push(e);
        }
    }
    Some(read)
}

/// Syncs the directory holding `path` (so that a new or renamed name survives a
/// power loss).
fn sync_dir(path: &Path) -> io::Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    fs::File::open(dir)?.sync_all()
}

/// What the journal and its sync thread share.
#[derive(Default)]
struct SyncState {
    /// Records were written that no sync has begun to cover.
    dirty: bool,
    /// A sync is running.
    syncing: bool,
    /// Syncs finished (so that `sync_now` knows when the one it needs is done).
    synced: u64,
    /// Sync without waiting for the window.
    hurry: bool,
    stop: bool,
}

#[derive(Default)]
struct SyncShared {
    state: Mutex<SyncState>,
    wake: Condvar,
}

impl SyncShared {
    fn lock(&self) -> std::sync::MutexGuard<'_, SyncState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The thread that syncs the journal: it sleeps until a record is written, gathers
/// the records of one window, and syncs them with one `fdatasync`. It stops
/// (syncing what is left) when the journal is dropped.
struct Syncer {
    path: PathBuf,
    shared: Arc<SyncShared>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Syncer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Syncer")
    }
}

/// Syncs the file at `path`, if there is one (the journal is removed when the state
/// file takes its records).
fn sync_file(path: &Path) {
    match fs::File::open(path).and_then(|f| f.sync_data()) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => {
            tracing::error!(path = %path.display(), error = %e, "cannot sync the journal: its last rule changes may not survive a power loss")
        }
    }
}

impl Syncer {
    fn start(path: PathBuf) -> Syncer {
        let shared = Arc::new(SyncShared::default());
        let (s, p) = (shared.clone(), path.clone());
        let thread = std::thread::Builder::new()
            .name("vsw-journal".into())
            .spawn(move || Syncer::run(&s, &p))
            .map_err(|e| tracing::error!(error = %e, "no journal sync thread: each record is synced as it is written"))
            .ok();
        Syncer {
            path,
            shared,
            thread,
        }
    }

    fn run(shared: &SyncShared, path: &Path) {
        let mut st = shared.lock();
        loop {
            while !st.dirty && !st.stop {
                st = shared.wake.wait(st).unwrap_or_else(PoisonError::into_inner);
            }
            if !st.dirty {
                return;
            }
            // The window: records written meanwhile share this sync.
            st = shared
                .wake
                .wait_timeout_while(st, SYNC_WINDOW, |s| !s.stop && !s.hurry)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
            st.dirty = false;
            st.syncing = true;
            drop(st);
            sync_file(path);
            st = shared.lock();
            st.syncing = false;
            st.synced += 1;
            shared.wake.notify_all();
        }
    }

    fn written(&self) {
        if self.thread.is_none() {
            return sync_file(&self.path);
        }
        let mut st = self.shared.lock();
        if !st.dirty {
            st.dirty = true;
            self.shared.wake.notify_all();
        }
    }

    /// Returns once everything written before the call is synced.
    fn sync_now(&self) {
        if self.thread.is_none() {
            return;
        }
        let mut st = self.shared.lock();
        // The sync that covers the last record: the next to begin while records
        // wait (after the running one, which began before them).
        let target = match (st.dirty, st.syncing) {
            (false, false) => return,
            (false, true) => st.synced + 1,
            (true, false) => st.synced + 1,
            (true, true) => st.synced + 2,
        };
        st.hurry = true;
        self.shared.wake.notify_all();
        while st.synced < target {
            st = self
                .shared
                .wake
                .wait(st)
                .unwrap_or_else(PoisonError::into_inner);
        }
        st.hurry = false;
    }
}

impl Drop for Syncer {
    fn drop(&mut self) {
        self.shared.lock().stop = true;
        self.shared.wake.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_path(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("vswd-journal-test-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        dir.join("state.json")
    }

    const GEN: u64 = 0x5eed;

    fn seqs(entries: &[JournalEntry]) -> Vec<u64> {
        entries.iter().map(|e| e.seq).collect()
    }

    proptest::proptest! {
        /// A record made from texts quoted beforehand is the line serde_json
        /// writes of the same entry (and reads back as it): any text, escapes
        /// and empty lists included.
        #[test]
        fn a_record_of_quoted_texts_is_what_serde_writes(
            seq in proptest::prelude::any::<u64>(),
            del in proptest::collection::vec(".{0,40}", 0..4),
            add in proptest::collection::vec(".{0,40}", 0..4),
        ) {
            let quoted = |v: &[String]| v.iter().map(|t| RecordText::new(t)).collect::<Vec<_>>();
            let json = record_json(seq, &quoted(&del), &quoted(&add));
            let entry = JournalEntry { seq, del, add };
            proptest::prop_assert_eq!(&json, &serde_json::to_string(&entry).unwrap());
            proptest::prop_assert_eq!(serde_json::from_str::<JournalEntry>(&json).unwrap(), entry);
        }
    }

    #[test]
    fn a_journal_gives_back_its_records_after_a_seq_and_drops_a_cut_line() {
        let path = temp_path("journal");
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        let (mut j, none) = Journal::open(&path, 0, GEN).unwrap();
        assert!(none.is_empty());
        j.append(&[], &[RecordText::new("priority=1,actions=drop")])
            .unwrap();
        j.append(&[RecordText::new("priority=1,actions=drop")], &[])
            .unwrap();
        j.append(&[], &[RecordText::new("priority=2,actions=drop")])
            .unwrap();
        assert_eq!((j.entries(), j.last_seq()), (3, 3));
        // A crash in the middle of a record: that line is not the journal.
        let jp = Journal::path_of(&path);
        let mut text = fs::read_to_string(&jp).unwrap();
        text.push_str("0123abcd {\"seq\":4,\"add\":[\"prio");
        fs::write(&jp, &text).unwrap();
        let (j, all) = Journal::open(&path, 0, GEN).unwrap();
        assert_eq!(seqs(&all), vec![1, 2, 3]);
        assert_eq!(j.last_seq(), 3);
        // The cut line is gone: what is appended next is read back.
        assert_eq!(fs::read_to_string(&jp).unwrap().lines().count(), 1 + 3);
        let mut j = j;
        j.append(&[], &[RecordText::new("priority=4,actions=drop")])
            .unwrap();
        let (_, all) = Journal::open(&path, 0, GEN).unwrap();
        assert_eq!(all.len(), 4);
        // Records the state file holds already (its journal_seq) are not given again.
        let (_, later) = Journal::open(&path, 3, GEN).unwrap();
        assert_eq!(later.len(), 1);
        assert_eq!(later[0].add, vec!["priority=4,actions=drop".to_string()]);
        let (mut j, _) = Journal::open(&path, 4, GEN).unwrap();
        j.clear(GEN + 1);
        assert!(!jp.exists());
        fs::remove_dir_all(path.parent().unwrap()).unwrap();
    }

    /// A fragment a refused append left (its sequence number taken again by the
    /// next record) is passed over: the records after it are replayed; a record
    /// missing outright stops the replay, loudly.
    #[test]
    fn a_reader_goes_on_past_a_fragment_but_never_past_a_gap() {
        let path = temp_path("resync");
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        let (mut j, _) = Journal::open(&path, 0, GEN).unwrap();
        j.append(&[], &[RecordText::new("priority=1,actions=drop")])
            .unwrap();
        let jp = Journal::path_of(&path);
        let mut text = fs::read_to_string(&jp).unwrap();
        // The fragment of seq 2, then seq 2 and 3 whole.
        text.push_str("9999 {\"seq\":2,\"ad");
        for (seq, p) in [(2, 2), (3, 3)] {
            let e = JournalEntry {
                seq,
                del: vec![],
                add: vec![format!("priority={p},actions=drop")],
            };
            text.push('\n');
            text.push_str(framed(&serde_json::to_string(&e).unwrap()).trim_end());
        }
        text.push('\n');
        fs::write(&jp, &text).unwrap();
        let (j, all) = Journal::open(&path, 0, GEN).unwrap();
        assert_eq!(seqs(&all), vec![1, 2, 3]);
        assert_eq!(j.entries(), 3);
        // Written clean: read again, the same.
        assert_eq!(
            seqs(&Journal::open(&path, 0, GEN).unwrap().1),
            vec![1, 2, 3]
        );
        // A record missing: nothing after the gap is replayed.
        let mut text = fs::read_to_string(&jp).unwrap();
        let e = JournalEntry {
            seq: 9,
            ..JournalEntry::default()
        };
        text.push_str(&framed(&serde_json::to_string(&e).unwrap()));
        fs::write(&jp, &text).unwrap();
        assert_eq!(
            seqs(&Journal::open(&path, 0, GEN).unwrap().1),
            vec![1, 2, 3]
        );
        fs::remove_dir_all(path.parent().unwrap()).unwrap();
    }

    #[test]
    fn another_state_files_journal_is_moved_aside_and_a_newer_one_refused() {
        let path = temp_path("stale");
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        let (mut j, _) = Journal::open(&path, 0, GEN).unwrap();
        j.append(&[], &[RecordText::new("priority=1,actions=drop")])
            .unwrap();
        drop(j);
        let jp = Journal::path_of(&path);
        let (_, replay) = Journal::open(&path, 0, GEN + 1).unwrap();
        assert!(replay.is_empty(), "another state file's journal replayed");
        assert!(!jp.exists());
        let mut stale = jp.clone().into_os_string();
        stale.push(".stale");
        assert!(PathBuf::from(stale).exists());
        // A newer vswd's journal: refused, kept as it is.
        let h = serde_json::json!({"vsw_journal": JOURNAL_FORMAT + 1, "state_generation": GEN});
        fs::write(&jp, framed(&h.to_string())).unwrap();
        let e = Journal::open(&path, 0, GEN).unwrap_err().to_string();
        assert!(e.contains("newer vswd"), "{e}");
        let h = serde_json::json!({"vsw_journal": JOURNAL_FORMAT, "state_generation": GEN});
        let r = serde_json::json!({"seq": 1, "add": [], "ttl": 3});
        fs::write(&jp, framed(&h.to_string()) + &framed(&r.to_string())).unwrap();
        let e = Journal::open(&path, 0, GEN).unwrap_err().to_string();
        assert!(e.contains("newer vswd"), "{e}");
        assert!(jp.exists(), "a newer vswd's journal is never cut away");
        fs::remove_dir_all(path.parent().unwrap()).unwrap();
    }

    proptest::proptest! {
        /// Whatever a disk or a crash does to a journal (cut anywhere, bytes
        /// changed, garbage inserted), reading it never panics, and what it gives
        /// back is records it held, in order, from the first on.
        #[test]
        fn a_damaged_journal_reads_without_panicking_and_gives_back_a_prefix(
            n in 1usize..12,
            cut in 0usize..4000,
            flips in proptest::collection::vec((0usize..4000, proptest::prelude::any::<u8>()), 0..4),
            garbage in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..40),
            at in 0usize..4000,
        ) {
            let path = temp_path(&format!("fuzz-{n}-{cut}-{at}"));
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            let (mut j, _) = Journal::open(&path, 0, GEN).unwrap();
            for i in 0..n {
                j.append(&[], &[RecordText::new(&format!("priority={i},actions=drop"))]).unwrap();
            }
            drop(j);
            let jp = Journal::path_of(&path);
            let mut bytes = fs::read(&jp).unwrap();
            bytes.truncate(cut.max(1).min(bytes.len()));
            for (i, b) in &flips {
                let len = bytes.len();
                bytes[i % len] = *b;
            }
            let len = bytes.len();
            bytes.splice(at % (len + 1)..at % (len + 1), garbage);
            fs::write(&jp, &bytes).unwrap();
            if let Ok((_, got)) = Journal::open(&path, 0, GEN) {
                for (i, e) in got.iter().enumerate() {
                    proptest::prop_assert_eq!(e.seq, i as u64 + 1);
                    proptest::prop_assert_eq!(&e.add, &vec![format!("priority={i},actions=drop")]);
                }
            }
            let _ = fs::remove_dir_all(path.parent().unwrap());
        }
    }

    /// A journal of the vswd before this one is read as it wrote it, and written
    /// again framed.
    #[test]
    fn a_journal_of_the_earlier_vswd_is_read_and_framed() {
        let path = temp_path("legacy");
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        let jp = Journal::path_of(&path);
        fs::write(
            &jp,
            "{\"seq\":1,\"add\":[\"priority=1,actions=drop\"]}\n{\"seq\":2,\"del\":[\"priority=1,actions=drop\"]}\n",
        )
        .unwrap();
        let (_, all) = Journal::open(&path, 0, 0).unwrap();
        assert_eq!(seqs(&all), vec![1, 2]);
        assert!(fs::read_to_string(&jp)
            .unwrap()
            .lines()
            .all(|l| unframed(l).is_some()));
        assert_eq!(seqs(&Journal::open(&path, 0, 0).unwrap().1), vec![1, 2]);
        fs::remove_dir_all(path.parent().unwrap()).unwrap();
    }

    #[test]
    fn a_record_is_in_the_file_when_append_returns_and_synced_when_asked() {
        let path = temp_path("sync");
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        let (mut j, _) = Journal::open(&path, 0, GEN).unwrap();
        for i in 0..50 {
            j.append(
                &[],
                &[RecordText::new(&format!("priority={i},actions=drop"))],
            )
            .unwrap();
            // Written before the change it carries is applied: a vswd killed now
            // finds it at its next start.
            let (_, all) = Journal::open(&path, 0, GEN).unwrap();
            assert_eq!(all.len(), i + 1);
        }
        assert_eq!(
            j.bytes(),
            fs::metadata(Journal::path_of(&path)).unwrap().len()
        );
        // Records written within a window share a sync.
        j.sync();
        let synced = j.syncer.shared.lock().synced;
        assert!((1..=50).contains(&synced), "{synced} syncs for 50 records");
        // Nothing left to sync: returns at once.
        j.sync();
        assert_eq!(j.syncer.shared.lock().synced, synced);
        drop(j);
        fs::remove_dir_all(path.parent().unwrap()).unwrap();
    }
}
