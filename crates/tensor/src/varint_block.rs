//! Sixteen short varints at once, where the core has AVX-512 (VBMI2).
//!
//! Packed lists of small integers (the indices of sparse features, ids,
//! counts: 1 to 4 bytes each) are most of a tf.Example's varints. One by
//! one, each costs a chain of a few dozen instructions; here a 64-byte
//! window is loaded once, the varints' first and last bytes found from its
//! high bits, each varint's bytes gathered into a 32-bit lane by a byte
//! permutation, and the sixteen values assembled together.
//!
//! [`decode_blocks`] stops at the first window it cannot decode exactly
//! (no AVX-512 here, a varint over 4 bytes, none ending in the window):
//! the caller decodes the rest one by one, with the same outcome, errors
//! included.

/// The most varints one call decodes.
pub(crate) const BLOCK: usize = 16;

/// Decodes the varints at the start of `bytes`, [`BLOCK`] at a time while
/// at least `from` bytes are left and a window decodes, handing each
/// block's values to `block`: how many varints, and the bytes they take
/// (none where the core lacks the instructions).
#[inline]
pub(crate) fn decode_blocks(
    bytes: &[u8],
    from: usize,
    block: impl FnMut(&[u64]),
) -> (usize, usize) {
    #[cfg(target_arch = "x86_64")]
    {
        if avx512::available() {
            // SAFETY: `available` checked that the core has every feature
            // `blocks` is compiled for.
            #[allow(unsafe_code)]
            return unsafe { avx512::blocks(bytes, from, block) };
        }
    }
    let _ = (bytes, from, block);
    (0, 0)
}

/// Before Rust 1.89 (no AVX-512 intrinsics): nothing is decoded here.
#[cfg(target_arch = "x86_64")]
#[rustversion::before(1.89)]
#[allow(unsafe_code)]
mod avx512 {
    pub(super) fn available() -> bool {
        false
    }

    pub(super) unsafe fn blocks(_: &[u8], _: usize, _: impl FnMut(&[u64])) -> (usize, usize) {
        (0, 0)
    }
}

// The intrinsics need Rust 1.89, past the crate's MSRV: compiled only
// from 1.89 on (`rustversion`), the module above standing in before.
#[cfg(target_arch = "x86_64")]
#[rustversion::since(1.89)]
#[allow(unsafe_code, clippy::incompatible_msrv)]
mod avx512 {
    use std::arch::x86_64::*;
    use std::sync::OnceLock;

    use super::BLOCK;

    pub(super) fn available() -> bool {
        static HAS: OnceLock<bool> = OnceLock::new();
        *HAS.get_or_init(|| {
            std::is_x86_feature_detected!("avx512f")
                && std::is_x86_feature_detected!("avx512bw")
                && std::is_x86_feature_detected!("avx512vbmi")
                && std::is_x86_feature_detected!("avx512vbmi2")
                && std::is_x86_feature_detected!("bmi2")
        })
    }

    /// Byte `i` is `i`.
    const IOTA: [u8; 64] = {
        let mut a = [0u8; 64];
        let mut i = 0;
        while i < 64 {
            a[i] = i as u8;
            i += 1;
        }
        a
    };

    /// Byte `4j + k` is `j` (lane `j`'s four bytes all take varint `j`).
    const SPREAD: [u8; 64] = {
        let mut a = [0u8; 64];
        let mut i = 0;
        while i < 64 {
            a[i] = (i / 4) as u8;
            i += 1;
        }
        a
    };

    /// Byte `4j + k` is `k` (a varint's bytes in its lane, in order).
    const STEP: [u8; 64] = {
        let mut a = [0u8; 64];
        let mut i = 0;
        while i < 64 {
            a[i] = (i % 4) as u8;
            i += 1;
        }
        a
    };

    /// See [`super::decode_blocks`].
    ///
    /// # Safety
    ///
    /// The core has the features [`available`] checks.
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi,avx512vbmi2,bmi2")]
    pub(super) unsafe fn blocks(
        bytes: &[u8],
        from: usize,
        mut block: impl FnMut(&[u64]),
    ) -> (usize, usize) {
        let mut out = [0; BLOCK];
        let (mut n, mut p) = (0, 0);
        while bytes.len() - p >= from {
            // SAFETY: this function's features are `decode_to`'s; `out`
            // holds BLOCK values.
            let Some((count, took)) = (unsafe { decode_to(&bytes[p..], out.as_mut_ptr()) }) else {
                break;
            };
            block(&out[..count]);
            n += count;
            p += took;
        }
        (n, p)
    }

