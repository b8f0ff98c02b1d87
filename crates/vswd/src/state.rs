//! The persisted configuration: options, ports and flows, written atomically on every
//! change and read back at start.

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
    #[serde(default)]
    pub options: Options,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SavedState {
    pub version: u32,
    #[serde(default)]
    pub options: Options,
    #[serde(default)]
    pub ports: Vec<SavedPort>,
    /// Canonical flow texts, ports by number.
    #[serde(default)]
    pub flows: Vec<String>,
}

pub const STATE_VERSION: u32 = 1;

#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("cannot read state file {path}: {source}")]
    Read { path: PathBuf, source: io::Error },
    #[error(
        "state file {path} is corrupt: {why}; vswd will not start over it (repair or remove it)"
    )]
    Corrupt { path: PathBuf, why: String },
    #[error("cannot write state file {path}: {source}")]
    Write { path: PathBuf, source: io::Error },
}

impl SavedState {
    /// Reads the state file; `Ok(None)` when there is none yet.
    pub fn load(path: &Path) -> Result<Option<SavedState>, StateError> {
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
        let state: SavedState = serde_json::from_str(&text).map_err(|e| corrupt(e.to_string()))?;
        if state.version != STATE_VERSION {
            return Err(corrupt(format!(
                "version {} is not {}",
                state.version, STATE_VERSION
            )));
        }
        Ok(Some(state))
    }

    /// Writes the state so that a crash at any moment leaves the old or the new file,
    /// never a mix: a temporary file, synced, renamed over the old one.
    pub fn save(&self, path: &Path) -> Result<(), StateError> {
        let err = |source| StateError::Write {
            path: path.to_path_buf(),
            source,
        };
        let dir = path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        fs::create_dir_all(dir).map_err(err)?;
        let tmp = path.with_extension("tmp");
        let text = serde_json::to_string_pretty(self).map_err(|e| err(io::Error::other(e)))?;
        let mut f = fs::File::create(&tmp).map_err(err)?;
        f.write_all(text.as_bytes()).map_err(err)?;
        f.write_all(b"\n").map_err(err)?;
        f.sync_all().map_err(err)?;
        fs::rename(&tmp, path).map_err(err)?;
        fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(err)?;
        Ok(())
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
        s.ports.push(SavedPort {
            name: "sw0".into(),
            no: 1,
            options: Options::new(),
        });
        s.flows.push("priority=1,actions=drop".into());
        s.save(&path).unwrap();
        assert_eq!(SavedState::load(&path).unwrap(), Some(s));
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
        fs::write(&path, r#"{"version": 99}"#).unwrap();
        assert!(SavedState::load(&path)
            .unwrap_err()
            .to_string()
            .contains("version 99"));
        fs::remove_dir_all(path.parent().unwrap()).unwrap();
    }
}
