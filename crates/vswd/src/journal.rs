//! The journal of rule changes beside the state file: between full writes of the
//! state file, each change of the rules is one line appended to it — a cost that does
//! not grow with the rules installed, where a full write formats every rule.
//!
//! Durability, in two steps: a line is written (in the kernel's page cache) before
//! its change is applied and answered, so a vswd that crashes or is killed loses no
//! change; it is synced to the disk within [`SYNC_WINDOW`] by a thread of the
//! journal's, one sync for every line written in the window (a group commit). A host
//! that loses power may lose the changes of that last window — the price of taking
//! an OpenFlow controller's flow-mods at its pace (a synced line costs about 180 µs
//! on this machine's disk; ovs-vswitchd keeps no flows at all). The state file
//! itself is written whole and synced on every other change.
//!
//! The state file says which entries it already holds (`journal_seq`), so an entry
//! written before a crash between the two files' writes is never applied twice; a
//! line cut short by a crash is the end of the journal.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::state::StateError;

/// How long a written line may wait for the sync that makes it durable.
pub const SYNC_WINDOW: Duration = Duration::from_millis(100);

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

#[derive(Debug)]
pub struct Journal {
    path: PathBuf,
    /// Entries in the file now.
    entries: u64,
    last_seq: u64,
    syncer: Syncer,
}

impl Journal {
    /// Where the journal of the state file `state` is.
    pub fn path_of(state: &Path) -> PathBuf {
        let mut name = state.file_name().unwrap_or_default().to_os_string();
        name.push(".journal");
        state.with_file_name(name)
    }

    /// The journal's entries after `after_seq`, in order, and the journal itself to
    /// append to.
    pub fn open(state: &Path, after_seq: u64) -> Result<(Journal, Vec<JournalEntry>), StateError> {
        let path = Journal::path_of(state);
        let text = match fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => String::new(),
            Err(source) => return Err(StateError::Read { path, source }),
        };
        let mut entries = 0;
        let mut last_seq = after_seq;
        let mut newer = Vec::new();
        // Where the last whole line ends.
        let mut good = 0;
        for line in text.split_inclusive('\n') {
            // A line a crash cut short ends the journal.
            let whole = line.ends_with('\n');
            let Ok(e) = serde_json::from_str::<JournalEntry>(line.trim_end()) else {
                break;
            };
            if !whole {
                break;
            }
            good += line.len();
            entries += 1;
            last_seq = last_seq.max(e.seq);
            if e.seq > after_seq {
                newer.push(e);
            }
        }
        if good < text.len() {
            // What follows is not the journal: cut it off, or the next entries would
            // be appended after it and never read.
            let cut = fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .and_then(|f| f.set_len(good as u64).and_then(|()| f.sync_data()));
            cut.map_err(|source| StateError::Write {
                path: path.clone(),
                source,
            })?;
        }
        let journal = Journal {
            syncer: Syncer::start(path.clone()),
            path,
            entries,
            last_seq,
        };
        Ok((journal, newer))
    }

    pub fn entries(&self) -> u64 {
        self.entries
    }

    pub fn last_seq(&self) -> u64 {
        self.last_seq
    }

    /// Appends a change, to be synced within [`SYNC_WINDOW`]; `Err`: nothing was
    /// written that counts. The file is opened for each line and closed after it:
    /// vswd holds no descriptor on it between changes (a disk can be remounted
    /// read-only under it).
    pub fn append(&mut self, del: Vec<String>, add: Vec<String>) -> Result<(), StateError> {
        let err = |source| StateError::Write {
            path: self.path.clone(),
            source,
        };
        let entry = JournalEntry {
            seq: self.last_seq + 1,
            del,
            add,
        };
        let mut line = serde_json::to_string(&entry).map_err(|e| err(io::Error::other(e)))?;
        line.push('\n');
        let written = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .and_then(|mut f| f.write_all(line.as_bytes()));
        if let Err(e) = written {
            // What was written of the line is cut short: the end of the journal when
            // it is read (and cut off then). A journal that holds nothing goes.
            if self.entries == 0 {
                let _ = fs::remove_file(&self.path);
            }
            return Err(err(e));
        }
        self.syncer.written();
        self.entries += 1;
        self.last_seq = entry.seq;
        Ok(())
    }

    /// Syncs what was written now, without waiting for the window (a clean stop).
    pub fn sync(&self) {
        self.syncer.sync_now();
    }

    /// The state file now holds every entry: the journal starts again empty.
    pub fn clear(&mut self) {
        match fs::remove_file(&self.path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(path = %self.path.display(), error = %e, "cannot remove the journal (its entries are in the state file)")
            }
        }
        self.entries = 0;
    }
}

