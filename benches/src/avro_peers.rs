//! The Rust Avro readers grist is measured against, each doing the job
//! grist does on prod19: read the container's blocks (decompressing them),
//! decode every record, check it against the feature shapes and append it
//! to per-feature columns, handed out every `batch` records.
//!
//! The columns ([`Prod19Columns`]) are plain vectors, the least a peer
//! must build to feed a tensor batch: one `Vec` per dense feature
//! (row-major `[batch, len]`), COO indices (`[nnz, 2]`, batch row first)
//! and values per sparse feature. The checks are the ones grist makes:
//! dense arrays of the declared length, as many indices as values, indices
//! inside the dense shape. Every peer returns the same columns for the same
//! file (the tests hold them to grist's batches).
//!
//! | peer | path |
//! | --- | --- |
//! | [`apache_value`] | `apache_avro::Reader` → `Value` → columns |
//! | [`apache_serde`] | `apache_avro::Reader` → `Value` → `from_value::<Prod19>` → columns |
//! | [`serde_avro_fast`](fn@serde_avro_fast) | `serde_avro_fast` container reader → `Prod19` → columns |
//! | [`arrow_avro`](fn@arrow_avro) | `arrow_avro` `ReaderBuilder` (batch size N) → `RecordBatch` → columns |

use std::io::Read;

use apache_avro::types::Value;
use arrow_array::cast::AsArray;
use arrow_array::types::{Float32Type, Float64Type, Int32Type, Int64Type};
use arrow_array::{Array, ArrowPrimitiveType, ListArray, RecordBatch};
use grist_avro_tensor::{AvroDecoder, BlockReader};
use grist_tensor::{Batch, Column, DenseTensor, Section, SparseTensor, Tensor, Values};
use serde::Deserialize;

/// A peer's failure: which record (or batch) and feature, and what.
pub type PeerResult<T> = Result<T, String>;

/// Elements per record of `d_f32_*`.
pub const F32_LEN: usize = 32;
/// Elements per record of `d_i64_*`.
pub const I64_LEN: usize = 8;
/// Elements per record of `d_f64_0`.
pub const F64_LEN: usize = 16;
/// Elements per record of `d_i32_0`.
pub const I32_LEN: usize = 4;
/// The dense size of the sparse features.
pub const SPARSE_SIZE: i64 = 50_001;

/// The fields of the prod19 record, in schema order.
pub const FIELDS: [&str; 19] = [
    "s_int", "s_long0", "s_long1", "s_float", "s_double", "s_bool", "d_f32_0", "d_f32_1",
    "d_f32_2", "d_f32_3", "d_i64_0", "d_i64_1", "d_f64_0", "d_i32_0", "sp_0", "sp_1", "sp_2",
    "sp_3", "sp_4",
];

/// The prod19 record as a serde struct (the serde peers' target type).
#[derive(Debug, Deserialize)]
#[allow(missing_docs)]
pub struct Prod19 {
    pub s_int: i32,
    pub s_long0: i64,
    pub s_long1: i64,
    pub s_float: f32,
    pub s_double: f64,
    pub s_bool: bool,
    pub d_f32_0: Vec<f32>,
    pub d_f32_1: Vec<f32>,
    pub d_f32_2: Vec<f32>,
    pub d_f32_3: Vec<f32>,
    pub d_i64_0: Vec<i64>,
    pub d_i64_1: Vec<i64>,
    pub d_f64_0: Vec<f64>,
    pub d_i32_0: Vec<i32>,
    pub sp_0: Sparse,
    pub sp_1: Sparse,
    pub sp_2: Sparse,
    pub sp_3: Sparse,
    pub sp_4: Sparse,
}

/// A sparse feature's Avro record.
#[derive(Debug, Deserialize)]
pub struct Sparse {
    /// The indices (one dimension).
    pub indices0: Vec<i64>,
    /// The values, one per index.
    pub values: Vec<f32>,
}

/// One sparse column in COO form.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Coo {
    /// `[nnz, 2]` row-major: batch row, index.
    pub indices: Vec<i64>,
    /// `nnz` values.
    pub values: Vec<f32>,
}

