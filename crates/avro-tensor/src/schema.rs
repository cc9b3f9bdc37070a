//! A compact form of an Avro writer schema: exactly what decoding needs
//! (each type's binary encoding), with named types resolved into an arena so
//! recursive schemas are representable.
//!
//! The schema text is validated with the `apache-avro` crate first; this
//! module then reads the same JSON, keeping the distinctions that matter on
//! the wire (a `uuid` over `string` vs over `fixed(16)`, `decimal` over
//! `bytes` vs `fixed`), which logical types only annotate.

use std::collections::HashMap;

use serde_json::Value;

use crate::logical::Logical;

/// One schema node. Children are arena indices.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Node {
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
    Record {
        name: String,
        fields: Vec<(String, usize)>,
    },
    Enum {
        symbols: Vec<String>,
    },
    Fixed(usize),
    // -- resolution only (a writer schema read through a reader schema,
    // `resolve.rs`); a writer schema never holds these --
    /// A writer value of node `.0` that the reader does not want (a writer
    /// field the reader record lacks): read and dropped.
    Skip(usize),
    /// A reader field the writer lacks: nothing on the wire, the value is
    /// the reader's default, `datum` (its Avro binary encoding) of node
    /// `node`.
    Default {
        node: usize,
        datum: Vec<u8>,
    },
    /// A writer primitive `wire` read as the reader's primitive `reader`
    /// (int → long, float, double; long → float, double; float → double;
    /// string ↔ bytes).
    Promote {
        wire: usize,
        reader: usize,
    },
    /// A writer enum read through the reader's symbols: for each writer
    /// symbol index, the reader's (index, symbol), or `None` when the
    /// reader has neither the symbol nor a default (an error when read).
    EnumMap {
        symbols: Vec<Option<(usize, String)>>,
    },
    /// A writer value (of node `wire`) the reader schema cannot take, such
    /// as a union branch no reader branch matches: an error when read, but
    /// skipped like `wire`.
    Unreadable {
        wire: usize,
        reason: &'static str,
    },
}

/// What a named type's JSON says beyond its encoding: what schema
/// resolution matches names by and fills defaults from.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Named {
    /// The full name (namespace and name).
    pub(crate) full_name: String,
    /// The aliases, as written.
    pub(crate) aliases: Vec<String>,
    /// The namespace the aliases are relative to.
    pub(crate) namespace: String,
    /// An enum's `default` symbol.
    pub(crate) enum_default: Option<String>,
    /// A record's fields' aliases and defaults, in field order.
    pub(crate) fields: Vec<FieldMeta>,
}

/// A record field's aliases and default.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct FieldMeta {
    pub(crate) aliases: Vec<String>,
    pub(crate) default: Option<Value>,
}

impl Named {
    /// The name without its namespace.
    pub(crate) fn unqualified(&self) -> &str {
        unqualified(&self.full_name)
    }

    /// Whether a writer type named `writer` matches this (reader) type:
    /// the same unqualified name, or an alias naming it (in full, relative
    /// to this type's namespace, or unqualified, as fastavro matches).
    pub(crate) fn matches(&self, writer: &str) -> bool {
        let w = unqualified(writer);
        w == self.unqualified()
            || self
                .aliases
                .iter()
                .any(|a| a == writer || a == w || full_name(a, &self.namespace) == writer)
    }
}

/// The part of a full name after the last dot.
pub(crate) fn unqualified(name: &str) -> &str {
    name.rsplit_once('.').map_or(name, |(_, n)| n)
}

/// A parsed writer schema.
#[derive(Clone, Debug)]
pub(crate) struct Schema {
    pub(crate) nodes: Vec<Node>,
    pub(crate) root: usize,
    /// The fewest bytes a value of each node can take (0 for null, empty
    /// records, fixed(0)): bounds how many items an array can claim.
    pub(crate) min_size: Vec<usize>,
    /// The logical types fastavro converts, by node (most nodes have
    /// none). Only the generic JSON form reads them.
    pub(crate) logical: Vec<(usize, Logical)>,
    /// The names, aliases and defaults of the named types, by node.
    pub(crate) named: HashMap<usize, Named>,
    /// Whether this is a writer schema resolved against a reader schema
    /// (`resolve.rs`): its field names are the reader's.
    pub(crate) resolved: bool,
}

