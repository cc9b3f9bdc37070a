//! Avro datums one by one: where each record's bytes start and end in its
//! block, and each record decoded generically as JSON — for `cat --raw`,
//! `cat --records`, `count` and `verify`, none of them hot paths.
//!
//! grist-avro-tensor decodes blocks straight into tensors and does not
//! hand out datum boundaries, so this module walks datums itself, by the
//! writer schema compiled from the header's JSON (the physical types only:
//! logical types are read as the types underneath, as on the wire).
//!
//! Every length and count is checked against the bytes left in the block
//! before it is used: a datum can make the walker neither allocate nor
//! loop more than its block's size allows. An array or map of items that
//! take no bytes (null, empty records) may claim at most as many items as
//! there are bytes left in its block, and a block of datums that take no
//! bytes at most as many records as it has bytes: a limit of this tool.
//! Values nest at most [`MAX_DEPTH`] deep.

use std::collections::HashMap;
use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use grist_avro_tensor::{Block, BlockReader, Error, Header, Location, ReaderOptions};
use grist_tensor::json::{bytes_to_json, float_to_json};
use grist_tensor::varint;
use serde_json::{Map, Value};

/// How deep values may nest before a datum is refused.
const MAX_DEPTH: usize = 256;

/// One node of a compiled writer schema.
#[derive(Clone, Debug, PartialEq)]
enum Node {
    Null,
    Boolean,
    Int,
    Long,
    Float,
    Double,
    Bytes,
    String,
    Array(usize),
    Map(usize),
    Union(Vec<usize>),
    Record(Vec<(String, usize)>),
    Enum(Vec<String>),
    Fixed(usize),
}

/// A writer schema compiled for walking datums.
#[derive(Debug)]
pub(crate) struct DatumSchema {
    nodes: Vec<Node>,
    /// The fewest bytes a value of each node takes.
    min_size: Vec<usize>,
    /// The datum's node.
    root: usize,
}

/// Compiles schema JSON into nodes, resolving named types.
#[derive(Default)]
struct Compiler {
    nodes: Vec<Node>,
    names: HashMap<String, usize>,
}

/// The full name of a named type and the namespace its members inherit.
fn full_name(name: &str, namespace: Option<&str>, enclosing: &str) -> (String, String) {
    if let Some((ns, _)) = name.rsplit_once('.') {
        return (name.to_string(), ns.to_string());
    }
    let ns = namespace.unwrap_or(enclosing);
    if ns.is_empty() {
        (name.to_string(), String::new())
    } else {
        (format!("{ns}.{name}"), ns.to_string())
    }
}

impl Compiler {
    fn push(&mut self, node: Node) -> usize {
        self.nodes.push(node);
        self.nodes.len() - 1
    }

    /// A primitive type name, or a reference to a named type.
    fn named(&mut self, name: &str, namespace: &str) -> Result<usize, String> {
        let node = match name {
            "null" => Node::Null,
            "boolean" => Node::Boolean,
            "int" => Node::Int,
            "long" => Node::Long,
            "float" => Node::Float,
            "double" => Node::Double,
            "bytes" => Node::Bytes,
            "string" => Node::String,
            _ => {
                let (full, _) = full_name(name, None, namespace);
                return self
                    .names
                    .get(&full)
                    .or_else(|| self.names.get(name))
                    .copied()
                    .ok_or_else(|| format!("unknown type {name:?}"));
            }
        };
        Ok(self.push(node))
    }

    /// Registers the named type defined by `o` at node `id`; returns the
    /// namespace its members inherit.
    fn define(
        &mut self,
        o: &Map<String, Value>,
        namespace: &str,
        id: usize,
    ) -> Result<String, String> {
        let name = o
            .get("name")
            .and_then(Value::as_str)
            .ok_or("a named type without a name")?;
        let ns = o.get("namespace").and_then(Value::as_str);
        let (full, inner) = full_name(name, ns, namespace);
        self.names.insert(full, id);
        Ok(inner)
    }

