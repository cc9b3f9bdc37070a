//! The in-process S3 server.

use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use grist_io::{Retry, Storage};
use hyper_util::rt::{TokioExecutor, TokioIo};
use s3s::auth::SimpleAuth;
use s3s::service::S3ServiceBuilder;

use crate::faults::{FaultService, Faults};

/// The access key the server accepts.
pub const ACCESS_KEY: &str = "grist-test-access-key";
/// The secret key the server accepts.
pub const SECRET_KEY: &str = "grist-test-secret-key";
/// The region clients sign for.
pub const REGION: &str = "us-east-1";

/// How to start an [`S3Server`].
#[derive(Debug, Clone)]
pub struct S3ServerBuilder {
    root: PathBuf,
    port: u16,
    latency: Duration,
}

impl S3ServerBuilder {
    /// The port to listen on, on 127.0.0.1. By default, a free port the
    /// system picks.
    #[must_use]
    pub fn with_port(mut self, port: u16) -> Self {
        self.port = port;
        self
    }

    /// A delay before every request is served. By default, none.
    #[must_use]
    pub fn with_latency(mut self, latency: Duration) -> Self {
        self.latency = latency;
        self
    }

    /// Starts the server on its own thread.
    pub fn start(self) -> io::Result<S3Server> {
        std::fs::create_dir_all(&self.root)?;
        let listener = std::net::TcpListener::bind(("127.0.0.1", self.port))?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let fs =
            s3s_fs::FileSystem::new(&self.root).map_err(|e| io::Error::other(format!("{e:?}")))?;
        let service = {
            let mut b = S3ServiceBuilder::new(fs);
            b.set_auth(SimpleAuth::from_single(ACCESS_KEY, SECRET_KEY));
            b.build()
        };
        let faults = Faults::default();
        faults.set_latency(self.latency);
        let service = FaultService {
            inner: service,
            faults: faults.clone(),
        };
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("grist-s3-server")
            .enable_all()
            .build()?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("grist-s3-server".to_string())
            .spawn(move || {
                rt.block_on(serve(listener, service, stopped));
                // Stalled answers and open connections are dropped, not
                // waited for.
                rt.shutdown_timeout(Duration::from_millis(100));
            })?;
        Ok(S3Server {
            addr,
            root: self.root.canonicalize()?,
            faults,
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

async fn serve(
    listener: std::net::TcpListener,
    service: FaultService,
    mut stopped: tokio::sync::oneshot::Receiver<()>,
) {
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("grist-s3-server: cannot listen: {e}");
            return;
        }
    };
    let http = Arc::new(hyper_util::server::conn::auto::Builder::new(
        TokioExecutor::new(),
    ));
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((socket, _)) = accepted else { continue };
                // Without it, a response written in two pieces waits for the
                // client's delayed ACK (40 ms) before its second piece.
                let _ = socket.set_nodelay(true);
                let (http, service) = (http.clone(), service.clone());
                tokio::spawn(async move {
                    let _ = http.serve_connection(TokioIo::new(socket), service).await;
                });
            }
            _ = &mut stopped => break,
        }
    }
}

