//! Fuzzes Avro schema resolution: reader schemas evolved from the
//! `avro_decode` configurations' writer schemas (fields reordered,
//! dropped, added with and without defaults, renamed with aliases,
//! promoted, made nullable, narrowed from unions, retyped; enum symbols
//! added and removed; records renamed), then one block's datums read
//! through them by the generic reader and by the tensor decoder (the ATDS
//! path and the key-expression plan). See `grist_fuzz::avro_resolve` for
//! the input layout and the checks: nothing panics, both readers refuse
//! the same resolutions, errors name the file (and a record of the block
//! when decoding), and the writer's own schema, or one that only reorders
//! fields, decodes what no reader schema decodes.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &[u8]| {
    let [selector, count, s0, s1, s2, s3, s4, s5, s6, s7, data @ ..] = input else {
        return;
    };
    let seed = u64::from_le_bytes([*s0, *s1, *s2, *s3, *s4, *s5, *s6, *s7]);
    grist_fuzz::avro_resolve::check(*selector, *count, seed, data);
});