/// A batch of prod19 as plain columns.
#[derive(Clone, Debug, Default, PartialEq)]
#[allow(missing_docs)]
pub struct Prod19Columns {
    /// Records in the batch.
    pub rows: usize,
    pub s_int: Vec<i32>,
    pub s_long0: Vec<i64>,
    pub s_long1: Vec<i64>,
    pub s_float: Vec<f32>,
    pub s_double: Vec<f64>,
    pub s_bool: Vec<bool>,
    /// `d_f32_0..3`, `[rows, 32]` each.
    pub d_f32: [Vec<f32>; 4],
    /// `d_i64_0..1`, `[rows, 8]` each.
    pub d_i64: [Vec<i64>; 2],
    /// `[rows, 16]`.
    pub d_f64_0: Vec<f64>,
    /// `[rows, 4]`.
    pub d_i32_0: Vec<i32>,
    /// `sp_0..4`.
    pub sp: [Coo; 5],
}

fn check_len(feature: &str, record: u64, got: usize, want: usize) -> PeerResult<()> {
    if got == want {
        Ok(())
    } else {
        Err(format!(
            "record {record}, {feature}: {got} values, want {want}"
        ))
    }
}

impl Prod19Columns {
    /// Empty columns with room for `rows` records.
    pub fn with_capacity(rows: usize) -> Self {
        let coo = || Coo {
            indices: Vec::with_capacity(rows * 60),
            values: Vec::with_capacity(rows * 30),
        };
        Prod19Columns {
            rows: 0,
            s_int: Vec::with_capacity(rows),
            s_long0: Vec::with_capacity(rows),
            s_long1: Vec::with_capacity(rows),
            s_float: Vec::with_capacity(rows),
            s_double: Vec::with_capacity(rows),
            s_bool: Vec::with_capacity(rows),
            d_f32: std::array::from_fn(|_| Vec::with_capacity(rows * F32_LEN)),
            d_i64: std::array::from_fn(|_| Vec::with_capacity(rows * I64_LEN)),
            d_f64_0: Vec::with_capacity(rows * F64_LEN),
            d_i32_0: Vec::with_capacity(rows * I32_LEN),
            sp: std::array::from_fn(|_| coo()),
        }
    }

    /// Empties every column, keeping the memory.
    pub fn clear(&mut self) {
        self.rows = 0;
        self.s_int.clear();
        self.s_long0.clear();
        self.s_long1.clear();
        self.s_float.clear();
        self.s_double.clear();
        self.s_bool.clear();
        self.d_f32.iter_mut().for_each(Vec::clear);
        self.d_i64.iter_mut().for_each(Vec::clear);
        self.d_f64_0.clear();
        self.d_i32_0.clear();
        for c in &mut self.sp {
            c.indices.clear();
            c.values.clear();
        }
    }

    /// Appends one sparse record's entries at batch row `self.rows`.
    fn push_sparse(
        &mut self,
        k: usize,
        record: u64,
        indices: impl ExactSizeIterator<Item = i64>,
        values: impl ExactSizeIterator<Item = f32>,
    ) -> PeerResult<()> {
        check_len(FIELDS[14 + k], record, indices.len(), values.len())?;
        let row = self.rows as i64;
        let c = &mut self.sp[k];
        for i in indices {
            if !(0..SPARSE_SIZE).contains(&i) {
                return Err(format!(
                    "record {record}, {}: index {i} outside [0, {SPARSE_SIZE})",
                    FIELDS[14 + k]
                ));
            }
            c.indices.push(row);
            c.indices.push(i);
        }
        c.values.extend(values);
        Ok(())
    }

