//! Writes the seed corpus of the `loader` fuzz target: valid files of 0,
//! 1, 5 and 23 records in each format (TFRecord also GZIP-compressed),
//! behind selector bytes that turn each of the configuration's choices on
//! and off.
//!
//! ```sh
//! cd fuzz
//! cargo run --example seed_loader -- corpus/loader
//! ```
use std::path::PathBuf;

use grist_fuzz::loader::{KINDS, Kind, valid_file};

fn main() -> std::io::Result<()> {
    let out = PathBuf::from(std::env::args().nth(1).unwrap_or("corpus/loader".into()));
    std::fs::create_dir_all(&out)?;
    let mut written = 0;
    for (f, &format) in KINDS.iter().enumerate() {
        for gzip in [false, true] {
            if gzip && format != Kind::Tfrecord {
                continue;
            }
            for records in [0, 1, 5, 23] {
                let file = valid_file(format, records, gzip);
                // The format, then each other bit of the first selector
                // alone and all together; batch and chunk sizes vary; two
                // files, interleaved or not, two ranks, and resumes after
                // 1 and 3 batches.
                let firsts = [0u8, 4, 8, 16, 32, 64, 128, 0xfc];
                let thirds = [0u8, 2, 6, 8, 0x10, 0x36, 0x1a];
                for (k, bits) in firsts.into_iter().enumerate() {
                    for (m, &third) in thirds.iter().enumerate() {
                        let a = f as u8 | bits;
                        let b = (k as u8).wrapping_mul(37).wrapping_add(m as u8 * 11);
                        let c = third | u8::from(gzip);
                        let mut input = vec![a, b, c];
                        input.extend(&file);
                        let name = format!("{f}-{}-{records}-{k}-{m}", u8::from(gzip));
                        std::fs::write(out.join(name), input)?;
                        written += 1;
                    }
                }
            }
        }
    }
    println!("{written} seeds in {}", out.display());
    Ok(())
}
