//! The state file under faults: a disk that is full or read-only refuses a change and
//! the reply, the switch and the file agree; a file of the previous schema is
//! migrated, one of a newer schema refused.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use vsw_e2e::{must, run, serial, unique, wait_until, Vswd, LEARNING_SWITCH_FLOW};

/// A small tmpfs mounted for the test; unmounted when dropped.
struct SmallDisk {
    dir: PathBuf,
}

impl SmallDisk {
    fn new(kib: u32) -> SmallDisk {
        let dir = std::env::temp_dir().join(unique("vsw-disk-"));
        std::fs::create_dir_all(&dir).unwrap();
        must(
            "mount",
            &[
                "-t",
                "tmpfs",
                "-o",
                &format!("size={kib}k"),
                "tmpfs",
                &dir.display().to_string(),
            ],
        );
        SmallDisk { dir }
    }

    /// Fills what is left with a file; returns its path.
    fn fill(&self) -> PathBuf {
        let filler = self.dir.join("filler");
        let _ = Command::new("dd")
            .args(["if=/dev/zero", &format!("of={}", filler.display()), "bs=4k"])
            .stderr(std::process::Stdio::null())
            .status();
        filler
    }

    fn remount(&self, how: &str) {
        must(
            "mount",
            &[
                "-o",
                &format!("remount,{how}"),
                &self.dir.display().to_string(),
            ],
        );
    }

    fn files(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(&self.dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = run("umount", &[&self.dir.display().to_string()]);
        let _ = std::fs::remove_dir(&self.dir);
    }
}

fn refused(d: &Vswd, args: &[&str], why: &str) {
    let out = d.ctl(args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains(why) && err.contains("nothing was changed"),
        "vswctl {args:?}: {err}"
    );
}

/// What `show`, `dump-flows` and the state file say, for comparing before and after.
fn everything(d: &Vswd) -> (String, String, Vec<u8>) {
    let mut show = d.show();
    show.ports
        .iter_mut()
        .for_each(|p| p.stats = Default::default());
    (
        format!("{show:?}"),
        d.flows()
            .iter()
            .map(|f| f.flow.clone())
            .collect::<Vec<_>>()
            .join("\n"),
        std::fs::read(&d.state).unwrap(),
    )
}

#[test]
fn a_change_whose_state_cannot_be_written_changes_nothing() {
    let _g = serial();
    let disk = SmallDisk::new(64);
    let mut d = Vswd::prepared();
    d.state = disk.dir.join("state.json");
    d.restart();
    d.ctl_ok(&["add-port", "gen", "type=ring", "ring-flows=1"]);
    d.ctl_ok(&["add-port", "sink", "type=ring"]);
    d.ctl_ok(&["add-flow", "priority=10,in_port=gen,actions=output:sink"]);
    d.ctl_ok(&[
        "add-flow",
        "priority=5,hard_timeout=4,in_port=sink,actions=drop",
    ]);
    // The state file written whole (its journal emptied), so that the next rule
    // change needs room the disk no longer has (a journal line that fits in space a
    // file already holds is saved, and then rightly made).
    d.ctl_ok(&["set", "tx-flush-interval=0"]);
    // The disk fills up.
    let filler = disk.fill();
    let before = everything(&d);
    let full = "No space left on device";
    refused(&d, &["add-flow", "priority=1,actions=drop"], full);
    refused(&d, &["del-flows"], full);
    refused(&d, &["add-port", "more", "type=ring"], full);
    refused(&d, &["del-port", "sink"], full);
    refused(&d, &["set-port", "gen", "ring-rate=1000"], full);
    refused(&d, &["set", "tx-flush-interval=100"], full);
    assert_eq!(everything(&d), before, "something changed");
    assert_eq!(
        disk.files(),
        vec!["filler", "state.json", "state.json.lock"]
    );
    // A timeout holds in the running switch whatever the disk says: the flow goes
    // (the file, which cannot be written, still has it).
    wait_until("the timed-out flow to go", Duration::from_secs(8), || {
        d.flows().len() == 1
    });
    assert_eq!(std::fs::read(&d.state).unwrap(), before.2);
    // Room again: the state file says what runs, and changes go through.
    std::fs::remove_file(&filler).unwrap();
    wait_until(
        "the state file written again",
        Duration::from_secs(5),
        || {
            !std::fs::read_to_string(&d.state)
                .unwrap()
                .contains("hard_timeout")
        },
    );
    d.ctl_ok(&["add-flow", "priority=1,actions=drop"]);
    assert_eq!(d.flows().len(), 2);
    // A read-only disk.
    let before = everything(&d);
    disk.remount("ro");
    refused(
        &d,
        &["add-flow", "priority=2,actions=drop"],
        "Read-only file system",
    );
    refused(&d, &["del-port", "gen"], "Read-only file system");
    assert_eq!(everything(&d), before);
    disk.remount("rw");
    d.ctl_ok(&["del-port", "gen"]);
    // What the file says is what runs.
    d.restart();
    assert_eq!(d.show().ports.len(), 1);
    assert_eq!(d.flows().len(), 2);
    d.stop();
}

/// The fixture: a state file written by vswd before schema 2, its port names made
/// unique for this run.
fn v1_state(tap: &str, veth: &str) -> String {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../vswd/tests/fixtures/state-v1.json"),
    )
    .unwrap();
    text.replace("\"tp0\"", &format!("\"{tap}\""))
        .replace("\"fixa\"", &format!("\"{veth}\""))
}

