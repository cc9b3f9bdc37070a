//! Object stores, through object_store on an internal tokio runtime.
//!
//! grist's readers and loader are plain threads, so every call here is
//! synchronous: it builds a future and blocks on it. The futures run on a
//! small multi-thread runtime made on first use and shared by the process,
//! which drives the connections while the calling thread polls its own
//! requests.

use std::collections::HashMap;
use std::fmt;
use std::fs::File;
use std::future::Future;
use std::io;
use std::ops::Range;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use object_store::MultipartId;
use object_store::multipart::{MultipartStore, PartId};
use object_store::path::Path as StorePath;
use object_store::{
    BackoffConfig, ClientConfigKey, GetOptions, GetRange, ObjectStore, ObjectStoreExt,
    ObjectStoreScheme, PutPayload, RetryConfig,
};
use tokio::runtime::Runtime;

use crate::error::{BoxError, Flat};
use crate::object::{Backend, REMOTE_COALESCE_GAP, coalesce};
use crate::storage::{Config, MATCH};
use crate::{Address, Entry, Error, Meta, Object, Result, Retry, Writer};

/// The process-wide runtime, made on first use.
fn runtime() -> &'static Runtime {
    static RUNTIME: OnceLock<Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        match tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("grist-io")
            .enable_all()
            .build()
        {
            Ok(rt) => rt,
            // Only a process that cannot start two threads gets here; no
            // remote read could work in it.
            Err(e) => panic!("grist-io cannot start its I/O runtime: {e}"),
        }
    })
}

/// Runs `fut` to completion on the shared runtime, from a plain thread.
///
/// A thread already inside a tokio runtime cannot block on another one;
/// such a caller gets a helper thread for the call.
fn block_on<F>(fut: F) -> F::Output
where
    F: Future + Send,
    F::Output: Send,
{
    let rt = runtime();
    if tokio::runtime::Handle::try_current().is_err() {
        return rt.block_on(fut);
    }
    std::thread::scope(|s| match s.spawn(|| rt.block_on(fut)).join() {
        Ok(out) => out,
        Err(panic) => std::panic::resume_unwind(panic),
    })
}

/// Runs `fut` with the operation deadline of `retry`.
async fn within<T>(
    retry: &Retry,
    name: &Arc<str>,
    range: Option<Range<u64>>,
    fut: impl Future<Output = Result<T>>,
) -> Result<T> {
    match tokio::time::timeout(retry.deadline(), fut).await {
        Ok(out) => out,
        Err(_) => Err(Error::Timeout {
            address: name.clone(),
            range,
            after: retry.deadline(),
        }),
    }
}

fn read_error(
    name: &Arc<str>,
    range: Option<Range<u64>>,
    attempts: u32,
    e: object_store::Error,
) -> Error {
    match e {
        object_store::Error::NotFound { .. } => Error::NotFound {
            address: name.clone(),
        },
        e => Error::Read {
            address: name.clone(),
            range,
            attempts,
            source: Flat::boxed(e),
        },
    }
}

fn write_error(name: &Arc<str>, attempts: u32, e: impl Into<BoxError>) -> Error {
    Error::Write {
        address: name.clone(),
        attempts,
        source: Flat::boxed(e),
    }
}

/// Whether a failed write is worth another attempt: not when the store
/// said no (missing bucket, bad credentials, refused precondition).
fn worth_retrying(e: &object_store::Error) -> bool {
    !matches!(
        e,
        object_store::Error::NotFound { .. }
            | object_store::Error::PermissionDenied { .. }
            | object_store::Error::Unauthenticated { .. }
            | object_store::Error::Precondition { .. }
            | object_store::Error::NotSupported { .. }
            | object_store::Error::NotImplemented { .. }
            | object_store::Error::InvalidPath { .. }
            | object_store::Error::UnknownConfigurationKey { .. }
    )
}

/// The clients of one [`Storage`](crate::Storage), one per bucket,
/// container or host.
#[derive(Default)]
pub(crate) struct Stores {
    map: Mutex<HashMap<String, Arc<Store>>>,
}

impl fmt::Debug for Stores {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        f.debug_list().entries(map.keys()).finish()
    }
}

impl Stores {
    /// The client for `addr`'s store, made on first use.
    pub(crate) fn get(&self, addr: &Address, config: &Config) -> Result<Arc<Store>> {
        let Some(remote) = addr.remote() else {
            return Err(Error::Unsupported {
                address: addr.name().clone(),
                what: "a local path as an object store",
            });
        };
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(store) = map.get(&remote.store) {
            return Ok(store.clone());
        }
        let store = Arc::new(Store::build(addr, config)?);
        map.insert(remote.store.clone(), store.clone());
        Ok(store)
    }
}

