//! Schema resolution: a file's writer schema read through one reader
//! schema, by the Avro specification's rules (1.11, "Schema Resolution").
//!
//! [`resolve`] turns the pair into one [`Schema`] that the decode plans
//! compile from as they compile from a writer schema alone. Its arena holds
//! the writer's nodes first (same indices), then the reader's (shifted),
//! then the nodes resolution adds, which say what differs from the writer:
//!
//! * a record in writer field order, each field under the reader's name; a
//!   writer field the reader lacks is [`Node::Skip`], a reader field the
//!   writer lacks is [`Node::Default`] (its default, encoded once);
//! * [`Node::Promote`] for int → long → float → double and string ↔ bytes;
//! * [`Node::EnumMap`] for enums whose symbols moved or are missing;
//! * unions resolved branch by branch, a writer branch the reader cannot
//!   take being [`Node::Unreadable`] (an error when met).
//!
//! Where the reader asks for exactly what the writer wrote, the resolved
//! node *is* the writer's node, so a reader schema equal to the writer's
//! yields the writer's plan, hot loops and all.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

use crate::error::{Error, Result};
use crate::schema::{FieldMeta, Named, Node, Schema, unqualified};

/// Why a writer value cannot be read: a writer union branch that no reader
/// branch (or the reader's type) matches.
const NO_BRANCH: &str = "the writer's union branch matches nothing in the reader schema";

/// A reader schema: the one schema a dataset's files are read through,
/// whatever schema each was written with.
///
/// Parsed (and validated with apache-avro) once; cloning is cheap.
///
/// ```
/// use grist_avro_tensor::ReaderSchema;
///
/// let reader = ReaderSchema::parse(
///     r#"{"type": "record", "name": "R", "fields": [
///         {"name": "id", "type": "long"},
///         {"name": "score", "type": "double", "default": 0.0}]}"#,
/// )?;
/// assert_eq!(reader.json()["name"], "R");
/// # Ok::<(), grist_avro_tensor::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct ReaderSchema {
    json: Arc<Value>,
    schema: Arc<Schema>,
}

impl ReaderSchema {
    /// Parses a reader schema from its JSON text. An invalid schema is
    /// [`Error::BadReaderSchema`].
    pub fn parse(text: &str) -> Result<Self> {
        let json: Value = serde_json::from_str(text).map_err(|e| Error::BadReaderSchema {
            reason: e.to_string(),
        })?;
        Self::build(json, text)
    }

    /// A reader schema from a JSON value: the schema itself (an object, an
    /// array for a union, a string for a primitive or a name), or a JSON
    /// string holding the schema's text, as a spec file's
    /// `"reader_schema"` may give it.
    pub fn from_value(value: &Value) -> Result<Self> {
        if let Value::String(text) = value {
            if let Ok(inner @ (Value::Object(_) | Value::Array(_))) =
                serde_json::from_str::<Value>(text)
            {
                return Self::build(inner, text);
            }
        }
        Self::build(value.clone(), &value.to_string())
    }

    fn build(json: Value, text: &str) -> Result<Self> {
        let schema = Schema::parse(text).map_err(|reason| Error::BadReaderSchema { reason })?;
        Ok(ReaderSchema {
            json: Arc::new(json),
            schema: Arc::new(schema),
        })
    }

    /// The schema's JSON.
    pub fn json(&self) -> &Value {
        &self.json
    }

    pub(crate) fn schema(&self) -> &Schema {
        &self.schema
    }
}

/// Resolves the writer schema of `file` against `reader`. Fails, naming
/// the file and the field path, where the specification forbids the
/// pairing (names or types that do not match, a reader field absent from
/// the writer without a default, a default that does not fit its type, a
/// union none of whose branches can be read).
pub(crate) fn resolve(writer: &Schema, reader: &ReaderSchema, file: &Arc<str>) -> Result<Schema> {
    let r = reader.schema();
    let offset = writer.nodes.len();
    let mut nodes = writer.nodes.clone();
    nodes.extend(r.nodes.iter().map(|n| shift(n, offset)));
    let mut named = writer.named.clone();
    named.extend(r.named.iter().map(|(&i, n)| (i + offset, n.clone())));
    let mut resolver = Resolver {
        w: writer,
        r,
        offset,
        nodes,
        memo: HashMap::new(),
    };
    let (root, _) = resolver
        .resolve(writer.root, r.root)
        .map_err(|m| m.into_error(file))?;
    let mut schema = Schema::new(resolver.nodes, root, named);
    schema.resolved = true;
    Ok(schema)
}