    fn compile(&mut self, v: &Value, namespace: &str, depth: usize) -> Result<usize, String> {
        if depth > MAX_DEPTH {
            return Err("the schema nests too deeply".into());
        }
        let o = match v {
            Value::String(name) => return self.named(name, namespace),
            Value::Array(branches) => {
                let mut ids = Vec::with_capacity(branches.len());
                for b in branches {
                    ids.push(self.compile(b, namespace, depth + 1)?);
                }
                return Ok(self.push(Node::Union(ids)));
            }
            Value::Object(o) => o,
            other => return Err(format!("{other} is not a type")),
        };
        let kind = match o.get("type") {
            Some(Value::String(kind)) => kind.as_str(),
            // {"type": {...}} or {"type": [...]}: the type within.
            Some(inner) => return self.compile(inner, namespace, depth + 1),
            None => return Err("an object type without \"type\"".into()),
        };
        let items = |key: &str| o.get(key).ok_or_else(|| format!("{kind} without {key:?}"));
        match kind {
            "record" | "error" => {
                let id = self.push(Node::Record(Vec::new()));
                let inner = self.define(o, namespace, id)?;
                let fields = o
                    .get("fields")
                    .and_then(Value::as_array)
                    .ok_or("a record without fields")?;
                let mut compiled = Vec::with_capacity(fields.len());
                for f in fields {
                    let name = f
                        .get("name")
                        .and_then(Value::as_str)
                        .ok_or("a field without a name")?;
                    let ty = f.get("type").ok_or("a field without a type")?;
                    compiled.push((name.to_string(), self.compile(ty, &inner, depth + 1)?));
                }
                self.nodes[id] = Node::Record(compiled);
                Ok(id)
            }
            "enum" => {
                let symbols = o
                    .get("symbols")
                    .and_then(Value::as_array)
                    .ok_or("an enum without symbols")?
                    .iter()
                    .map(|s| s.as_str().map(str::to_string).ok_or("a non-string symbol"))
                    .collect::<Result<Vec<_>, _>>()?;
                let id = self.push(Node::Enum(symbols));
                self.define(o, namespace, id)?;
                Ok(id)
            }
            "fixed" => {
                let size = o
                    .get("size")
                    .and_then(Value::as_u64)
                    .and_then(|s| usize::try_from(s).ok())
                    .ok_or("a fixed without a valid size")?;
                let id = self.push(Node::Fixed(size));
                self.define(o, namespace, id)?;
                Ok(id)
            }
            "array" => {
                let items = self.compile(items("items")?, namespace, depth + 1)?;
                Ok(self.push(Node::Array(items)))
            }
            "map" => {
                let values = self.compile(items("values")?, namespace, depth + 1)?;
                Ok(self.push(Node::Map(values)))
            }
            // A primitive with attributes (e.g. a logical type), or a
            // reference.
            name => self.named(name, namespace),
        }
    }
}

impl DatumSchema {
    /// Compiles the writer schema (the header's `avro.schema` JSON).
    pub(crate) fn parse(schema_json: &str) -> Result<Self, String> {
        let v: Value = serde_json::from_str(schema_json).map_err(|e| e.to_string())?;
        let mut c = Compiler::default();
        let root = c.compile(&v, "", 0)?;
        let mut schema = DatumSchema {
            min_size: vec![0; c.nodes.len()],
            nodes: c.nodes,
            root,
        };
        for id in 0..schema.nodes.len() {
            schema.min_size[id] = schema.compute_min(id, 0);
        }
        Ok(schema)
    }

    /// The fewest bytes a value of `id` takes (records nested past a few
    /// levels count as 0: only a bound is needed).
    fn compute_min(&self, id: usize, depth: usize) -> usize {
        if depth > 8 {
            return 0;
        }
        match &self.nodes[id] {
            Node::Null => 0,
            Node::Float => 4,
            Node::Double => 8,
            Node::Fixed(n) => *n,
            Node::Record(fields) => fields
                .iter()
                .map(|&(_, f)| self.compute_min(f, depth + 1))
                .fold(0usize, usize::saturating_add),
            _ => 1,
        }
    }

    /// The fewest bytes a whole datum takes.
    fn datum_min_size(&self) -> usize {
        self.min_size[self.root]
    }

    /// Walks one datum at `*pos` of `data`, moving `*pos` past it; with
    /// `build`, returns its JSON form (else `Null`).
    fn walk(&self, data: &[u8], pos: &mut usize, build: bool) -> Result<Value, Fault> {
        let mut c = Cursor { data, pos: *pos };
        let v = c.value(self, self.root, 0, build);
        *pos = c.pos;
        v
    }

    /// The JSON form of a datum checked by a [`DatumReader`] (the corpus
    /// manifests' `records` form, as fastavro decodes records: enums as
    /// symbols, bytes and fixed by the byte rule, maps as objects, unions
    /// as the branch's value).
    pub(crate) fn to_json(&self, datum: &[u8]) -> Result<Value, String> {
        let mut pos = 0;
        self.walk(datum, &mut pos, true)
            .map_err(|f| format!("{} at byte {}", f.reason, f.offset))
    }
}

