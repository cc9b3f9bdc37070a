//! Decoding tests: every parse of every Avro corpus case, batch by batch:
//! ATDS parses as tensorflow-io's ATDSDataset gave them (batches span
//! files, as ATDS's do), key-expression parses (`parse_avro`) as their
//! manifests give them.

use std::path::PathBuf;
use std::sync::Arc;

use grist_avro_tensor::{AvroDecoder, BlockReader, Error, ReaderOptions};
use grist_tensor::json::{batch_to_json, compare_json};
use grist_tensor::{DType, FeatureSpec, SpecFile};
use grist_testkit::corpus;
use serde_json::Value;

/// One block of records, with its file.
pub(crate) struct Block {
    file: Arc<str>,
    index: u64,
    first_record: u64,
    count: usize,
    data: bytes::Bytes,
}

/// Each file's name with its writer schema JSON.
pub(crate) type Schemas = Vec<(Arc<str>, String)>;

/// Every block of every file, plus each file's schema; stops at the first
/// container error (returned with the blocks before it).
pub(crate) fn read_blocks(files: &[PathBuf]) -> (Schemas, Vec<Block>, Option<Error>) {
    let mut schemas = Vec::new();
    let mut blocks = Vec::new();
    for f in files {
        let mut reader = match BlockReader::open(f, ReaderOptions::default()) {
            Ok(r) => r,
            Err(e) => return (schemas, blocks, Some(e)),
        };
        let file = reader.name().clone();
        schemas.push((file.clone(), reader.header().schema_json.clone()));
        loop {
            match reader.next_block() {
                Ok(Some(b)) => blocks.push(Block {
                    file: file.clone(),
                    index: b.index,
                    first_record: b.first_record,
                    count: b.record_count as usize,
                    data: b.data,
                }),
                Ok(None) => break,
                Err(e) => return (schemas, blocks, Some(e)),
            }
        }
    }
    (schemas, blocks, None)
}

/// Decodes the blocks in batches of `batch_size` (a batch may span blocks
/// and files). Returns the batches and the first error, if any.
///
/// With `resume`, each call on a block starts where the last one stopped
/// (`decode_block_to`); without, it asks for later rows of the whole block
/// (`decode_block`, which skips the earlier records again).
pub(crate) fn decode_all(
    decoder: &mut AvroDecoder,
    blocks: &[Block],
    batch_size: usize,
    drop_remainder: bool,
    resume: bool,
) -> (Vec<Value>, Option<Error>) {
    let mut batches = Vec::new();
    let mut out = decoder.new_batch(batch_size);
    let mut pending = 0;
    for b in blocks {
        let (mut row, mut at) = (0, 0);
        while row < b.count {
            let take = (batch_size - pending).min(b.count - row);
            let done = if resume {
                decoder
                    .decode_block_to(
                        &b.file,
                        b.index,
                        b.first_record + row as u64,
                        &b.data[at..],
                        b.count - row,
                        0..take,
                        &mut out,
                    )
                    .map(|n| at += n)
            } else {
                decoder.decode_block(
                    &b.file,
                    b.index,
                    b.first_record,
                    &b.data,
                    b.count,
                    row..row + take,
                    &mut out,
                )
            };
            if let Err(e) = done {
                return (batches, Some(e));
            }
            row += take;
            pending += take;
            if pending == batch_size {
                match decoder.finish(&mut out) {
                    Ok(batch) => batches.push(batch_to_json(&batch)),
                    Err(e) => return (batches, Some(e)),
                }
                pending = 0;
            }
        }
    }
    if pending > 0 && !drop_remainder {
        match decoder.finish(&mut out) {
            Ok(batch) => batches.push(batch_to_json(&batch)),
            Err(e) => return (batches, Some(e)),
        }
    }
    (batches, None)
}

pub(crate) fn is_generic(parse: &Value) -> bool {
    parse["api"]
        .as_str()
        .is_some_and(|a| a.contains("parse_avro"))
}

/// The feature an error names, if any.
fn named_feature(e: &Error) -> Option<String> {
    match e {
        Error::Schema { feature, .. } => Some(feature.clone()),
        Error::Spec(s) => Some(s.to_string()),
        _ => e
            .location()
            .and_then(|l| l.feature.as_deref().map(str::to_string)),
    }
}

