//! Fault injection and request counting in front of the S3 server.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body::{Frame, SizeHint};
use http_body_util::BodyExt;
use http_body_util::combinators::BoxBody;
use hyper::body::Incoming;
use s3s::service::S3Service;

type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// What the server does wrong to a request.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Answers with this HTTP status (e.g. 503) and an S3 error body,
    /// without serving the request.
    Status(u16),
    /// Serves the request but drops the connection after `after` bytes of
    /// the response body (a body shorter than that is sent whole).
    Drop {
        /// Bytes of the body sent before the connection is dropped.
        after: usize,
    },
    /// Waits this long before serving the request (longer than the
    /// client's request timeout, to make it give up).
    Stall(Duration),
    /// Sends `after` bytes of the response body, then waits `duration`
    /// before sending the rest.
    StallBody {
        /// Bytes of the body sent before the pause.
        after: usize,
        /// How long the body pauses.
        duration: Duration,
    },
}

/// How many requests the server has seen, by kind.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Every request.
    pub requests: u64,
    /// `GET`s (listings included).
    pub gets: u64,
    /// `GET`s with a `Range` header.
    pub ranged_gets: u64,
    /// `HEAD`s.
    pub heads: u64,
    /// `PUT`s (single uploads and parts).
    pub puts: u64,
    /// `POST`s (starting and completing multipart uploads).
    pub posts: u64,
    /// `DELETE`s (removals and aborted uploads).
    pub deletes: u64,
    /// Requests that were given a fault.
    pub faulted: u64,
}

#[derive(Default)]
struct Counters {
    requests: AtomicU64,
    gets: AtomicU64,
    ranged_gets: AtomicU64,
    heads: AtomicU64,
    puts: AtomicU64,
    posts: AtomicU64,
    deletes: AtomicU64,
    faulted: AtomicU64,
}

#[derive(Default)]
struct Plan {
    latency: Duration,
    next: VecDeque<Fault>,
    always: Option<Fault>,
}

/// The control of a running [`S3Server`](crate::S3Server)'s faults and
/// counters; clones control the same server.
///
/// ```no_run
/// use std::time::Duration;
/// use grist_testkit::{Fault, S3Server};
///
/// let dir = tempfile::tempdir().unwrap();
/// let server = S3Server::start(dir.path());
/// let faults = server.faults();
/// faults.set_latency(Duration::from_millis(20));
/// faults.inject(3, Fault::Status(503));
/// faults.inject(1, Fault::Drop { after: 1000 });
/// assert_eq!(faults.requests(), 0);
/// ```
#[derive(Clone, Default)]
pub struct Faults {
    plan: Arc<Mutex<Plan>>,
    counters: Arc<Counters>,
}

impl std::fmt::Debug for Faults {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Faults")
            .field("counts", &self.counts())
            .finish_non_exhaustive()
    }
}

impl Faults {
    fn plan(&self) -> std::sync::MutexGuard<'_, Plan> {
        self.plan.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Delays every request by `latency` before serving it (as a distant
    /// store would). By default, none.
    pub fn set_latency(&self, latency: Duration) {
        self.plan().latency = latency;
    }

    /// Gives the next `n` requests `fault`, after any faults already
    /// queued.
    pub fn inject(&self, n: usize, fault: Fault) {
        self.plan().next.extend(std::iter::repeat_n(fault, n));
    }

    /// Shorthand: the next `n` requests are answered with HTTP 503.
    pub fn fail_next(&self, n: usize) {
        self.inject(n, Fault::Status(503));
    }

    /// Shorthand: the next `n` requests have their connection dropped
    /// after `after` bytes of body.
    pub fn drop_next(&self, n: usize, after: usize) {
        self.inject(n, Fault::Drop { after });
    }

    /// Shorthand: the next `n` requests wait `stall` before being served.
    pub fn stall_next(&self, n: usize, stall: Duration) {
        self.inject(n, Fault::Stall(stall));
    }

    /// Gives every request from now on `fault`, until [`clear`](Self::clear).
    pub fn fail_always(&self, fault: Fault) {
        self.plan().always = Some(fault);
    }

    /// Removes every fault (queued and persistent) and the latency.
    pub fn clear(&self) {
        *self.plan() = Plan::default();
    }

    /// The requests seen so far.
    pub fn counts(&self) -> Counts {
        let c = &*self.counters;
        let get = |a: &AtomicU64| a.load(Ordering::SeqCst);
        Counts {
            requests: get(&c.requests),
            gets: get(&c.gets),
            ranged_gets: get(&c.ranged_gets),
            heads: get(&c.heads),
            puts: get(&c.puts),
            posts: get(&c.posts),
            deletes: get(&c.deletes),
            faulted: get(&c.faulted),
        }
    }

    /// Every request seen so far.
    pub fn requests(&self) -> u64 {
        self.counters.requests.load(Ordering::SeqCst)
    }

    /// The `GET`s with a `Range` header seen so far.
    pub fn ranged_gets(&self) -> u64 {
        self.counters.ranged_gets.load(Ordering::SeqCst)
    }

    /// Sets every counter back to zero.
    pub fn reset_counts(&self) {
        let c = &*self.counters;
        for a in [
            &c.requests,
            &c.gets,
            &c.ranged_gets,
            &c.heads,
            &c.puts,
            &c.posts,
            &c.deletes,
            &c.faulted,
        ] {
            a.store(0, Ordering::SeqCst);
        }
    }

    /// Counts a request and picks its fault.
    fn on_request(&self, method: &Method, ranged: bool) -> (Duration, Option<Fault>) {
        let c = &*self.counters;
        c.requests.fetch_add(1, Ordering::SeqCst);
        let counter = match *method {
            Method::GET => Some(&c.gets),
            Method::HEAD => Some(&c.heads),
            Method::PUT => Some(&c.puts),
            Method::POST => Some(&c.posts),
            Method::DELETE => Some(&c.deletes),
            _ => None,
        };
        if let Some(counter) = counter {
            counter.fetch_add(1, Ordering::SeqCst);
        }
        if ranged && *method == Method::GET {
            c.ranged_gets.fetch_add(1, Ordering::SeqCst);
        }
        let mut plan = self.plan();
        let fault = plan.always.or_else(|| plan.next.pop_front());
        if fault.is_some() {
            c.faulted.fetch_add(1, Ordering::SeqCst);
        }
        (plan.latency, fault)
    }
}

pub(crate) type Body = BoxBody<Bytes, BoxError>;

/// The S3 service behind the faults.
#[derive(Clone)]
pub(crate) struct FaultService {
    pub(crate) inner: S3Service,
    pub(crate) faults: Faults,
}

impl hyper::service::Service<Request<Incoming>> for FaultService {
    type Response = Response<Body>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, BoxError>> + Send>>;

