//! Shared helpers.

use std::path::{Path, PathBuf};

use grist_io::{Address, Storage};
use grist_testkit::S3Server;

/// `len` bytes that differ from one offset to the next (a misplaced byte
/// shows).
pub fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| {
            (i as u32)
                .wrapping_mul(2_654_435_761)
                .rotate_left(seed as u32 % 31) as u8
                ^ seed
        })
        .collect()
}

/// The address of `name` in `dir`.
pub fn at(dir: &Path, name: &str) -> Address {
    Address::from(dir.join(name))
}

/// A server with bucket `data` holding the given objects.
pub struct Remote {
    pub server: S3Server,
    pub storage: Storage,
    // Dropped after the server.
    _dir: tempfile::TempDir,
}

impl Remote {
    pub fn new(objects: &[(&str, &[u8])]) -> Remote {
        let dir = tempfile::tempdir().unwrap();
        let server = S3Server::start(dir.path());
        let bucket = server.bucket("data");
        for (key, bytes) in objects {
            let path = bucket.join(key);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, bytes).unwrap();
        }
        let storage = server.storage();
        Remote {
            server,
            storage,
            _dir: dir,
        }
    }

    pub fn addr(&self, key: &str) -> Address {
        Address::parse(&self.server.url("data", key)).unwrap()
    }

    pub fn bucket_dir(&self) -> PathBuf {
        self.server.root().join("data")
    }
}
