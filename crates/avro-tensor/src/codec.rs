//! The block codecs of Avro object container files: [`Codec`].
//!
//! Every codec compresses one block's serialized records as a whole:
//!
//! | codec | block bytes | Cargo feature |
//! |---|---|---|
//! | `null` | the records as they are | always |
//! | `deflate` | raw deflate (RFC 1951, no zlib header); bytes after the end of the stream are ignored (fastavro leaves 3) | `deflate` (default) |
//! | `snappy` | a raw snappy block, then the big-endian CRC-32 (zlib polynomial) of the uncompressed data | `snappy` (default) |
//! | `zstandard` | zstd frames | `zstandard` (default) |
//! | `bzip2` | one bzip2 stream | `bzip2` |
//! | `xz` | one xz stream | `xz` |
//!
//! Decompression is bounded: the output may not exceed
//! [`Limits::max_alloc_bytes`], and the output buffer grows only as output
//! is produced (a sizes stored in the stream is believed only as far as the
//! codec could possibly expand the bytes present), so a small block cannot
//! make the reader allocate gigabytes.

use bytes::Bytes;
use std::fmt;
#[cfg(any(feature = "zstandard", feature = "bzip2", feature = "xz"))]
use std::io::Read;
use std::sync::Arc;

use grist_tensor::Limits;

use crate::error::{Error, Result};
use grist_tensor::Location;

/// The codec of an object container file (`avro.codec` in its header).
///
/// All six codecs of the Avro 1.11 specification are known; the ones
/// whose Cargo feature is off are [`Codec::is_enabled`]` == false`, and
/// reading or writing them fails with [`Error::UnsupportedCodec`] naming
/// the feature.
///
/// ```
/// use grist_avro_tensor::Codec;
/// assert_eq!(Codec::from_name("deflate")?, Codec::Deflate);
/// assert_eq!(Codec::Deflate.name(), "deflate");
/// assert!(Codec::from_name("lz4").is_err());
/// # Ok::<(), grist_avro_tensor::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Codec {
    /// No compression.
    #[default]
    Null,
    /// Raw deflate.
    Deflate,
    /// Snappy with a CRC-32 of the uncompressed data.
    Snappy,
    /// Zstandard.
    Zstandard,
    /// bzip2.
    Bzip2,
    /// xz (LZMA2).
    Xz,
}

/// The deflate level written (zlib's default, as Java's writer uses).
#[cfg(feature = "deflate")]
const DEFLATE_LEVEL: u32 = 6;
/// The zstd level written (zstd's default, as Java's writer uses).
#[cfg(feature = "zstandard")]
const ZSTD_LEVEL: i32 = 3;
/// The xz preset written (xz's default, as Java's writer uses).
#[cfg(feature = "xz")]
const XZ_PRESET: u32 = 6;
/// The largest zstd window accepted: zstd's own default (128 MiB), lowered
/// further by the allocation limit.
#[cfg(feature = "zstandard")]
const ZSTD_MAX_WINDOW_LOG: u32 = 27;
/// The largest xz (LZMA2) decoder memory accepted, in KiB (256 MiB: four
/// times what `xz -9` needs), lowered further by the allocation limit.
#[cfg(feature = "xz")]
const XZ_MAX_MEMORY_KIB: u64 = 256 << 10;
/// A snappy element of `n` bytes produces at most 64 bytes for every 3:
/// no valid block inflates by more than this factor.
#[cfg(feature = "snappy")]
const SNAPPY_MAX_RATIO: u64 = 22;

impl Codec {
    /// Every codec, in specification order.
    pub const ALL: [Codec; 6] = [
        Codec::Null,
        Codec::Deflate,
        Codec::Snappy,
        Codec::Zstandard,
        Codec::Bzip2,
        Codec::Xz,
    ];

    /// The codec called `name` in a header's `avro.codec` entry.
    ///
    /// Fails with [`Error::UnsupportedCodec`] (with an empty file name)
    /// for a name the specification does not define, such as fastavro's
    /// non-standard `lz4`.
    pub fn from_name(name: &str) -> Result<Codec> {
        Codec::ALL
            .into_iter()
            .find(|c| c.name() == name)
            .ok_or_else(|| Error::UnsupportedCodec {
                file: "".into(),
                codec: name.to_owned(),
                hint: " (not a codec of the Avro specification)".to_owned(),
            })
    }

