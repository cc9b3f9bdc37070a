//! The FFRecord header: a sans-I/O decoder that validates it, and its
//! encoding for the writer.
//!
//! ```text
//! offset      size  field
//! 0           4     meta_crc: CRC-32 of bytes [4, 12 + 12N)   (0 = legacy file)
//! 4           8     N: the number of samples (i64)
//! 12          4N    crc[i]: CRC-32 of sample i
//! 12 + 4N     8N    offset[i]: absolute offset of sample i (i64)
//! 12 + 12N    ...   the samples; sample i ends where i + 1 starts, the last
//!                   one at the end of the file
//! ```
//!
//! All integers are little-endian; the checksums are zlib's CRC-32.

use std::ops::Range;
use std::sync::Arc;

use grist_tensor::Limits;

use crate::error::{Error, OffsetProblem, Result};
use grist_tensor::Location;

/// The length of the fixed part of the header: the metadata checksum and
/// the sample count.
pub const PREFIX_LEN: usize = 12;

/// The length of the header of a file of `count` samples (`12 + 12·N`), or
/// `None` if it does not fit in a `u64`.
pub fn header_len(count: u64) -> Option<u64> {
    count.checked_mul(12)?.checked_add(PREFIX_LEN as u64)
}

/// The zlib CRC-32 of `data` (as FFRecord stores it for each sample).
pub fn crc32(data: &[u8]) -> u32 {
    // A hasher made once: `crc32fast::hash` detects the CPU's features
    // again on every call.
    static NEW: std::sync::OnceLock<crc32fast::Hasher> = std::sync::OnceLock::new();
    let mut h = NEW.get_or_init(crc32fast::Hasher::new).clone();
    h.update(data);
    h.finalize()
}

/// Checks a sample's bytes against the CRC-32 its header stores:
/// [`Error::SampleChecksum`] at `at()` when they differ.
pub fn check_sample(data: &[u8], stored: u32, at: impl FnOnce() -> Location) -> Result<()> {
    let computed = crc32(data);
    if computed == stored {
        Ok(())
    } else {
        Err(Error::SampleChecksum {
            at: at().into(),
            stored,
            computed,
        })
    }
}

/// A validated file header, plus the file size that ends the last sample.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileHeader {
    stored_crc: u32,
    computed_crc: u32,
    checksums: Vec<u32>,
    /// `N + 1` entries: each sample's offset, then the file size.
    offsets: Vec<u64>,
}

impl FileHeader {
    /// The number of samples.
    pub fn count(&self) -> u64 {
        self.checksums.len() as u64
    }

    /// The header's length in bytes, `12 + 12·N`.
    pub fn header_len(&self) -> u64 {
        PREFIX_LEN as u64 + 12 * self.count()
    }

    /// The file size the header was validated against.
    pub fn file_size(&self) -> u64 {
        self.offsets[self.offsets.len() - 1]
    }

    /// The metadata checksum stored in the file (0 in legacy files).
    pub fn stored_crc(&self) -> u32 {
        self.stored_crc
    }

    /// The metadata checksum of the header as read.
    pub fn computed_crc(&self) -> u32 {
        self.computed_crc
    }

    /// True for a legacy file, whose stored metadata checksum is 0 ("no
    /// checksum": files written before September 2021). Its metadata is
    /// not verified; the original reader prints a warning.
    pub fn is_legacy(&self) -> bool {
        self.stored_crc == 0
    }

    /// The stored CRC-32 of each sample.
    pub fn checksums(&self) -> &[u32] {
        &self.checksums
    }

    /// `N + 1` offsets: where each sample starts, then the file size (as
    /// the original's `get_offsets` returns them).
    pub fn offsets(&self) -> &[u64] {
        &self.offsets
    }

    /// The byte range of sample `i` in the file, if there is such a
    /// sample.
    pub fn sample_range(&self, i: u64) -> Option<Range<u64>> {
        let i = usize::try_from(i).ok()?;
        Some(*self.offsets.get(i)?..*self.offsets.get(i + 1)?)
    }