/// A reader node moved to `offset` in the resolved arena.
fn shift(n: &Node, offset: usize) -> Node {
    match n {
        Node::Array(i) => Node::Array(i + offset),
        Node::Map(i) => Node::Map(i + offset),
        Node::Union(b) => Node::Union(b.iter().map(|i| i + offset).collect()),
        Node::Record { name, fields } => Node::Record {
            name: name.clone(),
            fields: fields
                .iter()
                .map(|(f, i)| (f.clone(), i + offset))
                .collect(),
        },
        other => other.clone(),
    }
}

/// A resolution failure on its way up: the field path (innermost first)
/// and the reason.
struct Mismatch {
    path: Vec<String>,
    reason: String,
}

impl Mismatch {
    fn new(reason: String) -> Self {
        Mismatch {
            path: Vec::new(),
            reason,
        }
    }

    fn at(mut self, segment: impl Into<String>) -> Self {
        self.path.push(segment.into());
        self
    }

    fn into_error(self, file: &Arc<str>) -> Error {
        let mut field = String::new();
        for segment in self.path.iter().rev() {
            if !field.is_empty() && !segment.starts_with('[') {
                field.push('.');
            }
            field.push_str(segment);
        }
        Error::Resolution {
            file: file.clone(),
            field,
            reason: self.reason,
        }
    }
}

type Resolved = std::result::Result<(usize, bool), Mismatch>;

enum Memo {
    /// A record being resolved: its placeholder.
    Open(usize),
    /// Resolved: the node, and whether it is the writer's own.
    Done(usize, bool),
}

struct Resolver<'a> {
    w: &'a Schema,
    r: &'a Schema,
    /// Where the reader's nodes start in `nodes`.
    offset: usize,
    nodes: Vec<Node>,
    /// Record pairs resolved or being resolved (recursive types).
    memo: HashMap<(usize, usize), Memo>,
}

