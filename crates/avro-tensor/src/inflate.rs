//! A raw deflate (RFC 1951) inflater that inflates two independent streams
//! at once on one thread.
//!
//! Huffman decoding is a chain of dependent steps: look the next code up
//! in a table, shift the bit buffer by its length, look up the next one.
//! On blocks of mostly literals (floats do not compress) each byte costs
//! that whole latency and the core sits mostly idle; libdeflate inflates
//! prod19's blocks at 450–570 MB/s. An Avro file's blocks are independent
//! deflate streams, so [`inflate_two`] steps two of them in one loop: the
//! two chains have no data dependence and the core overlaps them.
//!
//! Tables are fixed-size arrays indexed by masked bits; the hot loop runs
//! a counted number of steps, each of which reads at most 14 input bytes
//! past its start and writes at most 258 (+7) bytes, so that 16 bytes of
//! input and 274 bytes of room are there for every step; everything near
//! the ends of input or output goes through the same code with checked
//! refills and writes. Three `unsafe` blocks rely on that count: the
//! 8-byte refill load, the literal store and the 8-byte match copy (with
//! bounds checks they cost 17% of inflate throughput, criterion
//! `avro_prod19_inflate`, because the two streams' states no longer fit
//! in registers); each is `debug_assert`ed, the unit tests run them, and
//! the `avro_container` fuzz target reaches them through `BlockReader`.

/// Bits indexing the literal/length root table.
const LITLEN_ROOT: u32 = 11;
/// Bits indexing the distance root table.
const DIST_ROOT: u32 = 8;
/// Bits indexing the code-length code's table (its codes are at most 7
/// bits: no subtables).
const PRECODE_ROOT: u32 = 7;

/// Entry flag: a literal byte (in the value bits).
const LITERAL: u32 = 1 << 15;
/// Entry flag: the end of the block.
const END: u32 = 1 << 14;
/// Entry flag: a pointer to a subtable (value: its start; extra: its bits).
const SUB: u32 = 1 << 13;
/// Entry flag: no valid code (an incomplete code's hole, or a symbol
/// deflate reserves).
const INVALID: u32 = 1 << 12;

/// An entry: value << 16 | flags | extra bits << 8 | code length.
#[inline(always)]
fn entry(value: u32, flags: u32, extra: u32, len: u32) -> u32 {
    value << 16 | flags | extra << 8 | len
}

/// Output room the fast loop needs past the write position: three
/// literals, or the longest match plus the 8-byte overshoot of its copy.
const FAST_OUT_ROOM: usize = 258 + 16;
/// Input the fast step may read: two refills of up to 7 bytes, 8 read.
const FAST_IN_ROOM: usize = 16;

const LENGTH_BASE: [u16; 29] = [
    3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131,
    163, 195, 227, 258,
];
const LENGTH_EXTRA: [u8; 29] = [
    0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0,
];
const DIST_BASE: [u16; 30] = [
    1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537,
    2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577,
];
const DIST_EXTRA: [u8; 30] = [
    0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13,
    13,
];
/// The order code-length code lengths are stored in.
const PRECODE_ORDER: [usize; 19] = [
    16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15,
];

/// Why inflating stopped early.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum InflateError {
    /// The output would exceed the cap.
    TooLarge,
    /// The stream is invalid or ends early.
    Corrupt(Corruption),
}

/// What is wrong with a deflate stream (small, so that a step's result
/// stays in a register; callers describe failures with libdeflate's
/// words, see `codec::inflate_pair_pooled`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Corruption {
    /// Distance too far back.
    DistanceTooFar,
    /// Incomplete Huffman code.
    IncompleteCode,
    /// Invalid block type.
    BlockType,
    /// Invalid code lengths set.
    CodeLengths,
    /// Invalid distance code.
    DistanceCode,
    /// Invalid literal/length code.
    LitLenCode,
    /// Missing end-of-block code.
    NoEndCode,
    /// Over-subscribed Huffman code.
    OversubscribedCode,
    /// Repeat with no first length.
    RepeatFirst,
    /// Stored block length check failed.
    StoredLength,
    /// Too many code lengths.
    TooManyLengths,
    /// Too many length or distance symbols.
    TooManySymbols,
    /// Truncated deflate stream.
    Truncated,
}

type Res<T> = std::result::Result<T, InflateError>;

/// A Huffman code's lookup tables: a root table indexed by `ROOT` bits and
/// fixed-size subtables for longer codes.
#[derive(Clone)]
struct Table<const ROOT_SIZE: usize> {
    root: Box<[u32; ROOT_SIZE]>,
    sub: Vec<u32>,
}