/// One object store client and the options it was made with.
pub(crate) struct Store {
    object: Arc<dyn ObjectStore>,
    /// Parts uploaded one by one, so that each can be retried on its own.
    multipart: Option<Arc<dyn MultipartStore>>,
    /// Plain HTTP servers cannot list.
    http: bool,
    retry: Retry,
    concurrency: usize,
    part_size: usize,
    block_size: Option<usize>,
}

fn fmt_duration(d: Duration) -> String {
    format!("{}ms", d.as_millis().max(1))
}

/// Applies the options whose keys a store knows; the others are meant for
/// other kinds of stores.
macro_rules! configure {
    ($builder:expr, $key:ty, $options:expr) => {{
        let mut builder = $builder;
        for (k, v) in $options {
            if let Ok(key) = k.parse::<$key>() {
                builder = builder.with_config(key, v.clone());
            }
        }
        builder
    }};
}

impl Store {
    fn build(addr: &Address, config: &Config) -> Result<Store> {
        let Some(remote) = addr.remote() else {
            return Err(Error::Unsupported {
                address: addr.name().clone(),
                what: "a local path as an object store",
            });
        };
        let retry = config.retry;
        let retry_config = RetryConfig {
            backoff: BackoffConfig {
                init_backoff: retry.initial_backoff(),
                max_backoff: retry.max_backoff(),
                base: 2.0,
            },
            max_retries: retry.attempts().saturating_sub(1) as usize,
            retry_timeout: retry.deadline(),
        };
        // The request timeout covers a request from connecting to the last
        // byte of its body, so a stalled answer is abandoned and retried.
        let mut options = vec![
            ("timeout".to_string(), fmt_duration(retry.request_timeout())),
            (
                "connect_timeout".to_string(),
                fmt_duration(retry.request_timeout().min(Duration::from_secs(5))),
            ),
        ];
        options.extend(config.options.iter().cloned());
        let config_error = |e: object_store::Error| Error::Config {
            address: addr.name().clone(),
            source: Flat::boxed(e),
        };
        let (scheme, _) = ObjectStoreScheme::parse(&remote.url).map_err(|e| Error::BadAddress {
            text: addr.as_str().to_string(),
            reason: e.to_string(),
        })?;
        let url = remote.store_url.clone();
        let (object, multipart, http): (
            Arc<dyn ObjectStore>,
            Option<Arc<dyn MultipartStore>>,
            bool,
        ) = match scheme {
            ObjectStoreScheme::AmazonS3 => {
                use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
                let b = AmazonS3Builder::from_env()
                    .with_url(url)
                    .with_retry(retry_config);
                let s = Arc::new(
                    configure!(b, AmazonS3ConfigKey, &options)
                        .build()
                        .map_err(config_error)?,
                );
                (s.clone(), Some(s), false)
            }
            ObjectStoreScheme::GoogleCloudStorage => {
                use object_store::gcp::{GoogleCloudStorageBuilder, GoogleConfigKey};
                let b = GoogleCloudStorageBuilder::from_env()
                    .with_url(url)
                    .with_retry(retry_config);
                let s = Arc::new(
                    configure!(b, GoogleConfigKey, &options)
                        .build()
                        .map_err(config_error)?,
                );
                (s.clone(), Some(s), false)
            }
            ObjectStoreScheme::MicrosoftAzure => {
                use object_store::azure::{AzureConfigKey, MicrosoftAzureBuilder};
                let b = MicrosoftAzureBuilder::from_env()
                    .with_url(url)
                    .with_retry(retry_config);
                let s = Arc::new(
                    configure!(b, AzureConfigKey, &options)
                        .build()
                        .map_err(config_error)?,
                );
                (s.clone(), Some(s), false)
            }
            ObjectStoreScheme::Http => {
                use object_store::http::HttpBuilder;
                let b = HttpBuilder::new().with_url(url).with_retry(retry_config);
                let s = Arc::new(
                    configure!(b, ClientConfigKey, &options)
                        .build()
                        .map_err(config_error)?,
                );
                (s, None, true)
            }
            _ => {
                return Err(Error::Unsupported {
                    address: addr.name().clone(),
                    what: "this kind of URL",
                });
            }
        };
        Ok(Store {
            object,
            multipart,
            http,
            retry,
            concurrency: config.concurrency,
            part_size: config.part_size,
            block_size: config.block_size,
        })
    }

