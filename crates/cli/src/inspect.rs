//! `grist inspect`: what a file holds. TFRecord: which features the first
//! records hold, of which kinds, and how many values. Avro: the writer
//! schema, codec, metadata, blocks and records, and each top-level field's
//! type. FFRecord: each file's sample count, legacy flag and sizes, from
//! the headers. OFRecord: the parts and their record counts, and the
//! features the first records hold.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context as _, bail};
use grist_avro_tensor::DatumReader;
use grist_ffrecord::FfrReader;
use grist_tensor::json::bytes_to_json;
use grist_tfrecord::proto::{self, feature::Kind};
use grist_tfrecord::{Compression, ReaderOptions, RecordReader};
use prost::Message as _;
use serde_json::{Value, json};

use crate::fmt;
use crate::format::{Format, FormatArg};
use crate::out::Out;

/// Arguments of `grist inspect`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "For each feature key: its kind(s) (int64_list, float_list, bytes_list; \
                        `none` for a feature with no list set), in how many records it \
                        appears, and the fewest and most values it holds. With --sequence, \
                        context features and feature lists (steps per record, values per \
                        step) of tf.SequenceExamples.\n\n\
                        Avro files: the codec, the metadata, the number of blocks and records \
                        (every block and datum is read and checked), each top-level field's \
                        Avro type, and the writer schema.\n\n\
                        FFRecord files or folders: each file's sample count, whether its header \
                        is a legacy one (metadata checksum stored as 0, not checked), the sizes \
                        of its header, samples and file, and the smallest and largest sample \
                        (headers are read and checked; samples are not read: `grist verify` \
                        checks them).\n\n\
                        OFRecord part files or folders: each part's record count (from the \
                        length prefixes), and the features of the first records as for \
                        TFRecord (kinds bytes_list, float_list, double_list, int32_list, \
                        int64_list)."
)]
pub(crate) struct Args {
    /// How many records to look at (from the start of a TFRecord file or
    /// OFRecord dataset; Avro files are read whole).
    #[arg(long, value_name = "N", default_value_t = 1000)]
    records: u64,

    /// Decode the records as tf.SequenceExamples (TFRecord).
    #[arg(long)]
    sequence: bool,

    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,

    #[command(flatten)]
    format: FormatArg,

    /// A TFRecord file (compression from the extension), an Avro file
    /// (.avro), an FFRecord file (.ffr) or folder of them, or an OFRecord
    /// part file (part-<n>) or folder of parts.
    #[arg(value_name = "FILE")]
    file: PathBuf,
}

/// What was seen of one feature (or one feature list).
#[derive(Debug, Default)]
struct Stats {
    kinds: BTreeSet<&'static str>,
    records: u64,
    /// Fewest / most values (per record; per step for feature lists).
    values: Option<(usize, usize)>,
    /// Fewest / most steps per record (feature lists only).
    steps: Option<(usize, usize)>,
}

/// Widens a (min, max) range to include `n`.
fn widen(range: &mut Option<(usize, usize)>, n: usize) {
    *range = Some(match *range {
        Some((lo, hi)) => (lo.min(n), hi.max(n)),
        None => (n, n),
    });
}

/// The kind name and value count of a feature.
fn kind_of(feature: &proto::Feature) -> (&'static str, usize) {
    match &feature.kind {
        None => ("none", 0),
        Some(Kind::Int64List(l)) => ("int64_list", l.value.len()),
        Some(Kind::FloatList(l)) => ("float_list", l.value.len()),
        Some(Kind::BytesList(l)) => ("bytes_list", l.value.len()),
    }
}

/// Counts the features of one record.
fn add_features(stats: &mut BTreeMap<String, Stats>, features: &BTreeMap<String, proto::Feature>) {
    for (name, feature) in features {
        let s = stats.entry(name.clone()).or_default();
        let (kind, n) = kind_of(feature);
        s.kinds.insert(kind);
        s.records += 1;
        widen(&mut s.values, n);
    }
}

/// Counts the feature lists of one record.
fn add_lists(stats: &mut BTreeMap<String, Stats>, lists: &BTreeMap<String, proto::FeatureList>) {
    for (name, list) in lists {
        let s = stats.entry(name.clone()).or_default();
        s.records += 1;
        widen(&mut s.steps, list.feature.len());
        for step in &list.feature {
            let (kind, n) = kind_of(step);
            s.kinds.insert(kind);
            widen(&mut s.values, n);
        }
    }
}

/// Everything `inspect` learns about a file.
#[derive(Debug, Default)]
struct Summary {
    records: u64,
    /// Whether the whole file was seen.
    complete: bool,
    record_bytes: Option<(usize, usize)>,
    features: BTreeMap<String, Stats>,
    lists: BTreeMap<String, Stats>,
}

