//! Avro datums read generically, by the writer schema alone: where each
//! datum of a block starts and ends, and what each one holds, as a value
//! tree ([`AvroValue`]) or as JSON in the form fastavro decodes records to
//! (the corpus manifests' `avro.records`). The tensor decoder does not go
//! through here; tools that show, count or check records do.
//!
//! [`AvroValue`] holds logical types as the types underneath, as they are
//! on the wire (a `timestamp-millis` is its `long`, a `decimal` its
//! bytes). The JSON forms ([`datum_to_json`], [`DatumJson`]) convert them
//! as fastavro does, and print fastavro's value as Python prints it:
//! `date`, `time-millis`/`-micros`, `timestamp-millis`/`-micros` (UTC,
//! `+00:00`) and `local-timestamp-millis`/`-micros` as `isoformat()`
//! strings (`"2020-09-13T12:26:40.123000+00:00"`), `decimal` on `bytes` or
//! `fixed` as `str(Decimal)` (rounded to its precision as fastavro's
//! decimal context does: `"-1234.567"`, `"1E-7"`, `"8.4E+6"`), `uuid` on
//! `string` as `str(UUID)`. What fastavro 1.13 leaves alone stays as it
//! is: `timestamp-nanos`, `local-timestamp-nanos`, `uuid` on `fixed`,
//! logical types on other underlying types, unknown ones. A value fastavro
//! fails to convert (a date after 9999-12-31, a time past 23:59, a
//! malformed uuid) is an error naming the record, as in fastavro; a
//! `decimal` without a precision, or with a scale above it, which fastavro
//! refuses in the schema, stays its bytes.
//!
//! Every length and count is checked against the bytes left before it is
//! used (so nothing is allocated or looped over beyond what the bytes
//! present can hold), and values nest at most 256 deep. Items that take
//! no bytes at all (`null`, records of nothing but such fields, `fixed` of
//! size 0) are the exception the format allows: an array or map block of
//! them may claim up to 2^32 items without a byte each. Finding datum
//! boundaries steps over such a block at once; [`DatumSchema::decode`]
//! builds a value per item and so takes at most 1,024 of them in one
//! datum, plus one per byte of the datum (a limit of this module).
//!
//! Whole datums that take no bytes (a schema of `null`, of an empty
//! record, of a record of `null` fields: Java and Spark write them) are
//! valid too, and a block may claim any number of them in no bytes (a
//! Java writer flushes a block by its size, so a file of them is one
//! block). Such a block is checked in constant time (its data must be
//! empty), its [`DatumRanges`] are a count, not a list, and
//! [`DatumReader`] hands its datums out one by one without storing them:
//! counting and checking cost nothing per record, and reading costs what
//! the records handed out cost.

use std::fmt;
use std::io::Read;
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use grist_io::{Address, Storage};
use grist_tensor::json::{bytes_to_json, float_to_json};
use serde_json::{Map, Value};

use crate::container::{Block, BlockReader, Header, ReaderOptions};
use crate::datum::{DatumError, DatumResult, MAX_DEPTH, Reader};
use crate::error::{Error, Result};
use crate::resolve::{ReaderSchema, resolve};
use crate::schema::{Node, Schema};
use grist_tensor::Location;

/// A writer schema compiled for reading datums generically.
///
/// Cloning is cheap (the compiled schema is shared).
///
/// ```
/// use grist_avro_tensor::{DatumSchema, Location, datum_to_json};
///
/// let schema = DatumSchema::parse(
///     "mem",
///     r#"{"type": "record", "name": "R", "fields": [
///         {"name": "id", "type": "long"},
///         {"name": "tag", "type": ["null", "string"]}]}"#,
/// )?;
/// // id 3, then branch 1 of the union: the string "ab".
/// let datum = [0x06, 0x02, 0x04, b'a', b'b'];
/// let at = Location::block("mem", 0).with_record(0);
/// let json = datum_to_json(&schema, &datum, &at)?;
/// assert_eq!(json, serde_json::json!({"id": 3, "tag": "ab"}));
/// # Ok::<(), grist_avro_tensor::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct DatumSchema {
    schema: Arc<Schema>,
}