/// An S3-compatible server on 127.0.0.1, serving a folder: each subfolder
/// is a bucket, each file in it an object. Dropping it stops the server
/// and its thread.
///
/// The server is `s3s-fs` behind [`Faults`]. It follows a bucket that is a
/// symbolic link to a folder ([`link`](Self::link)), so a read-only tree
/// such as the golden corpus can be served without copying; it keeps its
/// own bookkeeping (upload parts, metadata) in the root folder, not in the
/// buckets. It insists, as S3 does, on parts of at least 5 MiB but the
/// last in a multipart upload.
#[derive(Debug)]
pub struct S3Server {
    addr: SocketAddr,
    root: PathBuf,
    faults: Faults,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl S3Server {
    /// Starts a server for `root` on a free port.
    ///
    /// # Panics
    ///
    /// If the server cannot start (a test cannot go on without it); use
    /// [`S3Server::builder`] to handle the error.
    pub fn start(root: &Path) -> S3Server {
        match S3Server::builder(root).start() {
            Ok(server) => server,
            Err(e) => panic!("cannot start the S3 test server on {}: {e}", root.display()),
        }
    }

    /// Options for a server of `root`.
    pub fn builder(root: &Path) -> S3ServerBuilder {
        S3ServerBuilder {
            root: root.to_path_buf(),
            port: 0,
            latency: Duration::ZERO,
        }
    }

    /// The URL clients send requests to, `http://127.0.0.1:<port>`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The folder served.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The fault and counter control.
    pub fn faults(&self) -> &Faults {
        &self.faults
    }

    /// Creates bucket `name` (a folder of the root) if need be, and
    /// returns its folder.
    ///
    /// # Panics
    ///
    /// If `name` is not a valid bucket name (3 to 63 lowercase letters,
    /// digits, dots and hyphens: the server answers 400 to any other) or
    /// the folder cannot be made.
    pub fn bucket(&self, name: &str) -> PathBuf {
        if let Err(e) = valid_bucket(name) {
            panic!("{e}");
        }
        let dir = self.root.join(name);
        if let Err(e) = std::fs::create_dir_all(&dir) {
            panic!("cannot create bucket folder {}: {e}", dir.display());
        }
        dir
    }

    /// Serves `dir` as bucket `name` through a symbolic link, without
    /// copying (the server only reads it).
    #[cfg(unix)]
    pub fn link(&self, name: &str, dir: &Path) -> io::Result<()> {
        valid_bucket(name)?;
        std::os::unix::fs::symlink(dir.canonicalize()?, self.root.join(name))
    }

    /// Copies the tree `dir` into bucket `name`.
    pub fn mirror(&self, name: &str, dir: &Path) -> io::Result<()> {
        fn copy(from: &Path, to: &Path) -> io::Result<()> {
            std::fs::create_dir_all(to)?;
            for entry in std::fs::read_dir(from)? {
                let entry = entry?;
                let target = to.join(entry.file_name());
                if std::fs::metadata(entry.path())?.is_dir() {
                    copy(&entry.path(), &target)?;
                } else {
                    std::fs::copy(entry.path(), target)?;
                }
            }
            Ok(())
        }
        valid_bucket(name)?;
        copy(dir, &self.root.join(name))
    }

    /// `s3://bucket/key`.
    pub fn url(&self, bucket: &str, key: &str) -> String {
        format!("s3://{bucket}/{key}")
    }

    /// The settings a client needs, as environment variables:
    /// `AWS_ENDPOINT`, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
    /// `AWS_REGION`, `AWS_ALLOW_HTTP`.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ENDPOINT", self.endpoint()),
            ("AWS_ACCESS_KEY_ID", ACCESS_KEY.to_string()),
            ("AWS_SECRET_ACCESS_KEY", SECRET_KEY.to_string()),
            ("AWS_REGION", REGION.to_string()),
            ("AWS_ALLOW_HTTP", "true".to_string()),
        ]
    }

    /// Retries for tests: 5 attempts, 10 to 200 ms of backoff, 2 s per
    /// request, 20 s per operation.
    pub fn test_retry() -> Retry {
        Retry::new()
            .with_attempts(5)
            .with_backoff(Duration::from_millis(10), Duration::from_millis(200))
            .with_request_timeout(Duration::from_secs(2))
            .with_deadline(Duration::from_secs(20))
    }

    /// A storage pointed at this server (endpoint, credentials, region,
    /// plain HTTP) with [`S3Server::test_retry`].
    pub fn storage(&self) -> Storage {
        Storage::new()
            .with_remote_option("aws_endpoint", &self.endpoint())
            .with_remote_option("aws_access_key_id", ACCESS_KEY)
            .with_remote_option("aws_secret_access_key", SECRET_KEY)
            .with_remote_option("aws_region", REGION)
            .with_remote_option("aws_allow_http", "true")
            .with_remote_option("aws_virtual_hosted_style_request", "false")
            .with_retry(S3Server::test_retry())
    }
}

/// Bucket names the server accepts, as S3 does.
fn valid_bucket(name: &str) -> io::Result<()> {
    if s3s::path::check_bucket_name(name) {
        Ok(())
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{name:?} is not a valid S3 bucket name (3 to 63 of a-z, 0-9, '.', '-')"),
        ))
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