impl<const ROOT_SIZE: usize> Table<ROOT_SIZE> {
    fn new() -> Self {
        Self {
            root: Box::new([INVALID; ROOT_SIZE]),
            sub: Vec::new(),
        }
    }

    /// The entry for the code at the bottom of `bits`; its length bits are
    /// the whole code's length.
    #[inline(always)]
    fn lookup(&self, bits: u64) -> u32 {
        self.resolve(self.root(bits), bits)
    }

    /// The root entry for `bits`: needs only the root's bits to be valid.
    #[inline(always)]
    fn root(&self, bits: u64) -> u32 {
        self.root[bits as usize & (ROOT_SIZE - 1)]
    }

    /// A root entry, or the subtable entry it points to for `bits` (which
    /// then need to hold the whole code).
    #[inline(always)]
    fn resolve(&self, e: u32, bits: u64) -> u32 {
        if e & SUB == 0 {
            return e;
        }
        let root_bits = ROOT_SIZE.trailing_zeros();
        let sub_bits = (e >> 8) & 0xf;
        let i = (e >> 16) as usize + ((bits >> root_bits) as usize & ((1 << sub_bits) - 1));
        self.sub.get(i).copied().unwrap_or(INVALID)
    }

    /// Builds the canonical code of `lens` (one per symbol, 0: unused);
    /// `value(symbol, len)` is a symbol's entry. `precode`: an incomplete
    /// code is an error (zlib's rule for the code-length code); otherwise
    /// an incomplete code is allowed only when empty or a single 1-bit
    /// code. Tables are reused: a complete code writes every root entry,
    /// an incomplete one marks its holes first, so stale entries of the
    /// last code never show.
    fn build(&mut self, lens: &[u8], precode: bool, value: impl Fn(usize, u32) -> u32) -> Res<()> {
        let mut count = [0u16; 16];
        for &l in lens {
            count[l as usize] += 1;
        }
        count[0] = 0;
        let mut left: i32 = 1;
        let mut max = 0;
        for (len, &c) in count.iter().enumerate().skip(1) {
            left = (left << 1) - c as i32;
            if left < 0 {
                return Err(InflateError::Corrupt(Corruption::OversubscribedCode));
            }
            if c > 0 {
                max = len as u32;
            }
        }
        if left > 0 && (precode || max > 1) && max != 0 {
            return Err(InflateError::Corrupt(Corruption::IncompleteCode));
        }
        if left == 0 {
            self.build_complete(lens, &count, max, value);
            return Ok(());
        }
        // The incomplete codes allowed: empty, or a single 1-bit code
        // (codeword 0: every even index); the rest are holes.
        self.root.fill(INVALID);
        self.sub.clear();
        if let Some(sym) = lens.iter().position(|&l| l == 1) {
            let e = value(sym, 1);
            self.root.iter_mut().step_by(2).for_each(|slot| *slot = e);
        }
        Ok(())
    }

    /// Builds a complete code (`count[len]` codes of each length, the
    /// longest `max`) as libdeflate does: codewords in canonical order
    /// (bit-reversed, as deflate reads them) each written once into a
    /// table of 2^len entries, the table doubled by copying when moving
    /// to the next length, so that a short code reaches all its 2^(root -
    /// len) entries through copies, not one store each. Codes longer than
    /// the root get subtables; the codes sharing a root prefix are
    /// consecutive in canonical order.
    fn build_complete(
        &mut self,
        lens: &[u8],
        count: &[u16; 16],
        max: u32,
        value: impl Fn(usize, u32) -> u32,
    ) {
        let root_bits = ROOT_SIZE.trailing_zeros();
        // Symbols sorted by length, then symbol.
        let mut start = [0usize; 16];
        for len in 1..15 {
            start[len + 1] = start[len] + count[len] as usize;
        }
        let mut sorted = [0u16; 288 + 32];
        for (sym, &l) in lens.iter().enumerate() {
            if l != 0 {
                sorted[start[l as usize]] = sym as u16;
                start[l as usize] += 1;
            }
        }
        let mut symbols = sorted[..lens.len()].iter().map(|&s| s as usize);
        self.sub.clear();
        // The current codeword, bit-reversed, in `len` bits; the table
        // holds 2^len entries so far.
        let (mut code, mut len, mut end) = (0usize, 1u32, 2usize);
        let mut remaining = count[1];
        let next_code = |code: usize, end: usize| {
            // Bit-reversed increment: set the highest clear bit, clear
            // those above it.
            let bit = 1usize << (usize::BITS - 1 - (code ^ (end - 1)).leading_zeros());
            (code & (bit - 1)) | bit
        };
        loop {
            while remaining > 0 && len <= root_bits {
                let sym = symbols.next().unwrap_or(0);
                self.root[code] = value(sym, len);
                if code == end - 1 {
                    // The last codeword: double up to the whole root.
                    while end < ROOT_SIZE {
                        self.root.copy_within(0..end, end);
                        end *= 2;
                    }
                    return;
                }
                code = next_code(code, end);
                remaining -= 1;
            }
            if len == root_bits {
                break;
            }
            self.root.copy_within(0..end, end);
            end *= 2;
            len += 1;
            remaining = count[len as usize];
        }
        // Codes longer than the root, into subtables of 2^(max - root).
        let sub_bits = max - root_bits;
        let mut prefix = usize::MAX;
        let mut table = 0;
        for len in root_bits + 1..=max {
            let end = 1usize << len;
            for _ in 0..count[len as usize] {
                let sym = symbols.next().unwrap_or(0);
                let e = value(sym, len);
                if code & (ROOT_SIZE - 1) != prefix {
                    prefix = code & (ROOT_SIZE - 1);
                    table = self.sub.len();
                    self.sub.resize(table + (1 << sub_bits), INVALID);
                    self.root[prefix] = entry(table as u32, SUB, sub_bits, root_bits);
                }
                let mut i = code >> root_bits;
                while i < 1 << sub_bits {
                    self.sub[table + i] = e;
                    i += 1 << (len - root_bits);
                }
                if code == end - 1 {
                    return;
                }
                code = next_code(code, end);
            }
        }
    }
}

