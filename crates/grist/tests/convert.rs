//! `grist::convert` between every pair of formats, judged by the loader:
//! what it reads from the outputs (with the `spec.json` written beside
//! them) must be what it reads from the sources.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use grist::tensor::json::{batch_to_json, compare_json};
use grist::tensor::synth::{prod19_native, prod19_native_specs};
use grist::tensor::{Batch, DType, FeatureSpec, Format, Lossy, SpecFile, Values, WriteOptions};
use grist::{ConvertError, ConvertTarget, SPEC_FILE, Storage};
use grist_testkit::S3Server;
use grist_testkit::corpus;

const FORMATS: [&str; 4] = ["tfrecord", "avro", "ffrecord", "ofrecord"];
const BATCH: usize = 64;

fn format(id: &str) -> Arc<dyn Format> {
    grist::registry().get(id).unwrap()
}

fn spec_of(features: Vec<FeatureSpec>) -> SpecFile {
    SpecFile {
        features,
        ..SpecFile::default()
    }
}

/// Everything the loader reads from `sources` with `spec`, in batches of
/// `BATCH`.
fn load(storage: &Storage, sources: &[String], spec: &SpecFile) -> Vec<Batch> {
    load_as(storage, sources, spec, None)
}

fn load_as(
    storage: &Storage,
    sources: &[String],
    spec: &SpecFile,
    format: Option<Arc<dyn Format>>,
) -> Vec<Batch> {
    let mut b = grist::loader()
        .with_storage(storage.clone())
        .with_paths(sources.iter().map(PathBuf::from))
        .with_spec_file(spec.clone())
        .with_batch_size(BATCH)
        .with_threads(grist::Threads::Fixed(1));
    if let Some(f) = format {
        b = b.with_format(f);
    }
    b.build()
        .unwrap_or_else(|e| panic!("{sources:?}: {e}"))
        .map(|b| b.unwrap_or_else(|e| panic!("{sources:?}: {e}")))
        .collect()
}

/// The spec written beside the outputs in `out`.
fn written_spec(storage: &Storage, out: &str) -> SpecFile {
    let address = grist::Address::parse(out).unwrap().join(SPEC_FILE);
    let bytes = storage.read_all(&address).unwrap();
    SpecFile::from_json(std::str::from_utf8(&bytes).unwrap()).unwrap()
}

/// Fails unless `got` holds the batches of `want`, value for value and
/// dtype for dtype.
fn assert_same(want: &[Batch], got: &[Batch], what: &str) {
    assert_eq!(want.len(), got.len(), "{what}: batch count");
    for (i, (w, g)) in want.iter().zip(got).enumerate() {
        let columns = |b: &Batch| -> Vec<_> {
            b.columns()
                .iter()
                .map(|c| (c.name.clone(), c.section, c.tensor.dtype()))
                .collect()
        };
        assert_eq!(columns(w), columns(g), "{what}: batch {i}: columns");
        // Values compared as the manifests compare them: floats by their
        // bits (NaN equals NaN).
        if let Err(m) = compare_json(&batch_to_json(w), &batch_to_json(g)) {
            panic!("{what}: batch {i} differs: {m}");
        }
    }
}

/// The records of prod19 with every dtype tf.Example holds losslessly
/// (the float64 features of the Avro record left out), as an Avro file.
fn prod19_avro(dir: &Path, rows: usize) -> (String, SpecFile) {
    let lossless: Vec<FeatureSpec> = prod19_native_specs()
        .into_iter()
        .filter(|s| s.dtype() != DType::Float64)
        .collect();
    let spec = spec_of(lossless);
    let path = dir.join("prod19.avro");
    let native = spec_of(prod19_native_specs());
    let schema = grist::avro::schema_for_specs(&native.features, "Prod19").unwrap();
    let mut w = grist::avro::ContainerWriter::create(&path, &schema, Default::default()).unwrap();
    for datum in grist::avro::encode_batch(&prod19_native(rows, 7), &native).unwrap() {
        w.append_datum(&datum).unwrap();
    }
    w.finish().unwrap();
    (path.display().to_string(), spec)
}

fn out_dir(dir: &Path, name: &str) -> String {
    dir.join(name).display().to_string()
}

