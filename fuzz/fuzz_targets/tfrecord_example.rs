//! Fuzzes the tf.Example / tf.SequenceExample decoder, the encoder and the
//! generic record JSON.
//!
//! Input: a selector byte, then one serialized record. The selector's low
//! 7 bits modulo the number of configurations pick the specs
//! (`grist_fuzz::tfrecord_example::configs`, new ones are added at the end
//! so that saved inputs keep their meaning); its high bit splits the rest
//! into two records (a length byte, the first record, the second), so that
//! ragged partitions can disagree across records, which TensorFlow's
//! batched composition allows. For each input:
//!
//! - `example_to_json` / `sequence_example_to_json` must not panic;
//! - the records are decoded alone, three times over in one batch, and
//!   between the configuration's two valid records; nothing may panic;
//! - a decode-time error belongs to its record: the first record that
//!   fails alone fails every batch it is in, with the same error, at its
//!   position (only finishing a batch, which composes ragged partitions
//!   across records, may add errors);
//! - decoding the records of the mixed batch into one builder each and
//!   joining them with `BatchBuilder::append` gives the same batch as one
//!   builder, and after finishing it (even when that fails) the builder
//!   decodes the next batch as a fresh one does;
//! - every batch that decodes has a JSON form, and write-then-read holds:
//!   `encode_batch` then decoding again gives the same batch JSON. That is
//!   guaranteed when every ragged output is well formed (each level starts
//!   at 0, never decreases and ends at the size of the level below; see
//!   `ragged_is_consistent`) and no two features share a key (the
//!   `overlapping_keys` configuration only checks that our own records
//!   decode). With `validate: false` the decoder may return ill-formed
//!   ragged tensors, as TensorFlow does; no records describe them, and
//!   `encode_batch` must refuse them with `TensorError::BadRagged`.
//!   `encode_batch` may also refuse (the same way) a well-formed tensor
//!   that records cannot describe: a `value_rowids` partition cannot
//!   express a record's trailing empty rows. Padded outputs
//!   (FixedLenSequenceFeature, sequence VarLenFeature) are written with
//!   their padding, which decodes to the same batch.
#![no_main]

use std::sync::Arc;

use grist_fuzz::tfrecord_example::{
    Config, configs, raggeds_are_consistent, raggeds_are_representable,
};
use grist_tensor::json::{batch_to_json, compare_json};
use grist_tensor::{Batch, TensorError};
use grist_tfrecord::{
    Error, FeatureProblem, Location, encode_batch, example_to_json, sequence_example_to_json,
};
use libfuzzer_sys::fuzz_target;

/// A decode-time (record-local) error, without its location; `None` for
/// errors raised when a batch is finished.
fn record_error(e: &Error) -> Option<String> {
    match e {
        Error::Feature {
            problem: FeatureProblem::BadPartition { .. },
            ..
        } => None,
        Error::Feature { at, problem } => Some(format!("{:?}: {problem:?}", at.feature)),
        Error::Malformed {
            message,
            reason,
            offset,
            ..
        } => Some(format!("{message}: {reason} at {offset}")),
        Error::UnknownField {
            message,
            field,
            offset,
            ..
        } => Some(format!("{message}: field {field} at {offset}")),
        Error::RecordTooLarge { len, max, .. } => Some(format!("{len} > {max}")),
        _ => None,
    }
}

/// Checks the outcome of decoding `batch` (the inputs at `inputs`)
/// against the inputs decoded alone: the first input with a record error
/// fails the batch, with that error, at its position.
fn check_error(alone: &[Option<String>], inputs: &[u64], batch: &Result<Batch, Error>, what: &str) {
    let want = alone
        .iter()
        .zip(inputs)
        .find_map(|(e, &at)| Some((e.clone()?, at)));
    let got = batch.as_ref().err().and_then(|e| {
        let key = record_error(e)?;
        Some((key, e.location().and_then(|l| l.record).unwrap_or(u64::MAX)))
    });
    assert_eq!(want, got, "{what}: {batch:?}");
}