    fn path(addr: &Address) -> Result<StorePath> {
        let key = addr.remote().map_or("", |r| r.key.as_str());
        StorePath::parse(key.trim_end_matches('/')).map_err(|e| Error::BadAddress {
            text: addr.as_str().to_string(),
            reason: e.to_string(),
        })
    }

    fn object_path(addr: &Address) -> Result<StorePath> {
        let path = Store::path(addr)?;
        if path.as_ref().is_empty() || addr.remote().is_some_and(|r| r.key.ends_with('/')) {
            return Err(Error::BadAddress {
                text: addr.as_str().to_string(),
                reason: "it names a bucket or folder, not an object".to_string(),
            });
        }
        Ok(path)
    }

    fn remote_object(self: &Arc<Self>, addr: &Address) -> Result<RemoteObject> {
        Ok(RemoteObject {
            store: self.clone(),
            path: Store::object_path(addr)?,
            name: addr.name().clone(),
            e_tag: None,
        })
    }

    pub(crate) fn open(self: &Arc<Self>, addr: &Address) -> Result<Object> {
        let mut object = self.remote_object(addr)?;
        let name = addr.name();
        let meta = block_on(within(&self.retry, name, None, async {
            self.object
                .head(&object.path)
                .await
                .map_err(|e| read_error(name, None, 1, e))
        }))?;
        object.e_tag = meta.e_tag;
        Ok(Object::new(
            addr.clone(),
            meta.size,
            Backend::Remote(Arc::new(object)),
        ))
    }

    pub(crate) fn stat(self: &Arc<Self>, addr: &Address) -> Result<Option<Meta>> {
        let path = Store::path(addr)?;
        let name = addr.name();
        if path.as_ref().is_empty() {
            return Ok(Some(Meta {
                size: 0,
                is_dir: true,
                version: None,
            }));
        }
        block_on(within(&self.retry, name, None, async {
            // Some servers (s3s-fs) fail a HEAD of a folder instead of
            // answering 404: that failure stands only if no listing shows
            // a folder there.
            let mut head_failure = None;
            if !addr.remote().is_some_and(|r| r.key.ends_with('/')) {
                match self.object.head(&path).await {
                    Ok(meta) => {
                        return Ok(Some(Meta {
                            size: meta.size,
                            is_dir: false,
                            version: None,
                        }));
                    }
                    Err(object_store::Error::NotFound { .. }) => {}
                    Err(e) => head_failure = Some(read_error(name, None, 1, e)),
                }
            }
            if self.http {
                return head_failure.map_or(Ok(None), Err);
            }
            let listed = self.object.list_with_delimiter(Some(&path)).await;
            match (listed, head_failure) {
                (Ok(l), _) if !l.objects.is_empty() || !l.common_prefixes.is_empty() => {
                    Ok(Some(Meta {
                        size: 0,
                        is_dir: true,
                        version: None,
                    }))
                }
                (_, Some(failure)) => Err(failure),
                (Ok(_), None) => Ok(None),
                (Err(e), None) => Err(Error::list(name, Flat::boxed(e))),
            }
        }))
    }

    fn no_listing(&self, addr: &Address) -> Result<()> {
        if self.http {
            return Err(Error::Unsupported {
                address: addr.name().clone(),
                what: "listing over plain HTTP",
            });
        }
        Ok(())
    }

    pub(crate) fn list(self: &Arc<Self>, dir: &Address) -> Result<Vec<Entry>> {
        self.no_listing(dir)?;
        let path = Store::path(dir)?;
        let prefix = (!path.as_ref().is_empty()).then_some(&path);
        let name = dir.name();
        let listed = block_on(within(&self.retry, name, None, async {
            self.object
                .list_with_delimiter(prefix)
                .await
                .map_err(|e| Error::list(name, Flat::boxed(e)))
        }))?;
        let mut found: Vec<Entry> = listed
            .objects
            .into_iter()
            .filter_map(|meta| {
                let file = meta.location.filename()?;
                (!file.starts_with('.')).then(|| Entry {
                    address: dir.join(file),
                    size: meta.size,
                })
            })
            .collect();
        found.sort_by(|a, b| a.address.as_str().cmp(b.address.as_str()));
        Ok(found)
    }

