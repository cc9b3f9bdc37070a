//! grist's storage layer: the one place the rest of grist touches bytes.
//!
//! A [`Storage`] turns an [`Address`] (a path, or an `s3://`, `gs://`,
//! `az://` or `http(s)://` URL) into an [`Object`]: a size, and bytes by
//! range ([`Object::read_range`], [`Object::read_ranges`] which joins
//! nearby ranges, [`read_into`] for a batch of records across files) or as
//! a stream ([`Object::reader`], which fetches an object's blocks ahead in
//! the background). Writes go through a [`Writer`] that makes its bytes
//! visible only on [`Writer::commit`]. The shape follows arrow-rs parquet's
//! `ChunkReader` and `AsyncFileReader::get_byte_ranges`: parsers never open
//! files themselves.
//!
//! The API is synchronous: grist's readers and loader are plain threads.
//! Local files cost what a positioned read costs ([`Access::mmap`] maps
//! them instead, behind an `unsafe` promise). Object stores are reached
//! through `object_store` on a small internal tokio runtime shared by the
//! process; requests are retried ([`Retry`]) and every error names the
//! address and byte range.
//!
//! ```
//! use std::io::{Read, Write};
//! use grist_io::{Address, Storage};
//!
//! let dir = tempfile::tempdir()?;
//! let storage = Storage::new();
//! let addr = Address::parse(&format!("{}/records.bin", dir.path().display()))?;
//!
//! let mut w = storage.create(&addr)?;
//! w.write_all(b"0123456789abcdef")?;
//! w.commit()?;
//!
//! let object = storage.open(&addr)?;
//! assert_eq!(object.size(), 16);
//! assert_eq!(&object.read_range(4..8)?[..], b"4567");
//! let parts = object.read_ranges(&[0..2, 10..12])?;
//! assert_eq!((&parts[0][..], &parts[1][..]), (&b"01"[..], &b"ab"[..]));
//! let mut tail = String::new();
//! object.reader(12, 1 << 20)?.read_to_string(&mut tail)?;
//! assert_eq!(tail, "cdef");
//!
//! let missing = storage.open(&addr.with_file_name("missing.bin")).unwrap_err();
//! assert!(missing.is_not_found());
//! assert!(missing.to_string().ends_with("missing.bin: not found"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! | Cargo feature | default | what it adds |
//! |---|---|---|
//! | `remote` | off | `s3://`, `gs://`, `az://`, `http(s)://` through `object_store` and `tokio`; without it such addresses parse, and using them is [`Error::Unsupported`] |
#![deny(missing_docs, unreachable_pub)]
// One module maps files (`Access::map`); nothing else is `unsafe`.
#![deny(unsafe_code)]

mod access;
mod address;
mod atomic;
#[cfg(target_os = "linux")]
mod direct;
mod error;
mod local;
mod object;
mod pool;
#[cfg(feature = "remote")]
mod remote;
mod storage;
mod writer;

pub use access::Access;
pub use address::Address;
pub use atomic::AtomicTarget;
pub use error::{BoxError, Error, Result};
pub use object::{LOCAL_COALESCE_GAP, Object, REMOTE_COALESCE_GAP, read_into};
pub use pool::BufferPool;
pub use storage::{Entry, MAX_BLOCK_SIZE, MIN_PART_SIZE, Meta, Retry, Storage, Version};
pub use writer::{Digest, Writer};

/// The README's examples, run as doc tests so that they stay true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