    /// Appends a deserialized record (record number `record`, for errors).
    pub fn push_struct(&mut self, record: u64, r: &Prod19) -> PeerResult<()> {
        self.s_int.push(r.s_int);
        self.s_long0.push(r.s_long0);
        self.s_long1.push(r.s_long1);
        self.s_float.push(r.s_float);
        self.s_double.push(r.s_double);
        self.s_bool.push(r.s_bool);
        for (k, v) in [&r.d_f32_0, &r.d_f32_1, &r.d_f32_2, &r.d_f32_3]
            .into_iter()
            .enumerate()
        {
            check_len(FIELDS[6 + k], record, v.len(), F32_LEN)?;
            self.d_f32[k].extend_from_slice(v);
        }
        for (k, v) in [&r.d_i64_0, &r.d_i64_1].into_iter().enumerate() {
            check_len(FIELDS[10 + k], record, v.len(), I64_LEN)?;
            self.d_i64[k].extend_from_slice(v);
        }
        check_len("d_f64_0", record, r.d_f64_0.len(), F64_LEN)?;
        self.d_f64_0.extend_from_slice(&r.d_f64_0);
        check_len("d_i32_0", record, r.d_i32_0.len(), I32_LEN)?;
        self.d_i32_0.extend_from_slice(&r.d_i32_0);
        for (k, s) in [&r.sp_0, &r.sp_1, &r.sp_2, &r.sp_3, &r.sp_4]
            .into_iter()
            .enumerate()
        {
            self.push_sparse(
                k,
                record,
                s.indices0.iter().copied(),
                s.values.iter().copied(),
            )?;
        }
        self.rows += 1;
        Ok(())
    }

    /// Appends a generic record whose fields sit at `pos` (the positions
    /// of [`FIELDS`] in the writer schema).
    pub fn push_value(&mut self, record: u64, v: &Value, pos: &[usize; 19]) -> PeerResult<()> {
        let Value::Record(fields) = v else {
            return Err(format!("record {record}: not a record"));
        };
        let f = |k: usize| -> PeerResult<&Value> {
            fields
                .get(pos[k])
                .map(|(_, v)| v)
                .ok_or_else(|| format!("record {record}: no field {}", FIELDS[k]))
        };
        let bad = |k: usize| format!("record {record}, {}: wrong type", FIELDS[k]);
        match f(0)? {
            Value::Int(x) => self.s_int.push(*x),
            _ => return Err(bad(0)),
        }
        for (k, out) in [(1, &mut self.s_long0), (2, &mut self.s_long1)] {
            match f(k)? {
                Value::Long(x) => out.push(*x),
                _ => return Err(bad(k)),
            }
        }
        match f(3)? {
            Value::Float(x) => self.s_float.push(*x),
            _ => return Err(bad(3)),
        }
        match f(4)? {
            Value::Double(x) => self.s_double.push(*x),
            _ => return Err(bad(4)),
        }
        match f(5)? {
            Value::Boolean(x) => self.s_bool.push(*x),
            _ => return Err(bad(5)),
        }
        let array = |k: usize, len: usize| -> PeerResult<&[Value]> {
            match f(k)? {
                Value::Array(items) => {
                    check_len(FIELDS[k], record, items.len(), len)?;
                    Ok(items)
                }
                _ => Err(bad(k)),
            }
        };
        for j in 0..4 {
            for item in array(6 + j, F32_LEN)? {
                match item {
                    Value::Float(x) => self.d_f32[j].push(*x),
                    _ => return Err(bad(6 + j)),
                }
            }
        }
        for j in 0..2 {
            for item in array(10 + j, I64_LEN)? {
                match item {
                    Value::Long(x) => self.d_i64[j].push(*x),
                    _ => return Err(bad(10 + j)),
                }
            }
        }
        for item in array(12, F64_LEN)? {
            match item {
                Value::Double(x) => self.d_f64_0.push(*x),
                _ => return Err(bad(12)),
            }
        }
        for item in array(13, I32_LEN)? {
            match item {
                Value::Int(x) => self.d_i32_0.push(*x),
                _ => return Err(bad(13)),
            }
        }
        for j in 0..5 {
            let k = 14 + j;
            let Value::Record(sub) = f(k)? else {
                return Err(bad(k));
            };
            let (mut indices, mut values) = (None, None);
            for (name, v) in sub {
                match (name.as_str(), v) {
                    ("indices0", Value::Array(a)) => indices = Some(a),
                    ("values", Value::Array(a)) => values = Some(a),
                    _ => {}
                }
            }
            let (Some(indices), Some(values)) = (indices, values) else {
                return Err(bad(k));
            };
            if indices.iter().any(|i| !matches!(i, Value::Long(_)))
                || values.iter().any(|v| !matches!(v, Value::Float(_)))
            {
                return Err(bad(k));
            }
            self.push_sparse(
                j,
                record,
                indices.iter().map(|i| match i {
                    Value::Long(x) => *x,
                    _ => 0,
                }),
                values.iter().map(|v| match v {
                    Value::Float(x) => *x,
                    _ => 0.0,
                }),
            )?;
        }
        self.rows += 1;
        Ok(())
    }

