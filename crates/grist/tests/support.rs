//! Loaders over local files and over the test S3 server.

use std::path::{Path, PathBuf};

use grist::{LoaderBuilder, Storage};
use grist_testkit::S3Server;

use crate::fixture::{Fixture, Kind};

/// A fixture's files served by an S3 server too.
pub struct Served {
    pub fixture: Fixture,
    pub server: S3Server,
    /// The fixture's sources as URLs.
    pub urls: Vec<String>,
    _root: tempfile::TempDir,
}

/// The folder of a fixture's files.
fn folder_of(fx: &Fixture) -> PathBuf {
    let first = &fx.sources[0];
    if first.is_dir() {
        first.clone()
    } else {
        first.parent().expect("a file in a folder").to_path_buf()
    }
}

/// The URL of `path` (a file or folder of the mirrored `folder`) in
/// bucket `data` of `server`.
fn url_of(server: &S3Server, folder: &Path, path: &Path) -> String {
    let rel = path.strip_prefix(folder).expect("in the folder");
    let key = rel.to_string_lossy();
    if key.is_empty() {
        // The folder itself: the bucket's root prefix.
        format!("{}/", server.url("data", "").trim_end_matches('/'))
    } else {
        server.url("data", &key)
    }
}

impl Served {
    /// `kind`'s standard fixture, also served as bucket `data`.
    pub fn new(kind: Kind) -> Served {
        Served::of(Fixture::standard(kind))
    }

    /// `fixture`, also served as bucket `data`.
    pub fn of(fixture: Fixture) -> Served {
        let root = tempfile::tempdir().expect("a temporary folder");
        let server = S3Server::start(root.path());
        let folder = folder_of(&fixture);
        server.mirror("data", &folder).expect("the files copied");
        let urls = fixture
            .sources
            .iter()
            .map(|s| url_of(&server, &folder, s))
            .collect();
        Served {
            fixture,
            server,
            urls,
            _root: root,
        }
    }

    /// The fixture's loader, reading the files over S3.
    pub fn remote(&self) -> LoaderBuilder {
        self.fixture
            .builder_of(self.urls.iter().map(PathBuf::from))
            .with_storage(self.server.storage())
    }
}

/// A builder with every format and `storage`.
pub fn loader(storage: Storage) -> LoaderBuilder {
    grist::loader().with_storage(storage)
}