impl Schema {
    /// Parses (and validates with apache-avro) a writer schema.
    pub(crate) fn parse(text: &str) -> Result<Schema, String> {
        parse_apache(text)?;
        let json: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
        let mut p = Parser {
            nodes: Vec::new(),
            names: HashMap::new(),
            logical: Vec::new(),
            named: HashMap::new(),
        };
        let root = p.node(&json, "")?;
        let mut schema = Schema::new(p.nodes, root, p.named);
        // A resolved schema (new nodes) reads logical types as the types
        // underneath.
        schema.logical = p.logical;
        Ok(schema)
    }

    /// A schema of these nodes, with their smallest sizes worked out.
    pub(crate) fn new(nodes: Vec<Node>, root: usize, named: HashMap<usize, Named>) -> Schema {
        let min_size = min_sizes(&nodes);
        Schema {
            nodes,
            root,
            min_size,
            logical: Vec::new(),
            named,
            resolved: false,
        }
    }

    pub(crate) fn node(&self, i: usize) -> &Node {
        &self.nodes[i]
    }

    /// The logical type fastavro converts node `i` with, if any.
    pub(crate) fn logical(&self, i: usize) -> Option<Logical> {
        self.logical
            .iter()
            .find_map(|&(n, l)| (n == i).then_some(l))
    }

    /// The Avro type name of a node, for messages.
    pub(crate) fn type_name(&self, i: usize) -> String {
        match &self.nodes[i] {
            Node::Null => "null".into(),
            Node::Boolean => "boolean".into(),
            Node::Int => "int".into(),
            Node::Long => "long".into(),
            Node::Float => "float".into(),
            Node::Double => "double".into(),
            Node::Bytes => "bytes".into(),
            Node::String => "string".into(),
            Node::Array(items) => format!("array<{}>", self.type_name(*items)),
            Node::Map(values) => format!("map<{}>", self.type_name(*values)),
            Node::Union(branches) => format!(
                "[{}]",
                branches
                    .iter()
                    .map(|&b| self.type_name(b))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Node::Record { name, .. } => format!("record {name}"),
            Node::Enum { .. } | Node::EnumMap { .. } => "enum".into(),
            Node::Fixed(n) => format!("fixed({n})"),
            Node::Skip(n) | Node::Unreadable { wire: n, .. } => self.type_name(*n),
            Node::Default { node, .. } | Node::Promote { reader: node, .. } => {
                self.type_name(*node)
            }
        }
    }
}

/// Validates a schema with apache-avro, on a copy in the form it accepts:
/// names as fastavro (and Java) take them, and `error` types.
///
/// fastavro accepts any string as a type's name, namespace or alias, and
/// Java's reflection writes nested classes as `Outer$Inner` (namespaces
/// ending in `Outer$`); apache-avro 0.21 refuses such names, and panics
/// (unwraps) on some, such as `"a;b"`. It also refuses the `error` type,
/// a record on the wire. So it is given a copy with `error` read as
/// `record` and every dot-separated part of a type name that is not an
/// identifier escaped into one ([`escape_name_part`]); names resolve the
/// same way in the copy, so only the names' spelling is not checked.
/// Field names (and their aliases, and the keys of defaults) are escaped
/// alike, as fastavro takes any field name; enum symbols are checked as
/// written (fastavro refuses symbols that are not identifiers too).
pub(crate) fn parse_apache(text: &str) -> Result<apache_avro::Schema, String> {
    let mut json: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    for_apache(&mut json);
    apache_avro::Schema::parse(&json).map_err(|e| e.to_string())
}

/// `[A-Za-z_][A-Za-z0-9_]*`.
fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// One dot-separated part of a name as an identifier: itself when it is
/// one, else `_` before a leading digit (or for an empty part) and each
/// other character as `_u<hex code point>_` (`Outer$Inner` →
/// `Outer_u24_Inner`).
fn escape_name_part(part: &str) -> String {
    if is_identifier(part) {
        return part.to_string();
    }
    let mut out = String::with_capacity(part.len() + 8);
    if !part.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
        out.push('_');
    }
    for c in part.chars() {
        if c.is_ascii_alphanumeric() || c == '_' {
            out.push(c);
        } else {
            out.push_str(&format!("_u{:x}_", c as u32));
        }
    }
    out
}