    /// Decodes the varints that start at `bytes[0]` and end within its
    /// first 64 bytes, up to BLOCK of them, into the BLOCK values at `out`
    /// (those past the count hold meaningless values): how many, and the bytes
    /// they take. `None` when one of them is over 4 bytes long, or when
    /// none ends in the window.
    ///
    /// # Safety
    ///
    /// The core has AVX-512 F, BW, VBMI, VBMI2 and BMI2 ([`available`]);
    /// `out` is valid for writes of BLOCK u64s.
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi,avx512vbmi2,bmi2")]
    #[inline]
    unsafe fn decode_to(bytes: &[u8], out: *mut u64) -> Option<(usize, usize)> {
        let len = bytes.len().min(64);
        let loaded: u64 = if len == 64 { !0 } else { (1u64 << len) - 1 };
        // SAFETY: a masked load reads only the bytes its mask selects,
        // here `bytes[..len]`, which are in bounds; the others are zero
        // and fault on nothing.
        let v = unsafe { _mm512_maskz_loadu_epi8(loaded, bytes.as_ptr().cast()) };
        let cont = _mm512_movepi8_mask(v) & loaded;
        let ends = !cont & loaded;
        if ends == 0 {
            return None;
        }
        let n = (ends.count_ones() as usize).min(BLOCK);
        // The last byte of the `n`th varint, and the window up to it.
        let last = _pdep_u64(1 << (n - 1), ends).trailing_zeros();
        let window = u64::MAX >> (63 - last);
        let cont = cont & window;
        if cont & (cont >> 1) & (cont >> 2) & (cont >> 3) != 0 {
            // Four continuation bytes in a row: a varint over 4 bytes.
            return None;
        }
        let ends = ends & window;
        let starts = ((ends << 1) | 1) & window;
        // SAFETY: the three constants are 64 bytes long, as an unaligned
        // 512-bit load reads.
        let (iota, spread, step) = unsafe {
            (
                _mm512_loadu_si512(IOTA.as_ptr().cast()),
                _mm512_loadu_si512(SPREAD.as_ptr().cast()),
                _mm512_loadu_si512(STEP.as_ptr().cast()),
            )
        };
        // Byte j: where varint j starts, and where it ends.
        let first = _mm512_maskz_compress_epi8(starts, iota);
        let end = _mm512_maskz_compress_epi8(ends, iota);
        // Lane j (32 bits): the four bytes from varint j's start. Indices
        // past 63 wrap, but only onto bytes past the varint's end, which
        // the length mask clears.
        let at = _mm512_add_epi8(_mm512_permutexvar_epi8(spread, first), step);
        let lanes = _mm512_permutexvar_epi8(at, v);
        // Each lane's length in bits, 8 to 32: its bytes past the varint
        // are cleared (a shift by 32 gives 0, so all four stay).
        let bytes_in = _mm512_sub_epi8(end, first);
        let len = _mm512_cvtepu8_epi32(_mm512_castsi512_si128(bytes_in));
        let bits = _mm512_slli_epi32::<3>(_mm512_add_epi32(len, _mm512_set1_epi32(1)));
        let past = _mm512_sllv_epi32(_mm512_set1_epi32(-1), bits);
        let x = _mm512_andnot_si512(
            past,
            _mm512_and_si512(lanes, _mm512_set1_epi32(0x7f7f_7f7f)),
        );
        // Four 7-bit groups into 28 bits.
        let x = _mm512_or_si512(
            _mm512_and_si512(x, _mm512_set1_epi32(0x007f_007f)),
            _mm512_srli_epi32::<1>(_mm512_and_si512(x, _mm512_set1_epi32(0x7f00_7f00))),
        );
        let x = _mm512_or_si512(
            _mm512_and_si512(x, _mm512_set1_epi32(0x0000_3fff)),
            _mm512_srli_epi32::<2>(_mm512_and_si512(x, _mm512_set1_epi32(0x3fff_0000))),
        );
        let low = _mm512_cvtepu32_epi64(_mm512_castsi512_si256(x));
        let high = _mm512_cvtepu32_epi64(_mm512_extracti64x4_epi64::<1>(x));
        // SAFETY: `out` has room for 16 u64s: 128 bytes, two 512-bit
        // stores.
        unsafe {
            _mm512_storeu_si512(out.cast(), low);
            _mm512_storeu_si512(out.add(8).cast(), high);
        }
        Some((n, last as usize + 1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::feature_map::put_varint;
    use crate::varint;

    /// Against one-by-one decoding, on lists of varints of 1 to 6 bytes
    /// (of every length, cut anywhere) and on arbitrary bytes: the values
    /// decoded are the list's first ones and take the bytes they take one
    /// by one.
    #[test]
    fn blocks_decode_as_one_by_one() {
        let mut seed = 5u64;
        let mut rand = |n: u64| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) % n
        };
        let mut decoded = 0;
        for case in 0..20_000 {
            let mut bytes = Vec::new();
            if case % 5 == 4 {
                bytes.extend((0..rand(200)).map(|_| rand(256) as u8));
            } else {
                let widest = 1 + rand(6) as u32;
                for _ in 0..rand(100) {
                    let bits = 7 * (1 + rand(widest as u64) as u32);
                    put_varint(&mut bytes, rand(1u64 << bits.min(63)));
                }
                bytes.truncate(rand(bytes.len() as u64 + 1) as usize);
            }
            let from = 1 + rand(20) as usize;
            let mut got = Vec::new();
            let (n, took) = decode_blocks(&bytes, from, |vals| got.extend_from_slice(vals));
            assert_eq!(got.len(), n);
            let mut p = 0;
            for &v in &got {
                let (want, len) = varint::decode(&bytes[p..]).unwrap();
                assert_eq!(v, want, "{bytes:x?}");
                p += len;
            }
            assert_eq!(p, took, "{bytes:x?}");
            decoded += n;
        }
        #[cfg(target_arch = "x86_64")]
        let simd = avx512::available();
        #[cfg(not(target_arch = "x86_64"))]
        let simd = false;
        if simd {
            assert!(decoded > 100_000, "{decoded}");
        } else {
            assert_eq!(decoded, 0);
        }
    }
}
