//! Generates the OFRecord protobuf types from this crate's
//! `proto/record.proto` (packaged with it) with prost-build, fed by protox
//! so that no `protoc` is needed.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("proto");
    let record = proto_dir.join("record.proto");
    println!("cargo:rerun-if-changed={}", record.display());
    let descriptors = protox::compile([&record], [&proto_dir])?;
    prost_build::Config::new()
        .bytes(["."])
        .btree_map(["."])
        .compile_fds(descriptors)?;
    Ok(())
}