    /// The codec's name as written in `avro.codec`.
    pub fn name(&self) -> &'static str {
        match self {
            Codec::Null => "null",
            Codec::Deflate => "deflate",
            Codec::Snappy => "snappy",
            Codec::Zstandard => "zstandard",
            Codec::Bzip2 => "bzip2",
            Codec::Xz => "xz",
        }
    }

    /// The Cargo feature of grist-avro-tensor that builds the codec in
    /// (`None` for `null`, which is always there).
    pub fn feature(&self) -> Option<&'static str> {
        match self {
            Codec::Null => None,
            Codec::Deflate => Some("deflate"),
            Codec::Snappy => Some("snappy"),
            Codec::Zstandard => Some("zstandard"),
            Codec::Bzip2 => Some("bzip2"),
            Codec::Xz => Some("xz"),
        }
    }

    /// Whether this build can read and write the codec.
    pub fn is_enabled(&self) -> bool {
        match self {
            Codec::Null => true,
            Codec::Deflate => cfg!(feature = "deflate"),
            Codec::Snappy => cfg!(feature = "snappy"),
            Codec::Zstandard => cfg!(feature = "zstandard"),
            Codec::Bzip2 => cfg!(feature = "bzip2"),
            Codec::Xz => cfg!(feature = "xz"),
        }
    }

    /// Fails with [`Error::UnsupportedCodec`] naming `file` and the Cargo
    /// feature to enable if the codec is not built in.
    pub fn check_enabled(&self, file: &Arc<str>) -> Result<()> {
        if self.is_enabled() {
            return Ok(());
        }
        Err(Error::UnsupportedCodec {
            file: file.clone(),
            codec: self.name().to_owned(),
            hint: format!(
                " (enable the Cargo feature `{}` of grist-avro-tensor)",
                self.feature().unwrap_or_default()
            ),
        })
    }

    /// Decompresses one block's stored bytes.
    ///
    /// `size_hint` is how many bytes to reserve up front (e.g. the previous
    /// block's decompressed size); it is capped by the limit. With 0,
    /// deflate guesses from the stored size and the compression ratio of
    /// the last block inflated on the same thread. The output
    /// may not exceed [`Limits::max_alloc_bytes`] ([`Error::TooLarge`]);
    /// a corrupt stream, or a snappy block whose CRC-32 does not match, is
    /// [`Error::Decompress`]. Errors are located at `at`. For
    /// [`Codec::Null`] this copies the block.
    pub fn decompress(
        &self,
        block: &[u8],
        size_hint: usize,
        limits: &Limits,
        at: &Location,
    ) -> Result<Vec<u8>> {
        self.check_enabled(&at.file)?;
        let cap = output_cap(limits);
        let too_large = |size: u64| Error::TooLarge {
            at: at.clone().into(),
            what: "decompressed block",
            size,
            max: limits.max_alloc_bytes(),
        };
        let corrupt = |reason: String| Error::Decompress {
            at: at.clone().into(),
            codec: self.name(),
            reason,
        };
        let hint = size_hint.min(cap);
        #[allow(unused_variables)]
        let capped = |e: Capped, window: u64| match e {
            Capped::TooLarge => too_large(cap as u64 + 1),
            Capped::Window => Error::TooLarge {
                at: at.clone().into(),
                what: "decoder window (over the bound)",
                size: window.saturating_add(1),
                max: window,
            },
            Capped::Corrupt(reason) => corrupt(reason),
        };
        let _ = (&corrupt, &capped, hint);
        match self {
            Codec::Null => {
                if block.len() > cap {
                    return Err(too_large(block.len() as u64));
                }
                Ok(block.to_vec())
            }
            #[cfg(feature = "deflate")]
            Codec::Deflate => inflate(block, hint, cap).map_err(|e| capped(e, 0)),
            #[cfg(feature = "snappy")]
            Codec::Snappy => {
                let Some((data, crc)) = block.split_last_chunk::<4>() else {
                    return Err(corrupt(format!(
                        "block of {} bytes is shorter than its 4-byte CRC",
                        block.len()
                    )));
                };
                let len = snap::raw::decompress_len(data).map_err(|e| corrupt(e.to_string()))?;
                if len > cap {
                    return Err(too_large(len as u64));
                }
                let possible = (data.len() as u64).saturating_mul(SNAPPY_MAX_RATIO);
                if len as u64 > possible {
                    return Err(corrupt(format!(
                        "claims {len} bytes, more than {} compressed bytes can hold",
                        data.len()
                    )));
                }
                let mut out = vec![0u8; len];
                let n = snap::raw::Decoder::new()
                    .decompress(data, &mut out)
                    .map_err(|e| corrupt(e.to_string()))?;
                out.truncate(n);
                let stored = u32::from_be_bytes(*crc);
                let actual = crc32fast::hash(&out);
                if stored != actual {
                    return Err(corrupt(format!(
                        "CRC-32 mismatch: stored {stored:08x}, computed {actual:08x}"
                    )));
                }
                Ok(out)
            }
            #[cfg(feature = "zstandard")]
            Codec::Zstandard => {
                if let Ok(Some(size)) = zstd::zstd_safe::get_frame_content_size(block)
                    && size > cap as u64
                {
                    return Err(too_large(size));
                }
                // Bound the window (the decoder's buffer) by zstd's default
                // and by the limit (rounded up to a power of two: a frame
                // with its content size has a window of that size).
                let window_log = ZSTD_MAX_WINDOW_LOG.min(ceil_log2(cap).max(10));
                let inflate = |hint: usize| {
                    let mut decoder = zstd::stream::read::Decoder::with_buffer(block)
                        .map_err(|e| Capped::Corrupt(e.to_string()))?;
                    decoder
                        .window_log_max(window_log)
                        .map_err(|e| Capped::Corrupt(e.to_string()))?;
                    read_capped(decoder, hint, cap)
                };
                // zstd words a corrupt frame by the room it was given
                // ("Destination buffer is too small" or "Data corruption
                // detected"): a failure is decoded again without the hint,
                // so that a block fails the same whatever came before it.
                match inflate(hint) {
                    Err(Capped::Corrupt(_)) if hint != 0 => inflate(0),
                    done => done,
                }
                .map_err(|e| capped(e, 1 << window_log))
            }
            #[cfg(feature = "bzip2")]
            Codec::Bzip2 => {
                read_capped(bzip2::read::BzDecoder::new(block), hint, cap).map_err(|e| capped(e, 0))
            }
            #[cfg(feature = "xz")]
            Codec::Xz => {
                let memory_kib = XZ_MAX_MEMORY_KIB.min((cap as u64) >> 10).max(1);
                let reader = lzma_rust2::XzReader::new_mem_limit(block, false, memory_kib as u32);
                read_capped(reader, hint, cap).map_err(|e| capped(e, memory_kib << 10))
            }
            #[allow(unreachable_patterns)]
            _ => Err(self
                .check_enabled(&at.file)
                .err()
                .unwrap_or_else(|| corrupt("codec not built in".to_owned()))),
        }
    }

    /// [`decompress`](Self::decompress), into shareable bytes. Deflate
    /// blocks are inflated into buffers that return to a pool when the
    /// bytes are dropped, so reading a file does not zero or fault in fresh
    /// memory for every block.
    pub fn decompress_bytes(
        &self,
        block: &[u8],
        size_hint: usize,
        limits: &Limits,
        at: &Location,
    ) -> Result<Bytes> {
        #[cfg(feature = "deflate")]
        if *self == Codec::Deflate {
            let cap = output_cap(limits);
            return inflate_pooled(block, size_hint.min(cap), cap)
                .map_err(|e| self.pooled_error(e, limits, at));
        }
        self.decompress(block, size_hint, limits, at)
            .map(Bytes::from)
    }

    /// [`decompress_bytes`](Self::decompress_bytes) of two blocks, each
    /// with its location. Deflate blocks are inflated together, stepping
    /// both streams in one loop on this thread (about 1.5x the throughput
    /// of libdeflate one block at a time, on blocks of mostly literals);
    /// other codecs decompress one after the other.
    pub fn decompress_two_bytes(
        &self,
        blocks: [&[u8]; 2],
        size_hint: usize,
        limits: &Limits,
        at: [&Location; 2],
    ) -> [Result<Bytes>; 2] {
        #[cfg(feature = "deflate")]
        if *self == Codec::Deflate {
            let cap = output_cap(limits);
            let [a, b] = inflate_pair_pooled(blocks[0], blocks[1], size_hint.min(cap), cap);
            return [
                a.map_err(|e| self.pooled_error(e, limits, at[0])),
                b.map_err(|e| self.pooled_error(e, limits, at[1])),
            ];
        }
        [0, 1].map(|i| self.decompress_bytes(blocks[i], size_hint, limits, at[i]))
    }

    /// A pooled inflate's failure as an [`Error`] at `at`.
    #[cfg(feature = "deflate")]
    fn pooled_error(&self, e: Capped, limits: &Limits, at: &Location) -> Error {
        match e {
            Capped::Corrupt(reason) => Error::Decompress {
                at: at.clone().into(),
                codec: self.name(),
                reason,
            },
            _ => Error::TooLarge {
                at: at.clone().into(),
                what: "decompressed block",
                size: output_cap(limits) as u64 + 1,
                max: limits.max_alloc_bytes(),
            },
        }
    }

    /// Compresses one block's serialized records, appending the stored
    /// bytes to `out`.
    ///
    /// Levels: deflate 6, zstandard 3, bzip2 9, xz preset 6 (the defaults
    /// of Java's writer). Fails only with [`Error::UnsupportedCodec`] (with
    /// an empty file name) for a codec not built in.
    pub fn compress(&self, data: &[u8], out: &mut Vec<u8>) -> Result<()> {
        self.check_enabled(&Arc::from(""))?;
        let in_memory = |e: std::io::Error| Error::Io {
            file: "".into(),
            source: e,
        };
        let _ = &in_memory;
        match self {
            Codec::Null => out.extend_from_slice(data),
            #[cfg(feature = "deflate")]
            Codec::Deflate => {
                use std::io::Write;
                let mut encoder = flate2::write::DeflateEncoder::new(
                    out,
                    flate2::Compression::new(DEFLATE_LEVEL),
                );
                encoder.write_all(data).map_err(in_memory)?;
                encoder.finish().map_err(in_memory)?;
            }
            #[cfg(feature = "snappy")]
            Codec::Snappy => {
                let start = out.len();
                out.resize(start + snap::raw::max_compress_len(data.len()), 0);
                let n = snap::raw::Encoder::new()
                    .compress(data, &mut out[start..])
                    .map_err(|e| in_memory(std::io::Error::other(e)))?;
                out.truncate(start + n);
                out.extend_from_slice(&crc32fast::hash(data).to_be_bytes());
            }
            #[cfg(feature = "zstandard")]
            Codec::Zstandard => {
                let compressed = zstd::bulk::compress(data, ZSTD_LEVEL).map_err(in_memory)?;
                out.extend_from_slice(&compressed);
            }
            #[cfg(feature = "bzip2")]
            Codec::Bzip2 => {
                use std::io::Write;
                let mut encoder = bzip2::write::BzEncoder::new(out, bzip2::Compression::best());
                encoder.write_all(data).map_err(in_memory)?;
                encoder.finish().map_err(in_memory)?;
            }
            #[cfg(feature = "xz")]
            Codec::Xz => {
                use std::io::Write;
                let mut encoder =
                    lzma_rust2::XzWriter::new(out, lzma_rust2::XzOptions::with_preset(XZ_PRESET))
                        .map_err(in_memory)?;
                encoder.write_all(data).map_err(in_memory)?;
                encoder.finish().map_err(in_memory)?;
            }
            #[allow(unreachable_patterns)]
            _ => self.check_enabled(&Arc::from(""))?,
        }
        Ok(())
    }
}

