//! The entry point: options, and the cache of object store clients.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use crate::local;
#[cfg(feature = "remote")]
use crate::remote;
use crate::{Access, Address, Error, Object, Result, Writer};

/// How remote requests are retried and timed out.
///
/// Request-level failures (5xx and 429 answers, refused or dropped
/// connections, requests that time out) are retried inside the object
/// store client; grist-io retries on top of it a ranged read whose body
/// fails part-way, asking again for the bytes not yet received. Both stop
/// after [`attempts`](Retry::attempts) tries or at the
/// [`deadline`](Retry::deadline), whichever comes first.
///
/// ```
/// use std::time::Duration;
/// use grist_io::Retry;
///
/// let quick = Retry::new()
///     .with_attempts(3)
///     .with_backoff(Duration::from_millis(10), Duration::from_millis(100))
///     .with_request_timeout(Duration::from_secs(2))
///     .with_deadline(Duration::from_secs(10));
/// assert_eq!(quick.attempts(), 3);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Retry {
    attempts: u32,
    initial_backoff: Duration,
    max_backoff: Duration,
    request_timeout: Duration,
    deadline: Duration,
}

impl Default for Retry {
    fn default() -> Self {
        Retry {
            attempts: 10,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(5),
            request_timeout: Duration::from_secs(30),
            deadline: Duration::from_secs(180),
        }
    }
}

impl Retry {
    /// The defaults: 10 attempts, backoff from 100 ms doubling up to 5 s,
    /// 30 s per request, 3 minutes in all.
    pub fn new() -> Self {
        Retry::default()
    }

    /// How many times a request is made before giving up (at least 1).
    /// By default, 10.
    #[must_use]
    pub fn with_attempts(mut self, attempts: u32) -> Self {
        self.attempts = attempts.max(1);
        self
    }

    /// The wait before the first retry, doubled for each retry after it up
    /// to `max`. By default, 100 ms up to 5 s.
    #[must_use]
    pub fn with_backoff(mut self, initial: Duration, max: Duration) -> Self {
        self.initial_backoff = initial;
        self.max_backoff = max.max(initial);
        self
    }

    /// How long one request may take, from connecting to the last byte of
    /// its body: a stalled answer is abandoned and retried after this.
    /// By default, 30 s.
    #[must_use]
    pub fn with_request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// How long one operation (one ranged read, one block of a stream, one
    /// part of an upload) may take with all its retries; past it the
    /// operation fails with [`Error::Timeout`]. By default, 3 minutes.
    #[must_use]
    pub fn with_deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self
    }

    /// How many times a request is made before giving up.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// The wait before the first retry.
    pub fn initial_backoff(&self) -> Duration {
        self.initial_backoff
    }

    /// The longest wait between two attempts.
    pub fn max_backoff(&self) -> Duration {
        self.max_backoff
    }

    /// How long one request may take.
    pub fn request_timeout(&self) -> Duration {
        self.request_timeout
    }

    /// How long one operation may take with all its retries.
    pub fn deadline(&self) -> Duration {
        self.deadline
    }

    /// The wait after failed attempt number `attempt` (1-based).
    #[cfg_attr(not(feature = "remote"), allow(dead_code))]
    pub(crate) fn backoff(&self, attempt: u32) -> Duration {
        let doublings = attempt.saturating_sub(1).min(30);
        self.initial_backoff
            .saturating_mul(1 << doublings)
            .min(self.max_backoff)
    }
}

/// What [`Storage::stat`] found.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Meta {
    /// The size in bytes (0 for a folder).
    pub size: u64,
    /// True for a folder, or a prefix that has objects under it.
    pub is_dir: bool,
    /// Which version of a local file this is (`None` for folders and
    /// objects in a store).
    pub version: Option<Version>,
}

/// What tells one version of a local file from another: its size,
/// modification time and identity (device and inode). Two stats with
/// equal versions saw the same file, unchanged as far as the file system
/// tells (a file rewritten in place within the clock's resolution at the
/// same size is the exception).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Version {
    len: u64,
    modified: Option<std::time::SystemTime>,
    id: (u64, u64),
}

