//! What tools say of TFRecord files, behind [`TfRecordFormat`]'s
//! `verify` (both CRCs of every frame, and `<file>.idx` when there is
//! one), `inspect` (the features of the first records) and `write_index`
//! (DALI's `.idx`).

use std::io::{BufWriter, Read, Write as _};

use grist_tensor::report::{Features, MinMax, bytes, count, table};
use grist_tensor::{
    Input, InspectOptions, ReadOptions, Report, StorageError, Verified, VerifyFailure,
};
use prost::Message as _;
use serde_json::json;

use crate::compression::Compression;
use crate::error::{Error, Result};
use crate::format::TfRecordFormat;
use crate::framing::{FRAME_OVERHEAD, ReaderOptions, RecordReader};
use crate::index::{IndexEntry, compare_index, parse_index, write_index_to};
use crate::proto::{self, feature::Kind};
use grist_tensor::Location;

/// A TFRecord file read record by record.
pub(crate) type FileReader = RecordReader<Box<dyn Read + Send>>;

/// `input`, compressed with `compression`, opened for reading records.
pub(crate) fn open(
    input: &Input,
    compression: Compression,
    options: ReaderOptions,
) -> Result<FileReader> {
    let raw = input.reader_at(0)?;
    RecordReader::new(raw, input.name().clone(), compression, options)
}

/// The reader options of the contract's read options.
pub(crate) fn reader_options(options: &ReadOptions) -> ReaderOptions {
    ReaderOptions::default()
        .with_check_crc(options.check_crc)
        .with_limits(options.limits)
}

/// Reads every frame of `reader`, calling `each` with where it lies.
/// Returns the number of frames and of bytes; on an error, the error and
/// where the failing frame starts (its record number and offset).
fn scan(
    reader: &mut FileReader,
    mut each: impl FnMut(IndexEntry),
) -> std::result::Result<(u64, u64), (Error, u64, u64)> {
    let (mut records, mut offset) = (0u64, 0u64);
    loop {
        match reader.next_record() {
            Ok(Some(payload)) => {
                let len = (payload.len() + FRAME_OVERHEAD) as u64;
                each(IndexEntry { offset, len });
                records += 1;
                offset += len;
            }
            Ok(None) => return Ok((records, offset)),
            Err(e) => return Err((e, records, offset)),
        }
    }
}

/// The number of records of `input`, every frame read (and checked as
/// `options` say).
pub(crate) fn count_records(
    format: &TfRecordFormat,
    input: &Input,
    options: &ReadOptions,
) -> Result<u64> {
    let mut reader = open(input, format.compression_of(input), reader_options(options))?;
    let (records, _) = scan(&mut reader, |_| {}).map_err(|(e, _, _)| e)?;
    Ok(records)
}

/// Reads every frame of `input` with both CRCs checked, and checks
/// `<input>.idx` against the frames when the file is uncompressed and
/// the index is there.
pub(crate) fn verify(format: &TfRecordFormat, input: &Input) -> Result<Verified, VerifyFailure> {
    let compression = format.compression_of(input);
    let mut reader = open(input, compression, ReaderOptions::default())
        .map_err(|e| VerifyFailure::new(None, e))?;
    let index = input.with_suffix(".idx");
    let indexed = compression == Compression::None && index.exists();
    let mut frames = Vec::new();
    let (records, framed) = scan(&mut reader, |e| {
        if indexed {
            frames.push(e);
        }
    })
    .map_err(|(e, record, offset)| {
        let at = grist_tensor::Location::record(input.name().clone(), record).with_offset(offset);
        VerifyFailure::new(Some(at), e)
    })?;
    if indexed {
        let text = index
            .read_all()
            .map_err(|e| VerifyFailure::new(None, Error::Storage(e)))?;
        parse_index(&text, index.name())
            .and_then(|listed| compare_index(index.name(), &listed, &frames))
            .map_err(|e| VerifyFailure::new(None, e))?;
    }
    let matches = if indexed { ", index matches" } else { "" };
    Ok(Verified::new(
        records,
        format!("{} framed{matches}", bytes(framed)),
    ))
}

