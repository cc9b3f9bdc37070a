//! Opened files and objects: sizes, ranged reads, streams.

use std::fmt;
use std::fs::File;
use std::io;
use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;

use crate::local;
#[cfg(feature = "remote")]
use crate::remote;
use crate::{Address, Error, Result};

/// How far apart two ranges of a local file may be and still be read as
/// one: about what a second read call costs.
pub const LOCAL_COALESCE_GAP: u64 = 8 << 10;

/// How far apart two ranges of an object may be and still be fetched as
/// one: about what a second request costs (object_store's default).
pub const REMOTE_COALESCE_GAP: u64 = 1 << 20;

/// The largest range [`Object::read_ranges`] makes by joining ranges.
const MAX_COALESCED: u64 = 64 << 20;

/// An opened file or object: its size, and its bytes by range.
///
/// Clones are cheap and share the open file or the store client; an
/// `Object` is `Send + Sync`, so reader threads can share one.
#[derive(Clone)]
pub struct Object {
    inner: Arc<Inner>,
}

struct Inner {
    address: Address,
    size: u64,
    backend: Backend,
}

pub(crate) enum Backend {
    Local {
        file: Arc<File>,
        map: Option<Bytes>,
    },
    #[cfg(feature = "remote")]
    Remote(Arc<remote::RemoteObject>),
}

impl fmt::Debug for Object {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Object")
            .field("address", &self.inner.address)
            .field("size", &self.inner.size)
            .field("remote", &self.is_remote())
            .field("mapped", &self.map().is_some())
            .finish()
    }
}

impl Object {
    pub(crate) fn new(address: Address, size: u64, backend: Backend) -> Object {
        Object {
            inner: Arc::new(Inner {
                address,
                size,
                backend,
            }),
        }
    }

    /// Where it is.
    pub fn address(&self) -> &Address {
        &self.inner.address
    }

    /// The address as given, shared: cheap to clone into errors.
    pub fn name(&self) -> &Arc<str> {
        self.inner.address.name()
    }

    /// The size in bytes when it was opened.
    pub fn size(&self) -> u64 {
        self.inner.size
    }

    /// The size now, when it can be told: a local file may have changed
    /// since it was opened (a metadata call says); an object is read as
    /// the version opened, so its size is the one it was opened with.
    pub fn current_size(&self) -> Option<u64> {
        match &self.inner.backend {
            Backend::Local { file, .. } => file.metadata().ok().map(|m| m.len()),
            #[cfg(feature = "remote")]
            Backend::Remote(_) => Some(self.inner.size),
        }
    }

    /// True for an object store or HTTP object.
    pub fn is_remote(&self) -> bool {
        !matches!(self.inner.backend, Backend::Local { .. })
    }

    /// The whole local file, memory-mapped, when the storage's access is
    /// [`Access::mmap`](crate::Access::mmap); `None` otherwise, and for
    /// remote objects.
    pub fn map(&self) -> Option<&Bytes> {
        match &self.inner.backend {
            Backend::Local { map, .. } => map.as_ref(),
            #[cfg(feature = "remote")]
            Backend::Remote(_) => None,
        }
    }

    /// How far apart two ranges may be and still be fetched as one by
    /// [`read_ranges`](Self::read_ranges): [`LOCAL_COALESCE_GAP`] (8 KiB)
    /// for a file, [`REMOTE_COALESCE_GAP`] (1 MiB) for an object.
    pub fn coalesce_gap(&self) -> u64 {
        if self.is_remote() {
            REMOTE_COALESCE_GAP
        } else {
            LOCAL_COALESCE_GAP
        }
    }

    fn check(&self, range: &Range<u64>) -> Result<()> {
        if range.start > range.end || range.end > self.inner.size {
            return Err(Error::BadRange {
                address: self.name().clone(),
                range: range.clone(),
                size: self.inner.size,
            });
        }
        Ok(())
    }

    /// The bytes of `range`, exactly: a range past the end is
    /// [`Error::BadRange`], and a file that turns out shorter than that is
    /// an error, never short data. A mapped file gives a slice of its map
    /// (no copy).
    pub fn read_range(&self, range: Range<u64>) -> Result<Bytes> {
        self.check(&range)?;
        match &self.inner.backend {
            Backend::Local { map: Some(map), .. } => {
                Ok(map.slice(range.start as usize..range.end as usize))
            }
            Backend::Local { file, map: None } => {
                let mut buf = vec![0; len_of(&range)?];
                local::read_exact_at(file, &mut buf, range.start)
                    .map_err(|e| Error::read(self.name(), Some(range), e))?;
                Ok(Bytes::from(buf))
            }
            #[cfg(feature = "remote")]
            Backend::Remote(r) => r.read_range(range),
        }
    }