impl Version {
    /// The version of the file `meta` describes.
    pub(crate) fn of(meta: &std::fs::Metadata) -> Version {
        #[cfg(unix)]
        let id = {
            use std::os::unix::fs::MetadataExt;
            (meta.dev(), meta.ino())
        };
        #[cfg(not(unix))]
        let id = (0, 0);
        Version {
            len: meta.len(),
            modified: meta.modified().ok(),
            id,
        }
    }
}

/// A file found by [`Storage::list`] or [`Storage::glob`].
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Where it is.
    pub address: Address,
    /// Its size in bytes.
    pub size: u64,
}

/// The options shared by the clones of a [`Storage`].
#[derive(Clone)]
pub(crate) struct Config {
    pub(crate) access: Access,
    pub(crate) options: Vec<(String, String)>,
    pub(crate) retry: Retry,
    pub(crate) concurrency: usize,
    pub(crate) part_size: usize,
    pub(crate) block_size: Option<usize>,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Option values hold secrets (keys, tokens): only their names show.
        let keys: Vec<&str> = self.options.iter().map(|(k, _)| k.as_str()).collect();
        f.debug_struct("Config")
            .field("access", &self.access)
            .field("options", &keys)
            .field("retry", &self.retry)
            .field("concurrency", &self.concurrency)
            .field("part_size", &self.part_size)
            .field("block_size", &self.block_size)
            .finish()
    }
}

/// The smallest part of a multipart upload that S3 accepts (but the last).
pub const MIN_PART_SIZE: usize = 5 << 20;

/// The largest read block [`Storage::with_block_size`] takes.
pub const MAX_BLOCK_SIZE: usize = 64 << 20;

/// Where grist reads and writes bytes: local files and, with the `remote`
/// feature, object stores.
///
/// A `Storage` holds the options and one client per bucket, container or
/// host, made on first use and shared by every clone (clones are cheap).
/// Changing an option with a `with_*` setter gives a storage with its own,
/// new set of clients.
///
/// ```
/// use grist_io::{Address, Storage};
///
/// let dir = tempfile::tempdir()?;
/// let storage = Storage::new();
/// let addr = Address::from(dir.path().join("hello.bin"));
/// let mut w = storage.create(&addr)?;
/// std::io::Write::write_all(&mut w, b"hello, storage")?;
/// w.commit()?;
/// let object = storage.open(&addr)?;
/// assert_eq!(object.size(), 14);
/// assert_eq!(&object.read_range(7..14)?[..], b"storage");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct Storage {
    config: Arc<Config>,
    #[cfg(feature = "remote")]
    stores: Arc<remote::Stores>,
}

impl Default for Storage {
    fn default() -> Self {
        Storage::new()
    }
}

/// Runs `$body` with the client of `$addr`'s store, or fails when this
/// build has no object stores.
macro_rules! remote {
    ($self:ident, $addr:expr, |$s:ident| $body:expr) => {{
        #[cfg(feature = "remote")]
        {
            let $s = $self.stores.get($addr, &$self.config)?;
            $body
        }
        #[cfg(not(feature = "remote"))]
        {
            Err(Error::Unsupported {
                address: $addr.name().clone(),
                what: "remote storage (built without the remote feature)",
            })
        }
    }};
}

impl Storage {
    /// Local files and (with the `remote` feature) object stores, with the
    /// default options.
    pub fn new() -> Self {
        Storage {
            config: Arc::new(Config {
                access: Access::read(),
                options: Vec::new(),
                retry: Retry::default(),
                concurrency: 16,
                part_size: 8 << 20,
                block_size: None,
            }),
            #[cfg(feature = "remote")]
            stores: Arc::default(),
        }
    }

    fn with_config(mut self, change: impl FnOnce(&mut Config)) -> Self {
        change(Arc::make_mut(&mut self.config));
        #[cfg(feature = "remote")]
        {
            // The clients were built with the old options.
            self.stores = Arc::default();
        }
        self
    }

    /// How local files are read: read calls, or memory maps (see
    /// [`Access::mmap`]). Object stores are always read with requests.
    /// By default, [`Access::read`].
    #[must_use]
    pub fn with_access(self, access: Access) -> Self {
        self.with_config(|c| c.access = access)
    }

