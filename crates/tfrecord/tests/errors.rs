//! The shared error contract: causes print once, data errors say where.

use grist_tensor::{ErrorKind, FormatError};
use grist_testkit::{assert_io_cause_once, corpus};
use grist_tfrecord::{Error, ReaderOptions, RecordReader};

#[test]
fn an_io_error_prints_its_cause_once() {
    let missing = corpus::root().join("tfrecord/no_such_file.tfrecord");
    let err = RecordReader::open(&missing, ReaderOptions::default()).unwrap_err();
    assert!(matches!(err, Error::Io { .. }), "{err:?}");
    assert_eq!(err.kind(), ErrorKind::Io);
    assert_io_cause_once(&err, &missing, "no_such_file.tfrecord");
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