type LitLenTable = Table<{ 1 << LITLEN_ROOT }>;
type DistTable = Table<{ 1 << DIST_ROOT }>;
type PrecodeTable = Table<{ 1 << PRECODE_ROOT }>;

fn litlen_entry(sym: usize, len: u32) -> u32 {
    match sym {
        0..=255 => entry(sym as u32, LITERAL, 0, len),
        256 => entry(0, END, 0, len),
        257..=285 => entry(
            LENGTH_BASE[sym - 257] as u32,
            0,
            LENGTH_EXTRA[sym - 257] as u32,
            len,
        ),
        _ => entry(0, INVALID, 0, len),
    }
}

fn dist_entry(sym: usize, len: u32) -> u32 {
    match sym {
        0..=29 => entry(DIST_BASE[sym] as u32, 0, DIST_EXTRA[sym] as u32, len),
        _ => entry(0, INVALID, 0, len),
    }
}

/// Where a stream is.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum State {
    /// Before a block header.
    Header,
    /// Inside a Huffman-coded block.
    Huffman,
    /// The final block ended.
    Done,
}

/// The bit reader and output position of a stream: copied into locals
/// for the hot loop, so that they live in registers (writes through the
/// output slice could otherwise alias them).
#[derive(Clone, Copy)]
struct Regs {
    /// The next input byte to load; past the end by the zero bytes the
    /// careful refill made up.
    pos: usize,
    bits: u64,
    nbits: u32,
    /// Output written so far; the rest of the output is room.
    written: usize,
    /// In the fast loop: the literal/length root entry for `bits`, looked
    /// up ahead so that the next step's refill overlaps the load.
    entry: u32,
}

impl Regs {
    #[inline(always)]
    fn consume(&mut self, n: u32) {
        self.bits >>= n;
        self.nbits -= n;
    }

    /// `n` (≤ 16) bits, after a refill if needed.
    #[inline(always)]
    fn peek_extra(&self, n: u32) -> usize {
        (self.bits & ((1u64 << n) - 1)) as usize
    }

    /// Fills the bit buffer to 56..=63 bits from the 8 input bytes at
    /// `pos` (the caller checked they are there).
    #[inline(always)]
    fn refill_fast(&mut self, input: &[u8]) {
        debug_assert!(self.pos + 8 <= input.len());
        // SAFETY: the caller checked 8 bytes at `pos` are input.
        let word = unsafe { input.as_ptr().add(self.pos).cast::<u64>().read_unaligned() };
        self.bits |= u64::from_le(word) << self.nbits;
        self.pos += (63 - self.nbits as usize) >> 3;
        self.nbits |= 56;
    }

    /// Fills the bit buffer to over 56 bits byte by byte, with zeros past
    /// the end of the input (counted in `pos`: [`Stream::check_overread`]
    /// tells a stream that used them).
    fn refill_careful(&mut self, input: &[u8]) -> Res<()> {
        while self.nbits <= 56 {
            let byte = input.get(self.pos).copied().unwrap_or(0);
            self.bits |= (byte as u64) << self.nbits;
            self.pos += 1;
            self.nbits += 8;
        }
        // A valid stream never loads more than 8 made-up bytes (it uses
        // none of them); this bounds the work on a stream that ran out.
        if self.pos > input.len() + 8 {
            return Err(InflateError::Corrupt(Corruption::Truncated));
        }
        Ok(())
    }