    /// Sets an option of the object store clients, by object_store's key
    /// names: `aws_endpoint`, `aws_access_key_id`, `aws_secret_access_key`,
    /// `aws_region`, `aws_allow_http`, `google_service_account`,
    /// `azure_storage_account_name`, `timeout`, … Each store takes the keys
    /// it knows and ignores the others. Options set here override the
    /// environment.
    ///
    /// By default, the environment variables object_store reads are used
    /// (`AWS_ENDPOINT`, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
    /// `AWS_REGION`, `AWS_ALLOW_HTTP`, `GOOGLE_*`, `AZURE_*`), and nothing
    /// else.
    #[must_use]
    pub fn with_remote_option(self, key: &str, value: &str) -> Self {
        let (key, value) = (key.to_ascii_lowercase(), value.to_string());
        self.with_config(|c| {
            c.options.retain(|(k, _)| *k != key);
            c.options.push((key, value));
        })
    }

    /// How remote requests are retried and timed out. By default,
    /// [`Retry::default`]: 10 attempts, 100 ms to 5 s of backoff, 30 s per
    /// request, 3 minutes per operation.
    #[must_use]
    pub fn with_retry(self, retry: Retry) -> Self {
        self.with_config(|c| c.retry = retry)
    }

    /// How many remote requests one call keeps in flight at once
    /// ([`Object::read_ranges`], [`read_into`](crate::read_into), the parts
    /// of an upload; at least 1). By default, 16.
    #[must_use]
    pub fn with_concurrency(self, requests: usize) -> Self {
        self.with_config(|c| c.concurrency = requests.max(1))
    }

    /// The size of the parts of a multipart upload (at least
    /// [`MIN_PART_SIZE`], 5 MiB); a file no larger than one part is sent
    /// with a single request. Up to [`with_concurrency`](Self::with_concurrency)
    /// parts are held in memory at once. By default, 8 MiB.
    #[must_use]
    pub fn with_part_size(self, bytes: usize) -> Self {
        self.with_config(|c| c.part_size = bytes.max(MIN_PART_SIZE))
    }

    /// The size of the ranged requests of [`Object::reader`] on a remote
    /// object (between 1 byte and [`MAX_BLOCK_SIZE`]). By default, the
    /// larger of 1 MiB and a quarter of the reader's read-ahead, at most
    /// 8 MiB.
    #[must_use]
    pub fn with_block_size(self, bytes: usize) -> Self {
        self.with_config(|c| c.block_size = Some(bytes.clamp(1, MAX_BLOCK_SIZE)))
    }

    /// How local files are read.
    pub fn access(&self) -> Access {
        self.config.access
    }

    /// How remote requests are retried.
    pub fn retry(&self) -> Retry {
        self.config.retry
    }

    /// How many remote requests one call keeps in flight.
    pub fn concurrency(&self) -> usize {
        self.config.concurrency
    }

    /// Opens a file (its size and, with [`Access::mmap`], its map) or an
    /// object (one `HEAD` request for its size).
    pub fn open(&self, addr: &Address) -> Result<Object> {
        match addr.local_path() {
            Some(path) => local::open(addr, path, &self.config),
            None => remote!(self, addr, |s| s.open(addr)),
        }
    }

    /// The size of a file or object and whether it is a folder; `None` when
    /// nothing is there.
    pub fn stat(&self, addr: &Address) -> Result<Option<Meta>> {
        match addr.local_path() {
            Some(path) => local::stat(addr, path),
            None => remote!(self, addr, |s| s.stat(addr)),
        }
    }

    /// The files directly in a folder or under a prefix (not in its
    /// subfolders), sorted by name; hidden files (names starting with `.`)
    /// are left out. A local folder that does not exist is
    /// [`Error::NotFound`]; a prefix with nothing under it is an empty list
    /// (object stores have no folders to be missing).
    pub fn list(&self, dir: &Address) -> Result<Vec<Entry>> {
        match dir.local_path() {
            Some(path) => local::list(dir, path),
            None => remote!(self, dir, |s| s.list(dir)),
        }
    }

