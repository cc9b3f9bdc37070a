//! The value buffers move between grist and Arrow without copies: the
//! pointers stay the same.

use arrow_array::cast::AsArray;
use arrow_array::types::{Float32Type, Float64Type, Int32Type, Int64Type};
use arrow_array::{Array, ArrayRef};
use grist_arrow::{from_record_batch, to_record_batch};
use grist_tensor::{Batch, DType, SpecFile, Tensor, Values};

use crate::support::every_kind;

/// The address of a column's flat values (strings: their bytes), and of
/// its string offsets or first row splits.
fn grist_ptrs(t: &Tensor) -> (usize, Option<usize>) {
    let values = |v: &Values| match v {
        Values::Int32(v) => (v.as_ptr() as usize, None),
        Values::Int64(v) => (v.as_ptr() as usize, None),
        Values::Float32(v) => (v.as_ptr() as usize, None),
        Values::Float64(v) => (v.as_ptr() as usize, None),
        Values::String(s) => (
            s.data().as_ptr() as usize,
            Some(s.offsets().as_ptr() as usize),
        ),
        other => panic!("no buffer to compare for {}", other.dtype()),
    };
    match t {
        Tensor::Dense(d) => values(&d.values),
        Tensor::Sparse(s) => values(&s.values),
        Tensor::Ragged(r) => (
            values(&r.flat_values.values).0,
            Some(r.nested_row_splits[0].as_ptr() as usize),
        ),
        other => panic!("{other:?}"),
    }
}

/// The same for an Arrow column: the leaf's value buffer, and the string
/// offsets or the outer list's offsets.
fn arrow_ptrs(a: &ArrayRef) -> (usize, Option<usize>) {
    let mut outer_offsets = None;
    let mut a = a.clone();
    if let Some(s) = a.as_struct_opt() {
        a = s.column_by_name("values").unwrap().clone();
    }
    loop {
        if let Some(l) = a.as_list_opt::<i64>() {
            outer_offsets.get_or_insert(l.offsets().as_ptr() as usize);
            a = l.values().clone();
        } else if let Some(l) = a.as_fixed_size_list_opt() {
            a = l.values().clone();
        } else {
            break;
        }
    }
    let leaf = match a.data_type() {
        arrow_schema::DataType::Int32 => a.as_primitive::<Int32Type>().values().as_ptr() as usize,
        arrow_schema::DataType::Int64 => a.as_primitive::<Int64Type>().values().as_ptr() as usize,
        arrow_schema::DataType::Float32 => {
            a.as_primitive::<Float32Type>().values().as_ptr() as usize
        }
        arrow_schema::DataType::Float64 => {
            a.as_primitive::<Float64Type>().values().as_ptr() as usize
        }
        arrow_schema::DataType::LargeUtf8 => {
            let s = a.as_string::<i64>();
            let offsets = outer_offsets.unwrap_or(s.offsets().as_ptr() as usize);
            return (s.values().as_ptr() as usize, Some(offsets));
        }
        arrow_schema::DataType::LargeBinary => {
            let s = a.as_binary::<i64>();
            let offsets = outer_offsets.unwrap_or(s.offsets().as_ptr() as usize);
            return (s.values().as_ptr() as usize, Some(offsets));
        }
        other => panic!("{other}"),
    };
    (leaf, outer_offsets)
}

#[test]
fn buffers_move_both_ways() {
    let (batch, spec) = every_kind(30, 21);
    let expected = batch.clone();
    let mut checked = 0;
    let mut ptrs = Vec::new();
    for c in batch.columns() {
        let numeric_or_string = c.tensor.dtype() != DType::Bool;
        // Empty vectors do not allocate: nothing to compare.
        let empty = match &c.tensor {
            Tensor::Dense(d) => d.values.is_empty(),
            Tensor::Sparse(s) => s.values.is_empty(),
            Tensor::Ragged(r) => r.flat_values.values.is_empty(),
            _ => true,
        };
        ptrs.push((numeric_or_string && !empty).then(|| grist_ptrs(&c.tensor)));
    }
    let arrow = to_record_batch(batch, &spec).unwrap();
    for ((field, array), want) in arrow
        .schema()
        .fields()
        .iter()
        .zip(arrow.columns())
        .zip(&ptrs)
    {
        let Some(want) = want else { continue };
        let got = arrow_ptrs(array);
        assert_eq!(got.0, want.0, "values of {} were copied", field.name());
        let strings = matches!(
            array.data_type(),
            arrow_schema::DataType::LargeUtf8 | arrow_schema::DataType::LargeBinary
        );
        let kind = field.metadata()["grist.kind"].as_str();
        // Dense strings: their offsets (moved on 64-bit targets only);
        // ragged: the outer row splits.
        let dense_strings = strings && kind == "dense" && cfg!(target_pointer_width = "64");
        if dense_strings || kind == "ragged" {
            assert_eq!(got.1, want.1, "offsets of {} were copied", field.name());
        }
        checked += 1;
    }
    assert!(checked > 50, "{checked}");
    // Back: the record batch owned the buffers alone, so the vectors come
    // back where they were.
    let (back, _) = from_record_batch(arrow, None).unwrap();
    assert_eq!(back, expected);
    let mut back_checked = 0;
    for (c, want) in back.columns().iter().zip(&ptrs) {
        let Some(want) = want else { continue };
        let got = grist_ptrs(&c.tensor);
        assert_eq!(got.0, want.0, "values of {} were copied back", c.name);
        let dense_strings = matches!(&c.tensor, Tensor::Dense(d) if d.dtype() == DType::String);
        if matches!(c.tensor, Tensor::Ragged(_))
            || (dense_strings && cfg!(target_pointer_width = "64"))
        {
            assert_eq!(got.1, want.1, "offsets of {} were copied back", c.name);
        }
        back_checked += 1;
    }
    assert_eq!(back_checked, checked);
}

#[test]
fn shared_buffers_are_copied_back() {
    let batch = Batch::new(
        3,
        vec![crate::support::column(
            "x",
            crate::support::dense(
                &mut grist_tensor::synth::SplitMix64::new(3),
                DType::Int64,
                3,
                &[],
                false,
            ),
        )],
    );
    let arrow = to_record_batch(batch.clone(), &SpecFile::default()).unwrap();
    let before = arrow
        .column(0)
        .as_primitive::<Int64Type>()
        .values()
        .as_ptr() as usize;
    let keep = arrow.clone();
    let (back, _) = from_record_batch(arrow, None).unwrap();
    assert_eq!(back, batch);
    // Another owner holds the buffer: the values are a copy, and the
    // other owner's buffer is intact.
    assert_ne!(grist_ptrs(&back.columns()[0].tensor).0, before);
    assert_eq!(
        keep.column(0).as_primitive::<Int64Type>().values().as_ptr() as usize,
        before
    );
    assert_eq!(keep.column(0).len(), 3);
}