/// JSON, write-then-read and no panics for one decoded batch.
fn check_batch(config: &Config, batch: &Batch, what: &str) {
    let json = batch_to_json(batch);
    let encoded = encode_batch(batch, &config.spec);
    let mut decoder = config.decoder.clone();
    let file: Arc<str> = "round trip".into();
    if !raggeds_are_consistent(batch) {
        // Ill-formed ragged output (validate: false): no records describe
        // it, and the encoder must say so.
        match encoded {
            Err(Error::Spec(TensorError::BadRagged { .. })) => {}
            other => panic!("{what}: encoding an ill-formed ragged tensor gave {other:?}"),
        }
        return;
    }
    let encoded = match encoded {
        Ok(encoded) => encoded,
        Err(Error::Spec(TensorError::BadRagged { .. }))
            if !raggeds_are_representable(batch, &config.spec) =>
        {
            return;
        }
        Err(e) => panic!("{what}: encode_batch failed: {e}"),
    };
    assert_eq!(encoded.len(), batch.rows(), "{what}: one record per row");
    let again = decoder
        .decode_batch(&file, 0, encoded.iter().map(|r| &r[..]))
        .unwrap_or_else(|e| panic!("{what}: our own records fail to decode: {e}"));
    if config.disjoint_keys {
        let again = batch_to_json(&again);
        if let Err(m) = compare_json(&json, &again) {
            panic!("{what}: write-then-read differs {m}\nbefore {json}\nafter  {again}");
        }
    }
}

/// The selector bit that splits the rest of the input into two records.
const TWO_RECORDS: u8 = 0x80;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let configs = configs();
    let config = &configs[usize::from(selector & !TWO_RECORDS) % configs.len()];
    let inputs: Vec<&[u8]> = match rest.split_first() {
        Some((&len, two)) if selector & TWO_RECORDS != 0 => {
            let (a, b) = two.split_at(usize::from(len).min(two.len()));
            vec![a, b]
        }
        _ => vec![rest],
    };
    let file: Arc<str> = "fuzz".into();

    // The generic JSON forms: any result, no panic.
    for (i, r) in inputs.iter().enumerate() {
        let at = Location::record(file.clone(), i as u64);
        let _ = example_to_json(r, &at);
        let _ = sequence_example_to_json(r, &at);
    }

    let mut decoder = config.decoder.clone();
    let [v0, v1] = &config.valid;
    let n = inputs.len();
    let errors: Vec<Option<String>> = inputs
        .iter()
        .map(|r| {
            let e = decoder.decode_batch(&file, 0, [*r]).err();
            e.as_ref().and_then(record_error)
        })
        .collect();
    let alone = decoder.decode_batch(&file, 0, inputs.iter().copied());
    let at: Vec<u64> = (0..n as u64).collect();
    check_error(&errors, &at, &alone, "alone");
    let repeated_inputs = inputs.repeat(3);
    let repeated = decoder.decode_batch(&file, 0, repeated_inputs.iter().copied());
    check_error(&errors, &at, &repeated, "repeated");
    let mut mixed_inputs = vec![&v0[..]];
    mixed_inputs.extend(&inputs);
    mixed_inputs.push(&v1[..]);
    let mixed = decoder.decode_batch(&file, 0, mixed_inputs.iter().copied());
    let at: Vec<u64> = (1..=n as u64).collect();
    check_error(&errors, &at, &mixed, "mixed");

    // One builder per record, joined, is one builder for all.
    let mut joined = decoder.new_batch(1);
    for (i, r) in mixed_inputs.iter().enumerate() {
        let mut part = decoder.new_batch(1);
        let at = Location::record(file.clone(), i as u64);
        if decoder.decode(r, &at, &mut part).is_err() {
            assert_eq!(part.rows(), 0, "a failed record leaves no row");
        }
        joined.append(part);
    }
    let mut builder = joined;
    let joined = decoder.finish(&mut builder, &file, 0);
    // Finishing, even when it fails, leaves the builder ready for the
    // next batch.
    let at = Location::record(file.clone(), 0);
    decoder
        .decode(v1, &at, &mut builder)
        .expect("a valid record decodes");
    let reused = decoder.finish(&mut builder, &file, 0);
    let fresh = decoder.decode_batch(&file, 0, [&v1[..]]);
    match (&reused, &fresh) {
        (Ok(r), Ok(f)) => {
            if let Err(d) = compare_json(&batch_to_json(f), &batch_to_json(r)) {
                panic!("a finished builder keeps stale data: {d}");
            }
        }
        _ => panic!("a valid record after finish: {reused:?} vs {fresh:?}"),
    }
    match (&mixed, &joined) {
        (Ok(m), Ok(j)) => {
            if let Err(d) = compare_json(&batch_to_json(m), &batch_to_json(j)) {
                panic!("append differs from one builder: {d}");
            }
        }
        (Ok(_), Err(e)) => panic!("append fails where one builder works: {e}"),
        (Err(_), _) => {}
    }

    for (batch, what) in [
        (&alone, "alone"),
        (&repeated, "repeated"),
        (&mixed, "mixed"),
    ] {
        if let Ok(batch) = batch {
            check_batch(config, batch, &format!("{} {what}", config.name));
        }
    }
});