/// One decoded Avro value, borrowing strings, bytes, field names and enum
/// symbols from the datum and the schema.
#[derive(Clone, Debug, PartialEq)]
pub enum AvroValue<'a> {
    /// `null`.
    Null,
    /// `boolean`.
    Boolean(bool),
    /// `int` (and the logical types over it, such as `date`).
    Int(i32),
    /// `long` (and the logical types over it, such as `timestamp-millis`).
    Long(i64),
    /// `float`.
    Float(f32),
    /// `double`.
    Double(f64),
    /// `bytes` (and the logical types over it, such as `decimal`).
    Bytes(&'a [u8]),
    /// `string`, as stored: not checked to be UTF-8.
    String(&'a [u8]),
    /// `fixed`.
    Fixed(&'a [u8]),
    /// `enum`: the symbol's index and the symbol.
    Enum {
        /// The index written.
        index: usize,
        /// The schema's symbol at that index.
        symbol: &'a str,
    },
    /// `array`: the items, across all of the array's blocks.
    Array(Vec<AvroValue<'a>>),
    /// `map`: the entries in the order written (keys as stored), across
    /// all of the map's blocks.
    Map(Vec<(&'a [u8], AvroValue<'a>)>),
    /// `record`: the fields in schema order.
    Record(Vec<(&'a str, AvroValue<'a>)>),
    /// A union: the branch written and its value.
    Union {
        /// The index of the branch.
        branch: usize,
        /// The branch's value.
        value: Box<AvroValue<'a>>,
    },
}

impl AvroValue<'_> {
    /// The JSON form fastavro decodes this value to, as the corpus
    /// manifests record it: numbers as JSON numbers (a float widened to
    /// double; NaN and the infinities as the strings `"NaN"`,
    /// `"Infinity"`, `"-Infinity"`), strings, bytes and fixed as a JSON
    /// string when they are UTF-8 and `{"base64": ...}` otherwise, enums as
    /// their symbol, arrays as arrays, maps and records as objects (map
    /// keys that are not UTF-8 with U+FFFD for the bad bytes; of a key
    /// written twice, the last), unions as the branch's value.
    pub fn to_json(&self) -> Value {
        match self {
            AvroValue::Null => Value::Null,
            AvroValue::Boolean(b) => Value::Bool(*b),
            AvroValue::Int(i) => Value::from(*i),
            AvroValue::Long(l) => Value::from(*l),
            AvroValue::Float(x) => float_to_json(f64::from(*x)),
            AvroValue::Double(x) => float_to_json(*x),
            AvroValue::Bytes(b) | AvroValue::String(b) | AvroValue::Fixed(b) => bytes_to_json(b),
            AvroValue::Enum { symbol, .. } => Value::String((*symbol).to_string()),
            AvroValue::Array(items) => Value::Array(items.iter().map(AvroValue::to_json).collect()),
            AvroValue::Map(entries) => Value::Object(
                entries
                    .iter()
                    .map(|(k, v)| (String::from_utf8_lossy(k).into_owned(), v.to_json()))
                    .collect::<Map<_, _>>(),
            ),
            AvroValue::Record(fields) => Value::Object(
                fields
                    .iter()
                    .map(|(name, v)| ((*name).to_string(), v.to_json()))
                    .collect::<Map<_, _>>(),
            ),
            AvroValue::Union { value, .. } => value.to_json(),
        }
    }
}

impl DatumSchema {
    /// Compiles a writer schema (the JSON text of a header's
    /// `avro.schema`), validated by apache-avro first. `file` names the
    /// input in errors: an invalid schema is [`Error::BadHeader`].
    pub fn parse(file: impl Into<Arc<str>>, schema_json: &str) -> Result<Self> {
        let schema = Schema::parse(schema_json).map_err(|reason| Error::BadHeader {
            file: file.into(),
            reason: format!("bad writer schema: {reason}"),
        })?;
        Ok(DatumSchema {
            schema: Arc::new(schema),
        })
    }

    /// Compiles a writer schema read through `reader`, by the Avro
    /// specification's resolution rules: datums decode to the reader's
    /// fields (in the writer's order, then the reader's fields the writer
    /// lacks, with their defaults, as fastavro orders them), promoted
    /// types, the reader's enum symbols; a writer field the reader lacks
    /// is left out. A union's branch ([`AvroValue::Union`]) is the
    /// writer's.
    ///
    /// Errors: [`Error::BadHeader`] for an invalid writer schema,
    /// [`Error::Resolution`] (naming `file` and the field) when the
    /// specification forbids the pairing. A value that can be written but
    /// not read (an enum symbol the reader lacks without a default, a union
    /// branch the reader cannot take) fails when a datum holding it is
    /// decoded.
    ///
    /// ```
    /// use grist_avro_tensor::{DatumSchema, Location, ReaderSchema, datum_to_json};
    ///
    /// let reader = ReaderSchema::parse(
    ///     r#"{"type": "record", "name": "R", "fields": [
    ///         {"name": "id", "type": "double"},
    ///         {"name": "tag", "type": "string", "default": "none"}]}"#,
    /// )?;
    /// let schema = DatumSchema::resolve(
    ///     "old.avro",
    ///     r#"{"type": "record", "name": "R", "fields": [{"name": "id", "type": "int"}]}"#,
    ///     &reader,
    /// )?;
    /// let at = Location::block("old.avro", 0).with_record(0);
    /// let json = datum_to_json(&schema, &[0x06], &at)?;
    /// assert_eq!(json, serde_json::json!({"id": 3.0, "tag": "none"}));
    /// # Ok::<(), grist_avro_tensor::Error>(())
    /// ```
    pub fn resolve(
        file: impl Into<Arc<str>>,
        writer_json: &str,
        reader: &ReaderSchema,
    ) -> Result<Self> {
        let file = file.into();
        let writer = Self::parse(file.clone(), writer_json)?;
        writer.with_reader_schema(&file, reader)
    }

    /// This writer schema read through `reader` (see
    /// [`resolve`](Self::resolve)); `file` names the file in errors.
    pub(crate) fn with_reader_schema(
        &self,
        file: &Arc<str>,
        reader: &ReaderSchema,
    ) -> Result<Self> {
        Ok(DatumSchema {
            schema: Arc::new(resolve(&self.schema, reader, file)?),
        })
    }

    /// The compiled schema.
    pub(crate) fn schema(&self) -> &Arc<Schema> {
        &self.schema
    }

    /// The fewest bytes a datum of this schema takes (0 for `null` and
    /// records of nothing but such fields).
    pub fn min_datum_size(&self) -> usize {
        self.schema.min_size[self.schema.root]
    }

    /// The byte range of each datum of `block` (of file `file`) within
    /// `block.data`, in order, once every datum has been walked: the
    /// block must hold exactly `block.record_count` datums and nothing
    /// after them. For a schema whose datums take no bytes, the data must
    /// be empty and the ranges are `block.record_count` times `0..0`,
    /// however many that is (checked at once, nothing stored per datum).
    ///
    /// Errors: [`Error::BadBlock`] when the block claims more records than
    /// its bytes can hold (before anything is allocated),
    /// [`Error::Datum`] naming the record for a datum that does not follow
    /// the schema, or naming the block for bytes left over.
    pub fn datum_ranges(&self, file: &Arc<str>, block: &Block) -> Result<DatumRanges> {
        let data = &block.data[..];
        let left_over = |left: usize| Error::Datum {
            at: Location::block(file.clone(), block.index).into(),
            reason: format!(
                "{left} bytes left after the block's {} records",
                block.record_count
            ),
        };
        let min = self.min_datum_size() as u64;
        if min == 0 {
            if !data.is_empty() {
                return Err(left_over(data.len()));
            }
            return Ok(DatumRanges {
                ranges: Vec::new(),
                count: block.record_count,
            });
        }
        if block.record_count > data.len() as u64 / min {
            return Err(Error::BadBlock {
                at: Location::block(file.clone(), block.index).into(),
                reason: format!(
                    "{} records claimed in {} bytes of data",
                    block.record_count,
                    data.len()
                ),
            });
        }
        // At most one range per byte of data (checked above).
        let mut ranges = Vec::with_capacity(block.record_count as usize);
        let mut walk = Walk::new(&self.schema, data);
        for i in 0..block.record_count {
            let start = walk.r.pos;
            walk.value::<false>(self.schema.root, 0)
                .map_err(|e| Error::Datum {
                    at: Location::block(file.clone(), block.index)
                        .with_record(block.first_record + i)
                        .into(),
                    reason: format!("{} at byte {} of the block", e.reason, e.offset),
                })?;
            ranges.push(start..walk.r.pos);
        }
        if !walk.r.at_end() {
            return Err(left_over(walk.r.remaining()));
        }
        Ok(DatumRanges {
            count: block.record_count,
            ranges,
        })
    }

    /// Decodes one whole datum (nothing may follow it). `at` names the
    /// record in errors ([`Error::Datum`]).
    pub fn decode<'a>(&'a self, datum: &'a [u8], at: &Location) -> Result<AvroValue<'a>> {
        let fail = |e: DatumError| Error::Datum {
            at: at.clone().into(),
            reason: format!("{} at byte {} of the datum", e.reason, e.offset),
        };
        let mut walk = Walk::new(&self.schema, datum);
        let value = walk.value::<true>(self.schema.root, 0).map_err(fail)?;
        if !walk.r.at_end() {
            return Err(Error::Datum {
                at: at.clone().into(),
                reason: format!("{} bytes left after the datum", walk.r.remaining()),
            });
        }
        Ok(value)
    }
}

/// Where the datums of one block are ([`DatumSchema::datum_ranges`]):
/// byte ranges within the block's data, in order.
///
/// Datums that take no bytes are not stored one by one (a block may
/// claim any number of them): their ranges are all `0..0`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DatumRanges {
    /// One range per datum, or none when the datums take no bytes.
    ranges: Vec<Range<usize>>,
    count: u64,
}

impl DatumRanges {
    /// How many datums the block holds.
    pub fn len(&self) -> u64 {
        self.count
    }

    /// Whether the block holds no datum.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The byte range of datum `i` (0-based within the block), or `None`
    /// past the last one.
    pub fn get(&self, i: u64) -> Option<Range<usize>> {
        if i >= self.count {
            return None;
        }
        Some(match self.ranges.get(i as usize) {
            Some(r) => r.clone(),
            None => 0..0,
        })
    }

    /// The ranges in order.
    pub fn iter(&self) -> impl Iterator<Item = Range<usize>> + '_ {
        (0..self.count).filter_map(|i| self.get(i))
    }
}

