//! Generates the tf.Example protobuf types from this crate's `proto/`
//! (packaged with it) with prost-build, fed by protox so that no `protoc`
//! is needed.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("proto");
    let files = [
        proto_dir.join("example.proto"),
        proto_dir.join("feature.proto"),
    ];
    for f in &files {
        println!("cargo:rerun-if-changed={}", f.display());
    }
    let descriptors = protox::compile(&files, [&proto_dir])?;
    prost_build::Config::new()
        .bytes(["."])
        .btree_map(["."])
        .compile_fds(descriptors)?;
    Ok(())
}