/// Scans the uncompressed `input` and writes its index beside it,
/// atomically.
pub(crate) fn write_index(
    format: &TfRecordFormat,
    input: &Input,
    options: &ReadOptions,
) -> Result<u64> {
    let compression = format.compression_of(input);
    if compression != Compression::None {
        return Err(Error::NeedsUncompressed {
            file: input.name().clone(),
            compression: compression.name(),
        });
    }
    let mut reader = open(input, compression, reader_options(options))?;
    let mut entries = Vec::new();
    scan(&mut reader, |e| entries.push(e)).map_err(|(e, _, _)| e)?;
    let index = input.with_suffix(".idx");
    let storage = |e| Error::Storage(StorageError::new(index.name().clone(), e));
    // Visible under its name only once whole (a local rename, or a
    // completed upload).
    let mut out = index.storage().create(index.address()).map_err(storage)?;
    let mut buffered = BufWriter::new(&mut out);
    write_index_to(&entries, &mut buffered).map_err(|source| Error::Io {
        file: index.name().clone(),
        source,
    })?;
    buffered.flush().map_err(|source| Error::Io {
        file: index.name().clone(),
        source,
    })?;
    drop(buffered);
    out.commit().map_err(storage)?;
    Ok(entries.len() as u64)
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

/// What the first records of some files hold.
#[derive(Default)]
struct Summary {
    records: u64,
    /// Whether every record was seen.
    complete: bool,
    sizes: MinMax,
    /// Features, or a SequenceExample's context features.
    features: Features,
    lists: Features,
}

/// Adds one record (`at`: where it is, for errors).
fn add(summary: &mut Summary, payload: &[u8], sequence: bool, at: &Location) -> Result<()> {
    let malformed = |message| Error::Malformed {
        at: Box::new(at.clone()),
        message,
        reason: "not a valid protobuf message of this type",
        offset: 0,
    };
    if sequence {
        let seq =
            proto::SequenceExample::decode(payload).map_err(|_| malformed("SequenceExample"))?;
        for (name, f) in seq.context.iter().flat_map(|c| &c.feature) {
            let (kind, n) = kind_of(f);
            summary.features.add(name, kind, n);
        }
        for (name, list) in seq.feature_lists.iter().flat_map(|l| &l.feature_list) {
            summary
                .lists
                .add_list(name, list.feature.iter().map(kind_of));
        }
    } else {
        let example = proto::Example::decode(payload).map_err(|_| malformed("Example"))?;
        for (name, f) in example.features.iter().flat_map(|f| &f.feature) {
            let (kind, n) = kind_of(f);
            summary.features.add(name, kind, n);
        }
    }
    summary.sizes.add(payload.len());
    summary.records += 1;
    Ok(())
}

/// Looks at the first `options.records` records of `inputs`.
fn summarize(
    format: &TfRecordFormat,
    inputs: &[Input],
    options: &InspectOptions,
) -> Result<Summary> {
    let mut summary = Summary {
        complete: true,
        ..Summary::default()
    };
    for (i, input) in inputs.iter().enumerate() {
        let mut reader = open(
            input,
            format.compression_of(input),
            reader_options(&options.read),
        )?;
        for record in 0u64.. {
            if summary.records == options.records {
                // Look one record further to tell whether the data ends
                // here; damage past the inspected records is not
                // inspect's business.
                summary.complete =
                    matches!(reader.next_record(), Ok(None)) && i + 1 == inputs.len();
                return Ok(summary);
            }
            let Some(payload) = reader.next_record()? else {
                break;
            };
            let at = Location::record(input.name().clone(), record);
            add(&mut summary, payload, options.sequence, &at)?;
        }
    }
    Ok(summary)
}

/// The features of the first records of `inputs` (`name`: the path as
/// given).
pub(crate) fn inspect(
    format: &TfRecordFormat,
    name: &str,
    inputs: &[Input],
    options: &InspectOptions,
) -> Result<Report> {
    let summary = summarize(format, inputs, options)?;
    let mut compressions: Vec<&str> = Vec::new();
    for input in inputs {
        let c = format.compression_of(input).name();
        if !compressions.contains(&c) {
            compressions.push(c);
        }
    }
    let compression = compressions.join(",");
    let (lo, hi) = summary.sizes.or_zero();
    let mut json = json!({
        "file": name,
        "format": "tfrecord",
        "compression": compression,
        "sequence": options.sequence,
        "records": summary.records,
        "complete": summary.complete,
        "min_record_bytes": lo,
        "max_record_bytes": hi,
    });
    let scope = if summary.complete {
        "all records"
    } else {
        "the first records; there are more"
    };
    let mut text = vec![format!(
        "{name}: {} records inspected ({scope}), compression {compression}, payloads of {} \
         bytes",
        count(summary.records),
        summary.sizes.text()
    )];
    let n = summary.records;
    let header = ["feature", "kind", "records", "values"];
    if options.sequence {
        json["context"] = summary.features.to_json(false);
        json["feature_lists"] = summary.lists.to_json(true);
        text.extend(["".into(), "context".into()]);
        text.extend(table(&header, &summary.features.rows(n, false)));
        text.extend(["".into(), "feature_lists".into()]);
        text.extend(table(
            &["feature_list", "kind", "records", "steps", "values/step"],
            &summary.lists.rows(n, true),
        ));
    } else {
        json["features"] = summary.features.to_json(false);
        text.push(String::new());
        text.extend(table(&header, &summary.features.rows(n, false)));
    }
    Ok(Report::new(json, text))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use grist_tensor::Format as _;

    use super::*;
    use crate::encode::ExampleBuilder;
    use crate::writer::{RecordWriter, WriterOptions};

    /// Writes `n` Examples (`id`, and `x` in every other one) to `path`.
    fn write(path: &Path, n: i64, compression: Option<Compression>) -> Input {
        let options = WriterOptions::default().with_compression(compression);
        let mut w = RecordWriter::create(path, options).unwrap();
        for id in 0..n {
            let mut e = ExampleBuilder::new().with_int64s("id", [id]);
            if id % 2 == 0 {
                e = e.with_floats("x", [0.5; 3]);
            }
            w.write_record(&e.encode()).unwrap();
        }
        w.finish().unwrap();
        Input::local(path)
    }

    #[test]
    fn an_index_is_written_then_checked() {
        let dir = tempfile::tempdir().unwrap();
        let input = write(&dir.path().join("a.bin"), 5, None);
        let f = TfRecordFormat;
        let v = f.verify(&input).unwrap();
        assert_eq!((v.records, v.details.contains("index")), (5, false));
        assert_eq!(f.write_index(&input, &ReadOptions::new()).unwrap(), 5);
        let index = f.index_file(&input).unwrap();
        assert!(index.name().ends_with("a.bin.idx") && index.exists());
        assert!(
            f.verify(&input)
                .unwrap()
                .details
                .ends_with(", index matches")
        );
        // A stale index: the file is fine, the index is not.
        std::fs::write(index.path().unwrap(), "0 17\n").unwrap();
        let failure = f.verify(&input).unwrap_err();
        assert!(failure.position.is_none());
        let e = failure.error.downcast_ref::<Error>().unwrap();
        assert!(matches!(e, Error::BadIndex { line: 1, .. }), "{e}");
    }

    #[test]
    fn compressed_files_have_no_index() {
        let dir = tempfile::tempdir().unwrap();
        let input = write(&dir.path().join("a.tfrecord.gz"), 3, None);
        let e = TfRecordFormat
            .write_index(&input, &ReadOptions::new())
            .unwrap_err();
        let e = e.downcast_ref::<Error>().unwrap();
        assert!(matches!(
            e,
            Error::NeedsUncompressed {
                compression: "GZIP",
                ..
            }
        ));
        assert!(!input.with_suffix(".idx").exists());
        // Its records are counted in the decompressed stream.
        let count = TfRecordFormat.count(&input, &ReadOptions::new()).unwrap();
        assert_eq!(count, 3);
    }

    #[test]
    fn damage_is_placed_and_counting_checks_crcs_unless_told_not_to() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.tfrecord");
        let input = write(&path, 4, None);
        let mut data = std::fs::read(&path).unwrap();
        // The second record's first payload byte.
        let first = 16 + u64::from_le_bytes(data[..8].try_into().unwrap()) as usize;
        data[first + 12] ^= 0xff;
        std::fs::write(&path, data).unwrap();
        let failure = TfRecordFormat.verify(&input).unwrap_err();
        let at = failure.position.unwrap();
        assert_eq!((at.record, at.offset), (Some(1), Some(first as u64)));
        assert!(TfRecordFormat.count(&input, &ReadOptions::new()).is_err());
        let unchecked = ReadOptions::new().with_check_crc(false);
        assert_eq!(TfRecordFormat.count(&input, &unchecked).unwrap(), 4);
    }

    #[test]
    fn inspect_reads_the_first_records_of_several_files() {
        let dir = tempfile::tempdir().unwrap();
        let a = write(&dir.path().join("a.tfrecord"), 3, None);
        let b = write(&dir.path().join("b.tfrecord.gz"), 2, None);
        let inputs = [a, b];
        let all = TfRecordFormat
            .inspect("d", &inputs, &InspectOptions::default())
            .unwrap();
        assert_eq!(all.json["records"], 5);
        assert_eq!(all.json["complete"], true);
        assert_eq!(all.json["compression"], "NONE,GZIP");
        let x = &all.json["features"][1];
        assert_eq!((&x["name"], &x["records"]), (&json!("x"), &json!(3)));
        assert!(all.text[0].starts_with("d: 5 records inspected (all records)"));
        let first = InspectOptions::default().with_records(3);
        let some = TfRecordFormat.inspect("d", &inputs, &first).unwrap();
        assert_eq!(
            (&some.json["records"], &some.json["complete"]),
            (&json!(3), &json!(false))
        );
        // A record that is no Example is named.
        let c = dir.path().join("c.tfrecord");
        let mut w = RecordWriter::create(&c, WriterOptions::default()).unwrap();
        w.write_record(&ExampleBuilder::new().encode()).unwrap();
        w.write_record(b"\xff\xff\xff").unwrap();
        w.finish().unwrap();
        let e = TfRecordFormat
            .inspect("c", &[Input::local(&c)], &InspectOptions::default())
            .unwrap_err();
        assert!(matches!(
            e.downcast_ref::<Error>(),
            Some(Error::Malformed { .. })
        ));
        assert!(e.to_string().contains("record 1"), "{e}");
    }
}
