//! A replica of the monitored tables, kept by the table-updates of `monitor` (RFC
//! 7047 4.1.5–4.1.6): each row by its UUID, with the monitored columns.

use std::collections::BTreeMap;

use serde_json::Value;

/// A row's monitored columns.
pub type Row = serde_json::Map<String, Value>;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("a table-update that RFC 7047 does not describe: {0}")]
pub struct BadUpdate(pub String);

#[derive(Clone, Debug, Default)]
pub struct Replica {
    tables: BTreeMap<String, BTreeMap<String, Row>>,
}

impl Replica {
    /// Applies a `<table-updates>`: a row with `new` is inserted or replaced (a
    /// modify's `new` carries every monitored column), one without is deleted. A bad
    /// update changes nothing.
    pub fn apply(&mut self, updates: &Value) -> Result<(), BadUpdate> {
        let tables = updates
            .as_object()
            .ok_or_else(|| BadUpdate("not an object".into()))?;
        // Checked whole first, so that a bad one is not half applied.
        for (t, rows) in tables {
            let rows = rows
                .as_object()
                .ok_or_else(|| BadUpdate(format!("table {t} is not an object")))?;
            for (uuid, u) in rows {
                let u = u
                    .as_object()
                    .ok_or_else(|| BadUpdate(format!("row {uuid} is not an object")))?;
                if let Some(n) = u.get("new") {
                    if !n.is_object() {
                        return Err(BadUpdate(format!("row {uuid}'s new is not a row")));
                    }
                }
            }
        }
        for (t, rows) in tables {
            let table = self.tables.entry(t.clone()).or_default();
            for (uuid, u) in rows.as_object().into_iter().flatten() {
                match u.get("new").and_then(Value::as_object) {
                    Some(new) => {
                        table.insert(uuid.clone(), new.clone());
                    }
                    None => {
                        table.remove(uuid);
                    }
                }
            }
        }
        Ok(())
    }

    /// Forgets everything (a new connection's monitor starts from its initial rows).
    pub fn clear(&mut self) {
        self.tables.clear();
    }

    /// A table's rows by UUID.
    pub fn rows(&self, table: &str) -> impl Iterator<Item = (&str, &Row)> {
        self.tables
            .get(table)
            .into_iter()
            .flatten()
            .map(|(u, r)| (u.as_str(), r))
    }

    pub fn row(&self, table: &str, uuid: &str) -> Option<&Row> {
        self.tables.get(table)?.get(uuid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn inserts_modifies_and_deletes_follow_the_updates() {
        let mut r = Replica::default();
        r.apply(&json!({"Bridge": {"u1": {"new": {"name": "br0", "ports": ["set", []]}}}}))
            .unwrap();
        assert_eq!(r.row("Bridge", "u1").unwrap()["name"], json!("br0"));
        r.apply(&json!({"Bridge": {"u1": {"old": {"name": "br0"}, "new": {"name": "br1", "ports": ["set", []]}}}}))
            .unwrap();
        assert_eq!(r.row("Bridge", "u1").unwrap()["name"], json!("br1"));
        assert_eq!(r.rows("Bridge").count(), 1);
        r.apply(&json!({"Bridge": {"u1": {"old": {"name": "br1"}}}}))
            .unwrap();
        assert_eq!(r.rows("Bridge").count(), 0);
        // A bad update is refused whole.
        let bad = json!({"Bridge": {"u2": {"new": {"name": "ok"}}}, "Port": {"u3": {"new": 3}}});
        assert!(r.apply(&bad).is_err());
        assert_eq!(r.rows("Bridge").count(), 0);
        assert!(r.apply(&json!([1])).is_err());
    }
}