/// Every (source, sink) pair on prod19: the loader reads from B what it
/// read from A, and A → B → A gives A's batches again; int32 and bool stay
/// int32 and bool through tf.Example, sparse features stay sparse.
#[test]
fn every_pair_of_formats_round_trips_prod19() {
    let dir = tempfile::tempdir().unwrap();
    let storage = Storage::new();
    let (root, spec) = prod19_avro(dir.path(), 300);
    let reference = load(&storage, std::slice::from_ref(&root), &spec);
    assert_eq!(reference.iter().map(Batch::rows).sum::<usize>(), 300);
    for a in FORMATS {
        // The source in format A, converted from the Avro file.
        let src = out_dir(dir.path(), &format!("src-{a}"));
        let target = ConvertTarget::new(format(a), &src).with_records_per_file(120);
        let report = grist::convert([&root], Some(&spec), &target).unwrap();
        assert_eq!(report.records, 300, "{a}");
        assert_eq!(report.files.len(), 3, "{a}");
        let spec_a = written_spec(&storage, &src);
        let batches_a = load(&storage, std::slice::from_ref(&src), &spec_a);
        assert_same(&reference, &batches_a, &format!("avro -> {a}"));
        for b in FORMATS {
            let what = format!("{a} -> {b}");
            let mid = out_dir(dir.path(), &format!("{a}-{b}"));
            let target = ConvertTarget::new(format(b), &mid)
                .with_files(2)
                .with_threads(3)
                .with_batch_size(50);
            let report = grist::convert([&src], Some(&spec_a), &target)
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!((report.records, report.files.len()), (300, 2), "{what}");
            let spec_b = written_spec(&storage, &mid);
            assert_eq!(spec_b, report.spec, "{what}");
            let batches_b = load(&storage, std::slice::from_ref(&mid), &spec_b);
            assert_same(&batches_a, &batches_b, &what);
            // And back to A.
            let back = out_dir(dir.path(), &format!("{a}-{b}-{a}"));
            let target = ConvertTarget::new(format(a), &back);
            grist::convert([&mid], Some(&spec_b), &target)
                .unwrap_or_else(|e| panic!("{what} -> {a}: {e}"));
            let spec_back = written_spec(&storage, &back);
            let batches_back = load(&storage, std::slice::from_ref(&back), &spec_back);
            assert_same(&batches_a, &batches_back, &format!("{what} -> {a}"));
        }
    }
}

/// float64 has no tf.Example list: converting it is refused before any
/// output exists, naming the feature, unless lossy conversions are
/// allowed; Avro, OFRecord and FFRecord's OFRecord payloads keep it.
#[test]
fn float64_is_refused_by_tf_example_unless_lossy_and_kept_elsewhere() {
    let dir = tempfile::tempdir().unwrap();
    let storage = Storage::new();
    let (root, _) = prod19_avro(dir.path(), 100);
    let full = spec_of(prod19_native_specs());
    let first_f64 = full
        .features
        .iter()
        .find(|s| s.dtype() == DType::Float64)
        .unwrap()
        .name()
        .to_string();
    let source = load(&storage, std::slice::from_ref(&root), &full);
    for id in ["tfrecord", "ffrecord"] {
        let out = out_dir(dir.path(), &format!("refused-{id}"));
        let err = grist::convert([&root], Some(&full), &ConvertTarget::new(format(id), &out))
            .unwrap_err();
        assert!(matches!(err, ConvertError::Target { .. }), "{id}: {err}");
        let chain = grist_testkit::chain(&err);
        assert!(chain.contains(&first_f64), "{id}: {chain}");
        assert!(!Path::new(&out).exists(), "{id}: nothing is written");

        let out = out_dir(dir.path(), &format!("lossy-{id}"));
        let target = ConvertTarget::new(format(id), &out)
            .with_options(WriteOptions::new().with_lossy(Lossy::Allow));
        let report = grist::convert([&root], Some(&full), &target).unwrap();
        let spec = written_spec(&storage, &out);
        assert_eq!(spec, report.spec);
        let got = load(&storage, std::slice::from_ref(&out), &spec);
        // Every float64 column now reads as float32: the source's values
        // narrowed; every other column as it was.
        for (w, g) in source.iter().zip(&got) {
            for (a, b) in w.columns().iter().zip(g.columns()) {
                let dense = (a.tensor.as_dense(), b.tensor.as_dense());
                match dense {
                    (Some(x), Some(y)) if x.values.dtype() == DType::Float64 => {
                        let (Values::Float64(x), Values::Float32(y)) = (&x.values, &y.values)
                        else {
                            panic!("{id}: {}: {:?}", a.name, y.values.dtype());
                        };
                        let narrowed: Vec<f32> = x.iter().map(|&v| v as f32).collect();
                        assert_eq!(&narrowed, y, "{id}: {}", a.name);
                    }
                    _ => assert_eq!(a, b, "{id}"),
                }
            }
        }
    }
    // Formats with a float64 type keep it.
    for (id, options, read_as) in [
        ("avro", WriteOptions::new(), None),
        ("ofrecord", WriteOptions::new(), None),
        (
            "ffrecord",
            WriteOptions::new().with_payload("ofrecord"),
            Some(format("ffrecord").configure("payload", "ofrecord").unwrap()),
        ),
    ] {
        let out = out_dir(dir.path(), &format!("kept-{id}"));
        let target = ConvertTarget::new(format(id), &out).with_options(options);
        grist::convert([&root], Some(&full), &target).unwrap();
        let spec = written_spec(&storage, &out);
        let got = load_as(&storage, std::slice::from_ref(&out), &spec, read_as);
        assert_same(&source, &got, id);
    }
}