    #[inline(always)]
    fn refill<const FAST: bool>(&mut self, input: &[u8]) -> Res<()> {
        if FAST {
            self.refill_fast(input);
            Ok(())
        } else {
            self.refill_careful(input)
        }
    }

    /// Whether the fast step may run: 16 bytes of input to refill from
    /// (two refills), room for the longest step.
    #[inline(always)]
    fn fast_ready(&self, input: &[u8], out: &[u8]) -> bool {
        self.pos + FAST_IN_ROOM <= input.len() && self.written + FAST_OUT_ROOM <= out.len()
    }

    /// How many fast steps may run before [`fast_ready`](Self::fast_ready)
    /// needs asking again: a step takes at most 14 input bytes (two
    /// refills of 7) and writes at most 258 bytes.
    #[inline(always)]
    fn fast_steps(&self, input: &[u8], out: &[u8]) -> usize {
        if !self.fast_ready(input, out) {
            return 0;
        }
        let input_steps = (input.len() - self.pos - FAST_IN_ROOM) / 14;
        let output_steps = (out.len() - self.written - FAST_OUT_ROOM) / 258;
        1 + input_steps.min(output_steps)
    }

    /// Decodes up to three literals or one match into `out`. `FAST`: the
    /// caller checked [`fast_ready`](Self::fast_ready) and `entry` holds
    /// the root entry for `bits`; otherwise input is refilled carefully
    /// and a write past `out` is [`InflateError::TooLarge`] (the caller grew
    /// `out` as far as the cap allows).
    #[inline(always)]
    fn step<const FAST: bool>(
        &mut self,
        input: &[u8],
        out: &mut [u8],
        litlen: &LitLenTable,
        dist: &DistTable,
    ) -> Res<Step> {
        self.refill::<FAST>(input)?;
        let mut e = if FAST {
            self.entry
        } else {
            litlen.root(self.bits)
        };
        e = litlen.resolve(e, self.bits);
        if e & LITERAL != 0 {
            // Up to three literals from one refill (3 × 15 bits ≤ 56),
            // leaving at least the 11 bits the next root lookup needs.
            for _ in 0..3 {
                self.consume(e & 0xff);
                if !FAST && self.written >= out.len() {
                    return Err(InflateError::TooLarge);
                }
                if FAST {
                    debug_assert!(self.written < out.len());
                    // SAFETY: the fast loop runs a step only with room for
                    // FAST_OUT_ROOM bytes past `written`.
                    unsafe { *out.as_mut_ptr().add(self.written) = (e >> 16) as u8 };
                } else {
                    out[self.written] = (e >> 16) as u8;
                }
                self.written += 1;
                e = litlen.root(self.bits);
                if e & LITERAL == 0 {
                    break;
                }
            }
            self.entry = e;
            return Ok(Step::Go);
        }
        self.consume(e & 0xff);
        if e & (END | INVALID) != 0 {
            if e & INVALID != 0 {
                return Err(InflateError::Corrupt(Corruption::LitLenCode));
            }
            return Ok(Step::BlockEnd);
        }
        let len = (e >> 16) as usize + self.peek_extra((e >> 8) & 0xf);
        self.consume((e >> 8) & 0xf);
        let d = dist.lookup(self.bits);
        if d & INVALID != 0 {
            return Err(InflateError::Corrupt(Corruption::DistanceCode));
        }
        self.consume(d & 0xff);
        let back = (d >> 16) as usize + self.peek_extra((d >> 8) & 0xf);
        self.consume((d >> 8) & 0xf);
        if back > self.written {
            return Err(InflateError::Corrupt(Corruption::DistanceTooFar));
        }
        let to = self.written;
        let from = to - back;
        if !FAST && to + len > out.len() {
            return Err(InflateError::TooLarge);
        }
        if FAST {
            // The next step's entry, from a second refill (the pair took
            // up to 48 of the bits).
            self.refill_fast(input);
            self.entry = litlen.root(self.bits);
        }
        if FAST && back >= 8 {
            // Eight bytes at a time, each from bytes already written; up
            // to 7 bytes past the match land in room.
            let mut i = 0;
            while i < len {
                debug_assert!(to + i + 8 <= out.len());
                // SAFETY: from < to and to + len + 7 < written +
                // FAST_OUT_ROOM, within `out`; back >= 8 so the 8 bytes
                // read were written before.
                unsafe {
                    let p = out.as_mut_ptr();
                    let w = p.add(from + i).cast::<u64>().read_unaligned();
                    p.add(to + i).cast::<u64>().write_unaligned(w);
                }
                i += 8;
            }
        } else if back == 1 {
            let b = out[from];
            out[to..to + len].fill(b);
        } else {
            let mut done = 0;
            while done < len {
                let k = (len - done).min(back);
                out.copy_within(from + done..from + done + k, to + done);
                done += k;
            }
        }
        self.written += len;
        Ok(Step::Go)
    }

