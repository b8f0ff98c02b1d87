//! The persisted configuration: options, ports and flows, written atomically on every
//! change and read back at start.
//!
//! A change is written in two steps around applying it: [`SavedState::prepare`]
//! writes and syncs the new file beside the old one (where a full or read-only disk
//! shows), the change is applied, and [`PendingState::commit`] renames it into place.
//! A change whose file cannot be written is never applied, and no temporary file is
//! left behind.
//!
//! The file carries a schema version. One written by an older vswd is migrated when it
//! is read (and a copy of it kept as `<file>.v<N>.bak` the first time it is
//! replaced); one written by a newer vswd is refused.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::options::Options;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SavedPort {
    pub name: String,
    pub no: u32,
    /// The port's options; from schema 2 on they always name its `type`.
    #[serde(default)]
    pub options: Options,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SavedState {
    pub version: u32,
    /// The vswd that wrote the file ("vswd 0.1.0"), for whoever reads it later.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub written_by: String,
    #[serde(default)]
    pub options: Options,
    #[serde(default)]
    pub ports: Vec<SavedPort>,
    /// Canonical flow texts, ports by number.
    #[serde(default)]
    pub flows: Vec<String>,
    /// Groups as `ovs-ofctl add-group` takes them, ports by number.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
    /// Meters as `ovs-ofctl add-meter` takes them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub meters: Vec<String>,
    /// The last entry of the journal this file holds (later ones are replayed on it).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub journal_seq: u64,
    /// New at every write of the file: the journal names the generation it
    /// extends, so a journal left beside another file (this one deleted to start
    /// afresh, say) is never replayed onto it. 0: written before generations.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub generation: u64,
}

/// A generation no earlier file had (in all likelihood): the clock and the process,
/// mixed by the standard library's randomly keyed hasher.
fn fresh_generation() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    h.write_u128(now.as_nanos());
    h.write_u32(std::process::id());
    h.finish().max(1)
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The schema this vswd writes.
///
/// - 1: ports' options hold only what the user gave (a port without `type` is an
///   afpacket port, one without `afpacket-mode` uses rings).
/// - 2: every port names its `type`, and every afpacket port its `afpacket-mode`, so
///   that a later change of a default cannot change what a saved port is; `written_by`.
/// - 3: flows live in tables 0-254 and a table miss drops; the learning switch of
///   earlier schemas (a miss went to NORMAL) is the rule `priority=0,actions=NORMAL`,
///   listed like any other.
/// - 4: groups (`groups`), which flows may hand packets to, and meters (`meters`).
pub const STATE_VERSION: u32 = 4;

/// The rule a new switch starts with, and what a miss did before schema 3.
pub use vsw_flow::pipeline::LEARNING_SWITCH_FLOW;

/// Who writes the files.
pub fn writer() -> String {
    format!("vswd {}", env!("CARGO_PKG_VERSION"))
}

#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("cannot read state file {path}: {source}")]
    Read { path: PathBuf, source: io::Error },
    #[error(
        "state file {path} is corrupt: {why}; vswd will not start over it (repair or remove it)"
    )]
    Corrupt { path: PathBuf, why: String },
    #[error(
        "state file {path} has schema version {version}{by}, newer than this vswd reads ({STATE_VERSION}); vswd will not start over it (run the newer vswd, or move the file away)"
    )]
    Newer {
        path: PathBuf,
        version: u32,
        by: String,
    },
    #[error("cannot write state file {path}: {source}; nothing was changed")]
    Write { path: PathBuf, source: io::Error },
}

/// The temporary file a change is written to before it is applied.
fn temporary(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".tmp");
    path.with_file_name(name)
}

/// Writes out what schema 1 left implicit in a port's options: its defaults then
/// (`type=afpacket`, `afpacket-mode=ring`), whatever the classes' defaults are now.
fn explicit_v1_port_options(options: &mut Options) {
    let t = options
        .entry("type".into())
        .or_insert_with(|| "afpacket".into())
        .clone();
    if t == "afpacket" {
        options
            .entry("afpacket-mode".into())
            .or_insert_with(|| "ring".into());
    }
}

