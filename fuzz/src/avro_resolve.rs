//! The `avro_resolve` target's work: reader schemas made from the
//! `avro_decode` configurations' writer schemas by evolving them the ways
//! schemas evolve (and some ways the specification forbids), then the
//! writer's datums read through them. Shared with the library's tests,
//! which run it over valid blocks (what CI runs of this target).
//!
//! Input: a selector byte, a record-count byte (as `avro_decode`'s), eight
//! bytes seeding the reader schema's changes, then one block's data. The
//! selector's low 7 bits pick a configuration (one past the table: the
//! key-expression configuration); with its high bit set the reader schema
//! is the writer schema itself.

use std::sync::Arc;

use grist_avro_tensor::{AvroDecoder, Block, DatumSchema, ReaderSchema};
use grist_tensor::json::batch_to_json;
use grist_tensor::{Batch, FeatureSpec};
use serde_json::{Value, json};

use crate::avro_decode::{Rng, configs, keyexpr_config, limits};

/// The record count a count byte stands for (as `avro_decode`'s).
pub fn record_count(b: u8) -> usize {
    match b {
        0..=199 => usize::from(b),
        _ => 1usize << (b - 200).min(55),
    }
}

/// The writer schema (JSON text) and specs the selector picks.
pub fn config(selector: u8) -> (&'static str, &'static [FeatureSpec]) {
    let configs = configs();
    let i = usize::from(selector & 0x7f) % (configs.len() + 1);
    match configs.get(i) {
        Some(c) => (&c.schema, &c.specs),
        None => {
            let (schema, specs) = keyexpr_config();
            (schema, specs)
        }
    }
}

/// What the changes to a writer schema kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// None: the reader schema is the writer's.
    Identity,
    /// Fields reordered only: the same values by name.
    Reordered,
    /// Anything else.
    Other,
}

/// A reader schema evolved from `writer` by changes `seed` picks: fields
/// reordered, dropped, added (with a default, or without one, which the
/// specification refuses), renamed with the old name as an alias,
/// promoted (int → long → float → double, string ↔ bytes), made nullable,
/// narrowed from a union, retyped (refused), enum symbols added or
/// removed (with or without a default), records renamed (with or without
/// an alias), nested records evolved the same way.
pub fn evolve(writer: &Value, seed: u64) -> (Value, Change) {
    let mut rng = Rng::new(seed);
    let mut reader = writer.clone();
    let mut change = Change::Identity;
    evolve_type(&mut reader, &mut rng, 0, &mut change);
    (reader, change)
}

fn note(change: &mut Change, what: Change) {
    if what == Change::Other || *change == Change::Identity {
        *change = what;
    }
}

fn evolve_type(t: &mut Value, rng: &mut Rng, depth: usize, change: &mut Change) {
    if depth > 6 {
        return;
    }
    match t {
        Value::Object(o) => match o.get("type").and_then(Value::as_str) {
            Some("record") | Some("error") => evolve_record(t, rng, depth, change),
            Some("array") => {
                if let Some(items) = o.get_mut("items") {
                    evolve_type(items, rng, depth + 1, change);
                }
            }
            Some("map") => {
                if let Some(values) = o.get_mut("values") {
                    evolve_type(values, rng, depth + 1, change);
                }
            }
            Some("enum") => evolve_enum(o, rng, change),
            _ => {}
        },
        Value::Array(branches) => {
            for b in branches {
                if rng.below(3) == 0 {
                    evolve_type(b, rng, depth + 1, change);
                }
            }
        }
        _ => {}
    }
}

fn evolve_enum(o: &mut serde_json::Map<String, Value>, rng: &mut Rng, change: &mut Change) {
    let Some(Value::Array(symbols)) = o.get_mut("symbols") else {
        return;
    };
    match rng.below(5) {
        0 => {
            symbols.push(json!("ADDED"));
            note(change, Change::Other);
        }
        1 if symbols.len() > 1 => {
            symbols.remove(0);
            let kept = symbols[0].clone();
            // Without a default, the removed symbol fails when met.
            if rng.below(2) == 0 {
                o.insert("default".into(), kept);
            }
            note(change, Change::Other);
        }
        _ => {}
    }
}

/// A primitive's promotions the specification allows, and one it refuses.
fn promoted(t: &str, rng: &mut Rng) -> Option<&'static str> {
    let options: &[&str] = match t {
        "int" => &["long", "float", "double"],
        "long" => &["float", "double"],
        "float" => &["double"],
        "string" => &["bytes"],
        "bytes" => &["string"],
        _ => &[],
    };
    match options.len() {
        0 => None,
        n => Some(options[rng.below(n as u64) as usize]),
    }
}