/// TFRecord's and Avro's codecs: every output reads back the same.
#[test]
fn compressed_outputs_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let storage = Storage::new();
    let (root, spec) = prod19_avro(dir.path(), 150);
    let source = load(&storage, std::slice::from_ref(&root), &spec);
    let mut cases = vec![
        ("tfrecord", WriteOptions::new().with_compression("GZIP")),
        ("tfrecord", WriteOptions::new().with_compression("ZLIB")),
    ];
    if grist::tfrecord::Compression::Zstd.is_enabled() {
        cases.push(("tfrecord", WriteOptions::new().with_compression("ZSTD")));
    }
    for codec in grist::avro::Codec::ALL.iter().filter(|c| c.is_enabled()) {
        cases.push(("avro", WriteOptions::new().with_codec(codec.name())));
    }
    for (i, (id, options)) in cases.into_iter().enumerate() {
        let out = out_dir(dir.path(), &format!("c{i}"));
        let target = ConvertTarget::new(format(id), &out).with_options(options.clone());
        grist::convert([&root], Some(&spec), &target).unwrap();
        let got = load(
            &storage,
            std::slice::from_ref(&out),
            &written_spec(&storage, &out),
        );
        assert_same(&source, &got, &format!("{id} {options:?}"));
    }
    // An unknown codec is refused before anything is written.
    let out = out_dir(dir.path(), "bad-codec");
    let target = ConvertTarget::new(format("tfrecord"), &out)
        .with_options(WriteOptions::new().with_compression("LZ5"));
    assert!(grist::convert([&root], Some(&spec), &target).is_err());
    assert!(!Path::new(&out).exists());
}

/// Every corpus TFRecord and Avro parse that reads without error (the
/// generic key-expression ones aside), SequenceExamples included, into
/// every format that can hold its spec: the outputs read as the source.
/// A target that refuses a spec refuses it before writing anything.
#[test]
fn corpus_parses_convert_to_every_format_that_holds_them() {
    let dir = tempfile::tempdir().unwrap();
    let storage = Storage::new();
    let (mut converted, mut sequences, mut refused) = (0, 0, 0);
    for section in ["tfrecord", "avro"] {
        for case in corpus::cases(section).into_iter().filter(|c| c.is_ok()) {
            for (p, parse) in case.parses().iter().enumerate() {
                let generic = parse["api"]
                    .as_str()
                    .is_some_and(|api| api.contains("parse_avro"));
                if generic || parse["outcome"] != "ok" {
                    continue;
                }
                let spec = SpecFile::from_json(&parse.to_string()).unwrap();
                let sources: Vec<String> =
                    case.files.iter().map(|f| f.display().to_string()).collect();
                let source = load(&storage, &sources, &spec);
                for id in FORMATS {
                    let what = format!("{} parse {p} -> {id}", case.name);
                    let out = out_dir(dir.path(), &format!("{}-{p}-{id}", case.name));
                    let target = ConvertTarget::new(format(id), &out).with_batch_size(7);
                    match grist::convert(case.files.clone(), Some(&spec), &target) {
                        Ok(report) => {
                            let spec_b = written_spec(&storage, &out);
                            assert_eq!(spec_b.sequence, spec.sequence, "{what}");
                            let got = load(&storage, std::slice::from_ref(&out), &spec_b);
                            assert_same(&source, &got, &what);
                            assert_eq!(
                                report.records,
                                source.iter().map(|b| b.rows() as u64).sum::<u64>()
                            );
                            converted += 1;
                            sequences += usize::from(spec.sequence);
                        }
                        Err(e @ ConvertError::Target { .. }) => {
                            assert!(!Path::new(&out).exists(), "{what}: {e}");
                            refused += 1;
                        }
                        Err(e) => panic!("{what}: {}", grist_testkit::chain(&e)),
                    }
                }
            }
        }
    }
    assert!(converted > 40, "{converted} converted, {refused} refused");
    assert!(sequences >= 1, "a SequenceExample parse converted");
}