    /// Enters the fast loop: a refill and the first root entry.
    #[inline(always)]
    fn enter_fast(&mut self, input: &[u8], litlen: &LitLenTable) {
        self.refill_fast(input);
        self.entry = litlen.root(self.bits);
    }
}

/// What one step met.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Step {
    Go,
    BlockEnd,
}

/// One stream being inflated: its input, bit reader, output and tables.
struct Stream<'a> {
    input: &'a [u8],
    r: Regs,
    out: &'a mut Vec<u8>,
    cap: usize,
    state: State,
    last_block: bool,
    error: Option<InflateError>,
    litlen: LitLenTable,
    dist: DistTable,
}

impl<'a> Stream<'a> {
    fn new(input: &'a [u8], out: &'a mut Vec<u8>, cap: usize) -> Self {
        // Tables of an earlier stream on this thread: every build writes
        // what it reads (see `Table::build`), so stale entries are fine.
        let (litlen, dist) = SPARE_TABLES
            .with(|t| t.borrow_mut().pop())
            .unwrap_or_else(|| (LitLenTable::new(), DistTable::new()));
        Self {
            input,
            r: Regs {
                pos: 0,
                bits: 0,
                nbits: 0,
                written: 0,
                entry: INVALID,
            },
            out,
            cap,
            state: State::Header,
            last_block: false,
            error: None,
            litlen,
            dist,
        }
    }

    fn finished(&self) -> bool {
        self.state == State::Done || self.error.is_some()
    }

    /// Inside a Huffman block with input and room for fast steps.
    fn fast_ready(&self) -> bool {
        self.state == State::Huffman
            && self.error.is_none()
            && self.r.fast_ready(self.input, self.out)
    }

    /// Whether the bits consumed so far all came from the input.
    fn check_overread(&self) -> Res<()> {
        let consumed = (self.r.pos * 8).saturating_sub(self.r.nbits as usize);
        if consumed > self.input.len() * 8 {
            return Err(InflateError::Corrupt(Corruption::Truncated));
        }
        Ok(())
    }

    /// Takes `n` (≤ 16) bits, refilling carefully first.
    fn take(&mut self, n: u32) -> Res<u32> {
        if self.r.nbits < n {
            self.r.refill_careful(self.input)?;
        }
        let v = self.r.peek_extra(n) as u32;
        self.r.consume(n);
        Ok(v)
    }

    /// Grows the output room to at least `need` bytes (never past the cap
    /// plus one), at least doubling.
    fn grow(&mut self, need: usize) -> Res<()> {
        if need <= self.out.len() {
            return Ok(());
        }
        let limit = self.cap.saturating_add(1);
        if need > limit {
            return Err(InflateError::TooLarge);
        }
        let size = need
            .max(self.out.len().saturating_mul(2))
            .max(32 << 10)
            .min(limit);
        self.out.reserve_exact(size - self.out.len());
        self.out.resize(size, 0);
        Ok(())
    }

    /// Reads a block header: stores a stored block's bytes, builds a
    /// Huffman block's tables.
    fn header(&mut self) -> Res<()> {
        self.last_block = self.take(1)? == 1;
        match self.take(2)? {
            0 => self.stored(),
            1 => {
                let mut lens = [0u8; 288 + 32];
                lens[..144].fill(8);
                lens[144..256].fill(9);
                lens[256..280].fill(7);
                lens[280..288].fill(8);
                lens[288..].fill(5);
                self.tables(&lens, 288)
            }
            2 => self.dynamic(),
            _ => Err(InflateError::Corrupt(Corruption::BlockType)),
        }
    }

    fn end_block(&mut self) {
        self.state = if self.last_block {
            State::Done
        } else {
            State::Header
        };
    }