impl SavedState {
    /// Reads the state file; `Ok(None)` when there is none yet. A file of an older
    /// schema comes back migrated (its version says which it was read as: the
    /// current one), with `Some(old version)`.
    pub fn load(path: &Path) -> Result<Option<(SavedState, Option<u32>)>, StateError> {
        let text = match fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(StateError::Read {
                    path: path.to_path_buf(),
                    source,
                })
            }
        };
        let corrupt = |why: String| StateError::Corrupt {
            path: path.to_path_buf(),
            why,
        };
        // The version first: a newer file may not parse as this schema at all, and
        // should be refused as newer, not as corrupt.
        let value: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| corrupt(e.to_string()))?;
        let version = value
            .get("version")
            .and_then(serde_json::Value::as_u64)
            .ok_or_else(|| corrupt("no schema version".into()))?;
        let version = u32::try_from(version).map_err(|_| corrupt("bad schema version".into()))?;
        if version > STATE_VERSION {
            let by = value
                .get("written_by")
                .and_then(serde_json::Value::as_str)
                .map_or(String::new(), |w| format!(" (written by {w})"));
            return Err(StateError::Newer {
                path: path.to_path_buf(),
                version,
                by,
            });
        }
        if version == 0 {
            return Err(corrupt("schema version 0".into()));
        }
        let mut state: SavedState =
            serde_json::from_value(value).map_err(|e| corrupt(e.to_string()))?;
        let migrated_from = (version < STATE_VERSION).then_some(version);
        if version < 2 {
            for p in &mut state.ports {
                explicit_v1_port_options(&mut p.options);
            }
        }
        if version < 3 {
            // A miss went to NORMAL: now a rule says so, below every other.
            state.flows.insert(0, LEARNING_SWITCH_FLOW.into());
        }
        state.version = STATE_VERSION;
        Ok(Some((state, migrated_from)))
    }

    /// Writes the new state beside the old file and syncs it; nothing is replaced
    /// yet. A disk that is full or read-only fails here, before anything changed.
    pub fn prepare(&self, path: &Path) -> Result<PendingState, StateError> {
        let err = |source| StateError::Write {
            path: path.to_path_buf(),
            source,
        };
        let dir = path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        fs::create_dir_all(dir).map_err(err)?;
        let mut state = self.clone();
        state.version = STATE_VERSION;
        state.written_by = writer();
        state.generation = fresh_generation();
        let text = serde_json::to_string_pretty(&state).map_err(|e| err(io::Error::other(e)))?;
        let pending = PendingState {
            tmp: temporary(path),
            path: path.to_path_buf(),
            dir: dir.to_path_buf(),
            committed: false,
            generation: state.generation,
            bytes: text.len() as u64 + 1,
        };
        let written = (|| {
            let mut f = fs::File::create(&pending.tmp)?;
            f.write_all(text.as_bytes())?;
            f.write_all(b"\n")?;
            f.sync_all()
        })();
        // On failure `pending` goes, and the partial file with it.
        written.map_err(err)?;
        Ok(pending)
    }

    /// Writes the state so that a crash at any moment leaves the old or the new file,
    /// never a mix.
    pub fn save(&self, path: &Path) -> Result<(), StateError> {
        self.prepare(path)?.commit()
    }
}

/// A new state file written beside the old one, waiting for the change it describes
/// to be applied. Dropped without [`PendingState::commit`], it is removed.
#[derive(Debug)]
pub struct PendingState {
    tmp: PathBuf,
    path: PathBuf,
    dir: PathBuf,
    committed: bool,
    generation: u64,
    bytes: u64,
}

impl PendingState {
    /// Nothing to write (a switch whose configuration another keeps).
    pub fn unsaved() -> PendingState {
        PendingState {
            tmp: PathBuf::new(),
            path: PathBuf::new(),
            dir: PathBuf::new(),
            committed: true,
            generation: 0,
            bytes: 0,
        }
    }

    /// The new file's generation (its journal will name it).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The new file's size.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Puts the new file in place of the old (rename, then the directory synced).
    pub fn commit(mut self) -> Result<(), StateError> {
        if self.tmp.as_os_str().is_empty() {
            return Ok(());
        }
        let err = |source| StateError::Write {
            path: self.path.clone(),
            source,
        };
        fs::rename(&self.tmp, &self.path).map_err(err)?;
        self.committed = true;
        fs::File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(err)
    }
}