    pub(crate) fn glob(self: &Arc<Self>, dir: &Address, rest: &str) -> Result<Vec<Entry>> {
        self.no_listing(dir)?;
        let pattern = glob::Pattern::new(rest).map_err(|e| Error::BadPattern {
            pattern: format!("{dir}{rest}"),
            reason: e.to_string(),
        })?;
        let path = Store::path(dir)?;
        let prefix = (!path.as_ref().is_empty()).then_some(&path);
        let name = dir.name();
        let metas = block_on(within(&self.retry, name, None, async {
            if rest.contains('/') {
                self.object.list(prefix).try_collect::<Vec<_>>().await
            } else {
                self.object
                    .list_with_delimiter(prefix)
                    .await
                    .map(|l| l.objects)
            }
            .map_err(|e| Error::list(name, Flat::boxed(e)))
        }))?;
        let strip = if path.as_ref().is_empty() {
            String::new()
        } else {
            format!("{}/", path.as_ref())
        };
        let mut found: Vec<Entry> = metas
            .into_iter()
            .filter_map(|meta| {
                let relative = meta.location.as_ref().strip_prefix(strip.as_str())?;
                pattern.matches_with(relative, MATCH).then(|| Entry {
                    address: dir.join(relative),
                    size: meta.size,
                })
            })
            .collect();
        found.sort_by(|a, b| a.address.as_str().cmp(b.address.as_str()));
        Ok(found)
    }

    pub(crate) fn read_all(self: &Arc<Self>, addr: &Address) -> Result<Bytes> {
        let mut object = self.remote_object(addr)?;
        let name = addr.name();
        block_on(async {
            // One request without a range: the size comes with the body.
            let first = within(&self.retry, name, None, async {
                let result = self
                    .object
                    .get_opts(&object.path, GetOptions::default())
                    .await
                    .map_err(|e| read_error(name, None, 1, e))?;
                let (size, e_tag) = (result.meta.size, result.meta.e_tag.clone());
                let mut buf = Vec::new();
                let mut stream = result.into_stream();
                while let Some(chunk) = stream.next().await {
                    match chunk {
                        Ok(b) if (buf.len() + b.len()) as u64 <= size => buf.extend_from_slice(&b),
                        Ok(_) => return Err(too_long(name, 0..size)),
                        // The rest is asked for again below.
                        Err(_) => break,
                    }
                }
                Ok((buf, size, e_tag))
            })
            .await?;
            let (mut buf, size, e_tag) = first;
            object.e_tag = e_tag;
            let filled = buf.len();
            if (filled as u64) < size {
                let total = usize::try_from(size).map_err(|_| Error::BufferLength {
                    expected: size,
                    actual: usize::MAX,
                })?;
                buf.resize(total, 0);
                object
                    .fetch_into(filled as u64..size, &mut buf[filled..])
                    .await?;
            }
            Ok(Bytes::from(buf))
        })
    }

    pub(crate) fn create(self: &Arc<Self>, addr: &Address) -> Result<Writer> {
        let path = Store::object_path(addr)?;
        let spool = tempfile::tempfile().map_err(|e| Error::write(addr.name(), e))?;
        Ok(Writer::remote(
            addr,
            spool,
            Upload {
                store: self.clone(),
                path,
                name: addr.name().clone(),
            },
        ))
    }

    pub(crate) fn create_streaming(self: &Arc<Self>, addr: &Address) -> Result<Writer> {
        let path = Store::object_path(addr)?;
        Ok(Writer::streaming(
            addr,
            StreamUpload {
                store: self.clone(),
                path,
                name: addr.name().clone(),
                buf: Vec::new(),
                pos: 0,
                parts: None,
                failed: false,
                committed: false,
            },
        ))
    }

    pub(crate) fn remove(self: &Arc<Self>, addr: &Address) -> Result<()> {
        let path = Store::object_path(addr)?;
        let name = addr.name();
        block_on(within(&self.retry, name, None, async {
            match self.object.delete(&path).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
                Err(e) => Err(write_error(name, 1, e)),
            }
        }))
    }
}

fn too_long(name: &Arc<str>, range: Range<u64>) -> Error {
    Error::Read {
        address: name.clone(),
        range: Some(range),
        attempts: 1,
        source: "the server sent more bytes than asked for".into(),
    }
}

/// An opened object.
pub(crate) struct RemoteObject {
    store: Arc<Store>,
    path: StorePath,
    name: Arc<str>,
    /// The version opened: every range is asked for with `If-Match`, so
    /// that an object replaced while it is read fails instead of mixing
    /// two versions' bytes.
    e_tag: Option<String>,
}

impl RemoteObject {
    pub(crate) fn read_range(&self, range: Range<u64>) -> Result<Bytes> {
        let mut buf = vec![0; (range.end - range.start) as usize];
        self.read_range_into(range, &mut buf)?;
        Ok(Bytes::from(buf))
    }

    pub(crate) fn read_range_into(&self, range: Range<u64>, out: &mut [u8]) -> Result<()> {
        block_on(self.fetch_into(range, out))
    }