/// Decodes one whole datum of `schema` into the JSON form of fastavro's
/// decoded records: [`AvroValue::to_json`], with logical types converted
/// ([`DatumJson`]); `at` names the record in errors.
pub fn datum_to_json(schema: &DatumSchema, datum: &[u8], at: &Location) -> Result<Value> {
    let value = schema.decode(datum, at)?;
    serde_json::to_value(schema.json(&value)).map_err(|e| Error::Datum {
        at: at.clone().into(),
        reason: e.to_string(),
    })
}

/// A decoded datum serialized (with serde) as fastavro's decoded record
/// dumped as JSON: the form of [`AvroValue::to_json`], but record fields
/// in schema order (as fastavro's dicts keep them; a `serde_json::Value`
/// sorts its keys), map entries in the order written (a key written
/// twice at its first place, with its last value, as a Python dict keeps
/// it), and logical types converted (see the module documentation). A
/// value fastavro cannot convert fails the serialization.
///
/// ```
/// use grist_avro_tensor::{DatumSchema, Location};
///
/// let schema = DatumSchema::parse("mem", r#"{"type": "record", "name": "R", "fields": [
///     {"name": "z", "type": {"type": "int", "logicalType": "date"}},
///     {"name": "a", "type": "long"}]}"#)?;
/// let at = Location::block("mem", 0).with_record(0);
/// let value = schema.decode(&[0x02, 0x06], &at)?;
/// let text = serde_json::to_string(&schema.json(&value)).unwrap();
/// assert_eq!(text, r#"{"z":"1970-01-02","a":3}"#);
/// # Ok::<(), grist_avro_tensor::Error>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct DatumJson<'s, 'v> {
    schema: &'s Schema,
    node: usize,
    value: &'v AvroValue<'v>,
    /// The innermost record field holding the value, for errors.
    field: &'s str,
}