    /// The total length of the samples (the file minus the header and any
    /// bytes between the header and the first sample).
    pub fn data_len(&self) -> u64 {
        self.file_size() - self.offsets[0]
    }
}

/// Decodes and validates a header, fed in pieces of any size (sans I/O).
///
/// [`new`](Self::new) takes the first 12 bytes and the file size, checks
/// that the file can hold the header that the count implies (before
/// allocating anything for it) and the [`Limits`]; [`feed`](Self::feed)
/// takes the rest of the header; [`finish`](Self::finish) checks the
/// metadata CRC-32 (unless asked not to, or the file is a legacy one
/// whose stored checksum is 0) and then every offset: at or after the end
/// of the header, at or before the end of the file, never smaller than
/// the one before.
///
/// ```
/// use grist_ffrecord::{HeaderDecoder, encode_file};
///
/// let file = encode_file([&b"hello"[..], b"ffrecord!"]);
/// let mut decoder = HeaderDecoder::new("tiny2.ffr".into(), &file, file.len() as u64, &Default::default())?;
/// assert_eq!(decoder.header_len(), 36);
/// let used = decoder.feed(&file[12..]);
/// assert_eq!(used, 24);
/// let header = decoder.finish(true, 0)?;
/// assert_eq!(header.offsets(), &[36, 41, 50]);
/// assert_eq!(header.stored_crc(), 0x1614ecb8);
/// # Ok::<(), grist_ffrecord::Error>(())
/// ```
#[derive(Debug)]
pub struct HeaderDecoder {
    file: Arc<str>,
    size: u64,
    stored_crc: u32,
    count: usize,
    hasher: crc32fast::Hasher,
    checksums: Vec<u32>,
    raw_offsets: Vec<u64>,
    /// An element split across two calls to `feed`.
    pending: [u8; 8],
    pending_len: usize,
    remaining: u64,
}

