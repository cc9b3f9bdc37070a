//! Writes the seed corpora of the `avro_container` and `avro_decode` fuzz
//! targets:
//!
//! - `avro_container`: every `.avro` file of the golden corpus directory
//!   (default `../../shared/corpus/avro`, damaged files included), and for
//!   each `avro_decode` configuration a file of valid records written by
//!   `ContainerWriter` with each codec (small blocks, so several);
//! - `avro_decode`: every block of every readable corpus file behind every
//!   configuration's selector, and for each configuration valid blocks of
//!   0, 1, 3 and 12 records for its schema and for its canonical schema
//!   (selector high bit), with split points 0, 1 and the middle;
//! - `avro_resolve`: for each configuration (and the key-expression one),
//!   valid blocks of 1 and 3 records behind the writer's own schema and
//!   four reader-schema seeds.
//!
//! ```sh
//! cd fuzz
//! cargo run --example seed_avro -- ../../shared/corpus/avro corpus
//! ```
use std::path::{Path, PathBuf};

use grist_avro_tensor::{
    AvroDecoder, BlockReader, Codec, ContainerWriter, ReaderOptions, WriterOptions,
};
use grist_fuzz::avro_decode::{configs, valid_block};

/// The decompressed blocks of a container file, with their record counts.
fn blocks_of(path: &Path) -> Vec<(u64, Vec<u8>)> {
    let mut out = Vec::new();
    let Ok(mut reader) = BlockReader::open(path, ReaderOptions::default()) else {
        return out;
    };
    while let Ok(Some(b)) = reader.next_block() {
        out.push((b.record_count, b.data.to_vec()));
    }
    out
}

/// The `avro_decode` count byte for `n` records (exact below 200).
fn count_byte(n: u64) -> u8 {
    u8::try_from(n).ok().filter(|&b| b < 200).unwrap_or(255)
}

fn main() -> std::io::Result<()> {
    let mut args = std::env::args_os().skip(1);
    let input = args
        .next()
        .map_or_else(|| PathBuf::from("../../shared/corpus/avro"), PathBuf::from);
    let output = args
        .next()
        .map_or_else(|| PathBuf::from("corpus"), PathBuf::from);
    let container = output.join("avro_container");
    let decode = output.join("avro_decode");
    std::fs::create_dir_all(&container)?;
    std::fs::create_dir_all(&decode)?;
    let configs = configs();
    let (mut n_container, mut n_decode) = (0, 0);

    let mut files: Vec<PathBuf> = std::fs::read_dir(&input)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "avro"))
        .collect();
    files.sort();
    for path in &files {
        let stem = path
            .file_stem()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        std::fs::copy(path, container.join(format!("corpus_{stem}")))?;
        n_container += 1;
        for (b, (count, data)) in blocks_of(path).into_iter().enumerate() {
            for s in 0..configs.len() {
                let seed = [&[s as u8, count_byte(count), 1][..], &data].concat();
                std::fs::write(decode.join(format!("corpus_{stem}_{b}_{s}")), seed)?;
                n_decode += 1;
            }
        }
    }

    for (s, config) in configs.iter().enumerate() {
        for (canonical, schema) in [(0u8, &config.schema), (0x80, &config.canonical)] {
            for (k, records) in [0usize, 1, 3, 12].into_iter().enumerate() {
                let data = valid_block(schema, &config.specs, records, (s * 100 + k) as u64);
                if data.is_empty() && records > 0 {
                    // Records of no bytes (the empty record `schema_for_specs`
                    // writes for no specs): the decoder counts every record
                    // as at least one byte, so that no count makes it loop.
                    continue;
                }
                // Valid means valid.
                let mut d = AvroDecoder::new(&config.specs).unwrap();
                d.add_schema("seed", schema).unwrap();
                let mut out = d.new_batch(records);
                d.decode_block(&"seed".into(), 0, 0, &data, records, 0..records, &mut out)
                    .unwrap_or_else(|e| panic!("{} ({canonical}): {e}", config.name));
                for split in [0, 1, records / 2] {
                    let seed = [
                        &[s as u8 | canonical, count_byte(records as u64), split as u8][..],
                        &data,
                    ]
                    .concat();
                    let name = format!("valid_{}_{canonical}_{records}_{split}", config.name);
                    std::fs::write(decode.join(name), seed)?;
                    n_decode += 1;
                }
            }
        }
        for codec in Codec::ALL {
            let options = WriterOptions::default()
                .with_codec(codec)
                .with_sync_interval(200)
                .with_sync_marker([s as u8; 16])
                .with_metadata("seed", config.name);
            let mut w = ContainerWriter::new(Vec::new(), &config.schema, options)
                .unwrap_or_else(|e| panic!("{}: {e}", config.name));
            for r in 0..8 {
                let datum = valid_block(&config.schema, &config.specs, 1, 1000 + r);
                w.append_datum(&datum).unwrap();
            }
            let (bytes, _) = w.finish_into_inner().unwrap();
            let name = format!("written_{}_{}", config.name, codec.name());
            std::fs::write(container.join(name), bytes)?;
            n_container += 1;
        }
    }
    // avro_resolve: valid blocks of every configuration (the key-expression
    // one too: one past the table) behind reader-schema seeds, and behind
    // the writer's own schema (selector high bit).
    let resolve = output.join("avro_resolve");
    std::fs::create_dir_all(&resolve)?;
    let mut n_resolve = 0;
    for s in 0..=configs.len() as u8 {
        let (schema, specs) = grist_fuzz::avro_resolve::config(s);
        for records in [1usize, 3] {
            let data = valid_block(schema, specs, records, u64::from(s) * 10 + records as u64);
            for (selector, seed) in [(s | 0x80, 0u64), (s, 1), (s, 2), (s, 3), (s, 4)] {
                let input = [
                    &[selector, count_byte(records as u64)][..],
                    &seed.to_le_bytes(),
                    &data,
                ]
                .concat();
                std::fs::write(
                    resolve.join(format!("valid_{s}_{records}_{selector}_{seed}")),
                    input,
                )?;
                n_resolve += 1;
            }
        }
    }
    eprintln!(
        "{n_container} avro_container seeds in {}, {n_decode} avro_decode seeds in {}, \
         {n_resolve} avro_resolve seeds in {}",
        container.display(),
        decode.display(),
        resolve.display()
    );
    Ok(())
}