/// A full name as apache-avro accepts it: an identifier, optionally after
/// a namespace (empty, or identifiers joined by dots) and a dot.
fn is_full_name(s: &str) -> bool {
    match s.rsplit_once('.') {
        None => is_identifier(s),
        Some((namespace, name)) => {
            is_identifier(name) && (namespace.is_empty() || namespace.split('.').all(is_identifier))
        }
    }
}

/// A name or namespace as apache-avro accepts it: itself when it does
/// (`.F`, a name in no namespace, too), else each dot-separated part
/// escaped.
fn escape_name(name: &str) -> String {
    if is_full_name(name) {
        return name.to_string();
    }
    name.split('.')
        .map(escape_name_part)
        .collect::<Vec<_>>()
        .join(".")
}

/// Escapes the keys of every object in a default value, as field names are.
fn escape_keys(v: &mut Value) {
    match v {
        Value::Object(m) => {
            *m = std::mem::take(m)
                .into_iter()
                .map(|(k, mut v)| {
                    escape_keys(&mut v);
                    (escape_name_part(&k), v)
                })
                .collect();
        }
        Value::Array(items) => items.iter_mut().for_each(escape_keys),
        _ => {}
    }
}

/// Rewrites the schema `v` (a schema position: a type name, a union, or
/// a type object) in place for [`parse_apache`].
fn for_apache(v: &mut Value) {
    const KEYWORDS: [&str; 14] = [
        "null", "boolean", "int", "long", "float", "double", "bytes", "string", "record", "error",
        "enum", "fixed", "array", "map",
    ];
    let escape = |v: &mut Value| {
        if let Value::String(n) = v {
            *n = escape_name(n);
        }
    };
    match v {
        Value::String(name) if !KEYWORDS.contains(&name.as_str()) => *name = escape_name(name),
        Value::Array(branches) => branches.iter_mut().for_each(for_apache),
        Value::Object(m) => {
            match m.get_mut("type") {
                Some(t @ Value::String(_)) if t == "error" => *t = "record".into(),
                Some(Value::String(_)) => {}
                Some(inner) => return for_apache(inner),
                None => return,
            }
            let kind = m.get("type").and_then(Value::as_str).unwrap_or_default();
            if matches!(kind, "record" | "enum" | "fixed") {
                for key in ["name", "namespace"] {
                    if let Some(n) = m.get_mut(key) {
                        escape(n);
                    }
                }
                if let Some(Value::Array(aliases)) = m.get_mut("aliases") {
                    aliases.iter_mut().for_each(escape);
                }
            } else if let Some(t) = m.get_mut("type") {
                // A type name in a type object: {"type": "Outer$Inner"}.
                for_apache(t);
            }
            if let Some(Value::Array(fields)) = m.get_mut("fields") {
                for f in fields.iter_mut().filter_map(Value::as_object_mut) {
                    if let Some(Value::String(n)) = f.get_mut("name") {
                        *n = escape_name_part(n);
                    }
                    if let Some(Value::Array(aliases)) = f.get_mut("aliases") {
                        for a in aliases {
                            if let Value::String(n) = a {
                                *n = escape_name_part(n);
                            }
                        }
                    }
                    // A record default names fields: escaped alike (map
                    // keys too, which any string may be).
                    if let Some(d) = f.get_mut("default") {
                        escape_keys(d);
                    }
                    if let Some(t) = f.get_mut("type") {
                        for_apache(t);
                    }
                }
            }
            for key in ["items", "values"] {
                if let Some(inner) = m.get_mut(key) {
                    for_apache(inner);
                }
            }
        }
        _ => {}
    }
}

struct Parser {
    nodes: Vec<Node>,
    /// Full names of named types → arena index.
    names: HashMap<String, usize>,
    logical: Vec<(usize, Logical)>,
    named: HashMap<usize, Named>,
}

const PRIMITIVES: [&str; 8] = [
    "null", "boolean", "int", "long", "float", "double", "bytes", "string",
];

fn primitive(name: &str) -> Option<Node> {
    Some(match name {
        "null" => Node::Null,
        "boolean" => Node::Boolean,
        "int" => Node::Int,
        "long" => Node::Long,
        "float" => Node::Float,
        "double" => Node::Double,
        "bytes" => Node::Bytes,
        "string" => Node::String,
        _ => return None,
    })
}