    /// Several ranges (already coalesced), fetched concurrently.
    pub(crate) fn read_many(&self, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        block_on(async {
            futures::stream::iter(ranges.iter().cloned())
                .map(|r| async move {
                    let mut buf = vec![0; (r.end - r.start) as usize];
                    self.fetch_into(r, &mut buf).await?;
                    Ok::<_, Error>(Bytes::from(buf))
                })
                .buffered(self.store.concurrency)
                .try_collect()
                .await
        })
    }

    /// Fills `out` with the bytes of `range`, retrying within the deadline.
    async fn fetch_into(&self, range: Range<u64>, out: &mut [u8]) -> Result<()> {
        let retry = self.store.retry;
        within(
            &retry,
            &self.name,
            Some(range.clone()),
            self.fetch_loop(range.clone(), out),
        )
        .await
    }

    /// Asks for the bytes not yet received until all have come: a body
    /// that breaks off, or ends short, is asked for again from where it
    /// stopped, after a backoff. (Failures before the body starts are
    /// retried inside object_store, per its [`RetryConfig`].)
    async fn fetch_loop(&self, range: Range<u64>, out: &mut [u8]) -> Result<()> {
        let retry = self.store.retry;
        let mut filled = 0usize;
        let mut attempt = 0u32;
        loop {
            if filled == out.len() {
                return Ok(());
            }
            attempt += 1;
            let from = range.start + filled as u64;
            let options = GetOptions {
                range: Some(GetRange::Bounded(from..range.end)),
                if_match: self.e_tag.clone(),
                ..GetOptions::default()
            };
            let result = self
                .store
                .object
                .get_opts(&self.path, options)
                .await
                .map_err(|e| read_error(&self.name, Some(range.clone()), attempt, e))?;
            if result.range != (from..range.end) {
                return Err(Error::Read {
                    address: self.name.clone(),
                    range: Some(range.clone()),
                    attempts: attempt,
                    source: format!(
                        "the server answered with bytes {}..{}",
                        result.range.start, result.range.end
                    )
                    .into(),
                });
            }
            let mut stream = result.into_stream();
            let mut failure: Option<BoxError> = None;
            while let Some(chunk) = stream.next().await {
                match chunk {
                    Ok(bytes) => {
                        let end = filled + bytes.len();
                        if end > out.len() {
                            return Err(too_long(&self.name, range.clone()));
                        }
                        out[filled..end].copy_from_slice(&bytes);
                        filled = end;
                    }
                    Err(e) => {
                        failure = Some(Flat::boxed(e));
                        break;
                    }
                }
            }
            if filled == out.len() {
                return Ok(());
            }
            let cause = failure.unwrap_or_else(|| {
                Box::new(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("the body ended after {} of {} bytes", filled, out.len()),
                ))
            });
            if attempt >= retry.attempts() {
                return Err(Error::Read {
                    address: self.name.clone(),
                    range: Some(range),
                    attempts: attempt,
                    source: cause,
                });
            }
            tokio::time::sleep(retry.backoff(attempt)).await;
        }
    }
}

/// One request of [`read_into`]: a range of an object, and where the
/// parts it holds go.
struct Fetch<'a> {
    object: &'a RemoteObject,
    range: Range<u64>,
    targets: Vec<(usize, &'a mut [u8])>,
}

async fn run_fetch(mut f: Fetch<'_>) -> Result<()> {
    let whole = f.range.end - f.range.start;
    if let [(0, out)] = f.targets.as_mut_slice() {
        if out.len() as u64 == whole {
            // One part, fetched straight into its place.
            return f.object.fetch_into(f.range.clone(), out).await;
        }
    }
    let mut buf = vec![0; whole as usize];
    f.object.fetch_into(f.range.clone(), &mut buf).await?;
    for (offset, out) in f.targets {
        let n = out.len();
        out.copy_from_slice(&buf[offset..offset + n]);
    }
    Ok(())
}

/// A target of [`read_into`]: a range of an object and where it goes.
type Part<'a> = (&'a Arc<RemoteObject>, Range<u64>, &'a mut [u8]);