impl fmt::Display for Codec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The largest decompressed block: the allocation limit, and what this
/// platform can address.
fn output_cap(limits: &Limits) -> usize {
    usize::try_from(limits.max_alloc_bytes())
        .unwrap_or(usize::MAX)
        .min(isize::MAX as usize - 1)
}

#[cfg(feature = "zstandard")]
fn ceil_log2(n: usize) -> u32 {
    usize::BITS - n.max(2).saturating_sub(1).leading_zeros()
}

/// Why a bounded decompression stopped.
#[cfg_attr(
    not(any(
        feature = "deflate",
        feature = "zstandard",
        feature = "bzip2",
        feature = "xz"
    )),
    allow(dead_code)
)]
enum Capped {
    /// The output would exceed the cap.
    TooLarge,
    /// The decoder's window (zstd window, xz dictionary) would exceed its
    /// memory bound.
    Window,
    /// The codec's complaint.
    Corrupt(String),
}

/// How much to grow an output buffer holding `len` bytes, at most up to
/// `cap + 1` (one byte past the cap tells "too large" from "exactly the
/// cap").
#[cfg(any(
    feature = "deflate",
    feature = "zstandard",
    feature = "bzip2",
    feature = "xz"
))]
fn grow(out: &mut Vec<u8>, cap: usize) -> bool {
    let limit = cap.saturating_add(1);
    let len = out.len();
    if len >= limit {
        return false;
    }
    let more = len.max(32 << 10).min(limit - len);
    out.reserve_exact(more);
    true
}

