//! What tools say of OFRecord parts, behind
//! [`OfRecordFormat`](crate::OfRecordFormat)'s `verify` (the framing of a
//! part, and every record as an OFRecord protobuf: the format has no
//! checksum) and `inspect` (the parts' record counts and the features of
//! the first records).

use std::io::Read;

use grist_tensor::report::{Features, MinMax, bytes, count, plural, table};
use grist_tensor::{Input, InspectOptions, Report, Verified, VerifyFailure};
use serde_json::json;

use crate::error::Result;
use crate::format::scan;
use crate::framing::{ReaderOptions, RecordReader};
use crate::record::Record as OfRecord;
use grist_tensor::Location;

/// `input` opened for reading records (its size known, so that a length
/// running past its end is truncation).
fn open(input: &Input, framing: &ReaderOptions) -> Result<RecordReader<Box<dyn Read + Send>>> {
    let size = input.size()?;
    let raw = input.reader_at(0)?;
    Ok(RecordReader::resume(
        raw,
        input.name().clone(),
        *framing,
        0,
        0,
        size,
    ))
}

/// Reads every record of the part `input` and parses each one. Details:
/// the bytes framed.
pub(crate) fn verify(framing: &ReaderOptions, input: &Input) -> Result<Verified, VerifyFailure> {
    let mut reader = open(input, framing).map_err(|e| VerifyFailure::new(None, e))?;
    let mut records = 0u64;
    loop {
        let (index, offset) = (reader.record_index(), reader.offset());
        let at = || {
            let place = grist_tensor::Location::record(input.name().clone(), index);
            Some(place.with_offset(offset))
        };
        match reader.next_record() {
            Ok(Some(r)) => {
                let location =
                    Location::record(input.name().clone(), r.index).with_offset(r.offset);
                OfRecord::parse_at(r.payload, &location)
                    .map_err(|e| VerifyFailure::new(at(), e))?;
                records += 1;
            }
            Ok(None) => break,
            Err(e) => return Err(VerifyFailure::new(at(), e)),
        }
    }
    Ok(Verified::new(
        records,
        format!("{} framed, every record parses", bytes(reader.offset())),
    ))
}