impl DatumSchema {
    /// `value` (a datum of this schema, from [`decode`](Self::decode)) in
    /// its serializable JSON form.
    pub fn json<'s, 'v>(&'s self, value: &'v AvroValue<'v>) -> DatumJson<'s, 'v> {
        DatumJson {
            schema: &self.schema,
            node: self.schema.root,
            value,
            field: "",
        }
    }
}

impl serde::Serialize for DatumJson<'_, '_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::{Error as _, SerializeMap, SerializeSeq};
        let at = |node: usize, value| DatumJson {
            schema: self.schema,
            node,
            value,
            field: self.field,
        };
        // Under a reader schema, a value is shown as the reader's type.
        let node = match *self.schema.node(self.node) {
            Node::Default { node, .. } => node,
            Node::Promote { reader, .. } => reader,
            _ => self.node,
        };
        if let Some(logical) = self.schema.logical(node) {
            let text =
                crate::logical::to_text(logical, self.value).map_err(|e| match self.field {
                    "" => S::Error::custom(e),
                    field => S::Error::custom(format!("field {field:?}: {e}")),
                })?;
            if let Some(text) = text {
                return s.serialize_str(&text);
            }
        }
        match (self.schema.node(node), self.value) {
            (Node::Array(items), AvroValue::Array(values)) => {
                let mut seq = s.serialize_seq(Some(values.len()))?;
                for v in values {
                    seq.serialize_element(&at(*items, v))?;
                }
                seq.end()
            }
            (Node::Map(node), AvroValue::Map(entries)) => {
                // A key written twice: its first place, its last value.
                let mut order: Vec<(String, &AvroValue<'_>)> = Vec::new();
                let mut seen = std::collections::HashMap::new();
                for (k, v) in entries {
                    let key = String::from_utf8_lossy(k).into_owned();
                    match seen.get(&key) {
                        Some(&i) => order[i] = (key, v),
                        None => {
                            seen.insert(key.clone(), order.len());
                            order.push((key, v));
                        }
                    }
                }
                let mut map = s.serialize_map(Some(order.len()))?;
                for (k, v) in order {
                    map.serialize_entry(&k, &at(*node, v))?;
                }
                map.end()
            }
            (Node::Record { fields, .. }, AvroValue::Record(values)) => {
                let mut map = s.serialize_map(Some(values.len()))?;
                // Writer fields the reader drops hold no value.
                let kept = fields
                    .iter()
                    .filter(|(_, f)| !matches!(self.schema.node(*f), Node::Skip(_)));
                for ((name, node), (_, v)) in kept.zip(values) {
                    let field = DatumJson {
                        field: name,
                        ..at(*node, v)
                    };
                    map.serialize_entry(name, &field)?;
                }
                map.end()
            }
            (Node::Union(branches), AvroValue::Union { branch, value }) => {
                at(branches[*branch], value).serialize(s)
            }
            (_, AvroValue::Array(_) | AvroValue::Map(_) | AvroValue::Record(_))
            | (_, AvroValue::Union { .. }) => {
                Err(S::Error::custom("a value that does not follow its schema"))
            }
            (_, other) => other.to_json().serialize(s),
        }
    }
}

