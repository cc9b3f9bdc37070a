//! Prefetching the cache lines of records about to be worked on, so that
//! their cache misses overlap with the work on the records before them.

/// Loads one byte of every 64-byte cache line of each slice, so that the
/// lines come in from memory together, as many at once as the core keeps
/// in flight.
///
/// For a few lines at many places needed all at once before any work can
/// start (the first line of each of a batch's frames at random places of
/// a memory map, whose lengths say where the records are), these loads
/// overlap their cache misses. For work that walks records in turn,
/// [`prefetch_ahead`] is better: warming holds up the work behind each
/// load until it arrives (CRC checks of mapped FFRecord samples ran 1.6x
/// as fast with prefetching as warmed in groups of 64).
///
/// ```
/// let records = [&b"first record"[..], &[7u8; 300][..]];
/// grist_tensor::warm(records);
/// ```
pub fn warm<'a>(slices: impl IntoIterator<Item = &'a [u8]>) {
    let mut x = 0u8;
    for s in slices {
        let mut at = 0;
        while let Some(&b) = s.get(at) {
            x ^= b;
            at += 64;
        }
    }
    std::hint::black_box(x);
}

/// How many records ahead of its work [`prefetch_ahead`] asks for a
/// record's lines to be brought into the core's L2 cache.
pub const PREFETCH_FAR: usize = 8;

/// How many records ahead of its work [`prefetch_ahead`] asks for a
/// record's lines to be brought from L2 into L1.
pub const PREFETCH_NEAR: usize = 2;

/// Prefetching for a walk over records at random places of memory (a CRC
/// pass or a parse over samples of a memory map): call it with `at`, the
/// position of the record about to be worked on, before working on it;
/// `record(i)` gives record `i` of the walk, or `None` past its end.
///
/// It asks the core to start loading the lines of record `at +`
/// [`PREFETCH_FAR`] into L2 and those of record `at +` [`PREFETCH_NEAR`]
/// into L1, and returns at once (at `at == 0` it first asks for the
/// records before those). The lines then arrive while the records before
/// them are worked on, many at once, instead of one by one as the work
/// reaches them; the two distances let far more lines be on their way
/// than the L1 cache alone can wait for. Unlike [`warm`], whose loads hold
/// up the work behind them until they arrive, nothing waits.
///
/// On prod19-shaped FFRecord samples mapped from the page cache, CRC
/// checks of batches of 256 random samples ran 1.6x as fast as with
/// groups of 64 warmed first (`benches/ffrecord.rs`).
///
/// Prefetches are hints: they change no memory and cannot fault. On
/// targets other than x86-64 this does nothing.
///
/// ```
/// let records: Vec<Vec<u8>> = (0..20).map(|i| vec![i as u8; 300]).collect();
/// let mut sum = 0u64;
/// for (at, r) in records.iter().enumerate() {
///     grist_tensor::prefetch_ahead(at, |i| records.get(i).map(|r| &r[..]));
///     sum += r.iter().map(|&b| u64::from(b)).sum::<u64>();
/// }
/// assert_eq!(sum, 300 * (0..20).sum::<u64>());
/// ```
#[inline]
pub fn prefetch_ahead<'a>(at: usize, record: impl Fn(usize) -> Option<&'a [u8]>) {
    if at == 0 {
        for i in 0..PREFETCH_FAR {
            match record(i) {
                Some(r) => prefetch(r, i < PREFETCH_NEAR),
                None => return,
            }
        }
    }
    if let Some(r) = record(at + PREFETCH_FAR) {
        prefetch(r, false);
    }
    if let Some(r) = record(at + PREFETCH_NEAR) {
        prefetch(r, true);
    }
}

/// Asks the core to start loading the cache lines of `data`, one every 64
/// bytes from its first byte: into L1 when `near`, else into L2. (When
/// `data` does not start on a line, the line holding its last bytes may
/// be left to the demand miss: asking for it too cost 9% of the CRC checks
/// of mapped FFRecord samples, more prefetches waiting for the same miss
/// buffers.)
#[inline]
fn prefetch(data: &[u8], near: bool) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_T0, _MM_HINT_T2};
        if near {
            prefetch_lines::<_MM_HINT_T0>(data);
        } else {
            prefetch_lines::<_MM_HINT_T2>(data);
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (data, near);
}

/// [`prefetch`] with hint `HINT`: one instruction per line, in a loop the
/// compiler can unroll (slicing `data` into 64-byte chunks cost three times
/// the instructions).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn prefetch_lines<const HINT: i32>(data: &[u8]) {
    let mut at = 0;
    while at < data.len() {
        let p = data.as_ptr().wrapping_add(at).cast::<i8>();
        at += 64;
        #[allow(unsafe_code)]
        // SAFETY: `_mm_prefetch` needs SSE, which every x86-64 core has.
        // A prefetch is a hint: it reads nothing the program can see,
        // writes nothing and never faults; `p` points into `data`
        // besides.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<HINT>(p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefetching_changes_nothing() {
        // Empty, shorter than a line, unaligned, and longer than a line.
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 7) as u8).collect();
        let pieces = [
            &data[..0],
            &data[..1],
            &data[3..70],
            &data[..],
            &data[999..],
        ];
        for near in [true, false] {
            for s in pieces {
                prefetch(s, near);
            }
        }
        // Walks shorter and longer than the distances ahead.
        for n in [0, 1, PREFETCH_NEAR + 1, PREFETCH_FAR + 3] {
            for at in 0..n {
                prefetch_ahead(at, |i| {
                    pieces.get(i % pieces.len()).filter(|_| i < n).copied()
                });
            }
        }
        assert!(
            data.iter()
                .enumerate()
                .all(|(i, &b)| b == (i as u32 * 7) as u8)
        );
    }
}
