//! What tools say of FFRecord files, behind [`FfrFormat`]'s `verify`
//! (the header and every sample's CRC-32) and `inspect` (each file's
//! header: samples, legacy flag, sizes).

use grist_tensor::report::{MinMax, bytes, count, plural, table};
use grist_tensor::{Input, RecordSource as _, Report, Verified, VerifyFailure};
use serde_json::{Map, Value, json};

use crate::error::{Error, Result};
use crate::format::FfrFormat;
use crate::reader::{FileInfo, ReaderOptions};

/// Where `error` happened, as tools print it: the sample and, when
/// `offsets` (the file's sample offsets) are known, its byte offset.
fn position(error: &Error, offsets: Option<&[u64]>) -> Option<grist_tensor::Location> {
    let at = match error {
        Error::InvalidOffset { at, .. }
        | Error::SampleChecksum { at, .. }
        | Error::TruncatedSample { at, .. }
        | Error::SampleTooLarge { at, .. } => at,
        _ => return None,
    };
    let place = (**at).clone();
    let offset = at
        .record
        .and_then(|r| usize::try_from(r).ok())
        .and_then(|i| offsets?.get(i).copied());
    Some(match offset {
        Some(o) => place.with_offset(o),
        None => place,
    })
}

/// Reads the header of `input` (its metadata CRC-32 and offsets checked)
/// and every sample, each against its CRC-32. Details: the bytes of
/// samples, and whether the header is a legacy one.
pub(crate) fn verify(format: &FfrFormat, input: &Input) -> Result<Verified, VerifyFailure> {
    let fail = |e: Error, offsets| VerifyFailure::new(position(&e, offsets), e);
    let reader = format
        .open(std::slice::from_ref(input), ReaderOptions::default())
        .map_err(|e| fail(e, None))?;
    let info = &reader.files()[0];
    let offsets = info.header().offsets();
    let mut source = reader.source();
    loop {
        match source.next_chunk() {
            Ok(Some(_)) => {}
            Ok(None) => break,
            Err(e) => return Err(fail(e, Some(offsets))),
        }
    }
    let legacy = match info.header().is_legacy() {
        true => ", legacy header (metadata checksum stored as 0, not checked)",
        false => "",
    };
    Ok(Verified::new(
        reader.len(),
        format!(
            "{} of samples, every CRC-32 checked{legacy}",
            bytes(reader.data_len())
        ),
    ))
}

/// The smallest and largest sample of a file, by its offsets.
fn sample_sizes(offsets: &[u64]) -> MinMax {
    let mut sizes = MinMax::new();
    for w in offsets.windows(2) {
        sizes.add(usize::try_from(w[1].saturating_sub(w[0])).unwrap_or(usize::MAX));
    }
    sizes
}

/// The machine form of one file's header.
fn file_json(f: &FileInfo, sizes: MinMax) -> Value {
    let h = f.header();
    let mut m = Map::new();
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
    sizes.insert_json("min_sample_bytes", "max_sample_bytes", &mut m);
    Value::Object(m)
}

/// Each file's sample count, legacy flag and sizes, from the headers
/// (read and checked; the samples are not read).
pub(crate) fn inspect(format: &FfrFormat, name: &str, inputs: &[Input]) -> Result<Report> {
    let reader = format.open(inputs, ReaderOptions::default())?;
    let files: Vec<(&FileInfo, MinMax)> = reader
        .files()
        .iter()
        .map(|f| (f, sample_sizes(f.header().offsets())))
        .collect();
    let mut all = MinMax::new();
    for (_, sizes) in &files {
        all.merge(*sizes);
    }
    let legacy = reader.legacy_files().count() as u64;

    let mut doc = Map::new();
    doc.insert("file".into(), json!(name));
    doc.insert("format".into(), json!("ffrecord"));
    doc.insert("samples".into(), json!(reader.len()));
    doc.insert("legacy".into(), json!(legacy > 0));
    doc.insert("data_bytes".into(), json!(reader.data_len()));
    all.insert_json("min_sample_bytes", "max_sample_bytes", &mut doc);
    let per_file = files.iter().map(|(f, s)| file_json(f, *s)).collect();
    doc.insert("files".into(), Value::Array(per_file));

    let n = files.len() as u64;
    let mut text = vec![format!(
        "{name}: FFRecord, {} samples in {} file{}, {} of samples of {} bytes; headers checked \
         (samples not read: `grist verify` checks them)",
        count(reader.len()),
        count(n),
        plural(n),
        bytes(reader.data_len()),
        all.text()
    )];
    if legacy > 0 {
        text.push(format!(
            "{legacy} legacy file{} (metadata checksum stored as 0: written before the \
             original library checked headers; its header cannot be verified)",
            plural(legacy)
        ));
    }
    text.push(String::new());
    let rows: Vec<Vec<String>> = files
        .iter()
        .map(|(f, sizes)| {
            let h = f.header();
            vec![
                f.name().to_string(),
                if h.is_legacy() { "legacy" } else { "" }.into(),
                count(f.count()),
                count(f.first_index()),
                count(h.header_len()),
                count(h.data_len()),
                sizes.text(),
            ]
        })
        .collect();
    text.extend(table(
        &[
            "file",
            "header",
            "samples",
            "first index",
            "header bytes",
            "sample bytes",
            "bytes per sample",
        ],
        &rows,
    ));
    Ok(Report::new(Value::Object(doc), text))
}