fn full_name(name: &str, namespace: &str) -> String {
    if name.contains('.') || namespace.is_empty() {
        name.to_string()
    } else {
        format!("{namespace}.{name}")
    }
}

impl Parser {
    fn push(&mut self, n: Node) -> usize {
        self.nodes.push(n);
        self.nodes.len() - 1
    }

    fn reference(&self, name: &str, namespace: &str) -> Result<usize, String> {
        self.names
            .get(&full_name(name, namespace))
            .or_else(|| self.names.get(name))
            .copied()
            .ok_or_else(|| format!("unknown type {name:?}"))
    }

    fn node(&mut self, v: &Value, namespace: &str) -> Result<usize, String> {
        match v {
            Value::String(name) => match primitive(name) {
                Some(n) => Ok(self.push(n)),
                None => self.reference(name, namespace),
            },
            Value::Array(branches) => {
                let b = branches
                    .iter()
                    .map(|b| self.node(b, namespace))
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(self.push(Node::Union(b)))
            }
            Value::Object(m) if m.contains_key("logicalType") => {
                let mut plain = m.clone();
                plain.remove("logicalType");
                let i = self.node(&Value::Object(plain), namespace)?;
                if let Some(l) = Logical::of(m, &self.nodes[i]) {
                    self.logical.push((i, l));
                }
                Ok(i)
            }
            Value::Object(m) => {
                let ty = m.get("type").ok_or("a type object without \"type\"")?;
                let Value::String(ty) = ty else {
                    // {"type": {...}} or {"type": [...]}: the inner type.
                    return self.node(ty, namespace);
                };
                let ns = m
                    .get("namespace")
                    .and_then(Value::as_str)
                    .unwrap_or(namespace)
                    .to_string();
                let named = |this: &mut Parser, node: Node| -> Result<(usize, String), String> {
                    let name = m
                        .get("name")
                        .and_then(Value::as_str)
                        .ok_or("a named type without \"name\"")?;
                    let full = full_name(name, &ns);
                    // The namespace of the name itself applies inside.
                    let inner_ns = full
                        .rsplit_once('.')
                        .map_or(String::new(), |(n, _)| n.to_string());
                    let i = this.push(node);
                    let strings = |v: Option<&Value>| -> Vec<String> {
                        v.and_then(Value::as_array)
                            .into_iter()
                            .flatten()
                            .filter_map(|a| a.as_str().map(str::to_string))
                            .collect()
                    };
                    let named = Named {
                        full_name: full.clone(),
                        aliases: strings(m.get("aliases")),
                        namespace: inner_ns.clone(),
                        enum_default: m.get("default").and_then(Value::as_str).map(str::to_string),
                        fields: m
                            .get("fields")
                            .and_then(Value::as_array)
                            .into_iter()
                            .flatten()
                            .map(|f| FieldMeta {
                                aliases: strings(f.get("aliases")),
                                default: f.get("default").cloned(),
                            })
                            .collect(),
                    };
                    this.named.insert(i, named);
                    this.names.insert(full, i);
                    Ok((i, inner_ns))
                };
                match ty.as_str() {
                    "record" | "error" => {
                        let (i, inner_ns) = named(self, Node::Null)?;
                        let mut fields = Vec::new();
                        for f in m
                            .get("fields")
                            .and_then(Value::as_array)
                            .ok_or("a record without \"fields\"")?
                        {
                            let fname = f
                                .get("name")
                                .and_then(Value::as_str)
                                .ok_or("a field without \"name\"")?;
                            let ft = f.get("type").ok_or("a field without \"type\"")?;
                            fields.push((fname.to_string(), self.node(ft, &inner_ns)?));
                        }
                        let name = m
                            .get("name")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_string();
                        self.nodes[i] = Node::Record { name, fields };
                        Ok(i)
                    }
                    "enum" => {
                        let symbols = m
                            .get("symbols")
                            .and_then(Value::as_array)
                            .ok_or("an enum without \"symbols\"")?
                            .iter()
                            .map(|s| s.as_str().map(str::to_string).ok_or("a non-string symbol"))
                            .collect::<Result<Vec<_>, _>>()?;
                        Ok(named(self, Node::Enum { symbols })?.0)
                    }
                    "fixed" => {
                        let size = m
                            .get("size")
                            .and_then(Value::as_u64)
                            .ok_or("a fixed without \"size\"")?;
                        let size = usize::try_from(size).map_err(|_| "fixed size too large")?;
                        Ok(named(self, Node::Fixed(size))?.0)
                    }
                    "array" => {
                        let items =
                            self.node(m.get("items").ok_or("an array without \"items\"")?, &ns)?;
                        Ok(self.push(Node::Array(items)))
                    }
                    "map" => {
                        let values =
                            self.node(m.get("values").ok_or("a map without \"values\"")?, &ns)?;
                        Ok(self.push(Node::Map(values)))
                    }
                    // {"type": "long", "logicalType": ...}: the encoding is
                    // the underlying type's.
                    p if PRIMITIVES.contains(&p) => {
                        Ok(self.push(primitive(p).unwrap_or(Node::Null)))
                    }
                    other => self.reference(other, &ns),
                }
            }
            other => Err(format!("not a schema: {other}")),
        }
    }
}