    /// Appends every row of an arrow-avro batch whose first row is record
    /// `first` of the file.
    pub fn push_arrow(&mut self, first: u64, rb: &RecordBatch) -> PeerResult<()> {
        let n = rb.num_rows();
        let col = |k: usize| -> PeerResult<&dyn Array> {
            rb.column_by_name(FIELDS[k])
                .map(|c| c.as_ref())
                .ok_or_else(|| format!("records {first}..: no column {}", FIELDS[k]))
        };
        let bad = |k: usize| format!("records {first}..: {}: wrong type", FIELDS[k]);
        fn prim<T: ArrowPrimitiveType>(a: &dyn Array) -> Option<&[T::Native]> {
            a.as_primitive_opt::<T>().map(|p| &p.values()[..])
        }
        self.s_int
            .extend_from_slice(prim::<Int32Type>(col(0)?).ok_or_else(|| bad(0))?);
        self.s_long0
            .extend_from_slice(prim::<Int64Type>(col(1)?).ok_or_else(|| bad(1))?);
        self.s_long1
            .extend_from_slice(prim::<Int64Type>(col(2)?).ok_or_else(|| bad(2))?);
        self.s_float
            .extend_from_slice(prim::<Float32Type>(col(3)?).ok_or_else(|| bad(3))?);
        self.s_double
            .extend_from_slice(prim::<Float64Type>(col(4)?).ok_or_else(|| bad(4))?);
        let b = col(5)?.as_boolean_opt().ok_or_else(|| bad(5))?;
        self.s_bool.extend(b.values().iter());
        // A list column whose every row holds `len` items: its items.
        fn fixed<T: ArrowPrimitiveType>(
            a: &dyn Array,
            len: usize,
        ) -> Option<Result<&[T::Native], usize>> {
            let list: &ListArray = a.as_list_opt::<i32>()?;
            let offsets = list.value_offsets();
            if let Some(row) = offsets
                .windows(2)
                .position(|w| (w[1] - w[0]) as usize != len)
            {
                return Some(Err(row));
            }
            let items = prim::<T>(list.values().as_ref())?;
            let (lo, hi) = (offsets[0] as usize, offsets[offsets.len() - 1] as usize);
            Some(Ok(&items[lo..hi]))
        }
        let wrong_len = |k: usize, len: usize, row: usize| {
            format!(
                "record {}, {}: not {len} values",
                first + row as u64,
                FIELDS[k]
            )
        };
        for j in 0..4 {
            let k = 6 + j;
            let items = fixed::<Float32Type>(col(k)?, F32_LEN).ok_or_else(|| bad(k))?;
            self.d_f32[j].extend_from_slice(items.map_err(|r| wrong_len(k, F32_LEN, r))?);
        }
        for j in 0..2 {
            let k = 10 + j;
            let items = fixed::<Int64Type>(col(k)?, I64_LEN).ok_or_else(|| bad(k))?;
            self.d_i64[j].extend_from_slice(items.map_err(|r| wrong_len(k, I64_LEN, r))?);
        }
        let items = fixed::<Float64Type>(col(12)?, F64_LEN).ok_or_else(|| bad(12))?;
        self.d_f64_0
            .extend_from_slice(items.map_err(|r| wrong_len(12, F64_LEN, r))?);
        let items = fixed::<Int32Type>(col(13)?, I32_LEN).ok_or_else(|| bad(13))?;
        self.d_i32_0
            .extend_from_slice(items.map_err(|r| wrong_len(13, I32_LEN, r))?);
        let base = self.rows;
        for j in 0..5 {
            let k = 14 + j;
            let s = col(k)?.as_struct_opt().ok_or_else(|| bad(k))?;
            let list = |name: &str| {
                s.column_by_name(name)
                    .and_then(|c| c.as_list_opt::<i32>())
                    .ok_or_else(|| bad(k))
            };
            let (il, vl) = (list("indices0")?, list("values")?);
            let iv = prim::<Int64Type>(il.values().as_ref()).ok_or_else(|| bad(k))?;
            let vv = prim::<Float32Type>(vl.values().as_ref()).ok_or_else(|| bad(k))?;
            let (io, vo) = (il.value_offsets(), vl.value_offsets());
            for r in 0..n {
                self.rows = base + r;
                self.push_sparse(
                    j,
                    first + r as u64,
                    iv[io[r] as usize..io[r + 1] as usize].iter().copied(),
                    vv[vo[r] as usize..vo[r + 1] as usize].iter().copied(),
                )?;
            }
        }
        self.rows = base + n;
        Ok(())
    }

