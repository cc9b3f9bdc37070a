//! The shared error contract: causes print once, data errors say where.

use grist_ofrecord::{Error, ReaderOptions, RecordReader};
use grist_tensor::{BoxError, ErrorKind, FormatError};
use grist_testkit::{assert_missing_said_once, corpus};

#[test]
fn a_missing_file_is_said_once() {
    let missing = corpus::root()
        .join("ofrecord")
        .join("no_such_dataset/part-00000");
    let err = RecordReader::open(&missing, ReaderOptions::default()).unwrap_err();
    assert!(matches!(err, Error::Storage(_)), "{err:?}");
    assert_eq!(FormatError::kind(&err), ErrorKind::Io);
    assert_missing_said_once(&err, &missing);
}

#[test]
fn a_corrupt_record_names_its_file_and_record() {
    let path = corpus::root()
        .join("ofrecord")
        .join("truncated_payload/part-00000");
    let mut reader = RecordReader::open(&path, ReaderOptions::default()).unwrap();
    let err = loop {
        match reader.next_record() {
            Ok(Some(_)) => {}
            Ok(None) => panic!("the truncated record was read"),
            Err(e) => break e,
        }
    };
    assert!(matches!(err, Error::TruncatedPayload { .. }), "{err:?}");
    assert_eq!(err.manifest_kind(), "truncated");
    let boxed: BoxError = Box::new(err);
    assert_eq!(boxed.kind(), ErrorKind::Data);
    let at = boxed.location().expect("a data error has a location");
    assert!(at.file.ends_with("truncated_payload/part-00000"), "{at}");
    // The manifest's record and the offset of its length prefix.
    assert_eq!((at.record, at.offset), (Some(2), Some(72)));
}
