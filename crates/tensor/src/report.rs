//! Pieces of the reports tools print ([`Format::inspect`] and
//! [`Format::verify`](crate::Format::verify)): human-readable counts and
//! byte sizes, `(min, max)` ranges, per-feature statistics and text
//! tables.
//!
//! They live here once so that every format's report reads the same:
//! a format crate gathers what it knows into [`Features`] and
//! [`MinMax`]es, and turns them into the JSON and text of a
//! [`Report`](crate::Report).
//!
//! ```
//! use grist_tensor::report::{Features, MinMax, count, table};
//!
//! let mut features = Features::new();
//! features.add("label", "int64_list", 1);
//! features.add("tokens", "int64_list", 7);
//! features.add("tokens", "int64_list", 3);
//! let mut sizes = MinMax::new();
//! sizes.add(120);
//! assert_eq!(sizes.text(), "120");
//! assert_eq!(count(1234567), "1,234,567");
//! let lines = table(&["feature", "kind", "records", "values"], &features.rows(2, false));
//! assert_eq!(lines[2], "tokens   int64_list      2/2    3..7");
//! ```
//!
//! [`Format::inspect`]: crate::Format::inspect

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value, json};

/// An integer with thousands separators: `1,234,567`.
pub fn count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A byte size in decimal units: `512 B`, `41.2 kB`, `3.1 MB`, `1.20 GB`.
pub fn bytes(n: u64) -> String {
    let n = n as f64;
    if n < 1e3 {
        format!("{n} B")
    } else if n < 1e6 {
        format!("{:.1} kB", n / 1e3)
    } else if n < 1e9 {
        format!("{:.1} MB", n / 1e6)
    } else {
        format!("{:.2} GB", n / 1e9)
    }
}

/// `"s"` unless `n` is 1: `format!("{n} block{}", plural(n))`.
pub fn plural(n: u64) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// The smallest and largest of some sizes or counts (none seen yet, at
/// first).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct MinMax(Option<(usize, usize)>);

impl MinMax {
    /// Nothing seen.
    pub fn new() -> Self {
        Self::default()
    }

    /// Widens the range to hold `n`.
    pub fn add(&mut self, n: usize) {
        self.0 = Some(match self.0 {
            Some((lo, hi)) => (lo.min(n), hi.max(n)),
            None => (n, n),
        });
    }

    /// Widens the range to hold `other`'s.
    pub fn merge(&mut self, other: MinMax) {
        if let Some((lo, hi)) = other.0 {
            self.add(lo);
            self.add(hi);
        }
    }

    /// The smallest and largest, if anything was seen.
    pub fn get(&self) -> Option<(usize, usize)> {
        self.0
    }

    /// The smallest and largest, `(0, 0)` when nothing was seen.
    pub fn or_zero(&self) -> (usize, usize) {
        self.0.unwrap_or((0, 0))
    }

    /// `lo..hi`, one number when they are equal, or `-` when nothing was
    /// seen.
    pub fn text(&self) -> String {
        match self.0 {
            None => "-".into(),
            Some((lo, hi)) if lo == hi => lo.to_string(),
            Some((lo, hi)) => format!("{lo}..{hi}"),
        }
    }

    /// Adds the range to `out` as two keys (`0` and `0` when nothing was
    /// seen).
    pub fn insert_json(&self, lo: &str, hi: &str, out: &mut Map<String, Value>) {
        let (a, b) = self.or_zero();
        out.insert(lo.into(), json!(a));
        out.insert(hi.into(), json!(b));
    }
}

/// What was seen of one feature (or feature list) in the records looked
/// at.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct FeatureStats {
    /// The kinds of value it held (`int64_list`, `bytes_list`, ...;
    /// `none` for a feature with no value set).
    pub kinds: BTreeSet<&'static str>,
    /// In how many records it appeared.
    pub records: u64,
    /// The fewest and most values it held (per record; per step for
    /// feature lists).
    pub values: MinMax,
    /// The fewest and most steps per record (feature lists only).
    pub steps: MinMax,
}

/// Statistics of the features (or feature lists) of some records, by
/// name, in name order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Features {
    stats: BTreeMap<String, FeatureStats>,
}

impl Features {
    /// No feature seen.
    pub fn new() -> Self {
        Self::default()
    }

    /// One record's feature `name`, holding `values` values of `kind`.
    pub fn add(&mut self, name: &str, kind: &'static str, values: usize) {
        let s = self.entry(name);
        s.kinds.insert(kind);
        s.records += 1;
        s.values.add(values);
    }