    /// The columns as grist tensors, by feature name (for comparing a
    /// peer's output with grist's batches).
    pub fn to_batch(&self) -> Batch {
        let rows = self.rows;
        let dense = |name: &str, len: Option<usize>, values: Values| Column {
            name: name.to_string(),
            section: Section::Features,
            tensor: Tensor::Dense(DenseTensor {
                shape: match len {
                    None => vec![rows],
                    Some(l) => vec![rows, l],
                },
                values,
            }),
        };
        let mut cols = vec![
            dense("s_int", None, Values::Int32(self.s_int.clone())),
            dense("s_long0", None, Values::Int64(self.s_long0.clone())),
            dense("s_long1", None, Values::Int64(self.s_long1.clone())),
            dense("s_float", None, Values::Float32(self.s_float.clone())),
            dense("s_double", None, Values::Float64(self.s_double.clone())),
            dense("s_bool", None, Values::Bool(self.s_bool.clone())),
        ];
        for j in 0..4 {
            cols.push(dense(
                FIELDS[6 + j],
                Some(F32_LEN),
                Values::Float32(self.d_f32[j].clone()),
            ));
        }
        for j in 0..2 {
            cols.push(dense(
                FIELDS[10 + j],
                Some(I64_LEN),
                Values::Int64(self.d_i64[j].clone()),
            ));
        }
        cols.push(dense(
            "d_f64_0",
            Some(F64_LEN),
            Values::Float64(self.d_f64_0.clone()),
        ));
        cols.push(dense(
            "d_i32_0",
            Some(I32_LEN),
            Values::Int32(self.d_i32_0.clone()),
        ));
        for j in 0..5 {
            cols.push(Column {
                name: FIELDS[14 + j].to_string(),
                section: Section::Features,
                tensor: Tensor::Sparse(SparseTensor {
                    indices: self.sp[j].indices.clone(),
                    values: Values::Float32(self.sp[j].values.clone()),
                    dense_shape: vec![rows as i64, SPARSE_SIZE],
                }),
            });
        }
        Batch::new(rows, cols)
    }
}

/// Hands `cols` to `sink` when it holds `batch` rows (or `force` and any).
fn flush(
    cols: &mut Prod19Columns,
    batch: usize,
    force: bool,
    total: &mut usize,
    sink: &mut impl FnMut(&Prod19Columns),
) {
    if cols.rows == batch || (force && cols.rows > 0) {
        sink(cols);
        *total += cols.rows;
        cols.clear();
    }
}

/// grist: every block of the container read (and decompressed) by `reader`
/// decoded into batches of `batch` rows, each handed to `sink` and then
/// recycled. Returns the record count.
pub fn grist<R: Read>(
    mut reader: BlockReader<R>,
    decoder: &mut AvroDecoder,
    batch: usize,
    mut sink: impl FnMut(&Batch),
) -> grist_avro_tensor::Result<usize> {
    decoder.add_schema(reader.name().clone(), &reader.header().schema_json)?;
    let mut rows = 0;
    let mut out = decoder.recycled_batch(batch);
    while let Some(b) = reader.next_block()? {
        let n = b.record_count as usize;
        // A block may feed several batches: each call starts where the
        // last one stopped.
        let (mut row, mut at) = (0, 0);
        while row < n {
            let take = (batch - out.rows()).min(n - row);
            at += decoder.decode_block_to(
                reader.name(),
                b.index,
                b.first_record + row as u64,
                &b.data[at..],
                n - row,
                0..take,
                &mut out,
            )?;
            row += take;
            if out.rows() == batch {
                let done = decoder.finish(&mut out)?;
                rows += done.rows();
                sink(&done);
                decoder.recycle(done);
                out = decoder.recycled_batch(batch);
            }
        }
    }
    if out.rows() > 0 {
        let done = decoder.finish(&mut out)?;
        rows += done.rows();
        sink(&done);
        decoder.recycle(done);
    }
    Ok(rows)
}