/// A new field with a default of its type (or, rarely, without one).
fn added_field(rng: &mut Rng, n: u64) -> Value {
    let name = format!("added{n}");
    let (t, default) = match rng.below(6) {
        0 => (json!("int"), json!(7)),
        1 => (json!("string"), json!("x")),
        2 => (json!({"type": "array", "items": "long"}), json!([1, 2])),
        3 => (json!(["null", "double"]), Value::Null),
        4 => (json!("float"), json!(1.5)),
        _ => (json!("long"), Value::Null),
    };
    match (rng.below(8), default) {
        // No default: a reader field the writer lacks, refused.
        (0, _) | (_, Value::Null) if !matches!(t, Value::Array(_)) => {
            json!({"name": name, "type": t})
        }
        (_, d) => json!({"name": name, "type": t, "default": d}),
    }
}

fn evolve_record(t: &mut Value, rng: &mut Rng, depth: usize, change: &mut Change) {
    let Value::Object(o) = t else { return };
    if rng.below(12) == 0 {
        // Renamed: refused unless the old name is an alias.
        if let Some(Value::String(name)) = o.get("name").cloned() {
            o.insert("name".into(), json!(format!("{name}Renamed")));
            if rng.below(2) == 0 {
                o.insert("aliases".into(), json!([name]));
            }
            note(change, Change::Other);
        }
    }
    let Some(Value::Array(fields)) = o.get_mut("fields") else {
        return;
    };
    if fields.len() > 1 && rng.below(3) == 0 {
        let by = 1 + rng.below(fields.len() as u64 - 1) as usize;
        fields.rotate_left(by);
        note(change, Change::Reordered);
    }
    let mut i = 0;
    while i < fields.len() {
        let field = &mut fields[i];
        match rng.below(14) {
            0 => {
                fields.remove(i);
                note(change, Change::Other);
                continue;
            }
            1 => {
                if let Some(Value::String(name)) = field.get("name").cloned() {
                    field["name"] = json!(format!("{name}_new"));
                    field["aliases"] = json!([name]);
                    note(change, Change::Other);
                }
            }
            2 => {
                let p = field["type"].as_str().and_then(|s| promoted(s, rng));
                if let Some(p) = p {
                    field["type"] = json!(p);
                    note(change, Change::Other);
                }
            }
            // Made nullable: the writer's type is a branch.
            3 if !field["type"].is_array() => {
                let inner = field["type"].take();
                field["type"] = if rng.below(2) == 0 {
                    json!(["null", inner])
                } else {
                    json!([inner, "null"])
                };
                note(change, Change::Other);
            }
            4 => {
                // A union narrowed to one branch: the others fail when met.
                if let Some(b) = field["type"]
                    .as_array()
                    .and_then(|branches| branches.iter().find(|b| *b != "null").cloned())
                {
                    field["type"] = b;
                    note(change, Change::Other);
                }
            }
            5 => {
                // Retyped past the rules: refused (or, for a boolean, kept).
                field["type"] = json!("boolean");
                note(change, Change::Other);
            }
            6..=8 => {
                let mut inner_change = Change::Identity;
                evolve_type(&mut field["type"], rng, depth + 1, &mut inner_change);
                note(change, inner_change);
            }
            _ => {}
        }
        i += 1;
    }
    if rng.below(3) == 0 {
        let n = rng.below(1000);
        let at = rng.below(fields.len() as u64 + 1) as usize;
        fields.insert(at, added_field(rng, n));
        note(change, Change::Other);
    }
}

fn decode(
    decoder: &mut AvroDecoder,
    file: &Arc<str>,
    data: &[u8],
    count: usize,
) -> Result<Batch, String> {
    let mut out = decoder.recycled_batch(count.min(256));
    decoder
        .decode_block(file, 3, 1000, data, count, 0..count, &mut out)
        .map_err(|e| {
            let at = e.location().expect("decode errors have a location");
            assert_eq!((&*at.file, at.block), ("fuzz", Some(3)), "{e}");
            e.to_string()
        })?;
    decoder.finish(&mut out).map_err(|e| e.to_string())
}