#[test]
fn every_parse_matches_its_reference_reader() {
    let mut checked = 0;
    let mut generic = 0;
    for case in corpus::cases("avro") {
        let parses = case.expected["parses"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if parses.is_empty() {
            continue;
        }
        let (schemas, blocks, container_error) = read_blocks(&case.files);
        assert!(
            container_error.is_none(),
            "{}: {container_error:?}",
            case.name
        );
        for parse in &parses {
            let id = format!("{}/{}", case.name, parse["id"].as_str().unwrap_or("?"));
            let spec = SpecFile::from_value(parse).unwrap();
            let (mut decoder, mut plan_error) = match AvroDecoder::new(&spec.features) {
                Ok(d) => (d, None),
                Err(e) => (AvroDecoder::new(&[]).unwrap(), Some(e)),
            };
            for (file, schema) in schemas.iter().filter(|_| plan_error.is_none()) {
                if let Err(e) = decoder.add_schema(file.clone(), schema) {
                    plan_error = Some(e);
                    break;
                }
            }
            let (batches, error) = match plan_error {
                Some(e) => (Vec::new(), Some(e)),
                None => {
                    let (batch, drop) =
                        (spec.batch_size.unwrap(), spec.drop_remainder == Some(true));
                    let whole = decode_all(&mut decoder, &blocks, batch, drop, false);
                    let resumed = decode_all(&mut decoder, &blocks, batch, drop, true);
                    assert_eq!(resumed.0, whole.0, "{id}: resumed decoding");
                    assert_eq!(
                        resumed.1.as_ref().map(ToString::to_string),
                        whole.1.as_ref().map(ToString::to_string),
                        "{id}: resumed decoding"
                    );
                    whole
                }
            };
            let expected = parse["batches"].as_array().cloned().unwrap_or_default();
            match (parse["outcome"].as_str().unwrap(), &error) {
                ("ok", None) => assert_eq!(batches.len(), expected.len(), "{id}: batch count"),
                ("ok", Some(e)) => panic!("{id}: {e}"),
                ("error", None) => panic!("{id}: expected an error"),
                ("error", Some(e)) if is_generic(parse) => {
                    // parse_avro's messages name no feature; grist's
                    // errors name the one at fault.
                    let named = named_feature(e).unwrap_or_default();
                    assert!(
                        spec.features.iter().any(|f| named.contains(f.name())),
                        "{id}: {e} names none of the features"
                    );
                    assert!(batches.is_empty() || parse["batches"].is_array(), "{id}");
                }
                ("error", Some(e)) => {
                    let err = &parse["error"];
                    assert_eq!(
                        batches.len() as u64,
                        err["batches_before_error"].as_u64().unwrap(),
                        "{id}: {e}"
                    );
                    // The message names the feature, as ATDS's does.
                    let msg = err["message"].as_str().unwrap();
                    if let Error::Feature { at, .. } = e {
                        let feature = at.feature.as_deref().expect("a feature");
                        assert!(msg.contains(feature), "{id}: {e} vs {msg}");
                    }
                }
                (other, _) => panic!("{id}: unknown outcome {other}"),
            }
            for (i, (want, got)) in expected.iter().zip(&batches).enumerate() {
                if let Err(m) = compare_json(want, got) {
                    panic!("{id}: batch {i}: {m}\nexpected {want}\nactual   {got}");
                }
            }
            checked += 1;
            generic += usize::from(is_generic(parse));
        }
    }
    assert!(checked >= 20, "only {checked} parses checked");
    assert!(
        generic >= 12,
        "only {generic} key-expression parses checked"
    );
}

#[test]
fn lying_block_counts_fail_at_the_block_the_manifest_names() {
    let mut checked = 0;
    for case in corpus::cases("avro") {
        let Some(failing) = case.expected["error"]["failing_block_index"].as_u64() else {
            continue;
        };
        let (schemas, blocks, container_error) = read_blocks(&case.files);
        if container_error.is_some() {
            // Damage the container layer reports itself (tests/container.rs).
            continue;
        }
        // No features: every field is skipped, which walks every datum.
        let mut decoder = AvroDecoder::new(&[]).unwrap();
        for (file, schema) in &schemas {
            decoder.add_schema(file.clone(), schema).unwrap();
        }
        let mut records_before = 0u64;
        let mut error = None;
        for b in &blocks {
            let mut out = decoder.new_batch(b.count);
            match decoder.decode_block(
                &b.file,
                b.index,
                b.first_record,
                &b.data,
                b.count,
                0..b.count,
                &mut out,
            ) {
                Ok(()) => records_before += b.count as u64,
                Err(e) => {
                    error = Some(e);
                    break;
                }
            }
        }
        let e = error.unwrap_or_else(|| panic!("{}: decoding did not fail", case.name));
        assert!(matches!(e, Error::Datum { .. }), "{}: {e}", case.name);
        assert_eq!(
            e.location().unwrap().block.unwrap(),
            failing,
            "{}: {e}",
            case.name
        );
        assert_eq!(
            records_before,
            case.expected["error"]["records_in_intact_blocks_before"]
                .as_u64()
                .unwrap(),
            "{}",
            case.name
        );
        checked += 1;
    }
    assert!(checked >= 1);
}

/// A block of records that take no bytes (an empty record, or a record of
/// nulls) claiming 2^40 records in 0 bytes made the decoder produce rows
/// for hours when all were asked for (found while testing the CLI's `cat
/// --spec`), and such blocks were then refused. Java writes them (a whole
/// file of them is one block): they decode, only the rows asked for are
/// built, and the rows before those cost nothing.
#[test]
fn zero_size_records_decode_any_count_at_the_cost_of_the_rows_asked() {
    let spec = FeatureSpec::dense("x", DType::Int64, vec![2]).with_default(serde_json::json!(7));
    for schema in [
        r#"{"type": "record", "name": "Empty", "fields": []}"#,
        r#"{"type": "record", "name": "Nulls", "fields": [{"name": "n", "type": "null"}]}"#,
    ] {
        let file: Arc<str> = "zero.avro".into();
        let mut d = AvroDecoder::new(std::slice::from_ref(&spec)).unwrap();
        d.add_schema(file.clone(), schema).unwrap();
        let mut out = d.new_batch(16);
        let end = d
            .decode_block_to(
                &file,
                3,
                0,
                &[],
                1 << 62,
                (1 << 61)..(1 << 61) + 16,
                &mut out,
            )
            .unwrap();
        assert_eq!(end, 0);
        let batch = d.finish(&mut out).unwrap();
        let json = batch_to_json(&batch);
        assert_eq!(json["records"], 16);
        assert_eq!(
            json["outputs"]["x"]["values"],
            serde_json::json!(vec![7; 32]),
            "{json}"
        );
        // No records in no bytes are fine; three zero-size records in
        // three bytes leave the bytes unread: the count lied.
        let mut out = d.new_batch(3);
        d.decode_block(&file, 0, 0, &[], 0, 0..0, &mut out).unwrap();
        let err = d
            .decode_block(&file, 0, 0, &[0, 0, 0], 3, 0..3, &mut out)
            .unwrap_err();
        assert!(matches!(err, Error::Datum { .. }), "{err}");
        assert_eq!(err.location().and_then(|l| l.block), Some(0), "{err}");
    }
}

/// A sparse shape with an unknown size (-1) passed, and then every index
/// passed the range check (-1 compared as unsigned): refused by name.
#[test]
fn sparse_shapes_must_give_every_size() {
    let specs: Vec<grist_tensor::FeatureSpec> = serde_json::from_str(
        r#"[{"name": "sp", "kind": "sparse", "dtype": "float32", "shape": [-1]}]"#,
    )
    .unwrap();
    let err = AvroDecoder::new(&specs).unwrap_err().to_string();
    assert!(err.contains("sp") && err.contains("-1"), "{err}");
}

/// The key-expression plan reads ATDS's own cases as ATDS does: every ATDS
/// parse without sparse features, its features marked as TensorFlow's
/// classes (which takes the general plan), gives the manifest's batches.
#[test]
fn atds_parses_read_the_same_on_the_key_expression_plan() {
    let mut checked = 0;
    for case in corpus::cases("avro") {
        let (schemas, blocks, container_error) = read_blocks(&case.files);
        if container_error.is_some() {
            continue;
        }
        for parse in case.parses() {
            let id = format!("{}/{}", case.name, parse["id"].as_str().unwrap_or("?"));
            if is_generic(parse) || parse["outcome"] != "ok" {
                continue;
            }
            let mut spec = SpecFile::from_value(parse).unwrap();
            if spec
                .features
                .iter()
                .any(|f| matches!(f, grist_tensor::FeatureSpec::Sparse(_)))
            {
                continue;
            }
            for f in &mut spec.features {
                match f {
                    grist_tensor::FeatureSpec::Dense(d) => d.tf_class = Some("general".into()),
                    grist_tensor::FeatureSpec::Varlen(v) => v.tf_class = Some("general".into()),
                    _ => {}
                }
            }
            let mut decoder = AvroDecoder::new(&spec.features).unwrap();
            for (file, schema) in &schemas {
                decoder
                    .add_schema(file.clone(), schema)
                    .unwrap_or_else(|e| panic!("{id}: {e}"));
            }
            let (batch, drop) = (spec.batch_size.unwrap(), spec.drop_remainder == Some(true));
            let (batches, error) = decode_all(&mut decoder, &blocks, batch, drop, true);
            assert!(error.is_none(), "{id}: {error:?}");
            let expected = parse["batches"].as_array().unwrap();
            assert_eq!(batches.len(), expected.len(), "{id}");
            for (i, (want, got)) in expected.iter().zip(&batches).enumerate() {
                if let Err(m) = compare_json(want, got) {
                    panic!("{id}: batch {i}: {m}\nexpected {want}\nactual   {got}");
                }
            }
            checked += 1;
        }
    }
    assert!(checked >= 3, "only {checked} parses");
}