/// The smallest encoding of each node (a fixpoint, so recursive records,
/// which must bottom out through a union or an array, get finite sizes).
fn min_sizes(nodes: &[Node]) -> Vec<usize> {
    const UNKNOWN: usize = usize::MAX;
    let mut size = vec![UNKNOWN; nodes.len()];
    loop {
        let mut changed = false;
        for (i, n) in nodes.iter().enumerate() {
            let s = match n {
                Node::Null => 0,
                Node::Boolean | Node::Int | Node::Long | Node::Bytes | Node::String => 1,
                Node::Float => 4,
                Node::Double => 8,
                Node::Array(_) | Node::Map(_) | Node::Enum { .. } | Node::EnumMap { .. } => 1,
                Node::Fixed(n) => *n,
                Node::Default { .. } => 0,
                Node::Skip(n)
                | Node::Promote { wire: n, .. }
                | Node::Unreadable { wire: n, .. } => size[*n],
                Node::Union(b) => {
                    let m = b.iter().map(|&b| size[b]).min().unwrap_or(UNKNOWN);
                    if m == UNKNOWN { UNKNOWN } else { 1 + m }
                }
                Node::Record { fields, .. } => fields
                    .iter()
                    .try_fold(0usize, |acc, &(_, f)| {
                        (size[f] != UNKNOWN).then(|| acc.saturating_add(size[f]))
                    })
                    .unwrap_or(UNKNOWN),
            };
            if s != size[i] {
                size[i] = s;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    // A type that never bottoms out cannot occur in data at all.
    size.into_iter()
        .map(|s| if s == UNKNOWN { 1 } else { s })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_and_recursive_types_resolve() {
        let s = Schema::parse(
            r#"{"type": "record", "name": "Node", "namespace": "x.y", "fields": [
                {"name": "v", "type": {"type": "long", "logicalType": "timestamp-millis"}},
                {"name": "id", "type": {"type": "fixed", "name": "Id", "size": 16}},
                {"name": "id2", "type": "Id"},
                {"name": "u", "type": {"type": "string", "logicalType": "uuid"}},
                {"name": "next", "type": ["null", "x.y.Node"]}
            ]}"#,
        )
        .unwrap();
        let Node::Record { fields, .. } = s.node(s.root) else {
            panic!()
        };
        assert_eq!(s.node(fields[0].1), &Node::Long);
        assert_eq!(s.node(fields[1].1), &Node::Fixed(16));
        assert_eq!(fields[1].1, fields[2].1);
        assert_eq!(s.node(fields[3].1), &Node::String);
        let Node::Union(b) = s.node(fields[4].1) else {
            panic!()
        };
        assert_eq!(b[1], s.root);
        assert_eq!(s.min_size[s.root], 1 + 16 + 16 + 1 + 1);
    }

    #[test]
    fn invalid_schemas_are_rejected() {
        assert!(Schema::parse("{").is_err());
        assert!(
            Schema::parse(
                r#"{"type": "record", "name": "R", "fields": [{"name": "a", "type": "Nope"}]}"#
            )
            .is_err()
        );
    }
}
