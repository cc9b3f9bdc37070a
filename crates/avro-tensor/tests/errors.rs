//! The shared error contract: causes print once, data errors say where.

use grist_avro_tensor::{DatumReader, Error, ReaderOptions};
use grist_tensor::{BoxError, ErrorKind, FormatError};
use grist_testkit::{assert_missing_said_once, corpus};

#[test]
fn a_missing_file_is_said_once() {
    let missing = corpus::root().join("avro/no_such_file.avro");
    let err = DatumReader::open(&missing, ReaderOptions::default()).unwrap_err();
    assert!(matches!(err, Error::Storage(_)), "{err:?}");
    assert_eq!(err.kind(), ErrorKind::Io);
    assert_missing_said_once(&err, &missing);
}

#[test]
fn a_corrupt_record_names_its_file_block_and_record() {
    // Block 1 claims one record more than it holds: reading runs out of
    // data in that extra record, the 10th of the file.
    let path = corpus::root().join("avro/avro_block_count_more.avro");
    let mut reader = DatumReader::open(&path, ReaderOptions::default()).unwrap();
    let err = loop {
        match reader.next_datum() {
            Ok(Some(_)) => {}
            Ok(None) => panic!("the damaged block was read"),
            Err(e) => break e,
        }
    };
    assert!(matches!(err, Error::Datum { .. }), "{err:?}");
    let boxed: BoxError = Box::new(err);
    assert_eq!(boxed.kind(), ErrorKind::Data);
    let at = boxed.location().expect("a data error has a location");
    assert!(at.file.ends_with("avro_block_count_more.avro"), "{at}");
    assert_eq!((at.block, at.record), (Some(1), Some(9)), "{at}");
}