impl Summary {
    /// Which records were inspected, in words.
    fn scope(&self) -> &'static str {
        match self.complete {
            true => "all records",
            false => "the first records; there are more",
        }
    }
}

/// Looks at the first `limit` records of `file`.
fn summarize(file: &Path, limit: u64, sequence: bool) -> anyhow::Result<Summary> {
    let mut reader = RecordReader::open(file, ReaderOptions::default())?;
    let mut summary = Summary::default();
    while summary.records < limit {
        let Some(payload) = reader.next_record()? else {
            summary.complete = true;
            return Ok(summary);
        };
        let index = summary.records;
        widen(&mut summary.record_bytes, payload.len());
        let what = if sequence {
            "SequenceExample"
        } else {
            "Example"
        };
        let bad = || anyhow::anyhow!("{}: record {index}: not a valid tf.{what}", file.display());
        if sequence {
            let seq = proto::SequenceExample::decode(payload).map_err(|_| bad())?;
            if let Some(context) = &seq.context {
                add_features(&mut summary.features, &context.feature);
            }
            if let Some(lists) = &seq.feature_lists {
                add_lists(&mut summary.lists, &lists.feature_list);
            }
        } else {
            let example = proto::Example::decode(payload).map_err(|_| bad())?;
            if let Some(features) = &example.features {
                add_features(&mut summary.features, &features.feature);
            }
        }
        summary.records += 1;
    }
    // Look one record further to tell whether the file ends here; damage
    // past the inspected records is not this command's business.
    summary.complete = matches!(reader.next_record(), Ok(None));
    Ok(summary)
}

/// Adds a (min, max) range as two keys (0, 0 when nothing was seen).
fn range_json(
    range: Option<(usize, usize)>,
    lo: &str,
    hi: &str,
    out: &mut serde_json::Map<String, Value>,
) {
    let (a, b) = range.unwrap_or((0, 0));
    out.insert(lo.into(), json!(a));
    out.insert(hi.into(), json!(b));
}

/// The JSON list of feature (or feature list) statistics.
fn stats_json(stats: &BTreeMap<String, Stats>, lists: bool) -> Value {
    Value::Array(
        stats
            .iter()
            .map(|(name, s)| {
                let mut m = serde_json::Map::new();
                m.insert("name".into(), json!(name));
                m.insert("kinds".into(), json!(s.kinds));
                m.insert("records".into(), json!(s.records));
                if lists {
                    range_json(s.steps, "min_steps", "max_steps", &mut m);
                }
                range_json(s.values, "min_values", "max_values", &mut m);
                Value::Object(m)
            })
            .collect(),
    )
}

/// The table rows of feature (or, with `steps`, feature list)
/// statistics: name, kinds, `records/n`, `[steps,]` values.
fn feature_rows(stats: &BTreeMap<String, Stats>, n: u64, steps: bool) -> Vec<Vec<String>> {
    stats
        .iter()
        .map(|(name, s)| {
            let mut row = vec![
                name.clone(),
                s.kinds.iter().copied().collect::<Vec<_>>().join(","),
                format!("{}/{n}", s.records),
            ];
            if steps {
                row.push(range_text(s.steps));
            }
            row.push(range_text(s.values));
            row
        })
        .collect()
}

/// `lo..hi`, or one number when they are equal, or `-`.
fn range_text(range: Option<(usize, usize)>) -> String {
    match range {
        None => "-".into(),
        Some((lo, hi)) if lo == hi => lo.to_string(),
        Some((lo, hi)) => format!("{lo}..{hi}"),
    }
}