/// What the journal and its sync thread share.
#[derive(Default)]
struct SyncState {
    /// Lines were written that no sync has begun to cover.
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

/// The thread that syncs the journal: it sleeps until a line is written, gathers the
/// lines of one window, and syncs them with one `fdatasync`. It stops (syncing what
/// is left) when the journal is dropped.
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
/// file takes its entries).
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
            .map_err(|e| tracing::error!(error = %e, "no journal sync thread: each line is synced as it is written"))
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
            // The window: lines written meanwhile share this sync.
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
        // The sync that covers the last line: the next to begin while lines wait
        // (after the running one, which began before them).
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

    #[test]
    fn a_journal_gives_back_its_entries_after_a_seq_and_stops_at_a_cut_line() {
        let path = temp_path("journal");
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        let (mut j, none) = Journal::open(&path, 0).unwrap();
        assert!(none.is_empty());
        j.append(vec![], vec!["priority=1,actions=drop".into()])
            .unwrap();
        j.append(vec!["priority=1,actions=drop".into()], vec![])
            .unwrap();
        j.append(vec![], vec!["priority=2,actions=drop".into()])
            .unwrap();
        assert_eq!((j.entries(), j.last_seq()), (3, 3));
        // A crash in the middle of a line: that line and anything after it are not
        // the journal.
        let jp = Journal::path_of(&path);
        let mut text = fs::read_to_string(&jp).unwrap();
        text.push_str("{\"seq\":4,\"add\":[\"prio");
        fs::write(&jp, &text).unwrap();
        let (j, all) = Journal::open(&path, 0).unwrap();
        assert_eq!(all.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![1, 2, 3]);
        assert_eq!(j.last_seq(), 3);
        // The cut line is gone: what is appended next is read back.
        assert_eq!(fs::read_to_string(&jp).unwrap().lines().count(), 3);
        let mut j = j;
        j.append(vec![], vec!["priority=4,actions=drop".into()])
            .unwrap();
        let (_, all) = Journal::open(&path, 0).unwrap();
        assert_eq!(all.len(), 4);
        // Entries the state file holds already (its journal_seq) are not given again.
        let (_, later) = Journal::open(&path, 3).unwrap();
        assert_eq!(later.len(), 1);
        assert_eq!(later[0].add, vec!["priority=4,actions=drop".to_string()]);
        let (mut j, _) = Journal::open(&path, 4).unwrap();
        j.clear();
        assert!(!jp.exists());
        fs::remove_dir_all(path.parent().unwrap()).unwrap();
    }

    #[test]
    fn a_line_is_in_the_file_when_append_returns_and_synced_when_asked() {
        let path = temp_path("sync");
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        let (mut j, _) = Journal::open(&path, 0).unwrap();
        for i in 0..50 {
            j.append(vec![], vec![format!("priority={i},actions=drop")])
                .unwrap();
            // Written before the change it carries is applied: a vswd killed now
            // finds it at its next start.
            let (_, all) = Journal::open(&path, 0).unwrap();
            assert_eq!(all.len(), i + 1);
        }
        // Lines written within a window share a sync.
        j.sync();
        let synced = j.syncer.shared.lock().synced;
        assert!((1..=50).contains(&synced), "{synced} syncs for 50 lines");
        // Nothing left to sync: returns at once.
        j.sync();
        assert_eq!(j.syncer.shared.lock().synced, synced);
        drop(j);
        fs::remove_dir_all(path.parent().unwrap()).unwrap();
    }
}
