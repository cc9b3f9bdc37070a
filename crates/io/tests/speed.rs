//! Streaming hides request latency: blocks are fetched concurrently.

use std::io::Read;
use std::time::{Duration, Instant};

use grist_io::Object;

use crate::support::{Remote, pattern};

fn stream(object: &Object, read_ahead: usize) -> Duration {
    let t = Instant::now();
    let mut n = 0;
    let mut reader = object.reader(0, read_ahead).unwrap();
    let mut buf = vec![0; 64 << 10];
    loop {
        match reader.read(&mut buf).unwrap() {
            0 => break,
            k => n += k,
        }
    }
    assert_eq!(n as u64, object.size());
    t.elapsed()
}

#[test]
fn a_stream_hides_request_latency() {
    let r = Remote::new(&[]);
    let block = 256 << 10;
    let storage = r.storage.clone().with_block_size(block);
    let addr = r.addr("stream.bin");
    // Uploaded through the server, which then keeps the object's ETag
    // instead of hashing the file for every request.
    let mut w = storage.create(&addr).unwrap();
    std::io::Write::write_all(&mut w, &pattern(4 << 20, 1)).unwrap();
    w.commit().unwrap();
    let object = storage.open(&addr).unwrap();
    let blocks = 16;

    let fast = stream(&object, 4 << 20);
    r.server.faults().set_latency(Duration::from_millis(20));
    let one_at_a_time = stream(&object, block);
    let concurrent = stream(&object, 4 << 20);
    eprintln!(
        "4 MiB in {blocks} blocks: {fast:?} without latency; with 20 ms per request: \
         {one_at_a_time:?} one block at a time, {concurrent:?} with 16 in flight"
    );
    // One block at a time pays the latency for every block.
    assert!(one_at_a_time >= Duration::from_millis(20 * blocks));
    // In flight together, the latency is paid about once.
    assert!(
        concurrent < one_at_a_time / 2,
        "{concurrent:?} vs {one_at_a_time:?}"
    );
    assert!(
        concurrent < fast + Duration::from_millis(20 * blocks / 2),
        "{concurrent:?} vs {fast:?}"
    );
}