impl HeaderDecoder {
    /// Starts decoding the header of `file`, a file of `size` bytes whose
    /// first bytes are `prefix` (at least 12 of them, unless the file is
    /// shorter).
    ///
    /// Fails with [`Error::TruncatedHeader`] when the file is too short
    /// for its header, and with [`Error::TooLarge`] when the header is
    /// larger than `limits` allow to allocate.
    pub fn new(file: Arc<str>, prefix: &[u8], size: u64, limits: &Limits) -> Result<Self> {
        let Some(prefix) = prefix.first_chunk::<PREFIX_LEN>() else {
            return Err(Error::TruncatedHeader {
                file,
                count: None,
                needed: PREFIX_LEN as u128,
                size: size.min(prefix.len() as u64),
            });
        };
        let stored_crc = u32::from_le_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]);
        let mut n = [0u8; 8];
        n.copy_from_slice(&prefix[4..12]);
        let count = i64::from_le_bytes(n);
        // A negative count is read as its unsigned value (the first
        // writers stored N as u64): far too many samples for any file.
        let needed = PREFIX_LEN as u128 + 12 * u128::from(count as u64);
        if needed > u128::from(size) {
            return Err(Error::TruncatedHeader {
                file,
                count: Some(count),
                needed,
                size,
            });
        }
        // The header fits in the file, so these fit in u64 and usize
        // (the file was addressable).
        let arrays = needed as u64 - PREFIX_LEN as u64;
        limits
            .check_alloc("ffrecord header", arrays)
            .map_err(|source| Error::TooLarge {
                file: file.clone(),
                source,
            })?;
        let count = count as usize;
        let mut hasher = crc32fast::Hasher::new();
        hasher.update(&prefix[4..12]);
        let raw_offsets = Vec::with_capacity(count + 1);
        Ok(HeaderDecoder {
            file,
            size,
            stored_crc,
            count,
            hasher,
            checksums: Vec::with_capacity(count),
            raw_offsets,
            pending: [0; 8],
            pending_len: 0,
            remaining: arrays,
        })
    }

    /// The header's length, `12 + 12·N`.
    pub fn header_len(&self) -> u64 {
        PREFIX_LEN as u64 + 12 * self.count as u64
    }

    /// How many header bytes [`feed`](Self::feed) still needs.
    pub fn remaining(&self) -> u64 {
        self.remaining
    }

    /// Takes the next header bytes (those after the first 12); returns how
    /// many of `bytes` were used (fewer than given once the header is
    /// complete).
    pub fn feed(&mut self, bytes: &[u8]) -> usize {
        let take = bytes
            .len()
            .min(usize::try_from(self.remaining).unwrap_or(usize::MAX));
        let mut bytes = &bytes[..take];
        self.hasher.update(bytes);
        self.remaining -= take as u64;
        while !bytes.is_empty() {
            let in_checksums = self.checksums.len() < self.count;
            let width = if in_checksums { 4 } else { 8 };
            if self.pending_len > 0 || bytes.len() < width {
                let n = (width - self.pending_len).min(bytes.len());
                self.pending[self.pending_len..self.pending_len + n].copy_from_slice(&bytes[..n]);
                self.pending_len += n;
                bytes = &bytes[n..];
                if self.pending_len == width {
                    let mut word = [0u8; 8];
                    word[..width].copy_from_slice(&self.pending[..width]);
                    if in_checksums {
                        self.checksums
                            .push(u32::from_le_bytes([word[0], word[1], word[2], word[3]]));
                    } else {
                        self.raw_offsets.push(u64::from_le_bytes(word));
                    }
                    self.pending_len = 0;
                }
            } else if in_checksums {
                let k = (bytes.len() / 4).min(self.count - self.checksums.len());
                let (whole, rest) = bytes.split_at(4 * k);
                self.checksums.extend(
                    whole
                        .chunks_exact(4)
                        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])),
                );
                bytes = rest;
            } else {
                let k = bytes.len() / 8;
                let (whole, rest) = bytes.split_at(8 * k);
                self.raw_offsets.extend(whole.chunks_exact(8).map(|c| {
                    let mut w = [0u8; 8];
                    w.copy_from_slice(c);
                    u64::from_le_bytes(w)
                }));
                bytes = rest;
            }
        }
        take
    }

    /// Validates the header: complete, its metadata CRC-32 matching when
    /// `check_metadata` is set (and the file is not a legacy one), its
    /// offsets in bounds and non-decreasing. `first_index` is the dataset
    /// number of the file's first sample, for error messages.
    pub fn finish(self, check_metadata: bool, first_index: u64) -> Result<FileHeader> {
        if self.remaining > 0 {
            let needed = self.header_len();
            return Err(Error::TruncatedHeader {
                file: self.file,
                count: Some(self.count as i64),
                needed: u128::from(needed),
                size: needed - self.remaining,
            });
        }
        let computed_crc = self.hasher.finalize();
        if check_metadata && self.stored_crc != 0 && computed_crc != self.stored_crc {
            return Err(Error::MetadataChecksum {
                file: self.file,
                stored: self.stored_crc,
                computed: computed_crc,
            });
        }
        let header_len = PREFIX_LEN as u64 + 12 * self.count as u64;
        let mut offsets = self.raw_offsets;
        let mut previous = header_len;
        for (i, &raw) in offsets.iter().enumerate() {
            let problem = if (raw as i64) < 0 || raw < header_len {
                Some(OffsetProblem::BeforeData { header_len })
            } else if raw > self.size {
                Some(OffsetProblem::PastEnd { size: self.size })
            } else if raw < previous {
                Some(OffsetProblem::Decreasing { previous })
            } else {
                None
            };
            if let Some(problem) = problem {
                return Err(Error::InvalidOffset {
                    at: Location::record(self.file, i as u64)
                        .with_index(first_index + i as u64)
                        .into(),
                    offset: raw as i64,
                    problem,
                });
            }
            previous = raw;
        }
        offsets.push(self.size);
        Ok(FileHeader {
            stored_crc: self.stored_crc,
            computed_crc,
            checksums: self.checksums,
            offsets,
        })
    }
}