/// Records that lack optional features (a dense default, an empty varlen
/// list, an absent sparse feature) keep what the loader made of them.
#[test]
fn missing_optional_features_and_empty_inputs() {
    use grist::tfrecord::{ExampleBuilder, RecordWriter};
    let dir = tempfile::tempdir().unwrap();
    let storage = Storage::new();
    let path = dir.path().join("in.tfrecord");
    let mut w = RecordWriter::create(&path, Default::default()).unwrap();
    for i in 0..20i64 {
        let mut e = ExampleBuilder::new().with_int64s("id", [i]);
        if i % 3 == 0 {
            e = e.with_floats("opt", [i as f32 * 0.5]);
        }
        if i % 2 == 0 {
            e = e.with_bytes("tags", vec![format!("t{i}"); (i % 5) as usize]);
        }
        if i % 4 == 1 {
            e = e.with_int64s("sp_i", [i % 7]).with_floats("sp_v", [1.5]);
        }
        w.write_record(&e.encode()).unwrap();
    }
    w.finish().unwrap();
    let spec = SpecFile::from_json(
        r#"[{"name": "id", "kind": "dense", "dtype": "int32", "shape": []},
            {"name": "opt", "kind": "dense", "dtype": "float32", "shape": [], "default": -1.0},
            {"name": "tags", "kind": "varlen", "dtype": "string"},
            {"name": "sp", "kind": "sparse", "dtype": "float32",
             "index_key": "sp_i", "value_key": "sp_v", "size": 7}]"#,
    )
    .unwrap();
    let sources = [path.display().to_string()];
    let source = load(&storage, &sources, &spec);
    for id in FORMATS {
        let out = out_dir(dir.path(), id);
        grist::convert([&path], Some(&spec), &ConvertTarget::new(format(id), &out)).unwrap();
        let got = load(
            &storage,
            std::slice::from_ref(&out),
            &written_spec(&storage, &out),
        );
        assert_same(&source, &got, id);
    }
    // No spec: the one `infer_spec` infers is used, and the outputs read
    // back as the sources read with it.
    let inferred =
        grist::infer_spec([&path], &storage, &grist::tensor::InferOptions::default()).unwrap();
    let by_inference = load(&storage, &sources, &inferred.spec);
    let out = out_dir(dir.path(), "no-spec");
    let report = grist::convert([&path], None, &ConvertTarget::new(format("avro"), &out)).unwrap();
    assert_eq!(report.notes, inferred.notes);
    let got = load(
        &storage,
        std::slice::from_ref(&out),
        &written_spec(&storage, &out),
    );
    assert_same(&by_inference, &got, "avro (inferred spec)");
    // Records with no feature: nothing to infer, no conversion, and
    // nothing written.
    let featureless = dir.path().join("featureless.tfrecord");
    let mut w = grist::tfrecord::RecordWriter::create(&featureless, Default::default()).unwrap();
    w.write_record(&grist::tfrecord::ExampleBuilder::new().encode())
        .unwrap();
    w.finish().unwrap();
    let out = out_dir(dir.path(), "featureless");
    let err = grist::convert(
        [&featureless],
        None,
        &ConvertTarget::new(format("avro"), &out),
    )
    .unwrap_err();
    assert!(
        matches!(err, ConvertError::NeedsSpec { format: "TFRecord" }),
        "{err}"
    );
    assert!(!Path::new(&out).exists());
    // An empty input gives one empty file, and a spec, that read as empty.
    let empty = dir.path().join("empty.tfrecord");
    std::fs::write(&empty, b"").unwrap();
    for id in FORMATS {
        let out = out_dir(dir.path(), &format!("empty-{id}"));
        let target = ConvertTarget::new(format(id), &out);
        let report = grist::convert([&empty], Some(&spec), &target).unwrap();
        assert_eq!((report.records, report.files.len()), (0, 1), "{id}");
        let got = load(
            &storage,
            std::slice::from_ref(&out),
            &written_spec(&storage, &out),
        );
        assert!(got.iter().all(|b| b.rows() == 0), "{id}");
    }
}

