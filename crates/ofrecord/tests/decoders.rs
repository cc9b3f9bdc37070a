//! OneFlow's decoders over the corpus: every `decoder_runs` entry gives
//! the rows OneFlow gives (where OneFlow leaves memory unwritten, zeros),
//! or fails at the stated record with the stated kind.

use base64::Engine as _;
use grist_ofrecord::{Error, Field, OfRecordDecoder, OfRecordSource};
use grist_tensor::json::{compare_json, values_to_json};
use grist_tensor::{Decoder, RecordSource, Tensor, Values};
use grist_testkit::corpus::{self, FolderCase};
use serde_json::{Value, json};

use crate::support::OfCase;

/// Decodes every record of `case` with `fields` into one batch, through
/// the chunk source and the `Decoder` trait. On error: the error and the
/// global number of the failing record.
fn decode_all(
    case: &FolderCase,
    fields: &[Field],
) -> Result<grist_tensor::Batch, Box<(Error, u64)>> {
    let ds = case.dataset().unwrap();
    let mut decoder = OfRecordDecoder::with_fields(fields).unwrap();
    let mut source = OfRecordSource::new(&ds).with_chunk_bytes(64);
    let mut out = decoder.new_batch(4);
    // Records of the parts before each part.
    let mut before = Vec::new();
    let mut acc = 0u64;
    for p in case.parts() {
        before.push((p["file"].as_str().unwrap().to_string(), acc));
        acc += p["record_count"].as_u64().unwrap();
    }
    let global = |e: &Error| {
        let at = e.location().expect("a located error");
        let base = before
            .iter()
            .find(|(f, _)| at.file.ends_with(&format!("/{f}")))
            .map_or(0, |(_, b)| *b);
        base + at.record.expect("a record")
    };
    while let Some(chunk) = source.next_chunk().unwrap() {
        let rows = out.rows();
        if let Err(e) = decoder.decode_chunk(&chunk, 0..chunk.record_count, &mut out) {
            let e = *e.downcast::<Error>().expect("an OFRecord error");
            let g = global(&e);
            // The rows before the failing one were kept, whole.
            assert!(out.rows() >= rows);
            return Err(Box::new((e, g)));
        }
    }
    decoder
        .finish(&mut out, &"all".into(), 0)
        .map_err(|e| Box::new((e, 0)))
}

/// The expected rows with OneFlow's unwritten elements (null) as zeros.
fn zero_unwritten(rows: &Value) -> Value {
    match rows {
        Value::Null => json!(0),
        Value::Array(items) => Value::Array(items.iter().map(zero_unwritten).collect()),
        other => other.clone(),
    }
}

/// The rows of a dense column, as JSON lists.
fn rows_of(t: &Tensor) -> Value {
    let d = t.as_dense().expect("a dense column");
    let rows = d.shape[0];
    let row_len = d.values.len().checked_div(rows).unwrap_or(0);
    let all = values_to_json(&d.values);
    let all = all.as_array().unwrap();
    Value::Array(
        (0..rows)
            .map(|r| Value::Array(all[r * row_len..(r + 1) * row_len].to_vec()))
            .collect(),
    )
}

#[test]
fn every_decoder_run_gives_oneflows_result() {
    let mut runs = 0;
    for case in corpus::folder_cases("ofrecord") {
        for run in case.decoder_runs() {
            runs += 1;
            let what = format!("{}: {run}", case.name);
            let field = Field::from_json(run).unwrap_or_else(|e| panic!("{what}: {e}"));
            let result = &run["result"];
            match decode_all(&case, std::slice::from_ref(&field)) {
                Ok(batch) => {
                    assert_eq!(result["ok"], true, "{what}: decoded");
                    let column = batch.get(field.name()).unwrap();
                    if let Some(b64) = result.get("values_b64") {
                        let Values::String(s) = &column.as_dense().unwrap().values else {
                            panic!("{what}: not a string column");
                        };
                        let got: Vec<Value> = s
                            .iter()
                            .map(|b| json!(base64::engine::general_purpose::STANDARD.encode(b)))
                            .collect();
                        assert_eq!(Value::Array(got), *b64, "{what}");
                    } else {
                        let want = zero_unwritten(&result["rows"]);
                        compare_json(&want, &rows_of(column))
                            .unwrap_or_else(|m| panic!("{what}: {m}"));
                    }
                }
                Err(failed) => {
                    let (e, record) = *failed;
                    assert_eq!(result["ok"], false, "{what}: {e}");
                    assert_eq!(result["error"], e.manifest_kind(), "{what}: {e}");
                    assert_eq!(result["record"], record, "{what}: {e}");
                    assert!(matches!(e, Error::Feature { .. }), "{what}: {e}");
                }
            }
        }
    }
    assert!(runs >= 10, "only {runs} decoder runs");
}
