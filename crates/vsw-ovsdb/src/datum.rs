//! OVSDB datums (RFC 7047 5.1) read into Rust values and written from them: an atom
//! is a string, number, boolean or `["uuid", …]`; a set is one atom or
//! `["set", [atoms]]` (so an optional value is an empty set or the atom itself); a map
//! is `["map", [[key, value], …]]`.

use std::collections::BTreeMap;

use serde_json::{json, Value};

/// The UUID of a `["uuid", "…"]` atom.
pub fn uuid(v: &Value) -> Option<&str> {
    match v.as_array().map(Vec::as_slice) {
        Some([Value::String(tag), Value::String(u)]) if tag == "uuid" => Some(u),
        _ => None,
    }
}

/// A set's atoms (a lone atom is a set of one).
pub fn set_items(v: &Value) -> Vec<&Value> {
    match v.as_array().map(Vec::as_slice) {
        Some([Value::String(tag), Value::Array(items)]) if tag == "set" => items.iter().collect(),
        _ => vec![v],
    }
}

/// The UUIDs a set of references holds.
pub fn uuids(v: &Value) -> Vec<String> {
    set_items(v)
        .into_iter()
        .filter_map(uuid)
        .map(str::to_string)
        .collect()
}

/// A string, or an optional string that is set.
pub fn string(v: &Value) -> Option<&str> {
    set_items(v).into_iter().find_map(Value::as_str)
}

/// An integer, or an optional integer that is set.
pub fn integer(v: &Value) -> Option<i64> {
    set_items(v).into_iter().find_map(Value::as_i64)
}

/// A map's pairs, each value as its string (numbers and booleans written out).
pub fn map(v: &Value) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    if let Some([Value::String(tag), Value::Array(pairs)]) = v.as_array().map(Vec::as_slice) {
        if tag == "map" {
            for p in pairs {
                if let Some([Value::String(k), val]) = p.as_array().map(Vec::as_slice) {
                    let val = match val {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    out.insert(k.clone(), val);
                }
            }
        }
    }
    out
}

/// A map's pairs as they are (keys and values of any atom type).
pub fn pairs(v: &Value) -> Vec<(&Value, &Value)> {
    match v.as_array().map(Vec::as_slice) {
        Some([Value::String(tag), Value::Array(pairs)]) if tag == "map" => pairs
            .iter()
            .filter_map(|p| match p.as_array().map(Vec::as_slice) {
                Some([k, v]) => Some((k, v)),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

pub fn make_uuid(u: &str) -> Value {
    json!(["uuid", u])
}

pub fn make_named_uuid(name: &str) -> Value {
    json!(["named-uuid", name])
}

pub fn make_set(items: Vec<Value>) -> Value {
    json!(["set", items])
}

/// A map of string keys to the given values.
pub fn make_map<V: Into<Value>>(pairs: impl IntoIterator<Item = (String, V)>) -> Value {
    let pairs: Vec<Value> = pairs
        .into_iter()
        .map(|(k, v)| json!([k, v.into()]))
        .collect();
    json!(["map", pairs])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datums_read_as_rfc_7047_writes_them() {
        assert_eq!(uuid(&json!(["uuid", "a-b"])), Some("a-b"));
        assert_eq!(uuid(&json!(["named-uuid", "x"])), None);
        let refs = json!(["set", [["uuid", "1"], ["uuid", "2"]]]);
        assert_eq!(uuids(&refs), vec!["1", "2"]);
        assert_eq!(uuids(&json!(["uuid", "3"])), vec!["3"]);
        assert!(uuids(&json!(["set", []])).is_empty());
        assert_eq!(integer(&json!(7)), Some(7));
        assert_eq!(integer(&json!(["set", []])), None);
        assert_eq!(integer(&json!(["set", [9]])), Some(9));
        assert_eq!(string(&json!("br0")), Some("br0"));
        let m = map(&json!(["map", [["a", "1"], ["b", 2], ["c", true]]]));
        assert_eq!(m.get("a").map(String::as_str), Some("1"));
        assert_eq!(m.get("b").map(String::as_str), Some("2"));
        assert_eq!(m.get("c").map(String::as_str), Some("true"));
        assert!(map(&json!("x")).is_empty());
        let back = map(&make_map(m.clone()));
        assert_eq!(back, m);
    }
}