    fn stored(&mut self) -> Res<()> {
        // To a byte boundary, then LEN and NLEN.
        self.r.consume(self.r.nbits % 8);
        let len = self.take(16)?;
        let nlen = self.take(16)?;
        if len != !nlen & 0xffff {
            return Err(InflateError::Corrupt(Corruption::StoredLength));
        }
        // Give back the whole bytes still buffered; the rest is copied.
        self.r.pos -= (self.r.nbits / 8) as usize;
        self.r.bits = 0;
        self.r.nbits = 0;
        let (len, pos, to) = (len as usize, self.r.pos, self.r.written);
        let end = pos.checked_add(len).filter(|&e| e <= self.input.len());
        let Some(end) = end else {
            return Err(InflateError::Corrupt(Corruption::Truncated));
        };
        self.grow(to + len)?;
        self.out[to..to + len].copy_from_slice(&self.input[pos..end]);
        self.r.written += len;
        self.r.pos = end;
        self.end_block();
        Ok(())
    }

    fn dynamic(&mut self) -> Res<()> {
        let nlit = self.take(5)? as usize + 257;
        let ndist = self.take(5)? as usize + 1;
        let ncode = self.take(4)? as usize + 4;
        if nlit > 286 || ndist > 30 {
            return Err(InflateError::Corrupt(Corruption::TooManySymbols));
        }
        let mut pre = [0u8; 19];
        for &i in &PRECODE_ORDER[..ncode] {
            pre[i] = self.take(3)? as u8;
        }
        let mut precode = PrecodeTable::new();
        precode.build(&pre, true, |sym, len| entry(sym as u32, 0, 0, len))?;
        // Literal/length lengths at 0.., distance lengths at 288.., the
        // form `tables` takes; decoded as one sequence (repeats may cross).
        let mut lens = [0u8; 288 + 32];
        let total = nlit + ndist;
        let slot = |i: usize| if i < nlit { i } else { 288 + i - nlit };
        let mut i = 0;
        while i < total {
            if self.r.nbits < 16 {
                self.r.refill_careful(self.input)?;
            }
            let e = precode.lookup(self.r.bits);
            if e & INVALID != 0 {
                return Err(InflateError::Corrupt(Corruption::CodeLengths));
            }
            self.r.consume(e & 0xff);
            let (value, repeat) = match e >> 16 {
                sym @ 0..=15 => (sym as u8, 1),
                16 if i == 0 => {
                    return Err(InflateError::Corrupt(Corruption::RepeatFirst));
                }
                16 => (lens[slot(i - 1)], 3 + self.take(2)? as usize),
                17 => (0, 3 + self.take(3)? as usize),
                _ => (0, 11 + self.take(7)? as usize),
            };
            if i + repeat > total {
                return Err(InflateError::Corrupt(Corruption::TooManyLengths));
            }
            for k in i..i + repeat {
                lens[slot(k)] = value;
            }
            i += repeat;
        }
        if lens[256] == 0 {
            return Err(InflateError::Corrupt(Corruption::NoEndCode));
        }
        self.tables(&lens, nlit)
    }

    /// Builds the literal/length (`lens[..nlit]`) and distance
    /// (`lens[288..]`) tables and enters the block.
    fn tables(&mut self, lens: &[u8; 288 + 32], nlit: usize) -> Res<()> {
        self.litlen.build(&lens[..nlit], false, litlen_entry)?;
        self.dist.build(&lens[288..], false, dist_entry)?;
        self.state = State::Huffman;
        Ok(())
    }

    /// Advances a stream the fast loop cannot: block headers, and careful
    /// steps until the fast loop may run again or the stream ends.
    /// Records an error.
    fn advance(&mut self) {
        let result = (|| {
            loop {
                match self.state {
                    State::Done => return self.check_overread(),
                    State::Header => self.header()?,
                    State::Huffman => {
                        // Room for a fast step, as far as the cap allows.
                        let want = self.r.written + FAST_OUT_ROOM;
                        self.grow(want.min(self.cap.saturating_add(1)))?;
                        if self.fast_ready() {
                            return Ok(());
                        }
                        let step =
                            self.r
                                .step::<false>(self.input, self.out, &self.litlen, &self.dist)?;
                        if step == Step::BlockEnd {
                            self.end_block();
                        }
                    }
                }
            }
        })();
        if let Err(e) = result {
            self.error = Some(e);
        }
    }

    /// Takes what a run of fast steps ended on.
    fn after_fast(&mut self, r: Regs, ended: Res<Step>) {
        self.r = r;
        match ended {
            Ok(Step::Go) => {}
            Ok(Step::BlockEnd) => self.end_block(),
            Err(e) => self.error = Some(e),
        }
    }

    fn result(self) -> Res<usize> {
        let result = match self.error {
            Some(e) => Err(e),
            None if self.r.written > self.cap => Err(InflateError::TooLarge),
            None => Ok(self.r.written),
        };
        SPARE_TABLES.with(|t| {
            let mut t = t.borrow_mut();
            if t.len() < 2 {
                t.push((self.litlen, self.dist));
            }
        });
        result
    }
}

