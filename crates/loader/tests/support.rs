//! Test data: the same records in every format, and loaders over them.

use std::path::PathBuf;
use std::sync::Arc;

use grist_avro_tensor::{Codec, ContainerWriter, schema_for_specs};
use grist_loader::{Loader, LoaderBuilder, LoaderState, RandomAccess, Threads};
use grist_tensor::{Batch, DType, FeatureSpec, Registry, Values};
use grist_tfrecord::{Compression, ExampleBuilder, RecordWriter};

/// Every format, as the `grist` crate's registry has them (the loader
/// knows none itself).
pub fn registry() -> Registry {
    Registry::new()
        .with_format(Arc::new(grist_tfrecord::TfRecordFormat))
        .with_format(Arc::new(grist_avro_tensor::AvroFormat))
        .with_format(Arc::new(grist_ffrecord::FfrFormat::default()))
        .with_format(Arc::new(grist_ofrecord::OfRecordFormat::default()))
}

/// A loader builder that knows every format.
pub fn loader() -> LoaderBuilder {
    Loader::builder().with_registry(registry())
}

/// The ways the tests read data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// TFRecord files read as a stream.
    Tfrecord,
    /// GZIP TFRecord files (a stream).
    TfrecordGzip,
    /// TFRecord files with index files, read by number.
    TfrecordIndexed,
    /// Avro files, codec null, small blocks.
    Avro,
    /// Avro files, codec deflate, small blocks.
    AvroDeflate,
    /// FFRecord files (read by number).
    Ffrecord,
    /// OFRecord parts read as a stream.
    Ofrecord,
    /// OFRecord parts read by number (index built on first read).
    OfrecordIndexed,
}

pub const KINDS: [Kind; 8] = [
    Kind::Tfrecord,
    Kind::TfrecordGzip,
    Kind::TfrecordIndexed,
    Kind::Avro,
    Kind::AvroDeflate,
    Kind::Ffrecord,
    Kind::Ofrecord,
    Kind::OfrecordIndexed,
];

/// Files of `files` files holding records `0..total` (file `f` holds
/// `base + 7 f` records, ids counted across files in order).
pub struct Fixture {
    pub kind: Kind,
    pub sources: Vec<PathBuf>,
    pub total: i64,
    pub files: usize,
    _dir: tempfile::TempDir,
}

pub fn specs() -> Vec<FeatureSpec> {
    vec![
        FeatureSpec::dense("id", DType::Int64, []),
        FeatureSpec::dense("x", DType::Float32, [3]),
        serde_json::from_str(
            r#"{"name": "tags", "kind": "varlen", "dtype": "int64", "shape": [-1]}"#,
        )
        .unwrap(),
    ]
}

fn x(id: i64) -> [f32; 3] {
    [id as f32 * 0.5, -(id as f32), 1.0]
}

fn tags(id: i64) -> Vec<i64> {
    (0..id % 4).map(|k| id * 10 + k).collect()
}

fn example(id: i64) -> Vec<u8> {
    ExampleBuilder::new()
        .with_int64s("id", [id])
        .with_floats("x", x(id))
        .with_int64s("tags", tags(id))
        .encode()
}