/// Inflates a raw deflate stream into a fresh buffer, stopping at the end
/// of the stream (later bytes are ignored).
#[cfg(feature = "deflate")]
fn inflate(block: &[u8], hint: usize, cap: usize) -> std::result::Result<Vec<u8>, Capped> {
    let mut out = Vec::new();
    let n = inflate_into(block, hint, cap, &mut out)?;
    out.truncate(n);
    Ok(out)
}

#[cfg(feature = "deflate")]
thread_local! {
    /// The last block's inflated size over its stored size, in 16ths
    /// (4x before the first block), per thread.
    static RATIO: std::cell::Cell<usize> = const { std::cell::Cell::new(64) };
}

/// Remembers how much a block of `stored` bytes inflated to (`n`).
#[cfg(feature = "deflate")]
fn learn_ratio(n: usize, stored: usize) {
    let ratio = n.saturating_mul(16) / stored.max(1);
    RATIO.set(ratio.clamp(16, 1032 * 16));
}

/// How much room to inflate a block of `stored` bytes into, given the
/// caller's hint, the cap and the room a reused buffer already has.
/// Blocks of a file are about the same size (the writer's sync interval)
/// and compress about as well: a little over the previous one, else the
/// stored bytes times the last block's ratio. Room is zeroed before use,
/// so guessing far over costs as much as inflating.
#[cfg(feature = "deflate")]
fn room(stored: usize, hint: usize, cap: usize, have: usize) -> usize {
    let limit = cap.saturating_add(1);
    let guess = match hint {
        0 => stored.saturating_mul(RATIO.get()) / 16,
        h => h,
    };
    let guess = guess.saturating_add(guess / 16).saturating_add(1024);
    guess.min(limit).max(have.min(limit))
}