/// What is wrong with a datum, and where in its block.
#[derive(Debug)]
struct Fault {
    reason: &'static str,
    offset: usize,
}

/// A cursor over a block's bytes.
struct Cursor<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn fault(&self, reason: &'static str) -> Fault {
        Fault {
            reason,
            offset: self.pos,
        }
    }

    fn remaining(&self) -> usize {
        self.data.len() - self.pos
    }

    fn long(&mut self) -> Result<i64, Fault> {
        let (raw, len) = varint::decode(&self.data[self.pos..]).map_err(|r| self.fault(r))?;
        self.pos += len;
        Ok(varint::zigzag(raw))
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], Fault> {
        if n > self.remaining() {
            return Err(self.fault("length runs past the end of the block"));
        }
        let s = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn bytes(&mut self) -> Result<&'a [u8], Fault> {
        let at = self.pos;
        let len = self.long()?;
        let len = usize::try_from(len).map_err(|_| Fault {
            reason: "negative length",
            offset: at,
        })?;
        self.take(len)
    }

    /// An index (union branch, enum symbol) below `n`.
    fn index(&mut self, n: usize, reason: &'static str) -> Result<usize, Fault> {
        let at = self.pos;
        let i = self.long()?;
        usize::try_from(i)
            .ok()
            .filter(|&i| i < n)
            .ok_or(Fault { reason, offset: at })
    }

    /// The item count of the next array or map block (0 ends it), checked
    /// against the bytes left for items of at least `min_item` bytes (1
    /// for items that take none).
    fn block_count(&mut self, min_item: usize) -> Result<usize, Fault> {
        let at = self.pos;
        let count = self.long()?;
        if count < 0 {
            let size = self.long()?;
            if size < 0 {
                return Err(self.fault("negative array or map block size"));
            }
        }
        let count = count.unsigned_abs();
        if count > (self.remaining() / min_item.max(1)) as u64 {
            return Err(Fault {
                reason: "array or map block claims more items than the block holds",
                offset: at,
            });
        }
        Ok(count as usize)
    }

    /// Reads (with `build`: decodes) one value of node `id`.
    fn value(
        &mut self,
        s: &DatumSchema,
        id: usize,
        depth: usize,
        build: bool,
    ) -> Result<Value, Fault> {
        if depth > MAX_DEPTH {
            return Err(self.fault("values nest too deeply"));
        }
        let v = match &s.nodes[id] {
            Node::Null => Value::Null,
            Node::Boolean => match self.take(1)?[0] {
                b @ (0 | 1) if build => Value::Bool(b == 1),
                0 | 1 => Value::Null,
                _ => {
                    self.pos -= 1;
                    return Err(self.fault("boolean byte is neither 0 nor 1"));
                }
            },
            Node::Int => {
                let at = self.pos;
                let v = self.long()?;
                let v = i32::try_from(v).map_err(|_| Fault {
                    reason: "int out of 32-bit range",
                    offset: at,
                })?;
                Value::from(v)
            }
            Node::Long => Value::from(self.long()?),
            // Skipping, fixed-width values are only stepped over.
            Node::Float | Node::Double | Node::Fixed(_) if !build => {
                self.take(s.min_size[id])?;
                Value::Null
            }
            Node::Float => {
                let b = self.take(4)?;
                float_to_json(f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64)
            }
            Node::Double => {
                let b: [u8; 8] = self.take(8)?.try_into().unwrap_or_default();
                float_to_json(f64::from_le_bytes(b))
            }
            Node::Bytes | Node::String => {
                let b = self.bytes()?;
                if build { bytes_to_json(b) } else { Value::Null }
            }
            Node::Fixed(n) => bytes_to_json(self.take(*n)?),
            Node::Enum(symbols) => {
                let i = self.index(symbols.len(), "enum index out of range")?;
                if build {
                    Value::String(symbols[i].clone())
                } else {
                    Value::Null
                }
            }
            Node::Union(branches) => {
                let i = self.index(branches.len(), "union branch index out of range")?;
                return self.value(s, branches[i], depth + 1, build);
            }
            Node::Record(fields) => {
                let mut out = Map::new();
                for (name, f) in fields {
                    let v = self.value(s, *f, depth + 1, build)?;
                    if build {
                        out.insert(name.clone(), v);
                    }
                }
                Value::Object(out)
            }
            &Node::Array(items) => {
                let mut out = Vec::new();
                loop {
                    let n = self.block_count(s.min_size[items])?;
                    if n == 0 {
                        break;
                    }
                    if !build
                        && matches!(s.nodes[items], Node::Float | Node::Double | Node::Fixed(_))
                    {
                        // The count was checked against the bytes left.
                        self.take(n * s.min_size[items])?;
                        continue;
                    }
                    for _ in 0..n {
                        let v = self.value(s, items, depth + 1, build)?;
                        if build {
                            out.push(v);
                        }
                    }
                }
                Value::Array(out)
            }
            &Node::Map(values) => {
                let mut out = Map::new();
                loop {
                    // An entry is a key (at least its length byte) and a
                    // value.
                    let n = self.block_count(1 + s.min_size[values])?;
                    if n == 0 {
                        break;
                    }
                    for _ in 0..n {
                        let key = self.bytes()?;
                        let v = self.value(s, values, depth + 1, build)?;
                        if build {
                            out.insert(String::from_utf8_lossy(key).into_owned(), v);
                        }
                    }
                }
                Value::Object(out)
            }
        };
        Ok(if build { v } else { Value::Null })
    }
}