/// The record count of each part of `inputs` (from the length prefixes)
/// and the features of the first `options.records` records (`name`: the
/// path as given).
pub(crate) fn inspect(
    framing: &ReaderOptions,
    name: &str,
    inputs: &[Input],
    options: &InspectOptions,
) -> Result<Report> {
    let framing = framing.with_limits(options.read.limits);
    let counts = inputs
        .iter()
        .map(|input| Ok(scan(input, &framing)?.len() as u64))
        .collect::<Result<Vec<u64>>>()?;
    let total: u64 = counts.iter().sum();
    let mut features = Features::new();
    let mut sizes = MinMax::new();
    let mut n = 0u64;
    for input in inputs {
        if n == options.records {
            break;
        }
        let mut reader = open(input, &framing)?;
        while n < options.records {
            let Some(r) = reader.next_record()? else {
                break;
            };
            let at = Location::record(input.name().clone(), r.index).with_offset(r.offset);
            let record = OfRecord::parse_at(r.payload, &at)?;
            sizes.add(r.payload.len());
            for (key, value) in &record.features {
                features.add(
                    &String::from_utf8_lossy(key),
                    value.kind_name(),
                    value.len(),
                );
            }
            n += 1;
        }
    }
    let complete = n == total;
    let (lo, hi) = sizes.or_zero();
    let parts: Vec<_> = inputs
        .iter()
        .zip(&counts)
        .map(|(f, n)| json!({"file": &**f.name(), "records": n}))
        .collect();
    let json = json!({
        "file": name,
        "format": "ofrecord",
        "parts": parts,
        "records": total,
        "inspected": n,
        "complete": complete,
        "min_record_bytes": lo,
        "max_record_bytes": hi,
        "features": features.to_json(false),
    });
    let scope = if complete {
        "all records"
    } else {
        "the first records; there are more"
    };
    let mut text = vec![
        format!(
            "{name}: OFRecord, {} records in {} part{}; features of {} records ({scope}), \
             payloads of {} bytes",
            count(total),
            count(inputs.len() as u64),
            plural(inputs.len() as u64),
            count(n),
            sizes.text()
        ),
        String::new(),
    ];
    for (f, records) in inputs.iter().zip(&counts) {
        text.push(format!("  {:>12} records  {}", count(*records), f.name()));
    }
    text.push(String::new());
    text.extend(table(
        &["feature", "kind", "records", "values"],
        &features.rows(n, false),
    ));
    Ok(Report::new(json, text))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use grist_tensor::{Format as _, ReadOptions};

    use super::*;
    use crate::encode::RecordBuilder;
    use crate::format::OfRecordFormat;
    use crate::writer::RecordWriter;

    /// Writes a part of `payloads` at `path`.
    fn part(path: &Path, payloads: &[Vec<u8>]) -> Input {
        let mut w = RecordWriter::new(std::fs::File::create(path).unwrap());
        for p in payloads {
            w.write_record(p).unwrap();
        }
        Input::local(path)
    }

    fn record(i: i64) -> Vec<u8> {
        RecordBuilder::new().with_int64s("i", [i]).encode()
    }

    #[test]
    fn counting_reads_lengths_verifying_parses_records() {
        let dir = tempfile::tempdir().unwrap();
        let bad = vec![0xff, 0xff, 0xff];
        let input = part(&dir.path().join("part-0"), &[record(0), bad, record(2)]);
        let f = OfRecordFormat::default();
        assert_eq!(f.count(&input, &ReadOptions::new()).unwrap(), 3);
        let failure = f.verify(&input).unwrap_err();
        let at = failure.position.unwrap();
        let second = 8 + record(0).len() as u64;
        assert_eq!((at.record, at.offset), (Some(1), Some(second)));
        assert!(
            failure
                .error
                .to_string()
                .contains("could not parse OFRecord")
        );
        // A cut length prefix fails counting too.
        let cut = part(&dir.path().join("part-1"), &[record(0)]);
        std::fs::OpenOptions::new()
            .append(true)
            .open(cut.path().unwrap())
            .and_then(|mut f| std::io::Write::write_all(&mut f, &[1, 0, 0]))
            .unwrap();
        assert!(f.count(&cut, &ReadOptions::new()).is_err());
        let failure = f.verify(&cut).unwrap_err();
        assert_eq!(failure.position.unwrap().record, Some(1));
    }

    #[test]
    fn inspect_counts_every_part_and_looks_at_the_first_records() {
        let dir = tempfile::tempdir().unwrap();
        let a = part(&dir.path().join("part-0"), &[record(0), record(1)]);
        let b = part(&dir.path().join("part-1"), &[record(2)]);
        let inputs = [a, b];
        let f = OfRecordFormat::default();
        let first = InspectOptions::default().with_records(1);
        let report = f.inspect("ds", &inputs, &first).unwrap();
        assert_eq!(report.json["records"], 3);
        assert_eq!(report.json["inspected"], 1);
        assert_eq!(report.json["complete"], false);
        assert_eq!(report.json["parts"][1]["records"], 1);
        assert!(report.text[0].starts_with("ds: OFRecord, 3 records in 2 parts"));
        let all = f
            .inspect("ds", &inputs, &InspectOptions::default())
            .unwrap();
        assert_eq!(all.json["features"][0]["records"], 3);
        assert_eq!(all.json["complete"], true);
        let sequence = InspectOptions::default().with_sequence(true);
        assert!(f.inspect("ds", &inputs, &sequence).is_err());
        assert!(f.write_index(&inputs[0], &ReadOptions::new()).is_err());
        assert_eq!(f.local_index_key(), Some("index_in_part"));
    }
}