    /// One record's feature list `name`: its steps, each of a kind and a
    /// number of values.
    pub fn add_list(&mut self, name: &str, steps: impl IntoIterator<Item = (&'static str, usize)>) {
        let s = self.entry(name);
        s.records += 1;
        let mut n = 0;
        for (kind, values) in steps {
            s.kinds.insert(kind);
            s.values.add(values);
            n += 1;
        }
        s.steps.add(n);
    }

    fn entry(&mut self, name: &str) -> &mut FeatureStats {
        if !self.stats.contains_key(name) {
            self.stats.insert(name.to_string(), FeatureStats::default());
        }
        self.stats.get_mut(name).expect("inserted above")
    }

    /// The statistics by name.
    pub fn stats(&self) -> &BTreeMap<String, FeatureStats> {
        &self.stats
    }

    /// The machine form: one object per name, `{"name", "kinds",
    /// "records", ["min_steps", "max_steps",] "min_values",
    /// "max_values"}` (`lists`: with the steps).
    pub fn to_json(&self, lists: bool) -> Value {
        Value::Array(
            self.stats
                .iter()
                .map(|(name, s)| {
                    let mut m = Map::new();
                    m.insert("name".into(), json!(name));
                    m.insert("kinds".into(), json!(s.kinds));
                    m.insert("records".into(), json!(s.records));
                    if lists {
                        s.steps.insert_json("min_steps", "max_steps", &mut m);
                    }
                    s.values.insert_json("min_values", "max_values", &mut m);
                    Value::Object(m)
                })
                .collect(),
        )
    }

    /// The rows of a [`table`]: name, kinds, `records/n` (`n`: the records
    /// looked at), `[steps,]` values (`lists`: with the steps).
    pub fn rows(&self, n: u64, lists: bool) -> Vec<Vec<String>> {
        self.stats
            .iter()
            .map(|(name, s)| {
                let mut row = vec![
                    name.clone(),
                    s.kinds.iter().copied().collect::<Vec<_>>().join(","),
                    format!("{}/{n}", s.records),
                ];
                if lists {
                    row.push(s.steps.text());
                }
                row.push(s.values.text());
                row
            })
            .collect()
    }
}

/// A text table, one line per row after the header: the first two
/// columns (names) left-aligned, the others (numbers) right-aligned,
/// columns two spaces apart, no trailing spaces.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> Vec<String> {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: &mut dyn Iterator<Item = &str>| {
        let mut s = String::new();
        for (i, (cell, w)) in cells.zip(&widths).enumerate() {
            if i > 0 {
                s.push_str("  ");
            }
            if i < 2 {
                s.push_str(&format!("{cell:<w$}"));
            } else {
                s.push_str(&format!("{cell:>w$}"));
            }
        }
        s.trim_end().to_string()
    };
    let mut lines = Vec::with_capacity(rows.len() + 1);
    lines.push(line(&mut header.iter().copied()));
    for row in rows {
        lines.push(line(&mut row.iter().map(String::as_str)));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_for_people() {
        assert_eq!(count(0), "0");
        assert_eq!(count(999), "999");
        assert_eq!(count(1000), "1,000");
        assert_eq!(count(1234567), "1,234,567");
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(41_200), "41.2 kB");
        assert_eq!(bytes(1_200_000_000), "1.20 GB");
        assert_eq!((plural(1), plural(0), plural(2)), ("", "s", "s"));
    }

    #[test]
    fn ranges() {
        let mut r = MinMax::new();
        assert_eq!((r.text(), r.or_zero()), ("-".to_string(), (0, 0)));
        r.add(5);
        assert_eq!(r.text(), "5");
        r.add(2);
        let mut other = MinMax::new();
        other.add(9);
        r.merge(other);
        r.merge(MinMax::new());
        assert_eq!((r.text(), r.get()), ("2..9".to_string(), Some((2, 9))));
        let mut m = Map::new();
        r.insert_json("lo", "hi", &mut m);
        assert_eq!(Value::Object(m), json!({"lo": 2, "hi": 9}));
    }

    #[test]
    fn feature_lists_count_steps_and_values_per_step() {
        let mut f = Features::new();
        f.add_list("frames", [("float_list", 3), ("float_list", 4)]);
        f.add_list("frames", []);
        f.add_list("empty", []);
        let doc = f.to_json(true);
        assert_eq!(
            doc[1],
            json!({"name": "frames", "kinds": ["float_list"], "records": 2,
                   "min_steps": 0, "max_steps": 2, "min_values": 3, "max_values": 4})
        );
        assert_eq!(doc[0]["kinds"], json!([]));
        assert_eq!(doc[0]["min_values"], 0);
        assert_eq!(
            f.rows(2, true)[1],
            ["frames", "float_list", "2/2", "0..2", "3..4"]
        );
    }

    #[test]
    fn tables_align_names_left_and_numbers_right() {
        let rows = vec![
            vec!["a".to_string(), "".to_string(), "1,000".to_string()],
            vec!["long name".to_string(), "x".to_string(), "7".to_string()],
        ];
        assert_eq!(
            table(&["file", "kind", "n"], &rows),
            [
                "file       kind      n",
                "a                1,000",
                "long name  x         7"
            ]
        );
    }
}
