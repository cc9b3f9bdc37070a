//! Every prefix of every good corpus file: the blocks that end inside the
//! prefix, then a clean end (at a block boundary) or the right error,
//! never a panic.
//!
//! Files up to [`ALL_PREFIXES_UP_TO`] bytes get every prefix (the whole
//! corpus of today); larger ones every prefix within 64 bytes of the
//! header's end and of each block boundary, plus about 2,000 evenly spread
//! ones, to keep the test fast in debug builds.

use std::collections::BTreeSet;
use std::fs;

use grist_avro_tensor::{BlockReader, Decoded, Error, Header, ReaderOptions};
use grist_tensor::Limits;
use grist_testkit::corpus::{self, Case, expected_blocks};

const ALL_PREFIXES_UP_TO: usize = 64 << 10;

/// The prefix lengths to try for a file of `len` bytes whose header ends
/// at `header_len` and whose blocks end at `ends`.
fn prefixes(len: usize, header_len: usize, ends: &[usize]) -> Vec<usize> {
    if len <= ALL_PREFIXES_UP_TO {
        return (0..=len).collect();
    }
    let mut set = BTreeSet::new();
    for &mark in std::iter::once(&header_len).chain(ends) {
        for n in mark.saturating_sub(64)..=(mark + 64).min(len) {
            set.insert(n);
        }
    }
    let step = (len / 2000).max(1);
    set.extend((0..=len).step_by(step));
    set.into_iter().collect()
}

#[test]
fn every_prefix_of_every_good_file() {
    let options = ReaderOptions::default().with_buffer_size(64);
    for case in corpus::cases("avro").into_iter().filter(Case::is_ok) {
        for (path, container) in case.files.iter().zip(case.containers()) {
            let bytes = fs::read(path).unwrap();
            let blocks = expected_blocks(container);
            let header_len = blocks.first().map_or(bytes.len(), |b| b.offset as usize);
            let ends: Vec<usize> = blocks
                .iter()
                .map(|b| (b.offset + b.total_size) as usize)
                .collect();
            for n in prefixes(bytes.len(), header_len, &ends) {
                let prefix = &bytes[..n];
                let what = format!("{} cut at {n}", case.name);
                let mut reader = match BlockReader::new(prefix, "cut", options.clone()) {
                    Ok(reader) => {
                        assert!(n >= header_len, "{what}: header accepted early");
                        reader
                    }
                    Err(Error::BadMagic { found, .. }) => {
                        assert!(n < 4, "{what}: BadMagic {found:02x?}");
                        continue;
                    }
                    Err(Error::BadHeader { .. }) => {
                        assert!((4..header_len).contains(&n), "{what}: BadHeader");
                        continue;
                    }
                    Err(e) => panic!("{what}: {e}"),
                };
                // The sans-I/O parser agrees on where the header ends.
                assert!(matches!(
                    Header::parse(prefix, "cut", &Limits::default()),
                    Ok(Decoded::Complete { len, .. }) if len == header_len
                ));
                let whole = ends.iter().filter(|&&end| end <= n).count();
                for i in 0..whole {
                    let block = reader
                        .next_block()
                        .unwrap_or_else(|e| panic!("{what}: block {i}: {e}"))
                        .unwrap_or_else(|| panic!("{what}: block {i} missing"));
                    assert_eq!(block.index, i as u64);
                }
                let at_boundary = n == header_len || ends.contains(&n);
                match reader.next_block() {
                    Ok(None) => assert!(at_boundary, "{what}: clean end inside a block"),
                    Err(Error::TruncatedBlock { at, .. }) => {
                        assert!(!at_boundary, "{what}: truncated at a boundary");
                        assert_eq!(at.block.unwrap(), whole as u64, "{what}");
                    }
                    Ok(Some(b)) => panic!("{what}: block {} from a cut block", b.index),
                    Err(e) => panic!("{what}: {e}"),
                }
                assert!(matches!(reader.next_block(), Ok(None)));
            }
        }
    }
}
