//! grist-loader: files of any grist format in, tensor batches out.
#![deny(missing_docs, unreachable_pub)]
#![forbid(unsafe_code)]
