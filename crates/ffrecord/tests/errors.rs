//! The shared error contract: causes print once, data errors say where.

use std::error::Error as _;

use grist_ffrecord::{Error, FfrReader, ReaderOptions};
use grist_tensor::{BoxError, ErrorKind, FormatError};

use crate::support::ffrecord_dir;

/// The whole chain, as the CLI prints it (`{e:#}`: joined by ": ").
fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        out = format!("{out}: {c}");
        cause = c.source();
    }
    out
}

#[test]
fn an_io_error_prints_its_cause_once() {
    let missing = ffrecord_dir().join("no_such_file.ffr");
    let os = std::fs::File::open(&missing).unwrap_err().to_string();
    let err = FfrReader::open(&missing, ReaderOptions::default()).unwrap_err();
    assert!(matches!(err, Error::Io { .. }), "{err:?}");
    assert_eq!(FormatError::kind(&err), ErrorKind::Io);
    let text = chain(&err);
    assert_eq!(text.matches(&os).count(), 1, "{text}");
    assert!(text.contains("no_such_file.ffr"), "{text}");
    assert!(err.source().is_some());
}

#[test]
fn a_corrupt_sample_names_its_file_and_record() {
    let path = ffrecord_dir().join("corrupt_sample_byte.ffr");
    let reader = FfrReader::open(&path, ReaderOptions::default()).unwrap();
    let err = reader.read(&[0, 1, 2, 3, 4]).unwrap_err();
    assert!(matches!(err, Error::SampleChecksum { .. }), "{err:?}");
    assert_eq!(err.class().name(), "sample_checksum");
    let boxed: BoxError = Box::new(err);
    assert_eq!(boxed.kind(), ErrorKind::Data);
    let at = boxed.location().expect("a data error has a location");
    assert!(at.file.ends_with("corrupt_sample_byte.ffr"), "{at}");
    assert_eq!((at.record, at.index), (Some(2), Some(2)));
}