/// How many items that take no bytes a datum may hold beyond one per byte
/// of the datum, when decoded.
const FREE_EMPTY_ITEMS: usize = 1024;

/// A walk over datums: checks them (`BUILD = false`, returning
/// [`AvroValue::Null`] for containers) or decodes them (`BUILD = true`).
struct Walk<'a> {
    schema: &'a Schema,
    r: Reader<'a>,
    /// How many more items that take no bytes a decode may build.
    empty_items: usize,
}

impl<'a> Walk<'a> {
    fn new(schema: &'a Schema, data: &'a [u8]) -> Self {
        Walk {
            schema,
            r: Reader::new(data),
            empty_items: data.len().saturating_add(FREE_EMPTY_ITEMS),
        }
    }

    /// An index (union branch, enum symbol) below `n`.
    fn index(&mut self, n: usize, reason: &'static str) -> DatumResult<usize> {
        let offset = self.r.pos;
        let i = self.r.long()?;
        usize::try_from(i)
            .ok()
            .filter(|&i| i < n)
            .ok_or(DatumError { reason, offset })
    }

    /// The item count of the next block of an array or map whose items
    /// take at least `min` bytes (0 ends the array or map).
    fn block_count<const BUILD: bool>(&mut self, min: usize) -> DatumResult<usize> {
        let offset = self.r.pos;
        let count = self.r.block_count(min)?;
        if BUILD && min == 0 {
            if count > self.empty_items {
                return Err(DatumError {
                    reason: "more items that take no bytes than the generic decoder \
                             builds for a datum of this size (1,024 plus one per byte)",
                    offset,
                });
            }
            self.empty_items -= count;
        }
        Ok(count)
    }

