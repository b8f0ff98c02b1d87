//! Rule sets for tests and benchmarks that must not depend on each other.

/// Rule `i` of a large, changing rule set: ten kinds of mask (by `i % 10`), priorities
/// 1..=1000, and a UDP destination port from 10,000 up, which no sample flow uses.
pub fn churn_rule(i: u32, actions: &str) -> String {
    let extra = match i % 10 {
        0 => String::new(),
        1 => format!(",tp_src={}", i % 65_000),
        2 => format!(",nw_src=198.18.{}.0/24", i % 250),
        3 => format!(",nw_dst=198.19.{}.{}", (i / 250) % 250, i % 250),
        4 => ",in_port=3".into(),
        5 => format!(
            ",dl_src=02:00:00:00:{:02x}:{:02x}",
            (i >> 8) & 0xff,
            i & 0xff
        ),
        6 => format!(",nw_tos={}", (i % 63) * 4),
        7 => format!(",nw_ttl={}", i % 255),
        8 => format!(",tp_src={}/0xff00", (i % 255) << 8),
        _ => format!(",nw_src=198.18.0.0/{}", 16 + i % 16),
    };
    format!(
        "priority={},udp,tp_dst={}{extra},actions={actions}",
        1 + i % 1000,
        10_000 + i % 50_000
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{parse_flow, Classifier};

    #[test]
    fn a_thousand_rules_parse_into_at_least_ten_masks() {
        let mut c = Classifier::new();
        for i in 0..1000 {
            c.insert(
                parse_flow(&churn_rule(i, "drop"), &|_: &str| None).unwrap(),
                0,
            );
        }
        assert_eq!(c.len(), 1000);
        assert!(c.subtables() >= 10, "{} masks", c.subtables());
    }
}