/// The parts of [`read_into`] that read one object.
type Group<'a> = (&'a Arc<RemoteObject>, Vec<(Range<u64>, &'a mut [u8])>);

/// The remote parts of [`crate::read_into`]: nearby ranges of one object
/// are fetched together, everything concurrently.
pub(crate) fn read_into(parts: Vec<Part<'_>>) -> Result<()> {
    // Group by object, keeping each group's parts in order.
    let mut groups: Vec<Group<'_>> = Vec::new();
    for (object, range, out) in parts {
        match groups.iter_mut().find(|(o, _)| Arc::ptr_eq(o, object)) {
            Some((_, g)) => g.push((range, out)),
            None => groups.push((object, vec![(range, out)])),
        }
    }
    let concurrency = groups.first().map_or(1, |(o, _)| o.store.concurrency);
    let mut fetches: Vec<Fetch<'_>> = Vec::new();
    for (object, group) in groups {
        let ranges: Vec<Range<u64>> = group.iter().map(|(r, _)| r.clone()).collect();
        let plan = coalesce(&ranges, REMOTE_COALESCE_GAP);
        let first = fetches.len();
        fetches.extend(plan.merged.iter().map(|r| Fetch {
            object,
            range: r.clone(),
            targets: Vec::new(),
        }));
        for ((_, out), (i, offset)) in group.into_iter().zip(plan.place) {
            fetches[first + i].targets.push((offset as usize, out));
        }
    }
    block_on(async {
        futures::stream::iter(fetches)
            .map(run_fetch)
            .buffer_unordered(concurrency)
            .try_collect::<Vec<()>>()
            .await
    })?;
    Ok(())
}

/// A remote object read in order, block by block, with blocks fetched
/// ahead in the background.
pub(crate) struct RemoteReader {
    rx: tokio::sync::mpsc::Receiver<Result<Bytes>>,
    task: Option<tokio::task::JoinHandle<()>>,
    current: Bytes,
    /// The bytes still to come.
    remaining: u64,
    failed: bool,
    name: Arc<str>,
    end: u64,
}

impl RemoteReader {
    pub(crate) fn start(
        object: Arc<RemoteObject>,
        start: u64,
        end: u64,
        read_ahead: usize,
    ) -> RemoteReader {
        let block = object
            .store
            .block_size
            .unwrap_or_else(|| (read_ahead / 4).clamp(1 << 20, 8 << 20)) as u64;
        // Up to `read_ahead` bytes are in flight or waiting; at least one
        // block is, so that a small read-ahead still reads ahead.
        let in_flight = (read_ahead as u64 / block).max(1) as usize;
        let (tx, rx) = tokio::sync::mpsc::channel(1);
        let name = object.name.clone();
        let task = (start < end).then(|| {
            runtime().spawn(async move {
                let blocks = (start..end)
                    .step_by(block as usize)
                    .map(move |s| s..(s + block).min(end));
                let mut fetched = futures::stream::iter(blocks)
                    .map(|r| {
                        let object = object.clone();
                        async move {
                            let mut buf = vec![0; (r.end - r.start) as usize];
                            object.fetch_into(r, &mut buf).await?;
                            Ok(Bytes::from(buf))
                        }
                    })
                    .buffered(in_flight);
                while let Some(item) = fetched.next().await {
                    let failed = item.is_err();
                    if tx.send(item).await.is_err() || failed {
                        break;
                    }
                }
            })
        });
        RemoteReader {
            rx,
            task,
            current: Bytes::new(),
            remaining: end - start,
            failed: false,
            name,
            end,
        }
    }
}

/// Waits for the next block, from a plain thread (or, like [`block_on`],
/// from a helper thread when called inside a tokio runtime, where blocking
/// in place is refused).
fn recv<T: Send>(rx: &mut tokio::sync::mpsc::Receiver<T>) -> Option<T> {
    if tokio::runtime::Handle::try_current().is_err() {
        return rx.blocking_recv();
    }
    std::thread::scope(|s| match s.spawn(|| rx.blocking_recv()).join() {
        Ok(out) => out,
        Err(panic) => std::panic::resume_unwind(panic),
    })
}

impl io::Read for RemoteReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.current.is_empty() {
            if self.remaining == 0 || buf.is_empty() {
                return Ok(0);
            }
            if self.failed {
                return Err(io::Error::other(format!(
                    "{}: an earlier read of this stream failed",
                    self.name
                )));
            }
            match recv(&mut self.rx) {
                Some(Ok(bytes)) => {
                    self.remaining = self.remaining.saturating_sub(bytes.len() as u64);
                    self.current = bytes;
                }
                Some(Err(e)) => {
                    self.failed = true;
                    return Err(e.into());
                }
                None => {
                    // The background task ended before the last block:
                    // never pass that off as the end of the object.
                    self.failed = true;
                    return Err(Error::Read {
                        address: self.name.clone(),
                        range: Some(self.end - self.remaining..self.end),
                        attempts: 1,
                        source: "the background reader stopped".into(),
                    }
                    .into());
                }
            }
        }
        let n = buf.len().min(self.current.len());
        buf[..n].copy_from_slice(&self.current[..n]);
        bytes::Buf::advance(&mut self.current, n);
        Ok(n)
    }
}