/// A conversion that fails part way (record 37 of 50, 12 records per
/// file) keeps the files it finished, each whole, and leaves nothing
/// under the name of the one it was writing (and no spec.json).
#[test]
fn a_failed_conversion_leaves_only_whole_files() {
    use grist::tfrecord::{ExampleBuilder, RecordWriter};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("in.tfrecord");
    let mut w = RecordWriter::create(&path, Default::default()).unwrap();
    for i in 0..50i64 {
        // Record 37 lacks the required feature.
        let e = if i == 37 {
            ExampleBuilder::new()
        } else {
            ExampleBuilder::new().with_int64s("id", [i])
        };
        w.write_record(&e.encode()).unwrap();
    }
    w.finish().unwrap();
    let spec = spec_of(vec![FeatureSpec::dense("id", DType::Int64, [])]);
    for id in FORMATS {
        let out = dir.path().join(format!("out-{id}"));
        let target = ConvertTarget::new(format(id), out.display().to_string())
            .with_records_per_file(12)
            .with_batch_size(8);
        let err = grist::convert([&path], Some(&spec), &target).unwrap_err();
        let chain = grist_testkit::chain(&err);
        assert!(
            chain.contains("in.tfrecord") && chain.contains("37") && chain.contains("id"),
            "{id}: {chain}"
        );
        let names = grist_testkit::dir_entries(&out);
        let part = |n| format(id).part_name(n, &WriteOptions::new());
        // The finished parts, what the conversion is, and the journal
        // that lets a rerun resume after them.
        assert_eq!(
            names,
            vec![
                "convert-journal.json".to_string(),
                "convert.json".to_string(),
                part(0),
                part(1)
            ],
            "{id}: only the finished parts"
        );
        let got = load(
            &Storage::new(),
            &[out.join(part(1)).display().to_string()],
            &spec,
        );
        assert_eq!(got.iter().map(Batch::rows).sum::<usize>(), 12, "{id}");
    }
}

/// Outputs go through the storage layer: converting to an S3 URL writes
/// objects that the loader reads back over S3 as the local source reads.
#[test]
fn converts_to_an_object_store() {
    let dir = tempfile::tempdir().unwrap();
    let (root, spec) = prod19_avro(dir.path(), 200);
    let source = load(&Storage::new(), std::slice::from_ref(&root), &spec);
    let store = tempfile::tempdir().unwrap();
    let server = S3Server::start(store.path());
    server.bucket("out");
    let storage = server.storage();
    for id in FORMATS {
        let url = server.url("out", &format!("{id}/"));
        let target = ConvertTarget::new(format(id), &url)
            .with_storage(storage.clone())
            .with_records_per_file(90);
        let report = grist::convert([&root], Some(&spec), &target).unwrap();
        assert_eq!(report.files.len(), 3, "{id}");
        assert!(report.files[0].0.is_remote(), "{id}");
        let got = load(
            &storage,
            std::slice::from_ref(&url),
            &written_spec(&storage, &url),
        );
        assert_same(&source, &got, &format!("s3 {id}"));
        // And back: the objects are a conversion's inputs, read over S3.
        let back = dir.path().join(format!("back-{id}"));
        let target = ConvertTarget::new(format("tfrecord"), back.display().to_string())
            .with_storage(storage.clone())
            .with_batch_size(16);
        let report = grist::convert([&url], Some(&written_spec(&storage, &url)), &target).unwrap();
        assert_eq!(report.records, 200, "{id} back");
        let back = back.display().to_string();
        let again = load(
            &Storage::new(),
            std::slice::from_ref(&back),
            &written_spec(&Storage::new(), &back),
        );
        assert_same(&source, &again, &format!("s3 {id} back"));
        // A sink dropped unfinished leaves no object.
        let f = format(id);
        let spec_b = written_spec(&storage, &url);
        let options = WriteOptions::new();
        let mut records = grist::tensor::RecordBuf::new();
        f.encoder(&spec_b, &options)
            .unwrap()
            .encode(&got[0], &mut records)
            .unwrap();
        let address = grist::Address::parse(&url).unwrap().join("dropped");
        let mut sink = f.create(&storage, &address, &spec_b, &options).unwrap();
        for r in records.iter() {
            sink.write(r).unwrap();
        }
        drop(sink);
        assert!(storage.stat(&address).unwrap().is_none(), "{id}");
    }
}

