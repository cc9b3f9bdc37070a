//! Tests of the S3 test server itself: buckets, linked and mirrored trees,
//! counters, faults, and stopping.

use std::time::{Duration, Instant};

use grist_io::{Address, Error};
use grist_testkit::{Fault, S3Server};

#[test]
fn serves_buckets_linked_and_mirrored_trees() {
    let dir = tempfile::tempdir().unwrap();
    let tree = tempfile::tempdir().unwrap();
    std::fs::create_dir(tree.path().join("sub")).unwrap();
    std::fs::write(tree.path().join("sub/a.bin"), b"aaa").unwrap();
    let server = S3Server::start(dir.path());
    assert!(server.endpoint().starts_with("http://127.0.0.1:"));
    std::fs::write(server.bucket("plain").join("k"), b"k").unwrap();
    server.link("linked", tree.path()).unwrap();
    server.mirror("copied", tree.path()).unwrap();
    let storage = server.storage();
    for bucket in ["linked", "copied"] {
        let addr = Address::parse(&server.url(bucket, "sub/a.bin")).unwrap();
        assert_eq!(&storage.read_all(&addr).unwrap()[..], b"aaa", "{bucket}");
        let listed = storage
            .list(&Address::parse(&format!("s3://{bucket}/sub/")).unwrap())
            .unwrap();
        assert_eq!(listed.len(), 1, "{bucket}");
    }
    let plain = Address::parse(&server.url("plain", "k")).unwrap();
    assert_eq!(&storage.read_all(&plain).unwrap()[..], b"k");
    // The server's bookkeeping stays out of a linked tree.
    let mut names: Vec<_> = std::fs::read_dir(tree.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    names.sort();
    assert_eq!(names, ["sub"]);
}

#[test]
fn counts_requests_and_injects_faults() {
    let dir = tempfile::tempdir().unwrap();
    let server = S3Server::start(dir.path());
    std::fs::write(server.bucket("bkt").join("k"), vec![7; 10_000]).unwrap();
    let storage = server.storage();
    let addr = Address::parse(&server.url("bkt", "k")).unwrap();
    let object = storage.open(&addr).unwrap();
    object.read_range(0..10).unwrap();
    let counts = server.faults().counts();
    assert_eq!(
        (
            counts.requests,
            counts.heads,
            counts.gets,
            counts.ranged_gets
        ),
        (2, 1, 1, 1)
    );

    let faults = server.faults();
    faults.reset_counts();
    faults.inject(2, Fault::Status(500));
    object.read_range(0..10).unwrap();
    assert_eq!(faults.counts().faulted, 2);

    faults.set_latency(Duration::from_millis(50));
    let t = Instant::now();
    object.read_range(0..10).unwrap();
    assert!(t.elapsed() >= Duration::from_millis(50));
    faults.clear();

    faults.fail_always(Fault::Status(404));
    assert!(matches!(
        object.read_range(0..10),
        Err(Error::NotFound { .. })
    ));
    faults.clear();
    assert_eq!(object.read_range(0..3).unwrap().len(), 3);
}

#[test]
#[should_panic(expected = "not a valid S3 bucket name")]
fn short_bucket_names_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    S3Server::start(dir.path()).bucket("b");
}

#[test]
fn dropping_the_server_stops_it() {
    let dir = tempfile::tempdir().unwrap();
    let server = S3Server::start(dir.path());
    std::fs::write(server.bucket("bkt").join("k"), b"k").unwrap();
    let storage = server.storage().with_retry(
        S3Server::test_retry()
            .with_attempts(1)
            .with_request_timeout(Duration::from_millis(500)),
    );
    let addr = Address::parse(&server.url("bkt", "k")).unwrap();
    storage.open(&addr).unwrap();
    let endpoint = server.endpoint();
    drop(server);
    let port = endpoint.rsplit(':').next().unwrap();
    assert!(std::net::TcpStream::connect(format!("127.0.0.1:{port}")).is_err());
}
