//! Fuzzes the ATDS decoder (`AvroDecoder::decode_block`) and the encoder
//! (`encode_batch`).
//!
//! Input: a selector byte, a count byte, a split byte, then one block's
//! decompressed data. The selector's low 7 bits modulo the number of
//! configurations pick a writer schema and specs
//! (`grist_fuzz::avro_decode::configs`, new ones are added at the end so
//! that saved inputs keep their meaning); with its high bit set the data is
//! read with the schema `schema_for_specs` gives for the specs instead. The
//! count byte gives the block's record count (0..=199 as it is, 200..=255
//! as 2^(b-200), up to 2^55: counts far beyond the data). For each input:
//!
//! - nothing may panic;
//! - decoding rows `0..k` then `k..count` (the split byte modulo
//!   `count + 1`) into one builder, which skips the first `k` records on the
//!   second call, gives what decoding `0..count` at once gives: the same
//!   batch, or the same error (skipping must consume exactly the bytes
//!   decoding does);
//! - an error names a record of the block (or the block, for bytes left
//!   over); a decoder reused after finishing a batch (with its memory
//!   recycled) decodes the same again;
//! - the same checks (split, locations) for the key-expression plan
//!   (`keyexpr_config`: a nested schema, every kind) on the same bytes,
//!   and for varlen features of its arrays of records
//!   (`keyexpr_fast_specs`: the plan's fast element loop);
//! - write-then-read: a batch that decodes is written with `encode_batch`
//!   and read back with the `schema_for_specs` schema, giving the same
//!   batch, except that the dense shape of a varlen feature's unknown
//!   dimensions shrinks to what the entries need (trailing empty lists
//!   are not in the tensor, so the records written cannot have them).
#![no_main]

use std::sync::Arc;

use grist_avro_tensor::{AvroDecoder, Error, encode_batch};
use grist_fuzz::avro_decode::{Config, configs, keyexpr_config, keyexpr_fast_specs, limits};
use grist_tensor::json::{batch_to_json, compare_json};
use grist_tensor::{Batch, Column, FeatureSpec, Tensor, UNKNOWN_DIM};
use libfuzzer_sys::fuzz_target;

/// The record count a count byte stands for.
fn record_count(b: u8) -> usize {
    match b {
        0..=199 => usize::from(b),
        _ => 1usize << (b - 200).min(55),
    }
}

/// The largest batch reserved up front (the count may be huge).
const MAX_RESERVE: usize = 256;

/// Decodes the block's `count` records into one builder, in one call, or
/// in two split at `split` (rows `0..split`, then `split..count`), and
/// finishes it.
fn decode(
    decoder: &mut AvroDecoder,
    file: &Arc<str>,
    data: &[u8],
    count: usize,
    split: Option<usize>,
) -> Result<Batch, Error> {
    let mut out = decoder.recycled_batch(count.min(MAX_RESERVE));
    let k = split.unwrap_or(count);
    decoder.decode_block(file, 3, 1000, data, count, 0..k, &mut out)?;
    if k < count {
        decoder.decode_block(file, 3, 1000, data, count, k..count, &mut out)?;
    }
    decoder.finish(&mut out)
}

fn outcome(r: &Result<Batch, Error>) -> Result<serde_json::Value, String> {
    match r {
        Ok(b) => Ok(batch_to_json(b)),
        Err(e) => Err(e.to_string()),
    }
}

/// The batch with each varlen feature's unknown dimensions shrunk to the
/// largest index there plus one (0 without entries).
fn tightened(batch: &Batch, specs: &[FeatureSpec]) -> Batch {
    let columns = batch
        .columns()
        .iter()
        .zip(specs)
        .map(|(c, spec)| {
            let mut c: Column = c.clone();
            if let (FeatureSpec::Varlen(v), Tensor::Sparse(t)) = (spec, &mut c.tensor) {
                let rank = t.dense_shape.len();
                let declared = v.shape.clone().unwrap_or_default();
                for (l, &d) in declared.iter().enumerate() {
                    if d == UNKNOWN_DIM {
                        t.dense_shape[l + 1] = t
                            .indices
                            .chunks(rank)
                            .map(|e| e[l + 1] + 1)
                            .max()
                            .unwrap_or(0);
                    }
                }
            }
            c
        })
        .collect();
    Batch::new(batch.rows(), columns)
}