    /// Reads `range` into `out`, whose length must be the range's: a
    /// positioned read (`pread`) for a file, with no allocation.
    pub fn read_range_into(&self, range: Range<u64>, out: &mut [u8]) -> Result<()> {
        self.check(&range)?;
        if range.end - range.start != out.len() as u64 {
            return Err(Error::BufferLength {
                expected: range.end - range.start,
                actual: out.len(),
            });
        }
        match &self.inner.backend {
            Backend::Local { map: Some(map), .. } => {
                out.copy_from_slice(&map[range.start as usize..range.end as usize]);
                Ok(())
            }
            Backend::Local { file, map: None } => local::read_exact_at(file, out, range.start)
                .map_err(|e| Error::read(self.name(), Some(range), e)),
            #[cfg(feature = "remote")]
            Backend::Remote(r) => r.read_range_into(range, out),
        }
    }

    /// The bytes of several ranges, in the order asked. Ranges at most
    /// [`coalesce_gap`](Self::coalesce_gap) apart are read as one (the
    /// bytes between are read and dropped); an object's ranges are fetched
    /// concurrently.
    pub fn read_ranges(&self, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        for r in ranges {
            self.check(r)?;
        }
        if let Some(map) = self.map() {
            return Ok(ranges
                .iter()
                .map(|r| map.slice(r.start as usize..r.end as usize))
                .collect());
        }
        let plan = coalesce(ranges, self.coalesce_gap());
        let fetched: Vec<Bytes> = match &self.inner.backend {
            Backend::Local { file, .. } => plan
                .merged
                .iter()
                .map(|r| {
                    let mut buf = vec![0; len_of(r)?];
                    local::read_exact_at(file, &mut buf, r.start)
                        .map_err(|e| Error::read(self.name(), Some(r.clone()), e))?;
                    Ok(Bytes::from(buf))
                })
                .collect::<Result<_>>()?,
            #[cfg(feature = "remote")]
            Backend::Remote(r) => r.read_many(&plan.merged)?,
        };
        Ok(plan
            .place
            .iter()
            .zip(ranges)
            .map(|(&(i, offset), r)| {
                let start = offset as usize;
                fetched[i].slice(start..start + (r.end - r.start) as usize)
            })
            .collect())
    }

    /// A sequential reader from byte `start` to the end.
    ///
    /// A file is read with positioned reads (the reader has its own
    /// position; wrap it in a `BufReader` for small reads). An object is
    /// read with ranged requests of a block size issued in the background,
    /// keeping about `read_ahead` bytes in flight or buffered, and
    /// delivered in order; each block is retried on its own, and an error
    /// names the object and the block's byte range.
    pub fn reader(&self, start: u64, read_ahead: usize) -> Result<Box<dyn io::Read + Send>> {
        self.check(&(start..self.inner.size))?;
        #[cfg(not(feature = "remote"))]
        let _ = read_ahead;
        match &self.inner.backend {
            Backend::Local { map: Some(map), .. } => {
                Ok(Box::new(io::Cursor::new(map.slice(start as usize..))))
            }
            Backend::Local { file, map: None } => Ok(Box::new(local::LocalReader {
                file: file.clone(),
                pos: start,
            })),
            #[cfg(feature = "remote")]
            Backend::Remote(r) => Ok(Box::new(remote::RemoteReader::start(
                r.clone(),
                start,
                self.inner.size,
                read_ahead,
            ))),
        }
    }

    pub(crate) fn backend(&self) -> &Backend {
        &self.inner.backend
    }
}

fn len_of(range: &Range<u64>) -> Result<usize> {
    usize::try_from(range.end - range.start).map_err(|_| Error::BufferLength {
        expected: range.end - range.start,
        actual: usize::MAX,
    })
}

/// Ranges joined for reading.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Coalesced {
    /// The ranges to read, sorted.
    pub(crate) merged: Vec<Range<u64>>,
    /// For each range asked for: which merged range holds it, and where.
    pub(crate) place: Vec<(usize, u64)>,
}