    /// The files matching a pattern, sorted by address. `*`, `?` and
    /// `[...]` may appear in any segment after the bucket; they never match
    /// a `/`, nor a leading `.`. A remote pattern lists the prefix before
    /// its first wildcard.
    ///
    /// ```
    /// use grist_io::Storage;
    ///
    /// let dir = tempfile::tempdir()?;
    /// for name in ["b.tfrecord", "a.tfrecord", "a.idx", ".hidden.tfrecord"] {
    ///     std::fs::write(dir.path().join(name), b"x")?;
    /// }
    /// let pattern = format!("{}/*.tfrecord", dir.path().display());
    /// let found = Storage::new().glob(&pattern)?;
    /// let names: Vec<_> = found.iter().map(|e| e.address.file_name().unwrap()).collect();
    /// assert_eq!(names, ["a.tfrecord", "b.tfrecord"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn glob(&self, pattern: &str) -> Result<Vec<Entry>> {
        let split = split_pattern(pattern)?;
        match split.dir.local_path() {
            Some(_) => local::glob(pattern, &split.dir, &split.rest),
            None => remote!(self, &split.dir, |s| s.glob(&split.dir, &split.rest)),
        }
    }

    /// The whole of a small file or object (an index, a spec): one request
    /// for an object.
    pub fn read_all(&self, addr: &Address) -> Result<Bytes> {
        match addr.local_path() {
            Some(path) => local::read_all(addr, path),
            None => remote!(self, addr, |s| s.read_all(addr)),
        }
    }

    /// Starts an atomic write: nothing appears under `addr` until
    /// [`Writer::commit`], and a writer dropped uncommitted leaves nothing
    /// behind. See [`Writer`].
    pub fn create(&self, addr: &Address) -> Result<Writer> {
        match addr.local_path() {
            Some(path) => Writer::local(addr, path),
            None => remote!(self, addr, |s| s.create(addr)),
        }
    }

    /// Starts an atomic write that streams: for an object, parts are
    /// uploaded as they fill (no local spool file, memory bounded by the
    /// part size times the concurrency), but the writer cannot seek back or
    /// read. A local file is written as by [`create`](Self::create).
    pub fn create_streaming(&self, addr: &Address) -> Result<Writer> {
        match addr.local_path() {
            Some(path) => Writer::local(addr, path),
            None => remote!(self, addr, |s| s.create_streaming(addr)),
        }
    }

    /// Makes a local folder and the folders above it that are missing,
    /// so that files can be created in it. Object stores have no folders
    /// (a key may hold any number of `/`): for them this does nothing.
    ///
    /// ```
    /// use grist_io::{Address, Storage};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let storage = Storage::new();
    /// let sub = Address::from(dir.path().join("a/b"));
    /// storage.create_dir_all(&sub)?;
    /// storage.create(&sub.join("x.bin"))?.commit()?;
    /// assert_eq!(storage.list(&sub)?.len(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn create_dir_all(&self, dir: &Address) -> Result<()> {
        match dir.local_path() {
            Some(path) => local::create_dir_all(dir, path),
            None => Ok(()),
        }
    }

    /// Removes the temporary files that writes into the local folder `dir`
    /// left behind when their process died before committing them
    /// (`.<name>.<tag>-<pid>-<n>`, see [`create`](Self::create)), for the
    /// final names that `of` accepts; returns what it removed. Nothing
    /// for object stores: an upload never completed leaves no object.
    ///
    /// Only the writer of those names may call it: a live write's
    /// temporary file is removed too (its commit then fails).
    ///
    /// ```
    /// use grist_io::{Address, Storage};
    ///
    /// let dir = tempfile::tempdir()?;
    /// std::fs::write(dir.path().join(".a.bin.tmp-1234-0"), b"cut short")?;
    /// let removed = Storage::new().remove_temporaries(&Address::from(dir.path()), &|n| n == "a.bin")?;
    /// assert_eq!(removed.len(), 1);
    /// assert_eq!(std::fs::read_dir(dir.path())?.count(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn remove_temporaries(
        &self,
        dir: &Address,
        of: &dyn Fn(&str) -> bool,
    ) -> Result<Vec<Address>> {
        match dir.local_path() {
            Some(path) => local::remove_temporaries(dir, path, of),
            None => Ok(Vec::new()),
        }
    }

    /// Removes a file or object. Removing one that is not there is not an
    /// error (object stores cannot tell).
    pub fn remove(&self, addr: &Address) -> Result<()> {
        match addr.local_path() {
            Some(path) => local::remove(addr, path),
            None => remote!(self, addr, |s| s.remove(addr)),
        }
    }
}