/// Write-then-read of a decoded batch.
fn round_trip(config: &Config, batch: &Batch) {
    let spec = grist_tensor::SpecFile {
        features: config.specs.clone(),
        ..Default::default()
    };
    let datums = encode_batch(batch, &spec).expect("a decoded batch encodes");
    assert_eq!(datums.len(), batch.rows());
    let data = datums.concat();
    let file: Arc<str> = "canonical".into();
    let mut decoder = AvroDecoder::new(&config.specs)
        .unwrap()
        .with_limits(limits());
    decoder.add_schema(file.clone(), &config.canonical).unwrap();
    let back = decode(&mut decoder, &file, &data, datums.len(), None)
        .unwrap_or_else(|e| panic!("{}: our own records fail to decode: {e}", config.name));
    let want = batch_to_json(&tightened(batch, &config.specs));
    let got = batch_to_json(&back);
    if let Err(m) = compare_json(&want, &got) {
        panic!(
            "{}: write-then-read differs {m}\nbefore {want}\nafter  {got}",
            config.name
        );
    }
}

fuzz_target!(|input: &[u8]| {
    let [selector, count, split, data @ ..] = input else {
        return;
    };
    let configs = configs();
    let config = &configs[usize::from(selector & 0x7f) % configs.len()];
    // (The canonical schema of no specs is an empty record: records of no
    // bytes, so a count of 2^55 would be 2^55 records.)
    let schema = if selector & 0x80 != 0 && !config.specs.is_empty() {
        &config.canonical
    } else {
        &config.schema
    };
    let count = record_count(*count);
    let split = usize::from(*split) % (count.min(255) + 1);
    let file: Arc<str> = "fuzz".into();
    let mut decoder = AvroDecoder::new(&config.specs)
        .unwrap()
        .with_limits(limits());
    decoder
        .add_schema(file.clone(), schema)
        .unwrap_or_else(|e| panic!("{}: {e}", config.name));

    let whole = decode(&mut decoder, &file, data, count, None);
    if let Err(e) = &whole {
        let at = e.location().expect("decode errors have a location");
        assert_eq!((&*at.file, at.block), ("fuzz", Some(3)), "{e}");
        if let Some(r) = at.record {
            assert!(r >= 1000 && r - 1000 < count as u64, "{e}");
        }
    }
    let parts = decode(&mut decoder, &file, data, count, Some(split));
    assert_eq!(
        outcome(&whole),
        outcome(&parts),
        "{}: split at {split}",
        config.name
    );

    // A reused decoder, its last batch recycled, decodes the same again.
    if let Ok(b) = parts {
        decoder.recycle(b);
    }
    let again = decode(&mut decoder, &file, data, count, None);
    assert_eq!(outcome(&whole), outcome(&again), "{}: reused", config.name);

    if let Ok(batch) = &whole {
        round_trip(config, batch);
    }

    let (schema, specs) = keyexpr_config();
    for specs in [specs, keyexpr_fast_specs()] {
        let mut general = AvroDecoder::new(specs).unwrap().with_limits(limits());
        general.add_schema(file.clone(), schema).unwrap();
        let whole = decode(&mut general, &file, data, count, None);
        if let Err(e) = &whole {
            let at = e.location().expect("decode errors have a location");
            assert_eq!((&*at.file, at.block), ("fuzz", Some(3)), "{e}");
        }
        let parts = decode(&mut general, &file, data, count, Some(split));
        assert_eq!(
            outcome(&whole),
            outcome(&parts),
            "key expressions: split at {split}"
        );
    }
});