    /// Reads one value of node `node`: decoded with `BUILD`, else only
    /// checked.
    fn value<const BUILD: bool>(
        &mut self,
        node: usize,
        depth: usize,
    ) -> DatumResult<AvroValue<'a>> {
        if depth > MAX_DEPTH {
            return Err(self.r.err("values nest too deeply"));
        }
        let schema = self.schema;
        Ok(match schema.node(node) {
            Node::Null => AvroValue::Null,
            Node::Boolean => AvroValue::Boolean(self.r.boolean()?),
            Node::Int => AvroValue::Int(self.r.int()?),
            Node::Long => AvroValue::Long(self.r.long()?),
            Node::Float => AvroValue::Float(self.r.float()?),
            Node::Double => AvroValue::Double(self.r.double()?),
            Node::Bytes => AvroValue::Bytes(self.r.bytes()?),
            Node::String => AvroValue::String(self.r.bytes()?),
            Node::Fixed(n) => AvroValue::Fixed(self.r.take(*n)?),
            Node::Enum { symbols } => {
                let index = self.index(symbols.len(), "enum index out of range")?;
                AvroValue::Enum {
                    index,
                    symbol: &symbols[index],
                }
            }
            Node::Union(branches) => {
                let branch = self.index(branches.len(), "union branch index out of range")?;
                let value = self.value::<BUILD>(branches[branch], depth + 1)?;
                match BUILD {
                    true => AvroValue::Union {
                        branch,
                        value: Box::new(value),
                    },
                    false => AvroValue::Null,
                }
            }
            Node::Record { fields, .. } => {
                let mut out = Vec::with_capacity(if BUILD { fields.len() } else { 0 });
                for (name, f) in fields {
                    let v = self.value::<BUILD>(*f, depth + 1)?;
                    // A writer field the reader schema lacks is read, not kept.
                    if BUILD && !matches!(schema.node(*f), Node::Skip(_)) {
                        out.push((name.as_str(), v));
                    }
                }
                if BUILD {
                    AvroValue::Record(out)
                } else {
                    AvroValue::Null
                }
            }
            &Node::Array(items) => self.array::<BUILD>(items, depth)?,
            &Node::Map(values) => self.map::<BUILD>(values, depth)?,
            // Under a reader schema (`resolve.rs`):
            &Node::Skip(wire) => {
                self.value::<false>(wire, depth + 1)?;
                AvroValue::Null
            }
            Node::Default { node, datum } => {
                // The default's encoding, read by the reader's type.
                let mut default = Walk::new(schema, datum);
                default.value::<BUILD>(*node, depth + 1)?
            }
            &Node::Promote { wire, reader } => {
                let v = self.value::<BUILD>(wire, depth + 1)?;
                promote(v, schema.node(reader))
            }
            Node::EnumMap { symbols } => {
                let offset = self.r.pos;
                let index = self.index(symbols.len(), "enum index out of range")?;
                match (&symbols[index], BUILD) {
                    (_, false) => AvroValue::Null,
                    (Some((index, symbol)), true) => AvroValue::Enum {
                        index: *index,
                        symbol,
                    },
                    (None, true) => {
                        return Err(DatumError {
                            reason: "the writer's enum symbol is not in the reader's enum, \
                                     which has no default",
                            offset,
                        });
                    }
                }
            }
            &Node::Unreadable { wire, reason } => {
                if BUILD {
                    return Err(self.r.err(reason));
                }
                self.value::<false>(wire, depth + 1)?
            }
        })
    }

    fn array<const BUILD: bool>(
        &mut self,
        items: usize,
        depth: usize,
    ) -> DatumResult<AvroValue<'a>> {
        let min = self.schema.min_size[items];
        let mut out = Vec::new();
        loop {
            let n = self.block_count::<BUILD>(min)?;
            if n == 0 {
                break;
            }
            if !BUILD {
                match self.schema.node(items) {
                    // Fixed-width items are stepped over at once (the
                    // count was checked against the bytes left).
                    Node::Float | Node::Double | Node::Fixed(_) => {
                        self.r.take(n * min)?;
                        continue;
                    }
                    // Items that take no bytes: nothing to read.
                    _ if min == 0 => continue,
                    _ => {}
                }
            }
            for _ in 0..n {
                let v = self.value::<BUILD>(items, depth + 1)?;
                if BUILD {
                    out.push(v);
                }
            }
        }
        Ok(if BUILD {
            AvroValue::Array(out)
        } else {
            AvroValue::Null
        })
    }

    fn map<const BUILD: bool>(
        &mut self,
        values: usize,
        depth: usize,
    ) -> DatumResult<AvroValue<'a>> {
        // An entry is a key (at least its length byte) and a value.
        let min = 1 + self.schema.min_size[values];
        let mut out = Vec::new();
        loop {
            let n = self.block_count::<BUILD>(min)?;
            if n == 0 {
                break;
            }
            for _ in 0..n {
                let key = self.r.bytes()?;
                let v = self.value::<BUILD>(values, depth + 1)?;
                if BUILD {
                    out.push((key, v));
                }
            }
        }
        Ok(if BUILD {
            AvroValue::Map(out)
        } else {
            AvroValue::Null
        })
    }
}