thread_local! {
    /// Two streams' tables (~9 kB each) kept between calls on a thread.
    static SPARE_TABLES: std::cell::RefCell<Vec<(LitLenTable, DistTable)>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// Inflates one raw deflate stream into `out`, whose length is room to
/// write into (grown, zeroed, up to `cap + 1` bytes, when short), and
/// returns the inflated length. Bytes after the final block are ignored.
/// (Single blocks go to libdeflate, faster alone; this is the tests'
/// reference for [`inflate_two`].)
#[cfg(test)]
pub(crate) fn inflate_one(input: &[u8], out: &mut Vec<u8>, cap: usize) -> Res<usize> {
    let mut s = Stream::new(input, out, cap);
    run_one(&mut s);
    s.result()
}

fn run_one(s: &mut Stream<'_>) {
    while !s.finished() {
        if s.fast_ready() {
            let (input, out, mut r) = (s.input, &mut s.out[..], s.r);
            r.enter_fast(input, &s.litlen);
            let ended = 'run: loop {
                let n = r.fast_steps(input, out);
                if n == 0 {
                    break Ok(Step::Go);
                }
                for _ in 0..n {
                    match r.step::<true>(input, out, &s.litlen, &s.dist) {
                        Ok(Step::Go) => {}
                        other => break 'run other,
                    }
                }
            };
            s.after_fast(r, ended);
        }
        if !s.finished() {
            s.advance();
        }
    }
}

