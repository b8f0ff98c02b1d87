//! ARCHITECTURE.md's crate table says what each workspace crate depends on: it is
//! held to `cargo metadata` here, so the map cannot drift from the code.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// Each workspace member and the workspace crates it depends on (not dev- or
/// build-dependencies), from `cargo metadata`, in the members' order.
fn from_cargo(root: &Path) -> Vec<(String, Vec<String>)> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "metadata",
            "--no-deps",
            "--format-version",
            "1",
            "--offline",
        ])
        .current_dir(root)
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let packages = meta["packages"].as_array().unwrap();
    let names: Vec<String> = packages
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_string())
        .collect();
    let by_id: BTreeMap<&str, &serde_json::Value> = packages
        .iter()
        .map(|p| (p["id"].as_str().unwrap(), p))
        .collect();
    meta["workspace_members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|id| {
            let p = by_id[id.as_str().unwrap()];
            let mut deps: Vec<String> = p["dependencies"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|d| d["kind"].is_null())
                .map(|d| d["name"].as_str().unwrap().to_string())
                .filter(|n| names.contains(n))
                .collect();
            deps.sort();
            deps.dedup();
            (p["name"].as_str().unwrap().to_string(), deps)
        })
        .collect()
}

/// The rows of the table whose header is `| crate | its one job | depends on … |`.
fn from_map(text: &str) -> Vec<(String, Vec<String>)> {
    let mut rows = Vec::new();
    let mut in_table = false;
    for line in text.lines() {
        if line.starts_with("| crate | its one job |") {
            in_table = true;
            continue;
        }
        if !in_table || line.starts_with("|---") {
            continue;
        }
        if !line.starts_with('|') {
            break;
        }
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        assert_eq!(cells.len(), 3, "a row of three cells: {line}");
        let name = cells[0].trim_matches('`').to_string();
        let mut deps: Vec<String> = match cells[2] {
            "—" | "" => Vec::new(),
            d => d
                .split(", ")
                .map(|s| s.trim_matches('`').to_string())
                .collect(),
        };
        deps.sort();
        rows.push((name, deps));
    }
    rows
}

#[test]
fn the_crate_table_is_what_cargo_says() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let map = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let mut want = from_cargo(&root);
    let mut have = from_map(&map);
    assert!(!have.is_empty(), "ARCHITECTURE.md has no crate table");
    want.sort();
    have.sort();
    assert_eq!(
        have, want,
        "ARCHITECTURE.md's crate table against cargo metadata"
    );
}