/// Joins overlapping ranges, and ranges at most `gap` apart whose gap is
/// no larger than the bytes wanted so far in the joined range (so at most
/// about half of what is read is thrown away: small records scattered
/// through a large object are not worth fetching whole), as long as the
/// joined range stays within [`MAX_COALESCED`].
pub(crate) fn coalesce(ranges: &[Range<u64>], gap: u64) -> Coalesced {
    let mut order: Vec<usize> = (0..ranges.len()).collect();
    order.sort_by_key(|&i| (ranges[i].start, ranges[i].end));
    let mut merged: Vec<Range<u64>> = Vec::new();
    let mut place = vec![(0, 0); ranges.len()];
    // The bytes of the last merged range that were asked for.
    let mut wanted = 0u64;
    for i in order {
        let r = &ranges[i];
        let joins = merged.last().is_some_and(|last| {
            let hole = r.start.saturating_sub(last.end);
            hole <= gap.min(wanted) && r.end.max(last.end) - last.start <= MAX_COALESCED
        });
        if joins {
            if let Some(last) = merged.last_mut() {
                wanted += r.end.saturating_sub(r.start.max(last.end));
                last.end = last.end.max(r.end);
            }
        } else {
            wanted = r.end - r.start;
            merged.push(r.clone());
        }
        let at = merged.len() - 1;
        place[i] = (at, r.start - merged[at].start);
    }
    Coalesced { merged, place }
}

/// Reads each `(object, range)` into consecutive parts of `out`, whose
/// length must be the sum of the ranges' lengths: a batch of records read
/// by number, across files.
///
/// Local parts are positioned reads into `out`, in order, without
/// allocating. Remote parts are fetched concurrently (up to the storage's
/// [`concurrency`](crate::Storage::with_concurrency)), each retried on its
/// own; nearby ranges of one object are fetched together. Local and remote
/// parts can be mixed.
///
/// ```
/// use grist_io::{read_into, Address, Storage};
///
/// let dir = tempfile::tempdir()?;
/// std::fs::write(dir.path().join("a"), b"0123456789")?;
/// std::fs::write(dir.path().join("b"), b"abcdefghij")?;
/// let storage = Storage::new();
/// let a = storage.open(&Address::from(dir.path().join("a")))?;
/// let b = storage.open(&Address::from(dir.path().join("b")))?;
/// let mut out = [0u8; 6];
/// read_into(&[(&a, 2..4), (&b, 0..3), (&a, 9..10)], &mut out)?;
/// assert_eq!(&out, b"23abc9");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn read_into(parts: &[(&Object, Range<u64>)], out: &mut [u8]) -> Result<()> {
    let mut total: u64 = 0;
    for (object, range) in parts {
        object.check(range)?;
        total += range.end - range.start;
    }
    if total != out.len() as u64 {
        return Err(Error::BufferLength {
            expected: total,
            actual: out.len(),
        });
    }
    #[cfg(feature = "remote")]
    let mut remote_parts = Vec::new();
    let mut rest = out;
    for (object, range) in parts {
        let (part, tail) =
            std::mem::take(&mut rest).split_at_mut((range.end - range.start) as usize);
        rest = tail;
        match object.backend() {
            Backend::Local { .. } => object.read_range_into(range.clone(), part)?,
            #[cfg(feature = "remote")]
            Backend::Remote(r) => remote_parts.push((r, range.clone(), part)),
        }
    }
    #[cfg(feature = "remote")]
    if !remote_parts.is_empty() {
        remote::read_into(remote_parts)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coalescing_joins_near_ranges_in_any_order() {
        let c = coalesce(&[20..30, 0..10, 100..110, 12..15, 5..8], 5);
        assert_eq!(c.merged, vec![0..30, 100..110]);
        assert_eq!(c.place, vec![(0, 20), (0, 0), (1, 0), (0, 12), (0, 5)]);
        let apart = coalesce(&[0..10, 16..20], 5);
        assert_eq!(apart.merged, vec![0..10, 16..20]);
        assert_eq!(coalesce(&[], 5).merged, Vec::<Range<u64>>::new());
        let huge = coalesce(&[0..MAX_COALESCED, MAX_COALESCED..MAX_COALESCED + 1], 5);
        assert_eq!(huge.merged.len(), 2);
        // A gap wider than the bytes wanted before it is not read.
        let sparse = coalesce(&[0..3, 7..10, 12..20], 5);
        assert_eq!(sparse.merged, vec![0..3, 7..20]);
        assert_eq!(sparse.place, vec![(0, 0), (1, 0), (1, 5)]);
    }
}