fn zigzag(v: i64, out: &mut Vec<u8>) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        out.push((z as u8) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

fn avro_datum(id: i64) -> Vec<u8> {
    let mut d = Vec::new();
    zigzag(id, &mut d);
    zigzag(3, &mut d);
    for v in x(id) {
        d.extend(v.to_le_bytes());
    }
    zigzag(0, &mut d);
    let t = tags(id);
    if !t.is_empty() {
        zigzag(t.len() as i64, &mut d);
        for v in t {
            zigzag(v, &mut d);
        }
    }
    zigzag(0, &mut d);
    d
}

impl Fixture {
    pub fn new(kind: Kind, files: usize, base: i64) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let mut sources = Vec::new();
        let mut id = 0i64;
        let counts: Vec<i64> = (0..files as i64).map(|f| base + 7 * f).collect();
        match kind {
            Kind::Ofrecord | Kind::OfrecordIndexed => {
                for (f, &n) in counts.iter().enumerate() {
                    let part = dir.path().join(format!("part-{f:05}"));
                    let mut w =
                        grist_ofrecord::RecordWriter::new(std::fs::File::create(&part).unwrap());
                    for _ in 0..n {
                        let r = grist_ofrecord::RecordBuilder::new()
                            .with_int64s("id", [id])
                            .with_floats("x", x(id))
                            .with_int64s("tags", tags(id));
                        w.write_record(&r.encode()).unwrap();
                        id += 1;
                    }
                    drop(w);
                }
                sources.push(dir.path().to_path_buf());
            }
            _ => {
                for (f, &n) in counts.iter().enumerate() {
                    let name = match kind {
                        Kind::Tfrecord | Kind::TfrecordIndexed => format!("data-{f}.tfrecord"),
                        Kind::TfrecordGzip => format!("data-{f}.tfrecord.gz"),
                        Kind::Avro | Kind::AvroDeflate => format!("data-{f}.avro"),
                        _ => format!("data-{f}.ffr"),
                    };
                    let path = dir.path().join(name);
                    let ids = id..id + n;
                    id += n;
                    match kind {
                        Kind::Tfrecord | Kind::TfrecordGzip | Kind::TfrecordIndexed => {
                            let options = grist_tfrecord::WriterOptions::default()
                                .with_index(kind == Kind::TfrecordIndexed)
                                .with_compression(
                                    (kind == Kind::TfrecordGzip).then_some(Compression::Gzip),
                                );
                            let mut w = RecordWriter::create(&path, options).unwrap();
                            for i in ids {
                                w.write_record(&example(i)).unwrap();
                            }
                            w.finish().unwrap();
                        }
                        Kind::Avro | Kind::AvroDeflate => {
                            let codec = if kind == Kind::Avro {
                                Codec::Null
                            } else {
                                Codec::Deflate
                            };
                            let schema = schema_for_specs(&specs(), "Row").unwrap();
                            let options = grist_avro_tensor::WriterOptions::default()
                                .with_codec(codec)
                                .with_sync_interval(150);
                            let mut w = ContainerWriter::create(&path, &schema, options).unwrap();
                            for i in ids {
                                w.append_datum(&avro_datum(i)).unwrap();
                            }
                            w.finish().unwrap();
                        }
                        _ => {
                            let mut w = grist_ffrecord::FfrWriter::create(
                                &path,
                                grist_ffrecord::WriterOptions::default(),
                            )
                            .unwrap();
                            for i in ids {
                                w.write_sample(&example(i)).unwrap();
                            }
                            w.finish().unwrap();
                        }
                    }
                    sources.push(path);
                }
            }
        }
        Fixture {
            kind,
            sources,
            total: id,
            files,
            _dir: dir,
        }
    }

    /// The standard test data: 4 files of 40, 47, 54 and 61 records.
    pub fn standard(kind: Kind) -> Fixture {
        Fixture::new(kind, 4, 40)
    }

    /// A loader of the fixture: batches of 16, small chunks, 2 threads.
    pub fn builder(&self) -> LoaderBuilder {
        self.builder_of(self.sources.clone())
    }

    /// [`builder`](Self::builder) of other sources (the fixture's files
    /// elsewhere: URLs of an object store).
    pub fn builder_of<P: Into<PathBuf>>(
        &self,
        sources: impl IntoIterator<Item = P>,
    ) -> LoaderBuilder {
        let access = match self.kind {
            // (FFRecord: by number even from an object store, where
            // `Auto` would stream shuffled samples.)
            Kind::TfrecordIndexed | Kind::OfrecordIndexed | Kind::Ffrecord => {
                RandomAccess::Required
            }
            Kind::Ofrecord => RandomAccess::Off,
            _ => RandomAccess::Auto,
        };
        loader()
            .with_paths(sources)
            .with_specs(specs())
            .with_batch_size(16)
            .with_chunk_bytes(300)
            .with_random_access(access)
            .with_threads(Threads::Fixed(2))
    }

    /// The id of the fixture's format.
    pub fn format(&self) -> &'static str {
        match self.kind {
            Kind::Tfrecord | Kind::TfrecordGzip | Kind::TfrecordIndexed => "tfrecord",
            Kind::Avro | Kind::AvroDeflate => "avro",
            Kind::Ffrecord => "ffrecord",
            Kind::Ofrecord | Kind::OfrecordIndexed => "ofrecord",
        }
    }
}

/// The ids of a batch, checking every column against them.
pub fn ids(batch: &Batch) -> Vec<i64> {
    let Values::Int64(ids) = &batch.get("id").unwrap().as_dense().unwrap().values else {
        panic!("id is not int64")
    };
    let xs = batch.get("x").unwrap().as_dense().unwrap();
    let Values::Float32(xv) = &xs.values else {
        panic!("x is not float32")
    };
    for (row, &id) in ids.iter().enumerate() {
        assert_eq!(&xv[row * 3..row * 3 + 3], &x(id), "x of id {id}");
    }
    let t = batch.get("tags").unwrap().as_sparse().unwrap();
    let Values::Int64(tv) = &t.values else {
        panic!("tags are not int64")
    };
    let mut got: Vec<Vec<i64>> = vec![Vec::new(); ids.len()];
    for (k, v) in tv.iter().enumerate() {
        got[t.indices[2 * k] as usize].push(*v);
    }
    for (row, &id) in ids.iter().enumerate() {
        assert_eq!(got[row], tags(id), "tags of id {id}");
    }
    ids.clone()
}

/// Every batch of `loader` with the epoch it belongs to.
pub fn drain(loader: &mut Loader) -> Vec<(u64, Batch)> {
    let mut out = Vec::new();
    while let Some(b) = loader.next_batch() {
        let b = b.unwrap_or_else(|e| panic!("{e}"));
        out.push((loader.state().epoch(), b));
    }
    out
}

/// The ids of `batches` per epoch.
pub fn ids_by_epoch(batches: &[(u64, Batch)]) -> Vec<Vec<i64>> {
    let mut out: Vec<Vec<i64>> = Vec::new();
    for (e, b) in batches {
        let e = *e as usize;
        if out.len() <= e {
            out.resize(e + 1, Vec::new());
        }
        out[e].extend(ids(b));
    }
    out
}

/// A state through JSON, as a checkpoint would keep it.
pub fn roundtrip(state: &LoaderState) -> LoaderState {
    serde_json::from_str(&serde_json::to_string(state).unwrap()).unwrap()
}