/// A writer value `v` as the reader's promoted type `to`.
fn promote<'a>(v: AvroValue<'a>, to: &Node) -> AvroValue<'a> {
    match (v, to) {
        (AvroValue::Int(i), Node::Long) => AvroValue::Long(i64::from(i)),
        (AvroValue::Int(i), Node::Float) => AvroValue::Float(i as f32),
        (AvroValue::Int(i), Node::Double) => AvroValue::Double(f64::from(i)),
        (AvroValue::Long(l), Node::Float) => AvroValue::Float(l as f32),
        (AvroValue::Long(l), Node::Double) => AvroValue::Double(l as f64),
        (AvroValue::Float(x), Node::Double) => AvroValue::Double(f64::from(x)),
        (AvroValue::String(b), Node::Bytes) => AvroValue::Bytes(b),
        (AvroValue::Bytes(b), Node::String) => AvroValue::String(b),
        (v, _) => v,
    }
}

/// One datum handed out by a [`DatumReader`]: its bytes and where it is.
#[derive(Clone, Copy, Debug)]
pub struct Datum<'a> {
    /// The datum's bytes.
    pub data: &'a [u8],
    /// The file's name.
    pub file: &'a Arc<str>,
    /// The number of its block in the file (0-based).
    pub block: u64,
    /// Its record number in the file (0-based).
    pub record: u64,
}

impl Datum<'_> {
    /// Where the datum is, for errors.
    pub fn location(&self) -> Location {
        Location::block(self.file.clone(), self.block).with_record(self.record)
    }
}

/// The datums of one object container file, one at a time, each block
/// checked whole first.
///
/// A block's datums are handed out only once the whole block has been
/// walked ([`DatumSchema::datum_ranges`]): its record count matches its
/// datums and no bytes are left over. So all the records before a damaged
/// block are handed out, then the error, and none of the damaged block's.
/// After an error the reader is finished (later calls return `Ok(None)`).
///
/// ```
/// use grist_avro_tensor::{
///     BlockReader, ContainerWriter, DatumReader, ReaderOptions, WriterOptions, datum_to_json,
/// };
///
/// let mut w = ContainerWriter::new(Vec::new(), r#"{"type": "array", "items": "int"}"#,
///     WriterOptions::default())?;
/// w.append_datum(&[0x04, 0x02, 0x04, 0x00])?; // [1, 2]
/// w.append_datum(&[0x00])?; // []
/// let (file, _) = w.finish_into_inner()?;
///
/// let mut reader = DatumReader::new(BlockReader::new(&file[..], "ints.avro",
///     ReaderOptions::default())?)?;
/// let schema = reader.schema().clone();
/// let mut lengths = Vec::new();
/// while let Some(datum) = reader.next_datum()? {
///     lengths.push(datum.data.len());
///     let json = datum_to_json(&schema, datum.data, &datum.location())?;
///     assert!(json.is_array());
/// }
/// assert_eq!(lengths, [4, 1]);
/// # Ok::<(), grist_avro_tensor::Error>(())
/// ```
pub struct DatumReader<R: Read = Box<dyn Read + Send>> {
    blocks: BlockReader<R>,
    schema: DatumSchema,
    /// The block whose datums are being handed out, their ranges, and how
    /// many were handed out.
    block: Option<Block>,
    ranges: DatumRanges,
    given: u64,
    /// The number and file offset of the block being read (or failing).
    index: u64,
    offset: u64,
    done: bool,
}

impl<R: Read> fmt::Debug for DatumReader<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DatumReader")
            .field("blocks", &self.blocks)
            .field("block_index", &self.index)
            .field("block_offset", &self.offset)
            .field("datums_left", &self.ranges.len().saturating_sub(self.given))
            .finish_non_exhaustive()
    }
}

