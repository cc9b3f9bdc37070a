//! Fuzzes `grist_loader::Loader`, the pipeline users call: its own
//! chunkers over TFRecord, OFRecord and Avro files (reading a chunk at a
//! time into shared buffers, cutting frames and blocks), reads by number
//! (FFRecord, OFRecord with an index built on first read), memory maps,
//! the prefetch thread, parallel parse, and the shuffle buffer.
//!
//! Input: two selector bytes, then one file (`grist_fuzz::loader::Config`
//! says what each bit picks). The file is read by a plain reference
//! loader and by the configured one; `grist_fuzz::loader::check` says
//! what must agree. Nothing may panic (a loader thread's panic, reported
//! as `Error::ThreadPanicked`, counts), hang, or allocate beyond the
//! limits; after an error a loader yields nothing more.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // SAFETY: `check` maps only the file it writes into a folder of its
    // own, and nothing changes or truncates that file while it is mapped.
    #[allow(unsafe_code)]
    let mmap = unsafe { grist_tensor::Access::mmap() };
    grist_fuzz::loader::check(data, mmap);
});