/// Parses and validates the header of a whole file held in memory.
pub fn parse_header(
    file: Arc<str>,
    data: &[u8],
    check_metadata: bool,
    limits: &Limits,
    first_index: u64,
) -> Result<FileHeader> {
    let mut decoder = HeaderDecoder::new(file, data, data.len() as u64, limits)?;
    decoder.feed(&data[PREFIX_LEN..]);
    decoder.finish(check_metadata, first_index)
}

/// The header bytes of a file whose samples have these checksums and
/// start at these offsets, with its metadata CRC-32 filled in: the bytes
/// HFAiLab's writer produces.
///
/// # Panics
///
/// When the two lists differ in length (a caller bug).
pub fn encode_header(checksums: &[u32], offsets: &[u64]) -> Vec<u8> {
    assert_eq!(checksums.len(), offsets.len(), "one offset per checksum");
    let n = checksums.len();
    let mut out = Vec::with_capacity(PREFIX_LEN + 12 * n);
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&(n as u64).to_le_bytes());
    for c in checksums {
        out.extend_from_slice(&c.to_le_bytes());
    }
    for o in offsets {
        out.extend_from_slice(&o.to_le_bytes());
    }
    let crc = crc32(&out[4..]);
    out[..4].copy_from_slice(&crc.to_le_bytes());
    out
}

/// A whole FFRecord file holding `samples`, in memory: byte-identical to
/// what HFAiLab's `FileWriter` writes for them.
pub fn encode_file<'a>(samples: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let samples: Vec<&[u8]> = samples.into_iter().collect();
    let n = samples.len() as u64;
    let mut at = PREFIX_LEN as u64 + 12 * n;
    let mut checksums = Vec::with_capacity(samples.len());
    let mut offsets = Vec::with_capacity(samples.len());
    for s in &samples {
        checksums.push(crc32(s));
        offsets.push(at);
        at += s.len() as u64;
    }
    let mut out = encode_header(&checksums, &offsets);
    out.reserve(samples.iter().map(|s| s.len()).sum());
    for s in &samples {
        out.extend_from_slice(s);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc_is_zlibs() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b""), 0);
    }

    #[test]
    fn feeding_in_any_pieces_gives_the_same_header() {
        let file = encode_file([&b"a"[..], b"", b"bcd", b"efgh"]);
        let whole = parse_header("f".into(), &file, true, &Limits::default(), 0).unwrap();
        for piece in 1..13 {
            let mut d =
                HeaderDecoder::new("f".into(), &file, file.len() as u64, &Limits::default())
                    .unwrap();
            let mut used = 0;
            for c in file[PREFIX_LEN..].chunks(piece) {
                used += d.feed(c);
            }
            assert_eq!(used as u64, whole.header_len() - PREFIX_LEN as u64);
            assert_eq!(d.finish(true, 0).unwrap(), whole);
        }
        assert_eq!(whole.offsets(), &[60, 61, 61, 64, 68]);
    }

    #[test]
    fn huge_counts_fail_before_allocating() {
        let mut file = encode_file([&b"x"[..]]);
        file[4..12].copy_from_slice(&(1u64 << 61).to_le_bytes());
        let e = parse_header("f".into(), &file, true, &Limits::default(), 0).unwrap_err();
        assert!(matches!(e, Error::TruncatedHeader { count: Some(c), .. } if c == 1 << 61));
        file[4..12].copy_from_slice(&(-1i64).to_le_bytes());
        let e = parse_header("f".into(), &file, true, &Limits::default(), 0).unwrap_err();
        assert!(matches!(
            e,
            Error::TruncatedHeader {
                count: Some(-1),
                ..
            }
        ));
    }
}