    fn call(&self, req: Request<Incoming>) -> Self::Future {
        let ranged = req.headers().contains_key(header::RANGE);
        let (latency, fault) = self.faults.on_request(req.method(), ranged);
        let inner = self.inner.clone();
        Box::pin(async move {
            if !latency.is_zero() {
                tokio::time::sleep(latency).await;
            }
            match fault {
                Some(Fault::Status(code)) => return Ok(status(code)),
                Some(Fault::Stall(d)) => tokio::time::sleep(d).await,
                _ => {}
            }
            let resp = hyper::service::Service::call(&inner, req)
                .await
                .map_err(BoxError::from)?;
            Ok(resp.map(|body| match fault {
                Some(Fault::Drop { after }) => Faulty::new(body, after, None).boxed(),
                Some(Fault::StallBody { after, duration }) => {
                    Faulty::new(body, after, Some(duration)).boxed()
                }
                _ => body.boxed(),
            }))
        })
    }
}

/// An S3-style error answer.
fn status(code: u16) -> Response<Body> {
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
    let xml = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>ServiceUnavailable</Code>\
         <Message>fault injected by grist-testkit ({code})</Message></Error>"
    );
    let mut resp = Response::new(
        http_body_util::Full::new(Bytes::from(xml))
            .map_err(|never| match never {})
            .boxed(),
    );
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/xml"),
    );
    resp
}

/// A response body that breaks off (or pauses) after some bytes.
struct Faulty {
    inner: Pin<Box<s3s::Body>>,
    /// Bytes still to send before the fault.
    left: usize,
    /// `None`: drop the connection at the fault; `Some`: pause this long.
    pause: Option<Duration>,
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
    /// The rest of the frame cut at the pause, sent after it.
    held: Option<Bytes>,
    /// The fault has been reached.
    reached: bool,
}

impl Faulty {
    fn new(inner: s3s::Body, after: usize, pause: Option<Duration>) -> Faulty {
        Faulty {
            inner: Box::pin(inner),
            left: after,
            pause,
            sleep: None,
            held: None,
            reached: false,
        }
    }
}

impl http_body::Body for Faulty {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        if this.reached {
            match this.pause {
                None => {
                    return Poll::Ready(Some(Err(
                        "grist-testkit fault: connection dropped mid-body".into(),
                    )));
                }
                Some(d) => {
                    let sleep = this
                        .sleep
                        .get_or_insert_with(|| Box::pin(tokio::time::sleep(d)));
                    ready!(sleep.as_mut().poll(cx));
                    this.pause = None;
                    this.left = usize::MAX;
                    this.reached = false;
                    if let Some(rest) = this.held.take() {
                        return Poll::Ready(Some(Ok(Frame::data(rest))));
                    }
                }
            }
        }
        let frame = match ready!(this.inner.as_mut().poll_frame(cx)) {
            Some(Ok(frame)) => frame,
            Some(Err(e)) => return Poll::Ready(Some(Err(e))),
            None => return Poll::Ready(None),
        };
        let mut data = match frame.into_data() {
            Ok(data) => data,
            Err(frame) => return Poll::Ready(Some(Ok(frame))),
        };
        if data.len() >= this.left {
            let rest = data.split_off(this.left);
            this.left = 0;
            this.reached = true;
            if !rest.is_empty() {
                this.held = Some(rest);
            }
            if data.is_empty() {
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
        } else {
            this.left -= data.len();
        }
        Poll::Ready(Some(Ok(Frame::data(data))))
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