impl Drop for RemoteReader {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// What a remote [`Writer`] uploads on commit.
pub(crate) struct Upload {
    store: Arc<Store>,
    path: StorePath,
    name: Arc<str>,
}

impl Upload {
    /// Uploads the spool file: one request if it fits in a part (or the
    /// store has no multipart uploads), else a multipart upload, aborted
    /// if any part fails for good.
    pub(crate) fn commit(self, spool: &File) -> Result<()> {
        let name = &self.name;
        let size = spool.metadata().map_err(|e| Error::write(name, e))?.len();
        let store = &self.store;
        let part = store.part_size as u64;
        match &store.multipart {
            Some(multipart) if size > part => block_on(self.multipart(multipart, spool, size)),
            _ => {
                let data = read_part(spool, 0..size).map_err(|e| Error::write(name, e))?;
                let this = &self;
                block_on(this.retried(|| {
                    let payload = PutPayload::from(data.clone());
                    async move {
                        store
                            .object
                            .put_opts(&this.path, payload, Default::default())
                            .await
                            .map(|_| ())
                    }
                }))
            }
        }
    }

    async fn multipart(
        &self,
        multipart: &Arc<dyn MultipartStore>,
        spool: &File,
        size: u64,
    ) -> Result<()> {
        let id = self
            .retried(|| multipart.create_multipart(&self.path))
            .await?;
        let part = self.store.part_size as u64;
        let count = size.div_ceil(part) as usize;
        let uploaded: Result<Vec<PartId>> = futures::stream::iter(0..count)
            .map(|i| {
                let id = &id;
                async move {
                    let range = i as u64 * part..((i as u64 + 1) * part).min(size);
                    let data = read_part(spool, range).map_err(|e| Error::write(&self.name, e))?;
                    self.retried(|| {
                        multipart.put_part(&self.path, id, i, PutPayload::from(data.clone()))
                    })
                    .await
                }
            })
            .buffered(self.store.concurrency)
            .try_collect()
            .await;
        let done = match uploaded {
            Ok(parts) => {
                self.retried(|| multipart.complete_multipart(&self.path, &id, parts.clone()))
                    .await
            }
            Err(e) => Err(e),
        };
        if let Err(e) = done {
            // Best effort: the parts already sent would otherwise linger
            // (and be billed) until a lifecycle rule removes them.
            let abort = multipart.abort_multipart(&self.path, &id);
            let _ = tokio::time::timeout(self.store.retry.request_timeout(), abort).await;
            return Err(e);
        }
        Ok(())
    }

