//! Read buffers that return to their pool.

use std::sync::{Arc, Mutex, Weak};

use bytes::Bytes;

/// How many free buffers a pool keeps.
const KEEP: usize = 4;

/// Free read buffers, shared by the clones of one reader.
///
/// Read buffers that come back when the last slice of them is dropped, so
/// steady reading neither zeroes nor page-faults fresh memory for every
/// batch (FFRecord's batched reads, the loader's reads by record number).
///
/// ```
/// use std::sync::Arc;
/// use grist_io::BufferPool;
///
/// let pool = Arc::new(BufferPool::default());
/// let mut buf = pool.take(4);
/// buf.copy_from_slice(b"abcd");
/// let bytes = BufferPool::share(&pool, buf, 3);
/// assert_eq!(&bytes[..], b"abc");
/// drop(bytes); // the buffer is back, contents and all
/// assert_eq!(&pool.take(2)[..4], b"abcd");
/// ```
#[derive(Debug)]
pub struct BufferPool {
    free: Mutex<Vec<Vec<u8>>>,
    /// How many free buffers it keeps.
    keep: usize,
}

impl Default for BufferPool {
    fn default() -> Self {
        BufferPool::keeping(KEEP)
    }
}

impl BufferPool {
    /// A pool that keeps up to `keep` free buffers: as many as its
    /// readers hold at once, so that steady reading allocates none.
    pub fn keeping(keep: usize) -> Self {
        BufferPool {
            free: Mutex::new(Vec::new()),
            keep,
        }
    }

    /// A buffer of at least `len` initialized bytes (zeroed only where it
    /// had to grow): the one given back last that is long enough (the
    /// likeliest to be in cache still), else the one given back last.
    pub fn take(&self, len: usize) -> Vec<u8> {
        let found = {
            let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
            match free.iter().rposition(|b| b.len() >= len) {
                Some(i) => Some(free.remove(i)),
                None => free.pop(),
            }
        };
        match found {
            Some(mut buf) => {
                if buf.len() < len {
                    buf.resize(len, 0);
                }
                buf
            }
            None => vec![0; len],
        }
    }

    fn put(&self, buf: Vec<u8>) {
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        if free.len() < self.keep {
            free.push(buf);
        } else if let Some(smallest) = free.iter_mut().min_by_key(|b| b.len()) {
            // Keep the larger buffers: they serve every smaller read.
            if smallest.len() < buf.len() {
                *smallest = buf;
            }
        }
    }

    /// The first `len` bytes of `buf` as shared bytes; the buffer returns
    /// to `pool` when the last slice of them is dropped.
    pub fn share(pool: &Arc<BufferPool>, buf: Vec<u8>, len: usize) -> Bytes {
        Bytes::from_owner(Pooled {
            data: buf,
            len,
            pool: Arc::downgrade(pool),
        })
    }
}

/// A pooled buffer owned by [`Bytes`].
struct Pooled {
    data: Vec<u8>,
    len: usize,
    pool: Weak<BufferPool>,
}

impl AsRef<[u8]> for Pooled {
    fn as_ref(&self) -> &[u8] {
        &self.data[..self.len]
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        if let Some(pool) = self.pool.upgrade() {
            pool.put(std::mem::take(&mut self.data));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_come_back_when_the_last_slice_is_dropped() {
        let pool = Arc::new(BufferPool::default());
        let mut buf = pool.take(100);
        buf[..3].copy_from_slice(b"abc");
        let ptr = buf.as_ptr();
        let bytes = BufferPool::share(&pool, buf, 50);
        assert_eq!(bytes.len(), 50);
        let slice = bytes.slice(1..3);
        drop(bytes);
        // Still in use: a new buffer.
        let other = pool.take(10);
        assert_ne!(other.as_ptr(), ptr);
        assert_eq!(&slice[..], b"bc");
        drop(slice);
        // Back in the pool, with its old contents (no zeroing).
        let again = pool.take(80);
        assert_eq!(again.as_ptr(), ptr);
        assert_eq!(&again[..3], b"abc");
        // A larger request grows it.
        let pool2 = Arc::new(BufferPool::default());
        assert_eq!(pool2.take(7).len(), 7);
    }

    #[test]
    fn a_pool_keeps_as_many_free_buffers_as_it_was_told() {
        for keep in [1, 4, 12] {
            let pool = Arc::new(BufferPool::keeping(keep));
            // Out at once, of distinct lengths so that each is told apart.
            let held: Vec<Bytes> = (0..keep + 3)
                .map(|i| BufferPool::share(&pool, pool.take(100 + i), 1))
                .collect();
            drop(held);
            // The `keep` largest came back; the smallest were let go.
            let back: Vec<usize> = (0..keep + 3).map(|_| pool.take(1).len()).collect();
            let kept: Vec<usize> = back.iter().copied().filter(|&l| l > 1).collect();
            assert_eq!(kept.len(), keep, "{back:?}");
            assert!(kept.iter().all(|&l| l >= 103), "{back:?}");
        }
    }
}
