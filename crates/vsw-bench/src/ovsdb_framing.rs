//! What framing an initial OVSDB monitor reply costs (issue 29, item 13): a reply of
//! `rows` Interface rows, each with an options map of `keys` keys, arriving in
//! 64 KiB reads (the client's read size), framed by vsw-ovsdb's `Framer`, beside the
//! framing of the build before (e509f48), which parsed the whole pending buffer
//! again at every read. Each case is timed from the first read to the value out.

use std::time::Instant;

use serde_json::{json, Map, Value};
use vsw_ovsdb::jsonrpc::Framer;

/// The client's read size (`vsw-ovsdb` `client.rs`).
const READ: usize = 64 * 1024;

/// One case's figures.
#[derive(Debug, Clone)]
pub struct FramingRun {
    pub framer: &'static str,
    pub rows: usize,
    pub keys: usize,
    pub bytes: usize,
    pub seconds: f64,
}

/// The monitor reply ovsdb-server sends for `rows` Interface rows.
pub fn monitor_reply(rows: usize, keys: usize) -> Vec<u8> {
    let mut table = Map::new();
    for r in 0..rows {
        let options: Vec<Value> = (0..keys)
            .map(|k| json!([format!("key{k}"), format!("value-{r}-{k}")]))
            .collect();
        table.insert(
            format!("{:08x}-0000-4000-8000-{:012x}", r, r),
            json!({"initial": {
                "name": format!("vif{r}"),
                "type": "",
                "options": ["map", options],
                "external_ids": ["map", [["iface-id", format!("lsp{r}")]]],
                "ofport": r + 1,
            }}),
        );
    }
    let reply = json!({"id": 1, "result": {"Interface": table}, "error": null});
    serde_json::to_vec(&reply).expect("a JSON value serializes")
}

/// The build before's framer: the pending bytes parsed from their start at every
/// read until they hold a whole value.
#[derive(Default)]
struct ReparsingFramer {
    buf: Vec<u8>,
}

impl ReparsingFramer {
    fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    fn next_value(&mut self) -> anyhow::Result<Option<Value>> {
        let mut values = serde_json::Deserializer::from_slice(&self.buf).into_iter::<Value>();
        match values.next() {
            None => Ok(None),
            Some(Ok(v)) => {
                let used = values.byte_offset();
                self.buf.drain(..used);
                Ok(Some(v))
            }
            Some(Err(e)) if e.is_eof() => Ok(None),
            Some(Err(e)) => Err(e.into()),
        }
    }
}

/// Frames `stream` read by read with the framer named (`linear` or `reparsing`);
/// the seconds until the one value is out.
pub fn frame(framer: &str, stream: &[u8]) -> anyhow::Result<f64> {
    let started = Instant::now();
    let mut got = None;
    match framer {
        "linear" => {
            let mut f = Framer::default();
            for piece in stream.chunks(READ) {
                f.push(piece)?;
                if let Some(v) = f.next_value()? {
                    got = Some(v);
                }
            }
        }
        "reparsing" => {
            let mut f = ReparsingFramer::default();
            for piece in stream.chunks(READ) {
                f.push(piece);
                if let Some(v) = f.next_value()? {
                    got = Some(v);
                }
            }
        }
        other => anyhow::bail!("no framer {other}"),
    }
    let seconds = started.elapsed().as_secs_f64();
    let v = got.ok_or_else(|| anyhow::anyhow!("{framer}: the reply never came out whole"))?;
    std::hint::black_box(v);
    Ok(seconds)
}

/// The runs as a Markdown table, with each framer's time per megabyte.
pub fn report_markdown(runs: &[FramingRun]) -> String {
    let mut o = String::from(
        "| framer | rows | keys per map | reply bytes | seconds | ms per MB |\n|---|---|---|---|---|---|\n",
    );
    for r in runs {
        o.push_str(&format!(
            "| {} | {} | {} | {} | {:.3} | {:.1} |\n",
            r.framer,
            r.rows,
            r.keys,
            r.bytes,
            r.seconds,
            r.seconds * 1e3 / (r.bytes as f64 / 1e6)
        ));
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_framers_take_the_reply_whole() {
        let stream = monitor_reply(300, 10);
        assert!(stream.len() > READ, "more than one read");
        for framer in ["linear", "reparsing"] {
            frame(framer, &stream).unwrap();
        }
        assert!(frame("other", &stream).is_err());
    }
}