    async fn retried<T, F, Fut>(&self, request: F) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = object_store::Result<T>>,
    {
        retried(self.store.retry, &self.name, request).await
    }
}

/// Makes a write request until it succeeds, fails for good, or runs out of
/// attempts or time.
async fn retried<T, F, Fut>(retry: Retry, name: &Arc<str>, mut request: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = object_store::Result<T>>,
{
    within(&retry, name, None, async {
        let mut attempt = 0;
        loop {
            attempt += 1;
            match request().await {
                Ok(out) => return Ok(out),
                Err(e) if attempt < retry.attempts() && worth_retrying(&e) => {
                    tokio::time::sleep(retry.backoff(attempt)).await;
                }
                Err(e) => return Err(write_error(name, attempt, e)),
            }
        }
    })
    .await
}

/// A multipart upload under way.
struct Parts {
    multipart: Arc<dyn MultipartStore>,
    id: MultipartId,
    /// Parts sent and not yet known to have arrived, oldest first.
    in_flight: std::collections::VecDeque<tokio::task::JoinHandle<Result<PartId>>>,
    /// Parts that arrived, in order.
    done: Vec<PartId>,
}

/// A remote [`Writer`] that uploads as it goes: each full part is sent in
/// the background while the next is written, with up to the storage's
/// concurrency in flight. It cannot seek back.
pub(crate) struct StreamUpload {
    store: Arc<Store>,
    path: StorePath,
    name: Arc<str>,
    buf: Vec<u8>,
    /// Bytes written so far.
    pos: u64,
    parts: Option<Parts>,
    /// A part failed: the upload is lost, every write fails.
    failed: bool,
    committed: bool,
}

impl StreamUpload {
    fn part_size(&self) -> usize {
        self.store.part_size
    }

    pub(crate) fn position(&self) -> u64 {
        self.pos
    }

    pub(crate) fn write(&mut self, data: &[u8]) -> Result<usize> {
        if self.failed {
            return Err(Error::Write {
                address: self.name.clone(),
                attempts: 1,
                source: "an earlier part of this upload failed".into(),
            });
        }
        let room = self.part_size() - self.buf.len();
        let n = data.len().min(room);
        self.buf.extend_from_slice(&data[..n]);
        self.pos += n as u64;
        if self.buf.len() == self.part_size() && self.store.multipart.is_some() {
            if let Err(e) = self.send_part() {
                self.failed = true;
                return Err(e);
            }
        }
        Ok(n)
    }

    /// Sends the buffer as the next part, starting the upload if need be,
    /// and waits for the oldest part when too many are in flight.
    fn send_part(&mut self) -> Result<()> {
        let Some(multipart) = self.store.multipart.clone() else {
            return Ok(());
        };
        let retry = self.store.retry;
        if self.parts.is_none() {
            let id = block_on(retried(retry, &self.name, || {
                multipart.create_multipart(&self.path)
            }))?;
            self.parts = Some(Parts {
                multipart: multipart.clone(),
                id,
                in_flight: Default::default(),
                done: Vec::new(),
            });
        }
        let data = Bytes::from(std::mem::replace(
            &mut self.buf,
            Vec::with_capacity(self.store.part_size),
        ));
        let Some(parts) = self.parts.as_mut() else {
            return Ok(());
        };
        let index = parts.done.len() + parts.in_flight.len();
        let (name, path, id) = (self.name.clone(), self.path.clone(), parts.id.clone());
        parts.in_flight.push_back(runtime().spawn(async move {
            retried(retry, &name, || {
                multipart.put_part(&path, &id, index, PutPayload::from(data.clone()))
            })
            .await
        }));
        while parts.in_flight.len() > self.store.concurrency {
            Self::reap_one(parts, &self.name)?;
        }
        Ok(())
    }

    fn reap_one(parts: &mut Parts, name: &Arc<str>) -> Result<()> {
        if let Some(task) = parts.in_flight.pop_front() {
            let part = block_on(task).map_err(|e| write_error(name, 1, e))??;
            parts.done.push(part);
        }
        Ok(())
    }

    /// Sends what is left and completes the upload (or sends it all in one
    /// request when it never filled a part).
    pub(crate) fn commit(mut self) -> Result<()> {
        let result = self.finish();
        if result.is_ok() {
            self.committed = true;
        }
        result
    }

    fn finish(&mut self) -> Result<()> {
        if self.failed {
            return Err(Error::Write {
                address: self.name.clone(),
                attempts: 1,
                source: "an earlier part of this upload failed".into(),
            });
        }
        if self.parts.is_none() {
            let data = Bytes::from(std::mem::take(&mut self.buf));
            let (store, path) = (&self.store, &self.path);
            return block_on(retried(store.retry, &self.name, || {
                let payload = PutPayload::from(data.clone());
                async move {
                    store
                        .object
                        .put_opts(path, payload, Default::default())
                        .await
                        .map(|_| ())
                }
            }));
        }
        if !self.buf.is_empty() {
            self.send_part()?;
        }
        let Some(parts) = self.parts.as_mut() else {
            return Ok(());
        };
        while !parts.in_flight.is_empty() {
            Self::reap_one(parts, &self.name)?;
        }
        let (multipart, id, done) = (&parts.multipart, &parts.id, &parts.done);
        block_on(retried(self.store.retry, &self.name, || {
            multipart.complete_multipart(&self.path, id, done.clone())
        }))?;
        Ok(())
    }
}

impl Drop for StreamUpload {
    fn drop(&mut self) {
        if self.committed {
            return;
        }
        if let Some(parts) = self.parts.take() {
            for task in &parts.in_flight {
                task.abort();
            }
            // Best effort, as for a failed upload: the parts already sent
            // would otherwise linger until a lifecycle rule removes them.
            let timeout = self.store.retry.request_timeout();
            let abort = parts.multipart.abort_multipart(&self.path, &parts.id);
            // The timer must be made inside the runtime.
            let _ = block_on(async { tokio::time::timeout(timeout, abort).await });
        }
    }
}

/// The bytes of `range` of the spool file.
fn read_part(spool: &File, range: Range<u64>) -> io::Result<Bytes> {
    let len = usize::try_from(range.end - range.start)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "part too large"))?;
    let mut buf = vec![0; len];
    crate::local::read_exact_at(spool, &mut buf, range.start)?;
    Ok(Bytes::from(buf))
}
