#![allow(missing_docs)]
pub mod proto { include!(concat!(env!("OUT_DIR"), "/tensorflow.rs")); }