impl Resolver<'_> {
    fn push(&mut self, n: Node) -> usize {
        self.nodes.push(n);
        self.nodes.len() - 1
    }

    fn writer_name(&self, w: usize) -> &str {
        self.w.named.get(&w).map_or("", |n| n.full_name.as_str())
    }

    /// Whether reader named type `r` matches writer named type `w` by name.
    fn names_match(&self, w: usize, r: usize) -> bool {
        let writer = self.writer_name(w);
        match self.r.named.get(&r) {
            Some(named) => named.matches(writer),
            None => false,
        }
    }

    /// Whether writer node `w` matches reader node `r` at the top (the
    /// specification's "match"; fastavro's `match_types`): the same
    /// primitive or a promotion, named types of matching names (fixed of
    /// equal size), arrays and maps whose items match, a union on either
    /// side (some branch of a reader union).
    fn matches(&self, w: usize, r: usize) -> bool {
        match (self.w.node(w), self.r.node(r)) {
            (Node::Union(_), _) => true,
            (_, Node::Union(b)) => b.iter().any(|&rb| self.matches(w, rb)),
            (Node::Array(wi), Node::Array(ri)) | (Node::Map(wi), Node::Map(ri)) => {
                self.matches(*wi, *ri)
            }
            (Node::Record { .. }, Node::Record { .. }) | (Node::Enum { .. }, Node::Enum { .. }) => {
                self.names_match(w, r)
            }
            (Node::Fixed(a), Node::Fixed(b)) => a == b && self.names_match(w, r),
            (wn, rn) => wn == rn || promotes(wn, rn),
        }
    }

    /// Resolves writer node `w` against reader node `r` (indices in their
    /// own schemas): the resolved node, and whether it is `w` itself.
    fn resolve(&mut self, w: usize, r: usize) -> Resolved {
        let (wn, rn) = (self.w.node(w), self.r.node(r));
        match (wn, rn) {
            (Node::Union(wb), _) => {
                let reader_union = matches!(rn, Node::Union(_));
                let mut branches = Vec::with_capacity(wb.len());
                let mut identity = reader_union;
                let mut readable = false;
                for &b in wb {
                    let target = if reader_union {
                        self.first_branch(b, r)
                    } else {
                        self.matches(b, r).then_some(r)
                    };
                    match target {
                        Some(t) => {
                            let (n, id) = self.resolve(b, t)?;
                            identity &= id;
                            readable = true;
                            branches.push(n);
                        }
                        None => {
                            identity = false;
                            branches.push(self.push(Node::Unreadable {
                                wire: b,
                                reason: NO_BRANCH,
                            }));
                        }
                    }
                }
                if !readable {
                    return Err(Mismatch::new(format!(
                        "no branch of the writer's union {} can be read as the reader's {}",
                        self.w.type_name(w),
                        self.r.type_name(r)
                    )));
                }
                if identity {
                    return Ok((w, true));
                }
                Ok((self.push(Node::Union(branches)), false))
            }
            (_, Node::Union(_)) => match self.first_branch(w, r) {
                Some(t) => {
                    let (n, _) = self.resolve(w, t)?;
                    // The value is the branch's, not a union's.
                    Ok((n, false))
                }
                None => Err(Mismatch::new(format!(
                    "the writer's {} matches no branch of the reader's union {}",
                    self.w.type_name(w),
                    self.r.type_name(r)
                ))),
            },
            (Node::Record { .. }, Node::Record { .. }) => self.record(w, r),
            (Node::Enum { symbols: ws }, Node::Enum { symbols: rs }) => {
                if !self.names_match(w, r) {
                    return Err(self.name_mismatch(w, r));
                }
                let default = self
                    .r
                    .named
                    .get(&r)
                    .and_then(|n| n.enum_default.as_ref())
                    .and_then(|d| rs.iter().position(|s| s == d));
                let map: Vec<Option<(usize, String)>> = ws
                    .iter()
                    .map(|s| {
                        rs.iter()
                            .position(|x| x == s)
                            .or(default)
                            .map(|i| (i, rs[i].clone()))
                    })
                    .collect();
                // The writer's own enum when each symbol reads as itself at
                // its own index (a symbol read as the default does not).
                if ws.iter().enumerate().all(|(i, s)| rs.get(i) == Some(s)) {
                    return Ok((w, true));
                }
                Ok((self.push(Node::EnumMap { symbols: map }), false))
            }
            (Node::Fixed(a), Node::Fixed(b)) => {
                if !self.names_match(w, r) {
                    return Err(self.name_mismatch(w, r));
                }
                if a != b {
                    return Err(Mismatch::new(format!(
                        "the writer's fixed has {a} bytes, the reader's {b}"
                    )));
                }
                Ok((w, true))
            }
            (&Node::Array(wi), &Node::Array(ri)) => {
                let (n, id) = self.resolve(wi, ri).map_err(|m| m.at("[*]"))?;
                if id {
                    return Ok((w, true));
                }
                Ok((self.push(Node::Array(n)), false))
            }
            (&Node::Map(wv), &Node::Map(rv)) => {
                let (n, id) = self.resolve(wv, rv).map_err(|m| m.at("['*']"))?;
                if id {
                    return Ok((w, true));
                }
                Ok((self.push(Node::Map(n)), false))
            }
            (a, b) if a == b => Ok((w, true)),
            (a, b) if promotes(a, b) => {
                let reader = r + self.offset;
                Ok((self.push(Node::Promote { wire: w, reader }), false))
            }
            _ => Err(Mismatch::new(format!(
                "the writer's {} cannot be read as the reader's {}",
                self.w.type_name(w),
                self.r.type_name(r)
            ))),
        }
    }

    /// The first branch of reader union `r` that writer node `w` matches.
    fn first_branch(&self, w: usize, r: usize) -> Option<usize> {
        let Node::Union(branches) = self.r.node(r) else {
            return None;
        };
        branches.iter().copied().find(|&b| self.matches(w, b))
    }

    fn name_mismatch(&self, w: usize, r: usize) -> Mismatch {
        let reader = self.r.named.get(&r).map_or("", |n| n.full_name.as_str());
        Mismatch::new(format!(
            "the writer's {} {:?} does not match the reader's {:?} (names differ and no alias \
             of the reader's names it)",
            self.w.type_name(w),
            self.writer_name(w),
            reader
        ))
    }

    fn record(&mut self, w: usize, r: usize) -> Resolved {
        match self.memo.get(&(w, r)) {
            Some(Memo::Done(n, id)) => return Ok((*n, *id)),
            // A recursive type: its resolution is under way.
            Some(Memo::Open(p)) => return Ok((*p, false)),
            None => {}
        }
        if !self.names_match(w, r) {
            return Err(self.name_mismatch(w, r));
        }
        let (Node::Record { fields: wf, .. }, Node::Record { name, fields: rf }) =
            (self.w.node(w), self.r.node(r))
        else {
            unreachable!("record() is called on two records");
        };
        let (wf, rf, name) = (wf.clone(), rf.clone(), name.clone());
        let metas: Vec<FieldMeta> = self
            .r
            .named
            .get(&r)
            .map(|n: &Named| n.fields.clone())
            .unwrap_or_default();
        let meta = |j: usize| metas.get(j).cloned().unwrap_or_default();
        let placeholder = self.push(Node::Null);
        self.memo.insert((w, r), Memo::Open(placeholder));
        let mut taken = vec![false; rf.len()];
        let mut identity = wf.len() == rf.len();
        let mut fields = Vec::with_capacity(wf.len().max(rf.len()));
        for (i, (wname, wnode)) in wf.iter().enumerate() {
            // By name first, then by a reader alias of the writer's name.
            let j = rf
                .iter()
                .position(|(rname, _)| rname == wname)
                .filter(|&j| !taken[j])
                .or_else(|| {
                    (0..rf.len()).find(|&j| !taken[j] && meta(j).aliases.iter().any(|a| a == wname))
                });
            match j {
                Some(j) => {
                    taken[j] = true;
                    let (rname, rnode) = &rf[j];
                    let (n, id) = self
                        .resolve(*wnode, *rnode)
                        .map_err(|m| m.at(rname.clone()))?;
                    identity &= id && i == j && rname == wname;
                    fields.push((rname.clone(), n));
                }
                None => {
                    identity = false;
                    fields.push((wname.clone(), self.push(Node::Skip(*wnode))));
                }
            }
        }
        for (j, (rname, rnode)) in rf.iter().enumerate() {
            if taken[j] {
                continue;
            }
            identity = false;
            let Some(default) = meta(j).default else {
                return Err(Mismatch::new(
                    "the reader's field has no default and the writer's record has no such \
                     field (nor one of its aliases)"
                        .into(),
                )
                .at(rname.clone()));
            };
            let mut datum = Vec::new();
            encode_default(self.r, *rnode, &default, 0, &mut datum).map_err(|reason| {
                Mismatch::new(format!(
                    "its default {default} does not fit its type: {reason}"
                ))
                .at(rname.clone())
            })?;
            let node = rnode + self.offset;
            fields.push((rname.clone(), self.push(Node::Default { node, datum })));
        }
        if identity {
            // Nothing differs below: the writer's own record (the nodes
            // pushed since the placeholder are unused).
            self.nodes.truncate(placeholder);
            self.memo.insert((w, r), Memo::Done(w, true));
            return Ok((w, true));
        }
        let unq = unqualified(&name).to_string();
        self.nodes[placeholder] = Node::Record { name: unq, fields };
        self.memo.insert((w, r), Memo::Done(placeholder, false));
        Ok((placeholder, false))
    }
}