/// Sizes `out` to `size` bytes of room (exactly: buffers are pooled, a
/// doubled one stays doubled); only growth is zeroed.
#[cfg(feature = "deflate")]
fn make_room(out: &mut Vec<u8>, size: usize) {
    if out.len() < size {
        out.reserve_exact(size - out.len());
        out.resize(size, 0);
    }
}

/// Inflates a raw deflate stream into `out` (whatever it holds is
/// overwritten; it is only grown, and only the growth is zeroed), returning
/// the inflated length. libdeflate inflates a whole block at once, about
/// twice as fast as a streaming inflater, into room sized from the previous
/// block (`hint`) or the compressed size, grown (up to `cap`) and retried
/// when the output does not fit.
#[cfg(feature = "deflate")]
fn inflate_into(
    block: &[u8],
    hint: usize,
    cap: usize,
    out: &mut Vec<u8>,
) -> std::result::Result<usize, Capped> {
    use libdeflater::{DecompressionError, Decompressor};
    use std::cell::RefCell;

    thread_local! {
        // A decompressor holds ~10 kB of tables: one per thread.
        static INFLATER: RefCell<Decompressor> = RefCell::new(Decompressor::new());
    }
    let mut size = room(block.len(), hint, cap, out.len());
    loop {
        make_room(out, size);
        let space = &mut out[..size];
        let result = INFLATER.with(|d| d.borrow_mut().deflate_decompress(block, space));
        match result {
            Ok(n) if n <= cap => {
                learn_ratio(n, block.len());
                return Ok(n);
            }
            Ok(_) => return Err(Capped::TooLarge),
            Err(DecompressionError::InsufficientSpace) if size <= cap => {
                size = size.saturating_mul(4).min(cap.saturating_add(1));
            }
            Err(DecompressionError::InsufficientSpace) => return Err(Capped::TooLarge),
            Err(DecompressionError::BadData) => {
                return Err(Capped::Corrupt(format!(
                    "invalid or truncated deflate stream ({} bytes)",
                    block.len()
                )));
            }
        }
    }
}