impl DatumReader {
    /// Opens `path` and reads its header (and compiles its schema).
    pub fn open(path: impl AsRef<Path>, options: ReaderOptions) -> Result<Self> {
        DatumReader::new(BlockReader::open(path, options)?)
    }

    /// Opens the file or object at `address` (a path, or an object store
    /// URL) through `storage` and reads its header (and compiles its
    /// schema).
    pub fn open_at(storage: &Storage, address: &Address, options: ReaderOptions) -> Result<Self> {
        DatumReader::new(BlockReader::open_at(storage, address, options)?)
    }
}

impl<R: Read> DatumReader<R> {
    /// Reads the datums of the blocks of `blocks`, which has read no
    /// block yet, by its header's writer schema.
    pub fn new(blocks: BlockReader<R>) -> Result<Self> {
        let schema = DatumSchema::parse(blocks.name().clone(), &blocks.header().schema_json)?;
        let offset = blocks.header_len();
        Ok(DatumReader {
            blocks,
            schema,
            block: None,
            ranges: DatumRanges::default(),
            given: 0,
            index: 0,
            offset,
            done: false,
        })
    }

    /// Decodes the datums through `reader` (see
    /// [`DatumSchema::resolve`]): [`schema`](Self::schema) becomes the
    /// file's writer schema resolved against it. Datum boundaries are the
    /// writer's either way. Fails with [`Error::Resolution`] when the
    /// file's writer schema does not resolve.
    pub fn with_reader_schema(mut self, reader: &ReaderSchema) -> Result<Self> {
        self.schema = self.schema.with_reader_schema(self.blocks.name(), reader)?;
        Ok(self)
    }

    /// The file's header.
    pub fn header(&self) -> &Arc<Header> {
        self.blocks.header()
    }

    /// The file's name, as errors give it.
    pub fn name(&self) -> &Arc<str> {
        self.blocks.name()
    }

    /// The writer schema, compiled.
    pub fn schema(&self) -> &DatumSchema {
        &self.schema
    }

    /// How many blocks were read whole (and checked).
    pub fn blocks_read(&self) -> u64 {
        self.blocks.blocks_read()
    }

    /// The number of the block being read: after an error, of the block
    /// that failed (or that would have come next).
    pub fn block_index(&self) -> u64 {
        self.index
    }

    /// The file offset of the block [`block_index`](Self::block_index)
    /// names.
    pub fn block_offset(&self) -> u64 {
        self.offset
    }

    /// The next datum, or `None` at the end of the file.
    pub fn next_datum(&mut self) -> Result<Option<Datum<'_>>> {
        while self.given >= self.ranges.len() {
            if self.done {
                return Ok(None);
            }
            if let Err(e) = self.next_block() {
                self.done = true;
                return Err(e);
            }
        }
        let Some(block) = &self.block else {
            return Ok(None);
        };
        let range = self.ranges.get(self.given).unwrap_or_default();
        let record = block.first_record + self.given;
        self.given += 1;
        Ok(Some(Datum {
            data: &block.data[range],
            file: self.blocks.name(),
            block: block.index,
            record,
        }))
    }

    /// Counts the datums not handed out yet, reading and checking every
    /// block left as [`next_datum`](Self::next_datum) would (the reader is
    /// then at the end, or finished after an error). A block of datums
    /// that take no bytes counts in constant time, whatever it claims.
    pub fn count_rest(&mut self) -> Result<u64> {
        let mut n = 0u64;
        loop {
            n = n.saturating_add(self.ranges.len().saturating_sub(self.given));
            self.given = self.ranges.len();
            if self.done {
                return Ok(n);
            }
            if let Err(e) = self.next_block() {
                self.done = true;
                return Err(e);
            }
        }
    }

    /// Reads and checks the next block (at the end of the file, marks the
    /// reader done).
    fn next_block(&mut self) -> Result<()> {
        if let Some(b) = self.block.take() {
            self.offset = b.offset + b.stored_bytes;
        }
        self.index = self.blocks.blocks_read();
        self.ranges = DatumRanges::default();
        self.given = 0;
        let Some(block) = self.blocks.next_block()? else {
            self.done = true;
            return Ok(());
        };
        (self.index, self.offset) = (block.index, block.offset);
        self.ranges = self.schema.datum_ranges(self.blocks.name(), &block)?;
        self.block = Some(block);
        Ok(())
    }
}