/// The positions of [`FIELDS`] in a writer schema's top record.
fn positions(schema: &apache_avro::Schema) -> PeerResult<[usize; 19]> {
    let apache_avro::Schema::Record(r) = schema else {
        return Err("the writer schema is not a record".into());
    };
    let mut pos = [0; 19];
    for (k, name) in FIELDS.iter().enumerate() {
        pos[k] = *r
            .lookup
            .get(*name)
            .ok_or_else(|| format!("the writer schema has no field {name}"))?;
    }
    Ok(pos)
}

/// apache-avro's generic reader: each record a `Value` tree, walked into
/// the columns.
pub fn apache_value(
    file: &[u8],
    batch: usize,
    mut sink: impl FnMut(&Prod19Columns),
) -> PeerResult<usize> {
    let reader = apache_avro::Reader::new(file).map_err(|e| e.to_string())?;
    let pos = positions(reader.writer_schema())?;
    let mut cols = Prod19Columns::with_capacity(batch);
    let mut total = 0;
    for (i, v) in reader.enumerate() {
        let v = v.map_err(|e| format!("record {i}: {e}"))?;
        cols.push_value(i as u64, &v, &pos)?;
        flush(&mut cols, batch, false, &mut total, &mut sink);
    }
    flush(&mut cols, batch, true, &mut total, &mut sink);
    Ok(total)
}

/// apache-avro's serde path: each record a `Value`, then
/// `apache_avro::from_value::<Prod19>`, then the columns.
pub fn apache_serde(
    file: &[u8],
    batch: usize,
    mut sink: impl FnMut(&Prod19Columns),
) -> PeerResult<usize> {
    let reader = apache_avro::Reader::new(file).map_err(|e| e.to_string())?;
    let mut cols = Prod19Columns::with_capacity(batch);
    let mut total = 0;
    for (i, v) in reader.enumerate() {
        let v = v.map_err(|e| format!("record {i}: {e}"))?;
        let r: Prod19 = apache_avro::from_value(&v).map_err(|e| format!("record {i}: {e}"))?;
        cols.push_struct(i as u64, &r)?;
        flush(&mut cols, batch, false, &mut total, &mut sink);
    }
    flush(&mut cols, batch, true, &mut total, &mut sink);
    Ok(total)
}

/// serde_avro_fast's container reader deserializing each record into
/// [`Prod19`], then the columns.
pub fn serde_avro_fast(
    file: &[u8],
    batch: usize,
    mut sink: impl FnMut(&Prod19Columns),
) -> PeerResult<usize> {
    let mut reader = serde_avro_fast::object_container_file_encoding::Reader::from_slice(file)
        .map_err(|e| e.to_string())?;
    let mut cols = Prod19Columns::with_capacity(batch);
    let mut total = 0;
    for (i, r) in reader.deserialize::<Prod19>().enumerate() {
        let r = r.map_err(|e| format!("record {i}: {e}"))?;
        cols.push_struct(i as u64, &r)?;
        flush(&mut cols, batch, false, &mut total, &mut sink);
    }
    flush(&mut cols, batch, true, &mut total, &mut sink);
    Ok(total)
}

/// arrow-avro's container reader with batch size `batch`: each
/// `RecordBatch` converted into the columns (a copy of the primitive
/// buffers, COO built from the list offsets).
pub fn arrow_avro(
    file: &[u8],
    batch: usize,
    mut sink: impl FnMut(&Prod19Columns),
) -> PeerResult<usize> {
    let reader = arrow_avro::reader::ReaderBuilder::new()
        .with_batch_size(batch)
        .build(file)
        .map_err(|e| e.to_string())?;
    let mut cols = Prod19Columns::with_capacity(batch);
    let mut total = 0;
    for (i, rb) in reader.enumerate() {
        let rb = rb.map_err(|e| format!("batch {i}: {e}"))?;
        cols.clear();
        cols.push_arrow(total as u64, &rb)?;
        total += cols.rows;
        sink(&cols);
    }
    Ok(total)
}