/// Buffers of inflated blocks, taken back when their block is dropped and
/// reused for later blocks: no zeroing, no fresh pages per block. With
/// the bytes they hold.
#[cfg(feature = "deflate")]
static POOL: std::sync::Mutex<(Vec<Vec<u8>>, usize)> = std::sync::Mutex::new((Vec::new(), 0));

/// At most this many bytes of buffers wait in the pool, each at most
/// this large. A loader's shuffle buffer holds hundreds of inflated blocks
/// and lets go of tens per batch, a varying number: the pool must be deep
/// enough that a batch that takes more than the last one gave back still
/// finds buffers (a cap of 32 buffers missed a third of the time, and each
/// miss paid for fresh pages and zeroing).
#[cfg(feature = "deflate")]
const POOL_BYTES: usize = 64 << 20;
#[cfg(feature = "deflate")]
const POOL_BUFFER_BYTES: usize = 16 << 20;

/// An inflated block's buffer: back to [`POOL`] when dropped.
#[cfg(feature = "deflate")]
struct Pooled {
    buf: Vec<u8>,
    len: usize,
}

#[cfg(feature = "deflate")]
impl AsRef<[u8]> for Pooled {
    fn as_ref(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

#[cfg(feature = "deflate")]
impl Drop for Pooled {
    fn drop(&mut self) {
        let bytes = self.buf.capacity();
        if bytes > POOL_BUFFER_BYTES {
            return;
        }
        // (Not a let chain: those need Rust 1.88, above the MSRV.)
        if let Ok(mut pool) = POOL.lock() {
            if pool.1 + bytes <= POOL_BYTES {
                pool.1 += bytes;
                pool.0.push(std::mem::take(&mut self.buf));
            }
        }
    }
}

/// Inflates into a pooled buffer.
#[cfg(feature = "deflate")]
fn inflate_pooled(block: &[u8], hint: usize, cap: usize) -> std::result::Result<Bytes, Capped> {
    let mut buf = pooled_buffer();
    let len = inflate_into(block, hint, cap, &mut buf)?;
    Ok(Bytes::from_owner(Pooled { buf, len }))
}

/// A buffer from the pool, or a new empty one.
#[cfg(feature = "deflate")]
fn pooled_buffer() -> Vec<u8> {
    POOL.lock()
        .ok()
        .and_then(|mut p| {
            let buf = p.0.pop()?;
            p.1 -= buf.capacity();
            Some(buf)
        })
        .unwrap_or_default()
}

/// Inflates two blocks at once on this thread (see [`crate::inflate`]:
/// about 1.5x libdeflate one at a time on blocks of mostly literals) into
/// pooled buffers.
#[cfg(feature = "deflate")]
fn inflate_pair_pooled(
    a: &[u8],
    b: &[u8],
    hint: usize,
    cap: usize,
) -> [std::result::Result<Bytes, Capped>; 2] {
    let (mut x, mut y) = (pooled_buffer(), pooled_buffer());
    let (room_x, room_y) = (
        room(a.len(), hint, cap, x.len()),
        room(b.len(), hint, cap, y.len()),
    );
    make_room(&mut x, room_x);
    make_room(&mut y, room_y);
    let (rx, ry) = crate::inflate::inflate_two((a, &mut x), (b, &mut y), cap);
    let done = |r: std::result::Result<usize, crate::inflate::InflateError>,
                buf: Vec<u8>,
                stored: &[u8]| {
        match r {
            Ok(len) => {
                learn_ratio(len, stored.len());
                Ok(Bytes::from_owner(Pooled { buf, len }))
            }
            // Failures (rare) are libdeflate's to describe, so that a
            // block fails the same whether inflated alone or in a pair.
            Err(_) => {
                drop(Pooled { buf, len: 0 });
                inflate_pooled(stored, hint, cap)
            }
        }
    };
    [done(rx, x, a), done(ry, y, b)]
}

/// Reads `reader` to its end into a buffer that grows with the output.
#[cfg(any(feature = "zstandard", feature = "bzip2", feature = "xz"))]
fn read_capped(
    mut reader: impl Read,
    hint: usize,
    cap: usize,
) -> std::result::Result<Vec<u8>, Capped> {
    let mut out: Vec<u8> = Vec::with_capacity(hint);
    // `out[..filled]` holds output; `out[filled..]` is zeroed room.
    let mut filled = 0;
    loop {
        if filled == out.len() {
            if out.len() == out.capacity() && !grow(&mut out, cap) {
                return Err(Capped::TooLarge);
            }
            out.resize(out.capacity(), 0);
        }
        match reader.read(&mut out[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            // lzma-rust2 reports its memory limit as OutOfMemory, zstd its
            // window limit by this message.
            Err(e)
                if e.kind() == std::io::ErrorKind::OutOfMemory
                    || e.to_string().contains("requires too much memory") =>
            {
                return Err(Capped::Window);
            }
            Err(e) => return Err(Capped::Corrupt(e.to_string())),
        }
        if filled > cap {
            return Err(Capped::TooLarge);
        }
    }
    out.truncate(filled);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for codec in Codec::ALL {
            assert_eq!(Codec::from_name(codec.name()).unwrap(), codec);
        }
        assert!(matches!(
            Codec::from_name("lz4"),
            Err(Error::UnsupportedCodec { .. })
        ));
    }

    #[test]
    fn compress_then_decompress() {
        let data: Vec<u8> = (0..50_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect();
        let at = Location::block("mem", 0);
        for codec in Codec::ALL.into_iter().filter(Codec::is_enabled) {
            let mut stored = Vec::new();
            codec.compress(&data, &mut stored).unwrap();
            let back = codec
                .decompress(&stored, 0, &Limits::default(), &at)
                .unwrap();
            assert_eq!(back, data, "{codec}");
            // One byte under the size: too large.
            let small = Limits::default().with_max_alloc_bytes(data.len() as u64 - 1);
            assert!(
                matches!(
                    codec.decompress(&stored, 0, &small, &at),
                    Err(Error::TooLarge { .. })
                ),
                "{codec}"
            );
            // Exactly the size: fine, except for xz, whose 8 MiB dictionary
            // (preset 6) is itself an allocation over that limit.
            let exact = Limits::default().with_max_alloc_bytes(data.len() as u64);
            let result = codec.decompress(&stored, 7, &exact, &at);
            if codec == Codec::Xz {
                assert!(matches!(result, Err(Error::TooLarge { .. })));
            } else {
                assert_eq!(result.unwrap(), data, "{codec}");
            }
        }
    }

    #[cfg(feature = "deflate")]
    #[test]
    fn deflate_guesses_from_the_last_ratio_and_grows_when_wrong() {
        // Blocks that compress 1000x after ones that do not (the guess is
        // far too small: grown and retried), then the other way round (far
        // too big), in pooled buffers reused across them; each block
        // inflates whole, and over the limit is still an error.
        let at = Location::block("mem", 0);
        let mut rng = grist_tensor::synth::SplitMix64::new(1);
        let noise: Vec<u8> = (0..70_000).map(|_| rng.next_u64() as u8).collect();
        let zeros = vec![0u8; 3_000_000];
        let mut kept = Vec::new();
        for data in [&noise, &zeros, &zeros, &noise, &noise, &zeros] {
            let mut stored = Vec::new();
            Codec::Deflate.compress(data, &mut stored).unwrap();
            let back = Codec::Deflate
                .decompress_bytes(&stored, 0, &Limits::default(), &at)
                .unwrap();
            assert_eq!(&back[..], &data[..]);
            let small = Limits::default().with_max_alloc_bytes(data.len() as u64 - 1);
            assert!(matches!(
                Codec::Deflate.decompress_bytes(&stored, 0, &small, &at),
                Err(Error::TooLarge { .. })
            ));
            // Some blocks stay alive while later ones are inflated.
            if data.len() == zeros.len() {
                kept.push(back);
            }
        }
        assert!(kept.iter().all(|b| b.iter().all(|&x| x == 0)));
    }
}