#[cfg(test)]
mod tests {
    use grist_tensor::{Format as _, InspectOptions, ReadOptions};

    use super::*;
    use crate::header::encode_file;

    /// Writes an FFRecord file of `samples` at `dir/name`.
    fn file(dir: &std::path::Path, name: &str, samples: &[&[u8]]) -> (Input, Vec<u8>) {
        let data = encode_file(samples.iter().copied());
        let path = dir.join(name);
        std::fs::write(&path, &data).unwrap();
        (Input::local(path), data)
    }

    #[test]
    fn damage_is_placed_at_its_sample() {
        let dir = tempfile::tempdir().unwrap();
        let (input, mut data) = file(dir.path(), "a.ffr", &[b"one", b"two", b"three"]);
        let f = FfrFormat::default();
        let v = f.verify(&input).unwrap();
        assert_eq!(v.records, 3);
        assert!(v.details.contains("every CRC-32 checked"), "{}", v.details);
        // The last sample's first byte.
        let at = data.len() - 5;
        data[at] ^= 1;
        std::fs::write(input.path().unwrap(), &data).unwrap();
        let failure = f.verify(&input).unwrap_err();
        let place = failure.position.unwrap();
        assert_eq!((place.record, place.offset), (Some(2), Some(at as u64)));
        assert_eq!(f.record_noun(), "sample");
        // Counting reads the header only.
        assert_eq!(f.count(&input, &ReadOptions::new()).unwrap(), 3);
    }

    #[test]
    fn counting_checks_the_header_unless_told_not_to() {
        let dir = tempfile::tempdir().unwrap();
        let (input, mut data) = file(dir.path(), "a.ffr", &[b"one", b"two"]);
        // A byte of the metadata (a sample checksum) after its CRC-32.
        data[12] ^= 1;
        std::fs::write(input.path().unwrap(), &data).unwrap();
        let f = FfrFormat::default();
        assert!(f.count(&input, &ReadOptions::new()).is_err());
        let unchecked = ReadOptions::new().with_check_crc(false);
        assert_eq!(f.count(&input, &unchecked).unwrap(), 2);
        // A bad header has no sample to name.
        assert!(f.verify(&input).unwrap_err().position.is_none());
    }

    #[test]
    fn inspect_reads_every_header() {
        let dir = tempfile::tempdir().unwrap();
        let (a, _) = file(dir.path(), "a.ffr", &[b"one", b"three"]);
        let (b, _) = file(dir.path(), "b.ffr", &[b"xy"]);
        let f = FfrFormat::default();
        let report = f
            .inspect("ds", &[a, b], &InspectOptions::default())
            .unwrap();
        assert_eq!(report.json["samples"], 3);
        assert_eq!(report.json["files"][1]["first_index"], 2);
        let sizes = (
            &report.json["min_sample_bytes"],
            &report.json["max_sample_bytes"],
        );
        assert_eq!(sizes, (&json!(2), &json!(5)));
        assert!(report.text[0].starts_with("ds: FFRecord, 3 samples in 2 files"));
        let sequence = InspectOptions::default().with_sequence(true);
        assert!(f.inspect("ds", &[], &sequence).is_err());
    }
}