/// Inflates two independent raw deflate streams, stepping both in one
/// loop, as [`inflate_one`] would each.
pub(crate) fn inflate_two(
    a: (&[u8], &mut Vec<u8>),
    b: (&[u8], &mut Vec<u8>),
    cap: usize,
) -> (Res<usize>, Res<usize>) {
    let mut x = Stream::new(a.0, a.1, cap);
    let mut y = Stream::new(b.0, b.1, cap);
    while !x.finished() && !y.finished() {
        if x.fast_ready() && y.fast_ready() {
            let (ix, ox, mut rx) = (x.input, &mut x.out[..], x.r);
            let (iy, oy, mut ry) = (y.input, &mut y.out[..], y.r);
            rx.enter_fast(ix, &x.litlen);
            ry.enter_fast(iy, &y.litlen);
            // A stream's stop ends the run at once (the other one has
            // made the same number of steps or one fewer): one branch per
            // step, nothing to combine.
            let (mut ex, mut ey) = (Ok(Step::Go), Ok(Step::Go));
            'run: loop {
                let n = rx.fast_steps(ix, ox).min(ry.fast_steps(iy, oy));
                if n == 0 {
                    break;
                }
                for _ in 0..n {
                    let sx = rx.step::<true>(ix, ox, &x.litlen, &x.dist);
                    if sx != Ok(Step::Go) {
                        ex = sx;
                        break 'run;
                    }
                    let sy = ry.step::<true>(iy, oy, &y.litlen, &y.dist);
                    if sy != Ok(Step::Go) {
                        ey = sy;
                        break 'run;
                    }
                }
            }
            x.after_fast(rx, ex);
            y.after_fast(ry, ey);
        }
        if !x.fast_ready() && !x.finished() {
            x.advance();
        }
        if !y.fast_ready() && !y.finished() {
            y.advance();
        }
    }
    run_one(&mut x);
    run_one(&mut y);
    (x.result(), y.result())
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::Compression;
    use flate2::write::DeflateEncoder;
    use std::io::Write;

    fn deflate(data: &[u8], level: u32) -> Vec<u8> {
        let mut e = DeflateEncoder::new(Vec::new(), Compression::new(level));
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    /// Bytes from a xorshift: `text` mixes in repeats so matches occur.
    fn sample(seed: u64, len: usize, repeats: bool) -> Vec<u8> {
        let mut x = seed | 1;
        let mut out = Vec::with_capacity(len);
        while out.len() < len {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if repeats && x % 4 == 0 && out.len() > 300 {
                let dist = 1 + (x >> 8) as usize % out.len().min(300);
                let n = 3 + (x >> 20) as usize % 40;
                for _ in 0..n {
                    out.push(out[out.len() - dist]);
                }
            } else {
                out.push(if repeats {
                    b'a' + (x >> 33) as u8 % 8
                } else {
                    (x >> 33) as u8
                });
            }
        }
        out.truncate(len);
        out
    }

    #[test]
    fn inflates_what_flate2_deflates_one_and_two_at_a_time() {
        for (i, len) in [0usize, 1, 7, 300, 5000, 70_000, 300_000]
            .into_iter()
            .enumerate()
        {
            for level in [0, 1, 6, 9] {
                for repeats in [false, true] {
                    let a = sample(i as u64 * 7 + 1, len, repeats);
                    let b = sample(i as u64 * 7 + 2, len / 2 + 3, !repeats);
                    let (ca, cb) = (deflate(&a, level), deflate(&b, level));
                    let mut oa = Vec::new();
                    let n = inflate_one(&ca, &mut oa, usize::MAX).unwrap();
                    assert_eq!(&oa[..n], &a[..], "len {len} level {level}");
                    let (mut oa, mut ob) = (vec![0; 10], Vec::new());
                    let (ra, rb) = inflate_two((&ca, &mut oa), (&cb, &mut ob), usize::MAX);
                    assert_eq!(&oa[..ra.unwrap()], &a[..]);
                    assert_eq!(&ob[..rb.unwrap()], &b[..]);
                }
            }
        }
    }

    #[test]
    fn long_codes_use_subtables() {
        // Byte k about twice as rare as byte k - 1: code lengths up to
        // deflate's 15 bits, past both roots (literal/length 11, distance 8
        // for the distances of the repeats).
        let mut x = 3u64;
        let mut data = Vec::new();
        for i in 0..200_000usize {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let byte = (x | 1 << 40).trailing_zeros() as u8;
            data.push(byte);
            if i % 1000 == 999 {
                let back = 1 + (x >> 45) as usize % data.len().min(30_000);
                for _ in 0..5 {
                    data.push(data[data.len() - back]);
                }
            }
        }
        for level in [1, 6, 9] {
            let c = deflate(&data, level);
            let (mut a, mut b) = (Vec::new(), Vec::new());
            let (ra, rb) = inflate_two((&c, &mut a), (&c[..], &mut b), usize::MAX);
            assert_eq!(&a[..ra.unwrap()], &data[..]);
            assert_eq!(&b[..rb.unwrap()], &data[..]);
        }
        let mut t = LitLenTable::new();
        let mut lens = [0u8; 288];
        // Lengths 1..=15, one each: incomplete; one more of 15 completes it.
        for (i, l) in lens.iter_mut().enumerate().take(15) {
            *l = i as u8 + 1;
        }
        lens[256] = 0;
        t.build(&lens[..257], false, litlen_entry).unwrap_err();
        lens[256] = 15;
        t.build(&lens[..257], false, litlen_entry).unwrap();
        assert!(!t.sub.is_empty());
        // The 15-bit code of symbol 256, all ones reversed: 2^15 - 1.
        assert_eq!(t.lookup((1 << 15) - 1) & (END | 0xff), END | 15);
    }

    #[test]
    fn fixed_huffman_and_trailing_bytes() {
        // flate2 level 1 on short input uses fixed codes; extra bytes after
        // the final block are ignored (fastavro leaves 3).
        let data = b"hello hello hello hello, fixed codes";
        let mut c = deflate(data, 1);
        c.extend_from_slice(&[1, 2, 3]);
        let mut out = Vec::new();
        let n = inflate_one(&c, &mut out, usize::MAX).unwrap();
        assert_eq!(&out[..n], data);
    }

    #[test]
    fn truncation_and_garbage_are_errors_never_panics() {
        let data = sample(9, 40_000, true);
        let c = deflate(&data, 6);
        for cut in [0, 1, 2, 10, c.len() / 2, c.len() - 1] {
            let mut out = Vec::new();
            assert!(
                inflate_one(&c[..cut], &mut out, usize::MAX).is_err(),
                "cut {cut}"
            );
        }
        let mut x = 5u64;
        for _ in 0..2000 {
            let mut g = c.clone();
            for _ in 0..4 {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let i = (x >> 33) as usize % g.len();
                g[i] ^= 1 << (x % 8);
            }
            let mut out = Vec::new();
            let mut other = Vec::new();
            // Must end, without panicking; agree one and two at a time.
            let one = inflate_one(&g, &mut out, 1 << 20);
            let (two, _) = inflate_two((&g, &mut other), (&c, &mut Vec::new()), 1 << 20);
            assert_eq!(one.is_ok(), two.is_ok());
            if let (Ok(n), Ok(m)) = (one, two) {
                assert_eq!(out[..n], other[..m]);
            }
        }
    }

    #[test]
    fn the_cap_bounds_the_output() {
        let data = vec![0u8; 100_000];
        let c = deflate(&data, 9);
        let mut out = Vec::new();
        assert_eq!(
            inflate_one(&c, &mut out, 99_999),
            Err(InflateError::TooLarge)
        );
        assert!(out.len() <= 100_000);
        let mut out = Vec::new();
        assert_eq!(inflate_one(&c, &mut out, 100_000), Ok(100_000));
    }
}
