//! Payload decoders: FFRecord samples are opaque bytes; these turn them
//! into batch rows.

use std::sync::Arc;

use grist_ofrecord::OfRecordDecoder;
use grist_tensor::{
    Batch, BatchBuilder, ColumnBuilder, DType, DenseBuilder, FeatureSpec, Section, TensorError,
    Values,
};
use grist_tensor::{FeatureProblem, Location};
use grist_tfrecord::ExampleDecoder;

use crate::error::{Error, Result};
use crate::reader::Sample;

/// Decodes sample payloads into batch rows: serialized
/// `tf.train.Example`s (or `SequenceExample`s) with grist-tfrecord's
/// parser, serialized OneFlow `OFRecord`s with grist-ofrecord's, or raw
/// little-endian tensor bytes.
///
/// Build it once from the specs, then decode many samples: a batch read
/// by index with [`decode_samples`](Self::decode_samples), or the chunks
/// of an [`FfrSource`](crate::FfrSource) through [`grist_tensor::Decoder`].
/// Errors name the file, the sample and the feature.
///
/// ```
/// use grist_ffrecord::{FfrReader, PayloadDecoder, ReaderOptions, encode_file};
/// use grist_tensor::{DType, FeatureSpec, Values};
///
/// // Samples of three little-endian f32 each.
/// let samples: Vec<Vec<u8>> = (0..4)
///     .map(|i| [i as f32, 0.5, -1.0].iter().flat_map(|x| x.to_le_bytes()).collect())
///     .collect();
/// let file = encode_file(samples.iter().map(|s| &s[..]));
/// let reader = FfrReader::from_bytes("mem.ffr", file.into(), ReaderOptions::default())?;
/// let mut decoder = PayloadDecoder::raw(&FeatureSpec::dense("x", DType::Float32, [3]))?;
/// let batch = decoder.decode_samples(&reader.read(&[2, 0])?)?;
/// let x = batch.get("x").unwrap().as_dense().unwrap();
/// assert_eq!(x.shape, vec![2, 3]);
/// assert_eq!(x.values, Values::Float32(vec![2.0, 0.5, -1.0, 0.0, 0.5, -1.0]));
/// # Ok::<(), grist_ffrecord::Error>(())
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
// Built once per run and never moved on the hot path: no need to box.
#[allow(clippy::large_enum_variant)]
pub enum PayloadDecoder {
    /// Serialized `tf.train.Example` or `tf.train.SequenceExample`
    /// payloads, parsed as `tf.io.parse_example` /
    /// `tf.io.parse_sequence_example` would.
    Example(ExampleDecoder),
    /// Serialized OneFlow `OFRecord` payloads, decoded by grist feature
    /// specs or OneFlow's raw and bytes decoders.
    OfRecord(OfRecordDecoder),
    /// Raw little-endian tensor bytes of one dtype and shape.
    Raw(RawDecoder),
}

impl PayloadDecoder {
    /// A decoder of serialized `tf.train.Example` payloads for `specs`.
    pub fn example(specs: &[FeatureSpec]) -> Result<Self> {
        ExampleDecoder::new(specs)
            .map(PayloadDecoder::Example)
            .map_err(spec_error)
    }

    /// A decoder of serialized `OFRecord` payloads for `specs` (for
    /// OneFlow's raw and bytes decoders, build an [`OfRecordDecoder`] with
    /// [`OfRecordDecoder::with_fields`] and wrap it in
    /// [`PayloadDecoder::OfRecord`]).
    pub fn ofrecord(specs: &[FeatureSpec]) -> Result<Self> {
        OfRecordDecoder::new(specs)
            .map(PayloadDecoder::OfRecord)
            .map_err(|e| match e {
                grist_ofrecord::Error::Spec(s) => Error::Spec(s),
                other => ofrecord_error(other, None),
            })
    }

    /// A decoder of raw tensor payloads for one dense `spec` (see
    /// [`RawDecoder::new`]).
    pub fn raw(spec: &FeatureSpec) -> Result<Self> {
        RawDecoder::new(spec).map(PayloadDecoder::Raw)
    }

    /// The specs of the columns produced, in output order.
    pub fn specs(&self) -> &[FeatureSpec] {
        match self {
            PayloadDecoder::Example(d) => d.specs(),
            PayloadDecoder::OfRecord(d) => d.specs(),
            PayloadDecoder::Raw(d) => &d.spec,
        }
    }

    /// An empty batch builder for this decoder's columns, with room for
    /// `rows` rows in its dense columns.
    pub fn new_batch(&self, rows: usize) -> BatchBuilder {
        match self {
            PayloadDecoder::Example(d) => d.new_batch(rows),
            PayloadDecoder::OfRecord(d) => d.new_batch(rows),
            PayloadDecoder::Raw(d) => d.new_batch(rows),
        }
    }