/// The datums of one object container file, one at a time.
///
/// A block's datums are handed out only once the whole block has been
/// walked: its record count matches its datums and no bytes are left
/// over. So the records before a damaged block are all handed out, and
/// none of the damaged block's.
pub(crate) struct DatumReader {
    blocks: BlockReader<File>,
    schema: Arc<DatumSchema>,
    /// The block being handed out.
    block: Option<Block>,
    /// Where its next datum starts, and how many were handed out.
    pos: usize,
    given: u64,
    /// The number and offset of the block being read (or failing).
    at: (u64, u64),
}

impl DatumReader {
    /// Opens `path` and reads its header.
    pub(crate) fn open(path: &Path) -> Result<Self, Error> {
        let blocks = BlockReader::open(path, ReaderOptions::default())?;
        let schema = DatumSchema::parse(&blocks.header().schema_json).map_err(|reason| {
            Error::BadHeader {
                file: blocks.name().clone(),
                reason: format!("avro.schema: {reason}"),
            }
        })?;
        let at = (0, blocks.header_len());
        Ok(DatumReader {
            blocks,
            schema: Arc::new(schema),
            block: None,
            pos: 0,
            given: 0,
            at,
        })
    }

    /// The file's header.
    pub(crate) fn header(&self) -> &Arc<Header> {
        self.blocks.header()
    }

    /// The writer schema, compiled.
    pub(crate) fn schema(&self) -> &Arc<DatumSchema> {
        &self.schema
    }

    /// The number and file offset of the block being read: after an
    /// error, the block that failed.
    pub(crate) fn block_position(&self) -> (u64, u64) {
        self.at
    }

    /// How many blocks were read whole.
    pub(crate) fn blocks_read(&self) -> u64 {
        self.blocks.blocks_read()
    }

    /// The next datum's bytes, or `None` at the end of the file.
    pub(crate) fn next_datum(&mut self) -> Result<Option<&[u8]>, Error> {
        while self
            .block
            .as_ref()
            .is_none_or(|b| self.given >= b.record_count)
        {
            let next = self.at_next();
            self.block = None;
            self.at = (self.blocks.blocks_read(), next);
            let Some(block) = self.blocks.next_block()? else {
                return Ok(None);
            };
            self.at = (block.index, block.offset);
            self.check(&block)?;
            self.block = Some(block);
            self.pos = 0;
            self.given = 0;
        }
        let Some(block) = &self.block else {
            return Ok(None);
        };
        let start = self.pos;
        // The block was walked whole when it was loaded: this cannot fail,
        // but say where if it does.
        self.schema
            .walk(&block.data, &mut self.pos, false)
            .map_err(|f| datum_error(self.blocks.name(), block, self.given, f))?;
        self.given += 1;
        Ok(Some(&block.data[start..self.pos]))
    }

    /// The offset of the block after the current one.
    fn at_next(&self) -> u64 {
        match &self.block {
            Some(b) => b.offset + b.stored_bytes,
            None => self.at.1,
        }
    }

