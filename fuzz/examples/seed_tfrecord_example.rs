//! Writes the seed corpus of the `tfrecord_example` fuzz target:
//!
//! - every record of every TFRecord file in the golden corpus directory
//!   (default `../../shared/corpus/tfrecord`; damaged files give the
//!   records before the damage), once behind each configuration's selector
//!   byte (records over 16 KiB only once, behind selector 0: libFuzzer's
//!   `-max_len` cuts them anyway);
//! - the two valid records of every configuration, behind its selector,
//!   alone and as one two-record input.
//!
//! ```sh
//! cd fuzz
//! cargo run --example seed_tfrecord_example -- ../../shared/corpus/tfrecord corpus/tfrecord_example
//! ```
use std::path::{Path, PathBuf};

use grist_fuzz::tfrecord_example::configs;
use grist_tfrecord::{ReaderOptions, RecordReader};

const BIG: usize = 16 << 10;

fn records_of(path: &Path) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let Ok(mut reader) = RecordReader::open(path, ReaderOptions::default()) else {
        return out;
    };
    while let Ok(Some(record)) = reader.next_record() {
        out.push(record.to_vec());
    }
    out
}

fn main() -> std::io::Result<()> {
    let mut args = std::env::args_os().skip(1);
    let input = args.next().map_or_else(
        || PathBuf::from("../../shared/corpus/tfrecord"),
        PathBuf::from,
    );
    let output = args
        .next()
        .map_or_else(|| PathBuf::from("corpus/tfrecord_example"), PathBuf::from);
    std::fs::create_dir_all(&output)?;
    let configs = configs();
    let mut written = 0;
    let mut write = |name: String, selector: usize, record: &[u8]| {
        let mut seed = Vec::with_capacity(1 + record.len());
        seed.push(selector as u8);
        seed.extend_from_slice(record);
        written += 1;
        std::fs::write(output.join(name), seed)
    };

    let mut files: Vec<PathBuf> = std::fs::read_dir(&input)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_none_or(|e| e != "json"))
        .collect();
    files.sort();
    for path in &files {
        let stem = path
            .file_name()
            .map(|n| n.to_string_lossy().replace('.', "_"))
            .unwrap_or_default();
        for (i, record) in records_of(path).iter().enumerate() {
            let selectors = if record.len() > BIG { 1 } else { configs.len() };
            for s in 0..selectors {
                write(format!("corpus_{stem}_{i}_{s}"), s, record)?;
            }
        }
    }
    for (s, config) in configs.iter().enumerate() {
        let [v0, v1] = &config.valid;
        for (i, record) in [v0, v1].into_iter().enumerate() {
            write(format!("valid_{}_{i}", config.name), s, record)?;
        }
        // Both as one two-record input: the selector with its high bit
        // set, the first record's length, the records.
        if let Ok(len) = u8::try_from(v0.len()) {
            let two: Vec<u8> = [&[len][..], v0, v1].concat();
            write(format!("pair_{}", config.name), s | 0x80, &two)?;
        }
    }
    eprintln!(
        "{written} seeds from {} files and {} configurations in {}",
        files.len(),
        configs.len(),
        output.display()
    );
    Ok(())
}
