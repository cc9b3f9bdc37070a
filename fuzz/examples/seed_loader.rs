//! Writes the seed corpus of the `loader` fuzz target: valid files of 0,
//! 1, 5 and 23 records in each format, behind selector bytes that turn
//! each of the configuration's choices on and off.
//!
//! ```sh
//! cd fuzz
//! cargo run --example seed_loader -- corpus/loader
//! ```
use std::path::PathBuf;

use grist_fuzz::loader::{KINDS, valid_file};

fn main() -> std::io::Result<()> {
    let out = PathBuf::from(std::env::args().nth(1).unwrap_or("corpus/loader".into()));
    std::fs::create_dir_all(&out)?;
    let mut written = 0;
    for (f, &format) in KINDS.iter().enumerate() {
        for records in [0, 1, 5, 23] {
            let file = valid_file(format, records);
            // The format, then each other bit of the first selector alone
            // and all together; batch sizes and chunk sizes vary.
            for (k, bits) in [0u8, 4, 8, 16, 32, 64, 128, 0xfc].into_iter().enumerate() {
                let a = f as u8 | bits;
                let b = (k as u8).wrapping_mul(37);
                let mut input = vec![a, b];
                input.extend(&file);
                std::fs::write(out.join(format!("{f}-{records}-{k}")), input)?;
                written += 1;
            }
        }
    }
    println!("{written} seeds in {}", out.display());
    Ok(())
}