/// A glob pattern split at the last `/` before its first wildcard.
pub(crate) struct SplitPattern {
    /// The folder or prefix to list.
    pub(crate) dir: Address,
    /// The pattern below it (segments joined by `/`).
    pub(crate) rest: String,
}

fn split_pattern(pattern: &str) -> Result<SplitPattern> {
    let first_wild = pattern.find(['*', '?', '[']).unwrap_or(pattern.len());
    let cut = pattern[..first_wild].rfind('/');
    let (dir, rest) = match cut {
        Some(i) => (&pattern[..=i], &pattern[i + 1..]),
        None => ("", pattern),
    };
    let scheme_end = pattern.find("://").map(|i| i + 3);
    if let Some(end) = scheme_end {
        // The wildcard must come after the bucket or host.
        let after_host = pattern[end..].find('/').map(|i| end + i);
        if after_host.is_none_or(|h| first_wild <= h) {
            return Err(Error::BadPattern {
                pattern: pattern.to_string(),
                reason: "wildcards may only follow the bucket, container or host".to_string(),
            });
        }
    }
    let dir = if dir.is_empty() {
        Address::parse(".")?
    } else {
        Address::parse(dir)?
    };
    glob::Pattern::new(rest).map_err(|e| Error::BadPattern {
        pattern: pattern.to_string(),
        reason: e.to_string(),
    })?;
    Ok(SplitPattern {
        dir,
        rest: rest.to_string(),
    })
}

/// How a glob pattern matches names: wildcards never cross `/` nor match a
/// leading `.`.
pub(crate) const MATCH: glob::MatchOptions = glob::MatchOptions {
    case_sensitive: true,
    require_literal_separator: true,
    require_literal_leading_dot: true,
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_output_hides_option_values() {
        let s = Storage::new().with_remote_option("aws_secret_access_key", "hunter2");
        let text = format!("{s:?}");
        assert!(
            text.contains("aws_secret_access_key") && !text.contains("hunter2"),
            "{text}"
        );
    }

    #[test]
    fn backoff_doubles_up_to_the_max() {
        let r = Retry::new().with_backoff(Duration::from_millis(100), Duration::from_millis(350));
        let waits: Vec<_> = (1..=4).map(|a| r.backoff(a).as_millis()).collect();
        assert_eq!(waits, [100, 200, 350, 350]);
        assert_eq!(Retry::new().with_attempts(0).attempts(), 1);
    }

    #[test]
    fn patterns_split_before_the_first_wildcard() {
        let s = split_pattern("s3://b/data/part-*/x-?.tfrecord").unwrap();
        assert_eq!(s.dir.as_str(), "s3://b/data/");
        assert_eq!(s.rest, "part-*/x-?.tfrecord");
        let l = split_pattern("*.avro").unwrap();
        assert_eq!(l.dir.as_str(), ".");
        assert_eq!(l.rest, "*.avro");
        assert!(matches!(
            split_pattern("s3://b*/x"),
            Err(Error::BadPattern { .. })
        ));
        assert!(matches!(
            split_pattern("d/[x"),
            Err(Error::BadPattern { .. })
        ));
    }

    #[cfg(not(feature = "remote"))]
    #[test]
    fn remote_addresses_need_the_feature() {
        let addr = Address::parse("s3://b/k").unwrap();
        let e = Storage::new().open(&addr).unwrap_err();
        assert!(matches!(e, Error::Unsupported { .. }), "{e}");
        assert!(e.to_string().contains("built without the remote feature"));
    }
}
