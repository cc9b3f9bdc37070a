//! Truncated records: every prefix of every record of every good tfrecord
//! corpus file, decoded with every parse of its case, is a row or an error
//! naming the record, never a panic.

use std::sync::Arc;

use grist_tensor::SpecFile;
use grist_tensor::json::batch_to_json;
use grist_testkit::corpus;
use grist_tfrecord::{ExampleDecoder, Location};

use crate::support::read_all;

#[test]
fn every_prefix_of_every_record_decodes_or_fails() {
    let file: Arc<str> = "prefix".into();
    let mut prefixes = 0usize;
    for case in corpus::cases("tfrecord").into_iter().filter(|c| c.is_ok()) {
        let records: Vec<Vec<u8>> = case.files.iter().flat_map(|f| read_all(f)).collect();
        for parse in case.parses() {
            let spec = SpecFile::from_value(parse).unwrap();
            // Parses whose specs TensorFlow rejects have nothing to decode.
            let Ok(mut decoder) = ExampleDecoder::from_spec_file(&spec) else {
                continue;
            };
            // One builder for all prefixes: a failed record leaves it as
            // it was, a decoded one is finished (composing any ragged
            // partitions) right away.
            let mut out = decoder.new_batch(1);
            for (i, record) in records.iter().enumerate() {
                let at = Location::record(file.clone(), i as u64);
                for len in 0..=record.len() {
                    prefixes += 1;
                    match decoder.decode(&record[..len], &at, &mut out) {
                        Ok(()) => {
                            if let Ok(batch) = decoder.finish(&mut out, &file, i as u64) {
                                batch_to_json(&batch);
                            }
                        }
                        Err(e) => assert_eq!(
                            e.location().map(|l| (&l.file, l.record)),
                            Some((&at.file, at.record)),
                            "{} {}: prefix {len} of record {i}: {e}",
                            case.name,
                            parse["id"]
                        ),
                    }
                    assert_eq!(out.rows(), 0);
                }
            }
        }
    }
    assert!(prefixes > 1_000_000, "only {prefixes} prefixes");
}
