//! Writes the seed corpus of the `loader` fuzz target
//! (`grist_fuzz::loader::seeds`).
//!
//! ```sh
//! cd fuzz
//! cargo run --example seed_loader -- corpus/loader
//! ```
use std::path::PathBuf;

fn main() -> std::io::Result<()> {
    let out = PathBuf::from(std::env::args().nth(1).unwrap_or("corpus/loader".into()));
    std::fs::create_dir_all(&out)?;
    let seeds = grist_fuzz::loader::seeds();
    for (name, input) in &seeds {
        std::fs::write(out.join(name), input)?;
    }
    println!("{} seeds in {}", seeds.len(), out.display());
    Ok(())
}