impl Drop for PendingState {
    fn drop(&mut self) {
        if !self.committed {
            let _ = fs::remove_file(&self.tmp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_path(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("vswd-state-test-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        dir.join("state.json")
    }

    #[test]
    fn round_trip() {
        let path = temp_path("rt");
        assert_eq!(SavedState::load(&path).unwrap(), None);
        let mut s = SavedState {
            version: STATE_VERSION,
            ..Default::default()
        };
        s.options.insert("pmd-cpu-mask".into(), "0x2".into());
        let mut options = Options::new();
        options.insert("type".into(), "tap".into());
        s.ports.push(SavedPort {
            name: "sw0".into(),
            no: 1,
            options,
        });
        s.flows.push("priority=1,actions=drop".into());
        s.save(&path).unwrap();
        let (back, migrated) = SavedState::load(&path).unwrap().unwrap();
        assert_eq!(migrated, None);
        assert_eq!(back.written_by, writer());
        assert_ne!(back.generation, 0, "a generation of its own");
        assert_eq!(
            SavedState {
                written_by: String::new(),
                generation: 0,
                ..back.clone()
            },
            s
        );
        // Every write, a new one.
        back.save(&path).unwrap();
        let (again, _) = SavedState::load(&path).unwrap().unwrap();
        assert_ne!(again.generation, back.generation);
        fs::remove_dir_all(path.parent().unwrap()).unwrap();
    }

    #[test]
    fn a_change_that_is_not_committed_leaves_the_old_file_and_no_other() {
        let path = temp_path("pending");
        let old = SavedState {
            version: STATE_VERSION,
            ..Default::default()
        };
        old.save(&path).unwrap();
        let before = fs::read(&path).unwrap();
        let mut new = old.clone();
        new.flows.push("actions=drop".into());
        drop(new.prepare(&path).unwrap());
        assert_eq!(fs::read(&path).unwrap(), before);
        let names: Vec<_> = fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("state.json")]);
        fs::remove_dir_all(path.parent().unwrap()).unwrap();
    }

    #[test]
    fn corrupt_file_is_refused_and_kept() {
        let path = temp_path("corrupt");
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, "{ not json").unwrap();
        let e = SavedState::load(&path).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains(&path.display().to_string()) && msg.contains("corrupt"),
            "{msg}"
        );
        assert_eq!(fs::read_to_string(&path).unwrap(), "{ not json");
        fs::remove_dir_all(path.parent().unwrap()).unwrap();
    }

    #[test]
    fn a_file_of_the_previous_schema_is_migrated() {
        // Written by vswd before schema 2 (tests/fixtures).
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/state-v1.json");
        let (s, migrated) = SavedState::load(&path).unwrap().unwrap();
        assert_eq!(migrated, Some(1));
        assert_eq!(s.version, STATE_VERSION);
        let opts = |name: &str| &s.ports.iter().find(|p| p.name == name).unwrap().options;
        assert_eq!(opts("fixa")["type"], "afpacket");
        assert_eq!(
            opts("fixa")["afpacket-mode"],
            "mmsg",
            "what was given stays"
        );
        assert_eq!(opts("fixa")["tx-flush-interval"], "20");
        assert_eq!(opts("gen")["type"], "ring");
        assert!(!opts("gen").contains_key("afpacket-mode"));
        assert_eq!(opts("vm1")["type"], "vhostuser");
        assert_eq!(s.flows.len(), 3, "the two rules and the learning switch");
        assert_eq!(s.flows[0], LEARNING_SWITCH_FLOW);
        assert_eq!(s.options["pmd-sleep-max"], "100");
    }

    #[test]
    fn a_file_of_a_newer_schema_is_refused_and_kept() {
        let path = temp_path("newer");
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        let text = r#"{"version": 5, "written_by": "vswd 9.0.0", "bridges": []}"#;
        fs::write(&path, text).unwrap();
        let e = SavedState::load(&path).unwrap_err().to_string();
        assert!(
            e.contains("schema version 5")
                && e.contains("vswd 9.0.0")
                && e.contains("newer than this vswd reads (4)"),
            "{e}"
        );
        assert_eq!(fs::read_to_string(&path).unwrap(), text);
        fs::remove_dir_all(path.parent().unwrap()).unwrap();
    }
}