    /// Decodes one payload, sample `sample` of `file` (`index` in the
    /// dataset, if known), appending it as a row of `out` (a builder from
    /// [`new_batch`](Self::new_batch)). On error `out` keeps the rows
    /// before it.
    pub fn decode(
        &mut self,
        payload: &[u8],
        file: &Arc<str>,
        sample: u64,
        index: Option<u64>,
        out: &mut BatchBuilder,
    ) -> Result<()> {
        match self {
            PayloadDecoder::Example(d) => d
                .decode_numbered(payload, file, sample, index, out)
                .map_err(|e| example_error(e, index)),
            PayloadDecoder::OfRecord(d) => d
                .decode_numbered(payload, file, sample, index, out)
                .map_err(|e| ofrecord_error(e, index)),
            PayloadDecoder::Raw(d) => d.decode(payload, file, sample, index, out),
        }
    }

    /// Finishes a batch built with [`decode`](Self::decode); `file`,
    /// `sample` and `index` name its first row in errors.
    pub fn finish(
        &mut self,
        out: &mut BatchBuilder,
        file: &Arc<str>,
        sample: u64,
        index: Option<u64>,
    ) -> Result<Batch> {
        match self {
            PayloadDecoder::Example(d) => d
                .finish(out, file, sample)
                .map_err(|e| example_error(e, index)),
            PayloadDecoder::OfRecord(d) => d
                .finish(out, file, sample)
                .map_err(|e| ofrecord_error(e, index)),
            PayloadDecoder::Raw(_) => out.finish().map_err(Error::Spec),
        }
    }

    /// Decodes samples read by [`FfrReader::read`](crate::FfrReader::read)
    /// into one batch, in their order.
    pub fn decode_samples(&mut self, samples: &[Sample]) -> Result<Batch> {
        let mut out = match self {
            PayloadDecoder::Example(d) => d.recycled_batch(samples.len()),
            PayloadDecoder::OfRecord(d) => d.recycled_batch(samples.len()),
            PayloadDecoder::Raw(d) => d.new_batch(samples.len()),
        };
        for s in samples {
            let sample = s.at.record.unwrap_or_default();
            self.decode(&s.data, &s.at.file, sample, s.at.index, &mut out)?;
        }
        let (file, sample, index) = match samples.first() {
            Some(s) => (
                s.at.file.clone(),
                s.at.record.unwrap_or_default(),
                s.at.index,
            ),
            None => (Arc::from(""), 0, None),
        };
        self.finish(&mut out, &file, sample, index)
    }

    /// Gives a finished batch's memory back for the next
    /// [`decode_samples`](Self::decode_samples) to reuse (tf.Example and
    /// OFRecord payloads; a no-op for raw ones).
    pub fn recycle(&mut self, batch: Batch) {
        match self {
            PayloadDecoder::Example(d) => d.recycle(batch),
            PayloadDecoder::OfRecord(d) => d.recycle(batch),
            PayloadDecoder::Raw(_) => {}
        }
    }
}

fn spec_error(e: grist_tfrecord::Error) -> Error {
    match e {
        grist_tfrecord::Error::Spec(s) => Error::Spec(s),
        other => example_error(other, None),
    }
}

/// The error of an OFRecord payload, its location given the sample's
/// number in the dataset when known.
fn ofrecord_error(e: grist_ofrecord::Error, index: Option<u64>) -> Error {
    let e = match index {
        Some(i) => e.with_index(i),
        None => e,
    };
    Error::OfRecord {
        source: Box::new(e),
    }
}

/// The error of a tf.Example payload, its location given the sample's
/// number in the dataset when known.
fn example_error(e: grist_tfrecord::Error, index: Option<u64>) -> Error {
    let e = match index {
        Some(i) => e.with_index(i),
        None => e,
    };
    Error::Example {
        source: Box::new(e),
    }
}

/// Decodes payloads that are the raw little-endian bytes of one tensor of
/// a fixed dtype and shape (what `numpy.ndarray.tobytes()` gives on a
/// little-endian machine) into a dense column `[batch] + shape`.
///
/// `int32`, `int64`, `float32` and `float64` elements are 4 or 8 bytes,
/// `bool` elements one byte that must be 0 or 1; a `string` spec of shape
/// `[]` takes the whole payload as one byte string. A payload whose
/// length is not the shape's element count times the element size is an
/// error naming the sample.
#[derive(Clone, Debug)]
pub struct RawDecoder {
    spec: Vec<FeatureSpec>,
    name: String,
    dtype: DType,
    shape: Vec<usize>,
    /// The payload length every sample must have (`None` for strings).
    len: Option<u64>,
}

