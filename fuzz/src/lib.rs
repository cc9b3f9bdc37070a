//! Helpers shared by grist's fuzz targets and their seed tools.
#![forbid(unsafe_code)]

pub mod avro_decode;
pub mod avro_resolve;
pub mod loader;
pub mod tfrecord_example;
