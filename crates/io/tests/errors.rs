//! Errors name what failed, and print each cause once.

use grist_io::{Address, Error, Storage};
use grist_testkit::chain;

use crate::support::at;

#[test]
fn errors_name_the_path_as_given() {
    let dir = tempfile::tempdir().unwrap();
    let storage = Storage::new();
    let missing = at(dir.path(), "missing.tfrecord");
    let e = storage.open(&missing).unwrap_err();
    assert!(e.is_not_found());
    assert_eq!(e.to_string(), format!("{}: not found", missing));
    assert_eq!(e.address(), Some(missing.as_str()));
    let io: std::io::Error = e.into();
    assert_eq!(io.kind(), std::io::ErrorKind::NotFound);
    assert!(matches!(
        io.get_ref().and_then(|e| e.downcast_ref::<Error>()),
        Some(Error::NotFound { .. })
    ));

    let bad = Address::parse("ftp://host/x").unwrap_err();
    assert!(bad.to_string().contains("ftp://host/x"), "{bad}");
    let e = storage.glob("s3://b[/x").unwrap_err();
    assert!(matches!(e, Error::BadPattern { .. }), "{e}");
}

#[test]
fn an_os_error_is_printed_once() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("file"), b"x").unwrap();
    // Listing a file: the OS says it is not a directory.
    let e = Storage::new().list(&at(dir.path(), "file")).unwrap_err();
    assert!(matches!(e, Error::List { .. }), "{e:?}");
    let text = chain(&e);
    assert!(text.starts_with(&format!(
        "{}: listing failed",
        dir.path().join("file").display()
    )));
    let cause = std::io::Error::from_raw_os_error(20).to_string();
    assert_eq!(text.matches(&cause).count(), 1, "{text}");
    let as_io = std::io::Error::from(e);
    assert_eq!(chain(&as_io).matches(&cause).count(), 1);
}
