//! Writes grist-testkit's dataset of three Avro schema versions
//! (`v1.avro`, `v2.avro`, `v3.avro`) and its reader schema
//! (`reader.avsc`) into a folder, for checks against other readers
//! (`benches/peers/reader_schema_check.py`):
//! `grist-evolution-dataset DIR`.

use std::path::PathBuf;

use clap::Parser;
use grist_testkit::evolution::{READER_SCHEMA, write_dataset};

/// Writes the dataset into a folder (created if missing).
#[derive(Debug, Parser)]
struct Args {
    /// The folder to write into.
    dir: PathBuf,
}

fn main() -> std::io::Result<()> {
    let args = Args::parse();
    std::fs::create_dir_all(&args.dir)?;
    for path in write_dataset(&args.dir) {
        println!("{}", path.display());
    }
    std::fs::write(args.dir.join("reader.avsc"), READER_SCHEMA)?;
    Ok(())
}