/// Whether a writer primitive `w` is promoted to reader primitive `r`.
fn promotes(w: &Node, r: &Node) -> bool {
    matches!(
        (w, r),
        (Node::Int, Node::Long | Node::Float | Node::Double)
            | (Node::Long, Node::Float | Node::Double)
            | (Node::Float, Node::Double)
            | (Node::String, Node::Bytes)
            | (Node::Bytes, Node::String)
    )
}

fn put_long(out: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        out.push(z as u8 | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

/// A JSON string of code points 0-255 as bytes (how Avro writes `bytes`
/// and `fixed` defaults).
fn latin1(s: &str) -> std::result::Result<Vec<u8>, String> {
    s.chars()
        .map(|c| u8::try_from(u32::from(c)).map_err(|_| format!("{c:?} is not a byte")))
        .collect()
}

/// Encodes the JSON default `v` of reader node `node` in Avro binary.
/// A union's default is of its first branch that it fits (Avro 1.11 asks
/// for the first branch; 1.12, like fastavro, takes any).
fn encode_default(
    schema: &Schema,
    node: usize,
    v: &Value,
    depth: usize,
    out: &mut Vec<u8>,
) -> std::result::Result<(), String> {
    if depth > crate::datum::MAX_DEPTH {
        return Err("nests too deeply".into());
    }
    let wrong = || format!("{v} is not a {}", schema.type_name(node));
    match (schema.node(node), v) {
        (Node::Null, Value::Null) => {}
        (Node::Boolean, Value::Bool(b)) => out.push(u8::from(*b)),
        (Node::Int, Value::Number(n)) => {
            let i = n
                .as_i64()
                .and_then(|i| i32::try_from(i).ok())
                .ok_or_else(wrong)?;
            put_long(out, i64::from(i));
        }
        (Node::Long, Value::Number(n)) => put_long(out, n.as_i64().ok_or_else(wrong)?),
        (Node::Float, Value::Number(n)) => {
            out.extend((n.as_f64().ok_or_else(wrong)? as f32).to_le_bytes());
        }
        (Node::Double, Value::Number(n)) => out.extend(n.as_f64().ok_or_else(wrong)?.to_le_bytes()),
        (Node::String, Value::String(s)) => {
            put_long(out, s.len() as i64);
            out.extend(s.as_bytes());
        }
        (Node::Bytes, Value::String(s)) => {
            let b = latin1(s)?;
            put_long(out, b.len() as i64);
            out.extend(b);
        }
        (Node::Fixed(n), Value::String(s)) => {
            let b = latin1(s)?;
            if b.len() != *n {
                return Err(format!("{v} has {} bytes, the fixed {n}", b.len()));
            }
            out.extend(b);
        }
        (Node::Enum { symbols }, Value::String(s)) => {
            let i = symbols.iter().position(|x| x == s).ok_or_else(wrong)?;
            put_long(out, i as i64);
        }
        (&Node::Array(items), Value::Array(a)) => {
            if !a.is_empty() {
                put_long(out, a.len() as i64);
                for item in a {
                    encode_default(schema, items, item, depth + 1, out)?;
                }
            }
            out.push(0);
        }
        (&Node::Map(values), Value::Object(m)) => {
            if !m.is_empty() {
                put_long(out, m.len() as i64);
                for (k, item) in m {
                    put_long(out, k.len() as i64);
                    out.extend(k.as_bytes());
                    encode_default(schema, values, item, depth + 1, out)?;
                }
            }
            out.push(0);
        }
        (Node::Union(branches), _) => {
            let mut last = None;
            for (i, &b) in branches.iter().enumerate() {
                let mut one = Vec::new();
                match encode_default(schema, b, v, depth + 1, &mut one) {
                    Ok(()) => {
                        put_long(out, i as i64);
                        out.extend(one);
                        return Ok(());
                    }
                    Err(e) => last = Some(e),
                }
            }
            return Err(last.unwrap_or_else(wrong));
        }
        (Node::Record { fields, .. }, Value::Object(m)) => {
            let metas = schema
                .named
                .get(&node)
                .map(|n| &n.fields[..])
                .unwrap_or(&[]);
            for (j, (name, f)) in fields.iter().enumerate() {
                let value = m
                    .get(name)
                    .or_else(|| metas.get(j).and_then(|meta| meta.default.as_ref()))
                    .ok_or_else(|| format!("field {name:?} is missing and has no default"))?;
                encode_default(schema, *f, value, depth + 1, out)?;
            }
        }
        _ => return Err(wrong()),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolved(writer: &str, reader: &str) -> Result<Schema> {
        let w = Schema::parse(writer).unwrap();
        let r = ReaderSchema::parse(reader).unwrap();
        resolve(&w, &r, &Arc::from("f.avro"))
    }

    fn record(fields: &str) -> String {
        format!(r#"{{"type": "record", "name": "R", "fields": [{fields}]}}"#)
    }

    fn error(writer: &str, reader: &str) -> (String, String) {
        match resolved(writer, reader) {
            Err(Error::Resolution {
                file,
                field,
                reason,
            }) => {
                assert_eq!(&*file, "f.avro");
                (field, reason)
            }
            other => panic!("expected a resolution error, got {other:?}"),
        }
    }

    #[test]
    fn an_equal_reader_schema_resolves_to_the_writer_itself() {
        let text = record(
            r#"{"name": "a", "type": "long"},
               {"name": "b", "type": {"type": "array", "items": "float"}},
               {"name": "c", "type": ["null", {"type": "enum", "name": "E", "symbols": ["x"]}]},
               {"name": "next", "type": ["null", "R"]}"#,
        );
        let w = Schema::parse(&text).unwrap();
        let s = resolved(&text, &text).unwrap();
        // The recursive record is resolved anew (its fields may point back
        // at it); everything else is the writer's.
        let Node::Record { fields, .. } = s.node(s.root) else {
            panic!()
        };
        let Node::Record { fields: wf, .. } = w.node(w.root) else {
            panic!()
        };
        assert_eq!(fields[..3], wf[..3]);
    }

    #[test]
    fn a_flat_equal_schema_is_the_writer_root() {
        let text = record(r#"{"name": "a", "type": "long"}, {"name": "b", "type": "string"}"#);
        let w = Schema::parse(&text).unwrap();
        let s = resolved(&text, &text).unwrap();
        assert_eq!(s.root, w.root);
        assert_eq!(s.nodes.len(), w.nodes.len() * 2);
    }

    #[test]
    fn fields_are_matched_by_name_and_alias_skipped_and_defaulted() {
        let s = resolved(
            &record(
                r#"{"name": "gone", "type": "string"}, {"name": "old", "type": "int"},
                   {"name": "b", "type": "float"}"#,
            ),
            &record(
                r#"{"name": "b", "type": "double"},
                   {"name": "new", "aliases": ["old"], "type": "long"},
                   {"name": "added", "type": "int", "default": 7}"#,
            ),
        )
        .unwrap();
        let Node::Record { fields, .. } = s.node(s.root) else {
            panic!()
        };
        let names: Vec<&str> = fields.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["gone", "new", "b", "added"]);
        assert!(matches!(s.node(fields[0].1), Node::Skip(_)));
        assert!(matches!(s.node(fields[1].1), Node::Promote { .. }));
        assert!(matches!(s.node(fields[2].1), Node::Promote { .. }));
        let Node::Default { datum, .. } = s.node(fields[3].1) else {
            panic!()
        };
        assert_eq!(datum, &[14]);
    }

    #[test]
    fn a_missing_field_without_default_names_the_field() {
        let (field, reason) = error(
            &record(r#"{"name": "a", "type": "long"}"#),
            &record(r#"{"name": "a", "type": "long"}, {"name": "b", "type": "long"}"#),
        );
        assert_eq!(field, "b");
        assert!(reason.contains("no default"), "{reason}");
    }

    #[test]
    fn incompatible_types_name_the_nested_field() {
        let inner = |t: &str| {
            format!(
                r#"{{"name": "outer", "type": {{"type": "record", "name": "In", "fields": [
                    {{"name": "xs", "type": {{"type": "array", "items": "{t}"}}}}]}}}}"#
            )
        };
        let (field, reason) = error(&record(&inner("double")), &record(&inner("float")));
        assert_eq!(field, "outer.xs[*]");
        assert!(
            reason.contains("double") && reason.contains("float"),
            "{reason}"
        );
        // No demotion, and no string from a number.
        for (w, r) in [("long", "int"), ("float", "long"), ("int", "string")] {
            let f = |t: &str| record(&format!(r#"{{"name": "v", "type": "{t}"}}"#));
            assert_eq!(error(&f(w), &f(r)).0, "v");
        }
    }

    #[test]
    fn a_union_without_a_matching_branch_is_refused() {
        let f = |t: &str| record(&format!(r#"{{"name": "v", "type": {t}}}"#));
        let (field, reason) = error(&f(r#""string""#), &f(r#"["null", "long"]"#));
        assert_eq!(field, "v");
        assert!(reason.contains("no branch"), "{reason}");
        let (field, _) = error(&f(r#"["null", "string"]"#), &f(r#""long""#));
        assert_eq!(field, "v");
        // Some branch readable: the others fail only when met.
        let s = resolved(&f(r#"["null", "string"]"#), &f(r#""string""#)).unwrap();
        let Node::Record { fields, .. } = s.node(s.root) else {
            panic!()
        };
        let Node::Union(b) = s.node(fields[0].1) else {
            panic!()
        };
        assert!(matches!(s.node(b[0]), Node::Unreadable { .. }));
    }

    #[test]
    fn enums_map_symbols_and_fall_back_to_the_default() {
        let e = |symbols: &str, default: &str| {
            record(&format!(
                r#"{{"name": "e", "type": {{"type": "enum", "name": "E", "symbols": {symbols}{default}}}}}"#
            ))
        };
        let s = resolved(
            &e(r#"["a", "b", "c"]"#, ""),
            &e(r#"["c", "a", "z"]"#, r#", "default": "z""#),
        )
        .unwrap();
        let Node::Record { fields, .. } = s.node(s.root) else {
            panic!()
        };
        let Node::EnumMap { symbols } = s.node(fields[0].1) else {
            panic!()
        };
        assert_eq!(
            symbols,
            &[
                Some((1, "a".into())),
                Some((2, "z".into())),
                Some((0, "c".into()))
            ]
        );
        let s = resolved(&e(r#"["a", "b"]"#, ""), &e(r#"["a"]"#, "")).unwrap();
        let Node::Record { fields, .. } = s.node(s.root) else {
            panic!()
        };
        let Node::EnumMap { symbols } = s.node(fields[0].1) else {
            panic!()
        };
        assert_eq!(symbols, &[Some((0, "a".into())), None]);
        // A default standing in for a symbol at its index is a map.
        let s = resolved(
            &e(r#"["a", "c"]"#, ""),
            &e(r#"["a", "z"]"#, r#", "default": "z""#),
        )
        .unwrap();
        let Node::Record { fields, .. } = s.node(s.root) else {
            panic!()
        };
        assert!(matches!(s.node(fields[0].1), Node::EnumMap { .. }));
        // A reader enum extending the writer's is the writer's.
        let s = resolved(&e(r#"["a", "b"]"#, ""), &e(r#"["a", "b", "c"]"#, "")).unwrap();
        let w = Schema::parse(&e(r#"["a", "b"]"#, "")).unwrap();
        assert_eq!(s.root, w.root);
    }

    #[test]
    fn named_types_match_by_unqualified_name_or_alias() {
        let w =
            r#"{"type": "record", "name": "a.b.Old", "fields": [{"name": "x", "type": "int"}]}"#;
        let r = r#"{"type": "record", "name": "c.Old", "fields": [{"name": "x", "type": "int"}]}"#;
        assert!(resolved(w, r).is_ok());
        let r = r#"{"type": "record", "name": "New", "aliases": ["a.b.Old"], "fields": [{"name": "x", "type": "int"}]}"#;
        assert!(resolved(w, r).is_ok());
        let r = r#"{"type": "record", "name": "New", "fields": [{"name": "x", "type": "int"}]}"#;
        let (field, reason) = error(w, r);
        assert_eq!(field, "");
        assert!(reason.contains("Old"), "{reason}");
    }

    #[test]
    fn defaults_are_encoded_by_type() {
        let enc = |t: &str, v: &str| {
            let s = Schema::parse(t).unwrap();
            let mut out = Vec::new();
            encode_default(&s, s.root, &serde_json::from_str(v).unwrap(), 0, &mut out).map(|_| out)
        };
        assert_eq!(enc(r#""long""#, "-1").unwrap(), [1]);
        assert_eq!(enc(r#""double""#, "1.5").unwrap(), 1.5f64.to_le_bytes());
        assert_eq!(enc(r#""bytes""#, r#""\u00ff""#).unwrap(), [2, 0xff]);
        assert_eq!(enc(r#"["null", "long"]"#, "null").unwrap(), [0]);
        assert_eq!(enc(r#"["null", "long"]"#, "2").unwrap(), [2, 4]);
        assert_eq!(
            enc(r#"{"type": "array", "items": "int"}"#, "[1]").unwrap(),
            [2, 2, 0]
        );
        assert!(enc(r#""int""#, "3000000000").is_err());
        assert!(enc(r#""string""#, "1").is_err());
    }
}
