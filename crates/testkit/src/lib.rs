//! Dev-only test support for grist, the one home of what every crate's
//! tests share: Avro bytes written by hand ([`avro`]: longs, array blocks), the golden corpus ([`corpus`]: its manifests' cases and
//! their TFRecord and Avro views, the FFRecord and OFRecord folder cases,
//! and the corpus served over S3), an Avro dataset of three schema
//! versions with its reader schema ([`evolution`], written and read back
//! by apache-avro), an error's cause chain as text
//! ([`chain`]), temporary folders ([`temp_dir`]), and an S3-compatible
//! server on the loopback interface, with fault injection, for the tests
//! and benchmarks of every grist crate.
//!
//! It depends on no grist crate but `grist-io`, so that every crate can
//! take it as a dev-dependency without a cycle through its own library.
//!
//! [`S3Server`] serves a folder (each subfolder is a bucket) with `s3s` and
//! `s3s-fs`, on its own tokio runtime thread, behind static credentials.
//! Its [`Faults`] handle adds latency, answers 503, drops or stalls
//! responses, and counts requests; [`S3Server::storage`] is a
//! [`grist_io::Storage`] already pointed at it.
//!
//! ```
//! use grist_io::Address;
//! use grist_testkit::S3Server;
//!
//! let dir = tempfile::tempdir()?;
//! let server = S3Server::start(dir.path());
//! std::fs::write(server.bucket("data").join("hello.txt"), b"hello, s3")?;
//! let storage = server.storage();
//! let object = storage.open(&Address::parse(&server.url("data", "hello.txt"))?)?;
//! assert_eq!(&object.read_range(7..9)?[..], b"s3");
//! assert_eq!(server.faults().counts().heads, 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs, unreachable_pub)]
#![forbid(unsafe_code)]

pub mod avro;
pub mod corpus;
pub mod evolution;
mod faults;
mod server;
mod util;

pub use faults::{Counts, Fault, Faults};
pub use server::{ACCESS_KEY, REGION, S3Server, S3ServerBuilder, SECRET_KEY};
pub use util::{assert_missing_said_once, chain, dir_entries, temp_dir};