#[test]
fn a_state_file_of_the_previous_schema_is_migrated() {
    let _g = serial();
    let mut d = Vswd::prepared();
    let (tap, veth) = (unique("vtm"), unique("vtv"));
    let old = v1_state(&tap, &veth);
    std::fs::write(&d.state, &old).unwrap();
    d.restart();
    let show = d.show();
    let names: Vec<&str> = show.ports.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, vec![veth.as_str(), "gen", "vm1", tap.as_str()]);
    let opt = |port: &str, key: &str| {
        d.port(port)
            .options
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
    };
    assert_eq!(opt(&veth, "type").as_deref(), Some("afpacket"));
    assert_eq!(opt(&veth, "afpacket-mode").as_deref(), Some("mmsg"));
    assert_eq!(opt("gen", "type").as_deref(), Some("ring"));
    assert!(
        d.port(&veth).status.starts_with("down"),
        "no such interface"
    );
    assert_eq!(d.port("gen").status, "up");
    assert_eq!(d.port(&tap).status, "up");
    assert!(show
        .options
        .contains(&("tx-flush-interval".into(), "10".into())));
    let flows: Vec<String> = d.flows().into_iter().map(|f| f.flow).collect();
    assert_eq!(
        flows,
        vec![
            "priority=100,udp,in_port=1,tp_dst=53,actions=drop",
            "priority=10,in_port=2,actions=output:3"
        ]
    );
    // What a miss did then (NORMAL) is a rule now, below the others.
    let all: Vec<String> = d.all_flows().into_iter().map(|f| f.flow).collect();
    assert_eq!(all.last().map(String::as_str), Some(LEARNING_SWITCH_FLOW));
    // The first change writes the current schema; the old file is kept beside it.
    d.ctl_ok(&["add-flow", "priority=1,actions=drop"]);
    let new: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&d.state).unwrap()).unwrap();
    assert_eq!(new["version"], 4);
    assert!(new["written_by"].as_str().unwrap().starts_with("vswd "));
    let backup = d.dir.join("state.json.v1.bak");
    assert_eq!(std::fs::read_to_string(&backup).unwrap(), old);
    d.restart();
    assert_eq!(d.flows().len(), 3);
}

#[test]
fn a_state_file_of_a_newer_schema_is_refused_and_kept() {
    let _g = serial();
    let d = Vswd::prepared();
    let newer = r#"{"version": 5, "written_by": "vswd 9.9.9", "bridges": {}}"#;
    std::fs::write(&d.state, newer).unwrap();
    let out = d.command().output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("schema version 5") && err.contains("vswd 9.9.9"),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&d.state).unwrap(), newer);
    assert!(!d.socket.exists(), "nothing left listening");
}

/// A change the full disk refused leaves no fragment in the journal for later
/// changes to land behind: after room is made, the next change is journaled, and a
/// vswd killed then finds it at its next start.
#[test]
fn a_refused_journal_append_swallows_no_later_change() {
    let _g = serial();
    let disk = SmallDisk::new(64);
    let mut d = Vswd::prepared();
    d.state = disk.dir.join("state.json");
    d.restart();
    d.ctl_ok(&["add-port", "gen", "type=ring"]);
    d.ctl_ok(&["add-port", "sink", "type=ring"]);
    d.ctl_ok(&["set", "tx-flush-interval=0"]); // written whole
    d.ctl_ok(&["add-flow", "priority=10,udp,actions=drop"]); // the journal begins
    let filler = disk.fill();
    // A record longer than the room its page has left: part of it is written, and
    // then the disk says no.
    let outputs: Vec<&str> = (0..600)
        .map(|i| {
            if i % 2 == 0 {
                "output:gen"
            } else {
                "output:sink"
            }
        })
        .collect();
    let long = format!("priority=11,tcp,actions={}", outputs.join(","));
    assert!(long.len() > 4096);
    refused(&d, &["add-flow", &long], "No space left on device");
    std::fs::remove_file(&filler).unwrap();
    d.ctl_ok(&["add-flow", "priority=12,arp,actions=drop"]);
    let pid = d.pid().unwrap().to_string();
    must("kill", &["-KILL", &pid]);
    wait_until("vswd to die", Duration::from_secs(5), || !d.is_running());
    d.restart();
    let flows: Vec<String> = d.flows().iter().map(|f| f.flow.clone()).collect();
    assert!(
        flows.iter().any(|f| f.starts_with("priority=12,arp")),
        "the change after the refused one is lost: {flows:?}\n{}",
        d.log()
    );
    assert!(flows.iter().any(|f| f.starts_with("priority=10,udp")));
    assert!(
        !flows.iter().any(|f| f.starts_with("priority=11")),
        "the refused change is there"
    );
    d.stop();
}
