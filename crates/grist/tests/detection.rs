//! Which format a file holds, told by the one registry the loader and the
//! CLI share: extensions first, `part-<digits>` for OFRecord, then the
//! content; locally and over S3 alike.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use grist::Format;
use grist::tensor::{FormatError, RegistryError};
use grist::{LoadError, Storage};
use grist_testkit::S3Server;

use crate::fixture::{Fixture, Kind, specs};

/// The files of a fixture of `kind` (one file of 20 records, or a folder
/// of one part), copied under `name` into `dir`.
fn place(kind: Kind, dir: &Path, name: &str) {
    let fx = Fixture::new(kind, 1, 20);
    let from = &fx.sources[0];
    let from = if from.is_dir() {
        from.join("part-00000")
    } else {
        from.clone()
    };
    std::fs::copy(from, dir.join(name)).unwrap();
}

/// The loader's format and record count for `source`, read through
/// `storage`.
fn load(storage: &Storage, source: &str) -> Result<(&'static str, usize), LoadError> {
    let loader = grist::loader()
        .with_storage(storage.clone())
        .with_path(source)
        .with_specs(specs())
        .with_batch_size(7)
        .build()?;
    let id = loader.format().id();
    let mut n = 0;
    for b in loader {
        n += b?.rows();
    }
    Ok((id, n))
}

/// The test files: (name, kind) in one folder each.
const FILES: [(&str, Kind); 7] = [
    ("part-00000.tfrecord", Kind::Tfrecord),
    ("part-00000.tfrecord.gz", Kind::TfrecordGzip),
    ("part-r-00000.avro", Kind::Avro),
    ("avro-data.bin", Kind::Avro),
    ("gzipped.bin", Kind::TfrecordGzip),
    ("part-00000", Kind::Ofrecord),
    ("PART_00000.ffr", Kind::Ffrecord),
];

fn id_of(kind: Kind) -> &'static str {
    match kind {
        Kind::Tfrecord | Kind::TfrecordGzip | Kind::TfrecordIndexed => "tfrecord",
        Kind::Avro | Kind::AvroDeflate => "avro",
        Kind::Ffrecord => "ffrecord",
        Kind::Ofrecord | Kind::OfrecordIndexed => "ofrecord",
    }
}

/// Every file by itself, and the folder holding it (with a Spark
/// `_SUCCESS` marker and an index file beside it), locally and over S3.
#[test]
fn files_and_folders_of_each_format() {
    let root = tempfile::tempdir().unwrap();
    let data = root.path().join("data");
    for (i, (name, kind)) in FILES.iter().enumerate() {
        let dir = data.join(format!("d{i}"));
        std::fs::create_dir_all(&dir).unwrap();
        place(*kind, &dir, name);
        std::fs::write(dir.join("_SUCCESS"), b"").unwrap();
        std::fs::write(dir.join("notes.txt"), b"not data").unwrap();
    }
    let server_root = tempfile::tempdir().unwrap();
    let server = S3Server::start(server_root.path());
    server.mirror("data", &data).unwrap();
    for (i, (name, kind)) in FILES.iter().enumerate() {
        let local_dir = data.join(format!("d{i}"));
        let sources = [
            (Storage::new(), local_dir.join(name).display().to_string()),
            (Storage::new(), local_dir.display().to_string()),
            (
                server.storage(),
                server.url("data", &format!("d{i}/{name}")),
            ),
            (server.storage(), server.url("data", &format!("d{i}/"))),
        ];
        for (storage, source) in sources {
            let (id, n) = load(&storage, &source).unwrap_or_else(|e| panic!("{source}: {e}"));
            assert_eq!((id, n), (id_of(*kind), 20), "{source}");
        }
    }
}

/// A name no format has and content that is none of them: an error naming
/// the file, the extensions and formats tried and what the bytes were.
#[test]
fn a_file_that_fits_nothing_is_named_with_what_was_tried() {
    let dir = tempfile::tempdir().unwrap();
    let path: PathBuf = dir.path().join("mystery.dat");
    std::fs::write(&path, b"neither magic nor checksum, just bytes").unwrap();
    let server_root = tempfile::tempdir().unwrap();
    let server = S3Server::start(server_root.path());
    server.mirror("data", dir.path()).unwrap();
    for (storage, source) in [
        (Storage::new(), path.display().to_string()),
        (server.storage(), server.url("data", "mystery.dat")),
    ] {
        let e = load(&storage, &source).unwrap_err();
        let LoadError::Sources(inner) = &e else {
            panic!("{source}: {e:?}")
        };
        assert!(
            matches!(**inner, RegistryError::Unrecognized { .. }),
            "{e:?}"
        );
        let text = e.to_string();
        for word in [
            source.as_str(),
            ".tfrecord",
            ".avro",
            ".ffr",
            "part-<digits>",
            "OFRecord",
            "6e 65 69",
        ] {
            assert!(text.contains(word), "{text} does not say {word:?}");
        }
        assert_eq!(e.kind(), grist::tensor::ErrorKind::Argument);
    }
}

/// Files of two formats in one folder: an error naming both.
#[test]
fn a_folder_of_two_formats_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    place(Kind::Tfrecord, dir.path(), "a.tfrecord");
    place(Kind::Avro, dir.path(), "b.avro");
    let e = load(&Storage::new(), &dir.path().display().to_string()).unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("a.tfrecord") && text.contains("b.avro"),
        "{text}"
    );
}

/// A folder of OFRecord parts named as OneFlow names them with
/// `part_name_prefix` "train-" and `part_name_suffix_length` 3, beside
/// other files: the loader reads it with the format configured so, parts
/// in numeric order, the other files left out.
#[test]
fn ofrecord_part_names_are_options_of_the_format() {
    use grist::ofrecord::{OfRecordFormat, PartNaming};
    let dir = tempfile::tempdir().unwrap();
    for i in 0..3 {
        place(Kind::Ofrecord, dir.path(), &format!("train-{i:03}"));
    }
    std::fs::write(dir.path().join("README"), b"not a part").unwrap();
    place(Kind::Ofrecord, dir.path(), "train-1");
    let source = dir.path().to_string_lossy().into_owned();
    for format in [
        Arc::new(OfRecordFormat::default().with_naming(PartNaming::oneflow("train-", 3)))
            as Arc<dyn Format>,
        OfRecordFormat::default()
            .configure("part_name_prefix", "train-")
            .unwrap()
            .configure("part_name_suffix_length", "3")
            .unwrap(),
    ] {
        let loader = grist::loader()
            .with_path(&source)
            .with_format(format)
            .with_specs(specs())
            .with_batch_size(7)
            .build()
            .unwrap();
        let rows: usize = loader.map(|b| b.unwrap().rows()).sum();
        assert_eq!(rows, 60);
    }
}