/// `ConvertTarget::with_reader_schema`: three schema versions converted
/// without a spec, the spec inferred from the reader schema; the outputs
/// hold what apache-avro reads through it, and carry no reader schema.
#[test]
fn a_reader_schema_converts_the_versions_without_a_spec() {
    use grist_testkit::evolution::{
        READER_SCHEMA, RECORDS, reader_fields, reference_records, write_dataset,
    };
    let tmp = tempfile::tempdir().unwrap();
    let files = write_dataset(tmp.path());
    let out = tmp.path().join("out");
    let reader: serde_json::Value = serde_json::from_str(READER_SCHEMA).unwrap();
    let target = ConvertTarget::new(format("avro"), out.to_string_lossy())
        .with_reader_schema(reader.clone());
    let report = grist::convert(&files, None, &target).unwrap();
    assert_eq!(report.records, 3 * RECORDS as u64);
    assert!(report.spec.reader_schema.is_none());
    let names: Vec<&str> = report.spec.features.iter().map(FeatureSpec::name).collect();
    let fields = reader_fields();
    assert_eq!(names, fields);
    let storage = Storage::new();
    let back = load(
        &storage,
        &[out.to_string_lossy().into_owned()],
        &report.spec,
    );
    let ids: Vec<i64> = back
        .iter()
        .flat_map(|b| b.dense::<i64>("id").unwrap().values.to_vec())
        .collect();
    let want: Vec<i64> = files
        .iter()
        .flat_map(|f| reference_records(f))
        .map(|r| r["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, want);
    // Without it, the writer schemas disagree and fewer features are
    // inferred.
    let plain = ConvertTarget::new(format("avro"), tmp.path().join("plain").to_string_lossy());
    let report = grist::convert(&files, None, &plain).unwrap();
    assert!(report.spec.features.len() < fields.len());
}

/// The threads that decode a conversion's batches check what the reading
/// thread left them: a TFRecord record whose data CRC is wrong (its bytes
/// still parse) fails the conversion, naming the file and the record.
#[test]
fn a_damaged_record_fails_the_conversion_where_it_is() {
    use grist::tfrecord::{ExampleBuilder, RecordWriter};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("in.tfrecord");
    let mut w = RecordWriter::create(&path, Default::default()).unwrap();
    let mut ends = Vec::new();
    for i in 0..40i64 {
        w.write_record(&ExampleBuilder::new().with_int64s("id", [i]).encode())
            .unwrap();
        ends.push(w.bytes());
    }
    w.finish().unwrap();
    let mut bytes = std::fs::read(&path).unwrap();
    // The last byte of record 25's masked data CRC.
    bytes[ends[25] as usize - 1] ^= 0x01;
    std::fs::write(&path, &bytes).unwrap();
    let spec = spec_of(vec![FeatureSpec::dense("id", DType::Int64, [])]);
    for id in FORMATS {
        let out = dir.path().join(format!("out-{id}"));
        let target = ConvertTarget::new(format(id), out.display().to_string()).with_batch_size(8);
        let err = grist::convert([&path], Some(&spec), &target).unwrap_err();
        let chain = grist_testkit::chain(&err);
        assert!(
            chain.contains("in.tfrecord: record 25:") && chain.contains("data CRC mismatch"),
            "{id}: {chain}"
        );
    }
}