/// Writes a table with left-aligned text columns and right-aligned numbers.
fn table(out: &mut Out, header: &[&str], rows: &[Vec<String>]) -> std::io::Result<()> {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: &[String]| {
        let mut s = String::new();
        for (i, (cell, w)) in cells.iter().zip(&widths).enumerate() {
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
    out.line(line(
        &header.iter().map(|h| h.to_string()).collect::<Vec<_>>(),
    ))?;
    for row in rows {
        out.line(line(row))?;
    }
    Ok(())
}

/// Runs `grist inspect`.
pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    let (format, files) = args.format.of_all(std::slice::from_ref(&args.file))?;
    if args.sequence && format != Format::Tfrecord {
        bail!(
            "--sequence is for TFRecord files of tf.SequenceExamples, not {}",
            format.name()
        );
    }
    match format {
        Format::Tfrecord => inspect_tfrecord(&args),
        Format::Avro => inspect_avro(&args),
        Format::Ffrecord => inspect_ffrecord(&args, &files),
        Format::Ofrecord => inspect_ofrecord(&args, &files),
    }
}

/// `inspect` of FFRecord files: their headers, read and checked.
fn inspect_ffrecord(args: &Args, files: &[PathBuf]) -> anyhow::Result<ExitCode> {
    let reader = FfrReader::open_files(files, grist_ffrecord::ReaderOptions::default())?;
    let sizes = |offsets: &[u64]| -> Option<(usize, usize)> {
        let mut range = None;
        for w in offsets.windows(2) {
            widen(&mut range, (w[1] - w[0]) as usize);
        }
        range
    };
    let mut all = None;
    let rows: Vec<(&grist_ffrecord::FileInfo, Option<(usize, usize)>)> = reader
        .files()
        .iter()
        .map(|f| {
            let range = sizes(f.header().offsets());
            if let Some((lo, hi)) = range {
                widen(&mut all, lo);
                widen(&mut all, hi);
            }
            (f, range)
        })
        .collect();
    let legacy = reader.legacy_files().count();
    let mut out = Out::stdout();
    if args.json {
        let per_file: Vec<Value> = rows
            .iter()
            .map(|(f, range)| {
                let h = f.header();
                let mut m = serde_json::Map::new();
                m.insert("file".into(), json!(&**f.name()));
                m.insert("first_index".into(), json!(f.first_index()));
                m.insert("samples".into(), json!(f.count()));
                m.insert("legacy".into(), json!(h.is_legacy()));
                m.insert(
                    "stored_meta_checksum".into(),
                    json!(format!("{:#010x}", h.stored_crc())),
                );
                m.insert("header_bytes".into(), json!(h.header_len()));
                m.insert("data_bytes".into(), json!(h.data_len()));
                m.insert("file_bytes".into(), json!(h.file_size()));
                range_json(*range, "min_sample_bytes", "max_sample_bytes", &mut m);
                Value::Object(m)
            })
            .collect();
        let mut doc = serde_json::Map::new();
        doc.insert("file".into(), json!(args.file.display().to_string()));
        doc.insert("format".into(), json!("ffrecord"));
        doc.insert("samples".into(), json!(reader.len()));
        doc.insert("legacy".into(), json!(legacy > 0));
        doc.insert("data_bytes".into(), json!(reader.data_len()));
        range_json(all, "min_sample_bytes", "max_sample_bytes", &mut doc);
        doc.insert("files".into(), Value::Array(per_file));
        out.json(&Value::Object(doc))?;
        out.flush()?;
        return Ok(ExitCode::SUCCESS);
    }
    out.line(format_args!(
        "{}: FFRecord, {} samples in {} file{}, {} of samples of {} bytes; headers checked \
         (samples not read: `grist verify` checks them)",
        args.file.display(),
        fmt::count(reader.len()),
        fmt::count(rows.len() as u64),
        if rows.len() == 1 { "" } else { "s" },
        fmt::bytes(reader.data_len()),
        range_text(all)
    ))?;
    if legacy > 0 {
        out.line(format_args!(
            "{legacy} legacy file{} (metadata checksum stored as 0: written before the \
             original library checked headers; its header cannot be verified)",
            if legacy == 1 { "" } else { "s" }
        ))?;
    }
    out.line("")?;
    let table_rows: Vec<Vec<String>> = rows
        .iter()
        .map(|(f, range)| {
            let h = f.header();
            vec![
                f.name().to_string(),
                if h.is_legacy() { "legacy" } else { "" }.into(),
                fmt::count(f.count()),
                fmt::count(f.first_index()),
                fmt::count(h.header_len()),
                fmt::count(h.data_len()),
                range_text(*range),
            ]
        })
        .collect();
    table(
        &mut out,
        &[
            "file",
            "header",
            "samples",
            "first index",
            "header bytes",
            "sample bytes",
            "bytes per sample",
        ],
        &table_rows,
    )?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// `inspect` of OFRecord parts: record counts, and the features of the
/// first records.
fn inspect_ofrecord(args: &Args, files: &[PathBuf]) -> anyhow::Result<ExitCode> {
    let dataset = grist_ofrecord::Dataset::from_files(files.iter().cloned());
    let counts = dataset.record_counts()?;
    let total: u64 = counts.iter().sum();
    let mut summary = Summary::default();
    let mut reader = dataset.reader();
    while summary.records < args.records {
        let Some(r) = reader.next_record()? else {
            break;
        };
        let at =
            grist_ofrecord::Location::record(r.file.clone(), r.index_in_part).with_offset(r.offset);
        let record = grist_ofrecord::Record::parse_at(r.payload, &at)?;
        widen(&mut summary.record_bytes, r.payload.len());
        for (name, value) in &record.features {
            let s = summary
                .features
                .entry(String::from_utf8_lossy(name).into_owned())
                .or_default();
            s.kinds.insert(value.kind_name());
            s.records += 1;
            widen(&mut s.values, value.len());
        }
        summary.records += 1;
    }
    summary.complete = summary.records == total;
    let mut out = Out::stdout();
    if args.json {
        let parts: Vec<Value> = files
            .iter()
            .zip(&counts)
            .map(|(f, n)| json!({"file": f.display().to_string(), "records": n}))
            .collect();
        let (lo, hi) = summary.record_bytes.unwrap_or((0, 0));
        out.json(&json!({
            "file": args.file.display().to_string(),
            "format": "ofrecord",
            "parts": parts,
            "records": total,
            "inspected": summary.records,
            "complete": summary.complete,
            "min_record_bytes": lo,
            "max_record_bytes": hi,
            "features": stats_json(&summary.features, false),
        }))?;
        out.flush()?;
        return Ok(ExitCode::SUCCESS);
    }
    let scope = summary.scope();
    out.line(format_args!(
        "{}: OFRecord, {} records in {} part{}; features of {} records ({scope}), payloads of \
         {} bytes",
        args.file.display(),
        fmt::count(total),
        fmt::count(files.len() as u64),
        if files.len() == 1 { "" } else { "s" },
        fmt::count(summary.records),
        range_text(summary.record_bytes)
    ))?;
    out.line("")?;
    for (f, n) in files.iter().zip(&counts) {
        out.line(format_args!(
            "  {:>12} records  {}",
            fmt::count(*n),
            f.display()
        ))?;
    }
    out.line("")?;
    let rows = feature_rows(&summary.features, summary.records, false);
    table(&mut out, &["feature", "kind", "records", "values"], &rows)?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// `inspect` of a TFRecord file.
fn inspect_tfrecord(args: &Args) -> anyhow::Result<ExitCode> {
    let summary = summarize(&args.file, args.records, args.sequence)?;
    let compression = Compression::from_path(&args.file);
    let mut out = Out::stdout();
    if args.json {
        let mut doc = json!({
            "file": args.file.display().to_string(),
            "format": "tfrecord",
            "compression": compression.name(),
            "sequence": args.sequence,
            "records": summary.records,
            "complete": summary.complete,
        });
        let (lo, hi) = summary.record_bytes.unwrap_or((0, 0));
        doc["min_record_bytes"] = json!(lo);
        doc["max_record_bytes"] = json!(hi);
        if args.sequence {
            doc["context"] = stats_json(&summary.features, false);
            doc["feature_lists"] = stats_json(&summary.lists, true);
        } else {
            doc["features"] = stats_json(&summary.features, false);
        }
        out.json(&doc)?;
        out.flush()?;
        return Ok(ExitCode::SUCCESS);
    }
    let scope = summary.scope();
    out.line(format_args!(
        "{}: {} records inspected ({scope}), compression {}, payloads of {} bytes",
        args.file.display(),
        fmt::count(summary.records),
        compression.name(),
        range_text(summary.record_bytes)
    ))?;
    let n = summary.records;
    if args.sequence {
        out.line("")?;
        out.line("context")?;
        table(
            &mut out,
            &["feature", "kind", "records", "values"],
            &feature_rows(&summary.features, n, false),
        )?;
        out.line("")?;
        out.line("feature_lists")?;
        let rows = feature_rows(&summary.lists, n, true);
        table(
            &mut out,
            &["feature_list", "kind", "records", "steps", "values/step"],
            &rows,
        )?;
    } else {
        out.line("")?;
        table(
            &mut out,
            &["feature", "kind", "records", "values"],
            &feature_rows(&summary.features, n, false),
        )?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// The short text form of an Avro type (schema JSON): `long`,
/// `array<float>`, `map<long>`, `union[null, string]`, `record Name`,
/// `enum Color`, `fixed Id8(8)`, `long (timestamp-millis)`.
fn avro_type(t: &Value) -> String {
    match t {
        Value::String(name) => name.clone(),
        Value::Array(branches) => format!(
            "union[{}]",
            branches
                .iter()
                .map(avro_type)
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Value::Object(o) => {
            let name = o.get("name").and_then(Value::as_str).unwrap_or("?");
            let base = match o.get("type") {
                Some(Value::String(kind)) => match kind.as_str() {
                    "array" => format!("array<{}>", avro_type(&o["items"])),
                    "map" => format!("map<{}>", avro_type(&o["values"])),
                    "record" | "error" | "enum" => format!("{kind} {name}"),
                    "fixed" => format!("fixed {name}({})", o["size"]),
                    other => other.to_string(),
                },
                Some(inner) => avro_type(inner),
                None => "?".into(),
            };
            match o.get("logicalType").and_then(Value::as_str) {
                Some(logical) => format!("{base} ({logical})"),
                None => base,
            }
        }
        other => other.to_string(),
    }
}

/// `inspect` of an Avro object container file: every block and datum is
/// read (and checked).
fn inspect_avro(args: &Args) -> anyhow::Result<ExitCode> {
    if args.sequence {
        bail!("--sequence is for TFRecord files of tf.SequenceExamples, not Avro");
    }
    let mut reader = DatumReader::open(&args.file, grist_avro_tensor::ReaderOptions::default())?;
    let mut records = 0u64;
    while reader.next_datum()?.is_some() {
        records += 1;
    }
    let header = reader.header().clone();
    let blocks = reader.blocks_read();
    let schema: Value = serde_json::from_str(&header.schema_json)
        .with_context(|| format!("{}: avro.schema", args.file.display()))?;
    let no_fields = Vec::new();
    let fields = schema
        .get("fields")
        .and_then(Value::as_array)
        .unwrap_or(&no_fields);
    let field_rows: Vec<(String, &Value)> = fields
        .iter()
        .map(|f| {
            let name = f.get("name").and_then(Value::as_str).unwrap_or("?");
            (name.to_string(), f.get("type").unwrap_or(&Value::Null))
        })
        .collect();
    let mut out = Out::stdout();
    if args.json {
        let metadata: serde_json::Map<String, Value> = header
            .metadata
            .iter()
            .map(|(k, v)| (k.clone(), bytes_to_json(v)))
            .collect();
        let fields: Vec<Value> = field_rows
            .iter()
            .map(|(name, t)| json!({"name": name, "type": t, "avro_type": avro_type(t)}))
            .collect();
        out.json(&json!({
            "file": args.file.display().to_string(),
            "format": "avro",
            "codec": header.codec.name(),
            "metadata": metadata,
            "blocks": blocks,
            "records": records,
            "schema": schema,
            "fields": fields,
        }))?;
        out.flush()?;
        return Ok(ExitCode::SUCCESS);
    }
    out.line(format_args!(
        "{}: Avro, codec {}, {} records in {} block{}",
        args.file.display(),
        header.codec,
        fmt::count(records),
        fmt::count(blocks),
        if blocks == 1 { "" } else { "s" }
    ))?;
    if header.metadata.is_empty() {
        out.line("metadata: none besides avro.schema and avro.codec")?;
    } else {
        out.line("metadata:")?;
        for (k, v) in &header.metadata {
            let shown = match std::str::from_utf8(v) {
                Ok(text) if text.len() <= 80 => format!("{text:?}"),
                _ => format!("({} bytes)", v.len()),
            };
            out.line(format_args!("  {k} = {shown}"))?;
        }
    }
    out.line("")?;
    if field_rows.is_empty() {
        out.line(format_args!("records of type {}", avro_type(&schema)))?;
    } else {
        let rows: Vec<Vec<String>> = field_rows
            .iter()
            .map(|(name, t)| vec![name.clone(), avro_type(t)])
            .collect();
        table(&mut out, &["field", "type"], &rows)?;
    }
    out.line("")?;
    out.line(format_args!("schema: {}", header.schema_json))?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn avro_type_names() {
        let cases = [
            (json!("long"), "long"),
            (json!({"type": "array", "items": "float"}), "array<float>"),
            (
                json!({"type": "array", "items": {"type": "array", "items": "int"}}),
                "array<array<int>>",
            ),
            (json!({"type": "map", "values": "long"}), "map<long>"),
            (json!(["null", "string"]), "union[null, string]"),
            (
                json!({"type": "record", "name": "Name", "fields": []}),
                "record Name",
            ),
            (
                json!({"type": "enum", "name": "C", "symbols": ["A"]}),
                "enum C",
            ),
            (
                json!({"type": "fixed", "name": "Id8", "size": 8}),
                "fixed Id8(8)",
            ),
            (
                json!({"type": "long", "logicalType": "timestamp-millis"}),
                "long (timestamp-millis)",
            ),
            (
                json!({"type": {"type": "map", "values": "int"}}),
                "map<int>",
            ),
        ];
        for (t, want) in cases {
            assert_eq!(avro_type(&t), want, "{t}");
        }
    }
}