/// arrow-avro's container reader alone: the `RecordBatch`es, not
/// converted (what arrow-avro itself costs).
pub fn arrow_avro_batches(
    file: &[u8],
    batch: usize,
    mut sink: impl FnMut(&RecordBatch),
) -> PeerResult<usize> {
    let reader = arrow_avro::reader::ReaderBuilder::new()
        .with_batch_size(batch)
        .build(file)
        .map_err(|e| e.to_string())?;
    let mut total = 0;
    for (i, rb) in reader.enumerate() {
        let rb = rb.map_err(|e| format!("batch {i}: {e}"))?;
        total += rb.num_rows();
        sink(&rb);
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prod19_avro;
    use grist_avro_tensor::{Codec, ReaderOptions};

    type Peer = fn(&[u8], usize, &mut dyn FnMut(&Prod19Columns)) -> PeerResult<usize>;

    fn peers() -> [(&'static str, Peer); 4] {
        [
            ("apache_value", |f, b, s| apache_value(f, b, s)),
            ("apache_serde", |f, b, s| apache_serde(f, b, s)),
            ("serde_avro_fast", |f, b, s| serde_avro_fast(f, b, s)),
            ("arrow_avro", |f, b, s| arrow_avro(f, b, s)),
        ]
    }

    /// Every peer hands out the batches grist does, for both codecs and a
    /// batch size that splits blocks.
    #[test]
    fn peers_build_grists_batches() {
        for codec in [Codec::Null, Codec::Deflate] {
            let (specs, file) = prod19_avro(300, 7, codec);
            let mut decoder = AvroDecoder::new(&specs).unwrap();
            let reader = BlockReader::new(&file[..], "prod19", ReaderOptions::default()).unwrap();
            assert!(reader.header().codec == codec);
            let mut want = Vec::new();
            let n = grist(reader, &mut decoder, 64, |b| want.push(b.clone())).unwrap();
            assert_eq!(n, 300);
            assert_eq!(want.len(), 5);
            for (name, peer) in peers() {
                let mut got = Vec::new();
                let n = peer(&file, 64, &mut |c| got.push(c.to_batch())).unwrap();
                assert_eq!(n, 300, "{name}");
                assert_eq!(got.len(), want.len(), "{name}");
                for (g, w) in got.iter().zip(&want) {
                    assert_eq!(g.rows(), w.rows(), "{name}");
                    for col in w.columns() {
                        assert_eq!(g.get(&col.name), Some(&col.tensor), "{name} {}", col.name);
                    }
                }
            }
        }
    }

    /// The checks bite: a dense array of the wrong length and an index
    /// outside the dense shape are errors naming the record and feature.
    #[test]
    fn peers_check_shapes() {
        let r = |d_f32_0: Vec<f32>, idx: i64| Prod19 {
            s_int: 1,
            s_long0: 2,
            s_long1: 3,
            s_float: 4.0,
            s_double: 5.0,
            s_bool: true,
            d_f32_0,
            d_f32_1: vec![0.0; F32_LEN],
            d_f32_2: vec![0.0; F32_LEN],
            d_f32_3: vec![0.0; F32_LEN],
            d_i64_0: vec![0; I64_LEN],
            d_i64_1: vec![0; I64_LEN],
            d_f64_0: vec![0.0; F64_LEN],
            d_i32_0: vec![0; I32_LEN],
            sp_0: Sparse {
                indices0: vec![idx],
                values: vec![1.0],
            },
            sp_1: Sparse {
                indices0: vec![],
                values: vec![],
            },
            sp_2: Sparse {
                indices0: vec![],
                values: vec![],
            },
            sp_3: Sparse {
                indices0: vec![],
                values: vec![],
            },
            sp_4: Sparse {
                indices0: vec![],
                values: vec![],
            },
        };
        let mut c = Prod19Columns::with_capacity(4);
        c.push_struct(0, &r(vec![0.0; F32_LEN], 50_000)).unwrap();
        assert_eq!(c.rows, 1);
        let e = c.push_struct(1, &r(vec![0.0; 31], 0)).unwrap_err();
        assert!(e.contains("record 1") && e.contains("d_f32_0"), "{e}");
        let e = c
            .push_struct(2, &r(vec![0.0; F32_LEN], 50_001))
            .unwrap_err();
        assert!(e.contains("record 2") && e.contains("sp_0"), "{e}");
    }
}