    /// Walks every datum of `block`: its count must match its bytes.
    fn check(&self, block: &Block) -> Result<(), Error> {
        let name = self.blocks.name();
        let min = self.schema.datum_min_size().max(1) as u64;
        if block.record_count > block.data.len() as u64 / min {
            return Err(Error::BadBlock {
                at: Location::block(name.clone(), block.index),
                reason: format!(
                    "{} records claimed in {} bytes of data",
                    block.record_count,
                    block.data.len()
                ),
            });
        }
        let mut pos = 0;
        for i in 0..block.record_count {
            self.schema
                .walk(&block.data, &mut pos, false)
                .map_err(|f| datum_error(name, block, i, f))?;
        }
        if pos != block.data.len() {
            return Err(Error::Datum {
                at: Location::block(name.clone(), block.index),
                reason: format!(
                    "{} bytes left after the block's {} records",
                    block.data.len() - pos,
                    block.record_count
                ),
            });
        }
        Ok(())
    }
}

/// The error for record `i` of `block`.
fn datum_error(file: &Arc<str>, block: &Block, i: u64, f: Fault) -> Error {
    Error::Datum {
        at: Location::block(file.clone(), block.index).with_record(block.first_record + i),
        reason: format!("{} at byte {} of the block", f.reason, f.offset),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema(v: Value) -> DatumSchema {
        DatumSchema::parse(&v.to_string()).unwrap()
    }

    #[test]
    fn named_types_namespaces_and_recursion() {
        let s = schema(json!({
            "type": "record", "name": "a.List", "fields": [
                {"name": "v", "type": {"type": "fixed", "name": "F2", "size": 2}},
                {"name": "w", "type": "a.F2"},
                {"name": "next", "type": ["null", "List"]}
            ]
        }));
        // [0x41 0x42] [0x43 0x44] branch 1 → [0x45 0x46] [0x47 0x48] null
        let datum = [0x41, 0x42, 0x43, 0x44, 2, 0x45, 0x46, 0x47, 0x48, 0, 0xff];
        let mut pos = 0;
        let v = s.walk(&datum, &mut pos, true).unwrap();
        assert_eq!(pos, 10);
        assert_eq!(
            v,
            json!({"v": "AB", "w": "CD", "next": {"v": "EF", "w": "GH", "next": null}})
        );
        assert_eq!(s.datum_min_size(), 5);
    }

    #[test]
    fn values_in_the_manifest_form() {
        let s = schema(json!({"type": "record", "name": "R", "fields": [
            {"name": "f", "type": "float"},
            {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B"]}},
            {"name": "m", "type": {"type": "map", "values": "long"}},
            {"name": "b", "type": "bytes"},
            {"name": "t", "type": {"type": "long", "logicalType": "timestamp-millis"}}
        ]}));
        let mut datum = f32::NAN.to_le_bytes().to_vec();
        datum.extend([2, 2, 2, b'k', 6, 0, 2, 0xff, 3]);
        let v = s.to_json(&datum).unwrap();
        assert_eq!(
            v,
            json!({"f": "NaN", "e": "B", "m": {"k": 3}, "b": {"base64": "/w=="}, "t": -2})
        );
    }

    #[test]
    fn hostile_datums_fail_without_allocating() {
        let s = schema(json!({"type": "array", "items": "null"}));
        // 2^62 nulls claimed in a 10-byte block.
        let mut pos = 0;
        let f = s
            .walk(
                &[0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01],
                &mut pos,
                true,
            )
            .unwrap_err();
        assert!(f.reason.contains("more items"), "{f:?}");
        let s = schema(json!("string"));
        let f = s
            .walk(&[0xfe, 0xff, 0xff, 0xff, 0x0f], &mut 0, true)
            .unwrap_err();
        assert!(f.reason.contains("past the end"), "{f:?}");
        let f = s.walk(&[0x01], &mut 0, true).unwrap_err();
        assert_eq!(f.reason, "negative length");
        let s = schema(json!(["null", "int"]));
        assert!(s.walk(&[4], &mut 0, false).is_err());
        let s = schema(json!("boolean"));
        assert!(s.walk(&[2], &mut 0, false).is_err());
        let s = schema(json!("int"));
        assert!(
            s.walk(&[0xff, 0xff, 0xff, 0xff, 0x7f], &mut 0, false)
                .is_err()
        );
    }

    #[test]
    fn bad_schemas_are_errors() {
        for bad in [
            json!("Unknown"),
            json!({"type": "record", "name": "R"}),
            json!({"type": "fixed", "name": "F"}),
            json!({"type": "array"}),
            json!(3),
        ] {
            assert!(DatumSchema::parse(&bad.to_string()).is_err(), "{bad}");
        }
    }
}