/// One input's checks: nothing panics; a writer schema the reader schema
/// does not resolve is refused by the generic reader and by the tensor
/// decoder alike (at plan time, naming the file); datums read through
/// the reader schema give values or errors naming a record of the block;
/// and the reader schema that is the writer's, or that only reorders its
/// fields, decodes what no reader schema decodes.
pub fn check(selector: u8, count: u8, seed: u64, data: &[u8]) {
    let (schema, specs) = config(selector);
    let count = record_count(count);
    let writer: Value = serde_json::from_str(schema).expect("writer schema JSON");
    let (reader_json, change) = if selector & 0x80 != 0 {
        (writer.clone(), Change::Identity)
    } else {
        evolve(&writer, seed)
    };
    let Ok(reader) = ReaderSchema::from_value(&reader_json) else {
        return;
    };
    let file: Arc<str> = "fuzz".into();
    let generic = DatumSchema::resolve(file.clone(), schema, &reader);
    let mut decoder = AvroDecoder::new(specs)
        .expect("the configuration's specs")
        .with_limits(limits())
        .with_reader_schema(reader.clone());
    let added = decoder.add_schema(file.clone(), schema);
    if let Err(e) = &generic {
        assert!(added.is_err(), "resolution refused by one reader only: {e}");
        assert!(e.to_string().contains("fuzz"), "{e}");
    }
    if let Ok(generic) = &generic {
        let block = Block {
            index: 3,
            offset: 0,
            first_record: 1000,
            record_count: count as u64,
            data: bytes::Bytes::copy_from_slice(data),
            stored_bytes: 0,
            compressed: false,
        };
        match generic.datum_ranges(&file, &block) {
            Ok(ranges) => {
                for (i, r) in ranges.iter().enumerate().take(64) {
                    let at =
                        grist_tensor::Location::block(file.clone(), 3).with_record(1000 + i as u64);
                    if let Ok(v) = generic.decode(&data[r], &at) {
                        let _ = serde_json::to_string(&generic.json(&v));
                    }
                }
            }
            Err(e) => assert!(e.location().is_some(), "{e}"),
        }
    }
    let Ok(()) = added else { return };
    let through = decode(&mut decoder, &file, data, count);
    if change != Change::Other {
        let mut plain = AvroDecoder::new(specs)
            .expect("specs")
            .with_limits(limits());
        plain
            .add_schema(file.clone(), schema)
            .expect("the writer schema");
        let direct = decode(&mut plain, &file, data, count);
        match (change, &through, &direct) {
            (Change::Identity, _, _) => assert_eq!(
                through.as_ref().map(batch_to_json),
                direct.as_ref().map(batch_to_json),
                "the writer's own schema as reader schema"
            ),
            (_, Ok(a), Ok(b)) => assert_eq!(
                batch_to_json(a),
                batch_to_json(b),
                "fields reordered by the reader schema"
            ),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::avro_decode::valid_block;

    /// Every configuration's valid blocks through reader schemas evolved
    /// by many seeds, and through the writer's own: what CI runs of the
    /// target.
    #[test]
    fn evolved_reader_schemas_over_valid_blocks() {
        let n = configs().len() as u8 + 1;
        let mut kinds = [0usize; 3];
        for selector in 0..n {
            let (schema, specs) = config(selector);
            for (records, block_seed) in [(0usize, 1u64), (1, 2), (5, 3)] {
                let data = valid_block(schema, specs, records, block_seed);
                check(selector | 0x80, records as u8, 0, &data);
                for seed in 0..40u64 {
                    let writer: Value = serde_json::from_str(schema).unwrap();
                    let (_, change) = evolve(&writer, seed);
                    kinds[change as usize] += 1;
                    check(selector, records as u8, seed, &data);
                }
            }
        }
        // The seeds reach every kind of change.
        assert!(kinds.iter().all(|&k| k > 0), "{kinds:?}");
    }

    /// A reader schema that the specification refuses is refused.
    #[test]
    fn a_field_without_default_is_refused() {
        let (schema, specs) = config(0);
        let mut reader: Value = serde_json::from_str(schema).unwrap();
        reader["fields"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": "new", "type": "int"}));
        let reader = ReaderSchema::from_value(&reader).unwrap();
        let file: Arc<str> = "fuzz".into();
        assert!(DatumSchema::resolve(file.clone(), schema, &reader).is_err());
        let mut d = AvroDecoder::new(specs).unwrap().with_reader_schema(reader);
        assert!(d.add_schema(file, schema).is_err());
    }
}
