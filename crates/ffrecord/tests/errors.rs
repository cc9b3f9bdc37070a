//! The shared error contract: causes print once, data errors say where.

use grist_ffrecord::{Error, FfrReader, ReaderOptions};
use grist_tensor::{BoxError, ErrorKind, FormatError};
use grist_testkit::{chain, corpus};

#[test]
fn an_io_error_prints_its_cause_once() {
    // Read through the storage layer: its error names the path once and
    // says what is wrong once.
    let missing = corpus::root().join("ffrecord").join("no_such_file.ffr");
    let err = FfrReader::open(&missing, ReaderOptions::default()).unwrap_err();
    assert!(matches!(err, Error::Storage(_)), "{err:?}");
    assert_eq!(FormatError::kind(&err), ErrorKind::Io);
    let text = chain(&err);
    assert_eq!(text, format!("{}: not found", missing.display()));
    assert_eq!(
        FormatError::location(&err).map(|at| at.file.to_string()),
        Some(missing.display().to_string())
    );
}

#[test]
fn a_corrupt_sample_names_its_file_and_record() {
    let path = corpus::root()
        .join("ffrecord")
        .join("corrupt_sample_byte.ffr");
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

/// `bytes` as a length-delimited field `field`.
fn len_field(field: u8, bytes: &[u8]) -> Vec<u8> {
    let mut out = vec![field << 3 | 2];
    let mut n = bytes.len();
    while n >= 0x80 {
        out.push(n as u8 | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
    out.extend_from_slice(bytes);
    out
}

/// The int64 list `packed` (a packed `value` field) under key "x", as a
/// tf.Example and as an OFRecord.
fn both_records(packed: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let list = len_field(1, packed);
    let entry = |feature_field| {
        let mut e = len_field(1, b"x");
        e.extend(len_field(2, &len_field(feature_field, &list)));
        len_field(1, &e)
    };
    // Example.features (1) holds the map; OFRecord is the map itself.
    (len_field(1, &entry(3)), entry(5))
}

#[test]
fn overlong_varints_decode_alike_in_tf_example_and_ofrecord() {
    use grist_tensor::{DType, FeatureSpec, Values};

    let specs = [FeatureSpec::varlen("x", DType::Int64)];
    let mut example = grist_tfrecord::ExampleDecoder::new(&specs).unwrap();
    let mut ofrecord = grist_ofrecord::OfRecordDecoder::new(&specs).unwrap();
    let file: std::sync::Arc<str> = "mem".into();
    let ff9 = [0xff; 9];
    let cases: Vec<(Vec<u8>, Option<Vec<i64>>)> = vec![
        // 10 bytes whose last holds only bit 63: every parser agrees.
        ([&ff9[..], &[0x01]].concat(), Some(vec![-1])),
        // Bits past 64 in the 10th byte: dropped (protobuf C++, Python).
        ([&ff9[..], &[0x7f]].concat(), Some(vec![-1])),
        ([&[0x80; 9][..], &[0x02]].concat(), Some(vec![0])),
        ([&[0x80; 9][..], &[0x03]].concat(), Some(vec![i64::MIN])),
        // The same between other values, and at a word's end.
        (
            [&[0x05][..], &ff9, &[0x7e], &[0x06]].concat(),
            Some(vec![5, i64::MAX, 6]),
        ),
        // 11 bytes: refused.
        ([&[0x80; 10][..], &[0x00]].concat(), None),
        ([&ff9[..], &[0xff, 0x01]].concat(), None),
        // Cut short by the list's end.
        (ff9.to_vec(), None),
    ];
    for (packed, want) in cases {
        let (ex, of) = both_records(&packed);
        let a = example.decode_batch(&file, 0, [&ex[..]]);
        let b = ofrecord.decode_batch(&file, 0, [&of[..]]);
        // A varlen feature is a sparse tensor.
        let values = |batch: &grist_tensor::Batch| match batch
            .get("x")
            .and_then(|c| c.as_sparse())
            .map(|s| &s.values)
        {
            Some(Values::Int64(v)) => v.clone(),
            other => panic!("{other:?}"),
        };
        match (&a, &b, &want) {
            (Ok(a), Ok(b), Some(want)) => {
                assert_eq!(&values(a), want, "{packed:x?}");
                assert_eq!(&values(b), want, "{packed:x?}");
            }
            (Err(a), Err(b), None) => {
                assert!(matches!(a, grist_tfrecord::Error::Malformed { .. }), "{a}");
                assert!(matches!(b, grist_ofrecord::Error::Malformed { .. }), "{b}");
            }
            _ => panic!("{packed:x?}: tf.Example {a:?}, OFRecord {b:?}, want {want:?}"),
        }
    }
}
