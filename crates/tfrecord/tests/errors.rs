//! The shared error contract: causes print once, data errors say where.

use grist_tensor::{ErrorKind, FormatError};
use grist_testkit::{assert_missing_said_once, chain, corpus, temp_dir};
use grist_tfrecord::{Error, ReaderOptions, RecordReader};

#[test]
fn a_missing_file_is_said_once() {
    let missing = corpus::root().join("tfrecord/no_such_file.tfrecord");
    let err = RecordReader::open(&missing, ReaderOptions::default()).unwrap_err();
    assert!(matches!(err, Error::Storage(_)), "{err:?}");
    assert_eq!(err.kind(), ErrorKind::Io);
    assert_missing_said_once(&err, &missing);
}

#[test]
fn a_folder_is_not_a_file() {
    let dir = temp_dir();
    let folder = dir.path().join("x.tfrecord");
    std::fs::create_dir(&folder).unwrap();
    let err = RecordReader::open(&folder, ReaderOptions::default()).unwrap_err();
    assert!(matches!(err, Error::Storage(_)), "{err:?}");
    assert_eq!(err.kind(), ErrorKind::Io);
    assert_eq!(
        chain(&err),
        format!("{}: is a folder, not a file", folder.display())
    );
}

#[test]
fn a_corrupt_record_names_its_file_and_record() {
    let path = corpus::root().join("tfrecord/tfr_corrupt_data_crc.tfrecord");
    let mut reader = RecordReader::open(&path, ReaderOptions::default()).unwrap();
    let err = loop {
        match reader.next_record() {
            Ok(Some(_)) => {}
            Ok(None) => panic!("the corrupt record was read"),
            Err(e) => break e,
        }
    };
    assert!(matches!(err, Error::CorruptData { .. }), "{err:?}");
    assert_eq!(err.kind(), ErrorKind::Data);
    // Through the shared trait, as the loader and the CLI ask it.
    let boxed: grist_tensor::BoxError = Box::new(err);
    let at = boxed.location().expect("a data error has a location");
    assert!(at.file.ends_with("tfr_corrupt_data_crc.tfrecord"), "{at}");
    assert_eq!(at.record, Some(2));
}
