//! The golden corpus served read-only as a bucket, through a symbolic
//! link: every file reads the same remotely as locally.

use std::path::PathBuf;

use grist_io::{Address, Storage};
use grist_testkit::{S3Server, corpus};

fn corpus_dir() -> Option<PathBuf> {
    let dir = corpus::root();
    dir.is_dir().then_some(dir)
}

#[test]
fn the_corpus_reads_the_same_over_s3() {
    let Some(corpus) = corpus_dir() else {
        eprintln!("skipped: no ../shared/corpus beside the project");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let server = S3Server::start(dir.path());
    server.link("corpus", &corpus).unwrap();
    let remote = server.storage();
    let local = Storage::new();
    let mut checked = 0;
    for sub in ["tfrecord", "avro", "ffrecord", "ofrecord"] {
        let local_dir = Address::from(corpus.join(sub));
        if local.stat(&local_dir).unwrap().is_none() {
            continue;
        }
        let local_files = local.list(&local_dir).unwrap();
        let remote_files = remote
            .list(&Address::parse(&format!("s3://corpus/{sub}/")).unwrap())
            .unwrap();
        let names = |v: &[grist_io::Entry]| -> Vec<(String, u64)> {
            v.iter()
                .map(|e| (e.address.file_name().unwrap().to_string(), e.size))
                .collect()
        };
        assert_eq!(names(&local_files), names(&remote_files), "{sub}");
        for entry in remote_files.iter().take(5) {
            let name = entry.address.file_name().unwrap();
            let want = std::fs::read(corpus.join(sub).join(name)).unwrap();
            assert!(
                remote.read_all(&entry.address).unwrap() == want,
                "{}",
                entry.address
            );
            checked += 1;
        }
    }
    assert!(checked > 0, "no corpus files found");
    // Reading did not write into the corpus.
    assert!(std::fs::read_dir(&corpus).unwrap().all(|e| {
        !e.unwrap()
            .file_name()
            .to_string_lossy()
            .starts_with(".bucket-")
    }));
}