impl RawDecoder {
    /// A decoder for one `dense` spec whose dimensions are all known. Its
    /// `default`, if any, is never used: every sample has a payload.
    pub fn new(spec: &FeatureSpec) -> Result<Self> {
        let unsupported = |reason: &str| {
            Error::Spec(TensorError::UnsupportedSpec {
                feature: spec.name().to_string(),
                format: "ffrecord raw tensor",
                kind: spec.kind(),
                reason: reason.to_string(),
            })
        };
        let FeatureSpec::Dense(dense) = spec else {
            return Err(unsupported(
                "a raw payload is one dense tensor: use a dense spec",
            ));
        };
        let mut shape = Vec::with_capacity(dense.shape.len());
        for &d in &dense.shape {
            let d = usize::try_from(d)
                .map_err(|_| unsupported("every dimension of a raw tensor must be known"))?;
            shape.push(d);
        }
        let len = if dense.dtype == DType::String {
            if !shape.is_empty() {
                return Err(unsupported(
                    "a string raw payload is one byte string: its shape must be []",
                ));
            }
            None
        } else {
            let elems = shape
                .iter()
                .try_fold(1u64, |acc, &d| acc.checked_mul(d as u64))
                .ok_or_else(|| unsupported("the shape has too many elements"))?;
            let width = match dense.dtype {
                DType::Bool => 1,
                DType::Int32 | DType::Float32 => 4,
                DType::Int64 | DType::Float64 => 8,
                other => {
                    return Err(unsupported(&format!(
                        "dtype {other} has no raw payload layout"
                    )));
                }
            };
            Some(
                elems
                    .checked_mul(width)
                    .ok_or_else(|| unsupported("the shape has too many elements"))?,
            )
        };
        Ok(RawDecoder {
            spec: vec![spec.clone()],
            name: dense.name.clone(),
            dtype: dense.dtype,
            shape,
            len,
        })
    }

    /// An empty batch builder with room for `rows` rows.
    pub fn new_batch(&self, rows: usize) -> BatchBuilder {
        let mut b = BatchBuilder::new();
        b.push_column(
            self.name.clone(),
            Section::Features,
            ColumnBuilder::Dense(DenseBuilder::new(self.dtype, self.shape.clone())),
        );
        b.reserve_rows(rows);
        b
    }

    /// Decodes one payload (sample `sample` of `file`, `index` in the
    /// dataset if known) as a row of `out`.
    pub fn decode(
        &self,
        payload: &[u8],
        file: &Arc<str>,
        sample: u64,
        index: Option<u64>,
        out: &mut BatchBuilder,
    ) -> Result<()> {
        let fail = |problem| {
            let at = Location::record(file.clone(), sample).with_feature(self.name.as_str());
            Error::Feature {
                at: match index {
                    Some(i) => at.with_index(i).into(),
                    None => at.into(),
                },
                problem,
            }
        };
        if let Some(expected) = self.len {
            if payload.len() as u64 != expected {
                return Err(fail(FeatureProblem::WrongByteLength {
                    expected,
                    actual: payload.len() as u64,
                }));
            }
        }
        let builder = out.columns_mut().first_mut().map(|c| &mut c.builder);
        let Some(ColumnBuilder::Dense(d)) = builder.filter(|b| {
            matches!(b, ColumnBuilder::Dense(d)
                if d.values.dtype() == self.dtype && d.row_shape() == self.shape)
        }) else {
            return Err(Error::Spec(TensorError::InvalidSpec {
                feature: self.name.clone(),
                reason: "the batch builder was not made by this decoder".into(),
            }));
        };
        match &mut d.values {
            Values::Bool(v) => {
                if let Some(k) = payload.iter().position(|&b| b > 1) {
                    return Err(fail(FeatureProblem::BadBool {
                        offset: k,
                        value: payload[k],
                    }));
                }
                v.extend(payload.iter().map(|&b| b == 1));
            }
            Values::Int32(v) => grist_tensor::le::extend(v, payload),
            Values::Float32(v) => grist_tensor::le::extend(v, payload),
            Values::Int64(v) => grist_tensor::le::extend(v, payload),
            Values::Float64(v) => grist_tensor::le::extend(v, payload),
            Values::String(v) => v.push(payload),
            // `new` refuses the dtypes without a raw layout.
            other => {
                return Err(Error::Spec(TensorError::Unsupported {
                    what: format!("ffrecord raw tensor of {} values", other.dtype()),
                }));
            }
        }
        d.end_row();
        out.end_row();
        Ok(())
    }
}
